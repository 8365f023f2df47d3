"""Capture gaps closed where PyTorch's Dynamo captures one graph, each compiled result
against eager fusegrad, with a guard test per item (the thing changed between calls, the
result still eager's):

1. Symbolic sizes in the size tuples of shape ops (`unflatten(0, (x.shape[0], -1))` under
   `dynamic=True`, as MultiheadAttention's packed projection splits it).
2. Named tuples, `functools.partial` and `dict(...)` of graph values built in compiled code.
3. A compiled function called from compiled code: its own Python is inlined.

Graphs run through `Counter` (the run's FUSEGRAD_TEST_BACKEND).
"""

import collections
import functools
import typing

import numpy as np
import pytest
from compile_support import Counter, tolerances

import fusegrad
import fusegrad.nn as nn


def compiled(fn, **kwargs):
    fusegrad._dynamo.reset()
    counter = Counter()
    return fusegrad.compile(fn, backend=counter, **kwargs), counter


def same(expected, got):
    """Compiled `got` equals eager `expected` (tensors, containers, plain values)."""
    if isinstance(expected, fusegrad.Tensor):
        assert isinstance(got, fusegrad.Tensor)
        assert got.shape == expected.shape and got.dtype == expected.dtype
        np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(),
                                   **tolerances(expected.dtype))
    elif isinstance(expected, (tuple, list)):
        assert type(got) is type(expected) and len(got) == len(expected)
        for e, g in zip(expected, got):
            same(e, g)
    elif isinstance(expected, dict):
        assert type(got) is dict and list(got) == list(expected)
        for k in expected:
            same(expected[k], got[k])
    else:
        assert got == expected


def graphs_and_breaks(fn, *args):
    out = fusegrad._dynamo.explain(fn)(*args)
    return out.graph_count, [r.reason for r in out.break_reasons]


# ---------------------------------------------------------------- 1. symbolic sizes

SHAPE_OPS = {
    "unflatten_tuple": lambda x: x.flatten(0, 1).unflatten(0, (x.shape[0], -1)),
    "unflatten_list": lambda x: x.flatten(0, 1).unflatten(0, [x.shape[0], -1]),
    "unflatten_function": lambda x: fusegrad.unflatten(x.flatten(0, 1), 0, (x.shape[0], -1)),
    "unflatten_keywords": lambda x: x.flatten(1).unflatten(dim=-1, sizes=(x.shape[1], 3)),
    "unflatten_shape_slice": lambda x: x.flatten(0, 1).unflatten(0, x.shape[:2]),
    "view": lambda x: x.view(x.shape[0], -1),
    "view_tuple": lambda x: x.view((x.shape[0], -1)),
    "reshape_list": lambda x: x.reshape([x.shape[0], -1]),
    "expand": lambda x: x[:, :1].expand(x.shape[0], x.shape[1], -1),
    "expand_tuple": lambda x: x[:, :1].expand((x.shape[0], x.shape[1], x.shape[2])),
    "new_zeros": lambda x: x.new_zeros((x.shape[0], 2)) + 1,
    "new_ones_list": lambda x: x.new_ones([x.shape[0], x.shape[1]]),
    "zeros": lambda x: fusegrad.zeros(x.shape[0], 2) + 1,
    "full": lambda x: fusegrad.full((x.shape[0], 2), 2.0),
}


@pytest.mark.parametrize("name", sorted(SHAPE_OPS))
def test_shape_ops_take_symbolic_sizes_in_one_graph(name):
    op = SHAPE_OPS[name]

    def f(x):
        return op(x) * 2

    c, counter = compiled(f, dynamic=True)
    for b in (2, 4, 6):
        x = fusegrad.randn(b, 5, 3)
        same(f(x), c(x))
    assert counter.graphs == 1


