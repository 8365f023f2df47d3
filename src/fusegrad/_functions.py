"""Public functions (`fusegrad.add`, ...) and Tensor methods: thin wrappers over registry ops.

Each wrapper picks the overload PyTorch would pick (`x + 2` is `add.Tensor`, `2 - x` is
`rsub.Scalar`, `x.sum(0)` is `sum.dim_IntList`) and passes positional arguments to dispatch.
Composites (`matmul`, `reshape`, `contiguous`, indexing) are written over those ops, so they
record the same nodes PyTorch records.
"""

from __future__ import annotations

import builtins
import numbers

from . import _dtype
from ._dispatch import _modes, call
from ._tensor import Tensor
from .autograd.grad_mode import state as _grad_state
from .ops import inplace as I  # noqa: E741
from .ops import linalg as L
from .ops import pointwise as P
from .ops import reduction as R
from .ops import shape as S
from .ops._util import wrap_dim

# ---------------------------------------------------------------- arithmetic


def add(input, other, *, alpha=1, out=None):
    """input + alpha * other."""
    if alpha != 1:
        return call(P.add, input, other, alpha)
    return call(P.add, input, other)


def sub(input, other, *, alpha=1, out=None):
    """input - alpha * other."""
    if alpha != 1:
        return call(P.sub, input, other, alpha)
    return call(P.sub, input, other)


subtract = sub


def rsub(input, other, alpha=1):
    """other - alpha * input."""
    return call(P.rsub, input, other, alpha) if alpha != 1 else call(P.rsub, input, other)


def mul(input, other, *, out=None):
    """Elementwise product."""
    return call(P.mul, input, other)


multiply = mul


def div(input, other, *, rounding_mode=None, out=None):
    """Elementwise true division."""
    if rounding_mode is not None:
        raise ValueError(f"div: rounding_mode {rounding_mode!r} is not supported yet")
    return call(P.div, input, other)


divide = true_divide = div


def neg(input, *, out=None):
    """-input."""
    if input.dtype is _dtype.bool_:
        raise RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
            "to invert a mask, use the `~` or `logical_not()` operator instead.")
    return call(P.neg, input)


negative = neg


def reciprocal(input, *, out=None):
    """1 / input."""
    return call(P.reciprocal, input)


def pow(input, exponent, *, out=None):  # noqa: A001
    """input ** exponent (tensor or number on either side)."""
    if not isinstance(input, Tensor):
        return call(P.pow_scalar_base, input, exponent)
    if isinstance(exponent, Tensor):
        return call(P.pow_tensor, input, exponent)
    return call(P.pow_scalar, input, exponent)


def _unary(op, name):
    def fn(input, *, out=None):
        return call(op, input)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name}."
    return fn


exp = _unary(P.exp, "exp")
log = _unary(P.log, "log")
sin = _unary(P.sin, "sin")
cos = _unary(P.cos, "cos")
tanh = _unary(P.tanh, "tanh")
sigmoid = _unary(P.sigmoid, "sigmoid")
sqrt = _unary(P.sqrt, "sqrt")
abs = _unary(P.abs_, "abs")  # noqa: A001
absolute = abs
relu = _unary(P.relu, "relu")
sign = _unary(P.sign, "sign")


def maximum(input, other, *, out=None):
    """Elementwise maximum of two tensors."""
    return call(P.maximum, input, other)


def clamp(input, min=None, max=None, *, out=None):  # noqa: A002
    """Limit values to [min, max] (numbers or tensors)."""
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return call(P.clamp_tensor, input, min, max)
    return call(P.clamp, input, min, max)


clip = clamp


def where(condition, input=None, other=None, *, out=None):
    """Elements of `input` where `condition` holds, else of `other`."""
    if input is None and other is None:
        raise TypeError("where(condition) with one argument is not supported yet")
    return call(P.where, condition, input, other)


def _compare(op, name):
    def fn(input, other, *, out=None):
        return call(op, input, other)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise comparison `{name}`, as a bool tensor."
    return fn


eq = _compare(P.eq, "eq")
ne = not_equal = _compare(P.ne, "ne")
lt = less = _compare(P.lt, "lt")
le = less_equal = _compare(P.le, "le")
gt = greater = _compare(P.gt, "gt")
ge = greater_equal = _compare(P.ge, "ge")

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
        return call(R.sum_, input, dtype) if dtype is not None else call(R.sum_, input)
    return call(R.sum_dim, input, _dims(dim), keepdim, dtype)


