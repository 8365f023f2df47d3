"""The capture corpus through `backend="aot_eager"`: the Python constructs
(compile_constructs.py), the corpus of ordinary programs (test_compile_corpus.py) and the 200
random programs (test_compile_random.py), each compiled with AOT autograd on every captured
graph and compared with eager execution (outputs, gradients, errors, side effects).

The backend below counts the graphs it is given and keeps each AOT runner, so a test also
sees that AOT compiled the graphs itself rather than falling back to running them eagerly.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from compile_constructs import PROGRAMS, run, same  # noqa: E402
from test_compile_corpus import CORPUS  # noqa: E402
from test_compile_corpus import _run as corpus_run  # noqa: E402
from test_compile_random import CAPTURES, check_chunk  # noqa: E402

import fusegrad  # noqa: E402
from fusegrad.compiler.aot.api import aot_eager  # noqa: E402


class AOTCounter:
    """The `aot_eager` backend, counting its graphs and keeping why any of them runs
    eagerly (a graph AOT could not trace)."""

    def __init__(self):
        self.graphs = 0
        self.runners = []

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        runner = aot_eager(gm, example_inputs)
        self.runners.append(runner)
        return runner

    def fallbacks(self) -> list:
        """The reasons of the graphs AOT left to eager execution."""
        return [r.fallback_reason for r in self.runners if r.fallback_reason is not None]


def _compiled(prog, backend):
    return fusegrad.compile(lambda x, y: prog(fusegrad, x, y), backend=backend)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_construct_aot_eager_equals_eager(name):
    prog = PROGRAMS[name]
    eager = run(fusegrad, lambda x, y: prog(fusegrad, x, y))
    backend = AOTCounter()
    compiled = _compiled(prog, backend)
    same(run(fusegrad, compiled), eager)
    same(run(fusegrad, compiled), eager)  # cached graphs and cached AOT entries
    assert backend.fallbacks() == []


@pytest.mark.parametrize("prog", CORPUS, ids=lambda p: p.__name__[2:])
def test_corpus_aot_eager_equals_eager(prog):
    eager = corpus_run(fusegrad, prog, False)
    backend = AOTCounter()
    compiled = corpus_run(fusegrad, prog, True, backend)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-6, atol=1e-6)
    for g1, g2 in zip(compiled[1], eager[1]):
        assert (g1 is None) == (g2 is None)
        if g1 is not None:
            np.testing.assert_allclose(g1, g2, rtol=1e-6, atol=1e-6)
    assert backend.fallbacks() == []


def _exactly_as_eager(compiled, eager) -> None:
    """A gradient where eager has one (None where it has none), equal within 1e-12."""
    assert (compiled is None) == (eager is None)
    if compiled is not None:
        np.testing.assert_allclose(compiled, eager, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("chunk", range(4))
def test_random_programs_aot_eager_equal_eager(chunk):
    backend = AOTCounter()
    check_chunk(chunk, backend, _exactly_as_eager, tol=1e-12, label="under aot_eager")
    assert backend.fallbacks() == []
    assert (backend.graphs > 0) == CAPTURES
