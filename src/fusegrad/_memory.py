"""Tensor storage accounting: the bytes held by live tensor storages, for
`fusegrad.cpu.memory_allocated()` and the profiler's memory columns.

A storage is the NumPy buffer a tensor's array views: the array itself when it owns its
memory, else its `base` (NumPy points a view's `base` at the owning array, so one step is
enough). A storage is counted once, when the first tensor over it is made (`make_plain`, the
one place tensors are made), and uncounted when NumPy frees it: a weak reference to the
owning array calls back then. Views, `detach()` and parameters share their storage and add
nothing.

Decision: accounting runs only while enabled. A weak reference and a dict entry per new
storage cost about 0.4 µs per tensor made (measured in docs/performance.md), several percent
of an eager op, which a program that never asks should not pay; disabled, `make_plain`
pays one global read. It is enabled by the first `fusegrad.cpu` memory query (for good) and
by a profiler with `profile_memory=True` (while it runs). On enabling, the storages of the
tensors alive then are found through the garbage collector (tensors are tracked objects) and
counted, so the figures cover every live tensor, not only those made afterwards.
"""

from __future__ import annotations

import gc
import threading
import weakref

import numpy as np

_ndarray = np.ndarray
_lock = threading.Lock()


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
    with _lock:
        if _live.pop(ref.key, None) is None:
            return
        n = ref.nbytes
        stats.current -= n
        stats.freed_bytes += n
        stats.count -= 1
        stats.frees += 1
        total = stats.current
    hook = listener
    if hook is not None:
        hook(-n, total, ref.key)


def account(data: np.ndarray) -> None:
    """Count the storage under `data` if it is not counted yet (`make_plain` calls this
    while accounting is enabled)."""
    storage = data if data.base is None else _storage(data)
    key = id(storage)
    if key in _live:
        return
    try:
        ref = _StorageRef(storage, _freed)
    except TypeError:  # an array type without weak references: not counted
        return
    n = storage.nbytes
    ref.key = key
    ref.nbytes = n
    with _lock:
        if key in _live:
            return
        _live[key] = ref
        stats.current += n
        stats.allocated_bytes += n
        stats.count += 1
        stats.allocations += 1
        if stats.current > stats.peak:
            stats.peak = stats.current
        if stats.count > stats.count_peak:
            stats.count_peak = stats.count
        total = stats.current
    hook = listener
    if hook is not None:
        hook(n, total, key)


def _install(on: bool) -> None:
    from . import _tensor

    _tensor._account = account if on else None


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
    stats.peak = stats.current
    stats.count_peak = stats.count


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
    with _lock:
        stats.peak = stats.current
        stats.count_peak = stats.count
