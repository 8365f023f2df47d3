"""Factory results in compiled graphs, against eager execution of the same functions.

AOT tracing keeps a factory's values (`zeros_like`, `ones`, `full_like`) as graph constants.
Returned as they are, every call would hand out one tensor, and a caller's write into it
would change later results; and `*_like` of a transposed input keeps its memory order in
eager mode, so compiled code must too. No torch here: eager is the oracle (3.12/3.13 runs).
"""

from __future__ import annotations

import numpy as np
import pytest
from compile_support import BACKENDS

import fusegrad


def _factories(x):
    return (x * 2, fusegrad.zeros_like(x), fusegrad.ones(4).view(2, 2),
            fusegrad.full_like(x, 3.0), fusegrad.empty_like(x).fill_(1.0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_returned_factory_results_are_new_tensors(backend):
    fusegrad._dynamo.reset()
    compiled = fusegrad.compile(_factories, backend=backend)
    x = fusegrad.ones(3)
    first = compiled(x)
    for t in first:
        t.add_(5)  # the caller owns what it got
    for got, want in zip(compiled(x), _factories(x)):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert all(a is not b for a, b in zip(compiled(x), compiled(x)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_like_factories_keep_the_input_memory_order(backend):
    fusegrad._dynamo.reset()
    x = fusegrad.arange(12.0).reshape(3, 4).t()
    for fn in (_factories, lambda x: fusegrad.zeros_like(x).add_(1),
               lambda x: (x + 1, fusegrad.rand_like(x).mul(0))):
        want = fn(x)
        got = fusegrad.compile(fn, backend=backend)(x)
        want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
        assert [t.stride() for t in got] == [t.stride() for t in want]
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


_VIEWS = {
    "slice": lambda x: (x + 1, fusegrad.ones(4, 4)[1:, ::2]),
    "diagonal": lambda x: (x + 1, fusegrad.ones(3, 3).diagonal()),
    "view": lambda x: (x + 1, fusegrad.ones(4).view(2, 2)),
    "expand": lambda x: (x + 1, fusegrad.zeros(1, 3).expand(4, 3)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(_VIEWS))
def test_views_of_factory_results_keep_eager_strides(backend, name):
    """A view of a factory's result comes back as the same view of a new tensor (eager's
    strides). Inductor computes an expanded output into its own buffer (values only)."""
    fusegrad._dynamo.reset()
    fn = _VIEWS[name]
    x = fusegrad.ones(2)
    want = fn(x)[1]
    got = fusegrad.compile(fn, backend=backend)(x)[1]
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    if not (backend == "inductor" and name == "expand"):
        assert got.stride() == want.stride()
