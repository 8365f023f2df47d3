"""`export.unflatten`: an exported program rebuilt as the module hierarchy it came from.

Export records, on each node, the submodule calls it was made in (`nn_module_stack`, see
`_trace._module_stack`). `unflatten` groups the flat graph's nodes by those calls into one
graph per submodule: the parent's graph calls the child (`call_module`) with the values the
child reads from outside it, and reads back the values the child made that are used outside
it. Each module of the result is an `InterpreterModule` holding its own parameters and buffers
and running its graph with `fx.Interpreter`; the root, an `UnflattenedModule`, takes and
returns what the exported module did. A module called more than once is refused (each call
would need a graph of its own).
"""

from __future__ import annotations

import operator
from typing import Any

from ..nn.modules.module import Module
from ..nn.parameter import Parameter
from ..utils import _pytree as pytree
from .graph_signature import InputKind


class InterpreterModule(Module):
    """A submodule of an unflattened program: its parameters, buffers and submodules, and the
    graph of its call, run node by node."""

    def __init__(self, graph: Any = None) -> None:
        super().__init__()
        self.graph = graph

    def forward(self, *args: Any) -> Any:
        """Run this module's graph on `args`."""
        from ..fx.interpreter import Interpreter

        if self.graph is None:
            raise RuntimeError("this module was not called by the exported program: it has "
                               "no graph to run")
        return Interpreter(self, graph=self.graph).run(*args)


class UnflattenedModule(InterpreterModule):
    """The root of an unflattened program: called with the exported module's arguments."""

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The exported module's result for these arguments (checked as `module()` checks
        them)."""
        from ..autograd.grad_mode import no_grad
        from .graph_signature import OutputKind

        ep = self._ep
        flat = ep._flat_user_inputs(args, kwargs)
        out = list(super().forward(*flat))
        # A decomposed program returns its buffers' new values first: written into them.
        for spec in ep.graph_signature.output_specs:
            if spec.kind == OutputKind.BUFFER_MUTATION:
                with no_grad():
                    self.get_buffer(spec.target).copy_(out.pop(0))
        return pytree.tree_unflatten(out, ep._out_spec)


class _Scope:
    """One module call: its nodes and child calls in program order."""

    def __init__(self, path: str, parent: _Scope | None) -> None:
        self.path = path
        self.parent = parent
        self.items: list = []  # nodes and child scopes
        self.children: dict = {}
        self.inputs: list = []
        self.outputs: list = []

    def nodes(self):
        """Every node of this call and of the calls inside it."""
        for item in self.items:
            if isinstance(item, _Scope):
                yield from item.nodes()
            else:
                yield item


def _relative(path: str, prefix: str) -> str:
    return path[len(prefix) + 1:] if prefix else path


def _inside(path: str, scope_path: str) -> bool:
    """Whether module `path` is the module `scope_path` or below it."""
    return not scope_path or path == scope_path or path.startswith(scope_path + ".")


def _scopes(graph: Any) -> _Scope:
    """The tree of module calls of `graph`'s nodes (from their `nn_module_stack`)."""
    root = _Scope("", None)
    for node in graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        scope = root
        for key, (path, _) in (node.meta.get("nn_module_stack") or {}).items():
            if not path:
                continue
            if "@" in key.rsplit(".", 1)[-1]:
                raise NotImplementedError(
                    f"unflatten: the module {path!r} is called more than once in the exported "
                    "program")
            child = scope.children.get(path)
            if child is None:
                child = scope.children[path] = _Scope(path, scope)
                scope.items.append(child)
            scope = child
        scope.items.append(node)
    return root


def _owner_path(target: str) -> str:
    return target.rsplit(".", 1)[0] if "." in target else ""


def _plan(scope: _Scope, state: dict, users: dict) -> None:
    """Each call's inputs (values it reads from outside, not state it owns) and outputs
    (values it makes that are read outside it), children first."""
    for item in scope.items:
        if isinstance(item, _Scope):
            _plan(item, state, users)
    inside = {id(n) for n in scope.nodes()}
    seen: set = set()
    for node in scope.nodes():
        for arg in node._input_nodes:
            if id(arg) in inside or id(arg) in seen:
                continue
            target = state.get(arg.name)
            if target is not None and _inside(_owner_path(target), scope.path):
                continue  # its own parameter or buffer (a get_attr inside it)
            seen.add(id(arg))
            scope.inputs.append(arg)
    for node in scope.nodes():
        if any(id(u) not in inside for u in users[node]):
            scope.outputs.append(node)


