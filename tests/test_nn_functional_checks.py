"""nn.functional against PyTorch: gradients at activation kinks, and the errors (types and
messages) of pooling, fold/unfold, linear, binary cross entropy and the parameter-vector
utilities for invalid input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import fusegrad

KINK_POINTS = [-3.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0, 6.0]

ACTIVATIONS = {
    "relu": lambda m, x: m.nn.functional.relu(x),
    "leaky_relu": lambda m, x: m.nn.functional.leaky_relu(x, 0.1),
    "elu": lambda m, x: m.nn.functional.elu(x, alpha=2.0),
    "celu": lambda m, x: m.nn.functional.celu(x, alpha=2.0),
    "selu": lambda m, x: m.nn.functional.selu(x),
    "prelu": lambda m, x: m.nn.functional.prelu(x, m.tensor([0.25])),
    "hardtanh": lambda m, x: m.nn.functional.hardtanh(x, -2.0, 2.0),
    "relu6": lambda m, x: m.nn.functional.relu6(x),
    "hardshrink": lambda m, x: m.nn.functional.hardshrink(x, 0.5),
    "softshrink": lambda m, x: m.nn.functional.softshrink(x, 0.5),
    "threshold": lambda m, x: m.nn.functional.threshold(x, 1.0, 20.0),
    "rrelu_eval": lambda m, x: m.nn.functional.rrelu(x, training=False),
    "rrelu_module_eval": lambda m, x: m.nn.RReLU().eval()(x),
    "rrelu_eval_inplace": lambda m, x: m.nn.functional.rrelu(x.clone(), training=False,
                                                            inplace=True),
    "hardsigmoid": lambda m, x: m.nn.functional.hardsigmoid(x),
    "hardswish": lambda m, x: m.nn.functional.hardswish(x),
}


def _value_and_grad(m, fn):
    x = m.tensor(KINK_POINTS, requires_grad=True)
    y = fn(m, x)
    y.backward(m.arange(1.0, 11.0))
    return y.detach().numpy(), x.grad.numpy()


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_gradient_at_kinks(name):
    fn = ACTIVATIONS[name]
    want_y, want_g = _value_and_grad(torch, fn)
    got_y, got_g = _value_and_grad(fusegrad, fn)
    np.testing.assert_allclose(got_y, want_y, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got_g, want_g, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("inplace", [False, True])
def test_rrelu_training_gradient_at_zero(inplace):
    results = []
    for m in (torch, fusegrad):
        m.manual_seed(0)
        x = m.tensor([-2.0, -1.0, 0.0, 1.0, 0.0, -0.0], requires_grad=True)
        y = m.nn.functional.rrelu(x.clone() if inplace else x, training=True, inplace=inplace)
        y.sum().backward()
        results.append((y.detach().numpy(), x.grad.numpy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-6)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-6)


def _outcome(fn, m):
    """('ok', shape) or (exception type name, message)."""
    try:
        out = fn(m)
    except Exception as e:  # noqa: BLE001 (the error itself is compared)
        return type(e).__name__, str(e)
    if isinstance(out, tuple):
        out = out[0]
    return "ok", tuple(out.shape)


def _x(m, *shape):
    return m.arange(float(math.prod(shape))).reshape(shape) if shape else m.tensor(1.0)


def _fmp2d(m, x):
    lead = x.shape[0] if x.dim() == 4 else 1
    chans = x.shape[-3] if x.dim() >= 3 else 1
    return m.nn.functional.fractional_max_pool2d(
        x, 2, output_size=1, _random_samples=m.full((lead, chans, 2), 0.5))


def _fmp3d(m, x):
    lead = x.shape[0] if x.dim() == 5 else 1
    chans = x.shape[-4] if x.dim() >= 4 else 1
    return m.nn.functional.fractional_max_pool3d(
        x, 2, output_size=1, _random_samples=m.full((lead, chans, 3), 0.5))


POOLS = {
    "avg_pool1d": lambda m, x: m.nn.functional.avg_pool1d(x, 2),
    "avg_pool2d": lambda m, x: m.nn.functional.avg_pool2d(x, 2),
    "avg_pool3d": lambda m, x: m.nn.functional.avg_pool3d(x, 2),
    "max_pool1d": lambda m, x: m.nn.functional.max_pool1d(x, 2),
    "max_pool1d_indices": lambda m, x: m.nn.functional.max_pool1d(x, 2, return_indices=True),
    "max_pool2d": lambda m, x: m.nn.functional.max_pool2d(x, 2),
    "max_pool2d_indices": lambda m, x: m.nn.functional.max_pool2d(x, 2, return_indices=True),
    "max_pool3d": lambda m, x: m.nn.functional.max_pool3d(x, 2),
    "lp_pool1d": lambda m, x: m.nn.functional.lp_pool1d(x, 2, 2),
    "lp_pool2d": lambda m, x: m.nn.functional.lp_pool2d(x, 2, 2),
    "lp_pool3d": lambda m, x: m.nn.functional.lp_pool3d(x, 2, 2),
    "lp_pool3d_inf": lambda m, x: m.nn.functional.lp_pool3d(x, float("inf"), 2),
    "adaptive_avg_pool1d": lambda m, x: m.nn.functional.adaptive_avg_pool1d(x, 2),
    "adaptive_avg_pool2d": lambda m, x: m.nn.functional.adaptive_avg_pool2d(x, 2),
    "adaptive_avg_pool2d_one": lambda m, x: m.nn.functional.adaptive_avg_pool2d(x, 1),
    "adaptive_avg_pool3d": lambda m, x: m.nn.functional.adaptive_avg_pool3d(x, 2),
    "adaptive_avg_pool3d_one": lambda m, x: m.nn.functional.adaptive_avg_pool3d(x, 1),
    "adaptive_max_pool1d": lambda m, x: m.nn.functional.adaptive_max_pool1d(x, 2),
    "adaptive_max_pool2d": lambda m, x: m.nn.functional.adaptive_max_pool2d(x, 2),
    "adaptive_max_pool3d": lambda m, x: m.nn.functional.adaptive_max_pool3d(x, 2),
    "fractional_max_pool2d": _fmp2d,
    "fractional_max_pool3d": _fmp3d,
    "AdaptiveAvgPool2d": lambda m, x: m.nn.AdaptiveAvgPool2d(2)(x),
    "AdaptiveAvgPool2d_none": lambda m, x: m.nn.AdaptiveAvgPool2d((2, None))(x),
    "AdaptiveMaxPool2d_none": lambda m, x: m.nn.AdaptiveMaxPool2d((None, 2))(x),
    "AdaptiveAvgPool3d_none": lambda m, x: m.nn.AdaptiveAvgPool3d((2, None, 2))(x),
    "MaxPool2d": lambda m, x: m.nn.MaxPool2d(2)(x),
    "AvgPool1d": lambda m, x: m.nn.AvgPool1d(2)(x),
    "unfold": lambda m, x: m.nn.functional.unfold(x, 2),
    "fold": lambda m, x: m.nn.functional.fold(x, (3, 3), 2),
}

# Ranks around the valid ones, and inputs with an empty batch or an empty other dim.
SHAPES = [(), (4,), (3, 4), (2, 3, 4), (2, 2, 3, 4), (1, 2, 2, 3, 4), (2, 0, 4), (2, 3, 0),
          (2, 0, 3, 4), (2, 3, 0, 4), (0, 3, 4), (0, 2, 3, 4)]
SKIP: set = set()


@pytest.mark.parametrize("name", sorted(POOLS))
def test_pooling_input_errors(name):
    fn = POOLS[name]
    for shape in SHAPES:
        if (name, shape) in SKIP:
            continue
        def case(m, shape=shape):
            return fn(m, _x(m, *shape))

        assert _outcome(case, fusegrad) == _outcome(case, torch), shape


ORDER_CASES = {
    # which error wins when several apply
    "max_pool2d_empty_pad": lambda m: m.nn.functional.max_pool2d(m.zeros(2, 0, 4), 2,
                                                                  padding=2),
    "avg_pool2d_rank_divisor": lambda m: m.nn.functional.avg_pool2d(m.zeros(3, 4), 2,
                                                                    divisor_override=0),
    "avg_pool3d_small_pad": lambda m: m.nn.functional.avg_pool3d(m.zeros(2, 3, 1, 4), 2,
                                                                 padding=3),
    "avg_pool3d_small_divisor": lambda m: m.nn.functional.avg_pool3d(
        m.zeros(2, 3, 1, 4), 2, divisor_override=0),
    "max_pool1d_rank_kernel": lambda m: m.nn.functional.max_pool1d(m.zeros(4), 0),
    "adaptive_avg_pool2d_negative": lambda m: m.nn.functional.adaptive_avg_pool2d(
        m.zeros(3, 4), -1),
    "adaptive_avg_pool3d_empty": lambda m: m.nn.functional.adaptive_avg_pool3d(m.zeros(3, 0),
                                                                               2),
    "adaptive_avg_pool2d_tuple": lambda m: m.nn.functional.adaptive_avg_pool2d(
        m.zeros(3, 2), (2, 2)),
    "adaptive_max_pool3d_tuple": lambda m: m.nn.functional.adaptive_max_pool3d(
        m.zeros(3, 2), (2, None, 1)),
    "fractional_max_pool2d_no_samples": lambda m: m.nn.functional.fractional_max_pool2d(
        m.zeros(3, 4), 2, output_size=1),
    "fractional_max_pool3d_window": lambda m: m.nn.functional.fractional_max_pool3d(
        m.zeros(1, 2, 2, 4, 4), 2, output_size=1, _random_samples=m.zeros(1, 2, 3)),
    "unfold_rank_kernel": lambda m: m.nn.functional.unfold(m.zeros(3, 4), 0),
    "unfold_rank_stride": lambda m: m.nn.functional.unfold(m.zeros(3, 4), 2, stride=0),
    "unfold_big_kernel": lambda m: m.nn.functional.unfold(m.zeros(3, 4), 5),
    "fold_rank_kernel": lambda m: m.nn.functional.fold(m.zeros(1, 4, 4, 4), (3, 3), 0),
}


@pytest.mark.parametrize("name", sorted(ORDER_CASES))
def test_error_order(name):
    fn = ORDER_CASES[name]
    assert _outcome(fn, fusegrad) == _outcome(fn, torch)


def _unpool_cases(m):
    x = m.arange(16.0).reshape(1, 1, 4, 4)
    out, idx = m.nn.functional.max_pool2d(x, 2, return_indices=True)
    f = m.nn.functional
    long = m.long
    return {
        "too_large": lambda: f.max_unpool2d(out, idx + 100, 2),
        "negative": lambda: f.max_unpool2d(out, idx - 100, 2),
        "1d_too_large": lambda: f.max_unpool1d(out[0], idx[0] + 100, 2),
        "3d_too_large": lambda: f.max_unpool3d(out[None], idx[None] + 100, 2),
        "rank_2": lambda: f.max_unpool2d(out[0, 0], idx[0, 0], 2),
        "rank_5": lambda: f.max_unpool2d(out[None], idx[None], 2),
        "3d_rank_3": lambda: f.max_unpool3d(out[0], idx[0], 2),
        "float_indices": lambda: f.max_unpool2d(out, idx.float(), 2),
        "3d_float_indices": lambda: f.max_unpool3d(out[None], idx[None].float(), 2),
        "empty_channels": lambda: f.max_unpool2d(m.zeros(1, 0, 2, 2),
                                                 m.zeros(1, 0, 2, 2, dtype=long), 2),
        "empty_rows": lambda: f.max_unpool2d(m.zeros(1, 1, 0, 2),
                                             m.zeros(1, 1, 0, 2, dtype=long), 2),
        "3d_empty": lambda: f.max_unpool3d(m.zeros(1, 1, 0, 2, 2),
                                           m.zeros(1, 1, 0, 2, 2, dtype=long), 2),
        "empty_batch": lambda: f.max_unpool2d(m.zeros(0, 1, 2, 2),
                                              m.zeros(0, 1, 2, 2, dtype=long), 2),
        "3d_empty_batch": lambda: f.max_unpool3d(m.zeros(0, 1, 2, 2, 2),
                                                 m.zeros(0, 1, 2, 2, 2, dtype=long), 2),
    }


@pytest.mark.parametrize("name", sorted(_unpool_cases(torch)))
def test_max_unpool_errors(name):
    want = _outcome(lambda m: _unpool_cases(m)[name](), torch)
    got = _outcome(lambda m: _unpool_cases(m)[name](), fusegrad)
    assert got == want


LINEAR_CASES = {
    "bias_2d_input": ((2, 3), (4, 3), (3,)),
    "bias_3d_input": ((5, 2, 3), (4, 3), (3,)),
    "bias_1d_input": ((3,), (4, 3), (3,)),
    "bias_rows": ((2, 3), (4, 3), (3, 4)),
    "bias_too_many_dims": ((2, 3), (4, 3), (1, 1, 4)),
    "bias_2d_for_3d_input": ((5, 2, 3), (4, 3), (2, 4)),
    "bias_broadcast_rows": ((2, 3), (4, 3), (2, 4)),
    "bias_scalar": ((2, 3), (4, 3), ()),
    "weight_1d": ((2, 3), (3,), ()),
    "weight_3d": ((2, 3), (1, 4, 3), (4,)),
    "shapes": ((2, 5), (4, 3), (4,)),
}


@pytest.mark.parametrize("name", sorted(LINEAR_CASES))
def test_linear_errors(name):
    xs, ws, bs = LINEAR_CASES[name]

    def fn(m):
        return m.nn.functional.linear(_x(m, *xs), _x(m, *ws), _x(m, *bs))

    want, got = _outcome(fn, torch), _outcome(fn, fusegrad)
    assert got == want
    if want[0] == "ok":
        np.testing.assert_allclose(fn(fusegrad).numpy(), fn(torch).numpy(), rtol=1e-6)


BCE_CASES = {
    "target_above": ([0.5, 0.2], [1.0, 2.0], {}),
    "target_negative": ([0.5, 0.2], [-0.1, 1.0], {}),
    "target_nan": ([0.5], [float("nan")], {}),
    "input_and_target": ([1.5], [2.0], {}),
    "input_nan": ([float("nan")], [0.5], {}),
    "weighted": ([0.5], [2.0], {"weight": [0.0]}),
    "none": ([0.5], [2.0], {"reduction": "none"}),
    "sum_valid": ([0.5, 0.9], [0.0, 1.0], {"reduction": "sum"}),
    "valid_weighted": ([0.5, 0.9], [0.25, 1.0], {"weight": [2.0, 0.5]}),
}


@pytest.mark.parametrize("name", sorted(BCE_CASES))
@pytest.mark.parametrize("module", [False, True])
def test_binary_cross_entropy_range(name, module):
    x, t, kw = BCE_CASES[name]

    def fn(m):
        args = {k: m.tensor(v) if isinstance(v, list) else v for k, v in kw.items()}
        if module:
            return m.nn.BCELoss(**args)(m.tensor(x), m.tensor(t))
        return m.nn.functional.binary_cross_entropy(m.tensor(x), m.tensor(t), **args)

    want, got = _outcome(fn, torch), _outcome(fn, fusegrad)
    assert got == want
    if want[0] == "ok":
        np.testing.assert_allclose(fn(fusegrad).numpy(), fn(torch).numpy(), rtol=1e-6)


def test_binary_cross_entropy_dtype_error_first():
    def fn(m):
        return m.nn.functional.binary_cross_entropy(m.tensor([0.5]),
                                                    m.tensor([2.0], dtype=m.float64))

    assert _outcome(fn, fusegrad) == _outcome(fn, torch)


@pytest.mark.parametrize("call", ["to_vector", "to_parameters"])
def test_parameter_vector_non_tensor(call):
    def fn(m):
        if call == "to_vector":
            return m.nn.utils.parameters_to_vector([1, 2])
        return m.nn.utils.vector_to_parameters(m.zeros(3), [1, 2])

    assert _outcome(fn, fusegrad) == _outcome(fn, torch)
