"""Matrix factorizations: Cholesky, QR, SVD, the Hermitian and the general eigendecomposition
(LU is in `lu.py`), for real and complex matrices.

Shared checks, `LinAlgError` and the batched LU live in `_linalg_common.py`.

Every kernel is batched over the leading dims. Singular vectors and eigenvectors are unique
only up to sign (a phase for complex ones); fusegrad's (NumPy's LAPACK) may differ from
PyTorch's (MKL) by one per vector. The derivatives are PyTorch's formulas, written in fusegrad
ops, with conjugate transposes (`adj`) where the real formulas transpose: a complex input's
gradient is the conjugate Wirtinger derivative, PyTorch's convention. A loss that depends on
the complex vectors' phases raises PyTorch's error.
"""

from __future__ import annotations

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
    eye_like,
    first_failure,
    real_np,
)
from ._util import Spec, contiguous_strides, dtype_of, not_implemented_for, rand_array, strided_copy
from .arithmetic import not_implemented_derivative as _not_implemented
from .registry import REGISTRY, Sample, register

I32 = _dtype.int32

# LAPACK's results are batches of column-major matrices in PyTorch: these results too.
_COL0, _COL1 = col_major_results((0,)), col_major_results((1,))
_COL01, _COL02 = col_major_results((0, 1)), col_major_results((0, 2))


def _skew(x):
    return x - adj(x)


def _int_spec(shape):
    return Spec(tuple(shape), I32)


# ---------------------------------------------------------------- cholesky


def _chol_np(a: np.ndarray):
    """Cholesky of the lower triangles, column by column; (L, info) with LAPACK's info.
    Complex input is Hermitian: the diagonal's imaginary parts are not read, as potrf.
    Where a matrix fails at column j, what LAPACK's column-by-column potrf leaves there is
    kept, as PyTorch returns it: the failing pivot's value A[j,j] - |L[j,:j]|^2 on the
    diagonal, and the input's own entries below it and in the later columns."""
    n = a.shape[-1]
    b = a.reshape((int(np.prod(a.shape[:-2], dtype=np.int64)), n, n))
    low = np.zeros_like(b)
    info = np.zeros(len(b), np.int32)
    for j in range(n):
        active = info == 0  # (the matrices not failed at an earlier column)
        row = low[:, j, :j]
        d = b[:, j, j].real - np.einsum("bk,bk->b", row, row.conj()).real
        bad = ~(d > 0) & active
        info[bad] = j + 1
        dj = np.sqrt(np.where(d > 0, d, 1))
        rest = b[:, j + 1:, j] - np.einsum("bik,bk->bi", low[:, j + 1:, :j], row.conj())
        low[:, j, j] = np.where(active, np.where(bad, d, dj), b[:, j, j])
        low[:, j + 1:, j] = np.where((active & ~bad)[:, None], rest / dj[:, None],
                                     b[:, j + 1:, j])
    return low.reshape(a.shape), info.reshape(a.shape[:-2])


def cholesky_np(a: np.ndarray, upper: bool, name: str, check: bool):
    """(factor, info) of `a` from its lower (or, for `upper`, upper) triangle. The upper
    factor is the lower one's conjugate transpose (A = U^H U)."""
    src = np.swapaxes(a, -1, -2).conj() if upper else a
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
    out = np.swapaxes(low, -1, -2).conj() if upper else low
    return np.ascontiguousarray(out).astype(a.dtype, copy=False), info


def cholesky_backward(g, factor, upper):
    """PyTorch's gradient of A = L L^H: A's gradient is L^{-H} Phi(L^H gL) L^{-1}, made
    Hermitian, with Phi taking the lower triangle and halving its diagonal."""
    solve_triangular = REGISTRY["linalg_solve_triangular"]  # by name: solvers.py imports us

    low, gl = (adj(factor), adj(g)) if upper else (factor, g)
    phi = adj(low).matmul(gl).tril()
    phi = phi - phi.diagonal(0, -2, -1).diag_embed() * 0.5
    # Made Hermitian before the solves (L^{-H} sym(Phi) L^{-1} is the same matrix), so the
    # last node is a triangular solve, as in PyTorch's double backward.
    phi = (phi + adj(phi)) * 0.5
    y = call(solve_triangular, adj(low), phi, True, True, False)  # L^{-H} Phi
    return call(solve_triangular, low, y, False, False, False)  # ... L^{-1}: X L = Y


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
    "linalg_cholesky_ex", autocast="fp32", kernel=_COL0(_chol_ex_kernel),
    meta=_COL0(_chol_ex_meta),
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
    "cholesky", autocast="fp32", kernel=_COL0(_chol_kernel),
    meta=_COL0(lambda a, upper=False: (check_square_float("cholesky", a),
                                       Spec(tuple(a.shape), a.dtype))[1]),
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


def _real_diag_scaled(x, factor):
    """`x` with the real parts of its diagonal multiplied by `factor` (the imaginary parts
    kept), out of place and differentiable."""
    d = x.diagonal(0, -2, -1)
    part = d.real if x.dtype.is_complex else d
    return x + (part * (factor - 1)).diag_embed()


def _qr_derivative(grads, q, r, mode):
    """PyTorch's linalg_qr_backward. With M = gR R^H - Q^H gQ: for m >= n,
    gA = (gQ + Q syminvadj(triu(M))) R^{-H}; for m < n (A = [X | Y], R = [U | V]),
    gA = [Q trilImInvAdjSkew(-M) U^{-H} | 0] + Q gR."""
    from .joins import cat

    solve_triangular = REGISTRY["linalg_solve_triangular"]  # by name: solvers.py imports us
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
    if gq is None and gr is None:
        return (None, None)
    if gq is not None:
        qhgq = adj(q).matmul(gq)
        ga = gr.matmul(adj(r)) - qhgq if gr is not None else -qhgq
    else:
        ga = gr.matmul(adj(r))
    if m >= n:
        t = ga.triu()
        ga = q.matmul(_real_diag_scaled(t + adj(t), 0.5))
        if gq is not None:
            ga = ga + gq
        return (call(solve_triangular, adj(r), ga, False, False, False), None)
    x = -ga
    t = (x - adj(x)).tril()
    if t.dtype.is_complex:  # halve the imaginary parts of the diagonal
        d = t.diagonal(0, -2, -1)
        t = t - (d.imag * 0.5).diag_embed() * 1j
    ga = q.matmul(t)
    ga = call(solve_triangular, adj(r[..., :, :m]), ga, False, False, False)
    ga = call(cat, [ga, ga.new_zeros(tuple(r.shape[:-1]) + (n - m,))], -1)
    if gr is not None:
        ga = ga + q.matmul(gr)
    return (ga, None)


