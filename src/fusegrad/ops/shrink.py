"""More activations: celu, softshrink, hardshrink, threshold, glu, `_prelu_kernel` and
`rrelu_with_noise`, with the in-place forms PyTorch has (`celu_`, `threshold_`,
`rrelu_with_noise_`). Names, arguments and backward nodes are ATen's; `nn.functional`
calls them (see `nn/_functional_activation.py`).
"""

from __future__ import annotations

import numpy as np

from .. import _random_draws as draws
from .._dispatch import call
from .._random import generator_or_default
from ..autograd.grad_mode import is_grad_enabled, no_grad
from . import _onnx as ox
from ._util import (
    c_contiguous,
    half_formula,
    not_implemented_for,
    rand_array,
    wrap_dim,
    wrap_grad,
)
from .activation import (
    _float_kernel,
    _meta,
    _param_samples,
    elu_backward,
    exp_family_gradient,
    exp_family_in_c,
)
from .activation_backward import backward_meta, first_order_kernel, threshold_backward
from .registry import Sample, Spec, inplace_variant, register


def _c_float(dt) -> str:
    return {"float32": "Float", "float64": "Double", "float16": "Half",
            "bfloat16": "BFloat16"}.get(dt.name, dt.name)


# ---------------------------------------------------------------- celu


def _celu(x, alpha=1.0):
    out = exp_family_in_c("celu", x, alpha)
    return np.where(x > 0, x, alpha * np.expm1(x / alpha)) if out is None else out


def _celu_derivative(g, x, alpha):
    # elu's derivative with input_scale 1/alpha: exp(x / alpha) below zero
    grad = exp_family_gradient("celu_grad", g, x, alpha)
    if grad is not None:
        return (grad, None)
    if is_grad_enabled():  # create_graph: PyTorch's node, elu's EluBackwardBackward0
        return (call(elu_backward, g, alpha, 1.0, 1.0 / alpha, False, x), None)
    return (half_formula(lambda g, x: g * x.new_ones(()).where(x > 0, (x / alpha).exp()), g, x),
            None)


def _celu_meta(a, alpha=1.0):
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return _meta(a)


celu = register(
    "celu", kernel=_float_kernel(_celu, "elu_cpu"), meta=_celu_meta, node="CeluBackward0",
    derivative=_celu_derivative,
    save=lambda out, a, alpha=1.0: (a, alpha), samples=_param_samples((0.5,), (2.0,)),
    saved_names=("self", "alpha"), onnx=ox.celu,
    decomposition=lambda x, alpha=1.0: x.where(x > 0, (x / alpha).expm1() * alpha))
celu_ = inplace_variant(
    celu, "celu_", node="CeluBackward1",
    derivative=lambda g, out, alpha: (
        g * (out / alpha + 1).where(out <= 0, out.new_ones(())), None),
    save=lambda out, a, alpha=1.0: (out, alpha), saved_names=("result", "alpha"))

# ---------------------------------------------------------------- shrink and threshold


def _check_lambd(a, lambd):
    if lambd < 0:
        dt = a.dtype if isinstance(a.dtype, np.dtype) else a.dtype.np
        top = np.finfo(dt).max if dt.kind == "f" else np.finfo(np.float32).max
        raise RuntimeError(f"lambda must be in range [0, {top:g}] for input dtype "
                           f"{_c_float(a.dtype)}, but found {lambd:g}")


def _inside(x, lambd):
    """Where |x| <= lambd, as PyTorch's shrinks test it: a NaN is outside (kept), not
    zeroed. (Their backward zeroes a NaN's gradient in its vectorized loop, the bulk of a
    float32/float64 tensor, and passes it in the scalar tail and for half types: the
    derivatives keep the vectorized loop's `|x| > lambd`.)"""
    return (x >= -lambd) & (x <= lambd)


def _softshrink(x, lambd=0.5):
    return np.where(_inside(x, lambd), 0, np.where(x > 0, x - lambd, x + lambd))


def _softshrink_meta(a, lambd=0.5):
    _check_lambd(a, lambd)
    return _meta(a)


def _softshrink_kernel(a, lambd=0.5):
    _check_lambd(a, lambd)  # the fast path runs no meta
    return _float_kernel(_softshrink, "softshrink_check")(a, lambd)


def _softshrink_derivative(g, x, lambd):
    if is_grad_enabled():  # create_graph: PyTorch's node, SoftshrinkBackwardBackward0
        return (call(softshrink_backward, g, x, lambd), None)
    return (g * (x.abs() > lambd), None)


