"""MultiplicativeLR, ConstantLR, PolynomialLR, ChainedScheduler, CyclicLR and
CosineAnnealingWarmRestarts against torch's: the learning rates (and momenta) after
construction and every step, bit for bit, state_dict round trips and argument errors."""

from __future__ import annotations

import math
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pickle  # noqa: E402
import warnings  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402


def _opt(T, kind="sgd"):
    groups = [{"params": [T.zeros(1, requires_grad=True)]},
              {"params": [T.zeros(1, requires_grad=True)], "lr": 0.3}]
    if kind == "adam":
        return T.optim.Adam(groups, lr=0.1)
    if kind == "adagrad":
        return T.optim.Adagrad(groups, lr=0.1)
    return T.optim.SGD(groups, lr=0.1, momentum=0.9)


def _snap(opt, sched, kind):
    key = "betas" if kind == "adam" else "momentum"
    return ([g["lr"] for g in opt.param_groups], list(sched.get_last_lr()),
            [g.get(key) for g in opt.param_groups])


def _run(T, make, n, kind="sgd", epochs=None):
    """lr, last lr and momentum of every group after construction and each step."""
    opt = _opt(T, kind)
    sched = make(T, opt)
    seq = [_snap(opt, sched, kind)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(n):
            opt.step()
            sched.step() if epochs is None else sched.step(epochs[i])
            seq.append(_snap(opt, sched, kind))
    return seq, sched, opt


L = "lr_scheduler"
SCHEDULES = {
    "multiplicative": (lambda T, o: T.optim.lr_scheduler.MultiplicativeLR(
        o, lambda e: 0.95 ** (e % 3)), 8),
    "multiplicative_per_group": (lambda T, o: T.optim.lr_scheduler.MultiplicativeLR(
        o, [lambda e: 0.9, lambda e: 1.1]), 6),
    "lambda": (lambda T, o: T.optim.lr_scheduler.LambdaLR(o, lambda e: 1 / (e + 1)), 5),
    "constant": (lambda T, o: T.optim.lr_scheduler.ConstantLR(o), 8),
    "constant_factor": (lambda T, o: T.optim.lr_scheduler.ConstantLR(
        o, factor=0.7, total_iters=3), 6),
    "polynomial": (lambda T, o: T.optim.lr_scheduler.PolynomialLR(o), 8),
    "polynomial_power": (lambda T, o: T.optim.lr_scheduler.PolynomialLR(
        o, total_iters=7, power=2.5), 10),
    "warm_restarts": (lambda T, o: T.optim.lr_scheduler.CosineAnnealingWarmRestarts(
        o, T_0=3), 10),
    "warm_restarts_mult": (lambda T, o: T.optim.lr_scheduler.CosineAnnealingWarmRestarts(
        o, T_0=2, T_mult=2, eta_min=0.01), 16),
    "cyclic": (lambda T, o: T.optim.lr_scheduler.CyclicLR(o, 0.01, 0.1, step_size_up=3), 14),
    "cyclic_down": (lambda T, o: T.optim.lr_scheduler.CyclicLR(
        o, [0.01, 0.02], [0.1, 0.5], step_size_up=2, step_size_down=5,
        base_momentum=[0.7, 0.6], max_momentum=0.95), 16),
    "cyclic_triangular2": (lambda T, o: T.optim.lr_scheduler.CyclicLR(
        o, 0.01, 0.1, step_size_up=2, mode="triangular2"), 14),
    "cyclic_exp_range": (lambda T, o: T.optim.lr_scheduler.CyclicLR(
        o, 0.01, 0.1, step_size_up=2, mode="exp_range", gamma=0.9), 14),
    "cyclic_scale_fn": (lambda T, o: T.optim.lr_scheduler.CyclicLR(
        o, 0.01, 0.1, step_size_up=2, scale_fn=lambda x: 1 / (x + 1),
        scale_mode="iterations"), 10),
    "cyclic_no_momentum": (lambda T, o: T.optim.lr_scheduler.CyclicLR(
        o, 0.01, 0.1, step_size_up=2, cycle_momentum=False), 6),
    "chained": (lambda T, o: T.optim.lr_scheduler.ChainedScheduler([
        T.optim.lr_scheduler.ConstantLR(o, factor=0.5, total_iters=3),
        T.optim.lr_scheduler.ExponentialLR(o, gamma=0.9)]), 8),
    "chained_with_optimizer": (lambda T, o: T.optim.lr_scheduler.ChainedScheduler([
        T.optim.lr_scheduler.PolynomialLR(o, total_iters=4),
        T.optim.lr_scheduler.MultiplicativeLR(o, lambda e: 0.8)], optimizer=o), 6),
    "sequential_of_new": (lambda T, o: T.optim.lr_scheduler.SequentialLR(o, [
        T.optim.lr_scheduler.ConstantLR(o, factor=0.5, total_iters=2),
        T.optim.lr_scheduler.PolynomialLR(o, total_iters=4)], milestones=[3]), 9),
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedule_is_torchs_bit_for_bit(name):
    make, n = SCHEDULES[name]
    want, _, _ = _run(torch, make, n)
    got, _, _ = _run(fusegrad, make, n)
    assert got == want


def test_cyclic_cycles_adams_beta1_as_torch():
    make = SCHEDULES["cyclic"][0]
    want, _, _ = _run(torch, make, 10, kind="adam")
    got, _, _ = _run(fusegrad, make, 10, kind="adam")
    assert got == want


@pytest.mark.parametrize("epochs", [[0.5, 1.0, 2.7, 3.0, 7.25, 1.5, 16.0, 30.1],
                                    [1, 2, 3, 4, 5, 6, 7, 8]])
@pytest.mark.parametrize("mult", [1, 2, 3])
def test_warm_restarts_at_given_epochs_as_torch(epochs, mult):
    def make(T, o):
        return T.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=mult,
                                                                eta_min=0.001)
    want, ts, _ = _run(torch, make, len(epochs), epochs=epochs)
    got, fs, _ = _run(fusegrad, make, len(epochs), epochs=epochs)
    assert got == want
    assert (fs.T_cur, fs.T_i, fs.last_epoch) == (ts.T_cur, ts.T_i, ts.last_epoch)


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_state_dict_round_trip_continues_the_schedule(name):
    """A scheduler rebuilt from another's state_dict continues where it stopped, as
    torch's does; the state_dict's keys are torch's."""
    make, n = SCHEDULES[name]
    results = {}
    for T in (torch, fusegrad):
        opt = _opt(T)
        sched = make(T, opt)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(3):
                opt.step()
                sched.step()
            state = pickle.loads(pickle.dumps(sched.state_dict()))
            opt2 = _opt(T)
            opt2.load_state_dict(opt.state_dict())
            sched2 = make(T, opt2)
            sched2.load_state_dict(state)
            seq = []
            for _ in range(4):
                opt2.step()
                sched2.step()
                seq.append(_snap(opt2, sched2, "sgd"))
        keys = set(state) - {"_get_lr_called_within_step"}
        if "_schedulers" in state:
            keys |= {k for s in state["_schedulers"] for k in s}
            keys -= {"_get_lr_called_within_step"}
        results[T] = seq, keys
    assert results[fusegrad] == results[torch]


def test_cyclic_state_dict_keeps_a_callable_objects_attributes():
    class Scale:
        def __init__(self, k):
            self.k = k

        def __call__(self, x):
            return 1 / self.k

    out = {}
    for T in (torch, fusegrad):
        opt = _opt(T)
        sched = T.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, scale_fn=Scale(2.0))
        state = sched.state_dict()
        saved = state["_scale_fn_custom"]
        lam = T.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, scale_fn=lambda x: 1.0)
        fresh = Scale(4.0)
        other = T.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, scale_fn=fresh)
        other.load_state_dict(state)
        try:
            other.load_state_dict(state)  # the entry was taken out by the first load
            again = "ok"
        except KeyError as error:
            again = repr(error)
        out[T] = (saved, lam.state_dict()["_scale_fn_custom"], fresh.k,
                  other._scale_fn_custom is fresh, again)
    assert out[fusegrad] == out[torch]


