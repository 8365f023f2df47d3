"""Inverses, determinants, linear solvers (general, triangular, Cholesky, least squares),
pseudo-inverse and matrix exponential. Checks and the batched LU are in `_linalg_common.py`;
derivatives are PyTorch's formulas in fusegrad ops.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype
from .._dispatch import call
from ._linalg_common import (
    LAPACK_NP,
    LinAlgError,
    adj,
    batch_prefix,
    check_floating,
    check_matrix,
    check_square,
    check_square_float,
    col_major_results,
    col_major_strides,
    eye_like,
    first_failure,
    lu_np,
    real_np,
)
from ._util import HALF, Spec, broadcast_shapes, dtype_of, not_implemented_for, rand_array
from .factorizations import I32, spd_array
from .registry import Sample, register

# LAPACK's results are batches of column-major matrices in PyTorch: these results too
# (`linalg.solve`'s only for a matrix right side on the left: else it transposes back).
_COL0, _COL01 = col_major_results((0,)), col_major_results((0, 1))
_SOLVE_COL = col_major_results((0,), when=lambda a, b, left=True, check_errors=False: (
    left and not is_vector_rhs(tuple(a.shape), tuple(b.shape))))


def well_conditioned(rng, shape, dtype):
    """Random matrices with a dominant diagonal (well away from singular)."""
    m, n = shape[-2:]
    x = rng.uniform(-1, 1, size=shape) + max(m, n) * np.eye(m, n)
    return x.astype(dtype)


def _square_samples(rng, dt):
    return [Sample((well_conditioned(rng, s, dt),), name=str(s))
            for s in ((3, 3), (2, 4, 4), (1, 1), (2, 1, 2, 2))]


def _batch(a):
    return tuple(a.shape[:-2])


# ---------------------------------------------------------------- inverse


def _singular_inverse_error(name, info):
    fail = first_failure(info)
    if fail is not None:
        raise LinAlgError(
            f"{name}: {batch_prefix(info, fail[0])}The diagonal element {fail[1]} is zero, the "
            "inversion could not be completed because the input matrix is singular.")


def _inv_kernel(a, check_errors=False):
    check_square_float("linalg.inv", a)
    info = np.zeros(a.shape[:-2], np.int32)
    try:
        out = np.linalg.inv(a)
    except np.linalg.LinAlgError:
        info = lu_np(a)[2]
        if check_errors:
            _singular_inverse_error("linalg.inv", info)
        out = np.full(a.shape, np.nan, a.dtype)
        ok = info == 0
        if ok.any():
            out[ok] = np.linalg.inv(a[ok])
    return out.astype(a.dtype, copy=False), info


linalg_inv_ex = register(
    "linalg_inv_ex", autocast="fp32", kernel=_COL0(_inv_kernel),
    meta=_COL0(lambda a, check_errors=False: (check_square_float("linalg.inv", a), (
        Spec(tuple(a.shape), a.dtype), Spec(_batch(a), I32)))[1]),
    node="LinalgInvExBackward0",
    derivative=lambda grads, inv: (-(adj(inv).matmul(grads[0].matmul(adj(inv)))), None),
    save=lambda out, a, check_errors=False: (out[0],), samples=_square_samples,
    nondiff_outputs=(1,), public="linalg_inv_ex", saved_names=("inverse",))


# ---------------------------------------------------------------- det, slogdet


def _prod_others(s):
    """prod_{j != i} s_j along the last dim (no division, so zeros are fine)."""
    from .joins import cat

    ones = s[..., :1] * 0 + 1
    left = call(cat, [ones, s[..., :-1]], -1).cumprod(-1)
    right = call(cat, [ones, s.flip(-1)[..., :-1]], -1).cumprod(-1).flip(-1)
    return left * right


def _det_derivative(g, a, det):
    from .._thread_state import active as _active
    from ..autograd.grad_mode import is_grad_enabled
    from .comparison import where
    from .factorizations import linalg_svd

    def through_svd():
        # The gradient of det(U) prod(S) det(Vh): the cofactors, also at singular matrices.
        u, s, vh = call(linalg_svd, a, False, True, None)
        alpha = (call(linalg_det, u) * call(linalg_det, vh)).conj()
        d = _prod_others(s) * (alpha * g).unsqueeze(-1)
        return (u * d.unsqueeze(-2)).matmul(vh)

    if not is_grad_enabled():
        # First order, as PyTorch: (g conj(det)) A^{-H}, through a solve, where det != 0;
        # the cofactors through the SVD where det == 0 (the solve has no answer there).
        d = (g * det.conj()).unsqueeze(-1).unsqueeze(-1)
        sol = call(linalg_solve_ex, adj(a), d * eye_like(a), True, False)[0]
        zero = (det == 0).unsqueeze(-1).unsqueeze(-1)
        sol = sol.masked_fill(zero, 0.0)
        if not _active.modes and (a.is_meta or not bool(zero.any())):
            return (sol,)  # (eager: the SVD only where a matrix needs it)
        return (call(where, zero, through_svd(), sol),)
    # Differentiable again (create_graph): through the SVD for every matrix. (PyTorch solves
    # where no matrix is nearly singular; just off a singular matrix that loses the precision
    # gradgradcheck needs, so the nodes of a double backward differ from PyTorch's, not the
    # values.)
    return (through_svd(),)


def _det_check(a) -> None:
    """det's checks: PyTorch runs its LU on half-precision input, which then refuses it."""
    check_square("linalg.det", a)
    dt = dtype_of(a)
    if dt.np in HALF:
        raise not_implemented_for("lu_cpu", dt)
    check_floating("linalg.det", a)


