"""Complex numbers: `view_as_real` / `view_as_complex` (views across the real and complex
dtypes), `complex(real, imag)`, `polar(abs, angle)`, `angle`, `conj` and `conj_physical`.

Gradients follow PyTorch's convention for complex autograd: a tensor's gradient is the
conjugate Wirtinger derivative of a real loss, `dL/dx + i dL/dy` for `z = x + iy`, so each
derivative below is the adjoint of the op's real-linear map at the point. A real input of an
op that gives a complex result gets the real part (dispatch casts the gradient to the
input's dtype through `_dtype`'s rule, see `autograd.graph`).

`conj` computes the conjugate (PyTorch returns a lazily conjugated view with the same node,
`ConjBackward0`); `is_conj()` is therefore always False here.
"""

from __future__ import annotations

import functools

import numpy as np

from .. import _dtype
from .._dtype import COMPLEX, FLOAT, FROM_NP
from .._scalar_conversion import not_implemented_for
from ._util import Spec, broadcast_shapes, float_np, rand_array, shape_of
from .registry import Sample, inplace_variant, register


def complex_np(dt: np.dtype) -> np.dtype:
    """The NumPy complex dtype whose components are the floating dtype `dt`."""
    return np.dtype(np.complex64) if dt.itemsize <= 4 else np.dtype(np.complex128)


def complex_samples_array(rng, shape, dtype):
    """Random complex test data whose components have the real NumPy `dtype`."""
    return rand_array(rng, shape, complex_np(np.dtype(dtype)))


# ---------------------------------------------------------------- view_as_real / complex


def _view_as_real_check(dt) -> None:
    if dt.category != COMPLEX:
        raise RuntimeError("view_as_real is only supported for complex tensors")


def _view_as_real_kernel(a):
    _view_as_real_check(FROM_NP[a.dtype])
    r = a.real  # a NumPy view with the complex array's strides, in bytes
    return np.lib.stride_tricks.as_strided(r, a.shape + (2,), r.strides + (r.itemsize,))


def _view_as_real_meta(a):
    _view_as_real_check(a.dtype)
    return Spec(tuple(a.shape) + (2,), a.dtype.to_real(),
                tuple(2 * s for s in a.stride()) + (1,), a.storage_offset())


def _complex_unary_samples(shapes=((3, 4), (), (5,), (2, 0, 3))):
    def samples(rng, dtype):
        return [Sample((complex_samples_array(rng, s, dtype),), name=str(s)) for s in shapes]

    return samples


view_as_real = register(
    "view_as_real", kernel=_view_as_real_kernel, meta=_view_as_real_meta, view=True,
    node="ViewAsRealBackward0",
    derivative=lambda g: (call_op(view_as_complex, g.contiguous()),),
    samples=_complex_unary_samples())


def _view_as_complex_check(a) -> None:
    dt = a.dtype
    dt = FROM_NP[dt] if isinstance(dt, np.dtype) else dt
    if dt not in (_dtype.float16, _dtype.float32, _dtype.float64):
        raise RuntimeError("view_as_complex is only supported for half, float and double "
                           f"tensors, but got a tensor of scalar type: {dt.legacy}")
    if dt is _dtype.float16:
        raise RuntimeError("Unsupported dtype Half")
    shape = tuple(a.shape)
    if not shape or shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    strides = _strides(a)
    if strides[-1] != 1:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % 2 for s in strides[:-1]):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last dimension")


def _strides(a) -> tuple:
    if isinstance(a, np.ndarray):
        from .views import elem_strides

        return elem_strides(a)
    return tuple(a.stride())


def _view_as_complex_kernel(a):
    _view_as_complex_check(a)
    if a.size == 0:
        return np.empty(a.shape[:-1], complex_np(a.dtype))
    return a.view(complex_np(a.dtype))[..., 0]


def _view_as_complex_meta(a):
    _view_as_complex_check(a)
    if a.storage_offset() % 2:
        raise RuntimeError("Tensor must have a storage_offset divisible by 2")
    return Spec(tuple(a.shape)[:-1], a.dtype.to_complex(),
                tuple(s // 2 for s in a.stride()[:-1]), -(a.storage_offset() // 2))


view_as_complex = register(
    "view_as_complex", kernel=_view_as_complex_kernel, meta=_view_as_complex_meta, view=True,
    node="ViewAsComplexBackward0", derivative=lambda g: (call_op(view_as_real, g),),
    autocast="fp32",  # CPU autocast makes a bfloat16 pair a complex64
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt),), name=str(s))
                             for s in ((3, 2), (4, 3, 2), (2,))])


def call_op(op, *args):
    """Run a registry op (imported late: dispatch sits above the registry)."""
    from .._dispatch import call

    return call(op, *args)


