"""`with` blocks kept in captured graphs whose state is the thread's or a module's:
`inference_mode` and `warnings.catch_warnings`.

A block of `inference_mode(mode)` (also `inference_mode(False)`, and the wrapper that
`@inference_mode()` puts around a function) is entered and left by graph nodes, as Dynamo's
graph calls `_enter_inference_mode` / `_exit_inference_mode`: the eager backend runs the
block's ops inside the real mode (its tensors are inference tensors, grad off), and a
backend that traces the graph traces them with the mode's grad setting. Translation enters
the real mode too, so the fake ops of the block see what the program's ops will see.

A graph break inside such a block splits it as Dynamo splits it: the graph leaves the
block before it ends, the segment code enters it again for real (`reenter_block`: its
`InferenceExit` on the frame's stack) around the breaking instruction, and the graph
after the break leaves that real block and enters its own (as autocast regions are split).
A grad-mode block inside the block keeps its mode: the segment code sets the mode of the
break again after entering the block, and the next graph after entering its own. Where
another inference-mode block lies inside such a grad-mode block, the mode it would find on
entering again is not the original's: the frame then runs eagerly from the segment's start.

`with warnings.catch_warnings():` (or `catch_warnings(record=True)`) made in the frame is
a block whose entry and exit change nothing the graph reads: it is translated as an empty
block, as Dynamo traces it (its `record=True` list is a new empty list). A statement inside
that calls the warnings module (`simplefilter`, `warn`) is a break inside the block, which
cannot be resumed: the frame is translated again up to the `catch_warnings()` call, which
breaks there; as Dynamo gives the frame up there, the segment runs eagerly from its start
(the ops before the block included). A `record=True` block records what its statements
warn: the graph's ops of such a block are run on fakes with warnings watched, and one that
warns there (a deprecated spelling: `softmax` without `dim`, `tensor(t)` of a tensor) is a
break inside the block as above, so the block runs for real and its list holds eager's
warnings. (torch 2.13 traces the block away and its list stays empty; a warning that
depends on values, which fakes do not have, is still not recorded.)"""

from __future__ import annotations

import threading
import warnings

from ...fx import has_side_effect
from .variables import ConstantVariable, GradExit, GradModeVariable, Variable


class _InferenceBlocks(threading.local):
    """The inference-mode contexts graphs entered in this thread and have not left,
    innermost last."""

    def __init__(self):
        self.stack: list = []


_blocks = _InferenceBlocks()


@has_side_effect
def inference_mode_enter(mode: bool) -> None:
    """Graph node target: a `with inference_mode(mode)` block's entry."""
    from ...autograd.grad_mode import inference_mode

    ctx = inference_mode(mode)
    ctx.__enter__()
    _blocks.stack.append(ctx)


@has_side_effect
def inference_mode_exit() -> None:
    """Graph node target: the innermost `with inference_mode(...)` block's exit (grad mode
    and inference mode as the block found them)."""
    _blocks.stack.pop().__exit__(None, None, None)


def inference_depth() -> int:
    """How many inference-mode blocks graphs entered in this thread and have not left."""
    return len(_blocks.stack)


def unwind_inference(depth: int) -> None:
    """Leave the blocks graphs entered beyond `depth`, innermost first (a graph that raised
    inside one, a translation that stopped in one)."""
    while len(_blocks.stack) > depth:
        inference_mode_exit()


def enters_inference_mode(graph_module) -> bool:
    """Whether a captured graph enters an inference-mode block."""
    graph = getattr(graph_module, "graph", None)
    return graph is not None and any(n.target is inference_mode_enter for n in graph.nodes)


class InferenceModeVariable(Variable):
    """`inference_mode(mode)` made in captured code and not entered yet."""

    __slots__ = ("mode",)

    def __init__(self, mode: bool):
        super().__init__(None)
        self.mode = mode

    def python_type(self) -> type:
        from ...autograd.grad_mode import inference_mode

        return inference_mode


class InferenceExitVariable(Variable):
    """The `__exit__` of a `with inference_mode(mode)` block the graph entered: calling it
    (or an exception leaving the block) leaves the block, in the graph."""

    __slots__ = ("mode",)

    def __init__(self, mode: bool):
        super().__init__(None)
        self.mode = mode

    def python_type(self) -> type:
        return object