def mean(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """Mean of all elements, or over `dim`."""
    if dim is None:
        return call(R.mean, input, dtype)
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

# ---------------------------------------------------------------- linear algebra


def mm(input, mat2, *, out=None):
    """Matrix product of two 2-D tensors."""
    return call(L.mm, input, mat2)


def bmm(input, mat2, *, out=None):
    """Batched matrix product of two 3-D tensors."""
    return call(L.bmm, input, mat2)


def mv(input, vec, *, out=None):
    """Matrix-vector product."""
    return call(L.mv, input, vec)


def dot(input, other, *, out=None):
    """Dot product of two 1-D tensors."""
    return call(L.dot, input, other)


def matmul(input, other, *, out=None):
    """Matrix product with PyTorch's rules for 1-D, 2-D and batched operands."""
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        from ._dispatch import handle_function

        return handle_function(matmul, (input, other), {})
    da, db = input.ndim, other.ndim
    if da == 0 or db == 0:
        raise RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {da}D and {db}D")
    if da == 1 and db == 1:
        return dot(input, other)
    if da == 2 and db == 1:
        return mv(input, other)
    if da == 1 and db == 2:
        return call(S.squeeze_inplace, mm(input.unsqueeze(0), other), 0)
    if da == 2 and db == 2:
        return mm(input, other)
    if da >= 3 and db <= 2:
        # Fold the batch into the rows: one mm (or mv) over a 2-D view.
        lead = tuple(input.shape[:-1])
        folded = reshape(input, (-1, input.shape[-1]))
        if db == 1:
            return call(S.unsafe_view, mv(folded, other), lead)
        return call(S.unsafe_view, mm(folded, other), lead + (other.shape[-1],))
    if da <= 2 and db >= 3:
        if input.shape[-1] != other.shape[-2]:
            raise RuntimeError(
                "Expected size for first two dimensions of batch2 tensor to be: "
                f"[{_prod(other.shape[:-2])}, {input.shape[-1]}] but got: "
                f"[{_prod(other.shape[:-2])}, {other.shape[-2]}].")
        if da == 1:
            return matmul(other.mT, input)
        return matmul(other.mT, input.mT).mT.contiguous()
    # Batched: broadcast the batch dims, flatten them, one bmm.
    from .ops._util import broadcast_shapes

    a = input.unsqueeze(0) if da == 1 else input
    b = other.unsqueeze(-1) if db == 1 else other
    batch = broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    n, k = a.shape[-2], a.shape[-1]
    k2, m = b.shape[-2], b.shape[-1]
    if k != k2:
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: "
            f"[{_prod(batch)}, {k}] but got: [{_prod(batch)}, {k2}].")
    a3 = reshape(a.expand(batch + (n, k)), (-1, n, k))
    b3 = reshape(b.expand(batch + (k, m)), (-1, k, m))
    shape = batch + ((n,) if da > 1 else ()) + ((m,) if db > 1 else ())
    return call(S.unsafe_view, bmm(a3, b3), shape)


