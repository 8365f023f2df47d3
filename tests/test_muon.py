"""Muon against torch.optim.Muon: parameters and momentum buffers after each of several steps
(wide, tall and square matrices; Nesterov or not, weight decay, both learning-rate
adjustments, other Newton-Schulz coefficients and step counts, a tensor learning rate), with
a scheduler, a closure, step hooks, state_dict round trips, repr and errors; and compiled
steps against eager ones."""

from __future__ import annotations

import io
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from optimizer_steps import SteppedParameters  # noqa: E402

import fusegrad  # noqa: E402

SHAPES = [(3, 5), (6, 2), (4, 4), (1, 7)]


# (the orthogonalisation runs in bfloat16 matmuls: values agree to its rounding)
_STEPPED = SteppedParameters(SHAPES, (1e-5, 1e-6), (1e-6, 1e-7))
_params, _grads, _steps = _STEPPED.params, _STEPPED.grads, _STEPPED.steps
_assert_same = _STEPPED.assert_same


CONFIGS = [{}, {"lr": 0.05, "weight_decay": 0.0, "nesterov": False},
           {"adjust_lr_fn": "match_rms_adamw", "momentum": 0.8},
           {"adjust_lr_fn": "original", "ns_steps": 2, "ns_coefficients": (2.0, -1.5, 0.5),
            "eps": 1e-3},
           {"momentum": 0.0, "lr": 0.01}]


@pytest.mark.parametrize("config", CONFIGS, ids=[str(c) for c in CONFIGS])
def test_steps_match_torch(config):
    want = _steps(torch, (pt := _params(torch)), torch.optim.Muon(pt, **config), 4)
    got = _steps(fusegrad, (pf := _params(fusegrad)), fusegrad.optim.Muon(pf, **config), 4)
    _assert_same(got, want)


def test_tensor_lr_groups_and_scheduler():
    def run(T):
        params = _params(T)
        opt = T.optim.Muon([{"params": params[:2]},
                            {"params": params[2:], "lr": 0.2, "weight_decay": 0.01}],
                           lr=T.tensor(0.1))
        sched = T.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        return _steps(T, params, opt, 3, sched=sched)

    _assert_same(run(fusegrad), run(torch))


def test_closure_hooks_and_state_dict_round_trip():
    def run(T):
        params = _params(T)
        opt = T.optim.Muon(params, lr=0.05)
        log = []
        opt.register_step_post_hook(lambda o, args, kwargs: log.append(len(o.state)))
        losses = [opt.step(lambda: sum((p ** 2).sum() for p in params)).item()]
        for p, g in zip(params, _grads(0)):
            p.grad = T.tensor(g)
        losses.append(opt.step(lambda: sum((p ** 2).sum() for p in params)).item())
        buf = io.BytesIO()
        T.save(opt.state_dict(), buf)
        buf.seek(0)
        resumed = T.optim.Muon(params)
        resumed.load_state_dict(T.load(buf))
        groups = [{k: v for k, v in g.items() if k != "params"} for g in resumed.param_groups]
        return losses, log, groups, repr(resumed), _steps(T, params, resumed, 2, start=1)

    got, want = run(fusegrad), run(torch)
    assert got[:4] == want[:4]
    _assert_same(got[4], want[4])


def _error(T, make):
    try:
        make(T)
    except Exception as e:  # (the type and message are what is compared)
        return type(e).__name__, str(e)
    return None


ERRORS = {
    "vector": lambda T: T.optim.Muon([T.nn.Parameter(T.ones(3))]),
    "lr": lambda T: T.optim.Muon([T.nn.Parameter(T.ones(2, 2))], lr=-1.0),
    "tensor_lr": lambda T: T.optim.Muon([T.nn.Parameter(T.ones(2, 2))], lr=T.ones(2)),
    "momentum": lambda T: T.optim.Muon([T.nn.Parameter(T.ones(2, 2))], momentum=-0.1),
    "weight_decay": lambda T: T.optim.Muon([T.nn.Parameter(T.ones(2, 2))], weight_decay=-1.0),
    "adjust": lambda T: T.optim.Muon([T.nn.Parameter(T.ones(2, 2))], adjust_lr_fn="sqrt"),
    "empty": lambda T: T.optim.Muon([]),
}


def _stepped(T, grad=None, **options):
    p = T.nn.Parameter(T.ones(2, 3))
    p.grad = T.ones(2, 3) if grad is None else grad(T)
    T.optim.Muon([p], **options).step()


STEP_ERRORS = {
    "ns_steps": lambda T: _stepped(T, ns_steps=100),
    "coefficients": lambda T: _stepped(T, ns_coefficients=(1.0, 2.0)),
    "sparse": lambda T: _stepped(T, grad=lambda T: T.ones(2, 3).to_sparse()),
}


@pytest.mark.parametrize("name", sorted({**ERRORS, **STEP_ERRORS}))
def test_errors_match_torch(name):
    make = {**ERRORS, **STEP_ERRORS}[name]
    want = _error(torch, make)
    assert want is not None
    assert _error(fusegrad, make) == want


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compiled_step_matches_eager(backend):
    """A compiled `opt.step` (a training loop's idiom) gives the eager step's values."""
    def run(compiled):
        fusegrad._dynamo.reset()
        params = _params(fusegrad)
        opt = fusegrad.optim.Muon(params, lr=0.05)
        step = fusegrad.compile(opt.step, backend=backend) if compiled else opt.step
        seen = []
        for i in range(3):
            for p, g in zip(params, _grads(i)):
                p.grad = fusegrad.tensor(g)
            step()
            seen.append([p.detach().numpy().copy() for p in params])
        return seen

    for got, want in zip(run(True), run(False), strict=True):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
