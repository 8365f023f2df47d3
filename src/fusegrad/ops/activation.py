"""Activation functions: gelu, silu, softplus, leaky_relu, elu (selu), hardtanh, hardsigmoid,
hardswish, mish and log_sigmoid, with their in-place forms.

`nn.functional` calls these entries (through `fusegrad._functions`); their names, arguments
and backward nodes are ATen's.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype
from .._dispatch import call
from .._shapes import elem_strides, strided_empty
from ..autograd.grad_mode import is_grad_enabled, no_grad
from . import _native, _special_kernels
from . import _onnx as ox
from ._onnx import clip, gelu_formula, onnx_op
from ._util import (
    F32,
    F64,
    HALF,
    c_contiguous,
    c_gradient,
    checked_scalar,
    half_formula,
    half_in_float32,
    not_implemented_for,
    numpy_backward,
    rand_array,
    unary_meta,
    unary_samples,
    wrap_grad,
)
from .activation_backward import (
    backward_meta,
    backward_samples,
    check_leaky_result_slope,
    first_order_kernel,
    hardtanh_backward,
    leaky_relu_backward,
)
from .arithmetic import not_implemented_derivative
from .registry import Sample, inplace_variant, register
from .scalar import mul_scalar

_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _float_kernel(fn, cpu_name: str | None = None, complex_ok: bool = False):
    """A kernel computing `fn(x, *params)` in x's float dtype (float32 for half types), and
    complex ones with `complex_ok`; any other dtype is PyTorch's NotImplementedError naming
    its kernel, `cpu_name` (by default fn's name, `_glu_np` -> "glu_cpu")."""
    name = cpu_name or fn.__name__.strip("_").removesuffix("_np") + "_cpu"

    def kernel(a, *params):
        if a.dtype.kind != "f" and a.dtype not in HALF and not (
                complex_ok and a.dtype.kind == "c"):
            raise not_implemented_for(name, a.dtype)
        x = a.astype(F32) if a.dtype in HALF else a
        return np.asarray(fn(x, *params)).astype(a.dtype, copy=False)

    return kernel


def real_grad_only(name: str, save):
    """An entry's `save` (run only when its node is recorded) refusing a complex result, as
    PyTorch refuses to differentiate `name` there (its forward computes it)."""

    def checked(out, *args):
        if out.dtype.is_complex:
            raise RuntimeError(f"{name} does not support automatic differentiation for outputs "
                               "with complex dtype.")
        return save(out, *args)

    return checked


def _checked_meta(cpu_name: str, complex_ok: bool = False):
    """`_meta` with `_float_kernel`'s dtype error (for fake tensors)."""

    def meta(a, *params):
        category = a.dtype.category
        if category != _dtype.FLOAT and not (complex_ok and category == _dtype.COMPLEX):
            raise not_implemented_for(cpu_name, a.dtype)
        return unary_meta(to_float=False)(a)

    return meta


def _in_c(name: str, x: np.ndarray, *scalars):
    """Kernel `name` of `native/math.c` over float32/float64 array x; None without it."""
    return _native.elementwise("math", name, (x,), scalars)


# The exp-based activations (elu, celu, softplus, mish) run in C on float32 from this many
# values (below, NumPy's passes cost less than the ctypes call; measured alternately in one
# process, e.g. celu at 256 values 10.6 against 5.8 us, mish at 512 9.6 against 16.5). Float64
# keeps NumPy's vectorised exp / expm1 / log1p: the C library's scalar ones are slower.
EXP_C_MIN = {"elu": 1024, "celu": 1024, "softplus": 256, "mish": 256}


def exp_family_in_c(name: str, x: np.ndarray, *scalars):
    """Exp-based activation `name` of `native/math.c` over float32 array x, where it pays
    (`EXP_C_MIN`); None elsewhere."""
    if x.dtype is not F32 or x.size < EXP_C_MIN[name]:
        return None
    return _in_c(name, x, *scalars)


def exp_family_gradient(name: str, g, x, *scalars):
    """The C gradient `name` (`c_gradient`) of an exp-based activation at float32 input x
    (at any size: the recorded formula it replaces is several ops), or at a half type's,
    computed in float32 and rounded once as PyTorch's; None elsewhere."""
    if x.dtype is not _dtype.float32 and (x._data is None or x._data.dtype not in HALF):
        return None
    return c_gradient(name, g, x, *scalars)


def _meta(a, *params):
    return unary_meta(to_float=False)(a)


def _param_samples(*param_sets):
    def samples(rng, dt):
        out = unary_samples()(rng, dt)
        for params in param_sets:
            out.append(Sample((rand_array(rng, (3, 4), dt, (-3, 3)),) + params,
                              name=f"params {params}"))
        return out

    return samples


def _sigmoid_np(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))