# ---------------------------------------------------------------- complex / polar


def _pair_check(a, b) -> None:
    da, db = a.dtype, b.dtype
    da = FROM_NP[da] if isinstance(da, np.dtype) else da
    db = FROM_NP[db] if isinstance(db, np.dtype) else db
    if da.category != FLOAT or db.category != FLOAT or _dtype.bfloat16 in (da, db):
        raise RuntimeError("Expected both inputs to be Half, Float or Double tensors but got "
                           f"{da.legacy} and {db.legacy}")
    if da is not db:
        raise RuntimeError(f"Expected object of scalar type {da.legacy} but got scalar type "
                           f"{db.legacy} for second argument")
    if da is _dtype.float16:
        raise RuntimeError("Unsupported dtype Half")


def _compose(re, im):
    _pair_check(re, im)
    out = np.empty(np.broadcast_shapes(re.shape, im.shape), complex_np(re.dtype))
    out.real = re
    out.imag = im
    return out


def _pair_meta(a, b):
    _pair_check(a, b)
    return Spec(broadcast_shapes(shape_of(a), shape_of(b)), a.dtype.to_complex())


def _pair_samples(rng, dt):
    out = []
    for sa, sb in (((3, 4), (3, 4)), ((3, 4), (4,)), ((), ()), ((2, 1), (1, 3))):
        out.append(Sample((rand_array(rng, sa, dt), rand_array(rng, sb, dt, (0.1, 3.0))),
                          name=f"{sa}x{sb}"))
    return out


complex_ = register(
    "complex", kernel=_compose, meta=_pair_meta, node="ComplexBackward0",
    derivative=lambda g: (g.real, g.imag), samples=_pair_samples)


def _polar_kernel(r, theta):
    _pair_check(r, theta)
    return _compose(r * np.cos(theta), r * np.sin(theta))


def _polar_derivative(g, r, theta):
    # The adjoint of d(r e^{i theta}): Re(g conj(e^{i theta})) and Re(g conj(i z)).
    c, s = theta.cos(), theta.sin()
    gx, gy = g.real, g.imag
    return (gx * c + gy * s, r * (gy * c - gx * s))


polar = register(
    "polar", kernel=_polar_kernel, meta=_pair_meta, node="PolarBackward0",
    derivative=_polar_derivative, save=lambda out, r, theta: (r, theta), autocast="fp32",
    samples=lambda rng, dt: [Sample((b, a)) for a, b in
                             (s.args for s in _pair_samples(rng, dt))],
    saved_names=("abs", "angle"))


# ---------------------------------------------------------------- angle, conj


def _angle_kernel(a):
    if a.dtype.kind == "c":
        return np.angle(a).astype(a.real.dtype, copy=False)
    dt = float_np(a.dtype)
    # A real number's angle is 0, or pi for negative ones; NaN stays NaN.
    return np.where(a < 0, np.pi, np.where(np.isnan(a), a, 0)).astype(dt)


def _angle_meta(a):
    dt = a.dtype
    if dt.category == COMPLEX:
        dt = dt.to_real()
    elif dt.category != FLOAT:
        dt = _dtype.defaults.float
    return Spec(tuple(a.shape), dt)


def _angle_derivative(g, a):
    if not a.is_complex():  # piecewise constant
        return (g * 0,)
    x, y = a.real, a.imag
    r2 = x * x + y * y
    safe = r2 + (r2 == 0)  # no division by zero: the gradient is 0 where z is
    scale = g / safe
    return (call_op(complex_, -y * scale, x * scale),)


angle = register(
    "angle", kernel=_angle_kernel, meta=_angle_meta, node="AngleBackward0",
    derivative=_angle_derivative, save=lambda out, a: (a,),
    samples=lambda rng, dt: _complex_unary_samples()(rng, dt) + [
        Sample((rand_array(rng, (3, 4), dt),), name="real")],
    saved_names=("self",), result_order="operands")


def _same_dtype_meta(a):
    return Spec(tuple(a.shape), a.dtype)


conj = register(
    "_conj", kernel=np.conj, meta=_same_dtype_meta, node="ConjBackward0",
    derivative=lambda g: (call_op(conj, g),), samples=_complex_unary_samples(), public="conj",
    result_order="operands")
conj_physical = register(
    "conj_physical", kernel=np.conj, meta=_same_dtype_meta, node="ConjPhysicalBackward0",
    derivative=lambda g: (call_op(conj_physical, g),), samples=_complex_unary_samples(),
    result_order="operands")
conj_physical_ = inplace_variant(conj_physical, "conj_physical_", node="ConjPhysicalBackward1")


