"""A 2-D convolution's layout work in C (`ops/native/conv.c`: im2col and col2im, the
batch axis moved first or last): forward and backward match PyTorch with the C kernels
on and off, the C kernels give the NumPy path's bits where both compute the same sums, and
two threads give one thread's bits."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import fusegrad
from fusegrad import _cbuild
from fusegrad.ops import _conv_native, _native, _parallel, _sgemm
from fusegrad.ops import conv as conv_ops

needs_cc = pytest.mark.skipif(_cbuild.compiler() is None, reason="needs a C compiler")

CASES = [  # (input shape, weight shape, conv2d keywords)
    ((32, 8, 8, 8), (16, 8, 3, 3), {"padding": 1}),                     # batch last
    ((5, 6, 7, 9), (4, 6, 3, 2), {"padding": (1, 2), "stride": (2, 1)}),
    ((3, 4, 6, 6), (6, 2, 3, 3), {"padding": 2, "dilation": 2, "groups": 2}),
    ((7, 3, 5, 5), (4, 3, 1, 1), {"stride": 2}),
    ((4, 16, 1, 1), (8, 16, 3, 3), {"padding": 1}),                     # live taps only
    ((2, 3, 4, 4), (5, 3, 3, 3), {"padding": 1, "stride": 3, "dilation": 2}),
    ((1, 2, 9, 3), (3, 2, 5, 3), {"padding": (2, 1), "stride": (1, 3)}),
    ((6, 6, 10, 12), (8, 6, 4, 4), {"padding": 1}),                     # kernel >= 4 wide
    ((3, 2, 20, 18), (4, 2, 3, 3), {"padding": 1, "stride": 1}),        # large images
    ((2, 3, 12, 12), (5, 3, 5, 5), {"stride": 2}),
    ((4, 64, 6, 6), (64, 64, 3, 3), {"padding": 1}),                    # weight grad moved
    ((2, 3, 23, 23), (12, 3, 7, 7), {"padding": 3, "stride": 2}),      # pixels last
    ((2, 4, 16, 30), (10, 2, 3, 3), {"padding": (2, 0), "stride": (2, 1), "dilation": (1, 3),
                                     "groups": 2}),
]


def _step(lib, x, w, b, gy=None, **kw):
    xt = lib.tensor(x, requires_grad=True)
    wt = lib.tensor(w, requires_grad=True)
    bt = lib.tensor(b, requires_grad=True)
    y = lib.nn.functional.conv2d(xt, wt, bt, **kw)
    if gy is None:
        gy = np.linspace(-1.0, 1.0, int(np.prod(y.shape))).reshape(tuple(y.shape))
    y.backward(lib.tensor(gy.astype(x.dtype)))
    return [np.array(t.detach().numpy()) for t in (y, xt.grad, wt.grad, bt.grad)]


def _data(xs, ws, dt):
    rng = np.random.default_rng(0)
    return (rng.standard_normal(xs).astype(dt), rng.standard_normal(ws).astype(dt),
            rng.standard_normal(ws[0]).astype(dt))


@pytest.mark.parametrize("native", [True, False], ids=["C", "NumPy"])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("xs, ws, kw", CASES)
def test_conv2d_forward_and_backward_match_torch(xs, ws, kw, dt, native):
    x, w, b = _data(xs, ws, dt)
    with _native.native_kernels(native):
        got = _step(fusegrad, x, w, b, **kw)
    ref = _step(torch, x, w, b, **kw)
    tol = 1e-4 if dt == np.float32 else 1e-10
    for a, r in zip(got, ref):
        assert a.dtype == r.dtype
        np.testing.assert_allclose(a, r, rtol=tol, atol=tol * max(np.abs(r).max(), 1))


@needs_cc
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("xs, ws, kw", CASES)
def test_c_kernels_give_the_numpy_paths_bits(monkeypatch, xs, ws, kw, dt):
    """im2col and the batch moves are copies and the bias one add, and col2im sums each
    pixel's offsets in the NumPy path's order (below `TWO_STAGE_MIN_WIDTH`): the same
    bits with C on and off, except where the convolution runs direct (`_direct`) or a
    product runs in fusegrad's own GEMM kernel (`_sgemm`, C only), which sum in another
    order than OpenBLAS."""
    x, w, b = _data(xs, ws, dt)
    direct_runs = []
    forward = _conv_native.direct_forward
    monkeypatch.setattr(_conv_native, "direct_forward",
                        lambda *a: direct_runs.append(1) or forward(*a))
    product = _sgemm.product

    def own_product(*args):
        own = product(*args)
        if own is not None:
            direct_runs.append(1)
        return own

    monkeypatch.setattr(_sgemm, "product", own_product)
    with _native.native_kernels(True):
        on = _step(fusegrad, x, w, b, **kw)
    with _native.native_kernels(False):
        off = _step(fusegrad, x, w, b, **kw)
    two_stage = ws[3] >= conv_ops.TWO_STAGE_MIN_WIDTH
    direct = bool(direct_runs)
    for i, (a, r) in enumerate(zip(on, off)):
        if direct and i < 3:  # a direct convolution or own GEMM (C only): another order
            tol = 1e-5 if dt == np.float32 else 1e-12
            np.testing.assert_allclose(a, r, rtol=tol, atol=tol * np.abs(r).max())
        elif i == 1 and two_stage:  # a different order of the same sums
            tol = 1e-5 if dt == np.float32 else 1e-12
            np.testing.assert_allclose(a, r, rtol=tol, atol=tol * np.abs(r).max())
        else:
            np.testing.assert_array_equal(a, r)


@needs_cc
@pytest.mark.parametrize("xs, ws, kw", CASES)
def test_conv2d_in_c_with_two_threads_is_bit_identical_to_one(same_at_two_threads, xs, ws,
                                                               kw):
    x, w, b = _data(xs, ws, np.float32)
    same_at_two_threads(lambda: _step(fusegrad, x, w, b, **kw))


@needs_cc
def test_c_kernels_decline_what_they_do_not_cover():
    x = np.ones((2, 3, 4, 4), np.float16)
    assert _conv_native.im2col(x, (1, 1), (1, 1), (1, 1), 4, 4, ((0, 3), (0, 3))) is None
    g = np.ones((4, 2, 6), np.float32).transpose(1, 0, 2)  # not C-contiguous
    assert _conv_native.batch_last(g, "conv.test") is None
    with _native.native_kernels(False):
        assert _conv_native.batch_first(np.ones((2, 3, 4), np.float32), None) is None


@needs_cc
def test_negative_zero_passes_the_batch_moves_without_a_bias():
    """Without a bias nothing is added (an add of +0 would turn -0 into +0)."""
    t = np.full((3, 4, 5), -0.0, np.float32)
    out = _conv_native.batch_first(t, None)
    assert np.signbit(out).all() and out.shape == (5, 3, 4)
    back = _conv_native.batch_last(out, "conv.test")
    assert np.signbit(back).all() and back.shape == (3, 4, 5)


@needs_cc
@pytest.mark.parametrize("shape", [(576, 64), (130, 135), (7, 5000)])
def test_a_transpose_in_c_matches_numpys(shape):
    a = np.random.default_rng(0).standard_normal(shape)
    np.testing.assert_array_equal(_conv_native.transposed(a), a.T)
    assert _conv_native.transposed(a[:4, :4].copy()) is None  # small: NumPy's copy is faster


@pytest.mark.parametrize("native", [True, False], ids=["C", "NumPy"])
@pytest.mark.parametrize("xs, ws, kw", [
    ((0, 3, 8, 8), (4, 3, 3, 3), {"padding": 1}),                       # batch last
    ((0, 3, 20, 20), (4, 3, 3, 3), {"padding": 1}),                     # wide columns
    ((0, 3, 23, 23), (12, 3, 7, 7), {"padding": 3, "stride": 2}),       # pixels last
    ((0, 4, 1, 1), (8, 4, 3, 3), {"padding": 1}),                       # live taps only
])
def test_an_empty_batch_gives_torchs_empty_output_and_zero_gradients(xs, ws, kw, native):
    x, w, b = _data(xs, ws, np.float32)
    result: list = []

    def step():
        try:
            with _native.native_kernels(native):
                result.append(_step(fusegrad, x, w, b, **kw))
        except BaseException as e:  # (re-raised below, in the test's thread)
            result.append(e)

    # A new thread's first convolution: its C scratch is not made yet (a scratch of no bytes
    # must still be one, or the empty batch reads as a failed allocation).
    thread = threading.Thread(target=step)
    thread.start()
    thread.join()
    if isinstance(result[0], BaseException):
        raise result[0]
    got = result[0]
    for a, r in zip(got, _step(torch, x, w, b, **kw)):
        assert a.shape == r.shape
        np.testing.assert_array_equal(a, r)


@needs_cc
def test_a_scratch_that_cannot_be_had_raises_memory_error_and_writes_nothing():
    # Padded images of 2**40 values: no machine lends that, so the piece's scratch is refused,
    # the piece computes nothing, and the call (its own cell) reports it.
    fn = _native.typed("conv", "im2col_bl", np.dtype(np.float32), "ppp" + "i" * 18 + "p")
    x = np.zeros(4, np.float32)
    cols = np.full(8, 7.0, np.float32)
    side = 1 << 20
    args = (_native.address(x), _native.address(cols), None, 1, 1, side, side, 1, 1, 0, 0, 1, 1,
            1, 1, 0, 1, 0, 1)
    with pytest.raises(MemoryError, match="scratch"):
        _conv_native._by_channels(fn, args, 1, 8)
    assert (cols == 7.0).all()
    # the thread's next call gets a scratch again
    xs, ws, kw = CASES[0]
    x, w, b = _data(xs, ws, np.float32)
    ours, theirs = _step(fusegrad, x, w, b, **kw), _step(torch, x, w, b, **kw)
    for a, r in zip(ours, theirs):
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=1e-4)


@needs_cc
def test_kernels_run_by_the_workers_take_at_most_their_prototypes_arguments():
    limit = _native.function("workers", "fg_workers_max_args", "", "i")
    assert limit() == _native.MAX_WORKER_ARGS
    fn = _native.typed("conv", "im2col_bl", np.dtype(np.float32), "ppp" + "i" * 18 + "p")
    before = fusegrad.get_num_threads()
    fusegrad.set_num_threads(2)
    try:
        if _parallel.sharing_threads(1 << 30) < 2:
            pytest.skip("one CPU: the workers are not asked")
        with pytest.raises(ValueError, match="at most 32 arguments, not 33"):
            _native.run_pieces(fn, (0,) * 31, (), 2, 1 << 30)
    finally:
        fusegrad.set_num_threads(before)
