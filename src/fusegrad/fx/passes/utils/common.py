"""Comparisons of whole graphs."""

from __future__ import annotations

from ....fx.graph import Graph
from .matcher_utils import SubgraphMatcher

__all__ = ["compare_graphs"]


def compare_graphs(left: Graph, right: Graph) -> bool:
    """Whether the two graphs are the same program: the same inputs and outputs in the same
    order, and the same operations connected in the same way."""
    matcher = SubgraphMatcher(left, match_output=True, match_placeholder=True)
    return len(matcher.match(right)) > 0
