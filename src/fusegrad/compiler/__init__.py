"""`fusegrad.compile`: capture a function's tensor work from its bytecode and run it compiled.

The stages, in processing order: `capture/` (bytecode -> FX graphs with guards and graph
breaks, TorchDynamo's role), then a backend: a registered name or any callable
`(GraphModule, example_inputs) -> callable`. `"inductor"` (the default) runs AOT autograd
(`aot/`) and compiles the resulting graphs to C (`codegen/`); `"aot_eager"` stops after AOT
autograd and `"eager"` runs the captured graph as it is.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import types
import weakref

from . import logs
from . import stance as _stance
from .capture.segments import FrameRunner, _History, _line_of
from .capture.translator import instructions_of, unsupported_opcodes
from .exc import InvalidBackend, Unsupported


class Config:
    """Settings of the compiler (`fusegrad._dynamo.config`)."""

    def __init__(self):
        self.recompile_limit = 8
        self.suppress_errors = False
        self.verbose = False
        # After a recompile caused by a size change, make that size symbolic.
        self.automatic_dynamic_shapes = True
        # False: a float input that changed between captures becomes a graph input.
        self.specialize_float = False
        # True: an int input is always specialized (guarded on its value), never a symbol.
        self.specialize_int = False
        # True: a recompile raises RecompileError (a program's check that one graph serves).
        self.error_on_recompile = False
        # Accepted as PyTorch's: `.item()` and ops with data-dependent output shapes stay
        # graph breaks here (unbacked symbols are not implemented), which compute the same.
        self.capture_scalar_outputs = False
        self.capture_dynamic_output_shape_ops = False
        # True: `opt.step()` of SGD/Adam/AdamW is recorded into the graph, as PyTorch traces
        # it (`capture/optimizers.py`). Off by default: the generated update writes each
        # parameter and state tensor back through a copy and is slower than eager's fused C
        # update (an Adam step 2.3x, the whole training step 1.6x under inductor), so the
        # step stays a graph break and runs eagerly.
        self.trace_optimizer_step = False

    @property
    def cache_size_limit(self) -> int:
        """Alias of `recompile_limit`, PyTorch's older name."""
        return self.recompile_limit

    @cache_size_limit.setter
    def cache_size_limit(self, value: int) -> None:
        self.recompile_limit = value

    def patch(self, changes: dict | None = None, **kwargs):
        """Settings changed for a `with` block or a decorated function, then restored:
        `config.patch(error_on_recompile=True)` or `config.patch({"name": value})`."""
        changes = {**(changes or {}), **kwargs}
        for name in changes:
            if not hasattr(self, name):
                raise AttributeError(f"fusegrad._dynamo.config has no setting {name!r}")
        return _Patch(self, changes)


class _Patch(contextlib.ContextDecorator):
    """What `Config.patch` returns: a context manager that is also a decorator."""

    def __init__(self, config: Config, changes: dict):
        self.config = config
        self.changes = changes
        self.saved: list = []

    def __enter__(self):
        self.saved.append({name: getattr(self.config, name) for name in self.changes})
        for name, value in self.changes.items():
            setattr(self.config, name, value)
        return self

    def __exit__(self, *exc) -> bool:
        for name, value in self.saved.pop().items():
            setattr(self.config, name, value)
        return False


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
        raise InvalidBackend(backend) from None


@register_backend("eager", tags=("debug",))
def eager_backend(gm, example_inputs):
    """Run the captured graph as it is."""
    return gm.forward


@register_backend("aot_eager", tags=("debug",))
def aot_eager_backend(gm, example_inputs):
    """AOT autograd: forward and backward graphs of registry ops, run as FX code."""
    from .aot.api import aot_eager

    return aot_eager(gm, example_inputs)


@register_backend("cudagraphs")
def cudagraphs_backend(gm, example_inputs):
    """CUDA graphs over AOT autograd: every input here is on the CPU, which CUDA graphs skip
    (PyTorch's log line says so), so the graphs run as `aot_eager`'s."""
    logs.log.warning("[__cudagraphs] skipping cudagraphs due to cpu device")
    return aot_eager_backend(gm, example_inputs)


@register_backend("inductor")
def inductor_backend(gm, example_inputs, config_patches=None):
    """The default backend: AOT autograd with the core decompositions, each graph compiled
    to fused C kernels (`fusegrad._inductor.compile_fx`)."""
    from .._inductor.compile_fx import compile_fx

    return compile_fx(gm, example_inputs, config_patches=config_patches)


