"""`explain(fn)` and `explain(module)` against `torch._dynamo.explain` on the same programs:
graph and break counts, the call_function ops of each graph, the break's source line, and the
text layout."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch
import torch._dynamo

import fusegrad

# Written against a global `lib`: the same code object runs with torch or fusegrad as `lib`,
# so both reports name the same file, line and function.


def toy(a, b):
    x = a / (lib.abs(a) + 1)  # noqa: F821
    if b.sum() < 0:
        b = b * -1
    return x * b


def printing(x):
    y = x + 1
    print("", end="")
    return y * 2


def two_breaks(x):
    y = lib.sin(x) + 1  # noqa: F821
    print("", end="")
    z = lib.relu(y) * 2  # noqa: F821
    print("", end="")
    return z - 1


def no_break(x):
    return lib.tanh(x @ x.T).sum(dim=0) + x[0]  # noqa: F821


def calls_printing(x):
    return printing(x.sin()).cos()


PROGRAMS = [toy, printing, two_breaks, no_break, calls_printing]


def _names(ops) -> list[str]:
    return [getattr(op, "__name__", str(op)) for op in ops]


def _explain(lib, prog, *arrays):
    fn = types.FunctionType(prog.__code__, {**prog.__globals__, "lib": lib}, prog.__name__)
    args = [lib.tensor(a) for a in arrays]
    return lib._dynamo.explain(fn)(*args)


def test_explain_twice_reports_the_same():
    """explain forgets earlier captures (a callee's graphs included), as PyTorch's resets."""
    a = np.ones(3, np.float32)
    first, second = (_explain(fusegrad, calls_printing, a) for _ in range(2))
    assert (first.graph_count, first.graph_break_count, first.op_count) == \
        (second.graph_count, second.graph_break_count, second.op_count)


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.__name__)
def test_explain_fn_matches_torch(prog):
    arrays = [np.linspace(-1, 1, 9, dtype=np.float32).reshape(3, 3)] * (
        2 if prog is toy else 1)
    want = _explain(torch, prog, *arrays)
    got = _explain(fusegrad, prog, *arrays)
    assert got.graph_count == want.graph_count
    assert got.graph_break_count == want.graph_break_count
    assert got.op_count == want.op_count
    assert [_names(ops) for ops in got.ops_per_graph] == \
        [_names(ops) for ops in want.ops_per_graph]
    assert len(got.break_reasons) == len(want.break_reasons)
    for g, w in zip(got.break_reasons, want.break_reasons):
        # The same frames (the call sites of inlined functions, then the break itself): file,
        # line and function, which FrameSummary prints alike.
        assert [str(f) for f in g.user_stack] == [str(f) for f in w.user_stack]
        if "print" in w.reason:  # the same construct: both name it
            assert "print" in g.reason


def _layout(text: str) -> list[str]:
    """The report's skeleton: headings and the frame lines, without reason and guard texts."""
    keep = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith(("Graph Count", "Graph Break Count", "Op Count", "Break Reason",
                         "Ops per Graph", "Ops ", "Out Guards", "User Stack", "<FrameSummary")):
            keep.append(line)
        elif s.startswith("Reason:"):
            keep.append(line[:line.index("Reason:") + 7])
    return keep


def test_explain_text_layout_matches_torch():
    a = np.ones(3, np.float32)
    want = str(_explain(torch, toy, a, -a))
    got = str(_explain(fusegrad, toy, a, -a))
    assert _layout(got) == _layout(want)
    assert got.splitlines()[:3] == want.splitlines()[:3]


def _mlp(nn):
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


@pytest.mark.parametrize("build", [lambda nn: nn.Linear(3, 2), _mlp],
                         ids=["linear", "mlp"])
def test_explain_module_matches_torch(build):
    torch.manual_seed(0)
    tm = build(torch.nn)
    fm = build(fusegrad.nn)
    fm.load_state_dict({k: fusegrad.tensor(v.detach().numpy()) for k, v in
                        tm.state_dict().items()})
    x = torch.randn(2, tm[0].in_features if isinstance(tm, torch.nn.Sequential) else 3)
    want = torch._dynamo.explain(tm)(x)
    got = fusegrad._dynamo.explain(fm)(fusegrad.tensor(x.numpy()))
    assert (got.graph_count, got.graph_break_count, got.op_count) == \
        (want.graph_count, want.graph_break_count, want.op_count)
    assert [_names(ops) for ops in got.ops_per_graph] == \
        [_names(ops) for ops in want.ops_per_graph]
    assert got.out_guards and all(isinstance(g, str) for g in got.out_guards)
    assert "Compile Times:" in str(got) and got.compile_times


def test_explain_accepts_compiled_function_and_module():
    fn = fusegrad.compile(lambda x: x.sin() + 1)
    assert fusegrad._dynamo.explain(fn)(fusegrad.ones(2)).graph_count == 1
    mod = fusegrad.compile(fusegrad.nn.Linear(2, 2))
    assert fusegrad._dynamo.explain(mod)(fusegrad.ones(1, 2)).graph_count == 1


def test_fullgraph_break_raises_unsupported_as_torch():
    """fullgraph=True at a break: torch._dynamo.exc.Unsupported (a RuntimeError) in both,
    naming the construct and the user's file and line."""
    errors = []
    for lib in (torch, fusegrad):
        fn = types.FunctionType(printing.__code__, {**printing.__globals__, "lib": lib})
        with pytest.raises(lib._dynamo.exc.Unsupported) as info:
            lib.compile(fn, fullgraph=True, backend="eager")(lib.ones(2))
        errors.append(info.value)
    want, got = errors
    assert isinstance(got, RuntimeError) and isinstance(want, RuntimeError)
    line = printing.__code__.co_firstlineno + 2
    assert f'File "{__file__}", line {line}' in str(want) and "print" in str(want)
    assert f"{__file__}:{line}" in str(got) and "print" in str(got)


def prints_only(x):
    print("", end="")
    return x


def prints_twice(x):
    print("", end="")
    print("", end="")
    return x


def no_op(x):
    return x


@pytest.mark.parametrize("prog", [prints_only, prints_twice, no_op], ids=lambda p: p.__name__)
def test_explain_without_graphs_counts_as_torch(prog):
    """No graph at all: PyTorch's count is graph_count - 1 even then (-1); the breaks are
    still listed (ours name them, PyTorch's list is empty: its reasons come with graphs)."""
    a = np.ones(3, np.float32)
    want = _explain(torch, prog, a)
    got = _explain(fusegrad, prog, a)
    assert (got.graph_count, got.graph_break_count) == (want.graph_count,
                                                        want.graph_break_count) == (0, -1)
    assert len(got.break_reasons) == {"prints_only": 1, "prints_twice": 2, "no_op": 0}[
        prog.__name__]
    assert str(got).splitlines()[1] == str(want).splitlines()[1] == "Graph Break Count: -1"


def _breaking_modules(T):
    """A module whose submodule and helper object each break in their own code: after the
    caller's break, the call it makes for real is captured on its own frame."""

    class Inner(T.nn.Module):
        def forward(self, x):
            a = x + 1
            print("", end="")
            return a * 3

    class Helper:
        def go(self, x):
            a = T.sin(x)
            print("", end="")
            return T.cos(a)

    class Outer(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()
            self.helper = Helper()

        def forward(self, x):
            y = self.inner(T.tanh(x))
            z = self.helper.go(y - 2)
            return z * y

    return Outer()


def test_calls_made_after_a_break_are_captured_like_torch():
    """Dynamo captures the frame of a module's forward or a bound method that runs after a
    break; so does fusegrad: the same graphs, ops and break frames, and eager's result."""
    a = np.linspace(-1, 1, 6, dtype=np.float32)
    want = torch._dynamo.explain(_breaking_modules(torch))(torch.tensor(a))
    got = fusegrad._dynamo.explain(_breaking_modules(fusegrad))(fusegrad.tensor(a))
    assert (got.graph_count, got.graph_break_count, got.op_count) == \
        (want.graph_count, want.graph_break_count, want.op_count) == (7, 6, 7)
    assert [_names(ops) for ops in got.ops_per_graph] == \
        [_names(ops) for ops in want.ops_per_graph]
    assert [[(f.name, f.lineno) for f in r.user_stack] for r in got.break_reasons] == \
        [[(f.name, f.lineno) for f in r.user_stack] for r in want.break_reasons]
    model = _breaking_modules(fusegrad)
    compiled = fusegrad.compile(model)
    x = fusegrad.tensor(a)
    for _ in range(2):
        np.testing.assert_allclose(compiled(x).numpy(), model(x).numpy(), rtol=1e-6)


class _Holder:
    def scale(self, x, y):
        return x * y


_HOLDER = _Holder()


def _printed(x):
    print("", end="")
    return x


def method_after_break(x):
    return _HOLDER.scale(x + 1, _printed(x)) - 1


def test_segment_after_a_break_calls_a_method_on_the_stack():
    """The stack rebuilt after a break holds a method and the NULL of its call: the next
    segment inlines the call into its graph, as Dynamo's resume function does."""
    a = np.ones(3, np.float32)
    want = _explain(torch, method_after_break, a)
    got = _explain(fusegrad, method_after_break, a)
    assert (got.graph_count, got.op_count) == (want.graph_count, want.op_count) == (2, 3)
    assert [_names(ops) for ops in got.ops_per_graph] == \
        [_names(ops) for ops in want.ops_per_graph]
    assert not any("_Null" in r.reason for r in got.break_reasons)
