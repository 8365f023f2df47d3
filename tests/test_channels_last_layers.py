"""Memory formats of layers against PyTorch: channels-last (and channels_last_3d) inputs and
weights through convolution, normalisation, pooling, upsampling, shuffles and pads.

For each layer, input layout (contiguous, or channels-last laid out anew), weight layout
(convolutions) and shape (including the ambiguous ones: one sample, one channel, a 1x1
image), the checks compare with PyTorch: the output's values, strides and `is_contiguous`
in each format; returned indices; the raw gradients of `autograd.grad` for an output
gradient laid out contiguous and like the output; and `.grad` of the input and the
parameters after `backward()` (PyTorch's gradient layout contract: a leaf's gradient takes
the leaf's strides). Then a small CNN trained a step in channels-last, a model converted
with `Module.to(memory_format=...)`, and the same CNN compiled (inductor and aot_eager),
which must return eager's values and strides.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

SHAPES_2D = [(2, 4, 6, 6), (1, 4, 6, 6), (2, 1, 6, 6), (2, 4, 1, 1), (1, 4, 1, 1),
             (2, 4, 1, 6), (2, 4, 6, 1), (1, 1, 1, 1)]
SHAPES_3D = [(2, 4, 4, 4, 4), (1, 4, 4, 4, 4), (2, 1, 4, 4, 4), (2, 4, 1, 1, 1),
             (2, 4, 1, 4, 4)]
# Contiguous, and laid out anew in the format (`empty(memory_format=...).copy_`). (The third
# way, `.contiguous(memory_format=...)`, gives one of the two: it keeps a tensor that is
# both as it is, and copies others anew; `test_format_conversions_as_torch` checks it.)
LAYOUTS = ["contiguous", "new"]


def _format(lib, ndim: int):
    return lib.channels_last if ndim == 4 else lib.channels_last_3d


def _laid_out(lib, t, layout: str):
    """`t` (contiguous) in `layout` (see LAYOUTS); 4-D and 5-D tensors only."""
    if layout == "contiguous" or t.dim() not in (4, 5):
        return t
    fmt = _format(lib, t.dim())
    if layout == "new":
        return lib.empty(tuple(t.shape), dtype=t.dtype, memory_format=fmt).copy_(t)
    return t.contiguous(memory_format=fmt)


def _module(lib, build, params: dict, weight_layout: str, dtype):
    """`build(lib)` with the parameters of `params` (name -> array) and its 4-D/5-D
    parameters laid out in `weight_layout`; a plain function stays as it is."""
    m = build(lib)
    if not isinstance(m, lib.nn.Module):
        return m, []
    m = m.to(getattr(lib, dtype))
    for name in [n for n, _ in m.named_parameters()]:
        value = lib.tensor(params[name]).to(getattr(lib, dtype))
        value = _laid_out(lib, value, weight_layout)
        owner = m
        *path, leaf = name.split(".")
        for part in path:
            owner = getattr(owner, part)
        setattr(owner, leaf, lib.nn.Parameter(value))
    return m, sorted(m.named_parameters())


def _run(lib, build, x_np, layout, weight_layout, dtype, params, gy_np):
    """Everything the checks compare, as name -> (strides, values, contiguity)."""
    lib.manual_seed(0)
    m, named = _module(lib, build, params, weight_layout, dtype)
    x = _laid_out(lib, lib.tensor(x_np).to(getattr(lib, dtype)), layout).requires_grad_()
    out = m(x)
    ind = None
    if isinstance(out, tuple):
        out, ind = out
    res = {"out": out, "x": x}
    if ind is not None:
        res["indices"] = ind
    gy = lib.tensor(gy_np).to(out.dtype)
    like = lib.empty_like(out).copy_(gy)
    inputs = [x] + [p for _, p in named]
    names = ["input"] + [n for n, _ in named]
    for tag, g in (("contiguous", gy), ("like", like)):
        grads = lib.autograd.grad(out, inputs, g, retain_graph=True, allow_unused=True)
        for n, gr in zip(names, grads):
            if gr is not None:
                res[f"grad {n} ({tag} output grad)"] = gr
    out.backward(like)
    for n, t in zip(names, inputs):
        if t.grad is not None:
            res[f"{n}.grad"] = t.grad
    return {k: _facts(v) for k, v in res.items()}


def _facts(t) -> tuple:
    """(strides, values, contiguous, contiguous in its rank's channels-last format)."""
    lib = torch if isinstance(t, torch.Tensor) else fusegrad
    cl = t.is_contiguous(memory_format=_format(lib, t.dim())) if t.dim() in (4, 5) else None
    return tuple(t.stride()), t.detach().numpy().copy(), t.is_contiguous(), cl


def _compare(build, shape, layout, weight_layout="contiguous", dtype="float32", tol=1e-4):
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal(shape).astype(np.float32)
    probe = build(torch)
    params = {}
    if isinstance(probe, torch.nn.Module):
        params = {n: rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.5
                  for n, p in probe.named_parameters()}
    if isinstance(probe, torch.nn.Module):
        probe = probe.to(getattr(torch, dtype))
    try:
        with torch.no_grad():
            y = probe(torch.tensor(x_np).to(getattr(torch, dtype)))
    except (RuntimeError, ValueError):
        pytest.skip("PyTorch rejects this shape")
    y = y[0] if isinstance(y, tuple) else y
    gy_np = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    want = _run(torch, build, x_np, layout, weight_layout, dtype, params, gy_np)
    got = _run(fusegrad, build, x_np, layout, weight_layout, dtype, params, gy_np)
    problems = []
    for key, (strides, values, contig, cl) in want.items():
        if key not in got:
            problems.append(f"{key}: missing")
            continue
        g_strides, g_values, g_contig, g_cl = got[key]
        if g_strides != strides:
            problems.append(f"{key}: strides {g_strides}, PyTorch's {strides}")
        if (g_contig, g_cl) != (contig, cl):
            problems.append(f"{key}: is_contiguous {g_contig}/{g_cl}, PyTorch's {contig}/{cl}")
        if g_values.shape != values.shape or not np.allclose(
                g_values.astype(np.float64), values.astype(np.float64), rtol=tol, atol=tol):
            problems.append(f"{key}: values differ")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("shape", SHAPES_2D + SHAPES_3D, ids=lambda s: "x".join(map(str, s)))
def test_format_conversions_as_torch(shape):
    """The strides of `contiguous`, `to`, `clone` and `empty_like` in and out of the
    channels-last formats, ambiguous shapes included (a dense tensor's `clone` and
    `empty_like` keep its strides exactly; `to` copies unless the tensor suggests the
    format)."""
    def facts(lib):
        fmt = _format(lib, len(shape))
        x = lib.arange(float(np.prod(shape))).reshape(shape)
        new = lib.empty(shape, memory_format=fmt).copy_(x)
        out = []
        for t in (x, new):
            for f in (fmt, lib.contiguous_format):
                out += [t.contiguous(memory_format=f).stride(), t.to(memory_format=f).stride(),
                        t.clone(memory_format=f).stride()]
            out += [t.clone().stride(), lib.empty_like(t).stride(),
                    lib.zeros_like(t).stride(), t.to(memory_format=fmt) is t]
        return out

    assert facts(fusegrad) == facts(torch)


# ---------------------------------------------------------------- the layers


def _conv_layers(c: int) -> dict:
    """Convolutions with `c` input channels."""
    layers = {
        "conv3x3": lambda t: t.nn.Conv2d(c, 6, 3, padding=1),
        "conv1x1": lambda t: t.nn.Conv2d(c, 6, 1),
        "conv_strided_nobias": lambda t: t.nn.Conv2d(c, 6, 3, stride=2, padding=1,
                                                    bias=False),
        "conv_dilated": lambda t: t.nn.Conv2d(c, 3, 3, padding=2, dilation=2),
        "conv_transpose": lambda t: t.nn.ConvTranspose2d(c, 3, 3, stride=2, padding=1,
                                                         output_padding=1),
        "conv_transpose1x1": lambda t: t.nn.ConvTranspose2d(c, 3, 1),
        "depthwise": lambda t: t.nn.Conv2d(c, c, 3, padding=1, groups=c),
    }
    if c % 2 == 0:
        layers["grouped"] = lambda t: t.nn.Conv2d(c, 6, 3, padding=1, groups=2)
        layers["grouped_transpose"] = lambda t: t.nn.ConvTranspose2d(c, 4, 2, stride=2,
                                                                     groups=2)
    return layers


def _other_layers(c: int) -> dict:
    """The layers besides convolution over `c` channels (2-D)."""
    F = "nn.functional"

    def fn(name, *args, **kwargs):
        def build(t):
            f = t
            for part in (F + "." + name).split("."):
                f = getattr(f, part)
            return lambda x: f(x, *args, **kwargs)
        return build

    layers = {
        "batch_norm": lambda t: t.nn.BatchNorm2d(c),
        "batch_norm_eval": lambda t: t.nn.BatchNorm2d(c).eval(),
        "group_norm": lambda t: t.nn.GroupNorm(2 if c % 2 == 0 else 1, c),
        "instance_norm": lambda t: t.nn.InstanceNorm2d(c, affine=True),
        "layer_norm": lambda t: t.nn.LayerNorm(6),
        "max_pool": fn("max_pool2d", 2),
        "max_pool_indices": fn("max_pool2d", 3, 2, 1, return_indices=True),
        "max_pool_ceil": fn("max_pool2d", 2, ceil_mode=True),
        "avg_pool": fn("avg_pool2d", 2, ceil_mode=True),
        "avg_pool_padded": fn("avg_pool2d", 3, 2, 1, count_include_pad=False),
        "adaptive_avg_pool": fn("adaptive_avg_pool2d", 3),
        "adaptive_avg_pool_1": fn("adaptive_avg_pool2d", 1),
        "adaptive_max_pool": fn("adaptive_max_pool2d", 3, return_indices=True),
        "nearest": fn("interpolate", scale_factor=2),
        "nearest_exact": fn("interpolate", size=(5, 7), mode="nearest-exact"),
        "bilinear": fn("interpolate", scale_factor=2, mode="bilinear"),
        "bilinear_corners": fn("interpolate", size=(5, 7), mode="bilinear",
                               align_corners=True),
        "bicubic": fn("interpolate", scale_factor=2, mode="bicubic"),
        "bilinear_antialias": fn("interpolate", size=(3, 2), mode="bilinear", antialias=True),
        "bicubic_antialias": fn("interpolate", size=(3, 2), mode="bicubic", antialias=True),
        "area": fn("interpolate", size=(3, 3), mode="area"),
        "pad_constant": fn("pad", (1, 2, 0, 1)),
        "pad_reflect": fn("pad", (1, 0, 0, 0), mode="reflect"),
        "pad_replicate": fn("pad", (1, 2, 1, 1), mode="replicate"),
        "pad_circular": fn("pad", (1, 0, 0, 0), mode="circular"),
    }
    if c % 4 == 0:
        layers["pixel_shuffle"] = lambda t: t.nn.PixelShuffle(2)
    if c % 2 == 0:
        layers["channel_shuffle"] = lambda t: t.nn.ChannelShuffle(2)
    layers["pixel_unshuffle"] = fn("pixel_unshuffle", 1)
    return layers


def _cases_2d(layers_of, with_weights: bool):
    for shape in SHAPES_2D:
        for name in layers_of(shape[1]):
            for layout in LAYOUTS:
                for wl in (("contiguous", "new") if with_weights else ("contiguous",)):
                    yield pytest.param(shape, name, layout, wl,
                                       id=f"{name}-{'x'.join(map(str, shape))}-{layout}-w{wl}")


@pytest.mark.parametrize("shape,name,layout,weight_layout",
                         list(_cases_2d(_conv_layers, True)))
def test_conv2d_layouts_as_torch(shape, name, layout, weight_layout):
    """Convolutions compute in channels-last when their input or their weight suggests it;
    output, input and weight gradients are laid out so (float32: oneDNN's rules)."""
    _compare(_conv_layers(shape[1])[name], shape, layout, weight_layout)


@pytest.mark.parametrize("shape,name,layout,weight_layout",
                         [p for p in _cases_2d(_conv_layers, True)
                          if p.values[0] in ((2, 4, 6, 6), (2, 4, 1, 1), (2, 1, 6, 6))])
def test_conv2d_layouts_as_torch_float64(shape, name, layout, weight_layout):
    """float64 convolutions run PyTorch's own kernels (slow_conv2d), whose weight gradients
    keep the weight's strides where the weight is in the format already."""
    _compare(_conv_layers(shape[1])[name], shape, layout, weight_layout, dtype="float64",
             tol=1e-8)


@pytest.mark.parametrize("shape,name,layout,weight_layout", list(_cases_2d(_other_layers, False)))
def test_layer_layouts_as_torch(shape, name, layout, weight_layout):
    """Pooling, upsampling, shuffles, pads and group norm keep the input's format (their
    input gradients: the input's or the output gradient's); batch norm's output follows an
    elementwise kernel's rule; instance and layer norm compute contiguous."""
    _compare(_other_layers(shape[1])[name], shape, layout)


def _layers_3d(c: int) -> dict:
    def fn(name, *args, **kwargs):
        return lambda t: (lambda x: getattr(t.nn.functional, name)(x, *args, **kwargs))

    return {
        "conv3d": lambda t: t.nn.Conv3d(c, 6, 3, padding=1),
        "conv3d_1x1": lambda t: t.nn.Conv3d(c, 6, 1),
        "conv_transpose3d": lambda t: t.nn.ConvTranspose3d(c, 3, 2, stride=2),
        "batch_norm3d": lambda t: t.nn.BatchNorm3d(c),
        "group_norm3d": lambda t: t.nn.GroupNorm(1, c),
        "instance_norm3d": lambda t: t.nn.InstanceNorm3d(c),
        "max_pool3d": fn("max_pool3d", 2, ceil_mode=True, return_indices=True),
        "avg_pool3d": fn("avg_pool3d", 1),
        "adaptive_avg_pool3d": fn("adaptive_avg_pool3d", 2),
        "adaptive_max_pool3d": fn("adaptive_max_pool3d", 2, return_indices=True),
        "nearest3d": fn("interpolate", scale_factor=2),
        "trilinear": fn("interpolate", scale_factor=2, mode="trilinear"),
        "pad_replicate3d": fn("pad", (1, 1, 1, 1, 1, 1), mode="replicate"),
        "pad_constant3d": fn("pad", (1, 1, 1, 1, 1, 1)),
    }


@pytest.mark.parametrize("shape", SHAPES_3D, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", list(_layers_3d(4)))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_3d_layouts_as_torch(shape, name, layout):
    """channels_last_3d: volume convolutions keep it only where PyTorch runs oneDNN; 3-D
    max pooling, upsampling, pads and group norm keep it; 3-D average and adaptive pooling
    compute contiguous."""
    _compare(_layers_3d(shape[1])[name], shape, layout)


@pytest.mark.parametrize("weight_layout", ["contiguous", "new"])
@pytest.mark.parametrize("shape", [(2, 4, 4, 4, 4), (1, 4, 4, 4, 4)])
def test_conv3d_weight_layouts_as_torch(shape, weight_layout):
    for name in ("conv3d", "conv3d_1x1", "conv_transpose3d"):
        _compare(_layers_3d(4)[name], shape, "new", weight_layout)
        _compare(_layers_3d(4)[name], shape, "contiguous", weight_layout)


# ---------------------------------------------------------------- models


def _cnn(t):
    t.manual_seed(0)
    return t.nn.Sequential(
        t.nn.Conv2d(3, 8, 3, padding=1), t.nn.BatchNorm2d(8), t.nn.ReLU(),
        t.nn.MaxPool2d(2), t.nn.Conv2d(8, 8, 3, padding=1, groups=2, bias=False),
        t.nn.BatchNorm2d(8), t.nn.ReLU(), t.nn.Conv2d(8, 4, 1),
        t.nn.AdaptiveAvgPool2d(1), t.nn.Flatten(), t.nn.Linear(4, 3))


def _same_parameters(model, reference) -> None:
    with fusegrad.no_grad():
        for p, q in zip(model.parameters(), reference.parameters()):
            p.copy_(fusegrad.tensor(q.detach().numpy()))


def test_cnn_training_step_in_channels_last_as_torch():
    """A CNN converted to channels-last and fed a channels-last batch: a training step gives
    PyTorch's loss, gradients (values and strides) and updated parameters."""
    rng = np.random.default_rng(1)
    x_np = rng.standard_normal((4, 3, 8, 8)).astype(np.float32)
    y_np = rng.integers(0, 3, 4)
    results = {}
    start = _cnn(torch)
    for lib in (torch, fusegrad):
        model = _cnn(lib)
        if lib is fusegrad:
            _same_parameters(model, start)
        else:
            model.load_state_dict(start.state_dict())
        model = model.to(memory_format=lib.channels_last)
        opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x = lib.tensor(x_np).contiguous(memory_format=lib.channels_last)
        feats = model[:8](x)
        loss = lib.nn.functional.cross_entropy(model[8:](feats), lib.tensor(y_np))
        loss.backward()
        grads = [(tuple(p.grad.stride()), p.grad.numpy().copy()) for p in model.parameters()]
        opt.step()
        results[lib] = (model, loss.item(), tuple(feats.stride()), grads,
                        [(tuple(p.stride()), p.detach().numpy().copy())
                         for p in model.parameters()])
    want, got = results[torch], results[fusegrad]
    assert got[1] == pytest.approx(want[1], rel=1e-5)
    assert got[2] == want[2]
    for (gs, gv), (ws, wv) in zip(got[3], want[3]):
        assert gs == ws
        np.testing.assert_allclose(gv, wv, rtol=1e-4, atol=1e-5)
    for (gs, gv), (ws, wv) in zip(got[4], want[4]):
        assert gs == ws
        np.testing.assert_allclose(gv, wv, rtol=1e-4, atol=1e-5)


def test_module_to_channels_last_weights_decide_as_torch():
    """`model.to(memory_format=channels_last)` with a contiguous input: the convolution
    follows its weight (1x1 kernels too: their weights are laid out anew), and the layers
    after it follow the convolution."""
    rng = np.random.default_rng(2)
    x_np = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    facts = {}
    for lib in (torch, fusegrad):
        lib.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.Conv2d(3, 4, 1), lib.nn.BatchNorm2d(4),
                                  lib.nn.MaxPool2d(2), lib.nn.Conv2d(4, 2, 3))
        if lib is fusegrad:  # (PyTorch's parameters, before any step)
            _same_parameters(model, facts[torch][0])
        model = model.to(memory_format=lib.channels_last)
        x = lib.tensor(x_np).requires_grad_()
        outs = []
        h = x
        for layer in model:
            h = layer(h)
            outs.append(tuple(h.stride()))
        h.sum().backward()
        facts[lib] = (model, [tuple(p.stride()) for p in model.parameters()], outs,
                      [tuple(p.grad.stride()) for p in model.parameters()],
                      tuple(x.grad.stride()), h.detach().numpy())
    for i in (1, 2, 3, 4):
        assert facts[fusegrad][i] == facts[torch][i]
    np.testing.assert_allclose(facts[fusegrad][5], facts[torch][5], rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- compiled


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_compiled_channels_last_cnn_as_eager(backend):
    """A compiled channels-last CNN returns eager's values and strides, forward and
    backward (the compiler reads the layers' layouts from their metas)."""
    fusegrad._dynamo.reset()
    rng = np.random.default_rng(3)
    x_np = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)

    def run(compiled: bool):
        model = _cnn(fusegrad).to(memory_format=fusegrad.channels_last)
        body = model[:8]
        fn = fusegrad.compile(body, backend=backend) if compiled else body
        x = fusegrad.tensor(x_np).contiguous(memory_format=fusegrad.channels_last)
        x.requires_grad_()
        out = fn(x)
        (out * out).sum().backward()
        return out, x.grad, [p.grad for p in body.parameters()]

    e_out, e_gx, e_grads = run(False)
    c_out, c_gx, c_grads = run(True)
    assert tuple(c_out.stride()) == tuple(e_out.stride())
    assert c_out.is_contiguous(memory_format=fusegrad.channels_last)
    np.testing.assert_allclose(c_out.detach().numpy(), e_out.detach().numpy(), rtol=1e-4,
                               atol=1e-5)
    assert tuple(c_gx.stride()) == tuple(e_gx.stride())
    np.testing.assert_allclose(c_gx.numpy(), e_gx.numpy(), rtol=1e-4, atol=1e-5)
    for c, e in zip(c_grads, e_grads):
        assert tuple(c.stride()) == tuple(e.stride())
        np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=1e-4, atol=1e-5)
