"""Optimizer and scheduler behaviour checked against torch: complex parameters updated as
pairs of reals, tensor betas, `fused`/`capturable` checks, schedulers resumed at a
`last_epoch`, and the optimizer hook API (step, state_dict and load_state_dict hooks)."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import copy  # noqa: E402
import importlib  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

LIBS = (torch, fusegrad)


def _np(t) -> np.ndarray:
    return t.detach().numpy().copy()


def _state(opt, p) -> dict:
    """A parameter's state as {key: (dtype name, values)}, numbers as they are."""
    return {k: (str(v.dtype).split(".")[-1], _np(v)) if hasattr(v, "shape") else v
            for k, v in opt.state[p].items()}


def _assert_states(a: dict, b: dict, rtol: float, atol: float) -> None:
    assert list(a) == list(b)
    for k in a:
        if isinstance(a[k], tuple):
            assert a[k][0] == b[k][0], k
            np.testing.assert_allclose(b[k][1], a[k][1], rtol=rtol, atol=atol, err_msg=k)
        else:
            assert a[k] == b[k], k


# ---------------------------------------------------------------------------------------
# Complex parameters: PyTorch updates the real and imaginary parts as two reals.

COMPLEX_CASES = [
    ("Adam", {}), ("Adam", {"amsgrad": True}), ("Adam", {"maximize": True, "weight_decay": 0.1}),
    ("Adam", {"foreach": True}), ("Adam", {"foreach": False, "decoupled_weight_decay": True,
                                           "weight_decay": 0.1}),
    ("AdamW", {}), ("AdamW", {"amsgrad": True, "maximize": True}),
    ("RMSprop", {}), ("RMSprop", {"centered": True, "momentum": 0.9, "weight_decay": 0.1}),
    ("RMSprop", {"maximize": True, "momentum": 0.5}),
    ("Adagrad", {}), ("Adagrad", {"initial_accumulator_value": 0.5, "lr_decay": 0.1,
                                  "weight_decay": 0.1, "maximize": True}),
    ("NAdam", {}), ("NAdam", {"decoupled_weight_decay": True, "weight_decay": 0.1}),
    ("Adamax", {}), ("Adamax", {"weight_decay": 0.1, "maximize": True}),
    ("Adadelta", {}), ("Adadelta", {"weight_decay": 0.1, "maximize": True}),
    ("Rprop", {}), ("Rprop", {"maximize": True, "etas": (0.4, 1.5)}),
    ("RAdam", {}), ("RAdam", {"decoupled_weight_decay": True, "weight_decay": 0.1}),
    ("ASGD", {}), ("SGD", {"momentum": 0.9, "nesterov": True}),
]


def _complex_run(T, name, kwargs, dtype, steps=10, shape=(3, 2)):
    rng = np.random.RandomState(0)

    def draw():
        return (rng.randn(*shape) + 1j * rng.randn(*shape)).astype(dtype)

    p = T.nn.Parameter(T.tensor(draw()))
    kwargs = dict(kwargs)
    if name != "Adadelta":
        kwargs.setdefault("lr", 0.1)
    opt = getattr(T.optim, name)([p], **kwargs)
    for _ in range(steps):
        p.grad = T.tensor(draw())
        opt.step()
    return p, opt


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize(("name", "kwargs"), COMPLEX_CASES,
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(COMPLEX_CASES)])
def test_complex_params_update_as_pairs_of_reals(name, kwargs, dtype):
    (tp, topt), (fp, fopt) = (_complex_run(T, name, kwargs, dtype) for T in LIBS)
    tol = dict(rtol=1e-5, atol=1e-6)
    assert str(fp.dtype) == str(tp.dtype)
    np.testing.assert_allclose(_np(fp), _np(tp), **tol)
    # The state is kept complex, of the parameter's dtype, as in PyTorch.
    _assert_states(_state(topt, tp), _state(fopt, fp), **tol)


@pytest.mark.parametrize(("name", "expected"), [
    ("Adam", 0.9 + 0.9j), ("RMSprop", None), ("Adamax", 0.9 + 0.9j), ("Rprop", 0.9 + 0.9j)])
