"""Dynamic floats against torch.compile: a float argument that changes, and `.item()` in a
compiled step (the float on the stack after the break), compile as many graphs as PyTorch's
automatic dynamic (`specialize_float = False`) and no more recompiles; values against
eager execution; branches on the float are guarded, so a value that flips them recompiles.
Every fusegrad graph runs under `FUSEGRAD_TEST_BACKEND` (eager, aot_eager, inductor)."""

from __future__ import annotations

import contextlib
import io
import logging

import numpy as np
import pytest
import torch
import torch._dynamo
from compile_support import Counter, tolerances

import fusegrad
from fusegrad.compiler import config, logs


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


@contextlib.contextmanager
def _recompiles(lib):
    """The recompile messages `lib`'s compiler logs inside the block."""
    handler = _Lines()
    if lib is torch:
        torch._logging.set_logs(recompiles=True)
        logger = logging.getLogger("torch._dynamo")
    else:
        logs.set_logs(recompiles=True)
        logger = logs.log
    logger.addHandler(handler)
    try:
        yield handler.lines
    finally:
        logger.removeHandler(handler)
        if lib is torch:
            torch._logging.set_logs()
        else:
            logs.set_logs(recompiles=False)
    handler.lines[:] = [m for m in handler.lines if "Recompiling function" in m]


def _backend(lib):
    """A counting backend: fusegrad's graphs go to the run's inner backend."""
    if lib is fusegrad:
        return Counter()
    counter = Counter("eager")
    return counter


def _close(a, b):
    if isinstance(a, (tuple, list)):
        for x, y in zip(a, b):
            _close(x, y)
        return
    if isinstance(a, float):
        assert a == pytest.approx(b, rel=1e-6)
        return
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), **tolerances(a.dtype))


def scale(x, s):
    return x * s + 1


def scale_arith(x, s):
    return x * (1 - s) + s * s, (x * s).sum() / (s + 1)


def item_branch(x):
    y = x.sum()
    v = y.item()
    print("v", v) if v > 100 else None
    return x + v


def item_control(x):
    v = x.sum().item()
    if v > 100 and v < 1000:
        return x * max(v, 1.0) + int(v)
    return x - min(v, 2.0) + int(v)


@pytest.mark.parametrize("dynamic", [None, True, False])
@pytest.mark.parametrize("fn", [scale, scale_arith])
def test_float_argument_graph_counts_match_torch(fn, dynamic):
    counts = {}
    for lib in (torch, fusegrad):
        lib._dynamo.reset()
        backend = _backend(lib)
        compiled = lib.compile(fn, backend=backend, dynamic=dynamic)
        x = lib.arange(6, dtype=lib.float32) - 2.5
        for s in (0.5, 0.25, 0.125, 2.0, -3.0):
            out = compiled(x, s)
            if lib is fusegrad:
                _close(out, fn(x, s))
        counts[lib] = backend.graphs
    assert counts[fusegrad] == counts[torch]
    assert counts[fusegrad] == {None: 2, True: 1, False: 5}[dynamic]


def test_float_input_is_a_placeholder_not_a_constant():
    graphs = []
    compiled = fusegrad.compile(scale, backend=lambda gm, ex: (graphs.append(gm),
                                                               gm.forward)[1])
    x = fusegrad.ones(3)
    for s in (0.5, 0.25, 0.125):
        compiled(x, s)
    assert len(graphs) == 2
    assert "l_x_ * 0.5" in graphs[0].code
    assert [n.name for n in graphs[1].graph.nodes if n.op == "placeholder"] == ["l_x_", "l_s_"]
    assert "l_x_ * l_s_" in graphs[1].code


def test_specialize_float_config_restores_specialisation():
    config.specialize_float = True
    try:
        backend = Counter()
        compiled = fusegrad.compile(scale, backend=backend)
        for s in (0.5, 0.25, 0.125):
            _close(compiled(fusegrad.ones(2), s), scale(fusegrad.ones(2), s))
        assert backend.graphs == 3
    finally:
        config.specialize_float = False


