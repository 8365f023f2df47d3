"""Intra-op threads: one pool for the GEMMs and the NumPy work around them (im2col and
col2im copies, layout changes, bias adds, max pooling, the optimizers' update loops).

NumPy releases the GIL inside BLAS calls, copies and ufunc loops, so splitting one such
operation into pieces shared by a small pool uses the other cores as PyTorch's kernels do.
Each piece writes its own part of the output with the same operations in the same order,
so results are bit-identical to the one-thread path. A large GEMM is cut too (`_gemm`), with
OpenBLAS held to one thread meanwhile (`OneBlasThread`): OpenBLAS's own threads busy-wait
between calls and would take the cores this pool needs (see `_blas`).

Independent kernels (a convolution's weight and input gradients) can instead run side by
side, each whole on a thread of its own (`concurrently`).

Whether work is split is decided by its measured cost, not its size: handing a piece to a
pool thread (waking it, and passing the GIL there and back) costs tens of microseconds on a
virtual machine whose idle CPUs halt, while a kernel's cost per element ranges from a tenth
of a nanosecond (a contiguous copy) to tens (a scattered store). Each kernel's recent time per
unit of work is remembered per call site and shape (`_costs`), and work is split only into
pieces expected to take at least `MIN_PIECE_NS` each. On a busy machine pieces take longer,
so more work is shared: two runnable threads get a larger share of CPUs that other
processes also want.

The thread count is PyTorch's: `set_num_threads`, else `OMP_NUM_THREADS` (at most the CPUs),
else the CPUs.
"""

from __future__ import annotations

import os
from _thread import allocate_lock
from collections.abc import Callable, Hashable
from itertools import count
from time import perf_counter_ns

import numpy as np

from . import _blas

# Work of fewer units (elements, multiply-adds) is never split nor timed: no kernel is dear
# enough per unit for it to pay a hand-off.
MIN_CHUNK = 1 << 14
# A piece handed to another thread must be expected to take at least this long: waking a
# halted virtual CPU and passing the GIL to the woken thread and back takes tens of
# microseconds (10-60 us over a split region's whole time, measured under load here).
MIN_PIECE_NS = 100_000
# Large work is cut into up to this many pieces per thread, claimed in turn, so that a thread
# the scheduler runs late holds up at most a small piece.
PIECES_PER_THREAD = 4
# The cost per unit assumed for a kernel not yet timed (a strided copy's, in ns).
GUESS_NS = 1.0
# Each timing's weight in a kernel's running cost per unit.
COST_WEIGHT = 0.25
# A timing enters a running cost as at most this many times the cost so far: one call that
# the scheduler held up (a preempted piece took 3-5x its usual time) must not flip a
# GEMM to running whole for the next `PROBE_EVERY` calls, while a lasting change in the
# machine's load still moves the cost, by up to 25% per call.
OUTLIER = 2.0
# Work expected to take less than this runs untimed (its cost stays as last measured).
CHEAP_NS = MIN_PIECE_NS // 4
# Entries of the cost table (call site and shape): cleared when full, re-measured on use.
MAX_COSTS = 4096
# Work that could be shared runs the slower of its two ways (whole, shared) once in this
# many calls, to notice when that one has become the faster.
PROBE_EVERY = 32
# Helper threads of each kind (pool threads, C workers) at most (`MAX_WORKERS` in
# native/workers.c).
MAX_HELPERS = 63
# A copy whose source strides by a multiple of 4 KiB along the last axis runs this many values
# of that axis at a time (see `copyto`): 32 bytes of float32 per destination run.
ALIAS_RUN = 8


class _Pool:
    """Worker threads that take jobs (no-argument callables) from one queue, started on
    first use. Lighter than a `ThreadPoolExecutor`: no future or work item per job, a job's
    result and errors are its own business (`_share` collects them)."""

    def __init__(self, workers: int) -> None:
        import threading  # only once a pool is needed
        from queue import SimpleQueue

        self.jobs: SimpleQueue = SimpleQueue()
        self.size = workers
        cpus = helper_cpus()
        for i in range(workers):
            threading.Thread(target=self._serve, args=(cpus[i] if i < len(cpus) else None,),
                             name=f"fusegrad-intraop-{i}", daemon=True).start()

    def _serve(self, cpu: int | None) -> None:
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})  # this thread only (Linux)
        get = self.jobs.get
        while True:
            get()()


class _State:
    threads: int | None = None
    pool: _Pool | None = None
    # One entry per task `concurrently` is running on a thread of its own: while any runs,
    # work is not shared (each task keeps its core; the other is busy with its twin).
    solo: list = []


