"""Layer ops that PyTorch records as one node: addmm, convolution, pooling, normalisation,
embedding and the losses (`AddmmBackward0`, `ConvolutionBackward0`, `NllLossBackward0` ...).

Kernels are NumPy: convolution lays the input's windows out once (im2col, from a strided
view) and multiplies them with the weight in one batched BLAS matmul; pooling reduces over the
same windows. Derivatives are written with fusegrad ops (`im2col` and `col2im` are ops here,
each the other's adjoint), so they can be differentiated again.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .. import _dtype
from ._onnx import batched
from ._onnx import ints as onnx_ints
from ._util import F32, HALF, Spec, numpy_backward, rand_array, size_str, wrap_grad
from .linalg import mm_mat1_backward, mm_mat2_backward
from .registry import OpDef, Sample, register


def _register_multi(name: str, nondiff_outputs: tuple = (), optional: tuple = (),
                    **fields) -> OpDef:
    """`register` with non-differentiable outputs and optional tensor arguments."""
    return register(name, nondiff_outputs=nondiff_outputs, optional_tensor_args=optional,
                    **fields)


def _call(op, *args):
    from .._dispatch import call

    return call(op, *args)


def _const(a: np.ndarray):
    """A tensor (no history) wrapping a NumPy array computed for a derivative."""
    from .._tensor import Tensor

    return Tensor._make(np.ascontiguousarray(a))


def _work(a: np.ndarray) -> np.ndarray:
    """Half types are computed in float32, as PyTorch's CPU kernels do."""
    return a.astype(F32) if a.dtype in HALF else a


# ---------------------------------------------------------------- addmm


def _legacy(x) -> str:
    return (_dtype.FROM_NP[x.dtype] if isinstance(x, np.ndarray) else x.dtype).legacy


def _check_addmm(bias, m1, m2) -> None:
    if _legacy(m1) != _legacy(m2):
        raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got {_legacy(m1)} and "
                           f"{_legacy(m2)}")
    if _legacy(bias) != _legacy(m2):
        raise RuntimeError(f"self and mat2 must have the same dtype, but got {_legacy(bias)} "
                           f"and {_legacy(m2)}")


def _addmm_kernel(bias, m1, m2, beta=1, alpha=1):
    if not (bias.dtype == m1.dtype == m2.dtype):
        _check_addmm(bias, m1, m2)
    dt = m1.dtype
    prod = np.matmul(_work(m1), _work(m2))
    if alpha != 1:
        prod = prod * alpha
    # The product is a fresh array: add a float bias of its row's (or its own) shape into it
    # rather than allocating another result.
    if prod.dtype.kind == "f" and bias.ndim and bias.shape == prod.shape[-bias.ndim:]:
        prod += _work(bias) if beta == 1 else _work(bias) * beta
        return prod.astype(dt, copy=False)
    out = prod + (_work(bias) if beta == 1 else _work(bias) * beta)
    return out.astype(dt, copy=False)


def _addmm_meta(bias, m1, m2, beta=1, alpha=1):
    _check_addmm(bias, m1, m2)
    if len(m1.shape) != 2 or len(m2.shape) != 2:
        which, nd = ("mat1", len(m1.shape)) if len(m1.shape) != 2 else ("mat2", len(m2.shape))
        raise RuntimeError(f"{which} must be a matrix, got {nd}-D tensor")
    if m1.shape[1] != m2.shape[0]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({m1.shape[0]}x{m1.shape[1]} and "
            f"{m2.shape[0]}x{m2.shape[1]})")
    return Spec((m1.shape[0], m2.shape[1]), _dtype.result_type(m1, m2))


def _addmm_derivative(g, m1, m2, beta, alpha, mask=(True, True)):
    # `mask`: which of mat1 and mat2 required grad when the node was recorded; the other's
    # gradient (the input's, for a network's first layer) is a GEMM nobody would read.
    gb = g if beta == 1 else g * beta
    g1 = mm_mat1_backward(g, m1, m2) if m1 is not None and mask[0] else None
    g2 = mm_mat2_backward(g, m1, m2) if m2 is not None and mask[1] else None
    if alpha != 1:
        g1 = g1 * alpha if g1 is not None else None
        g2 = g2 * alpha if g2 is not None else None
    return (gb, g1, g2, None, None)


def _addmm_samples(rng, dt):
    return [Sample((rand_array(rng, b, dt), rand_array(rng, (3, 4), dt),
                    rand_array(rng, (4, 5), dt)), name=str(b)) for b in ((5,), (3, 5), (1, 5))]


def _addmm_onnx(b, inputs, args, kwargs, opset):
    """Gemm(mat1, mat2, self, alpha, beta); a folded `t(weight)` is read as the weight with
    transB=1, so its initializer keeps the state_dict name."""
    bias, m1, m2 = inputs[:3]
    beta, alpha = (list(args[3:5]) + [1, 1][len(args) - 3:])[:2]
    trans_b = None
    if getattr(m2, "transpose_of", None) is not None:
        m2, trans_b = m2.transpose_of, 1
    return b.emit("Gemm", [m1, m2, bias], alpha=float(alpha), beta=float(beta),
                  transB=trans_b)


addmm = register(
    "addmm", kernel=_addmm_kernel, meta=_addmm_meta, node="AddmmBackward0",
    derivative=_addmm_derivative,
    save=lambda out, b, m1, m2, beta=1, alpha=1: (m1, m2, beta, alpha,
                                                  (m1._rg, m2._rg)),
    samples=_addmm_samples, onnx=_addmm_onnx, public="addmm",
    saved_names=("mat1", "mat2", "beta", "alpha", ""))

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
    """A strided view (N, C, kh, kw, oh, ow) of the windows of 4-D `x` (padded with `fill`)."""
    oh = _out_size(x.shape[2], k[0], s[0], p[0], d[0], ceil)
    ow = _out_size(x.shape[3], k[1], s[1], p[1], d[1], ceil)
    need_h = (oh - 1) * s[0] + d[0] * (k[0] - 1) + 1
    need_w = (ow - 1) * s[1] + d[1] * (k[1] - 1) + 1
    extra_h = max(need_h - x.shape[2] - 2 * p[0], 0)
    extra_w = max(need_w - x.shape[3] - 2 * p[1], 0)
    if p[0] or p[1] or extra_h or extra_w:
        x = np.pad(x, ((0, 0), (0, 0), (p[0], p[0] + extra_h), (p[1], p[1] + extra_w)),
                   constant_values=fill)
    n, c = x.shape[:2]
    sn, sc, sh, sw = x.strides
    return as_strided(x, (n, c, k[0], k[1], max(oh, 0), max(ow, 0)),
                      (sn, sc, sh * d[0], sw * d[1], sh * s[0], sw * s[1]), writeable=False)


def _as4d(a):
    """(array as 4-D, how to undo): 3-D (C, H, W) gains a batch dim."""
    return (a[None], True) if a.ndim == 3 else (a, False)


def _im2col_kernel(a, kernel_size, dilation, padding, stride):
    x, unbatched = _as4d(a)
    w = _windows(x, kernel_size, stride, padding, dilation)
    n, c, kh, kw, oh, ow = w.shape
    out = w.reshape(n, c * kh * kw, oh * ow)
    return out[0] if unbatched else out


