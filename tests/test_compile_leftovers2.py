"""Capture leftovers, each program compiled against eager fusegrad (values, gradients, the
generator's state, the objects written), with graph counts where capture runs (CPython
3.11-3.13) and PyTorch 2.13's counts (recorded on 3.11, in comments; compared with
torch._dynamo where torch is installed):

1. rrelu's slopes are drawn by a registry op flagged random (`rrelu_with_noise_functional`,
   ATen's functional form): called in a graph it draws what eager draws, on every backend,
   and a draw nothing reads stays (the generator ends where eager leaves it).
2. `explain` lists each graph break once: a method that needs the tensor's values
   (`loss.backward`, `y.item`) breaks where it is called, not also where it is read.
3. A dict from outside written in the graph while another variable holds it (`d = cfg;
   d['k'] = x`, an argument passed twice) is one variable for every name that reaches it:
   the items written are read back and replayed once on the real dict after the graph; which
   names are the same dict is guarded.
4. A compiled training step (SGD with momentum, Adam): values after 5 steps equal eager's
   (bit for bit under eager/aot_eager). `opt.zero_grad()` breaks the graph as it does under
   torch.compile (PyTorch 2.13 skips it: "Attempted to inline function marked as
   skipped"); `opt.step()` runs eagerly at a break where torch traces it (2 graphs for the
   step where fusegrad has 1: fusegrad's optimizers update NumPy arrays, not registry ops).

No torch at module level (this file runs on 3.12 and 3.13 too).
"""

from __future__ import annotations

import contextlib
import io
import types

import numpy as np
import pytest
from compile_support import BACKENDS, CAPTURES, Counter

import fusegrad as fg
from fusegrad._dynamo import graph_break

F = fg.nn.functional
A = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)


def _compiled(fn, backend):
    fg._dynamo.reset()  # (each case's programs from a fresh recompile limit, as a user's)
    counter = Counter(backend)
    return fg.compile(fn, backend=counter), counter


def _graphs(counter) -> int:
    return counter.graphs if CAPTURES else 0


# ---------------------------------------------------------------- 1. rrelu's draw


_DRAW = fg.ops.aten.rrelu_with_noise_functional.default


def draws_directly(x):
    out, noise = _DRAW(x * 2, fg.zeros(4, 5), 0.1, 0.3, True)
    _DRAW(x, fg.zeros(4, 5), 0.1, 0.3, True)  # read by nothing: still drawn
    return out + noise


def rrelu_functional(x):
    return F.rrelu(x * 2, training=True) * 3 + F.rrelu(x, 0.1, 0.2, True)


_RRELU = fg.nn.RReLU(0.05, 0.4)


def rrelu_module(x):
    y = _RRELU(x) + 1
    F.rrelu(x, training=True)  # read by nothing: still drawn
    return y * 2


def _eager_and_compiled(fn, backend, grad: bool):
    """(eager, compiled) runs of `fn` from one seed: the result, x's gradient and the
    generator's next draw."""
    runs = []
    for run in (fn, _compiled(fn, backend)[0]):
        fg.manual_seed(7)
        x = fg.tensor(A, requires_grad=grad)
        out = run(x)
        if grad:
            out.sum().backward()
        runs.append((out.detach().numpy(), None if not grad else x.grad.numpy(),
                     fg.rand(3).numpy()))
    return runs


@pytest.mark.parametrize("backend", BACKENDS)
def test_rrelu_draw_op_in_a_graph_draws_as_eager(backend):
    want, got = _eager_and_compiled(draws_directly, backend, grad=False)
    for w, g in zip(want, got):
        if w is not None:
            np.testing.assert_array_equal(g, w)
    _, counter = _compiled(draws_directly, backend)
    counter_fn = fg.compile(draws_directly, backend=counter)
    fg.manual_seed(7)
    counter_fn(fg.tensor(A))
    assert _graphs(counter) == (1 if CAPTURES else 0)


def test_rrelu_draw_op_matches_eager_functional():
    """The op draws PyTorch's slopes (F.rrelu's, bit for bit) and keeps 1 where x > 0."""
    x = fg.tensor(A)
    fg.manual_seed(3)
    want = F.rrelu(x, 0.1, 0.3, True)
    fg.manual_seed(3)
    out, noise = _DRAW(x, fg.zeros(4, 5), 0.1, 0.3, True)
    np.testing.assert_array_equal(out.numpy(), want.numpy())
    assert (noise.numpy()[A > 0] == 1).all()
    assert ((noise.numpy()[A <= 0] >= 0.1) & (noise.numpy()[A <= 0] <= 0.3)).all()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [rrelu_functional, rrelu_module], ids=lambda f: f.__name__)
def test_rrelu_training_compiled_equals_eager(fn, backend):
    """Values, gradients and the generator afterwards as eager's, whatever the graphs."""
    want, got = _eager_and_compiled(fn, backend, grad=True)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("fn", [rrelu_functional, rrelu_module], ids=lambda f: f.__name__)
def test_rrelu_training_is_one_graph(fn):
    out = fg._dynamo.explain(fn)(fg.tensor(A))
    assert (out.graph_count, out.graph_break_count) == (1, 0), out.break_reasons


