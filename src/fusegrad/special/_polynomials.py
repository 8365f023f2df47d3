"""NumPy kernels of torch.special's orthogonal polynomials: Chebyshev T, U, V, W (plain and
shifted to [0, 1]), Hermite H and He, Laguerre L and Legendre P, each evaluated as PyTorch's
CPU kernels evaluate it: the degree truncated to an integer (negative: 0), PyTorch's values
at the end points, its closed trigonometric forms for high degrees inside (-1, 1), and the
three-term recurrence otherwise, all in the input's floating dtype (float32 stays float32).
"""

from __future__ import annotations

import numpy as np


def _correctly_rounded(fn):
    """`fn` evaluated in double and rounded to the argument's dtype: for float32 the
    correctly rounded value C's `sinf`/`cosf`/`acosf` give PyTorch's kernels (NumPy's own
    float32 loops differ by an ulp or two from one CPU to another, and the trigonometric
    forms of high degrees magnify an ulp of the angle twentyfold)."""

    def rounded(x: np.ndarray) -> np.ndarray:
        return fn(x.astype(np.float64)).astype(x.dtype, copy=False)

    return rounded


_sin, _cos, _arccos = (_correctly_rounded(f) for f in (np.sin, np.cos, np.arccos))


def _degrees(n: np.ndarray) -> np.ndarray:
    # The kernels take the degree as int64 (C's truncation; NaN lands on a negative value).
    with np.errstate(invalid="ignore"):
        out = np.trunc(n.astype(np.float64))
        out = np.where(np.isfinite(out) & (np.abs(out) < 2.0 ** 62), out, -1.0)
    return out.astype(np.int64)


def _recurrence(x, n, p, q, step, first: int = 2):
    """Run `r = step(k, p, q)` for k = first .. n (elementwise n); returns the last r (q
    where no step ran). k is a NumPy integer so products with it follow C's promotion."""
    top = int(n.max(initial=0))
    for k in range(first, top + 1):
        live = k <= n
        if not live.any():
            break
        r = step(k, p, q)
        p = np.where(live, q, p)
        q = np.where(live, r, q)
    return q


def _finish(x, n, special: list, default):
    """The first matching (condition, value) of `special`, else `default`."""
    out = default
    for cond, value in reversed(special):
        out = np.where(cond, value, out)
    return out


def _odd_sign(n, value):
    return np.where(n % 2 == 0, value, -value)


def chebyshev_t(x, n):
    t = x.dtype.type
    two_x = x + x
    rec = _recurrence(x, n, np.ones_like(x), x, lambda k, p, q: two_x * q - p)
    with np.errstate(all="ignore"):
        trig = _cos(n.astype(x.dtype) * _arccos(x))
    ends = np.where((x > 0) | (n % 2 == 0), t(1), t(-1))
    return _finish(x, n, [(n < 0, t(0)), (np.abs(x) == 1, ends),
                          ((n > 6) & (np.abs(x) < 1), trig), (n == 0, t(1)), (n == 1, x)], rec)


def _chebyshev_u_like(x, n, y, trig_limit: int, ends):
    """U_n(y) (y = x, or 2x - 1 for the shifted form) with the end values `ends`."""
    t = x.dtype.type
    n1 = (n + 1).astype(x.dtype)
    with np.errstate(all="ignore"):
        theta = _arccos(y)
        s = _sin(theta)
        trig = np.where(s != 0, _sin(n1 * theta) / s, n1 * _cos(n1 * theta) / y)
    rec = _recurrence(y, n, np.ones_like(y), y + y, lambda k, p, q: (y + y) * q - p)
    return ends + [((n > trig_limit) & (np.abs(y) < 1), trig), (n == 0, t(1)),
                   (n == 1, y + y)], rec


def chebyshev_u(x, n):
    t = x.dtype.type
    ends = np.where((x > 0) | (n % 2 == 0), (n + 1).astype(x.dtype), (-(n + 1)).astype(x.dtype))
    special, rec = _chebyshev_u_like(x, n, x, 8, [(n < 0, t(0)), (np.abs(x) == 1, ends)])
    return _finish(x, n, special, rec)


def _chebyshev_v_like(x, n, y, trig_limit: int, ends):
    t = x.dtype.type
    odd_value = _odd_sign(n, (n + n + 1).astype(x.dtype))
    with np.errstate(all="ignore"):
        theta = _arccos(y)
        half = theta / t(2)
        trig = np.where(_sin(half) != 1,
                        _cos((n.astype(x.dtype) + t(0.5)) * theta) / _cos(half), odd_value)
    start = y + y - t(1)
    rec = _recurrence(y, n, np.ones_like(y), start, lambda k, p, q: (y + y) * q - p)
    return ends + [((n > trig_limit) & (np.abs(y) < 1), trig), (n == 0, t(1)),
                   (n == 1, start)], rec


def chebyshev_v(x, n):
    t = x.dtype.type
    ends = np.where(x > 0, t(1), _odd_sign(n, (n + n + 1).astype(x.dtype)))
    special, rec = _chebyshev_v_like(x, n, x, 8, [(n < 0, t(0)), (np.abs(x) == 1, ends)])
    return _finish(x, n, special, rec)


