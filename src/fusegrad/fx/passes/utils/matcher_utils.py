"""`SubgraphMatcher`: find the occurrences of a pattern graph inside another graph.

The pattern's anchors are its results (or its output node, with `match_output`). For each
anchor the nodes of the same opcode and target in the graph are candidates; from each
candidate the matcher walks the arguments of the pattern and of the graph together, binding
pattern nodes to graph nodes (a pattern placeholder binds to any node, or literal, unless
`match_placeholder`). Several anchors are matched by backtracking over their candidates. A
match is kept when its inner values are read only inside it, when fusing it would not make
a cycle, and (with `remove_overlapping_matches`) when it shares no operation with an earlier
match. Calls whose argument lists differ in length do not match (torch.fx first fills an
ATen overload's defaults from its schema; fusegrad's registry handles carry none).
"""

from __future__ import annotations

import copy
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ....fx.graph import Graph
from ....fx.node import Node

__all__ = ["SubgraphMatcher", "InternalMatch"]

_log = logging.getLogger(__name__)


@dataclass
class InternalMatch:
    """One match: `anchors` (the pattern's anchor nodes), `nodes_map` (pattern node -> graph
    node, or the literal a placeholder bound), `placeholder_nodes` (what the pattern's inputs
    bound to) and `returning_nodes` (the graph nodes giving the pattern's results)."""

    anchors: list
    nodes_map: dict = field(default_factory=dict)
    placeholder_nodes: list = field(default_factory=list)
    returning_nodes: list = field(default_factory=list)
    name_node_map: dict = field(default_factory=dict)

    def __copy__(self) -> InternalMatch:
        return InternalMatch(anchors=self.anchors, nodes_map=self.nodes_map.copy(),
                             placeholder_nodes=self.placeholder_nodes.copy(),
                             returning_nodes=self.returning_nodes.copy())


def _get_attr(module: Any, target: str) -> Any:
    for atom in target.split("."):
        module = getattr(module, atom)
    return module


def _compute(nodes_map: dict) -> list:
    return [g for p, g in nodes_map.items() if p.op not in ("placeholder", "output")]


def _fusable(nodes: list) -> bool:
    """Whether `nodes` can become one node: no path leaves them and comes back."""
    inside = set(nodes)
    seen: set = set()
    todo = deque(u for n in nodes for u in n.users if u not in inside)
    while todo:
        n = todo.popleft()
        if n in seen:
            continue
        seen.add(n)
        for u in n.users:
            if u in inside:
                return False
            todo.append(u)
    return True


