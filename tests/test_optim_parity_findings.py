"""Differences found by running user programs under both libraries, each checked against
torch directly: scheduler and optimizer state_dict structures (keys, their order, values),
the warnings of SequentialLR and ChainedScheduler, and error messages of the optimizers and
schedulers."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import warnings  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

LIBS = (torch, fusegrad)


def _plain(value):
    """A state_dict entry with tensors as (dtype, values) and callables by kind, so the two
    libraries' entries compare with ==."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if hasattr(value, "shape") and hasattr(value, "tolist"):
        return ("tensor", str(value.dtype).split(".")[-1], value.tolist())
    if type(value).__name__ == "Counter":
        return ("Counter", dict(value))
    if callable(value) and not isinstance(value, type):
        return ("callable", type(value).__name__)
    return value


def _keys(state: dict) -> list:
    """Keys in order, nested scheduler dicts included."""
    return [(k, _keys(v) if isinstance(v, dict) else
             [_keys(s) for s in v] if k == "_schedulers" else None)
            for k, v in state.items()]


def _opt(T, kind="sgd"):
    groups = [{"params": [T.nn.Parameter(T.ones(2))]},
              {"params": [T.nn.Parameter(T.ones(2))], "lr": 0.5}]
    if kind == "sgd":
        return T.optim.SGD(groups, lr=0.1, momentum=0.9)
    return getattr(T.optim, kind)(groups, lr=0.1)


class _Scale:
    """A callable object: its attributes are saved in state_dict (a lambda is not)."""

    def __init__(self) -> None:
        self.base = 0.5

    def __call__(self, epoch):
        return self.base ** epoch


def _sched(T, name, opt):
    S = T.optim.lr_scheduler
    make = {
        "step": lambda: S.StepLR(opt, 2, 0.5),
        "multistep": lambda: S.MultiStepLR(opt, [1, 3], 0.5),
        "exponential": lambda: S.ExponentialLR(opt, 0.9),
        "cosine": lambda: S.CosineAnnealingLR(opt, 5),
        "lambda": lambda: S.LambdaLR(opt, _Scale()),
        "multiplicative": lambda: S.MultiplicativeLR(opt, lambda e: 0.9),
        "constant": lambda: S.ConstantLR(opt),
        "linear": lambda: S.LinearLR(opt),
        "polynomial": lambda: S.PolynomialLR(opt),
        "onecycle": lambda: S.OneCycleLR(opt, [1.0, 2.0], total_steps=10),
        "onecycle_three": lambda: S.OneCycleLR(opt, 1.0, total_steps=10, three_phase=True,
                                               anneal_strategy="linear"),
        "cyclic": lambda: S.CyclicLR(opt, 0.01, 0.1, step_size_up=2),
        "cyclic_exp": lambda: S.CyclicLR(opt, [0.01, 0.02], 0.1, step_size_up=2,
                                         mode="exp_range", gamma=0.9),
        "warm_restarts": lambda: S.CosineAnnealingWarmRestarts(opt, 2, 2),
        "plateau": lambda: S.ReduceLROnPlateau(opt, patience=0),
        "plateau_list": lambda: S.ReduceLROnPlateau(opt, "max", patience=0, cooldown=1,
                                                    min_lr=[0.01, 0.02]),
        "sequential": lambda: S.SequentialLR(
            opt, [S.ConstantLR(opt, 0.5, 2), S.ExponentialLR(opt, 0.9)], [1]),
        "sequential_three": lambda: S.SequentialLR(
            opt, [S.ConstantLR(opt, 0.5, 2), S.CosineAnnealingLR(opt, 3),
                  S.CosineAnnealingWarmRestarts(opt, 2)], [1, 2]),
        "chained": lambda: S.ChainedScheduler(
            [S.ConstantLR(opt, 0.5, 2), S.PolynomialLR(opt), S.MultiStepLR(opt, [1, 2])],
            optimizer=opt),
        "swa": lambda: T.optim.swa_utils.SWALR(opt, [0.05, 0.01], anneal_epochs=3,
                                               anneal_strategy="linear"),
    }
    return make[name]()