def enter_block(builder, mode: bool) -> InferenceExitVariable:
    """Enter a `with inference_mode(mode)` block here in `builder`'s graph, and now, for the
    fake ops that follow; returns the variable of the block's `__exit__`."""
    node = builder.graph.call_function(inference_mode_enter, (bool(mode),))
    builder.created.append(node)
    inference_mode_enter(bool(mode))
    return InferenceExitVariable(bool(mode))


def exit_block(builder) -> None:
    """Leave the innermost inference-mode block, in `builder`'s graph and now."""
    builder.created.append(builder.graph.call_function(inference_mode_exit, ()))
    inference_mode_exit()


class InferenceExit:
    """The `__exit__` of a `with inference_mode(mode)` block a graph break split, made for
    real after the graph by `reenter_block` (every graph leaves the blocks it entered; the
    graph after the break enters its own). Calling it (the block's end, or an exception
    leaving the block) leaves the block."""

    __slots__ = ("mode",)

    def __init__(self, mode: bool):
        self.mode = mode

    def __call__(self, *exc) -> bool:
        inference_mode_exit()
        return False  # an exception leaving the block goes on

    def __repr__(self) -> str:
        return f"InferenceExit({self.mode!r})"


def reenter_block(mode: bool) -> InferenceExit:
    """Segment code: enter an inference-mode block open at a graph break (the graph left
    it), for the breaking instruction and the rest of the frame."""
    inference_mode_enter(mode)
    return InferenceExit(mode)


def leave_blocks(n: int) -> None:
    """Segment code: leave the frame's `n` innermost open inference-mode blocks before a
    graph that enters them itself (a resume point inside `with inference_mode()` blocks)."""
    for _ in range(n):
        inference_mode_exit()


def reenter_blocks(stack: list) -> None:
    """Segment code: enter again the blocks `leave_blocks` left (their `InferenceExit`s on
    the frame's stack, outermost first), when the segment reruns eagerly instead."""
    for v in stack:
        if type(v) is InferenceExit:
            inference_mode_enter(v.mode)


def splits_blocks(stack: list) -> bool:
    """Whether translation stack `stack` at a break can be rebuilt with its inference-mode
    blocks split: no inference-mode block lies inside a grad-mode block inside another
    (entered again one after the other, the inner one would find another grad mode than it
    found, and restore that one on its exit)."""
    inside = between = False
    for v in stack:
        if isinstance(v, InferenceExitVariable):
            if between:
                return False
            inside = True
        elif inside and (isinstance(v, GradModeVariable) or (
                isinstance(v, ConstantVariable) and isinstance(v.value, GradExit))):
            between = True
    return True


class CatchWarningsVariable(Variable):
    """`warnings.catch_warnings()` or `catch_warnings(record=True)` made in captured code
    and not entered yet (`made_at`: the offset of the call in the compiled frame, None for
    one an inlined function made)."""

    __slots__ = ("record", "made_at")

    def __init__(self, record: bool, made_at: int | None = None):
        super().__init__(None)
        self.record = record
        self.made_at = made_at

    def python_type(self) -> type:
        return warnings.catch_warnings


class CatchWarningsExitVariable(Variable):
    """The `__exit__` of a `with warnings.catch_warnings()` block translated as an empty
    block: calling it does nothing in the graph, and ends the watch for warnings of a
    `record=True` block (`leave_block`; `made_at`: as its `CatchWarningsVariable`'s)."""

    __slots__ = ("made_at", "record")

    def __init__(self, made_at: int | None = None, record: bool = False):
        super().__init__(None)
        self.made_at = made_at
        self.record = record

    def leave_block(self, builder) -> None:
        """The block ends here: its graph ops no longer need watching."""
        if self.record and builder.record_blocks:
            builder.record_blocks -= 1

    def python_type(self) -> type:
        return object


def catch_warnings_call(tr, args: list, kwargs: dict) -> CatchWarningsVariable | None:
    """The variable of `warnings.catch_warnings(*args, **kwargs)` called in translator `tr`
    where the block can be an empty one (no argument, or a constant `record`), else None."""
    from .variables import ConstantVariable

    record = kwargs.get("record")
    if args or set(kwargs) - {"record"} or record is not None and not (
            isinstance(record, ConstantVariable) and type(record.value) is bool):
        return None
    return CatchWarningsVariable(bool(record is not None and record.value),
                                 tr.current.offset if tr.parent is None else None)


def new_catch_warnings(record: bool) -> warnings.catch_warnings:
    """Segment code: `warnings.catch_warnings(record=record)` made in the frame and live at
    a graph break before its block, made again for real."""
    return warnings.catch_warnings(record=record)
