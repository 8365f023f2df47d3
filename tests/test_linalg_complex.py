"""Complex linear algebra (and `eig` / `eigvals` of real matrices) against torch.

Each case runs the same call on both libraries with the same complex data and a real-valued
loss of the outputs, and compares forward values and dtypes, the loss, the input gradients
(PyTorch's conjugate Wirtinger convention) and the grad_fn names. Where a result is unique
only up to a phase per vector (eigh's eigenvectors: fusegrad's LAPACK is not PyTorch's MKL)
the forward comparison is skipped and the loss is chosen invariant to the phase, so the
gradients still have to agree; separate tests check the reconstruction identities. Losses
that depend on the phase raise PyTorch's own errors.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

_RNG = np.random.default_rng(1234)


def _cplx(*shape, dtype=np.complex128):
    return (_RNG.standard_normal(shape) + 1j * _RNG.standard_normal(shape)).astype(dtype)


def _hpd(n, *batch, dtype=np.complex128):
    """A well-conditioned Hermitian positive-definite (batch of) matrices."""
    x = _cplx(*batch, n, n)
    return (x @ np.swapaxes(x.conj(), -1, -2) + n * np.eye(n)).astype(dtype)


def _sq(n, *batch, dtype=np.complex128):
    """A well-conditioned square (batch of) matrices."""
    return (_cplx(*batch, n, n) + 2 * n * np.eye(n)).astype(dtype)


_A = _sq(3)
_A2 = _sq(4, 2)
_B = _cplx(3, 2)
_BV = _cplx(3)
_TALL = _cplx(4, 3)
_WIDE = _cplx(3, 5)
_H = _hpd(3)
_H2 = _hpd(4, 2)
_LOW = np.linalg.cholesky(_H)
_UP = np.ascontiguousarray(_LOW.conj().T)
_TRI = np.triu(_A)
_REAL = _RNG.standard_normal((4, 4))
_REAL2 = _RNG.standard_normal((2, 3, 3))


def _sq_abs(lib, out):
    """sum |out|^2 over every floating or complex output: gauge-dependent for vectors."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return sum((o.abs() ** 2).sum() for o in outs if o.is_floating_point() or o.is_complex())


def _abs3(lib, out):
    """sum |L|^2 + sum |V|^3: invariant under a phase per eigenvector."""
    return (out[0].abs() ** 2).sum() + (out[1].abs() ** 3).sum()


def _eigh_loss(lib, out):
    w, v = out
    return w.sum() + (v.abs() ** 2 * w.unsqueeze(-2)).sum() + (v.abs() ** 4).sum()


def _svd_loss(lib, out):
    u, s, vh = out
    return (u.abs() ** 3 @ s.to(u.abs().dtype)).sum() + (vh.abs() ** 3).sum()


def _svd_product(lib, a):
    u, s, vh = lib.linalg.svd(a, full_matrices=False)
    return (u * s.unsqueeze(-2)) @ vh


def _lu_solve(left, adjoint):
    def fn(lib, a, b):
        lu, piv = lib.linalg.lu_factor(a)
        return lib.linalg.lu_solve(lu, piv, b, left=left, adjoint=adjoint)
    return fn


