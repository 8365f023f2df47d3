"""Losses against torch.nn: values, node names, gradients and error messages."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_nn_support import close, node

import fusegrad
import fusegrad.nn as fnn


def data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def run(name, kwargs, x, t, target_grad=False, node_check=True, atol=1e-5, **extra):
    """Loss module `name` on (x, t) in both libraries: value, node, grads of x (and t)."""
    res = []
    for T, nn in ((torch, torch.nn), (fusegrad, fnn)):
        kw = {k: (T.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
        xt = T.tensor(x, requires_grad=True)
        tt = T.tensor(t, requires_grad=target_grad and t.dtype.kind == "f")
        loss = getattr(nn, name)(**kw)(xt, tt)
        g = np.random.default_rng(5).standard_normal(tuple(loss.shape)).astype(x.dtype)
        (loss * T.tensor(g)).sum().backward()
        res.append((loss, xt, tt))
    (lt, xt, tt), (lf, xf, tf) = res
    close(lf, lt, atol, atol, "loss")
    if node_check:
        assert node(lf) == node(lt), f"{node(lf)} != {node(lt)}"
    close(xf.grad, xt.grad, atol * 10, atol * 10, "input grad")
    if tt.requires_grad:
        close(tf.grad, tt.grad, atol * 10, atol * 10, "target grad")
    assert repr(getattr(fnn, name)(**{k: v for k, v in kwargs.items()
                                      if not isinstance(v, np.ndarray)})) == repr(
        getattr(torch.nn, name)(**{k: v for k, v in kwargs.items()
                                   if not isinstance(v, np.ndarray)}))


REDUCTIONS = ["mean", "sum", "none"]
W3 = np.array([0.5, 2.0, 1.5], dtype=np.float32)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("extra", [{}, dict(weight=W3), dict(ignore_index=1),
                                   dict(weight=W3, ignore_index=2)])
def test_cross_entropy_indices(reduction, extra):
    t = np.array([0, 2, 1, 1, 2])
    run("CrossEntropyLoss", dict(reduction=reduction, **extra), data(5, 3), t)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("extra", [dict(label_smoothing=0.1),
                                   dict(label_smoothing=0.2, weight=W3),
                                   dict(label_smoothing=0.3, ignore_index=0),
                                   dict(label_smoothing=0.1, weight=W3, ignore_index=1)])
def test_cross_entropy_label_smoothing(reduction, extra):
    t = np.array([0, 2, 1, 1, 2])
    run("CrossEntropyLoss", dict(reduction=reduction, **extra), data(5, 3), t,
        node_check=False)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("extra", [{}, dict(weight=W3), dict(label_smoothing=0.25)])
def test_cross_entropy_probabilities(reduction, extra):
    p = np.random.default_rng(1).random((4, 3)).astype(np.float32)
    p /= p.sum(1, keepdims=True)
    run("CrossEntropyLoss", dict(reduction=reduction, **extra), data(4, 3), p,
        target_grad=True, node_check=False)


@pytest.mark.parametrize("shape,tshape", [((3,), ()), ((2, 3, 4, 5), (2, 4, 5)),
                                          ((2, 3, 4), (2, 4))])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_other_ranks(shape, tshape, reduction):
    t = np.random.default_rng(2).integers(0, 3, tshape)
    run("CrossEntropyLoss", dict(reduction=reduction), data(*shape), t)


def test_cross_entropy_node_chain():
    x = fusegrad.randn(4, 3, requires_grad=True)
    loss = fnn.functional.cross_entropy(x, fusegrad.tensor([0, 1, 2, 0]))
    assert node(loss) == "NllLossBackward0"
    assert type(loss.grad_fn.next_functions[0][0]).__name__ == "LogSoftmaxBackward0"
    x4 = fusegrad.randn(2, 3, 2, 2, requires_grad=True)
    assert node(fnn.functional.cross_entropy(x4, fusegrad.zeros(2, 2, 2).long())) == \
        "NllLoss2DBackward0"


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("extra", [{}, dict(weight=W3), dict(ignore_index=2)])
def test_nll_loss(reduction, extra):
    x = np.log(np.random.default_rng(3).dirichlet([1, 1, 1], 6)).astype(np.float32)
    run("NLLLoss", dict(reduction=reduction, **extra), x, np.array([0, 1, 2, 2, 1, 0]))


def test_nll_loss_errors():
    for T, nn in ((torch, torch.nn), (fusegrad, fnn)):
        with pytest.raises(ValueError, match=r"Expected input batch_size \(4\) to match "
                                             r"target batch_size \(3\)\."):
            nn.NLLLoss()(T.zeros(4, 3), T.zeros(3).long())
        with pytest.raises(IndexError, match="Target 5 is out of bounds."):
            nn.NLLLoss()(T.zeros(2, 3), T.tensor([0, 5]))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_mse_l1(reduction):
    run("MSELoss", dict(reduction=reduction), data(3, 4), data(3, 4, seed=1), target_grad=True)
    run("L1Loss", dict(reduction=reduction), data(3, 4), data(3, 4, seed=1), target_grad=True)
    run("SmoothL1Loss", dict(reduction=reduction), data(3, 4), data(3, 4, seed=1),
        target_grad=True, node_check=False)


def test_mse_broadcast_warns_like_torch():
    msgs = []
    for T, nn in ((torch, torch.nn), (fusegrad, fnn)):
        with pytest.warns(UserWarning) as w:
            out = nn.functional.mse_loss(T.ones(3, 4), T.zeros(4))
        msgs.append(str(w[0].message))
        assert float(out) == 1.0
    assert msgs[0] == msgs[1]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_bce(reduction, weighted):
    x = np.random.default_rng(4).uniform(0.05, 0.95, (3, 4)).astype(np.float32)
    t = np.random.default_rng(5).uniform(0, 1, (3, 4)).astype(np.float32)
    kw = dict(reduction=reduction)
    if weighted:
        kw["weight"] = np.array([0.5, 1, 2, 3], dtype=np.float32)
    run("BCELoss", kw, x, t, target_grad=True)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("extra", [{}, dict(weight=np.array([0.5, 1, 2, 3], np.float32)),
                                   dict(pos_weight=np.array([0.5, 1, 2, 3], np.float32))])
def test_bce_with_logits(reduction, extra):
    t = np.random.default_rng(5).uniform(0, 1, (3, 4)).astype(np.float32)
    run("BCEWithLogitsLoss", dict(reduction=reduction, **extra), data(3, 4) * 4, t,
        target_grad=True)


def test_bce_errors():
    for T, nn in ((torch, torch.nn), (fusegrad, fnn)):
        with pytest.raises(ValueError, match="Using a target size"):
            nn.BCELoss()(T.ones(3) * 0.5, T.ones(2))
        with pytest.raises(ValueError, match=r"Target size \(torch.Size\(\[2\]\)\) must be "):
            nn.BCEWithLogitsLoss()(T.ones(3), T.ones(2))
        with pytest.raises(RuntimeError, match="all elements of input should be between 0 and"):
            nn.BCELoss()(T.ones(3) * 2, T.ones(3))


def test_kl_div():
    x = np.log(np.random.default_rng(3).dirichlet([1, 1, 1], 4)).astype(np.float32)
    t = np.random.default_rng(4).dirichlet([1, 1, 1], 4).astype(np.float32)
    for red in ("batchmean", "sum", "mean"):
        run("KLDivLoss", dict(reduction=red), x, t, node_check=False)


def test_invalid_reduction():
    with pytest.raises(ValueError, match="foo is not a valid value for reduction"):
        fnn.functional.mse_loss(fusegrad.ones(2), fusegrad.ones(2), reduction="foo")


def _with_loss(nn, loss):
    class WithLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 3)
            self.loss = loss

        def forward(self, x, t):
            out = self.lin(x)
            if isinstance(self.loss, (nn.BCELoss,)):
                out = out.sigmoid()
            return self.loss(out, t)

    return WithLoss()


@pytest.mark.parametrize("name,kwargs,target", [
    ("CrossEntropyLoss", dict(label_smoothing=0.1), np.array([0, 2, 1, 1, 2])),
    ("NLLLoss", {}, np.array([0, 2, 1, 1, 2])),
    ("MSELoss", {}, data(5, 3, seed=9)),
    ("L1Loss", dict(reduction="sum"), data(5, 3, seed=9)),
    ("BCELoss", {}, np.random.default_rng(1).uniform(0, 1, (5, 3)).astype(np.float32)),
    ("BCEWithLogitsLoss", dict(reduction="none"),
     np.random.default_rng(1).uniform(0, 1, (5, 3)).astype(np.float32)),
])
def test_ten_training_steps_with_each_loss(name, kwargs, target):
    from test_nn_support import compare_modules

    th = _with_loss(torch.nn, getattr(torch.nn, name)(**kwargs))
    fg = _with_loss(fnn, getattr(fnn, name)(**kwargs))
    compare_modules(th, fg, data(5, 4), target, grad_input=False,
                    optimizer=("SGD", {"lr": 0.1, "momentum": 0.9}), check_node=False)


@pytest.mark.parametrize("shape", [(64, 10), (5, 7, 3, 2), (10,)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted, ignore_index", [(False, -100), (True, 2)])
def test_nll_gradient_on_arrays_equals_the_recorded_formula_and_torch(shape, reduction,
                                                                      weighted, ignore_index):
    # Backward without create_graph computes nll_loss's gradient on the arrays; with it, in
    # recorded ops (double backward needs them): the same bits either way.
    rng = np.random.default_rng(len(shape) + len(reduction))
    x = rng.standard_normal(shape).astype(np.float32)
    c = shape[1] if len(shape) > 1 else shape[0]
    t = rng.integers(0, c, (shape[0],) + shape[2:] if len(shape) > 1 else ())
    w = rng.random(c).astype(np.float32) if weighted else None

    def grad(lib, create_graph=False):
        xt = lib.tensor(x, requires_grad=True)
        loss = lib.nn.functional.nll_loss(xt, lib.tensor(t), reduction=reduction,
                                          weight=None if w is None else lib.tensor(w),
                                          ignore_index=ignore_index)
        (loss.sum() * 1.5).backward(create_graph=create_graph)
        return xt.grad.detach().numpy().copy()

    on_arrays = grad(fusegrad)
    np.testing.assert_array_equal(on_arrays, grad(fusegrad, create_graph=True))
    np.testing.assert_allclose(on_arrays, grad(torch), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_of_plain_labels_gives_the_bits_of_the_masked_path(dtype, reduction):
    """A batch of in-range labels without weights takes a short path (no mask, no bounds
    check): its loss and input gradient have the bits of the general path, which a weight
    of ones takes, and PyTorch's values."""
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((64, 10)).astype(dtype)
    t0 = rng.integers(0, 10, 64)
    got = []
    for weight in (None, np.ones(10, dtype)):
        x = fusegrad.tensor(x0, requires_grad=True)
        w = None if weight is None else fusegrad.tensor(weight)
        loss = fusegrad.nn.functional.cross_entropy(x, fusegrad.tensor(t0), weight=w,
                                                    reduction=reduction)
        loss.sum().backward()
        got.append((loss.detach().numpy(), x.grad.numpy()))
    for fast, general in zip(*got, strict=True):
        np.testing.assert_array_equal(fast, general)
    x = torch.tensor(x0, requires_grad=True)
    loss = torch.nn.functional.cross_entropy(x, torch.tensor(t0), reduction=reduction)
    loss.sum().backward()
    tol = 1e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got[0][0], loss.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(got[0][1], x.grad.numpy(), rtol=tol, atol=tol)


