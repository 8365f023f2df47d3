"""The kinds of programs and passes the torch.fx documentation shows, run with both libraries."""

from __future__ import annotations

import operator
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.fx  # noqa: E402
from test_fx import (  # noqa: E402
    IDS,
    MODULES,
    LeafTracer,
    assert_same_values,
    bind,
    data,
    nn_of,
    rows,
    same_code,
    to,
    traced,
)

import fusegrad  # noqa: E402
import fusegrad.fx  # noqa: E402


def prog_tensor_constants(T, x):
    """Operators of a real tensor with a traced operand are recorded as its methods.

    (`t > x` is left out: fusegrad's Tensor comparisons return NotImplemented for foreign
    operands, so Python records the reflected `x < t` instead of torch's `t.gt(x)`.)"""
    t = T.ones(4)
    return t - x, t * x, t / x, t.add(x), T.add(t, x), t + x, x.sum() + t


def prog_add_chain(T, x, y):
    return T.add(x, y) + T.add(y, 1.0)


def test_tensor_constants_match_torch():
    ours, theirs = traced(prog_tensor_constants, fusegrad), traced(prog_tensor_constants, torch)
    assert rows(ours.graph) == rows(theirs.graph)
    assert same_code(ours.code, theirs.code)
    x = data(3, 4)
    assert_same_values(ours(to(fusegrad, x)), theirs(to(torch, x)))


@pytest.mark.parametrize("T", MODULES, ids=IDS)
def test_direct_graph_manipulation_retargets_nodes(T):
    """The docs' first transform: every call of `add` becomes a call of `mul`."""
    gm = traced(prog_add_chain, T)
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is T.add:
            node.target = T.mul
    gm.graph.lint()
    gm.recompile()
    x, y = to(T, data(2, 3)), to(T, data(2, 3, seed=1))
    assert_same_values(gm(x, y), x * y + y * 1.0)


def decompose(T, gm):
    """Rewrite with Proxies appended to a new graph: relu(x) becomes (x > 0) * x."""
    fx = T.fx
    rules = {T.relu: lambda x: (x > 0) * x}
    new_graph = fx.Graph()
    tracer = fx.proxy.GraphAppendingTracer(new_graph)
    env = {}
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in rules:
            args = [fx.Proxy(env[a.name], tracer) if isinstance(a, fx.Node) else a
                    for a in node.args]
            env[node.name] = rules[node.target](*args).node
        else:
            env[node.name] = new_graph.node_copy(node, lambda n: env[n.name])
    return fx.GraphModule(gm, new_graph)


def prog_relu_sum(T, x):
    return T.relu(x).sum(1) + T.relu(x * 2).sum(1)


def test_proxy_decomposition_matches_torch():
    ours = decompose(fusegrad, traced(prog_relu_sum, fusegrad))
    theirs = decompose(torch, traced(prog_relu_sum, torch))
    assert rows(ours.graph) == rows(theirs.graph)
    assert same_code(ours.code, theirs.code)
    x = data(3, 4)
    assert_same_values(ours(to(fusegrad, x)), theirs(to(torch, x)))


def swap_transformer(T):
    """The docs' Transformer: sigmoid and neg trade places."""
    class NegSigmSwap(T.fx.Transformer):
        def call_function(self, target, args, kwargs):
            if target is T.sigmoid:
                return T.neg(*args, **kwargs)
            return super().call_function(target, args, kwargs)

        def call_method(self, target, args, kwargs):
            if target == "neg":
                self_obj, *rest = args
                return self_obj.sigmoid(*rest, **kwargs)
            return super().call_method(target, args, kwargs)

    return NegSigmSwap


def prog_sigm_neg(T, x):
    return T.sigmoid(x).neg()


def test_transformer_with_proxy_ops_matches_torch():
    ours = swap_transformer(fusegrad)(traced(prog_sigm_neg, fusegrad)).transform()
    theirs = swap_transformer(torch)(traced(prog_sigm_neg, torch)).transform()
    assert rows(ours.graph) == rows(theirs.graph)
    assert same_code(ours.code, theirs.code)
    x = data(3, 4)
    assert_same_values(ours(to(fusegrad, x)), theirs(to(torch, x)))


def make_topk_like(T):
    """The docs' module that reads a submodule's parameter inside forward."""
    nn = nn_of(T)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.param = nn.Parameter(T.tensor(data(3, 4, seed=3)))
            self.linear = nn.Linear(4, 5)

        def forward(self, x):
            h = self.linear(x + self.linear.weight.sum(0) + self.param)
            return T.sum(h.relu(), dim=-1).amax(0)

    return M()


