"""Profiler results: one `FunctionEvent` per recorded call, their per-name averages
(`FunctionEventAvg`), and the summary table, in PyTorch's shapes, columns and formatting.

Times are microseconds (floats). An event's self time is its time less its children's; its
memory is the bytes its storages gained (allocations less frees) while it ran, children
included, and its self memory the same without them.
"""

from __future__ import annotations

import enum
import os
import warnings
from typing import Any


def format_time(us: float) -> str:
    """A duration as PyTorch prints it: s, ms or us with three decimals."""
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def format_share(us: float, total: float) -> str:
    """`us` as a percentage of `total` (NaN when the total is 0)."""
    if total == 0:
        return "NaN"
    return f"{us * 100.0 / total:.2f}%"


def format_memory(nbytes: int) -> str:
    """Bytes in B, KB, MB or GB (powers of 1024), two decimals above bytes."""
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if abs(nbytes) >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes} B"


def _time_with_unit(us: float, unit: str | None) -> str:
    if unit == "s":
        return f"{us / 1e6:.3f}s"
    if unit == "ms":
        return f"{us / 1e3:.3f}ms"
    if unit == "us":
        return f"{us:.3f}us"
    return format_time(us)


class DeviceType(enum.Enum):
    """The device an event ran on (PyTorch's `torch._C._autograd.DeviceType`, also
    `torch.profiler.DeviceType`): only CPU events exist in this build."""

    CPU = 0
    CUDA = 1
    MKLDNN = 2
    OPENGL = 3
    OPENCL = 4
    IDEEP = 5
    HIP = 6
    FPGA = 7
    MAIA = 8
    XLA = 9
    Vulkan = 10
    Metal = 11
    XPU = 12
    MPS = 13
    MTIA = 19
    Meta = 14
    HPU = 15
    VE = 16
    Lazy = 17
    IPU = 18
    PrivateUse1 = 20


class _Formatted:
    """The `*_str` spellings of the time attributes."""

    @property
    def cpu_time_str(self) -> str:
        """Average time per call, formatted."""
        return format_time(self.cpu_time)

    @property
    def cpu_time_total_str(self) -> str:
        """Total time, formatted."""
        return format_time(self.cpu_time_total)

    @property
    def self_cpu_time_total_str(self) -> str:
        """Self time, formatted."""
        return format_time(self.self_cpu_time_total)

    @property
    def device_time_str(self) -> str:
        """Average device time, formatted (0 without a device)."""
        return format_time(self.device_time)

    @property
    def device_time_total_str(self) -> str:
        """Total device time, formatted."""
        return format_time(self.device_time_total)

    @property
    def self_device_time_total_str(self) -> str:
        """Self device time, formatted."""
        return format_time(self.self_device_time_total)

    @property
    def cpu_time(self) -> float:
        """Average time per call (us)."""
        return 0.0 if self.count == 0 else self.cpu_time_total / self.count

    @property
    def cuda_time(self) -> float:
        """`device_time`, under its deprecated name (with PyTorch's FutureWarning)."""
        warnings.warn("`cuda_time` is deprecated, please use `device_time` instead.",
                      FutureWarning, stacklevel=2)
        return self.device_time

    # No device in this build: the device figures are 0, as PyTorch reports for CPU runs.
    device_time_total = self_device_time_total = 0.0
    device_memory_usage = self_device_memory_usage = 0
    device_time = 0.0
    flops = 0
    is_legacy = False
    is_remote = False
    use_device = None
    is_async = False


class Interval:
    """A span of time in microseconds (PyTorch's `FunctionEvent.time_range`)."""

    def __init__(self, start: float, end: float) -> None:
        self.start = start
        self.end = end

    def elapsed_us(self) -> float:
        """The span's length (us)."""
        return self.end - self.start


