"""Registry-level graphs for the code generator's tests, built directly with
`fusegrad.fx.Graph` (targets are small callable handles carrying an `op` attribute, which
`resolve_op` follows to the registry entry).

Imports no torch: the child processes of the cache tests build their graphs with it and
start in a fraction of the time `import torch` takes.
"""

from __future__ import annotations

import fusegrad
from fusegrad import fx
from fusegrad._dispatch import call
from fusegrad.ops import REGISTRY


class Handle:
    """A printable, callable graph target standing for a registry op."""

    def __init__(self, op):
        self.op = op
        self.__name__ = op.name.replace(".", "_")

    def __call__(self, *args):
        return call(self.op, *args)


class Recorder:
    """Builds a registry-level graph: `r.op("add.Tensor", a, b)`."""

    def __init__(self):
        self.graph = fx.Graph()
        self.n = 0

    def input(self):
        self.n += 1
        return self.graph.placeholder(f"x{self.n}")

    def op(self, name, *args):
        return self.graph.call_function(Handle(REGISTRY[name]), tuple(args))

    def module(self, outputs):
        self.graph.output(tuple(outputs))
        return fx.GraphModule(fusegrad.nn.Module(), self.graph)


def chain(r: Recorder, x):
    """(sin(x) * exp(-x * x) + 0.5 * x) / (1 + |x|): one pointwise kernel."""
    s = r.op("sin", x)
    e = r.op("exp", r.op("neg", r.op("mul.Tensor", x, x)))
    num = r.op("add.Tensor", r.op("mul.Tensor", s, e), r.op("mul.Tensor", x, 0.5))
    return r.op("div.Tensor", num, r.op("add.Tensor", r.op("abs", x), 1))
