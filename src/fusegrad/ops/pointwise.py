"""Pointwise ops: arithmetic, unary math, activations, comparisons, where, clamp.

Each derivative returns one entry per positional argument (None where there is no tensor or
no gradient); dispatch reduces a broadcast gradient back to its input's shape.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from .._dispatch import plain
from ._onnx import add_like, boolean, clip, compare
from ._util import (
    F32,
    HALF,
    Spec,
    as_dtype,
    binary_kernel,
    binary_meta,
    binary_samples,
    broadcast_shapes,
    dtype_of,
    float_np,
    numpy_backward,
    rand_array,
    result_np,
    shape_of,
    unary_kernel,
    unary_meta,
    unary_samples,
    wrap_grad,
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
    tensor_args=(0, 1), onnx=add_like("Add"),
    saved_names=("alpha",))
sub = register(
    "sub.Tensor", kernel=_add_kernel(np.subtract), meta=_sub_meta, node="SubBackward0",
    derivative=lambda g, alpha: (g, -g * alpha if alpha != 1 else -g),
    save=lambda out, a, b, alpha=1: (alpha,),
    samples=binary_samples(), lowering="({a} - {b})", tensor_args=(0, 1),
    onnx=add_like("Sub"),
    saved_names=("alpha",))
rsub = register(
    "rsub.Scalar", kernel=lambda a, b, alpha=1: _add_kernel(np.subtract)(b, a, alpha),
    meta=_sub_meta, node="RsubBackward1",
    derivative=lambda g, alpha: (-g * alpha if alpha != 1 else -g, None),
    save=lambda out, a, b, alpha=1: (alpha,),
    samples=lambda rng, dt: [Sample((rand_array(rng, (3, 4), dt), 2.0))],
    onnx=add_like("Sub", swap=True))
mul = register(
    "mul.Tensor", kernel=binary_kernel(np.multiply), meta=binary_meta(), node="MulBackward0",
    derivative=lambda g, a, b: (g * b if b is not None else None,
                                g * a if a is not None else None),
    save=lambda out, a, b: (a if needs(b) else None, b if needs(a) else None),
    samples=binary_samples(), lowering="({a} * {b})", tensor_args=(0, 1), onnx="Mul",
    saved_names=("self", "other"))
div = register(
    "div.Tensor", kernel=binary_kernel(np.true_divide, to_float=True),
    meta=binary_meta(to_float=True), node="DivBackward0",
    derivative=lambda g, a, b: (g / b, -g * a / (b * b) if _t(b) else None),
    save=lambda out, a, b: (a if _t(b) else None, b),
    samples=binary_samples(domain=(0.5, 2.0)), lowering="({a} / {b})",
    tensor_args=(0, 1), onnx="Div",
    saved_names=("self", "other"))
neg = register(
    "neg", kernel=np.negative, meta=unary_meta(to_float=False), node="NegBackward0",
    derivative=lambda g: (-g,), samples=unary_samples(), lowering="(-{a})", onnx="Neg")
reciprocal = register(
    "reciprocal", kernel=unary_kernel(np.reciprocal), meta=unary_meta(), node="ReciprocalBackward0",
    derivative=lambda g, out: (-g * out * out,), save=lambda out, a: (out,),
    samples=unary_samples(domain=(0.5, 2.0)), lowering="(1 / {a})", onnx="Reciprocal",
    saved_names=("result",))


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


def _pow_onnx(b, inputs, args, kwargs, opset):
    """Pow with a number as base or exponent (a constant of the result's dtype)."""
    return b.emit("Pow", [b.operand(inputs[0], b.out_dtype), b.operand(inputs[1], b.out_dtype)])


pow_scalar = register(
    "pow.Tensor_Scalar", kernel=_pow_ts_kernel, meta=_pow_ts_meta, node="PowBackward0",
    derivative=_pow_ts_derivative, save=lambda out, a, e: (a, e),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt, (0.5, 2.0)), e), name=f"^{e}")
                             for s in ((3, 4), (), (0,)) for e in (2, 3, 0.5, -1.5, 0)],
    onnx=_pow_onnx,
    saved_names=("self", "exponent"))
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
    samples=lambda rng, dt: [Sample((2.0, rand_array(rng, (3, 4), dt)))], onnx=_pow_onnx)