# ---------------------------------------------------------------- gelu


def _gelu(x, approximate="none"):
    if approximate == "tanh":
        out = _in_c("gelu_tanh", x)
        if out is not None:
            return out
        cube = x * x * x
        return x * 0.5 * (np.tanh((x + cube * 0.044715) * _SQRT_2_OVER_PI) + 1)
    if approximate != "none":
        raise RuntimeError("approximate argument must be either none or tanh.")
    out = _in_c("gelu", x)
    if out is not None:
        return out
    return 0.5 * x * (1 + _special_kernels.erf(x * _SQRT_HALF))


def _gelu_derivative(g, x, approximate="none"):
    grad = c_gradient("gelu_tanh_grad" if approximate == "tanh" else "gelu_grad", g, x)
    if grad is not None:  # one C pass instead of ten recorded ops
        return (grad, None)
    if is_grad_enabled():  # create_graph: PyTorch's node, GeluBackwardBackward0
        return (call(gelu_backward, g, x, approximate), None)
    if approximate == "tanh" and numpy_backward(g, x, halves=True) and \
            g._data.dtype is x._data.dtype and x._data.dtype is not F64:
        return (wrap_grad(_gelu_tanh_grad_np(g._data, x._data)), None)
    return (half_formula(_gelu_tanh_formula if approximate == "tanh" else _gelu_formula, g, x),
            None)


# The saturation of PyTorch's float32 tanh inside gelu's gradient (`native/math.c`).
_TANH_SATURATES_F32 = np.float32(8.664339742)


def _fma_f32(a: np.ndarray, b, c) -> np.ndarray:
    """float32 a * b + c rounded once: the product of two float32 values is exact in float64,
    so only the sum is rounded twice (to float64, then float32), which changes a result
    about once in 2^29."""
    return (a.astype(F64) * b + c).astype(F32)


def _gelu_tanh_grad_np(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    """`native/math.c`'s gelu_tanh_grad (PyTorch's order, its fused multiply-adds) in NumPy,
    for a float32 or half type x (computed in float32, rounded once), without a C compiler:
    the recorded formula's NumPy float32 tanh, not correctly rounded, left a third of the
    float32 and 2-3% of the half-type gradients an ulp off the C kernel's."""
    dt = x.dtype
    if dt in HALF:
        g, x = g.astype(F32), x.astype(F32)
    f = F32.type
    x2 = x * x
    inner = f(_SQRT_2_OVER_PI) * _fma_f32(x2 * x, f(0.044715), x)
    # tanh in float64 rounded once (fg_tanhf's result), ±1 past PyTorch's saturation
    t = np.tanh(inner.astype(F64)).astype(F32)
    t = np.where(inner > _TANH_SATURATES_F32, f(1),
                 np.where(inner < -_TANH_SATURATES_F32, f(-1), t))
    slope = f(_SQRT_2_OVER_PI) * _fma_f32(x2, f(3) * f(0.044715), f(1))
    out = g * ((f(1) + t) * f(0.5) + ((x * f(0.5)) * _fma_f32(-t, t, f(1))) * slope)
    return out.astype(dt, copy=False)


def _gelu_tanh_formula(g, x):
    inner = _SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
    t = inner.tanh()
    d_inner = _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x)
    return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * d_inner)


def _gelu_formula(g, x):
    cdf = 0.5 * (1 + (x * _SQRT_HALF).erf())
    pdf = (-0.5 * x * x).exp() * _INV_SQRT_2PI
    return g * (cdf + x * pdf)


def _gelu_onnx(b, inputs, args, kwargs, opset):
    """Gelu from opset 20; before, its erf (or tanh) formula."""
    approximate = args[1] if len(args) > 1 else "none"
    if opset >= 20:
        return b.emit("Gelu", [inputs[0]], approximate=approximate)
    return gelu_formula(b, inputs[0], approximate)


