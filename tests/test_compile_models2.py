"""Small real models compiled with AOT autograd (`aot_eager`) and code generation
(`inductor`) against eager fusegrad: outputs, gradients, parameters after several SGD steps
and buffers (BatchNorm statistics), with no graph left to eager execution (an AOT
fallback or a graph the code generator gives up on). Also: in-place metadata ops
(`transpose_`, as the GRU module uses), outputs that are views of one another, random
factories inside a graph, dynamic batch sizes, no_grad / inference_mode, and double
backward through a compiled function (an error, as PyTorch's). Runs without torch.
"""

from __future__ import annotations

import numpy as np
import pytest
from aot_models import compiler_logs

import fusegrad

BACKENDS = ("aot_eager", "inductor")
nn = fusegrad.nn
F = fusegrad.nn.functional


# ---------------------------------------------------------------- the models


class ResBlock(nn.Module):
    def __init__(self, c: int = 3):
        super().__init__()
        self.c1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(c)
        self.c2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        return F.relu(self.b2(self.c2(y)) + x)


class GruLM(nn.Module):
    """An embedding, a GRU (its module turns its output around with `transpose_`) and a
    head."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(9, 4)
        self.rnn = nn.GRU(4, 5, batch_first=True)
        self.head = nn.Linear(5, 9)

    def forward(self, idx):
        h, _ = self.rnn(self.emb(idx))
        return self.head(h)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)

    def forward(self, x, mask):
        return self.enc(x, src_key_padding_mask=mask).masked_fill(mask[..., None], 0.0)


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.d1 = nn.Conv2d(2, 3, 3, padding=1)
        self.d2 = nn.Conv2d(3, 4, 3, padding=1, stride=2)
        self.up = nn.ConvTranspose2d(4, 3, 2, stride=2)
        self.out = nn.Conv2d(6, 1, 1)

    def forward(self, x):
        a = F.relu(self.d1(x))
        b = F.relu(self.d2(a))
        u = self.up(b) + F.interpolate(b, scale_factor=2, mode="bilinear")[:, :3] + \
            F.interpolate(b, size=a.shape[-2:], mode="nearest")[:, 1:]
        return self.out(fusegrad.cat([a, u], 1))


class MoE(nn.Module):
    def __init__(self, d: int = 4, experts: int = 3):
        super().__init__()
        self.gate = nn.Linear(d, experts)
        self.experts = nn.ModuleList([nn.Linear(d, d) for _ in range(experts)])

    def forward(self, x):
        w, idx = self.gate(x).softmax(-1).topk(2, dim=-1)
        w = w / w.sum(-1, keepdim=True)
        out = fusegrad.zeros_like(x)
        for e, expert in enumerate(self.experts):
            out = out + (w * (idx == e).to(x.dtype)).sum(-1, keepdim=True) * expert(x)
        load = fusegrad.zeros(len(self.experts)).scatter_add(
            0, idx.reshape(-1), fusegrad.ones(idx.numel()))
        return out, load


class ViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, 8, 4, stride=4)
        self.cls = nn.Parameter(fusegrad.randn(1, 1, 8) * 0.1)
        self.ln1 = nn.LayerNorm(8)
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.ln2 = nn.LayerNorm(8)
        self.mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        p = self.patch(x).flatten(2).transpose(1, 2)
        p = fusegrad.cat([self.cls.expand(x.shape[0], -1, -1), p], 1)
        h = self.ln1(p)
        p = p + self.attn(h, h, h, need_weights=False)[0]
        p = p + self.mlp(self.ln2(p))
        return self.head(p[:, 0])


class InPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 5)

    def forward(self, x, y):
        h = self.lin(x)
        h[:, :2] += y
        h.masked_fill_(h > 1.0, 0.5)
        h.clamp_(-1, 1)
        h.view(-1)[::3].mul_(2)
        return h


class Reductions(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        mean = h.mean(1, keepdim=True)
        var = h.var(dim=-1, keepdim=True)
        total = h.sum(dim=(0, 2), keepdim=True)
        low, at = h.min(dim=1)
        return ((h - mean) / (var + 1).sqrt() * total + h.amax(dim=(1, 2))[:, None, None]
                + h.logsumexp(-1, keepdim=True) + h.norm(dim=1).sum() + low.mean()
                + at.float().sum())


class Mixed(nn.Module):
    """float64 inputs, int indices and bool masks beside float32 parameters."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.emb = nn.Embedding(7, 4)

    def forward(self, x64, idx, mask):
        h = self.lin((x64 + self.emb(idx).double()).float()).double()
        h = fusegrad.where(mask[..., None], h, fusegrad.zeros((), dtype=fusegrad.float64))
        g = h.gather(2, (idx[..., None] % 4).expand(-1, -1, 2))
        return g.sum(-1) + idx.sum().to(fusegrad.float64) + mask.sum(1, keepdim=True)


