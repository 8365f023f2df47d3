"""Gradients where a naive formula divides by zero, as PyTorch gives them: cumprod with
zeros among its inputs (first and second derivatives), std of constant values, atan2 at
the origin and where its squares underflow."""

import numpy as np
import pytest
import torch

import fusegrad

CUMPROD_ROWS = [[2.0, 0.0, 3.0], [0.0, 2.0, 3.0], [2.0, 3.0, 0.0], [0.0, 0.0, 2.0],
                [1.0, 2.0, 3.0], [2.0, 0.0, 3.0, 0.0, 5.0], [0.0]]


@pytest.mark.parametrize("row", CUMPROD_ROWS)
def test_cumprod_gradient_with_zeros_as_torch(row):
    grads = []
    for lib in (fusegrad, torch):
        x = lib.tensor(row, dtype=lib.float64, requires_grad=True)
        weights = lib.arange(1.0, len(row) + 1, dtype=lib.float64)
        (x.cumprod(0) * weights).sum().backward()
        grads.append(x.grad.tolist())
    assert grads[0] == grads[1]


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumprod_second_derivative_with_zeros(dim):
    x = fusegrad.tensor([[1.0, 0.0, 2.0, 0.0], [3.0, 4.0, 0.0, 5.0], [0.0, 0.0, 1.0, 2.0]],
                        dtype=fusegrad.float64, requires_grad=True)
    assert fusegrad.autograd.gradcheck(lambda t: t.cumprod(dim), (x,))
    assert fusegrad.autograd.gradgradcheck(lambda t: t.cumprod(dim), (x,))


def test_cumprod_float32_batch_as_torch():
    x = np.random.default_rng(2).integers(-2, 3, (4, 6)).astype(np.float32)
    grads = []
    for lib in (fusegrad, torch):
        t = lib.from_numpy(x.copy()).requires_grad_()
        t.cumprod(1).sum().backward()
        grads.append(t.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)


STD_CASES = {
    "all equal": lambda L, x: x.std(),
    "a constant slice": lambda L, x: x[:2].std(),
    "per row": lambda L, x: x.view(2, 2).std(1).sum(),
    "no correction": lambda L, x: x.std(correction=0),
    "std_mean": lambda L, x: L.std_mean(x.view(2, 2), 1)[0].sum(),
}


@pytest.mark.parametrize("name", list(STD_CASES))
@pytest.mark.parametrize("values", [[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 2.0, 2.0]])
def test_std_of_constant_values_has_zero_gradient_as_torch(name, values):
    grads = []
    for lib in (fusegrad, torch):
        x = lib.tensor(values, requires_grad=True)
        STD_CASES[name](lib, x).backward()
        grads.append(x.grad.tolist())
    assert grads[0] == grads[1]


def test_std_gradient_still_double_differentiable():
    x = fusegrad.randn(3, 4, dtype=fusegrad.float64, requires_grad=True)
    assert fusegrad.autograd.gradgradcheck(lambda t: t.std(1), (x,))


def test_atan2_at_the_origin_as_torch():
    xs = [0.0, 0.0, 1e-30, -0.0, 1e-20, 1.0]
    ys = [0.0, -0.0, 1e-30, 0.0, 0.0, 1.0]
    got = []
    for lib in (fusegrad, torch):
        x, y = (lib.tensor(v, requires_grad=True) for v in (xs, ys))
        lib.atan2(x, y).backward(lib.full((6,), 2.0))
        got.append((x.grad.numpy(), y.grad.numpy()))
    for a, b in zip(*got):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(np.signbit(a), np.signbit(b))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64",
                                   "uint8", "bool"])
def test_sign_and_sgn_of_nan_and_signed_zero_as_torch(dtype):
    values = {"bool": [True, False], "uint8": [3, 0, 4], "int64": [-3, 0, 4]}.get(
        dtype, [float("nan"), -0.0, 0.0, 2.0, -1.0, float("inf")])
    got = []
    for lib in (fusegrad, torch):
        x = lib.tensor(values, dtype=getattr(lib, dtype))
        results = [lib.sign(x), lib.sgn(x)] if dtype != "bool" else [lib.sign(x)]
        got.append([(r.float().numpy().tolist(), np.signbit(r.float().numpy()).tolist())
                    for r in results])
    assert got[0] == got[1]


def test_digamma_at_signed_zeros_as_torch():
    for dtype in ("float32", "float64"):
        got = [lib.digamma(lib.tensor([-0.0, 0.0, -1.0], dtype=getattr(lib, dtype)))
               .tolist() for lib in (fusegrad, torch)]
        assert str(got[0]) == str(got[1]) == "[inf, -inf, nan]"
