"""`f(..., out=t)` under `fusegrad.compile`: the result computed in the graph and copied into
`t` (one graph, as torch.compile records it), where that is exactly eager's write: `t` has the
result's shape and dtype and nothing records a gradient. A resize, a cast eager refuses, or
inputs requiring grad keep the call a break, run for real. Oracle: eager fusegrad on the same
inputs and states (no torch here: the 3.12/3.13 runs use this file)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fusegrad as fg

BACKENDS = ["eager", "aot_eager", "inductor"]


def _state():
    return {"peak": fg.zeros(3), "rows": fg.zeros(2, 3), "ints": fg.zeros(3, dtype=fg.int64),
            "long": fg.zeros(5)}


def running_peak(s, x):
    fg.maximum(s["peak"], x, out=s["peak"])
    return x + 1


def returned_out(s, x):
    r = fg.add(x, 1, out=s["peak"])
    return r * 2


def positional_out(s, x):
    fg.sin(x, out=s["peak"])
    return s["peak"] + x


def under_no_grad(s, x):
    with fg.no_grad():
        fg.matmul(x[None].expand(2, 3), fg.eye(3), out=s["rows"])
    return s["rows"].sum() + x


def random_fill(s, x):
    fg.randn(3, out=s["peak"])
    return s["peak"] * x


def resized(s, x):
    fg.mul(x, 2, out=s["long"])
    return x + 1


def refused_cast(s, x):
    fg.add(x, 1, out=s["ints"])
    return x


def requires_grad_input(s, x):
    fg.mul(x.requires_grad_(), 2, out=s["peak"])
    return x


def partial_overlap(s, x):
    a = s["peak"] + x
    fg.add(a[:2], 1, out=a[1:])  # eager refuses: out overlaps its input in part
    return a


def cat_into_its_input(s, x):
    a = s["rows"] + x
    fg.cat([a[:1], a[1:]], out=a)  # eager refuses any overlap for cat
    return a


def full_overlap(s, x):
    a = s["peak"] + x
    fg.add(a, 1, out=a)  # the same elements: allowed for a pointwise op
    return a


ONE_GRAPH = [running_peak, returned_out, positional_out, under_no_grad, random_fill,
             full_overlap]
BREAKS = [resized, refused_cast, requires_grad_input, partial_overlap, cat_into_its_input]


def _run(fn, state, x):
    fg.manual_seed(0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (a resize warns)
            return fn(state, x).detach().numpy(), None
    except RuntimeError as e:
        return None, str(e)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", ONE_GRAPH + BREAKS, ids=lambda f: f.__name__)
def test_out_argument_writes_as_eager(fn, backend):
    fg._dynamo.reset()
    compiled = fg.compile(fn, backend=backend)
    eager_state, compiled_state = _state(), _state()
    for step in range(3):
        x = fg.tensor(np.random.default_rng(step).standard_normal(3).astype("float32"))
        expected, eager_error = _run(fn, eager_state, x.clone())
        got, compiled_error = _run(compiled, compiled_state, x.clone())
        assert compiled_error == eager_error
        if expected is not None:
            np.testing.assert_allclose(got, expected, rtol=1e-6)
        for name, t in eager_state.items():
            assert compiled_state[name].shape == t.shape
            np.testing.assert_allclose(compiled_state[name].numpy(), t.numpy(), rtol=1e-6)


@pytest.mark.parametrize("fn", ONE_GRAPH, ids=lambda f: f.__name__)
def test_out_argument_is_recorded(fn):
    fg._dynamo.reset()
    explained = fg._dynamo.explain(fn)(_state(), fg.ones(3))
    assert (explained.graph_count, explained.break_reasons) == (1, [])


@pytest.mark.parametrize("fn", [resized], ids=lambda f: f.__name__)
def test_out_argument_eager_would_resize_is_a_break(fn):
    fg._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        explained = fg._dynamo.explain(fn)(_state(), fg.ones(3))
    assert "out=" in explained.break_reasons[0].reason
