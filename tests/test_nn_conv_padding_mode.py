"""Convolutions' `padding_mode` ('reflect', 'replicate', 'circular', 'zeros') against
PyTorch: values, gradients, graphs, and the errors for bad modes."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import fusegrad

CASES = [  # (class, input shape, kwargs)
    ("Conv1d", (2, 3, 9), dict(kernel_size=3, padding=2)),
    ("Conv2d", (2, 3, 6, 7), dict(kernel_size=(3, 2), padding=(1, 2), stride=2)),
    ("Conv2d", (1, 2, 6, 7), dict(kernel_size=(3, 4), padding="same", dilation=2)),
    ("Conv2d", (2, 3, 5, 5), dict(kernel_size=3, padding="valid")),
    ("Conv2d", (2, 4, 6, 6), dict(kernel_size=3, padding=1, groups=2, bias=False)),
]


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular", "zeros"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_padding_mode_matches_torch(mode, case):
    cls, shape, kw = CASES[case]
    ref = getattr(torch.nn, cls)(shape[1], 4, padding_mode=mode, **kw).double()
    mod = getattr(fusegrad.nn, cls)(shape[1], 4, padding_mode=mode, **kw).double()
    mod.load_state_dict({k: fusegrad.from_numpy(v.detach().numpy().copy())
                         for k, v in ref.state_dict().items()})
    assert repr(mod) == repr(ref)
    assert mod._reversed_padding_repeated_twice == ref._reversed_padding_repeated_twice
    x = np.random.default_rng(case).standard_normal(shape)
    xt = torch.tensor(x, requires_grad=True)
    xf = fusegrad.tensor(x, requires_grad=True)
    yt, yf = ref(xt), mod(xf)
    assert type(yf.grad_fn).__name__ == type(yt.grad_fn).__name__
    names = [type(f).__name__ for f, _ in yt.grad_fn.next_functions if f is not None]
    if mode in ("reflect", "replicate"):  # circular padding records a cat/slice chain
        assert [type(f).__name__ for f, _ in yf.grad_fn.next_functions
                if f is not None] == names
    np.testing.assert_allclose(yf.detach().numpy(), yt.detach().numpy(), rtol=1e-10)
    g = np.random.default_rng(9).standard_normal(tuple(yt.shape))
    yt.backward(torch.tensor(g))
    yf.backward(fusegrad.tensor(g))
    np.testing.assert_allclose(xf.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(mod.weight.grad.numpy(), ref.weight.grad.numpy(), rtol=1e-10)


def _set_sorted(message: str) -> str:
    """The message with the set it shows in sorted order: a set's repr follows string hashes
    and, for a set display compiled to a constant, the order its .pyc stored, so PyTorch's
    own order changes between processes."""
    return re.sub(r"\{([^}]*)\}", lambda m: "{" + ", ".join(sorted(m.group(1).split(", ")))
                  + "}", message)


@pytest.mark.parametrize("cls", ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d"])
@pytest.mark.parametrize("mode", ["foo", "Zeros", "reflect"])
def test_bad_padding_mode(cls, mode):
    try:
        getattr(torch.nn, cls)(2, 2, 3, padding_mode=mode)
    except ValueError as e:
        with pytest.raises(ValueError) as err:
            getattr(fusegrad.nn, cls)(2, 2, 3, padding_mode=mode)
        assert _set_sorted(str(err.value)) == _set_sorted(str(e))
    else:
        getattr(fusegrad.nn, cls)(2, 2, 3, padding_mode=mode)


def test_reflect_padding_too_large():
    ref = torch.nn.Conv2d(1, 1, 3, padding=1, padding_mode="reflect")
    mod = fusegrad.nn.Conv2d(1, 1, 3, padding=1, padding_mode="reflect")
    with pytest.raises(RuntimeError) as e:
        ref(torch.zeros(1, 1, 1, 1))
    with pytest.raises(RuntimeError) as err:
        mod(fusegrad.zeros(1, 1, 1, 1))
    assert str(err.value) == str(e.value)
