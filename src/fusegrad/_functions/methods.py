"""Tensor methods and operators: attaches `ops/spellings.py`'s table to `Tensor` (`x.sum()`,
`x + y`, `x[i]`, the in-place forms `x.exp_()`, ...) in one loop, `attach`, once the public
functions exist; the function forms of in-place methods (`fusegrad.relu_`) are made here too.

This module holds what the table names beyond the public functions: the makers of the forms
generated from a registry op (an operator, an in-place method) and the methods whose
signature differs from their function's (`x.where(cond, y)`, `x.lerp_(end, weight)`).
"""

from __future__ import annotations

import numbers

import numpy as np

from .. import _dtype
from .._dispatch import call, call2
from .._scalar_conversion import wrapped_int
from .._tensor import Tensor
from ..ops import REGISTRY
from ..ops import indexing as X
from ..ops import pointwise as P
from ..ops import reduction as R
from ..ops.spellings import INPLACE_FUNCTIONS, METHODS, OPERAND_NAMES
from . import _args
from ._args import method_copy, method_form, required_dim
from .comparison import unique
from .indexing import index_put_indices, scatter_with_reduce
from .inplace import copy_
from .lazy_methods import forwarding_method, resolve
from .linear_algebra import matmul
from .pointwise import (
    bitwise_not,
    floor_divide,
    mixed_bounds,
    pow,
    refuse_bounds,
    remainder,
    where,
)
from .reduction import TOPK, topk
from .shape import diagonal_argument, expand, reshape, tril, triu, view

# ---------------------------------------------------------------- forms made from an op


def _inplace_unary(op):
    def fn(self):
        return call(op, self)

    fn.__name__ = fn.__qualname__ = op.name.split(".")[0]
    fn.__doc__ = f"In-place {fn.__name__[:-1]}."
    return fn


def _inplace_args(op):
    # Found by name when called: its module may run on first use (`ops/deferred.py`).
    name = op if op.__class__ is str else op.name

    def fn(self, *args):
        return call(REGISTRY[name], self, *args)

    fn.__name__ = fn.__qualname__ = name.split(".")[0]
    fn.__doc__ = f"In-place {fn.__name__.rstrip('_')}."
    return fn


def _tensors_inplace(op, public: str):
    """In-place method `public` of an op of two tensors (`x.hypot_(y)`), its operand named
    `other` or as `spellings.OPERAND_NAMES` says: the op's `OpDef.tensors_only` has the
    surface refuse anything but a tensor, with PyTorch's parser's message."""
    # Found by name when called: its module may run on first use (`ops/deferred.py`).
    name = op if op.__class__ is str else op.name

    def fn(self, other):
        return call(REGISTRY[name], self, other)

    if OPERAND_NAMES.get(public) == "values":  # (the parameter's own name, for keywords)
        def fn(self, values):  # noqa: F811
            return call(REGISTRY[name], self, values)

    fn.__name__ = fn.__qualname__ = public
    fn.__doc__ = f"In-place {public.rstrip('_')}."
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

            dt = _dtype.result_type(self, other)
            if other.__class__ is int and dt.category == _dtype.INT:
                other = wrapped_int(other, dt)  # (`x &= 300` of int8 is x & 44)
            other = _tensor(other, dtype=dt)
        return call(op, self, other)

    fn.__name__ = fn.__qualname__ = op.name.split(".")[0]
    fn.__doc__ = f"In-place {fn.__name__.rstrip('_')}."
    return fn


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

    # The protocol's wrapper runs the common case in its own frame (a plain tensor and a
    # tensor or Python number): one Python frame between `a * b` and dispatch.
    method.plain_path = ("other.__class__ in operands", "call2(op, self, other)",
                         {"operands": _OPERAND_CLASSES, "call2": call2, "op": op})
    method.binary_op = op  # the protocol makes Tensor's method with call2 written in
    return method


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

    method.plain_path = ("other.__class__ in operands", "call(op, self, other)",
                         {"operands": _OPERAND_CLASSES, "call": call, "op": op})
    return method