linalg_det = register(
    "linalg_det",
    kernel=lambda a: (_det_check(a), np.asarray(np.linalg.det(a)).astype(a.dtype))[1],
    meta=lambda a: (_det_check(a), Spec(_batch(a), a.dtype))[1],
    node="LinalgDetBackward0", derivative=_det_derivative,
    save=lambda out, a: (a, out), samples=_square_samples, public="det",
    saved_names=("A", "result"))


def _slogdet_kernel(a):
    check_square_float("linalg.slogdet", a)
    sign, logabs = np.linalg.slogdet(a)
    return np.asarray(sign).astype(a.dtype), np.asarray(logabs).astype(real_np(a.dtype))


def _slogdet_derivative(grads, a, sign):
    """PyTorch's slogdet_backward: g A^{-H}, with g = g_logabs - i Im(conj(g_sign) sign) for
    complex A (a real A's sign is piecewise constant)."""
    gsign, glog = grads
    g = glog
    if a.dtype.is_complex:
        g = glog - (gsign.conj() * sign).imag * 1j
    d = g.unsqueeze(-1).unsqueeze(-1) * eye_like(a)
    return (call(linalg_solve_ex, adj(a), d, True, False)[0],)


linalg_slogdet = register(
    "linalg_slogdet", kernel=_slogdet_kernel,
    meta=lambda a: (check_square_float("linalg.slogdet", a),
                    (Spec(_batch(a), a.dtype), Spec(_batch(a), a.dtype.to_real())))[1],
    node="LinalgSlogdetBackward0", derivative=_slogdet_derivative,
    save=lambda out, a: (a, out[0]), samples=_square_samples, public="slogdet",
    saved_names=("A", "sign"))


# ---------------------------------------------------------------- solve


def is_vector_rhs(a_shape, b_shape) -> bool:
    """PyTorch's rule: B is a (batch of) vector(s) when 1-D or shaped as A without its last
    dim."""
    return len(b_shape) == 1 or (len(b_shape) == len(a_shape) - 1
                                 and tuple(b_shape) == tuple(a_shape[:-1]))


def _solve_shapes(name, a, b, left):
    """(broadcast batch, result shape, vector case), with PyTorch's checks."""
    check_square_float(name, a)
    check_floating(name, b)
    da, db = dtype_of(a), dtype_of(b)
    if da is not db:
        raise RuntimeError(f"{name}: Expected A and B to have the same dtype, but found A of "
                           f"type {da.legacy} and B of type {db.legacy} instead")
    a_shape, b_shape = tuple(a.shape), tuple(b.shape)
    vector = is_vector_rhs(a_shape, b_shape)
    bm = b_shape + (1,) if vector else b_shape  # a column, even for XA = B (as PyTorch)
    if not vector and len(b_shape) < 2:
        raise RuntimeError(f"{name}: The input tensor B must have at least 2 dimensions.")
    n = a_shape[-1]
    rows = bm[-2] if left else bm[-1]
    if rows != n:
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"{name}: Incompatible shapes of A and B for the equation {eq} "
                           f"({a_shape[-2]}x{n} and {bm[-2]}x{bm[-1]})")
    batch = broadcast_shapes(a_shape[:-2], bm[:-2])
    out = batch + ((n,) if vector else bm[-2:])
    return batch, out, vector