ERRORS = [
    lambda T, o: T.optim.lr_scheduler.ConstantLR(o, factor=1.5),
    lambda T, o: T.optim.lr_scheduler.ConstantLR(o, factor=-0.1),
    lambda T, o: T.optim.lr_scheduler.MultiplicativeLR(o, [lambda e: 0.9] * 3),
    lambda T, o: T.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=0),
    lambda T, o: T.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=2.0),
    lambda T, o: T.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=0),
    lambda T, o: T.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=1.5),
    lambda T, o: T.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=2, eta_min="a"),
    lambda T, o: T.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=2).step(-1),
    lambda T, o: T.optim.lr_scheduler.CyclicLR(o, 0.01, 0.1, mode="foo"),
    lambda T, o: T.optim.lr_scheduler.CyclicLR(o, [0.01, 0.02, 0.03], 0.1),
    lambda T, o: T.optim.lr_scheduler.CyclicLR(o, 0.01, [0.1]),
    lambda T, o: T.optim.lr_scheduler.CyclicLR(_opt(T, "adagrad"), 0.01, 0.1),
    lambda T, o: T.optim.lr_scheduler.CyclicLR(o, 0.01, 0.1, base_momentum=[0.8] * 3),
    lambda T, o: T.optim.lr_scheduler.OneCycleLR(o, [0.1, 0.2, 0.3], total_steps=10),
    lambda T, o: T.optim.lr_scheduler.OneCycleLR(o, 0.1, total_steps=10,
                                                 max_momentum=[0.9] * 3),
    lambda T, o: T.optim.lr_scheduler.ChainedScheduler([]),
    lambda T, o: T.optim.lr_scheduler.ChainedScheduler([
        T.optim.lr_scheduler.ReduceLROnPlateau(o)]),
    lambda T, o: T.optim.lr_scheduler.ChainedScheduler([
        T.optim.lr_scheduler.ConstantLR(o), T.optim.lr_scheduler.ConstantLR(_opt(T))]),
]


@pytest.mark.parametrize("index", range(len(ERRORS)))
def test_argument_errors_are_torchs(index):
    outcomes = []
    for T in (torch, fusegrad):
        try:
            ERRORS[index](T, _opt(T))
            outcomes.append(("ok", None))
        except Exception as error:  # noqa: BLE001 - the outcome itself is compared
            outcomes.append((type(error).__name__, str(error)))
    assert outcomes[1] == outcomes[0]


def test_names_and_module_are_torchs():
    names = ["ChainedScheduler", "ConstantLR", "CosineAnnealingWarmRestarts", "CyclicLR",
             "MultiplicativeLR", "PolynomialLR"]
    for name in names:
        cls = getattr(fusegrad.optim.lr_scheduler, name)
        assert cls.__module__ == "fusegrad.optim.lr_scheduler"
        assert cls.__name__ == name
    public = {n for n in dir(torch.optim.lr_scheduler) if n[0].isupper() and
              isinstance(getattr(torch.optim.lr_scheduler, n), type) and
              issubclass(getattr(torch.optim.lr_scheduler, n),
                         torch.optim.lr_scheduler.LRScheduler)}
    assert public <= set(dir(fusegrad.optim.lr_scheduler))
    assert math.isclose(fusegrad.optim.lr_scheduler.ConstantLR(_opt(fusegrad)).factor, 1 / 3)
