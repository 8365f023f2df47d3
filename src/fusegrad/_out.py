"""PyTorch's `out=` argument on the public functions.

Most public functions take `out` (their signatures follow PyTorch's) but cannot write into it
yet; an argument must never be ignored, so `guard_namespace` wraps each of them, once, when
the namespace is built: a non-None `out` raises NotImplementedError naming the function. The
few functions that do write into `out` are listed by the caller and left as they are.
"""

from __future__ import annotations

import functools
import inspect
import types


def unsupported_out(qualname: str) -> NotImplementedError:
    """The error for a function called with an `out` tensor it cannot write into."""
    return NotImplementedError(f"{qualname}: out= is not supported yet")


def reject_out(fn: types.FunctionType, qualname: str) -> types.FunctionType:
    """`fn` raising `unsupported_out(qualname)` when called with a non-None `out`, by keyword
    or (where its signature allows) by position; otherwise `fn` itself runs, unchanged."""
    params = list(inspect.signature(fn).parameters.values())
    position = next((i for i, p in enumerate(params) if p.name == "out" and p.kind in (
        p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)), None)
    if position is None:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if kwargs.get("out") is not None:
                raise unsupported_out(qualname)
            return fn(*args, **kwargs)
    else:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if kwargs.get("out") is not None or (len(args) > position and
                                                 args[position] is not None):
                raise unsupported_out(qualname)
            return fn(*args, **kwargs)

    wrapper.rejects_out = True
    return wrapper


def guard_namespace(namespace: dict, prefix: str, implemented: frozenset = frozenset()) -> None:
    """Replace every public function in `namespace` that has an `out` parameter, except
    those named in `implemented` (which write into `out` themselves), by its `reject_out`
    form. Aliases (`multiply` and `mul`) stay one object, named after the function."""
    wrapped: dict = {}
    for name, fn in list(namespace.items()):
        if name.startswith("_") or name in implemented or not isinstance(fn, types.FunctionType):
            continue
        if getattr(fn, "rejects_out", False) or "out" not in inspect.signature(fn).parameters:
            continue
        if fn not in wrapped:
            public = fn.__name__ if namespace.get(fn.__name__) is fn else name
            wrapped[fn] = reject_out(fn, f"{prefix}.{public}")
        namespace[name] = wrapped[fn]
