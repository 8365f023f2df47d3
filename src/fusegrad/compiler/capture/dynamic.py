"""Which sizes of a graph's tensor inputs are symbolic (dynamic shapes), as Dynamo decides.

- `compile(..., dynamic=True)`: every size of every input (not parameters or buffers).
- `dynamic=None` (the default) with `config.automatic_dynamic_shapes`: static first; when a
  capture at the same start offset sees an input whose size at some dimension differs from
  the one recorded before, that dimension is symbolic from then on (so a third batch size
  reuses the second graph).
- `dynamic=False`: all static, whatever was marked.
- Integer inputs (a local int after a graph break, an int argument) follow the same rules,
  unless `config.specialize_int` (then they are always constants, guarded on their value).
- Float inputs (a float argument, a `loss.item()` on the stack after a break) too, unless
  `config.specialize_float` (symfloat.py): PyTorch's `specialize_float = False`.
- `mark_dynamic(t, dim)` / `maybe_mark_dynamic(t, dim)` make a dimension symbolic from the
  first capture; `mark_static(t, dim)` keeps it static.

Sizes 0 and 1 always stay static (PyTorch's 0/1 specialisation). An input laid out densely
in some order of its dims (row-major, a transpose, channels_last, `nonzero()`'s column-major
result) has strides that are products of its sizes in that order: its fake carries them as
such, and its guard checks the order (`input_order`). Any other layout (a slice with a step,
an expanded tensor) stays static: its strides are not functions of its sizes.
"""

from __future__ import annotations

import weakref

from ..._shapes import dense_order
from ..._tensor import Tensor

# id(tensor) -> (weak reference, {"dynamic": set, "static": set}); tensors have no __dict__,
# and a WeakKeyDictionary would compare tensors with `==` (elementwise).
_MARKS: dict[int, tuple] = {}


def input_order(t: Tensor) -> tuple | None:
    """The order of `t`'s dims in memory, outermost first, when `t` is laid out densely in
    one (`0, 1, ...` for a contiguous tensor), else None: the layout a graph input with
    symbolic sizes is guarded on."""
    data = t._data
    if data.flags.c_contiguous:
        return tuple(range(data.ndim))
    return dense_order(data.shape, data.strides, data.itemsize)


def _marks_of(t: Tensor, create: bool = False) -> dict | None:
    entry = _MARKS.get(id(t))
    if entry is not None and entry[0]() is t:
        return entry[1]
    if not create:
        return None
    key = id(t)
    marks = {"dynamic": set(), "static": set(), "strict": set()}
    _MARKS[key] = (weakref.ref(t, lambda _r, k=key: _MARKS.pop(k, None)), marks)
    return marks


def _dims(t: Tensor, index) -> list[int]:
    dims = list(index) if isinstance(index, (list, tuple)) else [index]
    n = t.dim()
    out = []
    for d in dims:
        if not -n <= d < n:
            raise AssertionError(f"Attempted to mark dimension {d} on a tensor of rank {n}")
        out.append(d % n)
    return out


def mark_dynamic(t: Tensor, index, *, min=None, max=None) -> None:  # noqa: A002
    """Make size `index` (an int or a list of them) of `t` symbolic when a compiled function
    first captures it; code that specialises it to a constant is an error
    (`ConstraintViolationError`)."""
    marks = _marks_of(t, create=True)
    for d in _dims(t, index):
        marks["dynamic"].add(d)
        marks["strict"].add(d)
        marks["static"].discard(d)


def maybe_mark_dynamic(t: Tensor, index) -> None:
    """Make size `index` of `t` symbolic when first captured, unless the code specialises
    it (then it is a constant, guarded, and no error)."""
    marks = _marks_of(t, create=True)
    for d in _dims(t, index):
        marks["dynamic"].add(d)
        marks["static"].discard(d)