def _cat_last(a, b):
    from .joins import cat

    return call(cat, [a, b], -1)


def _qr_samples(rng, dt):
    return [Sample((rand_array(rng, s, dt), mode), name=f"{s} {mode}")
            for s, mode in (((4, 3), "reduced"), ((3, 3), "complete"), ((2, 3, 5), "reduced"),
                            ((3, 4), "complete"), ((2, 3, 3), "reduced"))]


linalg_qr = register(
    "linalg_qr", autocast="fp32", kernel=_COL01(_qr_kernel), meta=_COL01(_qr_meta),
    node="LinalgQrBackward0",
    derivative=_qr_derivative,
    save=lambda out, a, mode="reduced": (out[0], out[1], mode), samples=_qr_samples,
    saved_names=("Q", "R", "mode"), undefined_grads=True)


# ---------------------------------------------------------------- svd


def _svd_check(a, driver=None):
    check_matrix("linalg.svd", a)
    check_floating("linalg.svd", a)
    if driver is not None:  # as PyTorch on the CPU
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on "
                           "CUDA inputs with cuSOLVER backend.")


def _svd_kernel(a, full_matrices=True, compute_uv=True, driver=None):
    _svd_check(a, driver)
    rdt = real_np(a.dtype)  # singular values are real, complex input or not
    if a.size == 0:
        (us, ss, vs) = _svd_shapes(a.shape, full_matrices, compute_uv)
        u, vh = np.zeros(us, a.dtype), np.zeros(vs, a.dtype)
        for x in (u, vh):
            if x.ndim >= 2 and compute_uv:
                idx = np.arange(min(x.shape[-2:]))
                x[..., idx, idx] = 1
        return u, np.zeros(ss, rdt), vh
    # A matrix with a non-finite entry gets NaN factors, as PyTorch's LAPACK call leaves them
    # (NumPy's raises); the others are computed as usual.
    bad = ~np.isfinite(a).all(axis=(-2, -1))
    if bad.any():
        # A NaN makes LAPACK report non-convergence, which PyTorch raises (inf alone does not).
        nan = np.isnan(a).any(axis=(-2, -1))
        hit = first_failure(nan.astype(np.int32))
        if hit is not None:
            raise LinAlgError(f"linalg.svd: {batch_prefix(nan, hit[0])}The algorithm failed to "
                              "converge because the input matrix contained non-finite values.")
        a = np.where(bad[..., None, None], 0, a)
    if not compute_uv:
        s = np.linalg.svd(a, compute_uv=False).astype(rdt)
        s[bad] = np.nan
        return np.zeros((0,), a.dtype), s, np.zeros((0,), a.dtype)
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    u, s, vh = u.astype(a.dtype), s.astype(rdt), vh.astype(a.dtype)
    for x in (u, s, vh):
        x[bad] = np.nan
    return u, s, vh


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
    us, ss, vs = _svd_shapes(tuple(a.shape), full_matrices, compute_uv)
    return Spec(us, a.dtype), Spec(ss, a.dtype.to_real()), Spec(vs, a.dtype)


def svd_backward(gu, gs, gvh, u, s, vh, full_matrices):
    """PyTorch's SVD gradient. Any of gU, gS, gVh may be None (an output that received no
    gradient): with neither gU nor gVh it is the values-only form, which stays finite at
    repeated singular values, where the full formula divides 0 by 0. Complex singular
    vectors are defined up to a phase each; a loss that depends on it raises, as PyTorch."""
    m, n = u.shape[-2], vh.shape[-1]
    k = s.shape[-1]
    if gu is None and gvh is None:
        if gs is None:
            return None
        if m >= n:
            return u.matmul(gs.unsqueeze(-1) * vh)
        return (u * gs.unsqueeze(-2)).matmul(vh)
    if full_matrices:  # only the first k singular vectors carry gradient
        u, vh = u[..., :, :k], vh[..., :k, :]
        gu = gu[..., :, :k] if gu is not None else None
        gvh = gvh[..., :k, :] if gvh is not None else None
    complex_ = u.dtype.is_complex
    uhgu = _skew(adj(u).matmul(gu)) if gu is not None else None
    vhgv = _skew(vh.matmul(adj(gvh))) if gvh is not None else None
    if complex_:
        _svd_phase_check(uhgu, vhgv, s)
    s2 = s * s
    e = s2.unsqueeze(-2) - s2.unsqueeze(-1) + eye_like(s, k)
    if uhgu is not None and vhgv is not None:
        ret = (uhgu * s.unsqueeze(-2) + s.unsqueeze(-1) * vhgv) / e
    elif uhgu is not None:
        ret = (uhgu / e) * s.unsqueeze(-2)
    else:
        ret = s.unsqueeze(-1) * (vhgv / e)
    if gs is not None:
        ret = ret + gs.diag_embed()
    if complex_ and uhgu is not None and vhgv is not None:
        ret = ret + (uhgu.diagonal(0, -2, -1) / (s * 2)).diag_embed()
    if m > n and gu is not None:
        ret = u.matmul(ret)
        gus = gu / s.unsqueeze(-2)
        ret = ret + gus - u.matmul(adj(u).matmul(gus))
        return ret.matmul(vh)
    if m < n and gvh is not None:
        ret = ret.matmul(vh)
        sgvh = gvh / s.unsqueeze(-1)
        ret = ret + sgvh - sgvh.matmul(adj(vh)).matmul(vh)
        return u.matmul(ret)
    return u.matmul(ret.matmul(vh)) if m >= n else u.matmul(ret).matmul(vh)


