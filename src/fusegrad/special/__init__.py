"""`fusegrad.special` (torch.special): special functions. Most are the top-level functions
under SciPy's names (`expit` is `sigmoid`, `gammaln` is `lgamma`, `psi` is `digamma`,
`multigammaln` is `mvlgamma`, `gammainc` is `igamma`); `erfcx` and `i1` are registry ops of
their own, as are `entr`, `log_ndtr`, `zeta`, `ndtri`, `i0e`, `i1e`, `xlog1py` and the Bessel
functions `bessel_j0`, `bessel_j1`, `spherical_bessel_j0`; `ndtr` is written over `erf` as
PyTorch's is. The Bessel functions Y0, Y1, I0, I1, K0, K1 (and scaled K), the Airy function
and the orthogonal polynomials, which PyTorch does not differentiate, are NumPy kernels here
(`_bessel`, `_polynomials`)."""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype, _out
from .._dispatch import call
from .._functions import (
    digamma,
    erf,
    erfc,
    erfinv,
    exp2,
    expm1,
    i0,
    lgamma,
    log1p,
    log_softmax,
    logit,
    logsumexp,
    mvlgamma,
    polygamma,
    sigmoid,
    sinc,
    softmax,
    xlogy,
)
from .._functions import igamma as _igamma
from .._functions import igammac as _igammac
from .._functions.math_extra import special_i1
from .._scalar_conversion import not_implemented_for
from .._tensor import Tensor
from ..ops import math_special as _M
from ..ops import pointwise as _P
from ..ops import scalar as _S
from ..ops import special_functions as _SF
from . import _bessel, _polynomials

__all__ = ["airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1",
           "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
           "chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
           "laguerre_polynomial_l", "legendre_polynomial_p", "modified_bessel_i0",
           "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
           "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
           "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
           "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "digamma",
           "entr", "erf", "erfc", "erfcx", "erfinv",
           "exp2", "expit", "expm1", "gammainc", "gammaincc", "gammaln", "i0", "i0e", "i1", "i1e",
           "log1p", "log_softmax", "logit", "log_ndtr", "logsumexp", "multigammaln", "ndtr",
           "ndtri", "polygamma", "psi", "round", "sinc", "softmax", "spherical_bessel_j0",
           "xlog1py", "xlogy", "zeta"]

expit = sigmoid
gammaln = lgamma
psi = digamma
multigammaln = mvlgamma
i1 = special_i1


def _tensor_args(name: str, input, other) -> None:
    # PyTorch's binding of these takes tensors only (no Python numbers).
    for pos, (arg, value) in enumerate((("input", input), ("other", other)), 1):
        if not isinstance(value, Tensor):
            raise TypeError(f"{name}(): argument '{arg}' (position {pos}) must be Tensor, "
                            f"not {type(value).__name__}")


