"""Batch norm and ReLU with their C kernels (ops/native/norm.c, pointwise.c) and with the
NumPy paths (`native_kernels(False)`), against PyTorch: values, running statistics and
gradients; bit-identical results at one and two threads; ReLU's zeros, NaNs and infinities
bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from thread_support import run_shared

import fusegrad
from fusegrad import _cbuild
from fusegrad.ops import _native, normalization, unary

NATIVE = [pytest.param(True, id="native"), pytest.param(False, id="numpy")]
needs_cc = pytest.mark.skipif(_cbuild.compiler() is None, reason="needs a C compiler")


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.int32 if a.dtype == np.float32 else np.int64)


def _bn_step(lib, x, g, w, b, rm, rv, training):
    """Batch norm forward and backward in `lib`; the results as NumPy arrays: output,
    running mean and variance (after the update), gradients of input, weight and bias."""
    xt = lib.tensor(x, requires_grad=True)
    wt = None if w is None else lib.tensor(w, requires_grad=True)
    bt = None if b is None else lib.tensor(b, requires_grad=True)
    rmt = None if rm is None else lib.tensor(rm)
    rvt = None if rv is None else lib.tensor(rv)
    y = lib.nn.functional.batch_norm(xt, rmt, rvt, wt, bt, training=training, momentum=0.1,
                                     eps=1e-5)
    y.backward(lib.tensor(g))
    return [None if t is None else np.array(t.detach().numpy()) for t in
            (y, rmt, rvt, xt.grad, None if wt is None else wt.grad,
             None if bt is None else bt.grad)]


def _bn_case(shape, dtype, affine, stats, seed=0):
    rng = np.random.default_rng(seed)
    c = shape[1]
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(c).astype(dtype) if affine else None
    b = rng.standard_normal(c).astype(dtype) if affine else None
    rm = rng.standard_normal(c).astype(dtype) if stats else None
    rv = rng.uniform(0.5, 2.0, c).astype(dtype) if stats else None
    return x, g, w, b, rm, rv


@pytest.mark.parametrize("native", NATIVE)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("training, stats", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("shape", [(16, 5), (4, 3, 7), (2, 6, 5, 5), (3, 10, 37),
                                   (2, 3, 4, 20), (2, 2, 2, 3, 3), (20, 2100), (2, 40, 500),
                                   (4, 20, 24, 24)])
def test_batch_norm_matches_torch(native, dtype, affine, training, stats, shape):
    x, g, w, b, rm, rv = _bn_case(shape, dtype, affine, stats)
    with _native.native_kernels(native):
        ours = _bn_step(fusegrad, x, g, w, b, rm, rv, training)
    theirs = _bn_step(torch, x, g, w, b, rm, rv, training)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for a, r in zip(ours, theirs):
        assert (a is None) == (r is None)
        if r is not None:
            assert a.dtype == r.dtype and a.shape == r.shape
            np.testing.assert_allclose(a, r, rtol=tol, atol=tol * max(1.0, np.abs(r).max()))


@pytest.mark.parametrize("native", NATIVE)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batch_norm_eval_of_one_sample_matches_torch(native, dtype):
    x, g, w, b, rm, rv = _bn_case((1, 64, 24, 24), dtype, True, True, seed=1)
    with _native.native_kernels(native):
        ours = _bn_step(fusegrad, x, g, w, b, rm, rv, False)
    theirs = _bn_step(torch, x, g, w, b, rm, rv, False)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for a, r in zip(ours, theirs):
        np.testing.assert_allclose(a, r, rtol=tol, atol=tol * np.abs(r).max())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batch_norm_statistics_of_large_offset_values_stay_accurate(dtype):
    # Values far from zero relative to their spread: the variance sums the squared
    # distances from the mean, not the difference of two large sums.
    rng = np.random.default_rng(2)
    x = (1000 + rng.standard_normal((64, 4, 6, 6))).astype(dtype)
    x64 = x.astype(np.float64)
    var = x64.var(axis=(0, 2, 3))
    for native in (True, False):
        with _native.native_kernels(native):
            _, mean, invstd = normalization._bn_kernel(x, None, None, None, None, True, 0.1,
                                                       1e-5)
        np.testing.assert_allclose(invstd, 1 / np.sqrt(var + 1e-5), rtol=1e-4)
        np.testing.assert_allclose(mean, x64.mean(axis=(0, 2, 3)),
                                   rtol=3e-7 if dtype == np.float32 else 1e-12)


@needs_cc
def test_batch_norm_and_relu_of_large_float_inputs_call_the_c_kernels(monkeypatch):
    called = []
    function = _native.function

    def spy(family, name, args, result=None):
        fn = function(family, name, args, result)

        def counted(*values):  # each call of the C function, however it was looked up
            called.append(name)
            return fn(*values)

        return counted

    monkeypatch.setattr(_native, "function", spy)
    monkeypatch.setattr(_native, "_typed_functions", {})  # (looked up once, then kept)
    x, g, w, b, rm, rv = _bn_case((4, 20, 24, 24), np.float32, True, True)
    for training in (True, False):
        _bn_step(fusegrad, x, g, w, b, rm, rv, training)
    t = fusegrad.tensor(x, requires_grad=True)
    (t * 1).relu_().relu().backward(fusegrad.tensor(g))
    assert called == ["bn_forward_f32", "bn_backward_f32", "bn_affine_f32", "bn_backward_f32",
                      "relu_f32", "relu_f32", "relu_grad_f32", "relu_grad_f32"]


def _one_and_two_threads(step):
    """`step()` at one thread, then at two with a fresh pool that must be used; asserts the
    results are bit-identical."""
    fusegrad.set_num_threads(1)
    one = step()
    fusegrad.set_num_threads(2)
    two, shared = run_shared(step)
    assert shared  # on the pool or the C workers
    for a, b in zip(one, two):
        if a is not None:
            np.testing.assert_array_equal(_bits(a), _bits(b))
    return two


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", [(8, 300, 4, 5), (4, 40, 32, 32), (64, 3000), (30, 700, 3)])
def test_batch_norm_with_two_threads_is_bit_identical_to_one(shared, dtype, training, shape):
    # Shapes with several blocks of channels per call, long and short rows.
    x, g, w, b, rm, rv = _bn_case(shape, dtype, True, True, seed=3)
    two = _one_and_two_threads(lambda: _bn_step(fusegrad, x, g, w, b, rm, rv, training))
    theirs = _bn_step(torch, x, g, w, b, rm, rv, training)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for a, r in zip(two, theirs):
        np.testing.assert_allclose(a, r, rtol=tol, atol=tol * max(1.0, np.abs(r).max()))


@needs_cc
@pytest.mark.parametrize("sfx, dtype", [("f32", np.float32), ("f64", np.float64)])
@pytest.mark.parametrize("shape", [(5, 300, 21), (6, 2500, 1), (4, 150, 3)])
def test_norm_kernels_give_each_channel_the_same_bits_whatever_range_holds_it(sfx, dtype,
                                                                               shape):
    n, c, length = shape
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(shape) + 3).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    w, b = rng.standard_normal(c).astype(dtype), rng.standard_normal(c).astype(dtype)
    fwd = _native.function("norm", "bn_forward_" + sfx, "ppppppppiiiiiii")
    bwd = _native.function("norm", "bn_backward_" + sfx, "pppppppppiiiiiii")
    addr, bits = _native.address, _native.double_bits

    def run(cuts):
        out, mean, invstd = np.empty_like(x), np.empty(c, dtype), np.empty(c, dtype)
        rm, rv = np.zeros(c, dtype), np.ones(c, dtype)
        gi, gw, gb = np.empty_like(x), np.empty(c, dtype), np.empty(c, dtype)
        for i, j in zip(cuts[:-1], cuts[1:]):
            fwd(addr(x), addr(w), addr(b), addr(out), addr(mean), addr(invstd), addr(rm),
                addr(rv), bits(1e-5), bits(0.1), n, c, length, i, j)
        for i, j in zip(cuts[:-1], cuts[1:]):
            bwd(addr(g), addr(x), addr(mean), addr(invstd), None, addr(w), addr(gi), addr(gw),
                addr(gb), 1, bits(1e-5), n, c, length, i, j)
        return out, mean, invstd, rm, rv, gi, gw, gb

    whole = run([0, c])
    for cuts in ([0, 1, c], [0, 7, 129, 130, c - 1, c], [0, c // 3, c // 2, c]):
        for a, r in zip(run(cuts), whole):
            np.testing.assert_array_equal(_bits(a), _bits(r))
    x64 = x.astype(np.float64)
    tol = 1e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(whole[1], x64.mean(axis=(0, 2)), rtol=tol)
    np.testing.assert_allclose(whole[2], 1 / np.sqrt(x64.var(axis=(0, 2)) + 1e-5), rtol=tol)


# ---------------------------------------------------------------- relu


def _specials(dtype, n: int) -> np.ndarray:
    """`n` values with zeros of both signs, NaNs of both signs, infinities and numbers."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal(n).astype(dtype)
    special = np.array([0.0, -0.0, np.inf, -np.inf, 1.0, -1.0], dtype)
    a[::7] = special[np.arange(len(a[::7])) % len(special)]
    a[3::11] = np.nan
    a[5::13] = -np.array(np.nan, dtype)
    return a


