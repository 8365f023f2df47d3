"""AdaptiveLogSoftmaxWithLoss and LinearCrossEntropyLoss (with F.linear_cross_entropy) against
PyTorch's, given the same parameters: per-row target log-probabilities, losses, gradients,
log_prob, predict, structure and errors."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

RNG = np.random.default_rng(23)


def _pair(cutoffs, div_value, head_bias):
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 12, cutoffs, div_value, head_bias).double()
    fm = fusegrad.nn.AdaptiveLogSoftmaxWithLoss(8, 12, cutoffs, div_value, head_bias).double()
    fm.load_state_dict({k: fusegrad.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    return tm, fm


@pytest.mark.parametrize("cutoffs, div_value, head_bias", [([4, 8], 2.0, False),
                                                           ([3], 4.0, True),
                                                           ([2, 5, 9], 1.5, False)])
def test_matches_pytorch(cutoffs, div_value, head_bias):
    tm, fm = _pair(cutoffs, div_value, head_bias)
    assert repr(fm) == repr(tm)
    assert [n for n, _ in fm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    x = RNG.standard_normal((7, 8))
    target = np.array([0, 11, 4, 7, 2, 9, 3])
    results = []
    for lib, m in ((torch, tm), (fusegrad, fm)):
        leaf = lib.tensor(x, requires_grad=True)
        out = m(leaf, lib.tensor(target))
        (out.output.sum() * 0.5 + out.loss).backward()
        single = m(leaf[0].detach(), lib.tensor(target[1]))
        results.append((type(out).__name__, out._fields, out.output.detach().numpy(),
                        out.loss.item(), leaf.grad.numpy(),
                        m.head.weight.grad.numpy(), m.tail[0][1].weight.grad.numpy(),
                        single.output.item(), m.log_prob(lib.tensor(x)).detach().numpy(),
                        m.predict(lib.tensor(x)).numpy()))
    want, got = results
    assert got[:2] == want[:2]
    for w, g in zip(want[2:], got[2:]):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_errors():
    for lib in (torch, fusegrad):
        with pytest.raises(ValueError, match="cutoffs should be a sequence of length larger "
                           "than 0"):
            lib.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [])
        with pytest.raises(ValueError, match="cutoffs should be a sequence of unique"):
            lib.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [5, 3])
        m = lib.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [3])
        with pytest.raises(RuntimeError, match=r"Target values should be in \[0, 9\], but "
                           r"values in range \[2, 12\] were found."):
            m(lib.ones(2, 4), lib.tensor([2, 12]))
        with pytest.raises(RuntimeError, match="Input and target should have the same size"):
            m(lib.ones(2, 4), lib.tensor([1]))
        with pytest.raises(RuntimeError, match="0D or 1D target tensor expected"):
            m(lib.ones(2, 4), lib.ones(2, 1, dtype=lib.int64))


@pytest.mark.parametrize("config", [
    {}, {"bias": True}, {"out_features": (3,), "bias": True},
    {"reduction": "none", "ignore_index": 2}, {"label_smoothing": 0.1, "reduction": "sum"},
    {"weight": True}, {"options": True}, {"unbatched": True}, {"probabilities": True}])
def test_linear_cross_entropy(config):
    """LinearCrossEntropyLoss and F.linear_cross_entropy against PyTorch's, given the same
    layer: loss values and the gradients of input and layer."""
    cfg = dict(config)
    unbatched, probs = cfg.pop("unbatched", False), cfg.pop("probabilities", False)
    x = RNG.standard_normal((6, 4)) if not unbatched else RNG.standard_normal(4)
    out = cfg.get("out_features", ())
    if probs:
        target = RNG.dirichlet(np.ones(5), 6)
    else:
        target = RNG.integers(0, 5, (6, *out)) if not unbatched else np.array(3)
    class_weight = RNG.uniform(0.5, 2, 5)
    results = []
    for lib in (torch, fusegrad):
        kw = dict(cfg)
        if kw.pop("weight", False):
            kw["weight"] = lib.tensor(class_weight)
        if kw.pop("options", False):
            kw["options"] = lib.nn.LinearCrossEntropyOptions(batch_chunk_size=2)
        m = lib.nn.LinearCrossEntropyLoss(4, 5, dtype=lib.float64, **kw)
        if lib is torch:
            state = {k: v.detach().numpy().copy() for k, v in m.state_dict().items()}
        else:
            m.load_state_dict({k: fusegrad.tensor(v) for k, v in state.items()})
        leaf = lib.tensor(x, requires_grad=True)
        loss = m(leaf, lib.tensor(target))
        loss.sum().backward()
        direct = lib.nn.functional.linear_cross_entropy(
            leaf.detach(), m.linear.weight.detach().view(5, *out, 4), lib.tensor(target),
            reduction="sum")
        results.append((repr(m), loss.detach().numpy(), leaf.grad.numpy(),
                        m.linear.weight.grad.numpy(), direct.item()))
    assert results[1][0] == results[0][0]
    for w, g in zip(results[0][1:], results[1][1:]):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_linear_cross_entropy_errors():
    for lib in (torch, fusegrad):
        F = lib.nn.functional
        with pytest.raises(RuntimeError, match="expected input with dimensionality 1 or 2, "
                           "got 3"):
            F.linear_cross_entropy(lib.ones(2, 2, 4), lib.ones(5, 4), lib.zeros(2))
        with pytest.raises(RuntimeError, match="expected equal input and linear_weight last "
                           "dimensions"):
            F.linear_cross_entropy(lib.ones(2, 3), lib.ones(5, 4), lib.zeros(2))
        with pytest.raises(RuntimeError, match="requires batched input"):
            F.linear_cross_entropy(lib.ones(4), lib.ones(5, 2, 4), lib.zeros(2))
