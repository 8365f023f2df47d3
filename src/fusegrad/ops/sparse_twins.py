"""The sparse twins of registry ops: what `mm`, `mv`, `add`, `sub`, `neg`, `mul`, `div`,
`sum`, `clone`, `_to_copy`, `t`, `transpose`, `permute` and `select` compute when an operand
is a sparse COO tensor, with the registry op's name and node name. Dispatch finds them
through `_sparse.TWINS`, which this module fills at import."""

from __future__ import annotations

import numpy as np

from .. import _dtype, _sparse
from .._sparse import SparseTensor, backend_error
from .._tensor import Tensor
from .registry import REGISTRY, OpDef
from .sparse import (
    _check_mm,
    _coalesced,
    _gather,
    _need_2d_sparse,
    _no_meta,
    _sparse_t_mm,
    _spmm_array,
    _tensor,
    _to_sparse_arrays,
    coalesce_arrays,
    coo_new,
    dense_array,
    run,
    to_dense_op,
)

# ---------------------------------------------------------------- products


def _mm_kernel(a, b):
    if isinstance(a, SparseTensor) and not isinstance(b, SparseTensor):
        _need_2d_sparse(a)
        _check_mm(a, b)
        return Tensor._make(_spmm_array(a, b._data))
    if isinstance(b, SparseTensor) and not isinstance(a, SparseTensor):
        _need_2d_sparse(b)
        if a.dim() != 2 or a.shape[1] != b.shape[0]:
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x"
                               f"{a.shape[-1]} and {b.shape[0]}x{b.shape[1]})")
        bt = _sparse.make(b._idx[::-1].copy(), b._val, (b.shape[1], b.shape[0]), False)
        return Tensor._make(np.ascontiguousarray(_spmm_array(bt, a._data.T).T))
    _need_2d_sparse(a)
    _need_2d_sparse(b)
    _check_mm(a, b)
    dense = _spmm_array(a, dense_array(b))
    idx, val = _to_sparse_arrays(dense, 2)
    return _sparse.make(idx, val, dense.shape, True, a._dtype)


def _mm_grads(g, a, b):
    ga = gb = None
    if isinstance(a, SparseTensor) and not isinstance(b, SparseTensor):
        idx, val = _coalesced(a)
        if a._rg:
            ga = g.mm(b.t())
        gb = _sparse_t_mm(idx, val, a.shape[1], g)
    elif isinstance(b, SparseTensor) and not isinstance(a, SparseTensor):
        idx, val = _coalesced(b)
        bt_idx = idx[::-1]
        ga = _sparse_t_mm(bt_idx, val, b.shape[0], g.t()).t()  # g @ b.T
        if b._rg:
            gb = a.t().mm(g)
    else:
        raise backend_error("mm_backward")
    return ga, gb


mm_twin = OpDef("mm", kernel=_mm_kernel, meta=_no_meta, node="MmBackward0",
                derivative=_mm_grads, save=lambda out, a, b: (a, b))


# ---------------------------------------------------------------- arithmetic


def _add_kernel(a, b, alpha=1):
    sa, sb = isinstance(a, SparseTensor), isinstance(b, SparseTensor)
    if sa and not sb:
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) "
                           "instead.")
    if not isinstance(b, Tensor):
        raise backend_error("add")
    if tuple(a.shape) != tuple(b.shape):
        raise RuntimeError(f"add: expected 'self' and 'other' to have same size, but self has "
                           f"size {list(a.shape)} but other has size {list(b.shape)}")
    bval = b._val * alpha if alpha != 1 else b._val
    if not sa:
        return Tensor._make(a._data + dense_array(_sparse.make(b._idx, bval, b._sshape,
                                                               False)))
    dt = _dtype.promote_types(a._dtype, b._dtype)
    idx, val, coal = _sparse.sum_entries(a, b, alpha)  # PyTorch's order of the entries
    return _sparse.make(idx, np.asarray(val).astype(dt.np, copy=False), a._sshape, coal, dt)


def _sub_kernel(a, b, alpha=1):
    if isinstance(a, SparseTensor) and not isinstance(b, SparseTensor):
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) "
                           "instead.")
    return _add_kernel(a, b, -alpha)


