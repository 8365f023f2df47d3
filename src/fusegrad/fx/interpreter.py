"""`Interpreter` runs a GraphModule node by node; `Transformer` builds a new graph as it runs.

Subclass and override a per-opcode method (`call_function`, `call_module`, ...) or `run_node`
to observe or change how each node executes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .graph import Graph
from .graph_module import GraphModule
from .node import Node, map_aggregate, map_arg
from .proxy import Proxy, TracerBase


class Interpreter:
    """Execute the graph of `module` one node at a time.

    With `garbage_collect_values`, a value is dropped from the environment after its last use,
    as generated code does."""

    def __init__(self, module: Any, garbage_collect_values: bool = True,
                 graph: Graph | None = None) -> None:
        self.module = module
        self.graph = graph if graph is not None else module.graph
        self.submodules = dict(_named_modules(module))
        self.env: dict[Node, Any] = {}
        self.garbage_collect_values = garbage_collect_values
        self.user_to_last_uses: dict[Node, list[Node]] = {}
        if garbage_collect_values:
            seen: set[Node] = set()
            for node in reversed(self.graph.nodes):
                for inp in node._input_nodes:
                    if inp not in seen:
                        seen.add(inp)
                        self.user_to_last_uses.setdefault(node, []).append(inp)

    def run(self, *args: Any, initial_env: dict[Node, Any] | None = None,
            enable_io_processing: bool = True) -> Any:
        """Run the graph on `args`; returns what the output node returns."""
        self.env = dict(initial_env) if initial_env else {}
        self.args_iter: Iterator[Any] = iter(args)
        for node in self.graph.nodes:
            if node in self.env:
                continue
            try:
                self.env[node] = self.run_node(node)
            except Exception as e:
                e.add_note(f"While executing {node.format_node()}")
                raise
            if self.garbage_collect_values:
                for dead in self.user_to_last_uses.get(node, []):
                    self.env.pop(dead, None)
            if node.op == "output":
                return self.env[node]
        return None

    def boxed_run(self, args_list: list) -> Any:
        """Run the graph on the inputs in `args_list`, which is emptied first (so the caller
        holds no references to them while the graph runs)."""
        args_iter = iter(args_list)
        env = {}
        for n in self.graph.nodes:
            if n.op == "placeholder":
                env[n] = next(args_iter)
        args_list.clear()
        return self.run(initial_env=env)

    def run_node(self, n: Node) -> Any:
        """Run one node: fetch its arguments, then call the method named by its opcode."""
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        return getattr(self, n.op)(n.target, args, kwargs)

    # ------------------------------------------------------------------ opcodes

    def placeholder(self, target: str, args: tuple, kwargs: dict) -> Any:
        """The next positional input (or the parameter's default)."""
        if target.startswith("*"):
            return list(self.args_iter)
        try:
            return next(self.args_iter)
        except StopIteration:
            if args:
                return args[0]
            raise RuntimeError(f"Expected positional argument for parameter {target}, but "
                               "one was not passed in!") from None

    def get_attr(self, target: str, args: tuple, kwargs: dict) -> Any:
        """The module attribute at dotted path `target`."""
        return self.fetch_attr(target)

    def call_function(self, target: Any, args: tuple, kwargs: dict) -> Any:
        """Call `target(*args, **kwargs)`."""
        return target(*args, **kwargs)

    def call_method(self, target: str, args: tuple, kwargs: dict) -> Any:
        """Call method `target` of `args[0]`."""
        self_obj, *rest = args
        return getattr(self_obj, target)(*rest, **kwargs)

    def call_module(self, target: str, args: tuple, kwargs: dict) -> Any:
        """Call the submodule at `target`."""
        return self.fetch_attr(target)(*args, **kwargs)

    def output(self, target: str, args: tuple, kwargs: dict) -> Any:
        """The graph's result."""
        return args[0]

    # ------------------------------------------------------------------ helpers

    def fetch_attr(self, target: str) -> Any:
        """Follow dotted path `target` from the module."""
        obj = self.module
        for i, atom in enumerate(target.split(".")):
            if not hasattr(obj, atom):
                done = ".".join(target.split(".")[:i])
                raise RuntimeError(f"Node referenced nonexistent target {done or 'self'}."
                                   f"{atom}")
            obj = getattr(obj, atom)
        return obj

    def fetch_args_kwargs_from_env(self, n: Node) -> tuple[tuple, dict]:
        """`n`'s arguments with nodes replaced by their computed values."""
        return self.map_nodes_to_values(n.args, n), self.map_nodes_to_values(n.kwargs, n)

    def map_nodes_to_values(self, args: Any, n: Node) -> Any:
        """Replace every Node in `args` by its value in the environment."""
        def load(a: Node) -> Any:
            if a not in self.env:
                raise RuntimeError(f"Node {n} referenced nonexistent value {a}! Run "
                                   "Graph.lint() to diagnose such issues")
            return self.env[a]

        return map_arg(args, load)


class Transformer(Interpreter):
    """Run a graph on Proxies to build a new one; override methods to rewrite nodes."""

    def __init__(self, module: Any) -> None:
        super().__init__(module, garbage_collect_values=False)
        self.new_graph = Graph()
        self.tracer = _TransformerTracer(self.new_graph, module)

    def placeholder(self, target: str, args: tuple, kwargs: dict) -> Proxy:
        """A placeholder of the new graph."""
        default = args if args else ()
        return Proxy(self.new_graph.create_node("placeholder", target, default), self.tracer)

    def get_attr(self, target: str, args: tuple, kwargs: dict) -> Proxy:
        """A get_attr node of the new graph."""
        return self.tracer.create_proxy("get_attr", target, args, kwargs)

    def call_function(self, target: Any, args: tuple, kwargs: dict) -> Proxy:
        """A call_function node of the new graph."""
        return self.tracer.create_proxy("call_function", target, args, kwargs)

    def call_method(self, target: str, args: tuple, kwargs: dict) -> Proxy:
        """A call_method node of the new graph."""
        return self.tracer.create_proxy("call_method", target, args, kwargs)

    def call_module(self, target: str, args: tuple, kwargs: dict) -> Proxy:
        """A call_module node of the new graph."""
        return self.tracer.create_proxy("call_module", target, args, kwargs)

    def run_node(self, n: Node) -> Any:
        """Run `n` and keep its meta on the new node."""
        result = super().run_node(n)
        if isinstance(result, Proxy):
            result.node.meta = dict(n.meta) | result.node.meta
        return result

    def transform(self) -> GraphModule:
        """Build the new graph and return it as a GraphModule over the same module."""
        result = super().run(enable_io_processing=False)
        if result is not None:
            self.new_graph.output(map_aggregate(
                result, lambda a: a.node if isinstance(a, Proxy) else a))
        return GraphModule(self.module, self.new_graph)


class _TransformerTracer(TracerBase):
    def __init__(self, graph: Graph, module: Any) -> None:
        super().__init__()
        self.graph = graph
        self.root = module


def _named_modules(mod: Any):
    from ._module import named_modules

    return named_modules(mod)
