"""The default `inductor` backend: AOT autograd, then generated C for every graph.

Oracles: eager execution (values, gradients, trained weights, dropout masks for one seed)
and PyTorch 2.13 (the errors and warnings of `mode=` and `options=`).
"""

from __future__ import annotations

import copy
import logging
import warnings

import numpy as np
import pytest
import torch
from compile_support import Counter

import fusegrad
from fusegrad.compiler import logs
from fusegrad.compiler.codegen import build

needs_cc = pytest.mark.skipif(build.compiler() is None, reason="no C compiler")


def _error(lib, **kw):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.compile(lambda x: x + 1, **kw)
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, str(e)
    return None


@pytest.mark.parametrize("kw", [
    {"mode": "bogus"},
    {"mode": "default", "options": {"debug": True}},
    {"backend": "eager", "mode": "default", "options": {"x": 1}},
    {"options": {"cpp.threads": "a"}},
    {"options": {"fallback_random": 1}},
    {"mode": "lite"}, {"mode": "reduce-overhead"}, {"mode": "max-autotune"},
    {"mode": "max-autotune-no-cudagraphs"}, {"options": {"cpp.threads": 2}},
    {"options": {"debug": True, "fallback_random": True}},
    {"backend": "eager", "mode": "bogus"}, {"backend": "aot_eager", "options": {"x": 1}},
], ids=str)
def test_mode_and_options_errors_match_torch(kw):
    assert _error(fusegrad, **kw) == _error(torch, **kw)


def test_unknown_option_lists_the_known_ones():
    with pytest.raises(RuntimeError) as e:
        fusegrad.compile(lambda x: x, options={"nonexist": 1})
    known = fusegrad._inductor.list_options()
    assert str(e.value) == f"Unexpected optimization option nonexist, known options are {known}"
    assert set(known) <= set(torch._inductor.list_options())  # PyTorch's names


def test_mode_options_match_torch():
    import torch._inductor

    assert fusegrad._inductor.list_mode_options() == torch._inductor.list_mode_options()
    for mode in ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
        assert fusegrad._inductor.list_mode_options(mode) == \
            torch._inductor.list_mode_options(mode)


def test_other_backends_only_warn_about_mode_and_options():
    x = fusegrad.ones(3)
    with pytest.warns(UserWarning, match=r"eager backend ignoring extra kwargs \{'mode': 'bo"):
        f = fusegrad.compile(lambda x: x * 2, backend="eager", mode="bogus")
    np.testing.assert_array_equal(f(x).numpy(), [2, 2, 2])
    with pytest.warns(UserWarning, match="aot_autograd-based backend ignoring extra kwargs"):
        f = fusegrad.compile(lambda x: x * 2, backend="aot_eager", options={"x": 1})
    np.testing.assert_array_equal(f(x).numpy(), [2, 2, 2])


@pytest.fixture
def output_code(caplog):
    logs.set_logs(output_code=True, graph_breaks=True)
    caplog.set_level(logging.INFO, logger="fusegrad.compiler")
    logs.log.propagate = True
    yield caplog
    logs.set_logs(output_code=False, graph_breaks=False)
    logs.log.propagate = False


@needs_cc
def test_default_backend_runs_fused_kernels_forward_and_backward(output_code):
    def f(x, y):
        return ((fusegrad.sin(x) * fusegrad.exp(-x * x) + 0.5 * y).softmax(-1) * y).sum()

    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((4, 33)).astype(np.float32) for _ in range(2)]
    xs[0][0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    got = [fusegrad.tensor(a, requires_grad=True) for a in xs]
    want = [fusegrad.tensor(a, requires_grad=True) for a in xs]
    out = fusegrad.compile(f)(*got)
    out.backward()
    ref = f(*want)
    ref.backward()
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5,
                               equal_nan=True)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6,
                                   equal_nan=True)
    text = output_code.text
    assert "cpp_fused_" in text and "def call(args)" in text
    assert "cannot compile" not in text
    assert out.grad_fn.name() == "CompiledFunctionBackward"


@needs_cc
def test_graph_the_code_generator_rejects_runs_as_fx_code(output_code, monkeypatch):
    from fusegrad.compiler import codegen

    def refuse(gm, example_inputs, options=None):
        raise NotImplementedError("no lowering for this test")

    monkeypatch.setattr(codegen, "compile_graph", refuse)
    x = fusegrad.randn(5, requires_grad=True)
    out = fusegrad.compile(lambda t: (t.exp() * 2).sum())(x)
    out.backward()
    np.testing.assert_allclose(out.item(), (x.detach().exp() * 2).sum().item(), rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), (x.detach().exp() * 2).numpy(), rtol=1e-6)
    assert "runs as FX code: NotImplementedError: no lowering for this test" in output_code.text


@needs_cc
def test_compiled_dropout_draws_eagers_values():
    fusegrad.manual_seed(0)
    model = fusegrad.nn.Sequential(fusegrad.nn.Linear(8, 16), fusegrad.nn.ReLU(),
                                   fusegrad.nn.Dropout(0.5), fusegrad.nn.Linear(16, 4))
    x = fusegrad.randn(6, 8)
    compiled = fusegrad.compile(model)
    for seed in (1, 2):
        fusegrad.manual_seed(seed)
        got = compiled(x)
        got.sum().backward()
        g_got = model[0].weight.grad.clone()
        model.zero_grad()
        fusegrad.manual_seed(seed)
        want = model(x)
        want.sum().backward()
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
        np.testing.assert_array_equal(g_got.numpy(), model[0].weight.grad.numpy())
        model.zero_grad()


