"""grid_sample's bicubic mode and 5-D (volume) form, and affine_grid's 3-D maps: values and
gradients (input, grid, theta) against PyTorch in every padding mode, with its errors and
warnings."""

import warnings

import numpy as np
import pytest
import torch

import fusegrad

RNG = np.random.default_rng(21)


def _sample(lib, x, g, **kwargs):
    xt = lib.from_numpy(x.copy()).requires_grad_()
    gt = lib.from_numpy(g.copy()).requires_grad_()
    out = lib.nn.functional.grid_sample(xt, gt, **kwargs)
    weights = np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape)).astype(np.float32)
    (out * lib.from_numpy(weights)).sum().backward()
    return out.detach().numpy(), xt.grad.numpy(), gt.grad.numpy()


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode, volume", [("bicubic", False), ("bilinear", True),
                                          ("nearest", True)])
def test_grid_sample_as_torch(mode, volume, padding_mode, align):
    shape, grid = ((2, 3, 4, 5, 6), (2, 3, 4, 2, 3)) if volume else ((2, 3, 5, 6), (2, 4, 3, 2))
    x = RNG.standard_normal(shape).astype(np.float32)
    g = RNG.uniform(-1.3, 1.3, grid).astype(np.float32)  # some positions outside
    ours = _sample(fusegrad, x, g, mode=mode, padding_mode=padding_mode, align_corners=align)
    theirs = _sample(torch, x, g, mode=mode, padding_mode=padding_mode, align_corners=align)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-5)


GRID_ERRORS = {
    "bicubic volume": lambda L: L.nn.functional.grid_sample(
        L.ones(1, 1, 2, 2, 2), L.zeros(1, 1, 1, 1, 3), mode="bicubic", align_corners=False),
    "grid's last size": lambda L: L.nn.functional.grid_sample(
        L.ones(1, 1, 2, 2, 2), L.zeros(1, 1, 1, 1, 2), align_corners=False),
    "dims differ": lambda L: L.nn.functional.grid_sample(
        L.ones(1, 1, 2, 2), L.zeros(1, 1, 1, 1, 1, 2), align_corners=False),
    "3-d input": lambda L: L.nn.functional.grid_sample(
        L.ones(1, 1, 2), L.zeros(1, 1, 1), align_corners=False),
    "batch sizes": lambda L: L.nn.functional.grid_sample(
        L.ones(2, 1, 2, 2), L.zeros(1, 1, 1, 2), align_corners=False),
    "3-d theta": lambda L: L.nn.functional.affine_grid(
        L.zeros(2, 2, 3), (2, 3, 5, 5, 5), align_corners=False),
}


@pytest.mark.parametrize("name", list(GRID_ERRORS))
def test_errors_as_torch(name):
    got = []
    for lib in (fusegrad, torch):
        with pytest.raises(Exception) as info:
            GRID_ERRORS[name](lib)
        got.append((type(info.value).__name__, str(info.value)))
    assert got[0] == got[1]


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("size", [(2, 3, 4, 5, 6), (1, 2, 1, 3, 1), (2, 3, 5, 4)])
def test_affine_grid_as_torch(size, align):
    nd = len(size) - 2
    theta = RNG.standard_normal((size[0], nd, nd + 1)).astype(np.float32)
    results = []
    for lib in (fusegrad, torch):
        t = lib.from_numpy(theta.copy()).requires_grad_()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            grid = lib.nn.functional.affine_grid(t, size, align_corners=align)
        (grid * grid).sum().backward()
        results.append((grid.detach().numpy(), t.grad.numpy(),
                        [str(w.message) for w in caught]))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-5, atol=1e-4)
    assert results[0][2] == results[1][2]  # the unit-size warning with align_corners


def test_a_volume_warped_by_its_own_grid_round_trips():
    """affine_grid of the identity then grid_sample (align_corners=True) gives the volume
    back, as in a spatial-transformer network."""
    x = fusegrad.from_numpy(RNG.standard_normal((1, 2, 3, 4, 5)).astype(np.float32))
    eye = fusegrad.eye(3, 4).unsqueeze(0)
    grid = fusegrad.nn.functional.affine_grid(eye, list(x.shape), align_corners=True)
    back = fusegrad.nn.functional.grid_sample(x, grid, align_corners=True)
    np.testing.assert_allclose(back.numpy(), x.numpy(), atol=1e-5)