def test_complex_single_step_of_the_report(name, expected):
    values = []
    for T in LIBS:
        p = T.nn.Parameter(T.tensor([1 + 1j], dtype=T.complex64))
        opt = getattr(T.optim, name)([p], lr=0.1)
        p.grad = T.tensor([2 + 2j])
        opt.step()
        values.append(complex(p.detach()[0].item()))
    assert values[1] == pytest.approx(values[0], abs=1e-6)
    if expected is not None:
        assert values[1] == pytest.approx(expected, abs=1e-6)


def test_complex_strided_param_and_mixed_groups():
    """A non-contiguous complex parameter next to a real one, in one group."""
    outs = []
    for T in LIBS:
        base = T.tensor((np.arange(24) + 0.5j * np.arange(24)).reshape(4, 6)
                        .astype(np.complex64))
        p = T.nn.Parameter(base.t())  # a transposed leaf
        q = T.nn.Parameter(T.linspace(-1, 1, 5))
        opt = T.optim.Adam([p, q], lr=0.05, amsgrad=True)
        for i in range(4):
            p.grad = (T.ones_like(p) * (1 - 2j)) * (i + 1)
            q.grad = T.linspace(1, 2, 5) * (i - 1.5)
            opt.step()
        outs.append((_np(p), _np(q), _state(opt, p)))
    np.testing.assert_allclose(outs[1][0], outs[0][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outs[1][1], outs[0][1], rtol=1e-5, atol=1e-6)
    _assert_states(outs[0][2], outs[1][2], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["Adam", "RMSprop", "Rprop", "Adagrad", "NAdam"])
def test_complex_state_dict_round_trip(name):
    """state_dict holds complex state; a fresh optimizer loading it continues as torch's."""
    results = []
    for T in LIBS:
        p, opt = _complex_run(T, name, {}, "complex64", steps=3)
        sd = opt.state_dict()
        kinds = {k: str(v.dtype).split(".")[-1] for k, v in sd["state"][0].items()
                 if hasattr(v, "dtype")}
        q = T.nn.Parameter(p.detach().clone())
        fresh = getattr(T.optim, name)([q], lr=0.1)
        fresh.load_state_dict(sd)
        q.grad = T.full_like(q, 0.5 - 0.25j)
        fresh.step()
        results.append((kinds, _np(q), _state(fresh, q)))
    assert results[1][0] == results[0][0]
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-5, atol=1e-6)
    _assert_states(results[0][2], results[1][2], rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------
# `fused` and `capturable` checks.

def _outcome(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 (the outcome is compared, whatever it is)
        return type(e).__name__, str(e)
    return "ok"


@pytest.mark.parametrize("name", ["Adam", "AdamW", "SGD", "Adagrad"])
@pytest.mark.parametrize("flags", [{"fused": True, "foreach": True},
                                   {"fused": True, "differentiable": True},
                                   {"fused": True, "foreach": True, "differentiable": True}])
def test_fused_flag_conflicts_at_construction(name, flags):
    outs = [_outcome(lambda T=T: getattr(T.optim, name)([T.nn.Parameter(T.ones(2))],
                                                         lr=0.1, **flags)) for T in LIBS]
    assert outs[1] == outs[0] and outs[0] != "ok"


@pytest.mark.parametrize("name", ["Adam", "AdamW", "SGD", "Adagrad"])
def test_fused_refuses_complex_params_at_step(name):
    outs = []
    for T in LIBS:
        p = T.nn.Parameter(T.ones(2, dtype=T.complex64))
        opt = getattr(T.optim, name)([p], lr=0.1, fused=True)
        p.grad = T.ones_like(p)
        outs.append((_outcome(opt.step), _np(p).tolist()))
    assert outs[1] == outs[0]
    assert outs[0][0][0] == "RuntimeError"


def test_fused_real_params_step_as_usual():
    outs = []
    for T in LIBS:
        p = T.nn.Parameter(T.linspace(-1, 1, 6))
        opt = T.optim.Adam([p], lr=0.1, fused=True, capturable=True)
        for _ in range(3):
            p.grad = p.detach() * 2
            opt.step()
        outs.append(_np(p))
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-6, atol=1e-7)


CAPTURABLE = ["Adam", "AdamW", "RMSprop", "NAdam", "Adamax", "Adadelta", "Rprop", "RAdam",
              "ASGD"]


@pytest.mark.parametrize("foreach", [None, False, True])
@pytest.mark.parametrize("dtype", ["float32", "complex64"])
@pytest.mark.parametrize("name", CAPTURABLE)
def test_capturable_on_cpu_fails_at_step(name, dtype, foreach):
    outs = []
    for T in LIBS:
        p = T.nn.Parameter(T.ones(2, dtype=getattr(T, dtype)))
        q = T.nn.Parameter(T.ones(3, dtype=getattr(T, dtype)))
        opt = getattr(T.optim, name)([p, q], lr=0.1, capturable=True, foreach=foreach)
        p.grad = T.ones_like(p)
        q.grad = T.ones_like(q)
        outcome = _outcome(opt.step)
        # The group's state is made before the error; no parameter has moved.
        outs.append((outcome, _np(p).tolist(), _state(opt, p), _state(opt, q)))
    (t_out, t_p, t_sp, t_sq), (f_out, f_p, f_sp, f_sq) = outs
    assert f_out == t_out and t_out[0] == "AssertionError"
    assert f_p == t_p
    _assert_states(t_sp, f_sp, rtol=0, atol=0)
    _assert_states(t_sq, f_sq, rtol=0, atol=0)


def test_capturable_error_of_the_report():
    for T in LIBS:
        p = T.nn.Parameter(T.ones(2))
        opt = T.optim.Adam([p], capturable=True)
        p.grad = T.ones(2)
        with pytest.raises(AssertionError, match=re.escape(
                "If capturable=True, params and state_steps must be on supported devices: "
                "['cuda', 'xpu', 'hpu', 'privateuseone', 'xla'].")):
            opt.step()


def test_capturable_group_without_grads_steps_nothing():
    outs = []
    for T in LIBS:
        p = T.nn.Parameter(T.ones(2))
        q = T.nn.Parameter(T.ones(2))
        opt = T.optim.Adam([{"params": [p]}, {"params": [q], "capturable": True}], lr=0.1)
        p.grad = T.ones(2)
        opt.step()
        outs.append((_np(p).tolist(), len(opt.state)))
    assert outs[1] == outs[0]


def test_adagrad_param_group_added_later():
    outs = []
    for T in LIBS:
        p = T.nn.Parameter(T.ones(2))
        opt = T.optim.Adagrad([p], lr=0.1, initial_accumulator_value=0.3)
        q = T.nn.Parameter(T.tensor([1 + 2j, -1j], dtype=T.complex64))
        opt.add_param_group({"params": [q], "lr": 0.2})
        for i in range(3):
            p.grad = T.ones(2) * i
            q.grad = T.tensor([0.5 - 1j, 2 + 0.1j]) * (i + 1)
            opt.step()
        outs.append((_np(p), _np(q), _state(opt, q)))
    np.testing.assert_allclose(outs[1][0], outs[0][0], rtol=1e-6)
    np.testing.assert_allclose(outs[1][1], outs[0][1], rtol=1e-6)
    _assert_states(outs[0][2], outs[1][2], rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------------------------------
# Tensor betas.

def _betas(T, kind):
    return {
        "t": lambda: (T.tensor(0.9), T.tensor(0.99)),
        "t64": lambda: (T.tensor(0.9, dtype=T.float64), T.tensor(0.99, dtype=T.float64)),
        "t1": lambda: (T.tensor([0.9]), T.tensor([0.99])),
        "t_f": lambda: (T.tensor(0.9), 0.99),
        "f_t": lambda: (0.9, T.tensor(0.99)),
        "int": lambda: (0.9, 0),
        "t2": lambda: (T.tensor([0.9, 0.9]), T.tensor(0.99)),
    }[kind]()


def _beta_run(T, name, kind, dtype="float32", steps=12, **kwargs):
    p = T.nn.Parameter(T.linspace(-2, 2, 7, dtype=getattr(T, dtype)))
    opt = getattr(T.optim, name)([p], lr=0.1, betas=_betas(T, kind), **kwargs)
    for i in range(steps):
        p.grad = T.linspace(-1, 3, 7, dtype=getattr(T, dtype)) * math.cos(i)
        opt.step()
    return p, opt


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["t", "t64", "t1"])
@pytest.mark.parametrize(("name", "kwargs"), [
    ("Adam", {}), ("Adam", {"amsgrad": True}), ("AdamW", {}),
    ("Adam", {"weight_decay": 0.1, "maximize": True})])
def test_adam_tensor_betas(name, kwargs, kind, dtype):
    (tp, topt), (fp, fopt) = (_beta_run(T, name, kind, dtype, **kwargs) for T in LIBS)
    # Float32 betas make float32 bias corrections (PyTorch's float32 square root is not
    # always the correctly rounded one): a float64 parameter then agrees to float32 precision.
    rtol = 1e-12 if dtype == "float64" and kind == "t64" else 1e-6
    np.testing.assert_allclose(_np(fp), _np(tp), rtol=rtol, atol=rtol)
    _assert_states(_state(topt, tp), _state(fopt, fp), rtol=rtol, atol=rtol)
    # The betas stay tensors (a one-element one squeezed), as in PyTorch.
    assert repr(fopt.param_groups[0]["betas"]) == repr(topt.param_groups[0]["betas"])


def test_adam_tensor_betas_complex_param():
    outs = []
    for T in LIBS:
        p = T.nn.Parameter(T.tensor([1 + 1j, -0.5 + 2j], dtype=T.complex64))
        opt = T.optim.Adam([p], lr=0.1, betas=(T.tensor(0.8), T.tensor(0.95)))
        for i in range(5):
            p.grad = T.tensor([2 + 2j, 1 - 3j]) * (i - 2)
            opt.step()
        outs.append(_np(p))
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("kind", ["t_f", "f_t", "int", "t2"])
@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_adam_betas_mixed_or_bad_are_refused(name, kind):
    outs = [_outcome(lambda T=T: getattr(T.optim, name)([T.nn.Parameter(T.ones(2))],
                                                         betas=_betas(T, kind)))
            for T in LIBS]
    # (A two-element beta fails the range check first: a RuntimeError in both.)
    assert outs[1] == outs[0] and outs[0] != "ok"


@pytest.mark.parametrize("which", ["betas", "lr"])
def test_adam_tensor_hyperparameters_with_foreach(which):
    def build(T):
        kwargs = {"betas": (T.tensor(0.9), T.tensor(0.99))} if which == "betas" else {
            "lr": T.tensor(0.01)}
        return T.optim.Adam([T.nn.Parameter(T.ones(2))], foreach=True, **kwargs)

    outs = [_outcome(lambda T=T: build(T)) for T in LIBS]
    assert outs[1] == outs[0] and outs[0][0] == "ValueError"


def test_adam_two_element_lr_is_refused():
    outs = [_outcome(lambda T=T: T.optim.Adam([T.nn.Parameter(T.ones(2))],
                                              lr=T.tensor([0.1, 0.2]))) for T in LIBS]
    assert outs[1] == outs[0] and outs[0][0] == "ValueError"


@pytest.mark.parametrize("kind", ["t", "t_f", "f_t", "t64"])
@pytest.mark.parametrize("name", ["NAdam", "RAdam", "Adamax"])
def test_other_optimizers_take_scalar_tensor_betas(name, kind):
    (tp, topt), (fp, fopt) = (_beta_run(T, name, kind) for T in LIBS)
    np.testing.assert_allclose(_np(fp), _np(tp), rtol=1e-5, atol=1e-6)
    assert repr(fopt.param_groups[0]["betas"]) == repr(topt.param_groups[0]["betas"])


def test_cycled_momentum_over_tensor_betas():
    """OneCycleLR puts a float beta1 next to a tensor beta2: Adam steps with both."""
    outs = []
    for T in LIBS:
        p = T.nn.Parameter(T.linspace(-1, 1, 5))
        opt = T.optim.Adam([p], lr=0.1, betas=(T.tensor(0.9), T.tensor(0.99)))
        sched = T.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.2, total_steps=10)
        for _ in range(6):
            p.grad = p.detach() - 0.3
            opt.step()
            sched.step()
        outs.append(_np(p))
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------------------------------
# Schedulers resumed with last_epoch.

