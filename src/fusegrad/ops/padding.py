"""Padding ops: `constant_pad_nd` and the reflection / replication pads (1-D to 3-D), each
with PyTorch's backward node (`ConstantPadNdBackward0`, `ReflectionPad2DBackward0` ...).

Reflection and replication pads are *separable index maps*: along each padded axis, output
position j reads input position idx[j]. The kernel gathers along each axis in turn, and the
adjoint (the `*_backward` ops, each differentiated by its forward op) sums the gradient back
along each axis. `gather_axes` and `scatter_axes` are shared with the upsampling ops, where
each output position reads a few weighted taps instead of one.
"""

from __future__ import annotations

import numpy as np

from . import _onnx as ox
from ._util import (
    F32,
    HALF,
    Spec,
    array_format,
    dense_order,
    elem_strides,
    format_of,
    format_strides,
    in_format,
    infer_dense_strides,
    input_format,
    rand_array,
    refuse_dtypes,
    size_str,
    strided_copy,
)
from .registry import Sample, register


def _call(op, *args):
    from .._dispatch import call

    return call(op, *args)


# ---------------------------------------------------------------- separable index maps

# A tap list for one axis: (idx, w), idx an int64 array (T, n_out) of input positions and w
# the (T, n_out) weights of those positions (None for a plain gather with T == 1).


def gather_axes(x: np.ndarray, taps: list) -> np.ndarray:
    """Resample the last len(taps) axes of `x`: out[..., j, ...] = sum_t w[t, j] x[idx[t, j]]."""
    k = len(taps)
    for i, (idx, w) in enumerate(taps):
        axis = x.ndim - k + i
        if w is None:
            x = np.take(x, idx[0], axis=axis)
            continue
        shape = [1] * x.ndim
        shape[axis] = -1
        acc = None
        for t in range(idx.shape[0]):  # over the 2 or 4 taps, each a whole-array gather
            term = np.take(x, idx[t], axis=axis) * w[t].reshape(shape)
            acc = term if acc is None else acc + term
        x = acc
    return x


def _sum_into(out: np.ndarray, axis: int, idx: np.ndarray, vals: np.ndarray) -> None:
    """out[..., idx[j], ...] += vals[..., j, ...] along `axis`, repeated indices summed."""
    o = np.moveaxis(out, axis, 0)
    v = np.moveaxis(vals, axis, 0)
    if idx.size == 0:
        return
    order = None
    if np.any(idx[1:] < idx[:-1]):  # reflections run backwards: sort once (stable)
        order = np.argsort(idx, kind="stable")
        idx = idx[order]
        v = v[order]
    # Runs of equal indices are contiguous now: one reduceat sums each run.
    starts = np.flatnonzero(np.concatenate(([True], idx[1:] != idx[:-1])))
    o[idx[starts]] += np.add.reduceat(v, starts, axis=0)


def scatter_axes(g: np.ndarray, taps: list, in_sizes: list) -> np.ndarray:
    """The adjoint of `gather_axes`: gradients summed back onto the input positions."""
    k = len(taps)
    for i in reversed(range(k)):
        idx, w = taps[i]
        axis = g.ndim - k + i
        n_out = idx.shape[1]
        shape = list(g.shape)
        if w is None and _is_repeat(idx[0], in_sizes[i]):
            # Each input position is read by `r` consecutive outputs: a reshape and a sum.
            r = n_out // in_sizes[i]
            v = g.reshape(shape[:axis] + [in_sizes[i], r] + shape[axis + 1:])
            # (the r copies added in turn: a sum over a short strided axis is several times
            # slower, and adds in the same order)
            take: list = [slice(None)] * v.ndim
            take[axis + 1] = 0
            g = v[tuple(take)].copy()
            for t in range(1, r):
                take[axis + 1] = t
                g += v[tuple(take)]
            continue
        shape[axis] = in_sizes[i]
        out = np.zeros(shape, dtype=g.dtype)
        wshape = [1] * g.ndim
        wshape[axis] = -1
        for t in range(idx.shape[0]):  # over the taps, each a whole-array scatter
            vals = g if w is None else g * w[t].reshape(wshape)
            _sum_into(out, axis, idx[t], vals)
        g = out
    return g


