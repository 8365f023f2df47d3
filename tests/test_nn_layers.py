"""Layers against torch.nn: same weights, same outputs, gradients, node names and ten
optimizer steps."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_nn_support import close, compare_modules, node, sync, to_fg

import fusegrad
import fusegrad.nn as fnn
import fusegrad.nn.functional as F


def data(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def both(name, *args, **kwargs):
    """(torch module, fusegrad module) of the same class and arguments."""
    return getattr(torch.nn, name)(*args, **kwargs), getattr(fnn, name)(*args, **kwargs)


# ---------------------------------------------------------------- linear


@pytest.mark.parametrize("shape,bias", [((4, 3), True), ((2, 5, 3), True), ((4, 3), False),
                                        ((3,), True), ((2, 2, 3), False)])
def test_linear(shape, bias):
    th, fg = both("Linear", 3, 2, bias=bias)
    compare_modules(th, fg, data(*shape), optimizer=("SGD", {"lr": 0.1, "momentum": 0.9}))


def test_linear_records_addmm():
    th, fg = both("Linear", 3, 2)
    sync(th, fg)
    y = fg(fusegrad.randn(4, 3, requires_grad=True))
    assert node(y) == "AddmmBackward0"
    names = [type(n).__name__ for n, _ in y.grad_fn.next_functions]
    assert names == ["AccumulateGrad", "AccumulateGrad", "TBackward0"]
    assert node(fg(fusegrad.randn(2, 4, 3))) == "ViewBackward0"


def test_linear_shape_error():
    th, fg = both("Linear", 3, 2)
    for mod, T in ((th, torch), (fg, fusegrad)):
        with pytest.raises(RuntimeError) as e:
            mod(T.ones(4, 5))
        msgs = getattr(test_linear_shape_error, "msgs", [])
        msgs.append(str(e.value))
        test_linear_shape_error.msgs = msgs
    assert test_linear_shape_error.msgs[0] == test_linear_shape_error.msgs[1]


def test_linear_default_init_bounds():
    fg = fnn.Linear(50, 20)
    w = fg.weight.detach().numpy()
    bound = 1 / np.sqrt(50)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert np.abs(fg.bias.detach().numpy()).max() <= bound
    assert fg.weight.requires_grad and isinstance(fg.weight, fnn.Parameter)


def test_identity_flatten_unflatten():
    compare_modules(*both("Flatten"), data(2, 3, 4, 5), steps=0)
    compare_modules(*both("Flatten", 0, 1), data(2, 3, 4), steps=0)
    compare_modules(*both("Unflatten", 1, (2, 3)), data(4, 6), steps=0)
    compare_modules(*both("Identity", 3, foo=1), data(4, 6), steps=0, check_node=False)


# ---------------------------------------------------------------- convolution


@pytest.mark.parametrize("kwargs,shape", [
    (dict(in_channels=3, out_channels=4, kernel_size=3), (2, 3, 7, 6)),
    (dict(in_channels=3, out_channels=4, kernel_size=(3, 2), stride=2, padding=1), (2, 3, 8, 7)),
    (dict(in_channels=4, out_channels=6, kernel_size=3, groups=2, dilation=2, bias=False),
     (1, 4, 9, 9)),
    (dict(in_channels=2, out_channels=3, kernel_size=3, padding="same"), (2, 2, 5, 5)),
    (dict(in_channels=2, out_channels=3, kernel_size=4, padding="same"), (1, 2, 6, 6)),
    (dict(in_channels=2, out_channels=3, kernel_size=3, padding="valid"), (1, 2, 6, 6)),
    (dict(in_channels=3, out_channels=2, kernel_size=3, padding=1), (3, 5, 5)),
    (dict(in_channels=4, out_channels=4, kernel_size=3, groups=4, stride=(1, 2)), (2, 4, 6, 7)),
])
def test_conv2d(kwargs, shape):
    th, fg = both("Conv2d", **kwargs)
    out, _ = compare_modules(th, fg, data(*shape), atol=1e-5, step_atol=2e-4,
                             optimizer=("SGD", {"lr": 0.01, "momentum": 0.9}),
                             check_node=kwargs.get("padding") != "same" or
                             kwargs["kernel_size"] % 2 == 1)


@pytest.mark.parametrize("kwargs,shape", [
    (dict(in_channels=3, out_channels=4, kernel_size=3), (2, 3, 9)),
    (dict(in_channels=2, out_channels=4, kernel_size=2, stride=2, padding=1, dilation=2),
     (2, 2, 10)),
    (dict(in_channels=4, out_channels=2, kernel_size=3, groups=2, padding="same"), (1, 4, 7)),
    (dict(in_channels=3, out_channels=2, kernel_size=3, bias=False), (3, 8)),
])
def test_conv1d(kwargs, shape):
    th, fg = both("Conv1d", **kwargs)
    compare_modules(th, fg, data(*shape), optimizer=("SGD", {"lr": 0.01}), step_atol=2e-4)


def test_conv_node_and_repr():
    th, fg = both("Conv2d", 3, 4, 3, stride=2, padding=1, bias=False)
    assert repr(fg) == repr(th)
    sync(th, fg)
    y = fg(fusegrad.randn(1, 3, 5, 5, requires_grad=True))
    assert node(y) == "ConvolutionBackward0"
    assert repr(fnn.Conv1d(2, 3, 4, padding="same")) == repr(torch.nn.Conv1d(2, 3, 4,
                                                                             padding="same"))
    assert repr(fnn.Conv2d(4, 4, 3, groups=2, dilation=2)) == repr(
        torch.nn.Conv2d(4, 4, 3, groups=2, dilation=2))


def test_conv_errors():
    th, fg = both("Conv2d", 3, 4, 3)
    for mod, T in ((th, torch), (fg, fusegrad)):
        with pytest.raises(RuntimeError) as e:
            mod(T.ones(1, 2, 5, 5))
        assert "Given groups=1, weight of size [4, 3, 3, 3], expected input[1, 2, 5, 5] to " \
               "have 3 channels, but got 2 channels instead" in str(e.value)
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        fnn.Conv2d(3, 4, 3, groups=2)


def test_conv_double_backward():
    xs, ws = data(1, 2, 5, 5, dtype=np.float64), data(3, 2, 3, 3, seed=1, dtype=np.float64)
    res = []
    for T, Fn in ((fusegrad, F), (torch, torch.nn.functional)):
        x = T.tensor(xs, requires_grad=True)
        w = T.tensor(ws, requires_grad=True)
        y = Fn.conv2d(x, w, stride=2, padding=1)
        gx, gw = T.autograd.grad((y * y).sum(), [x, w], create_graph=True)
        (gx.sum() + (gw * gw).sum()).backward()
        res.append((x.grad, w.grad))
    close(res[0][0], res[1][0], 1e-9, 1e-9)
    close(res[0][1], res[1][1], 1e-9, 1e-9)


# ---------------------------------------------------------------- pooling


@pytest.mark.parametrize("args,kwargs,shape", [
    ((2,), {}, (2, 3, 6, 6)),
    ((3,), dict(stride=2, padding=1), (2, 3, 7, 7)),
    (((2, 3),), dict(stride=(1, 2), dilation=(2, 1)), (1, 2, 7, 8)),
    ((3,), dict(stride=2, ceil_mode=True), (1, 2, 8, 8)),
    ((2,), {}, (3, 6, 6)),
])
def test_max_pool2d(args, kwargs, shape):
    th, fg = both("MaxPool2d", *args, **kwargs)
    x = np.random.default_rng(1).permutation(np.prod(shape)).reshape(shape).astype(np.float32)
    compare_modules(th, fg, x)
    assert repr(fg) == repr(th)


def test_max_pool_indices_and_node():
    x = data(1, 2, 6, 6)
    o_t, i_t = torch.nn.functional.max_pool2d(torch.tensor(x, requires_grad=True), 3, 2, 1,
                                              return_indices=True)
    o_f, i_f = F.max_pool2d(fusegrad.tensor(x, requires_grad=True), 3, 2, 1,
                            return_indices=True)
    close(i_f, i_t)
    assert node(o_f) == "MaxPool2DWithIndicesBackward0"


@pytest.mark.parametrize("args,kwargs,shape", [
    ((2,), {}, (2, 3, 6, 6)),
    ((3,), dict(stride=2, padding=1), (2, 3, 7, 7)),
    ((3,), dict(stride=2, padding=1, count_include_pad=False), (1, 2, 7, 6)),
    ((3,), dict(stride=2, ceil_mode=True), (1, 2, 8, 8)),
    ((3,), dict(stride=2, padding=1, ceil_mode=True, count_include_pad=False), (1, 2, 8, 8)),
    ((2,), dict(divisor_override=3), (1, 2, 4, 4)),
])
def test_avg_pool2d(args, kwargs, shape):
    th, fg = both("AvgPool2d", *args, **kwargs)
    compare_modules(th, fg, data(*shape))


@pytest.mark.parametrize("size,shape", [((1, 1), (2, 3, 5, 7)), ((3, 2), (2, 3, 7, 5)),
                                        (4, (1, 2, 6, 9)), ((None, 2), (1, 2, 5, 6))])
def test_adaptive_avg_pool2d(size, shape):
    th, fg = both("AdaptiveAvgPool2d", size)
    compare_modules(th, fg, data(*shape))
    assert repr(fg) == repr(th)


def test_pool1d():
    compare_modules(*both("MaxPool1d", 3, 2, 1), data(2, 3, 9))
    compare_modules(*both("AvgPool1d", 2), data(2, 3, 8))
    compare_modules(*both("AdaptiveAvgPool1d", 3), data(2, 3, 8), check_node=False)


# ---------------------------------------------------------------- normalisation


@pytest.mark.parametrize("name,shape,kwargs", [
    ("BatchNorm1d", (8, 3), {}), ("BatchNorm1d", (4, 3, 5), dict(momentum=None)),
    ("BatchNorm2d", (4, 3, 5, 5), {}), ("BatchNorm2d", (2, 3, 4, 4), dict(affine=False)),
    ("BatchNorm2d", (2, 3, 4, 4), dict(track_running_stats=False)),
    ("BatchNorm1d", (6, 4), dict(bias=False)),
])
def test_batch_norm_train_and_eval(name, shape, kwargs):
    th, fg = both(name, shape[1], **kwargs)
    compare_modules(th, fg, data(*shape), optimizer=("SGD", {"lr": 0.1}), atol=1e-5)
    assert repr(fg) == repr(th)
    th.eval()
    fg.eval()
    compare_modules(th, fg, data(*shape, seed=3), optimizer=("SGD", {"lr": 0.1}), atol=1e-5)


def test_batch_norm_node_and_errors():
    th, fg = both("BatchNorm2d", 3)
    y = fg(fusegrad.randn(2, 3, 4, 4, requires_grad=True))
    assert node(y) == "NativeBatchNormBackward0"
    assert len(y.grad_fn.next_functions) == 3
    assert fg.num_batches_tracked.item() == 1
    for mod, T in ((th, torch), (fg, fusegrad)):
        with pytest.raises(ValueError, match="expected 4D input"):
            mod(T.ones(2, 3))
    for mod, T in ((both("BatchNorm1d", 3)[0], torch), (both("BatchNorm1d", 3)[1], fusegrad)):
        with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
            mod(T.ones(1, 3))


@pytest.mark.parametrize("ns,shape,kwargs", [(4, (3, 4), {}), ((3, 4), (2, 3, 4), {}),
                                             (5, (2, 5), dict(elementwise_affine=False)),
                                             (4, (2, 3, 4), dict(bias=False))])
def test_layer_norm(ns, shape, kwargs):
    th, fg = both("LayerNorm", ns, **kwargs)
    with torch.no_grad():
        for p in th.parameters():
            p.add_(torch.randn(p.shape) * 0.3)
    compare_modules(th, fg, data(*shape), optimizer=("Adam", {"lr": 0.01}))
    assert repr(fg) == repr(th)


# ---------------------------------------------------------------- dropout and embedding


def test_dropout():
    fg = fnn.Dropout(0.3)
    x = fusegrad.ones(200, 100, requires_grad=True)
    y = fg(x)
    assert node(y) == "MulBackward0"
    vals = np.unique(y.detach().numpy())
    np.testing.assert_allclose(vals, [0.0, 1 / 0.7], rtol=1e-6)
    assert abs((y.detach().numpy() == 0).mean() - 0.3) < 0.02
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.detach().numpy())
    fg.eval()
    assert fg(x) is x
    assert repr(fg) == repr(torch.nn.Dropout(0.3))
    assert F.dropout(x, 0.0) is x
    assert not F.dropout(x, 1.0).detach().numpy().any()
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        fnn.Dropout(1.5)


@pytest.mark.parametrize("kwargs", [{}, dict(padding_idx=1), dict(scale_grad_by_freq=True)])
def test_embedding(kwargs):
    th, fg = both("Embedding", 6, 3, **kwargs)
    idx = np.array([[0, 1, 1], [5, 2, 1]])
    compare_modules(th, fg, idx, optimizer=("SGD", {"lr": 0.1, "momentum": 0.5}))
    assert repr(fg) == repr(th)
    y = fg(fusegrad.tensor(idx))
    assert node(y) == "EmbeddingBackward0"


def test_embedding_errors_and_pretrained():
    fg = fnn.Embedding(4, 2)
    with pytest.raises(IndexError, match="index out of range in self"):
        fg(fusegrad.tensor([4]))
    w = fusegrad.randn(3, 2)
    e = fnn.Embedding.from_pretrained(w)
    assert not e.weight.requires_grad
    np.testing.assert_array_equal(e(fusegrad.tensor([2])).numpy(), w.numpy()[2:3])


# ---------------------------------------------------------------- activations


@pytest.mark.parametrize("name,args", [
    ("ReLU", ()), ("Sigmoid", ()), ("Tanh", ()), ("Softmax", (1,)), ("LogSoftmax", (1,)),
    ("GELU", ()), ("GELU", ("tanh",)), ("SiLU", ()), ("LeakyReLU", (0.2,)), ("ELU", ()),
    ("Hardtanh", (-0.5, 0.7)), ("ReLU6", ()), ("Softplus", (2.0, 1.0)), ("Softmax", (0,)),
])
def test_activation(name, args):
    th, fg = both(name, *args)
    x = data(4, 5) * 3
    compare_modules(th, fg, x)
    assert repr(fg) == repr(th)


def test_relu_inplace_module():
    th, fg = both("ReLU", inplace=True)
    assert repr(fg) == repr(th)
    x = fusegrad.randn(3, 4)
    y = fg(x)
    assert y is x and (x.numpy() >= 0).all()


def test_functional_softmax_default_dim():
    x = data(2, 3)
    for d in (None, 0):
        close(F.softmax(fusegrad.tensor(x), d),
              torch.nn.functional.softmax(torch.tensor(x), d if d is not None else 1))


def test_pad():
    x = data(2, 3, 4)
    for pad in ([1, 2], [0, 1, 2, 0], [1, 1, 1, 1, 1, 1], [-1, 1]):
        close(F.pad(fusegrad.tensor(x), pad, value=0.5),
              torch.nn.functional.pad(torch.tensor(x), pad, value=0.5))


def test_one_hot():
    t = np.array([0, 2, 1])
    close(F.one_hot(fusegrad.tensor(t)), torch.nn.functional.one_hot(torch.tensor(t)))
    close(F.one_hot(fusegrad.tensor(t), 5), torch.nn.functional.one_hot(torch.tensor(t), 5))


def test_to_fg_helper():
    assert isinstance(to_fg(torch.ones(2)), fusegrad.Tensor)


@pytest.mark.parametrize("name,args,kwargs", [
    ("BatchNorm2d", (3,), dict(affine=False)), ("BatchNorm2d", (3,), dict(bias=False)),
    ("LayerNorm", (4,), dict(elementwise_affine=False)), ("LayerNorm", (4,), dict(bias=False)),
    ("Conv2d", (3, 2, 1), dict(bias=False)), ("Linear", (4, 2), dict(bias=False)),
])
def test_next_functions_with_absent_optional_inputs(name, args, kwargs):
    th, fg = both(name, *args, **kwargs)
    x = data(2, 3, 4, 4)
    edges = []
    for mod, T in ((th, torch), (fg, fusegrad)):
        y = mod(T.tensor(x, requires_grad=True))
        edges.append([(None if n is None else type(n).__name__, k)
                      for n, k in y.grad_fn.next_functions])
    assert edges[1] == edges[0]


def test_layers_under_fake_mode_record_the_same_graph():
    def net(nn):
        return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                             nn.MaxPool2d(2), nn.AvgPool2d(2, padding=1, count_include_pad=False),
                             nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(16, 3),
                             nn.LayerNorm(3), nn.Dropout(0.0))

    real, fake_net = net(fnn), net(fnn)
    x = fusegrad.randn(2, 3, 8, 8)
    target = fusegrad.tensor([0, 2])
    loss = F.cross_entropy(real(x), target)
    with fusegrad._subclasses.FakeTensorMode():
        fx = fusegrad.randn(2, 3, 8, 8)
        floss = F.cross_entropy(fake_net(fx), fusegrad.zeros(2, dtype=fusegrad.int64))
        assert isinstance(floss, fusegrad._subclasses.FakeTensor)
        floss.backward()
        assert tuple(fake_net[0].weight.grad.shape) == (4, 3, 3, 3)
    from oracle import graph_signature

    assert graph_signature(floss.grad_fn) == graph_signature(loss.grad_fn)


@pytest.mark.parametrize("name,kwargs,shape", [
    ("ConvTranspose2d", dict(in_channels=3, out_channels=4, kernel_size=3), (2, 3, 4, 5)),
    ("ConvTranspose2d", dict(in_channels=4, out_channels=6, kernel_size=(3, 2), stride=2,
                             padding=1, output_padding=1, groups=2, dilation=(1, 2)),
     (1, 4, 4, 3)),
    ("ConvTranspose2d", dict(in_channels=2, out_channels=3, kernel_size=2, stride=2,
                             bias=False), (2, 5, 5)),
    ("ConvTranspose1d", dict(in_channels=3, out_channels=2, kernel_size=4, stride=2,
                             padding=1), (2, 3, 6)),
])
def test_conv_transpose(name, kwargs, shape):
    th, fg = both(name, **kwargs)
    compare_modules(th, fg, data(*shape), optimizer=("SGD", {"lr": 0.01, "momentum": 0.9}),
                    step_atol=2e-4)
    assert repr(fg) == repr(th)


def test_conv_transpose_output_size():
    th, fg = both("ConvTranspose2d", 2, 2, 3, stride=2, padding=1)
    sync(th, fg)
    x = data(1, 2, 4, 4)
    out_t = th(torch.tensor(x), output_size=[8, 8])
    close(fg(fusegrad.tensor(x), output_size=[8, 8]), out_t)


@pytest.mark.parametrize("make,input_dtype", [
    (lambda nn: nn.Linear(3, 2).double(), "float32"),
    (lambda nn: nn.Linear(3, 2), "float64"),
    (lambda nn: nn.Linear(3, 2, bias=False).double(), "float32"),
    (lambda nn: nn.Conv2d(3, 2, 1).double(), "float32"),
    (lambda nn: nn.Conv2d(3, 2, 1, bias=False), "float64"),
    (lambda nn: nn.BatchNorm1d(3).double(), "float32"),
    (lambda nn: nn.BatchNorm1d(3), "float64"),
    (lambda nn: nn.LayerNorm(3), "float64"),
])
def test_mixed_dtype_errors_match(make, input_dtype):
    msgs = []
    for nn, T in ((torch.nn, torch), (fnn, fusegrad)):
        shape = (1, 3, 2, 2) if "Conv" in repr(make(nn)) else (2, 3)
        with pytest.raises(RuntimeError) as e:
            make(nn)(T.ones(shape, dtype=getattr(T, input_dtype)))
        msgs.append(str(e.value))
    assert msgs[1] == msgs[0]
