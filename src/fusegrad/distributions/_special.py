"""NumPy special functions behind the implicit reparameterisation of Gamma and Dirichlet draws.

A draw x from a distribution with CDF F(x; a) moves with its parameter as dx/da =
-(dF/da) / f(x; a) (F held fixed). For the Gamma, F is the regularised lower incomplete gamma
function P(a, x); for a Dirichlet component, its Beta marginal's regularised incomplete beta
function. Both are evaluated here in float64 (series and continued fractions)
and differentiated in `a` by central differences, whose error is far below float32 precision.
"""

from __future__ import annotations

import math

import numpy as np

_lgamma = np.vectorize(math.lgamma, otypes=[np.float64])
_ITERS = 500
_TINY = 1e-300


def _lentz(coeff, n_terms: int, shape) -> np.ndarray:
    """Evaluate b0 + a1/(b1 + a2/(b2 + ...)) by the modified Lentz method; `coeff(i)`
    returns (a_i, b_i) arrays, i >= 1, and (None, b0) for i = 0."""
    _, b0 = coeff(0)
    f = np.where(b0 == 0, _TINY, b0) * np.ones(shape)
    c, d = f.copy(), np.zeros(shape)
    for i in range(1, n_terms):
        a, b = coeff(i)
        d = b + a * d
        d = np.where(np.abs(d) < _TINY, _TINY, d)
        c = b + a / c
        c = np.where(np.abs(c) < _TINY, _TINY, c)
        d = 1.0 / d
        f = f * c * d
    return f


def _gamma_p_q(a: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(P(a, x), use_q): the lower regularised incomplete gamma by its series where x < a + 1,
    and the upper one Q = 1 - P by its continued fraction elsewhere (flagged by use_q)."""
    use_q = x >= a + 1
    log_pre = a * np.log(x) - x - _lgamma(a)
    # Series: P = x^a e^-x / Gamma(a + 1) * sum x^n / ((a + 1) ... (a + n)).
    term = np.ones_like(a) / a
    total = term.copy()
    for n in range(1, _ITERS):
        term = term * x / (a + n)
        total = total + term
    p_series = np.exp(log_pre) * total
    # Continued fraction for Q: e^-x x^a / Gamma(a) * 1 / (x + 1 - a - 1*(1-a)/(x + 3 - a - ...)).

    def coeff(i):
        if i == 0:
            return None, x + 1 - a
        return -i * (i - a), x + 2 * i + 1 - a

    cf = _lentz(coeff, _ITERS, np.shape(x))
    q_cf = np.exp(log_pre) / cf
    return np.where(use_q, q_cf, p_series), use_q


def standard_gamma_grad(x: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """d x / d alpha for x ~ Gamma(alpha, 1), at fixed CDF value."""
    x = np.asarray(x, np.float64)
    a = np.asarray(alpha, np.float64)
    h = 1e-5 * np.maximum(a, 1e-3)
    hi, use_q = _gamma_p_q(a + h, x)
    lo, _ = _gamma_p_q(a - h, x)
    # Both evaluations take the same branch when h is small against |x - a - 1|; where they
    # do not, fall back to P for both.
    mixed = use_q != (x >= a - h + 1)
    if mixed.any():
        p_hi = np.where(use_q, 1 - hi, hi)
        lo_q = x >= a - h + 1
        p_lo = np.where(lo_q, 1 - lo, lo)
        dp_mixed = (p_hi - p_lo) / (2 * h)
    dp = (hi - lo) / (2 * h)
    dp = np.where(use_q, -dp, dp)
    if mixed.any():
        dp = np.where(mixed, dp_mixed, dp)
    log_pdf = (a - 1) * np.log(x) - x - _lgamma(a)
    return -dp / np.exp(log_pdf)


def _betainc(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Regularised incomplete beta I_x(a, b), by its continued fraction on the side where it
    converges fast (x < (a + 1) / (a + b + 2)), and the symmetry I_x(a, b) = 1 - I_1-x(b, a)."""
    swap = x >= (a + 1) / (a + b + 2)
    aa, bb, xx = np.where(swap, b, a), np.where(swap, a, b), np.where(swap, 1 - x, x)
    log_front = (aa * np.log(xx) + bb * np.log1p(-xx) - (_lgamma(aa) + _lgamma(bb)
                 - _lgamma(aa + bb)) - np.log(aa))

    def coeff(i):
        if i == 0:
            return None, np.ones_like(xx)
        m = i // 2
        if i % 2 == 0:
            a_i = m * (bb - m) * xx / ((aa + 2 * m - 1) * (aa + 2 * m))
        else:
            a_i = -(aa + m) * (aa + bb + m) * xx / ((aa + 2 * m) * (aa + 2 * m + 1))
        return a_i, np.ones_like(xx)

    cf = _lentz(coeff, 2 * _ITERS, np.shape(xx))
    value = np.exp(log_front) / cf
    return np.where(swap, 1 - value, value)


def dirichlet_grad(x: np.ndarray, alpha: np.ndarray, total: np.ndarray) -> np.ndarray:
    """The implicit-reparameterisation factor of a Dirichlet component x (PyTorch's
    `_dirichlet_grad`): d x / d alpha of its Beta(alpha, total - alpha) marginal, taken with
    the other parameter held fixed, divided by 1 - x. The Dirichlet backward multiplies it by
    (g - sum(x * g)), which moves the remaining components to keep the sum at one."""
    x, a, t = (np.asarray(v, np.float64) for v in (x, alpha, total))
    b = t - a
    h = 1e-5 * np.maximum(a, 1e-3)
    di = (_betainc(a + h, b, x) - _betainc(a - h, b, x)) / (2 * h)
    log_pdf = ((a - 1) * np.log(x) + (b - 1) * np.log1p(-x)
               - (_lgamma(a) + _lgamma(b) - _lgamma(t)))
    return -di / np.exp(log_pdf) / (1 - x)


_F32 = np.float32
_THIRD = _F32(1.0) / _F32(3.0)  # PyTorch's `1.0f / 3.0f`
_SQUEEZE = float(_F32(0.0331))  # and its `0.0331f`


def sample_gamma(alpha, draws, single: bool) -> float:
    """One Gamma(alpha, 1) draw as PyTorch's `sample_gamma`: Marsaglia and Tsang's squeeze
    method, alpha below 1 boosted by a uniform drawn first; `draws` a `SerialDraws`.
    `single`: alpha is a float32 value, whose boost and `d` PyTorch computes in float32
    (the rest in double)."""
    scale = 1.0
    a = _F32(alpha) if single else float(alpha)
    if a < 1.0:
        if a == 0.0:
            return 0.0
        scale *= math.pow(1.0 - draws.uniform(), float(_F32(1.0) / a) if single else 1.0 / a)
        a = a + _F32(1.0) if single else a + 1.0
    d = float(a - _THIRD) if single else a - float(_THIRD)
    c = 1.0 / math.sqrt(9.0 * d)
    while True:
        while True:
            x = draws.normal()
            y = 1.0 + c * x
            if y > 0:
                break
        v = y * y * y
        u = 1.0 - draws.uniform()
        xx = x * x
        if u < 1.0 - _SQUEEZE * xx * xx:
            return scale * d * v
        if math.log(u) < 0.5 * xx + d * (1.0 - v + math.log(v)):
            return scale * d * v


