"""Normalisation ops PyTorch records as one node: native_batch_norm, native_layer_norm and
native_group_norm (`NativeBatchNormBackward0`, `NativeLayerNormBackward0`,
`NativeGroupNormBackward0`).

As ATen's, each returns the output with the statistics the backward reads (the saved mean and
inverse standard deviation); group norm takes the input with its sizes spelled out (N, C, HxW,
group), and all three of its outputs carry the node, as in PyTorch. Layer and group norm's
derivatives recompute the statistics with fusegrad ops, so double backward sees them; batch
norm's is its own op, `native_batch_norm_backward` (batch_norm_backward.py), over the saved
statistics.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype
from .._dispatch import call
from .._thread_state import active as _active
from ..autograd.grad_mode import no_grad
from . import _native, _parallel
from . import _onnx as ox
from ._util import (
    F32,
    HALF,
    Spec,
    array_format,
    format_of,
    format_strides,
    in_format,
    kept_format,
    not_implemented_for,
    numpy_backward,
    rand_array,
    size_str,
    wrap_grad,
)
from .nn import _call, _legacy, _register_multi, _work, recording, tensor_in_format
from .reductions import sum_dim
from .registry import REGISTRY, Sample, register

# ---------------------------------------------------------------- normalisation


def _stat_np(dt, *params):
    """The saved statistics' NumPy dtype: the input's, or float32 where a half input meets a
    float32 parameter (PyTorch's mixed-dtype CPU kernels)."""
    if dt in HALF and any(p is not None and p.dtype == F32 for p in params):
        return F32
    return dt


def _stat_dtype(x, *params):
    """`_stat_np` for tensors or fakes (fusegrad dtypes), for the metas."""
    half = (_dtype.float16, _dtype.bfloat16)
    if x.dtype in half and any(p is not None and p.dtype is _dtype.float32 for p in params):
        return _dtype.float32
    return x.dtype


def _bn_shape(ndim: int, c: int) -> tuple:
    return (1, c) + (1,) * (ndim - 2)


def _check_norm_dtypes(x, *params) -> None:
    """PyTorch's CPU checks of a normalisation's parameter dtypes: parameters of the input's
    dtype (the first one given decides), or else all float32 with a half-precision input
    (its "mixed dtype" form)."""
    given = [_legacy(p) for p in params if p is not None]
    if not given:
        return
    xn = _legacy(x)
    if given[0] != xn:  # mixed: parameters all float32, input half-precision
        if any(n != "Float" for n in given):
            raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of "
                               "Float")
        if xn not in ("Half", "BFloat16"):
            raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")
        return
    for n in given[1:]:
        if n != xn:
            raise RuntimeError(f"expected scalar type {xn} but found {n}")


def _check_bn_features(x, w, b, rm, rv, training) -> None:
    """Each statistic and parameter holds one value per channel (dim 1), PyTorch's checks in
    its order: before a kernel reads past the end of a short one."""
    if len(x.shape) < 2:
        return  # (the meta's message)
    c = x.shape[1]
    for name, t in (("running_mean", rm), ("running_var", rv), ("weight", w), ("bias", b)):
        if t is None:
            if not training and name.startswith("running"):
                raise RuntimeError(f"{name} must be defined in evaluation mode")
            continue
        n = math.prod(t.shape)
        if n != c:
            raise RuntimeError(f"{name} should contain {c} elements not {n}")


def channel_rows(x: np.ndarray) -> np.ndarray | None:
    """The (N * spatial, C) rows of a channels-last (3-D: channels_last_3d) array, a view;
    None for other layouts. Batch norm computes on them: its per-channel statistics and
    affine pass then run over rows of channels in memory order, no layout copy in or out
    (its output is channels-last, as PyTorch's)."""
    if x.ndim < 4 or x.flags.c_contiguous or kept_format(x) is None:
        return None
    return x.transpose((0,) + tuple(range(2, x.ndim)) + (1,)).reshape(-1, x.shape[1])


def from_rows(rows: np.ndarray, shape: tuple) -> np.ndarray:
    """`channel_rows`' inverse: (N * spatial, C) rows as the channels-last array of
    `shape`."""
    nd = len(shape)
    moved = rows.reshape((shape[0],) + tuple(shape[2:]) + (shape[1],))
    return moved.transpose((0, nd - 1) + tuple(range(1, nd - 1)))


def _bn_kernel(x, w, b, rm, rv, training, momentum, eps):
    _check_bn_features(x, w, b, rm, rv, training)
    _floating_kernel("batch_norm", x)
    _check_norm_dtypes(x, w, b, rm, rv)
    rows = channel_rows(x)
    if rows is not None:
        out, mean, invstd = _bn_kernel(rows, w, b, rm, rv, training, momentum, eps)
        return from_rows(out, x.shape), mean, invstd
    dt = x.dtype
    native = _bn_native(x, w, b, rm, rv, training, momentum, eps)
    if native is not None:
        return native
    xw = _work(x)
    axes = (0,) + tuple(range(2, x.ndim))
    shape = _bn_shape(x.ndim, x.shape[1])
    centred = None
    if training and x.size:
        mean, centred, var = _moments_np(xw)  # centred: (N, C * L)
        invstd = 1.0 / np.sqrt(var + eps)
    elif training:  # no values: NumPy's empty-mean warnings and NaN statistics
        mean = xw.mean(axes)
        var = xw.var(axes)
        invstd = 1.0 / np.sqrt(var + eps)
    if training:
        if rm is not None:
            n = x.size // x.shape[1]
            rm *= 1 - momentum
            rm += (momentum * mean).astype(rm.dtype)
            rv *= 1 - momentum
            rv += (momentum * var * n / max(n - 1, 1)).astype(rv.dtype)
        use_mean, use_invstd = mean, invstd
    else:
        use_mean = _work(rm)
        use_invstd = 1.0 / np.sqrt(_work(rv) + eps)
        mean = invstd = np.zeros((0,), dtype=xw.dtype)
    scale = use_invstd if w is None else use_invstd * _work(w)
    if centred is not None:  # (x - mean) * scale + b, in place in the centred values
        length = centred.shape[1] // x.shape[1]
        factor = _spread(scale, length)
        shift = None if b is None else _spread(_work(b), length)

        def affine(i: int, j: int) -> None:
            rows = centred[i:j]
            np.multiply(rows, factor, out=rows)
            if shift is not None:
                np.add(rows, shift, out=rows)

        _parallel.for_chunks(affine, centred.shape[0], centred.size)
        out = centred.reshape(x.shape).astype(dt, copy=False)
    else:
        shift = -use_mean * scale if b is None else _work(b) - use_mean * scale
        out = (xw * scale.reshape(shape) + shift.reshape(shape)).astype(dt, copy=False)
    sdt = _stat_np(dt, w, b, rm, rv)
    return out, mean.astype(sdt, copy=False), invstd.astype(sdt, copy=False)


