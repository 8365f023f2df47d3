"""`fusegrad.profiler`: PyTorch's `torch.profiler` on the CPU.

`profile` records, for the thread that enters it, every op call (named as PyTorch's,
`aten::mm`), every backward node evaluation and every `record_function` block, with times,
optionally input shapes, Python stacks and tensor memory (`fusegrad._memory`). A `schedule`
decides per `step()` whether to record; `on_trace_ready` gets the profiler when an active
span ends. `key_averages().table()` prints PyTorch's summary table and
`export_chrome_trace(path)` writes a trace that chrome://tracing and Perfetto open.
"""

from __future__ import annotations

import enum
import gzip
import json
import os
import socket
import time
import uuid
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from ._events import DeviceType, EventList, FunctionEvent, FunctionEventAvg
from ._recorder import Recorder, record_function
from ._trace import trace_document, write_chrome_trace

__all__ = ["DeviceType", "EventList", "FunctionEvent", "FunctionEventAvg", "ProfilerAction",
           "ProfilerActivity", "kineto_available", "profile", "record_function", "schedule",
           "supported_activities", "tensorboard_trace_handler"]


class ProfilerActivity(enum.Enum):
    """What a profiler records; only CPU exists in this build."""

    CPU = 0
    XPU = 1
    CUDA = 2
    HPU = 3
    MTIA = 4
    PrivateUse1 = 5

    def __str__(self) -> str:
        return f"ProfilerActivity.{self.name}"


class ProfilerAction(enum.Enum):
    """What the profiler does at a step (a schedule's answer)."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3
    DEVICE_STOPPED = 4


_RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


def kineto_available() -> bool:
    """True: `profile` (PyTorch's Kineto-based profiler API) records here, as it does in a
    PyTorch build with Kineto."""
    return True


def supported_activities() -> set[ProfilerActivity]:
    """{ProfilerActivity.CPU}."""
    return {ProfilerActivity.CPU}


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
             skip_first_wait: int = 0) -> Callable[[int], ProfilerAction]:
    """A step -> action function: after `skip_first` steps, cycles of `wait` idle steps,
    `warmup` steps and `active` recorded steps (the last one saves), `repeat` cycles (0:
    forever). `skip_first_wait` drops the first cycle's wait."""
    if not (wait >= 0 and warmup >= 0 and active > 0 and repeat >= 0 and skip_first >= 0):
        raise AssertionError(
            f"Invalid profiler schedule arguments. Got wait={wait} (need >= 0), "
            f"warmup={warmup} (need >= 0), active={active} (need > 0), repeat={repeat} "
            f"(need >= 0), skip_first={skip_first} (need >= 0).")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results",
                      stacklevel=2)

    def action(step: int) -> ProfilerAction:
        if step < 0:
            raise AssertionError(f"Step must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait:
            step += wait
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        at = step % cycle
        if at < wait:
            return ProfilerAction.NONE
        if at < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if at < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return action


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    """A UserWarning shown once per process (PyTorch's profiler warns so)."""
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, UserWarning, stacklevel=4)


def _parse_activities(activities: Iterable) -> tuple[set, dict]:
    """The kinds of `activities` and the subsets asked of some: each item a kind, or a dict
    {kind: names} (an empty list asks for nothing of that kind); a kind named twice is an
    error."""
    kinds: set[ProfilerActivity] = set()
    filters: dict[ProfilerActivity, set[str]] = {}
    for item in activities:
        if isinstance(item, ProfilerActivity):
            if item in kinds:
                raise ValueError(f"Activity {item} specified more than once")
            kinds.add(item)
        elif isinstance(item, dict):
            for kind, names in item.items():
                if kind in kinds:
                    raise ValueError(f"Activity {kind} specified more than once")
                kinds.add(kind)
                filters[kind] = set(names)
        else:
            raise TypeError(f"Expected ProfilerActivity or dict, got {type(item)}")
    return kinds, filters


