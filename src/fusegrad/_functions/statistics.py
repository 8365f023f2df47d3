"""Statistics: NaN-aware reductions (`nansum`, `nanmean`, `nanmedian`), `quantile` and
`nanquantile` (all five interpolation modes), `cov`, `corrcoef`, `histc`, `histogram`,
`aminmax`, `logcumsumexp`, distances (`cdist`, `pdist`, `dist`), `renorm`, `trapezoid`
(`trapz`) and `cumulative_trapezoid`.

`quantile`, `cov`, `corrcoef` and the trapezoid rules are composites written as PyTorch's
are, so they record the same nodes (`quantile` sorts, gathers and lerps in place).
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import _dtype, return_types
from .._autocast import composite
from .._creation import tensor
from .._dispatch import call
from .._tensor import Tensor
from .._torch_function import warning_stacklevel as _warning_stacklevel
from .._type_names import python_type_name
from ..ops import scalar as SCL
from ..ops import statistics as ST
from ..ops._util import wrap_dim
from . import _args
from .linear_algebra import mm
from .reduction import _MEDIAN, _plain_dim, dtype_argument
from .shape import narrow, select, view


def _dims(dim):
    """The dims of a reduction as a list; None (every dim) for None or an empty list."""
    dims = _args.reduced_dims(dim)
    return None if dims is None else list(dims)


def _numpy(name, dim, keepdim, axis, keepdims):
    """(dim, keepdim) once NumPy's `axis` and `keepdims` are read for them."""
    return _args.axis(name, dim, axis), _args.keepdims(name, keepdim, keepdims)


# ---------------------------------------------------------------- NaN-aware reductions


def nansum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None, out=None,
           axis=None, keepdims=None) -> Tensor:
    """Sum treating NaN as zero."""
    if axis is not None or keepdims is not None:
        dim, keepdim = _numpy("nansum", dim, keepdim, axis, keepdims)
    if dim is not None and dim.__class__ is not int and dim.__class__ is not tuple:
        _args.int_list_argument(dim, "nansum", "dim", 1)  # (PyTorch's int[] check)
    if dtype is not None:
        return call(ST.nansum, input, _dims(dim), keepdim, dtype_argument("nansum", dtype))
    if dim is None and not keepdim:
        return call(ST.nansum, input)
    return call(ST.nansum, input, _dims(dim), keepdim)


def nanmean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None, out=None,
            axis=None, keepdims=None) -> Tensor:
    """Mean of the non-NaN elements (NaN where there are none)."""
    if axis is not None or keepdims is not None:
        dim, keepdim = _numpy("nanmean", dim, keepdim, axis, keepdims)
    if dim is not None and dim.__class__ is not int and dim.__class__ is not tuple:
        _args.int_list_argument(dim, "nanmean", "dim", 1)  # (PyTorch's int[] check)
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex "
                           f"dtype but got {input.dtype.legacy}")
    if dtype is not None and dtype.category < _dtype.FLOAT:
        raise RuntimeError(f"nanmean(): could not infer output dtype. Optional dtype must be "
                           f"either a floating point or complex dtype. Got: {dtype.legacy}")
    valid = input.isnan().logical_not()
    dims = _dims(dim)
    if dims is None and not keepdim:
        count = valid.sum()
    else:
        count = valid.sum(dims if dims is not None else list(range(input.ndim)),
                          keepdim=keepdim)
    return nansum(input, dims, keepdim, dtype=dtype).div(count)


def nanmedian(input: Tensor, *args, out=None, **kwargs):
    """The lower median of the non-NaN elements (with its index when `dim` is given)."""
    if not args and not kwargs:
        return call(ST.nanmedian, input)
    plain = _plain_dim(args, kwargs)
    if plain is None:
        which, bound = _args.parsed("nanmedian", _MEDIAN, input, args, kwargs,
                               _args.is_method_copy(locals()))
        if which == 0:
            return call(ST.nanmedian, input)
        plain = bound["dim"].__index__(), bound["keepdim"]
    values, indices = call(ST.nanmedian_dim, input, plain[0], plain[1])
    return return_types.nanmedian(values, indices)


