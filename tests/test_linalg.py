"""`fusegrad.linalg` and the top-level linear algebra functions against torch.

Each case runs the same call on both libraries with the same data, in float32 and float64,
and compares values, dtypes, grad_fn names and the gradient of every float input for a random
cotangent. Singular and eigenvectors are unique only up to sign (fusegrad's LAPACK is not
PyTorch's MKL), so those cases align fusegrad's signs with torch's before comparing, and feed
torch the cotangent with the same signs. Errors are compared by type and message.
"""

from __future__ import annotations

import math
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402
from fusegrad.linalg import LinAlgError  # noqa: E402

DTYPES = [np.float32, np.float64]


def _mat(rng, *shape):
    """Random well-conditioned (diagonally dominant where square-ish) matrices."""
    m, n = shape[-2:]
    return rng.uniform(-1, 1, size=shape) + max(m, n) * np.eye(m, n)


def _rand(rng, *shape):
    return rng.uniform(-1, 1, size=shape)


def _conv(lib, x, dtype, grad):
    if isinstance(x, np.ndarray):
        arr = x.astype(dtype) if x.dtype.kind == "f" else x
        t = lib.from_numpy(arr.copy())
        if grad and arr.dtype.kind == "f":
            t.requires_grad_(True)
        return t
    if isinstance(x, list):
        return [_conv(lib, v, dtype, grad) for v in x]
    return x


def _flat(out):
    if isinstance(out, (tuple, list)):
        res = []
        for o in out:
            res += _flat(o)
        return res
    return [out]


def _leaves(args):
    out = []
    for a in args:
        if isinstance(a, list):
            out += _leaves(a)
        elif hasattr(a, "requires_grad") and a.requires_grad:
            out.append(a)
    return out


def _np(t):
    return np.asarray(t.detach().numpy(), dtype=np.float64)


def _name(t):
    return type(t.grad_fn).__name__ if t.grad_fn is not None else None


def check(fn, *args, grad=True, names=True, signs=None, tol=None, dtypes=DTYPES):
    """Compare `fn(lib, *args)` on fusegrad and torch. `signs(fg_outs, th_outs)` returns one
    sign array (or None) per output to align fusegrad's outputs with torch's."""
    for dtype in dtypes:
        t = tol or (2e-4 if dtype == np.float32 else 1e-9)
        fg_args = [_conv(fusegrad, a, dtype, grad) for a in args]
        th_args = [_conv(torch, a, dtype, grad) for a in args]
        fg_out, th_out = _flat(fn(fusegrad, *fg_args)), _flat(fn(torch, *th_args))
        assert len(fg_out) == len(th_out)
        align = signs(fg_out, th_out) if signs else [None] * len(fg_out)
        for k, (f, h, s) in enumerate(zip(fg_out, th_out, align)):
            what = f"{dtype.__name__} output {k}"
            assert f.dtype.name == str(h.dtype).split(".")[1], what
            assert tuple(f.shape) == tuple(h.shape), what
            value = _np(f) if s is None else _np(f) * s
            np.testing.assert_allclose(value, _np(h), rtol=t, atol=t, err_msg=what)
            if names:
                assert _name(f) == _name(h), f"{what}: {_name(f)} != {_name(h)}"
        if not grad:
            continue
        rng = np.random.default_rng(1)
        fg_loss = th_loss = 0
        for f, h, s in zip(fg_out, th_out, align):
            if h.grad_fn is None or not h.is_floating_point() or f.grad_fn is None:
                continue
            cot = rng.standard_normal(tuple(h.shape))
            fg_cot = cot if s is None else cot * s
            fg_loss = fg_loss + (f * fusegrad.from_numpy(fg_cot.astype(dtype))).sum()
            th_loss = th_loss + (h * torch.from_numpy(cot.astype(dtype))).sum()
        if isinstance(th_loss, int):
            continue
        th_loss.backward()
        fg_loss.backward()
        for i, (a, b) in enumerate(zip(_leaves(fg_args), _leaves(th_args))):
            if b.grad is None:
                assert a.grad is None or not a.grad.numpy().any(), f"grad {i}"
                continue
            assert a.grad is not None, f"{dtype.__name__}: no gradient for input {i}"
            np.testing.assert_allclose(_np(a.grad), _np(b.grad), rtol=t * 10, atol=t * 10,
                                       err_msg=f"{dtype.__name__} grad {i}")


def _column_signs(f, h, axis=-2):
    """Signs making fusegrad's vectors (columns, or rows with axis=-1) match torch's."""
    d = np.sign((_np(f) * _np(h)).sum(axis, keepdims=True))
    return np.where(d == 0, 1.0, d)


def _svd_signs(fg, th):
    su = _column_signs(fg[0], th[0])
    return [su, None, np.swapaxes(su, -1, -2)]  # a flipped column of U flips Vh's row


def _eigh_signs(fg, th):
    return [None, _column_signs(fg[1], th[1])]


RNG = np.random.default_rng(0)
R = RNG

# ---------------------------------------------------------------- functions against torch

