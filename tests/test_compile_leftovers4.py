"""Capture leftovers found by real programs, compiled against eager on every backend (no
torch needed): `.real`/`.imag` of graph tensors (reads and writes through them), and the
`math` functions of numbers (`isqrt`, `gcd`, `log2`, ...) evaluated while capturing, each in
one graph without a break."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fusegrad as fg

BACKENDS = ["eager", "aot_eager", "inductor"]


def _real_imag(c):
    y = c * 2
    y.real.add_(1)  # a write through the view
    return (y * 1).real + 1, y.imag * 2, c.real.sum()


def _math_numbers(x):
    n, m = x.shape
    return x * math.isqrt(n) + math.gcd(n, 6) + math.log2(m) + math.hypot(n, m) + \
        math.copysign(1.0, -m) + math.factorial(3)


CASES = [(_real_imag, lambda: fg.randn(3, dtype=fg.cfloat)),
         (_math_numbers, lambda: fg.randn(4, 2))]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, make", CASES, ids=[c[0].__name__ for c in CASES])
def test_compiled_equals_eager_in_one_graph(fn, make, backend):
    fg.manual_seed(0)
    x = make()
    want = fn(x.clone())
    fg._dynamo.reset()
    got = fg.compile(fn, backend=backend)(x.clone())
    want, got = (want if isinstance(want, tuple) else (want,)), \
        (got if isinstance(got, tuple) else (got,))
    for w, g in zip(want, got, strict=True):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, atol=1e-6)
    explained = fg._dynamo.explain(fn)(make())
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), \
        explained.break_reasons


def test_imag_of_a_real_tensor_raises_as_eager():
    for backend in ("eager", "aot_eager"):
        fg._dynamo.reset()
        with pytest.raises(RuntimeError, match="imag is not implemented"):
            fg.compile(lambda t: t.imag + 1, backend=backend)(fg.randn(3))
