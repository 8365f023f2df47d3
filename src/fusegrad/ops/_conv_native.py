"""The layout work of a batch-last 2-D convolution in C (`ops/native/conv.c`): im2col
straight from the (n, c, h, w) input into columns ordered (channel, kernel offset, output
pixel, sample), col2im straight back into an (n, c, h, w) gradient, and the moves of the
batch axis between first and last (with the bias add on the way out of the GEMM).

NumPy builds each of these from several passes (a padded batch-last copy, then a strided
copy; kh * kw strided adds into an accumulator, then a transposing copy), which share the
GIL when split between threads; here each is one C call per range of channels, the ranges
shared on the C workers (`_native.run_pieces`), each piece padding its images in a scratch
buffer its thread keeps in C, as are the moves of the batch axis. Every function returns
None when
the C kernels are off or unavailable, or the arrays are not float32 / float64 and
C-contiguous: the caller then takes its NumPy path.
"""

from __future__ import annotations

import numpy as np

from . import _native, _parallel, _workspace


def _kernel(name: str, args: str, *arrays: np.ndarray):
    """C function `name` for the dtype of `arrays` (all of it, C-contiguous), else None."""
    dt = arrays[0].dtype
    if dt not in _native.SUFFIX or not _native.enabled():
        return None
    for a in arrays:
        if a.dtype != dt or not a.flags.c_contiguous:
            return None
    return _native.typed("conv", name, dt, args)


def _by_channels(fn, args: tuple, channels: int, work: int) -> None:
    """`fn(*args, start, stop, failed)` over `channels`, the channels shared on the C workers
    (`_native.run_pieces`). `args` passes no scratch (NULL): each piece pads its images in a
    buffer of its own thread's, kept in C for that thread's next call (a buffer handed in
    from here would be one for all the pieces); a piece that cannot get one sets `failed`,
    this call's own cell."""
    failed = np.zeros(1, np.int64)
    _native.run_pieces(fn, args, (_native.address(failed),), channels, work)
    if failed[0]:
        raise MemoryError("fusegrad: no memory for a convolution's scratch buffer")


def im2col(x: np.ndarray, s, p, d, oh: int, ow: int, taps) -> np.ndarray | None:
    """Batch-last columns of 4-D `x` for kernel offsets `taps` ((r0, r1), (q0, q1)):
    (c, r1 - r0, q1 - q0, oh, ow, n) in the work buffer "conv.cols"; None without C."""
    fn = _kernel("im2col_bl", "pppiiiiiiiiiiiiiiiiiip", x)
    if fn is None:
        return None
    n, c, h, w = x.shape
    (r0, r1), (q0, q1) = taps
    cols = _workspace.scratch("conv.cols", (c, r1 - r0, q1 - q0, oh, ow, n), x.dtype)
    _by_channels(fn, (_native.address(x), _native.address(cols), None, n, c, h, w, s[0], s[1],
                      p[0], p[1], d[0], d[1], oh, ow, r0, r1, q0, q1), c, cols.size)
    return cols


def im2col_pixels_last(x: np.ndarray, s, p, d, oh: int, ow: int, taps,
                       batch_first: bool) -> np.ndarray | None:
    """Columns of 4-D `x` for kernel offsets `taps`, the pixels last: (n, c, r1 - r0,
    q1 - q0, oh, ow) when `batch_first`, else (c, r1 - r0, q1 - q0, n, oh, ow), in the work
    buffer "conv.cols"; None without C."""
    fn = _kernel("im2col_pl", "pppiiiiiiiiiiiiiiiiiiiiip", x)
    if fn is None:
        return None
    n, c, h, w = x.shape
    (r0, r1), (q0, q1) = taps
    kk = (r1 - r0) * (q1 - q0)
    pix = oh * ow
    if batch_first:
        shape, cs, bs, ts = (n, c, r1 - r0, q1 - q0, oh, ow), kk * pix, c * kk * pix, pix
    else:
        shape, cs, bs, ts = (c, r1 - r0, q1 - q0, n, oh, ow), kk * n * pix, pix, n * pix
    cols = _workspace.scratch("conv.cols", shape, x.dtype)
    _by_channels(fn, (_native.address(x), _native.address(cols), None, n, c, h, w, s[0], s[1],
                      p[0], p[1], d[0], d[1], oh, ow, r0, r1, q0, q1, cs, bs, ts), c, cols.size)
    return cols


def col2im(cols: np.ndarray, c: int, size, s, p, d, oh: int, ow: int, n: int, full,
           taps, batch_last: bool = True) -> np.ndarray | None:
    """The adjoint of `im2col` (`batch_last`) or `im2col_pixels_last`'s (c, taps, n, oh, ow)
    columns: columns (c * taps, oh * ow * n) summed into a new (n, c, h, w) array, each
    pixel's offsets added in order (kernel row, then column) from zero; `full` is the
    (height, width) of the canvas the windows cover. None without C."""
    fn = _kernel("col2im_bl" if batch_last else "col2im_pl", "pppiiiiiiiiiiiiiiiiiiiip", cols)
    if fn is None:
        return None
    (r0, r1), (q0, q1) = taps
    h, w = size
    gi = np.empty((n, c, h, w), dtype=cols.dtype)
    _by_channels(fn, (_native.address(cols), _native.address(gi), None, n, c, h, w, s[0], s[1],
                      p[0], p[1], d[0], d[1], oh, ow, r0, r1, q0, q1, full[0], full[1]), c,
                 cols.size)
    return gi


