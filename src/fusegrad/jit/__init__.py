"""`fusegrad.jit`: TorchScript's interface on fusegrad's own script compiler.

`script(fn_or_module)` compiles Python source (control flow on tensor values included) into
an SSA graph run by an interpreter over fusegrad's ops; `trace(fn, example_inputs)` records
one run (as an FX `GraphModule`) and returns it as a `ScriptFunction` or, for a module, a
`TopLevelTracedModule`. Both results have `.save(path)`; `load(path)` reads them back from
fusegrad's own file format (graphs as data and weights as safetensors, never code).
`freeze` and `optimize_for_inference` make frozen `RecursiveScriptModule`s of either.
"""

from __future__ import annotations

import warnings

from ..futures import Future
from ._freeze import freeze, optimize_for_inference
from ._interpreter import Error
from ._markers import (
    Attribute,
    Final,
    annotate,
    export,
    ignore,
    interface,
    is_scripting,
    is_tracing,
    script_method,
    unused,
)
from ._script import RecursiveScriptModule, ScriptFunction, ScriptModule
from ._serialization import load
from ._trace import (
    _DEPRECATED,
    TopLevelTracedModule,
    TracedModule,
    TracerWarning,
    trace,
    trace_module,
)
from .frontend import FrontendError, NotSupportedError, UnsupportedNodeError


def script(obj, optimize=None, _frames_up: int = 0, _rcb=None, example_inputs=None):
    """Compile a function or an `nn.Module` (its `forward` and exported methods, and its
    submodules) into a ScriptFunction or ScriptModule; a class is compiled for use in
    scripted code and returned as it is. Unsupported Python raises a
    `NotSupportedError` showing the line; `optimize` and `example_inputs` are accepted and
    ignored, as the compiler reads types from annotations."""
    from ..nn.modules.module import Module
    from ._script import compile_function, script_module

    warnings.warn(_DEPRECATED.format("script"), DeprecationWarning, stacklevel=1)
    if isinstance(obj, (ScriptModule, ScriptFunction)):
        return obj
    if isinstance(obj, Module):
        return script_module(obj)
    if isinstance(obj, type):
        from ._classes import scriptable_class
        from ._script import UNIT

        if issubclass(obj, Module) or not scriptable_class(obj):
            raise NotSupportedError(f"fusegrad.jit.script compiles functions, module "
                                    f"instances and user classes, not the class "
                                    f"{obj.__name__}")
        UNIT.script_class(obj)  # compiled now (errors show here); the class is returned
        return obj
    if not callable(obj) or not hasattr(obj, "__code__"):
        raise RuntimeError(f"fusegrad.jit.script cannot compile a {type(obj).__name__}")
    return compile_function(obj)


def fork(func, *args, **kwargs) -> Future:
    """Run `func(*args, **kwargs)` as a task; a `Future` of its result (`wait(fut)` reads
    it). Here the task runs at once, on the calling thread: the same values, in order."""
    fut = Future()
    try:
        fut.set_result(func(*args, **kwargs))
    except Exception as error:  # the task's error is the future's, raised by `wait`
        fut.set_exception(error)
    return fut


def wait(future: Future):
    """The result of a `fork`'s future, waiting for it (its error raised)."""
    return future.wait()


def save(m, f, _extra_files=None) -> None:
    """Write a ScriptModule or ScriptFunction (or a trace) to `f` (as `m.save(f)`)."""
    if not hasattr(m, "save"):
        raise TypeError(f"fusegrad.jit.save expects a ScriptModule or ScriptFunction, got "
                        f"{type(m).__name__}")
    m.save(f)


__all__ = ["Attribute", "Error", "Final", "FrontendError", "Future", "NotSupportedError",
           "RecursiveScriptModule", "ScriptFunction", "ScriptModule", "TopLevelTracedModule",
           "TracedModule", "TracerWarning", "UnsupportedNodeError", "annotate", "export", "fork",
           "freeze", "ignore", "interface", "is_scripting", "load", "optimize_for_inference",
           "save", "script", "script_method", "trace", "trace_module", "unused", "wait"]
