"""Reductions (sum, mean, amax) and the softmax family."""

from __future__ import annotations

import collections

import numpy as np

from .. import _dtype
from ._onnx import reduce as reduce_onnx
from ._onnx import softmax as softmax_onnx
from ._util import F32, HALF, Spec, rand_array, wrap_dim, wrap_dims
from .registry import Sample, inplace_variant, register

_REDUCE_SHAPES = [((3, 4), None), ((3, 4), 0), ((3, 4), -1), ((2, 3, 4), (0, 2)), ((), None),
                  ((), 0), ((0, 3), 1), ((2, 0), 1), ((5,), 0)]


def _axes(dims, ndim: int) -> tuple:
    """Reduced axes, checked against `ndim` (a 0-d tensor accepts dim 0 and -1)."""
    axes = wrap_dims(dims, ndim)
    return axes if ndim else ()


def _sum_dtype(dt: np.dtype, dtype) -> np.dtype:
    if dtype is not None:
        return dtype.np
    # Integer and bool sums are int64 in PyTorch.
    return np.dtype(np.int64) if dt.kind in "biu" else dt


def _reduce_shape(shape, dims, keepdim) -> tuple:
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


_F = (np.dtype(np.float32), np.dtype(np.float64))


def _sum_all_kernel(a, dtype=None):
    if dtype is None and (a.dtype is _F[0] or a.dtype is _F[1]):
        return np.add.reduce(a, axis=None)
    return _sum_kernel(a, None, False, dtype)


def _sum_kernel(a, dims, keepdim=False, dtype=None):
    dt = _sum_dtype(a.dtype, dtype)
    axes = _axes(dims, a.ndim)
    acc = F32 if dt in HALF else dt
    return np.sum(a, axis=axes, dtype=acc, keepdims=keepdim).astype(dt, copy=False)


def _sum_meta(a, dims=None, keepdim=False, dtype=None):
    dt = dtype if dtype is not None else (
        _dtype.int64 if a.dtype.category != _dtype.FLOAT else a.dtype)
    axes = _axes(dims, len(a.shape))
    return Spec(_reduce_shape(tuple(a.shape), axes, keepdim), dt)


def expand_reduced(g, shape, dims, keepdim):
    """Broadcast a reduction's gradient `g` back over the reduced `dims` of `shape`."""
    if not keepdim and len(shape):
        for d in sorted(wrap_dims(dims, len(shape))):
            g = g.unsqueeze(d)
    return g.expand(shape)


def _reduce_samples(rng, dtype):
    return [Sample((rand_array(rng, s, dtype), d, k), name=f"{s} dim={d} keep={k}")
            for s, d in _REDUCE_SHAPES for k in (False, True)]


def _full_samples(rng, dtype):
    return [Sample((rand_array(rng, s, dtype),), name=str(s))
            for s in ((3, 4), (), (0,), (2, 3, 4))]


sum_ = register(
    "sum", kernel=_sum_all_kernel,
    meta=lambda a, dtype=None: _sum_meta(a, None, False, dtype), node="SumBackward0",
    derivative=lambda g, shape: (g.expand(shape),), save=lambda out, a, dtype=None: (a.shape,),
    samples=_full_samples, onnx=reduce_onnx("ReduceSum", full=True),
    saved_names=("self_sym_sizes",))
sum_dim = register(
    "sum.dim_IntList", kernel=_sum_kernel, meta=_sum_meta, node="SumBackward1",
    derivative=lambda g, shape, dims, keepdim: (expand_reduced(g, shape, dims, keepdim),),
    save=lambda out, a, dims, keepdim=False, dtype=None: (a.shape, dims, keepdim),
    samples=_reduce_samples, onnx=reduce_onnx("ReduceSum"), public="sum",
    saved_names=("self_sym_sizes", "dim", "keepdim"))


def _mean_check(a, dtype):
    dt = dtype if dtype is not None else _dtype.FROM_NP[a.dtype] if hasattr(
        a.dtype, "kind") else a.dtype
    if dt.category != _dtype.FLOAT:
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point "
            f"or complex dtype. Got: {dt.legacy}")
    return dt


def _mean_kernel(a, dims=None, keepdim=False, dtype=None):
    dt = _mean_check(a, dtype).np
    axes = _axes(dims, a.ndim)
    acc = F32 if dt in HALF else dt
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.mean(a, axis=axes, dtype=acc, keepdims=keepdim).astype(dt, copy=False)


def _mean_meta(a, dims=None, keepdim=False, dtype=None):
    spec = _sum_meta(a, dims, keepdim, dtype)
    spec.dtype = _mean_check(a, dtype)
    return spec


def _count(shape, dims) -> int:
    n = 1
    for d in wrap_dims(dims, len(shape)) if len(shape) else ():
        n *= shape[d]
    return n


mean = register(
    "mean", kernel=lambda a, dtype=None: _mean_kernel(a, None, False, dtype),
    meta=lambda a, dtype=None: _mean_meta(a, None, False, dtype), node="MeanBackward0",
    derivative=lambda g, shape: (g.expand(shape) / max(_count(shape, None), 1),),
    save=lambda out, a, dtype=None: (a.shape,), samples=_full_samples,
    onnx=reduce_onnx("ReduceMean", full=True),
    tolerance={"float32": 1e-5},
    saved_names=("self_sym_sizes",))
mean_dim = register(
    "mean.dim", kernel=_mean_kernel, meta=_mean_meta, node="MeanBackward1",
    derivative=lambda g, shape, dims, keepdim: (
        expand_reduced(g, shape, dims, keepdim) / max(_count(shape, dims), 1),),
    save=lambda out, a, dims, keepdim=False, dtype=None: (a.shape, dims, keepdim),
    samples=lambda rng, dt: [s for s in _reduce_samples(rng, dt) if np.size(s.args[0])],
    onnx=reduce_onnx("ReduceMean"), public="mean",
    saved_names=("self_sym_sizes", "dim", "keepdim"))