# ---------------------------------------------------------------- unary math


def _unary(name, ufunc, node, derivative, save, domain=None, to_float=True, **kw):
    return register(name, kernel=unary_kernel(ufunc, to_float=to_float),
                    meta=unary_meta(to_float), node=node, derivative=derivative, save=save,
                    samples=unary_samples(domain), domain=domain, **kw)


exp = _unary("exp", np.exp, "ExpBackward0", lambda g, out: (g * out,),
             lambda out, a: (out,), lowering="exp({a})", onnx="Exp",
    saved_names=("result",))
log = _unary("log", np.log, "LogBackward0", lambda g, a: (g / a,), lambda out, a: (a,),
             domain=(0.1, 3.0), lowering="log({a})", onnx="Log",
    saved_names=("self",))
sin = _unary("sin", np.sin, "SinBackward0", lambda g, a: (g * a.cos(),), lambda out, a: (a,),
             lowering="sin({a})", onnx="Sin")
cos = _unary("cos", np.cos, "CosBackward0", lambda g, a: (-g * a.sin(),),
             lambda out, a: (a,), lowering="cos({a})", onnx="Cos")
tanh = _unary("tanh", np.tanh, "TanhBackward0", lambda g, out: (g * (1 - out * out),),
              lambda out, a: (out,), lowering="tanh({a})", onnx="Tanh",
    saved_names=("result",))
sqrt = _unary("sqrt", np.sqrt, "SqrtBackward0", lambda g, out: (g / (2 * out),),
              lambda out, a: (out,), domain=(0.1, 3.0), lowering="sqrt({a})", onnx="Sqrt",
    saved_names=("result",))


def _sigmoid(a):
    # Two branches keep exp from overflowing for large |a|.
    e = np.exp(-np.abs(a))
    return np.where(a >= 0, 1 / (1 + e), e / (1 + e)).astype(a.dtype, copy=False)


sigmoid = _unary("sigmoid", _sigmoid, "SigmoidBackward0",
                 lambda g, out: (g * out * (1 - out),), lambda out, a: (out,),
                 lowering="(1 / (1 + exp(-{a})))", onnx="Sigmoid",
    saved_names=("result",))
abs_ = _unary("abs", np.abs, "AbsBackward0", lambda g, a: (g * a.sign(),),
              lambda out, a: (a,), to_float=False, lowering="fabs({a})", onnx="Abs",
    saved_names=("self",))


def _relu_check(dt) -> None:
    if dt == np.bool_ or dt is _dtype.bool_:
        raise RuntimeError("Boolean inputs not supported for relu")


def _relu_kernel(a):
    _relu_check(a.dtype)
    return np.maximum(a, 0).astype(a.dtype, copy=False)


def _relu_meta(a):
    _relu_check(a.dtype)
    return unary_meta(to_float=False)(a)


def _relu_derivative(g, out):
    if numpy_backward(g, out):  # one mask and one multiply, no dispatch or bool->float copy
        return (wrap_grad(np.multiply(g._data, out._data > 0)),)
    return (g * (out > 0),)


relu = register(
    "relu", kernel=_relu_kernel, meta=_relu_meta, node="ReluBackward0",
    derivative=_relu_derivative, save=lambda out, a: (out,),
    samples=unary_samples(), lowering="fmax({a}, 0)", onnx="Relu",
    saved_names=("result",))
sign = register(
    "sign", kernel=lambda a: np.sign(a).astype(a.dtype, copy=False),
    meta=unary_meta(to_float=False), node="SignBackward0",
    derivative=lambda g: (g * 0,), zero_grad=True, samples=unary_samples(), onnx="Sign")

# ---------------------------------------------------------------- comparisons


def _compare(name, ufunc, onnx: str, negate: bool = False):
    return register(name, kernel=binary_kernel(ufunc, compare=True),
                    meta=binary_meta(out_bool=True), differentiable=False,
                    samples=binary_samples(), onnx=compare(onnx, negate),
                    public=name.split(".")[0])


