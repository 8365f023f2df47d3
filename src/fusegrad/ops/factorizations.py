"""Matrix factorizations: Cholesky, QR, SVD and the symmetric eigendecomposition (LU is in
`lu.py`).

Shared checks, `LinAlgError` and the batched LU live in `_linalg_common.py`.

Every kernel is batched over the leading dims. Singular vectors and eigenvectors are unique
only up to sign; fusegrad's (NumPy's LAPACK) may differ from PyTorch's (MKL) by a sign per
vector. The derivatives are PyTorch's formulas, written in fusegrad ops.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from .._dispatch import call
from ._linalg_common import (
    LinAlgError,
    batch_prefix,
    check_floating,
    check_matrix,
    check_square,
    check_square_float,
    eye_like,
    first_failure,
)
from ._util import F32, F64, Spec, dtype_of, rand_array
from .registry import REGISTRY, Sample, register

I32 = _dtype.int32


def _skew(x):
    return x - x.mT


def _int_spec(shape):
    return Spec(tuple(shape), I32)


# ---------------------------------------------------------------- cholesky


def _chol_np(a: np.ndarray):
    """Cholesky of the lower triangles, column by column; (L, info) with LAPACK's info."""
    n = a.shape[-1]
    b = a.reshape((int(np.prod(a.shape[:-2], dtype=np.int64)), n, n))
    low = np.zeros_like(b)
    info = np.zeros(len(b), np.int32)
    for j in range(n):
        d = b[:, j, j] - np.einsum("bk,bk->b", low[:, j, :j], low[:, j, :j])
        bad = ~(d > 0) & (info == 0)
        info[bad] = j + 1
        dj = np.sqrt(np.where(d > 0, d, 1))
        low[:, j, j] = dj
        rest = b[:, j + 1:, j] - np.einsum("bik,bk->bi", low[:, j + 1:, :j], low[:, j, :j])
        low[:, j + 1:, j] = rest / dj[:, None]
    return low.reshape(a.shape), info.reshape(a.shape[:-2])


def cholesky_np(a: np.ndarray, upper: bool, name: str, check: bool):
    """(factor, info) of `a` from its lower (or, for `upper`, upper) triangle."""
    src = np.swapaxes(a, -1, -2) if upper else a
    try:
        low = np.linalg.cholesky(src)
        info = np.zeros(a.shape[:-2], np.int32)
    except np.linalg.LinAlgError:
        low, info = _chol_np(src)
    if check:
        fail = first_failure(info)
        if fail is not None:
            raise LinAlgError(
                f"{name}: {batch_prefix(info, fail[0])}The factorization could not be "
                "completed because the input is not positive-definite (the leading minor of "
                f"order {fail[1]} is not positive-definite).")
    out = np.swapaxes(low, -1, -2) if upper else low
    return np.ascontiguousarray(out).astype(a.dtype, copy=False), info


def cholesky_backward(g, factor, upper):
    """PyTorch's gradient of A = L L^T: A's gradient is L^{-T} Phi(L^T gL) L^{-1}, symmetrized,
    with Phi taking the lower triangle and halving its diagonal."""
    solve_triangular = REGISTRY["linalg_solve_triangular"]  # by name: solvers.py imports us

    low, gl = (factor.mT, g.mT) if upper else (factor, g)
    phi = low.mT.matmul(gl).tril()
    phi = phi - phi.diagonal(0, -2, -1).diag_embed() * 0.5
    y = call(solve_triangular, low.mT, phi, True, True, False)  # L^{-T} Phi
    x = call(solve_triangular, low, y, False, False, False)  # ... L^{-1}: X L = Y
    return (x + x.mT) * 0.5


def _chol_ex_kernel(a, upper=False, check_errors=False):
    check_square_float("linalg.cholesky", a)
    return cholesky_np(a, upper, "linalg.cholesky", check_errors)


def _chol_ex_meta(a, upper=False, check_errors=False):
    check_square_float("linalg.cholesky", a)
    return Spec(tuple(a.shape), a.dtype), _int_spec(a.shape[:-2])


def spd_array(rng, shape, dtype):
    """A well-conditioned symmetric positive-definite batch of matrices."""
    x = rng.uniform(-1, 1, size=shape)
    n = shape[-1]
    return (x @ np.swapaxes(x, -1, -2) + n * np.eye(n)).astype(dtype)


def _spd_samples(extra=()):
    def samples(rng, dt):
        return [Sample((spd_array(rng, s, dt),) + e, name=f"{s} {e}")
                for s in ((3, 3), (2, 4, 4), (1, 1)) for e in ((),) + tuple(extra)]
    return samples


