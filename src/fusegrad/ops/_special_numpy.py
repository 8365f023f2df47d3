"""NumPy versions of the SciPy special functions the registry uses (`erf`, `erfc`, `gammaln`,
`psi`, `polygamma`, `erfinv`, `i0`, `i1`), for installs without SciPy (it is not a
dependency). Every one works on whole arrays (0-d and empty included), never per element in
Python.

`erf`, `erfc`, `erfinv`, `gammaln` and `i1` are good to a few units in the last place of
float64 everywhere (`gammaln` absolutely next to its negative zeros); `psi` and `polygamma`
to about 1e-10 relative over the ranges the ops see; `i0` is NumPy's. Results keep the
input's float dtype, as SciPy's ufuncs do.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["erf", "erfc", "gammaln", "psi", "polygamma", "erfinv", "i0", "i1"]

# B_2j / (2j)! for j = 1..6: the Euler-Maclaurin tail of the Hurwitz zeta function.
_BERNOULLI_OVER_FACTORIAL = (1 / 12, -1 / 720, 1 / 30240, -1 / 1209600, 1 / 47900160,
                             -691 / 1307674368000)


def _as_float(x) -> tuple[np.ndarray, np.dtype]:
    x = np.asarray(x)
    dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
    return x.astype(np.float64), dtype


# ---------------------------------------------------------------- erf, erfc
# Polynomials from tools/gen_special_coefficients.py (which documents the pieces), in powers
# of t, the piece's interval mapped onto [-1, 1]: erf(x) / x in u = x*x for |x| <= 1/2, and
# erfcx(x) = exp(x*x) erfc(x) on [1/2, 4] in five pieces plus x erfcx(x) in s = (4/x)**2
# beyond 4.
_ERF_SMALL = (1.0830752376761712, -0.04364205888669792, 0.0016130716680617086,
              -4.762336934468491e-05, 1.1516037795137055e-06, -2.3472291635195175e-08,
              4.1270254211350677e-10, -6.374417852769556e-12, 8.774531112408876e-14,
              -1.0890239919604682e-15, 1.2303489181995682e-17, -1.2757824687555533e-19,
              1.2216678256231158e-21)
_ERFCX_PIECES = (
    (0.5069376502931449, -0.09199317291394885, 0.014434883221956143,
     -0.002028688468670017, 0.00026090055674831536, -3.114966996062544e-05,
     3.4885738930506322e-06, -3.693562193204623e-07, 3.719539429927566e-08,
     -3.580139366634323e-09, 3.3068719940073687e-10, -2.9410027836191583e-11,
     2.5256004719947655e-12, -2.098775696242263e-13, 1.6922598911156157e-14,
     -1.3586639402228971e-15, 1.0350358504999337e-16),
    (0.3678229164523611, -0.052205468991152464, 0.006674723218537425,
     -0.0007846605374360558, 8.598189160491081e-05, -8.868776985287435e-06,
     8.67458472468182e-07, -8.091936826758649e-08, 7.2322129865092565e-09,
     -6.216430995940928e-10, 5.1549968311929906e-11, -4.1351549744960405e-12,
     3.216066943017308e-13, -2.4294597388122373e-14, 1.7863904846671667e-15,
     -1.3067838923010475e-16, 9.132568513994301e-18),
    (0.2849722347374364, -0.0327440863786213, 0.0034852268804429543,
     -0.0003478124256466926, 3.282937190362831e-05, -2.95017055803235e-06,
     2.5371204161253654e-07, -2.0967611906220994e-08, 1.670918097964504e-09,
     -1.2876646117027813e-10, 9.6194108385995e-12, -6.980752587395658e-13,
     4.9300932544309624e-14, -3.3934714930066554e-15, 2.2803803116871416e-16,
     -1.5238812002251936e-17, 9.786460697664388e-19),
    (0.2108063640611436, -0.037173673394897334, 0.006234499271664226,
     -0.0010001961727627055, 0.00015418980098134069, -2.2924716785537266e-05,
     3.2971847544381417e-06, -4.599137870635136e-07, 6.235098886174186e-08,
     -8.231045499084752e-09, 1.0597875947394497e-09, -1.3328011349885886e-10,
     1.6391918153365922e-11, -1.9711739348105174e-12, 2.326569272108777e-13,
     -2.846881146445913e-14, 3.2301166728430767e-15),
    (0.1552936556088943, -0.020661788916626248, 0.0026652832981276437,
     -0.0003341343049554567, 4.0792895429930966e-05, -4.858403694592417e-06,
     5.653391306476023e-07, -6.435927001415241e-08, 7.176515039553685e-09,
     -7.846480078627971e-10, 8.41989345440749e-11, -8.875311068968234e-12,
     9.196806686339315e-13, -9.368432958571294e-14, 9.40147305520437e-15,
     -9.676924626064557e-16, 9.41618499352444e-17),
    (0.5557581685752836, -0.008073805168515994, 0.0003335970130800051,
     -2.1861074882080178e-05, 1.9147125648857617e-06, -2.0641935789775904e-07,
     2.6102696127832093e-08, -3.75193133066579e-09, 5.996533770724106e-10,
     -1.0485104695734097e-10, 1.9812122911313987e-11, -4.014232036213877e-12,
     8.625098648097823e-13, -1.8705715716402694e-13, 4.4126622464318675e-14,
     -1.5724635583232007e-14, 4.16262343360946e-15),
)
_ERFCX_BREAKS = np.array([0.5, 1.0, 1.5, 2.0, 3.0, 4.0])
_ERFCX_COLUMNS = np.array(_ERFCX_PIECES).T.copy()  # one row per power, one column per piece
# Past this erfc(x) is below half the smallest subnormal: 0 (and erf(x) is 1).
_ERFC_ZERO = 27.5


def _horner(coefficients, t: np.ndarray) -> np.ndarray:
    """sum_k coefficients[k] t**k for one polynomial (a sequence of floats)."""
    out = np.full_like(t, coefficients[-1])
    for c in coefficients[-2::-1]:
        out *= t
        out += c
    return out


def _horner_pieces(columns: np.ndarray, piece: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Horner's rule with a polynomial per element: columns[k, piece] is element i's
    coefficient of t**k. Gathering one power at a time keeps the work proportional to the
    size of t, whatever the number of pieces."""
    out = columns[-1].take(piece)
    for row in columns[-2::-1]:
        out *= t
        out += row.take(piece)
    return out