def _always_record(step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None,
                              use_gzip: bool = False,
                              use_python_export: bool = False) -> Callable[[Any], None]:
    """An `on_trace_ready` handler writing each trace to
    `dir_name/<worker>.<time in ns>.pt.trace.json` (`.gz` with `use_gzip`)."""
    def handler(prof: Any) -> None:
        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker}.{time.time_ns()}.pt.trace.json" + (".gz" if use_gzip else "")
        prof.export_chrome_trace(os.path.join(dir_name, name))

    return handler


class _Session:
    """What profilers of both spellings share: a recording and its results."""

    # The older spelling passes no FLOPs or modules flags; `profile` sets them.
    with_flops = False
    with_modules = False
    _trace_id_callback: Callable[[], str] | None = None

    def __init__(self, record_shapes: bool, profile_memory: bool, with_stack: bool) -> None:
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self._recorder: Recorder | None = None  # the recording in progress
        self._result: Recorder | None = None  # the last finished recording

    def _start_recording(self) -> None:
        self._recorder = Recorder(self.record_shapes, self.profile_memory, self.with_stack,
                                  self.with_flops)
        self._recorder.start()

    def _stop_recording(self) -> None:
        if self._recorder is not None:
            self._recorder.stop()
            if getattr(self, "acc_events", False) and self._result is not None:
                # Accumulating across a schedule's cycles: the earlier cycles' events first.
                self._recorder.events[:0] = self._result.events
                self._recorder.memory[:0] = self._result.memory
            self._result, self._recorder = self._recorder, None

    def _events(self) -> EventList:
        events = self._result.events if self._result is not None else []
        return EventList(events, profile_memory=self.profile_memory,
                         with_flops=self.with_flops)

    def _chrome(self, path: str) -> None:
        result = self._result
        events = result.events if result is not None else []
        memory = result.memory if result is not None else []
        base = 0.0  # times from the start; baseTimeNanoseconds dates the start
        callback = self._trace_id_callback
        meta: dict[str, Any] = {
            "trace_id": callback() if callback is not None else uuid.uuid4().hex.upper()}
        # PyTorch writes a recording option's flag only when it is set.
        for flag in ("with_stack", "profile_memory", "record_shapes", "with_modules",
                     "with_flops"):
            if getattr(self, flag):
                meta[flag] = 1
        meta.update({"host_name": socket.gethostname(), "displayTimeUnit": "ms",
                     "baseTimeNanoseconds": result.wall_ns if result is not None else 0})
        if os.fspath(path).endswith(".gz"):
            doc = trace_document(events, memory, dict(meta, traceName=os.fspath(path)), base)
            data = gzip.compress(json.dumps(doc).encode())
            from .._atomic_write import write_atomically

            write_atomically(path, lambda f: f.write(data))
            return
        write_chrome_trace(path, events, memory, meta, base)

    def _export_stacks(self, path: str, metric: str) -> None:
        """One line per event with a stack: the frames outermost first, joined by ';',
        then the metric in whole microseconds (the flame-graph input format)."""
        if not self.with_stack:
            raise AssertionError("Stack export requires with_stack=True")
        lines = []
        for e in self._events():
            if e.stack:
                frames = ";".join(reversed(e.stack))
                lines.append(f"{frames} {int(getattr(e, metric))}\n")
        with open(path, "w") as f:
            f.writelines(lines)


