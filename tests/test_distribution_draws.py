"""Seeded draws of the Gamma family (Gamma, Chi2, StudentT, Beta, Dirichlet) and of Poisson
against PyTorch's: the same numbers after the same seed, and the generator left where
PyTorch's is (the next draws agree too)."""

from __future__ import annotations

import pytest

import fusegrad

torch = pytest.importorskip("torch")


def _gamma(m):
    D = m.distributions
    return [D.Gamma(m.full((6,), 2.0), 1.0).sample(),
            D.Gamma(m.tensor([0.3, 0.7, 5.0, 1.0]), m.tensor(2.0)).sample((3,)),
            D.Gamma(m.tensor([0.3, 0.7, 5.0], dtype=m.float64), 1.0).rsample((2,)),
            D.Gamma(m.tensor(0.05), m.tensor(1.0)).sample((5,))]


def _beta_dirichlet(m):
    D = m.distributions
    return [D.Beta(m.tensor([0.5, 2.0]), m.tensor([3.0, 0.4])).sample((2,)),
            D.Dirichlet(m.tensor([0.5, 2.0, 1.0, 4.0])).sample((3,)),
            D.Dirichlet(m.tensor([[0.1, 0.2], [3.0, 7.0]], dtype=m.float64)).rsample()]


def _students(m):
    D = m.distributions
    return [D.Chi2(m.tensor([3.0, 0.5])).sample((2,)), D.StudentT(m.tensor([3.0])).sample()]


def _normal_spare_kept(m):
    """A draw that leaves a Box-Muller spare, then the gamma draws use it, as PyTorch's."""
    first = m.normal(m.tensor(0.0, dtype=m.float64), 1.0)
    return [first, m.distributions.Gamma(m.tensor([2.0, 3.0]), 1.0).sample()]


def _poisson(m):
    g = m.Generator().manual_seed(5)
    return [m.poisson(m.tensor([1.0, 5.0, 10.0, 0.0, 37.5, 0.2, 250.0])),
            m.distributions.Poisson(m.tensor([3.0, 12.0])).sample((4,)),
            m.poisson(m.full((300,), 14.0)),
            m.poisson(m.tensor([2.0, 20.0], dtype=m.float64), generator=g)]


@pytest.mark.parametrize("draw", [_gamma, _beta_dirichlet, _students, _normal_spare_kept,
                                  _poisson])
@pytest.mark.parametrize("seed", [0, 7])
def test_same_draws_as_pytorch(draw, seed):
    def run(m):
        m.manual_seed(seed)
        values = [t.tolist() for t in draw(m)]
        return values, m.rand(3).tolist(), m.randn(2, dtype=m.float64).tolist()

    assert run(fusegrad) == run(torch)


def test_half_alpha_refused_as_pytorch():
    for m in (fusegrad, torch):
        with pytest.raises(NotImplementedError, match="not implemented for 'Half'"):
            m.distributions.Gamma(m.tensor([2.0], dtype=m.float16),
                                  m.tensor([1.0], dtype=m.float16)).sample()
