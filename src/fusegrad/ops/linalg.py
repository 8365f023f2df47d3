"""Matrix products: mm, bmm, mv, dot, vdot, baddbmm, addbmm, addr and the cross product
(matmul is a composite over these, in _functions)."""

from __future__ import annotations

import numpy as np

from .. import _dtype
from .._dispatch import call
from .._dtype import COMPLEX as _COMPLEX
from .._scalar_conversion import checked_scalar
from . import _flop_formulas as flop_formulas
from . import _gemm
from . import _onnx as ox
from ._blas import SERIAL_MNK as _SERIAL_MNK
from ._util import (
    F32,
    HALF,
    Spec,
    broadcast_shapes,
    cj,
    dtype_of,
    inplace_result_check,
    not_implemented_for,
    rand_array,
    wrap_dim,
)
from .registry import Sample, inplace_variant, register


def _save_partners(out, a, b):
    # Each operand is needed only for the other's gradient.
    return (a if b._rg else None, b if a._rg else None)


def _same_dtype(a, b, what="m1 and m2"):
    da, db = dtype_of(a), dtype_of(b)
    if da is not db:
        raise RuntimeError(f"expected {what} to have the same dtype, but got: {da.cpp} != "
                           f"{db.cpp}")


def _matmul(a, b):
    if a.dtype in HALF:
        return np.matmul(a.astype(F32), b.astype(F32)).astype(a.dtype)
    return np.matmul(a, b)


_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_BOOL = np.dtype(np.bool_)


def integer_coefficients(dt: np.dtype, beta, alpha) -> tuple:
    """`beta` and `alpha` as PyTorch's integer matrix products (addmm, addmv, baddbmm,
    addbmm) take them: a float or complex number converted to the integer dtype `dt`, checked
    for overflow and truncated toward zero (2.7 is 2); as they are for other dtypes."""
    if dt.kind not in "iu":
        return beta, alpha
    return tuple(int(checked_scalar(v, dt)) if v.__class__ in (float, complex) else v
                 for v in (beta, alpha))


def no_bool_product(name: str, a, out_shape: tuple, k: int) -> None:
    """PyTorch's CPU matrix-product kernels have no bool form: its error, for an array `a`
    of bool whose product (shape `out_shape`, summing `k` terms) is not empty (an empty one
    never reaches the kernel)."""
    if a.dtype is _BOOL and k and all(out_shape):
        raise not_implemented_for(name, "Bool")


def _mm_check(a, b):
    if len(a.shape) != 2:
        raise RuntimeError("self must be a matrix")
    if len(b.shape) != 2:
        raise RuntimeError("mat2 must be a matrix")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and "
            f"{b.shape[0]}x{b.shape[1]})")
    _same_dtype(a, b)


_ONE_BY_ONE = (1, 1)


def _mm_kernel(a, b):
    dt = a.dtype
    if (dt is _F32 or dt is _F64) and b.dtype is dt:
        sa, sb = a.shape, b.shape  # two tuples read once: `ndim` and `size` cost as much
        if len(sa) == 2 and len(sb) == 2 and sa[1] == sb[0]:
            # The common case, which none of the checks refuse. For C- or F-contiguous
            # operands `ndarray.dot` makes the same BLAS call as `np.matmul`, bit for bit,
            # without the ufunc machinery (half the time on small matrices). A 1x1 operand
            # is the exception: `dot` multiplies it as a scalar, which keeps a -0.0 that the
            # GEMM's sum (starting at +0.0) makes +0.0.
            if sa != _ONE_BY_ONE and sb != _ONE_BY_ONE:
                # An array that owns its memory was allocated C- or F-contiguous: reading
                # `base` costs a tenth of building the `flags` object, asked only of views.
                if (a.base is None or a.flags.forc) and (b.base is None or b.flags.forc):
                    if sa[0] * sa[1] * sb[1] > _SERIAL_MNK:  # BLAS would thread it
                        return _gemm.matmul(a, b)
                    return a.dot(b)
            elif sa == sb:  # 1x1 @ 1x1: one product, whose -0.0 the GEMM's sum makes +0.0
                out = a.dot(b)
                if out.item() == 0.0:
                    out[0, 0] = 0.0
                return out
            return np.matmul(a, b)
    _mm_check(a, b)
    no_bool_product("addmm_impl_cpu_", a, (a.shape[0], b.shape[1]), a.shape[1])
    return _matmul(a, b)


