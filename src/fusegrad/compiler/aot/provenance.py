"""Where each node of AOT autograd's graphs came from: the captured node it was traced from.

A captured graph's nodes carry the user's `stack_trace` (capture/locations.py). While such a
graph is traced, it runs node by node (an `fx.Interpreter`) rather than through its generated
code, so the tracer knows which captured node is running: every registry op recorded then
takes that node's `stack_trace`, as PyTorch's AOT graphs do, with `seq_nr` (the sequence
number of the autograd node the op makes) and `original_aten` (the op the program called,
of which a decomposition records the parts).

The backward is traced by autograd's engine running the forward's autograd nodes. Each
captured node's autograd nodes are numbered in a range of sequence numbers that begins where
it began; `Provenance`, a `CallObserver` beneath the tracer while the backward is traced, sees
each autograd node the engine runs (`__fusegrad_observe_node__`) and gives the ops recorded
then the stack trace of the captured node that made it, `seq_nr` the autograd node's number
and `autograd_backward` True. A gradient the engine adds up after a node ran (an input read
twice) takes the meta of the node that ran last, as PyTorch's does.

Outside a trace (a graph that runs eagerly because no trace could express it) the graph runs
its generated code: the interpreter is for tracing only.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import threading

from ... import _dispatch
from ...autograd.graph import SEQUENCE
from ...fx import Interpreter


def _next_sequence_nr() -> int:
    """The sequence number the next autograd node will get (without taking it)."""
    # (`itertools.count` shows its next value as `count(N)`; reading it takes none)
    return int(repr(SEQUENCE)[6:-1].partition(",")[0])


def locatable(gm) -> bool:
    """Whether graph module `gm` runs its generated code and some node has a stack trace
    (otherwise a trace has nothing to carry, and runs the module as it is)."""
    forward = getattr(type(gm), "forward", None)
    code = getattr(forward, "__code__", None)
    if code is None or not code.co_filename.startswith("<eval_with_key>"):
        return False
    return any(n.meta.get("stack_trace") for n in gm.graph.nodes)


class _Located(Interpreter):
    """Runs a captured graph node by node, telling `provenance` which node runs."""

    def __init__(self, gm, provenance: Provenance) -> None:
        super().__init__(gm)
        self.provenance = provenance

    def run_node(self, n):
        """Run `n` with its stack trace as the one ops recorded now take."""
        if n.op in ("call_function", "call_method", "call_module"):
            self.provenance.enter(n)
        return super().run_node(n)


class Provenance(_dispatch.CallObserver):
    """The stack traces of a captured graph's nodes, handed to the traced ops (see the
    module docstring). `runner()` runs the graph; `tracing()` arms it around a trace."""

    def __init__(self, gm) -> None:
        self.gm = gm
        self.armed: int | None = None  # the thread tracing the graph now
        self.current: dict | None = None  # the meta ops recorded now take
        self.original = None  # the outermost op being recorded (set by the tracer)
        self._marks: list[int] = []  # first sequence number of each captured node ...
        self._metas: list[dict | None] = []  # ... and its meta (None: after the forward)
        self._in_backward = False

    def runner(self):
        """A function running the graph on its arguments: node by node while armed, else
        its generated code (named as the module's `forward`)."""
        forward = self.gm.forward

        @functools.wraps(forward)
        def run(*args):
            if self.armed != threading.get_ident():  # (another thread's eager call)
                return forward(*args)
            return _Located(self.gm, self).run(*args)

        return run

    @contextlib.contextmanager
    def tracing(self, tracer):
        """Arm for one trace by `tracer`: its nodes get their meta from here."""
        self.armed, self.current = threading.get_ident(), None
        self._marks, self._metas = [], []
        tracer.node_meta = self.meta
        tracer.provenance = self
        try:
            yield self
        finally:
            self.armed, self.current = None, None
            tracer.node_meta = None
            tracer.provenance = None

    def enter(self, node) -> None:
        """Captured node `node` starts running: ops and autograd nodes made now are its."""
        trace = node.meta.get("stack_trace")
        self.current = {"stack_trace": trace} if trace else {}
        self._marks.append(_next_sequence_nr())
        self._metas.append(self.current)

    def forward_done(self) -> None:
        """The program returned: what is recorded from now on is no captured node's."""
        self.current = None
        self._marks.append(_next_sequence_nr())
        self._metas.append(None)

    @contextlib.contextmanager
    def backward(self):
        """Watch the autograd nodes the engine runs while the backward is traced (entered
        beneath the tracer, so that the tracer still records every op)."""
        self._in_backward, self.current = True, None
        try:
            with self:
                yield
        finally:
            self._in_backward, self.current = False, None

    def _of(self, seq: int) -> dict | None:
        """The meta of the captured node that made the autograd node numbered `seq`."""
        i = bisect.bisect_right(self._marks, seq) - 1
        return self._metas[i] if i >= 0 else None

    def meta(self) -> dict:
        """The meta of a node recorded now (the tracer's `node_meta`)."""
        meta = dict(self.current) if self.current else {}
        if self.original is not None:
            meta["original_aten"] = self.original
        if self._in_backward:
            if self.current is not None:
                meta["autograd_backward"] = True
        elif self.current is not None:
            meta["seq_nr"] = _next_sequence_nr()
        return meta

    # ------------------------------------------------------------ the observer

    def __fusegrad_observe__(self, op, args):
        # (Calls reaching the observer are the tracer's own: made as without it.)
        return _dispatch.call(op, *args)

    def __fusegrad_observe_node__(self, node, grads: list, run):
        """The engine runs autograd node `node`: the ops it records are its captured
        node's."""
        seq = getattr(node, "_seq", -1)
        found = self._of(seq)
        self.current = None if found is None else dict(found, seq_nr=seq)
        return run(node, grads)
