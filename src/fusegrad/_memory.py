"""Tensor storage accounting: the bytes held by live tensor storages, for
`fusegrad.cpu.memory_allocated()` and the profiler's memory columns.

A storage is the NumPy buffer a tensor's array views: the array itself when it owns its
memory, else the array its `base` chain ends at (through the helper objects NumPy's stride
tricks put in between). A storage is counted once, when the first tensor over it is made
(`make_plain`, the one place tensors are made), and uncounted when NumPy frees it: a weak
reference to the owning array calls back then. Views, `detach()` and parameters share their
storage and add nothing.

Decision: accounting runs only while enabled. A weak reference with a callback, a dict entry
and two log appends per new storage cost about 0.6 µs with its free (`a + b` on 4x4 tensors:
0.93 -> 1.48 µs; docs/performance.md), which a program that never asks should not pay;
disabled, the paths that make tensors pay one global read (`_tensor._on_new`). It is
enabled by the first `fusegrad.cpu` memory query (for good) and by a profiler with
`profile_memory=True` (while it runs). On enabling, the storages of the tensors alive then
are found through the garbage collector (tensors are tracked objects) and counted, so the
figures cover every live tensor, not only those made afterwards.
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections import deque

import numpy as np

_ndarray = np.ndarray
_lock = threading.RLock()


class _StorageRef(weakref.ref):
    """A weak reference to a counted storage, with its key and size for the callback."""

    __slots__ = ("key", "nbytes")


class _Stats:
    """The counters (PyTorch's `memory_stats()` names: current, peak, allocated, freed)."""

    def __init__(self) -> None:
        self.current = 0
        self.peak = 0
        self.allocated_bytes = 0
        self.freed_bytes = 0
        self.count = 0
        self.count_peak = 0
        self.allocations = 0
        self.frees = 0


stats = _Stats()
_live: dict[int, _StorageRef] = {}  # id(storage) -> its weak reference
# Allocations (n >= 0) and frees (~n < 0) not yet applied to `stats`, in order: appending
# and popping are atomic, so counting takes no lock; `fold` applies them (queries, or every
# 4096 entries).
_log: deque[int] = deque()
_folding = False  # a fold is running (in the thread holding `_lock`)
_permanent = False  # enabled for good (a memory query was made)
_holders = 0  # profilers that enabled accounting for their run
# Called with (nbytes, total, storage id) on every counted allocation (+) and free (-) while a
# profiler records memory; None otherwise.
listener = None


def _storage(data: np.ndarray) -> np.ndarray:
    """The array owning `data`'s memory. NumPy's strided views (`broadcast_to`,
    `as_strided`) keep their source behind a helper object with a `base`; a buffer from
    outside NumPy (bytes, mmap) is stood for by the outermost array over it."""
    base = data.base
    while base is not None:
        if not isinstance(base, _ndarray):
            base = getattr(base, "base", None)
            if not isinstance(base, _ndarray):
                return data
        data = base
        base = data.base
    return data


def _freed(ref: _StorageRef) -> None:
    """Weak-reference callback: the storage's buffer is being freed."""
    if _live.pop(ref.key, None) is not None:
        _log.append(~ref.nbytes)
        if listener is not None:
            _notify(-ref.nbytes, ref.key)


def account(data: np.ndarray) -> None:
    """Count the storage under `data` if it is not counted yet (called for each new tensor
    while accounting is enabled, through `_account_tensor`)."""
    try:
        base = data.base
    except AttributeError:  # a fake tensor holds no data
        return
    storage = data if base is None else _storage(data)
    key = id(storage)
    if key in _live:
        return
    try:
        ref = _StorageRef(storage, _freed)
    except TypeError:  # an array type without weak references: not counted
        return
    ref.key = key
    ref.nbytes = n = storage.nbytes
    # setdefault is atomic: of two threads counting one storage, one wins (the loser's
    # reference dies unused, its callback with it).
    if _live.setdefault(key, ref) is ref:
        _log.append(n)
        if listener is not None:
            _notify(n, key)
        elif len(_log) > 4096:
            fold()


def fold() -> _Stats:
    """Apply the logged allocations and frees to `stats`, in order, and return it.

    A fold can be re-entered in its own thread: a garbage collection inside it frees
    storages, whose callbacks log and, under a profiler, fold. The lock is reentrant and
    the inner call returns at once (the outer loop applies what was logged, to the last
    entry), so nothing is applied twice and no thread waits on itself."""
    global _folding
    with _lock:
        s = stats
        if _folding:
            return s
        _folding = True
        try:
            current, peak, count, count_peak = s.current, s.peak, s.count, s.count_peak
            popleft = _log.popleft
            while _log:
                b = popleft()
                if b >= 0:
                    current += b
                    count += 1
                    s.allocated_bytes += b
                    s.allocations += 1
                    if current > peak:
                        peak = current
                    if count > count_peak:
                        count_peak = count
                else:
                    current -= ~b
                    count -= 1
                    s.freed_bytes += ~b
                    s.frees += 1
            s.current, s.peak, s.count, s.count_peak = current, peak, count, count_peak
        finally:
            _folding = False
        return s


def _notify(nbytes: int, key: int) -> None:
    hook = listener
    if hook is not None:
        hook(nbytes, fold().current, key)


def _install(on: bool) -> None:
    from . import _tensor

    _tensor.watch_new_tensors("storage accounting", _account_tensor if on else None)


def _account_tensor(t) -> None:
    """`account` for a new tensor (`_tensor.watch_new_tensors`)."""
    account(t._data)


def _count_live_tensors() -> None:
    """Count the storages of the tensors alive now (made while accounting was off)."""
    from ._tensor import Tensor

    for obj in gc.get_objects():
        # type(), not isinstance: isinstance reads `__class__`, which some module proxies
        # answer with a deprecation warning.
        if issubclass(type(obj), Tensor):
            data = obj._data
            if data.__class__ is _ndarray or isinstance(data, _ndarray):
                account(data)


def enabled() -> bool:
    """Whether new storages are being counted."""
    return _permanent or _holders > 0


def enable_permanently() -> None:
    """Count storages from now on, for the rest of the process (the memory queries)."""
    global _permanent
    if enabled():
        _permanent = True
        return
    _permanent = True
    _install(True)
    _count_live_tensors()
    reset_peak()


def hold() -> None:
    """Count storages until the matching `release` (a profiler recording memory)."""
    global _holders
    was = enabled()
    _holders += 1
    if not was:
        _install(True)
        _count_live_tensors()


def release() -> None:
    """End a `hold`; counting stops when nothing else keeps it on. Storages counted so far
    are still uncounted when freed, so the current figure stays right for them."""
    global _holders
    _holders -= 1
    if not enabled():
        _install(False)


def reset_peak() -> None:
    """Make the peaks the current figures."""
    s = fold()
    with _lock:
        s.peak = s.current
        s.count_peak = s.count
