"""In-place metadata ops (`squeeze_`, `unsqueeze_`, `t_`: the tensor's geometry changes, no
data moves, as `transpose_` in ops/rnn.py) and the `unfold` view (sliding windows)."""

from __future__ import annotations

import numpy as np

from .._shapes import contiguous_strides, like_strides
from . import _onnx as ox
from ._util import Spec, rand_array, wrap_dim
from .misc import unique_dim_check, unique_slices
from .registry import Sample, register
from .views import (
    _squeeze_kernel,
    _squeeze_meta,
    _t_kernel,
    _t_meta,
    _unsqueeze_kernel,
    _unsqueeze_meta,
    elem_strides,
)


def _squeeze_(name, node, dims_sample):
    return register(
        name, kernel=_squeeze_kernel, meta=_squeeze_meta, inplace=True, metadata_only=True,
        node=node, derivative=lambda g, shape: (g.reshape(shape), None),
        save=lambda out, a, dims=None: (tuple(a.shape),),
        samples=lambda rng, dt: [Sample((rand_array(rng, s, dt),) + dims_sample)
                                 for s in ((3, 1, 4), (1, 1), (1, 0, 1))],
        public="squeeze_")


squeeze_ = _squeeze_("squeeze_", "SqueezeBackward3", ())
# `squeeze_.dim` lives in ops/views.py (`squeeze_inplace`).
squeeze_dims_ = _squeeze_("squeeze_.dims", "SqueezeBackward5", ((0, -1),))

unsqueeze_ = register(
    "unsqueeze_", kernel=_unsqueeze_kernel, meta=_unsqueeze_meta, inplace=True,
    metadata_only=True, node="UnsqueezeBackward1",
    derivative=lambda g, dim, n: (g.squeeze(wrap_dim(dim, n + 1)), None),
    save=lambda out, a, dim: (dim, a.dim()),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), d)) for s, d in (
        ((3, 4), 0), ((3, 4), -1), ((), 0))],
    saved_names=("dim", ""))

t_ = register(
    "t_", kernel=_t_kernel, meta=_t_meta, inplace=True, metadata_only=True, node="TBackward1",
    derivative=lambda g: (g.t(),),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt),)) for s in ((3, 4), (5,))])


# ---------------------------------------------------------------- unfold (a view)


def _unfold_geometry(shape, strides, dim, size, step):
    n = len(shape)
    d = wrap_dim(dim, n)
    length = shape[d] if n else 1
    if size > length:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {length} but size is "
                           f"{size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    count = (length - size) // step + 1
    if not n:
        return (size,), (1,)
    new_shape = tuple(shape[:d]) + (count,) + tuple(shape[d + 1:]) + (size,)
    new_strides = tuple(strides[:d]) + (strides[d] * step,) + tuple(strides[d + 1:]) + (
        strides[d],)
    return new_shape, new_strides


def _unfold_kernel(a, dim, size, step):
    st = elem_strides(a)
    shape, strides = _unfold_geometry(a.shape, st, dim, size, step)
    item = a.itemsize
    return np.lib.stride_tricks.as_strided(
        a, shape, tuple(s * item for s in strides), writeable=a.flags.writeable)


def _unfold_meta(a, dim, size, step):
    shape, strides = _unfold_geometry(tuple(a.shape), elem_strides(a), dim, size, step)
    return Spec(shape, a.dtype, strides)


unfold = register(
    "unfold", kernel=_unfold_kernel, meta=_unfold_meta, view=True, node="UnfoldBackward0",
    derivative=lambda g, shape, dim, size, step: (
        _unfold_backward(g, shape, dim, size, step), None, None, None),
    save=lambda out, a, dim, size, step: (tuple(a.shape), dim, size, step),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), d, n, k)) for s, d, n, k in (
        ((7,), 0, 3, 2), ((3, 8), 1, 2, 1), ((4, 5), 0, 4, 3), ((), 0, 1, 1), ((6, 2), -2, 2, 2))],
    saved_names=("self_sym_sizes", "dimension", "size", "step"), onnx=ox.unfold)


def _unfold_backward(g, shape, dim, size, step):
    """Sum each window position's gradient into the input: one `index_add` over the
    flattened window index (so the derivative is itself differentiable)."""
    from .._creation import arange, zeros

    n = len(shape)
    if not n:
        return g.reshape(())
    d = wrap_dim(dim, n)
    count = g.shape[d]
    # (from factories and ops, not an array: a tracer records how the index is made)
    idx = (arange(count)[:, None] * step + arange(size)[None, :]).reshape(-1)
    # g: shape[:d] + (count,) + shape[d+1:] + (size,) -> move window dim next to count.
    gm = g.movedim(-1, d + 1).flatten(d, d + 1)
    out = zeros(shape, dtype=g.dtype)
    return out.index_add(d, idx, gm)


