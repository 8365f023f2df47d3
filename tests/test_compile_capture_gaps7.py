"""Capture where torch.compile (2.13, backend="eager") keeps more than fusegrad did:

- `int()` (`math.trunc`, `floor`, `ceil`, `round`) of a dynamic float: an integer symbol
  computed from the float's source per call, not a graph break (torch's `sym_int`);
- a graph break inside a loop of a module's forward (a layer's `item()`): the eager rest is
  guarded, so a later call that fails its guards (`m.eval()` under `no_grad`) is captured;
- `torch.cond` whose branches close over a module or tensors of the frame: each branch a
  graph of its own over the operands and the lifted values;
- a `with` block whose entry breaks (a context capture does not understand, a class's
  `__enter__` that breaks): the frame from its resume point runs eagerly, as torch's;
- `compile(Block.forward)` called with each instance: one graph (the module followed by
  type from the first capture); a module's hook guarded by its code where it has no closure;
- `compiler.disable(fn, recursive=False)`: the functions `fn` calls are still captured.

Each case compares compiled fusegrad with eager fusegrad (values, gradients) under the
eager and aot_eager backends, and its graph and break counts with torch.compile's."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import contextlib  # noqa: E402
import io  # noqa: E402
import math  # noqa: E402
import threading  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from program_support import compiler_fallbacks  # noqa: E402

import fusegrad as fg  # noqa: E402


def _counts(lib, fn):
    """(unique graphs, graph breaks) of `fn()` compiled under `lib` from a reset."""
    counters = lib._dynamo.utils.counters
    lib._dynamo.reset()
    counters.clear()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        fn()
    return counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())


def _data(T, seed, *shape, grad=True):
    rng = np.random.default_rng(seed)
    return T.tensor(rng.standard_normal(shape), dtype=T.float32, requires_grad=grad)


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a.detach().numpy()), np.asarray(b.detach().numpy()),
                               rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- int() of a dynamic float


def _keep_top(x, r):
    keep = int((1 - r) * x.shape[0])
    return x[:keep].sum() * 2


def _conversions(x, r):
    a = math.floor(r * 10)
    b = math.ceil(r * 10)
    c = round(r * 10)
    return x[:a].sum() + x[:b].mean() + x[:c].sum() * 0.5 + math.trunc(r * 4)


_RATES = (0.0, 0.125, 0.25, 0.5, 0.3, 0.9, 1.0, 0.125)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_int_of_a_dynamic_float_matches_eager(backend):
    fg._dynamo.reset()
    run = fg.compile(_keep_top, backend=backend)
    for r in _RATES:
        x, y = _data(fg, 1, 8), _data(fg, 1, 8)
        want, got = _keep_top(x, r), run(y, r)
        _close(want, got)
        want.backward()
        got.backward()
        _close(x.grad, y.grad)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_floor_ceil_round_of_a_dynamic_float(backend):
    fg._dynamo.reset()
    run = fg.compile(_conversions, backend=backend)
    for r in (0.25, 0.35, 0.55, 0.65, 0.05, 0.45, 0.75):
        x = _data(fg, 2, 12, grad=False)
        _close(_conversions(x, r), run(x, r))


def test_int_of_a_dynamic_float_graph_counts_match_torch():
    def calls(T):
        run = T.compile(_keep_top, backend="eager")
        for r in (0.0, 0.125, 0.25, 0.5, 0.3):
            run(T.arange(8.0), r)
    # the first value static, then one graph for every rate (torch: `sym_int` in its graph)
    assert _counts(fg, lambda: calls(fg)) == _counts(torch, lambda: calls(torch)) == (2, 0)


def test_int_of_a_nan_rate_raises_as_eager():
    fg._dynamo.reset()
    run = fg.compile(_keep_top, backend="eager")
    for r in (0.0, 0.5):
        run(fg.arange(8.0), r)
    with pytest.raises(ValueError, match="cannot convert float NaN to integer"):
        _keep_top(fg.arange(8.0), float("nan"))
    with pytest.raises(ValueError, match="cannot convert float NaN to integer"):
        run(fg.arange(8.0), float("nan"))
    with pytest.raises(OverflowError):
        run(fg.arange(8.0), float("-inf"))
    assert run(fg.arange(8.0), 0.75).item() == _keep_top(fg.arange(8.0), 0.75).item()


# ---------------------------------------------------------------- a break in a module's loop


def _bn_train_then_eval(T, compiled):
    nn = T.nn
    T.manual_seed(0)
    m = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3, momentum=None), nn.Linear(3, 2))
    run = T.compile(m, backend=compiled) if compiled else m
    x = T.arange(8.0).reshape(4, 2)
    outs = []
    for _ in range(2):
        out = run(x)
        out.sum().backward()
        outs.append(out.detach())
    m.eval()
    with T.no_grad():
        outs.append(run(x))
        outs.append(run(x * 2))
    return outs, m[0].weight.grad, m[1].running_mean, m[1].num_batches_tracked


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_loop_break_then_eval_matches_eager(backend):
    want = _bn_train_then_eval(fg, None)
    fg._dynamo.reset()
    with compiler_fallbacks() as fallbacks:
        got = _bn_train_then_eval(fg, backend)
    for a, b in zip(want[0] + list(want[1:]), got[0] + list(got[1:])):
        _close(a, b)
    assert not fallbacks


def test_loop_break_then_eval_counts_match_torch():
    # one break in training (the running average's `float()`), then eval captured whole
    assert _counts(fg, lambda: _bn_train_then_eval(fg, "eager")) == \
        _counts(torch, lambda: _bn_train_then_eval(torch, "eager")) == (1, 1)


def test_loop_break_in_the_frame_itself_stays_eager():
    """A frame whose own loop breaks runs eagerly for good, as torch skips it: a new input
    shape captures nothing."""
    def f(x):
        for _ in range(2):
            x = x + 1
            print("step")
        return x * 2

    def calls(T):
        run = T.compile(f, backend="eager")
        for n in (2, 3, 4):
            run(T.ones(n))
    assert _counts(fg, lambda: calls(fg))[0] == _counts(torch, lambda: calls(torch))[0] == 0


# ---------------------------------------------------------------- cond over a module


class _Gated(fg.nn.Module):
    def __init__(self):
        super().__init__()
        self.pos = fg.nn.Linear(4, 4)
        self.neg = fg.nn.Linear(4, 4)

    def forward(self, x):
        shift = x.mean(0) * 2

        def if_pos(x):
            return fg.nn.functional.relu(self.pos(x)) + shift

        def if_neg(x):
            return fg.sigmoid(self.neg(x)) - shift

        return fg.cond(x.sum() > 0, if_pos, if_neg, (x,))


def _gated_both(compiled):
    fg.manual_seed(3)
    m = _Gated()
    run = fg.compile(m, backend=compiled) if compiled else m
    outs = []
    for shift in (1.5, -1.5, 2.0):
        x = _data(fg, 4, 3, 4)
        x = (x + shift).detach().requires_grad_()
        out = run(x)
        out.sum().backward()
        outs += [out.detach(), x.grad]
    return outs + [m.pos.weight.grad, m.neg.bias.grad]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_cond_over_a_module_matches_eager(backend):
    want = _gated_both(None)
    fg._dynamo.reset()
    got = _gated_both(backend)
    for a, b in zip(want, got):
        _close(a, b)


def test_cond_over_a_module_is_one_graph_as_torch():
    def build(T):
        T.manual_seed(0)
        pos, neg = T.nn.Linear(4, 4), T.nn.Linear(4, 4)

        def f(x):
            y = x * 2
            return T.cond(x.sum() > 0, lambda x: pos(x) + y, lambda x: neg(x) - y, (x,))
        run = T.compile(f, backend="eager")
        return lambda: [run(T.ones(2, 4) * s) for s in (1.0, -1.0)]
    assert _counts(fg, build(fg)) == _counts(torch, build(torch)) == (1, 0)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_cond_with_lifted_operands_traced_by_aot(backend):
    """Branches reading the same lifted parameters: AOT autograd traces the select, no
    graph left to run eagerly; values and gradients are eager's."""
    fg.manual_seed(5)
    lin = fg.nn.Linear(3, 3)
    w = _data(fg, 6, 3)

    def f(x):
        y = x * w
        return fg.cond(x.sum() > 0, lambda x: lin(x) + y, lambda x: lin(x) * y, (x,))

    fg._dynamo.reset()
    run = fg.compile(f, backend=backend)
    with compiler_fallbacks() as fallbacks:
        for s in (1.0, -1.0):
            x = fg.ones(2, 3) * s
            got = run(x)
            g1 = fg.autograd.grad(got.sum(), [lin.weight, w])
            want = f(x)
            g2 = fg.autograd.grad(want.sum(), [lin.weight, w])
            _close(want, got)
            for a, b in zip(g1, g2):
                _close(a, b)
    assert not fallbacks


