"""Eager discrepancies against PyTorch 2.13, each case run under torch and fusegrad here:
`out=` on diff, narrow_copy and index_copy (dtype, shape, overlap and autograd errors, resize
warnings); the losses' gradients taken with create_graph (nll_loss's connected to its input,
PyTorch's backward ops' nodes `MseLossBackwardBackward0` ... with equal first and second
order values); adaptive average pooling keeping a NaN or infinity to the windows holding it;
avg_pool3d refusing half types; fractional max pooling's indices and gradient."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import fusegrad as fg

# ---------------------------------------------------------------------------- out=


def _outcome(T, fn):
    """What `fn(T)` gives: its error (type, text), or the result's values, shape, strides
    and dtype with whether it is `out` itself, and the warnings' texts."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result, out = fn(T)
        except Exception as e:  # noqa: BLE001  (compared against torch's)
            return ("error", type(e).__name__, str(e))
    # (PyTorch's C++ warnings end with where they were raised)
    texts = sorted(str(w.message).split(" (Triggered internally at")[0] for w in caught)
    return ("ok", result is out, tuple(result.shape), tuple(result.stride()),
            str(result.dtype).split(".")[1], np.asarray(result.detach().numpy()).tolist(),
            texts)


def _x(T, dtype=None):
    return (T.arange(12, dtype=T.float64) * 0.37 - 1.5).reshape(3, 4).to(dtype or T.float32)


def _call(name):
    def run(T, out, *, x=None, **kw):
        x = _x(T) if x is None else x
        if name == "diff":
            return T.diff(x, out=out, **kw), out
        if name == "narrow_copy":
            return T.narrow_copy(x, 1, 1, 2, out=out), out
        return T.index_copy(x, 0, T.tensor([2, 0]), T.ones(2, 4, dtype=x.dtype), out=out), out
    return run


_SHAPES = {"diff": (3, 3), "narrow_copy": (3, 2), "index_copy": (3, 4)}
OUT_CASES = {
    "right shape": lambda T, s: T.empty(s),
    "resized": lambda T, s: T.empty(7),
    "empty": lambda T, s: T.empty(0),
    "long": lambda T, s: T.empty(s, dtype=T.long),
    "double": lambda T, s: T.empty(s, dtype=T.float64),
    "half": lambda T, s: T.empty(s, dtype=T.float16),
    "transposed": lambda T, s: T.empty(s[::-1]).t(),
    "requires grad": lambda T, s: T.empty(s, requires_grad=True),
}


# (Left out: narrow_copy into a transposed `out`, whose memory PyTorch's kernel writes in
# row-major order whatever its strides, so its values land transposed; fusegrad writes
# through out's strides.)
@pytest.mark.parametrize("name,case", [(n, c) for n in sorted(_SHAPES) for c in sorted(OUT_CASES)
                                       if (n, c) != ("narrow_copy", "transposed")])
def test_out_argument(name, case):
    def fn(T):
        return _call(name)(T, OUT_CASES[case](T, _SHAPES[name]))

    assert _outcome(fg, fn) == _outcome(torch, fn)


