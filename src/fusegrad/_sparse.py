"""Sparse COO tensors: an index array and a value array, as PyTorch's `torch.sparse_coo`.

A `SparseTensor` is a Tensor subclass that holds no strided data (`_data` is None): its
`_idx` is an int64 array of shape (sparse_dim, nnz) and its `_val` an array of shape
(nnz, *dense_sizes), with the tensor's size and whether its indices are known to be
coalesced (sorted, without duplicates). It is not a plain tensor, so every op it reaches
takes dispatch's slow path (`_plain = False`): the dense fast path pays nothing for it.
There an op runs its sparse twin (`TWINS`, filled by `fusegrad.ops.sparse` at import:
the same node name, a kernel and derivative for sparse operands); an op without a twin
raises PyTorch's "Could not run ... 'SparseCPU' backend" error rather than densifying.

This module also defines the layout objects (`fusegrad.strided`, `fusegrad.sparse_coo`).
"""

from __future__ import annotations

import numpy as np

from . import _dtype
from ._shapes import wrap_dim
from ._tensor import Size, Tensor
from ._torch_function import _disabled_torch_function_impl


class layout:  # noqa: N801 - PyTorch's class name
    """How a tensor's elements are stored: `fusegrad.strided` or `fusegrad.sparse_coo`."""

    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def __repr__(self) -> str:
        return f"torch.{self._name}"

    def __reduce__(self):
        return (_layout_named, (self._name,))


strided = layout("strided")
sparse_coo = layout("sparse_coo")
layout.__module__ = "fusegrad"


def _layout_named(name: str) -> layout:
    return {"strided": strided, "sparse_coo": sparse_coo}[name]


# name of a registry op -> the OpDef that computes it when an argument is sparse
TWINS: dict = {}

_BACKEND_MESSAGE = (
    "Could not run 'aten::{name}' with arguments from the '{backend}' backend. This could be "
    "because the operator doesn't exist for this backend, or was omitted during the "
    "selective/custom build process (if using custom build). If you are a Facebook employee "
    "using PyTorch on mobile, please visit https://fburl.com/ptmfixes for possible "
    "resolutions. 'aten::{name}' is not available for the '{backend}' backend.")


def backend_error(name: str, backend: str = "SparseCPU") -> NotImplementedError:
    """PyTorch's error for an op that has no kernel for `backend`'s tensors."""
    return NotImplementedError(_BACKEND_MESSAGE.format(name=name, backend=backend))


def _warn_checks_disabled() -> None:
    """PyTorch's one-time warning when invariants go unchecked by default."""
    if _checks_warned[0]:
        return
    _checks_warned[0] = True
    import warnings

    warnings.warn(
        "Sparse invariant checks are implicitly disabled. Memory errors (e.g. SEGFAULT) will "
        "occur when operating on a sparse tensor which violates the invariants, but checks "
        "incur performance overhead. To silence this warning, explicitly opt in or out. See "
        "`torch.sparse.check_sparse_tensor_invariants.__doc__` for guidance.",
        UserWarning, stacklevel=3)


_checks_warned = [False]


