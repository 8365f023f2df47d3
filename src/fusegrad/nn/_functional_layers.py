"""Layers of `torch.nn.functional` that are one registry op (pixel/channel shuffle,
adaptive max pooling, fold/unfold, embedding_bag, bilinear's `_trilinear`) or that PyTorch
composes (channel-wise dropout, cosine_similarity, instance_norm over batch_norm,
local_response_norm, rms_norm), built from the ops PyTorch's composite records.
"""

from __future__ import annotations

import math
import numbers
import operator
import warnings

import numpy as np

from .. import _dtype
from .._creation import arange as _arange
from .._dispatch import call
from .._scalar_conversion import not_implemented_for
from .._symbolic import SymInt
from .._tensor import Tensor
from .._torch_function import warning_stacklevel as _warning_stacklevel
from .._type_names import python_type_name
from ..autograd.grad_mode import no_grad
from ..ops import conv as CV
from ..ops import embedding as EB
from ..ops import layers as LY
from ..ops import normalization as NL
from ..ops import pooling as PL
from ..ops import scalar as SC
from ..ops.norms import vector_norm


def int_list_arg(value, fn: str, arg: str, position: int, sized: bool = True):
    """`value` as PyTorch's argument parser reads an `int[]` argument of C function `fn`: an
    int stands where the list has a fixed size (`sized`), a list or tuple must hold integers
    (anything with `__index__`, as a SymInt); anything else is its TypeError."""
    if sized and isinstance(value, (int, SymInt)):
        return value
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{fn}(): argument '{arg}' (position {position}) must be tuple of "
                        f"ints, not {python_type_name(value)}")
    for i, v in enumerate(value):
        if not (isinstance(v, SymInt) or hasattr(type(v), "__index__")) or \
                isinstance(v, Tensor) and v.is_floating_point():
            raise TypeError(f"{fn}(): argument '{arg}' (position {position}) must be tuple "
                            f"of ints, but found element of type {python_type_name(v)} at "
                            f"pos {i}")
    return value


def float_arg(value, fn: str, arg: str, position: int) -> None:
    """PyTorch's argument parser's TypeError for a `float` argument that is no number."""
    if not isinstance(value, (numbers.Real, SymInt)) and not (
            isinstance(value, Tensor) and value.ndim == 0):
        raise TypeError(f"{fn}(): argument '{arg}' (position {position}) must be float, not "
                        f"{python_type_name(value)}")


def adaptive_output_size(output_size, input: Tensor, n: int, name: str) -> list:
    """The output size an `n`-D adaptive pooling `name` is given, read as PyTorch reads it:
    an int for every dim; a sequence has its Nones filled from the input's trailing sizes
    (by Python, then its length checked by the C function)."""
    if isinstance(output_size, (int, SymInt)):
        return [output_size] * n
    defaults = tuple(input.shape)
    if len(defaults) <= len(output_size):
        raise ValueError(f"Input dimension should be at least {len(output_size) + 1}")
    size = [d if v is None else v
            for v, d in zip(output_size, defaults[-len(output_size):])]
    int_list_arg(size, name, "output_size", 2)
    if len(size) != n:
        raise RuntimeError(f"{name}: output_size must be {n}")
    return [int(v) if not isinstance(v, SymInt) else v for v in size]


def one_int_size(output_size, name: str) -> int:
    """The single output size of a 1-D adaptive pooling `name` (an int or a one-int
    sequence), with PyTorch's argument parser's errors."""
    int_list_arg(output_size, name, "output_size", 2)
    if isinstance(output_size, (int, SymInt)):
        return output_size
    if len(output_size) != 1:
        raise RuntimeError(f"{name}() argument 'output_size' should contain one int (got "
                           f"{len(output_size)})")
    return int(output_size[0])


def _pair(x, n: int = 2) -> list:
    if isinstance(x, numbers.Integral):
        return [int(x)] * n
    x = [int(v) for v in x]
    return x * n if len(x) == 1 else x


