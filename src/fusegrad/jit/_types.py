"""Script types: reading annotations as TorchScript does, result types of operations, and
joining the types two branches give one variable."""

from __future__ import annotations

import ast

from ..ops.surface import SCRIPT_RESULTS
from ._ir import parse_generic

_NAMES = {"int": "int", "float": "float", "bool": "bool", "str": "str", "Tensor": "Tensor",
          "None": "NoneType", "NoneType": "NoneType", "Any": "Any", "number": "float"}
_GENERICS = {"List": "List", "list": "List", "Optional": "Optional", "Tuple": "Tuple",
             "tuple": "Tuple", "Final": "Final", "Dict": "Dict", "dict": "Dict"}


def annotation_type(node: ast.AST | None) -> str | None:
    """The type an annotation's AST names, None when it names none we know. `Tensor` and
    `torch.Tensor` are the tensor type; `List[int]`, `Optional[Tensor]`, `Tuple[...]`,
    lower-case `list[...]`/`tuple[...]` and string annotations are read too."""
    if node is None:
        return None
    if isinstance(node, ast.Constant):
        if node.value is None:
            return "NoneType"
        if isinstance(node.value, str):
            try:
                return annotation_type(ast.parse(node.value, mode="eval").body)
            except SyntaxError:
                return None
        return None
    if isinstance(node, ast.Name):
        return _NAMES.get(node.id)
    if isinstance(node, ast.Attribute):
        return _NAMES.get(node.attr)
    if isinstance(node, ast.Subscript):
        head = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(
            node.value, "id", None)
        head = _GENERICS.get(head)
        if head is None:
            return None
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        args = [annotation_type(e) for e in elts]
        if any(a is None for a in args):
            return None
        if head == "Final":
            return args[0]
        if head == "Dict" and len(args) != 2:
            return None
        return f"{head}[{', '.join(args)}]"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # `Tensor | None`
        left, right = annotation_type(node.left), annotation_type(node.right)
        if left and right == "NoneType":
            return f"Optional[{left}]"
        if right and left == "NoneType":
            return f"Optional[{right}]"
    return None


def value_type(value) -> str:
    """The script type of a Python value (an argument or a module attribute)."""
    from .._tensor import Tensor

    if isinstance(value, Tensor):
        return "Tensor"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if value is None:
        return "NoneType"
    if isinstance(value, (list, tuple)):
        inner = [value_type(v) for v in value]
        if isinstance(value, tuple):
            return f"Tuple[{', '.join(inner)}]"
        return f"List[{inner[0] if inner and len(set(inner)) == 1 else 'Any'}]" if inner \
            else "List[Tensor]"
    return "Any"


_NO = object()


def convert(declared: str, value):
    """`value` as an argument of type `declared`, converted as TorchScript's argument
    parsing converts (an int or a one-element tensor for a float, a tuple for a list), or
    `NO` when it does not fit."""
    from .._tensor import Tensor

    head, args = parse_generic(declared)
    if declared == "Tensor":
        return value if isinstance(value, Tensor) else _NO
    if declared in ("int", "float", "bool"):
        if isinstance(value, Tensor):
            if value.numel() != 1:
                return _NO
            value = value.item()
        kind = {"int": (int,), "float": (int, float), "bool": (bool,)}[declared]
        if not isinstance(value, kind):
            return _NO
        return float(value) if declared == "float" else value
    if declared == "str":
        return value if isinstance(value, str) else _NO
    if declared == "NoneType":
        return value if value is None else _NO
    if head == "Optional":
        return None if value is None else convert(args[0], value)
    if head == "List":
        if not isinstance(value, (list, tuple)):
            return _NO
        items = [convert(args[0], v) for v in value]
        return _NO if any(v is _NO for v in items) else items
    if head == "Dict":
        if not isinstance(value, dict) or len(args) != 2:
            return _NO
        items = {convert(args[0], k): convert(args[1], v) for k, v in value.items()}
        return _NO if any(k is _NO or v is _NO for k, v in items.items()) else items
    if head == "Tuple":
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            return _NO
        items = [convert(a, v) for a, v in zip(args, value)]
        return _NO if any(v is _NO for v in items) else tuple(items)
    return value


NO = _NO