def _all_if_empty(dims):
    return None if dims is None or (isinstance(dims, (tuple, list)) and not dims) else dims


def _check_amax(shape, dims, axes, name="amax") -> None:
    if _all_if_empty(dims) is None:
        if 0 in shape:
            raise RuntimeError(
                f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                "Specify the reduction dim with the 'dim' argument.")
        return
    for d in axes:
        if shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


def _amax_kernel(a, dims=(), keepdim=False):
    axes = _axes(_all_if_empty(dims), a.ndim)
    _check_amax(a.shape, dims, axes)
    return np.amax(a, axis=axes, keepdims=keepdim)


def _amax_meta(a, dims=(), keepdim=False):
    axes = _axes(_all_if_empty(dims), len(a.shape))
    _check_amax(tuple(a.shape), dims, axes)
    return Spec(_reduce_shape(tuple(a.shape), axes, keepdim), a.dtype)


def _amax_derivative(g, a, out, dims, keepdim):
    dims = _all_if_empty(dims)
    mask = a == expand_reduced(out, a.shape, dims, keepdim)
    count = mask.sum(dims if dims is not None else tuple(range(a.dim())), keepdim=True)
    return (expand_reduced(g, a.shape, dims, keepdim) * mask / count, None, None)


amax = register(
    "amax", kernel=_amax_kernel, meta=_amax_meta, node="AmaxBackward0",
    derivative=_amax_derivative, save=lambda out, a, dims=(), keepdim=False: (a, out, dims,
                                                                               keepdim),
    samples=lambda rng, dt: [Sample((s.args[0], s.args[1] if s.args[1] is not None else ()) +
                                    s.args[2:], name=s.name)
                             for s in _reduce_samples(rng, dt) if np.size(s.args[0])],
    onnx=reduce_onnx("ReduceMax"))

# ---------------------------------------------------------------- softmax family


def _softmax_kernel(a, dim, log=False):
    if a.dtype.kind != "f" and a.dtype not in HALF:
        name = "log_softmax" if log else "softmax"
        raise RuntimeError(f'"{name}_lastdim_kernel_impl" not implemented for '
                           f"'{_dtype.FROM_NP[a.dtype].legacy}'")
    dt = a.dtype
    x = a.astype(F32) if dt in HALF else a
    if x.ndim == 0:
        return (np.zeros_like(x) if log else np.ones_like(x)).astype(dt)
    axis = wrap_dims(dim, x.ndim)[0]
    shifted = x - np.max(x, axis=axis, keepdims=True) if x.size else x
    e = np.exp(shifted)
    s = np.sum(e, axis=axis, keepdims=True)
    out = shifted - np.log(s) if log else e / s
    return out.astype(dt, copy=False)


def _softmax_meta(a, dim, half_to_float=False):
    if a.dtype.category != _dtype.FLOAT:
        raise RuntimeError(f"\"softmax_lastdim_kernel_impl\" not implemented for "
                           f"'{a.dtype.legacy}'")
    wrap_dims(dim, len(a.shape))
    return Spec(tuple(a.shape), a.dtype)


