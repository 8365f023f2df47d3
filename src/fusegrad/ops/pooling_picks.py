"""Max pooling whose windows are chosen in Python (fractional max pooling's random windows,
3-D adaptive max pooling's): the values at given flat positions of each plane, with the
node PyTorch records for the layer (`FractionalMaxPool2DBackward0`...) and its backward,
each position's gradient summed (windows may overlap, as fractional ones do).

The positions are the layer's `indices` output: fractional pooling's by an op of their own
here (`fractional_max_pool_indices`, its windows placed by each plane's random sample),
3-D adaptive pooling's by `nn._functional_fractional`; these ops pick the values and carry the
history."""

from __future__ import annotations

import numpy as np

from .. import _dtype
from ._util import Spec, numpy_backward, rand_array, wrap_grad
from .registry import Sample, register


def _pick_kernel(n: int):
    def kernel(x, idx):
        lead = x.shape[:-n]
        # (Explicit sizes: an empty batch leaves -1 undetermined.)
        flat = x.reshape(lead + (int(np.prod(x.shape[-n:], dtype=np.int64)),))
        cells = int(np.prod(idx.shape[-n:], dtype=np.int64))
        picked = np.take_along_axis(flat, idx.reshape(lead + (cells,)), -1)
        return picked.reshape(idx.shape)
    return kernel


def _pick_meta(x, idx):
    return Spec(tuple(idx.shape), x.dtype)


def _pick_derivative(n: int, no_meta: str | None):
    def derivative(g, shape, idx):
        if no_meta is not None and g.is_meta:
            from .._meta import no_meta_kernel

            raise no_meta_kernel(no_meta)
        # (The input's gradient: each output's gradient added at its position.)
        if idx._plain and idx._data is not None and numpy_backward(g):
            return (wrap_grad(_added_at(g._data, tuple(shape), idx._data, n)), None)
        lead = tuple(shape[:-n])
        zeros = g.new_zeros(lead + (int(np.prod(shape[-n:], dtype=np.int64)),))
        cells = int(np.prod(tuple(idx.shape[-n:]), dtype=np.int64))
        added = zeros.scatter_add(-1, idx.reshape(lead + (cells,)), g.reshape(lead + (cells,)))
        return (added.view(tuple(shape)), None)
    return derivative


def _added_at(g: np.ndarray, shape: tuple, idx: np.ndarray, n: int) -> np.ndarray:
    """The pick's input gradient on arrays: `g`'s values added at their planes' positions
    `idx`, in `g`'s C order (as the derivative's scatter_add adds them: the same bits), by
    one add.at over flat positions."""
    plane = int(np.prod(shape[-n:], dtype=np.int64))
    planes = int(np.prod(shape[:-n], dtype=np.int64))
    cells = int(np.prod(idx.shape[-n:], dtype=np.int64))
    flat = idx.reshape(planes, cells).astype(np.intp, copy=False) + \
        (np.arange(planes, dtype=np.intp) * plane)[:, None]
    out = np.zeros(planes * plane, g.dtype)
    np.add.at(out, flat.reshape(-1), g.reshape(-1))
    return out.reshape(shape)


def _pick_samples(n: int):
    def samples(rng, dt):
        out = []
        for lead in ((2, 3), (3,)):
            x = rand_array(rng, lead + (4,) * n, dt)
            # (Repeated positions: overlapping windows' shared maximum.)
            idx = rng.integers(0, 4 ** n, lead + (2,) * n)
            out.append(Sample((x, idx), name=f"{len(lead) + n}-D"))
        return out
    return samples


def _register_pick(name: str, node: str, n: int, no_meta: str | None = None):
    """`no_meta`: the backward PyTorch has no meta kernel for (its error on a meta input)."""
    return register(
        name, kernel=_pick_kernel(n), meta=_pick_meta, node=node,
        derivative=_pick_derivative(n, no_meta), nondiff_args=(1,),
        save=lambda out, x, idx: (tuple(x.shape), idx), samples=_pick_samples(n),
        saved_names=("", "indices"))


fractional_max_pool2d_values = _register_pick(
    "_fractional_max_pool2d_values", "FractionalMaxPool2DBackward0", 2)