def _mm_samples(rng, dtype):
    return [Sample((rand_array(rng, s, dtype), rand_array(rng, r, dtype)), name=f"{s}@{r}")
            for s, r in (((2, 3), (3, 4)), ((1, 1), (1, 1)), ((0, 3), (3, 2)), ((2, 0), (0, 3)))]


def _col_major(t) -> bool:
    """Whether 2-D `t` is laid out column-major (a transposed contiguous matrix, as the
    `weight.t()` that `linear` passes to addmm), as PyTorch's mm backward tests it."""
    data = t._data
    if data is not None:
        return col_major_array(data)
    shape, strides = tuple(t.shape), t.stride()
    return len(shape) == 2 and strides[0] == 1 and strides[1] == shape[0] \
        and shape[0] > 1 and shape[1] > 1


def col_major_array(data: np.ndarray) -> bool:
    """`_col_major` of an array."""
    shape, strides, item = data.shape, data.strides, data.itemsize
    return len(shape) == 2 and strides[0] == item and strides[1] == shape[0] * item \
        and shape[0] > 1 and shape[1] > 1


def mm_mat1_backward(g, m1, m2, col_major: bool | None = None):
    """Gradient of `m1 @ m2` for `m1`, laid out as `m1` is: a column-major `m1` gets
    `(m2 @ g^T)^T`, so the engine hands its leaf a gradient that needs no transposing copy
    (PyTorch's mm_mat1_backward does the same). `m1` may be None (not saved); `col_major`,
    where given, says how it was laid out."""
    if col_major is None:
        col_major = m1 is not None and _col_major(m1)
    if col_major:
        return m2.mm(g.t()).t()
    return g.mm(m2.t())


def mm_mat2_backward(g, m1, m2, col_major: bool | None = None):
    """Gradient of `m1 @ m2` for `m2`, laid out as `m2` is (see `mm_mat1_backward`). For
    `linear`'s `weight.t()` this makes the weight's gradient C-contiguous after TBackward0.
    `m2` may be None (not saved)."""
    if col_major is None:
        col_major = m2 is not None and _col_major(m2)
    if col_major:
        return g.t().mm(m1).t()
    return m1.t().mm(g)


def _mm_derivative(g, a, b):
    if g._dtype.category == _COMPLEX:  # a complex product: the partners' conjugates
        a, b = cj(a), cj(b)
    return (mm_mat1_backward(g, a, b) if b is not None else None,
            mm_mat2_backward(g, a, b) if a is not None else None)


mm = register(
    "mm", autocast="lower", kernel=_mm_kernel, forward_ad="product",
    flops=flop_formulas.product_of(0, False),
    meta=lambda a, b: (_mm_check(a, b), Spec((a.shape[0], b.shape[1]), a.dtype))[1],
    node="MmBackward0",
    derivative=_mm_derivative,
    save=_save_partners,
    samples=_mm_samples, onnx="MatMul", lowering="extern",
    saved_names=("self", "mat2"), tensors_only=("input", "mat2"))


def _bmm_check(a, b):
    if len(a.shape) != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if len(b.shape) != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if b.shape[0] != a.shape[0] or b.shape[1] != a.shape[2]:
        raise RuntimeError(
            "Expected size for first two dimensions of batch2 tensor to be: "
            f"[{a.shape[0]}, {a.shape[2]}] but got: [{b.shape[0]}, {b.shape[1]}].")
    if dtype_of(a) is not dtype_of(b):  # (bmm's check, worded as PyTorch's CPU kernel's)
        raise RuntimeError(f"expected scalar type {dtype_of(a).legacy} but found "
                           f"{dtype_of(b).legacy}")


def _bmm_kernel(a, b):
    if len(a.shape) == 3 and len(b.shape) == 3 and b.shape[:2] == (a.shape[0], a.shape[2]):
        # (PyTorch's bool error comes before its dtype check: `bmm(bool, long)` raises it)
        no_bool_product("bmm", a, (a.shape[0], a.shape[1], b.shape[2]), a.shape[2])
    _bmm_check(a, b)
    return _matmul(a, b)