def _softmax_samples(rng, dtype):
    return [Sample((rand_array(rng, s, dtype), d, False), name=f"{s} dim={d}")
            for s, d in (((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -1), ((), 0), ((0, 3), 1))]


softmax = register(
    "_softmax", kernel=lambda a, dim, half_to_float=False: _softmax_kernel(a, dim),
    meta=_softmax_meta, node="SoftmaxBackward0",
    derivative=lambda g, out, dim: (out * (g - (g * out).sum(dim, keepdim=True)), None),
    save=lambda out, a, dim, half_to_float=False: (out, dim), samples=_softmax_samples,
    onnx=softmax_onnx("Softmax"), public="softmax",
    saved_names=("result", "dim"))
log_softmax = register(
    "_log_softmax", kernel=lambda a, dim, half_to_float=False: _softmax_kernel(a, dim, True),
    meta=_softmax_meta, node="LogSoftmaxBackward0",
    derivative=lambda g, out, dim: (g - out.exp() * g.sum(dim, keepdim=True), None),
    save=lambda out, a, dim, half_to_float=False: (out, dim), samples=_softmax_samples,
    onnx=softmax_onnx("LogSoftmax"), public="log_softmax",
    saved_names=("result", "dim"))

# ---------------------------------------------------------------- named tuples


def _named_tuple(name: str, fields=("values", "indices")):
    """A `torch.return_types.<name>`-like named tuple class."""
    cls = collections.namedtuple(name, fields)
    cls.__module__ = "fusegrad.return_types"
    cls.__repr__ = _return_type_repr
    return cls


def _return_type_repr(self) -> str:
    parts = ",\n".join(f"{k}={v!r}" for k, v in zip(self._fields, self))
    return f"torch.return_types.{type(self).__name__}(\n{parts})"


RETURN_TYPES = {n: _named_tuple(n) for n in (
    "max", "min", "median", "mode", "topk", "sort", "kthvalue", "cummax", "cummin",
    "nanmedian", "aminmax")}
RETURN_TYPES["aminmax"] = _named_tuple("aminmax", ("min", "max"))

# ---------------------------------------------------------------- helpers


def _dim1(dim, ndim: int) -> int:
    """One reduced dim, wrapped (a 0-d tensor accepts 0 and -1)."""
    return wrap_dim(dim, ndim)


def _keep(x, axis, keepdim):
    return x if keepdim else np.squeeze(x, axis)


def _nonempty_dim(name, shape, d) -> None:
    if len(shape) and shape[d] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


def _nonempty_all(name, shape) -> None:
    if 0 in tuple(shape):
        raise RuntimeError(
            f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
            "Specify the reduction dim with the 'dim' argument.")


def select_backward_dim(g, shape, dim, indices, keepdim):
    """Gradient of a value-selecting reduction: `g` put at `indices` along `dim`."""
    if len(shape) == 0:
        return g.reshape(())
    if not keepdim:
        g = g.unsqueeze(dim)
        indices = indices.unsqueeze(dim)
    return g.new_zeros(tuple(shape)).scatter(dim, indices, g)


def _evenly(g, a, value):
    """Gradient of max()/min()/median() over all elements: shared among the equal ones."""
    mask = a == value
    return g * mask / mask.sum()


# ---------------------------------------------------------------- amin, max, min (all)


def _amin_kernel(a, dims=(), keepdim=False):
    axes = _axes(_all_if_empty(dims), a.ndim)
    _check_amax(a.shape, dims, axes, "amin")
    return np.amin(a, axis=axes, keepdims=keepdim)


def _amin_meta(a, dims=(), keepdim=False):
    axes = _axes(_all_if_empty(dims), len(a.shape))
    _check_amax(tuple(a.shape), dims, axes, "amin")
    return Spec(_reduce_shape(tuple(a.shape), axes, keepdim), a.dtype)


amin = register(
    "amin", kernel=_amin_kernel, meta=_amin_meta, node="AminBackward0",
    derivative=_amax_derivative, save=amax.save, samples=amax.samples,
    onnx=reduce_onnx("ReduceMin"))


def _max_all(fn, name):
    def kernel(a):
        _nonempty_all(name, a.shape)
        return fn(a)

    def meta(a):
        _nonempty_all(name, a.shape)
        return Spec((), a.dtype)

    return kernel, meta


def _all_samples(rng, dtype):
    return [Sample((rand_array(rng, s, dtype),), name=str(s)) for s in ((3, 4), (), (5,))] + [
        Sample((np.array([1.0, 2.0, 2.0, -1.0], dtype),), name="ties")]


max_all = register(
    "max", kernel=_max_all(np.max, "max")[0], meta=_max_all(np.max, "max")[1],
    node="MaxBackward1", derivative=lambda g, a, out: (_evenly(g, a, out),),
    save=lambda out, a: (a, out), samples=_all_samples)
min_all = register(
    "min", kernel=_max_all(np.min, "min")[0], meta=_max_all(np.min, "min")[1],
    node="MinBackward1", derivative=lambda g, a, out: (_evenly(g, a, out),),
    save=lambda out, a: (a, out), samples=_all_samples)

# ---------------------------------------------------------------- max.dim, min.dim, argmax


def _index_reduce(name, argfn):
    def kernel(a, dim, keepdim=False):
        if a.ndim == 0:
            _dim1(dim, 0)
            return a.copy(), np.zeros((), np.int64)
        d = _dim1(dim, a.ndim)
        _nonempty_dim(name, a.shape, d)
        idx = np.expand_dims(argfn(a, axis=d), d)
        vals = np.take_along_axis(a, idx, d)
        return _keep(vals, d, keepdim), _keep(idx.astype(np.int64), d, keepdim)

    def meta(a, dim, keepdim=False):
        d = _dim1(dim, len(a.shape))
        _nonempty_dim(name, tuple(a.shape), d)
        shape = _reduce_shape(tuple(a.shape), (d,) if len(a.shape) else (), keepdim)
        return [Spec(shape, a.dtype), Spec(shape, _dtype.int64)]

    return kernel, meta


def _value_select_derivative(grads, shape, dim, idx, keepdim):
    d = _dim1(dim, len(shape))
    return (select_backward_dim(grads[0], shape, d, idx, keepdim), None, None)


def _dim_samples(rng, dtype):
    out = [Sample((rand_array(rng, s, dtype), d, k), name=f"{s} dim={d} keep={k}")
           for s, d in (((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -1), ((), 0), ((5,), 0))
           for k in (False, True)]
    return out


def _save_indices(out, a, dim, keepdim=False):
    return (a.shape, dim, out[1], keepdim)


def _register_index_reduce(name, argfn, node):
    kernel, meta = _index_reduce(name, argfn)
    return register(f"{name}.dim", kernel=kernel, meta=meta, node=node,
                    derivative=_value_select_derivative, save=_save_indices,
                    samples=_dim_samples, public=name)


max_dim = _register_index_reduce("max", np.argmax, "MaxBackward0")
min_dim = _register_index_reduce("min", np.argmin, "MinBackward0")


def _arg_kernel(name, fn):
    def kernel(a, dim=None, keepdim=False):
        if dim is None:
            _nonempty_all(name, a.shape)
            out = np.asarray(fn(a.reshape(-1)), np.int64)
            return out.reshape((1,) * a.ndim) if keepdim else out
        if a.ndim == 0:
            _dim1(dim, 0)
            return np.zeros((), np.int64)
        d = _dim1(dim, a.ndim)
        _nonempty_dim(name, a.shape, d)
        out = fn(a, axis=d).astype(np.int64)
        return np.expand_dims(out, d) if keepdim else out

    def meta(a, dim=None, keepdim=False):
        if dim is None:
            _nonempty_all(name, tuple(a.shape))
            return Spec((1,) * len(a.shape) if keepdim else (), _dtype.int64)
        d = _dim1(dim, len(a.shape))
        _nonempty_dim(name, tuple(a.shape), d)
        axes = (d,) if len(a.shape) else ()
        return Spec(_reduce_shape(tuple(a.shape), axes, keepdim), _dtype.int64)

    return kernel, meta


def _arg_samples(rng, dtype):
    return [Sample((rand_array(rng, s, dtype), d, k), name=f"{s} dim={d} keep={k}")
            for s, d in (((3, 4), None), ((3, 4), 1), ((2, 3, 4), -1), ((), None), ((), 0))
            for k in (False, True)]


argmax = register("argmax", kernel=_arg_kernel("argmax", np.argmax)[0],
                  meta=_arg_kernel("argmax", np.argmax)[1], differentiable=False,
                  samples=_arg_samples)
argmin = register("argmin", kernel=_arg_kernel("argmin", np.argmin)[0],
                  meta=_arg_kernel("argmin", np.argmin)[1], differentiable=False,
                  samples=_arg_samples)

# ---------------------------------------------------------------- prod


def _prod_dtype(a, dtype):
    return _sum_dtype(a.dtype, dtype)


def _prod_all_kernel(a, dtype=None):
    dt = _prod_dtype(a, dtype)
    return np.asarray(np.prod(a, dtype=F32 if dt in HALF else dt)).astype(dt)


def _prod_dim_kernel(a, dim, keepdim=False, dtype=None):
    dt = _prod_dtype(a, dtype)
    axes = _axes((dim,), a.ndim)
    return np.prod(a, axis=axes, keepdims=keepdim, dtype=F32 if dt in HALF else dt).astype(
        dt, copy=False)


def _prod_meta(a, dim=None, keepdim=False, dtype=None):
    return _sum_meta(a, None if dim is None else (dim,), keepdim, dtype)


def _cat(tensors, d):
    from .._dispatch import call
    from .shape import cat

    return call(cat, tensors, d)


def prod_others(a, d):
    """Product of the other elements along dim `d`, for each element (zeros allowed)."""
    n = a.shape[d]
    if n <= 1:
        return a.new_ones(tuple(a.shape))
    ones = a.new_ones(tuple(a.shape[:d]) + (1,) + tuple(a.shape[d + 1:]))
    left = _cat([ones, a.narrow(d, 0, n - 1).cumprod(d)], d)
    right = _cat([a.narrow(d, 1, n - 1).flip([d]).cumprod(d).flip([d]), ones], d)
    return left * right


def _prod_all_derivative(g, a):
    if a.dim() == 0:
        return (g, None)
    flat = a.reshape(-1)
    return (g * prod_others(flat, 0).reshape(tuple(a.shape)), None)


def _prod_dim_derivative(g, a, dim, keepdim):
    if a.dim() == 0:
        return (g, None, None, None)
    d = _dim1(dim, a.dim())
    if not keepdim:
        g = g.unsqueeze(d)
    return (g * prod_others(a, d), None, None, None)


prod = register(
    "prod", kernel=_prod_all_kernel, meta=lambda a, dtype=None: _prod_meta(a, None, False, dtype),
    node="ProdBackward0", derivative=_prod_all_derivative, save=lambda out, a, dtype=None: (a,),
    samples=lambda rng, dt: _full_samples(rng, dt) + [
        Sample((np.array([1.5, 0.0, 2.0], dt),), name="zero")])
prod_dim = register(
    "prod.dim_int", kernel=_prod_dim_kernel, meta=_prod_meta, node="ProdBackward1",
    derivative=_prod_dim_derivative,
    save=lambda out, a, dim, keepdim=False, dtype=None: (a, dim, keepdim),
    samples=lambda rng, dt: _dim_samples(rng, dt) + [
        Sample((np.array([[1.5, 0.0, 2.0], [0, 1, 0]], dt), 1, False), name="zeros")],
    public="prod")

# ---------------------------------------------------------------- var, std


def _correction(correction) -> float:
    return 1.0 if correction is None else correction


def _var_check(a):
    dt = a.dtype if hasattr(a.dtype, "category") else _dtype.FROM_NP[a.dtype]
    if dt.category != _dtype.FLOAT:
        raise RuntimeError(
            "std and var only support floating point and complex dtypes")


def _var_kernel(a, dims=None, correction=None, keepdim=False):
    _var_check(a)
    axes = _axes(_all_if_empty(dims), a.ndim)
    n = _count(a.shape, axes) if a.ndim else 1
    x = a.astype(F32) if a.dtype in HALF else a
    mean = np.mean(x, axis=axes, keepdims=True) if x.size else np.zeros_like(x)
    ss = np.sum((x - mean) ** 2, axis=axes, keepdims=keepdim)
    return (ss / max(n - _correction(correction), 0)).astype(a.dtype, copy=False)


def _var_meta(a, dims=None, correction=None, keepdim=False):
    _var_check(a)
    axes = _axes(_all_if_empty(dims), len(a.shape))
    return Spec(_reduce_shape(tuple(a.shape), axes, keepdim), a.dtype)


def _centered(g, a, dims, keepdim):
    dims = _all_if_empty(dims)
    axes = tuple(range(a.dim())) if dims is None else dims
    n = _count(tuple(a.shape), axes) if a.dim() else 1
    mean = a.mean(list(axes), keepdim=True) if a.dim() else a
    return expand_reduced(g, a.shape, axes if a.dim() else None, keepdim), a - mean, n


def _var_derivative(g, a, dims, correction, keepdim):
    g, centered, n = _centered(g, a, dims, keepdim)
    den = n - _correction(correction)
    return (g * centered * (2.0 / den if den else float("inf")), None, None, None)


def _std_derivative(g, a, out, dims, correction, keepdim):
    g, centered, n = _centered(g, a, dims, keepdim)
    out = expand_reduced(out, a.shape, _all_if_empty(dims) if a.dim() else None, keepdim)
    return (g * centered / (out * (n - _correction(correction))), None, None, None)


def _var_samples(rng, dtype):
    out = []
    for s, d in (((3, 4), None), ((3, 4), (1,)), ((2, 3, 4), (0, 2)), ((5,), (0,))):
        for c, k in ((None, False), (0, True), (2, False)):
            out.append(Sample((rand_array(rng, s, dtype), d, c, k), name=f"{s} {d} c={c} k={k}"))
    return out


var = register(
    "var.correction", kernel=_var_kernel, meta=_var_meta, node="VarBackward0",
    derivative=_var_derivative,
    save=lambda out, a, dims=None, correction=None, keepdim=False: (a, dims, correction, keepdim),
    samples=_var_samples, public="var")
std = register(
    "std.correction", kernel=lambda *args: np.sqrt(_var_kernel(*args)), meta=_var_meta,
    node="StdBackward0", derivative=_std_derivative,
    save=lambda out, a, dims=None, correction=None, keepdim=False: (
        a, out, dims, correction, keepdim),
    samples=_var_samples, public="std")


def _var_mean_kernel(sqrt):
    def kernel(a, dims=None, correction=None, keepdim=False):
        v = _var_kernel(a, dims, correction, keepdim)
        axes = _axes(_all_if_empty(dims), a.ndim)
        m = np.mean(a, axis=axes, keepdims=keepdim).astype(a.dtype, copy=False)
        return (np.sqrt(v) if sqrt else v), m

    return kernel


def _var_mean_meta(a, dims=None, correction=None, keepdim=False):
    spec = _var_meta(a, dims, correction, keepdim)
    return [spec, Spec(spec.shape, spec.dtype)]


def _var_mean_derivative(grads, a, out, dims, correction, keepdim, sqrt):
    gv, gm = grads
    if sqrt:
        first = _std_derivative(gv, a, out, dims, correction, keepdim)[0]
    else:
        first = _var_derivative(gv, a, dims, correction, keepdim)[0]
    g, _, n = _centered(gm, a, dims, keepdim)
    return (first + g / n, None, None, None)


var_mean = register(
    "var_mean.correction", kernel=_var_mean_kernel(False), meta=_var_mean_meta,
    node="VarMeanBackward0",
    derivative=lambda grads, a, out, d, c, k: _var_mean_derivative(grads, a, out, d, c, k, False),
    save=lambda out, a, dims=None, correction=None, keepdim=False: (
        a, out[0], dims, correction, keepdim),
    samples=_var_samples, public="var_mean")
std_mean = register(
    "std_mean.correction", kernel=_var_mean_kernel(True), meta=_var_mean_meta,
    node="StdMeanBackward0",
    derivative=lambda grads, a, out, d, c, k: _var_mean_derivative(grads, a, out, d, c, k, True),
    save=lambda out, a, dims=None, correction=None, keepdim=False: (
        a, out[0], dims, correction, keepdim),
    samples=_var_samples, public="std_mean")

# ---------------------------------------------------------------- norms, logsumexp


def _norm_kernel(a, ord=2, dims=None, keepdim=False, dtype=None):
    if a.dtype.kind not in "f" and a.dtype not in HALF:
        raise RuntimeError(
            "linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
            f"{_dtype.FROM_NP[a.dtype].legacy}")
    dt = dtype.np if dtype is not None else a.dtype
    x = np.abs(a.astype(F32 if dt in HALF else dt))
    axes = _axes(_all_if_empty(dims), a.ndim)
    if ord == float("inf"):
        out = np.max(x, axis=axes, keepdims=keepdim, initial=0.0)
    elif ord == float("-inf"):
        out = np.min(x, axis=axes, keepdims=keepdim)
    elif ord == 0:
        out = np.sum(x != 0, axis=axes, keepdims=keepdim).astype(x.dtype)
    elif ord == 1:
        out = np.sum(x, axis=axes, keepdims=keepdim)
    elif ord == 2:
        out = np.sqrt(np.sum(x * x, axis=axes, keepdims=keepdim))
    else:
        out = np.sum(x ** ord, axis=axes, keepdims=keepdim) ** (1.0 / ord)
    return np.asarray(out).astype(dt, copy=False)


def _norm_meta(a, ord=2, dims=None, keepdim=False, dtype=None):
    if a.dtype.category != _dtype.FLOAT:
        raise RuntimeError(
            "linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
            f"{a.dtype.legacy}")
    axes = _axes(_all_if_empty(dims), len(a.shape))
    return Spec(_reduce_shape(tuple(a.shape), axes, keepdim), dtype or a.dtype)


def _norm_derivative(g, a, out, ord, dims, keepdim):
    dims = _all_if_empty(dims) if a.dim() else None
    g = expand_reduced(g, a.shape, dims, keepdim)
    out = expand_reduced(out, a.shape, dims, keepdim)
    if ord == 0:
        return (g * 0, None, None, None, None)
    if ord == 1:
        return (g * a.sign(), None, None, None, None)
    if ord in (float("inf"), float("-inf")):
        mask = a.abs() == out
        count = mask.sum(list(dims) if dims is not None else list(range(a.dim())),
                         keepdim=True) if a.dim() else mask
        return (g * a.sign() * mask / count, None, None, None, None)
    if ord == 2:
        safe = out.where(out != 0, out.new_ones(()))
        return (g * a / safe * (out != 0), None, None, None, None)
    scale = a * a.abs().pow(ord - 2) / out.pow(ord - 1)
    return (g * scale.where(out != 0, scale.new_zeros(())), None, None, None, None)


def _norm_samples(rng, dtype):
    out = []
    for s, d in (((3, 4), None), ((3, 4), (1,)), ((2, 3, 4), (0, 2)), ((), None)):
        for o, k in ((2, False), (1, True), (3, False), (float("inf"), False), (0, False)):
            out.append(Sample((rand_array(rng, s, dtype), o, d, k), name=f"{s} {o} {d} {k}"))
    return out


vector_norm = register(
    "linalg_vector_norm", kernel=_norm_kernel, meta=_norm_meta,
    node="LinalgVectorNormBackward0", derivative=_norm_derivative,
    save=lambda out, a, ord=2, dims=None, keepdim=False, dtype=None: (a, out, ord, dims, keepdim),
    samples=_norm_samples, public="norm")


def _logsumexp_kernel(a, dims, keepdim=False):
    dt = a.dtype if a.dtype.kind == "f" or a.dtype in HALF else np.dtype(
        _dtype.defaults.float.np)
    x = a.astype(F32 if dt in HALF else dt)
    axes = _axes(dims, a.ndim)
    if x.size == 0:
        return np.log(np.sum(np.exp(x), axis=axes, keepdims=keepdim)).astype(dt)
    m = np.max(x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    out = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    return (out if keepdim else np.squeeze(out, axes)).astype(dt, copy=False)


def _logsumexp_meta(a, dims, keepdim=False):
    axes = _axes(dims, len(a.shape))
    dt = a.dtype if a.dtype.category == _dtype.FLOAT else _dtype.defaults.float
    return Spec(_reduce_shape(tuple(a.shape), axes, keepdim), dt)


logsumexp = register(
    "logsumexp", kernel=_logsumexp_kernel, meta=_logsumexp_meta, node="LogsumexpBackward0",
    derivative=lambda g, a, out, dims, keepdim: (
        expand_reduced(g, a.shape, dims if a.dim() else None, keepdim)
        * (a - expand_reduced(out, a.shape, dims if a.dim() else None, keepdim)).exp(),
        None, None),
    save=lambda out, a, dims, keepdim=False: (a, out, dims, keepdim),
    samples=lambda rng, dt: [s for s in _reduce_samples(rng, dt) if s.args[1] is not None])

# ---------------------------------------------------------------- cumulative


def _cum_kernel(fn):
    def kernel(a, dim, dtype=None):
        dt = _sum_dtype(a.dtype, dtype)
        if a.ndim == 0:
            _dim1(dim, 0)
            return a.astype(dt)
        d = _dim1(dim, a.ndim)
        return fn(a, axis=d, dtype=F32 if dt in HALF else dt).astype(dt, copy=False)

    return kernel


def _cum_meta(a, dim, dtype=None):
    _dim1(dim, len(a.shape))
    dt = dtype if dtype is not None else (
        _dtype.int64 if a.dtype.category != _dtype.FLOAT else a.dtype)
    return Spec(tuple(a.shape), dt)


def _cum_samples(rng, dtype):
    return [Sample((rand_array(rng, s, dtype), d), name=f"{s} {d}")
            for s, d in (((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -1), ((), 0), ((0, 3), 1))]


def _rev_cumsum(x, d):
    return x.flip([d]).cumsum(d).flip([d])


cumsum = register(
    "cumsum", kernel=_cum_kernel(np.cumsum), meta=_cum_meta, node="CumsumBackward0",
    derivative=lambda g, dim: (_rev_cumsum(g, dim) if g.dim() else g, None),
    save=lambda out, a, dim, dtype=None: (dim,), samples=_cum_samples)


def _cumprod_derivative(g, a, out, dim):
    # Inputs without zeros: sum over later positions of g * out, divided by the input.
    if a.dim() == 0 or a.numel() == 0:
        return (g, None)
    return (_rev_cumsum(g * out, dim) / a, None)


cumprod = register(
    "cumprod", kernel=_cum_kernel(np.cumprod), meta=_cum_meta, node="CumprodBackward0",
    derivative=_cumprod_derivative, save=lambda out, a, dim, dtype=None: (a, out, dim),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt, (0.5, 1.5)), d), name=f"{s} {d}")
                             for s, d in (((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -1), ((), 0))])
cumsum_ = inplace_variant(cumsum, "cumsum_")


def _cumext_kernel(ufunc):
    def kernel(a, dim):
        if a.ndim == 0:
            _dim1(dim, 0)
            return a.copy(), np.zeros((), np.int64)
        d = _dim1(dim, a.ndim)
        vals = ufunc.accumulate(a, axis=d)
        if a.shape[d] == 0:
            return vals, np.zeros(a.shape, np.int64)
        # The index of the last element equal to the running extreme so far.
        hit = a == vals
        if a.dtype.kind == "f":  # a NaN is the running extreme from where it appears
            hit |= np.isnan(a)
        pos = np.arange(a.shape[d]).reshape((-1,) + (1,) * (a.ndim - d - 1))
        idx = np.maximum.accumulate(np.where(hit, pos, 0), axis=d)
        return vals, idx.astype(np.int64)

    return kernel


def _cumext_meta(a, dim):
    _dim1(dim, len(a.shape))
    return [Spec(tuple(a.shape), a.dtype), Spec(tuple(a.shape), _dtype.int64)]


def _cumext_derivative(grads, shape, dim, idx):
    g = grads[0]
    if len(shape) == 0:
        return (g, None)
    return (g.new_zeros(tuple(shape)).scatter_add(dim, idx, g), None)


cummax = register(
    "cummax", kernel=_cumext_kernel(np.maximum), meta=_cumext_meta, node="CummaxBackward0",
    derivative=_cumext_derivative, save=lambda out, a, dim: (a.shape, dim, out[1]),
    samples=_cum_samples)
cummin = register(
    "cummin", kernel=_cumext_kernel(np.minimum), meta=_cumext_meta, node="CumminBackward0",
    derivative=_cumext_derivative, save=lambda out, a, dim: (a.shape, dim, out[1]),
    samples=_cum_samples)

# ---------------------------------------------------------------- all, any, count_nonzero


def _logic_dtype(dt) -> np.dtype:
    return np.dtype(np.uint8) if dt == np.uint8 else np.dtype(np.bool_)


def _logic_kernel(fn):
    def kernel(a, dims=None, keepdim=False):
        axes = _axes(None if dims is None else dims, a.ndim)
        return np.asarray(fn(a, axis=axes, keepdims=keepdim)).astype(_logic_dtype(a.dtype))

    return kernel


def _logic_meta(a, dims=None, keepdim=False):
    axes = _axes(dims, len(a.shape))
    dt = _dtype.uint8 if a.dtype is _dtype.uint8 else _dtype.bool_
    return Spec(_reduce_shape(tuple(a.shape), axes, keepdim), dt)


def _logic_samples(rng, dtype):
    out = []
    for s, d in (((3, 4), (1,)), ((3, 4), (0,)), ((2, 3, 4), (0, 2)), ((0, 3), (0,))):
        x = (rng.random(s) > 0.3).astype(dtype)
        out += [Sample((x, d, False)), Sample((x, d, True))]
    return out


def _logic_all_samples(rng, dtype):
    return [Sample((np.asarray(rng.random(s) > p).astype(dtype),)) for s in ((3, 4), (), (0,))
            for p in (0.0, 0.5)] + [Sample((np.arange(4) % 2 == 0,), name="bool")]


for _fn, _name in ((np.all, "all"), (np.any, "any")):
    register(_name, kernel=_logic_kernel(_fn), meta=_logic_meta, differentiable=False,
             samples=_logic_all_samples)
    register(f"{_name}.dim", kernel=lambda a, dim, keepdim=False, f=_fn: _logic_kernel(f)(
                 a, (dim,), keepdim),
             meta=lambda a, dim, keepdim=False: _logic_meta(a, (dim,), keepdim),
             differentiable=False, public=_name,
             samples=lambda rng, dt: [Sample((s.args[0], s.args[1][0], s.args[2]))
                                      for s in _logic_samples(rng, dt)])
    register(f"{_name}.dims", kernel=_logic_kernel(_fn), meta=_logic_meta,
             differentiable=False, samples=_logic_samples, public=_name)


def _count_nonzero_kernel(a, dims=None):
    if isinstance(dims, int):
        dims = (dims,)
    axes = _axes(dims, a.ndim)
    return np.asarray(np.count_nonzero(a, axis=axes)).astype(np.int64)


def _count_nonzero_meta(a, dims=None):
    if isinstance(dims, int):
        dims = (dims,)
    return Spec(_reduce_shape(tuple(a.shape), _axes(dims, len(a.shape)), False), _dtype.int64)


count_nonzero = register(
    "count_nonzero.dim_IntList", kernel=_count_nonzero_kernel, meta=_count_nonzero_meta,
    differentiable=False, public="count_nonzero",
    samples=lambda rng, dt: [Sample((s.args[0], s.args[1])) for s in _logic_samples(rng, dt)])
count_nonzero_all = register(
    "count_nonzero", kernel=_count_nonzero_kernel, meta=_count_nonzero_meta,
    differentiable=False, samples=lambda rng, dt: [
        Sample(((rng.random((3, 4)) > 0.5).astype(dt),)),
        Sample(((rng.random((3, 4)) > 0.5).astype(dt), 1))])

# ---------------------------------------------------------------- sorting and selection


def _median_all_kernel(a):
    if a.size == 0:
        return np.asarray(np.nan, a.dtype)
    flat = np.sort(a.reshape(-1))
    if a.dtype.kind == "f" and np.isnan(flat[-1]):  # NaN propagates, as in PyTorch
        return np.asarray(np.nan, a.dtype)
    return np.asarray(flat[(flat.size - 1) // 2])


median = register(
    "median", kernel=_median_all_kernel, meta=lambda a: Spec((), a.dtype),
    node="MedianBackward0", derivative=lambda g, a, out: (_evenly(g, a, out),),
    save=lambda out, a: (a, out), samples=_all_samples)


def _kth(a, d, k):
    """Values and indices of the k-th smallest (0-based) along `d`, stable for ties."""
    order = np.argsort(a, axis=d, kind="stable")
    idx = np.take(order, [k], axis=d)
    return np.take_along_axis(a, idx, d), idx.astype(np.int64)


def _median_dim_kernel(a, dim, keepdim=False):
    if a.ndim == 0:
        _dim1(dim, 0)
        return a.copy(), np.zeros((), np.int64)
    d = _dim1(dim, a.ndim)
    _nonempty_dim("median", a.shape, d)
    v, i = _kth(a, d, (a.shape[d] - 1) // 2)
    if a.dtype.kind == "f":  # a row with NaN has median NaN, at its first NaN
        nan = np.isnan(a)
        has = nan.any(axis=d, keepdims=True)
        v = np.where(has, np.nan, v).astype(a.dtype, copy=False)
        i = np.where(has, np.argmax(nan, axis=d, keepdims=True), i)
    return _keep(v, d, keepdim), _keep(i, d, keepdim)


def _selection_meta(name):
    def meta(a, dim=-1, keepdim=False):
        d = _dim1(dim, len(a.shape))
        _nonempty_dim(name, tuple(a.shape), d)
        shape = _reduce_shape(tuple(a.shape), (d,) if len(a.shape) else (), keepdim)
        return [Spec(shape, a.dtype), Spec(shape, _dtype.int64)]

    return meta


median_dim = register(
    "median.dim", kernel=_median_dim_kernel, meta=_selection_meta("median"),
    node="MedianBackward1", derivative=_value_select_derivative, save=_save_indices,
    samples=_dim_samples, public="median")


def _mode_kernel(a, dim=-1, keepdim=False):
    if a.ndim == 0:
        _dim1(dim, 0)
        return a.copy(), np.zeros((), np.int64)
    d = _dim1(dim, a.ndim)
    _nonempty_dim("mode", a.shape, d)
    x = np.moveaxis(a, d, -1)
    n = x.shape[-1]
    s = np.sort(x, axis=-1)
    # Along the sorted values, the length of the run so far at each position; the first
    # position reaching the longest run ends the most frequent (and smallest) value's run.
    pos = np.arange(n)
    new_run = np.concatenate([np.ones(s.shape[:-1] + (1,), bool), s[..., 1:] != s[..., :-1]], -1)
    start = np.maximum.accumulate(np.where(new_run, pos, 0), axis=-1)
    best = np.argmax(pos - start, axis=-1)[..., None]
    vals = np.take_along_axis(s, best, -1)
    idx = np.max(np.where(x == vals, pos, -1), axis=-1, keepdims=True)
    vals = np.moveaxis(vals, -1, d)
    idx = np.moveaxis(idx, -1, d).astype(np.int64)
    return _keep(vals, d, keepdim), _keep(idx, d, keepdim)


def _mode_samples(rng, dtype):
    return [Sample((rng.integers(0, 3, s).astype(dtype), d, k), name=f"{s} {d} {k}")
            for s, d in (((3, 5), 1), ((4, 3), 0), ((2, 3, 4), -1), ((), 0))
            for k in (False, True)]


mode = register(
    "mode", kernel=_mode_kernel, meta=_selection_meta("mode"), node="ModeBackward0",
    derivative=_value_select_derivative, save=lambda out, a, dim=-1, keepdim=False: (
        a.shape, dim, out[1], keepdim), samples=_mode_samples,
    gradcheck=False)  # its samples have ties by design: finite differences split them


def _kthvalue_kernel(a, k, dim=-1, keepdim=False):
    if a.ndim == 0:
        _dim1(dim, 0)
        if k != 1:
            raise IndexError("kthvalue(): selected number k out of range for dimension 0")
        return a.copy(), np.zeros((), np.int64)
    d = _dim1(dim, a.ndim)
    if not 1 <= k <= a.shape[d]:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    v, i = _kth(a, d, k - 1)
    return _keep(v, d, keepdim), _keep(i, d, keepdim)


def _kthvalue_meta(a, k, dim=-1, keepdim=False):
    d = _dim1(dim, len(a.shape))
    size = a.shape[d] if len(a.shape) else 1
    if not 1 <= k <= size:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    shape = _reduce_shape(tuple(a.shape), (d,) if len(a.shape) else (), keepdim)
    return [Spec(shape, a.dtype), Spec(shape, _dtype.int64)]


kthvalue = register(
    "kthvalue", kernel=_kthvalue_kernel, meta=_kthvalue_meta, node="KthvalueBackward0",
    derivative=lambda grads, shape, dim, idx, keepdim: (
        _value_select_derivative(grads, shape, dim, idx, keepdim)[0], None, None, None),
    save=lambda out, a, k, dim=-1, keepdim=False: (a.shape, dim, out[1], keepdim),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), k, d, kd), name=f"{s} {k} {d}")
                             for s, k, d in (((3, 4), 2, 1), ((3, 4), 3, 0), ((5,), 1, 0),
                                             ((2, 3, 4), 4, -1), ((), 1, 0))
                             for kd in (False, True)])


