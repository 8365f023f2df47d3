"""Less common pointwise math as public functions and Tensor methods: the gamma family,
`erfinv`, `i0`, `sinc`, `logit`, `xlogy`, `hypot`, `logaddexp(2)`, `copysign`, `nextafter`,
`heaviside`, `ldexp`, `frexp`, `fmin`/`fmax`, `gcd`/`lcm`, `deg2rad`/`rad2deg`,
`float_power`, the bool tests, `clamp_min`/`clamp_max`, and the in-place functions PyTorch
also exposes at the top level (`torch.relu_`, `torch.exp_`, ...)."""

from __future__ import annotations

from .. import _dtype, return_types
from .._dispatch import call, call1
from .._tensor import Tensor
from ..ops import REGISTRY
from ..ops import math_special as M
from ..ops import scalar as SC
from ..ops import special as SP

# The ops are `ops.math_special`'s, a module that runs on first use (`ops/deferred.py`):
# each function finds its op when called, not when made.


def _elementwise(name: str, binary: bool = False, second: str = "other"):
    """The public function of op `name`: of one tensor, or of two with `binary`, the second
    named `second` (the op's `tensors_only` has the surface refuse anything but tensors)."""
    if binary and second == "values":  # (the parameter's own name: keywords spell it)
        def fn(input, values, *, out=None):
            return call(getattr(M, name), input, values)
    elif binary:
        def fn(input, other, *, out=None):
            return call(getattr(M, name), input, other)
    else:
        def fn(input, *, out=None):
            return call1(getattr(M, name), input)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name}" + (" of two tensors." if binary else ".")
    return fn


lgamma = _elementwise("lgamma")
digamma = _elementwise("digamma")
erfinv = _elementwise("erfinv")
i0 = _elementwise("i0")
special_i1 = _elementwise("special_i1")
sinc = _elementwise("sinc")
rad2deg = _elementwise("rad2deg")
deg2rad = _elementwise("deg2rad")
signbit = _elementwise("signbit")
isneginf = _elementwise("isneginf")
isposinf = _elementwise("isposinf")


def polygamma(n: int, input: Tensor, *, out=None) -> Tensor:
    """The n-th derivative of digamma."""
    return call(M.polygamma, n, input)


def logit(input: Tensor, eps: float | None = None, *, out=None) -> Tensor:
    """log(p / (1 - p)), with `p` clamped to [eps, 1 - eps] when `eps` is given."""
    return call(M.logit, input) if eps is None else call(M.logit, input, eps)


hypot = _elementwise("hypot", binary=True)
logaddexp = _elementwise("logaddexp", binary=True)
logaddexp2 = _elementwise("logaddexp2", binary=True)
nextafter = _elementwise("nextafter", binary=True)
heaviside = _elementwise("heaviside", binary=True, second="values")
fmin = _elementwise("fmin", binary=True)
fmax = _elementwise("fmax", binary=True)
gcd = _elementwise("gcd", binary=True)
lcm = _elementwise("lcm", binary=True)


def xlogy(input, other, *, out=None) -> Tensor:
    """input * log(other), 0 where input is 0 (either side may be a number)."""
    if not isinstance(input, Tensor):
        return call(M.xlogy_scalar_self, input, other)
    if not isinstance(other, Tensor):
        return call(M.xlogy_scalar_other, input, other)
    return call(SP.xlogy, input, other)


def copysign(input: Tensor, other, *, out=None) -> Tensor:
    """|input| with the sign of `other` (a tensor or a number)."""
    if isinstance(other, Tensor):
        return call(M.copysign, input, other)
    return call(M.copysign_scalar, input, other)


def ldexp(input: Tensor, other: Tensor, *, out=None) -> Tensor:
    """input * 2 ** other."""
    return call(M.ldexp, input, other)


def frexp(input: Tensor, *, out=None):
    """(mantissa, exponent) with input = mantissa * 2 ** exponent, |mantissa| in [0.5, 1)."""
    mantissa, exponent = call(M.frexp, input)
    return return_types.frexp(mantissa, exponent)


