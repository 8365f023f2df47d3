"""`Proxy`: a stand-in value that records what is done to it as nodes of a graph.

Python operators record `operator.*` call_function nodes, attribute reads are recorded
lazily (an `Attribute` becomes a `getattr` node when used as a value, or a call_method node
when called), and fusegrad functions reach `Proxy.__fusegrad_function__` through dispatch.
"""

from __future__ import annotations

import dis
import inspect
import operator
from collections.abc import Callable, Iterator
from typing import Any

from .node import Node


class TraceError(ValueError):
    """A traced program did something a Proxy cannot record (control flow on a value)."""


class Proxy:
    """A value under symbolic tracing, bound to `node` of `tracer`'s graph."""

    def __init__(self, node: Node, tracer: Any = None) -> None:
        if tracer is None:
            tracer = GraphAppendingTracer(node.graph)
        self.tracer = tracer
        self.node = node

    def __repr__(self) -> str:
        return f"Proxy({self.node.name})"

    def __getattr__(self, k: str) -> Attribute:
        if k.startswith("__") and k.endswith("__"):
            raise AttributeError(k)
        return Attribute(self, k)

    def __call__(self, *args: Any, **kwargs: Any) -> Proxy:
        return self.tracer.create_proxy("call_method", "__call__", (self,) + args, kwargs)

    def __iter__(self) -> Iterator[Proxy]:
        frame = inspect.currentframe()
        caller = frame.f_back if frame is not None else None
        if caller is not None:
            n = _unpack_count(caller)
            if n is not None:
                return (self[i] for i in range(n))
        return self.tracer.iter(self)

    def __bool__(self) -> bool:
        return self.tracer.to_bool(self)

    def __len__(self) -> int:
        raise RuntimeError("'len' is not supported in symbolic tracing by default. If you want "
                           "this call to be recorded, please call fusegrad.fx.wrap('len') at "
                           "module scope")

    def __hash__(self) -> int:
        return id(self)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.tracer.create_proxy("call_function", operator.setitem, (self, key, value), {})

    def keys(self) -> Any:
        """`**proxy` unpacking: recorded as a `keys` method call."""
        return self.tracer.keys(self)

    @classmethod
    def __fusegrad_function__(cls, func: Any, types: tuple, args: tuple = (),
                              kwargs: dict | None = None) -> Proxy:
        """Record a fusegrad function called with a Proxy argument."""
        kwargs = kwargs or {}
        tracer = None
        for a in flatten_arguments((args, kwargs)):
            if isinstance(a, Proxy):
                tracer = a.tracer
                break
        if tracer is None:
            raise TraceError(f"no Proxy among the arguments of {func}")
        from .._tensor import Tensor

        func = getattr(func, "__fx_original__", func)
        name = getattr(func, "__name__", "")
        if args and isinstance(args[0], Tensor) and hasattr(Tensor, name):
            # A real tensor's operator or method with a Proxy operand (`t - proxy`): torch.fx
            # records it as the tensor's method. (Explicit `fusegrad.f(t, proxy)` calls made
            # under symbolic_trace are recorded as functions before they reach dispatch.)
            return tracer.create_proxy("call_method", name, args, kwargs)
        return tracer.create_proxy("call_function", func, args, kwargs)


def _refuse_untraced_out(target: Any, out: Any) -> None:
    """An `out=` tensor that is not a traced value (made while tracing, or a global) would be
    written only when the graph runs, while the rest of the trace already read it: a
    TraceError rather than a graph that silently computes with its old values."""
    from .._tensor import Tensor

    outs = out if isinstance(out, (tuple, list)) else (out,)
    if any(isinstance(o, Tensor) for o in outs):
        name = getattr(target, "__name__", target)
        raise TraceError(f"{name}(..., out=...): the out tensor is not a traced value, so the "
                         "trace cannot see what is written into it; pass it in as an input")


