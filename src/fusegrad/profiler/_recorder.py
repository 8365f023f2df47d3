"""Recording: the dispatch observer that times every op call, backward node and
`record_function` block of the thread that started it, and the memory it gains.

The recorder is a `CallObserver` on the thread's mode stack: while it is there every op
takes dispatch's slow path, which hands it the call; with no recorder the fast path is
untouched. Backward nodes reach it through the engine, which asks once per backward pass
whether the thread has one. Op events are named as PyTorch's: `aten::` and the overload's
base name (`add.Tensor` -> `aten::add`); a node's evaluation makes two nested events,
`autograd::engine::evaluate_function: MmBackward0` around `MmBackward0`.
"""

from __future__ import annotations

import inspect
import itertools
import os
import threading
import time
import traceback
from contextlib import ContextDecorator
from typing import Any

import numpy as np

from .. import _dispatch, _memory
from . import _composites, _flops
from ._events import FunctionEvent

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_EVALUATE = "autograd::engine::evaluate_function: "
_EVENT_IDS = itertools.count(1)
# PyTorch's RecordScope numbers that events carry as `scope`.
_FUNCTION, _BACKWARD_FUNCTION, _USER_SCOPE = 0, 1, 7


def _shape_of(a: Any) -> list:
    data = getattr(a, "_data", None)
    if data is not None and hasattr(data, "shape"):
        return list(data.shape)
    return []


_UNKNOWN = object()
_ARITY: dict = {}  # op -> how many arguments its schema has (None: not known)


def _arity(fn: Any) -> int | None:
    """How many positional parameters `fn` has (a NumPy ufunc: its inputs); None for a
    function of `*args` or one without a signature."""
    if isinstance(fn, np.ufunc):
        return fn.nin
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    count = 0
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            return None
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            count += 1
    return count


def schema_arity(op: Any) -> int | None:
    """How many arguments the schema of registry op `op` has, as far as its functions tell:
    a ufunc kernel's inputs, else the fewer positional parameters of its kernel and its meta
    (both take every schema argument, defaults for those a call leaves out; a kernel's extra
    helper parameters are mostly not the meta's too); None when either takes `*args`."""
    n = _ARITY.get(op, _UNKNOWN)
    if n is _UNKNOWN:
        if isinstance(op.kernel, np.ufunc):
            n = op.kernel.nin
        else:
            k, m = _arity(op.kernel), _arity(op.meta)
            n = None if k is None or m is None else min(k, m)
        _ARITY[op] = n
    return n


def op_input_shapes(op: Any, args: tuple) -> list:
    """`record_shapes`' list for a call of registry op `op`: one entry per schema argument,
    as PyTorch's (a tensor's shape; `[]` for anything else, and for each argument the call
    left to its default)."""
    shapes = [_shape_of(a) for a in args]
    n = schema_arity(op)
    if n is not None and n > len(shapes):
        shapes += [[] for _ in range(n - len(shapes))]
    return shapes


def _user_stack() -> list[str]:
    """The calling Python frames outside fusegrad, innermost first, as
    `path(line): function`."""
    frames = traceback.extract_stack()
    return [f"{f.filename}({f.lineno}): {f.name}" for f in reversed(frames)
            if not f.filename.startswith(_PACKAGE)]


