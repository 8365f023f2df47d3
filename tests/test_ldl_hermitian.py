"""`linalg.ldl_factor(_ex)` and `linalg.ldl_solve` with `hermitian=True` on complex
matrices (LAPACK's hetrf/hetrs layout) against PyTorch: pivots, factors, info, solutions."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad as fg  # noqa: E402


def _hermitian(rng, shape, sparse=False, dtype=np.complex128):
    a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    if sparse:  # zeros force 2x2 pivots and swaps
        a = a * (rng.random(shape) < 0.5)
    return (a + np.swapaxes(a, -1, -2).conj()).astype(dtype)


def _factor_both(a, **kw):
    t = torch.linalg.ldl_factor_ex(torch.from_numpy(a.copy()), hermitian=True, **kw)
    f = fg.linalg.ldl_factor_ex(fg.from_numpy(a.copy()), hermitian=True, **kw)
    return t, f


def _same_factors(t, f, tol):
    (tld, tp, ti), (fld, fp, fi) = t, f
    assert fld.dtype == getattr(fg, str(tld.dtype).split(".")[1])
    assert np.array_equal(fp.numpy(), tp.numpy())
    assert fp.dtype == fg.int32 and fi.dtype == fg.int32
    assert np.array_equal(fi.numpy(), ti.numpy())
    np.testing.assert_allclose(fld.numpy(), tld.numpy(), rtol=tol, atol=tol)


def test_many_small_matrices_match_lapack():
    rng = np.random.default_rng(0)
    for trial in range(120):
        n = int(rng.integers(1, 8))
        a = _hermitian(rng, (n, n), sparse=trial % 3 == 0)
        t, f = _factor_both(a)
        _same_factors(t, f, 1e-10)
        if t[2].item() == 0:
            b = rng.standard_normal((n, 2)) + 1j * rng.standard_normal((n, 2))
            tx = torch.linalg.ldl_solve(t[0], t[1], torch.from_numpy(b), hermitian=True)
            fx = fg.linalg.ldl_solve(f[0], f[1], fg.from_numpy(b), hermitian=True)
            np.testing.assert_allclose(fx.numpy(), tx.numpy(), rtol=1e-8, atol=1e-8)
            np.testing.assert_allclose(a @ fx.numpy(), b, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("dtype, tol", [(np.complex64, 2e-4), (np.complex128, 1e-10)])
def test_batched_and_large(dtype, tol):
    rng = np.random.default_rng(1)
    a = _hermitian(rng, (3, 40, 40), dtype=dtype)
    t, f = _factor_both(a)
    _same_factors(t, f, tol)
    tld, tp = torch.linalg.ldl_factor(torch.from_numpy(a), hermitian=True)
    fld, fp = fg.linalg.ldl_factor(fg.from_numpy(a), hermitian=True)
    assert np.array_equal(fp.numpy(), tp.numpy())
    b = (rng.standard_normal((3, 40, 2)) + 1j * rng.standard_normal((3, 40, 2))).astype(dtype)
    tx = torch.linalg.ldl_solve(tld, tp, torch.from_numpy(b), hermitian=True)
    fx = fg.linalg.ldl_solve(fld, fp, fg.from_numpy(b), hermitian=True)
    assert fx.dtype == getattr(fg, str(tx.dtype).split(".")[1])
    np.testing.assert_allclose(fx.numpy(), tx.numpy(), rtol=tol * 10, atol=tol * 10)


def test_only_the_lower_triangle_and_real_diagonal_are_read():
    rng = np.random.default_rng(2)
    a = _hermitian(rng, (5, 5))
    a[np.triu_indices(5, 1)] = 7 + 3j  # not the lower triangle's conjugate
    np.fill_diagonal(a, a.diagonal() + 0.5j)
    t, f = _factor_both(a)
    _same_factors(t, f, 1e-10)
    assert np.all(np.diagonal(f[0].numpy()).imag == 0)
    assert np.all(np.triu(f[0].numpy(), 1) == 0)


def test_singular_info_and_check_errors():
    a = np.zeros((2, 3, 3), np.complex128)
    a[0] = np.eye(3)
    a[1, 2, 2] = 1.0  # zero leading columns: D singular
    t, f = _factor_both(a)
    _same_factors(t, f, 0)
    with pytest.raises(RuntimeError) as te:
        torch.linalg.ldl_factor_ex(torch.from_numpy(a), hermitian=True, check_errors=True)
    with pytest.raises(RuntimeError) as fe:
        fg.linalg.ldl_factor_ex(fg.from_numpy(a), hermitian=True, check_errors=True)
    assert str(fe.value).split("please report")[1] == str(te.value).split("please report")[1]


def test_real_matrices_with_hermitian_flag_are_symmetric():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((6, 6))
    a = a + a.T
    t, f = _factor_both(a)
    _same_factors(t, f, 1e-12)
    # and the complex symmetric (non-Hermitian) path is unchanged
    c = _hermitian(rng, (6, 6))
    c = c + c.T
    tl, tp, _ = torch.linalg.ldl_factor_ex(torch.from_numpy(c))
    fl, fp, _ = fg.linalg.ldl_factor_ex(fg.from_numpy(c))
    assert np.array_equal(fp.numpy(), tp.numpy())
    np.testing.assert_allclose(fl.numpy(), tl.numpy(), rtol=1e-10, atol=1e-10)
