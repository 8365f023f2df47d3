"""Statistics: `nansum`, `nanmedian` (all and per dim), `aminmax`, `logcumsumexp`,
`histc`, the distances (`_cdist_forward`, `_pdist_forward`, `dist`) and `renorm`.

Derivatives are written in fusegrad ops; cdist's and pdist's use the p-norm's derivative
d|x|_p / dx = sign(x) |x|^(p-1) / |x|_p^(p-1) (with its limits at p = 1, 2 and inf) as their
kernels do, `dist` and `renorm` PyTorch's `norm_backward` (`norms.py`).

Half types: norms sum in float32 and round once, as PyTorch's kernels do (in the half type
itself the sums stall: in bfloat16, 256 + 1 == 256); PyTorch has no half cdist or pdist.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype
from .._dispatch import call
from . import _onnx as _ox
from . import _tie_order
from ._util import (
    F32,
    HALF,
    Spec,
    c_contiguous,
    cj,
    dtype_of,
    not_implemented_for,
    rand_array,
    refuse_dtypes,
    wrap_dim,
)
from .norms import norm_backward, vector_norm
from .reductions import (
    _reduce_shape,
    _sum_kernel,
    _sum_meta,
    expand_reduced,
    row_major,
    select_backward_dim,
)
from .registry import Sample, inplace_variant, register
from .sorting import _median_all_meta, empty_median, no_bool


def _with_nans(rng, shape, dt, domain=None):
    a = rand_array(rng, shape, dt, domain)
    if a.size > 2:
        a.flat[rng.choice(a.size, size=max(1, a.size // 5), replace=False)] = np.nan
    return a


# ---------------------------------------------------------------- nansum


def _nansum_kernel(a, dims=None, keepdim=False, dtype=None):
    if a.dtype.kind == "c":
        raise RuntimeError("nansum on CPU does not support complex inputs")
    if a.dtype.kind == "f" or a.dtype in _dtype.HALF_NP:
        a = np.where(np.isnan(a), np.zeros((), a.dtype), a)
    return _sum_kernel(a, dims, keepdim, dtype)


def _nansum_samples(rng, dt):
    out = [Sample((_with_nans(rng, s, dt), d, k), name=f"{s} {d} {k}")
           for s, d, k in (((3, 4), None, False), ((3, 4), [1], False), ((3, 4), [0], True),
                           ((2, 3, 4), [0, 2], False), ((), None, False), ((0, 3), [0], False))]
    return out


nansum = register(
    "nansum", kernel=_nansum_kernel, meta=_sum_meta, node="NansumBackward0",
    derivative=lambda g, a, dims, keepdim: (
        # (multiplied by the mask, as PyTorch's formula: an infinite or NaN gradient gives
        # NaN at NaN inputs, as in an all-NaN slice of nanmean)
        expand_reduced(g, tuple(a.shape), dims, keepdim) * a.isnan().logical_not(),
        None, None, None),
    save=lambda out, a, dims=None, keepdim=False, dtype=None: (a, dims, keepdim),
    saved_names=("self", "dim", "keepdim"), samples=_nansum_samples)

# ---------------------------------------------------------------- nanmedian


def _nanmedian_all_kernel(a):
    flat = a.reshape(-1)
    if not flat.size:
        return empty_median(a.dtype)
    no_bool("median_cpu", a.dtype)
    valid = np.sort(flat[~np.isnan(flat)])
    if not valid.size:
        return np.array(np.nan, a.dtype)
    return np.array(valid[(valid.size - 1) // 2], a.dtype)


def _nanmedian_dim_kernel(a, dim, keepdim=False):
    if a.ndim == 0:
        wrap_dim(dim, 0)
        no_bool("median_out", a.dtype)
        return a.copy(), np.zeros((), np.int64)
    d = wrap_dim(dim, a.ndim)
    if a.shape[d] == 0:  # (PyTorch's message says median)
        raise IndexError(f"median(): Expected reduction dim {d} to have non-zero size.")
    no_bool("median_out", a.dtype)
    # NaNs sort last; the median of each row is among its non-NaN values.
    order = np.argsort(a, axis=d, kind="stable")
    n_valid = (~np.isnan(a)).sum(axis=d, keepdims=True)
    pos = np.maximum((n_valid - 1) // 2, 0)
    idx = np.take_along_axis(order, pos, d)
    # A row of only NaNs: PyTorch's selection treats its NaNs as equivalent and leaves
    # whichever its partitioning put first (index 2 of 4), not the stable order's 0.
    all_nan = n_valid == 0
    if all_nan.any():
        idx = np.where(all_nan, _tie_order.first_of_equals(a.shape[d]), idx)
    vals = np.take_along_axis(a, idx, d)
    if not keepdim:
        vals, idx = np.squeeze(vals, d), np.squeeze(idx, d)
    # New row-major results, as PyTorch's (NumPy's take follows the input's layout; a 0-d
    # result stays 0-d, which `ascontiguousarray` would make 1-d).
    return np.asarray(vals, order="C"), np.asarray(idx, np.int64, order="C")


def _nanmedian_dim_meta(a, dim, keepdim=False):
    d = wrap_dim(dim, len(a.shape))
    if len(a.shape) and a.shape[d] == 0:
        raise IndexError(f"median(): Expected reduction dim {d} to have non-zero size.")
    no_bool("median_out", a.dtype)
    shape = _reduce_shape(tuple(a.shape), (d,) if len(a.shape) else (), keepdim)
    return [Spec(shape, a.dtype), Spec(shape, _dtype.int64)]


def _evenly_nan(g, a, value):
    """Shared among the elements equal to the result (all NaNs when it is NaN)."""
    mask = (a == value) | (a.isnan() & value.isnan())
    return g * mask / mask.sum()


nanmedian = register(
    "nanmedian", kernel=_nanmedian_all_kernel, meta=_median_all_meta,
    node="NanmedianBackward0", derivative=lambda g, a, out: (_evenly_nan(g, a, out),),
    save=lambda out, a: (a, out), saved_names=("self", "result"),
    samples=lambda rng, dt: [Sample((_with_nans(rng, s, dt),), name=str(s))
                             for s in ((3, 4), (5,), ())])
nanmedian_dim = register(
    "nanmedian.dim", kernel=_nanmedian_dim_kernel, meta=_nanmedian_dim_meta,
    node="NanmedianBackward1", nondiff_outputs=(1,),
    derivative=lambda grads, shape, dim, idx, keepdim: (
        select_backward_dim(grads[0], shape, wrap_dim(dim, max(len(shape), 1)), idx, keepdim),
        None, None),
    save=lambda out, a, dim, keepdim=False: (tuple(a.shape), dim, out[1], keepdim),
    saved_names=("self_sym_sizes", "dim", "indices", "keepdim"), public="nanmedian",
    samples=lambda rng, dt: [Sample((_with_nans(rng, s, dt), d, k), name=f"{s} {d} {k}")
                             for s, d, k in (((3, 5), 1, False), ((4, 3), 0, True),
                                             ((), 0, False))])

# ---------------------------------------------------------------- aminmax


def _aminmax_kernel(a, dim=None, keepdim=False):
    if dim is None:
        if not a.size:
            raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as "
                               "the operation has no identity.")
        lo, hi = np.min(a), np.max(a)
        if keepdim:
            return np.full((1,) * a.ndim, lo, a.dtype), np.full((1,) * a.ndim, hi, a.dtype)
        return np.array(lo, a.dtype), np.array(hi, a.dtype)
    d = wrap_dim(dim, a.ndim)
    if a.ndim and a.shape[d] == 0:
        raise IndexError(f"aminmax: Expected reduction dim {d} to have non-zero size.")
    axis = d if a.ndim else None
    return (row_major(np.min(a, axis=axis, keepdims=keepdim and a.ndim > 0), a),
            row_major(np.max(a, axis=axis, keepdims=keepdim and a.ndim > 0), a))


def _aminmax_meta(a, dim=None, keepdim=False):
    n = len(a.shape)
    dims = tuple(range(n)) if dim is None else ((wrap_dim(dim, n),) if n else ())
    shape = _reduce_shape(tuple(a.shape), dims, keepdim)
    return [Spec(shape, a.dtype), Spec(shape, a.dtype)]


def _aminmax_derivative(grads, a, lo, hi, dim, keepdim):
    out = None
    dims = None if dim is None else [dim]
    for g, v in zip(grads, (lo, hi)):
        if g is None:
            continue
        if dim is not None and not keepdim and a.dim():
            g, v = g.unsqueeze(dim), v.unsqueeze(dim)
        mask = a == v
        count = mask.sum(dims, keepdim=True) if dims else mask.sum()
        term = g * mask / count
        out = term if out is None else out + term
    return (out, None, None)


aminmax = register(
    "aminmax", kernel=_aminmax_kernel, meta=_aminmax_meta, node="AminmaxBackward0",
    derivative=_aminmax_derivative,
    save=lambda out, a, dim=None, keepdim=False: (a, out[0], out[1], dim, keepdim),
    saved_names=("self", "min", "max", "dim", "keepdim"),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), d, k), name=f"{s} {d} {k}")
                             for s, d, k in (((3, 4), None, False), ((3, 4), 1, False),
                                             ((3, 4), 0, True), ((), None, False),
                                             ((2, 3), None, True))], onnx=_ox.aminmax)

# ---------------------------------------------------------------- logcumsumexp


def _logcumsumexp_check(a, dim) -> int:
    d = wrap_dim(dim, len(a.shape))
    dt = a.dtype if hasattr(a.dtype, "category") else _dtype.FROM_NP[a.dtype]
    if dt.category < _dtype.FLOAT:  # PyTorch has no integer (or bool) kernel
        raise not_implemented_for("logcumsumexp_out_cpu", dt)
    return d


def _logcumsumexp_kernel(a, dim):
    d = _logcumsumexp_check(a, dim)
    if a.ndim == 0:
        return a + 0  # -0.0 is 0.0, as log(exp(-inf) + exp(x)) makes it
    dt = a.dtype
    if dt.kind == "c":
        # A running complex log-add-exp (logaddexp's complex formula), in complex128 for
        # complex64 as PyTorch's kernel accumulates it
        from .math_special import _logaddexp_complex

        x = np.moveaxis(a.astype(np.complex128), d, 0)
        out = np.empty_like(x)
        out[0] = x[0]
        for i in range(1, x.shape[0]):
            out[i] = _logaddexp_complex(out[i - 1], x[i])
        return np.moveaxis(out, 0, d).astype(dt)
    # PyTorch's CPU kernel accumulates half types in float32 and float32 in float64.
    work = F32 if dt in HALF else np.dtype(np.float64) if dt == np.float32 else dt
    out = np.logaddexp.accumulate(a.astype(work), axis=d)
    # PyTorch starts from -inf, so a leading -0.0 comes out +0.0 (NumPy copies it); adding
    # 0.0 changes nothing else.
    return np.add(out, 0.0, out=out).astype(dt)


def _logcumsumexp_derivative(g, a, out, dim):
    if a.dim() == 0:
        return (g, None)
    # d out_j / d a_i = exp(a_i - out_j) for i <= j: a reversed cumulative sum.
    # Conjugated for complex values (the conjugate Wirtinger rule).
    w = (g * cj((-out).exp())).flip([dim]).cumsum(dim).flip([dim])
    return (w * cj(a.exp()), None)


logcumsumexp = register(
    "logcumsumexp", kernel=c_contiguous(_logcumsumexp_kernel),
    meta=lambda a, dim: (_logcumsumexp_check(a, dim), Spec(tuple(a.shape), a.dtype))[1],
    node="LogcumsumexpBackward0", derivative=_logcumsumexp_derivative,
    save=lambda out, a, dim: (a, out, dim), saved_names=("self", "result", "dim"),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), d)) for s, d in (
        ((3, 4), 1), ((3, 4), 0), ((5,), -1), ((), 0))], result_order="contiguous")

# ---------------------------------------------------------------- histc


def _histc_kernel(a, bins=100, lo=0, hi=0):
    if a.dtype.kind not in "fV":  # floating dtypes only (bfloat16's NumPy kind is "V")
        raise not_implemented_for("histogram_cpu", a.dtype)
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for "
                           "dimension 0")
    lo, hi = float(lo), float(hi)
    reduced = lo == hi and a.size > 1
    if lo == hi and a.size:
        # (PyTorch's float32/float64 min starts from the dtype's largest finite value and
        # its max from the lowest: an infinite end alone reads as those, `[-inf, -3.40282e+38]`)
        lo, hi = float(a.min()), float(a.max())
        if a.dtype.itemsize >= 4 and not math.isnan(lo) and not math.isnan(hi):
            big = float(np.finfo(a.dtype).max)
            lo, hi = min(lo, big), max(hi, -big)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        # (PyTorch's vectorised min and max of several elements give a NaN its sign bit)
        nan = "-nan" if reduced else "nan"
        lo_text, hi_text = (nan if math.isnan(v) else f"{v:g}" for v in (lo, hi))
        raise RuntimeError(f"torch.histc: range of [{lo_text}, {hi_text}] is not finite")
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if lo > hi:
        raise RuntimeError("torch.histc: max must be larger than min")
    counts, _ = np.histogram(a, bins=bins, range=(lo, hi))
    return counts.astype(a.dtype)


histc = register(
    "histc", kernel=_histc_kernel, meta=lambda a, bins=100, lo=0, hi=0: Spec((bins,), a.dtype),
    differentiable=False,  # PyTorch gives histc's result no grad_fn at all
    samples=lambda rng, dt: [Sample((rand_array(rng, (20,), dt), 5, -1, 1)),
                             Sample((rand_array(rng, (3, 4), dt), 7)),
                             Sample((rand_array(rng, (6,), dt), 4, 0, 3))], onnx=_ox.histc)

def _histogram_kernel(a, bins=100, range=None, weight=None, density=False):  # noqa: A002
    if a.dtype.kind != "f":
        raise RuntimeError(f"torch.histogram: input tensor and bins tensors should have the "
                           f"same dtype, but got input {_dtype.FROM_NP[a.dtype].name} and "
                           f"bins {_dtype.FROM_NP[a.dtype].name}")
    data = a.reshape(-1).astype(np.float64)
    rng = None
    if range is not None:
        rng = (float(range[0]), float(range[1]))
    elif data.size:
        rng = (float(data.min()), float(data.max()))
    wts = None if weight is None else np.asarray(weight).reshape(-1).astype(np.float64)
    hist, edges = np.histogram(data, bins=bins, range=rng, weights=wts, density=density)
    return hist.astype(a.dtype), edges.astype(a.dtype)


def _histogram_derivative(g, *rest):
    raise RuntimeError("derivative for aten::histogram is not implemented")


_histogram_derivative.not_implemented = True

histogram = register(
    "histogram.bin_ct", kernel=_histogram_kernel,
    meta=lambda a, bins=100, range=None, weight=None, density=False: [
        Spec((bins,), a.dtype), Spec((bins + 1,), a.dtype)],
    node="NotImplemented", derivative=_histogram_derivative, gradcheck=False,
    save=lambda out, *args: (), public="histogram", optional_tensor_args=(3,),
    samples=lambda rng, dt: [
        Sample((rand_array(rng, (20,), dt), 5)),
        Sample((rand_array(rng, (3, 4), dt), 4), {}, "2-d"),
        Sample((rand_array(rng, (10,), dt), 3, None, rand_array(rng, (10,), dt, (0, 1)),
                True), name="weights density")])


# ---------------------------------------------------------------- distances


def _pnorm_grad(diff, dist, p):
    """d dist / d diff for dist = ||diff||_p over the last dim (dist keeps that dim), as
    PyTorch's cdist and pdist backward kernels take it (ties of the inf-norm each get the
    whole gradient there, unlike `norm_backward`'s)."""
    if p == 0:
        return diff * 0
    safe = dist.masked_fill(dist == 0, 1.0)
    if p == 1:
        return diff.sign()
    if p == 2:
        return (diff / safe).masked_fill(dist == 0, 0.0)
    if math.isinf(p):
        return (diff.sign() * (diff.abs() == dist)).masked_fill(dist == 0, 0.0)
    term = diff.sign() * diff.abs().pow(p - 1) / safe.pow(p - 1)
    if p < 1:  # |0|^(p-1) is infinite there (0 * inf: NaN); PyTorch's kernels give 0
        term = term.masked_fill(diff == 0, 0.0)
    return term.masked_fill(dist == 0, 0.0)