# ---------------------------------------------------------------- compiled functions

_RUNNERS: weakref.WeakSet = weakref.WeakSet()


_FORWARD_AD = __name__.rpartition(".")[0] + ".autograd.forward_ad"


class CompiledFunction:
    """A function whose calls run through captured graphs (what `compile(fn)` returns)."""

    def __init__(self, fn, backend="inductor", fullgraph: bool = False, dynamic=None,
                 recompile_limit: int | None = None):
        self._orig = fn
        self._dynamic = dynamic
        self._backend = lookup_backend(backend)
        self._fullgraph = fullgraph
        self._recompile_limit = recompile_limit
        self._called = False  # for the "..._then_compile" stances
        self._forced: dict = {}  # backend -> FrameRunner, under `set_stance(force_backend=)`
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
        # A function compiled as it is (`compile(Block.forward)`, called with each instance):
        # a module passed as its first argument is followed by type from the first capture
        # (`FrameRunner.self_by_type`), so one graph serves every instance, as Dynamo's.
        self._self_by_type = False
        self._callee = False  # made by `compile_callee` (see `FrameRunner.skips_tensorless`)
        functools.update_wrapper(self, fn)

    def with_function(self, fn) -> CompiledFunction:
        """A new compiled function of `fn` with this one's settings."""
        return CompiledFunction(fn, self._backend, self._fullgraph, self._dynamic,
                                self._recompile_limit)

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
            # (Dynamo skips a generator's frame counting no break)
            report = self._eager_report = logs.graph_break(
                reason, code, line, fallback=True, counted=missing != ["generator"])
        if _History.listener is not None:
            _History.listener.append(("break", report))

    def _get_runner(self) -> FrameRunner:
        if self._runner is None:
            self._runner = self._new_runner(self._backend)
        return self._runner

    def _new_runner(self, backend) -> FrameRunner:
        """The runner of this function under `backend`: the one another `compile()` of the
        same function with the same settings made, else a new one (sharing the cache of
        one that differs only in `fullgraph`)."""
        key = (backend, self._dynamic, self._recompile_limit, self._self_by_type,
               self._callee)
        table = _cache_table(self._orig)
        try:
            runners = table.setdefault(key, {})
        except TypeError:  # (an unhashable backend: a cache of its own)
            runners = {}
        runner = runners.get(self._fullgraph)
        if runner is not None:
            return runner
        runner = FrameRunner(self._orig, backend, config, self._fullgraph, self._dynamic,
                             self._recompile_limit)
        runner.self_by_type = self._self_by_type
        runner.skips_tensorless = self._callee
        if runners:
            runner.share_cache(next(iter(runners.values())))
        runners[self._fullgraph] = runner
        _RUNNERS.add(runner)
        return runner

    def _runner_under_stance(self, stance):
        """The runner a call uses under a stance other than the default one, or None when
        the call runs eagerly."""
        if stance.stance == "force_eager":
            return None
        if stance.stance.endswith("_then_compile") and not self._called:
            self._called = True
            if stance.stance == "eager_then_compile":
                return None
            return self._forced_runner("aot_eager")
        self._called = True
        if stance.backend is not None:
            return self._forced_runner(stance.backend)
        return self._get_runner()

    def _forced_runner(self, backend) -> FrameRunner:
        backend = lookup_backend(backend)
        runner = self._forced.get(backend)
        if runner is None:
            runner = self._forced[backend] = self._new_runner(backend)
        return runner

    def __call__(self, *args, **kwargs):
        forward_ad = sys.modules.get(_FORWARD_AD)
        if forward_ad is not None and forward_ad._current_level >= 0:
            # At an open forward AD level tangents come from the ops as they dispatch, which
            # generated kernels bypass: the function runs eagerly.
            return self._orig(*args, **kwargs)
        if _stance.current is not _stance.DEFAULT:
            runner = self._runner_under_stance(_stance.current)
            if runner is None:
                return self._orig(*args, **kwargs)
        else:
            runner = self._runner or self._get_runner()
            self._called = True
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
            try:
                bound = self._signature.bind(*args, **kwargs)
            except TypeError:
                # Arguments the function does not take: the call itself raises Python's
                # TypeError (`f() takes 2 positional arguments but 3 were given`) before
                # any of its code runs, as it does uncompiled.
                return self._orig(*args, **kwargs)
            bound.apply_defaults()
            L = dict(bound.arguments)
        L["___args"], L["___kwargs"] = args, kwargs
        return runner(L)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    def _reset(self) -> None:
        self._runner = None
        self._forced.clear()


