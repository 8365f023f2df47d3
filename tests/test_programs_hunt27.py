"""What programs written for PyTorch found, checked against torch: an einsum whose product is
permuted to the output's order ends in a view (`ViewBackward0`); `mse_loss` of a half type
rounds the difference and its square to it and the reduction once; softmax of a half type over
a dim other than the last rounds the exponentials its vectors leave over; adaptive_avg_pool2d's
gradient of a half type is divided by each window extent in turn; softshrink and hardshrink
export to ONNX (NaN kept, as PyTorch's kernels keep it)."""

import contextlib
import io
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from program_support import check_program  # noqa: E402

import fusegrad as fg  # noqa: E402


def einsum_attention_variants(torch):
    """Grouped-query, talking-heads, linear and bilinear attention written with einsum."""
    F = torch.nn.functional
    torch.manual_seed(45)
    B, H, L, Dh, G = 2, 4, 3, 2, 2
    q = torch.randn(B, H, L, Dh, requires_grad=True)
    k = torch.randn(B, G, L, Dh, requires_grad=True)
    v = torch.randn(B, G, L, Dh, requires_grad=True)
    qg = q.view(B, G, H // G, L, Dh)
    s = torch.einsum("bghid,bgjd->bghij", qg, k) * Dh ** -0.5
    s = s.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf"))
    o = torch.einsum("bghij,bgjd->bghid", s.softmax(-1), v).reshape(B, H, L, Dh)
    talking = torch.einsum("bhij,hk->bkij", s.reshape(B, H, L, L).softmax(-1),
                           torch.eye(H) + 0.1)
    lin = torch.einsum("bhnd,bhne->bhde", F.elu(k) + 1, v)
    bil = torch.einsum("...d,de,...e->...", q[..., 0, :], torch.eye(Dh), q[..., 1, :])
    (o.sum() + talking.pow(2).sum() + lin.sum() + bil.sum()).backward()
    return o, talking, lin, bil, q.grad, k.grad, v.grad


def bf16_channel_softmax_regression(torch):
    """A bfloat16 1x1 convolution trained to one-hot maps by the squared error of a softmax
    over its channels."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(70)
    rng = np.random.default_rng(70)
    model = nn.Sequential(nn.Conv2d(2, 3, 1), nn.Softmax(dim=1)).to(torch.bfloat16)
    x = torch.tensor(rng.standard_normal((2, 2, 3, 3)).astype(np.float32)).bfloat16()
    target = F.one_hot(torch.tensor(rng.integers(0, 3, (2, 3, 3))), 3).permute(0, 3, 1, 2)
    target = target.to(torch.bfloat16)
    rec = []
    for _ in range(3):
        probs = model(x)
        loss = F.mse_loss(probs, target)
        loss.backward()
        with torch.no_grad():  # (plain SGD)
            for p in model.parameters():
                p -= 0.5 * p.grad
                p.grad = None
        rec.append((loss, probs.sum(1)))
    return rec, model[0].weight, F.mse_loss(probs, target, reduction="sum"), \
        F.mse_loss(probs, target, reduction="none")


@pytest.mark.parametrize("prog", [einsum_attention_variants, bf16_channel_softmax_regression],
                         ids=lambda p: p.__name__)
def test_program(prog):
    check_program(prog, torch, fg)


# (equation, operand shapes): products permuted to the output's order (by one pair or the
# last of three), one that needs no permute, and broadcast products (a mul's node)
_EINSUMS = {
    "talking_heads": ("bhij,hk->bkij", [(2, 3, 2, 2), (3, 3)]),
    "right_first": ("hk,bhij->bkij", [(3, 3), (2, 3, 2, 2)]),
    "middle_out": ("abc,cd->adb", [(2, 3, 4), (4, 5)]),
    "batch_last": ("bij,bjk->kib", [(2, 2, 3), (2, 3, 4)]),
    "chain": ("ij,jk,kl->li", [(2, 3), (3, 4), (4, 5)]),
    "in_order": ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    "outer": ("i,j->ji", [(2,), (3,)]),
    "three_mul": ("i,i,j->ji", [(2,), (2,), (3,)]),
}


@pytest.mark.parametrize("name", list(_EINSUMS))
def test_einsum_node_and_layout_are_torchs(name):
    eq, shapes = _EINSUMS[name]
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]

    def run(lib):
        ops = [lib.tensor(a, requires_grad=True) for a in arrays]
        y = lib.einsum(eq, *ops)
        grads = lib.autograd.grad(y.pow(2).sum(), ops)
        return (type(y.grad_fn).__name__, y.stride(), y.detach().numpy(),
                [g.numpy() for g in grads])

    want, got = run(torch), run(fg)
    assert got[:2] == want[:2]
    np.testing.assert_allclose(got[2], want[2], rtol=1e-6, atol=1e-6)
    for g, w in zip(got[3], want[3]):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("scale", [1.0, 30.0])  # (30: a float16 sum past its largest value)
def test_half_mse_loss_rounds_as_torch(dtype, reduction, scale):
    rng = np.random.default_rng(11)
    x0 = (rng.standard_normal((6, 4, 8)) * scale).astype(np.float32)
    y0 = rng.standard_normal((6, 4, 8)).astype(np.float32)

    def run(lib):
        dt = getattr(lib, dtype)
        x = lib.tensor(x0).to(dt).requires_grad_()
        loss = lib.nn.functional.mse_loss(x, lib.tensor(y0).to(dt), reduction=reduction)
        g, = lib.autograd.grad(loss.float().sum(), x)
        return str(loss.dtype), loss.detach().float().numpy(), g.float().numpy()

    want, got = run(torch), run(fg)
    assert got[0] == want[0]
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[2], want[2])


# (shape, dim): the positions after the dim fewer than a vector's 32 lanes, more (40: 8 left
# over), a multiple, and the last dim
_SOFTMAX_DIMS = {"few_0": ((3, 7, 5), 0), "few_1": ((3, 7, 5), 1), "left_over": ((2, 3, 40), 1),
                 "whole_vectors": ((2, 3, 64), 1), "last": ((3, 7, 5), 2)}


@pytest.mark.parametrize("case", list(_SOFTMAX_DIMS))
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_softmax_over_any_dim_rounds_as_torch(dtype, case):
    """(Torch with one thread, as the suite runs it: its threads split the positions.)"""
    shape, dim = _SOFTMAX_DIMS[case]
    x0 = (np.random.default_rng(5).standard_normal(shape) * 3).astype(np.float32)

    def run(lib):
        return lib.softmax(lib.tensor(x0).to(getattr(lib, dtype)), dim).float().numpy()

    with _torch_threads(1):
        want = run(torch)
    np.testing.assert_array_equal(run(fg), want)


@contextlib.contextmanager
def _torch_threads(n: int):
    """torch's intra-op threads set to `n` while the block runs."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("size", [(3, 2), (2, 3), 2, (6, 1)])
def test_half_adaptive_avg_pool2d_gradient_rounds_as_torch(size, dtype, channels_last):
    """Windows of 2x3, 3x2, 3x3 and 1x6 cells: the gradient divided by each extent in turn."""
    rng = np.random.default_rng(2)
    x0 = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    g0 = rng.standard_normal((2, 3) + ((size, size) if isinstance(size, int) else size))

    def run(lib):
        x = lib.tensor(x0).to(getattr(lib, dtype))
        if channels_last:
            x = x.contiguous(memory_format=lib.channels_last)
        x.requires_grad_()
        y = lib.nn.functional.adaptive_avg_pool2d(x, size)
        y.backward(lib.tensor(g0.astype(np.float32)).to(y.dtype))
        return y.detach().float().numpy(), x.grad.float().numpy(), x.grad.stride()

    want, got = run(torch), run(fg)
    assert got[2] == want[2]
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-2)


def test_shrinks_export_to_onnx():
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    F = fg.nn.functional

    class Shrinks(fg.nn.Module):
        def forward(self, x):
            return (F.softshrink(x), F.hardshrink(x), F.softshrink(x, 1.0),
                    F.hardshrink(x, lambd=0.25), fg.nn.Softshrink(0.3)(x))

    values = [float("nan"), 0.5, -0.5, 0.7, -2.0, float("inf"), 0.2, -0.3, 1.0, -1.0]
    for dtype in ("float32", "float64"):
        x = np.array(values, dtype)
        buf = io.BytesIO()
        fg.onnx.export(Shrinks(), (fg.tensor(x),), buf)
        session = ort.InferenceSession(buf.getvalue())
        got = session.run(None, {session.get_inputs()[0].name: x})
        T = torch.nn.functional
        t = torch.tensor(x)
        want = (T.softshrink(t), T.hardshrink(t), T.softshrink(t, 1.0), T.hardshrink(t, 0.25),
                T.softshrink(t, 0.3))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w.numpy())
