"""A half-precision layer norm's gradient in a compiled graph equals eager's bits: AOT
autograd records PyTorch's `native_layer_norm_backward`, which accumulates in float32 as
eager's kernel does (its decomposition rounded every step to half: off by up to 0.0625 in
bfloat16)."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg

F = fg.nn.functional


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("affine", [False, True])
def test_half_layer_norm_gradient_as_eager(dtype, backend, affine):
    rng = np.random.default_rng(0)
    dt = getattr(fg, dtype)
    x0 = fg.tensor(rng.standard_normal((4, 8)), dtype=fg.float32).to(dt)
    w0 = fg.tensor(rng.standard_normal(8), dtype=fg.float32).to(dt) if affine else None

    def f(x, w):
        return (F.layer_norm(x, (8,), w) * fg.arange(8.0)).sum()

    grads = []
    for fn in (f, fg.compile(f, backend=backend)):
        x = x0.clone().requires_grad_()
        w = None if w0 is None else w0.clone().requires_grad_()
        fn(x, w).backward()
        grads.append([x.grad] + ([] if w is None else [w.grad]))
    assert fg.equal(grads[1][0], grads[0][0])  # the input's gradient: the same bits
    if affine:  # (the weight's: its sum over rows may round the last bit otherwise)
        assert fg.allclose(grads[1][1].float(), grads[0][1].float(), rtol=1e-2, atol=1e-2)
