"""Tensor methods and operators: attaches the functions of this package to `Tensor`
(`x.sum()`, `x + y`, `x[i]`, the in-place forms `x.exp_()`, ...).

Later assignments override earlier ones, so the order of this file is the order of attachment.
"""

from __future__ import annotations

import numbers

import numpy as np

from .. import _dtype
from .._dispatch import call, call2
from .._tensor import Tensor
from ..ops import REGISTRY
from ..ops import indexing as X
from ..ops import pointwise as P
from ..ops import reduction as R
from ..ops import shape as S
from . import pointwise as _pointwise
from .comparison import (
    allclose,
    bincount,
    bitwise_and,
    bitwise_or,
    bitwise_xor,
    eq,
    equal,
    ge,
    gt,
    isclose,
    le,
    logical_and,
    logical_or,
    logical_xor,
    lt,
    ne,
    unique,
)
from .indexing import (
    argwhere,
    gather,
    getitem,
    index_add,
    index_put,
    index_select,
    masked_fill,
    masked_select,
    nonzero,
    scatter,
    scatter_add,
    setitem,
    take_along_dim,
)
from .inplace import add_, clone, contiguous, copy_, div_, fill_, mul_, sub_, zero_
from .linear_algebra import addmm, addmv, baddbmm, bmm, dot, ger, matmul, mm, mv, outer
from .pointwise import (
    _INPLACE_MORE,
    _UNARY_MORE,
    abs,
    acos,
    acosh,
    add,
    addcdiv,
    addcmul,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctan2,
    arctanh,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    bitwise_not,
    clamp,
    cos,
    div,
    exp,
    fix,
    floor_divide,
    fmax,
    fmod,
    lerp,
    log,
    maximum,
    minimum,
    mul,
    nan_to_num,
    nan_to_num_,
    neg,
    pow,
    reciprocal,
    relu,
    remainder,
    round,
    sigmoid,
    sign,
    sin,
    sqrt,
    square,
    sub,
    tanh,
    trunc,
    where,
)
from .reduction import (
    all,
    amax,
    amin,
    any,
    argmax,
    argmin,
    argsort,
    count_nonzero,
    cummax,
    cummin,
    cumprod,
    cumsum,
    kthvalue,
    log_softmax,
    logsumexp,
    max,
    mean,
    median,
    min,
    mode,
    msort,
    norm,
    prod,
    softmax,
    sort,
    std,
    sum,
    topk,
    var,
)
from .shape import (
    as_strided,
    broadcast_to,
    chunk,
    diag,
    diag_embed,
    diagonal,
    expand,
    flatten,
    flip,
    fliplr,
    flipud,
    moveaxis,
    movedim,
    narrow,
    permute,
    repeat,
    reshape,
    roll,
    select,
    split,
    squeeze,
    t,
    tensor_split,
    tile,
    trace,
    transpose,
    transpose_,
    tril,
    triu,
    unbind,
    unflatten,
    unsafe_chunk,
    unsafe_split,
    unsqueeze,
    view,
)

# ---------------------------------------------------------------- method makers


def _inplace_unary(name):
    op = REGISTRY[name + "_"]

    def fn(self):
        return call(op, self)

    fn.__name__ = fn.__qualname__ = name + "_"
    fn.__doc__ = f"In-place {name}."
    return fn


def _binary_inplace(tensor_op, scalar_op=None):
    def fn(self, other):
        if scalar_op is not None and not isinstance(other, Tensor):
            return call(scalar_op, self, other)
        return call(tensor_op, self, other)

    fn.__name__ = fn.__qualname__ = tensor_op.name.split(".")[0]
    fn.__doc__ = f"In-place {fn.__name__.rstrip('_')}."
    return fn


def _scalar_as_tensor(op):
    def fn(self, other):
        if not isinstance(other, Tensor):
            from .._creation import tensor as _tensor

            other = _tensor(other, dtype=_dtype.result_type(self, other))
        return call(op, self, other)

    fn.__name__ = fn.__qualname__ = op.name.split(".")[0]
    fn.__doc__ = f"In-place {fn.__name__.rstrip('_')}."
    return fn


