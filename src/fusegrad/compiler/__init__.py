"""`fusegrad.compile`: capture a function's tensor work from its bytecode and run it compiled.

The stages, in processing order: `capture/` (bytecode -> FX graphs with guards and graph
breaks, TorchDynamo's role), then a backend: a registered name or any callable
`(GraphModule, example_inputs) -> callable`. `"inductor"` (the default) runs AOT autograd
(`aot/`) and compiles the resulting graphs to C (`codegen/`); `"aot_eager"` stops after AOT
autograd and `"eager"` runs the captured graph as it is.
"""

from __future__ import annotations

import functools
import inspect
import weakref

from . import logs
from .capture.segments import FrameRunner, _History, _line_of
from .capture.translator import instructions_of, unsupported_opcodes
from .exc import Unsupported


class Config:
    """Settings of the compiler (`fusegrad._dynamo.config`)."""

    def __init__(self):
        self.recompile_limit = 8
        self.suppress_errors = False
        self.verbose = False
        # After a recompile caused by a size change, make that size symbolic.
        self.automatic_dynamic_shapes = True

    @property
    def cache_size_limit(self) -> int:
        """Alias of `recompile_limit`, PyTorch's older name."""
        return self.recompile_limit

    @cache_size_limit.setter
    def cache_size_limit(self, value: int) -> None:
        self.recompile_limit = value


config = Config()

# ---------------------------------------------------------------- backends

_BACKENDS: dict[str, tuple] = {}


def register_backend(name: str, fn=None, tags: tuple = ()):
    """Register `fn(gm, example_inputs) -> callable` under `name` (usable as a decorator)."""
    if fn is None:
        return lambda f: register_backend(name, f, tags)
    _BACKENDS[name] = (fn, tuple(tags))
    return fn


def list_backends(exclude_tags=("debug", "experimental")) -> list[str]:
    """Names of the registered backends, without those tagged `exclude_tags`."""
    exclude = set(exclude_tags or ())
    return sorted(n for n, (_, tags) in _BACKENDS.items() if not exclude & set(tags))


def lookup_backend(backend):
    """The callable for a backend name (or the callable itself)."""
    if callable(backend):
        return backend
    try:
        return _BACKENDS[backend][0]
    except KeyError:
        raise ValueError(f"Invalid backend {backend!r}; available: "
                         f"{list_backends(exclude_tags=())}") from None


@register_backend("eager", tags=("debug",))
def eager_backend(gm, example_inputs):
    """Run the captured graph as it is."""
    return gm.forward


@register_backend("aot_eager", tags=("debug",))
def aot_eager_backend(gm, example_inputs):
    """AOT autograd: forward and backward graphs of registry ops, run as FX code."""
    from .aot.api import aot_eager

    return aot_eager(gm, example_inputs)


@register_backend("inductor")
def inductor_backend(gm, example_inputs, config_patches=None):
    """The default backend: AOT autograd with the core decompositions, each graph compiled
    to fused C kernels (`fusegrad._inductor.compile_fx`)."""
    from .._inductor.compile_fx import compile_fx

    return compile_fx(gm, example_inputs, config_patches=config_patches)


# ---------------------------------------------------------------- compiled functions

_RUNNERS: weakref.WeakSet = weakref.WeakSet()


