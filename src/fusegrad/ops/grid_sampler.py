"""Grid sampling ops, as ATen names them: `grid_sampler_2d`, `grid_sampler_3d` and
`affine_grid_generator`, recorded as PyTorch's `GridSampler2DBackward0`,
`GridSampler3DBackward0` and `AffineGridGeneratorBackward0`.

The sampler's value and gradients are those of one composite of registry ops (`sample`):
the kernel runs it on its arrays with nothing recorded, and the derivative runs it again on
the saved input and grid and differentiates it (`autograd.grad`, with a graph when the
backward records one), so double backward reaches the input and the grid as before. The
affine grid is the base grid of the output size (its points in [-1, 1], rounded as
PyTorch's linspace rounds them) times the transposed maps; its gradient is the base grid's
transpose times the gradient, both by `bmm`, the product the composite recorded.

ONNX: GridSample where the opset has it (2-D from 16, volumes from 20), else gathers for
bilinear and nearest sampling with zeros or border padding; the affine grid as a constant
base grid times the transposed maps at every opset.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype
from .._autocast import set_aside
from ..autograd.grad_mode import enable_grad, is_grad_enabled, no_grad
from ._util import Spec, rand_array, refuse_dtypes
from .nn import _const
from .registry import REGISTRY, Sample, register

# ATen's integer modes, in its order.
INTERPOLATION = ("bilinear", "nearest", "bicubic")
PADDING = ("zeros", "border", "reflection")


def _call(op, *args):
    from .._dispatch import call

    return call(op, *args)


def _where(cond, a, b):
    return _call(REGISTRY["where.self"], cond, a, b)


def _make(a: np.ndarray):
    from .._tensor import Tensor

    return Tensor._make(a)


def _unnormalize(coord, size: int, align_corners: bool, nd: int):
    """A normalised coordinate in pixels, rounded as PyTorch's kernel for `nd` dims rounds
    it: the last bit decides which cell a point on a pixel centre falls in (the grid's
    gradient there), and which pixel is nearest to a point half way between two."""
    if nd == 3:
        if align_corners:
            return (coord + 1) / 2 * (size - 1)
        return ((coord + 1) * size - 1) / 2
    if align_corners:
        return (coord + 1) * ((size - 1) / 2)
    return _fused_shift(coord + 1, size / 2)


def _fused_shift(shifted, scale: float):
    """shifted * scale - 0.5 rounded once, as the fused multiply-add of PyTorch's 2-D
    kernel rounds it (rounded twice, many values differ in the last bit)."""
    out = shifted * scale - 0.5
    a = shifted.detach()._data
    if a is None or a.dtype not in (np.float32, np.float64) or not a.size:
        return out  # a fake tensor has no values; half types are left as they round
    with np.errstate(all="ignore"):
        if a.dtype == np.float32:  # the product of two floats is exact in a double
            fused = (a.astype(np.float64) * scale - 0.5).astype(np.float32)
        else:
            fused = _fma64(a, scale, -0.5)
        fix = fused - out.detach()._data  # exact: the two differ in the last bits only
    fix[~np.isfinite(fix)] = 0
    if not fix.any():
        return out
    return out + _make(fix)


def _fma64(a: np.ndarray, b: float, c: float) -> np.ndarray:
    """a * b + c with the product unrounded (doubles; `b` of at most 26 significant bits,
    as half an image size is): `a` split in two halves whose products with `b` are exact,
    then the three terms summed with the first sum's rounding error carried (correctly
    rounded but for rare ties)."""
    t = a * 134217729.0  # 2**27 + 1 (Veltkamp's split)
    hi = t - (t - a)
    x1, x2 = hi * b, (a - hi) * b
    total = x1 + c
    back = total - x1
    err = (x1 - (total - back)) + (c - back)
    return total + (err + x2)


def _reflect(coord, twice_low: int, twice_high: int):
    """Fold `coord` back into [low, high] by reflecting at the ends (as often as needed)."""
    if twice_low == twice_high:
        return coord * 0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    dist = (coord - low).abs()
    extra = dist.fmod(span)
    flips = (dist / span).floor()
    return _where(flips.remainder(2) == 0, extra + low, span - extra + low)


def _clip(coord, size: int):
    """`coord` clipped to [0, size - 1]. A coordinate on either bound counts as clipped, as
    PyTorch's grid sampler counts it: its gradient is 1 strictly inside only (a plain clamp
    passes the gradient on at the bounds too, where the sampler passes none)."""
    inside = (coord > 0) & (coord < size - 1)
    return _where(inside, coord, coord.detach().clamp(0, size - 1))


def _source_index(coord, size, padding_mode, align_corners, nd, nan=None):
    coord = _unnormalize(coord, size, align_corners, nd)
    if padding_mode == "border":
        coord = _clip(coord, size)
    elif padding_mode == "reflection":
        coord = _reflect(coord, 0, 2 * (size - 1)) if align_corners else \
            _reflect(coord, -1, 2 * size - 1)
        coord = _clip(coord, size)
    if nan is not None and padding_mode != "zeros":
        # PyTorch's clipping takes NaN to the first pixel in its 2-D kernel, to the last in
        # its 3-D one
        coord = coord.masked_fill(nan[0], 0.0 if nan[1] == 2 else size - 1)
    return coord


def _tap(flat, coords: list, sizes: tuple):
    """input[n, c, *coords] for integer-valued coordinate tensors (N, *out), one per spatial
    dim (slowest first); 0 outside the input."""
    n, c = flat.shape[:2]
    inside = None
    index = None
    for ci, size in zip(coords, sizes):
        ok = (ci >= 0) & (ci < size)
        inside = ok if inside is None else inside & ok
        ci = ci.clamp(0, size - 1)
        index = ci if index is None else index * size + ci
    # reshape, not view: coordinates read from a non-contiguous grid (channels_last, sliced)
    # keep its strides, which a view cannot always flatten
    index = index.long().reshape(n, 1, -1)
    values = flat.gather(2, index.expand(n, c, index.shape[-1])).reshape(
        n, c, *coords[0].shape[1:])
    return values * inside.unsqueeze(1).to(flat.dtype)


# Bicubic grid sampling's cubic convolution (its A, PyTorch's -0.75).
_CUBIC_A = -0.75


def _cubic_weights(t) -> list:
    """The four taps' weights at fraction t of the way from tap 1 to tap 2."""
    a = _CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _bounded(coord, size: int, padding_mode: str, align_corners: bool):
    """An integer tap coordinate moved inside as the padding mode says (bicubic's taps)."""
    if padding_mode == "border":
        return coord.clamp(0, size - 1)
    if padding_mode == "reflection":
        coord = _reflect(coord, 0, 2 * (size - 1)) if align_corners else \
            _reflect(coord, -1, 2 * size - 1)
        return coord.clamp(0, size - 1)
    return coord