CASES = {
    "inv": (lambda m, a: m.linalg.inv(a), _mat(R, 3, 3)),
    "inv batched": (lambda m, a: m.linalg.inv(a), _mat(R, 2, 3, 4, 4)),
    "inv_ex": (lambda m, a: m.linalg.inv_ex(a), _mat(R, 2, 3, 3)),
    "inverse": (lambda m, a: m.inverse(a), _mat(R, 3, 3)),
    "Tensor.inverse": (lambda m, a: a.inverse(), _mat(R, 2, 3, 3)),
    "det": (lambda m, a: m.linalg.det(a), _mat(R, 2, 3, 3)),
    "det 1x1": (lambda m, a: m.det(a), _mat(R, 1, 1)),
    "Tensor.det": (lambda m, a: a.det(), _mat(R, 4, 4)),
    "slogdet": (lambda m, a: m.linalg.slogdet(a), _mat(R, 2, 3, 3)),
    "slogdet neg": (lambda m, a: m.slogdet(-a), _mat(R, 3, 3)),
    "logdet": (lambda m, a: m.logdet(a), _mat(R, 2, 3, 3)),
    "logdet nan": (lambda m, a: a.logdet(), -_mat(R, 3, 3)),
    "solve": (lambda m, a, b: m.linalg.solve(a, b), _mat(R, 3, 3), _rand(R, 3, 2)),
    "solve vector": (lambda m, a, b: m.linalg.solve(a, b), _mat(R, 2, 3, 3), _rand(R, 3)),
    "solve batched vector": (lambda m, a, b: m.linalg.solve(a, b), _mat(R, 2, 3, 3),
                             _rand(R, 2, 3)),
    "solve broadcast": (lambda m, a, b: m.linalg.solve(a, b), _mat(R, 3, 3), _rand(R, 2, 3, 4)),
    "solve right": (lambda m, a, b: m.linalg.solve(a, b, left=False), _mat(R, 2, 3, 3),
                    _rand(R, 2, 4, 3)),
    "solve_ex": (lambda m, a, b: m.linalg.solve_ex(a, b), _mat(R, 3, 3), _rand(R, 3, 2)),
    "cholesky": (lambda m, x: m.linalg.cholesky(x @ x.mT + 3 * m.eye(3, dtype=x.dtype)),
                 _rand(R, 2, 3, 3)),
    "cholesky upper": (lambda m, x: m.linalg.cholesky(x @ x.mT + 3 * m.eye(3, dtype=x.dtype),
                                                      upper=True), _rand(R, 3, 3)),
    "cholesky_ex": (lambda m, x: m.linalg.cholesky_ex(x @ x.mT + 3 * m.eye(3, dtype=x.dtype)),
                    _rand(R, 3, 3)),
    "torch.cholesky": (lambda m, x: m.cholesky(x @ x.mT + 3 * m.eye(3, dtype=x.dtype), True),
                       _rand(R, 3, 3)),
    "qr": (lambda m, a: m.linalg.qr(a), _rand(R, 4, 3)),
    "qr wide": (lambda m, a: m.linalg.qr(a), _rand(R, 2, 3, 5)),
    "qr complete": (lambda m, a: m.linalg.qr(a, "complete"), _rand(R, 3, 3)),
    "torch.qr": (lambda m, a: m.qr(a), _rand(R, 4, 3)),
    "Tensor.qr": (lambda m, a: a.qr(some=False), _rand(R, 3, 3)),
    "svdvals": (lambda m, a: m.linalg.svdvals(a), _rand(R, 2, 4, 3)),
    "eigvalsh": (lambda m, a: m.linalg.eigvalsh(a + a.mT), _rand(R, 2, 4, 4)),
    "eigvalsh U": (lambda m, a: m.linalg.eigvalsh(a + a.mT, "U"), _rand(R, 3, 3)),
    "pinv": (lambda m, a: m.linalg.pinv(a), _mat(R, 3, 3)),
    "pinv tall": (lambda m, a: m.linalg.pinv(a), _mat(R, 2, 5, 3)),
    "pinv wide": (lambda m, a: m.linalg.pinv(a), _mat(R, 3, 5)),
    "pinv hermitian": (lambda m, a: m.linalg.pinv(a + a.mT, hermitian=True), _mat(R, 3, 3)),
    "pinv rtol": (lambda m, a: m.linalg.pinv(a, rtol=0.1), _mat(R, 3, 4)),
    "pinverse": (lambda m, a: m.pinverse(a), _mat(R, 4, 3)),
    "matrix_power 0": (lambda m, a: m.linalg.matrix_power(a, 0), _mat(R, 3, 3)),
    "matrix_power 1": (lambda m, a: m.linalg.matrix_power(a, 1), _mat(R, 3, 3)),
    "matrix_power 2": (lambda m, a: m.linalg.matrix_power(a, 2), _mat(R, 3, 3)),
    "matrix_power 3": (lambda m, a: m.matrix_power(a, 3), _mat(R, 2, 3, 3)),
    "matrix_power 6": (lambda m, a: a.matrix_power(6), _rand(R, 3, 3)),
    "matrix_power -1": (lambda m, a: m.linalg.matrix_power(a, -1), _mat(R, 3, 3)),
    "matrix_power -2": (lambda m, a: m.linalg.matrix_power(a, -2), _mat(R, 3, 3)),
    "norm fro": (lambda m, a: m.linalg.norm(a), _rand(R, 3, 4)),
    "norm 3d": (lambda m, a: m.linalg.norm(a), _rand(R, 2, 3, 4)),
    "norm vector": (lambda m, a: m.linalg.norm(a, 3), _rand(R, 5)),
    "norm dim": (lambda m, a: m.linalg.norm(a, dim=1), _rand(R, 3, 4)),
    "norm dims": (lambda m, a: m.linalg.norm(a, dim=(0, 2)), _rand(R, 2, 3, 4)),
    "norm 2": (lambda m, a: m.linalg.norm(a, 2), _rand(R, 3, 4)),
    "norm nuc": (lambda m, a: m.linalg.norm(a, "nuc"), _rand(R, 3, 4)),
    "matrix_norm fro": (lambda m, a: m.linalg.matrix_norm(a), _rand(R, 2, 3, 4)),
    "matrix_norm -2": (lambda m, a: m.linalg.matrix_norm(a, -2), _rand(R, 2, 3, 4)),
    "matrix_norm 2 keepdim": (lambda m, a: m.linalg.matrix_norm(a, 2, keepdim=True),
                              _rand(R, 2, 3, 4)),
    "matrix_norm nuc dims": (lambda m, a: m.linalg.matrix_norm(a, "nuc", dim=(0, 2)),
                             _rand(R, 2, 3, 4)),
    "matrix_norm 1": (lambda m, a: m.linalg.matrix_norm(a, 1), _rand(R, 2, 3, 4)),
    "matrix_norm -1": (lambda m, a: m.linalg.matrix_norm(a, -1), _rand(R, 3, 4)),
    "matrix_norm inf": (lambda m, a: m.linalg.matrix_norm(a, math.inf), _rand(R, 2, 3, 4)),
    "matrix_norm -inf keepdim": (lambda m, a: m.linalg.matrix_norm(a, -math.inf, keepdim=True),
                                 _rand(R, 3, 4)),
    "lstsq": (lambda m, a, b: m.linalg.lstsq(a, b), _mat(R, 3, 3), _rand(R, 3, 2)),
    "lstsq tall": (lambda m, a, b: m.linalg.lstsq(a, b), _mat(R, 2, 5, 3), _rand(R, 2, 5, 2)),
    "lstsq vector": (lambda m, a, b: m.linalg.lstsq(a, b).solution, _mat(R, 2, 4, 3),
                     _rand(R, 2, 4)),
    "lstsq gelsd": (lambda m, a, b: m.linalg.lstsq(a, b, driver="gelsd")[0], _mat(R, 5, 3),
                    _rand(R, 5, 2)),
    "solve_triangular": (lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True),
                         _mat(R, 3, 3), _rand(R, 3, 2)),
    "solve_triangular lower right unit": (
        lambda m, a, b: m.linalg.solve_triangular(a, b, upper=False, left=False,
                                                  unitriangular=True),
        _mat(R, 2, 3, 3), _rand(R, 4, 3)),
    "cross": (lambda m, a, b: m.linalg.cross(a, b), _rand(R, 4, 3), _rand(R, 4, 3)),
    "cross broadcast dim": (lambda m, a, b: m.linalg.cross(a, b, dim=1), _rand(R, 2, 3, 4),
                            _rand(R, 1, 3, 4)),
    "torch.cross": (lambda m, a, b: m.cross(a, b, dim=0), _rand(R, 3, 4), _rand(R, 3, 4)),
    "Tensor.cross": (lambda m, a, b: a.cross(b, dim=-1), _rand(R, 2, 3), _rand(R, 2, 3)),
    "multi_dot 2": (lambda m, a, b: m.linalg.multi_dot([a, b]), _rand(R, 3, 4), _rand(R, 4, 2)),
    "multi_dot 3": (lambda m, a, b, c: m.linalg.multi_dot([a, b, c]), _rand(R, 4),
                    _rand(R, 4, 5), _rand(R, 5, 2)),
    "multi_dot 4": (lambda m, a, b, c, d: m.linalg.multi_dot([a, b, c, d]), _rand(R, 2, 6),
                    _rand(R, 6, 3), _rand(R, 3, 5), _rand(R, 5)),
    "chain_matmul": (lambda m, a, b, c: m.chain_matmul(a, b, c), _rand(R, 2, 3),
                     _rand(R, 3, 4), _rand(R, 4, 2)),
    "vecdot": (lambda m, a, b: m.linalg.vecdot(a, b), _rand(R, 4), _rand(R, 4)),
    "vecdot batched": (lambda m, a, b: m.linalg.vecdot(a, b, dim=0), _rand(R, 3, 4),
                       _rand(R, 3, 1)),
    "lu_factor": (lambda m, a: m.linalg.lu_factor(a), _mat(R, 2, 3, 3)),
    "lu_factor_ex": (lambda m, a: m.linalg.lu_factor_ex(a), _mat(R, 4, 3)),
    "lu": (lambda m, a: m.linalg.lu(a), _mat(R, 2, 3, 4)),
    "lu square": (lambda m, a: m.linalg.lu(a), _rand(R, 4, 4)),
    "lu_solve": (lambda m, a, b: m.linalg.lu_solve(*m.linalg.lu_factor(a), b), _mat(R, 3, 3),
                 _rand(R, 2, 3, 2)),
    "lu_solve adjoint right": (lambda m, a, b: m.linalg.lu_solve(
        *m.linalg.lu_factor(a), b, left=False, adjoint=True), _mat(R, 3, 3), _rand(R, 2, 3)),
    "matrix_exp": (lambda m, a: m.linalg.matrix_exp(a), _rand(R, 2, 3, 3)),
    "matrix_exp large": (lambda m, a: m.matrix_exp(3 * a), _rand(R, 4, 4)),
    "cond": (lambda m, a: m.linalg.cond(a), _mat(R, 2, 3, 3)),
    "cond -2": (lambda m, a: m.linalg.cond(a, -2), _mat(R, 3, 4)),
    "tensorsolve": (lambda m, a, b: m.linalg.tensorsolve(a, b), _mat(R, 6, 6).reshape(2, 3, 6),
                    _rand(R, 2, 3)),
    "vander": (lambda m, x: m.linalg.vander(x), _rand(R, 4)),
    "vander N": (lambda m, x: m.linalg.vander(x, N=3), _rand(R, 2, 4)),
    "diagonal": (lambda m, a: m.linalg.diagonal(a, offset=1), _rand(R, 2, 3, 4)),
    "kron": (lambda m, a, b: m.kron(a, b), _rand(R, 2, 3), _rand(R, 3, 2)),
    "kron ranks": (lambda m, a, b: a.kron(b), _rand(R, 2, 3), _rand(R, 2, 1, 2)),
    "inner": (lambda m, a, b: m.inner(a, b), _rand(R, 2, 3), _rand(R, 4, 3)),
    "inner 1d": (lambda m, a, b: a.inner(b), _rand(R, 3), _rand(R, 3)),
    "vdot": (lambda m, a, b: m.vdot(a, b), _rand(R, 5), _rand(R, 5)),
    "ger": (lambda m, a, b: m.ger(a, b), _rand(R, 3), _rand(R, 2)),
    "addr": (lambda m, s, a, b: m.addr(s, a, b, beta=0.5, alpha=2), _rand(R, 3, 2),
             _rand(R, 3), _rand(R, 2)),
    "Tensor.addr": (lambda m, s, a, b: s.addr(a, b), _rand(R, 2), _rand(R, 3), _rand(R, 2)),
    "addbmm": (lambda m, s, a, b: m.addbmm(s, a, b, alpha=-1), _rand(R, 3, 4),
               _rand(R, 2, 3, 5), _rand(R, 2, 5, 4)),
    "cholesky_solve": (lambda m, b, x: m.cholesky_solve(b, m.linalg.cholesky(
        x @ x.mT + 3 * m.eye(3, dtype=x.dtype))), _rand(R, 2, 3, 2), _rand(R, 3, 3)),
    "cholesky_solve upper": (lambda m, b, x: b.cholesky_solve(m.linalg.cholesky(
        x @ x.mT + 3 * m.eye(3, dtype=x.dtype), upper=True), True), _rand(R, 3, 2),
        _rand(R, 3, 3)),
    "cholesky_inverse": (lambda m, x: m.cholesky_inverse(m.linalg.cholesky(
        x @ x.mT + 3 * m.eye(3, dtype=x.dtype))), _rand(R, 3, 3)),
    "cholesky_inverse upper": (lambda m, x: m.linalg.cholesky(
        x @ x.mT + 3 * m.eye(3, dtype=x.dtype), upper=True).cholesky_inverse(True),
        _rand(R, 2, 3, 3)),
    "triangular_solve": (lambda m, b, a: m.triangular_solve(b, a), _rand(R, 3, 2),
                         _mat(R, 3, 3)),
    "triangular_solve lower transpose unit": (
        lambda m, b, a: b.triangular_solve(a, upper=False, transpose=True, unitriangular=True),
        _rand(R, 2, 3, 2), _mat(R, 3, 3)),
}


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("case", list(CASES))
def test_function_matches_torch(case):
    fn, *args = CASES[case]
    check(fn, *args)


