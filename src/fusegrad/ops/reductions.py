"""Reductions (sum, mean, amax, amin, max/min, argmax/argmin, prod, all/any,
count_nonzero) and the softmax family.
"""

from __future__ import annotations

import functools

import numpy as np

from .. import _dtype
from .._dispatch import call, save_shape
from ..autograd.grad_mode import is_grad_enabled
from . import _native, _parallel
from . import _onnx as ox
from ._onnx import reduce as reduce_onnx
from ._onnx import softmax as softmax_onnx
from ._util import (
    F32,
    HALF,
    Spec,
    c_contiguous,
    c_gradient,
    cj,
    dtype_of,
    half_formula,
    half_in_float32,
    in_format,
    not_implemented_for,
    numel,
    numpy_backward,
    rand_array,
    real_part_for,
    saved_array,
    saved_shape,
    strided_view,
    wrap_dim,
    wrap_dims,
    wrap_grad,
)
from .activation_backward import first_order_kernel
from .registry import REGISTRY, Sample, register

# (a quantized tensor: PyTorch's refusal names the `IntList_out` overload)
_SUM_REFUSAL = {"error": "sum.IntList_out"}

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


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def _array_out_supported() -> bool:
    """Whether ufuncs take `out=...` (NumPy 2.3 on): a reduction to one element then returns
    a 0-d array instead of a NumPy scalar that dispatch would have to wrap again."""
    try:
        return np.add.reduce(np.zeros(1, np.float32), None, out=...).__class__ is np.ndarray
    except (TypeError, ValueError):
        return False


if _array_out_supported():
    def _sum_all_kernel(a, dtype=None):
        dt = a.dtype
        if (dt is _F32 or dt is _F64) and dtype is None:
            return np.add.reduce(a, None, out=...)  # positional axis: no keyword to parse
        return _sum_kernel(a, None, False, dtype)
else:  # pragma: no cover - NumPy before 2.3
    def _sum_all_kernel(a, dtype=None):
        dt = a.dtype
        if (dt is _F32 or dt is _F64) and dtype is None:
            return np.add.reduce(a, None)
        return _sum_kernel(a, None, False, dtype)


def row_major(out, a: np.ndarray):
    """`out`, a reduction of `a`, with a new tensor's row-major strides, as PyTorch allocates
    a reduction's result: NumPy's follows the memory order of a permuted `a` (a
    channels_last tensor's sum over its height was not viewable). A copy only for such an
    `a`, or an empty one (NumPy's flag says it is C-contiguous whatever its strides); one
    C-contiguous gives row-major results already."""
    return out if a.flags.c_contiguous and a.size else in_format(out, None)


def _sum_kernel(a, dims, keepdim=False, dtype=None):
    dt = _sum_dtype(a.dtype, dtype)
    axes = _axes(dims, a.ndim)
    if dtype is None and axes and max(axes) == len(axes) - 1 and len(axes) < a.ndim:
        out = _sum_leading(a, len(axes), keepdim)  # (a bias's gradient)
        if out is not None:
            return out
    acc = F32 if dt in HALF else dt
    if dtype is not None and a.dtype != dt:
        # `dtype=` casts the input first (float64 values rounded to half)
        a = real_part_for(a, dt).astype(dt)
    return row_major(np.sum(a, axis=axes, dtype=acc, keepdims=keepdim).astype(dt, copy=False),
                     a)




def _sum_leading(a: np.ndarray, k: int, keepdim: bool) -> np.ndarray | None:
    """The sum of C-contiguous float32/float64 `a` over its `k` leading axes, in C
    (`native/pointwise.c`), the bits NumPy's sum gives; None where it does not apply (a
    single column, which NumPy sums pairwise; no C kernels). A small sum over the first
    axis is NumPy's own."""
    if k == 1 and a.size < _parallel.MIN_CHUNK and a.dtype.char in "fd" and a.ndim > 1:
        # Too small to share between threads: NumPy's own sum (the same bits) costs less
        # than the C call from here (in a training step 6.4 against 9.7 us for 64x128).
        return row_major(np.add.reduce(a, 0, keepdims=keepdim), a)
    if not _native.enabled() or not a.flags.c_contiguous or not a.size:
        return None
    rows = 1
    for s in a.shape[:k]:
        rows *= s
    cols = a.size // rows
    if cols < 2:
        return None
    fn = _native.typed("pointwise", "sum_rows", a.dtype, "ppiiii")
    if fn is None:
        return None
    shape = (1,) * k + a.shape[k:] if keepdim else a.shape[k:]
    out = np.empty(shape, a.dtype)
    _native.run_pieces(fn, (_native.address(a), _native.address(out)), (rows, cols), cols,
                       a.size)
    return out


