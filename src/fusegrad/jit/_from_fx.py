"""A traced GraphModule as a script program, so a trace can be saved like a script.

The trace is recorded once more on its example inputs with `make_fx`, which gives a graph of
registry ops only; each becomes an `aten::` node of the `overload` form. A tensor the graph
reads is the traced module's parameter or buffer (read with `prim::GetAttr` from the
module, whose state the program shares) or else a tensor constant of the program.
"""

from __future__ import annotations

from ..fx import Node as FxNode
from ..ops.overloads import OpOverload
from ._ir import Graph, Node, Value
from ._script import Method, Schema, ScriptFunction, Unit, script_module
from ._types import value_type


class _Builder:
    def __init__(self, unit: Unit, graph: Graph, self_value: Value | None, names: dict):
        self.unit = unit
        self.graph = graph
        self.self_value = self_value
        self.names = names  # id(tensor) -> qualified parameter/buffer name
        self.env: dict = {}
        self.consts: dict = {}

    def emit(self, kind: str, inputs: list, out_type: str | None, attrs: dict | None = None,
             hint: str | None = None) -> Value | None:
        node = Node(kind, inputs, attrs)
        if out_type is not None:
            node.outputs.append(self.graph.fresh(hint, out_type, node))
        self.graph.nodes.append(node)
        return node.outputs[0] if node.outputs else None

    def literal(self, value) -> Value:
        import fusegrad

        if isinstance(value, FxNode):
            return self.env[value]
        if isinstance(value, (list, tuple)):
            if all(isinstance(v, (int, float, bool)) for v in value):
                key = ("seq", type(value).__name__, repr(value))
                if key not in self.consts:
                    attrs = {"value": list(value)}
                    if isinstance(value, tuple):
                        attrs["tuple"] = True
                    self.consts[key] = self.emit("prim::Constant", [], value_type(value), attrs)
                return self.consts[key]
            items = [self.literal(v) for v in value]
            kind = "prim::TupleConstruct" if isinstance(value, tuple) else \
                "prim::ListConstruct"
            return self.emit(kind, items, value_type(value))
        if isinstance(value, fusegrad.dtype):
            return self.emit("prim::Constant", [], "ScalarType",
                             {"dtype": str(value).split(".")[-1]})
        if value is None or isinstance(value, (bool, int, float, str)):
            key = (type(value).__name__, repr(value))
            if key not in self.consts:
                attrs = {} if value is None else {"value": value}
                self.consts[key] = self.emit("prim::Constant", [], value_type(value), attrs)
            return self.consts[key]
        raise RuntimeError(f"a traced graph holds a {type(value).__name__} argument, which the "
                           "script format cannot store")

    def tensor(self, t, fallback: str) -> Value:
        qual = self.names.get(id(t))
        if qual is None or self.self_value is None:
            name = f"c{len(self.unit.tensors)}"
            self.unit.tensors[name] = t
            return self.emit("prim::Constant", [], "Tensor", {"tensor": name})
        value = self.self_value
        parts = qual.split(".")
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            value = self.emit("prim::GetAttr", [value], "Tensor" if last else "Any",
                              {"name": part}, hint=part)
        return value

    def call(self, node: FxNode) -> Value:
        target = node.target
        args = [self.literal(a) for a in node.args]
        kwargs = list(node.kwargs)
        args += [self.literal(node.kwargs[k]) for k in kwargs]
        attrs: dict = {"kwargs": kwargs} if kwargs else {}
        if isinstance(target, OpOverload):
            packet = target.__name__
            attrs.update(form="overload", overload=target._overloadname)
            kind = f"aten::{packet}"
        elif getattr(target, "__name__", None) == "getitem":
            attrs["form"] = "operator"
            kind = "aten::__getitem__"
        else:
            raise RuntimeError(f"a traced graph calls {target!r}, which the script format "
                               "cannot store")
        val = node.meta.get("val") if hasattr(node, "meta") else None
        out_type = value_type(val) if val is not None else "Tensor"
        return self.emit(kind, args, out_type, attrs)


def program_from_trace(traced):
    """A ScriptFunction (or ScriptModule, for a traced module) computing what `traced` (a
    GraphModule made by `jit.trace`) does; it shares the trace's parameters."""
    from ..compiler.aot.make_fx import make_fx

    is_module, name, args = traced._jit_trace
    gm = make_fx(traced)(*args)
    unit = Unit()
    graph = Graph()
    names = {}
    self_value = None
    root = None
    if is_module:
        root = script_module(traced, unit, compile_methods=False)
        self_value = graph.fresh("self", root._jit_type)
        graph.params.append(self_value)
        for qual, t in [*traced.named_parameters(), *traced.named_buffers()]:
            names.setdefault(id(t), qual)
    builder = _Builder(unit, graph, self_value, names)
    params = []
    arg_names = iter(n.target for n in traced.graph.nodes if n.op == "placeholder")
    arg_values = iter(args)
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            pname, value = next(arg_names), next(arg_values)
            v = graph.fresh(pname, value_type(value))
            graph.params.append(v)
            params.append((pname, v.type))
            builder.env[node] = v
        elif node.op == "get_attr":
            builder.env[node] = builder.tensor(getattr(gm, node.target), node.target)
        elif node.op == "call_function":
            builder.env[node] = builder.call(node)
        elif node.op == "output":
            out = node.args[0]
            if isinstance(out, (tuple, list)) and not isinstance(out, FxNode):
                result = builder.literal(tuple(out) if isinstance(out, tuple) else out)
            else:
                result = builder.literal(out)
            graph.returns = [result]
    schema = Schema(([("self", "self")] if is_module else []) + params, {},
                    graph.returns[0].type)
    if is_module:
        root._jit_methods["forward"] = Method("forward", graph, schema, unit)
        root.__dict__["original_name"] = name
        return root
    fn = ScriptFunction(name, f"__torch__.{name}", graph, schema, unit)
    unit.functions[fn.qualified_name] = fn
    return fn