def _gelu_decomposition(x, approximate="none"):
    if approximate == "tanh":
        inner = (x + x * x * x * 0.044715) * _SQRT_2_OVER_PI
        return x * 0.5 * (inner.tanh() + 1)
    return x * 0.5 * ((x * _SQRT_HALF).erf() + 1)


def _gelu_lowering(v, x, approximate="none"):
    """Both forms as loop IR, in the kernel's order of operations."""
    if approximate == "none":
        return v.mul(v.mul(x, 0.5), v.add(v.unary("erf", v.mul(x, _SQRT_HALF)), 1))
    if approximate != "tanh":
        return v.unsupported("gelu's approximate must be none or tanh")
    cube = v.mul(v.mul(x, x), x)
    inner = v.mul(v.add(x, v.mul(cube, 0.044715)), _SQRT_2_OVER_PI)
    return v.mul(v.mul(x, 0.5), v.add(v.unary("tanh", inner), 1))


gelu = register(
    "gelu", kernel=_float_kernel(_gelu, "GeluKernelImpl"),
    meta=_checked_meta("GeluKernelImpl"), node="GeluBackward0",
    derivative=_gelu_derivative, save=lambda out, a, approximate="none": (a, approximate),
    decomposition=half_in_float32(_gelu_decomposition),
    samples=_param_samples(("tanh",), ("none",)), onnx=_gelu_onnx,
    lowering=_gelu_lowering,
    saved_names=("self", "approximate"))


def _gelu_second(x, approximate):
    """gelu's second derivative at x, as tensor ops."""
    if approximate == "tanh":
        # inner u = sqrt(2/pi) (x + 0.044715 x^3), t = tanh(u):
        # (1 - t^2) (u' - x t u'^2 + x u'' / 2)
        inner = _SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
        t = inner.tanh()
        slope = _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x)
        curve = _SQRT_2_OVER_PI * 6 * 0.044715 * x
        return (1 - t * t) * (slope - x * t * slope * slope + 0.5 * x * curve)
    pdf = (-0.5 * x * x).exp() * _INV_SQRT_2PI
    return pdf * (2 - x * x)


def _gelu_backward_derivative(gg, g, x, approximate="none"):
    return (call(gelu_backward, gg, x, approximate), gg * g * _gelu_second(x, approximate), None)


gelu_backward = register(
    "gelu_backward", kernel=first_order_kernel(_gelu_derivative), meta=backward_meta,
    node="GeluBackwardBackward0", derivative=_gelu_backward_derivative,
    save=lambda out, g, x, approximate="none": (g, x, approximate),
    samples=backward_samples(("none",), ("tanh",)), public="gelu_backward",
    decomposition=lambda g, x, approximate="none": half_formula(
        _gelu_tanh_formula if approximate == "tanh" else _gelu_formula, g, x),
    saved_names=("grad_output", "self", "approximate"), result_order="operands")

# ---------------------------------------------------------------- silu, mish, softplus


def _silu(x):
    if x.dtype.kind == "c":  # PyTorch's complex silu: x / (1 + exp(-x))
        return x / (1 + np.exp(-x))
    out = _in_c("silu", x)
    return x * _sigmoid_np(x) if out is None else out


def _silu_derivative(g, x):
    grad = c_gradient("silu_grad", g, x)
    if grad is not None:
        return (grad,)
    return (half_formula(_silu_formula, g, x),)


def _silu_formula(g, x):
    s = x.sigmoid()
    return g * s * (1 + x * (1 - s))


silu = register(
    "silu", kernel=_float_kernel(_silu, "silu_cpu", complex_ok=True),
    meta=_checked_meta("silu_cpu", complex_ok=True), node="SiluBackward0",
    derivative=_silu_derivative, save=real_grad_only("silu", lambda out, a: (a,)),
    samples=unary_samples(), decomposition=half_in_float32(lambda x: x * x.sigmoid()),
    lowering=lambda v, a: v.mul(a, v.unary("sigmoid", a)),
    onnx=lambda b, inputs, args, kwargs, opset: b.emit(
        "Mul", [inputs[0], b.emit("Sigmoid", [inputs[0]])]),
    saved_names=("self",))
silu_ = inplace_variant(silu, "silu_", saves_self=True)


def _softplus_np(x, beta=1, threshold=20):
    out = exp_family_in_c("softplus", x, beta, threshold)
    if out is not None:
        return out
    bx = x * beta
    return np.where(bx > threshold, x, np.logaddexp(0, bx) / beta)