bmm = register(
    "bmm", autocast="lower", kernel=_bmm_kernel, forward_ad="product",
    flops=flop_formulas.product_of(0, True),
    meta=lambda a, b: (_bmm_check(a, b),
                       Spec((a.shape[0], a.shape[1], b.shape[2]), a.dtype))[1],
    node="BmmBackward0",
    derivative=lambda g, a, b: (g.bmm(cj(b).transpose(1, 2)) if b is not None else None,
                                cj(a).transpose(1, 2).bmm(g) if a is not None else None),
    save=_save_partners,
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), rand_array(rng, r, dt)))
                             for s, r in (((2, 2, 3), (2, 3, 4)), ((1, 0, 2), (1, 2, 3)))],
    onnx="MatMul", lowering="extern",
    saved_names=("self", "mat2"), tensors_only=("input", "mat2"))


def _mv_check(a, v):
    if len(a.shape) != 2 or len(v.shape) != 1:
        raise RuntimeError(
            f"vector + matrix @ vector expected, got 1, {len(a.shape)}, {len(v.shape)}")
    if a.shape[1] != v.shape[0]:
        raise RuntimeError(
            f"size mismatch, got input ({a.shape[0]}), mat ({a.shape[0]}x{a.shape[1]}), "
            f"vec ({v.shape[0]})")
    if dtype_of(a) is not dtype_of(v):  # PyTorch's mv is addmv into a result of vec's dtype
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got "
                           f"{dtype_of(v).legacy}, {dtype_of(a).legacy}, and {dtype_of(v).legacy}")


def _mv_derivative(g, a, v):
    if g._dtype.category == _COMPLEX:  # a complex product: the partners' conjugates
        a, v = cj(a), cj(v)
    return (g.unsqueeze(1) * v if v is not None else None,
            a.t().mv(g) if a is not None else None)


mv = register(
    "mv", forward_ad="product", kernel=lambda a, v: (_mv_check(a, v), no_bool_product(
        "addmv_impl_cpu", a, (a.shape[0],), a.shape[1]), _matmul(a, v))[2],
    meta=lambda a, v: (_mv_check(a, v), Spec((a.shape[0],), a.dtype))[1], node="MvBackward0",
    derivative=_mv_derivative,
    save=_save_partners,
    samples=lambda rng, dt: [Sample((rand_array(rng, (3, 4), dt), rand_array(rng, (4,), dt))),
                             Sample((rand_array(rng, (0, 2), dt), rand_array(rng, (2,), dt)))],
    onnx="MatMul", lowering="extern",
    saved_names=("self", "vec"), tensors_only=("input", "vec"))


def _dot_check(a, b, name: str = "dot"):
    """PyTorch's checks (and messages) for dot and vdot: two 1-D tensors of one dtype."""
    if len(a.shape) != 1 or len(b.shape) != 1:
        raise RuntimeError(
            f"1D tensors expected, but got {len(a.shape)}D and {len(b.shape)}D tensors")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src [{b.shape[0]}] "
            f"to have the same number of elements, but got {a.shape[0]} and {b.shape[0]} "
            "elements respectively")
    da, db = dtype_of(a), dtype_of(b)
    if da is not db:
        raise RuntimeError(f"{name} : expected both vectors to have same dtype, but found "
                           f"{da.legacy} and {db.legacy}")


def _dot_derivative(g, a, b):
    if g._dtype.category == _COMPLEX:  # a complex product: the partners' conjugates
        a, b = cj(a), cj(b)
    return (g * b if b is not None else None, g * a if a is not None else None)


dot = register(
    "dot", forward_ad="product",
    kernel=lambda a, b: (_dot_check(a, b), no_bool_product("dot", a, (), 1),
                         np.asarray(_matmul(a, b)))[2],
    meta=lambda a, b: (_dot_check(a, b), Spec((), a.dtype))[1], node="DotBackward0",
    derivative=_dot_derivative,
    save=_save_partners,
    samples=lambda rng, dt: [Sample((rand_array(rng, (4,), dt), rand_array(rng, (4,), dt))),
                             Sample((rand_array(rng, (0,), dt), rand_array(rng, (0,), dt)))],
    onnx="MatMul", lowering="extern",
    saved_names=("self", "tensor"), tensors_only=("input", "tensor"))


