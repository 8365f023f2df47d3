"""Shared by the compile tests (imports no torch, so the 3.12/3.13 runs can use it)."""

from __future__ import annotations


class Counter:
    """A backend that counts the graphs it is given and their ops (call_function and
    call_method nodes), and runs them as they are."""

    def __init__(self):
        self.graphs = 0
        self.ops = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        self.ops += sum(n.op in ("call_function", "call_method") for n in gm.graph.nodes)
        return gm.forward
