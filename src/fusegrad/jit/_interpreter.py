"""Running a scripted graph: each node through fusegrad's public ops, so autograd records
what runs as it does for eager code.

An `aten::` node names what it runs by its `form` attribute:

    operator    a Python operator or builtin on its inputs (`aten::add` is `a + b`, for
                tensors and numbers alike; `aten::Bool` is `bool(a)`; `aten::len`)
    function    a function of the `fusegrad` namespace (`aten::relu` is `fusegrad.relu`)
    functional  a function of `fusegrad.nn.functional` (`aten::linear`)
    method      a method of its first input (`aten::sum` from `x.sum(dim=1)`)
    attribute   a tensor property (`aten::T` from `x.T`, `aten::requires_grad`)
    overload    a registry entry (`aten::mul` with `overload="Tensor"`), as traced graphs
                record them

`resolve` is the only place a name becomes something callable, and it admits only these:
a graph read from a file can call fusegrad's tensor operations and nothing else.
"""

from __future__ import annotations

import inspect
import math
import operator
from typing import Any

from ._ir import Block, Graph, Node


class Error(RuntimeError):
    """An exception raised by scripted code (`raise`, a failed `assert`)."""


def _setitem(obj, index, value):
    obj[index] = value


def _append(lst, value):
    lst.append(value)
    return lst


def _format(template: str, *args) -> str:
    """`template` with each "{}" replaced by the next argument ("{{" and "}}" are braces).
    Not `str.format`: a template read from a file must not reach attributes of the values."""
    out, i, k = [], 0, 0
    while i < len(template):
        pair = template[i:i + 2]
        if pair in ("{{", "}}"):
            out.append(pair[0])
            i += 2
        elif pair == "{}":
            if k >= len(args):
                raise Error("format(): too few arguments")
            out.append(str(args[k]))
            k += 1
            i += 2
        elif template[i] in "{}":
            raise Error("format(): only {} placeholders are supported")
        else:
            out.append(template[i])
            i += 1
    return "".join(out)


def _range_length(lo: int, hi: int, step: int) -> int:
    if step == 0:
        raise Error("range() arg 3 must not be zero")
    return max(0, math.ceil((hi - lo) / step))


# Python operators and builtins, shared by tensors and numbers.
OPERATORS: dict[str, Any] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
    "floordiv": operator.floordiv, "remainder": operator.mod, "pow": operator.pow,
    "matmul": operator.matmul, "__and__": operator.and_, "__or__": operator.or_,
    "__xor__": operator.xor, "__lshift__": operator.lshift, "__rshift__": operator.rshift,
    "neg": operator.neg, "bitwise_not": operator.invert, "__not__": operator.not_,
    "lt": operator.lt, "gt": operator.gt, "le": operator.le, "ge": operator.ge,
    "eq": operator.eq, "ne": operator.ne, "__is__": operator.is_,
    "__isnot__": operator.is_not, "__contains__": operator.contains,
    "__getitem__": operator.getitem, "__setitem__": _setitem,
    "add_": operator.iadd, "sub_": operator.isub, "mul_": operator.imul,
    "div_": operator.itruediv, "floordiv_": operator.ifloordiv, "pow_": operator.ipow,
    "Bool": bool, "Int": int, "Float": float, "len": len, "abs": abs, "min": min,
    "max": max, "str": str, "sorted": sorted, "append": _append, "format": _format,
    "__range_length": _range_length,
    "__derive_index": lambda i, lo, step: lo + i * step,
}
OPERATORS.update({f"math_{name}": getattr(math, name) for name in (
    "floor", "ceil", "trunc", "sqrt", "exp", "log", "sin", "cos", "tan", "tanh", "fabs", "pow",
    "isnan", "isinf", "isfinite")})

# fusegrad functions that change process state or touch files: never callable from a graph.
_NOT_OPS = {"save", "load", "compile", "manual_seed", "seed", "initial_seed",
            "use_deterministic_algorithms", "from_numpy", "no_grad", "enable_grad",
            "inference_mode", "Generator", "FakeTensor", "FakeTensorMode"}


def _public(name: str) -> bool:
    return isinstance(name, str) and name.isidentifier() and not name.startswith("_")


def _fusegrad_function(namespace, name: str):
    """`namespace.name` when it is a public function defined by fusegrad, else None."""
    if not _public(name) or name in _NOT_OPS or name.startswith(("set_", "get_")):
        return None
    fn = getattr(namespace, name, None)
    if fn is None or inspect.isclass(fn) or not callable(fn):
        return None
    module = getattr(fn, "__module__", "") or ""
    return fn if module.startswith("fusegrad") else None


