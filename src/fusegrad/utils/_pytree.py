"""`torch.utils._pytree`: nested Python containers ("pytrees") flattened into leaves and
rebuilt from them.

A container kind is a *node type* with a flatten function (children, context) and an
unflatten function (children, context -> container). tuple, list, dict, OrderedDict,
defaultdict, deque and every named tuple are nodes from the start; `register_pytree_node`
adds more. Everything else (tensors, numbers, None, strings) is a leaf. A `TreeSpec`
records the nodes and prints, compares and hashes as PyTorch's does, since programs print
them and error messages show them. `fusegrad.func`'s transforms use this module too.
"""

from __future__ import annotations

import types
import warnings
from collections import OrderedDict, defaultdict, deque, namedtuple
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from ._pytree_keys import (
    GetAttrKey,
    MappingKey,
    SequenceKey,
    defaultdict_flatten_with_keys,
    deque_flatten_with_keys,
    mapping_flatten_with_keys,
    namedtuple_flatten_with_keys,
    sequence_flatten_with_keys,
)

__all__ = [
    "PyTree", "Context", "FlattenFunc", "UnflattenFunc", "TreeSpec", "LeafSpec",
    "register_pytree_node", "tree_flatten", "tree_unflatten", "tree_iter", "tree_leaves",
    "tree_structure", "tree_map", "tree_map_", "tree_map_only", "tree_map_only_", "tree_all",
    "tree_any", "tree_all_only", "tree_any_only", "tree_is_leaf", "treespec_pprint",
    "keystr", "key_get", "tree_flatten_with_path", "tree_leaves_with_path", "tree_map_with_path",
    "treespec_leaf", "treespec_tuple", "is_namedtuple", "is_namedtuple_class",
    "is_namedtuple_instance",
]

PyTree = Any
Context = Any
FlattenFunc = Callable[[PyTree], tuple[list, Context]]
UnflattenFunc = Callable[[Iterable, Context], PyTree]
KeyEntry = SequenceKey | MappingKey | GetAttrKey | Any
KeyPath = tuple


class NodeDef(NamedTuple):
    """How one node type is taken apart and put together again."""

    type: type
    flatten_fn: FlattenFunc
    unflatten_fn: UnflattenFunc
    flatten_with_keys_fn: Callable | None


SUPPORTED_NODES: dict[Any, NodeDef] = {}
# The node types whose flatten_up_to compares by length (and keys), not by context.
BUILTIN_TYPES: set = set()
STANDARD_DICT_TYPES = frozenset({dict, OrderedDict, defaultdict})


def register_pytree_node(cls: type, flatten_fn: FlattenFunc, unflatten_fn: UnflattenFunc, *,
                         serialized_type_name: str | None = None,
                         to_dumpable_context: Callable | None = None,
                         from_dumpable_context: Callable | None = None,
                         flatten_with_keys_fn: Callable | None = None) -> None:
    """Make `cls` a node type: `flatten_fn(x) -> (children, context)` takes an instance
    apart, `unflatten_fn(children, context)` builds it again."""
    if cls in SUPPORTED_NODES:
        raise ValueError(f"{cls} is already registered as pytree node.")
    SUPPORTED_NODES[cls] = NodeDef(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn)


def _register_pytree_node(cls: type, flatten_fn: FlattenFunc, unflatten_fn: UnflattenFunc,
                          to_str_fn: Callable | None = None,
                          maybe_from_str_fn: Callable | None = None, *,
                          serialized_type_name: str | None = None,
                          to_dumpable_context: Callable | None = None,
                          from_dumpable_context: Callable | None = None,
                          flatten_with_keys_fn: Callable | None = None) -> None:
    """The older spelling of `register_pytree_node` (deprecated, as in PyTorch)."""
    warnings.warn("`torch.utils._pytree._register_pytree_node` is deprecated. Please use "
                  "`torch.utils._pytree.register_pytree_node` instead.",
                  category=FutureWarning, stacklevel=2)
    register_pytree_node(cls, flatten_fn, unflatten_fn,
                         flatten_with_keys_fn=flatten_with_keys_fn)


