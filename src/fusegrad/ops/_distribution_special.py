"""NumPy special functions behind Gamma and Dirichlet draws and their implicit
reparameterisation.

A draw x from a distribution with CDF F(x; a) moves with its parameter as dx/da =
-(dF/da) / f(x; a) (F held fixed). PyTorch evaluates that factor for the Gamma and for a
Dirichlet component's Beta marginal by series, saddle-point expansions and fitted rational
functions, accurate to about 1e-4 relative; the same approximations are used here so that
gradients through `rsample` agree with PyTorch's to rounding, not just to that accuracy.
"""

from __future__ import annotations

import math

import numpy as np

_F32 = np.float32


def _f(v: float) -> float:
    """A C `float` literal's value, as PyTorch's kernels compare doubles against them."""
    return float(np.float32(v))


def digamma(x: np.ndarray) -> np.ndarray:
    """Digamma by upward recurrence to x >= 10 and the asymptotic series (the method of
    PyTorch's `digamma_one`), with the reflection formula for negative x. A float32 `x` is
    stepped in float32 and the result rounded to float32, as PyTorch's float kernels do:
    its rounding matters where the Beta gradients subtract two nearby digammas."""
    x = np.array(x, copy=True)
    dt = x.dtype.type if x.dtype == np.float32 else np.float64
    x = x.astype(dt)
    neg = x < 0
    with np.errstate(all="ignore"):
        extra = np.where(neg, -np.pi / np.tan(np.pi * x.astype(np.float64)), 0.0)
        x = np.where(neg, dt(1) - x, x)
        acc = np.zeros(x.shape, np.float64)
        while True:
            low = x < 10
            if not low.any():
                break
            acc = np.where(low, acc - (dt(1) / np.where(low, x, dt(1))).astype(np.float64), acc)
            x = np.where(low, x + dt(1), x)
        xx = (x * x).astype(np.float64)
        z = 1.0 / xx
        series = z * (1 / 12 + z * (-1 / 120 + z * (1 / 252 + z * (-1 / 240 + z * (
            1 / 132 + z * (-691 / 32760 + z / 12))))))
        series = np.where(x < _f(1e17), series, 0.0)
        out = (acc + np.log(x).astype(np.float64) - (dt(0.5) / x).astype(np.float64)
               - series + extra)
        out = np.where(x == 10, acc + 2.25175258906672110764 + extra, out)
    bad = (x == 0) | (neg & (x == np.floor(x)))
    return np.where(bad, np.inf, out).astype(dt)


# The bivariate rational fit in (log(x / alpha), log(alpha)) of PyTorch's standard-gamma
# gradient: rows are the u^0, u^1, u^2 coefficients; columns p0..p3, q0..q3 in v.
_GAMMA_UV = np.array([
    [0.16009398, -0.094634809, 0.025146376, -0.0030648343,
     1, 0.32668115, 0.10406089, 0.0014179084],
    [0.53487893, 0.1298071, 0.065735949, -0.0015649758,
     0.16639465, 0.020070113, -0.0035938915, -0.00058392623],
    [0.040121004, -0.0065914022, -0.0026286047, -0.0013441777,
     0.017050642, -0.0021309326, 0.00085092367, -1.5247877e-07],
])