def _softplus_derivative(g, x, beta, threshold):
    grad = exp_family_gradient("softplus_grad", g, x, beta, threshold)
    if grad is not None:
        return (grad, None, None)
    if is_grad_enabled():  # create_graph: PyTorch's node, SoftplusBackwardBackward0
        return (call(softplus_backward, g, x, beta, threshold), None, None)

    def formula(g, x):
        bx = x * beta  # (a NaN input gets NaN, as PyTorch's: only bx > threshold passes g)
        return g * bx.new_ones(()).where(bx > threshold, bx.sigmoid())

    return (half_formula(formula, g, x), None, None)


def _softplus_onnx(b, inputs, args, kwargs, opset):
    """Softplus(beta x) / beta, and x itself where beta x > threshold."""
    beta, threshold = (list(args[1:3]) + [1, 20][len(args) - 1:])[:2]
    x = inputs[0]
    scaled = b.emit("Mul", [x, b.operand(beta, b.out_dtype)])
    soft = b.emit("Div", [b.emit("Softplus", [scaled]), b.operand(beta, b.out_dtype)])
    big = b.emit("Greater", [scaled, b.operand(threshold, b.out_dtype)], dtype=np.bool_)
    return b.emit("Where", [big, x, soft])


def _softplus_decomposition(x, beta=1, threshold=20):
    bx = x * beta
    return x.where(bx > threshold, bx.exp().log1p() / beta)


softplus = register(
    "softplus", kernel=_float_kernel(_softplus_np, "softplus_cpu"),
    meta=_checked_meta("softplus_cpu"), node="SoftplusBackward0",
    derivative=_softplus_derivative, decomposition=half_in_float32(_softplus_decomposition),
    save=lambda out, a, beta=1, threshold=20: (a, beta, threshold),
    samples=_param_samples((2.0, 1.0), (0.5, 20)), onnx=_softplus_onnx,
    saved_names=("self", "beta", "threshold"))


def _softplus_backward_derivative(gg, g, x, beta, threshold):
    bx = x * beta
    s = bx.sigmoid()
    # beta s (1 - s) where beta x <= threshold, its last factor by mul.Scalar as PyTorch's
    second = (gg * g * s * (1 - s)).where(bx <= threshold, x.new_zeros(()))
    return (call(softplus_backward, gg, x, beta, threshold), call(mul_scalar, second, beta),
            None, None)


softplus_backward = register(
    "softplus_backward", kernel=first_order_kernel(_softplus_derivative), meta=backward_meta,
    node="SoftplusBackwardBackward0", derivative=_softplus_backward_derivative,
    save=lambda out, g, x, beta, threshold: (g, x, beta, threshold),
    samples=backward_samples((2.0, 1.0), (0.5, 20.0)), public="softplus_backward",
    saved_names=("grad_output", "self", "beta", "threshold"), result_order="operands")


def _mish(x):
    out = exp_family_in_c("mish", x)
    return x * np.tanh(np.logaddexp(0, x)) if out is None else out


def _mish_derivative(g, x):
    grad = exp_family_gradient("mish_grad", g, x)
    if grad is not None:
        return (grad,)
    return (half_formula(_mish_formula, g, x),)


def _mish_formula(g, x):
    t = (x.exp().log1p()).tanh()
    return g * (t + x * x.sigmoid() * (1 - t * t))


mish = register(
    "mish", kernel=_float_kernel(_mish, "mish_cpu"),
    meta=_checked_meta("mish_cpu"), node="MishBackward0",
    derivative=_mish_derivative, save=lambda out, a: (a,), samples=unary_samples(),
    decomposition=half_in_float32(lambda x: x * x.exp().log1p().tanh()), onnx=ox.mish)
mish_ = inplace_variant(mish, "mish_", saves_self=True)

# ---------------------------------------------------------------- leaky_relu, elu


# Below this many values NumPy's leaky_relu (two passes) costs less than the C kernel's
# ctypes call (measured alternately in one process: 16 values 7.4 against 10.0 us, 1,024
# values 10.4 against 11.9, 4,096 values 9.9 against 7.5).
LEAKY_C_MIN = 4096


def _leaky(x, slope=0.01):
    out = _in_c("leaky_relu", x, slope) if x.size >= LEAKY_C_MIN else None
    return np.where(x > 0, x, x * slope) if out is None else out


