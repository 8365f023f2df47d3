"""`fusegrad.autograd.profiler`: the older profiler spelling (`torch.autograd.profiler`),
a context manager over the same recording as `fusegrad.profiler.profile`."""

from __future__ import annotations

import warnings
from typing import Any

from ..profiler import EventList, FunctionEvent, FunctionEventAvg, _Session, record_function

__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg", "profile", "record_function"]


class profile(_Session):
    """`with profile() as prof:` records the block; `prof.table()`, `prof.key_averages()`,
    `prof.function_events` afterwards. With `enabled=False` it records nothing and the
    `with` statement binds None, as in PyTorch."""

    def __init__(self, enabled: bool = True, *, use_cuda: bool = False,
                 use_device: str | None = None, record_shapes: bool = False,
                 with_flops: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_modules: bool = False,
                 use_kineto: bool = False, use_cpu: bool = True,
                 experimental_config: Any = None, acc_events: bool = False,
                 custom_trace_id_callback: Any = None,
                 post_processing_timeout_s: float | None = None,
                 activity_filters: Any = None) -> None:
        super().__init__(record_shapes, profile_memory, with_stack)
        self.enabled = enabled
        if use_cuda:
            warnings.warn("The attribute `use_cuda` will be deprecated soon, please use "
                          "``use_device = 'cuda'`` instead.", FutureWarning, stacklevel=2)
        self.use_cuda = use_cuda
        self.use_device = None
        self.use_cpu = use_cpu
        self.function_events: EventList | None = None
        self.entered = False

    def __enter__(self) -> profile | None:
        if not self.enabled:
            return None
        if self.entered:
            raise RuntimeError("Profiler context manager is not reentrant")
        self.entered = True
        if self.use_cuda:
            warnings.warn("CUDA is not available, disabling CUDA profiling", stacklevel=2)
        self._start_recording()
        return self

    def __exit__(self, *exc: Any) -> bool:
        if not self.enabled:
            return False
        self._stop_recording()
        self.function_events = self._events()
        self.entered = False
        return False

    def _finished(self) -> EventList:
        return self.function_events if self.function_events is not None else \
            EventList(profile_memory=self.profile_memory)

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> EventList:
        """The events averaged per name (and input shapes / stack when asked)."""
        return self._finished().key_averages(group_by_input_shape, group_by_stack_n,
                                             group_by_overload_name)

    def table(self, sort_by: str | None = None, row_limit: int = 100,
              max_src_column_width: int = 75, max_name_column_width: int = 55,
              max_shapes_column_width: int = 80, header: str | None = None,
              top_level_events_only: bool = False, time_unit: str | None = None) -> str:
        """The summary table of the recorded events (not averaged)."""
        return self._finished().table(sort_by, row_limit, max_src_column_width,
                                      max_name_column_width, max_shapes_column_width,
                                      header, top_level_events_only, time_unit)

    def total_average(self) -> FunctionEventAvg:
        """All events added into one average."""
        return self._finished().total_average()

    @property
    def self_cpu_time_total(self) -> float:
        """The sum of the events' self times (us)."""
        return self._finished().self_cpu_time_total

    def export_chrome_trace(self, path: str) -> None:
        """Write the recording as a Chrome trace."""
        self._chrome(path)

    def export_stacks(self, path: str, metric: str = "self_cpu_time_total") -> None:
        """Write the events' stacks in the collapsed flame-graph format."""
        self._export_stacks(path, metric)

    def __str__(self) -> str:
        return self.table()
