"""Decorators and helpers scripted code uses: `ignore`, `unused`, `export`, `script_method`,
`is_scripting`, `annotate`, `Final`, `Attribute`, `interface`. Each marks a function with an
attribute the script compiler reads."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Final, NamedTuple  # noqa: F401  (Final: `fusegrad.jit.Final`)

IGNORE = "_fusegrad_jit_ignore"
UNUSED = "_fusegrad_jit_unused"
EXPORT = "_fusegrad_jit_export"


def ignore(drop=False, **kwargs):
    """Leave a function to Python: scripted code calls it through the interpreter instead of
    compiling it (such a program cannot be saved). With `drop=True` it is `unused`."""
    if callable(drop):
        setattr(drop, IGNORE, True)
        return drop

    def decorate(fn):
        setattr(fn, UNUSED if drop else IGNORE, True)
        return fn

    return decorate


def unused(fn):
    """Leave a function uncompiled; calling it from scripted code raises."""
    setattr(fn, UNUSED, True)
    return fn


def export(fn):
    """Compile a module method when the module is scripted, even if `forward` does not
    call it."""
    setattr(fn, EXPORT, True)
    return fn


def script_method(fn):
    """Mark a method of a `ScriptModule` subclass to be compiled when an instance is made
    (the older way of writing scripted modules)."""
    setattr(fn, EXPORT, True)
    return fn


def is_scripting() -> bool:
    """True in scripted code, False in Python."""
    return False


# How many `jit.trace` recordings are running on this thread (a traced function may trace
# another): `is_tracing` answers for the code they run.
_TRACE_STATE = threading.local()


def is_tracing() -> bool:
    """True in code that `jit.trace` runs while it records a function, False otherwise
    (and in scripted code)."""
    return getattr(_TRACE_STATE, "depth", 0) > 0


@contextlib.contextmanager
def recording():
    """The block records a trace: `is_tracing()` answers True inside it."""
    _TRACE_STATE.depth = getattr(_TRACE_STATE, "depth", 0) + 1
    try:
        yield
    finally:
        _TRACE_STATE.depth -= 1


def annotate(the_type: Any, the_value: Any) -> Any:
    """Give `the_value` the type `the_type` in scripted code; in Python, `the_value`."""
    return the_value



class Attribute(NamedTuple):
    """`self.names = jit.Attribute([], List[str])` in a module's `__init__`: the attribute's
    value and its type for scripted code (an empty list's items have no type to read)."""

    value: Any
    type: Any


def interface(obj):
    """Mark a class as an interface (a method signature other classes or modules share);
    attributes annotated with it hold any module that has those methods."""
    obj.__fusegrad_jit_interface__ = True
    return obj
