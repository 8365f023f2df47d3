"""Special functions and less common pointwise math: the gamma family (`lgamma`, `digamma`,
`polygamma`), `erfinv`, `i0`/`special_i1`, `sinc`, `logit`, `hypot`, `logaddexp(2)`,
`copysign`, `nextafter`, `heaviside`, `ldexp`, `frexp`, `fmin`/`fmax`, `gcd`/`lcm`,
`deg2rad`/`rad2deg`, the bool tests (`signbit`, `isneginf`, `isposinf`), the `xlogy` number
overloads and `clamp_min`/`clamp_max` with tensor bounds.

Kernels come from NumPy and SciPy's `special` (or, without SciPy, `_special_numpy.py`);
derivatives are written in fusegrad ops so they can be differentiated again.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import _dtype
from .._dispatch import call
from .._shapes import elem_strides, strided_empty
from . import _onnx as _ox
from . import _special_kernels as _sp
from ._util import (
    HALF,
    Spec,
    as_dtype,
    binary_kernel,
    binary_meta,
    binary_samples,
    cj,
    dtype_of,
    float_np,
    iterator_ordered,
    laid_if_empty,
    not_implemented_for,
    operand_order,
    rand_array,
    result_np,
    unary_kernel,
    unary_meta,
    unary_samples,
)
from .arithmetic import inplace_checks_first, not_implemented_derivative
from .comparison import (
    clamp_number_inplace,
    clamp_number_kernel,
    clamp_number_meta,
    clamp_tensor,
)
from .registry import Sample, inplace_variant, register
from .scalar import clamp_min
from .special import _xlogy_kernel, _xlogy_np, xlogy

_SQRT_PI_2 = math.sqrt(math.pi) / 2
_LN2 = math.log(2.0)


def _refusing(fn, refusal):
    """Kernel or meta `fn` of a unary op, first raising `refusal(dtype)` (PyTorch's error
    for a dtype without a kernel; None where there is one) for its input's dtype. A kernel's
    float32/float64 fast path (`ufunc`, which the recorders call) is kept: no refusal there."""

    @functools.wraps(fn)  # fn's signature, name and module, which other layers read
    def checked(a, *rest):
        error = refusal(dtype_of(a))
        if error is not None:
            raise error
        return fn(a, *rest)

    return checked  # (`wraps` copies a kernel's `ufunc` too)


def _no_complex(cpu_name: str, halves: bool = False):
    """A refusal (`_refusing`) of complex dtypes (and the half types with `halves`), naming
    the kernel `cpu_name` as PyTorch's NotImplementedError does."""

    def refusal(dt):
        if dt.category == _dtype.COMPLEX or (halves and dt in (_dtype.float16, _dtype.bfloat16)):
            return not_implemented_for(cpu_name, dt)
        return None

    return refusal


def _unary(name, fn, node, derivative, *, domain=None, inplace=True, saves_self=True,
           refusal=None, **kw):
    """A float-valued unary entry (integers compute in the default float dtype) that saves
    its input, with its in-place form; `refusal`: its dtype errors (see `_refusing`)."""
    kernel, meta = unary_kernel(fn), unary_meta()
    if refusal is not None:
        kernel, meta = _refusing(kernel, refusal), _refusing(meta, refusal)
    op = register(name, kernel=kernel, meta=meta, node=node,
                  derivative=derivative, save=lambda out, a: (a,),
                  samples=unary_samples(domain), domain=domain, saved_names=("self",), **kw)
    if inplace:
        inplace_variant(op, name + "_", saves_self=saves_self)
    return op


# ---------------------------------------------------------------- gamma family


def _digamma_np(a):
    out = _sp.psi(a)
    # PyTorch gives -inf at +0.0 and +inf at -0.0, the limits from either side (SciPy: nan
    # only at the negative integers).
    pole = np.where(np.signbit(a), np.asarray(np.inf, out.dtype), np.asarray(-np.inf, out.dtype))
    return np.where(a == 0, pole, out).astype(out.dtype, copy=False)


lgamma = _unary("lgamma", operand_order(_sp.gammaln), "LgammaBackward0",
                lambda g, a: (g * a.digamma(),), domain=(0.2, 4.0),
                refusal=_no_complex("lgamma_vml_cpu"))
digamma = _unary("digamma", _digamma_np, "DigammaBackward0",
                 lambda g, a: (g * a.polygamma(1),), domain=(0.2, 4.0),
                 refusal=_no_complex("digamma"))


def _trigamma_np(a):
    """polygamma(1, x) in x's dtype as PyTorch computes it: below 1/2 the reflection
    pi^2 / sin^2(pi x) - trigamma(1 - x) (so a negative integer gives the huge finite value
    of a rounded sine, not inf, and -inf gives NaN), then six steps of the recurrence
    trigamma(y) = 1 / y^2 + trigamma(y + 1) and the asymptotic series in 1 / y."""
    dt = a.dtype
    one = dt.type(1)
    pi = dt.type(math.pi)
    with np.errstate(all="ignore"):
        small = a < 0.5
        sin = np.sin(pi * a)
        out = np.where(small, -(pi * pi) / (sin * sin), dt.type(0))
        y = np.where(small, one - a, a)
        for _ in range(6):
            out = out + one / (y * y)
            y = y + one
        ixx = one / (y * y)
        series = one + one / (dt.type(2) * y) + ixx * (
            one / dt.type(6) - ixx * (one / dt.type(30) - ixx * (one / dt.type(42))))
        out = out + series / y
        return np.where(small, -out, out).astype(dt, copy=False)


