"""Layer norm in C (`ops/native/layer_norm.c`): forward, statistics and the three gradients
against PyTorch and against the NumPy paths (`native_kernels(False)`), the same bits at one
and at two threads, and the recorded formula kept for double backward."""

import numpy as np
import pytest
import torch

import fusegrad
from fusegrad import _cbuild
from fusegrad.ops import _native

pytestmark = pytest.mark.skipif(_cbuild.compiler() is None, reason="needs a C compiler")

RNG = np.random.default_rng(3)
# (input shape, normalized shape, weight, bias)
CASES = [((64, 768), (768,), True, True), ((2, 3, 4, 5), (4, 5), True, True),
         ((7, 33), (33,), False, True), ((5, 17), (17,), True, False),
         ((3, 6), (6,), False, False), ((9,), (9,), True, True)]


def _run(lib, x, shape, w, b, g):
    xt = lib.from_numpy(x.copy()).requires_grad_()
    wt = lib.from_numpy(w.copy()).requires_grad_() if w is not None else None
    bt = lib.from_numpy(b.copy()).requires_grad_() if b is not None else None
    out, mean, rstd = lib.ops.aten.native_layer_norm(xt, list(shape), wt, bt, 1e-5)
    out.backward(lib.from_numpy(g))
    grads = [t.grad.numpy() if t is not None else None for t in (xt, wt, bt)]
    return [out.detach().numpy(), mean.detach().numpy(), rstd.detach().numpy()] + grads


def _case(dtype, size, shape, with_w, with_b):
    x = (RNG.standard_normal(size) * 3 + 1).astype(dtype)
    w = RNG.standard_normal(shape).astype(dtype) if with_w else None
    b = RNG.standard_normal(shape).astype(dtype) if with_b else None
    g = RNG.standard_normal(size).astype(dtype)
    return x, w, b, g


def _close_all(got, want, dtype):
    """Each result against its twin (both None or both arrays of one shape and dtype)."""
    tol = 2e-5 if dtype == np.float32 else 1e-12
    for a, b in zip(got, want, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.shape == b.shape and a.dtype == b.dtype
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol * max(1, np.abs(b).max()))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size,shape,with_w,with_b", CASES)
def test_forward_statistics_and_gradients_as_torch(size, shape, with_w, with_b, dtype):
    x, w, b, g = _case(dtype, size, shape, with_w, with_b)
    _close_all(_run(fusegrad, x, shape, w, b, g), _run(torch, x, shape, w, b, g), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size,shape,with_w,with_b", CASES)
def test_c_and_numpy_paths_agree(size, shape, with_w, with_b, dtype):
    x, w, b, g = _case(dtype, size, shape, with_w, with_b)
    c = _run(fusegrad, x, shape, w, b, g)
    with _native.native_kernels(False):
        numpy = _run(fusegrad, x, shape, w, b, g)
    _close_all(c, numpy, dtype)


def test_same_bits_at_one_and_two_threads():
    x, w, b, g = _case(np.float32, (256, 1024), (1024,), True, True)
    before = fusegrad.get_num_threads()
    try:
        fusegrad.set_num_threads(1)
        one = _run(fusegrad, x, (1024,), w, b, g)
        fusegrad.set_num_threads(2)
        two = _run(fusegrad, x, (1024,), w, b, g)
    finally:
        fusegrad.set_num_threads(before)
    for a, c in zip(one, two):
        np.testing.assert_array_equal(a, c)


def test_layer_norm_module_layout_and_double_backward():
    base = RNG.standard_normal((2, 6, 8)).astype(np.float32)
    for lib in (fusegrad, torch):
        x = lib.from_numpy(base.copy()).transpose(1, 2)  # not contiguous
        out = lib.nn.functional.layer_norm(x, (6,))
        if lib is fusegrad:
            ours = out
    assert ours.stride() == out.stride()
    np.testing.assert_allclose(ours.numpy(), out.numpy(), rtol=1e-5, atol=1e-5)
    x = fusegrad.randn(3, 5, dtype=fusegrad.float64, requires_grad=True)
    w = fusegrad.randn(5, dtype=fusegrad.float64, requires_grad=True)
    assert fusegrad.autograd.gradgradcheck(
        lambda a, c: fusegrad.nn.functional.layer_norm(a, (5,), c), (x, w))
