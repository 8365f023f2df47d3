"""A generator passed into a compiled function (`ema.step(model.parameters())`, a new one on
every call) is guarded by its type, not its identity: nothing reads it while translating
(iterating it would use it up), any use of it is a graph break, and the break reads it
again from the frame. A call with a fresh generator no longer recompiles. Values as eager;
breaks and graphs as torch counts them."""

from __future__ import annotations

import types

import pytest

import fusegrad


def _listed(lib):
    def f(x, gen):
        ps = list(gen)
        return x * len(ps)
    return f


def _looped(lib):
    def f(x, gen):
        if gen is None:
            return x
        total = x
        for p in gen:
            total = total + p.sum()
        return total
    return f


def _stepped(lib):
    def f(x, gen):
        first = next(gen)
        return x + first.sum(), isinstance(gen, types.GeneratorType), type(gen).__name__
    return f


def _passed_along(lib):
    def f(x, gen=None):
        y = x * 2
        extra = gen
        return y + 1, extra is gen
    return f


PROGRAMS = [_listed, _looped, _stepped, _passed_along]


def _same(a, b) -> bool:
    a = a if isinstance(a, tuple) else (a,)
    b = b if isinstance(b, tuple) else (b,)
    return all((u.tolist() == v.tolist()) if hasattr(u, "tolist") else u == v
               for u, v in zip(a, b))


def _run(lib, make, backend="eager"):
    lib._dynamo.reset()
    lib._dynamo.utils.counters.clear()
    lib.manual_seed(0)
    m = lib.nn.Linear(3, 2)
    f = make(lib)
    compiled = lib.compile(f, backend=backend)
    same = all(_same(compiled(lib.ones(2) * i, m.parameters()), f(lib.ones(2) * i,
                                                                   m.parameters()))
               for i in range(4))
    found = lib._dynamo.utils.counters
    return same, sum(found["graph_break"].values()), found["stats"]["unique_graphs"]


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("make", PROGRAMS, ids=[p.__name__ for p in PROGRAMS])
def test_values_as_eager(make, backend):
    assert _run(fusegrad, make, backend)[0]


@pytest.mark.parametrize("make", [_listed, _stepped, _passed_along],
                         ids=["listed", "stepped", "passed_along"])
def test_breaks_and_graphs_as_torch(make):
    """Four calls, each with a new generator: one capture (an identity guard recompiled
    every call: four breaks and four graphs)."""
    torch = pytest.importorskip("torch")
    want = _run(torch, make)
    got = _run(fusegrad, make)
    assert got == want