def _solve_np(a, b, left, vector):
    """Solve in NumPy with broadcasting; (X, A broadcast) or LinAlgError."""
    if not left and not vector:
        a, b = np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2)
    elif not left:
        a = np.swapaxes(a, -1, -2)
    bm = b[..., None] if vector else b
    batch = broadcast_shapes(a.shape[:-2], bm.shape[:-2])
    ab = np.broadcast_to(a, batch + a.shape[-2:])
    bb = np.broadcast_to(bm, batch + bm.shape[-2:])
    x = np.linalg.solve(ab, bb) if ab.size and bb.size else np.zeros(bb.shape, a.dtype)
    if vector:
        x = x[..., 0]
    elif not left:
        x = np.swapaxes(x, -1, -2)
    return np.ascontiguousarray(x).astype(a.dtype, copy=False), ab


def _solve_kernel(a, b, left=True, check_errors=False):
    batch, _, vector = _solve_shapes("linalg.solve", a, b, left)
    info = np.zeros(a.shape[:-2], np.int32)  # one per matrix of A, as PyTorch reports
    try:
        x, _ = _solve_np(a, b, left, vector)
    except np.linalg.LinAlgError:
        ab = np.broadcast_to(a, batch + a.shape[-2:])
        info = lu_np(a)[2]
        fail = first_failure(info)
        if check_errors and fail is not None:
            raise LinAlgError(f"torch.linalg.solve: {batch_prefix(info, fail[0])}The solver "
                              "failed because the input matrix is singular.") from None
        with np.errstate(all="ignore"):
            inv = _inv_kernel(ab)[0]
        bm = b[..., None] if vector else b
        x = inv @ bm if left else bm @ inv
        x = x[..., 0] if vector else x
    return x, info


def _solve_meta(a, b, left=True, check_errors=False):
    _, out, _ = _solve_shapes("linalg.solve", a, b, left)
    return Spec(out, a.dtype), Spec(tuple(a.shape[:-2]), I32)


def _solve_derivative(grads, a, x, left, vector):
    g = grads[0]
    gb = call(linalg_solve_ex, adj(a), g, left, False)[0]
    xc = x.conj() if x.dtype.is_complex else x
    if vector:
        ga = -(gb.unsqueeze(-1) * xc.unsqueeze(-2)) if left else \
            -(xc.unsqueeze(-1) * gb.unsqueeze(-2))
    else:
        ga = -gb.matmul(adj(x)) if left else -adj(x).matmul(gb)
    return (ga, gb, None, None)


def _solve_samples(rng, dt):
    out = []
    for a, b, left in (((3, 3), (3, 2), True), ((2, 3, 3), (3,), True),
                       ((2, 3, 3), (2, 3), True), ((3, 3), (2, 1, 3, 4), True),
                       ((3, 3), (2, 3), False)):
        out.append(Sample((well_conditioned(rng, a, dt), rand_array(rng, b, dt), left),
                          name=f"{a} {b} left={left}"))
    return out


linalg_solve_ex = register(
    "linalg_solve_ex", kernel=_SOLVE_COL(_solve_kernel), meta=_SOLVE_COL(_solve_meta),
    node="LinalgSolveExBackward0",
    derivative=_solve_derivative,
    save=lambda out, a, b, left=True, check_errors=False: (
        a, out[0], left, is_vector_rhs(tuple(a.shape), tuple(b.shape))),
    samples=_solve_samples, nondiff_outputs=(1,), public="linalg_solve_ex",
    saved_names=("A", "result", "left", ""))


# ---------------------------------------------------------------- triangular solves


def _triangle(a, upper, unit):
    t = np.triu(a) if upper else np.tril(a)
    if unit:
        t = t.copy()
        idx = np.arange(a.shape[-1])
        t[..., idx, idx] = 1
    return t


def _tri_solve_np(t, b, left):
    """X with t X = b (left) or X t = b, batched with broadcasting; inf/nan where singular."""
    if not left:
        t, b = np.swapaxes(t, -1, -2), np.swapaxes(b, -1, -2)
    batch = broadcast_shapes(t.shape[:-2], b.shape[:-2])
    tb = np.broadcast_to(t, batch + t.shape[-2:])
    bb = np.broadcast_to(b, batch + b.shape[-2:])
    if not (tb.size and bb.size):
        x = np.zeros(bb.shape, t.dtype)
    else:
        try:
            x = np.linalg.solve(tb, bb)
        except np.linalg.LinAlgError:  # a zero on the diagonal: substitution gives inf/nan
            x = _substitute(tb, bb)
    if not left:
        x = np.swapaxes(x, -1, -2)
    return np.ascontiguousarray(x).astype(t.dtype, copy=False)