# ---------------------------------------------------------------- 2. explain's breaks


_W = fg.ones(3, requires_grad=True)


# Programs over `lib` and `w`, globals bound per library (`_explain`).
def backward_inside(x):
    loss = (x * w).sum()  # noqa: F821
    loss.backward()
    return loss * 2


def item_inside(x):
    y = (x * w).sum()  # noqa: F821
    v = y.item()
    return x * v


def print_inside(x):
    y = x.sin()
    print("")
    return y.cos()


def backward_item_print(x):
    loss = (x * w).sum()  # noqa: F821
    loss.backward()
    y = loss.item()
    print(y > 0)
    return x + y


def backward_twice(x):
    y = (x * w).sum()  # noqa: F821
    y.backward(retain_graph=True)
    y.backward()
    return x + 1


def items_between_graphs(x):
    y = x.sum().item()
    z = x * y
    v = z.sum().item()
    return z + v


# program -> torch._dynamo.explain's (graph_count, graph_break_count), and how many breaks
# fusegrad lists: each once (PyTorch lists only those that end a graph with ops in it; ours
# also those that come before any op, as tests/test_compile_explain.py records)
EXPLAINED = {
    backward_inside: (2, 1, 1), item_inside: (2, 1, 1), print_inside: (2, 1, 1),
    backward_item_print: (2, 1, 3), backward_twice: (2, 1, 2), items_between_graphs: (3, 2, 2),
}


def _explain(lib, prog, w):
    fn = types.FunctionType(prog.__code__, {**prog.__globals__, "lib": lib, "w": w},
                            prog.__name__)
    if w.grad is not None:
        w.grad = None
    with contextlib.redirect_stdout(io.StringIO()):
        return lib._dynamo.explain(fn)(lib.ones(3))


@pytest.mark.skipif(not CAPTURES, reason="capture needs CPython 3.11-3.13")
@pytest.mark.parametrize("prog", list(EXPLAINED), ids=lambda p: p.__name__)
def test_explain_lists_each_break_once(prog):
    out = _explain(fg, prog, _W)
    graphs, breaks, listed = EXPLAINED[prog]
    assert (out.graph_count, out.graph_break_count) == (graphs, breaks)
    sites = [(r.reason, r.user_stack[-1].lineno) for r in out.break_reasons]
    assert len(sites) == len(set(sites)) == listed, sites


@pytest.mark.parametrize("prog", list(EXPLAINED), ids=lambda p: p.__name__)
def test_explain_counts_as_torch(prog):
    torch = pytest.importorskip("torch")
    if not CAPTURES:
        pytest.skip("capture needs CPython 3.11-3.13")
    want = _explain(torch, prog, torch.ones(3, requires_grad=True))
    got = _explain(fg, prog, _W)
    assert (got.graph_count, got.graph_break_count) == (want.graph_count,
                                                        want.graph_break_count)
    # Each break PyTorch lists (one per graph a break ends) is listed by fusegrad, once.
    lines = [r.user_stack[-1].lineno for r in got.break_reasons]
    assert [r.user_stack[-1].lineno for r in want.break_reasons] == \
        [n for n in lines if n in {r.user_stack[-1].lineno for r in want.break_reasons}]


def test_backward_as_a_value_still_runs_for_real():
    """`loss.backward` read without a call, called after a break: the real method runs."""
    w = fg.ones(3, requires_grad=True)

    def fn(x):
        loss = (x * w).sum()
        go = loss.backward
        graph_break()
        go()
        return loss * 1

    compiled = fg.compile(fn, backend=Counter("eager"))
    out = compiled(fg.ones(3) * 2)
    np.testing.assert_array_equal(w.grad.numpy(), np.full(3, 2.0, np.float32))
    assert float(out.detach()) == 6.0


# ---------------------------------------------------------------- 3. dicts from outside


CFG: dict = {"a": 1}


def write_through_local(x):
    d = CFG
    d["k"] = x * 2
    y = d["k"] + CFG["k"]
    return y


def two_locals(x):
    d = CFG
    e = CFG
    d["a"] = d["a"] + 1
    e["a"] = e["a"] * 2
    return x * CFG["a"]


def write_then_break(x):
    d = CFG
    d["k"] = x * 2
    graph_break()
    d["k"] = d["k"] + CFG["k"]
    return d["k"] + d["a"]


def argument_twice(x, a, b):
    a["k"] = x * 2
    b["k"] = x + 1
    return a["k"] * b["k"] + len(a) + len(b)


def argument_and_local(x, a):
    d = a
    d["n"] = d.get("n", 0) + 1
    e = a
    e["t"] = x * d["n"]
    return a["t"] + e["n"]


def _values(d: dict) -> dict:
    return {k: v.numpy().tolist() if isinstance(v, fg.Tensor) else v for k, v in d.items()}


