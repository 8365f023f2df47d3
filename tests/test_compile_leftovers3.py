"""Capture leftovers, each program compiled against eager fusegrad (values, raised
exceptions, the lists and generator state left behind), with graph counts where capture runs
(CPython 3.11-3.13) and PyTorch 2.13's counts and break reasons (compared with torch._dynamo
where torch is installed):

1. List methods in the graph: `reverse`, `sort` (no key), `insert`, `pop`, `remove` and
   `clear` on a list the graph made; `reverse`, `sort`, `insert` and `pop` on a list from
   outside (an argument, an attribute, a global), whose new items are set on the real list
   after the graph, once. A bidirectional projected LSTM (whose layer code reverses its
   steps) is one graph.
2. `normal(mean_tensor, std)` and `normal(mean, std_tensor)` are graph ops that draw what eager
   draws for one seed, on every backend; a negative std tensor raises eager's error.
3. `explain` counts as `torch._dynamo.explain` (a break inside a loop: no graph of the frame,
   -1) and words the breaks both have as PyTorch does (builtins such as `print`, `item`,
   `tolist`, a branch on a tensor, `graph_break()`).

No torch at module level (this file runs on 3.12 and 3.13 too).
"""

from __future__ import annotations

import contextlib
import io
import types

import numpy as np
import pytest
from compile_support import BACKENDS, CAPTURES, Counter, compiled, tolerances

import fusegrad as fg
from fusegrad._dynamo import graph_break


def same(expected, got):
    """Compiled `got` equals eager `expected` (tensors exactly where the backend allows)."""
    if isinstance(expected, fg.Tensor):
        assert isinstance(got, fg.Tensor)
        assert got.shape == expected.shape and got.dtype == expected.dtype
        assert got.requires_grad == expected.requires_grad
        np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(),
                                   **tolerances(expected.dtype))
    elif isinstance(expected, (tuple, list)):
        assert type(got) is type(expected) and len(got) == len(expected), (got, expected)
        for e, g in zip(expected, got, strict=True):
            same(e, g)
    elif isinstance(expected, BaseException):
        assert type(got) is type(expected) and str(got) == str(expected), (got, expected)
    else:
        assert got == expected, (got, expected)