_METRICS = [1.0, 2.0, 1.5, 1.0, 3.0, 3.0]


def _drive(T, name, steps=5, kind="sgd", optimizer_first=True):
    """Build and step a scheduler, recording the warnings; returns (opt, sched, warnings)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt = _opt(T, kind)
        sched = _sched(T, name, opt)
        for i in range(steps):
            if optimizer_first:
                opt.step()
            if name.startswith("plateau"):
                sched.step(_METRICS[i])
            else:
                sched.step()
    return opt, sched, [(w.category, str(w.message)) for w in caught]


SCHEDULERS = ["step", "multistep", "exponential", "cosine", "lambda", "multiplicative",
              "constant", "linear", "polynomial", "onecycle", "onecycle_three", "cyclic",
              "cyclic_exp", "warm_restarts", "plateau", "plateau_list", "sequential",
              "sequential_three", "chained", "swa"]


@pytest.mark.parametrize("name", SCHEDULERS)
def test_scheduler_state_dict_matches_torch(name):
    """Same keys in the same order, same values, same lrs, same optimizer param groups."""
    (ot, st, _), (of, sf, _) = (_drive(T, name) for T in LIBS)
    assert _keys(sf.state_dict()) == _keys(st.state_dict())
    assert _plain(sf.state_dict()) == _plain(st.state_dict())
    assert sf.get_last_lr() == st.get_last_lr()
    gt, gf = ot.state_dict()["param_groups"], of.state_dict()["param_groups"]
    assert [list(g) for g in gf] == [list(g) for g in gt]
    assert _plain(gf) == _plain(gt)


@pytest.mark.parametrize("name", ["sequential", "sequential_three", "chained"])
@pytest.mark.parametrize("optimizer_first", [True, False])
def test_wrapping_schedulers_warn_as_torch(name, optimizer_first):
    """SequentialLR's switch at a milestone warns of nothing (no deprecated step(epoch));
    the order warning comes as in torch when the optimizer never stepped."""
    got = [_drive(T, name, optimizer_first=optimizer_first)[2] for T in LIBS]
    assert got[1] == got[0]
    if optimizer_first:
        assert got[0] == []


def test_sequential_lr_of_brief_warns_nothing():
    """ConstantLR then ExponentialLR, milestone 1, stepped three times."""
    lrs = []
    for T in LIBS:
        S = T.optim.lr_scheduler
        opt = T.optim.SGD([T.nn.Parameter(T.ones(2))], lr=0.1)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sched = S.SequentialLR(opt, [S.ConstantLR(opt), S.ExponentialLR(opt, 0.9)], [1])
            seq = []
            for _ in range(3):
                opt.step()
                sched.step()
                seq.append(sched.get_last_lr())
        assert [str(w.message) for w in caught] == []
        lrs.append(seq)
    assert lrs[1] == lrs[0]


def test_one_cycle_phases_are_dicts():
    sd = {T: _drive(T, "onecycle", 3)[1].state_dict() for T in LIBS}
    phases = sd[fusegrad]["_schedule_phases"]
    assert all(type(p) is dict for p in phases)
    assert phases == sd[torch]["_schedule_phases"]
    assert list(phases[0]) == ["end_step", "start_lr", "end_lr", "start_momentum",
                               "end_momentum"]


@pytest.mark.parametrize("kind", ["sgd", "AdamW"])
@pytest.mark.parametrize("three_phase", [False, True])
def test_one_cycle_loads_torch_state_dict(kind, three_phase):
    """A torch OneCycleLR's state (and its optimizer's groups) loaded into a fresh fusegrad
    one: the following rates and momenta are torch's."""
    def build(T):
        opt = _opt(T, kind)
        return opt, T.optim.lr_scheduler.OneCycleLR(opt, [1.0, 2.0], total_steps=12,
                                                    three_phase=three_phase)

    ot, st = build(torch)
    for _ in range(4):
        ot.step()
        st.step()
    of, sf = build(fusegrad)
    groups = [{k: v for k, v in g.items() if k != "params"} for g in ot.param_groups]
    for g, saved in zip(of.param_groups, groups):
        g.update(saved)
    sf.load_state_dict(st.state_dict())
    key = "momentum" if kind == "sgd" else "betas"
    for _ in range(8):
        ot.step()
        st.step()
        of.step()
        sf.step()
        assert sf.get_last_lr() == st.get_last_lr()
        assert [g[key] for g in of.param_groups] == [g[key] for g in ot.param_groups]
    assert _plain(sf.state_dict()) == _plain(st.state_dict())