_MAKERS = {"inplace": _inplace_unary, "inplace_args": _inplace_args, "operator": _operator,
           "compare": _cmp, "binary_inplace": _binary_inplace,
           "scalar_as_tensor": _scalar_as_tensor}

# ---------------------------------------------------------------- methods of their own


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


def _invert(self):
    """`~x`: bitwise_not, which Python's operator refuses for floating and complex tensors
    with its own message (the function's is the kernel's NotImplementedError)."""
    if self.dtype.is_floating_point or self.dtype.is_complex:
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type "
                        "tensors")
    return bitwise_not(self)


_invert.__name__ = "__invert__"
_invert.__qualname__ = "Tensor.__invert__"


def _rpow(self, other):
    if other.__class__ not in _OPERAND_CLASSES and _foreign(other):
        return NotImplemented
    return call(P.pow_scalar_base, other, self)


# Their common case (a tensor or Python number operand), run in the protocol wrapper's frame.
_rtruediv.plain_path = ("other.__class__ in operands",
                        "call2(mul, call(reciprocal, self), other)",
                        {"operands": _OPERAND_CLASSES, "call": call, "call2": call2,
                         "mul": P.mul, "reciprocal": P.reciprocal})
_pow.plain_path = ("other.__class__ in operands", "pow(self, other)",
                   {"operands": _OPERAND_CLASSES, "pow": pow})
_rpow.plain_path = ("other.__class__ in operands", "call(pow_scalar_base, other, self)",
                    {"operands": _OPERAND_CLASSES, "call": call,
                     "pow_scalar_base": P.pow_scalar_base})


def _pos(self):
    """`+x` is `x` itself (a bool tensor's is an error, as PyTorch's)."""
    if self.dtype is _dtype.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return self


_pos.__name__ = _pos.__qualname__ = "positive"  # PyTorch's name for `+x` and `x.positive()`


def _foreign_operand(other) -> bool:
    """Whether `other` is no operand of `@` for a tensor: PyTorch's `@` returns NotImplemented
    for it (so Python's own message names both types); a type with `__torch_function__` its
    handler takes. A NumPy array is foreign too: `x @ array` is then NumPy's `__rmatmul__` on
    `x.__array__()` (NumPy's promotion, `__array_wrap__` making the result a tensor), and
    `array @ x` a TypeError (NumPy defers to the higher `__array_priority__`), as in
    PyTorch."""
    return not isinstance(other, Tensor) and not hasattr(type(other), "__torch_function__")


def _matmul(self, other):
    """`self @ other`."""
    if other.__class__ is not Tensor and _foreign_operand(other):
        return NotImplemented
    return matmul(self, other)


_matmul.plain_path = matmul.plain_path  # (the wrapper's paths for two matrices: matmul's)
_matmul.matrix_op = matmul.matrix_op


def _rmatmul(self, other):
    """`other @ self`."""
    if other.__class__ is not Tensor and _foreign_operand(other):
        return NotImplemented
    return matmul(other, self)


def _topk(self, *args, **kwargs):
    """`x.topk(k, dim=-1, largest=True, sorted=True)`: PyTorch's parser reads the arguments
    (its messages name a position only for an argument given by position)."""
    n = len(args)
    if not kwargs and 1 <= n <= 2 and args[0].__class__ is int and \
            (n == 1 or args[1].__class__ is int):
        return topk(self, *args)
    bound = _args.parsed("topk", TOPK, self, args, kwargs, True)[1]
    return topk(self, _args.index(bound["k"]), _args.index(bound["dim"]), bound["largest"],
                bound["sorted"])


_topk.__name__, _topk.__qualname__ = "topk", "Tensor.topk"


def _reversed(self):
    """`reversed(x)`: `x.flip(0)`, a tensor (a 0-d tensor is returned itself)."""
    if self.dim() == 0:
        return self
    return self.flip(0)


def _rfloordiv(self, other):
    """`other // self`."""
    return floor_divide(other, self)