def _run_g(lib, fn, values):
    backend = _backend(lib)
    lib._dynamo.reset()
    compiled = lib.compile(fn, backend=backend)
    outs, printed = [], io.StringIO()
    with contextlib.redirect_stdout(printed), _recompiles(lib) as recompiles:
        for i in values:
            outs.append(compiled(lib.ones(3) * i))
    return backend.graphs, outs, printed.getvalue(), len(recompiles)


def test_item_graph_counts_match_torch():
    counts = {lib: _run_g(lib, item_branch, range(4))[0] for lib in (torch, fusegrad)}
    assert counts[fusegrad] == counts[torch] == 3


@pytest.mark.parametrize("fn", [item_branch, item_control])
def test_branch_on_a_dynamic_float_is_guarded(fn):
    # 50 * 3 = 150 > 100 takes the other branch: the guard on the comparison recompiles.
    values = [0, 1, 2, 3, 50, 2, 60, 1, 4000]
    graphs, outs, printed, recompiles = _run_g(fusegrad, fn, values)
    eager = io.StringIO()
    with contextlib.redirect_stdout(eager):
        ref = [fn(fusegrad.ones(3) * i) for i in values]
    assert printed == eager.getvalue()
    for a, b in zip(outs, ref):
        _close(a, b)
    t_graphs, _, t_printed, t_recompiles = _run_g(torch, fn, values)
    assert printed == t_printed
    if fn is item_branch:
        assert graphs <= t_graphs
        assert recompiles <= t_recompiles
    # item_control: PyTorch keeps `int(v)` and `max(v, 1.0)` in its graph (sym_int,
    # sym_max); here `int(v)` is a graph break and `max` guards the comparison, so more
    # graphs, each right for the values that reach it.


def test_text_of_a_dynamic_float_is_formatted_per_call():
    def f(x):
        v = x.sum().item()
        print(f"loss {v:.3f}", str(v), repr(v / 2), v)
        return x * v

    backend = Counter()
    compiled = fusegrad.compile(f, backend=backend)
    printed, eager = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), _recompiles(fusegrad) as recompiles:
        outs = [compiled(fusegrad.ones(2) * i) for i in (1.5, 2.25, 3.125, 7.0)]
    with contextlib.redirect_stdout(eager):
        ref = [f(fusegrad.ones(2) * i) for i in (1.5, 2.25, 3.125, 7.0)]
    assert printed.getvalue() == eager.getvalue()
    for a, b in zip(outs, ref):
        _close(a, b)
    # Per resume point (after `.item()`, after `print`): the static first value, then one
    # dynamic entry.
    assert len(recompiles) == 2


def test_value_dependent_shape_specialises():
    def f(x, s):
        return fusegrad.arange(0.0, s) + x.sum()

    backend = Counter()
    compiled = fusegrad.compile(f, backend=backend)
    for s in (2.5, 3.5, 5.0, 5.0):
        _close(compiled(fusegrad.ones(2), s), f(fusegrad.ones(2), s))
    assert backend.graphs == 3


def test_float_gradient_through_compiled_graph():
    w0 = np.linspace(-1, 1, 5).astype(np.float32)

    def f(x, w, s):
        return ((x * w * s).sum() + (w * (1 - s)).pow(2).sum()) / (s + 2)

    w = fusegrad.tensor(w0, requires_grad=True)
    compiled = fusegrad.compile(f, backend=Counter())
    x = fusegrad.arange(5, dtype=fusegrad.float32)
    for s in (0.5, 0.25, 3.0, -1.5):
        w.grad = None
        out = compiled(x, w, s)
        out.backward()
        g = w.grad.clone()
        w.grad = None
        ref = f(x, w, s)
        ref.backward()
        _close(out, ref)
        _close(g, w.grad)