def _builtin(cls, flatten_fn: FlattenFunc, unflatten_fn: UnflattenFunc,
             flatten_with_keys_fn: Callable) -> None:
    register_pytree_node(cls, flatten_fn, unflatten_fn,
                         flatten_with_keys_fn=flatten_with_keys_fn)
    BUILTIN_TYPES.add(cls)


def _dict_flatten(d: dict) -> tuple[list, list]:
    keys = list(d)
    return [d[k] for k in keys], keys


def _defaultdict_flatten(d: defaultdict) -> tuple[list, list]:
    values, keys = _dict_flatten(d)
    return values, [d.default_factory, keys]


def _defaultdict_unflatten(values: Iterable, context: list) -> defaultdict:
    factory, keys = context
    return defaultdict(factory, zip(keys, values))


_builtin(tuple, lambda t: (list(t), None), lambda v, c: tuple(v), sequence_flatten_with_keys)
_builtin(list, lambda t: (list(t), None), lambda v, c: list(v), sequence_flatten_with_keys)
_builtin(dict, _dict_flatten, lambda v, keys: dict(zip(keys, v)), mapping_flatten_with_keys)
_builtin(namedtuple, lambda t: (list(t), type(t)), lambda v, cls: cls(*v),
         namedtuple_flatten_with_keys)
_builtin(OrderedDict, _dict_flatten, lambda v, keys: OrderedDict(zip(keys, v)),
         mapping_flatten_with_keys)
_builtin(defaultdict, _defaultdict_flatten, _defaultdict_unflatten,
         defaultdict_flatten_with_keys)
_builtin(deque, lambda d: (list(d), d.maxlen), lambda v, maxlen: deque(v, maxlen=maxlen),
         deque_flatten_with_keys)


def is_namedtuple_class(cls: type) -> bool:
    """Whether `cls` is a class made by `collections.namedtuple` (or shaped as one)."""
    return (isinstance(cls, type) and issubclass(cls, tuple)
            and isinstance(getattr(cls, "_fields", None), tuple)
            and callable(getattr(cls, "_make", None)))


def is_namedtuple_instance(obj: object) -> bool:
    """Whether `obj` is an instance of a named tuple class."""
    return is_namedtuple_class(type(obj))


def is_namedtuple(obj: object) -> bool:
    """Whether `obj` is a named tuple class or an instance of one."""
    return is_namedtuple_class(obj if isinstance(obj, type) else type(obj))


def _return_type_node(cls: type) -> None:
    # PyTorch's `torch.return_types` classes are struct sequences registered one by one, so
    # their specs name the class itself; fusegrad's are named tuples, registered on first
    # sight to print and compare the same way.
    register_pytree_node(cls, lambda t: (list(t), None), lambda v, c: cls(*v),
                         flatten_with_keys_fn=sequence_flatten_with_keys)


def _node_type(tree: Any) -> Any:
    cls = type(tree)
    if cls in SUPPORTED_NODES:
        return cls
    if is_namedtuple_class(cls):
        if cls.__module__ == "fusegrad.return_types":
            _return_type_node(cls)
            return cls
        return namedtuple
    return cls


def tree_is_leaf(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None) -> bool:
    """Whether `tree` is a leaf: no registered node type, or `is_leaf` says so."""
    if is_leaf is not None and is_leaf(tree):
        return True
    return _node_type(tree) not in SUPPORTED_NODES


