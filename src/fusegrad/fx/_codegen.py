"""Python source for a Graph: one statement per node, values released after their last use.

The generated `forward` looks like torch.fx's: `add = x + y;  x = y = None`, methods as
`x.sum(dim = 1)`, modules as `self.linear(x)`, fusegrad functions as `fusegrad.relu(x)`.
Objects that have no literal spelling are passed in through the globals of the code.
"""

from __future__ import annotations

import builtins
import inspect
import math
import operator
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from ._namespace import Namespace
from .node import MAGIC_FORMATS, Node

_ILLEGAL = re.compile(r"[^0-9a-zA-Z_]+")
# Names of builtins: a node named so is held in another variable (`input_1 = input`)
_BUILTIN_NAMES = frozenset(n for n in dir(builtins) if not n.startswith("_"))
_LITERALS = (int, float, bool, str, bytes, complex, type(None), type(Ellipsis))


@dataclass
class PythonCode:
    """Generated source and the globals it must be executed with."""

    src: str
    globals: dict[str, Any] = field(default_factory=dict)


def _attr_path(base: str, target: str) -> str:
    out = base
    for atom in target.split("."):
        out = f"{out}.{atom}" if atom.isidentifier() else f'getattr({out}, "{atom}")'
    return out


class _Emitter:
    def __init__(self) -> None:
        import fusegrad

        self.globals: dict[str, Any] = {"fusegrad": fusegrad, "inf": math.inf,
                                        "nan": math.nan}
        self.names = Namespace()
        for g in self.globals:
            self.names._used.add(g)
        # node name -> the variable the code holds it in, where they differ: a node named as
        # a builtin (export's `input` placeholder) is held in `input_1`, as torch.fx does
        self.local: dict[str, str] = {}

    def var(self, node: Node) -> str:
        """The variable holding `node`'s value in the generated code."""
        return self.local.get(node.name, node.name)

    def add_global(self, hint: str, obj: Any) -> str:
        """A global name bound to `obj` (reusing the name given to the same object)."""
        for k, v in self.globals.items():
            if v is obj:
                return k
        if getattr(builtins, hint, None) is obj:
            return hint
        name = self.names.create_name(hint or "_obj", obj)
        self.globals[name] = obj
        return name

    def function_name(self, fn) -> str:
        """How generated code spells function `fn` (`fusegrad.relu`, `len`, a global)."""
        import fusegrad

        path = getattr(fn, "_fx_path", None)  # registry ops: `fusegrad.ops.aten.mul.Tensor`
        if path is not None:
            return path
        name = getattr(fn, "__name__", None)
        if name and getattr(fusegrad, name, None) is fn:
            return f"fusegrad.{name}"
        if name and getattr(operator, name, None) is fn:
            return self.add_global(f"_operator_{name}", fn)
        if name and getattr(builtins, name, None) is fn:
            return name
        module = getattr(fn, "__module__", None) or ""
        if module.startswith("fusegrad.") and name:
            import sys

            mod = sys.modules.get(module)
            if mod is not None and getattr(mod, name, None) is fn:
                return f"{module}.{name}"
        if module and name and not module.startswith("fusegrad"):
            return self.add_global(f"{module.split('.')[-1]}_{name}", fn)
        return self.add_global(name or "_fn", fn)

    def repr_arg(self, a: Any) -> str:
        """`a` as a Python expression (nodes by name, literals by repr, others as globals)."""
        import fusegrad

        if isinstance(a, Node):
            return self.local.get(a.name, a.name)
        if isinstance(a, float) and (math.isinf(a) or math.isnan(a)):
            return repr(a)  # inf, -inf, nan: bound in globals
        if isinstance(a, _LITERALS):
            return repr(a)
        if isinstance(a, tuple):
            if hasattr(a, "_fields"):
                cls = self.add_global(type(a).__name__, type(a))
                return f"{cls}({', '.join(self.repr_arg(x) for x in a)})"
            inner = ", ".join(self.repr_arg(x) for x in a)
            return f"({inner},)" if len(a) == 1 else f"({inner})"
        if isinstance(a, list):
            return "[" + ", ".join(self.repr_arg(x) for x in a) + "]"
        if isinstance(a, dict):
            return "{" + ", ".join(f"{self.repr_arg(k)}: {self.repr_arg(v)}"
                                   for k, v in a.items()) + "}"
        if isinstance(a, slice):
            return (f"slice({self.repr_arg(a.start)}, {self.repr_arg(a.stop)}, "
                    f"{self.repr_arg(a.step)})")
        if isinstance(a, fusegrad.dtype):
            name = str(a).split(".")[-1]
            if getattr(fusegrad, name, None) is a:
                return f"fusegrad.{name}"
        if isinstance(a, fusegrad.layout) and getattr(fusegrad, str(a)[6:], None) is a:
            return f"fusegrad.{str(a)[6:]}"  # (`torch.strided` prints as its path)
        if isinstance(a, fusegrad.device):  # (its repr, `device(type='cpu')`, as torch.fx's)
            return self.add_global("device", fusegrad.device) + repr(a)[len("device"):]
        name = getattr(a, "name", None)  # named constants: fusegrad.contiguous_format
        if isinstance(name, str) and name.isidentifier() and getattr(fusegrad, name, None) is a:
            return f"fusegrad.{name}"
        return self.add_global(type(a).__name__, a)

    def annotation(self, kind: Any) -> str | None:
        """How generated code spells type `kind` in a signature, as torch.fx does
        (`x : fusegrad.Tensor`, `-> typing_Tuple[int,int]`, a class by its dotted path made
        one name, a string annotation as a global holding it); None where it has no safe
        spelling, which is then left out."""
        if isinstance(kind, type):
            if kind.__module__ == "builtins":
                if getattr(builtins, kind.__name__, None) is kind:
                    return kind.__name__
                return self._named_global(kind.__name__, kind)  # NoneType
            import fusegrad

            if kind.__module__.startswith("fusegrad") and \
                    getattr(fusegrad, kind.__name__, None) is kind:
                return f"fusegrad.{kind.__name__}"
            return self._named_global(_ILLEGAL.sub("_", f"{kind.__module__}.{kind.__qualname__}"),
                                      kind)
        if isinstance(kind, str):  # a string annotation: bound to a global as it is
            return self._named_global(_ILLEGAL.sub("_", repr(kind)), kind)
        if kind is ...:  # (`tuple[int, ...]`)
            return self._named_global("_", kind)
        if isinstance(kind, (types.GenericAlias, types.UnionType)):  # list[int], int | None
            inner = [self.annotation(a) for a in kind.__args__]
            if any(i is None for i in inner):
                return None
            if isinstance(kind, types.UnionType):
                return "|".join(inner)
            base = self.annotation(kind.__origin__)
            return None if base is None else f"{base}[{','.join(inner)}]"
        origin = getattr(kind, "__origin__", None)
        name = getattr(origin, "_name", None) or getattr(kind, "_name", None)
        args = getattr(kind, "__args__", None)
        if getattr(kind, "__module__", None) == "typing" and name and args is not None and \
                hasattr(typing, name):
            inner = [self.annotation(a) for a in args]
            if any(i is None for i in inner):
                return None
            return f"{self._named_global(f'typing_{name}', getattr(typing, name))}" \
                   f"[{','.join(inner)}]"
        return None

    def _named_global(self, name: str, obj: Any) -> str:
        """A global named `name` exactly (torch.fx's spelling; add_global would snake_case
        it) bound to `obj`, or another name when `name` is taken."""
        if self.globals.setdefault(name, obj) is not obj:
            return self.add_global(name, obj)
        self.names._used.add(name)
        return name

    def call_args(self, args, kwargs) -> str:
        """`a, b, key = c` for a call."""
        parts = [self.repr_arg(a) for a in args]
        parts += [f"{k} = {self.repr_arg(v)}" for k, v in kwargs.items()]
        return ", ".join(parts)