def sum_to_shape(g, shape):
    """Sum `g` down to `shape` (the adjoint of broadcasting `shape` to g's shape)."""
    shape = tuple(shape)
    if tuple(g.shape) == shape:
        return g
    lead = g.dim() - len(shape)
    if lead < 0:  # `shape` has more (size-1) dims: a one-element value written by index_put
        g = g.reshape((1,) * -lead + tuple(g.shape))
        lead = 0
    if numpy_backward(g):  # backward's common case (a bias's gradient): on the arrays
        return wrap_grad(sum_to_array(g._data, shape))
    if not shape:  # (PyTorch's sum_to: a full sum, recorded as SumBackward0)
        return g.sum()
    dims = list(range(lead))
    dims += [lead + i for i, s in enumerate(shape) if s == 1 and g.shape[lead + i] != 1]
    if dims:
        g = g.sum(dims, keepdim=True)
    if lead:
        g = g.reshape(shape)
    return g


def sum_to_array(data: np.ndarray, shape: tuple) -> np.ndarray:
    """`sum_to_shape` of an array with no more dimensions than `shape`'s missing in front:
    sum.dim_IntList's own kernel, the bits the recorded sum gives."""
    lead = data.ndim - len(shape)
    dims = [lead + i for i, s in enumerate(shape) if s == 1 and data.shape[lead + i] != 1]
    if not dims and shape:  # (a bias's gradient: the leading dims only, no reshape)
        if not lead:
            return data
        out = _sum_leading(data, lead, False)
        return out if out is not None else _sum_kernel(data, list(range(lead)), False)
    data = _sum_kernel(data, list(range(lead)) + dims, True)
    return data.reshape(shape) if lead else data


def _sum_meta(a, dims=None, keepdim=False, dtype=None):
    dt = dtype if dtype is not None else (
        _dtype.int64 if a.dtype.category < _dtype.FLOAT else a.dtype)
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


def _sum_derivative(g, shape):
    return (g.expand(shape),)


# On arrays: the read-only view `expand`'s kernel makes of the 0-d gradient (not a new
# array: the engine never adds into a view).
_sum_derivative.on_arrays = lambda g, shape: (strided_view(g, tuple(shape), (0,) * len(shape)),)

sum_ = register(
    "sum", kernel=_sum_all_kernel,
    quantized=_SUM_REFUSAL,
    meta=lambda a, dtype=None: _sum_meta(a, None, False, dtype), node="SumBackward0",
    derivative=_sum_derivative,
    save=save_shape,
    samples=_full_samples, onnx=reduce_onnx("ReduceSum", full=True),
    lowering=lambda v, a, dtype=None: v.reduce("sum", a, None, False, dtype),
    saved_names=("self_sym_sizes",))
sum_dim = register(
    "sum.dim_IntList", kernel=_sum_kernel, meta=_sum_meta, node="SumBackward1",
    quantized=_SUM_REFUSAL,
    derivative=lambda g, shape, dims, keepdim: (expand_reduced(g, shape, dims, keepdim),),
    save=lambda out, a, dims, keepdim=False, dtype=None: (saved_shape(a), dims, keepdim),
    samples=_reduce_samples, onnx=reduce_onnx("ReduceSum"), public="sum",
    lowering=lambda v, a, dims, keepdim=False, dtype=None: v.reduce("sum", a, dims, keepdim,
                                                                      dtype),
    saved_names=("self_sym_sizes", "dim", "keepdim"))


def _trace_dtype(a) -> _dtype.dtype:
    """trace's result dtype (integers sum to int64), after PyTorch's checks."""
    if len(a.shape) != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {len(a.shape)}")
    dt = a.dtype if isinstance(a.dtype, _dtype.dtype) else _dtype.FROM_NP[a.dtype]
    if dt is _dtype.bool_:
        raise not_implemented_for("trace", "Bool")
    return dt if dt.is_floating_point or dt.is_complex else _dtype.int64


def _trace_kernel(a):
    dt = _trace_dtype(a)
    return _sum_all_kernel(np.ascontiguousarray(np.diagonal(a)), None if dt.np == a.dtype
                           else dt)


def _trace_derivative(g, shape):
    # The gradient on the diagonal, zeros elsewhere (a product, so it differentiates again).
    # The mask comes from the factory, so that AOT autograd tracing this derivative records
    # it as an op (a tensor made from NumPy here is unknown to the trace, which gave up).
    from .._creation import eye

    mask = eye(*shape, dtype=g.dtype, device="meta" if g.is_meta else None)
    return (call(REGISTRY["mul.Tensor"], g.expand(shape), mask),)


