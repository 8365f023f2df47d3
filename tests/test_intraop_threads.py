"""Intra-op threads: PyTorch's thread count, and convolutions that share their im2col,
col2im and layout copies between threads with results bit-identical to one thread."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from thread_support import run_shared

import fusegrad
from fusegrad.ops import _gemm, _native, _parallel

SRC = str(Path(fusegrad.__file__).resolve().parent.parent)


@pytest.mark.parametrize("omp", ["1", "2", "64", None])
def test_default_thread_count_follows_omp_num_threads_as_torch(omp):
    env = dict(os.environ, PYTHONPATH=SRC)
    env.pop("OMP_NUM_THREADS", None)
    if omp is not None:
        env["OMP_NUM_THREADS"] = omp
    code = ("import {0}; {0}.set_num_interop_threads(1); print({0}.get_num_threads())")
    got = [subprocess.run([sys.executable, "-c", code.format(lib)], env=env, check=True,
                          capture_output=True, text=True).stdout.strip()
           for lib in ("fusegrad", "torch")]
    assert got[0] == got[1]


# `threads` and `shared` are fixtures of tests/conftest.py.


def _one_and_two_threads(step):
    """`step(fusegrad)` at one thread, then at two with a fresh pool, which (or the C
    workers) must have been used; asserts the results are bit-identical and returns the
    two-thread ones."""
    fusegrad.set_num_threads(1)
    one = step(fusegrad)
    fusegrad.set_num_threads(2)
    two, shared = run_shared(lambda: step(fusegrad))
    assert shared  # the work was shared between threads
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)
    return two


def _conv_step(lib, x, w, b, **kw):
    xt = lib.tensor(x, requires_grad=True)
    wt = lib.tensor(w, requires_grad=True)
    bt = lib.tensor(b, requires_grad=True)
    y = lib.nn.functional.conv2d(xt, wt, bt, **kw)
    (y * y).sum().backward()
    return [np.array(t.detach().numpy()) for t in (y, xt.grad, wt.grad, bt.grad)]


@pytest.mark.parametrize("shape, kw", [
    ((32, 6, 14, 14), {}),                        # small images: batch-last columns
    ((64, 3, 12, 12), {"padding": 1, "stride": 2}),
    ((4, 5, 24, 24), {"padding": 2}),             # large images: per-sample GEMMs
    ((16, 64, 8, 8), {"padding": 2}),             # 16 KiB per sample: copies in runs
])
def test_conv_with_two_threads_is_bit_identical_to_one(shared, shape, kw):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((16, shape[1], 5, 5)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    two = _one_and_two_threads(lambda lib: _conv_step(lib, x, w, b, **kw))
    ref = _conv_step(torch, x, w, b, **kw)
    for a, r in zip(two, ref):  # float32 sums of thousands of terms: scale the tolerance
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=1e-5 * np.abs(r).max())


def test_for_chunks_covers_every_index_once_and_reraises(shared):
    fusegrad.set_num_threads(3)
    seen = np.zeros(10, dtype=np.int64)

    def mark(a, b):
        seen[a:b] += 1

    _parallel.for_chunks(mark, 10, 10 * _parallel.MIN_CHUNK)
    assert seen.tolist() == [1] * 10

    def fail(a, b):
        if a:
            raise ValueError("chunk failed")

    with pytest.raises(ValueError, match="chunk failed"):
        _parallel.for_chunks(fail, 10, 10 * _parallel.MIN_CHUNK)


def test_for_chunks_does_not_wait_for_a_busy_pool_thread(shared):
    """A pool thread that is busy (or not scheduled) leaves its pieces to the caller: the
    call finishes on the calling thread alone, with every index covered once."""
    import threading

    fusegrad.set_num_threads(2)
    _parallel._forget_pool()  # one pool thread, occupied below
    release, entered = threading.Event(), threading.Semaphore(0)

    def hold(a, b):
        entered.release()
        release.wait(30)

    holder = threading.Thread(target=_parallel.for_chunks,
                              args=(hold, 2, 2 * _parallel.MIN_CHUNK))
    holder.start()
    try:
        # Both pieces running: the holder's thread has one, the pool thread the other.
        assert entered.acquire(timeout=30) and entered.acquire(timeout=30)
        seen = np.zeros(8, dtype=np.int64)

        def mark(a, b):
            seen[a:b] += 1

        caller = threading.Thread(target=_parallel.for_chunks,
                                  args=(mark, 8, 8 * _parallel.MIN_CHUNK))
        caller.start()
        caller.join(10)
        assert not caller.is_alive()
        assert seen.tolist() == [1] * 8
    finally:
        release.set()
        holder.join(30)


@pytest.mark.parametrize("shape", [(32, 64, 8, 8), (20, 16, 8, 8), (3, 1024), (9, 2, 512)])
def test_copyto_moving_the_first_axis_last_is_exact(threads, shape):
    """Sources that step by 4 KiB along the copied axis are copied in runs: same values."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(np.float32)
    order = tuple(range(1, len(shape))) + (0,)
    for n in (1, 2):
        fusegrad.set_num_threads(n)
        dst = np.empty(x.transpose(order).shape, np.float32)
        _parallel.copyto(dst, x.transpose(order))
        np.testing.assert_array_equal(dst, np.transpose(x, order))


