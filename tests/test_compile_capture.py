"""fusegrad.compile against eager fusegrad (values, gradients) and torch.compile (graph counts).

Each program is written once and run with `T` = fusegrad or torch: compiled and eager must
agree, and capture must not make more graphs than PyTorch 2.13's Dynamo on the same program.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from compile_support import Counter  # noqa: E402

import fusegrad  # noqa: E402

GLOBAL_SCALE = 3.0


def helper(x, k):
    return x * k + 1


def p_arith(T, a, b):
    return (a + b) * 2 - a / (b.abs() + 1)


def p_seed_toy(T, a, b):
    x = a / (T.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def p_python_branch(T, a, b):
    n = a.shape[0]
    if n > 2:
        a = a * 2
    else:
        a = a * 3
    return a + b


def p_loop(T, a, b):
    out = a
    for i in range(3):
        out = out * (i + 1) + b
    return out


def p_inline_helper(T, a, b):
    return helper(a, 2) + helper(b, 3)


def p_global(T, a, b):
    return a * GLOBAL_SCALE + b


def p_closure(T, a, b):
    k = 1.5

    def inner(x):
        return x * k

    return inner(a) - b


def p_containers(T, a, b):
    pair = (a, b)
    lst = [a * 2]
    lst.append(b + 1)
    d = {"x": a, "y": b}
    return pair[0] + lst[1] + d["y"] * lst[0]


def p_unpack(T, a, b):
    x, y = a * 2, b * 3
    *rest, last = [x, y, a]
    return rest[0] + rest[1] + last


def p_methods(T, a, b):
    return a.relu().exp().sum(0, keepdim=True) * b.t().mean()


def p_item_break(T, a, b):
    s = a.sum().item()
    return b * s


def p_print_break(T, a, b):
    y = a * 2
    print("value", y.shape)
    return y + b


def p_views_inplace(T, a, b):
    c = a.clone()
    c[0] = c[0] * 3
    c.add_(b)
    return c.view(-1)


def p_matmul_softmax(T, a, b):
    return (a @ b.t()).softmax(dim=-1).log()


def p_kwargs(T, a, b):
    def f(x, *args, scale=1.0, **kw):
        return x * scale + sum(args) + kw["shift"]

    return f(a, b, b, scale=2.0, shift=1.0)


def p_comprehension(T, a, b):
    parts = [a * i for i in range(3)]
    return T.cat(parts + [b])


def p_data_branch(T, a, b):
    if (a > 0).sum() > 2:
        return a - b
    return a + b


def p_nested_calls(T, a, b):
    def g(x):
        return x.sigmoid() * 2

    def h(x, y):
        return g(x) + g(y)

    return h(a, b).tanh()


def p_string_format(T, a, b):
    name = f"{a.shape[0]}-{len(b)}"
    return a * len(name)


def p_numpy_call(T, a, b):
    w = np.ones(1) * 2.0
    return a * float(w[0]) + b


PROGRAMS = [v for k, v in sorted(globals().items()) if k.startswith("p_")]


def _arrays(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((4, 4)).astype(np.float32) for _ in range(2)]


def _run(T, prog, arrays, compiled, counter=None, grad=True):
    args = [T.tensor(a, requires_grad=grad) for a in arrays]
    fn = (lambda *xs: prog(T, *xs))
    if compiled:
        if T is torch:
            torch._dynamo.reset()
            fn = torch.compile(fn, backend=counter)
        else:
            fn = fusegrad.compile(fn, backend=counter or "eager")
    out = fn(*args)
    grads = None
    if grad:
        out.sum().backward()
        grads = [a.grad.numpy() if a.grad is not None else None for a in args]
    return out.detach().numpy(), grads


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.__name__[2:])
def test_compiled_equals_eager(prog, capsys):
    arrays = _arrays()
    eager = _run(fusegrad, prog, arrays, compiled=False)
    fg_counter = Counter()
    compiled = _run(fusegrad, prog, arrays, compiled=True, counter=fg_counter)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-6, atol=1e-6)
    for g1, g2 in zip(compiled[1], eager[1]):
        assert (g1 is None) == (g2 is None)
        if g1 is not None:
            np.testing.assert_allclose(g1, g2, rtol=1e-6, atol=1e-6)
    th_counter = Counter()
    _run(torch, prog, arrays, compiled=True, counter=th_counter)
    assert fg_counter.graphs <= th_counter.graphs, (fg_counter.graphs, th_counter.graphs)


def test_seed_toy_example_three_graphs():
    tables = []

    def my_compiler(gm, example_inputs):
        tables.append([(n.op, n.name) for n in gm.graph.nodes])
        return gm.forward

    fn = fusegrad._dynamo.optimize(my_compiler)(lambda a, b: p_seed_toy(fusegrad, a, b))
    rng = np.random.default_rng(1)
    for _ in range(100):
        a, b = (rng.standard_normal(10).astype(np.float32) for _ in range(2))
        out = fn(fusegrad.tensor(a), fusegrad.tensor(b))
        want = p_seed_toy(fusegrad, fusegrad.tensor(a), fusegrad.tensor(b))
        np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-6)
    assert len(tables) == 3
    assert tables[0] == [("placeholder", "l_a_"), ("placeholder", "l_b_"),
                         ("call_function", "abs_1"), ("call_function", "add"),
                         ("call_function", "x"), ("call_method", "sum_1"),
                         ("call_function", "lt"), ("output", "output")]
    assert sorted(tables[1:]) == sorted([
        [("placeholder", "l_x_"), ("placeholder", "l_b_"), ("call_function", "mul"),
         ("output", "output")],
        [("placeholder", "l_b_"), ("placeholder", "l_x_"), ("call_function", "b"),
         ("call_function", "mul_1"), ("output", "output")]])


def test_guards_recompile_on_new_shape_not_on_repeat():
    counter = Counter()
    fn = fusegrad.compile(lambda x: x * 2, backend=counter)
    fn(fusegrad.ones(3))
    fn(fusegrad.ones(3))
    assert counter.graphs == 1
    fn(fusegrad.ones(4))
    assert counter.graphs == 2
    fn(fusegrad.ones(4, dtype=fusegrad.float64))
    assert counter.graphs == 3


def test_recompile_limit_falls_back_to_eager_with_one_warning():
    counter = Counter()
    # dynamic=False: automatic dynamic would make `n` an integer input after one change.
    fn = fusegrad.compile(lambda x, n: x * n, backend=counter, dynamic=False)
    limit = fusegrad._dynamo.config.recompile_limit
    with pytest.warns(UserWarning, match="recompile_limit"):
        for n in range(limit + 3):
            assert fn(fusegrad.ones(2), n).tolist() == [float(n)] * 2
    assert counter.graphs == limit


def test_fullgraph_raises_at_break_with_line():
    def f(x):
        print("hi")
        return x + 1

    with pytest.raises(Exception, match=r"print.*test_compile_capture.py:\d+"):
        fusegrad.compile(f, fullgraph=True)(fusegrad.ones(2))


def toy_example(a, b):
    x = a / (fusegrad.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def test_explain_counts_graphs_and_breaks():
    out = fusegrad._dynamo.explain(toy_example)(fusegrad.ones(3), -fusegrad.ones(3))
    assert out.graph_count == 2 and out.graph_break_count == 1
    assert "data-dependent" in out.break_reasons[0].reason


def test_logs_report_breaks_recompiles_and_guards(caplog):
    from fusegrad.compiler import logs

    logs.set_logs(graph_breaks=True, recompiles=True, guards=True, graph_code=True)
    logs.log.addHandler(caplog.handler)
    try:
        with caplog.at_level("INFO", logger="fusegrad.compiler"):
            fn = fusegrad.compile(toy_example, backend="eager")
            fn(fusegrad.ones(4), fusegrad.ones(4))
            fn(fusegrad.ones(5), fusegrad.ones(5))
    finally:
        logs.log.removeHandler(caplog.handler)
        logs.set_logs(graph_breaks=False, recompiles=False, guards=False, graph_code=False)
    text = caplog.text
    assert "Graph break in toy_example" in text and "data-dependent" in text
    assert "tensor 'L['a']' size mismatch at index 0. expected 4, actual 5" in text
    assert "check_tensor(L['a']" in text
    assert "def forward" in text


def test_jit_script_compiles_the_data_dependent_branch():
    def relu_twice(x):
        return x.relu() * 2

    scripted = fusegrad.jit.script(relu_twice)
    np.testing.assert_allclose(scripted(fusegrad.tensor([-1.0, 2.0])).numpy(), [0.0, 4.0])
    scripted = fusegrad.jit.script(toy_example)  # the branch compile() breaks on
    for b in (fusegrad.ones(2), -fusegrad.ones(2)):
        a = fusegrad.tensor([1.0, -3.0])
        np.testing.assert_allclose(scripted(a, b).numpy(), toy_example(a, b).numpy())


def _mlp(seed: int):
    nn = fusegrad.nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = nn.Linear(4, 8)
            self.l2 = nn.Linear(8, 3)

        def forward(self, x):
            h = self.l1(x).relu()
            if self.training:
                h = h * 0.9
            return self.l2(h)

    fusegrad.manual_seed(seed)
    return MLP()


def test_compiled_module_trains_like_eager():
    rng = np.random.default_rng(0)
    xs = [fusegrad.tensor(rng.standard_normal((5, 4)).astype(np.float32)) for _ in range(5)]
    ys = [fusegrad.tensor(rng.integers(0, 3, 5)) for _ in range(5)]
    results = []
    for compiled in (False, True):
        model = _mlp(0)
        run = fusegrad.compile(model, backend="eager") if compiled else model
        opt = fusegrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        losses = []
        for x, y in zip(xs, ys):
            opt.zero_grad()
            loss = fusegrad.nn.functional.cross_entropy(run(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        results.append((losses, [p.detach().numpy().copy() for p in model.parameters()]))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_compiled_module_guards_training_flag_and_keeps_state_dict_keys():
    counter = Counter()
    model = _mlp(1)
    cm = fusegrad.compile(model, backend=counter)
    x = fusegrad.randn(2, 4)
    np.testing.assert_allclose(cm(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-6)
    model.eval()
    np.testing.assert_allclose(cm(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-6)
    assert counter.graphs == 2
    assert list(cm.state_dict()) == ["_orig_mod." + k for k in model.state_dict()]


def test_disabled_function_runs_eagerly_between_graphs():
    calls = []

    @fusegrad.compiler.disable
    def log_value(x):
        calls.append(type(x).__name__)
        return x

    counter = Counter()
    fn = fusegrad.compile(lambda x: log_value(x * 2) + 1, backend=counter)
    np.testing.assert_allclose(fn(fusegrad.ones(2)).numpy(), [3.0, 3.0])
    assert calls == ["Tensor"] and counter.graphs == 2


def test_placeholders_are_named_after_their_sources_as_dynamo():
    """Each input's placeholder targets its source's name (`L_a_`, `L_xs_0_`,
    `L_mod_parameters_weight_`) and the node is that name in lower case, as in torch."""
    def run(T):
        seen = []

        def backend(gm, example_inputs):
            seen.append([(n.name, n.target) for n in gm.graph.nodes if n.op == "placeholder"])
            seen.append(gm.code.splitlines()[3:8])
            return gm.forward

        T.manual_seed(0)
        mod = T.nn.Linear(2, 2)

        def f(a, xs, m):
            return m(a) + xs[0] * a.abs()

        T.compile(f, backend=backend)(T.ones(2), [T.ones(2)], mod)
        return seen

    got, want = run(fusegrad), run(torch)
    assert got[0] == want[0]
    assert got[1][1:] == want[1][1:]  # the aliasing lines; torch annotates the signature
