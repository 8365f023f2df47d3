"""Compiled programs against PyTorch eager, for what a fourth sweep of real programs found:

1. `int(s)` of a `.item()` float that became dynamic (a second value at the same place) is
   a graph break, not an exception of the program: the frame's locals survive it (they were
   dropped, and the next line read an unbound local), and an `except` around it does not
   catch it.
2. `scaled_dot_product_attention` keeps eager's output layout under `inductor` (it was
   decomposed into matrix products, whose result is row-major, where eager's kernel follows
   the query's layout): the CPU flash op stays whole, as in PyTorch's inductor.
3. A named tuple from outside the frame (the `PackedSequence` an LSTM gets) is guarded by
   its class and items, not by identity: a second call with new data of the same shapes
   reuses the graphs (it recompiled on every call).
4. Half-precision ops under `inductor` are not decomposed: a decomposition rounds every
   intermediate to the half type (float16 variances overflowed to inf, bfloat16 means were
   one unit off), eager's kernels round once.
5. Returning a function made in the frame (a closure over a graph value) runs the segment
   eagerly instead of raising the compiler's internal error.
6. `p is q` of one container passed twice (or a global) is decided on the real objects.
7. Under fullgraph=True a float `.item()` is a graph node, as PyTorch 2.13 captures it there;
   a branch on it raises PyTorch's UserError (it raised a graph break's Unsupported).

Graphs run through `Counter` (the run's FUSEGRAD_TEST_BACKEND), and the backends named here.
"""

import numpy as np
import pytest
import torch
from compile_support import Counter

import fusegrad

BACKENDS = [None, "aot_eager", "inductor"]  # None: the run's backend through Counter


def _counter(backend) -> Counter:
    return Counter() if backend is None else Counter(backend)


def compiled(fn, counter: Counter, **kwargs):
    fusegrad._dynamo.reset()
    return fusegrad.compile(fn, backend=counter, **kwargs)


def _array(*shape, seed=0):
    return np.random.RandomState(seed).randn(*shape).astype(np.float32)


def _close(got, want, rtol=1e-5, atol=1e-5) -> None:
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=rtol,
                               atol=atol)


# ---------------------------------------------------------------- 1. dynamic float breaks


def _item_conversions(T, x):
    s = x.max().item()
    return x / s, int(s), float(s) + 1, round(s, 1)


def _item_conversion_in_try(T, x):
    s = x.sum().item()
    try:
        n = int(s)
    except Exception:  # noqa: BLE001 - the program's handler must not see a graph break
        n = -1
    return x * n, s * 2


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("prog", [_item_conversions, _item_conversion_in_try])
def test_dynamic_item_float_conversion_keeps_locals(prog, backend):
    f = compiled(lambda x: prog(fusegrad, x), _counter(backend))
    # A third and fourth value: the float is a graph input by then.
    for scale in (1.0, 3.0, 5.0, 7.0):
        data = np.arange(1, 5, dtype=np.float32) * scale
        want = prog(torch, torch.tensor(data))
        got = f(fusegrad.tensor(data))
        _close(got[0], want[0])
        assert got[1:] == want[1:]


# ---------------------------------------------------------------- 2. attention layout


def _attention(T, q, k, v):
    F = T.nn.functional
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    b = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                       v.transpose(1, 2))
    return a, b, b.stride(), b.is_contiguous()