def test_one_cycle_loads_tuple_phases():
    """A state_dict with phases as tuples (fusegrad's former layout) still loads."""
    opt = _opt(fusegrad)
    sched = fusegrad.optim.lr_scheduler.OneCycleLR(opt, 1.0, total_steps=10)
    state = sched.state_dict()
    dicts = state["_schedule_phases"]
    state["_schedule_phases"] = [tuple(p.values()) for p in dicts]
    sched.load_state_dict(state)
    assert sched._schedule_phases == dicts


def test_plateau_state_dict_keys_and_default_min_lr():
    for make in (lambda T, o: T.optim.lr_scheduler.ReduceLROnPlateau(o),
                 lambda T, o: T.optim.lr_scheduler.ReduceLROnPlateau(o, min_lr=(0.1, 0.2)),
                 lambda T, o: T.optim.lr_scheduler.ReduceLROnPlateau(o, min_lr=0.01)):
        sd = [make(T, _opt(T)).state_dict() for T in LIBS]
        assert list(sd[1]) == list(sd[0])
        assert sd[1] == sd[0]


def _outcome(fn):
    """(exception type name, message) or ('ok', value), and the warnings given."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = ("ok", fn())
        except Exception as e:  # noqa: BLE001 (the error itself is compared)
            result = (type(e).__name__, str(e))
    return result, [(w.category, str(w.message)) for w in caught]


def _same(make):
    got = [_outcome(lambda T=T: make(T)) for T in LIBS]
    assert got[1] == got[0]
    return got[0]


def _add_group_and_reduce(T, min_lr):
    opt = _opt(T)
    sched = T.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0, min_lr=min_lr)
    opt.add_param_group({"params": [T.nn.Parameter(T.ones(1))]})
    sched.step(1.0)
    sched.step(2.0)
    return sched.min_lrs, [g["lr"] for g in opt.param_groups]


def test_plateau_new_param_group():
    """A group added after construction: the single bound is extended to it; a per-group
    list raises torch's error."""
    assert _same(lambda T: _add_group_and_reduce(T, 0.001))[0][0] == "ok"
    assert _same(lambda T: _add_group_and_reduce(T, [0.0, 0.0]))[0][0] == "RuntimeError"


def test_plateau_load_state_dict_resets_mode_worse():
    def run(T):
        sched = T.optim.lr_scheduler.ReduceLROnPlateau(_opt(T))
        state = sched.state_dict()
        state["mode"] = "max"
        sched.load_state_dict(state)
        return sched.mode_worse

    assert _same(run) == (("ok", float("-inf")), [])


PLATEAU_ERRORS = [
    dict(min_lr=[0.1]),
    dict(mode="x", min_lr=[0.1]),
    dict(mode="x"),
    dict(threshold_mode="x"),
    dict(factor=1.0),
]


@pytest.mark.parametrize("kwargs", PLATEAU_ERRORS)
def test_plateau_argument_errors(kwargs):
    result, _ = _same(lambda T: T.optim.lr_scheduler.ReduceLROnPlateau(_opt(T), **kwargs))
    assert result[0] == "ValueError"


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64",
                                   "int32", "bool", "complex64", "uint8"])
@pytest.mark.parametrize("parameter", [False, True])
def test_tensor_instead_of_iterable(dtype, parameter):
    """The message names the tensor type (torch.DoubleTensor), a Parameter's too."""
    def make(T):
        x = T.zeros(2, dtype=getattr(T, dtype))
        if parameter:
            x = T.nn.Parameter(x, requires_grad=False)
        return T.optim.Adam(x)

    result, _ = _same(make)
    assert result[0] == "TypeError"


