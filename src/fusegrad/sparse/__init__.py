"""`fusegrad.sparse`, as `torch.sparse`: products and sums whose sparse operand keeps its
layout in the gradient (the gradient of a sparse input is sparse, on the input's pattern)."""

from __future__ import annotations

from .._legacy_types import SPARSE_TYPES
from .._sparse import SparseTensor
from .._tensor import Tensor
from ..ops import sparse as _ops
from ..ops.sparse_twins import sparse_sum_op
from ._softmax import log_softmax, softmax

__all__ = ["addmm", "log_softmax", "mm", "softmax", "sum"]


def mm(mat1: Tensor, mat2: Tensor) -> Tensor:
    """`mat1 @ mat2` for a sparse (or strided) `mat1`; records SparseAddmmBackward0."""
    if not isinstance(mat1, SparseTensor):
        return mat1.mm(mat2)
    bias = mat2.new_zeros((mat1.shape[0], mat2.shape[-1]))
    return _ops.run(_ops.addmm_op, bias, mat1, mat2, 0, 1)


def addmm(mat: Tensor, mat1: Tensor, mat2: Tensor, *, beta: float = 1.0,
          alpha: float = 1.0) -> Tensor:
    """`beta * mat + alpha * (mat1 @ mat2)` for a sparse (or strided) `mat1`."""
    if not isinstance(mat1, SparseTensor):
        from .. import addmm as _dense_addmm

        return _dense_addmm(mat, mat1, mat2, beta=beta, alpha=alpha)
    return _ops.run(_ops.addmm_op, mat, mat1, mat2, beta, alpha)


def sum(input: Tensor, dim=None, dtype=None) -> Tensor:  # noqa: A001
    """The sum of a sparse tensor's values, over all of it or over `dim`."""
    if not isinstance(input, SparseTensor):
        raise RuntimeError("coalesce expected sparse coordinate tensor layout but got Strided")
    if dtype is not None:
        input = input.to(dtype)
    if dim is None:
        return input.sum()
    return _ops.run(sparse_sum_op, input, dim)


# `FloatTensor`, `LongTensor`, ...: the legacy typed classes of sparse COO tensors.
globals().update(SPARSE_TYPES)
