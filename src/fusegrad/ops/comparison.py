"""Pointwise comparisons and selection: eq/ne/lt/le/gt/ge, where, maximum, minimum,
clamp, logical and bitwise ops.

Each derivative returns one entry per positional argument (None where there is no tensor or
no gradient); dispatch reduces a broadcast gradient back to its input's shape.
"""

from __future__ import annotations

import functools

import numpy as np

from .. import _dtype
from . import _native
from ._onnx import bitwise as bitwise_onnx
from ._onnx import boolean, clip, compare
from ._util import (
    Spec,
    as_dtype,
    binary_kernel,
    binary_meta,
    binary_samples,
    broadcast_shapes,
    checked_scalar,
    dtype_of,
    iterator_laid,
    laid_if_empty,
    not_implemented_for,
    rand_array,
    result_np,
    shape_of,
    unary_samples,
)
from .arithmetic import (
    _F32_MAX,
    _t,
    float_writer_operands,
    inplace_checks_first,
)
from .registry import Sample, inplace_variant, register

# ---------------------------------------------------------------- comparisons


def _compare(name, ufunc, onnx: str, negate: bool = False, ordered: bool = False):
    # Ordering comparisons have no complex kernel (PyTorch names its CPU kernel).
    real_only = name.split(".")[0] + "_cpu" if ordered else None
    return register(name, kernel=binary_kernel(ufunc, compare=True, real_only=real_only),
                    meta=binary_meta(out_bool=True, real_only=real_only), differentiable=False,
                    samples=binary_samples(), onnx=compare(onnx, negate),
                    public=name.split(".")[0], quantized={"kernel": "_compare"},
                    lowering=lambda v, a, b: v.compare(name.split(".")[0], a, b))


eq = _compare("eq.Tensor", np.equal, "Equal")
ne = _compare("ne.Tensor", np.not_equal, "Equal", negate=True)
lt = _compare("lt.Tensor", np.less, "Less", ordered=True)
le = _compare("le.Tensor", np.less_equal, "LessOrEqual", ordered=True)
gt = _compare("gt.Tensor", np.greater, "Greater", ordered=True)
ge = _compare("ge.Tensor", np.greater_equal, "GreaterOrEqual", ordered=True)


def _compare_inplace(op, scalar: bool):
    """`x.eq_(2)` / `x.eq_(y)`: the result (0 or 1) in self's dtype; the gradient is zero."""
    name = op.name.split(".")[0]
    node = name.capitalize() + ("Backward0" if scalar else "Backward1")
    base = op.samples

    def samples(rng, dtype):
        return [s for s in base(rng, dtype) if isinstance(s.args[1], float) == scalar
                and np.shape(s.args[0]) == np.broadcast_shapes(*map(np.shape, s.args[:2]))]

    return inplace_variant(op, f"{name}_.{'Scalar' if scalar else 'Tensor'}", node=node,
                           differentiable=True, derivative=lambda g: (g * 0, g * 0),
                           zero_grad=True, samples=samples, public=name + "_",
                           tensor_args=() if scalar else (0, 1))


COMPARE_INPLACE = {op.name.split(".")[0] + "_": (_compare_inplace(op, True),
                                                 _compare_inplace(op, False))
                   for op in (eq, ne, lt, le, gt, ge)}

# ---------------------------------------------------------------- where, maximum, clamp


def _where_kernel(cond, a, b):
    if cond.dtype != np.bool_:
        _where_meta(cond, a, b)
    dt = result_np(a, b)
    if (a.__class__ in _NUMBER or b.__class__ in _NUMBER) and (
            dt.kind in "iu" or dt == np.float32):
        # A number is converted to the result dtype as PyTorch converts it: past an integer
        # dtype's (or float32's) range, an overflow error (the half types round to inf)
        a, b = (checked_scalar(x, dt) if x.__class__ in _NUMBER else x for x in (a, b))
    out = np.where(cond, a, b).astype(dt, copy=False)
    if not out.size:  # (numbers are the iterator's operands too: wrapped as 0-d tensors)
        return laid_if_empty(out, cond, a, b)
    if cond.flags.c_contiguous and (a.__class__ is not _ND or a.flags.c_contiguous) and \
            (b.__class__ is not _ND or b.flags.c_contiguous):
        return out  # (row-major operands: a row-major result, as PyTorch's)
    # (in the order of PyTorch's iterator over the condition, then the values)
    return iterator_laid(out, cond, a, b, dt=dt, keep=0)