def _sort_order(a, d, descending, stable=True):
    if descending:
        # Stable descending: reverse, stable-sort ascending, reverse back (keeps first-wins).
        if a.dtype == np.bool_:
            key = ~a
        elif a.dtype.kind == "u":
            key = a.max(initial=0) - a
        elif a.dtype.kind in "iu":
            key = -a
        else:  # NaN sorts as the largest value, so it comes first
            return np.lexsort((-a, ~np.isnan(a)), axis=d)
        return np.argsort(key, axis=d, kind="stable")
    return np.argsort(a, axis=d, kind="stable")


def _sort_kernel(a, dim=-1, descending=False):
    if a.ndim == 0:
        _dim1(dim, 0)
        return a.copy(), np.zeros((), np.int64)
    d = _dim1(dim, a.ndim)
    order = _sort_order(a, d, descending)
    return np.take_along_axis(a, order, d), order.astype(np.int64)


def _sort_meta(a, dim=-1, descending=False):
    _dim1(dim, len(a.shape))
    return [Spec(tuple(a.shape), a.dtype), Spec(tuple(a.shape), _dtype.int64)]


def _sort_derivative(grads, shape, dim, idx):
    g = grads[0]
    if len(shape) == 0:
        return (g, None, None)
    return (g.new_zeros(tuple(shape)).scatter(dim, idx, g), None, None)