def check(input, grid, mode: str, dtypes: bool = True) -> None:
    """PyTorch's checks, in its order: the grid's last size, the batch sizes, the dims (and,
    with `dtypes`, the dtypes: checked after CPU autocast casts, so by the op alone)."""
    isz, gsz = list(input.shape), list(grid.shape)
    if gsz[-1:] != [input.dim() - 2]:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {input.dim() - 2} in "
                           f"last dimension, but got grid with sizes {gsz}")
    if isz[0] != gsz[0]:
        raise RuntimeError("grid_sampler(): expected grid and input to have same batch size, "
                           f"but got input with sizes {isz} and grid with sizes {gsz}")
    if input.dim() not in (4, 5) or grid.dim() != input.dim():
        want = 4 if input.dim() == 4 else 5  # (any other input is taken for a volume)
        raise RuntimeError(f"grid_sampler(): expected {want}D input and grid with same number "
                           f"of dimensions, but got input with sizes {isz} and grid with sizes "
                           f"{gsz}")
    if mode == "bicubic" and input.dim() == 5:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if dtypes and input.dtype is not grid.dtype:  # (the kernel reads both as the input's type)
        raise RuntimeError(f"expected scalar type {input.dtype.legacy} but found "
                           f"{grid.dtype.legacy}")


