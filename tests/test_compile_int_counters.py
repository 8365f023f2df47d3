"""Integer counters in compiled code: a user optimizer's or an EMA's step count (an int in
its state, incremented each call) used in float arithmetic (`1 - b1 ** step`,
`math.sqrt(bias_correction)`, `(1 + step) / (10 + step)`, a cosine schedule).

Once the counter changes between calls it is an integer input of the graph (automatic
dynamic), its float arithmetic graph values (`0.9 ** s`, `torch._sym_sqrt`), so one graph
serves every later step, as in PyTorch (before, each step compiled again until the
recompile limit). AOT autograd traces such an input as a float input (one trace for all
steps) and returns the counter's new value as an int. Each program runs eagerly and compiled
on three backends with the same values and state; under torch 2.13 the eager backend makes as
many graphs."""

import functools
import math

import numpy as np
import pytest
from program_support import check_compiled, compare, logged, run_program

import fusegrad

BACKENDS = ["eager", "aot_eager", "inductor"]


def _user_adam(lib, compiled=None):
    """Adam written by a user: an int step in lazily made state, bias corrections from it."""
    class UAdam(lib.optim.Optimizer):
        def __init__(self, params, lr=1e-2, betas=(0.9, 0.999), eps=1e-8):
            super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

        @lib.no_grad()
        def step(self):
            for group in self.param_groups:
                b1, b2 = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        state["step"] = 0
                        state["m"] = lib.zeros_like(p)
                        state["v"] = lib.zeros_like(p)
                    state["step"] += 1
                    m, v = state["m"], state["v"]
                    m.lerp_(p.grad, 1 - b1)
                    v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                    bc1 = 1 - b1 ** state["step"]
                    bc2 = 1 - b2 ** state["step"]
                    denom = (v.sqrt() / math.sqrt(bc2)).add_(group["eps"])
                    p.addcdiv_(m, denom, value=-group["lr"] / bc1)

    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.Tanh(), lib.nn.Linear(8, 2))
    opt = UAdam(model.parameters())
    step = lib.compile(opt.step, backend=compiled) if compiled else opt.step
    losses = []
    for _ in range(7):
        x = lib.randn(5, 4)
        opt.zero_grad()
        loss = model(x).pow(2).sum()
        loss.backward()
        step()
        losses.append(loss.item())
    steps = [opt.state[p]["step"] for p in model.parameters()]
    return {"losses": losses, "params": [p.detach() for p in model.parameters()],
            "steps": steps, "step_types": [type(s).__name__ for s in steps]}


def _ema(lib, compiled=None):
    """A diffusers-style EMA: its decay warms up with an int count of updates."""
    class EMA:
        def __init__(self, params, max_decay=0.999):
            self.shadow = [p.detach().clone() for p in params]
            self.max_decay = max_decay
            self.optimization_step = 0

        @lib.no_grad()
        def step(self, params):
            self.optimization_step += 1
            step = self.optimization_step
            decay = (1 + step) / (10 + step)
            decay = min(decay, self.max_decay)
            one_minus = 1 - decay
            for s, p in zip(self.shadow, params):
                s.sub_(one_minus * (s - p))

    lib.manual_seed(1)
    model = lib.nn.Linear(3, 3)
    ema = EMA(model.parameters())
    update = lib.compile(ema.step, backend=compiled) if compiled else ema.step
    params = list(model.parameters())
    for _ in range(6):
        with lib.no_grad():
            for p in params:
                p.add_(0.1)
        update(params)
    return {"shadow": ema.shadow, "count": ema.optimization_step}


def _cosine_schedule(lib, compiled=None):
    """SGD whose learning rate follows a cosine of an int step, written in the step."""
    lib.manual_seed(2)
    w = lib.randn(6, requires_grad=True)
    state = {"step": 0}

    def sgd_step(w):
        state["step"] += 1
        lr = 0.05 * 0.5 * (1 + math.cos(math.pi * state["step"] / 20))
        with lib.no_grad():
            w.add_(w.grad, alpha=-lr)
            w.grad.zero_()

    run = lib.compile(sgd_step, backend=compiled) if compiled else sgd_step
    for _ in range(6):
        (w * w).sum().backward()
        run(w)
    return {"w": w.detach(), "step": state["step"]}


def _counter_as_size_and_float(lib, compiled=None):
    """A counter used as a size and in float arithmetic (traced per value: still right)."""
    counter = {"n": 1}

    def f(x):
        counter["n"] += 1
        n = counter["n"]
        return x.new_ones(n) * (n / 2), x * math.sqrt(n)

    g = lib.compile(f, backend=compiled) if compiled else f
    x = lib.arange(3.0)
    return [g(x) for _ in range(5)]