def _svd_phase_check(uhgu, vhgv, s):
    """PyTorch's check that the loss is invariant under (U, V) -> (U L, V L), L a diagonal of
    unit phases: Im(diag(U^H gU)) = -Im(diag(V^H gV)) (its lax tolerance, 1e-2)."""
    zero = np.zeros(tuple(s.shape))
    a = uhgu.diagonal(0, -2, -1).imag.detach().numpy() if uhgu is not None else zero
    b = vhgv.diagonal(0, -2, -1).imag.detach().numpy() if vhgv is not None else zero
    if not np.allclose(a, -b, rtol=1e-2, atol=1e-2):
        raise RuntimeError(
            "svd_backward: The singular vectors in the complex case are specified up to "
            "multiplication by e^{i phi}. The specified loss function depends on this phase "
            "term, making it ill-defined.")


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
    "_linalg_svd", kernel=_COL02(_svd_kernel), meta=_COL02(_svd_meta),
    node="LinalgSvdBackward0",
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
    if dt.np not in LAPACK_NP:
        raise not_implemented_for("linalg_eigh_cpu", dt)
    if uplo not in ("L", "U", "l", "u"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {uplo}")


def _eigh_kernel(a, UPLO="L", compute_v=True):  # noqa: N803 (ATen's argument name)
    _eigh_check(a, UPLO)
    rdt = real_np(a.dtype)  # a Hermitian matrix's eigenvalues are real
    if a.size == 0:
        v = np.zeros(a.shape if compute_v else (0,), a.dtype)
        return np.zeros(a.shape[:-1], rdt), v
    if not compute_v:
        return np.linalg.eigvalsh(a, UPLO.upper()).astype(rdt), np.zeros((0,), a.dtype)
    w, v = np.linalg.eigh(a, UPLO.upper())
    return w.astype(rdt), v.astype(a.dtype)


def _eigh_meta(a, UPLO="L", compute_v=True):  # noqa: N803
    _eigh_check(a, UPLO)
    return (Spec(tuple(a.shape[:-1]), a.dtype.to_real()),
            Spec(tuple(a.shape) if compute_v else (0,), a.dtype))


def eigh_backward(gl, gv, w, v):
    """PyTorch's gradient of the Hermitian eigendecomposition: V (skew(V^H gV)/2 / E +
    diag(gL)) V^H, with E[i, j] = L[j] - L[i] (ones on the diagonal). Not symmetrized.
    gL or gV may be None (an output that received no gradient): without gV it is the
    values-only form, finite at repeated eigenvalues."""
    if gv is None:
        if gl is None:
            return None
        return v.matmul(gl.unsqueeze(-1) * adj(v))
    vhgv = adj(v).matmul(gv)
    if v.dtype.is_complex:
        phase_check("linalg_eigh_backward", vhgv)
    n = w.shape[-1]
    e = w.unsqueeze(-2) - w.unsqueeze(-1) + eye_like(w, n)
    inner = (vhgv - adj(vhgv)) * 0.5 / e
    if gl is not None:
        inner = inner.diagonal_scatter(gl.to(inner.dtype), 0, -2, -1)
    return v.matmul(inner.matmul(adj(v)))


def phase_check(name, vhgv):
    """PyTorch's check that a loss is invariant under V -> V e^{i phi} (complex eigenvectors
    are defined up to a phase each): Im(diag(V^H gV)) = 0, with its lax tolerance."""
    im = vhgv.diagonal(0, -2, -1).imag.detach().numpy()
    if not np.allclose(im, 0, rtol=1e-2, atol=1e-2):
        raise RuntimeError(
            f"{name}: The eigenvectors in the complex case are specified up to multiplication "
            "by e^{i phi}. The specified loss function depends on this quantity, so it is "
            "ill-defined.")


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
    "_linalg_eigh", kernel=_COL1(_eigh_kernel), meta=_COL1(_eigh_meta),
    node="LinalgEighBackward0",
    derivative=_eigh_derivative,
    save=lambda out, a, UPLO="L", compute_v=True: (out[0], out[1], compute_v),
    samples=_eigh_samples, public="eigh", saved_names=("eigenvalues", "eigenvectors", ""),
    gradcheck=False,  # signs and one triangle, as for the SVD
    undefined_grads=True)  # eigvalsh at repeated eigenvalues, as the SVD's values


# ---------------------------------------------------------------- eig (general matrices)


def _eig_dtype_check(a):
    """PyTorch's checks before the square one: the complex result dtype must exist, and
    LAPACK has no half precision."""
    dt = dtype_of(a)
    if not (dt.is_floating_point or dt.is_complex):
        raise RuntimeError(f"Unknown Complex ScalarType for {dt.legacy}")
    if dt.np not in LAPACK_NP:
        raise not_implemented_for("linalg_eig_out_cpu", dt)


def _eig_kernel(a):
    _eig_dtype_check(a)
    if not np.isfinite(a).all():  # PyTorch checks this before the shape
        raise RuntimeError("torch.linalg.eig: input tensor should not contain infs or NaNs.")
    check_square("linalg.eig", a)
    cdt = np.result_type(a.dtype, np.complex64)  # complex64 for float32, complex128 else
    if a.size == 0:
        return np.zeros(a.shape[:-1], cdt), np.zeros(a.shape, cdt)
    # LAPACK's geev, as PyTorch's: unit-norm eigenvectors whose largest component is real.
    # NumPy returns real arrays when every eigenvalue is real; the results are complex.
    w, v = np.linalg.eig(a)
    return w.astype(cdt), v.astype(cdt)


