"""Compiled modules whose hooks are objects: pruning's forward pre-hooks (which assign the
pruned weight with `setattr`) and users' callable hook objects, compared with eager runs of
the same code on each backend (values, gradients, the module's attributes afterwards), with
the graphs counted."""

from __future__ import annotations

import pytest

import fusegrad as torch
import fusegrad.nn as nn
import fusegrad.nn.utils.prune as prune
from fusegrad._dynamo import explain

BACKENDS = ["eager", "aot_eager", "inductor"]


def _model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def _pruned(seed: int = 0) -> nn.Module:
    m = _model(seed)
    prune.l1_unstructured(m[0], "weight", amount=0.5)
    prune.random_unstructured(m[2], "bias", amount=0.34)
    return m


def _train(m: nn.Module, step_fn, steps: int = 3) -> list:
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    torch.manual_seed(7)
    losses = []
    for _ in range(steps):
        x = torch.randn(5, 4)
        opt.zero_grad()
        loss = step_fn(x).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("backend", BACKENDS)
def test_pruned_model_trains_as_eager(backend):
    eager, compiled = _pruned(), _pruned()
    ref = _train(eager, eager)
    got = _train(compiled, torch.compile(compiled, backend=backend))
    assert got == pytest.approx(ref, rel=1e-6)
    for (name, a), (_, b) in zip(eager.named_parameters(), compiled.named_parameters()):
        assert torch.allclose(a, b, atol=1e-6), name
    # The hook's assignment reached the real module: its pruned weight is the last step's.
    assert torch.allclose(compiled[0].weight, eager[0].weight, atol=1e-6)
    assert torch.allclose(compiled[2].bias, eager[2].bias, atol=1e-6)
    assert compiled[0].weight.grad_fn is not None
    assert compiled[0].weight.requires_grad


def test_pruned_model_is_one_graph():
    m = _pruned()
    out = explain(m)(torch.randn(2, 4))
    assert out.graph_count == 1 and out.graph_break_count == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_pruning_again_and_removal_recompile(backend):
    m = _pruned()
    cm = torch.compile(m, backend=backend)
    x = torch.randn(3, 4)
    assert torch.allclose(cm(x), m._orig_mod(x) if hasattr(m, "_orig_mod") else m(x))
    prune.l1_unstructured(m[0], "weight", amount=0.5)  # a PruningContainer now
    assert torch.allclose(cm(x), m(x), atol=1e-6)
    prune.remove(m[0], "weight")
    prune.remove(m[2], "bias")
    m[0].weight.data.mul_(2)
    assert torch.allclose(cm(x), m(x), atol=1e-6)


class _Scale:
    """A user's forward pre-hook object: scales the input by its factor, counts calls."""

    def __init__(self, factor: float):
        self.factor = factor
        self.calls = 0

    def __call__(self, module, inputs):
        self.calls += 1
        return (inputs[0] * self.factor,)


class _AddBias:
    """A user's forward hook object adding a tensor it holds to the output."""

    def __init__(self, shift):
        self.shift = shift

    def __call__(self, module, inputs, output):
        return output + self.shift


@pytest.mark.parametrize("backend", BACKENDS)
def test_user_hook_objects(backend):
    torch._dynamo.reset()  # (the modules' code compiled by earlier cases: a fresh limit)

    def build():
        m = _model(3)
        pre, post = _Scale(0.5), _AddBias(torch.arange(3.0))
        m[0].register_forward_pre_hook(pre)
        m[2].register_forward_hook(post)
        return m, pre, post

    (m1, pre1, post1), (m2, pre2, post2) = build(), build()
    cm = torch.compile(m2, backend=backend)
    x = torch.randn(2, 4)
    for factor in (0.5, 0.5, 2.0):
        pre1.factor = pre2.factor = factor
        ref, got = m1(x), cm(x)
        assert torch.allclose(got, ref, atol=1e-6)
    post1.shift = post2.shift = torch.ones(3)
    assert torch.allclose(cm(x), m1(x), atol=1e-6)
    assert pre1.calls == pre2.calls == 4


class _Holder:
    pass


@pytest.mark.parametrize("backend", BACKENDS)
def test_setattr_builtin_is_an_attribute_assignment(backend):
    def f(holder, x):
        setattr(holder, "last", x * 2)  # noqa: B010 - the builtin is what is tested
        return holder.last + 1

    h1, h2 = _Holder(), _Holder()
    x = torch.randn(3, requires_grad=True)
    ref = f(h1, x)
    cf = torch.compile(f, backend=backend)
    got = cf(h2, x)
    assert torch.equal(got, ref) and torch.equal(h2.last, h1.last)
    out = explain(f)(_Holder(), x)
    assert out.graph_count == 1 and out.graph_break_count == 0