eq = _compare("eq.Tensor", np.equal, "Equal")
ne = _compare("ne.Tensor", np.not_equal, "Equal", negate=True)
lt = _compare("lt.Tensor", np.less, "Less")
le = _compare("le.Tensor", np.less_equal, "LessOrEqual")
gt = _compare("gt.Tensor", np.greater, "Greater")
ge = _compare("ge.Tensor", np.greater_equal, "GreaterOrEqual")


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


def _where_onnx(b, inputs, args, kwargs, opset):
    """Where(cond, a, b) with both branches in the result's dtype."""
    cond = b.cast(inputs[0], np.bool_)
    return b.emit("Where", [cond, b.operand(inputs[1], b.out_dtype),
                            b.operand(inputs[2], b.out_dtype)])


where = register(
    "where.self", kernel=_where_kernel, meta=_where_meta, node="WhereBackward0",
    derivative=_where_derivative, save=lambda out, c, a, b: (c, a, b), nondiff_args=(0,),
    samples=_where_samples, tensor_args=(1, 2), onnx=_where_onnx)


def _maximum_derivative(g, a, b):
    # Ties split the gradient in half, as PyTorch does.
    mask_a = (a > b) + (a == b) * 0.5
    return (g * mask_a, g * (1 - mask_a))


maximum = register(
    "maximum", kernel=binary_kernel(np.maximum), meta=binary_meta(), node="MaximumBackward0",
    derivative=_maximum_derivative, save=lambda out, a, b: (a, b),
    samples=binary_samples(scalars=()), tensor_args=(0, 1), onnx="Max",
    saved_names=("self", "other"))


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
    onnx=lambda b, inputs, args, kwargs, opset: clip(b, inputs[0], *args[1:3]),
    saved_names=("self", "min", "max"))


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
    public="clamp", onnx=_clamp_t_onnx)

# ---------------------------------------------------------------- in-place forms

add_ = inplace_variant(add, "add_.Tensor")
sub_ = inplace_variant(sub, "sub_.Tensor")
mul_ = inplace_variant(mul, "mul_.Tensor", saves_self=True)
div_ = inplace_variant(div, "div_.Tensor", saves_self=True)

# ---------------------------------------------------------------- more unary math

_LN2 = float(np.log(2.0))
_LN10 = float(np.log(10.0))
_TWO_OVER_SQRT_PI = float(2.0 / np.sqrt(np.pi))

try:  # SciPy's erf is exact to the last bit; without it, math.erf over the elements.
    from scipy.special import erf as _erf_ufunc
    from scipy.special import erfc as _erfc_ufunc
except ImportError:  # pragma: no cover - depends on the environment
    import math as _math

    _erf_py = np.frompyfunc(_math.erf, 1, 1)
    _erfc_py = np.frompyfunc(_math.erfc, 1, 1)

    def _erf_ufunc(a):
        return _erf_py(a).astype(a.dtype)

    def _erfc_ufunc(a):
        return _erfc_py(a).astype(a.dtype)


def _no_inplace_derivative(name):
    def derivative(g, *saved):
        raise NotImplementedError(
            f"the derivative for 'inplace version of {name}' is not implemented.")

    derivative.not_implemented = True
    return derivative


def _from_out(fn):
    return (lambda g, out: (fn(g, out),)), (lambda out, a: (out,))


def _from_in(fn):
    return (lambda g, a: (fn(g, a),)), (lambda out, a: (a,))


def _unary_entry(name, ufunc, node, fn, uses="in", domain=None, inplace_node=None, **kw):
    derivative, save = _from_out(fn) if uses == "out" else _from_in(fn)
    op = _unary(name, ufunc, node, derivative, save, domain=domain, **kw)
    fields = {}
    if inplace_node:  # PyTorch records the in-place form but cannot differentiate it
        fields = dict(node=inplace_node, derivative=_no_inplace_derivative(name),
                      gradcheck=False)
    inplace_variant(op, name + "_", saves_self=uses == "in", **fields)
    return op


exp2 = _unary_entry("exp2", np.exp2, "Exp2Backward0", lambda g, out: g * out * _LN2, "out")
expm1 = _unary_entry("expm1", np.expm1, "Expm1Backward0", lambda g, out: g * (out + 1), "out")
log2 = _unary_entry("log2", np.log2, "Log2Backward0", lambda g, a: g / (a * _LN2),
                    domain=(0.1, 3.0))
