"""With `config.trace_optimizer_step` (off by default: the generated update is slower than
eager's fused one), `opt.step()` inside compiled code is recorded as graph ops (SGD, Adam,
AdamW), compiled against eager fusegrad: parameters and state after several compiled training
steps equal eager's, with the graph counts torch.compile gives (PyTorch 2.13: a training step
`zero_grad; forward; backward; step` is 2 graphs with 1 break, the backward, whether the
state exists or the first step makes it; checked against torch where it is installed). Steps
capture cannot record soundly stay graph breaks (the step runs eagerly): closures,
foreach/fused/differentiable, a tensor learning rate, hooks, other optimizers, half
precision, sparse gradients. A scheduler changing `lr` recompiles (options are graph
constants).

No torch is imported outside the `importorskip` tests (this file runs on 3.12 and 3.13 too);
graphs run through `Counter` (the run's FUSEGRAD_TEST_BACKEND) or the backend named."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from compile_support import CAPTURES, Counter, test_backend

import fusegrad as fg

F = fg.nn.functional


@pytest.fixture(autouse=True)
def _trace_steps():
    """The setting that records `opt.step()` (off by default: see `Config`), from a reset:
    the cases share step functions, whose recompile limit all their compiled wrappers
    share, as in torch."""
    fg._dynamo.reset()
    with fg._dynamo.config.patch(trace_optimizer_step=True):
        yield


def test_step_is_a_graph_break_by_default():
    model, opt, step = _setup("Adam", dict(lr=0.01))
    x, y = _data()
    with fg._dynamo.config.patch(trace_optimizer_step=False):
        fg._dynamo.reset()
        explained = fg._dynamo.explain(step)(x, y)
    assert any("step" in str(r) for r in explained.break_reasons), explained.break_reasons

CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.5, weight_decay=0.01, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, amsgrad=True, maximize=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, amsgrad=True, betas=(0.8, 0.9))),
]


def _tol(dtype) -> dict:
    # float32: the graph's operations round differently from eager's fused C passes.
    return dict(rtol=1e-5, atol=1e-6) if dtype is fg.float32 else dict(rtol=1e-9, atol=1e-12)


def _setup(cls: str, kw: dict, dtype=fg.float32, model=None):
    fg.manual_seed(0)
    model = model or fg.nn.Sequential(fg.nn.Linear(4, 8), fg.nn.Tanh(), fg.nn.Linear(8, 3))
    model = model.to(dtype)
    opt = getattr(fg.optim, cls)(model.parameters(), **kw)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return model, opt, step


def _data(dtype=fg.float32):
    fg.manual_seed(1)
    return fg.randn(6, 4, dtype=dtype), fg.tensor([0, 1, 2, 0, 1, 2])


def _same(m1, o1, m2, o2, dtype) -> None:
    """Parameters and optimizer state of two runs equal."""
    for p, q in zip(m1.parameters(), m2.parameters(), strict=True):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), **_tol(dtype))
        s1, s2 = o1.state.get(p, {}), o2.state.get(q, {})
        assert list(s1) == list(s2)
        for k in s1:
            np.testing.assert_allclose(s2[k].numpy(), s1[k].numpy(), **_tol(dtype))


def _run(cls, kw, dtype=fg.float32, steps=6, backend=None, change=None):
    """`steps` training steps eagerly and compiled (`change(i, model, opt)` before step i):
    (the compiled run's counter, its model and optimizer), after comparing both runs."""
    counter = Counter(backend)
    runs = []
    x, y = _data(dtype)
    for compiled in (False, True):
        model, opt, step = _setup(cls, kw, dtype)
        f = fg.compile(step, backend=counter) if compiled else step
        losses = []
        for i in range(steps):
            if change is not None:
                change(i, model, opt)
            losses.append(f(x, y).item())
        runs.append((model, opt, losses))
    (m1, o1, l1), (m2, o2, l2) = runs
    np.testing.assert_allclose(l2, l1, **_tol(dtype))
    _same(m1, o1, m2, o2, dtype)
    return counter, m2, o2, m1, o1


def _step_graph(counter) -> str:
    """The code of the last graph holding an optimizer update ('' if none)."""
    for gm in reversed(counter.modules):
        if any(n.op == "call_method" and n.target in ("addcdiv_", "add_")
               and "param_groups" in str(n.args[0]) for n in gm.graph.nodes):
            return gm.code
    return ""


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("cls,kw", CONFIGS, ids=[f"{c}-{i}" for i, (c, _) in
                                                 enumerate(CONFIGS)])
def test_compiled_steps_equal_eager(cls, kw, dtype):
    counter, m2, o2, m1, o1 = _run(cls, kw, dtype)
    if not CAPTURES:
        return
    # The forward graph, then the step's; an optimizer that keeps state makes it in the
    # first call's step graph, and the next call recompiles (its state keys changed).
    assert counter.graphs == (2 if cls == "SGD" and not kw.get("momentum") else 3)
    assert _step_graph(counter)
    if test_backend() == "eager":
        # The graph's in-place ops move the version counters as eager's update does (AOT's
        # write-back moves each written input's by one instead: see capture/optimizers.py).
        for p, q in zip(m1.parameters(), m2.parameters(), strict=True):
            assert q._version == p._version
            for k in o1.state.get(p, {}):
                assert o2.state[q][k]._version == o1.state[p][k]._version


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("cls,kw", [CONFIGS[2], CONFIGS[5], CONFIGS[7]],
                         ids=["sgd-nesterov", "adam-amsgrad", "adamw-amsgrad"])
def test_each_backend(cls, kw, backend):
    counter = _run(cls, kw, steps=4, backend=backend)[0]
    if CAPTURES:
        assert counter.graphs == 3 and _step_graph(counter)


def test_step_alone_is_one_graph():
    """A compiled function that only steps (gradients made outside): one graph, reused."""
    results = []
    for compiled in (False, True):
        model, opt, _ = _setup("Adam", dict(lr=0.01, weight_decay=0.1))
        counter = Counter()

        def update(opt=opt):
            opt.step()

        f = fg.compile(update, backend=counter, fullgraph=False) if compiled else update
        x, y = _data()
        for _ in range(4):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            f()
        results.append((model, opt))
    _same(*results[0], *results[1], fg.float32)
    if CAPTURES:
        assert counter.graphs == 2  # the first step (making the state), then the others
        # With its state made, it is one graph under fullgraph=True too.
        g = fg.compile(update, backend=Counter(), fullgraph=True)
        g()


def test_scheduler_recompiles():
    """`lr` is a graph constant guarded by value: each change recompiles (as torch.compile
    with a float lr), and every step uses the current value."""
    def change(i, model, opt):
        if i in (2, 4):
            for g in opt.param_groups:
                g["lr"] *= 0.5

    counter = _run("SGD", dict(lr=0.1, momentum=0.9), steps=6, change=change)[0]
    if CAPTURES:
        # forward, the first step's (making the momentum buffers), a step graph per lr
        assert counter.graphs == 5


def test_lr_scheduler_step():
    """`opt.step` as an LR scheduler wraps it (noting the call, read by the scheduler's
    warning) is traced too: the note is made, no warning, each new lr recompiles."""
    results = []
    for compiled in (False, True):
        model, opt, step = _setup("SGD", dict(lr=0.1))
        sched = fg.optim.lr_scheduler.StepLR(opt, 2, 0.5)
        counter = Counter()
        f = fg.compile(step, backend=counter) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # (the scheduler's "step before optimizer.step")
            for _ in range(4):
                f(*_data())
                sched.step()
        assert opt._opt_called is True
        results.append((model, opt))
    _same(*results[0], *results[1], fg.float32)
    if CAPTURES:
        assert counter.graphs == 3 and _step_graph(counter)  # forward, two learning rates


def test_param_changes_recompile():
    """A parameter losing and regaining its gradient, a new parameter group, state loaded
    from a state_dict (new state tensors) and an optimizer swapped for a new one."""
    extra = {}

    def change(i, model, opt):
        if i == 1:
            model[0].weight.requires_grad_(False)
        if i == 2:
            model[0].weight.requires_grad_(True)
        if i == 3:
            p = fg.nn.Parameter(fg.ones(3))
            extra[id(opt)] = p
            opt.add_param_group({"params": [p], "lr": 0.3})
        if i == 4:
            opt.load_state_dict(opt.state_dict())

    _run("Adam", dict(lr=0.01), steps=6, change=change)
    _run("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.1), steps=6, change=change)


@pytest.mark.parametrize("case", ["foreach", "fused", "tensor_lr",
                                  "hook", "subclass", "adagrad", "float16", "closure"])
def test_breaks_stay_eager(case):
    """Steps the graph does not record run eagerly: values equal eager's, no step graph."""
    cls, kw = "Adam", dict(lr=0.01)
    if case in ("foreach", "fused"):
        kw[case] = True
    if case == "adagrad":
        cls = "Adagrad"
    dtype = fg.float16 if case == "float16" else fg.float32
    hooks = []

    def change(i, model, opt):
        if case == "tensor_lr" and i == 2:
            opt.param_groups[0]["lr"] = fg.tensor(0.02)
        if case == "hook" and i == 2:
            opt.register_step_post_hook(lambda o, a, k: hooks.append(1))
        if case == "subclass" and i == 0:
            opt.__class__ = type("MyAdam", (fg.optim.Adam,), {})

    if dtype is fg.float16:
        counter = Counter()
        runs = []
        for compiled in (False, True):
            model, opt, step = _setup(cls, kw, fg.float16)
            f = fg.compile(lambda opt=opt: opt.step(), backend=counter) if compiled \
                else opt.step
            for _ in range(3):
                for p in model.parameters():
                    p.grad = fg.full_like(p, 0.5)
                f()
            runs.append([p.detach().numpy().copy() for p in model.parameters()])
        for a, b in zip(*runs, strict=True):
            np.testing.assert_array_equal(b, a)
        assert counter.graphs == 0
        return
    if case == "closure":
        runs = []
        for compiled in (False, True):
            model, opt, _ = _setup("SGD", dict(lr=0.1, momentum=0.9))
            x, y = _data()

            def closure(opt=opt, model=model, x=x, y=y):
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                return loss

            def train(opt=opt, closure=closure):
                return opt.step(closure)

            f = fg.compile(train, backend=Counter()) if compiled else train
            runs.append([f().item() for _ in range(4)])
        np.testing.assert_allclose(runs[1], runs[0], rtol=1e-6)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (a recompile past the limit warns)
        counter = _run(cls, kw, steps=4, change=change)[0]
    if case == "hook":
        assert len(hooks) == 4  # twice in each run, once per step
    if case in ("tensor_lr", "hook"):
        return  # (steps before the change were graphs)
    assert not _step_graph(counter)


def test_differentiable_raises_as_eager():
    """differentiable=True steps the parameters with autograd recording: eager's error for
    a leaf that requires grad, raised by the compiled step too (it runs eagerly)."""
    errors = []
    for compiled in (False, True):
        _, _, step = _setup("Adam", dict(lr=0.01, differentiable=True))
        f = fg.compile(step, backend=Counter()) if compiled else step
        with pytest.raises(RuntimeError) as info:
            f(*_data())
        errors.append(str(info.value))
    assert errors[1] == errors[0]


def test_sparse_gradients_stay_eager():
    results = []
    for compiled in (False, True):
        fg.manual_seed(0)
        emb = fg.nn.Embedding(10, 3, sparse=True)
        opt = fg.optim.SGD(emb.parameters(), lr=0.1, momentum=0.9)
        counter = Counter()

        def step(i, opt=opt, emb=emb):
            opt.zero_grad()
            emb(i).sum().backward()
            opt.step()

        f = fg.compile(step, backend=counter) if compiled else step
        for _ in range(3):
            f(fg.tensor([1, 2, 2, 5]))
        results.append(emb.weight.detach().numpy().copy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6)
    assert not _step_graph(counter)


@pytest.mark.parametrize("cls,kw", CONFIGS, ids=[f"{c}-{i}" for i, (c, _) in
                                                 enumerate(CONFIGS)])
def test_traced_update_run_eagerly(cls, kw):
    """The traced update (what the graph records) run as plain tensor code under no_grad
    equals the optimizer's own step, on every Python (no capture needed)."""
    model, opt, _ = _setup(cls, kw, fg.float64)
    model2, opt2, _ = _setup(cls, kw, fg.float64)
    x, y = _data(fg.float64)
    for i in range(4):
        for m, o in ((model, opt), (model2, opt2)):
            o.zero_grad()
            F.cross_entropy(m(x), y).backward()
        opt.step()
        if i == 0:  # (the first step makes the state)
            opt2.step()
            continue
        plan = opt2._trace_plan()
        assert not isinstance(plan, str), plan
        with fg.no_grad():
            for _, _, p, keys, first, options in plan:
                assert not first
                type(opt2)._traced_update(p, p.grad, *(opt2.state[p][k] for k in keys),
                                          first=False, **options)
    _same(model, opt, model2, opt2, fg.float64)


def test_two_steps_in_one_graph():
    """Two steps in one compiled call: the second of a first call, whose state the graph
    makes (set after it), breaks and runs eagerly; later calls are one graph."""
    results = []
    for compiled in (False, True):
        model, opt, _ = _setup("Adam", dict(lr=0.01, amsgrad=True))
        opt2 = fg.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)

        def two(opt=opt, opt2=opt2):
            opt.step()
            opt.step()
            opt2.step()

        f = fg.compile(two, backend=Counter()) if compiled else two
        x, y = _data()
        for _ in range(3):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            f()
        results.append((model, opt))
        assert float(opt.state[model[0].weight]["step"]) == 6
    _same(*results[0], *results[1], fg.float32)


def test_against_torch_graph_counts():
    """torch.compile's counts for the same training step, with its state made by one eager
    step and without (torch traces the lazy state, as capture does): 2 graphs, 1 break
    (the backward), for AdamW (amsgrad)."""
    torch = pytest.importorskip("torch")
    if not CAPTURES:
        pytest.skip("capture runs on CPython 3.11-3.13")
    import fusegrad._dynamo as fdyn

    for cls, kw in (CONFIGS[7],):
        counts = []
        for lib, dyn in ((torch, torch._dynamo), (fg, fdyn)):
            lib.manual_seed(0)
            model = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.Tanh(), lib.nn.Linear(8, 3))
            opt = getattr(lib.optim, cls)(model.parameters(), **kw)

            def step(x, y, lib=lib, model=model, opt=opt):
                opt.zero_grad()
                loss = lib.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                return loss

            x, y = lib.randn(6, 4), lib.tensor([0, 1, 2, 0, 1, 2])
            for _ in range(2):  # fresh, then with its state made
                dyn.reset()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ex = dyn.explain(step)(x, y)
                counts.append((ex.graph_count, ex.graph_break_count))
        assert counts[2:] == counts[:2] == [(2, 1), (2, 1)], (cls, counts)