# ---------------------------------------------------------------- a with block's entry


_LOCK = threading.Lock()


class _LoudContext:
    def __enter__(self):
        print("enter")
        return self

    def __exit__(self, *exc):
        return False


def _with_lock(T):
    def f(x):
        x = x + 1
        with _LOCK:
            y = x * 2
            z = y - 1
        return z * 3
    return f


def _with_loud(T):
    def f(x):
        x = x + 1
        with _LoudContext():
            y = x * 2
        return y.cos()
    return f


def _with_redirect(T):
    def f(x):
        x = x + 1
        with contextlib.redirect_stdout(io.StringIO()):
            print("hidden")
            y = x * 2
        return y - 1
    return f


_WITHS = [_with_lock, _with_loud, _with_redirect]


@pytest.mark.parametrize("make", _WITHS, ids=[m.__name__ for m in _WITHS])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_with_entry_break_matches_eager(make, backend, capsys):
    f = make(fg)
    want = [f(_data(fg, 7, 3)) for _ in range(2)]
    eager_text = capsys.readouterr().out
    fg._dynamo.reset()
    run = fg.compile(f, backend=backend)
    got = [run(_data(fg, 7, 3)) for _ in range(2)]
    assert capsys.readouterr().out == eager_text
    for a, b in zip(want, got):
        _close(a, b)


