"""Capture counted as torch.compile (2.13, backend="eager") counts, where fusegrad broke more:

- `with inference_mode():` (also `inference_mode(False)`, nested in `no_grad`, and the
  wrapper `@inference_mode()` puts around a function) entered and left in the graph;
- `with warnings.catch_warnings():` made in the frame, with no call into `warnings` inside,
  an empty block; one that calls `simplefilter` still breaks at `catch_warnings()`;
- `len()` of a list from outside after the graph appended to it, and `lst[i] = v` on one
  (set on the real list after the graph);
- an attribute assigned to a class (`type(self).calls += 1`), read back through the class,
  an instance or a subclass; `yield from` in a user's generator;
- `any()` / `all()` over a generator expression of tensor comparisons (a break, as torch);
- an in-place op on a tensor the graph made while two inputs share memory (no break);
  inputs that alias and are written in place still give eager's values;
- 3.12+: a break inside an inlined comprehension ends the graph at the comprehension, which
  runs whole, and capture resumes after it (as on 3.11, where it is a function).

Programs take the library and whether to compile and return what they recorded; each is run
eagerly and compiled under fusegrad (values and printed text must agree); fusegrad's counts
of graphs and breaks must be torch's, recorded in _TORCH_COUNTS and checked against torch
where it is installed (the other Pythons run the fusegrad side alone)."""

import warnings

import pytest
from capture_support import counted_as_torch, fg, values_as_eager
from program_support import (
    compare,
    maybe_compile,
    observe_compiled,
    plain,
)

# (unique graphs, graph breaks) torch.compile(backend="eager") gives each program.
_TORCH_COUNTS = {
    "inference_block": (1, 0), "inference_false": (1, 0), "inference_decorator": (1, 0),
    "inference_bare_decorator": (1, 0), "inference_with_grad": (1, 0),
    "inference_nested": (1, 1), "inference_under_no_grad": (1, 0),
    "catch_warnings_empty": (1, 0), "catch_warnings_record": (1, 0),
    "len_after_append": (2, 0), "setitem_outside": (1, 0), "setitem_then_read": (1, 0),
    "class_counter": (2, 0), "class_counter_module": (2, 0), "class_via_instance": (2, 0),
    "class_store_read_by_new_object": (2, 0), "yield_from_generator": (1, 0),
    "yield_from_list": (1, 0),
    "any_in_branch": (0, 1), "any_after_ops": (0, 1), "any_value": (0, 1),
    "any_in_callee": (3, 2), "all_in_module": (0, 1),
    "fresh_index_add": (1, 0), "fresh_views_written": (1, 0), "fresh_copy_written": (1, 0),
    "comprehension_item": (3, 1), "comprehension_in_expression": (2, 1),
    "comprehension_nested": (2, 1), "comprehension_in_loop": (0, 0),
    "comprehension_shadowing": (2, 1), "comprehension_first": (2, 1),
}


_check_as_torch = counted_as_torch(_TORCH_COUNTS)


_check_values = values_as_eager


# ---------------------------------------------------------------- inference_mode


def inference_block(T, compiled):
    def f(x):
        y = x + 1
        with T.inference_mode():
            z = y * 2
        return z + 1

    return maybe_compile(T, compiled)(f)(T.ones(2))


def inference_false(T, compiled):
    def f(x):
        y = x + 1
        with T.inference_mode(False):
            z = y * 2
        return z + 1

    return maybe_compile(T, compiled)(f)(T.ones(2, requires_grad=True))


def inference_decorator(T, compiled):
    @T.inference_mode()
    def g(y):
        return y * 2

    def f(x):
        return g(x + 1) + 1

    return maybe_compile(T, compiled)(f)(T.ones(2))


def inference_bare_decorator(T, compiled):
    @T.inference_mode
    def g(y):
        return y * 2

    def f(x):
        return g(x + 1) + 1

    return maybe_compile(T, compiled)(f)(T.ones(2))