def _where_meta(cond, a, b):
    if hasattr(cond, "dtype") and dtype_of(cond) is not _dtype.bool_:
        raise RuntimeError(
            f"where expected condition to be a boolean tensor, but got a tensor with dtype "
            f"{dtype_of(cond).legacy}")
    shape = broadcast_shapes(shape_of(cond), shape_of(a), shape_of(b))
    return Spec(shape, _dtype.result_type(a, b))


def _where_derivative(g, cond, a_is_tensor, b_is_tensor):
    zero = g.new_zeros(())
    return (None, g.where(cond, zero) if a_is_tensor else None,
            zero.where(cond, g) if b_is_tensor else None)


def _where_save(out, cond, a, b):
    """The condition, and whether each branch is a tensor: not the branches themselves,
    which backward never reads (and may be changed in place after)."""
    return cond, _t(a), _t(b)


def _where_samples(rng, dtype):
    out = []
    for c, a, b in (((3, 4), (3, 4), (3, 4)), ((3, 4), (4,), (3, 1)), ((), (2,), ())):
        out.append(Sample((np.asarray(rng.random(c) > 0.5), rand_array(rng, a, dtype),
                           rand_array(rng, b, dtype)), name=f"{c},{a},{b}"))
    out.append(Sample((rng.random((3, 4)) > 0.5, rand_array(rng, (3, 4), dtype), 0.0),
                      name="scalar other"))
    return out


def _where_onnx(b, inputs, args, kwargs, opset):
    """Where(cond, a, b) with both branches in the result's dtype."""
    cond = b.cast(inputs[0], np.bool_)
    return b.emit("Where", [cond, b.operand(inputs[1], b.out_dtype),
                            b.operand(inputs[2], b.out_dtype)])


where = register(
    "where.self", kernel=_where_kernel, meta=_where_meta, node="WhereBackward0",
    derivative=_where_derivative, save=_where_save, saved_names=("condition",),
    nondiff_args=(0,),
    samples=_where_samples, tensor_args=(1, 2), onnx=_where_onnx,
    lowering=lambda v, c, a, b: v.where(c, a, b),
    result_order="iterator")


def _extremum_grads(g, a, b, a_loses, b_loses):
    """maximum/minimum's gradients as PyTorch's: ties split the gradient in half, the
    operand that lost gets exactly 0 (`masked_fill`, so an infinite gradient makes no
    0 * inf NaN) and, where a NaN makes the comparisons false, both get all of it."""
    shared = g.where(a != b, g / 2)
    return (shared.masked_fill(a_loses, 0), shared.masked_fill(b_loses, 0))


def _maximum_derivative(g, a, b):
    return _extremum_grads(g, a, b, a < b, a > b)


maximum = register(
    "maximum", kernel=binary_kernel(np.maximum), meta=binary_meta(), node="MaximumBackward0",
    derivative=_maximum_derivative, save=lambda out, a, b: (a, b),
    samples=binary_samples(scalars=()), tensor_args=(0, 1), onnx="Max",
    lowering=lambda v, a, b: v.maximum(a, b),
    saved_names=("self", "other"), tensors_only=("input", "other"))


def _bounds(lo, hi) -> list:
    if lo is None and hi is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    return [v for v in (lo, hi) if v is not None]


_F16, _F32, _F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
_NUMBER = (float, int)  # (bool bounds are in every dtype's range)
_ND = np.ndarray
_NO_COMPLEX_CLAMP = "clamp is not supported for complex types"