def _build(scope: _Scope, state: dict, modules: dict, output_node: Any) -> Any:
    """The graph of `scope`'s call (its children's graphs built first)."""
    from ..fx import Graph

    graph = Graph()
    env: dict = {}
    for value in scope.inputs:
        env[value] = graph.placeholder(value.name)
    attrs: dict = {}

    def lookup(n):
        if n in env:
            return env[n]
        target = state.get(n.name)
        if target is None:
            raise RuntimeError(f"unflatten: {n.name} is read in {scope.path or 'the root'} "
                               "before it is made")
        if target not in attrs:
            attrs[target] = graph.get_attr(_relative(target, scope.path))
        return attrs[target]

    for item in scope.items:
        if isinstance(item, _Scope):
            modules[item.path].graph = _build(item, state, modules, None)
            call = graph.call_module(_relative(item.path, scope.path),
                                     tuple(lookup(v) for v in item.inputs))
            if len(item.outputs) == 1:
                env[item.outputs[0]] = call
            else:
                for i, out in enumerate(item.outputs):
                    env[out] = graph.call_function(operator.getitem, (call, i))
        else:
            env[item] = graph.node_copy(item, lookup)
    if output_node is not None:
        graph.node_copy(output_node, lookup)
    elif len(scope.outputs) == 1:
        graph.output(env[scope.outputs[0]])
    else:
        graph.output(tuple(env[o] for o in scope.outputs))
    return graph


def unflatten(module: Any, flat_args_adapter: Any = None) -> UnflattenedModule:
    """`module` (an `ExportedProgram`) as the hierarchy of the module it was exported from:
    each submodule an `InterpreterModule` with its own graph, parameters and buffers."""
    if flat_args_adapter is not None:
        raise NotImplementedError("unflatten: flat_args_adapter is not supported")
    ep = module
    graph = ep.graph
    state = {}
    for spec in ep.graph_signature.input_specs:
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            state[spec.arg.name] = spec.target
    users: dict = {n: list(n.users) for n in graph.nodes}
    root = _scopes(graph)
    _plan(root, state, users)
    root.inputs = [n for n in graph.nodes if n.op == "placeholder" and n.name not in state]
    # A module for every path a parameter/buffer or a call names (and their parents), in
    # the order the original registered them (its state's order, then calls' order).
    order: list = [_owner_path(t) for t in state.values()]
    stack = [root]
    while stack:
        scope = stack.pop(0)
        order.append(scope.path)
        stack.extend(scope.children.values())
    modules: dict = {"": UnflattenedModule()}
    for path in order:
        parts = path.split(".") if path else []
        for i in range(1, len(parts) + 1):
            p = ".".join(parts[:i])
            if p not in modules:
                modules[p] = InterpreterModule()
                modules[_owner_path(p)].add_module(parts[i - 1], modules[p])
    values = {**ep.constants, **ep.state_dict}
    persistent = {s.target: s.persistent for s in ep.graph_signature.input_specs
                  if s.kind == InputKind.BUFFER}
    for spec in ep.graph_signature.input_specs:
        if spec.target is None or spec.kind not in (InputKind.PARAMETER, InputKind.BUFFER,
                                                    InputKind.CONSTANT_TENSOR):
            continue
        owner, name = modules[_owner_path(spec.target)], spec.target.rsplit(".", 1)[-1]
        value = values[spec.target]
        if spec.kind == InputKind.PARAMETER:
            owner.register_parameter(name, value if isinstance(value, Parameter)
                                     else Parameter(value))
        elif spec.kind == InputKind.BUFFER:
            owner.register_buffer(name, value, persistent=persistent.get(spec.target, True))
        else:
            setattr(owner, name, value)
    top = modules[""]
    top.graph = _build(root, state, modules, graph.output_node())
    object.__setattr__(top, "_ep", ep)
    top.train(ep._is_training)
    return top


InterpreterModule.__module__ = "fusegrad.export.unflatten"
UnflattenedModule.__module__ = "fusegrad.export.unflatten"

__all__ = ["InterpreterModule", "UnflattenedModule", "unflatten"]