# ---------------------------------------------------------------- bilinear


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor,
             bias: Tensor | None = None) -> Tensor:
    """y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o]: one
    `_trilinear` over the flattened inputs, as PyTorch records it."""
    if input1.dim() != input2.dim():
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.dim()} "
                           f"and {input2.dim()}")
    for d in range(input1.dim() - 1):
        if input1.shape[d] != input2.shape[d]:
            raise RuntimeError(f"bilinear(): input batch dimensions do not match at dim {d}: "
                               f"got {input1.shape[d]} and {input2.shape[d]}")
    if input1.shape[-1] != weight.shape[1]:
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got "
                           f"{input1.shape[-1]} but expected {weight.shape[1]}")
    if input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got "
                           f"{input2.shape[-1]} but expected {weight.shape[2]}")
    if bias is not None and bias.shape[0] != weight.shape[0]:
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got "
                           f"{bias.shape[0]} but expected {weight.shape[0]}")
    out_shape = tuple(input1.shape[:-1]) + (weight.shape[0],)
    x1 = input1.reshape(-1, input1.shape[-1])
    x2 = input2.reshape(-1, input2.shape[-1])
    out = call(LY.trilinear, x1, weight, x2, [1, 3], [0], [1, 2], [2, 3]).reshape(out_shape)
    return out + bias if bias is not None else out