def _expression(em: _Emitter, node: Node) -> str:
    op, target = node.op, node.target
    if op == "get_attr":
        return _attr_path("self", target)
    if op == "call_module":
        return f"{_attr_path('self', target)}({em.call_args(node.args, node.kwargs)})"
    if op == "call_method":
        obj = em.repr_arg(node.args[0])
        return f"{obj}.{target}({em.call_args(node.args[1:], node.kwargs)})"
    # call_function
    name = getattr(target, "__name__", "")
    if (getattr(operator, name, None) is target and name in MAGIC_FORMATS and not node.kwargs
            and MAGIC_FORMATS[name].count("{}") == len(node.args)):
        parts = [em.repr_arg(a) for a in node.args]
        if name == "pow" and parts[0].startswith("-"):
            # `-4 ** x` is `-(4 ** x)` in Python: a negative base keeps its brackets.
            parts[0] = f"({parts[0]})"
        return MAGIC_FORMATS[name].format(*parts)
    if (target is builtins.getattr and len(node.args) == 2 and not node.kwargs
            and isinstance(node.args[1], str) and node.args[1].isidentifier()):
        return f"{em.repr_arg(node.args[0])}.{node.args[1]}"
    return f"{em.function_name(target)}({em.call_args(node.args, node.kwargs)})"


