"""masked_scatter's source gradient is its own op (`masked_scatter_backward`, shaped as the
source whatever the mask holds): values and second-order node against torch, and compiled
graphs whose backward takes it are traced by AOT autograd (they ran eagerly)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad as fg


@pytest.mark.parametrize("mask_shape,src", [((3, 4), (3, 5)), ((4,), (12,)), ((3, 4), (2,))])
def test_second_order_as_torch(mask_shape, src):
    rng = np.random.default_rng(0)
    mask = rng.random(mask_shape) > 0.5
    if src == (2,):  # as many picks as the source has items
        mask = np.zeros(mask_shape, bool)
        mask[0, 0] = mask[1, 2] = True
    x, s, g = rng.standard_normal((3, 4)), rng.standard_normal(src), rng.standard_normal((3, 4))
    out = []
    for lib in (torch, fg):
        xt = lib.tensor(x, requires_grad=True)
        st = lib.tensor(s, requires_grad=True)
        gt = lib.tensor(g, requires_grad=True)
        y = xt.masked_scatter(lib.tensor(mask), st)
        gx, gs = lib.autograd.grad(y, (xt, st), gt, create_graph=True)
        (hg,) = lib.autograd.grad((gs * gs).sum(), gt)
        out.append((type(gs.grad_fn).__name__, gs.detach().numpy(), hg.numpy()))
    assert out[0][0] == out[1][0] == "MaskedScatterBackwardBackward0"
    np.testing.assert_allclose(out[1][1], out[0][1], rtol=1e-12)
    np.testing.assert_allclose(out[1][2], out[0][2], rtol=1e-12)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_backward_is_traced(backend):
    from fusegrad.compiler import logs

    mask = fg.rand(3, 4) > 0.5

    def f(x, src):
        return x.masked_scatter(mask, src).sin().sum()

    x = fg.randn(3, 4, requires_grad=True)
    src = fg.randn(12, requires_grad=True)
    found, emit = [], logs.emit
    logs.emit = lambda artifact, message: (found.append(message) if artifact ==
                                           "graph_breaks" else None, emit(artifact, message))
    try:
        got = fg.autograd.grad(fg.compile(f, backend=backend)(x, src), (x, src))
    finally:
        logs.emit = emit
    want = fg.autograd.grad(f(x, src), (x, src))
    assert not found, found
    assert all(fg.allclose(a, b, atol=1e-6) for a, b in zip(got, want))
