"""Complex values cast to a real dtype (`dtype=` of reductions and scans, `copy_`, item
assignment, `to`): the real part, as PyTorch's, with PyTorch's warning once per process and
never NumPy's ComplexWarning; and the errors PyTorch raises instead of casting."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fusegrad
from fusegrad import _warn

torch = pytest.importorskip("torch")

MESSAGE = "Casting complex values to real discards the imaginary part"

CASTS = {
    "sum": lambda lib, c: c.sum(dtype=lib.float32),
    "prod": lambda lib, c: c.prod(dtype=lib.float64),
    "mean": lambda lib, c: c.mean(dtype=lib.float32),
    "cumsum": lambda lib, c: c.cumsum(0, dtype=lib.float32),
    "cumprod": lambda lib, c: c.cumprod(0, dtype=lib.float64),
    "copy_": lambda lib, c: lib.zeros(3).copy_(c),
    "setitem": lambda lib, c: _assigned(lib.zeros(3), c),
    "to": lambda lib, c: c.to(lib.float64),
}


def _assigned(t, c):
    t[1] = c[1]
    return t


def _complex(lib):
    return lib.tensor([1 + 2j, 3 - 1j, -0.5 + 4j])


@pytest.mark.parametrize("case", sorted(CASTS))
def test_real_part_and_pytorch_warning(case):
    _warn._state.given.discard(MESSAGE)  # (once per process: PyTorch's own may be spent)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = CASTS[case](fusegrad, _complex(fusegrad))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = CASTS[case](torch, _complex(torch))
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "fusegrad.") or \
        str(ours.dtype).replace("fusegrad.", "torch.") == str(theirs.dtype)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)
    found = [(w.category, str(w.message)) for w in caught]
    assert found == [(UserWarning, MESSAGE)]
    with warnings.catch_warnings(record=True) as again:  # once per process, as PyTorch's
        warnings.simplefilter("always")
        CASTS[case](fusegrad, _complex(fusegrad))
    assert not again


@pytest.mark.parametrize("case", ["nansum", "nanmean", "tensor"])
def test_errors_as_pytorch(case):
    def program(lib):
        if case == "tensor":
            return lib.tensor([1 + 1j], dtype=lib.float32)
        return getattr(lib, case)(_complex(lib))

    def error(lib):
        try:
            program(lib)
        except Exception as e:  # (any type: the type is compared)
            return type(e).__name__, str(e)
        return None

    assert error(fusegrad) == error(torch) is not None