def resolve(kind: str, attrs: dict):
    """What an `aten::` node runs, or None when its name is not an operation fusegrad
    offers (so a saved graph naming anything else is refused when it is loaded)."""
    import fusegrad

    name = kind[len("aten::"):]
    form = attrs.get("form", "function")
    if form == "operator":
        return OPERATORS.get(name)
    if form == "function":
        return _fusegrad_function(fusegrad, name)
    if form == "functional":
        return _fusegrad_function(fusegrad.nn.functional, name)
    if form == "method":
        if not _public(name) or not (
                hasattr(fusegrad.Tensor, name) or hasattr(str, name) or name in (
                    "append", "pop", "insert", "extend", "index", "count") or name in _DICT):
            return None
        return _method(name)
    if form == "attribute":
        from ._expressions import TENSOR_PROPERTIES

        return _property(name) if name in TENSOR_PROPERTIES else None
    if form == "overload":
        from ..ops import aten
        from ..ops.overloads import OpOverload

        overload = attrs.get("overload", "default")
        if not isinstance(overload, str) or not _public(overload):
            return None
        # (a registry entry, or a handle of one such as `gt.Scalar`, as traced graphs record
        # a comparison with a number)
        handle = getattr(getattr(aten, name, None), overload, None)
        return handle if isinstance(handle, OpOverload) else None
    return None


def _property(name: str):
    def read(obj):
        import fusegrad

        if not isinstance(obj, fusegrad.Tensor):
            raise Error(f"attribute {name} read from a {type(obj).__name__}")
        return getattr(obj, name)

    read.__name__ = name
    return read


# methods of dicts; the views come back as lists, which loops index
_DICT = {"items", "keys", "values", "get", "pop", "update", "clear", "setdefault", "copy"}


def _method(name: str):
    def call(obj, *args, **kwargs):
        import fusegrad

        if isinstance(obj, dict) and name in _DICT:
            out = getattr(obj, name)(*args, **kwargs)
            return list(out) if name in ("items", "keys", "values") else out
        if not isinstance(obj, (fusegrad.Tensor, list, str)):
            raise Error(f"method {name} called on a {type(obj).__name__}")
        return getattr(obj, name)(*args, **kwargs)

    call.__name__ = name
    return call


PRIMS = {"prim::Constant", "prim::If", "prim::Loop", "prim::GetAttr", "prim::SetAttr",
         "prim::CreateObject",
         "prim::CallMethod", "prim::CallFunction", "prim::TupleConstruct",
         "prim::TupleUnpack", "prim::ListConstruct", "prim::ListUnpack", "prim::DictConstruct",
         "prim::SliceConstruct", "prim::RaiseException", "prim::Print",
         "prim::unchecked_cast", "prim::Uninitialized"}


def allowed_kind(kind: str, attrs: dict) -> bool:
    """Whether a loaded node may be run: a known `prim::` kind or a resolvable `aten::` op."""
    if kind in PRIMS:
        return True
    return kind.startswith("aten::") and resolve(kind, attrs) is not None