def _complex_bounds(a_dt, lo, hi, real_part_ok: bool) -> tuple:
    """Number bounds of which one is complex, as PyTorch's clamp takes them: for a floating
    input (`real_part_ok`, clamp's own overload) a complex number converts to a double, its
    imaginary part zero or an error; anything else refuses complex types."""
    if not real_part_ok or a_dt.category != _dtype.FLOAT:
        raise NotImplementedError(_NO_COMPLEX_CLAMP)
    out = []
    for v in (lo, hi):
        if v.__class__ is complex:
            if v.imag != 0:
                raise RuntimeError("value cannot be converted to type double without overflow")
            v = v.real
        out.append(v)
    return tuple(out)


def _bool_clamp(lo, hi) -> NotImplementedError:
    """PyTorch's error for clamp with a bool result (no kernel), naming its bounds."""
    name = "clamp_scalar_cpu" if lo is not None and hi is not None else \
        "clamp_min_scalar_cpu" if lo is not None else "clamp_max_scalar_cpu"
    return not_implemented_for(name, "Bool")


def clamp_number_kernel(a, lo=None, hi=None, *, real_part_ok: bool = True):
    """clamp of array `a` between numbers `lo` and `hi` (either None), as PyTorch's: in the
    result dtype of `a` and the bounds, which must fit it (an overflow error, as a fill
    value's); NaN propagates; where `a` equals a bound it is kept (its zero's sign).
    `real_part_ok`: see `_complex_bounds` (False for clamp_min/clamp_max)."""
    if lo is None and hi is None:  # (checked before the dtype: a complex input's error too)
        _bounds(lo, hi)
    if lo.__class__ is complex or hi.__class__ is complex or a.dtype.kind == "c":
        if a.dtype.kind == "c":
            raise NotImplementedError(_NO_COMPLEX_CLAMP)
        lo, hi = _complex_bounds(dtype_of(a), lo, hi, real_part_ok)
    dt = result_np(a, *_bounds(lo, hi))
    kind = dt.kind
    if kind in "iu":  # bounds out of an integer dtype's range: PyTorch's overflow error
        lo, hi = checked_scalar(lo, dt), checked_scalar(hi, dt)
    elif kind == "b":
        raise _bool_clamp(lo, hi)
    elif dt is not _F64 and (lo.__class__ in _NUMBER and not -65504.0 <= lo <= 65504.0 or
                             hi.__class__ in _NUMBER and not -65504.0 <= hi <= 65504.0):
        # float32 and the half types: a bound past their range is an overflow error (only
        # a number beyond float16's largest value can be one, NaN included: compares first)
        checked_scalar(lo, dt), checked_scalar(hi, dt)
    if a.dtype is dt and (dt is _F32 or dt is _F64) and a.size >= CLAMP_NATIVE_MIN:
        out = np.empty(a.shape, dt)
        if _clamp_native(a, lo, hi, out):
            return out
    out = a if a.dtype is dt else a.astype(dt)
    # On a tie NumPy's maximum/minimum return their second operand, except float16's loop,
    # its first: the bound goes where `out` is kept.
    if dt is _F16:
        if lo is not None:
            out = np.maximum(out, as_dtype(lo, dt))
        if hi is not None:
            out = np.minimum(out, as_dtype(hi, dt))
    else:
        if lo is not None:
            out = np.maximum(as_dtype(lo, dt), out)
        if hi is not None:
            out = np.minimum(as_dtype(hi, dt), out)
    return a.copy() if out is a else out


def clamp_number_meta(a, lo=None, hi=None, *, real_part_ok: bool = True):
    """`clamp_number_kernel`'s result and errors for a tensor or fake `a`."""
    a_dt = a.dtype
    if lo is None and hi is None:
        _bounds(lo, hi)
    if a_dt.category == _dtype.COMPLEX:
        raise NotImplementedError(_NO_COMPLEX_CLAMP)
    if lo.__class__ is complex or hi.__class__ is complex:
        lo, hi = _complex_bounds(a_dt, lo, hi, real_part_ok)
    dt = _dtype.result_type(a, *_bounds(lo, hi))
    if dt is _dtype.bool_:
        raise _bool_clamp(lo, hi)
    return Spec(tuple(a.shape), dt)