def _hardshrink_derivative(g, x, lambd):
    if is_grad_enabled():  # create_graph: PyTorch's node, HardshrinkBackwardBackward0
        return (call(hardshrink_backward, g, x, lambd), None)
    return (g * ((x > lambd) | (x < -lambd)), None)


def _shrink_backward_derivative(op):
    """The derivative of a shrink's backward op: linear in the gradient (the op itself), and
    zeros for the input, which do not require grad, as PyTorch's."""

    def derivative(gg, g, x, lambd):
        return (call(op(), gg, x, lambd), x.new_zeros(tuple(x.shape)), None)

    return derivative


softshrink = register(
    "softshrink", kernel=_softshrink_kernel, meta=_softshrink_meta,
    node="SoftshrinkBackward0",
    derivative=_softshrink_derivative,
    save=lambda out, a, lambd=0.5: (a, lambd), samples=_param_samples((0.5,), (1.5,)),
    saved_names=("self", "lambd"),
    decomposition=lambda x, lambd=0.5: x.new_zeros(()).where(
        _inside(x, lambd), (x - lambd).where(x > 0, x + lambd)), result_order="operands",
    onnx=ox.shrink(True))


def _hardshrink(x, lambd=0.5):
    return np.where(_inside(x, lambd), 0, x)


hardshrink = register(
    "hardshrink", kernel=_float_kernel(_hardshrink), meta=lambda a, lambd=0.5: _meta(a),
    node="HardshrinkBackward0",
    derivative=_hardshrink_derivative,
    save=lambda out, a, lambd=0.5: (a, lambd), samples=_param_samples((0.5,), (1.5,)),
    saved_names=("self", "lambd"),
    decomposition=lambda x, lambd=0.5: x.new_zeros(()).where(_inside(x, lambd), x),
    result_order="operands", onnx=ox.shrink(False))


def _shrink_backward_kernel(keep):
    def kernel(g, x, lambd):
        mask = keep(x, lambd)
        return np.where(mask, g, np.zeros((), g.dtype)).astype(g.dtype, copy=False)

    return kernel


def _shrink_backward_samples(rng, dt):
    # inputs away from the kinks at +-lambd, where finite differences see a zero derivative
    x = rand_array(rng, (3, 4), dt, (0.7, 2.0)) * np.where(rng.random((3, 4)) < 0.5, -1, 1)
    small = rand_array(rng, (3, 4), dt, (-0.3, 0.3))
    x = np.where(rng.random((3, 4)) < 0.3, small, x).astype(dt)
    return [Sample((rand_array(rng, (3, 4), dt), x, 0.5), name="lambd 0.5")]


softshrink_backward = register(
    "softshrink_backward", meta=backward_meta, node="SoftshrinkBackwardBackward0",
    kernel=_shrink_backward_kernel(lambda x, lambd: np.abs(x) > lambd),
    derivative=_shrink_backward_derivative(lambda: softshrink_backward),
    save=lambda out, g, x, lambd: (g, x, lambd), samples=_shrink_backward_samples,
    public="softshrink_backward", saved_names=("grad_output", "self", "lambd"),
    result_order="operands")
hardshrink_backward = register(
    "hardshrink_backward", meta=backward_meta, node="HardshrinkBackwardBackward0",
    kernel=_shrink_backward_kernel(lambda x, lambd: (x > lambd) | (x < -lambd)),
    derivative=_shrink_backward_derivative(lambda: hardshrink_backward),
    save=lambda out, g, x, lambd: (g, x, lambd), samples=_shrink_backward_samples,
    public="hardshrink_backward", saved_names=("grad_out", "self", "lambd"),
    result_order="operands")


def _threshold_kernel(a, threshold, value):
    # `x <= threshold` selects the value, so a NaN input stays NaN (PyTorch's test).
    return np.where(a <= threshold, np.asarray(value).astype(a.dtype), a)


threshold = register(
    "threshold", kernel=_threshold_kernel, meta=lambda a, t, v: Spec(tuple(a.shape), a.dtype),
    node="ThresholdBackward0",
    derivative=lambda g, x, t: (call(threshold_backward, g, x, t) if is_grad_enabled()
                                else g.where(~(x <= t), 0.0), None, None),
    save=lambda out, a, t, v: (a, t),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), 0.1, 20.0), name=str(s))
                             for s in ((3, 4), (), (2, 0))],
    saved_names=("self", "threshold"),
    decomposition=lambda x, t, value: x.where(~(x <= t), value), onnx=ox.threshold)