# How print_readable abbreviates dtypes in its value annotations (`x: "f32[2, 3]"`).
_DTYPE_ABBRS = {
    "float64": "f64", "float32": "f32", "float16": "f16", "bfloat16": "bf16",
    "float8_e4m3fn": "f8e4m3fn", "float8_e5m2": "f8e5m2", "complex32": "c32",
    "complex64": "c64", "complex128": "c128", "int8": "i8", "int16": "i16", "int32": "i32",
    "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "bool": "b8",
}


def _sizes_text(sizes: Any) -> str:
    """`[2, s77]`: symbolic sizes as their expressions (reading their value would
    specialise them)."""
    return "[" + ", ".join(s.expr if _is_sym(s) else str(s) for s in sizes) + "]"


def _is_sym(value: Any) -> bool:
    from .._symbolic import SymInt

    return isinstance(value, SymInt)


def _dtype_text(dtype: Any) -> str:
    name = str(dtype).rsplit(".", 1)[-1]
    return _DTYPE_ABBRS.get(name, name)


def value_annotation(node: Node, include_stride: bool = False,
                     include_device: bool = False) -> str | None:
    """The annotation print_readable gives `node` from the value its metadata records, as
    torch.fx does: `meta['val']` first, else `meta['tensor_meta']`, else
    `meta['example_value']`; a tensor as `f32[2, 3]` (its strides and device appended when
    asked), a TensorMetadata as `f32[2, 3]`, a symbolic size as `Sym(s77 + 1)`; None for
    anything else (tuples, Python numbers)."""
    from .._tensor import Tensor

    meta = node.meta
    value = meta.get("val", meta.get("tensor_meta", meta.get("example_value")))
    if isinstance(value, Tensor):
        text = _dtype_text(value.dtype) + _sizes_text(value.shape)
        if include_stride:
            text += _sizes_text(value.stride())
        if include_device:
            text += str(value.device)
        return text
    if _is_sym(value):
        return f"Sym({value.expr})"
    fields = getattr(value, "_fields", ())
    if isinstance(value, tuple) and "shape" in fields and "dtype" in fields:
        return _dtype_text(value.dtype) + _sizes_text(value.shape)  # a TensorMetadata
    return None


_FRAME = re.compile(r"^File \"(.+)\", line (\d+), in (.+)$")
_NO_TRACE = "No stacktrace found for following nodes"


def stack_trace_summary(stack_trace: str | None) -> str:
    """A node's stack trace as `print_readable` comments it, as torch.fx does: the innermost
    frame followed by a line of code (`File: a.py:3 in f, code: y = x + 1`), or that there
    is none."""
    if not stack_trace:
        return _NO_TRACE
    lines = stack_trace.strip().split("\n")
    for i in range(len(lines) - 2, -1, -1):
        found = _FRAME.match(lines[i].strip())
        if found:
            path, line, name = found.groups()
            return f"File: {path}:{line} in {name}, code: {lines[i + 1].strip()}"
    return _NO_TRACE


