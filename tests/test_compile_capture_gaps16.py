"""Capture counted as torch.compile (2.13, backend="eager") counts, where fusegrad differed:

- the recompile limit (`config.recompile_limit`) counts the graphs of a code object under
  every `compile()` of it, whatever its backend: a function compiled anew on each call, with
  a new backend object each time, still stops at the limit;
- a frame past the limit runs eagerly counting no graph break;
- `nonzero` without fullgraph is one graph break (its output shape depends on the values),
  and it and the other ops whose output shape depends on the values break worded as Dynamo's
  ("Dynamic shape operator").

Programs and tables as `capture_support` describes."""

import pytest
from capture_support import counts_test, fg, torch

# (unique graphs, graph breaks) torch.compile(backend="eager") gives each program (3.11).
_TORCH_COUNTS = {
    "compiled_anew_each_call": (3, 0), "alternating_backends": (3, 0),
    "limit_hit_after_a_break": (6, 3), "limit_then_a_cached_size": (3, 0),
    "nonzero_then_arithmetic": (2, 2), "nonzero_method_indexed": (2, 2),
}


def _scale(x):
    return x * 2 + 1


def _broken(x):
    y = x * 2
    print("mid", y.shape[0])
    return y + 1


# ---------------------------------------------------------------- one limit per code object


def compiled_anew_each_call(T, compiled):
    run = (lambda f: T.compile(f, backend=compiled, dynamic=False)) if compiled else \
        (lambda f: f)
    with T._dynamo.config.patch(recompile_limit=3):
        return [run(_scale)(T.ones(i + 1)) for i in range(5)]


def alternating_backends(T, compiled):
    backends = [compiled, "aot_eager"] if compiled else [None]
    out = []
    with T._dynamo.config.patch(recompile_limit=3):
        for i in range(5):
            backend = backends[i % len(backends)]
            f = T.compile(_scale, backend=backend, dynamic=False) if backend else _scale
            out.append(f(T.ones(i + 1)))
    return out


def limit_hit_after_a_break(T, compiled):
    run = T.compile(_broken, backend=compiled, dynamic=False) if compiled else _broken
    with T._dynamo.config.patch(recompile_limit=3):
        return [run(T.ones(i + 1)) for i in range(5)]


def limit_then_a_cached_size(T, compiled):
    run = (lambda: T.compile(_scale, backend=compiled, dynamic=False)) if compiled else \
        (lambda: _scale)
    with T._dynamo.config.patch(recompile_limit=3):
        out = [run()(T.ones(i + 1)) for i in range(5)]
        # (a size captured before the limit still runs its graph, whichever wrapper calls)
        return out + [run()(T.ones(2)), run()(T.ones(12))]


# ---------------------------------------------------------------- data-dependent shapes


def nonzero_then_arithmetic(T, compiled):
    f = T.compile(lambda x: T.nonzero(x) + 1, backend=compiled) if compiled else \
        (lambda x: T.nonzero(x) + 1)
    return [f(T.tensor([0, 1, 1])), f(T.tensor([1, 1, 1, 0, 1]))]


def nonzero_method_indexed(T, compiled):
    def g(x):
        return x.nonzero()[:, 0] * 2

    f = T.compile(g, backend=compiled) if compiled else g
    return [f(T.tensor([0, 1, 1])), f(T.tensor([1, 1, 1, 0, 1]))]


_PROGRAMS = [compiled_anew_each_call, alternating_backends, limit_hit_after_a_break,
             limit_then_a_cached_size, nonzero_then_arithmetic, nonzero_method_indexed]

test_counts_as_torch = counts_test(_PROGRAMS, _TORCH_COUNTS)


# ---------------------------------------------------------------- counted by backends


def _frames_per_counter(T) -> list:
    """The frames each of 12 `compile()`s of one function, each with a new CompileCounter,
    captured (one new size per call), under the default limit of 8."""
    T._dynamo.reset()
    assert T._dynamo.config.recompile_limit == 8
    counts = []
    for i in range(12):
        counter = T._dynamo.testing.CompileCounter()
        T.compile(_scale, backend=counter, dynamic=False)(T.ones(i + 1))
        counts.append(counter.frame_count)
    return counts


