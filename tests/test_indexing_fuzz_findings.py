"""Findings of a fuzz of indexing against PyTorch: `x[i]` and `x[i] = v` with NumPy and 0-d
indices, empty results, PyTorch's order of checks (and their messages), the nodes of writes
into a whole tensor, and the index ops (index_select/add/copy/fill, gather, the scatters,
take/put, take_along_dim, masked_*, nonzero). Each case runs under torch and fusegrad and
compares values, dtypes, shapes, strides, node names, errors and warnings."""

import warnings

import numpy as np
import pytest
import torch

import fusegrad as fg

X = np.arange(24.0).reshape(2, 3, 4)


def _summary(v):
    if isinstance(v, (torch.Tensor, fg.Tensor)):
        fn = v.grad_fn
        return ("tensor", str(v.dtype).split(".")[-1], tuple(v.shape), tuple(v.stride()),
                v.detach().tolist(), type(fn).__name__ if fn is not None else None)
    if isinstance(v, (tuple, list)):
        return tuple(_summary(u) for u in v)
    return v


def _outcome(case, lib):
    # Warnings given once per process are given every time here, so the outcome does not
    # depend on which earlier test gave them first.
    always = lib.is_warn_always_enabled()
    lib.set_warn_always(True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = _summary(case(lib))
        except Exception as e:  # noqa: BLE001  (the error is the outcome compared)
            result = ("error", type(e).__name__, str(e).split("\n")[0])
        finally:
            lib.set_warn_always(always)
    return result, sorted(str(w.message).split(" (Triggered")[0] for w in caught)


def _set(x, index, value):
    x[index] = value
    return x


def _expand_to_0d(dtype_name: str):
    """A case expanding a vector of `dtype_name` to 0-d: its error names the tensor type."""
    return lambda L: L.ones(2, dtype=getattr(L, dtype_name)).expand(())


def _grad_fn_of_write(lib, index, value):
    y = lib.ones(2, 3, dtype=lib.float64, requires_grad=True) * 1
    y[index] = value(lib) if callable(value) else value
    return type(y.grad_fn).__name__


def _backward(lib, make):
    """`make(lib, leaf)`'s result, and the leaf's gradient (a weighted sum's)."""
    leaf = lib.tensor(X, requires_grad=True)
    out = make(lib, leaf)
    w = lib.arange(float(out.numel()), dtype=lib.float64).reshape(out.shape)
    (out * w).sum().backward()
    return out, leaf.grad


def _src_backward(lib, make):
    src = lib.arange(1.0, 5.0, dtype=lib.float64, requires_grad=True)
    out = make(lib, src)
    out.sum().backward()
    return out, src.grad


CASES = {
    # -- indices: 0-d, NumPy, lists
    "0-d uint8 tensor is a mask": lambda L: L.tensor(X)[L.tensor(1, dtype=L.uint8), :, [0, 1]],
    "numpy int scalar selects": lambda L: L.tensor(X)[np.int64(1), :, [0, 1]],
    "0-d numpy array selects": lambda L: L.tensor(X)[np.array(1, np.int32), :, [0, 1]],
    "0-d float array selects (a view)": lambda L: L.tensor(X)[np.array(1.0)],
    "0-d bool array": lambda L: L.tensor(X)[np.array(True)],
    "float list truncates": lambda L: L.tensor(X)[[0.0, 1.0]],
    "float list 1.5": lambda L: L.tensor(X)[[1.5]],
    "float array": lambda L: L.tensor(X)[np.array([1.0])],
    "numpy uint8 is a mask": lambda L: L.tensor(X)[np.array([1, 0], np.uint8)],
    "numpy uint8 mask mismatch": lambda L: L.tensor(X)[np.array([1], np.uint8)],
    "numpy uint64 array": lambda L: L.tensor(X)[np.array([0, 1], np.uint64)],
    "nested empty list": lambda L: L.tensor(X)[[5, 0], :, [[]]],
    "mask broadcast message": lambda L: L.tensor(X)[np.ones((2, 3), bool), [0, 1]],
    # -- empty results read no position; an empty dim admits none
    "empty dim with a position": lambda L: L.zeros(0, 3)[[0]],
    "empty result skips bounds": lambda L: L.zeros(0, 3)[:, [5]],
    "empty broadcast skips bounds": lambda L: L.zeros(2, 3)[[5], L.tensor([], dtype=L.long)],
    "index_put_ into an empty dim": lambda L: L.zeros(0, 3).index_put_(
        (L.tensor([0]),), L.tensor(1.0)),
    "bounds checked element by element": lambda L: L.zeros(4, 3, 4)[
        L.tensor([3, 1]), L.tensor([-2, 4]), L.tensor([4, 5])],
    "a mask counts as its dims' index tensors": lambda L: L.zeros(4, 3, 4)[
        L.ones(4, 3, dtype=L.bool), L.tensor([7])],
    "index_put_ bounds element by element": lambda L: L.zeros(4, 3, 4).index_put_(
        (L.tensor([3, 1]), L.tensor([-2, 4]), L.tensor([4, 5])), L.tensor([1.0])),
    # -- slices of a 0-d tensor: the step's errors first
    "0-d step 0": lambda L: L.tensor(1.0)[::0],
    "0-d step -1": lambda L: L.tensor(1.0)[::-1],
    # -- index_put_'s order of checks and messages
    "index broadcast before value dtype": lambda L: _set(
        L.zeros(3, 1), (L.tensor([1, 2, -3], dtype=L.int32), L.tensor(False)), L.tensor(True)),
    "value shape before dtype": lambda L: L.zeros(3, 1).index_put_(
        (L.tensor([1, 2, 5]),), L.tensor([True, False])),
    "value dtype before bounds": lambda L: L.zeros(3, 1).index_put_(
        (L.tensor([1, 2, 5]),), L.tensor([True])),
    "too many indices (got n)": lambda L: L.zeros(()).index_put_(
        (L.tensor([0]),), L.tensor(1.0)),
    "public index_put takes no None": lambda L: L.index_put(
        L.zeros(2, 3), (None, L.tensor([0])), L.tensor(1.0)),
    # -- x[i] = v
    "value's leading ones dropped": lambda L: _set(
        L.zeros(2, 2), (L.tensor([-2], dtype=L.int32), L.tensor(True)), L.ones(1, 2, 3)),
    "empty value with leading ones": lambda L: _set(
        L.zeros(4, dtype=L.int64), (L.tensor(-2), L.tensor(False)), L.ones(1, 1, 0)),
    "number converted first": lambda L: _set(
        L.zeros((), dtype=L.int32), L.tensor([0]), 2.0 ** 40),
    "expand message names the value's type": lambda L: _set(
        L.zeros(4), 1, L.ones(3, dtype=L.float64)),
    "expand message of a bool value": lambda L: _set(
        L.zeros(4, 4, 2), -3, L.ones(4, 2, 3, dtype=L.bool)),
    "uint8 mask write refused without warning": lambda L: _set(
        L.zeros(3, 4, 1), (L.tensor([0, 1, 0], dtype=L.uint8), None, 3), L.ones(1, 1, 1)),
    "uint8 mask read warns once": lambda L: L.zeros(3, 1, 1)[L.tensor(1), L.tensor(
        [1, 0], dtype=L.uint8)],
    "x[:] = number fills x": lambda L: _grad_fn_of_write(L, slice(None), 2.0),
    "x[:] = 0-d tensor fills x": lambda L: _grad_fn_of_write(L, slice(None), lambda M: M.tensor(
        5.0, dtype=M.float64)),
    "x[..., 0:9] = row copies into x": lambda L: _grad_fn_of_write(
        L, (Ellipsis, slice(0, 9)), lambda M: M.ones(3, dtype=M.float64)),
    "x[-5:] = number is a view's write": lambda L: _grad_fn_of_write(L, slice(-5, None), 2.0),
    "x[...] = number": lambda L: _grad_fn_of_write(L, Ellipsis, 2.0),
    "x[...] = 0-d value of a 0-d x copies": lambda L: type(_set(
        L.zeros((), dtype=L.float64, requires_grad=True) * 1, Ellipsis,
        L.tensor(2.0, dtype=L.float64)).grad_fn).__name__,
    "empty dim before value dtype": lambda L: _set(
        L.zeros(0, dtype=L.float64), L.tensor([0, 0, 0]), L.tensor(1.0)),
    # -- an index result's layout: kept dims in the input's memory order (TensorIterator's)
    "layout of a permuted input": lambda L: L.tensor(X.transpose(2, 0, 1).copy()).permute(
        1, 2, 0)[:, [0, 2]],
    "layout, index tensors apart": lambda L: L.tensor(X.transpose(1, 2, 0).copy()).permute(
        2, 0, 1)[[[0], [1]], :, [1, 2]],
    "layout with a mask": lambda L: L.tensor(X.transpose(2, 1, 0).copy()).permute(
        2, 1, 0)[np.ones((2, 3), bool)],
    # -- nonzero is column-major
    "nonzero strides": lambda L: L.nonzero(L.tensor([[1, 0], [2, 3]])),
    "argwhere strides": lambda L: L.argwhere(L.tensor([1, 0, 1])),
    "nonzero as_tuple": lambda L: L.nonzero(L.tensor([[1, 0], [2, 3]]), as_tuple=True),
    # -- take, put
    "take from empty": lambda L: L.take(L.zeros(0), L.tensor([0])),
    "put into empty": lambda L: L.zeros(0).put_(L.tensor([0]), L.tensor([1.0])),
    "put numel mismatch": lambda L: L.zeros(2, 3).put_(L.tensor([0, 1]), L.zeros(3)),
    # -- gather and the scatters with an empty index (of any rank and integer dtype)
    "gather empty index of more dims": lambda L: L.gather(
        L.zeros(3, 2), 0, L.zeros(2, 0, 0, 1, dtype=L.long)),
    "gather empty int16 index": lambda L: L.gather(L.zeros(2, 3), 0,
                                                   L.zeros(0, 3, dtype=L.int16)),
    "scatter empty index of more dims": lambda L: L.zeros(3, 2).scatter(
        0, L.zeros(2, 0, 0, 1, dtype=L.long), L.zeros(2, 0, 1, 2)),
    "scatter_add empty float index": lambda L: L.zeros(2, 3).scatter_add_(
        0, L.zeros(0, 3), L.zeros(1, 3)),
    "scatter empty index, other src dtype": lambda L: L.zeros(2, 3).scatter_(
        0, L.zeros(0, 3, dtype=L.long), L.zeros(1, 3, dtype=L.int32)),
    "scatter empty float index": lambda L: L.zeros(2, 3).scatter(0, L.zeros(0, 3), 2.0),
    "scatter_reduce mean of bool, empty index": lambda L: L.zeros(1, 4, dtype=L.bool)
    .scatter_reduce(0, L.zeros(4, 0, dtype=L.long), L.zeros(5, 0, dtype=L.bool), "mean",
                    include_self=False),
    "scatter_add into 0-d": lambda L: L.tensor(1.0).scatter_add(
        0, L.tensor([0]), L.tensor([2.0, 5.0])),
    "scatter into 0-d": lambda L: L.tensor(1.0).scatter(0, L.tensor([0]),
                                                         L.tensor([2.0, 5.0])),
    # -- scatter(reduce=): no derivative, numbers in self's dtype
    "scatter reduce add node": lambda L: L.zeros(3, requires_grad=True).scatter(
        0, L.tensor([0, 1]), L.ones(2), reduce="add"),
    "scatter_ reduce backward": lambda L: (L.zeros(3, requires_grad=True) * 1).scatter_(
        0, L.tensor([0, 1]), 2.0, reduce="multiply").sum().backward(),
    "scatter reduce backward": lambda L: L.zeros(3, requires_grad=True).scatter(
        0, L.tensor([0, 1]), L.ones(2), reduce="add").sum().backward(),
    "scatter reduce int value": lambda L: L.tensor([1, 2, 3]).scatter(
        0, L.tensor([0, 1]), 2.5, reduce="multiply"),
    "scatter reduce int value add": lambda L: L.tensor([1, 2, 3]).scatter(
        0, L.tensor([0, 1]), 2.5, reduce="add"),
    # -- a src larger than the index: PyTorch's backward refuses its gradient
    "scatter_add src larger": lambda L: _src_backward(
        L, lambda M, s: M.zeros(3, dtype=M.float64).scatter_add(0, M.tensor([0, 2, 2]), s)),
    "scatter src larger": lambda L: _src_backward(
        L, lambda M, s: M.zeros(3, dtype=M.float64).scatter(0, M.tensor([0, 2]), s)),
    "scatter_reduce src larger": lambda L: _src_backward(
        L, lambda M, s: M.zeros(3, dtype=M.float64).scatter_reduce(
            0, M.tensor([0, 2, 2]), s, "mean")),
    "scatter_add src as large": lambda L: _src_backward(
        L, lambda M, s: M.zeros(3, dtype=M.float64).scatter_add(0, M.tensor([0, 2, 2, 1]), s)),
    # -- index_select, index_copy, index_fill: checks' order, empty tensors
    "index_select 0-d count before dtype": lambda L: L.zeros(()).index_select(
        0, L.tensor([], dtype=L.float32)),
    "index_select 1-d empty": lambda L: L.zeros(0).index_select(0, L.tensor([0])),
    "index_copy 0-d count before dtype": lambda L: L.zeros(()).index_copy(
        0, L.tensor([], dtype=L.float32), L.tensor(1.0)),
    "index_fill 1-d value": lambda L: L.zeros(3, 4).index_fill(1, L.tensor([0]),
                                                               L.tensor([2.0])),
    "index_fill 1-d value before index dtype": lambda L: L.zeros(3, 4).index_fill(
        1, L.tensor([0], dtype=L.int16), L.tensor([2.0])),
    "index_fill_ 1-d value": lambda L: L.zeros(3, 4).index_fill_(1, L.tensor([0]),
                                                                 L.tensor([2.0])),
    "index_fill value grad, negative index": lambda L: _src_backward(
        L, lambda M, s: M.zeros(2, 3, dtype=M.float64).index_fill(0, M.tensor([-1]), s[0])),
    "index_fill value grad, repeated index": lambda L: _src_backward(
        L, lambda M, s: M.zeros(2, 3, dtype=M.float64).index_fill(1, M.tensor([2, 0, 2]),
                                                                   s[1])),
    "scatter src dtype before index dims": lambda L: L.zeros(4).scatter_add(
        0, L.zeros(2, 1, dtype=L.long), L.zeros(2, 1, dtype=L.float64)),
    "index_copy_ empty self": lambda L: L.zeros(4, 0, 0, dtype=L.int32).index_copy_(
        2, L.tensor([0, 0, 0]), L.zeros(4, 0, 3, dtype=L.int32)),
    "index_fill empty self": lambda L: L.zeros(0, 0).index_fill(0, L.tensor([0]), 2.0),
    # -- index_add: its two out-of-range errors, alpha in self's dtype, empty self
    "index_add 2-d long alpha 1": lambda L: L.zeros(3, 2).index_add(
        0, L.tensor([5]), L.ones(1, 2)),
    "index_add 2-d alpha 2": lambda L: L.zeros(3, 2).index_add(
        0, L.tensor([5]), L.ones(1, 2), alpha=2),
    "index_add 2-d int32 index": lambda L: L.zeros(3, 2).index_add(
        0, L.tensor([-2], dtype=L.int32), L.ones(1, 2)),
    "index_add 1-d negative": lambda L: L.zeros(3).index_add(0, L.tensor([-2]),
                                                             L.tensor([1.0])),
    "index_add alpha True": lambda L: L.zeros(3, 2).index_add(
        0, L.tensor([5]), L.ones(1, 2), alpha=True),
    "index_add int alpha": lambda L: L.tensor([1, 2]).index_add(
        0, L.tensor([0]), L.tensor([3]), alpha=-1.5),
    "index_add bool alpha": lambda L: L.tensor([True, False]).index_add(
        0, L.tensor([0, 1]), L.tensor([True, True]), alpha=0),
    "index_add 0-d bool": lambda L: L.tensor(True).index_add(
        0, L.tensor(0), L.tensor(True), alpha=-1.5),
    "index_add empty self": lambda L: L.zeros(0, 4, 2).index_add(
        0, L.tensor([1]), L.ones(1, 4, 2)),
    # -- take_along_dim: indices modulo the size along a dim, a flat view without one
    "take_along_dim modulo": lambda L: L.take_along_dim(
        L.arange(16.0).reshape(4, 4), L.tensor([[-1, 5, 7, -9]]), 1),
    "take_along_dim grad": lambda L: _backward(
        L, lambda M, x: M.take_along_dim(x, M.tensor([[[-1], [5], [2]]]), 2)),
    "take_along_dim flat of a strided": lambda L: L.take_along_dim(
        L.zeros(4, 4)[::2], L.tensor([0])),
    "take_along_dim flat float index": lambda L: L.take_along_dim(L.zeros(()),
                                                                  L.tensor(0.0)),
    "take_along_dim 0-d": lambda L: L.take_along_dim(L.zeros(()), L.tensor(0), -1),
    # -- masked_scatter and masked_fill: functional and in-place orders of checks
    "masked_scatter_ expand": lambda L: L.zeros(3).masked_scatter_(
        L.tensor([True, True]), L.tensor([1.0])),
    "masked_scatter broadcast": lambda L: L.zeros(3).masked_scatter(
        L.tensor([True, True]), L.tensor([1.0])),
    "masked_scatter_ wider mask": lambda L: L.zeros(4).masked_scatter_(
        L.ones(2, 4, dtype=L.bool), L.tensor([1.0])),
    "masked_scatter_ wider int mask": lambda L: L.zeros(3).masked_scatter_(
        L.ones(2, 3, dtype=L.int32), L.tensor([1.0])),
    "masked_scatter_ dtypes first": lambda L: L.zeros(3).masked_scatter_(
        L.tensor([True, True]), L.tensor([1], dtype=L.int32)),
    "masked_scatter_ uint8": lambda L: L.zeros(3).masked_scatter_(
        L.tensor([1, 1, 1], dtype=L.uint8), L.tensor([1.0])),
    "masked_scatter uint8": lambda L: L.zeros(4).masked_scatter(
        L.ones(4, dtype=L.uint8), L.tensor([1.0] * 4)),
    "masked_fill_ broadcast order": lambda L: L.zeros(3).masked_fill_(
        L.tensor([True, True]), 1.0),
    "masked_fill broadcast before value": lambda L: L.zeros(3).masked_fill(
        L.tensor([True, True]), L.tensor([1.0])),
    "masked_fill value before mask dtype": lambda L: L.zeros(0, dtype=L.bool).masked_fill(
        L.zeros(0, dtype=L.uint8), L.tensor([2.0])),
    "masked_select of a 0-d": lambda L: _backward(
        L, lambda M, x: M.masked_select(x[0, 0, 0], M.tensor(True))),
    # Assigned values: numbers (NumPy's integers and float64 too) and tensors only.
    **{f"assign {kind}": (lambda v: lambda L: _set(L.zeros(2, 3), 0, v))(value) for kind, value in (
        ("list", [1, 2, 3]), ("tuple", (1, 2, 3)), ("array", np.ones(3)),
        ("0-d array", np.array(2.0)), ("numpy float32", np.float32(1)),
        ("numpy bool", np.bool_(True)), ("numpy int64", np.int64(2)),
        ("numpy float64", np.float64(1.5)), ("None", None), ("str", "a"))},
    "index_put_ method refuses None": lambda L: L.zeros(2, 3).index_put_(
        (None, L.tensor([0])), L.tensor(1.0)),
    **{f"expand names {name}": _expand_to_0d(name)
       for name in ("float64", "bool", "bfloat16", "complex64", "uint8")},
    "assign list to a long mask": lambda L: _set(L.zeros(2, dtype=L.int64),
                                                 L.tensor([True, False]), [1]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_torch(name):
    case = CASES[name]
    assert _outcome(case, fg) == _outcome(case, torch)
