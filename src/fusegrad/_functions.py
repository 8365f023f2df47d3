"""Public functions (`fusegrad.add`, ...) and Tensor methods: thin wrappers over registry ops.

Each wrapper picks the overload PyTorch would pick (`x + 2` is `add.Tensor`, `2 - x` is
`rsub.Scalar`, `x.sum(0)` is `sum.dim_IntList`) and passes positional arguments to dispatch.
Composites (`matmul`, `reshape`, `contiguous`, indexing) are written over those ops, so they
record the same nodes PyTorch records.
"""

from __future__ import annotations

import builtins
import numbers
import types

from . import _dtype
from ._dispatch import _modes, call
from ._tensor import Tensor
from .autograd.grad_mode import state as _grad_state
from .ops import REGISTRY
from .ops import activation as A
from .ops import indexing as X
from .ops import inplace as I  # noqa: E741
from .ops import linalg as L
from .ops import misc as M
from .ops import pointwise as P
from .ops import reduction as R
from .ops import rnn as RN
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

    fn.__name__ = fn.__qualname__ = name
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
        return nonzero(condition, as_tuple=True)
    return call(P.where, condition, input, other)


def _compare(op, name):
    def fn(input, other, *, out=None):
        return call(op, input, other)

    fn.__name__ = fn.__qualname__ = name
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


def _is_advanced(i) -> bool:
    if isinstance(i, Tensor):
        return not (i.ndim == 0 and i.dtype.category == _dtype.INT)
    return isinstance(i, list) or (hasattr(i, "__array__") and hasattr(i, "dtype")
                                   and getattr(i, "ndim", 0) > 0)