@pytest.mark.parametrize("backend", BACKENDS)
def test_attention_output_layout_as_eager(backend):
    def inputs(T):
        return [T.tensor(_array(2, 3, 4, 5, seed=i), requires_grad=True) for i in range(3)]

    tq = inputs(torch)
    want = _attention(torch, *tq)
    (want[0].sum() + (want[1] * 2).sum()).backward()
    fq = inputs(fusegrad)
    got = compiled(lambda *a: _attention(fusegrad, *a), _counter(backend))(*fq)
    (got[0].sum() + (got[1] * 2).sum()).backward()
    for g, w in zip(got[:2], want[:2]):
        assert tuple(g.stride()) == tuple(w.stride())
        _close(g, w, rtol=1e-4)
    assert got[2:] == want[2:]
    for g, w in zip(fq, tq):
        _close(g.grad, w.grad, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- 3. named tuples


def _packed_lstm(T, m, x, lengths):
    rnn = T.nn.utils.rnn
    p = rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    out, (h, _) = m(p)
    o, n = rnn.pad_packed_sequence(out, batch_first=True)
    return o, h, n


@pytest.mark.parametrize("backend", BACKENDS)
def test_packed_lstm_reuses_its_graphs(backend):
    models = []
    for T in (torch, fusegrad):
        T.manual_seed(0)
        m = T.nn.LSTM(3, 4, batch_first=True)
        models.append(m)
    with fusegrad.no_grad():  # the same weights in both
        for tp, fp in zip(models[0].parameters(), models[1].parameters()):
            fp.copy_(fusegrad.tensor(tp.detach().numpy()))
    counter = _counter(backend)
    f = compiled(lambda x, n: _packed_lstm(fusegrad, models[1], x, n), counter)
    graphs = None
    for seed in range(3):
        data, lengths = _array(3, 5, 3, seed=seed), [5, 3, 2]
        want = _packed_lstm(torch, models[0], torch.tensor(data), torch.tensor(lengths))
        got = f(fusegrad.tensor(data), fusegrad.tensor(lengths))
        for g, w in zip(got, want):
            _close(g, w)
        if graphs is None:
            graphs = counter.graphs
        assert counter.graphs == graphs  # new data of the same shapes: no new graph


def _make_point_classes():
    import collections

    Point = collections.namedtuple("Point", "x y")

    class Scaled(Point):
        def norm(self):
            return self.x * self.x + self.y * self.y

        @property
        def total(self):
            return self.x + self.y

    return Point, Scaled


def test_named_tuple_arguments_are_guarded_by_contents():
    Point, Scaled = _make_point_classes()
    counter = Counter()

    def f(p, q):
        return p.x + p.y, q.norm(), q.total, p._replace(x=p.y).x, q[1], len(p)

    cf = compiled(f, counter)
    for i in range(3):
        x = np.full(2, float(i), np.float32)
        got = cf(Point(fusegrad.tensor(x), fusegrad.ones(2)),
                 Scaled(fusegrad.tensor(x), 2))
        want = f(Point(torch.tensor(x), torch.ones(2)), Scaled(torch.tensor(x), 2))
        for g, w in zip(got, want):
            if isinstance(w, torch.Tensor):
                _close(g, w)
            else:
                assert g == w
    assert counter.graphs == 1  # new tuples of the same kind: the first graph
    # Another class, or another length of a plain value, recompiles.
    cf(Scaled(fusegrad.ones(2), fusegrad.ones(2)), Scaled(fusegrad.ones(2), 3))
    assert counter.graphs == 2


# ---------------------------------------------------------------- 4. half precision


def _half_ops(T, a):
    F = T.nn.functional
    return (a.mean(), a.mean(1), a.var(), a.std(1), T.var_mean(a, 1)[0],
            F.mse_loss(a, a.flip(1)), a.lerp(a.flip(1), 0.3), a.addcmul(a, a, value=0.01))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_ops_as_eager(dtype, backend):
    data = _array(4, 37) * 30 + 100  # float16 squares of deviations overflow when rounded
    ta = torch.tensor(data).to(getattr(torch, dtype))
    fa = fusegrad.tensor(data).to(getattr(fusegrad, dtype))
    want = _half_ops(torch, ta)
    eager = _half_ops(fusegrad, fa)
    got = compiled(lambda a: _half_ops(fusegrad, a), Counter(backend))(fa)
    for g, e, w in zip(got, eager, want):
        assert g.dtype == e.dtype and tuple(g.shape) == tuple(w.shape)
        assert np.array_equal(g.float().numpy(), e.float().numpy())  # eager's roundings
        np.testing.assert_allclose(g.float().numpy(), w.float().numpy(), rtol=1e-2)


# ---------------------------------------------------------------- 5. a function returned


def _returns_closure(T, x):
    y = x * 2
    return lambda z: z + y, y.sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_returning_a_function_made_in_the_frame(backend):
    # A function made while translating cannot be rebuilt from graph outputs: the segment
    # runs eagerly (it raised fusegrad's internal Unsupported to the caller).
    want_fn, want_sum = _returns_closure(torch, torch.ones(2))
    f = compiled(lambda x: _returns_closure(fusegrad, x), _counter(backend))
    for _ in range(2):
        got_fn, got_sum = f(fusegrad.ones(2))
        _close(got_fn(fusegrad.ones(2)), want_fn(torch.ones(2)))
        _close(got_sum, want_sum)


# ---------------------------------------------------------------- 6. identity of containers

_DEFAULT = (1, 2)


def _identity(T, p, q):
    return p is q, p is not q, p is _DEFAULT, p == q


@pytest.mark.parametrize("backend", BACKENDS)
def test_identity_of_containers_from_the_frame(backend):
    # `p is q` of one list (tuple, named tuple) passed twice: the real objects decide (each
    # read was a variable of its own, so `is` answered False).
    import collections

    Point = collections.namedtuple("Point", "x y")
    f = compiled(lambda p, q: _identity(fusegrad, p, q), _counter(backend))
    for make in (list, tuple, lambda items: Point(*items)):
        a, b = make([1, 2]), make([1, 2])
        for p, q in ((a, a), (a, b), (_DEFAULT, _DEFAULT), (a, a)):
            assert f(p, q) == _identity(torch, p, q)


# ---------------------------------------------------------------- 7. fullgraph and .item()


def _item_arithmetic(T, x):
    s = x.sum().item()
    return x * (s * 2 - 1) / s + s, -s


def _item_branch(T, x):
    s = x.sum().item()
    if s > 2:
        return x * s
    return x


@pytest.mark.parametrize("backend", BACKENDS)
def test_fullgraph_captures_a_float_item(backend):
    # PyTorch 2.13 (capture_scalar_outputs off) captures `.item()` under fullgraph=True: the
    # value is a node of the graph, so arithmetic on it stays in one graph, new every call.
    f = compiled(lambda x: _item_arithmetic(fusegrad, x), _counter(backend), fullgraph=True)
    for k in (1.0, 2.0, 5.0):
        data = np.arange(1, 4, dtype=np.float32) * k
        got, want = f(fusegrad.tensor(data)), _item_arithmetic(torch, torch.tensor(data))
        _close(got[0], want[0])
        assert got[1] == want[1]


def test_fullgraph_branch_on_an_item_raises_as_pytorch():
    torch._dynamo.reset()
    with pytest.raises(Exception) as want:
        torch.compile(lambda x: _item_branch(torch, x), fullgraph=True,
                      backend="eager")(torch.ones(3))
    with pytest.raises(Exception) as got:
        compiled(lambda x: _item_branch(fusegrad, x), Counter(),
                 fullgraph=True)(fusegrad.ones(3))
    assert type(got.value).__name__ == type(want.value).__name__ == "UserError"
    prefix = "Consider annotating your code using torch._check*(). Could not guard on " \
        "data-dependent expression"
    assert str(got.value).startswith(prefix) and str(want.value).startswith(prefix)
    # Without fullgraph it is a graph break, as PyTorch's.
    f = compiled(lambda x: _item_branch(fusegrad, x), Counter())
    _close(f(fusegrad.ones(3)), _item_branch(torch, torch.ones(3)))