@pytest.mark.parametrize("make", _WITHS, ids=[m.__name__ for m in _WITHS])
def test_with_entry_break_graph_counts_match_torch(make):
    def calls(T):
        run = T.compile(make(T), backend="eager")
        for _ in range(2):
            run(T.ones(3))
    # (torch counts no break where it skips the frame; fusegrad reports the fallback)
    assert _counts(fg, lambda: calls(fg))[0] == _counts(torch, lambda: calls(torch))[0]


def test_with_entry_break_counts_redirect_as_torch():
    def calls(T):
        run = T.compile(_with_redirect(T), backend="eager")
        for _ in range(2):
            run(T.ones(3))
    assert _counts(fg, lambda: calls(fg)) == _counts(torch, lambda: calls(torch)) == (1, 2)


# ---------------------------------------------------------------- one graph for every instance


def _blocks(T):
    class Block(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = T.nn.Linear(4, 4)
            self.scale = 2.0

        def forward(self, x):
            return self.lin(x).relu() * self.scale + x
    T.manual_seed(0)
    return Block, [Block() for _ in range(5)]


def test_unbound_forward_one_graph_as_torch():
    def calls(T):
        Block, blocks = _blocks(T)
        run = T.compile(Block.forward, backend="eager")
        for b in blocks:
            run(b, T.ones(2, 4))
    assert _counts(fg, lambda: calls(fg)) == _counts(torch, lambda: calls(torch)) == (1, 0)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_unbound_forward_follows_each_instance(backend):
    Block, blocks = _blocks(fg)
    blocks[3].scale = 5.0  # (an attribute the graph read: another graph for this one)
    fg._dynamo.reset()
    run = fg.compile(Block.forward, backend=backend)
    for b in blocks + blocks[:2]:
        x, y = _data(fg, 8, 2, 4), _data(fg, 8, 2, 4)
        want, got = b(x), run(b, y)
        _close(want, got)
        want.sum().backward()
        got.sum().backward()
        _close(x.grad, y.grad)


def _hooked_calls(T, hooks):
    class Outer(T.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x) * 2

    T.manual_seed(1)
    run = T.compile(Outer.forward, backend="eager")
    outs = []
    for hook in hooks:
        inner = T.nn.Linear(4, 4)
        inner.register_forward_hook(hook())
        outs.append(run(Outer(inner), T.ones(2, 4)))
    return outs


def test_hook_lambda_per_instance_one_graph_as_torch():
    def calls(T):
        _hooked_calls(T, [lambda: (lambda m, a, o: o + 1)] * 4)
    assert _counts(fg, lambda: calls(fg)) == _counts(torch, lambda: calls(torch)) == (1, 0)


def test_hook_guarded_by_code_and_closure():
    """A hook of other code, or one whose closure holds another value, gets its own graph:
    the values are eager's for each."""
    def closing(k):
        return lambda: (lambda m, a, o: o * k)

    hooks = [lambda: (lambda m, a, o: o + 1), lambda: (lambda m, a, o: o - 1),
             closing(2.0), closing(3.0), lambda: (lambda m, a, o: o + 1)]
    fg._dynamo.reset()
    got = _hooked_calls(fg, hooks)

    class Plain(fg.nn.Module):  # the same calls, uncompiled
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x) * 2

    fg.manual_seed(1)
    for hook, out in zip(hooks, got):
        inner = fg.nn.Linear(4, 4)
        inner.register_forward_hook(hook())
        _close(Plain(inner)(fg.ones(2, 4)), out)