log10 = _unary_entry("log10", np.log10, "Log10Backward0", lambda g, a: g / (a * _LN10),
                     domain=(0.1, 3.0))
log1p = _unary_entry("log1p", np.log1p, "Log1PBackward0", lambda g, a: g / (a + 1),
                     domain=(-0.5, 3.0))
rsqrt = _unary_entry("rsqrt", lambda a: 1 / np.sqrt(a), "RsqrtBackward0",
                     lambda g, out: -0.5 * g * out * out * out, "out", domain=(0.2, 3.0),
                     onnx=lambda b, inputs, args, kwargs, opset: b.emit(
                         "Reciprocal", [b.emit("Sqrt", [b.cast(inputs[0], b.out_dtype)])]))
tan = _unary_entry("tan", np.tan, "TanBackward0", lambda g, out: g * (1 + out * out), "out",
                   domain=(-1.2, 1.2), onnx="Tan")
asin = _unary_entry("asin", np.arcsin, "AsinBackward0", lambda g, a: g * (1 - a * a).rsqrt(),
                    domain=(-0.9, 0.9), onnx="Asin")
acos = _unary_entry("acos", np.arccos, "AcosBackward0", lambda g, a: -g * (1 - a * a).rsqrt(),
                    domain=(-0.9, 0.9), onnx="Acos")
atan = _unary_entry("atan", np.arctan, "AtanBackward0", lambda g, a: g / (a * a + 1), onnx="Atan")
sinh = _unary_entry("sinh", np.sinh, "SinhBackward0", lambda g, a: g * a.cosh(), onnx="Sinh")
cosh = _unary_entry("cosh", np.cosh, "CoshBackward0", lambda g, a: g * a.sinh(), onnx="Cosh")
asinh = _unary_entry("asinh", np.arcsinh, "AsinhBackward0",
                     lambda g, a: g * (a * a + 1).rsqrt(), inplace_node="AsinhBackward1",
                     onnx="Asinh")
acosh = _unary_entry("acosh", np.arccosh, "AcoshBackward0",
                     lambda g, a: g * (a * a - 1).rsqrt(), domain=(1.2, 3.0),
                     inplace_node="AcoshBackward1", onnx="Acosh")
atanh = _unary_entry("atanh", np.arctanh, "AtanhBackward0", lambda g, a: g / (1 - a * a),
                     domain=(-0.9, 0.9), inplace_node="AtanhBackward1", onnx="Atanh")
erf = _unary_entry("erf", _erf_ufunc, "ErfBackward0",
                   lambda g, a: g * _TWO_OVER_SQRT_PI * (-(a * a)).exp(), onnx="Erf")
erfc = _unary_entry("erfc", _erfc_ufunc, "ErfcBackward0",
                    lambda g, a: -g * _TWO_OVER_SQRT_PI * (-(a * a)).exp())
# Existing entries get their in-place forms too.
for _op in (exp, tanh, sigmoid, sqrt):
    inplace_variant(_op, _op.name + "_")
for _op in (log, sin, cos, abs_):
    inplace_variant(_op, _op.name + "_", saves_self=True)
neg_ = inplace_variant(neg, "neg_")
pow_ = inplace_variant(pow_scalar, "pow_.Scalar", saves_self=True)
reciprocal_ = inplace_variant(reciprocal, "reciprocal_")
relu_ = inplace_variant(relu, "relu_")


def _zero(g, *rest):
    return (g * 0,) + (None,) * len(rest)


def _rounding(name, ufunc, node, onnx=None):
    def kernel(a):
        if a.dtype.kind in "biu":
            return a.copy()
        return unary_kernel(ufunc, to_float=False)(a)

    op = register(name, kernel=kernel, meta=unary_meta(to_float=False), node=node,
                  derivative=_zero, zero_grad=True, samples=unary_samples(domain=(-3.0, 3.0)),
                  onnx=onnx)
    inplace_variant(op, name + "_")
    return op


