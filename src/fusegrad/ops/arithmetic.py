"""Pointwise arithmetic: add, sub, rsub, mul, div, neg, reciprocal, pow, atan2,
floor_divide, remainder, fmod, lerp, addcmul, addcdiv (and their in-place forms).

Each derivative returns one entry per positional argument (None where there is no tensor or
no gradient); dispatch reduces a broadcast gradient back to its input's shape.
"""

from __future__ import annotations

import functools
import operator

import numpy as np

from .. import _dtype
from .._dispatch import call2, plain, save_partners, save_result
from .._dtype import COMPLEX as _COMPLEX
from . import _native
from . import _onnx as ox
from ._onnx import add_like
from ._util import (
    F32,
    F64,
    HALF,
    Spec,
    as_dtype,
    binary_kernel,
    binary_meta,
    binary_samples,
    broadcast_shapes,
    check_python_int,
    checked_scalar,
    cj,
    cpu_capability,
    dtype_of,
    float_np,
    in_float32,
    iterator_laid,
    iterator_ordered,
    laid_if_empty,
    not_implemented_for,
    rand_array,
    result_np,
    shape_of,
    unary_kernel,
    unary_meta,
    unary_samples,
)
from .registry import REGISTRY, Sample, inplace_variant, register


def _t(x) -> bool:
    return isinstance(x, plain.Tensor)


def needs(x) -> bool:
    """True for a tensor that requires grad (its partner's value must then be saved)."""
    return isinstance(x, plain.Tensor) and x._rg


# ---------------------------------------------------------------- arithmetic


def _is_bool(x) -> bool:
    return isinstance(x, bool) or (hasattr(x, "dtype") and dtype_of(x) is _dtype.bool_)


def _check_sub(a, b) -> None:
    if _is_bool(a) and _is_bool(b):
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    if _is_bool(a) or _is_bool(b):
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. "
                           "If you are trying to invert a mask, use the `~` or `logical_not()` "
                           "operator instead.")


_ndarray = np.ndarray
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
# add's default alpha. CPython keeps one object for each small int, so `alpha is _ONE` says
# "the int 1" in one step: True, 1.0 and 1+0j are equal to 1 but PyTorch checks them.
_ONE = 1
# (quantized tensors: PyTorch makes the quantized result first and refuses a number there)
REFUSES_NUMBER = {"refuses_number": True}
_F32_MAX = float(np.finfo(np.float32).max)
# Contiguous float32 operands of one shape and at least this many values take add/sub's
# alpha in C (`pointwise.c`'s `axpy_f32`: one fused multiply-add per element, the pieces
# shared between threads); below it NumPy's float64 passes cost less than the ctypes call.
# (32, 64, 8, 8) values: 173 -> 15 us in place.
AXPY_NATIVE_MIN = 1024


def _axpy_native(a, b, alpha, out) -> bool:
    """`out = a + alpha * b` for float32 `alpha` (a NumPy float32) in C, where `a`, `b` and
    `out` are C-contiguous float32 arrays of one shape of at least `AXPY_NATIVE_MIN` values
    (`out` may be `a`); False, having written nothing, otherwise or while native kernels
    are off. The same bits as the float64 path's single rounding of the exact product's sum
    (fused multiply-add)."""
    if a.shape != b.shape or a.size < AXPY_NATIVE_MIN:
        return False
    return _native.run_elementwise(_native.function("pointwise", "axpy_f32", "ppppii"),
                                   (a, b, out, np.array([alpha], _F32)))


def alpha_refusal(dt: _dtype.dtype, alpha) -> str | None:
    """PyTorch's message refusing add/sub's `alpha` for the result dtype `dt` (None: the
    alpha is accepted)."""
    if isinstance(alpha, np.generic):
        alpha = _dtype.python_scalar(alpha)
    if alpha.__class__ is bool and dt is not _dtype.bool_:
        return "Boolean alpha only supported for Boolean results."
    if dt.category < _dtype.FLOAT and isinstance(alpha, (float, complex)):
        return "For integral input tensors, argument alpha must not be a floating point number."
    if dt.category != _COMPLEX and isinstance(alpha, complex):
        return "For non-complex input tensors, argument alpha must not be a complex number."
    return None


def refuses_bool_subtraction(a, b) -> bool:
    """Whether subtracting `b` from `a` (arrays, tensors or numbers) is PyTorch's error for
    a bool operand, which it raises before any other."""
    return _is_bool(a) or _is_bool(b)


def _check_alpha(dt: _dtype.dtype, alpha) -> None:
    """PyTorch's checks of add/sub's `alpha` against the result dtype `dt`."""
    refusal = alpha_refusal(dt, alpha)
    if refusal is not None:
        raise RuntimeError(refusal)


def _fma64(x, y, z):
    """x * y + z in float64 rounded once, as the fused multiply-add of PyTorch's float64
    kernel: Dekker's exact product and Knuth's exact sum (NumPy has no fma). Where those
    steps overflow, the plain formula."""
    p = x * y
    with np.errstate(all="ignore"):
        cx = 134217729.0 * x  # 2**27 + 1: splits a double into two 26-bit halves
        xh = cx - (cx - x)
        cy = 134217729.0 * y
        yh = cy - (cy - y)
        xl, yl = x - xh, y - yh
        product_error = ((xh * yh - p) + xh * yl + xl * yh) + xl * yl
        s = p + z
        t = s - p
        sum_error = (p - (s - t)) + (z - t)
        out = s + (sum_error + product_error)
        return np.where(np.isfinite(out), out, p + z)


def _is_complex(x) -> bool:
    """Whether `x` (an array or a number) is complex."""
    return x.__class__ is complex or (x.__class__ is _ndarray and x.dtype.kind == "c")


def _half_tail(out, a, b, alpha):
    """`out` (a + alpha * b of half-type arrays) with PyTorch's scalar loop past the last
    full vector: where both operands are C-contiguous arrays of one shape, its kernel walks
    them as one row in vectors of 32 values (16 without AVX512) computing in float32, and the
    elements after the last whole vector one at a time in the half type, the product alpha *
    b rounded there before the sum."""
    if a.__class__ is not _ndarray or b.__class__ is not _ndarray or a.shape != b.shape or \
            a.dtype != out.dtype or b.dtype != out.dtype or out.shape != a.shape or \
            not (a.flags.c_contiguous and b.flags.c_contiguous and out.flags.c_contiguous):
        return out
    lanes = 32 if cpu_capability() == "AVX512" else 16
    start = out.size - out.size % lanes
    if start == out.size:
        return out
    dt = out.dtype
    tail_a = a.reshape(-1)[start:].astype(F32)
    product = (b.reshape(-1)[start:].astype(F32) * alpha).astype(dt).astype(F32)
    out.reshape(-1)[start:] = (tail_a + product).astype(dt)
    return out


