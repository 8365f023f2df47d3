"""Intra-op threads for the NumPy work around the GEMMs (im2col and col2im copies, layout
changes, bias adds).

NumPy's BLAS already runs a GEMM on every thread it is allowed, but the copies and adds
between GEMMs run on the calling thread. NumPy releases the GIL inside copies and ufunc
loops, so splitting one such operation into a chunk per thread on a small pool uses the
other cores as PyTorch's kernels do. Each chunk writes its own part of the output with the
same operations in the same order, so results are bit-identical to the one-thread path.

The thread count is PyTorch's: `set_num_threads`, else `OMP_NUM_THREADS` (at most the CPUs),
else the CPUs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

# Below this many elements per thread, handing a chunk to a thread costs more than it saves.
MIN_CHUNK = 1 << 15


class _State:
    threads: int | None = None
    pool: ThreadPoolExecutor | None = None
    pool_size = 0


_state = _State()


def default_threads() -> int:
    """PyTorch's default intra-op thread count: `OMP_NUM_THREADS` when it is a positive
    integer, at most the number of CPUs (which is the default otherwise)."""
    cpus = os.cpu_count() or 1
    try:
        n = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        n = 0
    return min(n, cpus) if n > 0 else cpus


def num_threads() -> int:
    """The intra-op thread count (set by `set_threads`, else `default_threads()`)."""
    n = _state.threads
    if n is None:
        n = _state.threads = default_threads()
    return n


def set_threads(n: int) -> None:
    """Use `n` threads from now on (the pool grows on its next use)."""
    _state.threads = n


def _pool(workers: int) -> ThreadPoolExecutor:
    from concurrent.futures import ThreadPoolExecutor  # only once a pool is needed

    if _state.pool is None or _state.pool_size < workers:
        if _state.pool is not None:
            _state.pool.shutdown(wait=False)
        _state.pool = ThreadPoolExecutor(workers, thread_name_prefix="fusegrad-intraop")
        _state.pool_size = workers
    return _state.pool


def _forget_pool() -> None:
    # A forked child (a DataLoader worker) has none of the parent's pool threads.
    _state.pool = None
    _state.pool_size = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def for_chunks(fn: Callable[[int, int], None], total: int, work: int) -> None:
    """Call `fn(start, stop)` over `range(total)` split into one chunk per thread (the
    calling thread takes the first), or once over everything when `work` (elements) is too
    small to share or one thread is set."""
    t = min(num_threads(), total, work // MIN_CHUNK)
    if t <= 1:
        fn(0, total)
        return
    bounds = [total * i // t for i in range(t + 1)]
    futures = [_pool(t - 1).submit(fn, bounds[i], bounds[i + 1]) for i in range(1, t)]
    try:
        fn(bounds[0], bounds[1])
    finally:
        for f in futures:
            f.result()


def copyto(dst: np.ndarray, src: np.ndarray) -> None:
    """`np.copyto(dst, src)` for same-shape arrays, split over the first of the two leading
    axes that has a chunk for every thread."""
    axis = 0 if dst.ndim < 2 or dst.shape[0] >= num_threads() else 1

    def part(a: int, b: int) -> None:
        if axis == 0:
            np.copyto(dst[a:b], src[a:b])
        else:
            np.copyto(dst[:, a:b], src[:, a:b])

    for_chunks(part, dst.shape[axis], dst.size)


def contiguous(src: np.ndarray) -> np.ndarray:
    """`np.ascontiguousarray(src)`, the copy shared between threads."""
    return src if src.flags.c_contiguous else copy(src)


def copy(src: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of `src` (always a new array), the copy shared between threads."""
    dst = np.empty(src.shape, dtype=src.dtype)
    copyto(dst, src)
    return dst
