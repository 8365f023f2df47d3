"""C source of the float32 transcendental functions kernels call: `fg_expf`, `fg_logf`,
`fg_sinf`, `fg_cosf` (and their `_fast` forms), `fg_tanhf`, `fg_sigmoidf`, `fg_erff`,
`fg_erfcf`. Generated kernels (`compiler/codegen`) and the eager C kernels of
`native/math.c` both start from this source, so the two compute these functions alike, but
for erf: generated float32 kernels call `compiler/codegen/erf_float.py`'s all-float
`fg_erff_float` (within one ulp of this double one, twice as fast in a GELU kernel).

Why our own: gcc vectorises libm's `expf`/`sinf` only under `-ffast-math`, whose
finite-math-only assumption breaks NaN/Inf. These are branch-free (every special case is a
select), so gcc vectorises loops calling them under plain `-O3 -fno-math-errno
-fno-trapping-math`, and they keep IEEE results for NaN, +-Inf, -0.0 and denormals.

exp and the fast sin/cos compute in float only (16 lanes per AVX-512 vector; conversions to
double and back cost more than the arithmetic): they carry the rounding errors that decide the
last bit (2Sum, Fast2Sum, fma) so that the result is rounded to float once. log, tanh,
sigmoid, erf and erfc compute in double and round once (log's input is never denormal as a
double; erf's tail needs e^(-x^2) far below float's range).

The fast sin/cos reduce |x| < 512 in float. Larger finite |x| need the double reduction
(three-part pi/2 with fma, |x| < 2^50) and beyond that 2/pi's bits scaled by the exponent (a
table, as Payne-Hanek): a gather that would slow every call. So kernels call the `_fast`
forms, OR `fg_trig_large` of each argument into a flag, and when it is set run again with
`fg_sinf`/`fg_cosf`, which reduce every float argument exactly enough for float results.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cache

import numpy as np

# The small reduction covers |x| < 2^50; the table covers float exponents 27..104 (a float
# >= 2^50 is m * 2^E with a 24-bit integer m and E in that range).
_TABLE_LO, _TABLE_HI = 27, 104


def _pi_over_two() -> Fraction:
    """pi/2 to 600 bits (Machin's formula in integers)."""
    bits = 600

    def arctan_inv(x: int) -> int:
        total = term = (1 << bits) // x
        n, sign = 1, -1
        while term:
            term //= x * x
            total += sign * (term // (2 * n + 1))
            sign, n = -sign, n + 1
        return total

    return Fraction(2 * (4 * arctan_inv(5) - arctan_inv(239)), 1 << bits)


@cache
def _constants() -> tuple:
    half_pi = _pi_over_two()
    p1 = float(half_pi)
    p2 = float(half_pi - Fraction(p1))
    p3 = float(half_pi - Fraction(p1) - Fraction(p2))
    two_over_pi = 1 / half_pi
    rows = []
    for e in range(_TABLE_LO, _TABLE_HI + 1):
        # (2^e * 2/pi) mod 4, split into four pieces of 24 bits each, so that a 24-bit
        # mantissa times a piece is exact in double.
        c = (Fraction(2) ** e * two_over_pi) % 4
        pieces = []
        for k in range(4):
            scale = Fraction(2) ** (22 + 24 * k)
            piece = Fraction(int(c * scale)) / scale
            pieces.append(float(piece).hex())
            c -= piece
        rows.append("  " + ", ".join(pieces))
    return p1.hex(), p2.hex(), p3.hex(), float(two_over_pi).hex(), ",\n".join(rows)


_SOURCE = r"""
#include <stdint.h>
#include <string.h>
#include <math.h>

static inline double fg_as_double(uint64_t b) { double d; memcpy(&d, &b, 8); return d; }
static inline uint64_t fg_as_bits(double d) { uint64_t b; memcpy(&b, &d, 8); return b; }
static inline uint32_t fg_as_bits_f(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

/* e^x in double for the float functions: |x| is clamped to 200 (beyond float's range either
   way), x = n ln2 + r with |r| <= ln2/2, e^r by its Taylor series to r^10, times 2^n built
   from bits (n + 1.5*2^52 holds n in its low bits). NaN stays NaN. */
static inline double fg_exp_d(double x) {
  x = x < -200.0 ? -200.0 : x;
  x = x > 200.0 ? 200.0 : x;
  double n = rint(x * 0x1.71547652b82fep+0);
  double r = fma(n, -0x1.62e42fee00000p-1, x);
  r = fma(n, -0x1.a39ef35793c76p-33, r);
  double p = 1.0 / 3628800.0;
  p = fma(p, r, 1.0 / 362880.0);
  p = fma(p, r, 1.0 / 40320.0);
  p = fma(p, r, 1.0 / 5040.0);
  p = fma(p, r, 1.0 / 720.0);
  p = fma(p, r, 1.0 / 120.0);
  p = fma(p, r, 1.0 / 24.0);
  p = fma(p, r, 1.0 / 6.0);
  p = fma(p, r, 0.5);
  p = fma(p, r, 1.0);
  p = fma(p, r, 1.0);
  uint64_t scale = (fg_as_bits(n + 0x1.8p52) + 1023u) << 52;
  return p * fg_as_double(scale);
}

static inline float fg_pow2if(int32_t q) {
  uint32_t b = (uint32_t)(q + 127) << 23;
  float f;
  memcpy(&f, &b, 4);
  return f;
}

/* e^x all in float (16 lanes per AVX-512 vector; a detour through double halves that and
   costs conversions): x = n ln2 + r with ln2 in two parts (fma keeps n ln2's product
   exact), 1 + r + r^2 p(r), then 2^n applied as two factors 2^h 2^(n-h) so that neither
   overflows and a denormal result is rounded once, by the last product. */
static inline float fg_expf(float x) {
  float xc = x < -104.0f ? -104.0f : x;
  xc = xc > 89.0f ? 89.0f : xc;
  float n = rintf(xc * 0x1.715476p+0f);
  float r1 = fmaf(n, -0x1.62e4p-1f, xc);  /* exact: ln2's first part has 16 bits */
  float r = fmaf(n, -0x1.7f7d1cp-20f, r1);
  float rerr = fmaf(n, -0x1.7f7d1cp-20f, r1 - r);  /* what rounding r lost */
  float p = 1.9875691500e-4f;
  p = fmaf(p, r, 1.3981999507e-3f);
  p = fmaf(p, r, 8.3334519073e-3f);
  p = fmaf(p, r, 4.1665795894e-2f);
  p = fmaf(p, r, 1.6666665459e-1f);
  p = fmaf(p, r, 5.0000001201e-1f);
  /* 1 + r + (r^2 p + rerr) with the error of 1 + r kept (Fast2Sum: |1| >= |r|), so the
     sum is rounded once to float. */
  float s = 1.0f + r;
  float e1 = (1.0f - s) + r;
  float y = s + (fmaf(p * r, r, rerr) + e1);
  int32_t q = (int32_t)n;
  int32_t h = q >> 1;
  float res = y * fg_pow2if(h) * fg_pow2if(q - h);
  return x != x ? x : res;
}

static inline float fg_sigmoidf(float x) {
  float res = (float)(1.0 / (1.0 + fg_exp_d(-(double)x)));
  return x != x ? x : res;
}

/* log x = e ln2 + 2 atanh((m-1)/(m+1)) with m in [sqrt(1/2), sqrt(2)); the exponent is read
   from the double's bits (a float denormal is a normal double). */
static inline float fg_logf(float xf) {
  double x = (double)xf;
  uint64_t b = fg_as_bits(x);
  double e = fg_as_double((b >> 52) | 0x4330000000000000ull) - 0x1p52 - 1023.0;
  double m = fg_as_double((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
  int big = m > 0x1.6a09e667f3bcdp+0;
  m = big ? 0.5 * m : m;
  e = big ? e + 1.0 : e;
  double f = (m - 1.0) / (m + 1.0);
  double f2 = f * f;
  double p = 1.0 / 13.0;
  p = fma(p, f2, 1.0 / 11.0);
  p = fma(p, f2, 1.0 / 9.0);
  p = fma(p, f2, 1.0 / 7.0);
  p = fma(p, f2, 1.0 / 5.0);
  p = fma(p, f2, 1.0 / 3.0);
  double res = fma(e, 0x1.62e42fefa39efp-1, fma(2.0 * f, f2 * p, 2.0 * f));
  float out = (float)res;
  out = xf < 0.0f ? NAN : out;
  out = xf == 0.0f ? -INFINITY : out;
  out = xf == INFINITY ? xf : out;
  return xf != xf ? xf : out;
}

static const double fg_two_over_pi_table[%(rows)d * 4] = {
%(table)s
};

/* x = q pi/2 + r (q mod 4 in *q), |r| <= ~pi/4, for any finite float x. */
static inline double fg_reduce_pio2(float xf, double *q) {
  double x = (double)xf;
  double n = rint(x * %(twoopi)s);
  double r = fma(n, -%(p1)s, x);
  r = fma(n, -(%(p2)s), r);
  r = fma(n, -(%(p3)s), r);
  double qs = n - 4.0 * floor(n * 0.25);
  /* Large |x|: x = m 2^E, (x 2/pi) mod 4 = m * ((2^E 2/pi) mod 4), summed piece by piece so
     that the bits that matter are exact. */
  uint32_t u = fg_as_bits_f(xf);
  int32_t E = (int32_t)((u >> 23) & 0xffu) - 150;
  E = E < %(lo)d ? %(lo)d : E;
  E = E > %(hi)d ? %(hi)d : E;
  double m = (double)(int32_t)((u & 0x7fffffu) | 0x800000u);
  int64_t t = (int64_t)(E - %(lo)d) * 4;
  double a = m * fg_two_over_pi_table[t];
  a = a - 4.0 * floor(a * 0.25);
  double s = a + m * fg_two_over_pi_table[t + 1];
  double k = rint(s);
  double fr = (s - k) + m * fg_two_over_pi_table[t + 2];
  fr = fr + m * fg_two_over_pi_table[t + 3];
  double kq = k - 4.0 * floor(k * 0.25);
  double ax = fabs(x);
  int large = ax >= 0x1p50 && ax <= 0x1.fffffep+127;
  double neg = xf < 0.0f ? -1.0 : 1.0;
  double rl = neg * fr * %(p1)s;
  double ql = xf < 0.0f ? 4.0 - kq : kq;
  ql = ql == 4.0 ? 0.0 : ql;
  *q = large ? ql : qs;
  return large ? rl : r;
}

/* The fast forms cover |x| < 512 only; kernels run them and, if any argument needed more
   (`fg_trig_large`), run again with the full reduction. */
static inline int fg_trig_large(float x) {
  float ax = fabsf(x);
  return ax >= 512.0f && ax <= 0x1.fffffep+127f;
}

static inline double fg_sin_poly(double r) {
  double r2 = r * r;
  double p = 1.0 / 6227020800.0;
  p = fma(p, r2, -1.0 / 39916800.0);
  p = fma(p, r2, 1.0 / 362880.0);
  p = fma(p, r2, -1.0 / 5040.0);
  p = fma(p, r2, 1.0 / 120.0);
  p = fma(p, r2, -1.0 / 6.0);
  return fma(r * r2, p, r);
}

static inline double fg_cos_poly(double r) {
  double r2 = r * r;
  double p = -1.0 / 87178291200.0;
  p = fma(p, r2, 1.0 / 479001600.0);
  p = fma(p, r2, -1.0 / 3628800.0);
  p = fma(p, r2, 1.0 / 40320.0);
  p = fma(p, r2, -1.0 / 720.0);
  p = fma(p, r2, 1.0 / 24.0);
  p = fma(p, r2, -0.5);
  return fma(r2, p, 1.0);
}

static inline float fg_sinf(float x) {
  double q;
  double r = fg_reduce_pio2(x, &q);
  double s = fg_sin_poly(r), c = fg_cos_poly(r);
  double res = (q == 1.0 || q == 3.0) ? c : s;
  res = q >= 2.0 ? -res : res;
  float out = (float)res;
  return x == 0.0f ? x : out;  /* keeps -0.0 */
}

static inline float fg_cosf(float x) {
  double q;
  double r = fg_reduce_pio2(x, &q);
  double s = fg_sin_poly(r), c = fg_cos_poly(r);
  double res = (q == 1.0 || q == 3.0) ? s : c;
  res = (q == 1.0 || q == 2.0) ? -res : res;
  return (float)res;
}

/* sin and cos of x (|x| < 512) all in float, 16 lanes per AVX-512 vector (a double
   reduction costs twice the lanes and the conversions). x = n pi/2 + rh + rl with pi/2 in four
   parts: n < 2^9 and the first three have 15 bits, so each n p_i is exact, x - n p1 is exact
   (a multiple of x's or p1's last bit, below 1 in size), and two 2Sums keep what subtracting
   n p2 and n p3 rounds off; n p4 only adjusts rl. Then sin(rh + rl) = rh + (rl cos rh +
   rh^3 P(rh^2)) and cos(rh + rl) = 1 - rh^2/2 + ... with the rounding errors of rh^2 and of
   1 - rh^2/2 carried, so each result is rounded to float once. */
static inline float fg_two_sum(float a, float b, float *err) {
  float s = a + b;
  float bb = s - a;
  *err = (a - (s - bb)) + (b - bb);
  return s;
}

static inline void fg_sincos_fast(float x, float *s, float *c, int32_t *q) {
  float n = rintf(x * %(twoopif)s);
  float r1 = fmaf(n, -%(q1)s, x);
  float e2, e3;
  float r2 = fg_two_sum(r1, -n * %(q2)s, &e2);
  float rh = fg_two_sum(r2, -n * %(q3)s, &e3);
  float rl = fmaf(n, -%(q4)s, e2 + e3);
  float hh = rh * rh;
  float ps = -1.0f / 39916800.0f;
  ps = fmaf(ps, hh, 1.0f / 362880.0f);
  ps = fmaf(ps, hh, -1.0f / 5040.0f);
  ps = fmaf(ps, hh, 1.0f / 120.0f);
  ps = fmaf(ps, hh, -1.0f / 6.0f);
  *s = rh + fmaf(rh * hh, ps, fmaf(rl, -0.5f * hh, rl));
  float pc = 1.0f / 479001600.0f;
  pc = fmaf(pc, hh, -1.0f / 3628800.0f);
  pc = fmaf(pc, hh, 1.0f / 40320.0f);
  pc = fmaf(pc, hh, -1.0f / 720.0f);
  pc = fmaf(pc, hh, 1.0f / 24.0f);
  float hl = fmaf(rh, rh, -hh);
  float h2 = 0.5f * hh;
  float one = 1.0f - h2;
  float e = (1.0f - one) - h2;
  *c = one + (fmaf(hh * hh, pc, e) - fmaf(0.5f, hl, rh * rl));
  *q = (int32_t)(fabsf(n) < 1024.0f ? n : 0.0f) & 3;  /* NaN and inf give NaN anyway */
}

static inline float fg_sinf_fast(float x) {
  float s, c;
  int32_t q;
  fg_sincos_fast(x, &s, &c, &q);
  float res = (q & 1) ? c : s;
  res = (q & 2) ? -res : res;
  return x == 0.0f ? x : res;  /* keeps -0.0 */
}

static inline float fg_cosf_fast(float x) {
  float s, c;
  int32_t q;
  fg_sincos_fast(x, &s, &c, &q);
  float res = (q & 1) ? s : c;
  return ((q + 1) & 2) ? -res : res;
}

/* erf and erfc, in double, rounded once. |x| < 1: erf's Taylor series (13 terms, alternating,
   truncation below 1e-11). |x| >= 1: erfc(a) = e^(-a^2) g(1/a) / a with g(u) = x e^(x^2) erfc(x)
   at x = 1/u, smooth on [1/10.5, 1], as a degree-16 polynomial fitted at Chebyshev nodes
   (`fit_erfc_tail`; relative error below 2e-11); a is clamped to 10.5, past which erfc is 0
   in float. */
static inline double fg_erf_series(double x) {
  double x2 = x * x;
  double p = %(erf_series)s;
  return x * p;
}

static inline double fg_erfc_tail(double a) {
  double u = 1.0 / a;
  double t = fma(u, %(erfc_scale)s, %(erfc_shift)s);
  double p = %(erfc_poly)s;
  return fg_exp_d(-a * a) * (p * u);
}

static inline float fg_erff(float xf) {
  double x = (double)xf;
  double a = fabs(x);
  double ac = a < 1.0 ? 1.0 : (a > 10.5 ? 10.5 : a);
  double big = copysign(1.0 - fg_erfc_tail(ac), x);
  double res = a < 1.0 ? fg_erf_series(x) : big;
  float out = (float)res;
  return xf != xf ? xf : out;  /* -0.0 stays -0.0 through the series */
}

static inline float fg_erfcf(float xf) {
  double x = (double)xf;
  double a = fabs(x);
  double ac = a < 1.0 ? 1.0 : (a > 10.5 ? 10.5 : a);
  double tail = fg_erfc_tail(ac);
  double res = a < 1.0 ? 1.0 - fg_erf_series(x) : (x > 0.0 ? tail : 2.0 - tail);
  float out = (float)res;
  return xf != xf ? xf : out;
}

/* tanh: its Taylor series to x^11 below 1/16, else 1 - 2/(e^2|x| + 1) with x's sign. */
static inline float fg_tanhf(float xf) {
  double x = (double)xf;
  double ax = fabs(x);
  double big = 1.0 - 2.0 / (fg_exp_d(2.0 * ax) + 1.0);
  double x2 = x * x;
  double p = -1382.0 / 155925.0;
  p = fma(p, x2, 62.0 / 2835.0);
  p = fma(p, x2, -17.0 / 315.0);
  p = fma(p, x2, 2.0 / 15.0);
  p = fma(p, x2, -1.0 / 3.0);
  double small = fma(x * x2, p, x);
  double res = ax < 0.0625 ? small : copysign(big, x);
  float out = (float)res;
  out = xf == 0.0f ? xf : out;  /* keeps -0.0 */
  return xf != xf ? xf : out;
}
"""


@cache
def _float_pio2_parts() -> tuple:
    """pi/2 as four floats for the fast float reduction: two of 15 bits (so that n times
    them is exact for n < 2^9), then two of 24 bits; as C float literals."""
    rest = _pi_over_two()
    parts = []
    for bits in (15, 15, 15, 24):
        scale = Fraction(2) ** (bits - 1 - math.floor(math.log2(float(rest))))
        part = Fraction(math.floor(rest * scale)) / scale
        parts.append(float(part).hex() + "f")
        rest -= part
    return tuple(parts)


def _horner(coefficients: list, var: str) -> str:
    """C text of the polynomial sum c_k var^k by Horner's rule with fma."""
    text = coefficients[-1].hex()
    for c in reversed(coefficients[:-1]):
        text = f"fma({text}, {var}, {c.hex()})"
    return text


# erfc's tail is fitted in u = 1/x over [1/10.5, 1], mapped onto t in [-1, 1].
_ERFC_U = (1 / 10.5, 1.0)

# `fit_erfc_tail()`'s coefficients (t^0 first), kept here because fitting takes a quarter of a
# second (tests/test_codegen.py checks that the fit still gives them).
ERFC_TAIL = tuple(float.fromhex(c) for c in (
    "0x1.01698439c3879p-1", "-0x1.3ae258042cdcfp-4", "-0x1.1a95891f8cf52p-8",
    "0x1.2d2f2986bbd18p-7", "-0x1.0be7bce437fbfp-8", "0x1.eec9b29a42007p-11",
    "0x1.cbb50b180589cp-14", "-0x1.06c9f2a1efb1ep-12", "0x1.43d3f37bee77cp-13",
    "-0x1.e672758ffdd54p-15", "0x1.53ab94b45860ep-17", "0x1.cb7bcd4f5382ep-20",
    "-0x1.694c23dbd4d8cp-18", "0x1.1a817f8d53228p-17", "-0x1.06e833459ab74p-18",
    "-0x1.68d9a8697515dp-20", "0x1.200a789d93966p-20"))


def fit_erfc_tail() -> list[float]:
    """g(u) = x e^(x^2) erfc(x) at x = 1/u, u in `_ERFC_U` mapped onto t in [-1, 1]: the
    least-squares degree-16 polynomial in t at 2000 Chebyshev nodes (t^0 first)."""
    from numpy.polynomial import chebyshev

    lo, hi = _ERFC_U
    t = np.cos(np.pi * (np.arange(2000) + 0.5) / 2000)
    x = 2 / (t * (hi - lo) + (hi + lo))
    g = [xi * math.erfc(xi) * math.exp(xi * xi) for xi in x]
    return [float(c) for c in chebyshev.cheb2poly(chebyshev.chebfit(t, g, 16))]


@cache
def _erf_constants() -> dict:
    """erf's series and erfc's fitted tail, as C expressions."""
    two_over_sqrt_pi = 2 / math.sqrt(math.pi)
    series = [two_over_sqrt_pi * (-1) ** k / (math.factorial(k) * (2 * k + 1))
              for k in range(13)]
    lo, hi = _ERFC_U
    return dict(erf_series=_horner(series, "x2"), erfc_poly=_horner(list(ERFC_TAIL), "t"),
                erfc_scale=(2 / (hi - lo)).hex(), erfc_shift=(-(hi + lo) / (hi - lo)).hex())


def source() -> str:
    """The C source of the math functions (with 2/pi's table)."""
    p1, p2, p3, twoopi, table = _constants()
    q1, q2, q3, q4 = _float_pio2_parts()
    twoopif = float(np.float32(float.fromhex(twoopi))).hex() + "f"
    return _SOURCE % dict(p1=p1, p2=p2, p3=p3, twoopi=twoopi, table=table, q1=q1, q2=q2,
                          q3=q3, q4=q4, twoopif=twoopif, **_erf_constants(),
                          rows=_TABLE_HI - _TABLE_LO + 1, lo=_TABLE_LO, hi=_TABLE_HI)


# Functions whose fast form covers only part of the range: a kernel using them also runs
# `fg_trig_large` on their arguments and reruns with the exact forms when it says so.
EXACT = {"fg_sinf_fast": "fg_sinf", "fg_cosf_fast": "fg_cosf"}

# Functions by name, for the renderer: float32 uses ours, float64 the C library's (exact,
# scalar: NumPy's float64 results are the C library's too).
FLOAT32 = {"exp": "fg_expf", "log": "fg_logf", "sin": "fg_sinf_fast", "cos": "fg_cosf_fast",
           "tanh": "fg_tanhf", "sigmoid": "fg_sigmoidf", "erf": "fg_erff", "erfc": "fg_erfcf"}
FLOAT64 = {"exp": "exp", "log": "log", "sin": "sin", "cos": "cos", "tanh": "tanh", "erf": "erf",
           "erfc": "erfc"}
