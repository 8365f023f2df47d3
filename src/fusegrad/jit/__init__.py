"""`fusegrad.jit`: `script(fn)` is `compile(fn, fullgraph=True)` (no TorchScript format)."""

from __future__ import annotations


def script(obj, optimize=None, _frames_up: int = 0, _rcb=None, example_inputs=None):
    """Capture `obj` (a function or module) whole: a graph break is an error."""
    from ..compiler import compile as _compile

    return _compile(obj, fullgraph=True)


__all__ = ["script"]
