"""A `PackedSequence` made in compiled code (a named tuple subclass whose own `__new__`
checks its arguments, then calls the generated one) is inlined into the graph as the named
tuple it makes, and `type()` of a named tuple variable is its class: compiled against eager
on each backend, breaks and graphs as torch counts them."""

from __future__ import annotations

import importlib

import pytest

import fusegrad


def _rnn(lib):
    return importlib.import_module(lib.__name__ + ".nn.utils.rnn")


def _remade(lib):
    R = _rnn(lib)

    def f(p):
        q = R.PackedSequence(p.data * 2, p.batch_sizes, p.sorted_indices, p.unsorted_indices)
        return q.data + 1, type(q).__name__, q.sorted_indices
    return f


def _type_test(lib):
    R = _rnn(lib)

    def f(p):
        return type(p) is R.PackedSequence, p.data * 3
    return f


def _two_fields(lib):
    R = _rnn(lib)

    def f(p):
        q = R.PackedSequence(p.data * 2, p.batch_sizes)
        return q.data + 1, q.unsorted_indices, isinstance(q, R.PackedSequence)
    return f


PROGRAMS = [_remade, _type_test, _two_fields]


def _same(a, b) -> bool:
    return all((u is None and v is None) or
               (u.tolist() == v.tolist() if hasattr(u, "tolist") else u == v)
               for u, v in zip(a, b))


def _run(lib, make, backend="eager"):
    R = _rnn(lib)
    lib._dynamo.reset()
    lib._dynamo.utils.counters.clear()
    packed = R.pack_padded_sequence(lib.arange(6.0).reshape(2, 3, 1), lib.tensor([3, 2]),
                                    batch_first=True, enforce_sorted=False)
    f = make(lib)
    same = _same(lib.compile(f, backend=backend)(packed), f(packed))
    found = lib._dynamo.utils.counters
    return same, sum(found["graph_break"].values()), found["stats"]["unique_graphs"]


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("make", PROGRAMS, ids=[p.__name__ for p in PROGRAMS])
def test_values_as_eager(make, backend):
    assert _run(fusegrad, make, backend)[0]


@pytest.mark.parametrize("make", PROGRAMS, ids=[p.__name__ for p in PROGRAMS])
def test_breaks_and_graphs_as_torch(make):
    torch = pytest.importorskip("torch")
    assert _run(fusegrad, make) == _run(torch, make)
