"""Direct 2-D convolutions in C (`ops/native/conv_direct.c`, the samples as vector lanes):
forward and both gradients match PyTorch for strides, padding, dilation, rectangular kernels,
batches that are not a multiple of the lanes and kernel offsets that read only padding;
two threads give one thread's bits; and `_direct` chooses them for the layers it was
measured faster on."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest
import torch

import fusegrad
from fusegrad import _cbuild
from fusegrad.ops import _conv_native
from fusegrad.ops import conv as conv_ops

pytestmark = pytest.mark.skipif(_cbuild.compiler() is None, reason="needs a C compiler")

CASES = [  # (input shape, weight shape, conv2d keywords)
    ((64, 1, 32, 32), (6, 1, 5, 5), {}),                                # LeNet-5's first
    ((64, 6, 14, 14), (16, 6, 5, 5), {}),                               # and second
    ((32, 8, 8, 8), (16, 8, 3, 3), {"padding": 1}),
    ((20, 6, 7, 9), (5, 6, 3, 2), {"padding": (1, 2), "stride": (2, 1)}),
    ((3, 4, 9, 9), (7, 4, 3, 3), {"padding": 2, "stride": 2, "dilation": 2}),
    ((17, 3, 11, 10), (9, 3, 3, 2), {"padding": (1, 2), "stride": (2, 1),
                                     "dilation": (1, 2)}),
    ((16, 16, 1, 1), (8, 16, 3, 3), {"padding": 1}),                    # live taps only
    ((5, 3, 12, 12), (5, 3, 5, 5), {"stride": 3}),                      # rows never read
    ((33, 2, 6, 6), (4, 2, 1, 1), {}),
]


def _step(lib, x, w, b, input_grad=True, **kw):
    xt = lib.tensor(x, requires_grad=input_grad)
    wt = lib.tensor(w, requires_grad=True)
    bt = lib.tensor(b, requires_grad=True)
    y = lib.nn.functional.conv2d(xt, wt, bt, **kw)
    gy = np.linspace(-1.0, 1.0, int(np.prod(y.shape))).reshape(tuple(y.shape))
    y.backward(lib.tensor(gy.astype(x.dtype)))
    grads = (xt.grad if input_grad else None, wt.grad, bt.grad)
    return [np.array(t.detach().numpy()) for t in (y, *grads) if t is not None]


def _data(xs, ws, dt):
    rng = np.random.default_rng(0)
    return (rng.standard_normal(xs).astype(dt), rng.standard_normal(ws).astype(dt),
            rng.standard_normal(ws[0]).astype(dt))


@pytest.fixture
def direct(monkeypatch):
    """Every convolution without groups runs direct; the list counts the direct runs."""
    runs = []
    forward, backward = _conv_native.direct_forward, _conv_native.direct_backward
    monkeypatch.setattr(conv_ops, "_direct", lambda *sizes: sizes[-1] == 1)
    monkeypatch.setattr(_conv_native, "direct_forward",
                        lambda *a: runs.append("forward") or forward(*a))
    monkeypatch.setattr(_conv_native, "direct_backward",
                        lambda *a: runs.append("backward") or backward(*a))
    return runs


@pytest.mark.parametrize("input_grad", [True, False], ids=["input-grad", "first-layer"])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("xs, ws, kw", CASES)
def test_direct_convolution_matches_torch(direct, xs, ws, kw, dt, input_grad):
    x, w, b = _data(xs, ws, dt)
    got = _step(fusegrad, x, w, b, input_grad, **kw)
    # The oracle in float64: PyTorch's float32 bias gradient over LeNet-5's first layer is
    # itself off by 5e-4 (a sum of 50,000 values).
    ref = _step(torch, *(a.astype(np.float64) for a in (x, w, b)), input_grad, **kw)
    assert direct == ["forward", "backward"]
    tol = 1e-4 if dt == np.float32 else 1e-10
    for a, r in zip(got, ref, strict=True):
        assert a.dtype == dt and a.shape == r.shape
        np.testing.assert_allclose(a, r, rtol=tol, atol=tol * max(np.abs(r).max(), 1))


@pytest.mark.parametrize("xs, ws, kw", CASES)
def test_direct_convolution_with_two_threads_is_bit_identical_to_one(direct,
                                                                     same_at_two_threads, xs,
                                                                     ws, kw):
    x, w, b = _data(xs, ws, np.float32)
    same_at_two_threads(lambda: _step(fusegrad, x, w, b, **kw))


def test_direct_convolution_takes_any_strides_of_its_inputs(direct):
    """A transposed view as input and as output gradient is packed like a contiguous one."""
    x, w, b = _data((32, 8, 10, 10), (6, 8, 3, 3), np.float32)
    gy = np.random.default_rng(1).standard_normal((32, 6, 10, 10)).astype(np.float32)
    grads = []
    for lib in (fusegrad, torch):
        leaf = lib.tensor(np.ascontiguousarray(x.transpose(0, 1, 3, 2)), requires_grad=True)
        wt = lib.tensor(w, requires_grad=True)
        y = lib.nn.functional.conv2d(leaf.transpose(2, 3), wt, lib.tensor(b), padding=1)
        y.backward(lib.tensor(np.ascontiguousarray(gy.transpose(0, 1, 3, 2))).transpose(2, 3))
        grads.append([np.array(t.detach().numpy()) for t in (y, leaf.grad, wt.grad)])
    assert direct == ["forward", "backward"]
    for a, r in zip(*grads, strict=True):
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=1e-4 * np.abs(r).max())


@pytest.mark.parametrize("n, c, o, k, size, chosen", [
    (64, 1, 6, 5, 28, True),     # LeNet-5's first convolution
    (64, 6, 16, 5, 10, True),    # its second
    (32, 64, 64, 3, 8, True),    # ResNet-18's first stage on 32x32 images
    (32, 128, 128, 3, 4, False),  # more channels: the GEMMs are faster
    (32, 256, 256, 3, 2, False),
    (32, 8, 16, 3, 32, True),    # 32x32 images, few channels
    (32, 3, 64, 7, 16, True),    # ResNet-18's first convolution on 32x32 images
    (128, 1, 32, 3, 28, False),  # few products per output: moving the output costs more
    (32, 3, 64, 3, 64, False),   # large outputs
    (8, 6, 16, 5, 10, False),    # a batch too small for the lanes
    (20, 6, 16, 5, 10, False),   # 20 -> 32 lanes: too much padding
])
def test_direct_convolutions_are_chosen_where_measured_faster(n, c, o, k, size, chosen):
    assert conv_ops._direct(n, c, o, k, k, size, size, 1) is chosen
    assert not conv_ops._direct(n, c, o, k, k, size, size, 2)  # groups: GEMMs


@pytest.fixture
def workers_started():
    """The number of C workers started in this process so far."""
    from fusegrad.ops import _native

    return _native.workers_started


def test_direct_kernels_run_on_the_c_workers_at_two_threads(direct, workers_started):
    x, w, b = _data((64, 6, 14, 14), (16, 6, 5, 5), np.float32)
    fusegrad.set_num_threads(1)
    one = _step(fusegrad, x, w, b)
    fusegrad.set_num_threads(2)
    try:
        two = _step(fusegrad, x, w, b)
    finally:
        fusegrad.set_num_threads(1)
    assert workers_started() >= 1
    for a, r in zip(one, two, strict=True):
        np.testing.assert_array_equal(a, r)


def test_direct_kernels_from_two_python_threads_at_once(direct):
    """A job that finds the workers busy runs whole on its own thread: same results."""
    from concurrent.futures import ThreadPoolExecutor

    x, w, b = _data((32, 8, 10, 10), (6, 8, 3, 3), np.float32)
    fusegrad.set_num_threads(2)
    try:
        alone = _step(fusegrad, x, w, b, padding=1)
        with ThreadPoolExecutor(2) as ex:
            runs = list(ex.map(lambda _: _step(fusegrad, x, w, b, padding=1), range(8)))
    finally:
        fusegrad.set_num_threads(1)
    for got in runs:
        for a, r in zip(got, alone, strict=True):
            np.testing.assert_array_equal(a, r)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_runs_direct_kernels_at_two_threads(direct, workers_started):
    """The child of a process whose C workers have run (none of them exists in the child)
    computes the same results at two threads, and does not hang."""
    x, w, b = _data((32, 8, 10, 10), (6, 8, 3, 3), np.float32)
    fusegrad.set_num_threads(2)
    try:
        ref = _step(fusegrad, x, w, b, padding=1)
        assert workers_started() >= 1
        pid = os.fork()
        if pid == 0:  # the child: exit 0 only when the results are right
            ok = False
            try:
                got = _step(fusegrad, x, w, b, padding=1)
                ok = all(np.array_equal(a, r) for a, r in zip(got, ref, strict=True))
            finally:
                os._exit(0 if ok else 1)
        deadline = time.monotonic() + 60
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                pytest.fail("the forked child hung")
            time.sleep(0.01)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        fusegrad.set_num_threads(1)


def test_without_the_c_workers_the_intra_op_pool_shares_the_pieces(direct, monkeypatch,
                                                                   same_at_two_threads):
    from fusegrad.ops import _native

    function = _native.function
    monkeypatch.setattr(_native, "function", lambda family, *a: None if family == "workers"
                        else function(family, *a))
    x, w, b = _data((32, 8, 10, 10), (6, 8, 3, 3), np.float32)
    same_at_two_threads(lambda: _step(fusegrad, x, w, b, padding=1))
