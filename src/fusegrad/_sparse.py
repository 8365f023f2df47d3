"""Sparse COO tensors: an index array and a value array, as PyTorch's `torch.sparse_coo`.

A `SparseTensor` is a Tensor subclass that holds no strided data (`_data` is None): its
`_idx` is an int64 array of shape (sparse_dim, nnz) and its `_val` an array of shape
(nnz, *dense_sizes), with the tensor's size and whether its indices are known to be
coalesced (sorted, without duplicates). It is not a plain tensor, so every op it reaches
takes dispatch's slow path (`_plain = False`): the dense fast path pays nothing for it.
There an op runs its sparse twin (`TWINS`, filled by `fusegrad.ops.sparse` at import:
the same node name, a kernel and derivative for sparse operands); an op without a twin
raises PyTorch's "Could not run ... 'SparseCPU' backend" error rather than densifying.

This module also defines the layout objects (`fusegrad.strided`, `fusegrad.sparse_coo`),
and the sums a sparse gradient takes part in as PyTorch orders and rounds them (into a
sparse or a strided `.grad`, and in the optimizers' sparse updates): `sum_entries`, `add_`,
`add_to_dense`.
"""

from __future__ import annotations

import numpy as np

from . import _dtype
from ._shapes import wrap_dim
from ._tensor import Size, Tensor
from ._torch_function import _disabled_torch_function_impl, warn_once_at


class layout:  # noqa: N801 - PyTorch's class name
    """How a tensor's elements are stored: `fusegrad.strided`, `fusegrad.sparse_coo` or
    `fusegrad.sparse_csr`."""

    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def __repr__(self) -> str:
        return f"torch.{self._name}"

    def __reduce__(self):
        return (_layout_named, (self._name,))


strided = layout("strided")
sparse_coo = layout("sparse_coo")
sparse_csr = layout("sparse_csr")
layout.__module__ = "fusegrad"


def _layout_named(name: str) -> layout:
    return {"strided": strided, "sparse_coo": sparse_coo, "sparse_csr": sparse_csr}[name]


# name of a registry op -> the OpDef that computes it when an argument is sparse
TWINS: dict = {}
# Imports the twins (the ops package's `sparse_twins`, loaded on first use): set by the ops
# package (`use_twin_loader`); a sparse gradient (`embedding(sparse=True)`) can reach an op
# before anything has imported them.
_load_twins = None


def use_twin_loader(load) -> None:
    """Register `load()`, which fills `TWINS`, called the first time a twin is missing."""
    global _load_twins
    _load_twins = load

# Set once a sparse tensor has been made: the optimizers look for sparse gradients (to
# refuse them before any update of the group, as PyTorch does) only in programs with one.
made = [False]

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
    """PyTorch's one-time warning when invariants go unchecked by default (called from the
    constructor the user called)."""
    warn_once_at(
        3, "Sparse invariant checks are implicitly disabled. Memory errors (e.g. SEGFAULT) "
        "will occur when operating on a sparse tensor which violates the invariants, but "
        "checks incur performance overhead. To silence this warning, explicitly opt in or "
        "out. See `torch.sparse.check_sparse_tensor_invariants.__doc__` for guidance. ")




class SparseLayoutTensor(Tensor):
    """What the sparse layouts (COO here, CSR in `sparse/_csr.py`) share: their own shape
    `_sshape` (no dense array stands behind them) and ops run on their kernels as given."""

    __slots__ = ("_sshape",)
    _plain = False
    # Ops dispatch a sparse tensor to its sparse twins; the protocol's default handler
    # would re-wrap dense results as (empty) sparse tensors.
    __torch_function__ = _disabled_torch_function_impl

    @classmethod
    def _compute(cls, op, args):
        return op.kernel(*args)

    @property
    def shape(self) -> Size:
        return Size(self._sshape)

    def size(self, dim=None):
        if dim is None:
            return Size(self._sshape)
        return self._sshape[wrap_dim(dim, len(self._sshape))]


class SparseTensor(SparseLayoutTensor):
    """A sparse COO tensor: `_idx` (sparse_dim, nnz) int64, `_val` (nnz, *dense sizes)."""

    __slots__ = ("_idx", "_val", "_coal")

    @classmethod
    def _new(cls, idx: np.ndarray, val: np.ndarray, shape, coalesced: bool,
             dtype=None) -> SparseTensor:
        made[0] = True
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
            global _load_twins
            if _load_twins is not None:
                load, _load_twins = _load_twins, None
                load()
                return cls._op_for(op)
            raise backend_error(op.name.split(".")[0])
        return twin

    # ------------------------------------------------------------ metadata

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

    def zero_(self) -> SparseTensor:
        """Drop every entry in place (no entries, coalesced), as PyTorch zeroes a sparse
        tensor: what `zero_grad(set_to_none=False)` leaves in a sparse `.grad`."""
        self._idx = np.zeros((self._idx.shape[0], 0), dtype=np.int64)
        self._val = np.zeros((0,) + self._val.shape[1:], dtype=self._val.dtype)
        self._coal = True
        self._vc[0] += 1
        return self

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


def _close_forced(text: str, items: list, indent: int, linewidth: int,
                  force: bool = True) -> str:
    """Append `items`: the first on a new line if `force` (COO reprs always break there),
    the others (all, if not `force`) on the same line while they fit."""
    pieces = [text]
    used = len(text) - text.rfind("\n") + 1
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


# ---------------------------------------------------------------- sums into gradients


def _positions(idx: np.ndarray, shape) -> np.ndarray:
    """Row-major positions of the entries `idx` in the sparse dims of `shape`."""
    if idx.shape[0] == 1:
        return idx[0]
    if idx.shape[0] == 0:
        return np.zeros(idx.shape[1], dtype=np.int64)
    return np.ravel_multi_index(tuple(idx), tuple(shape[:idx.shape[0]]))