def _sample_nan(input, grid, nan, mode: str, padding_mode: str, align_corners: bool):
    """grid sampling of a grid with NaNs (`nan`: a boolean tensor of the grid's shape), as
    PyTorch's kernels treat them: the border and reflection clipping takes a NaN coordinate
    to the first (2-D) or last (3-D) pixel; with zeros padding a NaN point reads nothing (0),
    except that the 2-D bilinear kernel gives NaN; bicubic gives NaN whatever the padding.
    Composed of ops on the mask, so that a grid without NaNs gives plain sampling's values
    and gradients."""
    nan_out = mode == "bicubic" or (mode == "bilinear" and grid.dim() == 4
                                    and padding_mode == "zeros")
    far = padding_mode == "zeros" and not nan_out
    # (far outside: no tap inside the input reads a value)
    clean = grid.masked_fill(nan, -1e4 if far else 0.0)
    masks = [nan[..., i] for i in range(nan.shape[-1])]
    out = sample(input, clean, mode, padding_mode, align_corners, _masks=masks)
    if nan_out:
        # A NaN point gives NaN and passes no gradient to the input; the grid's gradient
        # there is NaN in both coordinates (bicubic), or (bilinear) in x where y is NaN and
        # in y where x is, as in PyTorch's backward kernels, whose weights along one axis
        # multiply the other's differences. The term added is NaN at those points, 0
        # elsewhere.
        hit = nan.any(-1)
        sel = hit.unsqueeze(-1).expand_as(nan) if mode == "bicubic" else nan.flip(-1)
        weights = sel.to(grid.dtype).masked_fill(sel, float("nan"))
        poison = (grid.masked_fill(~sel, 0.0) * weights).sum(-1)
        out = out.masked_fill(hit.unsqueeze(1), 0.0) + poison.unsqueeze(1).to(out.dtype)
    return out


def sample(input, grid, mode: str, padding_mode: str, align_corners: bool, _masks=None):
    """grid_sample of checked arguments, composed of registry ops: `input` (N, C, H, W)
    sampled at the normalised positions `grid` (N, Ho, Wo, 2), in [-1, 1] as (x, y), by
    bilinear, nearest or bicubic interpolation; or a volume (N, C, D, H, W) at `grid` (N, Do,
    Ho, Wo, 3) as (x, y, z), trilinear ("bilinear") or nearest."""
    n, c = input.shape[:2]
    sizes = tuple(input.shape[2:])  # slowest first; the grid lists x (fastest) first
    nd = len(sizes)
    flat = input.reshape(n, c, -1)
    masks = _masks
    # (a meta grid holds no values to look at; with zeros or reflection padding, PyTorch's
    # kernels take an infinite coordinate as they take a NaN one)
    if not masks and grid.dtype.is_floating_point and not grid.is_meta:
        values = grid.detach()._data
        if values is None:
            # A fake grid (a compiled backward being traced): whether it holds NaNs is known
            # only when the graph runs, so the graph takes the NaN-aware path, computing the
            # mask with ops (without NaNs it gives plain sampling's values).
            found = grid.isnan() if padding_mode == "border" else ~grid.isfinite()
            return _sample_nan(input, grid, found, mode, padding_mode, align_corners)
        nan = np.isnan(values) if padding_mode == "border" else ~np.isfinite(values)
        if nan.any():
            return _sample_nan(input, grid, _make(nan), mode, padding_mode, align_corners)
    if mode == "bicubic":
        coords = [_unnormalize(grid[..., nd - 1 - i], size, align_corners, nd)
                  for i, size in enumerate(sizes)]
        starts = [ci.floor() for ci in coords]
        (wy, wx) = [_cubic_weights(ci - s) for ci, s in zip(coords, starts)]
        total = None
        for i in range(4):
            yi = _bounded(starts[0] + (i - 1), sizes[0], padding_mode, align_corners)
            for j in range(4):
                xi = _bounded(starts[1] + (j - 1), sizes[1], padding_mode, align_corners)
                term = _tap(flat, [yi, xi], sizes) * (wy[i] * wx[j]).unsqueeze(1)
                total = term if total is None else total + term
        return total
    coords = [_source_index(grid[..., nd - 1 - i], size, padding_mode, align_corners, nd,
                            (masks[nd - 1 - i], nd) if masks else None)
              for i, size in enumerate(sizes)]
    if mode == "nearest":
        # rounding has a zero derivative: the grid gets a zero gradient, as in PyTorch
        rounded = [ci.round() for ci in coords]
        zero = sum(rounded[1:], rounded[0]) * 0
        return _tap(flat, rounded, sizes) + zero.unsqueeze(1)
    lows = [ci.floor() for ci in coords]
    highs = [(ci - lo).unsqueeze(1) for ci, lo in zip(coords, lows)]  # weights of lo + 1
    total = None
    for corner in range(2 ** nd):  # each corner of the cell: lo or lo + 1 along each dim
        picks = [(corner >> (nd - 1 - d)) & 1 for d in range(nd)]
        weight = None
        for d, pick in enumerate(picks):
            w = highs[d] if pick else 1 - highs[d]
            weight = w if weight is None else weight * w
        term = _tap(flat, [lo + p for lo, p in zip(lows, picks)], sizes) * weight
        total = term if total is None else total + term
    return total