def inference_with_grad(T, compiled):
    """The block's ops record nothing, the ops after it do; the modes are restored."""
    def f(x):
        y = x * 3
        with T.inference_mode():
            z = y * 2
        return y.sum(), z

    return maybe_compile(T, compiled)(f)(T.ones(2, requires_grad=True))


def inference_nested(T, compiled):
    def f(x):
        y = x + 1
        with T.inference_mode(True):
            with T.inference_mode(False):
                z = y * 2
            w = z + 1
        return w * 3, z.requires_grad, T.is_grad_enabled(), T.is_inference_mode_enabled()

    return maybe_compile(T, compiled)(f)(T.ones(2, requires_grad=True))


def inference_under_no_grad(T, compiled):
    def f(x):
        with T.no_grad():
            with T.inference_mode():
                z = x * 2
        return z + x, T.is_grad_enabled()

    return maybe_compile(T, compiled)(f)(T.ones(2, requires_grad=True))


_INFERENCE = [inference_block, inference_false, inference_decorator, inference_bare_decorator,
              inference_with_grad, inference_nested, inference_under_no_grad]


@pytest.mark.parametrize("prog", _INFERENCE, ids=[p.__name__ for p in _INFERENCE])
def test_inference_mode_blocks_in_the_graph_as_torch(prog):
    """The block is entered and left by graph nodes (a break at `inference_mode()` before,
    and the rest of the frame eager)."""
    _check_as_torch(prog)


def test_inference_mode_keyword_mode_in_the_graph():
    """`inference_mode(mode=False)` too (torch 2.13's capture fails on the keyword)."""
    def f(x):
        with fg.inference_mode(mode=False):
            z = x * 2
        return z + 1, z.requires_grad

    fg._dynamo.reset()
    counters = fg._dynamo.utils.counters
    counters.clear()
    x = fg.ones(2, requires_grad=True)
    got = fg.compile(f, backend="eager")(x)
    compare(plain(list(f(x)), fg), plain(list(got), fg), "mode=False", 0, 0)
    assert sum(counters["graph_break"].values()) == 0


def inference_graph_raises(T, compiled):
    """A graph raising inside the block: the modes go back to what they were."""
    def f(x):
        y = x + 1
        try:
            with T.inference_mode():
                z = (y * 2) @ T.ones(5)
        except RuntimeError:
            z = y
        return z * 3, T.is_grad_enabled(), T.is_inference_mode_enabled()

    return maybe_compile(T, compiled)(f)(T.ones(2, requires_grad=True))


def inference_break_inside(T, compiled):
    def f(x):
        y = x + 1
        with T.inference_mode():
            z = y * 2
            print("inside")
            z = z + 1
        return z * 3, T.is_inference_mode_enabled()

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2)), run(T.ones(3))]


@pytest.mark.parametrize("prog", [inference_graph_raises, inference_break_inside],
                         ids=["graph_raises", "break_inside"])
def test_inference_mode_block_values_as_eager(prog):
    _check_values(prog)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_inference_mode_block_traced_by_aot(backend):
    """A backend that traces the graph traces the block's ops without grad: the gradient
    reaches `x` through the ops outside the block only."""
    def f(x):
        y = x * 3
        with fg.inference_mode():
            z = y * 2
        return (y * y + z).sum(), z + 1

    x = fg.ones(2, requires_grad=True)
    want = f(x)
    want[0].backward()
    grad, x.grad = x.grad, None
    fg._dynamo.reset()
    got = fg.compile(f, backend=backend)(x)
    got[0].backward()
    assert got[0].item() == want[0].item()
    assert got[1].tolist() == want[1].tolist() and not got[1].requires_grad
    assert x.grad.tolist() == grad.tolist()
    assert fg.is_grad_enabled() and not fg.is_inference_mode_enabled()


