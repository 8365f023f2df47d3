"""Cumulative ops (scans): cumsum, cumprod, cummax, cummin."""

from __future__ import annotations

import numpy as np

from .. import _dtype
from .._dispatch import call
from ..autograd.grad_mode import is_grad_enabled
from . import _onnx as ox
from ._util import (
    F32,
    HALF,
    Spec,
    c_contiguous,
    in_format,
    not_implemented_for,
    rand_array,
    real_part_for,
)
from .joins import cat
from .reductions import (
    _dim1,
    _sum_dtype,
)
from .registry import Sample, inplace_variant, register

# ---------------------------------------------------------------- cumulative


# The running value's type for each result dtype, as PyTorch's CPU scans keep it: float32
# (and complex64) in double precision, the half types in float32, so a long float32 cumsum
# rounds once per element rather than drifting (0.1 summed 10**6 times is 100000).
_SCAN_ACC = {F32: np.dtype(np.float64), np.dtype(np.complex64): np.dtype(np.complex128)}


def _no_bool_scan(name: str, dtype) -> None:
    """PyTorch has no bool cumsum/cumprod kernel (only `dtype=torch.bool` asks for one: a
    bool input sums as int64)."""
    if dtype is _dtype.bool_:
        raise not_implemented_for(f"{name}_out_cpu", "Bool")


def _cum_kernel(fn):
    def kernel(a, dim, dtype=None):
        dt = _sum_dtype(a.dtype, dtype)
        if a.ndim == 0:
            _dim1(dim, 0)
            _no_bool_scan(fn.__name__, dtype)
            return a.astype(dt)
        d = _dim1(dim, a.ndim)
        _no_bool_scan(fn.__name__, dtype)
        acc = _SCAN_ACC.get(dt) or (F32 if dt in HALF else dt)
        if a.dtype != dt:  # the input is cast to the result's dtype first (`dtype=`)
            a = real_part_for(a, dt).astype(dt)
        out = fn(a, axis=d, dtype=acc)
        if fn is np.cumsum and acc.kind == "f":
            # PyTorch's running sum starts at +0.0, so it is never -0.0; NumPy's copies a
            # leading -0.0. Adding 0.0 turns -0.0 into +0.0 and changes nothing else (one
            # in-place pass: cheaper than looking for them).
            np.add(out, 0.0, out=out)
        return out.astype(dt, copy=False)

    return c_contiguous(kernel)


def _cum_meta(name: str):
    def meta(a, dim, dtype=None):
        _dim1(dim, len(a.shape))
        _no_bool_scan(name, dtype)
        dt = dtype if dtype is not None else (
            _dtype.int64 if a.dtype.category < _dtype.FLOAT else a.dtype)
        return Spec(tuple(a.shape), dt)

    return meta


def _cum_samples(rng, dtype):
    return [Sample((rand_array(rng, s, dtype), d), name=f"{s} {d}")
            for s, d in (((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -1), ((), 0), ((0, 3), 1))]


def _rev_cumsum(x, d):
    return x.flip([d]).cumsum(d).flip([d])


cumsum = register(
    "cumsum", kernel=_cum_kernel(np.cumsum), meta=_cum_meta("cumsum"), node="CumsumBackward0",
    derivative=lambda g, dim: (_rev_cumsum(g, dim) if g.dim() else g, None),
    save=lambda out, a, dim, dtype=None: (dim,), samples=_cum_samples, onnx=ox.cumsum,
    result_order="contiguous", saved_names=("dim",))


def _cumprod_derivative(g, a, out, dim):
    """Before a slice's first zero: the sum over later positions of g * out, divided by the
    input. At the first zero: the same sum of g times the products with that zero taken as
    one. After it: zero (every later product holds the zero). Masks, not branches on the
    values, so traced and double backward see one formula."""
    if a.dim() == 0 or a.numel() == 0:
        return (g, None)
    if a._dtype.category == _dtype.COMPLEX:
        # The conjugate Wirtinger rule: every formula below is a polynomial in the inputs and
        # outputs (over the inputs), so conjugating them conjugates the local derivative.
        a, out = a.conj(), out.conj()
    if is_grad_enabled():  # create_graph: a formula whose own derivative is right at zeros
        return (_cumprod_derivative_products(g, a, dim), None)
    zeros = a == 0
    seen = zeros.long().cumsum(dim)
    before = seen == 0
    first = zeros.logical_and(seen == 1)
    early = _rev_cumsum(g * out, dim) / a.masked_fill(before.logical_not(), 1.0)
    at_zero = _rev_cumsum(g * a.masked_fill(first, 1.0).cumprod(dim), dim)
    return (early.masked_fill(before.logical_not(), 0.0)
            + at_zero.masked_fill(first.logical_not(), 0.0), None)


def _cumprod_derivative_products(g, a, dim):
    """cumprod's input gradient without division, for double backward: at position m, the
    product of the inputs before m times S_m = sum over j >= m of g_j times the inputs in
    (m, j], by S_m = g_m + a_(m+1) S_(m+1) along the dim. Each zero input stays a factor,
    so the second derivative at a zero is the product of the others, as it should be."""
    d = dim % a.dim()
    n = a.shape[d]
    before = a.narrow(d, 0, n - 1).cumprod(d)
    one = a.new_ones(tuple(a.shape[:d]) + (1,) + tuple(a.shape[d + 1:]))
    exclusive = call(cat, [one, before], d)
    sums = [g.narrow(d, n - 1, 1)]
    for m in range(n - 2, -1, -1):
        sums.append(g.narrow(d, m, 1) + a.narrow(d, m + 1, 1) * sums[-1])
    return exclusive * call(cat, sums[::-1], d)


cumprod = register(
    "cumprod", kernel=_cum_kernel(np.cumprod), meta=_cum_meta("cumprod"), node="CumprodBackward0",
    derivative=_cumprod_derivative, save=lambda out, a, dim, dtype=None: (a, out, dim),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt, (0.5, 1.5)), d), name=f"{s} {d}")
                             for s, d in (((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -1), ((), 0))],
    result_order="contiguous", onnx=ox.cumprod)


