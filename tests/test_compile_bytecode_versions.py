"""Capture on every supported CPython (3.11, 3.12, 3.13): the same programs, written once,
compile to different bytecode on each version (3.12 inlines comprehensions; 3.13 has
super-instructions, TO_BOOL, CALL_KW, a new callable/NULL order ...). Compiled results must
equal eager ones, and the counting backend must see the same graphs everywhere. No torch, so
.ci/run runs this file on 3.12 and 3.13 too."""

from __future__ import annotations

import math
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from compile_constructs import exp_at_least_half  # noqa: E402
from compile_support import Counter, tolerances  # noqa: E402

import fusegrad  # noqa: E402
import fusegrad as T  # noqa: E402
from fusegrad.compiler.capture.translator import (  # noqa: E402
    SUPPORTED_VERSIONS,
    unsupported_opcodes,
)

pytestmark = pytest.mark.skipif(sys.version_info[:2] not in SUPPORTED_VERSIONS,
                                reason="capture does not know this version's bytecode")

SCALE = 3.0
NAMES = ("relu", "tanh")


def _t(*shape, seed=0):
    return T.tensor(np.random.default_rng(seed).standard_normal(shape))


def _same(got, want) -> None:
    if isinstance(want, T.Tensor):
        assert isinstance(got, T.Tensor), type(got)
        assert got.requires_grad == want.requires_grad
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(),
                                   **tolerances(want.dtype))
    elif isinstance(want, (list, tuple)):
        assert type(got) is type(want) and len(got) == len(want), (got, want)
        for g, w in zip(got, want):
            _same(g, w)
    elif isinstance(want, dict):
        assert list(got) == list(want)
        for k in want:
            _same(got[k], want[k])
    else:
        assert got == want and type(got) is type(want), (got, want)


def check(fn, *args, graphs: int, fullgraph: bool = False, calls: int = 2):
    """Run `fn` compiled and eagerly; results must agree and `graphs` graphs be captured."""
    assert not unsupported_opcodes(fn.__code__), unsupported_opcodes(fn.__code__)
    counter = Counter()
    compiled = fusegrad.compile(fn, backend=counter, fullgraph=fullgraph)
    for _ in range(calls):  # the later calls reuse the graphs (guards pass)
        _same(compiled(*args), fn(*args))
    assert counter.graphs == graphs, counter.graphs
    return counter


# ---------------------------------------------------------------- calls


def helper(x, scale=1.0, *, shift=0.0):
    return x * scale + shift


def test_keyword_calls():
    def f(a):
        s = T.sum(a, dim=0, keepdim=True)
        p = a.softmax(dim=-1)
        h = helper(a, scale=2.0, shift=0.5) + helper(a, shift=1.0)
        c = T.cat([a, s], **{"dim": 0})
        return s, p, h, c

    check(f, _t(3, 4), graphs=1, fullgraph=True)


def test_star_args_calls():
    def f(a, shape):
        args = (a, 0.5)
        kwargs = {"shift": 2.0}
        return helper(*args, **kwargs) + a.reshape(*shape).t().t()

    check(f, _t(2, 6), (2, 6), graphs=1, fullgraph=True)


def test_method_calls():
    def f(a, b):
        out = a.relu().sum(0).exp()
        parts = []
        parts.append(a.t())
        parts.append(b * 2)
        last = parts.pop()
        names = "x-y".split("-")
        return out, parts[0] @ last, names, "{}:{}".format(*names).upper()

    check(f, _t(3, 3), _t(3, 3, seed=1), graphs=1, fullgraph=True)


def test_globals_and_builtins():
    def f(a):
        n = len(a) + max(2, 3) + int(abs(-4.5)) + round(math.pi)
        return a * SCALE + n, T.abs(a), getattr(a, NAMES[0])()

    check(f, _t(4), graphs=1, fullgraph=True)


# ---------------------------------------------------------------- functions