def _add_alpha(ufunc, a, b, alpha, dt):
    """a + alpha * b (or a - alpha * b) with PyTorch's kernels' arithmetic: alpha converted
    to the result dtype `dt` (an error where it overflows), both operands converted to `dt`
    before the product (which wraps in integers), a fused multiply-add in float32/float64,
    float32 with the half types, a complex product for complex results (even for alpha 1:
    an infinite part of `b` gives a NaN there, as in PyTorch)."""
    if dt.kind == "b":  # alpha is bool or an int: `or` with `b` where alpha is true
        return np.logical_or(as_dtype(a, dt), np.logical_and(as_dtype(b, dt), bool(alpha)))
    alpha = checked_scalar(alpha, dt)
    if dt.kind == "c":
        return ufunc(as_dtype(a, dt), np.multiply(as_dtype(b, dt), dt.type(alpha)))
    if dt.kind in "iu":
        if b.__class__ is not _ndarray:  # a number: the product wraps as the dtype's would
            return ufunc(as_dtype(a, dt), as_dtype(b * alpha, dt))
        with np.errstate(over="ignore"):
            return ufunc(as_dtype(a, dt), np.multiply(as_dtype(b, dt), dt.type(alpha)))
    if ufunc is np.subtract:
        alpha = -alpha
    if dt in HALF:  # a + alpha * b in float32, operands and alpha rounded to dt
        alpha = np.asarray(alpha).astype(dt).astype(F32)
        return _half_tail(in_float32(lambda x, y: x + y * alpha, (a, b), dt), a, b, alpha)
    x = np.asarray(as_dtype(a, dt), dt)
    y = np.asarray(as_dtype(b, dt), dt)
    if dt is _F32:  # float32 products are exact in float64: one rounding, as the fma's
        return (y.astype(F64) * F64.type(F32.type(alpha)) + x).astype(F32)
    return _fma64(y, F64.type(alpha), x)


def _add_kernel(ufunc):
    base = binary_kernel(ufunc)
    subtract = ufunc is np.subtract

    def kernel(a, b, alpha=1):
        # `binary_kernel`'s fast path (a float array with one of its dtype or a Python
        # number; never a bool, so sub's check cannot refuse it), tested here so that every
        # eager `a + b` does not pay a second Python call.
        if alpha is _ONE and a.__class__ is _ndarray:
            dt = a.dtype
            if dt is _F32 or dt is _F64:
                cls = b.__class__
                if (cls is _ndarray and b.dtype is dt) or cls is float or cls is int:
                    out = ufunc(a, b)
                    return out if out.size else laid_if_empty(out, a, b)
        if subtract:
            _check_sub(a, b)
        if a.__class__ is _ndarray and b.__class__ is _ndarray and a.dtype is _F32 and \
                b.dtype is _F32 and (alpha.__class__ is int or alpha.__class__ is float) and \
                -_F32_MAX <= alpha <= _F32_MAX:
            # float32 tensors and a number (`p.add_(grad, alpha=-lr)`): the fused
            # multiply-add's single rounding through float64, where the product is exact.
            alpha = _F32.type(-alpha if subtract else alpha)
            if a.shape == b.shape and a.size >= AXPY_NATIVE_MIN:
                out = np.empty(a.shape, _F32)
                if _axpy_native(a, b, alpha, out):
                    return out
            alpha = _F64.type(alpha)
            return laid_if_empty(
                np.add(np.multiply(b, alpha, dtype=_F64), a, dtype=_F64).astype(_F32), a, b)
        if alpha is _ONE and not (_is_complex(a) or _is_complex(b)):
            return base(a, b)
        rt = _dtype.result_type(a, b)
        _check_alpha(rt, alpha)
        if isinstance(alpha, np.generic):
            alpha = _dtype.python_scalar(alpha)
        return laid_if_empty(_add_alpha(ufunc, a, b, alpha, rt.np), a, b)

    kernel.ufunc = ufunc  # its fast path (alpha 1), which dispatch's recorders take themselves
    return kernel


def _conj(alpha):
    """A complex alpha's conjugate (the conjugate Wirtinger rule); any other as it is."""
    return alpha.conjugate() if isinstance(alpha, complex) else alpha


def _alpha_meta(a, b, alpha=1):
    spec = binary_meta()(a, b)
    if alpha is not _ONE:
        _check_alpha(spec.dtype, alpha)
    return spec


def _sub_meta(a, b, alpha=1):
    _check_sub(a, b)
    return _alpha_meta(a, b, alpha)


add = register(
    "add.Tensor", kernel=_add_kernel(np.add), meta=_alpha_meta, node="AddBackward0",
    quantized=REFUSES_NUMBER,
    derivative=lambda g, alpha: (g, g * _conj(alpha) if alpha != 1 else g),
    save=lambda out, a, b, alpha=1: (alpha,),
    samples=binary_samples(scalars=(2.5, 3)),
    lowering=lambda v, a, b, alpha=1: v.add(a, v.mul(b, alpha)),
    tensor_args=(0, 1), onnx=add_like("Add"),
    saved_names=("alpha",))
sub = register(
    "sub.Tensor", kernel=_add_kernel(np.subtract), meta=_sub_meta, node="SubBackward0",
    quantized=REFUSES_NUMBER,
    derivative=lambda g, alpha: (g, -g * _conj(alpha) if alpha != 1 else -g),
    save=lambda out, a, b, alpha=1: (alpha,),
    samples=binary_samples(), tensor_args=(0, 1),
    lowering=lambda v, a, b, alpha=1: v.sub(a, v.mul(b, alpha)),
    onnx=add_like("Sub"),
    saved_names=("alpha",))
_sub_kernel = _add_kernel(np.subtract)


def _rsub_kernel(a, b, alpha=1):
    return _sub_kernel(b, a, alpha)


def _rsub_decomposition(a, b, alpha=1):
    """b - alpha * a in core ops, `a` converted to the result's dtype first as the kernel
    computes: negated in its own dtype, a uint8 would wrap (`1.5 - x` of uint8), and
    `a * 0.5` of integers would make float32 where the result is float16."""
    rt = _sub_meta(a, b, alpha).dtype
    if a.dtype is not rt:
        a = a.to(rt)
    return -(a if alpha == 1 else a * alpha) + b


rsub = register(
    "rsub.Scalar", kernel=_rsub_kernel,
    quantized=REFUSES_NUMBER,
    meta=_sub_meta, node="RsubBackward1",
    # `other` may be a tensor too (`torch.rsub(a, b)`): its gradient is the incoming one.
    derivative=lambda g, alpha: (-g * _conj(alpha) if alpha != 1 else -g, g),
    save=lambda out, a, b, alpha=1: (alpha,),
    samples=lambda rng, dt: [Sample((rand_array(rng, (3, 4), dt), 2.0))],
    onnx=add_like("Sub", swap=True),
    decomposition=_rsub_decomposition,
    lowering=lambda v, a, b, alpha=1: v.sub(b, v.mul(a, alpha)))
# `torch.rsub(a, b)` with a tensor `b`: PyTorch's other overload (its own node).
rsub_tensor = register(
    "rsub.Tensor", kernel=_rsub_kernel, meta=_sub_meta, node="RsubBackward0",
    quantized=REFUSES_NUMBER,
    derivative=lambda g, alpha: (-g * _conj(alpha) if alpha != 1 else -g, g),
    save=lambda out, a, b, alpha=1: (alpha,), saved_names=("alpha",), public="rsub",
    samples=lambda rng, dt: [Sample((rand_array(rng, (3, 4), dt), rand_array(rng, (4,), dt)))],
    tensor_args=(0, 1), onnx=add_like("Sub", swap=True),
    decomposition=_rsub_decomposition,
    lowering=lambda v, a, b, alpha=1: v.sub(b, v.mul(a, alpha)))
