"""Reductions: sum, mean, amax/amin, max/min, argmax, prod, var/std, norm, logsumexp, the
cumulative ops, all/any, median, mode, topk, sort; softmax and log_softmax.
"""

from __future__ import annotations

import builtins
import numbers

from .. import return_types
from .._dispatch import call, call1
from .._tensor import Tensor
from ..ops import REGISTRY
from ..ops import pointwise as P
from ..ops import reduction as R

# ---------------------------------------------------------------- reductions


def _dims(dim):
    if dim is None:
        return None
    if isinstance(dim, numbers.Integral):
        return (int(dim),)
    return tuple(dim)


def sum(input, dim=None, keepdim=False, *, dtype=None, out=None):  # noqa: A001
    """Sum of all elements, or over `dim`."""
    if dim is None:
        return call(R.sum_, input, dtype) if dtype is not None else call1(R.sum_, input)
    return call(R.sum_dim, input, _dims(dim), keepdim, dtype)


def mean(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """Mean of all elements, or over `dim`."""
    if dim is None:
        return call(R.mean, input, dtype) if dtype is not None else call1(R.mean, input)
    return call(R.mean_dim, input, _dims(dim), keepdim, dtype)


def amax(input, dim=(), keepdim=False, *, out=None):
    """Maximum over `dim` (all dims by default)."""
    return call(R.amax, input, _dims(dim) or (), keepdim)


def softmax(input, dim, dtype=None, *, _stacklevel=3):
    """exp(x) / sum(exp(x)) along `dim`."""
    if dtype is not None:
        input = input.to(dtype)
    return call(R.softmax, input, dim, False)


def log_softmax(input, dim, dtype=None, *, _stacklevel=3):
    """log(softmax(x)) along `dim`, computed stably."""
    if dtype is not None:
        input = input.to(dtype)
    return call(R.log_softmax, input, dim, False)
# ---------------------------------------------------------------- more reductions

def _rt(name, pair):
    return getattr(return_types, name)(*pair)


def amin(input, dim=(), keepdim=False, *, out=None):
    """Minimum over `dim` (all dims by default)."""
    return call(R.amin, input, _dims(dim) or (), keepdim)


def _maxmin(op_all, op_dim, op_binary, name):
    def fn(input, dim=None, keepdim=False, *, out=None):
        if isinstance(dim, Tensor):
            return call(op_binary, input, dim)
        if dim is None:
            return call(op_all, input)
        return _rt(name, call(op_dim, input, int(dim), keepdim))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"{name} of all elements; with `dim`, (values, indices) along it; with a "
                  f"tensor, the elementwise {name}imum.")
    return fn


max = _maxmin(R.max_all, R.max_dim, P.maximum, "max")  # noqa: A001
min = _maxmin(R.min_all, R.min_dim, P.minimum, "min")  # noqa: A001


def argmax(input, dim=None, keepdim=False):
    """Index of the maximum (of the flattened tensor without `dim`)."""
    return call(R.argmax, input, dim, keepdim)


def argmin(input, dim=None, keepdim=False):
    """Index of the minimum (of the flattened tensor without `dim`)."""
    return call(R.argmin, input, dim, keepdim)


def prod(input, dim=None, keepdim=False, *, dtype=None):
    """Product of all elements, or along `dim`."""
    if dim is None:
        return call(R.prod, input, dtype) if dtype is not None else call(R.prod, input)
    return call(R.prod_dim, input, int(dim), keepdim, dtype)


def _var_args(dim, unbiased, correction):
    if isinstance(dim, builtins.bool):  # var(x, False): the old `unbiased` positional
        unbiased, dim = dim, None
    if correction is None and unbiased is not None:
        correction = 1 if unbiased else 0
    return _dims(dim), correction


def _var_like(op, name):
    def fn(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
        dims, correction = _var_args(dim, unbiased, correction)
        result = call(op, input, dims, correction, keepdim)
        return result

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name} over `dim` with Bessel's `correction` (1 by default)."
    return fn


var = _var_like(R.var, "var")
std = _var_like(R.std, "std")
var_mean = _var_like(R.var_mean, "var_mean")
std_mean = _var_like(R.std_mean, "std_mean")


