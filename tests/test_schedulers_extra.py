"""LinearLR, OneCycleLR, SequentialLR and ReduceLROnPlateau against torch's schedulers: the
same optimizer settings, the same learning-rate (and momentum) sequences, bit for bit."""

from __future__ import annotations

import warnings

import pytest
import torch

import fusegrad

LS = "lr_scheduler"


def _opt(T, kind="sgd"):
    groups = [{"params": [T.zeros(1, requires_grad=True)]},
              {"params": [T.zeros(1, requires_grad=True)], "lr": 0.3}]
    if kind == "adam":
        return T.optim.Adam(groups, lr=0.1)
    return T.optim.SGD(groups, lr=0.1, momentum=0.9)


def _run(T, make, n, kind="sgd", metrics=None):
    """lr (and momentum/beta1) of every group after construction and each of `n` steps."""
    opt = _opt(T, kind)
    sched = make(T, opt)
    key = "betas" if kind == "adam" else "momentum"

    def snap():
        return ([g["lr"] for g in opt.param_groups], list(sched.get_last_lr()),
                [g[key] for g in opt.param_groups])

    seq = [snap()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(n):
            opt.step()
            if metrics is None:
                sched.step()
            else:
                sched.step(metrics[i])
            seq.append(snap())
    return seq, sched


def _same(make, n, kind="sgd", metrics=None):
    ref, _ = _run(torch, make, n, kind, metrics)
    got, sched = _run(fusegrad, make, n, kind, metrics)
    assert got == ref  # exact float equality
    return sched


@pytest.mark.parametrize("kwargs", [
    {}, dict(start_factor=0.25, end_factor=0.75, total_iters=4),
    dict(start_factor=1.0, end_factor=0.1, total_iters=7)])
def test_linear_lr(kwargs):
    _same(lambda T, o: getattr(T.optim, LS).LinearLR(o, **kwargs), 12)


@pytest.mark.parametrize("kwargs,kind", [
    (dict(max_lr=1.0, total_steps=20), "sgd"),
    (dict(max_lr=[1.0, 2.0], epochs=4, steps_per_epoch=5, anneal_strategy="linear"), "sgd"),
    (dict(max_lr=0.5, total_steps=30, three_phase=True, pct_start=0.25), "sgd"),
    (dict(max_lr=0.5, total_steps=16, div_factor=10.0, final_div_factor=100.0), "adam"),
    (dict(max_lr=0.5, total_steps=16, cycle_momentum=False), "sgd"),
])
def test_one_cycle_lr(kwargs, kind):
    n = kwargs.get("total_steps") or kwargs["epochs"] * kwargs["steps_per_epoch"]
    _same(lambda T, o: getattr(T.optim, LS).OneCycleLR(o, **kwargs), n - 1, kind)


def test_one_cycle_errors():
    opt = _opt(fusegrad)
    with pytest.raises(ValueError, match="total_steps OR"):
        fusegrad.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0)
    sched = fusegrad.optim.lr_scheduler.OneCycleLR(_opt(fusegrad), max_lr=1.0, total_steps=2)
    sched.step()
    sched.step()
    with pytest.raises(ValueError, match="Tried to step 3 times"):
        sched.step()


def _seq(T, o):
    m = getattr(T.optim, LS)
    return m.SequentialLR(o, [m.LinearLR(o, start_factor=0.1, total_iters=3),
                              m.ExponentialLR(o, gamma=0.9),
                              m.StepLR(o, step_size=2, gamma=0.5)], milestones=[4, 8])


def test_sequential_lr():
    sched = _same(_seq, 15)
    state = sched.state_dict()
    assert state["last_epoch"] == 15 and len(state["_schedulers"]) == 3


def test_sequential_lr_with_cosine_and_multistep():
    def make(T, o):
        m = getattr(T.optim, LS)
        return m.SequentialLR(o, [m.MultiStepLR(o, milestones=[1, 2], gamma=0.5),
                                  m.CosineAnnealingLR(o, T_max=5, eta_min=0.01)],
                              milestones=[3])
    _same(make, 12)


def test_sequential_lr_errors():
    m = fusegrad.optim.lr_scheduler
    o = _opt(fusegrad)
    with pytest.raises(ValueError, match="number of milestone"):
        m.SequentialLR(o, [m.StepLR(o, 2), m.StepLR(o, 3)], milestones=[])
    with pytest.raises(ValueError, match="same optimizer"):
        m.SequentialLR(o, [m.StepLR(o, 2), m.StepLR(_opt(fusegrad), 3)], milestones=[2])