def _is_repeat(idx: np.ndarray, n_in: int) -> bool:
    """Whether idx is [0]*r + [1]*r + ... + [n_in-1]*r for an integer r >= 1."""
    n_out = idx.shape[0]
    if n_in == 0 or n_out % n_in:
        return False
    return bool(np.array_equal(idx, np.arange(n_out) // (n_out // n_in)))


# ---------------------------------------------------------------- constant_pad_nd


def _check_pad_length(shape: tuple, pad) -> None:
    if len(pad) % 2:
        raise RuntimeError(f"Length of pad must be even but instead it equals {len(pad)}")
    if len(pad) // 2 > len(shape):
        raise RuntimeError(
            "Length of pad should be no more than twice the number of dimensions of the "
            f"input. Pad length is {len(pad)}while the input has {len(shape)}dimensions.")


def _constant_pad_shape(shape: tuple, pad) -> tuple:
    _check_pad_length(shape, pad)
    out = list(shape)
    for k in range(len(pad) // 2):
        dim = len(shape) - 1 - k
        before, after = pad[2 * k], pad[2 * k + 1]
        if shape[dim] + min(before, 0) + min(after, 0) < 0:  # cropped past the other side
            raise RuntimeError("narrow(): length must be non-negative.")
        out[dim] = shape[dim] + before + after
        if out[dim] < 0:
            raise RuntimeError(f"The input size {shape[dim]}, plus negative padding "
                               f"{before} and {after} resulted in a negative output size, "
                               f"which is invalid. Check dimension {dim} of your input.")
    return tuple(out)


def _crop_strides(shape: tuple, strides: tuple) -> tuple:
    """The strides of the clone of a crop (of `shape`, with the input's `strides`): kept
    when the crop is dense, else PyTorch's `infer_dense_strides`, as its `clone` does."""
    return strides if dense_order(shape, strides) is not None else infer_dense_strides(
        shape, strides)


def _constant_pad_kernel(a, pad, value=0):
    _constant_pad_shape(a.shape, pad)
    crop = [slice(None)] * a.ndim
    widths = [(0, 0)] * a.ndim
    for k in range(len(pad) // 2):
        dim = a.ndim - 1 - k
        before, after = pad[2 * k], pad[2 * k + 1]
        crop[dim] = slice(max(-before, 0), a.shape[dim] - max(-after, 0))
        widths[dim] = (max(before, 0), max(after, 0))
    x = a[tuple(crop)]
    if all(p <= 0 for p in pad):
        # Nothing added: PyTorch crops (narrow) and clones, keeping the input's layout.
        return strided_copy(x, _crop_strides(x.shape, elem_strides(x)))
    fill = np.array(value).astype(a.dtype)  # the value in the tensor's dtype, as PyTorch
    return in_format(np.pad(x, widths, constant_values=fill), array_format(a))


def _constant_pad_meta(a, pad, value=0):
    shape = _constant_pad_shape(tuple(a.shape), pad)
    if all(p <= 0 for p in pad):  # a crop's clone (a crop keeps the input's strides)
        return Spec(shape, a.dtype, _crop_strides(shape, tuple(a.stride())))
    return Spec(shape, a.dtype, format_strides(shape, format_of(a)))


def _constant_pad_samples(rng, dt):
    cases = [((2, 3, 4), [1, 2]), ((2, 3, 4), [1, 0, 2, 1], 1.5), ((3, 5), [-1, 2, 0, -1]),
             ((2, 3, 4, 5), [1, 1, 1, 1, 1, 1, 1, 1]), ((4,), [0, 0]), ((2, 5), [-2, -3])]
    return [Sample((rand_array(rng, c[0], dt), c[1]) + c[2:], name=f"{c[0]} {c[1]}")
            for c in cases]


# Every pad lays its result out in the memory format its input suggests (as PyTorch's
# kernels; contiguous for other layouts), a constant pad that only crops in the input's
# order of dims; a reflection or replication pad's input gradient takes the input's format.
constant_pad_nd = register(
    "constant_pad_nd", kernel=_constant_pad_kernel, meta=_constant_pad_meta,
    node="ConstantPadNdBackward0",
    # Padding by p and cropping by -p are adjoint: the derivative is the op itself.
    derivative=lambda g, pad: (_call(constant_pad_nd, g, [-p for p in pad], 0), None, None),
    save=lambda out, a, pad, value=0: (list(pad),),
    samples=_constant_pad_samples, public="constant_pad_nd", onnx=ox.constant_pad)

# ---------------------------------------------------------------- reflection and replication


def _pad_index(n: int, before: int, after: int, mode: str) -> np.ndarray:
    """The input position each output position of one padded axis reads."""
    p = np.arange(-before, n + after, dtype=np.int64)
    if mode == "reflect":
        p = np.abs(p)  # mirror at the first element, then at the last
        p = np.where(p > n - 1, 2 * (n - 1) - p, p)
        return p
    return np.clip(p, 0, n - 1)


def _pad_taps(shape: tuple, padding, mode: str) -> list:
    k = len(padding) // 2
    taps = []
    for i in range(k):  # axes in order; padding lists the last axis first
        n = shape[len(shape) - k + i]
        j = k - 1 - i
        taps.append((_pad_index(n, padding[2 * j], padding[2 * j + 1], mode)[None], None))
    return taps


def _pad_meta_shape(shape: tuple, padding, mode: str, k: int) -> tuple:
    """Output shape of a k-D reflection/replication pad, with PyTorch's errors."""
    ndim = len(shape)
    if ndim not in (k + 1, k + 2) or 0 in shape[ndim - k - 1:]:  # only the batch may be 0
        if k == 1:
            want = "2D or 3D (batch mode)"
        elif k == 2:
            want = "3D or 4D (batch mode)"
        else:
            want = "4D or 5D (batch mode)"
        raise RuntimeError(f"Expected {want} tensor with possibly 0 batch size and other "
                           f"non-zero dimensions for input, but got: {size_str(shape)}")
    out = list(shape)
    for i in range(k):
        dim = ndim - 1 - i
        before, after = padding[2 * i], padding[2 * i + 1]
        if mode == "reflect" and (before >= shape[dim] or after >= shape[dim]):
            raise RuntimeError(
                f"Argument #{4 + 2 * i}: Padding size should be less than the corresponding "
                f"input dimension, but got: padding ({before}, {after}) at dimension {dim} "
                f"of input {size_str(shape)}")
        out[dim] = shape[dim] + before + after
    if k == 1 and out[-1] < 1:
        raise RuntimeError(f"input (W: {shape[-1]}) is too small. Calculated output W: "
                           f"{out[-1]}")
    if any(s < 0 for s in out):
        neg = next(s for s in out if s < 0)
        raise RuntimeError(f"Trying to create tensor with negative dimension {neg}: "
                           f"{size_str(out)}")
    return tuple(out)


def _pad_kernel(mode: str, k: int):
    def kernel(a, padding):
        _pad_meta_shape(a.shape, padding, mode, k)
        return gather_axes(a, _pad_taps(a.shape, padding, mode))

    return kernel


def _pad_spec(a, padding, mode: str, k: int) -> Spec:
    shape = _pad_meta_shape(tuple(a.shape), padding, mode, k)
    return Spec(shape, a.dtype, format_strides(shape, format_of(a)))


def _fold_axis(g: np.ndarray, axis: int, n: int, before: int, after: int,
               mode: str) -> np.ndarray:
    """The adjoint of one axis' non-negative reflection/replication pad, by slices: the
    middle, plus each pad added back where it was read (in PyTorch's order of sums: the
    left pad, the middle, then the right pad one position at a time)."""
    def at(start, stop, step=None):
        index = [slice(None)] * g.ndim
        index[axis] = slice(start, stop, step)
        return tuple(index)

    out = g[at(before, before + n)].copy()
    if mode == "reflect":  # (the meta has checked both pads are below n)
        if before:  # output j < before read input before - j
            out[at(1, before + 1)] += g[at(before - 1, None, -1)]
        if after:  # output before + n + m read input n - 2 - m
            out[at(n - 1 - after, n - 1)] += g[at(before + n + after - 1, before + n - 1, -1)]
        return out
    if before:  # every left pad reads the first position
        acc = g[at(0, 1)].copy()
        for j in range(1, before):
            acc += g[at(j, j + 1)]
        out[at(0, 1)] += acc
    for m in range(after):  # every right pad reads the last one
        out[at(n - 1, n)] += g[at(before + n + m, before + n + m + 1)]
    return out


def _pad_backward_kernel(mode: str, k: int):
    def kernel(g, a, padding):
        if all(p >= 0 for p in padding):
            # By slices, an axis at a time from the last (no index arrays to sort and sum)
            gi = _work(g)
            for i in range(k):
                axis = g.ndim - 1 - i
                gi = _fold_axis(gi, axis, a.shape[axis], padding[2 * i], padding[2 * i + 1],
                                mode)
        else:
            taps = _pad_taps(a.shape, padding, mode)
            gi = scatter_axes(_work(g), taps, list(a.shape[a.ndim - k:]))
        return in_format(gi.astype(g.dtype, copy=False), array_format(a))

    return kernel


def _work(a: np.ndarray) -> np.ndarray:
    """Half types are summed in float32, as PyTorch's CPU kernels do."""
    return a.astype(F32) if a.dtype in HALF else a


def _pad_samples(k: int, mode: str, backward: bool = False):
    cases = {1: [((2, 3, 6), [2, 3]), ((3, 5), [1, 0]), ((1, 2, 6), [-1, 3]),
                 ((2, 2, 4), [3, -2])],
             2: [((2, 3, 4, 5), [1, 2, 3, 1]), ((2, 4, 4), [3, 0, 1, 2]),
                 ((1, 2, 5, 6), [-1, 2, 2, -2])],
             3: [((1, 2, 3, 4, 5), [1, 2, 2, 1, 1, 2]), ((2, 4, 3, 5), [2, 1, 0, 2, 2, 0]),
                 ((1, 1, 4, 3, 4), [-1, 2, 1, -1, 3, 1])]}[k]

    def samples(rng, dt):
        out = []
        for shape, pad in cases:
            x = rand_array(rng, shape, dt)
            if not backward:
                out.append(Sample((x, pad), name=f"{shape} {pad}"))
                continue
            oshape = _pad_meta_shape(shape, pad, mode, k)
            out.append(Sample((rand_array(rng, oshape, dt), x, pad), name=f"{shape} {pad}"))
        return out

    return samples


def _register_pads(prefix: str, node: str, mode: str) -> dict:
    ops = {}
    for k in (1, 2, 3):
        fwd_name = f"{prefix}{k}d"
        bwd_name = f"{prefix}{k}d_backward"
        holder: dict = {}
        bwd = register(
            bwd_name, kernel=_pad_backward_kernel(mode, k),
            meta=lambda g, a, padding: Spec(tuple(a.shape), g.dtype, format_strides(
                tuple(a.shape), format_of(a))),
            node=f"{node}{k}DBackwardBackward0",
            # The adjoint of the adjoint is the pad again; `self` only gives the shape (its
            # gradient is zero, as PyTorch's).
            derivative=lambda gg, padding, shape, h=holder: (
                _call(h["fwd"], gg, padding), gg.new_zeros(shape), None),
            save=lambda out, g, a, padding: (tuple(padding), tuple(a.shape)),
            samples=_pad_samples(k, mode, backward=True), public=bwd_name,
            saved_names=("padding", ""))
        fwd = register(
            fwd_name, kernel=input_format(_pad_kernel(mode, k)),
            meta=lambda a, padding, mode=mode, k=k: _pad_spec(a, padding, mode, k),
            node=f"{node}{k}DBackward0",
            derivative=lambda g, a, padding, b=bwd: (_call(b, g, a, padding), None),
            # The input itself (its gradient's node then reaches it, as PyTorch's: a double
            # backward finds it, with a zero gradient); its padding as a tuple.
            save=lambda out, a, padding: (a, tuple(padding)),
            saved_names=("self", "padding"),
            samples=_pad_samples(k, mode), public=fwd_name,
            onnx=ox.mode_pad("reflect" if mode == "reflect" else "edge"),
            # PyTorch's CPU autocast runs these in float32, all but reflection_pad3d.
            autocast=None if fwd_name == "reflection_pad3d" else "fp32")
        holder["fwd"] = fwd
        ops[fwd_name], ops[bwd_name] = fwd, bwd
    return ops


_REFLECTION = _register_pads("reflection_pad", "ReflectionPad", "reflect")
_REPLICATION = _register_pads("replication_pad", "ReplicationPad", "replicate")
reflection_pad1d = _REFLECTION["reflection_pad1d"]
reflection_pad2d = _REFLECTION["reflection_pad2d"]
reflection_pad3d = _REFLECTION["reflection_pad3d"]
replication_pad1d = _REPLICATION["replication_pad1d"]
replication_pad2d = _REPLICATION["replication_pad2d"]
replication_pad3d = _REPLICATION["replication_pad3d"]

# PyTorch's reflection and replication kernels have no bool forms.
for _name, _op in (*_REFLECTION.items(), *_REPLICATION.items()):
    if _name[-1] == "d":  # (the forward ops, not their backward ones)
        refuse_dtypes(_op, _name, "b")
