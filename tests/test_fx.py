"""fusegrad.fx against torch.fx: each program is written once, parameterised by `T`.

Tracing must give the same nodes (opcode, name, args, kwargs) as torch.fx, the generated code
must read the same (with `fusegrad.` for `torch.`) and compute the same values.
"""

from __future__ import annotations

import math
import operator
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.fx  # noqa: E402

import fusegrad  # noqa: E402
import fusegrad.fx  # noqa: E402
from fusegrad.fx import Graph, GraphModule, Proxy, TraceError, symbolic_trace  # noqa: E402

MODULES = (fusegrad, torch)
IDS = ("fusegrad", "torch")


def data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def to(T, a):
    return T.tensor(np.array(a))


def numpy(v):
    if isinstance(v, (tuple, list)):
        return [numpy(x) for x in v]
    if hasattr(v, "detach"):
        return np.asarray(v.detach().numpy())
    return v


def assert_same_values(a, b):
    a, b = numpy(a), numpy(b)
    if isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b)
        for x, y in zip(a, b):
            assert_same_values(x, y)
    elif isinstance(a, np.ndarray):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    else:
        assert tuple(a) == tuple(b) if isinstance(a, tuple) else a == b


def target_name(n) -> str:
    t = n.target
    return t if isinstance(t, str) else getattr(t, "__name__", str(t))


def rows(graph):
    """The comparable part of print_tabular's rows: opcode, name, target name, args, kwargs."""
    return [(n.op, n.name, target_name(n), str(n.args), str(n.kwargs)) for n in graph.nodes]


def same_code(fg_code: str, torch_code: str) -> bool:
    """Equal from `def forward` on, with `torch.` spelled `fusegrad.`."""
    def body(code):
        return code[code.index("def forward"):]

    return body(fg_code) == body(torch_code).replace("torch.", "fusegrad.")


# ---------------------------------------------------------------------------- functions

def prog_docs(T, x):
    """The first example of the torch.fx docs, as a function."""
    return T.relu(x + 1.0).clamp(min=0.0, max=1.0)


def prog_mixed(T, x, y):
    a = T.relu(x) + y
    b = a.sum(dim=1, keepdim=True)
    c = T.abs(b) * 2
    d = T.sum(c)
    e = x.abs().abs()
    return d, e[0], T.softmax(a, 1)


def prog_operators(T, x, y):
    x += 1
    a = 2 - x
    b = -a / (y * y + 1)
    c = b ** 2 + 3 * x
    d = (c @ y.t()).sum(0)
    e = x[0:2, None, ...]
    f = ~(x > 0)
    g = abs(x)
    return a, d, e, f, g, x.T, x.shape[1]


def prog_shapes(T, x):
    q, k = x.unbind(0)
    h = T.cat([q, k], dim=0).reshape(-1, 2)
    m = h.mean(0).unsqueeze(0).expand(3, 2)
    s = T.softmax(h, dim=1) + T.log_softmax(h, 1)
    return m, s.permute(1, 0).contiguous().view(-1), T.add(q, k, alpha=2), x.size(0)


def prog_math(T, x):
    return x / math.sqrt(x.size(-1)), T.where(x > 0, x, x * 0.1)


FUNCTIONS = [
    (prog_docs, ((3, 4),)), (prog_mixed, ((3, 4), (3, 4))),
    (prog_operators, ((3, 4), (3, 4))), (prog_shapes, ((2, 3),)), (prog_math, ((3, 4),)),
]


def bind(prog, T):
    """`prog` with `T` bound, as a function of the same name with plain parameters."""
    params = ", ".join(f"a{i}" for i in range(prog.__code__.co_argcount - 1))
    scope = {"prog": prog, "T": T}
    exec(f"def {prog.__name__}({params}):\n    return prog(T, {params})\n", scope)
    fn = scope[prog.__name__]
    return fn


def traced(prog, T):
    mod = T.fx.symbolic_trace(bind(prog, T))
    return mod