def _im2col_meta(a, kernel_size, dilation, padding, stride):
    shape = tuple(a.shape)
    lead, (c, h, w) = shape[:-3], shape[-3:]
    oh = _out_size(h, kernel_size[0], stride[0], padding[0], dilation[0])
    ow = _out_size(w, kernel_size[1], stride[1], padding[1], dilation[1])
    return Spec(lead + (c * kernel_size[0] * kernel_size[1], oh * ow), a.dtype)


def _col2im_kernel(a, output_size, kernel_size, dilation, padding, stride):
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
    cols = cols.reshape(n, c, kh, kw, oh, ow)
    full_h = max(h + 2 * padding[0], (oh - 1) * stride[0] + dilation[0] * (kh - 1) + 1)
    full_w = max(w + 2 * padding[1], (ow - 1) * stride[1] + dilation[1] * (kw - 1) + 1)
    out = np.zeros((n, c, full_h, full_w), dtype=np.result_type(cols.dtype, F32)
                   if cols.dtype in HALF else cols.dtype)
    for i in range(kh):  # a loop over kernel offsets, each one strided add of all pixels
        hi = i * dilation[0]
        for j in range(kw):
            wj = j * dilation[1]
            out[:, :, hi:hi + (oh - 1) * stride[0] + 1:stride[0],
                wj:wj + (ow - 1) * stride[1] + 1:stride[1]] += cols[:, :, i, j]
    out = out[:, :, padding[0]:padding[0] + h, padding[1]:padding[1] + w].astype(
        a.dtype, copy=False)
    return out[0] if unbatched else out


def _col2im_meta(a, output_size, kernel_size, dilation, padding, stride):
    shape = tuple(a.shape)
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
    samples=_im2col_samples, public="im2col")