def _pnorm_np(diff, p, axis=-1):
    """The p-norm of `diff` over `axis`, in `diff`'s dtype. Half types are summed in float32
    and rounded once, as PyTorch's norm kernels do: summed in bfloat16, 4096 ones make 256."""
    dt = diff.dtype
    ad = np.abs(diff.astype(F32) if dt in HALF else diff)
    if p == 0:
        out = (ad != 0).sum(axis=axis)
    elif math.isinf(p):
        out = ad.max(axis=axis, initial=0)
    elif p == 1:
        out = ad.sum(axis=axis)
    elif p == 2:
        out = np.sqrt((ad * ad).sum(axis=axis))
    else:
        out = (ad ** p).sum(axis=axis) ** (1.0 / p)
    return np.asarray(out).astype(dt, copy=False)


def _cdist_check(x1, x2, p):
    s1, s2 = tuple(x1.shape), tuple(x2.shape)
    if len(s1) < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {len(s1)}D")
    if len(s2) < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X2 got: {len(s2)}D")
    if s1[-1] != s2[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {s1[-1]} "
                           f"X2: {s2[-1]}")
    for name, x in (("X1", x1), ("X2", x2)):
        dt = dtype_of(x)
        if not dt.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: "
                               f"{dt.legacy}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    from ._util import broadcast_shapes

    return broadcast_shapes(s1[:-2], s2[:-2]) + (s1[-2], s2[-2])


