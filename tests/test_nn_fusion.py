"""`nn.utils.fusion` against PyTorch: conv/linear + eval batch norm folded into one layer,
the same weights and biases (bitwise), outputs equal to the unfused pair, Parameter
attributes, and the assertion messages."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

RNG = np.random.default_rng(11)


def _pair(make_layer, bn_cls, features, affine=True):
    """The same layer and batch norm (random statistics) in torch and fusegrad, eval mode."""
    torch.manual_seed(0)
    layer_t = make_layer(torch).eval()
    bn_t = getattr(torch.nn, bn_cls)(features, affine=affine).eval()
    with torch.no_grad():
        bn_t.running_mean.copy_(torch.tensor(RNG.standard_normal(features), dtype=torch.float32))
        bn_t.running_var.copy_(torch.tensor(RNG.uniform(0.5, 2, features), dtype=torch.float32))
        if affine:
            bn_t.weight.copy_(torch.tensor(RNG.standard_normal(features), dtype=torch.float32))
            bn_t.bias.copy_(torch.tensor(RNG.standard_normal(features), dtype=torch.float32))
    layer_f = make_layer(fusegrad).eval()
    bn_f = getattr(fusegrad.nn, bn_cls)(features, affine=affine).eval()
    for src, dst in ((layer_t, layer_f), (bn_t, bn_f)):
        dst.load_state_dict({k: fusegrad.tensor(v.numpy()) for k, v in src.state_dict().items()})
    return (layer_t, bn_t), (layer_f, bn_f)


CONVS = [
    (lambda L: L.nn.Conv2d(3, 4, 3), "BatchNorm2d", 4, (2, 3, 6, 6), False, True),
    (lambda L: L.nn.Conv1d(3, 4, 2, bias=False), "BatchNorm1d", 4, (2, 3, 5), False, True),
    (lambda L: L.nn.Conv2d(4, 4, 3, groups=2), "BatchNorm2d", 4, (1, 4, 5, 5), False, False),
    (lambda L: L.nn.ConvTranspose2d(3, 4, 3), "BatchNorm2d", 4, (2, 3, 4, 4), True, True),
]


@pytest.mark.parametrize("make, bn_cls, feats, shape, transpose, affine", CONVS)
def test_fuse_conv_bn_eval(make, bn_cls, feats, shape, transpose, affine):
    (ct, bt), (cf, bf) = _pair(make, bn_cls, feats, affine)
    x = RNG.standard_normal(shape).astype(np.float32)
    fused_t = torch.nn.utils.fuse_conv_bn_eval(ct, bt, transpose=transpose)
    fused_f = fusegrad.nn.utils.fuse_conv_bn_eval(cf, bf, transpose=transpose)
    assert fused_f is not cf and type(fused_f.weight) is fusegrad.nn.Parameter
    assert repr(fused_f) == repr(fused_t)
    for name in ("weight", "bias"):
        pt, pf = getattr(fused_t, name), getattr(fused_f, name)
        np.testing.assert_array_equal(pf.detach().numpy(), pt.detach().numpy())
        assert pf.requires_grad == pt.requires_grad
    out = fused_f(fusegrad.tensor(x)).detach().numpy()
    np.testing.assert_allclose(out, fused_t(torch.tensor(x)).detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(out, bf(cf(fusegrad.tensor(x))).detach().numpy(), atol=1e-5)
    # the originals are untouched
    np.testing.assert_array_equal(cf.weight.detach().numpy(), ct.weight.detach().numpy())


@pytest.mark.parametrize("feats, bias", [(4, True), (1, True), (4, False)])
def test_fuse_linear_bn_eval(feats, bias):
    (lt, bt), (lf, bf) = _pair(lambda L: L.nn.Linear(3, 4, bias=bias), "BatchNorm1d", feats)
    fused_t = torch.nn.utils.fuse_linear_bn_eval(lt, bt)
    fused_f = fusegrad.nn.utils.fuse_linear_bn_eval(lf, bf)
    for name in ("weight", "bias"):
        pt, pf = getattr(fused_t, name), getattr(fused_f, name)
        np.testing.assert_array_equal(pf.detach().numpy(), pt.detach().numpy())
        assert pf.requires_grad == pt.requires_grad and tuple(pf.shape) == tuple(pt.shape)
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    out = fused_f(fusegrad.tensor(x)).detach().numpy()
    np.testing.assert_allclose(out, fused_t(torch.tensor(x)).detach().numpy(), atol=1e-6)
    if feats == 4:  # a one-feature batch norm cannot run after the 4-feature layer
        np.testing.assert_allclose(out, bf(lf(fusegrad.tensor(x))).detach().numpy(), atol=1e-5)


def test_fuse_weights_functions():
    w = RNG.standard_normal((4, 3, 2, 2)).astype(np.float32)
    stats = [RNG.standard_normal(4).astype(np.float32), RNG.uniform(0.5, 2, 4).astype(np.float32)]
    outs = []
    for lib in (torch, fusegrad):
        rm, rv = (lib.tensor(s) for s in stats)
        cw, cb = lib.nn.utils.fuse_conv_bn_weights(lib.tensor(w), None, rm, rv, 1e-3, None, None)
        lw, lb = lib.nn.utils.fuse_linear_bn_weights(
            lib.tensor(w[:, :, 0, 0]), lib.tensor(stats[0]), rm, rv, 1e-5, rv, rm)
        outs.append([(type(p).__name__, p.requires_grad, p.detach().numpy().tolist())
                     for p in (cw, cb, lw, lb)])
    assert outs[0] == outs[1]


def _messages(lib):
    msgs = []
    cases = [
        lambda: lib.nn.utils.fuse_conv_bn_eval(lib.nn.Conv2d(1, 2, 1), lib.nn.BatchNorm2d(2)),
        lambda: lib.nn.utils.fuse_linear_bn_eval(lib.nn.Linear(1, 2).eval(),
                                                 lib.nn.BatchNorm1d(3).eval()),
        lambda: lib.nn.utils.fuse_linear_bn_eval(
            lib.nn.Linear(1, 2).eval(), lib.nn.BatchNorm1d(3, track_running_stats=False).eval()),
        lambda: lib.nn.utils.fuse_conv_bn_eval(
            lib.nn.Conv2d(1, 2, 1).eval(), lib.nn.BatchNorm2d(2, track_running_stats=False).eval()),
        lambda: lib.nn.utils.fuse_linear_bn_eval(lib.nn.Linear(1, 2), lib.nn.BatchNorm1d(5)),
    ]
    for case in cases:
        with pytest.raises(AssertionError) as info:
            case()
        msgs.append(str(info.value))
    return msgs


def test_fusion_messages():
    assert _messages(fusegrad) == _messages(torch)


def test_module_path():
    import torch.nn.utils.fusion as theirs

    import fusegrad.nn.utils.fusion as ours

    names = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
             "fuse_linear_bn_weights"]
    assert all(getattr(ours, n) is getattr(fusegrad.nn.utils, n) for n in names)
    assert all(hasattr(theirs, n) for n in names)
