"""Max pooling's kernel paths against PyTorch, values and indices bit for bit: windows that
tile the input (a reshape, the last partial windows dropped), overlapping and padded windows
(a strided view), windows wider than a row (the winners kept as offsets, not displacements),
NaNs (the loop run again with the NaN test), integer inputs, volumes and unbatched inputs;
and the same bits with two threads as with one."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad
from fusegrad.ops import pooling

CASES = [  # input shape, kernel, stride, padding, dilation, ceil_mode
    ((2, 3, 28, 28), 2, 2, 0, 1, False),      # LeNet: tiles the input
    ((2, 3, 9, 7), 2, 2, 0, 1, False),        # tiles, a partial last window dropped
    ((2, 3, 9, 7), 2, 2, 0, 1, True),         # ceil mode: the partial window kept
    ((2, 4, 16, 16), 3, 2, 1, 1, False),      # ResNet's stem: overlapping, padded
    ((1, 2, 2, 2), 3, 1, 1, 1, False),        # windows wider than a row
    ((1, 2, 7, 9), (2, 3), (1, 2), (1, 0), (2, 1), False),  # dilated
    ((3, 8, 8), 2, 2, 0, 1, False),           # unbatched
]


def _data(shape, nan: bool) -> np.ndarray:
    x = np.random.default_rng(3).integers(-3, 4, shape).astype(np.float32)  # many ties
    if nan:
        flat = x.reshape(-1)
        flat[::17] = np.nan
        flat[5::23] = -np.inf
        flat[: min(4, flat.size)] = np.nan  # a window of NaNs only
    return x


def _pool(lib, x, k, s, p, d, ceil):
    return lib.nn.functional.max_pool2d(lib.tensor(x), k, s, p, d, ceil, return_indices=True)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("nan", [False, True])
def test_max_pool_paths_match_torch(case, nan):
    shape, k, s, p, d, ceil = case
    x = _data(shape, nan)
    got = _pool(fusegrad, x, k, s, p, d, ceil)
    ref = _pool(torch, x, k, s, p, d, ceil)
    np.testing.assert_array_equal(got[0].numpy(), ref[0].numpy())
    np.testing.assert_array_equal(got[1].numpy(), ref[1].numpy())


def test_cases_cover_each_path():
    seen = set()
    for shape, k, s, p, d, ceil in CASES:
        plan = pooling._max_plan(shape, *(tuple(v) if isinstance(v, tuple) else (v,)
                                          for v in (k, s, p, d)), ceil, 2)
        seen.add((plan.blocks, plan.shifts is not None))
    assert seen == {(True, True), (False, True), (False, False)}


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_max_pool_of_integers_matches_torch(dtype):
    x = np.random.default_rng(5).integers(-50, 50, (2, 3, 10, 10)).astype(dtype)
    got = _pool(fusegrad, x, 3, 2, 1, 1, False)
    ref = _pool(torch, x, 3, 2, 1, 1, False)
    np.testing.assert_array_equal(got[0].numpy(), ref[0].numpy())
    np.testing.assert_array_equal(got[1].numpy(), ref[1].numpy())


def test_max_pool3d_tiles_match_torch():
    x = _data((2, 2, 6, 8, 7), True)
    got = fusegrad.nn.functional.max_pool3d(fusegrad.tensor(x), 2, return_indices=True)
    ref = torch.nn.functional.max_pool3d(torch.tensor(x), 2, return_indices=True)
    np.testing.assert_array_equal(got[0].numpy(), ref[0].numpy())
    np.testing.assert_array_equal(got[1].numpy(), ref[1].numpy())


@pytest.mark.parametrize("nan", [False, True])
def test_max_pool_with_two_threads_is_bit_identical_to_one(nan):
    x = _data((64, 6, 28, 28), nan)
    before = fusegrad.get_num_threads()
    try:
        fusegrad.set_num_threads(1)
        one = [t.numpy() for t in _pool(fusegrad, x, 2, 2, 0, 1, False)]
        fusegrad.set_num_threads(2)
        for _ in range(3):  # the pieces are sized by measured cost: give it a few calls
            two = [t.numpy() for t in _pool(fusegrad, x, 2, 2, 0, 1, False)]
            assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(one, two))
    finally:
        fusegrad.set_num_threads(before)