# PyTorch's in-place node masks by the input before the write (a `value` above the threshold
# does not let the gradient through), so the input is kept.
threshold_ = inplace_variant(threshold, "threshold_", saves_self=True, node="ThresholdBackward1",
                             saved_names=("self", "threshold"))

# ---------------------------------------------------------------- glu


def _glu_meta(a, dim=-1):
    if a.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = wrap_dim(dim, a.dim())
    n = a.shape[d]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {n}")
    shape = list(a.shape)
    shape[d] = n // 2
    return Spec(tuple(shape), a.dtype)


def _glu_np(x, dim=-1):
    first, second = np.split(x, 2, axis=dim)
    return first / (1 + np.exp(-second))


def _glu_decomposition(x, dim=-1):
    half = x.shape[dim] // 2
    return x.narrow(dim, 0, half) * x.narrow(dim, half, half).sigmoid()


def _glu_derivative(g, x, dim):
    from .joins import cat

    if is_grad_enabled():  # create_graph: PyTorch's node, GluBackwardBackward0
        return (call(glu_backward, g, x, dim), None)
    first, second = x.chunk(2, dim)
    s = second.sigmoid()
    return (call(cat, [g * s, g * first * s * (1 - s)], dim), None)


glu = register(
    "glu", kernel=_float_kernel(_glu_np), meta=_glu_meta, node="GluBackward0",
    derivative=_glu_derivative, save=lambda out, a, dim=-1: (a, dim),
    samples=lambda rng, dt: [Sample((rand_array(rng, (4, 6), dt, (-3, 3)), d), name=f"dim {d}")
                             for d in (-1, 0)] + [
        Sample((rand_array(rng, (2, 6, 2), dt), 1), name="3-d")],
    saved_names=("self", "dim"), decomposition=_glu_decomposition, onnx=ox.glu,
    result_order="operands")



def _glu_backward_derivative(gg, g, x, dim):
    """glu_backward(g, x) = cat(g s, g a s (1 - s)) with x = cat(a, b), s = sigmoid(b):
    linear in g (its adjoint reads both halves of gg), and in x through a and s."""
    from .joins import cat

    a, b = x.chunk(2, dim)
    gg_a, gg_b = gg.chunk(2, dim)
    s = b.sigmoid()
    ds = s * (1 - s)
    grad_g = gg_a * s + gg_b * a * ds
    grad_a = gg_b * g * ds
    grad_b = gg_a * g * ds + gg_b * g * a * ds * (1 - 2 * s)
    return (grad_g, call(cat, [grad_a, grad_b], dim), None)


def _glu_backward_meta(g, x, dim):
    _glu_meta(x, dim)
    return Spec(tuple(x.shape), g.dtype)


glu_backward = register(
    "glu_backward", kernel=first_order_kernel(_glu_derivative), meta=_glu_backward_meta,
    node="GluBackwardBackward0", derivative=_glu_backward_derivative,
    save=lambda out, g, x, dim: (g, x, dim), public="glu_backward",
    samples=lambda rng, dt: [Sample((rand_array(rng, (4, 3), dt), rand_array(rng, (4, 6), dt),
                                     -1), name="dim -1"),
                             Sample((rand_array(rng, (2, 5), dt), rand_array(rng, (4, 5), dt),
                                     0), name="dim 0")],
    saved_names=("grad_output", "self", "dim"))

# ---------------------------------------------------------------- prelu


def _prelu_np(x, w):
    return np.where(x > 0, x, w * x)


def _prelu_kernel(x, w):
    return _float_kernel(_prelu_np)(x, w.astype(x.dtype, copy=False))


def _prelu_derivative(g, x, w):
    # the node sums the weight's gradient over the dims it was broadcast along
    if is_grad_enabled():  # create_graph: PyTorch's node, PreluKernelBackwardBackward0
        return tuple(call(prelu_kernel_backward, g, x, w))
    pos = x > 0
    return (g * w.new_ones(()).where(pos, w), g * x.new_zeros(()).where(pos, x))


def _prelu_samples(rng, dt):
    out = []
    for sx, sw in (((3, 4), (1, 4)), ((2, 3, 4), (1, 3, 1)), ((3, 4), (1, 1)), ((), ())):
        out.append(Sample((rand_array(rng, sx, dt), rand_array(rng, sw, dt, (0.05, 0.5))),
                          name=f"{sx} {sw}"))
    return out


