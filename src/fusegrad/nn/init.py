"""`fusegrad.nn.init`: fill tensors in place (no autograd) with PyTorch's initialisations."""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from .. import _creation
from .._creation import randperm
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad


def _fill(tensor: Tensor, values, method: str = "fill_") -> Tensor:
    """Write `values` into `tensor` in place, outside autograd; returns `tensor`. Anything
    but a tensor fails as PyTorch's call of the tensor method `method` does."""
    if not isinstance(tensor, Tensor):
        raise AttributeError(f"'{type(tensor).__name__}' object has no attribute '{method}'")
    data = tensor._data
    if data is None:  # (a meta tensor, or one a compiler traces: the write as an op)
        with no_grad():
            return tensor.fill_(values)
    data[...] = np.asarray(values).astype(data.dtype, copy=False) if np.ndim(values) \
        else values
    tensor._vc[0] += 1
    return tensor


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for `nonlinearity`."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d")
    if nonlinearity in linear or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    dims = tensor.dim()
    if dims < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    valid = ["fan_in", "fan_out"]
    if mode not in valid:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


# The no-grad fillers PyTorch's public initialisers are built on (library code calls them).


def _no_grad_uniform_(tensor: Tensor, a: float, b: float, generator=None) -> Tensor:
    """U(a, b) into `tensor`, outside autograd."""
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def _no_grad_normal_(tensor: Tensor, mean: float, std: float, generator=None) -> Tensor:
    """N(mean, std^2) into `tensor`, outside autograd."""
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def _no_grad_trunc_normal_(tensor: Tensor, mean: float, std: float, a: float, b: float,
                           generator=None) -> Tensor:
    """N(mean, std^2) truncated to [a, b] into `tensor` (`trunc_normal_`)."""
    return trunc_normal_(tensor, mean, std, a, b, generator=generator)


def _no_grad_fill_(tensor: Tensor, val: float) -> Tensor:
    """`val` everywhere in `tensor`, outside autograd."""
    with no_grad():
        return tensor.fill_(val)