def _polygamma_high_np(n):
    """polygamma(n, x) for n >= 2 as PyTorch's: (-1)^(n+1) n! zeta(n + 1, x), with n! as
    exp(lgamma(n + 1)), so +inf gives NaN (zeta(n + 1, inf)) and a pole +-inf."""
    factor = (1.0 if n % 2 else -1.0) * math.exp(math.lgamma(n + 1.0))

    def kernel(a):
        with np.errstate(all="ignore"):
            return (factor * _sp.zeta(np.float64(n + 1), a)).astype(a.dtype, copy=False)

    return kernel


def _polygamma_np(n):
    if n == 0:
        return _digamma_np
    return _trigamma_np if n == 1 else _polygamma_high_np(n)


def _polygamma_check(n, dt) -> None:
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    if dt.category == _dtype.COMPLEX:  # named after the kernel each order runs
        raise not_implemented_for("digamma" if n == 0 else "trigamma" if n == 1
                                   else "polygamma", dt)


def _polygamma_kernel(n, a):
    _polygamma_check(n, dtype_of(a))
    return unary_kernel(_polygamma_np(n))(a)


def _polygamma_meta(n, a):
    _polygamma_check(n, a.dtype)
    return unary_meta()(a)


polygamma = register(
    "polygamma", kernel=_polygamma_kernel, meta=_polygamma_meta, node="PolygammaBackward0",
    derivative=lambda g, n, a: (None, g * a.polygamma(n + 1)),
    save=lambda out, n, a: (n, a), saved_names=("n", "self"), tolerance={"float64": 1e-8},
    samples=lambda rng, dt: [Sample((n, rand_array(rng, s, dt, (0.3, 3.0))), name=f"n={n} {s}")
                             for n, s in ((0, (3, 4)), (1, (5,)), (2, ()), (3, (2, 3)))],
    domain=(0.3, 3.0))
polygamma_ = register(
    "polygamma_", kernel=lambda a, n: _polygamma_kernel(n, a),
    meta=lambda a, n: _polygamma_meta(n, a), node="PolygammaBackward1", inplace=True,
    derivative=lambda g, a, n: (g * a.polygamma(n + 1), None),
    save=lambda out, a, n: (a, n), saved_names=("self", "n"), tolerance={"float64": 1e-8},
    samples=lambda rng, dt: [Sample((rand_array(rng, (3, 4), dt, (0.3, 3.0)), n))
                             for n in (1, 2)])
polygamma_.saves_self_before_write = True

# ---------------------------------------------------------------- erfinv, Bessel, sinc


erfinv = _unary("erfinv", _sp.erfinv, "ErfinvBackward0",
                lambda g, a: (g * _SQRT_PI_2 * (a.erfinv() ** 2).exp(),), domain=(-0.9, 0.9),
                refusal=_no_complex("erfinv_vml_cpu"), onnx=_ox.erfinv)
# The largest float32 whose float32 exp is finite. PyTorch's float32 kernels of the modified
# Bessel functions i0 and i1 (half and bfloat16 compute in float32) multiply exp(|x|) by
# the rest of the series, so beyond it they overflow to inf, though the product itself
# stays finite up to |x| of about 91.9.
_F32_EXP_FINITE = np.float32(88.72283172607422)


def float32_exp_overflow(out: np.ndarray, x: np.ndarray, odd: bool) -> np.ndarray:
    """`out`, i0 or i1 (`odd`) of float32 `x`, with PyTorch's float32 overflow: inf (i1:
    with the sign of x) where exp(|x|) is not finite in float32, and NaN at infinite x
    (its kernel's inf times the rest of the series, 0 there)."""
    size = np.abs(x)
    over = size > _F32_EXP_FINITE
    if not over.any():
        return out
    inf = np.copysign(np.float32(np.inf), x) if odd else np.float32(np.inf)
    out = np.where(over, inf, out)
    return np.where(size == np.inf, np.float32(np.nan), out).astype(x.dtype, copy=False)


def _float32_overflowing(fn, odd: bool):
    """Kernel `fn` (i0 or i1 on arrays) with PyTorch's float32 overflow."""

    def kernel(a):
        out = fn(a)
        if a.dtype == np.float32:
            out = float32_exp_overflow(out, a, odd)
        return out

    kernel.__name__ = getattr(fn, "__name__", "kernel")
    return kernel


def _i1(a):
    from .._dispatch import call

    return call(special_i1, a)  # no Tensor method: torch.special.i1 in PyTorch


i0 = _unary("i0", _float32_overflowing(_sp.i0, False), "I0Backward0",
            lambda g, a: (g * _i1(a),), domain=(-3, 3), refusal=_no_complex("i0_vml_cpu"))


def _i1_derivative(g, a):
    # i1'(x) = i0(x) - i1(x) / x, which is 1/2 at 0.
    safe = a.where(a != 0, a.new_ones(()))
    return (g * (a.i0() - _i1(a) / safe).where(a != 0, a.new_full((), 0.5)),)


special_i1 = _unary("special_i1", _float32_overflowing(_sp.i1, True), "SpecialI1Backward0",
                    _i1_derivative,
                    refusal=_no_complex("i1_cpu"),
                    domain=(-3, 3), inplace=False)


def _erfcx_derivative(g, a):
    # erfcx'(x) = 2 x erfcx(x) - 2 / sqrt(pi)
    return (g * (2 * a * call(special_erfcx, a) - 2 / math.sqrt(math.pi)),)


special_erfcx = _unary("special_erfcx", operand_order(_sp.erfcx), "SpecialErfcxBackward0",
                       _erfcx_derivative, domain=(-3, 3), inplace=False,
                       refusal=_no_complex("erfcx_cpu", halves=True))