def aminmax(input: Tensor, *, dim=None, keepdim: bool = False, out=None, axis=None,
            keepdims=None):
    """(min, max) over all elements or along `dim`."""
    if axis is not None or keepdims is not None:
        dim, keepdim = _numpy("aminmax", dim, keepdim, axis, keepdims)
    lo, hi = call(ST.aminmax, input, _args.index(dim), keepdim)
    return return_types.aminmax(lo, hi)


def logcumsumexp(input: Tensor, *args, out=None, **kwargs) -> Tensor:
    """log(cumsum(exp(input))) along `dim`, computed stably."""
    if len(args) == 1 and not kwargs and args[0].__class__ is int:
        dim = args[0]
    else:
        dim = _args.parsed("logcumsumexp", _LOGCUMSUMEXP, input, args, kwargs,
                      _args.is_method_copy(locals()))[1]["dim"].__index__()
    return call(ST.logcumsumexp, input, dim)


_LOGCUMSUMEXP = _args.Overloads(("Tensor input, int dim, *, Tensor out=None",), ("int dim",))


# ---------------------------------------------------------------- quantile


_MODES = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan):
    # PyTorch checks in this order and names `quantile()` for both functions.
    name = "quantile()"
    if interpolation not in _MODES:
        raise RuntimeError(f"{name} interpolation must be one of linear, lower, higher, "
                           f"midpoint or nearest, but got {interpolation}")
    scalar_q = not isinstance(q, Tensor)
    if scalar_q and not 0 <= q <= 1:
        shown = f"{q:g}" if isinstance(q, float) else q  # (C++'s stream prints 2.0 as 2)
        raise RuntimeError(f"{name} q must be in the range [0, 1] but got {shown}")
    if input.numel() == 0:
        raise RuntimeError(f"{name} input tensor must be non-empty")
    if not scalar_q and q.ndim > 1:
        raise RuntimeError(f"{name} q must be a scalar or 1D tensor")
    if input.dtype not in (_dtype.float32, _dtype.float64):
        raise RuntimeError(f"{name} input tensor must be either float or double dtype")
    number_q = scalar_q  # made in the input's dtype below, as PyTorch makes it a tensor
    if not scalar_q:
        if q.dtype is not input.dtype:
            raise RuntimeError(f"{name} q tensor must be same dtype as the input tensor")
        if q.is_meta is not input.is_meta:
            raise RuntimeError(f"{name} q tensor must be on the same device as the input "
                               "tensor")
        if dim is not None:
            wrap_dim(dim, input.ndim)
        if q._data is not None:  # (a meta q has no values to check)
            qs = q._data.reshape(-1)
            if qs.size and (qs.min() < 0 or qs.max() > 1):
                raise RuntimeError(f"{name} q values must be in the range [0, 1]")
        scalar_q = q.ndim == 0
    # Sort with the reduced dim last; the other dims follow the output's layout.
    if dim is None:
        srt = input.flatten().sort()[0]
        kept = [1] * input.ndim if keepdim else []
    else:
        d = wrap_dim(dim, input.ndim)
        if d == input.ndim - 1 or input.ndim == 0:
            srt = input.sort()[0] if input.ndim else input.reshape(1)
        else:
            srt = input.unsqueeze(-1).transpose(d, -1).sort()[0]
        kept = list(input.shape)
        if kept:
            if keepdim:
                kept[d] = 1
            else:
                del kept[d]
    n = srt.shape[-1]
    srt = view(srt, tuple(kept) + (n,))
    # The ranks are found by tensor ops (no values read here): a meta input takes the same
    # steps, and a traced quantile records them instead of baking one input's ranks into
    # the graph (or giving up where its tensors have no values). They are in the
    # input's dtype (q's), as PyTorch computes them: in float32, 0.1 * 10 is exactly 1, so
    # `higher` picks index 1 where a float64 rank (1.0000000149) picks 2.
    dt = srt.dtype
    nan_rows = srt.isnan().any(-1, keepdim=True)
    qv = srt.new_full((1,), q) if number_q else q.detach().reshape(-1)
    if ignore_nan:
        valid = srt.isnan().logical_not().sum(-1, keepdim=True)
        ranks = (qv * (valid - 1).to(dt)).clamp_min(0)
    else:  # rows holding a NaN take the last (NaN) value
        ranks = (qv * (n - 1)).expand(tuple(kept) + (qv.numel(),))
        ranks = ranks.masked_fill(nan_rows, float(n - 1))
    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()  # half to even, as PyTorch rounds
    below = ranks.floor()
    lo = srt.gather(-1, below.long())
    if interpolation in ("linear", "midpoint"):
        hi = srt.gather(-1, ranks.ceil().long())
        if interpolation == "midpoint":
            lo.lerp_(hi, 0.5)
        elif isinstance(q, Tensor):
            # The weights are q-dependent (PyTorch differentiates through them).
            if ignore_nan:
                factor, rows = (valid - 1).clamp_min(0), valid == 0
            else:
                factor, rows = srt.new_full(nan_rows.shape, n - 1), nan_rows
            rank_t = q.reshape(-1) * factor.to(dt)
            rank_t = rank_t.masked_fill(rows.expand(ranks.shape),
                                        0.0 if ignore_nan else float(n - 1))
            lo.lerp_(hi, rank_t - below)
        else:
            lo.lerp_(hi, ranks - below)
    if scalar_q:
        return lo.squeeze_(-1)
    return lo.unsqueeze_(0).transpose_(0, -1).squeeze_(-1)