def _rand(seed: int, *shape, dtype=None) -> fusegrad.Tensor:
    x = np.random.default_rng(seed).standard_normal(shape)
    return fusegrad.tensor(x, dtype=dtype or fusegrad.float32)


def _ints(seed: int, high: int, *shape) -> fusegrad.Tensor:
    return fusegrad.tensor(np.random.default_rng(seed).integers(0, high, shape))


def _padding(seed: int) -> fusegrad.Tensor:
    mask = np.zeros((2, 4), bool)
    mask[0, 3 - seed % 2:] = True
    return fusegrad.tensor(mask)


def _sq(out, *args):
    outs = out if isinstance(out, tuple) else (out,)
    return sum((o.float() ** 2).mean() for o in outs if o.requires_grad)


def _ce(vocab: int):
    return lambda out, idx: F.cross_entropy(out.reshape(-1, vocab), idx.reshape(-1))


MODELS = {  # name: (module class, train mode, inputs of step s, loss)
    "resnet_train": (ResBlock, True, lambda s: (_rand(s, 2, 3, 5, 5),), _sq),
    "resnet_eval": (ResBlock, False, lambda s: (_rand(s, 2, 3, 5, 5),), _sq),
    "gru_lm": (GruLM, True, lambda s: (_ints(s, 9, 2, 5),), _ce(9)),
    "encoder_padding": (Encoder, True, lambda s: (_rand(s, 2, 4, 8), _padding(s)), _sq),
    "unet": (UNet, True, lambda s: (_rand(s, 1, 2, 6, 6),), _sq),
    "moe": (MoE, True, lambda s: (_rand(s, 5, 4),), _sq),
    "vit": (ViT, True, lambda s: (_rand(s, 2, 3, 8, 8),), _sq),
    "inplace_views": (InPlace, True, lambda s: (_rand(s, 3, 5), _rand(s + 9, 3, 2)), _sq),
    "reductions": (Reductions, True, lambda s: (_rand(s, 2, 3, 4),), _sq),
    "mixed_dtypes": (Mixed, True, lambda s: (_rand(s, 2, 3, 4, dtype=fusegrad.float64),
                                             _ints(s, 7, 2, 3), _rand(s + 5, 2, 3) > 0), _sq),
}


def _arrays(ts) -> list:
    return [t.detach().numpy().copy() for t in ts]


def _train(name: str, backend: str | None, steps: int = 2, **compile_kw) -> list:
    """Outputs, gradients, parameters and buffers after each SGD step."""
    cls, train, inputs, loss_fn = MODELS[name]
    fusegrad.manual_seed(0)
    model = cls()
    model.train(train)
    run = model if backend is None else fusegrad.compile(model, backend=backend, **compile_kw)
    opt = fusegrad.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    record = []
    for s in range(steps):
        args = inputs(s)
        out = run(*args)
        opt.zero_grad()
        loss_fn(out, *args).backward()
        opt.step()
        outs = out if isinstance(out, tuple) else (out,)
        record += _arrays(outs) + _arrays(p.grad for p in model.parameters())
        record += _arrays(model.parameters()) + _arrays(model.buffers())
    return record


