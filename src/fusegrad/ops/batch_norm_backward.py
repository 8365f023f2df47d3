"""`native_batch_norm_backward`: batch norm's input, weight and bias gradients as one op
(`NativeBatchNormBackwardBackward0` for double backward), as PyTorch records it.

Batch norm's derivative (normalization.py) always reaches this op's kernel: eager backward
calls it directly on the arrays, and backward graphs traced by AOT autograd or make_fx record
the op, which the code generator runs as an extern call of the same kernel. Eager and
compiled training therefore compute their batch-norm gradients with one formula, the closed
form over the statistics the forward saved (per channel, over its m values):

    grad_input  = weight * invstd * (g - sum(g) / m - xhat * sum(g * xhat) / m)
    grad_weight = sum(g * xhat),  grad_bias = sum(g),  xhat = (input - mean) * invstd

(in eval mode the running statistics, and grad_input = weight * invstd * g). The derivative
of this op (double backward) is written in fusegrad ops and recomputes the batch statistics
from the input, so it can be differentiated again.

As with `convolution_backward`, an output `output_mask` leaves out is a zero tensor of its
shape here, where PyTorch returns None: the registry's multi-output ops return tensors only.
"""

from __future__ import annotations

import numpy as np

from .._dispatch import call
from . import _native, _parallel
from ._util import Spec, array_format, format_of, format_strides, in_format, rand_array
from .nn import _legacy, _register_multi, _work
from .normalization import (
    _bn_kernel,
    _bn_shape,
    _channel_dot,
    _channel_sum,
    _check_norm_dtypes,
    _spread,
    _stat_dtype,
    _stat_np,
    channel_rows,
    from_rows,
    native_layout,
    rowwise,
    vector,
)
from .reductions import sum_dim
from .registry import Sample


def _check_grad_dtype(g, x) -> None:
    if _legacy(g) != _legacy(x):
        raise RuntimeError(f"expected scalar type {_legacy(x)} but found {_legacy(g)}")


def _kernel(g, x, w, rm, rv, save_mean, save_invstd, train, eps, output_mask):
    """The gradients, the input's laid out in the memory format the input suggests, as
    PyTorch's kernel allocates it (`array_format`): a channels-last input computes on its
    rows of channels (`channel_rows`), others in their layout, then laid out. (The checks
    are `_nchw_kernel`'s.)"""
    fmt = array_format(x)
    rows = None if fmt is None or g.shape != x.shape else channel_rows(x)
    if rows is not None:
        perm = (0,) + tuple(range(2, g.ndim)) + (1,)
        grows = g.transpose(perm).reshape(rows.shape)  # (a copy unless g is channels-last)
        gi, gw, gb = _kernel(grows, rows, w, rm, rv, save_mean, save_invstd, train, eps,
                             output_mask)
        return from_rows(gi, x.shape), gw, gb
    gi, gw, gb = _nchw_kernel(g, x, w, rm, rv, save_mean, save_invstd, train, eps,
                              output_mask)
    return in_format(gi, fmt), gw, gb


