"""Findings of a differential fuzz of eager fusegrad against PyTorch with non-contiguous
inputs and incoming gradients (transposed, strided, expanded, channels_last, permuted
leaves; a layout change after the op, then a weighted sum): values, dtypes and gradients.
Each case runs under torch and fusegrad in the test."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad as fg


def _close(a, b, tol):
    np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=tol, atol=tol)


# ------------------------------------------------------------ embedding_bag last offset

@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("offsets", [[0, 2, 5], [0, 0, 3], [0, 3, 4, 4]])
def test_embedding_bag_indices_past_the_last_offset_join_the_last_bag(mode, offsets):
    """With include_last_offset, indices at or past the closing offset belong to the last
    bag (PyTorch's float64 kernel; fusegrad put them in the first)."""
    table = np.random.default_rng(0).standard_normal((7, 4))
    idx = np.array([0, 3, 3, 6, 2, 0])
    res = []
    for lib in (torch, fg):
        w = lib.tensor(table, requires_grad=True)
        y = lib.nn.functional.embedding_bag(lib.tensor(idx), w, lib.tensor(offsets),
                                            mode=mode, include_last_offset=True)
        cot = np.random.default_rng(1).standard_normal(tuple(y.shape))
        (y * lib.tensor(cot)).sum().backward()
        res.append((y.detach().numpy(), w.grad.numpy()))
    for a, b in zip(*res):
        _close(a, b, 1e-12)


# ------------------------------------------------------------ grid_sample, strided grid

@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_takes_a_channels_last_grid(mode):
    """A grid in channels_last layout made the sampler's index view fail."""
    rng = np.random.default_rng(2)
    image = rng.standard_normal((2, 3, 5, 6))
    grid = np.tanh(rng.standard_normal((2, 3, 8, 2))) * 1.1
    cot = rng.standard_normal((2, 3, 3, 8))
    res = []
    for lib in (torch, fg):
        x = lib.tensor(image, requires_grad=True)
        g = lib.tensor(grid).contiguous(memory_format=lib.channels_last).requires_grad_()
        y = lib.nn.functional.grid_sample(x, g, mode=mode, padding_mode="border",
                                          align_corners=False)
        (y * lib.tensor(cot)).sum().backward()
        res.append((y.detach().numpy(), x.grad.numpy(), g.grad.numpy()))
    for a, b in zip(*res):
        _close(a, b, 1e-10)


# ------------------------------------------------------------ as_strided, overlapping input

def _as_strided_case(lib, double: bool):
    leaf = lib.tensor(np.arange(1.0, 6.0), requires_grad=True)
    x = leaf[None, :3].expand(2, 3)  # each storage location read by two elements
    y = x.as_strided((2, 2), (1, 1), 1)
    w = lib.tensor([[1.0, 10.0], [100.0, 1000.0]], requires_grad=True)
    if not double:
        (y * w).sum().backward()
        return [leaf.grad.numpy()]
    (g,) = lib.autograd.grad((y * w).sum(), leaf, create_graph=True)
    (g * lib.arange(5.0)).sum().backward()
    return [g.detach().numpy(), w.grad.numpy()]


@pytest.mark.parametrize("double", [False, True])
def test_as_strided_of_an_expanded_view_splits_the_gradient(double):
    """as_strided over an input whose elements share storage: each location's gradient is
    shared between the elements reading it (fusegrad gave each the whole), and its double
    backward reads locations outside the input as NaN, as PyTorch's does."""
    for a, b in zip(_as_strided_case(torch, double), _as_strided_case(fg, double)):
        np.testing.assert_array_equal(b, a)


def test_as_strided_of_a_self_overlapping_as_strided_view():
    """The overlap shows only when the strides are taken together (1, 2 and 3 over sizes of
    two: elements (1, 1, 0) and (0, 0, 1) share a location)."""
    res = []
    for lib in (torch, fg):
        leaf = lib.tensor(np.arange(1.0, 9.0), requires_grad=True)
        x = leaf.as_strided((2, 2, 2), (1, 2, 3))
        y = x.as_strided((2, 3), (3, 1), 0)
        (y * lib.arange(6.0).reshape(2, 3)).sum().backward()
        res.append(leaf.grad.numpy())
    np.testing.assert_array_equal(res[1], res[0])


# ------------------------------------------------------------ empty batches

def _empty_batch_case(lib, op: str):
    rng = np.random.default_rng(3)
    x = lib.zeros(0, 4, 5, 6, dtype=lib.float64, requires_grad=True)
    if op == "group_norm":
        w = lib.tensor(rng.standard_normal(4), requires_grad=True)
        y = lib.nn.functional.group_norm(x, 2, w, w)
    else:
        w = lib.tensor(rng.standard_normal((4, 3, 3, 3)), requires_grad=True)
        y = lib.nn.functional.conv_transpose2d(x, w, stride=2)
    (y * 2.0).sum().backward()
    return [tuple(y.shape), str(y.dtype), x.grad.shape, w.grad.numpy()]


@pytest.mark.parametrize("op", ["group_norm", "conv_transpose2d"])
def test_empty_batch_forward_and_backward(op):
    """A batch of zero samples: group_norm's kernel and conv_transpose's weight gradient
    reshaped with -1, which an empty array cannot resolve."""
    a, b = _empty_batch_case(torch, op), _empty_batch_case(fg, op)
    assert b[:3] == a[:3]
    np.testing.assert_array_equal(b[3], a[3])


# ---------------------------------------------------------------- storage in another order


def test_as_strided_writes_through_a_storage_laid_out_transposed():
    """A clone of a transpose keeps its layout: its storage is in memory order, and a view
    made by as_strided writes into it (the storage was flattened into a copy)."""
    results = []
    for lib in (torch, fg):
        c = lib.zeros(3, 4).t().clone()
        c.t().as_strided((3,), (5,), 0).fill_(-1)
        c.as_strided((2, 2), (1, 4), 1).add_(7)
        results.append(c.numpy().copy())
    np.testing.assert_array_equal(results[1], results[0])


@pytest.mark.parametrize(("shape", "wrap", "transposed"), [
    ((7, 3), True, False), ((7, 3), True, True), ((5, 5), False, True), ((8, 2), True, False),
    ((3, 3, 3), False, False), ((0, 3), True, False), ((4, 6), True, True)])
def test_fill_diagonal_of_any_layout(shape, wrap, transposed):
    """fill_diagonal_ fills a non-contiguous tensor (it raised its own error), in rows'
    order below a tall matrix's square part. (A transposed 8x2 with wrap=True is left out:
    PyTorch 2.13 raises an out-of-bounds setStorage error there, its own slip.)"""
    results = []
    for lib in (torch, fg):
        x = lib.zeros(*shape)
        if transposed:
            x = lib.zeros(*reversed(shape)).t()
        x.fill_diagonal_(-1, wrap=wrap)
        results.append(x.numpy().copy())
    np.testing.assert_array_equal(results[1], results[0])


def test_einsum_with_an_empty_contracted_dimension():
    x = np.arange(20.0).reshape(4, 5)
    want = torch.einsum("ij,jk->ik", torch.tensor(x)[:, :0], torch.tensor(x)[:0])
    got = fg.einsum("ij,jk->ik", fg.tensor(x)[:, :0], fg.tensor(x)[:0])
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def _attention_queries(lib, x):
    b, s, h, d = 2, 5, 3, 4
    return {
        "split_view": x.split(h * d, 2)[0].view(b, s, h, d).transpose(1, 2),
        "permuted_dense": x[..., :h * d].contiguous().view(b, s, h, d).transpose(1, 2),
        "sliced_last": x.view(b, s, 3, h * d)[:, :, 0].reshape(b, s, h, d).transpose(1, 2)
        [..., :2],
        "size1_heads": x[..., :d].contiguous().view(b, s, 1, d).transpose(1, 2),
    }


def test_flash_attention_output_laid_out_as_torch():
    x = np.random.default_rng(0).standard_normal((2, 5, 36)).astype(np.float32)
    got, want = {}, {}
    for lib, out in ((fg, got), (torch, want)):
        for name, q in _attention_queries(lib, lib.tensor(x)).items():
            o = lib.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, q, q)[0]
            sdpa = lib.nn.functional.scaled_dot_product_attention(q, q, q)
            out[name] = (o.stride(), sdpa.stride(), np.round(sdpa.numpy(), 5).tolist())
            if lib is fg:  # the meta kernel gives the same layout
                meta = q.to("meta")
                out[name] += (lib.ops.aten._scaled_dot_product_flash_attention_for_cpu(
                    meta, meta, meta)[0].stride() == o.stride(),)
            else:
                out[name] += (True,)
    assert got == want
