"""Symbolic tracing: run a function or Module on Proxies and keep what they record.

While a trace runs, the tracer temporarily routes:

- calls of submodules (the `__call__` of every Module class in the traced hierarchy) to
  `Tracer.call_module`, which records leaf modules as call_module nodes and traces into the
  others;
- parameter reads (`Module.__getattr__`) to get_attr nodes;
- the public fusegrad functions (`fusegrad.relu`, `fusegrad.sum`, ...) to call_function
  nodes with the arguments exactly as written. Functions reached otherwise (imported by name,
  Tensor methods of real tensors) still arrive through dispatch's `__fusegrad_function__`
  protocol;
- functions registered with `wrap()`, and `math` functions, in the traced code's globals.

Everything is restored when the trace ends. `concrete_args` specialise inputs to given values,
guarded by assertions in the graph, as in torch.fx.
"""

from __future__ import annotations

import builtins
import functools
import inspect
import math
import operator
import sys
from collections.abc import Callable
from typing import Any

from .._functions.compat_more import _assert
from .._torch_function import _PYTHON_LEVEL, _normalize
from ..ops.surface import UNTRACED, has_flag
from ._module import Module, is_module, named_modules, named_tensors
from .graph import Graph
from .graph_module import GraphModule
from .node import IMPURE_FUNCTIONS
from .proxy import Proxy, TracerBase, flatten_arguments

_WRAPPED: list[tuple[dict, str]] = []  # (globals, name) registered by wrap()


def wrap(fn_or_name: str | Callable) -> str | Callable:
    """Record calls of this module-level function as call_function nodes when tracing.

    Call at module scope with the function or its name; calls made from code in the same
    module become nodes instead of being traced through."""
    caller = sys._getframe(1).f_globals
    name = fn_or_name if isinstance(fn_or_name, str) else fn_or_name.__name__
    _WRAPPED.append((caller, name))
    return fn_or_name


def _assert_is_none(value: Any, message: str) -> None:
    """Raise AssertionError(message) unless `value` is None (guards concrete_args)."""
    if value is not None:
        raise AssertionError(message)


IMPURE_FUNCTIONS.update({_assert, _assert_is_none})


def _find_proxy(args: tuple, kwargs: dict) -> Proxy | None:
    for a in flatten_arguments((args, kwargs)):
        if isinstance(a, Proxy):
            return a
    return None


def _recording(fn: Callable) -> Callable:
    """`fn`, recording a call_function node instead when an argument is a Proxy."""
    fn = getattr(fn, "__fx_original__", fn)  # a trace inside a trace wraps only once
    info = getattr(fn, "_torch_function_info", None)
    # A function PyTorch writes in Python hands its arguments to the tracer normalised
    # (required ones by position, the rest by keyword with defaults filled in): its node's
    # args and kwargs read so.
    python_level = info[1] if info is not None and info[3] & _PYTHON_LEVEL else None

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        proxy = _find_proxy(args, kwargs)
        if proxy is not None:
            if python_level is not None:
                args, kwargs = _normalize(python_level, args, kwargs)
            return proxy.tracer.create_proxy("call_function", fn, args, kwargs)
        return fn(*args, **kwargs)

    wrapper.__fx_original__ = fn  # type: ignore[attr-defined]
    return wrapper


