"""`min_cut_rematerialization_partition`: fewer bytes saved than the default partition on
pointwise-heavy blocks, with eager's values and gradients; only cheap ops are recomputed;
a view is never saved beside its base; without networkx the default partition is used and
that is logged once."""

from __future__ import annotations

import copy
import sys
from collections import Counter

import numpy as np
import pytest
from aot_models import MODELS, compiler_logs

import fusegrad
from fusegrad._functorch.aot_autograd import aot_function, aot_module_simplified
from fusegrad._functorch.partitioners import (
    default_partition,
    min_cut_rematerialization_partition,
)
from fusegrad.compiler.aot import mincut

nn = fusegrad.nn
F = nn.functional


class GeluMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 64), nn.Linear(64, 16)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class LayerNormBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(16)
        self.mlp = GeluMLP()

    def forward(self, x):
        return x + self.mlp(self.ln(x)).tanh() * 0.5


def _saved_bytes(bw) -> int:
    return sum(n.meta["val"].numel() * n.meta["val"].element_size() for n in bw.graph.nodes
               if n.op == "placeholder" and not n.name.startswith("tangents"))


def _compile(model, x, partition):
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = aot_module_simplified(model, [x], keep, keep, partition_fn=partition)
    return compiled, graphs


def _run(model, partition, seed=0):
    """(saved bytes, forward graph, backward graph), checking values and gradients against
    eager on a copy of `model`."""
    model.train()
    eager = copy.deepcopy(model)
    x = np.random.default_rng(seed).standard_normal((8, 16)).astype(np.float32)
    xc, xe = (fusegrad.tensor(x, requires_grad=True) for _ in range(2))
    compiled, graphs = _compile(model, xc, partition)
    out, ref = compiled(xc), eager(xe)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-6,
                               atol=1e-6)
    out.pow(2).sum().backward()
    ref.pow(2).sum().backward()
    assert compiled.fallback_reason is None
    pairs = [(xc, xe)] + list(zip(model.parameters(), eager.parameters()))
    for a, b in pairs:
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)
    return _saved_bytes(graphs[1]), graphs[0], graphs[1]


@pytest.mark.parametrize("block", [GeluMLP, LayerNormBlock], ids=["gelu_mlp", "layer_norm"])
def test_min_cut_saves_fewer_bytes_than_default(block):
    fusegrad.manual_seed(0)
    model = block()
    default, _, bw_default = _run(copy.deepcopy(model), default_partition)
    mincut_bytes, _, bw_mincut = _run(model, min_cut_rematerialization_partition)
    assert mincut_bytes < default, (mincut_bytes, default)
    # What it recomputes instead is cheap: the backward's extra ops are pointwise or views.
    extra = Counter(_targets(bw_mincut)) - Counter(_targets(bw_default))
    assert extra, "nothing was recomputed"
    assert all(t.partition(".")[0] in mincut.RECOMPUTABLE or _is_view(t) for t in extra), extra


def _targets(gm) -> list:
    return [n.target.op.name for n in gm.graph.nodes
            if n.op == "call_function" and hasattr(n.target, "op")]


def _is_view(name: str) -> bool:
    return fusegrad.ops.REGISTRY[name].view


@pytest.mark.parametrize("name", list(MODELS))
def test_min_cut_keeps_zoo_blocks_equal_to_eager(name):
    build, shape = MODELS[name]
    model = build(fusegrad).train()
    eager = copy.deepcopy(model)
    x = fusegrad.tensor(np.random.default_rng(1).standard_normal(shape).astype(np.float32))
    compiled, graphs = _compile(model, x, min_cut_rematerialization_partition)
    out, ref = compiled(x)[0], eager(x)[0]
    out.sum().backward()
    ref.sum().backward()
    assert compiled.fallback_reason is None
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-6,
                               atol=1e-6)
    for (k, p), q in zip(model.named_parameters(), eager.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-5,
                                   err_msg=k)
    for (k, b), c in zip(model.named_buffers(), eager.buffers()):
        np.testing.assert_allclose(b.numpy(), c.numpy(), rtol=1e-6, atol=1e-6, err_msg=k)
    # Convolutions, normalisation layers and pooling run once, in the forward (the backward's
    # matmuls and convolutions are the gradients' own).
    forward_only = {"native_batch_norm", "max_pool2d_with_indices", "addmm"}
    assert not forward_only & {t.partition(".")[0] for t in _targets(graphs[1])}

def test_random_and_heavy_ops_are_never_recomputed():
    def f(x, w):
        h = (x @ w).sin()
        d = F.dropout(h, 0.5, training=True)
        return (d * 2).exp().sum(1).cos()

    x = fusegrad.randn(4, 8, requires_grad=True)
    w = fusegrad.randn(8, 8, requires_grad=True)
    graphs = []
    compiled = aot_function(f, lambda gm, ex: graphs.append(gm) or gm.forward,
                            partition_fn=min_cut_rematerialization_partition)
    fusegrad.manual_seed(5)
    out = compiled(x, w)
    out.sum().backward()
    gx, gw = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    fusegrad.manual_seed(5)
    f(x, w).sum().backward()
    assert compiled.fallback_reason is None
    np.testing.assert_allclose(gx.numpy(), x.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gw.numpy(), w.grad.numpy(), rtol=1e-5, atol=1e-6)
    bw = [t.partition(".")[0] for t in _targets(graphs[1])]
    assert not {"native_dropout", "bernoulli", "bernoulli_", "sum"} & set(bw), bw
    assert bw.count("mm") == 2  # the two gradient products, not the forward's matmul again
    assert "sin" in bw or "cos" in bw  # pointwise values recomputed from the matmul's result


def test_views_are_not_saved_beside_their_base():
    from fusegrad.compiler.aot.joint import trace_joint

    def f(x):
        y = x.exp()
        return (y.t().sin() + y.sum(0)).relu()

    trace = trace_joint(f, [fusegrad.randn(3, 3, requires_grad=True)])
    nodes = {n.name: n for n in trace.module.graph.nodes}
    _, bw = min_cut_rematerialization_partition(trace.module,
                                                num_fwd_outputs=trace.num_fwd_outputs)
    saved = [nodes[n.name] for n in bw.graph.nodes
             if n.op == "placeholder" and not n.name.startswith("tangents")]
    names = {n.name for n in saved}
    for n in saved:
        target = getattr(n.target, "op", None)
        if target is not None and target.view:
            assert n.args[0].name not in names, (n.name, n.args[0].name)


def test_without_networkx_the_default_partition_is_used_and_logged(monkeypatch):
    monkeypatch.setitem(sys.modules, "networkx", None)  # import networkx raises ImportError
    monkeypatch.setattr(mincut, "_reported", [])
    fusegrad.manual_seed(0)
    model = GeluMLP()
    with compiler_logs() as messages:
        fallback_bytes, fw, bw = _run(copy.deepcopy(model), min_cut_rematerialization_partition)
        _run(copy.deepcopy(model), min_cut_rematerialization_partition)
    default_bytes, fw_d, bw_d = _run(model, default_partition)
    assert fallback_bytes == default_bytes
    assert fw.code == fw_d.code and bw.code == bw_d.code
    assert messages == ["min_cut_rematerialization_partition needs networkx (the 'compile' "
                        "extra); using default_partition"]