@pytest.mark.parametrize("kw", [{"kernel_size": 2}, {"kernel_size": 3, "stride": 2,
                                                     "padding": 1}])
def test_max_pool_with_two_threads_is_bit_identical_to_one(shared, kw):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((32, 6, 28, 28)).astype(np.float32)
    x[0, 0, 0, :4] = np.nan  # NaN wins, as in PyTorch's kernel

    def step(lib):
        xt = lib.tensor(x, requires_grad=True)
        y, idx = lib.nn.functional.max_pool2d(xt, return_indices=True, **kw)
        (y * y).nansum().backward()
        return [np.array(t.detach().numpy()) for t in (y, idx, xt.grad)]

    two = _one_and_two_threads(step)
    for a, r in zip(two, step(torch)):
        np.testing.assert_allclose(a, r, rtol=1e-6)


@pytest.mark.parametrize("shape", [(32, 64, 16, 16), (8, 128, 6, 6), (256, 512)])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_with_two_threads_is_bit_identical_to_one(shared, shape, training):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    c = shape[1]
    w, b = rng.standard_normal(c).astype(np.float32), rng.standard_normal(c).astype(np.float32)

    def step(lib):
        xt = lib.tensor(x, requires_grad=True)
        wt, bt = lib.tensor(w, requires_grad=True), lib.tensor(b, requires_grad=True)
        rm, rv = lib.zeros(c), lib.ones(c)
        y = lib.nn.functional.batch_norm(xt, rm, rv, wt, bt, training=training)
        y.backward(lib.tensor(g))
        return [np.array(t.detach().numpy()) for t in (y, xt.grad, wt.grad, bt.grad, rm, rv)]

    two = _one_and_two_threads(step)
    for a, r in zip(two, step(torch)):
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=1e-4 * np.abs(r).max())


_LINEAR = """
import sys
import numpy as np
import fusegrad
rows, inner, cols = (int(v) for v in sys.argv[1:4])
rng = np.random.default_rng(0)
x = fusegrad.tensor(rng.standard_normal((rows, inner)).astype(np.float32), requires_grad=True)
w = fusegrad.tensor(rng.standard_normal((cols, inner)).astype(np.float32), requires_grad=True)
y = fusegrad.nn.functional.linear(x, w)
(y * y).sum().backward()
np.savez(sys.argv[4], y=y.detach().numpy(), gx=x.grad.numpy(), gw=w.grad.numpy())
"""


@pytest.mark.parametrize("rows, inner, cols", [(256, 784, 1024), (64, 400, 120), (8, 2048, 64)])
def test_gemm_results_do_not_depend_on_omp_num_threads(tmp_path, rows, inner, cols):
    """A linear layer's output and gradients have the same bits in a process started with
    one thread and one started with two: GEMMs run on the intra-op pool in pieces cut by
    shape alone, never on OpenBLAS's own threads (whose sums depend on their count)."""
    got = []
    for omp in ("1", "2"):
        env = dict(os.environ, PYTHONPATH=SRC, OMP_NUM_THREADS=omp)
        env.pop("OPENBLAS_NUM_THREADS", None)
        out = tmp_path / f"omp{omp}.npz"
        subprocess.run([sys.executable, "-c", _LINEAR, str(rows), str(inner), str(cols),
                        str(out)], env=env, check=True)
        got.append(np.load(out))
    for key in ("y", "gx", "gw"):
        np.testing.assert_array_equal(got[0][key], got[1][key], err_msg=key)
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((rows, inner)).astype(np.float32), requires_grad=True)
    w = torch.tensor(rng.standard_normal((cols, inner)).astype(np.float32), requires_grad=True)
    y = torch.nn.functional.linear(x, w)
    (y * y).sum().backward()
    for key, r in (("y", y), ("gx", x.grad), ("gw", w.grad)):
        r = r.detach().numpy()
        np.testing.assert_allclose(got[1][key], r, rtol=1e-4, atol=1e-5 * np.abs(r).max())