col2im = register(
    "col2im", kernel=_col2im_kernel, meta=_col2im_meta, node="Col2ImBackward0",
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


def _cols(x, k, s, p, d, batch_last):
    """im2col of 4-D `x` for one GEMM over the whole batch: (c*kh*kw, columns), columns
    ordered (oh, ow, n) when `batch_last`, else (n, oh, ow); with oh and ow."""
    if not batch_last:
        win = _windows(x, k, s, p, d)
        n, c, kh, kw, oh, ow = win.shape
        return win.transpose(1, 2, 3, 0, 4, 5).reshape(c * kh * kw, n * oh * ow), oh, ow
    n, c, h, w = x.shape
    oh = _out_size(h, k[0], s[0], p[0], d[0])
    ow = _out_size(w, k[1], s[1], p[1], d[1])
    if p[0] or p[1]:
        xt = np.zeros((c, h + 2 * p[0], w + 2 * p[1], n), dtype=x.dtype)
        xt[:, p[0]:p[0] + h, p[1]:p[1] + w] = x.transpose(1, 2, 3, 0)
    else:
        xt = np.ascontiguousarray(x.transpose(1, 2, 3, 0))
    sc, sh, sw, sn = xt.strides
    win = as_strided(xt, (c, k[0], k[1], oh, ow, n),
                     (sc, sh * d[0], sw * d[1], sh * s[0], sw * s[1], sn), writeable=False)
    return win.reshape(c * k[0] * k[1], oh * ow * n), oh, ow


def _col2im_cols(cols, c, size, k, s, p, d, oh, ow, n, batch_last):
    """The adjoint of `_cols`: columns summed into an (n, c, h, w) image, one strided add per
    kernel offset over all channels and samples (kh*kw vectorised adds, not per pixel)."""
    h, w = size
    full_h = max(h + 2 * p[0], (oh - 1) * s[0] + d[0] * (k[0] - 1) + 1)
    full_w = max(w + 2 * p[1], (ow - 1) * s[1] + d[1] * (k[1] - 1) + 1)
    if batch_last:
        acc = np.zeros((c, full_h, full_w, n), dtype=cols.dtype)
        c6 = cols.reshape(c, k[0], k[1], oh, ow, n)
    else:  # channels first, so that each add runs over aligned (n, rows, cols) blocks
        acc = np.zeros((c, n, full_h, full_w), dtype=cols.dtype)
        c6 = cols.reshape(c, k[0], k[1], n, oh, ow)
    pix = acc if batch_last else acc.transpose(0, 2, 3, 1)  # (c, H, W, n) either way
    for i in range(k[0]):
        hi = i * d[0]
        hs = slice(hi, hi + (oh - 1) * s[0] + 1, s[0])
        for j in range(k[1]):
            wj = j * d[1]
            ws = slice(wj, wj + (ow - 1) * s[1] + 1, s[1])
            if batch_last:
                pix[:, hs, ws] += c6[:, i, j]
            else:
                acc[:, :, hs, ws] += c6[:, i, j]
    inner = pix[:, p[0]:p[0] + h, p[1]:p[1] + w]  # (c, h, w, n)
    return np.ascontiguousarray(inner.transpose(3, 0, 1, 2))


def _conv_backward_np(g, x, w, need_x, need_w, s, p, d, groups):
    """(gi, gw) of a 2-D convolution as arrays (None where not needed): one GEMM per group
    over the whole batch for each (the batch folded into the GEMM's columns)."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    ckk = cg * kh * kw
    oh, ow = g.shape[2], g.shape[3]
    bl = _batch_last(oh, ow)
    gt = np.ascontiguousarray(g.transpose(1, 2, 3, 0) if bl else g.transpose(1, 0, 2, 3))
    gt = gt.reshape(groups, og, oh * ow * n)
    gi = gw = None
    if need_w:
        cols, _, _ = _cols(x, (kh, kw), s, p, d, bl)
        cols = cols.reshape(groups, ckk, oh * ow * n)
        gw = np.matmul(gt, cols.transpose(0, 2, 1)).reshape(w.shape)
    if need_x:
        gcols = np.matmul(w.reshape(groups, og, ckk).transpose(0, 2, 1), gt)
        gi = _col2im_cols(gcols, c, (h, wd), (kh, kw), s, p, d, oh, ow, n, bl)
    return gi, gw


# ---------------------------------------------------------------- convolution


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
    cols = np.matmul(wm, x4.reshape(n, groups, cin // groups, h * wd))
    cols = cols.reshape(n, groups * cog * kh * kw, h * wd)
    size = [(h - 1) * s[0] - 2 * p[0] + d[0] * (kh - 1) + op[0] + 1,
            (wd - 1) * s[1] - 2 * p[1] + d[1] * (kw - 1) + op[1] + 1]
    out = _col2im_kernel(cols, size, [kh, kw], d, p, s)
    if b is not None:
        out += _work(b).reshape(1, -1, 1, 1)
    if one_d:
        out = out[:, :, 0]
    return out.astype(dt, copy=False)


_C_NAMES = {"Float": "float", "Double": "double", "Half": "c10::Half",
            "BFloat16": "c10::BFloat16", "Long": "long int", "Int": "int", "Short": "short int",
            "Char": "signed char", "Byte": "unsigned char", "Bool": "bool"}


def _check_conv_dtypes(x, w, b) -> None:
    if b is not None and _legacy(x) != _legacy(b):
        raise RuntimeError(f"Input type ({_C_NAMES[_legacy(x)]}) and bias type "
                           f"({_C_NAMES[_legacy(b)]}) should be the same")
    if _legacy(x) != _legacy(w):
        raise RuntimeError(f"expected scalar type {_legacy(x)} but found {_legacy(w)}")


def _conv_kernel(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    if x.dtype != w.dtype or (b is not None and b.dtype != x.dtype):
        _check_conv_dtypes(x, w, b)
    if transposed:
        return _conv_transposed_kernel(x, w, b, stride, padding, dilation, output_padding,
                                       groups)
    dt = x.dtype
    one_d = x.ndim == 3
    s, p, d = _conv_2d_args(x.ndim, stride, padding, dilation)
    x4 = _work(x)[:, :, None] if one_d else _work(x)
    w4 = _work(w)[:, :, None] if one_d else _work(w)
    o, cg, kh, kw = w4.shape
    n = x4.shape[0]
    # Small images: one GEMM per group over the whole batch (columns ordered pixel-major,
    # batch last), then one pass that moves the batch first and adds the bias.
    oh = _out_size(x4.shape[2], kh, s[0], p[0], d[0])
    ow = _out_size(x4.shape[3], kw, s[1], p[1], d[1])
    ckk = cg * kh * kw
    if _batch_last(oh, ow):
        cols, oh, ow = _cols(x4, (kh, kw), s, p, d, True)
        out_t = np.matmul(w4.reshape(groups, o // groups, ckk),
                          cols.reshape(groups, ckk, oh * ow * n)).reshape(o, oh, ow, n)
        out = np.empty((n, o, oh, ow), dtype=out_t.dtype)
        if b is not None:
            np.add(out_t.transpose(3, 0, 1, 2), _work(b).reshape(1, o, 1, 1), out=out)
        else:
            np.copyto(out, out_t.transpose(3, 0, 1, 2))
    else:  # large images: per-sample GEMMs are big enough, and need no output transpose
        win = _windows(x4, (kh, kw), s, p, d)
        cols = win.reshape(n, groups, ckk, oh * ow)
        out = np.matmul(w4.reshape(groups, o // groups, ckk), cols).reshape(n, o, oh, ow)
        if b is not None:
            out += _work(b).reshape(1, o, 1, 1)
    if one_d:
        out = out[:, :, 0]
    return out.astype(dt, copy=False)


def _conv_meta(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    _check_conv_dtypes(x, w, b)
    xs, ws = tuple(x.shape), tuple(w.shape)
    if len(xs) != len(ws):
        raise RuntimeError(
            f"Expected {len(ws) - 1}D (unbatched) or {len(ws)}D (batched) input to "
            f"conv{len(ws) - 2}d, but got input of size: {size_str(xs)}")
    if transposed:
        if xs[1] != ws[0]:
            raise RuntimeError(
                f"Given transposed=1, weight of size {size_str(ws)}, expected input"
                f"{size_str(xs)} to have {ws[0]} channels, but got {xs[1]} channels instead")
        spatial = tuple((v - 1) * stride[i] - 2 * padding[i] + dilation[i] * (ws[2 + i] - 1)
                        + output_padding[i] + 1 for i, v in enumerate(xs[2:]))
        return Spec((xs[0], ws[1] * groups) + spatial, _dtype.result_type(x, w))
    if xs[1] != ws[1] * groups:
        raise RuntimeError(
            f"Given groups={groups}, weight of size {size_str(ws)}, expected input"
            f"{size_str(xs)} to have {ws[1] * groups} channels, but got {xs[1]} channels "
            "instead")
    spatial = []
    for i, size in enumerate(xs[2:]):
        n = _out_size(size, ws[2 + i], stride[i], padding[i], dilation[i])
        if n <= 0:
            raise RuntimeError(
                "Calculated padded input size per channel: "
                f"({' x '.join(str(v + 2 * padding[j]) for j, v in enumerate(xs[2:]))}). "
                "Kernel size: "
                f"({' x '.join(str(dilation[j] * (k - 1) + 1) for j, k in enumerate(ws[2:]))})."
                " Kernel size can't be greater than actual input size")
        spatial.append(n)
    return Spec((xs[0], ws[0]) + tuple(spatial), _dtype.result_type(x, w))


def _fold_batch(t):
    """(n, groups, rows, cols) -> (groups, rows, n * cols): the batch joins the columns."""
    n, groups, rows, cols = t.shape
    return t.permute(1, 2, 0, 3).reshape(groups, rows, n * cols)


def _conv_derivative(g, x, w, has_bias, stride, padding, dilation, transposed, groups,
                     mask=(True, True)):
    # `mask`: whether input and weight required grad when the node was recorded (a network's
    # first convolution needs no input gradient: that is a GEMM and a col2im saved).
    one_d = x.dim() == 3
    s, p, d = _conv_2d_args(x.dim(), stride, padding, dilation)
    if not transposed and numpy_backward(g, x, w):
        ga, xa, wa = g._data, x._data, w._data
        if one_d:
            ga, xa, wa = ga[:, :, None], xa[:, :, None], wa[:, :, None]
        gi, gw = _conv_backward_np(ga, xa, wa, mask[0], mask[1], s, p, d, groups)
        if one_d:
            gi = gi[:, :, 0] if gi is not None else None
            gw = gw[:, :, 0] if gw is not None else None
        gb = None
        if has_bias:  # summed over the contiguous spatial axis first (pairwise, fast)
            gb = ga.reshape(ga.shape[0], ga.shape[1], ga.shape[2] * ga.shape[3]).sum(2).sum(0)
        return (wrap_grad(gi), wrap_grad(gw), wrap_grad(gb), None, None, None, None, None,
                None)
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
        gi = _call(convolution, g, w, None, s, p, d, False, [0, 0], groups)
        gcols = _call(im2col, g, k, d, p, s).reshape(n, groups, cog * kk, -1)
        xm = x.reshape(n, groups, cin // groups, -1)
        gw = (_fold_batch(xm) @ _fold_batch(gcols).transpose(1, 2)).reshape(
            cin, cog, k[0], k[1])
    else:
        c, h, wd = x.shape[1], x.shape[2], x.shape[3]
        o, cg = w.shape[0], w.shape[1]
        length = g.shape[2] * g.shape[3]
        gcols = g.reshape(n, groups, o // groups, length)
        wmat = w.reshape(groups, o // groups, cg * kk)
        # One matmul per group over the whole batch (batch folded into the columns), not one
        # small matmul per sample.
        gi = None
        if mask[0]:
            gin = (wmat.transpose(1, 2) @ _fold_batch(gcols)).reshape(groups, cg * kk, n,
                                                                      length)
            gin = gin.permute(2, 0, 1, 3).reshape(n, c * kk, length)
            gi = _call(col2im, gin, [h, wd], k, d, p, s)
        gw = None
        if mask[1]:
            xcols = _call(im2col, x, k, d, p, s).reshape(n, groups, cg * kk, length)
            gw = (_fold_batch(gcols) @ _fold_batch(xcols).transpose(1, 2)).reshape(
                o, cg, k[0], k[1])
    if one_d:
        gi = gi.squeeze(2) if gi is not None else None
        gw = gw.squeeze(2) if gw is not None else None
    return (gi, gw, gb, None, None, None, None, None, None)


def _conv_samples(rng, dt):
    cases = [((2, 3, 6, 5), (4, 3, 3, 2), True, [1, 1], [0, 0], [1, 1], 1),
             ((1, 4, 7, 7), (6, 2, 3, 3), True, [2, 1], [1, 2], [1, 2], 2),
             ((2, 2, 5, 5), (3, 2, 1, 1), False, [1, 1], [0, 0], [1, 1], 1),
             ((2, 3, 9), (4, 3, 3), True, [2], [1], [1], 1),
             ((1, 4, 8), (4, 1, 2), False, [1], [0], [3], 4)]
    out = []
    for xs, ws, bias, s, p, d, g in cases:
        b = rand_array(rng, (ws[0],), dt) if bias else None
        out.append(Sample((rand_array(rng, xs, dt), rand_array(rng, ws, dt), b, s, p, d, False,
                           [0] * len(s), g), name=f"{xs} {ws} g={g}"))
    transposed = [((2, 3, 4, 5), (3, 2, 3, 3), True, [2, 1], [1, 0], [1, 1], [1, 0], 1),
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
    "convolution", (), (2,), kernel=_conv_kernel, meta=_conv_meta, node="ConvolutionBackward0",
    derivative=_conv_derivative,
    save=lambda out, x, w, b, s, p, d, t, op, g: (x, w, b is not None, s, p, d, t, g,
                                                  (x._rg, w._rg)),
    samples=_conv_samples, onnx=_conv_onnx, public="convolution",
    tolerance={"float32": 1e-4},
    saved_names=("input", "weight", "", "stride", "padding", "dilation", "transposed",
                 "groups", ""))

# ---------------------------------------------------------------- pooling


def _pool_args(kernel_size, stride, padding, dilation=(1, 1)):
    k = list(kernel_size) * (2 if len(kernel_size) == 1 else 1)
    s = list(stride) if stride else list(k)
    s = s * (2 if len(s) == 1 else 1)
    p = list(padding) * (2 if len(padding) == 1 else 1)
    d = list(dilation) * (2 if len(dilation) == 1 else 1)
    return k, s, p, d


def _maxpool_kernel(a, kernel_size, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):
    k, s, p, d = _pool_args(kernel_size, stride, padding, dilation)
    x, unbatched = _as4d(a)
    fill = -np.inf if x.dtype.kind == "f" or x.dtype in HALF else np.iinfo(x.dtype).min
    win = _windows(_work(x), k, s, p, d, fill, ceil_mode)
    n, c, kh, kw, oh, ow = win.shape
    # A running maximum over the kh*kw window offsets, each step one vectorised pass over all
    # windows (no argmax along a strided axis, no take_along_axis). As PyTorch's kernel: the
    # first of equal maxima wins, and a NaN wins over any number. The windows are first
    # copied offset-major, so that every pass runs over one contiguous row (a strided 4-D
    # view gives NumPy inner loops of only `ow` values). Masked copies, np.where and
    # boolean-mask stores are each several times slower here than the arithmetic update of
    # `arg` and np.maximum (which propagates NaN as the kernel must).
    flat = np.ascontiguousarray(win.transpose(2, 3, 0, 1, 4, 5)).reshape(kh * kw, -1)
    best = flat[0].copy()
    arg = np.zeros(best.shape, dtype=np.intp)
    floating = best.dtype.kind == "f"
    for t in range(1, kh * kw):
        v = flat[t]
        upd = v > best
        if floating:
            upd |= v != v
        arg += upd * (t - arg)
        np.maximum(best, v, out=best)
    out = best.reshape(n, c, oh, ow).astype(a.dtype, copy=False)
    arg = arg.reshape(n, c, oh, ow)
    # Flat input index: the window's top-left corner plus the winning offset's displacement.
    w_in = x.shape[3]
    corner = ((np.arange(oh, dtype=np.int64) * s[0] - p[0])[:, None] * w_in
              + (np.arange(ow, dtype=np.int64) * s[1] - p[1])[None, :])
    offs = np.arange(kh * kw, dtype=np.int64)
    delta = (offs // kw) * d[0] * w_in + (offs % kw) * d[1]
    idx = delta[arg]
    idx += corner
    if unbatched:
        return out[0], idx[0]
    return out, idx


def _maxpool_meta(a, kernel_size, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):
    k, s, p, d = _pool_args(kernel_size, stride, padding, dilation)
    shape = tuple(a.shape)
    if any(pi > ki // 2 for pi, ki in zip(p, k)):
        raise RuntimeError("pad should be at most half of effective kernel size, but got "
                           f"pad={p[0]}, kernel_size={k[0]} and dilation={d[0]}")
    oh = _out_size(shape[-2], k[0], s[0], p[0], d[0], ceil_mode)
    ow = _out_size(shape[-1], k[1], s[1], p[1], d[1], ceil_mode)
    out = shape[:-2] + (oh, ow)
    return [Spec(out, a.dtype), Spec(out, _dtype.int64)]


def _maxpool_save(out, a, kernel_size, stride=(), padding=(0,), dilation=(1,),
                  ceil_mode=False):
    k, s, _, d = _pool_args(kernel_size, stride, padding, dilation)
    # Windows that cannot overlap send each input position at most one gradient.
    disjoint = all(si >= (ki - 1) * di + 1 for ki, si, di in zip(k, s, d))
    return (out[1], tuple(a.shape), disjoint)


def _maxpool_backward_np(g, idx, shape, disjoint):
    """Max-pool input gradient as an array: each output's gradient lands at the flat input
    position its index names; a plain store when windows are disjoint, else a bincount
    (np.add.at is an unbuffered per-element loop, many times slower)."""
    rows = int(np.prod(shape[:-2], dtype=np.int64))
    hw = shape[-2] * shape[-1]
    pos = idx.reshape(rows, -1) + (np.arange(rows, dtype=np.int64) * hw)[:, None]
    vals = g.reshape(rows, -1)
    if disjoint:
        out = np.zeros(rows * hw, dtype=g.dtype)
        out[pos.ravel()] = vals.ravel()
    else:
        out = np.bincount(pos.ravel(), weights=vals.ravel(), minlength=rows * hw).astype(
            g.dtype, copy=False)
    return out.reshape(shape)


def _maxpool_derivative(grads, idx, shape, disjoint=False):
    # Each output's gradient goes to the input position its index names (scatter_add).
    g = grads[0] if isinstance(grads, list) else grads
    if numpy_backward(g) and idx._plain and idx._data is not None:
        gi = _maxpool_backward_np(g._data, idx._data, shape, disjoint)
        return (wrap_grad(gi), None, None, None, None, None)
    lead = tuple(shape[:-2])
    flat_g = g.reshape(lead + (-1,))
    flat_i = idx.reshape(lead + (-1,))
    gi = g.new_zeros(lead + (shape[-2] * shape[-1],)).scatter_add(-1, flat_i, flat_g)
    return (gi.reshape(shape), None, None, None, None, None)


def _pool_samples(rng, dt):
    cases = [((2, 3, 6, 6), [2, 2], [], [0, 0], [1, 1], False),
             ((1, 2, 7, 5), [3, 2], [2, 1], [1, 1], [1, 1], False),
             ((2, 5, 5), [3, 3], [2, 2], [1, 1], [1, 1], False),
             ((1, 2, 7, 7), [2, 2], [2, 2], [0, 0], [2, 1], False),
             ((1, 2, 7, 7), [2, 2], [2, 2], [0, 0], [1, 1], True)]
    return [Sample((rng.permutation(np.prod(xs)).reshape(xs).astype(dt) / 10, k, s, p, d, c),
                   name=f"{xs} k={k} s={s} p={p} d={d} ceil={c}")
            for xs, k, s, p, d, c in cases]


def _maxpool_onnx(b, inputs, args, kwargs, opset):
    """MaxPool; the indices output is not mapped."""
    k, s, p, d = _pool_args(*args[1:5])
    ceil = bool(args[5]) if len(args) > 5 else False
    return [batched(b, inputs[0], args[0].dim() == 3, lambda x: b.emit(
        "MaxPool", [x], kernel_shape=list(k), strides=list(s), pads=list(p) * 2,
        dilations=list(d), ceil_mode=int(ceil))), None]


max_pool2d_with_indices = register(
    "max_pool2d_with_indices", kernel=_maxpool_kernel, meta=_maxpool_meta,
    node="MaxPool2DWithIndicesBackward0", derivative=_maxpool_derivative, save=_maxpool_save,
    samples=_pool_samples, onnx=_maxpool_onnx, public="max_pool2d_with_indices",
    saved_names=("result1", "", ""))


def _avg_divisor(shape, k, s, p, ceil_mode, count_include_pad, divisor_override, dtype):
    """The divisor of each output position: a number, or an (oh, ow) array."""
    if divisor_override:
        return divisor_override
    h, w = shape[-2:]
    ones = np.ones((1, 1, h, w), dtype=dtype)
    if count_include_pad:
        if not ceil_mode:
            return k[0] * k[1]
        # Windows are clipped to the padded input (ceil mode may reach past it).
        ones = np.pad(ones, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])), constant_values=1)
        return _windows(ones, k, s, [0, 0], [1, 1], 0.0, ceil_mode).sum((2, 3))[0, 0]
    return _windows(ones, k, s, p, [1, 1], 0.0, ceil_mode).sum((2, 3))[0, 0]


def _avgpool_kernel(a, kernel_size, stride=(), padding=(0,), ceil_mode=False,
                    count_include_pad=True, divisor_override=None):
    k, s, p, _ = _pool_args(kernel_size, stride, padding)
    x, unbatched = _as4d(_work(a))
    total = _windows(x, k, s, p, [1, 1], 0.0, ceil_mode).sum((2, 3))
    div = _avg_divisor(x.shape, k, s, p, ceil_mode, count_include_pad, divisor_override,
                       x.dtype)
    out = (total / div).astype(a.dtype, copy=False)
    return out[0] if unbatched else out


def _avgpool_meta(a, kernel_size, stride=(), padding=(0,), ceil_mode=False,
                  count_include_pad=True, divisor_override=None):
    k, s, p, _ = _pool_args(kernel_size, stride, padding)
    shape = tuple(a.shape)
    if any(pi > ki // 2 for pi, ki in zip(p, k)):
        raise RuntimeError("pad should be at most half of effective kernel size, but got "
                           f"pad={p[0]}, kernel_size={k[0]} and dilation=1")
    oh = _out_size(shape[-2], k[0], s[0], p[0], 1, ceil_mode)
    ow = _out_size(shape[-1], k[1], s[1], p[1], 1, ceil_mode)
    return Spec(shape[:-2] + (oh, ow), a.dtype)


def _avgpool_save(out, a, kernel_size, stride=(), padding=(0,), ceil_mode=False,
                  count_include_pad=True, divisor_override=None):
    k, s, p, _ = _pool_args(kernel_size, stride, padding)
    div = _avg_divisor(tuple(a.shape), k, s, p, ceil_mode, count_include_pad,
                       divisor_override, np.float64)
    if isinstance(div, np.ndarray):
        div = _const(div.astype(a.dtype.np))
    return (list(a.shape), k, s, p, div)


def _avgpool_derivative(g, shape, k, s, p, div):
    unbatched = len(shape) == 3
    if unbatched:
        g = g.unsqueeze(0)
    n, c, oh, ow = g.shape
    kk = k[0] * k[1]
    g = (g / div).reshape(n, c, 1, oh * ow).expand(n, c, kk, oh * ow).reshape(
        n, c * kk, oh * ow)
    gi = _call(col2im, g, list(shape[-2:]), k, [1, 1], p, s)
    return (gi.squeeze(0) if unbatched else gi, None, None, None, None, None, None)


def _avg_samples(rng, dt):
    return [Sample(s.args[:4] + (s.args[5], inc, None), name=s.name + f" inc={inc}")
            for s in _pool_samples(rng, dt) if s.args[4] == [1, 1]
            for inc in (True, False)] + [
        Sample((rand_array(rng, (1, 2, 5, 5), dt), [2, 2], [2, 2], [1, 1], False, True, 3),
               name="divisor")]


def _avgpool_onnx(b, inputs, args, kwargs, opset):
    """AveragePool (a divisor_override has no ONNX form)."""
    k, s, p, _ = _pool_args(*args[1:4])
    ceil, include, divisor = (list(args[4:7]) + [False, True, None][len(args) - 4:])[:3]
    if divisor is not None:
        b.fail("with divisor_override")
    return batched(b, inputs[0], args[0].dim() == 3, lambda x: b.emit(
        "AveragePool", [x], kernel_shape=list(k), strides=list(s), pads=list(p) * 2,
        ceil_mode=int(bool(ceil)), count_include_pad=int(bool(include))))


avg_pool2d = register(
    "avg_pool2d", kernel=_avgpool_kernel, meta=_avgpool_meta, node="AvgPool2DBackward0",
    derivative=_avgpool_derivative, save=_avgpool_save, samples=_avg_samples,
    onnx=_avgpool_onnx, public="avg_pool2d")


def _adaptive_matrix(size: int, out: int) -> np.ndarray:
    """(out, size): row i averages input positions floor(i*size/out) .. ceil((i+1)*size/out)."""
    m = np.zeros((out, size))
    for i in range(out):  # one row per output position along one axis
        lo, hi = (i * size) // out, -(-((i + 1) * size) // out)
        m[i, lo:hi] = 1.0 / (hi - lo)
    return m


def _adaptive_kernel(a, output_size):
    x = _work(a)
    mh = _adaptive_matrix(x.shape[-2], output_size[0]).astype(x.dtype)
    mw = _adaptive_matrix(x.shape[-1], output_size[1]).astype(x.dtype)
    return (mh @ x @ mw.T).astype(a.dtype, copy=False)


def _adaptive_meta(a, output_size):
    return Spec(tuple(a.shape)[:-2] + tuple(output_size), a.dtype)


def _adaptive_save(out, a, output_size):
    dt = a.dtype.np
    return (_const(_adaptive_matrix(a.shape[-2], output_size[0]).astype(dt)),
            _const(_adaptive_matrix(a.shape[-1], output_size[1]).astype(dt)))


def _adaptive_onnx(b, inputs, args, kwargs, opset):
    """GlobalAveragePool to size 1; AveragePool when the sizes divide the input's."""
    spatial = list(args[0].shape[-2:])
    out = [int(o) for o in args[1]]
    if out == [1, 1]:
        return batched(b, inputs[0], args[0].dim() == 3,
                       lambda x: b.emit("GlobalAveragePool", [x]))
    if any(i % o for i, o in zip(spatial, out)):
        b.fail(f"from sizes that do not divide ({spatial} to {out})")
    k = [i // o for i, o in zip(spatial, out)]
    return batched(b, inputs[0], args[0].dim() == 3,
                   lambda x: b.emit("AveragePool", [x], kernel_shape=k, strides=k))


adaptive_avg_pool2d = register(
    "_adaptive_avg_pool2d", kernel=_adaptive_kernel, meta=_adaptive_meta,
    node="AdaptiveAvgPool2DBackward0",
    derivative=lambda g, mh, mw: (mh.t() @ g @ mw, None), save=_adaptive_save,
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), o), name=f"{s}->{o}") for s, o in (
        ((2, 3, 7, 5), [3, 2]), ((1, 2, 4, 4), [2, 2]), ((3, 6, 6), [4, 5]))],
    onnx=_adaptive_onnx, public="adaptive_avg_pool2d")

