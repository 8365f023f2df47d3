"""Version counters an optimizer step moves (parameter and state tensors), and stepping
through `differentiable=True` updates, against PyTorch."""

import itertools

import numpy as np
import pytest
import torch

import fusegrad as fg

# Options per optimizer: every combination is checked (foreach off and on).
_GRIDS = {
    "SGD": dict(lr=[0.1], momentum=[0, 0.9], nesterov=[False, True], weight_decay=[0, 0.1],
                dampening=[0, 0.1], maximize=[False, True]),
    "Adam": dict(amsgrad=[False, True], weight_decay=[0, 0.1],
                 decoupled_weight_decay=[False, True], maximize=[False, True]),
    "AdamW": dict(amsgrad=[False, True], weight_decay=[0, 0.1], maximize=[False, True]),
    "NAdam": dict(weight_decay=[0, 0.1], decoupled_weight_decay=[False, True]),
    "RAdam": dict(weight_decay=[0, 0.1], decoupled_weight_decay=[False, True]),
    "Adamax": dict(weight_decay=[0, 0.1], maximize=[False, True]),
    "Adagrad": dict(weight_decay=[0, 0.1], lr_decay=[0, 0.1], maximize=[False, True]),
    "RMSprop": dict(weight_decay=[0, 0.1], momentum=[0, 0.9], centered=[False, True]),
    "Adadelta": dict(weight_decay=[0, 0.1], maximize=[False, True]),
    "ASGD": dict(weight_decay=[0, 0.1], t0=[0, 3]),
    "Rprop": dict(maximize=[False, True]),
    "Adafactor": dict(weight_decay=[0, 0.1]),
}


def _cases():
    for name, grid in _GRIDS.items():
        for values in itertools.product(*grid.values()):
            kw = dict(zip(grid, values))
            if kw.get("nesterov") and (kw["momentum"] == 0 or kw["dampening"]):
                continue
            for foreach in (None, True):
                yield name, {**kw, "foreach": foreach}
    for name in ("SGD", "Adam", "AdamW", "Adagrad"):
        yield name, {"fused": True}
    yield "SGD", {"fused": True, "momentum": 0.9}
    yield "Adam", {"fused": True, "amsgrad": True, "weight_decay": 0.1}


def _version_trace(lib, name, kw, steps=4, n=6):
    """Per step: the parameter's version change and each state tensor's, and the values."""
    p = lib.nn.Parameter(lib.arange(n, dtype=lib.float32) / 7 + 0.3)
    opt = getattr(lib.optim, name)([p], **kw)
    trace = []
    for s in range(steps):
        p.grad = (lib.arange(n, dtype=lib.float32) - 2.5 + (-1) ** s * s) / 3
        before = p._version
        state_before = {k: v._version for k, v in opt.state[p].items()
                        if isinstance(v, lib.Tensor)}
        opt.step()
        moved = {k: v._version - state_before.get(k, 0) for k, v in opt.state[p].items()
                 if isinstance(v, lib.Tensor)}
        trace.append((p._version - before, moved))
    return trace, p.detach().numpy().copy()


@pytest.mark.parametrize("name,kw", list(_cases()), ids=lambda x: str(x))
def test_step_version_counters(name, kw):
    expected, want = _version_trace(torch, name, kw)
    got, have = _version_trace(fg, name, kw)
    assert got == expected
    np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-6)


def _layout_trace(lib, name, kw, dtype, sparse):
    """Version moves over three steps of a complex parameter, or of sparse gradients (the
    second test: a strided momentum buffer taking a sparse gradient)."""
    p = lib.nn.Parameter(lib.ones(4, 3, dtype=getattr(lib, dtype)))
    opt = getattr(lib.optim, name)([p], **kw)
    trace = []
    for s in range(3):
        if sparse and s:
            p.grad = lib.sparse_coo_tensor(lib.tensor([[0, 2]]), lib.ones(2, 3) * (s + 1),
                                           (4, 3))
        else:
            p.grad = lib.ones(4, 3, dtype=p.dtype) * (s + 1)
        before = {k: v._version for k, v in opt.state[p].items() if isinstance(v, lib.Tensor)}
        version = p._version
        opt.step()
        trace.append((p._version - version,
                      {k: v._version - before.get(k, 0) for k, v in opt.state[p].items()
                       if isinstance(v, lib.Tensor)}))
    return trace