def outcome(fn, *args):
    """What `fn(*args)` returns, or the exception it raises."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - compared with eager's
        return e


def graph_count(counter) -> int:
    return counter.graphs if CAPTURES else 0


# ---------------------------------------------------------------- 1. list methods


def local_lists(x):
    steps = list((x * 2).unbind(0))
    steps.reverse()
    nums = [3, 1, 2, 5]
    nums.sort(reverse=True)
    nums.insert(-1, 7)
    last = nums.pop()
    nums.remove(2)
    rest = [x, x + 1]
    rest.clear()
    return fg.stack(steps) * nums[0] + last, nums, rest


def outside_list(x, lst):
    lst.reverse()
    y = x * lst[0]
    v = lst.pop()
    lst.insert(0, 7)
    lst.sort()
    return y + v + lst[-1], lst


def outside_tensors(x, ts):
    ts.reverse()
    first = ts.pop(0)
    return x * first + ts[0]


class Holder:
    def __init__(self, values):
        self.values = values


def attribute_list(x, h):
    h.values.sort(reverse=True)
    top = h.values.pop(0)
    return x * top, h.values


def two_names(x, a, b):
    a.reverse()  # b shows it when it is the same list
    return x * b[0], a, b


def pop_in_try(x, lst):
    try:
        lst.pop()
    except IndexError as e:
        return x - 1, str(e)
    return x + 1, lst


def unsortable(x, lst):
    lst.sort()
    return x + 1


GLOBAL_LIST = [1, 2, 3]


def global_list(x):
    GLOBAL_LIST.reverse()
    y = x * GLOBAL_LIST[0]
    GLOBAL_LIST.insert(1, 9)
    return y, GLOBAL_LIST[1]


def after_loop_break(x, lst):
    for i in range(2):
        x = x + i
        graph_break()
    lst.reverse()
    return x * lst[0], lst


def test_list_methods_on_a_list_made_in_the_graph():
    fn, counter = compiled(local_lists)
    for i in range(3):
        x = fg.arange(6.0).reshape(2, 3) + i
        same(local_lists(x), fn(x))
    assert graph_count(counter) == (1 if CAPTURES else 0)


LIST_CASES = {
    "numbers": (outside_list, lambda i: (fg.ones(2) * i, [3, 1, 2, 4 + i])),
    "tensors": (outside_tensors, lambda i: (fg.ones(2), [fg.ones(1) * (i + k) for k in range(3)])),
    "attribute": (attribute_list, lambda i: (fg.ones(2), Holder([1, 5, 3, 4]))),
    "popped_empty": (pop_in_try, lambda i: (fg.ones(2), [] if i % 2 else [1, 2])),
    "unsortable": (unsortable, lambda i: (fg.ones(2), [1, "a"])),
    "after_loop_break": (after_loop_break, lambda i: (fg.ones(2), [1, 2, 3])),
}


@pytest.mark.parametrize("name", sorted(LIST_CASES))
def test_list_methods_on_a_list_from_outside(name):
    """The real list ends as eager leaves it (its items set after the graph), and a new list
    of the same contents reuses the graph."""
    prog, make = LIST_CASES[name]
    fn, counter = compiled(prog)
    for i in range(4):
        want_args, got_args = make(i), make(i)
        same(outcome(prog, *want_args), outcome(fn, *got_args))
        for w, g in zip(want_args[1:], got_args[1:]):
            same(getattr(w, "values", w), getattr(g, "values", g))
    if CAPTURES and name in ("tensors", "attribute"):
        assert graph_count(counter) == 1


def test_list_reached_through_two_names_is_one_list():
    fn, counter = compiled(two_names)
    for aliased in (True, False, True, False):
        lists = [[1, 2, 3] for _ in range(4)]
        want_args = (lists[0], lists[0]) if aliased else (lists[0], lists[1])
        got_args = (lists[2], lists[2]) if aliased else (lists[2], lists[3])
        want = two_names(fg.ones(2), *want_args)
        got = fn(fg.ones(2), *got_args)
        same(want, got)
        assert (got[1] is got[2]) == aliased
    assert graph_count(counter) == (2 if CAPTURES else 0)  # one per aliasing


def test_list_held_by_another_variable_is_set_for_real():
    def held(x, pair, lst):
        lst.reverse()  # `pair` holds it too: the real reverse runs
        return x * pair[0][0]

    fn, _ = compiled(held)
    a, b = [1, 2, 3], [1, 2, 3]
    same(held(fg.ones(2), (a, 0), a), fn(fg.ones(2), (b, 0), b))
    assert a == b == [3, 2, 1]


def test_global_list_is_set_once_per_call():
    fn, counter = compiled(global_list)
    for i in range(3):
        GLOBAL_LIST[:] = [1, 2, i]
        want = global_list(fg.ones(2))
        after = list(GLOBAL_LIST)
        GLOBAL_LIST[:] = [1, 2, i]
        same(want, fn(fg.ones(2)))
        assert GLOBAL_LIST == after


def _lstm_model(T, **options):
    class Model(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = T.nn.Linear(4, 4)
            self.rnn = T.nn.LSTM(4, 6, **options)
            width = (options.get("proj_size") or 6) * (1 + options.get("bidirectional", False))
            self.b = T.nn.Linear(width, 2)

        def forward(self, x):
            out, (h, c) = self.rnn(self.a(x).relu())
            return self.b(out).sum() + h.sum() + c.sum()

    return Model()


LSTM_OPTIONS = {"bidirectional_projected": dict(bidirectional=True, proj_size=3),
                "two_layers_projected": dict(num_layers=2, proj_size=3, bidirectional=True)}


@pytest.mark.filterwarnings("ignore:LSTM with projections")
@pytest.mark.parametrize("name", sorted(LSTM_OPTIONS))
def test_bidirectional_projected_lstm_is_one_graph(name):
    """(PyTorch 2.13 runs nn.LSTM outside its graphs, `config.allow_rnn = False`: 0 graphs for
    this model; fusegrad traces LSTMs into the graph, as for every other option.)"""
    fg.manual_seed(0)
    model = _lstm_model(fg, **LSTM_OPTIONS[name])
    fn, counter = compiled(model)
    x = fg.tensor(np.random.default_rng(1).standard_normal((5, 2, 4)).astype(np.float32))
    for _ in range(2):
        want, got = model(x), fn(x)
        same(want, got)
        grads = fg.autograd.grad(want, list(model.parameters()))
        compiled_grads = fg.autograd.grad(got, list(model.parameters()))
        same(list(grads), list(compiled_grads))
    assert graph_count(counter) == (1 if CAPTURES else 0)


@contextlib.contextmanager
def warnings_ignored():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# ---------------------------------------------------------------- 2. normal of tensors


def mean_tensor(m):
    return fg.normal(m, 0.7) * 2, fg.randn(5)


def both_tensors(m, s):
    return fg.normal(m, s) + 1, fg.rand(3)


def keywords(m, s):
    return fg.normal(mean=m, std=s)


def std_tensor(s):
    return fg.normal(2.5, s)


NORMAL_CASES = {
    "mean_small": (mean_tensor, lambda: (fg.zeros(3),)),
    "mean_blocks": (mean_tensor, lambda: (fg.zeros(37),)),
    "mean_double": (mean_tensor, lambda: (fg.zeros(4, 9, dtype=fg.float64),)),
    "both_broadcast": (both_tensors, lambda: (fg.zeros(5, 7), fg.ones(7) * 3)),
    "both_mixed_dtypes": (both_tensors, lambda: (fg.zeros(7, dtype=fg.float64),
                                                 fg.ones(2, 7))),
    "keywords_requiring_grad": (keywords, lambda: (fg.zeros(33, requires_grad=True),
                                                   fg.full((33,), 2.0, requires_grad=True))),
    "std_only": (std_tensor, lambda: (fg.ones(40),)),
    "negative_std": (both_tensors, lambda: (fg.zeros(20), -fg.ones(20))),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(NORMAL_CASES))
def test_normal_of_tensors_draws_what_eager_draws(name, backend):
    prog, make = NORMAL_CASES[name]
    fg._dynamo.reset()  # (the cases share programs, whose recompile limit all wrappers share)
    counter = Counter(backend)
    fn = fg.compile(prog, backend=counter)
    for seed in (0, 1):
        fg.manual_seed(seed)
        want = outcome(prog, *make())
        after = fg.randn(2)
        fg.manual_seed(seed)
        got = outcome(fn, *make())
        same(want, got)  # (under inductor within float32 tolerances: fused kernels)
        if backend != "inductor" and not isinstance(want, BaseException):
            pairs = zip(want, got) if isinstance(want, tuple) else [(want, got)]
            assert all(bool((w == g).all()) for w, g in pairs)  # the same numbers
        if not isinstance(want, BaseException):
            same(after, fg.randn(2))  # the generator left where eager leaves it
    assert graph_count(counter) == (1 if CAPTURES else 0)


def test_normal_with_a_generator_still_runs_for_real():
    def prog(m, g):
        return fg.normal(m, 1.0, generator=g) * 2

    fn, _ = compiled(prog)
    g1, g2 = fg.Generator().manual_seed(5), fg.Generator().manual_seed(5)
    for _ in range(2):
        same(prog(fg.zeros(20), g1), fn(fg.zeros(20), g2))


def test_normal_of_tensors_counts_as_torch():
    torch = pytest.importorskip("torch")
    if not CAPTURES:
        pytest.skip("capture needs CPython 3.11-3.13")
    for prog, make in NORMAL_CASES.values():
        if prog is both_tensors and make()[1].min().item() < 0:
            continue  # (torch's explain raises there, as the call does)
        args = make()
        want = torch._dynamo.explain(_with_lib(prog, torch))(
            *(torch.tensor(a.detach().numpy(), requires_grad=a.requires_grad) for a in args))
        got = fg._dynamo.explain(prog)(*args)
        assert (got.graph_count, got.graph_break_count) == (want.graph_count,
                                                            want.graph_break_count) == (1, 0)


def _with_lib(prog, lib):
    return types.FunctionType(prog.__code__, {**prog.__globals__, "fg": lib}, prog.__name__)


# ---------------------------------------------------------------- 3. explain


def loop_break(x):
    x = x * 2
    for i in range(3):
        x = x + 1
        print("i", i)
        x = x * 2
    return x - 1


def prints(x):
    y = x.sin()
    print("hi")
    return y.cos()


def reads_item(x):
    y = x.sum() * 2
    v = y.item()
    return x * v


def reads_list(x):
    y = x * 2
    values = y.tolist()
    return x + values[0]


def reads_int_list(x):
    y = (x * 2).int()
    values = y.tolist()
    return x + values[0]


def branches(x):
    y = x * 2
    if y.sum() > 0:
        return y + 1
    return y - 1


def unknown_builtin(x):
    y = x * 2
    dir(y)
    return y + 1


def _inner(x):
    x = x + 1
    print("inner")
    return x * 3


def _middle(x):
    x = x * 2
    x = _inner(x)
    return x - 1


def nested(x):
    y = x.cos()
    z = _middle(y)
    return z.sin()


def asks_for_break(x):
    y = x * 2
    lib._dynamo.graph_break(msg="here")  # noqa: F821
    return y + 1


def print_before_loop(x):
    y = x * 2
    print("a", end="")
    for _ in range(2):
        y = y + 1
        print("b", end="")
    return y


def loop_of_breaks(x):
    for _ in range(2):
        x = x * 2
        lib._dynamo.graph_break()  # noqa: F821
    return x


EXPLAINED = [loop_break, prints, reads_item, reads_list, reads_int_list, branches,
             unknown_builtin, nested, asks_for_break, print_before_loop, loop_of_breaks]
# PyTorch 2.13's (graph_count, graph_break_count), recorded on 3.11.
TORCH_COUNTS = {"loop_break": (0, -1), "prints": (2, 1), "reads_item": (2, 1),
                "reads_list": (2, 1), "reads_int_list": (2, 1), "branches": (2, 1),
                "unknown_builtin": (2, 1), "nested": (6, 5), "asks_for_break": (2, 1),
                "print_before_loop": (1, 0), "loop_of_breaks": (0, -1)}


def _explain(lib, prog):
    fn = types.FunctionType(prog.__code__, {**prog.__globals__, "lib": lib}, prog.__name__)
    with contextlib.redirect_stdout(io.StringIO()), warnings_ignored():
        return lib._dynamo.explain(fn)(lib.ones(3))


def _words(reason: str) -> str:
    """A reason without Dynamo's developer context and web address (which fusegrad leaves
    out) nor fusegrad's note that the rest of a frame runs eagerly."""
    return reason.split("\n\n  Developer debug context")[0].split(" (inside a loop")[0]


