"""Pointwise unary math: exp/log families, trig and hyperbolic functions, sqrt, sigmoid,
abs, relu, sign/sgn, erf, rounding, frac, nan_to_num, isnan/isinf/isfinite.

Each derivative returns one entry per positional argument (None where there is no tensor or
no gradient); dispatch reduces a broadcast gradient back to its input's shape.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from .._dispatch import call, save_result
from .._shapes import laid_like
from ..autograd.grad_mode import is_grad_enabled
from . import _native, _parallel, _special_kernels, _workspace
from . import _onnx as ox
from ._util import (
    F32,
    HALF,
    Spec,
    c_gradient,
    cj,
    dtype_of,
    half_formula,
    not_implemented_for,
    numpy_backward,
    rand_array,
    refuse_dtypes,
    saved_array,
    unary_kernel,
    unary_meta,
    unary_samples,
    wrap_grad,
)
from .activation import real_grad_only
from .activation_backward import backward_meta, first_order_kernel, threshold_backward
from .arithmetic import (
    float_writer_operands,
    neg,
    pow_scalar,
    reciprocal,
)
from .complex import sgn_complex, sgn_complex_derivative
from .registry import REGISTRY, Sample, inplace_variant, register

# ---------------------------------------------------------------- unary math


def _unary(name, ufunc, node, derivative, save, domain=None, to_float=True, meta=None,
           kernel=None, **kw):
    return register(name, kernel=kernel or unary_kernel(ufunc, to_float=to_float),
                    meta=meta or unary_meta(to_float), node=node, derivative=derivative,
                    save=save, samples=unary_samples(domain), domain=domain, **kw)


exp = _unary("exp", np.exp, "ExpBackward0", lambda g, out: (g * cj(out),),
             save_result, lowering=lambda v, a: v.unary("exp", a), onnx="Exp",
    saved_names=("result",))
log = _unary("log", np.log, "LogBackward0", lambda g, a: (g / cj(a),), lambda out, a: (a,),
             domain=(0.1, 3.0), lowering=lambda v, a: v.unary("log", a), onnx="Log",
    saved_names=("self",))
sin = _unary("sin", np.sin, "SinBackward0", lambda g, a: (g * cj(a.cos()),),
             lambda out, a: (a,),
             lowering=lambda v, a: v.unary("sin", a), onnx="Sin", saved_names=("self",))
cos = _unary("cos", np.cos, "CosBackward0", lambda g, a: (-g * cj(a.sin()),),
             lambda out, a: (a,), lowering=lambda v, a: v.unary("cos", a), onnx="Cos",
             saved_names=("self",))
def _tanh_derivative(g, out):
    if is_grad_enabled():  # create_graph: PyTorch's node, TanhBackwardBackward0
        return (call(tanh_backward, g, out),)
    d = out._data
    if d is not None and d.dtype in HALF and numpy_backward(g, out, halves=True) and \
            g._data.dtype is d.dtype:
        # A half type in float32, rounded once, as PyTorch's tanh_backward computes it.
        y = d.astype(F32)
        return (wrap_grad((g._data.astype(F32) * (1 - y * y)).astype(d.dtype)),)
    return (half_formula(lambda g, out: g * cj(1 - out * out), g, out),)


tanh = _unary("tanh", np.tanh, "TanhBackward0", _tanh_derivative,
              save_result, lowering=lambda v, a: v.unary("tanh", a), onnx="Tanh",
    saved_names=("result",))


def _backward_samples(rng, dt):
    """A gradient and a result of sigmoid or tanh (in (-1, 1))."""
    return [Sample((rand_array(rng, (3, 4), dt), rand_array(rng, (3, 4), dt, (-0.95, 0.95))),
                   name="(3, 4)")]


# tanh_backward(grad_output, output): g (1 - y^2)-bar. Differentiated: in the gradient, itself;
# in y, -2 g y (conjugated as PyTorch's for complex values).
tanh_backward = register(
    "tanh_backward", kernel=first_order_kernel(_tanh_derivative), meta=backward_meta,
    node="TanhBackwardBackward0",
    derivative=lambda gg, g, y: (call(tanh_backward, gg, y), cj(gg) * (cj(y * -2) * g)),
    save=lambda out, g, y: (g, y), samples=_backward_samples, public="tanh_backward",
    decomposition=lambda g, y: half_formula(lambda g, y: g * cj(1 - y * y), g, y),
    saved_names=("grad_output", "output"))
sqrt = _unary("sqrt", np.sqrt, "SqrtBackward0", lambda g, out: (g / cj(2 * out),),
              save_result, domain=(0.1, 3.0), lowering=lambda v, a: v.unary("sqrt", a),
              onnx="Sqrt",
    saved_names=("result",))


def _sigmoid(a):
    out = _native.elementwise("math", "sigmoid", (a,))  # float32 / float64 in one C pass
    if out is not None:
        return out
    if a.dtype.kind == "c":  # no ordering to branch on: the formula itself
        return 1 / (1 + np.exp(-a))
    # Two branches keep exp from overflowing for large |a|.
    e = np.exp(-np.abs(a))
    return np.where(a >= 0, 1 / (1 + e), e / (1 + e)).astype(a.dtype, copy=False)


def _sigmoid_derivative(g, out):
    if is_grad_enabled():  # create_graph: PyTorch's node, SigmoidBackwardBackward0
        return (call(sigmoid_backward, g, out),)
    if g.dtype is _dtype.float16 and out.dtype is _dtype.float16:
        # PyTorch's float16 kernel computes g (1 - y) y in float16, rounding each step
        # (bfloat16's computes in float32 and rounds once, as `half_formula` does)
        return ((g * (1 - out)) * out,)
    grad = c_gradient("sigmoid_grad", g, out)
    if grad is None:
        grad = half_formula(lambda g, out: g * cj(out * (1 - out)), g, out)
    return (grad,)


sigmoid = _unary("sigmoid", _sigmoid, "SigmoidBackward0", _sigmoid_derivative, save_result,
                 lowering=lambda v, a: v.unary("sigmoid", a), onnx="Sigmoid",
    saved_names=("result",))
# sigmoid_backward(grad_output, output): g (y (1 - y))-bar. Differentiated: in the gradient,
# itself; in y, g (1 - 2 y) (conjugated as PyTorch's for complex values).
sigmoid_backward = register(
    "sigmoid_backward", kernel=first_order_kernel(_sigmoid_derivative), meta=backward_meta,
    node="SigmoidBackwardBackward0",
    derivative=lambda gg, g, y: (call(sigmoid_backward, gg, y), cj(gg) * g * cj(1 - y * 2)),
    save=lambda out, g, y: (g, y),
    samples=lambda rng, dt: [Sample((rand_array(rng, (3, 4), dt),
                                     rand_array(rng, (3, 4), dt, (0.05, 0.95))), name="(3, 4)")],
    public="sigmoid_backward",
    decomposition=lambda g, y: half_formula(lambda g, y: g * cj(y * (1 - y)), g, y),
    saved_names=("grad_output", "output"))
def _abs_meta(a):
    if a.dtype is _dtype.bool_:
        raise not_implemented_for("abs_cpu", "Bool")
    return Spec(tuple(a.shape), a.dtype.to_real())  # |complex| is real


_abs_base = unary_kernel(np.abs, to_float=False)


def _abs_kernel(a):
    if a.dtype.kind == "b":  # PyTorch has no bool kernel (NumPy's abs passes bools)
        raise not_implemented_for("abs_cpu", "Bool")
    return _abs_base(a)


_abs_kernel.ufunc = np.abs  # float32/float64: the recorders call it themselves

abs_ = _unary("abs", np.abs, "AbsBackward0",
              lambda g, a: (g * (a.sgn() if a.is_complex() else a.sign()),),
              lambda out, a: (a,), to_float=False, lowering=lambda v, a: v.abs(a), onnx="Abs",
              saved_names=("self",), meta=_abs_meta, kernel=_abs_kernel)


def _relu_check(dt) -> None:
    if dt == np.bool_ or dt is _dtype.bool_:
        raise RuntimeError("Boolean inputs not supported for relu")
    if dt == np.complex64 or dt == np.complex128 or dt in _dtype._TO_REAL:
        raise NotImplementedError("clamp is not supported for complex types")


# A 0-d zero per float dtype: `np.maximum(a, zero)` with an array of `a`'s own dtype skips
# converting a Python 0 on every call (half the cost of the call on a small tensor).
_RELU_ZERO = {np.dtype(t): np.zeros((), t) for t in (np.float32, np.float64)}
# Against a 0-d zero `np.maximum` runs a scalar loop; against an array of zeros that steps
# through memory as the input does, its SIMD loop, three times faster (301k float32 values,
# LeNet's first activation: 0.11 -> 0.035 ms). A block of zeros serves any large input, as
# rows of this many values (the zeros stay in cache); below `RELU_SIMD_MIN` values the
# scalar loop is as fast as slicing the block.
RELU_ZERO_BLOCK = 1 << 14
RELU_SIMD_MIN = 1024
_RELU_ZEROS = {dt: np.zeros(RELU_ZERO_BLOCK, dt) for dt in _RELU_ZERO}
for _z in _RELU_ZEROS.values():
    _z.flags.writeable = False
# Per float dtype: the integer type of the same width, in which `_relu_grad_array` masks a
# gradient's bits, and the zero its mask compares with.
_RELU_BITS = {dt: (np.int32 if dt.itemsize == 4 else np.int64, zero)
              for dt, zero in _RELU_ZERO.items()}


_F16 = np.dtype(np.float16)  # (whose maximum takes its operands the other way round)
# NumPy's maximum as a module global: a small relu is a ~1 us call, of which looking up
# `np.maximum` took ~30 ns.
_maximum = np.maximum
# Contiguous float inputs of at least this many values run relu and its gradient in C
# (ops/native/pointwise.c), in one pass shared between threads, relu_ in place; below it the
# ctypes call costs more than NumPy's loop.
RELU_NATIVE_MIN = 1 << 15
# Its gradient runs in C from this many values, whole on this thread below `RELU_NATIVE_MIN`:
# NumPy's way is two passes and a mask (a batch of 64 x 128 units: 6.1 against 3.9 us).
RELU_GRAD_NATIVE_MIN = RELU_SIMD_MIN


def _relu_native(a: np.ndarray, out: np.ndarray) -> bool:
    """relu of C-contiguous float32/float64 `a` into `out` (`a` itself for relu_) in C,
    elements shared between threads; False (nothing written) when native kernels are off."""
    return _native.run_elementwise(_native.typed("pointwise", "relu", a.dtype, "ppii"), (a, out))


def _relu_float(a):
    """relu of a float32 or float64 array: relu's `ufunc`, which the recorders call
    themselves for such an array (`_recorders.UFUNC`), as they call exp's NumPy ufunc: the
    kernel's dtype lookup and its frame cost a tenth of a small relu with grad."""
    # (No local for the dtype or size before the common small case: each costs ~20 ns of a
    # ~1 us call.) The zero comes first: NumPy's maximum returns its second argument where
    # the two are equal, so -0.0 stays -0.0, as PyTorch's relu keeps it; a NaN stays NaN.
    if a.size < RELU_SIMD_MIN or not a.flags.c_contiguous:
        return _maximum(_RELU_ZERO[a.dtype], a)
    return _relu_contiguous(a)


