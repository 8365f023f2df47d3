"""MaxPool3d (with indices, ceil mode, dilation), AvgPool3d and AdaptiveAvgPool3d (and
their functional forms) against PyTorch: values, indices, gradients, nodes and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad


def _input(shape, seed):
    # Distinct values, so that the maxima (and their indices) are unambiguous.
    return np.random.default_rng(seed).permutation(int(np.prod(shape))).reshape(shape) / 7.0


def _compare(fn_t, fn_f, shape, seed=0):
    x = _input(shape, seed)
    xt = torch.tensor(x, requires_grad=True)
    xf = fusegrad.tensor(x, requires_grad=True)
    rt, rf = fn_t(xt), fn_f(xf)
    rt = rt if isinstance(rt, tuple) else (rt,)
    rf = rf if isinstance(rf, tuple) else (rf,)
    for a, b in zip(rf, rt):
        assert a.dtype.name == str(b.dtype).split(".")[1]
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12)
    assert type(rf[0].grad_fn).__name__ == type(rt[0].grad_fn).__name__
    g = np.random.default_rng(seed + 1).standard_normal(tuple(rt[0].shape))
    rt[0].backward(torch.tensor(g))
    rf[0].backward(fusegrad.tensor(g))
    np.testing.assert_allclose(xf.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-14)


MAX = [
    ((2, 2, 4, 5, 6), dict(kernel_size=2)),
    ((1, 3, 7, 6, 5), dict(kernel_size=(3, 2, 2), stride=(2, 1, 2), padding=(1, 1, 0))),
    ((2, 5, 6, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((1, 2, 9, 7, 8), dict(kernel_size=2, stride=2, dilation=(2, 1, 3), padding=1)),
    ((1, 2, 6, 6, 6), dict(kernel_size=3, stride=1, return_indices=True)),
    ((1, 1, 7, 7, 7), dict(kernel_size=(2, 3, 2), stride=3, ceil_mode=True,
                           return_indices=True)),
]


@pytest.mark.parametrize("case", range(len(MAX)))
def test_max_pool3d(case):
    shape, kw = MAX[case]
    ref, mod = torch.nn.MaxPool3d(**kw), fusegrad.nn.MaxPool3d(**kw)
    assert repr(mod) == repr(ref)
    _compare(ref, mod, shape, case)
    _compare(lambda x: torch.nn.functional.max_pool3d(x, **kw),
             lambda x: fusegrad.nn.functional.max_pool3d(x, **kw), shape, case)
    if not kw.get("return_indices"):
        args = [kw.get(n, d) for n, d in (("kernel_size", 2), ("stride", ()), ("padding", 0),
                                          ("dilation", 1), ("ceil_mode", False))]
        _compare(lambda x: torch.max_pool3d(x, *args), lambda x: fusegrad.max_pool3d(x, *args),
                 shape, case)


AVG = [
    ((2, 2, 4, 5, 6), dict(kernel_size=2)),
    ((1, 3, 7, 6, 5), dict(kernel_size=(3, 2, 2), stride=(2, 1, 2), padding=(1, 1, 0))),
    ((1, 3, 7, 6, 5), dict(kernel_size=(3, 2, 2), stride=(2, 1, 2), padding=(1, 1, 0),
                           count_include_pad=False)),
    ((2, 5, 6, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((2, 5, 6, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                        count_include_pad=False)),
    ((1, 2, 5, 5, 5), dict(kernel_size=2, stride=1, divisor_override=3)),
]


@pytest.mark.parametrize("case", range(len(AVG)))
def test_avg_pool3d(case):
    shape, kw = AVG[case]
    ref, mod = torch.nn.AvgPool3d(**kw), fusegrad.nn.AvgPool3d(**kw)
    assert repr(mod) == repr(ref)
    _compare(ref, mod, shape, case)


@pytest.mark.parametrize("size", [(2, 3, 4), 3, (1, 1, 1), (2, None, 5), (7, 1, 2), 1])
def test_adaptive_avg_pool3d(size):
    ref, mod = torch.nn.AdaptiveAvgPool3d(size), fusegrad.nn.AdaptiveAvgPool3d(size)
    assert repr(mod) == repr(ref)
    _compare(ref, mod, (2, 3, 5, 6, 7))
    _compare(ref, mod, (3, 5, 4, 6))


ERRORS = [
    lambda m, x: m.nn.functional.max_pool3d(x, 0),
    lambda m, x: m.nn.functional.max_pool3d(x, -1),
    lambda m, x: m.nn.functional.max_pool3d(x, 2, stride=-1),
    lambda m, x: m.nn.functional.max_pool3d(x, 2, padding=2),
    lambda m, x: m.nn.functional.max_pool3d(x, 2, padding=-1),
    lambda m, x: m.nn.functional.max_pool3d(x, 2, dilation=0),
    lambda m, x: m.nn.functional.max_pool3d(x, 6),
    lambda m, x: m.nn.functional.max_pool3d(x[0, 0], 2),
    lambda m, x: m.nn.functional.avg_pool3d(x, 0),
    lambda m, x: m.nn.functional.avg_pool3d(x, -1),
    lambda m, x: m.nn.functional.avg_pool3d(x, 2, padding=2),
    lambda m, x: m.nn.functional.avg_pool3d(x, 6),
    lambda m, x: m.nn.functional.avg_pool3d(x, (2, 2, 7), padding=(0, 0, 1)),
    lambda m, x: m.nn.functional.avg_pool3d(x, 2, divisor_override=0),
    lambda m, x: m.nn.functional.avg_pool3d(x[0, 0], 2),
    lambda m, x: m.nn.functional.adaptive_avg_pool3d(x, (2, -1, 3)),
    lambda m, x: m.nn.functional.adaptive_avg_pool3d(x[0, 0], 2),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors(case):
    with pytest.raises(RuntimeError) as e:
        ERRORS[case](torch, torch.zeros(1, 2, 5, 5, 5))
    with pytest.raises(RuntimeError) as err:
        ERRORS[case](fusegrad, fusegrad.zeros(1, 2, 5, 5, 5))
    assert str(err.value) == str(e.value)


def test_float32_and_local_response_norm():
    x = _input((2, 6, 3, 4, 5), 3).astype(np.float32)
    for fn in ("max_pool3d", "avg_pool3d"):
        a = getattr(fusegrad.nn.functional, fn)(fusegrad.tensor(x), 2, 1, 1)
        b = getattr(torch.nn.functional, fn)(torch.tensor(x), 2, 1, 1)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    ref, mod = torch.nn.LocalResponseNorm(3), fusegrad.nn.LocalResponseNorm(3)
    _compare(ref, mod, (2, 6, 3, 4))
