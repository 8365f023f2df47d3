"""Embedding lookup as one op, `embedding` (`EmbeddingBackward0`), and its backward
`embedding_dense_backward`, an op of its own so that double backward records it. With
`sparse=True` the weight's gradient is a sparse COO tensor instead (`sparse_weight_grad`).
"""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype
from ._util import HALF, Spec, add_rows, index_out_of_range, rand_array
from .nn import _call, _work
from .registry import Sample, register

# ---------------------------------------------------------------- embedding

def check_index_dtype(dtype, position: int, op: str) -> None:
    """PyTorch's error for a lookup's index tensor that is neither int64 nor int32 (`dtype`
    a fusegrad dtype or a NumPy one), naming it as its kernel checks do."""
    dt = dtype if isinstance(dtype, _dtype.dtype) else _dtype.from_numpy_dtype(dtype)
    if dt.name in ("int64", "int32"):
        return
    raise RuntimeError(
        f"Expected tensor for argument #{position} 'indices' to have one of the following "
        f"scalar types: Long, Int; but got {dt.tensor_type_name} instead (while checking "
        f"arguments for {op})")


def _check_indices(idx, n):
    if index_out_of_range(idx, n) is not None:  # negative rows are out of range too
        raise IndexError("index out of range in self")


def _check_weight(w) -> None:
    """PyTorch's refusal of a weight that is not a matrix (before the index checks)."""
    if len(w.shape) != 2:
        raise RuntimeError("'weight' must be 2-D")