def _schedule(T, name, last_epoch):
    p = T.nn.Parameter(T.ones(1))
    opt = T.optim.SGD([p], lr=0.1, momentum=0.9)
    opt.add_param_group({"params": [T.nn.Parameter(T.ones(1))], "lr": 0.3})
    if last_epoch != -1:
        for g in opt.param_groups:
            g["initial_lr"] = g["lr"]
            g["max_lr"], g["min_lr"] = 0.5, 1e-5
            g["max_momentum"], g["base_momentum"] = 0.95, 0.85
            g["swa_lr"] = 0.05
        opt.param_groups[0]["lr"] = 0.05  # the rate a checkpoint left
    S = T.optim.lr_scheduler
    make = {
        "StepLR": lambda: S.StepLR(opt, 3, 0.5, last_epoch=last_epoch),
        "MultiStepLR": lambda: S.MultiStepLR(opt, [2, 5, 5, 9], 0.5, last_epoch=last_epoch),
        "ExponentialLR": lambda: S.ExponentialLR(opt, 0.5, last_epoch=last_epoch),
        "MultiplicativeLR": lambda: S.MultiplicativeLR(opt, lambda e: 0.9 ** e,
                                                       last_epoch=last_epoch),
        "LambdaLR": lambda: S.LambdaLR(opt, lambda e: 0.9 ** e, last_epoch=last_epoch),
        "CosineAnnealingLR": lambda: S.CosineAnnealingLR(opt, 4, 0.01, last_epoch=last_epoch),
        "ConstantLR": lambda: S.ConstantLR(opt, 0.5, 4, last_epoch=last_epoch),
        "LinearLR": lambda: S.LinearLR(opt, 0.5, 1.0, 4, last_epoch=last_epoch),
        "PolynomialLR": lambda: S.PolynomialLR(opt, 8, 2.0, last_epoch=last_epoch),
        "CyclicLR": lambda: S.CyclicLR(opt, 0.01, 0.1, 3, last_epoch=last_epoch),
        "CosineAnnealingWarmRestarts": lambda: S.CosineAnnealingWarmRestarts(
            opt, 3, 2, 0.01, last_epoch=last_epoch),
        "OneCycleLR": lambda: S.OneCycleLR(opt, 0.5, total_steps=30, last_epoch=last_epoch),
        "SWALR": lambda: T.optim.swa_utils.SWALR(opt, 0.05, 3, last_epoch=last_epoch),
        "SequentialLR": lambda: S.SequentialLR(
            opt, [S.ExponentialLR(opt, 0.5, last_epoch=last_epoch),
                  S.CosineAnnealingLR(opt, 5, last_epoch=last_epoch)],
            milestones=[3], last_epoch=last_epoch),
    }[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sched = make()
        lrs = [[g["lr"] for g in opt.param_groups]]
        for _ in range(10):
            opt.step()
            sched.step()
            lrs.append([g["lr"] for g in opt.param_groups])
    return lrs


@pytest.mark.parametrize("last_epoch", [-1, 0, 1, 3, 7])
@pytest.mark.parametrize("name", ["StepLR", "MultiStepLR", "ExponentialLR", "MultiplicativeLR",
                                  "LambdaLR", "CosineAnnealingLR", "ConstantLR", "LinearLR",
                                  "PolynomialLR", "CyclicLR", "CosineAnnealingWarmRestarts",
                                  "OneCycleLR", "SWALR", "SequentialLR"])
def test_scheduler_resumed_at_last_epoch(name, last_epoch):
    ours, theirs = _schedule(fusegrad, name, last_epoch), _schedule(torch, name, last_epoch)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a == pytest.approx(b, rel=1e-12, abs=0)


def test_exponential_lr_resume_of_the_report():
    for T in LIBS:
        p = T.nn.Parameter(T.ones(1))
        opt = T.optim.SGD([p], lr=0.1)
        opt.param_groups[0]["initial_lr"] = 0.1
        sched = T.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5, last_epoch=4)
        assert opt.param_groups[0]["lr"] == 0.1
        assert sched.state_dict()["_is_initial"] is False


