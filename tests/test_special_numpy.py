"""The NumPy special functions used when SciPy is absent, against PyTorch's (torch.special)."""

import numpy as np
import pytest
import torch

from fusegrad.ops import _special_numpy as S

RNG = np.random.default_rng(0)
X = np.concatenate([RNG.uniform(-10, 10, 2000), RNG.uniform(0.01, 60, 2000),
                    [0.5, 1.0, 2.0, 3.0, -0.5, -1.5, 29.9, 30.1, 45.0]])


def _close(ours, theirs, tol):
    theirs = theirs.numpy()
    finite = np.isfinite(theirs)
    np.testing.assert_array_equal(np.isfinite(ours), finite)
    rel = np.abs(ours[finite] - theirs[finite]) / np.maximum(1.0, np.abs(theirs[finite]))
    assert rel.max() < tol, rel.max()


def test_gammaln_and_digamma():
    t = torch.from_numpy(X)
    _close(S.gammaln(X), torch.lgamma(t), 1e-12)
    away = X[np.abs(X - np.round(X)) > 1e-3]  # digamma is steep next to its poles
    _close(S.psi(away), torch.digamma(torch.from_numpy(away)), 1e-10)


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_polygamma(n):
    pos = X[X > 0]
    # torch's own polygamma is good to about 1e-9 relative near 0 (SciPy agrees with ours).
    _close(S.polygamma(n, pos), torch.polygamma(n, torch.from_numpy(pos)), 1e-8)


def test_erfinv_and_bessel():
    y = np.concatenate([RNG.uniform(-1, 1, 4000), [0.999999, -0.9999999, 0.0, 1.0, -1.0]])
    _close(S.erfinv(y), torch.erfinv(torch.from_numpy(y)), 1e-10)
    assert np.isnan(S.erfinv(np.array([1.5]))).all()
    x = np.concatenate([RNG.uniform(-50, 50, 4000), [0.0, 30.0, -30.0]])
    _close(S.i0(x), torch.i0(torch.from_numpy(x)), 1e-12)
    _close(S.i1(x), torch.special.i1(torch.from_numpy(x)), 1e-10)


def test_dtype_kept():
    assert S.psi(np.ones(3, np.float32)).dtype == np.float32
    assert S.gammaln(np.arange(3)).dtype == np.float64