def _eig_meta(a):
    _eig_dtype_check(a)
    check_square("linalg.eig", a)
    cdt = a.dtype.to_complex()
    return Spec(tuple(a.shape[:-1]), cdt), Spec(tuple(a.shape), cdt)


def eig_backward(gl, gv, w, v, real_input):
    """PyTorch's linalg_eig_backward (arXiv:1701.00392, eq. 4.77, for unit-norm vectors):
    gA = V^{-H} (diag(gL) + (V^H gV - V^H V diag(Re(V^H gV))) / conj(E)) V^H, E[i, j] =
    L[j] - L[i]; the real part for a real A."""
    solve = REGISTRY["linalg_solve_ex"]  # by name: solvers.py imports us
    vh = v.mH
    if gv is None:
        if gl is None:
            return None
        ga = call(solve, vh, gl.unsqueeze(-1) * vh, True, False)[0]
    else:
        vhgv = vh.matmul(gv)
        phase_check("linalg_eig_backward", vhgv)
        diag = vhgv.diagonal(0, -2, -1).real
        vhgv = vhgv - vh.matmul(v * diag.unsqueeze(-2))
        lc = w.conj()
        e = lc.unsqueeze(-2) - lc.unsqueeze(-1) + eye_like(w, w.shape[-1])
        inner = vhgv / e
        if gl is not None:
            inner = inner.diagonal_scatter(gl.to(inner.dtype), 0, -2, -1)
        ga = call(solve, vh, inner.matmul(vh), True, False)[0]
    return ga.real if real_input else ga


def _eig_samples(rng, dt):
    return [Sample((_diag_array(rng, s, dt, signs=True),), name=str(s))
            for s in ((3, 3), (2, 4, 4), (1, 1))]


linalg_eig = register(
    "linalg_eig", autocast="fp32", kernel=_COL1(_eig_kernel), meta=_COL1(_eig_meta),
    node="LinalgEigBackward0",
    derivative=lambda grads, w, v, real_input: (eig_backward(grads[0], grads[1], w, v,
                                                             real_input),),
    save=lambda out, a: (out[0], out[1], not a.dtype.is_complex),
    samples=_eig_samples, public="eig", saved_names=("eigenvalues", "eigenvectors", ""),
    gradcheck=False,  # phases (signs) of the vectors, as for the SVD
    undefined_grads=True)  # eigvals: the values-only form


# ---------------------------------------------------------------- householder_product (orgqr)
#
# The first n columns of H_0 H_1 ... H_{k-1}, H_i = I - tau_i v_i v_i^H, where v_i is 1 at
# row i, A's column i below it and 0 above (LAPACK's orgqr / ungqr), applied from the last
# reflector to the first onto the first n columns of the identity.

_HP = "torch.linalg.householder_product"


def _householder_check(a, tau) -> None:
    """householder_product's checks in PyTorch's order (its messages)."""
    ash, tsh = tuple(a.shape), tuple(tau.shape)
    if len(ash) < 2:
        raise RuntimeError(f"{_HP}: input must have at least 2 dimensions.")
    if ash[-2] < ash[-1]:
        raise RuntimeError(f"{_HP}: input.shape[-2] must be greater than or equal to "
                           "input.shape[-1]")
    if tsh and ash[-1] < tsh[-1]:
        raise RuntimeError(f"{_HP}: input.shape[-1] must be greater than or equal to "
                           "tau.shape[-1]")
    if len(tsh) != len(ash) - 1:
        raise RuntimeError(f"{_HP}: Expected tau to have one dimension less than input, but "
                           f"got tau.ndim equal to {len(tsh)} and input.ndim is equal to "
                           f"{len(ash)}")
    if tsh[:-1] != ash[:-2]:
        raise RuntimeError(f"{_HP}: Expected batch dimensions of tau to be equal to "
                           f"input.shape[:-2], but got [{', '.join(map(str, tsh[:-1]))}]")
    da, dt = dtype_of(a), dtype_of(tau)
    if da is not dt:
        raise RuntimeError(f"{_HP}: tau dtype {dt.legacy} does not match input dtype "
                           f"{da.legacy}")
    if da.np not in LAPACK_NP:
        raise not_implemented_for("orgqr_cpu", da)


def _reflector(a, i: int):
    """Householder vector i of the (batched) reflectors stored below A's diagonal: 1 at row
    i, A's column i below, 0 above (shape (..., m, 1)); of an array or a tensor."""
    col = a[..., :, i:i + 1]
    rows = np.arange(a.shape[-2]).reshape(-1, 1)
    below, at = rows > i, rows == i
    if isinstance(a, np.ndarray):
        return np.where(below, col, at).astype(a.dtype, copy=False)
    # (masks from lists: a factory AOT autograd records, where NumPy data is unknown to it)
    return col * a.new_tensor(below.astype(real_np(a.dtype.np)).tolist()) + \
        a.new_tensor(at.astype(a.dtype.np).tolist())


def _householder_np(a, tau):
    m, n = a.shape[-2:]
    out = np.broadcast_to(np.eye(m, n, dtype=a.dtype), a.shape).copy()
    for i in range(tau.shape[-1] - 1, -1, -1):
        v = _reflector(a, i)
        out -= tau[..., i, None, None] * v * (np.swapaxes(v, -1, -2).conj() @ out)
    return out


@_COL0
def _householder_kernel(a, tau):
    _householder_check(a, tau)
    return _householder_np(a, tau)


