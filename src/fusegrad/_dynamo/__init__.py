"""PyTorch-compatible names for the capture stage (`torch._dynamo`)."""

from __future__ import annotations

import sys

from ..compiler import _BACKENDS, config, disable, list_backends, lookup_backend, reset
from ..compiler import compile as _compile
from ..compiler import register_backend as _register
from ..compiler.capture.dynamic import mark_dynamic, mark_static, maybe_mark_dynamic
from ..compiler.markers import (
    allow_in_graph,
    assume_constant_result,
    graph_break,
    is_compiling,
)
from ..compiler.stance import set_stance
from . import exc, testing, utils
from .explain import explain

# `import torch._dynamo.config` (as programs write before changing a setting) finds the
# settings object itself, the one `torch._dynamo.config` names.
sys.modules[__name__ + ".config"] = config


def optimize(backend="inductor", *, nopython: bool = False, dynamic=None, disable=False):
    """A decorator compiling a function with `backend` (`nopython=True` is fullgraph)."""
    def decorate(fn):
        return _compile(fn, backend=backend, fullgraph=nopython, dynamic=dynamic,
                        disable=disable)

    return decorate


def register_backend(compiler_fn=None, name: str | None = None, tags=()):
    """Register backend `compiler_fn(gm, example_inputs) -> callable` under `name` (its
    `__name__` by default), as PyTorch's: `@register_backend`, `@register_backend(name=..)`
    or a direct call. Another callable under a registered name is refused."""
    if compiler_fn is None:
        return lambda fn: register_backend(fn, name=name, tags=tags)
    if not callable(compiler_fn):
        raise AssertionError(f"register_backend expects a callable, got {compiler_fn!r}")
    name = name or compiler_fn.__name__
    if name in _BACKENDS and _BACKENDS[name][0] is not compiler_fn:
        raise AssertionError(f"duplicate name: {name}")
    return _register(name, compiler_fn, tuple(tags))


__all__ = ["optimize", "reset", "explain", "config", "disable", "list_backends", "exc",
           "mark_dynamic", "mark_static", "maybe_mark_dynamic", "allow_in_graph",
           "assume_constant_result", "is_compiling", "set_stance", "graph_break",
           "register_backend", "lookup_backend", "testing", "utils"]