def test_tensorinv():
    # PyTorch reshapes the inverse with `_reshape_alias` (ReshapeAliasBackward0); fusegrad's
    # reshape of a contiguous tensor is a view (ViewBackward0): values and gradients only.
    check(lambda m, a: m.linalg.tensorinv(a, ind=1), _mat(R, 6, 6).reshape(6, 2, 3),
          names=False)
    check(lambda m, a: m.linalg.tensorinv(a), _mat(R, 6, 6).reshape(2, 3, 6), names=False)


def test_cond_other_norms():
    # PyTorch's backward of cond for p other than 2/-2/None fails (it modifies the saved
    # inverse in place); fusegrad's works. Values and node names only.
    for p in ("fro", "nuc", 1, -math.inf):
        check(lambda m, a, p=p: m.linalg.cond(a, p), _mat(R, 2, 3, 3), grad=False)


def test_qr_r_mode():
    check(lambda m, a: m.linalg.qr(a, "r")[1], _rand(R, 4, 3), grad=False)
    for lib in (torch, fusegrad):
        a = lib.ones(3, 2, requires_grad=True)
        with pytest.raises(RuntimeError, match="mode='r'"):
            lib.linalg.qr(a, "r")[1].sum().backward()
        a = lib.ones(3, 2, requires_grad=True)
        with pytest.raises(RuntimeError, match="not differentiable when mode='complete'"):
            lib.linalg.qr(a, "complete")[0].sum().backward()


