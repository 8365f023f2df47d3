"""`div(..., rounding_mode=)` ('floor', 'trunc'), its in-place form and its errors, against
PyTorch (the registry walk checks `div.Tensor_mode`'s samples too)."""

import numpy as np
import pytest
import torch

import fusegrad

CASES = [
    "L.div(a, b, rounding_mode=m)", "a.div(-2, rounding_mode=m)",
    "L.div(a, 2.0, rounding_mode=m)", "L.divide(a, b, rounding_mode=m)",
    "L.div(L.tensor([5, -7, 7, -5]), L.tensor([2, 3, -2, -2]), rounding_mode=m)",
    "L.div(L.tensor([5, -7]), 2, rounding_mode=m)",
    "L.div(L.tensor([5.0, -7.0, 0.0]), L.tensor([0.0, 0.0, 0.0]), rounding_mode=m)",
    "L.div(L.tensor([5, -7]), L.tensor([0, 1]), rounding_mode=m)",
    "L.div(L.tensor([True]), L.tensor([True]), rounding_mode=m)",
    "L.div(a, b, rounding_mode='round')",
    "a.clone().div_(b, rounding_mode=m)",
]


def _outcome(lib, expr, mode):
    a = lib.tensor([5.0, -7.0, 3.5, -0.5, 0.0])
    b = lib.tensor([2.0, 2.0, -2.0, 1.0, -3.0])
    try:
        r = eval(expr, {"L": lib, "a": a, "b": b, "m": mode})
    except Exception as e:  # noqa: BLE001 (the error is what is compared)
        return type(e).__name__, str(e)
    values = r.numpy()
    return str(r.dtype).split(".")[-1], values.tolist(), np.signbit(values).tolist()


@pytest.mark.parametrize("mode", ["floor", "trunc"])
@pytest.mark.parametrize("expr", CASES)
def test_rounding_modes_as_pytorch(expr, mode):
    got, want = _outcome(fusegrad, expr, mode), _outcome(torch, expr, mode)
    assert repr(got) == repr(want)  # repr: NaN compares equal to NaN


@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_rounded_division_records_a_zero_gradient(mode):
    grads = []
    for lib in (torch, fusegrad):
        a = lib.tensor([5.0, -7.0], requires_grad=True)
        b = lib.tensor([2.0, 3.0], requires_grad=True)
        y = lib.div(a, b, rounding_mode=mode)
        (y * 3).sum().backward()
        grads.append((type(y.grad_fn).__name__, a.grad.tolist(), b.grad.tolist()))
    assert grads[1] == grads[0]
