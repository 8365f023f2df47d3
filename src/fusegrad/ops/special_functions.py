"""torch.special's Hurwitz `zeta`, `ndtri`, the scaled Bessel functions `i0e`/`i1e`,
`xlog1py` (each with PyTorch's derivatives) and the Bessel functions `bessel_j0`,
`bessel_j1`, `spherical_bessel_j0` (no derivative, as in PyTorch). Kernels are NumPy's
(`_bessel_zeta_numpy.py`), computed in float64 and returned in the op's dtype.

`zeta`'s derivative exists for its second argument only; for the first it raises
PyTorch's NotImplementedError when backward reaches it.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype
from .._dispatch import call, save_result
from . import _special_kernels as _B
from ._util import (
    HALF,
    binary_meta,
    float_np,
    laid_if_empty,
    not_implemented_for,
    operand_order,
    rand_array,
    refuse_dtypes,
    result_np,
    unary_kernel,
    unary_meta,
    unary_samples,
)
from .registry import Sample, register

_SQRT_2PI = math.sqrt(2 * math.pi)


def _in_dtype(fn):
    """A binary kernel on arrays or Python numbers, in PyTorch's float result dtype."""
    def kernel(a, b):
        dt = float_np(result_np(a, b))
        x = np.asarray(a, np.float64)
        y = np.asarray(b, np.float64)
        # (an empty result laid out over both operands, a number wrapped as one)
        return laid_if_empty(np.asarray(fn(x, y)).astype(dt), a, b)
    return kernel


def _no_half(cpu_name: str, meta, kernel) -> dict:
    """Meta and kernel refusing float16 and bfloat16, for which PyTorch has no CPU kernel."""
    def checked_meta(*args):
        spec = meta(*args)
        if spec.dtype in (_dtype.float16, _dtype.bfloat16) or spec.dtype.is_complex:
            raise not_implemented_for(f"{cpu_name}_cpu", spec.dtype)
        return spec

    def checked_kernel(*args):
        if any(x.__class__ is complex or getattr(x, "dtype", None) is not None and
               x.dtype.kind == "c" for x in args):  # no complex kernel either
            dt = _dtype.result_type(*args)
            raise not_implemented_for(f"{cpu_name}_cpu", dt)
        out = kernel(*args)
        if out.dtype in HALF:
            raise not_implemented_for(f"{cpu_name}_cpu", out.dtype)
        return out

    return {"meta": checked_meta, "kernel": checked_kernel}


def _zeta_not_implemented():
    raise NotImplementedError("the derivative for 'zeta' is not implemented.")


# ---------------------------------------------------------------- zeta


def _zeta_derivative(g, x, q):
    if x.requires_grad:
        _zeta_not_implemented()
    return None, g * -x * call(special_zeta, x + 1, q)


def _zeta_samples(rng, dt):
    out = []
    for sa, sb in (((3, 4), (3, 4)), ((3, 4), (4,)), ((), ())):
        out.append(Sample((rand_array(rng, sa, dt, (1.5, 6)), rand_array(rng, sb, dt, (0.3, 4))),
                          name=f"{sa}x{sb}"))
    return out


special_zeta = register(
    "special_zeta", **_no_half("zeta", binary_meta(to_float=True), _in_dtype(_B.zeta)),
    node="SpecialZetaBackward0", derivative=_zeta_derivative,
    save=lambda out, x, q: (x, q), saved_names=("self", "other"), samples=_zeta_samples,
    tensor_args=(0, 1), gradcheck=False, tolerance={"float64": 1e-9})
special_zeta_self_scalar = register(
    "special_zeta.self_scalar",
    **_no_half("zeta", binary_meta(to_float=True), _in_dtype(_B.zeta)),
    node="SpecialZetaBackward1",
    derivative=lambda g, x, q: (None, g * -x * call(special_zeta_self_scalar, x + 1, q)),
    save=lambda out, x, q: (x, q), saved_names=("self", "other"), public="special_zeta",
    samples=lambda rng, dt: [Sample((c, rand_array(rng, (3, 4), dt, (0.3, 4))))
                             for c in (2.5, 4.0)], tolerance={"float64": 1e-9})


def _zeta_other_scalar_derivative(g):
    _zeta_not_implemented()


special_zeta_other_scalar = register(
    "special_zeta.other_scalar",
    **_no_half("zeta", binary_meta(to_float=True), _in_dtype(_B.zeta)),
    node="SpecialZetaBackward2", derivative=_zeta_other_scalar_derivative,
    save=lambda out, x, q: (), public="special_zeta", gradcheck=False,
    samples=lambda rng, dt: [Sample((rand_array(rng, (3, 4), dt, (1.5, 6)), c))
                             for c in (0.5, 2.0)], tolerance={"float64": 1e-9})

# ---------------------------------------------------------------- ndtri, i0e, i1e


special_ndtri = register(
    "special_ndtri", **_no_half("ndtri", unary_meta(), unary_kernel(operand_order(_B.ndtri))),
    result_order="operands",
    node="SpecialNdtriBackward0",
    derivative=lambda g, out: (g * _SQRT_2PI * (out.square() / 2).exp(),),
    save=save_result, saved_names=("result",),
    samples=unary_samples((0.02, 0.98)), domain=(0.02, 0.98))


