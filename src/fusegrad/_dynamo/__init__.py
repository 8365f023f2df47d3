"""PyTorch-compatible names for the capture stage (`torch._dynamo`)."""

from __future__ import annotations

from ..compiler import compile as _compile
from ..compiler import config, disable, list_backends, reset
from ..compiler.capture.dynamic import mark_dynamic, mark_static, maybe_mark_dynamic
from ..compiler.markers import allow_in_graph, assume_constant_result, is_compiling
from ..compiler.stance import set_stance
from . import exc
from .explain import explain


def optimize(backend="inductor", *, nopython: bool = False, dynamic=None, disable=False):
    """A decorator compiling a function with `backend` (`nopython=True` is fullgraph)."""
    def decorate(fn):
        return _compile(fn, backend=backend, fullgraph=nopython, dynamic=dynamic,
                        disable=disable)

    return decorate


__all__ = ["optimize", "reset", "explain", "config", "disable", "list_backends", "exc",
           "mark_dynamic", "mark_static", "maybe_mark_dynamic", "allow_in_graph",
           "assume_constant_result", "is_compiling", "set_stance"]