def _train(model, x, y, steps: int, backend=None):
    opt = fusegrad.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = fusegrad.nn.CrossEntropyLoss()
    run = fusegrad.compile(model, backend=backend) if backend is not None else model
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(run(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _torch_twin(name: str):
    import inspect

    from fusegrad.models import simple

    ns: dict = {"__name__": "twin"}
    src = inspect.getsource(simple).replace("from .. import nn", "from torch import nn")
    exec(compile(src, "twin", "exec"), ns)
    return ns["MLP"](784, (1024, 1024), 10) if name == "mlp" else ns["LeNet5"]()


@needs_cc
@pytest.mark.parametrize("name", ["mlp", "lenet"])
def test_compiled_training_step_equals_eager(name):
    fusegrad.manual_seed(0)
    if name == "mlp":
        model = fusegrad.models.MLP(784, (1024, 1024), 10)
        x = fusegrad.randn(256, 784)
    else:
        model = fusegrad.models.LeNet5()
        x = fusegrad.randn(64, 1, 32, 32)
    y = fusegrad.randint(0, 10, (x.shape[0],))
    twin = copy.deepcopy(model)
    counter = Counter("inductor")
    got = _train(model, x, y, 3, counter)
    want = _train(twin, x, y, 3)
    # No more graphs than torch.compile captures of the same model (torch.nn twin).
    th_counter = Counter()
    th_model = _torch_twin(name)
    torch._dynamo.reset()
    torch.compile(th_model, backend=th_counter)(torch.from_numpy(x.numpy()))
    assert counter.graphs <= th_counter.graphs == 1
    np.testing.assert_allclose(got, want, rtol=1e-5)
    for (k, a), b in zip(model.state_dict().items(), twin.state_dict().values()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6, err_msg=k)


@needs_cc
def test_inputs_written_in_place_and_running_statistics_are_written_back():
    def f(x, y):
        x.add_(1)
        return x * y

    xs = [fusegrad.ones(3), fusegrad.ones(3)]
    ys = [fusegrad.full((3,), 2.0, requires_grad=True) for _ in range(2)]
    out = fusegrad.compile(f)(xs[0], ys[0])
    ref = f(xs[1], ys[1])
    np.testing.assert_array_equal(out.detach().numpy(), ref.detach().numpy())
    np.testing.assert_array_equal(xs[0].numpy(), xs[1].numpy())
    assert xs[0]._version == xs[1]._version
    fusegrad.manual_seed(0)
    bn = fusegrad.nn.BatchNorm1d(3)
    twin = copy.deepcopy(bn)
    x = fusegrad.randn(8, 3)
    fusegrad.compile(bn)(x).sum().backward()
    twin(x).sum().backward()
    for (k, a), b in zip(bn.state_dict().items(), twin.state_dict().values()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7, err_msg=k)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_input_reached_only_through_a_returned_view_keeps_a_none_gradient(backend):
    def f(a, b):
        return a * 2, b.t()

    a, b = (fusegrad.randn(3, 3, requires_grad=True) for _ in range(2))
    out, view = fusegrad.compile(f, backend=backend)(a, b)
    out.sum().backward()
    assert b.grad is None  # eager: b is not on the loss's path (PyTorch's AOT agrees)
    np.testing.assert_array_equal(a.grad.numpy(), np.full((3, 3), 2, np.float32))
    assert view._base is b


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_tensor_assert_in_a_graph_still_raises(backend):
    from compile_constructs import exp_at_least_half  # (pytest would rewrite one here)

    compiled = fusegrad.compile(exp_at_least_half, backend=backend)
    np.testing.assert_allclose(compiled(fusegrad.ones(3)).numpy(), np.full(3, 2 * np.e),
                               rtol=1e-6)
    with pytest.raises(AssertionError, match="^too small$"):
        compiled(-fusegrad.ones(3) * 5)


class _Scale:
    def __init__(self):
        self.k = 2.0

    def __rmul__(self, x):
        return x * self.k


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_user_operator_in_a_graph_reads_its_state_on_each_call(backend):
    scale = _Scale()
    compiled = fusegrad.compile(lambda x: x * scale + 1, backend=backend)
    x = fusegrad.tensor([1.0, -2.0])
    np.testing.assert_array_equal(compiled(x).numpy(), [3, -3])
    scale.k = 5.0
    np.testing.assert_array_equal(compiled(x).numpy(), [6, -9])


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_grad_mode_switches_in_graphs_take_effect(backend):
    def f(w, g):
        with fusegrad.no_grad():
            print(end="")  # a graph break inside the block
            w.add_(g)
            w.mul_(0.5)
        return w * 3

    ws = [fusegrad.ones(3).requires_grad_() for _ in range(2)]
    got = fusegrad.compile(f, backend=backend)(ws[0], fusegrad.ones(3))
    want = f(ws[1], fusegrad.ones(3))
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    np.testing.assert_array_equal(ws[0].detach().numpy(), ws[1].detach().numpy())
    got.sum().backward()
    np.testing.assert_array_equal(ws[0].grad.numpy(), np.full(3, 3, np.float32))
