"""Max pooling over windows computed per plane, by index: fractional max pooling
(`fractional_max_pool2d/3d`), max over windows placed at
pseudo-random, increasing offsets, one sequence of offsets per plane and dimension drawn
from `_random_samples` in [0, 1) (PyTorch's interval formula), so a given sample reproduces
PyTorch's windows and indices exactly; and 3-D adaptive max pooling. The values are gathered
from the input at the chosen positions, which is also their gradient's path."""

from __future__ import annotations

import numbers

import numpy as np

from .. import _autocast, _dtype
from .._autocast import composite
from .._dispatch import call
from .._tensor import Tensor
from ..ops import pooling as PL
from ..ops import pooling_picks as PP


def _tuple(v, n: int) -> tuple:
    return (v,) * n if isinstance(v, numbers.Number) else tuple(v)


def _fractional(input: Tensor, kernel_size, output_size, output_ratio, samples, n: int,
                order: tuple, name: str) -> tuple:
    """Fractional max pooling over the last `n` dimensions; `order[i]` is the entry of each
    plane's sample that places dimension i's windows (PyTorch's assignment)."""
    import fusegrad

    if output_size is None and output_ratio is None:
        raise ValueError(f"{name} requires specifying either an output_size or an "
                         f"output_ratio")
    # PyTorch's 2-D function takes the ratio's length (a number has none: its TypeError)
    if n == 2 and output_size is None and len(output_ratio) > 2:
        raise ValueError("fractional_max_pool2d requires output_ratio to either be a single "
                         "Int or tuple of Ints.")
    shape = tuple(input.shape)
    where = name if n == 2 else f"{name}_out"  # PyTorch's kernels' own names
    if samples is None and len(shape) < n + 1:  # the draw reads the channels' size
        raise PL.dim_error(len(shape), -(n + 1))
    if len(shape) not in (n + 1, n + 2):
        raise RuntimeError(f"{where}(): Expected {n + 1}D or {n + 2}D tensor, but got: "
                           f"{PL.dims_str(shape)}")
    PL.check_planes(where, shape, sep="")
    kernel = tuple(int(k) for k in _tuple(kernel_size, n))
    sizes = tuple(input.shape[-n:])
    if output_size is None:
        ratio = _tuple(output_ratio, n)
        output_size = tuple(int(s * r) for s, r in zip(sizes, ratio))
    out = tuple(int(s) for s in _tuple(output_size, n))
    words = ("height", "width") if n == 2 else ("time", "height", "width")
    # (PyTorch's 3-D kernel checks time, then width, then height)
    checks = list(zip(kernel, sizes, out, words))
    for k, s, o, word in (checks if n == 2 else [checks[0], checks[2], checks[1]]):
        # the 3-D kernel wants room to spare: a window reaching the last position fails
        if o + k - 1 > s or (n == 3 and o + k - 1 == s):
            if n == 2 and input.is_meta:  # (PyTorch's meta kernel's words)
                raise RuntimeError(f"{name}: kernel {word} {k} is too large relative to "
                                   f"input {word} {s}")
            raise RuntimeError(f"{where}(): pool {word} {k} too large relative to input "
                               f"{word} {s}")
    batched = input.dim() == n + 2
    x = input if batched else input.unsqueeze(0)
    lead = tuple(x.shape[:2])
    if samples is None and not input.is_meta:  # (a meta input draws nothing, as PyTorch's)
        samples = fusegrad.rand(lead[0], lead[1], n, dtype=input.dtype)
    if _autocast.active():
        # PyTorch's CPU autocast runs the op in float32, its samples drawn before (in the
        # input's dtype) and cast with it
        return _autocast.call_composite(_fractional, "fp32", (
            input, kernel_size, output_size, output_ratio, samples, n, order, name), {})
    if input.is_meta:  # (no values to place windows by: the indices' geometry only)
        return _picked(input, (lead if batched else lead[1:]) + out, n)
    # (the positions by an op: a compiled program traces it, its windows placed at run time)
    idx = call(PP.fractional_max_pool_indices, x.detach(), samples.detach(), list(kernel),
               list(out), list(order))
    if not batched:
        idx = idx.squeeze(0)
    # The maxima picked from the input (PyTorch's node; the gradient flows back to the
    # chosen positions).
    op = PP.fractional_max_pool2d_values if n == 2 else PP.fractional_max_pool3d_values
    return call(op, input, idx), idx


def _picked(input: Tensor, shape: tuple, n: int, op=None) -> tuple:
    """A meta input's (values, indices) of `shape`: the indices hold no positions, and the
    values are picked by the layer's op (`op`, or fractional pooling's of `n` dimensions)
    so they carry its node."""
    if op is None:
        op = PP.fractional_max_pool2d_values if n == 2 else PP.fractional_max_pool3d_values
    idx = input.new_empty(shape, dtype=_dtype.int64)
    return call(op, input, idx), idx