def _leaky_derivative(g, x, slope):
    grad = c_gradient("leaky_relu_grad", g, x, slope)
    if grad is not None:
        return (grad, None)
    if is_grad_enabled():  # create_graph: PyTorch's node, through the input
        return (call(leaky_relu_backward, g, x, slope, False), None)
    return (g * (x > 0).where(x > 0, x.new_full((), slope)), None)


leaky_relu = register(
    "leaky_relu", kernel=_float_kernel(_leaky, "leaky_relu_cpu"),
    meta=_checked_meta("leaky_relu_cpu"), node="LeakyReluBackward0",
    derivative=_leaky_derivative,
    save=lambda out, a, slope=0.01: (a, slope), samples=_param_samples((0.2,), (-0.5,)),
    decomposition=half_in_float32(lambda x, slope=0.01: x.where(x > 0, x * slope)),
    lowering=lambda v, a, slope=0.01: v.where(v.compare("gt", a, 0), a, v.mul(a, slope)),
    onnx=onnx_op("LeakyRelu", alpha=(1, float)),
    saved_names=("self", "negative_slope"))
def _leaky_result_derivative(g, out, slope):
    check_leaky_result_slope(slope, True)
    if is_grad_enabled():  # create_graph: PyTorch's node, through the result
        return (call(leaky_relu_backward, g, out, slope, True), None)
    return (g * (out > 0).where(out > 0, out.new_full((), slope)), None)


leaky_relu_ = inplace_variant(
    leaky_relu, "leaky_relu_", node="LeakyReluBackward1",
    derivative=_leaky_result_derivative,
    save=lambda out, a, slope=0.01: (out, slope), samples=_param_samples((0.2,)))


def _elu(x, alpha=1.0, scale=1.0, input_scale=1.0):
    out = exp_family_in_c("elu", x, alpha, scale, input_scale)
    if out is not None:
        return out
    return np.where(x > 0, scale * x, scale * alpha * np.expm1(x * input_scale))


def _elu_derivative(g, x, alpha, scale, input_scale):
    grad = exp_family_gradient("elu_grad", g, x, alpha, scale, input_scale)
    if grad is not None:
        return (grad, None, None, None)
    if is_grad_enabled():  # create_graph: PyTorch's node, EluBackwardBackward0
        return (call(elu_backward, g, alpha, scale, input_scale, False, x), None, None, None)

    def formula(g, x):
        neg = (x * input_scale).exp() * (scale * alpha * input_scale)
        # (A NaN input takes the exp branch, NaN, as PyTorch's vectorised kernel.)
        return g * x.new_full((), scale).where(x > 0, neg)

    return (half_formula(formula, g, x), None, None, None)


def _elu_result_derivative(g, out, alpha, scale, input_scale):
    neg = (out + scale * alpha) * input_scale
    return (g * neg.where(out <= 0, out.new_full((), scale)), None, None, None)


def _elu_save(out, a, alpha=1.0, scale=1.0, input_scale=1.0):
    return (a, alpha, scale, input_scale)


_ELU_PARAMS = ((0.5,), (1.0, SELU_SCALE), (SELU_ALPHA, SELU_SCALE, 1.0), (2.0, 1.0, 0.5))
def _elu_decomposition(x, alpha=1.0, scale=1.0, input_scale=1.0):
    return (x * scale).where(x > 0, (x * input_scale).expm1() * (alpha * scale))


def _elu_onnx(b, inputs, args, kwargs, opset):
    """Elu; SELU's scale as a Mul after it (input_scale other than 1 is not mapped)."""
    alpha, scale, input_scale = (list(args[1:4]) + [1.0, 1.0, 1.0][len(args) - 1:])[:3]
    if input_scale != 1:
        b.fail("with input_scale != 1")
    out = b.emit("Elu", [inputs[0]], alpha=float(alpha))
    return out if scale == 1 else b.emit("Mul", [out, b.operand(scale, b.out_dtype)])


elu = register(
    "elu", kernel=_float_kernel(_elu, "elu_cpu"),
    meta=_checked_meta("elu_cpu"), node="EluBackward0",
    derivative=_elu_derivative, save=_elu_save, samples=_param_samples(*_ELU_PARAMS),
    onnx=_elu_onnx, decomposition=half_in_float32(_elu_decomposition),
    saved_names=("self", "alpha", "scale", "input_scale"))
