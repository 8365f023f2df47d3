"""Helpers of graph passes: `matcher_utils.SubgraphMatcher` (finding a pattern graph in a
graph) and `common.compare_graphs`."""

from .common import compare_graphs
from .matcher_utils import InternalMatch, SubgraphMatcher

__all__ = ["InternalMatch", "SubgraphMatcher", "compare_graphs"]