# ---------------------------------------------------------------- normalisation


def _bn_shape(ndim: int, c: int) -> tuple:
    return (1, c) + (1,) * (ndim - 2)


def _check_norm_dtypes(x, *params) -> None:
    names = {_legacy(p) for p in params if p is not None}
    xn = _legacy(x)
    if not names or names == {xn} or (xn in ("Half", "BFloat16") and names == {"Float"}):
        return  # (reduced-precision input with float parameters is allowed, as in PyTorch)
    if xn == "Float":
        raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
    raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")


def _bn_kernel(x, w, b, rm, rv, training, momentum, eps):
    _check_norm_dtypes(x, w, b, rm, rv)
    dt = x.dtype
    xw = _work(x)
    axes = (0,) + tuple(range(2, x.ndim))
    shape = _bn_shape(x.ndim, x.shape[1])
    if training:
        mean = xw.mean(axes)
        var = xw.var(axes)
        invstd = 1.0 / np.sqrt(var + eps)
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
    shift = -use_mean * scale if b is None else _work(b) - use_mean * scale
    out = (xw * scale.reshape(shape) + shift.reshape(shape)).astype(dt, copy=False)
    sdt = F32 if dt in HALF else dt
    return out, mean.astype(sdt, copy=False), invstd.astype(sdt, copy=False)