class _Patcher:
    """Set attributes for the duration of a trace and restore them afterwards."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def set_attr(self, obj: Any, name: str, value: Any) -> None:
        """Set `obj.name`, remembering how to undo it."""
        missing = object()
        old = obj.__dict__.get(name, missing) if isinstance(obj, type) else \
            getattr(obj, name, missing)
        setattr(obj, name, value)
        if old is missing:
            self._undo.append(lambda: delattr(obj, name))
        else:
            self._undo.append(lambda: setattr(obj, name, old))

    def set_item(self, d: dict, key: str, value: Any) -> None:
        """Set `d[key]`, remembering how to undo it."""
        if key in d:
            old = d[key]
            self._undo.append(lambda: d.__setitem__(key, old))
        else:
            self._undo.append(lambda: d.pop(key, None))
        d[key] = value

    def restore(self) -> None:
        """Undo every change, newest first."""
        while self._undo:
            self._undo.pop()()


# nn.functional functions that torch.fx traces into rather than records (they only call a
# Tensor method, so the method call is what appears in the graph).
_FUNCTIONAL_TRACED_THROUGH = frozenset({"sigmoid", "tanh"})


def _public_functions() -> list[tuple[Any, str, Callable]]:
    """(namespace, name, function) for the public functions of fusegrad,
    fusegrad.nn.functional, fusegrad.linalg and fusegrad.fft (when loaded), which torch.fx
    records as call_function."""
    import fusegrad

    spaces = [fusegrad]
    functional = sys.modules.get("fusegrad.nn.functional")
    if functional is not None:
        spaces.append(functional)
    # These also hold the helpers they import: only their `__all__` is public. fft is small
    # and lazily loaded: loaded here, so code reaching it first inside the trace records it.
    import fusegrad.fft  # noqa: F401

    only_all = [m for m in map(sys.modules.get, ("fusegrad.linalg", "fusegrad.fft"))
                if m is not None]
    spaces += only_all
    out = []
    for space in spaces:
        listed = set(space.__all__) if space in only_all else None
        for name, obj in vars(space).items():
            if name.startswith("_") or not inspect.isfunction(obj):
                continue
            if listed is not None and name not in listed:
                continue
            if has_flag(name, UNTRACED) or (space is functional
                                         and name in _FUNCTIONAL_TRACED_THROUGH):
                continue
            module = getattr(obj, "__module__", "") or ""
            if module.startswith("fusegrad") and not module.startswith("fusegrad.fx"):
                out.append((space, name, obj))
    return out


class PHBase:
    """An object standing for an input leaf in `concrete_args`: each one becomes its own
    placeholder, the rest of the structure around it is fixed."""

    def __repr__(self) -> str:
        return "PH"


PH = PHBase()


def _holds_ph(value: Any) -> bool:
    if isinstance(value, PHBase):
        return True
    if isinstance(value, dict):
        return any(_holds_ph(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_ph(v) for v in value)
    return False


def _tree_map(fn: Callable, value: Any) -> Any:
    """`value` with `fn` applied to every leaf (dict, list and tuple are the structure)."""
    if isinstance(value, dict):
        return {k: _tree_map(fn, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_tree_map(fn, v) for v in value)
    return fn(value)


def _has_varstuff(fn: Callable) -> bool:
    code = getattr(fn, "__code__", None)
    return code is not None and bool(code.co_flags & (inspect.CO_VARARGS
                                                       | inspect.CO_VARKEYWORDS))


def _flatten_signature(fn: Callable) -> Callable:
    """`fn` with every parameter positional, `*args` and `**kwargs` included: a trace passes
    each of those as one Proxy (Python would try to unpack a Proxy passed as `*args`)."""
    import types

    code = fn.__code__
    count = code.co_argcount + code.co_kwonlyargcount + \
        bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    flags = code.co_flags & ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
    new_code = code.replace(co_argcount=count, co_kwonlyargcount=0, co_posonlyargcount=0,
                            co_flags=flags)
    return types.FunctionType(new_code, fn.__globals__, fn.__name__, None, fn.__closure__)


class Tracer(TracerBase):
    """Turns a function or Module into a Graph by running it on Proxies."""

    def __init__(self, autowrap_modules: tuple = (math,), autowrap_functions: tuple = (),
                 param_shapes_constant: bool = False) -> None:
        super().__init__()
        self._autowrap_modules = tuple(autowrap_modules)
        self._autowrap_ids = {id(v) for m in autowrap_modules for v in vars(m).values()
                              if callable(v) and not isinstance(v, type)}
        self._autowrap_ids |= {id(f) for f in autowrap_functions}
        self.param_shapes_constant = param_shapes_constant
        self.graph: Graph | None = None
        self.root: Any = None

    # ------------------------------------------------------------------ policy hooks

    def is_leaf_module(self, m: Any, module_qualified_name: str) -> bool:
        """Whether `m` is recorded as one call_module node (library layers are)."""
        module = type(m).__module__ or ""
        library = module.startswith("fusegrad.nn") or module.startswith("torch.nn")
        container = any(c.__name__ in ("Sequential", "ModuleList", "ModuleDict")
                        for c in type(m).__mro__)
        return library and not container

    def path_of_module(self, mod: Any) -> str:
        """The qualified name of submodule `mod` within the traced root."""
        path = self._module_paths.get(id(mod))
        if path is None:
            raise NameError("module is not installed as a submodule")
        return path

    def call_module(self, m: Any, forward: Callable, args: tuple, kwargs: dict) -> Any:
        """Record a leaf module as call_module; trace through the others."""
        path = self.path_of_module(m)
        if not self.is_leaf_module(m, path):
            return forward(*args, **kwargs)
        return self.create_proxy("call_module", path, args, kwargs)

    def getattr(self, attr: str, attr_val: Any, parameter_proxy_cache: dict) -> Any:
        """What a module attribute read returns while tracing (a Proxy for parameters)."""
        if id(attr_val) in self._param_names:
            name = self._param_names[id(attr_val)]
            if name not in parameter_proxy_cache:
                parameter_proxy_cache[name] = self.create_proxy("get_attr", name, (), {})
            return parameter_proxy_cache[name]
        return attr_val

    # ------------------------------------------------------------------ tracing

    def create_args_for_root(self, fn: Callable, is_method: bool,
                             concrete_args: dict | None = None) -> tuple[list, dict]:
        """Placeholders for `fn`'s parameters, as the (args, kwargs) to call it with: Proxies,
        or the values given in `concrete_args`. As in torch.fx the placeholders are the
        positional parameters, then the keyword-only ones, then `*args` and `**kwargs`,
        each of those two a single Proxy (see `_flatten_signature`)."""
        concrete_args = concrete_args or {}
        params = list(inspect.signature(fn).parameters.values())
        if is_method:
            params = params[1:]
        kinds = inspect.Parameter
        order = {kinds.POSITIONAL_ONLY: 0, kinds.POSITIONAL_OR_KEYWORD: 0,
                 kinds.KEYWORD_ONLY: 1, kinds.VAR_POSITIONAL: 2, kinds.VAR_KEYWORD: 3}
        params.sort(key=lambda p: order[p.kind])
        args: list = []
        kwargs: dict = {}
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                stars = "*" if p.kind is p.VAR_POSITIONAL else "**"
                args.append(self.proxy(self.create_node("placeholder", f"{stars}{p.name}",
                                                        (), {})))
                continue
            default = () if p.default is p.empty else (p.default,)
            if p.name in concrete_args:
                value = concrete_args[p.name]
                if isinstance(value, PHBase) or _holds_ph(value):
                    value = self._ph_placeholders(p.name, value)
                else:
                    self._concrete_placeholder(p.name, default, value)
            else:
                # the parameter's annotation is the input's type, as torch.fx records it
                kind = None if p.annotation is p.empty else p.annotation
                value = self.proxy(self.create_node("placeholder", p.name, default, {},
                                                    type_expr=kind))
            if p.kind is p.KEYWORD_ONLY and not _has_varstuff(fn):
                kwargs[p.name] = value
            else:
                args.append(value)
        return args, kwargs

    def _ph_placeholders(self, name: str, value: Any) -> Any:
        """`value` with each PH leaf replaced by a placeholder `name_1`, `name_2`, ... and
        each other leaf kept, guarded like a concrete argument."""
        count = [0]

        def leaf(x: Any) -> Any:
            count[0] += 1
            node = self.create_node("placeholder", f"{name}_{count[0]}", (), {})
            if isinstance(x, PHBase):
                return self.proxy(node)
            message = f"{name} has been specialized to have value {x} but got another value"
            if x is None:
                self.create_node("call_function", _assert_is_none, (node, message), {})
            elif isinstance(x, (bool, int, float, str)):
                eq = self.create_node("call_function", operator.eq, (node, x), {})
                self.create_node("call_function", _assert, (eq, message), {})
            return x

        self._structured_args = True
        return _tree_map(leaf, value)

    def _concrete_placeholder(self, name: str, default: tuple, value: Any) -> None:
        """A placeholder for a specialised argument (renamed as torch.fx renames it) and the
        check that a later call passes the same value."""
        self.graph._namespace.create_name(name)  # taken, so the input is renamed `name_1`
        node = self.graph.placeholder(name, default_value=default[0] if default else
                                      inspect.Parameter.empty)
        node.target = node.name
        message = f"{name} has been specialized to have value {value} but got another value"
        if value is None:
            self.create_node("call_function", _assert_is_none, (node, message), {})
        elif isinstance(value, (bool, int, float, str)):
            eq = self.create_node("call_function", operator.eq, (node, value), {})
            self.create_node("call_function", _assert, (eq, message), {})

    def trace(self, root: Any, concrete_args: dict | None = None) -> Graph:
        """Trace `root` (a Module or a function) and return its Graph."""
        if is_module(root):
            self.root = root
            fn = type(root).forward
            is_method = True
        else:
            self.root = Module()
            fn = root
            is_method = False
        self.traced_func_name = getattr(fn, "__name__", "forward")
        self.graph = Graph(tracer_cls=type(self))
        self._module_paths = {id(m): name for name, m in named_modules(self.root)}
        self._tensor_names: dict[int, str] = {}
        for name, t in named_tensors(self.root):
            self._tensor_names.setdefault(id(t), name)
        self._param_names: dict[int, str] = {}
        for _, m in named_modules(self.root):
            for pname, p in (getattr(m, "_parameters", None) or {}).items():
                if p is not None:
                    self._param_names.setdefault(id(p), self._tensor_names.get(id(p), pname))
        self._structured_args = False
        args, kwargs = self.create_args_for_root(fn, is_method, concrete_args)
        if self._structured_args:
            # the generated forward takes the original arguments and flattens them
            params = [p for p in inspect.signature(fn).parameters.values()
                      if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
            names = [p.name for p in params[1 if is_method else 0:]]
            self.graph._pytree_info = (names, _tree_map(lambda _: None, (*args, *kwargs.values())))
        call = _flatten_signature(fn) if _has_varstuff(fn) else fn
        patcher = _Patcher()
        try:
            self._install(patcher, fn)
            out = call(self.root, *args, **kwargs) if is_method else call(*args, **kwargs)
        finally:
            patcher.restore()
        ret = getattr(fn, "__annotations__", {}).get("return")
        self.create_node("output", "output", (self.create_arg(out),), {}, type_expr=ret)
        return self.graph

    def _install(self, patcher: _Patcher, fn: Callable) -> None:
        tracer = self
        cache: dict = {}
        classes: dict[type, None] = {}
        for _, m in named_modules(self.root):
            for c in type(m).__mro__:
                if "__call__" in c.__dict__ or "__getattr__" in c.__dict__:
                    classes.setdefault(c, None)
        for c in classes:
            if "__call__" in c.__dict__:
                orig_call = c.__dict__["__call__"]

                def module_call(mod, *a, _orig=orig_call, **k):
                    def forward(*fa, **fk):
                        return _orig(mod, *fa, **fk)

                    return tracer.call_module(mod, forward, a, k)

                patcher.set_attr(c, "__call__", module_call)
            if "__getattr__" in c.__dict__:
                orig_getattr = c.__dict__["__getattr__"]

                def module_getattr(mod, name, _orig=orig_getattr):
                    return tracer.getattr(name, _orig(mod, name), cache)

                patcher.set_attr(c, "__getattr__", module_getattr)
        for space, name, f in _public_functions():
            patcher.set_attr(space, name, _recording(f))
        fn_globals = getattr(fn, "__globals__", {})
        for d in [fn_globals] + [vars(m) for m in self._autowrap_modules]:
            for name, value in list(d.items()):
                if id(value) in self._autowrap_ids and not name.startswith("_"):
                    patcher.set_item(d, name, _recording(value))
        for g, name in _WRAPPED:
            value = g.get(name, getattr(builtins, name, None))
            if value is not None and not hasattr(value, "__fx_original__"):
                patcher.set_item(g, name, _recording(value))


def symbolic_trace(root: Any, concrete_args: dict | None = None) -> GraphModule:
    """Trace a Module or function into a GraphModule."""
    tracer = Tracer()
    graph = tracer.trace(root, concrete_args)
    name = type(root).__name__ if is_module(root) else getattr(root, "__name__", "function")
    return GraphModule(tracer.root, graph, name)
