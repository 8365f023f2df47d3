"""`Node`: one operation of a `Graph`, and the helpers that walk node arguments.

A node has an opcode (`op`), a `target` (what it calls or reads), `args`/`kwargs` that may
contain other nodes, and `users`: the nodes that read its value, in insertion order. Setting
`args` or `kwargs` keeps the use lists of every referenced node up to date.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from .immutable_collections import immutable_dict, immutable_list

OPCODES = ("placeholder", "get_attr", "call_function", "call_method", "call_module", "output")

# How a Python operator prints in a node's format and in generated code.
MAGIC_FORMATS = {
    "add": "{} + {}", "sub": "{} - {}", "mul": "{} * {}", "truediv": "{} / {}",
    "floordiv": "{} // {}", "mod": "{} % {}", "pow": "{} ** {}", "matmul": "{} @ {}",
    "lshift": "{} << {}", "rshift": "{} >> {}", "and_": "{} & {}", "or_": "{} | {}",
    "xor": "{} ^ {}", "eq": "{} == {}", "ne": "{} != {}", "lt": "{} < {}", "le": "{} <= {}",
    "gt": "{} > {}", "ge": "{} >= {}", "neg": "-{}", "pos": "+{}", "invert": "~{}",
    "getitem": "{}[{}]",
}


def _is_namedtuple(a) -> bool:
    return isinstance(a, tuple) and hasattr(a, "_fields")


def map_aggregate(a: Any, fn: Callable[[Any], Any]) -> Any:
    """Apply `fn` to every leaf of `a` (through tuples, lists, dicts and slices)."""
    if isinstance(a, tuple):
        items = [map_aggregate(x, fn) for x in a]
        return type(a)(*items) if _is_namedtuple(a) else tuple(items)
    if isinstance(a, list):
        return [map_aggregate(x, fn) for x in a]
    if isinstance(a, dict):
        return {k: map_aggregate(v, fn) for k, v in a.items()}
    if isinstance(a, slice):
        return slice(map_aggregate(a.start, fn), map_aggregate(a.stop, fn),
                     map_aggregate(a.step, fn))
    return fn(a)


def _freeze(a: Any) -> Any:
    # `a` with every list and dict inside it made an immutable_list or immutable_dict.
    if isinstance(a, tuple):
        items = [_freeze(x) for x in a]
        return type(a)(*items) if _is_namedtuple(a) else tuple(items)
    if isinstance(a, list):
        return immutable_list(_freeze(x) for x in a)
    if isinstance(a, dict):
        return immutable_dict((k, _freeze(v)) for k, v in a.items())
    if isinstance(a, slice):
        return slice(_freeze(a.start), _freeze(a.stop), _freeze(a.step))
    return a


def map_arg(a: Any, fn: Callable[[Node], Any]) -> Any:
    """Apply `fn` to every Node inside `a`, leaving other values unchanged."""
    return map_aggregate(a, lambda x: fn(x) if isinstance(x, Node) else x)


def _collect_nodes(args, kwargs) -> dict:
    found: dict = {}

    def note(n):
        found.setdefault(n, None)
        return n

    map_arg(args, note)
    map_arg(kwargs, note)
    return found


def target_str(target) -> str:
    """A readable spelling of a node target (`operator.add`, `fusegrad.relu`, `linear`)."""
    if isinstance(target, str):
        return target
    module = getattr(target, "__module__", None)
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", repr(target))
    if module == "_operator":
        module = "operator"
    if module is None:
        return name
    if module.startswith("fusegrad"):
        import fusegrad

        if getattr(fusegrad, getattr(target, "__name__", ""), None) is target:
            return f"fusegrad.{target.__name__}"
    return f"{module}.{name}"


def _format_arg(a) -> str:
    if isinstance(a, Node):
        return "%" + a.name
    if isinstance(a, tuple):
        inner = ", ".join(_format_arg(x) for x in a)
        return f"({inner}{',' if len(a) == 1 else ''})"
    if isinstance(a, list):
        return "[" + ", ".join(_format_arg(x) for x in a) + "]"
    if isinstance(a, dict):
        return "{" + ", ".join(f"{k}: {_format_arg(v)}" for k, v in a.items()) + "}"
    return str(a)


def _typename(obj: Any) -> str:
    """`obj`'s type as torch.typename spells it in these messages (`str`, `module.Class`)."""
    module = getattr(obj, "__module__", "") or ""
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or \
        type(obj).__qualname__
    return qualname if module in ("", "builtins") else f"{module}.{qualname}"