class TreeSpec:
    """The structure of a pytree: the root's node type, its context and its children's
    specs. A leaf's spec has type None (`LeafSpec()`, printed `*`)."""

    __slots__ = ("type", "_context", "_children", "num_nodes", "num_leaves", "num_children")

    def __init__(self, type: Any, context: Context, children_specs: list) -> None:
        self.type = type
        self._context = context
        self._children = children_specs
        if type is None:
            if context is not None:
                raise AssertionError("leaf node should not have a context")
            if children_specs:
                raise AssertionError("leaf node should not have children")
            self.num_nodes, self.num_leaves, self.num_children = 1, 1, 0
        else:
            self.num_nodes = 1 + sum(c.num_nodes for c in children_specs)
            self.num_leaves = sum(c.num_leaves for c in children_specs)
            self.num_children = len(children_specs)

    @property
    def context(self) -> Context:
        """What the node's unflatten function needs besides the children (dict keys, ...)."""
        return self._context

    @property
    def children_specs(self) -> list:
        """The children's specs (deprecated spelling of `children()`)."""
        warnings.warn("`treespec.children_specs` is deprecated. Use `treespec.child(index)` "
                      "to access a single child, or `treespec.children()` to get all "
                      "children.", category=FutureWarning, stacklevel=2)
        return self._children

    def is_leaf(self) -> bool:
        """Whether this spec stands for a single leaf."""
        return self.num_nodes == 1 and self.num_leaves == 1

    def children(self) -> list:
        """A copy of the list of the children's specs."""
        return list(self._children)

    def child(self, index: int) -> TreeSpec:
        """The spec of child `index`."""
        return self._children[index]

    def __repr__(self, indent: int = 0) -> str:
        if self.type is None:
            return "*"
        inner = indent + 2
        children = (",\n" + " " * inner).join(c.__repr__(inner) for c in self._children)
        return f"TreeSpec({self.type.__name__}, {self._context}, [{children}])"

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, TreeSpec):
            return NotImplemented
        return (str(self.type) == str(other.type) and self._context == other._context
                and self._children == other._children)

    def __hash__(self) -> int:
        cls, ctx = self.type, self._context
        if cls is defaultdict:
            ctx = (ctx[0], tuple(ctx[1]))
        elif cls in (dict, OrderedDict):
            ctx = tuple(ctx)
        elif cls is not None and cls not in BUILTIN_TYPES:
            ctx = None  # a custom node's context need not be hashable
        return hash((cls, ctx, tuple(self._children)))

    def flatten_up_to(self, tree: PyTree) -> list:
        """The subtrees of `tree` sitting where this spec has its leaves; `tree` must have
        this spec's nodes above them (ValueError otherwise)."""
        out: list = []
        self._up_to(tree, out)
        return out

    def _up_to(self, tree: PyTree, out: list) -> None:
        if self.is_leaf():
            out.append(tree)
            return
        cls = _node_type(tree)
        if self.type not in BUILTIN_TYPES:
            if cls != self.type:
                raise ValueError(f"Type mismatch; expected {self.type!r}, but got {cls!r}.")
            children, context = SUPPORTED_NODES[cls].flatten_fn(tree)
            _check_arity(self, len(children))
            if context != self._context:
                raise ValueError(
                    f"Node context mismatch for custom node type {self.type!r}.")
        else:
            dicts = self.type in STANDARD_DICT_TYPES and cls in STANDARD_DICT_TYPES
            if not dicts and cls != self.type:
                raise ValueError(
                    f"Node type mismatch; expected {self.type!r}, but got {cls!r}.")
            _check_arity(self, len(tree))
            if dicts:
                keys = self._context[1] if self.type is defaultdict else self._context
                _check_keys(keys, tree)
                children = [tree[k] for k in keys]
            else:
                children, context = SUPPORTED_NODES[cls].flatten_fn(tree)
                # A deque's maxlen does not take part in the structure.
                if cls is not deque and context != self._context:
                    raise ValueError(
                        f"Node context mismatch for node type {self.type!r}; expected "
                        f"{self._context!r}, but got {context!r}.")
        for child, spec in zip(children, self._children):
            spec._up_to(child, out)

    def unflatten(self, leaves: Iterable) -> PyTree:
        """The pytree of this structure holding `leaves` in order."""
        if not isinstance(leaves, (list, tuple)):
            leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(
                f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec "
                f"refers to a pytree that holds {self.num_leaves} items ({self}).")
        return self._build(leaves, 0)

    def _build(self, leaves, start: int) -> PyTree:
        if self.type is None:
            return leaves[start]
        children = []
        for spec in self._children:
            children.append(spec._build(leaves, start))
            start += spec.num_leaves
        return SUPPORTED_NODES[self.type].unflatten_fn(children, self._context)


def _check_arity(spec: TreeSpec, got: int) -> None:
    if got != spec.num_children:
        raise ValueError(
            f"Node arity mismatch; expected {spec.num_children}, but got {got}.")


def _check_keys(expected: list, node: dict) -> None:
    want, got = set(expected), set(node)
    if want == got:
        return
    message = ""
    if want - got:
        message += f"; missing key(s): {want - got}"
    if got - want:
        message += f"; extra key(s): {got - want}"
    raise ValueError(f"Node keys mismatch{message}.")


