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


# ---------------------------------------------------------------- erf, erfc, gammaln

_TINY = np.finfo(np.float64).tiny
_SUBNORMAL = np.nextafter(0.0, 1.0)
EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 0.5, -0.5, 1.0, 1.5, 2.0, 3.0, 4.0,
                  -4.0, 1e-300, -1e-300, _SUBNORMAL, -_SUBNORMAL, 6.0, 26.0, 26.5, 26.6,
                  27.0, 27.2, 27.3, 28.0, 1e10, -1e300])


def _ulp_close(ours, theirs, rel):
    """Same nan positions and signs; relative error below `rel` where the reference is a
    normal number and within four subnormal steps where it is smaller."""
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    keep = ~np.isnan(theirs)
    ours, theirs = ours[keep], theirs[keep]
    np.testing.assert_array_equal(np.signbit(ours), np.signbit(theirs))
    normal = np.abs(theirs) >= _TINY
    with np.errstate(invalid="ignore"):
        err = np.where(ours == theirs, 0.0, np.abs(ours - theirs) / np.abs(theirs))
    assert err[normal].max() < rel, (err[normal].max(), theirs[normal][err[normal].argmax()])
    assert (np.abs(ours - theirs)[~normal] <= 4 * _SUBNORMAL).all()


@pytest.mark.parametrize("name", ["erf", "erfc"])
def test_erf_erfc_float64_dense_grid(name):
    # 400,001 points over [-30, 30] (erfc reaches the subnormals at 26.6 and 0 at 27.3), a
    # fine grid over the pieces' joins near 0, and the edge values.
    x = np.concatenate([np.linspace(-30, 30, 400_001), np.linspace(-4.5, 4.5, 90_001),
                        EDGES])
    ours = getattr(S, name)(x)
    assert ours.dtype == np.float64 and ours.shape == x.shape
    _ulp_close(ours, getattr(torch, name)(torch.from_numpy(x)).numpy(), 1e-15)


@pytest.mark.parametrize("name", ["erf", "erfc"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_erf_erfc_0d_empty_and_dtype(name, dtype):
    fn = getattr(S, name)
    for value in (0.3, -2.5, 0.0):
        out = fn(np.array(value, dtype))
        assert out.shape == () and out.dtype == dtype
        theirs = getattr(torch, name)(torch.tensor(value, dtype=getattr(torch, dtype.__name__)))
        assert out == theirs.item()
    empty = fn(np.zeros((0, 3), dtype))
    assert empty.shape == (0, 3) and empty.dtype == dtype
    assert fn(np.arange(3)).dtype == np.float64  # integers compute in float64, as SciPy


def test_gammaln_edges_and_zeros():
    x = np.concatenate([EDGES, [-1.0, -2.0, -1e10 - 0.5, 9.999999, 10.0, 2.6e305]])
    _ulp_close(S.gammaln(x), torch.lgamma(torch.from_numpy(x)).numpy(), 1e-13)
    # Relative accuracy right next to the zeros at 1 and 2.
    near = np.array([1 - 1e-9, 1 + 1e-9, 2 - 1e-9, 2 + 1e-9, 1 - 1e-3, 2 + 1e-3, 0.999999999999])
    _ulp_close(S.gammaln(near), torch.lgamma(torch.from_numpy(near)).numpy(), 1e-14)
    assert S.gammaln(np.array(3.0)).shape == ()
    assert S.gammaln(np.zeros(0, np.float32)).dtype == np.float32


def test_erfinv_float64_to_the_tail():
    # Uniform in (-1, 1), 1 - |y| down to the last float below 1, and tiny |y|.
    near_one = 1 - 10 ** RNG.uniform(-16, -1, 5_000)
    y = np.concatenate([RNG.uniform(-1, 1, 20_000), near_one, -near_one,
                        10 ** RNG.uniform(-300, -1, 2_000),
                        [np.nextafter(1.0, 0.0), -np.nextafter(1.0, 0.0), 0.5, -0.5, 1e-8, 0.0,
                         -0.0, 1.0, -1.0, 1.5, np.nan]])
    _ulp_close(S.erfinv(y), torch.erfinv(torch.from_numpy(y)).numpy(), 1e-15)


def test_i1_float64_grid_and_edges():
    # PyTorch's own i1 is good to about 1.2e-15 below 8 (ours to 5e-16 against mpmath).
    x = np.concatenate([np.linspace(-720, 720, 200_001), np.linspace(-9, 9, 20_001),
                        10 ** RNG.uniform(-300, 0, 2_000),
                        [0.0, -0.0, 8.0, -8.0, 709.7, 709.8, 714.0, np.inf, -np.inf, np.nan]])
    _ulp_close(S.i1(x), torch.special.i1(torch.from_numpy(x)).numpy(), 3e-15)
    assert S.i1(np.array(2.0, np.float32)).shape == ()
    assert S.i1(np.array(2.0, np.float32)).dtype == np.float32
    assert S.i1(np.zeros((2, 0))).shape == (2, 0)


def test_erfinv_0d_and_empty():
    assert S.erfinv(np.array(0.5)) == pytest.approx(torch.erfinv(torch.tensor(0.5,
                                                                  dtype=torch.float64)).item())
    assert S.erfinv(np.array(0.5)).shape == ()
    assert S.erfinv(np.zeros((2, 0))).shape == (2, 0)


def test_no_per_element_python():
    """The NumPy fallbacks are array code: none keeps a NumPy object-dtype ufunc (frompyfunc
    or vectorize), which would run one Python call per element."""
    for name in S.__all__:
        assert getattr(S, name).__module__ == S.__name__
    assert not [v for v in vars(S).values() if isinstance(v, np.ufunc) and v.types == ["O->O"]]


def test_tables_are_the_generator_output():
    """The polynomial tables are exactly what tools/gen_special_coefficients.py prints."""
    pytest.importorskip("mpmath")
    import subprocess
    import sys
    from pathlib import Path

    tool = Path(__file__).resolve().parents[1] / "tools" / "gen_special_coefficients.py"
    printed = subprocess.run([sys.executable, str(tool)], capture_output=True, text=True,
                             check=True).stdout
    tables: dict = {}
    exec(printed, tables)  # noqa: S102 - the repository's own generator output
    for name in ("_ERF_SMALL", "_ERFCX_PIECES", "_LGAMMA_PIECES", "_I1_LARGE"):
        assert tables[name] == getattr(S, name), name
