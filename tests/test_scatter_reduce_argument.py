"""`scatter(..., reduce="add" | "multiply")` and `scatter_` combine values that land on one
place (a repeated index), for a tensor source and a number, as PyTorch's; its deprecation
warning for a tensor source, at the caller's line; its error for another reduce."""

import warnings

import numpy as np
import pytest
import torch

import fusegrad

CALLS = {
    "method": lambda L, a, i, s, r: a.scatter(1, i, s, reduce=r),
    "function": lambda L, a, i, s, r: L.scatter(a, 1, i, s, reduce=r),
    "in place": lambda L, a, i, s, r: a.clone().scatter_(1, i, s, reduce=r),
    "value keyword": lambda L, a, i, s, r: a.scatter(1, i, value=s, reduce=r)
    if not isinstance(s, L.Tensor) else a.scatter(1, i, s, reduce=r),
}


@pytest.mark.parametrize("reduce", ["add", "multiply"])
@pytest.mark.parametrize("source", ["tensor", "number"])
@pytest.mark.parametrize("call", list(CALLS))
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_repeated_indices_combine_as_torch(call, source, reduce, dtype):
    rng = np.random.default_rng(5)
    a = rng.integers(1, 4, (3, 5)).astype(dtype)
    idx = np.array([[0, 0, 1, 4], [2, 2, 2, 2], [4, 3, 4, 3]])
    src = rng.integers(1, 4, (3, 4)).astype(dtype)
    results = []
    for lib in (fusegrad, torch):
        s = lib.from_numpy(src.copy()) if source == "tensor" else (
            2 if dtype == "int64" else 1.5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = CALLS[call](lib, lib.from_numpy(a.copy()), lib.from_numpy(idx), s, reduce)
        results.append((out.numpy(), str(out.dtype).split(".")[-1]))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    assert results[0][1] == results[1][1]


def test_other_reduce_refused_as_torch():
    for lib in (fusegrad, torch):
        with pytest.raises(RuntimeError, match=r"^reduce argument must be either add or "
                                               r"multiply\.$"):
            lib.zeros(3).scatter(0, lib.tensor([0]), lib.ones(1), reduce="sum")
        with pytest.raises(RuntimeError, match="must be either add or multiply"):
            lib.zeros(3).scatter_(0, lib.tensor([0]), 1.0, reduce="max")


def test_deprecation_warning_for_a_tensor_source_at_the_callers_line():
    fusegrad.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fusegrad.zeros(1, 3).scatter(1, fusegrad.tensor([[0, 0]]), fusegrad.ones(1, 2),
                                         reduce="add")
            fusegrad.zeros(1, 3).scatter(1, fusegrad.tensor([[0, 0]]), 2.0, reduce="add")
    finally:
        fusegrad.set_warn_always(False)
    assert len(caught) == 1
    assert str(caught[0].message).startswith(
        "The reduce argument of torch.scatter with Tensor src is deprecated")
    assert caught[0].filename == __file__
