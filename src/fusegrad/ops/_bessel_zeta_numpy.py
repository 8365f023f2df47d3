"""NumPy kernels of torch.special's Hurwitz `zeta`, `ndtri` (the inverse normal
distribution function), the exponentially scaled Bessel functions `i0e`/`i1e`, the Bessel
functions `j0`/`j1`, the spherical `spherical_j0` and `xlog1py`. Each works on whole arrays
in float64 (0-d and empty included) and returns the input's float dtype; none needs SciPy.

Accuracy, float64: `i0e`, `i1e`, `ndtri`, `spherical_j0` and `zeta` to a few ulps
(relative); `j0`/`j1` to about 1e-16 absolute (they have zeros). Special values follow
PyTorch's (the Cephes conventions): `zeta(x, q)` is inf at x == 1 and at q a non-positive
integer, nan for x < 1 or for a negative non-integer q with a non-integer x.
"""

from __future__ import annotations

import math

import numpy as np

from . import _special_numpy as _np_special

__all__ = ["zeta", "ndtri", "i0e", "i1e", "j0", "j1", "spherical_j0", "xlog1py"]

_EPS = 2.0 ** -53  # half an ulp of 1.0 in float64


def _as_float(x) -> tuple[np.ndarray, np.dtype]:
    x = np.asarray(x)
    dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
    return x.astype(np.float64), dtype


def _horner(coefficients, t: np.ndarray) -> np.ndarray:
    out = np.full_like(t, coefficients[-1])
    for c in reversed(coefficients[:-1]):
        out = out * t + c
    return out


# ---------------------------------------------------------------- Hurwitz zeta
# zeta(x, q) = sum_k (q + k)^-x: terms summed directly until q + k passes 9 (at least nine of
# them), then the Euler-Maclaurin tail, whose j-th term is x (x+1) ... (x+2j-2) B_2j / (2j)!
# times w^(-x-2j+1) at w = q + k; both stop once a term is below half an ulp of the sum.
# B_2j as (numerator, denominator), j = 1..12; int / int divides with one rounding.
_BERNOULLI = ((1, 6), (-1, 30), (1, 42), (-1, 30), (5, 66), (-691, 2730), (7, 6), (-3617, 510),
              (43867, 798), (-174611, 330), (854513, 138), (-236364091, 2730))
_TAIL = tuple(n / (d * math.factorial(2 * j)) for j, (n, d) in enumerate(_BERNOULLI, start=1))


# Below this q the direct terms (one per unit step up to q = 9) would take |q| passes over the
# array; such q go through `_zeta_far_left` instead (PyTorch loops there, seconds per 1e9).
_FAR_LEFT = -1000.0