class TracerBase:
    """Records nodes into `graph`: what Proxies call to add operations."""

    graph: Any = None
    root: Any = None
    _tensor_names: dict = {}

    def __init__(self) -> None:
        self.graph = None
        self.root = None
        self._tensor_names = {}

    def to_bool(self, obj: Proxy) -> bool:
        """Called for `bool(proxy)`: control flow on traced values is not supported."""
        raise TraceError("symbolically traced variables cannot be used as inputs to control "
                         "flow")

    def iter(self, obj: Proxy) -> Any:
        """Called for `iter(proxy)` outside tuple unpacking."""
        raise TraceError("Proxy object cannot be iterated. This can be attempted when the Proxy "
                         "is used in a loop or as a *args or **kwargs function argument. See "
                         "the torch.fx docs on pytorch.org for a more detailed explanation of "
                         "what types of control flow can be traced, and check out the Proxy "
                         "docstring for help troubleshooting Proxy iteration errors")

    def keys(self, obj: Proxy) -> Any:
        """Called for `proxy.keys()` (`**proxy`)."""
        return Attribute(obj, "keys")()

    def create_node(self, kind: str, target: Any, args: tuple, kwargs: dict,
                    name: str | None = None, type_expr: Any = None) -> Node:
        """Add a node to the graph being built."""
        return self.graph.create_node(kind, target, args, kwargs, name, type_expr)

    def proxy(self, node: Node) -> Proxy:
        """Wrap `node` in a Proxy."""
        return Proxy(node, self)

    def create_proxy(self, kind: str, target: Any, args: tuple, kwargs: dict,
                     name: str | None = None, type_expr: Any = None,
                     proxy_factory_fn: Callable[[Node], Proxy] | None = None) -> Proxy:
        """Record a node whose arguments may hold Proxies; return a Proxy for its value."""
        target = getattr(target, "__fx_original__", target)
        if kind == "call_function" and kwargs.get("out") is not None:
            _refuse_untraced_out(target, kwargs["out"])
        args_ = self.create_arg(args)
        kwargs_ = self.create_arg(kwargs)
        node = self.create_node(kind, target, args_, kwargs_, name, type_expr)
        return proxy_factory_fn(node) if proxy_factory_fn is not None else self.proxy(node)

    def create_arg(self, a: Any) -> Any:
        """Turn a value into a node argument (Proxies into nodes, tensors into get_attr)."""
        from .._tensor import Tensor

        if isinstance(a, Proxy):
            return a.node
        if isinstance(a, Node):
            return a
        if isinstance(a, tuple):
            items = [self.create_arg(x) for x in a]
            return type(a)(*items) if hasattr(a, "_fields") else tuple(items)
        if isinstance(a, list):
            return [self.create_arg(x) for x in a]
        if isinstance(a, dict):
            out = {}
            for k, v in a.items():
                if not isinstance(k, str):
                    k = self.create_arg(k)
                out[k] = self.create_arg(v)
            return out
        if isinstance(a, slice):
            return slice(self.create_arg(a.start), self.create_arg(a.stop),
                         self.create_arg(a.step))
        if isinstance(a, Tensor):
            name = self._tensor_names.get(id(a))
            if name is None and self.root is None:
                return a  # no module to hold it: a constant of the generated code
            if name is None:
                name = self.get_fresh_qualname("_tensor_constant")
                setattr(self.root, name, a)
                self._tensor_names[id(a)] = name
            return self.create_node("get_attr", name, (), {})
        return a

    def get_fresh_qualname(self, prefix: str) -> str:
        """An attribute name `prefix<N>` not yet used on the root."""
        i = 0
        while hasattr(self.root, f"{prefix}{i}"):
            i += 1
        return f"{prefix}{i}"



class GraphAppendingTracer(TracerBase):
    """Appends the operations of Proxies to an existing graph (for hand-written rewrites)."""

    def __init__(self, graph: Any) -> None:
        super().__init__()
        self.graph = graph


def flatten_arguments(a: Any) -> Iterator[Any]:
    """The leaves of nested tuples, lists, dicts and slices, in order."""
    if isinstance(a, (tuple, list)):
        for x in a:
            yield from flatten_arguments(x)
    elif isinstance(a, dict):
        for x in a.values():
            yield from flatten_arguments(x)
    elif isinstance(a, slice):
        yield from flatten_arguments((a.start, a.stop, a.step))
    else:
        yield a


def _unpack_count(frame) -> int | None:
    """If the caller is unpacking the iterated value (`a, b = proxy`), how many targets."""
    offset = frame.f_lasti
    for inst in dis.get_instructions(frame.f_code):
        if inst.offset == offset:
            return inst.argval if inst.opname == "UNPACK_SEQUENCE" else None
    return None


class Attribute(Proxy):
    """`proxy.name`: a getattr node when used as a value, a call_method node when called."""

    def __init__(self, root: Proxy, attr: str) -> None:
        self.root = root
        self.attr = attr
        self.tracer = root.tracer
        self._node: Node | None = None

    @property
    def node(self) -> Node:  # type: ignore[override]
        """The getattr node (made on first use)."""
        if self._node is None:
            self._node = self.tracer.create_proxy(
                "call_function", getattr, (self.root, self.attr), {}).node
        return self._node

    def __call__(self, *args: Any, **kwargs: Any) -> Proxy:
        return self.tracer.create_proxy("call_method", self.attr, (self.root,) + args, kwargs)


def _binary(fn):
    def method(self, other):
        return self.tracer.create_proxy("call_function", fn, (self, other), {})

    return method


def _reflected(fn):
    def method(self, other):
        return self.tracer.create_proxy("call_function", fn, (other, self), {})

    return method


def _unary(fn):
    def method(self):
        return self.tracer.create_proxy("call_function", fn, (self,), {})

    return method


_REFLECTABLE = ("add", "sub", "mul", "floordiv", "truediv", "mod", "pow", "lshift", "rshift",
                "and", "or", "xor", "matmul")
_BINARY = _REFLECTABLE + ("eq", "ne", "lt", "gt", "le", "ge", "getitem")
_UNARY = ("neg", "pos", "invert", "abs")

for _name in _BINARY:
    _fn = getattr(operator, _name + "_" if _name in ("and", "or") else _name)
    setattr(Proxy, f"__{_name}__", _binary(_fn))
for _name in _REFLECTABLE:
    _fn = getattr(operator, _name + "_" if _name in ("and", "or") else _name)
    setattr(Proxy, f"__r{_name}__", _reflected(_fn))
for _name in _UNARY:
    setattr(Proxy, f"__{_name}__", _unary(getattr(operator, _name)))
Proxy.__hash__ = lambda self: id(self)  # __eq__ records a node; identity stays hashable
