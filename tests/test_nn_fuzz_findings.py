"""Regressions found by differential fuzzing of nn.functional and nn modules against torch:
each test runs torch and fusegrad on the same inputs and compares values, gradients, node
names or errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_nn_support import close, node, sync

import fusegrad as fg


def data(*shape, seed=0, lo=None, hi=None):
    rng = np.random.default_rng(seed)
    if lo is not None:
        return rng.uniform(lo, hi, shape).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


def raised(fn):
    """(type name, message) of what `fn()` raises (None when it returns)."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - any error is compared with torch's
        return type(e).__name__, str(e)
    return None


def same_error(make):
    """`make(T)` raises the same error type and message in torch and fusegrad."""
    theirs = raised(lambda: make(torch))
    assert theirs is not None
    assert raised(lambda: make(fg)) == theirs


# ---------------------------------------------------------------- losses


@pytest.mark.parametrize("fn, arg", [
    ("binary_cross_entropy", "weight"),
    ("binary_cross_entropy_with_logits", "weight"),
    ("binary_cross_entropy_with_logits", "pos_weight"),
])
def test_bce_weights_that_require_grad_are_refused(fn, arg):
    x, t, w = data(4, lo=0.1, hi=0.9), data(4, seed=1, lo=0, hi=1), data(4, seed=2, lo=0, hi=2)

    def make(T):
        kw = {arg: T.tensor(w, requires_grad=True)}
        return getattr(T.nn.functional, fn)(T.tensor(x, requires_grad=True), T.tensor(t), **kw)

    same_error(make)
    # (no error without grad mode)
    with fg.no_grad():
        make(fg)


def test_bce_target_gradient_is_unclamped():
    """The target's gradient is -logit(input): infinite where the input is 0 or 1."""
    x = np.array([0.0, 1e-44, 0.3, 1.0], np.float32)
    t = np.array([0.3, 0.3, 0.6, 0.3], np.float32)
    grads = []
    for T in (torch, fg):
        xt, tt = T.tensor(x, requires_grad=True), T.tensor(t, requires_grad=True)
        T.nn.functional.binary_cross_entropy(xt, tt, reduction="sum").backward()
        grads.append(tt.grad)
    close(grads[1], grads[0], 1e-4, 1e-5, "target grad")


@pytest.mark.parametrize("target", [[2], [1, 2], [-100]])
@pytest.mark.parametrize("fn", ["nll_loss", "cross_entropy"])
def test_one_sample_with_a_one_element_target(fn, target):
    """A 1-D input (one sample) takes a 1-D class-index target of one element."""
    x, w = data(3), np.array([1.0, 2.0, 3.0], np.float32)
    for reduction in ("mean", "none"):
        def make(T, reduction=reduction):
            return getattr(T.nn.functional, fn)(T.tensor(x), T.tensor(target), T.tensor(w),
                                                reduction=reduction)

        err = raised(lambda: make(torch))
        if err is not None:
            assert raised(lambda: make(fg)) == err
        else:
            close(make(fg), make(torch), 1e-6, 1e-6, fn)


def test_adaptive_log_softmax_nodes():
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6], div_value=2.0, head_bias=True)
    fm = fg.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6], div_value=2.0, head_bias=True)
    sync(tm, fm)
    x, t = data(5, 8), np.array([0, 4, 9, 3, 7])
    outs = []
    for T, m in ((torch, tm), (fg, fm)):
        xt = T.tensor(x, requires_grad=True)
        out = m(xt, T.tensor(t))
        full = m.log_prob(xt)
        (out.output.sum() + out.loss + full.sum()).backward()
        outs.append((out.output, out.loss, full, xt.grad))
    for a, b, what in zip(outs[1], outs[0], ("output", "loss", "log_prob", "grad")):
        close(a, b, 1e-5, 1e-5, what)
    for a, b in zip(outs[1][:3], outs[0][:3]):
        assert node(a) == node(b)


# ---------------------------------------------------------------- layers


