"""Pointwise ops: arithmetic, unary math, activations, comparisons, where, clamp.

Each derivative returns one entry per positional argument (None where there is no tensor or
no gradient); dispatch reduces a broadcast gradient back to its input's shape.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from .._dispatch import plain
from ._util import (
    Spec,
    as_dtype,
    binary_kernel,
    binary_meta,
    binary_samples,
    broadcast_shapes,
    dtype_of,
    float_np,
    rand_array,
    result_np,
    shape_of,
    unary_kernel,
    unary_meta,
    unary_samples,
)
from .registry import Sample, inplace_variant, register


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


def _add_kernel(ufunc):
    base = binary_kernel(ufunc)

    def kernel(a, b, alpha=1):
        if ufunc is np.subtract:
            _check_sub(a, b)
        if alpha != 1:
            b = b * alpha if b.__class__ is np.ndarray else b * alpha
        return base(a, b)

    return kernel


def _alpha_meta(a, b, alpha=1):
    return binary_meta()(a, b)


def _sub_meta(a, b, alpha=1):
    _check_sub(a, b)
    return binary_meta()(a, b)


add = register(
    "add.Tensor", kernel=_add_kernel(np.add), meta=_alpha_meta, node="AddBackward0",
    derivative=lambda g, alpha: (g, g * alpha if alpha != 1 else g),
    save=lambda out, a, b, alpha=1: (alpha,),
    samples=binary_samples(scalars=(2.5, 3)), lowering="({a} + {b})",
    tensor_args=(0, 1), onnx="Add")
sub = register(
    "sub.Tensor", kernel=_add_kernel(np.subtract), meta=_sub_meta, node="SubBackward0",
    derivative=lambda g, alpha: (g, -g * alpha if alpha != 1 else -g),
    save=lambda out, a, b, alpha=1: (alpha,),
    samples=binary_samples(), lowering="({a} - {b})", tensor_args=(0, 1), onnx="Sub")
rsub = register(
    "rsub.Scalar", kernel=lambda a, b, alpha=1: _add_kernel(np.subtract)(b, a, alpha),
    meta=_sub_meta, node="RsubBackward1",
    derivative=lambda g, alpha: (-g * alpha if alpha != 1 else -g, None),
    save=lambda out, a, b, alpha=1: (alpha,),
    samples=lambda rng, dt: [Sample((rand_array(rng, (3, 4), dt), 2.0))], onnx="Sub")
mul = register(
    "mul.Tensor", kernel=binary_kernel(np.multiply), meta=binary_meta(), node="MulBackward0",
    derivative=lambda g, a, b: (g * b if b is not None else None,
                                g * a if a is not None else None),
    save=lambda out, a, b: (a if needs(b) else None, b if needs(a) else None),
    samples=binary_samples(), lowering="({a} * {b})", tensor_args=(0, 1), onnx="Mul")
div = register(
    "div.Tensor", kernel=binary_kernel(np.true_divide, to_float=True),
    meta=binary_meta(to_float=True), node="DivBackward0",
    derivative=lambda g, a, b: (g / b, -g * a / (b * b) if _t(b) else None),
    save=lambda out, a, b: (a if _t(b) else None, b),
    samples=binary_samples(domain=(0.5, 2.0)), lowering="({a} / {b})",
    tensor_args=(0, 1), onnx="Div")
neg = register(
    "neg", kernel=np.negative, meta=unary_meta(to_float=False), node="NegBackward0",
    derivative=lambda g: (-g,), samples=unary_samples(), lowering="(-{a})", onnx="Neg")
reciprocal = register(
    "reciprocal", kernel=unary_kernel(np.reciprocal), meta=unary_meta(), node="ReciprocalBackward0",
    derivative=lambda g, out: (-g * out * out,), save=lambda out, a: (out,),
    samples=unary_samples(domain=(0.5, 2.0)), lowering="(1 / {a})", onnx="Reciprocal")


_NEG_INT_POW = "Integers to negative integer powers are not allowed."


def _int_power(a, e):
    """Integer powers as PyTorch computes them: x ** -n is 0 unless |x| is 1."""
    e = np.asarray(e)
    if e.dtype.kind not in "iu" or not (e < 0).any():
        return np.power(a, e)
    pos = np.power(a, np.abs(e))
    neg = np.where(a == 1, 1, np.where(a == -1, np.where(e % 2 == 0, 1, -1), 0))
    return np.where(e < 0, neg, pos).astype(np.result_type(a, e), copy=False)


def _pow_ts_kernel(a, e):
    dt = float_np(a.dtype) if isinstance(e, float) else a.dtype
    if dt.kind in "iu" and isinstance(e, int) and e < 0:
        raise RuntimeError(_NEG_INT_POW)
    return binary_kernel(np.power)(a.astype(dt) if a.dtype is not dt else a, e)


def _pow_ts_meta(a, e):
    dt = _dtype.result_type(a, e)
    if dt.category != _dtype.FLOAT and isinstance(e, int) and e < 0:
        raise RuntimeError(_NEG_INT_POW)
    return Spec(tuple(a.shape), dt)


def _pow_ts_derivative(g, a, e):
    if e == 0:
        return (g * 0, None)
    return (g * e * a.pow(e - 1), None)


pow_scalar = register(
    "pow.Tensor_Scalar", kernel=_pow_ts_kernel, meta=_pow_ts_meta, node="PowBackward0",
    derivative=_pow_ts_derivative, save=lambda out, a, e: (a, e),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt, (0.5, 2.0)), e), name=f"^{e}")
                             for s in ((3, 4), (), (0,)) for e in (2, 3, 0.5, -1.5, 0)],
    onnx="Pow")
pow_tensor = register(
    "pow.Tensor_Tensor", kernel=binary_kernel(_int_power), meta=binary_meta(),
    node="PowBackward1",
    derivative=lambda g, a, b, out: (g * b * a.pow(b - 1), g * out * a.log()),
    save=lambda out, a, b: (a, b, out),
    samples=binary_samples(domain=(0.5, 2.0), scalars=()), tensor_args=(0, 1), onnx="Pow")
pow_scalar_base = register(
    "pow.Scalar", kernel=lambda s, e: binary_kernel(np.power)(s, e), meta=binary_meta(),
    node="PowBackward2",
    derivative=lambda g, s, out: (None, g * out * float(np.log(s))),
    save=lambda out, s, e: (s, out),
    samples=lambda rng, dt: [Sample((2.0, rand_array(rng, (3, 4), dt)))], onnx="Pow")

# ---------------------------------------------------------------- unary math


def _unary(name, ufunc, node, derivative, save, domain=None, to_float=True, **kw):
    return register(name, kernel=unary_kernel(ufunc, to_float=to_float),
                    meta=unary_meta(to_float), node=node, derivative=derivative, save=save,
                    samples=unary_samples(domain), domain=domain, **kw)


exp = _unary("exp", np.exp, "ExpBackward0", lambda g, out: (g * out,),
             lambda out, a: (out,), lowering="exp({a})", onnx="Exp")
log = _unary("log", np.log, "LogBackward0", lambda g, a: (g / a,), lambda out, a: (a,),
             domain=(0.1, 3.0), lowering="log({a})", onnx="Log")
sin = _unary("sin", np.sin, "SinBackward0", lambda g, a: (g * a.cos(),), lambda out, a: (a,),
             lowering="sin({a})", onnx="Sin")
cos = _unary("cos", np.cos, "CosBackward0", lambda g, a: (-g * a.sin(),),
             lambda out, a: (a,), lowering="cos({a})", onnx="Cos")
tanh = _unary("tanh", np.tanh, "TanhBackward0", lambda g, out: (g * (1 - out * out),),
              lambda out, a: (out,), lowering="tanh({a})", onnx="Tanh")
sqrt = _unary("sqrt", np.sqrt, "SqrtBackward0", lambda g, out: (g / (2 * out),),
              lambda out, a: (out,), domain=(0.1, 3.0), lowering="sqrt({a})", onnx="Sqrt")


def _sigmoid(a):
    # Two branches keep exp from overflowing for large |a|.
    e = np.exp(-np.abs(a))
    return np.where(a >= 0, 1 / (1 + e), e / (1 + e)).astype(a.dtype, copy=False)


sigmoid = _unary("sigmoid", _sigmoid, "SigmoidBackward0",
                 lambda g, out: (g * out * (1 - out),), lambda out, a: (out,),
                 lowering="(1 / (1 + exp(-{a})))", onnx="Sigmoid")
abs_ = _unary("abs", np.abs, "AbsBackward0", lambda g, a: (g * a.sign(),),
              lambda out, a: (a,), to_float=False, lowering="fabs({a})", onnx="Abs")


def _relu_check(dt) -> None:
    if dt == np.bool_ or dt is _dtype.bool_:
        raise RuntimeError("Boolean inputs not supported for relu")


def _relu_kernel(a):
    _relu_check(a.dtype)
    return np.maximum(a, 0).astype(a.dtype, copy=False)


def _relu_meta(a):
    _relu_check(a.dtype)
    return unary_meta(to_float=False)(a)


relu = register(
    "relu", kernel=_relu_kernel, meta=_relu_meta, node="ReluBackward0",
    derivative=lambda g, out: (g * (out > 0),), save=lambda out, a: (out,),
    samples=unary_samples(), lowering="fmax({a}, 0)", onnx="Relu")
sign = register(
    "sign", kernel=lambda a: np.sign(a).astype(a.dtype, copy=False),
    meta=unary_meta(to_float=False), node="SignBackward0",
    derivative=lambda g: (g * 0,), zero_grad=True, samples=unary_samples(), onnx="Sign")

# ---------------------------------------------------------------- comparisons


def _compare(name, ufunc, onnx):
    return register(name, kernel=binary_kernel(ufunc, compare=True),
                    meta=binary_meta(out_bool=True), differentiable=False,
                    samples=binary_samples(), onnx=onnx, public=name.split(".")[0])


eq = _compare("eq.Tensor", np.equal, "Equal")
ne = _compare("ne.Tensor", np.not_equal, "Not")
lt = _compare("lt.Tensor", np.less, "Less")
le = _compare("le.Tensor", np.less_equal, "LessOrEqual")
gt = _compare("gt.Tensor", np.greater, "Greater")
ge = _compare("ge.Tensor", np.greater_equal, "GreaterOrEqual")

# ---------------------------------------------------------------- where, maximum, clamp


def _where_kernel(cond, a, b):
    if cond.dtype != np.bool_:
        _where_meta(cond, a, b)
    return np.where(cond, a, b).astype(result_np(a, b), copy=False)


def _where_meta(cond, a, b):
    if hasattr(cond, "dtype") and dtype_of(cond) is not _dtype.bool_:
        raise RuntimeError(
            f"where expected condition to be a boolean tensor, but got a tensor with dtype "
            f"{dtype_of(cond).legacy}")
    shape = broadcast_shapes(shape_of(cond), shape_of(a), shape_of(b))
    return Spec(shape, _dtype.result_type(a, b))


def _where_derivative(g, cond, a, b):
    zero = g.new_zeros(())
    return (None, g.where(cond, zero) if _t(a) else None,
            zero.where(cond, g) if _t(b) else None)


def _where_samples(rng, dtype):
    out = []
    for c, a, b in (((3, 4), (3, 4), (3, 4)), ((3, 4), (4,), (3, 1)), ((), (2,), ())):
        out.append(Sample((np.asarray(rng.random(c) > 0.5), rand_array(rng, a, dtype),
                           rand_array(rng, b, dtype)), name=f"{c},{a},{b}"))
    out.append(Sample((rng.random((3, 4)) > 0.5, rand_array(rng, (3, 4), dtype), 0.0),
                      name="scalar other"))
    return out


where = register(
    "where.self", kernel=_where_kernel, meta=_where_meta, node="WhereBackward0",
    derivative=_where_derivative, save=lambda out, c, a, b: (c, a, b), nondiff_args=(0,),
    samples=_where_samples, tensor_args=(1, 2), onnx="Where")


def _maximum_derivative(g, a, b):
    # Ties split the gradient in half, as PyTorch does.
    mask_a = (a > b) + (a == b) * 0.5
    return (g * mask_a, g * (1 - mask_a))


maximum = register(
    "maximum", kernel=binary_kernel(np.maximum), meta=binary_meta(), node="MaximumBackward0",
    derivative=_maximum_derivative, save=lambda out, a, b: (a, b),
    samples=binary_samples(scalars=()), tensor_args=(0, 1), onnx="Max")


def _bounds(lo, hi) -> list:
    if lo is None and hi is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    return [v for v in (lo, hi) if v is not None]


def _clamp_kernel(a, lo=None, hi=None):
    dt = result_np(a, *_bounds(lo, hi))
    out = a if a.dtype is dt else a.astype(dt)
    if lo is not None:
        out = np.maximum(out, as_dtype(lo, dt))
    if hi is not None:
        out = np.minimum(out, as_dtype(hi, dt))
    return a.copy() if out is a else out


def _clamp_meta(a, lo=None, hi=None):
    dt = _dtype.result_type(a, *_bounds(lo, hi))
    return Spec(tuple(a.shape), dt)


def _clamp_scalar_derivative(g, a, lo, hi):
    mask = None
    if lo is not None:
        mask = a >= lo
    if hi is not None:
        mask = (a <= hi) if mask is None else mask * (a <= hi)
    return (g * mask, None, None)


clamp = register(
    "clamp", kernel=_clamp_kernel, meta=_clamp_meta, node="ClampBackward1",
    derivative=_clamp_scalar_derivative, save=lambda out, a, lo=None, hi=None: (a, lo, hi),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), lo, hi), name=f"{lo},{hi}")
                             for s in ((3, 4), ()) for lo, hi in ((-0.5, 0.5), (0.0, None),
                                                                   (None, 1.0))],
    onnx="Clip")


def _clamp_t_kernel(a, lo=None, hi=None):
    dt = result_np(a, *_bounds(lo, hi))
    out = a
    if lo is not None:
        out = np.maximum(out, lo)
    if hi is not None:
        out = np.minimum(out, hi)
    return out.astype(dt, copy=False)


def _clamp_t_meta(a, lo=None, hi=None):
    spec = _clamp_meta(a, lo, hi)
    spec.shape = broadcast_shapes(*[shape_of(v) for v in (a, lo, hi) if v is not None])
    return spec


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


clamp_tensor = register(
    "clamp.Tensor", kernel=_clamp_t_kernel, meta=_clamp_t_meta, node="ClampBackward0",
    derivative=_clamp_t_derivative, save=lambda out, a, lo=None, hi=None: (a, lo, hi),
    samples=lambda rng, dt: [Sample((rand_array(rng, (3, 4), dt), rand_array(rng, (4,), dt) - 1,
                                     rand_array(rng, (3, 1), dt) + 1))],
    public="clamp", onnx="Clip")

# ---------------------------------------------------------------- in-place forms

add_ = inplace_variant(add, "add_.Tensor")
sub_ = inplace_variant(sub, "sub_.Tensor")
mul_ = inplace_variant(mul, "mul_.Tensor", saves_self=True)
div_ = inplace_variant(div, "div_.Tensor", saves_self=True)