# ---------------------------------------------------------------- grid_sampler_2d / _3d


def _modes(interpolation_mode: int, padding_mode: int) -> tuple:
    return INTERPOLATION[interpolation_mode], PADDING[padding_mode]


def _sampler_kernel(input: np.ndarray, grid: np.ndarray, interpolation_mode: int,
                    padding_mode: int, align_corners: bool) -> np.ndarray:
    """The composite run on the arrays, recording nothing (and, under CPU autocast, in the
    dtype the op's policy cast to: autocast is set aside inside)."""
    mode, padding = _modes(interpolation_mode, padding_mode)
    x, g = _make(input), _make(grid)
    check(x, g, mode)
    with no_grad(), set_aside():
        out = sample(x, g, mode, padding, bool(align_corners))
    return out.detach()._data


def _sampler_meta(input, grid, interpolation_mode: int, padding_mode: int,
                  align_corners: bool) -> Spec:
    check(input, grid, INTERPOLATION[interpolation_mode])
    return Spec((input.shape[0], input.shape[1], *grid.shape[1:-1]), input.dtype)


def _sampler_derivative(grad, input, grid, interpolation_mode: int, padding_mode: int,
                        align_corners: bool) -> tuple:
    """The composite's gradients for input and grid: the composite run again on the saved
    arguments and differentiated. Recording (a create_graph backward), it runs on them as
    they are, so the gradients' graph reaches them (double backward); else on detached
    leaves over the same data."""
    from .. import autograd  # (`autograd.grad`: the package's lazy attribute, the engine)

    mode, padding = _modes(interpolation_mode, padding_mode)
    create = is_grad_enabled()
    wanted = [t.requires_grad for t in (input, grid)]
    if not create:
        input, grid = [t.detach()._requires_grad_unguarded(w)
                       for t, w in zip((input, grid), wanted)]
    targets = [t for t, w in zip((input, grid), wanted) if w]
    if not targets:
        return None, None, None, None, None
    with enable_grad(), set_aside():
        out = sample(input, grid, mode, padding, bool(align_corners))
        found = iter(autograd.grad(out, targets, grad, create_graph=create,
                                   allow_unused=True))
    gx, gg = [next(found) if w else None for w in wanted]
    return gx, gg, None, None, None


