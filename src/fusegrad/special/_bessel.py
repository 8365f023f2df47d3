"""NumPy kernels (float64) of torch.special's Bessel functions of the second kind Y0, Y1, the
modified Bessel functions I0, I1, K0, K1 (and exp(x) K0, exp(x) K1) and the Airy function
Ai, with PyTorch's values at the edges of their domains (x = 0, x < 0, infinities, NaN).

Each is computed to about 1e-15 relative (absolute near the zeros of Y and Ai) by means
chosen for the range: power series for small arguments; for moderate ones, integral
representations evaluated by quadratures that converge exponentially for these integrands
(the trapezoidal rule on even, or periodic, analytic integrands; Gauss-Legendre elsewhere);
asymptotic expansions where their smallest terms are below rounding.
"""

from __future__ import annotations

import math

import numpy as np

_EULER = 0.57721566490153286061
_TERMS = 40
# Harmonic numbers H_k and 1 / k!^2, 1 / (k! (k+1)!) for the power series.
_HARMONIC = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, _TERMS))])
_INV_FACT2 = np.array([1.0 / math.factorial(k) ** 2 for k in range(_TERMS)])
_INV_FACT_FACT1 = np.array([1.0 / (math.factorial(k) * math.factorial(k + 1))
                            for k in range(_TERMS)])
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(200)


def _gauss(f, lo, hi):
    """Gauss-Legendre quadrature of f over [lo, hi] (arrays of the elements' limits); f takes
    the nodes as an (elements, nodes) array."""
    half = (hi - lo)[:, None] / 2
    t = lo[:, None] + half * (_GL_NODES[None, :] + 1)
    return (f(t) * _GL_WEIGHTS[None, :]).sum(-1) * half[:, 0]


def _power_sums(u, coefficients, alternate: bool):
    """sum_k c_k (-u)^k (or u^k) for each element of u."""
    k = np.arange(len(coefficients))
    base = -u if alternate else u
    return (coefficients[None, :] * base[:, None] ** k[None, :]).sum(-1)


# ---------------------------------------------------------------- I0, I1, K0, K1


def _scaled_i(x, order: int):
    """exp(-|x|) I_order(|x|) = (1/pi) int_0^pi exp(|x| (cos t - 1)) cos(order t) dt; the
    integrand is even and 2 pi periodic, so the trapezoidal rule converges exponentially."""
    a = np.abs(x)
    n = 64 + int(12 * math.sqrt(float(a.max(initial=0.0))))
    t = np.linspace(0.0, math.pi, n + 1)
    w = np.full(n + 1, math.pi / n)
    w[[0, -1]] /= 2
    vals = np.exp(a[:, None] * (np.cos(t)[None, :] - 1)) * np.cos(order * t)[None, :]
    return (vals * w).sum(-1) / math.pi


def _i_values(x, order: int):
    # The power series (all terms positive) up to |x| = 15, the integral beyond.
    out = np.full(x.shape, np.nan)
    small = np.abs(x) <= 15
    if small.any():
        v = x[small]
        u = v * v / 4
        out[small] = (_power_sums(u, _INV_FACT2, False) if order == 0
                      else v / 2 * _power_sums(u, _INV_FACT_FACT1, False))
    # Beyond |x| = 750 the value overflows every float type (exp(|x|) alone does), and the
    # quadrature's nodes would grow with sqrt(|x|) (1e30: 1.2e16 of them).
    big = (np.abs(x) > 15) & (np.abs(x) <= 750)
    if big.any():
        v = x[big]
        with np.errstate(over="ignore", invalid="ignore"):
            val = _scaled_i(v, order) * np.exp(np.abs(v))
        out[big] = np.where(v < 0, -val, val) if order == 1 else val
    huge = (np.abs(x) > 750) & np.isfinite(x)
    out[huge] = np.where(x[huge] < 0, -np.inf, np.inf) if order == 1 else np.inf
    return out


def _scaled_k(x, nu: float):
    """exp(x) K_nu(x) = int_0^inf exp(-x (cosh t - 1)) cosh(nu t) dt for x > 0 (moderate
    and large x): the integrand is even in t, so the trapezoidal rule converges
    exponentially; it is cut where it has fallen below exp(-750)."""
    top = np.arccosh(1 + 750 / x)
    n = 512
    s = np.linspace(0.0, 1.0, n + 1)
    t = top[:, None] * s[None, :]
    vals = np.exp(-x[:, None] * (np.cosh(t) - 1)) * np.cosh(nu * t)
    vals[:, [0, -1]] /= 2
    return vals.sum(-1) * top / n