# ---------------------------------------------------------------------------------------
# Optimizer hooks.

def _hook_log(T):
    """Every hook kind registered on an SGD, with a log of the calls each library makes."""
    log = []
    p = T.nn.Parameter(T.ones(2))
    opt = T.optim.SGD([p], lr=0.1, momentum=0.9)
    name = type(opt).__name__

    def args_kinds(args):
        return [type(a).__name__ for a in args]

    module = importlib.import_module(f"{T.__name__}.optim.optimizer")
    handles = [
        module.register_optimizer_step_pre_hook(
            lambda o, a, k: log.append(("global pre", type(o).__name__, args_kinds(a),
                                        sorted(k)))),
        module.register_optimizer_step_post_hook(
            lambda o, a, k: log.append(("global post", args_kinds(a), sorted(k)))),
        opt.register_step_pre_hook(lambda o, a, k: log.append(("pre", o is opt,
                                                               args_kinds(a), sorted(k)))),
        opt.register_step_post_hook(lambda o, a, k: log.append(("post", args_kinds(a),
                                                                sorted(k)))),
    ]
    try:
        p.grad = T.ones(2)
        opt.step()
        opt.step(closure=lambda: log.append(("closure",)) or T.tensor(1.0))
        opt.step(lambda: log.append(("closure positional",)) or T.tensor(2.0))
        for h in handles[:2]:
            h.remove()
        opt.step()
        handles[2].remove()
        handles[2].remove()  # a second remove does nothing
        opt.step()
    finally:
        for h in handles:
            h.remove()
    return name, log, _np(p)