trace = register(
    "trace", kernel=_trace_kernel, meta=lambda a: Spec((), _trace_dtype(a)),
    node="TraceBackward0", derivative=_trace_derivative, save=save_shape, autocast="fp32",
    samples=lambda r, dt: [Sample((rand_array(r, s, dt),), name=str(s))
                           for s in ((3, 4), (4, 4), (0, 3))],
    saved_names=("self_sym_sizes",), onnx=ox.trace)


def _mean_check(a, dtype, name="mean"):
    dt = dtype if dtype is not None else _dtype.FROM_NP[a.dtype] if hasattr(
        a.dtype, "kind") else a.dtype
    if dt.category < _dtype.FLOAT:
        which = "Input" if dtype is None else "Optional"
        raise RuntimeError(
            f"{name}(): could not infer output dtype. {which} dtype must be either a floating "
            f"point or complex dtype. Got: {dt.legacy}")
    return dt


def _mean_kernel(a, dims=None, keepdim=False, dtype=None):
    # The sum, then one division by the count in the sum's type: `np.mean`'s value (it
    # divides in double and rounds once, the same float) without its Python layers and
    # error-state switch (8 us of a tiny tensor's 9), and without its warning on no values.
    nt = a.dtype
    if (nt is _F32 or nt is _F64) and dtype is None:
        dt = acc = None
    else:
        dt = _mean_check(a, dtype).np
        acc = F32 if dt in HALF else dt
        a = real_part_for(a, dt)
        # (Unlike sum's, mean's `dtype=` does not round the input to it first: the values
        # are summed in `acc`, as PyTorch's mean of float64 with dtype=float16 is.)
    total = np.add.reduce(a, _axes(dims, a.ndim) if dims is not None else None, acc, None,
                          keepdim)
    if total.__class__ is not np.ndarray:
        total = np.asarray(total)
    count = a.size // total.size if total.size else 1
    if count:
        total = np.true_divide(total, count, out=total)
    else:  # no values: nan, as PyTorch's, without NumPy's warning
        with np.errstate(invalid="ignore", divide="ignore"):
            total = np.true_divide(total, count, out=total)
    return row_major(total if dt is None else total.astype(dt, copy=False), a)


def _mean_meta(a, dims=None, keepdim=False, dtype=None):
    spec = _sum_meta(a, dims, keepdim, dtype)
    spec.dtype = _mean_check(a, dtype)
    return spec


def _count(shape, dims) -> int:
    n = 1
    for d in wrap_dims(dims, len(shape)) if len(shape) else ():
        n *= shape[d]
    return n


def _mean_decomposition(a, dims=None, keepdim=False, dtype=None):
    """The sum over `dims` (all when None or empty) divided by the number of elements."""
    x = a if dtype is None else a.to(dtype)
    return call(sum_dim, x, dims, keepdim) / _count(tuple(x.shape), _all_if_empty(dims))


mean = register(
    "mean", kernel=lambda a, dtype=None: _mean_kernel(a, None, False, dtype),
    quantized={"kernel": "_mean"},
    meta=lambda a, dtype=None: _mean_meta(a, None, False, dtype), node="MeanBackward0",
    derivative=lambda g, shape: (g.expand(shape) / max(_count(shape, None), 1),),
    save=lambda out, a, dtype=None: (a.shape,), samples=_full_samples,
    onnx=reduce_onnx("ReduceMean", full=True),
    lowering=lambda v, a, dtype=None: v.mean(a, None, False, dtype),
    tolerance={"float32": 1e-5},
    decomposition=lambda a, dtype=None: call(sum_, a if dtype is None else a.to(dtype))
    / a.numel(),
    saved_names=("self_sym_sizes",))
mean_dim = register(
    "mean.dim", kernel=_mean_kernel, meta=_mean_meta, node="MeanBackward1",
    quantized={"kernel": "_mean"},
    derivative=lambda g, shape, dims, keepdim: (
        expand_reduced(g, shape, dims, keepdim) / max(_count(shape, dims), 1),),
    save=lambda out, a, dims, keepdim=False, dtype=None: (a.shape, dims, keepdim),
    samples=lambda rng, dt: [s for s in _reduce_samples(rng, dt) if np.size(s.args[0])],
    onnx=reduce_onnx("ReduceMean"), public="mean", decomposition=_mean_decomposition,
    lowering=lambda v, a, dims=None, keepdim=False, dtype=None: v.mean(a, dims, keepdim, dtype),
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
    if not len(shape):
        return
    # PyTorch names the first empty dim in the order given, as given (-1, not 1).
    for d in (dims,) if isinstance(dims, int) else dims:
        if shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


def _amax_kernel(a, dims=(), keepdim=False):
    axes = _axes(_all_if_empty(dims), a.ndim)
    _check_amax(a.shape, dims, axes)
    return row_major(np.amax(a, axis=axes, keepdims=keepdim), a)


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
    lowering=lambda v, a, dims=(), keepdim=False: v.reduce("max", a, dims, keepdim),
    derivative=_amax_derivative, save=lambda out, a, dims=(), keepdim=False: (a, out, dims,
                                                                               keepdim),
    samples=lambda rng, dt: [Sample((s.args[0], s.args[1] if s.args[1] is not None else ()) +
                                    s.args[2:], name=s.name)
                             for s in _reduce_samples(rng, dt) if np.size(s.args[0])],
    onnx=reduce_onnx("ReduceMax"))

