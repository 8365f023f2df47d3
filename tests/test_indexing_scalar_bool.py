"""Indexing with Python bools (a new dim of size 1 or 0, as a 0-d bool tensor index), a
slice of a 0-dim tensor and a string index, against torch: shapes, values, node names,
gradients, assignment and the errors."""

import warnings

import numpy as np
import pytest
import torch

import fusegrad

INDICES = [True, False, (True, 0), (0, True), (Ellipsis, False), (None, True), (True, True),
           (True, slice(1, None)), (0, 0, True), (slice(None), False, 1)]


def _run(T, fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns of a str index as a sequence
        try:
            return fn(T)
        except Exception as e:  # noqa: BLE001 - the error is compared
            return type(e).__name__, str(e)


def _summary(t):
    name = None if t.grad_fn is None else type(t.grad_fn).__name__
    return tuple(t.shape), t.detach().numpy().tolist(), name


@pytest.mark.parametrize("index", INDICES, ids=repr)
def test_bool_index_reads_and_differentiates_as_torch(index):
    def prog(T):
        x = T.arange(6.0, dtype=T.float64).reshape(2, 3).requires_grad_()
        out = x[index]
        cot = T.arange(float(out.numel()), dtype=T.float64).reshape(out.shape)
        (out * cot).sum().backward()
        return _summary(out), x.grad.numpy().tolist()
    assert _run(fusegrad, prog) == _run(torch, prog)


@pytest.mark.parametrize("index", INDICES[:5], ids=repr)
def test_bool_index_assigns_as_torch(index):
    def prog(T):
        y = T.arange(6.0).reshape(2, 3)
        y[index] = 7.0
        return y.numpy().tolist()
    assert _run(fusegrad, prog) == _run(torch, prog)


@pytest.mark.parametrize("index", [True, False, slice(1, 2), slice(None), slice(None, None, 2),
                                   (slice(None),), (None, slice(0, 1)), (Ellipsis, slice(1, 2)),
                                   (True, slice(None))], ids=repr)
def test_zero_dim_tensor(index):
    def read(T):
        return _summary(T.tensor(1.5)[index])

    def write(T):
        z = T.tensor(2.0)
        z[index] = 4.0
        return z.item()
    assert _run(fusegrad, read) == _run(torch, read)
    assert _run(fusegrad, write) == _run(torch, write)


@pytest.mark.parametrize("index", ["a", (0, "a"), ("a",)], ids=repr)
def test_string_index_is_torchs_type_error(index):
    def read(T):
        return _summary(T.ones(2, 3)[index])

    def write(T):
        T.ones(2, 3)[index] = 1.0
    assert _run(fusegrad, read) == _run(torch, read)
    assert _run(fusegrad, write) == _run(torch, write)
    assert _run(torch, read)[0] == "TypeError"


def test_plain_indices_unchanged():
    x = np.arange(24.0).reshape(2, 3, 4)
    for index in [0, -1, slice(1, None), (1, slice(None), 2), (Ellipsis, 1), (None, 0)]:
        got = fusegrad.tensor(x)[index].numpy()
        np.testing.assert_array_equal(got, torch.tensor(x)[index].numpy())