def _entr_np(a):
    # -x log x for x > 0, 0 at 0, -inf below; NaN stays NaN.
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(a > 0, -a * np.log(np.where(a > 0, a, 1)), np.where(a == 0, 0, -np.inf))
    return np.where(np.isnan(a), a, out).astype(a.dtype, copy=False)


special_entr = _unary("special_entr", _entr_np, "SpecialEntrBackward0",
                      lambda g, a: (g * -(a.log() + 1),), domain=(0.1, 3), inplace=False,
                      refusal=_no_complex("entr_cpu"))

_SQRT_HALF = math.sqrt(0.5)
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _log_ndtr_np(a):
    # log Phi(x): log1p(-erfc(x / sqrt 2) / 2) where Phi is near 1; below -1, where Phi is
    # small, log(erfcx(-x / sqrt 2) / 2) - x^2 / 2, which neither underflows nor cancels.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        upper = np.log1p(-_sp.erfc(a * _SQRT_HALF) / 2)
        lower = np.log(_sp.erfcx(-a * _SQRT_HALF) / 2) - a * a / 2
    return np.where(a < -1, lower, upper).astype(a.dtype, copy=False)


def _log_ndtr_derivative(g, a):
    # Phi'(x) / Phi(x) = exp(-x^2 / 2 - log Phi(x)) / sqrt(2 pi)
    return (g * (-(a * a) / 2 - call(special_log_ndtr, a) - _LOG_SQRT_2PI).exp(),)


special_log_ndtr = _unary("special_log_ndtr", operand_order(_log_ndtr_np),
                          "SpecialLogNdtrBackward0", _log_ndtr_derivative, domain=(-4, 4),
                          inplace=False, refusal=_no_complex("log_ndtr_cpu", halves=True))


def _sinc_np(a):
    return np.sinc(a).astype(a.dtype, copy=False)


def _sinc_derivative(g, a):
    pa = a * math.pi
    safe = pa.where(a != 0, pa.new_ones(()))
    d = (safe.cos() * safe - safe.sin()) / (safe * a.where(a != 0, a.new_ones(())))
    return (g * cj(d.where(a != 0, a.new_zeros(()))),)  # conjugated for complex inputs


sinc = _unary("sinc", _sinc_np, "SincBackward0", _sinc_derivative, onnx=_ox.sinc)


def _no_complex_tensors(name: str):
    """The refusal (`_refusing`) of rad2deg/deg2rad: a RuntimeError for complex tensors."""

    def refusal(dt):
        if dt.category == _dtype.COMPLEX:
            return RuntimeError(f"{name} is not supported for complex tensors.")
        return None

    return refusal


def _scaled(a, factor: float):
    """`a * factor` in a's dtype (an empty result keeps a's strides, as PyTorch's)."""
    out = (a * factor).astype(a.dtype)
    return out if out.size else strided_empty(out, elem_strides(a))


rad2deg = register(
    "rad2deg", kernel=_refusing(unary_kernel(lambda a: _scaled(a, 180.0 / math.pi)),
                               _no_complex_tensors("rad2deg")),
    meta=_refusing(unary_meta(), _no_complex_tensors("rad2deg")), node="Rad2DegBackward0",
    derivative=lambda g: (g * (180.0 / math.pi),),
    save=lambda out, a: (), samples=unary_samples(),
    decomposition=lambda a: a * (180.0 / math.pi), onnx=_ox.angle_scale(180.0 / math.pi))
deg2rad = register(
    "deg2rad", kernel=_refusing(unary_kernel(lambda a: _scaled(a, math.pi / 180.0)),
                               _no_complex_tensors("deg2rad")),
    meta=_refusing(unary_meta(), _no_complex_tensors("deg2rad")), node="Deg2RadBackward0",
    derivative=lambda g: (g * (math.pi / 180.0),),
    save=lambda out, a: (), samples=unary_samples(),
    decomposition=lambda a: a * (math.pi / 180.0), onnx=_ox.angle_scale(math.pi / 180.0))
rad2deg_ = inplace_variant(rad2deg, "rad2deg_")
deg2rad_ = inplace_variant(deg2rad, "deg2rad_")

# ---------------------------------------------------------------- logit


def _logit_np(eps):
    def fn(a):
        if eps is not None:
            a = np.clip(a, eps, 1 - eps)
        return np.log(a / (1 - a)).astype(a.dtype, copy=False)

    return fn


def _logit_kernel(a, eps=None):
    if a.dtype.kind == "c":
        raise not_implemented_for("logit_cpu", a.dtype)
    if a.dtype in HALF:
        # The half types' kernel clamps to eps and 1 - eps rounded to the half type and
        # rounds 1 - x and the quotient to it before the logarithm (in float32)
        dt = a.dtype
        x = a.astype(np.float32)
        if eps is not None:
            lo, hi = (np.asarray(v, np.float32).astype(dt).astype(np.float32)
                      for v in (eps, 1 - eps))
            x = np.clip(x, lo, hi)
        with np.errstate(divide="ignore", invalid="ignore"):
            q = (x / (1 - x).astype(dt).astype(np.float32)).astype(dt)
            return np.log(q.astype(np.float32)).astype(dt)
    return unary_kernel(_logit_np(eps))(a)


def _logit_meta(a, eps=None):
    if a.dtype.category == _dtype.COMPLEX:
        raise not_implemented_for("logit_cpu", a.dtype)
    return unary_meta()(a)


def _logit_derivative(g, a, eps):
    d = g / (a * (1 - a))
    if eps is None:  # outside [0, 1] the logit is undefined: NaN, as PyTorch's
        return (d.where((a >= 0) & (a <= 1), d.new_full((), float("nan"))), None)
    inside = (a >= eps) & (a <= 1 - eps)
    return (d.where(inside, d.new_zeros(())), None)