elu_ = inplace_variant(
    elu, "elu_", node="EluBackward1", derivative=_elu_result_derivative,
    save=lambda out, a, alpha=1.0, scale=1.0, input_scale=1.0: (out, alpha, scale, input_scale),
    samples=_param_samples(*_ELU_PARAMS))


def _elu_backward_kernel(g, alpha, scale, input_scale, is_result, saved):
    """ATen's elu_backward: from the input (elu's derivative) or, with `is_result`, from
    the result (elu_'s)."""
    return _ELU_FIRST[bool(is_result)](g, saved, alpha, scale, input_scale)


_ELU_FIRST = {False: first_order_kernel(_elu_derivative),
              True: first_order_kernel(_elu_result_derivative)}


def _elu_backward_derivative(gg, g, alpha, scale, input_scale, is_result, saved):
    if is_result:  # (y + scale alpha) input_scale below 0: its slope input_scale
        slope = saved.new_full((), input_scale).where(saved <= 0, saved.new_zeros(()))
        second = gg * g * slope
    else:
        neg = (saved * input_scale).exp() * (scale * alpha * input_scale * input_scale)
        second = gg * g * saved.new_zeros(()).where(saved > 0, neg)
    return (call(elu_backward, gg, alpha, scale, input_scale, is_result, saved),
            None, None, None, None, second)


def _elu_backward_samples(rng, dt):
    out = []
    for alpha, scale, input_scale in ((1.0, 1.0, 1.0), (SELU_ALPHA, SELU_SCALE, 1.0),
                                      (2.0, 1.0, 0.5)):
        g, x = rand_array(rng, (3, 4), dt), rand_array(rng, (3, 4), dt, (-3, 3))
        out.append(Sample((g, alpha, scale, input_scale, False, x), name=f"self {alpha}"))
    y = rand_array(rng, (3, 4), dt, (-0.9, 2.0))
    out.append(Sample((rand_array(rng, (3, 4), dt), 1.0, 1.0, 1.0, True, y), name="result"))
    return out


elu_backward = register(
    "elu_backward", kernel=_elu_backward_kernel,
    meta=lambda g, alpha, scale, input_scale, is_result, saved: backward_meta(g, saved),
    node="EluBackwardBackward0", derivative=_elu_backward_derivative,
    save=lambda out, g, alpha, scale, input_scale, is_result, saved: (
        g, alpha, scale, input_scale, is_result, saved),
    samples=_elu_backward_samples, public="elu_backward",
    saved_names=("grad_output", "alpha", "scale", "input_scale", "is_result",
                 "self_or_result"), result_order="operands")

# ---------------------------------------------------------------- hard functions


def _hardtanh(x, lo=-1.0, hi=1.0):
    return np.clip(x, lo, hi)


def _hardtanh_check(dt, lo, hi) -> None:
    """hardtanh's own errors for dtype `dt` (a NumPy or fusegrad dtype): none for bool,
    clamp's for complex, and no negative limit for an unsigned type."""
    name = dt.name
    if name == "bool":
        raise RuntimeError("Bool inputs not supported for hardtanh")
    if name.startswith("complex"):
        raise NotImplementedError("clamp is not supported for complex types")
    if name == "uint8" and (_int_limit(lo) < 0 or _int_limit(hi) < 0):
        raise RuntimeError("cannot do hardtanh on an unsigned type with negative limits")


def _int_limit(v):
    """A limit as an integer dtype takes it: a finite float truncated toward zero."""
    return int(v) if v.__class__ is float and math.isfinite(v) else v


def _hardtanh_kernel(a, lo=-1.0, hi=1.0):
    dt = a.dtype
    if dt.kind not in "f" and dt not in HALF:
        _hardtanh_check(dt, lo, hi)
        # Integers: PyTorch clamps between the limits converted to the dtype (truncated,
        # an overflow error where they do not fit).
        lo, hi = (checked_scalar(_int_limit(v), dt) for v in (lo, hi))
        out = np.clip(a, lo, hi).astype(dt, copy=False)
    else:
        if dt is not np.dtype(np.float64):  # a limit beyond the dtype's range is an error
            checked_scalar(lo, dt), checked_scalar(hi, dt)
        out = _hardtanh_float(a, lo, hi)
    if not out.size:  # (PyTorch's empty result keeps the input's strides)
        return strided_empty(out, elem_strides(a))
    return out


_hardtanh_float = _float_kernel(_hardtanh)