# ---------------------------------------------------------------- baddbmm (addmm is in nn.py)


def _scaled(g, s):
    return g if s == 1 else g * s


def _scaled_back(g, s):
    """The gradient through a scaling by `s`: the conjugate scale for a complex `s` (the
    conjugate Wirtinger rule), `s` itself otherwise."""
    return g if s == 1 else g * cj(s)


def _plus_scaled(prod, alpha, s, beta):
    """alpha * prod + beta * s in fusegrad ops; beta 0 ignores s (NaN included), as ATen."""
    prod = _scaled(prod, alpha)
    return prod if beta == 0 else _scaled(s, beta) + prod


def _baddbmm_dtypes(a, b1, b2) -> None:
    """PyTorch's first check of baddbmm: the input's dtype against batch1's (batch2's is
    the product's check)."""
    da = dtype_of(a)
    if da is not dtype_of(b1):
        raise RuntimeError(f"Input dtypes must be the same, got: input {da.cpp}, batch1: "
                           f"{dtype_of(b1).cpp}, batch2: {dtype_of(b2).cpp}")


def _baddbmm_meta(a, b1, b2, beta=1, alpha=1):
    _baddbmm_dtypes(a, b1, b2)
    _bmm_check(b1, b2)
    return Spec((b1.shape[0], b1.shape[1], b2.shape[2]), b1.dtype)


def _baddbmm_kernel(a, b1, b2, beta=1, alpha=1):
    _baddbmm_dtypes(a, b1, b2)
    beta, alpha = integer_coefficients(b1.dtype, beta, alpha)
    _bmm_check(b1, b2)
    no_bool_product("baddbmm", b1, (b1.shape[0], b1.shape[1], b2.shape[2]), b1.shape[2])
    half = b1.dtype in HALF
    if half:  # the product and the sum in float32, rounded once, as PyTorch's CPU kernel
        a, b1, b2, dt = a.astype(F32), b1.astype(F32), b2.astype(F32), b1.dtype
    else:
        dt = b1.dtype
    prod = np.matmul(b1, b2)
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:
        return np.array(prod, dtype=dt)
    return (a * beta + prod if beta != 1 else a + prod).astype(dt, copy=False)


def _baddbmm_derivative(g, b1, b2, beta, alpha):
    if g._dtype.category == _COMPLEX:  # a complex product: the partners' conjugates
        b1, b2 = cj(b1), cj(b2)
    # beta 0 still gives the input a gradient (zeros), as PyTorch does.
    return (_scaled_back(g, beta),
            _scaled_back(g.bmm(b2.transpose(1, 2)), alpha) if b2 is not None else None,
            _scaled_back(b1.transpose(1, 2).bmm(g), alpha) if b1 is not None else None,
            None, None)


baddbmm = register(
    "baddbmm", autocast="lower", forward_ad="added_product", onnx=ox.batched_addmm(False),
    flops=flop_formulas.product_of(1, True),
    kernel=_baddbmm_kernel, meta=_baddbmm_meta, node="BaddbmmBackward0",
    derivative=_baddbmm_derivative,
    save=lambda out, a, b1, b2, beta=1, alpha=1: (b1 if b2._rg else None,
                                                   b2 if b1._rg else None, beta, alpha),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), rand_array(rng, (2, 2, 3), dt),
                                     rand_array(rng, (2, 3, 4), dt), b, al), name=f"{s} {b} {al}")
                             for s, b, al in (((2, 2, 4), 1, 1), ((4,), 0.5, 2), ((), 1, -1))],
    lowering="extern",
    decomposition=lambda a, b1, b2, beta=1, alpha=1: _plus_scaled(
        call(bmm, b1, b2), alpha, a, beta))
baddbmm_ = inplace_variant(
    baddbmm, "baddbmm_",
    samples=lambda rng, dt: [Sample((rand_array(rng, (2, 2, 4), dt), rand_array(rng, (2, 2, 3), dt),
                                     rand_array(rng, (2, 3, 4), dt), b, al), name=f"{b} {al}")
                             for b, al in ((1, 1), (0.5, 2), (0, -1))])
