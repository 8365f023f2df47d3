"""`fusegrad.special` (torch.special): special functions. Most are the top-level functions
under SciPy's names (`expit` is `sigmoid`, `gammaln` is `lgamma`, `psi` is `digamma`,
`multigammaln` is `mvlgamma`, `gammainc` is `igamma`); `erfcx` and `i1` are registry ops of
their own, as are `entr`, `log_ndtr`, `zeta`, `ndtri`, `i0e`, `i1e`, `xlog1py` and the Bessel
functions `bessel_j0`, `bessel_j1`, `spherical_bessel_j0`; `ndtr` is written over `erf` as
PyTorch's is."""

from __future__ import annotations

import math

from .. import _out
from .._dispatch import call
from .._functions import (
    digamma,
    erf,
    erfc,
    erfinv,
    exp2,
    expm1,
    i0,
    igamma,
    igammac,
    lgamma,
    log1p,
    log_softmax,
    logit,
    logsumexp,
    mvlgamma,
    polygamma,
    round,
    sigmoid,
    sinc,
    softmax,
    xlogy,
)
from .._functions.math_extra import special_i1
from .._tensor import Tensor
from ..ops import math_special as _M
from ..ops import special_functions as _SF

__all__ = ["bessel_j0", "bessel_j1", "digamma", "entr", "erf", "erfc", "erfcx", "erfinv",
           "exp2", "expit", "expm1", "gammainc", "gammaincc", "gammaln", "i0", "i0e", "i1", "i1e",
           "log1p", "log_softmax", "logit", "log_ndtr", "logsumexp", "multigammaln", "ndtr",
           "ndtri", "polygamma", "psi", "round", "sinc", "softmax", "spherical_bessel_j0",
           "xlog1py", "xlogy", "zeta"]

expit = sigmoid
gammaln = lgamma
psi = digamma
multigammaln = mvlgamma
gammainc = igamma
gammaincc = igammac
i1 = special_i1


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
    """The standard normal distribution function: (1 + erf(x / sqrt(2))) / 2."""
    return (1 + erf(input * (1 / math.sqrt(2)))) * 0.5


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


# Last, once every function exists: PyTorch's out= on each (`_out.write_out`).
_out.guard_namespace(globals(), "fusegrad.special")