# ---------------------------------------------------------------- shuffles


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """(*, C r^2, H, W) to (*, C, H r, W r)."""
    # (an int only: a float is `operator.index`'s TypeError, which the wrapper words)
    return call(LY.pixel_shuffle, input, operator.index(upscale_factor))


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """(*, C, H r, W r) to (*, C r^2, H, W)."""
    return call(LY.pixel_unshuffle, input, operator.index(downscale_factor))


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Interleave the channels of `groups` groups."""
    if groups.__class__ is not int:  # (a float is `operator.index`'s TypeError, which the
        groups = operator.index(groups)  # wrapper words as PyTorch's parser does)
    if isinstance(input, Tensor) and input.dim() < 3:
        raise RuntimeError("channel_shuffle expects input with > 2 dims, but got input with "
                           f"sizes {list(input.shape)}")
    return call(LY.channel_shuffle, input, groups)


native_channel_shuffle = channel_shuffle

# ---------------------------------------------------------------- adaptive max pooling


def adaptive_max_pool2d(input: Tensor, output_size, return_indices: bool = False):
    """Max over adaptive windows to `output_size` (None keeps that input size)."""
    if isinstance(output_size, numbers.Integral) or output_size is None:
        output_size = (output_size, output_size)
    elif input.dim() <= len(output_size):  # PyTorch fills Nones from the trailing sizes
        raise ValueError(f"Input dimension should be at least {len(output_size) + 1}")
    shape = tuple(input.shape)
    if len(shape) not in (3, 4):
        raise RuntimeError(f"adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: "
                           f"{PL.dims_str(shape)}")
    PL.check_planes("adaptive_max_pool2d", shape)
    size = [input.shape[-2 + i] if v is None else int(v) for i, v in enumerate(output_size)]
    out, idx = call(LY.adaptive_max_pool2d, input, size)
    return (out, idx) if return_indices else out


def adaptive_max_pool1d(input: Tensor, output_size, return_indices: bool = False):
    """1-D adaptive max pooling (a height-1 2-D pooling, as PyTorch records it)."""
    size = one_int_size(output_size, "adaptive_max_pool1d")
    if input.dim() not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {input.dim()}-dimensional "
                           "tensor for argument #1 'self' (while checking arguments for "
                           "adaptive_max_pool1d)")
    PL.check_planes("adaptive_max_pool1d", tuple(input.shape))
    out, idx = call(LY.adaptive_max_pool2d, input.unsqueeze(-2), [1, size])
    out = out.squeeze(-2)
    return (out, idx.squeeze(-2)) if return_indices else out


# ---------------------------------------------------------------- channel-wise dropout


def _feature_dropout(input: Tensor, p: float, training: bool, inplace: bool) -> Tensor:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if input.dim() < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    return _noise_dropout(input, p, training, inplace, True, False)


# SELU's alpha * scale: dropped units are set to SELU's negative saturation value.
_SELU_SATURATION = 1.7580993408473766


def _noise_dropout(input: Tensor, p: float, training: bool, inplace: bool, feature: bool,
                   alpha: bool) -> Tensor:
    """Dropout by one drawn noise tensor (per channel when `feature`): scaled by 1/(1-p), or
    for `alpha` an affine map that keeps zero mean and unit variance (dropped units at
    SELU's saturation value), as `input * noise (+ shift)`, recorded as PyTorch records it.
    The noise is drawn and scaled by recorded ops (as PyTorch's kernel does it, each step
    in the input's dtype), so that a traced graph holds the draw."""
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if feature and input.dim() < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if p == 1.0:
        zero = input.new_zeros(())
        return input.mul_(zero) if inplace else input * zero
    check_noise_dtype(input, alpha)
    shape = (tuple(input.shape[:2]) + (1,) * (input.dim() - 2) if feature
             else tuple(input.shape))
    if input.is_meta:  # (PyTorch's noise on a meta input: drawn from no generator)
        noise = input.new_empty(shape)
        out = input.mul_(noise) if inplace else input * noise
        return out.add_(input.new_empty(shape)) if alpha else out
    # PyTorch's noise: bernoulli_(1 - p) on a tensor of the noise's shape
    noise = input.new_empty(shape).bernoulli_(1.0 - p)
    if not alpha:
        noise.div_(1.0 - p)
        return input.mul_(noise) if inplace else input * noise
    a = 1.0 / math.sqrt((_SELU_SATURATION ** 2 * p + 1) * (1 - p))
    shift = noise.add(-1).mul_(_SELU_SATURATION * a).add_(_SELU_SATURATION * a * p)
    noise.mul_(a)
    out = input.mul_(noise) if inplace else input * noise
    return out.add_(shift)


def check_noise_dtype(input: Tensor, alpha: bool = False) -> None:
    """PyTorch's errors for dropping out a tensor that is not floating: its noise, a tensor
    of the input's dtype, gets a Bernoulli draw (none for complex on the CPU) and is divided
    in place by 1 - p, or for `alpha` shifted then scaled in place (no float result fits an
    integer tensor; a bool noise shifted is a long one). PyTorch's meta kernels word the
    casts their own way, and draw a complex noise."""
    dt = input.dtype
    if dt.is_floating_point:
        return
    if input.is_meta:
        if dt.is_complex:
            return
        if alpha:
            raise RuntimeError("Promotion of int.add/sub_(float) in in-place ops are not "
                               "possible due to element size change.")
        raise RuntimeError(f"result type torch.float32 can't be cast to the desired output "
                           f"type {dt}")
    if dt.is_complex:
        raise not_implemented_for("bernoulli_scalar_cpu_", dt)
    name = "Long" if alpha and dt.legacy == "Bool" else dt.legacy
    raise RuntimeError(f"result type Float can't be cast to the desired output type {name}")


def _check_p(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                  inplace: bool = False) -> Tensor:
    """Dropout for SELU networks: dropped units take SELU's saturation value and the result
    is rescaled to keep the input's mean and variance."""
    _check_p(p)
    return _noise_dropout(input, p, training, inplace, False, True)


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                          inplace: bool = False) -> Tensor:
    """alpha_dropout of whole channels (dims from 2 on share one draw)."""
    _check_p(p)
    return _noise_dropout(input, p, training, inplace, True, True)


def _channel_dropout(input, p, training, inplace, spatial: int) -> Tensor:
    name = f"dropout{spatial}d"
    batched = spatial + 2
    if input.dim() not in (batched - 1, batched):
        if spatial == 1:
            raise RuntimeError(
                f"dropout1d: Expected 2D or 3D input, but received a {input.dim()}D input. "
                "Note that dropout1d exists to provide channel-wise dropout on inputs with 1 "
                "spatial dimension, a channel dimension, and an optional batch dimension "
                "(i.e. 2D or 3D inputs).")
        warnings.warn(
            f"{name}: Received a {input.dim()}-D input to {name}, which is deprecated and will "
            f"result in an error in a future release. To retain the behavior and silence "
            f"this warning, please use dropout instead. Note that {name} exists to provide "
            f"channel-wise dropout on inputs with {spatial} spatial dimensions, a channel "
            f"dimension, and an optional batch dimension (i.e. {batched - 1}D or {batched}D "
            "inputs).", UserWarning, stacklevel=_warning_stacklevel(3))
    if spatial == 2 and input.dim() == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D "
            "dropout behavior is desired - input is interpreted as shape (N, C, L), where C is "
            "the channel dim. This behavior will change in a future release to interpret the "
            "input as one without a batch dimension, i.e. shape (C, H, W). To maintain the 1D "
            "channel-wise dropout behavior, please switch to using dropout1d instead.",
            UserWarning, stacklevel=_warning_stacklevel(3))
    unbatched = input.dim() == batched - 1 and spatial != 2
    if unbatched:  # (in place, the batch dimension is added and removed in place too)
        if inplace:
            return _feature_dropout(input.unsqueeze_(0), p, training, True).squeeze_(0)
        return _feature_dropout(input.unsqueeze(0), p, training, False).squeeze(0)
    return _feature_dropout(input, p, training, inplace)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, L) or (C, L) input with probability p."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return _channel_dropout(input, p, training, inplace, 1)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, H, W) or (N, C, L) input with probability p."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return _channel_dropout(input, p, training, inplace, 2)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) input with probability p."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return _channel_dropout(input, p, training, inplace, 3)