def test_gemm_pieces_depend_on_shapes_only(threads):
    from fusegrad.ops import _blas

    cut = [_gemm.cut(1, 256, 1024, 784)]
    fusegrad.set_num_threads(2)
    cut.append(_gemm.cut(1, 256, 1024, 784))
    pieces = _gemm.MAX_GEMM_PIECES
    assert cut[0] == cut[1] == ((2, pieces) if pieces > 1 else (0, 1))  # columns: smaller repack
    assert _gemm.cut(1, 64, 120, 400) == (0, 1)     # too small to cut
    if _blas.available():  # OpenBLAS is back at its own count after each GEMM
        before = _blas.get_threads()
        _gemm.matmul(np.ones((512, 512), np.float32), np.ones((512, 512), np.float32))
        assert _blas.get_threads() == before


def test_sgd_momentum_with_two_threads_is_bit_identical_to_one_and_matches_torch(threads):
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((512, 256)).astype(np.float32)
    grads = [rng.standard_normal(w0.shape).astype(np.float32) for _ in range(3)]
    results = []
    for lib, n in ((fusegrad, 1), (fusegrad, 2), (torch, 1)):
        if lib is fusegrad:
            fusegrad.set_num_threads(n)
        p = lib.nn.Parameter(lib.tensor(w0.copy()))
        opt = lib.optim.SGD([p], lr=0.01, momentum=0.9)
        for g in grads:
            p.grad = lib.tensor(g.copy())
            opt.step()
        results.append(np.array(p.detach().numpy()))
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_allclose(results[1], results[2], rtol=1e-6, atol=1e-7)


def test_sgd_momentum_of_a_large_parameter_in_cache_blocks_matches_the_plain_update(threads):
    """A parameter of several update blocks: the blocked NumPy momentum update (at one and
    two threads; the C update is tested in test_native_optim) gives the bits of the plain
    whole-array formula, and PyTorch's values."""
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal((1300, 700)).astype(np.float32)  # 3.5 blocks of 2**18
    grads = [rng.standard_normal(w0.shape).astype(np.float32) for _ in range(3)]
    p_ref, buf = w0.copy(), None
    for g in grads:  # PyTorch's rule, one NumPy pass per operation
        if buf is None:
            buf = g.copy()
        else:
            buf *= np.float32(0.9)
            buf += g
        p_ref -= buf * np.float32(0.01)
    results = []
    for lib, n in ((fusegrad, 1), (fusegrad, 2), (torch, 1)):
        if lib is fusegrad:
            fusegrad.set_num_threads(n)
        p = lib.nn.Parameter(lib.tensor(w0.copy()))
        opt = lib.optim.SGD([p], lr=0.01, momentum=0.9)
        with _native.native_kernels(False):
            for g in grads:
                p.grad = lib.tensor(g.copy())
                opt.step()
        results.append(np.array(p.detach().numpy()))
    np.testing.assert_array_equal(results[0], p_ref)
    np.testing.assert_array_equal(results[1], p_ref)
    np.testing.assert_allclose(results[2], p_ref, rtol=1e-6, atol=1e-7)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86 kernel names")
def test_openblas_core_name_follows_openblas_coretype():
    """The kernels NumPy's OpenBLAS runs, as the benchmarks report them: the ones
    OPENBLAS_CORETYPE names when it is set before NumPy loads."""
    from fusegrad.ops import _blas

    if not _blas.available() or _blas.core_name() is None:
        pytest.skip("NumPy's BLAS is not an OpenBLAS that names its kernels")
    env = dict(os.environ, PYTHONPATH=SRC, OPENBLAS_CORETYPE="Sandybridge")
    code = "from fusegrad.ops import _blas; print(_blas.core_name())"
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True).stdout.strip()
    assert out.lower() == "sandybridge"


@pytest.mark.parametrize("ufunc, scalar", [(np.maximum, 0.0), (np.add, None),
                                           (np.multiply, 2.5)])
