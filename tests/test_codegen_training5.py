"""Compiled training through batch norm: a convolution, batch norm and ReLU residual block
compiled by `fusegrad.compile` (AOT autograd, then generated C) gives eager's outputs and
gradients, its backward graph running batch norm's backward as the extern call of its C
kernel (a generated reduction and pointwise pass measured slower; docs/architecture.md).
Oracle: eager execution of a copy of the same module on the same data.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

import fusegrad
from fusegrad.compiler import codegen
from fusegrad.compiler.codegen import build

pytestmark = pytest.mark.skipif(build.compiler() is None, reason="no C compiler")

nn = fusegrad.nn


class _Block(nn.Module):
    """relu(bn2(conv2(relu(bn1(conv1(x))))) + relu(bn1(conv1(x)))): ResNet's basic block,
    its second batch norm without weight and bias (its backward asked for the input's
    gradient alone)."""

    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)
        self.c2, self.b2 = nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4, affine=False)

    def forward(self, x):
        h = fusegrad.relu(self.b1(self.c1(x)))
        return fusegrad.relu(self.b2(self.c2(h)) + h)


def test_batch_norm_block_trains_as_eager(monkeypatch):
    """Outputs, the input's and every parameter's gradient, and the running statistics of
    the compiled block are eager's (the conv biases' gradients, zero in exact arithmetic,
    within an absolute tolerance); the backward graph calls `native_batch_norm_backward`."""
    sources = []
    original = codegen.compile_graph

    def recording(gm, inputs, options=None):
        compiled = original(gm, inputs, options)
        sources.append(compiled.source)
        return compiled

    monkeypatch.setattr(codegen, "compile_graph", recording)
    fusegrad.manual_seed(0)
    model = _Block()
    twin = copy.deepcopy(model)
    rng = np.random.default_rng(3)
    data = rng.standard_normal((3, 3, 5, 6)).astype(np.float32)
    weights = fusegrad.from_numpy(rng.standard_normal((3, 4, 5, 6)).astype(np.float32))
    xs = [fusegrad.from_numpy(data.copy()).requires_grad_(True) for _ in range(2)]
    got = fusegrad.compile(model)(xs[0])
    want = twin(xs[1])
    (got * weights).sum().backward()
    (want * weights).sum().backward()
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(xs[0].grad.numpy(), xs[1].grad.numpy(), rtol=1e-4, atol=1e-5)
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=5e-5,
                                   err_msg=name)
    for (name, b), c in zip(model.named_buffers(), twin.buffers()):
        np.testing.assert_allclose(b.numpy(), c.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    assert len(sources) == 2, "one forward and one backward graph"
    assert sources[1].count("_extern_native_batch_norm_backward(") == 2