def _float_power_dtype(input, exponent):
    """complex128 when either operand (tensor or number) is complex, else float64."""
    for v in (input, exponent):
        if isinstance(v, Tensor) and v.dtype.is_complex or isinstance(v, complex):
            return _dtype.complex128
    return _dtype.float64


def float_power(input, exponent, *, out=None) -> Tensor:
    """pow computed in float64, or complex128 when either operand is complex (both operands
    converted first)."""
    wide = _float_power_dtype(input, exponent)
    if isinstance(input, Tensor):
        input = input.to(wide)
        if isinstance(exponent, Tensor):
            return input.pow(exponent.to(wide))
        return input.pow(exponent)
    return call(REGISTRY["pow.Scalar"], input, exponent.to(wide))


def isreal(input: Tensor) -> Tensor:
    """True where the imaginary part is zero; all True for a non-complex tensor."""
    if input.dtype.is_complex:
        return input.imag == 0
    from .._creation import ones_like

    return ones_like(input, dtype=_dtype.bool_)  # (laid out as the input, as PyTorch's)


def clamp_min(input: Tensor, min, *, out=None) -> Tensor:  # noqa: A002
    """max(input, min) elementwise (a number or a tensor)."""
    if isinstance(min, Tensor):
        return call(M.clamp_min_tensor, input, min)
    return call(SC.clamp_min, input, min)


def clamp_max(input: Tensor, max, *, out=None) -> Tensor:  # noqa: A002
    """min(input, max) elementwise (a number or a tensor)."""
    if isinstance(max, Tensor):
        return call(M.clamp_max_tensor, input, max)
    return call(M.clamp_max, input, max)


# ---------------------------------------------------------------- in-place forms


def xlogy_(self: Tensor, other) -> Tensor:
    """In-place xlogy."""
    if isinstance(other, Tensor):
        return call(M.xlogy_, self, other)
    return call(M.xlogy_scalar_other_, self, other)


def copysign_(self: Tensor, other) -> Tensor:
    """In-place copysign."""
    if isinstance(other, Tensor):
        return call(M.copysign_, self, other)
    return call(M.copysign_scalar_, self, other)


def clamp_min_(self: Tensor, min) -> Tensor:  # noqa: A002
    """In-place clamp_min."""
    if isinstance(min, Tensor):
        return call(M.clamp_min_tensor_, self, min)
    return call(M.clamp_min_, self, min)


def clamp_max_(self: Tensor, max) -> Tensor:  # noqa: A002
    """In-place clamp_max."""
    if isinstance(max, Tensor):
        return call(M.clamp_max_tensor_, self, max)
    return call(M.clamp_max_, self, max)


def polygamma_(self: Tensor, n: int) -> Tensor:
    """In-place polygamma (note the method's argument order: `x.polygamma_(n)`)."""
    return call(M.polygamma_, self, n)


def logit_(self: Tensor, eps: float | None = None) -> Tensor:
    """In-place logit."""
    return call(M.logit_, self) if eps is None else call(M.logit_, self, eps)


def ldexp_(self: Tensor, other: Tensor) -> Tensor:
    """In-place ldexp: self * 2 ** other written into `self`."""
    return call(M.ldexp_, self, other)


def float_power_(self: Tensor, exponent) -> Tensor:
    """In-place float_power: `self` must already have the result's dtype (float64, or
    complex128 when either operand is complex)."""
    wide = _float_power_dtype(self, exponent)
    if self.dtype is not wide:
        raise RuntimeError(f"the base given to float_power_ has dtype {self.dtype.legacy} but "
                           f"the operation's result requires dtype {wide.legacy}")
    if isinstance(exponent, Tensor):
        return call(REGISTRY["pow_.Tensor"], self, exponent.to(wide))
    return call(REGISTRY["pow_.Scalar"], self, exponent)


__all__ = [
    "lgamma", "digamma", "polygamma", "erfinv", "i0", "sinc", "logit", "xlogy", "hypot",
    "logaddexp", "logaddexp2", "copysign", "nextafter", "heaviside", "ldexp", "frexp",
    "fmin", "fmax", "gcd", "lcm", "deg2rad", "rad2deg", "float_power", "signbit",
    "isneginf", "isposinf", "isreal", "clamp_min", "clamp_max",
]