def _no_half_kernel(name: str, a) -> None:
    """PyTorch's CPU cdist and pdist kernels exist for float32 and float64 only."""
    if a.dtype in HALF:
        raise not_implemented_for(name, a.dtype)


def _cdist_kernel(x1, x2, p, compute_mode=None):
    shape = _cdist_check(x1, x2, p)
    if all(shape) and x1.shape[-1]:  # empty inputs never reach PyTorch's kernel
        _no_half_kernel("cdist", x1)
        if x1.dtype != x2.dtype:
            raise RuntimeError(f"expected scalar type {dtype_of(x1).legacy} but found "
                               f"{dtype_of(x2).legacy}")
    diff = x1[..., :, None, :] - x2[..., None, :, :]
    return _pnorm_np(diff, p).astype(x1.dtype, copy=False)


def _cdist_derivative(g, x1, x2, out, p):
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    w = g.unsqueeze(-1) * _pnorm_grad(diff, out.unsqueeze(-1), p)
    return (w.sum(-2), -w.sum(-3), None, None)


cdist = register(
    "_cdist_forward", kernel=c_contiguous(_cdist_kernel),
    meta=lambda x1, x2, p, compute_mode=None: Spec(_cdist_check(x1, x2, p), x1.dtype),
    node="CdistBackward0", derivative=_cdist_derivative, forward_ad="unsupported",
    save=lambda out, x1, x2, p, compute_mode=None: (x1, x2, out, p),
    saved_names=("x1", "x2", "result", "p"), public="cdist", onnx=_ox.cdist,
    samples=lambda rng, dt: [Sample((rand_array(rng, a, dt), rand_array(rng, b, dt), p, None),
                                    name=f"{a} {b} p={p}")
                             for a, b, p in (((3, 4), (2, 4), 2.0), ((3, 4), (5, 4), 1.0),
                                             ((2, 3, 4), (2, 2, 4), 3.0),
                                             ((3, 2), (4, 2), math.inf))])