def _relu_contiguous(a, out=None):
    """relu of a C-contiguous float32/float64 array of at least `RELU_SIMD_MIN` values:
    against a block of zeros, in C beyond `RELU_NATIVE_MIN`; into `out` where given (`a`
    itself for relu_)."""
    dt = a.dtype
    n = a.size
    zeros = _RELU_ZEROS[dt]
    if n <= RELU_ZERO_BLOCK:
        return np.maximum(zeros[:n].reshape(a.shape), a, out=out)
    if out is None:
        out = np.empty(a.shape, dt)
    if n >= RELU_NATIVE_MIN and _relu_native(a, out):
        return out
    flat, dst = a.reshape(-1), out.reshape(-1)
    rows = n // RELU_ZERO_BLOCK
    whole = rows * RELU_ZERO_BLOCK
    src_rows = flat[:whole].reshape(rows, RELU_ZERO_BLOCK)
    dst_rows = dst[:whole].reshape(rows, RELU_ZERO_BLOCK)

    def part(i: int, j: int) -> None:  # rows shared between threads
        np.maximum(zeros, src_rows[i:j], out=dst_rows[i:j])

    _parallel.for_chunks(part, rows, whole)
    if whole < n:
        np.maximum(zeros[:n - whole], flat[whole:], out=dst[whole:])
    return out


