"""Python constructs real models use, one per program (compile_constructs.py): `assert`
(true, false, on tensors), `raise` (taken, not taken, caught), try/except/finally, `with`,
closures writing cells, generator expressions, `super()`, imports, star-unpacking, set
literals and iteration over modules. Each program runs eagerly and compiled: results,
gradients, raised exceptions (type, message, cause) and side effects must agree, and capture
must make no more graphs and capture no fewer ops than torch.compile, whose counts were
recorded on CPython 3.11 (compile_constructs_torch.json). No torch is imported, so .ci/run
runs this file on 3.12 and 3.13 too."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
from compile_constructs import PROGRAMS, run, same, torch_counts  # noqa: E402
from compile_support import CAPTURES, Counter  # noqa: E402

import fusegrad  # noqa: E402


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_construct_compiled_equals_eager(name):
    prog = PROGRAMS[name]
    # Every program runs through one lambda's code object, whose recompile limit all its
    # compiled wrappers share (as torch.compile's): each test starts from a reset.
    fusegrad._dynamo.reset()
    eager = run(fusegrad, lambda x, y: prog(fusegrad, x, y))
    counter = Counter()
    compiled = fusegrad.compile(lambda x, y: prog(fusegrad, x, y), backend=counter)
    same(run(fusegrad, compiled), eager)
    graphs, ops = counter.graphs, counter.ops
    same(run(fusegrad, compiled), eager)  # new tensors of the same kind: cached graphs
    assert counter.graphs == graphs, "the second call recompiled"
    if not CAPTURES:
        assert graphs == 0
        return
    want = torch_counts()[name]
    # Where torch.compile captured nothing (it gave the frame up), one graph is still fewer
    # breaks than it had; otherwise no more graphs than it made.
    assert graphs <= max(want["graphs"], 1), (graphs, ops, want)
    assert ops >= want["ops"], (graphs, ops, want)


def test_table_lists_every_program():
    assert sorted(torch_counts()) == sorted(PROGRAMS)
