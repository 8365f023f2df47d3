"""Eager leftovers against PyTorch 2.13 (CPU), bit for bit where PyTorch's order of operations
could be found by experiment: gelu(approximate='tanh')'s gradient (C kernel and NumPy path
alike), the divisor's gradient of `/` (cosine_similarity's in half types), addcmul/addcdiv,
Adam/AdamW in float16/bfloat16 (single-tensor and foreach), nll_loss's reduction in every
float dtype; the nodes a gradient taken with create_graph records (the activations'
backward ops, pow's mul.Scalar, repeat's sums) and the second gradients; and fake_quantize
on the meta device."""

import numpy as np
import pytest
import torch

import fusegrad
from fusegrad.ops import _native

RNG = np.random.default_rng(2024)
HALVES = ["float16", "bfloat16"]


def _bits(t) -> np.ndarray:
    """A tensor's values as float64 (every half or float32 value exactly)."""
    return t.detach().to(t.dtype if t.dtype.is_floating_point else None).double().numpy()


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise equality with NaN equal to NaN."""
    return (a == b) | (np.isnan(a) & np.isnan(b))


# ---------------------------------------------------------------- gelu's tanh gradient


@pytest.mark.parametrize("native", [True, False], ids=["C", "numpy"])
@pytest.mark.parametrize("dtype", HALVES + ["float32"])
def test_gelu_tanh_gradient_matches_torch(dtype, native):
    x = (RNG.standard_normal(4096) * 3).astype(np.float32)
    x[:4] = [9.0, -9.0, 8.7, 0.0]  # past the saturation of PyTorch's tanh, and zero
    g = RNG.standard_normal(4096).astype(np.float32)
    grads = []
    for lib in (torch, fusegrad):
        d = getattr(lib, dtype)
        xt = lib.tensor(x).to(d).requires_grad_()
        with _native.native_kernels(native):
            lib.nn.functional.gelu(xt, approximate="tanh").backward(lib.tensor(g).to(d))
        grads.append(_bits(xt.grad))
    off = ~_same(*grads)
    if dtype == "float32":  # (PyTorch's tanh is a polynomial: an ulp apart now and then)
        assert off.mean() < 2e-3
    else:
        assert not off.any(), x[off][:5]


# ---------------------------------------------------------------- division and addc*


@pytest.mark.parametrize("dtype", ["float64", "float32"] + HALVES)
def test_divisor_gradient_matches_torch(dtype):
    a, b, g = (RNG.standard_normal(2000) for _ in range(3))
    b = b + 2.5
    grads = []
    for lib in (torch, fusegrad):
        d = getattr(lib, dtype)
        x, y = lib.tensor(a).to(d).requires_grad_(), lib.tensor(b).to(d).requires_grad_()
        (x / y).backward(lib.tensor(g).to(d))
        grads.append((_bits(x.grad), _bits(y.grad)))
    for p, q in zip(*grads):
        assert _same(p, q).all()


@pytest.mark.parametrize("dtype", HALVES)
def test_cosine_similarity_gradients_match_torch(dtype):
    a, b = (RNG.standard_normal((32, 17)).astype(np.float32) for _ in range(2))
    go = RNG.standard_normal(32).astype(np.float32)
    grads = []
    for lib in (torch, fusegrad):
        d = getattr(lib, dtype)
        x, y = lib.tensor(a).to(d).requires_grad_(), lib.tensor(b).to(d).requires_grad_()
        lib.nn.functional.cosine_similarity(x, y, dim=1).backward(lib.tensor(go).to(d))
        grads.append((_bits(x.grad), _bits(y.grad)))
    for p, q in zip(*grads):
        assert _same(p, q).all()


@pytest.mark.parametrize("value", [0.1, 1e-3, -2.5])
@pytest.mark.parametrize("dtype", ["float64", "float32"] + HALVES)
def test_addcmul_addcdiv_match_torch(dtype, value):
    a, b, c = (RNG.standard_normal(3000) for _ in range(3))
    c = np.abs(c) + 0.5
    out = []
    for lib in (torch, fusegrad):
        d = getattr(lib, dtype)
        x, y, z = (lib.tensor(v).to(d) for v in (a, b, c))
        out.append((_bits(x.addcmul(y, z, value=value)), _bits(x.addcdiv(y, z, value=value))))
    for p, q in zip(*out):
        assert _same(p, q).all()


# ---------------------------------------------------------------- Adam in half types


@pytest.mark.parametrize("options", [
    dict(foreach=False), dict(foreach=True), dict(foreach=True, weight_decay=0.1),
    dict(foreach=False, weight_decay=0.1), dict(foreach=True, amsgrad=True, maximize=True),
    dict(foreach=False, amsgrad=True, weight_decay=0.1)], ids=str)
@pytest.mark.parametrize("name", ["Adam", "AdamW"])
@pytest.mark.parametrize("dtype", HALVES)
def test_adam_in_half_types_matches_torch(dtype, name, options):
    shapes = [(40, 33), (17,)]
    start = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [[RNG.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(5)]
    final = []
    for lib in (torch, fusegrad):
        d = getattr(lib, dtype)
        params = [lib.tensor(p).to(d).requires_grad_() for p in start]
        opt = getattr(lib.optim, name)(params, lr=1e-2, **options)
        for step in grads:
            for p, g in zip(params, step):
                p.grad = lib.tensor(g).to(d)
            opt.step()
        final.append(np.concatenate([_bits(p).ravel() for p in params]))
    assert _same(*final).all()


# ---------------------------------------------------------------- nll_loss's reduction


@pytest.mark.parametrize("native", [True, False], ids=["C", "numpy"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_nll_loss_reduction_matches_torch(dtype, native):
    for n in (3, 17, 100, 257, 4096):
        x = RNG.standard_normal((n, 10))
        y = RNG.integers(0, 10, n)
        w = RNG.random(10) + 0.1
        for kwargs in ({}, {"weight": w}, {"ignore_index": 3}):
            for reduction in ("mean", "sum"):
                out = []
                for lib in (torch, fusegrad):
                    d = getattr(lib, dtype)
                    kw = dict(kwargs, reduction=reduction)
                    if "weight" in kw:
                        kw["weight"] = lib.tensor(w).to(d)
                    with _native.native_kernels(native):
                        loss = lib.nn.functional.nll_loss(lib.tensor(x).to(d), lib.tensor(y),
                                                          **kw)
                    out.append(_bits(loss))
                assert _same(*out).all(), (n, kwargs, reduction)


# ---------------------------------------------------------------- create_graph nodes

ACTIVATIONS = {
    "logsigmoid": lambda F, x: F.logsigmoid(x),
    "elu": lambda F, x: F.elu(x, 0.7),
    "celu": lambda F, x: F.celu(x, 1.5),
    "selu": lambda F, x: F.selu(x),
    "softplus": lambda F, x: F.softplus(x, 2.0, 3.0),
    "hardswish": lambda F, x: F.hardswish(x),
    "gelu": lambda F, x: F.gelu(x),
    "gelu_tanh": lambda F, x: F.gelu(x, approximate="tanh"),
    "sigmoid": lambda F, x: F.sigmoid(x),
    "tanh": lambda F, x: F.tanh(x),
    "tanhshrink": lambda F, x: F.tanhshrink(x),
    "softshrink": lambda F, x: F.softshrink(x, 0.5),
    "hardshrink": lambda F, x: F.hardshrink(x, 0.5),
    "softmax": lambda F, x: F.softmax(x, -1),
    "log_softmax": lambda F, x: F.log_softmax(x, 0),
    "leaky_relu_": lambda F, x: F.leaky_relu(x * 1, 0.1, inplace=True),
    "silu": lambda F, x: F.silu(x),
    "mish": lambda F, x: F.mish(x),
    "glu": lambda F, x: F.glu(x, 0),
    "prelu": lambda F, x: F.prelu(x, x.new_ones(1) * 0.25),
    "prelu_weight": lambda F, x: F.prelu(x, (x * x).sum(0)),
    "pow": lambda F, x: x ** 3,
    "repeat": lambda F, x: (x * x).repeat(2, 1, 2),
    "repeat_ones": lambda F, x: (x * x).repeat(1, 1),
}


def _node(t):
    return None if t.grad_fn is None else type(t.grad_fn).__name__


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_create_graph_records_torch_nodes(name):
    """The first gradient's node and the second gradient's (names and values, float64)."""
    values = np.array([[-2.5, -0.3, 0.4, 1.7], [0.2, -1.1, 2.2, -0.05]])
    got = []
    for lib in (torch, fusegrad):
        x = lib.tensor(values, requires_grad=True)
        y = ACTIVATIONS[name](lib.nn.functional, x)
        weights = lib.arange(float(y.shape[-1]), dtype=lib.float64)
        (g,) = lib.autograd.grad((y * weights).sum(), x, create_graph=True)
        (g2,) = lib.autograd.grad((g * g).sum(), x, create_graph=True, allow_unused=True)
        got.append((_node(g), None if g2 is None else _node(g2), g.detach().numpy(),
                    None if g2 is None else g2.detach().numpy()))
    assert got[0][:2] == got[1][:2]
    for p, q in zip(got[0][2:], got[1][2:]):
        np.testing.assert_allclose(q, p, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- fake_quantize on meta

FAKE_QUANTIZE = {
    "per_tensor": lambda L, x: L.fake_quantize_per_tensor_affine(x, 0.1, 0, 0, 255),
    "tensor_qparams": lambda L, x: L.fake_quantize_per_tensor_affine(
        x, L.tensor(0.1, device="meta"), L.tensor(0, dtype=L.int32, device="meta"), 0, 255),
    "per_channel": lambda L, x: L.fake_quantize_per_channel_affine(
        x, L.ones(4, device="meta"), L.zeros(4, dtype=L.int32, device="meta"), 1, 0, 255),
    "bad_range": lambda L, x: L.fake_quantize_per_tensor_affine(x, 0.1, 0, 255, 0),
}


@pytest.mark.parametrize("name", sorted(FAKE_QUANTIZE))
def test_fake_quantize_on_meta_raises_as_torch(name):
    errors = []
    for lib in (torch, fusegrad):
        x = lib.empty(3, 4, device="meta", requires_grad=True)
        with pytest.raises(Exception) as info:
            FAKE_QUANTIZE[name](lib, x)
        errors.append((type(info.value).__name__, str(info.value)))
    assert errors[0] == errors[1]
    assert errors[0][0] == "NotImplementedError"
