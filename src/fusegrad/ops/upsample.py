"""Upsampling ops, as ATen names them: `upsample_nearest{1,2,3}d`,
`_upsample_nearest_exact{1,2,3}d`, `upsample_linear1d`, `upsample_bilinear2d`,
`upsample_bicubic2d`, `upsample_trilinear3d` and the antialiased `_upsample_bilinear2d_aa` and
`_upsample_bicubic2d_aa`, each with its `*_backward` op.

Every mode is separable: along each spatial axis, output position j is a weighted sum of a
few input positions (1 for nearest, 2 for linear, 4 for cubic), so a kernel is one gather
per axis and tap (`gather_axes`) and the backward op its adjoint (`scatter_axes`). The
positions and weights follow PyTorch's CPU rules, including their float32 arithmetic (the
nearest modes always compute positions in float32; the interpolating ones in the input's
float type), so the sampled positions agree bit for bit.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from . import _onnx as ox
from ._util import (
    F32,
    F64,
    HALF,
    Spec,
    c_contiguous,
    elem_strides,
    format_of,
    format_strides,
    input_format,
    is_format_contiguous,
    not_implemented_for,
    rand_array,
    size_str,
)
from .padding import gather_axes, scatter_axes
from .registry import Sample, register

_CUBIC_A = -0.75  # the cubic convolution constant PyTorch (and OpenCV) use


def _call(op, *args):
    from .._dispatch import call

    return call(op, *args)


# ---------------------------------------------------------------- positions and weights


def _inv_scale(n_in: int, n_out: int, scale, dt) -> np.floating:
    """Input positions per output position: 1/scale when given (> 0), else n_in / n_out."""
    if scale is not None and scale > 0:
        return dt.type(1.0 / scale)
    return dt.type(dt.type(n_in) / dt.type(n_out))


def _nearest_index(n_in: int, n_out: int, scale, exact: bool, shortcut: bool) -> np.ndarray:
    """The input position each output position copies (nearest or nearest-exact)."""
    j = np.arange(n_out, dtype=np.int64)
    if not exact and shortcut:
        # PyTorch copies (and doubles) without float arithmetic, whatever the scale, in its
        # 2-D forward kernel and in every backward kernel; not in its 1-D and 3-D forward
        # kernels. (So there, under a scale that disagrees with the sizes, PyTorch's gradient
        # is not the adjoint of its forward; fusegrad gives PyTorch's numbers.)
        if n_out == n_in:
            return j
        if n_out == 2 * n_in:
            return j >> 1
    s = _inv_scale(n_in, n_out, scale, F32)
    if exact:
        # (j + 0.5) is a double in PyTorch's formula; the product is rounded to float32.
        src = ((j + 0.5) * np.float64(s)).astype(F32)
    else:
        src = j.astype(F32) * s
    return np.minimum(np.floor(src).astype(np.int64), n_in - 1)


def _source_position(n_in: int, n_out: int, align_corners: bool, scale, dt, cubic: bool):
    """Real-valued input position of each output position, in the compute dtype `dt`."""
    dst = np.arange(n_out).astype(dt)
    if align_corners:
        s = dt.type(dt.type(n_in - 1) / dt.type(n_out - 1)) if n_out > 1 else dt.type(0)
        return dst * s
    s = _inv_scale(n_in, n_out, scale, dt)
    src = s * (dst + dt.type(0.5)) - dt.type(0.5)
    return src if cubic else np.maximum(src, dt.type(0))


def _linear_taps(n_in: int, n_out: int, align_corners: bool, scale, dt):
    if n_out == n_in:  # PyTorch copies when the size does not change, whatever the scale
        j = np.arange(n_out, dtype=np.int64)
        return np.stack([j, j]), np.stack([np.ones(n_out, dt), np.zeros(n_out, dt)])
    src = _source_position(n_in, n_out, align_corners, scale, dt, False)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    lam = np.clip(src - i0.astype(dt), 0, 1).astype(dt)
    i1 = i0 + (i0 < n_in - 1)
    return np.stack([i0, i1]), np.stack([dt.type(1) - lam, lam])


def _cubic_weights(t: np.ndarray) -> np.ndarray:
    """The four cubic-convolution weights of the taps at -1, 0, 1, 2 for fraction `t`."""
    a = _CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    one = t.dtype.type(1)
    return np.stack([far(t + one), near(t), near(one - t), far(one + one - t)]).astype(t.dtype)


def _cubic_taps(n_in: int, n_out: int, align_corners: bool, scale, dt):
    src = _source_position(n_in, n_out, align_corners, scale, dt, True)
    i = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    t = np.clip(src - i.astype(dt), 0, 1).astype(dt)
    # Taps outside the input read its border (PyTorch clamps the access).
    idx = np.clip(i[None] + np.arange(-1, 3)[:, None], 0, n_in - 1)
    return idx, _cubic_weights(t)


def _aa_filter(x: np.ndarray, cubic: bool) -> np.ndarray:
    """The antialiasing filters: a triangle, or the cubic convolution kernel with a = -0.5
    (as PIL's resampling)."""
    x = np.abs(x)
    if not cubic:
        return np.maximum(1 - x, 0).astype(x.dtype)
    a = x.dtype.type(-0.5)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = (((x - 5) * x + 8) * x - 4) * a
    return np.where(x < 1, near, np.where(x < 2, far, 0)).astype(x.dtype)


def _aa_taps(n_in: int, n_out: int, align_corners: bool, scale, dt, cubic: bool,
             antialias: bool = True):
    """Filter taps: each output position averages the input positions under the filter
    (stretched by the downscaling factor when `antialias`, so that every input contributes
    when shrinking), weights normalised to sum to 1; padded to one tap count with zero
    weights. Without `antialias` these are the plain bilinear taps as PyTorch's uint8 kernels
    compute them (corners aligned by a half-pixel shift)."""
    if align_corners:
        s = dt.type((n_in - 1) / (n_out - 1)) if n_out > 1 else dt.type(0)
    else:
        s = _inv_scale(n_in, n_out, scale, dt)
    shift = dt.type(0.5 if align_corners and not antialias else 0.0)
    half = 2.0 if cubic else 1.0  # half the filter's width
    stretch = antialias and s >= 1
    support = dt.type(half * s) if stretch else dt.type(half)
    inv = dt.type(1 / s) if stretch else dt.type(1)
    # At most this many taps: the bound rounding can exceed by one, cut as PyTorch cuts it.
    most = 2 * int(np.ceil(support)) + 1 if antialias else int(2 * half)
    center = (s * (np.arange(n_out) + 0.5 - shift)).astype(dt)
    first = np.maximum(np.trunc(center - support + dt.type(0.5) + shift).astype(np.int64), 0)
    count = np.clip(np.minimum(np.trunc(center + support + dt.type(0.5) + shift).astype(
        np.int64), n_in) - first, 0, most)
    j = np.arange(max(int(count.max(initial=1)), 1))[:, None]
    w = _aa_filter(((j + first).astype(dt) - center + dt.type(0.5) - shift) * inv, cubic)
    w = np.where(j < count, w, dt.type(0))
    total = w.sum(0)
    w = np.where(total != 0, w / np.where(total != 0, total, 1), w).astype(dt)
    return np.clip(first + j, 0, n_in - 1), w


def _folded_cubic_taps(n_in: int, n_out: int, align_corners: bool, scale):
    """uint8 bicubic's taps (no antialiasing): the float kernel's four taps and weights (in
    doubles), the weights of taps past an edge added, left to right, into the edge tap's
    (the float kernel reads the edge pixel there instead; the sums round differently once
    the weights become integers)."""
    src = _source_position(n_in, n_out, align_corners, scale, F64, True)
    i = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    t = np.clip(src - i, 0, 1)
    a = _CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    # (the last tap's distance as PyTorch rounds it: (1 - t) + 1, not 2 - t)
    w = np.stack([far(t + 1), near(t), near(1 - t), far((1 - t) + 1)])
    idx = np.clip(i[None] + np.arange(-1, 3)[:, None], 0, n_in - 1)
    folded = np.zeros_like(w)
    cols = np.arange(n_out)
    lead = np.zeros(n_out, dtype=np.int64)  # the first tap reading the same pixel
    for k in range(4):
        if k:
            lead = np.where(idx[k] != idx[k - 1], k, lead)
        folded[lead, cols] += w[k]
    return idx, folded


def _fixed_point_resample(x, output_size, align_corners: bool, scales, cubic: bool,
                          antialias: bool):
    """Bilinear or bicubic resizing of uint8 images as PyTorch's CPU kernels compute it:
    separable passes (width, then height, each only if the size changes), each in fixed
    point with int16 weights as precise as the largest weight allows (at most 22 bits),
    rounded half up and clamped, the intermediate image stored as uint8."""
    out = x
    for axis in (3, 2):
        n_in, n_out = x.shape[axis], output_size[axis - 2]
        if n_in == n_out:
            continue
        if cubic and not antialias:
            idx, w = _folded_cubic_taps(n_in, n_out, align_corners, scales[axis - 2])
        else:
            idx, w = _aa_taps(n_in, n_out, align_corners, scales[axis - 2], F64, cubic,
                              antialias)
        bits = 0  # one bit more while twice the largest weight still fits in int16's range
        while bits < 22 and int(0.5 + w.max() * (1 << (bits + 1))) < (1 << 15):
            bits += 1
        wi = np.trunc(w * (1 << bits) + np.where(w < 0, -0.5, 0.5)).astype(np.int64)
        shape = [1] * 4
        shape[axis] = n_out
        acc = np.full(out.shape[:axis] + (n_out,) + out.shape[axis + 1:], 1 << (bits - 1),
                      dtype=np.int64)
        for t in range(idx.shape[0]):
            acc += np.take(out, idx[t], axis=axis).astype(np.int64) * wi[t].reshape(shape)
        out = np.clip(acc >> bits, 0, 255).astype(np.uint8)
    return out


def _taps(kind: str, in_sizes, out_sizes, align_corners, scales, dt,
          backward: bool = False) -> list:
    """Per spatial axis, (idx, weights) of the mode `kind` (weights None: a plain gather)."""
    taps = []
    shortcut = backward or len(in_sizes) == 2
    for n_in, n_out, s in zip(in_sizes, out_sizes, scales):
        if kind in ("nearest", "exact"):
            taps.append((_nearest_index(n_in, n_out, s, kind == "exact", shortcut)[None],
                         None))
        elif kind == "linear":
            taps.append(_linear_taps(n_in, n_out, align_corners, s, dt))
        elif kind.endswith("_aa"):
            if n_in == n_out and not backward:
                # PyTorch's forward skips an axis whose size does not change, whatever the
                # scale it is told; its backward kernel does not.
                taps.append((np.arange(n_out, dtype=np.int64)[None], None))
                continue
            taps.append(_aa_taps(n_in, n_out, align_corners, s, dt, kind == "cubic_aa"))
        else:
            taps.append(_cubic_taps(n_in, n_out, align_corners, s, dt))
    return taps


def _half_weights(taps: list, kind: str, dt: np.dtype) -> list:
    """`taps` with their weights stored in half type `dt`, as PyTorch's generic CPU
    upsampling kernel (linear, trilinear, bicubic; its bilinear kernel keeps float32
    weights) keeps them: a linear tap's fraction rounded, its complement computed from the
    rounded fraction and rounded. The sums stay in float32."""
    out = []
    for idx, w in taps:
        if w is not None:
            cdt = w.dtype
            if kind == "linear":
                lam = w[1].astype(dt).astype(cdt)
                w = np.stack([(cdt.type(1) - lam).astype(dt).astype(cdt), lam])
            else:
                w = w.astype(dt).astype(cdt)
        out.append((idx, w))
    return out


def _compute_dtype(dt: np.dtype) -> np.dtype:
    """PyTorch's `opmath` type: float32 for half types and float32, float64 for float64."""
    return F64 if dt == F64 else F32


# ---------------------------------------------------------------- checks

_LETTERS = {1: ("W",), 2: ("H", "W"), 3: ("D", "H", "W")}


def _sizes_str(k: int, sizes) -> str:
    return ", ".join(f"{c}: {n}" for c, n in zip(_LETTERS[k], sizes))


def _check(k: int, shape: tuple, output_size) -> None:
    if len(output_size) != k:
        raise RuntimeError(f"It is expected output_size equals to {k}, but got size "
                           f"{len(output_size)}")
    if len(shape) != k + 2:
        raise RuntimeError(f"It is expected input_size equals to {k + 2}, but got size "
                           f"{len(shape)}")
    spatial = shape[2:]
    if any(n <= 0 for n in spatial) or any(n <= 0 for n in output_size):
        raise RuntimeError(
            "Input and output sizes should be greater than 0, but got input "
            f"({_sizes_str(k, spatial)}){' and' if k == 1 else ''} output "
            f"({_sizes_str(k, output_size)})")
    if shape[1] == 0:
        raise RuntimeError(f"Non-empty {k + 2}D data tensor expected but got a tensor with "
                           f"sizes {size_str(shape)}")


def _legacy(x) -> str:
    """PyTorch's legacy name of the dtype (`Float`, `Long`) of an array, tensor or fake."""
    return (_dtype.FROM_NP[x.dtype] if isinstance(x, np.ndarray) else x.dtype).legacy


def _check_dtype(x, kind: str, k: int) -> None:
    """Floating types, and uint8 for the nearest modes; PyTorch's error names the kernel."""
    name = _legacy(x)
    if name in ("Float", "Double", "Half", "BFloat16"):
        return
    if name == "Byte" and kind in ("nearest", "exact"):
        return
    if name == "Byte" and k == 2:  # bilinear and bicubic, in fixed point
        return
    if kind.endswith("_aa"):
        raise not_implemented_for("compute_index_ranges_weights", name)
    if k == 2 and kind != "cubic":
        kernel = f"upsample_{'nearest' if kind in ('nearest', 'exact') else 'bilinear'}2d" \
                 "_channels_last"
    else:
        kernel = f"compute_indices_weights_{'nearest' if kind == 'exact' else kind}"
    raise not_implemented_for(kernel, name)


# ---------------------------------------------------------------- kernels


def _split(kind: str, rest: tuple, k: int):
    """(align_corners, scales) from the arguments after output_size (or input_size)."""
    if kind in ("nearest", "exact"):
        align, scales = False, rest
    else:
        align, scales = bool(rest[0]) if rest else False, rest[1:]
    scales = list(scales) + [None] * (k - len(scales))
    return align, scales


def _forward_kernel(kind: str, k: int):
    def kernel(x, output_size, *rest):
        _check(k, x.shape, output_size)
        _check_dtype(x, kind, k)
        align, scales = _split(kind, rest, k)
        if x.dtype == np.uint8 and kind not in ("nearest", "exact"):
            out = _fixed_point_resample(x, output_size, align, scales, kind.startswith("cubic"),
                                        kind.endswith("_aa"))
            if output_size[1] == 1 and output_size[0] != x.shape[2] and x.shape[1] > 4 \
                    and not _channels_last(x):
                # PyTorch's generic uint8 kernel (more than 4 channels) has the contiguous
                # antialiased kernel's fault below, with or without antialiasing.
                out = np.ascontiguousarray(np.broadcast_to(out[:, :, :1], out.shape))
            return out
        cdt = _compute_dtype(x.dtype)
        xw = x.astype(F32) if x.dtype in HALF else x
        taps = _taps(kind, x.shape[2:], output_size, align, scales, cdt)
        if x.dtype in HALF and (kind == "cubic" or (kind == "linear" and k != 2)):
            taps = _half_weights(taps, kind, x.dtype)
        out = gather_axes(xw, taps).astype(x.dtype, copy=False)
        if (kind.endswith("_aa") and output_size[1] == 1 and output_size[0] != x.shape[2]
                and not _channels_last(x)):
            # PyTorch's contiguous antialiased kernel, resizing the height into a width-1
            # output, writes its first row into every row (its channels-last kernel and its
            # backward do not): reproduced, as PyTorch is the reference.
            out = np.ascontiguousarray(np.broadcast_to(out[:, :, :1], out.shape))
        return out

    return kernel


def _channels_last(x: np.ndarray) -> bool:
    """Whether a 4-D array is laid out channels-last (and not also C-contiguous)."""
    return not x.flags.c_contiguous and is_format_contiguous(x.shape, elem_strides(x),
                                                             "channels_last")


def _backward_kernel(kind: str, k: int):
    def kernel(g, output_size, input_size, *rest):
        align, scales = _split(kind, rest, k)
        cdt = _compute_dtype(g.dtype)
        gw = g.astype(F32) if g.dtype in HALF else g
        taps = _taps(kind, input_size[2:], output_size, align, scales, cdt, backward=True)
        return scatter_axes(gw, taps, list(input_size[2:])).astype(g.dtype, copy=False)

    return kernel


def _forward_meta(kind: str, k: int):
    def meta(x, output_size, *rest):
        _check(k, tuple(x.shape), output_size)
        _check_dtype(x, kind, k)
        shape = tuple(x.shape[:2]) + tuple(output_size)
        return Spec(shape, x.dtype, format_strides(shape, format_of(x)))

    return meta


def _backward_meta(kind: str, k: int):
    def meta(g, output_size, input_size, *rest):
        expect = tuple(input_size[:2]) + tuple(output_size)
        got = tuple(g.shape)
        if got != expect:
            d = next((i for i, (a, b) in enumerate(zip(expect, got)) if a != b), 0)
            raise RuntimeError(
                f"Expected grad_output to have the same shape as output; output.size({d}) = "
                f"{expect[d]} but got grad_output.size({d}) = {got[d] if d < len(got) else 0}")
        shape = tuple(input_size)
        if not _grad_in_format(kind, k):
            return Spec(shape, g.dtype)
        return Spec(shape, g.dtype, format_strides(shape, format_of(g)))

    return meta


# ---------------------------------------------------------------- samples


def _cases(kind: str, k: int) -> list:
    """(input shape, output size, align_corners, scales) for the oracle tests."""
    if k == 1:
        base = [((2, 3, 5), [10], [2.0]), ((1, 2, 4), [7], [None]), ((2, 2, 6), [4], [0.7]),
                ((1, 3, 3), [3], [1.3])]
    elif k == 2:
        base = [((2, 3, 4, 5), [8, 10], [2.0, 2.0]), ((1, 2, 5, 4), [7, 9], [None, None]),
                ((1, 2, 6, 6), [3, 4], [0.5, 0.75]), ((2, 1, 3, 4), [5, 4], [1.7, 1.0])]
    else:
        base = [((1, 2, 2, 3, 4), [4, 6, 8], [2.0, 2.0, 2.0]),
                ((1, 1, 3, 4, 2), [5, 3, 4], [None, None, None]),
                ((2, 1, 4, 3, 3), [2, 5, 3], [0.6, 1.8, 1.0])]
    if kind == "nearest" and k != 2:
        # Not the cases where PyTorch's backward is not its forward's adjoint (see
        # `_nearest_index`): gradcheck runs on every sample. tests/ cover those.
        base = [(s, o, sc) for s, o, sc in base
                if not any(n in (i, 2 * i) and v not in (None, n / i)
                           for i, n, v in zip(s[2:], o, sc))]
    if kind.endswith("_aa"):  # shrinking is where antialiasing differs
        base = base + [((1, 2, 9, 8), [4, 5], [None, None]), ((2, 1, 7, 11), [3, 2], [0.5, 0.2]),
                       ((1, 1, 5, 6), [5, 2], [None, None])]
    if kind in ("nearest", "exact"):
        return [(s, o, None, sc) for s, o, sc in base]
    out = []
    for s, o, sc in base:
        out.append((s, o, False, sc))
        out.append((s, o, True, [None] * k))
    return out


def _samples(kind: str, k: int, backward: bool = False):
    def samples(rng, dt):
        out = []
        for shape, osize, align, scales in _cases(kind, k):
            extra = ([] if align is None else [align]) + list(scales)
            name = f"{shape}->{osize} align={align} scales={scales}"
            if backward:
                g = rand_array(rng, shape[:2] + tuple(osize), dt)
                out.append(Sample((g, osize, list(shape)) + tuple(extra), name=name))
            else:
                out.append(Sample((rand_array(rng, shape, dt), osize) + tuple(extra),
                                  name=name))
        return out

    return samples


# ---------------------------------------------------------------- registration

_OPS = [("upsample_nearest", "UpsampleNearest", "nearest", (1, 2, 3)),
        ("_upsample_nearest_exact", "UpsampleNearestExact", "exact", (1, 2, 3)),
        ("upsample_linear", "UpsampleLinear", "linear", (1,)),
        ("upsample_bilinear", "UpsampleBilinear", "linear", (2,)),
        ("upsample_bicubic", "UpsampleBicubic", "cubic", (2,)),
        ("upsample_trilinear", "UpsampleTrilinear", "linear", (3,)),
        ("_upsample_bilinear", "UpsampleBilinear", "linear_aa", (2,)),
        ("_upsample_bicubic", "UpsampleBicubic", "cubic_aa", (2,))]

UPSAMPLE: dict = {}


def _grad_in_format(kind: str, k: int) -> bool:
    """Whether PyTorch's backward of upsampling `kind` in `k` dims lays the input's gradient
    out in the memory format the output's gradient suggests (the linear modes, and 2-D
    nearest), rather than contiguous (cubic, and 3-D nearest). (Every forward lays its
    output out in its input's format.)"""
    return kind in ("linear", "linear_aa") or (kind in ("nearest", "exact") and k == 2)


def _register(prefix: str, stem: str, kind: str, k: int) -> None:
    aa = kind.endswith("_aa")
    name = f"{prefix}{k}d{'_aa' if aa else ''}"
    stem = f"{stem}{k}D{'Aa' if aa else ''}"
    n_rest = k + (0 if kind in ("nearest", "exact") else 1)
    holder: dict = {}
    bwd = register(
        f"{name}_backward", kernel=(input_format if _grad_in_format(kind, k) else c_contiguous)(
            _backward_kernel(kind, k)),
        meta=_backward_meta(kind, k),
        node=f"{stem}BackwardBackward0",
        # The adjoint's adjoint is the upsampling again.
        derivative=lambda gg, osize, rest, h=holder: (
            (_call(h["fwd"], gg, osize, *rest),) + (None,) * (2 + n_rest)),
        save=lambda out, g, osize, isize, *rest: (list(osize), tuple(rest)),
        samples=_samples(kind, k, backward=True), public=f"{name}_backward")
    fwd = register(
        name, kernel=input_format(_forward_kernel(kind, k)),
        meta=_forward_meta(kind, k),
        node=f"{stem}Backward0",
        derivative=lambda g, osize, isize, rest: (
            (_call(bwd, g, osize, isize, *rest),) + (None,) * (1 + n_rest)),
        save=lambda out, x, osize, *rest: (list(osize), list(x.shape), tuple(rest)),
        samples=_samples(kind, k), public=name,
        onnx=None if aa else ox.resize(kind, k, _nearest_index))
    holder["fwd"] = fwd
    UPSAMPLE[name] = fwd
    UPSAMPLE[f"{name}_backward"] = bwd


for _prefix, _stem, _kind, _dims in _OPS:
    for _k in _dims:
        _register(_prefix, _stem, _kind, _k)

upsample_nearest1d = UPSAMPLE["upsample_nearest1d"]
upsample_nearest2d = UPSAMPLE["upsample_nearest2d"]
upsample_nearest3d = UPSAMPLE["upsample_nearest3d"]
upsample_nearest_exact1d = UPSAMPLE["_upsample_nearest_exact1d"]
upsample_nearest_exact2d = UPSAMPLE["_upsample_nearest_exact2d"]
upsample_nearest_exact3d = UPSAMPLE["_upsample_nearest_exact3d"]
upsample_linear1d = UPSAMPLE["upsample_linear1d"]
upsample_bilinear2d = UPSAMPLE["upsample_bilinear2d"]
upsample_bicubic2d = UPSAMPLE["upsample_bicubic2d"]
upsample_trilinear3d = UPSAMPLE["upsample_trilinear3d"]
upsample_bilinear2d_aa = UPSAMPLE["_upsample_bilinear2d_aa"]
upsample_bicubic2d_aa = UPSAMPLE["_upsample_bicubic2d_aa"]
