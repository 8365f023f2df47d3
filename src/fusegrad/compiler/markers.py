"""What user code asks of the compiler and the marks it puts on its functions.

`is_compiling()` is False when it runs and True where the capture stage meets it: the
translator folds the call to a constant, so a branch on it is decided while a graph is
captured, as under Dynamo. `allow_in_graph` and `assume_constant_result` mark a function
for the translator (`capture/calls.py` reads the marks): the first is recorded as one call
in the graph instead of being inlined, the second is called once while capturing and its
result kept as a constant.

`enter_recompute_region` and `exit_recompute_region` are the marks the capture stage puts
in a graph around a `checkpoint`ed function's ops: AOT autograd tags the ops traced between
them (`node.meta["recompute"]`), and the partitioners recompute those in the backward
instead of saving them, as eager checkpointing does.
"""

from __future__ import annotations

import threading

from ..fx.node import has_side_effect

# The translator answers these calls itself; run for real, they answer as eager code.
COMPILE_TIME_ANSWERS: dict = {}


def is_compiling() -> bool:
    """True while the compiler captures the calling code, False when it runs eagerly."""
    return False


def is_dynamo_compiling() -> bool:
    """True while the capture stage translates the calling code (`is_compiling`)."""
    return False


def is_exporting() -> bool:
    """True while `torch.export` traces the calling code: never here, as fusegrad has no
    `export` stage (ONNX export traces eagerly)."""
    return False


COMPILE_TIME_ANSWERS.update({is_compiling: True, is_dynamo_compiling: True,
                             is_exporting: False})


def graph_break(msg: str = "") -> None:
    """End the captured graph here (`torch._dynamo.graph_break()`): the capture stage stops
    at the call and the code after it starts a new graph. Run eagerly, it does nothing."""


graph_break._fusegrad_graph_break = True


def allow_in_graph(fn):
    """Mark `fn` (or each of a list of functions) to be recorded as one call in the captured
    graph instead of being translated; later stages trace through it. Returns `fn`."""
    if isinstance(fn, (list, tuple)):
        return [allow_in_graph(f) for f in fn]
    if not callable(fn):
        raise AssertionError("allow_in_graph expects a callable")
    fn._fusegrad_allow_in_graph = True
    return fn


def assume_constant_result(fn):
    """Mark `fn`'s result as constant: the capture stage calls it once, with the values its
    arguments have then, and keeps the result in the graph (no guard re-checks it).
    Returns `fn`."""
    fn._fusegrad_constant_result = True
    return fn


def cudagraph_mark_step_begin() -> None:
    """Mark the start of a new step for CUDA graph trees. fusegrad compiles for the CPU and
    records no CUDA graphs, so there is no step to mark and nothing to do."""


class _RecomputeRegions(threading.local):
    depth = 0  # regions entered and not left while this thread runs a graph


RECOMPUTE_REGIONS = _RecomputeRegions()


@has_side_effect  # dead-code elimination keeps the region edges
def enter_recompute_region() -> None:
    """Graph node target: the ops from here to the matching `exit_recompute_region` are
    recomputed in the backward rather than saved (a checkpointed function's)."""
    RECOMPUTE_REGIONS.depth += 1


@has_side_effect
def exit_recompute_region() -> None:
    """Graph node target: leave the innermost recompute region."""
    RECOMPUTE_REGIONS.depth = max(0, RECOMPUTE_REGIONS.depth - 1)

