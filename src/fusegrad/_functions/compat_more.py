"""Top-level functions of PyTorch's namespace that older or lower-level code calls: session
settings (`set_warn_always`, the deterministic debug mode, `set_default_tensor_type`), type
questions (`typename`, `is_storage`), ATen's functional spellings of layers
(`constant_pad_nd`, `convolution`, `max_pool1d_with_indices`,
`binary_cross_entropy_with_logits`), and small numeric helpers (`vander`, `mvlgamma`,
`frobenius_norm`, `nuclear_norm`, `nonzero_static`, `frombuffer`).
"""

from __future__ import annotations

import math
import operator

import numpy as np

from .. import _creation, _dtype, _legacy_types
from .._tensor import Tensor
from .._torch_function import warn_once_at
from .._warn import is_warn_always_enabled, set_warn_always
from ..ops import quantize as _quantize
from .indexing import nonzero
from .shape import cat


def typename(obj) -> str:
    """The type of `obj` as a string: a tensor's legacy type name, else `module.qualname`."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    if hasattr(obj, "__qualname__"):
        qualname = obj.__qualname__
    elif hasattr(obj, "__name__"):
        qualname = obj.__name__
    else:
        module = obj.__class__.__module__ or ""
        qualname = obj.__class__.__qualname__
    return qualname if module in ("", "builtins") else f"{module}.{qualname}"


def set_deterministic_debug_mode(debug_mode) -> None:
    """0/"default": off; 1/"warn": deterministic algorithms, warning otherwise;
    2/"error": deterministic algorithms, raising otherwise."""
    from .utilities import use_deterministic_algorithms

    if not isinstance(debug_mode, (int, str)):
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode)}")
    if isinstance(debug_mode, str):
        names = ("default", "warn", "error")
        if debug_mode not in names:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, "
                               f"`warn`, `error`, but got {debug_mode}")
        debug_mode = names.index(debug_mode)
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got "
                           f"{debug_mode}")
    if debug_mode == 0:
        use_deterministic_algorithms(False)
    else:
        use_deterministic_algorithms(True, warn_only=debug_mode == 1)



def get_deterministic_debug_mode() -> int:
    """The mode `set_deterministic_debug_mode` set (0, 1 or 2)."""
    from .utilities import (
        are_deterministic_algorithms_enabled,
        is_deterministic_algorithms_warn_only_enabled,
    )

    if not are_deterministic_algorithms_enabled():
        return 0
    return 1 if is_deterministic_algorithms_warn_only_enabled() else 2


def set_flush_denormal(mode: bool) -> bool:
    """Whether flushing denormal floats to zero is supported: NumPy gives no control over
    the floating-point unit, so it is not, and nothing changes (False, as PyTorch answers on
    such a machine)."""
    return False


def set_default_tensor_type(t) -> None:
    """The deprecated way to set the default floating dtype: by typed class or its name."""
    import fusegrad  # the name is looked up in the namespace, as PyTorch looks it up in torch

    warn_once_at(2, "torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "torch.set_default_dtype() and torch.set_default_device() as alternatives.")
    if isinstance(t, str):
        # a dotted name below the namespace, as PyTorch resolves it below `torch`
        owner, *path = t.split(".")
        found = fusegrad if owner == "torch" else getattr(fusegrad, owner)
        for part in path:
            found = getattr(found, part)
        t = found
    if not isinstance(t, _legacy_types.tensortype):
        raise TypeError("invalid type object: only floating-point types are supported as the "
                        "default type")
    if t.is_cuda:
        raise _legacy_types.unavailable_type(t)
    if not t.dtype.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    _dtype.set_default_dtype(t.dtype)


def get_device(input: Tensor) -> int:
    """-1: tensors live on the CPU."""
    return input.get_device()


def _assert(condition, message) -> None:
    """`assert condition, message` as a function (`torch._assert`): what FX-traced code calls
    to check a specialised argument."""
    assert condition, message


_assert.__module__ = "fusegrad"  # PyTorch's `torch._assert`, as traced code spells it


def is_storage(obj) -> bool:
    """Whether `obj` is a storage object."""
    from .._meta import MetaStorage
    from ..storage import TypedStorage, UntypedStorage

    return isinstance(obj, (UntypedStorage, TypedStorage, MetaStorage))


def is_inference(input: Tensor) -> bool:
    """Whether `input` was made in inference mode."""
    return input.is_inference()


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """Turn anomaly detection on or off for the session."""
    from ..autograd.anomaly_mode import set_detect_anomaly

    set_detect_anomaly(enabled, check_nan)


def positive(input: Tensor) -> Tensor:
    """`input` itself (unary plus); an error for bool tensors."""
    if input.dtype is _dtype.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


def fill(input: Tensor, value) -> Tensor:
    """A tensor like `input` filled with `value` (gradient zero for `input`)."""
    return input.clone().fill_(value)


def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:
    """The Vandermonde matrix of `x`: columns x**(N-1), ..., x**0 (or increasing)."""
    if x.dim() != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    # (an int only: a float is `operator.index`'s TypeError, which the wrapper words)
    n = x.shape[0] if N is None else N if N.__class__ is int else operator.index(N)
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    x = x.to(_dtype.promote_types(x.dtype, _dtype.int64))
    ones = _creation.ones(x.shape[0], 1, dtype=x.dtype, device=x.device)
    if n <= 1:
        result = ones[:, :n]
    else:
        result = cat([ones, x.unsqueeze(1).expand(x.shape[0], n - 1).cumprod(1)], 1)
    return result if increasing else result.flip(1)


def mvlgamma(input: Tensor, p: int, *, out=None) -> Tensor:
    """The multivariate log-gamma of dimension `p`, elementwise."""
    if input.dtype is _dtype.bool_:
        raise RuntimeError("The input tensor may not be a boolean tensor.")
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    integral = not (input.dtype.is_floating_point or input.dtype.is_complex)
    dt = _dtype.get_default_dtype() if integral else input.dtype
    # PyTorch's formula, in its order (the float sums round alike): the offsets
    # -(p-1)/2, ..., 0 in the result's dtype (a complex one has no `arange`, as there), plus
    # the input, their lgammas summed, plus p(p-1)/4 log(pi) computed in double.
    offsets = _creation.arange(-p * 0.5 + 0.5, 0.5, 0.5, dtype=dt, device=input.device)
    return (offsets + input.unsqueeze(-1)).lgamma().sum(-1) + float(p * (p - 1)) * \
        math.log(math.pi) * 0.25


def _mvlgamma_(self: Tensor, p: int) -> Tensor:
    """In-place multivariate log-gamma."""
    result = mvlgamma(self, p)
    if not _dtype.can_cast(result.dtype, self.dtype):
        raise RuntimeError(f"mvlgamma: result type {self.dtype.legacy} can't be cast to "
                           f"the desired output type {result.dtype.legacy}")
    return self.copy_(result)


def frobenius_norm(input: Tensor, dim, keepdim: bool = False, *, out=None) -> Tensor:
    """The deprecated 2-norm over `dim` (recorded as the legacy `norm`, as PyTorch does)."""
    from .._dispatch import call
    from ..ops import special

    warn_once_at(2, "at::frobenius_norm is deprecated and it is just left for JIT compatibility. "
                  "It will be removed in a future PyTorch release. Please use "
                  "`linalg.vector_norm(A, 2., dim, keepdim)` instead")
    return call(special.norm_dim, input, 2, list(dim), keepdim)


def nuclear_norm(input: Tensor, dim=None, keepdim: bool = False, *, out=None) -> Tensor:
    """The deprecated nuclear norm (sum of singular values) over two dimensions."""
    from ..linalg import matrix_norm

    warn_once_at(2, "at::nuclear_norm is deprecated and it is just left for JIT compatibility. "
                  "It will be removed in a future PyTorch release. Please use "
                  "`linalg.matrix_norm(A, 'nuc', dim, keepdim)` instead")
    if isinstance(dim, bool):
        dim, keepdim = None, dim
    return matrix_norm(input, "nuc", tuple(dim) if dim is not None
                                       else (-2, -1), keepdim)




def convolution(input, weight, bias, stride, padding, dilation, transposed: bool,
                output_padding, groups: int) -> Tensor:
    """ATen's general convolution (any spatial rank, transposed or not)."""
    from .._dispatch import call
    from ..ops import conv as CV

    return call(CV.convolution, input, weight, bias, list(stride), list(padding),
                list(dilation), transposed, list(output_padding), groups)






