"""Rows added by index in C (`ops/native/pointwise.c`'s `add_rows`): an embedding's gradient,
`index_add` along dim 0, `index_put` with accumulate, `scatter_add` of whole rows and
`embedding_bag` give PyTorch's bits with the C kernel on and off (PyTorch adds the rows in
index order, as the kernel does), and two threads give one thread's bits. Indices out of the
kernel's reach (negative, columns that differ, other shapes) keep NumPy's `add.at`."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad
from fusegrad import _cbuild
from fusegrad.ops import _native

needs_cc = pytest.mark.skipif(_cbuild.compiler() is None, reason="needs a C compiler")
NATIVE = pytest.mark.parametrize("native", [True, False], ids=["C", "NumPy"])
DTYPES = pytest.mark.parametrize("dt", [np.float32, np.float64])
SHAPES = [(65, 64, 3000), (7, 3, 50), (5, 1, 9), (10, 7, 0), (4, 200, 1)]  # rows, width, k


def _data(n, d, k, dt, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, k), rng.standard_normal((k, d)).astype(dt)


def _both(fn, *arrays):
    """`fn(lib, *tensors)` on torch and fusegrad: the two results as arrays."""
    return [np.array(fn(lib, *[lib.from_numpy(np.array(a)) for a in arrays]).detach().numpy())
            for lib in (torch, fusegrad)]


@NATIVE
@DTYPES
@pytest.mark.parametrize("n, d, k", SHAPES)
@pytest.mark.parametrize("keywords", [{}, {"padding_idx": 2}, {"scale_grad_by_freq": True}])
def test_embedding_gradient_matches_torch(n, d, k, dt, keywords, native):
    idx, g = _data(n, d, k, dt)

    def grad(lib, i, gy):
        w = lib.zeros(n, d, dtype=gy.dtype, requires_grad=True)
        lib.nn.functional.embedding(i, w, **keywords).backward(gy)
        return w.grad

    with _native.native_kernels(native):
        want, got = _both(grad, idx, g)
    if keywords.get("scale_grad_by_freq") and not (native and _cbuild.compiler()):
        # NumPy rounds each scaled row before adding it; PyTorch fuses the two.
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    else:
        assert np.array_equal(got, want)


@NATIVE
@DTYPES
@pytest.mark.parametrize("n, d, k", SHAPES)
def test_index_add_and_index_put_accumulate_match_torch(n, d, k, dt, native):
    idx, src = _data(n, d, k, dt, seed=1)
    base = np.random.default_rng(2).standard_normal((n, d)).astype(dt)
    with _native.native_kernels(native):
        want, got = _both(lambda lib, a, i, s: a.index_add(0, i, s, alpha=0.5), base, idx, src)
        assert np.array_equal(got, want)
        want, got = _both(lambda lib, a, i, s: a.index_put((i,), s, accumulate=True),
                          base, idx, src)
        assert np.array_equal(got, want)
        # Negative positions (and a 3-d value) take NumPy's path: the same values.
        neg = idx - n if k else idx
        want, got = _both(lambda lib, a, i, s: a.index_put((i,), s, accumulate=True),
                          base, neg, src)
        assert np.array_equal(got, want)
        cube = np.repeat(base[:, :, None], 2, 2)
        want, got = _both(lambda lib, a, i, s: a.index_add(0, i, s),
                          cube, idx, np.repeat(src[:, :, None], 2, 2))
        assert np.array_equal(got, want)


@NATIVE
@DTYPES
@pytest.mark.parametrize("n, d, k", SHAPES)
def test_scatter_add_of_whole_rows_matches_torch(n, d, k, dt, native):
    """A graph network's message sum: the index a column expanded (or repeated) across the
    width; an index whose columns differ keeps NumPy's path."""
    idx, src = _data(n, d, k, dt, seed=4)
    base = np.random.default_rng(5).standard_normal((n, d)).astype(dt)
    mixed = np.random.default_rng(6).integers(0, n, (k, d))
    with _native.native_kernels(native):
        for index in (lambda lib, i: i.unsqueeze(-1).expand(-1, d),
                      lambda lib, i: i.unsqueeze(-1).repeat(1, d),
                      lambda lib, i: lib.from_numpy(mixed)):
            want, got = _both(lambda lib, a, i, s, index=index: a.scatter_add(0, index(lib, i), s),
                              base, idx, src)
            assert np.array_equal(got, want)


@NATIVE
@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_matches_torch(mode, native):
    idx, _ = _data(30, 1, 200, np.float32)
    weight = np.random.default_rng(3).standard_normal((30, 16)).astype(np.float32)
    offsets = np.array([0, 3, 3, 90, 150])

    def bag(lib, w, i, o):
        return lib.nn.functional.embedding_bag(i, w, o, mode=mode, padding_idx=4)

    with _native.native_kernels(native):
        want, got = _both(bag, weight, idx, offsets)
    assert np.array_equal(got, want)


@needs_cc
def test_two_threads_give_one_threads_bits(threads):
    idx, g = _data(500, 512, 4000, np.float32)

    def grad():
        w = fusegrad.zeros(500, 512, requires_grad=True)
        fusegrad.nn.functional.embedding(fusegrad.from_numpy(idx), w).backward(
            fusegrad.from_numpy(g))
        return w.grad.numpy().copy()

    fusegrad.set_num_threads(1)
    one = grad()
    fusegrad.set_num_threads(2)
    assert np.array_equal(grad(), one)
    assert _native.workers_started() >= 1  # (2M additions: shared with a C worker)
    ref = np.zeros((500, 512), np.float32)
    np.add.at(ref, idx, g)
    assert np.array_equal(one, ref)