def _neg_kernel(a):
    return _sparse.make(a._idx, -a._val, a._sshape, a._coal, a._dtype)


neg_twin = OpDef("neg", kernel=_neg_kernel, meta=_no_meta, node="NegBackward0",
                 derivative=lambda g: (-g,))
sub_twin = OpDef(
    "sub.Tensor", kernel=_sub_kernel, meta=_no_meta, node="SubBackward0",
    derivative=lambda g, alpha: (g, -g * alpha if alpha != 1 else -g),
    save=lambda out, a, b, alpha=1: (alpha,), tensor_args=(0, 1))
add_twin = OpDef(
    "add.Tensor", kernel=_add_kernel, meta=_no_meta, node="AddBackward0",
    derivative=lambda g, alpha: (g, g * alpha if alpha != 1 else g),
    save=lambda out, a, b, alpha=1: (alpha,), tensor_args=(0, 1))


def _scalar_of(b):
    return b if not isinstance(b, Tensor) else b.item()


def _mul_kernel(a, b):
    if not isinstance(a, SparseTensor):
        a, b = b, a
    if isinstance(b, Tensor) and b.dim() != 0:
        if tuple(a.shape) != tuple(b.shape):
            raise backend_error("mul")
        other = dense_array(b) if isinstance(b, SparseTensor) else b._data
        if isinstance(b, SparseTensor):  # both sparse: the product on the common pattern
            idx, val = _to_sparse_arrays(dense_array(a) * other, a.sparse_dim())
            return _sparse.make(idx, val, a._sshape, True)
        gathered = other[tuple(a._idx)]
        return _sparse.make(a._idx, a._val * gathered, a._sshape, a._coal)
    val = _scaled(a._val, _scalar_of(b), np.multiply)
    return _sparse.make(a._idx, val, a._sshape, a._coal)


def _scaled(val: np.ndarray, scalar, np_fn) -> np.ndarray:
    """`np_fn(val, scalar)` in PyTorch's result dtype (a Python number does not widen)."""
    out = np.asarray(np_fn(val, scalar))
    if out.dtype != val.dtype:
        if val.dtype.kind == "f":
            out = out.astype(val.dtype)
        elif isinstance(scalar, float) or out.dtype.kind == "f":
            out = out.astype(_dtype.defaults.float.np)
    return out


def _mul_grads(g, a, b):
    ga = g * b if b is not None else None
    gb = None
    if a is not None and isinstance(b, Tensor) and b._rg:
        if not isinstance(b, SparseTensor) and b.dim():
            raise backend_error("as_strided")  # PyTorch's backward fails here too
        gb = g * a
        if not isinstance(b, SparseTensor) and isinstance(gb, SparseTensor):
            gb = run(to_dense_op, gb)
    return ga, gb


mul_twin = OpDef("mul.Tensor", kernel=_mul_kernel, meta=_no_meta, node="MulBackward0",
                 derivative=_mul_grads, save=lambda out, a, b: (a, b), tensor_args=(0, 1))


def _div_kernel(a, b):
    if not isinstance(a, SparseTensor) or isinstance(b, Tensor) and b.dim() != 0:
        raise backend_error("div")
    return _sparse.make(a._idx, _scaled(a._val, _scalar_of(b), np.true_divide), a._sshape,
                        a._coal)


div_twin = OpDef("div.Tensor", kernel=_div_kernel, meta=_no_meta, node="DivBackward0",
                 derivative=lambda g, b: (g / b, None), save=lambda out, a, b: (b,),
                 tensor_args=(0, 1))


# ---------------------------------------------------------------- copies and views


def _same_pattern(fn):
    def kernel(a, *rest):
        return _sparse.make(a._idx.copy(), fn(a._val, *rest), a._sshape, a._coal)
    return kernel


clone_twin = OpDef("clone", kernel=_same_pattern(lambda v, memory_format=None: v.copy()),
                   meta=_no_meta, node="CloneBackward0", derivative=lambda g: (g, None))