def _sort_samples(rng, dtype):
    return [Sample((rand_array(rng, s, dtype), d, desc), name=f"{s} {d} {desc}")
            for s, d in (((3, 4), -1), ((3, 4), 0), ((2, 3, 4), 1), ((), 0), ((0, 3), 1))
            for desc in (False, True)]


sort = register(
    "sort", kernel=_sort_kernel, meta=_sort_meta, node="SortBackward0",
    derivative=_sort_derivative,
    save=lambda out, a, dim=-1, descending=False: (a.shape, dim, out[1]),
    samples=_sort_samples)
sort_stable = register(
    "sort.stable", kernel=lambda a, stable, dim=-1, descending=False: _sort_kernel(
        a, dim, descending),
    meta=lambda a, stable, dim=-1, descending=False: _sort_meta(a, dim, descending),
    node="SortBackward1",
    derivative=lambda grads, shape, dim, idx: (_sort_derivative(grads, shape, dim, idx)[0],
                                               None, None, None),
    save=lambda out, a, stable, dim=-1, descending=False: (a.shape, dim, out[1]),
    samples=lambda rng, dt: [Sample((s.args[0], True) + s.args[1:], name=s.name)
                             for s in _sort_samples(rng, dt)], public="sort")
argsort = register(
    "argsort", kernel=lambda a, dim=-1, descending=False: _sort_kernel(a, dim, descending)[1],
    meta=lambda a, dim=-1, descending=False: _sort_meta(a, dim, descending)[1],
    differentiable=False, samples=_sort_samples)


