"""The layout work of a batch-last 2-D convolution in C (`ops/native/conv.c`): im2col
straight from the (n, c, h, w) input into columns ordered (channel, kernel offset, output
pixel, sample).

NumPy builds it from two passes (a padded batch-last copy, then a strided copy), which share
the GIL when split between threads; here it is one C call per range of channels, run on the
intra-op pool without the GIL (`_parallel.share_by_cost`). Every function returns None when
the C kernels are off or unavailable, or the arrays are not float32 / float64 and
C-contiguous: the caller then takes its NumPy path.
"""

from __future__ import annotations

import numpy as np

from . import _native, _parallel, _workspace

_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}


def _kernel(name: str, args: str, *arrays: np.ndarray):
    """C function `name` for the dtype of `arrays` (all of it, C-contiguous), else None."""
    suffix = _SUFFIX.get(arrays[0].dtype)
    if suffix is None or not _native.enabled():
        return None
    for a in arrays:
        if a.dtype != arrays[0].dtype or not a.flags.c_contiguous:
            return None
    return _native.function("conv", f"{name}_{suffix}", args)


def im2col(x: np.ndarray, s, p, d, oh: int, ow: int, taps) -> np.ndarray | None:
    """Batch-last columns of 4-D `x` for kernel offsets `taps` ((r0, r1), (q0, q1)):
    (c, r1 - r0, q1 - q0, oh, ow, n) in the work buffer "conv.cols"; None without C."""
    fn = _kernel("im2col_bl", "pppiiiiiiiiiiiiiiiiii", x)
    if fn is None:
        return None
    n, c, h, w = x.shape
    (r0, r1), (q0, q1) = taps
    cols = _workspace.scratch("conv.cols", (c, r1 - r0, q1 - q0, oh, ow, n), x.dtype)
    xa, ca = _native.address(x), _native.address(cols)
    padded = ((h + 2 * p[0]) * (w + 2 * p[1]) * n,)

    def channels(a: int, b: int) -> None:
        t = _workspace.scratch("conv.im2col_t", padded, x.dtype)  # this thread's own
        fn(xa, ca, _native.address(t), n, c, h, w, s[0], s[1], p[0], p[1], d[0], d[1],
           oh, ow, r0, r1, q0, q1, a, b)

    _parallel.share_by_cost(channels, c, cols.size, ("conv.im2col", x.shape, cols.shape))
    return cols