def _relu_kernel(a):
    zero = _RELU_ZERO.get(a.dtype)
    if zero is not None:  # `_relu_float`'s steps, without its frame (relu_, modes)
        if a.size < RELU_SIMD_MIN or not a.flags.c_contiguous:
            return _maximum(zero, a)
        return _relu_contiguous(a)
    dt = a.dtype
    if dt.kind in "bc":  # `dt == np.bool_` converts the type on every call: test the kind
        _relu_check(dt)
    # A Python 0 keeps the array's dtype (NumPy 2's promotion). NumPy's float16 maximum
    # returns its first argument where the two are equal (the other loops their second), so
    # the input comes first there: -0.0 stays -0.0, as PyTorch's relu keeps it.
    out = np.maximum(a, 0) if dt is _F16 else np.maximum(0, a)
    return out if out.dtype is dt else out.astype(dt)


_relu_kernel.ufunc = _relu_float  # float arrays: the recorders call it themselves


def _relu_write_into(a) -> bool:
    """relu_'s `write_into` (see dispatch's in-place path): a float32/float64 `a` written in
    place by relu's own steps (the same bits); False, having written nothing, for another
    dtype or a read-only `a` (the kernel's checks and dispatch's general path)."""
    if not float_writer_operands(a, ()):
        return False
    if a.size < RELU_SIMD_MIN or not a.flags.c_contiguous:
        _maximum(_RELU_ZERO[a.dtype], a, out=a)
    else:
        _relu_contiguous(a, a)
    return True


