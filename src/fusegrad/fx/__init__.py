"""fusegrad.fx: PyTorch FX's graph IR, symbolic tracing, code generation and interpreters.

`symbolic_trace(fn_or_module)` records a program as a `Graph` of `Node`s; a `GraphModule`
generates readable Python source from the graph (`gm.code`) and runs it; `Interpreter` runs
a graph node by node and `Transformer` rewrites one while running it; `replace_pattern`
rewrites every occurrence of a subgraph; `passes.shape_prop.ShapeProp` records each node's
result metadata (`node.meta['val']`) by running the graph on fake tensors.

The parts that build Modules (GraphModule, the tracer, the interpreters) load on first use,
so that importing fusegrad does not import fusegrad.nn half-way through its own start-up.
"""

from importlib import import_module
from typing import Any

from .graph import Graph, PythonCode
from .node import Node, has_side_effect, map_aggregate, map_arg
from .proxy import Attribute, Proxy, TraceError

_LAZY = {
    "GraphModule": "graph_module", "Interpreter": "interpreter", "Transformer": "interpreter",
    "Tracer": "_symbolic_trace", "symbolic_trace": "_symbolic_trace",
    "wrap": "_symbolic_trace", "passes": None, "PH": "_symbolic_trace",
    "PHBase": "_symbolic_trace",
    "replace_pattern": "subgraph_rewriter", "subgraph_rewriter": None,
}

__all__ = [
    "Attribute", "Graph", "GraphModule", "Interpreter", "Node", "PH", "Proxy", "PythonCode",
    "TraceError", "Tracer", "Transformer", "has_side_effect", "map_aggregate", "map_arg",
    "replace_pattern", "symbolic_trace", "wrap",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'fusegrad.fx' has no attribute '{name}'")
    if _LAZY[name] is None:
        return import_module(f"{__name__}.{name}")
    value = getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