def test_unflatten_symbolic_sizes_keep_the_divisibility_guard():
    """`unflatten(1, (B, -1))` of a dim of 6 holds for B = 2 and 3, not 4: the graph's
    assumption is guarded, and the size that does not divide raises eager's error."""

    def f(x):
        return x.unflatten(1, (x.shape[0], -1)) + 1

    c, counter = compiled(f, dynamic=True)
    for b in (2, 3):
        x = fusegrad.randn(b, 6)
        same(f(x), c(x))
    x = fusegrad.randn(4, 6)
    with pytest.raises(RuntimeError) as eager:
        f(x)
    with pytest.raises(RuntimeError) as got:
        c(x)
    assert str(got.value) == str(eager.value)


def test_transformer_encoder_layer_dynamic_is_one_graph():
    fusegrad.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True).eval()
    c, counter = compiled(layer, dynamic=True)
    for b, t in [(3, 7), (4, 9), (2, 5)]:
        x = fusegrad.randn(b, t, 16)
        pad = fusegrad.zeros(b, t, dtype=fusegrad.bool)
        pad[0, -1] = True
        same(layer(x, src_key_padding_mask=pad), c(x, src_key_padding_mask=pad))
    assert counter.graphs == 1


# ---------------------------------------------------------------- 2. named tuples

Pair = collections.namedtuple("Pair", "a b")
Tri = collections.namedtuple("Tri", "a b c", defaults=(2.0, 3.0))


class Point(typing.NamedTuple):
    x: object
    y: float = 5.0

    def total(self):
        return self.x + self.y

    @property
    def square(self):
        return self.x * self.x


class Scaled(Pair):
    def twice(self):
        return self.a * 2


def test_namedtuple_built_in_one_graph():
    def f(x):
        p = Pair(x, x + 1)
        q = Pair(b=x * 2, a=p.b)
        first, second = q
        return (p.b + first + second + Tri(x).b + Tri(x, c=x).c,
                Point(x).total() + Point(x, 1.0).square,
                Scaled(x, 1).twice(), str(Pair(1, 2)), Pair(x, 3)._fields, p)

    x = fusegrad.randn(3)
    c, counter = compiled(f, fullgraph=True)
    expected, got = f(x), c(x)
    same(expected, got)
    assert type(got[-1]) is Pair
    assert counter.graphs == 1


def test_namedtuple_bad_arguments_raise_eagers_error():
    def f(x):
        return Pair(x)

    c, _ = compiled(f)
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        c(fusegrad.ones(2))


def test_namedtuple_live_across_a_graph_break():
    def f(x):
        p = Point(x + 1)
        fusegrad._dynamo.graph_break()
        return p.total(), p

    x = fusegrad.randn(3)
    c, _ = compiled(f)
    expected, got = f(x), c(x)
    same(expected, got)
    assert type(got[1]) is Point


def test_namedtuple_guards_follow_the_class():
    """A rebound class, a changed default and a replaced method each change the result."""
    global Pair

    def f(x):
        return Pair(x, x + 1).b * Tri(x).c + Scaled(x, 0).twice()

    x = fusegrad.randn(3)
    saved = (Pair, Tri.__new__.__defaults__, Scaled.twice)
    c, _ = compiled(f)
    try:
        same(f(x), c(x))
        Pair = collections.namedtuple("Pair", "b a")  # the fields the other way round
        same(f(x), c(x))
        Tri.__new__.__defaults__ = (2.0, -7.0)
        same(f(x), c(x))
        Scaled.twice = lambda self: self.a * 5
        same(f(x), c(x))
    finally:
        Pair, Tri.__new__.__defaults__, Scaled.twice = saved


# ---------------------------------------------------------------- 2. functools.partial

Clamp = functools.partial(fusegrad.clamp, min=-0.5)


def test_partial_built_in_one_graph():
    def f(x):
        add = functools.partial(fusegrad.add, x)
        both = functools.partial(functools.partial(fusegrad.clamp, min=-0.5), max=0.5)
        scale = functools.partial(lambda a, k: a * k, k=3)
        return (functools.partial(fusegrad.clamp, min=-0.5)(x), add(1), add(x, alpha=2),
                both(x), both.func is fusegrad.clamp, both.args, scale(x), Clamp(x))

    x = fusegrad.linspace(-1, 1, 5)
    c, counter = compiled(f, fullgraph=True)
    same(f(x), c(x))
    assert counter.graphs == 1