def test_nested_function_with_defaults_and_closure():
    def f(a, b):
        def inner(u, k=2, *, j=1):
            return u * k + b * j  # b is a closure cell

        square = lambda v, p=2: v ** p  # noqa: E731
        return inner(a), inner(a, 3, j=4), square(b), square(b, p=3)

    check(f, _t(3), _t(3, seed=1), graphs=1, fullgraph=True)


def _make_adder(offset):
    def add(x):
        return x + offset
    return add


ADD_TWO = _make_adder(2.0)


def test_closure_made_outside():
    def f(a):
        return ADD_TWO(a) * 2

    check(f, _t(3), graphs=1, fullgraph=True)


def test_function_returning_closure():
    def f(a, b):
        def scaled(k):
            return lambda x: x * k + b
        return scaled(3.0)(a)

    check(f, _t(3), _t(3, seed=1), graphs=1, fullgraph=True)


# ---------------------------------------------------------------- comparisons, strings


def test_chained_comparisons_on_constants():
    def f(a, n):
        if 0 < n <= 3:
            a = a * 2
        ok = 1 < n < 10
        if not (n > 5):
            a = a + 1
        return a * 1.5, ok, n == 2 != 3

    check(f, _t(3), 2, graphs=1, fullgraph=True)
    check(f, _t(3), 7, graphs=1, fullgraph=True)


def test_tensor_comparisons_and_branches():
    def f(a, b):
        lt = a < b  # a graph op
        if a.sum() > 0:  # a branch on a tensor: graph break
            b = b * -1
        return lt, a + b

    # graph 1 up to the branch, then one graph for the branch taken
    check(f, _t(4), _t(4, seed=1), graphs=2)
    check(f, -_t(4).abs(), _t(4, seed=1), graphs=2)


def test_branch_on_tensor_truth():
    def f(a):
        y = a * 2
        if not y.sum():
            return y
        return y + 1

    check(f, _t(4), graphs=2)


def test_chained_comparison_of_tensors():
    def f(a, b, c):
        x = a.sum() < b.sum() < c.sum()  # `and` of two tensor compares: a break
        return x, a + 1

    check(f, _t(3), _t(3, seed=1), _t(3, seed=2), graphs=2)


def test_fstrings_on_constants():
    def f(a, n, name):
        label = f"{n}-{n:>3}-{n!r}-{name!s:>6}-{SCALE:.1f}"
        table = {f"k{i}": a * i for i in range(2)}
        return label, table[f"k{n - 1}"], getattr(a, f"{'ta'}nh")()

    check(f, _t(3), 2, "w", graphs=1, fullgraph=True)


# ---------------------------------------------------------------- comprehensions


def test_list_dict_set_comprehensions():
    def f(a, xs):
        scaled = [a * i for i in range(3)]
        sines = [t.sin() for t in xs if t.ndim == 1]
        by_name = {name: getattr(a, name)() for name in NAMES}
        evens = {i % 2 for i in range(5)}
        return scaled, sines, by_name, sorted(evens), len(evens)

    check(f, _t(3), [_t(3, seed=1), _t(3, seed=2)], graphs=1, fullgraph=True)


def test_nested_comprehensions():
    def f(a):
        return [[a * i + j for j in range(2)] for i in range(3)]

    # 3.11 makes `i` a cell of the outer comprehension's own function (STORE_DEREF into a
    # cell the inner one shares); 3.12+ inline both loops. One graph either way.
    check(f, _t(3), graphs=1, fullgraph=True)


def test_comprehension_keeps_outer_variable():
    def f(a):
        i = 10
        ys = [a + i for i in range(2)]
        return ys, a * i  # i is 10 again after the comprehension

    check(f, _t(3), graphs=1, fullgraph=True)


def test_comprehension_result_feeds_graph():
    def f(xs):
        return T.stack([x * 2 for x in xs]).sum(0)

    check(f, [_t(3, seed=k) for k in range(4)], graphs=1, fullgraph=True)