def _same_calls(fn, make_args, backend, calls=4, change=None):
    """Eager and compiled calls of `fn` give the same results and leave the same dicts
    (`change(i)` alters the global dict before call i, the same way in both runs)."""
    compiled, counter = _compiled(fn, backend)
    runs = []
    for run in (fn, compiled):
        CFG.clear()
        CFG["a"] = 1
        results = []
        for i in range(calls):
            if change is not None:
                change(i)
            args = make_args(i)
            out = run(*args)
            results.append((out.numpy().tolist(), _values(CFG),
                            [_values(a) for a in args if isinstance(a, dict)]))
        runs.append(results)
    assert runs[1] == runs[0]
    return counter


def _bump(i):
    if i == 2:
        CFG["a"] = 5


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [write_through_local, two_locals, write_then_break],
                         ids=lambda f: f.__name__)
def test_global_dict_written_through_a_local(fn, backend):
    counter = _same_calls(fn, lambda i: (fg.ones(3) * (i + 1),), backend, change=_bump)
    if CAPTURES and fn is not write_then_break:
        # torch: 1 graph, no break (two_locals recompiles on the changed int, as torch does)
        assert fg._dynamo.explain(fn)(fg.ones(3)).graph_count == 1
        assert counter.graphs >= 1


def _distinct(i):
    return (fg.ones(2) * 3, {"z": 0}, {"z": 0})


def _shared(i):
    d = {"z": 0}
    return (fg.ones(2) * 3, d, d)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("order", ["distinct_first", "shared_first", "alternating"])
def test_dict_argument_passed_twice(order, backend):
    """Captured with two dicts, called with one passed twice (or the reverse): guarded."""
    pick = {"distinct_first": lambda i: (_distinct if i == 0 else _shared)(i),
            "shared_first": lambda i: (_shared if i == 0 else _distinct)(i),
            "alternating": lambda i: (_shared if i % 2 else _distinct)(i)}[order]
    _same_calls(argument_twice, pick, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_argument_and_locals(backend):
    shapes = [{}, {"n": 3}, {"n": 3, "t": 1}, {}]
    _same_calls(argument_and_local, lambda i: (fg.ones(2) * 3, dict(shapes[i])), backend)
    if CAPTURES:
        out = fg._dynamo.explain(argument_and_local)(fg.ones(2), {})
        assert (out.graph_count, out.break_reasons) == (1, [])  # torch: 1 graph, no break


# ---------------------------------------------------------------- 4. a training step

_X = [np.random.default_rng(i).standard_normal((5, 4)).astype(np.float32) for i in range(5)]
_Y = [np.random.default_rng(9 + i).standard_normal((5, 2)).astype(np.float32)
      for i in range(5)]


def _trainer(optimizer: str):
    fg.manual_seed(0)
    model = fg.nn.Sequential(fg.nn.Linear(4, 8), fg.nn.ReLU(), fg.nn.Linear(8, 2))
    opt = fg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9) if optimizer == "sgd" \
        else fg.optim.Adam(model.parameters(), lr=0.01)
    loss_fn = fg.nn.MSELoss()

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return model, step


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_training_step_matches_eager(optimizer, backend):
    runs = []
    for compile_it in (False, True):
        model, step = _trainer(optimizer)
        run = _compiled(step, backend)[0] if compile_it else step
        losses = [run(fg.tensor(x), fg.tensor(y)).item() for x, y in zip(_X, _Y)]
        runs.append((losses, [p.detach().numpy().copy() for p in model.parameters()],
                     [p.grad.numpy().copy() for p in model.parameters()]))
    (losses, params, grads), (closses, cparams, cgrads) = runs
    exact = backend != "inductor"
    for want, got in zip(params + grads, cparams + cgrads):
        if exact:
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(closses, losses, rtol=0 if exact else 1e-6)


_LIN = fg.nn.Linear(3, 2)
_OPT = fg.optim.SGD(_LIN.parameters(), lr=0.1, momentum=0.9)


def zero_grad_between_ops(x):
    y = lin(x) * 2  # noqa: F821
    opt.zero_grad()  # noqa: F821
    return y + 1


def _bound(lib, lin, opt):
    return types.FunctionType(zero_grad_between_ops.__code__,
                              {**globals(), "lib": lib, "lin": lin, "opt": opt},
                              "zero_grad_between_ops")


def test_zero_grad_breaks_as_torch():
    torch = pytest.importorskip("torch")
    if not CAPTURES:
        pytest.skip("capture needs CPython 3.11-3.13")
    counts = []
    for lib in (torch, fg):
        lin = lib.nn.Linear(3, 2)
        opt = lib.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9)
        out = lib._dynamo.explain(_bound(lib, lin, opt))(lib.ones(2, 3))
        counts.append((out.graph_count, out.graph_break_count, len(out.break_reasons)))
    assert counts[1] == counts[0] == (2, 1, 1)


def test_zero_grad_in_a_compiled_step_sets_the_gradients_to_none():
    _LIN(fg.ones(1, 3)).sum().backward()
    fn, _ = _compiled(_bound(fg, _LIN, _OPT), "eager")
    out = fn(fg.ones(2, 3))
    assert _LIN.weight.grad is None and _LIN.bias.grad is None
    np.testing.assert_array_equal(out.detach().numpy(),
                                  (_LIN(fg.ones(2, 3)) * 2 + 1).detach().numpy())
