"""The `*_with_indices` spellings, lp pooling, max unpooling, affine_grid, grid_sample, the
distance-function triplet loss and the namespace helpers of `nn.functional`: values,
gradients, node names and errors against PyTorch."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

RNG = np.random.default_rng(7)
X4 = RNG.standard_normal((2, 3, 6, 5))
X3 = RNG.standard_normal((2, 3, 7))


def _both(fn, *arrays, node=True, tol=1e-10):
    """fn(lib, *tensors) in both libraries: values, leaf gradients and node names equal."""
    outs = []
    for lib in (torch, fusegrad):
        leaves = [lib.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(lib, *leaves)
        first = out[0] if isinstance(out, tuple) else out
        weights = lib.tensor(np.linspace(0.5, 1.5, first.numel()).reshape(tuple(first.shape)))
        if first.requires_grad:
            (first * weights).sum().backward()
        outs.append((out, [x.grad for x in leaves], type(first.grad_fn).__name__))
    (want, wgrads, wnode), (got, ggrads, gnode) = outs
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for w, g in zip(want, got):
        assert g.dtype == getattr(fusegrad, str(w.dtype).split(".")[1])
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=tol, atol=tol)
    for w, g in zip(wgrads, ggrads):
        assert (w is None) == (g is None)
        if w is not None:
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=tol, atol=tol)
    if node:
        assert gnode == wnode


def test_relu_and_pdist():
    _both(lambda lib, x: lib.nn.functional.relu_(x * 1.0), X3)
    _both(lambda lib, x: lib.nn.functional.pdist(x, 1.5), X3[0])


@pytest.mark.parametrize("name, args", [
    ("max_pool1d_with_indices", (X3, 2)), ("max_pool2d_with_indices", (X4, (2, 3), 1)),
    ("adaptive_max_pool1d_with_indices", (X3, 3)),
    ("adaptive_max_pool2d_with_indices", (X4, (2, 3))),
])
def test_with_indices(name, args):
    _both(lambda lib, x: getattr(lib.nn.functional, name)(x, *args[1:]), args[0])


@pytest.mark.parametrize("p", [2.0, 3, 1.5, float("inf")])
def test_lp_pool(p):
    pos = np.abs(X4) + 0.1  # PyTorch's formula takes a fractional power of the input
    _both(lambda lib, x: lib.nn.functional.lp_pool2d(x, p, (2, 2)), pos, node=False)
    _both(lambda lib, x: lib.nn.functional.lp_pool2d(x, p, 3, stride=2, ceil_mode=True),
          pos, node=False)
    _both(lambda lib, x: lib.nn.functional.lp_pool1d(x, p, 3, 2), np.abs(X3) + 0.1,
          node=False)
    _both(lambda lib, x: lib.nn.LPPool2d(p, 2)(x), pos, node=False)
    _both(lambda lib, x: lib.nn.LPPool1d(p, 2)(x), np.abs(X3) + 0.1, node=False)


@pytest.mark.parametrize("spatial", [1, 2])
def test_max_unpool(spatial):
    x = X3 if spatial == 1 else X4
    size = None if spatial == 1 else [6, 5]

    def fn(lib, x):
        F = lib.nn.functional
        pool = F.max_pool1d if spatial == 1 else F.max_pool2d
        unpool = F.max_unpool1d if spatial == 1 else F.max_unpool2d
        out, idx = pool(x, 2, return_indices=True)
        mod = (lib.nn.MaxUnpool1d if spatial == 1 else lib.nn.MaxUnpool2d)(2)
        return unpool(out, idx, 2, output_size=size) + mod(out, idx, output_size=size)

    _both(fn, x, node=False)
    _both(lambda lib, x: lib.nn.functional.max_unpool2d(
        *lib.nn.functional.max_pool2d(x, 2, return_indices=True), 2), X4[..., :4])


def test_max_unpool_errors():
    for lib in (torch, fusegrad):
        out, idx = lib.nn.functional.max_pool2d(lib.tensor(X4), 2, return_indices=True)
        with pytest.raises(ValueError, match=r"invalid output_size \"\[9, 9\]\" \(dim 0 must be "
                           r"between 4 and 8\)"):
            lib.nn.functional.max_unpool2d(out, idx, 2, output_size=[9, 9])
        with pytest.raises(RuntimeError, match="Found an invalid max index: 300"):
            lib.nn.functional.max_unpool2d(out, idx * 0 + 300, 2)


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_triplet_margin_with_distance_loss(swap, reduction):
    a, p, n = (RNG.standard_normal((4, 5)) for _ in range(3))
    for dist in (None, "cos"):
        def fn(lib, a, p, n, dist=dist):
            d = None if dist is None else (
                lambda x, y: 1.0 - lib.nn.functional.cosine_similarity(x, y))
            loss = lib.nn.functional.triplet_margin_with_distance_loss(
                a, p, n, distance_function=d, margin=0.5, swap=swap, reduction=reduction)
            mod = lib.nn.TripletMarginWithDistanceLoss(distance_function=d, margin=0.5,
                                                       swap=swap, reduction=reduction)
            return loss + mod(a, p, n)

        _both(fn, a, p, n, node=False)
    for lib in (torch, fusegrad):
        t = lib.ones(2, 3)
        with pytest.raises(ValueError, match="margin must be greater than 0, got 0"):
            lib.nn.functional.triplet_margin_with_distance_loss(t, t, t, margin=0)
        with pytest.raises(RuntimeError, match="anchor 2D, positive 1D, and negative 2D"):
            lib.nn.functional.triplet_margin_with_distance_loss(t, t[0], t)


@pytest.mark.parametrize("align", [False, True])
def test_affine_grid(align):
    theta = RNG.standard_normal((2, 2, 3))
    _both(lambda lib, t: lib.nn.functional.affine_grid(t, [2, 3, 4, 5], align_corners=align),
          theta, node=False)
    _both(lambda lib, t: lib.nn.functional.affine_grid(t, (2, 1, 1, 3), align_corners=align),
          theta, node=False)
    for lib in (torch, fusegrad):
        with pytest.raises(ValueError, match="Expected a batch of 2D affine matrices"):
            lib.nn.functional.affine_grid(lib.ones(2, 3, 3), [2, 3, 4, 5], False)
        with pytest.warns(UserWarning, match="Default grid_sample and affine_grid"):
            lib.nn.functional.affine_grid(lib.ones(2, 2, 3), [2, 3, 4, 5])


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample(mode, padding_mode, align):
    x = RNG.standard_normal((2, 3, 5, 4))
    # positions inside, outside and far outside [-1, 1], away from pixel centres and edges
    grid = RNG.uniform(-2.7, 2.7, (2, 6, 7, 2)) + 0.013
    _both(lambda lib, x, g: lib.nn.functional.grid_sample(
        x, g, mode=mode, padding_mode=padding_mode, align_corners=align), x, grid,
        node=False, tol=1e-9)


def test_grid_sample_errors():
    for lib in (torch, fusegrad):
        x, g = lib.ones(1, 1, 2, 2), lib.zeros(1, 1, 1, 2)
        with pytest.raises(ValueError, match="expected mode to be 'bilinear', 'nearest' or "
                           "'bicubic', but got: 'area'"):
            lib.nn.functional.grid_sample(x, g, mode="area")
        with pytest.raises(ValueError, match="but got: 'wrap'"):
            lib.nn.functional.grid_sample(x, g, padding_mode="wrap")
        with pytest.warns(UserWarning, match="Default grid_sample"):
            lib.nn.functional.grid_sample(x, g)


def test_namespace_helpers():
    for lib in (torch, fusegrad):
        F = lib.nn.functional
        F.assert_int_or_pair(3, "k", "{} bad")
        F.assert_int_or_pair((1, 2), "k", "{} bad")
        with pytest.raises(AssertionError, match="kernel bad"):
            F.assert_int_or_pair((1, 2, 3), "kernel", "{} bad")

        def yes(a, flag=False):
            """Doc."""
            return ("yes", a)

        def no(a, flag=False):
            return ("no", a)

        fn = F.boolean_dispatch("flag", 1, False, yes, no, "m", "pick")
        assert fn(1) == ("no", 1) and fn(1, True) == ("yes", 1)
        assert fn(2, flag=True) == ("yes", 2)
        assert fn.__doc__ == "Doc." and no.__doc__ == "Doc." and fn.__name__ == "pick"


@pytest.mark.parametrize("separate", [False, True])
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("extras", [False, True])
def test_multi_head_attention_forward(separate, need_weights, extras):
    e, heads = 6, 2
    q, k = RNG.standard_normal((4, 2, e)), RNG.standard_normal((5, 2, e))
    w_in, b_in = RNG.standard_normal((3 * e, e)) * 0.4, RNG.standard_normal(3 * e) * 0.1
    w_out, b_out = RNG.standard_normal((e, e)) * 0.4, RNG.standard_normal(e) * 0.1
    bk, bv = RNG.standard_normal((1, 1, e)), RNG.standard_normal((1, 1, e))
    mask = RNG.standard_normal((4, 5)) * 0.1

    def fn(lib, q, k, w_in, b_in, w_out, b_out, bk, bv, mask):
        F = lib.nn.functional
        kw = dict(need_weights=need_weights, attn_mask=mask, training=False)
        if separate:
            kw.update(use_separate_proj_weight=True, q_proj_weight=w_in[:e],
                      k_proj_weight=w_in[e:2 * e], v_proj_weight=w_in[2 * e:])
        out = F.multi_head_attention_forward(
            q, k, k, e, heads, None if separate else w_in, b_in,
            bk if extras else None, bv if extras else None, extras, 0.0, w_out, b_out, **kw)
        return out if need_weights else out[0]

    _both(fn, q, k, w_in, b_in, w_out, b_out, bk, bv, mask, node=False, tol=1e-9)


def test_conv_tbc_in_functional():
    _both(lambda lib, x, w, b: lib.nn.functional.conv_tbc(x, w, b, 1),
          RNG.standard_normal((6, 2, 3)), RNG.standard_normal((2, 3, 4)),
          RNG.standard_normal(4), node=False)


@pytest.mark.parametrize("kernel, size, ratio", [(2, (4, 5), None), ((3, 2), 3, None),
                                                 (2, None, (0.5, 0.5)), (3, (2, 6), None)])
def test_fractional_max_pool2d_with_samples(kernel, size, ratio):
    """Given the same random samples, PyTorch's windows, values, indices and gradients."""
    x = RNG.standard_normal((2, 3, 9, 11))
    samples = RNG.uniform(0, 1, (2, 3, 2))

    def fn(lib, x):
        return lib.nn.functional.fractional_max_pool2d(
            x, kernel, output_size=size, output_ratio=ratio, return_indices=True,
            _random_samples=lib.tensor(samples))

    _both(fn, x, node=False)
    _both(lambda lib, x: lib.nn.FractionalMaxPool2d(
        kernel, size, ratio, _random_samples=lib.tensor(samples[:1]))(x[0]), x, node=False)