floor = _rounding("floor", np.floor, "FloorBackward0", onnx="Floor")
ceil = _rounding("ceil", np.ceil, "CeilBackward0", onnx="Ceil")
round_ = _rounding("round", np.round, "RoundBackward0", onnx="Round")  # both half to even
trunc = _rounding("trunc", np.trunc, "TruncBackward0")
sgn = register(
    "sgn", kernel=sign.kernel, meta=unary_meta(to_float=False), node="SgnBackward0",
    derivative=_zero, zero_grad=True, samples=unary_samples())
sign_ = inplace_variant(sign, "sign_")
sgn_ = inplace_variant(sgn, "sgn_")


def _round_decimals_kernel(a, decimals):
    if a.dtype.kind in "biu":
        return a.copy()
    return np.round(a, decimals)


round_decimals = register(
    "round.decimals", kernel=_round_decimals_kernel,
    meta=lambda a, decimals: Spec(tuple(a.shape), a.dtype), node="RoundBackward1",
    derivative=lambda g: (g * 0, None), zero_grad=True, public="round",
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt, (-30, 30)), d), name=f"{s} {d}")
                             for s in ((3, 4), ()) for d in (1, 2, -1)])


def _frac_kernel(a):
    if a.dtype.kind in "biu":
        raise NotImplementedError(
            f"\"frac_cpu\" not implemented for '{_dtype.FROM_NP[a.dtype].legacy}'")
    return a - np.trunc(a)


frac = register(
    "frac", kernel=_frac_kernel, meta=unary_meta(to_float=False), node="FracBackward0",
    derivative=lambda g: (g,), samples=unary_samples(domain=(-3.0, 3.0)))
frac_ = inplace_variant(frac, "frac_")


def _nan_to_num_kernel(a, nan=None, posinf=None, neginf=None):
    if a.dtype.kind in "biu":
        return a.copy()
    info = np.finfo(F32 if a.dtype in HALF else a.dtype)
    big = np.finfo(a.dtype) if a.dtype not in HALF else info
    out = np.nan_to_num(a, nan=0.0 if nan is None else nan,
                        posinf=big.max if posinf is None else posinf,
                        neginf=big.min if neginf is None else neginf)
    return out.astype(a.dtype, copy=False)


def _nan_to_num_samples(rng, dtype):
    x = rand_array(rng, (3, 4), dtype)
    x[0, 0], x[1, 1], x[2, 2] = np.nan, np.inf, -np.inf
    return [Sample((x,)), Sample((x.copy(), 1.5, 2.0, -3.0)), Sample((x[:0],)),
            Sample((rand_array(rng, (), dtype),))]


nan_to_num = register(
    "nan_to_num", kernel=_nan_to_num_kernel,
    meta=lambda a, *r: Spec(tuple(a.shape), a.dtype), node="NanToNumBackward0",
    derivative=lambda g, a: (g * a.isfinite(), None, None, None),
    save=lambda out, a, *r: (a,), samples=_nan_to_num_samples)
nan_to_num_ = inplace_variant(nan_to_num, "nan_to_num_", saves_self=True)


def _predicate(name, ufunc):
    def kernel(a):
        if a.dtype.kind in "biu":
            return np.zeros(a.shape, bool) if name != "isfinite" else np.ones(a.shape, bool)
        return ufunc(a)

    def samples(rng, dtype):
        x = rand_array(rng, (3, 4), dtype)
        x[0, 0], x[1, 1], x[2, 2] = np.nan, np.inf, -np.inf
        return [Sample((x,)), Sample((rand_array(rng, (0, 2), dtype),)),
                Sample((np.arange(4),), name="int")]

    return register(name, kernel=kernel, meta=lambda a: Spec(tuple(a.shape), _dtype.bool_),
                    differentiable=False, samples=samples)


isnan = _predicate("isnan", np.isnan)
isinf = _predicate("isinf", np.isinf)
isfinite = _predicate("isfinite", np.isfinite)

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
    den = a * a + b * b
    return (g * b / den, -g * a / den)


atan2 = register(
    "atan2", kernel=binary_kernel(np.arctan2, to_float=True), meta=binary_meta(to_float=True),
    node="Atan2Backward0", derivative=_atan2_derivative, save=lambda out, a, b: (a, b),
    samples=binary_samples(domain=(0.3, 2.0), scalars=()), tensor_args=(0, 1))