def _relu_meta(a):
    _relu_check(a.dtype)
    return unary_meta(to_float=False)(a)


def _relu_grad_array(g: np.ndarray, out: np.ndarray) -> np.ndarray:
    """`g` where relu's output is not zero, else +0 (PyTorch's `threshold_backward`: a NaN
    output passes the gradient on). The output is never negative, so `out != 0` is
    `not out <= 0`. The gradient's bits are multiplied by the 0/1 mask as integers: a float
    multiply would give -0 for a negative gradient and NaN for an infinite one; np.where and
    masked stores branch per value (ten times slower on a random mask)."""
    bits = _RELU_BITS.get(out.dtype)
    if bits is None or g.dtype != out.dtype:
        return np.where(np.not_equal(out, 0), g, np.zeros((), g.dtype))
    ints, zero = bits
    n = out.size
    if n >= RELU_GRAD_NATIVE_MIN and g.shape == out.shape and g.flags.c_contiguous and \
            out.flags.c_contiguous:
        fn = _native.typed("pointwise", "relu_grad", out.dtype, "pppii")
        if fn is not None:
            res = np.empty(out.shape, out.dtype)
            pg, po, pr = _native.address(g), _native.address(out), _native.address(res)
            if n < RELU_NATIVE_MIN:
                fn(pg, po, pr, 0, n)
            else:
                _native.run_pieces(fn, (pg, po, pr), (), n, 2 * n)
            return res
    if n < RELU_ZERO_BLOCK:
        return np.multiply(g.view(ints), np.not_equal(out, zero)).view(g.dtype)
    # A large mask is a temporary in a work buffer, not fresh pages.
    keep = _workspace.scratch("relu.mask", out.shape, np.bool_)
    if g.shape != out.shape or not (g.flags.c_contiguous and out.flags.c_contiguous):
        return np.multiply(g.view(ints), np.not_equal(out, zero, out=keep)).view(g.dtype)
    res = np.empty(n, ints)
    g_bits, values, mask = g.reshape(-1).view(ints), out.reshape(-1), keep.reshape(-1)

    def part(i: int, j: int) -> None:  # elements shared between threads
        np.not_equal(values[i:j], zero, out=mask[i:j])
        np.multiply(g_bits[i:j], mask[i:j], out=res[i:j])

    _parallel.for_chunks(part, n, n)
    return res.view(g.dtype).reshape(g.shape)


