"""Sparse CSR matrices (`fusegrad.sparse_csr`): row offsets, column indices and values, as
PyTorch's `torch.sparse_csr`, for 2-D tensors without dense dimensions.

A `SparseCsrTensor` holds no strided data: `_crow` (rows + 1 offsets) and `_col` (one per
entry) are int64 arrays, `_val` the entries' values, row by row, columns sorted. It converts
to and from strided and COO tensors (`to_dense`, `to_sparse`, `to_sparse_csr`) and multiplies
a strided matrix on either side (`mm`, `@`: the gradient of the strided operand is recorded,
`MmBackward0`). The ops that work on the arrays as they stand run too: `add` (CSR + CSR is
CSR on the union of the patterns, with a strided operand strided), `mul` (by a number or 0-d
tensor, a strided matrix or CSR: CSR on the CSR pattern or the patterns' intersection), `neg`
and `sum()` (a strided 0-d). Any other op raises PyTorch's "no kernel for the 'SparseCsrCPU'
backend" error (`t()`, whose result PyTorch gives in the CSC layout, among them). CSR tensors
take no part in autograd themselves: converting a tensor that requires grad (in grad mode)
raises rather than dropping its gradient, and so does `mul` by a tensor that requires grad.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype, _sparse
from .._dtype import FROM_NP
from .._scalar_conversion import not_implemented_for
from .._sparse import SparseLayoutTensor, SparseTensor, backend_error, sparse_csr
from .._tensor import Tensor
from .._thread_state import local as _local
from ..ops.arithmetic import alpha_refusal
from ..ops.registry import OpDef
from ..ops.sparse import _no_meta
from ..ops.sparse_twins import _scaled, add_twin, mm_twin


class SparseCsrTensor(SparseLayoutTensor):
    """A 2-D sparse CSR tensor: `_crow` (rows + 1,), `_col` (nnz,), `_val` (nnz,)."""

    __slots__ = ("_crow", "_col", "_val")

    @classmethod
    def _new(cls, crow: np.ndarray, col: np.ndarray, val: np.ndarray, shape,
             dtype=None) -> SparseCsrTensor:
        t = Tensor._make.__func__(cls, None, dtype or FROM_NP[val.dtype])
        t._crow, t._col, t._val = crow, col, val
        t._sshape = tuple(int(s) for s in shape)
        return t

    # ------------------------------------------------------------ dispatch

    @classmethod
    def _op_for(cls, op):
        """`mm` (a strided matrix on the other side); PyTorch's backend error for the rest."""
        twin = _TWINS.get(op.name)
        if twin is not None:
            return twin
        raise backend_error(op.name.split(".")[0], "SparseCsrCPU")

    # ------------------------------------------------------------ metadata

    @property
    def ndim(self) -> int:
        return 2

    def dim(self) -> int:
        return 2

    ndimension = dim

    def numel(self) -> int:
        return self._sshape[0] * self._sshape[1]

    nelement = numel

    def __len__(self) -> int:
        return self._sshape[0]

    @property
    def layout(self):
        """`fusegrad.sparse_csr`."""
        return sparse_csr

    @property
    def is_sparse(self) -> bool:
        """False: `is_sparse` answers for the COO layout only."""
        return False

    @property
    def is_sparse_csr(self) -> bool:
        """True."""
        return True

    def sparse_dim(self) -> int:
        """2: rows and columns are compressed."""
        return 2

    def dense_dim(self) -> int:
        """0: each entry is one value."""
        return 0

    def _nnz(self) -> int:
        """Number of stored entries."""
        return self._col.shape[0]

    def stride(self, dim=None):
        raise RuntimeError("Sparse CSR tensors do not have strides")

    def is_contiguous(self, memory_format=None) -> bool:
        raise RuntimeError("Sparse CSR tensors do not have is_contiguous")

    def storage_offset(self) -> int:
        return 0

    def untyped_storage(self):
        raise NotImplementedError("Cannot access storage of SparseCsrTensorImpl")

    def data_ptr(self) -> int:
        return self._data_dependent("data_ptr")

    def _data_dependent(self, what: str):
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")

    def numpy(self, *, force: bool = False):
        raise TypeError("can't convert SparseCsr layout tensor to numpy. Use "
                        "Tensor.to_dense() first.")

    def reshape(self, *shape):
        raise RuntimeError("reshape is not implemented for sparse tensors")

    def __deepcopy__(self, memo):
        return self.untyped_storage()  # raises, as PyTorch's deepcopy reaches the storage

    def _item(self):
        if self.numel() != 1:
            raise RuntimeError(
                f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
        return self.to_dense()._item()

    def __bool__(self) -> bool:
        if self.numel() != 1:
            what = "no values" if self.numel() == 0 else "more than one value"
            raise RuntimeError(f"Boolean value of Tensor with {what} is ambiguous")
        return bool(self.to_dense())

    def __reduce_ex__(self, protocol):
        from .._tensor import rebuild_tensor

        return (_rebuild_csr, tuple(rebuild_tensor(np.array(a), dt, False) for a, dt in (
            (self._crow, "int64"), (self._col, "int64"), (self._val, self._dtype.name))) +
            (self._sshape,))

    # ------------------------------------------------------------ components

    def crow_indices(self) -> Tensor:
        """The row offsets (entries of row i: crow[i] to crow[i + 1]), sharing memory."""
        return Tensor._make(self._crow)

    def col_indices(self) -> Tensor:
        """Each entry's column, sharing memory."""
        return Tensor._make(self._col)

    def values(self) -> Tensor:
        """The entries' values, row by row, sharing memory."""
        return Tensor._make(self._val, self._dtype)

    def indices(self) -> Tensor:
        raise RuntimeError("indices expected sparse coordinate tensor layout but got "
                           "SparseCsr")

    def _rows(self) -> np.ndarray:
        return np.repeat(np.arange(self._sshape[0], dtype=np.int64), np.diff(self._crow))

    def to_dense(self, dtype=None, *, masked_grad=None) -> Tensor:
        """The strided matrix."""
        out = np.zeros(self._sshape, self._val.dtype)
        np.add.at(out, (self._rows(), self._col), self._val)
        t = Tensor._make(out, self._dtype)
        return t if dtype is None else t.to(dtype)

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        """This matrix as sparse COO (coalesced), or itself for `layout=sparse_csr`."""
        if layout is sparse_csr:
            return self
        if layout is not None and layout is not _sparse.sparse_coo:
            raise RuntimeError(f"to_sparse: layout {layout} is not supported")
        idx = np.stack([self._rows(), self._col])
        return _sparse.make(idx, self._val, self._sshape, True, self._dtype)

    def to_sparse_csr(self, dense_dim=None) -> SparseCsrTensor:
        """Itself."""
        return self

    def __repr__(self, *, tensor_contents=None) -> str:
        indent = len("tensor(")
        parts = []
        for name, arr, dt in (("crow_indices", self._crow, "int64"),
                              ("col_indices", self._col, "int64"),
                              ("values", self._val, self._dtype.name)):
            text = _sparse._component_text(arr, dt, indent + len(name) + len("=tensor("))
            parts.append(f"{name}=tensor({text})")
        items = [f"size={self._sshape}", f"nnz={self._nnz()}"]
        if self._dtype.name not in (_dtype.defaults.float.name, "int64", "bool"):
            items.append(f"dtype=torch.{self._dtype.name}")
        items.append("layout=torch.sparse_csr")
        from .._printing import _OPTIONS

        text = "tensor(" + (",\n" + " " * indent).join(parts)
        return _sparse._close_forced(text, items, indent, _OPTIONS.linewidth, force=False)

    __str__ = __repr__


def _rebuild_csr(crow, col, values, size) -> SparseCsrTensor:
    """Unpickle a CSR tensor."""
    return SparseCsrTensor._new(crow._data, col._data, values._data, size, values._dtype)


def to_sparse_csr(self, dense_dim=None) -> SparseCsrTensor:
    """A strided or COO matrix in the CSR layout (duplicates summed)."""
    if isinstance(self, SparseCsrTensor):
        return self
    if dense_dim is not None:
        raise NotImplementedError("to_sparse_csr: dense dimensions are not supported")
    if self.requires_grad and _local.grad_mode:
        raise NotImplementedError(
            "to_sparse_csr: a tensor that requires grad cannot be converted, as sparse CSR "
            "tensors take no part in autograd here (detach it first)")
    if isinstance(self, SparseTensor):
        if self.dense_dim():
            raise NotImplementedError("to_sparse_csr: dense dimensions are not supported")
        coo = self.coalesce()
        if coo.dim() != 2:
            raise RuntimeError(f"Only 2D tensors can be converted to the SparseCsr layout but "
                               f"got shape: {list(coo.shape)}")
        rows, col, val = coo._idx[0], coo._idx[1].copy(), coo._val.copy()
    else:
        if self.dim() == 1:  # (PyTorch's: it reads a 1-D tensor as rows of one column)
            raise IndexError(f"select(): index 1 out of range for tensor of size "
                             f"[{self.shape[0]}, 1] at dimension 1")
        if self.dim() != 2:
            raise NotImplementedError("to_sparse_csr: only 2-D tensors are supported")
        data = self.detach().contiguous().numpy()
        rows, col = np.nonzero(data)
        val = data[rows, col]
        col = col.astype(np.int64)
    crow = np.zeros(self.shape[0] + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=self.shape[0]), out=crow[1:])
    return SparseCsrTensor._new(crow, col, val, tuple(self.shape), self._dtype)