# Evaluation mode runs in C from this many values: below, NumPy's one broadcast expression
# costs less than preparing the per-channel factors and the call (~11 us either way at 16k).
EVAL_NATIVE_MIN = 1 << 15


def native_layout(x: np.ndarray) -> tuple | None:
    """(n, c, len) of an input batch norm's C kernels take (ops/native/norm.c): a
    non-empty C-contiguous float32/float64 array of two or more dimensions; None otherwise
    (NumPy runs it)."""
    if x.dtype not in _native.SUFFIX or x.ndim < 2 or not x.size or \
            not x.flags.c_contiguous:
        return None
    n, c = x.shape[0], x.shape[1]
    return n, c, x.size // (n * c)


def vector(a: np.ndarray | None, dt: np.dtype) -> np.ndarray | None:
    """A per-channel parameter as a contiguous array of `dt` for the C kernels."""
    return None if a is None else np.ascontiguousarray(a, dt)


def _ptr(a: np.ndarray | None) -> int | None:
    return None if a is None else _native.address(a)


def _bn_native(x, w, b, rm, rv, training, momentum, eps):
    """`_bn_kernel` in C (ops/native/norm.c): training, each channel's statistics in double,
    the normalized output and the running statistics' update in one call; evaluation, one
    affine pass. Channels are shared by the C workers. None where the NumPy path runs (see
    `native_layout`; running statistics that are not contiguous)."""
    layout = native_layout(x)
    if layout is None:
        return None
    if training:
        if rm is not None and not (rm.flags.c_contiguous and rv.flags.c_contiguous
                                   and rm.flags.writeable and rv.flags.writeable):
            return None  # (the NumPy path writes them through their strides)
    elif rm is None or rv is None or x.size < EVAL_NATIVE_MIN:
        return None
    n, c, length = layout
    if training:
        fn = _native.typed("norm", "bn_forward", x.dtype, "ppppppppiiiiiii")
    else:
        fn = _native.typed("norm", "bn_affine", x.dtype, "ppppppiiiiii")
    if fn is None:
        return None
    dt = x.dtype
    out = np.empty(x.shape, dt)
    w, b = vector(w, dt), vector(b, dt)
    bits = _native.double_bits
    if training:
        mean, invstd = np.empty(c, dt), np.empty(c, dt)
        args = (*map(_ptr, (x, w, b, out, mean, invstd, rm, rv)), bits(eps), bits(momentum))
    else:
        mean = invstd = np.zeros((0,), dt)
        args = (*map(_ptr, (x, vector(rm, dt), vector(rv, dt), w, b, out)), bits(eps))
    _native.run_pieces(fn, (*args, n, c, length), (), c, x.size)
    return out, mean, invstd


def _bn_meta(x, w, b, rm, rv, training, momentum, eps):
    _check_norm_dtypes(x, w, b, rm, rv)
    _check_bn_features(x, w, b, rm, rv, training)
    c = x.shape[1] if len(x.shape) > 1 else 0
    if len(x.shape) < 2:
        raise ValueError(f"expected 2D or 3D input (got {len(x.shape)}D input)")
    sdt = _stat_dtype(x, w, b, rm, rv)
    stat = (c,) if training else (0,)
    # The output as an elementwise kernel lays it (`kept_format`): channels-last for a
    # channels-last input, contiguous for one both contiguous and channels-last.
    out = Spec(tuple(x.shape), x.dtype, format_strides(tuple(x.shape), kept_format(x)))
    return [out, Spec(stat, sdt), Spec(stat, sdt)]


def _channel_sum(a2: np.ndarray, c: int) -> np.ndarray:
    """Per-channel sums of an (N, C * L) array: its columns summed over the batch (whole rows
    at a time; NumPy is slow reducing the axes (0, 2) of (N, C, L) in one call when L is
    small), then each channel's L column sums. Columns are shared between threads: each
    column's sum runs over the rows in order whatever the cut, so the bits do not depend on
    the thread count."""
    cols = np.empty(a2.shape[1], a2.dtype)

    def part(i: int, j: int) -> None:
        np.sum(a2[:, i:j], axis=0, out=cols[i:j])

    _parallel.for_chunks(part, a2.shape[1], a2.size)
    return cols.reshape(c, -1).sum(1)


def _channel_dot(a2: np.ndarray, b2: np.ndarray, c: int) -> np.ndarray:
    """Per-channel sums of `a2 * b2` for (N, C * L) arrays, channels shared between threads."""
    n = a2.shape[0]
    a3, b3 = a2.reshape(n, c, -1), b2.reshape(n, c, -1)
    if a3.shape[2] < 64:  # short rows: the product, then its sums
        return _channel_sum(rowwise(np.multiply, a2, b2), c)
    dots = np.empty(c, np.result_type(a2, b2))

    def part(i: int, j: int) -> None:  # long rows: one pass, no product array
        np.einsum("ncl,ncl->c", a3[:, i:j], b3[:, i:j], out=dots[i:j])

    _parallel.for_chunks(part, c, a2.size)
    return dots