def standard_gamma_grad(x: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """d x / d alpha for x ~ Gamma(alpha, 1) at fixed CDF value, by PyTorch's approximations
    (so gradients agree with its to rounding): a Taylor series of the CDF for x < 0.8, a
    Rice saddle-point expansion for alpha > 8, and a rational fit elsewhere."""
    x, a = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(alpha, np.float64))
    with np.errstate(all="ignore"):
        # Taylor: P(a, x) = x^a sum_n (-x)^n / (n! (a + n)), differentiated in a.
        numer, denom = np.ones_like(x), a.copy()
        s1, s2 = numer / denom, numer / (denom * denom)
        for i in range(1, 6):
            numer = numer * (-x / i)
            denom = denom + 1
            s1 = s1 + numer / denom
            s2 = s2 + numer / (denom * denom)
        pow_xa = x ** a
        pdf = x ** (a - 1) * np.exp(-x)
        dcdf = (np.log(x) - digamma(a)) * pow_xa * s1 - pow_xa * s2
        small = -dcdf / pdf
        small = np.where(np.isnan(small), 0.0, small)
        # Rice saddle point, with a polynomial form near the mode where it is singular.
        near = (_f(0.9) * a <= x) & (x <= _f(1.1) * a)
        n1 = 1 + 24 * a * (1 + 12 * a)
        n2 = 1440 * (a * a) + 6 * x * (53 - 120 * x) - 65 * x * x / a + a * (107 + 3600 * x)
        near_val = n1 * n2 / (1244160 * (a * a) * (a * a))
        den = np.sqrt(8 * a)
        t2 = den / (a - x)
        t3 = (x - a - a * np.log(x / a)) ** -1.5
        t23 = np.where(x < a, t2 - t3, t2 + t3)
        t1 = np.log(x / a) * t23 - np.sqrt(2 / a) * (a + x) / ((a - x) * (a - x))
        stirling = 1 + 1 / (12 * a) * (1 + 1 / (24 * a))
        far_val = -stirling * (x * t1) / den
        large = np.where(near, near_val, far_val)
        # Rational fit.
        u, v = np.log(x / a), np.log(a)
        cv = [_GAMMA_UV[0, i] + u * (_GAMMA_UV[1, i] + u * _GAMMA_UV[2, i]) for i in range(8)]
        pp = cv[0] + v * (cv[1] + v * (cv[2] + v * cv[3]))
        qq = cv[4] + v * (cv[5] + v * (cv[6] + v * cv[7]))
        fit = np.exp(pp / qq)
    return np.where(x < _f(0.8), small, np.where(a > 8.0, large, fit))


# The rational correction of PyTorch's Dirichlet (Beta) gradient: [numerator|denominator]
# [power of u][power of a][coefficients of the cubic in b].
_BETA_C = np.array([
    [[[1.003668233, -0.01061107488, -0.0657888334, 0.01201642863],
      [0.6336835991, -0.3557432599, 0.05486251648, -0.001465281033],
      [-0.03276231906, 0.004474107445, 0.002429354597, -0.0001557569013]],
     [[0.221950385, -0.3187676331, 0.01799915743, 0.01074823814],
      [-0.2951249643, 0.06219954479, 0.01535556598, 0.001550077057],
      [0.02155310298, 0.004170831599, 0.001292462449, 6.976601077e-05]],
     [[-0.05980841433, 0.008441916499, 0.01085618172, 0.002319392565],
      [0.02911413504, 0.01400243777, -0.002721828457, 0.000751041181],
      [0.005900514878, -0.001936558688, -9.495446725e-06, 5.385558597e-05]]],
    [[[1, -0.02924021934, -0.04438342661, 0.007285809825],
      [0.6357567472, -0.3473456711, 0.05454656494, -0.002407477521],
      [-0.03301322327, 0.004845219414, 0.00231480583, -0.0002307248149]],
     [[0.5925320577, -0.1757678135, 0.01505928619, 0.000564515273],
      [0.1014815858, -0.06589186703, 0.01272886114, -0.0007316646956],
      [-0.007258481865, 0.001096195486, 0.0003934994223, -4.12701925e-05]],
     [[0.06469649321, -0.0236701437, 0.002902096474, -5.896963079e-05],
      [0.001925008108, -0.002869809258, 0.0008000589141, -6.063713228e-05],
      [-0.0003477407336, 6.959756487e-05, 1.097287507e-05, -1.650964693e-06]]],
])


def _beta_grad_alpha_small(x, a, b):
    # Taylor expansion of the Beta CDF's alpha-derivative about x = 0, in the inputs' own
    # precision as PyTorch's (its float32 rounding shows through the cancellations).
    dt = x.dtype.type
    factor = (digamma(a).astype(dt) - digamma(a + b).astype(dt)) - np.log(x)
    numer = np.ones_like(x)
    series = numer / a * (factor + 1 / a)
    for i in range(1, 11):
        numer = numer * (dt(i) - b) * x / dt(i)
        den = a + dt(i)
        series = series + numer / den * (factor + 1 / den)
    out = x * (1 - x) ** -b * series
    return np.where(np.isnan(out), 0.0, out)


def _beta_grad_beta_small(x, a, b):
    # Taylor expansion of the Beta CDF's beta-derivative about x = 0.
    dt = x.dtype.type
    factor = digamma(a + b).astype(dt) - digamma(b).astype(dt)
    numer, betas, dbetas = np.ones_like(x), np.ones_like(x), np.zeros_like(x)
    series = factor / a
    for i in range(1, 9):
        numer = numer * (-x / dt(i))
        dbetas = dbetas * (b - dt(i)) + betas
        betas = betas * (b - dt(i))
        series = series + numer / (a + dt(i)) * (dbetas + factor * betas)
    out = -(1 - x) ** (1 - b) * series
    return np.where(np.isnan(out), 0.0, out)


