"""Fractional max pooling (`fractional_max_pool2d`): max over windows placed at
pseudo-random, increasing offsets, one sequence of offsets per plane and dimension drawn
from `_random_samples` in [0, 1) (PyTorch's interval formula), so a given sample reproduces
PyTorch's windows and indices exactly."""

from __future__ import annotations

import numbers

import numpy as np

from .. import _dtype
from .._tensor import Tensor


def _starts(sample: float, input_size: int, output_size: int, pool: int) -> np.ndarray:
    """The window starts of one dimension for one plane."""
    out = np.empty(output_size, dtype=np.int64)
    if output_size > 1:
        alpha = (input_size - pool) / (output_size - 1)
        for i in range(output_size - 1):
            out[i] = int((i + sample) * alpha) - int(sample * alpha)
    out[output_size - 1] = input_size - pool
    return out


def _pair(v) -> tuple:
    return (v, v) if isinstance(v, numbers.Number) else tuple(v)


def fractional_max_pool2d_with_indices(input: Tensor, kernel_size, output_size=None,
                                       output_ratio=None, return_indices: bool = False,
                                       _random_samples=None) -> tuple:
    """Fractional max pooling of (N, C, H, W) or (C, H, W) input: (values, flat indices)."""
    import fusegrad

    if output_size is None and output_ratio is None:
        raise ValueError("fractional_max_pool2d requires specifying either an output_size or "
                         "an output_ratio")
    kh, kw = (int(k) for k in _pair(kernel_size))
    h, w = input.shape[-2:]
    if output_size is None:
        ratio = _pair(output_ratio)
        output_size = (int(h * ratio[0]), int(w * ratio[1]))
    oh, ow = (int(s) for s in _pair(output_size))
    if oh + kh - 1 > h:
        raise RuntimeError(f"fractional_max_pool2d(): pool height {kh} too large relative to "
                           f"input height {h}")
    if ow + kw - 1 > w:
        raise RuntimeError(f"fractional_max_pool2d(): pool width {kw} too large relative to "
                           f"input width {w}")
    batched = input.dim() == 4
    x = input if batched else input.unsqueeze(0)
    n, c = x.shape[:2]
    if _random_samples is None:
        _random_samples = fusegrad.rand(n, c, 2, dtype=input.dtype)
    samples = _random_samples.detach().numpy().astype(np.float64).reshape(n * c, 2)
    values = x.detach().numpy().reshape(n * c, h, w)
    index = np.empty((n * c, oh, ow), dtype=np.int64)
    for plane in range(n * c):
        rows = _starts(samples[plane, 1], h, oh, kh)[:, None] + np.arange(kh)
        cols = _starts(samples[plane, 0], w, ow, kw)[:, None] + np.arange(kw)
        windows = values[plane][rows[:, None, :, None], cols[None, :, None, :]]
        best = windows.reshape(oh, ow, kh * kw).argmax(-1)
        index[plane] = (rows[:, None, 0] + best // kw) * w + cols[None, :, 0] + best % kw
    idx = Tensor._make(index.reshape(n, c, oh, ow), _dtype.int64)
    # The maxima gathered from the input: the gradient flows back to the chosen positions.
    out = x.flatten(-2).gather(-1, idx.flatten(-2)).view(n, c, oh, ow)
    if not batched:
        out, idx = out.squeeze(0), idx.squeeze(0)
    return out, idx


def fractional_max_pool2d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples=None):
    """Fractional max pooling; with `return_indices` also the flat positions of the maxima."""
    out, idx = fractional_max_pool2d_with_indices(input, kernel_size, output_size,
                                                  output_ratio, True, _random_samples)
    return (out, idx) if return_indices else out


__all__ = ["fractional_max_pool2d", "fractional_max_pool2d_with_indices"]