def _logaddexp_decomposition(a, b, base2: bool = False):
    """max(a, b) + log(1 + exp(-|a - b|)) (base 2 with `base2`); equal infinities are
    returned as they are (their difference is NaN)."""
    top = a.maximum(b)
    gap = -(a - b).abs()
    rest = gap.exp2().log1p() / math.log(2.0) if base2 else gap.exp().log1p()
    return top.where((a == b) & a.isinf(), top + rest)


def _logit_decomposition(a, eps=None):
    if eps is not None:
        a = a.clamp(eps, 1 - eps)
    return (a / (-a + 1)).log()


def _logit_samples(rng, dt):
    out = [Sample((rand_array(rng, s, dt, (0.05, 0.95)),), name=str(s))
           for s in ((3, 4), (), (0, 2))]
    out.append(Sample((rand_array(rng, (3, 4), dt, (0.0, 1.0)), 0.2), name="eps 0.2"))
    return out


logit = register(
    "logit", kernel=_logit_kernel, meta=_logit_meta,
    node="LogitBackward0", derivative=_logit_derivative,
    save=lambda out, a, eps=None: (a, eps), saved_names=("self", "eps"),
    samples=_logit_samples, decomposition=_logit_decomposition, onnx=_ox.logit)
logit_ = inplace_variant(logit, "logit_", saves_self=True)

# ---------------------------------------------------------------- binary math


def _float_kernel(fn, cpu_name: str, complex_ok: bool = False):
    """A binary kernel in the operands' promoted dtype for an op whose PyTorch kernel
    exists for floating dtypes only (and complex ones with `complex_ok`): an integer or bool
    result is its NotImplementedError (named `cpu_name`), not a computation in the default
    float dtype."""
    base = binary_kernel(fn)
    kinds = "fc" if complex_ok else "f"

    def kernel(a, b):
        dt = result_np(a, b)
        if dt.kind not in kinds and dt not in HALF:
            raise not_implemented_for(cpu_name, dt)
        return base(a, b)

    kernel.ufunc = fn  # float arrays of one dtype: the recorders call it themselves
    return kernel


def _float_meta(cpu_name: str, complex_ok: bool = False):
    """`_float_kernel`'s meta."""

    def meta(a, b):
        spec = binary_meta()(a, b)
        category = spec.dtype.category
        if category != _dtype.FLOAT and not (complex_ok and category == _dtype.COMPLEX):
            raise not_implemented_for(cpu_name, spec.dtype)
        return spec

    return meta


def _binary(name, fn, node, derivative, *, domain=None, scalars=(), **kw):
    kw.setdefault("save", lambda out, a, b: (a, b))
    kw.setdefault("saved_names", ("self", "other"))
    op = register(name, kernel=_float_kernel(fn, name + "_cpu"),
                  meta=_float_meta(name + "_cpu"),
                  node=node, derivative=derivative,
                  samples=binary_samples(domain, scalars=scalars), tensor_args=(0, 1), **kw)
    inplace_variant(op, name + "_", saves_self=True, kernel=inplace_checks_first(op.kernel))
    return op


def _hypot_save(out, a, b):
    """HypotBackward0's saved values, as PyTorch's: each operand only for its own gradient,
    and the result (the shared denominator)."""
    return (a if getattr(a, "_rg", False) else None, b if getattr(b, "_rg", False) else None,
            out)


def _hypot_derivative(g, a, b, h):
    """d hypot(a, b) / da = a / hypot(a, b); None for an operand that was not saved."""
    return (g * a / h if a is not None else None, g * b / h if b is not None else None)


hypot = _binary("hypot", np.hypot, "HypotBackward0", _hypot_derivative, save=_hypot_save,
                saved_names=("self", "other", "result"), onnx=_ox.hypot,
                tensors_only=("input", "other"))


def _logaddexp_complex(a, b):
    """log(exp(a) + exp(b)) of complex arrays as PyTorch's: hi + log1p(exp(lo - hi)), hi the
    operand of larger real part (`a` on a tie), so the imaginary part follows hi's rather
    than the principal branch. Equal infinite real parts: -inf gives lo; +inf the direct
    formula (whose imaginary part is NaN). Any NaN part gives NaN + NaN j."""
    a, b = np.broadcast_arrays(a, b)
    first = a.real >= b.real
    hi, lo = np.where(first, a, b), np.where(first, b, a)
    with np.errstate(all="ignore"):
        out = np.log1p(np.exp(lo - hi)) + hi
        both_inf = np.isinf(lo.real) & (lo.real == hi.real)
        if both_inf.any():
            direct = np.log(np.exp(lo) + np.exp(hi))
            out = np.where(both_inf, np.where(lo.real < 0, lo, direct), out)
    nan = np.isnan(a.real) | np.isnan(a.imag) | np.isnan(b.real) | np.isnan(b.imag)
    return np.where(nan, np.asarray(complex(np.nan, np.nan), out.dtype), out)


def _logaddexp_np(a, b):
    """NumPy's logaddexp, or `_logaddexp_complex` for complex operands (the kernel casts
    both to one dtype first)."""
    if getattr(a, "dtype", None) is not None and a.dtype.kind == "c":
        return _logaddexp_complex(np.asarray(a), np.asarray(b))
    return np.logaddexp(a, b)