inplace_result_check(baddbmm_, lambda s, b1, b2, *rest: (
    (b1.shape[0], b1.shape[1], b2.shape[2]) if len(b1.shape) == 3 and len(b2.shape) == 3 and
    b1.shape[0] == b2.shape[0] and b1.shape[2] == b2.shape[1] else None))


# ---------------------------------------------------------------- cross, vdot, addr, addbmm


def _cross_meta(a, b, dim=-1):
    if len(a.shape) != len(b.shape):
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if not len(a.shape):  # (no scalar's dim 0 here)
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    d = wrap_dim(dim, len(a.shape))
    if a.shape[d] != 3 or b.shape[d] != 3:  # (checked before the other dims broadcast)
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{a.shape[d]} and {b.shape[d]}")
    shape = broadcast_shapes(tuple(a.shape), tuple(b.shape))
    dt = _dtype.result_type(a, b)
    if a.dtype is _dtype.bool_:  # (its kernel is chosen by the input's dtype)
        raise NotImplementedError('"cross" not implemented for \'Bool\'')
    return Spec(shape, dt)


def _cross_kernel(a, b, dim=-1):
    spec = _cross_meta(a, b, dim)
    out = np.cross(a, b, axis=wrap_dim(dim, len(spec.shape)))
    return np.ascontiguousarray(out).astype(spec.dtype.np, copy=False)


linalg_cross = register(
    "linalg_cross", kernel=_cross_kernel, meta=_cross_meta, node="LinalgCrossBackward0",
    forward_ad="product",
    # Bilinear: each operand's gradient crosses the incoming one with the other's conjugate.
    derivative=lambda g, a, b, dim: (call(linalg_cross, cj(b), g, dim) if b is not None else None,
                                     call(linalg_cross, g, cj(a), dim) if a is not None else None,
                                     None),
    save=lambda out, a, b, dim=-1: (a if b._rg else None, b if a._rg else None, dim),
    samples=lambda rng, dt: [Sample((rand_array(rng, a, dt), rand_array(rng, b, dt), d),
                                    name=f"{a} {b} {d}")
                             for a, b, d in (((3,), (3,), -1), ((2, 3), (1, 3), -1),
                                             ((3, 4), (3, 4), 0))],
    public="cross", saved_names=("self", "other", "dim"), onnx=ox.linalg_cross,
    tensors_only=("input", "other"))


vdot = register(
    "vdot", forward_ad="product",
    kernel=lambda a, b: (_dot_check(a, b, "vdot"), no_bool_product("dot", a, (), 1),
                         np.asarray(np.vdot(a, b)).astype(a.dtype))[2],  # conjugates a
    meta=lambda a, b: (_dot_check(a, b, "vdot"), Spec((), a.dtype))[1], node="VdotBackward0",
    # sum(conj(a) b): a's gradient is conj(g) b, b's is g a.
    derivative=lambda g, a, b: (cj(g) * b if b is not None else None,
                                g * a if a is not None else None),
    save=lambda out, a, b: (a if b._rg else None, b if a._rg else None),
    samples=lambda rng, dt: [Sample((rand_array(rng, (4,), dt), rand_array(rng, (4,), dt)))],
    saved_names=("self", "other"), decomposition=lambda a, b: call(dot, a, b),
    tensors_only=("input", "other"))


def _addr_meta(s, v1, v2, beta=1, alpha=1):
    for name, v in (("vec1", v1), ("vec2", v2)):
        if len(v.shape) != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {len(v.shape)}-D")
    shape = (v1.shape[0], v2.shape[0])
    from .views import _expand_shape  # (PyTorch expands self to the outer product's shape)

    _expand_shape(tuple(s.shape), shape, dtype_of(s))
    dt = _dtype.result_type(s, v1, v2)
    if not (dt.is_floating_point or dt.is_complex):
        for name, v in (("beta", beta), ("alpha", alpha)):
            if isinstance(v, float):
                raise RuntimeError(f"For integral input tensors, argument {name} must not be "
                                   "a floating point number.")
    return Spec(shape, dt)