# The compiled wrappers of functions run for real after a graph break, kept in each
# function's own `__dict__` (function -> table -> wrapper -> function is a cycle the
# collector frees): a table keyed by the function would keep it, its closure and its
# globals' captures alive for good, since the wrapper refers to the function.
_CALLEES_ATTR = "__fusegrad_callees__"
# The functions holding a table (for `reset`), and the tables of callables without a
# `__dict__` (kept for good; only Python functions are wrapped in practice).
_CALLEES: weakref.WeakSet = weakref.WeakSet()
_CALLEES_FALLBACK: dict = {}


# The runners of each compiled function, by settings, kept in the function's `__dict__` as
# the callee tables are: every `compile()` of one function with one backend shares its
# cache, as PyTorch keeps cache entries on the code object (each guarded on its backend).
_CACHES_ATTR = "__fusegrad_caches__"
_CACHES: weakref.WeakSet = weakref.WeakSet()


def _cache_table(fn) -> dict:
    """`fn`'s runners, keyed by settings, then by `fullgraph`; created if missing (a
    callable without a `__dict__` gets a new table: no sharing)."""
    fdict = getattr(fn, "__dict__", None)
    if not isinstance(fdict, dict):
        return {}
    table = fdict.get(_CACHES_ATTR)
    # (`functools.wraps` copies `__dict__`: a wrapper's copy is another function's table)
    if table is None or table.get(None) is not fn.__code__:
        table = fdict[_CACHES_ATTR] = {None: fn.__code__}
        _CACHES.add(fn)
    return table


def _callee_table(fn) -> dict:
    """`fn`'s table of compiled wrappers, keyed by (backend, dynamic); created if missing."""
    fdict = getattr(fn, "__dict__", None)
    if isinstance(fdict, dict):
        table = fdict.get(_CALLEES_ATTR)
        # (`functools.wraps` copies `__dict__`: a wrapper's copy is another function's table)
        if table is None or table.get(None) is not fn.__code__:
            table = fdict[_CALLEES_ATTR] = {None: fn.__code__}
            _CALLEES.add(fn)
        return table
    return _CALLEES_FALLBACK.setdefault(fn, {})


def compile_callee(fn, backend, dynamic=None):
    """`fn` wrapped for capture (used when a call is run for real after a graph break),
    with the caller's `dynamic` setting."""
    table = _callee_table(fn)
    key = (backend, dynamic)
    wrapped = table.get(key)
    if wrapped is None or wrapped._orig is not fn:
        wrapped = table[key] = CompiledFunction(fn, backend, dynamic=dynamic)
        wrapped._callee = True
    return wrapped


def compile(model=None, *, fullgraph: bool = False, dynamic=None, backend=None,  # noqa: A001
            mode=None, options=None, disable: bool = False,
            recompile_limit: int | None = None):
    """Compile a function or module: as `compile(fn)`, `@compile` or `@compile(...)`.
    `backend=None` is the default backend (`set_default_backend`); `recompile_limit`
    replaces `config.recompile_limit` for this function."""
    if backend is None:
        backend = _default_backend
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                 mode=mode, options=options, disable=disable,
                                 recompile_limit=recompile_limit)
    backend = _backend_with_options(backend, mode, options)
    if not callable(model):  # PyTorch's check, made with `disable=True` too
        raise AssertionError(f"A callable function is expected, but {type(model)} is "
                             "provided.")
    if disable:
        return model
    _switch_off_validation()
    module_cls = _module_class()
    if module_cls is not None and isinstance(model, module_cls):
        from .optimized_module import OptimizedModule

        return OptimizedModule(model, CompiledFunction(type(model).forward, backend,
                                                       fullgraph, dynamic, recompile_limit))
    return _compiled_callable(model, backend, fullgraph, dynamic, recompile_limit)


_VALIDATION = {"switched": False}


def _switch_off_validation() -> None:
    """The first `compile` switches the distributions' argument validation off for the
    process, as PyTorch's does: the checks read values (`bool(valid.all())`), which compiled
    code would have to break its graph for. A program wanting them passes
    `validate_args=True` or switches the default back on."""
    if not _VALIDATION["switched"]:
        _VALIDATION["switched"] = True
        from ..distributions import Distribution

        Distribution.set_default_validate_args(False)


