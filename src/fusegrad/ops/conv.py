"""Convolution as one op, `convolution` (`ConvolutionBackward0`), with the window ops it is
built on: `im2col` and `col2im` (`Im2ColBackward0`, `Col2ImBackward0`), each the other's
adjoint.

The kernel lays the input's windows out once (im2col, from a strided view) and multiplies them
with the weight in one batched BLAS matmul. Derivatives are written with fusegrad ops, so they
can be differentiated again; a plain `backward()` takes the NumPy fast paths here instead.
"""

from __future__ import annotations

import functools

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .. import _cbuild, _dtype
from ..autograd.grad_mode import is_grad_enabled
from . import _conv_native, _gemm, _onnx, _parallel, _workspace
from . import _flop_formulas as flop_formulas
from ._onnx import ints as onnx_ints
from ._util import (
    F32,
    FORMAT_ORDERS,
    HALF,
    Spec,
    dense_strides,
    dtype_of,
    format_of,
    format_strides,
    in_format,
    is_dense_in,
    numpy_backward,
    rand_array,
    refuse_dtypes,
    size_str,
    strided_copy,
    suggest_format,
    wrap_grad,
)
from .nn import _call, _legacy, _register_multi, _work, tensor_contiguous, tensor_in_format
from .registry import REGISTRY, Sample, register

# ---------------------------------------------------------------- windows (im2col)


