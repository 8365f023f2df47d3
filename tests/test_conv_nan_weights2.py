"""Where a NaN or infinite weight puts NaN in a padded convolution's output: PyTorch's own
kernels and oneDNN's GEMM-based one multiply the padding's zeros by every weight (0 times
inf or NaN is NaN), oneDNN's direct kernels never read the padding. Which kernel runs
depends on the batch, the groups, the kernel, the padding and the output's width; the
masks of NaN and infinite outputs and the finite values must be PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad

# Which kernel oneDNN picks, and so where PyTorch's NaN lands, depends on the CPU's vector
# instructions; the rule fusegrad follows is the one PyTorch's kernels take with AVX-512.
pytestmark = pytest.mark.skipif(torch.backends.cpu.get_cpu_capability() != "AVX512",
                                reason="PyTorch's kernel choice here is AVX-512's")

CASES = [  # (input shape, weight shape, keywords, the bad weight's kernel offset)
    # a 1x1 image: one group takes a direct kernel for 3x3, the GEMM one for 5x5
    ((32, 4, 1, 1), (8, 1, 3, 3), {"padding": 1, "groups": 4}, 0),
    ((3, 8, 1, 1), (8, 8, 3, 3), {"padding": 1}, 0),
    ((3, 8, 1, 1), (8, 8, 5, 5), {"padding": 2}, 0),
    ((3, 8, 1, 1), (8, 8, 5, 5), {"padding": 3}, 0),     # three outputs: direct
    ((3, 8, 1, 1), (8, 1, 5, 5), {"padding": 2, "groups": 8}, 0),
    ((3, 8, 1, 1), (8, 1, 3, 3), {"padding": 1, "groups": 8}, 0),
    ((3, 8, 3, 3), (8, 8, 7, 7), {"padding": 2}, 0),     # more padding than outputs
    ((3, 8, 2, 5), (8, 8, 3, 3), {"padding": 3}, 1),     # padding as wide as the kernel
    # groups: per group channels both multiples of 4, or few inputs and 8k outputs
    ((3, 16, 3, 3), (16, 4, 3, 3), {"padding": 2, "groups": 4}, 0),
    ((3, 4, 5, 5), (32, 1, 3, 3), {"padding": 1, "groups": 4}, 0),
    ((3, 4, 5, 5), (16, 1, 3, 3), {"padding": 1, "groups": 4}, 0),
    ((3, 10, 5, 5), (8, 5, 3, 3), {"padding": 1, "groups": 2}, 0),
    ((3, 16, 3, 3), (8, 8, 3, 3), {"padding": 1, "groups": 2, "stride": 2}, 2),
    ((3, 8, 4, 4), (8, 8, 3, 3), {"padding": 2, "dilation": 2}, 0),
    # the direct convolutions (few channels, a large batch) read no padding either
    ((32, 16, 6, 6), (8, 16, 1, 1), {"padding": 1}, 0),
    ((32, 4, 6, 6), (8, 4, 3, 3), {"padding": 1}, 0),
    # 1-D convolutions run as 2-D ones of height 1
    ((3, 16, 1), (8, 16, 5), {"padding": 2}, 0),
    ((1, 4, 1), (8, 1, 3), {"padding": 1, "groups": 4}, 0),
    ((32, 16, 1), (8, 4, 3), {"padding": 1, "groups": 4}, 0),
    ((3, 16, 3), (8, 16, 5), {"padding": 4}, 2),
    ((3, 16, 12), (8, 16, 3), {"padding": 2, "stride": 2}, 0),
]


def _conv(lib, x, w, kw):
    f = lib.nn.functional.conv1d if x.ndim == 3 else lib.nn.functional.conv2d
    return f(lib.tensor(x), lib.tensor(w), **kw).numpy()


def _assert_same(got, want, tol):
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    np.testing.assert_allclose(np.nan_to_num(got), np.nan_to_num(want), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("xs, ws, kw, at", CASES)
def test_non_finite_weight_puts_nan_where_pytorch_does(xs, ws, kw, at, bad, dtype):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    w[(1, 0) + (at,) * (len(ws) - 2)] = bad
    want = _conv(torch, x, w, kw)
    _assert_same(_conv(fusegrad, x, w, kw), want, 1e-4 if dtype == np.float32 else 1e-10)


@pytest.mark.parametrize("xs, ws, kw, at", CASES[::4])
def test_gradients_with_a_non_finite_weight_match_torch(xs, ws, kw, at):
    """The input's and the weight's gradients (the weight's own NaN reaches neither through
    the padding in these shapes)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    w[(1, 0) + (at,) * (len(ws) - 2)] = np.nan
    grads = []
    for lib in (fusegrad, torch):
        xt, wt = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        f = lib.nn.functional.conv1d if x.ndim == 3 else lib.nn.functional.conv2d
        y = f(xt, wt, **kw)
        gy = np.linspace(-1.0, 1.0, y.numel(), dtype=np.float32).reshape(tuple(y.shape))
        y.backward(lib.tensor(gy))
        grads.append((xt.grad.numpy(), wt.grad.numpy()))
    for got, want in zip(*grads):
        _assert_same(got, want, 1e-4)
