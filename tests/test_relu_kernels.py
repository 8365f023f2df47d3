"""ReLU's NumPy kernel and fast backward against PyTorch, bit for bit: the forward's SIMD path
against a block of zeros (large contiguous inputs, a ragged last block), the scalar path
(small or strided inputs), and the backward's mask at zeros, NaNs and infinite gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad
from fusegrad.ops import unary


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.int32 if a.dtype == np.float32 else np.int64)


def _specials(dtype, n: int) -> np.ndarray:
    """`n` values with zeros of both signs, NaNs of both signs, infinities and numbers."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal(n).astype(dtype)
    nan = np.array(np.nan, dtype)
    special = np.array([0.0, -0.0, np.inf, -np.inf, 1.0, -1.0], dtype)
    a[::7] = special[np.arange(len(a[::7])) % len(special)]
    a[3::11] = nan
    a[5::13] = -nan
    return a


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [5, 1027, 1 << 14, 3 * (1 << 14) + 17])
def test_relu_forward_matches_torch_bitwise(dtype, n):
    a = _specials(dtype, n)
    ours = fusegrad.relu(fusegrad.tensor(a)).numpy()
    theirs = torch.relu(torch.from_numpy(a)).numpy()
    # PyTorch keeps -0.0 where NumPy's maximum gives +0.0: compare zeros by value.
    zero = a == 0
    assert np.array_equal(_bits(ours)[~zero], _bits(theirs)[~zero])
    assert (ours[zero] == 0).all()


def test_relu_forward_of_strided_input_keeps_its_layout():
    x = torch.randn(300, 70).t()
    ours = fusegrad.relu(fusegrad.tensor(x.t().numpy()).t())
    theirs = torch.relu(x)
    assert ours.stride() == theirs.stride()
    assert np.array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [9, 3 * (1 << 14) + 5])
def test_relu_backward_matches_threshold_backward_bitwise(dtype, n):
    # PyTorch's gradient is `grad` where the output is not <= 0: a NaN output passes it on,
    # a zero output gives +0 (never -0), and an infinite gradient at a zero gives 0 (not NaN).
    a = _specials(dtype, n)
    g = np.random.default_rng(1).standard_normal(n).astype(dtype)
    g[1::5] = -np.abs(g[1::5])
    g[2::17] = np.inf
    g[4::19] = -np.inf
    xs = fusegrad.tensor(a, requires_grad=True)
    fusegrad.relu(xs).backward(fusegrad.tensor(g))
    xt = torch.tensor(a, requires_grad=True)
    torch.relu(xt).backward(torch.tensor(g))
    assert np.array_equal(_bits(xs.grad.numpy()), _bits(xt.grad.numpy()))


def test_relu_backward_of_broadcast_gradient_matches_torch():
    a = _specials(np.float32, 40).reshape(5, 8)
    xs = fusegrad.tensor(a, requires_grad=True)
    fusegrad.relu(xs).sum().backward()
    xt = torch.tensor(a, requires_grad=True)
    torch.relu(xt).sum().backward()
    assert np.array_equal(_bits(xs.grad.numpy()), _bits(xt.grad.numpy()))


def test_sizes_above_take_each_forward_path():
    # 5: scalar loop; 1027: one slice of the zero block; 1 << 14: the whole block; the last
    # size: whole blocks and a ragged one.
    assert (unary.RELU_SIMD_MIN, unary.RELU_ZERO_BLOCK) == (1024, 1 << 14)