class CompiledFunction:
    """A function whose calls run through captured graphs (what `compile(fn)` returns)."""

    def __init__(self, fn, backend="inductor", fullgraph: bool = False, dynamic=None):
        self._orig = fn
        self._dynamic = dynamic
        self._backend = lookup_backend(backend)
        self._fullgraph = fullgraph
        self._signature = inspect.signature(fn, follow_wrapped=False)
        self._defaults = (fn.__defaults__, fn.__kwdefaults__)
        code = fn.__code__
        # Plain positional calls bind by zipping names (inspect's binding costs microseconds).
        self._simple = not (code.co_flags & 0x0C) and not code.co_kwonlyargcount and \
            not fn.__defaults__
        self._argnames = code.co_varnames[:code.co_argcount]
        self._runner = None
        self._eager_reason = ", ".join(sorted(unsupported_opcodes(fn.__code__)))
        self._eager_report = None
        functools.update_wrapper(self, fn)

    def _report_eager(self):
        """The whole function runs eagerly: a reported break at its first instruction the
        translator does not know (logged once; `explain` sees it on every call)."""
        report = self._eager_report
        if report is None:
            code = self._orig.__code__
            missing = self._eager_reason.split(", ")
            line = code.co_firstlineno
            if missing[0] != "generator" and not missing[0].startswith("Python "):
                insts, _ = instructions_of(code)
                first = next((i for i in insts if i.opname in missing), None)
                line = _line_of(code, first.offset) if first is not None else line
            reason = (f"{self._orig.__qualname__} uses {self._eager_reason}, which "
                      "fusegrad.compile cannot capture: the whole function runs eagerly")
            if self._fullgraph:
                raise Unsupported(f"{reason} ({code.co_filename}:{line})")
            report = self._eager_report = logs.graph_break(reason, code, line,
                                                           fallback=True)
        if _History.listener is not None:
            _History.listener.append(("break", report))

    def _get_runner(self) -> FrameRunner:
        if self._runner is None:
            self._runner = FrameRunner(self._orig, self._backend, config, self._fullgraph,
                                       self._dynamic)
            _RUNNERS.add(self._runner)
        return self._runner

    def __call__(self, *args, **kwargs):
        if self._eager_reason:
            if self._eager_report is None or _History.listener is not None:
                self._report_eager()
            return self._orig(*args, **kwargs)
        if self._simple and not kwargs and len(args) == len(self._argnames):
            L = dict(zip(self._argnames, args))
        else:
            fn = self._orig
            if fn.__defaults__ is not self._defaults[0] or \
                    fn.__kwdefaults__ is not self._defaults[1]:
                # Defaults reassigned since: bind with the new ones, as a plain call would.
                self._signature = inspect.signature(fn, follow_wrapped=False)
                self._defaults = (fn.__defaults__, fn.__kwdefaults__)
            bound = self._signature.bind(*args, **kwargs)
            bound.apply_defaults()
            L = dict(bound.arguments)
        L["___args"], L["___kwargs"] = args, kwargs
        return self._get_runner()(L)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    def _reset(self) -> None:
        self._runner = None


_CALLEES: dict = {}


def compile_callee(fn, backend, dynamic=None):
    """`fn` wrapped for capture (used when a call is run for real after a graph break),
    with the caller's `dynamic` setting."""
    key = (fn, backend, dynamic)
    wrapped = _CALLEES.get(key)
    if wrapped is None:
        wrapped = _CALLEES[key] = CompiledFunction(fn, backend, dynamic=dynamic)
    return wrapped


def compile(model=None, *, fullgraph: bool = False, dynamic=None, backend="inductor",  # noqa: A001
            mode=None, options=None, disable: bool = False):
    """Compile a function or module: as `compile(fn)`, `@compile` or `@compile(...)`."""
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                 mode=mode, options=options, disable=disable)
    backend = _backend_with_options(backend, mode, options)
    if disable:
        return model
    module_cls = _module_class()
    if module_cls is not None and isinstance(model, module_cls):
        from .optimized_module import OptimizedModule

        return OptimizedModule(model, CompiledFunction(type(model).forward, backend,
                                                       fullgraph, dynamic))
    if not callable(model):
        raise RuntimeError("torch.compile() expects a function or a module, got "
                           f"{type(model).__name__}")
    return CompiledFunction(model, backend, fullgraph, dynamic)


def _backend_with_options(backend, mode, options):
    """`backend` given `mode` / `options`, checked as PyTorch does: both at once raise; the
    inductor backend validates them (unknown mode or option, wrong type); other backends
    ignore them with a warning."""
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be "
                           "specified at the same time.")
    if mode is None and options is None:
        return backend
    extra = {"mode": mode} if mode is not None else {"options": options}
    if backend == "inductor":
        from .._inductor import config as inductor_config

        return functools.partial(inductor_backend,
                                 config_patches=inductor_config.resolve(mode, options))
    if isinstance(backend, str):
        import warnings

        kind = "aot_autograd-based backend" if backend.startswith("aot") else \
            f"{backend} backend"
        warnings.warn(f"{kind} ignoring extra kwargs {extra}", stacklevel=3)
    return backend


def _module_class():
    try:
        from ..nn import Module
    except ImportError:
        return None
    return Module


def disable(fn=None, recursive: bool = True):
    """Never capture `fn`: calls to it run eagerly (a graph break where it is called)."""
    if fn is None:
        return lambda f: disable(f, recursive)

    @functools.wraps(fn)
    def eager(*args, **kwargs):
        return fn(*args, **kwargs)

    eager._fusegrad_disabled = True
    return eager


def reset() -> None:
    """Forget every captured graph (all functions recompile on their next call)."""
    for runner in list(_RUNNERS):
        runner.segments.clear()
        runner.history.clear()
        runner.warned = False
    _CALLEES.clear()


def last_graphs(fn) -> list:
    """The GraphModules captured for `fn` (a compiled function), in capture order."""
    runner = fn._runner if isinstance(fn, CompiledFunction) else None
    if runner is None:
        return []
    return [detail for event, detail in runner.history if event == "graph"]


__all__ = ["compile", "config", "disable", "list_backends", "register_backend", "reset",
           "last_graphs", "CompiledFunction"]