class SparseTensor(Tensor):
    """A sparse COO tensor: `_idx` (sparse_dim, nnz) int64, `_val` (nnz, *dense sizes)."""

    __slots__ = ("_sshape", "_idx", "_val", "_coal")
    _plain = False
    # Ops dispatch a sparse tensor to its sparse twins; the protocol's default handler
    # would re-wrap dense results as (empty) sparse tensors.
    __torch_function__ = _disabled_torch_function_impl

    @classmethod
    def _new(cls, idx: np.ndarray, val: np.ndarray, shape, coalesced: bool,
             dtype=None) -> SparseTensor:
        t = Tensor._make.__func__(cls, None, dtype or _dtype.FROM_NP[val.dtype])
        t._idx = idx
        t._val = val
        t._sshape = tuple(int(s) for s in shape)
        t._coal = bool(coalesced)
        return t

    # ------------------------------------------------------------ dispatch

    @classmethod
    def _op_for(cls, op):
        """The sparse twin of registry op `op` (PyTorch's error if there is none)."""
        twin = TWINS.get(op.name)
        if twin is None:
            raise backend_error(op.name.split(".")[0])
        return twin

    @classmethod
    def _compute(cls, op, args):
        return op.kernel(*args)

    # ------------------------------------------------------------ metadata

    @property
    def shape(self) -> Size:
        return Size(self._sshape)

    def size(self, dim=None):
        if dim is None:
            return Size(self._sshape)
        return self._sshape[wrap_dim(dim, len(self._sshape))]

    @property
    def ndim(self) -> int:
        return len(self._sshape)

    def dim(self) -> int:
        return len(self._sshape)

    ndimension = dim

    def numel(self) -> int:
        n = 1
        for s in self._sshape:
            n *= s
        return n

    nelement = numel

    def __len__(self) -> int:
        if not self._sshape:
            raise TypeError("len() of a 0-d tensor")
        return self._sshape[0]

    @property
    def layout(self) -> layout:
        """`fusegrad.sparse_coo`."""
        return sparse_coo

    @property
    def is_sparse(self) -> bool:
        """True: this tensor is sparse COO."""
        return True

    def is_coalesced(self) -> bool:
        """Whether the indices are sorted and unique."""
        return self._coal

    def sparse_dim(self) -> int:
        """Number of sparse (indexed) dimensions."""
        return self._idx.shape[0]

    def dense_dim(self) -> int:
        """Number of dense dimensions of each value."""
        return self._val.ndim - 1

    def _nnz(self) -> int:
        """Number of stored entries."""
        return self._idx.shape[1]

    def stride(self, dim=None):
        """Zeros, as PyTorch reports for a sparse tensor."""
        strides = (0,) * len(self._sshape)
        if dim is None:
            return strides
        return strides[wrap_dim(dim, len(strides))]

    def is_contiguous(self, memory_format=None) -> bool:
        return False

    def storage_offset(self) -> int:
        raise RuntimeError("Cannot access storage of SparseTensorImpl")

    def _data_dependent(self, what: str):
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")

    def numpy(self, *, force: bool = False):
        raise TypeError("can't convert Sparse layout tensor to numpy. Use Tensor.to_dense() "
                        "first.")

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

    def reshape(self, *shape):
        """Not available for sparse tensors, as in PyTorch."""
        raise RuntimeError("reshape is not implemented for sparse tensors")

    # ------------------------------------------------------------ components

    def _indices(self) -> Tensor:
        """The index array as an int64 tensor (no autograd, coalesced or not)."""
        return Tensor._make(self._idx)

    def _values(self) -> Tensor:
        """The value array as a tensor outside autograd (coalesced or not)."""
        return Tensor._make(self._val, self._dtype)

    def indices(self) -> Tensor:
        """The indices of a coalesced tensor."""
        if not self._coal:
            raise RuntimeError(
                "Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return Tensor._make(self._idx)

    # ------------------------------------------------------------ copies

    @property
    def data(self) -> SparseTensor:
        return SparseTensor._new(self._idx, self._val, self._sshape, self._coal, self._dtype)

    def detach(self) -> SparseTensor:
        t = self.data
        t._vc = self._vc
        return t

    def _detached_copy(self) -> SparseTensor:
        return SparseTensor._new(self._idx.copy(), self._val.copy(), self._sshape, self._coal,
                                 self._dtype)

    def _shallow_copy(self) -> SparseTensor:
        t = Tensor._shallow_copy(self)
        t._idx, t._val, t._sshape, t._coal = self._idx, self._val, self._sshape, self._coal
        return t

    def __deepcopy__(self, memo):
        t = self._detached_copy()
        t._rg = self._rg
        memo[id(self)] = t
        return t

    def __reduce_ex__(self, protocol):
        from ._tensor import rebuild_tensor

        return (_rebuild_sparse, (rebuild_tensor(np.array(self._idx), "int64", False),
                                  rebuild_tensor(np.array(self._val), self._dtype.name, False),
                                  self._sshape, self._coal, self._rg))

    # ------------------------------------------------------------ printing

    def __repr__(self, *, tensor_contents=None) -> str:
        indent = len("tensor(")
        dtype_name = self._dtype.name
        default = _dtype.defaults.float.name
        idx_text = _component_text(self._idx, "int64", indent + len("indices=tensor("))
        val_text = _component_text(self._val, dtype_name, indent + len("values=tensor("))
        text = ("tensor(indices=tensor(" + idx_text + "),\n" + " " * indent +
                "values=tensor(" + val_text + ")")
        items = [f"size={tuple(self._sshape)}", f"nnz={self._nnz()}"]
        if dtype_name not in (default, "int64", "bool"):
            items.append(f"dtype=torch.{dtype_name}")
        items.append("layout=torch.sparse_coo")
        if self._grad_fn is not None:
            items.append(f"grad_fn=<{type(self._grad_fn).__name__}>")
        elif self._rg:
            items.append("requires_grad=True")
        from ._printing import _OPTIONS  # loaded on the first repr, not by the import

        return _close_forced(text, items, indent, _OPTIONS.linewidth)

    __str__ = __repr__


def _component_text(array: np.ndarray, dtype_name: str, indent: int) -> str:
    """An index or value array as PyTorch prints it inside a sparse tensor's repr."""
    if array.size == 0:
        return f"[], size={tuple(array.shape)}"
    from ._printing import _OPTIONS, _data_text

    return _data_text(array, dtype_name, indent, _OPTIONS)


def _close_forced(text: str, items: list, indent: int, linewidth: int) -> str:
    """Append `items`: the first on a new line (sparse reprs always break there), the others
    on the same line while they fit."""
    pieces = [text]
    used = len(text) - text.rfind("\n") + 1
    force = True
    for item in items:
        if force or used + len(item) + 2 > linewidth:
            pieces.append(",\n" + " " * indent + item)
            used = indent + len(item)
            force = False
        else:
            pieces.append(", " + item)
            used += len(item) + 2
    return "".join(pieces) + ")"


def _rebuild_sparse(indices, values, size, coalesced, requires_grad):
    """Unpickle a sparse tensor."""
    t = SparseTensor._new(indices._data, values._data, size, coalesced, values._dtype)
    t._rg = bool(requires_grad)
    return t


def is_sparse(t) -> bool:
    """Whether `t` is a sparse COO tensor."""
    return isinstance(t, SparseTensor)


def make(idx: np.ndarray, val: np.ndarray, shape, coalesced: bool, dtype=None) -> SparseTensor:
    """A sparse tensor over the given arrays (no copy, no checks)."""
    return SparseTensor._new(idx, val, shape, coalesced, dtype)