def _chebyshev_w_like(x, n, y, trig_limit: int, ends, inside_one):
    t = x.dtype.type
    with np.errstate(all="ignore"):
        theta = _arccos(y)
        half = theta / t(2)
        trig = np.where(_cos(half) != 1,
                        _sin((n.astype(x.dtype) + t(0.5)) * theta) / _sin(half), inside_one)
    start = y + y + t(1)
    rec = _recurrence(y, n, np.ones_like(y), start, lambda k, p, q: (y + y) * q - p)
    return ends + [((n > trig_limit) & (np.abs(y) < 1), trig), (n == 0, t(1)),
                   (n == 1, start)], rec


def chebyshev_w(x, n):
    t = x.dtype.type
    top = (n + n + 1).astype(x.dtype)
    ends = np.where(x > 0, top, _odd_sign(n, t(1)))
    special, rec = _chebyshev_w_like(x, n, x, 8, [(n < 0, t(0)), (np.abs(x) == 1, ends)],
                                     np.where(x > 0, top, _odd_sign(n, t(1))))
    return _finish(x, n, special, rec)


def shifted_chebyshev_t(x, n):
    t = x.dtype.type
    y = x + x - t(1)
    with np.errstate(all="ignore"):
        trig = _cos(n.astype(x.dtype) * _arccos(y))
    rec = _recurrence(y, n, np.ones_like(y), y, lambda k, p, q: (y + y) * q - p)
    return _finish(x, n, [(n < 0, t(0)), (x == 1, t(1)), (x == 0, _odd_sign(n, t(1))),
                          ((n > 6) & (np.abs(y) < 1), trig), (n == 0, t(1)), (n == 1, y)], rec)


def shifted_chebyshev_u(x, n):
    t = x.dtype.type
    n1 = (n + 1).astype(x.dtype)
    special, rec = _chebyshev_u_like(x, n, x + x - t(1), 6, [
        (n < 0, t(0)), (x == 1, n1), (x == 0, _odd_sign(n, n1))])
    return _finish(x, n, special, rec)


def shifted_chebyshev_v(x, n):
    t = x.dtype.type
    odd_value = _odd_sign(n, (n + n + 1).astype(x.dtype))
    special, rec = _chebyshev_v_like(x, n, x + x - t(1), 6, [
        (n < 0, t(0)), (x == 1, t(1)), (x == 0, odd_value)])
    return _finish(x, n, special, rec)


def shifted_chebyshev_w(x, n):
    t = x.dtype.type
    special, rec = _chebyshev_w_like(x, n, x + x - t(1), 4, [
        (n < 0, t(0)), (x == 1, (n + n + 1).astype(x.dtype)), (x == 0, _odd_sign(n, t(1)))],
        _odd_sign(n, t(1)))
    return _finish(x, n, special, rec)


def hermite_h(x, n):
    t = x.dtype.type
    # k runs over 2, 4, ..., 2n - 2: the j-th step (j = 2 .. n) uses k = 2j - 2.
    rec = _recurrence(x, n, np.ones_like(x), x + x,
                      lambda j, p, q: (x + x) * q - t(2 * j - 2) * p)
    return _finish(x, n, [(n < 0, t(0)), (n == 0, t(1)), (n == 1, x + x)], rec)


def hermite_he(x, n):
    t = x.dtype.type
    rec = _recurrence(x, n, np.ones_like(x), x, lambda j, p, q: x * q - t(j - 1) * p)
    return _finish(x, n, [(n < 0, t(0)), (n == 0, t(1)), (n == 1, x)], rec)


def laguerre_l(x, n):
    t = x.dtype.type

    def step(j, p, q):
        k = j - 1
        return ((t(k + k) + (t(1) - x)) * q - t(k) * p) / t(k + 1)
    rec = _recurrence(x, n, np.ones_like(x), t(1) - x, step)
    return _finish(x, n, [(n < 0, t(0)), (np.abs(x) == 0, t(1)), (n == 0, t(1)),
                          (n == 1, t(1) - x)], rec)


def legendre_p(x, n):
    t = x.dtype.type

    def step(j, p, q):
        k = j - 1
        return (t(k + k + 1) * x * q - t(k) * p) / t(k + 1)
    rec = _recurrence(x, n, np.ones_like(x), x, step)
    ends = np.where((x > 0) | (n % 2 == 0), t(1), t(-1))
    return _finish(x, n, [(n < 0, t(0)), (np.abs(x) == 1, ends), (n == 0, t(1)), (n == 1, x)],
                   rec)


KERNELS = {
    "chebyshev_polynomial_t": chebyshev_t, "chebyshev_polynomial_u": chebyshev_u,
    "chebyshev_polynomial_v": chebyshev_v, "chebyshev_polynomial_w": chebyshev_w,
    "shifted_chebyshev_polynomial_t": shifted_chebyshev_t,
    "shifted_chebyshev_polynomial_u": shifted_chebyshev_u,
    "shifted_chebyshev_polynomial_v": shifted_chebyshev_v,
    "shifted_chebyshev_polynomial_w": shifted_chebyshev_w,
    "hermite_polynomial_h": hermite_h, "hermite_polynomial_he": hermite_he,
    "laguerre_polynomial_l": laguerre_l, "legendre_polynomial_p": legendre_p,
}


def evaluate(name: str, x: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Polynomial `name` of degree n at x (broadcast; x in its result dtype)."""
    x, n = np.broadcast_arrays(x, n)
    return np.asarray(KERNELS[name](np.array(x), _degrees(np.asarray(n))), dtype=x.dtype)
