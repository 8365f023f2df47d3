"""More of `torch.nn.functional`: group_norm, bilinear, huber_loss and interpolate.

These are composed from existing fusegrad ops (so they differentiate, and agree with
PyTorch's values and gradients), not single registry ops: their autograd graphs carry the
composing ops' node names rather than PyTorch's fused kernels' names.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .. import _creation
from .._tensor import Tensor

_REDUCTIONS = ("none", "mean", "sum")


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise each group of `num_groups` channel groups over its channels and positions,
    then scale and shift per channel."""
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.dim()}")
    n, c = input.shape[0], input.shape[1]
    if c % num_groups != 0:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {tuple(input.shape)} and "
                           f"num_groups={num_groups}")
    x = input.reshape(n, num_groups, -1)
    mean = x.mean(-1, keepdim=True)
    centred = x - mean
    var = (centred * centred).mean(-1, keepdim=True)
    out = (centred * (var + eps).rsqrt()).reshape(input.shape)
    shape = [1, c] + [1] * (input.dim() - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor,
             bias: Tensor | None = None) -> Tensor:
    """y[..., o] = sum_ij input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o]."""
    out_f, in1, in2 = weight.shape
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError("bilinear(): input batch dimensions do not match: got "
                           f"{tuple(input1.shape[:-1])} and {tuple(input2.shape[:-1])}")
    lead = tuple(input1.shape[:-1])
    x1 = input1.reshape(-1, in1)
    x2 = input2.reshape(-1, in2)
    w = weight.permute(1, 0, 2).reshape(in1, out_f * in2)
    t = x1.matmul(w).reshape(-1, out_f, in2)
    out = (t * x2.unsqueeze(1)).sum(-1)
    if bias is not None:
        out = out + bias
    return out.reshape(lead + (out_f,))


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """0.5 * d**2 where |d| < delta, else delta * (|d| - delta / 2), with d = input - target."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    d = input - target
    a = d.abs()
    loss = (d * d * 0.5).where(a < delta, (a - 0.5 * delta) * delta)
    if weight is not None:
        loss = loss * weight
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _out_sizes(input: Tensor, size, scale_factor) -> tuple[list[int], list[float | None]]:
    """Output spatial sizes and the scale factors given by the caller (None where not)."""
    spatial = input.dim() - 2
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        sizes = [int(size)] * spatial if isinstance(size, numbers.Integral) else [
            int(s) for s in size]
        if len(sizes) != spatial:
            raise ValueError(f"Input and output must have the same number of spatial "
                             f"dimensions, but got input with spatial dimensions of "
                             f"{list(input.shape[2:])} and output size of {sizes}. Please "
                             "provide input tensor in (N, C, d1, d2, ...,dK) format and "
                             "output size in (o1, o2, ...,oK) format.")
        return sizes, [None] * spatial
    if scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    scales = ([float(scale_factor)] * spatial if isinstance(scale_factor, numbers.Number)
              else [float(s) for s in scale_factor])
    sizes = [math.floor(float(n) * s) for n, s in zip(input.shape[2:], scales)]
    return sizes, scales


def _nearest_index(n_in: int, n_out: int, scale: float | None) -> np.ndarray:
    s = np.float32(1.0 / scale if scale is not None else n_in / n_out)
    idx = np.floor(np.arange(n_out, dtype=np.float32) * s).astype(np.int64)
    return np.minimum(idx, n_in - 1)


def _linear_weights(n_in: int, n_out: int, scale: float | None, align_corners: bool):
    """Lower and upper source indices and the weight of the upper one, per output index."""
    dst = np.arange(n_out, dtype=np.float32)
    if align_corners:
        s = np.float32((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
        src = dst * s
    else:
        s = np.float32(1.0 / scale if scale is not None else n_in / n_out)
        src = np.maximum(s * (dst + np.float32(0.5)) - np.float32(0.5), np.float32(0))
    lo = np.minimum(src.astype(np.int64), n_in - 1)
    hi = np.minimum(lo + 1, n_in - 1)
    lam = (src - lo.astype(np.float32)).astype(np.float32)
    return lo, hi, lam


def _lerp_dim(x: Tensor, dim: int, n_out: int, scale, align_corners: bool) -> Tensor:
    lo, hi, lam = _linear_weights(x.shape[dim], n_out, scale, align_corners)
    shape = [1] * x.dim()
    shape[dim] = n_out
    w1 = _creation.tensor(lam.reshape(shape), dtype=x.dtype)
    w0 = _creation.tensor((np.float32(1) - lam).reshape(shape), dtype=x.dtype)
    a = x.index_select(dim, _creation.tensor(lo))
    b = x.index_select(dim, _creation.tensor(hi))
    return a * w0 + b * w1


def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """Resize the spatial dims of a 4-D (N, C, H, W) input: `nearest` or `bilinear`."""
    if mode not in ("nearest", "bilinear"):
        raise NotImplementedError(f"interpolate: mode {mode!r} is not supported (nearest, "
                                  "bilinear)")
    if input.dim() != 4:
        raise NotImplementedError(f"interpolate: only 4-D input is supported, got "
                                  f"{input.dim()}-D")
    if antialias:
        raise NotImplementedError("interpolate: antialias is not supported")
    if mode == "nearest" and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    sizes, scales = _out_sizes(input, size, scale_factor)
    if recompute_scale_factor:
        scales = [None] * len(sizes)
    if mode == "nearest":
        out = input
        for k, (n_out, s) in enumerate(zip(sizes, scales)):
            idx = _nearest_index(input.shape[2 + k], n_out, s)
            out = out.index_select(2 + k, _creation.tensor(idx))
        return out
    ac = bool(align_corners)
    out = input
    for k, (n_out, s) in enumerate(zip(sizes, scales)):
        out = _lerp_dim(out, 2 + k, n_out, s, ac)
    return out