def _clamp_scalar_derivative(g, a, lo, hi):
    mask = None
    if lo is not None:
        mask = a >= lo
    if hi is not None:
        mask = (a <= hi) if mask is None else mask * (a <= hi)
    # `where`: exactly 0 outside the bounds (and at NaN), even for an infinite gradient.
    return (g.where(mask, g.new_zeros(())), None, None)


clamp = register(
    "clamp", kernel=clamp_number_kernel, meta=clamp_number_meta, node="ClampBackward1",
    derivative=_clamp_scalar_derivative, save=lambda out, a, lo=None, hi=None: (a, lo, hi),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), lo, hi), name=f"{lo},{hi}")
                             for s in ((3, 4), ()) for lo, hi in ((-0.5, 0.5), (0.0, None),
                                                                   (None, 1.0))],
    onnx=lambda b, inputs, args, kwargs, opset: clip(b, inputs[0], *args[1:3]),
    lowering=lambda v, a, lo=None, hi=None: v.clamp(a, lo, hi),
    saved_names=("self", "min", "max"))


def _clamp_t_dtype(a, lo, hi) -> _dtype.dtype:
    """The result dtype of clamp with tensor bounds, or PyTorch's error for complex types
    (naming the result dtype, and the kernel of the bounds given, for a real input)."""
    dt = _dtype.result_type(a, *_bounds(lo, hi))
    if dt.category == _dtype.COMPLEX:
        if dtype_of(a).category == _dtype.COMPLEX:
            raise NotImplementedError(_NO_COMPLEX_CLAMP)
        name = "clamp_cpu" if lo is not None and hi is not None else \
            "maximum_cpu" if lo is not None else "minimum_cpu"
        raise not_implemented_for(name, dt)
    if dt is _dtype.bool_ and lo is not None and hi is not None:
        # (one bound is maximum's or minimum's kernel, which take bools)
        raise not_implemented_for("clamp_cpu", "Bool")
    return dt


def _clamp_t_kernel(a, lo=None, hi=None):
    # The input in the result dtype first (as the bounds): `clamp(int64 -66, max=uint8 4)`
    # is uint8 4, not -66 wrapped.
    dt = _clamp_t_dtype(a, lo, hi).np
    out = as_dtype(a, dt)
    # Where the input equals a bound it is kept (its zero's sign), as with number bounds:
    # NumPy's maximum/minimum return their second operand on a tie, float16's its first.
    first = dt is _F16
    if lo is not None:
        lo = as_dtype(lo, dt)
        out = np.maximum(out, lo) if first else np.maximum(lo, out)
    if hi is not None:
        hi = as_dtype(hi, dt)
        out = np.minimum(out, hi) if first else np.minimum(hi, out)
    # (in the order of PyTorch's iterator over the input, then the bounds)
    return out.copy() if out is a else iterator_laid(out, a, lo, hi, dt=dt)


def _clamp_t_meta(a, lo=None, hi=None):
    shape = broadcast_shapes(*[shape_of(v) for v in (a, lo, hi) if v is not None])
    return Spec(shape, _clamp_t_dtype(a, lo, hi))


def _clamp_t_derivative(g, a, lo, hi):
    # With lo > hi the result is hi: the gradient goes to `hi`, as in PyTorch.
    zero = g.new_zeros(())
    keep = None
    if lo is not None:
        keep = a >= lo
    if hi is not None:
        keep = (a <= hi) if keep is None else keep * (a <= hi)
    g_lo = g_hi = None
    if _t(lo):
        below = a < lo
        g_lo = g.where(below * (lo < hi) if hi is not None else below, zero)
    if _t(hi):
        above = a > hi
        g_hi = g.where(((above + (hi < lo)) > 0) if lo is not None else above, zero)
    return (g.where(keep, zero), g_lo, g_hi)