class Interpreter:
    """Runs graphs of one program; `unit` provides `functions` (name -> object with a
    `graph`) and `tensors` (name -> tensor constant)."""

    def __init__(self, unit):
        self.unit = unit

    def run(self, graph: Graph, args: list) -> Any:
        """Run `graph` on `args` (its parameters in order); its single result."""
        env: dict = {}
        out = self._block(graph, args, env)
        return out[0] if len(out) == 1 else tuple(out)

    def _block(self, block: Block, args: list, env: dict) -> list:
        for p, a in zip(block.params, args):
            env[p] = a
        for node in block.nodes:
            self._node(node, env)
        return [env[v] for v in block.returns]

    def _node(self, node: Node, env: dict) -> None:
        kind = node.kind
        args = [env[v] for v in node.inputs]
        if kind == "prim::If":
            outs = self._block(node.blocks[0 if args[0] else 1], [], env)
        elif kind == "prim::Loop":
            outs = self._loop(node, args, env)
        elif kind.startswith("aten::"):
            outs = [self._call(node, args)]
        else:
            outs = self._prim(node, args)
        if len(node.outputs) == 1 and kind in ("prim::TupleUnpack", "prim::ListUnpack"):
            outs = list(outs)
        for v, o in zip(node.outputs, outs):
            env[v] = o

    def _loop(self, node: Node, args: list, env: dict) -> list:
        trip, cond, carried = args[0], args[1], list(args[2:])
        body = node.blocks[0]
        i = 0
        while cond and i < trip:
            out = self._block(body, [i, *carried], env)
            cond, carried = out[0], out[1:]
            i += 1
        return carried

    def _call(self, node: Node, args: list) -> Any:
        fn = node.impl
        if fn is None:
            fn = node.impl = resolve(node.kind, node.attrs)
            if fn is None:
                raise Error(f"unknown operation {node.kind}")
        names = node.attrs.get("kwargs") or []
        if names:
            npos = len(args) - len(names)
            return fn(*args[:npos], **dict(zip(names, args[npos:])))
        return fn(*args)

    def _prim(self, node: Node, args: list) -> list:
        kind, attrs = node.kind, node.attrs
        if kind == "prim::Constant":
            return [self._constant(attrs)]
        if kind == "prim::GetAttr":
            obj = args[0]
            if hasattr(obj, "jit_getattr"):
                return [obj.jit_getattr(attrs["name"])]
            return [getattr(_script_object(self.unit, obj), attrs["name"])]
        if kind == "prim::SetAttr":
            obj = args[0]
            if hasattr(obj, "jit_setattr"):
                obj.jit_setattr(attrs["name"], args[1])
            else:
                setattr(_script_object(self.unit, obj), attrs["name"], args[1])
            return []
        if kind == "prim::CallMethod":
            obj = args[0]
            if hasattr(obj, "jit_call"):
                return [obj.jit_call(attrs["name"], args[1:])]
            _script_object(self.unit, obj)
            return [self.unit.classes[type(obj)].jit_call(obj, attrs["name"], args[1:])]
        if kind == "prim::CreateObject":
            return [self.unit.modules[attrs["type"]].new()]
        if kind == "prim::CallFunction":
            fn = self.unit.functions.get(attrs["name"])
            if fn is None:
                raise Error(f"unknown function {attrs['name']}")
            return [fn.call_graph(list(args))]
        if kind == "prim::TupleConstruct":
            if "type" in attrs:  # a NamedTuple's
                return [self.unit.modules[attrs["type"]].cls(*args)]
            return [tuple(args)]
        if kind == "prim::ListConstruct":
            return [list(args)]
        if kind == "prim::DictConstruct":  # inputs: key, value, key, value, ...
            return [dict(zip(args[::2], args[1::2]))]
        if kind in ("prim::TupleUnpack", "prim::ListUnpack"):
            if len(args[0]) != len(node.outputs):
                raise Error(f"expected {len(node.outputs)} values to unpack, got "
                            f"{len(args[0])}")
            return list(args[0])
        if kind == "prim::SliceConstruct":
            return [slice(*args)]
        if kind == "prim::RaiseException":
            raise Error(f"{attrs.get('exception', 'Exception')}: {args[0] if args else ''}")
        if kind == "prim::Print":
            print(*args)
            return []
        if kind == "prim::PythonOp":  # a `jit.ignore` function, never in a loaded program
            return [self.unit.python_ops[attrs["name"]](*args)]
        if kind == "prim::unchecked_cast":
            return [args[0]]
        if kind == "prim::Uninitialized":
            return [None]
        raise Error(f"unknown operation {kind}")

    def _constant(self, attrs: dict) -> Any:
        if "tensor" in attrs:
            return self.unit.tensors[attrs["tensor"]]
        if "dtype" in attrs:
            import fusegrad

            dt = getattr(fusegrad, attrs["dtype"], None)
            if not isinstance(dt, fusegrad.dtype):
                raise Error(f"unknown dtype {attrs['dtype']}")
            return dt
        if "memory_format" in attrs:
            import fusegrad

            layout = getattr(fusegrad, attrs["memory_format"], None)
            if not isinstance(layout, type(fusegrad.contiguous_format)):
                raise Error(f"unknown memory format {attrs['memory_format']}")
            return layout
        value = attrs.get("value")
        return tuple(value) if attrs.get("tuple") else value


def _script_object(unit, obj):
    """`obj` when it is an instance of a class compiled for script, else the error."""
    if type(obj) not in unit.classes:
        raise Error(f"expected a scripted module or object, got {type(obj).__name__}")
    return obj