def _householder_derivative(g, a, tau):
    """The product run backwards, reflector by reflector: with X_i = H_i X_{i+1} and
    u_i = v_i^H X_{i+1}, the gradient G of X_i gives X_{i+1} the gradient H_i^H G, tau_i
    -(v_i^H G) u_i^H and v_i -(conj(tau_i) G u_i^H + tau_i X_{i+1} G^H v_i) (PyTorch's
    conjugate Wirtinger convention), whose part below the diagonal is A's column i."""
    from .joins import cat

    k = tau.shape[-1]
    m, n = a.shape[-2:]
    if k == 0:  # no reflector: PyTorch's engine gives neither input a gradient
        return None, None
    vs = [_reflector(a, i) for i in range(k)]
    taus = [tau[..., i:i + 1].unsqueeze(-1) for i in range(k)]
    # X_{i+1}, what reflector i is applied to, for each i: X_k is I's first n columns.
    states = [None] * (k + 1)
    states[k] = x = eye_like(a, m)[:, :n].expand(tuple(a.shape))
    for i in range(k - 1, 0, -1):
        x = x - taus[i] * vs[i] * adj(vs[i]).matmul(x)
        states[i] = x
    cols, gtau = [], []
    for i in range(k):
        v, t, x = vs[i], taus[i], states[i + 1]
        u = adj(v).matmul(x)
        vg = adj(v).matmul(g)
        gtau.append(-vg.matmul(adj(u)).squeeze(-1))
        gv = -(t.conj() * g.matmul(adj(u)) + t * x.matmul(adj(g).matmul(v)))
        below = np.arange(m).reshape(-1, 1) > i
        cols.append(gv * a.new_tensor(below.astype(real_np(a.dtype.np)).tolist()))
        g = g - t.conj() * v * vg
    if n > k:
        cols.append(a.new_zeros(tuple(a.shape[:-1]) + (n - k,)))
    return call(cat, cols, -1), call(cat, gtau, -1)


def _householder_samples(rng, dt):
    return [Sample((rand_array(rng, s, dt), rand_array(rng, t, dt)), name=f"{s} {t}")
            for s, t in (((4, 3), (2,)), ((2, 3, 3), (2, 3)), ((3, 2), (0,)))]


linalg_householder_product = register(
    "linalg_householder_product", autocast="fp32", kernel=_householder_kernel,
    meta=_COL0(lambda a, tau: (_householder_check(a, tau), Spec(tuple(a.shape), a.dtype))[1]),
    node="LinalgHouseholderProductBackward0", derivative=_householder_derivative,
    save=lambda out, a, tau: (a, tau),
    saved_names=("self", "tau"),
    samples=_householder_samples, public="orgqr")


# ---------------------------------------------------------------- LDL (Bunch-Kaufman)
#
# `linalg.ldl_factor_ex` and `linalg.ldl_solve` (LAPACK's sytf2/sytrs and, for complex
# Hermitian matrices, hetf2/hetrs; lower triangle): A = P L D L^T P^T (L^H for Hermitian)
# with D of 1x1 and 2x2 blocks, the pivots 1-based (a 2x2 block's two entries negative).
# Complex matrices are complex symmetric unless `hermitian`: then only the real part of the
# diagonal is read, and D's diagonal is real. PyTorch has no derivative for either.

_BK_ALPHA = (1 + 17 ** 0.5) / 8  # Bunch-Kaufman's pivot threshold


def _cabs1(x):
    """LAPACK's i?amax size: |Re| + |Im| for complex numbers."""
    return abs(x.real) + abs(x.imag) if np.iscomplexobj(x) else abs(x)


def _same(x):
    return x


def _real_abs(x):
    return abs(x.real)


def _ldl_one(a: np.ndarray, hermitian: bool = False):
    """sytf2 (or, for a complex `hermitian` matrix, hetf2), lower, of one square matrix, in
    place: (pivots, info)."""
    n = a.shape[0]
    herm = hermitian and np.iscomplexobj(a)
    # Hermitian: the transposed halves are conjugated, the diagonal sized by its real part.
    cj, size_of_diag = (np.conj, _real_abs) if herm else (_same, _cabs1)
    if herm:  # (hetf2 reads only the diagonal's real part, and leaves D's real)
        np.einsum("ii->i", a)[:] = a.diagonal().real
    piv = np.zeros(n, np.int32)
    info = 0
    k = 0
    while k < n:
        kstep = 1
        absakk = size_of_diag(a[k, k])
        if k < n - 1:
            col = _cabs1(a[k + 1:, k])
            imax = k + 1 + int(np.argmax(col))
            colmax = col[imax - k - 1]
        else:
            imax, colmax = k, 0.0
        if max(absakk, colmax) == 0 or np.isnan(absakk):
            info = info or k + 1  # (a zero column: D is singular, the column stays)
            kp = k
        else:
            if absakk >= _BK_ALPHA * colmax:
                kp = k
            else:
                row = _cabs1(a[imax, k:imax])
                rowmax = row.max()
                if imax < n - 1:
                    rowmax = max(rowmax, _cabs1(a[imax + 1:, imax]).max())
                if absakk >= _BK_ALPHA * colmax * (colmax / rowmax):
                    kp = k
                elif size_of_diag(a[imax, imax]) >= _BK_ALPHA * rowmax:
                    kp = imax
                else:
                    kp, kstep = imax, 2
            kk = k + kstep - 1
            if kp != kk:  # rows and columns kk and kp swapped in the trailing submatrix
                a[kp + 1:, [kk, kp]] = a[kp + 1:, [kp, kk]]
                seg = a[kk + 1:kp, kk].copy()
                a[kk + 1:kp, kk] = cj(a[kp, kk + 1:kp])
                a[kp, kk + 1:kp] = cj(seg)
                a[kp, kk] = cj(a[kp, kk])
                a[[kk, kp], [kk, kp]] = a[[kp, kk], [kp, kk]]
                if kstep == 2:
                    a[[k + 1, kp], k] = a[[kp, k + 1], k]
            if kstep == 1:
                if k < n - 1:
                    x = a[k + 1:, k].copy()
                    r = 1 / a[k, k]
                    a[k + 1:, k + 1:] += np.tril(np.outer(x, -r * cj(x)))
                    a[k + 1:, k] = x * r
            elif k < n - 2:
                ck, ck1 = a[k + 2:, k].copy(), a[k + 2:, k + 1].copy()
                if herm:
                    d = abs(a[k + 1, k])
                    d11 = a[k + 1, k + 1].real / d
                    d22 = a[k, k].real / d
                    d21 = a[k + 1, k] / d
                    d = 1 / (d11 * d22 - 1) / d
                    wk = d * (d11 * ck - d21 * ck1)
                    wkp1 = d * (d22 * ck1 - np.conj(d21) * ck)
                else:
                    d21 = a[k + 1, k]
                    d11 = a[k + 1, k + 1] / d21
                    d22 = a[k, k] / d21
                    t = 1 / (d11 * d22 - 1)
                    d21 = t / d21
                    wk = d21 * (d11 * ck - ck1)
                    wkp1 = d21 * (d22 * ck1 - ck)
                a[k + 2:, k + 2:] -= np.tril(np.outer(ck, cj(wk)) + np.outer(ck1, cj(wkp1)))
                a[k + 2:, k] = wk
                a[k + 2:, k + 1] = wkp1
            if herm:  # (the updates leave rounding in the diagonal's imaginary part)
                np.einsum("ii->i", a)[k:] = a.diagonal()[k:].real
        if kstep == 1:
            piv[k] = kp + 1
        else:
            piv[k] = piv[k + 1] = -(kp + 1)
        k += kstep
    return piv, info