def _substitute(t, b):
    n = t.shape[-1]
    upper = not np.tril(t, -1).any()
    x = np.zeros(b.shape, t.dtype)
    order = range(n - 1, -1, -1) if upper else range(n)
    for i in order:
        acc = b[..., i, :] - np.einsum("...k,...kj->...j", t[..., i, :], x)
        x[..., i, :] = acc / t[..., i, i, None]
    return x


def _tri_check(name, a, b, left):
    check_square_float(name, a)
    check_matrix(name, b, "B")
    n = a.shape[-1]
    rows = b.shape[-2] if left else b.shape[-1]
    if rows != n:
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"{name}: Incompatible shapes of A and B for the equation {eq} "
                           f"({a.shape[-2]}x{n} and {b.shape[-2]}x{b.shape[-1]})")
    return broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])) + tuple(b.shape[-2:])


def _st_kernel(a, b, upper, left=True, unitriangular=False):
    _tri_check("linalg.solve_triangular", a, b, left)
    return _tri_solve_np(_triangle(a, upper, unitriangular), b, left)


def _project(ga, upper, unit):
    return ga.triu(1 if unit else 0) if upper else ga.tril(-1 if unit else 0)


def _st_derivative(g, a, x, upper, left, unit):
    gb = call(solve_triangular, adj(a), g, not upper, left, unit)
    ga = -gb.matmul(adj(x)) if left else -adj(x).matmul(gb)
    return (_project(ga, upper, unit), gb, None, None, None)


def _st_samples(rng, dt):
    return [Sample((well_conditioned(rng, a, dt), rand_array(rng, b, dt), up, left, unit),
                   name=f"{a} {b} up={up} left={left} unit={unit}")
            for a, b, up, left, unit in (((3, 3), (3, 2), True, True, False),
                                         ((2, 3, 3), (3, 4), False, True, True),
                                         ((3, 3), (2, 3), False, False, False),
                                         ((3, 3), (2, 2, 3), True, False, True))]


solve_triangular = register(
    "linalg_solve_triangular", kernel=_COL0(_st_kernel),
    meta=_COL0(lambda a, b, upper, left=True, unitriangular=False: Spec(
        _tri_check("linalg.solve_triangular", a, b, left), a.dtype)),
    node="LinalgSolveTriangularBackward0", derivative=_st_derivative,
    save=lambda out, a, b, upper, left=True, unitriangular=False: (
        a, out, upper, left, unitriangular),
    samples=_st_samples, public="solve_triangular",
    saved_names=("self", "result", "upper", "left", "unitriangular"))


def _ts_kernel(b, a, upper=True, transpose=False, unitriangular=False):
    shape = _tri_check("triangular_solve", a, b, True)
    t = _triangle(a, upper, unitriangular)
    if transpose:
        t = np.swapaxes(t, -1, -2)
    x = _tri_solve_np(t, b, True)
    coeff = np.ascontiguousarray(np.broadcast_to(a, shape[:-2] + a.shape[-2:]))
    return x, coeff


def _ts_meta(b, a, upper=True, transpose=False, unitriangular=False):
    shape = _tri_check("triangular_solve", a, b, True)
    return Spec(shape, b.dtype), Spec(shape[:-2] + tuple(a.shape[-2:]), a.dtype)


def _ts_derivative(grads, a, x, upper, transpose, unit):
    gx, gm = grads
    complex_ = a.dtype.is_complex
    gb = call(triangular_solve, gx, a.conj() if complex_ else a, upper, not transpose, unit)[0]
    if transpose:
        ga = -(x.conj() if complex_ else x).matmul(gb.mT)
    else:
        ga = -gb.matmul(adj(x))
    return (gb, _project(ga, upper, unit) + gm, None, None, None)


triangular_solve = register(
    "triangular_solve", autocast="fp32",
    kernel=_COL01(_ts_kernel), meta=_COL01(_ts_meta), node="TriangularSolveBackward0",
    derivative=_ts_derivative,
    save=lambda out, b, a, upper=True, transpose=False, unitriangular=False: (
        a, out[0], upper, transpose, unitriangular),
    samples=lambda rng, dt: [
        Sample((rand_array(rng, b, dt), well_conditioned(rng, a, dt), up, tr, unit),
               name=f"{b} {a} {up} {tr} {unit}")
        for b, a, up, tr, unit in (((3, 2), (3, 3), True, False, False),
                                   ((2, 3, 1), (3, 3), False, True, False),
                                   ((3, 4), (2, 3, 3), True, True, True))],
    saved_names=("A", "solution", "upper", "transpose", "unitriangular"))