def _sampler_samples(nd: int):
    def samples(rng, dt):
        out = []
        sizes = (3, 4) if nd == 2 else (2, 3, 4)
        modes = (0, 1, 2) if nd == 2 else (0, 1)
        for m in modes:
            for p in (0, 1, 2):
                for ac in (False, True):
                    x = rand_array(rng, (2, 2) + sizes, dt)
                    g = rand_array(rng, (2, 3) + (2,) * (nd - 1) + (nd,), dt, (-1.2, 1.2))
                    out.append(Sample((x, g, m, p, ac), name=f"mode={m} pad={p} ac={ac}"))
        return out

    return samples


def _sampler_save(out, input, grid, interpolation_mode, padding_mode, align_corners):
    return input, grid, interpolation_mode, padding_mode, align_corners


def _sampler_onnx(b, inputs, args, kwargs, opset):
    """GridSample: 2-D from opset 16, volumes from 20 (which names the modes "linear" and
    "cubic"); before, bilinear and nearest sampling with zeros or border padding as gathers
    (`_sampler_onnx_gathers`)."""
    nd = args[0].dim() - 2
    mode, padding = INTERPOLATION[args[2]], PADDING[args[3]]
    if opset < (16 if nd == 2 else 20):
        if mode == "bicubic" or padding == "reflection":
            b.fail(f"with {mode} interpolation and {padding} padding before opset "
                   f"{16 if nd == 2 else 20}")
        return _sampler_onnx_gathers(b, inputs, args)
    if opset >= 20:
        mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    return b.emit("GridSample", [inputs[0], inputs[1]], mode=mode, padding_mode=padding,
                  align_corners=int(bool(args[4])))


def _sampler_onnx_gathers(b, inputs, args):
    """Bilinear or nearest sampling with zeros or border padding, in opset-13 operators:
    each tap's pixel gathered from the flattened input (GatherElements), times its weight
    and whether it lies inside."""
    x, grid = args[0], args[1]
    sizes, nd, c = list(x.shape[2:]), x.dim() - 2, x.shape[1]
    out_dims = list(grid.shape[1:-1])
    dt = np.dtype(x._data.dtype)
    rank = nd + 1  # (N, *out) per coordinate

    def num(v):
        return b.const(np.asarray(v, dt))

    def op(kind, *ins, dtype=dt, r=rank, **attrs):
        return b.emit(kind, list(ins), dtype=dtype, rank=r, **attrs)

    flat = op("Reshape", inputs[0], b.ints([0, c, -1]), r=3)
    coords = []
    for i, size in enumerate(sizes):
        ci = op("Gather", inputs[1], b.const(np.asarray(nd - 1 - i, np.int64)), axis=-1)
        shifted = op("Add", ci, num(1))
        if args[4]:
            ci = op("Mul", shifted, num((size - 1) / 2))
        elif nd == 2:
            ci = op("Sub", op("Mul", shifted, num(size / 2)), num(0.5))
        else:
            ci = op("Div", op("Sub", op("Mul", shifted, num(size)), num(1)), num(2))
        if PADDING[args[3]] == "border":
            ci = op("Clip", ci, num(0), num(size - 1))
        coords.append(ci)
    if INTERPOLATION[args[2]] == "nearest":
        taps = [([op("Round", ci) for ci in coords], None)]
    else:
        lows = [op("Floor", ci) for ci in coords]
        highs = [op("Sub", ci, lo) for ci, lo in zip(coords, lows)]
        taps = []
        for corner in range(2 ** nd):
            picks = [(corner >> (nd - 1 - d)) & 1 for d in range(nd)]
            weight = None
            for d, pick in enumerate(picks):
                w = highs[d] if pick else op("Sub", num(1), highs[d])
                weight = w if weight is None else op("Mul", weight, w)
            taps.append(([op("Add", lo, num(p)) for lo, p in zip(lows, picks)], weight))
    total = None
    for index, weight in taps:
        inside, flat_index = None, None
        for ci, size in zip(index, sizes):
            ok = op("And", op("GreaterOrEqual", ci, num(0), dtype=np.bool_),
                    op("LessOrEqual", ci, num(size - 1), dtype=np.bool_), dtype=np.bool_)
            inside = ok if inside is None else op("And", inside, ok, dtype=np.bool_)
            ci = op("Clip", ci, num(0), num(size - 1))
            flat_index = ci if flat_index is None else op("Add", op("Mul", flat_index,
                                                                     num(size)), ci)
        keep = b.cast(inside, dt)
        weight = keep if weight is None else op("Mul", weight, keep)
        where = b.cast(op("Reshape", flat_index, b.ints([0, 1, -1]), r=3), np.int64)
        where = op("Expand", where, b.ints([1, c, 1]), dtype=np.int64, r=3)
        values = op("Reshape", op("GatherElements", flat, where, r=3, axis=2),
                    b.ints([0, c, *out_dims]), r=rank + 1)
        term = op("Mul", values, op("Unsqueeze", weight, b.ints([1]), r=rank + 1),
                  r=rank + 1)
        total = term if total is None else op("Add", total, term, r=rank + 1)
    return total