def _k_small(x):
    """(K0, K1) for 0 < x <= 1: K0's series, K1 from the Wronskian I0 K1 + I1 K0 = 1/x."""
    u = x * x / 4
    i0 = _power_sums(u, _INV_FACT2, False)
    i1 = x / 2 * _power_sums(u, _INV_FACT_FACT1, False)
    k0 = -(np.log(x / 2) + _EULER) * i0 + _power_sums(u, _HARMONIC * _INV_FACT2, False)
    return k0, (1 / x - i1 * k0) / i0


def k_values(x, order: int, scaled: bool):
    """K_order(x) (exp(x) K_order(x) when `scaled`): inf at 0, NaN below 0 or for NaN, 0 at
    +inf."""
    out = np.full(x.shape, np.nan)
    out[x == 0] = np.inf
    out[x == np.inf] = 0.0
    small = (x > 0) & (x <= 1)
    if small.any():
        v = x[small]
        k = _k_small(v)[order]
        out[small] = k * np.exp(v) if scaled else k
    big = (x > 1) & (x <= 50)
    if big.any():
        v = x[big]
        k = _scaled_k(v, float(order))
        out[big] = k if scaled else k * np.exp(-v)
    # (the quadrature's cut, where its integrand falls below exp(-750), loses digits as x
    # grows: 8e-8 relative at 1e10, all of them at 1e30)
    far = (x > 50) & np.isfinite(x)
    if far.any():
        v = x[far]
        k = _scaled_k_asymptotic(v, float(order))
        with np.errstate(under="ignore"):
            out[far] = k if scaled else k * np.exp(-v)
    return out


def _scaled_k_asymptotic(x, nu: float, terms: int = 30):
    """exp(x) K_nu(x) by its asymptotic expansion sqrt(pi / (2x)) sum_k a_k(nu) / x^k,
    a_k = prod_(j<=k) (4 nu^2 - (2j - 1)^2) / (8j): at x > 50 its terms fall far below
    rounding long before they grow again (30 of them: within an ulp of the exact value)."""
    mu = 4 * nu * nu
    term = np.ones_like(x)
    total = np.ones_like(x)
    for k in range(1, terms):
        term = term * (mu - (2 * k - 1) ** 2) / (8 * k * x)
        total = total + term
    return np.sqrt(np.pi / (2 * x)) * total


# ---------------------------------------------------------------- Y0, Y1


def _y_small(x, order: int):
    # The Neumann-series forms at small x (x < 2), psi(m) = -gamma + H_(m-1).
    u = x * x / 4
    log_term = np.log(x / 2)
    if order == 0:
        j0 = _power_sums(u, _INV_FACT2, True)
        rest = -_power_sums(u, _HARMONIC * _INV_FACT2, True)
        return 2 / np.pi * ((log_term + _EULER) * j0 + rest)
    j1 = x / 2 * _power_sums(u, _INV_FACT_FACT1, True)
    psi_sum = (-2 * _EULER + _HARMONIC + np.concatenate([_HARMONIC[1:], [np.nan]]))[:-1]
    series = _power_sums(u, psi_sum * _INV_FACT_FACT1[:-1], True)
    return -2 / (np.pi * x) + 2 / np.pi * log_term * j1 - x / (2 * np.pi) * series


def _y_mid(x, order: int):
    """Y_n(x) = (1/pi) int_0^pi sin(x sin t - n t) dt
                - (1/pi) int_0^inf (e^(n t) + (-1)^n e^(-n t)) e^(-x sinh t) dt."""
    zeros = np.zeros_like(x)
    first = _gauss(lambda t: np.sin(x[:, None] * np.sin(t) - order * t), zeros,
                   zeros + np.pi)
    top = np.arcsinh(750 / x)
    sign = 1.0 if order % 2 == 0 else -1.0
    second = _gauss(lambda t: (np.exp(order * t) + sign * np.exp(-order * t))
                    * np.exp(-x[:, None] * np.sinh(t)), zeros, top)
    return (first - second) / np.pi


def _hankel_terms(order: int, count: int = 40):
    a = [1.0]
    for k in range(1, count):
        a.append(a[-1] * (4 * order * order - (2 * k - 1) ** 2) / (8 * k))
    return a