# (name, function of (lib, *tensors), inputs, loss or None (|out|^2), compare forward values)
CASES = [
    ("linalg.inv", lambda L, a: L.linalg.inv(a), [_A], None, True),
    ("inverse", lambda L, a: L.inverse(a), [_A2], None, True),
    ("linalg.inv_ex", lambda L, a: L.linalg.inv_ex(a).inverse, [_A], None, True),
    ("linalg.det", lambda L, a: L.linalg.det(a), [_A2], None, True),
    ("det", lambda L, a: L.det(a), [_A], None, True),
    ("linalg.slogdet", lambda L, a: L.linalg.slogdet(a), [_A2], None, True),
    ("slogdet sign", lambda L, a: L.slogdet(a),
     [_A], lambda L, o: (o[0] * (1 + 2j)).real.sum() + o[1].sum(), True),
    ("logdet", lambda L, a: L.logdet(a), [_A], None, True),
    ("linalg.solve", lambda L, a, b: L.linalg.solve(a, b), [_A, _B], None, True),
    ("linalg.solve vector", lambda L, a, b: L.linalg.solve(a, b), [_A, _BV], None, True),
    ("linalg.solve right", lambda L, a, b: L.linalg.solve(a, b, left=False),
     [_A, _cplx(2, 3)], None, True),
    ("linalg.solve_ex batch", lambda L, a, b: L.linalg.solve_ex(a, b).result,
     [_A2, _cplx(2, 4, 2)], None, True),
    ("linalg.solve_triangular", lambda L, a, b: L.linalg.solve_triangular(a, b, upper=True),
     [_TRI, _B], None, True),
    ("linalg.solve_triangular right unit",
     lambda L, a, b: L.linalg.solve_triangular(a, b, upper=False, left=False,
                                               unitriangular=True),
     [_A, _cplx(2, 3)], None, True),
    ("triangular_solve", lambda L, b, a: L.triangular_solve(b, a), [_B, _TRI], None, True),
    ("triangular_solve transpose",
     lambda L, b, a: L.triangular_solve(b, a, upper=False, transpose=True),
     [_B, np.tril(_A)], None, True),
    ("linalg.cholesky", lambda L, a: L.linalg.cholesky(a), [_H2], None, True),
    ("linalg.cholesky upper", lambda L, a: L.linalg.cholesky(a, upper=True), [_H], None, True),
    ("linalg.cholesky_ex", lambda L, a: L.linalg.cholesky_ex(a).L, [_H], None, True),
    ("cholesky", lambda L, a: L.cholesky(a), [_H], None, True),
    ("cholesky upper", lambda L, a: L.cholesky(a, True), [_H], None, True),
    ("cholesky_solve", lambda L, b, low: L.cholesky_solve(b, low), [_B, _LOW], None, True),
    ("cholesky_solve upper", lambda L, b, up: L.cholesky_solve(b, up, upper=True),
     [_B, _UP], None, True),
    ("cholesky_inverse", lambda L, low: L.cholesky_inverse(low), [_LOW], None, True),
    ("cholesky_inverse upper", lambda L, up: L.cholesky_inverse(up, upper=True),
     [_UP], None, True),
    ("linalg.qr", lambda L, a: L.linalg.qr(a), [_TALL], None, True),
    ("linalg.qr R", lambda L, a: L.linalg.qr(a).R, [_TALL], None, True),
    ("linalg.qr wide", lambda L, a: L.linalg.qr(a), [_WIDE], None, True),
    ("linalg.qr complete", lambda L, a: L.linalg.qr(a, mode="complete"),
     [_A2], None, True),
    ("qr", lambda L, a: L.qr(a).Q, [_A], None, True),
    ("linalg.svd values", lambda L, a: L.linalg.svd(a, full_matrices=False).S,
     [_TALL], None, True),
    ("linalg.svd vectors", lambda L, a: L.linalg.svd(a, full_matrices=False),
     [_TALL], _svd_loss, False),
    ("linalg.svd full wide", lambda L, a: L.linalg.svd(a), [_WIDE], _svd_loss, False),
    ("linalg.svd product", _svd_product, [_WIDE], None, True),
    ("linalg.svdvals", lambda L, a: L.linalg.svdvals(a), [_WIDE], None, True),
    ("svd", lambda L, a: L.svd(a).S, [_A2], None, True),
    ("linalg.eigh", lambda L, a: L.linalg.eigh(a), [_H2], _eigh_loss, False),
    ("linalg.eigh values", lambda L, a: L.linalg.eigh(a, UPLO="U").eigenvalues,
     [_H], None, True),
    ("linalg.eigvalsh", lambda L, a: L.linalg.eigvalsh(a), [_H2], None, True),
    ("linalg.eig", lambda L, a: L.linalg.eig(a), [_A], _abs3, True),
    ("linalg.eig values", lambda L, a: L.linalg.eig(a).eigenvalues, [_A2], None, True),
    ("linalg.eigvals", lambda L, a: L.linalg.eigvals(a), [_A], None, True),
    ("linalg.eig real", lambda L, a: L.linalg.eig(a), [_REAL], _abs3, True),
    ("linalg.eigvals real", lambda L, a: L.linalg.eigvals(a), [_REAL2],
     lambda L, o: (o * (1 + 1j)).real.sum(), True),
    ("linalg.lu_factor", lambda L, a: L.linalg.lu_factor(a).LU, [_A2], None, True),
    ("linalg.lu_factor_ex", lambda L, a: L.linalg.lu_factor_ex(a).LU, [_A], None, True),
    ("linalg.lu", lambda L, a: L.linalg.lu(a), [_A2], None, True),
    ("linalg.lu wide", lambda L, a: L.linalg.lu(a), [_WIDE], None, True),
    ("linalg.lu tall", lambda L, a: L.linalg.lu(a), [_TALL], None, True),
    ("lu", lambda L, a: L.lu(a)[0], [_A], None, True),
    ("lu_unpack", lambda L, a: L.lu_unpack(*L.linalg.lu_factor(a)), [_A], None, True),
    ("lu_solve", lambda L, b, a: L.lu_solve(b, *L.linalg.lu_factor(a)), [_B, _A], None, True),
] + [
    (f"linalg.lu_solve left={left} adjoint={adj}", _lu_solve(left, adj),
     [_A, _B if left else _cplx(2, 3)], None, True)
    for left in (True, False) for adj in (True, False)
] + [
    ("linalg.matrix_exp", lambda L, a: L.linalg.matrix_exp(a), [_A * 0.1], None, True),
    ("matrix_exp", lambda L, a: L.matrix_exp(a), [_cplx(2, 3, 3) * 0.5], None, True),
    ("linalg.pinv tall", lambda L, a: L.linalg.pinv(a), [_TALL], None, True),
    ("linalg.pinv wide", lambda L, a: L.linalg.pinv(a), [_WIDE], None, True),
    ("linalg.pinv hermitian", lambda L, a: L.linalg.pinv(a, hermitian=True), [_H], None, True),
    ("pinverse", lambda L, a: L.pinverse(a), [_TALL], None, True),
    ("linalg.lstsq", lambda L, a, b: L.linalg.lstsq(a, b).solution,
     [_TALL, _cplx(4, 2)], None, True),
    ("linalg.lstsq gelsd", lambda L, a, b: L.linalg.lstsq(a, b, driver="gelsd"),
     [_TALL, _cplx(4, 2)], lambda L, o: (o[0].abs() ** 2).sum(), True),
    ("linalg.matrix_power", lambda L, a: L.linalg.matrix_power(a, 3), [_A], None, True),
    ("linalg.matrix_power negative", lambda L, a: L.linalg.matrix_power(a, -2),
     [_A], None, True),
    ("matrix_power", lambda L, a: L.matrix_power(a, 5), [_A * 0.3], None, True),
    ("linalg.cond", lambda L, a: L.linalg.cond(a), [_A], None, True),
    ("linalg.multi_dot", lambda L, a, b, c: L.linalg.multi_dot([a, b, c]),
     [_TALL, _A, _cplx(3, 2)], None, True),
    ("linalg.matrix_norm nuc", lambda L, a: L.linalg.matrix_norm(a, "nuc"), [_TALL], None,
     True),
    ("linalg.norm 2", lambda L, a: L.linalg.norm(a, 2), [_WIDE], None, True),
    ("linalg.tensorsolve", lambda L, a, b: L.linalg.tensorsolve(a, b), [_A, _BV], None, True),
    # complex64 and float32
    ("linalg.inv complex64", lambda L, a: L.linalg.inv(a), [_A.astype(np.complex64)], None,
     True),
    ("linalg.slogdet complex64", lambda L, a: L.linalg.slogdet(a),
     [_A.astype(np.complex64)], None, True),
    ("linalg.eigvalsh complex64", lambda L, a: L.linalg.eigvalsh(a),
     [_H.astype(np.complex64)], None, True),
    ("linalg.svdvals complex64", lambda L, a: L.linalg.svdvals(a),
     [_TALL.astype(np.complex64)], None, True),
    ("linalg.eigvals complex64", lambda L, a: L.linalg.eigvals(a),
     [_A.astype(np.complex64)], None, True),
    # sgeev's vectors may differ from MKL's by a sign each in float32 (not in float64)
    ("linalg.eig float32", lambda L, a: L.linalg.eig(a), [_REAL.astype(np.float32)], _abs3,
     False),
    ("linalg.solve complex64", lambda L, a, b: L.linalg.solve(a, b),
     [_A.astype(np.complex64), _B.astype(np.complex64)], None, True),
    ("linalg.cholesky complex64", lambda L, a: L.linalg.cholesky(a),
     [_H.astype(np.complex64)], None, True),
]