def _i0e_derivative(g, a, out):
    return (g * (call(special_i1e, a) - a.sgn() * out),)


special_i0e = register(
    "special_i0e", kernel=unary_kernel(_B.i0e), meta=unary_meta(), node="SpecialI0EBackward0",
    derivative=_i0e_derivative, save=lambda out, a: (a, out),
    saved_names=("self", "result"), samples=unary_samples((-4, 4)), domain=(-4, 4))


def _i1e_derivative(g, a, out):
    # i1e' = i0e - i1e (sgn(x) + 1/x), which is 1/2 at 0.
    slope = call(special_i0e, a) - out * (a.sgn() + a.reciprocal())
    return (g * slope.masked_fill(a == 0, 0.5),)


special_i1e = register(
    "special_i1e", kernel=unary_kernel(_B.i1e), meta=unary_meta(), node="SpecialI1EBackward0",
    derivative=_i1e_derivative, save=lambda out, a: (a, out),
    saved_names=("self", "result"), samples=unary_samples((-4, 4)), domain=(-4, 4))

# ---------------------------------------------------------------- xlog1py


def _xlog1py_self_grad(g, a, b):
    # 0 where x is 0 and log1p(y) is not finite, as PyTorch masks it.
    return call(special_xlog1py, g, b).masked_fill((a == 0) & (b <= -1), 0)


def _xlog1py_samples(rng, dt):
    out = []
    for sa, sb in (((3, 4), (3, 4)), ((3, 4), (4,)), ((), ())):
        x = rand_array(rng, sa, dt, (-2, 2))
        if x.ndim:
            x.flat[0] = 0
        out.append(Sample((x, rand_array(rng, sb, dt, (-0.8, 3))), name=f"{sa}x{sb}"))
    return out


special_xlog1py = register(
    "special_xlog1py", kernel=_in_dtype(_B.xlog1py), meta=binary_meta(to_float=True),
    node="SpecialXlog1PyBackward0",
    derivative=lambda g, a, b: (_xlog1py_self_grad(g, a, b), g * a / (b + 1)),
    save=lambda out, a, b: (a, b), saved_names=("self", "other"), samples=_xlog1py_samples,
    tensor_args=(0, 1), result_order="operands")
special_xlog1py_self_scalar = register(
    "special_xlog1py.self_scalar", kernel=_in_dtype(_B.xlog1py),
    meta=binary_meta(to_float=True), node="SpecialXlog1PyBackward1",
    derivative=lambda g, a, b: (None, g * a / (b + 1)),
    save=lambda out, a, b: (a, b), saved_names=("self", "other"), public="special_xlog1py",
    samples=lambda rng, dt: [Sample((c, rand_array(rng, (3, 4), dt, (-0.8, 3))))
                             for c in (2.5, 0.0)], result_order="operands")


def _xlog1py_other_scalar_derivative(g, a, b):
    grad = call(special_xlog1py_other_scalar, g, b)
    return (grad.masked_fill(a == 0, 0) if b <= -1 else grad, None)


special_xlog1py_other_scalar = register(
    "special_xlog1py.other_scalar", kernel=_in_dtype(_B.xlog1py),
    meta=binary_meta(to_float=True), node="SpecialXlog1PyBackward2",
    derivative=_xlog1py_other_scalar_derivative, save=lambda out, a, b: (a, b),
    saved_names=("self", "other"), public="special_xlog1py",
    samples=lambda rng, dt: [Sample((rand_array(rng, (3, 4), dt), c)) for c in (2.5, -0.5)],
    result_order="operands")

# ---------------------------------------------------------------- Bessel j


def _no_grad_unary(name, fn, domain, **kw):
    return register(name, **_no_half(name.removeprefix("special_"), unary_meta(),
                                     unary_kernel(fn)),
                    differentiable=False, samples=unary_samples(domain), domain=domain, **kw)


# PyTorch's own float64 j0/j1 are off by up to 4e-7 between 5 and 10 (1e-8 below 5); these
# are accurate to about 1e-16, and compared with PyTorch to what its error allows.
special_bessel_j0 = _no_grad_unary("special_bessel_j0", _B.j0, (-12, 12),
                                   tolerance={"float64": 1e-6}, result_order="operands")
special_bessel_j1 = _no_grad_unary("special_bessel_j1", _B.j1, (-12, 12),
                                   tolerance={"float64": 1e-6}, result_order="operands")
special_spherical_bessel_j0 = _no_grad_unary("special_spherical_bessel_j0", _B.spherical_j0,
                                             (-12, 12), result_order="operands")


# PyTorch's CPU kernels have no complex forms.
refuse_dtypes(special_i0e, "i0e_cpu", "c")
refuse_dtypes(special_i1e, "i1e_cpu", "c")
for _op in (special_xlog1py, special_xlog1py_self_scalar, special_xlog1py_other_scalar):
    refuse_dtypes(_op, "xlog1py_cpu", "c", at=(0, 1))