# ---------------------------------------------------------------- softmax family


def check_softmax_dtype(a, dim, log: bool = False) -> bool:
    """PyTorch's NotImplementedError for (log_)softmax of a non-float tensor (array or fake),
    naming the CPU kernel that would run: the last-dim one or the general one. Returns
    whether the tensor is empty and of such a dtype (PyTorch then returns it unchanged)."""
    dt = dtype_of(a)
    if dt.category == _dtype.FLOAT:
        return False
    shape = tuple(a.shape)
    if not numel(shape):
        return True
    name = "log_softmax" if log else "softmax"
    last = len(shape) <= 1 or wrap_dims(dim, len(shape))[0] == len(shape) - 1
    raise not_implemented_for(f"{name}_{'lastdim_' if last else ''}kernel_impl", dt)


def _softmax_kernel(a, dim, log=False):
    if a.dtype.kind != "f" and a.dtype not in HALF and check_softmax_dtype(a, dim, log):
        return a.copy()
    dt = a.dtype
    x = a.astype(F32) if dt in HALF else a
    if x.ndim == 0:  # as a one-element row: an infinite or NaN value gives NaN
        return _softmax_kernel(a.reshape(1), 0, log).reshape(())
    # (The last dim, the common case, needs no wrapping: a dim out of range raises there.)
    axis = x.ndim - 1 if dim == -1 or dim == x.ndim - 1 else wrap_dims(dim, x.ndim)[0]
    if log and dt in HALF and axis == x.ndim - 1 and x.size:
        return _half_log_softmax_rows(x, dt)
    out = _rows_in_c(x, axis, log)  # rows of the last dimension: in C where built
    if out is not None:
        return out.astype(dt, copy=False)
    shifted = x - np.max(x, axis=axis, keepdims=True) if x.size else x
    e = np.exp(shifted)
    s = np.sum(e, axis=axis, keepdims=True)
    if not log and dt in HALF and axis != x.ndim - 1 and x.size:
        e = _half_exponentials(e, axis, dt)
    out = shifted - np.log(s) if log else e / s
    return out.astype(dt, copy=False)


_HALF_LANES = 32  # a half vector's lanes in PyTorch's CPU kernels (AVX-512)


def _half_exponentials(e, axis: int, dt):
    """The exponentials of a half-type softmax over `axis` (not the last) as PyTorch's CPU
    kernel divides them: it walks the positions after `axis` a vector of `_HALF_LANES` at a
    time in float32, and the positions left over one by one, storing their exponentials in
    the half dtype (rounded) first; both are divided by the float32 sum of the unrounded
    ones. (Found by experiment against torch with one thread, where a thread's share of
    the positions is all of them.)"""
    inner = e.shape[axis + 1:]
    n = int(np.prod(inner))
    tail = np.arange(n) >= n // _HALF_LANES * _HALF_LANES
    return np.where(tail.reshape(inner), e.astype(dt).astype(F32), e)


def _half_log_softmax_rows(x, dt):
    """log_softmax over the last dimension of float16/bfloat16 values `x` (as float32),
    the result in `dt`. PyTorch's last-dim kernel for these dtypes keeps the sum of the
    exponentials and its log in `dt`: both are rounded there before the subtraction (its
    kernel over another dimension, like the float32 one, rounds once)."""
    shifted = x - np.max(x, axis=-1, keepdims=True)
    total = np.sum(np.exp(shifted), axis=-1, keepdims=True).astype(dt).astype(F32)
    return (shifted - np.log(total).astype(dt).astype(F32)).astype(dt)


def _rows_in_c(x, dim, log: bool):
    """softmax / log_softmax of a float32/float64 array over its last dimension (`dim`
    naming it) by the C kernel over rows: a new row-major array; None where it does not
    apply (another dtype or dimension, no values, no C kernels)."""
    dt = x.dtype
    if (dt is _F32 or dt is _F64) and x.ndim and (dim == -1 or dim == x.ndim - 1) and x.size:
        return _native.elementwise("math", "log_softmax" if log else "softmax", (x,), cost=16,
                                   row=x.shape[-1])
    return None


