"""Gradients at the edges of a function's domain as PyTorch gives them: logit's outside
[0, 1] (NaN), xlogy's for x = 0 with y NaN (NaN) or y <= 0."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad

torch = pytest.importorskip("torch")


def _xlogy(lib):
    a = lib.tensor([0.0, 0.0, 0.0, 1.0, 2.0, 0.0], requires_grad=True)
    b = lib.tensor([2.0, -1.0, float("nan"), 0.0, 3.0, 0.0], requires_grad=True)
    lib.xlogy(a, b).sum().backward()
    return a.grad.numpy(), b.grad.numpy()


def _logit(lib, eps):
    x = lib.tensor([0.5, -1.0, 1.5, 0.0, 1.0, 0.05], requires_grad=True)
    lib.logit(x, eps).sum().backward()
    return (x.grad.numpy(),)


@pytest.mark.parametrize("program", [_xlogy, lambda lib: _logit(lib, None),
                                     lambda lib: _logit(lib, 0.1)])
def test_gradients_as_pytorch(program):
    for ours, theirs in zip(program(fusegrad), program(torch)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