def test_fractional_max_pool3d_checks_time_width_height():
    for size, out in [((7, 6, 5), 4), ((7, 6, 7), 4), ((5, 5, 5), (3, 4, 3))]:
        same_error(lambda T, size=size, out=out: T.nn.functional.fractional_max_pool3d(
            T.rand(1, 1, *size), 3 if out == 4 else 2, output_size=out))


def test_cross_map_lrn2d_node():
    tm, fm = torch.nn.CrossMapLRN2d(3), fg.nn.CrossMapLRN2d(3)
    x = data(2, 6, 3, 2)
    res = []
    for T, m in ((torch, tm), (fg, fm)):
        xt = T.tensor(x, requires_grad=True)
        y = m(xt)
        y.backward(T.ones_like(y))
        res.append((y, xt.grad))
    close(res[1][0], res[0][0], 1e-6, 1e-5, "value")
    # (loosely: PyTorch's legacy backward is not quite the derivative)
    close(res[1][1], res[0][1], 1e-3, 1e-3, "grad")
    assert node(res[1][0]) == node(res[0][0]) == "CrossMapLRN2dBackward"
    # (PyTorch's legacy backward is off for a large alpha; fusegrad's is the derivative)
    m = fg.nn.CrossMapLRN2d(4, alpha=0.5, beta=0.75, k=1.0)
    x = fg.tensor(data(1, 5, 2, 2).astype(np.float64), requires_grad=True)
    assert fg.autograd.gradcheck(m, (x,))
    assert fg.autograd.gradgradcheck(m, (x,))


@pytest.mark.parametrize("xs, ws, pad", [((5, 2, 3), (3, 3, 4), -1), ((3, 2, 3), (3, 3, 4), -2),
                                         ((2, 2, 3), (3, 3, 4), 0)])
def test_conv_tbc_pads_and_errors(xs, ws, pad):
    x, w, b = data(*xs), data(*ws, seed=1), data(ws[2], seed=2)

    def make(T):
        args = [T.tensor(a, requires_grad=True) for a in (x, w, b)]
        return T.conv_tbc(*args, pad), args

    err = raised(lambda: make(torch))
    if err is not None:
        assert raised(lambda: make(fg)) == err
        return
    (yt, at), (yf, af) = make(torch), make(fg)
    close(yf, yt, 1e-5, 1e-5, "value")
    assert yf.is_contiguous() and yt.is_contiguous()
    g = data(*yt.shape, seed=3)
    yt.backward(torch.tensor(g))
    yf.backward(fg.tensor(g))
    for a, b in zip(af, at):
        close(a.grad, b.grad, 1e-4, 1e-4, "grad")


@pytest.mark.parametrize("args", [((5, 2, 3), (3, 2, 4), (4,)), ((5, 2, 3), (3, 3, 4), (5,))])
def test_conv_tbc_shape_errors(args):
    same_error(lambda T: T.conv_tbc(*(T.rand(*s) for s in args), 0))


# ---------------------------------------------------------------- modules and activations


@pytest.mark.parametrize("make", [
    lambda nn: nn.GRU(4, 3, proj_size=2), lambda nn: nn.GRU(4, 3, proj_size=0),
    lambda nn: nn.RNN(4, 3, proj_size=0), lambda nn: nn.GRU(4, 3, foo=1),
])
def test_rnn_and_gru_arguments(make):
    same_error(lambda T: make(T.nn))