class FunctionEvent(_Formatted):
    """One recorded call: an op, a backward node, or a `record_function` block. Built as
    PyTorch's (`cpu_memory_usage`: the bytes gained while it ran, children included)."""

    def __init__(self, id: int, name: str, thread: int, start_us: float, end_us: float,
                 overload_name: str | None = None, fwd_thread: int | None = None,
                 input_shapes: list | None = None, stack: list | None = None,
                 scope: int = 0, use_device: str | None = None, cpu_memory_usage: int = 0,
                 device_memory_usage: int = 0, is_async: bool = False,
                 is_remote: bool = False, sequence_nr: int = -1, node_id: int = -1,
                 trace_name: str | None = None, is_user_annotation: bool = False,
                 flops: int | None = 0, **kwargs: Any) -> None:
        self.id = id
        self.flops = flops
        self.name = name
        self.thread = thread
        self.fwd_thread = fwd_thread
        self.start_us = start_us
        self.end_us = end_us
        self.overload_name = overload_name or ""
        self.input_shapes = input_shapes
        self.stack = stack if stack is not None else []
        self.scope = scope
        self.cpu_memory_usage = cpu_memory_usage
        self.sequence_nr = sequence_nr
        self.node_id = node_id
        self.trace_name = trace_name if trace_name is not None else name
        self.is_user_annotation = is_user_annotation
        self.cpu_children: list[FunctionEvent] = []
        self.cpu_parent: FunctionEvent | None = None
        self.count = 1
        self.device_type = DeviceType.CPU
        self.device_index = os.getpid()  # PyTorch's CPU events carry the process id here
        self.kernels: list = []

    @property
    def time_range(self) -> Interval:
        """When it ran: start and end in microseconds from the profile's start."""
        return Interval(self.start_us, self.end_us)

    def append_cpu_child(self, child: FunctionEvent) -> None:
        """Make `child` (an event inside this one) a child."""
        self.cpu_children.append(child)

    def set_cpu_parent(self, parent: FunctionEvent) -> None:
        """Make `parent` this event's parent."""
        self.cpu_parent = parent

    @property
    def key(self) -> str:
        """The name the averages group by."""
        return self.name

    @property
    def cpu_time_total(self) -> float:
        """Wall time from start to end (us)."""
        return self.end_us - self.start_us

    @property
    def self_cpu_time_total(self) -> float:
        """Time not spent in children (us)."""
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def self_cpu_memory_usage(self) -> int:
        """Bytes gained while it ran, less those its children gained."""
        return self.cpu_memory_usage - sum(c.cpu_memory_usage for c in self.cpu_children)

    def __repr__(self) -> str:
        device = self.use_device  # None: the device fields are spelled "None_..."
        return (f"<FunctionEvent id={self.id} name={self.name} "
                f"overload_name={self.overload_name} device_type={self.device_type} "
                f"node_id={self.node_id} cpu_time={self.cpu_time_str} "
                f"start_us={round(self.start_us, 3)} end_us={round(self.end_us, 3)} "
                f"cpu_children={[c.id for c in self.cpu_children]} "
                f"{device}_time={self.device_time_str} name={self.name} thread={self.thread} "
                f"input_shapes={self.input_shapes} cpu_memory_usage={self.cpu_memory_usage} "
                f"{device}_memory_usage={self.device_memory_usage} is_async={self.is_async} "
                f"is_remote={self.is_remote} seq_nr={self.sequence_nr} "
                f"is_legacy={self.is_legacy}>")