def test_matrix_rank():
    a = _rand(R, 2, 4, 3) @ _rand(R, 2, 3, 5)  # rank 3
    check(lambda m, x: m.linalg.matrix_rank(x), a, grad=False)
    check(lambda m, x: m.linalg.matrix_rank(x, atol=1.0, rtol=0.0), a, grad=False)
    check(lambda m, x: m.linalg.matrix_rank(x + x.mT, hermitian=True), _rand(R, 4, 4),
          grad=False)


@pytest.mark.parametrize("shape", [(3, 3), (4, 3), (3, 5), (2, 4, 4)])
@pytest.mark.parametrize("full", [False, True])
def test_svd(shape, full):
    a = _rand(np.random.default_rng(sum(shape)), *shape)
    k = min(shape[-2:])

    def fn(m, x):
        # With full_matrices the vectors past k span a subspace (not unique): compare the
        # first k, as PyTorch's gradient also ignores the others.
        u, s, vh = m.linalg.svd(x, full_matrices=full)
        return (u[..., :k], s, vh[..., :k, :]) if full else (u, s, vh)

    check(fn, a, signs=_svd_signs, names=not full)
    if full:
        out = fusegrad.linalg.svd(fusegrad.from_numpy(a).requires_grad_(), full_matrices=True)
        assert {type(t.grad_fn).__name__ for t in out} == {"LinalgSvdBackward0"}