def _merge_slots(la: list, lb: list) -> tuple:
    """The output slot of each entry of two entry lists walked together, each step taking
    the entry at the smaller position of the two current ones, or both into one slot when
    their positions are equal (the lists need not be sorted: an uncoalesced operand keeps
    its order and duplicates). Returns (slots of `la`, slots of `lb`, number of slots)."""
    na, nb = len(la), len(lb)
    sa: list = []
    sb: list = []
    i = j = n = 0
    while i < na and j < nb:
        x = la[i]
        y = lb[j]
        if x == y:
            sa.append(n)
            sb.append(n)
            i += 1
            j += 1
        elif x < y:
            sa.append(n)
            i += 1
        else:
            sb.append(n)
            j += 1
        n += 1
    sa.extend(range(n, n + na - i))
    n += na - i
    sb.extend(range(n, n + nb - j))
    n += nb - j
    return sa, sb, n


def sum_entries(a: SparseTensor, b: SparseTensor, alpha=1) -> tuple:
    """The (indices, values, coalesced) of `a + alpha * b` for sparse tensors of one size,
    in the order PyTorch's sum gives them (found by experiment): an operand without
    entries gives the other's (scaled); when both value arrays are contiguous, the
    entries of the two walked together (`_merge_slots`: coalesced operands give a
    coalesced sum); otherwise `a`'s entries followed by `b`'s, uncoalesced. The values are
    new arrays, or `a`'s own when `b` has no entries."""
    if b._idx.shape[1] == 0:
        return a._idx, a._val, a._coal
    b_val = b._val * alpha if alpha != 1 else b._val  # (b's entries alone: rounded once)
    if a._idx.shape[1] == 0:
        return b._idx.copy(), np.array(b_val, order="C"), b._coal
    dt = np.result_type(a._val, b_val)
    if not (a._val.flags.c_contiguous and b._val.flags.c_contiguous):
        return (np.concatenate([a._idx, b._idx], axis=1),
                np.concatenate([a._val, b_val]).astype(dt, copy=False), False)
    coal = a._coal and b._coal
    la = _positions(a._idx, a._sshape).tolist()
    lb = _positions(b._idx, b._sshape).tolist()
    if la == lb:  # the same entries (a gradient summed with one of the same lookups)
        return a._idx.copy(), plus(a._val, b._val, alpha, dt), coal
    sa, sb, n = _merge_slots(la, lb)
    idx = np.empty((a._idx.shape[0], n), dtype=np.int64)
    idx[:, sa] = a._idx
    idx[:, sb] = b._idx
    val = np.zeros((n,) + a._val.shape[1:], dtype=dt)
    val[sa] = a._val
    val[sb] = plus(val[sb], b._val, alpha, dt)  # (a slot of b's alone: 0 + alpha * b)
    return idx, val, coal


def plus(x: np.ndarray, y: np.ndarray, alpha, dt) -> np.ndarray:
    """x + alpha * y in dtype `dt`, as PyTorch's kernels add with an alpha: float32 as one
    fused multiply-add (alpha rounded to float32; emulated in float64, where the product of
    two float32 is exact), other dtypes with the product rounded first."""
    if alpha == 1:
        return (x + y).astype(dt, copy=False)
    if dt == np.float32:
        a = np.float64(np.float32(alpha))
        return (x.astype(np.float64) + a * y.astype(np.float64)).astype(np.float32)
    return (x + y * alpha).astype(dt, copy=False)


def add_(acc: SparseTensor, other: SparseTensor, alpha=1) -> SparseTensor:
    """`acc += alpha * other` in place (entries as `sum_entries` orders them, in `acc`'s
    dtype), bumping `acc`'s version."""
    idx, val, coal = sum_entries(acc, other, alpha)
    acc._idx = idx
    acc._val = val.astype(acc._val.dtype, copy=False)
    acc._coal = coal
    acc._vc[0] += 1
    return acc


def add_to_dense(dst: np.ndarray, s: SparseTensor, alpha=1) -> None:
    """`dst += alpha * s` in place for a strided array `dst` of `s`'s size: the entries
    added one after another in their stored order, as PyTorch's kernel adds them (so a
    repeated index sums in that order). A float32 `dst` with `alpha` other than 1 gets
    each entry as one fused multiply-add (alpha rounded to float32), emulated in float64
    (the product of two float32 is exact there): PyTorch's bits."""
    idx, val = s._idx, s._val
    if idx.shape[1] == 0:
        return
    where = tuple(idx)
    if alpha == 1:
        np.add.at(dst, where, val.astype(dst.dtype, copy=False))
        return
    if dst.dtype != np.float32:
        np.add.at(dst, where, (val * alpha).astype(dst.dtype, copy=False))
        return
    pos = _positions(idx, dst.shape)
    order = np.argsort(pos, kind="stable")
    sorted_pos = pos[order]
    new = np.concatenate(([True], sorted_pos[1:] != sorted_pos[:-1]))
    if new.all():  # each position once: one vectorized pass
        rounds = [np.arange(pos.size)]
    else:
        # An entry's round is how many earlier entries share its position: in each round
        # the positions are distinct, and a position's entries come in stored order.
        starts = np.flatnonzero(new)
        rank = np.empty(pos.size, dtype=np.int64)
        rank[order] = np.arange(pos.size) - np.repeat(starts, np.diff(np.append(starts,
                                                                             pos.size)))
        by_round = np.argsort(rank, kind="stable")
        rounds = np.split(by_round, np.cumsum(np.bincount(rank))[:-1])
    for sel in rounds:
        at = tuple(i[sel] for i in idx)
        dst[at] = plus(dst[at], val[sel], alpha, dst.dtype)