def _prod(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n

# ---------------------------------------------------------------- shapes and views


def _shape_args(shape) -> tuple:
    if len(shape) == 1 and not isinstance(shape[0], numbers.Integral):
        shape = shape[0]
    return tuple(int(s) for s in shape)


def view(input, *shape):
    """A view with a new shape (no copy; an error if the strides do not allow one)."""
    if len(shape) == 1 and isinstance(shape[0], _dtype.dtype):
        raise NotImplementedError("view(dtype) is not supported yet")
    return call(S.view, input, _shape_args(shape))


def reshape(input, *shape):
    """A view with a new shape when the strides allow, otherwise a copy."""
    shape = S.infer_size(_shape_args(shape), input.numel())
    if S.view_strides(tuple(input.shape), input.stride(), shape) is not None:
        return call(S.view, input, shape)
    return call(S.unsafe_view, clone(input, memory_format=contiguous_format), shape)


def permute(input, *dims):
    """A view with the dimensions reordered."""
    return call(S.permute, input, _shape_args(dims))


def transpose(input, dim0, dim1):
    """A view with two dimensions swapped."""
    return call(S.transpose, input, dim0, dim1)


swapaxes = swapdims = transpose


def t(input):
    """Transpose of a tensor of at most 2 dimensions."""
    return call(S.t, input)


def expand(input, *sizes):
    """A broadcast view with the given sizes (-1 keeps a size)."""
    return call(S.expand, input, _shape_args(sizes))


def unsqueeze(input, dim):
    """A view with a size-1 dimension inserted at `dim`."""
    return call(S.unsqueeze, input, dim)


def squeeze(input, dim=None):
    """A view without size-1 dimensions (all, one, or a tuple of them)."""
    if dim is None:
        return call(S.squeeze, input)
    if isinstance(dim, numbers.Integral):
        return call(S.squeeze_dim, input, int(dim))
    return call(S.squeeze_dims, input, tuple(dim))


def cat(tensors, dim=0, *, out=None):
    """Concatenate tensors along `dim`."""
    if not len(tensors):
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    return call(S.cat, list(tensors), dim)


def unbind(input, dim=0):
    """The slices along `dim`, as a tuple of views."""
    return call(S.unbind, input, dim)


concat = concatenate = cat


def select(input, dim, index):
    """The slice at `index` of dimension `dim` (a view, one dimension fewer)."""
    return call(S.select, input, dim, int(index))


def narrow(input, dim, start, length):
    """The view of `length` elements of dimension `dim` from `start`."""
    size = input.shape[wrap_dim(dim, input.ndim)]
    if start < 0:
        start += size
    if not 0 <= start <= size or length < 0 or start + length > size:
        raise RuntimeError(
            f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return call(S.slice_, input, dim, start, start + length, 1)


def as_strided(input, size, stride, storage_offset=None):
    """A view of the storage with the given sizes, strides and offset."""
    return call(S.as_strided, input, tuple(size), tuple(stride), storage_offset)


contiguous_format = S.contiguous_format
preserve_format = S.preserve_format
channels_last = S.channels_last


def clone(input, *, memory_format=None):
    """A copy with its own storage (recorded as CloneBackward0)."""
    if memory_format is None or memory_format is preserve_format:
        return call(S.clone, input)
    return call(S.clone, input, memory_format)


def contiguous(input, memory_format=None):
    """Self if already contiguous, otherwise a contiguous copy."""
    if input.is_contiguous():
        return input
    return clone(input, memory_format=contiguous_format)


def to_copy(input, dtype):
    """A copy converted to `dtype` (ToCopyBackward0)."""
    return call(S.to_copy, input, dtype)

# ---------------------------------------------------------------- indexing


def _normalize_index(index) -> tuple:
    if not isinstance(index, tuple):
        index = (index,)
    out = []
    for i in index:
        if isinstance(i, Tensor):
            if i.ndim == 0 and i.dtype.category == _dtype.INT:
                i = int(i.item())
            else:
                raise IndexError(
                    "indexing with tensors (advanced indexing) is not supported yet")
        elif isinstance(i, (list, builtins.bool)) or (hasattr(i, "__index__") and
                                                      not isinstance(i, numbers.Integral)
                                                      and not isinstance(i, slice)):
            if isinstance(i, builtins.bool) or isinstance(i, list):
                raise IndexError("indexing with lists or bools is not supported yet")
        out.append(i)
    return tuple(out)


def getitem(input, index):
    """Basic indexing (ints, slices, None, Ellipsis): a view, recorded as PyTorch records it."""
    if index.__class__ is int and input.ndim:  # the common `x[i]`
        size = input.shape[0]
        if not -size <= index < size:
            raise IndexError(f"index {index} is out of bounds for dimension 0 with size {size}")
        return call(S.select, input, 0, index)
    single_slice = isinstance(index, slice)
    if input.ndim == 0 and isinstance(index, numbers.Integral) and not isinstance(index, bool):
        raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                         "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
    index = _normalize_index(index)
    n_ell = index.count(Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = builtins.sum(1 for i in index if i is not None and i is not Ellipsis)
    if consumed > input.ndim:
        raise IndexError(f"too many indices for tensor of dimension {input.ndim}")
    if n_ell:
        k = index.index(Ellipsis)
        index = index[:k] + (slice(None),) * (input.ndim - consumed) + index[k + 1:]
    result = input
    dim = 0
    for i in index:
        if i is None:
            result = call(S.unsqueeze, result, dim)
            dim += 1
        elif isinstance(i, slice):
            start, stop, step = i.start, i.stop, 1 if i.step is None else i.step
            size = result.shape[dim]
            full = (start in (None, 0)) and (stop is None or stop >= size) and step == 1
            if not full or single_slice:
                start, stop = _index_int(start), _index_int(stop)
                result = call(S.slice_, result, dim, start, stop, int(step))
            dim += 1
        else:
            i = int(i)
            size = result.shape[dim]
            if not -size <= i < size:
                raise IndexError(
                    f"index {i} is out of bounds for dimension {dim} with size {size}")
            result = call(S.select, result, dim, i)
    if result is input:
        result = call(S.alias, input)
    return result


def _index_int(v):
    return None if v is None else int(v)


def setitem(input, index, value) -> None:
    """`input[index] = value` for basic indices: a copy into the indexed view."""
    target = getitem(input, index)
    if isinstance(value, Tensor):
        call(I.copy_, target, value)
    else:
        call(I.fill_scalar, target, value)


# ---------------------------------------------------------------- in place


def add_(self, other, *, alpha=1):
    """In-place add."""
    return call(P.add_, self, other, alpha) if alpha != 1 else call(P.add_, self, other)


def sub_(self, other, *, alpha=1):
    """In-place subtract."""
    return call(P.sub_, self, other, alpha) if alpha != 1 else call(P.sub_, self, other)


def mul_(self, other):
    """In-place multiply."""
    return call(P.mul_, self, other)


def div_(self, other):
    """In-place divide."""
    return call(P.div_, self, other)


def zero_(self):
    """Fill with zeros in place."""
    return call(I.zero_, self)


def fill_(self, value):
    """Fill with `value` (a number or a 0-d tensor) in place."""
    if isinstance(value, Tensor):
        return call(I.fill_tensor, self, value)
    return call(I.fill_scalar, self, value)


def copy_(self, src, non_blocking=False):
    """Copy `src` (broadcast, converted) into self in place."""
    return call(I.copy_, self, src)


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
Tensor.__add__ = Tensor.__radd__ = lambda self, other: call(P.add, self, other)
Tensor.__iadd__ = lambda self, other: call(P.add_, self, other)
Tensor.__sub__ = lambda self, other: call(P.sub, self, other)
Tensor.__rsub__ = lambda self, other: call(P.rsub, self, other)
Tensor.__isub__ = lambda self, other: call(P.sub_, self, other)
Tensor.__mul__ = Tensor.__rmul__ = lambda self, other: call(P.mul, self, other)
Tensor.__imul__ = lambda self, other: call(P.mul_, self, other)
Tensor.__truediv__ = lambda self, other: call(P.div, self, other)
Tensor.__rtruediv__ = lambda self, other: call(P.mul, call(P.reciprocal, self), other)
Tensor.__itruediv__ = lambda self, other: call(P.div_, self, other)
Tensor.__pow__ = lambda self, other: pow(self, other)
Tensor.__rpow__ = lambda self, other: call(P.pow_scalar_base, other, self)
Tensor.__neg__ = neg
Tensor.__pos__ = lambda self: self
Tensor.__abs__ = abs
Tensor.__matmul__ = matmul
Tensor.__rmatmul__ = lambda self, other: matmul(other, self)


def _cmp(op):
    def method(self, other):
        if other is None or not isinstance(other, (Tensor, numbers.Number)):
            return NotImplemented
        return call(op, self, other)

    return method


Tensor.__eq__ = _cmp(P.eq)
Tensor.__ne__ = _cmp(P.ne)
Tensor.__lt__ = _cmp(P.lt)
Tensor.__le__ = _cmp(P.le)
Tensor.__gt__ = _cmp(P.gt)
Tensor.__ge__ = _cmp(P.ge)
Tensor.__hash__ = lambda self: id(self)

del _modes, _grad_state

__all__ = [
    "add", "sub", "subtract", "rsub", "mul", "multiply", "div", "divide", "true_divide",
    "neg", "negative", "reciprocal", "pow", "exp", "log", "sin", "cos", "tanh", "sigmoid",
    "sqrt", "abs", "absolute", "relu", "sign", "maximum", "clamp", "clip", "where", "eq", "ne",
    "not_equal", "lt", "less", "le", "less_equal", "gt", "greater", "ge", "greater_equal",
    "sum", "mean", "amax", "softmax", "log_softmax", "mm", "bmm", "mv", "dot", "matmul",
    "view", "reshape", "permute", "transpose", "swapaxes", "swapdims", "t", "expand",
    "unsqueeze", "squeeze", "unbind", "cat", "concat", "concatenate", "select", "narrow",
    "as_strided",
    "clone", "contiguous_format", "preserve_format", "channels_last",
]