_SAVED = ("input", "grid", "interpolation_mode", "padding_mode", "align_corners")

grid_sampler_2d = register(
    "grid_sampler_2d", kernel=_sampler_kernel, meta=_sampler_meta,
    derivative=_sampler_derivative, save=_sampler_save, node="GridSampler2DBackward0",
    nondiff_args=(2, 3, 4), samples=_sampler_samples(2), saved_names=_SAVED,
    autocast="fp32", public="grid_sampler_2d", onnx=_sampler_onnx)
grid_sampler_3d = register(
    "grid_sampler_3d", kernel=_sampler_kernel, meta=_sampler_meta,
    derivative=_sampler_derivative, save=_sampler_save, node="GridSampler3DBackward0",
    nondiff_args=(2, 3, 4), samples=_sampler_samples(3), saved_names=_SAVED,
    autocast="fp32", public="grid_sampler_3d", onnx=_sampler_onnx)


# ---------------------------------------------------------------- affine_grid_generator


def _line(steps: int, dt: np.dtype) -> np.ndarray:
    """linspace(-1, 1, steps) in `dt`, rounded as PyTorch's CPU kernel rounds it: the first
    half -1 + step * i, the rest 1 - step * (steps - 1 - i), each product and sum one fused
    operation in float32 and float64 (rounded separately in the half types)."""
    index = np.arange(steps)
    first = index < steps // 2
    if steps == 1:
        return np.full(1, -1, dt)
    if dt.itemsize < 4:
        step = dt.type(2) / np.array(steps - 1).astype(dt)
        return np.where(first, dt.type(-1) + step * index.astype(dt),
                        dt.type(1) - step * (steps - 1 - index).astype(dt)).astype(dt)
    step = dt.type(2) / dt.type(steps - 1)
    k = np.where(first, index, steps - 1 - index).astype(np.float64)
    sign = np.where(first, 1.0, -1.0)
    if dt == np.float32:  # a float32 step times an index is exact in a double: one rounding
        return (sign * (float(step) * k) - sign).astype(np.float32)
    return sign * _fma64(np.full(steps, float(step)), k, -1.0) * 1.0


def _affine_base(spatial: list, align_corners: bool, dt: np.dtype) -> np.ndarray:
    """(1, points, nd + 1): each output point's normalised coordinates (x first) and a 1."""
    nd = len(spatial)
    columns = []
    for d in reversed(range(nd)):  # x, y (, z): the last spatial dim first
        steps = spatial[d]
        if steps > 1:
            line = _line(steps, dt)
            if not align_corners:
                # two roundings, as PyTorch's (one with the factor rounded first moves a point
                # by an ulp, and grid_sample's gradient at a pixel centre with it)
                wide = np.dtype(np.float32) if dt.itemsize < 4 else dt
                line = (line.astype(wide) * wide.type(steps - 1)).astype(dt)
                line = (line.astype(wide) / wide.type(steps)).astype(dt)
        else:
            line = np.zeros(1, dt)
        shape = [1] * nd
        shape[d] = steps
        columns.append(np.broadcast_to(line.reshape(shape), spatial))
    columns.append(np.ones(spatial, dt))
    return np.stack(columns, -1).reshape(1, math.prod(spatial), nd + 1)