_state = _State()
# Per (kernel, shape) key: recent nanoseconds per unit of work (time in its pieces), and
# for work that could be shared the recent wall nanoseconds per unit run whole and run
# shared, and the count of calls (`_split_pays`); running means, 0.0 until measured.
_costs: dict[Hashable, list] = {}


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
    """Use `n` threads from now on (the pool grows on its next use), NumPy's OpenBLAS
    included (`_blas`), so that a GEMM outside `_gemm.matmul` uses the same count."""
    _state.threads = n
    if _blas.available():
        _blas.set_threads(n)


def helper_cpus() -> list[int]:
    """The CPU each helper thread keeps to, by index: the pool's thread i and C worker i
    (`native/workers.c`) both run on the (i + 1)-th of the CPUs this thread may use, counted
    round; empty (helpers go where the scheduler puts them) with fewer than two such CPUs,
    where affinity cannot be set, or with `FUSEGRAD_PIN_THREADS=0` in the environment.

    Why: the C workers watch for work on their CPU between jobs (yielding it), and Linux
    moves a woken thread to another CPU only when that one goes idle, which a watching CPU
    never does. A pool thread woken onto the calling thread's CPU then waited for the
    caller to block: at two threads a ResNet-18 round of three steps counted 20-75 ms during
    which the pool thread or the caller was runnable but not running (Linux's schedstat),
    against ~2 ms for PyTorch's threads, and 0-3 ms with each pool thread on its C worker's
    CPU (where the worker's yield hands it the CPU at once). The calling thread is left
    where it is: it is the program's."""
    if os.environ.get("FUSEGRAD_PIN_THREADS", "1") == "0" or \
            not hasattr(os, "sched_getaffinity"):
        return []
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except OSError:
        return []
    if len(allowed) < 2:
        return []
    return [allowed[(i + 1) % len(allowed)] for i in range(MAX_HELPERS)]


def _pool(workers: int) -> _Pool:
    pool = _state.pool
    if pool is None or pool.size < workers:
        # A smaller pool's threads stay idle on their own queue (a count rarely shrinks
        # and grows again).
        pool = _state.pool = _Pool(workers)
    return pool


