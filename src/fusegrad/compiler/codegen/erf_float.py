"""erf of float32 values computed in float, for generated kernels: `fg_erff_float`.

The math library's `fg_erff` (`ops/_mathlib.py`, shared with eager) computes in double and
evaluates both of its forms (a series below 1, `1 - e^(-x^2) g(1/x)` above) for every
element: half the vector lanes of float, two conversions, a division and an exponential.
GELU's erf is the largest kernel of a compiled transformer step, so generated code uses
this form instead: one polynomial evaluated in float, its coefficients selected by the
range of |x| (three sets: selects, which gcc vectorises; a table lookup it does not).

- |x| < 0.625: erf(x) = x (C0 + s Q(s)) with s = x^2 and C0 = 2/sqrt(pi) in two floats,
  evaluated as `fmaf(x, C0h, x * (C0l + s Q(s)))` so the leading product is rounded once.
- 0.625 <= |x| < 1.5 and 1.5 <= |x| < 4: erf(x) = E + (t P(t)) with t = |x| - c around the
  range's centre c and E = erf(c) in two floats, `fmaf(1, Eh, El + t P(t))`.
- |x| >= 4 gives 1 (erf(3.92) already rounds to 1), with x's sign (`copysignf`, so -0.0
  stays -0.0); NaN stays NaN.

Accuracy (checked over every float of [0, 4.5] against double `erf`): within 1 ulp of the
exact value, where `fg_erff` is within 0.5 ulp; the two differ on 0.7% of the floats of
that range, by one ulp. The correction terms are at most a third of the result, so their
float rounding costs at most a fraction of an ulp. The coefficients are least-squares fits
at Chebyshev nodes, each rounded to float before the next is fitted (`fit`), stored here.
"""

from __future__ import annotations

import math

import numpy as np

# (low end of |x|, centre, degree) per range; the first range is the series in s = x^2.
RANGES = ((0.0, 0.0, 7), (0.625, 1.0, 12), (1.5, 2.75, 12))
_TOP = 4.0

# `fit()`'s result per range: (erf's leading float, its remainder, coefficients t^0 first).
_HEX = (
    ("0x1.20dd76p+0", "-0x1.f7ac92p-25", (
        "-0x1.812746p-2", "0x1.ce2e1ap-4", "-0x1.b7baeap-6", "0x1.40a3f2p-8",
        "0x1.3faf3ap-10", "-0x1.bfc42ap-8", "0x1.84665cp-7", "-0x1.097566p-7")),
    ("0x1.af767ap-1", "0x1.d04222p-27", (
        "0x1.a911f0p-2", "-0x1.a911f0p-2", "0x1.1b61e2p-3", "0x1.1b5fe0p-4",
        "-0x1.1b8b8ap-4", "0x1.3235c2p-8", "0x1.01dabcp-6", "-0x1.7ef174p-8",
        "-0x1.62b9f8p-8", "0x1.313faap-7", "0x1.7d9c40p-8", "-0x1.6a66e6p-6",
        "0x1.7c271ap-7")),
    ("0x1.fff2d0p-1", "-0x1.3eeb0ap-27", (
        "0x1.3360c0p-11", "-0x1.a6a3e8p-10", "0x1.69d00ap-9", "-0x1.ab173cp-9",
        "0x1.692df0p-9", "-0x1.b1fe70p-10", "0x1.53281ap-11", "-0x1.86c8ccp-14",
        "-0x1.30ee2ep-14", "0x1.f6aae8p-15", "-0x1.e94b98p-17", "-0x1.13b6e0p-18",
        "0x1.2b84eap-19")),
)
COEFFICIENTS = tuple((float.fromhex(h), float.fromhex(lo), tuple(map(float.fromhex, cs)))
                     for h, lo, cs in _HEX)


def _to_float(v: float) -> float:
    return float(np.float32(v))