# ---------------------------------------------------------------- rot90, block_diag, narrow_copy


def _rot90_dims(ndim, k, dims):
    dims = tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {ndim}")
    d0, d1 = wrap_dim(dims[0], ndim), wrap_dim(dims[1], ndim)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and "
                           f"dim1 = {d1}")
    return d0, d1


def _rot90_flips(k: int, d0: int, d1: int) -> tuple:
    # PyTorch's rotation by k quarter turns: a flip of these dims, then (odd k) a transpose
    return ((), (d1,), (d0, d1), (d0,))[k % 4]


def _rot90_kernel(a, k=1, dims=(0, 1)):
    d0, d1 = _rot90_dims(a.ndim, k, dims)
    if k % 4 == 0:
        return np.array(a, order="C")  # (a contiguous copy, as PyTorch's clone)
    flipped = np.flip(a, _rot90_flips(k, d0, d1))
    # The flip is laid out as `empty_like(a)` is; an odd k transposes it (a strided result).
    out = np.ndarray(a.shape, a.dtype, buffer=np.empty(a.size, a.dtype), strides=tuple(
        v * a.itemsize for v in like_strides(a.shape, elem_strides(a))))
    out[...] = flipped
    return out.swapaxes(d0, d1) if k % 2 else out


def _rot90_meta(a, k=1, dims=(0, 1)):
    d0, d1 = _rot90_dims(len(a.shape), k, dims)
    shape = list(a.shape)
    if k % 4 == 0:
        return Spec(tuple(shape), a.dtype, contiguous_strides(shape))
    strides = list(like_strides(tuple(shape), tuple(a.stride())))
    if k % 2:
        shape[d0], shape[d1] = shape[d1], shape[d0]
        strides[d0], strides[d1] = strides[d1], strides[d0]
    return Spec(tuple(shape), a.dtype, tuple(strides))


rot90 = register(
    "rot90", kernel=_rot90_kernel, meta=_rot90_meta, node="Rot90Backward0",
    derivative=lambda g, k, dims: (g.rot90(-k, dims), None, None),
    save=lambda out, a, k=1, dims=(0, 1): (k, tuple(dims)), saved_names=("k", "dims"),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), k, d)) for s, k, d in (
        ((3, 4), 1, (0, 1)), ((3, 4), 2, (0, 1)), ((2, 3, 4), -1, (2, 0)), ((3, 4), 4, (1, 0)),
        ((2, 3), 3, (0, 1)))])


def _block_shape(shape):
    if len(shape) > 2:
        raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. "
                           f"Input 0 has {len(shape)} dimensions")
    if len(shape) == 0:
        return (1, 1)
    return (1, shape[0]) if len(shape) == 1 else tuple(shape)


def _block_diag_kernel(tensors):
    from ._util import result_np

    dt = result_np(*tensors) if tensors else np.dtype(np.float32)
    blocks = [np.asarray(t).reshape(_block_shape(np.shape(t))) for t in tensors]
    rows = sum(b.shape[0] for b in blocks)
    cols = sum(b.shape[1] for b in blocks)
    out = np.zeros((rows, cols), dt)
    r = c = 0
    for b in blocks:
        out[r:r + b.shape[0], c:c + b.shape[1]] = b
        r, c = r + b.shape[0], c + b.shape[1]
    return out


def _block_diag_meta(tensors):
    from .. import _dtype

    for i, t in enumerate(tensors):
        if len(t.shape) > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer "
                               f"dimensions. Input {i} has {len(t.shape)} dimensions")
    shapes = [_block_shape(tuple(t.shape)) for t in tensors]
    dt = _dtype.result_type(*tensors) if tensors else _dtype.get_default_dtype()
    return Spec((sum(s[0] for s in shapes), sum(s[1] for s in shapes)), dt)


def _block_diag_derivative(g, shapes):
    grads = []
    r = c = 0
    for s in shapes:
        h, w = _block_shape(s)
        grads.append(g[r:r + h, c:c + w].reshape(s))
        r, c = r + h, c + w
    return (grads,)