def _nchw_kernel(g, x, w, rm, rv, save_mean, save_invstd, train, eps, output_mask):
    """`_kernel` on an input in any layout, the input's gradient C-contiguous."""
    _check_grad_dtype(g, x)
    _check_norm_dtypes(x, w, rm, rv, save_mean, save_invstd)
    need_i, need_w, need_b = (bool(k) for k in output_mask)
    dt = x.dtype
    sdt = _stat_np(dt, w, rm, rv, save_mean, save_invstd)
    n, c = x.shape[0], x.shape[1]
    if x.size == 0:  # no values: zero sums, an empty input gradient
        return np.zeros(x.shape, dt), np.zeros((c,), sdt), np.zeros((c,), sdt)
    native = None
    if sdt == dt:  # (a half input meeting float32 statistics runs in NumPy)
        native = _native_kernel(g, x, w, rm, rv, save_mean, save_invstd, train, eps,
                                (need_i, need_w, need_b))
    if native is not None:
        gi, gw, gb = native
        return (np.zeros(x.shape, dt) if gi is None else gi,
                np.zeros((c,), sdt) if gw is None else gw,
                np.zeros((c,), sdt) if gb is None else gb)
    # Computed on (N, C * L) rows, per-channel factors spread along them (`_spread`).
    g2 = _work(g).reshape(n, -1)
    length = g2.shape[1] // c
    m = n * length
    if train:
        mean, invstd = _work(save_mean), _work(save_invstd)
    else:
        mean, invstd = _work(rm), 1.0 / np.sqrt(_work(rv) + eps)
    gb = _channel_sum(g2, c) if need_b or (train and need_i) else None
    centred = gw = None
    if need_w or (train and need_i):
        # Centred once: the per-channel dot product and the input's gradient share it.
        centred = rowwise(np.subtract, _work(x).reshape(n, -1), _spread(mean, length))
        gw = _channel_dot(g2, centred, c) * invstd
    gi = None
    if need_i:
        scale = _spread(invstd if w is None else invstd * _work(w), length)
        if train:
            # (g - (sum(g) + centred * invstd * sum(g * xhat)) / m) * scale, in `centred`.
            k_centred, k_sum = _spread(gw * invstd / m, length), _spread(gb / m, length)

            def part(i: int, j: int) -> None:
                rows = centred[i:j]
                np.multiply(rows, k_centred, out=rows)
                np.add(rows, k_sum, out=rows)
                np.subtract(g2[i:j], rows, out=rows)
                np.multiply(rows, scale, out=rows)

            _parallel.for_chunks(part, n, centred.size)
            gi = centred
        else:
            gi = rowwise(np.multiply, g2, scale)
        gi = gi.reshape(x.shape).astype(dt, copy=False)
    return (np.zeros(x.shape, dt) if gi is None else gi,
            np.zeros((c,), sdt) if gw is None or not need_w else gw.astype(sdt, copy=False),
            np.zeros((c,), sdt) if gb is None or not need_b else gb.astype(sdt, copy=False))


def _native_kernel(g, x, w, rm, rv, save_mean, save_invstd, train, eps, mask):
    """The kernel in C (ops/native/norm.c), channels shared by the C workers: the gradients
    `mask` asks for, None for the others. None where the NumPy path runs: other dtypes or
    layouts, a gradient that is not C-contiguous, or native kernels off."""
    layout = native_layout(x)
    if layout is None or g.shape != x.shape or not g.flags.c_contiguous or \
            (train and (save_mean is None or save_invstd is None)) or \
            (not train and (rm is None or rv is None)):
        return None
    n, c, length = layout
    fn = _native.typed("norm", "bn_backward", x.dtype, "pppppppppiiiiiii")
    if fn is None:
        return None
    dt = x.dtype
    need_i, need_w, need_b = mask
    gi = np.empty(x.shape, dt) if need_i else None
    gw = np.empty(c, dt) if need_w else None
    gb = np.empty(c, dt) if need_b else None
    if train:
        stats = (vector(save_mean, dt), vector(save_invstd, dt), None)
    else:
        stats = (vector(rm, dt), None, vector(rv, dt))
    ptrs = tuple(None if a is None else _native.address(a)
                 for a in (g, x) + stats + (vector(w, dt), gi, gw, gb))
    _native.run_pieces(fn, (*ptrs, int(train), _native.double_bits(eps), n, c, length), (), c,
                       2 * x.size)
    return gi, gw, gb


def _meta(g, x, w, rm, rv, save_mean, save_invstd, train, eps, output_mask):
    _check_grad_dtype(g, x)
    _check_norm_dtypes(x, w, rm, rv, save_mean, save_invstd)
    sdt = _stat_dtype(x, w, rm, rv, save_mean, save_invstd)
    c = x.shape[1]
    shape = tuple(x.shape)
    return [Spec(shape, x.dtype, format_strides(shape, format_of(x))), Spec((c,), sdt),
            Spec((c,), sdt)]