def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None,
                   requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """A tensor of `size` whose dimensions lie in memory in `physical_layout` order
    (outermost first); its elements are zero here."""
    size, order = [int(s) for s in size], [int(d) for d in physical_layout]
    if sorted(order) != list(range(len(size))):
        raise RuntimeError(f"Number of dimensions in size does not match the length of the "
                           f"physical_layout; i.e. len(size) = {len(size)} is not equal to "
                           f"len(physical_layout) = {len(order)}")
    phys = _creation.zeros([size[d] for d in order], dtype=dtype, device=device)
    out = phys.permute(list(np.argsort(order)))
    return out._requires_grad_unguarded(requires_grad) if requires_grad else out


def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1) -> Tensor:
    """The first `size` rows of `nonzero(input)`, padded with `fill_value`."""
    if size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be an non-negative integer, but got "
                           f"size: {size}")
    found = nonzero(input)[:size]
    if found.shape[0] == size:  # (row-major, as PyTorch's: nonzero's rows are strided)
        return _creation.empty((size, input.dim()), dtype=_dtype.int64).copy_(found)
    pad = _creation.full((size - found.shape[0], input.dim()), fill_value, dtype=_dtype.int64)
    return cat([found, pad], 0)


def frombuffer(buffer, *, dtype, count: int = -1, offset: int = 0,
               requires_grad: bool = False) -> Tensor:
    """A 1-D tensor over the memory of a Python buffer (shared, not copied)."""
    view = memoryview(buffer)
    size = dtype.itemsize
    length = view.nbytes
    if length == 0 and count in (-1, 0):
        raise ValueError(f"both buffer length ({length}) and count ({count}) must not be 0")
    if not 0 <= offset < length:
        raise ValueError(f"offset ({offset} bytes) must be non-negative and no greater than "
                         f"buffer length ({length} bytes) minus 1")
    if count < 0 and (length - offset) % size != 0:
        raise ValueError(f"buffer length ({length - offset} bytes) after offset ({offset} "
                         f"bytes) must be a multiple of element size ({size})")
    if view.readonly:
        warn_once_at(2, "The given buffer is not writable, and PyTorch does not support "
                      "non-writable tensors. This means you can write to the underlying "
                      "(supposedly non-writable) buffer using the tensor. You may want to copy "
                      "the buffer to protect its data or make it writable before converting it "
                      "to a tensor. This type of warning will be suppressed for the rest of this "
                      "program.")
    data = np.frombuffer(buffer, dtype=dtype.np, count=count, offset=offset)
    if view.readonly:
        data = data.view()
        data.flags.writeable = False
    out = Tensor._make(data, dtype)
    return out._requires_grad_unguarded(True) if requires_grad else out




