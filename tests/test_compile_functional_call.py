"""`func.functional_call` under `fusegrad.compile`: the module's call is traced with the
given tensors standing for its parameters and buffers (one graph, as torch.compile), with
values, gradients, the given buffers' in-place updates and the module's own state equal to
eager's. A module that reads a replaced tensor another way (an LSTM's weight list, a tie
undone by `tie_weights=False`) or assigns a given name runs for real at a break. Oracle:
eager fusegrad on the same inputs (no torch here: the 3.12/3.13 runs use this file).
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.func import functional_call

BACKENDS = ["eager", "aot_eager", "inductor"]


class TiedLM(fg.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = fg.nn.Embedding(10, 4)
        self.out = fg.nn.Linear(4, 10, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, i):
        return self.out(self.emb(i))


class BatchNormNet(fg.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = fg.nn.Linear(3, 4)
        self.bn = fg.nn.BatchNorm1d(4)

    def forward(self, x):
        return self.bn(self.lin(x)).relu()


class AssignsBuffer(fg.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", fg.zeros(()))
        self.w = fg.nn.Parameter(fg.ones(3))

    def forward(self, x):
        self.count = self.count + 1
        return x * self.w + self.count


class Recurrent(fg.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = fg.nn.LSTM(3, 4, batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0]


def _mlp():
    fg.manual_seed(0)
    return fg.nn.Sequential(fg.nn.Linear(3, 4), fg.nn.Tanh(), fg.nn.Linear(4, 2))


def _scaled(module, step):
    return {k: (v.detach() * (1 + 0.1 * step)).requires_grad_()
            for k, v in module.named_parameters()}


def _rows(step, shape=(5, 3)):
    rng = np.random.default_rng(step)
    return fg.tensor(rng.standard_normal(shape).astype("float32"))


CASES = {
    "all_parameters": (_mlp, _scaled, _rows, {}),
    "one_parameter": (_mlp, lambda m, s: {"0.weight": fg.full((4, 3), s + 1.0,
                                                              requires_grad=True)}, _rows, {}),
    "tuple_of_dicts": (_mlp, lambda m, s: tuple({k: v} for k, v in _scaled(m, s).items()),
                       _rows, {}),
    "tied_weights": (TiedLM, lambda m, s: {"emb.weight": _rows(s, (10, 4)).requires_grad_()},
                     lambda s: fg.tensor([1, 2, s]), {}),
    "buffers_given": (BatchNormNet, lambda m, s: {**_scaled(m, s), **{
        k: v.clone() for k, v in m.named_buffers()}}, _rows, {}),
    "parameters_only": (BatchNormNet, _scaled, _rows, {}),
    "keyword_arguments": (_mlp, _scaled, _rows, {"strict": True, "tie_weights": True}),
}


def _given(p):
    """The tensors a dict (or a tuple of dicts) gives, by name."""
    return {k: v for d in (p if isinstance(p, tuple) else (p,)) for k, v in d.items()}


def _copy(p):
    def leaf(v):
        return v.detach().clone().requires_grad_(v.requires_grad)

    if isinstance(p, tuple):
        return tuple({k: leaf(v) for k, v in d.items()} for d in p)
    return {k: leaf(v) for k, v in p.items()}


def _run(make_module, make_params, make_input, options, backend, steps=3):
    """Eager and compiled `functional_call` over `steps` calls, compared after each."""
    fg._dynamo.reset()
    base = make_module()
    eager_module, compiled_module = copy.deepcopy(base), copy.deepcopy(base)

    def fn(module, params, x):
        return functional_call(module, params, (x,), **options)

    compiled = fg.compile(fn, backend=backend)
    for step in range(steps):
        p_eager = make_params(eager_module, step)
        p_compiled = _copy(p_eager)
        x = make_input(step)
        expected, got = fn(eager_module, p_eager, x), compiled(compiled_module, p_compiled, x)
        expected.float().sum().backward()
        got.float().sum().backward()
        np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
        given_eager, given_compiled = _given(p_eager), _given(p_compiled)
        for name, t in given_eager.items():
            other = given_compiled[name]
            np.testing.assert_allclose(other.detach().numpy(), t.detach().numpy(), rtol=1e-6)
            assert (other.grad is None) == (t.grad is None), name
            if t.grad is not None:
                # (atol: a bias before batch norm has a gradient of zero, up to rounding)
                np.testing.assert_allclose(other.grad.numpy(), t.grad.numpy(), rtol=1e-5,
                                           atol=1e-5)
        state_eager, state_compiled = eager_module.state_dict(), compiled_module.state_dict()
        for name, t in state_eager.items():
            # (generated C may round a running statistic's update differently)
            np.testing.assert_allclose(state_compiled[name].numpy(), t.numpy(), rtol=1e-6)
    return compiled_module


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_functional_call_is_traced_with_the_given_tensors(name, backend):
    make_module, make_params, make_input, options = CASES[name]
    _run(make_module, make_params, make_input, options, backend)
    fg._dynamo.reset()
    module = make_module()

    def fn(params, x):
        return functional_call(module, params, (x,), **options)

    explained = fg._dynamo.explain(fn)(make_params(module, 0), make_input(0))
    assert (explained.graph_count, explained.break_reasons) == (1, [])


BREAKS = {
    "assigns_given_buffer": (AssignsBuffer, lambda m, s: {
        "count": fg.full((), 5.0), "w": fg.ones(3, requires_grad=True)},
        lambda s: fg.ones(3), {}, "assignment to 'count'"),
    "weights_read_as_a_list": (Recurrent, _scaled, lambda s: _rows(s, (2, 5, 3)), {},
                               "read other than as its module's attribute"),
    "tie_undone": (TiedLM, lambda m, s: {"emb.weight": _rows(s, (10, 4)).requires_grad_()},
                   lambda s: fg.tensor([1, 2, s]), {"tie_weights": False},
                   "read other than as its module's attribute"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(BREAKS))
def test_state_read_or_written_another_way_runs_for_real(name, backend):
    make_module, make_params, make_input, options, why = BREAKS[name]
    _run(make_module, make_params, make_input, options, backend)
    fg._dynamo.reset()
    module = make_module()

    def fn(params, x):
        return functional_call(module, params, (x,), **options)

    explained = fg._dynamo.explain(fn)(make_params(module, 0), make_input(0))
    assert len(explained.break_reasons) == 1 and why in explained.break_reasons[0].reason


def test_strict_error_is_eager_error():
    module = _mlp()

    def fn(x):
        return functional_call(module, {"0.weight": fg.ones(4, 3)}, (x,), strict=True)

    with pytest.raises(RuntimeError) as eager:
        fn(_rows(0))
    for backend in BACKENDS:
        fg._dynamo.reset()
        with pytest.raises(RuntimeError) as compiled:
            fg.compile(fn, backend=backend)(_rows(0))
        assert str(compiled.value) == str(eager.value)


def test_deprecated_stateless_spelling_is_traced_too():
    module = _mlp()
    params = _scaled(module, 1)

    def fn(x):
        return fg.nn.utils.stateless.functional_call(module, params, x)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        expected = fn(_rows(0))
        fg._dynamo.reset()
        got = fg.compile(fn, backend="aot_eager")(_rows(0))
        fg._dynamo.reset()
        explained = fg._dynamo.explain(fn)(_rows(0))
    np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), rtol=1e-6)
    assert explained.graph_count == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_meta_learning_step_is_one_graph_equal_to_eager(backend):
    """MAML: an inner step's fast weights (grads with create_graph) fed back through
    functional_call, then an outer optimizer step."""
    def inner_outer(module, x, y, xq, yq):
        params = dict(module.named_parameters())
        loss = (functional_call(module, params, (x,)) - y).pow(2).mean()
        grads = fg.autograd.grad(loss, list(params.values()), create_graph=True)
        fast = {k: v - 0.1 * g for (k, v), g in zip(params.items(), grads)}
        return (functional_call(module, fast, (xq,)) - yq).pow(2).mean()

    fg._dynamo.reset()
    m1 = fg.nn.Sequential(fg.nn.Linear(3, 8), fg.nn.ReLU(), fg.nn.Linear(8, 1))
    m2 = copy.deepcopy(m1)
    o1, o2 = fg.optim.SGD(m1.parameters(), lr=0.05), fg.optim.SGD(m2.parameters(), lr=0.05)
    compiled = fg.compile(inner_outer, backend=backend)
    for step in range(3):
        data = [_rows(10 * step + i, s) for i, s in enumerate(((6, 3), (6, 1), (6, 3), (6, 1)))]
        for module, opt, f in ((m1, o1, inner_outer), (m2, o2, compiled)):
            opt.zero_grad()
            f(module, *data).backward()
            opt.step()
        for a, b in zip(m1.parameters(), m2.parameters()):
            np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5,
                                       atol=1e-6)
    fg._dynamo.reset()
    assert fg._dynamo.explain(inner_outer)(m2, *data).graph_count == 1