def test_torch_svd():
    a = _rand(R, 4, 3)

    def signs(fg, th):
        su = _column_signs(fg[0], th[0])
        return [su, None, su]  # V's columns flip with U's

    check(lambda m, x: m.svd(x), a, signs=signs)
    check(lambda m, x: x.svd(compute_uv=False), a, grad=False)


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(uplo):
    check(lambda m, x: m.linalg.eigh(x + x.mT, UPLO=uplo), _rand(R, 2, 4, 4),
          signs=_eigh_signs)


def _cofactors(a: np.ndarray) -> np.ndarray:
    """The matrix of cofactors of 3x3 `a`: det's gradient, singular or not."""
    c = np.empty_like(a)
    for i in range(3):
        for j in range(3):
            minor = np.delete(np.delete(a, i, 0), j, 1)
            c[i, j] = (-1) ** (i + j) * (minor[0, 0] * minor[1, 1] - minor[0, 1] * minor[1, 0])
    return c


def test_det_singular_gradient():
    """A rank-deficient matrix: det's gradient is still its cofactors. (The oracle is the
    formula: PyTorch's gradient there comes from an SVD and depends on the LAPACK and CPU,
    all zeros with MKL on AMD's Zen 4, the cofactors on Intel's cores.)"""
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    for arr in (a, np.stack([a, np.eye(3)])):
        x = fusegrad.tensor(arr, requires_grad=True)
        d = fusegrad.linalg.det(x)
        np.testing.assert_allclose(d.detach().numpy(),
                                   torch.linalg.det(torch.from_numpy(arr)).numpy(), atol=1e-12)
        d.sum().backward()
        want = np.stack([_cofactors(m) for m in arr.reshape(-1, 3, 3)]).reshape(arr.shape)
        np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- gradcheck (float64)


def _gradcheck(fn, *arrays):
    inputs = tuple(fusegrad.from_numpy(a.astype(np.float64)).requires_grad_() for a in arrays)
    assert fusegrad.autograd.gradcheck(fn, inputs)


def _fix_signs(u, axis=-2):
    # A sign-invariant function of the vectors: each scaled by the sign of its largest entry.
    ref = u.detach().numpy()
    idx = np.abs(ref).argmax(axis)
    pick = np.take_along_axis(ref, np.expand_dims(idx, axis), axis)
    return u * fusegrad.from_numpy(np.sign(pick))


GRADCHECKS = {
    "inv": (lambda a: fusegrad.linalg.inv(a), _mat(R, 2, 3, 3)),
    "det": (lambda a: fusegrad.linalg.det(a), _mat(R, 3, 3)),
    "slogdet": (lambda a: fusegrad.linalg.slogdet(a)[1], _mat(R, 3, 3)),
    "solve": (lambda a, b: fusegrad.linalg.solve(a, b), _mat(R, 3, 3), _rand(R, 2, 3, 2)),
    "cholesky": (lambda x: fusegrad.linalg.cholesky(x @ x.mT + 3 * fusegrad.eye(
        3, dtype=fusegrad.float64)), _rand(R, 3, 3)),
    "cholesky sym": (lambda a: fusegrad.linalg.cholesky((a + a.mT) / 2),
                     _mat(R, 3, 3) @ _mat(R, 3, 3).T),
    "qr": (lambda a: fusegrad.linalg.qr(a), _rand(R, 4, 3)),
    "svd": (lambda a: tuple(_fix_signs(t, ax) for t, ax in zip(
        fusegrad.linalg.svd(a, full_matrices=False)[::2], (-2, -1)))
        + (fusegrad.linalg.svdvals(a),), _rand(R, 4, 3)),
    "eigh": (lambda a: (fusegrad.linalg.eigvalsh(a + a.mT),
                        _fix_signs(fusegrad.linalg.eigh(a + a.mT)[1])), _rand(R, 3, 3)),
    "pinv hermitian": (lambda a: fusegrad.linalg.pinv(a + a.mT, hermitian=True),
                       _mat(R, 3, 3)),
    "pinv": (lambda a: fusegrad.linalg.pinv(a), _mat(R, 3, 5)),
    "matrix_norm 2": (lambda a: fusegrad.linalg.matrix_norm(a, 2), _rand(R, 3, 4)),
    "lstsq": (lambda a, b: fusegrad.linalg.lstsq(a, b).solution, _mat(R, 5, 3), _rand(R, 5, 2)),
    "cholesky_inverse": (lambda x: fusegrad.cholesky_inverse(fusegrad.linalg.cholesky(
        x @ x.mT + 3 * fusegrad.eye(3, dtype=fusegrad.float64))), _rand(R, 3, 3)),
    "cholesky_solve": (lambda b, x: fusegrad.cholesky_solve(b, fusegrad.linalg.cholesky(
        x @ x.mT + 3 * fusegrad.eye(3, dtype=fusegrad.float64))), _rand(R, 3, 2),
        _rand(R, 3, 3)),
}