def fractional_max_pool2d_with_indices(input: Tensor, kernel_size, output_size=None,
                                       output_ratio=None, return_indices: bool = False,
                                       _random_samples=None) -> tuple:
    """Fractional max pooling of (N, C, H, W) or (C, H, W) input: (values, flat indices)."""
    return _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 2,
                       (1, 0), "fractional_max_pool2d")


def fractional_max_pool3d_with_indices(input: Tensor, kernel_size, output_size=None,
                                       output_ratio=None, return_indices: bool = False,
                                       _random_samples=None) -> tuple:
    """Fractional max pooling of (N, C, T, H, W) or (C, T, H, W) input."""
    return _fractional(input, kernel_size, output_size, output_ratio, _random_samples, 3,
                       (0, 1, 2), "fractional_max_pool3d")


def fractional_max_pool2d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples=None):
    """Fractional max pooling; with `return_indices` also the flat positions of the maxima."""
    out, idx = fractional_max_pool2d_with_indices(input, kernel_size, output_size,
                                                  output_ratio, True, _random_samples)
    return (out, idx) if return_indices else out


def fractional_max_pool3d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples=None):
    """3-D fractional max pooling; with `return_indices` also the positions of the maxima."""
    out, idx = fractional_max_pool3d_with_indices(input, kernel_size, output_size,
                                                  output_ratio, True, _random_samples)
    return (out, idx) if return_indices else out


@composite("fp32")  # (PyTorch's CPU autocast)
def adaptive_max_pool3d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    """Max over adaptive windows of (N, C, D, H, W) or (C, D, H, W) input to `output_size`
    (None keeps a size): (values, flat indices into each input volume)."""
    if not isinstance(output_size, numbers.Number) and output_size is not None and \
            input.dim() <= len(output_size):  # PyTorch fills Nones from the trailing sizes
        raise ValueError(f"Input dimension should be at least {len(output_size) + 1}")
    if not isinstance(output_size, numbers.Number) and output_size is not None and \
            len(output_size) != 3:
        raise RuntimeError("adaptive_max_pool3d(): internal error: output_size.size() must be 3")
    if input.dim() not in (4, 5):
        raise RuntimeError(f"adaptive_max_pool3d(): Expected 4D or 5D tensor, but got: "
                           f"{list(input.shape)}")
    PL.check_planes("adaptive_max_pool3d", tuple(input.shape))
    PL.check_pool_dtype("adaptive_max_pool3d_cpu", input.dtype, "float")
    sizes = tuple(input.shape[-3:])
    out = tuple(s if o is None else int(o) for s, o in zip(sizes, _tuple(output_size, 3)))
    if min(out) < 0:
        shape = list(input.shape[:-3]) + list(out)
        first = next(v for v in out if v < 0)
        raise RuntimeError(f"Trying to create tensor with negative dimension {first}: "
                           f"{shape}")
    batched = input.dim() == 5
    x = input if batched else input.unsqueeze(0)
    lead = tuple(x.shape[:2])
    if input.is_meta:
        return _picked(input, (lead if batched else lead[1:]) + out, 3,
                       PP.adaptive_max_pool3d_values)
    # explicit sizes throughout: `-1` cannot be read off an empty batch
    values = x.detach().numpy().reshape((lead[0] * lead[1],) + sizes)
    # window i of a dimension spans [floor(i * size / out), ceil((i + 1) * size / out))
    bounds = [[(i * s // o, -(-(i + 1) * s // o)) for i in range(o)]
              for s, o in zip(sizes, out)]
    index = np.empty((values.shape[0],) + out, dtype=np.int64)
    for cell in np.ndindex(*out):
        (t0, t1), (h0, h1), (w0, w1) = (bounds[i][cell[i]] for i in range(3))
        window = values[:, t0:t1, h0:h1, w0:w1]
        cells = (t1 - t0) * (h1 - h0) * (w1 - w0)
        flat = window.reshape(window.shape[0], cells)
        # NaN wins, as in PyTorch's kernel, where each NaN takes over (the last one wins);
        # otherwise the first maximum
        nan = np.isnan(flat)
        k = np.where(nan.any(1), cells - 1 - nan[:, ::-1].argmax(1), flat.argmax(1))
        t, h, w = np.unravel_index(k, window.shape[1:])
        index[(slice(None),) + cell] = ((t + t0) * sizes[1] + h + h0) * sizes[2] + w + w0
    idx = Tensor._make(index.reshape((lead if batched else lead[1:]) + out), _dtype.int64)
    return call(PP.adaptive_max_pool3d_values, input, idx), idx


def adaptive_max_pool3d(input: Tensor, output_size, return_indices: bool = False):
    """3-D adaptive max pooling; with `return_indices` also the positions of the maxima."""
    out, idx = adaptive_max_pool3d_with_indices(input, output_size)
    return (out, idx) if return_indices else out


__all__ = ["adaptive_max_pool3d", "adaptive_max_pool3d_with_indices", "fractional_max_pool2d",
           "fractional_max_pool2d_with_indices",
           "fractional_max_pool3d", "fractional_max_pool3d_with_indices"]
