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


def _mixed_layer_norm_grads(lib, dtype, rows, backend=None):
    """The input, weight and bias gradients of a layer norm of a half-precision input with
    float32 parameters (what autocast makes of `LayerNorm` after a bfloat16 `Linear`)."""
    rng = np.random.default_rng(rows)
    x = lib.tensor(rng.standard_normal((rows, 16)).astype(np.float32)).to(
        getattr(lib, dtype)).requires_grad_()
    w = lib.tensor(rng.standard_normal(16).astype(np.float32)).requires_grad_()
    b = lib.tensor(rng.standard_normal(16).astype(np.float32)).requires_grad_()
    g = lib.tensor(rng.standard_normal((rows, 16)).astype(np.float32)).to(x.dtype)

    def f(x, w, b):
        return lib.nn.functional.layer_norm(x, (16,), w, b)

    fn = f if backend is None else lib.compile(f, backend=backend)
    fn(x, w, b).backward(g)
    return [t.grad.float().numpy() for t in (x, w, b)]


@pytest.mark.parametrize("backend", [None, "aot_eager", "inductor"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("rows", [3, 6])
def test_mixed_precision_layer_norm_gradients_as_torch(dtype, rows, backend):
    """Half input, float32 weight and bias: the weight's and bias's gradients are summed over
    the rows with each partial sum held in the input's dtype, as PyTorch's kernel does (on
    one thread), eagerly and in compiled graphs (AOT autograd records
    `native_layer_norm_backward`, whose kernel summed in float64: 0.0234 off)."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # (PyTorch's row chunks per thread round at their ends)
    try:
        want = _mixed_layer_norm_grads(torch, dtype, rows)
    finally:
        torch.set_num_threads(threads)
    got = _mixed_layer_norm_grads(fg, dtype, rows, backend)
    for a, b in zip(got, want):
        assert np.array_equal(a, b), np.abs(a - b).max()
