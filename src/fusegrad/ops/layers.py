"""Layer ops PyTorch records as one node: pixel_shuffle / pixel_unshuffle, channel_shuffle,
adaptive_max_pool2d, `_embedding_bag` and `_trilinear` (bilinear's product). Kernels are
NumPy; derivatives are fusegrad ops (each shuffle is the other's adjoint).
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from .._thread_state import active as _active
from . import _onnx as ox
from ._util import (
    Spec,
    add_rows,
    format_of,
    format_strides,
    in_format,
    index_out_of_range,
    input_format,
    rand_array,
    size_str,
)
from .embedding import check_index_dtype, sparse_weight_grad
from .nn import _call, _const, _register_multi, _work, tensor_in_format
from .pooling import check_pool_dtype
from .registry import Sample, register

# ---------------------------------------------------------------- pixel and channel shuffle


def _ps_meta(a, r):
    nd = len(a.shape)
    if nd < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but "
                           f"got input with {nd} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    c, h, w = a.shape[-3:]
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c} "
                           f"is not divisible by {r * r}")
    shape = tuple(a.shape[:-3]) + (c // (r * r), h * r, w * r)
    return Spec(shape, a.dtype, format_strides(shape, format_of(a)))


def _pu_meta(a, r):
    nd = len(a.shape)
    if nd < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but "
                           f"got input with {nd} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    c, h, w = a.shape[-3:]
    if h % r:
        raise RuntimeError(f"pixel_unshuffle expects height to be divisible by "
                           f"downscale_factor, but input.size(-2)={h} is not divisible by {r}")
    if w % r:
        raise RuntimeError(f"pixel_unshuffle expects width to be divisible by "
                           f"downscale_factor, but input.size(-1)={w} is not divisible by {r}")
    shape = tuple(a.shape[:-3]) + (c * r * r, h // r, w // r)
    return Spec(shape, a.dtype, format_strides(shape, format_of(a)))


def _ps_kernel(a, r):
    if r <= 0:
        _ps_meta(a, r)  # the meta words the error
    lead, (c, h, w) = a.shape[:-3], a.shape[-3:]
    k = len(lead)
    x = a.reshape(lead + (c // (r * r), r, r, h, w))
    perm = tuple(range(k)) + (k, k + 3, k + 1, k + 4, k + 2)
    return np.ascontiguousarray(x.transpose(perm)).reshape(lead + (c // (r * r), h * r, w * r))


def _pu_kernel(a, r):
    if r <= 0:
        _pu_meta(a, r)  # the meta words the error
    lead, (c, h, w) = a.shape[:-3], a.shape[-3:]
    k = len(lead)
    x = a.reshape(lead + (c, h // r, r, w // r, r))
    perm = tuple(range(k)) + (k, k + 2, k + 4, k + 1, k + 3)
    return np.ascontiguousarray(x.transpose(perm)).reshape(lead + (c * r * r, h // r, w // r))


def _shuffle_samples(shapes):
    def samples(rng, dt):
        return [Sample((rand_array(rng, s, dt), r), name=f"{s} {r}") for s, r in shapes]

    return samples


# The shuffles lay their results out in their input's memory format (so each one's
# gradient, the other shuffle of the output's gradient, takes that gradient's format).
pixel_shuffle = register(
    "pixel_shuffle", kernel=input_format(_ps_kernel), meta=_ps_meta,
    node="PixelShuffleBackward0",
    derivative=lambda g, r: (_call(pixel_unshuffle, g, r), None),
    save=lambda out, a, r: (r,),
    samples=_shuffle_samples((((1, 4, 3, 3), 2), ((2, 9, 2, 1), 3), ((8, 2, 2), 2))),
    onnx=ox.pixel_shuffle,
    saved_names=("upscale_factor",))
pixel_unshuffle = register(
    "pixel_unshuffle", kernel=input_format(_pu_kernel), meta=_pu_meta,
    node="PixelUnshuffleBackward0",
    derivative=lambda g, r: (_call(pixel_shuffle, g, r), None),
    save=lambda out, a, r: (r,),
    samples=_shuffle_samples((((1, 1, 4, 6), 2), ((2, 2, 3, 3), 3), ((2, 4, 2), 2))),
    saved_names=("downscale_factor",))


def _cs_meta(a, groups):
    if len(a.shape) <= 2:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but "
                           f"got input with {len(a.shape)} dimension(s)")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value "
                           f"of groups:{groups}")
    c = a.shape[1]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels "
                           f"and {groups} groups.")
    return Spec(tuple(a.shape), a.dtype, format_strides(tuple(a.shape), format_of(a)))


def _cs_kernel(a, groups):
    if groups <= 0:
        _cs_meta(a, groups)  # the meta words the error
    n, c = a.shape[:2]
    rest = a.shape[2:]
    x = a.reshape((n, groups, c // groups) + rest).swapaxes(1, 2)
    return np.ascontiguousarray(x).reshape(a.shape)


channel_shuffle = register(
    "channel_shuffle", kernel=input_format(_cs_kernel), meta=_cs_meta,
    node="ChannelShuffleBackward0",
    derivative=lambda g, c, groups: (_call(channel_shuffle, g, c // groups), None),
    save=lambda out, a, groups: (a.shape[1], groups),
    samples=_shuffle_samples((((1, 6, 2, 2), 3), ((2, 4, 3), 2), ((2, 6, 1, 2, 2), 2))),
    saved_names=("", "groups"))

# ---------------------------------------------------------------- adaptive max pooling


def _amp_meta(a, output_size):
    nd = len(a.shape)
    if nd not in (3, 4) or any(s == 0 for s in a.shape[-2:]):
        raise RuntimeError(f"adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: "
                           f"{size_str(a.shape)}")
    if len(output_size) != 2:
        raise RuntimeError("adaptive_max_pool2d(): internal error: output_size.size() must "
                           "be 2")
    shape = tuple(a.shape[:-2]) + tuple(int(s) for s in output_size)
    if min(shape) < 0:
        neg = next(v for v in shape if v < 0)
        raise RuntimeError(f"Trying to create tensor with negative dimension {neg}: "
                           f"{size_str(shape)}")
    from .. import _dtype

    strides = format_strides(shape, format_of(a))  # the input's format (`input_format`)
    return (Spec(shape, a.dtype, strides), Spec(shape, _dtype.int64, strides))


def _amp_kernel(a, output_size):
    if min(output_size) < 0:
        _amp_meta(a, output_size)  # the meta words the error
    check_pool_dtype("adaptive_max_pool2d", a.dtype, "float")
    h, w = a.shape[-2:]
    oh, ow = (int(s) for s in output_size)
    x = _work(a)
    out = np.empty(a.shape[:-2] + (oh, ow), x.dtype)
    idx = np.empty(a.shape[:-2] + (oh, ow), np.int64)
    for i in range(oh):
        h0, h1 = (i * h) // oh, -(-((i + 1) * h) // oh)
        for j in range(ow):
            w0, w1 = (j * w) // ow, -(-((j + 1) * w) // ow)
            # explicit sizes: `-1` cannot be read off an empty batch
            win = x[..., h0:h1, w0:w1].reshape(a.shape[:-2] + ((h1 - h0) * (w1 - w0),))
            # NaN wins, as in PyTorch's kernel, where each NaN takes over (the last one
            # wins); otherwise the first maximum
            nan = np.isnan(win)
            last_nan = nan.shape[-1] - 1 - nan[..., ::-1].argmax(-1)
            k = np.where(nan.any(-1), last_nan, win.argmax(-1))
            out[..., i, j] = np.take_along_axis(win, k[..., None], -1)[..., 0]
            idx[..., i, j] = (h0 + k // (w1 - w0)) * w + w0 + k % (w1 - w0)
    return out.astype(a.dtype, copy=False), idx


def _amp_derivative(grads, shape, idx, fmt=None):
    g = grads[0] if isinstance(grads, (list, tuple)) else grads
    lead = tuple(shape[:-2])
    flat = g.new_zeros(lead + (shape[-2] * shape[-1],))
    n = idx.shape[-2] * idx.shape[-1]
    gx = flat.scatter_add(-1, idx.reshape(lead + (n,)), g.reshape(lead + (n,)))
    return (tensor_in_format(gx.reshape(tuple(shape)), fmt), None)


adaptive_max_pool2d = _register_multi(
    "adaptive_max_pool2d", kernel=input_format(_amp_kernel), meta=_amp_meta,
    node="AdaptiveMaxPool2DBackward0", derivative=_amp_derivative,
    save=lambda out, a, output_size: (tuple(a.shape), out[1], format_of(a)),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), o), name=f"{s} {o}")
                             for s, o in (((2, 3, 8, 8), [3, 3]), ((1, 2, 5, 7), [2, 4]),
                                          ((3, 6, 6), [6, 2]), ((1, 1, 4, 4), [1, 1]))],
    nondiff_outputs=(1,), saved_names=("", "result1", ""), onnx=ox.adaptive_max_pool)

# ---------------------------------------------------------------- _trilinear


def _expanded_shape(shape, expand, ndim):
    dims = iter(shape)
    return tuple(1 if d in expand else next(dims) for d in range(ndim))


def _tri_ndim(i1, e1):
    return len(i1.shape) + len(e1)


def _tri_kernel(i1, i2, i3, e1, e2, e3, sumdim, unroll_dim=1):
    n = _tri_ndim(i1, e1)
    dt = np.result_type(i1.dtype, i2.dtype, i3.dtype)
    a = _work(i1).reshape(_expanded_shape(i1.shape, e1, n))
    b = _work(i2).reshape(_expanded_shape(i2.shape, e2, n))
    c = _work(i3).reshape(_expanded_shape(i3.shape, e3, n))
    # (contiguous, as PyTorch's kernel computes it with matrix products)
    return in_format((a * b * c).sum(axis=tuple(sumdim)).astype(dt, copy=False), None)


def _tri_meta(i1, i2, i3, e1, e2, e3, sumdim, unroll_dim=1):
    n = _tri_ndim(i1, e1)
    shapes = [_expanded_shape(t.shape, e, n) for t, e in ((i1, e1), (i2, e2), (i3, e3))]
    full = np.broadcast_shapes(*shapes)
    return Spec(tuple(s for d, s in enumerate(full) if d not in sumdim), i1.dtype)


def _tri_derivative(g, i1, i2, i3, e1, e2, e3, sumdim, shapes=None):
    """Each input's gradient: g times the other two, summed over the dims it lacks. An input
    is saved only where another's gradient needs it (`_tri_save`), so a gradient is computed
    only where both partners were saved; `shapes` gives the inputs' shapes (None: read from
    the inputs, all saved)."""
    n = len(g.shape) + len(sumdim)  # the output drops exactly the summed dims
    full = g
    for d in sorted(sumdim):
        full = full.unsqueeze(d)
    ins = (i1, i2, i3)
    if shapes is None:
        shapes = [tuple(t.shape) for t in ins]
    exps = (e1, e2, e3)
    ex = [t.reshape(_expanded_shape(s, e, n)) if t is not None else None
          for t, s, e in zip(ins, shapes, exps)]
    grads = []
    for k in range(3):
        others = [ex[j] for j in range(3) if j != k]
        if others[0] is None or others[1] is None:  # then input k needs no gradient
            grads.append(None)
            continue
        prod = full * others[0] * others[1]
        target = _expanded_shape(shapes[k], exps[k], n)
        axes = [d for d in range(n) if target[d] == 1 and prod.shape[d] != 1]
        if axes:
            prod = prod.sum(axes, keepdim=True)
        grads.append(prod.expand(target).reshape(tuple(shapes[k])))
    return tuple(grads) + (None,) * 5


def _tri_save(out, i1, i2, i3, e1, e2, e3, sumdim, unroll_dim=1):
    """TrilinearBackward0's saved values, as PyTorch's: each input only where another
    input's gradient needs it (so `F.bilinear`'s input may change in place when only it
    requires grad), then the expansions and the summed dims (tuples: PyTorch's node reads
    its int lists back as tuples) and the inputs' shapes."""
    rg = [getattr(t, "_rg", False) for t in (i1, i2, i3)]
    return (i1 if rg[1] or rg[2] else None, i2 if rg[0] or rg[2] else None,
            i3 if rg[0] or rg[1] else None, tuple(e1), tuple(e2), tuple(e3), tuple(sumdim),
            [tuple(t.shape) for t in (i1, i2, i3)])