to_copy_twin = OpDef(
    "_to_copy", kernel=lambda a, dtype: _sparse.make(a._idx.copy(), a._val.astype(dtype.np),
                                                     a._sshape, a._coal, dtype),
    meta=_no_meta, node="ToCopyBackward0",
    derivative=lambda g, dt: (g.to(dt), None), save=lambda out, a, dtype: (a._dtype,))


def _t_kernel(a):
    if a.dim() > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {a.dim()}D")
    if a.dim() < 2:
        return a
    return _sparse.make(a._idx[::-1].copy(), a._val, a._sshape[::-1], False, a._dtype)


t_twin = OpDef("t", kernel=_t_kernel, meta=_no_meta, node="TBackward0",
               derivative=lambda g: (g.t(),))


def _permute_kernel(a, dims):
    from ._util import wrap_dims

    dims = wrap_dims(tuple(dims), a.dim())
    if sorted(dims) != list(range(a.dim())):
        raise RuntimeError("permute(sparse_coo): number of dimensions in the tensor input does "
                           "not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {a.dim()} is not equal to len(dims) = {len(dims)}")
    sd = a.sparse_dim()
    if any(d >= sd for d in dims[:sd]):
        raise RuntimeError("permute(sparse_coo): transpositions between sparse and dense "
                           "dimensions are not allowed. Only transpositions within sparse and "
                           "dense dimensions are allowed.")
    val = a._val.transpose((0,) + tuple(1 + d - sd for d in dims[sd:]))
    shape = tuple(a._sshape[d] for d in dims)
    coal = a._coal and tuple(dims[:sd]) == tuple(range(sd))
    return _sparse.make(a._idx[list(dims[:sd])], np.ascontiguousarray(val), shape, coal,
                        a._dtype)


def _inverse(dims) -> tuple:
    return tuple(int(i) for i in np.argsort(dims))


permute_twin = OpDef(
    "permute", kernel=_permute_kernel, meta=_no_meta, node="PermuteBackward0",
    derivative=lambda g, dims: (g.permute(_inverse(dims)), None),
    save=lambda out, a, dims: (tuple(d % a.dim() for d in dims),))


def _transpose_dims(a, d0, d1) -> list:
    from ._util import wrap_dim

    dims = list(range(a.dim()))
    d0, d1 = wrap_dim(d0, a.dim()), wrap_dim(d1, a.dim())
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return dims


transpose_twin = OpDef(
    "transpose.int", kernel=lambda a, d0, d1: _permute_kernel(a, _transpose_dims(a, d0, d1)),
    meta=_no_meta, node="TransposeBackward0",
    derivative=lambda g, d0, d1: (g.transpose(d0, d1), None, None),
    save=lambda out, a, d0, d1: (d0, d1))


def _select_kernel(a, dim, index):
    from ._util import wrap_dim

    dim = wrap_dim(dim, a.dim())
    size = a._sshape[dim]
    if not -size <= index < size:
        raise IndexError(f"index {index} out of range for tensor of size "
                         f"{list(a._sshape)} at dimension {dim}")
    index %= size
    shape = a._sshape[:dim] + a._sshape[dim + 1:]
    sd = a.sparse_dim()
    if dim >= sd:  # a dense dim: every value loses it
        return _sparse.make(a._idx, np.take(a._val, index, axis=1 + dim - sd), shape, a._coal,
                            a._dtype)
    keep = a._idx[dim] == index
    idx = np.delete(a._idx[:, keep], dim, axis=0)
    if sd == 1:  # no sparse dim left: the (summed) dense values
        return Tensor._make(a._val[keep].sum(axis=0), a._dtype)
    return _sparse.make(idx, a._val[keep], shape, a._coal, a._dtype)


def _select_grad(g, shape, dim, index):
    raise backend_error("select_backward")  # PyTorch has no sparse select backward


select_twin = OpDef("select.int", kernel=_select_kernel, meta=_no_meta, node="SelectBackward0",
                    derivative=_select_grad,
                    save=lambda out, a, dim, index: (a._sshape, dim, index))


def _mv_kernel(a, v):
    _need_2d_sparse(a)
    if v.dim() != 1 or v.shape[0] != a.shape[1]:
        raise RuntimeError(f"size mismatch, got input ({a.shape[0]}), mat ({a.shape[0]}x"
                           f"{a.shape[1]}), vec ({v.shape[0]})")
    return Tensor._make(_spmm_array(a, v._data[:, None])[:, 0])


