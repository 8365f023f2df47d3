"""2-D max pooling with indices and its backward by the C kernels (ops/native/pool.c):
PyTorch's maxima and indices (the first of equal maxima in window order, NaN as PyTorch
takes it), its input gradients, the NumPy path without the kernels, and the same bits at
one and two threads."""

import numpy as np
import pytest
import torch

import fusegrad
from fusegrad.ops import _native

# (input shape, kernel, stride, padding, dilation, ceil_mode)
CASES = [
    ((2, 3, 8, 8), 2, 2, 0, 1, False),
    ((2, 4, 16, 16), 3, 2, 1, 1, False),       # ResNet's stem pooling
    ((1, 2, 9, 7), (3, 2), (2, 1), (1, 1), 1, False),
    ((1, 3, 11, 10), 3, 2, 1, 2, False),       # dilated
    ((2, 2, 7, 7), 2, 2, 0, 1, True),          # ceil mode
    ((2, 2, 10, 9), 3, 3, 1, 1, True),
    ((3, 6, 5), 2, 1, 1, 1, False),            # unbatched
    ((1, 1, 4, 20), (1, 5), (1, 3), (0, 2), 1, False),
    ((2, 3, 13, 13), 4, 3, 2, 1, False),
]


def _input(shape, dtype, special, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    if special == "ties":  # few distinct values: equal maxima in most windows
        x = np.round(x).astype(dtype)
    elif special == "nan":
        flat = x.reshape(-1)
        flat[rng.choice(flat.size, max(1, flat.size // 7), replace=False)] = np.nan
        flat[rng.choice(flat.size, max(1, flat.size // 9), replace=False)] = -np.inf
    elif special == "inf":
        x[...] = -np.inf
        x.reshape(-1)[::5] = 1.0
    return x


def _pool(lib, x, case, grad):
    _, k, s, p, d, ceil = case
    xt = lib.tensor(x, requires_grad=True)
    y, idx = lib.nn.functional.max_pool2d(xt, k, s, p, d, ceil_mode=ceil, return_indices=True)
    rng = np.random.default_rng(1)
    y.backward(lib.tensor(grad if grad is not None else
                          rng.standard_normal(tuple(y.shape)).astype(x.dtype)))
    return [np.array(v.detach().numpy()) for v in (y, idx, xt.grad)]


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("special", ["plain", "ties", "nan", "inf"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_max_pool2d_matches_torch(native, dtype, special, case):
    x = _input(case[0], dtype, special)
    want = _pool(torch, x, case, None)
    with _native.native_kernels(native):
        got = _pool(fusegrad, x, case, None)
    np.testing.assert_array_equal(got[0], want[0])  # a selection: exact, NaN included
    np.testing.assert_array_equal(got[1], want[1])
    assert got[1].dtype == np.int64
    np.testing.assert_allclose(got[2], want[2], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", [CASES[1], CASES[3], CASES[5]], ids=str)
def test_max_pool2d_backward_sums_in_torch_order(case):
    """Overlapping windows send one input several gradients: summed in output order, as
    PyTorch sums them, so its bits (a -0.0 gradient added to zero gives +0.0, as in
    PyTorch)."""
    x = _input(case[0], np.float32, "ties", seed=3)
    y = torch.nn.functional.max_pool2d(torch.tensor(x), *case[1:5], ceil_mode=case[5])
    g = (np.random.default_rng(2).standard_normal(tuple(y.shape)) * 1e3).astype(np.float32)
    g.reshape(-1)[::4] = -0.0
    want = _pool(torch, x, case, g)
    got = _pool(fusegrad, x, case, g)
    np.testing.assert_array_equal(got[2], want[2])
    np.testing.assert_array_equal(np.signbit(got[2]), np.signbit(want[2]))


@pytest.mark.parametrize("case", [CASES[1], CASES[4]], ids=str)
def test_max_pool2d_is_bit_identical_at_one_and_two_threads(shared, case):
    shape = (4, 16) + case[0][2:]
    x = _input(shape, np.float32, "ties", seed=5)
    results = []
    for n in (1, 2):
        fusegrad.set_num_threads(n)
        results.append(_pool(fusegrad, x, (shape,) + case[1:], None))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_max_pool2d_of_a_channels_last_and_a_half_input():
    x = _input((2, 3, 8, 8), np.float32, "plain", seed=6)
    for lib_in in (np.float16,):
        xs = x.astype(lib_in)
        want = torch.nn.functional.max_pool2d(torch.tensor(xs), 3, 2, 1, return_indices=True)
        got = fusegrad.nn.functional.max_pool2d(fusegrad.tensor(xs), 3, 2, 1,
                                                 return_indices=True)
        np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
        np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    cl = torch.tensor(x).contiguous(memory_format=torch.channels_last)
    want = torch.nn.functional.max_pool2d(cl, 3, 2, 1, return_indices=True)
    got = fusegrad.nn.functional.max_pool2d(
        fusegrad.tensor(x).contiguous(memory_format=fusegrad.channels_last), 3, 2, 1,
        return_indices=True)
    np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())


def test_max_pool3d_of_windows_of_only_minus_infinity_gives_torch_indices():
    """A padded window whose values are all -inf names its first position inside the
    input, as in PyTorch (the NumPy kernel, which 3-D pooling takes)."""
    x = _input((1, 2, 5, 6, 4), np.float32, "inf", seed=7)
    args = ((3, 2, 2), (2, 1, 2), (1, 1, 0))
    want = torch.nn.functional.max_pool3d(torch.tensor(x), *args, return_indices=True)
    got = fusegrad.nn.functional.max_pool3d(fusegrad.tensor(x), *args, return_indices=True)
    np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
