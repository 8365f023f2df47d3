"""`fusegrad.return_types` is a module, as `torch.return_types` is: its named tuples carry
PyTorch's names and fields, and results pickle and unpickle by reference."""

from __future__ import annotations

import importlib
import pickle

import numpy as np
import pytest
import torch

import fusegrad

X = np.array([[1.0, 5.0, 2.0], [3.0, 2.0, 4.0]], dtype=np.float32)

# Calls returning a named tuple, run on `torch` and on `fusegrad` alike.
CALLS = {
    "max": lambda T, x: T.max(x, 0),
    "min": lambda T, x: x.min(1),
    "sort": lambda T, x: T.sort(x, 1),
    "topk": lambda T, x: x.topk(2),
    "kthvalue": lambda T, x: T.kthvalue(x, 2, 1),
    "median": lambda T, x: x.median(0),
    "mode": lambda T, x: T.mode(x, 1),
    "cummax": lambda T, x: T.cummax(x, 1),
    "aminmax": lambda T, x: T.aminmax(x, dim=0),
    "frexp": lambda T, x: T.frexp(x),
    "histogram": lambda T, x: T.histogram(x, 3),
    "linalg_qr": lambda T, x: T.linalg.qr(x),
    "linalg_slogdet": lambda T, x: T.linalg.slogdet(x[:, :2]),
    "svd": lambda T, x: T.svd(x),
}


def _names(cls) -> tuple:
    # PyTorch's structseqs name their fields in `__match_args__`, as named tuples do.
    return cls.__match_args__


def test_is_an_importable_module_with_pytorchs_names():
    module = importlib.import_module("fusegrad.return_types")
    assert fusegrad.return_types is module
    theirs = {cls.__name__: _names(cls) for cls in torch.return_types.all_return_types}
    ours = {cls.__name__: _names(cls) for cls in module.all_return_types}
    assert ours == theirs
    for name, fields in theirs.items():
        cls = getattr(module, name)
        assert cls is getattr(module, name)  # made once
        assert cls.__module__ == "fusegrad.return_types"
        assert cls.__name__ == cls.__qualname__ == name
        assert cls._fields == fields and issubclass(cls, tuple)
    assert set(theirs) <= set(dir(module))
    with pytest.raises(AttributeError, match="has no attribute 'maximum'"):
        module.maximum  # noqa: B018


@pytest.mark.parametrize("name", sorted(CALLS))
def test_results_pickle_by_reference_as_pytorchs(name):
    expected = CALLS[name](torch, torch.from_numpy(X))
    got = CALLS[name](fusegrad, fusegrad.from_numpy(X))
    assert type(got).__module__ == type(expected).__module__.replace("torch", "fusegrad")
    assert type(got).__name__ == type(expected).__name__ == name
    assert type(got).__match_args__ == _names(type(expected))
    assert type(got) is getattr(fusegrad.return_types, name)
    for proto in (2, pickle.HIGHEST_PROTOCOL):
        again = pickle.loads(pickle.dumps(got, protocol=proto))
        theirs = pickle.loads(pickle.dumps(expected, protocol=proto))
        assert type(again) is type(got) and type(theirs) is type(expected)
        assert len(again) == len(theirs) == len(got)
        for a, g, b in zip(again, got, theirs):
            np.testing.assert_array_equal(a.numpy(), g.numpy())
            # Singular vectors are defined up to sign.
            a, b = (abs(a), abs(b)) if name == "svd" else (a, b)
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    # struct sequences, not named tuples: no `_fields`, `_asdict`... on a result
    for attr in ("_fields", "_asdict", "_replace", "n_fields", "n_sequence_fields"):
        assert hasattr(got, attr) == hasattr(expected, attr)
    assert got.n_fields == expected.n_fields
    assert repr(got).split("(")[0] == repr(expected).split("(")[0]
