"""The regularized incomplete gamma functions: `igamma` P(a, x) (lower) and `igammac`
Q(a, x) = 1 - P(a, x) (upper), by the power series below x = a + 1 and the continued
fraction above it, each giving the smaller of the two directly. Differentiable in x only,
as in PyTorch (whose derivative in a is not implemented); the registry's gradcheck, which
perturbs every input, is off, and tests/test_incomplete_gamma.py checks the x-derivative."""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype
from ._special_kernels import erfc as _erfc
from ._util import HALF, as_dtype, binary_meta, not_implemented_for, rand_array, result_np
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


_EULER = 0.57721566490153286061
# zeta(k) for k = 2..8: lgamma(1 + a) = -gamma a + sum_k (-1)^k zeta(k) a^k / k.
_ZETA = (math.pi ** 2 / 6, 1.2020569031595942854, math.pi ** 4 / 90, 1.0369277551433699263,
         math.pi ** 6 / 945, 1.0083492773819228268, math.pi ** 8 / 9450)


def _lgamma1p(a: np.ndarray) -> np.ndarray:
    """lgamma(1 + a), exact for tiny a too (where 1 + a drops a's digits): its Taylor
    series below 0.01."""
    small = np.abs(a) < 0.01
    t = np.where(small, a, 0.0)
    series = np.zeros_like(t)
    for k in range(len(_ZETA) + 1, 1, -1):  # Horner's way, from the highest power
        series = (series + (-1.0) ** k * _ZETA[k - 2] / k) * t
    series = (series - _EULER) * t
    return np.where(small, series, _LGAMMA(1.0 + a).astype(np.float64))