def _fit_rounded(fn, lo: float, hi: float, degree: int, centre: float) -> list[float]:
    """Coefficients (t^0 first, t = x - centre) of a least-squares fit of `fn` on [lo, hi]
    at 4000 Chebyshev nodes, each rounded to float and the later ones refitted to what the
    rounding left, so the rounded polynomial stays close to the fit."""
    n = 4000
    x = (np.cos(np.pi * (np.arange(n) + 0.5) / n) * (hi - lo) + (hi + lo)) / 2
    t = x - centre
    y = np.array([fn(v) for v in x])
    powers = np.vander(t, degree + 1, increasing=True)
    fixed: list[float] = []
    for k in range(degree + 1):
        rest = y - powers[:, :k] @ np.array(fixed) if fixed else y
        c, *_ = np.linalg.lstsq(powers[:, k:], rest, rcond=None)
        fixed.append(_to_float(c[0]))
    return fixed


def fit() -> list[tuple[float, float, list[float]]]:
    """The coefficients of every range, fitted afresh (takes about a second)."""
    c0 = 2 / math.sqrt(math.pi)
    out = []
    bounds = [r[0] for r in RANGES[1:]] + [_TOP]
    for (lo, centre, degree), hi in zip(RANGES, bounds):
        if lo == 0.0:
            def series(s: float) -> float:
                x = math.sqrt(s)
                return -c0 / 3 + s * c0 / 10 if s < 1e-10 else (math.erf(x) / x - c0) / s

            head = c0
            coefficients = _fit_rounded(series, 0.0, hi * hi, degree, 0.0)
        else:
            head = math.erf(centre)

            def slope(x: float, centre=centre, head=head) -> float:
                if abs(x - centre) < 1e-7:
                    return c0 * math.exp(-centre * centre)
                return (math.erf(x) - head) / (x - centre)

            coefficients = _fit_rounded(slope, lo, hi, degree, centre)
        lead = _to_float(head)
        out.append((lead, _to_float(head - lead), coefficients))
    return out


def _literal(v: float) -> str:
    return f"{v.hex()}f" if v else "0.0f"


def _select(values: list[float]) -> str:
    """`k == 0 ? v0 : k == 1 ? v1 : v2`: a blend per range, vectorised."""
    text = _literal(values[-1])
    for k in range(len(values) - 2, -1, -1):
        text = f"k == {k} ? {_literal(values[k])} : {text}"
    return f"({text})"


def source() -> str:
    """The C function `float fg_erff_float(float x)` (needs math.h and stdint.h)."""
    degree = max(len(c) for _, _, c in COEFFICIENTS) - 1
    padded = [list(c) + [0.0] * (degree + 1 - len(c)) for _, _, c in COEFFICIENTS]
    ranges = " + ".join(f"(int32_t)(ac >= {_literal(lo)})" for lo, _, _ in RANGES[1:])
    lines = [
        "static inline float fg_erff_float(float x) {",
        "  float a = fabsf(x);",
        f"  float ac = a > {_literal(_TOP)} ? {_literal(_TOP)} : a;",
        f"  int32_t k = {ranges};",
        f"  float t = k == 0 ? ac * ac : ac - {_select([r[1] for r in RANGES])};",
        "  float m = k == 0 ? ac : 1.0f;",
        f"  float p = {_select([c[degree] for c in padded])};",
    ]
    for j in range(degree - 1, -1, -1):
        lines.append(f"  p = fmaf(p, t, {_select([c[j] for c in padded])});")
    lines += [
        f"  float v = fmaf(t, p, {_select([lo for _, lo, _ in COEFFICIENTS])});",
        f"  float res = fmaf(m, {_select([h for h, _, _ in COEFFICIENTS])}, m * v);",
        "  res = res > 1.0f ? 1.0f : res;",
        "  res = copysignf(res, x);",
        "  return x != x ? x : res;",
        "}",
    ]
    return "\n".join(lines) + "\n"