def _hardtanh_meta(a, lo=-1.0, hi=1.0):
    _hardtanh_check(a.dtype, lo, hi)
    return _meta(a)


def _hardtanh_derivative(g, x, lo, hi):
    grad = c_gradient("hardtanh_grad", g, x, lo, hi)
    if grad is None and is_grad_enabled():  # create_graph: PyTorch's node
        return (call(hardtanh_backward, g, x, lo, hi), None, None)
    return (g * ((x > lo) * (x < hi)) if grad is None else grad, None, None)


hardtanh = register(
    "hardtanh", kernel=_hardtanh_kernel, meta=_hardtanh_meta, node="HardtanhBackward0",
    derivative=_hardtanh_derivative,
    save=lambda out, a, lo=-1.0, hi=1.0: (a, lo, hi),
    samples=_param_samples((-0.5, 2.0), (0.0, 6.0)),
    decomposition=lambda x, lo=-1.0, hi=1.0: x.clamp(lo, hi),
    onnx=lambda b, inputs, args, kwargs, opset: clip(
        b, inputs[0], *(list(args[1:3]) + [-1.0, 1.0][len(args) - 1:])[:2]),
    saved_names=("self", "min_val", "max_val"))
hardtanh_ = inplace_variant(hardtanh, "hardtanh_", saves_self=True)


_SIXTH = float(np.float32(1 / 6))  # PyTorch's kernel multiplies by a float32 constant


def _hardsigmoid(x):
    out = _in_c("hardsigmoid", x)
    return np.clip(x + 3, 0, 6) / 6 if out is None else out  # PyTorch's order


def _hardsigmoid_derivative(g, x):
    grad = c_gradient("hardsigmoid_grad", g, x)
    if grad is not None:
        return (grad,)
    if is_grad_enabled():  # create_graph: PyTorch's node, which has no derivative
        return (call(hardsigmoid_backward, g, x),)
    return (g * ((x > -3) * (x < 3)) * _SIXTH,)


hardsigmoid = register(
    "hardsigmoid", kernel=_float_kernel(_hardsigmoid, "hardsigmoid_cpu"),
    meta=_checked_meta("hardsigmoid_cpu"), node="HardsigmoidBackward0",
    derivative=_hardsigmoid_derivative, save=lambda out, a: (a,),
    decomposition=half_in_float32(lambda x: (x + 3).clamp(0, 6) / 6),
    samples=_param_samples(()), onnx=onnx_op("HardSigmoid", alpha=(0, lambda _: 1 / 6),
                                            beta=(0, lambda _: 0.5)))
hardsigmoid_ = inplace_variant(hardsigmoid, "hardsigmoid_", saves_self=True)
# ATen's hardsigmoid_backward has no derivative: a gradient taken with create_graph records
# its NotImplemented node, whose backward (a second derivative) raises, as PyTorch's.
hardsigmoid_backward = register(
    "hardsigmoid_backward", kernel=first_order_kernel(_hardsigmoid_derivative),
    meta=backward_meta, node="NotImplemented",
    derivative=not_implemented_derivative("hardsigmoid_backward"), gradcheck=False,
    samples=backward_samples(()), public="hardsigmoid_backward",
    decomposition=lambda g, x: g * ((x > -3) & (x < 3)) * _SIXTH, result_order="operands")


def _hardswish(x):
    out = _in_c("hardswish", x)
    return x * np.clip(x + 3, 0, 6) / 6 if out is None else out


def _hardswish_derivative(g, x):
    grad = c_gradient("hardswish_grad", g, x)
    if grad is not None:
        return (grad,)
    if is_grad_enabled():  # create_graph: PyTorch's node, HardswishBackwardBackward0
        return (call(hardswish_backward, g, x),)
    return (half_formula(_hardswish_formula, g, x),)


def _hardswish_formula(g, x):
    mid = x / 3 + 0.5  # PyTorch's: 0 up to -3 included, 1 from 3 on (and for NaN)
    return g * mid.where(x < 3, x.new_ones(())).where(~(x <= -3), x.new_zeros(()))


hardswish = register(
    "hardswish", kernel=_float_kernel(_hardswish, "hardswish_cpu"),
    meta=_checked_meta("hardswish_cpu"), node="HardswishBackward0",
    derivative=_hardswish_derivative, save=lambda out, a: (a,), samples=_param_samples(()),
    decomposition=half_in_float32(lambda x: x * (x + 3).clamp(0, 6) / 6),
    onnx=lambda b, inputs, args, kwargs, opset: b.emit("HardSwish", [inputs[0]]) if opset >= 14
    else b.emit("Mul", [inputs[0], b.emit("HardSigmoid", [inputs[0]], alpha=1 / 6, beta=0.5)]))
