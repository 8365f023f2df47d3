"""Max pooling whose windows are chosen in Python (fractional max pooling's random windows,
3-D adaptive max pooling's): the values at given flat positions of each plane, with the
node PyTorch records for the layer (`FractionalMaxPool2DBackward0`...) and its backward,
each position's gradient summed (windows may overlap, as fractional ones do).

The positions are the layer's `indices` output, computed by `nn._functional_fractional`;
these ops pick the values and carry the history."""

from __future__ import annotations

import numpy as np

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