def _no_grad_zero_(tensor: Tensor) -> Tensor:
    """Zeros into `tensor`, outside autograd."""
    with no_grad():
        return tensor.zero_()


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Fill with U(a, b)."""
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Fill with N(mean, std^2)."""
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator=None) -> Tensor:
    """Fill with N(mean, std^2) truncated to [a, b], drawing as PyTorch does: when the
    bounds keep more than 30% of the mass, whole-tensor normal draws replace the values still
    outside; otherwise uniform candidates on [a, b], each accepted against one more uniform
    (log u <= the candidate's log density relative to the peak)."""
    def cdf(x: float) -> float:
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    if not isinstance(tensor, Tensor):  # PyTorch reads `.is_meta` of it first
        raise AttributeError(f"'{type(tensor).__name__}' object has no attribute 'is_meta'")
    if tensor.is_meta:  # nothing to draw (PyTorch's first test: no warning either)
        return tensor
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    with no_grad():
        if cdf((b - mean) / std) - cdf((a - mean) / std) > 0.3:
            # the bounds as the tensor's dtype holds them, so the test matches its values
            lo, hi = tensor.new_tensor(a).item(), tensor.new_tensor(b).item()
            result = tensor.normal_(mean, std, generator=generator)
            outside = (result < lo) | (result > hi)
            while outside.any():
                fresh = tensor.new_empty(tuple(tensor.shape)).normal_(mean, std,
                                                                       generator=generator)
                result = fresh.where(outside, result)
                outside = (result < lo) | (result > hi)
            if result is not tensor:
                tensor.copy_(result)
            return tensor
        log_peak = -0.5 * ((max(a, min(mean, b)) - mean) / std) ** 2

        def rejected(candidates: Tensor) -> Tensor:
            log_pdf = candidates.sub(mean).div_(std).pow_(2).mul_(-0.5).sub_(log_peak)
            return tensor.new_empty(tuple(tensor.shape)).uniform_(
                generator=generator).log_().gt(log_pdf)

        result = tensor.uniform_(a, b, generator=generator)
        pending = rejected(result)
        while pending.any():
            candidates = tensor.new_empty(tuple(tensor.shape)).uniform_(a, b,
                                                                        generator=generator)
            result = candidates.where(pending, result)
            pending = rejected(candidates).where(pending, pending)
        if result is not tensor:
            tensor.copy_(result)
        return tensor


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with `val`."""
    return _fill(tensor, val)


def ones_(tensor: Tensor) -> Tensor:
    """Fill with ones."""
    return _fill(tensor, 1)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with zeros."""
    return _fill(tensor, 0, "zero_")


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity."""
    if tensor.ndimension() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    if tensor._data is None:  # (a meta tensor, or one a compiler traces: ops)
        with no_grad():
            return tensor.copy_(_creation.eye(*tensor.shape, dtype=tensor.dtype,
                                              device=tensor.device))
    return _fill(tensor, np.eye(*tensor.shape))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill a 3-, 4- or 5-D convolution weight with the Dirac delta: each of the `groups`
    output groups passes its first input channels through unchanged (a 1 at the kernel's
    centre), everything else zero."""
    dims = tensor.ndimension()
    if dims not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tuple(tensor.shape)
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    if tensor.is_meta:  # (PyTorch writes nothing into a meta tensor, counting no write)
        return tensor
    per_group = sizes[0] // groups
    values = np.zeros(sizes)
    centre = tuple(s // 2 for s in sizes[2:])
    for g in range(groups):
        for d in range(min(per_group, sizes[1])):
            values[(g * per_group + d, d) + centre] = 1
    return _fill(tensor, values, "zero_")


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot normal: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def _empty_noop(tensor: Tensor) -> bool:
    """Whether `tensor` has no elements (PyTorch's He initialisations then warn and return)."""
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return True
    return False


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """He uniform: U(-b, b) with b = gain * sqrt(3 / fan)."""
    if _empty_noop(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """He normal: N(0, std^2) with std = gain / sqrt(fan)."""
    if _empty_noop(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """A (semi-)orthogonal matrix from the QR decomposition of a normal draw."""
    if tensor.ndimension() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0 or tensor._data is None:  # nothing to draw, or a meta tensor
        return tensor  # (PyTorch draws nothing either)
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    # PyTorch's draw: a (rows, cols) normal_ in the tensor's dtype, then QR in float64 here
    flat = tensor.new_empty((rows, cols)).normal_(0, 1, generator=generator)._data
    flat = flat.astype(np.float64)
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q *= np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, (gain * q).reshape(tuple(tensor.shape)))


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator=None) -> Tensor:
    """A 2-D tensor of N(0, std^2) values with the first ceil(sparsity * rows) rows of a
    random permutation zeroed in each column (one normal draw, then one permutation per
    column, as PyTorch draws them: `generator` feeds the normal draw only, the permutations
    come from the default generator)."""
    if tensor.ndimension() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    if tensor.is_meta:  # (PyTorch draws nothing, not even the permutations, for one)
        return tensor
    rows, cols = tuple(tensor.shape)
    zeros = int(math.ceil(sparsity * rows))
    with no_grad():
        tensor.normal_(0, std, generator=generator)
        for col in range(cols):
            # a slice, so a negative count keeps all but the last rows as Python slices do
            picked = randperm(rows)[:zeros]
            tensor[picked, col] = 0
    return tensor


def _deprecated(new_fn):
    """The old name of an initialisation (no trailing underscore), which warns and calls
    `new_fn`."""
    old = new_fn.__name__[:-1]

    @functools.wraps(new_fn)
    def deprecated(*args, **kwargs):
        warnings.warn(f"`nn.init.{old}` is now deprecated in favor of "
                      f"`nn.init.{new_fn.__name__}`.", FutureWarning, stacklevel=2)
        return new_fn(*args, **kwargs)

    deprecated.__name__ = deprecated.__qualname__ = old
    deprecated.__doc__ = f"Deprecated: use `{new_fn.__name__}`."
    return deprecated


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)


__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_",
           "zeros_", "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
           "kaiming_normal_", "orthogonal_", "sparse_"]
