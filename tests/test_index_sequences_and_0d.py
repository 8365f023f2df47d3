"""Indices PyTorch reads its own way: a 0-d integer tensor selects as an int does (so an
advanced index beside it keeps its place), and a short list holding a sequence, tensor,
slice, None or Ellipsis is a tuple of indices (with PyTorch's deprecation warning)."""

import warnings

import numpy as np
import pytest
import torch

import fusegrad

CASES = [
    lambda L, x: x[L.tensor(1), :, [0, 1]],
    lambda L, x: x[:, L.tensor(1), [0, 1]],
    lambda L, x: x[L.tensor(1)],
    lambda L, x: x[L.tensor([1])],
    lambda L, x: x[L.tensor(True)],
    lambda L, x: x[[0, 1]],
    lambda L, x: x[[[0, 1], [1, 2]]],
    lambda L, x: x[[slice(None), 1]],
    lambda L, x: x[[0, None, 1]],
    lambda L, x: x[[L.tensor([0, 1]), L.tensor([2, 0])]],
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_indexing_matches_torch(case):
    results, warned = [], []
    for lib in (torch, fusegrad):
        x = lib.arange(24).reshape(2, 3, 4)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            results.append(CASES[case](lib, x).numpy())
        warned.append(sorted(str(w.message).split(" (Triggered")[0] for w in caught))
    assert results[1].shape == results[0].shape
    np.testing.assert_array_equal(results[1], results[0])
    assert warned[1] == warned[0]


def test_assignment_and_gradient_through_those_indices():
    results = []
    for lib in (torch, fusegrad):
        z = lib.arange(12).reshape(3, 4)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            z[[[0, 2], [1, 3]]] = -1
        w = lib.zeros(3, 4)
        w[lib.tensor(1), [0, 2]] = 5
        v = lib.arange(6.0).reshape(2, 3).requires_grad_()
        v[lib.tensor(1), [0, 2]].sum().backward()
        results.append((z.tolist(), w.tolist(), v.grad.tolist()))
    assert results[1] == results[0]


def test_the_warning_names_the_users_line():
    x = fusegrad.arange(12).reshape(3, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x[[[0, 2], [1, 3]]]
    assert [w.filename for w in caught] == [__file__]
