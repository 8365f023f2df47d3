"""`with` blocks kept in captured graphs, and how a graph break splits them.

**One mechanism splits every block a graph enters and leaves with nodes of its own**
(autocast regions, `builder.py`; inference-mode blocks, below): a `BlockKind` names the
block's enter and exit targets (graph node targets that change the thread's real state, so
the eager backend runs the block's ops inside it) and how to read and unwind how many a
thread has entered. Every graph leaves the blocks it entered, as Dynamo's do (an AOT graph
bakes a region's casts in and changes no state when it runs). At a break inside such
blocks the graph leaves them, innermost first; the segment code enters them again for real
(`reenter_block`: a `BlockExit` on the frame's stack, outermost first, as the program's
`with` statements put their exits there) around the breaking instruction; the next graph
leaves those real blocks (`leave_blocks`, innermost first) and enters its own, in the
stack's order. Each block is entered again in the grad mode it found when the program
entered it (a `with enable_grad()` between two inference-mode blocks set another one than
the outer block sets): an inference-mode block restores that mode on its exit. The grad
mode of the break is set again after them.

A block of `inference_mode(mode)` (also `inference_mode(False)`, and the wrapper that
`@inference_mode()` puts around a function) is entered and left by graph nodes, as Dynamo's
graph calls `_enter_inference_mode` / `_exit_inference_mode`: the eager backend runs the
block's ops inside the real mode (its tensors are inference tensors, grad off), and a
backend that traces the graph traces them with the mode's grad setting. Translation enters
the real mode too, so the fake ops of the block see what the program's ops will see.

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

from ..._thread_state import local as _thread_local
from ..._thread_state import set_grad_enabled as set_grad_now
from ...fx import has_side_effect
from .variables import Variable


class BlockKind:
    """A kind of `with` block a graph enters and leaves with nodes of its own: `enter`
    (called with the block's arguments) and `exit` are the graph's node targets, and enter
    or leave a block for real; `depth()` says how many a thread has entered through them
    and `unwind(depth)` leaves the ones entered beyond `depth`, innermost first."""

    __slots__ = ("name", "enter", "exit", "depth", "unwind", "variable")

    def __init__(self, name: str, enter, exit, depth, unwind, variable: type):
        self.name = name
        self.enter, self.exit = enter, exit
        self.depth, self.unwind = depth, unwind
        self.variable = variable  # (a `BlockExitVariable` class, made with kind and args)
        KINDS.append(self)

    def __repr__(self) -> str:
        return f"BlockKind({self.name})"


KINDS: list[BlockKind] = []


class BlockExitVariable(Variable):
    """The `__exit__` of a block of kind `kind` the graph entered with arguments `args`, in
    grad mode `grad`: calling it (or an exception leaving the block) leaves the block, in
    the graph; at a graph break it is rebuilt as a real `BlockExit`."""

    __slots__ = ("kind", "args", "grad")

    def __init__(self, kind: BlockKind, args: tuple, grad: bool):
        super().__init__(None)
        self.kind, self.args, self.grad = kind, args, grad

    def python_type(self) -> type:
        return object


def enter_graph_block(builder, kind: BlockKind, args: tuple) -> BlockExitVariable:
    """Enter a block of `kind` here in `builder`'s graph, and now, for the fake ops that
    follow; returns the variable of the block's `__exit__`."""
    grad = _thread_local.grad_mode
    builder.created.append(builder.graph.call_function(kind.enter, args))
    kind.enter(*args)
    builder.open_blocks.append((kind, args))
    return kind.variable(kind, args, grad)


def leave_graph_block(builder, kind: BlockKind) -> None:
    """Leave the innermost block of `kind`, in `builder`'s graph and now."""
    builder.created.append(builder.graph.call_function(kind.exit, ()))
    kind.exit()
    for i in range(len(builder.open_blocks) - 1, -1, -1):
        if builder.open_blocks[i][0] is kind:
            del builder.open_blocks[i]
            break


class BlockExit:
    """The `__exit__` of a block of kind `kind` a graph break split, made for real after
    the graph by `reenter_block` (the graph after the break enters its own); `grad`: the
    grad mode the program's block found on entry. Calling it (the block's end, or an
    exception leaving the block) leaves the block."""

    __slots__ = ("kind", "args", "grad")

    def __init__(self, kind: BlockKind, args: tuple, grad: bool):
        self.kind, self.args, self.grad = kind, args, grad

    def __call__(self, *exc) -> bool:
        self.kind.exit()
        return False  # an exception leaving the block goes on

    def __repr__(self) -> str:
        return f"BlockExit({self.kind.name}, {self.args!r}, grad={self.grad!r})"


def reenter_block(kind: BlockKind, args: tuple, grad: bool) -> BlockExit:
    """Segment code: enter a block open at a graph break (the graph left it) in the grad
    mode the program's block found, for the breaking instruction and the rest of the
    frame."""
    set_grad_now(grad)
    kind.enter(*args)
    return BlockExit(kind, args, grad)


def leave_blocks(kinds: tuple) -> None:
    """Segment code: leave the frame's innermost open blocks (of `kinds`, innermost first)
    before a graph that enters them itself (a resume point inside such blocks)."""
    for kind in kinds:
        kind.exit()


def reenter_blocks(stack: list) -> None:
    """Segment code: enter again the blocks `leave_blocks` left (their `BlockExit`s on the
    frame's stack, outermost first), when the segment reruns eagerly instead."""
    for v in stack:
        if type(v) is BlockExit:
            set_grad_now(v.grad)
            v.kind.enter(*v.args)


def block_depths() -> dict:
    """How many blocks of each kind graphs entered in this thread and have not left."""
    return {kind: kind.depth() for kind in KINDS}


def leave_frame_blocks(depths: dict, opened: list) -> dict:
    """Leave, for now, the frame's open blocks (`opened`: their exits, real or variables,
    outermost first), of which `depths` (`block_depths()`) counts the ones entered; returns
    the depths without them. Leaving an inference-mode block restores the grad mode it
    found."""
    bases = {kind: max(n - sum(v.kind is kind for v in opened), 0) for kind, n in depths.items()}
    unwind_blocks(bases)
    return bases


def unwind_blocks(depths: dict) -> None:
    """Leave the blocks of every kind entered beyond `depths` (`block_depths()`)."""
    for kind, n in depths.items():
        kind.unwind(n)


def enter_frame_blocks(opened: list) -> None:
    """Enter again, for real, the frame's blocks `leave_frame_blocks` left, each in the grad
    mode it found."""
    for v in opened:
        set_grad_now(v.grad)
        v.kind.enter(*v.args)


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


class InferenceExitVariable(BlockExitVariable):
    """The `__exit__` of a `with inference_mode(mode)` block the graph entered (`args`:
    `(mode,)`)."""

    __slots__ = ()


INFERENCE = BlockKind("inference_mode", inference_mode_enter, inference_mode_exit,
                      inference_depth, unwind_inference, InferenceExitVariable)


def enter_block(builder, mode: bool) -> BlockExitVariable:
    """Enter a `with inference_mode(mode)` block here in `builder`'s graph, and now, for the
    fake ops that follow; returns the variable of the block's `__exit__`."""
    return enter_graph_block(builder, INFERENCE, (bool(mode),))


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