def _bn_meta(x, w, b, rm, rv, training, momentum, eps):
    _check_norm_dtypes(x, w, b, rm, rv)
    c = x.shape[1] if len(x.shape) > 1 else 0
    if len(x.shape) < 2:
        raise ValueError(f"expected 2D or 3D input (got {len(x.shape)}D input)")
    sdt = _dtype.float32 if x.dtype in (_dtype.float16, _dtype.bfloat16) else x.dtype
    stat = (c,) if training else (0,)
    return [Spec(tuple(x.shape), x.dtype), Spec(stat, sdt), Spec(stat, sdt)]


def _bn_derivative(grads, x, w, rm, rv, training, eps):
    g = grads[0] if isinstance(grads, list) else grads
    axes = (0,) + tuple(range(2, x.dim()))
    shape = _bn_shape(x.dim(), x.shape[1])
    if training:
        # Statistics recomputed with fusegrad ops, so that double backward sees them.
        mean = x.mean(axes, keepdim=True)
        centred = x - mean
        invstd = ((centred * centred).mean(axes, keepdim=True) + eps) ** -0.5
    else:
        invstd = ((rv + eps) ** -0.5).reshape(shape)
        centred = x - rm.reshape(shape)
    xhat = centred * invstd
    gw = (g * xhat).sum(axes) if w is not None else None
    gb = g.sum(axes)
    scale = invstd if w is None else invstd * w.reshape(shape)
    if training:
        gi = scale * (g - g.mean(axes, keepdim=True) - xhat * (g * xhat).mean(axes,
                                                                                keepdim=True))
    else:
        gi = g * scale
    return (gi, gw, gb, None, None, None, None, None)


