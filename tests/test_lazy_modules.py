"""Lazy modules, their placeholders, Buffer, Container, NLLLoss2d and SyncBatchNorm against
PyTorch: reprs before and after the first call, the class they become, the shapes they infer,
state_dict keys, errors, and outputs equal to PyTorch's given the same parameters."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

RNG = np.random.default_rng(3)

CASES = [
    ("LazyLinear", (4,), {}, (2, 3)),
    ("LazyLinear", (4,), {"bias": False}, (5, 2, 3)),
    ("LazyConv1d", (4, 3), {"padding": 1}, (2, 3, 7)),
    ("LazyConv2d", (6, 3), {"groups": 2, "stride": 2}, (2, 4, 7, 6)),
    ("LazyConv2d", (5, 3), {}, (2, 6, 6)),
    ("LazyConvTranspose1d", (4, 3), {"stride": 2}, (2, 3, 5)),
    ("LazyConvTranspose2d", (4, 2), {"groups": 2}, (1, 6, 3, 3)),
    ("LazyBatchNorm1d", (), {}, (4, 3)),
    ("LazyBatchNorm2d", (), {"affine": False}, (2, 3, 4, 4)),
    ("LazyInstanceNorm1d", (), {}, (2, 3, 5)),
    ("LazyInstanceNorm2d", (), {"affine": True, "track_running_stats": True}, (2, 3, 4, 4)),
    ("LazyInstanceNorm3d", (), {"affine": True}, (2, 3, 2, 2, 2)),
]


@pytest.mark.parametrize("name, args, kwargs, shape", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_lazy_module_becomes_its_class(name, args, kwargs, shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    mods = {}
    for lib in (torch, fusegrad):
        m = getattr(lib.nn, name)(*args, **kwargs)
        before = (repr(m), list(m.state_dict()), m.has_uninitialized_params(),
                  sorted((n, type(p).__name__) for n, p in m.named_parameters()))
        out = m(lib.tensor(x))
        after = (repr(m), type(m).__name__, m.has_uninitialized_params()
                 if hasattr(m, "has_uninitialized_params") else None,
                 {k: tuple(v.shape) for k, v in m.state_dict().items()},
                 sorted((n, type(p).__name__) for n, p in m.named_parameters()),
                 sorted((n, type(b).__name__.replace("fusegrad", "torch"))
                        for n, b in m.named_buffers()), tuple(out.shape))
        mods[lib] = (m, before, after)
    assert mods[fusegrad][1] == mods[torch][1]
    assert mods[fusegrad][2] == mods[torch][2]
    # the same parameters give the same output
    tm, fm = mods[torch][0], mods[fusegrad][0]
    fm.load_state_dict({k: fusegrad.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    tm.eval()
    fm.eval()
    want = tm(torch.tensor(x)).detach().numpy()
    got = fm(fusegrad.tensor(x)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_lazy_defaults_are_initialised_like_the_eager_class():
    fusegrad.manual_seed(0)
    lazy = fusegrad.nn.LazyLinear(50)
    lazy(fusegrad.ones(1, 40))
    bound = 1 / np.sqrt(40)
    assert float(lazy.weight.abs().max()) <= bound and float(lazy.bias.abs().max()) <= bound
    assert float(lazy.weight.std()) > bound / 3  # filled, not left at zero
    bn = fusegrad.nn.LazyBatchNorm1d()
    bn(fusegrad.ones(2, 3))
    assert bn.weight.tolist() == [1.0] * 3 and bn.num_batches_tracked.item() == 1


def test_placeholders():
    for lib in (torch, fusegrad):
        p = lib.nn.UninitializedParameter()
        b = lib.nn.UninitializedBuffer()
        assert repr(p) == "<UninitializedParameter>" and repr(b) == "<UninitializedBuffer>"
        assert p.requires_grad and not b.requires_grad
        assert lib.nn.parameter.is_lazy(p) and not lib.nn.parameter.is_lazy(lib.ones(1))
        with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized "
                           "parameter or buffer"):
            p.shape  # noqa: B018
        p.materialize((2, 3))
        b.materialize(4, dtype=lib.float64)
        assert type(p) is lib.nn.Parameter and p.shape == (2, 3) and p.requires_grad
        assert type(b) is lib.Tensor and b.shape == (4,) and b.dtype == lib.float64


def test_lazy_conv_groups_error():
    for lib in (torch, fusegrad):
        m = lib.nn.LazyConv2d(4, 3, groups=2)
        with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
            m(lib.ones(1, 3, 5, 5))


def test_buffer_registers_itself():
    for lib in (torch, fusegrad):
        class M(lib.nn.Module):
            def __init__(self, lib):
                super().__init__()
                self.kept = lib.nn.Buffer(lib.ones(2))
                self.scratch = lib.nn.Buffer(lib.zeros(3), persistent=False)

        m = M(lib)
        assert list(m.state_dict()) == ["kept"]
        assert [n for n, _ in m.named_buffers()] == ["kept", "scratch"]
        assert type(m.kept) is lib.Tensor and m.kept.tolist() == [1.0, 1.0]


def test_container_and_nllloss2d_warn():
    for lib in (torch, fusegrad):
        with pytest.warns(FutureWarning, match="`nn.Container` is deprecated"):
            c = lib.nn.Container(a=lib.nn.ReLU(), b=lib.nn.Linear(2, 2))
        assert [n for n, _ in c.named_children()] == ["a", "b"]
        with pytest.warns(FutureWarning, match="`NLLLoss2d` has been deprecated"):
            loss = lib.nn.NLLLoss2d(ignore_index=1)
        assert isinstance(loss, lib.nn.NLLLoss)
    x = RNG.standard_normal((2, 3, 4, 4))
    t = RNG.integers(0, 3, (2, 4, 4))
    with pytest.warns(FutureWarning):
        want = torch.nn.NLLLoss2d(ignore_index=1)(torch.tensor(x), torch.tensor(t))
        got = fusegrad.nn.NLLLoss2d(ignore_index=1)(fusegrad.tensor(x), fusegrad.tensor(t))
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)


def test_sync_batchnorm_on_one_process():
    x = RNG.standard_normal((4, 3, 5))
    outs = []
    for lib in (torch, fusegrad):
        net = lib.nn.Sequential(lib.nn.BatchNorm1d(3), lib.nn.Linear(5, 2))
        conv = lib.nn.SyncBatchNorm.convert_sync_batchnorm(net)
        assert conv[0].weight is net[0].weight and conv[1] is net[1]
        sbn = lib.nn.SyncBatchNorm(3, momentum=0.3).double()
        leaf = lib.tensor(x, requires_grad=True)
        out = sbn(leaf)
        out.sum().backward()
        with pytest.raises(ValueError, match=r"expected at least 2D input \(got 1D input\)"):
            sbn(lib.ones(3))
        outs.append((repr(conv), out.detach().numpy(), leaf.grad.numpy(),
                     sbn.running_mean.numpy(), sbn.running_var.numpy()))
    assert outs[1][0] == outs[0][0]
    for w, g in zip(outs[0][1:], outs[1][1:]):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("size, channels", [(1, 4), (2, 5), (3, 7), (4, 3), (5, 8), (9, 4)])
def test_cross_map_lrn2d(size, channels):
    """Values as PyTorch's; gradients those of the forward, by finite differences (PyTorch's
    hand-written backward of this legacy layer fails gradcheck)."""
    x = RNG.standard_normal((2, channels, 3, 2))
    outs = []
    for lib in (torch, fusegrad):
        m = lib.nn.CrossMapLRN2d(size, 1e-2, 0.6, 2.0)
        outs.append((repr(m), m(lib.tensor(x)).numpy()))
        with pytest.raises(ValueError, match="CrossMapLRN2d: Expected input to be 4D, got 3D "
                           "instead."):
            m(lib.ones(2, 3, 4))
    assert outs[1][0] == outs[0][0]
    np.testing.assert_allclose(outs[1][1], outs[0][1], rtol=1e-10, atol=1e-12)
    m = fusegrad.nn.CrossMapLRN2d(size, 1e-2, 0.6, 2.0)
    leaf = fusegrad.tensor(x[:1, :, :2, :1], requires_grad=True)
    assert fusegrad.autograd.gradcheck(lambda t: m(t), (leaf,))