def _clamp_t_onnx(b, inputs, args, kwargs, opset):
    """Max with the lower bound, then Min with the upper (Clip takes scalars only)."""
    out = b.cast(inputs[0], b.out_dtype)
    for op_type, bound in (("Max", inputs[1]), ("Min", inputs[2] if len(inputs) > 2 else None)):
        if bound is not None:
            out = b.emit(op_type, [out, b.operand(bound, b.out_dtype)])
    return out


clamp_tensor = register(
    "clamp.Tensor", kernel=_clamp_t_kernel, meta=_clamp_t_meta, node="ClampBackward0",
    derivative=_clamp_t_derivative, save=lambda out, a, lo=None, hi=None: (a, lo, hi),
    samples=lambda rng, dt: [Sample((rand_array(rng, (3, 4), dt), rand_array(rng, (4,), dt) - 1,
                                     rand_array(rng, (3, 1), dt) + 1))],
    public="clamp", onnx=_clamp_t_onnx, optional_tensor_args=(1, 2),
    saved_names=("self", "min", "max"))


def _minimum_derivative(g, a, b):
    return _extremum_grads(g, a, b, a > b, a < b)


minimum = register(
    "minimum", kernel=binary_kernel(np.minimum), meta=binary_meta(), node="MinimumBackward0",
    derivative=_minimum_derivative, save=lambda out, a, b: (a, b),
    saved_names=("self", "other"),
    samples=binary_samples(scalars=()), tensor_args=(0, 1), onnx="Min",
    lowering=lambda v, a, b: v.minimum(a, b), tensors_only=("input", "other"))

# `_foreach_maximum_(tensors, others)` (and minimum_) write each pair's result into the
# tensor, recorded as the binary op's node (MaximumBackward0), as PyTorch's loop records
# them. No Tensor method spells them: the public spelling is the method with the same
# values (a tensor bound's clamp_min_), which the surface knows.
foreach_maximum_list_ = inplace_variant(
    maximum, "_foreach_maximum_.List", saves_self=True, gradcheck=False, onnx=None,
    public="clamp_min_")
foreach_minimum_list_ = inplace_variant(
    minimum, "_foreach_minimum_.List", saves_self=True, gradcheck=False, onnx=None,
    public="clamp_max_")

# ---------------------------------------------------------------- logical and bitwise


def _bool_samples(rng, dtype):
    out = []
    for a, b in (((3, 4), (3, 4)), ((3, 4), (4,)), ((), (2,)), ((0,), ())):
        out.append(Sample((rand_array(rng, a, dtype), rand_array(rng, b, dtype)),
                          name=f"{a}x{b}"))
    out.append(Sample((rng.random((3,)) > 0.5, rng.integers(-2, 3, (3,))), name="bool,int"))
    return out


def _logical(name, ufunc, onnx=None):
    op = register(name, kernel=lambda a, b: laid_if_empty(ufunc(a, b), a, b),
                  meta=binary_meta(out_bool=True),
                  differentiable=False, samples=_bool_samples, onnx=onnx,
                  tensors_only=("input", "other"))
    inplace_variant(op, name + "_", differentiable=False)
    return op


logical_and = _logical("logical_and", np.logical_and, boolean("And"))
logical_or = _logical("logical_or", np.logical_or, boolean("Or"))
logical_xor = _logical("logical_xor", np.logical_xor, boolean("Xor"))
logical_not = register(
    "logical_not", kernel=np.logical_not, meta=lambda a: Spec(tuple(a.shape), _dtype.bool_),
    differentiable=False, samples=unary_samples(), onnx=boolean("Not"),
    lowering=lambda v, a: v.logical_not(a))
logical_not_ = inplace_variant(logical_not, "logical_not_", differentiable=False)