def test_partial_live_across_a_graph_break():
    def f(x):
        g = functools.partial(fusegrad.mul, x + 1)
        fusegrad._dynamo.graph_break()
        return g(2), g

    x = fusegrad.randn(3)
    c, _ = compiled(f)
    expected, got = f(x), c(x)
    same(expected[0], got[0])
    assert isinstance(got[1], functools.partial)
    same(expected[1](3), got[1](3))


def test_partial_guards_follow_its_function_and_arguments():
    global Clamp

    def f(x):
        return Clamp(x) + 1

    x = fusegrad.linspace(-1, 1, 5)
    saved = Clamp
    c, _ = compiled(f)
    try:
        same(f(x), c(x))
        Clamp.keywords["min"] = 0.25  # the same partial, changed in place
        same(f(x), c(x))
        Clamp = functools.partial(fusegrad.clamp, max=0.1)
        same(f(x), c(x))
        Clamp = functools.partial(fusegrad.mul, 3.0)
        same(f(x), c(x))
    finally:
        saved.keywords["min"] = -0.5
        Clamp = saved


# ---------------------------------------------------------------- 2. dict()


def test_dict_of_graph_values_in_one_graph():
    def f(d, x):
        copy = dict(d)
        copy["y"] = copy["x"] + 1  # a copy: `d` stays as it is
        return (copy, d, dict(d, z=x)["z"] * 2, dict(a=x, b=x + 1),
                dict([("a", x), ("b", 2)]), dict(zip(["a", "b"], [x, x * 2])))

    x = fusegrad.randn(3)
    c, counter = compiled(f, fullgraph=True)
    d = {"x": x}
    expected, got = f(d, x), c(d, x)
    same(expected, got)
    assert list(d) == ["x"]
    assert counter.graphs == 1


def test_dict_copy_guards_follow_the_keys():
    def f(d):
        return dict(d)

    x = fusegrad.randn(3)
    c, _ = compiled(f)
    for d in ({"x": x}, {"x": x, "w": x * 2}, {"w": x, "x": x + 1}, {"x": 1.5}):
        same(f(d), c(d))


# ---------------------------------------------------------------- 3. nested compile


@fusegrad.compile(backend="eager")
def inner(x):
    return x.relu() * 2


def test_compiled_function_called_from_compiled_code_is_inlined():
    def outer(x):
        y = inner(x) + 1
        return inner(y - 3).sum()

    x = fusegrad.randn(4, 3)
    c, counter = compiled(outer, fullgraph=True)
    same(outer(x), c(x))
    assert counter.graphs == 1
    assert graphs_and_breaks(outer, x) == (1, [])


def test_nested_compiled_function_guards_follow_the_inner_function():
    global inner

    def outer(x):
        return inner(x) + 1

    x = fusegrad.randn(4, 3)
    saved = inner
    c, counter = compiled(outer)
    try:
        same(outer(x), c(x))
        inner = fusegrad.compile(lambda t: t.sigmoid(), backend="eager")
        same(outer(x), c(x))
        inner = lambda t: t - 4  # noqa: E731 (a plain function now)
        same(outer(x), c(x))
    finally:
        inner = saved