def _relu_derivative(g, out):
    if numpy_backward(g, out):  # no dispatch or bool->float copy
        return (wrap_grad(_relu_grad_array(g._data, out._data)),)
    if is_grad_enabled():  # create_graph: PyTorch's node, through the result
        return (call(threshold_backward, g, out, 0.0),)
    return (g.where(~(out <= 0), 0.0),)  # a NaN result passes the gradient, as PyTorch's


def _relu_on_arrays(g, out):
    od = saved_array(out, g.dtype)  # (a 0-d product would be a NumPy scalar)
    return None if od is None or not g.ndim else (_relu_grad_array(g, od),)


_relu_derivative.on_arrays = _relu_on_arrays

# (The lowering's zero comes first too: the generated maximum returns its second argument
# where the two are equal, so -0.0 stays -0.0.)
relu = register(
    "relu", kernel=_relu_kernel, meta=_relu_meta, node="ReluBackward0",
    derivative=_relu_derivative, save=save_result,
    samples=unary_samples(), lowering=lambda v, a: v.maximum(0, a), onnx="Relu",
    saved_names=("result",))
_SIGN_COMPLEX = ("Unlike NumPy, torch.sign is not intended to support complex numbers. Please "
                 "use torch.sgn instead.")


def real_sign(a: np.ndarray) -> np.ndarray:
    """sign of a real array as PyTorch computes it, (a > 0) - (a < 0): +0 for -0.0 and for
    NaN (NumPy's sign keeps both)."""
    kind = a.dtype.kind
    if kind == "b":  # a bool is its own sign
        return a.copy()
    if kind in "iu":
        return np.sign(a)
    return (a > 0).astype(a.dtype) - (a < 0).astype(a.dtype)


def _sign_kernel(a):
    if a.dtype.kind == "c":
        raise NotImplementedError(_SIGN_COMPLEX)
    return real_sign(a)


def _sign_meta(a):
    if a.dtype.is_complex:
        raise NotImplementedError(_SIGN_COMPLEX)
    return Spec(tuple(a.shape), a.dtype)


sign = register(
    "sign", kernel=_sign_kernel, meta=_sign_meta, node="SignBackward0",
    # Zeros, not `g * 0`: an infinite incoming gradient gives 0 as PyTorch's, not NaN.
    derivative=lambda g: (g.new_zeros(g.shape),), zero_grad=True, samples=unary_samples(),
    onnx="Sign")

# ---------------------------------------------------------------- more unary math

_LN2 = float(np.log(2.0))
_LN10 = float(np.log(10.0))
_TWO_OVER_SQRT_PI = float(2.0 / np.sqrt(np.pi))


def _no_inplace_derivative(name):
    def derivative(g, *saved):
        raise NotImplementedError(
            f"the derivative for 'inplace version of {name}' is not implemented.")

    derivative.not_implemented = True
    return derivative