hardswish_ = inplace_variant(hardswish, "hardswish_", saves_self=True)


def _hardswish_backward_derivative(gg, g, x):
    # 1/3 between -3 and 3, selected by a mask of x, through which no gradient reaches x
    # (PyTorch's WhereBackward0; no node at all where neither gg nor g requires grad)
    inside = (x > -3) & (x < 3)
    return (call(hardswish_backward, gg, x), (gg * g / 3).where(inside, x.new_zeros(())))


hardswish_backward = register(
    "hardswish_backward", kernel=first_order_kernel(_hardswish_derivative),
    meta=backward_meta, node="HardswishBackwardBackward0",
    derivative=_hardswish_backward_derivative, save=lambda out, g, x: (g, x),
    samples=backward_samples(()), public="hardswish_backward",
    decomposition=lambda g, x: half_formula(_hardswish_formula, g, x),
    saved_names=("grad_output", "self"), result_order="operands")

# ---------------------------------------------------------------- log_sigmoid


def _log_sigmoid(x):
    return np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x)))


def _log_sigmoid_derivative(g, x):
    """sigmoid(-x) times the gradient as PyTorch's kernel forms it: from its forward's buffer
    z = exp(-|x|) (held in the input's dtype), (1 - z / (1 + z)) below 0 and z / (1 + z)
    from 0 on, times the gradient, in float32 for a half type and rounded once."""
    if is_grad_enabled():  # create_graph: PyTorch's node, LogSigmoidBackwardBackward0
        return (call(log_sigmoid_backward, g, x, (-x.detach().abs()).exp()),)
    return (_log_sigmoid_grad(g, x, (-x.abs()).exp()),)


def _log_sigmoid_grad(g, x, z):
    def formula(g, x, z):
        below = (x < 0).to(z.dtype)
        return (below - (below * 2 - 1) * (z / (z + 1))) * g

    return half_formula(formula, g, x, z)


def _log_sigmoid_backward_kernel(g, x, buffer):
    with no_grad():
        return _log_sigmoid_grad(wrap_grad(g), wrap_grad(x), wrap_grad(buffer))._data


def _log_sigmoid_backward_derivative(gg, g, x, buffer):
    s = x.sigmoid()  # d/dx sigmoid(-x) = -s (1 - s)
    return (call(log_sigmoid_backward, gg, x, buffer), gg * g * (s * (s - 1)), None)


def _log_sigmoid_backward_samples(rng, dt):
    x = rand_array(rng, (3, 4), dt, (-3, 3))
    return [Sample((rand_array(rng, (3, 4), dt), x, np.exp(-np.abs(x))), name="(3, 4)")]


# ATen's log_sigmoid_forward also returns a buffer that is not differentiable; fusegrad
# registers the one-output composite, which records the same node.
log_sigmoid = register(
    "log_sigmoid", kernel=c_contiguous(_float_kernel(_log_sigmoid, "log_sigmoid_cpu")),
    meta=_checked_meta("log_sigmoid_cpu"),
    node="LogSigmoidBackward0", result_order="contiguous",
    derivative=_log_sigmoid_derivative, save=lambda out, a: (a,),
    samples=unary_samples(), onnx=ox.log_sigmoid,
    decomposition=half_in_float32(lambda x: x.clamp(max=0) - (-x.abs()).exp().log1p()))

# ATen's log_sigmoid_backward(grad_output, self, buffer), the buffer exp(-|x|) its forward
# returns; its derivative gives the buffer none.
log_sigmoid_backward = register(
    "log_sigmoid_backward", kernel=_log_sigmoid_backward_kernel,
    meta=lambda g, x, buffer: backward_meta(g, x), node="LogSigmoidBackwardBackward0",
    derivative=_log_sigmoid_backward_derivative,
    save=lambda out, g, x, buffer: (g, x, buffer),
    samples=_log_sigmoid_backward_samples, public="log_sigmoid_backward", nondiff_args=(2,),
    gradcheck=False,  # its kernel reads x only by its sign: the buffer carries the values
    saved_names=("grad_output", "self", "buffer"), result_order="operands")