def _mul_derivative(g, a, b):
    if g._dtype.category == _COMPLEX:  # a complex product: the partners' conjugates
        a, b = cj(a), cj(b)
    # `call2`: the op that `g * b` reaches through the operator and its protocol wrapper.
    return (call2(mul, g, b) if b is not None else None,
            call2(mul, g, a) if a is not None else None)


def _div_derivative(g, a, b):
    # `a` is saved only when `b` requires grad (as PyTorch saves `self`). The divisor's
    # gradient is -g ((a / b) / b), PyTorch's order (every dtype: -g a / (b b) left half the
    # values an ulp off, and most where b was broadcast and its gradient summed).
    if g._dtype.category == _COMPLEX:
        return (g / cj(b), -g * cj((a / b) / b) if a is not None else None)
    return (g / b, -g * ((a / b) / b) if a is not None else None)


_multiply = np.multiply
_Tensor = plain.Tensor  # set before any op module is imported


def _factor_array(x, dt):
    """A saved factor as the ufunc takes it: a Python number, or the array of a plain tensor
    of dtype `dt`; None (not handled on arrays) for anything else."""
    cls = x.__class__
    if cls is float or cls is int:
        return x
    if cls is plain.Tensor or (isinstance(x, plain.Tensor) and x._plain):
        data = x._data
        if data.__class__ is _ndarray and data.dtype is dt:
            return data
    return None


def _mul_on_arrays(g, a, b):
    """`_mul_derivative` on arrays (`g` the gradient's), where the recorders' ufunc fast path
    would compute the same products: a float32/float64 gradient of one dimension or more
    (a 0-dim product is a NumPy scalar) and factors of its dtype or Python numbers. None for
    any other operands (complex ones, a cast, a subclass)."""
    dt = g.dtype
    if (dt is not _F32 and dt is not _F64) or not g.ndim:
        return None
    # A plain Tensor of the gradient's dtype (the commonest factor) is tested here, anything
    # else by `_factor_array`: a call less per factor.
    if b is not None:
        if b.__class__ is not _Tensor or (bd := b._data).__class__ is not _ndarray or \
                bd.dtype is not dt:
            if (bd := _factor_array(b, dt)) is None:
                return None
    if a is not None:
        if a.__class__ is not _Tensor or (ad := a._data).__class__ is not _ndarray or \
                ad.dtype is not dt:
            if (ad := _factor_array(a, dt)) is None:
                return None
    return (None if b is None else _multiply(g, bd), None if a is None else _multiply(g, ad))


_mul_derivative.on_arrays = _mul_on_arrays

mul = register(
    "mul.Tensor", forward_ad="product",
    quantized=REFUSES_NUMBER,
    kernel=binary_kernel(np.multiply, scalar_at_full_precision=True),
    meta=binary_meta(), node="MulBackward0",
    derivative=_mul_derivative,
    # Each factor when the other requires grad: the recorders write this save out.
    save=save_partners,
    samples=binary_samples(), lowering=lambda v, a, b: v.mul(a, b), tensor_args=(0, 1), onnx="Mul",
    saved_names=("self", "other"))
div = register(
    "div.Tensor", forward_ad="product",
    quantized=REFUSES_NUMBER,
    kernel=binary_kernel(np.true_divide, to_float=True, scalar_at_full_precision=True),
    meta=binary_meta(to_float=True), node="DivBackward0",
    derivative=_div_derivative,
    save=lambda out, a, b: (a if getattr(b, "_rg", False) else None, b),
    samples=binary_samples(domain=(0.5, 2.0)), lowering=lambda v, a, b: v.truediv(a, b),
    tensor_args=(0, 1), onnx="Div",
    saved_names=("self", "other"))
neg = register(
    "neg", kernel=np.negative, meta=unary_meta(to_float=False), node="NegBackward0",
    derivative=lambda g: (-g,), samples=unary_samples(), lowering=lambda v, a: v.neg(a), onnx="Neg")
reciprocal = register(
    "reciprocal", kernel=unary_kernel(np.reciprocal), meta=unary_meta(), node="ReciprocalBackward0",
    derivative=lambda g, out: (-g * cj(out * out),), save=save_result,
    samples=unary_samples(domain=(0.5, 2.0)), lowering=lambda v, a: v.truediv(1, a),
    onnx="Reciprocal",
    saved_names=("result",))


_NEG_INT_POW = "Integers to negative integer powers are not allowed."


def _int_power(a, e):
    """Integer powers as PyTorch computes them: x ** -n is 0 unless |x| is 1."""
    e = np.asarray(e)
    if e.dtype.kind not in "iu" or not (e < 0).any():
        return np.power(a, e)
    pos = np.power(a, np.where(e < 0, 0, e))  # (np.abs of the dtype's minimum is negative)
    neg = np.where(a == 1, 1, np.where(a == -1, np.where(e % 2 == 0, 1, -1), 0))
    return np.where(e < 0, neg, pos).astype(np.result_type(a, e), copy=False)


# Powers PyTorch computes by products and divisions rather than `pow` (the same bits as its
# CPU kernels): x ** 2 is x * x, x ** 3 is x * x * x, and so on. (NumPy's power with a
# Python 2 already gives x * x's bits, at three times the time.)
_PRODUCT_POWERS = {2: lambda a: a * a, 3: lambda a: a * a * a, -1: lambda a: 1 / a,
                   -2: lambda a: 1 / (a * a), -0.5: lambda a: 1 / np.sqrt(a)}


def _pow_ts_kernel(a, e):
    if a.__class__ is np.ndarray and (a.dtype is F32 or a.dtype is F64) and \
            (e.__class__ is int or e.__class__ is float):
        power = _PRODUCT_POWERS.get(e)
        if power is not None:
            return power(a)
    check_python_int(e)  # (a number beyond int64 and uint64 is refused before its sign)
    dt = float_np(a.dtype) if isinstance(e, float) else a.dtype
    if dt.kind in "iu" and isinstance(e, int) and e < 0:
        raise RuntimeError(_NEG_INT_POW)
    if (e.__class__ is int or e.__class__ is float) and (
            dt.kind in "iu" or dt is not F64 and not -65504.0 <= e <= 65504.0):
        # PyTorch converts the exponent to the base's type first: int8 ** 255 is an
        # overflow error, not 255 wrapped to -1 (only a number past float16's largest can
        # overflow a floating base)
        checked_scalar(e, dt)
    if dt in HALF and (e.__class__ is int or e.__class__ is float):
        if dt.kind == "f":
            # float16's kernel calls pow itself (C's: (-inf) ** 0.5 is inf, (-0) ** 0.5 is
            # 0), which NumPy's power gives for an array exponent (a number 0.5 is sqrt).
            if e == 0.5:
                x = a.astype(F32)
                return np.power(x, np.full_like(x, 0.5)).astype(dt)
        elif (power := _PRODUCT_POWERS.get(e)) is not None:
            if e == 3 or e == -2:
                # bfloat16's vectorised kernel rounds the square to bfloat16 before the
                # next product (x * x * x) or the division (1 / (x * x))
                x = a.astype(F32)
                sq = (x * x).astype(dt).astype(F32)
                return (sq * x if e == 3 else 1 / sq).astype(dt)
            return in_float32(power, (a,), dt)  # bfloat16's: float32's products
    if dt.kind == "b" and e.__class__ is bool:
        # A bool result (NumPy's power would give int8): x ** True is x, x ** False is 1.
        return a.copy() if e else np.ones_like(a)
    return binary_kernel(np.power)(a.astype(dt) if a.dtype is not dt else a, e)