def test_fractional_max_pool2d_random():
    """Drawn samples: the windows still cover the input in order; each output is the max of
    a kernel-sized window and its index points at that value."""
    x = fusegrad.tensor(RNG.standard_normal((2, 3, 10, 10)))
    out, idx = fusegrad.nn.FractionalMaxPool2d(2, output_ratio=0.5, return_indices=True)(x)
    assert out.shape == (2, 3, 5, 5) and idx.dtype == fusegrad.int64
    flat = x.flatten(-2)
    assert fusegrad.equal(flat.gather(-1, idx.flatten(-2)).view(out.shape), out)
    rows, cols = idx // 10, idx % 10
    assert bool((rows[..., 1:, :] > rows[..., :-1, :]).all())
    assert bool((cols[..., 1:] > cols[..., :-1]).all())
    for lib in (torch, fusegrad):
        with pytest.raises(ValueError, match="requires specifying either an output size"):
            lib.nn.FractionalMaxPool2d(2)
        with pytest.raises(ValueError, match=r"output_ratio must be between 0 and 1 \(got "
                           r"1.5\)"):
            lib.nn.FractionalMaxPool2d(2, output_ratio=1.5)
        with pytest.raises(RuntimeError, match="pool height 3 too large relative to input "
                           "height 4"):
            lib.nn.functional.fractional_max_pool2d(lib.ones(1, 1, 4, 4), 3, output_size=3)