# ---------------------------------------------------------------- mm


def _as_coo(a):
    return a.to_sparse() if isinstance(a, SparseCsrTensor) else a


def _mm_kernel(a, b):
    if isinstance(a, SparseCsrTensor) and isinstance(b, SparseCsrTensor):
        return to_sparse_csr(mm_twin.kernel(a.to_sparse(), b.to_sparse()))
    return mm_twin.kernel(_as_coo(a), _as_coo(b))


def _mm_grads(g, a, b):
    # The strided operand's gradient: the COO product's (a CSR operand needs none).
    return mm_twin.derivative(g, _as_coo(a), _as_coo(b))


_csr_mm = OpDef("mm", kernel=_mm_kernel, meta=_no_meta, node="MmBackward0",
                derivative=_mm_grads, save=lambda out, a, b: (a, b))


# ---------------------------------------------------------------- elementwise


def _keys(t: SparseCsrTensor) -> np.ndarray:
    """Each entry's flat position (row-major), increasing as the entries are stored."""
    return t._rows() * t._sshape[1] + t._col


def _from_keys(keys: np.ndarray, val: np.ndarray, shape, dt) -> SparseCsrTensor:
    rows, col = np.divmod(keys, max(shape[1], 1))
    crow = np.zeros(shape[0] + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=shape[0]), out=crow[1:])
    return SparseCsrTensor._new(crow, col.astype(np.int64), val, shape, dt)