def _bitwise_check(dt) -> None:
    if dt.kind not in "biu":
        name = _dtype.FROM_NP[dt].legacy if dt in _dtype.FROM_NP else str(dt)
        raise not_implemented_for("bitwise_not_cpu", name)


def _bitwise_kernel(ufunc, fname):
    def kernel(a, b):
        dt = result_np(a, b)
        if dt.kind not in "biu":
            name = _dtype.FROM_NP[dt].legacy
            raise not_implemented_for(f"{fname}_cpu", name)
        return laid_if_empty(ufunc(as_dtype(a, dt), as_dtype(b, dt)), a, b)

    return kernel


def _bitwise_meta(fname, bool_ok: bool = True):
    """Meta of a bitwise op (`fname`: its kernel's name without `_cpu`): integer results,
    and bool ones unless not `bool_ok` (the shifts)."""

    def meta(a, b):
        spec = binary_meta()(a, b)
        category = spec.dtype.category
        if category >= _dtype.FLOAT or (category == _dtype.BOOL and not bool_ok):
            raise not_implemented_for(f"{fname}_cpu", spec.dtype)
        return spec

    return meta


def _int_samples(rng, dtype):
    i64 = np.dtype(np.int64)
    out = []
    for a, b in (((3, 4), (3, 4)), ((3, 4), (4,)), ((), (2,)), ((0,), ())):
        out.append(Sample((rng.integers(-8, 9, a).astype(i64), rng.integers(-8, 9, b)),
                          name=f"{a}x{b}"))
    out.append(Sample((rng.random((3,)) > 0.5, rng.random((3,)) > 0.5), name="bool"))
    return out


def _bitwise(name, ufunc):
    fname = name.split(".")[0]
    word = fname.split("_")[1]
    mapping = bitwise_onnx("Bitwise" + word.capitalize(), word.capitalize())
    lowering = lambda v, a, b: v.bitwise(fname, a, b)
    op = register(name, kernel=_bitwise_kernel(ufunc, fname), meta=_bitwise_meta(fname),
                  differentiable=False, samples=_int_samples, public=fname, onnx=mapping,
                  lowering=lowering)
    scalar = register(name.replace("Tensor", "Scalar"), kernel=_bitwise_kernel(ufunc, fname),
                      meta=_bitwise_meta(fname), differentiable=False, public=fname,
                      onnx=mapping, lowering=lowering,
                      samples=lambda rng, dt: [Sample((rng.integers(-8, 9, (3, 4)), 5))])
    inplace_variant(op, fname + "_.Tensor", differentiable=False,
                    kernel=inplace_checks_first(op.kernel))
    return op, scalar


bitwise_and, bitwise_and_scalar = _bitwise("bitwise_and.Tensor", np.bitwise_and)
bitwise_or, bitwise_or_scalar = _bitwise("bitwise_or.Tensor", np.bitwise_or)
bitwise_xor, bitwise_xor_scalar = _bitwise("bitwise_xor.Tensor", np.bitwise_xor)


def _bitwise_not_kernel(a):
    _bitwise_check(a.dtype)
    return np.invert(a)


def _bitwise_not_meta(a):
    if a.dtype.category == _dtype.FLOAT:
        raise not_implemented_for("bitwise_not_cpu", a.dtype)
    return Spec(tuple(a.shape), a.dtype)


bitwise_not = register(
    "bitwise_not", kernel=_bitwise_not_kernel, meta=_bitwise_not_meta, differentiable=False,
    onnx=bitwise_onnx("BitwiseNot", "Not"), lowering=lambda v, a: v.bitwise("bitwise_not", a),
    samples=lambda rng, dt: [Sample((rng.integers(-8, 9, (3, 4)),)),
                             Sample((rng.random((5,)) > 0.5,))])
bitwise_not_ = inplace_variant(bitwise_not, "bitwise_not_", differentiable=False)