def _run(lib, fn, arrays, loss):
    ts = [lib.tensor(a, requires_grad=True) for a in arrays]
    out = fn(lib, *ts)
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    value = (loss or _sq_abs)(lib, out)
    value.backward()
    return ([o.detach().resolve_conj().numpy() for o in outs],
            [type(o.grad_fn).__name__ if o.grad_fn is not None else None for o in outs],
            float(value), [t.grad.resolve_conj().numpy() for t in ts])


@pytest.mark.parametrize("name,fn,arrays,loss,forward", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(name, fn, arrays, loss, forward):
    single = any(a.dtype in (np.complex64, np.float32) for a in arrays)
    tol = 2e-4 if single else 1e-8
    t_outs, t_nodes, t_loss, t_grads = _run(torch, fn, arrays, loss)
    f_outs, f_nodes, f_loss, f_grads = _run(fusegrad, fn, arrays, loss)
    assert f_nodes == t_nodes
    assert [o.dtype for o in f_outs] == [o.dtype for o in t_outs]
    assert [o.shape for o in f_outs] == [o.shape for o in t_outs]
    if forward:
        for f, t in zip(f_outs, t_outs):
            np.testing.assert_allclose(f, t, rtol=tol, atol=tol)
    assert f_loss == pytest.approx(t_loss, rel=tol)
    for f, t in zip(f_grads, t_grads):
        assert f.dtype == t.dtype
        np.testing.assert_allclose(f, t, rtol=tol * 10, atol=tol * 10)


def test_det_double_backward():
    """Second derivatives of det (fusegrad records them through the SVD, PyTorch through a
    solve: the values agree, the node names do not)."""
    grads = []
    for lib in (torch, fusegrad):
        a = lib.tensor(_A, requires_grad=True)
        (g,) = lib.autograd.grad(lib.linalg.det(a).abs(), a, create_graph=True)
        (g.abs() ** 2).sum().backward()
        grads.append((g.detach().resolve_conj().numpy(), a.grad.resolve_conj().numpy()))
    for t, f in zip(*grads):
        np.testing.assert_allclose(f, t, rtol=1e-8, atol=1e-8)


# ---------------------------------------------------------------- results unique up to a phase


def test_eigh_reconstructs():
    a = fusegrad.tensor(_H2)
    w, v = fusegrad.linalg.eigh(a)
    assert w.dtype == fusegrad.float64 and v.dtype == fusegrad.complex128
    tw, tv = torch.linalg.eigh(torch.tensor(_H2))
    np.testing.assert_allclose(w.numpy(), tw.numpy(), atol=1e-10)
    np.testing.assert_allclose(np.abs(v.numpy()), np.abs(tv.numpy()), atol=1e-8)
    vn = v.numpy()
    np.testing.assert_allclose(vn @ np.swapaxes(vn.conj(), -1, -2), np.broadcast_to(
        np.eye(4), (2, 4, 4)), atol=1e-10)
    np.testing.assert_allclose((vn * w.numpy()[..., None, :]) @ np.swapaxes(vn.conj(), -1, -2),
                               _H2, atol=1e-10)


def test_svd_reconstructs():
    u, s, vh = fusegrad.linalg.svd(fusegrad.tensor(_WIDE))
    assert s.dtype == fusegrad.float64 and u.dtype == vh.dtype == fusegrad.complex128
    assert tuple(u.shape) == (3, 3) and tuple(vh.shape) == (5, 5)
    un, vhn = u.numpy(), vh.numpy()
    np.testing.assert_allclose((un * s.numpy()) @ vhn[:3], _WIDE, atol=1e-10)
    np.testing.assert_allclose(vhn @ vhn.conj().T, np.eye(5), atol=1e-10)


@pytest.mark.parametrize("arr", [_A, _REAL], ids=["complex", "real"])
def test_eig_reconstructs(arr):
    w, v = fusegrad.linalg.eig(fusegrad.tensor(arr))
    assert w.dtype == v.dtype == fusegrad.complex128
    np.testing.assert_allclose(arr @ v.numpy(), v.numpy() * w.numpy(), atol=1e-10)
    np.testing.assert_allclose(np.linalg.norm(v.numpy(), axis=0), 1, atol=1e-12)


def test_qr_is_unitary_times_triangular():
    q, r = fusegrad.linalg.qr(fusegrad.tensor(_TALL))
    np.testing.assert_allclose(q.numpy() @ r.numpy(), _TALL, atol=1e-10)
    np.testing.assert_allclose(q.numpy().conj().T @ q.numpy(), np.eye(3), atol=1e-10)
    assert np.allclose(np.tril(r.numpy(), -1), 0)


# ---------------------------------------------------------------- PyTorch's errors


def _error(lib, fn):
    try:
        fn(lib)
    except Exception as e:  # noqa: BLE001 (compared with torch's, whatever it is)
        return type(e).__name__, str(e)
    return None


def _gauge_eigh(L):
    a = L.tensor(_H, requires_grad=True)
    L.linalg.eigh(a).eigenvectors.real.sum().backward()


def _gauge_eig(L):
    a = L.tensor(_A, requires_grad=True)
    L.linalg.eig(a).eigenvectors.real.sum().backward()


def _gauge_eig_real(L):
    a = L.tensor(_REAL, requires_grad=True)
    L.linalg.eig(a).eigenvectors.imag.sum().backward()


def _gauge_svd(L):
    a = L.tensor(_TALL, requires_grad=True)
    L.linalg.svd(a, full_matrices=False).U.real.sum().backward()


def _eigvalsh_backward(L):
    a = L.tensor(_H, requires_grad=True)
    with L.no_grad():
        w = L.linalg.eigvalsh(a)
    w.requires_grad_()


ERRORS = [
    ("eigh gauge", _gauge_eigh),
    ("eig gauge", _gauge_eig),
    ("eig real gauge", _gauge_eig_real),
    ("svd gauge", _gauge_svd),
    ("eig not square", lambda L: L.linalg.eig(L.ones(2, 3, dtype=L.complex64))),
    ("eigvals not square", lambda L: L.linalg.eigvals(L.ones(2, 3))),
    ("eig integer", lambda L: L.linalg.eig(L.ones(2, 2, dtype=L.int64))),
    ("eig non-finite", lambda L: L.linalg.eig(L.full((2, 3), float("nan")))),
    ("eigh integer", lambda L: L.linalg.eigh(L.ones(2, 2, dtype=L.int32))),
    ("inv integer", lambda L: L.linalg.inv(L.ones(2, 2, dtype=L.int64))),
    ("solve mixed dtypes", lambda L: L.linalg.solve(L.eye(2, dtype=L.complex64),
                                                    L.ones(2, dtype=L.float32))),
    ("cholesky not positive-definite",
     lambda L: L.linalg.cholesky(-L.eye(2, dtype=L.complex128))),
    ("inv singular", lambda L: L.linalg.inv(L.zeros(2, 2, dtype=L.complex64))),
    ("lu_factor integer", lambda L: L.linalg.lu_factor(L.ones(2, 2, dtype=L.int64))),
    ("pinv integer", lambda L: L.linalg.pinv(L.ones(2, 2, dtype=L.int64))),
]


@pytest.mark.parametrize("name,fn", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, fn):
    expected = _error(torch, fn)
    got = _error(fusegrad, fn)
    assert expected is not None
    assert got is not None
    # torch's LinAlgError class is `torch._C._LinAlgError`: compare the message only there.
    if expected[0] != "_LinAlgError":
        assert got[0] == expected[0]
    assert got[1] == expected[1]


def test_empty_and_dtypes():
    for fn in (lambda L: L.linalg.svdvals(L.zeros(0, 3, dtype=L.complex64)),
               lambda L: L.linalg.eigvalsh(L.zeros(0, 0, dtype=L.complex64)),
               lambda L: L.linalg.eig(L.zeros(0, 0)).eigenvectors,
               lambda L: L.linalg.slogdet(L.eye(2, dtype=L.complex64) * 1j).logabsdet,
               lambda L: L.linalg.lu(L.eye(2, dtype=L.complex64)).P,
               # forward only: torch's own backward of cond(A, 1) fails (an in-place write)
               lambda L: L.linalg.cond(L.tensor(_A), 1),
               lambda L: L.linalg.cond(L.tensor(_A), "fro"),
               lambda L: L.linalg.lstsq(L.eye(3, 2, dtype=L.complex64),
                                        L.ones(3, 2, dtype=L.complex64), driver="gelsd")[1]):
        t, f = fn(torch), fn(fusegrad)
        assert str(f.dtype) == str(t.dtype)
        assert tuple(f.shape) == tuple(t.shape)
        np.testing.assert_allclose(f.numpy(), t.numpy())
