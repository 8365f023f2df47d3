"""Generator expressions in compiled code make their items when asked for, as Python's do: a
loop over one, `enumerate`/`zip` of one, `next()` and `any`/`all` interleave the generator's
code with the program's (a loop body's in-place writes, random draws, calls with effects).
`itertools.chain` of such takes each part's items in turn, as it is asked. Each program is
compared with its eager run on each backend (results, mutated inputs, Python state), and the
graphs are counted where capture should need no break."""

from __future__ import annotations

import itertools

import pytest

import fusegrad as torch
from fusegrad._dynamo import explain
from fusegrad.utils import _pytree

BACKENDS = ["eager", "aot_eager", "inductor"]
LOG: list = []


def loop_with_random_draws(xs):
    out = []
    for y in (torch.rand(2) + x for x in xs):  # each draw after the previous body's
        out.append(y * torch.rand(2))
    return out


def loop_body_writes_what_the_generator_reads(xs):
    out = []
    for y in (x * 2 for x in xs):
        out.append(y)
        xs[-1].add_(1)
    return out


def enumerate_of_a_generator(xs):
    out = []
    for i, y in enumerate((x * 2 for x in xs), start=3):
        out.append(y + i)
        xs[-1].mul_(2)
    return out


def zip_of_a_generator_and_a_list(xs):
    total = torch.zeros(2)
    for a, b in zip((x.exp() for x in xs), [10.0, 20.0]):
        total = total + a * b
        xs[-1].add_(1)
    return total


def next_between_writes(xs):
    it = (x * 2 for x in xs)
    a = next(it)
    xs[1].add_(1)
    b = next(it)
    return a, b, next(it, None)


def comprehension_over_a_generator(xs):
    return [y + xs[1].add_(1) for y in (x * 2 for x in xs)]


def partly_consumed_then_looped(xs):
    gen = (x + 1 for x in xs)
    first = next(gen)
    xs[-1].add_(5)
    return [first] + [y * 2 for y in gen]


def chain_of_a_generator_and_a_list(xs):
    out = []
    for y in itertools.chain((x * 2 for x in xs[:2]), [xs[2]], ()):
        out.append(y + 1)
        xs[-1].add_(1)  # before the generator's next item, and seen by the list's
    return out


def next_of_a_chain_then_the_rest(xs):
    it = itertools.chain(xs[:1], (x + 1 for x in xs[1:]))
    first = next(it)
    xs[-1].mul_(2)
    return [first] + list(it) + list(itertools.chain())


def _check(v):
    LOG.append(v)
    return v > 1


def any_stops_at_the_first_true(x, vals):
    if any(_check(v) for v in vals):
        return x + 1
    return x - 1


def all_stops_at_the_first_false(x, vals):
    if all(_check(v) for v in vals):
        return x + 1
    return x - 1


def reversed_generator_raises(x):
    try:
        reversed(v for v in (1, 2))
    except TypeError as e:
        return x + len(str(e))
    return x


TENSOR_PROGRAMS = [loop_with_random_draws, loop_body_writes_what_the_generator_reads,
                   enumerate_of_a_generator, zip_of_a_generator_and_a_list, next_between_writes,
                   comprehension_over_a_generator, partly_consumed_then_looped,
                   chain_of_a_generator_and_a_list, next_of_a_chain_then_the_rest]


def _inputs():
    return [torch.zeros(2), torch.ones(2), torch.full((2,), 3.0)]


def _same(a, b) -> bool:
    la, lb = _pytree.tree_leaves(a), _pytree.tree_leaves(b)
    return len(la) == len(lb) and all(
        torch.allclose(x, y, rtol=1e-6, atol=1e-6) if isinstance(x, torch.Tensor) else x == y
        for x, y in zip(la, lb))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("prog", TENSOR_PROGRAMS, ids=lambda p: p.__name__)
def test_generator_items_come_in_python_order(prog, backend):
    torch.manual_seed(0)
    xs = _inputs()
    want = prog(xs)
    compiled = torch.compile(prog, backend=backend)
    for _ in range(2):  # (the second call runs the cached graph)
        torch.manual_seed(0)
        ys = _inputs()
        got = compiled(ys)
        assert _same(got, want)
        assert _same(ys, xs)  # the inputs' in-place writes, as eager's


@pytest.mark.parametrize("prog", TENSOR_PROGRAMS, ids=lambda p: p.__name__)
def test_generator_loops_are_one_graph(prog):
    out = explain(prog)(_inputs())
    assert out.graph_count == 1 and out.graph_break_count == 0, out.break_reasons


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("prog,vals", [(any_stops_at_the_first_true, [0, 2, 3]),
                                       (any_stops_at_the_first_true, [0, 1]),
                                       (all_stops_at_the_first_false, [2, 0, 3]),
                                       (all_stops_at_the_first_false, [2, 3])],
                         ids=["any-true", "any-false", "all-false", "all-true"])
def test_any_all_call_only_up_to_the_deciding_item(prog, vals, backend):
    LOG.clear()
    want = prog(torch.ones(2), vals)
    want_log = list(LOG)
    LOG.clear()
    got = torch.compile(prog, backend=backend)(torch.ones(2), vals)
    assert torch.equal(got, want)
    assert LOG == want_log


