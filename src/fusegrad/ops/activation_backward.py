"""The backward ops of the piecewise-linear activations, `threshold_backward` (relu,
threshold), `leaky_relu_backward` and `hardtanh_backward` (relu6), ops of their own as in
ATen, so that a gradient taken with `create_graph=True` records them: it then requires grad
through the saved input (`ThresholdBackwardBackward0` ...), whose own gradient is zero, as
PyTorch's. (Without create_graph the derivatives compute on arrays and record nothing.)

The smooth activations' backward ops (`gelu_backward`, `sigmoid_backward` ...) are registered
beside their forward ops, with kernels made here by `first_order_kernel`.
"""

from __future__ import annotations

import numpy as np

from .._dispatch import call
from ..autograd.grad_mode import no_grad
from ._util import Spec, broadcast_shapes, rand_array, wrap_grad
from .registry import Sample, register


def _zero(g: np.ndarray):
    return np.zeros((), g.dtype)


def _meta(g, x, *params):
    return Spec(broadcast_shapes(tuple(g.shape), tuple(x.shape)), g.dtype)


def backward_meta(g, x, *params):
    """A backward op's result: the shape of its gradient and saved tensor broadcast, the
    gradient's dtype."""
    return _meta(g, x, *params)


def first_order_kernel(first):
    """The kernel of a backward op (`gelu_backward(grad, self)`, `mse_loss_backward(grad,
    self, target, ...)`): the forward op's derivative `first(g, saved, ...)` (its input's
    gradient, or a tuple whose first item is) run on the arrays with grad mode off, its C
    kernel or NumPy path, so that a gradient taken with create_graph, which records the
    backward op, has the bits of one taken without."""

    def kernel(*args):
        wrapped = [wrap_grad(a) if isinstance(a, np.ndarray) else a for a in args]
        with no_grad():
            out = first(*wrapped)
        return (out[0] if isinstance(out, tuple) else out)._data

    kernel.__name__ = kernel.__qualname__ = getattr(first, "__name__", "first_order")
    return kernel


def backward_samples(*params, saved=(-3.0, 3.0)):
    """Samples of a backward op: a gradient and a saved tensor (values in `saved`), then
    each of `params`."""

    def samples(rng, dt):
        return [Sample((rand_array(rng, (3, 4), dt), rand_array(rng, (3, 4), dt, saved)) + p,
                       name=f"params {p}") for p in params]

    return samples


def _samples(*params):
    def samples(rng, dt):
        # inputs away from the kinks, where finite differences see the zero derivative
        x = rand_array(rng, (3, 4), dt, (0.2, 2.0)) * np.where(
            rng.random((3, 4)) < 0.5, -1, 1).astype(dt)
        return [Sample((rand_array(rng, (3, 4), dt), x) + p, name=f"params {p}")
                for p in params]

    return samples


def _zeros_like(x):
    return x.new_zeros(tuple(x.shape))


def _through(value, x):
    """`value` unchanged, with a zero-gradient path to `x` (sign(x) * 0 is a finite zero),
    so a decomposition's input gets the zero gradient the op's derivative gives it."""
    return value + x.sign() * 0.0


# ---------------------------------------------------------------- threshold


def _threshold_backward_kernel(g, x, threshold):
    return np.where(x <= threshold, _zero(g), g)  # a NaN input passes the gradient on


threshold_backward = register(
    "threshold_backward", kernel=_threshold_backward_kernel, meta=_meta,
    node="ThresholdBackwardBackward0",
    derivative=lambda gg, x, t: (call(threshold_backward, gg, x, t), _zeros_like(x), None),
    save=lambda out, g, x, t: (x, t), samples=_samples((0.0,), (0.5,)),
    public="threshold_backward",
    decomposition=lambda g, x, t: _through(g.where((x <= t).logical_not(), 0.0), x),
    saved_names=("self", "threshold"))


# ---------------------------------------------------------------- leaky_relu


def check_leaky_result_slope(slope, self_is_result) -> None:
    """PyTorch's refusal of a gradient taken from leaky_relu_'s result with a negative slope
    (the result's sign no longer tells the input's)."""
    if self_is_result and slope < 0:
        raise RuntimeError(
            "In-place leakyReLu backward calculation is triggered with a negative slope which "
            "is not supported. This is caused by calling in-place forward function with a "
            "negative slope, please call out-of-place version instead. File an issue at "
            "https://github.com/pytorch/pytorch if you do require supporting in-place leakRelu "
            "backward calculation with negative slope")


def _leaky_relu_backward_kernel(g, x, slope, self_is_result=False):
    check_leaky_result_slope(slope, self_is_result)
    return np.where(x > 0, g, g * slope)


def _leaky_relu_backward_meta(g, x, slope, self_is_result=False):
    check_leaky_result_slope(slope, self_is_result)
    return _meta(g, x)


leaky_relu_backward = register(
    "leaky_relu_backward", kernel=_leaky_relu_backward_kernel, meta=_leaky_relu_backward_meta,
    node="LeakyReluBackwardBackward0",
    derivative=lambda gg, x, slope, r: (call(leaky_relu_backward, gg, x, slope, False),
                                        _zeros_like(x), None, None),
    save=lambda out, g, x, slope, r=False: (x, slope, r),
    samples=_samples((0.01, False), (0.2, False)), public="leaky_relu_backward",
    decomposition=lambda g, x, slope, r=False: _through(g.where(x > 0, g * slope), x),
    saved_names=("self", "negative_slope", "self_is_result"), result_order="operands")


# ---------------------------------------------------------------- hardtanh


def _hardtanh_backward_kernel(g, x, lo, hi):
    return np.where((x <= lo) | (x >= hi), _zero(g), g)


hardtanh_backward = register(
    "hardtanh_backward", kernel=_hardtanh_backward_kernel, meta=_meta,
    node="HardtanhBackwardBackward0",
    derivative=lambda gg, x, lo, hi: (call(hardtanh_backward, gg, x, lo, hi), _zeros_like(x),
                                      None, None),
    save=lambda out, g, x, lo, hi: (x, lo, hi), samples=_samples((-1.0, 1.0), (0.0, 6.0)),
    public="hardtanh_backward",
    decomposition=lambda g, x, lo, hi: _through(
        g.where(((x <= lo) | (x >= hi)).logical_not(), 0.0), x),
    saved_names=("self", "min_val", "max_val"), result_order="operands")