# ---------------------------------------------------------------- Tensor methods

_METHODS = dict(
    add=add, sub=sub, subtract=sub, mul=mul, multiply=mul, div=div, divide=div,
    true_divide=div, neg=neg, negative=neg, reciprocal=reciprocal, pow=pow, exp=exp, log=log,
    sin=sin, cos=cos, tanh=tanh, sigmoid=sigmoid, sqrt=sqrt, abs=abs, absolute=abs, relu=relu,
    sign=sign, maximum=maximum, clamp=clamp, clip=clamp, eq=eq, ne=ne, lt=lt, le=le, gt=gt,
    ge=ge, sum=sum, mean=mean, amax=amax, softmax=softmax, log_softmax=log_softmax, mm=mm,
    bmm=bmm, mv=mv, dot=dot, matmul=matmul, view=view, reshape=reshape, permute=permute,
    transpose=transpose, swapaxes=transpose, swapdims=transpose, t=t, expand=expand,
    unsqueeze=unsqueeze, squeeze=squeeze, unbind=unbind, select=select, narrow=narrow,
    as_strided=as_strided,
    clone=clone, contiguous=contiguous, add_=add_, sub_=sub_, mul_=mul_, div_=div_,
    zero_=zero_, fill_=fill_, copy_=copy_, __getitem__=getitem, __setitem__=setitem,
    greater=gt, less=lt, greater_equal=ge, less_equal=le, not_equal=ne,
)
for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)


def _where_method(self, condition, other):
    """`where(condition, self, other)`."""
    return where(condition, self, other)


def _slice_method(self, dim=0, start=None, end=None, step=1):
    return call(S.slice_, self, dim, start, end, step)


Tensor.where = _where_method
Tensor.slice = _slice_method
Tensor.view_as = lambda self, other: view(self, tuple(other.shape))
Tensor.reshape_as = lambda self, other: reshape(self, tuple(other.shape))
Tensor.expand_as = lambda self, other: expand(self, tuple(other.shape))

# Operators. `2 - x` is rsub.Scalar and `2 / x` is `reciprocal(x) * 2`, as in PyTorch.
# An operand that is neither a tensor nor a number gives NotImplemented, so Python asks the
# other operand (its `__rmul__`, ...), as PyTorch's operators do. For a NumPy array that
# means NumPy computes `x * array` on `x.__array__()` (NumPy's promotion: float32 * a 0-d
# float64 array is float64) and `Tensor.__array_wrap__` makes the result a tensor, while
# `array * x` is a TypeError (NumPy defers to the higher `__array_priority__`): PyTorch's
# behaviour, as observed.
_OPERAND_CLASSES = frozenset((Tensor, float, int, bool))


def _foreign(other) -> bool:
    """True for an operand the arithmetic operators leave to the other side (types that speak
    the `__fusegrad_function__` protocol, such as fx proxies, go through dispatch)."""
    return other.__class__ not in _OPERAND_CLASSES and not isinstance(
        other, (Tensor, numbers.Number, np.generic)) and not hasattr(
        type(other), "__fusegrad_function__")


def _operator(op):
    def method(self, other):
        if other.__class__ not in _OPERAND_CLASSES and _foreign(other):
            return NotImplemented
        return call2(op, self, other)

    return method


def _rtruediv(self, other):
    if other.__class__ not in _OPERAND_CLASSES and _foreign(other):
        if isinstance(other, np.ndarray):  # `reciprocal(x) * array`, which NumPy computes
            return call(P.reciprocal, self) * other
        return NotImplemented
    return call2(P.mul, call(P.reciprocal, self), other)


def _pow(self, other):
    if other.__class__ not in _OPERAND_CLASSES and _foreign(other):
        return NotImplemented
    return pow(self, other)


def _rpow(self, other):
    if other.__class__ not in _OPERAND_CLASSES and _foreign(other):
        return NotImplemented
    return call(P.pow_scalar_base, other, self)