def _decisions_and_conversions(lib, compiled=None):
    """Decisions on a counter's float arithmetic (each outcome its own graph), a whole part of
    it as a slice bound (specialised), a big counter (past 2**31)."""
    state = {"n": 1, "big": 2 ** 31 + 3}

    def f(x):
        state["n"] += 1
        state["big"] += 1
        n = state["n"]
        y = x * 2.0 if n / 10 > 0.45 else x * 3.0
        return y[: int(n * 0.5)], x * (state["big"] * 0.5), x - n * 0.25

    g = lib.compile(f, backend=compiled) if compiled else f
    x = lib.arange(8.0)
    return [g(x) for _ in range(6)] + [dict(state)]


def _counter_floats_read_by_python(lib, compiled=None):
    """A counter's float arithmetic read by NumPy, `math` and Python's builtins: their values
    for each call (specialised, each value its own graph), never an error eager has not."""
    state = {"n": 0}

    def f(x):
        state["n"] += 1
        n = state["n"]
        a = np.sqrt(n * 0.5) + np.float32(n / 4)
        b = math.log(n * 2.0) + float(n / 3) + max(n * 0.1, 0.25)
        q, r = divmod(n * 1.5, 2)
        return x * a + b + q + r, lib.full((2,), n * 0.5), f"{n * 0.5:.2f}"

    g = lib.compile(f, backend=compiled) if compiled else f
    x = lib.ones(2)
    return [g(x) for _ in range(5)]


PROGRAMS = {"user_adam": _user_adam, "ema": _ema, "cosine_schedule": _cosine_schedule,
            "size_and_float": _counter_as_size_and_float,
            "decisions_and_conversions": _decisions_and_conversions,
            "floats_read_by_python": _counter_floats_read_by_python}


@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_counter_programs_match_eager(name, backend):
    check_compiled(PROGRAMS[name], backend, fusegrad)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_eager_counter_programs_match_torch(name):
    torch = pytest.importorskip("torch")
    want, error, _ = run_program(PROGRAMS[name], torch)
    assert error is None
    got, error, _ = run_program(PROGRAMS[name], fusegrad)
    assert error is None
    compare(want, got, name, 1e-5, 1e-6)


def _graphs(lib, prog) -> int:
    lib._dynamo.reset()
    lib._dynamo.utils.counters.clear()
    _, error, _ = run_program(functools.partial(prog, compiled="eager"), lib)
    assert error is None
    return lib._dynamo.utils.counters["stats"]["unique_graphs"]


@pytest.mark.parametrize("name, static_one", [("user_adam", False), ("ema", True),
                                               ("cosine_schedule", True)])
def test_a_counter_compiles_as_few_graphs_as_torch(name, static_one):
    """The counter is an input of the graph from its first change on: three graphs for the
    user Adam (empty state, step 1, then every step), as torch.compile makes. A counter that
    changes from 0 to 1 takes one graph more (`static_one`): an integer input stays static at
    0 and 1 here, as sizes do (symbols are at least 2), where torch makes it dynamic at 1."""
    torch = pytest.importorskip("torch")
    assert _graphs(fusegrad, PROGRAMS[name]) == _graphs(torch, PROGRAMS[name]) + static_one


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_aot_traces_a_counter_once(backend):
    """Seven user-Adam steps: one AOT trace per captured graph (three), not one per step."""
    from fusegrad.compiler import logs

    fusegrad._dynamo.reset()
    logs.set_logs(aot_graphs=True)  # (the graphs' text is made only for a log that is on)
    try:
        with logged("aot_graphs", ("TRACED GRAPH\n ===== Forward graph",)) as traces:
            _user_adam(fusegrad, compiled=backend)
    finally:
        logs.set_logs(aot_graphs=False)
    assert len(traces) == 3, len(traces)


def test_counter_arithmetic_is_recorded_in_the_graph():
    """The captured graph computes the bias correction from the step input (`0.9 ** s`,
    `fusegrad._sym_sqrt`), and returns the new count as an int."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    fusegrad._dynamo.reset()
    _user_adam(fusegrad, compiled=backend)
    code = graphs[-1].code
    assert "0.9 ** " in code and "fusegrad._sym_sqrt(" in code, code


def test_sym_math_functions_are_pytorchs():
    """`torch._sym_sqrt` and its siblings compute `math`'s function of a number."""
    for name in ("sqrt", "cos", "cosh", "sin", "sinh", "tan", "tanh", "asin", "acos", "atan",
                 "log2"):
        fn = getattr(fusegrad, f"_sym_{name}")
        assert fn(0.5) == getattr(math, name)(0.5)
    assert fusegrad.sym_sqrt(4) == 2.0