def _pow_ts_meta(a, e):
    dt = _dtype.result_type(a, e)
    if dt.category != _dtype.FLOAT and isinstance(e, int) and e < 0:
        raise RuntimeError(_NEG_INT_POW)
    return Spec(tuple(a.shape), dt)


def _pow_ts_derivative(g, a, e):
    if e == 0:
        return (g * 0, None)
    if a._dtype.category != _COMPLEX and not isinstance(e, complex):
        # PyTorch's C++ formula scales by the exponent with mul.Scalar: MulBackward1 under
        # create_graph (the entry is scalar.py's, which builds on this module)
        return (g * call2(REGISTRY["mul.Scalar"], a.pow(e - 1), e), None)
    return (g * cj(e * a.pow(e - 1)), None)


def _pow_onnx(b, inputs, args, kwargs, opset):
    """Pow with a number as base or exponent (a constant of the result's dtype)."""
    return b.emit("Pow", [b.operand(inputs[0], b.out_dtype), b.operand(inputs[1], b.out_dtype)])


def _pow_tt_derivative(g, a, b, out):
    # 0 where the exponent is 0 (the base's) and where the base is 0 with a nonnegative
    # exponent (the exponent's), where the formulas multiply 0 by an infinity, as PyTorch's.
    # Complex operands: the conjugated derivatives, and the exponent's real part's sign.
    b_sign = b.real if b._dtype.category == _COMPLEX else b
    return ((g * cj(b * a.pow(b - 1))).masked_fill(b == 0, 0),
            (g * cj(out * a.log())).masked_fill((a == 0) & (b_sign >= 0), 0))


def _pow_scalar_base_derivative(g, s, out):
    with np.errstate(divide="ignore"):
        log_s = complex(np.log(complex(s))) if isinstance(s, complex) else float(np.log(s))
    # Conjugated for a complex result (the conjugate Wirtinger rule).
    grad = g * cj(out * log_s)
    if s == 0:  # 0 ** e is finite exactly where e >= 0: a zero gradient there
        grad = grad.masked_fill(out.isfinite(), 0)
    return (None, grad)


pow_scalar = register(
    "pow.Tensor_Scalar", kernel=_pow_ts_kernel, meta=_pow_ts_meta, node="PowBackward0",
    derivative=_pow_ts_derivative, save=lambda out, a, e: (a, e),
    # The exponents computed by products (`_PRODUCT_POWERS`, negative integers for floats
    # only: integers refuse them) beside general ones.
    samples=lambda rng, dt: [
        Sample((rand_array(rng, s, dt, (0.5, 2.0)), e), name=f"^{e}")
        for s in ((3, 4), (), (0,))
        for e in (2, 3, 0.5, -1.5, 0, -0.5) + ((-2,) if np.dtype(dt).kind in "fc" else ())],
    onnx=_pow_onnx, lowering=lambda v, a, e: v.pow_scalar(a, e),
    saved_names=("self", "exponent"))
_pow_tt_base = binary_kernel(_int_power)


def _check_bool_pow(a, b) -> None:
    """PyTorch has no pow kernel for two bools (a tensor exponent, or a number base)."""
    if _is_bool(a) and _is_bool(b):
        raise not_implemented_for("pow", "Bool")


def _pow_tt_kernel(a, b):
    _check_bool_pow(a, b)
    return _pow_tt_base(a, b)


def _pow_tt_meta(a, b):
    _check_bool_pow(a, b)
    return binary_meta()(a, b)


_pow_tt_kernel.ufunc = _int_power  # float arrays of one dtype: the recorders call it

pow_tensor = register(
    "pow.Tensor_Tensor", kernel=_pow_tt_kernel, meta=_pow_tt_meta,
    node="PowBackward1",
    derivative=_pow_tt_derivative, save=lambda out, a, b: (a, b, out),
    samples=binary_samples(domain=(0.5, 2.0), scalars=()), tensor_args=(0, 1), onnx="Pow",
    saved_names=("self", "exponent", "result"))


def _pow_scalar_kernel(s, e):
    out = _pow_tt_kernel(s, e)
    if out.__class__ is np.ndarray and not out.size:  # (an iterator over the exponent alone:
        return np.empty(out.shape, out.dtype)  # an empty result is contiguous, NumPy's own)
    return out


_pow_scalar_kernel.ufunc = _int_power

pow_scalar_base = register(
    "pow.Scalar", kernel=_pow_scalar_kernel, meta=_pow_tt_meta,
    node="PowBackward2",
    derivative=_pow_scalar_base_derivative,
    save=lambda out, s, e: (s, out),
    samples=lambda rng, dt: [Sample((2.0, rand_array(rng, (3, 4), dt)))], onnx=_pow_onnx)

# ---------------------------------------------------------------- in-place forms


def _legacy_np(dt: np.dtype) -> str:
    return _dtype.FROM_NP[dt].legacy


def inplace_checks_first(kernel, operands: int = 2):
    """The kernel of an in-place form, with PyTorch's order of errors: its iterator checks
    that the result fits `self` (its shape, then its dtype) before the kernel refuses a
    dtype. Checked only when `kernel` fails (dispatch checks a result that it returns), so
    a successful call costs nothing more. `operands`: how many leading arguments are
    operands (not options such as a rounding mode)."""

    @functools.wraps(kernel)  # its signature and name, which other layers read
    def inplace_kernel(a, *rest, **kwargs):
        try:
            return kernel(a, *rest, **kwargs)
        except (NotImplementedError, RuntimeError):
            xs = [x for x in rest[:operands - 1] if x is not None]
            shape = broadcast_shapes(a.shape, *[np.shape(x) for x in xs])
            if shape != a.shape:
                raise RuntimeError(f"output with shape {list(a.shape)} doesn't match the "
                                   f"broadcast shape {list(shape)}") from None
            dt = _dtype.result_type(a, *xs)
            if not _dtype.can_cast(dt, _dtype.FROM_NP[a.dtype]):
                raise RuntimeError(f"result type {dt.legacy} can't be cast to the desired "
                                   f"output type {_legacy_np(a.dtype)}") from None
            raise

    return inplace_kernel  # (`wraps` copies a kernel's `ufunc` too)


_I64 = np.dtype(np.int64)
_I64_MIN, _I64_MAX = -2 ** 63, 2 ** 63 - 1


def float_writer_operands(a, operands: tuple, arrays: bool = True) -> bool:
    """Whether an in-place writer (`OpDef.write_into`) computes on `a` and `operands` as
    they are: `a` a writable float32/float64 array; each operand None, a Python float or int
    (not a bool, nor a subclass, whose checks are the kernel's) or, with `arrays`, an array
    of `a`'s dtype. Anything else is left to the kernel's checks and dispatch's general
    path (a read-only `a` included: written there through an alias, as PyTorch writes)."""
    dt = a.dtype
    if not (dt is _F32 or dt is _F64) or not a.flags.writeable:
        return False
    for v in operands:
        cls = v.__class__
        if not (cls is float or cls is int or v is None or (
                arrays and cls is _ndarray and v.dtype is dt)):
            return False
    return True


