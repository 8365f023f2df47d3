"""Activation functions in the functional forms nn.functional uses: gelu, silu, mish,
softplus, leaky_relu, elu, selu, hardtanh, relu6, logsigmoid, ...; and hardshrink and prelu,
which are PyTorch's top-level functions and Tensor methods (nn.functional names the same
objects).
"""

from __future__ import annotations

from .._autocast import composite
from .._dispatch import call
from .._tensor import Tensor
from ..ops import activation as A
from ..ops import shrink as K

# ---------------------------------------------------------------- activations
# The functional forms nn.functional uses (`gelu(x, approximate=...)`, `elu(x, alpha, inplace)`).


def gelu(input, approximate="none"):
    """x * Phi(x) (or its tanh approximation)."""
    if approximate == "none":
        return call(A.gelu, input)
    return call(A.gelu, input, approximate)


def _act(op, inplace_op, name):
    def fn(input, inplace=False):
        return call(inplace_op if inplace else op, input)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"The {name} activation (in place with `inplace=True`)."
    return fn


silu = _act(A.silu, A.silu_, "silu")
mish = _act(A.mish, A.mish_, "mish")
hardsigmoid = _act(A.hardsigmoid, A.hardsigmoid_, "hardsigmoid")
hardswish = _act(A.hardswish, A.hardswish_, "hardswish")


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * x)) / beta, linear above `threshold`."""
    return call(A.softplus, input, beta, threshold)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x for x > 0, else negative_slope * x."""
    return call(A.leaky_relu_ if inplace else A.leaky_relu, input, negative_slope)


def elu(input, alpha=1.0, inplace=False):
    """x for x > 0, else alpha * (exp(x) - 1)."""
    return call(A.elu_ if inplace else A.elu, input, alpha)


def selu(input, inplace=False):
    """scale * elu(x, alpha) with the self-normalizing constants."""
    return call(A.elu_ if inplace else A.elu, input, A.SELU_ALPHA, A.SELU_SCALE)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """x clamped to [min_val, max_val]."""
    return call(A.hardtanh_ if inplace else A.hardtanh, input, min_val, max_val)


def relu6(input, inplace=False):
    """hardtanh(x, 0, 6)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def logsigmoid(input):
    """log(sigmoid(x)), computed stably."""
    return call(A.log_sigmoid, input)


def hardshrink(input: Tensor, lambd: float = 0.5, *, out=None) -> Tensor:
    """x where |x| > lambd, else 0."""
    return call(K.hardshrink, input, lambd)


@composite("lower")
def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """x if x > 0 else weight * x, with one weight per channel (dim 1) or one for all."""
    if input.dtype is not weight.dtype:  # PyTorch's kernel checks this first
        raise RuntimeError(f"prelu: Type promoting not supported. Got {input.dtype.legacy} "
                           f"and {weight.dtype.legacy}")
    if weight.dim() > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: "
                           f"ndim = {weight.dim()}")
    n = weight.numel()
    if n != 1 and input.dim() == 0:  # PyTorch checks this before the channel count
        raise RuntimeError("Not allow zero-dim input tensor.")
    channels = input.shape[1] if input.dim() >= 2 else 1
    if n != 1 and n != channels:
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found "
                           f"parameter numbers = {n} and channel size = {channels}.")
    shape = [1] * input.dim()
    if n != 1:
        shape[1] = n
    return call(K.prelu_kernel, input, weight.view(shape))