def _softmax_rows(a, dim, log: bool):
    """softmax / log_softmax's kernel, its result C-contiguous (PyTorch's kernels allocate
    it so; the C kernel's result is). The common case (a classifier's scores over their
    last dimension) goes to the C kernel first, whose result needs no further look."""
    out = _rows_in_c(a, dim, log)
    return out if out is not None else in_format(_softmax_kernel(a, dim, log), None)


def _softmax_meta(a, dim, half_to_float=False, log=False):
    wrap_dims(dim, len(a.shape))
    check_softmax_dtype(a, dim, log)
    return Spec(tuple(a.shape), a.dtype)


def _softmax_samples(rng, dtype):
    return [Sample((rand_array(rng, s, dtype), d, False), name=f"{s} dim={d}")
            for s, d in (((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -1), ((), 0), ((0, 3), 1))]


def _shifted(x, dim):
    """`x` less its maximum along `dim` (the maximum of an empty slice is not taken)."""
    return x - x.amax([dim], True) if x.numel() else x


@half_in_float32
def _softmax_decomposition(x, dim, half_to_float=False):
    e = _shifted(x, dim).exp()
    return e / e.sum([dim], True)


@half_in_float32
def _log_softmax_decomposition(x, dim, half_to_float=False):
    shifted = _shifted(x, dim)
    return shifted - shifted.exp().sum([dim], True).log()


def _rows_of(y, dim, shape) -> bool:
    """Whether a (log_)softmax gradient runs over rows in C: result array `y` is
    C-contiguous, `dim` its last dimension, `shape` (the gradient's) its own."""
    # (`dim` was checked by the forward: -1 or the last index name the last dimension.)
    return y is not None and y.ndim != 0 and (dim == -1 or dim == y.ndim - 1) and \
        y.flags.c_contiguous and shape == y.shape


def _row_gradient(name: str, g, out, dim):
    """The (log_)softmax gradient over the last dimension of a contiguous result in C
    (`c_gradient`); None elsewhere."""
    y = out._data
    return c_gradient(name, g, out, row=y.shape[-1]) if _rows_of(y, dim, tuple(g.shape)) \
        else None


def _row_gradient_on_arrays(name: str, g, out, dim):
    """`_row_gradient` on arrays (`OpDef.on_arrays`): the C kernel's gradient, or None."""
    y = saved_array(out, g.dtype)
    if not _rows_of(y, dim, g.shape):
        return None
    grad = _native.elementwise("math", name, (g, y), row=y.shape[-1])
    return None if grad is None else (grad, None)


def _softmax_derivative(g, out, dim):
    grad = _row_gradient("softmax_grad", g, out, dim)
    if grad is None:
        # create_graph (SoftmaxBackwardDataBackward0), or a traced backward (no
        # data): the op whose kernel is eager's C row gradient where it applies.
        if is_grad_enabled() or out._data is None:
            return (call(softmax_backward_data, g, out, dim, g.dtype), None)
        grad = half_formula(lambda g, out: out * (g - (g * out).sum(dim, keepdim=True)), g, out)
    return (grad, None)


def _log_softmax_derivative(g, out, dim):
    grad = _row_gradient("log_softmax_grad", g, out, dim)
    if grad is None:
        # create_graph (LogSoftmaxBackwardDataBackward0), or a traced backward (no
        # data): the op whose kernel is eager's C row gradient where it applies.
        if is_grad_enabled() or out._data is None:
            return (call(log_softmax_backward_data, g, out, dim, g.dtype), None)
        grad = half_formula(lambda g, out: g - out.exp() * g.sum(dim, keepdim=True), g, out)
    return (grad, None)


_softmax_derivative.on_arrays = functools.partial(_row_gradient_on_arrays, "softmax_grad")
_log_softmax_derivative.on_arrays = functools.partial(_row_gradient_on_arrays,
                                                      "log_softmax_grad")

softmax = register(
    "_softmax", kernel=lambda a, dim, half_to_float=False: _softmax_rows(a, dim, False),
    meta=_softmax_meta, node="SoftmaxBackward0",
    derivative=_softmax_derivative,
    save=lambda out, a, dim, half_to_float=False: (out, dim), samples=_softmax_samples,
    onnx=softmax_onnx("Softmax"), public="softmax", decomposition=_softmax_decomposition,
    lowering=lambda v, a, dim, half_to_float=False: v.softmax(a, dim),
    saved_names=("result", "dim"), result_order="contiguous")
log_softmax = register(
    "_log_softmax",
    kernel=lambda a, dim, half_to_float=False: _softmax_rows(a, dim, True),
    meta=lambda a, dim, half_to_float=False: _softmax_meta(a, dim, log=True),
    node="LogSoftmaxBackward0",
    derivative=_log_softmax_derivative,
    save=lambda out, a, dim, half_to_float=False: (out, dim), samples=_softmax_samples,
    onnx=softmax_onnx("LogSoftmax"), public="log_softmax",
    decomposition=_log_softmax_decomposition,
    lowering=lambda v, a, dim, half_to_float=False: v.softmax(a, dim, log=True),
    saved_names=("result", "dim"), result_order="contiguous")


def _backward_data_kernel(first):
    """`_softmax_backward_data`'s kernel (and log_softmax's): the forward's derivative on
    the arrays (`first_order_kernel`), contiguous and in the gradient's dtype, as PyTorch's
    CPU kernel gives it whatever `input_dtype` says."""
    run = first_order_kernel(first)

    def kernel(g, y, dim, input_dtype):
        return np.ascontiguousarray(run(g, y, dim).astype(g.dtype, copy=False))

    return kernel


def _backward_data_meta(g, y, dim, input_dtype):
    if g.dtype is _dtype.float32 and input_dtype is _dtype.float16:
        # (the half-to-float case, which PyTorch's CPU kernel refuses)
        raise RuntimeError("expected scalar type Float but found Half")
    return Spec(tuple(g.shape), g.dtype)


def _backward_data_samples(log: bool):
    def samples(rng, dt):
        out = []
        for shape, dim in (((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -1)):
            x = rand_array(rng, shape, dt)
            e = np.exp(x - x.max(axis=dim, keepdims=True))
            y = e / e.sum(axis=dim, keepdims=True)
            y = np.log(y) if log else y
            out.append(Sample((rand_array(rng, shape, dt), y.astype(dt), dim,
                               _dtype.from_numpy_dtype(np.dtype(dt))), name=f"{shape} {dim}"))
        return out

    return samples


def _softmax_backward_data_derivative(gg, g, y, dim, input_dtype):
    # y (g - sum(g y)): in g, the op itself; in y, gg (g - sum(g y)) - g sum(gg y)
    s = (g * y).sum(dim, keepdim=True)
    return (call(softmax_backward_data, gg, y, dim, input_dtype),
            gg * (g - s) - g * (gg * y).sum(dim, keepdim=True), None, None)


def _log_softmax_backward_data_derivative(gg, g, y, dim, input_dtype):
    # g - exp(y) sum(g): in g, gg - sum(gg exp(y)); in y, -gg exp(y) sum(g)
    e = y.exp()
    return (gg - (gg * e).sum(dim, keepdim=True),
            -(gg * e) * g.sum(dim, keepdim=True), None, None)


# ATen's backward ops of softmax and log_softmax, which a gradient taken with create_graph
# records (`SoftmaxBackwardDataBackward0` ...), as PyTorch's.
def _backward_data_op(name: str, node: str, first_order, derivative, log: bool):
    return register(
        name, kernel=_backward_data_kernel(first_order), meta=_backward_data_meta, node=node,
        derivative=derivative, save=lambda out, g, y, dim, input_dtype: (g, y, dim, input_dtype),
        samples=_backward_data_samples(log), public=name,
        saved_names=("grad_output", "output", "dim", ""),
        lowering=_backward_data_lowering(log))


def _backward_data_lowering(log: bool):
    """The code generator's loops for `_(log_)softmax_backward_data`: the formulas of
    `_softmax_derivative`, fused with what surrounds them (a traced backward records the op)."""
    def lowering(v, g, y, dim, input_dtype):
        if g.dtype != y.dtype:
            return v.unsupported("a softmax gradient in another dtype than its output")

        if dim not in (-1, len(g.shape) - 1):
            # (eager's kernel is NumPy's formula there, whose float32 exp the loops' does not
            # match to the bit; a softmax over another dimension is rare)
            return v.unsupported("a softmax gradient over another than the last dimension")

        def row_sum(x):  # in double, rounded once, as eager's C row gradient sums
            return v.to(v.reduce("sum", x, (dim,), True, dtype=_dtype.float64), g.dtype)

        if log:
            return v.sub(g, v.mul(v.unary("exp", y), row_sum(g)))
        return v.mul(y, v.sub(g, row_sum(v.mul(g, y))))

    return lowering


softmax_backward_data = _backward_data_op(
    "_softmax_backward_data", "SoftmaxBackwardDataBackward0", _softmax_derivative,
    _softmax_backward_data_derivative, False)
log_softmax_backward_data = _backward_data_op(
    "_log_softmax_backward_data", "LogSoftmaxBackwardDataBackward0", _log_softmax_derivative,
    _log_softmax_backward_data_derivative, True)


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
    """Gradient of max()/min()/median() over all elements: shared among the equal ones, or
    among the NaNs when the result is NaN (NaN equals nothing), and exactly 0 elsewhere
    (`where`, not a product: an infinite gradient must not make 0 * inf NaNs)."""
    mask = (a == value).logical_or(a.isnan().logical_and(value.isnan()))
    return (g / mask.sum()).where(mask, 0)


# ---------------------------------------------------------------- amin, max, min (all)


def _amin_kernel(a, dims=(), keepdim=False):
    axes = _axes(_all_if_empty(dims), a.ndim)
    _check_amax(a.shape, dims, axes, "amin")
    return row_major(np.amin(a, axis=axes, keepdims=keepdim), a)


def _amin_meta(a, dims=(), keepdim=False):
    axes = _axes(_all_if_empty(dims), len(a.shape))
    _check_amax(tuple(a.shape), dims, axes, "amin")
    return Spec(_reduce_shape(tuple(a.shape), axes, keepdim), a.dtype)


amin = register(
    "amin", kernel=_amin_kernel, meta=_amin_meta, node="AminBackward0",
    lowering=lambda v, a, dims=(), keepdim=False: v.reduce("min", a, dims, keepdim),
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
    save=lambda out, a: (a, out), samples=_all_samples, onnx=ox.reduce_all("ReduceMax"))
min_all = register(
    "min", kernel=_max_all(np.min, "min")[0], meta=_max_all(np.min, "min")[1],
    node="MinBackward1", derivative=lambda g, a, out: (_evenly(g, a, out),),
    save=lambda out, a: (a, out), samples=_all_samples, onnx=ox.reduce_all("ReduceMin"))

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
    title = name.capitalize()
    return register(f"{name}.dim", kernel=kernel, meta=meta, node=node,
                    derivative=_value_select_derivative, save=_save_indices,
                    samples=_dim_samples, public=name,
                    onnx=ox.value_and_index(f"Reduce{title}", f"Arg{title}"))


max_dim = _register_index_reduce("max", np.argmax, "MaxBackward0")
min_dim = _register_index_reduce("min", np.argmin, "MinBackward0")


def _arg_check(name, dt, shape, dim) -> None:
    """argmax/argmin's checks that come before the dim's: no bool input, and a dim given for
    an empty input (an IndexError here, where max() gives a RuntimeError)."""
    if dt == np.bool_ or dt is _dtype.bool_:
        raise RuntimeError(f"{name}(): does not support bool input")
    if dim is None and 0 in tuple(shape):
        raise IndexError(f"{name}(): Expected reduction dim to be specified for "
                         "input.numel() == 0.")


def _arg_kernel(name, fn):
    def kernel(a, dim=None, keepdim=False):
        _arg_check(name, a.dtype, a.shape, dim)
        if dim is None:
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
        _arg_check(name, a.dtype, a.shape, dim)
        if dim is None:
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
                  samples=_arg_samples, onnx=ox.arg_reduce("ArgMax"),
                  lowering=lambda v, a, dim=None, keepdim=False: v.reduce("argmax", a, dim,
                                                                          keepdim))
argmin = register("argmin", kernel=_arg_kernel("argmin", np.argmin)[0],
                  meta=_arg_kernel("argmin", np.argmin)[1], differentiable=False,
                  samples=_arg_samples, onnx=ox.arg_reduce("ArgMin"),
                  lowering=lambda v, a, dim=None, keepdim=False: v.reduce("argmin", a, dim,
                                                                          keepdim))

# ---------------------------------------------------------------- prod


def _prod_dtype(a, dtype):
    return _sum_dtype(a.dtype, dtype)


# PyTorch's CPU product of a half type multiplies one element at a time, rounding each
# partial product to the half type, except along a contiguous innermost run of at least this
# many elements, where vector lanes keep partial products in float32 (that order is not
# reproduced: those products are taken in float32, rounded once).
_HALF_PROD_LANES = 64


def _half_prod(a, axis, dt):
    """The product along `axis` in half dtype `dt`, rounded after every multiplication (a
    float32 product of two half values is exact, so each step rounds once, as PyTorch's)."""
    x = np.moveaxis(a.astype(F32), axis, 0)
    acc = np.ones(x.shape[1:], dt)
    for row in x:
        acc = (acc.astype(F32) * row).astype(dt)
    return acc


def _prod_all_kernel(a, dtype=None):
    dt = _prod_dtype(a, dtype)
    if dtype is not None and a.dtype != dt:
        a = real_part_for(a, dt).astype(dt)  # `dtype=` casts the input first, as for sum
    if dt in HALF and a.size < _HALF_PROD_LANES:
        return _half_prod(a.astype(dt, copy=False).reshape(-1), 0, dt)
    return np.asarray(np.prod(a, dtype=F32 if dt in HALF else dt)).astype(dt)


def _prod_dim_kernel(a, dim, keepdim=False, dtype=None):
    dt = _prod_dtype(a, dtype)
    if dtype is not None and a.dtype != dt:
        a = real_part_for(a, dt).astype(dt)  # `dtype=` casts the input first, as for sum
    axes = _axes((dim,), a.ndim)
    if dt in HALF and a.ndim:
        d = axes[0]
        if a.shape[d] < _HALF_PROD_LANES or numel(a.shape[d + 1:]) > 1:
            out = _half_prod(a.astype(dt, copy=False), d, dt)
            return np.expand_dims(out, d) if keepdim else out
    return np.prod(a, axis=axes, keepdims=keepdim, dtype=F32 if dt in HALF else dt).astype(
        dt, copy=False)


def _prod_meta(a, dim=None, keepdim=False, dtype=None):
    return _sum_meta(a, None if dim is None else (dim,), keepdim, dtype)


def _cat(tensors, d):
    # (cat found by name: joins.py imports views, which imports this module)
    return call(REGISTRY["cat"], tensors, d)


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
    # `cj`: a complex product's gradient takes the conjugate of the other factors' product.
    return (g * cj(prod_others(flat, 0).reshape(tuple(a.shape))), None)


def _prod_dim_derivative(g, a, dim, keepdim):
    if a.dim() == 0:
        return (g, None, None, None)
    d = _dim1(dim, a.dim())
    if not keepdim:
        g = g.unsqueeze(d)
    return (g * cj(prod_others(a, d)), None, None, None)


prod = register(
    "prod", autocast="fp32",
    kernel=_prod_all_kernel, meta=lambda a, dtype=None: _prod_meta(a, None, False, dtype),
    node="ProdBackward0", derivative=_prod_all_derivative, save=lambda out, a, dtype=None: (a,),
    lowering=lambda v, a, dtype=None: v.reduce("prod", a, None, False, dtype),
    samples=lambda rng, dt: _full_samples(rng, dt) + [
        Sample((np.array([1.5, 0.0, 2.0], dt),), name="zero")],
    onnx=reduce_onnx("ReduceProd", full=True))
prod_dim = register(
    "prod.dim_int", autocast="fp32", kernel=c_contiguous(_prod_dim_kernel), meta=_prod_meta,
    node="ProdBackward1",
    lowering=lambda v, a, dim, keepdim=False, dtype=None: v.reduce("prod", a, dim, keepdim,
                                                                    dtype),
    derivative=_prod_dim_derivative,
    save=lambda out, a, dim, keepdim=False, dtype=None: (a, dim, keepdim),
    samples=lambda rng, dt: _dim_samples(rng, dt) + [
        Sample((np.array([[1.5, 0.0, 2.0], [0, 1, 0]], dt), 1, False), name="zeros")],
    public="prod", onnx=reduce_onnx("ReduceProd"), saved_names=("self", "dim", "keepdim"))


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
             samples=_logic_all_samples, onnx=ox.logical_reduce(_name == "all"))
    register(f"{_name}.dim", kernel=c_contiguous(lambda a, dim, keepdim=False, f=_fn: _logic_kernel(
                 f)(a, (dim,), keepdim)),
             meta=lambda a, dim, keepdim=False: _logic_meta(a, (dim,), keepdim),
             differentiable=False, public=_name, onnx=ox.logical_reduce(_name == "all"),
             samples=lambda rng, dt: [Sample((s.args[0], s.args[1][0], s.args[2]))
                                      for s in _logic_samples(rng, dt)])
    register(f"{_name}.dims", kernel=_logic_kernel(_fn), meta=_logic_meta,
             differentiable=False, samples=_logic_samples, public=_name,
             onnx=ox.logical_reduce(_name == "all"))


def _count_nonzero_kernel(a, dims=None):
    if isinstance(dims, int):
        dims = (dims,)
    axes = _axes(dims, a.ndim)
    return row_major(np.asarray(np.count_nonzero(a, axis=axes)).astype(np.int64), a)


def _count_nonzero_meta(a, dims=None):
    if isinstance(dims, int):
        dims = (dims,)
    return Spec(_reduce_shape(tuple(a.shape), _axes(dims, len(a.shape)), False), _dtype.int64)


count_nonzero = register(
    "count_nonzero.dim_IntList", kernel=_count_nonzero_kernel, meta=_count_nonzero_meta,
    differentiable=False, public="count_nonzero",
    samples=lambda rng, dt: [Sample((s.args[0], s.args[1])) for s in _logic_samples(rng, dt)],
    onnx=ox.count_nonzero)
count_nonzero_all = register(
    "count_nonzero", kernel=_count_nonzero_kernel, meta=_count_nonzero_meta,
    differentiable=False, samples=lambda rng, dt: [
        Sample(((rng.random((3, 4)) > 0.5).astype(dt),)),
        Sample(((rng.random((3, 4)) > 0.5).astype(dt), 1))], onnx=ox.count_nonzero)
