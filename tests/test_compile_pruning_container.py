"""A module pruned twice (its forward pre-hook a `PruningContainer`, which defines `__len__`)
compiles into one graph, as torch's does: the hook object is followed and inlined although
its class decides its truth in Python (its truth would be a break, but the hook is only
called). An object from outside with its own `__len__` read for its truth and length in
compiled code is still answered by the real object, without a break."""

from __future__ import annotations

import importlib

import pytest

import fusegrad


def _pruned(lib):
    prune = importlib.import_module(lib.__name__ + ".nn.utils.prune")
    lib.manual_seed(0)
    m = lib.nn.Linear(6, 4)
    prune.l1_unstructured(m, "weight", amount=0.3)
    prune.l1_unstructured(m, "weight", amount=0.2)
    prune.ln_structured(m, "weight", amount=1, n=2, dim=0)
    return m


def _run(lib, backend="eager"):
    lib._dynamo.reset()
    lib._dynamo.utils.counters.clear()
    m = _pruned(lib)
    lib.manual_seed(1)
    x = lib.randn(3, 6)
    same = bool(lib.equal(lib.compile(m, backend=backend)(x), m(x)))
    found = lib._dynamo.utils.counters
    return same, sum(found["graph_break"].values()), found["stats"]["unique_graphs"]


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_pruned_twice_as_eager_in_one_graph(backend):
    assert _run(fusegrad, backend) == (True, 0, 1)


def test_pruned_twice_as_torch():
    torch = pytest.importorskip("torch")
    assert _run(fusegrad) == _run(torch)


class Bag:
    def __init__(self):
        self.items = []

    def __len__(self):
        return len(self.items)


def test_object_with_len_answered_by_the_real_object():
    bag = Bag()

    def f(x):
        y = x * 2
        if bag:
            y = y + 1
        return y, len(bag)

    fusegrad._dynamo.reset()
    fusegrad._dynamo.utils.counters.clear()
    compiled = fusegrad.compile(f, backend="eager")
    for i in range(3):
        got, want = compiled(fusegrad.ones(2)), f(fusegrad.ones(2))
        assert got[0].tolist() == want[0].tolist() and got[1] == want[1]
        bag.items.append(i)
    assert dict(fusegrad._dynamo.utils.counters["graph_break"]) == {}