@pytest.mark.filterwarnings("ignore:fusegrad.compile.*recompile_limit")
def test_new_counter_per_compile_shares_the_limit():
    want = [1] * 8 + [0] * 4
    assert _frames_per_counter(fg) == want
    if torch is not None:
        assert _frames_per_counter(torch) == want


def _fullgraph_past_a_shared_limit(T):
    """A fullgraph `compile()` of a function whose other wrappers used up its limit."""
    T._dynamo.reset()
    with T._dynamo.config.patch(recompile_limit=2):
        for i in range(2):
            T.compile(_scale, backend="eager", dynamic=False)(T.ones(i + 1))
        try:
            T.compile(_scale, backend="eager", fullgraph=True, dynamic=False)(T.ones(20))
        except Exception as e:  # (the error is the outcome compared)
            return type(e).__name__
    return None


def test_fullgraph_past_a_shared_limit_raises():
    assert _fullgraph_past_a_shared_limit(fg) == "FailOnRecompileLimitHit"
    if torch is not None:
        assert _fullgraph_past_a_shared_limit(torch) == "FailOnRecompileLimitHit"


@pytest.mark.filterwarnings("ignore:fusegrad.compile.*recompile_limit")
def test_reset_gives_a_fresh_limit():
    """After `reset()` the code object's count starts again (eager's values throughout)."""
    _frames_per_counter(fg)
    fg._dynamo.reset()
    counter = fg._dynamo.testing.CompileCounter()
    out = fg.compile(_scale, backend=counter, dynamic=False)(fg.ones(30))
    assert counter.frame_count == 1 and out.tolist() == [3.0] * 30


# ---------------------------------------------------------------- dynamic-shape break reasons

_DYNAMIC_SHAPE = {"nonzero": ("nonzero", lambda T, x: T.nonzero(x) + 1),
                  "method": ("nonzero", lambda T, x: x.nonzero() + 1),
                  "boolean_mask": ("nonzero", lambda T, x: x[x > 0] + 1),
                  "masked_select": ("masked_select",
                                    lambda T, x: T.masked_select(x, x > 0) + 1),
                  "unique": ("_unique2", lambda T, x: T.unique(x) + 1),
                  "bincount": ("bincount", lambda T, x: T.bincount(x) + 1),
                  "unique_dim": ("unique_dim", lambda T, x: T.unique(x, dim=0) + 1),
                  "unique_consecutive": ("unique_consecutive",
                                         lambda T, x: T.unique_consecutive(x) + 1)}


def _break_reasons(T, body) -> tuple:
    """(the graph-break reasons counted, the result) of `body` compiled, without Dynamo's
    developer context and web address (fusegrad leaves them out)."""
    T._dynamo.reset()
    T._dynamo.utils.counters.clear()
    out = T.compile(lambda x: body(T, x), backend="eager")(T.tensor([0, 1, 1, 3]))
    keys = [k.partition("\n\n  Developer debug context")[0]
            for k in T._dynamo.utils.counters["graph_break"]]
    return keys, out.tolist()


@pytest.mark.parametrize("name", sorted(_DYNAMIC_SHAPE))
def test_dynamic_shape_break_worded_as_torch(name):
    op, body = _DYNAMIC_SHAPE[name]
    keys, out = _break_reasons(fg, body)
    assert keys == ["Dynamic shape operator\n  Explanation: Operator "
                    f"`aten.{op}.default`'s output shape depends on input Tensor data.\n  Hint: "
                    "Enable tracing of dynamic shape operators with "
                    "`torch._dynamo.config.capture_dynamic_output_shape_ops = True`"]
    assert out == body(fg, fg.tensor([0, 1, 1, 3])).tolist()
    if torch is not None:
        assert _break_reasons(torch, body) == (keys, out)