def _bn_samples(rng, dt):
    # Running statistics cannot be sample inputs (the oracle makes every array require
    # grad); the nn tests cover them.
    return [Sample((rand_array(rng, shape, dt), rand_array(rng, (shape[1],), dt),
                    rand_array(rng, (shape[1],), dt), None, None, True, 0.1, 1e-5),
                   name=str(shape)) for shape in ((4, 3), (2, 3, 4, 5), (3, 2, 5))]


def _bn_onnx(b, inputs, args, kwargs, opset):
    """BatchNormalization with the running statistics (eval mode); the saved statistics
    outputs are not mapped."""
    x, w, bias, mean, var = inputs[:5]
    training, eps = args[5], args[7]
    if training or mean is None:
        b.fail("with batch statistics (training=True)")
    c = args[0].shape[1]
    w = w if w is not None else b.const(np.ones(c), b.out_dtype)
    bias = bias if bias is not None else b.const(np.zeros(c), b.out_dtype)
    out = b.emit("BatchNormalization", [x, w, bias, mean, var], epsilon=float(eps))
    return [out, None, None]


native_batch_norm = _register_multi(
    "native_batch_norm", (1, 2), (1, 2), kernel=_bn_kernel, meta=_bn_meta,
    node="NativeBatchNormBackward0",
    derivative=_bn_derivative, nondiff_args=(3, 4),
    save=lambda out, x, w, b, rm, rv, training, momentum, eps: (
        x, w, None if rm is None else rm.detach(), None if rv is None else rv.detach(),
        training, eps),
    samples=_bn_samples, onnx=_bn_onnx, public="native_batch_norm",
    gradcheck=False,
    tolerance={"float32": 1e-4},
    saved_names=("input", "weight", "running_mean", "running_var", "training", "eps"))


def _ln_kernel(x, normalized_shape, w, b, eps):
    _check_norm_dtypes(x, w, b)
    dt = x.dtype
    xw = _work(x)
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    mean = xw.mean(axes, keepdims=True)
    centred = xw - mean
    rstd = 1.0 / np.sqrt((centred * centred).mean(axes, keepdims=True) + eps)
    out = centred * rstd
    if w is not None:
        out = out * _work(w)
    if b is not None:
        out = out + _work(b)
    sdt = F32 if dt in HALF else dt
    return out.astype(dt, copy=False), mean.astype(sdt), rstd.astype(sdt)


def _ln_meta(x, normalized_shape, w, b, eps):
    _check_norm_dtypes(x, w, b)
    shape = tuple(x.shape)
    ns = tuple(normalized_shape)
    if shape[len(shape) - len(ns):] != ns:
        raise RuntimeError(
            f"Given normalized_shape={size_str(ns)}, expected input with shape "
            f"[*, {', '.join(map(str, ns))}], but got input of size{size_str(shape)}")
    stat = shape[:len(shape) - len(ns)] + (1,) * len(ns)
    sdt = _dtype.float32 if x.dtype in (_dtype.float16, _dtype.bfloat16) else x.dtype
    return [Spec(shape, x.dtype), Spec(stat, sdt), Spec(stat, sdt)]


