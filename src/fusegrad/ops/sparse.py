"""Sparse COO ops: the ops that make and read sparse tensors (the twins of registry ops that
dispatch runs when an operand is sparse are in `sparse_twins.py`).

These are `OpDef`s outside `REGISTRY`: the registry's entries and its oracle walk speak
strided NumPy arrays (samples, metas, lowerings, ONNX), which sparse operands are not.
Each carries what a registry entry carries for autograd: a kernel (on Tensors: sparse
operands are `SparseTensor`s, whose index and value arrays it reads), a derivative written
in fusegrad ops (index_select, index_add, the constructor below), and PyTorch's node name.
`run(op, *args)` computes one and records it as dispatch records any op.

Products go through a sparse-dense kernel on the arrays: each stored entry's row of the
dense operand, scaled by its value, summed into its output row (a segment sum by
`np.add.reduceat` over coalesced, row-sorted entries; `np.add.at` otherwise).
"""

from __future__ import annotations

import numpy as np

from .. import _dispatch, _sparse
from .._sparse import SparseTensor, backend_error
from .._tensor import Tensor
from .registry import OpDef


def _no_meta(*args):
    raise backend_error("meta", "Meta")


def run(op: OpDef, *args):
    """Compute sparse op `op` on `args` and record it for autograd."""
    return _dispatch._finish(op, args, op.kernel(*args))


def _tensor(a: np.ndarray, dtype=None) -> Tensor:
    return Tensor._make(a, dtype)


# ---------------------------------------------------------------- array helpers


def coalesce_arrays(idx: np.ndarray, val: np.ndarray, shape) -> tuple:
    """Sorted, duplicate-free (indices, values): duplicates' values are summed."""
    sd = idx.shape[0]
    if idx.shape[1] == 0 or sd == 0:
        if sd == 0 and idx.shape[1] > 1:
            return idx[:, :1], val.sum(axis=0, keepdims=True)
        return idx, val
    lin = np.ravel_multi_index(tuple(idx), tuple(shape[:sd]))
    order = np.argsort(lin, kind="stable")
    lin = lin[order]
    starts = np.flatnonzero(np.concatenate(([True], lin[1:] != lin[:-1])))
    new_val = np.add.reduceat(val[order], starts, axis=0) if len(starts) else val[order]
    return idx[:, order[starts]], new_val.astype(val.dtype, copy=False)


def coalesced_arrays(idx: np.ndarray, val: np.ndarray, shape, coalesced: bool) -> tuple:
    """(indices, values) of a sparse tensor's entries coalesced: sorted, each position once
    with its duplicates' values summed (the arrays themselves when already so)."""
    return (idx, val) if coalesced else coalesce_arrays(idx, val, shape)


def _coalesced(s: SparseTensor) -> tuple:
    return (s._idx, s._val) if s._coal else coalesce_arrays(s._idx, s._val, s._sshape)


def dense_array(s: SparseTensor) -> np.ndarray:
    """The strided array of sparse tensor `s` (duplicates summed)."""
    out = np.zeros(s._sshape, dtype=s._val.dtype)
    if s._idx.shape[1]:
        np.add.at(out, tuple(s._idx), s._val)
    return out


def _linear(idx: np.ndarray, shape) -> np.ndarray:
    """Row-major positions of the entries in the sparse dims of `shape`."""
    if idx.shape[0] == 0:
        return np.zeros(idx.shape[1], dtype=np.int64)
    return np.ravel_multi_index(tuple(idx), tuple(shape[:idx.shape[0]])).astype(np.int64)


def _spmm_array(s: SparseTensor, d: np.ndarray) -> np.ndarray:
    """`s @ d` for a 2-D sparse `s` and a 2-D array `d`: each entry adds its value times
    row `col` of `d` into output row `row`."""
    rows, cols = s._idx
    out = np.zeros((s._sshape[0], d.shape[1]), dtype=np.result_type(s._val, d))
    if not len(rows):
        return out
    parts = s._val[:, None] * d[cols]
    if s._coal:  # sorted by row: one segment sum per stored row
        starts = np.flatnonzero(np.concatenate(([True], rows[1:] != rows[:-1])))
        out[rows[starts]] = np.add.reduceat(parts, starts, axis=0)
    else:
        np.add.at(out, rows, parts)
    return out


def _check_mm(s, d) -> None:
    if s.dim() != 2 or d.dim() != 2:
        bad = s if s.dim() != 2 else d
        raise RuntimeError(f"{'self' if bad is s else 'mat2'} must be a matrix")
    if s.shape[1] != d.shape[0]:
        raise RuntimeError(f"addmm: Argument #3 (dense): Expected dim 0 size {s.shape[1]}, "
                           f"got {d.shape[0]}")


def _need_2d_sparse(s) -> None:
    if s.sparse_dim() != 2 or s.dense_dim() != 0:
        raise RuntimeError(
            f"addmm: matrices expected, got {s.sparse_dim()}D tensor")


# ---------------------------------------------------------------- derivative helpers


def _gather(g, idx: np.ndarray, shape):
    """The entries of gradient `g` (dense or sparse) at the positions `idx` of a sparse
    tensor of `shape`: its values' gradient, shape (nnz, *dense sizes)."""
    if isinstance(g, SparseTensor):
        g = run(to_dense_op, g)
    sd = idx.shape[0]
    flat = g.reshape((-1,) + tuple(shape[sd:]))
    return flat.index_select(0, _tensor(_linear(idx, shape)))