def test_submodule_parameter_reads_match_torch():
    mods, gms = {}, {}
    for T in MODULES:
        mods[T] = make_topk_like(T)
        gms[T] = T.fx.GraphModule(mods[T], LeafTracer.make(T).trace(mods[T]), "M")
    for name, p in mods[torch].named_parameters():
        ours = dict(mods[fusegrad].named_parameters())[name]
        with fusegrad.no_grad():
            ours.copy_(fusegrad.tensor(p.detach().numpy()))
    assert rows(gms[fusegrad].graph) == rows(gms[torch].graph)
    assert same_code(gms[fusegrad].code, gms[torch].code)
    x = data(3, 4, seed=8)
    assert_same_values(gms[fusegrad](to(fusegrad, x)), gms[torch](to(torch, x)))


@pytest.mark.parametrize("T", MODULES, ids=IDS)
def test_replace_all_uses_with_filter_and_meta(T):
    g = T.fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(operator.neg, (x,))
    b = g.call_function(operator.add, (a, a))
    c = g.call_function(operator.mul, (a, 2))
    g.output((b, c))
    a.meta["note"] = 1
    with g.inserting_after(a):
        r = g.call_function(operator.pos, (x,))
    changed = a.replace_all_uses_with(r, delete_user_cb=lambda u: u is b, propagate_meta=True)
    assert changed == [b]
    assert b.args == (r, r) and c.args == (a, 2)
    assert list(a.users) == [c] and list(r.users) == [b]
    assert r.meta["note"] == 1
    g.lint()


@pytest.mark.parametrize("T", MODULES, ids=IDS)
def test_counting_interpreter(T):
    """An Interpreter subclass that counts the nodes it runs, per opcode."""
    counts: dict[str, int] = {}

    class Counting(T.fx.Interpreter):
        def run_node(self, n):
            counts[n.op] = counts.get(n.op, 0) + 1
            return super().run_node(n)

    gm = traced(prog_relu_sum, T)
    x = to(T, data(2, 5))
    assert_same_values(Counting(gm).run(x), gm(x))
    assert counts == {"placeholder": 1, "call_function": 4, "call_method": 2, "output": 1}


def test_shape_prop_on_module_with_leaves_runs_real_tensors():
    from fusegrad.fx.passes.shape_prop import ShapeProp

    mod = make_topk_like(fusegrad)
    gm = fusegrad.fx.GraphModule(mod, LeafTracer.make(fusegrad).trace(mod), "M")
    x = to(fusegrad, data(3, 4))
    out = ShapeProp(gm).propagate(x)
    # as PyTorch's: without a fake mode the graph runs on the real inputs
    assert type(out) is fusegrad.Tensor and tuple(out.shape) == ()
    assert_same_values(out, gm(x))
    shapes = {n.name: tuple(n.meta["tensor_meta"].shape) for n in gm.graph.nodes
              if isinstance(n.meta.get("tensor_meta"), tuple)
              and hasattr(n.meta["tensor_meta"], "shape")}
    assert shapes["linear"] == (3, 5) and shapes["sum_2"] == (3,)
    assert all("val" not in n.meta for n in gm.graph.nodes)
    assert np.all([n.meta["type"] is not None for n in gm.graph.nodes])


def prog_functional(T, x):
    F = T.nn.functional
    return F.relu(x) + T.relu(x * 2).relu() - F.sigmoid(x)


def relu_to_gelu(T, gm):
    """The issue's pass: every relu (function, nn.functional or method) becomes a gelu."""
    F = T.nn.functional
    g = gm.graph
    for node in list(g.nodes):
        fn = node.op == "call_function" and node.target in (T.relu, F.relu)
        if fn or (node.op == "call_method" and node.target == "relu"):
            with g.inserting_before(node):
                new = g.call_function(F.gelu, node.args[:1])
            node.replace_all_uses_with(new)
            g.erase_node(node)
    g.lint()
    gm.recompile()
    return gm


def test_relu_to_gelu_pass_matches_torch():
    def short(gm):
        # torch's Python-level nn.functional functions re-pass their defaults as kwargs
        # (`relu(x, inplace = False)`); fusegrad records the call as written.
        return [r[:4] for r in rows(gm.graph)]

    before = {T: traced(prog_functional, T) for T in MODULES}
    assert short(before[fusegrad]) == short(before[torch])
    after = {T: relu_to_gelu(T, before[T]) for T in MODULES}
    assert short(after[fusegrad]) == short(after[torch])
    assert "gelu = fusegrad.nn.functional.gelu(a0)" in after[fusegrad].code
    assert "relu" not in after[fusegrad].code
    x = data(3, 4)
    assert_same_values(after[fusegrad](to(fusegrad, x)), after[torch](to(torch, x)))