def _q_series(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Q(a, x) directly for small x (<= 1.1) and small a, where 1 - P cancels: from
    gamma(a, x) = sum_n (-1)^n x^(a+n) / (n! (a+n)) (DLMF 8.7.1), Q = 1 - x^a / Gamma(a+1)
    - x^a / Gamma(a) sum_{n>=1} (-x)^n / (n! (a+n))."""
    fac = np.ones_like(x)
    total = np.zeros_like(x)
    for n in range(1, _ITERATIONS):
        fac = fac * -x / n
        term = fac / (a + n)
        total = total + term
        if np.all(np.abs(term) <= np.abs(total) * _EPS):
            break
    log_x = np.log(x)
    return -np.expm1(a * log_x - _lgamma1p(a)) - np.exp(
        a * log_x - _LGAMMA(a).astype(np.float64)) * total


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


# Above this `a` the series and the fraction need too many terms (and their prefactor
# cancels catastrophically): Temme's uniform asymptotic expansion takes over.
_LARGE_A = 1e4


def _mu_minus_log1p(mu: np.ndarray) -> np.ndarray:
    """mu - log(1 + mu), without the cancellation near 0 (its Taylor series there)."""
    small = np.abs(mu) < 0.1
    m = np.where(small, mu, 0.0)
    series = np.zeros_like(m)
    for k in range(25, 1, -1):  # sum_{k>=2} (-1)^k mu^k / k, Horner's way
        series = (series + (1.0 if k % 2 == 0 else -1.0) / k) * m
    series = series * m
    with np.errstate(all="ignore"):
        direct = mu - np.log1p(mu)
    return np.where(small, series, direct)


def _temme(a: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(P, Q) for large `a` by Temme's uniform expansion (DLMF 8.12): Q = erfc(eta
    sqrt(a/2)) / 2 + R, P = erfc(-eta sqrt(a/2)) / 2 - R, R = exp(-a eta^2 / 2) /
    sqrt(2 pi a) (c0(eta) + c1(eta) / a), with lambda = x / a, mu = lambda - 1 and
    eta^2 / 2 = mu - log(1 + mu) (eta of mu's sign)."""
    mu = (x - a) / a  # x - a is exact near a (Sterbenz): one rounding, not two
    eta = np.sign(mu) * np.sqrt(2.0 * _mu_minus_log1p(mu))
    with np.errstate(all="ignore"):
        small = np.abs(eta) < 1e-2
        # c0 = 1/mu - 1/eta and c1 = 1/eta^3 - 1/mu^3 - 1/mu^2 - 1/(12 mu), cancelling near
        # eta = 0, where their Taylor series (DLMF 8.12.10) take over.
        c0 = np.where(small, -1 / 3 + eta / 12 - 2 * eta ** 2 / 135 + eta ** 3 / 864,
                      1 / mu - 1 / eta)
        c1 = np.where(small, -1 / 540 - eta / 288,
                      1 / eta ** 3 - 1 / mu ** 3 - 1 / mu ** 2 - 1 / (12 * mu))
        r = np.exp(-0.5 * a * eta * eta) / np.sqrt(2 * np.pi * a) * (c0 + c1 / a)
        z = eta * np.sqrt(a / 2)
        q = 0.5 * _erfc(z) + r
        p = 0.5 * _erfc(-z) - r
    return p, q


def _pq(a, x) -> tuple[np.ndarray, np.ndarray]:
    """(P, Q) in float64 for broadcast a and x, with PyTorch's values at the edges: NaN
    for a negative operand and at a = x = 0; P = 1 (Q = 0) for a = 0 < x; P = 0 for x = 0
    (any other a, NaN too); an infinite `a` gives P = 0 unless x is infinite too (NaN);
    an infinite x, P = 1 (NaN `a` too)."""
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    p = np.full(a.shape, np.nan)
    q = np.full(a.shape, np.nan)
    with np.errstate(all="ignore"):
        todo = ~((x < 0) | (a < 0))  # the comparisons are false for NaN: NaN goes on
        edges = ((a == 0, lambda hx: np.where(hx > 0, 1.0, np.nan)),
                 (x == 0, lambda hx: 0.0),
                 (np.isinf(a), lambda hx: np.where(np.isinf(hx), np.nan, 0.0)),
                 (np.isinf(x), lambda hx: 1.0))
        for cond, p_of_x in edges:  # in this order: the first that holds decides
            hit = todo & cond
            if hit.any():
                p[hit] = p_of_x(x[hit])
                q[hit] = 1.0 - p[hit]
            todo &= ~cond
        rest = todo & (a > 0) & (x > 0)  # finite and positive (NaN stays NaN)
        large = rest & (a > _LARGE_A)
        if large.any():
            p[large], q[large] = _temme(a[large], x[large])
        rest &= ~large
        low = rest & (x < a + 1)
        high = rest & ~(x < a + 1)
        if low.any():
            al, xl = a[low], x[low]
            pl = _series(al, xl) * np.exp(_log_prefactor(al, xl))
            p[low], q[low] = pl, 1.0 - pl
            # Small x with a small enough that P is near 1: Q from its own series.
            direct = low & (x <= 1.1) & np.where(x <= 0.5, a <= -0.4 / np.log(x), a <= 1.1 * x)
            if direct.any():
                q[direct] = _q_series(a[direct], x[direct])
        if high.any():
            ah, xh = a[high], x[high]
            qh = _fraction(ah, xh) * np.exp(_log_prefactor(ah, xh))
            q[high], p[high] = qh, 1.0 - qh
    return p, q


def _kernel(upper: bool, cpu_name: str):
    def kernel(a, x):
        dt = result_np(a, x)
        if dt.kind != "f" and dt not in HALF:
            raise not_implemented_for(f"{cpu_name}_cpu", dt)
        if dt in HALF:  # computed from the half values, rounded once (through float32)
            a, x = as_dtype(a, dt), as_dtype(x, dt)
        p, q = _pq(np.asarray(a, np.float64), np.asarray(x, np.float64))
        out = q if upper else p
        return (out.astype(np.float32) if dt in HALF else out).astype(dt)

    return kernel


def _meta(cpu_name: str):
    def meta(a, x):
        spec = binary_meta()(a, x)
        if spec.dtype.category != _dtype.FLOAT:
            raise not_implemented_for(f"{cpu_name}_cpu", spec.dtype)
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
    saved_names=("self", "other"), nondiff_args=(0,), samples=_samples, gradcheck=False,
    forward_ad="unsupported", tensors_only=("input", "other"))
igammac = register(
    "igammac", kernel=_kernel(True, "igammac"), meta=_meta("igammac"),
    node="IgammacBackward0", derivative=lambda g, a, x: _density(g, a, x, -1.0),
    save=lambda out, a, x: (a, x), saved_names=("self", "other"), nondiff_args=(0,),
    samples=_samples, gradcheck=False, forward_ad="unsupported",
    tensors_only=("input", "other"))
igamma_ = inplace_variant(igamma, "igamma_", saves_self=True)
igammac_ = inplace_variant(igammac, "igammac_", saves_self=True)