# ---------------------------------------------------------------- cholesky_solve / inverse


def _cs_checks(b, low):
    """PyTorch's checks of cholesky_solve, in its order and words."""
    for name, x in (("b", b), ("u", low)):
        if x.ndim < 2:
            raise RuntimeError(f"{name} should have at least 2 dimensions, but has {x.ndim} "
                               "dimensions instead")
    db, dl = dtype_of(b), dtype_of(low)
    if db is not dl:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type "
                           f"{db.legacy} and A of type {dl.legacy} instead.")
    m, n = low.shape[-2:]
    if m != n:
        raise RuntimeError(f"A must be batches of square matrices, but they are {m} by {n} "
                           "matrices")
    if not (db.is_floating_point or db.is_complex) or db.np in HALF:
        raise not_implemented_for("cholesky_solve_cpu", db)


def _cs_kernel(b, low, upper=False):
    _cs_checks(b, low)
    broadcast_shapes(tuple(b.shape[:-2]), tuple(low.shape[:-2]))  # (b named first, as PyTorch)
    t = np.swapaxes(low, -1, -2).conj() if upper else low  # the lower factor (U = L^H)
    y = _tri_solve_np(np.tril(t), b, True)
    return _tri_solve_np(np.triu(np.swapaxes(t, -1, -2).conj()), y, True)


def _cs_meta(b, low, upper=False):
    _cs_checks(b, low)
    batch = broadcast_shapes(tuple(b.shape[:-2]), tuple(low.shape[:-2]))
    return Spec(batch + tuple(b.shape[-2:]), b.dtype)


def _cs_derivative(g, low, x, upper):
    gb = call(cholesky_solve, g, low, upper)
    common = gb.matmul(adj(x))
    common = common + adj(common)
    gl = -low.matmul(common) if upper else -common.matmul(low)
    return (gb, gl, None)


def _tri_factor(rng, shape, dt, upper):
    low = np.linalg.cholesky(spd_array(rng, shape, np.float64))
    return (np.swapaxes(low, -1, -2) if upper else low).astype(dt)


cholesky_solve = register(
    "cholesky_solve", autocast="fp32",
    kernel=_COL0(_cs_kernel), meta=_COL0(_cs_meta), node="CholeskySolveBackward0",
    derivative=_cs_derivative,
    save=lambda out, b, low, upper=False: (low, out, upper),
    samples=lambda rng, dt: [
        Sample((rand_array(rng, b, dt), _tri_factor(rng, a, dt, up), up), name=f"{b} {a} {up}")
        for b, a, up in (((3, 2), (3, 3), False), ((2, 3, 1), (3, 3), True))],
    saved_names=("input2", "result", "upper"),
    gradcheck=False)


def _ci_kernel(low, upper=False):
    check_square_float("cholesky_inverse", low)
    t = np.swapaxes(low, -1, -2).conj() if upper else low  # the lower factor (U = L^H)
    # LAPACK's potri refuses a factor with a zero on its diagonal (info: the first one's
    # 1-based index), which PyTorch raises.
    zero = np.diagonal(t, 0, -2, -1) == 0
    if zero.size:
        _singular_inverse_error("cholesky_inverse",
                                np.where(zero.any(-1), zero.argmax(-1) + 1, 0).astype(np.int32))
    inv = _tri_solve_np(np.tril(t), np.broadcast_to(np.eye(low.shape[-1], dtype=low.dtype),
                                                    low.shape), True)
    out = np.swapaxes(inv, -1, -2).conj() @ inv  # (L L^H)^{-1} = L^{-H} L^{-1}
    return np.ascontiguousarray(out).astype(low.dtype, copy=False)


def _ci_derivative(g, low, out, upper):
    common = out.matmul((g + adj(g)).matmul(out))
    return (-low.matmul(common) if upper else -common.matmul(low), None)


cholesky_inverse = register(
    "cholesky_inverse", autocast="fp32", kernel=_COL0(_ci_kernel),
    meta=_COL0(lambda low, upper=False: (check_square_float("cholesky_inverse", low),
                                         Spec(tuple(low.shape), low.dtype))[1]),
    node="CholeskyInverseBackward0", derivative=_ci_derivative,
    save=lambda out, low, upper=False: (low, out, upper),
    samples=lambda rng, dt: [Sample((_tri_factor(rng, a, dt, up), up), name=f"{a} {up}")
                             for a, up in (((3, 3), False), ((2, 4, 4), True))],
    saved_names=("self", "result", "upper"),
    gradcheck=False)


# ---------------------------------------------------------------- pinv, lstsq