# ---------------------------------------------------------------- warnings.catch_warnings


def catch_warnings_empty(T, compiled):
    def f(x):
        y = x + 1
        with warnings.catch_warnings():
            z = y * 2
        return z + 1

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2)), run(T.ones(2) * 2)]


def catch_warnings_record(T, compiled):
    def f(x):
        y = x + 1
        with warnings.catch_warnings(record=True) as caught:
            z = y * 2
        return z + len(caught)

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2)), run(T.ones(2) * 2)]


def catch_warnings_filter(T, compiled):
    def f(x):
        y = x + 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            warnings.warn("hidden", stacklevel=1)
            z = y * 2
        return z + 1

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2)), run(T.ones(2) * 2)]


@pytest.mark.parametrize("prog", [catch_warnings_empty, catch_warnings_record],
                         ids=["empty", "record"])
def test_catch_warnings_block_as_torch(prog):
    _check_as_torch(prog)


def test_catch_warnings_calling_warnings_breaks_at_the_block():
    """A block that calls the warnings module breaks at `catch_warnings()` (counted once),
    the frame run eagerly, the ops before the block included (torch's (0, 1))."""
    want, got = observe_compiled(fg, catch_warnings_filter, False), \
        observe_compiled(fg, catch_warnings_filter, True)
    compare(want[0], got[0], "catch_warnings_filter", 1e-6, 1e-6)
    assert got[2] == (0, 1)


def test_catch_warnings_filter_still_applies():
    """The frame given up at `simplefilter` runs the block for real: its warning is
    filtered, and the filters are the caller's again after it."""
    def f(x):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            warnings.warn("hidden", stacklevel=1)
        return x + 1

    fg._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert fg.compile(f, backend="eager")(fg.ones(2)).tolist() == [2.0, 2.0]
        warnings.warn("shown", stacklevel=1)
    assert [str(w.message) for w in caught] == ["shown"]


# ---------------------------------------------------------------- lists from outside


def len_after_append(T, compiled):
    xs = [T.ones(2)]

    def f(t):
        xs.append(t)
        return t * len(xs)

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2)), run(T.ones(2) * 2), len(xs)]


def setitem_outside(T, compiled):
    xs = [T.ones(2), T.zeros(2)]

    def f(t):
        xs[0] = t * 2
        return t + 1

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2)), run(T.ones(2) * 3), xs]


def setitem_then_read(T, compiled):
    xs = [T.ones(2), T.zeros(2)]

    def f(t):
        xs[-1] = t * 2
        return t + xs[0] + xs[1]

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2)), run(T.ones(2) * 3), xs]


_LISTS = [len_after_append, setitem_outside, setitem_then_read]


@pytest.mark.parametrize("prog", _LISTS, ids=[p.__name__ for p in _LISTS])
def test_outside_list_edits_as_torch(prog):
    _check_as_torch(prog)


def setitem_list_held_twice(T, compiled):
    """The list is also held by a tuple of the frame: a break (the tuple would read the old
    item), eager's values."""
    xs = [T.ones(2), T.zeros(2)]

    def f(t):
        pair = (xs, 1)
        xs[0] = t * 2
        return pair[0][0] + 1

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2)), run(T.ones(2) * 3), xs]


def setitem_out_of_range(T, compiled):
    xs = [T.ones(2)]

    def f(t):
        try:
            xs[3] = t
        except IndexError as e:
            return t * 2, str(e)
        return t, ""

    return maybe_compile(T, compiled)(f)(T.ones(2))


@pytest.mark.parametrize("prog", [setitem_list_held_twice, setitem_out_of_range],
                         ids=["held_twice", "out_of_range"])
def test_outside_list_item_assignment_values_as_eager(prog):
    _check_values(prog)


# ---------------------------------------------------------------- classes and generators