def gammainc(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The regularised lower incomplete gamma function P(input, other)."""
    _tensor_args("special_gammainc", input, other)
    return _igamma(input, other)


def gammaincc(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The regularised upper incomplete gamma function Q(input, other) = 1 - P."""
    _tensor_args("special_gammaincc", input, other)
    return _igammac(input, other)


# Named after the ops they are, as PyTorch's errors name them ("igamma()"): `_out`'s tables
# know them as special.igamma and special.igammac.
gammainc.__name__ = gammainc.__qualname__ = "igamma"
gammaincc.__name__ = gammaincc.__qualname__ = "igammac"
igamma = gammainc
igammac = gammaincc


def round(input: Tensor, *, decimals: int = 0, out: Tensor | None = None) -> Tensor:  # noqa: A001
    """Round half to even, to `decimals` places: always PyTorch's `round.decimals`
    overload (node RoundBackward1; no integer kernel, even for decimals=0)."""
    return call(_P.round_decimals, input, decimals)


def erfcx(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The scaled complementary error function exp(x^2) erfc(x), computed without the
    overflow of exp(x^2) for large x."""
    return call(_M.special_erfcx, input)


def entr(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """Elementwise entropy -x log(x): 0 at 0, -inf for negative x."""
    return call(_M.special_entr, input)


def log_ndtr(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The log of the standard normal distribution function, accurate far into both tails."""
    return call(_M.special_log_ndtr, input)


def ndtr(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The standard normal distribution function: (1 + erf(x / sqrt(2))) / 2, through the
    `.Scalar` arithmetic overloads as PyTorch's composite (MulBackward1, AddBackward1)."""
    scaled = erf(call(_S.mul_scalar, input, 1 / math.sqrt(2)))
    return call(_S.mul_scalar, call(_S.add_scalar, scaled, 1), 0.5)


def zeta(input, other, *, out: Tensor | None = None) -> Tensor:
    """The Hurwitz zeta function sum_k (other + k)^-input (either may be a number)."""
    if not isinstance(input, Tensor):
        return call(_SF.special_zeta_self_scalar, input, other)
    if not isinstance(other, Tensor):
        return call(_SF.special_zeta_other_scalar, input, other)
    return call(_SF.special_zeta, input, other)


def xlog1py(input, other, *, out: Tensor | None = None) -> Tensor:
    """input * log1p(other), 0 where input is 0 unless other is nan (either may be a
    number)."""
    if not isinstance(input, Tensor):
        return call(_SF.special_xlog1py_self_scalar, input, other)
    if not isinstance(other, Tensor):
        return call(_SF.special_xlog1py_other_scalar, input, other)
    return call(_SF.special_xlog1py, input, other)


def ndtri(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The inverse of the standard normal distribution function (the probit)."""
    return call(_SF.special_ndtri, input)


def i0e(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """exp(-|x|) i0(x), the exponentially scaled modified Bessel function of order 0."""
    return call(_SF.special_i0e, input)


def i1e(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """exp(-|x|) i1(x), the exponentially scaled modified Bessel function of order 1."""
    return call(_SF.special_i1e, input)


def bessel_j0(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The Bessel function of the first kind of order 0."""
    return call(_SF.special_bessel_j0, input)


def bessel_j1(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The Bessel function of the first kind of order 1."""
    return call(_SF.special_bessel_j1, input)


def spherical_bessel_j0(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The spherical Bessel function of the first kind of order 0, sin(x) / x."""
    return call(_SF.special_spherical_bessel_j0, input)


# ---------------------------------------------------------------- Bessel Y, I, K, Airy, and
# the orthogonal polynomials: PyTorch has no derivative for any of them (the result never
# requires grad); kernels in float64 (`_bessel`) or the input's dtype (`_polynomials`).


def _float_input(name: str, input: Tensor):
    """`input`'s values in its floating dtype (integers and bool: the default dtype), with
    PyTorch's refusal of the half and complex dtypes."""
    dt = input.dtype
    if not (dt.is_floating_point or dt.is_complex):
        dt = _dtype.get_default_dtype()
    if dt.is_complex or dt in (_dtype.float16, _dtype.bfloat16):
        raise not_implemented_for(f"{name}_cpu", dt)
    return input.detach().numpy().astype(dt.np), dt


def _bessel_unary(name: str, kernel, doc: str, odd: bool | None = None):
    """`name` computed by `kernel` in float64; `odd` (for i0 and i1: whether the function
    is odd) gives float32 PyTorch's overflow of exp(|x|) in its float32 kernel."""
    def fn(input: Tensor, *, out: Tensor | None = None) -> Tensor:
        x, dt = _float_input(name, input)
        values = kernel(np.asarray(x, np.float64).reshape(-1)).reshape(x.shape)
        values = np.asarray(values.astype(dt.np))
        if odd is not None and dt is _dtype.float32:
            values = _M.float32_exp_overflow(values, x, odd)
        return Tensor._make(values, dt)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


bessel_y0 = _bessel_unary("bessel_y0", lambda x: _bessel.y_values(x, 0),
                          "The Bessel function of the second kind of order 0.")
bessel_y1 = _bessel_unary("bessel_y1", lambda x: _bessel.y_values(x, 1),
                          "The Bessel function of the second kind of order 1.")
modified_bessel_i0 = _bessel_unary("modified_bessel_i0",
                                   lambda x: _bessel.modified_i_values(x, 0),
                                   "The modified Bessel function of the first kind, order 0.",
                                   odd=False)
modified_bessel_i1 = _bessel_unary("modified_bessel_i1",
                                   lambda x: _bessel.modified_i_values(x, 1),
                                   "The modified Bessel function of the first kind, order 1.",
                                   odd=True)
modified_bessel_k0 = _bessel_unary("modified_bessel_k0",
                                   lambda x: _bessel.k_values(x, 0, False),
                                   "The modified Bessel function of the second kind, order 0.")
modified_bessel_k1 = _bessel_unary("modified_bessel_k1",
                                   lambda x: _bessel.k_values(x, 1, False),
                                   "The modified Bessel function of the second kind, order 1.")
scaled_modified_bessel_k0 = _bessel_unary("scaled_modified_bessel_k0",
                                          lambda x: _bessel.k_values(x, 0, True),
                                          "exp(x) times modified_bessel_k0(x).")
scaled_modified_bessel_k1 = _bessel_unary("scaled_modified_bessel_k1",
                                          lambda x: _bessel.k_values(x, 1, True),
                                          "exp(x) times modified_bessel_k1(x).")
airy_ai = _bessel_unary("airy_ai", _bessel.airy_values, "The Airy function Ai.")


def _polynomial(name: str, doc: str):
    def fn(input, n, *, out: Tensor | None = None) -> Tensor:
        if not isinstance(input, Tensor) and not isinstance(n, Tensor):
            raise TypeError(
                f"special_{name}() received an invalid combination of arguments - got "
                f"({type(input).__name__}, {type(n).__name__}), but expected one of:\n"
                " * (Tensor x, Tensor n, *, Tensor out = None)\n"
                " * (Number x, Tensor n, *, Tensor out = None)\n"
                " * (Tensor x, Number n, *, Tensor out = None)\n")
        dt = _dtype.result_type(input, n)
        if not (dt.is_floating_point or dt.is_complex):
            dt = _dtype.get_default_dtype()
        if dt.is_complex or dt in (_dtype.float16, _dtype.bfloat16):
            raise not_implemented_for(f"{name}_cpu", dt)
        x = input.detach().numpy() if isinstance(input, Tensor) else np.asarray(input)
        deg = n.detach().numpy() if isinstance(n, Tensor) else np.asarray(n)
        values = _polynomials.evaluate(name, x.astype(dt.np), deg.astype(dt.np))
        return Tensor._make(np.asarray(values, dt.np), dt)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


chebyshev_polynomial_t = _polynomial("chebyshev_polynomial_t",
                                     "The Chebyshev polynomial of the first kind T_n(x).")
chebyshev_polynomial_u = _polynomial("chebyshev_polynomial_u",
                                     "The Chebyshev polynomial of the second kind U_n(x).")
chebyshev_polynomial_v = _polynomial("chebyshev_polynomial_v",
                                     "The Chebyshev polynomial of the third kind V_n(x).")
chebyshev_polynomial_w = _polynomial("chebyshev_polynomial_w",
                                     "The Chebyshev polynomial of the fourth kind W_n(x).")
shifted_chebyshev_polynomial_t = _polynomial("shifted_chebyshev_polynomial_t",
                                             "T_n(2x - 1), the shifted Chebyshev polynomial.")
shifted_chebyshev_polynomial_u = _polynomial("shifted_chebyshev_polynomial_u",
                                             "U_n(2x - 1), the shifted Chebyshev polynomial.")
shifted_chebyshev_polynomial_v = _polynomial("shifted_chebyshev_polynomial_v",
                                             "V_n(2x - 1), the shifted Chebyshev polynomial.")
shifted_chebyshev_polynomial_w = _polynomial("shifted_chebyshev_polynomial_w",
                                             "W_n(2x - 1), the shifted Chebyshev polynomial.")
hermite_polynomial_h = _polynomial("hermite_polynomial_h",
                                   "The physicists' Hermite polynomial H_n(x).")
hermite_polynomial_he = _polynomial("hermite_polynomial_he",
                                    "The probabilists' Hermite polynomial He_n(x).")
laguerre_polynomial_l = _polynomial("laguerre_polynomial_l", "The Laguerre polynomial L_n(x).")
legendre_polynomial_p = _polynomial("legendre_polynomial_p", "The Legendre polynomial P_n(x).")


# Last, once every function exists: PyTorch's out= on each (`_out.write_out`).
_out.guard_namespace(globals(), "fusegrad.special")