def _holomorphic(fn):
    """`fn(g, x)`, written as `g * f'`, as the conjugate Wirtinger gradient `g * conj(f')`
    of a holomorphic op when the gradient is complex: `conj(fn(conj(g), x))`."""

    def grad(g, x):
        if g._dtype.category == _dtype.COMPLEX:
            return fn(g.conj(), x).conj()
        return fn(g, x)

    return grad


def _from_out(fn):
    grad = _holomorphic(fn)
    return (lambda g, out: (grad(g, out),)), save_result


def _from_in(fn):
    grad = _holomorphic(fn)
    return (lambda g, a: (grad(g, a),)), (lambda out, a: (a,))


def _unary_entry(name, ufunc, node, fn, uses="in", domain=None, inplace_node=None, **kw):
    derivative, save = _from_out(fn) if uses == "out" else _from_in(fn)
    # PyTorch's node keeps the output as `_saved_result`, an input as `_saved_self`
    kw.setdefault("saved_names", ("result",) if uses == "out" else ("self",))
    op = _unary(name, ufunc, node, derivative, save, domain=domain, **kw)
    fields = {}
    if inplace_node:  # PyTorch records the in-place form but cannot differentiate it
        fields = dict(node=inplace_node, derivative=_no_inplace_derivative(name),
                      gradcheck=False, saved_names=())
    inplace_variant(op, name + "_", saves_self=uses == "in", **fields)
    return op


exp2 = _unary_entry("exp2", np.exp2, "Exp2Backward0", lambda g, out: g * out * _LN2, "out")
expm1 = _unary_entry("expm1", np.expm1, "Expm1Backward0", lambda g, out: g * (out + 1), "out",
                     onnx=ox.expm1)
log2 = _unary_entry("log2", np.log2, "Log2Backward0", lambda g, a: g / (a * _LN2),
                    domain=(0.1, 3.0), onnx=ox.log_base(2.0))
log10 = _unary_entry("log10", np.log10, "Log10Backward0", lambda g, a: g / (a * _LN10),
                     domain=(0.1, 3.0), onnx=ox.log_base(10.0))
log1p = _unary_entry("log1p", np.log1p, "Log1PBackward0", lambda g, a: g / (a + 1),
                     domain=(-0.5, 3.0), onnx=ox.log1p)
rsqrt = _unary_entry("rsqrt", lambda a: 1 / np.sqrt(a), "RsqrtBackward0",
                     lambda g, out: -0.5 * g * out * out * out, "out", domain=(0.2, 3.0),
                     lowering=lambda v, a: v.unary("rsqrt", a),
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
                     # complex: the factored form keeps PyTorch's branch of the root
                     lambda g, a: g * ((a - 1).rsqrt() * (a + 1).rsqrt() if a.is_complex()
                                       else (a * a - 1).rsqrt()), domain=(1.2, 3.0),
                     inplace_node="AcoshBackward1", onnx="Acosh")
atanh = _unary_entry("atanh", np.arctanh, "AtanhBackward0", lambda g, a: g / (1 - a * a),
                     domain=(-0.9, 0.9), inplace_node="AtanhBackward1", onnx="Atanh")
erf = _unary_entry("erf", _special_kernels.erf, "ErfBackward0",
                   lambda g, a: g * _TWO_OVER_SQRT_PI * (-(a * a)).exp(), onnx="Erf",
                   lowering=lambda v, a: v.unary("erf", a))
erfc = _unary_entry("erfc", _special_kernels.erfc, "ErfcBackward0",
                    lambda g, a: -g * _TWO_OVER_SQRT_PI * (-(a * a)).exp(),
                    lowering=lambda v, a: v.unary("erfc", a))
# Existing entries get their in-place forms too.
for _op in (exp, tanh, sigmoid, sqrt):
    inplace_variant(_op, _op.name + "_")
for _op in (log, sin, cos):
    inplace_variant(_op, _op.name + "_", saves_self=True)


def _abs_inplace_kernel(a):
    if a.dtype.kind == "c":  # the modulus is real: it does not go back into `a`
        raise RuntimeError("In-place abs is not supported for complex tensors.")
    return _abs_kernel(a)


