"""Common subexpressions of a joint graph merged before it is partitioned.

A decomposed backward recomputes what its forward computed: GELU's derivative evaluates
`erf(x * 0.7071...) + 1` again, layer norm's derivative the input's mean, centred values and
variance. Traced separately, those are separate nodes, and the backward graph runs them again
from the saved input. Merged into the forward's nodes (`cse_joint`), the backward reads the
forward's values instead: the partitioner saves them, and the backward skips the work (for
GELU an `erf` per element, the most expensive function of the step). The merged values are
the same operations on the same values, so every result keeps its bits.

Only pure registry ops merge (no writes, no random draws, no checks), with equal arguments:
numbers by type and exact value (`0.0` and `-0.0`, `1` and `1.0` stay apart), integer lists
and tuples alike (dims and sizes), anything else by identity. A node the graph returns is
never merged away (two outputs that eager makes as separate tensors stay separate), nor are
a checkpointed function's values merged with others (they are recomputed, the others may
be saved).
"""

from __future__ import annotations

import operator

from ...ops.overloads import OpOverload
from .joint import is_impure

_NUMBERS = (bool, int, float, str, type(None))


def _key(value, canonical: dict):
    """A hashable stand-in of argument `value` equal only for equal arguments."""
    if hasattr(value, "op") and hasattr(value, "users"):  # an FX node
        return ("node", canonical.get(value, value))
    if type(value) in _NUMBERS:
        return (type(value).__name__, repr(value))
    if isinstance(value, (list, tuple)):
        if all(type(v) is int for v in value):  # int[] (dims, sizes): a list or a tuple
            return ("ints", tuple(value))
        return (type(value).__name__, tuple(_key(v, canonical) for v in value))
    return ("object", id(value))


def _mergeable(node) -> bool:
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return True
    return isinstance(node.target, OpOverload) and not is_impure(node)


def cse_joint(gm) -> int:
    """Merge the repeated pure computations of `gm`'s graph into their first occurrence, in
    place (see the module docstring); returns the number of nodes removed."""
    graph = gm.graph
    returned = {id(a) for a in _flat(graph.output_node().args)}
    canonical: dict = {}  # node -> the node it merged into
    seen: dict = {}
    merged = []
    for n in list(graph.nodes):
        if not _mergeable(n):
            continue
        key = (n.target, bool(n.meta.get("recompute")), _key(tuple(n.args), canonical),
               _key(tuple(sorted(n.kwargs.items())), canonical))
        first = seen.get(key)
        if first is None:
            seen[key] = n
            continue
        if id(n) in returned:
            continue
        canonical[n] = first
        n.replace_all_uses_with(first)
        merged.append(n)
    for n in reversed(merged):
        if not n.users:
            graph.erase_node(n)
    if merged:
        gm.recompile()
    return len(merged)


def _flat(args) -> list:
    out = []
    for a in args:
        if isinstance(a, (list, tuple)):
            out += _flat(a)
        else:
            out.append(a)
    return out