def fake_quantize_per_tensor_affine(input: Tensor, scale, zero_point, quant_min: int,
                                    quant_max: int) -> Tensor:
    """`input` rounded to the affine grid of `scale` and `zero_point` (numbers, or one-value
    tensors) within [`quant_min`, `quant_max`] and mapped back; its gradient passes where
    the value was not clamped (quantization-aware training)."""
    from .._dispatch import call
    from ..autograd.grad_mode import is_grad_enabled

    if isinstance(scale, Tensor) or isinstance(zero_point, Tensor):
        name = "_fake_quantize_per_tensor_affine_cachemask_tensor_qparams"
        for arg, t in (("scale", scale), ("zero_point", zero_point)):
            if isinstance(t, Tensor) and t.requires_grad and is_grad_enabled():
                raise RuntimeError(f"The function '{name}' is not differentiable with respect "
                                   f"to argument '{arg}'. This input cannot have "
                                   "requires_grad True.")
        enabled = _creation.ones(1, dtype=_dtype.int64)
        return call(_quantize.fake_quantize_per_tensor_affine_cachemask_tensor_qparams, input,
                    scale, zero_point, enabled, quant_min, quant_max)[0]
    return call(_quantize.fake_quantize_per_tensor_affine_cachemask, input, scale, zero_point,
                quant_min, quant_max)[0]


def fake_quantize_per_channel_affine(input: Tensor, scale: Tensor, zero_point: Tensor,
                                     axis: int, quant_min: int, quant_max: int) -> Tensor:
    """`fake_quantize_per_tensor_affine` with one scale and zero point per index of `axis`."""
    from .._dispatch import call

    return call(_quantize.fake_quantize_per_channel_affine_cachemask, input, scale, zero_point,
                axis, quant_min, quant_max)[0]


__all__ = [
    "typename", "set_warn_always", "is_warn_always_enabled", "set_deterministic_debug_mode",
    "get_deterministic_debug_mode", "set_flush_denormal", "set_default_tensor_type",
    "get_device", "is_storage", "is_inference", "set_anomaly_enabled", "positive", "fill",
    "vander", "mvlgamma", "frobenius_norm", "nuclear_norm", "convolution",
    "empty_permuted",
    "nonzero_static", "frombuffer", "fake_quantize_per_tensor_affine",
    "fake_quantize_per_channel_affine",
]