def _euclidean_kernel(x1, x2):
    # PyTorch's matmul formulation (|a|² - 2a·b + |b|²), so values match its rounding.
    n1 = (x1 * x1).sum(-1, keepdims=True)
    n2 = (x2 * x2).sum(-1, keepdims=True)
    a = np.concatenate([x1 * -2, n1, np.ones_like(n1)], -1)
    b = np.concatenate([x2, np.ones_like(n2), n2], -1)
    return np.sqrt(np.maximum(a @ np.swapaxes(b, -1, -2), 0)).astype(x1.dtype, copy=False)


def _euclidean_derivative(g, x1, x2, out):
    ratio = (g / out).masked_fill(out == 0, 0.0)
    return (x1 * ratio.sum(-1, keepdim=True) - ratio.matmul(x2),
            x2 * ratio.sum(-2).unsqueeze(-1) - ratio.mT.matmul(x1))


euclidean_dist = register(
    "_euclidean_dist", kernel=_euclidean_kernel,
    meta=lambda x1, x2: Spec(tuple(x1.shape[:-1]) + (x2.shape[-2],), x1.dtype),
    node="EuclideanDistBackward0", derivative=_euclidean_derivative, forward_ad="unsupported",
    save=lambda out, x1, x2: (x1, x2, out), saved_names=("x1", "x2", "result"),
    samples=lambda rng, dt: [Sample((rand_array(rng, a, dt), rand_array(rng, b, dt)),
                                    name=f"{a} {b}")
                             for a, b in (((5, 3), (4, 3)), ((2, 3, 2), (2, 4, 2)))],
    tolerance={"float32": 1e-3})