@pytest.mark.parametrize("case", list(GRADCHECKS))
def test_gradcheck(case):
    fn, *arrays = GRADCHECKS[case]
    _gradcheck(fn, *arrays)


@pytest.mark.parametrize("case", ["inv", "det", "solve", "cholesky", "slogdet"])
def test_gradgradcheck(case):
    fn, *arrays = GRADCHECKS[case]
    inputs = tuple(fusegrad.from_numpy(a.astype(np.float64)).requires_grad_() for a in arrays)
    assert fusegrad.autograd.gradgradcheck(fn, inputs)


# ---------------------------------------------------------------- errors


_SINGULAR = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
_NOT_PD = np.array([[1.0, 2.0], [2.0, 1.0]])
_WIDE = _rand(R, 2, 3)
_LONG = np.ones((3, 3), np.int64)
_VEC = _rand(R, 3)

ERRORS = {
    "inv singular": (lambda m, a: m.linalg.inv(a), _SINGULAR),
    "inv singular batch": (lambda m, a: m.linalg.inv(a), np.stack([np.eye(3), _SINGULAR])),
    "inverse singular": (lambda m, a: m.inverse(a), _SINGULAR),
    "inv nonsquare": (lambda m, a: m.linalg.inv(a), _WIDE),
    "inv long": (lambda m, a: m.linalg.inv(a), _LONG),
    "inv 1d": (lambda m, a: m.linalg.inv(a), _VEC),
    "inv half": (lambda m, a: m.linalg.inv(a.half()), np.eye(3)),
    "det nonsquare": (lambda m, a: m.linalg.det(a), _WIDE),
    "slogdet long": (lambda m, a: m.linalg.slogdet(a), _LONG),
    "logdet nonsquare": (lambda m, a: m.logdet(a), _WIDE),
    "solve singular": (lambda m, a, b: m.linalg.solve(a, b), _SINGULAR, _VEC),
    "solve singular batch": (lambda m, a, b: m.linalg.solve(a, b),
                             np.stack([np.eye(3), _SINGULAR]), _rand(R, 2, 3, 1)),
    "solve shapes": (lambda m, a, b: m.linalg.solve(a, b), np.eye(3), _rand(R, 2, 2)),
    "solve nonsquare": (lambda m, a, b: m.linalg.solve(a, b), _WIDE, _rand(R, 2)),
    "cholesky not pd": (lambda m, a: m.linalg.cholesky(a), _NOT_PD),
    "cholesky not pd batch": (lambda m, a: m.linalg.cholesky(a), np.stack([np.eye(2), _NOT_PD])),
    "cholesky upper not pd": (lambda m, a: m.linalg.cholesky(a, upper=True), _NOT_PD),
    "torch.cholesky not pd": (lambda m, a: m.cholesky(a), _NOT_PD),
    "cholesky 1d": (lambda m, a: m.linalg.cholesky(a), _VEC),
    "qr long": (lambda m, a: m.linalg.qr(a), _LONG),
    "qr mode": (lambda m, a: m.linalg.qr(a, "foo"), _WIDE),
    "svd 1d": (lambda m, a: m.linalg.svd(a), _VEC),
    "svd driver": (lambda m, a: m.linalg.svdvals(a, driver="gesvd"), np.eye(3)),
    "solve dtypes": (lambda m, a, b: m.linalg.solve(a, b.float()), np.eye(3), _rand(R, 3)),
    "eigh nonsquare": (lambda m, a: m.linalg.eigh(a), _WIDE),
    "eigh long": (lambda m, a: m.linalg.eigh(a), _LONG),
    "eigh uplo": (lambda m, a: m.linalg.eigh(a, "X"), np.eye(3)),
    "pinv long": (lambda m, a: m.linalg.pinv(a), _LONG),
    "matrix_exp nonsquare": (lambda m, a: m.linalg.matrix_exp(a), _WIDE),
    "matrix_power nonsquare": (lambda m, a: m.linalg.matrix_power(a, 2), _WIDE),
    "matrix_norm ord": (lambda m, a: m.linalg.matrix_norm(a, 3), np.eye(3)),
    "norm ord 3d": (lambda m, a: m.linalg.norm(a, 2), _rand(R, 2, 2, 2)),
    "lu_factor singular": (lambda m, a: m.linalg.lu_factor(a), _SINGULAR),
    "lu_factor_ex check": (lambda m, a: m.linalg.lu_factor_ex(a, check_errors=True),
                           _SINGULAR),
    "lu_factor no pivot": (lambda m, a: m.linalg.lu_factor(a, pivot=False), np.eye(3)),
    "lu_factor 1d": (lambda m, a: m.linalg.lu_factor(a), _VEC),
    "solve_triangular shapes": (lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True),
                                np.eye(3), _rand(R, 2, 2)),
    "cross length": (lambda m, a, b: m.linalg.cross(a, b), _rand(R, 2, 4), _rand(R, 2, 4)),
    "cross broadcast": (lambda m, a, b: m.linalg.cross(a, b), _rand(R, 2, 3), _rand(R, 3, 3)),
    "multi_dot one": (lambda m, a: m.linalg.multi_dot([a]), np.eye(2)),
    "multi_dot shapes": (lambda m, a, b: m.linalg.multi_dot([a, b]), np.eye(2), np.eye(3)),
    "lstsq shapes": (lambda m, a, b: m.linalg.lstsq(a, b), np.eye(3), _rand(R, 2, 2)),
    "vecdot sizes": (lambda m, a, b: m.linalg.vecdot(a, b), _rand(R, 3), _rand(R, 4)),
    "cond 1d": (lambda m, a: m.linalg.cond(a), _VEC),
    "matrix_rank 1d": (lambda m, a: m.linalg.matrix_rank(a), _VEC),
}


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("case", list(ERRORS))
def test_error_matches_torch(case):
    fn, *arrays = ERRORS[case]
    th_args = [torch.from_numpy(a.copy()) for a in arrays]
    fg_args = [fusegrad.from_numpy(a.copy()) for a in arrays]
    with pytest.raises(Exception) as th_err:
        fn(torch, *th_args)
    with pytest.raises(Exception) as fg_err:
        fn(fusegrad, *fg_args)
    assert str(fg_err.value) == str(th_err.value)
    if isinstance(th_err.value, torch.linalg.LinAlgError):
        assert isinstance(fg_err.value, LinAlgError)
    else:
        assert type(fg_err.value).__name__ == type(th_err.value).__name__


