"""`sorted`/`min`/`max` with a `key=` written in Python in compiled code: the key runs on
every call, once per item in order (its effects happen every time, as in eager; run while
translating they happened once), compared with eager runs on each backend, with the graphs
counted where no break is needed."""

from __future__ import annotations

import pytest

import fusegrad as torch
from fusegrad._dynamo import explain

BACKENDS = ["eager", "aot_eager", "inductor"]
CALLS: list = []


def _key(v):
    CALLS.append(v)
    return -v


def sorted_by_a_key_with_effects(x, vals):
    return x * sorted(vals, key=_key)[0]


def max_by_a_key_with_effects(x, vals):
    return x * max(vals, key=_key)


def min_of_arguments(x, vals):
    return x * min(3, 4, key=_key)


def sorted_items_by_value(x, vals):
    scores = {"a": 2.0, "b": 1.0, "c": 3.0}
    order = sorted(scores.items(), key=lambda kv: kv[1], reverse=True)
    return [x * v for _, v in order]


def argmax_by_index(x, vals):
    best = max(range(len(vals)), key=lambda i: vals[i])
    return x * best


def empty_with_default(x, vals):
    return x * max([], key=_key, default=7)


def tensors_ordered_by_shape(x, vals):
    parts = [x[:2], x, x[:1]]
    return [p.sum() for p in sorted(parts, key=lambda t: t.shape[0])]


PROGRAMS = [sorted_by_a_key_with_effects, max_by_a_key_with_effects, min_of_arguments,
            sorted_items_by_value, argmax_by_index, empty_with_default, tensors_ordered_by_shape]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.__name__)
def test_key_runs_on_every_call(prog, backend):
    x = torch.arange(3.0)
    CALLS.clear()
    want = [prog(x, [1, 3, 2]) for _ in range(3)]
    want_calls = list(CALLS)
    CALLS.clear()
    compiled = torch.compile(prog, backend=backend)
    got = [compiled(x, [1, 3, 2]) for _ in range(3)]
    assert repr(got) == repr(want)
    assert CALLS == want_calls


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.__name__)
def test_key_functions_are_captured(prog):
    out = explain(prog)(torch.arange(3.0), [1, 3, 2])
    assert out.graph_count == 1 and out.graph_break_count == 0, out.break_reasons


@pytest.mark.parametrize("backend", BACKENDS)
def test_key_of_tensor_values_is_a_break_with_eager_values(backend):
    def prog(xs):
        return sorted(xs, key=lambda t: float(t.sum()))

    xs = [torch.tensor([3.0]), torch.tensor([1.0]), torch.tensor([2.0])]
    assert repr(torch.compile(prog, backend=backend)(xs)) == repr(prog(xs))