# ---------------------------------------------------------------- similarity


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """cos of the angle between x1 and x2 along `dim`; each norm clamped below by eps
    (outside the graph, as PyTorch clamps it)."""
    if tuple(x1.shape) != tuple(x2.shape):
        from ..ops._util import broadcast_shapes

        shape = broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
        x1, x2 = x1.expand(shape), x2.expand(shape)
    norms = []
    for x in (x1, x2):
        n = call(vector_norm, x, 2, [dim], True).clone()
        with no_grad():
            n.clamp_(min=eps)
        norms.append(n)
    return ((x1 / norms[0]) * (x2 / norms[1])).sum(dim)


# ---------------------------------------------------------------- normalisation


def empty_batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    """batch_norm of an input with no elements, as PyTorch's: a copy, scaled and shifted by
    the first weight and bias (their nodes; an empty weight fails to select), running
    statistics untouched."""
    out = input.clone()
    if weight is not None:
        out = out * weight.select(0, 0)
    if bias is not None:
        out = out + bias.select(0, 0)
    return out


def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each (sample, channel) over its positions: batch_norm of the input viewed as
    one sample with N*C channels (NativeBatchNormBackward0 between two views)."""
    float_arg(momentum, "instance_norm", "momentum", 7)
    float_arg(eps, "instance_norm", "eps", 8)
    shape = tuple(input.shape)
    if use_input_stats and math.prod(shape[2:]) == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input "
                         f"size {input.shape}")
    b, c = shape[:2]
    x = input.contiguous().view((1, b * c) + shape[2:])

    def rep(t):
        return t.repeat(b) if t is not None else None

    rm, rv = rep(running_mean), rep(running_var)
    if x.numel() == 0:
        out = empty_batch_norm(x, rep(weight), rep(bias))
    else:
        out = call(NL.native_batch_norm, x, rep(weight), rep(bias), rm, rv, use_input_stats,
                   momentum, eps)[0]
    if use_input_stats and running_mean is not None:
        with no_grad():
            running_mean.copy_(rm.view(b, c).mean(0))
            running_var.copy_(rv.view(b, c).mean(0))
    return out.view(shape)


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0) -> Tensor:
    """Divide by (k + alpha * mean of squares over `size` neighbouring channels) ** beta."""
    from .functional import avg_pool2d, pad

    dim = input.dim()
    if dim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality                          "
                         f"input (got {dim} dimensions)")
    if input.numel() == 0:
        return input
    div = input.mul(input)
    if dim == 3:
        div = pad(div.unsqueeze(1), [0, 0, size // 2, (size - 1) // 2])
        div = avg_pool2d(div, (size, 1), stride=1).squeeze(1)
    else:
        sizes = tuple(input.shape)
        div = div.view(sizes[0], 1, sizes[1], sizes[2], -1)
        div = pad(div, [0, 0, 0, 0, size // 2, (size - 1) // 2])
        div = call(PL.avg_pool3d, div, [size, 1, 1], [1, 1, 1]).squeeze(1)
        div = div.view(sizes)
    div = div.mul(alpha).add(k).pow(beta)
    return input / div


def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """x / sqrt(mean(x^2) + eps) over the trailing `normalized_shape` dims, times weight."""
    ns = [int(v) for v in int_list_arg(normalized_shape, "rms_norm", "normalized_shape", 2,
                                       False)]
    k = len(ns)
    if not k:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., "
                           "containing at least one element, but got normalized_shape = []")
    if weight is not None and list(weight.shape) != ns:
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got "
                           f"weight of shape {list(weight.shape)} and normalized_shape = {ns}")
    if tuple(input.shape[input.dim() - k:]) != tuple(ns) or input.dim() < k:
        raise RuntimeError(f"Given normalized_shape={ns}, expected input with shape "
                           f"[*{', '.join(str(s) for s in ns)}], but got input of size"
                           f"{list(input.shape)}")
    dt = input.dtype
    if not dt.is_floating_point and not dt.is_complex:
        raise not_implemented_for("rms_norm", dt)
    # Half types are computed in float32 and rounded once at the end, weight included, and
    # the default eps is that of the computing type (float32's for them), as PyTorch's.
    x = input.float() if dt in (_dtype.float16, _dtype.bfloat16) else input
    if eps is None:
        eps = float(np.finfo(x.dtype.np).eps)
    dims = list(range(input.dim() - k, input.dim()))
    rms = call(SC.add_scalar, x.pow(2).mean(dims, keepdim=True), eps).rsqrt()
    out = x * rms
    if weight is not None:  # the result keeps the input's dtype, whatever the weight's
        out = out * (weight if weight.dtype is x.dtype else weight.to(x.dtype))
    return out if out.dtype is dt else out.to(dt)


# ---------------------------------------------------------------- fold and unfold


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sliding local blocks of a (N, C, H, W) input as columns (one `im2col`)."""
    k, d, p, s = _pair(kernel_size), _pair(dilation), _pair(padding), _pair(stride)
    shape = tuple(input.shape)
    if len(shape) not in (3, 4) or 0 in shape[len(shape) - 3:]:
        # PyTorch checks the arguments first, then reads the sizes of dims 1 and 2 (3-D
        # input aside), then the rank and the sizes
        CV._window_args(k, d, p, s)
        if len(shape) < 3:
            raise PL.dim_error(len(shape), 1 if len(shape) < 2 else 2)
        raise RuntimeError("Expected 3D or 4D (batch mode) tensor with possibly 0 batch size "
                           f"and other non-zero dimensions for input, but got: "
                           f"{PL.dims_str(shape)}")
    return call(CV.im2col, input, k, d, p, s)


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sum columns of sliding blocks back into a (N, C, H, W) tensor (one `col2im`)."""
    k, d, p, s = _pair(kernel_size), _pair(dilation), _pair(padding), _pair(stride)
    shape = tuple(input.shape)
    if len(shape) not in (2, 3) or 0 in shape[len(shape) - 2:]:
        CV._window_args(k, d, p, s, "ksdp")  # PyTorch checks the arguments first
        raise RuntimeError("Expected 2D or 3D (batch mode) tensor for input with possibly 0 "
                           "batch size and non-zero dimensions for input, but got: "
                           f"{PL.dims_str(shape)}")
    out = _pair(output_size)
    CV._window_args(k, d, p, s, "ksdp")  # PyTorch checks the arguments first
    if shape[-2] % (k[0] * k[1]) == 0:  # (else the op's divisibility error comes first)
        # blocks per dim, with C's truncating division, as PyTorch counts them
        blocks = [int((o + 2 * pp - (dd * (kk - 1) + 1)) / ss) + 1
                  for o, kk, dd, pp, ss in zip(out, k, d, p, s)]
        if blocks[0] * blocks[1] != shape[-1]:
            raise RuntimeError(
                f"Given output_size=({out[0]}, {out[1]}), kernel_size=({k[0]}, {k[1]}), "
                f"dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), stride=({s[0]}, "
                f"{s[1]}), expected size of input's dimension 2 to match the calculated "
                f"number of sliding blocks {blocks[0]} * {blocks[1]} = "
                f"{blocks[0] * blocks[1]}, but got input.size(2)={shape[-1]}.")
    return call(CV.col2im, input, out, k, d, p, s)


# ---------------------------------------------------------------- embedding_bag

_MODES = {"sum": 0, "mean": 1, "max": 2}
# dtypes PyTorch's CPU arange has no kernel for (a 2-D bag input's offsets are an arange of it)
_NO_ARANGE = frozenset(("Bool", "ComplexFloat", "ComplexDouble", "UInt16"))


def _class_name(value) -> str:
    """`repr(type(value))` as PyTorch prints it: fusegrad's own classes under `torch`."""
    cls = type(value)
    module = cls.__module__
    if module == "fusegrad" or module.startswith("fusegrad."):
        module = "torch" + module[len("fusegrad"):]
    name = cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"
    return f"<class '{name}'>"