def class_counter(T, compiled):
    class Counter:
        calls = 0

        def step(self, x):
            type(self).calls += 1
            return x * type(self).calls

    counter = Counter()

    def f(x):
        return counter.step(x) + 1

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2)), run(T.ones(2)), Counter.calls]


def class_counter_module(T, compiled):
    class Net(T.nn.Module):
        steps = 0

        def forward(self, x):
            type(self).steps += 1
            return x + type(self).steps

    model = Net()
    run = T.compile(model, backend=compiled) if compiled else model
    return [run(T.ones(2)), run(T.ones(2)), Net.steps]


def class_via_instance(T, compiled):
    """A class attribute assigned, then read through an instance, a subclass and the class
    (the subclass given its own afterwards)."""
    class Base:
        n = 1

    class Sub(Base):
        def step(self, x):
            Base.n += 1
            y = x * self.n + Sub.n
            type(self).n = 10
            return y + self.n + Base.n

    sub = Sub()

    def f(x):
        return sub.step(x)

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2)), run(T.ones(2)), Base.n, Sub.n]


def class_store_read_by_new_object(T, compiled):
    class Scaled:
        k = 2

        def __init__(self, v):
            self.v = v

        def get(self):
            return self.v * self.k

    def f(x):
        Scaled.k = Scaled.k + 1
        return Scaled(x).get()

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2)), run(T.ones(2)), Scaled.k]


def yield_from_generator(T, compiled):
    def inner(x):
        yield x + 1
        yield x * 2

    def outer(x):
        yield x
        yield from inner(x)
        yield x - 1

    def f(x):
        return [v.sum() for v in outer(x)]

    return maybe_compile(T, compiled)(f)(T.ones(2))


def yield_from_list(T, compiled):
    def outer(xs):
        yield from xs
        yield from [xs[0] * 3]

    def f(x):
        return T.stack(list(outer([x, x + 1])))

    return maybe_compile(T, compiled)(f)(T.ones(2))


def test_yield_from_gives_the_generators_return_value():
    """`r = yield from g()` is what `g` returned (torch 2.13's compiled code gives None)."""
    def inner(x):
        yield x + 1
        return 3

    def outer(x):
        r = yield from inner(x)
        yield x * r

    def f(x):
        return list(outer(x))

    fg._dynamo.reset()
    counters = fg._dynamo.utils.counters
    counters.clear()
    got = fg.compile(f, backend="eager")(fg.ones(2))
    assert [t.tolist() for t in got] == [t.tolist() for t in f(fg.ones(2))]
    assert sum(counters["graph_break"].values()) == 0


_CLASSES = [class_counter, class_counter_module, class_via_instance,
            class_store_read_by_new_object, yield_from_generator, yield_from_list]


@pytest.mark.parametrize("prog", _CLASSES, ids=[p.__name__ for p in _CLASSES])
def test_class_attributes_and_yield_from_as_torch(prog):
    _check_as_torch(prog)


# ---------------------------------------------------------------- any / all of a genexpr


def any_in_branch(T, compiled):
    def f(x, y):
        if any(t.sum() > 0 for t in [x, y]):
            return x + y
        return x - y

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2), -T.ones(2)), run(-T.ones(2), -T.ones(2))]


def any_after_ops(T, compiled):
    def f(x, y):
        a, b = x * 2, y + 1
        if any(t.sum() > 0 for t in (a, b)):
            return a + b
        return a - b

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2), -T.ones(2)), run(-T.ones(2), -T.ones(2) * 3)]


def any_value(T, compiled):
    def f(x, y):
        a = x * 2
        return a + 1, any(t.sum() > 0 for t in (a, y))

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2), -T.ones(2)), run(-T.ones(2), -T.ones(2) * 3)]


def any_in_callee(T, compiled):
    def positive(ts):
        return any(t.sum() > 0 for t in ts)

    def f(x, y):
        a = x * 2
        if positive([a, y]):
            a = a + 1
        return a * 3

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2), -T.ones(2)), run(-T.ones(2), -T.ones(2) * 3)]