def batch_first(t: np.ndarray, bias: np.ndarray | None) -> np.ndarray | None:
    """(o, pixels, n) `t` as a new (n, o, pixels) array, plus `bias` (o,) when given; None
    without C."""
    fn = (_kernel("transpose", "pppiiiiiii", t) if bias is None
          else _kernel("transpose", "pppiiiiiii", t, bias))
    if fn is None:
        return None
    o, pixels, n = t.shape
    rows = o * pixels
    out = np.empty((n, o, pixels), dtype=t.dtype)
    # t as (o * pixels, n), its rows shared (each row's bias is its channel's)
    _native.run_pieces(fn, (_native.address(t), _native.address(out),
                            None if bias is None else _native.address(bias), rows, n, pixels),
                       (0, n), rows, t.size)
    return out


def batch_last(g: np.ndarray, slot: str) -> np.ndarray | None:
    """(n, o, pixels) `g` as (o, pixels, n) in the work buffer `slot`; None without C."""
    fn = _kernel("transpose", "pppiiiiiii", g)
    if fn is None:
        return None
    n, o, pixels = g.shape
    cols = o * pixels
    out = _workspace.scratch(slot, (o, pixels, n), g.dtype)
    # g as (n, o * pixels), its columns shared
    _native.run_pieces(fn, (_native.address(g), _native.address(out), None, n, cols, 1, 0, n),
                       (), cols, g.size)
    return out


# Below this many values NumPy's transposing copy is faster than a call into C (whose
# fixed cost is a few microseconds).
SMALL = 1 << 14


def transposed(a: np.ndarray) -> np.ndarray | None:
    """A new C-contiguous array holding the transpose of 2-D `a`; None without C or when
    `a` is small (`SMALL`)."""
    fn = _kernel("transpose", "pppiiiiiii", a) if a.size >= SMALL else None
    if fn is None:
        return None
    rows, cols = a.shape
    out = np.empty((cols, rows), dtype=a.dtype)
    # (source rows shared)
    _native.run_pieces(fn, (_native.address(a), _native.address(out), None, rows, cols, 1),
                       (0, cols), rows, a.size)
    return out


# ---------------------------------------------------------------- direct convolution
# (`ops/native/conv_direct.c`): the samples are the vector lanes, no im2col. Its kernels
# run on the C workers (`ops/native/workers.c`), one piece per thread: a piece starts on
# them within microseconds, where the intra-op pool's Python threads take tens, as long as
# a small network's layer.

# The batch axis of the direct kernels' arrays is padded to a multiple of this many values
# (`LANES` in conv_direct.c), and channels go in blocks of `BLOCK` (`CB` there).
LANES = 16
BLOCK = 4


# Each direct kernel's argument codes (`_native.function`).
_SIGNATURES = {"pack": "pp" + "i" * 9, "unpack": "ppp" + "i" * 6, "forward": "ppp" + "i" * 21,
               "input_grad": "ppp" + "i" * 17, "weight_grad": "ppp" + "i" * 20}


def _available(*arrays: np.ndarray) -> bool:
    """Whether the direct kernels take `arrays` (one float dtype, C-contiguous)."""
    dt = arrays[0].dtype
    return (dt in _native.SUFFIX and _native.enabled()
            and all(a.dtype == dt and a.flags.c_contiguous for a in arrays)
            and _native.library("conv_direct") is not None)


def _run(kernel: str, dtype, args: tuple, units: int, work: int) -> None:
    """Direct kernel `kernel` for `dtype` with `args` (its arguments but the unit range,
    which comes last) over `units` units (`work` multiply-adds or values in all), on the C
    workers (`_native.run_pieces`)."""
    fn = _native.typed("conv_direct", f"conv_{kernel}", dtype, _SIGNATURES[kernel])
    _native.run_pieces(fn, args, (), units, work)