def _pinv_check(a):
    dt = dtype_of(a)
    if len(a.shape) < 2 or dt.np not in LAPACK_NP:
        shape = ", ".join(str(s) for s in a.shape)
        raise RuntimeError(f"linalg.pinv({dt.legacy}{{[{shape}]}}): expected a tensor with 2 "
                           "or more dimensions of float, double, cfloat or cdouble types")


def pinv_np(a, atol=None, rtol=None, hermitian=False):
    """The pseudo-inverse with PyTorch's tolerance rule: singular values at most
    max(atol, rtol * largest) are dropped; rtol defaults to eps * max(m, n) unless a positive
    atol is given. `atol` and `rtol` may be arrays (one tolerance per matrix, broadcast
    against the batch: the result's batch is their broadcast)."""
    m, n = a.shape[-2:]
    if rtol is None:
        eps = np.finfo(real_np(a.dtype)).eps * max(m, n)
        if atol is None:
            rtol = eps
        elif np.ndim(atol):  # (per matrix: a positive atol leaves rtol 0)
            rtol = np.where(np.asarray(atol) > 0, 0.0, eps)
        else:
            rtol = eps if atol <= 0 else 0.0
    atol = 0.0 if atol is None else atol
    if a.size == 0:
        return np.zeros(a.shape[:-2] + (n, m), a.dtype)
    # Each matrix's tolerances against its singular values (a trailing axis of one).
    atol, rtol = np.asarray(atol)[..., None], np.asarray(rtol)[..., None]
    if hermitian:
        w, v = np.linalg.eigh(a)
        s = np.abs(w)
        tol = np.maximum(atol, rtol * s.max(-1, keepdims=True))
        winv = np.where(s > tol, 1 / np.where(s > tol, w, 1), 0)
        out = (v * winv[..., None, :]) @ np.swapaxes(v, -1, -2).conj()
    else:
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        tol = np.maximum(atol, rtol * s[..., :1])
        sinv = np.where(s > tol, 1 / np.where(s > tol, s, 1), 0)
        out = (np.swapaxes(vh, -1, -2).conj() * sinv[..., None, :]) @ \
            np.swapaxes(u, -1, -2).conj()
    return np.ascontiguousarray(out).astype(a.dtype, copy=False)


def _pinv_kernel(a, atol=None, rtol=None, hermitian=False):
    _pinv_check(a)
    return pinv_np(a, atol, rtol, hermitian)


def pinv_backward(g, pinv, a):
    """PyTorch's gradient of the pseudo-inverse (constant rank)."""
    m, n = a.shape[-2], a.shape[-1]
    ph, gh = adj(pinv), adj(g)
    if m <= n:
        k = gh.matmul(pinv)
        kph = k.matmul(ph)
        return (-adj(pinv.matmul(k)) + kph - a.matmul(pinv).matmul(kph)
                + ph.matmul(pinv).matmul(gh - k.matmul(a)))
    k = pinv.matmul(gh)
    phk = ph.matmul(k)
    return (-adj(k.matmul(pinv)) + (gh - a.matmul(k)).matmul(pinv).matmul(ph)
            + phk - phk.matmul(pinv).matmul(a))


linalg_pinv = register(
    "linalg_pinv.atol_rtol_float", kernel=_pinv_kernel,
    meta=lambda a, atol=None, rtol=None, hermitian=False: (_pinv_check(a), Spec(
        tuple(a.shape[:-2]) + (a.shape[-1], a.shape[-2]), a.dtype))[1],
    node="LinalgPinvBackward0",
    derivative=lambda g, a, out: (pinv_backward(g, out, a), None, None, None),
    save=lambda out, a, atol=None, rtol=None, hermitian=False: (a, out),
    samples=lambda rng, dt: [Sample((well_conditioned(rng, s, dt),), name=str(s))
                             for s in ((3, 3), (4, 3), (3, 5), (2, 3, 2))] + [
        Sample((spd_array(rng, (3, 3), dt), None, None, True), name="hermitian")],
    public="pinv", saved_names=("self", "result", "", ""),
    gradcheck=False)  # the hermitian sample reads one triangle; tests/test_linalg.py