@pytest.mark.parametrize("prog,shapes", FUNCTIONS, ids=[p.__name__ for p, _ in FUNCTIONS])
def test_function_nodes_code_and_values_match_torch(prog, shapes):
    ours, theirs = traced(prog, fusegrad), traced(prog, torch)
    assert rows(ours.graph) == rows(theirs.graph)
    assert same_code(ours.code, theirs.code), ours.code + theirs.code
    arrays = [data(*s, seed=i) for i, s in enumerate(shapes)]
    got = ours(*[to(fusegrad, a) for a in arrays])
    want = theirs(*[to(torch, a) for a in arrays])
    eager = prog(fusegrad, *[to(fusegrad, a) for a in arrays])
    assert_same_values(got, want)
    assert_same_values(got, eager)


def test_print_tabular_output(capsys):
    traced(prog_mixed, fusegrad).graph.print_tabular()
    ours = capsys.readouterr().out.splitlines()
    traced(prog_mixed, torch).graph.print_tabular()
    theirs = capsys.readouterr().out.splitlines()
    assert ours[0].split() == ["opcode", "name", "target", "args", "kwargs"]
    assert len(ours) == len(theirs)
    assert [r.split()[:2] for r in ours[2:]] == [r.split()[:2] for r in theirs[2:]]


def test_str_graph_matches_torch():
    ours, theirs = traced(prog_mixed, fusegrad), traced(prog_mixed, torch)
    assert str(ours.graph) == str(theirs.graph).replace("torch.", "fusegrad.")


def test_print_readable_and_code_run():
    gm = traced(prog_docs, fusegrad)
    text = gm.print_readable(print_output=False)
    assert text.startswith("class prog_docs(")
    assert "relu = fusegrad.relu(add);  add = None" in text


def test_protocol_path_for_functions_imported_by_name():
    from fusegrad import relu, sigmoid

    def f(x):
        return sigmoid(relu(x)) + fusegrad.ones(3)

    gm = symbolic_trace(f)
    assert [(n.op, n.name) for n in gm.graph.nodes] == [
        ("placeholder", "x"), ("call_function", "relu"), ("call_function", "sigmoid"),
        ("get_attr", "_tensor_constant0"), ("call_function", "add"), ("output", "output")]
    assert gm.graph.find_nodes(op="call_function", target=fusegrad.relu)
    x = fusegrad.randn(2, 3)
    assert_same_values(gm(x), f(x))


def test_proxy_errors_match_torch():
    for T in MODULES:
        with pytest.raises(Exception, match="control flow") as e1:
            T.fx.symbolic_trace(lambda x: x if x.sum() > 0 else -x)
        assert type(e1.value).__name__ == "TraceError"
        with pytest.raises(Exception, match="cannot be iterated"):
            T.fx.symbolic_trace(lambda x: [a for a in x])
        with pytest.raises(RuntimeError, match="'len' is not supported"):
            T.fx.symbolic_trace(lambda x: len(x))


# ---------------------------------------------------------------------------- modules

_PARAMS: set[int] = set()


class StandInModule:
    """A tiny nn.Module stand-in (used while fusegrad.nn is not importable)."""

    def __init__(self):
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value):
        if isinstance(value, StandInModule):
            self._modules[name] = value
        elif id(value) in _PARAMS:
            self._parameters[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        for store in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__.get(store, {}):
                return self.__dict__[store][name]
        raise AttributeError(name)

    def register_buffer(self, name, t):
        self._buffers[name] = t

    def named_modules(self, memo=None, prefix=""):
        yield prefix, self
        for name, m in self._modules.items():
            yield from m.named_modules(prefix=f"{prefix}.{name}" if prefix else name)

    def named_parameters(self):
        for prefix, m in self.named_modules():
            for name, p in m._parameters.items():
                yield (f"{prefix}.{name}" if prefix else name), p

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)


def _parameter(t):
    t.requires_grad_(True)
    _PARAMS.add(id(t))
    return t


class _Linear(StandInModule):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = _parameter(fusegrad.randn(n_out, n_in))
        self.bias = _parameter(fusegrad.randn(n_out))

    def forward(self, x):
        return x @ self.weight.t() + self.bias


