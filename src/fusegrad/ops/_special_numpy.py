"""NumPy versions of the SciPy special functions the registry uses (`gammaln`, `psi`,
`polygamma`, `erfinv`, `i0`, `i1`), for installs without SciPy (it is not a dependency).

Accuracy is about 1e-12 relative in float64 over the ranges the ops see; results keep the
input's float dtype, as SciPy's ufuncs do.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["gammaln", "psi", "polygamma", "erfinv", "i0", "i1"]

# B_2j / (2j)! for j = 1..6: the Euler-Maclaurin tail of the Hurwitz zeta function.
_BERNOULLI_OVER_FACTORIAL = (1 / 12, -1 / 720, 1 / 30240, -1 / 1209600, 1 / 47900160,
                             -691 / 1307674368000)


def _as_float(x) -> tuple[np.ndarray, np.dtype]:
    x = np.asarray(x)
    dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
    return x.astype(np.float64), dtype


def _lgamma(v: float) -> float:
    try:
        return math.lgamma(v)
    except ValueError:  # a pole (0, -1, -2, ...)
        return math.inf


_lgamma_elements = np.frompyfunc(_lgamma, 1, 1)
_erf_elements = np.frompyfunc(math.erf, 1, 1)


def gammaln(x) -> np.ndarray:
    """log|Gamma(x)|; +inf at the poles."""
    v, dtype = _as_float(x)
    return np.asarray(_lgamma_elements(v), dtype=np.float64).astype(dtype)


def _positive_integer_pole(v: np.ndarray) -> np.ndarray:
    return (v <= 0) & (v == np.floor(v))


def psi(x) -> np.ndarray:
    """The digamma function: reflection below 1/2, recurrence up to 6, then the asymptotic
    series; -inf at 0 and nan at -1, -2, ... (as SciPy)."""
    v, dtype = _as_float(x)
    reflect = v < 0.5
    y = np.where(reflect, 1.0 - v, v)
    shift = np.zeros_like(y)
    for _ in range(6):  # y >= 1/2 reaches 6 in at most six steps
        small = y < 6
        shift -= np.where(small, 1.0 / y, 0.0)
        y = np.where(small, y + 1.0, y)
    inv2 = 1.0 / (y * y)
    tail = inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (1 / 240 - inv2 / 132))))
    out = np.log(y) - 0.5 / y - tail + shift
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(reflect, out - np.pi / np.tan(np.pi * v), out)
    out = np.where(_positive_integer_pole(v), np.where(v == 0, -np.inf, np.nan), out)
    return out.astype(dtype)


def _hurwitz_zeta(s: int, v: np.ndarray) -> np.ndarray:
    """zeta(s, v) for integer s >= 2: direct terms until v + k >= 10, then Euler-Maclaurin."""
    total = np.zeros_like(v)
    y = v.copy()
    with np.errstate(divide="ignore"):
        while True:
            small = y < 10
            if not small.any():
                break
            total += np.where(small, y ** -s, 0.0)
            y = np.where(small, y + 1.0, y)
    tail = y ** (1 - s) / (s - 1) + 0.5 * y ** -s
    rising = float(s)  # s (s+1) ... (s+2j-2)
    power = y ** (-s - 1)
    for j, coefficient in enumerate(_BERNOULLI_OVER_FACTORIAL, start=1):
        tail += coefficient * rising * power
        rising *= (s + 2 * j - 1) * (s + 2 * j)
        power /= y * y
    return total + tail


def polygamma(n: int, x) -> np.ndarray:
    """The n-th derivative of digamma; n = 0 is `psi`. At the poles 0, -1, -2, ... it is +inf
    for odd n and -inf for even n (as SciPy)."""
    if n == 0:
        return psi(x)
    v, dtype = _as_float(x)
    sign = 1.0 if n % 2 else -1.0
    out = sign * math.factorial(n) * _hurwitz_zeta(n + 1, v)
    out = np.where(_positive_integer_pole(v), np.inf if n % 2 else -np.inf, out)
    return out.astype(dtype)


def erfinv(x) -> np.ndarray:
    """Inverse error function: Giles' single-precision estimate refined by Newton steps on
    math.erf; +-inf at +-1, nan outside [-1, 1]."""
    v, dtype = _as_float(x)
    inside = np.abs(v) < 1
    y = np.where(inside, v, 0.0)
    w = -np.log((1.0 - y) * (1.0 + y))
    central = w < 5
    wc = w - 2.5
    pc = 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
              -0.00125372503, -0.00417768164, 0.246640727, 1.50140941):
        pc = c + pc * wc
    wt = np.sqrt(np.maximum(w, 5.0)) - 3
    pt = -0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
              -0.0076224613, 0.00943887047, 1.00167406, 2.83297682):
        pt = c + pt * wt
    guess = np.where(central, pc, pt) * y
    for _ in range(3):  # Newton: each step roughly doubles the correct digits
        err = np.asarray(_erf_elements(guess), dtype=np.float64) - y
        guess = guess - err / (2 / math.sqrt(math.pi) * np.exp(-guess * guess))
    out = np.where(inside, guess, np.where(np.abs(v) == 1, np.copysign(np.inf, v), np.nan))
    return out.astype(dtype)


def i0(x) -> np.ndarray:
    """Modified Bessel function of the first kind, order 0 (NumPy's own)."""
    v, dtype = _as_float(x)
    return np.i0(v).astype(dtype)


def i1(x) -> np.ndarray:
    """Modified Bessel function of the first kind, order 1: the power series up to |x| = 30,
    Hankel's asymptotic expansion beyond."""
    v, dtype = _as_float(x)
    a = np.abs(v)
    half = np.minimum(a, 30.0) / 2
    term = half.copy()
    series = term.copy()
    for k in range(1, 120):
        term = term * half * half / (k * (k + 1))
        series += term
    big = np.maximum(a, 30.0)
    inv = 1.0 / (8 * big)
    # Hankel's expansion for order 1: term m is (-1)^m prod_j (4 - (2j-1)^2) / m! / (8x)^m.
    correction = 1.0
    product = 1.0
    for m in range(1, 8):
        product *= -(4 - (2 * m - 1) ** 2) / m
        correction += product * inv ** m
    asymptotic = np.exp(big) / np.sqrt(2 * np.pi * big) * correction
    out = np.where(a <= 30, series, asymptotic)
    return (np.sign(v) * out).astype(dtype)
