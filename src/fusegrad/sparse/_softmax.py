"""`fusegrad.sparse.softmax` and `log_softmax` of sparse COO tensors, as PyTorch's: the
entries not stored count as minus infinity, so each slice along `dim` is normalised over its
stored entries only, and the result keeps the (coalesced) input's pattern. The gradient of
the input is sparse, on that pattern (`SparseSoftmaxBackward0`,
`SparseLogSoftmaxBackward0`).
"""

from __future__ import annotations

import numpy as np

from .. import _sparse
from .._shapes import wrap_dim
from .._sparse import SparseTensor, backend_error
from .._tensor import Tensor
from ..ops.registry import OpDef
from ..ops.sparse import _coalesced, _gather, _no_meta, run


def _groups(idx: np.ndarray, shape, dim: int) -> tuple:
    """(group of each entry, number of groups): entries in one slice along sparse `dim`
    share every other sparse index."""
    others = [k for k in range(idx.shape[0]) if k != dim]
    if not others:
        return np.zeros(idx.shape[1], np.int64), 1
    keys = np.ravel_multi_index(tuple(idx[others]), tuple(shape[k] for k in others))
    uniq, gid = np.unique(keys, return_inverse=True)
    return gid.reshape(-1), len(uniq)


def _group_sum(x: np.ndarray, gid, n: int) -> np.ndarray:
    out = np.zeros((n,) + x.shape[1:], x.dtype)
    np.add.at(out, gid, x)
    return out[gid]


def _forward(val: np.ndarray, idx: np.ndarray, shape, dim: int, log: bool) -> np.ndarray:
    sd = idx.shape[0]
    if dim >= sd:  # a dense dimension: within each entry's values
        ax = dim - sd + 1
        m = val.max(axis=ax, keepdims=True) if val.size else val
        z = val - m
        s = np.exp(z).sum(axis=ax, keepdims=True)
    else:
        gid, n = _groups(idx, shape, dim)
        m = np.full((n,) + val.shape[1:], -np.inf, val.dtype)
        np.maximum.at(m, gid, val)
        z = val - m[gid]
        s = _group_sum(np.exp(z), gid, n)
    return z - np.log(s) if log else np.exp(z) / s


def _backward(gy: np.ndarray, y: np.ndarray, idx: np.ndarray, shape, dim: int,
              log: bool) -> np.ndarray:
    sd = idx.shape[0]
    if dim >= sd:
        ax = dim - sd + 1

        def total(x):
            return x.sum(axis=ax, keepdims=True)
    else:
        gid, n = _groups(idx, shape, dim)

        def total(x):
            return _group_sum(x, gid, n)
    if log:
        return gy - np.exp(y) * total(gy)
    return y * (gy - total(gy * y))


def _kernel(s, dim: int, log: bool):
    idx, val = _coalesced(s)
    return _sparse.make(idx, _forward(val, idx, s._sshape, dim, log), s._sshape, True,
                        s._dtype)


def _derivative(g, out, dim: int, log: bool):
    gy = _gather(g, out._idx, out._sshape)._data
    gx = _backward(gy, out._val, out._idx, out._sshape, dim, log)
    return (_sparse.make(out._idx, gx.astype(out._val.dtype, copy=False), out._sshape, True,
                         out._dtype), None, None)


_softmax_op = OpDef("_sparse_softmax", kernel=_kernel, meta=_no_meta,
                    node="SparseSoftmaxBackward0", derivative=_derivative,
                    save=lambda out, s, dim, log: (out, dim, log))
_log_softmax_op = OpDef("_sparse_log_softmax", kernel=_kernel, meta=_no_meta,
                        node="SparseLogSoftmaxBackward0", derivative=_derivative,
                        save=lambda out, s, dim, log: (out, dim, log))


def _run(name: str, op, input: Tensor, dim: int, dtype, log: bool) -> Tensor:
    if not isinstance(input, SparseTensor):
        raise backend_error(name, "CPU")
    dim = wrap_dim(dim, input.dim())
    if dtype is not None:
        input = input.to(dtype)
    return run(op, input, dim, log)


def softmax(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """Softmax along `dim` over each slice's stored entries (the others count as -inf)."""
    return _run("_sparse_softmax", _softmax_op, input, dim, dtype, False)


def log_softmax(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """Log-softmax along `dim` over each slice's stored entries (the others as -inf)."""
    return _run("_sparse_log_softmax", _log_softmax_op, input, dim, dtype, True)
