"""More of `torch.nn.functional`: group_norm, interpolate (and its deprecated upsample
spellings), normalize and gumbel_softmax.

group_norm and interpolate run one registry op each (`native_group_norm`, `upsample_*`), so
their graphs carry PyTorch's node names. (bilinear and huber_loss live in
`_functional_layers.py` and `_functional_loss.py`.)
"""

from __future__ import annotations

import math
import numbers
import warnings

from .._dispatch import call
from .._symbolic import size_int
from .._tensor import Tensor
from .._torch_function import warning_stacklevel
from ..ops import normalization as G
from ..ops import upsample as U
from ..ops._util import format_of
from ..ops.nn import tensor_in_format
from ._functional_layers import float_arg


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise each of `num_groups` channel groups over its channels and positions, then
    scale and shift per channel: one `native_group_norm` (NativeGroupNormBackward0)."""
    float_arg(eps, "group_norm", "eps", 5)
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.dim()}")
    shape = list(input.shape)
    n, c = shape[0], shape[1]
    # Each group's statistics need more than one value (PyTorch checks this before the op).
    stats = [n * c // num_groups, num_groups] + shape[2:]
    if math.prod([stats[0]] + stats[2:]) == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input "
                         f"size {stats}")
    hxw = math.prod(shape[2:])
    # Contiguous in the memory format the input suggests, as PyTorch's group_norm makes it
    # (a channels-last input stays, and so is the output).
    fmt = format_of(input)
    x = input.contiguous() if fmt is None else tensor_in_format(input, fmt)
    return call(G.native_group_norm, x, weight, bias, n, c, hxw, num_groups, eps)[0]


def pad_circular(input: Tensor, pad: list) -> Tensor:
    """Circular padding built as PyTorch builds it, from slice copies into a new tensor (so
    the graph is the same CopySlices over SliceBackward0 nodes)."""
    from ..ops import shape as S

    k = len(pad) // 2
    shape = list(input.shape)
    lead = input.dim() - k
    out_shape = list(shape)
    for i in range(k):
        dim = lead + i
        before, after = pad[2 * (k - 1 - i)], pad[2 * (k - 1 - i) + 1]
        if before > shape[dim] or after > shape[dim]:
            raise RuntimeError("Padding value causes wrapping around more than once.")
        out_shape[dim] = shape[dim] + before + after
        if out_shape[dim] < 0:
            raise RuntimeError("Negative padding value is resulting in an empty dimension")
    out = input.new_empty(tuple(out_shape))

    def cut(t: Tensor, dim: int, start: int, stop: int) -> Tensor:
        return call(S.slice_, t, dim, start, stop, 1)

    # The input (cropped where a pad is negative) goes in the middle, ...
    dst, src = out, input
    for i in range(k):
        dim = input.dim() - 1 - i
        before, after = pad[2 * i], pad[2 * i + 1]
        dst = cut(dst, dim, max(before, 0), out_shape[dim] - max(after, 0))
        src = cut(src, dim, max(-before, 0), shape[dim] - max(-after, 0))
    dst.copy_(src)
    # ... then each side is copied from the opposite end of the padded tensor, one dim at
    # a time, so corners wrap too.
    for i in range(k):
        dim = input.dim() - 1 - i
        before, after = pad[2 * i], pad[2 * i + 1]
        size = out_shape[dim]
        if before > 0:
            cut(out, dim, 0, before).copy_(
                cut(out, dim, size - before - max(after, 0), size - max(after, 0)))
        if after > 0:
            cut(out, dim, size - after, size).copy_(
                cut(out, dim, max(before, 0), max(before, 0) + after))
    return out


_NEAREST = {"nearest": (U.upsample_nearest1d, U.upsample_nearest2d, U.upsample_nearest3d),
            "nearest-exact": (U.upsample_nearest_exact1d, U.upsample_nearest_exact2d,
                              U.upsample_nearest_exact3d)}
# Interpolating modes: the one input rank each accepts, and its op.
_INTERPOLATING = {"linear": (3, U.upsample_linear1d), "bilinear": (4, U.upsample_bilinear2d),
                  "bicubic": (4, U.upsample_bicubic2d),
                  "trilinear": (5, U.upsample_trilinear3d)}
_ANTIALIASED = {"bilinear": U.upsample_bilinear2d_aa, "bicubic": U.upsample_bicubic2d_aa}
_MODES = "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact"


def _is_int(x) -> bool:
    return isinstance(x, numbers.Integral) or (isinstance(x, Tensor) and x.dim() == 0 and
                                                not x.is_floating_point())


def _output_and_scales(input: Tensor, size, scale_factor,
                       recompute_scale_factor) -> tuple[list[int], list[float | None]]:
    """Output spatial sizes, and the scale factors the op is told (None: from the sizes)."""
    dim = input.dim() - 2
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(
                    "Input and output must have the same number of spatial dimensions, but "
                    f"got input with spatial dimensions of {list(input.shape[2:])} and output "
                    f"size of {size}. Please provide input tensor in (N, C, d1, d2, ...,dK) "
                    "format and output size in (o1, o2, ...,oK) format.")
            if not all(_is_int(v) for v in size):
                raise TypeError(
                    "expected size to be one of int or Tuple[int] or Tuple[int, int] or "
                    "Tuple[int, int, int], but got size with types "
                    f"{[type(v) for v in size]}")
            sizes = [size_int(v) for v in size]  # (a size read from a tensor stays one)
        else:
            sizes = [size_int(size)] * dim
        if recompute_scale_factor:
            raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
        return sizes, [None] * dim
    if scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    if isinstance(scale_factor, (list, tuple)):
        if len(scale_factor) != dim:
            raise ValueError(
                "Input and scale_factor must have the same number of spatial dimensions, but "
                f"got input with spatial dimensions of {list(input.shape[2:])} and "
                f"scale_factor of shape {scale_factor}. Please provide input tensor in (N, C, "
                "d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) format.")
        scales = [float(v) for v in scale_factor]
    else:
        scales = [float(scale_factor)] * dim
    # The size is the product truncated (in double precision), as PyTorch computes it.
    sizes = [int(n * s) for n, s in zip(input.shape[2:], scales)]
    if recompute_scale_factor:
        return sizes, [None] * dim
    return sizes, scales


def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """Resize the spatial dims of an (N, C, *spatial) input to `size` (or by
    `scale_factor`): modes nearest, nearest-exact, linear (3-D), bilinear and bicubic (4-D),
    trilinear (5-D), and area (3-D and 4-D), each one op with PyTorch's backward node."""
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating "
                             "modes: linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    ndim = input.dim()
    if mode == "area" and size is None:
        recompute_scale_factor = True  # area pooling only knows output sizes
    sizes, scales = _output_and_scales(input, size, scale_factor, recompute_scale_factor)
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and ndim == 4):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos "
                         "modes and requires a 4-D tensor as input")
    if mode in _NEAREST and 3 <= ndim <= 5:
        return call(_NEAREST[mode][ndim - 3], input, sizes, *scales)
    if mode == "area" and ndim in (3, 4, 5):
        from .functional import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d

        pool = (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[ndim - 3]
        return pool(input, sizes if ndim > 3 else sizes[0])
    if mode in _INTERPOLATING and 3 <= ndim <= 5:
        need, op = _INTERPOLATING[mode]
        if ndim == need:
            if antialias:
                op = _ANTIALIASED[mode]
            return call(op, input, sizes, bool(align_corners), *scales)
        if mode != "bicubic":
            raise NotImplementedError(f"Got {ndim}D input, but {mode} mode needs {need}D "
                                      "input")
    if mode == "lanczos" and ndim == 4:
        raise NotImplementedError(f"interpolate: mode {mode!r} on {ndim}-D input is not "
                                  "supported")
    raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got "
                              f"{ndim}D) for the modes: {_MODES} (got {mode})")


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,
              out: Tensor | None = None) -> Tensor:
    """`input` divided by its `p`-norm over `dim` (at least `eps`), as PyTorch composes it:
    vector norm, clamp_min, expand_as, div."""
    if out is not None:
        raise RuntimeError("normalize: out= is not supported")
    denom = input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input)
    return input / denom


def gumbel_softmax(logits: Tensor, tau: float = 1, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1) -> Tensor:
    """A sample from the Gumbel-softmax distribution over `dim`: soft, or (`hard`) one-hot
    in the forward with the soft sample's gradient (straight-through)."""
    gumbels = -logits.new_empty(logits.shape).exponential_().log()
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.max(dim, keepdim=True)[1]
    y_hard = logits.new_zeros(logits.shape).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


def _deprecated_upsample(name: str) -> None:
    warnings.warn(f"`nn.functional.{name}` is deprecated. Use `nn.functional.interpolate` "
                  "instead.", stacklevel=warning_stacklevel(3))


def upsample(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
             align_corners=None) -> Tensor:
    """Deprecated spelling of `interpolate`."""
    _deprecated_upsample("upsample")
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated: `interpolate(..., mode="nearest")`."""
    _deprecated_upsample("upsample_nearest")
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated: `interpolate(..., mode="bilinear", align_corners=True)`."""
    _deprecated_upsample("upsample_bilinear")
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