@pytest.mark.parametrize("kwargs,metrics", [
    (dict(patience=2), [1.0, 0.9, 0.95, 0.95, 0.95, 0.8, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]),
    (dict(mode="max", factor=0.5, patience=1, cooldown=2, threshold=0.1,
          threshold_mode="abs"), [1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3]),
    (dict(patience=0, factor=0.5, min_lr=[0.02, 0.05]), [5.0] * 12),
    (dict(patience=0, factor=0.5, min_lr=0.03, eps=0.02), [5.0] * 10),
])
def test_reduce_lr_on_plateau(kwargs, metrics):
    sched = _same(lambda T, o: getattr(T.optim, LS).ReduceLROnPlateau(o, **kwargs),
                  len(metrics), metrics=metrics)
    assert sched.last_epoch == len(metrics)


def test_reduce_lr_on_plateau_tensor_metric_and_errors():
    m = fusegrad.optim.lr_scheduler
    o = _opt(fusegrad)
    sched = m.ReduceLROnPlateau(o, patience=0)
    sched.step(fusegrad.tensor(1.0))
    sched.step(fusegrad.tensor(2.0))
    assert sched.get_last_lr() == [0.1 * 0.1, 0.3 * 0.1]
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        m.ReduceLROnPlateau(o, factor=1.0)


def _warnings_of(lib, steps):
    """The warning messages a scheduler's life gives: `steps` names what runs, in order."""
    model = lib.nn.Linear(2, 1)
    opt = lib.optim.SGD(model.parameters(), lr=1.0)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        sched = lib.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)
        plateau = lib.optim.lr_scheduler.ReduceLROnPlateau(opt)
        for step in steps:
            if step == "opt":
                opt.step()
            elif step == "sched":
                sched.step()
            elif step == "sched_epoch":
                sched.step(3)
            elif step == "plateau_epoch":
                plateau.step(1.0, 2)
            elif step == "replace":
                opt.step = lambda closure=None: None
    return [str(w.message) for w in seen], opt.param_groups[0]["lr"]


@pytest.mark.parametrize("steps", [
    ["sched"], ["opt", "sched"], ["sched", "opt", "sched"], ["opt", "sched", "sched"],
    ["replace", "sched"], ["opt", "sched_epoch"], ["plateau_epoch"],
], ids="-".join)
def test_scheduler_warnings_match_torch(steps):
    assert _warnings_of(fusegrad, steps) == _warnings_of(torch, steps)


def test_scheduled_optimizer_still_copies_and_saves():
    import copy
    import io
    model = fusegrad.nn.Linear(2, 1)
    opt = fusegrad.optim.SGD(model.parameters(), lr=1.0)
    fusegrad.optim.lr_scheduler.StepLR(opt, 1)
    fusegrad.optim.lr_scheduler.ExponentialLR(opt, 0.5)  # the step is wrapped once
    assert opt.step.__wrapped__.__name__ == "step"
    assert not hasattr(opt.step.__wrapped__, "_wrapped_by_lr_sched")
    copied = copy.deepcopy(opt)
    buffer = io.BytesIO()
    fusegrad.save(opt, buffer)
    buffer.seek(0)
    loaded = fusegrad.load(buffer, weights_only=False)
    for o in (copied, loaded):
        assert not hasattr(o.step, "_wrapped_by_lr_sched")
        o.step()


@pytest.mark.parametrize("make", [
    lambda s, o: s.StepLR(o, 2, 0.5), lambda s, o: s.ExponentialLR(o, 0.5),
    lambda s, o: s.CosineAnnealingLR(o, 4), lambda s, o: s.LinearLR(o, 0.5, total_iters=2),
    lambda s, o: s.OneCycleLR(o, 1.0, total_steps=5), lambda s, o: s.MultiStepLR(o, [1, 2]),
    lambda s, o: s.CosineAnnealingWarmRestarts(o, 2), lambda s, o: s.CyclicLR(o, 0.1, 1.0),
], ids=["step", "exponential", "cosine", "linear", "one_cycle", "multistep", "warm_restarts",
        "cyclic"])
def test_get_lr_outside_step_warns_and_state_keys_match_torch(make):
    def run(lib):
        model = lib.nn.Linear(1, 1)
        opt = lib.optim.SGD(model.parameters(), lr=1.0, momentum=0.9)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            sched = make(lib.optim.lr_scheduler, opt)
            rates = []
            for _ in range(3):
                opt.step()
                sched.step()
                rates.append([round(r, 6) for r in sched.get_lr() + sched.get_last_lr()])
        return [str(w.message) for w in seen], rates, list(sched.state_dict())
    assert run(fusegrad) == run(torch)