def sgn_complex(a):
    """`z / |z|` (0 where z is 0): `sgn` of a complex array."""
    r = np.abs(a)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(r == 0, 0, a / np.where(r == 0, 1, r)).astype(a.dtype, copy=False)


def sgn_complex_derivative(g, a):
    """The adjoint of d(z / |z|): `(g - Re(g conj(s)) s) / |z|`, 0 where z is 0."""
    r = a.abs()
    safe = r + (r == 0)
    s = a / safe
    proj = (g * s.conj_physical()).real
    return ((g - proj * s) / safe * (r != 0),)


# ---------------------------------------------------------------- ops without complex kernels

# PyTorch's error for each op (and its in-place forms) that has no complex kernel: the
# type and message it raises for a complex operand (`not_implemented_for` and the name of
# the kernel its message quotes, for PyTorch's `"<kernel>" not implemented for '<Dtype>'`).
# Without these, NumPy would order complex numbers lexicographically and return values.
# (remainder, floor_divide, atan2 and round.decimals raise theirs in their kernels, naming
# the result dtype or their own kernel.)
REAL_ONLY = {
    # (clamp's errors, and clamp.Tensor's, which name the result dtype, are comparison.py's:
    # a complex input's comes after the check that a bound is given.)
    ("maximum",): (RuntimeError, "maximum not implemented for complex tensors."),
    ("minimum",): (RuntimeError, "minimum not implemented for complex tensors."),
    ("floor", "floor_"): (NotImplementedError, "floor is not supported for complex inputs"),
    ("ceil", "ceil_"): (NotImplementedError, "ceil is not supported for complex inputs"),
    ("trunc", "trunc_"): (NotImplementedError, "trunc is not supported for complex inputs"),
    ("round", "round_"): (not_implemented_for, "round_vml_cpu"),
    ("max",): (not_implemented_for, "max_all"),
    ("min",): (not_implemented_for, "min_all"),
    ("max.dim",): (RuntimeError, "max(): does not support complex input"),
    ("min.dim",): (RuntimeError, "min(): does not support complex input"),
    ("argmax",): (RuntimeError, "argmax(): does not support complex input"),
    ("argmin",): (RuntimeError, "argmin(): does not support complex input"),
    ("amax",): (not_implemented_for, "max_values_cpu"),
    ("amin",): (not_implemented_for, "min_values_cpu"),
    ("sort", "sort.stable", "argsort"): (
        RuntimeError, " Sort does not support complex dtypes on CPU"),
    ("topk",): (RuntimeError, " topk does not support complex dtypes on CPU"),
    ("median", "nanmedian"): (not_implemented_for, "median_cpu"),
    ("median.dim", "nanmedian.dim"): (not_implemented_for, "median_out"),
    ("kthvalue",): (not_implemented_for, "kthvalue_cpu"),
    ("mode",): (not_implemented_for, "mode_cpu"),
    ("aminmax",): (not_implemented_for, "aminmax_cpu"),
    ("_unique2", "unique_consecutive"): (not_implemented_for, "unique"),
    ("unique_dim",): (not_implemented_for, "unique_dim"),
    ("erf", "erf_"): (not_implemented_for, "erf_vml_cpu"),
    ("gelu",): (not_implemented_for, "GeluKernelImpl"),
    ("leaky_relu", "leaky_relu_"): (not_implemented_for, "leaky_relu_cpu"),
    ("heaviside", "heaviside_"): (
        RuntimeError, "heaviside is not yet implemented for complex tensors."),
}


def _is_complex(x) -> bool:
    dt = getattr(x, "dtype", None)
    if isinstance(dt, np.dtype):
        return dt.kind == "c"
    return isinstance(dt, _dtype.dtype) and dt.category == COMPLEX


def _real_only(fn, error, message: str):
    """`fn` (a kernel or meta) raising `error` for a complex tensor argument."""

    @functools.wraps(fn)  # the kernel's name and module, as layers that read them expect
    def checked(*args, **kwargs):
        for x in args:
            if _is_complex(x):
                if error is not_implemented_for:
                    raise not_implemented_for(message, x.dtype)
                raise error(message)
        return fn(*args, **kwargs)

    checked.real_only = True
    return checked


def forbid_complex(registry) -> None:
    """Give each entry of `REAL_ONLY` registered by now PyTorch's error for complex inputs,
    once: run at import, once the op modules imported at start have registered their ops, and
    again after each deferred module's body (`deferred.after_execute`)."""
    for names, (error, message) in REAL_ONLY.items():
        for name in names:
            op = dict.get(registry, name)  # (a deferred module's op is not there yet)
            if op is None or getattr(op.kernel, "real_only", False):
                continue
            op.kernel = _real_only(op.kernel, error, message)
            op.meta = _real_only(op.meta, error, message)