def _derivative(grads, g, x, w, rm, rv, save_mean, save_invstd, train, eps, output_mask):
    """Cotangents (ggi, ggw, ggb) of (grad_input, grad_weight, grad_bias) -> gradients of
    (grad_out, input, weight). In training the statistics are those of the input, so the
    input's gradient follows them too (the saved ones only stand for them, and have no
    gradient of their own, as in PyTorch)."""
    for name, t in (("save_invstd", save_invstd), ("save_mean", save_mean)):
        if t is not None and t.requires_grad:
            raise NotImplementedError(
                f"the derivative for 'native_batch_norm_backward {name}' is not implemented.")
    ggi, ggw, ggb = ((list(grads) if isinstance(grads, (list, tuple)) else [grads])
                     + [None] * 3)[:3]
    # An output the mask left out is a constant zero: its cotangent contributes nothing.
    ggi, ggw, ggb = (t if k else None for t, k in zip((ggi, ggw, ggb), output_mask))
    axes = [0] + list(range(2, x.dim()))
    shape = _bn_shape(x.dim(), x.shape[1])
    m = x.numel() // x.shape[1] if x.shape[1] else 0

    def csum(t):  # per-channel sums, kept as (1, C, 1, ...)
        return call(sum_dim, t, axes, True)

    if train:
        centred = x - csum(x) / m
        s = (csum(centred * centred) / m + eps).rsqrt()
    else:
        s = (rv + eps).rsqrt().reshape(shape)
        centred = x - rm.reshape(shape)
    xhat = centred * s
    ws = s if w is None else w.reshape(shape) * s
    terms = []  # of the gradient of grad_out
    dx = dw = None
    if not train:  # grad_input = ws * g; grad_weight = sum(g * xhat): bilinear
        if ggi is not None:
            terms.append(ws * ggi)
            dw = csum(ggi * g) * s
        if ggw is not None:
            terms.append(ggw.reshape(shape) * xhat)
            dx = g * (ggw.reshape(shape) * s)
    else:
        def proj(v):  # v less its mean and its xhat component, per channel
            return v - csum(v) / m - xhat * (csum(v * xhat) / m)

        gx_hat = None  # the gradient with respect to xhat, the statistics held
        if ggi is not None:
            terms.append(ws * proj(ggi))
            t = csum(ggi * proj(g))  # d/ds of <ggi, grad_input>, over weight
            dw = s * t
            gx_hat = -ws * (csum(g * xhat) / m * ggi + csum(ggi * xhat) / m * g)
        if ggw is not None:
            terms.append(ggw.reshape(shape) * xhat)
            gx_hat = ggw.reshape(shape) * g if gx_hat is None else (
                gx_hat + ggw.reshape(shape) * g)
        if gx_hat is not None:
            dx = s * proj(gx_hat)
            if ggi is not None:  # through invstd: d invstd / d x = -invstd^2 xhat / m
                wt = t if w is None else w.reshape(shape) * t
                dx = dx - (wt * s * s / m) * xhat
    if ggb is not None:
        terms.append(ggb.reshape(shape))
    dg = None
    for term in terms:
        dg = term if dg is None else dg + term
    if dg is not None and tuple(dg.shape) != tuple(g.shape):
        dg = dg.expand(g.shape)
    if dw is not None:
        dw = None if w is None else dw.reshape(w.shape)
    return (dg, dx, dw) + (None,) * 7


def _save(out, g, x, w, rm, rv, save_mean, save_invstd, train, eps, output_mask):
    return (g, x, w, rm, rv, save_mean, save_invstd, train, eps, list(output_mask))


def _samples(rng, dt):
    """Batch statistics of each input (training), or random running ones (eval), over 1-d,
    2-d and 3-d batch norm's shapes. (Every output is asked for, and each sample has a
    weight: without one, PyTorch's double backward fails when the weight's gradient is
    used. tests/test_batch_norm_backward.py covers affine=False as batch norm records it.)"""
    out = []
    for shape, train in (((4, 3), True), ((3, 2, 5), True), ((2, 3, 4, 5), True),
                         ((2, 2, 3, 2, 2), True), ((3, 2, 5), False), ((2, 3, 4, 5), False)):
        c = shape[1]
        x, w = rand_array(rng, shape, dt), rand_array(rng, (c,), dt)
        rm, rv = rand_array(rng, (c,), dt), rand_array(rng, (c,), dt, (0.5, 2.0))
        if train:
            _, mean, invstd = _bn_kernel(x, w, None, None, None, True, 0.1, 1e-5)
        else:
            mean = invstd = None
        g = rand_array(rng, shape, dt)
        out.append(Sample((g, x, w, rm, rv, mean, invstd, train, 1e-5, [True, True, True]),
                          name=f"{shape} train={train}"))
    return out


native_batch_norm_backward = _register_multi(
    "native_batch_norm_backward", (), (2, 3, 4, 5, 6), kernel=_kernel, meta=_meta,
    node="NativeBatchNormBackwardBackward0", derivative=_derivative, save=_save,
    nondiff_args=(3, 4), samples=_samples, public="native_batch_norm_backward",
    # (The derivative follows the statistics of the input: finite differences of the op
    # with its saved statistics held fixed are another function.)
    gradcheck=False, tolerance={"float32": 1e-4},
    saved_names=("grad_out", "input", "weight", "running_mean", "running_var", "save_mean",
                 "save_invstd", "train", "eps", ""))