def _forget_pool() -> None:
    # A forked child (a DataLoader worker) has none of the parent's pool threads, nor their
    # tasks.
    _state.pool = None
    _state.solo = []


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def for_chunks(fn: Callable[[int, int], None], total: int, work: int,
               grain: int | None = None) -> None:
    """Call `fn(start, stop)` over `range(total)` cut into pieces shared between threads,
    or once over everything when one thread is set or the work is too cheap to share.

    `work` is the size of the job in units (elements, or whatever `fn` counts). By default
    the pieces are sized by measured cost (`share_by_cost`, keyed by the code of `fn` and
    the sizes). With `grain`, the caller sizes them instead: at most one per thread, each of
    at least `grain` units.

    The pieces are claimed, not assigned: the calling thread and the woken pool threads
    each take the next unclaimed piece until none is left, and the call returns once every
    piece is done. A pool thread that is slow to be scheduled (the CPUs busy with other
    work) then costs only the wake-up: the calling thread runs the pieces itself instead of
    waiting for it. Which thread runs a piece never changes what the piece computes."""
    if grain is None:
        # By the code's identity: hashing a code object hashes its bytecode and constants.
        share_by_cost(fn, total, work, (id(getattr(fn, "__code__", fn)), total, work))
        return
    pieces = min(num_threads(), total, work // max(grain, 1))
    if pieces <= 1 or _state.solo:
        fn(0, total)
    else:
        _share(fn, total, pieces, pieces)


def sharing_threads(work: int) -> int:
    """How many threads work of `work` units may be shared among now: the thread count, or
    one for small work (under `MIN_CHUNK`) and inside a side-by-side task
    (`concurrently`)."""
    threads = num_threads()
    return 1 if threads <= 1 or work < MIN_CHUNK or _state.solo else threads


def share_by_cost(fn: Callable[[int, int], None], total: int, work: int,
                  key: Hashable, trial: bool = True) -> None:
    """`fn(start, stop)` over `range(total)` (`work` units in all), cut into pieces that
    are each expected to take at least `MIN_PIECE_NS`, at most `PIECES_PER_THREAD` per
    thread, by the recent time per unit for `key` (a kernel and its shape; a copy's cost
    also depends on its strides); run whole on the calling thread when that makes one
    piece. Every call times its pieces and moves the cost of `key` a quarter of the way
    (`COST_WEIGHT`) to what they took.

    Whether sharing pays is measured too (`_split_pays`): work whose pieces make many small
    NumPy calls spends its time passing the GIL between threads, and ran 1.2-2.5x slower
    shared than whole (a convolution's col2im: 3.4 -> 8.7 ms per ResNet-18 step); a GEMM
    piece is one long call and runs twice as fast on two threads. Work in C (one call per
    piece, no GIL) is measured too: a piece of a few hundred microseconds ran slower on the
    other core (its wake-up, and the data in this core's cache) than whole on this one.
    `trial=False` skips that measurement for work known to gain from sharing (a GEMM's
    pieces, each one BLAS call): on a busy machine one slow shared call made a GEMM run
    whole, at half speed, until the next probe."""
    threads = sharing_threads(work)
    if threads <= 1 or total <= 1:
        fn(0, total)
        return
    entry = _costs.get(key)
    ns = (entry[0] if entry is not None else 0.0) or GUESS_NS  # 0.0: a run that raised
    if ns * work < CHEAP_NS:  # far from worth sharing: not worth timing either
        fn(0, total)
        return
    if entry is None:
        if len(_costs) >= MAX_COSTS:
            _costs.clear()
        entry = _costs[key] = [0.0, 0.0, 0.0, 0]
    pieces = min(total, threads * PIECES_PER_THREAD, int(ns * work) // MIN_PIECE_NS)
    shareable = pieces > 1 and trial
    if shareable and not _split_pays(entry):
        pieces = 1
    t0 = perf_counter_ns()
    if pieces <= 1:
        fn(0, total)
        spent = wall = perf_counter_ns() - t0
    else:
        spent = _share(fn, total, pieces, min(threads, pieces))
        wall = perf_counter_ns() - t0
    entry[0] = _moved(entry[0], spent / work)
    if shareable:  # the wall time per unit of the way it ran, whole or shared
        i = 1 if pieces <= 1 else 2
        entry[i] = _moved(entry[i], wall / work)


def concurrently(tasks: list[Callable[[], object]], work: int, key: Hashable) -> list:
    """The results of independent `tasks` (a convolution's weight and input gradients), run
    at once, each whole on a thread of its own, when that is measured to pay
    (`share_by_cost`, `work` units in all); else in order on this thread, each sharing its
    own work as usual. Each task computes the same either way.

    Two tasks side by side keep each core on its own data (each reads its inputs once and
    writes its own result), where splitting each task in turn moves every operand between
    the cores and pays a hand-off per kernel: on two virtual CPUs most kernels ran slower
    split than whole (`share_by_cost`), while a convolution's two gradients ran 1.8-2.3x
    faster side by side than in turn."""
    results: list = [None] * len(tasks)

    def run(first: int, last: int) -> None:
        side_by_side = last - first < len(tasks)
        for i in range(first, last):
            if side_by_side:
                _state.solo.append(i)  # (list appends and pops are atomic)
                try:
                    results[i] = tasks[i]()
                finally:
                    _state.solo.pop()
            else:
                results[i] = tasks[i]()

    # OpenBLAS held to one thread for the whole region: a GEMM in a task must not change
    # the count under its twin's (`matmul` leaves a count of one as it is).
    with OneBlasThread():
        share_by_cost(run, len(tasks), work, key)
    return results


class OneBlasThread:
    """OpenBLAS held to one thread over a block, its count restored after (nothing to do
    without a settable OpenBLAS, or when the count is one already)."""

    __slots__ = ("before",)

    def __enter__(self) -> None:
        self.before = before = _blas.get_threads() if _blas.available() else 1
        if before != 1:
            _blas.set_threads(1)

    def __exit__(self, *exc) -> None:
        if self.before != 1:
            _blas.set_threads(self.before)


def _moved(seen: float, now: float) -> float:
    """A running mean `seen` (0.0: none yet) moved `COST_WEIGHT` of the way to `now`, taken
    as at most `OUTLIER` times `seen`."""
    return now if not seen else seen + (min(now, OUTLIER * seen) - seen) * COST_WEIGHT


def _split_pays(entry: list) -> bool:
    """Whether to share work whose `_costs` entry is `entry`: its recent wall times per unit
    run whole and shared are `entry[1:3]` (0.0: not yet timed), `entry[3]` counts the
    calls. Each way is timed once first, then the faster runs, and the other again every
    `PROBE_EVERY` calls, so a change (the machine's load) is noticed."""
    _, whole, shared, calls = entry
    entry[3] = calls + 1
    if not shared:
        return True
    if not whole:
        return False
    return (shared < whole) != (calls % PROBE_EVERY == 0)


def _share(fn: Callable[[int, int], None], total: int, pieces: int, claimers: int) -> int:
    """Run `fn` over `range(total)` cut into `pieces` equal parts, claimed in turn by the
    calling thread and `claimers - 1` pool threads; returns the nanoseconds the pieces took
    together, and re-raises the first error of any piece on the calling thread."""
    bounds = [total * i // pieces for i in range(pieces + 1)]
    claim = count().__next__
    finish = count(1).__next__
    done = allocate_lock()
    done.acquire()
    errors: list[BaseException] = []
    spent: list[int] = []
    clock = perf_counter_ns

    def take() -> None:
        while True:
            i = claim()  # atomic: a C iterator's step holds the GIL
            if i >= pieces:
                return
            t0 = clock()
            try:
                fn(bounds[i], bounds[i + 1])
            except BaseException as e:  # re-raised on the calling thread
                errors.append(e)
            spent.append(clock() - t0)
            if finish() == pieces:
                done.release()

    put = _pool(claimers - 1).jobs.put
    for _ in range(claimers - 1):
        put(take)
    take()
    done.acquire()  # immediate when this thread finished the last piece
    if errors:
        raise errors[0]
    return sum(spent)


def copyto(dst: np.ndarray, src: np.ndarray) -> None:
    """`np.copyto(dst, src)` for same-shape arrays, split over the first of the two leading
    axes that has a chunk for every thread.

    When the source steps through memory by a multiple of 4 KiB along the last axis (moving
    a power-of-two batch of power-of-two images last, as the batch-last convolution does),
    the copy runs `ALIAS_RUN` values of that axis at a time: read whole, every value of the
    inner loop maps to the same set of the L1 cache and they evict each other (a 32x64x8x8
    float32 batch took 0.20 ms whole and 0.10 ms in runs of 8; 256x64x8x8, 2.4 and 0.5)."""
    axis = 0 if dst.ndim < 2 or dst.shape[0] >= num_threads() else 1
    step = src.strides[-1] if src.ndim else 0
    runs = dst.ndim >= 2 and dst.shape[-1] > ALIAS_RUN and step and step % 4096 == 0

    def part(a: int, b: int) -> None:
        d, s = (dst[a:b], src[a:b]) if axis == 0 else (dst[:, a:b], src[:, a:b])
        if runs:
            for i in range(0, d.shape[-1], ALIAS_RUN):
                np.copyto(d[..., i:i + ALIAS_RUN], s[..., i:i + ALIAS_RUN])
        else:
            np.copyto(d, s)

    if num_threads() <= 1 or dst.size < MIN_CHUNK:
        part(0, dst.shape[axis])
    else:  # a copy's cost per value depends on the layouts: 0.1 ns contiguous, ~2 strided
        share_by_cost(part, dst.shape[axis], dst.size,
                      ("copy", dst.shape, dst.strides, src.strides, dst.dtype))


def elementwise(ufunc: np.ufunc, out: np.ndarray, *args) -> np.ndarray:
    """`ufunc(*args, out=out)` for C-contiguous arrays of `out`'s shape and scalars (Python
    numbers, 0-d arrays), its elements shared between threads; returns `out`. Each element is
    computed by the same loop whatever the cut, so the bits do not depend on the thread
    count."""
    n = out.size
    if n < MIN_CHUNK or num_threads() <= 1:
        ufunc(*args, out=out)
        return out
    dst = out.reshape(-1)
    flat = [a.reshape(-1) if a.__class__ is np.ndarray and a.ndim else a for a in args]
    cut = [a.__class__ is np.ndarray and a.ndim > 0 for a in flat]

    def part(i: int, j: int) -> None:
        ufunc(*[a[i:j] if c else a for a, c in zip(flat, cut)], out=dst[i:j])

    share_by_cost(part, n, n, ("elementwise", ufunc, n, out.dtype))
    return out


def contiguous(src: np.ndarray) -> np.ndarray:
    """`np.ascontiguousarray(src)`, the copy shared between threads."""
    return src if src.flags.c_contiguous else copy(src)


def copy(src: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of `src` (always a new array), the copy shared between threads."""
    dst = np.empty(src.shape, dtype=src.dtype)
    copyto(dst, src)
    return dst