def _affine_kernel(theta: np.ndarray, size, align_corners: bool) -> np.ndarray:
    n, spatial = size[0], list(size[2:])
    nd = len(spatial)
    base = _make(_affine_base(spatial, bool(align_corners), theta.dtype))
    with no_grad(), set_aside():
        grid = _call(REGISTRY["bmm"], base.expand(n, base.shape[1], nd + 1),
                     _make(theta).transpose(1, 2))
    return grid.view(n, *spatial, nd).detach()._data


def _affine_meta(theta, size, align_corners: bool) -> Spec:
    nd = len(size) - 2
    if theta.dim() != 3 or tuple(theta.shape[-2:]) != (nd, nd + 1) or theta.shape[0] != size[0]:
        raise RuntimeError(f"affine_grid_generator: expected theta of shape ({size[0]}, {nd}, "
                           f"{nd + 1}), got {tuple(theta.shape)}")
    return Spec((size[0], *size[2:], nd), theta.dtype)


def _affine_derivative(grad, size, align_corners: bool, dtype) -> tuple:
    """The base grid's transpose times the gradient (bmm's gradient of its second factor),
    transposed back: linear in the gradient, so differentiable again."""
    n, spatial = size[0], list(size[2:])
    nd = len(spatial)
    # (a graph constant while AOT autograd traces the backward; a meta tensor for a meta
    # gradient)
    base = _const(_affine_base(spatial, bool(align_corners), _dtype_np(dtype)), like=grad)
    points = base.shape[1]
    flat = grad.reshape(n, points, nd)
    return (_call(REGISTRY["bmm"], base.expand(n, points, nd + 1).transpose(1, 2),
                  flat).transpose(1, 2), None, None)


def _dtype_np(dtype) -> np.dtype:
    return np.dtype(dtype.np) if isinstance(dtype, _dtype.dtype) else np.dtype(dtype)


def _affine_samples(rng, dt):
    out = []
    for size in ([2, 1, 3, 4], [1, 2, 1, 5], [2, 1, 2, 3, 4]):
        nd = len(size) - 2
        for ac in (False, True):
            out.append(Sample((rand_array(rng, (size[0], nd, nd + 1), dt), size, ac),
                              name=f"size={size} ac={ac}"))
    return out


def _affine_onnx(b, inputs, args, kwargs, opset):
    """The base grid (a constant of the output size) times the transposed maps, reshaped:
    the kernel's product, at every opset (AffineGrid, from opset 20, rounds the base grid's
    points its own way)."""
    theta, size, align_corners = args
    spatial, nd = list(size[2:]), len(size) - 2
    dt = np.dtype(theta._data.dtype)
    base = b.const(_affine_base(spatial, bool(align_corners), dt))
    maps = b.emit("Transpose", [inputs[0]], dtype=dt, rank=3, perm=[0, 2, 1])
    grid = b.emit("MatMul", [base, maps], dtype=dt, rank=3)
    return b.emit("Reshape", [grid, b.ints([-1, *spatial, nd])])


affine_grid_generator = register(
    "affine_grid_generator", kernel=_affine_kernel, meta=_affine_meta,
    derivative=_affine_derivative,
    save=lambda out, theta, size, align_corners: (tuple(size), bool(align_corners),
                                                   theta.dtype),
    node="AffineGridGeneratorBackward0", nondiff_args=(1, 2), samples=_affine_samples,
    saved_names=("size", "align_corners", ""), public="affine_grid_generator",
    onnx=_affine_onnx)


# PyTorch's CPU kernels are for floating inputs only.
refuse_dtypes(grid_sampler_2d, "grid_sampler_2d_cpu_kernel_impl", "biuc")