def _beta_grad_alpha_mid(x, a, b):
    # Rice saddle point for large alpha and beta, with a polynomial form near the mean.
    total = a + b
    mean = a / total
    std = np.sqrt(a * b / (total + 1)) / total
    near = (mean - 0.1 * std <= x) & (x <= mean + 0.1 * std)
    b2 = b * b
    poly = 47 * x * b2 * b2 + a * (
        (43 + 20 * (16 + 27 * b) * x) * b2 * b + a * (
            3 * (59 + 180 * b - 90 * x) * b2 + a * (
                (453 + 1620 * b * (1 - x) - 455 * x) * b + a * (
                    8 * (1 - x) * (135 * b - 11)))))
    pre_num = (1 + 12 * a) * (1 + 12 * b) / (total * total)
    pre_den = 12960 * a * a * a * b * b * (1 + 12 * total)
    near_val = pre_num / (1 - x) * poly / pre_den
    prefactor = -x / np.sqrt(2 * a * b / total)
    stirling = ((1 + 1 / (12 * a) + 1 / (288 * a * a)) * (1 + 1 / (12 * b) + 1 / (288 * b * b))
                / (1 + 1 / (12 * total) + 1 / (288 * total * total)))
    axbx = a * (x - 1) + b * x
    t1 = ((2 * (a * a) * (x - 1) + a * b * (x - 1) - x * b2)
          / (np.sqrt(2 * a / b) * total ** 1.5 * axbx * axbx))
    t2 = 0.5 * np.log(a / (total * x))
    t3 = np.sqrt(8 * a * b / total) / (b * x + a * (x - 1))
    t4 = (b * np.log(b / (total * (1 - x))) + a * np.log(a / (total * x))) ** -1.5
    far_val = stirling * prefactor * (t1 + t2 * (t3 + np.where(x < mean, t4, -t4)))
    return np.where(near, near_val, far_val)


def dirichlet_grad(x: np.ndarray, alpha: np.ndarray, total: np.ndarray) -> np.ndarray:
    """The implicit-reparameterisation factor of a Dirichlet component x (PyTorch's
    `_dirichlet_grad`): d x / d alpha of its Beta(alpha, total - alpha) marginal divided by
    1 - x, by PyTorch's approximations (Taylor series near 0 and 1, a saddle point for
    large parameters, a rational correction elsewhere) so gradients agree with its."""
    x, alpha, total = np.broadcast_arrays(*(np.asarray(v) for v in (x, alpha, total)))
    if x.dtype != np.float32:
        x, alpha, total = (v.astype(np.float64) for v in (x, alpha, total))
    # The branch tests and the Taylor branches run in the input's precision, as PyTorch's.
    beta = total - alpha
    boundary = total * x * (1 - x)
    x_in = x
    x, a, t = (np.asarray(v, np.float64) for v in (x, alpha, total))
    b = t - a
    with np.errstate(all="ignore"):
        near0 = _beta_grad_alpha_small(x_in, alpha, beta).astype(np.float64)
        near1 = -_beta_grad_beta_small(1 - x_in, beta, alpha).astype(np.float64)
        mid = _beta_grad_alpha_mid(x, a, b)
        u = np.log(x)
        la = np.log(a) - u
        lb = np.log(t) - la
        p, q = np.zeros_like(x), np.zeros_like(x)
        for i in range(3):
            for j in range(3):
                ua = u ** i * la ** j
                c0, c1 = _BETA_C[0, i, j], _BETA_C[1, i, j]
                p = p + ua * (c0[0] + lb * (c0[1] + lb * (c0[2] + lb * c0[3])))
                q = q + ua * (c1[0] + lb * (c1[1] + lb * (c1[2] + lb * c1[3])))
        # PyTorch takes these two digammas in the input's precision.
        psi = digamma(total).astype(np.float64) - digamma(alpha).astype(np.float64)
        fit = p / q * (x * psi / b)
    return np.where((x_in <= 0.5) & (boundary < 2.5), near0,
                    np.where((x_in >= 0.5) & (boundary < 0.75), near1,
                             np.where((alpha > 6) & (beta > 6), mid, fit)))


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