def _mv_grads(g, a, v):
    idx, val = _coalesced(a)
    gv = _sparse_t_mm(idx, val, a.shape[1], g[:, None])[:, 0]
    ga = g[:, None].mm(v[None, :]) if a._rg else None
    return ga, gv


mv_twin = OpDef("mv", kernel=_mv_kernel, meta=_no_meta, node="MvBackward0",
                derivative=_mv_grads, save=lambda out, a, v: (a, v))


# ---------------------------------------------------------------- sums


def _sum_all_kernel(s, dtype=None):
    val = s._val
    out = val.sum(dtype=np.int64 if val.dtype.kind in "biu" else val.dtype)
    return Tensor._make(np.asarray(out))


def _sum_all_grad(g, idx, shape, dense):
    vals = g.expand((idx.shape[1],) + tuple(dense))
    return (run(coo_new, _tensor(idx), vals, tuple(shape), True),)


sum_twin = OpDef(
    "sum", kernel=_sum_all_kernel, meta=_no_meta, node="SumBackward0",
    derivative=_sum_all_grad,
    save=lambda out, s, dtype=None: (_coalesced(s)[0], s._sshape, s._val.shape[1:]))


def _sum_dims(s, dim) -> tuple:
    from ._util import wrap_dims

    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return tuple(sorted(set(wrap_dims(dims, s.dim()))))


def _sparse_sum_kernel(s, dim, keepdim=False, dtype=None):
    if keepdim:
        raise backend_error("sum")
    dims = _sum_dims(s, dim)
    sd = s.sparse_dim()
    keep = [d for d in range(sd) if d not in dims]
    dense_axes = tuple(1 + d - sd for d in dims if d >= sd)
    val = s._val.sum(axis=dense_axes) if dense_axes else s._val
    shape = [n for d, n in enumerate(s._sshape) if d not in dims]
    if not keep:
        return Tensor._make(np.asarray(val.sum(axis=0)), s._dtype)
    idx, val = coalesce_arrays(s._idx[keep], val, shape)
    return _sparse.make(idx, val, shape, True, s._dtype)


def _sparse_sum_grad(g, idx, shape, dims):
    sd = idx.shape[0]
    keep = [d for d in range(sd) if d not in dims]
    out_shape = [n for d, n in enumerate(shape) if d not in dims]
    vals = _gather(g, idx[keep], out_shape) if keep else \
        (g.to_dense() if isinstance(g, SparseTensor) else g).unsqueeze(0).expand(
            (idx.shape[1],) + tuple(g.shape))
    for d in dims:  # summed dense dims come back as broadcast copies
        if d >= sd:
            vals = vals.unsqueeze(1 + d - sd)
    vals = vals.expand((idx.shape[1],) + tuple(shape[sd:]))
    return (run(coo_new, _tensor(idx), vals, tuple(shape), False), None, None, None)


def _sum_dim_save(out, s, dim, keepdim=False, dtype=None):
    return (_coalesced(s)[0], s._sshape, _sum_dims(s, dim))


sparse_sum_op = OpDef("_sparse_sum.dim", kernel=_sparse_sum_kernel, meta=_no_meta,
                      node="SparseSumBackward0", derivative=_sparse_sum_grad,
                      save=_sum_dim_save)


def _sum_dim_grad(*args):
    raise RuntimeError("expand is unsupported for Sparse tensors")  # as PyTorch's backward


sum_dim_twin = OpDef("sum.dim_IntList", kernel=_sparse_sum_kernel, meta=_no_meta,
                     node="SumBackward1", derivative=_sum_dim_grad, save=_sum_dim_save)


def _check_twins() -> None:
    """Each twin stands for a registry op of its name."""
    for twin in (mm_twin, mv_twin, add_twin, sub_twin, neg_twin, mul_twin, div_twin, sum_twin,
                 sum_dim_twin, clone_twin, to_copy_twin, t_twin, select_twin, permute_twin,
                 transpose_twin):
        assert twin.name in REGISTRY, twin.name
        _sparse.TWINS[twin.name] = twin


_check_twins()