def python_code(graph, root_module: str = "self", verbose: bool = False,
                include_stride: bool = False, include_device: bool = False) -> PythonCode:
    """Source of `def forward(self, ...)` for `graph`, with its globals. `verbose` (what
    `print_readable` shows) puts a comment on each run of nodes from one stack trace and
    annotates each value its metadata records (`value_annotation`, with its strides and
    device when `include_stride`/`include_device`)."""
    em = _Emitter()
    for node in graph.nodes:
        em.names._used.add(node.name)
    for node in graph.nodes:
        if node.name in _BUILTIN_NAMES:
            em.local[node.name] = em.names.create_name(f"{node.name}_1")
    # For each node, the values whose last use it is (released right after it runs).
    last_use: dict[Node, Node] = {}
    to_release: dict[Node, list[Node]] = {}
    for node in reversed(list(graph.nodes)):
        for inp in node._input_nodes:
            if inp not in last_use:
                last_use[inp] = node
                to_release.setdefault(node, []).append(inp)
    params: list[str] = []
    body: list[str] = []
    returns = None  # the output's type, as the signature's annotation
    summary = None  # the stack-trace comment of the nodes emitted last (verbose)
    pytree_info = getattr(graph, "_pytree_info", None)
    if pytree_info is not None:
        # inputs given as structures (concrete_args with PH leaves): forward takes the
        # original arguments and flattens them into the placeholders, as torch.fx's does
        em.globals["fx_pytree"] = em.globals["pytree"] = _PyTree
        leaves = [n.name for n in graph.nodes if n.op == "placeholder"]
        body.append(f"{', '.join(leaves)}, = fx_pytree.tree_flatten_spec("
                    f"[{', '.join(pytree_info[0])}], self._in_spec)")
    for node in graph.nodes:
        if node.op == "placeholder" and pytree_info is not None:
            continue
        if node.op == "placeholder":
            t = node.target
            if t.startswith("*"):
                params.append(t)
                if node.name != t.lstrip("*"):
                    body.append(f"{node.name} = {t.lstrip('*')}")
                continue
            default = f" = {em.repr_arg(node.args[0])}" if node.args else ""
            value = value_annotation(node, include_stride, include_device) \
                if verbose else None
            kind = em.annotation(node.type) if node.type is not None else None
            if value is not None:  # (what the value is says more than its declared type)
                params.append(f'{t}: "{value}"{default}')
            else:
                params.append(f"{t}{'' if kind is None else f' : {kind}'}{default}")
            if em.var(node) != t:
                body.append(f"{em.var(node)} = {t}")
            continue
        if node.op == "output":
            if pytree_info is not None:
                body.append(f"return pytree.tree_unflatten([{em.repr_arg(node.args[0])}], "
                            "self._out_spec)")
                continue
            body.append(f"return {em.repr_arg(node.args[0])}")
            if node.type is not None:
                returns = em.annotation(node.type)
            continue
        if verbose:
            text = stack_trace_summary(node.stack_trace)
            if text != summary:
                # a blank line sets each run apart from the statements before it
                body.extend(["", f"# {text}"] if body else [f"# {text}"])
                summary = text
        value = value_annotation(node, include_stride, include_device) if verbose else None
        typed = em.var(node) if value is None else f'{em.var(node)}: "{value}"'
        line = f"{typed} = {_expression(em, node)}"
        released = [em.var(n) for n in to_release.get(node, [])]
        if not node.users:
            released.append(em.var(node))
        if released:
            line += ";  " + " = ".join(released) + " = None"
        body.append(line)
    if not body:
        body.append("pass")
    if pytree_info is not None:
        params = list(pytree_info[0])
    signature = ", ".join([root_module] + params)
    arrow = "" if returns is None else f" -> {returns}"
    src = f"\n\n\ndef forward({signature}){arrow}:\n" + "".join(
        f"    {b}\n" if b else "\n" for b in body) + "    "
    return PythonCode(src, em.globals)


class _PyTree:
    """The helpers generated code with structured inputs calls (`fx_pytree`, `pytree`)."""

    @staticmethod
    def tree_flatten_spec(args: list, spec: Any) -> list:
        """The leaves of `args`, in the order and structure of `spec` (dict keys by spec)."""
        out: list = []

        def walk(value: Any, sp: Any) -> None:
            if isinstance(sp, dict):
                for k, v in sp.items():
                    walk(value[k], v)
            elif isinstance(sp, (list, tuple)):
                for i, v in enumerate(sp):
                    walk(value[i], v)
            else:
                out.append(value)

        walk(tuple(args), tuple(spec))
        return out

    @staticmethod
    def tree_unflatten(leaves: list, spec: Any) -> Any:
        """The single result (outputs keep their structure in the graph)."""
        return leaves[0]


def signature_default(value: Any) -> tuple:
    """The placeholder `args` for a parameter default (empty when there is none)."""
    return () if value is inspect.Parameter.empty else (value,)
