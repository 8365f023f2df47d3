"""grid_sample and affine_grid record PyTorch's nodes (`GridSampler2DBackward0`,
`GridSampler3DBackward0`, `AffineGridGeneratorBackward0`) with their edges and saved values,
and keep PyTorch's values, first and second order gradients; the ops run on the meta
device, under CPU autocast (float32) and as `torch.ops.aten.*`."""

import itertools

import numpy as np
import pytest
import torch

import fusegrad

RNG = np.random.default_rng(7)
TOL = {"float32": dict(rtol=1e-4, atol=2e-5), "float64": dict(rtol=1e-9, atol=1e-10)}
CASES = [(nd, mode, pad, align, dt)
         for nd, mode, pad, align, dt in itertools.product(
             (2, 3), ("bilinear", "nearest", "bicubic"), ("zeros", "border", "reflection"),
             (False, True), ("float32", "float64"))
         if not (nd == 3 and mode == "bicubic")]


def _names(fn):
    return [None if n is None else type(n).__name__ for n, _ in fn.next_functions]


def _run(lib, x, g, w, mode, pad, align):
    xt = lib.from_numpy(x.copy()).requires_grad_()
    gt = lib.from_numpy(g.copy()).requires_grad_()
    out = lib.nn.functional.grid_sample(xt, gt, mode=mode, padding_mode=pad,
                                        align_corners=align)
    fn = out.grad_fn
    facts = (type(fn).__name__, _names(fn), fn._saved_interpolation_mode,
             fn._saved_padding_mode, fn._saved_align_corners,
             tuple(fn._saved_input.shape), tuple(fn._saved_grid.shape))
    loss = (out * out * lib.from_numpy(w)).sum()  # the gradient depends on both again
    gx, gg = lib.autograd.grad(loss, (xt, gt), create_graph=True)
    values = [out.detach().numpy(), gx.detach().numpy(), gg.detach().numpy()]
    if mode != "nearest":  # (nearest: PyTorch's gradient of the grid is zeros, no graph)
        second = lib.autograd.grad((gx * gx).sum() + (gg * gg).sum(), (xt, gt))
        values += [s.numpy() for s in second]
    return facts, values


@pytest.mark.parametrize("nd, mode, pad, align, dt", CASES)
def test_grid_sample_nodes_values_and_gradients(nd, mode, pad, align, dt):
    shape, grid = ((2, 3, 4, 5), (2, 3, 4, 2)) if nd == 2 else ((2, 2, 3, 4, 5), (2, 2, 3, 2, 3))
    x = RNG.standard_normal(shape).astype(dt)
    g = RNG.uniform(-1.2, 1.2, grid).astype(dt)  # some points outside
    n_out = shape[:2] + grid[1:-1]
    w = RNG.standard_normal(n_out).astype(dt)
    ours, theirs = _run(fusegrad, x, g, w, mode, pad, align), _run(torch, x, g, w, mode, pad,
                                                                     align)
    assert ours[0] == theirs[0]
    assert ours[0][0] == f"GridSampler{nd}DBackward0"
    tol = dict(TOL[dt])
    for i, (a, b) in enumerate(zip(ours[1], theirs[1])):
        if i >= 3:  # second order: sums of more products
            tol = dict(rtol=1e-3, atol=1e-3) if dt == "float32" else dict(rtol=1e-7, atol=1e-8)
        np.testing.assert_allclose(a, b, err_msg=f"result {i}", **tol)


def test_graph_walk_and_single_input_edges():
    """A grid that does not require grad: PyTorch's edge for it is (None, 0)."""
    for lib in (fusegrad, torch):
        x = lib.randn(1, 2, 3, 3, requires_grad=True)
        g = lib.rand(1, 2, 2, 2) * 2 - 1
        out = lib.nn.functional.grid_sample(x, g, align_corners=False)
        assert _names(out.grad_fn) == ["AccumulateGrad", None]
        (gx,) = lib.autograd.grad(out.sum(), x)
        assert gx.shape == x.shape


@pytest.mark.parametrize("size", [[2, 1, 3, 4], [1, 2, 5, 1], [2, 1, 2, 3, 4]])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_affine_grid_node_values_and_gradient(size, align, dt):
    nd = len(size) - 2
    theta = RNG.standard_normal((size[0], nd, nd + 1)).astype(dt)
    results = []
    for lib in (fusegrad, torch):
        t = lib.from_numpy(theta.copy()).requires_grad_()
        with np.errstate(all="ignore"), pytest.warns() if align and 1 in size[2:] else \
                _nothing():
            grid = lib.nn.functional.affine_grid(t, size, align_corners=align)
        fn = grid.grad_fn
        (gt,) = lib.autograd.grad((grid * grid).sum(), t)
        results.append((type(fn).__name__, _names(fn), tuple(fn._saved_size),
                        fn._saved_align_corners, grid.detach().numpy(), gt.numpy()))
    ours, theirs = results
    assert ours[:4] == theirs[:4] and ours[0] == "AffineGridGeneratorBackward0"
    for a, b in zip(ours[4:], theirs[4:]):
        np.testing.assert_allclose(a, b, **TOL[dt])


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_affine_grid_into_grid_sample_double_backward():
    """The spatial transformer's chain: theta -> grid -> sample, differentiated twice."""
    theta = RNG.standard_normal((2, 2, 3)) * 0.3 + np.array([[1, 0, 0], [0, 1, 0]])
    x = RNG.standard_normal((2, 3, 5, 6))
    results = []
    for lib in (fusegrad, torch):
        t = lib.from_numpy(theta.copy()).requires_grad_()
        xt = lib.from_numpy(x.copy()).requires_grad_()
        grid = lib.nn.functional.affine_grid(t, [2, 3, 4, 4], align_corners=False)
        out = lib.nn.functional.grid_sample(xt, grid, align_corners=False)
        assert type(out.grad_fn.next_functions[1][0]).__name__ == "AffineGridGeneratorBackward0"
        gt, gx = lib.autograd.grad(out.pow(2).sum(), (t, xt), create_graph=True)
        (ht,) = lib.autograd.grad(gt.pow(2).sum() + gx.pow(2).sum(), t)
        results.append([a.detach().numpy() for a in (out, gt, gx, ht)])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


