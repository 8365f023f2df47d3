"""`PassBase` and `PassResult`: a graph pass as an object, and what running one returns."""

from __future__ import annotations

import abc
from collections import namedtuple
from typing import Any

__all__ = ["PassBase", "PassResult"]


class PassResult(namedtuple("PassResult", ["graph_module", "modified"])):
    """The module a pass returns and whether it changed it."""

    __slots__ = ()

    def __new__(cls, graph_module: Any, modified: bool) -> PassResult:
        return super().__new__(cls, graph_module, modified)


class PassBase(abc.ABC):
    """A pass: calling it runs `requires`, then `call` (which subclasses write), then
    `ensures`, on the module, and returns what `call` returned."""

    def __call__(self, graph_module: Any) -> PassResult | None:
        self.requires(graph_module)
        res = self.call(graph_module)
        self.ensures(graph_module)
        return res

    @abc.abstractmethod
    def call(self, graph_module: Any) -> PassResult | None:
        """The pass itself: change `graph_module` and say whether it did."""

    def requires(self, graph_module: Any) -> None:  # noqa: B027 (a hook, empty by default)
        """Check what the pass needs of the module before it runs (nothing by default)."""

    def ensures(self, graph_module: Any) -> None:  # noqa: B027 (a hook, empty by default)
        """Check what the pass promises of the module after it runs (nothing by default)."""
