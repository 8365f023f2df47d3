"""A traced GraphModule as a script program, so a trace can be saved like a script.

The trace is recorded once more on its example inputs with `make_fx`, which gives a graph of
registry ops only; each becomes an `aten::` node of the `overload` form. A tensor the graph
reads is the traced module's parameter or buffer (read with `prim::GetAttr` from the
module, whose state the program shares) or else a tensor constant of the program.
"""

from __future__ import annotations

import warnings

from ..fx import Node as FxNode
from ..ops.overloads import OpOverload
from ._ir import Block, Graph, Node, Value
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
        if isinstance(value, slice):
            parts = [self.literal(v) for v in (value.start, value.stop, value.step)]
            return self.emit("prim::SliceConstruct", parts, "Any")
        if isinstance(value, fusegrad.dtype):
            return self.emit("prim::Constant", [], "ScalarType",
                             {"dtype": str(value).split(".")[-1]})
        if isinstance(value, type(fusegrad.contiguous_format)):  # `x.contiguous()`'s
            return self.emit("prim::Constant", [], "MemoryFormat",
                             {"memory_format": str(value).split(".")[-1]})
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


class _Unsupported(Exception):
    """The trace's own graph holds something the script format cannot say directly."""


def program_from_trace(traced, inline: bool = False):
    """A ScriptFunction (or ScriptModule, for a traced module) computing what `traced` (a
    GraphModule made by `jit.trace`) does; it shares the trace's parameters.

    A symbolic trace is converted node by node, so sizes read from the inputs stay dynamic
    (as in PyTorch's saved traces). Otherwise the trace is recorded again with `make_fx`,
    which fixes every size to the example's: that program checks its inputs' shapes and
    raises on others rather than compute wrong values. With `inline`, the recording is
    used for a symbolic trace too (its submodules' calls become their operations)."""
    if len(traced._jit_trace) > 3 and traced._jit_trace[3] and not inline:
        try:
            return _program_from_graph(traced)
        except _Unsupported:
            pass
    return _program_from_make_fx(traced)


def _start(traced, is_module: bool):
    unit = Unit()
    graph = Graph()
    names: dict = {}
    self_value = None
    root = None
    if is_module:
        root = script_module(traced, unit, compile_methods=False)
        self_value = graph.fresh("self", root._jit_type)
        graph.params.append(self_value)
        for qual, t in [*traced.named_parameters(), *traced.named_buffers()]:
            names.setdefault(id(t), qual)
    return unit, graph, root, _Builder(unit, graph, self_value, names)


def _finish(unit, graph, root, name: str, is_module: bool, params: list):
    schema = Schema(([("self", "self")] if is_module else []) + params, {},
                    graph.returns[0].type)
    if is_module:
        root._jit_methods["forward"] = Method("forward", graph, schema, unit)
        root.__dict__["original_name"] = name
        return root
    fn = ScriptFunction(name, f"__torch__.{name}", graph, schema, unit)
    unit.functions[fn.qualified_name] = fn
    return fn


def _values(traced, args) -> dict:
    """Each node's value on the example inputs (their script types come from them)."""
    from ..fx import Interpreter

    values: dict = {}

    class _Recorder(Interpreter):
        def run_node(self, n):
            values[n] = result = super().run_node(n)
            return result

    _Recorder(traced, garbage_collect_values=False).run(*args)
    return values


def _function_form(fn) -> tuple[str, str] | None:
    """(name, form) naming fusegrad function `fn` as the interpreter resolves it."""
    import builtins

    import fusegrad

    from ._interpreter import OPERATORS

    name = getattr(fn, "__name__", None)
    if not isinstance(name, str):
        return None
    for key, op in OPERATORS.items():
        if op is fn and fn is not builtins.getattr:
            return key, "operator"
    if getattr(fusegrad, name, None) is fn:
        return name, "function"
    if getattr(fusegrad.nn.functional, name, None) is fn:
        return name, "functional"
    return None