def _zeta64(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    x, q = np.broadcast_arrays(x, q)
    x, q = x.astype(np.float64), q.astype(np.float64)
    with np.errstate(all="ignore"):
        # The values decided before any summing, in PyTorch's order of tests: x == 1 is a
        # pole (even with q NaN), x < 1 diverges, a non-positive integer q (-inf included)
        # is a pole (even with x NaN), and a negative q needs an integer x (q^-x is real).
        pole_q = (q <= 0) & (q == np.floor(q))
        decided = np.where(x == 1, np.inf, np.where(x < 1, np.nan, np.where(
            pole_q, np.inf, np.where((q <= 0) & (x != np.floor(x)), np.nan, 0.0))))
        is_decided = (x <= 1) | pole_q | ((q <= 0) & (x != np.floor(x)))
        far = ~is_decided & (q < _FAR_LEFT)
        live = ~is_decided & ~far  # summed here: finite q >= _FAR_LEFT, or q = +inf or NaN
        total = np.where(live, q, 1.0) ** -x
        a = np.where(live, q, np.nan)
        term = np.zeros_like(total)
        steps = 0
        while True:
            # Elements that are not live never enter: a NaN `a` fails `a <= 9`, and past
            # nine steps only finite q below 9 go on (at most 9 - _FAR_LEFT passes).
            going = live & ((steps < 9) | (a <= 9.0))
            if not going.any():
                break
            steps += 1
            a = np.where(going, a + 1.0, a)
            term = np.where(going, a ** -x, term)
            total = np.where(going, total + term, total)
            converged = going & (np.abs(term / total) < _EPS)
            live = going & ~converged
            # Elements that converged keep their sum and take no tail.
            a = np.where(converged, np.nan, a)
        tail_needed = ~np.isnan(a)
        w = np.where(tail_needed, a, 1.0)
        tail = total + term * w / (x - 1) - 0.5 * term
        rising = np.ones_like(total)
        k = 0.0
        b = term.copy()
        open_ = tail_needed.copy()
        for coefficient in _TAIL:
            rising = rising * (x + k)
            b = b / w
            t = rising * b * coefficient
            tail = np.where(open_, tail + t, tail)
            open_ &= ~(np.abs(t / tail) < _EPS)
            k += 1.0
            rising = rising * (x + k)
            b = b / w
            k += 1.0
        out = np.where(tail_needed, tail, total)
        if far.any():
            out[far] = _zeta_far_left(x[far], q[far])
    return np.where(is_decided, decided, out)


def _zeta_far_left(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    """zeta(x, q) for q far below 0 (not an integer) and x an integer above 1, by splitting
    the sum at 0: with f = q - floor(q) and n = -floor(q) terms below 0, whose powers are
    (-1)^x times those of 1 - f, 2 - f, ..., n - f,
        zeta(x, q) = zeta(x, f) + (-1)^x (zeta(x, 1 - f) - zeta(x, n + 1 - f)),
    three sums at positive q. An infinite x leaves the two terms nearest 0, each +inf."""
    out = np.full(x.shape, np.inf)
    finite = np.isfinite(x)
    if finite.any():
        xf, qf = x[finite], q[finite]
        fl = np.floor(qf)
        f = qf - fl
        sign = np.where(np.fmod(xf, 2.0) == 0, 1.0, -1.0)
        out[finite] = _zeta64(xf, f) + sign * (_zeta64(xf, 1.0 - f) - _zeta64(xf, 1.0 - f - fl))
    return out


def zeta(x, q) -> np.ndarray:
    """The Hurwitz zeta function sum_k (q + k)^-x, in the promoted float dtype of x, q."""
    xv, dx = _as_float(x)
    qv, dq = _as_float(q)
    return _zeta64(xv, qv).astype(np.promote_types(dx, dq))


# ---------------------------------------------------------------- ndtri
_SQRT2 = math.sqrt(2.0)
_SQRT_PI = math.sqrt(math.pi)


def _erfcinv_small(z: np.ndarray) -> np.ndarray:
    """t >= 0 with erfc(t) = z, for 0 < z <= 1/2: Newton's method on
    log(erfcx(t)) - t*t - log(z), which is nearly linear in t, from erfinv's estimate (or
    erfc's asymptotic form where 1 - z would round away the digits)."""
    deep = z < 1e-8
    guess = _np_special.erfinv(1.0 - np.where(deep, 0.5, z))
    log_z = np.log(z)
    tail = np.sqrt(-log_z)
    for _ in range(3):
        tail = np.sqrt(np.maximum(-log_z - np.log(tail * _SQRT_PI), 0.25))
    t = np.where(deep, tail, guess)
    for _ in range(4):
        scaled = _np_special.erfcx(t)
        residual = np.log(scaled) - t * t - log_z
        t = t + residual * _SQRT_PI * scaled / 2
    return t


def _ndtri64(p: np.ndarray) -> np.ndarray:
    lower = np.minimum(p, 1.0 - p)  # exact for p >= 1/2
    central = (p >= 0.25) & (p <= 0.75)  # 2p - 1 exact there
    with np.errstate(all="ignore"):
        mid = _SQRT2 * _np_special.erfinv(np.where(central, 2.0 * p - 1.0, 0.0))
        z = np.where(central | ~(lower > 0), 0.5, 2.0 * lower)
        t = -_SQRT2 * _erfcinv_small(z)
    side = np.where(p > 0.5, -t, t)
    out = np.where(central, mid, side)
    out = np.where(p == 0, -np.inf, np.where(p == 1, np.inf, out))
    return np.where((p < 0) | (p > 1) | np.isnan(p), np.nan, out)


def ndtri(p) -> np.ndarray:
    """x with Phi(x) = p, Phi the standard normal distribution function: -inf at 0, inf at 1,
    nan outside [0, 1]."""
    v, dtype = _as_float(p)
    return _ndtri64(v).astype(dtype)


# ---------------------------------------------------------------- i0e, i1e
# Up to |x| = 20, the power series in u = x*x/4 (every term positive): i0 = sum u^k / k!^2,
# i1 = (x/2) sum u^k / (k! (k+1)!), forty terms reaching 1e-24 relative at 20. Beyond, the
# asymptotic series sqrt(2 pi x) exp(-x) I_v(x) = sum_k c_k x^-k, whose smallest term there
# is below 1e-17: c_k = c_(k-1) ((2k-1)^2 - 4v^2) / (8k).
_I0_SERIES = tuple(1 / math.factorial(k) ** 2 for k in range(40))
_I1_SERIES = tuple(1 / (math.factorial(k) * math.factorial(k + 1)) for k in range(40))


def _asymptotic_i(order: int, terms: int = 30) -> tuple:
    c = [1.0]
    for k in range(1, terms):
        c.append(c[-1] * ((2 * k - 1) ** 2 - 4 * order * order) / (8 * k))
    return tuple(c)


_I0_ASYMPTOTIC = _asymptotic_i(0)
_I1_ASYMPTOTIC = _asymptotic_i(1)
_SERIES_END = 20.0


def _scaled_i(v: np.ndarray, order: int) -> np.ndarray:
    a = np.abs(v)
    small = a <= _SERIES_END
    s = np.where(small, a, 0.0)
    u = s * s / 4
    series = _horner(_I0_SERIES, u) if order == 0 else s / 2 * _horner(_I1_SERIES, u)
    series = series * np.exp(-s)
    big = np.where(small, _SERIES_END, a)
    with np.errstate(over="ignore", invalid="ignore"):
        coefficients = _I0_ASYMPTOTIC if order == 0 else _I1_ASYMPTOTIC
        asymptotic = _horner(coefficients, 1 / big) / np.sqrt(2 * np.pi * big)
    out = np.where(small, series, asymptotic)
    out = np.where(np.isinf(a), 0.0, out)
    if order == 1:
        out = np.where(v < 0, -out, out)
    return np.where(np.isnan(v), np.nan, out)


def i0e(x) -> np.ndarray:
    """exp(-|x|) i0(x), the exponentially scaled modified Bessel function of order 0."""
    v, dtype = _as_float(x)
    return _scaled_i(v, 0).astype(dtype)


def i1e(x) -> np.ndarray:
    """exp(-|x|) i1(x), the exponentially scaled modified Bessel function of order 1."""
    v, dtype = _as_float(x)
    return _scaled_i(v, 1).astype(dtype)


# ---------------------------------------------------------------- j0, j1
# |x| < 2: the power series (alternating, with terms below 1 there). 2 <= |x| <= 25: Miller's
# backward recurrence J_(n-1) = (2n/x) J_n - J_(n+1) from n = 80, normalised by
# J_0 + 2 (J_2 + J_4 + ...) = 1. Beyond 25: Hankel's expansion
# J_v(x) = sqrt(2 / (pi x)) (P cos(x - (2v+1) pi/4) - Q sin(...)), whose smallest term there
# is below 1e-21.
_J0_SERIES = tuple((-1) ** k / math.factorial(k) ** 2 for k in range(20))
_J1_SERIES = tuple((-1) ** k / (math.factorial(k) * math.factorial(k + 1)) for k in range(20))
_MILLER_START = 80
_HANKEL_START = 25.0
# x - pi/4 and x - 3pi/4 with these roundings of the constants.
_PHASE = (0.78539816339744830962, 2.35619449019234492885)


def _hankel(order: int, terms: int = 40) -> tuple[tuple, tuple]:
    a = [1.0]
    for k in range(1, terms):
        a.append(a[-1] * (4 * order * order - (2 * k - 1) ** 2) / (8 * k))
    p = tuple((-1) ** k * a[2 * k] for k in range(terms // 2))
    q = tuple((-1) ** k * a[2 * k + 1] for k in range(terms // 2 - 1))
    return p, q


_HANKEL = (_hankel(0), _hankel(1))


def _bessel_j(v: np.ndarray, order: int) -> np.ndarray:
    a = np.abs(v)
    small = a < 2
    s = np.where(small, a, 0.0)
    u = s * s / 4
    series = _horner(_J0_SERIES, u) if order == 0 else s / 2 * _horner(_J1_SERIES, u)

    middle = (a >= 2) & (a <= _HANKEL_START)
    m = np.where(middle, a, 2.0)
    later = np.zeros_like(m)
    current = np.full_like(m, 1e-30)
    norm = np.zeros_like(m)
    j1 = np.zeros_like(m)
    for n in range(_MILLER_START, 0, -1):
        earlier = 2 * n / m * current - later
        later, current = current, earlier
        if n - 1 == 1:
            j1 = current
        if (n - 1) % 2 == 0 and n - 1 > 0:
            norm = norm + 2 * current
    norm = norm + current  # J_0's share
    miller = (current if order == 0 else j1) / norm

    big = np.where(a > _HANKEL_START, a, 2 * _HANKEL_START)
    p, q = _HANKEL[order]
    inv2 = 1 / (big * big)
    with np.errstate(invalid="ignore"):
        phase = big - _PHASE[order]
        hankel = np.sqrt(2 / (np.pi * big)) * (
            _horner(p, inv2) * np.cos(phase) - _horner(q, inv2) / big * np.sin(phase))
    out = np.where(small, series, np.where(middle, miller, hankel))
    if order == 1:
        out = np.where(v < 0, -out, out)
    return np.where(np.isnan(v) | np.isinf(v), np.nan, out)


def j0(x) -> np.ndarray:
    """The Bessel function of the first kind of order 0."""
    v, dtype = _as_float(x)
    return _bessel_j(v, 0).astype(dtype)


def j1(x) -> np.ndarray:
    """The Bessel function of the first kind of order 1."""
    v, dtype = _as_float(x)
    # (an odd function: -0.0 at -0.0, as PyTorch's x * polynomial gives)
    return np.where(v == 0, v, _bessel_j(v, 1)).astype(dtype)


# ---------------------------------------------------------------- spherical j0, xlog1py
_SINC_SERIES = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(8))


def spherical_j0(x) -> np.ndarray:
    """sin(x) / x: its Taylor series below |x| = 1/2, 0 at +-inf."""
    v, dtype = _as_float(x)
    with np.errstate(invalid="ignore", divide="ignore"):
        direct = np.sin(v) / v
    out = np.where(np.abs(v) < 0.5, _horner(_SINC_SERIES, v * v), direct)
    return np.where(np.isinf(v), 0.0, out).astype(dtype)


def xlog1py(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x * log1p(y), 0 where x is 0 unless y is nan (arrays of one float dtype)."""
    with np.errstate(all="ignore"):
        out = x * np.log1p(y)
    return np.where((x == 0) & ~np.isnan(y), np.zeros((), out.dtype), out)