def _ln_derivative(grads, x, nshape, w, has_bias, eps):
    g = grads[0] if isinstance(grads, list) else grads
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
    save=lambda out, x, ns, w, b, eps: (x, list(ns), w, b is not None, eps),
    samples=lambda rng, dt: [
        Sample((rand_array(rng, s, dt), ns, rand_array(rng, tuple(ns), dt),
                rand_array(rng, tuple(ns), dt), 1e-5), name=f"{s} {ns}")
        for s, ns in (((3, 4), [4]), ((2, 3, 4), [3, 4]), ((2, 5), [5]))],
    onnx=_ln_onnx, public="native_layer_norm", tolerance={"float32": 1e-4},
    gradcheck=False,
    saved_names=("input", "normalized_shape", "weight", "", ""))

# ---------------------------------------------------------------- embedding


def _check_indices(idx, n):
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise IndexError("index out of range in self")


def _embedding_kernel(w, idx, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    if idx.dtype.kind not in "iu":
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar "
            f"types: Long, Int; but got torch.{_dtype.FROM_NP[idx.dtype].legacy}Tensor instead "
            "(while checking arguments for embedding)")
    _check_indices(idx, w.shape[0])
    return w[idx]


def _embedding_meta(w, idx, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return Spec(tuple(idx.shape) + tuple(w.shape[1:]), w.dtype)


def _emb_backward_kernel(g, idx, num_weights, padding_idx, scale_grad_by_freq):
    flat = idx.reshape(-1).astype(np.int64)
    rows = g.reshape(flat.size, -1)
    out = np.zeros((num_weights, rows.shape[1]), dtype=_work(g).dtype)
    np.add.at(out, flat, rows)
    if scale_grad_by_freq:
        counts = np.bincount(flat % num_weights, minlength=num_weights)
        out /= np.maximum(counts, 1)[:, None]
    if padding_idx >= 0:
        out[padding_idx] = 0
    return out.astype(g.dtype, copy=False)


def _emb_backward_derivative(gg, idx, padding_idx, scale_grad_by_freq):
    out = _call(embedding, gg, idx)
    if padding_idx >= 0:
        out = out * (idx != padding_idx).unsqueeze(-1)
    return (out, None, None, None, None)


embedding_dense_backward = register(
    "embedding_dense_backward", kernel=_emb_backward_kernel,
    meta=lambda g, idx, n, p, s: Spec((n,) + tuple(g.shape[-1:]), g.dtype),
    node="EmbeddingDenseBackwardBackward0", derivative=_emb_backward_derivative,
    save=lambda out, g, idx, n, p, s: (idx, p, s),
    samples=lambda rng, dt: [
        Sample((rand_array(rng, (2, 3, 4), dt), rng.integers(0, 5, (2, 3)), 5, p, s),
               name=f"pad={p} scale={s}") for p, s in ((-1, False), (2, False), (-1, True))],
    gradcheck=False, public="embedding_dense_backward")


def _embedding_derivative(g, idx, n, padding_idx, scale):
    return (_call(embedding_dense_backward, g, idx, n, padding_idx, scale), None, None, None,
            None)


def _embedding_onnx(b, inputs, args, kwargs, opset):
    """Gather of the weight's rows (padding_idx only matters for the gradient)."""
    return b.emit("Gather", [inputs[0], inputs[1]], axis=0)


embedding = register(
    "embedding", kernel=_embedding_kernel, meta=_embedding_meta, node="EmbeddingBackward0",
    derivative=_embedding_derivative,
    save=lambda out, w, idx, padding_idx=-1, scale_grad_by_freq=False, sparse=False: (
        idx, w.shape[0], padding_idx, scale_grad_by_freq),
    samples=lambda rng, dt: [
        Sample((rand_array(rng, (6, 3), dt), rng.integers(0, 6, s)), name=str(s))
        for s in ((4,), (2, 3), ())],
    onnx=_embedding_onnx, public="embedding",
    saved_names=("indices", "", "padding_idx", "scale_grad_by_freq"))

# ---------------------------------------------------------------- losses

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduce(a: np.ndarray, reduction: int):
    if reduction == 1:
        return a.mean()
    if reduction == 2:
        return a.sum()
    return a


def _nll_pick(x, t, weight, ignore_index):
    """(picked log-probabilities, per-element weights) for (N, C, *) `x` and (N, *) `t`."""
    c = x.shape[1]
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    if valid.any():
        bad = safe[(safe < 0) | (safe >= c)]
        if bad.size:
            raise IndexError(f"Target {int(bad.flat[0])} is out of bounds.")
    picked = np.take_along_axis(x, safe[:, None], 1)[:, 0]
    wt = (weight[safe] if weight is not None else np.ones(safe.shape, x.dtype)) * valid
    return picked, wt.astype(x.dtype, copy=False)


def _nll_kernel(x, t, weight, reduction, ignore_index):
    one = x.ndim == 1
    xw = _work(x)[None] if one else _work(x)
    tt = t[None] if one else t
    picked, wt = _nll_pick(xw, tt, None if weight is None else _work(weight), ignore_index)
    losses = -picked * wt
    total = wt.sum()
    if reduction == 0:
        if one:  # a single sample reports its weight; a batch reports 0
            return losses[0].astype(x.dtype), np.asarray(total).astype(x.dtype)
        return losses.astype(x.dtype, copy=False), np.zeros((), x.dtype)
    out = losses.sum() / total if reduction == 1 else losses.sum()
    return np.asarray(out).astype(x.dtype), np.asarray(total).astype(x.dtype)


def _nll_meta(x, t, weight, reduction, ignore_index, two_d=False):
    shape = tuple(x.shape)
    ts = tuple(t.shape)
    if not two_d:
        if len(shape) not in (1, 2):
            raise ValueError(f"Expected 2 or more dimensions (got {len(shape)})")
        if len(shape) == 2 and ts[0] != shape[0]:
            raise ValueError(f"Expected input batch_size ({shape[0]}) to match target "
                             f"batch_size ({ts[0]}).")
    out = (ts if len(shape) > 1 else ()) if reduction == 0 else ()
    return [Spec(out, x.dtype), Spec((), x.dtype)]


def _nll_save(out, x, t, weight, reduction, ignore_index):
    return (x.shape, t, weight, reduction, ignore_index, out[1])


def _nll_derivative(grads, shape, t, weight, reduction, ignore_index, total):
    # -w[t] * grad at each target position (scatter), zero for ignored targets.
    g = grads[0] if isinstance(grads, list) else grads
    one = len(shape) == 1
    if one:
        t, g = t.unsqueeze(0), g.unsqueeze(0) if reduction == 0 else g
    valid = t != ignore_index
    safe = t * valid
    w = valid.to(g.dtype)
    if weight is not None:
        w = w * weight.index_select(0, safe.reshape(-1)).reshape(tuple(safe.shape))
    if reduction == 1:  # every target ignored: the mask is zero, and so is the gradient
        w = w / (total + (total == 0).to(total.dtype)).detach()
    vals = -(g * w) if reduction == 0 else -(w * g)
    full = (shape[0] if not one else 1,) + tuple(shape[1:] if not one else shape)
    gi = g.new_zeros(full).scatter(1, safe.unsqueeze(1), vals.unsqueeze(1))
    return (gi.squeeze(0) if one else gi, None, None, None, None)


def _nll_samples(rng, dt):
    out = []
    for shape in ((4, 3), (3,)):
        t = rng.integers(0, 3, shape[:1] if len(shape) == 2 else ())
        for red in (0, 1, 2):
            for ig in (-100, 1):
                out.append(Sample((rand_array(rng, shape, dt), t, None, red, ig),
                                  name=f"{shape} red={red} ig={ig}"))
    return out


nll_loss = _register_multi(
    "nll_loss_forward", (1,), kernel=_nll_kernel, meta=_nll_meta, node="NllLossBackward0",
    derivative=_nll_derivative, save=_nll_save, samples=_nll_samples, public="nll_loss",
    nondiff_args=(2,), gradcheck=False,
    saved_names=("", "target", "weight", "reduction", "ignore_index", "total_weight"))


def _nll2d_kernel(x, t, weight, reduction, ignore_index):
    return _nll_kernel(x, t, weight, reduction, ignore_index)


nll_loss2d = _register_multi(
    "nll_loss2d_forward", (1,), kernel=_nll2d_kernel,
    meta=lambda x, t, w, r, i: _nll_meta(x, t, w, r, i, True), node="NllLoss2DBackward0",
    derivative=_nll_derivative, save=_nll_save, public="nll_loss2d", nondiff_args=(2,),
    gradcheck=False,
    samples=lambda rng, dt: [
        Sample((rand_array(rng, (2, 3, 4, 5), dt), rng.integers(0, 3, (2, 4, 5)), None, r, -100),
               name=f"red={r}") for r in (0, 1, 2)])


def _mse_kernel(x, t, reduction=1):
    dt = np.result_type(x.dtype, t.dtype)
    d = _work(x) - _work(t)
    return np.asarray(_reduce(d * d, reduction)).astype(dt, copy=False)


def _loss_meta(x, t, *rest, reduction_pos=0):
    reduction = rest[reduction_pos] if len(rest) > reduction_pos else 1
    from ._util import broadcast_shapes

    shape = broadcast_shapes(tuple(x.shape), tuple(t.shape))
    return Spec(shape if reduction == 0 else (), _dtype.result_type(x, t))


def _scale(g, reduction, n):
    return g / n if reduction == 1 else g


def _mse_derivative(g, x, t, reduction):
    d = (x - t) * 2
    gx = _scale(g, reduction, max(x.numel(), t.numel(), 1)) * d
    return (gx, -gx, None)


def _loss_samples(rng, dt, domain=None, extra=()):
    out = []
    for shape in ((3, 4), (5,), ()):
        for red in (0, 1, 2):
            out.append(Sample((rand_array(rng, shape, dt, domain),
                               rand_array(rng, shape, dt, domain)) + extra + (red,),
                              name=f"{shape} red={red}"))
    return out


mse_loss = register(
    "mse_loss", kernel=_mse_kernel, meta=_loss_meta, node="MseLossBackward0",
    derivative=_mse_derivative, save=lambda out, x, t, reduction=1: (x, t, reduction),
    samples=_loss_samples, public="mse_loss",
    saved_names=("self", "target", "reduction"))


def _bce_kernel(x, t, weight=None, reduction=1):
    dt = x.dtype
    xw, tw = _work(x), _work(t)
    if ((xw < 0) | (xw > 1)).any():
        raise RuntimeError("all elements of input should be between 0 and 1")
    loss = -(tw * np.maximum(np.log(xw), -100) + (1 - tw) * np.maximum(np.log1p(-xw), -100))
    if weight is not None:
        loss = loss * _work(weight)
    return np.asarray(_reduce(loss, reduction)).astype(dt, copy=False)


def _bce_meta(x, t, weight=None, reduction=1):
    if tuple(x.shape) != tuple(t.shape):
        raise ValueError(f"Using a target size ({_torch_size(t.shape)}) that is different to "
                         f"the input size ({_torch_size(x.shape)}) is deprecated. Please "
                         "ensure they have the same size.")
    return Spec(tuple(x.shape) if reduction == 0 else (), x.dtype)


def _torch_size(shape) -> str:
    return f"torch.Size({list(shape)})"


def _bce_derivative(g, x, t, weight, reduction):
    g = _scale(g, reduction, max(x.numel(), 1))
    if weight is not None:
        g = g * weight
    gx = g * (x - t) / (x * (1 - x)).clamp(min=1e-12)
    gt = g * ((1 - x).log().clamp(min=-100) - x.log().clamp(min=-100))
    return (gx, gt, None, None)


binary_cross_entropy = register(
    "binary_cross_entropy", kernel=_bce_kernel, meta=_bce_meta,
    node="BinaryCrossEntropyBackward0", derivative=_bce_derivative,
    save=lambda out, x, t, weight=None, reduction=1: (x, t, weight, reduction),
    nondiff_args=(2,),
    samples=lambda rng, dt: [
        Sample((s.args[0], s.args[1], None, s.args[2]), name=s.name)
        for s in _loss_samples(rng, dt, (0.05, 0.95))],
    public="binary_cross_entropy")


def _softplus_neg(x):
    """log(1 + exp(-x)), stably."""
    return np.maximum(-x, 0) + np.log1p(np.exp(-np.abs(x)))


def _bcel_kernel(x, t, weight=None, pos_weight=None, reduction=1):
    dt = x.dtype
    xw, tw = _work(x), _work(t)
    sp = _softplus_neg(xw)
    if pos_weight is not None:
        loss = (1 - tw) * xw + (1 + (_work(pos_weight) - 1) * tw) * sp
    else:
        loss = (1 - tw) * xw + sp
    if weight is not None:
        loss = loss * _work(weight)
    return np.asarray(_reduce(loss, reduction)).astype(dt, copy=False)


def _bcel_derivative(g, x, t, weight, pos_weight, reduction):
    g = _scale(g, reduction, max(x.numel(), 1))
    if weight is not None:
        g = g * weight
    sig = x.sigmoid()
    if pos_weight is not None:
        lw = (pos_weight - 1) * t + 1
        gx = g * (lw * sig - pos_weight * t)
        sp = (-x).clamp(min=0) + ((-x.abs()).exp() + 1).log()
        gt = g * ((pos_weight - 1) * sp - x)
    else:
        gx = g * (sig - t)
        gt = -g * x
    return (gx, gt, None, None, None)


binary_cross_entropy_with_logits = register(
    "binary_cross_entropy_with_logits", kernel=_bcel_kernel,
    meta=lambda x, t, w=None, pw=None, reduction=1: _loss_meta(x, t, reduction),
    node="BinaryCrossEntropyWithLogitsBackward0", derivative=_bcel_derivative,
    save=lambda out, x, t, weight=None, pos_weight=None, reduction=1: (
        x, t, weight, pos_weight, reduction),
    nondiff_args=(2, 3),
    samples=lambda rng, dt: [
        Sample((s.args[0], rand_array(rng, np.shape(s.args[0]), dt, (0.0, 1.0)), None, None,
                s.args[2]), name=s.name) for s in _loss_samples(rng, dt)],
    public="binary_cross_entropy_with_logits")

REDUCTION_ENUM = {"none": 0, "mean": 1, "sum": 2}