def all_in_module(T, compiled):
    class Gate(T.nn.Module):
        def forward(self, x):
            y = x.relu()
            if all(v > 0 for v in y):
                return y * 2
            return y

    model = Gate()
    run = T.compile(model, backend=compiled) if compiled else model
    return [run(T.ones(2)), run(-T.ones(2))]


_GENEXPRS = [any_in_branch, any_after_ops, any_value, any_in_callee, all_in_module]


@pytest.mark.parametrize("prog", _GENEXPRS, ids=[p.__name__ for p in _GENEXPRS])
def test_any_all_of_tensor_comparisons_as_torch(prog):
    _check_as_torch(prog)


# ---------------------------------------------------------------- inputs sharing memory


def fresh_index_add(T, compiled):
    """A write into a tensor the graph made, while two inputs share memory (a global index
    tensor and a view of it)."""
    idx = T.tensor([0, 1, 1])

    def f(view):
        return T.zeros(2).index_add_(0, idx, T.ones(3)) + view.sum()

    return maybe_compile(T, compiled)(f)(idx[:2])


def fresh_views_written(T, compiled):
    def f(a, b):
        t = a.clone()
        t[:2].add_(b.sum())
        u = T.zeros_like(a)
        u.view(2, 2)[0].fill_(3.0)
        return t + u + b.mean()

    base = T.arange(4.0)
    run = maybe_compile(T, compiled)(f)
    return [run(base, base[1:3]), run(T.ones(4), T.ones(2)), base]


def fresh_copy_written(T, compiled):
    def f(a, b):
        t = T.zeros(4)
        t.copy_(a)
        t.add_(1)
        return t * b.sum()

    base = T.arange(4.0)
    return [maybe_compile(T, compiled)(f)(base, base[1:3]), base]


_FRESH = [fresh_index_add, fresh_views_written, fresh_copy_written]


@pytest.mark.parametrize("prog", _FRESH, ids=[p.__name__ for p in _FRESH])
def test_write_into_fresh_tensor_with_aliasing_inputs_as_torch(prog):
    _check_as_torch(prog)


def aliasing_inputs_written(T, compiled):
    """Inputs sharing memory, one written in place: eager's values through the alias."""
    def f(a, b):
        a.add_(1)
        return b * 2, a.sum()

    run = maybe_compile(T, compiled)(f)
    base, other = T.zeros(4), T.zeros(4)
    return [run(base, base[:2]), run(other, other[1:3]), run(T.zeros(4), T.ones(2)), base,
            other]


def aliasing_inputs_fresh_then_input(T, compiled):
    def f(a, b):
        buf = T.zeros(3).index_add_(0, T.tensor([0, 1, 1]), T.ones(3))
        buf[0] = 5.0
        a.mul_(2)
        return buf + b.sum()

    base = T.ones(4)
    return [maybe_compile(T, compiled)(f)(base, base[2:]), base]


_ALIASING = [aliasing_inputs_written, aliasing_inputs_fresh_then_input, fresh_views_written]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("prog", _ALIASING, ids=[p.__name__ for p in _ALIASING])
def test_aliasing_inputs_written_in_place_values_as_eager(prog, backend):
    _check_values(prog, backend)


# ---------------------------------------------------------------- comprehensions (3.12+)


def comprehension_item(T, compiled):
    def f(x):
        y = x * 2
        s = [float(v.sum()) for v in (y, y + 1)]
        return y * s[0] + s[1]

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2)), run(T.ones(2) * 2)]


def comprehension_in_expression(T, compiled):
    def f(x):
        y = x + 1
        t = y * sum([print(i) or i for i in range(3)])
        return t.relu()

    return maybe_compile(T, compiled)(f)(T.ones(2))