def _embedding_kernel(w, idx, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    _check_weight(w)
    check_index_dtype(idx.dtype, 1, "embedding")
    _check_indices(idx, w.shape[0])
    return w[idx]


def _embedding_meta(w, idx, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    _check_weight(w)
    return Spec(tuple(idx.shape) + tuple(w.shape[1:]), w.dtype)


def _emb_backward_kernel(g, idx, num_weights, padding_idx, scale_grad_by_freq):
    flat = idx.reshape(-1).astype(np.int64)
    rows = g.reshape(flat.size, math.prod(g.shape[idx.ndim:]))  # (no -1: none may be empty)
    # A half type sums in its own type, row after row in lookup order (PyTorch's index_add
    # rounds each add, and each scaled row).
    half = g.dtype in HALF
    out = np.zeros((num_weights, rows.shape[1]), dtype=g.dtype if half else _work(g).dtype)
    scale = None
    if scale_grad_by_freq:  # each row added with alpha 1/(its index's count), as PyTorch's
        counts = np.bincount(flat % num_weights, minlength=num_weights)
        scale = (1.0 / np.maximum(counts, 1))[flat].astype(out.dtype)
    add_rows(out, flat, rows.astype(out.dtype, copy=False), scale)
    if padding_idx >= 0:
        out[padding_idx] = 0
    return out.astype(g.dtype, copy=False)


def _emb_backward_derivative(gg, idx, padding_idx, scale_grad_by_freq):
    out = _call(embedding, gg, idx)
    if padding_idx >= 0:
        out = out * (idx != padding_idx).unsqueeze(-1)
    return (out, None, None, None, None)


def _emb_backward_decomposition(g, idx, num_weights, padding_idx, scale_grad_by_freq):
    """Each index's gradient row accumulated into a zero weight gradient (index_put)."""
    flat = idx.reshape(-1)
    rows = g.reshape(flat.shape[0], -1)
    if padding_idx >= 0:  # the padding row gets no gradient
        rows = rows * (flat != padding_idx).unsqueeze(1)
    if scale_grad_by_freq:
        counts = flat.new_zeros((num_weights,)).index_put([flat], flat.new_ones(()), True)
        rows = rows / counts.index_select(0, flat).unsqueeze(1)
    return rows.new_zeros((num_weights, rows.shape[1])).index_put([flat], rows, True)


embedding_dense_backward = register(
    "embedding_dense_backward", kernel=_emb_backward_kernel,
    meta=lambda g, idx, n, p, s: Spec((n,) + tuple(g.shape[-1:]), g.dtype),
    node="EmbeddingDenseBackwardBackward0", derivative=_emb_backward_derivative,
    nondiff_args=(1,),  # (the indices: no edge, and on the CPU beside a meta gradient)
    save=lambda out, g, idx, n, p, s: (idx, p, s),
    samples=lambda rng, dt: [
        Sample((rand_array(rng, (2, 3, 4), dt), rng.integers(0, 5, (2, 3)), 5, p, s),
               name=f"pad={p} scale={s}") for p, s in ((-1, False), (2, False), (-1, True))],
    gradcheck=False, public="embedding_dense_backward",
    decomposition=_emb_backward_decomposition)


def sparse_weight_grad(rows, flat_idx, num_weights: int, padding_idx: int = -1):
    """The weight's gradient of a `sparse=True` lookup as PyTorch builds it: a COO tensor of
    size (num_weights, D) with one entry per looked-up index, in lookup order, uncoalesced
    (unless it has at most one entry); its values `rows` (nnz, D), the gradient rows of the
    lookups, kept as the view they are (PyTorch's values stay a view of the incoming
    gradient, which decides how later sums of such tensors order their entries). With a
    `padding_idx` (>= 0) its lookups are left out, the values gathered into a new array,
    as PyTorch does whether or not the padding index occurs. Recorded when `rows` has a
    history (double backward), as the sparse constructor (SparseCooTensorWith...)."""
    from .._tensor import Tensor
    from . import sparse as SP

    flat = np.asarray(flat_idx, dtype=np.int64).reshape(-1)
    if padding_idx >= 0:
        keep = np.flatnonzero(flat != padding_idx)
        flat = flat[keep]
        rows = rows.index_select(0, Tensor._make(keep))
    indices = Tensor._make(flat.reshape(1, -1))
    size = (num_weights,) + tuple(rows.shape[1:])
    return SP.run(SP.coo_new, indices, rows, size, flat.size <= 1)


def _embedding_derivative(g, idx, n, padding_idx, scale, sparse=False):
    if sparse:
        if scale:
            raise RuntimeError(
                "embedding_backward: scale_grad_by_freq not supported with sparse gradients")
        # (a view of `g` when one can be, as PyTorch's `reshape`: see sparse_weight_grad)
        rows = g.reshape(idx.numel(), g.shape[-1])
        return (sparse_weight_grad(rows, idx._data, n, padding_idx), None, None, None, None)
    return (_call(embedding_dense_backward, g, idx, n, padding_idx, scale), None, None, None,
            None)


def _embedding_onnx(b, inputs, args, kwargs, opset):
    """Gather of the weight's rows (padding_idx only matters for the gradient)."""
    return b.emit("Gather", [inputs[0], inputs[1]], axis=0)


embedding = register(
    "embedding", kernel=_embedding_kernel, meta=_embedding_meta, node="EmbeddingBackward0",
    nondiff_args=(1,),
    derivative=_embedding_derivative,
    save=lambda out, w, idx, padding_idx=-1, scale_grad_by_freq=False, sparse=False: (
        idx, w.shape[0], padding_idx, scale_grad_by_freq, bool(sparse)),
    samples=lambda rng, dt: [
        Sample((rand_array(rng, (6, 3), dt), rng.integers(0, 6, s)), name=str(s))
        for s in ((4,), (2, 3), ())],
    onnx=_embedding_onnx, public="embedding", forward_ad="lookup",
    saved_names=("indices", "weight_sym_argsize_0", "padding_idx", "scale_grad_by_freq",
                 "sparse"))


# ---------------------------------------------------------------- embedding_renorm_


def _renorm_check(w, idx) -> None:
    """embedding_renorm_'s argument errors (kernel and meta alike)."""
    check_index_dtype(idx.dtype, 2, "embedding_renorm_")  # a fake's dtype, or an array's
    if len(w.shape) != 2:
        raise RuntimeError(f"Expected 2-dimensional tensor, but got {len(w.shape)}-dimensional "
                           "tensor for argument #1 'self' (while checking arguments for "
                           "embedding_renorm_)")


def _renorm_kernel(w, idx, max_norm, norm_type):
    """The rows of `w` named in `idx` whose `norm_type`-norm exceeds `max_norm`, scaled to
    `max_norm` (with PyTorch's 1e-7 guard in the divisor); the other rows as they are."""
    _renorm_check(w, idx)
    rows = np.unique(idx.reshape(-1).astype(np.int64))
    if rows.size and (rows[-1] >= w.shape[0] or rows[0] < -w.shape[0]):
        bad = rows[-1] if rows[-1] >= w.shape[0] else rows[0]
        raise IndexError(f"select(): index {bad} out of range for tensor of size "
                         f"[{w.shape[0]}, {w.shape[1]}] at dimension 0")
    out = w.copy()
    sel = _work(w[rows])
    p = float(norm_type)
    if p == float("inf"):
        norms = np.abs(sel).max(axis=1, initial=0.0)
    elif p == 0:
        norms = (sel != 0).sum(axis=1).astype(sel.dtype)
    else:
        norms = (np.abs(sel) ** p).sum(axis=1) ** (1.0 / p)
    big = norms > max_norm
    scale = max_norm / (norms[big].astype(np.float64) + 1e-7)  # in double, as PyTorch's
    out[rows[big]] = (sel[big] * scale[:, None].astype(sel.dtype)).astype(w.dtype)
    return out


def _renorm_meta(w, idx, max_norm, norm_type):
    _renorm_check(w, idx)
    return Spec(tuple(w.shape), w.dtype)


def _renorm_derivative(g, *rest):
    raise NotImplementedError("the derivative for 'embedding_renorm' is not implemented.")


embedding_renorm_ = register(
    "embedding_renorm_", kernel=_renorm_kernel, meta=_renorm_meta, inplace=True,
    node="EmbeddingRenormBackward0", derivative=_renorm_derivative,
    save=lambda out, w, idx, max_norm, norm_type: (), nondiff_args=(1,), gradcheck=False,
    samples=lambda rng, dt: [
        Sample((rand_array(rng, (6, 4), dt, (-2, 2)), rng.integers(0, 6, s), m, p),
               name=f"{s} max_norm={m} p={p}")
        for s, m, p in (((4,), 1.0, 2.0), ((2, 3), 0.5, 1.0), ((5,), 1.5, 3.0),
                        ((3,), 1.0, float("inf")), ((0,), 1.0, 2.0))],
    public="embedding_renorm_")
