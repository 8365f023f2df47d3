"""interpolate(antialias=True) (bilinear, bicubic) and uint8 bilinear / nearest resizing
against PyTorch: values (uint8 bit for bit), gradients, nodes and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad

SIZES = [((1, 2, 9, 8), dict(size=(4, 5))), ((2, 3, 7, 11), dict(size=(3, 2))),
         ((1, 1, 5, 6), dict(size=(5, 2))), ((1, 2, 6, 6), dict(size=(9, 13))),
         ((1, 2, 12, 10), dict(scale_factor=0.35)), ((1, 1, 8, 9), dict(scale_factor=(0.5, 2))),
         ((1, 2, 9, 8), dict(size=(4, 5), align_corners=True)),
         ((1, 1, 7, 7), dict(size=(1, 1)))]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("case", range(len(SIZES)))
def test_antialias_matches_torch(case, mode, dtype):
    shape, kw = SIZES[case]
    x = np.random.default_rng(case).standard_normal(shape).astype(dtype)
    xt = torch.tensor(x, requires_grad=True)
    xf = fusegrad.tensor(x, requires_grad=True)
    yt = torch.nn.functional.interpolate(xt, mode=mode, antialias=True, **kw)
    yf = fusegrad.nn.functional.interpolate(xf, mode=mode, antialias=True, **kw)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(yf.detach().numpy(), yt.detach().numpy(), rtol=tol, atol=tol)
    assert type(yf.grad_fn).__name__ == type(yt.grad_fn).__name__
    g = np.random.default_rng(7).standard_normal(tuple(yt.shape)).astype(dtype)
    yt.backward(torch.tensor(g))
    yf.backward(fusegrad.tensor(g))
    np.testing.assert_allclose(xf.grad.numpy(), xt.grad.numpy(), rtol=tol * 10, atol=tol * 10)


def _uint8_cases():
    rng = np.random.default_rng(11)
    cases = []
    for t in range(60):
        c = (1, 3, 4, 6)[t % 4]
        h, w = (int(v) for v in rng.integers(2, 20, 2))
        oh, ow = (int(v) for v in rng.integers(2, 25, 2))
        cases.append(((2, c, h, w), (oh, ow), bool(t % 2), t % 3 == 0))
    return cases


@pytest.mark.parametrize("case", _uint8_cases())
def test_uint8_bilinear_bit_exact(case):
    shape, size, antialias, align = case
    x = np.random.default_rng(sum(shape)).integers(0, 256, shape).astype(np.uint8)
    ref = torch.nn.functional.interpolate(torch.tensor(x), size=size, mode="bilinear",
                                          antialias=antialias, align_corners=align)
    got = fusegrad.nn.functional.interpolate(fusegrad.tensor(x), size=size, mode="bilinear",
                                             antialias=antialias, align_corners=align)
    assert got.dtype is fusegrad.uint8
    np.testing.assert_array_equal(got.numpy(), ref.numpy())


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
def test_uint8_nearest(mode):
    x = np.random.default_rng(3).integers(0, 256, (2, 3, 7, 9)).astype(np.uint8)
    for size in ((3, 4), (14, 5), (7, 18)):
        ref = torch.nn.functional.interpolate(torch.tensor(x), size=size, mode=mode)
        got = fusegrad.nn.functional.interpolate(fusegrad.tensor(x), size=size, mode=mode)
        np.testing.assert_array_equal(got.numpy(), ref.numpy())


def test_unsupported_dtypes():
    for mode in ("bilinear", "bicubic"):
        with pytest.raises(NotImplementedError) as e:
            torch.nn.functional.interpolate(torch.zeros(1, 1, 4, 4, dtype=torch.int32),
                                            size=(2, 2), mode=mode, antialias=True)
        with pytest.raises(NotImplementedError) as err:
            fusegrad.nn.functional.interpolate(fusegrad.zeros(1, 1, 4, 4, dtype=fusegrad.int32),
                                               size=(2, 2), mode=mode, antialias=True)
        assert str(err.value) == str(e.value)
    with pytest.raises(ValueError) as e:
        torch.nn.functional.interpolate(torch.zeros(1, 1, 4), size=2, mode="linear",
                                        antialias=True)
    with pytest.raises(ValueError) as err:
        fusegrad.nn.functional.interpolate(fusegrad.zeros(1, 1, 4), size=2, mode="linear",
                                           antialias=True)
    assert str(err.value) == str(e.value)
