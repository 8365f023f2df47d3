"""Optimizers written by users (subclasses of `torch.optim.Optimizer` whose `step` makes its
state lazily, `state = self.state[p]` of a defaultdict) compiled whole: the first step
makes each parameter's entry as eager execution does and stores the new tensors into it
after the graph, later steps read them; checked against the same optimizer stepped eagerly
on each backend, with graphs and breaks counted. Also model-EMA and foreach-style updates
of the same shape, and the missing keys that still break (a plain dict raises KeyError,
another default factory)."""

from __future__ import annotations

import collections

import pytest

import fusegrad as torch
from fusegrad._dynamo.utils import counters
from fusegrad.optim import Optimizer

BACKENDS = ["eager", "aot_eager", "inductor"]


class Lion(Optimizer):
    """The Lion optimizer as its authors' reference code writes it."""

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.data.mul_(1 - group["lr"] * group["weight_decay"])
                grad = p.grad
                state = self.state[p]
                if len(state) == 0:
                    state["exp_avg"] = torch.zeros_like(p)
                exp_avg = state["exp_avg"]
                beta1, beta2 = group["betas"]
                update = exp_avg * beta1 + grad * (1 - beta1)
                p.add_(update.sign_(), alpha=-group["lr"])
                exp_avg.mul_(beta2).add_(grad, alpha=1 - beta2)
        return None


class TensorStepAdam(Optimizer):
    """Adam with its step count a tensor in the state (as torch's own keeps it)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["m"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["v"] = torch.zeros_like(p)
                state["step"] += 1
                m, v = state["m"], state["v"]
                m.lerp_(p.grad, 1 - b1)
                v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                bc1 = 1 - b1 ** state["step"]
                bc2 = 1 - b2 ** state["step"]
                denom = (v.sqrt() / bc2.sqrt()).add_(group["eps"])
                p.sub_(group["lr"] * m / bc1 / denom)


class ForeachMomentum(Optimizer):
    """SGD with momentum written with `_foreach_*` calls over the group's lists."""

    def __init__(self, params, lr=0.1, momentum=0.9):
        super().__init__(params, dict(lr=lr, momentum=momentum))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            grads = [p.grad for p in params]
            bufs = []
            for p in params:
                state = self.state[p]
                if "buf" not in state:
                    state["buf"] = torch.zeros_like(p)
                bufs.append(state["buf"])
            torch._foreach_mul_(bufs, group["momentum"])
            torch._foreach_add_(bufs, grads)
            torch._foreach_add_(params, bufs, alpha=-group["lr"])


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def _train(make_opt, backend, steps=4):
    model = _model()
    opt = make_opt(model.parameters())
    step = opt.step if backend is None else torch.compile(opt.step, backend=backend)
    torch.manual_seed(1)
    for _ in range(steps):
        x = torch.randn(5, 4)
        opt.zero_grad()
        model(x).pow(2).sum().backward()
        step()
    return [p.detach().clone() for p in model.parameters()], opt


OPTIMIZERS = {
    "lion": lambda ps: Lion(ps, lr=1e-2, weight_decay=0.1),
    "tensor_step_adam": lambda ps: TensorStepAdam(ps, lr=1e-2),
    "foreach_momentum": lambda ps: ForeachMomentum(ps, lr=0.05),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_user_optimizer_compiles_whole(name, backend):
    want, eager_opt = _train(OPTIMIZERS[name], None)
    torch._dynamo.reset()
    counters.clear()
    got, compiled_opt = _train(OPTIMIZERS[name], backend)
    for a, b in zip(got, want):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)
    # The state the compiled steps made: the same keys, in the same order, equal values.
    assert len(compiled_opt.state) == len(eager_opt.state)
    for sa, sb in zip(compiled_opt.state.values(), eager_opt.state.values()):
        assert list(sa) == list(sb)
        for k in sa:
            assert torch.allclose(sa[k], sb[k], rtol=1e-5, atol=1e-6)
    # The first step (the state made) and the later ones (read): two graphs, no break.
    assert dict(counters["graph_break"]) == {}
    assert counters["stats"]["unique_graphs"] == 2


def test_missing_key_of_a_plain_dict_raises_as_eagerly():
    state: dict = {}

    def step(p):
        return state[p] * 2

    p = torch.ones(2)
    with pytest.raises(KeyError):
        step(p)
    with pytest.raises(KeyError):
        torch.compile(step, backend="eager")(p)
    assert state == {}


def test_missing_key_of_another_default_factory_breaks():
    """A defaultdict of another factory (its item is not an empty dict) is read for real:
    a graph break, the same result and the same item made."""
    made = collections.defaultdict(list)

    def step(p, x):
        made[p].append(1)
        return x * len(made[p])

    torch._dynamo.reset()
    counters.clear()
    p, x = torch.ones(2), torch.ones(2)
    compiled = torch.compile(step, backend="eager")
    assert compiled(p, x).tolist() == [1.0, 1.0]
    assert compiled(p, x).tolist() == [2.0, 2.0]
    assert list(made) == [p] and made[p] == [1, 1]


def test_entry_made_once_per_parameter_across_steps():
    """The first compiled step makes one entry per parameter (no key for a fake tensor,
    none twice), in eager's order."""
    model = _model()
    opt = Lion(model.parameters(), lr=1e-2)
    step = torch.compile(opt.step, backend="eager")
    for _ in range(3):
        opt.zero_grad()
        model(torch.ones(1, 4)).sum().backward()
        step()
    assert list(opt.state) == list(model.parameters())
    assert all(list(s) == ["exp_avg"] for s in opt.state.values())
