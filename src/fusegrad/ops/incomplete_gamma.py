"""The regularized incomplete gamma functions: `igamma` P(a, x) (lower) and `igammac`
Q(a, x) = 1 - P(a, x) (upper), by the power series below x = a + 1 and the continued
fraction above it, each giving the smaller of the two directly. Differentiable in x only,
as in PyTorch (whose derivative in a is not implemented); the registry's gradcheck, which
perturbs every input, is off, and tests/test_incomplete_gamma.py checks the x-derivative."""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype
from ._util import binary_meta, rand_array, result_np
from .registry import Sample, inplace_variant, register

_ITERATIONS = 2000
_EPS = 1e-16
# Python's lgamma, correctly rounded enough that the prefactor exp(a log x - x - lgamma(a))
# keeps full precision for large a (where lgamma(a) is in the hundreds).
_LGAMMA = np.frompyfunc(math.lgamma, 1, 1)


def _log_prefactor(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    return a * np.log(x) - x - _LGAMMA(a).astype(np.float64)


def _series(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """sum_n x^n / (a (a+1) ... (a+n)), the series of P(a, x) without its prefactor."""
    term = 1.0 / a
    total = term.copy()
    for n in range(1, _ITERATIONS):
        term = term * x / (a + n)
        total = total + term
        if np.all(np.abs(term) <= np.abs(total) * _EPS):
            break
    return total


def _fraction(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The continued fraction of Q(a, x) without its prefactor (modified Lentz)."""
    tiny = 1e-300
    b = x + 1.0 - a
    c = np.full_like(x, 1.0 / tiny)
    d = 1.0 / b
    h = d.copy()
    for n in range(1, _ITERATIONS):
        an = -n * (n - a)
        b = b + 2.0
        d = an * d + b
        d = np.where(np.abs(d) < tiny, tiny, d)
        c = b + an / c
        c = np.where(np.abs(c) < tiny, tiny, c)
        d = 1.0 / d
        delta = d * c
        h = h * delta
        if np.all(np.abs(delta - 1.0) <= _EPS):
            break
    return h


def _pq(a, x) -> tuple[np.ndarray, np.ndarray]:
    """(P, Q) in float64 for broadcast a and x."""
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    p = np.full(a.shape, np.nan)
    q = np.full(a.shape, np.nan)
    with np.errstate(all="ignore"):
        ok = (a >= 0) & (x >= 0) & ~np.isnan(a) & ~np.isnan(x)
        zero_a = ok & (a == 0) & (x > 0)
        p[zero_a], q[zero_a] = 1.0, 0.0
        zero_x = ok & (x == 0) & (a > 0)
        p[zero_x], q[zero_x] = 0.0, 1.0
        inf_x = ok & np.isinf(x) & (a > 0)
        p[inf_x], q[inf_x] = 1.0, 0.0
        rest = ok & (a > 0) & (x > 0) & np.isfinite(x)
        low = rest & (x < a + 1)
        high = rest & ~(x < a + 1)
        if low.any():
            al, xl = a[low], x[low]
            pl = _series(al, xl) * np.exp(_log_prefactor(al, xl))
            p[low], q[low] = pl, 1.0 - pl
        if high.any():
            ah, xh = a[high], x[high]
            qh = _fraction(ah, xh) * np.exp(_log_prefactor(ah, xh))
            q[high], p[high] = qh, 1.0 - qh
    return p, q


def _kernel(upper: bool, cpu_name: str):
    def kernel(a, x):
        dt = result_np(a, x)
        if dt.kind != "f":
            raise NotImplementedError(
                f"\"{cpu_name}_cpu\" not implemented for '{_dtype.FROM_NP[dt].legacy}'")
        p, q = _pq(a, x)
        return (q if upper else p).astype(dt)

    return kernel


def _meta(cpu_name: str):
    def meta(a, x):
        spec = binary_meta()(a, x)
        if spec.dtype.category != _dtype.FLOAT:
            raise NotImplementedError(
                f"\"{cpu_name}_cpu\" not implemented for '{spec.dtype.legacy}'")
        return spec

    return meta


def _density(g, a, x, sign: float):
    """g times d/dx P(a, x) = exp((a - 1) log x - x - lgamma(a)), signed for Q."""
    return (None, g * ((a - 1) * x.log() - x - a.lgamma()).exp() * sign)


def _samples(rng, dt):
    return [Sample((rand_array(rng, s, dt, (0.3, 4.0)), rand_array(rng, t, dt, (0.1, 6.0))),
                   name=f"{s}x{t}") for s, t in (((3, 4), (3, 4)), ((3, 4), (4,)), ((), (2,)))]


igamma = register(
    "igamma", kernel=_kernel(False, "igamma"), meta=_meta("igamma"), node="IgammaBackward0",
    derivative=lambda g, a, x: _density(g, a, x, 1.0), save=lambda out, a, x: (a, x),
    saved_names=("self", "other"), nondiff_args=(0,), samples=_samples, gradcheck=False)
igammac = register(
    "igammac", kernel=_kernel(True, "igammac"), meta=_meta("igammac"),
    node="IgammacBackward0", derivative=lambda g, a, x: _density(g, a, x, -1.0),
    save=lambda out, a, x: (a, x), saved_names=("self", "other"), nondiff_args=(0,),
    samples=_samples, gradcheck=False)
igamma_ = inplace_variant(igamma, "igamma_", saves_self=True)
igammac_ = inplace_variant(igammac, "igammac_", saves_self=True)