@pytest.mark.parametrize("name,kw", [
    ("SGD", dict(lr=0.1, momentum=0.9)), ("Adam", {}), ("AdamW", dict(amsgrad=True)),
    ("RMSprop", dict(momentum=0.9, centered=True)), ("NAdam", {}), ("Adagrad", {})])
def test_complex_parameter_version_counters(name, kw):
    assert _layout_trace(fg, name, kw, "complex64", False) == \
        _layout_trace(torch, name, kw, "complex64", False)


@pytest.mark.parametrize("weight_decay", [0, 0.1])
def test_adafactor_factored_version_counters(weight_decay):
    kw = dict(weight_decay=weight_decay)
    assert _layout_trace(fg, "Adafactor", kw, "float32", False) == \
        _layout_trace(torch, "Adafactor", kw, "float32", False)


@pytest.mark.parametrize("kw", [dict(lr=0.1, momentum=0.9), dict(lr=0.1)])
def test_sparse_gradient_version_counters(kw):
    assert _layout_trace(fg, "SGD", kw, "float32", True) == \
        _layout_trace(torch, "SGD", kw, "float32", True)


def test_saved_tensor_check_after_adamw_step():
    """A tensor saved before an AdamW step is two versions behind afterwards, as the error
    text a program sees reports."""
    msgs = []
    for lib in (torch, fg):
        p = lib.nn.Parameter(lib.ones(3))
        y = (p * p).sum()
        p.grad = lib.ones(3)
        lib.optim.AdamW([p]).step()
        with pytest.raises(RuntimeError) as err:
            y.backward()
        msgs.append(str(err.value).split("is at version")[1].split(";")[0])
    assert msgs[0] == msgs[1]


def _meta_step(lib, name, kw, hyper=(), steps=2):
    """The meta-learning pattern: a clone of the initial parameters stepped with
    `differentiable=True` on gradients that keep their graph, then the gradient of a loss
    of the stepped parameters with respect to the initial ones and to hyperparameter
    tensors (`hyper`: option names given as tensors that require grad). Returns what is
    compared, or the error's type and text."""
    w0 = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
    kw = dict(kw)
    tensors = []
    for key in hyper:
        if key == "betas":
            kw[key] = tuple(lib.tensor(b, requires_grad=True) for b in kw[key])
            tensors += list(kw[key])
        else:
            kw[key] = lib.tensor(kw[key], requires_grad=True)
            tensors.append(kw[key])
    p = w0.clone()
    try:
        opt = getattr(lib.optim, name)([p], differentiable=True, **kw)
        for s in range(steps):
            loss = (p * p * (s + 1)).sum()
            (g,) = lib.autograd.grad(loss, p, create_graph=True)
            p.grad = g
            opt.step()
        grads = lib.autograd.grad((p ** 3).sum(), [w0, *tensors])
    except (RuntimeError, ValueError) as e:
        return type(e).__name__, str(e)
    state = {k: (v.requires_grad, v._version) for k, v in opt.state[p].items()}
    return ([g.detach().numpy().astype(np.float64) for g in grads],
            type(p.grad_fn).__name__, p._version, state,
            p.detach().numpy().astype(np.float64))