# C++'s names of the scalar types, in PyTorch's "Bad in-place call" message.
_CPP_TYPES = {"float32": "float", "float64": "double", "int32": "int", "int64": "long int",
              "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
              "bool": "bool", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
              "complex64": "c10::complex<float>", "complex128": "c10::complex<double>"}


def _same_dtype(own, asked) -> None:
    """PyTorch's error for an in-place scan asked for a dtype other than the tensor's."""
    if asked is not None and asked is not own:
        raise RuntimeError(f"Bad in-place call: input tensor dtype {_CPP_TYPES[own.name]} "
                           f"and output tensor dtype {_CPP_TYPES[asked.name]} should match")


def _cum_inplace(op):
    """The kernel and meta of `op`'s in-place form: the scan in `self`'s own dtype (PyTorch's
    `dtype=self.dtype`, so a bool tensor's is an error), except where there is nothing to
    add up (an empty or 0-d `self` is left as it is)."""

    def kernel(a, dim, dtype=None):
        _same_dtype(_dtype.FROM_NP[a.dtype], dtype)
        if a.size == 0 or a.ndim == 0:
            _dim1(dim, a.ndim)
            return a.copy()
        return op.kernel(a, dim, _dtype.FROM_NP[a.dtype])

    def meta(a, dim, dtype=None):
        _same_dtype(a.dtype, dtype)
        if 0 in tuple(a.shape) or not a.shape:
            _dim1(dim, len(a.shape))
            return Spec(tuple(a.shape), a.dtype)
        return op.meta(a, dim, a.dtype)

    return dict(kernel=kernel, meta=meta)


cumsum_ = inplace_variant(cumsum, "cumsum_", **_cum_inplace(cumsum))
cumprod_ = inplace_variant(cumprod, "cumprod_", saves_self=True, **_cum_inplace(cumprod))


def _scalar_dim(name: str, dim) -> None:
    """cummax/cummin's own check of a 0-d input's dim."""
    if dim not in (0, -1):
        raise IndexError(f"{name}(): Expected reduction dim -1 or 0 for scalar but got {dim}")


def _cumext_kernel(ufunc, cpu_name: str):
    def kernel(a, dim):
        if a.ndim == 0:
            _scalar_dim(cpu_name[:6], dim)
            return a.copy(), np.zeros((), np.int64)
        d = _dim1(dim, a.ndim)
        if a.size == 0:  # (nothing to compare: a complex input too)
            return a.copy(), np.zeros(a.shape, np.int64)
        if a.dtype.kind == "c":  # PyTorch has no complex kernel (NumPy would order them)
            raise not_implemented_for(cpu_name, a.dtype)
        vals = ufunc.accumulate(a, axis=d)
        # The index of the last element equal to the running extreme so far.
        hit = a == vals
        if a.dtype.kind == "f" or a.dtype in HALF:
            # A NaN is the running extreme from where it appears (bfloat16's kind is "V").
            hit |= np.isnan(a)
        pos = np.arange(a.shape[d]).reshape((-1,) + (1,) * (a.ndim - d - 1))
        idx = np.maximum.accumulate(np.where(hit, pos, 0), axis=d).astype(np.int64)
        # The values are the elements the indices name (a later -0.0 replaces a running 0.0),
        # both contiguous whatever the input's layout, as PyTorch's kernel allocates them
        return in_format(np.take_along_axis(a, idx, d), None), in_format(idx, None)

    return kernel


def _cumext_meta(a, dim, name="cummax"):
    if len(a.shape) == 0:
        _scalar_dim(name, dim)
    _dim1(dim, len(a.shape))
    return [Spec(tuple(a.shape), a.dtype), Spec(tuple(a.shape), _dtype.int64)]


def _cumext_derivative(grads, shape, dim, idx):
    g = grads[0]
    if len(shape) == 0:
        return (g, None)
    return (g.new_zeros(tuple(shape)).scatter_add(dim, idx, g), None)


cummax = register(
    "cummax", kernel=_cumext_kernel(np.maximum, "cummax_cpu"), meta=_cumext_meta,
    node="CummaxBackward0",
    derivative=_cumext_derivative, save=lambda out, a, dim: (a.shape, dim, out[1]),
    samples=_cum_samples, saved_names=("", "dim", "indices"))
cummin = register(
    "cummin", kernel=_cumext_kernel(np.minimum, "cummin_cpu"),
    meta=lambda a, dim: _cumext_meta(a, dim, "cummin"), node="CumminBackward0",
    derivative=_cumext_derivative, save=lambda out, a, dim: (a.shape, dim, out[1]),
    samples=_cum_samples)