def _assert_same(got: list, want: list, tol: float = 1e-4) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def _fallbacks(messages: list) -> list:
    """Log messages of graphs that run eagerly or as FX code instead of compiled."""
    return [m for m in messages if "AOT autograd cannot" in m or "code generator cannot" in m]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_training_matches_eager_without_fallbacks(name, backend):
    fusegrad._dynamo.reset()
    with compiler_logs(graph_breaks=True) as messages:
        got = _train(name, backend)
    assert _fallbacks(messages) == []
    _assert_same(got, _train(name, None))


# ---------------------------------------------------------------- dynamic batch sizes


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(5, 6)
        self.bn = nn.BatchNorm1d(6)
        self.l2 = nn.Linear(6, 3)

    def forward(self, x):
        return self.l2(F.gelu(self.bn(self.l1(x)))).log_softmax(-1)


def _batches(compile_kw: dict | None, sizes=(3, 5, 7)) -> list:
    fusegrad.manual_seed(0)
    model = Net()
    run = model if compile_kw is None else fusegrad.compile(model, **compile_kw)
    opt = fusegrad.optim.SGD(model.parameters(), lr=0.1)
    record = []
    for s, n in enumerate(sizes):
        out = run(_rand(s, n, 5))
        opt.zero_grad()
        (-out[:, 0].mean()).backward()
        opt.step()
        record += _arrays([out]) + _arrays(model.parameters()) + _arrays(model.buffers())
    return record


@pytest.mark.parametrize("dynamic", [True, None])
@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_batch_sizes_match_eager(backend, dynamic):
    fusegrad._dynamo.reset()
    _assert_same(_batches({"backend": backend, "dynamic": dynamic}), _batches(None))


# ---------------------------------------------------------------- inference


@pytest.mark.parametrize("context", ["no_grad", "inference_mode"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_inference_contexts_match_eager(backend, context):
    fusegrad._dynamo.reset()
    fusegrad.manual_seed(0)
    model, ref = Net(), Net()
    ref.load_state_dict(model.state_dict())
    run = fusegrad.compile(model, backend=backend)
    for s, n in enumerate((4, 6)):
        x = _rand(s, n, 5)
        with getattr(fusegrad, context)():
            got, want = run(x), ref(x)
        assert not got.requires_grad and got.is_inference() == want.is_inference()
        _assert_same(_arrays([got, *model.buffers()]), _arrays([want, *ref.buffers()]), 1e-5)


# ---------------------------------------------------------------- double backward


def _tanh_loss(x, w):
    return (fusegrad.tanh(x @ w).pow(2).sum(1) * x[:, 0]).sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_double_backward_raises_as_torch(backend):
    x = _rand(0, 3, 4, dtype=fusegrad.float64).requires_grad_()
    w = _rand(1, 4, 5, dtype=fusegrad.float64).requires_grad_()
    gx, gw = fusegrad.autograd.grad(fusegrad.compile(_tanh_loss, backend=backend)(x, w),
                                    (x, w), create_graph=True)
    ex, ew = fusegrad.autograd.grad(_tanh_loss(x, w), (x, w), create_graph=True)
    # First-order gradients as eager's, with history whose node is named as PyTorch's ...
    _assert_same(_arrays([gx, gw]), _arrays([ex, ew]), 1e-10)
    assert gx.requires_grad and type(gx.grad_fn).__name__ == "CompiledFunctionBackwardBackward"
    # ... and differentiating them again raises PyTorch's error.
    with pytest.raises(RuntimeError, match="does not currently support double backward"):
        fusegrad.autograd.grad(gx.pow(2).sum() + gw.sum(), (x, w))


# ---------------------------------------------------------------- programs AOT traces now


def _transposed_in_place(x):
    y = x * 2
    y.transpose_(0, 1)
    y.unsqueeze_(0)
    return y + 1, y


def _view_before_its_base(x):
    y = x * 2
    return y.t(), y


def _two_views_of_an_intermediate(x):
    y = x * 3
    return y[0], y[1], y.t()


def _with_noise(x):
    noise = fusegrad.randn(x.shape)
    keep = fusegrad.rand(x.shape[1]) > 0.3
    # (randn_like of a transposed tensor draws in its memory order)
    return (x * noise * keep + fusegrad.randint(0, 5, (3, 1)).float(),
            fusegrad.randn_like(x.t()).contiguous())


PROGRAMS = {
    "transpose_ and unsqueeze_": _transposed_in_place,
    "a view returned before its base": _view_before_its_base,
    "views of one intermediate": _two_views_of_an_intermediate,
    "random factories": _with_noise,
}


@pytest.mark.parametrize("requires_grad", [True, False])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_programs_trace_without_fallback(name, backend, requires_grad):
    fn = PROGRAMS[name]
    compiled = fusegrad.compile(fn, backend=backend)
    for seed in range(2):
        arr = np.random.default_rng(seed).standard_normal((3, 2))
        xc, xe = (fusegrad.tensor(arr, dtype=fusegrad.float32, requires_grad=requires_grad)
                  for _ in range(2))
        with compiler_logs(graph_breaks=True) as messages:
            fusegrad.manual_seed(seed)
            got = compiled(xc)
            after = fusegrad.rand(2)  # the generator is where eager leaves it
        assert _fallbacks(messages) == []
        fusegrad.manual_seed(seed)
        want = fn(xe)
        np.testing.assert_array_equal(after.numpy(), fusegrad.rand(2).numpy())
        for g, w in zip(got, want):
            assert g.shape == w.shape
            assert [s for s, n in zip(g.stride(), g.shape) if n > 1] == \
                [s for s, n in zip(w.stride(), w.shape) if n > 1]
            assert (g._base is None) == (w._base is None)
            np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-6)
        with fusegrad.no_grad():  # outputs sharing memory in eager mode share it here too
            got[0].add_(1)
            want[0].add_(1)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-6)
        if requires_grad:
            fusegrad.manual_seed(seed)
            sum(o.sum() for o in compiled(xc)).backward()
            fusegrad.manual_seed(seed)
            sum(o.sum() for o in fn(xe)).backward()
            np.testing.assert_allclose(xc.grad.numpy(), xe.grad.numpy(), rtol=1e-6)