def rowwise(ufunc: np.ufunc, a2: np.ndarray, b: np.ndarray,
            out: np.ndarray | None = None) -> np.ndarray:
    """`ufunc(a2, b)` for an (N, K) array and an (N, K) or (K,) one, rows shared between
    threads."""
    if out is None:
        out = np.empty(a2.shape, np.result_type(a2, b))
    whole = b.ndim == 2

    def part(i: int, j: int) -> None:
        ufunc(a2[i:j], b[i:j] if whole else b, out=out[i:j])

    _parallel.for_chunks(part, a2.shape[0], a2.size)
    return out


def _spread(v: np.ndarray, length: int) -> np.ndarray:
    """A per-channel vector repeated over each channel's `length` positions, to broadcast
    over the rows of an (N, C * L) array: NumPy's inner loop then runs along whole rows
    (3-7x faster than broadcasting (C, 1) over (N, C, L) when L is small)."""
    return v if length == 1 else np.repeat(v, length)


def _moments_np(x: np.ndarray) -> tuple:
    """(mean, x - mean as (N, C * L), biased variance) per channel of a non-empty
    (N, C, ...) array, in its dtype; the variance from the centred values (two passes, no
    cancellation)."""
    n, c = x.shape[0], x.shape[1]
    x2 = x.reshape(n, -1)
    m = x2.size // c
    mean = _channel_sum(x2, c) / m
    centred = rowwise(np.subtract, x2, _spread(mean, x2.shape[1] // c))
    return mean, centred, _channel_dot(centred, centred, c) / m


def _bn_derivative(grads, x, w, rm, rv, save_mean, save_invstd, training, eps):
    """The gradients as `native_batch_norm_backward` computes them (one closed form over the
    saved statistics): its kernel on the arrays when no graph is recorded and no mode is
    active, otherwise the op itself, so a traced backward graph or a double backward records
    it (`NativeBatchNormBackwardBackward0`), as PyTorch does."""
    g = grads[0] if isinstance(grads, list) else grads
    # By name: batch_norm_backward.py imports this file, not the reverse.
    op = REGISTRY["native_batch_norm_backward"]
    mask = [True, w is not None, True]
    if numpy_backward(g, x, w, rm, rv, save_mean, save_invstd):
        gi, gw, gb = op.kernel(g._data, x._data, _data(w), _data(rm), _data(rv),
                               save_mean._data, save_invstd._data, training, eps, mask)
        return (wrap_grad(gi), None if w is None else wrap_grad(gw), wrap_grad(gb), None, None,
                None, None, None)
    gi, gw, gb = call(op, g, x, w, rm, rv, save_mean, save_invstd, training, eps, mask)
    return (gi, None if w is None else gw, gb, None, None, None, None, None)


def _data(t):
    return None if t is None else t._data


def _bn_samples(rng, dt):
    # Running statistics cannot be sample inputs (the oracle makes every array require
    # grad); the nn tests cover them.
    return [Sample((rand_array(rng, shape, dt), rand_array(rng, (shape[1],), dt),
                    rand_array(rng, (shape[1],), dt), None, None, True, 0.1, 1e-5),
                   name=str(shape)) for shape in ((4, 3), (2, 3, 4, 5), (3, 2, 5))]


def _moments(x, axes: list, n: int, eps: float):
    """(mean, x - mean, 1 / sqrt(biased variance + eps)) over `axes` (kept), in fusegrad ops."""
    mean = call(sum_dim, x, axes, True) / n
    centred = x - mean
    return mean, centred, (call(sum_dim, centred * centred, axes, True) / n + eps).rsqrt()


def _affine(out, w, b, shape: tuple):
    """`out * w + b` with the per-channel parameters reshaped to `shape` (either may be None)."""
    if w is not None:
        out = out * w.reshape(shape)
    return out if b is None else out + b.reshape(shape)


def _half(x) -> bool:
    """Whether `x` (a tensor or None) has a half type, which decompositions compute in
    float32 (`_in_float32`)."""
    return x is not None and (x.dtype is _dtype.float16 or x.dtype is _dtype.bfloat16)


def _in_float32(t):
    """`t` (a tensor or None) in float32 when it has a half type: the normalizations compute
    in float32 and round their results once, as their kernels (`_work`) and PyTorch's
    inductor do; a chain of half-precision ops rounds at every step."""
    return t.float() if _half(t) else t


def _rounded(t, dtype):
    """`t` computed in float32 for a half type, cast to `dtype` (no op when it has it)."""
    return t if t.dtype is dtype else t.to(dtype)


def _bn_decomposition(x, w, b, rm, rv, training, momentum, eps):
    """Batch statistics (training) or the running ones (eval); training also updates the
    running statistics in place, with the unbiased variance, as the kernel does. Half
    types compute in float32 (`_in_float32`)."""
    axes = [0] + list(range(2, x.dim()))
    shape = _bn_shape(x.dim(), x.shape[1])
    sdt = _stat_dtype(x, w, b, rm, rv)
    xf, wf, bf = _in_float32(x), _in_float32(w), _in_float32(b)
    if training:
        n = x.numel() // x.shape[1]
        mean, centred, invstd = _moments(xf, axes, n, eps)
        save_mean, save_invstd = mean.squeeze(axes), invstd.squeeze(axes)
        if rm is not None:
            with no_grad():  # buffers: the update is no part of the differentiated graph
                var = call(sum_dim, centred * centred, axes, False)
                # The new share rounded to the buffer's dtype, then added, as the kernel.
                rm.copy_(rm * (1 - momentum) + _rounded(save_mean * momentum, rm.dtype))
                rv.copy_(rv * (1 - momentum) +
                         _rounded(var * (momentum / max(n - 1, 1)), rv.dtype))
        out = centred * invstd
        save_mean, save_invstd = _rounded(save_mean, sdt), _rounded(save_invstd, sdt)
    else:
        rmf, rvf = _in_float32(rm), _in_float32(rv)
        out = (xf - rmf.reshape(shape)) * (rvf + eps).rsqrt().reshape(shape)
        save_mean = save_invstd = x.new_zeros((0,), dtype=sdt)
    return _rounded(_affine(out, wf, bf, shape), x.dtype), save_mean, save_invstd


def _bn_onnx(b, inputs, args, kwargs, opset):
    """BatchNormalization with the running statistics (eval mode); the saved statistics
    outputs are not mapped."""
    x, w, bias, mean, var = inputs[:5]
    training, eps = args[5], args[7]
    if training or mean is None:  # instance_norm, F.batch_norm(training=True)
        return [ox.batch_stats_norm(b, x, w, bias, args[0].dim(), args[0].shape[1], eps),
                None, None]
    c = args[0].shape[1]
    w = w if w is not None else b.const(np.ones(c), b.out_dtype)
    bias = bias if bias is not None else b.const(np.zeros(c), b.out_dtype)
    out = b.emit("BatchNormalization", [x, w, bias, mean, var], epsilon=float(eps))
    return [out, None, None]


native_batch_norm = _register_multi(
    "native_batch_norm", (1, 2), (1, 2), kernel=_bn_kernel, meta=_bn_meta,
    node="NativeBatchNormBackward0",
    derivative=_bn_derivative, nondiff_args=(3, 4), forward_ad="statistics",
    save=lambda out, x, w, b, rm, rv, training, momentum, eps: (
        x, w, None if rm is None else rm.detach(), None if rv is None else rv.detach(),
        # The statistics are outputs without a gradient: saved as detached aliases, which
        # unpack without the node (an output saved as itself unpacks with it).
        out[1].detach(), out[2].detach(), training, eps),
    samples=_bn_samples, onnx=_bn_onnx, public="native_batch_norm",
    decomposition=_bn_decomposition,
    gradcheck=False,
    tolerance={"float32": 1e-4},
    saved_names=("input", "weight", "running_mean", "running_var", "result1", "result2",
                 "training", "eps"))


# The functional form (ATen's `_native_batch_norm_legit_functional`): the running statistics
# are read, not written; their new values are two more outputs. Functionalization records
# training-mode batch norm as this op, so a graph holds no in-place write of its inputs (the
# new statistics are copied into the buffers once, at the end of the graph), which a code
# generator needs.


def _bn_functional_kernel(x, w, b, rm, rv, training, momentum, eps):
    rm, rv = rm.copy(), rv.copy()
    out, mean, invstd = _bn_kernel(x, w, b, rm, rv, training, momentum, eps)
    return out, mean, invstd, rm, rv


def _bn_functional_meta(x, w, b, rm, rv, training, momentum, eps):
    return _bn_meta(x, w, b, rm, rv, training, momentum, eps) + [
        Spec(tuple(rm.shape), rm.dtype), Spec(tuple(rv.shape), rv.dtype)]


def _bn_functional_decomposition(x, w, b, rm, rv, training, momentum, eps):
    rm, rv = rm.clone(), rv.clone()  # the decomposition writes them: keep the inputs
    out, mean, invstd = _bn_decomposition(x, w, b, rm, rv, training, momentum, eps)
    return out, mean, invstd, rm, rv


def _bn_functional_samples(rng, dt):
    return [Sample((rand_array(rng, shape, dt), rand_array(rng, (shape[1],), dt),
                    rand_array(rng, (shape[1],), dt), rand_array(rng, (shape[1],), dt),
                    rand_array(rng, (shape[1],), dt, (0.5, 2.0)), training, 0.1, 1e-5),
                   name=f"{shape} training={training}")
            for shape in ((4, 3), (2, 3, 4, 5)) for training in (True,)]


native_batch_norm_functional = _register_multi(
    "_native_batch_norm_legit_functional", (1, 2, 3, 4), (1, 2),
    kernel=_bn_functional_kernel, meta=_bn_functional_meta,
    node="NativeBatchNormLegitBackward0",
    derivative=_bn_derivative, nondiff_args=(3, 4),
    save=native_batch_norm.save,
    samples=_bn_functional_samples, public="native_batch_norm",
    decomposition=_bn_functional_decomposition,
    gradcheck=False,
    tolerance={"float32": 1e-4},
    saved_names=native_batch_norm.saved_names)

# Units of work per value of the layer norm's C kernels (`_parallel.MIN_CHUNK`'s units).
_LN_COST = 4


def _ln_in_c(x: np.ndarray, n: int, params: tuple) -> bool:
    """Whether the layer norm of `x` over rows of `n` values runs in C
    (`native/layer_norm.c`): float32/float64, parameters (None or arrays) of its dtype."""
    return (x.dtype in _native.SUFFIX and n > 0 and x.size > 0 and _native.enabled()
            and all(p is None or p.dtype == x.dtype for p in params))


def _addresses(*arrays) -> tuple:
    """Each array's address (None stays None, a null pointer), contiguous copies made where
    needed; the copies are returned too, to be held while a kernel runs."""
    held = [None if a is None else np.ascontiguousarray(a) for a in arrays]
    return tuple(None if a is None else _native.address(a) for a in held), held


def _ln_forward_c(x, n, w, b, eps):
    """native_layer_norm's three results by the C kernel; None without it."""
    dt = x.dtype
    fn = _native.typed("layer_norm", "ln_forward", dt, "pppppp" + "iiii")
    if fn is None:
        return None
    rows = x.size // n
    out, mean, rstd = np.empty(x.shape, dt), np.empty(rows, dt), np.empty(rows, dt)
    (px, pw, pb, po, pm, pr), held = _addresses(x, w, b, out, mean, rstd)
    _native.run_pieces(fn, (px, pw, pb, po, pm, pr), (n, _native.double_bits(eps)), rows,
                       rows * n * _LN_COST)
    del held
    return out, mean, rstd


def _ln_backward_c(g, x, n, w, eps, want_w: bool, want_b: bool):
    """The input's, weight's and bias's gradients (None where not wanted) by the C kernels;
    None without them."""
    dt = x.dtype
    fn = _native.typed("layer_norm", "ln_backward", dt, "pppppp" + "iiii")
    params = _native.typed("layer_norm", "ln_params", dt, "pppppp" + "iiii")
    if fn is None or params is None:
        return None
    rows = x.size // n
    gi = np.empty(x.shape, dt)
    mean, rstd = np.empty(rows), np.empty(rows)
    gw, gb = (np.empty(n) if want_w else None), (np.empty(n) if want_b else None)
    (pg, px, pw, pi, pm, pr, pgw, pgb), held = _addresses(g, x, w, gi, mean, rstd, gw, gb)
    _native.run_pieces(fn, (pg, px, pw, pi, pm, pr), (n, _native.double_bits(eps)), rows,
                       rows * n * _LN_COST)
    if want_w or want_b:  # columns shared: each column's sum runs over the rows in order
        _native.run_pieces(params, (pg, px, pm, pr, pgw, pgb), (rows, n), n, rows * n)
    del held
    return (gi, None if gw is None else gw.astype(dt), None if gb is None else gb.astype(dt))


def _floating_kernel(name: str, x) -> None:
    """The NotImplementedError of PyTorch's CPU kernel `name`, which exists for the
    floating dtypes only."""
    legacy = _legacy(x)
    if legacy not in ("Float", "Double", "Half", "BFloat16"):
        raise not_implemented_for(name, legacy)


def _ln_moments(xw: np.ndarray, axes: tuple, eps: float) -> tuple:
    """(mean, centred values, rstd) of `xw` (float32 for a half input) over `axes`, as the
    layer norm's forward computes them (its backward for half types recomputes them so)."""
    mean = xw.mean(axes, keepdims=True)
    centred = xw - mean
    rstd = 1.0 / np.sqrt((centred * centred).mean(axes, keepdims=True) + eps)
    return mean, centred, rstd


def _ln_backward_half(g, x, n, w, b, eps, want_w: bool, want_b: bool):
    """The layer norm's input, weight and bias gradients (None where not wanted) for a
    float16/bfloat16 input, as PyTorch's CPU kernel computes them (`_ln_backward_half_stats`),
    from the statistics the forward saved: computed again here, rounded to their dtype."""
    rows = x.size // n
    mean, _, rstd = _ln_moments(_work(x).reshape(rows, n), (1,), eps)
    sdt = _stat_np(x.dtype, w, b)
    return _ln_backward_half_stats(g, x, n, w, b, mean.astype(sdt), rstd.astype(sdt), want_w,
                                   want_b)


def _ln_backward_half_stats(g, x, n, w, b, mean, rstd, want_w: bool, want_b: bool):
    """`_ln_backward_half` from the forward's statistics `mean` and `rstd` (one per row):
    in float32, the input's gradient rounded once; the weight's and bias's gradients summed
    over the rows in order, each partial sum held in the input's dtype (float32 parameters
    too get them so)."""
    rows = x.size // n
    xf, gf = _work(x).reshape(rows, n), _work(g).reshape(rows, n)
    mean = np.asarray(mean).astype(F32).reshape(rows, 1)
    rstd = np.asarray(rstd).astype(F32).reshape(rows, 1)
    xhat = (xf - mean) * rstd
    gx = gf * _work(w).reshape(-1) if w is not None else gf
    gi = rstd * (gx - gx.mean(1, keepdims=True) - xhat * (gx * xhat).mean(1, keepdims=True))
    gi = gi.astype(x.dtype).reshape(x.shape)
    dt = x.dtype
    pdt = (w if w is not None else b).dtype if want_w or want_b else dt
    gw = np.zeros(n, F32) if want_w else None
    gb = np.zeros(n, F32) if want_b else None
    for i in range(rows):  # (a partial sum rounded at every row: sequential by nature)
        if want_w:
            gw = (gw + gf[i] * xhat[i]).astype(dt).astype(F32)
        if want_b:
            gb = (gb + gf[i]).astype(dt).astype(F32)
    return (gi, None if gw is None else gw.astype(pdt), None if gb is None else gb.astype(pdt))


def _ln_kernel(x, normalized_shape, w, b, eps):
    _check_norm_dtypes(x, w, b)
    _check_ln_shapes(x, normalized_shape, w, b)
    _floating_kernel("LayerNormKernelImpl", x)
    n = int(np.prod(normalized_shape, dtype=np.int64))
    if _ln_in_c(x, n, (w, b)):
        res = _ln_forward_c(x, n, w, b, eps)
        if res is not None:
            out, mean, rstd = res
            stat = x.shape[:x.ndim - len(normalized_shape)] + (1,) * len(normalized_shape)
            return out, mean.reshape(stat), rstd.reshape(stat)
    dt = x.dtype
    xw = _work(x)
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    mean, centred, rstd = _ln_moments(xw, axes, eps)
    out = centred * rstd
    if w is not None:
        out = out * _work(w)
    if b is not None:
        out = out + _work(b)
    sdt = _stat_np(dt, w, b)
    # Contiguous whatever the input's layout, as PyTorch's (and the C kernel's) result.
    return np.ascontiguousarray(out.astype(dt, copy=False)), mean.astype(sdt), rstd.astype(sdt)


def _check_ln_shapes(x, normalized_shape, w, b) -> None:
    """The input ends in `normalized_shape` and the weight and bias have it, with PyTorch's
    messages: before a kernel reads past the end of a short parameter."""
    shape = tuple(x.shape)
    ns = tuple(normalized_shape)
    if not ns:
        raise RuntimeError(
            "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least "
            "one element, but got normalized_shape = []")
    for name, t in (("weight", w), ("bias", b)):
        if t is not None and tuple(t.shape) != ns:
            raise RuntimeError(
                f"Expected {name} to be of same shape as normalized_shape, but got {name} of "
                f"shape {size_str(tuple(t.shape))} and normalized_shape = {size_str(ns)}")
    if shape[len(shape) - len(ns):] != ns:
        raise RuntimeError(
            f"Given normalized_shape={size_str(ns)}, expected input with shape "
            f"[*, {', '.join(map(str, ns))}], but got input of size{size_str(shape)}")


def _ln_meta(x, normalized_shape, w, b, eps):
    _check_norm_dtypes(x, w, b)
    _check_ln_shapes(x, normalized_shape, w, b)
    shape = tuple(x.shape)
    ns = tuple(normalized_shape)
    stat = shape[:len(shape) - len(ns)] + (1,) * len(ns)
    sdt = _stat_dtype(x, w, b)
    return [Spec(shape, x.dtype), Spec(stat, sdt), Spec(stat, sdt)]


def _ln_derivative(grads, x, nshape, w, b, eps, stats=None):
    g = grads[0] if isinstance(grads, list) else grads
    traced_half = _active.modes and x.dtype in (_dtype.float16, _dtype.bfloat16)
    if g is not None and stats is not None and (recording() or traced_half):
        # create_graph: PyTorch's backward op, whose node double backward shows; traced in
        # half precision (AOT autograd): the op, which accumulates in float32 as eager's
        # kernel does (its decomposition would round every step to half)
        gi, gw, gb = _call(native_layer_norm_backward, g, x, list(nshape), *stats, w, b,
                           [True, w is not None, b is not None])
        return (gi, None, gw if w is not None else None, gb if b is not None else None, None)
    has_bias = b is not None  # (saved as PyTorch saves it; only its presence is read)
    n = int(np.prod(nshape, dtype=np.int64))
    if g is not None and numpy_backward(g, x, w) and tuple(g.shape) == tuple(x.shape) and \
            _ln_in_c(x._data, n, (g._data, None if w is None else w._data)):
        res = _ln_backward_c(g._data, x._data, n, None if w is None else w._data, eps,
                             w is not None, has_bias)
        if res is not None:
            gi, gw, gb = res
            shape = tuple(nshape)
            return (wrap_grad(gi), None, None if gw is None else wrap_grad(gw.reshape(shape)),
                    None if gb is None else wrap_grad(gb.reshape(shape)), None)
    if g is not None and x.dtype in (_dtype.float16, _dtype.bfloat16) and n > 0 and \
            numpy_backward(g, x, w, b, halves=True) and tuple(g.shape) == tuple(x.shape) and \
            x.numel():
        gi, gw, gb = _ln_backward_half(g._data, x._data, n, None if w is None else w._data,
                                       None if b is None else b._data, eps, w is not None,
                                       has_bias)
        shape = tuple(nshape)
        return (wrap_grad(gi), None, None if gw is None else wrap_grad(gw.reshape(shape)),
                None if gb is None else wrap_grad(gb.reshape(shape)), None)
    k = len(nshape)
    axes = tuple(range(x.dim() - k, x.dim()))
    lead = tuple(range(x.dim() - k))
    mean = x.mean(axes, keepdim=True)
    centred = x - mean
    rstd = ((centred * centred).mean(axes, keepdim=True) + eps) ** -0.5
    xhat = centred * rstd
    gx = g * w if w is not None else g
    gi = rstd * (gx - gx.mean(axes, keepdim=True) - xhat * (gx * xhat).mean(axes,
                                                                             keepdim=True))
    gw = (g * xhat).sum(lead) if w is not None and lead else (
        g * xhat if w is not None else None)
    gb = (g.sum(lead) if lead else g) if has_bias else None
    return (gi, None, gw, gb, None)


def _ln_decomposition(x, normalized_shape, w, b, eps):
    """The moments over the last dimensions, then the affine map; half types compute in
    float32 (`_in_float32`)."""
    k = len(normalized_shape)
    axes = list(range(x.dim() - k, x.dim()))
    mean, centred, rstd = _moments(_in_float32(x), axes, int(np.prod(normalized_shape)), eps)
    out = _affine(centred * rstd, _in_float32(w), _in_float32(b), tuple(normalized_shape))
    sdt = _stat_dtype(x, w, b)
    return _rounded(out, x.dtype), _rounded(mean, sdt), _rounded(rstd, sdt)


def _ln_onnx(b, inputs, args, kwargs, opset):
    """LayerNormalization from opset 17; before, its mean/variance formula. The mean and
    rstd outputs are not mapped."""
    x, w, bias = inputs[0], inputs[2], inputs[3]
    shape = tuple(int(s) for s in args[1])
    eps = float(args[4])
    w = w if w is not None else b.const(np.ones(shape), b.out_dtype)
    if opset >= 17:
        # An omitted bias makes onnxruntime 1.32 fail to load the model: pass zeros.
        bias = bias if bias is not None else b.const(np.zeros(shape), b.out_dtype)
        return [b.emit("LayerNormalization", [x, w, bias], axis=-len(shape), epsilon=eps),
                None, None]
    axes = list(range(-len(shape), 0))
    dt, rank = b.out_dtype, b.out_rank
    centered = b.emit("Sub", [x, b.reduce("ReduceMean", x, axes, True, dt, rank)])
    var = b.reduce("ReduceMean", b.emit("Mul", [centered, centered]), axes, True, dt, rank)
    std = b.emit("Sqrt", [b.emit("Add", [var, b.operand(eps, dt)])])
    out = b.emit("Mul", [b.emit("Div", [centered, std]), w])
    return [out if bias is None else b.emit("Add", [out, bias]), None, None]


native_layer_norm = _register_multi(
    "native_layer_norm", (1, 2), (2, 3), kernel=_ln_kernel, meta=_ln_meta,
    node="NativeLayerNormBackward0",
    derivative=_ln_derivative,
    # The bias too, as PyTorch's node saves it (so changing it in place before backward is
    # the same error); the derivative reads only whether there is one.
    # (the mean and rstd: for a gradient taken with create_graph, PyTorch's backward op)
    save=lambda out, x, ns, w, b, eps: (x, list(ns), w, b, eps, (out[1], out[2])),
    samples=lambda rng, dt: [
        Sample((rand_array(rng, s, dt), ns, rand_array(rng, tuple(ns), dt),
                rand_array(rng, tuple(ns), dt), 1e-5), name=f"{s} {ns}")
        for s, ns in (((3, 4), [4]), ((2, 3, 4), [3, 4]), ((2, 5), [5]))],
    onnx=_ln_onnx, public="native_layer_norm", tolerance={"float32": 1e-4},
    decomposition=_ln_decomposition,
    gradcheck=False,
    saved_names=("input", "normalized_shape", "weight", "bias", "", "result1"))


def _ln_backward_kernel(g, x, nshape, mean, rstd, w, b, output_mask):
    # (PyTorch's formula from the forward's statistics, in double precision and rounded
    # once: within float32's rounding of the first-order kernel's result; a half-precision
    # input's as eager's first-order kernel computes it, with the same roundings)
    n = int(np.prod(nshape, dtype=np.int64))
    if _dtype.FROM_NP.get(x.dtype) in (_dtype.float16, _dtype.bfloat16) and n > 0 and \
            x.size and tuple(g.shape) == tuple(x.shape) and (w is not None or b is not None):
        gi, gw, gb = _ln_backward_half_stats(g, x, n, w, b, mean, rstd, True, True)
        return gi, gw.reshape(tuple(nshape)), gb.reshape(tuple(nshape))
    k = len(nshape)
    axes = tuple(range(x.ndim - k, x.ndim))
    lead = tuple(range(x.ndim - k))

    def work(a):
        return np.asarray(a, np.float64)

    xhat = (work(x) - work(mean)) * work(rstd)
    gw_ = work(g)
    a = gw_ * work(w) if w is not None else gw_
    gi = work(rstd) * (a - a.mean(axes, keepdims=True) -
                       xhat * (a * xhat).mean(axes, keepdims=True))
    pdt = (w if w is not None else b if b is not None else x).dtype
    gw = (gw_ * xhat).sum(lead) if lead else gw_ * xhat
    gb = gw_.sum(lead) if lead else gw_
    return (gi.astype(x.dtype), gw.astype(pdt).reshape(tuple(nshape)),
            gb.astype(pdt).reshape(tuple(nshape)))


def _ln_backward_meta(g, x, nshape, mean, rstd, w, b, output_mask):
    ns = tuple(nshape)
    pdt = (w if w is not None else b if b is not None else x).dtype
    return [Spec(tuple(x.shape), x.dtype), Spec(ns, pdt), Spec(ns, pdt)]


def _ln_backward_derivative(grads, g, x, nshape, mean, rstd, w, b, output_mask):
    """The derivative of the layer norm's gradients: `grads` are those of the input's
    (u), weight's (q) and bias's (c) gradients. With a = g * w, xhat the normalised input,
    r the reciprocal deviation (the forward's statistics, held fixed as PyTorch's formula
    holds them) and P(v) = v - mean(v) - xhat * mean(v * xhat) over each row's normalised
    dims (self-adjoint), the input's gradient is r * P(a): a's gradient is r * P(u); x's
    gathers the change of r, of xhat in P and in the weight's gradient sum(g * xhat)."""
    u, q, c = (list(grads) + [None] * 3)[:3]
    k = len(nshape)
    axes = tuple(range(x.dim() - k, x.dim()))
    lead = tuple(range(x.dim() - k))
    r = rstd
    xhat = (x - mean) * r

    def project(v):
        return v - v.mean(axes, keepdim=True) - xhat * (v * xhat).mean(axes, keepdim=True)

    def over_rows(v):
        return v.sum(lead) if lead else v

    a = g * w if w is not None else g
    g_bar = x_bar = w_bar = None
    inner = None  # what x's gradient gets through xhat, before r * P(.)
    if u is not None:
        gi = r * project(a)
        a_bar = r * project(u)
        g_bar = a_bar * w if w is not None else a_bar
        if w is not None:
            w_bar = over_rows(a_bar * g)
        x_bar = -(r * (u * gi).mean(axes, keepdim=True)) * xhat
        inner = -(r * (a * xhat).mean(axes, keepdim=True)) * u - \
            (r * (u * xhat).mean(axes, keepdim=True)) * a
    if q is not None:
        g_bar = q * xhat if g_bar is None else g_bar + q * xhat
        inner = q * g if inner is None else inner + q * g
    if c is not None:
        spread = c.expand(tuple(g.shape))
        g_bar = spread if g_bar is None else g_bar + spread
    if inner is not None:
        through = r * project(inner)
        x_bar = through if x_bar is None else x_bar + through
    return (g_bar, x_bar, None, None, None, w_bar, None, None)


def _ln_backward_samples(rng, dt):
    out = []
    for s, ns in (((3, 4), [4]), ((2, 3, 4), [3, 4]), ((2, 5), [5])):
        x = rand_array(rng, s, dt)
        w, b = rand_array(rng, tuple(ns), dt) + 1, rand_array(rng, tuple(ns), dt)
        _, mean, rstd = _ln_kernel(x, ns, w, b, 1e-5)
        out.append(Sample((rand_array(rng, s, dt), x, ns, mean, rstd, w, b,
                           [True, True, True]), name=f"{s} {ns}"))
    return out


native_layer_norm_backward = _register_multi(
    "native_layer_norm_backward", (), (5, 6), kernel=_ln_backward_kernel,
    meta=_ln_backward_meta, node="NativeLayerNormBackwardBackward0",
    derivative=_ln_backward_derivative, nondiff_args=(3, 4),
    # (its derivative, as PyTorch's, differentiates the layer norm through the input's
    # statistics, which the op takes as arguments: finite differences of the op hold them)
    gradcheck=False,
    save=lambda out, g, x, ns, mean, rstd, w, b, mask: (g, x, list(ns), mean, rstd, w, b,
                                                         list(mask)),
    samples=_ln_backward_samples, tolerance={"float32": 1e-4},
    saved_names=("grad_out", "input", "normalized_shape", "mean", "rstd", "weight", "bias",
                 ""))

# ---------------------------------------------------------------- group norm

def _check_gn(shape: tuple, w, b, n: int, c: int, hxw: int, group: int) -> None:
    if group <= 0 or c % group:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {size_str(shape)} and "
                           f"num_groups={group}")
    for name, p in (("weight", w), ("bias", b)):
        if p is not None and (len(p.shape) != 1 or p.shape[0] != c):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number "
                               f"of channels in input, but got {name} of shape "
                               f"{size_str(p.shape)} and input of shape {size_str(shape)}")
    numel = int(np.prod(shape))
    if n * c * hxw != numel:
        raise RuntimeError(f"Expected input to have {n * c * hxw} elements, but got {numel}")