def test_rnn_and_gru_positional_arguments():
    """RNN's fourth positional argument is the nonlinearity; GRU's eighth is proj_size."""
    for make in (lambda nn: nn.RNN(4, 3, 2, "relu", False, True, 0.0, True),
                 lambda nn: nn.GRU(4, 3, 2, True, False, 0.0, False, 0)):
        tm, fm = make(torch.nn), make(fg.nn)
        assert repr(fm) == repr(tm)
        assert [(n, tuple(p.shape)) for n, p in fm.named_parameters()] == \
            [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    assert fg.nn.RNN(4, 3, 2, "relu").nonlinearity == "relu"


def test_in_place_leaky_relu_with_a_negative_slope_has_no_backward():
    def make(T):
        x = T.rand(3, requires_grad=True)
        y = x * 1
        T.nn.functional.leaky_relu_(y, -0.5)
        y.sum().backward()

    same_error(make)
    x = fg.rand(3, requires_grad=True)
    y = x * 1
    fg.nn.functional.leaky_relu(y, 0.0, inplace=True).sum().backward()  # (zero slope: fine)


@pytest.mark.parametrize("kernel", [(2,), [2]])
def test_lp_pool1d_takes_a_number_as_kernel(kernel):
    """PyTorch scales by the kernel size itself: a tuple or list fails in the product."""
    same_error(lambda T: T.nn.functional.lp_pool1d(T.ones(1, 2, 4), 2, kernel))


def test_unpad_sequence_transposes_in_place():
    """Time-major input is transposed in place (the caller's tensor changes; a leaf that
    requires grad is refused)."""
    x = data(4, 3, 2)
    lengths = [4, 2, 1]
    res = []
    for T in (torch, fg):
        xt = T.tensor(x)
        parts = T.nn.utils.rnn.unpad_sequence(xt, T.tensor(lengths))
        res.append((tuple(xt.shape), parts))
    assert res[1][0] == res[0][0] == (3, 4, 2)
    for a, b in zip(res[1][1], res[0][1]):
        close(a, b, 0, 0, "part")
    same_error(lambda T: T.nn.utils.rnn.unpad_sequence(
        T.zeros(4, 3, 2, requires_grad=True), T.tensor(lengths)))


def test_attention_mask_type_warning_comes_before_the_attention_mask_error():
    """A boolean padding mask with an integer attention mask: the mismatch warning, then
    the attention mask's type error."""
    import warnings

    res = []
    for T in (torch, fg):
        m = T.nn.MultiheadAttention(8, 2)
        q = T.rand(4, 3, 8)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            err = raised(lambda T=T, m=m, q=q: m(
                q, q, q, attn_mask=T.triu(T.ones(4, 4, dtype=T.int64), 1),
                key_padding_mask=T.zeros(3, 4, dtype=T.bool)))
        res.append((err, [str(w.message) for w in caught]))
    assert res[1] == res[0]
    assert res[0][1]


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_gradient_reaches_the_input_in_a_double_backward(mode):
    """The pad's gradient node saves the input (so a second gradient of a gradient that
    does not depend on it is zero, not an error); its saved names are PyTorch's."""
    x = data(1, 2, 4, 4).astype(np.float64)
    res = []
    for T in (torch, fg):
        xt = T.tensor(x, requires_grad=True)
        y = T.nn.functional.pad(xt, (1, 2, 1, 0), mode=mode)
        assert tuple(y.grad_fn._saved_padding) == (1, 2, 1, 0)
        g, = T.autograd.grad(y.sum(), xt, create_graph=True)
        g2, = T.autograd.grad((g * g).sum(), xt)
        res.append((node(g), g, g2))
    assert res[1][0] == res[0][0]
    close(res[1][1], res[0][1], 1e-12, 0, "grad")
    close(res[1][2], res[0][2], 1e-12, 0, "second grad")


@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_of_an_empty_batch_keeps_its_running_stats(affine):
    res = []
    for T in (torch, fg):
        m = T.nn.BatchNorm2d(3, affine=affine)
        x = T.zeros(0, 3, 2, 2, requires_grad=True)
        y = m(x)
        y.sum().backward()
        res.append((node(y), tuple(y.shape), m.running_mean, m.running_var,
                    int(m.num_batches_tracked), None if not affine else m.weight.grad))
    assert res[1][:2] == res[0][:2]
    assert res[1][4] == res[0][4]
    for a, b in zip(res[1][2:4] + res[1][5:], res[0][2:4] + res[0][5:]):
        if b is not None:
            close(a, b, 0, 0, "stats")


@pytest.mark.parametrize("shape", [(0, 3, 4), (2, 3, 0)])
@pytest.mark.parametrize("affine", [True, False])
def test_instance_norm_of_empty_input(shape, affine):
    def make(T):
        m = T.nn.InstanceNorm1d(3, affine=affine, track_running_stats=True)
        y = m(T.zeros(*shape, requires_grad=True))
        return node(y), tuple(y.shape), m.running_mean.tolist(), m.running_var.tolist()

    err = raised(lambda: make(torch))
    if err is not None:
        assert raised(lambda: make(fg)) == err
    else:
        assert str(make(fg)) == str(make(torch))  # (NaN statistics compare as text)


@pytest.mark.parametrize("shapes", [((), (4, 3)), ((3,), ()), ((), ())])
def test_linear_refuses_zero_dim_arguments(shapes):
    same_error(lambda T: T.nn.functional.linear(T.rand(shapes[0]), T.rand(shapes[1])))


@pytest.mark.parametrize("mode, dims", [("nearest", 2), ("bilinear", 2), ("bicubic", 2),
                                        ("nearest", 3), ("bilinear", 3)])
def test_grid_sample_infinite_coordinates(mode, dims):
    """With zeros or reflection padding an infinite coordinate reads as a NaN one does."""
    shape = (1, 2, 4, 5) if dims == 2 else (1, 2, 2, 4, 5)
    x = data(*shape)
    pts = [[np.inf, 0.3, 0.1], [-0.2, -np.inf, 0.4], [0.5, 0.2, np.inf], [0.1, -0.6, 0.2]]
    grid = np.array([p[:dims] for p in pts], np.float32).reshape((1,) * dims + (4, dims))
    for padding_mode in ("zeros", "reflection", "border"):
        for ac in (False, True):
            outs = [T.nn.functional.grid_sample(T.tensor(x), T.tensor(grid), mode=mode,
                                                padding_mode=padding_mode, align_corners=ac)
                    for T in (torch, fg)]
            close(outs[1], outs[0], 1e-5, 1e-5, f"{padding_mode} align_corners={ac}")


def test_embedding_bag_of_empty_rows():
    """A 2-D input of empty rows: the offsets' arange steps by zero."""
    same_error(lambda T: T.nn.functional.embedding_bag(T.zeros(1, 0, dtype=T.int64),
                                                       T.rand(6, 4)))


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("fn", ["nll_loss", "cross_entropy"])
def test_empty_batch_of_maps(fn, reduction):
    """An empty batch of K-dim maps (the positions are counted, not inferred)."""
    x = np.zeros((0, 4, 3), np.float32)
    outs = []
    for T in (torch, fg):
        xt = T.tensor(x, requires_grad=True)
        y = getattr(T.nn.functional, fn)(xt, T.zeros(0, 3, dtype=T.int64),
                                         reduction=reduction)
        y.sum().backward()
        outs.append((y, xt.grad))
    close(outs[1][0], outs[0][0], 0, 0, "loss")
    close(outs[1][1], outs[0][1], 0, 0, "grad")


@pytest.mark.parametrize("loss", ["binary_cross_entropy", "binary_cross_entropy_with_logits",
                                  "smooth_l1_loss", "huber_loss", "soft_margin_loss"])
def test_mean_of_an_empty_loss_is_nan_without_warning(loss):
    import warnings

    vals = []
    for T in (torch, fg):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            vals.append(getattr(T.nn.functional, loss)(T.zeros(0, 3), T.zeros(0, 3)))
    close(vals[1], vals[0], 0, 0, loss)


def test_cross_entropy_with_probabilities_of_an_empty_batch():
    res = []
    for T in (torch, fg):
        y = T.nn.functional.cross_entropy(T.zeros(0, 2, requires_grad=True), T.zeros(0, 2),
                                          T.ones(2))
        res.append((node(y), float(y.detach())))
    assert str(res[1]) == str(res[0])
