"""Equal values come out of sort, topk, kthvalue and mode in PyTorch's CPU order (its
results, such as top-k sampling masks, depend on it)."""

import numpy as np
import pytest
import torch

import fusegrad


def _both(fn, array):
    return fn(torch, torch.from_numpy(array.copy())), fn(fusegrad, fusegrad.tensor(array))


def _rows(seed: int, count: int):
    """Random tensors full of ties: few distinct values, some NaN, some -0.0, varied sizes."""
    rng = np.random.default_rng(seed)
    for trial in range(count):
        shape = [int(rng.integers(1, 5)), int(rng.choice([1, 3, 17, 40, 130, 300]))]
        if trial % 3 == 0:
            shape = shape[::-1]
        dtype = [np.float32, np.float64, np.int64, np.int32][trial % 4]
        a = rng.integers(-2, 3, shape).astype(dtype)
        if dtype in (np.float32, np.float64):
            if trial % 4 == 0:
                a.flat[rng.integers(0, a.size, 2)] = np.nan
            a[a == 0] = -0.0 if trial % 8 == 1 else 0.0
        yield trial, a, int(rng.integers(0, 2))


def _indices(result):
    return result[1].tolist() if isinstance(result, tuple) else result.tolist()


@pytest.mark.parametrize("seed", range(4))
def test_sort_and_argsort_ties(seed):
    for _, a, dim in _rows(seed, 30):
        for descending in (False, True):
            for fn in (lambda L, x, dim=dim, descending=descending: L.sort(
                x, dim=dim, descending=descending),
                       lambda L, x, dim=dim, descending=descending: L.argsort(
                           x, dim=dim, descending=descending),
                       lambda L, x, dim=dim, descending=descending: x.sort(
                           stable=False, dim=dim, descending=descending)):
                t, f = _both(fn, a)
                assert _indices(f) == _indices(t), (a, dim, descending)


@pytest.mark.parametrize("seed", range(4))
def test_topk_ties(seed):
    rng = np.random.default_rng(100 + seed)
    for _, a, dim in _rows(seed, 30):
        n = a.shape[dim]
        for k in {0, 1, min(n, 2), min(n, 3), n // 2, n, max(1, n // 70)}:
            largest, sorted_ = bool(rng.integers(0, 2)), bool(rng.integers(0, 2))
            t, f = _both(lambda L, x, k=k, d=dim, lg=largest, st=sorted_: L.topk(
                x, k, d, lg, st), a)
            assert _indices(f) == _indices(t), (a, k, dim, largest, sorted_)
            assert np.array_equal(f.values.numpy(), t.values.numpy(), equal_nan=True)


@pytest.mark.parametrize("seed", range(4))
def test_kthvalue_and_mode_ties(seed):
    for _, a, dim in _rows(seed, 30):
        for k in {1, a.shape[dim] // 2 + 1, a.shape[dim]}:
            t, f = _both(lambda L, x, k=k, d=dim: L.kthvalue(x, k, d), a)
            assert _indices(f) == _indices(t), (a, k, dim)
        t, f = _both(lambda L, x, d=dim: L.mode(x, d), a)
        assert _indices(f) == _indices(t), (a, dim)
        assert np.array_equal(f.values.numpy(), t.values.numpy(), equal_nan=True)


def test_known_cases():
    assert fusegrad.topk(fusegrad.zeros(12), 1).indices.tolist() == [9]
    x = fusegrad.tensor([0.0, 0, 1, 0, 0])
    assert fusegrad.topk(x, 3).indices.tolist() == torch.topk(
        torch.tensor([0.0, 0, 1, 0, 0]), 3).indices.tolist()


def test_gradients_follow_the_chosen_indices():
    a = np.array([[1.0, 3, 3, 0, 3], [2, 2, 2, 2, 2]], np.float32)
    grads = []
    for lib in (torch, fusegrad):
        x = lib.tensor(a, requires_grad=True)
        (lib.topk(x, 2).values * lib.tensor([1.0, 10.0])).sum().backward()
        grads.append(x.grad.tolist())
    assert grads[0] == grads[1]