def test_max_unpool3d():
    x = RNG.standard_normal((2, 2, 4, 6, 4))
    _, t_idx = torch.nn.functional.max_pool3d(torch.tensor(x), 2, return_indices=True)
    pooled = RNG.standard_normal(tuple(t_idx.shape))

    def fn(lib, v):
        idx = lib.tensor(t_idx.numpy())
        return lib.nn.functional.max_unpool3d(v, idx, 2) + lib.nn.MaxUnpool3d(2)(
            v, idx, output_size=[4, 6, 4])

    _both(fn, pooled, node=False)
    _both(lambda lib, v: lib.nn.functional.max_unpool3d(v[0], lib.tensor(t_idx[0].numpy()),
                                                        2), pooled)
    for lib in (torch, fusegrad):
        assert repr(lib.nn.MaxUnpool3d(2)) == \
            "MaxUnpool3d(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0))"
        with pytest.raises(RuntimeError, match=r"Found an invalid max index: 6300 \(output "
                           r"volumes are of size 4x6x4"):
            lib.nn.functional.max_unpool3d(lib.tensor(pooled), lib.tensor(
                t_idx.numpy()) * 0 + 6300, 2)


@pytest.mark.parametrize("kernel, size, ratio", [(2, (4, 5, 3), None), ((3, 2, 2), 3, None),
                                                 (2, None, (0.5, 0.5, 0.4))])