def test_step_hooks_order_and_arguments():
    (_, tlog, tp), (_, flog, fp) = _hook_log(torch), _hook_log(fusegrad)
    assert flog == tlog
    np.testing.assert_allclose(fp, tp, rtol=1e-6)


def test_step_pre_hook_replaces_arguments():
    outs = []
    for T in LIBS:
        p = T.nn.Parameter(T.ones(2))
        opt = T.optim.Adam([p], lr=0.1)
        seen = []

        def swap(o, args, kwargs, T=T, seen=seen):
            return args, {"closure": lambda: seen.append("swapped") or T.tensor(7.0)}

        opt.register_step_pre_hook(swap)
        opt.register_step_post_hook(lambda o, a, k, seen=seen: seen.append(sorted(k)))
        p.grad = T.ones(2)
        loss = opt.step()
        outs.append((float(loss), seen, _np(p).tolist()))
    assert outs[1] == outs[0]


def test_step_pre_hook_bad_result():
    for T in LIBS:
        p = T.nn.Parameter(T.ones(2))
        opt = T.optim.Adadelta([p])
        opt.register_step_pre_hook(lambda o, a, k: 5)
        p.grad = T.ones(2)
        with pytest.raises(RuntimeError, match=r"^<function Adadelta\.step at 0x[0-9a-f]+> must "
                           r"return None or a tuple of \(new_args, new_kwargs\), but got 5\.$"):
            opt.step()
        assert _np(p).tolist() == [1.0, 1.0]