def join(a: str, b: str) -> str | None:
    """The one type for a variable that is `a` on one path and `b` on another, or None."""
    if a == b:
        return a
    if "Any" in (a, b):
        return a if b == "Any" else b
    if a == "NoneType":
        return b if b.startswith("Optional[") else f"Optional[{b}]"
    if b == "NoneType":
        return a if a.startswith("Optional[") else f"Optional[{a}]"
    if a == f"Optional[{b}]":
        return a
    if b == f"Optional[{a}]":
        return b
    return None


def element_type(container: str, index=None) -> str:
    """The type of `container[index]`."""
    head, args = parse_generic(container)
    if container == "Tensor":
        return "Tensor"
    if head == "List" and args:
        return args[0]
    if head == "Dict" and len(args) == 2:
        return args[1]
    if head == "Tuple" and args and isinstance(index, int) and -len(args) <= index < len(args):
        return args[index]
    return "Any"


# TorchScript's comparison operators, on numbers (a bool) and on tensors (a Tensor).
_COMPARE = {"lt", "gt", "le", "ge", "eq", "ne"}
# TorchScript's own builtins (the public names' result types are the surface's).
_BUILTINS = {"__is__": "bool", "__isnot__": "bool", "__not__": "bool", "__contains__": "bool",
             "Bool": "bool", "Int": "int", "len": "int", "__range_length": "int",
             "__derive_index": "int"}


# The result types of str methods that do not return a str (those starting "is" are bool).
_STR_METHODS = {"startswith": "bool", "endswith": "bool", "find": "int", "rfind": "int",
                "index": "int", "rindex": "int", "count": "int", "split": "List[str]",
                "rsplit": "List[str]", "splitlines": "List[str]"}


def result_type(name: str, form: str, types: list[str], nargs: int) -> str:
    """The type of an operation's result from its name and its inputs' types."""
    tensor = "Tensor" in types
    if name in _COMPARE:
        return "Tensor" if tensor else "bool"
    given = _BUILTINS.get(name) or SCRIPT_RESULTS.get(name)
    if given in ("bool", "int"):
        return given
    if name == "Float" or (name == "item" and form == "method"):
        return "float"
    if name == "size":
        return "int" if nargs > 1 else "List[int]"
    if name == "append" or (name == "sorted" and types):
        return types[0]
    if name == "str" and form == "operator":
        return "str"
    if form == "method" and types and types[0].startswith("Dict["):
        _, (key, value) = parse_generic(types[0])
        return {"items": f"List[Tuple[{key}, {value}]]", "keys": f"List[{key}]",
                "values": f"List[{value}]", "get": f"Optional[{value}]",
                "pop": value}.get(name, "NoneType")
    if form == "method" and types and types[0] == "str":
        return _STR_METHODS.get(name, "bool" if name.startswith("is") else "str")
    if form == "method" and types and types[0].startswith("List["):
        return element_type(types[0]) if name == "pop" else "int" if name in (
            "index", "count") else "NoneType"
    if given == "List[Tensor]":
        return given
    if given is not None and given.startswith("Tuple") and (
            nargs > 1 or not given.endswith("with a dim")):
        return "Tuple[Tensor, Tensor]"
    if form == "operator":
        if tensor:
            return "Tensor"
        if name == "div":
            return "float"
        if name in ("abs", "min", "max", "neg"):
            return types[0] if types else "Any"
        if "float" in types:
            return "float"
        if all(t in ("int", "bool") for t in types):
            return "int"
        return "Any"
    return "Tensor"


def python_type(tp) -> str | None:
    """The script type a Python type object names (`int`, `List[str]`, `Optional[Tensor]`,
    a typing generic or a string), None when it names none we know."""
    import typing

    if isinstance(tp, typing.ForwardRef):  # (a string annotation a NamedTuple kept)
        tp = tp.__forward_arg__
    if isinstance(tp, str):
        try:
            return annotation_type(ast.parse(tp, mode="eval").body)
        except SyntaxError:
            return None
    if tp is None or tp is type(None):
        return "NoneType"
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is None:
        name = getattr(tp, "__name__", None)
        return _NAMES.get(name) if name else None
    inner = [python_type(a) for a in args]
    if any(a is None for a in inner):
        return None
    if origin is typing.Union or getattr(origin, "__name__", "") == "UnionType":
        rest = [a for a in inner if a != "NoneType"]
        return f"Optional[{rest[0]}]" if len(rest) == 1 and len(inner) == 2 else None
    head = {list: "List", dict: "Dict", tuple: "Tuple"}.get(origin)
    if head is None or (head == "Dict" and len(inner) != 2):
        return None
    return f"{head}[{', '.join(inner)}]"