def _topk_kernel(a, k, dim=-1, largest=True, sorted=True):
    if a.ndim == 0:
        _dim1(dim, 0)
        if k != 1:
            raise RuntimeError("selected index k out of range")
        return a.copy(), np.zeros((), np.int64)
    d = _dim1(dim, a.ndim)
    if not 0 <= k <= a.shape[d]:
        raise RuntimeError("selected index k out of range")
    order = _sort_order(a, d, largest)
    idx = np.take(order, np.arange(k), axis=d)
    return np.take_along_axis(a, idx, d), idx.astype(np.int64)


def _topk_meta(a, k, dim=-1, largest=True, sorted=True):
    d = _dim1(dim, len(a.shape))
    size = a.shape[d] if len(a.shape) else 1
    if not 0 <= k <= size:
        raise RuntimeError("selected index k out of range")
    shape = tuple(a.shape[:d]) + (k,) + tuple(a.shape[d + 1:]) if len(a.shape) else ()
    return [Spec(shape, a.dtype), Spec(shape, _dtype.int64)]


topk = register(
    "topk", kernel=_topk_kernel, meta=_topk_meta, node="TopkBackward0",
    derivative=lambda grads, shape, dim, idx: (_sort_derivative(grads, shape, dim, idx)[0],
                                               None, None, None, None),
    save=lambda out, a, k, dim=-1, largest=True, sorted=True: (a.shape, dim, out[1]),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), k, d, lg), name=f"{s} {k} {d}")
                             for s, k, d in (((3, 4), 2, -1), ((3, 4), 3, 0), ((5,), 5, 0),
                                             ((2, 3, 4), 0, 1), ((), 1, 0))
                             for lg in (True, False)])