PyTreeSpec = TreeSpec


class LeafSpec(TreeSpec):
    """The spec of a single leaf."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(None, None, [])


_LEAF_SPEC = LeafSpec()


def treespec_leaf() -> TreeSpec:
    """The spec of a single leaf."""
    return _LEAF_SPEC


def treespec_tuple(iterable: Iterable[TreeSpec] = (), /) -> TreeSpec:
    """The spec of a tuple whose children have the given specs."""
    children = list(iterable)
    if any(not isinstance(c, TreeSpec) for c in children):
        raise ValueError(f"Expected a tuple of TreeSpec values, got: {children!r}.")
    return TreeSpec(tuple, None, children)


def _flatten(tree: PyTree, leaves: list, is_leaf: Callable | None) -> TreeSpec:
    if is_leaf is not None and is_leaf(tree):
        leaves.append(tree)
        return _LEAF_SPEC
    cls = _node_type(tree)
    node = SUPPORTED_NODES.get(cls)
    if node is None:
        leaves.append(tree)
        return _LEAF_SPEC
    children, context = node.flatten_fn(tree)
    return TreeSpec(cls, context, [_flatten(c, leaves, is_leaf) for c in children])


def tree_flatten(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None
                 ) -> tuple[list, TreeSpec]:
    """(the leaves of `tree` in order, its spec)."""
    leaves: list = []
    return leaves, _flatten(tree, leaves, is_leaf)


def _key_paths(path: tuple, tree: PyTree, is_leaf: Callable | None, out: list) -> None:
    if is_leaf is not None and is_leaf(tree):
        out.append((path, tree))
        return
    cls = _node_type(tree)
    node = SUPPORTED_NODES.get(cls)
    if node is None:
        out.append((path, tree))
        return
    if node.flatten_with_keys_fn is None:
        raise ValueError(f"Did not find a flatten_with_keys_fn for type: {cls}. Please pass "
                         "a flatten_with_keys_fn argument to register_pytree_node.")
    for key, child in node.flatten_with_keys_fn(tree)[0]:
        _key_paths((*path, key), child, is_leaf, out)


def tree_leaves_with_path(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None
                          ) -> list[tuple[KeyPath, Any]]:
    """[(key path, leaf)] for the leaves of `tree` in order; a registered node type needs a
    `flatten_with_keys_fn` to name its children."""
    out: list = []
    _key_paths((), tree, is_leaf, out)
    return out


def tree_flatten_with_path(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None
                           ) -> tuple[list[tuple[KeyPath, Any]], TreeSpec]:
    """([(key path, leaf)] in order, the spec of `tree`)."""
    spec = tree_flatten(tree, is_leaf)[1]
    return tree_leaves_with_path(tree, is_leaf), spec


def tree_map_with_path(func: Callable[..., Any], tree: PyTree, *rests: PyTree,
                       is_leaf: Callable[[PyTree], bool] | None = None) -> PyTree:
    """`tree_map` whose `func` takes each leaf's key path first: `func(path, leaf, *xs)`."""
    pairs, spec = tree_flatten_with_path(tree, is_leaf)
    columns = [[p for p, _ in pairs], [v for _, v in pairs]]
    columns += [spec.flatten_up_to(r) for r in rests]
    return spec.unflatten(map(func, *columns))


def keystr(kp: KeyPath) -> str:
    """A key path as the Python that reaches the leaf: `['a'][0].x`."""
    return "".join(str(k) for k in kp)


def key_get(obj: Any, kp: KeyPath) -> Any:
    """The value reached from `obj` by following key path `kp`."""
    for k in kp:
        obj = k.get(obj)
    return obj


def tree_unflatten(leaves: Iterable, treespec: TreeSpec) -> PyTree:
    """The pytree of structure `treespec` holding `leaves` in order."""
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"tree_unflatten(leaves, treespec): Expected `treespec` to be "
                        f"instance of TreeSpec but got item of type {type(treespec)}.")
    return treespec.unflatten(leaves)


def tree_iter(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None):
    """Yield the leaves of `tree` in order."""
    if tree_is_leaf(tree, is_leaf):
        yield tree
        return
    children, _ = SUPPORTED_NODES[_node_type(tree)].flatten_fn(tree)
    for child in children:
        yield from tree_iter(child, is_leaf)