# ---------------------------------------------------------------- disable(recursive=False)


def _disabled_calls(T, recursive):
    def inner(x):
        return x.sin() * 2

    @T.compiler.disable(recursive=recursive)
    def outer(x):
        y = x + 1
        return inner(y) - 1

    def f(x):
        return outer(x * 3) + 1
    return f


@pytest.mark.parametrize("recursive", [True, False])
def test_disable_counts_match_torch(recursive):
    def calls(T):
        T.compile(_disabled_calls(T, recursive), backend="eager")(T.ones(2))
    want = (2, 1) if recursive else (3, 1)  # (the callee's own graph when not recursive)
    assert _counts(fg, lambda: calls(fg)) == _counts(torch, lambda: calls(torch)) == want


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_disable_not_recursive_matches_eager(backend):
    f = _disabled_calls(fg, False)
    fg._dynamo.reset()
    run = fg.compile(f, backend=backend)
    for _ in range(2):
        x, y = _data(fg, 9, 3), _data(fg, 9, 3)
        want, got = f(x), run(y)
        _close(want, got)
        want.sum().backward()
        got.sum().backward()
        _close(x.grad, y.grad)


# ---------------------------------------------------------------- vmap of a tensor function


def _vmapped_cases(T):
    w = _data(T, 10, 3)
    F = T.func
    return {
        "pointwise": (F.vmap(lambda x: x.sin() * 2), lambda: (_data(T, 11, 4, 3),)),
        "reducing": (F.vmap(lambda x, w: (x * w).sum() + x.max(), in_dims=(0, None)),
                     lambda: (_data(T, 12, 4, 3), w)),
        "dims": (F.vmap(lambda x: (x.exp(), x.cumsum(0)), in_dims=1, out_dims=1),
                 lambda: (_data(T, 13, 3, 5),)),
        "nested": (F.vmap(F.vmap(lambda x: x.tanh() * x.sum())), lambda: (_data(T, 14, 2, 3, 2),)),
        "dict": (F.vmap(lambda p, x: x @ p["w"] + p["b"], in_dims=(0, None)),
                 lambda: ({"w": _data(T, 15, 2, 3, 3), "b": _data(T, 16, 2, 3)},
                          _data(T, 17, 4, 3))),
    }