def lanes(n: int) -> int:
    """The batch `n` padded to the direct kernels' lanes."""
    return -(-n // LANES) * LANES


def _pack(x: np.ndarray, p, slot: str) -> np.ndarray:
    """(n, c, h, w) `x` as (c, h + 2 p0, w + 2 p1, lanes(n)) in work buffer `slot`: the
    batch last, a zero border of `p`, the padding lanes zero."""
    n, c, h, w = x.shape
    npad = lanes(n)
    xt = _workspace.scratch(slot, (c, h + 2 * p[0], w + 2 * p[1], npad), x.dtype)
    _run("pack", x.dtype, (_native.address(x), _native.address(xt), n, c, h, w, p[0], p[1],
                           npad), c, xt.size)
    return xt


def _unpack(t: np.ndarray, n: int, bias: np.ndarray | None) -> np.ndarray:
    """(c, pixels..., lanes) `t` as a new (n, c, pixels...) array, plus `bias` (c,)."""
    c, npad = t.shape[0], t.shape[-1]
    pixels = t.size // (c * npad)
    out = np.empty((n, c, *t.shape[1:-1]), dtype=t.dtype)
    _run("unpack", t.dtype, (_native.address(t), _native.address(out),
                             None if bias is None else _native.address(bias), n, c, pixels,
                             npad), c, out.size)
    return out


def _blocks(w: np.ndarray, axis: int) -> int:
    return -(-w.shape[axis] // BLOCK)


def direct_forward(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, s, p, d, oh: int,
                   ow: int, taps) -> np.ndarray | None:
    """The (n, o, oh, ow) convolution of 4-D `x` with `w` (plus `b`) by the direct kernel,
    over kernel offsets `taps` ((r0, r1), (q0, q1)); None without C."""
    if not _available(*((x, w) if b is None else (x, w, b))):
        return None
    n, c = x.shape[:2]
    o, _, kh, kw = w.shape
    (r0, r1), (q0, q1) = taps
    xt = _pack(x, p, "conv.xt")
    hp, wp, npad = xt.shape[1:]
    ob = _blocks(w, 0)
    # The weight in blocks of output channels, each block's channels last (the kernel
    # broadcasts them in turn); the last block's missing channels zero.
    wb = np.zeros((ob * BLOCK, c, kh, kw), dtype=w.dtype)
    wb[:o] = w
    wb = np.ascontiguousarray(wb.reshape(ob, BLOCK, c, kh, kw).transpose(0, 2, 3, 4, 1))
    out_t = _workspace.scratch("conv.out", (o, oh, ow, npad), x.dtype)
    macs = o * oh * ow * npad * c * (r1 - r0) * (q1 - q0)
    _run("forward", x.dtype, (_native.address(xt), _native.address(wb),
                              _native.address(out_t), c, hp, wp, npad, o, kh, kw, s[0], s[1],
                              d[0], d[1], oh, ow, r0, r1, q0, q1, p[0], p[1]), ob * oh, macs)
    return _unpack(out_t, n, b)


def direct_backward(g: np.ndarray, x: np.ndarray, w: np.ndarray, need_x: bool,
                    need_w: bool, s, p, d, taps) -> tuple | None:
    """(gi, gw) of the convolution of 4-D `x` with `w` for output gradient `g` (None where
    not needed) by the direct kernels, over kernel offsets `taps` (the others get zero
    weight gradient); None without C."""
    if not _available(g, x, w):
        return None
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = g.shape[2:]
    (r0, r1), (q0, q1) = taps
    gt = _pack(g, (0, 0), "conv.gt")
    npad = gt.shape[-1]
    ga = _native.address(gt)

    def weight_grad() -> np.ndarray:
        xt = _pack(x, p, "conv.xt")
        hp, wp = xt.shape[1:3]
        full = (r1 - r0, q1 - q0) == (kh, kw)
        gw = (np.empty if full else np.zeros)(w.shape, dtype=w.dtype)
        # Units: (block of output channels, input channel, kernel row).
        _run("weight_grad", x.dtype, (ga, _native.address(xt), _native.address(gw), o, c, hp,
                                      wp, npad, kh, kw, s[0], s[1], d[0], d[1], oh, ow, r0,
                                      r1, q0, q1, p[0]), _blocks(w, 0) * c * (r1 - r0),
             macs_w)
        return gw

    def input_grad() -> np.ndarray:
        cb = _blocks(w, 1)
        # The weight as (blocks of input channels, kh, kw, o, the block's channels).
        wb = np.zeros((o, cb * BLOCK, kh, kw), dtype=w.dtype)
        wb[:, :c] = w
        wb = np.ascontiguousarray(wb.reshape(o, cb, BLOCK, kh, kw).transpose(1, 3, 4, 0, 2))
        din = _workspace.scratch("conv.din", (c, h, wd, npad), x.dtype)
        # Units: (block of input channels, input row).
        _run("input_grad", x.dtype, (ga, _native.address(wb), _native.address(din), o, c, h,
                                     wd, npad, kh, kw, s[0], s[1], p[0], p[1], d[0], d[1], oh,
                                     ow), cb * h, macs_x)
        return _unpack(din, n, None)

    macs_w = o * oh * ow * npad * c * (r1 - r0) * (q1 - q0)
    macs_x = o * oh * ow * npad * c * kh * kw
    if need_w and need_x:
        # Independent once g is packed: side by side on two threads where that is measured
        # to pay, each with its own work buffers (they are per thread).
        gw, gi = _parallel.concurrently([weight_grad, input_grad], macs_w + macs_x,
                                        ("conv.direct_wx", x.shape, w.shape, tuple(s),
                                         tuple(p), tuple(d)))
        return gi, gw
    return (input_grad() if need_x else None), (weight_grad() if need_w else None)