class profile(_Session):
    """`with profile(...) as prof:` records the block; `prof.step()` marks a step of a
    `schedule`; results come from `events()`, `key_averages()`, `export_chrome_trace()`."""

    def __init__(self, *, activities: Iterable[ProfilerActivity] | None = None,
                 schedule: Callable[[int], ProfilerAction] | None = None,
                 on_trace_ready: Callable[..., Any] | None = None,
                 record_shapes: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False, experimental_config: Any = None,
                 execution_trace_observer: Any = None, acc_events: bool = False,
                 use_cuda: bool | None = None,
                 custom_trace_id_callback: Callable[[], str] | None = None) -> None:
        super().__init__(record_shapes, profile_memory, with_stack)
        self.with_flops = with_flops
        self.with_modules = with_modules
        self._trace_id_callback = custom_trace_id_callback
        # PyTorch's order: the kinds named (a dict names kinds with a subset each), the
        # `use_cuda` adjustment, a refusal when none is left, then the list parsed for
        # repeats and wrong items.
        if activities is not None:
            chosen: set[ProfilerActivity] = set()
            for item in activities:
                if isinstance(item, ProfilerActivity):
                    chosen.add(item)
                elif isinstance(item, dict):
                    chosen.update(item.keys())
        else:
            chosen = supported_activities()
        if use_cuda is not None:
            warnings.warn("`use_cuda` is deprecated, use `activities` argument instead",
                          FutureWarning, stacklevel=2)
            if use_cuda:
                chosen.add(ProfilerActivity.CUDA)
            else:
                chosen.discard(ProfilerActivity.CUDA)
        if not chosen:
            raise AssertionError("No valid profiler activities found")
        if activities is not None:
            self.activities, self.activity_filters = _parse_activities(activities)
        else:
            self.activities, self.activity_filters = supported_activities(), {}
        self.schedule = schedule if schedule is not None else _always_record
        self.record_steps = schedule is not None
        self.on_trace_ready = on_trace_ready
        self.acc_events = acc_events
        self.step_num = 0
        self.current_action = self.schedule(0)
        self._step_event: FunctionEvent | None = None

    def __enter__(self) -> profile:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _check_activities(self) -> None:
        if ProfilerActivity.CUDA in self.activities:
            warnings.warn("CUDA is not available, disabling CUDA profiling", stacklevel=3)
        if ProfilerActivity.CPU not in self.activities:
            raise AssertionError("No activities specified for the profiler")

    def start(self) -> None:
        """Begin: record now if the schedule says so for step 0."""
        self._check_activities()
        self.current_action = self.schedule(self.step_num)
        self._transit(ProfilerAction.NONE, self.current_action)
        self._begin_step()

    def stop(self) -> None:
        """End: a recording in progress ends and goes to `on_trace_ready`."""
        self._end_step()
        if self.current_action in _RECORDING:
            self._save()
        self.current_action = ProfilerAction.NONE

    def step(self) -> None:
        """Mark the end of a step: the schedule's action for the next one takes effect."""
        self._end_step()
        previous = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transit(previous, self.current_action)
        self._begin_step()

    def _transit(self, previous: ProfilerAction, current: ProfilerAction) -> None:
        if previous is ProfilerAction.RECORD_AND_SAVE:
            self._save()
        elif previous is ProfilerAction.RECORD and current not in _RECORDING:
            warnings.warn(f"Incorrect schedule: RECORD followed by {current.name}",
                          stacklevel=3)
            self._save()
        if (current is ProfilerAction.WARMUP or current in _RECORDING) and \
                self._recorder is None and self._result is not None and not self.acc_events:
            _warn_once("Warning: Profiler clears events at the end of each cycle. Only events "
                       "from the current cycle will be reported. To keep events across "
                       "cycles, set acc_events=True.")
        if current in _RECORDING and self._recorder is None:
            self._start_recording()

    def _save(self) -> None:
        self._stop_recording()
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def _begin_step(self) -> None:
        if self.record_steps and self._recorder is not None:
            event = self._recorder.begin("ProfilerStep*", annotation=True)
            event.trace_name = f"ProfilerStep#{self.step_num}"
            self._step_event = event

    def _end_step(self) -> None:
        if self._step_event is not None and self._recorder is not None:
            self._recorder.end(self._step_event)
        self._step_event = None

    # ------------------------------------------------------------------ results

    def events(self) -> EventList:
        """The recorded events, in start order."""
        if self._result is None:
            raise AssertionError("Profiler must be initialized before accessing events")
        return self._events()

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> EventList:
        """The events averaged per name (and input shapes / stack when asked)."""
        if self._result is None:
            raise AssertionError("Profiler must be initialized before getting key averages")
        return self._events().key_averages(group_by_input_shape, group_by_stack_n,
                                           group_by_overload_name)

    def export_chrome_trace(self, path: str) -> None:
        """Write the last recording as a Chrome trace (gzip-compressed for a `.gz` path)."""
        self._chrome(path)

    def export_stacks(self, path: str, metric: str = "self_cpu_time_total") -> None:
        """Write the events' stacks in the collapsed flame-graph format."""
        self._export_stacks(path, metric)