MORE_OUT_CASES = {
    # an input requiring grad: the op PyTorch's error names (diff's last step is `sub`)
    "diff grad": lambda T: _call("diff")(T, T.empty(3, 3), x=_x(T).requires_grad_()),
    "diff n=2 grad": lambda T: _call("diff")(T, T.empty(3, 2), x=_x(T).requires_grad_(), n=2),
    "diff prepend": lambda T: _call("diff")(T, T.empty(3, 6), prepend=_x(T)[:, :2],
                                            append=_x(T)[:, :1]),
    "diff bool": lambda T: _call("diff")(T, T.empty(3, 3, dtype=T.bool), x=_x(T) > 0),
    "diff bool to long": lambda T: _call("diff")(T, T.empty(3, 3, dtype=T.long), x=_x(T) > 0),
    "diff long to bool": lambda T: _call("diff")(T, T.empty(3, 3, dtype=T.bool),
                                                 x=_x(T).long()),
    "diff n=4": lambda T: _call("diff")(T, T.empty(3, 1), n=4),
    "diff no grad": lambda T: (lambda o: (T.no_grad().__enter__(), _call("diff")(
        T, o, x=_x(T).requires_grad_()), T.set_grad_enabled(True))[1])(T.empty(3, 3)),
    "diff into self 2-d": lambda T: (lambda y: _call("diff")(T, y, x=y))(_x(T)),
    "narrow_copy grad": lambda T: (T.narrow_copy(_x(T).requires_grad_(), 1, 1, 2,
                                                 out=T.empty(3, 2)), None),
    "narrow_copy int32": lambda T: (T.narrow_copy(T.arange(12).view(3, 4), 1, 1, 2,
                                                  out=T.empty(3, 2, dtype=T.int32)), None),
    "narrow_copy overlap": lambda T: (lambda b: (T.narrow_copy(
        b[:12].view(3, 4), 1, 1, 2, out=b[:6].view(3, 2)), None))(T.arange(20.0)),
    "index_copy self full": lambda T: (lambda b: (T.index_copy(
        b[:12].view(3, 4), 0, T.tensor([2, 0]), T.ones(2, 4), out=b[:12].view(3, 4)),
        None))(T.arange(20.0)),
    "index_copy self partial": lambda T: (lambda b: (T.index_copy(
        b[:12].view(3, 4), 0, T.tensor([2, 0]), T.ones(2, 4), out=b[1:13].view(3, 4)),
        None))(T.arange(20.0)),
    "index_copy self resized": lambda T: (lambda b: (T.index_copy(
        b[:12].view(3, 4), 0, T.tensor([2, 0]), T.ones(2, 4), out=b[:6].view(2, 3)),
        None))(T.arange(20.0)),
    "index_copy source overlap": lambda T: (lambda b: (T.index_copy(
        T.zeros(3, 4), 0, T.tensor([2, 0]), b[:8].view(2, 4), out=b[:12].view(3, 4)),
        None))(T.arange(20.0)),
    "index_copy index overlap": lambda T: (lambda b: (T.index_copy(
        T.arange(12).view(3, 4), 0, b[:2], T.arange(8).view(2, 4), out=b[:12].view(3, 4)),
        None))(T.arange(20)),
    "index_copy source dtype": lambda T: (T.index_copy(
        _x(T), 0, T.tensor([2, 0]), T.ones(2, 4, dtype=T.float64), out=T.empty(3, 4)), None),
    "index_copy bad index": lambda T: (T.index_copy(
        _x(T), 0, T.tensor([5, 0]), T.ones(2, 4), out=T.empty(3, 4)), None),
    "index_copy source grad": lambda T: (T.index_copy(
        _x(T), 0, T.tensor([2, 0]), T.ones(2, 4, requires_grad=True), out=T.empty(3, 4)),
        None),
}


@pytest.mark.parametrize("case", sorted(MORE_OUT_CASES))
def test_out_argument_more(case):
    def fn(T):
        result, out = MORE_OUT_CASES[case](T)
        return result, out if out is not None else result

    assert _outcome(fg, fn) == _outcome(torch, fn)


# ---------------------------------------------------------------------------- losses


def _targets(T):
    r = np.random.default_rng(3)
    return {
        "classes": T.tensor([0, 3, 1, 4]),
        "ignored": T.tensor([0, -100, 1, 4]),
        "probs": T.tensor(r.random((4, 5))),
        "sign": T.tensor(np.where(r.random((4, 5)) > 0.5, 1.0, -1.0)),
        "weight": T.tensor(r.random(5) + 0.5),
        "multilabel": T.tensor([[0, 1, -1, 0, 0], [2, -1, 0, 0, 0], [4, 3, 2, -1, 0],
                                [1, -1, 0, 0, 0]]),
    }


def _x0(T):
    return T.tensor(np.random.default_rng(0).standard_normal((4, 5)))