def _y_large(x, order: int):
    # Hankel's expansion: Y = sqrt(2 / (pi x)) (P sin(chi) + Q cos(chi)).
    a = _hankel_terms(order)
    p = sum((-1) ** k * a[2 * k] / x ** (2 * k) for k in range(len(a) // 2))
    q = sum((-1) ** k * a[2 * k + 1] / x ** (2 * k + 1) for k in range(len(a) // 2 - 1))
    chi = x - (2 * order + 1) * np.pi / 4
    return np.sqrt(2 / (np.pi * x)) * (p * np.sin(chi) + q * np.cos(chi))


def y_values(x, order: int):
    """Y_order(x): -inf at 0, NaN below 0, at infinity and for NaN (as PyTorch's)."""
    out = np.full(x.shape, np.nan)
    out[x == 0] = -np.inf
    for lo, hi, fn in ((0.0, 2.0, _y_small), (2.0, 30.0, _y_mid), (30.0, np.inf, _y_large)):
        part = (x > lo) & (x <= hi) & np.isfinite(x)
        if part.any():
            out[part] = fn(x[part], order)
    return out


# ---------------------------------------------------------------- Ai

_AI0 = 0.355028053887817239260  # Ai(0)
_AI1 = 0.258819403792806798405  # -Ai'(0)


def _airy_series(x):
    """Maclaurin series Ai = Ai(0) f - |Ai'(0)| g for |x| <= 2."""
    f = np.ones_like(x)
    g = x.copy()
    tf, tg = np.ones_like(x), x.copy()
    x3 = x ** 3
    for k in range(1, 40):
        tf = tf * x3 / ((3 * k - 1) * (3 * k))
        tg = tg * x3 / ((3 * k) * (3 * k + 1))
        f = f + tf
        g = g + tg
    return _AI0 * f - _AI1 * g


def _airy_positive(x):
    # Ai(x) = sqrt(x / 3) K_(1/3)(zeta) / pi, zeta = 2/3 x^(3/2).
    zeta = 2.0 / 3.0 * x ** 1.5
    with np.errstate(under="ignore"):
        return np.sqrt(x / 3) / np.pi * _scaled_k(zeta, 1.0 / 3.0) * np.exp(-zeta)


def _airy_negative_mid(x):
    # Ai(-z) = sqrt(z)/3 (J_(1/3)(zeta) + J_(-1/3)(zeta)), by the integrals of Schlaefli.
    z = -x
    zeta = 2.0 / 3.0 * z ** 1.5
    zeros = np.zeros_like(z)
    first = _gauss(lambda t: 2 * np.cos(t / 3) * np.cos(zeta[:, None] * np.sin(t)), zeros,
                   zeros + np.pi) / np.pi
    top = np.arcsinh(750 / zeta)
    second = _gauss(lambda t: 2 * np.sinh(t / 3) * np.exp(-zeta[:, None] * np.sinh(t)),
                    zeros, top) * math.sin(math.pi / 3) / np.pi
    return np.sqrt(z) / 3 * (first + second)


def _airy_negative_large(x):
    # Ai(-z) ~ (sin(zeta + pi/4) P - cos(zeta + pi/4) Q) / (sqrt(pi) z^(1/4)).
    z = -x
    zeta = 2.0 / 3.0 * z ** 1.5
    u = [1.0]
    for k in range(1, 30):
        u.append(u[-1] * (6 * k - 5) * (6 * k - 3) * (6 * k - 1) / ((2 * k - 1) * 216 * k))
    p = sum((-1) ** k * u[2 * k] / zeta ** (2 * k) for k in range(15))
    q = sum((-1) ** k * u[2 * k + 1] / zeta ** (2 * k + 1) for k in range(14))
    phase = zeta + np.pi / 4
    return (np.sin(phase) * p - np.cos(phase) * q) / (np.sqrt(np.pi) * z ** 0.25)


def airy_values(x):
    """Ai(x); NaN at +-inf and for NaN (as PyTorch's)."""
    out = np.full(x.shape, np.nan)
    for cond, fn in (((x >= -2) & (x <= 2), _airy_series), ((x > 2) & np.isfinite(x),
                                                             _airy_positive),
                     ((x < -2) & (x >= -10), _airy_negative_mid),
                     ((x < -10) & np.isfinite(x), _airy_negative_large)):
        if cond.any():
            out[cond] = fn(x[cond])
    return out


def modified_i_values(x, order: int):
    """I_order(x) (order 0 even, order 1 odd); NaN at +-inf and for NaN (as PyTorch's)."""
    return _i_values(x, order)