class Recorder(_dispatch.CallObserver):
    """One recording session: the events in start order and the memory samples."""

    def __init__(self, record_shapes: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_flops: bool = False) -> None:
        # FLOPs come from the input shapes, which PyTorch then records too.
        self.record_shapes = record_shapes or with_flops
        self.with_flops = with_flops
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.events: list[FunctionEvent] = []
        self.memory: list[tuple[float, int, int, int]] = []  # (time, bytes, total, storage)
        self._open: list[FunctionEvent] = []
        self._names: dict[Any, str] = {}
        self._previous_listener = None
        self.thread = threading.get_native_id()
        self.base_ns = 0
        self.wall_ns = 0
        self.running = False

    # ------------------------------------------------------------------ session

    def start(self) -> None:
        """Begin recording the calling thread."""
        self.wall_ns = time.time_ns()
        self.base_ns = time.perf_counter_ns()
        if self.profile_memory:
            _memory.hold()
            self._previous_listener = _memory.listener
            _memory.listener = self._on_memory
        self.__enter__()
        _composites.start()
        self.running = True

    def stop(self) -> None:
        """Stop recording; blocks still open end now."""
        if not self.running:
            return
        self.running = False
        _composites.stop()
        self.__exit__(None, None, None)
        now = self.now()
        for event in self._open:
            event.end_us = now
        self._open = []
        # Each event held its own bytes; children start after their parent, so in reverse
        # order every child's total is ready before its parent adds it.
        for event in reversed(self.events):
            for child in event.cpu_children:
                event.cpu_memory_usage += child.cpu_memory_usage
        if self.profile_memory:
            _memory.listener = self._previous_listener
            _memory.release()

    def now(self) -> float:
        """Microseconds since the start."""
        return (time.perf_counter_ns() - self.base_ns) / 1000.0

    # ------------------------------------------------------------------ events

    def begin(self, name: str, input_shapes: list | None = None, sequence_nr: int = -1,
              annotation: bool = False, scope: int = _FUNCTION) -> FunctionEvent:
        """Open an event (a child of the innermost open one). `scope` is PyTorch's record
        scope number: a user annotation's is `_USER_SCOPE` whatever is passed."""
        stack = _user_stack() if self.with_stack else None
        if input_shapes is None:  # PyTorch's events list none rather than lacking the list
            input_shapes = []
        now = self.now()
        # Numbered in start order by one counter for the process, as PyTorch's events (their
        # ids stay distinct when recordings are accumulated).
        event = FunctionEvent(next(_EVENT_IDS), name, self.thread, now, now,
                              input_shapes=input_shapes, stack=stack,
                              sequence_nr=sequence_nr, is_user_annotation=annotation,
                              scope=_USER_SCOPE if annotation else scope)
        if self._open:
            parent = self._open[-1]
            event.cpu_parent = parent
            parent.cpu_children.append(event)
        self.events.append(event)
        self._open.append(event)
        return event

    def end(self, event: FunctionEvent) -> None:
        """Close `event` (and any event left open inside it)."""
        event.end_us = self.now()
        while self._open:
            if self._open.pop() is event:
                break

    def _on_memory(self, nbytes: int, total: int, storage: int) -> None:
        if threading.get_native_id() == self.thread:
            now = self.now()
            if self._open:  # the innermost event's own share; totals add up at the end
                self._open[-1].cpu_memory_usage += nbytes
            else:  # outside every event (a `del`): PyTorch lists it as an instant event
                self.events.append(FunctionEvent(next(_EVENT_IDS), "[memory]", self.thread,
                                                 now, now, input_shapes=[],
                                                 cpu_memory_usage=nbytes))
            self.memory.append((now, nbytes, total, storage))
        if self._previous_listener is not None:
            self._previous_listener(nbytes, total, storage)

    def _op_name(self, op: Any) -> str:
        name = self._names.get(op)
        if name is None:
            name = self._names[op] = "aten::" + op.name.split(".")[0]
        return name

    # ------------------------------------------------------------------ observer hooks

    def __fusegrad_observe__(self, op: Any, args: tuple) -> Any:
        if self._open and self._open[-1].name == self._op_name(op):
            # A composite's event of the op's own name (`F.embedding` around the op): one
            # call in PyTorch's profile, with the composite's shapes.
            return _dispatch.call(op, *args)
        shapes = None
        if self.record_shapes:
            shapes = op_input_shapes(op, args)
        event = self.begin(self._op_name(op), shapes)
        if self.with_flops:
            event.flops = _flops.op_flops(event.name, shapes)
        try:
            return _dispatch.call(op, *args)
        finally:
            self.end(event)

    def __fusegrad_observe_node__(self, node: Any, grads: list, run: Any) -> Any:
        """Time a backward node's evaluation, `run(node, grads)`."""
        name = node.name()
        seq = getattr(node, "_seq", -1)
        outer = self.begin(_EVALUATE + name, None, seq)
        inner = self.begin(name, [_shape_of(g) for g in grads] if self.record_shapes else None,
                           seq, scope=_BACKWARD_FUNCTION)
        try:
            return run(node, grads)
        finally:
            self.end(inner)
            self.end(outer)


class record_function(ContextDecorator):
    """Mark a block (or, as a decorator, a function) as one named event in the profile of
    the calling thread; nothing is recorded when no profiler runs."""

    def __init__(self, name: str, args: str | None = None) -> None:
        self.name = name
        self.args = args
        self._entered: list[tuple[Recorder, FunctionEvent] | None] = []

    def __enter__(self) -> record_function:
        recorder = _dispatch.observer()
        if isinstance(recorder, Recorder):
            self._entered.append((recorder, recorder.begin(self.name, annotation=True)))
        else:
            self._entered.append(None)
        return self

    def __exit__(self, *exc: Any) -> bool:
        entry = self._entered.pop() if self._entered else None
        if entry is not None:
            entry[0].end(entry[1])
        return False