def _no_grad_operand(t, name: str) -> None:
    if isinstance(t, Tensor) and t.requires_grad and _local.grad_mode:
        raise NotImplementedError(
            f"{name}: a sparse CSR operand with a tensor that requires grad is not supported, "
            f"as sparse CSR tensors take no part in autograd here")


def _add_kernel(a, b, alpha=1):
    if isinstance(a, SparseTensor) or isinstance(b, SparseTensor):
        raise backend_error("add", "SparseCsrCPU")  # (PyTorch fails an internal assert)
    ca, cb = isinstance(a, SparseCsrTensor), isinstance(b, SparseCsrTensor)
    if not (ca and cb):  # PyTorch names the strided operand (or number) `self` here
        strided, csr = (b, a) if ca else (a, b)
        shape = list(strided.shape) if isinstance(strided, Tensor) else []
        if shape != list(csr.shape):
            raise RuntimeError(
                f"add: expected 'self' and 'other' to have same size, but self has size "
                f"{shape} while other has size {list(csr.shape)} (FYI: op2-sparse addition "
                f"does not currently support broadcasting)")
    elif tuple(a.shape) != tuple(b.shape):
        raise RuntimeError(
            f"torch.add: Expected input tensors to have the same shape, but got tensor `self` "
            f"with shape {list(a.shape)} and tensor `other` with shape {list(b.shape)}")
    dt = _dtype.promote_types(a._dtype, b._dtype)
    if not (ca and cb):  # with a strided operand the sum is strided
        # PyTorch scales the CSR operand by alpha on either side (CSR + alpha * strided
        # gives strided + alpha * CSR), while its derivative still scales `other`'s.
        strided = (b if ca else a).detach()._data
        csr = (a if ca else b).to_dense()._data
        out = strided.astype(dt.np) + (csr * alpha if alpha != 1 else csr).astype(dt.np)
        return Tensor._make(np.asarray(out, dt.np), dt)
    refusal = alpha_refusal(dt, alpha)
    if refusal is not None:
        raise RuntimeError(refusal)
    if a is b:  # one tensor twice: its own pattern, any dtype
        val = np.asarray(a._val * (1 + alpha)).astype(a._val.dtype)
        return SparseCsrTensor._new(a._crow.copy(), a._col.copy(), val, a._sshape, dt)
    # Otherwise PyTorch's CSR sum runs for single and double precision of one dtype only.
    if dt.name not in ("float32", "float64", "complex64", "complex128"):
        raise not_implemented_for("add_out_sparse_csr_impl_mkl", dt)
    for t in (a, b):
        if t._dtype is not dt:
            raise RuntimeError(f"expected scalar type {dt.legacy} but found {t._dtype.legacy}")
    keys, inverse = np.unique(np.concatenate([_keys(a), _keys(b)]), return_inverse=True)
    val = np.zeros(keys.shape[0], dt.np)
    np.add.at(val, inverse[:a._nnz()], a._val.astype(dt.np))
    bval = b._val * alpha if alpha != 1 else b._val
    np.add.at(val, inverse[a._nnz():], np.asarray(bval).astype(dt.np))
    return _from_keys(keys, val, a._sshape, dt)


