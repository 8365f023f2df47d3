"""`Graph`: an ordered list of Nodes with PyTorch FX's construction and rewriting API."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from ._codegen import PythonCode, python_code
from ._namespace import Namespace, snake_case
from .node import OPCODES, Node, map_aggregate, map_arg, target_str

# (what create_node accepts: the node opcodes and the root sentinel)
_LEGAL_OPS = frozenset(OPCODES) | {"root"}


def _holds_state(module: Any, qualified_name: str) -> bool:
    """Whether `qualified_name` names a submodule, parameter or buffer of `module`."""
    *path, field = qualified_name.split(".")
    for atom in path:
        module = getattr(module, "_modules", {}).get(atom)
        if module is None:
            return False
    return field in getattr(module, "_modules", {}) or \
        field in getattr(module, "_parameters", {}) or field in getattr(module, "_buffers", {})


class _NodeList:
    """The nodes of a graph in order (a live view: supports len, iteration, reversed)."""

    def __init__(self, graph: Graph, reverse: bool = False) -> None:
        self._graph = graph
        self._reverse = reverse

    def __len__(self) -> int:
        return self._graph._len

    def __iter__(self) -> Iterator[Node]:
        root = self._graph._root
        cur = root._prev if self._reverse else root._next
        while cur is not root:
            nxt = cur._prev if self._reverse else cur._next
            if not cur._erased:
                yield cur
            cur = nxt

    def __reversed__(self) -> Iterator[Node]:
        return iter(_NodeList(self._graph, not self._reverse))

    def __repr__(self) -> str:
        return repr(list(self))


class _InsertPoint:
    """Context manager restoring the previous insertion point on exit."""

    def __init__(self, graph: Graph, new_insert: Callable[[Node], None]) -> None:
        self.graph = graph
        self.orig, graph._insert = graph._insert, new_insert

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        self.graph._insert = self.orig


class Graph:
    """A program as a list of Nodes: placeholders, operations and one output."""

    def __init__(self, owning_module: Any = None, tracer_cls: type | None = None,
                 tracer_extras: dict | None = None) -> None:
        self._root = Node(self, "", "root", "", (), {})
        self._insert: Callable[[Node], None] = self._root.prepend
        self._len = 0
        self._namespace = Namespace()
        self._owners = 0
        self.owning_module = owning_module
        self._tracer_cls = tracer_cls
        self._tracer_extras = tracer_extras

    # ------------------------------------------------------------------ nodes

    @property
    def nodes(self) -> _NodeList:
        """All nodes, in execution order."""
        return _NodeList(self)

    def find_nodes(self, *, op: str, target: Any = None, sort: bool = True) -> list[Node]:
        """Nodes with opcode `op` (and `target`, when given)."""
        return [n for n in self.nodes
                if n.op == op and (target is None or n.target == target)]

    def output_node(self) -> Node:
        """The output node (the last node)."""
        last = self._root._prev
        if last is self._root or last.op != "output":
            raise RuntimeError("graph has no output node")
        return last

    def _target_to_name(self, op: str, target: Any) -> str:
        if op == "call_function":
            name = getattr(target, "__name__", None) or str(target)
        else:
            name = str(target)
        if op in ("call_module", "get_attr"):
            name = name.replace(".", "_")
        return snake_case(name)

    def create_node(self, op: str, target: Any, args: tuple | None = None,
                    kwargs: dict | None = None, name: str | None = None,
                    type_expr: Any = None) -> Node:
        """Make a node at the current insertion point and return it."""
        candidate = name if name is not None else self._target_to_name(op, target)
        name = self._namespace.create_name(candidate)  # (taken even when the checks fail)
        if op not in _LEGAL_OPS:
            raise AssertionError(f"op '{op}' is not in _legal_ops")
        if not callable(target) and not isinstance(target, str):
            raise AssertionError(f"Expected target to be str, got {type(target)}")
        node = Node(self, name, op, target, tuple(args) if args else (),
                    dict(kwargs) if kwargs else {}, type_expr)
        self._insert(node)
        self._len += 1
        return node

    def placeholder(self, name: str, type_expr: Any = None,
                    default_value: Any = inspect.Parameter.empty) -> Node:
        """An input of the graph (`default_value` becomes the parameter's default)."""
        args = () if default_value is inspect.Parameter.empty else (default_value,)
        return self.create_node("placeholder", name, args, type_expr=type_expr)

    def get_attr(self, qualified_name: str, type_expr: Any = None) -> Node:
        """Read attribute `qualified_name` (dotted) of the owning module (with torch.fx's
        warning when the owning module has no submodule, parameter or buffer there)."""
        if self.owning_module is not None and \
                not _holds_state(self.owning_module, qualified_name):
            warnings.warn("Attempted to insert a get_attr Node with no underlying reference in "
                          "the owning GraphModule! Call GraphModule.add_submodule to add the "
                          "necessary submodule, GraphModule.add_parameter to add the necessary "
                          "Parameter, or nn.Module.register_buffer to add the necessary "
                          "buffer", stacklevel=2)
        return self.create_node("get_attr", qualified_name, type_expr=type_expr)

    def call_module(self, module_name: str, args: tuple | None = None,
                    kwargs: dict | None = None, type_expr: Any = None) -> Node:
        """Call submodule `module_name` of the owning module (which must have it, when the
        graph has one: `get_submodule`'s AttributeError otherwise, as in torch.fx)."""
        if self.owning_module is not None:
            self.owning_module.get_submodule(module_name)
        return self.create_node("call_module", module_name, args, kwargs, type_expr=type_expr)

    def call_method(self, method_name: str, args: tuple | None = None,
                    kwargs: dict | None = None, type_expr: Any = None) -> Node:
        """Call method `method_name` on `args[0]`."""
        return self.create_node("call_method", method_name, args, kwargs, type_expr=type_expr)

    def call_function(self, the_function: Callable, args: tuple | None = None,
                      kwargs: dict | None = None, type_expr: Any = None,
                      name: str | None = None) -> Node:
        """Call a free function (the node is named `name`, made unique, when given)."""
        return self.create_node("call_function", the_function, args, kwargs, name=name,
                                type_expr=type_expr)

    def output(self, result: Any, type_expr: Any = None) -> Node:
        """The graph's result (one node; its `args[0]` is the returned value)."""
        return self.create_node("output", "output", (result,), type_expr=type_expr)

    def node_copy(self, node: Node, arg_transform: Callable[[Node], Any] = lambda x: x) -> Node:
        """Copy `node` from another graph, mapping its input nodes with `arg_transform`."""
        args = map_arg(node.args, arg_transform)
        kwargs = map_arg(node.kwargs, arg_transform)
        new = self.create_node(node.op, node.target, args, kwargs, node.name, node.type)
        new.meta = dict(node.meta)
        return new

    def graph_copy(self, g: Graph, val_map: dict, return_output_node: bool = False) -> Any:
        """Copy every node of `g` except its output; returns the copied output value."""
        for node in g.nodes:
            if node in val_map:
                continue
            if node.op == "output":
                out = map_arg(node.args[0], lambda n: val_map[n])
                return (out, node) if return_output_node else out
            val_map[node] = self.node_copy(node, lambda n: val_map[n])
        return None

    def __deepcopy__(self, memo: dict) -> Graph:
        """A copy with new nodes (same names, targets and meta)."""
        new = Graph(tracer_cls=self._tracer_cls)
        memo[id(self)] = new
        val_map: dict = {}
        result = new.graph_copy(self, val_map, return_output_node=True)
        if result is not None:
            out, old_out = result
            new.output(out, type_expr=old_out.type)
        if getattr(self, "_pytree_info", None) is not None:
            new._pytree_info = self._pytree_info
        return new

    def __reduce__(self) -> tuple:
        # Nodes are stored as records; fusegrad functions by their public name (several are
        # made by factories and cannot be pickled by reference). Node meta is not kept.
        index = {n: i for i, n in enumerate(self.nodes)}
        to_ref = lambda n: _NodeRef(index[n])  # noqa: E731
        records = [(n.op, n.name, _target_ref(n.target), map_arg(n.args, to_ref),
                    map_arg(n.kwargs, to_ref), n.type) for n in self.nodes]
        return (_rebuild_graph, (records,))

    # ------------------------------------------------------------------ insertion point

    def inserting_before(self, n: Node | None = None) -> _InsertPoint:
        """Context manager: new nodes go just before `n` (the start of the graph if None)."""
        if n is None:
            return self.inserting_after(self._root)
        if n.graph is not self:
            raise ValueError("node to insert before is not in this graph")
        return _InsertPoint(self, n.prepend)

    def inserting_after(self, n: Node | None = None) -> _InsertPoint:
        """Context manager: new nodes go just after `n` (the end of the graph if None)."""
        if n is None:
            return self.inserting_before(self._root)
        if n.graph is not self:
            raise ValueError("node to insert after is not in this graph")
        return _InsertPoint(self, n.append)

    # ------------------------------------------------------------------ removal

    def erase_node(self, to_erase: Node) -> None:
        """Remove a node that has no users."""
        if to_erase.users:
            raise RuntimeError(f"Tried to erase Node {to_erase} but it still had "
                               f"{len(to_erase.users)} users in the graph: {to_erase.users}!")
        if to_erase.graph is not self:
            raise RuntimeError(f"Attempting to remove {to_erase} from wrong graph!")
        if to_erase._erased:
            return
        to_erase._remove_from_list()
        to_erase._erased = True
        self._len -= 1
        to_erase._update_args_kwargs((), {})

    def eliminate_dead_code(self, is_impure_node: Callable[[Node], bool] | None = None) -> bool:
        """Erase nodes whose values are unused and that have no side effects; True if any."""
        changed = False
        for node in reversed(self.nodes):
            impure = is_impure_node(node) if is_impure_node is not None else node.is_impure()
            if not node.users and not impure:
                self.erase_node(node)
                changed = True
        return changed

    # ------------------------------------------------------------------ checks and code

    def lint(self) -> None:
        """Check the graph's invariants; raise RuntimeError on the first violation."""
        seen: set[Node] = set()
        names: set[str] = set()
        # (nodes after the output, or a second output, pass as in torch.fx: they are dead
        # code in the generated forward, not a broken graph)
        for node in self.nodes:
            if node.graph is not self:
                raise RuntimeError(f"Node '{node}' does not belong to this Graph!")
            if node.name in names:
                raise RuntimeError(f"Node redefined name {node.name}!")
            names.add(node.name)
            for inp in node._input_nodes:
                if inp.graph is not self or inp._erased:
                    raise RuntimeError(f"Argument '{inp}' of Node '{node}' does not belong "
                                       "to this Graph!")
                if inp not in seen:
                    raise RuntimeError(f"Argument '{inp}' of Node '{node}' was used before it "
                                       "has been defined! Please check that Nodes in the graph "
                                       "are topologically ordered")
                if node not in inp.users:
                    raise RuntimeError(f"Node '{node}' is missing from the users of '{inp}'")
            for user in node.users:
                if node not in user._input_nodes:
                    raise RuntimeError(f"'{user}' is listed as a user of '{node}' but does not "
                                       "read it")
            seen.add(node)
        owner = self.owning_module
        if owner is None:
            return
        for node in self.nodes:
            if node.op in ("get_attr", "call_module"):
                obj = owner
                path: list[str] = []  # (the attributes walked so far, for the message)
                for atom in node.target.split("."):
                    if not hasattr(obj, atom):
                        raise RuntimeError(f"Node {node} target {node.target} references "
                                           f"nonexistent attribute {atom} of "
                                           f"{'.'.join(path)}")
                    obj = getattr(obj, atom)
                    path.append(atom)

    def python_code(self, root_module: str = "self", *, verbose: bool = False,
                    **kwargs: Any) -> PythonCode:
        """Generated Python source for this graph, and the globals it needs; `verbose` adds
        what `print_readable` shows: stack-trace comments and each value's annotation from
        its metadata (`include_stride`, `include_device`: with strides and device). (torch.fx's
        `colored` is accepted and not shown.)"""
        return python_code(self, root_module, verbose, bool(kwargs.get("include_stride")),
                           bool(kwargs.get("include_device")))

    def __str__(self) -> str:
        lines = ["graph():"]
        lines += [f"    {n.format_node()}" for n in self.nodes]
        return "\n".join(lines)

    def print_tabular(self) -> None:
        """Print the nodes as a table: opcode, name, target, args, kwargs."""
        try:
            from tabulate import tabulate
        except ImportError:
            raise ImportError("Graph.print_tabular() needs the `tabulate` package; install it "
                              "with `pip install tabulate`.") from None
        rows = [[n.op, n.name, _tabular_target(n), n.args, n.kwargs] for n in self.nodes]
        print(tabulate(rows, headers=["opcode", "name", "target", "args", "kwargs"]))


class _NodeRef(int):
    """The position of a node, standing for it in a pickled graph."""


class _PublicFunction(tuple):
    """(module name, attribute): a function pickled by the name it is published under."""


def _target_ref(target: Any) -> Any:
    import sys

    name = getattr(target, "__name__", None)
    if callable(target) and name:
        for mod_name in ("fusegrad", "fusegrad.nn.functional"):
            mod = sys.modules.get(mod_name)
            if mod is not None and getattr(mod, name, None) is target:
                return _PublicFunction((mod_name, name))
    return target


def _rebuild_graph(records: list) -> Graph:
    from importlib import import_module

    g = Graph()
    nodes: list[Node] = []

    def load(a):
        return map_aggregate(a, lambda x: nodes[x] if isinstance(x, _NodeRef) else x)

    for op, name, target, args, kwargs, type_expr in records:
        if isinstance(target, _PublicFunction):
            target = getattr(import_module(target[0]), target[1])
        nodes.append(g.create_node(op, target, load(args), load(kwargs), name, type_expr))
    return g


def _tabular_target(n: Node) -> str:
    return n.target if isinstance(n.target, str) else str(n.target)


__all__ = ["Graph", "PythonCode", "target_str"]
