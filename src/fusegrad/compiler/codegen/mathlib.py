"""C source of the float32 transcendental functions kernels call: `fg_expf`, `fg_logf`,
`fg_sinf`, `fg_cosf`, `fg_tanhf`, `fg_sigmoidf`.

Why our own: gcc vectorises libm's `expf`/`sinf` only under `-ffast-math`, whose
finite-math-only assumption breaks NaN/Inf. These are branch-free (every special case is a
select), so gcc vectorises loops calling them under plain `-O3 -fno-math-errno
-fno-trapping-math`, and they keep IEEE results for NaN, +-Inf, -0.0 and denormals.

Each rounds to float once, from a double: exp's 2^n scaling then needs no care near
overflow or in the denormal range (the double result rounds to float's inf or denormal
correctly), log's input is never denormal as a double. exp and the fast sin/cos evaluate
their polynomials in float (16 lanes per AVX-512 vector rather than 8) and only the terms
that decide the last bit in double; log, tanh and sigmoid compute in double.

sin/cos reduce |x| < 2^50 by a three-part pi/2 (Cody-Waite with fma). Larger finite |x| need
2/pi's bits scaled by the exponent (a table, as Payne-Hanek): a gather that would slow every
call, so kernels call the `_fast` forms, OR `fg_trig_large` of each argument into a flag, and
when it is set run again with `fg_sinf`/`fg_cosf`, which reduce every float argument exactly
enough for float results.
"""

from __future__ import annotations

from fractions import Fraction
from functools import cache

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

/* e^x: the reduction and the polynomial in float (exact: n ln2 in two parts, the first with
   few bits), the sum 1 + r + r^2 p and the 2^n scaling in double, rounded once. */
static inline float fg_expf(float x) {
  float xc = x < -104.0f ? -104.0f : x;
  xc = xc > 89.0f ? 89.0f : xc;
  float n = rintf(xc * 0x1.715476p+0f);
  float r = fmaf(n, -0x1.63p-1f, xc);
  r = fmaf(n, 0x1.bd0106p-13f, r);
  float p = 1.9875691500e-4f;
  p = fmaf(p, r, 1.3981999507e-3f);
  p = fmaf(p, r, 8.3334519073e-3f);
  p = fmaf(p, r, 4.1665795894e-2f);
  p = fmaf(p, r, 1.6666665459e-1f);
  p = fmaf(p, r, 5.0000001201e-1f);
  double y = 1.0 + ((double)r + (double)(p * (r * r)));
  uint64_t scale = (uint64_t)((int64_t)(int32_t)n + 1023) << 52;
  float res = (float)(y * fg_as_double(scale));
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

/* The reduction for |x| < 2^50 only; kernels run it and, if any argument needed more
   (`fg_trig_large`), run again with the full reduction. */
static inline double fg_reduce_pio2_fast(float xf, double *q) {
  double x = (double)xf;
  double n = rint(x * %(twoopi)s);
  double r = fma(n, -%(p1)s, x);
  r = fma(n, -(%(p2)s), r);
  r = fma(n, -(%(p3)s), r);
  *q = n - 4.0 * floor(n * 0.25);
  return r;
}

static inline int fg_trig_large(float x) {
  float ax = fabsf(x);
  return ax >= 0x1p50f && ax <= 0x1.fffffep+127f;
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

/* sin and cos of the reduced argument: the leading terms in double, the rest of each
   Taylor series in float (it is at most a tenth of the result, so float's rounding stays far
   below the result's last bit). */
static inline void fg_sincos_fast(float xf, double *s, double *c, double *q) {
  double rd = fg_reduce_pio2_fast(xf, q);
  float r = (float)rd;
  float r2 = r * r;
  float ps = -1.0f / 39916800.0f;
  ps = fmaf(ps, r2, 1.0f / 362880.0f);
  ps = fmaf(ps, r2, -1.0f / 5040.0f);
  ps = fmaf(ps, r2, 1.0f / 120.0f);
  ps = fmaf(ps, r2, -1.0f / 6.0f);
  float pc = 1.0f / 479001600.0f;
  pc = fmaf(pc, r2, -1.0f / 3628800.0f);
  pc = fmaf(pc, r2, 1.0f / 40320.0f);
  pc = fmaf(pc, r2, -1.0f / 720.0f);
  pc = fmaf(pc, r2, 1.0f / 24.0f);
  double r2d = rd * rd;
  *s = rd + (double)(ps * r2 * r);
  *c = fma(-0.5, r2d, 1.0) + r2d * r2d * (double)pc;
}

static inline float fg_sinf_fast(float x) {
  double s, c, q;
  fg_sincos_fast(x, &s, &c, &q);
  double res = (q == 1.0 || q == 3.0) ? c : s;
  res = q >= 2.0 ? -res : res;
  float out = (float)res;
  return x == 0.0f ? x : out;  /* keeps -0.0 */
}

static inline float fg_cosf_fast(float x) {
  double s, c, q;
  fg_sincos_fast(x, &s, &c, &q);
  double res = (q == 1.0 || q == 3.0) ? s : c;
  res = (q == 1.0 || q == 2.0) ? -res : res;
  return (float)res;
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


def source() -> str:
    """The C source of the math functions (with 2/pi's table)."""
    p1, p2, p3, twoopi, table = _constants()
    return _SOURCE % dict(p1=p1, p2=p2, p3=p3, twoopi=twoopi, table=table,
                          rows=_TABLE_HI - _TABLE_LO + 1, lo=_TABLE_LO, hi=_TABLE_HI)


# Functions whose fast form covers only part of the range: a kernel using them also runs
# `fg_trig_large` on their arguments and reruns with the exact forms when it says so.
EXACT = {"fg_sinf_fast": "fg_sinf", "fg_cosf_fast": "fg_cosf"}

# Functions by name, for the renderer: float32 uses ours, float64 the C library's (exact,
# scalar: NumPy's float64 results are the C library's too).
FLOAT32 = {"exp": "fg_expf", "log": "fg_logf", "sin": "fg_sinf_fast", "cos": "fg_cosf_fast",
           "tanh": "fg_tanhf", "sigmoid": "fg_sigmoidf"}
FLOAT64 = {"exp": "exp", "log": "log", "sin": "sin", "cos": "cos", "tanh": "tanh"}
