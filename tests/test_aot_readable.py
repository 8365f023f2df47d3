"""AOT autograd's graphs as people read them, compared with PyTorch's: the user's stack trace
on every forward and backward node (`print_readable`'s `# File:` comments), `seq_nr` and
`original_aten`, the `aot_graphs` log's layout; and what the compiled call reads each time
(its cache key, the globals a captured graph's functions read), checked against eager."""

from __future__ import annotations

import collections
import logging
import re
import warnings

import numpy as np
import pytest
import torch
from aot_models import compiler_logs

import fusegrad
from fusegrad.compiler.aot.api import aot_module_simplified
from fusegrad.nn.attention.flex_attention import flex_attention

nn_fg = fusegrad.nn


def two_lines(a, b):
    s = a.sin()
    c = a.cos() * b
    return s + c


def make_mlp(lib):
    class MLP(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = lib.nn.Linear(4, 8)
            self.fc2 = lib.nn.Linear(8, 2)

        def forward(self, x):
            h = lib.relu(self.fc1(x))
            return self.fc2(h).sum()

    return MLP()


def _graphs(lib, program: str) -> list:
    """[forward, backward] GraphModules AOT autograd makes of `program` under `lib`."""
    graphs = []

    def record(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    if lib is torch:
        from torch._functorch.aot_autograd import aot_module_simplified as aot
        torch._dynamo.reset()
    else:
        aot = aot_module_simplified

    def backend(gm, example_inputs):
        return aot(gm, example_inputs, fw_compiler=record, bw_compiler=record)

    lib.manual_seed(0)
    if program == "function":
        fn = lib.compile(two_lines, backend=backend)
        out = fn(lib.randn(3, requires_grad=True), lib.randn(3))
    else:
        fn = lib.compile(make_mlp(lib), backend=backend)
        out = fn(lib.randn(3, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (torch's about boxed arguments)
        out.sum().backward()
    assert len(graphs) == 2
    return graphs


@pytest.fixture(scope="module", params=["function", "mlp"])
def both(request):
    return _graphs(fusegrad, request.param), _graphs(torch, request.param)


def _comments(gm) -> list:
    text = gm.print_readable(print_output=False)
    return [line.strip() for line in text.splitlines() if line.strip().startswith("# File:")]


def _op(node) -> str:
    """`aten.sin.default` for a node of either library."""
    return re.sub(r"^(fusegrad|torch)\.ops\.", "", str(node.target)).replace("aten::", "aten.")


def _located(gm) -> collections.Counter:
    """(op, stack-trace summary) of each call node (ops both registries have)."""
    from fusegrad.fx._codegen import stack_trace_summary

    return collections.Counter((_op(n), stack_trace_summary(n.meta.get("stack_trace")))
                               for n in gm.graph.nodes if n.op == "call_function")


def test_forward_graph_comments_are_torchs(both):
    ours, theirs = both
    assert _comments(ours[0]) == _comments(theirs[0])
    assert "No stacktrace" not in ours[0].print_readable(print_output=False)


def test_backward_graph_nodes_carry_the_forward_lines(both):
    """Each backward node is located at the line whose forward op it differentiates (the
    order of the backward's nodes may differ: compared as sets)."""
    ours, theirs = both
    assert set(_comments(ours[1])) == set(_comments(theirs[1]))
    assert "No stacktrace" not in ours[1].print_readable(print_output=False)


def test_function_nodes_located_op_by_op():
    """Node by node for a program whose ops both registries record alike."""
    ours, theirs = _graphs(fusegrad, "function"), _graphs(torch, "function")
    for mine, ref in zip(ours, theirs):
        assert _located(mine) == _located(ref)


def test_seq_nr_links_backward_nodes_to_forward_ones(both):
    """As in torch: forward nodes carry `seq_nr` and `original_aten`; a backward node's
    `seq_nr` is the one of a forward node located at the same line."""
    for fw, bw in both:
        forward = {(n.meta["seq_nr"], n.meta["stack_trace"]) for n in fw.graph.nodes
                   if n.op == "call_function"}
        for n in fw.graph.nodes:
            if n.op == "call_function":
                assert _op(n) == re.sub(r"^(fusegrad|torch)\.ops\.", "",
                                        str(n.meta["original_aten"]))
        backward = [n for n in bw.graph.nodes
                    if n.op == "call_function" and n.meta.get("autograd_backward")]
        assert backward
        for n in backward:
            if n.meta.get("original_aten") is not None and _op(n) != "aten.add.Tensor":
                # (a sum of two gradients keeps the meta of the node that ran last)
                assert (n.meta["seq_nr"], n.meta["stack_trace"]) in forward


def _torch_aot_log() -> list:
    messages = []

    class Collect(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    torch._dynamo.reset()
    torch._logging.set_logs(aot_graphs=True)
    logger = logging.getLogger("torch._functorch._aot_autograd.graph_compile.__aot_graphs")
    handler = Collect()
    logger.addHandler(handler)
    try:
        torch.manual_seed(0)
        fn = torch.compile(two_lines, backend="aot_eager")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(torch.randn(3, requires_grad=True), torch.randn(3)).sum().backward()
    finally:
        logger.removeHandler(handler)
        torch._logging.set_logs()
    return [m for m in messages if m.startswith("TRACED GRAPH")]


def _normalized(message: str) -> str:
    """A logged graph with what names the library or the process taken out: the graph's
    number and file, the op namespace, and the order of the backward's statements."""
    message = re.sub(r"graph \d+ =====", "graph N =====", message)
    message = re.sub(r"=====\n \S+ class", "=====\n FILE class", message)
    return message.replace("torch.", "LIB.").replace("fusegrad.", "LIB.")


def test_aot_graphs_log_is_torchs_readable_layout():
    """`set_logs(aot_graphs=True)`: `TRACED GRAPH`, `===== Forward graph N =====`, the
    file, the readable graph with strides, devices and `# File:` comments, as PyTorch's
    log (the forward graph the same text, the backward the same header and lines)."""
    with compiler_logs(aot_graphs=True) as messages:
        fusegrad.manual_seed(0)
        fn = fusegrad.compile(two_lines, backend="aot_eager")
        fn(fusegrad.randn(3, requires_grad=True), fusegrad.randn(3)).sum().backward()
    ours = [_normalized(m.partition("aot_graphs: ")[2]) for m in messages
            if "aot_graphs: TRACED GRAPH" in m]
    theirs = [_normalized(m) for m in _torch_aot_log()]
    assert len(ours) == len(theirs) == 2
    assert ours[0] == theirs[0]
    # (The backward's statements follow each registry's derivatives: its lines compared.)
    assert ours[1].splitlines()[:4] == theirs[1].splitlines()[:4]
    comments = [{line for line in m.splitlines() if "# File:" in line}
                for m in (ours[1], theirs[1])]
    assert comments[0] == comments[1] and len(comments[0]) == 2


def test_inference_graph_is_logged_as_a_forward_graph():
    with compiler_logs(aot_graphs=True) as messages:
        fn = fusegrad.compile(two_lines, backend="aot_eager")
        a, b = fusegrad.randn(3), fusegrad.randn(3)
        with fusegrad.no_grad():
            got = fn(a, b)
    np.testing.assert_allclose(got.numpy(), two_lines(a, b).numpy(), rtol=1e-6)
    (text,) = [m for m in messages if "TRACED GRAPH" in m]
    assert re.search(r"TRACED GRAPH\n ===== Forward graph \d+ =====\n <eval_with_key>", text)
    assert "# File: " + __file__ + ":26 in two_lines, code: s = a.sin()" in text


# ------------------------------------------------------------------ the cache key


def _traces(fn) -> int:
    return len(fn.compiled.cache)


@pytest.mark.parametrize("case", ["stride", "requires_grad", "same_tensor", "empty", "view"])
def test_cache_key_tells_apart_what_a_trace_depends_on(case):
    """Calls that differ in what a trace holds (layout, requires_grad, aliasing, emptiness,
    being a view) get their own trace; the values and gradients are eager's."""
    def program(x, y):
        x.mul_(2)
        return (x + y).sum()

    gm = fusegrad.fx.symbolic_trace(program)
    base = fusegrad.arange(12.0).reshape(3, 4)
    first = (base.clone(), base.clone() + 1)
    second = {"stride": lambda: (fusegrad.empty_strided((3, 4), (1, 3)).copy_(base),
                                 base.clone()),
              "requires_grad": lambda: (base.clone(), base.clone().requires_grad_()),
              "same_tensor": lambda: (lambda t: (t, t))(base.clone()),
              "empty": lambda: (fusegrad.zeros(0, 4), fusegrad.zeros(0, 4)),
              "view": lambda: (base.clone().reshape(12)[:12].view(3, 4), base.clone())}[case]
    compiled = aot_module_simplified(gm, list(first), fw_compiler=lambda g, e: g.forward)
    for args in (first, second(), second()):
        eager_args = tuple(a.detach().clone().requires_grad_(a.requires_grad) for a in args)
        if args[0] is args[1]:
            eager_args = (eager_args[0], eager_args[0])
        got, want = compiled(*args), program(*eager_args)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy())
        np.testing.assert_allclose(args[0].detach().numpy(), eager_args[0].detach().numpy())
        if args[1].requires_grad:
            got.backward()
            want.backward()
            np.testing.assert_allclose(args[1].grad.numpy(), eager_args[1].grad.numpy())
    assert _traces(compiled) == 2


# ------------------------------------------------------------------ what functions read

BIAS = fusegrad.randn(8, 8)
SCALE = 2.0


def _score_with_bias(score, b, h, q_idx, kv_idx):
    return score + BIAS[q_idx, kv_idx] * SCALE


def _attend(score_mod):
    def f(q, k, v):
        return flex_attention(q, k, v, score_mod=score_mod)
    return f


def _compiled(f):
    made = []

    def backend(gm, example_inputs):
        made.append(aot_module_simplified(gm, example_inputs, fw_compiler=lambda g, e: g.forward))
        return made[-1]

    return fusegrad.compile(f, backend=backend), made


@pytest.fixture()
def qkv():
    fusegrad.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (flex_attention's about running unfused)
        yield tuple(fusegrad.randn(1, 2, 8, 4) for _ in range(3))


def _check(fn, f, qkv):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(fn(*qkv).numpy(), f(*qkv).numpy(), rtol=1e-5, atol=1e-6)


def test_score_mod_reading_a_global_tensor_compiles(qkv):
    """A bias table read by score_mod is an input of the trace, read again on each call:
    a write into it and another table bound to its name are seen; the graph compiles."""
    global BIAS, SCALE
    f = _attend(_score_with_bias)
    fn, made = _compiled(f)
    saved = BIAS, SCALE
    try:
        _check(fn, f, qkv)
        assert made[0].fallback_reason is None
        BIAS.add_(1.0)
        _check(fn, f, qkv)
        BIAS = fusegrad.randn(8, 8)
        _check(fn, f, qkv)
        assert _traces(made[0]) == 1
        SCALE = 5.0  # (a global number: traced again for its value)
        _check(fn, f, qkv)
        BIAS = fusegrad.randn(8, 8, dtype=fusegrad.float64)
        _check(fn, f, qkv)
        assert _traces(made[0]) == 3 and made[0].fallback_reason is None
    finally:
        BIAS, SCALE = saved


def test_score_mod_closure_tensor_and_parameter(qkv):
    """A tensor in a closure cell is read as a global is; one that requires grad makes the
    graph run eagerly (its gradient is outside the trace), with eager's values."""
    def make(table):
        def mod(score, b, h, q_idx, kv_idx):
            return score * table[h]
        return mod

    table = fusegrad.tensor([1.0, 2.0])
    f = _attend(make(table))
    fn, made = _compiled(f)
    _check(fn, f, qkv)
    table.mul_(3.0)
    _check(fn, f, qkv)
    assert made[0].fallback_reason is None
    f = _attend(make(nn_fg.Parameter(fusegrad.tensor([1.0, 2.0]))))
    fn, made = _compiled(f)
    with fusegrad.no_grad():
        _check(fn, f, qkv)
    assert "requires grad" in made[0].fallback_reason