OPTIMIZERS = ["SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "ASGD", "LBFGS",
              "NAdam", "RAdam", "RMSprop", "Rprop", "SparseAdam", "Adafactor"]


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_parameter_instead_of_iterable_every_optimizer(name):
    result, _ = _same(lambda T: getattr(T.optim, name)(T.nn.Parameter(T.ones(2)), lr=0.1))
    assert result[1].endswith("but got torch.FloatTensor")


PARAM_ERRORS = {
    "not_tensor": lambda T: T.optim.Adam([1.0]),
    "group_not_dict": lambda T: _opt(T).add_param_group(3),
    "other_optimizer": lambda T: T.optim.lr_scheduler.SequentialLR(
        _opt(T), [T.optim.lr_scheduler.StepLR(_opt(T), 1)], []),
}


@pytest.mark.parametrize("case", sorted(PARAM_ERRORS))
def test_error_messages(case):
    result, _ = _same(PARAM_ERRORS[case])
    assert result[0] in ("TypeError", "ValueError")


CONFIGS = [("SGD", dict(lr=0.1)), ("SGD", dict(lr=0.1, momentum=0.9)), ("Adam", {}),
           ("Adam", dict(amsgrad=True)), ("AdamW", {}), ("Adagrad", {}), ("Adadelta", {}),
           ("Adamax", {}), ("ASGD", {}), ("NAdam", {}), ("RAdam", {}),
           ("RMSprop", dict(momentum=0.5, centered=True)), ("Rprop", {}), ("Adafactor", {}),
           ("LBFGS", {}), ("LBFGS", dict(line_search_fn="strong_wolfe", history_size=3))]


@pytest.mark.parametrize("name,kwargs", CONFIGS)
def test_optimizer_state_dict_structure(name, kwargs):
    """Param-group keys and state keys (in order) after two steps; no warnings (LBFGS reads
    its closure's loss without the requires-grad conversion warning)."""
    def run(T):
        p = T.nn.Parameter(T.tensor([1.0, -2.0, 3.0]))
        opt = getattr(T.optim, name)([p], **kwargs)

        def closure():
            opt.zero_grad()
            loss = (p * p).sum()
            loss.backward()
            return loss

        for _ in range(2):
            opt.step(closure)
        sd = opt.state_dict()
        return ([list(g) for g in sd["param_groups"]], _plain(sd["param_groups"]),
                {i: list(s) for i, s in sd["state"].items()}, len(opt.state))

    result, caught = _same(run)
    assert result[0] == "ok"
    assert caught == []


def test_plain_sgd_keeps_no_state():
    assert _same(lambda T: _drive_sgd(T))[0] == ("ok", ({}, 0))


def _drive_sgd(T):
    p = T.nn.Parameter(T.ones(2))
    opt = T.optim.SGD([p], lr=0.1)
    p.grad = T.ones(2)
    opt.step()
    return opt.state_dict()["state"], len(opt.state)


def test_warm_restarts_step_count_stays():
    def run(T):
        opt = _opt(T)
        sched = T.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, 2)
        for e in (None, None, 2.5):
            opt.step()
            sched.step(e)
        return sched._step_count, sched.get_last_lr()

    assert _same(run)[0][1][0] == 0


def test_swa_state_dict_round_trip():
    """SWALR keeps the strategy's name, not the function; loading restores the function."""
    def run(T):
        opt = _opt(T)
        sched = T.optim.swa_utils.SWALR(opt, 0.05, anneal_epochs=3, anneal_strategy="linear")
        state = sched.state_dict()
        other = T.optim.swa_utils.SWALR(_opt(T), 0.05, anneal_epochs=3)
        other.load_state_dict(state)
        lrs = []
        for _ in range(4):
            other.optimizer.step()
            other.step()
            lrs.append(other.get_last_lr())
        return sorted(state), other._anneal_strategy, lrs

    assert _same(run)[0][0] == "ok"