_abs_inplace_kernel.ufunc = np.abs
inplace_variant(abs_, "abs_", saves_self=True, kernel=_abs_inplace_kernel)


def _neg_inplace_kernel(a):
    if a.dtype.kind == "b":  # (the public neg says so before its kernel; neg_ reaches here)
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. "
                           "If you are trying to invert a mask, use the `~` or "
                           "`logical_not()` operator instead.")
    return np.negative(a)


_neg_inplace_kernel.ufunc = np.negative
neg_ = inplace_variant(neg, "neg_", kernel=_neg_inplace_kernel)
pow_ = inplace_variant(pow_scalar, "pow_.Scalar", saves_self=True)
reciprocal_ = inplace_variant(reciprocal, "reciprocal_")
relu_ = inplace_variant(relu, "relu_", write_into=_relu_write_into)


def _zero(g, *rest):
    return (g * 0,) + (None,) * len(rest)


def _not_for(kernel: str, a, kinds: str) -> None:
    """PyTorch's error for a rounding of a dtype its CPU kernel `kernel` has no code for."""
    d = dtype_of(a)
    if np.dtype(d.np).kind in kinds:
        raise not_implemented_for(kernel, d)


def _rounding(name, ufunc, node, onnx=None):
    def kernel(a):
        if a.dtype.kind in "biu":
            _not_for(f"{name}_vml_cpu", a, "b")  # integers are their own rounding
            return a.copy()
        return unary_kernel(ufunc, to_float=False)(a)

    def meta(a):
        _not_for(f"{name}_vml_cpu", a, "b")
        return Spec(tuple(a.shape), a.dtype)

    op = register(name, kernel=kernel, meta=meta, node=node,
                  derivative=_zero, zero_grad=True, samples=unary_samples(domain=(-3.0, 3.0)),
                  onnx=onnx)
    inplace_variant(op, name + "_")
    return op


floor = _rounding("floor", np.floor, "FloorBackward0", onnx="Floor")
ceil = _rounding("ceil", np.ceil, "CeilBackward0", onnx="Ceil")
round_ = _rounding("round", np.round, "RoundBackward0", onnx="Round")  # both half to even
trunc = _rounding("trunc", np.trunc, "TruncBackward0", onnx=ox.trunc)
def _sgn_kernel(a):
    return sgn_complex(a) if a.dtype.kind == "c" else real_sign(a)


def _sgn_derivative(g, a):
    return sgn_complex_derivative(g, a) if a.is_complex() else (g * 0,)


sgn = register(
    "sgn", kernel=_sgn_kernel, meta=unary_meta(to_float=False), node="SgnBackward0",
    # Real samples (the decomposition suite's losses are real); tests/test_complex_fft.py
    # checks complex sgn against PyTorch.
    derivative=_sgn_derivative, save=lambda out, a: (a,), samples=unary_samples(),
    decomposition=lambda a: a.sign() if not a.is_complex() else a / (a.abs() + (a == 0)))
sign_ = inplace_variant(sign, "sign_")
sgn_ = inplace_variant(sgn, "sgn_", saves_self=True)


def _round_decimals_meta(a, decimals):
    # PyTorch has no integer or complex kernel here (decimals=0 takes plain round's, named
    # so).
    _not_for("round_vml_cpu" if decimals == 0 else "round_cpu", a, "biuc")
    return Spec(tuple(a.shape), a.dtype)


def _round_decimals_kernel(a, decimals):
    _round_decimals_meta(a, decimals)
    if a.dtype in HALF:  # scaled, rounded and scaled back in float32, rounded once
        return np.round(a.astype(F32), decimals).astype(a.dtype)
    return np.round(a, decimals)


round_decimals = register(
    "round.decimals", kernel=_round_decimals_kernel,
    meta=_round_decimals_meta, node="RoundBackward1",
    derivative=lambda g: (g * 0, None), zero_grad=True, public="round",
    result_order="operands",
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt, (-30, 30)), d), name=f"{s} {d}")
                             for s in ((3, 4), ()) for d in (1, 2, -1)])