def tree_leaves(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None) -> list:
    """The leaves of `tree` in order."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None
                   ) -> TreeSpec:
    """The spec of `tree`."""
    return tree_flatten(tree, is_leaf)[1]


def tree_map(func: Callable[..., Any], tree: PyTree, *rests: PyTree,
             is_leaf: Callable[[PyTree], bool] | None = None) -> PyTree:
    """`tree` with each leaf replaced by `func(leaf, *matching subtrees of rests)`; each of
    `rests` must have `tree`'s structure above its leaves."""
    leaves, spec = tree_flatten(tree, is_leaf)
    columns = [leaves] + [spec.flatten_up_to(r) for r in rests]
    return spec.unflatten(map(func, *columns))


def tree_map_(func: Callable[..., Any], tree: PyTree, *rests: PyTree,
              is_leaf: Callable[[PyTree], bool] | None = None) -> PyTree:
    """Call `func` on each leaf (and the matching subtrees of `rests`) for its effect;
    return `tree` itself."""
    leaves, spec = tree_flatten(tree, is_leaf)
    columns = [leaves] + [spec.flatten_up_to(r) for r in rests]
    for args in zip(*columns):
        func(*args)
    return tree


def _type_filter(type_or_types_or_pred) -> Callable[[Any], bool]:
    if isinstance(type_or_types_or_pred, (type, tuple, types.UnionType)):
        return lambda x: isinstance(x, type_or_types_or_pred)
    return type_or_types_or_pred


def map_only(type_or_types_or_pred, /) -> Callable[[Callable], Callable]:
    """A decorator: the function applies to the leaves that match, others pass unchanged."""
    test = _type_filter(type_or_types_or_pred)

    def wrap(func: Callable) -> Callable:
        def only(x):
            return func(x) if test(x) else x
        only.__wrapped__ = func
        return only
    return wrap


def tree_map_only(type_or_types_or_pred, /, func: Callable[[Any], Any], tree: PyTree,
                  is_leaf: Callable[[PyTree], bool] | None = None) -> PyTree:
    """`tree_map` over the leaves of the given type(s) (or passing the predicate); the
    other leaves are kept as they are."""
    return tree_map(map_only(type_or_types_or_pred)(func), tree, is_leaf=is_leaf)


def tree_map_only_(type_or_types_or_pred, /, func: Callable[[Any], Any], tree: PyTree,
                   is_leaf: Callable[[PyTree], bool] | None = None) -> PyTree:
    """`tree_map_` over the leaves of the given type(s) (or passing the predicate)."""
    return tree_map_(map_only(type_or_types_or_pred)(func), tree, is_leaf=is_leaf)


def tree_all(pred: Callable[[Any], bool], tree: PyTree,
             is_leaf: Callable[[PyTree], bool] | None = None) -> bool:
    """Whether `pred` holds for every leaf."""
    return all(map(pred, tree_iter(tree, is_leaf)))


def tree_any(pred: Callable[[Any], bool], tree: PyTree,
             is_leaf: Callable[[PyTree], bool] | None = None) -> bool:
    """Whether `pred` holds for some leaf."""
    return any(map(pred, tree_iter(tree, is_leaf)))


def tree_all_only(type_or_types, /, pred: Callable[[Any], bool], tree: PyTree,
                  is_leaf: Callable[[PyTree], bool] | None = None) -> bool:
    """Whether `pred` holds for every leaf of the given type(s)."""
    return all(pred(x) for x in tree_iter(tree, is_leaf) if isinstance(x, type_or_types))


def tree_any_only(type_or_types, /, pred: Callable[[Any], bool], tree: PyTree,
                  is_leaf: Callable[[PyTree], bool] | None = None) -> bool:
    """Whether `pred` holds for some leaf of the given type(s)."""
    return any(pred(x) for x in tree_iter(tree, is_leaf) if isinstance(x, type_or_types))


class _Star:
    """A leaf that prints as `*`."""

    def __repr__(self) -> str:
        return "*"


def treespec_pprint(treespec: TreeSpec) -> str:
    """The structure printed as its containers print, with `*` for each leaf:
    `(*, [*, {'a': *}])`."""
    return repr(treespec.unflatten([_Star()] * treespec.num_leaves))