# Binary ops whose in-place form takes an operand broadcast along whole runs of `self` in C
# (`pointwise.c`'s `<name>_runs`): a bias per channel, `x.add_(b)` with `b` of shape
# (C, 1, 1) on (N, C, H, W), is one short NumPy loop per run (32 x 64 runs of 64 values:
# ~33 us, torch's ~10; ~16 us in C). From this many values of `self`: below it NumPy's call
# costs less than ctypes'.
_RUNS = {np.add: "add_runs", np.subtract: "sub_runs", np.multiply: "mul_runs",
         np.true_divide: "div_runs"}
RUNS_NATIVE_MIN = 1024
# (a's shape, b's shape) -> `_runs_layout`'s answer: a model meets a few pairs.
_run_layouts: dict = {}


def _runs_layout(shape: tuple, other: tuple) -> tuple[int, int] | None:
    """`(mid, inner)` where an array of shape `other` broadcast to `shape` holds one value
    per run of `inner` > 1 consecutive values of a C-contiguous array of that shape, run `u`
    taking value `u % mid` (its dims other than 1 are one block of `shape`'s dims, followed
    by dims where it is 1); None for any other broadcast."""
    off = len(shape) - len(other)
    dims = [i for i, d in enumerate(other) if d != 1]
    if off < 0 or not dims:
        return None
    first, last = dims[0], dims[-1]
    for i in range(first, last + 1):
        if other[i] != shape[off + i]:
            return None
    inner = 1
    for d in shape[off + last + 1:]:
        inner *= d
    if inner < 2:  # (a row broadcast over rows: NumPy's loop runs over whole rows)
        return None
    mid = 1
    for d in other:
        mid *= d
    return mid, inner