def _addr_kernel(s, v1, v2, beta=1, alpha=1):
    spec = _addr_meta(s, v1, v2, beta, alpha)
    if spec.dtype.np is _BOOL:  # PyTorch's bool addr is logical: (beta and s) or (alpha and ...)
        prod = np.logical_and.outer(v1, v2) & bool(alpha)
        out = prod if not beta else np.logical_or(s, prod)
        return np.ascontiguousarray(np.broadcast_to(out, spec.shape))
    prod = np.multiply.outer(v1, v2) * alpha
    out = prod if beta == 0 else s * beta + prod
    return np.ascontiguousarray(np.broadcast_to(out, spec.shape)).astype(spec.dtype.np)


addr = register(
    "addr", kernel=_addr_kernel, meta=_addr_meta, node="AddrBackward0",
    derivative=lambda g, v1, v2, beta, alpha: (
        _scaled_back(g, beta), _scaled_back(g.mv(cj(v2)), alpha) if v2 is not None else None,
        _scaled_back(g.t().mv(cj(v1)), alpha) if v1 is not None else None, None, None),
    save=lambda out, s, v1, v2, beta=1, alpha=1: (v1 if v2._rg else None,
                                                  v2 if v1._rg else None, beta, alpha),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), rand_array(rng, (3,), dt),
                                     rand_array(rng, (4,), dt), b, al), name=f"{s} {b} {al}")
                             for s, b, al in (((3, 4), 1, 1), ((4,), 0.5, 2), ((), 1, -1))],
    saved_names=("vec1", "vec2", "beta", "alpha"),
    decomposition=lambda s, v1, v2, beta=1, alpha=1: _plus_scaled(
        v1.unsqueeze(1) * v2, alpha, s, beta).expand(v1.shape[0], v2.shape[0]))


def _addmv_kernel(s, m, v, beta=1, alpha=1):
    # (called with floating or complex operands of one dtype: the function checks the rest)
    dt = m.dtype
    if dt.kind == "f" and dt.itemsize == 2:  # half types: one rounding of the float sum
        s, m, v = (np.asarray(a, np.float32) for a in (s, m, v))
    prod = _scaled(_matmul(m, v), alpha)
    out = prod if beta == 0 else _scaled(s, beta) + prod  # beta 0 ignores s, NaN included
    return np.ascontiguousarray(np.broadcast_to(out, prod.shape)).astype(dt, copy=False)


def _addmv_decomposition(s, m, v, beta, alpha):
    """addmv in fusegrad ops. With beta 0, `s` stays in the graph as a zero term (its values,
    NaN included, ignored): its gradient is zeros, as the op's, not None."""
    if beta == 0:
        return _scaled(m.mv(v), alpha) + (s * 0).nan_to_num(0.0, 0.0, 0.0)
    return _plus_scaled(m.mv(v), alpha, s, beta)


addmv = register(
    "addmv", kernel=_addmv_kernel,
    meta=lambda s, m, v, beta=1, alpha=1: Spec((m.shape[0],), dtype_of(m)),
    node="AddmvBackward0",
    # beta * s + alpha * (m @ v): s's gradient is the scaled one (summed to its shape), m's
    # the outer product with conj(v), v's conj(m)^T @ g.
    derivative=lambda g, m, v, beta, alpha: (
        _scaled_back(g, beta), _scaled_back(g.outer(cj(v)), alpha) if v is not None else None,
        _scaled_back(cj(m).t().mv(g), alpha) if m is not None else None, None, None),
    save=lambda out, s, m, v, beta=1, alpha=1: (m if v._rg else None, v if m._rg else None,
                                                beta, alpha),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), rand_array(rng, (3, 4), dt),
                                     rand_array(rng, (4,), dt), b, al), name=f"{s} {b} {al}")
                             for s, b, al in (((3,), 1, 1), ((1,), 0.5, 2), ((), 0, -1))],
    saved_names=("mat", "vec", "beta", "alpha"),
    decomposition=lambda s, m, v, beta=1, alpha=1: _addmv_decomposition(s, m, v, beta, alpha))