@pytest.mark.parametrize("backend", BACKENDS)
def test_reversed_of_a_generator_raises_as_python(backend):
    x = torch.ones(2)
    assert torch.equal(torch.compile(reversed_generator_raises, backend=backend)(x),
                       reversed_generator_raises(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_inside_a_generator_loop(backend):
    printed = []

    def prog(xs):
        out = []
        for y in (x * 2 for x in xs):
            printed.append(float(y.sum()))  # a value read: a break inside the loop
            out.append(y + 1)
            xs[-1].add_(1)
        return out

    want = prog(_inputs())
    want_printed = list(printed)
    printed.clear()
    ys = _inputs()
    got = torch.compile(prog, backend=backend)(ys)
    assert _same(got, want) and printed == want_printed


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_exception_finishes_the_generator(backend):
    def prog(x, vals):
        gen = (x * (10 // v) for v in vals)
        got = []
        try:
            for y in gen:
                got.append(y)
        except ZeroDivisionError:
            got.append(x - 1)
        got.extend(gen)  # used up after the exception, as Python's
        return got

    x = torch.ones(2)
    want = prog(x, [2, 0, 5])
    got = torch.compile(prog, backend=backend)(x, [2, 0, 5])
    assert _same(got, want) and len(got) == 2


def _split(t):
    LOG.append(tuple(t.shape))
    return t.view(2, -1).t()


def map_of_a_function(xs):
    q, k, v = map(_split, (xs[0], xs[1], xs[2]))
    return q + k * v


def map_between_writes(xs):
    out = []
    for y in map(lambda a, b: a * b, xs, [1.0, 2.0, 3.0]):
        out.append(y + 1)
        xs[-1].sub_(1)
    return out


def filter_of_a_generator(xs):
    kept = list(filter(None, (x.sum() > 0 for x in xs)))
    return len(kept), [y * 2 for y in filter(lambda t: t is not None, [xs[0], None, xs[2]])]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("prog", [map_of_a_function, map_between_writes],
                         ids=lambda p: p.__name__)
def test_map_calls_as_items_are_asked_for(prog, backend):
    LOG.clear()
    xs = [torch.arange(4.0), torch.ones(4), torch.full((4,), 3.0)]
    want, want_log = prog(xs), list(LOG)
    LOG.clear()
    ys = [torch.arange(4.0), torch.ones(4), torch.full((4,), 3.0)]
    got = torch.compile(prog, backend=backend)(ys)
    assert _same(got, want) and _same(ys, xs) and LOG == want_log
    out = explain(prog)([torch.arange(4.0), torch.ones(4), torch.full((4,), 3.0)])
    assert out.graph_count == 1 and out.graph_break_count == 0, out.break_reasons


@pytest.mark.parametrize("backend", BACKENDS)
def test_filter(backend):
    xs = [torch.arange(4.0), -torch.ones(4), torch.full((4,), 3.0)]
    got = torch.compile(filter_of_a_generator, backend=backend)(xs)
    assert _same(got, filter_of_a_generator(xs))


def enumerate_a_growing_queue(x):
    queue = [x]
    out = []
    for i, t in enumerate(queue):
        out.append(t * i)
        if i < 3:
            queue.append(t + 1)
    return out


def zip_with_a_growing_list(x):
    made = [x]
    out = []
    for a, b in zip(made, [x, x * 2, x * 3, x * 4]):
        out.append(a * b)
        if len(made) < 3:
            made.append(a + b)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("prog", [enumerate_a_growing_queue, zip_with_a_growing_list],
                         ids=lambda p: p.__name__)
def test_enumerate_and_zip_see_a_list_grow(prog, backend):
    x = torch.arange(3.0)
    want = prog(x)
    got = torch.compile(prog, backend=backend)(x)
    assert _same(got, want) and len(got) == len(want)
    out = explain(prog)(x)
    assert out.graph_count == 1 and out.graph_break_count == 0, out.break_reasons


def _average_into(avg, model):
    """AveragedModel's update with use_buffers=True: parameters and buffers chained."""
    with torch.no_grad():
        for p_avg, p in zip(itertools.chain(avg.parameters(), avg.buffers()),
                            itertools.chain(model.parameters(), model.buffers())):
            if p.dtype.is_floating_point:
                p_avg.lerp_(p, 0.5)
            else:
                p_avg.copy_(p)


@pytest.mark.parametrize("backend", BACKENDS)
def test_chain_of_parameters_and_buffers_is_one_graph(backend):
    def state():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3))
        model(torch.randn(4, 3))
        avg = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3))
        return avg, model

    avg, model = state()
    _average_into(avg, model)
    want = [t.clone() for t in itertools.chain(avg.parameters(), avg.buffers())]
    torch._dynamo.reset()
    avg, model = state()
    out = explain(_average_into)(avg, model)
    assert out.graph_count == 1 and not out.break_reasons, out.break_reasons
    avg, model = state()
    torch.compile(_average_into, backend=backend)(avg, model)
    got = list(itertools.chain(avg.parameters(), avg.buffers()))
    assert _same(got, want)