def _runs_native(name: str, a, b) -> bool:
    """`a = a OP b` in C (`pointwise.c`'s `<name>_f32`/`_f64`: `add_runs`, ...) for a
    C-contiguous float32/float64 `a` and a C-contiguous `b` of its dtype that `_runs_layout`
    takes; False, having written nothing, otherwise or while native kernels are off. Each
    value one IEEE operation, `a`'s value first, as NumPy's loop computes it. (The caller
    tests that `a` holds `RUNS_NATIVE_MIN` values: below it NumPy's call costs less.)"""
    if not (a.flags.c_contiguous and b.flags.c_contiguous):
        return False
    key = (a.shape, b.shape)
    layout = _run_layouts.get(key, _run_layouts)  # (the dict itself: not found yet)
    if layout is _run_layouts:
        if len(_run_layouts) > 256:
            _run_layouts.clear()
        layout = _run_layouts[key] = _runs_layout(a.shape, b.shape)
    if layout is None:
        return False
    fn = _native.typed("pointwise", name, a.dtype, "pppiiii")
    if fn is None:
        return False
    address = _native.address
    dst = address(a)
    n = a.size
    _native.run_pieces(fn, (dst, address(b), dst), layout, n // layout[1], n)
    return True


def direct_writer(ufunc, *, int64: bool = True, fused_alpha: bool = False):
    """`write_into(a, b[, alpha])` for the in-place form of `ufunc`'s op (over
    `_add_kernel`, `binary_kernel`): writes the kernel's result straight into `a` and
    returns True where the kernel computes it with one `ufunc` operation per value in `a`'s
    dtype, so that the result is bit for bit what the kernel's would be (NumPy computes an
    output that overlaps an input as if the input had been copied first); returns False,
    having written nothing, for any other case (dispatch then computes the result and
    copies it in). `a`: float32/float64 with a Python number or an array of its dtype
    (`float_writer_operands`; broadcast along runs of `a` in C, `_runs_native`); int64 with
    a Python int in its range (`int64`: the op keeps integers integral; both wrap alike);
    with `fused_alpha`, float32 arrays and an `alpha` (add/sub's fused multiply-add through
    float64, rounded once)."""
    subtract = ufunc is np.subtract
    runs = _RUNS[ufunc]
    python_op = {np.add: operator.add, np.subtract: operator.sub, np.multiply: operator.mul}.get(
        ufunc)
    if int64 and python_op is None:
        raise ValueError(f"no integer arithmetic for {ufunc.__name__}")

    def write_into(a, b, alpha=_ONE) -> bool:
        if alpha is _ONE:
            if float_writer_operands(a, (b,)):
                if b.__class__ is _ndarray and a.size >= RUNS_NATIVE_MIN and \
                        b.shape != a.shape and _runs_native(runs, a, b):
                    return True
                try:
                    ufunc(a, b, out=a)
                except ValueError:  # `b` broadcasts past `a`: raised before any write;
                    return False  # dispatch's general path has the error
                return True
            if not (int64 and a.dtype is _I64 and b.__class__ is int and
                    _I64_MIN <= b <= _I64_MAX):
                return False
            if not a.ndim:
                # One element (a counter: BatchNorm's `num_batches_tracked += 1`): Python's
                # integer arithmetic wrapped as int64's is several times quicker than a
                # ufunc taking a Python int.
                value = python_op(a.item(), b)
                if not _I64_MIN <= value <= _I64_MAX:
                    value = (value - _I64_MIN) % 2 ** 64 + _I64_MIN
                try:
                    a[()] = value
                except ValueError:  # read-only: the general path writes through an alias
                    return False
                return True
            try:
                ufunc(a, b, out=a)
            except ValueError:  # `b` broadcasts past `a`, or `a` is read-only: raised before
                return False  # any write; dispatch's general path has the errors and aliases
            return True
        if not (fused_alpha and a.dtype is _F32 and b.__class__ is _ndarray and
                (alpha.__class__ is int or alpha.__class__ is float) and
                float_writer_operands(a, (b,)) and -_F32_MAX <= alpha <= _F32_MAX):
            return False
        alpha = _F32.type(-alpha if subtract else alpha)
        if _axpy_native(a, b, alpha, a):
            return True
        alpha = _F64.type(alpha)
        product = np.multiply(b, alpha, dtype=_F64)
        try:
            np.add(product, a, out=a, dtype=_F64)  # (one rounding to float32, as `astype`)
        except ValueError:
            return False
        return True

    return write_into


# In-place add/sub/mul/div write their commonest cases straight into `self` (`direct_writer`).
add_ = inplace_variant(add, "add_.Tensor", write_into=direct_writer(np.add, fused_alpha=True))
sub_ = inplace_variant(sub, "sub_.Tensor",
                       write_into=direct_writer(np.subtract, fused_alpha=True))
mul_ = inplace_variant(mul, "mul_.Tensor", saves_self=True, forward_ad="product",
                       write_into=direct_writer(np.multiply))
div_ = inplace_variant(div, "div_.Tensor", saves_self=True, forward_ad="product",
                       write_into=direct_writer(np.true_divide, int64=False))
# `pow_` with a tensor exponent (`x.pow_(t)`, `x **= t`, `float_power_`).
pow_tensor_ = inplace_variant(pow_tensor, "pow_.Tensor", saves_self=True,
                              kernel=inplace_checks_first(pow_tensor.kernel))

# ---------------------------------------------------------------- more binary ops


def _binary_samples_nonzero(domain=(0.5, 2.0), scalars=(1.5,)):
    """Binary samples whose second operand stays away from zero (with random signs)."""

    def samples(rng, dtype):
        out = binary_samples(domain, scalars)(rng, dtype)
        for s in out:
            if isinstance(s.args[0], np.ndarray) and s.args[0].size:
                s.args[0][...] *= np.where(rng.random(s.args[0].shape) > 0.5, 3, -3)
            if isinstance(s.args[1], np.ndarray) and s.args[1].size:
                s.args[1][...] *= np.where(rng.random(s.args[1].shape) > 0.5, 1, -1)
        return out

    return samples


def _atan2_derivative(g, a, b):
    # PyTorch's: times the reciprocal of a^2 + b^2, taken as 0 where that is 0 (at the
    # origin, or where the squares underflow), so (0, 0) gets a zero gradient, not NaN.
    den = a * a + b * b
    recip = den.reciprocal().masked_fill(den == 0, 0.0)
    return (g * b * recip, g * -a * recip)


atan2 = register(
    "atan2", kernel=binary_kernel(np.arctan2, to_float=True, real_only="atan2_cpu"),
    meta=binary_meta(to_float=True, real_only="atan2_cpu"),
    node="Atan2Backward0", derivative=_atan2_derivative, save=lambda out, a, b: (a, b),
    samples=binary_samples(domain=(0.3, 2.0), scalars=()), tensor_args=(0, 1),
    onnx=ox.atan2, saved_names=("self", "other"), tensors_only=("input", "other"))
atan2_ = inplace_variant(atan2, "atan2_", saves_self=True,
                         kernel=inplace_checks_first(atan2.kernel))


def not_implemented_derivative(aten: str):
    """The derivative of an op PyTorch has none for (its NotImplemented node raises)."""

    def derivative(g, *rest):
        raise RuntimeError(f"derivative for aten::{aten} is not implemented")

    derivative.not_implemented = True
    return derivative


def _division_check(a, b, dt: np.dtype, kernel_name: str) -> None:
    """PyTorch's errors of the integer-style divisions (floor_divide, trunc division,
    remainder, fmod) for result dtype `dt`: no bool or complex kernel (named `kernel_name`),
    and an integer division by zero somewhere in a nonempty result."""
    if dt.kind in "bc":
        raise not_implemented_for(kernel_name, dt)
    if dt.kind in "iu":
        # (a number divisor as the dtype takes it: 256 is a uint8 0)
        zero = np.asarray(as_dtype(b, dt) if b.__class__ is int else b) == 0
        # An empty result divides nothing (`empty // 0` is empty, as in PyTorch).
        if np.count_nonzero(zero) and 0 not in np.broadcast_shapes(np.shape(a), zero.shape):
            raise RuntimeError("ZeroDivisionError")


def _division_meta(kernel_name: str):
    """A binary meta with `_division_check`'s dtype errors."""

    def meta(a, b):
        spec = binary_meta()(a, b)
        if spec.dtype.category in (_dtype.BOOL, _COMPLEX):
            raise not_implemented_for(kernel_name, spec.dtype)
        return spec

    return meta


_floor_base = binary_kernel(np.floor_divide, scalar_at_full_precision=True)


def _floor_divide(a, b):
    dt = result_np(a, b)
    _division_check(a, b, dt, "div_floor_cpu")
    if dt.kind in "iu":
        return np.floor_divide(as_dtype(a, dt), as_dtype(b, dt))
    return _floor_base(a, b)


floor_divide = register(
    "floor_divide", kernel=iterator_ordered(_floor_divide), meta=_division_meta("div_floor_cpu"),
    node="NotImplemented",
    derivative=not_implemented_derivative("floor_divide"), gradcheck=False,
    samples=_binary_samples_nonzero(scalars=()), tensor_args=(0, 1), onnx=ox.floor_divide,
    result_order="iterator")
floor_divide_scalar = register(
    "floor_divide.Scalar", kernel=iterator_ordered(_floor_divide),
    meta=_division_meta("div_floor_cpu"),
    node="NotImplemented",
    derivative=not_implemented_derivative("floor_divide"), gradcheck=False, public="floor_divide",
    samples=lambda rng, dt: [Sample((rand_array(rng, (3, 4), dt, (-4, 4)), c))
                             for c in (1.5, -2, 2)], onnx=ox.floor_divide, result_order="operands")
floor_divide_ = inplace_variant(floor_divide, "floor_divide_.Tensor",
                                kernel=inplace_checks_first(_floor_divide),
                                derivative=not_implemented_derivative("floor_divide_"))


def _div_mode(a, b, rounding_mode):
    """Division rounded toward minus infinity ('floor') or zero ('trunc'), in the operands'
    promoted dtype (integers stay integers), as `torch.div(..., rounding_mode=)`."""
    if rounding_mode not in ("floor", "trunc"):
        raise RuntimeError("div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                           f"but found '{rounding_mode}'")
    dt = result_np(a, b)
    if rounding_mode == "floor":
        return _floor_divide(a, b)
    _division_check(a, b, dt, "div_trunc_cpu")
    if dt.kind in "iu":
        a, b = as_dtype(a, dt), as_dtype(b, dt)
        # The floor quotient, one up where it rounded a negative inexact quotient down (no
        # absolute values: |int16 min| overflows).
        q = np.floor_divide(a, b)
        inexact = np.remainder(a, b) != 0
        return (q + (inexact & ((np.asarray(a) < 0) != (np.asarray(b) < 0)))).astype(
            dt, copy=False)
    return binary_kernel(lambda x, y: np.trunc(np.true_divide(x, y)),
                         scalar_at_full_precision=True)(a, b)


def _div_mode_meta(a, b, rounding_mode):
    if rounding_mode not in ("floor", "trunc"):
        raise RuntimeError("div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                           f"but found '{rounding_mode}'")
    return _division_meta(f"div_{rounding_mode}_cpu")(a, b)


div_mode = register(
    "div.Tensor_mode", kernel=iterator_ordered(_div_mode),
    meta=_div_mode_meta, node="DivBackward2",
    derivative=lambda g, b_is_tensor: (g * 0, g * 0 if b_is_tensor else None),
    save=lambda out, a, b, rounding_mode: (_t(b),), saved_names=("",), zero_grad=True,
    gradcheck=False, public="div", tensor_args=(0, 1), nondiff_args=(2,),
    samples=lambda rng, dt: [Sample(s.args + (mode,), name=f"{s.name} {mode}")
                             for s in _binary_samples_nonzero(scalars=(1.5, -2))(rng, dt)
                             for mode in ("floor", "trunc")], onnx=ox.div_mode,
    result_order="iterator")
div_mode_ = inplace_variant(div_mode, "div_.Tensor_mode", public="div_",
                            kernel=inplace_checks_first(_div_mode))


def _remainder(ufunc, kernel_name: str):
    base = binary_kernel(ufunc)

    def kernel(a, b):
        dt = result_np(a, b)
        _division_check(a, b, dt, kernel_name)
        out = base(a, b)
        if ufunc is np.remainder and dt.kind not in "iu":
            # A zero remainder takes the dividend's sign (PyTorch's is fmod's, corrected
            # only where nonzero); NumPy's takes the divisor's. (`out` is a new array.)
            out = np.asarray(out)
            zero = out == 0
            if np.count_nonzero(zero):  # (a quarter of `any`'s time on small arrays)
                if out.ndim:
                    np.copysign(out, np.asarray(a, out.dtype), where=zero, out=out)
                else:
                    out = np.copysign(out, np.asarray(a, out.dtype))
        return out

    return kernel


def _scalar_samples(rng, dt):
    return [Sample((rand_array(rng, s, dt, (-4, 4)), c), name=f"{s} {c}")
            for s in ((3, 4), (), (0,)) for c in (1.5, -2.0)]


remainder = register(
    "remainder.Tensor", kernel=iterator_ordered(_remainder(np.remainder, "remainder_cpu")),
    meta=_division_meta("remainder_cpu"),
    node="RemainderBackward1",
    derivative=lambda g, a, b: (g, -g * (a / b).floor() if b is not None else None),
    save=lambda out, a, b: (a if needs(b) else None, b if needs(b) else None),
    samples=_binary_samples_nonzero(scalars=()), tensor_args=(0, 1), public="remainder",
    onnx=ox.remainder,
    result_order="iterator")
remainder_scalar = register(
    "remainder.Scalar", kernel=_remainder(np.remainder, "remainder_cpu"),
    meta=_division_meta("remainder_cpu"),
    node="RemainderBackward0", derivative=lambda g: (g, None), samples=_scalar_samples,
    public="remainder", onnx=ox.remainder)
remainder_rscalar = register(
    "remainder.Scalar_Tensor", kernel=_remainder(np.remainder, "remainder_cpu"),
    meta=_division_meta("remainder_cpu"),
    node="NotImplemented", derivative=not_implemented_derivative("remainder"), gradcheck=False,
    samples=lambda rng, dt: [Sample((2.5, rand_array(rng, (3, 4), dt, (0.5, 2))))],
    public="remainder", onnx=ox.remainder)
fmod = register(
    "fmod.Tensor", kernel=iterator_ordered(_remainder(np.fmod, "fmod_cpu")),
    meta=_division_meta("fmod_cpu"),
    node="FmodBackward1",
    derivative=lambda g, a, b: (g, -g * (a / b).trunc() if b is not None else None),
    save=lambda out, a, b: (a if needs(b) else None, b if needs(b) else None),
    samples=_binary_samples_nonzero(scalars=()), tensor_args=(0, 1), public="fmod",
    onnx=ox.fmod,
    result_order="iterator")
fmod_scalar = register(
    "fmod.Scalar", kernel=_remainder(np.fmod, "fmod_cpu"), meta=_division_meta("fmod_cpu"),
    node="FmodBackward0",
    derivative=lambda g: (g, None), samples=_scalar_samples, public="fmod", onnx=ox.fmod)
remainder_ = inplace_variant(remainder, "remainder_.Tensor", saves_self=True,
                             kernel=inplace_checks_first(remainder.kernel))
remainder_scalar_ = inplace_variant(remainder_scalar, "remainder_.Scalar",
                                    kernel=inplace_checks_first(remainder_scalar.kernel))
fmod_ = inplace_variant(fmod, "fmod_.Tensor", saves_self=True,
                        kernel=inplace_checks_first(fmod.kernel))
fmod_scalar_ = inplace_variant(fmod_scalar, "fmod_.Scalar",
                               kernel=inplace_checks_first(fmod_scalar.kernel))


def _lerp_check(a, end, w, kernel: str) -> None:
    """lerp computes in input's dtype: `end` (and a weight tensor of any dims) must have it,
    and it must be floating or complex (arrays and fakes alike)."""
    da = dtype_of(a)
    for name, x in (("end", end), ("weight", w)):
        if hasattr(x, "shape") and (name == "end" or len(x.shape)) and dtype_of(x) is not da:
            raise RuntimeError(f"expected dtype {da.cpp} for `{name}` but got dtype "
                               f"{dtype_of(x).cpp}")
    if da.category not in (_dtype.FLOAT, _COMPLEX):
        raise not_implemented_for(kernel, da)


def _lerp_kernel(a, end, w, kernel="lerp_kernel_scalar"):
    """lerp's values, laid out as PyTorch's iterator lays them out over its operands (`a`,
    `end`, and a tensor weight)."""
    return iterator_laid(_lerp_values(a, end, w, kernel), a, end, w)


def _lerp_values(a, end, w, kernel):
    _lerp_check(a, end, w, kernel)
    dt = a.dtype
    work = F32 if dt in HALF else dt  # half types in float32, rounded once, as PyTorch's
    a = as_dtype(a, work)
    end = as_dtype(as_dtype(end, dt), work)
    w = as_dtype(w, work)
    diff = end - a
    if dt is F32:
        # PyTorch's float32 kernel fuses each multiply-add (fma): in float64 the float32
        # product is exact, so the sum rounds once, to float32, as the fma's does.
        w = np.asarray(w, F32)  # a Python number weight in float32, as the kernel's opmath
        a64, end64, diff64 = (np.asarray(v, np.float64) for v in (a, end, diff))
        w64, rest64 = w.astype(np.float64), (F32.type(1) - w).astype(np.float64)
        return np.where(np.abs(w) < 0.5, a64 + w64 * diff64, end64 - diff64 * rest64).astype(
            dt, copy=False)
    if dt is F64:  # the float64 kernel's multiply-adds are fused too
        w = np.asarray(w, F64)
        return np.where(np.abs(w) < 0.5, _fma64(w, diff, a), _fma64(-diff, 1 - w, end))
    return np.where(np.abs(w) < 0.5, a + w * diff, end - diff * (1 - w)).astype(dt, copy=False)


_SPLIT = 134217729.0  # 2 ** 27 + 1: Veltkamp's splitter of a float64 into two 26-bit halves


def _fma64(x, y, z):
    """x * y + z of float64 arrays with the product kept exact (Dekker's product and
    Knuth's sum, error-free), so the result rounds as a fused multiply-add's (but for the
    rare halfway case the last addition rounds twice). Where a split overflows, the plain
    x * y + z."""
    with np.errstate(all="ignore"):
        p = x * y
        t = _SPLIT * x
        xh = t - (t - x)
        t = _SPLIT * y
        yh = t - (t - y)
        xl, yl = x - xh, y - yh
        err = ((xh * yh - p) + xh * yl + xl * yh) + xl * yl  # p + err == x * y exactly
        s = p + z
        v = s - p
        low = (p - (s - v)) + (z - v)  # s + low == p + z exactly
        out = s + (low + err)
        return np.where(np.isfinite(out), out, s)


def _lerp_meta(a, end, w, kernel="lerp_kernel_scalar"):
    _lerp_check(a, end, w, kernel)
    shapes = [shape_of(a), shape_of(end)] + ([shape_of(w)] if hasattr(w, "shape") else [])
    return Spec(broadcast_shapes(*shapes), _dtype.result_type(a, end))


def _lerp_decomposition(a, end, w):
    """The kernel's two formulas: from `a` for small weights, from `end` for large ones."""
    near_a = a + w * (end - a)
    near_end = end - (end - a) * (1 - w)
    if not hasattr(w, "abs"):  # a number: the formula is chosen here
        return near_a if abs(w) < 0.5 else near_end
    return near_a.where(w.abs() < 0.5, near_end)


def _lerp_tensor_save(out, a, e, w):
    """What LerpBackward1 keeps: the weight always, `self` and `end` only for the weight's
    gradient (as PyTorch saves them), so either may change in place afterwards when the
    weight needs no gradient."""
    wants = getattr(w, "_rg", False)
    return (a if wants else None, e if wants else None, w)


def _lerp_tensor_derivative(g, a, e, w):
    """Gradients of lerp(a, e, w) = a + w (e - a); the weight's only where `a` and `e` were
    saved (`_lerp_tensor_save`)."""
    return (g * cj(1 - w), g * cj(w), g * cj(e - a) if a is not None else None)


lerp = register(
    "lerp.Scalar", kernel=_lerp_kernel, meta=_lerp_meta, node="LerpBackward0",
    decomposition=_lerp_decomposition, onnx=ox.lerp,
    derivative=lambda g, w: (g * cj(1 - w), g * cj(w), None), save=lambda out, a, e, w: (w,),
    samples=lambda rng, dt: [Sample((rand_array(rng, a, dt), rand_array(rng, b, dt), w))
                             for a, b in (((3, 4), (3, 4)), ((3, 4), (4,)), ((), ()))
                             for w in (0.3, 0.8)], public="lerp", saved_names=("weight",),
    result_order="iterator")
lerp_tensor = register(
    "lerp.Tensor", kernel=lambda a, e, w: _lerp_kernel(a, e, w, "lerp_kernel_tensor"),
    meta=lambda a, e, w: _lerp_meta(a, e, w, "lerp_kernel_tensor"), node="LerpBackward1",
    decomposition=_lerp_decomposition, onnx=ox.lerp,
    derivative=_lerp_tensor_derivative, save=_lerp_tensor_save, public="lerp",
    saved_names=("self", "end", "weight"),
    samples=lambda rng, dt: [Sample((rand_array(rng, a, dt), rand_array(rng, b, dt),
                                     rand_array(rng, c, dt, (0, 1))))
                             for a, b, c in (((3, 4), (3, 4), (3, 4)), ((3, 4), (4,), (3, 1)),
                                             ((), (), ()))],
    result_order="iterator")
lerp_ = inplace_variant(lerp, "lerp_.Scalar")
lerp_tensor_ = inplace_variant(lerp_tensor, "lerp_.Tensor", saves_self=True)


def _addc_kernel(ufunc):
    def kernel(a, t1, t2, value=1):
        dt = result_np(a, t1, t2)
        # (PyTorch refuses two integral divided tensors, whatever `self` is)
        if ufunc is np.true_divide and np.result_type(t1).kind in "biu" and \
                np.result_type(t2).kind in "biu":
            raise RuntimeError(
                "Integer division with addcdiv is no longer supported, and in a future  release "
                "addcdiv will perform a true division of tensor1 and tensor2. The historic "
                "addcdiv behavior can be implemented as (input + value * torch.trunc(tensor1 / "
                "tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / "
                "tensor2) for float inputs. The future addcdiv behavior is just the latter "
                "implementation: (input + value * tensor1 / tensor2), for all dtypes.")
        # Half types compute in float32 and round once, as PyTorch's kernels.
        work = F32 if dt in HALF else dt
        operands = (a, t1, t2)
        return iterator_laid(_addc_values(a, t1, t2, value, dt, work), *operands, dt=dt)

    def _addc_values(a, t1, t2, value, dt, work):
        a, t1, t2 = (as_dtype(as_dtype(x, dt), work) for x in (a, t1, t2))
        if work is F32 or work is F64:
            # PyTorch's order (found by experiment against torch 2.13, every float dtype
            # equal): the value times tensor1 first, then fma(v t1, t2, a) for addcmul and
            # a + (v t1) / t2 for addcdiv (a + v (t1 op t2) left 9-23% of float32 values and
            # 0.3% of float16 ones an ulp off: Adam's second moment)
            scaled = work.type(value) * t1
            if ufunc is np.true_divide:
                return (a + scaled / t2).astype(dt, copy=False)
            return fused_multiply_add(scaled, t2, a).astype(dt, copy=False)
        if dt.kind == "b" and ufunc is np.multiply:
            raise not_implemented_for("addcmul_cpu_out", "Bool")
        if dt.kind in "iu":
            # the value converted to the integer type first (0.5 is 0), with PyTorch's
            # overflow check
            value = int(checked_scalar(value, dt))
        return (a + value * ufunc(t1, t2)).astype(dt, copy=False)

    return kernel


def fused_multiply_add(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a * b + c rounded once, for float32 or float64 arrays (broadcast together), as a
    vectorised CPU kernel's fused multiply-add. float32: the product is exact in float64, so
    only the sum is rounded twice (a different result about once in 2^29); float64:
    `_fma64`."""
    if a.dtype == F32 and b.dtype == F32 and c.dtype == F32:
        return (a.astype(F64) * b + c).astype(F32)
    return _fma64(*(np.asarray(x, F64) for x in (a, b, c)))


def _wants_grad(x) -> bool:
    """Whether backward will ask for `x`'s gradient (numbers never)."""
    return getattr(x, "requires_grad", False)


def _addc_meta(a, t1, t2, value=1):
    return Spec(broadcast_shapes(shape_of(a), shape_of(t1), shape_of(t2)),
                _dtype.result_type(a, t1, t2))


def _addc_samples(domain):
    def samples(rng, dt):
        return [Sample((rand_array(rng, a, dt), rand_array(rng, b, dt),
                        rand_array(rng, c, dt, domain), v), name=f"{a},{b},{c} {v}")
                for (a, b, c), v in ((((3, 4), (3, 4), (3, 4)), 1), (((3, 4), (4,), (3, 1)), 0.5),
                                     (((), (), ()), -2), (((0, 2), (2,), ()), 1))]

    return samples


addcmul = register(
    "addcmul", kernel=_addc_kernel(np.multiply), meta=_addc_meta, node="AddcmulBackward0",
    forward_ad="added_product",
    decomposition=lambda a, t1, t2, value=1: a + t1 * t2 * value,
    # Complex operands: the conjugates of the partner and of the value (Wirtinger rule).
    derivative=lambda g, t1, t2, v: (g, g * cj(t2 * v) if t2 is not None else None,
                                     g * cj(t1 * v) if t1 is not None else None, None),
    # Each factor is saved only for the other's gradient: an operand nobody differentiates
    # may change afterwards (as in PyTorch).
    save=lambda out, a, t1, t2, value=1: (t1 if _wants_grad(t2) else None,
                                          t2 if _wants_grad(t1) else None, value),
    samples=_addc_samples(None), onnx=ox.addc("Mul"),
    result_order="iterator")
addcdiv = register(
    "addcdiv", kernel=_addc_kernel(np.true_divide), meta=_addc_meta, node="AddcdivBackward0",
    forward_ad="added_product",
    decomposition=lambda a, t1, t2, value=1: a + t1 / t2 * value,
    derivative=lambda g, t1, t2, v: (g, g * cj(v / t2) if t2 is not None else None,
                                     -g * cj(v * t1 / (t2 * t2)) if t1 is not None else None,
                                     None),
    save=lambda out, a, t1, t2, value=1: (t1 if _wants_grad(t2) else None,
                                          t2 if _wants_grad(t1) or _wants_grad(t2) else None,
                                          value),
    samples=_addc_samples((0.5, 2.0)), onnx=ox.addc("Div"),
    result_order="iterator")
addcmul_ = inplace_variant(addcmul, "addcmul_")
addcdiv_ = inplace_variant(addcdiv, "addcdiv_")
