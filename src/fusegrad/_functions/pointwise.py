"""Arithmetic and elementwise math: add, sub, mul, div, pow, the unary functions (exp, log,
sin, ..., erf, floor), clamp, where, remainder, lerp, addcmul (their aliases, `multiply`,
`arcsin`, `clip`, are `ops/spellings.py`'s `ALIASES`).
"""

from __future__ import annotations

import numbers

import numpy as _np

from .. import _dtype
from .._dispatch import call, call1
from .._tensor import Tensor
from .._type_names import python_type_name
from ..ops import REGISTRY
from ..ops import arithmetic as A
from ..ops import pointwise as P
from . import _args
from .indexing import nonzero

# ---------------------------------------------------------------- arithmetic


def add(input, other, *, alpha=1, out=None):
    """input + alpha * other."""
    if alpha != 1 or alpha.__class__ is not int:  # alpha=True/1.0 are checked
        return call(P.add, input, other, alpha)
    return call(P.add, input, other)


def sub(input, other, *, alpha=1, out=None):
    """input - alpha * other."""
    if alpha != 1 or alpha.__class__ is not int:  # alpha=True/1.0 are checked
        return call(P.sub, input, other, alpha)
    return call(P.sub, input, other)


def rsub(input, other, alpha=1):
    """other - alpha * input (`rsub.Tensor` for a tensor `other`, as PyTorch picks)."""
    op = A.rsub_tensor if isinstance(other, Tensor) else P.rsub
    if alpha != 1 or alpha.__class__ is not int:  # alpha=True/1.0 are checked
        return call(op, input, other, alpha)
    return call(op, input, other)


def mul(input, other, *, out=None):
    """Elementwise product."""
    return call(P.mul, input, other)


def div(input, other, *, rounding_mode=None, out=None):
    """Elementwise division: true division, or rounded toward minus infinity
    (`rounding_mode="floor"`) or zero (`"trunc"`) in the operands' dtype."""
    if rounding_mode is not None:
        return call(A.div_mode, input, other, rounding_mode)
    return call(P.div, input, other)


def neg(input, *, out=None):
    """-input."""
    if input.dtype is _dtype.bool_:
        raise RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
            "to invert a mask, use the `~` or `logical_not()` operator instead.")
    return call1(P.neg, input)


def reciprocal(input, *, out=None):
    """1 / input."""
    return call1(P.reciprocal, input)


def pow(input, exponent, *, out=None):  # noqa: A001
    """input ** exponent (tensor or number on either side)."""
    if not isinstance(input, Tensor):
        return call(P.pow_scalar_base, input, exponent)
    if isinstance(exponent, Tensor):
        return call(P.pow_tensor, input, exponent)
    return call(P.pow_scalar, input, exponent)


def _unary(op, name):
    def fn(input, *, out=None):
        return call1(op, input)

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
relu = _unary(P.relu, "relu")
sign = _unary(P.sign, "sign")


def maximum(input, other, *, out=None):
    """Elementwise maximum of two tensors."""
    return call(P.maximum, input, other)


def clamp(input, min=None, max=None, *, out=None):  # noqa: A002
    """Limit values to [min, max] (numbers or tensors)."""
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        if mixed_bounds(min, max):
            refuse_bounds("clamp", input, min, max, _args.is_method_copy(locals()))
        return call(P.clamp_tensor, input, min, max)
    return call(P.clamp, input, min, max)


_CLAMP = _args.Overloads(
    ("Tensor input, Tensor min=None, Tensor max=None, *, Tensor out=None",
     "Tensor input, Number min=None, Number max=None, *, Tensor out=None"),
    ("Tensor min=None, Tensor max=None", "Number min=None, Number max=None"))


def mixed_bounds(min, max) -> bool:  # noqa: A002
    """Whether one of clamp's bounds is a tensor of some dims and the other a number: neither
    of PyTorch's overloads (tensors; numbers, for which a 0-d tensor stands too) takes that."""
    for a, b in ((min, max), (max, min)):
        if isinstance(a, Tensor) and a.ndim and b is not None and not isinstance(b, Tensor):
            return True
    return False