def test_vmap_graph_counts_match_torch():
    def calls(T):
        for f, make in _vmapped_cases(T).values():
            T.compile(f, backend="eager")(*make())
    assert _counts(fg, lambda: calls(fg)) == _counts(torch, lambda: calls(torch)) == (5, 0)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("case", ["pointwise", "reducing", "dims", "nested", "dict"])
def test_vmap_matches_eager(case, backend):
    f, make = _vmapped_cases(fg)[case]
    fg._dynamo.reset()
    run = fg.compile(f, backend=backend)
    for _ in range(2):
        a, b = make(), make()
        want, got = f(*a), run(*b)
        want = want if isinstance(want, tuple) else (want,)
        got = got if isinstance(got, tuple) else (got,)
        assert [tuple(t.shape) for t in want] == [tuple(t.shape) for t in got]
        assert [t.stride() for t in want] == [t.stride() for t in got]
        for p, q in zip(want, got):
            _close(p, q)
        sum(t.sum() for t in want).backward()
        sum(t.sum() for t in got).backward()
        leaves = [(p, q) for p, q in zip(fg.utils._pytree.tree_leaves(a),
                                        fg.utils._pytree.tree_leaves(b)) if p.grad is not None]
        assert leaves
        for p, q in zip(*zip(*leaves)):
            _close(p.grad, q.grad)


def _rand_inside(x):
    return x + fg.rand(3)


@pytest.mark.parametrize("f, error", [
    (fg.func.vmap(lambda x: x), None),  # (eager returns a view of the input)
    (fg.func.vmap(lambda x: x.t()), None),
    (fg.func.vmap(lambda x: fg.ones(3) * 2), None),  # (eager expands an unbatched result)
    (fg.func.vmap(_rand_inside), RuntimeError),  # (randomness="error")
    (fg.func.vmap(lambda x: x.add_(1)), None),
])
def test_vmap_refused_cases_run_as_eager(f, error):
    fg._dynamo.reset()
    run = fg.compile(f, backend="eager")

    def make():
        return fg.arange(12.0).reshape(4, 3)

    if error is not None:
        with pytest.raises(error) as want:
            f(make())
        with pytest.raises(error) as got:
            run(make())
        assert str(got.value) == str(want.value)
        return
    a, b = make(), make()
    want, got = f(a), run(b)
    _close(want, got)
    _close(a, b)  # (an in-place write reached the input in both)
    assert want.stride() == got.stride()
    assert (want._base is None) == (got._base is None)


def test_combinatoric_iterators_are_unrolled():
    """`itertools.permutations`, `combinations` and `combinations_with_replacement` over a
    frame's tensors (and a range) are unrolled while translating: one graph, no break, with
    eager's values; a count past the unroll limit breaks and runs for real."""
    import itertools

    def f(x):
        zs = [x, x + 1, x * 2]
        s = x.new_zeros(())
        for a, b in itertools.permutations(zs, 2):
            s = s + (a * b).sum()
        for a, b in itertools.combinations_with_replacement([x, x.t().t()], 2):
            s = s + (a - b).sum()
        for i, j in itertools.combinations(range(4), 2):
            s = s + x[0, i % 3] * j
        return s

    x = fg.arange(6.0).reshape(2, 3)
    fg._dynamo.reset()
    counters = fg._dynamo.utils.counters
    counters.clear()
    got = fg.compile(f, backend="eager")(x)
    assert sum(counters["graph_break"].values()) == 0
    assert counters["stats"]["unique_graphs"] == 1
    assert got.item() == f(x).item()

    def big(x):
        return x * len(list(itertools.permutations(range(8), 5)))

    fg._dynamo.reset()
    counters.clear()
    assert fg.compile(big, backend="eager")(x).tolist() == big(x).tolist()
    assert sum(counters["graph_break"].values()) >= 1