prelu_kernel = register(
    "_prelu_kernel", kernel=_prelu_kernel,
    meta=lambda x, w: Spec(tuple(np.broadcast_shapes(tuple(x.shape), tuple(w.shape))),
                           x.dtype),
    node="PreluKernelBackward0", derivative=_prelu_derivative,
    save=lambda out, x, w: (x, w), samples=_prelu_samples, public="prelu",
    saved_names=("self", "weight"), decomposition=lambda x, w: x.where(x > 0, w * x),
    onnx=ox.prelu, result_order="operands")


def _prelu_backward_kernel(g, x, w):
    """ATen's _prelu_kernel_backward: the input's and the weight's gradients (the weight's
    at the broadcast shape), `_prelu_derivative`'s on the arrays."""
    with no_grad():
        gx, gw = _prelu_derivative(wrap_grad(g), wrap_grad(x), wrap_grad(w))
    return gx._data, gw._data


def _prelu_backward_meta(g, x, w):
    shape = tuple(np.broadcast_shapes(tuple(g.shape), tuple(x.shape), tuple(w.shape)))
    return [Spec(shape, g.dtype), Spec(shape, g.dtype)]


def _prelu_backward_derivative(grads, g, x, w):
    """In the gradient: both results' slopes; in x and w, where x <= 0, the other
    factor's product (PyTorch's WhereBackward0 nodes)."""
    ggx, ggw = grads
    pos = x > 0
    zero = x.new_zeros(())
    d_g = ggx * w.new_ones(()).where(pos, w) + ggw * zero.where(pos, x)
    return (d_g, zero.where(pos, ggw * g), zero.where(pos, ggx * g))


def _prelu_backward_samples(rng, dt):
    return [Sample((rand_array(rng, sx, dt), rand_array(rng, sx, dt),
                    rand_array(rng, sw, dt, (0.05, 0.5))), name=f"{sx} {sw}")
            for sx, sw in (((3, 4), (1, 4)), ((2, 3, 4), (1, 3, 1)), ((3, 4), (1, 1)))]


prelu_kernel_backward = register(
    "_prelu_kernel_backward", kernel=_prelu_backward_kernel, meta=_prelu_backward_meta,
    node="PreluKernelBackwardBackward0", derivative=_prelu_backward_derivative,
    save=lambda out, g, x, w: (g, x, w), samples=_prelu_backward_samples,
    public="_prelu_kernel_backward", saved_names=("grad_output", "self", "weight"))

# ---------------------------------------------------------------- rrelu


def _rrelu_np(x, noise, lower=0.125, upper=1 / 3, training=False, generator=None):
    if training:  # the functional drew the slopes into `noise`
        return x * noise
    return np.where(x >= 0, x, x * ((lower + upper) / 2))


def _rrelu_check(dt: np.dtype, training: bool) -> None:
    """PyTorch's dtype error for rrelu: training runs `rrelu_with_noise_out_cpu`, which has
    no float16 form; eval mode runs leaky_relu, which has both half types. Neither takes
    integers, bool or complex numbers."""
    if dt.kind == "f" and not (training and dt == np.float16) or dt.name == "bfloat16":
        return
    raise not_implemented_for("rrelu_with_noise_out_cpu" if training else "leaky_relu_cpu", dt)


def _rrelu_kernel(x, noise, lower=0.125, upper=1 / 3, training=False, generator=None):
    _rrelu_check(x.dtype, training)
    return _float_kernel(_rrelu_np)(x, noise, lower, upper, training)


def _rrelu_meta(x, noise, lower=0.125, upper=1 / 3, training=False, generator=None):
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    return Spec(tuple(x.shape), x.dtype)


def _rrelu_slope(x, noise, lower, upper, training):
    if training:
        return noise
    # PyTorch's eval mode is leaky_relu, whose backward passes the gradient only where
    # x > 0: at exactly zero the gradient is the mean slope, not 1
    return x.new_ones(()).where(x > 0, x.new_full((), (lower + upper) / 2))


def _rrelu_save(out, x, noise, lower=0.125, upper=1 / 3, training=False, generator=None):
    return (x, noise.detach(), lower, upper, training)


def _rrelu_samples(rng, dt):
    # The noise is an integer tensor here only because the oracle makes every float sample
    # require grad, which PyTorch refuses for `noise`; in eval mode it is not read.
    return [Sample((rand_array(rng, s, dt), np.zeros(s, np.int64), lo, hi, False), name=str(s))
            for s, lo, hi in (((3, 4), 0.125, 1 / 3), ((5,), 0.1, 0.3), ((), 0.2, 0.2))]


