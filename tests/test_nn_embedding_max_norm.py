"""embedding / embedding_bag with `max_norm` (the looked-up weight rows renormalised in place,
outside the graph) and embedding_bag's other options, against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad


def _pair(shape, scale=2.0, seed=0):
    w = np.random.default_rng(seed).standard_normal(shape) * scale
    return (torch.nn.Parameter(torch.tensor(w)), fusegrad.nn.Parameter(fusegrad.tensor(w)))


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf")])
@pytest.mark.parametrize("max_norm", [0.5, 1.0, 4.0])
def test_embedding_max_norm(max_norm, norm_type):
    wt, wf = _pair((7, 5))
    idx = [[0, 3, 3], [6, 1, 0]]
    yt = torch.nn.functional.embedding(torch.tensor(idx), wt, max_norm=max_norm,
                                       norm_type=norm_type)
    yf = fusegrad.nn.functional.embedding(fusegrad.tensor(idx), wf, max_norm=max_norm,
                                          norm_type=norm_type)
    np.testing.assert_allclose(wf.detach().numpy(), wt.detach().numpy(), rtol=1e-12)
    assert wf._version == wt._version
    np.testing.assert_allclose(yf.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    assert type(yf.grad_fn).__name__ == type(yt.grad_fn).__name__
    g = np.random.default_rng(1).standard_normal(tuple(yt.shape))
    yt.backward(torch.tensor(g))
    yf.backward(fusegrad.tensor(g))
    np.testing.assert_allclose(wf.grad.numpy(), wt.grad.numpy(), rtol=1e-12)


def test_embedding_module_max_norm_float32():
    ref = torch.nn.Embedding(10, 4, max_norm=1.0, padding_idx=2)
    mod = fusegrad.nn.Embedding(10, 4, max_norm=1.0, padding_idx=2)
    mod.weight.data = fusegrad.tensor(ref.weight.detach().numpy().copy() * 3)
    with torch.no_grad():
        ref.weight.mul_(3)
    idx = [1, 2, 5, 5, 9]
    out_t, out_f = ref(torch.tensor(idx)), mod(fusegrad.tensor(idx))
    np.testing.assert_allclose(out_f.detach().numpy(), out_t.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(mod.weight.detach().numpy(), ref.weight.detach().numpy(),
                               rtol=1e-6)
    assert repr(mod) == repr(ref)


def test_embedding_renorm_errors():
    cases = [(lambda m: m.randn(5, 4), lambda m: m.tensor([0.0])),
             (lambda m: m.randn(5), lambda m: m.tensor([1])),
             (lambda m: m.randn(5, 4), lambda m: m.tensor([7]))]
    for make_w, make_i in cases:
        with pytest.raises(Exception) as e:
            torch.embedding_renorm_(make_w(torch), make_i(torch), 1.0, 2.0)
        with pytest.raises(type(e.value)) as err:
            fusegrad.embedding_renorm_(make_w(fusegrad), make_i(fusegrad), 1.0, 2.0)
        assert str(err.value) == str(e.value)
    with pytest.raises(RuntimeError) as e:  # a leaf that requires grad, not under no_grad
        torch.embedding_renorm_(torch.randn(5, 4, requires_grad=True), torch.tensor([1]),
                                1.0, 2.0)
    with pytest.raises(RuntimeError) as err:
        fusegrad.embedding_renorm_(fusegrad.randn(5, 4, requires_grad=True),
                                   fusegrad.tensor([1]), 1.0, 2.0)
    assert str(err.value) == str(e.value)


BAG_CASES = [
    dict(mode="sum", max_norm=1.0),
    dict(mode="mean", max_norm=0.7, norm_type=1.0),
    dict(mode="max", max_norm=1.5),
    dict(mode="sum", per_sample_weights=True),
    dict(mode="sum", per_sample_weights=True, padding_idx=3),
    dict(mode="mean", padding_idx=3, include_last_offset=True),
    dict(mode="max", include_last_offset=True),
    dict(mode="sum", per_sample_weights=True, max_norm=1.0, include_last_offset=True),
    dict(mode="sum", scale_grad_by_freq=True),
    dict(mode="mean", scale_grad_by_freq=True, padding_idx=3),
    dict(mode="sum", scale_grad_by_freq=True, per_sample_weights=True),
]


@pytest.mark.parametrize("case", range(len(BAG_CASES)))
def test_embedding_bag_options(case):
    kw = dict(BAG_CASES[case])
    wt, wf = _pair((6, 3), seed=case)
    idx = [0, 3, 3, 5, 1, 2, 3, 4]
    offsets = [0, 2, 2, 5] + ([8] if kw.get("include_last_offset") else [])
    psw_t = psw_f = None
    if kw.pop("per_sample_weights", False):
        p = np.random.default_rng(3).standard_normal(len(idx))
        psw_t = torch.tensor(p, requires_grad=True)
        psw_f = fusegrad.tensor(p, requires_grad=True)
    yt = torch.nn.functional.embedding_bag(torch.tensor(idx), wt, torch.tensor(offsets),
                                           per_sample_weights=psw_t, **kw)
    yf = fusegrad.nn.functional.embedding_bag(fusegrad.tensor(idx), wf,
                                              fusegrad.tensor(offsets),
                                              per_sample_weights=psw_f, **kw)
    np.testing.assert_allclose(wf.detach().numpy(), wt.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(yf.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    assert type(yf.grad_fn).__name__ == type(yt.grad_fn).__name__
    g = np.random.default_rng(1).standard_normal(tuple(yt.shape))
    yt.backward(torch.tensor(g))
    yf.backward(fusegrad.tensor(g))
    np.testing.assert_allclose(wf.grad.numpy(), wt.grad.numpy(), rtol=1e-12, atol=1e-12)
    if psw_t is not None:
        np.testing.assert_allclose(psw_f.grad.numpy(), psw_t.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("mode", ["sum", "mean"])
@pytest.mark.parametrize("seed", range(6))
def test_embedding_bag_scale_grad_by_freq(mode, seed):
    """The gradient divisors PyTorch's CPU backward uses, on random bags with repeats."""
    rng = np.random.default_rng(seed)
    wt, wf = _pair((9, 2), seed=seed)
    idx = rng.integers(0, 9, 14)
    offsets = np.sort(rng.choice(np.arange(1, 14), 3, replace=False))
    offsets = np.concatenate([[0], offsets])
    yt = torch.nn.functional.embedding_bag(torch.tensor(idx), wt, torch.tensor(offsets),
                                           mode=mode, scale_grad_by_freq=True)
    yf = fusegrad.nn.functional.embedding_bag(fusegrad.tensor(idx), wf,
                                              fusegrad.tensor(offsets), mode=mode,
                                              scale_grad_by_freq=True)
    g = rng.standard_normal(tuple(yt.shape))
    yt.backward(torch.tensor(g))
    yf.backward(fusegrad.tensor(g))
    np.testing.assert_allclose(wf.grad.numpy(), wt.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_embedding_bag_max_mode_refuses_scale_grad_by_freq():
    with pytest.raises(ValueError) as e:
        torch.nn.functional.embedding_bag(torch.tensor([0, 1]), torch.zeros(3, 2),
                                          torch.tensor([0]), mode="max",
                                          scale_grad_by_freq=True)
    with pytest.raises(ValueError) as err:
        fusegrad.nn.functional.embedding_bag(fusegrad.tensor([0, 1]), fusegrad.zeros(3, 2),
                                             fusegrad.tensor([0]), mode="max",
                                             scale_grad_by_freq=True)
    assert str(err.value) == str(e.value)


def test_embedding_bag_module_max_norm():
    ref = torch.nn.EmbeddingBag(8, 3, max_norm=1.0, mode="max")
    mod = fusegrad.nn.EmbeddingBag(8, 3, max_norm=1.0, mode="max")
    mod.weight.data = fusegrad.tensor(ref.weight.detach().numpy() * 2)
    with torch.no_grad():
        ref.weight.mul_(2)
    idx = [[0, 1, 7], [7, 2, 2]]
    np.testing.assert_allclose(mod(fusegrad.tensor(idx)).detach().numpy(),
                               ref(torch.tensor(idx)).detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(mod.weight.detach().numpy(), ref.weight.detach().numpy(),
                               rtol=1e-6)
    assert repr(mod) == repr(ref)


def test_float32_scale_computed_in_double():
    """The scale of a float32 row is computed in double, as PyTorch's: max_norm / (norm +
    1e-7), the 1e-7 kept beside a norm of 3 (in float32 it is lost: one ulp off)."""
    rows = [[1.0, 2.0, 2.0], [0.01, 0.02, 0.0], [3.0, -4.0, 1.5], [0.3, 0.1, 0.7]]
    out = []
    for lib in (torch, fusegrad):
        e = lib.nn.Embedding(4, 3, max_norm=0.1)
        with lib.no_grad():
            e.weight.copy_(lib.tensor(rows))
        out.append(e(lib.tensor([0, 2, 3, 1])).detach().numpy())
    np.testing.assert_array_equal(out[1], out[0])