_META_CASES = [
    ("SGD", dict(lr=0.1), ()),
    ("SGD", dict(lr=0.1, momentum=0.9), ()),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1), ()),
    ("SGD", dict(lr=0.1, momentum=0.5, dampening=0.2, maximize=True), ()),
    ("SGD", dict(lr=0.1), ("lr",)),
    ("SGD", dict(lr=0.1, weight_decay=0.1), ("lr", "weight_decay")),
    ("SGD", dict(lr=0.1, momentum=0.5, weight_decay=0.1), ("lr",)),  # saved buffer moved
    ("Adam", dict(lr=0.1), ()),
    ("Adam", dict(lr=0.1, amsgrad=True), ()),  # PyTorch's saved-tensor error
    ("Adam", dict(lr=0.1, weight_decay=0.1), ("weight_decay",)),
    ("Adam", dict(lr=0.1, weight_decay=0.1, decoupled_weight_decay=True), ()),
    ("Adam", dict(lr=0.1, maximize=True), ("lr",)),
    ("Adam", dict(lr=0.1, betas=(0.8, 0.9)), ("betas",)),
    ("AdamW", dict(lr=0.05), ("lr",)),
    ("RMSprop", dict(lr=0.01), ()),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.1), ()),
    ("RMSprop", dict(lr=0.01, centered=True, maximize=True), ()),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1, weight_decay=0.1), ()),
    ("Adagrad", dict(lr=0.1, initial_accumulator_value=0.5, maximize=True), ()),
    ("Adadelta", dict(lr=0.5), ()),
    ("Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.1, maximize=True), ()),
    ("Adamax", dict(lr=0.05), ()),
    ("Adamax", dict(lr=0.05, weight_decay=0.1, maximize=True), ()),
    ("Rprop", dict(lr=0.05), ()),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.06), maximize=True), ()),
    ("ASGD", dict(lr=0.05), ()),
    ("ASGD", dict(lr=0.05, t0=0, weight_decay=0.1, maximize=True), ()),
    ("NAdam", dict(lr=0.05), ()),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True), ()),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, maximize=True), ()),
    ("RAdam", dict(lr=0.05), ()),
    ("RAdam", dict(lr=0.05, betas=(0.5, 0.6), weight_decay=0.1), ()),  # rectified steps
    ("RAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True), ()),
]