def _state_dict_hooks(T):
    log = []
    p = T.nn.Parameter(T.ones(2))
    opt = T.optim.SGD([p], lr=0.1, momentum=0.9)
    p.grad = T.ones(2)
    opt.step()
    opt.register_state_dict_pre_hook(lambda o: log.append("pre a"))
    opt.register_state_dict_pre_hook(lambda o: log.append("pre b"), prepend=True)

    def post_edit(o, sd):
        log.append("post edit")
        sd["param_groups"][0]["note"] = 1

    def post_replace(o, sd):
        log.append(("post replace", sorted(sd["param_groups"][0])))
        return {"state": {}, "param_groups": sd["param_groups"], "extra": True}

    h = opt.register_state_dict_post_hook(post_replace)
    opt.register_state_dict_post_hook(post_edit, prepend=True)
    sd = opt.state_dict()
    log.append(sorted(sd))
    h.remove()
    sd = opt.state_dict()
    log.append((sorted(sd), sorted(sd["state"])))
    return log


def test_state_dict_hooks():
    assert _state_dict_hooks(fusegrad) == _state_dict_hooks(torch)


def _load_hooks(T):
    log = []
    p = T.nn.Parameter(T.ones(2))
    opt = T.optim.Adam([p], lr=0.1)
    p.grad = T.ones(2)
    opt.step()
    saved = opt.state_dict()
    q = T.nn.Parameter(T.ones(2))
    fresh = T.optim.Adam([q], lr=0.5)

    def pre_edit(o, sd):
        log.append(("pre edit", sd is saved, sorted(sd)))
        sd["marker"] = 1

    def pre_replace(o, sd):
        log.append(("pre replace", "marker" in sd))
        new = {"state": sd["state"], "param_groups": copy.deepcopy(sd["param_groups"])}
        new["param_groups"][0]["lr"] = 0.25
        return new

    fresh.register_load_state_dict_pre_hook(pre_replace)
    fresh.register_load_state_dict_pre_hook(pre_edit, prepend=True)
    fresh.register_load_state_dict_post_hook(lambda o: log.append(("post a",
                                                                  o.param_groups[0]["lr"])))
    fresh.register_load_state_dict_post_hook(lambda o: log.append("post b"), prepend=True)
    fresh.load_state_dict(saved)
    log.append(("marker left in the caller's dict", "marker" in saved))
    # The loaded state tensors are the saved ones (no copy without a cast), as in PyTorch.
    log.append(fresh.state[q]["exp_avg"] is saved["state"][0]["exp_avg"])
    log.append(sorted(fresh.param_groups[0]))
    return log