def _compiled_callable(fn, backend, fullgraph, dynamic, recompile_limit):
    """`fn` compiled: a plain function directly; a bound method, a `functools.partial` or an
    object with `__call__` as its Python function with the bound object or arguments put
    back around it; anything else (a builtin) unchanged, since it has no bytecode."""
    if isinstance(fn, types.MethodType):
        inner = _compiled_callable(fn.__func__, backend, fullgraph, dynamic, recompile_limit)
        if isinstance(inner, CompiledFunction):
            inner._self_by_type = False  # (bound to its one instance)
        return functools.partial(inner, fn.__self__)
    if isinstance(fn, functools.partial):
        inner = _compiled_callable(fn.func, backend, fullgraph, dynamic, recompile_limit)
        return functools.partial(inner, *fn.args, **fn.keywords)
    if isinstance(fn, types.FunctionType):
        from .capture.vmap import is_vmap_wrapper

        if is_vmap_wrapper(fn):
            fn = _calling(fn)  # (captured as a call: `capture/vmap.py`)
        compiled = CompiledFunction(fn, backend, fullgraph, dynamic, recompile_limit)
        compiled._self_by_type = True
        return compiled
    call = next((c.__dict__["__call__"] for c in type(fn).__mro__ if "__call__" in c.__dict__),
                None)
    if isinstance(call, types.FunctionType):
        inner = CompiledFunction(call, backend, fullgraph, dynamic, recompile_limit)
        return functools.partial(inner, fn)
    return fn


def _calling(wrapper):
    """A function calling `wrapper` (what `func.vmap(fn)` returns), so that capture sees
    the call to it, which it records as a whole (Dynamo's frame for `compile(vmap(fn))`
    is the transform's call too)."""
    def vmapped(*args, **kwargs):
        return wrapper(*args, **kwargs)

    vmapped.__name__ = getattr(wrapper, "__name__", "vmapped")
    vmapped.__qualname__ = getattr(wrapper, "__qualname__", "vmapped")
    vmapped.__doc__ = wrapper.__doc__
    return vmapped


_default_backend = "inductor"


def get_default_backend():
    """The backend `compile` uses when none is given ("inductor" unless set)."""
    return _default_backend


def set_default_backend(backend) -> None:
    """Make `backend` (a name or a callable) the one `compile` uses when none is given;
    None restores "inductor"."""
    global _default_backend
    # An unknown name is not checked here (PyTorch's neither): the next `compile` fails.
    _default_backend = "inductor" if backend is None else backend


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
    """Never capture `fn`: calls to it run eagerly (a graph break where it is called). With
    `recursive=False` only `fn`'s own frame is left uncaptured: the functions and modules it
    calls from compiled code are captured on their own frames, as PyTorch's frame hook
    still sees them."""
    if fn is None:
        return lambda f: disable(f, recursive)

    @functools.wraps(fn)
    def eager(*args, **kwargs):
        return fn(*args, **kwargs)

    eager._fusegrad_disabled = True
    eager._fusegrad_disabled_recursive = bool(recursive)
    return eager


def reset() -> None:
    """Forget every captured graph (all functions recompile on their next call)."""
    for runner in list(_RUNNERS):
        runner.segments.clear()
        runner.history.clear()
        runner.warned = False
    for fn in list(_CALLEES):
        fn.__dict__.pop(_CALLEES_ATTR, None)
    _CALLEES.clear()
    for fn in list(_CACHES):
        fn.__dict__.pop(_CACHES_ATTR, None)
    _CACHES.clear()
    _CALLEES_FALLBACK.clear()


def last_graphs(fn) -> list:
    """The GraphModules captured for `fn` (a compiled function), in capture order."""
    runner = fn._runner if isinstance(fn, CompiledFunction) else None
    if runner is None:
        return []
    return [detail for event, detail in runner.history if event == "graph"]


from .markers import (  # noqa: E402 - the user-facing marks, after the stage's own names
    allow_in_graph,
    assume_constant_result,
    cudagraph_mark_step_begin,
    is_compiling,
    is_dynamo_compiling,
    is_exporting,
)
from .stance import set_stance  # noqa: E402

__all__ = ["compile", "config", "disable", "list_backends", "register_backend", "reset",
           "last_graphs", "CompiledFunction", "allow_in_graph", "assume_constant_result",
           "cudagraph_mark_step_begin", "is_compiling", "is_dynamo_compiling", "is_exporting",
           "set_stance", "get_default_backend", "set_default_backend"]