LOSSES = {
    "nll": lambda F, x, t, r: F.nll_loss(x, t["classes"], reduction=r),
    "nll weight ignore": lambda F, x, t, r: F.nll_loss(x, t["ignored"], weight=t["weight"],
                                                       reduction=r),
    "nll 1-d": lambda F, x, t, r: F.nll_loss(x[0], t["classes"][1], reduction=r),
    # (contiguous: PyTorch's 2-D backward refuses another layout of the input)
    "nll2d": lambda F, x, t, r: F.nll_loss(x.t().contiguous().view(1, 5, 4, 1),
                                           t["classes"].reshape(1, 4, 1), reduction=r),
    "cross_entropy": lambda F, x, t, r: F.cross_entropy(x, t["classes"], reduction=r),
    "cross_entropy smoothing": lambda F, x, t, r: F.cross_entropy(
        x, t["classes"], label_smoothing=0.1, reduction=r),
    "mse": lambda F, x, t, r: F.mse_loss(x, t["probs"], reduction=r),
    "mse target": lambda F, x, t, r: F.mse_loss(t["probs"], x, reduction=r),
    "l1": lambda F, x, t, r: F.l1_loss(x, t["probs"], reduction=r),
    "smooth_l1": lambda F, x, t, r: F.smooth_l1_loss(x, t["probs"] * 3, reduction=r,
                                                     beta=0.5),
    "smooth_l1 target": lambda F, x, t, r: F.smooth_l1_loss(t["probs"] * 3, x, reduction=r),
    "huber": lambda F, x, t, r: F.huber_loss(x, t["probs"] * 3, reduction=r, delta=0.7),
    "huber target": lambda F, x, t, r: F.huber_loss(t["probs"], x, reduction=r),
    "bce": lambda F, x, t, r: F.binary_cross_entropy(x.sigmoid(), t["probs"], reduction=r),
    "bce weight": lambda F, x, t, r: F.binary_cross_entropy(
        x.sigmoid(), t["probs"], weight=t["weight"], reduction=r),
    "bce target": lambda F, x, t, r: F.binary_cross_entropy(t["probs"] * 0.9 + 0.05,
                                                            x.sigmoid(), reduction=r),
    "bce_with_logits": lambda F, x, t, r: F.binary_cross_entropy_with_logits(
        x, t["probs"], reduction=r),
    "bce_with_logits weights": lambda F, x, t, r: F.binary_cross_entropy_with_logits(
        x, t["probs"], weight=t["weight"], pos_weight=t["weight"] + 0.5, reduction=r),
    "soft_margin": lambda F, x, t, r: F.soft_margin_loss(x, t["sign"], reduction=r),
    "multi_margin": lambda F, x, t, r: F.multi_margin_loss(x, t["classes"], reduction=r),
    "multilabel_margin": lambda F, x, t, r: F.multilabel_margin_loss(x, t["multilabel"],
                                                                     reduction=r),
    "kl_div": lambda F, x, t, r: F.kl_div(x, t["probs"], reduction=r),
}


def _grads_twice(T, loss, reduction):
    """Each step's node names and values: the loss, its input gradient taken with
    create_graph (and the cotangent requiring grad), and the second derivatives of a
    weighted sum of that gradient (or the error of taking them)."""
    F = T.nn.functional
    x = _x0(T).requires_grad_()
    t = _targets(T)
    out = LOSSES[loss](F, x, t, reduction)
    go = (T.ones_like(out) * 0.75).requires_grad_()
    (g,) = T.autograd.grad(out, x, go, create_graph=True)
    node = g.grad_fn.name() if g.grad_fn is not None else None
    record = [out.detach().numpy().tolist(), g.detach().numpy().tolist(), g.requires_grad,
              node]
    if not g.requires_grad:
        return record
    w = T.cos(_x0(T))
    try:
        g2 = T.autograd.grad((g * w).sum(), [x, go], allow_unused=True)
    except RuntimeError as e:
        return record + [str(e)]
    # (PyTorch's zero gradients are ZeroTensors, read with force=True)
    return record + [None if v is None else v.numpy(force=True).tolist() for v in g2]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_loss_double_backward(loss, reduction):
    ours, theirs = _grads_twice(fg, loss, reduction), _grads_twice(torch, loss, reduction)
    assert ours[2:4] == theirs[2:4]  # (requires_grad and PyTorch's node name)
    assert len(ours) == len(theirs)
    for a, b in zip(ours[:2] + ours[4:], theirs[:2] + theirs[4:]):
        if isinstance(b, str) or b is None:
            assert a == b
        else:
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12)