def test_fractional_max_pool3d_with_samples(kernel, size, ratio):
    x = RNG.standard_normal((2, 3, 7, 8, 9))
    samples = RNG.uniform(0, 1, (2, 3, 3))

    def fn(lib, x):
        return lib.nn.functional.fractional_max_pool3d(
            x, kernel, output_size=size, output_ratio=ratio, return_indices=True,
            _random_samples=lib.tensor(samples))

    _both(fn, x, node=False)
    _both(lambda lib, x: lib.nn.FractionalMaxPool3d(
        kernel, size, ratio, _random_samples=lib.tensor(samples[:1]))(x[0]), x, node=False)
    for lib in (torch, fusegrad):
        with pytest.raises(ValueError, match="FractionalMaxPool3d requires specifying either"):
            lib.nn.FractionalMaxPool3d(2)
        with pytest.raises(RuntimeError, match=r"fractional_max_pool3d_out\(\): pool time 3 "
                           "too large relative to input time 4"):
            lib.nn.functional.fractional_max_pool3d(lib.ones(1, 1, 4, 4, 4), 3, output_size=3)


@pytest.mark.parametrize("size", [2, (2, None, 3), (3, 5, 4), 1])
def test_adaptive_max_pool3d(size):
    x = RNG.standard_normal((2, 3, 5, 7, 6))
    _both(lambda lib, x: lib.nn.functional.adaptive_max_pool3d_with_indices(x, size), x,
          node=False)
    _both(lambda lib, x: lib.nn.AdaptiveMaxPool3d(size, return_indices=True)(x[0]), x,
          node=False)
    _both(lambda lib, x: lib.nn.functional.adaptive_max_pool3d(x, size), x, node=False)
    for lib in (torch, fusegrad):
        assert repr(lib.nn.AdaptiveMaxPool3d(size)) == f"AdaptiveMaxPool3d(output_size={size})"
        with pytest.raises(RuntimeError, match=r"adaptive_max_pool3d\(\): Expected 4D or 5D "
                           r"tensor, but got: \[2, 3\]"):
            lib.nn.functional.adaptive_max_pool3d(lib.ones(2, 3), 2)


@pytest.mark.parametrize("case", ["2x3", "3x3", "2x2", "3x2"])
def test_grouped_mm(case):
    offs = {"2x3": [2, 4, 6], "2x2": [2, 6, 8], "3x2": [4, 12, 16]}
    shapes = {"2x3": ((6, 8), (3, 8, 8)), "3x3": ((3, 2, 8), (3, 8, 8)),
              "2x2": ((4, 8), (8, 12)), "3x2": ((3, 4, 8), (8, 16))}
    a_shape, b_shape = shapes[case]
    a, b = RNG.standard_normal(a_shape), RNG.standard_normal(b_shape)

    def fn(lib, a, b):
        o = offs.get(case)
        return lib.nn.functional.grouped_mm(
            a.float(), b.float(), offs=None if o is None else lib.tensor(o, dtype=lib.int32))

    _both(fn, a, b, node=False, tol=1e-5)
    for lib in (torch, fusegrad):
        with pytest.raises(RuntimeError, match="strides should be multiple of 16 bytes"):
            lib.nn.functional.grouped_mm(lib.ones(6, 4), lib.ones(3, 4, 5),
                                         offs=lib.tensor([2, 4, 6], dtype=lib.int32))


@pytest.mark.parametrize("p", [2.0, 1.5, float("inf"), -float("inf")])
@pytest.mark.parametrize("kernel, stride", [(2, None), ((2, 3, 2), (1, 2, 2))])
def test_lp_pool3d(p, kernel, stride):
    x = np.abs(RNG.standard_normal((2, 3, 5, 6, 5))) + 0.1
    _both(lambda lib, t: lib.nn.functional.lp_pool3d(t, p, kernel, stride), x, node=False)
    _both(lambda lib, t: lib.nn.LPPool3d(p, kernel, stride)(t[0]), x, node=False)


@pytest.mark.parametrize("kw", [dict(kernel_size=2, ceil_mode=True),
                                dict(kernel_size=3, stride=3, ceil_mode=True),
                                dict(kernel_size=2, padding=1, ceil_mode=True),
                                dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                                     count_include_pad=False),
                                dict(kernel_size=2)])
@pytest.mark.parametrize("nd", [2, 3])
def test_avg_pool_double_backward_as_pytorch(kw, nd):
    # The gradient's own gradient (with respect to the cotangent and the input): ceil_mode's
    # last window reaching past the input failed in the backward of the backward.
    x = RNG.standard_normal((2, 3) + (5,) * nd)
    got = []
    for lib in (torch, fusegrad):
        xt = lib.tensor(x, requires_grad=True)
        pool = getattr(lib.nn.functional, f"avg_pool{nd}d")
        y = pool(xt, **kw)
        u = lib.tensor(np.linspace(-1, 1, y.numel()).reshape(tuple(y.shape)),
                       requires_grad=True)
        g, = lib.autograd.grad(y, xt, u, create_graph=True)
        gu, = lib.autograd.grad((g * g).sum(), u)
        got.append((g.detach().numpy(), gu.numpy()))
    for a, b in zip(*got):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)