atan2_ = inplace_variant(atan2, "atan2_", saves_self=True)


def _not_implemented(aten: str):
    def derivative(g, *rest):
        raise RuntimeError(f"derivative for aten::{aten} is not implemented")

    derivative.not_implemented = True
    return derivative


def _floor_divide(a, b):
    dt = result_np(a, b)
    if dt.kind in "iu":
        if np.any(np.asarray(b) == 0):
            raise RuntimeError("ZeroDivisionError")
        return np.floor_divide(as_dtype(a, dt), as_dtype(b, dt))
    return binary_kernel(np.floor_divide)(a, b)


floor_divide = register(
    "floor_divide", kernel=_floor_divide, meta=binary_meta(), node="NotImplemented",
    derivative=_not_implemented("floor_divide"), gradcheck=False,
    samples=_binary_samples_nonzero(scalars=()), tensor_args=(0, 1))
floor_divide_scalar = register(
    "floor_divide.Scalar", kernel=_floor_divide, meta=binary_meta(), node="NotImplemented",
    derivative=_not_implemented("floor_divide"), gradcheck=False, public="floor_divide",
    samples=lambda rng, dt: [Sample((rand_array(rng, (3, 4), dt, (-4, 4)), c))
                             for c in (1.5, -2, 2)])
floor_divide_ = inplace_variant(floor_divide, "floor_divide_.Tensor",
                                derivative=_not_implemented("floor_divide_"))


def _remainder(ufunc):
    def kernel(a, b):
        dt = result_np(a, b)
        if dt.kind in "iu" and np.any(np.asarray(b) == 0):
            raise RuntimeError("ZeroDivisionError")
        return binary_kernel(ufunc)(a, b)

    return kernel


def _scalar_samples(rng, dt):
    return [Sample((rand_array(rng, s, dt, (-4, 4)), c), name=f"{s} {c}")
            for s in ((3, 4), (), (0,)) for c in (1.5, -2.0)]


remainder = register(
    "remainder.Tensor", kernel=_remainder(np.remainder), meta=binary_meta(),
    node="RemainderBackward1",
    derivative=lambda g, a, b: (g, -g * (a / b).floor() if b is not None else None),
    save=lambda out, a, b: (a if needs(b) else None, b if needs(b) else None),
    samples=_binary_samples_nonzero(scalars=()), tensor_args=(0, 1), public="remainder")
remainder_scalar = register(
    "remainder.Scalar", kernel=_remainder(np.remainder), meta=binary_meta(),
    node="RemainderBackward0", derivative=lambda g: (g, None), samples=_scalar_samples,
    public="remainder")
remainder_rscalar = register(
    "remainder.Scalar_Tensor", kernel=_remainder(np.remainder), meta=binary_meta(),
    node="NotImplemented", derivative=_not_implemented("remainder"), gradcheck=False,
    samples=lambda rng, dt: [Sample((2.5, rand_array(rng, (3, 4), dt, (0.5, 2))))],
    public="remainder")
fmod = register(
    "fmod.Tensor", kernel=_remainder(np.fmod), meta=binary_meta(), node="FmodBackward1",
    derivative=lambda g, a, b: (g, -g * (a / b).trunc() if b is not None else None),
    save=lambda out, a, b: (a if needs(b) else None, b if needs(b) else None),
    samples=_binary_samples_nonzero(scalars=()), tensor_args=(0, 1), public="fmod")
fmod_scalar = register(
    "fmod.Scalar", kernel=_remainder(np.fmod), meta=binary_meta(), node="FmodBackward0",
    derivative=lambda g: (g, None), samples=_scalar_samples, public="fmod")
remainder_ = inplace_variant(remainder, "remainder_.Tensor", saves_self=True)
remainder_scalar_ = inplace_variant(remainder_scalar, "remainder_.Scalar")
fmod_ = inplace_variant(fmod, "fmod_.Tensor", saves_self=True)
fmod_scalar_ = inplace_variant(fmod_scalar, "fmod_.Scalar")


def _minimum_derivative(g, a, b):
    mask_a = (a < b) + (a == b) * 0.5
    return (g * mask_a, g * (1 - mask_a))