def strict_dims(t: Tensor) -> frozenset:
    """The sizes of `t` marked with `mark_dynamic` (not `maybe_mark_dynamic`)."""
    marks = _marks_of(t)
    return frozenset(marks["strict"]) if marks is not None else frozenset()


def mark_static(t: Tensor, index=None) -> None:
    """Keep size `index` of `t` (all sizes when None) static."""
    marks = _marks_of(t, create=True)
    dims = range(t.dim()) if index is None else _dims(t, index)
    for d in dims:
        marks["static"].add(d)
        marks["dynamic"].discard(d)
        marks["strict"].discard(d)


class DynamicPolicy:
    """Decides the symbolic sizes of inputs for one compiled function (one FrameRunner)."""

    def __init__(self, dynamic, config):
        self.dynamic = dynamic
        self.config = config
        self.seen: dict[tuple, tuple] = {}  # (start offset, source) -> sizes (None: dynamic)

    def for_capture(self, start: int):
        """The `dynamic_dims(source, tensor)` callable for a capture from offset `start`."""
        return lambda source, value: self.dims(start, source, value)

    def int_for_capture(self, start: int):
        """The `dynamic_ints(source, value)` callable for a capture from offset `start`."""
        return lambda source, value: self.is_dynamic_int(start, source, value)

    def is_dynamic_int(self, start: int, source: str, value: int) -> bool:
        """Whether integer input `value` (read from `source`) is a symbol: with
        `dynamic=True`, or once it changed between captures (automatic dynamic)."""
        if self.dynamic is False or getattr(self.config, "specialize_int", False):
            return False
        if self.dynamic is True:
            return value >= 2
        if not self.config.automatic_dynamic_shapes:
            return False
        # A change is noticed from any value (a step counter going 1 -> 2 is dynamic from
        # its second capture), but 0 and 1 stay static, as sizes do.
        key = (start, source)
        before = self.seen.get(key, value)
        self.seen[key] = None if before is None or before != value else value
        return self.seen[key] is None and value >= 2

    def float_for_capture(self, start: int):
        """The `dynamic_floats(source, value)` callable for a capture from offset `start`."""
        return lambda source, value: self.is_dynamic_float(start, source, value)

    def is_dynamic_float(self, start: int, source: str, value: float) -> bool:
        """Whether float input `value` (read from `source`) is a graph input: with
        `dynamic=True`, or once it changed between captures (automatic dynamic)."""
        if self.dynamic is False or getattr(self.config, "specialize_float", False):
            return False
        if self.dynamic is True:
            return True
        if not self.config.automatic_dynamic_shapes:
            return False
        key = (start, source, float)
        before = self.seen.get(key, value)
        # repr tells -0.0 from 0.0 and finds NaN equal to NaN, as value guards do.
        self.seen[key] = None if before is None or repr(before) != repr(value) else value
        return self.seen[key] is None

    def dims(self, start: int, source: str, value: Tensor) -> tuple:
        """The dimensions of input `value` (read from `source`) to make symbolic."""
        if self.dynamic is False or "._parameters[" in source or "._buffers[" in source:
            return ()  # parameters and buffers stay static, as PyTorch's by default
        shape = tuple(value.shape)
        if self.dynamic is True:
            chosen = set(range(len(shape)))
        else:
            chosen = set()
            if self.config.automatic_dynamic_shapes:
                key = (start, source)
                before = self.seen.get(key)
                if before is not None and len(before) == len(shape):
                    merged = tuple(None if a is None or a != b else a
                                   for a, b in zip(before, shape))
                    chosen = {i for i, a in enumerate(merged) if a is None}
                else:
                    merged = shape
                self.seen[key] = merged
        marks = _marks_of(value)
        if marks is not None:
            chosen = (chosen | marks["dynamic"]) - marks["static"]
        chosen = {d for d in chosen if shape[d] >= 2}
        if chosen and input_order(value) is None:
            return ()
        return tuple(sorted(chosen))
