"""`nn.utils.clip_grad_norm_` / `clip_grad_value_` inside a compiled training step: traced
like the program's own code (gradients read as graph inputs and scaled in place), compared
with the same step run eagerly on each backend (loss, total norm, parameters after several
steps), with the graphs counted."""

from __future__ import annotations

import pytest

import fusegrad as torch
import fusegrad.linalg  # noqa: F401  (imported by the clipping code: loaded before capture)
from fusegrad._dynamo import explain

BACKENDS = ["eager", "aot_eager", "inductor"]


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


def _clip(model, max_norm):
    total = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    torch.nn.utils.clip_grad_value_(model.parameters(), 0.05)
    return total


def _train(model, clip, steps=3):
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    torch.manual_seed(1)
    norms = []
    for _ in range(steps):
        x = torch.randn(6, 4)
        opt.zero_grad()
        model(x).pow(2).sum().backward()
        norms.append(clip(model, 0.3))
        opt.step()
    return norms


@pytest.mark.parametrize("backend", BACKENDS)
def test_clipping_in_a_compiled_function(backend):
    eager, compiled = _model(), _model()
    want = _train(eager, _clip)
    got = _train(compiled, torch.compile(_clip, backend=backend))
    assert all(torch.allclose(a, b, rtol=1e-6) for a, b in zip(got, want))
    for a, b in zip(eager.parameters(), compiled.parameters()):
        assert torch.allclose(a, b, rtol=1e-6, atol=1e-7)


def test_clipping_is_one_graph():
    model = _model()
    model(torch.randn(2, 4)).sum().backward()
    out = explain(_clip)(model, 0.3)
    assert out.graph_count == 1 and out.graph_break_count == 0, out.break_reasons
