"""Window functions, F.normalize, F.gumbel_softmax, the deprecated upsample spellings and the
Upsampling modules, against PyTorch."""

import warnings

import numpy as np
import pytest
import torch

import fusegrad

WINDOWS = ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
           "kaiser_window"]


@pytest.mark.parametrize("name", WINDOWS)
def test_windows_match_pytorch(name):
    for n in (0, 1, 2, 3, 5, 8, 17, 64):
        for periodic in (True, False):
            for dt in ("float32", "float64"):
                want = getattr(torch, name)(n, periodic, dtype=getattr(torch, dt))
                got = getattr(fusegrad, name)(n, periodic, dtype=getattr(fusegrad, dt))
                assert got.dtype.name == dt and tuple(got.shape) == tuple(want.shape)
                np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-6, atol=1e-7)


WINDOW_CASES = ["L.hann_window(5, dtype=L.int64)", "L.hann_window(-1)", "L.hann_window(3.0)",
                "L.hamming_window(4, True, 0.5, 0.5).tolist()",
                "L.hann_window(3, requires_grad=True).requires_grad",
                "L.kaiser_window(6, True, 3.0).shape", "str(L.blackman_window(4).dtype)"]


@pytest.mark.parametrize("expr", WINDOW_CASES)
def test_window_arguments_as_pytorch(expr):
    def outcome(lib):
        try:
            return repr(eval(expr, {"L": lib}))
        except Exception as e:  # noqa: BLE001 (the error is what is compared)
            return f"{type(e).__name__}: {e}"
    assert outcome(fusegrad) == outcome(torch)


@pytest.mark.parametrize("p, dim", [(2.0, 1), (1.0, -1), (3.0, 0), (float("inf"), 2)])
def test_normalize_values_graph_and_gradients(p, dim):
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    x[0, :, 0] = 0.0  # a zero vector: eps keeps it finite
    w = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    res = []
    for lib in (torch, fusegrad):
        t = lib.tensor(x, requires_grad=True)
        y = lib.nn.functional.normalize(t, p=p, dim=dim)
        (y * lib.tensor(w)).sum().backward()
        res.append((y.detach().numpy(), t.grad.numpy(), type(y.grad_fn).__name__,
                    [type(n[0]).__name__ for n in y.grad_fn.next_functions]))
    np.testing.assert_allclose(res[1][0], res[0][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-4, atol=1e-5)
    assert res[1][2:] == res[0][2:]


def test_gumbel_softmax_samples_follow_the_softmax():
    logits = fusegrad.tensor([[1.0, 0.0, -1.0, 2.0]]).expand(4000, 4)
    fusegrad.manual_seed(0)
    soft = fusegrad.nn.functional.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_allclose(soft.sum(-1).numpy(), 1.0, rtol=1e-5)
    freq = np.bincount(soft.argmax(-1).numpy(), minlength=4) / 4000
    want = torch.softmax(torch.tensor([1.0, 0.0, -1.0, 2.0]), 0).numpy()
    np.testing.assert_allclose(freq, want, atol=0.03)
    leaf = fusegrad.zeros(5, 3, requires_grad=True)
    hard = fusegrad.nn.functional.gumbel_softmax(leaf, hard=True)
    assert sorted(np.unique(hard.detach().numpy())) == [0.0, 1.0]
    assert hard.sum(-1).tolist() == [1.0] * 5
    (hard * fusegrad.arange(3.0)).sum().backward()  # straight through: the soft gradient
    assert leaf.grad is not None and float(leaf.grad.abs().sum()) > 0


def test_deprecated_upsample_spellings_and_modules():
    x = np.random.default_rng(2).standard_normal((1, 2, 3, 3)).astype(np.float32)
    for call in ("upsample(t, scale_factor=2)", "upsample(t, size=5, mode='bilinear')",
                 "upsample_nearest(t, scale_factor=2)", "upsample_bilinear(t, size=(4, 6))"):
        got = []
        for lib in (torch, fusegrad):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                y = eval(f"F.{call}", {"F": lib.nn.functional, "t": lib.tensor(x)})
            got.append((y.numpy(), [str(m.message) for m in w]))
        np.testing.assert_allclose(got[1][0], got[0][0], rtol=1e-5, atol=1e-6)
        assert got[1][1] == got[0][1]
    for name, kw in (("UpsamplingNearest2d", {"scale_factor": 2}),
                     ("UpsamplingBilinear2d", {"size": (5, 4)})):
        mods = [getattr(lib.nn, name)(**kw) for lib in (torch, fusegrad)]
        assert repr(mods[1]) == repr(mods[0])
        np.testing.assert_allclose(mods[1](fusegrad.tensor(x)).numpy(),
                                   mods[0](torch.tensor(x)).numpy(), rtol=1e-5, atol=1e-6)