@pytest.mark.parametrize("prog", EXPLAINED, ids=lambda p: p.__name__)
def test_explain_counts_as_torch_records(prog):
    if not CAPTURES:
        pytest.skip("capture needs CPython 3.11-3.13")
    out = _explain(fg, prog)
    assert (out.graph_count, out.graph_break_count) == TORCH_COUNTS[prog.__name__]


@pytest.mark.parametrize("prog", EXPLAINED, ids=lambda p: p.__name__)
def test_explain_counts_and_words_as_torch(prog):
    torch = pytest.importorskip("torch")
    if not CAPTURES:
        pytest.skip("capture needs CPython 3.11-3.13")
    want, got = _explain(torch, prog), _explain(fg, prog)
    assert (got.graph_count, got.graph_break_count) == (want.graph_count,
                                                        want.graph_break_count)
    # Each break PyTorch lists is listed with its frames and words; fusegrad lists more
    # (the breaks before any op, the one inside a loop), as a superset.
    ours = {tuple((f.name, f.lineno) for f in r.user_stack): r.reason
            for r in got.break_reasons}
    for r in want.break_reasons:
        frames = tuple((f.name, f.lineno) for f in r.user_stack)
        assert frames in ours, (frames, list(ours))
        mine, theirs = _words(ours[frames]), _words(r.reason)
        if theirs.startswith("generic_jump"):  # (fusegrad adds its explanation)
            assert mine.splitlines()[0] == theirs
        else:
            assert mine == theirs


def test_break_reasons_use_torch_words():
    if not CAPTURES:
        pytest.skip("capture needs CPython 3.11-3.13")
    first = {p.__name__: [r.reason.splitlines()[0] for r in _explain(fg, p).break_reasons]
             for p in (prints, reads_item, reads_list, branches, asks_for_break)}
    assert first == {
        "prints": ["Failed to trace builtin operator"],
        "reads_item": ["Unsupported Tensor.item() call with capture_scalar_outputs=False"],
        "reads_list": ["Tensor.tolist() with non-integer tensor"],
        "branches": ["generic_jump TensorVariable()"],
        "asks_for_break": ["Call to `torch._dynamo.graph_break()`"]}
    text = _explain(fg, unknown_builtin).break_reasons[0].reason
    assert "builtin operator `dir` with argument types ['Tensor'] (has_kwargs False)" in text