def test_nll_gradient_is_connected_to_its_input():
    """nll_loss's gradient taken with create_graph requires grad through its input (the
    second derivative there is zero), and `_saved_self` is that input, as PyTorch's."""
    for T in (fg, torch):
        x = _x0(T).log_softmax(1).detach().requires_grad_()
        loss = T.nn.functional.nll_loss(x, T.tensor([0, 3, 1, 4]))
        assert loss.grad_fn._saved_self is x
        (g,) = T.autograd.grad(loss, x, create_graph=True)
        assert g.requires_grad and g.grad_fn.name() == "NllLossBackwardBackward0"
        (g2,) = T.autograd.grad(g.sum(), x)
        assert not g2.numpy().any()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("loss", ["nll", "mse", "smooth_l1", "huber", "bce", "soft_margin"])
def test_loss_gradient_bits_with_and_without_create_graph(loss, dtype):
    """A gradient taken with create_graph (through the backward op) has the bits of one
    taken without (the loss's own derivative)."""
    F = fg.nn.functional
    grads = []
    for create in (False, True):
        x = _x0(fg).to(getattr(fg, dtype)).requires_grad_()
        t = {k: v.to(x.dtype) if v.is_floating_point() else v for k, v in _targets(fg).items()}
        (g,) = fg.autograd.grad(LOSSES[loss](F, x, t, "mean"), x, create_graph=create)
        grads.append(g.detach().numpy())
    assert grads[0].tobytes() == grads[1].tobytes()


# ---------------------------------------------------------------------------- pooling


def _nan_input(T, nd):
    x = T.zeros((1, 1) + (6, 7, 5)[:nd], dtype=T.float64)
    x[(0, 0) + (1, 2, 0)[:nd]] = float("nan")
    x[(0, 0) + (4, 5, 4)[:nd]] = float("inf")
    x[(0, 0) + (5, 0, 2)[:nd]] = -float("inf")
    return x