def test_info_without_errors():
    a = np.stack([np.eye(3), _SINGULAR])
    check(lambda m, x: m.linalg.inv_ex(x)[1], a, grad=False)
    check(lambda m, x: m.linalg.solve_ex(x, x[:, :, :1])[1], a, grad=False)
    check(lambda m, x: m.linalg.cholesky_ex(x)[1], np.stack([np.eye(2), _NOT_PD]), grad=False)
    check(lambda m, x: m.linalg.lu_factor_ex(x)[2], a, grad=False)


# ---------------------------------------------------------------- the namespace


def test_linalg_is_a_module():
    import importlib

    mod = importlib.import_module("fusegrad.linalg")
    assert fusegrad.linalg is mod
    from fusegrad.linalg import inv, vector_norm

    assert inv is fusegrad.linalg.inv and callable(vector_norm)
    assert issubclass(LinAlgError, RuntimeError)
    missing = [n for n in ("cholesky", "cholesky_ex", "cond", "cross", "det", "diagonal", "eig",
                           "eigh", "eigvals", "eigvalsh", "inv", "inv_ex", "lstsq", "lu",
                           "lu_factor", "lu_solve", "matrix_exp", "matrix_norm",
                           "matrix_power", "matrix_rank", "multi_dot", "norm", "pinv", "qr",
                           "slogdet", "solve", "solve_ex", "solve_triangular", "svd",
                           "svdvals", "tensorinv", "tensorsolve", "vander", "vecdot",
                           "vector_norm", "LinAlgError", "matmul")
               if not hasattr(fusegrad.linalg, n)]
    assert not missing


def test_eig_of_real_is_complex():
    # tests/test_linalg_complex.py compares eig and eigvals with torch.
    assert fusegrad.linalg.eig(fusegrad.eye(3)).eigenvectors.dtype is fusegrad.complex64
    assert fusegrad.linalg.eigvals(fusegrad.eye(3)).dtype is fusegrad.complex64


def test_return_types():
    a = fusegrad.from_numpy(_mat(R, 3, 3))
    assert type(fusegrad.linalg.slogdet(a)).__name__ == "linalg_slogdet"
    assert fusegrad.linalg.svd(a).Vh.shape == (3, 3)
    assert fusegrad.linalg.eigh(a + a.mT).eigenvalues.shape == (3,)
    assert fusegrad.linalg.lu_factor(a).pivots.dtype is fusegrad.int32
    assert fusegrad.svd(a).V.shape == (3, 3)
    assert repr(fusegrad.linalg.qr(a)).startswith("torch.return_types.linalg_qr(")