def _advanced(input, index):
    """Split an index with tensors into basic indexing (views, as PyTorch applies first) and
    the list of index tensors for `index.Tensor` / `index_put` on that view."""
    from ._creation import tensor as _tensor

    items = []
    for i in index:
        if isinstance(i, list) or (not isinstance(i, Tensor) and hasattr(i, "__array__")):
            i = _tensor(i)
            if i.dtype.category == _dtype.FLOAT:
                raise IndexError(
                    "tensors used as indices must be long, int, byte or bool tensors")
        items.append(i)
    consumed = builtins.sum(
        (i.ndim if isinstance(i, Tensor) and i.dtype in (_dtype.bool_, _dtype.uint8) else 1)
        for i in items if i is not None and i is not Ellipsis)
    if items.count(Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > input.ndim:
        raise IndexError(f"too many indices for tensor of dimension {input.ndim}")
    if Ellipsis in items:
        k = items.index(Ellipsis)
        items[k:k + 1] = [slice(None)] * (input.ndim - consumed)
    result = input
    dim = 0
    indices = []
    for i in items:
        if i is None:
            result = call(S.unsqueeze, result, dim)
            indices.append(None)
            dim += 1
        elif isinstance(i, slice):
            step = 1 if i.step is None else i.step
            size = result.shape[dim]
            if not ((i.start in (None, 0)) and (i.stop is None or i.stop >= size) and step == 1):
                result = call(S.slice_, result, dim, _index_int(i.start), _index_int(i.stop),
                              int(step))
            indices.append(None)
            dim += 1
        elif isinstance(i, Tensor):
            indices.append(i)
            dim += i.ndim if i.dtype in (_dtype.bool_, _dtype.uint8) else 1
        else:
            i = int(i)
            size = result.shape[dim]
            if not -size <= i < size:
                raise IndexError(
                    f"index {i} is out of bounds for dimension {dim} with size {size}")
            result = call(S.select, result, dim, i)
    while indices and indices[-1] is None:
        indices.pop()
    return result, indices


def getitem(input, index):
    """Indexing: basic indices give a view; index tensors and lists use `index.Tensor`."""
    if index.__class__ is int and input.ndim:  # the common `x[i]`
        size = input.shape[0]
        if not -size <= index < size:
            raise IndexError(f"index {index} is out of bounds for dimension 0 with size {size}")
        return call(S.select, input, 0, index)
    if isinstance(index, tuple) and builtins.any(_is_advanced(i) for i in index) or \
            _is_advanced(index):
        result, indices = _advanced(input, index if isinstance(index, tuple) else (index,))
        return call(X.index, result, indices)
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
    """`input[index] = value`: a copy into the indexed view, or `index_put_` for index
    tensors."""
    if isinstance(index, tuple) and builtins.any(_is_advanced(i) for i in index) or \
            _is_advanced(index):
        target, indices = _advanced(input, index if isinstance(index, tuple) else (index,))
        if not isinstance(value, Tensor):
            from ._creation import tensor as _tensor

            value = _tensor(value, dtype=target.dtype)
        call(X.index_put_, target, indices, value, False)
        return
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


# ---------------------------------------------------------------- more pointwise

_UNARY_MORE = ("exp2", "expm1", "log2", "log10", "log1p", "rsqrt", "tan", "asin", "acos",
               "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "floor",
               "ceil", "trunc", "frac", "sgn", "isnan", "isinf", "isfinite", "logical_not",
               "bitwise_not")
_INPLACE_MORE = ("exp2", "expm1", "log2", "log10", "log1p", "rsqrt", "tan", "asin", "acos",
                 "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "floor",
                 "ceil", "trunc", "frac", "exp", "tanh", "sigmoid", "sqrt", "log", "sin", "cos",
                 "abs", "neg", "reciprocal", "relu", "sign", "logical_not", "bitwise_not",
                 "round")
exp2 = _unary(P.exp2, "exp2")
expm1 = _unary(P.expm1, "expm1")
log2 = _unary(P.log2, "log2")
log10 = _unary(P.log10, "log10")
log1p = _unary(P.log1p, "log1p")
rsqrt = _unary(P.rsqrt, "rsqrt")
tan = _unary(P.tan, "tan")
asin = _unary(P.asin, "asin")
acos = _unary(P.acos, "acos")
atan = _unary(P.atan, "atan")
sinh = _unary(P.sinh, "sinh")
cosh = _unary(P.cosh, "cosh")
asinh = _unary(P.asinh, "asinh")
acosh = _unary(P.acosh, "acosh")
atanh = _unary(P.atanh, "atanh")
erf = _unary(P.erf, "erf")
erfc = _unary(P.erfc, "erfc")
floor = _unary(P.floor, "floor")
ceil = _unary(P.ceil, "ceil")
trunc = _unary(P.trunc, "trunc")
frac = _unary(P.frac, "frac")
sgn = _unary(P.sgn, "sgn")
isnan = _unary(P.isnan, "isnan")
isinf = _unary(P.isinf, "isinf")
isfinite = _unary(P.isfinite, "isfinite")
logical_not = _unary(P.logical_not, "logical_not")
bitwise_not = _unary(P.bitwise_not, "bitwise_not")


def _inplace_unary(name):
    op = REGISTRY[name + "_"]

    def fn(self):
        return call(op, self)

    fn.__name__ = fn.__qualname__ = name + "_"
    fn.__doc__ = f"In-place {name}."
    return fn


arcsin, arccos, arctan, arcsinh, arccosh, arctanh = asin, acos, atan, asinh, acosh, atanh
fix = trunc
special_erf = erf


def square(input, *, out=None):
    """input * input (recorded as pow(input, 2), as PyTorch does)."""
    return call(P.pow_scalar, input, 2)


def round(input, *, decimals=0, out=None):  # noqa: A001
    """Round half to even (to `decimals` places when given)."""
    if decimals:
        return call(P.round_decimals, input, decimals)
    return call(P.round_, input)


def nan_to_num(input, nan=0.0, posinf=None, neginf=None, *, out=None):
    """Replace NaN, +inf and -inf with finite numbers."""
    return call(P.nan_to_num, input, nan, posinf, neginf)


def nan_to_num_(self, nan=0.0, posinf=None, neginf=None):
    """In-place nan_to_num."""
    return call(P.nan_to_num_, self, nan, posinf, neginf)


def atan2(input, other, *, out=None):
    """Elementwise arctangent of input / other, with the quadrant."""
    return call(P.atan2, input, other)


arctan2 = atan2


def floor_divide(input, other, *, out=None):
    """Elementwise floor(input / other)."""
    if not isinstance(input, Tensor):  # `2 // x`: the number becomes a 0-d tensor
        from ._creation import tensor as _tensor

        input = _tensor(input)
    if isinstance(other, Tensor):
        return call(P.floor_divide, input, other)
    return call(P.floor_divide_scalar, input, other)


def remainder(input, other, *, out=None):
    """Python's modulus: the result has the sign of `other`."""
    if not isinstance(input, Tensor):
        return call(P.remainder_rscalar, input, other)
    if isinstance(other, Tensor):
        return call(P.remainder, input, other)
    return call(P.remainder_scalar, input, other)


def fmod(input, other, *, out=None):
    """C's fmod: the result has the sign of `input`."""
    if isinstance(other, Tensor):
        return call(P.fmod, input, other)
    return call(P.fmod_scalar, input, other)


def minimum(input, other, *, out=None):
    """Elementwise minimum of two tensors."""
    return call(P.minimum, input, other)


def fmax(input, other, *, out=None):
    """maximum that ignores NaN (same values as maximum for finite inputs)."""
    return call(P.maximum, input, other)


def lerp(input, end, weight, *, out=None):
    """input + weight * (end - input)."""
    if isinstance(weight, Tensor):
        return call(P.lerp_tensor, input, end, weight)
    return call(P.lerp, input, end, weight)


def addcmul(input, tensor1, tensor2, *, value=1, out=None):
    """input + value * tensor1 * tensor2."""
    return call(P.addcmul, input, tensor1, tensor2, value)


def addcdiv(input, tensor1, tensor2, *, value=1, out=None):
    """input + value * tensor1 / tensor2."""
    return call(P.addcdiv, input, tensor1, tensor2, value)


def _logical(op):
    def fn(input, other, *, out=None):
        return call(op, input, other)

    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = f"Elementwise {op.name}, as a bool tensor."
    return fn


logical_and = _logical(P.logical_and)
logical_or = _logical(P.logical_or)
logical_xor = _logical(P.logical_xor)


def _bitwise(op, scalar_op):
    def fn(input, other, *, out=None):
        if not isinstance(input, Tensor):
            input, other = other, input
        if isinstance(other, Tensor):
            return call(op, input, other)
        return call(scalar_op, input, other)

    fn.__name__ = fn.__qualname__ = op.public
    fn.__doc__ = f"Elementwise {op.public} of integer or bool tensors."
    return fn


bitwise_and = _bitwise(P.bitwise_and, P.bitwise_and_scalar)
bitwise_or = _bitwise(P.bitwise_or, P.bitwise_or_scalar)
bitwise_xor = _bitwise(P.bitwise_xor, P.bitwise_xor_scalar)


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
            from ._creation import tensor as _tensor

            other = _tensor(other, dtype=_dtype.result_type(self, other))
        return call(op, self, other)

    fn.__name__ = fn.__qualname__ = op.name.split(".")[0]
    fn.__doc__ = f"In-place {fn.__name__.rstrip('_')}."
    return fn


# ---------------------------------------------------------------- more reductions

return_types = types.SimpleNamespace(**R.RETURN_TYPES)


def _rt(name, pair):
    return R.RETURN_TYPES[name](*pair)


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
    """The vector p-norm (`fro` is 2) over `dim` or all elements."""
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


# ---------------------------------------------------------------- more shape ops


def flatten(input, start_dim=0, end_dim=-1):
    """Dims `start_dim`..`end_dim` merged into one (a view when the strides allow)."""
    n = input.ndim
    if n == 0:
        return reshape(input, (1,))
    s, e = wrap_dim(start_dim, n), wrap_dim(end_dim, n)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return input
    shape = tuple(input.shape)
    return reshape(input, shape[:s] + (_prod(shape[s:e + 1]),) + shape[e + 1:])


def unflatten(input, dim, sizes):
    """Dim `dim` split into `sizes` (a view)."""
    d = wrap_dim(dim, input.ndim)
    shape = tuple(input.shape)
    sizes = S.infer_size(tuple(sizes), shape[d])
    return view(input, shape[:d] + sizes + shape[d + 1:])


def movedim(input, source, destination):
    """A view with dims `source` moved to positions `destination`."""
    n = input.ndim
    src = [source] if isinstance(source, numbers.Integral) else list(source)
    dst = [destination] if isinstance(destination, numbers.Integral) else list(destination)
    if len(src) != len(dst):
        raise RuntimeError(
            f"movedim: Invalid source or destination dims: source ({src} dims) should contain "
            f"the same number of dims as destination ({dst} dims)")
    src = [wrap_dim(d, n) for d in src]
    dst = [wrap_dim(d, n) for d in dst]
    order = [None] * n
    for s_, d_ in zip(src, dst):
        order[d_] = s_
    rest = iter(d for d in range(n) if d not in src)
    order = [next(rest) if o is None else o for o in order]
    return call(S.permute, input, tuple(order))


moveaxis = movedim


def broadcast_to(input, size):
    """A broadcast view of `input` with shape `size`."""
    return expand(input, tuple(size))


def broadcast_tensors(*tensors):
    """The tensors expanded to their common broadcast shape."""
    from .ops._util import broadcast_shapes

    shape = broadcast_shapes(*[tuple(t.shape) for t in tensors])
    return tuple(expand(t, shape) for t in tensors)


def repeat(input, *repeats):
    """The tensor tiled `repeats` times along each dim."""
    return call(S.repeat, input, _shape_args(repeats))


def tile(input, dims):
    """repeat with `dims` padded with leading ones to the tensor's rank."""
    dims = tuple(dims) if not isinstance(dims, numbers.Integral) else (int(dims),)
    if len(dims) < input.ndim:
        dims = (1,) * (input.ndim - len(dims)) + dims
    return call(S.repeat, input, dims)


def stack(tensors, dim=0, *, out=None):
    """Tensors of equal shape joined along a new dim."""
    return call(S.stack, list(tensors), dim)


def hstack(tensors, *, out=None):
    """Concatenate along dim 1 (dim 0 for 1-D tensors)."""
    tensors = [t if t.ndim else t.reshape(1) for t in tensors]
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors, *, out=None):
    """Concatenate along dim 0, 1-D tensors as rows."""
    return cat([t.reshape(1, -1) if t.ndim < 2 else t for t in tensors], 0)