minimum = register(
    "minimum", kernel=binary_kernel(np.minimum), meta=binary_meta(), node="MinimumBackward0",
    derivative=_minimum_derivative, save=lambda out, a, b: (a, b),
    samples=binary_samples(scalars=()), tensor_args=(0, 1), onnx="Min")


def _lerp_kernel(a, end, w):
    dt = result_np(a, end)
    a = as_dtype(a, dt)
    end = as_dtype(end, dt)
    w = as_dtype(w, dt)
    return np.where(np.abs(w) < 0.5, a + w * (end - a), end - (end - a) * (1 - w)).astype(
        dt, copy=False)


def _lerp_meta(a, end, w):
    shapes = [shape_of(a), shape_of(end)] + ([shape_of(w)] if hasattr(w, "shape") else [])
    return Spec(broadcast_shapes(*shapes), _dtype.result_type(a, end))


lerp = register(
    "lerp.Scalar", kernel=_lerp_kernel, meta=_lerp_meta, node="LerpBackward0",
    derivative=lambda g, w: (g * (1 - w), g * w, None), save=lambda out, a, e, w: (w,),
    samples=lambda rng, dt: [Sample((rand_array(rng, a, dt), rand_array(rng, b, dt), w))
                             for a, b in (((3, 4), (3, 4)), ((3, 4), (4,)), ((), ()))
                             for w in (0.3, 0.8)], public="lerp")
lerp_tensor = register(
    "lerp.Tensor", kernel=_lerp_kernel, meta=_lerp_meta, node="LerpBackward1",
    derivative=lambda g, a, e, w: (g * (1 - w), g * w, g * (e - a)),
    save=lambda out, a, e, w: (a, e, w), public="lerp",
    samples=lambda rng, dt: [Sample((rand_array(rng, a, dt), rand_array(rng, b, dt),
                                     rand_array(rng, c, dt, (0, 1))))
                             for a, b, c in (((3, 4), (3, 4), (3, 4)), ((3, 4), (4,), (3, 1)),
                                             ((), (), ()))])
lerp_ = inplace_variant(lerp, "lerp_.Scalar")
lerp_tensor_ = inplace_variant(lerp_tensor, "lerp_.Tensor", saves_self=True)


def _addc_kernel(ufunc):
    def kernel(a, t1, t2, value=1):
        dt = result_np(a, t1, t2)
        if ufunc is np.true_divide and dt.kind in "biu":
            raise RuntimeError(
                "Integer division with addcdiv is no longer supported, and in a future release "
                "addcdiv will perform a true division of tensor1 and tensor2. The historic "
                "addcdiv behavior can be implemented as (input + value * torch.trunc(tensor1 / "
                "tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / "
                "tensor2) for float inputs. The future addcdiv behavior is just the latter "
                "implementation: (input + value * tensor1 / tensor2), for all dtypes.")
        a, t1, t2 = (as_dtype(x, dt) for x in (a, t1, t2))
        return (a + value * ufunc(t1, t2)).astype(dt, copy=False)

    return kernel


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
    derivative=lambda g, t1, t2, v: (g, g * t2 * v if t2 is not None else None,
                                     g * t1 * v if t1 is not None else None, None),
    # Each factor is saved only for the other's gradient: an operand nobody differentiates
    # may change afterwards (as in PyTorch).
    save=lambda out, a, t1, t2, value=1: (t1 if _wants_grad(t2) else None,
                                          t2 if _wants_grad(t1) else None, value),
    samples=_addc_samples(None))
addcdiv = register(
    "addcdiv", kernel=_addc_kernel(np.true_divide), meta=_addc_meta, node="AddcdivBackward0",
    derivative=lambda g, t1, t2, v: (g, g * v / t2 if t2 is not None else None,
                                     -g * v * t1 / (t2 * t2) if t1 is not None else None, None),
    save=lambda out, a, t1, t2, value=1: (t1 if _wants_grad(t2) else None,
                                          t2 if _wants_grad(t1) or _wants_grad(t2) else None,
                                          value),
    samples=_addc_samples((0.5, 2.0)))
addcmul_ = inplace_variant(addcmul, "addcmul_")
addcdiv_ = inplace_variant(addcdiv, "addcdiv_")

