"""`mean`'s kernel: the sum divided once by the count, as PyTorch's value, over every dtype
path (float32/float64 directly, half types through float32, an explicit dtype), with no
warning on an empty input."""

import warnings

import numpy as np
import pytest
import torch

import fusegrad

CASES = [((3, 4), None, False), ((3, 4), (1,), True), ((2, 3, 5), (0, 2), False),
         ((7,), (0,), False), ((), None, False), ((0, 3), None, False), ((0, 3), (0,), False),
         ((2, 0), (1,), True), ((0, 3), (1,), False)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("shape,dims,keepdim", CASES)
def test_mean_matches_torch(shape, dims, keepdim, dtype):
    data = np.random.default_rng(0).standard_normal(shape).astype(np.float32) * 3
    x = torch.tensor(data).to(getattr(torch, dtype))
    y = fusegrad.tensor(data).to(getattr(fusegrad, dtype))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # PyTorch warns about nothing here, empty inputs too
        ours = y.mean() if dims is None else y.mean(dims, keepdim=keepdim)
    theirs = x.mean() if dims is None else x.mean(dims, keepdim=keepdim)
    assert ours.dtype == getattr(fusegrad, dtype)
    assert tuple(ours.shape) == tuple(theirs.shape)
    tol = {"float32": 1e-6, "float64": 1e-12}.get(dtype, 1e-2)
    np.testing.assert_allclose(ours.float().numpy(), theirs.float().numpy(), rtol=tol,
                               atol=tol)


def test_mean_with_dtype_and_its_errors():
    data = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    ours = fusegrad.tensor(data).mean(1, dtype=fusegrad.float64)
    theirs = torch.tensor(data).mean(1, dtype=torch.float64)
    assert ours.dtype == fusegrad.float64
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-15)
    with pytest.raises(RuntimeError) as ours_error:
        fusegrad.arange(3).mean()
    with pytest.raises(RuntimeError) as theirs_error:
        torch.arange(3).mean()
    assert str(ours_error.value) == str(theirs_error.value)


def test_mean_of_float32_is_the_float32_sum_divided_once():
    # np.mean's value: the float32 pairwise sum divided by the count with one rounding.
    data = np.random.default_rng(1).standard_normal((64, 33)).astype(np.float32)
    for dims in (None, (0,), (1,)):
        ours = fusegrad.tensor(data).mean() if dims is None else fusegrad.tensor(data).mean(dims)
        np.testing.assert_array_equal(ours.numpy(), np.mean(data, axis=dims))