class Node:
    """One operation in a Graph: `op`, `name`, `target`, `args`, `kwargs`, `users`, `meta`."""

    def __init__(self, graph, name: str, op: str, target: Any, args: tuple, kwargs: dict,
                 return_type: Any = None) -> None:
        if op not in OPCODES and op != "root":
            raise ValueError(f"unknown opcode {op!r}; expected one of {OPCODES}")
        if op == "call_function" and not callable(target):
            raise ValueError(f"Node [graph = {graph}, name = '{name}'] target {target} has "
                             f"type {_typename(target)} but a Callable is expected")
        if op in ("call_method", "call_module", "get_attr", "placeholder") \
                and not isinstance(target, str):
            raise ValueError(f"Node [graph = {graph}, name = '{name}'] target {target} has "
                             f"type {_typename(target)} but a str is expected")
        self.graph = graph
        self.name = name
        self.op = op
        self.target = target
        self.type = return_type
        self.meta: dict = {}
        self.users: dict[Node, None] = {}
        self._input_nodes: dict[Node, None] = {}
        self._args: tuple = ()
        self._kwargs: dict = immutable_dict()
        self._prev: Node = self
        self._next: Node = self
        self._erased = False
        self._update_args_kwargs(args, kwargs)

    # ------------------------------------------------------------------ arguments

    @property
    def args(self) -> tuple:
        """Positional arguments (may contain Nodes)."""
        return self._args

    @args.setter
    def args(self, a: tuple) -> None:
        self._update_args_kwargs(a, self._kwargs)

    @property
    def kwargs(self) -> dict:
        """Keyword arguments (may contain Nodes)."""
        return self._kwargs

    @kwargs.setter
    def kwargs(self, k: dict) -> None:
        self._update_args_kwargs(self._args, k)

    def _update_args_kwargs(self, args, kwargs) -> None:
        for old in self._input_nodes:
            old.users.pop(self, None)
        # Lists and dicts are kept immutable (as torch.fx keeps them): changing one in place
        # would leave the use lists stale.
        self._args = tuple(_freeze(args)) if args is not None else ()
        self._kwargs = _freeze(dict(kwargs)) if kwargs else immutable_dict()
        self._input_nodes = _collect_nodes(self._args, self._kwargs)
        for n in self._input_nodes:
            n.users.setdefault(self, None)

    @property
    def all_input_nodes(self) -> list[Node]:
        """The distinct nodes this node reads, in order of appearance."""
        return list(self._input_nodes)

    def update_arg(self, idx: int, arg: Any) -> None:
        """Replace positional argument `idx`."""
        args = list(self._args)
        args[idx] = arg
        self.args = tuple(args)

    def update_kwarg(self, key: str, arg: Any) -> None:
        """Set keyword argument `key`."""
        self.kwargs = {**self._kwargs, key: arg}

    def insert_arg(self, idx: int, arg: Any) -> None:
        """Insert a positional argument at `idx`."""
        args = list(self._args)
        args.insert(idx, arg)
        self.args = tuple(args)

    # ------------------------------------------------------------------ position

    @property
    def next(self) -> Node:
        """The following node (the graph's root sentinel after the last one)."""
        return self._next

    @property
    def prev(self) -> Node:
        """The preceding node (the graph's root sentinel before the first one)."""
        return self._prev

    def _remove_from_list(self) -> None:
        # The node keeps its own links, so an iteration standing on it can still move on.
        p, n = self._prev, self._next
        p._next, n._prev = n, p

    def prepend(self, x: Node) -> None:
        """Move node `x` to just before this node."""
        if x is self:
            return
        x._remove_from_list()
        p = self._prev
        p._next, x._prev = x, p
        x._next, self._prev = self, x

    def append(self, x: Node) -> None:
        """Move node `x` to just after this node."""
        self._next.prepend(x)

    # ------------------------------------------------------------------ rewriting

    def replace_all_uses_with(self, replace_with: Node,
                              delete_user_cb: Callable[[Node], bool] = lambda user: True,
                              *, propagate_meta: bool = False) -> list[Node]:
        """Make every user read `replace_with` instead of this node; returns those users."""
        if propagate_meta:
            for k, v in self.meta.items():
                replace_with.meta.setdefault(k, v)
        changed = []
        for user in list(self.users):
            if not delete_user_cb(user):
                continue
            user.replace_input_with(self, replace_with)
            changed.append(user)
        return changed

    def replace_input_with(self, old_input: Node, new_input: Node) -> None:
        """Replace every occurrence of `old_input` in this node's arguments."""
        swap = lambda n: new_input if n is old_input else n  # noqa: E731
        self._update_args_kwargs(map_arg(self._args, swap), map_arg(self._kwargs, swap))

    def is_impure(self, impure_random: bool = True) -> bool:
        """Whether dead-code elimination must keep this node although nobody reads it.

        As in torch.fx: inputs and the output; calls `is_impure_call` says stay (marked
        side-effectful functions, the random samplers, registry ops that write an input
        and, with `impure_random`, those that draw random numbers); modules flagged
        `_is_impure`. Unused in-place method calls are removed, as torch.fx removes them."""
        if self.op in ("placeholder", "output"):
            return True
        if self.op == "call_function":
            return is_impure_call(self.target, impure_random)
        if self.op == "call_module":
            owner = self.graph.owning_module
            if owner is not None:
                try:
                    mod = owner.get_submodule(self.target)
                except (AttributeError, KeyError):
                    return False
                return bool(getattr(mod, "_is_impure", False))
        return False

    @property
    def stack_trace(self) -> str | None:
        """Where the node was recorded, when known."""
        return self.meta.get("stack_trace")

    # ------------------------------------------------------------------ printing

    def format_node(self) -> str | None:
        """One line describing this node, as `print(graph)` shows it."""
        kind = "" if self.type is None else f"{type_repr(self.type)} "
        head = f"%{self.name} : {kind}[num_users={len(self.users)}] = "
        if self.op == "placeholder":
            default = f"(default={self.args[0]})" if self.args else ""
            return f"{head}placeholder[target={self.target}]{default}"
        if self.op == "get_attr":
            return f"{head}get_attr[target={self.target}]"
        if self.op == "output":
            return f"return {self.args[0]}"
        return (f"{head}{self.op}[target={target_str(self.target)}]"
                f"(args = {_format_arg(self.args)}, kwargs = {_format_arg(self.kwargs)})")

    def __repr__(self) -> str:
        return self.name

