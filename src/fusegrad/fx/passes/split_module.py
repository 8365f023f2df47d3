"""`torch.fx.passes.split_module`: a GraphModule cut into submodules that run in turn.

`split_callback(node)` names each node's partition; every partition becomes a submodule
`submod_<partition>` whose inputs are the values it reads from outside (the graph's inputs,
other partitions' results, attributes) in the order it first reads them, and whose outputs
are the values other partitions or the graph's result read, in the order they are first
read (one output is returned as it is, several as a tuple). The top graph reads the
attributes, calls the submodules in an order that respects their dependencies and unpacks
their tuples with `getitem`, as PyTorch's pass writes it.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from ..graph import Graph
from ..graph_module import GraphModule
from ..node import Node, map_arg


class _Partition:
    """The nodes of one partition and what flows in and out of it."""

    def __init__(self, name: str):
        self.name = name
        self.nodes: list[Node] = []
        self.inputs: dict[Node, None] = {}  # ordered sets
        self.outputs: dict[Node, None] = {}
        self.depends: dict[str, None] = {}
        self.dependents: dict[str, None] = {}
        self.graph = Graph()
        self.env: dict[Node, Node] = {}
        self.targets: dict[str, Any] = {}  # submodule or attribute name -> object


def _uses(node: Node) -> list[Node]:
    found: list[Node] = []
    map_arg(node.args, found.append)
    map_arg(node.kwargs, found.append)
    return found


def split_module(m: GraphModule, root_m: Any, split_callback: Callable[[Node], Any],
                 qualname_map: dict | None = None, keep_original_order: bool = False,
                 keep_original_node_name: bool = False,
                 keep_original_input_name: bool = True,
                 partition_affix: str | None = None) -> GraphModule:
    """`m`'s graph cut into one submodule per partition `split_callback` assigns (see the
    module docstring); `root_m` holds the submodules and attributes the graph names.
    `qualname_map`, when given, is filled with each new submodule path's original one."""
    graph = m.graph
    partitions: dict[str, _Partition] = {}
    owner: dict[Node, _Partition] = {}
    attrs: list[Node] = []
    affix = f"_{partition_affix}" if partition_affix else ""
    for node in graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if node.op == "get_attr":  # read in the top graph, passed in as an input
            attrs.append(node)
            continue
        key = str(split_callback(node))
        part = partitions.get(key)
        if part is None:
            part = partitions[key] = _Partition(key)
        part.nodes.append(node)
        owner[node] = part

    def read(user: _Partition | None, value: Node) -> None:
        source = owner.get(value)
        if source is user:
            return
        if source is not None:
            source.outputs.setdefault(value)
            if user is not None:
                user.depends.setdefault(source.name)
                source.dependents.setdefault(user.name)
        if user is not None:
            user.inputs.setdefault(value)

    for node in graph.nodes:
        if node.op == "output":
            map_arg(node.args, lambda v: read(None, v))
        elif node in owner:
            for value in _uses(node):
                read(owner[node], value)

    order = _ordered(partitions, keep_original_order)
    base = Graph()
    env: dict[Node, Any] = {}
    for node in graph.nodes:
        if node.op == "placeholder":
            name = node.target if keep_original_input_name else node.name
            new = base.placeholder(name, type_expr=node.type)
            if node.args:
                new.args = node.args
            new.meta = dict(node.meta)
            env[node] = new
    for node in attrs:
        env[node] = base.get_attr(node.target)
        env[node].meta = dict(node.meta)
    top: dict[str, Any] = {}
    for part in order:
        submod = _build(part, root_m, keep_original_node_name)
        name = f"submod_{part.name}{affix}"
        top[name] = submod
        if qualname_map is not None:
            for node in part.nodes:
                if node.op == "call_module":
                    qualname_map[f"{name}.{node.target.replace('.', '_')}"] = node.target
        call = base.call_module(name, tuple(env[v] for v in part.inputs))
        outputs = list(part.outputs)
        if len(outputs) == 1:
            env[outputs[0]] = call
        else:
            for i, value in enumerate(outputs):
                env[value] = base.call_function(operator.getitem, (call, i))
    output = next(n for n in graph.nodes if n.op == "output")
    base.output(map_arg(output.args[0], lambda v: env[v]))
    for node in attrs:
        top[node.target] = _fetch(root_m, node.target)
    return GraphModule(top, base)


def _ordered(partitions: dict[str, _Partition], keep_original_order: bool) -> list:
    """Partitions in an order where each comes after those it reads: PyTorch's, a stack of
    the partitions ready to run (the last made ready runs first), or with
    `keep_original_order` the order of their first nodes."""
    if keep_original_order:
        return list(partitions.values())
    waiting = {name: len(part.depends) for name, part in partitions.items()}
    ready = [name for name, n in waiting.items() if n == 0]
    done: list[str] = []
    while ready:
        name = ready.pop()
        done.append(name)
        for dependent in partitions[name].dependents:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                ready.append(dependent)
    if len(done) != len(partitions):
        raise RuntimeError("cycle detected between the partitions of split_module")
    return [partitions[name] for name in done]


def _fetch(root: Any, target: str) -> Any:
    obj = root
    for atom in target.split("."):
        obj = getattr(obj, atom)
    return obj


def _build(part: _Partition, root: Any, keep_original_node_name: bool) -> GraphModule:
    """The submodule of `part`: placeholders for its inputs, its nodes, its outputs."""
    g = part.graph
    for value in part.inputs:
        part.env[value] = g.placeholder(value.name, type_expr=value.type)
    for node in part.nodes:
        target = node.target
        if node.op == "call_module":  # a submodule of the partition's own: `layers_0`
            target = node.target.replace(".", "_")
            part.targets[target] = _fetch(root, node.target)
        args = map_arg(node.args, lambda v: part.env[v])
        kwargs = map_arg(node.kwargs, lambda v: part.env[v])
        # Named after the target in the new graph (`tanh_2` after an input `tanh_1`), as
        # PyTorch's pass names them, unless the original names are to be kept.
        new = g.create_node(node.op, target, args, kwargs,
                            node.name if keep_original_node_name else None, node.type)
        new.meta = dict(node.meta)
        part.env[node] = new
    outputs = [part.env[v] for v in part.outputs]
    g.output(outputs[0] if len(outputs) == 1 else tuple(outputs))
    return GraphModule(dict(part.targets), g)