@composite("fp32")
def quantile(input: Tensor, q, dim=None, keepdim: bool = False, *,
             interpolation: str = "linear", out=None) -> Tensor:
    """The q-th quantiles of `input` (NaN where a row holds NaN)."""
    return _quantile(input, q, dim, keepdim, interpolation, False)


@composite("fp32")
def nanquantile(input: Tensor, q, dim=None, keepdim: bool = False, *,
                interpolation: str = "linear", out=None) -> Tensor:
    """The q-th quantiles of the non-NaN elements of `input`."""
    return _quantile(input, q, dim, keepdim, interpolation, True)


# ---------------------------------------------------------------- cov, corrcoef


def cov(input: Tensor, *, correction: int = 1, fweights=None, aweights=None) -> Tensor:
    """The covariance matrix of the variables in the rows of `input` (observations are
    columns), with frequency and observation weights."""
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got "
                           f"an input with {input.ndim} dimensions")
    if input.dtype is _dtype.bool_:
        raise RuntimeError("cov(): bool dtype is not supported for input")
    x = view(input, (1, -1)) if input.ndim < 2 else input
    n_obs = x.shape[1]
    w = None
    if fweights is not None:
        if fweights.dtype.is_floating_point:
            raise RuntimeError(f"cov(): expected fweights to have integral dtype but got "
                               f"fweights with {fweights.dtype.legacy} dtype")
        w = fweights
    if aweights is not None:
        if not aweights.dtype.is_floating_point:
            raise RuntimeError(f"cov(): expected aweights to have floating point dtype but "
                               f"got aweights with {aweights.dtype.legacy} dtype")
        w = aweights if w is None else w * aweights
    if w is None:
        w_sum = tensor(n_obs)
        avg = x.sum(1) / w_sum
    else:
        w_sum = w.sum()
        avg = (x * w).sum(1) / w_sum
    if w is not None and correction != 0:
        if aweights is None:
            norm = w_sum - correction
        else:
            norm = w_sum - correction * (w * aweights).sum() / w_sum
    else:
        norm = w_sum - correction
    if float(norm.item()) <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less "
                      "than the number of observations.",
                      UserWarning, stacklevel=_warning_stacklevel(2))
        norm = norm * 0
    x = x - avg.unsqueeze(1)
    c = mm(x, (x * w if w is not None else x).t())
    return c.div(norm).squeeze()


