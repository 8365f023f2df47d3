"""Print the polynomial tables of the NumPy `erf`/`erfc` and `gammaln` in
src/fusegrad/ops/_special_numpy.py: Chebyshev interpolants computed at 50 digits with mpmath,
written in powers of t (the interval mapped onto [-1, 1]) so that NumPy evaluates them by
Horner's rule, lowest power first.

Run from the repository root: `python tools/gen_special_coefficients.py` (needs mpmath,
which PyTorch's sympy dependency brings). The pieces:

- `_ERF_SMALL`: erf(x) / x as a function of u = x*x on [0, 1/4] (|x| <= 1/2);
- `_ERFCX_PIECES`: g(x) = exp(x*x) erfc(x) on each of `_ERFCX_BREAKS`' intervals, and past
  the last break x g(x) as a function of s = (last break / x)**2 on [0, 1];
- `_LGAMMA_PIECES`: lgamma(y) / ((y - 1)(y - 2)) on [1, 2] and on [2, 3] (dividing out the
  zeros keeps lgamma's relative accuracy next to them);
- `_I1_LARGE`: sqrt(x) exp(-x) i1(x) for x >= 8 as a function of s = 8 / x on [0, 1].
"""

from __future__ import annotations

import mpmath as mp

mp.mp.dps = 50
DEGREE = 16
SMALL_DEGREE = 12
LGAMMA_DEGREE = 20
I1_DEGREE = 28
BREAKS = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0)


def chebyshev(f, a, b, degree: int) -> list:
    """Chebyshev coefficients of f on [a, b], interpolating at degree + 1 Gauss nodes."""
    n = degree + 1
    nodes = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)]
    values = [f((b - a) / 2 * t + (b + a) / 2) for t in nodes]
    coefficients = [2 * mp.fsum(values[k] * mp.cos(mp.pi * j * (k + mp.mpf(1) / 2) / n)
                                for k in range(n)) / n for j in range(n)]
    coefficients[0] /= 2
    return coefficients


def power_basis(coefficients: list) -> list:
    """The Chebyshev series sum c_k T_k(t) as coefficients of 1, t, t**2, ..."""
    out = [mp.mpf(0)] * len(coefficients)
    previous, current = [mp.mpf(1)], [mp.mpf(0), mp.mpf(1)]  # T_0, T_1
    for k, c in enumerate(coefficients):
        if k >= 2:  # T_k = 2 t T_(k-1) - T_(k-2)
            following = [mp.mpf(0)] + [2 * v for v in current]
            for i, v in enumerate(previous):
                following[i] -= v
            previous, current = current, following
        polynomial = previous if k == 0 else current
        for i, v in enumerate(polynomial):
            out[i] += c * v
    return out


def fit(f, a, b, degree: int) -> list:
    """Power coefficients in t of f's Chebyshev interpolant on [a, b]."""
    return power_basis(chebyshev(f, a, b, degree))


def erfcx(x):
    """exp(x*x) erfc(x)."""
    return mp.exp(x * x) * mp.erfc(x)


def erf_over_x(u):
    """erf(sqrt u) / sqrt u, 2/sqrt(pi) at u = 0."""
    if u == 0:
        return 2 / mp.sqrt(mp.pi)
    return mp.erf(mp.sqrt(u)) / mp.sqrt(u)


def tail(s):
    """x exp(x*x) erfc(x) at x = last break / sqrt(s); 1/sqrt(pi) at s = 0."""
    if s == 0:
        return 1 / mp.sqrt(mp.pi)
    x = mp.mpf(BREAKS[-1]) / mp.sqrt(s)
    return x * erfcx(x)


def lgamma_over_zeros(y):
    """lgamma(y) / ((y - 1)(y - 2)), its limits at 1 and 2."""
    if y in (1, 2):  # l'Hopital: lgamma'(y) over the other factor
        return mp.diff(mp.loggamma, y) / ((y - 2) if y == 1 else (y - 1))
    return mp.loggamma(y) / ((y - 1) * (y - 2))


def i1_large(s):
    """sqrt(x) exp(-x) i1(x) at x = 8 / s; 1/sqrt(2 pi) at s = 0."""
    if s == 0:
        return 1 / mp.sqrt(2 * mp.pi)
    x = 8 / s
    return mp.sqrt(x) * mp.exp(-x) * mp.besseli(1, x)


def row(coefficients: list, indent: str) -> str:
    """Coefficients as Python floats, three a line."""
    numbers = [repr(float(c)) for c in coefficients]
    lines = [", ".join(numbers[i:i + 3]) for i in range(0, len(numbers), 3)]
    return (",\n" + indent).join(lines)


def main() -> None:
    """Print the tables as Python source."""
    small = fit(erf_over_x, mp.mpf(0), mp.mpf(1) / 4, SMALL_DEGREE)
    print("_ERF_SMALL = (" + row(small, " " * 14) + ")")
    pieces = [fit(erfcx, mp.mpf(a), mp.mpf(b), DEGREE)
              for a, b in zip(BREAKS[:-1], BREAKS[1:])]
    pieces.append(fit(tail, mp.mpf(0), mp.mpf(1), DEGREE))
    print("_ERFCX_PIECES = (")
    for piece in pieces:
        print("    (" + row(piece, " " * 5) + "),")
    print(")")
    print("_LGAMMA_PIECES = (")
    for a in (1, 2):
        piece = fit(lgamma_over_zeros, mp.mpf(a), mp.mpf(a + 1), LGAMMA_DEGREE)
        print("    (" + row(piece, " " * 5) + "),")
    print(")")
    large = fit(i1_large, mp.mpf(0), mp.mpf(1), I1_DEGREE)
    print("_I1_LARGE = (" + row(large, " " * 13) + ")")


if __name__ == "__main__":
    main()
