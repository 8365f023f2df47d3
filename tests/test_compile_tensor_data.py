"""`tensor.data` in compiled code (hand-written optimizer updates `p.data.add_(...)`, reads
of `x.data`): a detached alias in the graph, so writes through it reach the tensor as
eager's do. Compared with eager runs on each backend (parameters after several steps,
results), with the graphs counted."""

from __future__ import annotations

import pytest

import fusegrad as torch
from fusegrad._dynamo import explain

BACKENDS = ["eager", "aot_eager", "inductor"]


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 1))


def sgd_by_hand(model, lr):
    for p in model.parameters():
        if p.grad is not None:
            p.data.add_(p.grad.data, alpha=-lr)
            p.data.clamp_(-0.5, 0.5)
    return sum(p.data.abs().sum() for p in model.parameters())


def _train(model, step, steps=3):
    torch.manual_seed(1)
    out = []
    for _ in range(steps):
        model.zero_grad()
        model(torch.randn(5, 4)).pow(2).sum().backward()
        out.append(step(model, 0.1))
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_hand_written_update(backend):
    eager, compiled = _model(), _model()
    want = _train(eager, sgd_by_hand)
    got = _train(compiled, torch.compile(sgd_by_hand, backend=backend))
    assert all(torch.allclose(a, b, rtol=1e-6) for a, b in zip(got, want))
    for a, b in zip(eager.parameters(), compiled.parameters()):
        assert torch.allclose(a, b, rtol=1e-6, atol=1e-7)
        assert b.requires_grad and b.is_leaf


def test_hand_written_update_is_one_graph():
    model = _model()
    model(torch.randn(2, 4)).sum().backward()
    out = explain(sgd_by_hand)(model, 0.1)
    assert out.graph_count == 1 and out.graph_break_count == 0, out.break_reasons


@pytest.mark.parametrize("backend", BACKENDS)
def test_data_has_no_history(backend):
    def f(x):
        y = x * 2
        d = y.data
        return d.requires_grad, d.grad_fn is None, d + 1, (y.data * x).sum()

    x = torch.randn(3, requires_grad=True)
    want, got = f(x), torch.compile(f, backend=backend)(x)
    assert want[:2] == got[:2]
    assert torch.equal(want[2], got[2]) and torch.allclose(want[3], got[3])
    (gw,) = torch.autograd.grad(want[3], x)
    (gg,) = torch.autograd.grad(got[3], x)
    assert torch.allclose(gw, gg)