def type_repr(kind: Any) -> str:
    """A node's type as `print(graph)` shows it: a class by its module path (builtins by
    name), anything else (a typing form, a string annotation) by its repr."""
    if isinstance(kind, type):
        if kind.__module__ == "builtins":
            return kind.__qualname__
        return f"{kind.__module__}.{kind.__qualname__}"
    if kind is ...:
        return "..."
    return repr(kind)


# Functions whose calls dead-code elimination keeps (they exist for their side effect):
# the one mark every graph pass reads, set by `has_side_effect`. A class in it marks its
# instances (callable objects used as node targets).
IMPURE_FUNCTIONS: set = {operator.setitem}
_FLAGGED: list = []


def _flagged_functions() -> frozenset:
    """The public functions dead-code elimination keeps besides `IMPURE_FUNCTIONS`, read
    from the registry's flags: those flagged `side_effect` (`set_grad_enabled`), `_assert`,
    and the random samplers (the surface's random names, less the layers' ATen spellings
    such as `dropout` and the in-place and private forms, which torch.fx lets go).
    Found on first use: fusegrad's functions are defined after this module can be imported."""
    if not _FLAGGED:
        import fusegrad

        from ..ops import surface

        layers = surface.names_with(surface.NN_SPELLING)
        names = {n for n in surface.names_with(surface.RANDOM)
                 if n not in layers and not n.startswith("_") and not n.endswith("_")}
        names |= set(surface.names_with(surface.SIDE_EFFECT)) | {"_assert"}
        _FLAGGED.append(frozenset(getattr(fusegrad, n) for n in names if hasattr(fusegrad, n)))
    return _FLAGGED[0]


def has_side_effect(fn: Callable) -> Callable:
    """Mark `fn` as side-effectful: dead-code elimination keeps its calls (a class: the calls
    of its instances). Usable as a decorator."""
    IMPURE_FUNCTIONS.add(fn)
    return fn


def is_impure_call(target: Any, impure_random: bool = True) -> bool:
    """Whether a call of `target` stays in a graph although nothing reads its result: the one
    test fx's `Node.is_impure`, capture's and AOT's dead-code eliminations, vmap and the
    partitioners share. True for a function marked with `has_side_effect` (or an instance of
    a marked class), a public function the registry flags side-effectful or random
    (`_flagged_functions`), and a registry op's handle (`ops.aten.add_.Tensor`) that writes
    an input or, with `impure_random`, draws random numbers (a random factory's handle too)."""
    try:
        if target in IMPURE_FUNCTIONS or target in _flagged_functions():
            return True
    except TypeError:  # an unhashable target is no marked function
        pass
    if type(target) in IMPURE_FUNCTIONS:
        return True
    op = getattr(target, "op", None)
    if op is not None and hasattr(op, "inplace"):
        return bool(op.inplace) or (impure_random and bool(getattr(op, "random", 0)))
    # (a random factory's handle, `ops.aten.randn.default`: `ops.call_handles`)
    return impure_random and getattr(target, "draws", None) is True