linalg_cholesky_ex = register(
    "linalg_cholesky_ex", autocast="fp32", kernel=_chol_ex_kernel, meta=_chol_ex_meta,
    node="LinalgCholeskyExBackward0",
    derivative=lambda grads, out, upper: (cholesky_backward(grads[0], out, upper), None, None),
    save=lambda out, a, upper=False, check_errors=False: (out[0], upper),
    samples=_spd_samples(((True,), (False, True))), nondiff_outputs=(1,),
    public="linalg_cholesky_ex", saved_names=("L", "upper"),
    gradcheck=False)  # reads one triangle: tests/test_linalg.py gradchecks symmetrized


def _chol_kernel(a, upper=False):
    check_square_float("cholesky", a)
    return cholesky_np(a, upper, "cholesky", True)[0]


cholesky = register(
    "cholesky", autocast="fp32", kernel=_chol_kernel,
    meta=lambda a, upper=False: (check_square_float("cholesky", a),
                                 Spec(tuple(a.shape), a.dtype))[1],
    node="CholeskyBackward0",
    derivative=lambda g, out, upper: (cholesky_backward(g, out, upper), None),
    save=lambda out, a, upper=False: (out, upper),
    samples=_spd_samples(((True,),)), saved_names=("result", "upper"),
    gradcheck=False)  # reads one triangle (see linalg_cholesky_ex)


# ---------------------------------------------------------------- qr


_QR_MODES = ("reduced", "complete", "r")


def _qr_check(a, mode):
    check_matrix("linalg.qr", a)
    check_floating("linalg.qr", a)
    if mode not in _QR_MODES:
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           "'reduced' (default), 'r', or 'complete'")


def _qr_kernel(a, mode="reduced"):
    _qr_check(a, mode)
    if a.size == 0:  # NumPy refuses empty batches: build the shapes directly
        meta = _qr_shapes(a.shape, mode)
        q = np.zeros(meta[0], a.dtype)
        if q.ndim >= 2:
            idx = np.arange(min(q.shape[-2:]))
            q[..., idx, idx] = 1
        return q, np.zeros(meta[1], a.dtype)
    if mode == "r":
        return np.zeros((0,), a.dtype), np.linalg.qr(a, mode="r").astype(a.dtype)
    q, r = np.linalg.qr(a, mode=mode)
    return q.astype(a.dtype, copy=False), r.astype(a.dtype, copy=False)


def _qr_shapes(shape, mode):
    *batch, m, n = shape
    batch = tuple(batch)
    k = min(m, n)
    if mode == "complete":
        return batch + (m, m), batch + (m, n)
    if mode == "r":
        return (0,), batch + (k, n)
    return batch + (m, k), batch + (k, n)


def _qr_meta(a, mode="reduced"):
    _qr_check(a, mode)
    qs, rs = _qr_shapes(tuple(a.shape), mode)
    return Spec(qs, a.dtype), Spec(rs, a.dtype)


def _copyltu(m):
    # The lower triangle mirrored into the upper one.
    return m.tril(-1).mT + m.tril()


def _qr_backward_tall(gq, gr, q, r):
    """A = QR with Q m x n, R n x n: (gQ + Q copyltu(M)) R^{-T}, M = R gR^T - gQ^T Q."""
    solve_triangular = REGISTRY["linalg_solve_triangular"]  # by name: solvers.py imports us

    m = r.matmul(gr.mT) - gq.mT.matmul(q)
    b = gq + q.matmul(_copyltu(m))
    return call(solve_triangular, r.mT, b, False, False, False)  # b R^{-T}: X R^T = b


def _qr_derivative(grads, q, r, mode):
    gq, gr = grads
    if mode == "r":
        raise RuntimeError(
            "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
            "Please use linalg.qr(A, mode='reduced') if you are going to differentiate "
            "through linalg.qr.")
    m, n = q.shape[-2], r.shape[-1]
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' "
                           "and nrows > ncols.")
    if m >= n:
        return (_qr_backward_tall(gq, gr, q, r), None)
    # Wide: A = [X | Y], R = [U | V], X = QU; Y = QV.
    u, gu = r[..., :, :m], gr[..., :, :m]
    v, gv = r[..., :, m:], gr[..., :, m:]
    y = q.matmul(v)
    gx = _qr_backward_tall(gq + y.matmul(gv.mT), gu, q, u)
    gy = q.matmul(gv)
    return (_cat_last(gx, gy), None)


def _cat_last(a, b):
    from .joins import cat

    return call(cat, [a, b], -1)


def _qr_samples(rng, dt):
    return [Sample((rand_array(rng, s, dt), mode), name=f"{s} {mode}")
            for s, mode in (((4, 3), "reduced"), ((3, 3), "complete"), ((2, 3, 5), "reduced"),
                            ((3, 4), "complete"), ((2, 3, 3), "reduced"))]