SIZES = [5, 4099, unary.RELU_NATIVE_MIN + 3, 5 * unary.RELU_NATIVE_MIN]


@pytest.mark.parametrize("native", NATIVE)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", SIZES)
def test_relu_and_relu_inplace_match_torch_bit_for_bit(native, dtype, n):
    # -0.0 stays -0.0 (PyTorch's relu clamps below zero only), NaNs keep their bits.
    a = _specials(dtype, n)
    theirs = _bits(torch.relu(torch.from_numpy(a)).numpy())
    with _native.native_kernels(native):
        out = fusegrad.relu(fusegrad.tensor(a)).numpy()
        t = fusegrad.tensor(a.copy())
        data, version = t.numpy(), t._version
        assert t.relu_() is t
    np.testing.assert_array_equal(_bits(out), theirs)
    np.testing.assert_array_equal(_bits(t.numpy()), theirs)
    assert np.shares_memory(t.numpy(), data) and t._version == version + 1


@pytest.mark.parametrize("native", NATIVE)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", SIZES)
def test_relu_backward_matches_threshold_backward_bit_for_bit(native, dtype, n):
    # The gradient where the output is not <= 0 (NaN outputs pass it), +0 elsewhere: never
    # -0, and an infinite or NaN gradient at a zero output gives +0.
    a = _specials(dtype, n)
    g = np.random.default_rng(1).standard_normal(n).astype(dtype)
    g[1::5] = -np.abs(g[1::5])
    g[2::17] = np.inf
    g[4::19] = -np.nan
    g[6::23] = -0.0

    def step(lib, inplace):
        x = lib.tensor(a, requires_grad=True)
        y = x * 1
        out = y.relu_() if inplace else y.relu()
        out.backward(lib.tensor(g))
        return _bits(x.grad.numpy())

    want = step(torch, False)
    np.testing.assert_array_equal(want, _bits(torch.ops.aten.threshold_backward(
        torch.from_numpy(g), torch.relu(torch.from_numpy(a)), 0).numpy()))
    with _native.native_kernels(native):
        for inplace in (False, True):
            np.testing.assert_array_equal(step(fusegrad, inplace), want)


