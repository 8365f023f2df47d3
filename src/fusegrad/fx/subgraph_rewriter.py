"""`replace_pattern`: find every occurrence of one traced subgraph and splice in another.

The pattern and the replacement are plain functions (or Modules) with the same parameters.
Both are traced; a match binds each pattern parameter to any argument value of the target
graph (a node or a literal) and each pattern operation to a node with the same opcode, target
and literal arguments. A match is only used when none of its inner values is read outside
it, and matches do not overlap. Each match is replaced by a copy of the replacement's nodes,
inserted just before the first user of the matched result, as torch.fx does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from .graph import Graph
from .node import Node
from .passes.utils.matcher_utils import InternalMatch


@dataclass
class ReplacedPatterns:
    """One replaced occurrence: the matched result node, the pattern-to-graph map and the
    nodes inserted in its place."""

    anchor: Node
    nodes_map: dict
    replacements: list


class Match(NamedTuple):
    """One replaced occurrence: the pattern's result node, and the map from pattern nodes to
    what they matched (graph nodes or, for parameters, any argument value; parameters bound
    to a value that an earlier replacement rewrote show the rewritten value)."""

    anchor: Node
    nodes_map: dict[Node, Node]


def _trace(fn: Any) -> Graph:
    from ._symbolic_trace import symbolic_trace

    if isinstance(fn, Graph):
        return fn
    if isinstance(getattr(fn, "graph", None), Graph):
        return fn.graph
    return symbolic_trace(fn).graph


def _pattern_result(graph: Graph) -> Node:
    out = graph.output_node().args[0]
    if not isinstance(out, Node):
        raise ValueError("replace_pattern: the pattern must return a single traced value")
    return out


class _Matcher:
    def __init__(self, pattern: Graph, ignore_literals: bool = False) -> None:
        self.pattern = pattern
        self.ignore_literals = ignore_literals
        self.anchor = _pattern_result(pattern)
        self.inputs = [n for n in pattern.nodes if n.op == "placeholder"]

    def match_at(self, gn: Node) -> dict[Node, Node] | None:
        mapping: dict[Node, Node] = {}
        if not self._node(self.anchor, gn, mapping):
            return None
        inner = {p: g for p, g in mapping.items() if p.op != "placeholder"}
        matched = set(inner.values())
        for p, g in inner.items():
            if p is not self.anchor and any(u not in matched for u in g.users):
                return None  # an inner value is read outside the match
        if len(matched) != len(inner):
            return None  # two pattern operations bound to one graph node
        return mapping

    def _node(self, pn: Node, gn: Any, mapping: dict) -> bool:
        if pn in mapping:
            bound = mapping[pn]
            return bound is gn or (not isinstance(gn, Node) and not isinstance(bound, Node)
                                   and type(bound) is type(gn) and bound == gn)
        if pn.op == "placeholder":
            mapping[pn] = gn  # a parameter matches any argument, literals included
            return True
        if not isinstance(gn, Node):
            return False
        if pn.op != gn.op or pn.target != gn.target:
            return False
        if len(pn.args) != len(gn.args) or set(pn.kwargs) != set(gn.kwargs):
            return False
        mapping[pn] = gn
        ok = self._arg(pn.args, gn.args, mapping) and all(
            self._arg(pn.kwargs[k], gn.kwargs[k], mapping) for k in pn.kwargs)
        if not ok:
            del mapping[pn]
        return ok

    def _arg(self, pa: Any, ga: Any, mapping: dict) -> bool:
        if isinstance(pa, Node):
            return self._node(pa, ga, mapping)
        if isinstance(pa, (tuple, list)):
            return (type(pa) is type(ga) and len(pa) == len(ga)
                    and all(self._arg(x, y, mapping) for x, y in zip(pa, ga)))
        if isinstance(ga, Node):
            return False
        if self.ignore_literals and isinstance(pa, (int, float, bool)) and \
                isinstance(ga, (int, float, bool)):
            return True
        return type(pa) is type(ga) and pa == ga


def replace_pattern(gm: Any, pattern: Any, replacement: Any) -> list[Match]:
    """Replace every non-overlapping match of `pattern` in `gm`'s graph by `replacement`.

    Returns the matches, in graph order; `gm` is recompiled."""
    done = _replace(gm, pattern, replacement, None, None)
    return [Match(r.anchor, r.nodes_map) for r in done]


def replace_pattern_with_filters(gm: Any, pattern: Any, replacement: Any = None,
                                 match_filters: list | None = None,
                                 ignore_literals: bool = False,
                                 replacement_callback: Any = None,
                                 node_name_match: str = "") -> list[ReplacedPatterns]:
    """`replace_pattern`, keeping only the matches every `match_filters` function accepts
    (each called as `f(internal_match, original_graph, pattern_graph)`); the replacement
    may instead come from `replacement_callback(internal_match, original_graph,
    pattern_graph)`. Returns `ReplacedPatterns` (anchor, nodes_map, replacements)."""
    if replacement is None and replacement_callback is None:
        raise ValueError("Must provide either a replacement GraphModule or a replacement "
                         "callback")
    return _replace(gm, pattern, replacement, match_filters, replacement_callback,
                    ignore_literals, node_name_match)


def _replace(gm: Any, pattern: Any, replacement: Any, match_filters: list | None,
             replacement_callback: Any, ignore_literals: bool = False,
             node_name_match: str = "") -> list[ReplacedPatterns]:
    pattern_graph = _trace(pattern)
    replacement_graph = _trace(replacement) if replacement is not None else None
    matcher = _Matcher(pattern_graph, ignore_literals)
    if replacement_graph is not None:
        rep_inputs = [n for n in replacement_graph.nodes if n.op == "placeholder"]
        if len(rep_inputs) != len(matcher.inputs):
            raise ValueError("replace_pattern: pattern and replacement take different numbers "
                             "of arguments")
    graph = gm.graph
    used: set[Node] = set()
    matches: list[tuple[dict, InternalMatch]] = []
    for gn in list(graph.nodes):
        if node_name_match and node_name_match not in gn.name:
            continue
        mapping = matcher.match_at(gn)
        if mapping is None:
            continue
        inner = {g for p, g in mapping.items() if p.op != "placeholder"}
        if inner & used:
            continue
        internal = InternalMatch([matcher.anchor], dict(mapping),
                                 [mapping[p] for p in matcher.inputs], [gn])
        if match_filters and not all(f(internal, graph, pattern_graph)
                                     for f in match_filters):
            continue
        used |= inner
        matches.append((mapping, internal))
    rewritten: dict[Node, Any] = {}  # anchors already replaced -> their replacement
    done: list[ReplacedPatterns] = []
    for mapping, internal in matches:
        for p in matcher.inputs:
            v = mapping[p]
            while isinstance(v, Node) and v in rewritten:
                v = rewritten[v]
            mapping[p] = v
        rep_graph = replacement_graph if replacement_callback is None else \
            _trace(replacement_callback(internal, graph, pattern_graph))
        rep_inputs = [n for n in rep_graph.nodes if n.op == "placeholder"]
        anchor = mapping[matcher.anchor]
        val_map: dict[Node, Any] = {r: mapping[p] for r, p in zip(rep_inputs, matcher.inputs)}
        order = {n: i for i, n in enumerate(graph.nodes)}
        first_user = min(anchor.users, key=order.__getitem__) if anchor.users else anchor
        added: list[Node] = []
        with graph.inserting_before(first_user):
            result = None
            for rn in rep_graph.nodes:
                if rn.op == "placeholder":
                    continue
                if rn.op == "output":
                    result = _map_value(rn.args[0], val_map)
                    break
                val_map[rn] = graph.node_copy(rn, lambda n, vm=val_map: vm[n])
                added.append(val_map[rn])
        anchor.replace_all_uses_with(result)
        rewritten[anchor] = result
        doomed = {g for p, g in mapping.items() if p.op != "placeholder"}
        for node in reversed(list(graph.nodes)):
            if node in doomed:
                graph.erase_node(node)
        done.append(ReplacedPatterns(matcher.anchor, mapping, added))
    gm.recompile()
    return done


def _map_value(a: Any, val_map: dict) -> Any:
    from .node import map_arg

    return map_arg(a, lambda n: val_map[n])