linalg_qr = register(
    "linalg_qr", autocast="fp32", kernel=_qr_kernel, meta=_qr_meta, node="LinalgQrBackward0",
    derivative=_qr_derivative,
    save=lambda out, a, mode="reduced": (out[0], out[1], mode), samples=_qr_samples,
    saved_names=("Q", "R", "mode"))


# ---------------------------------------------------------------- svd


def _svd_check(a, driver=None):
    check_matrix("linalg.svd", a)
    check_floating("linalg.svd", a)
    if driver is not None:  # as PyTorch on the CPU
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on "
                           "CUDA inputs with cuSOLVER backend.")


def _svd_kernel(a, full_matrices=True, compute_uv=True, driver=None):
    _svd_check(a, driver)
    m, n = a.shape[-2:]
    if a.size == 0:
        (us, ss, vs) = _svd_shapes(a.shape, full_matrices, compute_uv)
        u, vh = np.zeros(us, a.dtype), np.zeros(vs, a.dtype)
        for x in (u, vh):
            if x.ndim >= 2 and compute_uv:
                idx = np.arange(min(x.shape[-2:]))
                x[..., idx, idx] = 1
        return u, np.zeros(ss, a.dtype), vh
    if not compute_uv:
        s = np.linalg.svd(a, compute_uv=False)
        return np.zeros((0,), a.dtype), s.astype(a.dtype), np.zeros((0,), a.dtype)
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    return u.astype(a.dtype), s.astype(a.dtype), vh.astype(a.dtype)


def _svd_shapes(shape, full, compute_uv):
    *batch, m, n = shape
    batch = tuple(batch)
    k = min(m, n)
    if not compute_uv:
        return (0,), batch + (k,), (0,)
    if full:
        return batch + (m, m), batch + (k,), batch + (n, n)
    return batch + (m, k), batch + (k,), batch + (k, n)


def _svd_meta(a, full_matrices=True, compute_uv=True, driver=None):
    _svd_check(a, driver)
    return tuple(Spec(s, a.dtype) for s in _svd_shapes(tuple(a.shape), full_matrices,
                                                        compute_uv))


def svd_backward(gu, gs, gvh, u, s, vh, full_matrices):
    """PyTorch's SVD gradient (real case). Any of gU, gS, gVh may be None (an output that
    received no gradient): with neither gU nor gVh it is the values-only form, which stays
    finite at repeated singular values, where the full formula divides 0 by 0."""
    m, n = u.shape[-2], vh.shape[-1]
    k = s.shape[-1]
    if gs is None:
        gs = s.new_zeros(tuple(s.shape))
    if gu is None and gvh is None:
        if m >= n:
            return u.matmul(gs.unsqueeze(-1) * vh)
        return (u * gs.unsqueeze(-2)).matmul(vh)
    if gu is None:
        gu = u.new_zeros(tuple(u.shape))
    if gvh is None:
        gvh = vh.new_zeros(tuple(vh.shape))
    if full_matrices:  # only the first k singular vectors carry gradient
        u, vh = u[..., :, :k], vh[..., :k, :]
        gu, gvh = gu[..., :, :k], gvh[..., :k, :]
    v, gv = vh.mT, gvh.mT
    s2 = s * s
    e = s2.unsqueeze(-2) - s2.unsqueeze(-1) + eye_like(s, k)
    ret = (_skew(u.mT.matmul(gu)) * s.unsqueeze(-2)
           + s.unsqueeze(-1) * _skew(v.mT.matmul(gv))) / e
    ret = ret + gs.diag_embed()
    if m > n:
        ret = u.matmul(ret)
        gus = gu / s.unsqueeze(-2)
        ret = ret + gus - u.matmul(u.mT.matmul(gus))
        return ret.matmul(vh)
    if m < n:
        ret = ret.matmul(vh)
        sgvh = gvh / s.unsqueeze(-1)
        ret = ret + sgvh - sgvh.matmul(v).matmul(vh)
        return u.matmul(ret)
    return u.matmul(ret.matmul(vh))


def _svd_derivative(grads, u, s, vh, full_matrices, compute_uv):
    if not compute_uv:
        raise RuntimeError(
            "linalg_svd_backward: Setting compute_uv to false in torch.svd doesn't compute "
            "singular matrices, and hence we cannot compute backward. Please use "
            "torch.svd(compute_uv=True)")
    gu, gs, gvh = grads
    return (svd_backward(gu, gs, gvh, u, s, vh, full_matrices), None, None, None)