def _out_size(size, k, s, p, d, ceil=False) -> int:
    span = size + 2 * p - d * (k - 1) - 1
    if ceil:
        n = -(-span // s) + 1
        if (n - 1) * s >= size + p:  # the last window must start inside the input or padding
            n -= 1
        return n
    return span // s + 1


def _windows(x, k, s, p, d, fill=0.0, ceil=False):
    """A strided view (N, C, *k, *out) of the windows of `x` (N, C, *spatial), padded with
    `fill`: (N, C, kh, kw, oh, ow) for an image, (N, C, kd, kh, kw, od, oh, ow) for a
    volume."""
    nd = x.ndim - 2
    size = x.shape[2:]
    out = [_out_size(size[i], k[i], s[i], p[i], d[i], ceil) for i in range(nd)]
    # Ceil mode may place a last window past the padded input: pad that far too.
    extra = [max((out[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 - size[i] - 2 * p[i], 0)
             for i in range(nd)]
    if any(p[:nd]) or any(extra):
        padded = np.full(x.shape[:2] + tuple(size[i] + 2 * p[i] + extra[i] for i in range(nd)),
                         fill, dtype=x.dtype)
        _parallel.copyto(padded[(slice(None),) * 2 + tuple(
            slice(p[i], p[i] + size[i]) for i in range(nd))], x)
        x = padded
    st = x.strides
    return as_strided(x, x.shape[:2] + tuple(k[:nd]) + tuple(max(o, 0) for o in out),
                      st[:2] + tuple(st[2 + i] * d[i] for i in range(nd))
                      + tuple(st[2 + i] * s[i] for i in range(nd)), writeable=False)


def _as4d(a):
    """(array as 4-D, how to undo): 3-D (C, H, W) gains a batch dim."""
    return (a[None], True) if a.ndim == 3 else (a, False)


def _window_args(k, d, p, s, order="kdps") -> None:
    """im2col's and col2im's errors for a kernel, dilation, padding or stride out of range,
    checked in `order` (each op has its own)."""
    checks = {"k": ("kernel size should be greater than zero", "kernel", k, k[0] > 0 < k[1]),
              "d": ("dilation should be greater than zero", "dilation", d, d[0] > 0 < d[1]),
              "p": ("padding should be non-negative", "pad", p, p[0] >= 0 <= p[1]),
              "s": ("stride should be greater than zero", "stride", s, s[0] > 0 < s[1])}
    for key in order:
        what, name, (a, b), ok = checks[key]
        if not ok:
            raise RuntimeError(f"{what}, but got {name}_height: {a} {name}_width: {b}")


def _im2col_shape(shape, k, d, p, s) -> tuple:
    """im2col's (blocks per column, columns) with PyTorch's errors for invalid arguments
    (kernel and meta alike)."""
    _window_args(k, d, p, s)
    h, w = shape[-2:]
    oh = _out_size(h, k[0], s[0], p[0], d[0])
    ow = _out_size(w, k[1], s[1], p[1], d[1])
    if oh < 1 or ow < 1:
        raise RuntimeError(
            f"Given input with spatial size ({h}, {w}), kernel_size=({k[0]}, {k[1]}), "
            f"dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), calculated shape of the "
            f"array of sliding blocks as ({oh}, {ow}), but its components must be at least "
            "one.")
    return shape[-3] * k[0] * k[1], oh * ow


def _im2col_kernel(a, kernel_size, dilation, padding, stride):
    _im2col_shape(a.shape, kernel_size, dilation, padding, stride)
    x, unbatched = _as4d(a)
    w = _windows(x, kernel_size, stride, padding, dilation)
    n, c, kh, kw, oh, ow = w.shape
    out = w.reshape(n, c * kh * kw, oh * ow)
    return out[0] if unbatched else out


def _im2col_meta(a, kernel_size, dilation, padding, stride):
    shape = tuple(a.shape)
    return Spec(shape[:-3] + _im2col_shape(shape, kernel_size, dilation, padding, stride),
                a.dtype)


def _col2im_kernel(a, output_size, kernel_size, dilation, padding, stride, half_sums=False):
    unbatched = a.ndim == 2
    cols = a[None] if unbatched else a
    n, ck, length = cols.shape
    kh, kw = kernel_size
    c = ck // (kh * kw)
    h, w = output_size
    oh = _out_size(h, kh, stride[0], padding[0], dilation[0])
    ow = _out_size(w, kw, stride[1], padding[1], dilation[1])
    if oh * ow != length:  # ceil-mode pooling windows: as many as the columns say
        ow = _out_size(w, kw, stride[1], padding[1], dilation[1], True)
        oh = length // max(ow, 1)
    out = _col2im_nd(cols.reshape(n, c, kh, kw, oh, ow), (h, w), kernel_size, dilation,
                     padding, stride, half_sums)
    return out[0] if unbatched else out


def _col2im_nd(cols, size, k, d, p, s, half_sums=False):
    """Windows (N, C, *k, *out) summed back into an (N, C, *size) input (the adjoint of
    `_windows`): one strided add per kernel offset, over all windows at once. A half type
    sums in float32, or with `half_sums` in its own type, rounding after each kernel
    offset's add (PyTorch's col2im kernel)."""
    nd = len(size)
    n, c = cols.shape[:2]
    out_sz = cols.shape[2 + nd:]
    full = [max(size[i] + 2 * p[i], (out_sz[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1)
            for i in range(nd)]
    out = np.zeros((n, c) + tuple(full), dtype=np.result_type(cols.dtype, F32)
                   if cols.dtype in HALF and not half_sums else cols.dtype)
    for offset in np.ndindex(*k[:nd]):
        target = tuple(slice(o * d[i], o * d[i] + (out_sz[i] - 1) * s[i] + 1, s[i])
                       for i, o in enumerate(offset))
        out[(slice(None),) * 2 + target] += cols[(slice(None),) * 2 + offset]
    inner = out[(slice(None),) * 2 + tuple(slice(p[i], p[i] + size[i]) for i in range(nd))]
    # Contiguous, as PyTorch's col2im: a gradient taken under create_graph is often viewed
    # next (`grad.view(n, -1)` in a gradient penalty).
    return in_format(inner.astype(cols.dtype, copy=False), None)


def _col2im_op_kernel(a, output_size, kernel_size, dilation, padding, stride):
    _col2im_meta(a, output_size, kernel_size, dilation, padding, stride)  # its errors
    return _col2im_kernel(a, output_size, kernel_size, dilation, padding, stride,
                          half_sums=True)


def _col2im_meta(a, output_size, kernel_size, dilation, padding, stride):
    _window_args(kernel_size, dilation, padding, stride, "ksdp")
    shape = tuple(a.shape)
    kk = kernel_size[0] * kernel_size[1]
    if shape[-2] % kk:  # PyTorch numbers the dims of the batched form
        raise RuntimeError(
            "Expected size of input's dimension 1 to be divisible by the product of "
            f"kernel_size, but got input.size(1)={shape[-2]} and kernel_size="
            f"({kernel_size[0]}, {kernel_size[1]}).")
    c = shape[-2] // (kernel_size[0] * kernel_size[1])
    return Spec(shape[:-2] + (c,) + tuple(output_size), a.dtype)


def _im2col_samples(rng, dt):
    return [Sample((rand_array(rng, s, dt), k, d, p, st), name=f"{s} k={k} s={st}")
            for s, k, d, p, st in (((2, 3, 5, 6), [2, 2], [1, 1], [0, 0], [1, 1]),
                                   ((1, 2, 7, 7), [3, 2], [2, 1], [1, 2], [2, 3]),
                                   ((2, 4, 4), [3, 3], [1, 1], [1, 1], [1, 1]))]


def _col2im_samples(rng, dt):
    out = []
    for s in _im2col_samples(rng, dt):
        x, k, d, p, st = s.args
        cols = _im2col_kernel(x, k, d, p, st)
        out.append(Sample((rand_array(rng, cols.shape, dt), list(x.shape[-2:]), k, d, p, st),
                          name=s.name))
    return out


im2col = register(
    "im2col", kernel=_im2col_kernel, meta=_im2col_meta, node="Im2ColBackward0",
    derivative=lambda g, size, k, d, p, s: (_call(col2im, g, size, k, d, p, s), None, None,
                                            None, None),
    save=lambda out, a, k, d, p, s: (list(a.shape[-2:]), k, d, p, s),
    samples=_im2col_samples, public="im2col", onnx=_onnx.im2col)
col2im = register(
    "col2im", kernel=_col2im_op_kernel, meta=_col2im_meta, node="Col2ImBackward0",
    derivative=lambda g, k, d, p, s: (_call(im2col, g, k, d, p, s), None, None, None, None,
                                      None),
    save=lambda out, a, size, k, d, p, s: (k, d, p, s),
    samples=_col2im_samples, public="col2im")

# ---------------------------------------------------------------- NumPy backward fast paths


# Below this many output pixels per image, the columns of the GEMMs are ordered (pixel, sample)
# ("batch last"): the runs that im2col and col2im copy are then `ow * n` values long instead
# of `ow`, which pays for moving the batch axis. Above it, the runs are long already and the
# (sample, pixel) order is faster.
BATCH_LAST_PIXELS = 128


def _batch_last(oh: int, ow: int) -> bool:
    return oh * ow <= BATCH_LAST_PIXELS


# A stride-1 convolution whose outputs fill at least this share of each padded input row
# builds its per-sample columns "wide": each kernel offset's column is one contiguous run of
# the flattened (padded) image, `(oh - 1) * width + ow` values, instead of `oh` runs of `ow`.
# The GEMM then also computes the `width - ow` positions per row that wrap around the
# image's edge, which are dropped. LeNet's first convolution (32 wide, 28 outputs): im2col
# 0.23 -> 0.08 ms for 14% more GEMM.
WIDE_MIN_SHARE = 0.8

# Weight gradients of convolutions with at most this many output channels per group sum one
# small GEMM per sample (g[n] @ cols[n]^T) instead of one GEMM whose shared dimension is the
# whole batch's pixels: with a handful of rows and columns and a shared dimension of 50,000,
# OpenBLAS spends its time packing (LeNet's first convolution, 6 x 25 outputs: 0.78 or 0.42 ms
# in either orientation, 0.13 ms per sample). It also needs no layout copy of g.
PER_SAMPLE_WEIGHT_GRAD_ROWS = 8


# Convolutions with few channels over small images run as direct convolutions in C, the
# samples as vector lanes (`_conv_native.direct_forward`, `direct_backward`): no im2col, and
# every multiply-add a vector one. Measured against im2col + GEMM at one thread (float32,
# forward / weight gradient / input gradient, ms): LeNet-5's second convolution 0.35 / 0.82
# (both gradients) against 0.62 / 1.36; 8 -> 16 channels 3x3 over 32x32, batch 32,
# 1.6 / 1.3 / 1.5 against 3.5 / 3.3 / 4.5; 64 channels 3x3 over 8x8, batch 32, 1.9 / 3.2
# (both) against 2.1 / 4.8. GEMMs win with more channels, fewer pixels (each
# weight-gradient tile then sums a short run and pays its reduction across lanes), few
# products per output (1 -> 32 channels 3x3 over 28x28, batch 128: 5.6 / 8.4 / 11.5
# against 4.1 / 5.7 / 5.5: the output's moves cost more than im2col) or large outputs. So:
# at most this many output channels, values per sample's output and products per output,
# at least this many products per output and (pixel, sample) pairs per output channel; the
# batch padded to the kernels' lanes by at most a quarter. An input gradient over fewer
# input channels than a block (`_conv_native.BLOCK`) wastes lanes of its accumulators and
# keeps the GEMM path (3 channels 3x3 over 32x32, batch 64: 9.0 against 6.2).
DIRECT_MAX_OUT = 64
DIRECT_MAX_OUTPUT = 32768
DIRECT_MAX_PRODUCTS = 1024
DIRECT_MIN_PRODUCTS = 16
DIRECT_MIN_SPAN = 2048


def _direct(n: int, c: int, o: int, kh: int, kw: int, oh: int, ow: int, groups: int) -> bool:
    """Whether a 2-D convolution of these sizes runs as a direct convolution."""
    padded = _conv_native.lanes(n)
    return (groups == 1 and n >= _conv_native.LANES and 4 * (padded - n) <= n
            and o <= DIRECT_MAX_OUT and o * oh * ow <= DIRECT_MAX_OUTPUT
            and DIRECT_MIN_PRODUCTS <= c * kh * kw <= DIRECT_MAX_PRODUCTS
            and oh * ow * n >= DIRECT_MIN_SPAN)


def _wide(x_shape, k, s, p, d, oh: int, ow: int) -> bool:
    """Whether `_sample_cols` lays the columns out wide (see `WIDE_MIN_SHARE`)."""
    return s[0] == s[1] == 1 and ow >= WIDE_MIN_SHARE * (x_shape[3] + 2 * p[1])


def _padded(x, p):
    """`x` (n, c, h, w) with a zero border of `p`, in a work buffer (`x` itself without
    padding)."""
    if not (p[0] or p[1]):
        return x
    n, c, h, w = x.shape
    xp = _workspace.scratch("conv.pad", (n, c, h + 2 * p[0], w + 2 * p[1]), x.dtype)
    if p[0]:
        xp[:, :, :p[0]] = 0
        xp[:, :, h + p[0]:] = 0
    if p[1]:
        xp[:, :, p[0]:h + p[0], :p[1]] = 0
        xp[:, :, p[0]:h + p[0], w + p[1]:] = 0
    _parallel.copyto(xp[:, :, p[0]:p[0] + h, p[1]:p[1] + w], x)
    return xp


def _sample_cols(x, k, s, p, d, wide: bool, taps=None, ones_row: bool = False):
    """Per-sample im2col of 4-D `x` in a work buffer: (n, c * kh * kw, oh * width), with
    `width` == ow, or, when `wide` (stride 1 only), the padded input's width: each offset's
    column is then one run of the flattened padded image, and the positions past `ow` in
    each row of `width` are not outputs (their values are finite, to be dropped). With
    `taps` (see `_taps`), only those kernel offsets' rows; with `ones_row` (wide only), a
    last row of ones, which a bias column in the weight turns into the bias, added inside
    the GEMM instead of in a pass of its own. Returns (cols, oh, ow, width)."""
    (r0, r1), (c0, c1) = taps if taps is not None else ((0, k[0]), (0, k[1]))
    n, c = x.shape[:2]
    if not wide:
        oh = _out_size(x.shape[2], k[0], s[0], p[0], d[0])
        ow = _out_size(x.shape[3], k[1], s[1], p[1], d[1])
        cols = _conv_native.im2col_pixels_last(x, s, p, d, oh, ow, ((r0, r1), (c0, c1)), True)
        rows = c * (r1 - r0) * (c1 - c0)  # (an empty batch cannot reshape with -1)
        if cols is not None:  # in C: read straight from x, no padded copy
            return cols.reshape(n, rows, oh * ow), oh, ow, ow
        win = _windows(x, k, s, p, d)[:, :, r0:r1, c0:c1]
        oh, ow = win.shape[4:]
        cols = _workspace.scratch("conv.cols", win.shape, win.dtype)
        _parallel.copyto(cols, win)  # im2col, a block of samples per thread
        return cols.reshape(n, rows, oh * ow), oh, ow, ow
    xp = _padded(x, p)
    hp, wp = xp.shape[2:]
    oh = hp - d[0] * (k[0] - 1)
    ow = wp - d[1] * (k[1] - 1)
    span = (oh - 1) * wp + ow
    sn, sc, sh, sw = xp.strides
    win = as_strided(xp[:, :, r0 * d[0]:, c0 * d[1]:], (n, c, r1 - r0, c1 - c0, span),
                     (sn, sc, sh * d[0], sw * d[1], sw), writeable=False)
    rows = c * (r1 - r0) * (c1 - c0)
    buf = _workspace.scratch("conv.cols", (n, rows + ones_row, oh * wp), x.dtype)
    if ones_row:
        buf[:, rows] = 1
    cols = buf[:, :rows].reshape(n, c, r1 - r0, c1 - c0, oh * wp)
    cols[..., span:] = 0  # the last row's positions past the image's end
    _parallel.copyto(cols[..., :span], win)
    return buf, oh, ow, wp


def _live_taps(size: int, k: int, s: int, p: int, d: int, out: int) -> tuple[int, int]:
    """The kernel offsets [lo, hi) along one axis that meet the input at some output
    position: an offset outside it reads only padding (a 3x3 kernel over a 1x1 image with
    padding 1 has one live offset per axis), so its columns are zeros and its weights' part
    of the GEMM can be left out without changing a sum."""
    live = []
    for i in range(k):
        first = max(0, -(-(p - i * d) // s))        # first output row reading row >= 0
        last = min(out - 1, (size - 1 + p - i * d) // s)  # last one reading row < size
        if first <= last:
            live.append(i)
    return (live[0], live[-1] + 1) if live else (0, k)


def _taps(x_shape, k, s, p, d, oh: int, ow: int) -> tuple:
    """The kernel offsets ((row lo, hi), (col lo, hi)) a 2-D convolution's GEMMs use: the
    live ones when at most a third of the kernel is live, else all. Leaving offsets out
    costs a gather of the weight's live part (runs of a few values, slow per byte), which
    only pays when it cuts most of the GEMMs' work."""
    return _taps_of(x_shape[2], x_shape[3], k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1],
                    oh, ow)


@functools.lru_cache(maxsize=256)
def _taps_of(h: int, w: int, kh: int, kw: int, sh: int, sw: int, ph: int, pw: int, dh: int,
             dw: int, oh: int, ow: int) -> tuple:
    """`_taps` by plain numbers, cached: every training step asks again for each layer."""
    k = (kh, kw)
    rows = _live_taps(h, kh, sh, ph, dh, oh)
    cols = _live_taps(w, kw, sw, pw, dw, ow)
    if 3 * (rows[1] - rows[0]) * (cols[1] - cols[0]) > k[0] * k[1]:
        return (0, k[0]), (0, k[1])
    return rows, cols


def _tap_weight(w, taps):
    """The weight's live offsets as an (o, cg * taps) matrix: a strided view where one
    offset is live (the GEMMs read it in place, each thread its rows: ResNet's 512-channel
    3x3 layers over a 1x1 image, gather and product 0.47 -> 0.24 ms at two threads, the
    same bits), else contiguous."""
    (r0, r1), (c0, c1) = taps
    if (r1 - r0, c1 - c0) == w.shape[2:]:
        return w.reshape(w.shape[0], -1)
    if r1 - r0 == 1 == c1 - c0:
        return w[:, :, r0, c0]
    return np.ascontiguousarray(w[:, :, r0:r1, c0:c1]).reshape(w.shape[0], -1)


def _padded_batch_last(x, p):
    """`x` (n, c, h, w) as (c, h + 2 p0, w + 2 p1, n) with a zero border, in a work buffer."""
    n, c, h, w = x.shape
    xt = _workspace.scratch("conv.pad", (c, h + 2 * p[0], w + 2 * p[1], n), x.dtype)
    if p[0]:
        xt[:, :p[0]] = 0
        xt[:, h + p[0]:] = 0
    if p[1]:
        xt[:, p[0]:h + p[0], :p[1]] = 0
        xt[:, p[0]:h + p[0], w + p[1]:] = 0
    _parallel.copyto(xt[:, p[0]:p[0] + h, p[1]:p[1] + w], x.transpose(1, 2, 3, 0))
    return xt


def _cols(x, k, s, p, d, batch_last, taps=None):
    """im2col of 4-D `x` for one GEMM over the whole batch: (c*kh*kw, columns), columns
    ordered (oh, ow, n) when `batch_last`, else (n, oh, ow); with oh and ow. With `taps`
    (see `_taps`), only those kernel offsets' rows. The columns live in a work buffer."""
    (r0, r1), (c0, c1) = taps if taps is not None else ((0, k[0]), (0, k[1]))
    if not batch_last:
        oh = _out_size(x.shape[2], k[0], s[0], p[0], d[0])
        ow = _out_size(x.shape[3], k[1], s[1], p[1], d[1])
        cols = _conv_native.im2col_pixels_last(x, s, p, d, oh, ow, ((r0, r1), (c0, c1)),
                                               False)
        if cols is not None:  # in C: read straight from x, no padded copy
            return cols.reshape(x.shape[1] * (r1 - r0) * (c1 - c0), x.shape[0] * oh * ow), oh, ow
        win = _windows(x, k, s, p, d)[:, :, r0:r1, c0:c1]
        n, c, kh, kw, oh, ow = win.shape
        cols = _workspace.scratch("conv.cols", (c, kh, kw, n, oh, ow), win.dtype)
        _parallel.copyto(cols, win.transpose(1, 2, 3, 0, 4, 5))
        return cols.reshape(c * kh * kw, n * oh * ow), oh, ow
    n, c, h, w = x.shape
    oh = _out_size(h, k[0], s[0], p[0], d[0])
    ow = _out_size(w, k[1], s[1], p[1], d[1])
    cols = _conv_native.im2col(x, s, p, d, oh, ow, ((r0, r1), (c0, c1)))
    if cols is not None:  # in C: one pass per channel, shared without the GIL
        return cols.reshape(c * (r1 - r0) * (c1 - c0), oh * ow * n), oh, ow
    xt = _padded_batch_last(x, p)
    sc, sh, sw, sn = xt.strides
    win = as_strided(xt[:, r0 * d[0]:, c0 * d[1]:], (c, r1 - r0, c1 - c0, oh, ow, n),
                     (sc, sh * d[0], sw * d[1], sh * s[0], sw * s[1], sn), writeable=False)
    cols = _workspace.scratch("conv.cols", win.shape, x.dtype)
    _parallel.copyto(cols, win)  # the im2col copy, a chunk of channels (or rows) per thread
    return cols.reshape(c * (r1 - r0) * (c1 - c0), oh * ow * n), oh, ow


# Batch-last col2im with kernels at least this wide sums in two stages: the kernel's columns
# into one row of windows per kernel row, then the kernel's rows into the image: kh + kw
# strided adds instead of kh * kw (LeNet's second convolution, 5x5: 0.29 -> 0.23 ms).
TWO_STAGE_MIN_WIDTH = 4


def _col2im_cols(cols, c, size, k, s, p, d, oh, ow, n, batch_last, taps=None):
    """The adjoint of `_cols`: columns summed into an (n, c, h, w) image, in C per channel
    (`_conv_native.col2im`) or else one strided add per kernel offset over all channels and
    samples (kh*kw vectorised adds, not per pixel), or per kernel row and column
    (`TWO_STAGE_MIN_WIDTH`)."""
    (r0, r1), (c0, c1) = taps if taps is not None else ((0, k[0]), (0, k[1]))
    h, w = size
    full_h = max(h + 2 * p[0], (oh - 1) * s[0] + d[0] * (k[0] - 1) + 1)
    full_w = max(w + 2 * p[1], (ow - 1) * s[1] + d[1] * (k[1] - 1) + 1)
    if h * w > 1 or not batch_last:
        # In C: each channel's sums and move out in one pass, without the GIL (over 1x1
        # images NumPy's three passes are as fast: the move out is a scattered store).
        gi = _conv_native.col2im(cols, c, size, s, p, d, oh, ow, n, (full_h, full_w),
                                 ((r0, r1), (c0, c1)), batch_last)
        if gi is not None:
            return gi
    two_stage = batch_last and c1 - c0 >= TWO_STAGE_MIN_WIDTH
    if batch_last:
        acc = _workspace.zeros("conv.acc", (c, full_h, full_w, n), cols.dtype)
        c6 = cols.reshape(c, r1 - r0, c1 - c0, oh, ow, n)
    else:  # channels first, so that each add runs over aligned (n, rows, cols) blocks
        acc = _workspace.zeros("conv.acc", (c, n, full_h, full_w), cols.dtype)
        c6 = cols.reshape(c, r1 - r0, c1 - c0, n, oh, ow)
    pix = acc if batch_last else acc.transpose(0, 2, 3, 1)  # (c, H, W, n) either way
    rows = (_workspace.zeros("conv.acc_rows", (c, r1 - r0, oh, full_w, n), cols.dtype)
            if two_stage else None)

    def w_slice(j: int) -> slice:
        return slice(j * d[1], j * d[1] + (ow - 1) * s[1] + 1, s[1])

    def h_slice(i: int) -> slice:
        return slice(i * d[0], i * d[0] + (oh - 1) * s[0] + 1, s[0])

    def channels(a: int, b: int) -> None:
        # Channels never overlap: each thread sums its own, in the one-thread order.
        if two_stage:
            for j in range(c0, c1):
                rows[a:b, :, :, w_slice(j)] += c6[a:b, :, j - c0]
            for i in range(r0, r1):
                pix[a:b, h_slice(i)] += rows[a:b, i - r0]
            return
        for i in range(r0, r1):
            hs = h_slice(i)
            for j in range(c0, c1):
                if batch_last:
                    pix[a:b, hs, w_slice(j)] += c6[a:b, i - r0, j - c0]
                else:
                    acc[a:b, :, hs, w_slice(j)] += c6[a:b, i - r0, j - c0]

    _parallel.for_chunks(channels, c, cols.size)
    inner = pix[:, p[0]:p[0] + h, p[1]:p[1] + w]  # (c, h, w, n)
    return _parallel.copy(inner.transpose(3, 0, 1, 2))  # out of the work buffer


def _conv_backward_np(g, x, w, need_x, need_w, s, p, d, groups, direct: bool = True):
    """(gi, gw) of a 2-D convolution as arrays (None where not needed): one GEMM per group
    over the whole batch for each (the batch folded into the GEMM's columns), over the
    kernel offsets that meet the input only; a small weight gradient sums one GEMM per
    sample instead (`PER_SAMPLE_WEIGHT_GRAD_ROWS`)."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    oh, ow = g.shape[2], g.shape[3]
    taps = _taps(x.shape, (kh, kw), s, p, d, oh, ow)
    if direct and _direct(n, c, o, kh, kw, oh, ow, groups):
        direct_x = need_x and c >= _conv_native.BLOCK
        both = _conv_native.direct_backward(np.ascontiguousarray(g), np.ascontiguousarray(x),
                                            np.ascontiguousarray(w), direct_x, need_w, s, p, d,
                                            taps)
        if both is not None:
            gi, gw = both
            if need_x and not direct_x:
                gi = _conv_backward_np(g, x, w, True, False, s, p, d, groups, False)[0]
            return gi, gw
    (r0, r1), (c0, c1) = taps
    ckk = cg * (r1 - r0) * (c1 - c0)
    bl = _batch_last(oh, ow)
    per_sample = not bl and og <= PER_SAMPLE_WEIGHT_GRAD_ROWS
    gi = gw = None
    gt = None
    if need_x or not per_sample:
        gt = (_conv_native.batch_last(g.reshape(n, o, oh * ow), "conv.gt")
              if bl and g.flags.c_contiguous else None)
        if gt is None:
            src = g.transpose(1, 2, 3, 0) if bl else g.transpose(1, 0, 2, 3)
            gt = _workspace.scratch("conv.gt", src.shape, g.dtype)
            _parallel.copyto(gt, src)
        gt = gt.reshape(groups, og, oh * ow * n)

    def weight_grad():
        if per_sample:
            cols = _sample_cols(x, (kh, kw), s, p, d, False, taps)[0]
            cols = cols.reshape(n, groups, ckk, oh * ow)
            per = _gemm.matmul(g.reshape(n, groups, og, oh * ow), cols.transpose(0, 1, 3, 2))
            gw = per.sum(0)
        else:
            cols, _, _ = _cols(x, (kh, kw), s, p, d, bl, taps)
            gw = _weight_grad_gemm(gt, cols.reshape(groups, ckk, oh * ow * n))
        gw = gw.reshape(o, cg, r1 - r0, c1 - c0)
        if gw.shape != w.shape:  # offsets that read only padding get no gradient
            full = np.zeros(w.shape, dtype=gw.dtype)
            full[:, :, r0:r1, c0:c1] = gw
            gw = full
        return gw

    def input_grad():
        wm = _tap_weight(w, taps).reshape(groups, og, ckk).transpose(0, 2, 1)
        gcols = _workspace.scratch("conv.gcols", (groups, ckk, oh * ow * n), g.dtype)
        _gemm.matmul(wm, gt, out=gcols)
        return _col2im_cols(gcols, c, (h, wd), (kh, kw), s, p, d, oh, ow, n, bl, taps)

    if need_w and need_x:
        # Independent: side by side on two threads where that pays (each GEMM's work, the
        # columns and the col2im included in what is timed).
        gemm = n * oh * ow * o * ckk
        gw, gi = _parallel.concurrently([weight_grad, input_grad], 2 * gemm,
                                        ("conv.backward", x.shape, w.shape, g.strides))
    elif need_w:
        gw = weight_grad()
    elif need_x:
        gi = input_grad()
    return gi, gw


# The weight gradient's GEMM, g (og x L) times the columns' transpose (L x ckk), runs as
# (cols @ g^T)^T when the columns have at least as many rows as g and g at most this many:
# OpenBLAS's kernels are up to twice as fast with the longer side as the product's rows
# there (LeNet's second convolution 0.55 -> 0.25 ms, ResNet-18's 64-channel 3x3 at 32x32
# 20 -> 16 ms); with 256 channels and more, g @ cols^T is as fast or faster.
ROWS_FIRST_MAX_OUT = 128


def _weight_grad_gemm(gt, cols):
    """(groups, og, ckk): gt (groups, og, L) @ cols (groups, ckk, L) transposed, in the
    faster orientation for the shapes (the result C-contiguous either way)."""
    og, ckk = gt.shape[1], cols.shape[1]
    if ckk >= og and og <= ROWS_FIRST_MAX_OUT:
        prod = _gemm.matmul(cols, gt.transpose(0, 2, 1))
        out = _conv_native.transposed(prod[0]) if prod.shape[0] == 1 else None
        if out is not None:  # in C, in tiles
            return out[None]
        return np.ascontiguousarray(prod.transpose(0, 2, 1))
    return _gemm.matmul(gt, cols.transpose(0, 2, 1))


# ---------------------------------------------------------------- convolution


# The memory format of a convolution's results. PyTorch's CPU convolution computes in
# channels-last when its input or its weight suggests it (`format_of`), and returns its
# output and its input's and weight's gradients in that format; for volumes only its oneDNN
# (mkldnn) kernels do, its own ones (slow_conv3d) compute and return contiguous tensors.
# Which of the two runs is PyTorch's heuristic, reproduced in `_onednn` (it decides how a
# weight gradient's size-1 dims are strided in 2-D as well). `_conv_format` returns the
# format's name or None (contiguous); its arguments may be arrays or tensors (fakes too).


def _onednn(x, w, stride, dilation, groups, transposed, output_padding) -> bool:
    """Whether PyTorch's CPU convolution of these operands runs in oneDNN: float32 unless
    the convolution is small (a 1x1 kernel, unstrided and undilated, on fewer than 16
    samples at one thread; or one sample and one group, a kernel side of at most 3 and at
    most 20480 input values), bfloat16 and float16 where the CPU has the instructions
    PyTorch asks for; not with an output padding at least the stride."""
    if transposed and any(o >= s for o, s in zip(output_padding, stride)):
        return False
    name = x.dtype.name
    if name == "bfloat16" or name == "float16":
        return _onednn_half(name)
    if name != "float32":
        return False
    xs, ws = x.shape, w.shape
    if len(xs) == 3:  # PyTorch runs a 1-D convolution as the 2-D one of height 1
        xs, ws = (xs[0], xs[1], 1, xs[2]), (ws[0], ws[1], 1, ws[2])
    n = xs[0]
    if not (any(v != 1 for v in stride) or any(v != 1 for v in dilation) or n >= 16
            or ws[-1] != 1 or ws[-2] != 1 or _parallel.num_threads() > 1):
        return False
    return (groups > 1 or (ws[-1] > 3 and ws[-2] > 3) or n > 1
            or n * xs[1] * xs[2] * xs[3] > 20480)


@functools.cache
def _onednn_half(name: str) -> bool:
    """Whether PyTorch's oneDNN convolutions take `name` ("bfloat16", "float16") on this
    CPU: bfloat16 with AVX-512 (byte/word, vector length, double/quad word), float16 with
    AVX-512 FP16 or AMX FP16 (x86 flags); on ARM, its bf16 or fp16 extensions."""
    flags = set(_cbuild.cpu_features().split())
    if name == "bfloat16":
        return {"avx512bw", "avx512vl", "avx512dq"} <= flags or "bf16" in flags
    return bool({"avx512_fp16", "amx_fp16", "fphp"} & flags)


def _conv_format(x, w, stride, dilation, groups, transposed, output_padding) -> str | None:
    """The memory format of a convolution's output and gradients (see above)."""
    if x.__class__ is np.ndarray and w.__class__ is np.ndarray and x.flags.c_contiguous and \
            w.flags.c_contiguous and x.strides[1] > x.itemsize and \
            w.strides[1] > w.itemsize and x.size > 1 and w.size > 1:
        return None  # two C-contiguous arrays (`array_format`'s quick test): the common case
    nd = len(x.shape)
    if nd == 4:
        if format_of(x) == "channels_last" or format_of(w) == "channels_last":
            return "channels_last"
    elif nd == 5 and "channels_last_3d" in (format_of(x), format_of(w)) and \
            _onednn(x, w, stride, dilation, groups, transposed, output_padding):
        return "channels_last_3d"
    return None


def _split_format(fmt, shape, x, w, stride, dilation, groups, transposed,
                  output_padding) -> str | None:
    """`fmt` for a result of `shape` (an output or an input gradient) of a grouped
    convolution in PyTorch's own kernels, which convolve group by group and concatenate:
    a group's share of the result in `fmt` that suggests no format (one channel of a 1x1
    image) makes the concatenation contiguous."""
    if fmt is None or groups == 1 or not _ambiguous_share(shape, groups, fmt) or \
            _onednn(x, w, stride, dilation, groups, transposed, output_padding):
        return fmt
    return None


def _ambiguous_share(shape, groups: int, fmt: str) -> bool:
    share = (shape[0], shape[1] // groups) + tuple(shape[2:])
    return suggest_format(share, dense_strides(share, FORMAT_ORDERS[fmt])) is None


def _conv_layouts(x, w, stride, dilation, groups, transposed, output_padding) -> tuple:
    """(input-gradient format, weight-gradient format, weight-gradient strides) of a
    convolution: the formats as `_conv_format` (`_split_format` for the input's); the
    strides None where the weight's gradient is a new tensor in its format, else the
    weight's own. PyTorch's own 2-D kernels (not dilated, or transposed) give the weight's
    strides when the weight is laid out in the format already, so its size-1 dims keep
    theirs (a 1x1 kernel's contiguous weight gets contiguous strides under channels-last);
    oneDNN's, the dilated and the volume kernels allocate anew."""
    fmt = _conv_format(x, w, stride, dilation, groups, transposed, output_padding)
    gi_fmt = _split_format(fmt, tuple(x.shape), x, w, stride, dilation, groups, transposed,
                           output_padding)
    ws = tuple(w.shape)
    if len(ws) != 4 or 1 not in ws or (not transposed and any(v != 1 for v in dilation)):
        return gi_fmt, fmt, None  # (without size-1 dims, the two strides agree)
    strides = tuple(w.stride()) if hasattr(w, "stride") else tuple(
        v // w.itemsize for v in w.strides)
    order = FORMAT_ORDERS[fmt] if fmt else (0, 1, 2, 3)
    if strides == dense_strides(ws, order) or not is_dense_in(ws, strides, order) or \
            _onednn(x, w, stride, dilation, groups, transposed, output_padding):
        return gi_fmt, fmt, None
    return gi_fmt, fmt, strides


def _grad_layouts(gi, gw, x, w, stride, dilation, transposed, output_padding, groups):
    """(gi, gw) arrays laid out as PyTorch's convolution backward lays them (see above)."""
    if 1 not in w.shape and _conv_format(x, w, stride, dilation, groups, transposed,
                                         output_padding) is None:
        # The common case: contiguous (a flag test each, for arrays of the NumPy paths).
        return (None if gi is None else in_format(gi, None),
                None if gw is None else in_format(gw, None))
    gi_fmt, gw_fmt, keep = _conv_layouts(x, w, stride, dilation, groups, transposed,
                                         output_padding)
    if gi is not None:
        gi = in_format(gi, gi_fmt)
    if gw is not None:
        gw = in_format(gw, gw_fmt)
        if keep is not None:
            gw = strided_copy(gw, keep)
    return gi, gw


def _conv_2d_args(x_ndim, stride, padding, dilation):
    """Stride, padding, dilation as 2-D lists (1-D convolutions run as height-1 2-D ones)."""
    if x_ndim == 3:
        return [1, stride[0]], [0, padding[0]], [1, dilation[0]]
    return list(stride), list(padding), list(dilation)


def _conv_transposed_kernel(x, w, b, stride, padding, dilation, output_padding, groups):
    """The adjoint of a convolution: weight columns times input pixels, summed back into the
    output image (col2im)."""
    dt = x.dtype
    one_d = x.ndim == 3
    s, p, d = _conv_2d_args(x.ndim, stride, padding, dilation)
    op = [0, output_padding[0]] if one_d else list(output_padding)
    x4 = _work(x)[:, :, None] if one_d else _work(x)
    w4 = _work(w)[:, :, None] if one_d else _work(w)
    n, cin, h, wd = x4.shape
    _, cog, kh, kw = w4.shape
    wm = w4.reshape(groups, cin // groups, cog * kh * kw).transpose(0, 2, 1)
    cols = _gemm.matmul(wm, x4.reshape(n, groups, cin // groups, h * wd))
    cols = cols.reshape(n, groups * cog * kh * kw, h * wd)
    size = [(h - 1) * s[0] - 2 * p[0] + d[0] * (kh - 1) + op[0] + 1,
            (wd - 1) * s[1] - 2 * p[1] + d[1] * (kw - 1) + op[1] + 1]
    if op[0] or op[1]:
        # Output padding: the whole canvas the windows cover, cropped by the padding at the
        # start and cut or zero-extended at the end to the output's size.
        canvas = [size[i] + 2 * p[i] - op[i] for i in range(2)]
        out = _col2im_kernel(cols, canvas, [kh, kw], d, [0, 0], s)
        out = np.pad(out, ((0, 0), (0, 0)) + tuple(
            (0, max(p[i] + size[i] - canvas[i], 0)) for i in range(2)))
        out = out[:, :, p[0]:p[0] + size[0], p[1]:p[1] + size[1]]
    else:
        out = _col2im_kernel(cols, size, [kh, kw], d, p, s)
    if b is not None:
        out += _work(b).reshape(1, -1, 1, 1)
    if one_d:
        out = out[:, :, 0]
    return out.astype(dt, copy=False)


def _by_taps(x, w, wk, s, p, d, groups: int) -> bool:
    """Whether a convolution must run `_conv_by_taps`: im2col would multiply a NaN or
    infinite weight by the padding's zeros, where PyTorch's kernel never reads the padding
    (`_pads_multiplied`). `wk` is the weight as the kernels compute. One sum tells whether
    all weights are finite (an overflow is a false alarm that only costs the exact path)."""
    if not any(p) or np.isfinite(np.add.reduce(wk, axis=None)):
        return False
    return not _pads_multiplied(x, w, s, p, d, groups)


def _pads_multiplied(x, w, s, p, d, groups: int) -> bool:
    """Whether PyTorch's CPU kernel for this padded convolution multiplies the padding's
    zeros by the weights (so that a NaN or infinite weight puts NaN where it meets the
    padding): its own kernels and oneDNN's GEMM-based one do (im2col), oneDNN's direct
    kernels do not. oneDNN takes a direct kernel (`_onednn_direct`) for most shapes and
    falls back to its GEMM one for the others."""
    return not (_onednn(x, w, s, d, groups, False, ()) and
                _onednn_direct(tuple(x.shape), tuple(w.shape), s, p, d, groups))


def _onednn_direct(xs: tuple, ws: tuple, s, p, d, groups: int) -> bool:
    """Whether oneDNN runs a float32 convolution of input shape `xs` and weight shape `ws`
    in one of its direct kernels (as on AVX-512 CPUs), not in its GEMM-based one. Groups:
    one, depthwise (one input and one output channel per group), or per group input and
    output channels both multiples of 4, or fewer than 4 input channels and a multiple of 8
    output channels. Padding: less than the (dilated) kernel's extent on every side of every
    axis, and on the last axis (the width, along which the kernels block the outputs) at
    most the number of outputs on either side."""
    cg, og = ws[1], ws[0] // groups
    if groups != 1 and not (cg == og == 1 or (cg % 4 == 0 and og % 4 == 0) or
                            (cg < 4 and og % 8 == 0)):
        return False
    nd = len(xs) - 2
    for i in range(nd):
        ext = (ws[2 + i] - 1) * d[i] + 1
        out = (xs[2 + i] + 2 * p[i] - ext) // s[i] + 1
        end = (out - 1) * s[i] + ext - xs[2 + i] - p[i]  # the padding the outputs reach
        if ext <= p[i] or ext <= end or (i == nd - 1 and max(p[i], end) > out):
            return False
    return True


def _unread_weights(out, x, w, w4, taps, stride, padding, dilation, groups: int) -> None:
    """Where the GEMM left out the kernel offsets that read only padding (all but `taps`,
    the live rows and columns of `w4`) and PyTorch's kernel multiplies the padding
    (`_pads_multiplied`), a NaN or infinite weight at those offsets makes every output of
    its channel NaN (written into `out`, (n, o, oh, ow)). Checked only then, so the shapes
    of oneDNN's direct kernels (most batches) never read the unread weights."""
    if not _pads_multiplied(x, w, stride, padding, dilation, groups):
        return
    (r0, r1), (c0, c1) = taps
    unread = np.ones(w4.shape[2:], dtype=bool)
    unread[r0:r1, c0:c1] = False
    bad = ~np.isfinite(w4[:, :, unread]).all(axis=(1, 2))
    if bad.any():
        out[:, bad] = np.nan


def _padding_products(out, w4, size, s, p, d) -> None:
    """NaN into `out` ((n, o, oh, ow), computed without the padding's products) wherever a
    NaN or infinite weight of `w4` meets the padding: the 2-D convolution of input size
    `size` as im2col computes it (0 times a non-finite value is NaN)."""
    bad = ~np.isfinite(w4).all(axis=1)  # (o, kh, kw)
    hit = np.zeros((w4.shape[0],) + out.shape[2:], dtype=bool)
    for i, j in zip(*np.nonzero(bad.any(axis=0))):
        pads = []
        for ax, t in ((0, i), (1, j)):
            pos = np.arange(out.shape[2 + ax]) * s[ax] - p[ax] + t * d[ax]
            pads.append((pos < 0) | (pos >= size[ax]))
        hit[bad[:, i, j]] |= pads[0][:, None] | pads[1][None, :]
    out[:, hit] = np.nan


def _conv_by_taps(x, w, b, s, p, d, groups, out_sz):
    """The convolution as a sum over the kernel's offsets, each offset's product taken over
    only the output positions it reads the input at (none of the padding's zeros): PyTorch's
    values where a weight is NaN or infinite (`_by_taps`). One GEMM per
    offset and group over the batch, so as many products as im2col's, without its copies'
    layout; only for such weights."""
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    og = o // groups
    k = w.shape[2:]
    acc = np.result_type(x.dtype, w.dtype)
    out = np.zeros((n, groups, og) + tuple(out_sz), dtype=acc)
    xg = x.reshape((n, groups, cg) + x.shape[2:])
    wg = w.reshape((groups, og, cg) + tuple(k))
    for tap in np.ndindex(*k):
        dst, src = [], []
        for i, t in enumerate(tap):
            # the outputs q whose input position q * s - p + t * d lies inside the input
            first = max(0, -(-(p[i] - t * d[i]) // s[i]))
            last = min(out_sz[i] - 1, (x.shape[2 + i] - 1 + p[i] - t * d[i]) // s[i])
            if first > last:
                break
            start = first * s[i] - p[i] + t * d[i]
            dst.append(slice(first, last + 1))
            src.append(slice(start, start + (last - first) * s[i] + 1, s[i]))
        else:
            region = tuple(sl.stop - sl.start for sl in dst)
            cols = np.ascontiguousarray(xg[(slice(None),) * 3 + tuple(src)]).reshape(
                n, groups, cg, -1)
            prod = np.matmul(wg[(slice(None),) * 3 + tap], cols)  # (n, groups, og, cells)
            out[(slice(None),) * 3 + tuple(dst)] += prod.reshape((n, groups, og) + region)
    out = out.reshape((n, o) + tuple(out_sz))
    if b is not None:
        out += b.reshape((1, o) + (1,) * len(k))
    return out


def _conv_nd_kernel(x, w, b, s, p, d, groups):
    """A convolution over any number of spatial dims (volumes): im2col of each sample's
    windows, then one batched GEMM per group."""
    n = x.shape[0]
    o, cg = w.shape[:2]
    k = w.shape[2:]
    win = _windows(x, k, s, p, d)
    out_sz = win.shape[2 + len(k):]
    ckk = cg * int(np.prod(k))
    cols = np.empty(win.shape, dtype=win.dtype)
    _parallel.copyto(cols, win)  # im2col, a block of samples per thread
    cols = cols.reshape(n, groups, ckk, int(np.prod(out_sz)))
    out = _gemm.matmul(w.reshape(groups, o // groups, ckk), cols).reshape(
        (n, o) + out_sz)
    if b is not None:
        out += b.reshape((1, o) + (1,) * len(k))
    return out


def _conv_transposed_nd_kernel(x, w, b, s, p, d, output_padding, groups):
    """A transposed convolution over any number of spatial dims: weight columns times
    input pixels, summed back into the output (col2im) on the windows' whole canvas, then
    cropped by the padding and cut or zero-extended to the output's size."""
    n, cin = x.shape[:2]
    cog = w.shape[1]
    k = w.shape[2:]
    sp = x.shape[2:]
    nd = len(k)
    wm = w.reshape(groups, cin // groups, cog * int(np.prod(k))).transpose(0, 2, 1)
    cols = _gemm.matmul(wm, x.reshape(n, groups, cin // groups, int(np.prod(sp))))
    cols = cols.reshape((n, groups * cog) + tuple(k) + tuple(sp))
    size = [(sp[i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + output_padding[i] + 1
            for i in range(nd)]
    canvas = [(sp[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 for i in range(nd)]
    full = _col2im_nd(cols, canvas, k, d, [0] * nd, s)
    out = np.zeros((n, groups * cog) + tuple(size), dtype=full.dtype)
    keep = [min(size[i], canvas[i] - p[i]) for i in range(nd)]
    out[(slice(None),) * 2 + tuple(slice(0, v) for v in keep)] = full[
        (slice(None),) * 2 + tuple(slice(p[i], p[i] + keep[i]) for i in range(nd))]
    if b is not None:
        out += b.reshape((1, -1) + (1,) * nd)
    return out


def _check_conv_dtypes(x, w, b) -> None:
    if b is not None and _legacy(x) != _legacy(b):
        raise RuntimeError(f"Input type ({dtype_of(x).cpp}) and bias type "
                           f"({dtype_of(b).cpp}) should be the same")
    if _legacy(x) != _legacy(w):
        raise RuntimeError(f"expected scalar type {_legacy(x)} but found {_legacy(w)}")


def _conv_kernel(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    if x.dtype != w.dtype or (b is not None and b.dtype != x.dtype):
        _check_conv_dtypes(x, w, b)
    _checked_shape(x.shape, w.shape, tuple(stride), tuple(padding), tuple(dilation),
                   transposed, tuple(output_padding), groups,
                   None if b is None else b.shape)
    fmt = _conv_format(x, w, stride, dilation, groups, transposed, output_padding)
    if x.ndim > 4:  # volumes: the general kernels
        args = (_work(x), _work(w), None if b is None else _work(b), stride, padding, dilation)
        if transposed:
            out = _conv_transposed_nd_kernel(*args, output_padding, groups)
        elif _by_taps(x, w, args[1], stride, padding, dilation, groups):
            out = _conv_by_taps(*args, groups, tuple(
                _out_size(x.shape[2 + i], w.shape[2 + i], stride[i], padding[i], dilation[i])
                for i in range(x.ndim - 2)))
        else:
            out = _conv_nd_kernel(*args, groups)
        return in_format(out.astype(x.dtype, copy=False), fmt)
    if transposed:
        out = _conv_transposed_kernel(x, w, b, stride, padding, dilation, output_padding,
                                      groups)
        return in_format(out, _split_format(fmt, out.shape, x, w, stride, dilation, groups,
                                            True, output_padding))
    dt = x.dtype
    one_d = x.ndim == 3
    s, p, d = _conv_2d_args(x.ndim, stride, padding, dilation)
    x4 = _work(x)[:, :, None] if one_d else _work(x)
    w4 = _work(w)[:, :, None] if one_d else _work(w)
    n, c = x4.shape[:2]
    o, _, kh, kw = w4.shape
    oh = _out_size(x4.shape[2], kh, s[0], p[0], d[0])
    ow = _out_size(x4.shape[3], kw, s[1], p[1], d[1])
    bias = None if b is None else _work(b)
    out = None
    after = False  # (whether the weights are checked after the GEMM, below)
    if _direct(n, c, o, kh, kw, oh, ow, groups):
        taps = _taps(x4.shape, (kh, kw), s, p, d, oh, ow)
        out = _conv_native.direct_forward(np.ascontiguousarray(x4), np.ascontiguousarray(w4),
                                          bias, s, p, d, oh, ow, taps)
        # The direct kernel reads no padding: where PyTorch's multiplies it, a non-finite
        # weight's products with it are put back (a small weight: the sum is cheap).
        if out is not None and any(p) and \
                not np.isfinite(np.add.reduce(w4, axis=None)) and \
                _pads_multiplied(x, w, stride, padding, dilation, groups):
            _padding_products(out, w4, x4.shape[2:], s, p, d)
    if out is None:
        multiplied = w4
        if _batch_last(oh, ow):
            # Those GEMMs leave out the offsets that read only padding: their weights
            # multiply nothing there (nor in PyTorch's kernels), finite or not, and are not
            # summed for the check (most of a 3x3 layer's weights over a 1x1 image).
            (r0, r1), (c0, c1) = _taps(x4.shape, (kh, kw), s, p, d, oh, ow)
            if (r1 - r0, c1 - c0) != (kh, kw):
                multiplied = w4[:, :, r0:r1, c0:c1]
        # The weights are checked through the GEMM's result where that is the smaller
        # read: a non-finite weight that is multiplied makes every output of its channel
        # NaN or infinite (im2col multiplies it with every column), so finite outputs clear
        # all of them, and others take the check (and the exact path where it says so).
        # ResNet-18's stages 2-4 sum 1.4-89% as many outputs as weights, and a part of the
        # weight (`_taps`) is strided: its sum read every cache line of the whole weight
        # (512-channel 3x3 layers over a 1x1 image: 0.33 ms, twice their GEMM).
        after = any(p) and (multiplied is not w4 or multiplied.size > n * o * oh * ow)
        if not after and _by_taps(x, w, multiplied, stride, padding, dilation, groups):
            out = _conv_by_taps(x4, w4, bias, s, p, d, groups, (oh, ow))
    if out is None:
        out = _conv_gemm(x4, w4, bias, s, p, d, groups, oh, ow, fmt)
        if after and not np.isfinite(np.add.reduce(out, axis=None)) and \
                _by_taps(x, w, multiplied, stride, padding, dilation, groups):
            out = _conv_by_taps(x4, w4, bias, s, p, d, groups, (oh, ow))
        elif multiplied is not w4:
            _unread_weights(out, x, w, w4, ((r0, r1), (c0, c1)), stride, padding, dilation,
                            groups)
    if one_d:
        out = out[:, :, 0]
    if fmt is None:  # (the paths above give new C-contiguous arrays)
        return out.astype(dt, copy=False)
    fmt = _split_format(fmt, out.shape, x, w, stride, dilation, groups, False, output_padding)
    # (a channels-last result of the GEMM path is laid out so already: no copy)
    return in_format(out.astype(dt, copy=False), fmt)


def _conv_gemm(x4, w4, bias, s, p, d, groups, oh, ow, fmt=None):
    """The (n, o, oh, ow) convolution of 4-D `x4` with `w4` (plus `bias`) by im2col and
    GEMMs; laid out channels-last where `fmt` asks for it and the batch-last path moves
    the values anyway (one copy either way)."""
    o, cg, kh, kw = w4.shape
    n = x4.shape[0]
    ckk = cg * kh * kw
    if _batch_last(oh, ow):
        # Small images: one GEMM per group over the whole batch (columns ordered
        # pixel-major, batch last), then one pass that moves the batch first and adds the
        # bias.
        taps = _taps(x4.shape, (kh, kw), s, p, d, oh, ow)
        cols, oh, ow = _cols(x4, (kh, kw), s, p, d, True, taps)
        ckk = cols.shape[0] // groups
        out_t = _workspace.scratch("conv.out", (groups, o // groups, oh * ow * n), cols.dtype)
        _gemm.matmul(_tap_weight(w4, taps).reshape(groups, o // groups, ckk),
                         cols.reshape(groups, ckk, oh * ow * n), out=out_t)
        if fmt is not None:
            # Channels-last: (n, oh, ow, o) in memory, the bias added as it is written.
            out = np.empty((n, oh, ow, o), dtype=out_t.dtype)
            src = out_t.reshape(o, oh, ow, n).transpose(3, 1, 2, 0)
            if bias is None:
                _parallel.copyto(out, src)
            else:
                _parallel.for_chunks(lambda i, j: np.add(src[i:j], bias, out=out[i:j]), n,
                                     out.size)
            return out.transpose(0, 3, 1, 2)
        # In C: the batch moved first and the bias added in one pass.
        out = _conv_native.batch_first(out_t.reshape(o, oh * ow, n), bias)
        if out is not None:
            return out.reshape(n, o, oh, ow)
        if bias is None:
            return _parallel.copy(out_t.reshape(o, oh, ow, n).transpose(3, 0, 1, 2))
        out = np.empty((n, o, oh, ow), dtype=out_t.dtype)
        b4 = bias.reshape(1, o, 1, 1)
        src = out_t.reshape(o, oh, ow, n).transpose(3, 0, 1, 2)
        _parallel.for_chunks(lambda i, j: np.add(src[i:j], b4, out=out[i:j]), n, out.size)
        return out
    # Large images: per-sample GEMMs are big enough, and need no output transpose.
    if _wide(x4.shape, (kh, kw), s, p, d, oh, ow):
        return _conv_wide(x4, w4, bias, s, p, d, groups)
    cols = _sample_cols(x4, (kh, kw), s, p, d, False)[0]
    cols = cols.reshape(n, groups, ckk, oh * ow)
    out = _gemm.matmul(w4.reshape(groups, o // groups, ckk), cols).reshape(n, o, oh, ow)
    if bias is not None:
        out += bias.reshape(1, o, 1, 1)
    return out


def _conv_wide(x, w, b, s, p, d, groups):
    """A stride-1 convolution over wide per-sample columns (`WIDE_MIN_SHARE`), the
    wrapped-around positions dropped in a copy; without groups, the bias is a column of the
    weight times a row of ones in the columns (a pass fewer)."""
    n = x.shape[0]
    o = w.shape[0]
    og = o // groups
    with_bias = b is not None and groups == 1
    cols, oh, ow, width = _sample_cols(x, w.shape[2:], s, p, d, True, ones_row=with_bias)
    wm = w.reshape(groups, og, -1)
    if with_bias:
        wm = np.concatenate([wm, b.reshape(1, o, 1).astype(wm.dtype, copy=False)], axis=2)
    prod = _workspace.scratch("conv.out", (n, groups, og, oh * width), cols.dtype)
    _gemm.matmul(wm, cols.reshape(n, groups, cols.shape[1] // groups, oh * width), out=prod)
    src = prod.reshape(n, o, oh, width)[..., :ow]
    out = np.empty((n, o, oh, ow), dtype=prod.dtype)
    if b is not None and not with_bias:
        bias = b.reshape(1, o, 1, 1)
        _parallel.for_chunks(lambda i, j: np.add(src[i:j], bias, out=out[i:j]), n, out.size)
    else:
        _parallel.copyto(out, src)
    return out


def _conv_meta(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    _check_conv_dtypes(x, w, b)
    shape = _conv_shape(tuple(x.shape), tuple(w.shape), stride, padding, dilation, transposed,
                        output_padding, groups, None if b is None else tuple(b.shape))
    fmt = _split_format(_conv_format(x, w, stride, dilation, groups, transposed,
                                     output_padding), shape, x, w, stride, dilation, groups,
                        transposed, output_padding)
    return Spec(shape, _dtype.result_type(x, w), format_strides(shape, fmt))


def _pairs(*lists):
    """Per-dim argument lists as 2-D ones (a 1-D convolution runs as a height-1 2-D one, and
    PyTorch's messages show it so): (1, v) for stride-like lists, (0, v) for padding."""
    return [v if len(v) != 1 else ([0] if pad else [1]) + list(v) for v, pad in lists]


def _conv_shape(xs, ws, stride, padding, dilation, transposed, output_padding,
                groups, bs=None) -> tuple:
    """The output shape of a convolution, with PyTorch's errors for invalid arguments (shared
    by the kernel and the meta: arguments only, no data). `bs`: the bias's shape, if any."""
    if any(v < 0 for v in padding):
        raise RuntimeError("negative padding is not supported")
    if any(v <= 0 for v in stride):
        raise RuntimeError("non-positive stride is not supported")
    if transposed and any(v < 0 for v in output_padding):
        raise RuntimeError("negative output_padding is not supported")
    if any(v < 0 for v in dilation):
        raise RuntimeError("dilation should be greater than zero")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if len(xs) != len(ws):
        raise RuntimeError(
            f"Expected {len(ws)}-dimensional input for {len(ws)}-dimensional weight "
            f"{size_str(ws)}, but got {len(xs)}-dimensional input of size {size_str(xs)} "
            "instead")
    k = list(ws[2:])
    if transposed:
        return _conv_transposed_shape(xs, ws, stride, padding, dilation, output_padding,
                                      groups, bs)
    if xs[1] != ws[1] * groups:
        raise RuntimeError(
            f"Given groups={groups}, weight of size {size_str(ws)}, expected input"
            f"{size_str(xs)} to have {ws[1] * groups} channels, but got {xs[1]} channels "
            "instead")
    _check_bias(bs, ws, ws[0], "")
    spatial = []
    for i, size in enumerate(xs[2:]):
        n = _out_size(size, k[i], stride[i], padding[i], dilation[i])
        if n <= 0:
            raise RuntimeError(
                "Calculated padded input size per channel: "
                f"({' x '.join(str(v + 2 * padding[j]) for j, v in enumerate(xs[2:]))}). "
                "Kernel size: "
                f"({' x '.join(str(dilation[j] * (v - 1) + 1) for j, v in enumerate(k))})."
                " Kernel size can't be greater than actual input size")
        spatial.append(n)
    k2, d2 = _pairs((k, False), (list(dilation), False))
    if 0 in k:
        if 0 in dilation:
            raise RuntimeError(f"kernel size should be greater than zero, but got {k2}")
        raise RuntimeError("kernel size should be greater than zero, but got kernel_height: "
                           f"{k2[0]} kernel_width: {k2[1]}")
    if 0 in dilation:
        raise RuntimeError(f"dilation should be greater than zero, but got {d2}")
    return (xs[0], ws[0]) + tuple(spatial)


# The kernel's checks by shapes and arguments (tuples), cached: a failed check caches
# nothing and raises again, a passed one costs a lookup on the next step.
_checked_shape = functools.lru_cache(maxsize=256)(_conv_shape)


def _check_bias(bs, ws, channels: int, prefix: str) -> None:
    """PyTorch's error for a bias (shape `bs`, None without one) that is not one value per
    output channel."""
    if bs is not None and (len(bs) != 1 or bs[0] != channels):
        raise RuntimeError(
            f"Given {prefix}weight of size {size_str(ws)}, expected bias to be 1-dimensional "
            f"with {channels} elements, but got bias of size {size_str(bs)} instead")


def _conv_transposed_shape(xs, ws, stride, padding, dilation, output_padding, groups,
                           bs=None):
    if xs[1] != ws[0]:
        raise RuntimeError(
            f"Given transposed=1, weight of size {size_str(ws)}, expected input"
            f"{size_str(xs)} to have {ws[0]} channels, but got {xs[1]} channels instead")
    _check_bias(bs, ws, ws[1] * groups, "transposed=1, ")
    k2, d2, s2, op2, x2 = _pairs((list(ws[2:]), False), (list(dilation), False),
                                 (list(stride), False), (list(output_padding), True),
                                 (list(xs[2:]), False))
    if 0 in k2:
        raise RuntimeError("kernel size should be greater than zero, but got kernel_height: "
                           f"{k2[0]} kernel_width: {k2[1]}")
    if 0 in d2:
        raise RuntimeError("dilation should be greater than zero, but got dilation_height: "
                           f"{d2[0]}, dilation_width: {d2[1]}")
    if any(o >= s and o >= d for o, s, d in zip(op2, s2, d2)):
        raise RuntimeError(
            "output padding must be smaller than either stride or dilation, but got "
            f"output_padding_height: {op2[0]} output_padding_width: {op2[1]} stride_height: "
            f"{s2[0]} stride_width: {s2[1]} dilation_height: {d2[0]} dilation_width: {d2[1]}")
    spatial = tuple((v - 1) * stride[i] - 2 * padding[i] + dilation[i] * (ws[2 + i] - 1)
                    + output_padding[i] + 1 for i, v in enumerate(xs[2:]))
    if any(v < 1 for v in spatial):
        (out2,) = _pairs((list(spatial), False))
        raise RuntimeError(
            f"Given input size per channel: ({' x '.join(map(str, x2))}). Calculated output "
            f"size per channel: ({' x '.join(map(str, out2))}). Output size is too small")
    return (xs[0], ws[1] * groups) + spatial


def _fold_batch(t, batch_last: bool = False):
    """(n, groups, rows, cols) -> (groups, rows, n * cols): the batch joins the columns,
    ordered (col, n) when `batch_last`, else (n, col), as `_cols` orders the NumPy path's."""
    n, groups, rows, cols = t.shape
    return t.permute((1, 2, 3, 0) if batch_last else (1, 2, 0, 3)).reshape(
        groups, rows, n * cols)


def _conv_weight_grad_nd(x, g, k, s, p, d, groups):
    """The weight gradient of `y = conv(x, w)` for output gradient `g`, as a convolution of
    the input (batch as channels) with `g` (stride and dilation swapped), per group; the
    result is cropped to the kernel's size `k`."""
    nd = len(k)
    cg = x.shape[1] // groups
    og = g.shape[1] // groups
    parts = []
    for j in range(groups):
        xj = x.narrow(1, j * cg, cg).transpose(0, 1)   # (cg, n, *spatial)
        gj = g.narrow(1, j * og, og).transpose(0, 1)   # (og, n, *out)
        part = _call(convolution, xj, gj, None, list(d), list(p), list(s), False, [0] * nd, 1)
        for i in range(nd):
            part = part.narrow(2 + i, 0, k[i])
        parts.append(part.transpose(0, 1))             # (og, cg, *k)
    if groups == 1:
        return parts[0]
    from .joins import cat

    return _call(cat, parts, 0)


def _conv_derivative_nd(g, x, w, has_bias, s, p, d, transposed, groups, mask):
    """Gradients of a convolution over volumes, written as convolutions (so they can be
    differentiated again): the input's is the transposed (or plain) convolution of g, the
    weight's pairs the input with g's windows."""
    nd = x.dim() - 2
    k = list(w.shape[2:])
    gb = g.sum([0] + list(range(2, g.dim()))) if has_bias else None
    gi = gw = None
    if transposed:
        if mask[0]:
            gi = _call(convolution, g, w, None, s, p, d, False, [0] * nd, groups)
            for i in range(nd):  # a dilation above the stride can leave extra positions
                gi = gi.narrow(2 + i, 0, x.shape[2 + i])
        if mask[1]:
            gw = _conv_weight_grad_nd(g, x, k, s, p, d, groups)
    else:
        if mask[0]:
            op = [x.shape[2 + i] - ((g.shape[2 + i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1)
                                    + 1) for i in range(nd)]
            gi = _call(convolution, g, w, None, s, p, d, True, op, groups)
        if mask[1]:
            gw = _conv_weight_grad_nd(x, g, k, s, p, d, groups)
    return (gi, gw, gb, None, None, None, None, None, None)


def _conv_derivative(g, x, w, has_bias, stride, padding, dilation, transposed, groups,
                     mask=(True, True)):
    # `mask`: whether input and weight required grad when the node was recorded (a network's
    # first convolution needs no input gradient: that is a GEMM and a col2im saved).
    if x.dim() > 4:
        out = _conv_derivative_nd(g, x, w, has_bias, list(stride), list(padding),
                                  list(dilation), transposed, groups, mask)
        return _tensor_layouts(out, g, x, w, stride, padding, dilation, transposed, groups)
    if not transposed and numpy_backward(g, x, w):
        gi, gw, gb = _conv_backward_arrays(g._data, x._data, w._data, mask[0], mask[1],
                                           has_bias, stride, padding, dilation, groups)
        gi, gw = _grad_layouts(gi, gw, x._data, w._data, stride, dilation, False, (),
                               groups)
        return (wrap_grad(gi), wrap_grad(gw), wrap_grad(gb), None, None, None, None, None,
                None)
    if not is_grad_enabled():
        # No graph of this backward is recorded (a dispatch mode traces it): one
        # `convolution_backward` node, as PyTorch records.
        # By name: conv_backward.py imports this file, not the reverse.
        convolution_backward = REGISTRY["convolution_backward"]

        out = _call(convolution_backward, g, x, w, [_bias_size(w, transposed, groups)]
                    if has_bias else None, stride, padding, dilation, transposed,
                    _output_padding(g, x, w, stride, padding, dilation, transposed),
                    groups, [mask[0], mask[1], has_bias])
        return (out[0] if mask[0] else None, out[1] if mask[1] else None,
                out[2] if has_bias else None, None, None, None, None, None, None)
    out = _conv_backward_composite(g, x, w, has_bias, stride, padding, dilation, transposed,
                                   groups, mask) + (None,) * 6
    return _tensor_layouts(out, g, x, w, stride, padding, dilation, transposed, groups)


def _tensor_layouts(grads: tuple, g, x, w, stride, padding, dilation, transposed,
                    groups) -> tuple:
    """`grads` (gi, gw, ...) with the input's and weight's gradients (tensors written in
    fusegrad ops) laid out as the kernels lay them (`_grad_layouts`)."""
    op = _output_padding(g, x, w, stride, padding, dilation, transposed)
    gi_fmt, gw_fmt, keep = _conv_layouts(x, w, stride, dilation, groups, transposed, op)
    gi, gw = grads[0], grads[1]
    # (contiguous: the volume weight gradients come transposed)
    gi = tensor_contiguous(gi) if gi_fmt is None else tensor_in_format(gi, gi_fmt)
    gw = tensor_contiguous(gw) if gw_fmt is None else tensor_in_format(gw, gw_fmt)
    if keep is not None and gw is not None and tuple(gw.stride()) != keep:
        gw = gw.as_strided(gw.shape, keep)
    return (gi, gw) + tuple(grads[2:])


def _bias_size(w, transposed: bool, groups: int) -> int:
    """The number of output channels (the bias's size)."""
    return w.shape[1] * groups if transposed else w.shape[0]


def _output_padding(g, x, w, stride, padding, dilation, transposed: bool) -> list:
    """A transposed convolution's output padding, read off the shapes (0 otherwise)."""
    nd = x.dim() - 2
    if not transposed:
        return [0] * nd
    return [g.shape[2 + i] - ((x.shape[2 + i] - 1) * stride[i] - 2 * padding[i]
                              + dilation[i] * (w.shape[2 + i] - 1) + 1) for i in range(nd)]


def _conv_backward_arrays(ga, xa, wa, need_x, need_w, need_b, stride, padding, dilation,
                          groups) -> tuple:
    """(gi, gw, gb) arrays of a (not transposed) float convolution: the NumPy fast path."""
    one_d = xa.ndim == 3
    s, p, d = _conv_2d_args(xa.ndim, stride, padding, dilation)
    if one_d:
        ga, xa, wa = ga[:, :, None], xa[:, :, None], wa[:, :, None]
    gi, gw = _conv_backward_np(ga, xa, wa, need_x, need_w, s, p, d, groups)
    if one_d:
        gi = gi[:, :, 0] if gi is not None else None
        gw = gw[:, :, 0] if gw is not None else None
    gb = None
    if need_b:  # summed over the contiguous spatial axis first (pairwise, fast)
        gb = ga.reshape(ga.shape[0], ga.shape[1], ga.shape[2] * ga.shape[3]).sum(2).sum(0)
    return gi, gw, gb


def _conv_backward_composite(g, x, w, has_bias, stride, padding, dilation, transposed, groups,
                             mask=(True, True)) -> tuple:
    """(gi, gw, gb) with fusegrad ops (differentiable again; None where not needed)."""
    one_d = x.dim() == 3
    s, p, d = _conv_2d_args(x.dim(), stride, padding, dilation)
    if one_d:
        g, x, w = g.unsqueeze(2), x.unsqueeze(2), w.unsqueeze(2)
    k = [w.shape[2], w.shape[3]]
    kk = k[0] * k[1]
    n = x.shape[0]
    gb = g.sum((0, 2, 3)) if has_bias else None
    if transposed:
        # The input's gradient is the ordinary convolution of g; the weight's pairs input
        # pixels with g's windows.
        cin, cog = w.shape[0], w.shape[1]
        op = [g.shape[2 + i] - ((x.shape[2 + i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1)
                                + 1) for i in range(2)]
        if op[0] or op[1]:
            # Output padding: g placed on the windows' whole canvas (the padding before it,
            # its tail beyond the canvas cut), then the convolution needs no padding.
            from .padding import constant_pad_nd

            g = _call(constant_pad_nd, g, [p[1], p[1] - op[1], p[0], p[0] - op[0]], 0.0)
            p = [0, 0]
        gi = _call(convolution, g, w, None, s, p, d, False, [0, 0], groups)
        gcols = _call(im2col, g, k, d, p, s)
        # (sizes spelled out, no -1: an empty batch leaves -1 undetermined)
        gcols = gcols.reshape(n, groups, cog * kk, gcols.shape[-1])
        xm = x.reshape(n, groups, cin // groups, x.shape[2] * x.shape[3])
        gw = (_fold_batch(xm) @ _fold_batch(gcols).transpose(1, 2)).reshape(
            cin, cog, k[0], k[1])
    else:
        c, h, wd = x.shape[1], x.shape[2], x.shape[3]
        o, cg = w.shape[0], w.shape[1]
        length = g.shape[2] * g.shape[3]
        gcols = g.reshape(n, groups, o // groups, length)
        wmat = w.reshape(groups, o // groups, cg * kk)
        # One matmul per group over the whole batch (batch folded into the columns), not one
        # small matmul per sample. The columns come in the NumPy path's order, so the traced
        # derivative (AOT autograd) computes eager's gradients to the last bit where eager
        # takes the GEMM path (a direct convolution, `_direct`, sums in another order).
        bl = _batch_last(g.shape[2], g.shape[3])
        gi = None
        if mask[0]:
            gin = wmat.transpose(1, 2) @ _fold_batch(gcols, bl)
            if bl:
                gin = gin.reshape(groups, cg * kk, length, n).permute(3, 0, 1, 2)
            else:
                gin = gin.reshape(groups, cg * kk, n, length).permute(2, 0, 1, 3)
            gi = _call(col2im, gin.reshape(n, c * kk, length), [h, wd], k, d, p, s)
        gw = None
        if mask[1]:
            xcols = _call(im2col, x, k, d, p, s).reshape(n, groups, cg * kk, length)
            gw = (_fold_batch(gcols, bl) @ _fold_batch(xcols, bl).transpose(1, 2)).reshape(
                o, cg, k[0], k[1])
    if one_d:
        gi = gi.squeeze(2) if gi is not None else None
        gw = gw.squeeze(2) if gw is not None else None
    return (gi, gw, gb)


def _conv_samples(rng, dt):
    cases = [((2, 3, 6, 5), (4, 3, 3, 2), True, [1, 1], [0, 0], [1, 1], 1),
             ((1, 4, 7, 7), (6, 2, 3, 3), True, [2, 1], [1, 2], [1, 2], 2),
             ((2, 2, 5, 5), (3, 2, 1, 1), False, [1, 1], [0, 0], [1, 1], 1),
             ((2, 3, 9), (4, 3, 3), True, [2], [1], [1], 1),
             ((1, 4, 8), (4, 1, 2), False, [1], [0], [3], 4)]
    cases += [((2, 4, 5, 4, 6), (6, 2, 3, 2, 3), True, [1, 2, 1], [1, 0, 2], [1, 1, 2], 2),
              ((1, 2, 3, 4, 3), (3, 2, 2, 2, 1), False, [1, 1, 1], [0, 1, 0], [1, 1, 1], 1)]
    out = []
    for xs, ws, bias, s, p, d, g in cases:
        b = rand_array(rng, (ws[0],), dt) if bias else None
        out.append(Sample((rand_array(rng, xs, dt), rand_array(rng, ws, dt), b, s, p, d, False,
                           [0] * len(s), g), name=f"{xs} {ws} g={g}"))
    transposed = [((2, 3, 4, 5), (3, 2, 3, 3), True, [2, 1], [1, 0], [1, 1], [1, 0], 1),
                  ((1, 4, 3, 2, 3), (4, 2, 2, 3, 2), True, [2, 1, 3], [1, 0, 1], [1, 2, 1],
                   [1, 0, 2], 2),
                  ((2, 2, 2, 3, 2), (2, 3, 3, 1, 2), False, [1, 2, 1], [0, 0, 1], [3, 1, 1],
                   [0, 1, 0], 1),
                  ((1, 4, 3, 3), (4, 1, 2, 3), False, [2, 2], [0, 1], [2, 1], [1, 1], 2),
                  ((2, 2, 5), (2, 3, 3), True, [3], [1], [1], [2], 1)]
    for xs, ws, bias, s, p, d, op, g in transposed:
        b = rand_array(rng, (ws[1] * g,), dt) if bias else None
        out.append(Sample((rand_array(rng, xs, dt), rand_array(rng, ws, dt), b, s, p, d, True,
                           op, g), name=f"transposed {xs} {ws} g={g}"))
    return out


def _conv_onnx(b, inputs, args, kwargs, opset):
    """Conv / ConvTranspose with PyTorch's symmetric padding."""
    x, w, bias = inputs[:3]
    stride, padding, dilation, transposed, output_padding, groups = args[3:9]
    n = args[1].dim() - 2
    kernel = list(args[1].shape[2:])
    dil = onnx_ints(dilation, n)
    if isinstance(padding, str):  # 'same' / 'valid'
        total = [0 if padding == "valid" else d * (k - 1) for d, k in zip(dil, kernel)]
        pads = [t // 2 for t in total] + [t - t // 2 for t in total]
    else:
        pads = onnx_ints(padding, n) * 2
    attrs = dict(strides=onnx_ints(stride, n), pads=pads, dilations=dil, group=int(groups),
                 kernel_shape=kernel)
    if transposed:
        return b.emit("ConvTranspose", [x, w, bias],
                      output_padding=onnx_ints(output_padding, n), **attrs)
    return b.emit("Conv", [x, w, bias], **attrs)


convolution = _register_multi(
    "convolution", (), (2,), kernel=_conv_kernel, meta=_conv_meta,
    flops=flop_formulas.convolution_call,
    node="ConvolutionBackward0", forward_ad="product",
    derivative=_conv_derivative,
    save=lambda out, x, w, b, s, p, d, t, op, g: (x, w, b is not None, s, p, d, t, g,
                                                  (x._rg, w._rg)),
    samples=_conv_samples, onnx=_conv_onnx, public="convolution",
    tolerance={"float32": 1e-4},
    saved_names=("input", "weight", "", "stride", "padding", "dilation", "transposed",
                 "groups", ""))


# PyTorch's CPU kernels have no integer forms.
refuse_dtypes(im2col, "im2col_out_cpu", "iu")
refuse_dtypes(col2im, "col2im_out_cpu", "iu")