def corrcoef(input: Tensor) -> Tensor:
    """Pearson correlation coefficients of the rows of `input`, clamped to [-1, 1]."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    sd = c.diagonal().sqrt()
    c = c / view(sd, (-1, 1))
    c = c / view(sd, (1, -1))
    return c.clamp(-1, 1)


# ---------------------------------------------------------------- histograms


def histc(input: Tensor, bins: int = 100, min=0, max=0, *, out=None) -> Tensor:  # noqa: A002
    """Counts of `input` in `bins` equal bins over [min, max] (the data's range when both
    are 0); values outside are ignored."""
    if bins.__class__ is not int:
        _args.int_parameter(bins, "histc", "bins", 1 if _args.is_method_copy(locals()) else 2)
    if isinstance(input, Tensor) and input.dtype is _dtype.bool_:  # (its edges' kernel first)
        raise NotImplementedError('"linspace_cpu" not implemented for \'Bool\'')
    return call(ST.histc, input, bins, min, max)


def histogram(input: Tensor, bins=100, *, range=None, weight=None,  # noqa: A002
              density: bool = False, out=None):
    """(hist, bin_edges): counts (or densities) of `input` in the given bins."""
    if not isinstance(bins, Tensor):
        hist, edges = call(ST.histogram, input, int(bins), range, weight, density)
        return return_types.histogram(hist, edges)
    # Explicit bin edges: computed directly (no grad_fn either way).
    if not input.dtype.is_floating_point or bins.dtype is not input.dtype:
        raise RuntimeError(f"torch.histogram: input tensor and bins tensors should have the "
                           f"same dtype, but got input {input.dtype.name} and bins "
                           f"{bins.dtype.name}")
    data = input._data.reshape(-1).astype(np.float64)
    wts = None if weight is None else weight._data.reshape(-1).astype(np.float64)
    hist, bin_edges = np.histogram(data, bins=bins._data.astype(np.float64), weights=wts,
                                   density=density)
    dt = input.dtype
    return return_types.histogram(Tensor._make(hist.astype(dt.np), dt),
                      Tensor._make(bin_edges.astype(dt.np), dt))


# ---------------------------------------------------------------- distances


@composite("fp32")
def cdist(x1: Tensor, x2: Tensor, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """p-norm distances between each row of `x1` and each row of `x2` (batched).

    As in PyTorch, p=2 uses the matmul formulation (`_euclidean_dist`) when asked to, or when
    either input has more than 25 rows; otherwise the direct one (`_cdist_forward`)."""
    if compute_mode not in ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                            "donot_use_mm_for_euclid_dist"):
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    for i, (name, x) in enumerate((("x1", x1), ("x2", x2))):
        # (PyTorch's Python function passes both on by position to its parser)
        if not isinstance(x, Tensor):
            raise TypeError(f"cdist(): argument '{name}' (position {i + 1}) must be Tensor, "
                            f"not {python_type_name(x)}")
    if p == 2 and x1.ndim >= 2 and x2.ndim >= 2 and (
            compute_mode == "use_mm_for_euclid_dist" or (
                compute_mode == "use_mm_for_euclid_dist_if_necessary"
                and (x1.shape[-2] > 25 or x2.shape[-2] > 25))):
        shape = ST._cdist_check(x1, x2, 2.0)
        if x1.dtype != x2.dtype:  # (the matmul's check)
            raise RuntimeError("expected m1 and m2 to have the same dtype, but got: "
                               f"{x1.dtype.cpp} != {x2.dtype.cpp}")
        if x1.ndim == 2 and x2.ndim == 2:
            return view(call(ST.euclidean_dist, x1, x2), shape)
        batch = shape[:-2]
        n = int(np.prod(batch, dtype=np.int64))
        t1 = x1.expand(*batch, *x1.shape[-2:]).reshape(n, *x1.shape[-2:])
        t2 = x2.expand(*batch, *x2.shape[-2:]).reshape(n, *x2.shape[-2:])
        return view(call(ST.euclidean_dist, t1, t2), shape)
    return call(ST.cdist, x1, x2, float(p), None)


def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """Distances between all pairs of rows (the upper triangle of cdist, row by row), of the
    input made contiguous (as PyTorch's, which records that copy)."""
    return call(ST.pdist, input.contiguous(), float(p))


def dist(input: Tensor, other: Tensor, p=2) -> Tensor:
    """The p-norm of input - other."""
    if isinstance(input, Tensor) and isinstance(other, Tensor):
        # PyTorch's order: the difference's errors (bool operands), then the norm's dtype.
        if input.dtype is _dtype.bool_ or other.dtype is _dtype.bool_:
            input - other  # noqa: B018 (raises the subtraction's own message)
        dt = _dtype.result_type(input, other)
        if not (dt.is_floating_point or dt.is_complex):
            raise RuntimeError("norm(): input dtype should be either floating point or "
                               f"complex. Got {dt.legacy} instead.")
    return call(ST.dist, input, other, p)


def _renorm_args(name: str, dim, maxnorm, axis):
    """`renorm`'s dim (or NumPy's `axis`) and maxnorm, both required."""
    dim = _args.index(_args.required_dim(name, dim, axis))
    if maxnorm is None:
        raise _args.missing(name, "maxnorm")
    return dim, maxnorm


def renorm(input: Tensor, p, dim: int | None = None, maxnorm=None, *, axis=None,
           out=None) -> Tensor:
    """Each slice along `dim` rescaled to p-norm at most `maxnorm`."""
    dim, maxnorm = _renorm_args("renorm", dim, maxnorm, axis)
    return call(ST.renorm, input, p, dim, maxnorm)


def renorm_(self: Tensor, p, dim: int | None = None, maxnorm=None, *, axis=None) -> Tensor:
    """In-place renorm."""
    dim, maxnorm = _renorm_args("renorm_", dim, maxnorm, axis)
    return call(ST.renorm_, self, p, dim, maxnorm)


# ---------------------------------------------------------------- trapezoid rules


def _mul_scalar(t, c):
    return call(SCL.mul_scalar, t, c)


def _trapezoid_x(y, x, d, cumulative):
    if x.ndim == 1:
        if x.shape[0] != y.shape[d]:
            raise RuntimeError("trapezoid: There must be one `x` value for each sample "
                               "point")
        shape = [1] * y.ndim
        shape[d] = x.shape[0]
        x = view(x, tuple(shape))
    n = x.shape[d]
    dx = narrow(x, d, 1, n - 1) - narrow(x, d, 0, n - 1)
    m = y.shape[d]
    pair = narrow(y, d, 0, m - 1) + narrow(y, d, 1, m - 1)
    if cumulative:
        return call(SCL.div_scalar, (dx * pair).cumsum(d), 2.0)
    return call(SCL.div_scalar, (dx * pair).sum(d), 2.0)


def trapezoid(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """Integral of `y` along `dim` by the trapezoid rule (sample points `x`, or spacing
    `dx`, default 1)."""
    d = wrap_dim(dim, y.ndim)
    if isinstance(x, Tensor):
        if y.shape[d] == 0:
            return y.sum(d) * 0
        return _trapezoid_x(y, x, d, False)
    if x is not None:
        dx = x
    dx = 1.0 if dx is None else dx
    if y.shape[d] == 0:
        return _mul_scalar(y.sum(d), 0)
    ends = select(y, d, 0) + select(y, d, -1)
    return _mul_scalar(y.sum(d) - _mul_scalar(ends, 0.5), dx)


def trapz(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """`trapezoid` under its older name."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """Running integral of `y` along `dim` by the trapezoid rule."""
    d = wrap_dim(dim, y.ndim)
    if isinstance(x, Tensor):
        return _trapezoid_x(y, x, d, True)
    if x is not None:
        dx = x
    dx = 1.0 if dx is None else dx
    m = y.shape[d]
    pair = narrow(y, d, 0, max(m - 1, 0)) + narrow(y, d, min(1, m), max(m - 1, 0))
    return _mul_scalar(pair, dx / 2.0).cumsum(d)


__all__ = [
    "nansum", "nanmean", "nanmedian", "quantile", "nanquantile", "cov", "corrcoef", "histc",
    "histogram", "aminmax", "logcumsumexp", "cdist", "pdist", "dist", "renorm", "trapezoid",
    "trapz", "cumulative_trapezoid",
]
