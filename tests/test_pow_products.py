"""`x ** e` for the exponents PyTorch computes by products and divisions (2, 3, -1, -2,
-0.5): the same bits as PyTorch's CPU kernels, special values included, and the gradient."""

import numpy as np
import pytest
import torch

import fusegrad

RNG = np.random.default_rng(5)
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e20, -1e20, 3e38, 1e-45]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("e", [2, 3, -1, -2, -0.5, 2.0, 3.0])
def test_bits_as_torch(e, dtype):
    x = np.concatenate([RNG.uniform(-10, 10, 5000), SPECIAL]).astype(dtype)
    got = (fusegrad.from_numpy(x) ** e).numpy()
    want = (torch.from_numpy(x) ** e).numpy()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(fusegrad.from_numpy(x).pow(e).numpy(), want)


@pytest.mark.parametrize("e", [2, 3, -1, -2, -0.5])
def test_gradient_as_torch(e):
    x = RNG.uniform(0.5, 3, (4, 5))
    ours = fusegrad.from_numpy(x.copy()).requires_grad_()
    theirs = torch.from_numpy(x.copy()).requires_grad_()
    (ours ** e).sum().backward()
    (theirs ** e).sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-14)
    assert type((ours ** e).grad_fn).__name__ == type((theirs ** e).grad_fn).__name__


def test_integer_and_half_inputs_keep_their_paths():
    ints = np.arange(-4, 5)
    np.testing.assert_array_equal((fusegrad.from_numpy(ints) ** 2).numpy(),
                                  (torch.from_numpy(ints) ** 2).numpy())
    with pytest.raises(RuntimeError, match="Integers to negative integer powers"):
        fusegrad.from_numpy(ints) ** -1
    half = np.array([0.5, 1.5, -2.0], np.float16)
    np.testing.assert_array_equal((fusegrad.from_numpy(half) ** 3).numpy(),
                                  (torch.from_numpy(half) ** 3).numpy())
