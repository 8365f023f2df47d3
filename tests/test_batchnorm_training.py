"""Training-mode batch norm against PyTorch: the NumPy statistics of the forward kernel and
the derivative, with and without affine parameters, every input rank, both float dtypes, a
large mean (no cancellation in the variance) and the running statistics."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad


def _run(lib, x, g, affine, dtype):
    bn = lib.nn.BatchNorm1d(x.shape[1], affine=affine) if x.ndim < 4 else \
        lib.nn.BatchNorm2d(x.shape[1], affine=affine)
    bn = bn.to(getattr(lib, dtype)).train()
    if affine:
        with lib.no_grad():
            bn.weight.copy_(lib.tensor(np.linspace(0.5, 1.5, x.shape[1])))
            bn.bias.copy_(lib.tensor(np.linspace(-1.0, 1.0, x.shape[1])))
    xt = lib.tensor(x, requires_grad=True)
    y = bn(xt)
    y.backward(lib.tensor(g))
    out = [y, xt.grad, bn.running_mean, bn.running_var]
    if affine:
        out += [bn.weight.grad, bn.bias.grad]
    return [np.array(t.detach().numpy()) for t in out]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape", [(16, 5), (8, 4, 7), (6, 3, 5, 4), (32, 8, 1, 1),
                                   (4, 2, 16, 16)])
def test_batch_norm_training_values_and_gradients_match_torch(shape, affine, dtype):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3 + 50).astype(dtype)  # mean far from zero
    g = rng.standard_normal(shape).astype(dtype)
    got = _run(fusegrad, x, g, affine, dtype)
    ref = _run(torch, x, g, affine, dtype)
    tol = 2e-4 if dtype == "float32" else 1e-10
    for a, r in zip(got, ref):
        assert a.dtype == r.dtype
        np.testing.assert_allclose(a, r, rtol=tol, atol=tol * max(np.abs(r).max(), 1.0))