def clamp_number_inplace(kernel, complex_first: bool = False):
    """The kernel of `clamp_` (or clamp_min_/clamp_max_) with number bounds: first, as
    PyTorch, that the result dtype of an integer or bool `self` and its bounds fits `self`
    (an error naming `self`'s C++ type); a floating `self` holds any result the kernel
    returns (or refuses itself). `complex_first`: a complex bound is refused before that
    (clamp_min_, clamp_max_)."""

    @functools.wraps(kernel)  # its signature and name, which other layers read
    def inplace_kernel(a, *bounds):
        if complex_first and any(v.__class__ is complex for v in bounds):
            return kernel(a, *bounds)
        if a.dtype.kind in "biu":
            dt = _dtype.result_type(a, *[v for v in bounds if v is not None])
            if not _dtype.can_cast(dt, _dtype.FROM_NP[a.dtype]):
                raise RuntimeError(f"result type {dt.legacy} can't be cast to the desired "
                                   f"output type {_dtype.FROM_NP[a.dtype].cpp}")
        return kernel(a, *bounds)

    return inplace_kernel


# Contiguous float arrays of at least this many values are clamped between number bounds in
# C (`pointwise.c`'s `clamp_f32`/`clamp_f64`: one pass, the pieces shared between threads),
# in place and not; below it NumPy's two ufunc calls cost less than the ctypes call.
CLAMP_NATIVE_MIN = 1024


def _clamp_native(a, lo, hi, out) -> bool:
    """clamp of C-contiguous float32/float64 `a` between numbers `lo`, `hi` (either None)
    into `out` (a C-contiguous array of `a`'s dtype and shape, or `a`) in C; False, having
    written nothing, below `CLAMP_NATIVE_MIN` values or while native kernels are off."""
    if a.size < CLAMP_NATIVE_MIN:
        return False
    bounds = np.array([0 if lo is None else lo, 0 if hi is None else hi], a.dtype)
    return _native.run_elementwise(_native.typed("pointwise", "clamp", a.dtype, "pppiii"),
                                   (a, out, bounds), ((lo is not None) | (hi is not None) << 1,))


def _clamp_write_into(a, lo=None, hi=None) -> bool:
    """clamp_'s `write_into` (see dispatch's in-place path): a float32/float64 `a` between
    real number bounds (`float_writer_operands`), clamped in place (in C where
    `_clamp_native` takes it, else the kernel's two ufunc calls, the bound first: where `a`
    equals it, `a` is kept); False, having written nothing, for anything else (another
    dtype, a bound the kernel must check or refuse, a read-only `a`). WGAN-style
    `p.data.clamp_(-c, c)` on (32, 64, 8, 8): 65 -> ~12 us; bounds past float16's range
    but within float32's (`clamp_(-1e9, 1e9)`) as well: 45 -> ~18 us."""
    if (lo is None and hi is None) or not float_writer_operands(a, (lo, hi), arrays=False):
        return False
    dt = a.dtype
    if dt is _F32 and ((lo is not None and not -_F32_MAX <= lo <= _F32_MAX) or
                       (hi is not None and not -_F32_MAX <= hi <= _F32_MAX)):
        return False  # (the kernel's checks and errors: a bound past float32's range)
    if _clamp_native(a, lo, hi, a):
        return True
    if lo is not None:
        np.maximum(as_dtype(lo, dt), a, out=a)
    if hi is not None:
        np.minimum(as_dtype(hi, dt), a, out=a)
    return True


clamp_ = inplace_variant(clamp, "clamp_", saves_self=True,
                         kernel=clamp_number_inplace(clamp_number_kernel),
                         write_into=_clamp_write_into)
_clamp_t_inplace_checked = inplace_checks_first(_clamp_t_kernel, operands=3)


def _clamp_t_inplace(a, lo=None, hi=None):
    if a.dtype.kind == "c":  # refused before the shape and dtype checks
        raise NotImplementedError(_NO_COMPLEX_CLAMP)
    return _clamp_t_inplace_checked(a, lo, hi)


clamp_tensor_ = inplace_variant(clamp_tensor, "clamp_.Tensor", saves_self=True,
                                kernel=_clamp_t_inplace)