@pytest.mark.parametrize("name,kw,hyper", _META_CASES, ids=lambda x: str(x))
def test_differentiable_step_through_update(name, kw, hyper):
    expected = _meta_step(torch, name, kw, hyper)
    got = _meta_step(fg, name, kw, hyper)
    if isinstance(expected[0], str):
        assert got == expected
        return
    assert got[1:4] == expected[1:4]
    np.testing.assert_allclose(got[4], expected[4], rtol=1e-6)
    # (float32 rounding of the powers' gradients: identical in float64)
    for a, b in zip(got[0], expected[0]):
        np.testing.assert_allclose(a, b, rtol=5e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop", "Rprop", "NAdam"])
def test_differentiable_leaf_parameter_refused(name):
    """A leaf that requires grad cannot be stepped in place under grad mode."""
    errors = []
    for lib in (torch, fg):
        p = lib.nn.Parameter(lib.ones(3))
        p.grad = lib.ones(3)
        opt = getattr(lib.optim, name)([p], lr=0.1, differentiable=True)
        with pytest.raises(RuntimeError) as err:
            opt.step()
        errors.append(str(err.value))
    assert errors[0] == errors[1]


def test_non_leaf_parameters_accepted_as_pytorch_does():
    for lib in (torch, fg):
        p = lib.ones(3, requires_grad=True).clone()
        with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
            lib.optim.SGD([p], lr=0.1)
        lib.optim.SGD([p], lr=0.1, differentiable=True)
        p.retain_grad()
        lib.optim.SGD([p], lr=0.1)


def _given_state_step(lib, name, kw, state):
    """PyTorch's own `differentiable` test pattern: one step of a clone of the parameters
    with a gradient and state tensors that require grad (float64), then the gradient of a
    loss of the stepped parameter and state with respect to all of them."""
    p0 = lib.tensor(np.linspace(-1, 1, 10), requires_grad=True)
    g0 = lib.tensor(np.linspace(0.5, -0.7, 10), requires_grad=True)
    # (a float64 step: fusegrad's float ** float32 tensor is rounded differently, see report)
    given = {k: lib.tensor(v, requires_grad=k != "step", dtype=lib.float64)
             for k, v in state.items()}
    p = p0.clone()
    p.grad = g0
    opt = getattr(lib.optim, name)([p], differentiable=True, **kw)
    opt.state[p].update({k: v.clone() if v.requires_grad else v for k, v in given.items()})
    opt.step()
    outs = (p, *(v for v in opt.state[p].values() if v.requires_grad))
    loss = sum((o * (i + 1)).sum() ** 2 for i, o in enumerate(outs))
    ins = [p0, g0, *(v for v in given.values() if v.requires_grad)]
    return [x.detach().numpy() for x in lib.autograd.grad(loss, ins)]


_ADAM_STATE = {"step": 10.0, "exp_avg": np.linspace(0.1, 1, 10),
               "exp_avg_sq": np.linspace(0.2, 1, 10)}


@pytest.mark.parametrize("name,kw,state", [
    ("SGD", dict(lr=0.9, momentum=0.9, weight_decay=0.1),
     {"momentum_buffer": np.linspace(0.1, 1, 10)}),
    ("SGD", dict(lr=0.9, momentum=0.9, nesterov=True),
     {"momentum_buffer": np.linspace(0.1, 1, 10)}),
    ("Adam", dict(lr=0.9, weight_decay=0.1), _ADAM_STATE),
    ("Adam", dict(lr=0.9, amsgrad=True),
     {**_ADAM_STATE, "max_exp_avg_sq": np.linspace(0.3, 0.5, 10)}),
    ("AdamW", dict(lr=0.9, amsgrad=True, maximize=True),
     {**_ADAM_STATE, "max_exp_avg_sq": np.linspace(0.3, 0.5, 10)}),
    ("RMSprop", dict(lr=0.1, momentum=0.9, centered=True, weight_decay=0.1),
     {"step": 3.0, "square_avg": np.linspace(1.0, 2, 10),
      "momentum_buffer": np.linspace(-0.5, 0.5, 10), "grad_avg": np.linspace(0.1, 0.3, 10)}),
    ("RMSprop", dict(lr=0.1), {"step": 3.0, "square_avg": np.linspace(1.0, 2, 10)}),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01), {"step": 3.0, "sum": np.linspace(1.0, 2, 10)}),
    ("RAdam", dict(lr=0.1, weight_decay=0.1), _ADAM_STATE),  # rectified at step 11
    ("Adamax", dict(lr=0.1, weight_decay=0.1),
     {"step": 3.0, "exp_avg": np.linspace(0.1, 1, 10), "exp_inf": np.linspace(0.2, 1, 10)}),
    ("NAdam", dict(lr=0.1, weight_decay=0.1),
     {"step": 10.0, "mu_product": 0.5, "exp_avg": np.linspace(0.1, 1, 10),
      "exp_avg_sq": np.linspace(0.2, 1, 10)}),
    ("Adadelta", dict(lr=0.5, weight_decay=0.1),
     {"step": 3.0, "square_avg": np.linspace(1.0, 2, 10),
      "acc_delta": np.linspace(0.1, 0.2, 10)}),
], ids=lambda x: str(x)[:40])
def test_differentiable_step_with_given_state(name, kw, state):
    expected = _given_state_step(torch, name, kw, state)
    got = _given_state_step(fg, name, kw, state)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop", "Adagrad"])
@pytest.mark.parametrize("requires_grad", [True, False])
def test_differentiable_foreach(name, requires_grad):
    """Only SGD's foreach update may be differentiated through; the others refuse it."""
    outcomes = []
    for lib in (torch, fg):
        p = lib.ones(3, requires_grad=requires_grad).clone()
        p.grad = lib.ones(3)
        opt = getattr(lib.optim, name)([p], lr=0.1, foreach=True, differentiable=True)
        try:
            opt.step()
            outcomes.append((type(p.grad_fn).__name__, p.detach().numpy().tolist()))
        except AssertionError as e:
            outcomes.append(str(e))
    assert outcomes[0] == outcomes[1]