def _pdist_pairs(n):
    i, j = np.triu_indices(n, 1)
    return i.astype(np.int64), j.astype(np.int64)


def _pdist_kernel(a, p=2.0):
    if a.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {a.ndim}D")
    if not a.flags.c_contiguous:  # (`pdist` passes its input made contiguous)
        raise RuntimeError("_pdist_forward requires contiguous input")
    if a.shape[0] > 1 and a.shape[1]:  # as in PyTorch: no kernel call for empty results
        _no_half_kernel("pdist", a)
    i, j = _pdist_pairs(a.shape[0])
    return _pnorm_np(a[i] - a[j], p).astype(a.dtype, copy=False)


def _pdist_meta(a, p=2.0):
    if len(a.shape) != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {len(a.shape)}D")
    n = a.shape[0]
    return Spec((n * (n - 1) // 2,), a.dtype)


def _pdist_derivative(g, a, out, p):
    from .._creation import triu_indices

    # (the pairs by a factory, which AOT autograd records, where NumPy data is unknown to it)
    ti, tj = triu_indices(a.shape[0], a.shape[0], 1, device=a.device).unbind(0)
    diff = a.index_select(0, ti) - a.index_select(0, tj)
    w = g.unsqueeze(-1) * _pnorm_grad(diff, out.unsqueeze(-1), p)
    zero = a.new_zeros(tuple(a.shape))
    return (zero.index_add(0, ti, w).index_add(0, tj, -w), None)


pdist = register(
    "_pdist_forward", kernel=_pdist_kernel, meta=_pdist_meta, node="PdistBackward0",
    derivative=_pdist_derivative, save=lambda out, a, p=2.0: (a, out, p),
    saved_names=("self", "result", "p"), public="pdist",
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), p), name=f"{s} p={p}")
                             for s, p in (((4, 3), 2.0), ((5, 2), 1.0), ((3, 4), 3.0),
                                          ((1, 3), 2.0))], onnx=_ox.pdist)