def test_elementwise_with_two_threads_is_bit_identical_to_the_plain_ufunc(shared, ufunc,
                                                                          scalar):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 6, 28, 28)).astype(np.float32)
    b = np.float32(scalar) if scalar is not None else rng.standard_normal(a.shape).astype(
        np.float32)
    fusegrad.set_num_threads(2)
    _parallel._forget_pool()
    got = _parallel.elementwise(ufunc, np.empty_like(a), a, b)
    assert _parallel._state.pool is not None
    np.testing.assert_array_equal(got, ufunc(a, b))


def test_relu_with_two_threads_is_bit_identical_to_one(shared):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((64, 6, 28, 28)).astype(np.float32)
    x[0, 0, 0, :3] = (np.nan, 0.0, -0.0)
    g = rng.standard_normal(x.shape).astype(np.float32)

    def step(lib):
        xt = lib.tensor(x, requires_grad=True)
        y = lib.relu(xt)
        y.backward(lib.tensor(g))
        return [np.array(t.detach().numpy()) for t in (y, xt.grad)]

    two = _one_and_two_threads(step)
    for a, r in zip(two, step(torch)):
        np.testing.assert_array_equal(a[~np.isnan(a)], r[~np.isnan(r)])


def test_leaf_gradients_with_two_threads_are_bit_identical_to_one(shared):
    # The first gradient of a large leaf is copied into .grad, later ones added, both
    # shared between threads.
    rng = np.random.default_rng(5)
    w0 = rng.standard_normal((256, 300)).astype(np.float32)
    x = rng.standard_normal((64, 300)).astype(np.float32)

    def grads(lib):
        w = lib.tensor(w0, requires_grad=True)
        for _ in range(3):
            (lib.tensor(x) @ w.t()).tanh().sum().backward()
        return w.grad.numpy().copy()

    (two,) = _one_and_two_threads(lambda lib: [grads(lib)])
    np.testing.assert_allclose(two, grads(torch), rtol=1e-5, atol=1e-4)


def test_work_that_runs_slower_shared_runs_whole_and_is_probed_again(threads, monkeypatch):
    # Sharing is kept only where it measured faster than running whole: a piece that makes
    # many small NumPy calls passes the GIL back and forth and runs slower on two threads.
    monkeypatch.setattr(_parallel, "MIN_PIECE_NS", 1)
    monkeypatch.setattr(_parallel, "_costs", {})
    fusegrad.set_num_threads(2)
    calls = []

    def fn(i, j):
        calls.append((i, j))
        time.sleep(0.002 if (i, j) != (0, 64) else 0.001)  # a piece: slower than the whole

    ways = []
    for _ in range(2 * _parallel.PROBE_EVERY):
        calls.clear()
        _parallel.share_by_cost(fn, 64, 1 << 20, "sleepy")
        ways.append("whole" if calls == [(0, 64)] else "shared")
    assert ways[:2] == ["shared", "whole"]  # each way timed once
    # Then whole, the other way probed again once every PROBE_EVERY calls.
    assert [i for i, w in enumerate(ways) if w == "shared"] == [0, _parallel.PROBE_EVERY]
    _, whole, shared, _ = _parallel._costs["sleepy"]
    assert whole < shared



def test_concurrent_tasks_run_side_by_side_whole_and_reraise(shared):
    """`concurrently` runs independent tasks each on a thread of its own, returns their
    results in order, shares no work inside them meanwhile, and re-raises a task's error."""
    import threading

    fusegrad.set_num_threads(3)  # a pool thread left over, which a task must not use
    _parallel._forget_pool()
    met = threading.Barrier(2, timeout=30)  # both tasks must be running at once
    pieces = {}

    def task(name):
        def run():
            met.wait()
            seen = []
            _parallel.for_chunks(lambda a, b: seen.append(threading.get_ident()), 8,
                                 8 * _parallel.MIN_CHUNK)
            pieces[name] = (seen, threading.get_ident())
            return name
        return run

    before = _parallel._blas.get_threads() if _parallel._blas.available() else None
    assert _parallel.concurrently([task("w"), task("x")], 1 << 30, "test.tasks") == ["w", "x"]
    assert pieces["w"][1] != pieces["x"][1]  # two threads
    for seen, ident in pieces.values():  # each task's work whole, on its own thread
        assert seen == [ident]
    assert not _parallel._state.solo
    if before is not None:
        assert _parallel._blas.get_threads() == before

    def fail():
        raise ValueError("task failed")

    with pytest.raises(ValueError, match="task failed"):
        _parallel.concurrently([lambda: 1, fail], 1 << 30, "test.tasks.fail")
    assert not _parallel._state.solo
