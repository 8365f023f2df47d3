"""Pointwise losses with targets of another dtype (double, integer, bool, half): the loss's
dtype and value, and the input's gradient, as PyTorch gives them."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad

torch = pytest.importorskip("torch")

LOSSES = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
          "binary_cross_entropy_with_logits", "soft_margin_loss", "kl_div",
          "poisson_nll_loss"]
TARGETS = ["float64", "int64", "bool", "float16"]


def _run(lib, loss, target_dtype, cast_target=False):
    x = lib.tensor([0.3, 0.7, 0.2, 0.9], requires_grad=True)
    t = lib.tensor([0, 1, 1, 0]).to(getattr(lib, target_dtype))
    if cast_target:
        t = t.float()
    try:
        out = getattr(lib.nn.functional, loss)(x, t)
        out.backward()
    except RuntimeError as e:
        return ("error", str(e))
    return (str(out.dtype).split(".")[-1], float(out), x.grad.numpy().tolist())


@pytest.mark.parametrize("target_dtype", TARGETS)
@pytest.mark.parametrize("loss", LOSSES)
def test_loss_with_target_of_another_dtype(loss, target_dtype):
    ours = _run(fusegrad, loss, target_dtype)
    # PyTorch's huber backward refuses a target of another dtype (its kernel's check); the
    # gradient is the one for the target cast to the input's dtype.
    theirs = _run(torch, loss, target_dtype, cast_target=loss == "huber_loss")
    assert ours[0] == theirs[0]
    if ours[0] == "error":
        assert ours == theirs
        return
    np.testing.assert_allclose(ours[1], theirs[1], rtol=2e-3 if target_dtype == "float16"
                               else 1e-6)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-6, atol=1e-7)