def _dist_kernel(a, b, p=2):
    from ._util import binary_kernel

    diff = binary_kernel(np.subtract)(a, b)
    return np.asarray(_pnorm_np(diff.reshape(-1), float(p), axis=0), diff.dtype)


def _dist_meta(a, b, p=2):
    from ._util import binary_meta

    return Spec((), binary_meta()(a, b).dtype)


def _dist_derivative(g, a, b, out, p):
    # PyTorch's: norm_backward of a - b (None for p = 0, where PyTorch's is undefined).
    d = norm_backward(g, a - b, p, out)
    if d is None:
        return (None, None, None)
    return (d, -d, None)


dist = register(
    "dist", kernel=_dist_kernel, meta=_dist_meta, node="DistBackward0",
    derivative=_dist_derivative, save=lambda out, a, b, p=2: (a, b, out, p),
    saved_names=("self", "other", "result", "p"), tensor_args=(0, 1),
    samples=lambda rng, dt: [Sample((rand_array(rng, a, dt), rand_array(rng, b, dt), p),
                                    name=f"{a} {b} {p}")
                             for a, b, p in (((3, 4), (3, 4), 2), ((3, 4), (4,), 1),
                                             ((5,), (), 3.5), ((2, 3), (2, 3), math.inf))],
    tensors_only=("input", "other"))