class _ReLU(StandInModule):
    def forward(self, x):
        return fusegrad.relu(x)


class _Sequential(StandInModule):
    def __init__(self, *mods):
        super().__init__()
        for i, m in enumerate(mods):
            setattr(self, str(i), m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class StandInNN:
    Module = StandInModule
    Linear = _Linear
    ReLU = _ReLU
    Sequential = _Sequential

    @staticmethod
    def Parameter(t):  # noqa: N802
        return _parameter(t)


def _fusegrad_nn():
    """fusegrad.nn when it provides what the tests use, else the stand-ins above."""
    try:
        import fusegrad.nn as fnn
    except ImportError:
        return StandInNN
    needed = ("Module", "Parameter", "Linear", "ReLU", "Sequential")
    return fnn if all(hasattr(fnn, n) for n in needed) else StandInNN


def nn_of(T):
    """The nn namespace the module programs are built with."""
    if T is torch:
        return torch.nn
    return _fusegrad_nn()


def make_docs_module(T, nn=None):
    """The MyModule example of the torch.fx docs (a parameter, a Linear, a clamp)."""
    nn = nn or nn_of(T)

    class MyModule(nn.Module):
        def __init__(self):
            super().__init__()
            self.param = nn.Parameter(T.tensor(data(3, 4, seed=1)))
            self.linear = nn.Linear(4, 5)

        def forward(self, x):
            return self.linear(x + self.param).clamp(min=0.0, max=1.0)

    return MyModule()


def make_nested_module(T):
    """Parameters read twice, buffers, a plain tensor attribute, a Sequential, unpacking."""
    nn = nn_of(T)

    class Nested(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(T.tensor(data(3, seed=2)))
            self.register_buffer("buf", T.tensor(data(3, seed=3)))
            self.plain = T.tensor(data(3, seed=4))
            self.sub = nn.Sequential(nn.Linear(3, 4), nn.ReLU())

        def forward(self, x):
            w = self.w
            y = x + self.buf + self.buf + self.plain
            y = self.sub(y * w + w)
            q, k = y.unbind(0)
            return q + k, T.relu(q)

    return Nested()


class LeafTracer:
    """Linear and ReLU are leaves for both libraries (the stand-ins are not library code)."""

    @staticmethod
    def make(T):
        class Tracer(T.fx.Tracer):
            def is_leaf_module(self, m, qualname):
                return type(m).__name__ in ("Linear", "ReLU", "_Linear", "_ReLU")

        return Tracer()


def _copy_weights(src, dst):
    ours = dict(dst.named_parameters())
    for name, p in src.named_parameters():
        with fusegrad.no_grad():
            ours[name].copy_(fusegrad.tensor(p.detach().numpy()))


def trace_module(T, make):
    mod = make(T)
    tracer = LeafTracer.make(T)
    graph = tracer.trace(mod)
    return mod, T.fx.GraphModule(mod, graph, type(mod).__name__)


@pytest.mark.parametrize("make,shape", [(make_docs_module, (3, 4)),
                                        (make_nested_module, (2, 3))],
                         ids=["docs", "nested"])
def test_module_nodes_code_and_values_match_torch(make, shape):
    tmod, theirs = trace_module(torch, make)
    fmod, ours = trace_module(fusegrad, make)
    _copy_weights(tmod, fmod)
    assert rows(ours.graph) == rows(theirs.graph)
    assert same_code(ours.code, theirs.code), ours.code + theirs.code
    x = data(*shape, seed=9)
    assert_same_values(ours(to(fusegrad, x)), theirs(to(torch, x)))
    assert_same_values(ours(to(fusegrad, x)), fmod(to(fusegrad, x)))
    ours.graph.lint()


def test_symbolic_trace_module_traces_through_non_leaves():
    """Modules that are not library layers are traced into (stand-in modules here)."""
    fmod = make_docs_module(fusegrad, StandInNN)
    gm = symbolic_trace(fmod)
    assert type(gm).__name__ == "MyModule"
    assert [(n.op, n.name) for n in gm.graph.nodes] == [
        ("placeholder", "x"), ("get_attr", "param"), ("call_function", "add"),
        ("get_attr", "linear_weight"), ("call_method", "t"), ("call_function", "matmul"),
        ("get_attr", "linear_bias"), ("call_function", "add_1"), ("call_method", "clamp"),
        ("output", "output")]
    x = fusegrad.tensor(data(3, 4, seed=5))
    assert_same_values(gm(x), fmod(x))
    assert gm.linear.weight is fmod.linear.weight


def test_library_layers_are_leaves_by_default():
    fnn = _fusegrad_nn()
    assert fnn is not StandInNN, "fusegrad.nn must provide Linear/ReLU/Sequential"
    got = {}
    for T, nn in ((fusegrad, fnn), (torch, torch.nn)):
        gm = T.fx.symbolic_trace(nn.Sequential(nn.Linear(3, 4), nn.ReLU()))
        got[T] = (rows(gm.graph), gm.code)
        assert [n.op for n in gm.graph.nodes] == ["placeholder", "call_module", "call_module",
                                                  "output"]
    assert got[fusegrad][0] == got[torch][0]
    assert same_code(got[fusegrad][1], got[torch][1])


# ---------------------------------------------------------------------------- graph API

def build_by_hand(T):
    g = T.fx.Graph()
    x = g.placeholder("x")
    y = g.placeholder("y", default_value=2.0)
    names = []
    for cand in ["add", "add", "add_1", "sum", "foo_2", "foo", "foo", "FooBar", "if",
                 "layers.0.conv", "x", "abs_1", "abs", "0", "<lambda>", "None", "print"]:
        names.append(g.create_node("call_method", cand, (x,)).name)
    a = g.call_function(operator.add, (x, y))
    m = g.call_function(operator.mul, (a, a))
    s = g.call_method("sum", (m,), {"dim": 0})
    w = g.get_attr("layer.weight")
    c = g.call_module("layer", (s, w))
    g.output((c, s))
    return g, names


def test_graph_building_names_and_users_match_torch():
    (g1, n1), (g2, n2) = build_by_hand(fusegrad), build_by_hand(torch)
    assert n1 == n2
    assert rows(g1) == rows(g2)
    for a, b in zip(g1.nodes, g2.nodes):
        assert [u.name for u in a.users] == [u.name for u in b.users]
        assert [u.name for u in a.all_input_nodes] == [u.name for u in b.all_input_nodes]
        assert a.format_node() == b.format_node().replace("torch.", "fusegrad.")
    assert str(g1) == str(g2)
    assert len(g1.nodes) == len(g2.nodes)
    assert [n.name for n in reversed(g1.nodes)] == [n.name for n in reversed(g2.nodes)]


def edit_graph(T):
    """inserting_before/after, replace_all_uses_with, replace_input_with, erase, DCE."""
    g = T.fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(T.relu, (x,))
    b = g.call_function(operator.add, (a, 1))
    g.output(b)
    with g.inserting_before(b):
        n = g.call_function(operator.neg, (a,))
    with g.inserting_after(n):
        m = g.call_method("abs", (n,))
    b.replace_input_with(a, m)
    with g.inserting_after(x):
        dead = g.call_function(operator.mul, (x, 3))
    unused = g.call_function(T.sigmoid, (x,))  # appended before the output
    order1 = [n.name for n in g.nodes]
    with pytest.raises(RuntimeError, match="still had 1 users"):
        g.erase_node(a)
    changed = g.eliminate_dead_code()
    g.lint()
    return order1, [n.name for n in g.nodes], changed, dead, unused, str(g)


def test_graph_editing_matches_torch():
    ours, theirs = edit_graph(fusegrad), edit_graph(torch)
    assert ours[:3] == theirs[:3]
    assert ours[5] == theirs[5].replace("torch.", "fusegrad.")


def test_lint_finds_broken_graphs():
    for T in MODULES:
        g = T.fx.Graph()
        x = g.placeholder("x")
        a = g.call_function(operator.neg, (x,))
        b = g.call_function(operator.neg, (a,))
        g.output(b)
        a.args = (b,)  # use before definition
        with pytest.raises(RuntimeError, match="used before it has been defined"):
            g.lint()


def relu_to_sigmoid(T, gm):
    """A rewriting pass: every relu (function or method) becomes a sigmoid."""
    g = gm.graph
    for node in list(g.nodes):
        if (node.op == "call_function" and node.target is T.relu) or \
                (node.op == "call_method" and node.target == "relu"):
            with g.inserting_after(node):
                new = g.call_function(T.sigmoid, node.args, node.kwargs)
            node.replace_all_uses_with(new)
            g.erase_node(node)
    g.lint()
    gm.recompile()
    return gm


def prog_relus(T, x):
    return T.relu(x).relu() * 2 + T.relu(-x)


def test_rewrite_pass_round_trips_through_recompile_and_lint():
    ours = relu_to_sigmoid(fusegrad, traced(prog_relus, fusegrad))
    theirs = relu_to_sigmoid(torch, traced(prog_relus, torch))
    assert rows(ours.graph) == rows(theirs.graph)
    assert same_code(ours.code, theirs.code), ours.code + theirs.code
    assert "relu" not in ours.code
    x = data(3, 4, seed=7)
    want = 2 / (1 + np.exp(-1 / (1 + np.exp(-x)))) + 1 / (1 + np.exp(x))
    assert_same_values(ours(to(fusegrad, x)), theirs(to(torch, x)))
    np.testing.assert_allclose(numpy(ours(to(fusegrad, x))), want, rtol=1e-5)


def test_graph_module_from_dict_root_and_recompile():
    for T in MODULES:
        g = T.fx.Graph()
        x = g.placeholder("x")
        w = g.get_attr("p.w")
        g.output(g.call_function(operator.mul, (x, w)))
        gm = T.fx.GraphModule({"p.w": T.ones(2) * 3}, g)
        assert_same_values(gm(T.ones(2)), [3.0, 3.0])
        out = g.output_node() if hasattr(g, "output_node") else list(g.nodes)[-1]
        with g.inserting_before(out):
            y = g.call_function(operator.add, (out.args[0], 1))
        out.args = (y,)
        gm.recompile()
        assert_same_values(gm(T.ones(2)), [4.0, 4.0])
        assert "add = mul + 1;  mul = None" in gm.code


# ---------------------------------------------------------------------------- interpreters

def neg_relu_interpreter(T):
    """An Interpreter that runs every relu as a negation."""
    class NegRelu(T.fx.Interpreter):
        def call_function(self, target, args, kwargs):
            if target is T.relu:
                return -args[0]
            return super().call_function(target, args, kwargs)

        def call_method(self, target, args, kwargs):
            if target == "relu":
                return -args[0]
            return super().call_method(target, args, kwargs)

    return NegRelu


@pytest.mark.parametrize("T", MODULES, ids=IDS)
def test_interpreter_runs_and_can_be_overridden(T):
    gm = traced(prog_relus, T)
    x = to(T, data(3, 4, seed=1))
    assert_same_values(T.fx.Interpreter(gm).run(x), gm(x))
    out = neg_relu_interpreter(T)(gm).run(x)
    assert_same_values(out, x * 2 + x)


def test_transformer_rewrites_like_torch():
    def transform(T):
        class ReluToSigmoid(T.fx.Transformer):
            def call_function(self, target, args, kwargs):
                if target is T.relu:
                    target = T.sigmoid
                return super().call_function(target, args, kwargs)

        return ReluToSigmoid(traced(prog_relus, T)).transform()

    ours, theirs = transform(fusegrad), transform(torch)
    assert rows(ours.graph) == rows(theirs.graph)
    assert same_code(ours.code, theirs.code)
    x = data(3, 4, seed=2)
    assert_same_values(ours(to(fusegrad, x)), theirs(to(torch, x)))


def test_shape_prop_records_tensor_meta_like_torch():
    from torch.fx.passes.shape_prop import ShapeProp as TorchShapeProp

    from fusegrad.fx.passes.shape_prop import ShapeProp

    ours, theirs = traced(prog_mixed, fusegrad), traced(prog_mixed, torch)
    x, y = data(3, 4), data(3, 4, seed=1)
    out = ShapeProp(ours).propagate(to(fusegrad, x), to(fusegrad, y))
    ref = TorchShapeProp(theirs).propagate(to(torch, x), to(torch, y))
    assert_same_values(out, ref)
    for a, b in zip(ours.graph.nodes, theirs.graph.nodes):
        assert ("tensor_meta" in a.meta) == ("tensor_meta" in b.meta)
        assert "val" not in a.meta and a.meta["type"].__name__ == b.meta["type"].__name__
        if "tensor_meta" not in b.meta or a.op == "output":
            continue
        ma, mb = a.meta["tensor_meta"], b.meta["tensor_meta"]
        assert tuple(ma.shape) == tuple(mb.shape) and str(ma.dtype) == str(mb.dtype)
        assert tuple(ma.stride) == tuple(mb.stride)
        assert str(ma.memory_format) == str(mb.memory_format)


# ---------------------------------------------------------------------------- odds and ends

def test_print_tabular_without_tabulate(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "tabulate", None)
    g = Graph()
    g.output(g.placeholder("x"))
    with pytest.raises(ImportError, match="tabulate"):
        g.print_tabular()


def test_wrap_records_a_call():
    gm = symbolic_trace(_uses_wrapped)
    assert [(n.op, n.name) for n in gm.graph.nodes] == [
        ("placeholder", "x"), ("call_function", "wrapped_helper"),
        ("call_function", "add"), ("output", "output")]
    x = fusegrad.ones(2)
    assert_same_values(gm(x), _uses_wrapped(x))


def wrapped_helper(t):
    return t * 2 if t.sum().item() > 0 else t


fusegrad.fx.wrap("wrapped_helper")


def _uses_wrapped(x):
    return wrapped_helper(x) + 1


def test_values_are_released_after_last_use():
    gm = traced(prog_mixed, fusegrad)
    lines = gm.code.strip().splitlines()
    assert "relu = fusegrad.relu(a0)" in lines[1]
    assert lines[2].endswith("relu = a1 = None")


def test_proxy_repr_and_graph_module_type():
    seen = []

    def f(x):
        seen.append(repr(x))
        return x

    gm = symbolic_trace(f)
    assert seen == ["Proxy(x)"]
    assert isinstance(gm, GraphModule) and isinstance(Proxy, type)
    assert issubclass(TraceError, Exception)


def test_deepcopy_graph_module_runs_independently():
    import copy

    fmod = make_docs_module(fusegrad)
    gm = symbolic_trace(fmod)
    gm2 = copy.deepcopy(gm)
    # as PyTorch's, a copy is a plain GraphModule (the traced class name is not kept)
    assert type(gm2).__name__ == "GraphModule" and type(gm2) is not type(gm)
    assert gm2.code == gm.code and rows(gm2.graph) == rows(gm.graph)
    x = fusegrad.tensor(data(3, 4, seed=6))
    assert_same_values(gm2(x), gm(x))
    relu_to_sigmoid(fusegrad, gm2)
    assert gm2.graph is not gm.graph
    assert [n.name for n in gm.graph.nodes] == [n.name for n in symbolic_trace(fmod).graph.nodes]


def test_interpreter_error_names_the_node():
    def f(x):
        return x.view(7)

    gm = symbolic_trace(f)
    with pytest.raises(RuntimeError) as e:
        fusegrad.fx.Interpreter(gm).run(fusegrad.ones(2, 3))
    assert "While executing %view" in "\n".join(getattr(e.value, "__notes__", []))


def dce_graph(T):
    g = T.fx.Graph()
    x = g.placeholder("x")
    g.call_method("add_", (x, 1))
    g.call_function(T.relu, (x,))
    g.call_function(operator.setitem, (x, 0, 1))
    g.call_function(print, (x,))
    g.call_function(operator.iadd, (x, 1))
    g.get_attr("w")
    g.output(x)
    changed = g.eliminate_dead_code()
    return changed, [n.name for n in g.nodes]


def test_dead_code_elimination_matches_torch():
    assert dce_graph(fusegrad) == dce_graph(torch)


def prog_ops_and_methods(T, x):
    return (x.relu() * 2 + (-x).sigmoid()).sum(dim=1, keepdim=True)[0]


def test_print_tabular_identical_without_library_functions(capsys):
    """With only operators and methods every column is the same text as torch.fx's."""
    traced(prog_ops_and_methods, fusegrad).graph.print_tabular()
    ours = capsys.readouterr().out
    traced(prog_ops_and_methods, torch).graph.print_tabular()
    assert ours == capsys.readouterr().out


@pytest.mark.parametrize("T", MODULES, ids=IDS)
def test_retracing_a_graph_module_gives_the_same_graph(T):
    mod = make_nested_module(T)
    gm = T.fx.GraphModule(mod, LeafTracer.make(T).trace(mod), "Nested")
    again = T.fx.GraphModule(gm, LeafTracer.make(T).trace(gm), "Nested")
    assert [r[:3] for r in rows(again.graph)] == [r[:3] for r in rows(gm.graph)]
    x = to(T, data(2, 3, seed=4))
    assert_same_values(again(x), gm(x))


def build_containers(T):
    g = T.fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(operator.getitem, (x, slice(0, 2)))
    b = g.call_method("to", (g.call_method("view", (x, [2, 6])),), {"dtype": T.float64})
    c = g.call_function(T.cat, ([x, a],), {"dim": 0})
    d = g.call_function(operator.mul, (c, float("inf")))
    g.output({"a": a, "b": [b, d]})
    return g


def test_containers_literals_and_dtypes_print_and_generate_like_torch():
    ours, theirs = build_containers(fusegrad), build_containers(torch)
    assert str(ours) == str(theirs).replace("torch.cat", "fusegrad.cat")
    assert same_code(ours.python_code("self").src, theirs.python_code("self").src)
    gm = GraphModule({}, ours)
    out = gm(fusegrad.ones(3, 4))
    assert out["b"][1].shape == (5, 4) and float(out["b"][1][0, 0]) == math.inf
    assert out["b"][0].dtype == fusegrad.float64 and out["b"][0].shape == (2, 6)


def test_gradients_flow_through_generated_code():
    fmod = make_nested_module(fusegrad)
    gm = symbolic_trace(fmod)
    x = data(2, 3, seed=3)
    grads = []
    for run in (gm, fmod):
        xt = fusegrad.tensor(x, requires_grad=True)
        out = run(xt)
        (out[0].sum() + out[1].sum()).backward()
        grads.append(xt.grad)
    assert_same_values(grads[0], grads[1])


def test_pickle_round_trip_keeps_graph_and_weights():
    import pickle

    fmod = make_nested_module(fusegrad)
    gm = symbolic_trace(fmod)
    gm2 = pickle.loads(pickle.dumps(gm))
    assert type(gm2).__name__ == "GraphModule" and gm2.code == gm.code  # as PyTorch's
    assert rows(gm2.graph) == rows(gm.graph)
    x = fusegrad.tensor(data(2, 3, seed=5))
    assert_same_values(gm2(x), gm(x))
    g = pickle.loads(pickle.dumps(traced(prog_mixed, fusegrad).graph))
    assert str(g) == str(traced(prog_mixed, fusegrad).graph)


def test_has_side_effect_keeps_calls_through_dead_code_elimination():
    def log_value(t):
        return None

    fusegrad.fx.has_side_effect(log_value)
    g = Graph()
    x = g.placeholder("x")
    g.call_function(log_value, (x,))
    g.call_function(operator.neg, (x,))
    g.output(x)
    g.eliminate_dead_code()
    assert [n.name for n in g.nodes] == ["x", "log_value", "output"]
    assert "log_value = test_fx_log_value(x);  log_value = None" in g.python_code("self").src