def _addbmm_meta(s, b1, b2, beta=1, alpha=1):
    if len(b1.shape) != 3 or len(b2.shape) != 3:
        raise RuntimeError("batch1 must be a 3D tensor" if len(b1.shape) != 3 else
                           "batch2 must be a 3D tensor")
    if b1.shape[0] != b2.shape[0]:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got "
                           f"{b1.shape[0]} and {b2.shape[0]}")
    if b1.shape[2] != b2.shape[1]:
        raise RuntimeError(
            f"Incompatible matrix sizes for bmm ({b1.shape[1]}x{b1.shape[2]} and "
            f"{b2.shape[1]}x{b2.shape[2]})")
    shape = (b1.shape[1], b2.shape[2])
    broadcast_shapes(tuple(s.shape), shape)
    ds, d1, d2 = dtype_of(s), dtype_of(b1), dtype_of(b2)
    if ds is not d2:  # (PyTorch's checks: self against batch2 first, then the batches)
        raise RuntimeError(f"self and mat2 must have the same dtype, but got {ds.legacy} and "
                           f"{d2.legacy}")
    if d1 is not d2:
        raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got {d1.legacy} and "
                           f"{d2.legacy}")
    return Spec(shape, b1.dtype)


def _addbmm_kernel(s, b1, b2, beta=1, alpha=1):
    spec = _addbmm_meta(s, b1, b2, beta, alpha)
    beta, alpha = integer_coefficients(b1.dtype, beta, alpha)
    no_bool_product("addmm_impl_cpu_", b1, spec.shape, b1.shape[0] * b1.shape[2])
    prod = np.matmul(b1, b2).sum(0) * alpha
    out = prod if beta == 0 else s * beta + prod
    return np.ascontiguousarray(np.broadcast_to(out, spec.shape)).astype(b1.dtype)


def _addbmm_derivative(g, b1, b2, beta, alpha, nb):
    ge = g.unsqueeze(0).expand(nb, *g.shape)
    b1, b2 = cj(b1), cj(b2)  # a complex product: the partners' conjugates
    return (_scaled_back(g, beta),
            _scaled_back(ge.bmm(b2.transpose(1, 2)), alpha) if b2 is not None else None,
            _scaled_back(b1.transpose(1, 2).bmm(ge), alpha) if b1 is not None else None,
            None, None)


addbmm = register(
    "addbmm", autocast="lower", kernel=_addbmm_kernel, meta=_addbmm_meta, node="AddbmmBackward0",
    forward_ad="added_product", onnx=ox.batched_addmm(True),
    derivative=_addbmm_derivative,
    save=lambda out, s, b1, b2, beta=1, alpha=1: (b1 if b2._rg else None,
                                                  b2 if b1._rg else None, beta, alpha,
                                                  b1.shape[0]),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), rand_array(rng, (2, 3, 4), dt),
                                     rand_array(rng, (2, 4, 5), dt), b, al), name=f"{s} {b}")
                             for s, b, al in (((3, 5), 1, 1), ((5,), 0.5, 2))],
    saved_names=("batch1", "batch2", "beta", "alpha", ""),
    decomposition=lambda s, b1, b2, beta=1, alpha=1: _plus_scaled(
        call(bmm, b1, b2).sum(0), alpha, s, beta).expand(b1.shape[1], b2.shape[2]))

# In place: `self` must already have the result's shape.
addr_ = inplace_variant(addr, "addr_", samples=lambda rng, dt: [
    Sample((rand_array(rng, (3, 4), dt), rand_array(rng, (3,), dt), rand_array(rng, (4,), dt),
            b, al), name=f"{b} {al}") for b, al in ((1, 1), (0.5, -2))])
addmv_ = inplace_variant(addmv, "addmv_", samples=lambda rng, dt: [
    Sample((rand_array(rng, (3,), dt), rand_array(rng, (3, 4), dt), rand_array(rng, (4,), dt),
            b, al), name=f"{b} {al}") for b, al in ((1, 1), (0.5, -2), (0, 3))])
addbmm_ = inplace_variant(addbmm, "addbmm_", samples=lambda rng, dt: [
    Sample((rand_array(rng, (3, 5), dt), rand_array(rng, (2, 3, 4), dt),
            rand_array(rng, (2, 4, 5), dt), 0.5, 2), name="3x5")])