def _rmod(self, other):
    """`other % self`."""
    return remainder(other, self)


def _hash(self):
    """Tensors hash by identity, as in PyTorch."""
    return id(self)


def _where_method(self, condition, other):
    """`where(condition, self, other)`."""
    return where(condition, self, other)


def _view_as(self, other):
    """`self.view(other.shape)`."""
    if not isinstance(other, Tensor):
        raise _args.not_a_tensor(other, "view_as", "other", 1)
    return view(self, tuple(other.shape))


def _reshape_as(self, other):
    """`self.reshape(other.shape)`."""
    if not isinstance(other, Tensor):
        raise _args.not_a_tensor(other, "reshape_as", "other", 1)
    return reshape(self, tuple(other.shape))


def _expand_as(self, other):
    """`self.expand(other.shape)`."""
    if not isinstance(other, Tensor):
        raise _args.not_a_tensor(other, "expand_as", "other", 1)
    return expand(self, tuple(other.shape))


_LERP_ = _args.Overloads((), ("Tensor end, Tensor weight", "Tensor end, Number weight"))


def _lerp_(self, *args, **kwargs):
    """In place: self + weight * (end - self), `end` a tensor."""
    if len(args) == 2 and not kwargs and isinstance(args[0], Tensor):
        end, weight = args
    else:
        bound = _args.parsed("lerp_", _LERP_, self, args, kwargs, True)[1]
        end, weight = bound["end"], bound["weight"]
    return call(P.lerp_tensor_ if isinstance(weight, Tensor) else P.lerp_, self, end, weight)


def _addcmul_(self, tensor1, tensor2, *, value=1):
    """In-place addcmul."""
    return call(P.addcmul_, self, tensor1, tensor2, value)


def _addcdiv_(self, tensor1, tensor2, *, value=1):
    """In-place addcdiv."""
    return call(P.addcdiv_, self, tensor1, tensor2, value)


def _square_(self):
    """In-place square (recorded as pow_(self, 2), as PyTorch does)."""
    return call(P.pow_, self, 2)


def _pow_(self, exponent):
    """In-place pow (by a tensor: `pow_.Tensor`, PowBackward1)."""
    if isinstance(exponent, Tensor):
        return call(REGISTRY["pow_.Tensor"], self, exponent)
    return call(P.pow_, self, exponent)


def _sgn_(self):
    """In-place sgn."""
    return call(P.sgn_, self)


def _clamp_(self, min=None, max=None):  # noqa: A002
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        if mixed_bounds(min, max):
            refuse_bounds("clamp_", self, min, max, True)
        return call(P.clamp_tensor_, self, min, max)
    return call(P.clamp_, self, min, max)


def _cumsum_(self, dim=None, *, dtype=None, axis=None):
    """In-place cumsum (`dtype`, if given, must be the tensor's own)."""
    dim = required_dim("cumsum_", dim, axis)
    if dim.__class__ is not int:
        _args.int_parameter(dim, "cumsum_", "dim", 1)
    return call(R.cumsum_, self, dim) if dtype is None else call(R.cumsum_, self, dim, dtype)


def _tril_(self, diagonal=0):
    """In place: the lower triangle kept, the rest zero."""
    if diagonal.__class__ is not int:
        diagonal = diagonal_argument("tril_", diagonal, True)
    return copy_(self, tril(self, diagonal))


def _triu_(self, diagonal=0):
    """In place: the upper triangle kept, the rest zero."""
    if diagonal.__class__ is not int:
        diagonal = diagonal_argument("triu_", diagonal, True)
    return copy_(self, triu(self, diagonal))


def _scatter_(self, dim, index, src=None, *, value=None, reduce=None):
    if src is None:
        src = value
    if reduce is not None:
        return scatter_with_reduce(self, dim, index, src, reduce, True)
    if isinstance(src, Tensor):
        return call(X.scatter_, self, dim, index, src)
    return call(X.scatter_value_, self, dim, index, src)