# ---------------------------------------------------------------- renorm


def _renorm_check(shape, p, dim, maxnorm):
    # PyTorch's order: p, maxnorm, the rank, and only then the dim.
    if not p > 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if not maxnorm >= 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {float(maxnorm):g}")
    if len(shape) < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {len(shape)} "
                           "dimensions")
    return wrap_dim(dim, len(shape))


def _renorm_kernel(a, p, dim, maxnorm):
    d = _renorm_check(a.shape, p, dim, maxnorm)
    if not a.size:  # (nothing to scale: a copy)
        return a.copy()
    moved = np.moveaxis(a, d, 0).reshape(a.shape[d] if a.ndim else 1, -1)
    # PyTorch takes a half type's norms in float32 and computes the scale from them there,
    # rounding only the scale to the half type.
    work = F32 if a.dtype in HALF else a.dtype
    norms = _pnorm_np(moved.astype(work, copy=False), float(p), axis=1)
    scale = np.where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0).astype(a.dtype)
    shape = [1] * a.ndim
    if a.ndim:
        shape[d] = -1
    return (a * scale.reshape(shape)).astype(a.dtype, copy=False)


def _renorm_derivative(g, a, p, dim, maxnorm):
    # PyTorch's renorm_backward: the norms and the sums in the CPU accumulation type (float32
    # for half types, float64 for float32, complex128 for complex64), the result rounded back
    # to the gradient's dtype.
    d = wrap_dim(dim, a.dim())
    dims = [i for i in range(a.dim()) if i != d]
    if a.is_complex():
        acc, real_acc = _dtype.complex128, _dtype.float64
        grad_output = (a.conj() * g).real  # the norm is real: so is its incoming gradient
    else:
        acc = real_acc = _dtype.float32 if a.dtype in (_dtype.float16, _dtype.bfloat16) \
            else _dtype.float64
        grad_output = a * g
    norm = call(vector_norm, a, p, dims, True, acc)
    grad_output = grad_output.sum(dims, keepdim=True, dtype=real_acc)
    nb = norm_backward(grad_output, a, p, norm, dims, True)
    invnorm = (norm + 1e-7).reciprocal()
    grad_norm = (maxnorm * invnorm * (g - invnorm * nb)).to(g.dtype)
    return (grad_norm.where(norm > maxnorm, g), None, None, None)


renorm = register(
    "renorm", kernel=c_contiguous(_renorm_kernel),
    meta=lambda a, p, dim, maxnorm: (_renorm_check(tuple(a.shape), p, dim, maxnorm),
                                     Spec(tuple(a.shape), a.dtype))[1],
    node="RenormBackward0", derivative=_renorm_derivative,
    save=lambda out, a, p, dim, maxnorm: (a, p, dim, maxnorm),
    saved_names=("self", "p", "dim", "maxnorm"),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), p, d, m), name=f"{s} {p} {d} {m}")
                             for s, p, d, m in (((3, 4), 2, 0, 1.0), ((3, 4), 1, 1, 2.0),
                                                ((2, 3, 4), 3, -1, 1.5),
                                                ((4, 2), 2, 0, 100.0))])

renorm_ = inplace_variant(renorm, "renorm_", saves_self=True)


# pdist and renorm refuse what PyTorch's kernels refuse before computing.
refuse_dtypes(pdist, "pdist", "biuc", message=lambda t: "pdist only supports floating-point dtypes")
for _op in (renorm, renorm_):
    refuse_dtypes(_op, "renorm", "biu", message=lambda t: (
        f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got {t}"))
