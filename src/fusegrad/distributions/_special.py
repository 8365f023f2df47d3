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


def sample_standard_gamma(alpha: np.ndarray, normal, uniform) -> np.ndarray:
    """Gamma(alpha, 1) draws by Marsaglia and Tsang's squeeze method; `normal(n)` and
    `uniform(n)` supply standard draws (from fusegrad's generator). For alpha < 1 a draw of
    Gamma(alpha + 1) is scaled by u^(1 / alpha)."""
    a = np.asarray(alpha, np.float64)
    flat = a.reshape(-1)
    boost = flat < 1
    d = np.where(boost, flat + 1, flat) - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * d)
    out = np.empty_like(flat)
    todo = np.arange(flat.size)
    while todo.size:
        z = normal(todo.size)
        u = uniform(todo.size)
        v = (1 + c[todo] * z) ** 3
        with np.errstate(invalid="ignore", divide="ignore"):
            ok = (v > 0) & (np.log(u) < 0.5 * z * z + d[todo] - d[todo] * v
                            + d[todo] * np.log(np.where(v > 0, v, 1.0)))
        out[todo[ok]] = d[todo[ok]] * v[ok]
        todo = todo[~ok]
    if boost.any():
        u = uniform(int(boost.sum()))
        out[boost] = out[boost] * u ** (1.0 / flat[boost])
    return out.reshape(a.shape)