class Helped(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = 2.0

    @fusegrad.compile(backend="eager")
    def helper(self, x):  # read through the instance: a new partial on every read
        return x * self.k

    def forward(self, x):
        return self.helper(x) + 1, self.helper is self.helper


def test_compiled_method_called_from_compiled_forward_is_one_graph():
    m = Helped()
    c, counter = compiled(m)
    for k in (2.0, 2.0, 3.0):
        m.k = k
        x = fusegrad.randn(3)
        same(m(x), c(x))
    assert counter.graphs <= 2  # the first graph, and one after `k` changed


def test_nested_compiled_function_with_a_break_runs_on_its_own():
    calls = []

    @fusegrad.compile(backend="eager")
    def breaks(x):
        calls.append(1)
        fusegrad._dynamo.graph_break()
        return x + 1

    def outer(x):
        return breaks(x * 2) * 3

    x = fusegrad.randn(3)
    c, _ = compiled(outer)
    same(outer(x), c(x))
    assert len(calls) == 2


# ---------------------------------------------------------------- warnings.warn


def test_warn_at_a_graph_break_names_the_users_line():
    import warnings

    def f(x):
        warnings.warn("user warning in forward")  # noqa: B028 (the default level)
        return x * 2

    def g(x):
        warnings.warn(DeprecationWarning("old"))  # noqa: B028 (the default level)
        warnings.warn("far", UserWarning, stacklevel=1)
        return x + 1

    def seen(fn, x):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            out = fn(x)
        return out, [(w.category, str(w.message), w.filename, w.lineno) for w in rec]

    x = fusegrad.randn(3)
    for fn in (f, g):
        c, _ = compiled(fn)
        expected, expected_warnings = seen(fn, x)
        for _ in range(2):
            got, got_warnings = seen(c, x)
            same(expected, got)
            assert got_warnings == expected_warnings
            assert got_warnings[0][2] == __file__


# ---------------------------------------------------------------- sizes into pad and roll


def _pad_and_roll(x):
    b = x.shape[0]
    return fusegrad.nn.functional.pad(x, (0, b)) * 2, x.roll(b, 0) + 1


def test_pad_and_roll_by_a_traced_size_stay_symbolic():
    """A size handed to `F.pad` or `roll` under dynamic shapes is not fixed to one value:
    one graph serves every batch (each was a recompile)."""
    c, counter = compiled(_pad_and_roll, dynamic=True)
    for n in (3, 4, 5, 6):
        x = fusegrad.randn(n, 4)
        same(_pad_and_roll(x), c(x))
    assert counter.graphs == 1


def _unused_draws(x):
    fusegrad.rand(3)  # nothing reads these draws ...
    fusegrad.nn.functional.dropout(x, 0.5, training=True)
    fusegrad.nn.functional.gumbel_softmax(x, tau=0.5, hard=True)
    x.new_empty(4).exponential_()
    return x.shape, x * 2  # ... but the generator must end where eager leaves it


def test_random_draws_nothing_reads_stay_in_the_graph():
    """Dead-code elimination keeps random draws: the draws after the call see the generator
    where eager leaves it (a dropped `rand` made every later draw differ)."""
    x = fusegrad.ones(2, 8)
    fusegrad.manual_seed(0)
    want = (_unused_draws(x)[1], fusegrad.rand(4))
    fn, counter = compiled(_unused_draws)
    for _ in range(2):
        fusegrad.manual_seed(0)
        got = (fn(x)[1], fusegrad.rand(4))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.numpy())
    assert counter.graphs == 1


def _dict_methods(x):
    out = {"a": x.relu(), "b": x.sigmoid()}
    out.update(c=out["a"] + out["b"])
    out.update({"d": x * 2}, e=x - 1)
    out.update([("f", x + 3)])
    g = out.setdefault("g", x.exp())
    h = out.setdefault("a", None)
    p = out.pop("b")
    q = out.pop("missing", x.cos())
    return {k: v.sum() for k, v in out.items()}, g, h, p, q


def _pop_missing(x):
    d = {"a": x + 1}
    return d.pop("b")


def test_methods_of_a_dict_made_in_the_frame_stay_in_the_graph():
    """`update` (a dict, pairs, keywords), `setdefault` and `pop` on a dict the function
    made: one graph, eager's keys in eager's order and values; a missing key's KeyError is
    eager's (a graph break runs the `pop`)."""
    x = fusegrad.randn(3)
    fn, counter = compiled(_dict_methods)
    want, got = _dict_methods(x), fn(x)
    assert list(got[0]) == list(want[0]) and counter.graphs == 1
    for k in want[0]:
        np.testing.assert_allclose(got[0][k].numpy(), want[0][k].numpy(), **tolerances(x.dtype))
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_allclose(g.numpy(), w.numpy(), **tolerances(x.dtype))
    fn, _ = compiled(_pop_missing)
    with pytest.raises(KeyError, match="'b'"):
        fn(x)
