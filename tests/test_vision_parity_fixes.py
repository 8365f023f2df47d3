"""Parity fixes in vision ops, against PyTorch: grid_sample's gradient at the image edge
(border and reflection padding) and its pixel arithmetic, pooling's dtype errors for integer,
bool and complex input, and uint8 bicubic resizing (with and without antialiasing) bit for
bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad

TF = torch.nn.functional
FF = fusegrad.nn.functional

# ---------------------------------------------------------------- grid_sample


def _sample(lib, x, grid, mode, padding, align, gout):
    """(output, input gradient, grid gradient) of grid_sample under `lib`."""
    xt = lib.tensor(x, requires_grad=True)
    gt = lib.tensor(grid, requires_grad=True)
    y = lib.nn.functional.grid_sample(xt, gt, mode=mode, padding_mode=padding,
                                      align_corners=align)
    (y * lib.tensor(gout)).sum().backward()
    return y.detach().numpy(), xt.grad.numpy(), gt.grad.numpy()


def _edgy_grid(rng, shape, sizes, align, dtype):
    """A random grid, about half its coordinates moved onto the places where the sampler's
    arithmetic has kinks: the borders, beyond them, and pixel centres."""
    nd = shape[-1]
    grid = rng.uniform(-1.3, 1.3, shape)
    flat = grid.reshape(-1, nd)
    for i in range(nd):
        size = sizes[nd - 1 - i]  # the grid lists x (the last spatial dim) first
        if align:
            centres = np.linspace(-1, 1, size) if size > 1 else np.zeros(1)
        else:
            centres = (2 * np.arange(size) + 1) / size - 1
        places = np.concatenate([[-1.0, 1.0, -1.5, 1.5, 0.0, -3.0, 3.0, -2.0, 2.0,
                                  -1 - 1 / size, 1 + 1 / size], centres])
        pick = rng.random(flat.shape[0]) < 0.5
        flat[pick, i] = rng.choice(places, int(pick.sum()))
    return grid.astype(dtype)


def _assert_sample_matches(x, grid, mode, padding, align, seed):
    gout = np.random.default_rng(seed).standard_normal(
        x.shape[:2] + grid.shape[1:-1]).astype(x.dtype)
    ref = _sample(torch, x, grid, mode, padding, align, gout)
    got = _sample(fusegrad, x, grid, mode, padding, align, gout)
    tol = 1e-4 if x.dtype == np.float32 else 1e-10
    for name, r, g in zip(("output", "input grad", "grid grad"), ref, got):
        np.testing.assert_allclose(g, r, rtol=tol, atol=tol, err_msg=name)


GRID_CASES = [(nd, mode, padding)
              for nd in (2, 3) for mode in ("bilinear", "nearest", "bicubic")
              for padding in ("zeros", "border", "reflection")
              if not (nd == 3 and mode == "bicubic")]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("align", [True, False])
@pytest.mark.parametrize("nd,mode,padding", GRID_CASES)
def test_grid_sample_edges_match_torch(nd, mode, padding, align, dtype):
    rng = np.random.default_rng(nd * 100 + len(mode) * 10 + len(padding) + align)
    for trial in range(4):
        sizes = tuple(int(v) for v in rng.integers(1, 6, nd))
        x = rng.standard_normal((2, 2) + sizes).astype(dtype)
        out = tuple(int(v) for v in rng.integers(1, 5, nd))
        grid = _edgy_grid(rng, (2,) + out + (nd,), sizes, align, dtype)
        _assert_sample_matches(x, grid, mode, padding, align, trial)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("align", [True, False])
@pytest.mark.parametrize("nd,mode,padding", GRID_CASES)
@pytest.mark.filterwarnings("ignore:Since version 1.3.0")
def test_grid_sample_identity_affine_grid(nd, mode, padding, align, dtype):
    # Every point of an identity grid lies on a pixel centre: on a kink of the gradient,
    # and on the border for the first and last pixels.
    rng = np.random.default_rng(3)
    for sizes in ((3, 4), (1, 5), (4, 1), (2, 2))[:4 if nd == 2 else 2]:
        sizes = sizes + ((3,) if nd == 3 else ())
        theta = np.tile(np.eye(nd, nd + 1), (2, 1, 1)).astype(dtype)
        grid = TF.affine_grid(torch.tensor(theta), (2, 2) + sizes,
                              align_corners=align).numpy()
        x = rng.standard_normal((2, 2) + sizes).astype(dtype)
        _assert_sample_matches(x, grid, mode, padding, align, 1)


@pytest.mark.parametrize("lib", [torch, fusegrad], ids=["torch", "fusegrad"])
def test_grid_sample_border_theta_grad_repro(lib):
    x = lib.arange(12.).reshape(1, 1, 3, 4)
    theta = lib.tensor([[[1., 0., 0.], [0., 1., 0.]]], requires_grad=True)
    g = lib.nn.functional.affine_grid(theta, [1, 1, 3, 4], align_corners=True)
    lib.nn.functional.grid_sample(x, g, padding_mode="border",
                                  align_corners=True).sum().backward()
    np.testing.assert_allclose(theta.grad.numpy(), [[[0, 0, 9], [0, 0, 16]]], atol=1e-5)


def test_grid_sample_reported_cases():
    x = np.arange(12.0, dtype=np.float32).reshape(1, 1, 3, 4)
    grid = np.array([[[[-1., -1.], [0.5, 1.0]]]], dtype=np.float32)
    ref = _sample(torch, x, grid, "bilinear", "reflection", True, np.ones((1, 1, 1, 2)))
    got = _sample(fusegrad, x, grid, "bilinear", "reflection", True, np.ones((1, 1, 1, 2)))
    np.testing.assert_allclose(got[2], ref[2], atol=1e-6)
    np.testing.assert_allclose(got[2].ravel(), [0, 0, 1.5, 0], atol=1e-6)
    v = np.arange(24.0, dtype=np.float32).reshape(1, 1, 2, 3, 4)
    grid = np.array([[[[[1.0, 1.0, 0.5]]]]], dtype=np.float32)
    ref = _sample(torch, v, grid, "bilinear", "border", True, np.ones((1, 1, 1, 1, 1)))
    got = _sample(fusegrad, v, grid, "bilinear", "border", True, np.ones((1, 1, 1, 1, 1)))
    np.testing.assert_allclose(got[2], ref[2], atol=1e-6)
    np.testing.assert_allclose(got[2].ravel()[:2], [0, 0], atol=1e-6)  # x, y on the border


@pytest.mark.parametrize("padding", ["border", "reflection"])
@pytest.mark.parametrize("nd", [2, 3])
def test_grid_sample_gradcheck_inside(nd, padding):
    # Away from the kinks, the derivative is the finite difference's.
    rng = np.random.default_rng(nd)
    x = fusegrad.tensor(rng.standard_normal((1, 1) + (3,) * nd), requires_grad=True)
    grid = fusegrad.tensor(rng.uniform(-1.6, 1.6, (1,) + (2,) * nd + (nd,)),
                           requires_grad=True)

    def fn(a, g):
        return FF.grid_sample(a, g, padding_mode=padding, align_corners=False)

    assert fusegrad.autograd.gradcheck(fn, (x, grid), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_nearest_halfway_points(padding, dtype):
    # Points half way between two pixels: the 2-D kernel's fused multiply-add decides the
    # side (its coordinate is rounded once, not twice).
    for size in range(2, 30):
        k = np.arange(-1, size + 1)
        v = (((k + 0.5) + 0.5) * 2 / size - 1).astype(dtype)
        v = np.concatenate([v, np.nextafter(v, v.dtype.type(2)),
                            np.nextafter(v, v.dtype.type(-2))])
        grid = np.stack([v, np.zeros_like(v)], -1)[None, None]
        x = np.arange(size, dtype=dtype).reshape(1, 1, 1, size)
        ref = TF.grid_sample(torch.tensor(x), torch.tensor(grid), "nearest", padding, False)
        got = FF.grid_sample(fusegrad.tensor(x), fusegrad.tensor(grid), "nearest", padding,
                             False)
        np.testing.assert_array_equal(got.numpy(), ref.numpy())


# ---------------------------------------------------------------- pooling dtypes

INT_DTYPES = ["uint8", "int8", "int16", "int32", "int64", "bool", "complex64"]


def _pool_calls():
    """(name, function of (F, lib, x), input shape) for every pooling that PyTorch checks
    the dtype of."""
    return [
        ("adaptive_avg_pool1d", lambda F, lib, x: F.adaptive_avg_pool1d(x, 2), (1, 2, 6)),
        ("adaptive_avg_pool2d", lambda F, lib, x: F.adaptive_avg_pool2d(x, (2, 3)),
         (1, 2, 4, 6)),
        ("adaptive_avg_pool2d unbatched", lambda F, lib, x: F.adaptive_avg_pool2d(x, 2),
         (2, 4, 4)),
        ("adaptive_avg_pool2d same size", lambda F, lib, x: F.adaptive_avg_pool2d(x, 4),
         (1, 2, 4, 4)),
        ("adaptive_avg_pool2d to 1", lambda F, lib, x: F.adaptive_avg_pool2d(x, 1),
         (1, 2, 4, 4)),
        ("adaptive_avg_pool3d", lambda F, lib, x: F.adaptive_avg_pool3d(x, 2),
         (1, 2, 4, 4, 4)),
        ("avg_pool1d", lambda F, lib, x: F.avg_pool1d(x, 2), (1, 2, 6)),
        ("avg_pool2d", lambda F, lib, x: F.avg_pool2d(x, 3, 2, 1), (1, 2, 5, 5)),
        ("avg_pool2d unbatched", lambda F, lib, x: F.avg_pool2d(x, 2), (2, 4, 4)),
        ("avg_pool2d no pad count", lambda F, lib, x: F.avg_pool2d(
            x, 3, 2, 1, ceil_mode=True, count_include_pad=False), (1, 2, 5, 5)),
        ("avg_pool2d divisor", lambda F, lib, x: F.avg_pool2d(x, 2, divisor_override=3),
         (1, 2, 4, 4)),
        ("avg_pool3d", lambda F, lib, x: F.avg_pool3d(x, 2, 1, 1), (1, 2, 3, 4, 4)),
        ("lp_pool1d", lambda F, lib, x: F.lp_pool1d(x, 2, 2), (1, 2, 4)),
        ("lp_pool2d", lambda F, lib, x: F.lp_pool2d(x, 2, 2), (1, 2, 4, 4)),
        ("area 1-D", lambda F, lib, x: F.interpolate(x, size=3, mode="area"), (1, 2, 6)),
        ("area 2-D", lambda F, lib, x: F.interpolate(x, size=(2, 3), mode="area"),
         (1, 2, 4, 6)),
        ("area 3-D", lambda F, lib, x: F.interpolate(x, size=(2, 2, 3), mode="area"),
         (1, 2, 4, 4, 6)),
        ("max_pool1d indices", lambda F, lib, x: F.max_pool1d(x, 2, return_indices=True),
         (1, 2, 6)),
        ("max_pool2d", lambda F, lib, x: F.max_pool2d(x, 3, 2, 1, return_indices=True),
         (1, 2, 5, 5)),
        ("max_pool3d", lambda F, lib, x: F.max_pool3d(x, 2, 2, 1, return_indices=True),
         (1, 2, 3, 4, 4)),
        # Windows at the type's least value: their first position inside wins, not the padding.
        ("max_pool2d lowest", lambda F, lib, x: F.max_pool2d(x, 2, 2, 1, return_indices=True),
         (1, 2, 3, 3)),
        ("max_pool3d lowest", lambda F, lib, x: F.max_pool3d(x, 2, 2, 1, return_indices=True),
         (1, 1, 3, 3, 3)),
        # Errors before the dtype's, and empty inputs (which some kernels skip).
        ("avg_pool2d bad kernel", lambda F, lib, x: F.avg_pool2d(x, 0), (1, 2, 4, 4)),
        ("avg_pool2d too small", lambda F, lib, x: F.avg_pool2d(x, 5), (1, 2, 4, 4)),
        ("avg_pool3d too small", lambda F, lib, x: F.avg_pool3d(x, 5), (1, 2, 4, 4, 4)),
        ("avg_pool2d empty batch", lambda F, lib, x: F.avg_pool2d(x, 2), (0, 2, 4, 4)),
        ("avg_pool3d empty batch", lambda F, lib, x: F.avg_pool3d(x, 2), (0, 2, 4, 4, 4)),
        ("adaptive_avg_pool2d negative", lambda F, lib, x: F.adaptive_avg_pool2d(x, (-1, 2)),
         (1, 2, 4, 4)),
        ("adaptive_avg_pool2d empty batch", lambda F, lib, x: F.adaptive_avg_pool2d(x, 2),
         (0, 2, 4, 4)),
        ("adaptive_avg_pool2d to 0", lambda F, lib, x: F.adaptive_avg_pool2d(x, (0, 2)),
         (1, 2, 4, 4)),
        ("adaptive_avg_pool3d empty batch", lambda F, lib, x: F.adaptive_avg_pool3d(x, 2),
         (0, 2, 4, 4, 4)),
        ("adaptive_avg_pool3d to 0", lambda F, lib, x: F.adaptive_avg_pool3d(x, (0, 2, 2)),
         (1, 2, 4, 4, 4)),
        ("max_pool2d bad kernel", lambda F, lib, x: F.max_pool2d(x, 0), (1, 2, 4, 4)),
        ("max_pool2d empty batch", lambda F, lib, x: F.max_pool2d(x, 2), (0, 2, 4, 4)),
    ]


def _outcome(lib, name, fn, shape, dtype):
    """The result's (dtype, values) or the error's (type name, message) of `fn` under lib."""
    dt = getattr(lib, dtype)
    n = int(np.prod(shape))
    values = (np.arange(n) * 37 % 11 - 4).reshape(shape)  # negatives for the signed types
    if name.endswith("lowest") and dtype not in ("bool", "complex64"):
        values = np.full(shape, np.iinfo(dtype).min)
    x = lib.tensor(values).to(dt)
    try:
        out = fn(lib.nn.functional, lib, x)
    except Exception as e:  # noqa: BLE001  (the error is the result compared)
        return type(e).__name__, str(e).splitlines()[0]
    outs = out if isinstance(out, tuple) else (out,)
    return [(str(o.dtype), o.shape, o.numpy().tolist()) for o in outs]


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("call", _pool_calls(), ids=lambda c: c[0])
def test_pooling_dtypes_match_torch(call, dtype):
    name, fn, shape = call
    ref = _outcome(torch, name, fn, shape, dtype)
    got = _outcome(fusegrad, name, fn, shape, dtype)
    if isinstance(ref, list):
        assert [(d.replace("torch.", ""), tuple(s), v) for d, s, v in got] == \
            [(d.replace("torch.", ""), tuple(s), v) for d, s, v in ref]
    else:
        assert got == ref


def test_integer_avg_pool_rounds_toward_zero():
    # int64 averages divide as C integers do (toward zero), negatives included.
    x = np.random.default_rng(0).integers(-50, 50, (2, 3, 7, 6))
    for kw in (dict(kernel_size=3, stride=2, padding=1),
               dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
               dict(kernel_size=2, ceil_mode=True, padding=1, count_include_pad=False),
               dict(kernel_size=2, divisor_override=-3)):
        ref = TF.avg_pool2d(torch.tensor(x), **kw)
        got = FF.avg_pool2d(fusegrad.tensor(x), **kw)
        np.testing.assert_array_equal(got.numpy(), ref.numpy())


# Adaptive max pooling: the last NaN of a window wins (each NaN takes over in PyTorch's
# kernel); integer, bool and complex inputs are refused, as max_pool1d's.

def test_adaptive_max_pool_nan_index():
    n = np.array([[[[1., np.nan, 3., 2.], [0., -1., np.nan, 5.]]]], dtype=np.float32)
    for fn, x, size in (("adaptive_max_pool2d", n, 1), ("adaptive_max_pool1d", n[0], 1),
                        ("adaptive_max_pool3d", n[None], 1)):
        ref = getattr(TF, fn)(torch.tensor(x), size, return_indices=True)[1]
        got = getattr(FF, fn)(fusegrad.tensor(x), size, return_indices=True)[1]
        np.testing.assert_array_equal(got.numpy(), ref.numpy())


@pytest.mark.parametrize("dtype", ["uint8", "int64", "bool"])
def test_adaptive_max_pool_and_max_pool1d_integer_errors(dtype):
    calls = [(lambda F, lib, x: F.adaptive_max_pool2d(x, 2), (1, 2, 4, 4)),
             (lambda F, lib, x: F.adaptive_max_pool1d(x, 2), (1, 2, 6)),
             (lambda F, lib, x: F.adaptive_max_pool3d(x, 2), (1, 2, 4, 4, 4)),
             (lambda F, lib, x: F.max_pool1d(x, 2), (1, 2, 6))]
    for fn, shape in calls:
        assert _outcome(fusegrad, "", fn, shape, dtype) == _outcome(torch, "", fn, shape,
                                                                    dtype)


# ---------------------------------------------------------------- uint8 resizing


def _resize_cases():
    rng = np.random.default_rng(2024)
    cases = []
    for t in range(48):
        c = (1, 3, 4, 5, 6)[t % 5]
        h, w = (int(v) for v in rng.integers(1, 24, 2))
        if t % 4 == 0:
            h, w = h + 4, w + 4  # (a scale of 0.3 keeps a pixel)
            size, scale = None, tuple(float(v) for v in rng.choice([0.3, 0.5, 1.5, 2.0,
                                                                    3.7, 1.0], 2))
        elif t % 4 == 1:  # strong shrinking: more than 16 bits of weight precision
            size, scale = (max(1, h // 7), max(1, w // 9)), None
        else:
            size, scale = tuple(int(v) for v in rng.integers(1, 40, 2)), None
        if size == (1, 1) and c == 3:  # PyTorch's AVX kernel asserts there (its bug)
            size = (1, 2)
        cases.append(((2, c, h, w), size, scale, t % 3 == 0))
    return cases


@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("mode", ["bicubic", "bilinear"])
@pytest.mark.parametrize("case", _resize_cases())
def test_uint8_resize_bit_exact(case, mode, align, antialias):
    shape, size, scale, channels_last = case
    rng = np.random.default_rng(sum(shape))
    x = rng.integers(0, 256, shape).astype(np.uint8)
    if shape[1] == 4:  # black and white: the cubic overshoot is clamped
        x = np.where(x < 128, 0, 255).astype(np.uint8)
    xt, xf = torch.tensor(x), fusegrad.tensor(x)
    if channels_last:
        xt = xt.contiguous(memory_format=torch.channels_last)
        xf = xf.contiguous(memory_format=fusegrad.channels_last)
    kw = dict(size=size, scale_factor=scale, mode=mode, align_corners=align,
              antialias=antialias)
    ref = TF.interpolate(xt, **kw)
    got = FF.interpolate(xf, **kw)
    assert got.dtype is fusegrad.uint8
    np.testing.assert_array_equal(got.numpy(), ref.numpy())


@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize("mode", ["bicubic", "bilinear"])
def test_uint8_resize_to_width_one(mode, antialias):
    # PyTorch's generic uint8 kernel (more than 4 channels, contiguous) writes the first row
    # of a width-1 result into every row; channels-last input and 4 channels or fewer do not.
    rng = np.random.default_rng(5)
    for c, channels_last in ((5, False), (7, False), (5, True), (4, False)):
        x = rng.integers(0, 256, (2, c, 16, 10)).astype(np.uint8)
        xt, xf = torch.tensor(x), fusegrad.tensor(x)
        if channels_last:
            xt = xt.contiguous(memory_format=torch.channels_last)
            xf = xf.contiguous(memory_format=fusegrad.channels_last)
        for size in ((2, 1), (5, 1), (16, 1)):
            ref = TF.interpolate(xt, size=size, mode=mode, antialias=antialias)
            got = FF.interpolate(xf, size=size, mode=mode, antialias=antialias)
            np.testing.assert_array_equal(got.numpy(), ref.numpy())


def test_uint8_bicubic_reported_case():
    img = np.random.default_rng(0).integers(0, 256, (1, 3, 7, 9)).astype(np.uint8)
    for antialias in (False, True):
        ref = TF.interpolate(torch.tensor(img), size=(10, 12), mode="bicubic",
                             antialias=antialias)
        got = FF.interpolate(fusegrad.tensor(img), size=(10, 12), mode="bicubic",
                             antialias=antialias)
        np.testing.assert_array_equal(got.numpy(), ref.numpy())