def _masked(g, s_idx: np.ndarray, shape):
    """Gradient `g` restricted to the (coalesced) pattern `s_idx`: a sparse tensor."""
    # PyTorch marks these masked gradients uncoalesced although their entries are unique
    return run(coo_new, _tensor(s_idx), _gather(g, s_idx, shape), tuple(shape), False)


def _sparse_t_mm(s_idx, s_val, k: int, g):
    """`s.T @ g` for the entries (s_idx, s_val) of a 2-D sparse `s` with k columns."""
    rows, cols = _tensor(s_idx[0]), _tensor(s_idx[1])
    parts = g.index_select(0, rows) * _tensor(s_val)[:, None]
    out = g.new_zeros((k, g.shape[1]))
    return out.index_add(0, cols, parts)


# ---------------------------------------------------------------- the constructor


def _coo_kernel(indices, values, size, coalesced):
    return _sparse.make(indices._data, values._data, size, coalesced, values._dtype)


coo_new = OpDef(
    "_sparse_coo_tensor_with_dims_and_tensors", kernel=_coo_kernel, meta=_no_meta,
    node="SparseCooTensorWithDimsAndTensorsBackward0", nondiff_args=(0,),
    derivative=lambda g, idx, size: (None, _gather(g, idx, size), None, None),
    save=lambda out, indices, values, size, coalesced: (indices._data, size))


# ---------------------------------------------------------------- layout conversions


def _to_dense_kernel(s):
    return Tensor._make(dense_array(s), s._dtype)


to_dense_op = OpDef(
    "_to_dense", kernel=_to_dense_kernel, meta=_no_meta, node="ToDenseBackward0",
    derivative=lambda g, idx, shape: (_masked(g, idx, shape),),
    save=lambda out, s: (_coalesced(s)[0], s._sshape))


def _to_sparse_arrays(a: np.ndarray, sparse_dim: int) -> tuple:
    lead = a.shape[:sparse_dim]
    flat = a.reshape((int(np.prod(lead, dtype=np.int64)),) + a.shape[sparse_dim:])
    keep = np.flatnonzero(flat.reshape(flat.shape[0], -1).any(axis=1)) if flat.size else \
        np.zeros(0, dtype=np.int64)
    idx = np.array(np.unravel_index(keep, lead), dtype=np.int64).reshape(sparse_dim, -1)
    return idx, np.ascontiguousarray(flat[keep])


def _to_sparse_kernel(a, sparse_dim=None):
    k = a.dim() if sparse_dim is None else sparse_dim
    if not 0 <= k <= a.dim():
        raise RuntimeError(f"dense_to_sparse: sparse_dim argument must be in [0,{a.dim()}] "
                           f"range, but {k} is given")
    idx, val = _to_sparse_arrays(a._data, k)
    return _sparse.make(idx, val, a.shape, True, a._dtype)


to_sparse_op = OpDef(
    "_to_sparse", kernel=_to_sparse_kernel, meta=_no_meta, node="ToSparseBackward1",
    derivative=lambda g: (run(to_dense_op, g),), save=lambda out, a: ())
to_sparse_dim_op = OpDef(
    "_to_sparse.sparse_dim", kernel=_to_sparse_kernel, meta=_no_meta, node="ToSparseBackward0",
    derivative=lambda g: (run(to_dense_op, g), None), save=lambda out, a, k: ())


def _coalesce_kernel(s):
    idx, val = coalesce_arrays(s._idx, s._val, s._sshape)
    return _sparse.make(idx, val, s._sshape, True, s._dtype)


coalesce_op = OpDef("_coalesce", kernel=_coalesce_kernel, meta=_no_meta,
                    node="CoalesceBackward0", derivative=lambda g: (g,))


def _values_kernel(s):
    if not s._coal:
        raise RuntimeError(
            "Cannot get values on an uncoalesced tensor, please call .coalesce() first")
    return Tensor._make(s._val, s._dtype)


values_op = OpDef(
    "values", kernel=_values_kernel, meta=_no_meta, node="ValuesBackward0",
    derivative=lambda g, idx, shape: (run(coo_new, _tensor(idx), g, shape, True),),
    save=lambda out, s: (s._idx, s._sshape))


# ---------------------------------------------------------------- products


def _addmm_kernel(bias, s, d, beta=1, alpha=1):
    _need_2d_sparse(s)
    _check_mm(s, d)
    prod = _spmm_array(s, d._data)
    if alpha != 1:
        prod = prod * alpha
    b = bias._data if not isinstance(bias, SparseTensor) else dense_array(bias)
    out = prod if beta == 0 else prod + (b * beta if beta != 1 else b)
    return Tensor._make(np.asarray(np.broadcast_to(out, prod.shape), dtype=prod.dtype).copy())


def _addmm_grads(g, s_idx, s_val, shape, d, beta, alpha):
    gs = None
    if d is not None:
        rows, cols = _tensor(s_idx[0]), _tensor(s_idx[1])
        vals = (g.index_select(0, rows) * d.index_select(0, cols)).sum(1)
        if alpha != 1:
            vals = vals * alpha
        gs = run(coo_new, _tensor(s_idx), vals, tuple(shape), False)
    gd = _sparse_t_mm(s_idx, s_val, shape[1], g)
    if alpha != 1:
        gd = gd * alpha
    return (g * beta if beta != 1 else g), gs, gd, None, None


addmm_op = OpDef(
    "_sparse_addmm", kernel=_addmm_kernel, meta=_no_meta, node="SparseAddmmBackward0",
    derivative=_addmm_grads,
    save=lambda out, bias, s, d, beta=1, alpha=1: (*_coalesced(s), s._sshape,
                                                   d if s._rg else None, beta, alpha))
