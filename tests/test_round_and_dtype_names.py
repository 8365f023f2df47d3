"""`round` with `decimals` given (0 too) takes PyTorch's decimals overload (its node name), and
bfloat16's class prints as PyTorch's dtype class."""

from __future__ import annotations

import pytest

import fusegrad

torch = pytest.importorskip("torch")


def _round_nodes(lib):
    x = lib.tensor([0.5, -1.25, 2.0], requires_grad=True)
    return [lib.round(x).grad_fn.name(), lib.round(x, decimals=0).grad_fn.name(),
            lib.round(x, decimals=1).grad_fn.name(), x.round(decimals=0).grad_fn.name(),
            lib.round(x, decimals=0).tolist(), lib.round(x, decimals=1).tolist()]


def test_round_overloads_as_pytorch():
    assert _round_nodes(fusegrad) == _round_nodes(torch)


def test_dtype_classes_print_as_pytorch():
    for name in ("bfloat16", "float32", "int64"):
        ours, theirs = type(getattr(fusegrad, name)), type(getattr(torch, name))
        assert ours.__name__ == theirs.__name__ == "dtype"
        assert repr(ours).replace("fusegrad", "torch") == repr(theirs)
