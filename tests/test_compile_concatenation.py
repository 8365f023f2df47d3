"""`+` and `+=` of tuples and lists holding tensors in compiled code, where one side is a
constant (`()`, `(1, 2)`) or a list from outside the graph: compared with eager runs on each
backend (results, the caller's lists afterwards), with the graphs counted (an `all_hidden =
all_hidden + (h,)` loop as in transformer models is one graph)."""

from __future__ import annotations

import pytest

import fusegrad as torch
from fusegrad._dynamo import explain

BACKENDS = ["eager", "aot_eager", "inductor"]


def collect_hidden_states(h, flag):
    all_hidden = () if flag else None
    for _ in range(3):
        if flag:
            all_hidden = all_hidden + (h,)
        h = h * 2
    return h, all_hidden


def mixed(h, acc, lst):
    t = () + (h,)
    t = t + (h * 2,)
    t2 = (h,) + (1, 2)
    l2 = lst + [h]
    l3 = [h] + lst
    acc += [h * 3]
    acc += (h * 4,)
    return t, t2, l2, l3


def _text(v) -> str:
    return repr(v)


@pytest.mark.parametrize("backend", BACKENDS)
def test_hidden_states_tuple(backend):
    h = torch.arange(3.0)
    want = collect_hidden_states(h, True)
    got = torch.compile(collect_hidden_states, backend=backend)(h, True)
    assert _text(got) == _text(want)
    out = explain(collect_hidden_states)(h, True)
    assert out.graph_count == 1 and out.graph_break_count == 0, out.break_reasons


@pytest.mark.parametrize("backend", BACKENDS)
def test_constant_and_outside_sequences(backend):
    h = torch.arange(3.0)
    acc1, acc2 = [1], [1]
    want = mixed(h, acc1, [5, 6])
    compiled = torch.compile(mixed, backend=backend)
    got = compiled(h, acc2, [5, 6])
    assert _text(got) == _text(want) and _text(acc2) == _text(acc1)
    acc3 = [1, 2]  # another length: the outside list's length was guarded where read
    assert _text(compiled(h, acc3, [7])) == _text(mixed(h, [1, 2], [7]))
    assert len(acc3) == 4
    out = explain(mixed)(h, [1], [5, 6])
    assert out.graph_count == 1 and out.graph_break_count == 0, out.break_reasons
