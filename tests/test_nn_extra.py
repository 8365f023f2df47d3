"""GroupNorm, Bilinear, HuberLoss, interpolate and Upsample against torch.nn: same weights,
same outputs, input and parameter gradients, and ten optimizer steps."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_nn_support import close, compare_modules

import fusegrad
import fusegrad.nn as fnn
import fusegrad.nn.functional as F


def data(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def both(name, *args, **kwargs):
    """(torch module, fusegrad module) of the same class and arguments."""
    return getattr(torch.nn, name)(*args, **kwargs), getattr(fnn, name)(*args, **kwargs)


def grads_match(fn_t, fn_f, *arrays, atol=1e-5, seed=1, **kwargs):
    """fn(*inputs, **kwargs) agrees in value and input gradients between torch and fusegrad."""
    th = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    fg = [fusegrad.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    out_t, out_f = fn_t(*th, **kwargs), fn_f(*fg, **kwargs)
    close(out_f, out_t, atol, atol, "output")
    cot = np.random.default_rng(seed).standard_normal(tuple(out_t.shape)).astype(
        arrays[0].dtype)
    out_t.backward(torch.tensor(cot))
    out_f.backward(fusegrad.tensor(cot))
    for i, (a, b) in enumerate(zip(fg, th)):
        if b.requires_grad:
            close(a.grad, b.grad, atol, atol, f"grad {i}")


# ---------------------------------------------------------------- GroupNorm


@pytest.mark.parametrize("groups,channels,shape,affine", [
    (2, 4, (3, 4, 5, 5), True), (1, 6, (2, 6, 7), True), (3, 3, (2, 3, 4, 2), False),
    (4, 8, (2, 8), True)])
def test_group_norm_module(groups, channels, shape, affine):
    th, fg = both("GroupNorm", groups, channels, affine=affine)
    if affine:  # non-trivial scale and shift
        with torch.no_grad():
            th.weight.copy_(torch.tensor(data(channels, seed=3) + 1))
            th.bias.copy_(torch.tensor(data(channels, seed=4)))
    compare_modules(th, fg, data(*shape) * 3 + 1, check_node=False,
                    optimizer=("SGD", {"lr": 0.1, "momentum": 0.9}))
    assert repr(fg) == repr(th)


def test_group_norm_functional_and_errors():
    x = data(2, 6, 3, 3, dtype=np.float64)
    w, b = data(6, seed=5, dtype=np.float64), data(6, seed=6, dtype=np.float64)
    grads_match(torch.nn.functional.group_norm, F.group_norm, x, num_groups=3, atol=1e-10)
    grads_match(lambda x, w, b: torch.nn.functional.group_norm(x, 2, w, b, 1e-3),
                lambda x, w, b: F.group_norm(x, 2, w, b, 1e-3), x, w, b, atol=1e-10)
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        F.group_norm(fusegrad.zeros(2, 5, 3), 2)
    with pytest.raises(ValueError, match="divisible"):
        fnn.GroupNorm(2, 5)
    assert fnn.GroupNorm(2, 4, bias=False).bias is None


# ---------------------------------------------------------------- Bilinear


@pytest.mark.parametrize("lead,bias", [((4,), True), ((2, 3), True), ((5,), False), ((), True)])
def test_bilinear_module(lead, bias):
    th, fg = both("Bilinear", 3, 4, 5, bias=bias)
    compare_modules(th, fg, data(*lead, 3), data(*lead, 4, seed=1), check_node=False,
                    optimizer=("Adam", {"lr": 0.01}))
    assert repr(fg) == repr(th)
    assert tuple(fg.weight.shape) == (5, 3, 4)


def test_bilinear_init_bounds_and_functional():
    fusegrad.manual_seed(0)
    m = fnn.Bilinear(16, 2, 7)
    bound = 1 / 4
    assert float(m.weight.abs().max()) <= bound and float(m.bias.abs().max()) <= bound
    x1, x2 = data(3, 4, dtype=np.float64), data(3, 2, seed=1, dtype=np.float64)
    w, b = data(5, 4, 2, seed=2, dtype=np.float64), data(5, seed=3, dtype=np.float64)
    grads_match(torch.nn.functional.bilinear, F.bilinear, x1, x2, w, b, atol=1e-10)
    grads_match(torch.nn.functional.bilinear, F.bilinear, x1, x2, w, atol=1e-10)


# ---------------------------------------------------------------- HuberLoss


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("delta", [1.0, 0.5, 2.5])
def test_huber_loss(reduction, delta):
    x, y = data(4, 5, dtype=np.float64) * 2, data(4, 5, seed=1, dtype=np.float64)
    x[0, 0] = y[0, 0]  # a zero difference
    grads_match(lambda a, b: torch.nn.HuberLoss(reduction=reduction, delta=delta)(a, b),
                lambda a, b: fnn.HuberLoss(reduction=reduction, delta=delta)(a, b), x, y,
                atol=1e-12)
    grads_match(torch.nn.functional.huber_loss, F.huber_loss, x, y, reduction=reduction,
                delta=delta, atol=1e-12)


def test_huber_loss_weight_and_errors():
    x, y = data(3, 4, dtype=np.float64) * 3, data(3, 4, seed=1, dtype=np.float64)
    w = np.abs(data(3, 4, seed=2, dtype=np.float64))
    grads_match(lambda a, b, c: torch.nn.functional.huber_loss(a, b, weight=c, delta=0.7),
                lambda a, b, c: F.huber_loss(a, b, weight=c, delta=0.7), x, y, w, atol=1e-12)
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.huber_loss(fusegrad.zeros(2), fusegrad.zeros(2), reduction="avg")


# ---------------------------------------------------------------- interpolate and Upsample

CASES = [
    dict(size=(7, 9)), dict(size=3), dict(scale_factor=2), dict(scale_factor=(1.5, 0.5)),
    dict(scale_factor=0.6), dict(size=(4, 5)), dict(scale_factor=2.3),
    dict(scale_factor=1.7, recompute_scale_factor=True), dict(size=(1, 1)),
]


@pytest.mark.parametrize("kwargs", CASES)
@pytest.mark.parametrize("mode,align", [("nearest", None), ("bilinear", False),
                                        ("bilinear", True), ("bilinear", None)])
def test_interpolate(kwargs, mode, align):
    x = data(2, 3, 4, 5)
    kw = dict(kwargs, mode=mode)
    if mode != "nearest":
        kw["align_corners"] = align
    grads_match(torch.nn.functional.interpolate, F.interpolate, x, atol=1e-5, **kw)


@pytest.mark.parametrize("kwargs", [dict(scale_factor=2), dict(size=(6, 3), mode="bilinear"),
                                    dict(scale_factor=3, mode="bilinear", align_corners=True)])
def test_upsample_module(kwargs):
    th, fg = both("Upsample", **kwargs)
    compare_modules(th, fg, data(2, 2, 3, 4), check_node=False)
    assert repr(fg) == repr(th)


def test_interpolate_errors():
    x = fusegrad.zeros(1, 1, 2, 2)
    with pytest.raises(ValueError, match="align_corners option"):
        F.interpolate(x, scale_factor=2, align_corners=True)
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        F.interpolate(x, size=4, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor"):
        F.interpolate(x)
    # antialias runs now (values: tests/test_interpolate_antialias_uint8.py)
    assert F.interpolate(x, scale_factor=2, mode="bilinear", antialias=True).shape == (1, 1, 4, 4)
