"""The activations of `torch.nn.functional` that are one registry op each (celu, softshrink,
hardshrink, threshold, glu, prelu, rrelu, and the in-place forms of elu, selu, silu, mish,
hardsigmoid, hardswish, hardtanh, leaky_relu) and the few PyTorch composes (softsign,
tanhshrink, softmin): each records PyTorch's nodes.
"""

from __future__ import annotations

import warnings

from .. import _dtype
from .._dispatch import call
from .._functions._args import int_parameter
from .._scalar_conversion import not_implemented_for
from .._tensor import Tensor
from .._torch_function import warning_stacklevel
from ..ops import activation as A
from ..ops import shrink as K

# torch.hardshrink and torch.prelu themselves (PyTorch's nn.functional names the same objects).
from .. import hardshrink, prelu  # noqa: E402, F401  isort: skip


def _pick(op, op_, inplace: bool):
    return op_ if inplace else op


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    """Clamp to [min_val, max_val] (`hardtanh`, or `hardtanh_` in place)."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return call(_pick(A.hardtanh, A.hardtanh_, inplace), input, min_val, max_val)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """In-place hardtanh."""
    return hardtanh(input, min_val, max_val, True)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """min(max(x, 0), 6): hardtanh(x, 0, 6), as PyTorch records it."""
    return hardtanh(input, 0, 6, inplace)  # (ints, as PyTorch passes them)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x if x > 0 else negative_slope * x."""
    return call(_pick(A.leaky_relu, A.leaky_relu_, inplace), input, negative_slope)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """In-place leaky_relu."""
    return leaky_relu(input, negative_slope, True)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x if x > 0 else alpha * (exp(x) - 1)."""
    return call(_pick(A.elu, A.elu_, inplace), input, alpha)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place elu."""
    return elu(input, alpha, True)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """scale * elu(x, alpha) with the self-normalising constants (one `elu` node)."""
    return call(_pick(A.elu, A.elu_, inplace), input, A.SELU_ALPHA, A.SELU_SCALE)


def selu_(input: Tensor) -> Tensor:
    """In-place selu."""
    return selu(input, True)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    if alpha == 0:  # (PyTorch's check, worded after Python's error)
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return call(_pick(K.celu, K.celu_, inplace), input, alpha)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place celu."""
    return celu(input, alpha, True)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x * sigmoid(x)."""
    return call(_pick(A.silu, A.silu_, inplace), input)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * tanh(softplus(x))."""
    return call(_pick(A.mish, A.mish_, inplace), input)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """clamp(x / 6 + 1 / 2, 0, 1)."""
    return call(_pick(A.hardsigmoid, A.hardsigmoid_, inplace), input)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * hardsigmoid(x)."""
    return call(_pick(A.hardswish, A.hardswish_, inplace), input)


def logsigmoid(input: Tensor) -> Tensor:
    """log(sigmoid(x)), computed stably."""
    return call(A.log_sigmoid, input)


def softsign(input: Tensor) -> Tensor:
    """x / (1 + |x|)."""
    return input / (input.abs() + 1)


def tanhshrink(input: Tensor) -> Tensor:
    """x - tanh(x)."""
    return input - input.tanh()


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    return call(K.softshrink, input, lambd)




def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """x where x > threshold, else value."""
    _check_threshold_dtype(input)
    return call(_pick(K.threshold, K.threshold_, inplace), input, threshold, value)


def _check_threshold_dtype(input: Tensor) -> None:
    if input.dtype is _dtype.bool_:  # PyTorch's kernel has no bool form
        raise not_implemented_for("threshold_cpu", "Bool")


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """In-place threshold."""
    _check_threshold_dtype(input)
    return call(K.threshold_, input, threshold, value)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """a * sigmoid(b), where a and b are the halves of `input` along `dim`."""
    if dim.__class__ is not int:  # (PyTorch's C function takes it by position, always)
        dim = int_parameter(dim, "glu", "dim", 2)
    return call(K.glu, input, dim)




def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
          training: bool = False, inplace: bool = False) -> Tensor:
    """Leaky ReLU whose negative slope is drawn from U(lower, upper) per element when
    training, and is (lower + upper) / 2 otherwise."""
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    # The noise holds each element's slope (1 where x > 0); eval mode does not read it. Made
    # and drawn through the registry (a meta input draws nothing), so that a compiled graph
    # records the draw and draws the numbers eager draws, as dropout's mask.
    noise = input.new_zeros(tuple(input.shape))
    if training and not input.is_meta:
        # PyTorch's draw: a double slope for each element <= 0, in order, between the bounds
        # as the input's dtype holds them (`rrelu_with_noise_functional`'s kernel)
        noise = call(K.rrelu_with_noise_functional, input.detach(), noise, lower, upper,
                     True)[1]
    op = K.rrelu_with_noise_ if inplace else K.rrelu_with_noise
    return call(op, input, noise, lower, upper, bool(training))


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
           training: bool = False, generator=None) -> Tensor:
    """In-place rrelu."""
    return rrelu(input, lower, upper, training, True)


def implicit_softmax_dim(name: str, ndim: int, stacklevel: int) -> int:
    """The dim a softmax-like function (`name`) called without one takes, PyTorch's legacy
    choice (0 for 0-, 1- and 3-D inputs, else 1), with its deprecation warning `stacklevel`
    frames up (the function's `_stacklevel`: this helper is 1, its caller 2; the protocol's
    wrapper frames are not counted)."""
    dim = 0 if ndim in (0, 1, 3) else 1
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  f"to include dim=X as an argument.", UserWarning,
                  stacklevel=warning_stacklevel(stacklevel))
    return dim


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype=None) -> Tensor:
    """softmax(-x) along `dim`."""
    if dim is None:
        dim = implicit_softmax_dim("softmin", input.dim(), _stacklevel)
    neg = -input
    return neg.softmax(dim, dtype=dtype) if dtype is not None else neg.softmax(dim)


__all__ = [
    "hardtanh", "hardtanh_", "relu6", "leaky_relu", "leaky_relu_", "elu", "elu_", "selu",
    "selu_", "celu", "celu_", "silu", "mish", "hardsigmoid", "hardswish", "logsigmoid",
    "softsign", "tanhshrink", "softshrink", "hardshrink", "threshold", "threshold_", "glu",
    "prelu", "rrelu", "rrelu_", "softmin",
]
