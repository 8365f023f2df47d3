"""PyTorch's `out=` argument on the public functions.

Most public functions take `out` (their signatures follow PyTorch's) but cannot write into it
yet; an argument must never be ignored, so `guard_namespace` wraps each of them, once, when
the namespace is built: a non-None `out` raises NotImplementedError naming the function. The
few functions that do write into `out` are listed by the caller and left as they are.
"""

from __future__ import annotations

import inspect
import types

from ._metadata import copy_metadata


def unsupported_out(qualname: str) -> NotImplementedError:
    """The error for a function called with an `out` tensor it cannot write into."""
    return NotImplementedError(f"{qualname}: out= is not supported yet")


_COMPILED: dict[str, types.CodeType] = {}


def _takes_out(fn: types.FunctionType) -> bool:
    """Whether `fn` has an `out` parameter. A plain function's parameters are the first names
    of its code (positional, keyword-only, then `*args` and `**kwargs`), read without
    building a signature; for a wrapper, those of the function it wraps (`__wrapped__`, which
    `inspect.signature` follows). Anything with an explicit `__signature__` on the way, or not
    a plain function at its end, is asked through `inspect`."""
    raw = fn
    while not hasattr(raw, "__signature__"):
        inner = getattr(raw, "__wrapped__", None)
        if inner is None:
            break
        raw = inner
    else:
        return "out" in inspect.signature(fn).parameters
    if raw.__class__ is not types.FunctionType:
        return "out" in inspect.signature(fn).parameters
    code = raw.__code__
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return "out" in code.co_varnames[:count]


def _guarded(*args, **kwargs):
    # The code each wrapper starts with (its globals are the wrapper's own namespace, which
    # names the wrapper `_self_`): on the first call it becomes the wrapper generated for
    # that function's own parameter list (see `reject_out`).
    _specialise_(_self_)  # noqa: F821
    return _self_(*args, **kwargs)  # noqa: F821


_TRAMPOLINE = _guarded.__code__.replace(co_name="guarded")


def reject_out(fn: types.FunctionType, qualname: str) -> types.FunctionType:
    """`fn` raising `unsupported_out(qualname)` when called with a non-None `out`, by keyword
    or (where its signature allows) by position; otherwise `fn` itself runs, unchanged.

    The wrapper is generated with `fn`'s own parameter list and passes each parameter on as
    `fn` declares it, so a call costs one extra frame (about 60 ns), not the packing of
    `*args, **kwargs` (about 200 ns). Generating it means compiling, a quarter of a
    millisecond per function: too much for the ~200 functions at import, so the wrapper
    starts as a generic trampoline and replaces its own code on its first call (one object
    throughout, so names bound earlier get the fast form too)."""
    namespace = {"_fn_": fn, "_error_": unsupported_out, "_qualname_": qualname,
                 "_specialise_": _specialise, "__name__": fn.__module__}
    wrapper = namespace["_self_"] = types.FunctionType(_TRAMPOLINE, namespace, fn.__name__)
    copy_metadata(wrapper, fn, _REJECTS_OUT)
    return wrapper


_REJECTS_OUT = {"rejects_out": True}


def _specialise(wrapper: types.FunctionType) -> None:
    """Give `wrapper` the code generated for its function's parameter list."""
    namespace = wrapper.__globals__
    fn = namespace["_fn_"]
    params, passed = [], []
    star_written = False  # a bare `*` goes before the first keyword-only parameter
    last_positional_only = 0
    for p in inspect.signature(fn).parameters.values():
        text = p.name
        if p.default is not p.empty:
            namespace[f"_default_{p.name}"] = p.default
            text += f"=_default_{p.name}"
        if p.kind is p.VAR_POSITIONAL:
            params.append("*" + p.name)
            passed.append("*" + p.name)
            star_written = True
        elif p.kind is p.VAR_KEYWORD:
            params.append("**" + p.name)
            passed.append("**" + p.name)
        elif p.kind is p.KEYWORD_ONLY:
            if not star_written:
                params.append("*")
                star_written = True
            params.append(text)
            passed.append(f"{p.name}={p.name}")
        else:
            params.append(text)
            passed.append(p.name)
            if p.kind is p.POSITIONAL_ONLY:
                last_positional_only = len(params)
    if last_positional_only:
        params.insert(last_positional_only, "/")
    source = (f"def guarded({', '.join(params)}):\n"
              f"    if out is not None:\n"
              f"        raise _error_(_qualname_)\n"
              f"    return _fn_({', '.join(passed)})\n")
    # Many functions share a parameter list: compile each distinct wrapper once.
    code = _COMPILED.get(source)
    if code is None:
        code = _COMPILED[source] = compile(source, "<out guard>", "exec")
    made: dict = dict(namespace)
    exec(code, made)  # noqa: S102
    specialised = made["guarded"]
    wrapper.__defaults__ = specialised.__defaults__
    wrapper.__kwdefaults__ = specialised.__kwdefaults__
    wrapper.__code__ = specialised.__code__


def guard_namespace(namespace: dict, prefix: str, implemented: frozenset = frozenset()) -> None:
    """Replace every public function in `namespace` that has an `out` parameter, except
    those named in `implemented` (which write into `out` themselves), by its `reject_out`
    form. Aliases (`multiply` and `mul`) stay one object, named after the function."""
    wrapped: dict = {}
    for name, fn in list(namespace.items()):
        if name.startswith("_") or name in implemented or not isinstance(fn, types.FunctionType):
            continue
        if getattr(fn, "rejects_out", False) or not _takes_out(fn):
            continue
        if fn not in wrapped:
            public = fn.__name__ if namespace.get(fn.__name__) is fn else name
            wrapped[fn] = reject_out(fn, f"{prefix}.{public}")
        namespace[name] = wrapped[fn]