Tensor.__add__ = Tensor.__radd__ = _operator(P.add)
Tensor.__iadd__ = _operator(P.add_)
Tensor.__sub__ = _operator(P.sub)
Tensor.__rsub__ = _operator(P.rsub)
Tensor.__isub__ = _operator(P.sub_)
Tensor.__mul__ = Tensor.__rmul__ = _operator(P.mul)
Tensor.__imul__ = _operator(P.mul_)
Tensor.__truediv__ = _operator(P.div)
Tensor.__rtruediv__ = _rtruediv
Tensor.__itruediv__ = _operator(P.div_)
Tensor.__pow__ = _pow
Tensor.__rpow__ = _rpow
Tensor.__neg__ = neg
Tensor.__pos__ = lambda self: self
Tensor.__abs__ = abs
Tensor.__matmul__ = matmul
Tensor.__rmatmul__ = lambda self, other: matmul(other, self)


def _cmp(op):
    equality = op is P.eq

    def method(self, other):
        if other is None or not isinstance(other, (Tensor, numbers.Number, np.generic)):
            # `x == array` is elementwise; `x != array` (NotImplemented) is Python's identity
            # test, True, as in PyTorch.
            if equality and isinstance(other, np.ndarray):
                return call(op, self, Tensor._make(np.asarray(other)))
            return NotImplemented
        return call(op, self, other)

    return method


def _compare_inplace(name):
    scalar_op, tensor_op = P.COMPARE_INPLACE[name]

    def method(self, other):
        return call(tensor_op if isinstance(other, Tensor) else scalar_op, self, other)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"In-place comparison: self becomes `{name[:-1]}(self, other)` (0 or 1)."
    return method


for _name in P.COMPARE_INPLACE:
    setattr(Tensor, _name, _compare_inplace(_name))

Tensor.__eq__ = _cmp(P.eq)
Tensor.__ne__ = _cmp(P.ne)
Tensor.__lt__ = _cmp(P.lt)
Tensor.__le__ = _cmp(P.le)
Tensor.__gt__ = _cmp(P.gt)
Tensor.__ge__ = _cmp(P.ge)
Tensor.__hash__ = lambda self: id(self)

for _name in _UNARY_MORE:
    setattr(Tensor, _name, getattr(_pointwise, _name))
for _name in _INPLACE_MORE:
    setattr(Tensor, _name + "_", _inplace_unary(_name))
for _fn in (arcsin, arccos, arctan, arcsinh, arccosh, arctanh, fix, square, round, nan_to_num,
            nan_to_num_, atan2, arctan2, floor_divide, remainder, fmod, minimum, fmax, lerp,
            addcmul, addcdiv, logical_and, logical_or, logical_xor, bitwise_and, bitwise_or,
            bitwise_xor):
    setattr(Tensor, _fn.__name__, _fn)
Tensor.arcsin, Tensor.arccos, Tensor.arctan = asin, acos, atan
Tensor.arcsinh, Tensor.arccosh, Tensor.arctanh, Tensor.arctan2 = asinh, acosh, atanh, atan2
Tensor.fix = trunc
Tensor.floor_divide_ = _binary_inplace(P.floor_divide_)
Tensor.remainder_ = _binary_inplace(P.remainder_, P.remainder_scalar_)
Tensor.fmod_ = _binary_inplace(P.fmod_, P.fmod_scalar_)
Tensor.atan2_ = Tensor.arctan2_ = _binary_inplace(P.atan2_)
Tensor.lerp_ = lambda self, end, weight: call(
    P.lerp_tensor_ if isinstance(weight, Tensor) else P.lerp_, self, end, weight)
Tensor.addcmul_ = lambda self, t1, t2, *, value=1: call(P.addcmul_, self, t1, t2, value)
Tensor.addcdiv_ = lambda self, t1, t2, *, value=1: call(P.addcdiv_, self, t1, t2, value)
Tensor.square_ = lambda self: call(P.pow_, self, 2)
Tensor.pow_ = lambda self, exponent: call(P.pow_, self, exponent)
Tensor.sgn_ = lambda self: call(P.sgn_, self)
Tensor.moveaxis = movedim


