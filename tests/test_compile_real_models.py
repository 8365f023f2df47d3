"""Real programs (a GPT decoder with a KV cache, a ViT, a UNet, an LSTM seq2seq, a VAE, a
ResNet block with BatchNorm, MoE routing, a GAN step, hooks, checkpoint, autocast, a whole
compiled training step) through `fusegrad.compile` under each backend, against eager fusegrad:
outputs, losses over several steps, gradients, optimizer state and buffers. Runs without torch.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import fusegrad
import fusegrad.utils.checkpoint

BACKENDS = ("inductor", "aot_eager", "eager")


def _programs(torch):  # noqa: C901  (the models, written as a PyTorch user writes them)
    """The model classes, written against `torch` (fusegrad here)."""
    nn = torch.nn
    F = torch.nn.functional
    P = {}

    @dataclasses.dataclass
    class Cfg:
        d: int = 16
        heads: int = 2
        layers: int = 2
        vocab: int = 11

    class Attn(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.c = c
            self.qkv = nn.Linear(c.d, 3 * c.d)
            self.proj = nn.Linear(c.d, c.d)

        def forward(self, x, cache=None):
            B, T, C = x.shape
            q, k, v = self.qkv(x).split(C, dim=2)
            h = self.c.heads
            q = q.view(B, T, h, C // h).transpose(1, 2)
            k = k.view(B, T, h, C // h).transpose(1, 2)
            v = v.view(B, T, h, C // h).transpose(1, 2)
            if cache is not None:
                pk, pv = cache
                k = torch.cat([pk, k], dim=2)
                v = torch.cat([pv, v], dim=2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.proj(y), (k, v)

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.ln1 = nn.LayerNorm(c.d)
            self.attn = Attn(c)
            self.ln2 = nn.LayerNorm(c.d)
            self.mlp = nn.Sequential(nn.Linear(c.d, 4 * c.d), nn.GELU(), nn.Linear(4 * c.d, c.d))

        def forward(self, x, cache=None):
            a, kv = self.attn(self.ln1(x), cache)
            x = x + a
            return x + self.mlp(self.ln2(x)), kv

    class GPT(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.c = c
            self.wte = nn.Embedding(c.vocab, c.d)
            self.wpe = nn.Embedding(32, c.d)
            self.blocks = nn.ModuleList([Block(c) for _ in range(c.layers)])
            self.ln = nn.LayerNorm(c.d)
            self.head = nn.Linear(c.d, c.vocab, bias=False)

        def forward(self, idx, caches=None, pos0=0):
            B, T = idx.shape
            pos = torch.arange(pos0, pos0 + T, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            new = []
            for i, b in enumerate(self.blocks):
                x, kv = b(x, None if caches is None else caches[i])
                new.append(kv)
            return {"logits": self.head(self.ln(x)), "caches": new}

    P["Cfg"] = Cfg
    P["GPT"] = GPT

    class ViT(nn.Module):
        def __init__(self, d=16, patch=4, img=8, ncls=5):
            super().__init__()
            self.patch = nn.Conv2d(3, d, patch, patch)
            n = (img // patch) ** 2
            self.cls = nn.Parameter(torch.zeros(1, 1, d))
            self.pos = nn.Parameter(torch.randn(1, n + 1, d) * 0.02)
            layer = nn.TransformerEncoderLayer(d, 2, 32, dropout=0.0, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, 2)
            self.head = nn.Linear(d, ncls)

        def forward(self, x):
            x = self.patch(x).flatten(2).transpose(1, 2)
            cls = self.cls.expand(x.shape[0], -1, -1)
            x = torch.cat([cls, x], 1) + self.pos
            x = self.enc(x)
            return self.head(x[:, 0])

    P["ViT"] = ViT

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1 = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU())
            self.d2 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(4, 8, 3, padding=1), nn.ReLU())
            self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
            self.out = nn.Conv2d(8, 1, 1)

        def forward(self, x):
            a = self.d1(x)
            b = self.d2(a)
            u = self.up(b)
            return self.out(torch.cat([u, a], dim=1))

    P["UNet"] = UNet

    class Seq2Seq(nn.Module):
        def __init__(self, v=7, d=8):
            super().__init__()
            self.emb = nn.Embedding(v, d)
            self.enc = nn.LSTM(d, d, batch_first=True)
            self.dec = nn.LSTMCell(d, d)
            self.out = nn.Linear(d, v)

        def forward(self, src, tgt, teacher=True):
            _, (h, c) = self.enc(self.emb(src))
            h, c = h[0], c[0]
            inp = tgt[:, 0]
            outs = []
            for t in range(1, tgt.shape[1]):
                h, c = self.dec(self.emb(inp), (h, c))
                logit = self.out(h)
                outs.append(logit)
                inp = tgt[:, t] if teacher else logit.argmax(-1)
            return torch.stack(outs, 1)

    P["Seq2Seq"] = Seq2Seq

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(10, 8)
            self.mu = nn.Linear(8, 3)
            self.lv = nn.Linear(8, 3)
            self.dec = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 10))

        def forward(self, x):
            h = F.relu(self.enc(x))
            mu, lv = self.mu(h), self.lv(h)
            z = mu + torch.randn_like(mu) * torch.exp(0.5 * lv)
            rec = self.dec(z)
            kld = -0.5 * torch.sum(1 + lv - mu.pow(2) - lv.exp())
            return F.mse_loss(rec, x, reduction="sum") + kld

    P["VAE"] = VAE

    class ResBlock(nn.Module):
        def __init__(self, c=4):
            super().__init__()
            self.c1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.b1 = nn.BatchNorm2d(c)
            self.c2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.b2 = nn.BatchNorm2d(c)

        def forward(self, x):
            y = F.relu(self.b1(self.c1(x)))
            y = self.b2(self.c2(y))
            if self.training:
                y = F.dropout(y, 0.0)
            return F.relu(x + y)

    P["ResBlock"] = ResBlock

    class MoE(nn.Module):
        def __init__(self, d=8, e=4, k=2):
            super().__init__()
            self.k = k
            self.gate = nn.Linear(d, e)
            self.experts = nn.ModuleList([nn.Linear(d, d) for _ in range(e)])

        def forward(self, x):
            w = F.softmax(self.gate(x), -1)
            tw, ti = torch.topk(w, self.k, -1)
            tw = tw / tw.sum(-1, keepdim=True)
            out = torch.zeros_like(x)
            for i, ex in enumerate(self.experts):
                mask = (ti == i)
                rows = mask.any(-1).nonzero().squeeze(-1)
                if rows.numel() == 0:
                    continue
                wt = (tw * mask).sum(-1)[rows].unsqueeze(-1)
                out = out.index_add(0, rows, ex(x[rows]) * wt)
            return out

    P["MoE"] = MoE

    class MoEDense(nn.Module):
        """MoE without data-dependent shapes: index_add with topk indices."""
        def __init__(self, d=8, e=4, k=2):
            super().__init__()
            self.k = k
            self.gate = nn.Linear(d, e)
            self.w = nn.Parameter(torch.randn(e, d, d) * 0.3)

        def forward(self, x):
            tw, ti = torch.topk(F.softmax(self.gate(x), -1), self.k, -1)
            y = torch.einsum("nd,nkde->nke", x, self.w[ti])
            y = (y * tw.unsqueeze(-1)).sum(1)
            acc = torch.zeros(self.w.shape[0], x.shape[1])
            acc = acc.index_add(0, ti[:, 0], y)
            return y, acc

    P["MoEDense"] = MoEDense

    class Branchy(nn.Module):
        def __init__(self, c=None):
            super().__init__()
            self.c = c or Cfg()
            self.layers = nn.ModuleList([nn.Linear(self.c.d, self.c.d)
                                         for _ in range(self.c.layers)])
            self.seen = []

        def forward(self, x):
            if x.shape[0] > 1:
                x = x - x.mean(0, keepdim=True)
            for layer in self.layers:
                x = torch.tanh(layer(x))
            out = {"y": x}
            if self.training:
                out["reg"] = x.pow(2).mean()
            return out

    P["Branchy"] = Branchy

    class Ckpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 6))
            self.b = nn.Linear(6, 2)

        def forward(self, x):
            h = torch.utils.checkpoint.checkpoint(self.a, x, use_reentrant=False)
            return self.b(h)

    P["Ckpt"] = Ckpt

    class AC(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = nn.Linear(6, 6)
            self.l2 = nn.Linear(6, 3)

        def forward(self, x):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                h = torch.relu(self.l1(x))
                y = self.l2(h)
            return y.float().softmax(-1)

    P["AC"] = AC

    class G(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(3, 8), nn.LeakyReLU(0.2), nn.Linear(8, 5))

        def forward(self, z):
            return self.net(z)

    class D(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(5, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))

        def forward(self, x):
            return self.net(x)

    P["G"], P["D"] = G, D
    return P


P = _programs(fusegrad)
CFG = P["Cfg"]()


def _rand(seed: int, *shape) -> fusegrad.Tensor:
    return fusegrad.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _ints(seed: int, high: int, *shape) -> fusegrad.Tensor:
    return fusegrad.tensor(np.random.default_rng(seed).integers(0, high, shape))


# name: (constructor, inputs for step s); the batch size changes on the last step.
MODELS = {
    "gpt": (lambda: P["GPT"](CFG), lambda s: (_ints(s, 11, 2 + s // 2, 5),)),
    "vit": (lambda: P["ViT"](), lambda s: (_rand(s, 2 + s // 2, 3, 8, 8),)),
    "unet": (lambda: P["UNet"](), lambda s: (_rand(s, 2 + s // 2, 1, 8, 8),)),
    "seq2seq": (lambda: P["Seq2Seq"](), lambda s: (_ints(s, 7, 2, 4), _ints(9 + s, 7, 2, 5))),
    "seq2seq_greedy": (lambda: P["Seq2Seq"](),
                       lambda s: (_ints(s, 7, 2, 4), _ints(9 + s, 7, 2, 5), False)),
    "vae": (lambda: P["VAE"](), lambda s: (_rand(s, 4 + s // 2, 10),)),
    "resblock": (lambda: P["ResBlock"](), lambda s: (_rand(s, 2 + s // 2, 4, 5, 5),)),
    "moe": (lambda: P["MoE"](), lambda s: (_rand(s, 6 + s // 2, 8),)),
    "moe_dense": (lambda: P["MoEDense"](), lambda s: (_rand(s, 6 + s // 2, 8),)),
    "branchy": (lambda: P["Branchy"](), lambda s: (_rand(s, (3, 1, 4)[s], 16),)),
    "checkpoint": (lambda: P["Ckpt"](), lambda s: (_rand(s, 3 + s // 2, 6),)),
    "autocast": (lambda: P["AC"](), lambda s: (_rand(s, 3 + s // 2, 6),)),
}


def _tensors(o) -> list:
    if isinstance(o, dict):
        return [t for k in sorted(o) for t in _tensors(o[k])]
    if isinstance(o, (list, tuple)):
        return [t for x in o for t in _tensors(x)]
    return [o] if isinstance(o, fusegrad.Tensor) else []


def _loss(o):
    """A weighted sum of the floating outputs (a plain sum of a softmax would be constant, and
    its gradients rounding noise)."""
    total = 0
    for t in _tensors(o):
        if t.is_floating_point():
            w = fusegrad.sin(fusegrad.arange(t.numel()).float() * 0.7 + 0.3).view(t.shape)
            total = total + (t.float() * w).sum()
    return total


def _arr(t) -> np.ndarray:
    return t.detach().float().numpy().copy()


def _train(name: str, train: bool, compile_kw: dict | None, steps: int = 3) -> list:
    """Outputs, losses and gradients of each step, then buffers, parameters and optimizer
    state after `steps` SGD-with-momentum steps."""
    make, inputs = MODELS[name]
    fusegrad.manual_seed(0)
    model = make()
    model.train(train)
    opt = fusegrad.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    fn = model if compile_kw is None else fusegrad.compile(model, **compile_kw)
    res = []
    for s in range(steps):
        fusegrad.manual_seed(100 + s)  # the VAE's noise: the same draws compiled and eager
        opt.zero_grad()
        out = fn(*inputs(s))
        loss = _loss(out)
        loss.backward()
        res += [_arr(t) for t in _tensors(out)] + [_arr(loss)]
        res += [_arr(p.grad) for p in model.parameters() if p.grad is not None]
        opt.step()
    res += [_arr(b) for b in model.buffers()] + [_arr(p) for p in model.parameters()]
    res += [_arr(v) for st in opt.state.values() for _, v in sorted(st.items())
            if isinstance(v, fusegrad.Tensor)]
    return res


def _assert_same(got: list, want: list, tol: float = 1e-4) -> None:
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, i
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=str(i))


_EAGER: dict = {}


def _eager(name: str, train: bool) -> list:
    if (name, train) not in _EAGER:
        _EAGER[name, train] = _train(name, train, None)
    return _EAGER[name, train]


@pytest.fixture(autouse=True)
def _fresh():
    fusegrad._dynamo.reset()
    yield
    fusegrad._dynamo.reset()


# inductor's C code generation is the slow part: it runs on the smaller models only.
TRAIN_CASES = [(name, backend) for name in sorted(MODELS) for backend in BACKENDS
               if backend != "inductor" or name in ("vae", "branchy", "unet")]


@pytest.mark.parametrize(("name", "backend"), TRAIN_CASES)
def test_training_matches_eager(name, backend):
    _assert_same(_train(name, True, {"backend": backend}), _eager(name, True))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_eval_dynamic_matches_eager(name):
    _assert_same(_train(name, False, {"backend": "aot_eager", "dynamic": True}),
                 _eager(name, False))


def _generate(compile_kw: dict | None) -> list:
    """Greedy first token, then sampling with a KV cache under no_grad()."""
    fusegrad.manual_seed(0)
    model = P["GPT"](CFG).eval()
    fn = model if compile_kw is None else fusegrad.compile(model, **compile_kw)
    idx = fusegrad.tensor([[1, 2, 3], [4, 5, 6]])
    toks = []
    with fusegrad.no_grad():
        out = fn(idx)
        caches, pos = out["caches"], 3
        nxt = out["logits"][:, -1].argmax(-1, keepdim=True)
        for _ in range(5):
            toks.append(nxt)
            out = fn(nxt, caches, pos)
            caches, pos = out["caches"], pos + 1
            nxt = fusegrad.multinomial(fusegrad.softmax(out["logits"][:, -1], -1), 1)
    return fusegrad.cat(toks, 1).tolist()


@pytest.mark.parametrize("kw", [{}, {"backend": "aot_eager", "dynamic": True},
                                {"mode": "reduce-overhead"},
                                {"backend": "eager", "fullgraph": True}])
def test_kv_cache_generation_matches_eager(kw):
    assert _generate(kw) == _generate(None)


def _train_step(compile_kw: dict | None) -> list:
    """forward + loss + backward + Adam step compiled as one function."""
    fusegrad.manual_seed(0)
    model = P["ResBlock"]()
    opt = fusegrad.optim.Adam(model.parameters(), lr=1e-2)
    weight = fusegrad.linspace(-1, 1, 100).view(1, 4, 5, 5)

    def step(x):
        opt.zero_grad()
        loss = (model(x) * weight).sum()
        loss.backward()
        opt.step()
        return loss

    fn = step if compile_kw is None else fusegrad.compile(step, **compile_kw)
    res = [_arr(fn(_rand(s, 2, 4, 5, 5))) for s in range(3)]
    res += [_arr(p) for p in model.parameters()] + [_arr(b) for b in model.buffers()]
    return res + [_arr(v) for st in opt.state.values() for _, v in sorted(st.items())]


@pytest.mark.parametrize("kw", [{}, {"backend": "aot_eager"}, {"backend": "eager"},
                                {"dynamic": True}])
def test_whole_training_step_matches_eager(kw):
    _assert_same(_train_step(kw), _train_step(None))


def _hooked(compile_kw: dict | None) -> list:
    fusegrad.manual_seed(0)
    model = P["Branchy"]()
    model.layers[0].register_forward_hook(lambda mod, i, o: o * 2)
    model.layers[1].register_forward_pre_hook(lambda mod, i: (i[0] + 1,))
    fn = model if compile_kw is None else fusegrad.compile(model, **compile_kw)
    res = []
    for s, b in enumerate((3, 3, 5)):
        out = fn(_rand(s, b, 16))
        (out["y"].sum() + out["reg"]).backward()
        res += [_arr(out["y"]), _arr(model.layers[0].weight.grad)]
    return res


@pytest.mark.parametrize("backend", ["aot_eager", "eager"])
def test_module_hooks_match_eager(backend):
    _assert_same(_hooked({"backend": backend}), _hooked(None))


def _gan(compile_kw: dict | None) -> list:
    """A GAN step: D on real and detached fake data, then G through D."""
    fusegrad.manual_seed(0)
    gen, disc = P["G"](), P["D"]()
    og = fusegrad.optim.Adam(gen.parameters(), 1e-2, betas=(0.5, 0.999))
    od = fusegrad.optim.Adam(disc.parameters(), 1e-2, betas=(0.5, 0.999))
    bce = fusegrad.nn.BCEWithLogitsLoss()

    def step(real):
        n = real.shape[0]
        fake = gen(fusegrad.randn(n, 3))
        od.zero_grad()
        ld = bce(disc(real), fusegrad.ones(n, 1)) + \
            bce(disc(fake.detach()), fusegrad.zeros(n, 1))
        ld.backward()
        od.step()
        og.zero_grad()
        lg = bce(disc(fake), fusegrad.ones(n, 1))
        lg.backward()
        og.step()
        return ld.detach(), lg.detach()

    fn = step if compile_kw is None else fusegrad.compile(step, **compile_kw)
    res = []
    for s, b in enumerate((4, 4, 6)):
        fusegrad.manual_seed(s)
        res += [_arr(v) for v in fn(_rand(s, b, 5))]
    return res + [_arr(p) for p in (*gen.parameters(), *disc.parameters())]


def test_gan_step_eager_backend_matches_eager():
    _assert_same(_gan({"backend": "eager"}), _gan(None))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_gan_step_aot_matches_eager(backend):
    # (The generator's output enters the discriminator's graph detached: the compiled node
    # must have no edge to its history, or its backward frees the generator's graph.)
    _assert_same(_gan({"backend": backend}), _gan(None))


def _counts(name: str, train: bool) -> tuple:
    make, inputs = MODELS[name]
    fusegrad.manual_seed(0)
    model = make()
    model.train(train)
    e = fusegrad._dynamo.explain(model)(*inputs(0))
    return e.graph_count, e.graph_break_count


# torch.compile's counts on the same programs (torch 2.13, backend="eager").
ONE_GRAPH = ["gpt", "vit", "unet", "vae", "resblock", "moe_dense", "branchy", "checkpoint"]


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("name", ONE_GRAPH)
def test_one_graph_as_torch(name, train):
    assert _counts(name, train) == (1, 0)


def test_autocast_region_is_one_graph():
    assert _counts("autocast", True) == (1, 0)


def test_batch_size_changes_recompile_once():
    """A second batch size makes the sizes dynamic (one recompile); later ones reuse it."""
    fusegrad.manual_seed(0)
    model = P["Branchy"]()
    fn = fusegrad.compile(model, backend="eager")
    from fusegrad._dynamo.utils import counters
    counters.clear()
    for b in (3, 4, 5, 6):
        _assert_same([_arr(fn(_rand(b, b, 16))["y"])], [_arr(model(_rand(b, b, 16))["y"])])
    assert counters["stats"]["unique_graphs"] == 2


def _autocast_programs():
    """Autocast regions: nested, switched off inside, left by an exception, broken inside."""
    lin = fusegrad.nn.Linear(6, 6)

    def nested(x):
        with fusegrad.autocast("cpu"):
            h = lin(x)
            with fusegrad.autocast("cpu", enabled=False):
                g = lin(h.float())
        return h, g

    def raising(x):
        try:
            with fusegrad.autocast("cpu", dtype=fusegrad.bfloat16):
                h = lin(x)
                raise ValueError("x")
        except ValueError:
            h = h + 1
        return (h,)

    def broken(x):
        with fusegrad.autocast("cpu", dtype=fusegrad.bfloat16):
            h = lin(x)
            print("", end="")  # a graph break inside the region
            h = lin(h.float())
        return (h * 2,)

    return nested, raising, broken


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("which", [0, 1, 2])
def test_autocast_regions_match_eager(which, backend):
    fusegrad.manual_seed(0)
    x = _rand(0, 3, 6)
    fn = _autocast_programs()[which]
    want = fn(x)
    for _ in range(2):
        got = fusegrad.compile(fn, backend=backend)(x)
        assert [t.dtype for t in got] == [t.dtype for t in want]
        _assert_same([_arr(t) for t in got], [_arr(t) for t in want], tol=0)
        assert not fusegrad.is_autocast_enabled("cpu")  # every region left


def test_module_hooks_inline_into_one_graph():
    fusegrad.manual_seed(0)
    model = P["Branchy"]()
    model.layers[0].register_forward_hook(lambda mod, i, o: o * 2)
    model.layers[1].register_forward_pre_hook(lambda mod, i: i[0] + 1)  # not a tuple
    e = fusegrad._dynamo.explain(model)(_rand(0, 3, 16))
    assert (e.graph_count, e.graph_break_count) == (1, 0)  # torch.compile: (1, 0) too
    want = model(_rand(1, 3, 16))["y"]
    got = fusegrad.compile(model, backend="eager", fullgraph=True)(_rand(1, 3, 16))["y"]
    _assert_same([_arr(got)], [_arr(want)], tol=0)


def test_hooks_changed_after_compiling_are_seen():
    """Hooks added, replaced or removed between calls: the guards notice and recapture."""
    fusegrad.manual_seed(0)
    model = P["Branchy"]().eval()
    fn = fusegrad.compile(model, backend="aot_eager")
    x = _rand(0, 3, 16)
    layer = model.layers[0]
    steps = [lambda: layer.register_forward_hook(lambda m, i, o: o * 3),
             lambda: layer.register_forward_pre_hook(lambda m, i: (i[0] * 0.5,)),
             lambda: layer.register_forward_hook(lambda m, i, o: None)]
    handles = []
    for add in [None, *steps]:
        if add is not None:
            handles.append(add())
        _assert_same([_arr(fn(x)["y"])], [_arr(model(x)["y"])], tol=0)
    for h in handles:
        h.remove()
        _assert_same([_arr(fn(x)["y"])], [_arr(model(x)["y"])], tol=0)
    handles = [layer.register_full_backward_hook(lambda m, gi, go: None)]
    _assert_same([_arr(fn(x)["y"])], [_arr(model(x)["y"])], tol=0)  # not inlined: a break


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_autocast_region_left_when_the_graph_raises(backend):
    def f(x, w):
        with fusegrad.autocast("cpu", dtype=fusegrad.bfloat16):
            return x @ w

    fn = fusegrad.compile(f, backend=backend)
    assert fn(fusegrad.ones(2, 3), fusegrad.ones(3, 4)).dtype == fusegrad.bfloat16
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        fn(fusegrad.ones(2, 3), fusegrad.ones(5, 4))
    assert not fusegrad.is_autocast_enabled("cpu")


def _hooked_branchy(lib, programs):
    model = programs["Branchy"]()
    model.layers[0].register_forward_hook(lambda mod, i, o: o * 2)
    model.layers[1].register_forward_pre_hook(lambda mod, i: (i[0] + 1,))
    return model, (lib.ones(3, 16),)


def _autocast_model(lib, programs):
    return programs["AC"](), (lib.ones(3, 6),)


@pytest.mark.parametrize("build", [_hooked_branchy, _autocast_model])
def test_graph_counts_as_torch_compile(build):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch._dynamo")

    counts = []
    for lib in (torch, fusegrad):
        lib.manual_seed(0)
        model, args = build(lib, _programs(lib))
        lib._dynamo.reset()
        e = lib._dynamo.explain(model)(*args)
        counts.append((e.graph_count, e.graph_break_count))
    torch._dynamo.reset()
    assert counts[1] == counts[0]
