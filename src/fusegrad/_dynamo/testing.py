"""Backends for tests, under PyTorch's `torch._dynamo.testing` names: they count what the
capture stage hands them and run each graph as it is."""

from __future__ import annotations

from ..compiler import lookup_backend


def _op_count(gm) -> int:
    """The calls (functions, methods, modules) in `gm`'s graph."""
    return sum(n.op.startswith("call_") for n in gm.graph.nodes)


class CompileCounter:
    """A backend counting the graphs it is given (`frame_count`) and the calls in them
    (`op_count`); it runs each graph eagerly."""

    def __init__(self) -> None:
        self.clear()

    def __call__(self, gm, example_inputs):
        self.frame_count += 1
        self.op_count += _op_count(gm)
        return gm.forward

    def clear(self) -> None:
        """Set the counts back to zero."""
        self.frame_count = 0
        self.op_count = 0


class CompileCounterWithBackend(CompileCounter):
    """`CompileCounter` that compiles each graph with `backend` (a name or a callable) and
    keeps the graphs it was given (`graphs`)."""

    def __init__(self, backend) -> None:
        self.backend = backend
        super().__init__()

    def __call__(self, gm, example_inputs):
        self.frame_count += 1
        self.op_count += _op_count(gm)
        self.graphs.append(gm)
        return lookup_backend(self.backend)(gm, example_inputs)

    def clear(self) -> None:
        """Set the counts back to zero and forget the graphs."""
        super().clear()
        self.graphs = []


__all__ = ["CompileCounter", "CompileCounterWithBackend"]