_LDL_EX = "torch.linalg.ldl_factor_ex"


def _ldl_check(a, hermitian: bool) -> None:
    shape = tuple(a.shape)
    if len(shape) < 2:
        raise RuntimeError(f"{_LDL_EX}: The input tensor A must have at least 2 dimensions.")
    if shape[-1] != shape[-2]:
        raise RuntimeError(f"{_LDL_EX}: A must be batches of square matrices, but they are "
                           f"{shape[-2]} by {shape[-1]} matrices")
    dt = dtype_of(a)
    if dt.np not in LAPACK_NP:
        raise RuntimeError(f"{_LDL_EX}: Expected a floating point or complex tensor as "
                           f"input. Got {dt.legacy}")


def ldl_error(name: str, info: np.ndarray) -> None:
    """PyTorch's error for a factorization that found a singular D (its internal assert)."""
    if info.size and info.max() > 0:
        raise RuntimeError(
            'false INTERNAL ASSERT FAILED at "/__w/pytorch/pytorch/aten/src/ATen/native/'
            'BatchLinearAlgebra.cpp":1642, please report a bug to PyTorch. '
            f"{name}: Unknown error code: {int(info.max())}.")


@_COL0
def _ldl_factor_kernel(a, hermitian=False, check_errors=False):
    _ldl_check(a, hermitian)
    n = a.shape[-1]
    batch = a.shape[:-2]
    ld = np.array(a, dtype=a.dtype).reshape((int(np.prod(batch, dtype=np.int64)), n, n))
    piv = np.zeros((ld.shape[0], n), np.int32)
    info = np.zeros(ld.shape[0], np.int32)
    for b in range(ld.shape[0]):
        piv[b], info[b] = _ldl_one(ld[b], hermitian)
    ld = np.tril(ld).reshape(a.shape)  # (PyTorch zeroes the upper triangle)
    info = info.reshape(batch)
    if check_errors:
        ldl_error(_LDL_EX, info)
    return ld, piv.reshape(batch + (n,)), info


def _ldl_factor_meta(a, hermitian=False, check_errors=False):
    _ldl_check(a, hermitian)
    batch = tuple(a.shape[:-2])
    return (Spec(tuple(a.shape), a.dtype), _int_spec(batch + (a.shape[-1],)),
            _int_spec(batch))


def _ldl_samples(rng, dt):
    out = []
    for shape in ((4, 4), (2, 3, 3)):
        a = rand_array(rng, shape, dt)
        out.append(Sample((a + np.swapaxes(a, -1, -2),), name=str(shape)))
    out.append(Sample((_hermitian_sample(rng, (2, 5, 5), dt), True), name="hermitian"))
    return out


def _hermitian_sample(rng, shape, dt):
    """A complex Hermitian matrix (of `dt`'s precision) with a zero to pivot around."""
    a = rand_array(rng, shape, np.result_type(dt, np.complex64))
    a[..., 0, 0] = 0
    return a + np.swapaxes(a, -1, -2).conj()


linalg_ldl_factor_ex = register(
    "linalg_ldl_factor_ex", kernel=_ldl_factor_kernel, meta=_COL0(_ldl_factor_meta),
    node="NotImplemented", derivative=_not_implemented("linalg_ldl_factor_ex"),
    save=lambda out, a, hermitian=False, check_errors=False: (),
    nondiff_outputs=(1, 2), samples=_ldl_samples, gradcheck=False,
    public="linalg_ldl_factor_ex")


def _ldl_solve_check(ld, piv, b, hermitian) -> None:
    lsh, bsh = tuple(ld.shape), tuple(b.shape)
    if len(lsh) < 2:
        raise RuntimeError("torch.linalg.ldl_solve: The input tensor LD must have at least 2 "
                           "dimensions.")
    if lsh[-1] != lsh[-2]:
        raise RuntimeError("torch.linalg.ldl_solve: LD must be batches of square matrices, "
                           f"but they are {lsh[-2]} by {lsh[-1]} matrices")
    if len(bsh) < 2:
        raise IndexError("Dimension out of range (expected to be in range of "
                         f"[-{max(len(bsh), 1)}, {max(len(bsh), 1) - 1}], but got -2)")
    if bsh[-2] != lsh[-1]:
        raise RuntimeError("Incompatible matrix sizes for torch.linalg.ldl_solve: each A "
                           f"matrix is {lsh[-2]} by {lsh[-1]} but each b matrix is "
                           f"{bsh[-2]} by {bsh[-1]}")
    dl, dbt = dtype_of(ld), dtype_of(b)
    if dl is not dbt:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type "
                           f"{dbt.legacy} and A of type {dl.legacy} instead.")