def comprehension_nested(T, compiled):
    def f(x):
        y = x + 1
        d = {k: [print(k) or y * k * j for j in range(2)] for k in range(2)}
        return d[1][1] + d[0][0] - y

    return maybe_compile(T, compiled)(f)(T.ones(2))


def comprehension_in_loop(T, compiled):
    def f(x):
        for i in range(2):
            x = x + sum([print(i) or v for v in (x, x)])
        return x

    return maybe_compile(T, compiled)(f)(T.ones(2))


def comprehension_shadowing(T, compiled):
    def f(x):
        v = x * 5
        z = [print("a") or v * 3 for v in (x, x + 1)]
        return v + z[0] + z[1]

    return maybe_compile(T, compiled)(f)(T.ones(2))


def comprehension_first(T, compiled):
    def f(x):
        z = [print("a") or v * 3 for v in (x, x + 1)]
        return z[0] + z[1]

    run = maybe_compile(T, compiled)(f)
    return [run(T.ones(2)), run(T.ones(2))]


_COMPREHENSIONS = [comprehension_item, comprehension_in_expression, comprehension_nested,
                   comprehension_in_loop, comprehension_shadowing, comprehension_first]


@pytest.mark.parametrize("prog", _COMPREHENSIONS, ids=[p.__name__ for p in _COMPREHENSIONS])
def test_break_in_comprehension_resumes_after_it_as_torch(prog):
    """The same counts on every Python: 3.12+ inline comprehensions into the frame, where a
    break inside one ran the rest of the frame eagerly."""
    _check_as_torch(prog)


def comprehension_raises(T, compiled):
    """A comprehension run for real after its break raises into the frame's handler."""
    def f(x):
        y = x + 1
        try:
            z = [print("a") or (y / 0 if i else y.sum().item()) for i in range(2)] + [1 // 0]
        except ZeroDivisionError:
            z = [y]
        return z[0] * 2

    return maybe_compile(T, compiled)(f)(T.ones(2))


def test_comprehension_raising_values_as_eager():
    _check_values(comprehension_raises)


# ---------------------------------------------------------------- packed sequences


def _set_parameters(T, module):
    """Parameters both libraries share (values, not seeds: their streams differ)."""
    for p in module.parameters():
        p.data = T.linspace(-0.5, 0.5, p.numel()).reshape(p.shape)
    return module


def packed_gru(T, compiled):
    """A GRU from outside the function given a packed sequence, unpacked after it."""
    nn = T.nn
    gru = _set_parameters(T, nn.GRU(3, 4, batch_first=True))
    x = T.linspace(-1, 1, 2 * 5 * 3).reshape(2, 5, 3)

    def f(x, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                                   enforce_sorted=False)
        out, h = gru(packed)
        padded, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        return padded.sum(1), h

    return maybe_compile(T, compiled)(f)(x, T.tensor([5, 3]))


def packed_gru_module(T, compiled):
    """A module's own GRU given a packed sequence (a submodule: torch counts no break at
    the layer)."""
    nn = T.nn

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = nn.GRU(3, 4, batch_first=True)

        def forward(self, x, lengths):
            packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                                       enforce_sorted=False)
            _, h = self.gru(packed)
            return h[-1] * 2

    model = _set_parameters(T, Encoder())
    run = T.compile(model, backend=compiled) if compiled else model
    x = T.linspace(-1, 1, 2 * 5 * 3).reshape(2, 5, 3)
    return [run(x, T.tensor([5, 3])), run(x * 2, T.tensor([2, 4]))]


_TORCH_COUNTS.update({"packed_gru": (0, 2), "packed_gru_module": (0, 1)})


@pytest.mark.parametrize("prog", [packed_gru, packed_gru_module], ids=["global", "submodule"])
def test_packed_recurrent_layer_breaks_as_torch(prog):
    """The rest of the frame runs eagerly after a break inside the layer (it broke again at
    the unpacking): torch's counts, eager's values."""
    _check_as_torch(prog)