round_decimals_ = inplace_variant(round_decimals, "round_.decimals")


def _frac_kernel(a):
    if a.dtype.kind in "biuc":
        raise not_implemented_for("frac_cpu", a.dtype)
    return a - np.trunc(a)


def _frac_meta(a):
    if a.dtype.category != _dtype.FLOAT:
        raise not_implemented_for("frac_cpu", a.dtype)
    return unary_meta(to_float=False)(a)


frac = register(
    "frac", kernel=_frac_kernel, meta=_frac_meta, node="FracBackward0",
    derivative=lambda g: (g,), samples=unary_samples(domain=(-3.0, 3.0)),
    decomposition=lambda a: a - a.trunc(), onnx=ox.frac)
frac_ = inplace_variant(frac, "frac_")


def _nan_to_num_kernel(a, nan=None, posinf=None, neginf=None):
    if a.dtype.kind in "biu":
        return a.copy()
    dt = a.dtype
    src = a
    if dt in HALF:  # replaced in float32 by the half type's own extremes, then rounded
        import ml_dtypes  # loaded already: a half type exists

        big = ml_dtypes.finfo(dt)
        a = a.astype(F32)
    else:
        big = np.finfo(dt)
    out = np.nan_to_num(a, nan=0.0 if nan is None else nan,
                        posinf=float(big.max) if posinf is None else posinf,
                        neginf=float(big.min) if neginf is None else neginf)
    if not out.size:  # (PyTorch's result is `empty_like(a)`)
        return laid_like(out.astype(dt), src)
    return out.astype(dt, copy=False)


def _nan_to_num_samples(rng, dtype):
    x = rand_array(rng, (3, 4), dtype)
    x[0, 0], x[1, 1], x[2, 2] = np.nan, np.inf, -np.inf
    return [Sample((x,)), Sample((x.copy(), 1.5, 2.0, -3.0)), Sample((x[:0],)),
            Sample((rand_array(rng, (), dtype),))]


nan_to_num = register(
    "nan_to_num", kernel=_nan_to_num_kernel,
    meta=lambda a, *r: Spec(tuple(a.shape), a.dtype), node="NanToNumBackward0",
    derivative=lambda g, a: (g * a.isfinite(), None, None, None),
    save=real_grad_only("nan_to_num", lambda out, a, *r: (a,)), samples=_nan_to_num_samples,
    result_order="operands",
    onnx=ox.nan_to_num)
nan_to_num_ = inplace_variant(nan_to_num, "nan_to_num_", saves_self=True)


def _predicate(name, ufunc):
    def kernel(a):
        if a.dtype.kind in "biu":
            return np.zeros(a.shape, bool) if name != "isfinite" else np.ones(a.shape, bool)
        return ufunc(a)

    def samples(rng, dtype):
        x = rand_array(rng, (3, 4), dtype)
        if x.dtype.kind == "f":  # (an integer dtype holds no NaN: the samples as they are)
            x[0, 0], x[1, 1], x[2, 2] = np.nan, np.inf, -np.inf
        return [Sample((x,)), Sample((rand_array(rng, (0, 2), dtype),)),
                Sample((np.arange(4),), name="int")]

    return register(name, kernel=kernel, meta=lambda a: Spec(tuple(a.shape), _dtype.bool_),
                    differentiable=False, samples=samples, onnx=ox.float_predicate(name),
                    result_order="operands", lowering=lambda v, a: v.float_class(name, a))


isnan = _predicate("isnan", np.isnan)
isinf = _predicate("isinf", np.isinf)
isfinite = _predicate("isfinite", np.isfinite)


# PyTorch's CPU kernel has no complex form (its vectorised erfc's).
for _op in (erfc, REGISTRY["erfc_"]):
    refuse_dtypes(_op, "erfc_vml_cpu", "c")
