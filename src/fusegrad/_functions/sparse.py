"""The public sparse COO surface: `sparse_coo_tensor`, `spmm`, and the Tensor methods that
convert between layouts or read a sparse tensor's parts (`to_sparse`, `to_dense`,
`to_sparse_csr`, `coalesce`, `indices`, `values`, `crow_indices`, `sparse_dim`, ...),
with PyTorch's answers and errors for strided tensors. The ops themselves are in
`fusegrad.ops.sparse`; CSR matrices in `fusegrad.sparse._csr`.
"""

from __future__ import annotations

import numbers

import numpy as np

from .. import _dtype, _sparse
from .._sparse import SparseTensor, backend_error, sparse_coo, sparse_csr, strided
from .._tensor import Tensor
from .._torch_function import warn_once_at
from ..ops import sparse as SP
from .linear_algebra import mm


def _as_tensor(data, dtype=None) -> Tensor:
    if isinstance(data, Tensor):
        return data
    from .._creation import tensor

    return tensor(data, dtype=dtype)


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None,
                      pin_memory=False, requires_grad=False, check_invariants=None,
                      is_coalesced=None) -> SparseTensor:
    """A sparse COO tensor with `values` at `indices` (sparse_dim x nnz)."""
    if device is not None:
        from .._device import device as _device

        _device(device)._check_available()
    indices = _as_tensor(indices)
    values = _as_tensor(values, dtype)
    if dtype is not None and values.dtype is not dtype:
        values = values.to(dtype)
    if indices.dtype is not _dtype.int64:
        indices = Tensor._make(indices._data.astype(np.int64))
    if indices.dim() != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(indices.shape)}")
    sd, nnz = indices.shape
    if values.dim() == 0 or values.shape[0] != nnz:
        got = values.shape[0] if values.dim() else 1
        raise RuntimeError(f"indices and values must have same nnz, but got nnz from indices: "
                           f"{nnz}, nnz from values: {got}")
    dense = tuple(values.shape[1:])
    idx = indices._data
    if size is None:
        lead = tuple(int(m) + 1 for m in idx.max(axis=1)) if nnz else (0,) * sd
        size = lead + dense
    else:
        size = tuple(int(s) for s in size)
        if len(size) != sd + len(dense):
            raise RuntimeError(
                f"'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = "
                f"{len(size)}, sparse_dim = {sd}, dense_dim = {len(dense)}")
    if check_invariants:
        _check_invariants(idx, size)
    elif check_invariants is None:
        _sparse._warn_checks_disabled()
    if requires_grad and values.dtype.category != _dtype.FLOAT:
        raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                           "gradients")
    result = SP.run(SP.coo_new, indices, values, size, bool(is_coalesced))
    if requires_grad:
        result._rg = True
    return result


def _check_invariants(idx: np.ndarray, size: tuple) -> None:
    for d in range(idx.shape[0]):
        row = idx[d]
        if row.size and row.min() < 0:
            raise RuntimeError(f"found negative index {int(row.min())} for dim {d}")
        if row.size and row.max() >= size[d]:
            raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is "
                               f"{size[d]} but found index {int(row.max())}")


def spmm(input, mat2) -> Tensor:
    """Matrix product of a sparse (or strided) matrix and a strided one."""
    return mm(input, mat2)


# ---------------------------------------------------------------- Tensor methods


def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """This tensor in the sparse COO layout (`sparse_dim` leading dims indexed)."""
    if layout is sparse_csr:
        return to_sparse_csr(self)
    if layout is not None and layout is not sparse_coo:
        raise RuntimeError(f"to_sparse: layout {layout} is not supported")
    if isinstance(self, SparseTensor):
        if sparse_dim is None or sparse_dim == self.sparse_dim():
            return self
        raise RuntimeError("to_sparse: conversion from Sparse to Sparse with sparse_dim "
                           "argument !=self.sparse_dim() is not supported")
    if sparse_dim is None:
        return SP.run(SP.to_sparse_op, self)
    if isinstance(sparse_dim, bool) or not isinstance(sparse_dim, numbers.Integral):
        raise TypeError("to_sparse(): argument 'sparse_dim' must be int")
    return SP.run(SP.to_sparse_dim_op, self, int(sparse_dim))


def to_sparse_coo(self):
    """This tensor in the sparse COO layout (itself when it is one): `to_sparse()`."""
    return to_sparse(self)


def to_sparse_csr(self, dense_dim=None):
    """This matrix in the sparse CSR layout (`fusegrad.sparse._csr`)."""
    from ..sparse._csr import to_sparse_csr as convert  # (its ops load on first use)

    out = convert(self, dense_dim)
    if out is not self:
        # PyTorch's, once, as it makes a CSR tensor (its note of where is left out).
        warn_once_at(2, "Sparse CSR tensor support is in beta state. If you miss a "
                     "functionality in the sparse tensor support, please submit a feature "
                     "request to https://github.com/pytorch/pytorch/issues.")
    return out


def _compressed(name: str):
    def fn(self) -> Tensor:
        kind = "Sparse" if isinstance(self, SparseTensor) else "Strided"
        raise RuntimeError(f"{name} expected sparse row compressed tensor layout but got "
                           f"{kind}")

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Raises: only a sparse CSR tensor has {name}."
    return fn


crow_indices = _compressed("crow_indices")
col_indices = _compressed("col_indices")


def to_dense(self, dtype=None, *, masked_grad=None) -> Tensor:
    """A strided tensor with this tensor's values (itself when it is strided)."""
    if not isinstance(self, SparseTensor):
        return self if dtype is None else self.to(dtype)
    out = SP.run(SP.to_dense_op, self)
    return out if dtype is None else out.to(dtype)


def coalesce(self):
    """The sparse tensor with sorted, unique indices (duplicates summed)."""
    if not isinstance(self, SparseTensor):
        raise RuntimeError("coalesce expected sparse coordinate tensor layout but got Strided")
    return self if self._coal else SP.run(SP.coalesce_op, self)


def indices(self) -> Tensor:
    """Raises for a strided tensor (sparse tensors answer with their indices)."""
    raise RuntimeError("indices expected sparse coordinate tensor layout but got Strided")


def values(self) -> Tensor:
    """The stored values of a coalesced sparse tensor (differentiable)."""
    if not isinstance(self, SparseTensor):
        raise RuntimeError("values expected sparse tensor layout but got Strided")
    return SP.run(SP.values_op, self)


def _indices(self) -> Tensor:
    raise backend_error("_indices", "CPU")


def _values(self) -> Tensor:
    raise backend_error("_values", "CPU")


def _nnz(self) -> int:
    raise backend_error("_nnz", "CPU")


def sparse_dim(self) -> int:
    """0: a strided tensor has no sparse dimensions."""
    return 0


def dense_dim(self) -> int:
    """Every dimension of a strided tensor is dense."""
    return self.ndim


def _layout(self):
    """`fusegrad.strided`."""
    return strided


def attach() -> None:
    """Put the layout methods on Tensor (SparseTensor overrides the metadata ones)."""
    for fn in (to_sparse, to_dense, coalesce, indices, values, _indices, _values, _nnz,
               sparse_dim, dense_dim, to_sparse_coo, to_sparse_csr, crow_indices, col_indices):
        setattr(Tensor, fn.__name__, fn)
    Tensor.layout = property(_layout, doc="How the elements are stored.")


attach()