def test_meta_autocast_and_aten_ops():
    F = fusegrad.nn.functional
    x, g = fusegrad.randn(2, 3, 4, 5, device="meta"), fusegrad.randn(2, 3, 3, 2, device="meta")
    out = F.grid_sample(x, g, align_corners=False)
    assert out.is_meta and tuple(out.shape) == (2, 3, 3, 3)
    theta = fusegrad.randn(2, 3, 4, device="meta")
    grid = F.affine_grid(theta, [2, 1, 2, 3, 4], align_corners=True)
    assert grid.is_meta and tuple(grid.shape) == (2, 2, 3, 4, 3)
    # CPU autocast runs grid sampling in float32, as PyTorch's
    xb = np.random.default_rng(1).standard_normal((1, 2, 4, 4)).astype(np.float32)
    gb = np.random.default_rng(2).uniform(-1, 1, (1, 3, 3, 2)).astype(np.float32)
    outs = []
    for lib in (fusegrad, torch):
        with lib.autocast("cpu", dtype=lib.bfloat16):
            o = lib.nn.functional.grid_sample(lib.from_numpy(xb).to(lib.bfloat16),
                                              lib.from_numpy(gb), align_corners=False)
        outs.append((o.dtype, o.float().numpy()))
    assert str(outs[0][0]) == str(outs[1][0]) == "torch.float32"
    np.testing.assert_allclose(outs[0][1], outs[1][1], rtol=1e-5, atol=1e-6)
    # the ATen ops with integer modes
    xa = RNG.standard_normal((1, 2, 3, 4)).astype(np.float32)
    ga = RNG.uniform(-1, 1, (1, 2, 2, 2)).astype(np.float32)
    a = fusegrad.ops.aten.grid_sampler_2d(fusegrad.from_numpy(xa), fusegrad.from_numpy(ga),
                                          2, 2, True)
    b = torch.ops.aten.grid_sampler_2d(torch.from_numpy(xa), torch.from_numpy(ga), 2, 2, True)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("autocast", [True, False])
def test_affine_grid_in_bfloat16_as_pytorch(align_corners, autocast):
    # bfloat16 theta, or float32 under CPU autocast (PyTorch's kernel multiplies by a bmm
    # autocast runs in bfloat16): the grid's dtype, values (within a bfloat16 ulp: PyTorch
    # rounds a float32 base grid, fusegrad builds it in bfloat16) and theta's gradient.
    th = np.array([[[0.9, 0.2, 0.1], [-0.3, 1.1, 0.05]]], np.float32)
    out = []
    for lib in (torch, fusegrad):
        t = lib.tensor(th, requires_grad=True)
        if autocast:
            with lib.autocast("cpu", dtype=lib.bfloat16):
                g = lib.nn.functional.affine_grid(t, [1, 1, 5, 7], align_corners=align_corners)
        else:
            g = lib.nn.functional.affine_grid(t.bfloat16(), [1, 1, 5, 7],
                                              align_corners=align_corners)
        g.float().sum().backward()
        out.append((str(g.dtype), g.float().detach().numpy(), t.grad.numpy(),
                    type(g.grad_fn).__name__))
    (dt, v, gr, node), (dt2, v2, gr2, node2) = out
    assert (dt2, node2) == (dt, node)
    np.testing.assert_allclose(v2, v, atol=2 ** -8, rtol=0)
    np.testing.assert_allclose(gr2, gr, rtol=1e-6)


def test_aten_spellings_of_volume_sampling():
    # torch.grid_sampler_3d (ATen's integer modes) beside torch.grid_sampler_2d
    x = RNG.standard_normal((1, 2, 3, 4, 4)).astype(np.float32)
    g = RNG.uniform(-1, 1, (1, 2, 3, 3, 3)).astype(np.float32)
    out = []
    for lib in (torch, fusegrad):
        xt = lib.tensor(x, requires_grad=True)
        y = lib.grid_sampler_3d(xt, lib.tensor(g), 0, 1, False)
        y.sum().backward()
        out.append((y.detach().numpy(), xt.grad.numpy(), type(y.grad_fn).__name__))
    np.testing.assert_allclose(out[1][0], out[0][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[1][1], out[0][1], rtol=1e-5, atol=1e-6)
    assert out[1][2] == out[0][2]


def test_integer_addcdiv_message_as_pytorch():
    errors = []
    for lib in (torch, fusegrad):
        a = lib.ones(2, dtype=lib.int64)
        with pytest.raises(RuntimeError) as e:
            lib.addcdiv(a, a, a)
        errors.append(str(e.value))
    assert errors[0] == errors[1]