def _ldl_solve_one(a, piv, b, hermitian: bool = False) -> None:
    """sytrs (or, for a complex `hermitian` factorization, hetrs), lower, of one
    factorization, into b (n, nrhs) in place."""
    n = a.shape[0]
    herm = hermitian and np.iscomplexobj(a)
    cj = np.conj if herm else _same
    k = 0
    while k < n:  # L D y = b
        if piv[k] > 0:
            kp = piv[k] - 1
            if kp != k:
                b[[k, kp]] = b[[kp, k]]
            b[k + 1:] -= np.outer(a[k + 1:, k], b[k])
            b[k] /= a[k, k].real if herm else a[k, k]
            k += 1
        else:
            kp = -piv[k] - 1
            if kp != k + 1:
                b[[k + 1, kp]] = b[[kp, k + 1]]
            if k < n - 2:
                b[k + 2:] -= np.outer(a[k + 2:, k], b[k])
                b[k + 2:] -= np.outer(a[k + 2:, k + 1], b[k + 1])
            akm1k = a[k + 1, k]
            akm1 = a[k, k] / cj(akm1k)
            ak = a[k + 1, k + 1] / akm1k
            denom = akm1 * ak - 1
            bkm1, bk = b[k] / cj(akm1k), b[k + 1] / akm1k
            b[k] = (ak * bkm1 - bk) / denom
            b[k + 1] = (akm1 * bk - bkm1) / denom
            k += 2
    k = n - 1
    while k >= 0:  # L^T x = y (L^H for Hermitian)
        if piv[k] > 0:
            if k < n - 1:
                b[k] -= cj(a[k + 1:, k]) @ b[k + 1:]
            kp = piv[k] - 1
            if kp != k:
                b[[k, kp]] = b[[kp, k]]
            k -= 1
        else:
            if k < n - 1:
                b[k] -= cj(a[k + 1:, k]) @ b[k + 1:]
                b[k - 1] -= cj(a[k + 1:, k - 1]) @ b[k + 1:]
            kp = -piv[k] - 1
            if kp != k:
                b[[k, kp]] = b[[kp, k]]
            k -= 2


@_COL0
def _ldl_solve_kernel(ld, piv, b, hermitian=False):
    _ldl_solve_check(ld, piv, b, hermitian)
    n = ld.shape[-1]
    batch = np.broadcast_shapes(ld.shape[:-2], piv.shape[:-1], b.shape[:-2])
    count = int(np.prod(batch, dtype=np.int64))
    lds = np.broadcast_to(ld, batch + ld.shape[-2:]).reshape((count, n, n))
    pivs = np.broadcast_to(np.asarray(piv), batch + (n,)).reshape((count, n))
    out = np.array(np.broadcast_to(b, batch + b.shape[-2:]), dtype=b.dtype)
    flat = out.reshape((count,) + b.shape[-2:])
    for i in range(flat.shape[0]):
        _ldl_solve_one(lds[i], pivs[i], flat[i], hermitian)
    return flat.reshape(out.shape)


def _ldl_solve_meta(ld, piv, b, hermitian=False):
    _ldl_solve_check(ld, piv, b, hermitian)
    batch = np.broadcast_shapes(tuple(ld.shape[:-2]), tuple(piv.shape[:-1]),
                                tuple(b.shape[:-2]))
    return Spec(tuple(batch) + tuple(b.shape[-2:]), b.dtype)


def _ldl_solve_samples(rng, dt):
    a = rand_array(rng, (4, 4), dt)
    ld, piv, _ = _ldl_factor_kernel(a + a.T)
    h = _hermitian_sample(rng, (5, 5), dt)
    hld, hpiv, _ = _ldl_factor_kernel(h, True)
    return [Sample((ld, piv, rand_array(rng, (4, 2), dt)), name="(4, 4)"),
            Sample((hld, hpiv, rand_array(rng, (5, 2), h.dtype), True), name="hermitian")]


linalg_ldl_solve = register(
    "linalg_ldl_solve", kernel=_ldl_solve_kernel, meta=_COL0(_ldl_solve_meta),
    node="NotImplemented", derivative=_not_implemented("linalg_ldl_solve"),
    save=lambda out, ld, piv, b, hermitian=False: (), nondiff_args=(1,),
    samples=_ldl_solve_samples, gradcheck=False, public="linalg_ldl_solve")


# ---------------------------------------------------------------- geqrf
#
# LAPACK's QR in its own packing: R on and above the diagonal, the Householder vectors below
# it, their scalings in `tau` (NumPy's `qr(mode="raw")` returns LAPACK's column-major array
# as its transpose). PyTorch has no derivative for it.


def _geqrf_check(a) -> None:
    if len(a.shape) < 2:
        raise RuntimeError("torch.geqrf: input must have at least 2 dimensions.")
    dt = dtype_of(a)
    if dt.np not in LAPACK_NP:
        raise not_implemented_for("geqrf_cpu", dt)


@_COL0
def _geqrf_meta(a):
    _geqrf_check(a)
    shape = tuple(a.shape)
    return Spec(shape, a.dtype), Spec(shape[:-2] + (min(shape[-2:]),), a.dtype)


def _geqrf_empty(a):
    """An empty input's results as PyTorch lays them out: column-major, sizes 0 counted as 1
    in the strides."""
    m, n = a.shape[-2:]
    strides = contiguous_strides(a.shape[:-2] + (n, m))
    strides = strides[:-2] + (strides[-1], strides[-2])
    packed = strided_copy(np.zeros(a.shape, a.dtype), strides)
    tau_shape = a.shape[:-2] + (min(m, n),)
    return packed, strided_copy(np.zeros(tau_shape, a.dtype), contiguous_strides(tau_shape))


def _geqrf_kernel(a):
    _geqrf_check(a)
    if a.size == 0:
        return _geqrf_empty(a)
    return _geqrf_values(a)


@_COL0
def _geqrf_values(a):
    h, tau = np.linalg.qr(a, mode="raw")
    return np.swapaxes(h, -1, -2).astype(a.dtype), tau.astype(a.dtype)