block_diag = register(
    "block_diag", kernel=_block_diag_kernel, meta=_block_diag_meta, list_arg=True,
    node="BlockDiagBackward0", derivative=_block_diag_derivative,
    save=lambda out, ts: ([tuple(t.shape) for t in ts],),
    samples=lambda rng, dt: [
        Sample(([rand_array(rng, (2, 3), dt), rand_array(rng, (4,), dt),
                 rand_array(rng, (), dt)],)),
        Sample(([rand_array(rng, (1, 2), dt)],), name="one")], onnx=ox.block_diag)


def _narrow_check(shape, dim, start, length):
    # PyTorch's checks, in its order (its message names the start wrapped)
    if not shape:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    if dim >= len(shape):  # (its kernel's own check, before the dim is wrapped)
        raise RuntimeError("Expected dim < static_cast<int64_t>(self_sizes.size()) to be true, "
                           "but got false.  (Could this error message be improved?  If so, "
                           "please report an enhancement request to PyTorch.)")
    d = wrap_dim(dim, len(shape))
    size = shape[d]
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], "
                         f"but got {start})")
    s = start + size if start < 0 else start
    if length < 0 or s + length > size:
        raise RuntimeError(f"start ({s}) + length ({length}) exceeds dimension size "
                           f"({size}).")
    return d, s


def _narrow_copy_kernel(a, dim, start, length):
    d, s = _narrow_check(a.shape, dim, start, length)
    return np.ascontiguousarray(np.take(a, np.arange(s, s + length), axis=d))


def _narrow_copy_meta(a, dim, start, length):
    d, _ = _narrow_check(tuple(a.shape), dim, start, length)
    shape = list(a.shape)
    shape[d] = length
    return Spec(tuple(shape), a.dtype)


def _narrow_copy_derivative(g, shape, dim, start):
    from .._creation import zeros

    d, s = _narrow_check(shape, dim, start, g.shape[wrap_dim(dim, len(shape))])
    return (zeros(shape, dtype=g.dtype).slice_scatter(g, d, s, s + g.shape[d]), None, None,
            None)


narrow_copy = register(
    "narrow_copy", kernel=_narrow_copy_kernel, meta=_narrow_copy_meta,
    node="NarrowCopyBackward0", derivative=_narrow_copy_derivative,
    save=lambda out, a, dim, start, length: (tuple(a.shape), dim, start),
    saved_names=("self_sym_sizes", "dim", "start"),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), d, st, n)) for s, d, st, n in (
        ((3, 4), 1, 0, 2), ((5, 2), 0, -3, 2), ((4,), 0, 4, 0))])


# ---------------------------------------------------------------- unique_consecutive


def _unique_consecutive_kernel(a, return_inverse=False, return_counts=False, dim=None):
    if dim is not None:
        return unique_slices(a, dim, False)
    flat = a.reshape(-1)
    starts = np.ones(flat.size, bool)
    if flat.size:
        starts[1:] = flat[1:] != flat[:-1]
    empty = np.zeros(0, np.int64)
    inverse = (np.cumsum(starts) - 1).reshape(a.shape).astype(np.int64)
    counts = np.diff(np.append(np.flatnonzero(starts), flat.size)).astype(np.int64)
    return (flat[starts].copy(), inverse if return_inverse else empty,
            counts if return_counts else empty)


def _unique_consecutive_meta(a, return_inverse=False, return_counts=False, dim=None):
    from .._fake import DataDependentOutputError

    if dim is not None:
        unique_dim_check(tuple(a.shape), dim)

    raise DataDependentOutputError(
        "unique_consecutive: the output shape depends on the input values (data-dependent "
        "output)")


def _unique_consecutive_derivative(g, *rest):
    raise NotImplementedError("the derivative for 'unique_consecutive' is not implemented.")


_unique_consecutive_derivative.not_implemented = True

unique_consecutive = register(
    "unique_consecutive", kernel=_unique_consecutive_kernel, meta=_unique_consecutive_meta,
    node="UniqueConsecutiveBackward0", derivative=_unique_consecutive_derivative,
    save=lambda out, a, *args: (), gradcheck=False, nondiff_outputs=(1, 2),
    samples=lambda rng, dt: [
        Sample((rng.integers(0, 3, (8,)).astype(dt), True, True), name="all"),
        Sample((rng.integers(0, 3, (2, 4)).astype(dt), False, True), name="counts"),
        Sample((rng.integers(0, 3, (5,)), True, False), name="int inverse"),
        Sample((rng.integers(0, 2, (6, 2)).astype(dt), True, True, 0), name="dim 0"),
        Sample((rng.integers(0, 2, (2, 3, 6)).astype(dt), False, True, -1), name="dim -1"),
        Sample((np.array([[-0.0, np.nan], [0.0, np.nan]], dt), True, True, 0), name="-0, nan")])