def _tri_samples(rng, dt):
    x1, w, x2 = (rand_array(rng, s, dt) for s in ((4, 3), (2, 3, 5), (4, 5)))
    y1, v, y2 = (rand_array(rng, s, dt) for s in ((1, 2), (3, 2, 2), (1, 2)))
    return [Sample((x1, w, x2, [1, 3], [0], [1, 2], [2, 3]), name="bilinear"),
            Sample((y1, v, y2, [1, 3], [0], [1, 2], [2, 3], 1), name="small")]


trilinear = register(
    "_trilinear", kernel=_tri_kernel, meta=_tri_meta, node="TrilinearBackward0",
    forward_ad="product",
    derivative=_tri_derivative,
    save=_tri_save, samples=_tri_samples,
    saved_names=("i1", "i2", "i3", "expand1", "expand2", "expand3", "sumdim", ""))

# ---------------------------------------------------------------- _embedding_bag

_SUM, _MEAN, _MAX = 0, 1, 2


def _bags(indices, offsets, include_last_offset):
    """(bag of each index, number of bags)."""
    n = indices.shape[0]
    off = np.asarray(offsets, np.int64)
    bags = len(off) - 1 if include_last_offset else len(off)
    # The last bag runs to the end of the input even with include_last_offset (PyTorch's
    # CPU kernel ignores the closing offset: indices past it join the last bag).
    ends = np.concatenate([off[1:bags], [n]])
    bag = np.zeros(n, np.int64)
    for b in range(bags):
        bag[off[b]:ends[b]] = b
    return bag, bags