# ---------------------------------------------------------------- logical and bitwise


def _bool_samples(rng, dtype):
    out = []
    for a, b in (((3, 4), (3, 4)), ((3, 4), (4,)), ((), (2,)), ((0,), ())):
        out.append(Sample((rand_array(rng, a, dtype), rand_array(rng, b, dtype)),
                          name=f"{a}x{b}"))
    out.append(Sample((rng.random((3,)) > 0.5, rng.integers(-2, 3, (3,))), name="bool,int"))
    return out


def _logical(name, ufunc, onnx=None):
    op = register(name, kernel=lambda a, b: ufunc(a, b), meta=binary_meta(out_bool=True),
                  differentiable=False, samples=_bool_samples, onnx=onnx)
    inplace_variant(op, name + "_", differentiable=False)
    return op


logical_and = _logical("logical_and", np.logical_and, boolean("And"))
logical_or = _logical("logical_or", np.logical_or, boolean("Or"))
logical_xor = _logical("logical_xor", np.logical_xor, boolean("Xor"))
logical_not = register(
    "logical_not", kernel=np.logical_not, meta=lambda a: Spec(tuple(a.shape), _dtype.bool_),
    differentiable=False, samples=unary_samples(), onnx=boolean("Not"))
logical_not_ = inplace_variant(logical_not, "logical_not_", differentiable=False)


def _bitwise_check(dt) -> None:
    if dt.kind not in "biu":
        name = _dtype.FROM_NP[dt].legacy if dt in _dtype.FROM_NP else str(dt)
        raise NotImplementedError(f"\"bitwise_not_cpu\" not implemented for '{name}'")


def _bitwise_kernel(ufunc, fname):
    def kernel(a, b):
        dt = result_np(a, b)
        if dt.kind not in "biu":
            name = _dtype.FROM_NP[dt].legacy
            raise NotImplementedError(f"\"{fname}_cpu\" not implemented for '{name}'")
        return ufunc(as_dtype(a, dt), as_dtype(b, dt))

    return kernel


def _bitwise_meta(fname):
    def meta(a, b):
        spec = binary_meta()(a, b)
        if spec.dtype.category == _dtype.FLOAT:
            raise NotImplementedError(
                f"\"{fname}_cpu\" not implemented for '{spec.dtype.legacy}'")
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
    op = register(name, kernel=_bitwise_kernel(ufunc, fname), meta=_bitwise_meta(fname),
                  differentiable=False, samples=_int_samples, public=fname)
    scalar = register(name.replace("Tensor", "Scalar"), kernel=_bitwise_kernel(ufunc, fname),
                      meta=_bitwise_meta(fname), differentiable=False, public=fname,
                      samples=lambda rng, dt: [Sample((rng.integers(-8, 9, (3, 4)), 5))])
    inplace_variant(op, fname + "_.Tensor", differentiable=False)
    return op, scalar


bitwise_and, bitwise_and_scalar = _bitwise("bitwise_and.Tensor", np.bitwise_and)
bitwise_or, bitwise_or_scalar = _bitwise("bitwise_or.Tensor", np.bitwise_or)
bitwise_xor, bitwise_xor_scalar = _bitwise("bitwise_xor.Tensor", np.bitwise_xor)


def _bitwise_not_kernel(a):
    _bitwise_check(a.dtype)
    return np.invert(a)


def _bitwise_not_meta(a):
    if a.dtype.category == _dtype.FLOAT:
        raise NotImplementedError(
            f"\"bitwise_not_cpu\" not implemented for '{a.dtype.legacy}'")
    return Spec(tuple(a.shape), a.dtype)


bitwise_not = register(
    "bitwise_not", kernel=_bitwise_not_kernel, meta=_bitwise_not_meta, differentiable=False,
    samples=lambda rng, dt: [Sample((rng.integers(-8, 9, (3, 4)),)),
                             Sample((rng.random((5,)) > 0.5,))])
bitwise_not_ = inplace_variant(bitwise_not, "bitwise_not_", differentiable=False)
clamp_ = inplace_variant(clamp, "clamp_", saves_self=True)
clamp_tensor_ = inplace_variant(clamp_tensor, "clamp_.Tensor", saves_self=True)