def split(tensor, split_size_or_sections, dim=0):
    """Views of `split_size` elements (or of the listed sizes) along `dim`."""
    if isinstance(split_size_or_sections, numbers.Integral):
        return call(S.split, tensor, int(split_size_or_sections), dim)
    return call(S.split_with_sizes, tensor, [int(s) for s in split_size_or_sections], dim)


def chunk(input, chunks, dim=0):
    """At most `chunks` views of equal size (the last may be smaller) along `dim`."""
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    size = input.shape[wrap_dim(dim, input.ndim)]
    return call(S.split, input, builtins.max((size + chunks - 1) // chunks, 1), dim)


def unsafe_split(tensor, split_size, dim=0):
    """Like `split`, but the pieces are copies whose gradient node is UnsafeSplitBackward0."""
    return call(RN.unsafe_split, tensor, int(split_size), dim)


def unsafe_chunk(input, chunks, dim=0):
    """Like `chunk`, but the pieces are copies (UnsafeSplitBackward0)."""
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    return call(RN.unsafe_chunk, input, int(chunks), dim)


def transpose_(self, dim0, dim1):
    """Swap two dimensions of `self` in place (its strides change; no data moves)."""
    return call(RN.transpose_, self, dim0, dim1)


def tensor_split(input, indices_or_sections, dim=0):
    """Views split at the given indices, or into `n` nearly equal parts."""
    d = wrap_dim(dim, input.ndim)
    size = input.shape[d]
    if isinstance(indices_or_sections, numbers.Integral):
        n = int(indices_or_sections)
        sizes = [size // n + (1 if i < size % n else 0) for i in range(n)]
    else:
        bounds = [0] + [builtins.min(builtins.max(int(i), 0), size)
                        for i in indices_or_sections] + [size]
        sizes = [builtins.max(b - a, 0) for a, b in zip(bounds, bounds[1:])]
    return call(S.split_with_sizes, input, sizes, d)


def flip(input, dims):
    """A copy with the order of elements reversed along `dims`."""
    dims = (dims,) if isinstance(dims, numbers.Integral) else tuple(dims)
    return call(S.flip, input, dims)


def fliplr(input):
    """flip along dim 1."""
    return flip(input, (1,))


def flipud(input):
    """flip along dim 0."""
    return flip(input, (0,))


def roll(input, shifts, dims=None):
    """Elements shifted cyclically along `dims` (of the flattened tensor without `dims`)."""
    shifts = (shifts,) if isinstance(shifts, numbers.Integral) else tuple(shifts)
    if dims is None:
        return call(S.roll, input, shifts)
    dims = (dims,) if isinstance(dims, numbers.Integral) else tuple(dims)
    return call(S.roll, input, shifts, dims)


def tril(input, diagonal=0, *, out=None):
    """The lower triangle (below `diagonal`) of the last two dims; zeros elsewhere."""
    return call(S.tril, input, diagonal)


def triu(input, diagonal=0, *, out=None):
    """The upper triangle (above `diagonal`) of the last two dims; zeros elsewhere."""
    return call(S.triu, input, diagonal)


def diagonal(input, offset=0, dim1=0, dim2=1):
    """A view of the diagonal of dims `dim1`, `dim2` (as the last dim)."""
    return call(S.diagonal, input, offset, dim1, dim2)


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """A tensor whose (dim1, dim2) diagonals are the last dim of `input`."""
    return call(S.diag_embed, input, offset, dim1, dim2)


def diag(input, diagonal=0, *, out=None):
    """The diagonal of a matrix, or the matrix with a vector on its diagonal."""
    if input.ndim == 1:
        return diag_embed(input, diagonal, 0, 1)
    if input.ndim != 2:
        raise RuntimeError("diag(): Supports 1D or 2D tensors. Got " + f"{input.ndim}D")
    return clone(diagonal_fn(input, diagonal))


diagonal_fn = diagonal


def trace(input):
    """Sum of the main diagonal."""
    return sum(diagonal(input))


# ---------------------------------------------------------------- indexing ops


def index_select(input, dim, index, *, out=None):
    """The entries at `index` along `dim`."""
    return call(X.index_select, input, dim, index)


def gather(input, dim, index, *, sparse_grad=False, out=None):
    """out[i][j] = input[index[i][j]][j] (for dim 0), and so on."""
    return call(X.gather, input, dim, index)


def take_along_dim(input, indices, dim=None, *, out=None):
    """gather with broadcasting of `indices` (of the flattened tensor without `dim`)."""
    if dim is None:
        return gather(reshape(input, (-1,)), 0, reshape(indices, (-1,)))
    return gather(input, dim, indices)


def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """A copy of `input` with `src` (or `value`) written at `index` along `dim`."""
    if src is None:
        src = value
    if isinstance(src, Tensor):
        return call(X.scatter, input, dim, index, src)
    return call(X.scatter_value, input, dim, index, src)


def scatter_add(input, dim, index, src):
    """A copy of `input` with `src` added at `index` along `dim`."""
    return call(X.scatter_add, input, dim, index, src)


def index_add(input, dim, index, source, *, alpha=1, out=None):
    """A copy of `input` with `alpha * source` added at `index` along `dim`."""
    return call(X.index_add, input, dim, index, source, alpha)


def masked_fill(input, mask, value):
    """A copy of `input` with `value` where `mask` holds."""
    if isinstance(value, Tensor):
        return call(X.masked_fill_tensor, input, mask, value)
    return call(X.masked_fill, input, mask, value)


def masked_select(input, mask, *, out=None):
    """The elements where `mask` holds, as a 1-D tensor."""
    return call(X.masked_select, input, mask)


def nonzero(input, *, out=None, as_tuple=False):
    """Indices of the nonzero elements, one row each (or one tensor per dim)."""
    result = call(X.nonzero, input)
    if as_tuple:
        if input.ndim == 0:
            return (result.reshape(-1),)
        return tuple(result.select(1, k) for k in range(input.ndim))
    return result


def argwhere(input):
    """nonzero(input)."""
    return call(X.nonzero, input)


def index_put(input, indices, values, accumulate=False):
    """A copy of `input` with `values` put at the advanced index `indices`."""
    return call(X.index_put, input, list(indices), values, accumulate)


def one_hot(tensor, num_classes=-1):
    """int64 one-hot encoding of an index tensor (for nn.functional.one_hot)."""
    return call(X.one_hot, tensor, num_classes)


# ---------------------------------------------------------------- more linear algebra


def outer(input, vec2, *, out=None):
    """Outer product of two vectors (recorded as a broadcast multiply, as in PyTorch)."""
    if input.ndim != 1 or vec2.ndim != 1:
        raise RuntimeError(f"outer: Expected 1-D argument self, but got {input.ndim}-D"
                           if input.ndim != 1 else
                           f"outer: Expected 1-D argument vec2, but got {vec2.ndim}-D")
    return call(P.mul, reshape(input, (-1, 1)), vec2)


ger = outer


def addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * (mat1 @ mat2)."""
    from .ops import nn as _nn_ops

    return call(_nn_ops.addmm, input, mat1, mat2, beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * (batch1 @ batch2), batched."""
    return call(L.baddbmm, input, batch1, batch2, beta, alpha)


def addmv(input, mat, vec, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * (mat @ vec)."""
    prod = mv(mat, vec)
    return add(input * beta if beta != 1 else input, prod * alpha if alpha != 1 else prod)


def tensordot(a, b, dims=2, out=None):
    """Sum over the paired dims of `a` and `b` (the last `dims` of a, first of b)."""
    if isinstance(dims, numbers.Integral):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        da = list(range(a.ndim - dims, a.ndim))
        db = list(range(dims))
    else:
        da, db = dims
        da = [da] if isinstance(da, numbers.Integral) else list(da)
        db = [db] if isinstance(db, numbers.Integral) else list(db)
    if isinstance(da, Tensor):
        da = da.tolist()
    da = [wrap_dim(d, a.ndim) for d in da]
    db = [wrap_dim(d, b.ndim) for d in db]
    for x, y in zip(da, db):
        if a.shape[x] != b.shape[y]:
            raise RuntimeError(
                f"contracted dimensions need to match, but first has size {a.shape[x]} in dim "
                f"{x} and second has size {b.shape[y]} in dim {y}")
    fa = [d for d in range(a.ndim) if d not in da]
    fb = [d for d in range(b.ndim) if d not in db]
    k = _prod([a.shape[d] for d in da])
    left = reshape(permute(a, fa + da), (_prod([a.shape[d] for d in fa]), k))
    right = reshape(permute(b, db + fb), (k, _prod([b.shape[d] for d in fb])))
    return reshape(mm(left, right), tuple(a.shape[d] for d in fa) + tuple(
        b.shape[d] for d in fb))


def einsum(equation, *operands):
    """Einstein summation, contracting operands pairwise with batched matrix products."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    eq = equation.replace(" ", "")
    lhs, arrow, out_spec = eq.partition("->")
    specs = lhs.split(",")
    if len(specs) != len(operands):
        raise ValueError("einsum(): more operands were provided than specified in the equation"
                         if len(operands) > len(specs) else
                         "einsum(): fewer operands were provided than specified in the equation")
    width = _max_ellipsis(specs, operands)
    specs = [_expand_ellipsis(s, t.ndim, width) for s, t in zip(specs, operands)]
    if not arrow:
        counts = {}
        for s in specs:
            for c in s:
                counts[c] = counts.get(c, 0) + 1
        ell = _ELLIPSIS_LETTERS[:width]
        out_spec = ell + "".join(sorted(c for c, n in counts.items()
                                        if n == 1 and c not in ell))
    else:
        out_spec = _expand_ellipsis(out_spec, None, width)
    terms = [_einsum_prepare(t, s) for t, s in zip(operands, specs)]
    t, s = terms[0]
    if len(terms) == 1:
        # One operand: put the kept letters first, in output order (a permute, as PyTorch
        # records even when it is the identity), then sum the others.
        order = [s.index(c) for c in out_spec] + [i for i, c in enumerate(s) if c not in out_spec]
        t = permute(t, order)
        s = "".join(s[i] for i in order)
    for k in range(1, len(terms)):
        later = "".join(x for _, x in terms[k + 1:])
        t, s = _einsum_pair(t, s, terms[k][0], terms[k][1], out_spec + later)
    # Sum what the output does not keep, then order the remaining letters.
    drop = [i for i, c in enumerate(s) if c not in out_spec]
    if drop:
        t = sum(t, drop)
        s = "".join(c for c in s if c in out_spec)
    if s != out_spec:
        t = permute(t, [s.index(c) for c in out_spec])
    return t


def _max_ellipsis(specs, operands):
    n = 0
    for s, t in zip(specs, operands):
        if "..." in s:
            n = builtins.max(n, t.ndim - (len(s) - 3))
    return n


_ELLIPSIS_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _expand_ellipsis(spec, ndim, width):
    if "..." not in spec:
        return spec
    k = width if ndim is None else ndim - (len(spec) - 3)
    return spec.replace("...", _ELLIPSIS_LETTERS[width - k:width])


def _einsum_prepare(t, s):
    """Take diagonals of repeated letters in one operand."""
    while len(set(s)) != len(s):
        c = next(c for c in s if s.count(c) > 1)
        i = s.index(c)
        j = s.index(c, i + 1)
        t = diagonal(t, 0, i, j)
        s = s[:i] + s[i + 1:j] + s[j + 1:] + c
    return t, s


def _einsum_pair(a, sa, b, sb, out_spec):
    """Contract two operands: letters in both and kept are batch dims, letters in both and not
    kept are summed by a bmm; the others stay free."""
    # Sum letters that appear only in one operand and not in the output early.
    for t_name in ("a", "b"):
        t, s, other = (a, sa, sb) if t_name == "a" else (b, sb, sa)
        drop = [i for i, c in enumerate(s) if c not in other and c not in out_spec]
        if drop:
            t = sum(t, drop)
            s = "".join(c for i, c in enumerate(s) if i not in drop)
        if t_name == "a":
            a, sa = t, s
        else:
            b, sb = t, s
    batch = [c for c in sa if c in sb and c in out_spec]
    contract = [c for c in sa if c in sb and c not in out_spec]
    fa = [c for c in sa if c not in sb]
    fb = [c for c in sb if c not in sa]
    size = {}
    for t, s in ((a, sa), (b, sb)):
        for i, c in enumerate(s):
            size[c] = builtins.max(size.get(c, 1), t.shape[i])
    if not contract:  # nothing to sum: a broadcast product (PyTorch records a mul)
        a = permute(a, [sa.index(c) for c in batch + fa])
        b = permute(b, [sb.index(c) for c in batch + fb])
        a = reshape(a, tuple(a.shape) + (1,) * len(fb))
        b = reshape(b, tuple(b.shape[:len(batch)]) + (1,) * len(fa) + tuple(b.shape[len(batch):]))
        return mul(a, b), "".join(batch + fa + fb)
    a = expand(permute(a, [sa.index(c) for c in batch + fa + contract]),
               tuple(size[c] for c in batch + fa + contract))
    b = expand(permute(b, [sb.index(c) for c in batch + contract + fb]),
               tuple(size[c] for c in batch + contract + fb))
    nb = _prod([size[c] for c in batch])
    m = _prod([size[c] for c in fa])
    k = _prod([size[c] for c in contract])
    n = _prod([size[c] for c in fb])
    r = bmm(reshape(a, (nb, m, k)), reshape(b, (nb, k, n)))
    r = reshape(r, tuple(size[c] for c in batch + fa + fb))
    return r, "".join(batch + fa + fb)


class _Linalg:
    """The `torch.linalg` functions fusegrad has."""

    @staticmethod
    def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
        """The vector `ord`-norm of `x` over `dim` (all elements by default)."""
        return _vector_norm(x, ord, dim, keepdim, dtype=dtype)

    @staticmethod
    def norm(A, ord=None, dim=None, keepdim=False, *, out=None, dtype=None):
        """Vector norms (and the Frobenius matrix norm) of `A`."""
        if ord is None or ord == "fro":
            if ord == "fro" and dim is None and A.ndim != 2:
                raise RuntimeError(
                    f"linalg.norm: If dim is not specified but ord is, the input must be 1D or "
                    f"2D. Got {A.ndim}D.")
            return _vector_norm(A, 2, dim, keepdim, dtype=dtype)
        if isinstance(ord, str) or (dim is None and A.ndim == 2) or (
                dim is not None and not isinstance(dim, numbers.Integral) and len(dim) == 2):
            raise NotImplementedError(f"linalg.norm: matrix norm ord={ord!r} is not supported")
        return _vector_norm(A, ord, dim, keepdim, dtype=dtype)

    @staticmethod
    def matmul(input, other, *, out=None):
        """matmul."""
        return matmul(input, other)


linalg = _Linalg()


# ---------------------------------------------------------------- activations
# The functional forms nn.functional uses (`gelu(x, approximate=...)`, `elu(x, alpha, inplace)`).


def gelu(input, approximate="none"):
    """x * Phi(x) (or its tanh approximation)."""
    if approximate == "none":
        return call(A.gelu, input)
    return call(A.gelu, input, approximate)


def _act(op, inplace_op, name):
    def fn(input, inplace=False):
        return call(inplace_op if inplace else op, input)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"The {name} activation (in place with `inplace=True`)."
    return fn


silu = _act(A.silu, A.silu_, "silu")
mish = _act(A.mish, A.mish_, "mish")
hardsigmoid = _act(A.hardsigmoid, A.hardsigmoid_, "hardsigmoid")
hardswish = _act(A.hardswish, A.hardswish_, "hardswish")


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * x)) / beta, linear above `threshold`."""
    return call(A.softplus, input, beta, threshold)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x for x > 0, else negative_slope * x."""
    return call(A.leaky_relu_ if inplace else A.leaky_relu, input, negative_slope)


def elu(input, alpha=1.0, inplace=False):
    """x for x > 0, else alpha * (exp(x) - 1)."""
    return call(A.elu_ if inplace else A.elu, input, alpha)


def selu(input, inplace=False):
    """scale * elu(x, alpha) with the self-normalizing constants."""
    return call(A.elu_ if inplace else A.elu, input, A.SELU_ALPHA, A.SELU_SCALE)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """x clamped to [min_val, max_val]."""
    return call(A.hardtanh_ if inplace else A.hardtanh, input, min_val, max_val)


def relu6(input, inplace=False):
    """hardtanh(x, 0, 6)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def logsigmoid(input):
    """log(sigmoid(x)), computed stably."""
    return call(A.log_sigmoid, input)


# ---------------------------------------------------------------- searching, comparing


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 out=None, sorter=None):
    """Insertion indices of `input` into the (last dim of the) sorted sequence."""
    if not isinstance(input, Tensor):
        from ._creation import tensor as _tensor

        input = _tensor(input, dtype=sorted_sequence.dtype)
    return call(M.searchsorted, sorted_sequence, input, out_int32, right, side, sorter)


def bucketize(input, boundaries, *, out_int32=False, right=False, out=None):
    """The bucket of each element of `input` given sorted 1-D `boundaries`."""
    return call(M.bucketize, input, boundaries, out_int32, right)


def bincount(input, weights=None, minlength=0):
    """Counts (or summed weights) of each non-negative integer in a 1-D tensor."""
    return call(M.bincount, input, weights, minlength)


def unique(input, sorted=True, return_inverse=False, return_counts=False,  # noqa: A002
           dim=None):
    """The sorted unique elements, with the inverse indices and counts when asked."""
    if dim is not None:
        raise NotImplementedError("unique(dim=...) is not supported yet")
    values, inverse, counts = call(M.unique, input, sorted, return_inverse, return_counts)
    extra = ((inverse,) if return_inverse else ()) + ((counts,) if return_counts else ())
    return (values,) + extra if extra else values


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise |input - other| <= atol + rtol * |other|."""
    return call(M.isclose, input, other, rtol, atol, equal_nan)


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> builtins.bool:
    """True if every pair of elements is close (see isclose)."""
    return builtins.bool(isclose(input, other, rtol, atol, equal_nan).all().item())


def equal(input, other) -> builtins.bool:
    """True if both tensors have the same shape and elements."""
    if tuple(input.shape) != tuple(other.shape):
        return False
    return builtins.bool(eq(input, other).all().item())


def meshgrid(*tensors, indexing=None):
    """Coordinate grids from 1-D tensors (`ij` indexing unless `xy` is asked for)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        import warnings

        warnings.warn(
            "torch.meshgrid: in an upcoming release, it will be required to pass the indexing "
            "argument.", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but '
                           f"received: {indexing}")
    swap = indexing == "xy" and len(tensors) >= 2
    ts = list(tensors)
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(t.numel() for t in ts)
    out = []
    for i, t in enumerate(ts):
        view_shape = [1] * len(ts)
        view_shape[i] = -1
        out.append(expand(view(t, tuple(view_shape)), shape))
    if swap:
        out[0], out[1] = out[1], out[0]
    return tuple(out)


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
    setattr(Tensor, _name, globals()[_name])
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
    *_UNARY_MORE, "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "fix",
    "square", "round", "nan_to_num", "nan_to_num_", "atan2", "arctan2", "floor_divide",
    "remainder", "fmod", "minimum", "fmax", "lerp", "addcmul", "addcdiv", "logical_and",
    "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
    "amin", "max", "min", "argmax", "argmin", "prod", "var", "std", "var_mean", "std_mean",
    "norm", "logsumexp", "cumsum", "cumprod", "cummax", "cummin", "all", "any",
    "count_nonzero", "median", "mode", "kthvalue", "topk", "sort", "argsort", "msort",
    "return_types", "flatten", "unflatten", "movedim", "moveaxis", "broadcast_to",
    "broadcast_tensors", "repeat", "tile", "stack", "hstack", "vstack", "split", "chunk",
    "unsafe_split", "unsafe_chunk",
    "tensor_split", "flip", "fliplr", "flipud", "roll", "tril", "triu", "diagonal",
    "diag_embed", "diag", "trace", "index_select", "gather", "take_along_dim", "scatter",
    "scatter_add", "index_add", "masked_fill", "masked_select", "nonzero", "argwhere",
    "index_put", "outer", "ger", "addmm", "baddbmm", "addmv", "tensordot", "einsum",
    "linalg", "selu", "searchsorted", "bucketize", "bincount", "unique", "isclose",
    "allclose", "equal", "meshgrid",
]