def _no_offset2bag(dt: np.dtype, mode: int, padding_idx: int, inner: int = 1) -> bool:
    # PyTorch's fast path (sum of float32/half rows, no padding index, a weight whose rows
    # are contiguous: `inner`, its last dim's element stride) leaves offset2bag empty
    return mode == _SUM and padding_idx < 0 and dt.itemsize <= 4 and inner == 1


def _eb_kernel(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
               per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    # the kernel takes the indices and offsets in their common type, int64 or int32 only
    check_index_dtype(_dtype.promote_types(*map(_dtype.from_numpy_dtype, (
        indices.dtype, offsets.dtype))), 1, "embedding_bag")
    w = _work(weight)
    idx = np.asarray(indices, np.int64).reshape(-1)
    n = w.shape[0]
    bad = index_out_of_range(idx, n)
    if bad is not None:
        k = int(np.flatnonzero((idx < 0) | (idx >= n))[0])
        raise RuntimeError(f"Index {k} of input takes value {bad} which is not in the valid "
                           f"range [0, {n})")
    bag, bags = _bags(idx, offsets, include_last_offset)
    keep = idx != padding_idx if padding_idx >= 0 else np.ones(idx.shape, bool)
    dim = w.shape[1]
    rows = w[idx]
    if per_sample_weights is not None:
        rows = rows * _work(per_sample_weights).reshape(-1, 1)
    count = np.bincount(bag[keep], minlength=bags).astype(np.int64)
    out = np.zeros((bags, dim), w.dtype)
    max_idx = np.zeros((bags,), np.int64)
    if mode == _MAX:
        out = np.full((bags, dim), -np.inf, w.dtype)
        max_idx = np.zeros((bags, dim), np.int64)
        for i in np.nonzero(keep)[0]:
            better = rows[i] > out[bag[i]]
            out[bag[i]] = np.where(better, rows[i], out[bag[i]])
            max_idx[bag[i]] = np.where(better, idx[i], max_idx[bag[i]])
        out[count == 0] = 0
    else:
        add_rows(out, bag[keep], rows[keep])
        if mode == _MEAN:
            out = out / np.maximum(count, 1)[:, None]
    inner = weight.strides[1] // weight.itemsize if weight.shape[1] > 1 else 1
    offset2bag = np.zeros(0, np.int64) if _no_offset2bag(weight.dtype, mode, padding_idx,
                                                         inner) else bag
    bag_size = count if mode != _SUM else np.zeros(bags, np.int64)
    if mode == _MEAN:
        max_idx = count.copy()
    return (out.astype(weight.dtype, copy=False), offset2bag, bag_size, max_idx)


def _eb_meta(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
             per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    from .. import _dtype

    if len(indices.shape) != 1:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{len(indices.shape)}")
    if per_sample_weights is not None and mode != _SUM:
        raise NotImplementedError("embedding_bag: per_sample_weights was not None. "
                                  "per_sample_weights is only supported for mode='sum' (got "
                                  f"mode='{('sum', 'mean', 'max')[mode]}'). Please open a "
                                  "feature request on GitHub.")
    bags = offsets.shape[0] - (1 if include_last_offset else 0)
    dim = weight.shape[1]
    inner = weight.stride()[1] if weight.shape[1] > 1 else 1
    sum_plain = _no_offset2bag(weight.dtype.np, mode, padding_idx, inner)
    i64 = _dtype.int64
    return (Spec((bags, dim), weight.dtype),
            Spec((0,) if sum_plain else (indices.shape[0],), i64), Spec((bags,), i64),
            Spec((bags, dim) if mode == _MAX else (bags,), i64))


def _eb_save(out, weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
             per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    """What the derivative reads: the indices, the bag of each, each lookup's gradient scale
    and (mode max) which bags are not empty. Computed in tensor ops from the indices and
    offsets (not from their arrays), so a tracer (AOT autograd, on fake tensors) records how
    they are made and the graph recomputes them for each run's indices; on meta tensors they
    come out as meta tensors."""
    if not _active.modes and indices._data is not None and weight._data is not None:
        return _eb_save_eager(out, weight, indices, offsets, scale_grad_by_freq, mode, sparse,
                              per_sample_weights, include_last_offset, padding_idx)
    i64 = _dtype.int64
    idx = indices.reshape(-1).to(i64)
    n = idx.shape[0]
    off = offsets.to(device=idx.device, dtype=i64)  # (2-d meta indices: cpu offsets)
    bags = off.shape[0] - (1 if include_last_offset else 0)
    # bag of position i: how many bags after the first start at or before it (the last bag
    # runs to the end, past a closing offset, as the kernel's `_bags`)
    starts = off[1:bags]
    marks = idx.new_zeros((n + 1,)).index_add(0, starts, starts.new_ones(()).expand(
        starts.shape[0]))
    bag = marks[:n].cumsum(0)
    keep = idx != padding_idx if padding_idx >= 0 else idx.new_ones(()).bool().expand(n)
    # the scales in double, rounded once to the weight's dtype
    scale = keep.to(_dtype.float64)
    count = idx.new_zeros((bags,)).index_add(0, bag, keep.to(i64))
    if mode == _MEAN:
        scale = scale / count.clamp(min=1).index_select(0, bag)
    if scale_grad_by_freq and mode != _MAX:
        scale = scale / _bag_frequencies(idx, weight.shape[0])
    need_psw = per_sample_weights is not None and per_sample_weights.requires_grad
    filled = (count > 0).to(weight.dtype).unsqueeze(1) if mode == _MAX else None
    return (tuple(weight.shape), idx, bag, scale.to(weight.dtype), mode,
            out[3] if mode == _MAX else None, filled, per_sample_weights,
            weight if need_psw else None, bool(sparse), int(padding_idx))


def _eb_save_eager(out, weight, indices, offsets, scale_grad_by_freq, mode, sparse,
                   per_sample_weights, include_last_offset, padding_idx) -> tuple:
    """`_eb_save`'s values computed on the arrays: in eager mode, where no tracer needs their
    ops, about a dozen dispatches fewer (they tripled the op's time)."""
    idx = indices._data.reshape(-1).astype(np.int64)
    bag, bags = _bags(idx, offsets._data, include_last_offset)
    keep = (idx != padding_idx) if padding_idx >= 0 else np.ones(idx.shape, bool)
    count = np.bincount(bag[keep], minlength=bags)
    scale = keep.astype(np.float64)
    if mode == _MEAN:
        scale = scale / np.maximum(count, 1)[bag]
    if scale_grad_by_freq and mode != _MAX:
        ordered = np.sort(idx)
        distinct, occurrences = np.unique(ordered, return_counts=True)
        at_position = np.repeat(occurrences, occurrences)  # occurrences of ordered[i]
        scale = scale / at_position[np.searchsorted(distinct, idx)]
    wdt = weight._data.dtype
    need_psw = per_sample_weights is not None and per_sample_weights.requires_grad
    return (tuple(weight.shape), _const(idx), _const(bag), _const(scale.astype(wdt)), mode,
            out[3] if mode == _MAX else None,
            _const((count > 0).astype(wdt)[:, None]) if mode == _MAX else None,
            per_sample_weights, weight if need_psw else None, bool(sparse), int(padding_idx))


def _bag_frequencies(idx, num_weights: int):
    """The divisor of each index's gradient under scale_grad_by_freq, as PyTorch's CPU
    backward of embedding_bag computes it: the k-th distinct index (in sorted order) is
    divided by the number of occurrences of the index at the k-th position of the sorted
    indices (not always its own count). In tensor ops of static shapes (a tracer's fake
    indices have no values): counts over the weight's rows."""
    counts = idx.new_zeros((num_weights,)).index_add(0, idx, idx.new_ones(()).expand(
        idx.shape[0]))
    rank = (counts > 0).to(idx.dtype).cumsum(0).index_select(0, idx) - 1  # among distinct
    ordered = idx.sort()[0]
    return counts.index_select(0, ordered.index_select(0, rank)).to(_dtype.float64)


def _eb_derivative(grads, wshape, idx, bag, scale, mode, max_idx, filled, psw, weight,
                   sparse=False, padding_idx=-1):
    g = grads[0] if isinstance(grads, (list, tuple)) else grads
    n, dim = wshape
    zeros = g.new_zeros((n, dim))
    if mode == _MAX:
        # an empty bag's index 0 is not a maximum: its gradient must not land on row 0
        gw = zeros.scatter_add(0, max_idx, g * filled.to(g.dtype))
        return (gw, None, None, None, None, None, None, None, None)
    rows = g.index_select(0, bag) * scale.unsqueeze(1).to(g.dtype)
    if psw is not None:
        rows = rows * psw.reshape(-1, 1)
    if sparse:  # PyTorch's sparse gradient: one entry per looked-up index but the padding
        gw = sparse_weight_grad(rows, idx._data, n, padding_idx)
    else:
        gw = zeros.index_add(0, idx, rows)
    gpsw = None
    if weight is not None:
        gpsw = (g.index_select(0, bag) * weight.index_select(0, idx)).sum(1) * (
            scale.to(g.dtype) != 0)
    return (gw, None, None, None, None, None, gpsw, None, None)


def _eb_samples(rng, dt):
    idx = np.array([1, 2, 3, 4, 1, 0])
    off = np.array([0, 2, 2, 5])
    out = []
    for mode in (_SUM, _MEAN, _MAX):
        for pad in (-1, 1):
            out.append(Sample((rand_array(rng, (10, 3), dt), idx, off, False, mode, False,
                               None, False, pad), name=f"mode {mode} pad {pad}"))
    # (indices past the last offset are bagged differently by PyTorch's float32 and float64
    # kernels; the sample ends its last bag at the end)
    out.append(Sample((rand_array(rng, (10, 3), dt), idx, np.array([0, 2, 2, 6]), False, _SUM,
                       False, rand_array(rng, (6,), dt), True, -1), name="weights, last offset"))
    return out


embedding_bag = _register_multi(
    "_embedding_bag", kernel=_eb_kernel, meta=_eb_meta, node="EmbeddingBagBackward0",
    derivative=_eb_derivative, save=_eb_save, samples=_eb_samples,
    nondiff_outputs=(1, 2, 3), optional=(6,), public="embedding_bag", nondiff_args=(1, 2),
    forward_ad="unsupported",
    saved_names=("", "indices", "offset2bag", "", "mode", "maximum_indices", "",
                 "per_sample_weights", "", "sparse", "padding_idx"), onnx=ox.embedding_bag)
