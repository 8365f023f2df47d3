"""Parity with PyTorch of interpolate's antialiasing, embedding_bag's offsets, ctc_loss,
optimizer state loading and tensor learning rates, and a few nn crashes and messages."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

LIBS = (torch, fusegrad)


def _np(x):
    if isinstance(x, (list, tuple)):
        return [_np(v) for v in x]
    return x.detach().numpy() if hasattr(x, "detach") else x


def _both(fn):
    """fn(lib) for PyTorch and fusegrad: (results, or exceptions as (type name, text))."""
    out = []
    for lib in LIBS:
        try:
            out.append(_np(fn(lib)))
        except Exception as e:  # noqa: BLE001 (the errors are compared)
            out.append((type(e).__name__, str(e)))
    return out


def _same(fn, rtol=1e-5, atol=1e-6):
    a, b = _both(fn)
    if isinstance(a, tuple) or isinstance(b, tuple):
        assert a == b
        return
    for x, y in zip(a if isinstance(a, list) else [a], b if isinstance(b, list) else [b]):
        np.testing.assert_allclose(np.asarray(y, np.float64), np.asarray(x, np.float64),
                                   rtol=rtol, atol=atol)


# ---------------------------------------------------------------- interpolate antialias


@pytest.mark.parametrize("case", [
    ((7, 3), dict(scale_factor=(2.2, 1.1))), ((5, 5), dict(scale_factor=(1.1, 2.2))),
    ((5, 1), dict(size=(3, 1))), ((9, 2), dict(size=(13, 1))), ((5, 5), dict(size=(3, 1))),
    ((5, 1), dict(size=(7, 1))), ((1, 5), dict(size=(1, 3))), ((4, 6), dict(size=(2, 5)))])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align", [False, True])
def test_antialias_unchanged_and_width_one(case, mode, align):
    shape, kw = case
    x = np.random.RandomState(0).randn(2, 2, *shape).astype(np.float32)

    def fn(lib):
        xx = lib.tensor(x, requires_grad=True)
        y = lib.nn.functional.interpolate(xx, mode=mode, align_corners=align, antialias=True,
                                          **kw)
        y.backward(lib.arange(float(y.numel())).reshape(y.shape))
        return [y, xx.grad]

    _same(fn, 1e-4, 1e-4)


def test_antialias_width_one_channels_last():
    x = np.random.RandomState(1).randn(1, 3, 5, 1).astype(np.float32)
    _same(lambda lib: lib.nn.functional.interpolate(
        lib.tensor(x).contiguous(memory_format=lib.channels_last), size=(3, 1),
        mode="bilinear", antialias=True))


def test_area_5d():
    x = np.random.RandomState(0).randn(2, 3, 5, 6, 7).astype(np.float32)

    def fn(lib):
        xx = lib.tensor(x, requires_grad=True)
        y = lib.nn.functional.interpolate(xx, size=(3, 4, 2), mode="area")
        (y * y).sum().backward()
        return [y, xx.grad]

    _same(fn)


# ---------------------------------------------------------------- embedding_bag offsets


@pytest.mark.parametrize("offsets", [[1], [0, 4], [0, 2, 1, 5], [-1], [0, 3]])
@pytest.mark.parametrize("last", [False, True])
def test_embedding_bag_offsets(offsets, last):
    _same(lambda lib: lib.nn.functional.embedding_bag(
        lib.tensor([1, 2, 3]), lib.ones(10, 2), lib.tensor(offsets), mode="sum",
        include_last_offset=last))


# ---------------------------------------------------------------- ctc_loss

_LP = np.random.RandomState(0).randn(6, 3, 5)


@pytest.mark.parametrize("targets,il,tl,blank", [
    ([[1, 2], [0, 0], [3, 4]], [6, 6, 6], [2, 0, 2], 0),
    ([1, 2, 3, 4], [6, 0, 6], [2, 0, 2], 0),
    ([[0, 1, 0], [1, 0, 0], [0, 0, 2]], [6, 6, 6], [3, 3, 3], 0),
    ([[2, 1, 2], [1, 2, 1], [3, 2, 3]], [6, 5, 6], [3, 3, 2], 2),
    ([[1, 2], [1, 2], [3, 4]], [6, 6, 6], [2, 3, 2], 0),
    ([1, 2, 3, 4], [6, 6, 6], [2, 1, 2], 0),
    ([[1, 2]] * 3, [6, 6, 6], [2, 2, 2], 5),
    ([[1, 2]] * 3, [6, 7, 6], [2, 2, 2], 0),
    ([[1, 2]] * 3, [6, -1, 6], [2, 1, 2], 0),
    ([[1, 2]] * 3, [6, 6, 6], [2, -1, 2], 0)])
def test_ctc(targets, il, tl, blank):
    def fn(lib):
        x = lib.tensor(_LP, requires_grad=True)
        loss = lib.nn.functional.ctc_loss(x.log_softmax(2), lib.tensor(targets), il, tl,
                                          blank=blank, reduction="none")
        loss.sum().backward()
        return [loss, x.grad]

    _same(fn, 1e-6, 1e-8)


# ---------------------------------------------------------------- optimizers

_NAMES = ["SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "ASGD", "NAdam", "RAdam",
          "RMSprop", "Rprop", "SparseAdam", "LBFGS", "Adafactor"]


@pytest.mark.parametrize("name", _NAMES)
def test_load_state_dict_missing_options(name):
    def fn(lib):
        o = getattr(lib.optim, name)([lib.nn.Parameter(lib.ones(2))])
        o.load_state_dict({"state": {}, "param_groups": [{"params": [0]}]})
        return repr(sorted((k, v) for k, v in o.param_groups[0].items() if k != "params"))

    a, b = _both(fn)
    assert a == b


@pytest.mark.parametrize("name,drop,kw", [
    ("Adam", ["amsgrad", "decoupled_weight_decay"], dict(amsgrad=True)),
    ("AdamW", ["amsgrad", "maximize"], dict(amsgrad=True, maximize=True)),
    ("SGD", ["nesterov", "fused"], dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("RMSprop", ["momentum", "centered"], dict(momentum=0.5, centered=True)),
    ("NAdam", ["decoupled_weight_decay"], dict(decoupled_weight_decay=True, weight_decay=.1))])
def test_load_older_state_dict_then_step(name, drop, kw):
    def fn(lib):
        w = lib.nn.Parameter(lib.tensor([1., -2., 3.]))
        o = getattr(lib.optim, name)([w], **kw)
        w.grad = lib.tensor([.1, .2, -.3])
        o.step()
        sd = o.state_dict()
        for k in drop:
            sd["param_groups"][0].pop(k)
        w2 = lib.nn.Parameter(lib.tensor([1., -2., 3.]))
        o2 = getattr(lib.optim, name)([w2], **kw)
        o2.load_state_dict(sd)
        for i in range(3):
            w2.grad = lib.tensor([.1, .2, -.3]) * (i + 1)
            o2.step()
        return w2

    _same(fn)


@pytest.mark.parametrize("name", _NAMES)
@pytest.mark.parametrize("foreach", [None, True])
def test_tensor_lr(name, foreach):
    def fn(lib):
        warnings.simplefilter("ignore")
        w = lib.nn.Parameter(lib.tensor([1., -2., 3.]))
        lr = lib.tensor(0.01)
        kw = {} if name in ("SparseAdam", "LBFGS") else {"foreach": foreach}
        o = getattr(lib.optim, name)([w], lr=lr, **kw)
        assert o.param_groups[0]["lr"] is lr
        for i in range(2):
            if name == "LBFGS":
                def closure():
                    o.zero_grad()
                    loss = (w ** 2).sum()
                    loss.backward()
                    return loss
                o.step(closure)
            else:
                w.grad = lib.tensor([.1, .2, -.3]) * (i + 1)
                if name == "SparseAdam":
                    w.grad = w.grad.to_sparse()
                o.step()
        assert o.state_dict()["param_groups"][0]["lr"] is lr
        return w

    _same(fn, 1e-5, 1e-6)


def test_tensor_lr_schedulers_update_in_place():
    def fn(lib):
        w = lib.nn.Parameter(lib.ones(2))
        lr = lib.tensor(0.1)
        o = lib.optim.SGD([w], lr=lr)
        s = lib.optim.lr_scheduler.StepLR(o, 1, 0.5)
        o.step()
        s.step()
        assert o.param_groups[0]["lr"] is lr
        r = [lr.clone(), o.param_groups[0]["initial_lr"].clone()]
        o2 = lib.optim.SGD([w], lr=lib.tensor(0.1))
        s2 = lib.optim.lr_scheduler.ReduceLROnPlateau(o2, patience=0)
        s2.step(1.0)
        s2.step(2.0)
        return r + [o2.param_groups[0]["lr"]]

    _same(fn)


# ---------------------------------------------------------------- nn crashes and messages


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("how", ["weight_norm", "prune", "parametrization"])
def test_rnn_reparametrized_weights(kind, how):
    import torch.nn.utils.prune  # noqa: F401  (fusegrad's is imported with nn.utils)

    def fn(lib):
        warnings.simplefilter("ignore")
        m = getattr(lib.nn, kind)(2, 3, num_layers=2, bidirectional=True)
        rs = np.random.RandomState(0)
        with lib.no_grad():
            for p in m.parameters():
                p.copy_(lib.tensor(rs.randn(*p.shape).astype(np.float32)))
        if how == "weight_norm":
            lib.nn.utils.weight_norm(m, "weight_hh_l0")
        elif how == "prune":
            lib.nn.utils.prune.l1_unstructured(m, "weight_ih_l0", 0.5)
        else:
            lib.nn.utils.parametrizations.weight_norm(m, "weight_ih_l1_reverse")
        out = m(lib.tensor(rs.randn(4, 2, 2).astype(np.float32)))[0]
        out.sum().backward()
        return [out] + [p.grad for p in m.parameters()]

    _same(fn, 1e-4, 1e-5)


@pytest.mark.parametrize("p", [1, 2, 3.5, float("inf")])
def test_lp_pool3d_ceil(p):
    x = np.abs(np.random.RandomState(0).randn(2, 3, 5, 6, 7).astype(np.float32)) + 0.1

    def fn(lib):
        xx = lib.tensor(x, requires_grad=True)
        y = lib.nn.LPPool3d(p, (3, 2, 4), (2, 3, 2), ceil_mode=True)(xx)
        y.sum().backward()
        return [y, xx.grad]

    _same(fn, 1e-4, 1e-5)


@pytest.mark.parametrize("shape", [(6,), (2, 4), ()])
def test_channel_shuffle_rank(shape):
    _same(lambda lib: lib.nn.ChannelShuffle(2)(lib.zeros(shape)))


@pytest.mark.parametrize("lengths,sort", [([6, 3, 1], True), ([7, 6, 1], True),
                                          ([3, 6, 1], False)])
@pytest.mark.parametrize("batch_first", [False, True])
def test_pack_padded_longer_than_input(lengths, sort, batch_first):
    def fn(lib):
        x = lib.arange(30.).reshape(5, 3, 2)
        if batch_first:
            x = x.transpose(0, 1)
        r = lib.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=batch_first,
                                                  enforce_sorted=sort)
        return [r.data, r.batch_sizes]

    _same(fn)


@pytest.mark.parametrize("shape,out,k,kw", [
    ((2, 12, 5), (3, 4), 2, {}),
    ((12, 5), (3, 4), (2, 1), dict(dilation=(1, 2), padding=1, stride=(2, 1))),
    ((2, 12, 5), (1, 1), 2, {}), ((2, 11, 6), (3, 4), 2, {})])
def test_fold_block_count_message(shape, out, k, kw):
    _same(lambda lib: lib.nn.functional.fold(lib.zeros(shape), out, k, **kw))


@pytest.mark.parametrize("a,b,t", [((2, 3, 4), (2, 3, 4), (2,)), ((2, 3), (2, 3, 4), (2,)),
                                   ((3,), (3,), (2,)), ((2, 3), (2, 3), (2, 1)),
                                   ((3,), (2, 3), ())])
def test_cosine_embedding_loss_ranks(a, b, t):
    _same(lambda lib: lib.nn.CosineEmbeddingLoss()(lib.ones(a), lib.ones(b), lib.ones(t)))


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_nan_grid(mode, padding):
    nan = float("nan")

    def fn(lib):
        x = lib.arange(16.).reshape(1, 1, 4, 4)
        g = lib.tensor([[[[nan, 0.], [0., nan], [nan, nan], [0.3, -0.2]]]])
        return lib.nn.functional.grid_sample(x, g, mode=mode, padding_mode=padding,
                                             align_corners=False)

    _same(fn)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_nan_grid_3d(mode, padding):
    nan = float("nan")

    def fn(lib):
        x = lib.arange(27.).reshape(1, 1, 3, 3, 3)
        g = lib.tensor([[[[[nan, 0., 0.], [0.1, 0.2, nan]]]]])
        return lib.nn.functional.grid_sample(x, g, mode=mode, padding_mode=padding,
                                             align_corners=False)

    _same(fn)