logaddexp = register(
    "logaddexp", kernel=_float_kernel(_logaddexp_np, "logaddexp_cpu", complex_ok=True),
    meta=_float_meta("logaddexp_cpu", complex_ok=True), node="LogaddexpBackward0",
    # Conjugated for complex operands (the conjugate Wirtinger rule).
    derivative=lambda g, a, b: (g / cj((b - a).exp() + 1), g / cj((a - b).exp() + 1)),
    save=lambda out, a, b: (a, b), samples=binary_samples(scalars=()), tensor_args=(0, 1),
    saved_names=("self", "other"), decomposition=lambda a, b: _logaddexp_decomposition(a, b),
    tensors_only=("input", "other"))
logaddexp2 = register(
    "logaddexp2", kernel=_float_kernel(np.logaddexp2, "logaddexp2_cpu"),
    meta=_float_meta("logaddexp2_cpu"), node="Logaddexp2Backward0",
    derivative=lambda g, a, b: (g / ((b - a).exp2() + 1), g / ((a - b).exp2() + 1)),
    save=lambda out, a, b: (a, b), samples=binary_samples(scalars=()), tensor_args=(0, 1),
    saved_names=("self", "other"), decomposition=lambda a, b: _logaddexp_decomposition(a, b, True),
    tensors_only=("input", "other"))


def _copysign_derivative(g, a, out):
    # d|a|·sign(b)/da = sign(a)·sign(out); 0 where a is 0. `other` gets zeros. `a` is None
    # where self needs no gradient (`_copysign_save`).
    return (g * (a.sign() * out.sign()) if a is not None else None, g * 0)


def _copysign_save(out, a, b):
    """CopysignBackward0's saved values, as PyTorch's: `self` only for its own gradient (so
    it may change in place when only `other` requires grad), and the result."""
    return (a if getattr(a, "_rg", False) else None, out)


copysign = register(
    "copysign.Tensor",
    kernel=binary_kernel(np.copysign, to_float=True, real_only="copysign_cpu"),
    meta=binary_meta(to_float=True, real_only="copysign_cpu"), node="CopysignBackward0",
    derivative=_copysign_derivative, save=_copysign_save,
    samples=binary_samples(scalars=()), tensor_args=(0, 1), public="copysign",
    saved_names=("self", "result"))
copysign_scalar = register(
    "copysign.Scalar",
    kernel=binary_kernel(np.copysign, to_float=True, real_only="copysign_cpu"),
    meta=binary_meta(to_float=True, real_only="copysign_cpu"), node="CopysignBackward1",
    derivative=lambda g, a, out: (g * (a.sign() * out.sign()), None),
    save=lambda out, a, b: (a, out), public="copysign", saved_names=("self", "result"),
    samples=lambda rng, dt: [Sample((rand_array(rng, (3, 4), dt), c)) for c in (-1.5, 2.0)])
copysign_ = inplace_variant(copysign, "copysign_.Tensor", saves_self=True,
                            kernel=inplace_checks_first(copysign.kernel))
copysign_scalar_ = inplace_variant(copysign_scalar, "copysign_.Scalar", saves_self=True,
                                   kernel=inplace_checks_first(copysign_scalar.kernel))


def _same_float(name):
    def meta(a, b):
        if dtype_of(a) is not dtype_of(b):
            raise RuntimeError(f"{name} is not yet implemented for tensors with different "
                               "dtypes.")
        return binary_meta()(a, b)

    return meta


def _nextafter_kernel(a, b):
    # PyTorch promotes the operands (its own dtype error is heaviside's); half types step in
    # their own dtype (NumPy's and ml_dtypes' nextafter take them).
    dt = result_np(a, b)
    if dt.kind != "f" and dt not in HALF:
        raise not_implemented_for("nextafter_cpu", dt)
    x, y = as_dtype(a, dt), as_dtype(b, dt)
    # Equal operands give `other` (C's nextafter: nextafter(0.0, -0.0) is -0.0), which
    # NumPy's half-type loops do not.
    return np.where(x == y, y, np.nextafter(x, y)) if dt in HALF else np.nextafter(x, y)


nextafter = register(
    "nextafter", kernel=iterator_ordered(_nextafter_kernel), meta=_float_meta("nextafter_cpu"),
    node="NextafterBackward0", derivative=lambda g: (g, g * 0), save=lambda out, a, b: (),
    samples=binary_samples(scalars=()), gradcheck=False, result_order="iterator",
    tensors_only=("input", "other"))
nextafter_ = inplace_variant(nextafter, "nextafter_",
                             kernel=inplace_checks_first(_nextafter_kernel))


def _heaviside_kernel(a, b):
    _same_float("heaviside")(a, b)
    # `values` where the input is 0, else whether it is positive: NaN gives 0, as PyTorch's
    # (NumPy's heaviside passes NaN through).
    return np.where(a == 0, b, a > 0).astype(a.dtype, copy=False)


heaviside = register(
    "heaviside", kernel=iterator_ordered(_heaviside_kernel), meta=_same_float("heaviside"),
    node="NotImplemented", derivative=not_implemented_derivative("heaviside"),
    save=lambda out, a, b: (), samples=binary_samples(scalars=()), gradcheck=False,
    result_order="iterator", onnx=_ox.heaviside, tensors_only=("input", "values"))
heaviside_ = inplace_variant(heaviside, "heaviside_",
                             derivative=not_implemented_derivative("heaviside_"))


def _ldexp_check(a_dt, e_dt) -> None:
    """A real floating input takes integer exponents only (PyTorch's kernel for them has no
    bool form)."""
    if e_dt is _dtype.bool_ and a_dt.category == _dtype.FLOAT:
        raise not_implemented_for("ldexp_cpu_exp", "Bool")


_mul = binary_kernel(np.multiply)