_BCE_CALLS = {
    "bce": lambda L, t: L.nn.functional.binary_cross_entropy(L.full((4,), 0.3), t),
    "bce weight": lambda L, t: L.nn.BCELoss(weight=L.ones(4))(L.full((4,), 0.3), t),
    "logits": lambda L, t: L.nn.functional.binary_cross_entropy_with_logits(L.zeros(4), t),
    "logits pos_weight": lambda L, t: L.nn.functional.binary_cross_entropy_with_logits(
        L.full((4,), 0.5, dtype=L.float64), t, pos_weight=L.ones(4) * 2),
}


@pytest.mark.parametrize("target", ["int64", "int32", "bool", "float16", "float32", "float64"])
@pytest.mark.parametrize("call", list(_BCE_CALLS))
def test_bce_target_dtypes_as_torch(call, target):
    """binary_cross_entropy wants the input's dtype in its target; the logits form gives the
    target's float dtype and refuses integer and bool targets, with PyTorch's messages."""
    got = []
    for lib in (fusegrad, torch):
        t = lib.ones(4, dtype=getattr(lib, target))
        try:
            out = _BCE_CALLS[call](lib, t)
            got.append((str(out.dtype).split(".")[-1], round(float(out), 3)))
        except RuntimeError as e:
            got.append(str(e))
    assert got[0] == got[1]


@pytest.mark.parametrize("flags", [dict(size_average=False), dict(reduce=False),
                                   dict(size_average=True, reduce=True)])
def test_legacy_reduction_flags_warn_and_reduce_as_torch(flags):
    """The deprecated flags give PyTorch's reduction and its warning, at the caller's line."""
    x = np.random.default_rng(5).standard_normal((4, 3)).astype(np.float32)
    t = np.array([0, 2, 1, 1])
    results = []
    for T in (torch, fusegrad):
        with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"
                          ) as record:
            results.append(T.nn.functional.cross_entropy(T.tensor(x), T.tensor(t), **flags))
        if T is fusegrad:
            assert any(r.filename == __file__ for r in record)
    np.testing.assert_allclose(results[1].numpy(), results[0].numpy(), rtol=1e-6)