def _mul_kernel(a, b):
    if not isinstance(a, SparseCsrTensor):
        a, b = b, a
    _no_grad_operand(b, "mul")
    if not isinstance(b, Tensor):  # a Python number: the CSR dtype unless it must widen
        val = _scaled(a._val, b, np.multiply)
        return SparseCsrTensor._new(a._crow.copy(), a._col.copy(), val, a._sshape)
    if isinstance(b, SparseTensor) and b.dim() == 2:
        b = to_sparse_csr(b)
    dt = _dtype.promote_types(a._dtype, b._dtype)
    if b.dim() == 0 and b._dtype.category <= a._dtype.category:
        dt = a._dtype  # a 0-d factor of no higher kind keeps the CSR dtype (else its own)
    elif b.dim() == 0:
        dt = b._dtype
    if isinstance(b, SparseCsrTensor):  # the product on the patterns' intersection
        if dt is _dtype.bool_:
            raise not_implemented_for("mul_out_sparse", dt)
        if tuple(a.shape) != tuple(b.shape):
            raise backend_error("mul", "SparseCsrCPU")
        keys, ia, ib = np.intersect1d(_keys(a), _keys(b), assume_unique=True,
                                      return_indices=True)
        val = a._val[ia].astype(dt.np) * b._val[ib].astype(dt.np)
        return _from_keys(keys, np.asarray(val, dt.np), a._sshape, dt)
    if b.dim() == 0:
        other = b._data
    elif tuple(b.shape) != tuple(a.shape):
        raise RuntimeError(f"sparse_mask(): operands have incompatible sizes; self has size "
                           f"{list(b.shape)} but mask has size {list(a.shape)}")
    else:  # a strided matrix, read at the CSR entries
        other = b.detach()._data[a._rows(), a._col]
    val = np.asarray(a._val.astype(dt.np) * np.asarray(other).astype(dt.np), dt.np)
    return SparseCsrTensor._new(a._crow.copy(), a._col.copy(), val, a._sshape, dt)


def _neg_kernel(a):
    if a._val.dtype == np.bool_:
        raise RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
            "to invert a mask, use the `~` or `logical_not()` operator instead.")
    return SparseCsrTensor._new(a._crow.copy(), a._col.copy(), -a._val, a._sshape, a._dtype)


def _sum_kernel(a, dtype=None):
    if dtype is not None:
        dt = _dtype.as_dtype(dtype)
    elif a._val.dtype.kind in "biu":
        dt = _dtype.int64
    else:
        dt = a._dtype
    return Tensor._make(np.asarray(a._val.astype(dt.np).sum(dtype=dt.np), dt.np), dt)


def _no_derivative(g, *args):
    raise NotImplementedError("sparse CSR tensors take no part in autograd here")


# A strided operand's gradient is the sum's (the CSR one cannot require grad).
_csr_add = OpDef("add.Tensor", kernel=_add_kernel, meta=_no_meta, node="AddBackward0",
                 derivative=add_twin.derivative, save=add_twin.save, tensor_args=(0, 1))
_csr_mul = OpDef("mul.Tensor", kernel=_mul_kernel, meta=_no_meta, node="MulBackward0",
                 derivative=_no_derivative, tensor_args=(0, 1))
_csr_neg = OpDef("neg", kernel=_neg_kernel, meta=_no_meta, node="NegBackward0",
                 derivative=_no_derivative)
_csr_sum = OpDef("sum", kernel=_sum_kernel, meta=_no_meta, node="SumBackward0",
                 derivative=_no_derivative)
_TWINS = {op.name: op for op in (_csr_mm, _csr_add, _csr_mul, _csr_neg, _csr_sum)}
