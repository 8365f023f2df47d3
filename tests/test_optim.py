"""Optimizers and schedulers against torch.optim: ten steps on a small model, parameter
groups, state_dict round trips, learning-rate sequences."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_nn_support import compare_modules, sync

import fusegrad
import fusegrad.nn as fnn


def mlp(nn):
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))


X = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)


@pytest.mark.parametrize("name,kwargs", [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True)),
    ("SGD", dict(lr=0.05, momentum=0.5, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1)),
    ("Adam", dict(lr=0.01, amsgrad=True, maximize=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.02, weight_decay=0.1, amsgrad=True)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.01)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.01, initial_accumulator_value=0.1,
                     maximize=True)),
])
def test_ten_steps_match(name, kwargs):
    compare_modules(mlp(torch.nn), mlp(fnn), X, optimizer=(name, kwargs), step_atol=2e-5)


def _trained(T, nn, opt_name, kwargs, steps=3, groups=False):
    torch.manual_seed(0)
    th = mlp(torch.nn)
    m = mlp(nn)
    if nn is fnn:
        sync(th, m)
    else:
        m = th
    params = ([{"params": m[0].parameters(), "lr": 0.05},
               {"params": m[2].parameters()}] if groups else m.parameters())
    opt = getattr(T.optim, opt_name)(params, **kwargs)
    for _ in range(steps):
        opt.zero_grad()
        m(T.tensor(X)).pow(2).sum().backward()
        opt.step()
    return m, opt


@pytest.mark.parametrize("opt_name,kwargs", [("SGD", dict(lr=0.1, momentum=0.9)),
                                             ("Adam", dict(lr=0.01, amsgrad=True))])
def test_param_groups_and_state_dict(opt_name, kwargs):
    mt, ot = _trained(torch, torch.nn, opt_name, kwargs, groups=True)
    mf, of = _trained(fusegrad, fnn, opt_name, kwargs, groups=True)
    st, sf = ot.state_dict(), of.state_dict()
    assert sf["param_groups"] == st["param_groups"]
    assert sorted(sf["state"]) == sorted(st["state"])
    for i in st["state"]:
        assert list(sf["state"][i]) == list(st["state"][i])
        for k, v in st["state"][i].items():
            np.testing.assert_allclose(sf["state"][i][k].numpy(), v.numpy(), rtol=1e-5,
                                       atol=1e-6)
    # Round trip: a fresh optimizer resumes exactly where the old one was.
    _, of2 = _trained(fusegrad, fnn, opt_name, kwargs, steps=0, groups=True)
    fresh = mf
    of2 = getattr(fusegrad.optim, opt_name)(
        [{"params": fresh[0].parameters(), "lr": 0.05}, {"params": fresh[2].parameters()}],
        **kwargs)
    of2.load_state_dict(sf)
    for opt, m, T in ((ot, mt, torch), (of2, mf, fusegrad)):
        opt.zero_grad()
        m(T.tensor(X)).pow(2).sum().backward()
        opt.step()
    for (k, a), b in zip(mf.state_dict().items(), mt.state_dict().values()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    assert repr(of) == repr(ot)


def test_zero_grad_and_errors():
    m = mlp(fnn)
    opt = fusegrad.optim.SGD(m.parameters(), lr=0.1)
    m(fusegrad.tensor(X)).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert all(not p.grad.numpy().any() for p in m.parameters())
    opt.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    for T in (torch, fusegrad):
        with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
            T.optim.SGD([], lr=0.1)
        with pytest.raises(ValueError, match="Invalid learning rate: -1"):
            T.optim.Adam(mlp(T.nn).parameters(), lr=-1)
        with pytest.raises(ValueError, match="Nesterov momentum requires a momentum and zero "
                                             "dampening"):
            T.optim.SGD(mlp(T.nn).parameters(), lr=0.1, nesterov=True)
        with pytest.raises(ValueError, match="some parameters appear in more than one "
                                             "parameter group"):
            p = mlp(T.nn)[0].weight
            T.optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)


def test_step_bumps_version_and_closure():
    p = fnn.Parameter(fusegrad.ones(2))
    opt = fusegrad.optim.SGD([p], lr=0.5)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    v = p._version
    loss = opt.step(closure)
    assert float(loss) == 2.0 and p._version == v + 1
    np.testing.assert_allclose(p.detach().numpy(), [0.0, 0.0])


@pytest.mark.parametrize("name,kwargs", [
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("MultiStepLR", dict(milestones=[2, 5, 5], gamma=0.1)),
    ("ExponentialLR", dict(gamma=0.9)),
    ("CosineAnnealingLR", dict(T_max=4, eta_min=0.01)),
    ("LambdaLR", dict(lr_lambda=lambda e: 1 / (e + 1))),
])
def test_schedulers(name, kwargs):
    lrs = []
    for T in (torch, fusegrad):
        opt = T.optim.SGD([{"params": [T.zeros(1, requires_grad=True)]},
                           {"params": [T.zeros(1, requires_grad=True)], "lr": 0.3}], lr=0.1)
        sched = getattr(T.optim.lr_scheduler, name)(opt, **kwargs)
        seq = [sched.get_last_lr()]
        for _ in range(12):
            opt.step()
            sched.step()
            seq.append(sched.get_last_lr())
        lrs.append(seq)
        if name != "LambdaLR":
            state = sched.state_dict()
            assert state["last_epoch"] == 12 and "optimizer" not in state
    np.testing.assert_allclose(lrs[1], lrs[0], rtol=1e-12)