def _aliases_to_eager():
    """Geometry changes that AOT must leave to eager execution (still right answers)."""
    def input_transposed(x):
        x.t_()
        return x * 2

    def view_then_unsqueeze_(x):
        y = x * 2
        v = y[0]
        y.unsqueeze_(0)
        return y + v

    return {"input_transposed": input_transposed, "view_then_unsqueeze_": view_then_unsqueeze_}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(_aliases_to_eager()))
def test_metadata_writes_aot_cannot_express_run_eagerly(name, backend):
    fn = _aliases_to_eager()[name]
    xc, xe = _rand(0, 2, 3), _rand(0, 2, 3)
    with compiler_logs(graph_breaks=True) as messages:
        got = fusegrad.compile(fn, backend=backend)(xc)
    assert any("AOT autograd cannot" in m for m in messages)
    want = fn(xe)
    assert got.shape == want.shape and xc.shape == xe.shape
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("backend", BACKENDS)
def test_graph_returning_detached_inputs_compiles(backend):
    # A graph of placeholders and detaches alone (a training step's `loss.detach()`s).
    a = _rand(0, 3).requires_grad_() * 2
    b = _rand(1, 2).requires_grad_() * 1
    with compiler_logs(graph_breaks=True) as messages:
        got = fusegrad.compile(lambda a, b: (a.detach(), b.detach()), backend=backend)(a, b)
    assert _fallbacks(messages) == []
    assert not got[0].requires_grad and got[0]._base is None
    np.testing.assert_array_equal(got[1].numpy(), b.detach().numpy())


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_factory_of_a_dynamic_float_matches_eager(backend):
    # A float input that changes between calls becomes an input of the graph; a random
    # factory given it draws eagerly (the traced stand-in has no value to draw with).
    def noisy(x, p):
        return x + fusegrad.normal(p, 1.0, size=(3,))

    fusegrad._dynamo.reset()
    compiled = fusegrad.compile(noisy, backend=backend)
    for p in (1.0, 2.0, 3.5):
        fusegrad.manual_seed(0)
        got = compiled(fusegrad.zeros(3), p)
        fusegrad.manual_seed(0)
        np.testing.assert_array_equal(got.numpy(), noisy(fusegrad.zeros(3), p).numpy())