@pytest.mark.parametrize("size", [(4, 3, 2), (6, 7, 5), (2, 5, 1), (5, 1, 3)])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_adaptive_avg_pool_keeps_nan_in_its_windows(nd, size):
    def run(T):
        fn = getattr(T.nn.functional, f"adaptive_avg_pool{nd}d")
        x = _nan_input(T, nd)
        return fn(x if nd != 1 else x[0], size[:nd]).numpy()

    np.testing.assert_allclose(run(fg), run(torch), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("nd", [2, 3])
def test_adaptive_avg_pool_values_and_grads(nd):
    r = np.random.default_rng(5)
    data = r.standard_normal((2, 3) + (9, 7, 6)[:nd])
    cot = None
    results = []
    for T in (fg, torch):
        x = T.tensor(data).requires_grad_()
        y = getattr(T.nn.functional, f"adaptive_avg_pool{nd}d")(x, (4, 5, 3)[:nd])
        if cot is None:
            cot = r.standard_normal(tuple(y.shape))
        (g,) = T.autograd.grad(y, x, T.tensor(cot))
        results.append((y.detach().numpy(), g.numpy()))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


POOL_DTYPE_CASES = {
    "avg_pool3d": lambda T, x: T.nn.functional.avg_pool3d(x, 2),
    "avg_pool3d long": lambda T, x: T.nn.functional.avg_pool3d((x * 10).long(), 2),
    "avg_pool2d": lambda T, x: T.nn.functional.avg_pool2d(x[0], 2),
    "adaptive_avg_pool3d": lambda T, x: T.nn.functional.adaptive_avg_pool3d(x, 3),
    "max_pool3d": lambda T, x: T.nn.functional.max_pool3d(x, 2),
    "lp_pool3d": lambda T, x: T.nn.functional.lp_pool3d(x, 2, 2),
    "lp_pool3d inf": lambda T, x: T.nn.functional.lp_pool3d(x, float("inf"), 2),
    "lp_pool3d ceil": lambda T, x: T.nn.functional.lp_pool3d(x, 2, 3, 2, ceil_mode=True),
}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("case", sorted(POOL_DTYPE_CASES))
def test_pooling_dtypes(case, dtype):
    def run(T):
        x = T.tensor(np.linspace(-1, 1, 128).reshape(1, 2, 4, 4, 4)).to(getattr(T, dtype))
        try:
            y = POOL_DTYPE_CASES[case](T, x)
        except Exception as e:  # noqa: BLE001  (compared against torch's)
            return type(e).__name__, str(e)
        return str(y.dtype), y.float().numpy().round(2).tolist()

    assert run(fg) == run(torch)


@pytest.mark.parametrize("shape,out", [((8, 16, 32, 32), (16, 16)), ((3, 13, 11), (5, 7)),
                                       ((2, 3, 64, 64), (40, 40)), ((0, 2, 9, 9), (4, 4))])
def test_fractional_max_pool2d(shape, out):
    """Values, indices and the input's gradient (overlapping windows add up) as PyTorch's,
    for given samples; the gradient on arrays has the bits of the recorded formula's."""
    r = np.random.default_rng(1)
    data = r.standard_normal(shape).astype(np.float32)
    lead = (shape[0], shape[1]) if len(shape) == 4 else (1, shape[0])
    samples = r.random(lead + (2,)).astype(np.float32)
    results = []
    for T in (fg, torch):
        x = T.tensor(data).requires_grad_()
        y, idx = T.nn.functional.fractional_max_pool2d(
            x, 3, output_size=out, return_indices=True, _random_samples=T.tensor(samples))
        cot = T.tensor(np.cos(np.arange(y.numel(), dtype=np.float32)).reshape(y.shape))
        (g,) = T.autograd.grad(y, x, cot, retain_graph=True)
        results.append((y.detach().numpy(), idx.numpy(), g.numpy()))
        if T is fg:
            (g2,) = T.autograd.grad(y, x, cot, create_graph=True)
            assert g2.detach().numpy().tobytes() == g.numpy().tobytes()
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_scatter_add_order(dim):
    """scatter_add adds colliding values in the index's order (as NumPy's add.at of the
    same positions does), for every dim, float32 and half types."""
    r = np.random.default_rng(dim)
    shape = (5, 6, 7)
    index = r.integers(0, shape[dim], (4, 5, 6))
    src = r.standard_normal((4, 5, 6)).astype(np.float32) * 1e3
    base = r.standard_normal(shape).astype(np.float32)
    grids = list(np.indices(index.shape, sparse=True))
    grids[dim] = index
    expected = base.copy()
    np.add.at(expected, tuple(grids), src)
    got = fg.tensor(base).scatter_add(dim, fg.tensor(index), fg.tensor(src)).numpy()
    assert got.tobytes() == expected.tobytes()
    theirs = torch.tensor(base).scatter_add(dim, torch.tensor(index), torch.tensor(src))
    np.testing.assert_allclose(got, theirs.numpy(), rtol=1e-5, atol=1e-2)
    half = fg.tensor(base).half().scatter_add(dim, fg.tensor(index), fg.tensor(src).half())
    theirs = torch.tensor(base).half().scatter_add(dim, torch.tensor(index),
                                                   torch.tensor(src).half())
    np.testing.assert_array_equal(half.float().numpy(), theirs.float().numpy())


# ---------------------------------------------------------------------------- fuzz finds


def _value_and_grads(T, fn, data, dtype="float64"):
    """fn's value and its inputs' gradients (the leaves made from `data`), as arrays."""
    leaves = [T.tensor(a).to(getattr(T, dtype)).requires_grad_() for a in data]
    out = fn(T, *leaves)
    grads = T.autograd.grad(out.float().sum(), leaves, allow_unused=True)
    return [out.detach().float().numpy()] + [
        None if g is None else g.float().numpy() for g in grads]


_NAN, _INF = float("nan"), float("inf")
FUZZ_CASES = {
    # a NaN difference takes the quadratic branch's gradient (NaN), as PyTorch's kernel
    "smooth_l1 nan": (lambda T, x, t: T.nn.functional.smooth_l1_loss(x, t, reduction="none",
                                                                      beta=0.5),
                      [[_NAN, 1.0, _INF, -_INF, 0.2], [0.0, _NAN, 0.0, 0.0, 0.0]]),
    # an ignored target's loss is 0 whatever its input (a NaN too)
    "nll ignored nan": (lambda T, x: T.nn.functional.nll_loss(
        x, T.tensor([0, 1, 2]), reduction="none", ignore_index=1),
        [[[0.5, -1.0, 2.0], [_NAN, _NAN, _NAN], [1.0, 0.5, -0.5]]]),
    "nll ignored nan weight": (lambda T, x: T.nn.functional.nll_loss(
        x, T.tensor([0, 1, 2]), weight=T.tensor([0.5, 2.0, 1.5], dtype=x.dtype),
        reduction="none", ignore_index=1), [[[0.5, -1.0, 2.0], [_NAN, _NAN, _NAN],
                                             [1.0, 0.5, -0.5]]]),
    # a NaN or infinite margin term: skipped where not positive, its gradient kept apart
    "multi_margin nan": (lambda T, x: T.nn.functional.multi_margin_loss(
        x, T.tensor([0, 1, 2]), reduction="none"),
        [[[0.5, _NAN, 2.0], [_NAN, 0.3, 0.1], [1.0, 0.5, -0.5]]]),
    "multi_margin inf p=2": (lambda T, x: T.nn.functional.multi_margin_loss(
        x, T.tensor([0, 1, 2]), p=2), [[[0.5, _INF, 2.0], [0.2, 0.3, 0.1], [1.0, 0.5, -0.5]]]),
    # exp(-t x) overflowing: inf / inf in PyTorch's gradient
    "soft_margin overflow": (lambda T, x: T.nn.functional.soft_margin_loss(
        x, T.tensor([1.0, -1.0, 1.0, 1.0], dtype=x.dtype), reduction="sum"),
        [[-800.0, 800.0, 0.5, _INF]]),
}


@pytest.mark.parametrize("case", sorted(FUZZ_CASES))
def test_fuzz_findings(case):
    fn, data = FUZZ_CASES[case]
    data = [np.asarray(a, dtype=np.float64) for a in data]
    for a, b in zip(_value_and_grads(fg, fn, data), _value_and_grads(torch, fn, data)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_multi_margin_half_types(dtype):
    """PyTorch's multi_margin_loss has no half-type kernel. (An empty batch runs none, but
    its sum is then PyTorch's uninitialised memory: not compared.)"""
    for shape in ((3, 4), (1, 1)):
        outcomes = []
        for T in (fg, torch):
            x = T.zeros(shape, dtype=getattr(T, dtype))
            t = T.zeros(shape[:1], dtype=T.long)
            try:
                outcomes.append(str(T.nn.functional.multi_margin_loss(x, t, reduction="sum")))
            except NotImplementedError as e:
                outcomes.append(str(e))
        assert outcomes[0].replace("fusegrad", "torch") == outcomes[1]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("shape,kw", [
    ((1, 1, 6, 2), dict(kernel_size=3, stride=2, padding=1)),
    ((1, 1, 6, 2), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
    ((2, 3, 7, 5), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((2, 3, 7, 5), dict(kernel_size=2, stride=3, padding=1)),
    ((1, 2, 5, 9), dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 0))),
    ((1, 2, 8, 8), dict(kernel_size=4, stride=2, padding=2, ceil_mode=True)),
])
def test_avg_pool2d_gradient(shape, kw, dtype):
    """avg_pool2d's input gradient, a half type's summed in PyTorch's order: every input
    position a window covers gets its share (a last window ending short of its padding
    too)."""
    data = [np.sin(np.arange(np.prod(shape)).reshape(shape))]

    def fn(T, x):
        return T.nn.functional.avg_pool2d(x, **kw)

    ours, theirs = _value_and_grads(fg, fn, data, dtype), _value_and_grads(torch, fn, data,
                                                                           dtype)
    for a, b in zip(ours, theirs):
        if dtype == "float32":
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
        else:
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape,size", [((2, 3, 5, 6, 7), (3, 4, 2)), ((0, 3, 5, 3, 3), (4, 1, 5)),
                                        ((2, 3, 5, 3, 3), (4, 0, 5)), ((3, 4, 4, 4), (4, 4, 4)),
                                        ((1, 1, 6, 6, 6), (4, 4, 4))])