def _ldexp_kernel(a, e):
    e_dt = _dtype.result_type(e)
    _ldexp_check(_dtype.result_type(a), e_dt)
    if e_dt.category >= _dtype.FLOAT:
        # input * 2 ** other, the power in the exponent's own dtype (a half type's rounded
        # to it), as PyTorch's composite computes it; then the promoting product.
        p = unary_kernel(np.exp2)(np.asarray(e, e_dt.np))
        return _mul(a, np.asarray(p, e_dt.np))
    dt = _dtype.result_type(a, e)
    # Floating and complex results keep their dtype; integer ones are the default float.
    dt = dt.np if dt.category >= _dtype.FLOAT else _dtype.defaults.float.np
    x = np.asarray(a)
    if x.dtype.kind != "f" and x.dtype not in HALF:
        # Integer, bool and complex inputs: input * 2 ** other, PyTorch's composite
        return binary_kernel(lambda x, y: x * np.exp2(y), to_float=True)(a, e).astype(dt)
    # A floating input scales by its integer exponent exactly (C's ldexp: ldexp(-0.0, 200)
    # is -0.0, where -0.0 * 2 ** 200 overflows to NaN), the exponent converted to C's int
    # (wrapping: 2 ** 40 is 0); half types in float32, then rounded.
    x = x.astype(np.float32 if dt in HALF else dt, copy=False)
    return np.ldexp(x, np.asarray(e).astype(np.int32)).astype(dt, copy=False)


def _ldexp_self_check(a) -> None:
    """ldexp_ writes a floating result into `a`: PyTorch's error for any other dtype."""
    dt = _dtype.result_type(a)
    if dt.category < _dtype.FLOAT:
        raise RuntimeError(f"ldexp can't be cast to the desired output type {dt.legacy}")


def _ldexp_inplace_kernel(a, e):
    _ldexp_self_check(a)
    return _ldexp_checked(a, e)


def _ldexp_inplace_meta(a, e):
    _ldexp_self_check(a)
    return _ldexp_meta(a, e)


def _ldexp_meta(a, e):
    _ldexp_check(_dtype.result_type(a), _dtype.result_type(e))
    return binary_meta(to_float=True)(a, e)


def _ldexp_samples(rng, dt):
    return [Sample((rand_array(rng, a, dt), rng.integers(-3, 4, size=b)), name=f"{a}x{b}")
            for a, b in (((3, 4), (3, 4)), ((3, 4), (4,)), ((), ()))]


def _pow2(e, dt):
    if not hasattr(e, "_dtype"):  # a Python number
        return 2.0 ** e if e >= 0 or isinstance(e, float) else 0.0
    f = e.to(dt).exp2()
    # PyTorch raises 2 to an integer exponent in integers: negative exponents give 0.
    return f if e.dtype.is_floating_point or e.dtype.is_complex else f * (e >= 0)


def _ldexp_derivative(g, e, out, needs):
    """out = a * 2**e: a's gradient is g * 2**e, e's is g * out * ln 2 (conjugated, the
    conjugate Wirtinger rule, for complex values); `needs`: which operands required grad
    when the node was recorded, so that the other product is not computed."""
    ga = g * cj(_pow2(e, g.dtype)) if needs[0] else None
    ge = g * cj(out) * _LN2 if needs[1] else None
    return (ga, ge)


ldexp = register(
    "ldexp.Tensor", kernel=_ldexp_kernel, meta=_ldexp_meta, node="LdexpBackward0",
    derivative=_ldexp_derivative,
    # PyTorch saves the exponent and the result (not self): e's gradient is out * ln 2.
    # The exponent only for self's gradient, so it may change in place when only it
    # requires grad (as in PyTorch, whose node then holds no `other`).
    save=lambda out, a, e: (e if a._rg else None, out, (a._rg, getattr(e, "_rg", False))),
    samples=_ldexp_samples, public="ldexp", tensor_args=(0, 1),
    gradcheck=False,  # PyTorch's gradient is 0 for negative integer exponents; so is ours
    saved_names=("other", "result", ""), result_order="operands",
    tensors_only=("input", "other"))
_ldexp_checked = inplace_checks_first(_ldexp_kernel)
ldexp_ = inplace_variant(ldexp, "ldexp_", kernel=_ldexp_inplace_kernel, meta=_ldexp_inplace_meta)


def _frexp_kernel(a):
    if a.dtype.kind != "f" and a.dtype not in HALF:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    m, e = np.frexp(a.astype(np.float32) if a.dtype.itemsize == 2 else a)
    m, e = m.astype(a.dtype), e.astype(np.int32)
    if not m.size:  # (empty results keep a's strides, as PyTorch's)
        return strided_empty(m, elem_strides(a)), strided_empty(e, elem_strides(a))
    return m, e


def _frexp_meta(a):
    if not a.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    return [Spec(tuple(a.shape), a.dtype), Spec(tuple(a.shape), _dtype.int32)]


frexp = register(
    "frexp.Tensor", kernel=_frexp_kernel, meta=_frexp_meta, node="FrexpBackward0",
    derivative=lambda grads, e: (grads[0] / e.to(grads[0].dtype).exp2(),),
    save=lambda out, a: (out[1],), samples=unary_samples(), nondiff_outputs=(1,),
    public="frexp", saved_names=("exponent",))