def _check_float(x) -> None:
    name = _legacy(x)
    if name not in ("Float", "Double", "Half", "BFloat16"):
        raise not_implemented_for("GroupNormKernelImpl", name)


def _gn_kernel(x, w, b, n, c, hxw, group, eps):
    _check_float(x)
    _check_norm_dtypes(x, w, b)
    _check_gn(x.shape, w, b, n, c, hxw, group)
    dt = x.dtype
    xw = x.astype(F32) if dt in HALF else x
    xg = xw.reshape(n, group, (c // group) * hxw)  # (no -1: an empty batch has no size)
    mean = xg.mean(-1, keepdims=True)
    centred = xg - mean
    rstd = 1.0 / np.sqrt((centred * centred).mean(-1, keepdims=True) + eps)
    out = (centred * rstd).reshape(n, c, hxw)
    if w is not None:
        out = out * (w.astype(F32) if w.dtype in HALF else w).reshape(1, c, 1)
    if b is not None:
        out = out + (b.astype(F32) if b.dtype in HALF else b).reshape(1, c, 1)
    sdt = _stat_np(dt, w, b)
    # The output in the input's memory format, as PyTorch's kernel allocates it.
    return (in_format(out.reshape(x.shape).astype(dt, copy=False), array_format(x)),
            mean.reshape(n, group).astype(sdt), rstd.reshape(n, group).astype(sdt))


def _gn_meta(x, w, b, n, c, hxw, group, eps):
    _check_float(x)
    _check_norm_dtypes(x, w, b)
    _check_gn(tuple(x.shape), w, b, n, c, hxw, group)
    sdt = _stat_dtype(x, w, b)
    shape = tuple(x.shape)
    return [Spec(shape, x.dtype, format_strides(shape, format_of(x))), Spec((n, group), sdt),
            Spec((n, group), sdt)]


def _gn_derivative(grads, x, w, has_bias, n, c, group, eps):
    g, gmean, grstd = grads if isinstance(grads, list) else (grads, None, None)
    shape = tuple(x.shape)
    # (sizes spelled out, no -1: an empty batch leaves -1 undetermined)
    hxw = math.prod(shape[2:])
    per_group = (c // group) * hxw
    xg = x.reshape(n, group, per_group)
    mean = xg.mean(-1, keepdim=True)
    centred = xg - mean
    rstd = ((centred * centred).mean(-1, keepdim=True) + eps) ** -0.5
    xhat = (centred * rstd).reshape(n, c, hxw)
    g3 = g.reshape(n, c, hxw)
    gx = (g3 * w.reshape(1, c, 1) if w is not None else g3).reshape(n, group, per_group)
    xh = xhat.reshape(n, group, per_group)
    gi = rstd * (gx - gx.mean(-1, keepdim=True) - xh * (gx * xh).mean(-1, keepdim=True))
    if gmean is not None and grstd is not None:
        # Gradients reaching the statistics themselves (PyTorch adds them when both arrive;
        # unused outputs arrive here as zeros, which add nothing).
        m = xh.shape[-1]
        gi = gi + gmean.unsqueeze(-1) / m - (grstd.unsqueeze(-1) * rstd * rstd / m) * xh
    gw = (g3 * xhat).sum((0, 2)) if w is not None else None
    gb = g3.sum((0, 2)) if has_bias else None
    # The input's gradient in the input's memory format, as PyTorch's kernel allocates it.
    return (tensor_in_format(gi.reshape(shape), format_of(x)), gw, gb, None, None, None, None,
            None)


def _gn_decomposition(x, w, b, n, c, hxw, group, eps):
    """The moments per group, then the per-channel affine map; half types compute in
    float32 (`_in_float32`)."""
    xf = _in_float32(x)
    mean, centred, rstd = _moments(xf.reshape(n, group, (c // group) * hxw), [-1],
                                   (c // group) * hxw, eps)
    out = _affine((centred * rstd).reshape(n, c, hxw), _in_float32(w), _in_float32(b),
                  (1, c, 1))
    sdt = _stat_dtype(x, w, b)
    return (_rounded(out.reshape(tuple(x.shape)), x.dtype),
            _rounded(mean.reshape(n, group), sdt), _rounded(rstd.reshape(n, group), sdt))


def _gn_samples(rng, dt):
    cases = [((2, 6, 4), 3, True, True), ((3, 4, 2, 3), 2, True, False),
             ((2, 4), 4, False, False), ((1, 6, 5), 6, False, False), ((2, 6, 3), 1, True, False),
             ((2, 4, 2, 2, 2), 2, True, True)]
    out = []
    for shape, group, has_w, has_b in cases:
        c = shape[1]
        hxw = int(np.prod(shape[2:]))
        w = rand_array(rng, (c,), dt) if has_w else None
        b = rand_array(rng, (c,), dt) if has_b else None
        out.append(Sample((rand_array(rng, shape, dt), w, b, shape[0], c, hxw, group, 1e-5),
                          name=f"{shape} groups={group} w={has_w} b={has_b}"))
    return out


native_group_norm = register(
    "native_group_norm", kernel=_gn_kernel, meta=_gn_meta, node="NativeGroupNormBackward0",
    derivative=_gn_derivative,
    save=lambda out, x, w, b, n, c, hxw, group, eps: (x, w, b is not None, n, c, group, eps),
    # (No sample has a bias without a weight: PyTorch's backward of that case fails when
    # the statistics' gradients are used, as the oracle uses them.)
    samples=_gn_samples, public="native_group_norm",
    optional_tensor_args=(1, 2), tolerance={"float32": 1e-4},
    decomposition=_gn_decomposition, onnx=ox.group_norm)