def test_adaptive_avg_pool3d_half_types(shape, size, dtype):
    """A half type's windows summed in the type, in row-major order, as PyTorch's kernel."""
    data = np.cos(np.arange(np.prod(shape)) * 0.7).reshape(shape) * 100

    def run(T):
        x = T.tensor(data).to(getattr(T, dtype))
        return T.nn.functional.adaptive_avg_pool3d(x, size).float().numpy()

    a, b = run(fg), run(torch)
    assert a.shape == b.shape
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
@pytest.mark.parametrize("norm,kw", [(2.0, {}), (3, {}), (1.5, {"stride": 1}),
                                     (float("inf"), {}), (-float("inf"), {"ceil_mode": True}),
                                     (2.0, {"ceil_mode": True, "stride": 2})])
def test_lp_pool3d(norm, kw, dtype):
    """lp_pool3d through PyTorch's pooling ops: its nodes, an integer input's truncated
    average, values and gradients."""
    data = np.cos(np.arange(2 * 2 * 5 * 4 * 6)).reshape(2, 2, 5, 4, 6) * 10

    def run(T):
        x = T.tensor(data).to(getattr(T, dtype))
        if x.is_floating_point():
            x.requires_grad_()
        y = T.nn.functional.lp_pool3d(x, norm, 3, **kw)
        node = type(y.grad_fn).__name__ if y.grad_fn is not None else None
        g = T.autograd.grad(y.sum(), x)[0].double().numpy() if y.requires_grad else None
        return str(y.dtype).split(".")[1], node, y.detach().double().numpy(), g

    ours, theirs = run(fg), run(torch)
    assert ours[:2] == theirs[:2]
    # By the result's dtype: an integer input's result is float32, whose root PyTorch's
    # vectorized pow rounds to either neighbour depending on the CPU (AMD's: one ulp off
    # the correctly rounded value fusegrad gives).
    tol = 1e-12 if ours[0] != "float32" else 1e-5
    for a, b in zip(ours[2:], theirs[2:]):
        if b is None:
            assert a is None
        else:
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_soft_margin_loss_overflow(dtype, reduction):
    """soft_margin_loss as PyTorch's kernel forms it: log1p(exp(-t x)) in the input's type
    (infinite once the exponential overflows it) and its gradient -t z / (1 + z)."""
    def run(T):
        x = T.tensor([-12.0, 3.0, -0.5, 20.0, -100.0, 0.25]).to(getattr(T, dtype))
        x.requires_grad_()
        t = T.tensor([1.0, -1.0, 1.0, -1.0, 1.0, -1.0]).to(getattr(T, dtype))
        y = T.nn.functional.soft_margin_loss(x, t, reduction=reduction)
        (g,) = T.autograd.grad(y.sum(), x)
        return y.detach().double().numpy(), g.double().numpy()

    for a, b in zip(run(fg), run(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=0, equal_nan=True)
