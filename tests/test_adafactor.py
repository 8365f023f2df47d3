"""Adafactor against torch.optim.Adafactor: parameters and state after each of several steps
(matrices, batched matrices, vectors, scalars; weight decay, maximize, d, eps, beta2_decay),
with a learning-rate scheduler, state_dict round trips, defaults, repr and errors.

The norms (of the parameter, the update and the factored rows) reduce in a different order
from PyTorch's vectorised ones, so values agree to float32 rounding, not bit for bit."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from optimizer_steps import SteppedParameters  # noqa: E402

import fusegrad  # noqa: E402

SHAPES = [(3, 4), (4,), (), (2, 3, 4), (5, 1), (1, 6)]


_STEPPED = SteppedParameters(SHAPES, (2e-5, 1e-6), (2e-5, 1e-7))
_params, _grads, _steps = _STEPPED.params, _STEPPED.grads, _STEPPED.steps
_assert_same = _STEPPED.assert_same


CONFIGS = [{}, {"lr": 0.1, "weight_decay": 0.1}, {"maximize": True, "d": 2.0},
           {"eps": (1e-10, 1e-2)}, {"beta2_decay": -0.5, "lr": 0.5}, {"lr": 1e-3},
           {"foreach": False}]


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_steps_are_torchs(config):
    results = []
    for T in (torch, fusegrad):
        params = _params(T)
        opt = T.optim.Adafactor(params, **config)
        results.append(_steps(T, params, opt, 8))
    _assert_same(results[1], results[0])


def test_param_groups_and_scheduler_as_torch():
    results = []
    for T in (torch, fusegrad):
        params = _params(T)
        opt = T.optim.Adafactor([{"params": params[:3]},
                                 {"params": params[3:], "lr": 0.05, "weight_decay": 0.01}])
        sched = T.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        results.append(_steps(T, params, opt, 6, sched=sched))
    _assert_same(results[1], results[0])


def test_state_dict_round_trip_continues_as_torch():
    """Stop after 3 steps, load the state into a fresh optimizer over copies of the
    parameters, and continue: the same as torch doing the same."""
    results = []
    for T in (torch, fusegrad):
        params = _params(T)
        opt = T.optim.Adafactor(params, lr=0.05, weight_decay=0.02)
        _steps(T, params, opt, 3)
        state = opt.state_dict()
        copies = [T.nn.Parameter(p.detach().clone()) for p in params]
        fresh = T.optim.Adafactor(copies)
        fresh.load_state_dict(state)
        assert fresh.param_groups[0]["lr"] == 0.05
        results.append(_steps(T, copies, fresh, 4, start=3))
        sd = fresh.state_dict()
        results[-1].append(sd["param_groups"])
    _assert_same(results[1][:-1], results[0][:-1])
    assert results[1][-1] == results[0][-1]


def test_defaults_and_repr_as_torch():
    t = torch.optim.Adafactor(_params(torch))
    f = fusegrad.optim.Adafactor(_params(fusegrad))
    assert f.defaults == t.defaults
    assert repr(f) == repr(t)
    lr_t = torch.optim.Adafactor(_params(torch), lr=torch.tensor(0.25))
    lr_f = fusegrad.optim.Adafactor(_params(fusegrad), lr=fusegrad.tensor(0.25))
    assert lr_f.defaults["lr"] == float(lr_t.defaults["lr"])


@pytest.mark.parametrize("kwargs", [{"lr": -1}, {"beta2_decay": 0.5}, {"eps": (-1, 1e-3)},
                                    {"eps": (None, -1e-3)}, {"d": 0.5},
                                    {"weight_decay": -1}], ids=str)
def test_argument_errors_as_torch(kwargs):
    with pytest.raises(ValueError) as want:
        torch.optim.Adafactor(_params(torch), **kwargs)
    with pytest.raises(ValueError) as got:
        fusegrad.optim.Adafactor(_params(fusegrad), **kwargs)
    assert str(got.value) == str(want.value)


def test_complex_parameters_rejected_before_any_update():
    outcomes = []
    for T in (torch, fusegrad):
        real = T.nn.Parameter(T.ones(2))
        cplx = T.nn.Parameter(T.ones(2, dtype=T.complex64))
        real.grad, cplx.grad = T.ones(2), T.ones(2, dtype=T.complex64)
        opt = T.optim.Adafactor([real, cplx])
        with pytest.raises(RuntimeError) as error:
            opt.step()
        outcomes.append((str(error.value), real.tolist()))
    assert outcomes[1] == outcomes[0]
    # PyTorch has made (zero) state for the real parameter by then; fusegrad makes none.