fractional_max_pool3d_values = _register_pick(
    "_fractional_max_pool3d_values", "FractionalMaxPool3DBackward0", 3,
    "fractional_max_pool3d_backward")
adaptive_max_pool3d_values = _register_pick(
    "_adaptive_max_pool3d_values", "AdaptiveMaxPool3DBackward0", 3)


# ---------------------------------------------------------------- fractional windows


def _all_starts(samples: np.ndarray, input_size: int, output_size: int,
                pool: int) -> np.ndarray:
    """The window starts of one dimension, (planes, output_size), from each plane's sample
    in [0, 1) (float64): PyTorch's interval formula, int((i + s) * alpha) - int(s * alpha)
    with alpha = (input - pool) / (output - 1), the last window at the input's end."""
    out = np.empty((samples.shape[0], output_size), dtype=np.int64)
    if output_size > 1:
        alpha = (input_size - pool) / (output_size - 1)
        i = np.arange(output_size - 1, dtype=np.float64)
        s = samples[:, None]
        out[:, :-1] = np.trunc((i + s) * alpha).astype(np.int64) - \
            np.trunc(s * alpha).astype(np.int64)
    out[:, output_size - 1] = input_size - pool
    return out


def _window_maxima(values: np.ndarray, draws: np.ndarray, order: tuple, sizes: tuple,
                   out: tuple, kernel: tuple, strides: list) -> np.ndarray:
    """The flat position of each window's maximum (the first; a NaN wins), all planes at
    once: `values` (planes, *sizes), `draws` (planes, n) the planes' samples."""
    n = len(sizes)
    planes = values.shape[0]
    # per dimension: window starts (planes, out_i) and each window's cells
    # (planes, out_i, k_i), shaped to broadcast as (planes, out_0, k_0, out_1, k_1, ...)
    starts, grids = [], [np.arange(planes).reshape((planes,) + (1,) * (2 * n))]
    for i in range(n):
        first = _all_starts(draws[:, order[i]], sizes[i], out[i], kernel[i])
        starts.append(first)
        cells = first[:, :, None] + np.arange(kernel[i])
        shape = [planes] + [1] * (2 * n)
        shape[1 + 2 * i], shape[2 + 2 * i] = out[i], kernel[i]
        grids.append(cells.reshape(shape))
    block = values[tuple(grids)]  # (planes, out_0, k_0, out_1, k_1, ...)
    axes = [0] + list(range(1, 2 * n + 1, 2)) + list(range(2, 2 * n + 1, 2))
    windows = block.transpose(axes).reshape((planes,) + out + (int(np.prod(kernel)),))
    best = np.unravel_index(windows.argmax(-1), kernel)
    flat = np.zeros((planes,) + out, dtype=np.int64)
    for i in range(n):
        shape = [planes] + [1] * n
        shape[1 + i] = out[i]
        flat += (starts[i].reshape(shape) + best[i]) * strides[i]
    return flat


def _fractional_indices_kernel(x, samples, kernel, out, order):
    """Flat positions of each window's maximum in (N, C, *sizes) `x`, the windows placed by
    (N, C, n) `samples` in [0, 1); `order[i]`: the sample entry placing dimension i's."""
    n = len(kernel)
    lead, sizes = x.shape[:2], tuple(x.shape[2:])
    planes = int(lead[0] * lead[1])
    draws = np.asarray(samples, np.float64).reshape(planes, n)
    values = x.reshape((planes,) + sizes)
    strides = [int(np.prod(sizes[i + 1:])) for i in range(n)]
    index = _window_maxima(values, draws, tuple(order), sizes, tuple(out), tuple(kernel),
                           strides)
    return index.reshape(tuple(lead) + tuple(out))


def _fractional_indices_samples(rng, dt):
    return [Sample((rand_array(rng, (2, 3) + (7,) * n, dt), rng.random((2, 3, n)).astype(dt),
                    [2] * n, [4] * n, list(range(n))[::-1]), name=f"{n}-D")
            for n in (2, 3)]


fractional_max_pool_indices = register(
    "_fractional_max_pool_indices", kernel=_fractional_indices_kernel,
    meta=lambda x, samples, kernel, out, order: Spec(
        tuple(x.shape[:2]) + tuple(out), _dtype.int64),
    differentiable=False, samples=_fractional_indices_samples)
