"""rms_norm in half precision and mixed dtypes, against torch: half inputs are computed in
float32 (float32's eps by default) and rounded once, weight included."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad

DTYPES = ["float16", "bfloat16", "float32", "float64"]


def _pair(array: np.ndarray, dtype: str):
    return (torch.tensor(array).to(getattr(torch, dtype)),
            fusegrad.tensor(array).to(getattr(fusegrad, dtype)))


@pytest.mark.parametrize("eps", [None, 1e-6])
@pytest.mark.parametrize("weight_dtype", [None] + DTYPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_matches_torch(dtype, weight_dtype, eps):
    rng = np.random.default_rng(0)
    # Activations at initialisation scale: where half precision's own eps was far too big.
    x = (rng.standard_normal((4, 3, 64)) * 0.02).astype(np.float32)
    w = rng.standard_normal(64).astype(np.float32)
    tx, fx = _pair(x, dtype)
    tx.requires_grad_()
    fx.requires_grad_()
    tw = fw = None
    if weight_dtype is not None:
        tw, fw = _pair(w, weight_dtype)
        tw.requires_grad_()
        fw.requires_grad_()
    want = torch.nn.functional.rms_norm(tx, (64,), tw, eps)
    got = fusegrad.nn.functional.rms_norm(fx, (64,), fw, eps)
    assert str(got.dtype) == str(want.dtype)
    # Half results are exact (one rounding of close float32 values); wider ones within
    # their own precision (the sums' order differs).
    exact = want.dtype in (torch.float16, torch.bfloat16)
    np.testing.assert_allclose(got.detach().double().numpy(), want.detach().double().numpy(),
                               rtol=0 if exact else 1e-5, atol=0 if exact else 1e-6)
    g = rng.standard_normal(tuple(want.shape)).astype(np.float32)
    tg, fg = _pair(g, str(want.dtype).split(".")[1])
    want.backward(tg)
    got.backward(fg)
    tol = {"float16": 2e-3, "bfloat16": 1.6e-2}.get(dtype, 1e-5)
    np.testing.assert_allclose(fx.grad.double().numpy(), tx.grad.double().numpy(),
                               rtol=tol, atol=tol)
    if tw is not None:
        np.testing.assert_allclose(fw.grad.double().numpy(), tw.grad.double().numpy(),
                                   rtol=tol, atol=tol)


def test_rms_norm_module_in_bfloat16_has_unit_rms():
    x = np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32) * 0.02
    m = fusegrad.nn.RMSNorm(64).to(fusegrad.bfloat16)
    y = m(fusegrad.tensor(x).to(fusegrad.bfloat16)).float()
    assert abs(y.pow(2).mean().sqrt().item() - 1) < 1e-3


def test_rms_norm_of_integers_is_refused_as_torch():
    with pytest.raises(NotImplementedError) as want:
        torch.nn.functional.rms_norm(torch.arange(6).reshape(2, 3), (3,))
    with pytest.raises(NotImplementedError) as got:
        fusegrad.nn.functional.rms_norm(fusegrad.arange(6).reshape(2, 3), (3,))
    assert str(got.value) == str(want.value)