def _scatter_add_(self, dim, index, src):
    """In-place scatter_add."""
    return call(X.scatter_add_, self, dim, index, src)


def _index_add_(self, dim, index, source, *, alpha=1):
    """In-place index_add."""
    return call(X.index_add_, self, dim, index, source, alpha)


def _masked_fill_(self, mask, value):
    X.masked_fill_arguments_check("masked_fill_", mask, value)
    if isinstance(value, Tensor):
        return call(X.masked_fill_tensor_, self, mask, value)
    return call(X.masked_fill_, self, mask, value)


def _index_put_(self, indices, values, accumulate=False):
    """In-place index_put (of index tensors only, as PyTorch's binding takes them)."""
    return call(X.index_put_, self, index_put_indices(indices, 0), values, accumulate)


def _unique(self, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """`unique(self, ...)` with the method's positional order."""
    return unique(self, sorted, return_inverse, return_counts, dim)


def _norm_method(self, p="fro", dim=None, keepdim=False, dtype=None):
    """`Tensor.norm`: its fourth parameter is `dtype`, where the function's is `out`."""
    from .reduction import norm

    return norm(self, p, dim, keepdim, dtype=dtype)


def _lu_method(self, pivot=True, get_infos=False):
    """`Tensor.lu`: the function's parameters but `out`, which the method does not take."""
    from .linalg_extra import lu

    return lu(self, pivot, get_infos)


# (Named as PyTorch's Python methods are, which its messages show: `Tensor.lu() takes ...`.)
_norm_method.__name__, _norm_method.__qualname__ = "norm", "Tensor.norm"
_lu_method.__name__, _lu_method.__qualname__ = "lu", "Tensor.lu"
_norm_method.__code__ = _norm_method.__code__.replace(co_name="norm", co_qualname="Tensor.norm")
_lu_method.__code__ = _lu_method.__code__.replace(co_name="lu", co_qualname="Tensor.lu")


def _polygamma(self, n):
    """`polygamma(n, self)`: the method takes the order second."""
    from .math_extra import polygamma

    return polygamma(n, self)


# ---------------------------------------------------------------- attaching


def attach(functions: dict) -> None:
    """Attach every entry of `spellings.METHODS` to Tensor; `functions` is the namespace of
    the public functions (the "function" form's names)."""
    for name, (form, *what) in METHODS.items():
        if form == "function":
            value = functions[what[0]]
        elif form == "method":
            value = resolve(what[0])
        elif form == "method_of_lazy_module":
            value = forwarding_method(name, what[0])
        elif form == "property":
            value = property(resolve(what[0]), doc=f"`{name}`, as PyTorch reports it.")
        elif form == "tensors_inplace":  # (its messages name the method as spelled)
            value = _tensors_inplace(what[0], name)
        else:  # an op not registered yet is a deferred module's (`ops/deferred.py`): named
            value = _MAKERS[form](*(dict.get(REGISTRY, op) or op for op in what))
        setattr(Tensor, name, method_form(value))
    # The public functions the methods are: their copies refusing `out=` (the out= guard of
    # each public name runs the function itself, `with_out`), so a method is its function.
    for name, value in list(functions.items()):
        copy = method_copy(value)
        if copy is not None and copy is not value:
            functions[name] = copy


def _function_form(name: str):
    def fn(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"`input.{name}(...)`."
    return fn


def function_forms() -> dict:
    """The top-level functions of `spellings.INPLACE_FUNCTIONS` (`fusegrad.relu_(x)` is
    `x.relu_()`), by name."""
    return {name: _function_form(name) for name in INPLACE_FUNCTIONS}


def _split_method(self, split_size, dim=0):
    """`Tensor.split`: PyTorch's method names its size argument `split_size` (the function
    `torch.split` names it `split_size_or_sections`)."""
    from .shape import split

    return split(self, split_size, dim)


# Named as PyTorch's method, which its argument errors quote (`Tensor.split() got ...`).
_split_method.__name__ = "split"
_split_method.__qualname__ = "Tensor.split"