def _pinv_tensor_check(a, atol, rtol) -> tuple:
    """pinv's checks with tensor tolerances; the batch shape of the result (A's batch
    broadcast with the tolerances' shapes)."""
    _pinv_check(a)
    for name, t in (("atol", atol), ("rtol", rtol)):
        if t is not None and dtype_of(t).category == _dtype.COMPLEX:
            raise RuntimeError(f"torch.linalg.pinv: {name} tensor of complex type is not "
                               f"supported. Got {dtype_of(t).legacy}")
    batch = tuple(a.shape[:-2])
    if not math.prod(a.shape):  # (an empty input's result keeps its own batch)
        return batch
    shapes = [tuple(t.shape) for t in (atol, rtol) if t is not None] + [batch]
    return broadcast_shapes(*shapes)


def _pinv_tensor_kernel(a, atol=None, rtol=None, hermitian=False):
    _pinv_tensor_check(a, atol, rtol)
    return pinv_np(a, None if atol is None else np.asarray(atol, np.float64),
                   None if rtol is None else np.asarray(rtol, np.float64), hermitian)


linalg_pinv_tensor = register(
    "linalg_pinv.atol_rtol_tensor", kernel=_pinv_tensor_kernel,
    meta=lambda a, atol=None, rtol=None, hermitian=False: Spec(
        _pinv_tensor_check(a, atol, rtol) + (a.shape[-1], a.shape[-2]), a.dtype),
    node="LinalgPinvBackward0", nondiff_args=(1, 2),
    derivative=lambda g, a, out: (pinv_backward(g, out, a), None, None, None),
    save=lambda out, a, atol=None, rtol=None, hermitian=False: (a, out),
    samples=lambda rng, dt: [Sample((well_conditioned(rng, (3, 4, 5), dt),
                                     np.array([0.1, 1.0, 0.0]), None), name="atol"),
                             Sample((well_conditioned(rng, (2, 3, 3), dt), None,
                                     np.array([[0.5], [0.0]])), name="rtol broadcast")],
    public="pinv", saved_names=("self", "result", "", ""),
    gradcheck=False)


_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _lstsq_shapes(a, b, driver):
    da, db = dtype_of(a), dtype_of(b)
    if da is not db:  # (PyTorch's first check)
        raise RuntimeError("torch.linalg.lstsq: Expected input and other to have the same "
                           f"dtype, but got input's dtype {da.legacy} and other's dtype "
                           f"{db.legacy}")
    check_matrix("torch.linalg.lstsq", a, "input")
    if len(a.shape) < len(b.shape) or len(a.shape) - len(b.shape) > 1:
        raise RuntimeError("torch.linalg.lstsq: input.dim() must be greater or equal to "
                           "other.dim() and (input.dim() - other.dim()) <= 1")
    vector = len(a.shape) == len(b.shape) + 1
    bm = tuple(b.shape) + (1,) if vector else tuple(b.shape)
    if a.shape[-2] != bm[-2]:
        msg = "input.size(-2) should match other.size(-2)" if not vector else \
            "input.size(-2) should match other.size(-1)"
        raise RuntimeError(f"torch.linalg.lstsq: {msg}")
    check_floating("torch.linalg.lstsq", a)
    if driver is not None and driver not in _LSTSQ_DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of "
                           "(gels, gelsy, gelsd, gelss)")
    batch = broadcast_shapes(tuple(a.shape[:-2]), bm[:-2])
    m, n = a.shape[-2:]
    sol = batch + ((n,) if vector else (n, bm[-1]))
    driver = driver or "gelsy"
    res = batch + ((bm[-1],) if not vector else ()) if m > n and driver != "gelsy" else (0,)
    rank = batch if driver != "gels" else (0,)
    sv = batch + (min(m, n),) if driver in ("gelsd", "gelss") else (0,)
    return vector, sol, res, rank, sv


def _lstsq_kernel(a, b, rcond=None, driver=None):
    vector, sol, res, rank_s, sv_s = _lstsq_shapes(a, b, driver)
    m, n = a.shape[-2:]
    bm = b[..., None] if vector else b
    batch = sol[:len(sol) - (1 if vector else 2)]
    ab = np.broadcast_to(a, batch + (m, n))
    bb = np.broadcast_to(bm, batch + bm.shape[-2:])
    if rcond is None or rcond < 0:
        rcond = np.finfo(real_np(a.dtype)).eps * max(m, n)
    x = pinv_np(ab, 0.0, rcond) @ bb
    rdt = real_np(a.dtype)
    s = (np.linalg.svd(ab, compute_uv=False) if ab.size
         else np.zeros(batch + (min(m, n),), rdt))
    smax = s[..., :1] if s.shape[-1] else np.zeros(batch + (1,))
    ranks = (s > rcond * smax).sum(-1).astype(np.int64)
    resid = np.zeros(res, rdt)  # (real, as the residuals are, complex input or not)
    if res != (0,):
        full = ranks == n
        r = (np.abs(ab @ x - bb) ** 2).sum(-2)
        resid = np.where(full[..., None], r, 0).reshape(res).astype(rdt)
    out = np.ascontiguousarray(x[..., 0]) if vector else _lstsq_layout(x, max(m, n))
    return (out.astype(a.dtype, copy=False), resid,
            ranks.reshape(rank_s) if rank_s != (0,) else np.zeros((0,), np.int64),
            s.astype(rdt) if sv_s != (0,) else np.zeros((0,), rdt))


