"""F.pad, the padding layers, F.interpolate / nn.Upsample and GroupNorm against PyTorch:
values, input and weight gradients, backward node names (the whole graph for circular
padding), second derivatives, and the error messages, in float32 and float64."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import fusegrad
import fusegrad.nn as fnn
import fusegrad.nn.functional as F

DTYPES = [np.float32, np.float64]
IDS = ["float32", "float64"]


def _tol(dtype) -> float:
    return 2e-5 if dtype == np.float32 else 1e-10


def _close(a, b, tol, what: str) -> None:
    x = np.asarray(a.detach().numpy(), dtype=np.float64)
    y = b.detach().double().numpy()
    assert x.shape == y.shape, f"{what}: shape {x.shape} != {y.shape}"
    np.testing.assert_allclose(x, y, rtol=tol, atol=tol, err_msg=what)


def _graph(fn) -> list:
    """The node names of a backward graph, depth first (AccumulateGrad leaves included)."""
    out = []

    def walk(node, depth):
        if node is None:
            out.append((depth, None))
            return
        out.append((depth, type(node).__name__))
        for child, _ in node.next_functions:
            walk(child, depth + 1)

    walk(fn, 0)
    return out


def run_both(fn_t, fn_f, arrays, dtype, seed=1, graph=False):
    """fn(*tensors) in torch and fusegrad from the same data: values, node names, and the
    gradients of every input for a random cotangent must agree."""
    arrays = [np.asarray(a, dtype=dtype) for a in arrays]
    th = [torch.tensor(a, requires_grad=True) for a in arrays]
    fg = [fusegrad.tensor(a, requires_grad=True) for a in arrays]
    out_t, out_f = fn_t(*th), fn_f(*fg)
    tol = _tol(dtype)
    _close(out_f, out_t, tol, "value")
    assert type(out_f.grad_fn).__name__ == type(out_t.grad_fn).__name__
    if graph:
        assert _graph(out_f.grad_fn) == _graph(out_t.grad_fn)
    cot = np.random.default_rng(seed).standard_normal(tuple(out_t.shape)).astype(dtype)
    out_t.backward(torch.tensor(cot))
    out_f.backward(fusegrad.tensor(cot))
    for i, (a, b) in enumerate(zip(fg, th)):
        _close(a.grad, b.grad, tol * 10, f"grad {i}")
    return out_f, out_t


def same_error(fn_t, fn_f):
    """Both raise the same exception type with the same message."""
    with pytest.raises(Exception) as th:
        fn_t()
    with pytest.raises(type(th.value)) as fg:
        fn_f()
    assert str(fg.value) == str(th.value)


def data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# ---------------------------------------------------------------- F.pad

PAD_CASES = {
    1: [((2, 3, 6), (1, 2)), ((3, 5), (2, 0)), ((2, 2, 6), (-1, 3)), ((1, 3, 5), (3, -1))],
    2: [((2, 3, 4, 5), (1, 2, 3, 1)), ((3, 4, 5), (0, 2, 1, 0)), ((1, 2, 5, 6), (-1, 2, 2, -2))],
    3: [((1, 2, 3, 4, 5), (1, 2, 2, 1, 1, 2)), ((2, 4, 3, 5), (2, 1, 0, 2, 2, 0)),
        ((1, 1, 4, 3, 4), (-1, 2, 1, -1, 3, 1))],
}
NODES = {"reflect": "ReflectionPad{}DBackward0", "replicate": "ReplicationPad{}DBackward0",
         "circular": "CopySlices", "constant": "ConstantPadNdBackward0"}


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_pad_modes(k, mode, dtype):
    for shape, pad in PAD_CASES[k]:
        out, _ = run_both(lambda x, pad=pad: TF.pad(x, pad, mode=mode),
                          lambda x, pad=pad: F.pad(x, pad, mode=mode), [data(*shape)], dtype,
                          graph=True)
        assert type(out.grad_fn).__name__ == NODES[mode].format(k)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_pad_constant_value_and_crop(dtype):
    for shape, pad, value in [((2, 3, 4), (1, 1, 2, 0), 2.5), ((2, 3, 4, 5), (1,) * 8, -1.0),
                              ((3, 6), (-2, -3), None), ((2, 5), (-2, -3, 1, 0), 0.5),
                              ((4,), (0, 0), None)]:
        run_both(lambda x, pad=pad, value=value: TF.pad(x, pad, value=value),
                 lambda x, pad=pad, value=value: F.pad(x, pad, value=value), [data(*shape)],
                 dtype)


def test_pad_integer_tensor_value_cast():
    t = torch.tensor([1, 2, 3])
    f = fusegrad.tensor([1, 2, 3])
    assert F.pad(f, (1, 1), value=2.7).tolist() == TF.pad(t, (1, 1), value=2.7).tolist()
    assert F.pad(f, (1, 1), value=2.7).dtype == fusegrad.int64


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_unbatched_and_empty_batch(mode):
    for shape, pad in [((4, 5), (1, 2)), ((3, 4, 5), (1, 1, 2, 1)), ((0, 3, 4), (1, 1))]:
        x = data(*shape)
        _close(F.pad(fusegrad.tensor(x), pad, mode=mode),
               TF.pad(torch.tensor(x), pad, mode=mode), 0, f"{shape} {pad}")


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate"])
def test_pad_double_backward(mode):
    x = data(2, 3, 4, 5)
    pad = (1, 2, 2, 1)
    xt = torch.tensor(x, requires_grad=True)
    xf = fusegrad.tensor(x, requires_grad=True)
    gt = torch.tensor(data(2, 3, 7, 8, seed=3), requires_grad=True)
    gf = fusegrad.tensor(data(2, 3, 7, 8, seed=3), requires_grad=True)
    (dt,) = torch.autograd.grad(TF.pad(xt, pad, mode=mode), xt, gt, create_graph=True)
    (df,) = fusegrad.autograd.grad(F.pad(xf, pad, mode=mode), xf, gf, create_graph=True)
    _close(df, dt, 1e-10, "grad")
    assert type(df.grad_fn).__name__ == type(dt.grad_fn).__name__
    w = data(2, 3, 4, 5, seed=4)
    (dt * torch.tensor(w)).sum().backward()
    (df * fusegrad.tensor(w)).sum().backward()
    _close(gf.grad, gt.grad, 1e-10, "second order")


def test_pad_gradcheck():
    for mode in ("reflect", "replicate", "circular", "constant"):
        x = fusegrad.tensor(data(1, 2, 4, 5), requires_grad=True)
        pad = (2, 1, -1, 3) if mode in ("constant", "replicate") else (2, 1, 1, 3)
        assert fusegrad.autograd.gradcheck(lambda t, m=mode, p=pad: F.pad(t, p, mode=m), (x,))
        assert fusegrad.autograd.gradgradcheck(
            lambda t, m=mode: F.pad(t, (1, 2, 2, 0), mode=m), (x,))


PAD_ERRORS = [
    ((2, 3, 4, 5), (1,), "constant", None), ((2, 3, 4, 5), (1,) * 10, "constant", None),
    ((2, 3, 4, 5), (1, 2), "reflect", None), ((2, 3, 4, 5), (1, 2), "circular", None),
    ((3, 4, 5), (1,) * 6, "replicate", None), ((5,), (1, 1), "reflect", None),
    ((2, 3, 4, 5), (5, 1, 1, 1), "reflect", None), ((3, 4, 5), (1, 5), "reflect", None),
    ((1, 2, 3, 4, 5), (1, 1, 1, 1, 3, 1), "reflect", None),
    ((2, 3, 4, 5), (6, 1, 1, 1), "circular", None),
    ((2, 3, 4, 5), (-5, -1, 1, 1), "circular", None), ((2, 3, 4), (1, 1), "foo", None),
    ((2, 3, 4), (1, 1), "reflect", 1.0), ((2, 3, 4), (1, 1), "circular", 2.0),
    ((2, 3, 4, 5), (-3, -3), "constant", None), ((3, 4, 5), (-3, -3), "replicate", None),
    ((2, 3, 4, 5), (-3, -3, 0, 0), "replicate", None), ((2, 0, 3), (1, 1), "reflect", None),
    ((), (1, 1), "constant", None),
]


@pytest.mark.parametrize("shape,pad,mode,value", PAD_ERRORS)
def test_pad_errors(shape, pad, mode, value):
    x = data(*shape) if shape else np.array(1.0)
    same_error(lambda: TF.pad(torch.tensor(x), pad, mode=mode, value=value),
               lambda: F.pad(fusegrad.tensor(x), pad, mode=mode, value=value))


def test_pad_reflect_zero_value_allowed():
    x = data(2, 3, 4)
    _close(F.pad(fusegrad.tensor(x), (1, 1), mode="reflect", value=0.0),
           TF.pad(torch.tensor(x), (1, 1), mode="reflect", value=0.0), 0, "value=0")


# ---------------------------------------------------------------- padding layers

PAD_MODULES = [
    ("ZeroPad1d", (2,), (2, 3, 5)), ("ZeroPad1d", ((1, 3),), (3, 4)),
    ("ZeroPad2d", ((1, 2, 0, 3),), (2, 3, 4, 5)), ("ZeroPad3d", (1,), (1, 2, 3, 4, 5)),
    ("ConstantPad1d", ((1, 2), 3.5), (2, 3, 4)), ("ConstantPad2d", (1, 0), (2, 2, 3, 3)),
    ("ConstantPad3d", (2, -1.0), (1, 1, 2, 3, 2)), ("ReflectionPad1d", (2,), (2, 3, 5)),
    ("ReflectionPad2d", ((1, 1, 2, 0),), (2, 3, 4, 5)), ("ReflectionPad3d", (1,), (1, 2, 3, 4, 5)),
    ("ReplicationPad1d", ((0, 3),), (3, 4)), ("ReplicationPad2d", (1,), (2, 3, 4, 5)),
    ("ReplicationPad3d", ((1, 0, 2, 1, 0, 1),), (2, 3, 4, 5)),
    ("CircularPad1d", (1,), (2, 3, 4)), ("CircularPad2d", ((1, 2, 0, 1),), (3, 4, 5)),
    ("CircularPad3d", (1,), (1, 2, 3, 4, 5)),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("name,args,shape", PAD_MODULES)
def test_padding_modules(name, args, shape, dtype):
    th, fg = getattr(torch.nn, name)(*args), getattr(fnn, name)(*args)
    assert repr(fg) == repr(th)
    assert fg.padding == th.padding
    assert getattr(fg, "value", None) == getattr(th, "value", None)
    run_both(th, fg, [data(*shape)], dtype, graph=True)


def test_padding_modules_in_nn_namespace():
    for name, _, _ in PAD_MODULES:
        assert name in fnn.__all__
    seq_t = torch.nn.Sequential(torch.nn.ReflectionPad2d(1), torch.nn.ZeroPad2d((1, 0, 0, 1)))
    seq_f = fnn.Sequential(fnn.ReflectionPad2d(1), fnn.ZeroPad2d((1, 0, 0, 1)))
    assert repr(seq_f) == repr(seq_t)


def test_circular_module_rank_error():
    for cls, shape in (("CircularPad1d", (5,)), ("CircularPad2d", (2, 3)),
                       ("CircularPad3d", (1, 2, 3, 4, 5, 6))):
        x = data(*shape)
        same_error(lambda c=cls, x=x: getattr(torch.nn, c)(1)(torch.tensor(x)),
                   lambda c=cls, x=x: getattr(fnn, c)(1)(fusegrad.tensor(x)))


# ---------------------------------------------------------------- interpolate

INTERP_NODES = {
    ("nearest", 3): "UpsampleNearest1DBackward0", ("nearest", 4): "UpsampleNearest2DBackward0",
    ("nearest", 5): "UpsampleNearest3DBackward0",
    ("nearest-exact", 3): "UpsampleNearestExact1DBackward0",
    ("nearest-exact", 4): "UpsampleNearestExact2DBackward0",
    ("nearest-exact", 5): "UpsampleNearestExact3DBackward0",
    ("linear", 3): "UpsampleLinear1DBackward0", ("bilinear", 4): "UpsampleBilinear2DBackward0",
    ("bicubic", 4): "UpsampleBicubic2DBackward0",
    ("trilinear", 5): "UpsampleTrilinear3DBackward0",
}
SHAPES = {3: (2, 3, 5), 4: (2, 3, 4, 5), 5: (1, 2, 3, 4, 5)}
SIZE_ARGS = [
    dict(scale_factor=2), dict(scale_factor=3.0), dict(scale_factor=1.7),
    dict(scale_factor=0.6), dict(scale_factor=2.5, recompute_scale_factor=True),
    dict(size=7), dict(size=2), dict(per_dim_scale=(1.5, 0.75, 2.2)),
    dict(per_dim_size=(6, 3, 9)), dict(scale_factor=1.3),
    # Sizes doubled under a scale of 2.1: PyTorch's nearest backward (and its 2-D forward)
    # then ignore the scale; its 1-D and 3-D forwards do not.
    dict(scale_factor=2.1),
]


def _interp_kwargs(kw: dict, nd: int) -> dict:
    kw = dict(kw)
    if "per_dim_scale" in kw:
        kw["scale_factor"] = kw.pop("per_dim_scale")[:nd - 2]
    if "per_dim_size" in kw:
        kw["size"] = kw.pop("per_dim_size")[:nd - 2]
    return kw


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("size_args", SIZE_ARGS, ids=str)
@pytest.mark.parametrize("mode,nd,align", [
    (m, nd, None) for m in ("nearest", "nearest-exact") for nd in (3, 4, 5)] + [
    (m, nd, a) for m, nd in (("linear", 3), ("bilinear", 4), ("bicubic", 4), ("trilinear", 5))
    for a in (False, True)])
def test_interpolate_modes(mode, nd, align, size_args, dtype):
    kw = dict(_interp_kwargs(size_args, nd), mode=mode)
    if align is not None:
        kw["align_corners"] = align
    out, _ = run_both(lambda x: TF.interpolate(x, **kw), lambda x: F.interpolate(x, **kw),
                      [data(*SHAPES[nd])], dtype)
    assert type(out.grad_fn).__name__ == INTERP_NODES[(mode, nd)]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_interpolate_area(dtype):
    for shape, kw in [((2, 3, 7), dict(size=3)), ((2, 3, 6, 5), dict(size=(4, 2))),
                      ((1, 2, 6, 6), dict(scale_factor=0.5))]:
        run_both(lambda x, kw=kw: TF.interpolate(x, mode="area", **kw),
                 lambda x, kw=kw: F.interpolate(x, mode="area", **kw), [data(*shape)], dtype)


def test_interpolate_bigger_sweep():
    """Many sizes and scales: the sampled positions agree exactly (float32 arithmetic)."""
    rng = np.random.default_rng(7)
    for mode, nd in (("nearest", 4), ("nearest-exact", 3), ("bilinear", 4), ("bicubic", 4),
                     ("nearest", 3), ("linear", 3)):
        for _ in range(12):
            shape = (1, 2) + tuple(int(v) for v in rng.integers(1, 9, nd - 2))
            scale = float(rng.choice([0.3, 0.55, 1.0, 1.25, 1.5, 2.0, 2.7, 3.0, 4.0]))
            kw = dict(scale_factor=scale, mode=mode)
            if mode in ("bilinear", "bicubic", "linear"):
                kw["align_corners"] = bool(rng.integers(2))
            x = data(*shape).astype(np.float32)
            try:
                want = TF.interpolate(torch.tensor(x), **kw)
            except RuntimeError:  # an output size of 0
                continue
            _close(F.interpolate(fusegrad.tensor(x), **kw), want, 1e-5, str((shape, kw)))


@pytest.mark.parametrize("mode,nd", [("nearest", 4), ("bilinear", 4), ("bicubic", 4),
                                     ("nearest-exact", 3), ("trilinear", 5)])
def test_interpolate_double_backward(mode, nd):
    shape = SHAPES[nd]
    kw = dict(scale_factor=1.5, mode=mode)
    x = data(*shape)
    xt = torch.tensor(x, requires_grad=True)
    xf = fusegrad.tensor(x, requires_grad=True)
    yt = TF.interpolate(xt, **kw)
    yf = F.interpolate(xf, **kw)
    g = data(*yt.shape, seed=2)
    gt = torch.tensor(g, requires_grad=True)
    gf = fusegrad.tensor(g, requires_grad=True)
    (dt,) = torch.autograd.grad(yt, xt, gt, create_graph=True)
    (df,) = fusegrad.autograd.grad(yf, xf, gf, create_graph=True)
    assert type(df.grad_fn).__name__ == type(dt.grad_fn).__name__
    w = data(*shape, seed=5)
    (dt * torch.tensor(w)).sum().backward()
    (df * fusegrad.tensor(w)).sum().backward()
    _close(gf.grad, gt.grad, 1e-10, "second order")


def test_interpolate_gradcheck():
    x = fusegrad.tensor(data(1, 2, 3, 4), requires_grad=True)
    for mode in ("bilinear", "bicubic", "nearest"):
        assert fusegrad.autograd.gradcheck(
            lambda t, m=mode: F.interpolate(t, scale_factor=1.7, mode=m), (x,))
        assert fusegrad.autograd.gradgradcheck(
            lambda t, m=mode: F.interpolate(t, size=(5, 3), mode=m), (x,))


INTERP_ERRORS = [
    ((2, 3, 4, 5), dict(size=(8,))), ((2, 3, 4, 5), dict(scale_factor=(2, 2, 2))),
    ((2, 3, 4, 5), dict()), ((2, 3, 4, 5), dict(size=8, scale_factor=2)),
    ((2, 3, 4, 5), dict(size=8, mode="linear")), ((2, 3, 4, 5), dict(size=8, mode="trilinear")),
    ((2, 3, 4, 5), dict(size=8, align_corners=True)), ((2, 3, 4, 5), dict(size=8, mode="foo")),
    ((2, 3, 4, 5), dict(size=8, mode="area", align_corners=False)),
    ((2, 3, 4, 5), dict(size=8, antialias=True)),
    ((2, 3, 4, 5), dict(size=8, recompute_scale_factor=True)),
    ((2, 3, 4, 5), dict(size=[8.5, 3])), ((3, 4), dict(size=3)),
    ((2, 3, 4), dict(size=3, mode="bilinear")), ((2, 3, 4, 5, 6), dict(size=3, mode="bicubic")),
    ((2, 3, 4, 5, 6), dict(size=3, mode="bilinear")), ((2, 3, 4, 5), dict(size=0)),
    ((2, 3, 4), dict(scale_factor=0.1)), ((2, 3, 4), dict(scale_factor=0.1, mode="linear")),
    ((2, 0, 4), dict(size=3)),
]


@pytest.mark.parametrize("shape,kw", INTERP_ERRORS, ids=str)
def test_interpolate_errors(shape, kw):
    x = data(*shape)
    same_error(lambda: TF.interpolate(torch.tensor(x), **kw),
               lambda: F.interpolate(fusegrad.tensor(x), **kw))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("kwargs", [dict(scale_factor=2), dict(size=(6, 3), mode="bilinear"),
                                    dict(scale_factor=1.5, mode="bicubic", align_corners=True),
                                    dict(scale_factor=(2.0, 1.5), mode="nearest-exact")],
                         ids=str)
def test_upsample_module(kwargs, dtype):
    th, fg = torch.nn.Upsample(**kwargs), fnn.Upsample(**kwargs)
    assert repr(fg) == repr(th)
    run_both(th, fg, [data(2, 2, 3, 4)], dtype)


# ---------------------------------------------------------------- GroupNorm


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("groups,channels,shape", [(2, 4, (3, 4, 5)), (3, 6, (2, 6, 2, 3)),
                                                   (1, 3, (2, 3)), (4, 4, (2, 4, 3, 2, 2))])
def test_group_norm_module(groups, channels, shape, affine, dtype):
    th = torch.nn.GroupNorm(groups, channels, affine=affine).to(
        torch.float32 if dtype == np.float32 else torch.float64)
    fg = fnn.GroupNorm(groups, channels, affine=affine,
                       dtype=fusegrad.float32 if dtype == np.float32 else fusegrad.float64)
    assert repr(fg) == repr(th)
    x = data(*shape)
    if affine:
        w, b = data(channels, seed=1), data(channels, seed=2)
        run_both(lambda x, w, b: TF.group_norm(x, groups, w, b),
                 lambda x, w, b: F.group_norm(x, groups, w, b), [x, w, b], dtype, graph=True)
        return
    out, _ = run_both(th, fg, [x], dtype, graph=True)
    assert type(out.grad_fn).__name__ == "NativeGroupNormBackward0"


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_group_norm_weight_only_bias_only(dtype):
    x, w = data(2, 6, 5), data(6, seed=1)
    run_both(lambda x, w: TF.group_norm(x, 3, w), lambda x, w: F.group_norm(x, 3, w),
             [x, w], dtype, graph=True)
    # A bias without a weight: PyTorch's backward of that case fails ("tensor does not have
    # a device"), so the gradients are compared with a weight of ones, which is the same.
    ones = torch.ones(6, dtype=torch.float32 if dtype == np.float32 else torch.float64)
    out, _ = run_both(lambda x, b: TF.group_norm(x, 2, ones, b, 1e-3),
                      lambda x, b: F.group_norm(x, 2, None, b, 1e-3), [x, w], dtype)
    xt = torch.tensor(x.astype(dtype), requires_grad=True)
    bt = torch.tensor(w.astype(dtype), requires_grad=True)
    want = TF.group_norm(xt, 2, None, bt, 1e-3)
    _close(out, want, _tol(dtype), "bias only")
    assert _graph(out.grad_fn) == _graph(want.grad_fn)


def test_group_norm_non_contiguous_input():
    x = data(4, 6, 5)
    run_both(lambda x: TF.group_norm(x.transpose(0, 2), 1),
             lambda x: F.group_norm(x.transpose(0, 2), 1), [x], np.float64, graph=True)


def test_group_norm_gradcheck_and_double_backward():
    x = fusegrad.tensor(data(2, 4, 3), requires_grad=True)
    w = fusegrad.tensor(data(4, seed=1), requires_grad=True)
    b = fusegrad.tensor(data(4, seed=2), requires_grad=True)
    assert fusegrad.autograd.gradcheck(lambda x, w, b: F.group_norm(x, 2, w, b), (x, w, b))
    assert fusegrad.autograd.gradgradcheck(lambda x, w, b: F.group_norm(x, 2, w, b),
                                           (x, w, b))


@pytest.mark.parametrize("shape,groups,weight", [
    ((2, 3, 4), 2, None), ((3,), 1, None), ((1, 2), 2, None), ((1, 2, 1), 2, None),
    ((2, 3, 4), 3, (4,)), ((2, 3, 4), 3, (3, 1))])
def test_group_norm_errors(shape, groups, weight):
    x = data(*shape)
    wt = None if weight is None else torch.ones(weight, dtype=torch.float64)
    wf = None if weight is None else fusegrad.ones(weight, dtype=fusegrad.float64)
    same_error(lambda: TF.group_norm(torch.tensor(x), groups, wt),
               lambda: F.group_norm(fusegrad.tensor(x), groups, wf))


# ---------------------------------------------------------------- dtypes


@pytest.mark.parametrize("name", ["float16", "bfloat16", "uint8", "int64", "int32", "bool"])
def test_dtypes(name):
    """Half types compute in float32 and round; uint8 takes nearest modes; the rest raise
    PyTorch's "not implemented for" errors."""
    rng = np.random.default_rng(0)
    cases = [(lambda T, t: T.nn.functional.pad(t, (1, 2), value=1), (2, 3, 4)),
             (lambda T, t: T.nn.functional.pad(t, (1, 2), mode="circular"), (2, 3, 4)),
             (lambda T, t: T.nn.functional.interpolate(t, scale_factor=1.5), (1, 2, 3, 4)),
             (lambda T, t: T.nn.functional.interpolate(t, scale_factor=1.5, mode="nearest-exact"),
              (1, 2, 3)),
             (lambda T, t: T.nn.functional.interpolate(t, size=(4, 5, 2)), (1, 1, 3, 3, 3)),
             (lambda T, t: T.nn.functional.interpolate(t, size=7, mode="linear"), (1, 2, 3)),
             (lambda T, t: T.nn.functional.group_norm(t, 2), (2, 4, 3))]
    if name in ("float16", "bfloat16"):
        cases += [(lambda T, t: T.nn.functional.interpolate(t, scale_factor=1.5,
                                                            mode="bilinear"), (1, 2, 3, 4)),
                  (lambda T, t: T.nn.functional.pad(t, (1, 2), mode="reflect"), (2, 3, 4))]
    for fn, shape in cases:
        x = rng.integers(0, 5, shape).astype(np.float64)
        make_t = torch.tensor(x).to(getattr(torch, name))
        make_f = fusegrad.tensor(x).to(getattr(fusegrad, name))
        try:
            want = fn(torch, make_t)
        except Exception as err:  # noqa: BLE001 - the same error is expected
            with pytest.raises(type(err)) as got:
                fn(fusegrad, make_f)
            assert str(got.value) == str(err)
            continue
        got = fn(fusegrad, make_f)
        assert str(got.dtype) == str(want.dtype)
        # (bfloat16 interpolation may differ by one unit in the last place.)
        np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=1e-2,
                                   atol=1e-2)