def _program_from_graph(traced):
    import builtins

    from ._expressions import TENSOR_PROPERTIES
    from ._interpreter import resolve

    is_module, name, args = traced._jit_trace[:3]
    nodes = list(traced.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    if len(placeholders) != len(args) or any(n.target.startswith("*") for n in placeholders):
        raise _Unsupported
    try:
        values = _values(traced, args)
    except Exception as e:
        raise _Unsupported from e
    unit, graph, root, builder = _start(traced, is_module)
    params = []

    def out_type(node) -> str:
        return value_type(values[node])

    def aten(node, op_name: str, form: str, inputs: list, kwargs: dict) -> Value:
        attrs: dict = {"form": form}
        if kwargs:
            attrs["kwargs"] = list(kwargs)
        if resolve(f"aten::{op_name}", attrs) is None:
            raise _Unsupported
        ins = [builder.literal(a) for a in inputs] + [builder.literal(v)
                                                       for v in kwargs.values()]
        return builder.emit(f"aten::{op_name}", ins, out_type(node), attrs, hint=node.name)

    try:
        for node in nodes:
            if node.op == "placeholder":
                v = graph.fresh(node.target, value_type(values[node]))
                graph.params.append(v)
                params.append((node.target, v.type))
                builder.env[node] = v
            elif node.op == "get_attr":
                value = values[node]
                if not isinstance(value, fusegrad_tensor()):
                    raise _Unsupported
                builder.env[node] = builder.tensor(value, node.target)
            elif node.op == "call_module":
                if root is None or node.kwargs:
                    raise _Unsupported
                obj, sub = builder.self_value, root
                for part in node.target.split("."):
                    sub = sub._modules[part]
                    obj = builder.emit("prim::GetAttr", [obj], sub._jit_type, {"name": part},
                                       hint=part)
                method = sub._jit_methods.get("forward") or sub._compile_method("forward")
                if method is None:
                    raise _Unsupported
                ins = [obj] + [builder.literal(a) for a in node.args]
                builder.env[node] = builder.emit("prim::CallMethod", ins, out_type(node),
                                                 {"name": "forward"})
            elif node.op == "call_method":
                builder.env[node] = aten(node, node.target, "method", list(node.args),
                                         node.kwargs)
            elif node.op == "call_function":
                target = node.target
                if target is builtins.getattr and len(node.args) == 2 and not node.kwargs:
                    attr = node.args[1]
                    if attr in ("shape", "ndim"):
                        op_name = "size" if attr == "shape" else "dim"
                        builder.env[node] = aten(node, op_name, "method", [node.args[0]], {})
                    elif attr in TENSOR_PROPERTIES:
                        builder.env[node] = aten(node, attr, "attribute", [node.args[0]], {})
                    else:
                        raise _Unsupported
                    continue
                form = _function_form(target)
                if form is None:
                    raise _Unsupported
                builder.env[node] = aten(node, form[0], form[1], list(node.args),
                                         node.kwargs)
            elif node.op == "output":
                graph.returns = [_returned(builder, node.args[0])]
    except _Unsupported:
        raise
    except Exception as e:  # a leaf module that does not script, an argument kind, ...
        raise _Unsupported from e
    return _finish(unit, graph, root, name, is_module, params)


def fusegrad_tensor():
    """The Tensor class (imported late: fusegrad imports this package while starting)."""
    from .._tensor import Tensor

    return Tensor


def _shape_guard(builder: _Builder, value: Value, example) -> None:
    """Raise when a tensor input's shape differs from the example's (sizes are constants
    in a program recorded with make_fx)."""
    size = builder.emit("aten::size", [value], "List[int]", {"form": "method"})
    expected = builder.emit("prim::Constant", [], "Tuple[int]",
                            {"value": list(example.shape), "tuple": True})
    ok = builder.emit("aten::eq", [size, expected], "bool", {"form": "operator"})
    node = Node("prim::If", [ok])
    node.blocks += [Block(), Block()]
    message = ("the traced program was specialised to an input of shape "
               f"{list(example.shape)} (its sizes are constants) and cannot run on other "
               "shapes; trace it again with an example of the shape you need")
    msg = builder.emit("prim::Constant", [], "str", {"value": message})
    node.blocks[1].nodes.append(Node("prim::RaiseException", [msg],
                                     {"exception": "RuntimeError"}))
    builder.graph.nodes.append(node)


def _grown(t, dim: int):
    """`t` one larger along `dim` (edge values repeated, so branches on values likely go
    the same way)."""
    import numpy as np

    import fusegrad

    data = t.detach().numpy()
    pad = [(0, 1) if d == dim else (0, 0) for d in range(data.ndim)]
    return fusegrad.tensor(np.pad(data, pad, mode="edge"), dtype=t.dtype)


def _graph_signature(gm) -> list:
    index = {n: i for i, n in enumerate(gm.graph.nodes)}
    from ..fx import map_arg

    def key(a):
        return map_arg(a, lambda n: ("node", index[n]))

    return [(n.op, str(n.target), repr(key(n.args)), repr(key(n.kwargs)))
            for n in gm.graph.nodes if n.op != "get_attr"]


def _shape_generic(traced, args, gm) -> bool:
    """Whether the make_fx recording holds no size of the example inputs: recorded again
    with each input one larger along each dimension in turn, it must come out the same (a
    size that cannot change, as a layer's feature size, fails there and is skipped). The
    module's buffers and the random state are put back afterwards."""
    import fusegrad

    from ..compiler.aot.make_fx import make_fx

    tensor = fusegrad_tensor()
    buffers = [(b, b.detach().clone()) for b in traced.buffers()] \
        if hasattr(traced, "buffers") else []
    rng = fusegrad.get_rng_state()
    expected = _graph_signature(gm)
    try:
        for i, a in enumerate(args):
            if not isinstance(a, tensor):
                continue
            for dim in range(a.dim()):
                bigger = list(args)
                bigger[i] = _grown(a, dim)
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # the first recording warned
                        again = make_fx(traced)(*bigger)
                except Exception:
                    continue
                if _graph_signature(again) != expected:
                    return False
    finally:
        fusegrad.set_rng_state(rng)
        with fusegrad.no_grad():
            for b, saved in buffers:
                b.copy_(saved)
    return True


def _program_from_make_fx(traced):
    from ..compiler.aot.make_fx import make_fx

    is_module, name, args = traced._jit_trace[:3]
    gm = make_fx(traced)(*args)
    generic = _shape_generic(traced, args, gm)
    unit, graph, root, builder = _start(traced, is_module)
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
            if isinstance(value, fusegrad_tensor()) and not generic:
                _shape_guard(builder, v, value)
        elif node.op == "get_attr":
            builder.env[node] = builder.tensor(getattr(gm, node.target), node.target)
        elif node.op == "call_function":
            builder.env[node] = builder.call(node)
        elif node.op == "output":
            graph.returns = [_returned(builder, node.args[0])]
    return _finish(unit, graph, root, name, is_module, params)


def _returned(builder, out):
    """The graph value an FX output node's argument becomes (a tuple or list of values is
    one literal tuple or list)."""
    if isinstance(out, (tuple, list)) and not isinstance(out, FxNode):
        return builder.literal(tuple(out) if isinstance(out, tuple) else out)
    return builder.literal(out)


def inlined_graph(module):
    """`module.inlined_graph`: for a traced module, the program recorded op by op (calls of
    submodules inlined into `aten::` operations); for a scripted one, its `forward` graph
    (calls of submodules' methods stay calls)."""
    engine = module.__dict__.get("_jit_engine")
    if engine is not None and "_jit_trace" in engine.__dict__:
        return _program_from_make_fx(engine)._forward().graph
    return module._jit_program()._forward().graph