def _diag_array(rng, shape, dt, signs=False):
    """A (batch of) diagonal matrices with distinct entries: a sample whose singular vectors
    and eigenvectors LAPACK implementations agree on, signs included (random matrices give
    MKL's and OpenBLAS's different sign choices)."""
    m, n = shape[-2:]
    k = min(m, n)
    out = np.zeros(shape)
    idx = np.arange(k)
    vals = rng.permutation(k) * 1.5 + 1.0
    if signs:
        vals = vals * np.where(rng.random(k) < 0.5, -1, 1)
    out[..., idx, idx] = vals
    return out.astype(dt)


def _svd_samples(rng, dt):
    return [Sample((_diag_array(rng, s, dt), full), name=f"{s} full={full}")
            for s, full in (((3, 3), False), ((4, 3), False), ((3, 5), False),
                            ((2, 4, 4), False), ((4, 3), True), ((2, 3), True))]


linalg_svd = register(
    "_linalg_svd", kernel=_svd_kernel, meta=_svd_meta, node="LinalgSvdBackward0",
    derivative=_svd_derivative,
    save=lambda out, a, full_matrices=True, compute_uv=True, driver=None: (
        out[0], out[1], out[2], full_matrices, compute_uv),
    samples=_svd_samples, public="svd", saved_names=("U", "S", "Vh", "full_matrices", ""),
    # Finite differences flip LAPACK's sign choices: tests/test_linalg.py gradchecks
    # sign-invariant functions of the outputs.
    gradcheck=False,
    # `svdvals` or a norm over the singular values alone: gU and gVh stay None, and the
    # derivative takes the values-only form (zeros would make 0 / 0 at repeated values).
    undefined_grads=True)


# ---------------------------------------------------------------- eigh


def _eigh_check(a, uplo):
    check_square("linalg.eigh", a)
    dt = dtype_of(a)
    if dt.np not in (F32, F64):
        raise NotImplementedError(f"\"linalg_eigh_cpu\" not implemented for '{dt.legacy}'")
    if uplo not in ("L", "U", "l", "u"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {uplo}")


def _eigh_kernel(a, UPLO="L", compute_v=True):  # noqa: N803 (ATen's argument name)
    _eigh_check(a, UPLO)
    if a.size == 0:
        v = np.zeros(a.shape if compute_v else (0,), a.dtype)
        return np.zeros(a.shape[:-1], a.dtype), v
    if not compute_v:
        return np.linalg.eigvalsh(a, UPLO.upper()).astype(a.dtype), np.zeros((0,), a.dtype)
    w, v = np.linalg.eigh(a, UPLO.upper())
    return w.astype(a.dtype), v.astype(a.dtype)


def _eigh_meta(a, UPLO="L", compute_v=True):  # noqa: N803
    _eigh_check(a, UPLO)
    return (Spec(tuple(a.shape[:-1]), a.dtype),
            Spec(tuple(a.shape) if compute_v else (0,), a.dtype))


def eigh_backward(gl, gv, w, v):
    """PyTorch's gradient of the symmetric eigendecomposition: V (skew(V^T gV)/2 / E +
    diag(gL)) V^T, with E[i, j] = L[j] - L[i] (ones on the diagonal). Not symmetrized.
    gL or gV may be None (an output that received no gradient): without gV it is the
    values-only form, finite at repeated eigenvalues."""
    if gl is None:
        gl = w.new_zeros(tuple(w.shape))
    if gv is None:
        return v.matmul(gl.unsqueeze(-1) * v.mT)
    n = w.shape[-1]
    e = w.unsqueeze(-2) - w.unsqueeze(-1) + eye_like(w, n)
    vhgv = v.mT.matmul(gv)
    inner = (vhgv - vhgv.mT) * 0.5 / e + gl.diag_embed()
    return v.matmul(inner.matmul(v.mT))


def _eigh_derivative(grads, w, v, compute_v):
    if not compute_v:
        raise RuntimeError(
            "linalg_eigh_backward: torch.linalg.eigh(A) or torch.linalg.eigvalsh(A) was "
            "called without computing eigenvectors, so backward is not available.")
    gl, gv = grads
    return (eigh_backward(gl, gv, w, v), None, None)


def _eigh_samples(rng, dt):
    out = [Sample((_diag_array(rng, s, dt, signs=True), uplo), name=f"{s} {uplo}")
           for s, uplo in (((3, 3), "L"), ((2, 4, 4), "U"), ((1, 1), "L"))]
    return out


linalg_eigh = register(
    "_linalg_eigh", kernel=_eigh_kernel, meta=_eigh_meta, node="LinalgEighBackward0",
    derivative=_eigh_derivative,
    save=lambda out, a, UPLO="L", compute_v=True: (out[0], out[1], compute_v),
    samples=_eigh_samples, public="eigh", saved_names=("eigenvalues", "eigenvectors", ""),
    gradcheck=False,  # signs and one triangle, as for the SVD
    undefined_grads=True)  # eigvalsh at repeated eigenvalues, as the SVD's values