@pytest.mark.parametrize("native", NATIVE)
def test_relu_inplace_of_strided_and_overlapping_tensors_as_torch(native):
    n = unary.RELU_NATIVE_MIN
    a = np.random.default_rng(5).standard_normal((4, n)).astype(np.float32)
    with _native.native_kernels(native):
        t = fusegrad.tensor(a.copy())
        t[:, ::2].relu_()  # a strided view: written through, the rest untouched
        want = a.copy()
        want[:, ::2] = np.maximum(0, want[:, ::2])
        np.testing.assert_array_equal(t.numpy(), want)
        e = fusegrad.tensor(a[:1].copy()).expand(4, n)
        with pytest.raises(RuntimeError) as ours:
            e.relu_()
    with pytest.raises(RuntimeError) as theirs:
        torch.from_numpy(a[:1].copy()).expand(4, n).relu_()
    assert str(ours.value) == str(theirs.value)


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_with_two_threads_is_bit_identical_to_one(shared, dtype):
    a = _specials(dtype, 5 * (unary.RELU_NATIVE_MIN + 3)).reshape(5, -1)
    g = np.random.default_rng(6).standard_normal(a.shape).astype(dtype)

    def step():
        x = fusegrad.tensor(a, requires_grad=True)
        y = x * 1
        y.relu_()
        y.backward(fusegrad.tensor(g))
        return [y.detach().numpy().copy(), x.grad.numpy().copy()]

    two = _one_and_two_threads(step)
    np.testing.assert_array_equal(_bits(two[0]), _bits(torch.relu(torch.from_numpy(a)).numpy()))