GRADGRAD = {
    "qr": (lambda a: fusegrad.linalg.qr(a), _rand(R, 4, 3)),
    "qr wide": (lambda a: fusegrad.linalg.qr(a), _rand(R, 2, 4)),
    "svdvals": (lambda a: fusegrad.linalg.svdvals(a), _rand(R, 4, 3)),
    "svd": GRADCHECKS["svd"],
    "eigh": GRADCHECKS["eigh"],
    "pinv": GRADCHECKS["pinv"],
    "lstsq": GRADCHECKS["lstsq"],
    "matrix_exp": (lambda a: fusegrad.linalg.matrix_exp(a), _rand(R, 3, 3)),
    "lu_factor": (lambda a: fusegrad.linalg.lu_factor(a)[0], _mat(R, 3, 3)),
    "lu": (lambda a: fusegrad.linalg.lu(a)[1:], _mat(R, 3, 4)),
    "lu_solve": (lambda a, b: fusegrad.linalg.lu_solve(*fusegrad.linalg.lu_factor(a), b),
                 _mat(R, 3, 3), _rand(R, 3, 2)),
    "solve_triangular": (lambda a, b: fusegrad.linalg.solve_triangular(a, b, upper=False),
                         _mat(R, 3, 3), _rand(R, 3, 2)),
    "triangular_solve": (lambda b, a: fusegrad.triangular_solve(b, a, transpose=True),
                         _rand(R, 3, 2), _mat(R, 3, 3)),
    "cholesky_solve": GRADCHECKS["cholesky_solve"],
    "cholesky_inverse": GRADCHECKS["cholesky_inverse"],
    "cross": (lambda a, b: fusegrad.linalg.cross(a, b), _rand(R, 2, 3), _rand(R, 2, 3)),
    "addr": (lambda s, a, b: fusegrad.addr(s, a, b, alpha=2), _rand(R, 3, 2), _rand(R, 3),
             _rand(R, 2)),
    "addbmm": (lambda s, a, b: fusegrad.addbmm(s, a, b), _rand(R, 3, 2), _rand(R, 2, 3, 4),
               _rand(R, 2, 4, 2)),
    "det singular": (lambda a: fusegrad.linalg.det(a), _SINGULAR),
}


@pytest.mark.parametrize("case", list(GRADGRAD))
def test_gradgradcheck_more(case):
    fn, *arrays = GRADGRAD[case]
    inputs = tuple(fusegrad.from_numpy(a.astype(np.float64)).requires_grad_() for a in arrays)
    assert fusegrad.autograd.gradgradcheck(fn, inputs)


EMPTY = {
    "inv": lambda m, a: m.linalg.inv(a),
    "det": lambda m, a: m.linalg.det(a),
    "slogdet": lambda m, a: m.linalg.slogdet(a),
    "cholesky": lambda m, a: m.linalg.cholesky(a),
    "qr": lambda m, a: m.linalg.qr(a),
    "svdvals": lambda m, a: m.linalg.svdvals(a),
    "eigh": lambda m, a: m.linalg.eigh(a),
    "pinv": lambda m, a: m.linalg.pinv(a),
    "matrix_exp": lambda m, a: m.linalg.matrix_exp(a),
    "lu_factor_ex": lambda m, a: m.linalg.lu_factor_ex(a),
    "lu": lambda m, a: m.linalg.lu(a),
    "solve": lambda m, a: m.linalg.solve(a, a),
}


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), (0, 3, 3)])
@pytest.mark.parametrize("case", list(EMPTY))
def test_empty_inputs(case, shape):
    check(EMPTY[case], np.zeros(shape), grad=False, names=False)


def test_fx_records_linalg_calls():
    from fusegrad.fx import symbolic_trace

    def f(x):
        return fusegrad.linalg.inv(x) * fusegrad.linalg.det(x) + fusegrad.kron(x, x)[:3, :3]

    g = symbolic_trace(f)
    assert "fusegrad.linalg.inv(" in g.code and "fusegrad.linalg.det(" in g.code
    x = fusegrad.from_numpy(_mat(R, 3, 3))
    np.testing.assert_allclose(g(x).numpy(), f(x).numpy())


def test_inplace_addr_addbmm():
    check(lambda m, s, a, b: (s * 1).addr_(a, b, beta=0.5, alpha=2), _rand(R, 3, 2),
          _rand(R, 3), _rand(R, 2))
    check(lambda m, s, a, b: (s * 1).addbmm_(a, b), _rand(R, 3, 4), _rand(R, 2, 3, 5),
          _rand(R, 2, 5, 4))


@pytest.mark.filterwarnings("ignore")
def test_torch_lu_and_unpack():
    check(lambda m, a: m.lu(a), _mat(R, 2, 4, 3))
    check(lambda m, a: a.lu(get_infos=True), _mat(R, 3, 3))
    check(lambda m, a: m.lu_unpack(*m.linalg.lu_factor(a)), _mat(R, 2, 3, 5))
    check(lambda m, a: m.lu_unpack(*m.linalg.lu_factor(a), unpack_pivots=False), _mat(R, 4, 3))
    check(lambda m, b, a: m.lu_solve(b, *m.linalg.lu_factor(a)), _rand(R, 3, 2), _mat(R, 3, 3))
    # Without the data, L and U are empty (PyTorch's backward then fails: values only).
    check(lambda m, a: m.lu_unpack(*m.linalg.lu_factor(a), unpack_data=False), _mat(R, 3, 3),
          grad=False)