def refuse_bounds(name: str, input, min, max, method: bool) -> None:  # noqa: A002
    """PyTorch's parser's TypeError for clamp's (or `name`'s) `mixed_bounds`, its arguments
    as the call of the function or method (`method`) gave them."""
    names, values = zip(*[(k, v) for k, v in (("min", min), ("max", max)) if v is not None])
    _args.parsed(name, _CLAMP, input, *_args.as_called(names, values, 2, input=input), method)


def where(condition, input=None, other=None, *, out=None):
    """Elements of `input` where `condition` holds, else of `other`."""
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    return call(P.where, condition, input, other)
# ---------------------------------------------------------------- more pointwise

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
special_erf = erf


def square(input, *, out=None):
    """input * input (recorded as pow(input, 2), as PyTorch does)."""
    return call(P.pow_scalar, input, 2)


def round(input, *, decimals=None, out=None):  # noqa: A001
    """Round half to even (to `decimals` places when given: PyTorch's `decimals` overload,
    its node `RoundBackward1`, even for 0)."""
    if decimals is not None:
        return call(P.round_decimals, input, decimals)
    return call(P.round_, input)


def round_(self, *, decimals=None):
    """In-place round (to `decimals` places when given, `round_.decimals`)."""
    if decimals is not None:
        return call(P.round_decimals_, self, decimals)
    return call(REGISTRY["round_"], self)


def nan_to_num(input, nan=0.0, posinf=None, neginf=None, *, out=None):
    """Replace NaN, +inf and -inf with finite numbers."""
    if nan.__class__ is not float or posinf is not None or neginf is not None:
        _nan_to_num_arguments("nan_to_num", nan, posinf, neginf, _args.called_as_method())
    return call(P.nan_to_num, input, nan, posinf, neginf)


def nan_to_num_(self, nan=0.0, posinf=None, neginf=None):
    """In-place nan_to_num."""
    if nan.__class__ is not float or posinf is not None or neginf is not None:
        _nan_to_num_arguments("nan_to_num_", nan, posinf, neginf, True)
    return call(P.nan_to_num_, self, nan, posinf, neginf)


def _nan_to_num_arguments(name: str, nan, posinf, neginf, method: bool) -> None:
    """PyTorch's parser's TypeError for a replacement that is no real number (`float?`)."""
    for position, param, value in ((2, "nan", nan), (3, "posinf", posinf),
                                   (4, "neginf", neginf)):
        if value is not None and not isinstance(value, (numbers.Real, _np.bool_, Tensor)):
            at = "" if param in _args.call_keywords(2) else f" (position {position - method})"
            raise TypeError(f"{name}(): argument '{param}'{at} must be float, not "
                            f"{python_type_name(value)}")


def atan2(input, other, *, out=None):
    """Elementwise arctangent of input / other, with the quadrant."""
    return call(P.atan2, input, other)


def floor_divide(input, other, *, out=None):
    """Elementwise floor(input / other)."""
    if not isinstance(input, Tensor):  # `2 // x`: the number stays a number (it promotes
        # as one: `2 // uint8 0-d tensor` is uint8, as PyTorch's wrapped number)
        input = _dtype.python_scalar(input) if isinstance(input, _np.generic) else input
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


_LERP = _args.Overloads(
    ("Tensor input, Tensor end, Tensor weight, *, Tensor out=None",
     "Tensor input, Tensor end, Number weight, *, Tensor out=None"),
    ("Tensor end, Tensor weight", "Tensor end, Number weight"))


def lerp(input, *args, out=None, **kwargs):
    """input + weight * (end - input): `end` a tensor, `weight` a tensor or a number."""
    if len(args) == 2 and not kwargs and isinstance(args[0], Tensor):
        end, weight = args
        if isinstance(weight, Tensor):
            return call(P.lerp_tensor, input, end, weight)
        if weight.__class__ is float or weight.__class__ is int:
            return call(P.lerp, input, end, weight)
    which, bound = _args.parsed("lerp", _LERP, input, args, kwargs,
                                _args.is_method_copy(locals()))
    op = P.lerp_tensor if which == 0 else P.lerp
    return call(op, input, bound["end"], bound["weight"])


def addcmul(input, tensor1, tensor2, *, value=1, out=None):
    """input + value * tensor1 * tensor2."""
    return call(P.addcmul, input, tensor1, tensor2, value)


def addcdiv(input, tensor1, tensor2, *, value=1, out=None):
    """input + value * tensor1 / tensor2."""
    return call(P.addcdiv, input, tensor1, tensor2, value)