def _vector_norm(input, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    """The vector `ord`-norm over `dim` (all elements by default)."""
    return call(R.vector_norm, input, ord, _dims(dim), keepdim, dtype)


def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """The vector p-norm (`fro` is 2) over `dim` or all elements; a matrix norm
    (`linalg.matrix_norm`) for `nuc`, or for `fro` over more than two dims."""
    if isinstance(p, str) and not (p == "fro" and (
            dim is None or isinstance(dim, int) or len(dim) <= 2)):
        from ..linalg import matrix_norm  # fusegrad.linalg imports this module

        dims = tuple(range(input.ndim)) if dim is None else (
            (dim,) if isinstance(dim, int) else dim)
        return matrix_norm(input, p, dims, keepdim, dtype=dtype)
    if p == "fro" or p is None:
        p = 2
    return _vector_norm(input, p, dim, keepdim, dtype=dtype)


def logsumexp(input, dim, keepdim=False, *, out=None):
    """log(sum(exp(input))) over `dim`, computed stably."""
    return call(R.logsumexp, input, _dims(dim), keepdim)


def cumsum(input, dim, *, dtype=None, out=None):
    """Cumulative sum along `dim`."""
    return call(R.cumsum, input, dim, dtype) if dtype is not None else call(R.cumsum, input, dim)


def cumprod(input, dim, *, dtype=None, out=None):
    """Cumulative product along `dim`."""
    if dtype is not None:
        return call(R.cumprod, input, dim, dtype)
    return call(R.cumprod, input, dim)


def cummax(input, dim, *, out=None):
    """Running maximum and its index along `dim`."""
    return _rt("cummax", call(R.cummax, input, dim))


def cummin(input, dim, *, out=None):
    """Running minimum and its index along `dim`."""
    return _rt("cummin", call(R.cummin, input, dim))


def _logic(name):
    op_all, op_dim, op_dims = (REGISTRY[name], REGISTRY[name + ".dim"],
                               REGISTRY[name + ".dims"])

    def fn(input, dim=None, keepdim=False, *, out=None):
        if dim is None:
            return call(op_all, input) if not keepdim else call(op_dims, input, None, True)
        if isinstance(dim, numbers.Integral):
            return call(op_dim, input, int(dim), keepdim)
        return call(op_dims, input, tuple(dim), keepdim)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Whether {name} element(s) are nonzero, overall or along `dim`."
    return fn


all = _logic("all")  # noqa: A001
any = _logic("any")  # noqa: A001


def count_nonzero(input, dim=None):
    """Number of nonzero elements, overall or along `dim`."""
    if dim is None or isinstance(dim, numbers.Integral):
        return call(R.count_nonzero_all, input, dim) if dim is not None else call(
            R.count_nonzero_all, input)
    return call(R.count_nonzero, input, tuple(dim))


def median(input, dim=None, keepdim=False, *, out=None):
    """Lower median of all elements, or (values, indices) along `dim`."""
    if dim is None:
        return call(R.median, input)
    return _rt("median", call(R.median_dim, input, dim, keepdim))


def mode(input, dim=-1, keepdim=False, *, out=None):
    """Most frequent value (the smallest on ties) and its last index along `dim`."""
    return _rt("mode", call(R.mode, input, dim, keepdim))


def kthvalue(input, k, dim=-1, keepdim=False, *, out=None):
    """The k-th smallest value and its index along `dim`."""
    return _rt("kthvalue", call(R.kthvalue, input, k, dim, keepdim))


def topk(input, k, dim=-1, largest=True, sorted=True, *, out=None):  # noqa: A002
    """The k largest (or smallest) values and their indices along `dim`."""
    return _rt("topk", call(R.topk, input, k, dim, largest, sorted))


def sort(input, dim=-1, descending=False, *, stable=None, out=None):
    """Values sorted along `dim`, and their original indices."""
    if stable is not None:
        return _rt("sort", call(R.sort_stable, input, stable, dim, descending))
    return _rt("sort", call(R.sort, input, dim, descending))


def argsort(input, dim=-1, descending=False, *, stable=False):
    """Indices that sort `input` along `dim`."""
    return call(R.argsort, input, dim, descending)


def msort(input, *, out=None):
    """Sorted along dimension 0."""
    return sort(input, 0).values
