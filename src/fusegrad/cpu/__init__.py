"""`fusegrad.cpu`: PyTorch's `torch.cpu` namespace (device queries, streams and events that
do nothing on the CPU) plus tensor memory statistics.

The memory functions have no CPU spelling in PyTorch; they mirror its `torch.cuda` names and
figures (`memory_allocated`, `max_memory_allocated`, `reset_peak_memory_stats`,
`memory_stats` with the allocator's key names) over the storages of live tensors, which
`fusegrad._memory` counts. The first of these calls turns the counting on (see there).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from .. import _memory


def is_available() -> bool:
    """True: the CPU is always there."""
    return True


def is_initialized() -> bool:
    """True."""
    return True


def device_count() -> int:
    """1: the CPU counts as one device."""
    return 1


def current_device() -> str:
    """'cpu'."""
    return "cpu"


def set_device(device: Any) -> None:
    """Accepted and ignored: there is one CPU device."""


def synchronize(device: Any = None) -> None:
    """Nothing to wait for: CPU work is done when its call returns."""


class Stream:
    """A CPU stream: work runs in program order, so there is nothing to order."""

    def __init__(self, priority: int = -1) -> None:
        pass

    def wait_stream(self, stream: Stream) -> None:
        """Nothing to wait for."""

    def wait_event(self, event: Event) -> None:
        """Nothing to wait for."""

    def record_event(self, event: Event | None = None) -> None:
        """Nothing to record."""


class Event:
    """A CPU event: always complete."""

    def query(self) -> bool:
        """True: CPU work is finished when it returns."""
        return True

    def record(self, stream: Stream | None = None) -> None:
        """Nothing to record."""

    def synchronize(self) -> None:
        """Nothing to wait for."""

    def wait(self, stream: Stream | None = None) -> None:
        """Nothing to wait for."""


_default_stream = Stream()
_current_stream = _default_stream


def current_stream(device: Any = None) -> Stream:
    """The stream `stream(...)` made current (the default one otherwise)."""
    return _current_stream


class StreamContext:
    """`with stream(s):` makes `s` current inside the block (None leaves it as it is)."""

    def __init__(self, stream: Stream | None) -> None:
        self.stream = stream
        self.prev_stream = _default_stream

    def __enter__(self) -> None:
        global _current_stream
        if self.stream is None:
            return
        self.prev_stream = _current_stream
        _current_stream = self.stream

    def __exit__(self, *exc: Any) -> None:
        global _current_stream
        if self.stream is None:
            return
        _current_stream = self.prev_stream


def stream(stream: Stream | None) -> StreamContext:
    """A context manager making `stream` current."""
    return StreamContext(stream)


# ------------------------------------------------------------------ memory statistics

def memory_allocated(device: Any = None) -> int:
    """Bytes held by the storages of live tensors."""
    _memory.enable_permanently()
    return _memory.fold().current


def max_memory_allocated(device: Any = None) -> int:
    """The most bytes held at once since the start (or `reset_peak_memory_stats`)."""
    _memory.enable_permanently()
    return _memory.fold().peak


def reset_peak_memory_stats(device: Any = None) -> None:
    """Make the peaks the current figures."""
    _memory.enable_permanently()
    _memory.reset_peak()


def memory_stats(device: Any = None) -> OrderedDict:
    """The counters under PyTorch's `torch.cuda.memory_stats()` key names: bytes and
    storages, each current, peak, allocated (in total) and freed (in total)."""
    _memory.enable_permanently()
    s = _memory.fold()
    items = [
        ("allocated_bytes.all.allocated", s.allocated_bytes),
        ("allocated_bytes.all.current", s.current),
        ("allocated_bytes.all.freed", s.freed_bytes),
        ("allocated_bytes.all.peak", s.peak),
        ("allocation.all.allocated", s.allocations),
        ("allocation.all.current", s.count),
        ("allocation.all.freed", s.frees),
        ("allocation.all.peak", s.count_peak),
    ]
    return OrderedDict(items)


def __getattr__(name: str):
    """`fusegrad.cpu.amp`, loaded on first use (also after a plain `import fusegrad.cpu`)."""
    if name == "amp":
        import importlib

        return importlib.import_module(f"{__name__}.amp")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