def _check_offsets(offsets: Tensor, length: int) -> None:
    """PyTorch's bag kernel's checks of user offsets: the first bag starts at 0 and the last
    offset is within the input (its message prints the first offset as a 0-d tensor)."""
    off = np.asarray(offsets.detach()._data).reshape(-1)
    if off.size == 0 or not np.issubdtype(off.dtype, np.integer):
        return  # the op reports these
    if off[0] != 0:
        raise RuntimeError("offsets[0] has to be 0, i.e., the first sequence in the mini-batch "
                           f"has to start from position 0. However, got {int(off[0])}\n"
                           f"[ torch.{offsets.dtype.legacy}Tensor{{}} ]")
    if off[-1] > length:
        raise RuntimeError(f"offsets[-1] can not be greater than input's length {length} but "
                           f"got offsets[-1] of {int(off[-1])}")


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None,
                  max_norm: float | None = None, norm_type: float = 2,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """Sums, means or maxima of bags of embeddings (one `_embedding_bag`)."""
    if weight.dtype.is_floating_point is False:
        raise ValueError(f"weight must be a floating point tensor, got {weight.dtype}")
    if per_sample_weights is not None and tuple(input.shape) != tuple(
            per_sample_weights.shape):
        raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) "
                         f"is not None, then it must have the same shape as the input "
                         f"({input.shape})")
    user_offsets = input.dim() == 1
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is "
                             "treated is a mini-batch of fixed length sequences. However, "
                             "found offsets of type "
                             f"{_class_name(offsets)}")
        if input.dtype.legacy in _NO_ARANGE:  # PyTorch makes the offsets in the input's type
            raise not_implemented_for("arange_cpu", input.dtype)
        rows, cols = input.shape
        if cols == 0:  # (PyTorch's arange of the offsets steps by the row length)
            raise RuntimeError("step must be nonzero")
        # One bag per row: with include_last_offset the offsets end with the last bag's end.
        end = rows * cols + (cols if include_last_offset else 0)
        # (in the input's type, as PyTorch's arange: the bag op then checks that type; a
        # recorded factory, so that a traced graph holds it)
        offsets = _arange(0, end, cols, dtype=input.dtype)
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.dim() != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.dim()}")
    if mode not in _MODES:
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")
    if max_norm is not None:  # the bags' rows of the weight rescaled in place, untracked
        with no_grad():
            call(EB.embedding_renorm_, weight, input, max_norm, norm_type)
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError("embedding_bag: per_sample_weights was not None. "
                                  "per_sample_weights is only supported for mode='sum' (got "
                                  f"mode='{mode}'). Please open a feature request on GitHub.")
    if user_offsets:
        _check_offsets(offsets, input.shape[0])
    n = weight.shape[0]
    if padding_idx is None:
        padding_idx = -1
    elif padding_idx > 0:
        assert padding_idx < n, "padding_idx must be within the number of embeddings"
    elif padding_idx < 0:
        assert padding_idx >= -n, "padding_idx must be within the number of embeddings"
        padding_idx = n + padding_idx
    return call(LY.embedding_bag, weight, input, offsets, scale_grad_by_freq, _MODES[mode],
                sparse, per_sample_weights, include_last_offset, padding_idx)[0]


__all__ = [
    "bilinear", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
    "native_channel_shuffle", "adaptive_max_pool1d", "adaptive_max_pool2d", "dropout1d",
    "dropout2d", "dropout3d", "cosine_similarity", "instance_norm", "local_response_norm",
    "rms_norm", "unfold", "fold", "embedding_bag", "alpha_dropout", "feature_alpha_dropout",
]
