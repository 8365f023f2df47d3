"""alpha_dropout / feature_alpha_dropout and their modules against PyTorch. Draws differ from
PyTorch's, so the tests compare what a draw cannot change: the two values a unit can take,
the gradient on kept and dropped units, the graph, the shape of the noise, and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad


def _levels(fn, mod, shape, p, dtype):
    """The distinct output values for an all-`x` input (kept and dropped levels)."""
    x = mod.full(shape, 0.75, dtype=getattr(mod, dtype))
    return np.unique(fn(mod)(x, p, True).numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("p", [0.2, 0.5, 0.9])
@pytest.mark.parametrize("name", ["alpha_dropout", "feature_alpha_dropout"])
def test_levels_and_gradient(name, p, dtype):
    fn = lambda m: getattr(m.nn.functional, name)  # noqa: E731
    ref = _levels(fn, torch, (64, 8, 3), p, dtype)
    got = _levels(fn, fusegrad, (64, 8, 3), p, dtype)
    assert len(ref) == len(got) == 2
    np.testing.assert_array_equal(got, ref)  # exactly PyTorch's constants
    x = fusegrad.randn(400, 6, 2, dtype=getattr(fusegrad, dtype), requires_grad=True)
    y = fn(fusegrad)(x, p, True)
    xt = torch.randn(4, 3, requires_grad=True)
    yt = fn(torch)(xt, p, True)
    assert type(y.grad_fn).__name__ == type(yt.grad_fn).__name__ == "AddBackward0"
    assert [type(f).__name__ if f else None for f, _ in y.grad_fn.next_functions] == \
        [type(f).__name__ if f else None for f, _ in yt.grad_fn.next_functions]
    y.sum().backward()
    g = x.grad.numpy()
    kept = g != 0
    a = 1.0 / np.sqrt((1.7580993408473766 ** 2 * p + 1) * (1 - p))
    np.testing.assert_allclose(g[kept], a, rtol=1e-6)
    # The output of a kept unit is a * x + shift, the dropped ones all share one value.
    assert len(np.unique(y.detach().numpy()[~kept])) == 1
    assert abs((~kept).mean() - p) < 0.1
    if name == "feature_alpha_dropout":  # one draw per (sample, channel)
        assert (kept == kept[:, :, :1]).all()


@pytest.mark.parametrize("name", ["alpha_dropout", "feature_alpha_dropout"])
def test_edge_cases(name):
    for mod in (torch, fusegrad):
        fn = getattr(mod.nn.functional, name)
        x = mod.randn(3, 4, requires_grad=True)
        assert fn(x, 0.5, False) is x
        assert fn(x, 0.0, True) is x
        y = fn(x, 1.0, True)
        assert type(y.grad_fn).__name__ == "MulBackward0" and not y.detach().numpy().any()
        assert fn(x, 0.5) is x  # training defaults to False
    for p in (-0.1, 1.5):
        with pytest.raises(ValueError) as e:
            getattr(torch.nn.functional, name)(torch.ones(2, 2), p, True)
        with pytest.raises(ValueError) as err:
            getattr(fusegrad.nn.functional, name)(fusegrad.ones(2, 2), p, True)
        assert str(err.value) == str(e.value)


def test_feature_alpha_dropout_needs_two_dims():
    with pytest.raises(RuntimeError) as e:
        torch.nn.functional.feature_alpha_dropout(torch.ones(3), 0.5, True)
    with pytest.raises(RuntimeError) as err:
        fusegrad.nn.functional.feature_alpha_dropout(fusegrad.ones(3), 0.5, True)
    assert str(err.value) == str(e.value)
    x = fusegrad.ones(3)  # eval mode returns before the check, as PyTorch does
    assert fusegrad.nn.functional.feature_alpha_dropout(x, 0.5, False) is x


def test_inplace_and_top_level():
    x = fusegrad.full((50, 4), 2.0)
    y = fusegrad.nn.functional.alpha_dropout(x, 0.5, True, inplace=True)
    assert y is x and len(np.unique(x.numpy())) == 2
    x = fusegrad.full((50, 4), 2.0)
    assert fusegrad.alpha_dropout_(x, 0.5, True) is x
    for name in ("alpha_dropout", "feature_alpha_dropout"):
        out = getattr(fusegrad, name)(fusegrad.ones(4, 3, 2), 0.5, True)
        assert out.shape == (4, 3, 2)


@pytest.mark.parametrize("cls", ["AlphaDropout", "FeatureAlphaDropout"])
def test_modules(cls):
    ref = getattr(torch.nn, cls)(0.3)
    mod = getattr(fusegrad.nn, cls)(0.3)
    assert repr(mod) == repr(ref)
    assert type(mod).__module__ == "fusegrad.nn.modules.dropout"
    x = fusegrad.ones(6, 4, 3)
    assert len(np.unique(mod(x).numpy())) == 2
    mod.eval()
    assert mod(x) is x
    with pytest.raises(ValueError) as e:
        getattr(torch.nn, cls)(2.0)
    with pytest.raises(ValueError) as err:
        getattr(fusegrad.nn, cls)(2.0)
    assert str(err.value) == str(e.value)
