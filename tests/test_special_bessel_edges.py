"""torch.special's modified Bessel functions far out on the real line, against torch 2.13
(float64): I0 and I1 of |x| beyond 750 overflow every float type (their quadrature's node
count grew with sqrt(|x|): 1e30 asked for 1.2e16 nodes, a MemoryError), and exp(x) K0, exp(x)
K1 of large x come from their asymptotic expansion (the quadrature's cut lost 8e-8 relative
at 1e10 and every digit at 1e30, giving 0)."""

import numpy as np
import pytest

import fusegrad as fg

torch = pytest.importorskip("torch")

VALUES = [1e300, 1e30, -1e30, 1e10, 1e5, 751.0, -751.0, 749.0, 720.0, 700.0, 90.0, 51.0,
          50.0, 49.9, 30.0, 15.5, 15.0, 2.5, 1.0, 0.5, 1e-3, 0.0, -0.5, -2.5, -30.0,
          float("inf"), float("-inf"), float("nan")]
FUNCTIONS = ["modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0",
             "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1"]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_far_values_match_torch(name):
    got = getattr(fg.special, name)(fg.tensor(VALUES, dtype=fg.float64)).numpy()
    want = getattr(torch.special, name)(torch.tensor(VALUES, dtype=torch.float64)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