def _clamp_(self, min=None, max=None):  # noqa: A002
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return call(P.clamp_tensor_, self, min, max)
    return call(P.clamp_, self, min, max)


Tensor.clamp_ = Tensor.clip_ = _clamp_
for _name in ("logical_and", "logical_or", "logical_xor"):
    setattr(Tensor, _name + "_", _binary_inplace(REGISTRY[_name + "_"]))
for _name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    setattr(Tensor, _name + "_", _scalar_as_tensor(REGISTRY[_name + "_.Tensor"]))
Tensor.__floordiv__ = floor_divide
Tensor.__rfloordiv__ = lambda self, other: floor_divide(other, self)
Tensor.__ifloordiv__ = Tensor.floor_divide_
Tensor.__mod__ = remainder
Tensor.__rmod__ = lambda self, other: remainder(other, self)
Tensor.__imod__ = Tensor.remainder_
Tensor.__and__ = Tensor.__rand__ = bitwise_and
Tensor.__or__ = Tensor.__ror__ = bitwise_or
Tensor.__xor__ = Tensor.__rxor__ = bitwise_xor
Tensor.__iand__ = Tensor.bitwise_and_
Tensor.__ior__ = Tensor.bitwise_or_
Tensor.__ixor__ = Tensor.bitwise_xor_
Tensor.__invert__ = bitwise_not

for _fn in (amin, max, min, argmax, argmin, prod, var, std, norm, logsumexp, cumsum, cumprod,
            cummax, cummin, all, any, count_nonzero, median, mode, kthvalue, topk, sort,
            argsort, msort):
    setattr(Tensor, _fn.__name__, _fn)
Tensor.cumsum_ = lambda self, dim, *, dtype=None: call(R.cumsum_, self, dim)

for _fn in (flatten, unflatten, movedim, moveaxis, broadcast_to, repeat, tile, split, chunk,
            unsafe_split, unsafe_chunk, transpose_, tensor_split, flip, fliplr, flipud, roll, tril,
            triu, diagonal, diag_embed, diag,
            trace, index_select, gather, take_along_dim, scatter, scatter_add, index_add,
            masked_fill, masked_select, nonzero, argwhere, index_put):
    setattr(Tensor, _fn.__name__, _fn)
Tensor.expand_as = lambda self, other: expand(self, tuple(other.shape))
Tensor.tril_ = lambda self, diagonal=0: copy_(self, tril(self, diagonal))
Tensor.triu_ = lambda self, diagonal=0: copy_(self, triu(self, diagonal))


def _scatter_(self, dim, index, src=None, *, value=None, reduce=None):
    if src is None:
        src = value
    if isinstance(src, Tensor):
        return call(X.scatter_, self, dim, index, src)
    return call(X.scatter_value_, self, dim, index, src)


def _masked_fill_(self, mask, value):
    if isinstance(value, Tensor):
        return call(X.masked_fill_tensor_, self, mask, value)
    return call(X.masked_fill_, self, mask, value)


Tensor.scatter_ = _scatter_
Tensor.scatter_add_ = lambda self, dim, index, src: call(X.scatter_add_, self, dim, index, src)
Tensor.index_add_ = lambda self, dim, index, source, *, alpha=1: call(
    X.index_add_, self, dim, index, source, alpha)
Tensor.masked_fill_ = _masked_fill_
Tensor.index_put_ = lambda self, indices, values, accumulate=False: call(
    X.index_put_, self, list(indices), values, accumulate)

for _fn in (outer, ger, addmm, baddbmm, addmv):
    setattr(Tensor, _fn.__name__, _fn)

for _fn in (bincount, isclose, allclose, equal):
    setattr(Tensor, _fn.__name__, _fn)
Tensor.unique = lambda self, sorted=True, return_inverse=False, return_counts=False, dim=None: \
    unique(self, sorted, return_inverse, return_counts, dim)