def _geqrf_derivative(grads, *rest):
    raise NotImplementedError("the derivative for 'geqrf' is not implemented.")


geqrf = register(
    "geqrf", autocast="fp32", kernel=_geqrf_kernel, meta=_geqrf_meta, node="GeqrfBackward0",
    derivative=_geqrf_derivative, save=lambda out, a: (),
    samples=lambda rng, dt: [Sample((rand_array(rng, s, dt),), name=str(s))
                             for s in ((4, 3), (3, 4), (2, 3, 3))], gradcheck=False)


# ---------------------------------------------------------------- ormqr
#
# `other` multiplied by the Q of geqrf's (input, tau), Q = H_0 ... H_{k-1} of size m (the
# rows of input): Q itself from the reflectors padded to an m x m square (a zero column is no
# reflector), then a matrix product; the derivative runs householder_product's backwards.

_OQ = "torch.ormqr: "


def _ormqr_check(a, tau, c, left) -> None:
    """ormqr's checks in PyTorch's order (its messages)."""
    ash, tsh, csh = tuple(a.shape), tuple(tau.shape), tuple(c.shape)
    if len(ash) < 2:
        raise RuntimeError(_OQ + "input must have at least 2 dimensions.")
    if len(csh) < 2:
        raise RuntimeError(_OQ + "other must have at least 2 dimensions.")
    side = -2 if left else -1
    if csh[side] != ash[-2]:
        raise RuntimeError(_OQ + f"other.shape[{side}] must be equal to input.shape[-2]")
    if not tsh:
        raise IndexError("Dimension specified as -1 but tensor has no dimensions")
    if tsh[-1] != min(csh[side], ash[-1]):
        raise RuntimeError(_OQ + f"tau.shape[-1] must be equal to min(other.shape[{side}], "
                           "input.shape[-1])")
    if len(tsh) != len(ash) - 1:
        raise RuntimeError(_OQ + "Expected tau to have one dimension less than input, but got "
                           f"tau.ndim equal to {len(tsh)} and input.ndim is equal to "
                           f"{len(ash)}")
    if len(csh) != len(ash):
        raise RuntimeError(_OQ + "Expected other to have the same number of dimensions as "
                           f"input, but got other.ndim equal to {len(csh)} and input.ndim is "
                           f"equal to {len(ash)}")
    for name, shape in (("tau", tsh[:-1]), ("other", csh[:-2])):
        if shape != ash[:-2]:
            raise RuntimeError(_OQ + f"Expected batch dimensions of {name} to be equal to "
                               f"input.shape[:-2], but got [{', '.join(map(str, shape))}]")
    da = dtype_of(a)
    for name, t in (("tau", tau), ("other", c)):
        if dtype_of(t) is not da:
            raise RuntimeError(_OQ + f"Expected input and {name} to have the same dtype, but "
                               f"input has dtype{da.legacy} and {name} has dtype "
                               f"{dtype_of(t).legacy}")
    if da.np not in LAPACK_NP:
        raise not_implemented_for("ormqr_cpu", da)


def _ormqr_square(a, k: int):
    """The first k reflectors of `a` in an m x m square (array or tensor)."""
    m = a.shape[-2]
    if isinstance(a, np.ndarray):
        square = np.zeros(a.shape[:-2] + (m, m), a.dtype)
        square[..., :, :k] = a[..., :, :k]
        return square
    from .joins import cat

    return call(cat, [a[..., :, :k], a.new_zeros(tuple(a.shape[:-2]) + (m, m - k))], -1)


@_COL0
def _ormqr_kernel(a, tau, c, left=True, transpose=False):
    _ormqr_check(a, tau, c, left)
    q = _householder_np(_ormqr_square(a, tau.shape[-1]), tau)
    if transpose:
        q = np.swapaxes(q, -1, -2).conj()
    return (q @ c if left else c @ q).astype(a.dtype, copy=False)


@_COL0
def _ormqr_meta(a, tau, c, left=True, transpose=False):
    _ormqr_check(a, tau, c, left)
    return Spec(tuple(c.shape), a.dtype)


def _ormqr_derivative(g, a, tau, c, left, transpose, out):
    """As a matrix product's (PyTorch's conjugate Wirtinger convention) with the product's
    factor Q (or its conjugate transpose), then householder_product's derivative for Q."""
    k = tau.shape[-1]
    square = _ormqr_square(a, k)
    q = call(linalg_householder_product, square, tau)
    factor = adj(q) if transpose else q
    if left:  # out = factor @ c
        gc, gfactor = adj(factor).matmul(g), g.matmul(adj(c))
    else:  # out = c @ factor
        gc, gfactor = g.matmul(adj(factor)), adj(c).matmul(g)
    gsquare, gtau = _householder_derivative(adj(gfactor) if transpose else gfactor, square, tau)
    ga = None
    if gsquare is not None:
        from .joins import cat

        n = a.shape[-1]
        ga = gsquare[..., :, :k]
        if n > k:
            ga = call(cat, [ga, a.new_zeros(tuple(a.shape[:-1]) + (n - k,))], -1)
    return ga, gtau, gc, None, None


def _ormqr_samples(rng, dt):
    return [Sample((rand_array(rng, s, dt), rand_array(rng, t, dt), rand_array(rng, o, dt),
                    left, tr), name=f"{s} {o} {left} {tr}")
            for s, t, o, left in (((4, 3), (3,), (4, 2), True), ((4, 3), (3,), (2, 4), False),
                                  ((2, 3, 3), (2, 3), (2, 3, 2), True))
            for tr in (False, True)]


ormqr = register(
    "ormqr", autocast="fp32", kernel=_ormqr_kernel, meta=_ormqr_meta, node="OrmqrBackward0",
    derivative=_ormqr_derivative,
    save=lambda out, a, tau, c, left=True, transpose=False: (a, tau, c, left, transpose, out),
    saved_names=("self", "input2", "input3", "left", "transpose", "result"),
    samples=_ormqr_samples)