def test_break_inside_comprehension_runs_rest_eagerly():
    def f(a, xs):
        y = a * 2
        vals = [float(x.sum().item()) for x in xs]  # .item(): a break inside a loop
        return y, vals

    # 3.11: the comprehension is a function; the break ends the first graph at its call and
    # it runs through compile on its own. 3.12+: the break is in a loop of `f` itself, but
    # inside an inlined comprehension: the graph ends at the comprehension, which runs
    # whole, as on 3.11.
    check(f, _t(3), [_t(3, seed=1), _t(3, seed=2)], graphs=1)


# ---------------------------------------------------------------- with, loops, modules


def test_no_grad_block():
    def f(a):
        with T.no_grad():
            w = a * 2
        return w + 1, a * 3, T.is_grad_enabled()

    a = T.tensor(np.arange(3.0), requires_grad=True)
    check(f, a, graphs=1, fullgraph=True)


def test_break_after_no_grad_block():
    def f(a):
        with T.no_grad():
            w = a * 2
        print_free = float(w.sum().item())  # a break after the block, not in a loop
        return w * print_free + a

    a = T.tensor(np.arange(3.0), requires_grad=True)
    check(f, a, graphs=2)


def test_loops_over_lists_of_tensors():
    def f(xs, ys):
        acc = xs[0] * 0
        for t in xs:
            acc = acc + t
        for i, t in enumerate(xs):
            acc = acc + t * i
        for x, y in zip(xs, ys):
            acc = acc + x * y
        return acc

    xs = [_t(3, seed=k) for k in range(3)]
    ys = [_t(3, seed=10 + k) for k in range(3)]
    check(f, xs, ys, graphs=1, fullgraph=True)