class FunctionEventAvg(_Formatted):
    """The sum over the events of one key (name, and shapes or stack when grouped by them)."""

    def __init__(self) -> None:
        self.key: str | None = None
        self.node_id = -1
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.cpu_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.input_shapes: Any = None
        self.stack: list | None = None
        self.overload_name = ""
        self.is_user_annotation = False
        self.cpu_parent = None
        self.cpu_children = None
        self.device_type = DeviceType.CPU
        self.scope = 0
        self.flops = 0

    def add(self, other: FunctionEvent | FunctionEventAvg) -> FunctionEventAvg:
        """Add `other`'s figures (the first one added also sets the key and shapes)."""
        if self.key is None:  # the first one added: its descriptive fields are the average's
            self.key = other.key
            self.node_id = other.node_id
            self.cpu_parent = other.cpu_parent
            self.cpu_children = other.cpu_children
            self.overload_name = other.overload_name
            self.input_shapes = other.input_shapes
            self.stack = other.stack
            self.scope = other.scope
            self.device_type = other.device_type
            self.is_user_annotation = other.is_user_annotation
        elif other.key != self.key:
            raise AssertionError(
                f"Expected keys to match, but got {self.key} vs {other.key}")
        self.count += other.count
        self.cpu_time_total += other.cpu_time_total
        self.self_cpu_time_total += other.self_cpu_time_total
        self.cpu_memory_usage += other.cpu_memory_usage
        self.self_cpu_memory_usage += other.self_cpu_memory_usage
        if self.flops is None:
            self.flops = other.flops
        elif other.flops is not None:
            self.flops += other.flops
        return self

    def __iadd__(self, other: FunctionEvent | FunctionEventAvg) -> FunctionEventAvg:
        return self.add(other)

    def __repr__(self) -> str:
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total_str}"
                f" cpu_time={self.cpu_time_str}  self_cuda_time=0.000us cuda_time=0.000us "
                f"input_shapes={self.input_shapes} "
                f"cpu_memory_usage={self.cpu_memory_usage} cuda_memory_usage=0>")


class EventList(list):
    """A list of events (or averages) that prints as the summary table."""

    def __init__(self, *args: Any, profile_memory: bool = False, with_flops: bool = False,
                 **kwargs: Any) -> None:
        kwargs.pop("use_device", None)
        super().__init__(*args, **kwargs)
        self._profile_memory = profile_memory
        self._with_flops = with_flops

    @property
    def self_cpu_time_total(self) -> float:
        """The sum of the events' self times (us)."""
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shapes: bool = False,
                     group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> EventList:
        """One `FunctionEventAvg` per key, in the order keys first occur: the name, plus the
        input shapes and the innermost `group_by_stack_n` stack frames when asked."""
        groups: dict[tuple, FunctionEventAvg] = {}
        for e in self:
            key = (e.key, e.node_id)
            if group_by_input_shapes:
                key += (str(e.input_shapes),)
            if group_by_stack_n > 0:
                key += tuple(e.stack[:group_by_stack_n])
            if group_by_overload_name:
                key += (e.overload_name,)
            avg = groups.get(key)
            if avg is None:
                avg = groups[key] = FunctionEventAvg()
            avg.add(e)
        averages = EventList(groups.values(), profile_memory=self._profile_memory,
                             with_flops=self._with_flops)
        for avg in averages:
            avg.stack = avg.stack[:group_by_stack_n] if group_by_stack_n else []
            if not group_by_input_shapes:
                avg.input_shapes = ""
        return averages

    def total_average(self) -> FunctionEventAvg:
        """All events added into one average (key "Total")."""
        total = FunctionEventAvg()
        for e in self:
            total.add(e)
            total.key = None  # (so the next event of another key adds too, as in PyTorch)
        total.key = "Total"
        return total

    def table(self, sort_by: str | None = None, row_limit: int = 100,
              max_src_column_width: int = 75, max_name_column_width: int = 55,
              max_shapes_column_width: int = 80, header: str | None = None,
              top_level_events_only: bool = False, time_unit: str | None = None) -> str:
        """The summary table: one row per entry, sorted by attribute `sort_by` (largest
        first), at most `row_limit` rows (-1: all)."""
        from ._table import build_table

        return build_table(self, sort_by=sort_by, header=header, row_limit=row_limit,
                           max_src_column_width=max_src_column_width,
                           max_name_column_width=max_name_column_width,
                           max_shapes_column_width=max_shapes_column_width,
                           profile_memory=self._profile_memory,
                           with_flops=self._with_flops,
                           top_level_events_only=top_level_events_only, time_unit=time_unit)

    def __str__(self) -> str:
        return self.table()

    def export_chrome_trace(self, path: str) -> None:
        """Write the events as a Chrome trace (JSON) to `path`."""
        from ._trace import write_chrome_trace

        write_chrome_trace(path, list(self), [], {})