def test_load_state_dict_hooks():
    assert _load_hooks(fusegrad) == _load_hooks(torch)


def test_hooks_are_not_copied_with_the_optimizer():
    for T in LIBS:
        p = T.nn.Parameter(T.ones(2))
        opt = T.optim.SGD([p], lr=0.1)
        calls = []
        opt.register_step_pre_hook(lambda o, a, k, calls=calls: calls.append(1))
        clone = copy.deepcopy(opt)
        clone.param_groups[0]["params"][0].grad = T.ones(2)
        clone.step()
        assert calls == []
        assert clone.register_step_post_hook(lambda o, a, k: None) is not None


def test_load_state_dict_casts_as_torch():
    """Float state follows a floating-point parameter's dtype; a complex parameter's is left
    as saved; a `step` is kept unless the group is fused."""
    outs = []
    for T in LIBS:
        p = T.nn.Parameter(T.ones(2, dtype=T.float64))
        opt = T.optim.Adam([p], lr=0.1)
        sd = {"state": {0: {"step": T.tensor(3.0), "exp_avg": T.ones(2),
                            "exp_avg_sq": T.ones(2, dtype=T.float16)}},
              "param_groups": [dict(opt.state_dict()["param_groups"][0])]}
        opt.load_state_dict(sd)
        s = opt.state[p]
        row = [str(s[k].dtype) for k in ("step", "exp_avg", "exp_avg_sq")]
        c = T.nn.Parameter(T.ones(2, dtype=T.complex64))
        copt = T.optim.Adam([c], lr=0.1)
        csd = {"state": {0: {"step": T.tensor(1.0), "exp_avg": T.ones(2, dtype=T.complex128),
                             "exp_avg_sq": T.ones(2)}},
               "param_groups": [dict(copt.state_dict()["param_groups"][0])]}
        copt.load_state_dict(csd)
        row += [str(copt.state[c][k].dtype) for k in ("exp_avg", "exp_avg_sq")]
        outs.append([r.split(".")[-1] for r in row])
    assert outs[1] == outs[0]


# ---------------------------------------------------------------------------------------
# LBFGS and SparseAdam with complex parameters.

@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_complex_params_as_pairs_of_reals(line_search_fn):
    outs = []
    for T in LIBS:
        rng = np.random.RandomState(0)
        a = T.tensor((rng.randn(4, 4) + 1j * rng.randn(4, 4)).astype(np.complex64))
        p = T.nn.Parameter(T.tensor((rng.randn(4) + 1j * rng.randn(4)).astype(np.complex64)))
        q = T.nn.Parameter(T.tensor(rng.randn(3).astype(np.float32)))
        opt = T.optim.LBFGS([p, q], lr=0.5, max_iter=3, line_search_fn=line_search_fn)

        def closure(opt=opt, a=a, p=p, q=q):
            opt.zero_grad()
            loss = ((a @ p).abs() ** 2).sum() + ((q - 1) ** 2).sum()
            loss.backward()
            return loss

        opt.step(closure)
        outs.append((_np(p), _np(q)))
    np.testing.assert_allclose(outs[1][0], outs[0][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outs[1][1], outs[0][1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["complex", "lr0", "eps0", "lr2"])
def test_sparse_adam_construction_checks(case):
    def build(T):
        if case == "complex":
            return T.optim.SparseAdam([
                {"params": [T.nn.Parameter(T.ones(2))]},
                {"params": [T.nn.Parameter(T.ones(2)),
                            T.nn.Parameter(T.ones(2, dtype=T.complex64))]}])
        kwargs = {"lr0": {"lr": 0}, "eps0": {"eps": 0.0},
                  "lr2": {"lr": T.tensor([0.1, 0.2])}}[case]
        return T.optim.SparseAdam([T.nn.Parameter(T.ones(2))], **kwargs)

    outs = [_outcome(lambda T=T: build(T)) for T in LIBS]
    assert outs[1] == outs[0] and outs[0][0] == "ValueError"
