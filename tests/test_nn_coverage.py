"""nn layers, activations and losses against torch.nn, case by case: the same weights (the
torch module's state_dict copied), forward values, every input and parameter gradient for a
random cotangent, and the multiset of backward node names of the whole graph; plus PyTorch's
error messages for a few bad inputs. Random layers in training mode (dropout, rrelu) are
checked for node names only.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

_RNG = np.random.default_rng(0)
X4 = _RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
X3 = _RNG.standard_normal((2, 3, 10)).astype(np.float32)
X2 = _RNG.standard_normal((4, 6)).astype(np.float32)
X5 = _RNG.standard_normal((1, 2, 3, 4, 4)).astype(np.float32)
P2 = (_RNG.random((4, 6)) * 0.8 + 0.1).astype(np.float32)
S1 = _RNG.standard_normal((1, 4, 3, 3)).astype(np.float32)
S6 = _RNG.standard_normal((1, 6, 2, 2)).astype(np.float32)
C12 = _RNG.standard_normal((1, 12, 12)).astype(np.float32)
Y = np.array([1, 0, 3, 5])
SIGN = np.sign(X2).astype(np.float32)
LP = _RNG.standard_normal((6, 2, 4))
LP = (LP - np.log(np.exp(LP).sum(-1, keepdims=True))).astype(np.float32)
ML = np.array([[3, 0, -1, 1, 1, 1], [1, 2, 4, 0, 3, 5], [-1, 0, 1, 2, 3, 4],
               [2, 2, -1, 0, 0, 0]])


class In:
    """An input: a NumPy array given to both libraries (grad: whether it requires grad)."""

    def __init__(self, array, grad: bool = True):
        self.array = np.asarray(array)
        self.grad = grad and self.array.dtype.kind == "f"

    def make(self, lib):
        t = lib.tensor(self.array.copy())
        return t.requires_grad_(True) if self.grad else t


def _act(name, x=X2, *args, **kw):
    return (lambda L: getattr(L.nn, name)(*args, **kw), [In(x)])


# name -> (module builder L -> module or callable, inputs, options)
CASES = {
    "Linear": (lambda L: L.nn.Linear(6, 3), [In(X2)]),
    "Bilinear": (lambda L: L.nn.Bilinear(6, 5, 3), [In(X2), In(X2[:, :5] + 1)]),
    "Bilinear-3d": (lambda L: L.nn.Bilinear(6, 6, 2, bias=False),
                    [In(X2.reshape(2, 2, 6)), In(P2.reshape(2, 2, 6))]),
    "AdaptiveMaxPool2d": (lambda L: L.nn.AdaptiveMaxPool2d(3), [In(X4)]),
    "AdaptiveMaxPool2d-none": (lambda L: L.nn.AdaptiveMaxPool2d((None, 5)), [In(X4)]),
    "AdaptiveMaxPool1d": (lambda L: L.nn.AdaptiveMaxPool1d(4), [In(X3)]),
    "AdaptiveMaxPool2d-idx": (lambda L: L.nn.AdaptiveMaxPool2d((2, 3), return_indices=True),
                              [In(X4)]),
    "Dropout1d-eval": (lambda L: L.nn.Dropout1d().eval(), [In(X3)]),
    "Dropout2d-eval": (lambda L: L.nn.Dropout2d().eval(), [In(X4)]),
    "Dropout3d-p0": (lambda L: L.nn.Dropout3d(0.0), [In(X5)]),
    "Dropout1d": (lambda L: L.nn.Dropout1d(0.5), [In(X3)], {"random": True}),
    "Dropout1d-unbatched": (lambda L: L.nn.Dropout1d(0.5), [In(X3[0])], {"random": True}),
    "Dropout2d": (lambda L: L.nn.Dropout2d(0.5), [In(X4)], {"random": True}),
    "Dropout3d": (lambda L: L.nn.Dropout3d(0.5), [In(X5)], {"random": True}),
    "Dropout3d-unbatched": (lambda L: L.nn.Dropout3d(0.5), [In(X5[0])], {"random": True}),
    "PixelShuffle": (lambda L: L.nn.PixelShuffle(2), [In(S1)]),
    "PixelUnshuffle": (lambda L: L.nn.PixelUnshuffle(2), [In(X4)]),
    "ChannelShuffle": (lambda L: L.nn.ChannelShuffle(3), [In(S6)]),
    "CosineSimilarity": (lambda L: L.nn.CosineSimilarity(), [In(X2), In(X2 + 1)]),
    "CosineSimilarity-dim0": (lambda L: L.nn.CosineSimilarity(0), [In(X2), In(P2)]),
    "PairwiseDistance": (lambda L: L.nn.PairwiseDistance(), [In(X2), In(X2 + 1)]),
    "PairwiseDistance-p1": (lambda L: L.nn.PairwiseDistance(1.0, keepdim=True),
                            [In(X2), In(P2)]),
    "InstanceNorm1d": (lambda L: L.nn.InstanceNorm1d(3, affine=True), [In(X3)]),
    "InstanceNorm2d": (lambda L: L.nn.InstanceNorm2d(3), [In(X4)]),
    "InstanceNorm2d-track": (lambda L: L.nn.InstanceNorm2d(3, track_running_stats=True),
                             [In(X4)]),
    "InstanceNorm3d-unbatched": (lambda L: L.nn.InstanceNorm3d(2, affine=True),
                                 [In(X5[0])]),
    "LocalResponseNorm": (lambda L: L.nn.LocalResponseNorm(2), [In(X4)]),
    "LocalResponseNorm-3d": (lambda L: L.nn.LocalResponseNorm(3, 0.1, 0.5, 2.0), [In(X3)]),
    "Fold": (lambda L: L.nn.Fold((4, 5), (2, 2)), [In(C12)]),
    "Unfold": (lambda L: L.nn.Unfold((2, 3), padding=1, stride=2), [In(X4)]),
    "EmbeddingBag": (lambda L: L.nn.EmbeddingBag(10, 3), [In(Y.reshape(2, 2))]),
    "EmbeddingBag-sum": (lambda L: L.nn.EmbeddingBag(10, 3, mode="sum"),
                         [In(np.array([1, 2, 3, 4, 1])), In(np.array([0, 2, 2]))]),
    "EmbeddingBag-max": (lambda L: L.nn.EmbeddingBag(10, 3, mode="max"),
                         [In(np.array([1, 2, 3, 4, 1])), In(np.array([0, 2, 2]))]),
    "EmbeddingBag-pad": (lambda L: L.nn.EmbeddingBag(10, 3, mode="mean", padding_idx=1),
                         [In(np.array([1, 2, 3, 4, 1])), In(np.array([0, 2]))]),
    "EmbeddingBag-psw": (lambda L: L.nn.EmbeddingBag(10, 3, mode="sum"),
                         [In(np.array([1, 2, 3, 4])), In(np.array([0, 1])),
                          In(np.array([0.5, 1.0, 2.0, -1.0], np.float32))]),
    "RMSNorm": (lambda L: L.nn.RMSNorm(6), [In(X2)]),
    "RMSNorm-eps": (lambda L: L.nn.RMSNorm([8, 8], eps=1e-3), [In(X4)]),
    "ReLU6-inplace": (lambda L: L.nn.Sequential(L.nn.Identity(), L.nn.ReLU6(inplace=True)),
                      [In(X2)], {"clone": True}),
    "SELU": _act("SELU"), "CELU": _act("CELU", X2, 0.5), "Mish": _act("Mish"),
    "Softsign": _act("Softsign"), "Hardsigmoid": _act("Hardsigmoid"),
    "Hardswish": _act("Hardswish"), "LogSigmoid": _act("LogSigmoid"),
    "Tanhshrink": _act("Tanhshrink"), "Softshrink": _act("Softshrink", X2, 0.7),
    "Hardshrink": _act("Hardshrink"), "PReLU": _act("PReLU"),
    "PReLU-channels": _act("PReLU", X4, 3, 0.1), "Threshold": _act("Threshold", X2, 0.1, 20.0),
    "GLU": _act("GLU"), "GLU-dim1": _act("GLU", X4[:, :2], 1), "Softmin": _act("Softmin", X2, 1),
    "Softmax2d": _act("Softmax2d", X4), "SiLU": _act("SiLU"), "ReLU6": _act("ReLU6"),
    "RReLU-eval": (lambda L: L.nn.RReLU().eval(), [In(X2)]),
    "RReLU": (lambda L: L.nn.RReLU(), [In(X2)], {"random": True}),
    "ELU-inplace": (lambda L: L.nn.ELU(inplace=True), [In(X2)], {"clone": True}),
    "SELU-inplace": (lambda L: L.nn.SELU(inplace=True), [In(X2)], {"clone": True}),
    "CELU-inplace": (lambda L: L.nn.CELU(inplace=True), [In(X2)], {"clone": True}),
    "Threshold-inplace": (lambda L: L.nn.Threshold(0.1, 20.0, inplace=True), [In(X2)],
                          {"clone": True}),
    "Hardswish-inplace": (lambda L: L.nn.Hardswish(inplace=True), [In(X2)], {"clone": True}),
    "Mish-inplace": (lambda L: L.nn.Mish(inplace=True), [In(X2)], {"clone": True}),
    "SiLU-inplace": (lambda L: L.nn.SiLU(inplace=True), [In(X2)], {"clone": True}),
    "RReLU-eval-inplace": (lambda L: L.nn.RReLU(inplace=True).eval(), [In(X2)],
                           {"clone": True}),
    "LeakyReLU-inplace": (lambda L: L.nn.LeakyReLU(0.2, inplace=True), [In(X2)],
                          {"clone": True}),
    # losses
    "CE-smooth": (lambda L: L.nn.CrossEntropyLoss(label_smoothing=0.1), [In(X2), In(Y)]),
    "CE-smooth-weight-ignore": (lambda L: L.nn.CrossEntropyLoss(
        weight=L.tensor(np.arange(1, 7, dtype=np.float32)), ignore_index=0,
        label_smoothing=0.2), [In(X2), In(Y)]),
    "CE-smooth-sum": (lambda L: L.nn.CrossEntropyLoss(label_smoothing=0.3, reduction="sum"),
                      [In(X2), In(Y)]),
    "CE-smooth-none": (lambda L: L.nn.CrossEntropyLoss(label_smoothing=0.3, reduction="none"),
                       [In(X2), In(Y)]),
    "CE-prob": (lambda L: L.nn.CrossEntropyLoss(), [In(X2), In(P2, False)]),
    "CE-prob-smooth": (lambda L: L.nn.CrossEntropyLoss(label_smoothing=0.1),
                       [In(X2), In(P2, False)]),
    "SmoothL1Loss": (lambda L: L.nn.SmoothL1Loss(), [In(X2), In(P2)]),
    "SmoothL1Loss-beta": (lambda L: L.nn.SmoothL1Loss(reduction="none", beta=0.3),
                          [In(X2), In(P2)]),
    "SmoothL1Loss-beta0": (lambda L: L.nn.SmoothL1Loss(beta=0.0), [In(X2), In(P2)]),
    "HuberLoss": (lambda L: L.nn.HuberLoss(), [In(X2), In(P2)]),
    "HuberLoss-delta": (lambda L: L.nn.HuberLoss(reduction="sum", delta=0.4),
                        [In(X2), In(P2)]),
    "KLDivLoss": (lambda L: L.nn.KLDivLoss(reduction="batchmean"), [In(X2), In(P2)]),
    "KLDivLoss-sum": (lambda L: L.nn.KLDivLoss(reduction="sum"), [In(X2), In(P2)]),
    "KLDiv-log": (lambda L: L.nn.KLDivLoss(log_target=True), [In(X2), In(X2)]),
    "SoftMarginLoss": (lambda L: L.nn.SoftMarginLoss(), [In(X2), In(SIGN, False)]),
    "MarginRankingLoss": (lambda L: L.nn.MarginRankingLoss(0.3),
                          [In(X2[0]), In(X2[1]), In(SIGN[2])]),
    "CosineEmbeddingLoss": (lambda L: L.nn.CosineEmbeddingLoss(0.1),
                            [In(X2), In(X2 + 1), In(np.array([1., -1, 1, -1]), False)]),
    "TripletMarginLoss": (lambda L: L.nn.TripletMarginLoss(), [In(X2), In(X2 + 1),
                                                               In(X2 - 1)]),
    "TripletMarginLoss-swap": (lambda L: L.nn.TripletMarginLoss(0.5, p=1, swap=True),
                               [In(X2), In(P2), In(X2 - 1)]),
    "HingeEmbeddingLoss": (lambda L: L.nn.HingeEmbeddingLoss(), [In(X2), In(SIGN)]),
    "PoissonNLLLoss": (lambda L: L.nn.PoissonNLLLoss(), [In(X2), In(P2)]),
    "PoissonNLLLoss-full": (lambda L: L.nn.PoissonNLLLoss(log_input=False, full=True),
                            [In(P2), In(P2 * 3)]),
    "GaussianNLLLoss": (lambda L: L.nn.GaussianNLLLoss(), [In(X2), In(P2), In(P2 + 1)]),
    "GaussianNLLLoss-full": (lambda L: L.nn.GaussianNLLLoss(full=True, reduction="sum"),
                             [In(X2), In(P2), In(P2[:, :1])]),
    "MultiMarginLoss": (lambda L: L.nn.MultiMarginLoss(), [In(X2), In(Y)]),
    "MultiMarginLoss-p2": (lambda L: L.nn.MultiMarginLoss(
        p=2, margin=0.5, weight=L.tensor(np.arange(1, 7, dtype=np.float32))), [In(X2), In(Y)]),
    "MultiLabelMarginLoss": (lambda L: L.nn.MultiLabelMarginLoss(), [In(X2), In(ML)]),
    "MultiLabelSoftMarginLoss": (lambda L: L.nn.MultiLabelSoftMarginLoss(),
                                 [In(X2), In((P2 > 0.5).astype(np.float32))]),
    "CTCLoss": (lambda L: L.nn.CTCLoss(), [In(LP), In(np.array([[1, 2, 2], [3, 1, 1]])),
                                           In(np.array([6, 5])), In(np.array([3, 2]))]),
    "CTCLoss-sum-1d": (lambda L: L.nn.CTCLoss(blank=3, reduction="sum"),
                       [In(LP), In(np.array([1, 2, 2, 0, 1])), In(np.array([6, 6])),
                        In(np.array([3, 2]))]),
    "CTCLoss-none-inf": (lambda L: L.nn.CTCLoss(reduction="none", zero_infinity=True),
                         [In(LP), In(np.array([[1, 1, 1, 1], [2, 1, 3, 3]])),
                          In(np.array([3, 6])), In(np.array([4, 2]))]),
    "CTCLoss-unbatched": (lambda L: L.nn.CTCLoss(), [In(LP[:, 0]), In(np.array([1, 2])),
                                                     In(np.array(6)), In(np.array(2))]),
}


def _names(t) -> list:
    seen, out, stack = set(), [], [t.grad_fn]
    while stack:
        n = stack.pop()
        if n is None or n in seen:
            continue
        seen.add(n)
        out.append(type(n).__name__)
        stack.extend(f for f, _ in n.next_functions)
    return sorted(out)


def _run(lib, build, inputs, opts, dtype, state=None):
    lib.manual_seed(0)
    layer = build(lib)
    if state is not None:
        layer.load_state_dict({k: fusegrad.tensor(v) for k, v in state.items()})
    if dtype == np.float64 and isinstance(layer, (torch.nn.Module, fusegrad.nn.Module)):
        layer = layer.double()
    # the weights (and buffers) before the forward, which may update running statistics
    before = ({k: v.detach().numpy().copy() for k, v in layer.state_dict().items()}
              if isinstance(layer, torch.nn.Module) else None)
    leaves = [i.make(lib) if i.array.dtype.kind != "f" else
              lib.tensor(i.array.astype(dtype)).requires_grad_(i.grad) for i in inputs]
    args = [a.clone() if opts.get("clone") and a.requires_grad else a for a in leaves]
    out = layer(*args)
    if isinstance(out, tuple):
        out = out[0]
    return layer, leaves, out, before


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", list(CASES))
def test_case_matches_torch(name, dtype):
    build, inputs, *rest = CASES[name]
    opts = rest[0] if rest else {}
    tl, tin, tout, state = _run(torch, build, inputs, opts, dtype)
    fl, fin, fout, _ = _run(fusegrad, build, inputs, opts, dtype, state)
    assert _names(fout.sum()) == _names(tout.sum())
    assert tuple(fout.shape) == tuple(tout.shape)
    assert fout.dtype.name == str(tout.dtype).split(".")[1]
    if opts.get("random"):
        return
    tol = 1e-5 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(fout.detach().numpy(), tout.detach().numpy(), rtol=tol * 10,
                               atol=tol)
    cot = np.random.default_rng(1).standard_normal(tuple(tout.shape)).astype(dtype)
    (tout * torch.tensor(cot)).sum().backward()
    (fout * fusegrad.tensor(cot)).sum().backward()
    pairs = list(zip(fin, tin)) + [(fp, tp) for (_, fp), (_, tp) in zip(
        fl.named_parameters() if hasattr(fl, "named_parameters") else [],
        tl.named_parameters() if hasattr(tl, "named_parameters") else [])]
    for k, (f, t) in enumerate(pairs):
        if t.grad is None:
            assert f.grad is None or not f.grad.numpy().any(), f"grad {k}"
            continue
        assert f.grad is not None, f"no grad for input {k}"
        np.testing.assert_allclose(f.grad.numpy(), t.grad.numpy(), rtol=tol * 100,
                                   atol=tol * 10, err_msg=f"grad {k}")
    if hasattr(tl, "named_buffers"):
        for (k, fb), (_, tb) in zip(fl.named_buffers(), tl.named_buffers()):
            np.testing.assert_allclose(fb.numpy(), tb.numpy(), rtol=1e-5, atol=1e-6,
                                       err_msg=k)


def test_reprs_match():
    for name in ("SELU", "CELU", "Softshrink", "Hardshrink", "PReLU", "Threshold", "GLU",
                 "Softmin", "PixelShuffle", "InstanceNorm2d", "LocalResponseNorm", "RMSNorm",
                 "EmbeddingBag", "Fold", "Unfold", "AdaptiveMaxPool2d", "Dropout2d"):
        build = CASES[name][0]
        assert repr(build(fusegrad)) == repr(build(torch)), name


def _errors(fn):
    """The exception type and message `fn(lib)` raises in torch and in fusegrad."""
    out = []
    for lib in (torch, fusegrad):
        with pytest.raises(Exception) as info:
            fn(lib)
        out.append((type(info.value).__name__, str(info.value)))
    return out


ERRORS = {
    "glu-odd": lambda L: L.nn.functional.glu(L.ones(3, 5)),
    "glu-scalar": lambda L: L.nn.functional.glu(L.tensor(1.0)),
    "softshrink-neg": lambda L: L.nn.functional.softshrink(L.ones(3), -1.0),
    "prelu-channels": lambda L: L.nn.functional.prelu(L.ones(3, 5), L.ones(3)),
    "rrelu-bounds": lambda L: L.nn.functional.rrelu(L.ones(3), 0.5, 0.1),
    "pixel_shuffle-dims": lambda L: L.nn.functional.pixel_shuffle(L.ones(4, 4), 2),
    "pixel_shuffle-channels": lambda L: L.nn.functional.pixel_shuffle(L.ones(1, 5, 2, 2), 2),
    "channel_shuffle": lambda L: L.nn.functional.channel_shuffle(L.ones(1, 5, 2, 2), 3),
    "adaptive_max_pool1d": lambda L: L.nn.functional.adaptive_max_pool1d(L.ones(1, 2, 3, 4),
                                                                          2),
    "dropout1d": lambda L: L.nn.functional.dropout1d(L.ones(1, 2, 3, 4)),
    "instance_norm": lambda L: L.nn.functional.instance_norm(L.ones(1, 3, 1)),
    "soft_margin-target-grad": lambda L: L.nn.SoftMarginLoss()(
        L.ones(3, requires_grad=True), L.ones(3, requires_grad=True)),
    "multi_margin-p": lambda L: L.nn.functional.multi_margin_loss(
        L.ones(2, 3), L.tensor([0, 1]), p=3),
    "multilabel-size": lambda L: L.nn.functional.multilabel_margin_loss(
        L.ones(2, 3), L.tensor([[0, 1], [1, 0]])),
    "gaussian-var": lambda L: L.nn.functional.gaussian_nll_loss(
        L.ones(2, 3), L.ones(2, 3), L.ones(3, 2)),
    "bilinear-batch": lambda L: L.nn.functional.bilinear(L.ones(2, 3), L.ones(3, 3),
                                                         L.ones(1, 3, 3)),
    "embedding_bag-offsets": lambda L: L.nn.functional.embedding_bag(
        L.tensor([1, 2]), L.ones(4, 2)),
    "rms_norm-shape": lambda L: L.nn.functional.rms_norm(L.ones(2, 3, 4), (3,)),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_error_messages(name):
    th, fg = _errors(ERRORS[name])
    assert fg == th


def test_rrelu_training_slopes_in_bounds():
    x = fusegrad.tensor(-np.ones((200,), np.float32), requires_grad=True)
    out = fusegrad.nn.functional.rrelu(x, 0.1, 0.3, training=True)
    out.sum().backward()
    slopes = -out.detach().numpy()
    assert (slopes >= 0.1).all() and (slopes <= 0.3).all()
    np.testing.assert_allclose(x.grad.numpy(), slopes)


def test_dropout2d_zeroes_whole_channels():
    fusegrad.manual_seed(0)
    out = fusegrad.nn.functional.dropout2d(fusegrad.ones(4, 8, 3, 3), 0.5).numpy()
    per_channel = out.reshape(4, 8, -1)
    assert ((per_channel == 0).all(-1) | (per_channel == 2).all(-1)).all()


@pytest.mark.parametrize("name", ["CELU", "GLU", "PReLU-channels", "Softshrink", "Bilinear",
                                  "SmoothL1Loss", "HuberLoss", "KLDivLoss", "SoftMarginLoss",
                                  "PixelShuffle", "AdaptiveMaxPool2d", "LocalResponseNorm",
                                  "RMSNorm", "EmbeddingBag"])
def test_double_backward_matches_torch(name):
    """Gradients of gradients (create_graph) agree with PyTorch's, in float64. (Where the
    second derivative is zero, PyTorch may still record the gradient's history and fusegrad
    not: both count as zeros.)"""
    build, inputs, *_ = CASES[name]
    results = []
    state = None
    for lib in (torch, fusegrad):
        layer, leaves, out, before = _run(lib, build, inputs, {}, np.float64, state)
        state = before if state is None else state
        wrt = [t for t in leaves if t.requires_grad]
        if hasattr(layer, "parameters"):
            wrt += list(layer.parameters())
        grads = lib.autograd.grad(out.sum(), wrt, create_graph=True, allow_unused=True)
        total = sum((g * g).sum() for g in grads if g is not None and g.requires_grad)
        if isinstance(total, lib.Tensor):
            second = lib.autograd.grad(total, wrt, allow_unused=True)
        else:
            second = [None] * len(wrt)
        results.append([np.zeros(tuple(w.shape)) if g is None else g.detach().numpy()
                        for g, w in zip(second, wrt)])
    th, fg = results
    assert len(th) == len(fg)
    for k, (a, b) in enumerate(zip(fg, th)):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9, err_msg=f"input {k}")