def _erf_small(x: np.ndarray) -> np.ndarray:
    """erf(x) for |x| <= 1/2 (odd, so -0.0 stays -0.0)."""
    return x * _horner(_ERF_SMALL, 8 * (x * x) - 1)


def _erfcx_positive(a: np.ndarray) -> np.ndarray:
    """exp(a*a) erfc(a) for a >= 1/2 (nan stays nan; a may be +inf): a polynomial per piece
    of [1/2, 4], and one in (4/a)^2 over a beyond."""
    last = len(_ERFCX_BREAKS) - 1
    piece = np.minimum(np.searchsorted(_ERFCX_BREAKS, a, side="right") - 1, last)
    inner = piece < last
    lo = _ERFCX_BREAKS.take(np.minimum(piece, last - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(inner, (a - lo) * (2 / np.diff(_ERFCX_BREAKS)).take(
            np.minimum(piece, last - 1)) - 1, 2 * (_ERFCX_BREAKS[-1] / a) ** 2 - 1)
        series = _horner_pieces(_ERFCX_COLUMNS, piece, t)
        return np.where(inner, series, series / a)


def _erfc_positive(a: np.ndarray) -> np.ndarray:
    """erfc(a) for a >= 1/2 (nan stays nan; a may be +inf)."""
    a = np.minimum(a, _ERFC_ZERO)
    erfcx = _erfcx_positive(a)
    # exp(-a*a) to full precision: a = m + d with m a multiple of 1/512, so m*m is exact (28
    # bits) and a*a - m*m = d (a + m) is below 0.11, so its rounding costs exp little;
    # rounding a*a itself would cost up to 1e-13 at a = 27.
    m = np.trunc(a * 512) / 512
    m2 = m * m
    out = np.exp(-(a - m) * (a + m))
    out *= erfcx
    # Near the underflow scale up by e**64 so that only the last product rounds to subnormal.
    deep = m2 > 600
    out *= np.exp(np.where(deep, 64 - m2, -m2))
    return np.where(deep, out * math.exp(-64), out)


def _exp_square(v: np.ndarray) -> np.ndarray:
    """exp(v*v) without the rounding of v*v (split as in `_erfc_positive`)."""
    finite = np.where(np.isinf(v), 0.0, v)
    m = np.trunc(finite * 512) / 512
    with np.errstate(over="ignore"):
        return np.where(np.isinf(v), np.inf, np.exp((finite - m) * (finite + m)) * np.exp(m * m))


def _erfcx64(v: np.ndarray) -> np.ndarray:
    """exp(v*v) erfc(v): the series near 0, the pieces for v >= 1/2, and
    2 exp(v*v) - erfcx(-v) below -1/2 (overflowing to inf past v ~ -26.6)."""
    a = np.abs(v)
    small = a <= 0.5
    near = _exp_square(np.where(small, v, 0.0)) * (1 - _erf_small(np.where(small, v, 0.0)))
    tail = _erfcx_positive(np.where(small, 0.5, a))
    with np.errstate(over="ignore", invalid="ignore"):
        below = 2 * _exp_square(np.where(v < -0.5, v, 0.0)) - tail
    return np.where(small, near, np.where(v < 0, below, tail))


def erfcx(x) -> np.ndarray:
    """The scaled complementary error function exp(x^2) erfc(x), without overflow for large
    x (where it falls as 1 / (x sqrt(pi)))."""
    return _float_call(_erfcx64, x)


def _float_call(fn, x) -> np.ndarray:
    """fn over x computed in float64, returned in x's float dtype (float64 for others), with
    the shape x has (0-d stays 0-d)."""
    v, dtype = _as_float(x)
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        return np.asarray(fn(v)).astype(dtype, copy=False)


def _erf_pair(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """erf(v) and erfc(v) from one pass: the series near 0, erfc's pieces beyond."""
    a = np.abs(v)
    small = a <= 0.5
    near = _erf_small(np.where(small, v, 0.0))
    tail = _erfc_positive(np.where(small, 0.5, a))
    erf_ = np.where(small, near, np.copysign(1 - tail, v))
    erfc_ = np.where(small, 1 - near, np.where(v < 0, 2 - tail, tail))
    return erf_, erfc_


def _erf64(v: np.ndarray) -> np.ndarray:
    return _erf_pair(v)[0]


def _erfc64(v: np.ndarray) -> np.ndarray:
    return _erf_pair(v)[1]


def erf(x) -> np.ndarray:
    """The error function, vectorised: within a few float64 ulps everywhere; erf(-0.0) is
    -0.0, erf(+-inf) is +-1."""
    return _float_call(_erf64, x)


def erfc(x) -> np.ndarray:
    """The complementary error function 1 - erf(x) without cancellation: relative accuracy
    of a few float64 ulps down to the subnormals (erfc(x) is 0 past x ~ 27.2)."""
    return _float_call(_erfc64, x)


# ---------------------------------------------------------------- gammaln
# lgamma(y) / ((y - 1)(y - 2)) on [1, 2] and [2, 3] in powers of t = 2y - 3 and 2y - 5
# (tools/gen_special_coefficients.py).
_LGAMMA_PIECES = (
    (0.4831289505409809, -0.07297994795715297, 0.01572785026864121,
     -0.003913560937631659, 0.0010498186644508718, -0.0002945507014009265,
     8.510090378468051e-05, -2.509432984849446e-05, 7.5113915317296576e-06,
     -2.274240971132041e-06, 6.948440187550096e-07, -2.138843561161159e-07,
     6.623601939725099e-08, -2.057761163373013e-08, 6.434152357291201e-09,
     -2.0732827842398214e-09, 6.533268528434416e-10, -1.6393816009998903e-10,
     5.18198984494436e-11, -3.533898162275879e-11, 1.1273354955165048e-11),
    (0.37957716063055885, -0.03733178707724971, 0.004976288576185804,
     -0.0007523460658791502, 0.00012181609305905752, -2.058249083664003e-05,
     3.5789630867846783e-06, -6.35174131884639e-07, 1.1445031694043185e-07,
     -2.0863922017521517e-08, 3.838488664264775e-09, -7.114439643660257e-10,
     1.3266872647020616e-10, -2.4865895678878647e-11, 4.6809798429477485e-12,
     -8.85269123311741e-13, 1.678261198021633e-13, -3.129442894884066e-14,
     5.964047308584298e-15, -1.4117773695897187e-15, 2.7046632637062197e-16),
)
_LGAMMA_COLUMNS = np.array(_LGAMMA_PIECES).T.copy()
# B_2k / (2k (2k - 1)) for k = 1..8: Stirling's series of lgamma, used from x = 10 on.
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156,
             -3617 / 122400)
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _lgamma_core(t: np.ndarray, upper: np.ndarray, factors: np.ndarray) -> np.ndarray:
    """lgamma(y) for y in [1, 3] from t, y's place in [-1, 1] within its half ([1, 2] or, where
    `upper`, [2, 3]) and factors = (y - 1)(y - 2), which the caller forms exactly."""
    return factors * _horner_pieces(_LGAMMA_COLUMNS, upper.astype(np.intp), t)


def _lgamma_positive(x: np.ndarray) -> np.ndarray:
    """lgamma(x) for x > 0 (+inf stays +inf)."""
    # Below 1: lgamma(x) = lgamma(x + 1) - log(x), with (y - 1)(y - 2) = x (x - 1) for
    # y = x + 1 taken from x itself: forming x + 1 would round away the distance to the zero
    # at 1. From 3 to 10: step down to [2, 3), collecting the factors (x - 1)(x - 2)...
    below = x < 1
    y = np.where(x < 10, x, 2.5)
    product = np.ones_like(y)
    for _ in range(7):
        step = y >= 3
        y = np.where(step, y - 1, y)
        product = np.where(step, product * y, product)
    upper = y >= 2
    t = np.where(below, 2 * x - 1, np.where(upper, 2 * y - 5, 2 * y - 3))
    factors = np.where(below, x * (x - 1), (y - 1) * (y - 2))
    core = _lgamma_core(t, upper & ~below, factors)
    core = np.where(below, core - np.log(np.where(below, x, 1.0)), core + np.log(product))
    big = np.maximum(x, 10.0)
    inverse = 1 / big
    inverse2 = inverse * inverse
    series = np.zeros_like(big)
    for c in _STIRLING[::-1]:
        series = series * inverse2 + c
    stirling = (big - 0.5) * np.log(big) - big + _HALF_LOG_2PI + series * inverse
    return np.where(x < 10, core, stirling)


def _gammaln64(v: np.ndarray) -> np.ndarray:
    # Reflection for x <= 0: lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x). |sin(pi x)|
    # is sin(pi d) for d the (exact) distance to the nearest integer, and log(pi / sin(pi d))
    # = -log(d) - log(sin(pi d) / (pi d)), which stays accurate when pi d is subnormal.
    negative = v <= 0
    positive = _lgamma_positive(np.where(negative, 1 - v, v))
    distance = np.abs(v - np.round(v))
    tiny = distance < 1e-8  # sin(pi d) / (pi d) = 1 - (pi d)**2 / 6 rounds to 1
    ratio = np.sin(math.pi * distance) / (math.pi * np.where(tiny, 1.0, distance))
    reflected = -np.log(distance) - np.log(np.where(tiny, 1.0, ratio)) - positive
    out = np.where(negative, reflected, positive)
    # The poles 0, -1, -2, ... and -inf are +inf, as in SciPy and PyTorch.
    return np.where((negative & (distance == 0)) | np.isinf(v), np.inf, out)


def gammaln(x) -> np.ndarray:
    """log|Gamma(x)|, vectorised; +inf at the poles and at +-inf."""
    return _float_call(_gammaln64, x)


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
    """Inverse error function: Giles' single-precision estimate (erfc's asymptotic form deep
    in the tail) refined by two steps, to a few ulps; +-inf at +-1, nan outside [-1, 1]."""
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
    guess = np.abs(np.where(central, pc, pt) * y)
    # Solve erf(x) = |y| for x >= 0. Below |y| = 1/2: Halley's method on erf(x) - |y|. From
    # 1/2 on, Newton's method on log(erfc(x) / (1 - |y|)), which is close to linear in x even
    # where Giles' estimate is coarse (1 - |y| below 1e-12); 1 - |y| is exact there and erfc
    # keeps its relative accuracy, so the tail keeps its digits.
    size = np.abs(y)
    low = size < 0.5
    rest = np.where(low, 1.0, 1 - size)
    # Deep in the tail Giles' estimate is off by several percent; erfc's asymptotic form
    # erfc(x) ~ exp(-x*x) (1 - 1/(2 x*x)) / (x sqrt(pi)), solved for x, is within 1e-4.
    deep = rest < 1e-8
    log_rest = np.log(np.where(deep, rest, 1e-8))
    tail = np.sqrt(-log_rest)
    for _ in range(3):
        tail = np.sqrt(-log_rest - np.log(tail * math.sqrt(math.pi))
                       + np.log1p(-0.5 / (tail * tail)))
    guess = np.where(deep, tail, guess)
    for _ in range(2):
        erf_, erfc_ = _erf_pair(guess)
        slope = 2 / math.sqrt(math.pi) * np.exp(-guess * guess)
        residual = erf_ - size
        # Halley for f = erf - |y|: f'' = -2 x f', so x - f / (f' - f f'' / (2 f')).
        halley = residual / (slope + guess * residual)
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = -np.log(erfc_ / rest) * erfc_ / slope
        guess = guess - np.where(low, halley, np.where(erfc_ > 0, newton, 0.0))
    refined = np.copysign(guess, y)
    out = np.where(inside, refined, np.where(np.abs(v) == 1, np.copysign(np.inf, v), np.nan))
    return out.astype(dtype)


def i0(x) -> np.ndarray:
    """Modified Bessel function of the first kind, order 0 (NumPy's own)."""
    v, dtype = _as_float(x)
    return np.i0(v).astype(dtype)


# ---------------------------------------------------------------- i1
# i1(x) = (x/2) sum_k u**k / (k! (k+1)!) with u = x*x/4: every term positive, so the sum is
# accurate; 24 terms reach 1e-17 relative at x = 8.
_I1_SMALL = tuple(1 / (math.factorial(k) * math.factorial(k + 1)) for k in range(24))
# sqrt(x) exp(-x) i1(x) past 8 in powers of t = 2 (8/x) - 1 (tools/gen_special_coefficients.py).
_I1_LARGE = (0.38939845902587233, -0.009749577193235765, -0.00021923576383440173,
             -1.5038547197418993e-05, -1.8349101031778112e-06, -3.4838567691733334e-07,
             -1.00013553796233e-07, -4.312767119878634e-08, -2.336596794659967e-08,
             -8.440458934361929e-09, 6.677896616468457e-09, 1.4100990834184311e-08,
             6.234580173683657e-09, -7.874583254138298e-09, -8.698749141810299e-09,
             3.9782614783076284e-09, 7.996816386971422e-09, -2.3490216253043073e-09,
             -6.458329380412786e-09, 1.569021109680471e-09, 4.508136592648715e-09,
             -9.455238431976714e-10, -2.516800406120259e-09, 4.219561140454189e-10,
             1.0194202195354832e-09, -1.1762079512067687e-10, -2.6089060610870525e-10,
             1.5119576957666286e-11, 3.129857598283539e-11)


def _i1_64(v: np.ndarray) -> np.ndarray:
    a = np.abs(v)
    small = a <= 8
    half = np.where(small, a, 0.0) / 2
    series = half * _horner(_I1_SMALL, half * half)
    big = np.where(small, 8.0, a)
    scaled = _horner(_I1_LARGE, 16 / big - 1) / np.sqrt(big)
    # exp(x) overflows past 709.78 where i1 itself would still be finite (to 713.9): inf
    # there, as PyTorch gives; and i1(+-inf) is nan, as PyTorch gives (0 * inf).
    out = np.where(small, series, scaled * np.exp(big))
    return np.where(v < 0, -out, out)  # odd, with i1(-0.0) = +0.0 as in PyTorch


def i1(x) -> np.ndarray:
    """Modified Bessel function of the first kind, order 1: its power series up to |x| = 8,
    a polynomial in 8/|x| for exp(-|x|) sqrt(|x|) i1 beyond; a few ulps throughout (inf
    past |x| = 709.78 and nan at +-inf, as PyTorch)."""
    return _float_call(_i1_64, x)