rrelu_with_noise = register(
    "rrelu_with_noise", kernel=c_contiguous(_rrelu_kernel), meta=_rrelu_meta,
    node="RreluWithNoiseBackward0",
    derivative=lambda g, x, noise, lo, hi, training: (
        g * _rrelu_slope(x, noise, lo, hi, training), None, None, None, None, None),
    save=_rrelu_save, samples=_rrelu_samples, nondiff_args=(1,), public="rrelu",
    saved_names=("self", "noise", "lower", "upper", "training"), result_order="contiguous")
rrelu_with_noise_ = inplace_variant(
    rrelu_with_noise, "rrelu_with_noise_", node="RreluWithNoiseBackward1",
    derivative=lambda g, out, noise, lo, hi, training: (
        g * _rrelu_slope(out, noise, lo, hi, training), None, None, None, None, None),
    save=lambda out, x, noise, lower=0.125, upper=1 / 3, training=False, generator=None: (
        out, noise.detach(), lower, upper, training),
    saved_names=("result", "noise", "lower", "upper", "training"))


def _rrelu_draw_np(x, noise, lower, upper, training, generator):
    """The noise `rrelu_with_noise` reads: in training, one float64 slope per element <= 0
    drawn in order from U(lower, upper) (the bounds as x's dtype holds them, float for the
    narrower ones), 1 for the others; otherwise the given noise, unchanged."""
    if not training:
        return np.array(noise, copy=True)
    bound = np.float64 if x.dtype == np.float64 else np.float32
    low, high = float(bound(lower)), float(bound(upper))
    drawn = np.asarray(x <= 0)
    slopes = np.ones(x.shape, np.float64)
    slopes[drawn] = draws.unit_double(generator_or_default(generator), int(drawn.sum())) \
        * (high - low) + low
    return slopes.astype(noise.dtype)


def _rrelu_functional_kernel(x, noise, lower=0.125, upper=1 / 3, training=False,
                             generator=None):
    # The draw is the kernel's own, so a traced graph draws what eager draws (and keeps the
    # node: `random`), as dropout's bernoulli_ does. A refused dtype draws nothing.
    _rrelu_check(x.dtype, training)
    noise_out = _rrelu_draw_np(x, noise, lower, upper, training, generator)
    return _rrelu_kernel(x, noise_out, lower, upper, training), noise_out


def _rrelu_functional_meta(x, noise, lower=0.125, upper=1 / 3, training=False,
                           generator=None):
    return [_rrelu_meta(x, noise, lower, upper, training),
            Spec(tuple(noise.shape), noise.dtype)]


def _rrelu_functional_derivative(grads, x, noise, lo, hi, training):
    g = grads[0] if isinstance(grads, (list, tuple)) else grads
    return (g * _rrelu_slope(x, noise, lo, hi, training), None, None, None, None, None)


def _rrelu_functional_samples(rng, dt):
    # Training draws (compared by shape: the op is random) and the deterministic eval mode.
    return [Sample((rand_array(rng, s, dt), np.zeros(s, dt), lo, hi, t),
                   name=f"{s} training={t}")
            for s, lo, hi, t in (((3, 4), 0.125, 1 / 3, True), ((5,), 0.1, 0.3, False),
                                 ((), 0.2, 0.2, True))]


# ATen's functional form: the result and the noise drawn for it (`noise_out`). F.rrelu draws
# its slopes through it, so capture and AOT record the draw as a graph op.
rrelu_with_noise_functional = register(
    "rrelu_with_noise_functional", kernel=_rrelu_functional_kernel,
    meta=_rrelu_functional_meta, node="RreluWithNoiseFunctionalBackward0",
    derivative=_rrelu_functional_derivative,
    # PyTorch's backward reads the noise it was given, not the one it drew (so it is not the
    # derivative of the result in training: no gradcheck); F.rrelu differentiates
    # rrelu_with_noise of the drawn noise instead.
    save=lambda out, x, noise, lower=0.125, upper=1 / 3, training=False, generator=None: (
        x, noise.detach(), lower, upper, training),
    samples=_rrelu_functional_samples, nondiff_args=(1,), nondiff_outputs=(1,), random=True,
    public="rrelu", saved_names=("self", "noise", "lower", "upper", "training"),
    gradcheck=False)