def node_moves(T):
    g = T.fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(operator.neg, (x,))
    b = g.call_function(operator.pos, (x,))
    c = g.call_function(operator.add, (a, b))
    g.output(c)
    a.prepend(b)                      # b before a
    c.update_arg(1, x)
    c.insert_arg(2, 5)
    order = [n.name for n in g.nodes]
    links = (a.prev.name, a.next.name, list(b.users), c.args, x.next.name)
    found = [n.name for n in g.find_nodes(op="call_function", target=operator.add)]
    return order, str(links), found


def test_node_moves_and_argument_updates_match_torch():
    assert node_moves(fusegrad) == node_moves(torch)


def make_container(T):
    nn = nn_of(T)

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 3)
            self.b = nn.Linear(3, 3)

        def forward(self, x):
            return self.a(x)

    return Holder()


@pytest.mark.parametrize("T", MODULES, ids=IDS)
def test_submodule_management(T):
    mod = make_container(T)
    gm = T.fx.GraphModule(mod, LeafTracer.make(T).trace(mod))
    assert not hasattr(gm, "b")
    assert gm.add_submodule("extra.inner", T.nn.Identity() if hasattr(T.nn, "Identity")
                            else make_container(T))
    assert hasattr(gm.extra, "inner")
    gm.delete_all_unused_submodules()
    assert not hasattr(gm, "extra") or not hasattr(gm.extra, "inner")
    assert hasattr(gm, "a")
    assert gm.delete_submodule("a") and not hasattr(gm, "a")


def make_aliased(T):
    """A submodule reached under two names, a helper method, a keyword-only input."""
    nn = nn_of(T)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.alias = self.lin

        def helper(self, x, *, scale=2.0):
            return self.lin(x) * scale

        def forward(self, x, *, scale=3.0):
            return self.helper(self.alias(x), scale=scale), self.lin.weight.shape

    return M()


def test_aliased_submodule_and_keyword_only_input_match_torch():
    gms = {T: T.fx.GraphModule(m, LeafTracer.make(T).trace(m), "M")
           for T, m in ((T, make_aliased(T)) for T in MODULES)}
    assert rows(gms[fusegrad].graph) == rows(gms[torch].graph)
    assert same_code(gms[fusegrad].code, gms[torch].code)
    out = gms[fusegrad](fusegrad.ones(2, 3), scale=1.0)
    assert tuple(out[0].shape) == (2, 3) and tuple(out[1]) == (3, 3)


def prog_patterns(T, x, y):
    a = (x + y).relu()
    b = (a + x).relu()
    c = (b + 1).relu()
    d = x + y
    z = x * 3
    return a * b + c + d.relu() + d + (z - 1)


def rewrite_patterns(T):
    def pattern(u, v):
        return (u + v).relu()

    def replacement(u, v):
        return T.sigmoid(u) * v

    gm = traced(prog_patterns, T)
    matches = T.fx.replace_pattern(gm, pattern, replacement)
    described = [(m.anchor.name, {k.name: getattr(v, "name", v) for k, v in m.nodes_map.items()})
                 for m in matches]
    return gm, described


def test_replace_pattern_matches_torch():
    (ours, m1), (theirs, m2) = rewrite_patterns(fusegrad), rewrite_patterns(torch)
    assert m1 == m2 and len(m1) == 3  # `d.relu()` is not replaced: `d` is also used alone
    assert rows(ours.graph) == rows(theirs.graph)
    assert same_code(ours.code, theirs.code)
    ours.graph.lint()
    x, y = data(3, 4), data(3, 4, seed=1)
    assert_same_values(ours(to(fusegrad, x), to(fusegrad, y)), theirs(to(torch, x), to(torch, y)))


def prog_flags(T, x, flag=False, z=None, n=3):
    return x * 2 if flag else x


def test_concrete_args_specialise_and_guard_like_torch():
    got = {}
    for T in MODULES:
        gm = T.fx.symbolic_trace(bind(prog_flags, T),
                                 concrete_args={"a1": True, "a2": None, "a3": 4})
        got[T] = gm
        x = to(T, data(2))
        assert_same_values(gm(x, True, None, 4), x * 2)
        with pytest.raises(AssertionError, match="a1 has been specialized to have value True"):
            gm(x, False, None, 4)
    assert rows(got[fusegrad].graph) == rows(got[torch].graph)


@pytest.mark.parametrize("T", MODULES, ids=IDS)
def test_erasing_while_iterating(T):
    g = T.fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(operator.neg, (x,))
    b = g.call_function(operator.neg, (x,))
    g.call_function(operator.neg, (x,))
    g.output(x)
    for n in g.nodes:
        if n is a:
            g.erase_node(b)  # the node after the current one
    assert [n.name for n in g.nodes] == ["x", "neg", "neg_2", "output"]
    for n in g.nodes:
        if n.op == "call_function":
            g.erase_node(n)
    assert [n.name for n in g.nodes] == ["x", "output"]
    g.lint()
