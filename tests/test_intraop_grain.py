"""Intra-op work sized by measured cost, GEMMs cut along the shared dimension or the stack,
and `set_num_threads` governing NumPy's OpenBLAS as well as fusegrad's own pool."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import fusegrad
from fusegrad.ops import _blas, _gemm, _native, _parallel

SRC = str(Path(fusegrad.__file__).resolve().parent.parent)


# `threads` and `shared` are fixtures of tests/conftest.py.


def _calls(fn):
    """`fn` wrapped to record each (start, stop, thread) it is called with."""
    seen: list[tuple[int, int, int]] = []

    def record(a: int, b: int) -> None:
        seen.append((a, b, threading.get_ident()))
        fn(a, b)

    return record, seen


def test_cheap_work_stays_on_the_calling_thread(threads):
    """A kernel that takes a microsecond over a million units of work is measured on its
    first call and from then on run whole by the caller: no piece is handed over."""
    fusegrad.set_num_threads(2)
    out = np.zeros(64)
    record, seen = _calls(lambda a, b: out.__setitem__(slice(a, b), 1.0))
    for _ in range(3):
        seen.clear()
        _parallel.for_chunks(record, 64, 1 << 20)
    assert seen == [(0, 64, threading.get_ident())]
    assert out.tolist() == [1.0] * 64


def test_dear_work_is_cut_into_pieces_covering_every_index_once(threads, monkeypatch):
    """A kernel measured at a millisecond per call is cut into pieces of at least
    MIN_PIECE_NS each (at most PIECES_PER_THREAD per thread), each index run once (whether
    sharing pays, timed against running whole, is another test's)."""
    monkeypatch.setattr(_parallel, "_split_pays", lambda walls: True)
    fusegrad.set_num_threads(2)
    hits = np.zeros(40, dtype=np.int64)

    def slow(a, b):
        time.sleep(2e-3 * (b - a) / 40)  # releases the GIL, as NumPy's loops do
        hits[a:b] += 1

    record, seen = _calls(slow)
    for _ in range(3):
        seen.clear()
        _parallel.for_chunks(record, 40, 1 << 20)
    assert 2 <= len(seen) <= 2 * _parallel.PIECES_PER_THREAD
    assert sorted((a, b) for a, b, _ in seen)[0][0] == 0
    assert hits.tolist() == [3] * 40


def test_matmul_cuts_a_deep_product_along_its_shared_dimension():
    """A convolution's weight gradient (few rows and columns, a batch of pixels deep) is cut
    along the shared dimension, whatever the thread count; a wide product by columns."""
    pieces = _gemm.MAX_GEMM_PIECES
    if pieces < 2:
        pytest.skip("one CPU: no product is cut")
    assert _gemm.cut(1, 6, 25, 50176) == (3, pieces)
    assert _gemm.cut(1, 16, 150, 6400) == (3, pieces)
    assert _gemm.cut(1, 16, 6400, 150)[0] == 2


@pytest.mark.parametrize("a_shape, b_shape, a_t", [
    ((6, 50176), (50176, 25), False),        # LeNet conv1's weight gradient
    ((16, 6400), (6400, 150), True),         # conv2's, the columns transposed
    ((1, 6, 25), (64, 1, 25, 784), False),   # conv1 forward: a stack of 64 small GEMMs
    ((3, 300, 200), (3, 200, 500), False),
])
def test_matmul_pieces_give_the_same_bits_at_one_and_two_threads(shared, a_shape, b_shape,
                                                                 a_t):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(a_shape[::-1] if a_t else a_shape).astype(np.float32)
    a = a.T if a_t else a
    b = rng.standard_normal(b_shape).astype(np.float32)
    got = []
    for n in (1, 2):
        fusegrad.set_num_threads(n)
        got.append(_gemm.matmul(a, b))
    np.testing.assert_array_equal(got[0], got[1])
    ref = torch.matmul(torch.from_numpy(np.ascontiguousarray(a)).double(),
                       torch.from_numpy(b).double()).numpy()
    np.testing.assert_allclose(got[1], ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


_THREADS = """
import ctypes, sys
import numpy as np
import torch
import fusegrad

def openblas_threads():
    # NumPy's OpenBLAS, asked through its own exported getter.
    for line in open("/proc/self/maps"):
        path = line.split()[-1]
        if "openblas" in path.lower() and ".so" in path:
            lib = ctypes.CDLL(path)
            for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads"):
                if hasattr(lib, name):
                    return getattr(lib, name)()
    return None

np.ones((64, 64)) @ np.ones((64, 64))
out = []
for n in (1, 3, 2):
    fusegrad.set_num_threads(n)
    torch.set_num_threads(n)
    out.append((fusegrad.get_num_threads(), torch.get_num_threads(), openblas_threads()))
print(out)
"""


def test_set_num_threads_sets_numpys_openblas_threads_too():
    """As PyTorch's count governs its BLAS, fusegrad's governs NumPy's OpenBLAS (which runs
    the GEMMs fusegrad does not cut itself), whether or not threadpoolctl is installed."""
    if not _blas.available():
        pytest.skip("NumPy's BLAS is not a settable OpenBLAS")
    env = dict(os.environ, PYTHONPATH=SRC, OMP_NUM_THREADS="2")
    env.pop("OPENBLAS_NUM_THREADS", None)
    out = subprocess.run([sys.executable, "-c", _THREADS], env=env, check=True,
                         capture_output=True, text=True).stdout.strip()
    assert out == str([(1, 1, 1), (3, 3, 3), (2, 2, 2)])


@pytest.mark.parametrize("cls, kw", [
    ("Adam", {}),
    ("Adam", {"weight_decay": 0.1, "maximize": True}),
    ("AdamW", {"weight_decay": 0.05}),
])
def test_adam_of_a_large_parameter_in_cache_blocks_matches_the_plain_update(threads, cls, kw):
    """A parameter of several update blocks: Adam's blocked NumPy update (at one and two
    threads; the C update is tested in test_native_optim) gives the bits of the
    whole-array formula, and PyTorch's values."""
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal((1300, 700)).astype(np.float32)  # 3.5 blocks of 2**18
    grads = [rng.standard_normal(w0.shape).astype(np.float32) for _ in range(3)]
    lr, (b1, b2), eps = 0.01, (0.9, 0.999), 1e-8
    wd, decoupled = kw.get("weight_decay", 0.0), cls == "AdamW"
    p_ref, m, v = w0.copy(), np.zeros_like(w0), np.zeros_like(w0)
    for step, g in enumerate(grads, 1):  # PyTorch's rule, one NumPy pass per operation
        g = -g if kw.get("maximize") else g
        if decoupled:
            p_ref *= 1 - lr * wd
        elif wd:
            g = g + wd * p_ref
        m += (g - m) * (1 - b1)
        v *= b2
        v += (1 - b2) * g * g
        denom = np.sqrt(v) / math.sqrt(1 - b2 ** step) + eps
        p_ref += -(lr / (1 - b1 ** step)) * (m / denom)
    results = []
    for lib, n in ((fusegrad, 1), (fusegrad, 2), (torch, 1)):
        if lib is fusegrad:
            fusegrad.set_num_threads(n)
        p = lib.nn.Parameter(lib.tensor(w0.copy()))
        opt = getattr(lib.optim, cls)([p], lr=lr, **kw)
        with _native.native_kernels(False):
            for g in grads:
                p.grad = lib.tensor(g.copy())
                opt.step()
        results.append(np.array(p.detach().numpy()))
    np.testing.assert_array_equal(results[0], p_ref)
    np.testing.assert_array_equal(results[1], p_ref)
    np.testing.assert_allclose(results[2], p_ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("build, shape", [
    (lambda m: m.LeNet5(), (16, 1, 32, 32)),
    (lambda m: m.resnet18(num_classes=10), (4, 3, 32, 32)),
])
def test_training_steps_give_the_same_bits_at_one_and_two_threads(shared, build, shape):
    """Two SGD steps of a model with every piece of work shared between two threads leave
    the parameters (and batch norm's running statistics) of the one-thread run, bit for
    bit."""
    import fusegrad.models as fm

    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.integers(0, 10, shape[0])
    fusegrad.manual_seed(0)
    init = {k: np.array(v.numpy(), copy=True) for k, v in build(fm).state_dict().items()}
    got = []
    for n in (1, 2):
        fusegrad.set_num_threads(n)
        model = build(fm)
        model.load_state_dict({k: fusegrad.tensor(v) for k, v in init.items()})
        opt = fusegrad.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        for _ in range(2):
            opt.zero_grad()
            fusegrad.nn.functional.cross_entropy(model(fusegrad.tensor(x)),
                                                 fusegrad.tensor(y)).backward()
            opt.step()
        got.append({k: v.detach().numpy().copy() for k, v in model.state_dict().items()})
    for k in got[0]:
        np.testing.assert_array_equal(got[0][k], got[1][k], err_msg=k)