class SubgraphMatcher:
    """Matches `pattern` (a Graph) against graphs; see the module's description."""

    def __init__(self, pattern: Graph, match_output: bool = False,
                 match_placeholder: bool = False, remove_overlapping_matches: bool = True,
                 ignore_literals: bool = False) -> None:
        self.pattern = pattern
        self.match_output = match_output
        self.match_placeholder = match_placeholder
        self.remove_overlapping_matches = remove_overlapping_matches
        self.ignore_literals = ignore_literals
        if len(pattern.nodes) == 0:
            raise ValueError("SubgraphMatcher cannot be initialized with an empty pattern")
        for node in pattern.nodes:
            if node.op != "output" and not node.is_impure() and not node.users:
                raise AssertionError(
                    "SubgraphMatcher cannot be initialized with an pattern with dead code")
        self.pattern_placeholder_nodes = [n for n in pattern.nodes if n.op == "placeholder"]
        output = next(iter(reversed(pattern.nodes)))
        self.pattern_returning_nodes: list[Node] = output.all_input_nodes
        # A result also read inside the pattern is reached from another anchor.
        self.pattern_anchors: list[Node] = [output] if match_output else [
            n for n in output.all_input_nodes if len(n.users) == 1]

    def _match_attributes(self, pn: Node, gn: Node) -> bool:
        from ...._tensor import Tensor

        for n, what in ((pn, "pn"), (gn, "gn")):
            if not isinstance(n.target, str):
                raise AssertionError(f"{what}.target {n.target} must be a string.")
        for n, what in ((pn, "pn"), (gn, "gn")):
            if n.graph.owning_module is None:
                raise AssertionError(f"{what}.graph.owning_module must not be None")
        pv = _get_attr(pn.graph.owning_module, pn.target)
        gv = _get_attr(gn.graph.owning_module, gn.target)
        if type(pv) is not type(gv):
            return False
        if isinstance(pv, Tensor):
            return isinstance(gv, Tensor)
        raise RuntimeError(f"Unsupported type {pv} when matching attributes")

    def _nodes_are_equal(self, pn: Node, gn: Node, node_name_match: str = "") -> bool:
        if pn.op == "placeholder" and not self.match_placeholder:
            return True  # a wildcard
        if node_name_match and node_name_match in gn.name:
            return True
        if pn.op != gn.op:
            return False
        if pn.op in ("placeholder", "output"):
            return True
        if pn.op == "get_attr":
            return self._match_attributes(pn, gn)
        return pn.target == gn.target

    def _is_contained(self, nodes_map: dict) -> bool:
        # Every matched operation's value is read only inside the match, except the results.
        inner = {g: p for p, g in nodes_map.items() if p.op != "placeholder"}
        return all(p in self.pattern_returning_nodes or all(u in inner for u in g.users)
                   for g, p in inner.items())

    def _remove_overlapping_matches(self, matches: list) -> list:
        kept: list[InternalMatch] = []
        taken: set = set()
        for match in matches:
            nodes = _compute(match.nodes_map)
            if not any(g in taken for g in nodes):
                kept.append(match)
                taken.update(nodes)
        return kept

    def _match_literals(self, pn: Any, gn: Any, match: InternalMatch) -> bool:
        if isinstance(pn, Node) and isinstance(gn, Node):
            raise AssertionError("pn and gn cannot both be Node")
        if isinstance(pn, Node):  # a placeholder binds a literal as it binds a node
            if pn.op != "placeholder":
                return False
            if pn in match.nodes_map:
                return match.nodes_map[pn] == gn
            match.nodes_map[pn] = gn
            return True
        if isinstance(gn, Node):
            return False
        return type(gn) is type(pn) and gn == pn

    def _match_args(self, pargs: Any, gargs: Any, match: InternalMatch) -> bool:
        if len(pargs) != len(gargs):
            return False
        for pa, ga in zip(pargs, gargs):
            if isinstance(pa, Node) and isinstance(ga, Node):
                ok = self._match_nodes(pa, ga, match)
            elif isinstance(pa, (list, tuple)) and isinstance(ga, (list, tuple)):
                ok = self._match_args(pa, ga, match)
            else:
                ok = self._match_literals(pa, ga, match) or self.ignore_literals
            if not ok:
                return False
        return True

    def _match_nodes(self, pn: Node, gn: Node, match: InternalMatch,
                     node_name_match: str = "") -> bool:
        if not (isinstance(pn, Node) and isinstance(gn, Node)):
            raise AssertionError(f"pn and gn must be Node, pn: {pn}, gn: {gn}")
        if pn in match.nodes_map:
            return match.nodes_map[pn] == gn
        if gn in match.nodes_map.values():
            return False  # one graph node per pattern node
        if not self._nodes_are_equal(pn, gn, node_name_match):
            return False
        match.nodes_map[pn] = gn
        if pn.op == "placeholder":
            return True
        if len(pn.args) != len(gn.args) or list(pn.kwargs) != list(gn.kwargs):
            return False
        # A failure leaves bindings behind; the caller drops the whole attempt.
        return self._match_args([*pn.args, *pn.kwargs.values()],
                                [*gn.args, *gn.kwargs.values()], match)

    def match(self, graph: Graph, node_name_match: str = "") -> list[InternalMatch]:
        """The self-contained matches of the pattern in `graph` (in the order of their
        anchors' candidates); `node_name_match` also accepts any node whose name contains
        it."""
        candidates = [(anchor, [n for n in graph.nodes
                                if self._nodes_are_equal(anchor, n, node_name_match)])
                      for anchor in self.pattern_anchors]
        candidates = [(a, c) for a, c in candidates if c]
        found: list[InternalMatch] = []

        def extend(i: int, match: InternalMatch) -> None:
            if i == len(candidates):
                match.placeholder_nodes = [match.nodes_map[p]
                                           for p in self.pattern_placeholder_nodes]
                match.returning_nodes = [match.nodes_map[p]
                                         for p in self.pattern_returning_nodes]
                found.append(match)
                return
            anchor, nodes = candidates[i]
            for node in nodes:
                attempt = copy.copy(match)
                if self._match_nodes(anchor, node, attempt, node_name_match):
                    extend(i + 1, attempt)

        if candidates:
            extend(0, InternalMatch(anchors=self.pattern_anchors))
        found = [m for m in found if self._is_contained(m.nodes_map)]
        found = [m for m in found if _fusable(_compute(m.nodes_map))]
        if self.remove_overlapping_matches:
            found = self._remove_overlapping_matches(found)
        _log.info("Matches returned: %s", found)
        return found
