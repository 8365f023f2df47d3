"""`fusegrad.special` (torch.special): special functions. Most are the top-level functions
under SciPy's names (`expit` is `sigmoid`, `gammaln` is `lgamma`, `psi` is `digamma`,
`multigammaln` is `mvlgamma`, `gammainc` is `igamma`); `erfcx` and `i1` are registry ops of
their own, as are `entr` and `log_ndtr`; `ndtr` is written over `erf` as PyTorch's is."""

from __future__ import annotations

import math

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

__all__ = ["digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1",
           "gammainc", "gammaincc", "gammaln", "i0", "i1", "log1p", "log_softmax", "logit",
           "log_ndtr", "logsumexp", "multigammaln", "ndtr", "polygamma", "psi", "round", "sinc",
           "softmax", "xlogy"]

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