class Block(fusegrad.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = fusegrad.nn.Linear(4, 3)
        self.act = fusegrad.nn.ReLU()

    def forward(self, x, scale=1.0):
        return self.act(self.fc(x)) * scale


def test_module_forward_calls():
    fusegrad.manual_seed(0)
    block = Block()

    def f(x):
        return block(x, scale=2.0) + block.forward(x)

    x = _t(2, 4).float()
    check(f, x, graphs=1, fullgraph=True)
    counter = Counter()
    compiled = fusegrad.compile(block, backend=counter)
    _same(compiled(x), block(x))
    assert counter.graphs == 1


# ---------------------------------------------------------------- breaks and the frame state


def test_eager_rest_builds_real_containers():
    def f(a, b):
        for _ in range(2):
            if a.sum() > 100:  # a break inside a loop: the rest of f runs eagerly
                a = a + 1
        parts = [a, b]
        table = {"x": a, **{"y": b}}
        return T.cat(parts, **{"dim": 0}), table, (a, [b]), {len(parts)}

    check(f, _t(3), _t(3, seed=1), graphs=0)


def _append_then_break(xs, t):
    xs.append(t * 2)
    return float(t.sum().item())  # a break inside the inlined callee


def test_break_in_callee_keeps_caller_list_unchanged():
    def f(a):
        xs = [a]
        n = _append_then_break(xs, a)
        return xs, n  # one append only: the callee's runs for real after the break

    # f has no tensor op before the call; the callee, compiled on its own, records the
    # append to the list from outside (replayed after its graph) and breaks at .item():
    # one graph, `t * 2` and `t.sum()`
    check(f, _t(3), graphs=1, calls=3)


def test_iterator_argument_is_not_consumed():
    def f(a, it):
        return [a * x for x in it]

    counter = Counter()
    got = fusegrad.compile(f, backend=counter)(_t(3), iter([1.0, 2.0]))
    _same(got, f(_t(3), iter([1.0, 2.0])))


# ---------------------------------------------------------------- exception tables, generators


def test_try_except_is_captured():
    def f(a):
        try:
            return a * 2
        except ValueError:
            return a

    check(f, _t(3), graphs=1, fullgraph=True)


def test_generator_expression_consumed_by_sum():
    def f(a, xs):
        y = a * 2
        total = sum(x.sum() for x in xs)  # run when sum() consumes it
        return y + total

    check(f, _t(3), [_t(3, seed=1), _t(3, seed=2)], graphs=1, fullgraph=True)


def test_named_tuple_results():
    """`x.max(0).values`: fields of an op's named-tuple result, also across a break and as
    the return value (rebuilt as the same named tuple)."""
    def fields(a):
        m = a.max(0)
        return m.values * 2, m.indices

    def across_break(a):
        m = a.min(1)
        print("graph break")
        return m.values + 1, m

    check(fields, _t(3, 4), graphs=1)
    check(across_break, _t(3, 4), graphs=2)


# ---------------------------------------------------------------- exceptions at run time


def test_exception_in_graph_goes_to_the_handler():
    """An op that raises only when the graph runs (an index out of range): the segment runs
    again eagerly, so the `except` block catches it as in eager."""
    def f(a, idx):
        y = a * 2
        try:
            z = y[idx]
        except IndexError:
            z = y.sum(0, keepdim=True) - 1
        return z + 1

    counter = Counter()
    compiled = fusegrad.compile(f, backend=counter)
    for idx in ([1, 2], [7, 0], [0, 3]):
        i = T.tensor(idx)
        _same(compiled(_t(4, 3), i), f(_t(4, 3), i))
    assert counter.graphs == 1


def test_tensor_assert_raises_from_the_graph():
    f = exp_at_least_half  # (pytest would rewrite an assert written here)
    counter = Counter()
    compiled = fusegrad.compile(f, backend=counter)
    _same(compiled(T.ones(3)), f(T.ones(3)))
    with pytest.raises(AssertionError, match="^too small$"):
        compiled(-T.ones(3) * 5)
    assert counter.graphs == 1


class _Holder:
    def __init__(self):
        self.count = 0
        self.steps = T.zeros(())


def test_uncaught_raise_keeps_the_side_effects_before_it():
    holder = _Holder()

    def f(a, h):
        h.count = h.count + 1
        h.steps += 1
        if a.shape[0] == 3:
            raise ValueError(f"three rows ({h.count})")
        return a

    counter = Counter()
    compiled = fusegrad.compile(f, backend=counter)
    with pytest.raises(ValueError, match=r"^three rows \(1\)$"):
        compiled(_t(3), holder)
    assert holder.count == 1 and float(holder.steps) == 1.0
    assert counter.graphs == 0  # (the frame is given up, as torch.compile gives it up)


def test_break_inside_except_block_runs_eagerly():
    seen = []

    def f(a):
        try:
            raise KeyError("k")
        except KeyError as e:
            seen.append(str(e))  # a side effect: a graph break inside the handler
            y = a * 2
        return y + 1

    _same(fusegrad.compile(f, backend=Counter())(_t(3)), f(_t(3)))
    assert seen == ["'k'", "'k'"]


def test_break_in_try_then_raise():
    def f(a):
        try:
            y = a * 2
            print("in try")
            raise ValueError("after the break")
        except ValueError as e:
            y = y + len(str(e))
        return y

    check(f, _t(3), graphs=0)  # a break in the try block gives the frame up (as torch)


def test_cells_shared_with_nested_functions():
    def f(a):
        total = a * 0
        calls = 0

        def add(x):
            nonlocal total, calls
            total = total + x
            calls += 1

        for k in range(3):
            add(a * k)
        return total * calls

    check(f, _t(3), graphs=1, fullgraph=True)


def test_assignment_before_an_op_that_raises_is_kept():
    holder = _Holder()

    def f(a, idx, h):
        h.count = h.count + 1
        return a[idx] * 2

    compiled = fusegrad.compile(f, backend=Counter())
    _same(compiled(_t(4), T.tensor([1]), holder), _t(4)[T.tensor([1])] * 2)
    with pytest.raises(IndexError):
        compiled(_t(4), T.tensor([9]), holder)
    assert holder.count == 2  # as eager: the assignment came before the failing index


def test_hasattr_sees_an_attribute_assigned_in_the_graph():
    holder = _Holder()

    def f(a, h):
        h.last = a * 2
        return a + 1 if hasattr(h, "last") else a - 1

    check(f, _t(3), holder, graphs=1)
    assert isinstance(holder.last, T.Tensor)


def test_cell_rebuilt_at_a_break_is_read_and_rebound_for_real():
    def f(a):
        n = 2
        print("graph break")
        g = lambda x: x * n  # noqa: E731
        n = 3  # the frame's cell, rebuilt as a real cell at the break
        return g(a)

    # One graph (`g(a)` after the rebinding): the cell, a new one on every call, is guarded
    # by its type, not its identity, so later calls do not recompile.
    check(f, _t(3), graphs=1, calls=3)


_ROWS = [1.0, 2.0]


def test_real_exception_of_a_break_instruction_goes_to_the_handler():
    def f(a):
        y = a * 2
        try:
            z = _ROWS[5]  # a global list: read for real, and it raises there
        except IndexError:
            z = -1.0
        return y + z

    check(f, _t(3), graphs=1)


def test_in_place_ops_in_a_resumed_no_grad_block_stay_in_the_graph():
    w = _t(3).requires_grad_()

    def f(g):
        with T.no_grad():
            print("graph break")
            w.add_(g)
            w.mul_(0.5)
        return w * 1

    counter = Counter()
    compiled = fusegrad.compile(f, backend=counter)
    compiled(_t(3, seed=1))
    assert counter.graphs == 2


_NO_GRAD = T.no_grad()


def test_kept_no_grad_object_switches_grad_mode_in_order():
    def f(a):
        with _NO_GRAD:
            b = a * 2
        return b, b + a

    a = _t(3).requires_grad_()
    assert not f(a)[0].requires_grad
    check(f, a, graphs=1, fullgraph=True)


def test_cell_from_an_earlier_segment_stays_this_calls_cell():
    def f(a, k):
        n = k
        print("graph break")  # n is a real cell from here on
        y = a * 2
        print("another break")  # the cell, read through L, is live across this one
        g = lambda x: x * n  # noqa: E731
        return g(y)

    compiled = fusegrad.compile(f, backend=Counter())
    for k in (2.0, 3.0, 5.0):
        _same(compiled(_t(3), k), f(_t(3), k))


def test_rebinding_a_cell_rebuilt_at_a_break_sets_this_calls_cell():
    def f(a, k):
        n = k
        print("graph break")
        n = n * 2  # the frame's cell (a new one per call): set after the graph
        print("second break")  # the cell is read again after this one

        def g(x):
            return x * n

        return g(a), n

    compiled = fusegrad.compile(f, backend=Counter())
    for k in (1.0, 1.0, 3.0):
        _same(compiled(_t(3), k), f(_t(3), k))


def test_in_place_ops_in_a_comprehension_stay_in_one_graph():
    def f(xs):
        ys = [x * 1 for x in xs]
        [y.add_(1) for y in ys]  # 3.12+ inline it, with a handler that is no try block
        return ys

    check(f, [_t(3, seed=k) for k in range(3)], graphs=1, fullgraph=True)


def test_exception_raised_while_handling_another_keeps_its_context():
    def f(a):
        y = a * 2
        try:
            raise KeyError("first")
        except KeyError:
            raise ValueError(f"second {y.shape[0]}")  # noqa: B904 (the context, on purpose)

    for fn in (f, fusegrad.compile(f, backend=Counter())):
        with pytest.raises(ValueError, match="^second 3$") as info:
            fn(_t(3))
        assert isinstance(info.value.__context__, KeyError)
        assert info.value.__cause__ is None