def _fminmax(name, ufunc, node):
    def derivative(g, a, b):
        # Where both are NaN or equal, PyTorch's gradient goes to `self`.
        take_a = (a == a.fmin(b)) if name == "fmin" else (a == a.fmax(b))
        take_a = take_a | b.isnan()
        # masked_fill: exactly 0 for the other operand, even for an infinite gradient.
        return (g.masked_fill(~take_a, 0), g.masked_fill(take_a, 0))

    base = binary_kernel(ufunc)
    message = f"{name} not implemented for complex tensors."

    def kernel(a, b):
        if result_np(a, b).kind == "c":
            raise RuntimeError(message)
        return base(a, b)

    def meta(a, b):
        spec = binary_meta()(a, b)
        if spec.dtype.category == _dtype.COMPLEX:
            raise RuntimeError(message)
        return spec

    kernel.ufunc = ufunc  # float arrays of one dtype: the recorders call it themselves
    return register(name, kernel=kernel, meta=meta, node=node,
                    derivative=derivative, save=lambda out, a, b: (a, b),
                    samples=binary_samples(scalars=()), tensor_args=(0, 1),
                    saved_names=("self", "other"), tensors_only=("input", "other"))


fmin = _fminmax("fmin", np.fmin, "FminBackward0")
fmax = _fminmax("fmax", np.fmax, "FmaxBackward0")


def _c_gcd(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Euclid's algorithm as PyTorch's C++ runs it, for arrays of one integer dtype: C's
    abs and remainder, so the dtype's minimum (whose abs wraps to itself) can give a
    negative gcd (gcd(int16 -32768, 255) is -1), where NumPy's gcd gives a positive one."""
    a, b = np.broadcast_arrays(np.abs(a), np.abs(b))
    a, b = a.copy(), b.copy()
    while True:
        live = a != 0
        if not live.any():
            return b
        c = a
        a = np.where(live, np.fmod(b, np.where(live, a, 1)), 0).astype(b.dtype, copy=False)
        b = np.where(live, c, b)


def _gcd(a, b):
    dt = a.dtype
    info = np.iinfo(dt)
    if (np.asarray(a) == info.min).any() or (np.asarray(b) == info.min).any():
        return _c_gcd(a, b)
    return np.gcd(a, b)


def _lcm(a, b):
    dt = a.dtype
    info = np.iinfo(dt)
    if not ((np.asarray(a) == info.min).any() or (np.asarray(b) == info.min).any()):
        return np.lcm(a, b)
    g = _c_gcd(a, b)
    with np.errstate(all="ignore"):
        safe = np.where(g == 0, 1, g)
        q = np.fmod(a, safe)  # exact division, truncating as C's: a / g = (a - a % g) / g
        q = (a - q) // safe
        return np.where(g == 0, 0, np.abs(q * b)).astype(dt, copy=False)


def _int_only(name, ufunc):
    fn = {"gcd": _gcd, "lcm": _lcm}[name]

    def kernel(a, b):
        dt = result_np(a, b)
        if dt.kind not in "iu":
            raise not_implemented_for(name + "_cpu", dt)
        return fn(as_dtype(np.asarray(a), dt), as_dtype(np.asarray(b), dt))

    def meta(a, b):
        dt = _dtype.result_type(a, b)
        if dt.category != _dtype.INT:
            raise not_implemented_for(name + "_cpu", dt)
        return binary_meta()(a, b)

    def samples(rng, dt):
        return [Sample((rng.integers(-12, 13, size=a), rng.integers(-12, 13, size=b)),
                       name=f"{a}x{b}") for a, b in (((3, 4), (3, 4)), ((3, 4), (4,)), ((), ()))]

    return register(name, kernel=kernel, meta=meta, differentiable=False, samples=samples,
                    result_order="operands", tensors_only=("input", "other"))


gcd = _int_only("gcd", np.gcd)
lcm = _int_only("lcm", np.lcm)
gcd_ = inplace_variant(gcd, "gcd_", differentiable=False, kernel=inplace_checks_first(gcd.kernel))
lcm_ = inplace_variant(lcm, "lcm_", differentiable=False, kernel=inplace_checks_first(lcm.kernel))


# ---------------------------------------------------------------- bool tests


def _bool_unary(name, fn, complex_error):
    def refusal(dt):
        return complex_error if dt.category == _dtype.COMPLEX else None

    return register(name, kernel=_refusing(lambda a: fn(a), refusal),
                    meta=_refusing(lambda a: Spec(tuple(a.shape), _dtype.bool_), refusal),
                    differentiable=False, samples=unary_samples(), result_order="operands")


signbit = _bool_unary("signbit", np.signbit,
                      NotImplementedError("signbit is not implemented for complex tensors."))
isneginf = _bool_unary("isneginf", np.isneginf,
                       RuntimeError("isneginf does not support complex inputs."))
isposinf = _bool_unary("isposinf", np.isposinf,
                       RuntimeError("isposinf does not support complex inputs."))

# ---------------------------------------------------------------- xlogy numbers, clamp bounds


def _xlogy_scalar_samples(rng, dt):
    return [Sample((rand_array(rng, (3, 4), dt, (0.2, 3)), c)) for c in (2.5, 0.5)]


def _xlogy_other_kernel(a, b):
    # The number takes the tensor's float dtype (np.log of a Python float is float64).
    dt = float_np(result_np(a, b))
    if dt.kind == "c":
        raise not_implemented_for("xlogy_cpu", dt)
    if dt in HALF:  # (the number rounded to the half type first: 1e5 is float16's inf)
        b = np.asarray(b, np.float32).astype(dt).astype(np.float32)
        out = _xlogy_np(a.astype(np.float32), b, dt).astype(dt)
    else:
        out = _xlogy_np(a.astype(dt, copy=False), dt.type(b))
    # (an empty result is laid out over both operands, the number wrapped as one)
    return laid_if_empty(out, a, b)


xlogy_scalar_other = register(
    "xlogy.Scalar_Other", kernel=_xlogy_other_kernel,
    meta=binary_meta(to_float=True, real_only="xlogy_cpu"),
    node="XlogyBackward2", derivative=lambda g, b: (g * math.log(b) if b > 0 else g * math.nan,
                                                    None),
    save=lambda out, a, b: (b,), saved_names=("other",), public="xlogy",
    samples=lambda rng, dt: [Sample((rand_array(rng, (3, 4), dt), c)) for c in (2.5, 0.5)],
    result_order="operands", onnx=_ox.xlogy)
xlogy_scalar_self = register(
    "xlogy.Scalar_Self", kernel=_xlogy_kernel,
    meta=binary_meta(to_float=True, real_only="xlogy_cpu"),
    node="XlogyBackward1", derivative=lambda g, a, b: (None, g * a / b),
    save=lambda out, a, b: (a, b), saved_names=("self", "other"), public="xlogy",
    samples=lambda rng, dt: [Sample((c, rand_array(rng, (3, 4), dt, (0.2, 3))))
                             for c in (2.5, 0.0)], result_order="operands", onnx=_ox.xlogy)
xlogy_ = inplace_variant(xlogy, "xlogy_.Tensor", saves_self=True,
                         kernel=inplace_checks_first(xlogy.kernel))
xlogy_scalar_other_ = inplace_variant(xlogy_scalar_other, "xlogy_.Scalar_Other",
                                      kernel=inplace_checks_first(_xlogy_other_kernel))


def _clamp_bound_samples(rng, dt):
    return [Sample((rand_array(rng, a, dt), rand_array(rng, b, dt)), name=f"{a}x{b}")
            for a, b in (((3, 4), (3, 4)), ((3, 4), (4,)), ((), ()))]


clamp_max = register(
    "clamp_max", kernel=lambda a, hi: clamp_number_kernel(a, None, hi, real_part_ok=False),
    meta=lambda a, hi: clamp_number_meta(a, None, hi, real_part_ok=False),
    node="ClampMaxBackward0",
    derivative=lambda g, a, hi: (g * (a <= hi), None), save=lambda out, a, hi: (a, hi),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt), c)) for s, c in (
        ((3, 4), 0.0), ((3, 4), 0.5), ((), 0.0))], saved_names=("self", "max"),
    decomposition=lambda a, hi: a.clamp(None, hi), onnx=_ox.with_number("Min"))