def _lstsq_layout(x: np.ndarray, rows: int) -> np.ndarray:
    """`x` (..., n, k) as PyTorch's solution: the first n rows of a batch of column-major
    (..., rows, k) matrices (LAPACK solves in place in B's buffer of max(m, n) rows)."""
    buf = np.swapaxes(np.zeros(x.shape[:-2] + (x.shape[-1], rows), x.dtype), -1, -2)
    buf[..., :x.shape[-2], :] = x
    return buf[..., :x.shape[-2], :]


def _lstsq_meta(a, b, rcond=None, driver=None):
    vector, sol, res, rank, sv = _lstsq_shapes(a, b, driver)
    rdt = a.dtype.to_real()  # residuals and singular values are real
    strides = None
    if not vector:  # (the layout `_lstsq_layout` gives)
        strides = col_major_strides(sol[:-2] + (max(a.shape[-2:]), sol[-1]))
    return (Spec(sol, a.dtype, strides), Spec(res, rdt), Spec(rank, _dtype.int64),
            Spec(sv, rdt))


def _lstsq_derivative(grads, a, b, vector):
    gx = grads[0]
    pinv = call(linalg_pinv, a, None, None, False)
    gxm = gx.unsqueeze(-1) if vector else gx
    bm = b.unsqueeze(-1) if vector else b
    ga = pinv_backward(gxm.matmul(adj(bm)), pinv, a)
    gb = adj(pinv).matmul(gxm)
    return (ga, gb.squeeze(-1) if vector else gb, None, None)


linalg_lstsq = register(
    "linalg_lstsq", autocast="fp32",
    kernel=_lstsq_kernel, meta=_lstsq_meta, node="LinalgLstsqBackward0",
    derivative=_lstsq_derivative,
    save=lambda out, a, b, rcond=None, driver=None: (a, b, len(a.shape) == len(b.shape) + 1),
    samples=lambda rng, dt: [
        Sample((well_conditioned(rng, a, dt), rand_array(rng, b, dt)), name=f"{a} {b}")
        for a, b in (((3, 3), (3, 2)), ((5, 3), (5, 2)), ((2, 4, 3), (2, 4)))],
    nondiff_outputs=(3,), public="lstsq", saved_names=("self", "b", ""))


# ---------------------------------------------------------------- matrix_exp


def expm_np(a: np.ndarray) -> np.ndarray:
    """exp(A) by scaling and squaring with a degree-18 Taylor polynomial, in float64 (or
    complex128)."""
    x = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    n = a.shape[-1]
    if x.size == 0:
        return x.astype(a.dtype)
    norm = float(np.abs(x).sum(-2).max()) if x.size else 0.0
    squarings = max(0, int(math.ceil(math.log2(norm))) + 1) if norm > 0.5 else 0
    x = x / (2.0 ** squarings)
    result = np.broadcast_to(np.eye(n, dtype=x.dtype), x.shape).copy()
    term = result.copy()
    for k in range(1, 19):
        term = term @ x / k
        result += term
    for _ in range(squarings):
        result = result @ result
    return result.astype(a.dtype)


def _mexp_derivative(g, a):
    from .joins import cat

    n = a.shape[-1]
    at = adj(a)  # the adjoint of the differential is the differential at A^H
    top = call(cat, [at, g], -1)
    bottom = call(cat, [at * 0, at], -1)
    big = call(matrix_exp, call(cat, [top, bottom], -2))
    return (big[..., :n, n:],)


matrix_exp = register(
    "linalg_matrix_exp",
    kernel=lambda a: (check_square_float("linalg.matrix_exp", a), expm_np(a))[1],
    meta=lambda a: (check_square_float("linalg.matrix_exp", a),
                    Spec(tuple(a.shape), a.dtype))[1],
    node="LinalgMatrixExpBackward0", derivative=_mexp_derivative,
    save=lambda out, a: (a,),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt, (-1, 1)),), name=str(s))
                             for s in ((3, 3), (2, 2, 2), (1, 1))],
    public="matrix_exp", saved_names=("self",))