def _train(lib, pattern: str, compiled: bool):
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.ReLU(), lib.nn.Linear(8, 1))
    with lib.no_grad():  # the same start in both libraries (their random streams differ)
        for i, p in enumerate(model.parameters()):
            p.copy_(lib.tensor(np.cos(np.arange(p.numel()) + i).reshape(tuple(p.shape))
                               .astype(np.float32)) * 0.5)
    opt = lib.optim.SGD(model.parameters(), lr=0.1)
    F = lib.nn.functional

    def step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        if pattern == "compare":
            v = loss.item()
            if v > 10:
                print("big", v)
        elif pattern == "print":
            print(loss.item())
        else:
            print(f"loss {loss.item():.4f}")
        loss.backward()
        opt.step()
        return loss

    backend = _backend(lib)
    lib._dynamo.reset()
    fn = lib.compile(step, backend=backend) if compiled else step
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), _recompiles(lib) as recompiles:
        losses = [fn(lib.ones(16, 4) * (i + 1) * 0.1 + 0.05 * (i % 3), lib.zeros(16, 1))
                  for i in range(10)]
    return ([float(v) for v in losses], [p.detach().numpy().copy() for p in
                                         model.parameters()], printed.getvalue(),
            backend.graphs, len(recompiles))


@pytest.mark.parametrize("pattern", ["compare", "print", "fstring"])
def test_training_step_with_item_matches_eager_and_torch(pattern):
    losses, params, printed, graphs, recompiles = _train(fusegrad, pattern, True)
    e_losses, e_params, e_printed, _, _ = _train(fusegrad, pattern, False)
    np.testing.assert_allclose(losses, e_losses, rtol=1e-5, atol=1e-6)
    for a, b in zip(params, e_params):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert printed.count("\n") == e_printed.count("\n")
    if pattern == "fstring":
        assert printed == e_printed
    _, _, _, t_graphs, t_recompiles = _train(torch, pattern, True)
    assert graphs <= t_graphs
    assert recompiles <= t_recompiles
    assert recompiles == 1  # the float after `.item()` is static once, then an input


def test_inductor_kernel_takes_the_float_as_an_argument():
    from fusegrad.compiler.codegen import build

    if build.compiler() is None:
        pytest.skip("no C compiler")

    def f(x, s):
        return (x * (1 - s) + s).sum(0)

    handler = _Lines()
    logs.set_logs(output_code=True)
    logs.log.addHandler(handler)
    try:
        fusegrad._dynamo.reset()
        compiled = fusegrad.compile(f, backend="inductor")
        x = fusegrad.arange(12, dtype=fusegrad.float32).reshape(3, 4)
        for s in (0.5, 0.25, 0.125, 2.0, 1e-3):
            _close(compiled(x, s), f(x, s))
    finally:
        logs.log.removeHandler(handler)
        logs.set_logs(output_code=False)
    # The static first graph and one dynamic graph: no code per value.
    assert len(handler.lines) == 2
    dynamic = handler.lines[1]
    assert "_scalar(arg1)" in dynamic and "const double *restrict" in dynamic
    assert "0x1.0000000000000p-2" not in dynamic and "0x1.0000000000000p-3" not in dynamic


def _table_lookup(x, v):
    return x * {0.5: 1.0, 0.25: 2.0}.get(v, 7.0) + (1.0 if v in {0.5, 0.125} else 5.0)


def _equality_decisions(x, v):
    return x * (1.0 if v == v else 2.0) * (3.0 if str(v) == "0.5" else 4.0)


@pytest.mark.parametrize("fn", [_table_lookup, _equality_decisions])
def test_lookups_and_equality_on_a_dynamic_float_match_eager(fn):
    # A dict or set lookup that misses compares nothing: hashing the float must guard its
    # value, or a later value that is a key would reuse the graph of the miss.
    values = [0.1, 0.2, 0.5, 0.25, 0.125, float("nan"), 0.5]
    compiled = fusegrad.compile(fn, backend=Counter())
    x = fusegrad.ones(3)
    for v in values:
        _close(compiled(x, v), fn(x, v))
        t = torch.ones(3)
        _close(compiled(x, v), torch.compile(fn, backend="eager")(t, v))
