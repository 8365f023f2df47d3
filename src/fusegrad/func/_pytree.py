"""Nested Python containers of tensors ("pytrees"), flattened and rebuilt.

The transforms of `fusegrad.func` take and return tuples, lists, dicts (plain and ordered)
and named tuples nested in any way; everything else (tensors, numbers, None) is a leaf. A
`TreeSpec` records the containers, and prints as PyTorch's `torch.utils._pytree` prints its
own, since the transforms' error messages show them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any


class TreeSpec:
    """The shape of a pytree: a container kind, its keys (or named tuple class) and the
    specs of its children; a leaf is `TreeSpec(None, None, [])`."""

    __slots__ = ("kind", "context", "children", "num_leaves")

    def __init__(self, kind: str | None, context: Any, children: list) -> None:
        self.kind = kind
        self.context = context
        self.children = children
        self.num_leaves = 1 if kind is None else sum(c.num_leaves for c in children)

    def is_leaf(self) -> bool:
        """Whether this spec stands for one leaf."""
        return self.kind is None

    def __eq__(self, other) -> bool:
        return (isinstance(other, TreeSpec) and self.kind == other.kind and
                self.context == other.context and self.children == other.children)

    def __hash__(self) -> int:
        return hash((self.kind, len(self.children)))

    def _repr(self, depth: int) -> str:
        if self.kind is None:
            return "*"
        sep = ",\n" + "  " * (depth + 1)
        inner = sep.join(c._repr(depth + 1) for c in self.children)
        return f"TreeSpec({self.kind}, {self.context!r}, [{inner}])"

    def __repr__(self) -> str:
        return self._repr(0)

    def pprint(self) -> str:
        """The structure written as Python with `*` for each leaf (`(*, [*, *])`)."""
        if self.kind is None:
            return "*"
        parts = [c.pprint() for c in self.children]
        if self.kind == "tuple":
            return f"({parts[0]},)" if len(parts) == 1 else f"({', '.join(parts)})"
        if self.kind == "list":
            return f"[{', '.join(parts)}]"
        if self.kind == "namedtuple":
            fields = self.context._fields
            body = ", ".join(f"{f}={p}" for f, p in zip(fields, parts))
            return f"{self.context.__name__}({body})"
        items = [f"{k!r}: {p}" for k, p in zip(self.context, parts)]
        if self.kind == "OrderedDict":
            return "OrderedDict([" + ", ".join(
                f"({k!r}, {p})" for k, p in zip(self.context, parts)) + "])"
        return "{" + ", ".join(items) + "}"


LEAF = TreeSpec(None, None, [])


def _is_namedtuple(obj) -> bool:
    return isinstance(obj, tuple) and hasattr(type(obj), "_fields")


def tree_flatten(tree) -> tuple[list, TreeSpec]:
    """(leaves in order, spec) of `tree`."""
    leaves: list = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree, leaves: list) -> TreeSpec:
    if _is_namedtuple(tree):
        return TreeSpec("namedtuple", type(tree), [_flatten(v, leaves) for v in tree])
    if type(tree) is tuple:
        return TreeSpec("tuple", None, [_flatten(v, leaves) for v in tree])
    if type(tree) is list:
        return TreeSpec("list", None, [_flatten(v, leaves) for v in tree])
    if type(tree) is OrderedDict:
        keys = list(tree)
        return TreeSpec("OrderedDict", keys, [_flatten(tree[k], leaves) for k in keys])
    if type(tree) is dict:
        keys = list(tree)
        return TreeSpec("dict", keys, [_flatten(tree[k], leaves) for k in keys])
    leaves.append(tree)
    return LEAF


def tree_unflatten(leaves, spec: TreeSpec):
    """The pytree of shape `spec` holding `leaves` in order."""
    it = iter(leaves)
    return _build(spec, it)


def _build(spec: TreeSpec, it):
    if spec.kind is None:
        return next(it)
    values = [_build(c, it) for c in spec.children]
    if spec.kind == "tuple":
        return tuple(values)
    if spec.kind == "list":
        return values
    if spec.kind == "namedtuple":
        return spec.context(*values)
    if spec.kind == "OrderedDict":
        return OrderedDict(zip(spec.context, values))
    return dict(zip(spec.context, values))


def tree_map(fn: Callable, tree):
    """`tree` with `fn` applied to every leaf."""
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([fn(x) for x in leaves], spec)


def broadcast_prefix(prefix, tree, prefix_spec: TreeSpec, spec: TreeSpec) -> list | None:
    """The leaves of `prefix` repeated over the leaves of `tree` where `prefix`'s structure
    is a prefix of `tree`'s (a leaf of `prefix` covers a whole subtree, as vmap's `in_dims`
    and `out_dims` do); None when it is not a prefix."""
    out: list = []
    leaves, _ = tree_flatten(prefix)
    if not _broadcast(prefix_spec, spec, iter(leaves), out):
        return None
    return out


def _broadcast(pspec: TreeSpec, spec: TreeSpec, it, out: list) -> bool:
    if pspec.kind is None:
        out.extend([next(it)] * spec.num_leaves)
        return True
    if pspec.kind != spec.kind or pspec.context != spec.context or \
            len(pspec.children) != len(spec.children):
        return False
    return all(_broadcast(p, s, it, out) for p, s in zip(pspec.children, spec.children))