clamp_min_tensor = register(
    "clamp_min.Tensor", kernel=binary_kernel(np.maximum, real_only="maximum_cpu"),
    meta=binary_meta(real_only="maximum_cpu"), node="ClampMinBackward1",
    derivative=lambda g, a, lo: (g * (a >= lo), g * (a < lo)), save=lambda out, a, lo: (a, lo),
    samples=_clamp_bound_samples, public="clamp_min", saved_names=("self", "min"),
    decomposition=lambda a, lo: call(clamp_tensor, a, lo, None), onnx=_ox.with_number("Max"))
clamp_max_tensor = register(
    "clamp_max.Tensor", kernel=binary_kernel(np.minimum, real_only="minimum_cpu"),
    meta=binary_meta(real_only="minimum_cpu"), node="ClampMaxBackward1",
    derivative=lambda g, a, hi: (g * (a <= hi), g * (a > hi)), save=lambda out, a, hi: (a, hi),
    samples=_clamp_bound_samples, public="clamp_max", saved_names=("self", "max"),
    decomposition=lambda a, hi: call(clamp_tensor, a, None, hi), onnx=_ox.with_number("Min"))
clamp_min_ = inplace_variant(clamp_min, "clamp_min_", saves_self=True,
                             kernel=clamp_number_inplace(clamp_min.kernel, complex_first=True))
clamp_max_ = inplace_variant(clamp_max, "clamp_max_", saves_self=True,
                             kernel=clamp_number_inplace(clamp_max.kernel, complex_first=True))
clamp_min_tensor_ = inplace_variant(clamp_min_tensor, "clamp_min_.Tensor", saves_self=True,
                                    kernel=inplace_checks_first(clamp_min_tensor.kernel))
clamp_max_tensor_ = inplace_variant(clamp_max_tensor, "clamp_max_.Tensor", saves_self=True,
                                    kernel=inplace_checks_first(clamp_max_tensor.kernel))


def _foreach_not_implemented(name: str):
    """The derivative of `name`, a foreach in-place form PyTorch has none for: its node
    raises when backward reaches it."""

    def derivative(g, *rest):
        raise RuntimeError(f"derivative for {name} is not implemented")

    derivative.not_implemented = True
    return derivative


# `_foreach_maximum_(tensors, number)` (and minimum_, a number or one per tensor): clamp_min_'s
# (clamp_max_'s) write per tensor, but PyTorch gives the in-place foreach forms with numbers
# no derivative, so a tensor written while recorded gets a node that raises in backward.
# (Spelled publicly as the clamp, whose values they are.)
foreach_maximum_scalar_ = inplace_variant(
    clamp_min, "_foreach_maximum_.Scalar", kernel=clamp_min_.kernel, node="NotImplemented",
    derivative=_foreach_not_implemented("_foreach_maximum_"), save=None, saved_names=(),
    gradcheck=False, onnx=None, public="clamp_min_")
foreach_minimum_scalar_ = inplace_variant(
    clamp_max, "_foreach_minimum_.Scalar", kernel=clamp_max_.kernel, node="NotImplemented",
    derivative=_foreach_not_implemented("_foreach_minimum_"), save=None, saved_names=(),
    gradcheck=False, onnx=None, public="clamp_max_")
