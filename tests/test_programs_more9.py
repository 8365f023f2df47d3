"""Whole programs as PyTorch users write them, of kinds the other program files leave out:
object-centric and latent-array attention (slot attention with a GRUCell, a Perceiver
cross-attention block), sequence models with linear recurrences (a Mamba-style selective scan,
RetNet retention in its parallel and recurrent forms, causal linear attention by prefix sums,
Transformer-XL segment memory), generative flows (Glow's ActNorm, invertible 1x1 convolution
and pixel-unshuffle squeeze), neural cellular automata, implicit networks supervised through
their input gradient (SIREN), unrolled optimisation (LISTA), neural processes, adversarial
training (PGD), ShuffleNet units with Conv-BN fusion, Switch-style capacity routing,
differentiable ranking, calibration metrics, cyclic and polynomial learning-rate schedules,
truncated BPTT with RNNCells, structured (Kronecker and block-diagonal) weights, count
likelihoods (zero-inflated negative binomial), circular regression (von Mises), complex
frequency-domain filters, AlexNet-era layers, custom operators from torch.library,
torch.cond / torch.export, optimizer steps inside backward (post-accumulate-grad hooks),
GraphSAGE over sparse adjacency, a contractive autoencoder (vmap of jacfwd), point features
scattered into an occupancy grid, a running observation normaliser in float64 buffers, the
hashing trick in wrapping 64-bit integer arithmetic, patch folding by index_put,
length-bucketed batches whose shapes and float attributes change between compiled calls, a
rational-quadratic spline flow (searchsorted bins) and RotatE knowledge-graph embeddings
(complex rotations from torch.polar).

As in test_programs_more8.py, each program takes the library as its argument, seeds it,
builds its data with NumPy and returns what it recorded; `test_program` compares the torch
and fusegrad runs value by value, `test_compiled_matches_eager` compares fusegrad compiled
under each backend with fusegrad eager (every graph compiled by AOT autograd and the code
generator), and `test_compiled_without_graph_breaks` checks that fusegrad captures whole
what torch.compile captures whole."""

import functools
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import inspect  # noqa: E402
import io  # noqa: E402
import itertools  # noqa: E402
import math  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from program_support import (  # noqa: E402
    check_program,
    compare,
    compiler_fallbacks,
    run_program,
)
from program_support import maybe_compile as _maybe_compile  # noqa: E402

import fusegrad as fg  # noqa: E402


def _check(prog, rtol=1e-4, atol=1e-5):
    check_program(prog, torch, fg, rtol, atol)


PROGRAMS = []


def slot_attention(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((3, 10, 6)), dtype=torch.float32)
    d, k = 8, 3

    class SlotAttention(nn.Module):
        """Slots compete for the inputs (softmax over slots), then a GRUCell updates them."""

        def __init__(self, iters=2):
            super().__init__()
            self.iters, self.scale = iters, d ** -0.5
            self.mu = nn.Parameter(torch.randn(1, 1, d) * 0.5)
            self.log_sigma = nn.Parameter(torch.zeros(1, 1, d))
            self.inp = nn.Sequential(nn.Linear(6, d), nn.LayerNorm(d))
            self.to_q = nn.Linear(d, d, bias=False)
            self.to_k = nn.Linear(d, d, bias=False)
            self.to_v = nn.Linear(d, d, bias=False)
            self.gru = nn.GRUCell(d, d)
            self.mlp = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 16), nn.ReLU(),
                                     nn.Linear(16, d))
            self.norm_slots = nn.LayerNorm(d)
            self.decode = nn.Linear(d, 6)

        def forward(self, x, noise):
            b = x.shape[0]
            h = self.inp(x)
            keys, values = self.to_k(h), self.to_v(h)
            slots = self.mu + self.log_sigma.exp() * noise
            for _ in range(self.iters):
                prev = slots
                q = self.to_q(self.norm_slots(slots))
                logits = torch.einsum("bid,bjd->bij", keys, q) * self.scale
                attn = logits.softmax(-1) + 1e-8
                weights = attn / attn.sum(1, keepdim=True)
                updates = torch.einsum("bij,bid->bjd", weights, values)
                slots = self.gru(updates.reshape(-1, d), prev.reshape(-1, d)).reshape(b, k, d)
                slots = slots + self.mlp(slots)
            # each input is rebuilt from the slots it is assigned to
            recon = torch.einsum("bij,bjd->bid", attn, self.decode(slots))
            return recon, attn

    model = SlotAttention()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    rec = []
    for _ in range(3):
        noise = torch.randn(3, k, d)
        recon, attn = run(x, noise)
        loss = F.mse_loss(recon, x)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    return rec, attn.argmax(-1), model.gru.weight_hh.grad, model.mu, model.log_sigma.grad


PROGRAMS += [slot_attention]


def perceiver_latents(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(1)
    rng = np.random.default_rng(1)
    n = 24
    pos = torch.linspace(-1, 1, n)
    # Fourier position features concatenated to each input element
    bands = torch.arange(1, 4, dtype=torch.float32) * math.pi
    fourier = torch.cat([torch.sin(pos[:, None] * bands), torch.cos(pos[:, None] * bands)], -1)
    signal = torch.tensor(rng.standard_normal((4, n, 2)), dtype=torch.float32)
    y = (signal[..., 0].mean(1) > 0).long()

    class Perceiver(nn.Module):
        def __init__(self, latents=4, d=8):
            super().__init__()
            self.latents = nn.Parameter(torch.randn(latents, d) * 0.2)
            self.cross = nn.MultiheadAttention(d, 2, kdim=8, vdim=8, batch_first=True)
            self.self_attn = nn.TransformerEncoderLayer(d, 2, 16, dropout=0.0,
                                                        batch_first=True, norm_first=True)
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, 2)

        def forward(self, inputs):
            feats = torch.cat([inputs, fourier.expand(inputs.shape[0], -1, -1)], -1)
            lat = self.latents.expand(inputs.shape[0], -1, -1)
            h, w = self.cross(self.ln(lat), feats, feats)
            h = self.self_attn(h + lat)
            return self.head(h.mean(1)), w

    model = Perceiver()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.05)
    rec = []
    for _ in range(3):
        logits, w = run(signal)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    # (the key bias is left out: softmax ignores it, so its gradient is rounding noise)
    return rec, w.shape, w[0, :, :4], model.latents.grad, model.cross.in_proj_bias[16:]


PROGRAMS += [perceiver_latents]


def glow_flow(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(2)
    rng = np.random.default_rng(2)
    x = torch.tensor(rng.uniform(0, 1, (6, 1, 4, 4)), dtype=torch.float32)

    class ActNorm(nn.Module):
        """Per-channel affine, initialised from the first batch's statistics."""

        def __init__(self, c):
            super().__init__()
            self.loc = nn.Parameter(torch.zeros(1, c, 1, 1))
            self.log_scale = nn.Parameter(torch.zeros(1, c, 1, 1))

        @torch.no_grad()
        def initialize(self, h):
            mean = h.mean((0, 2, 3), keepdim=True)
            std = h.std((0, 2, 3), keepdim=True)
            self.loc.copy_(-mean)
            self.log_scale.copy_(-torch.log(std + 1e-6))

        def forward(self, h):
            logdet = self.log_scale.sum() * h.shape[2] * h.shape[3]
            return (h + self.loc) * self.log_scale.exp(), logdet

        def inverse(self, h):
            return h * torch.exp(-self.log_scale) - self.loc

    class InvConv(nn.Module):
        def __init__(self, c):
            super().__init__()
            q, _ = torch.linalg.qr(torch.randn(c, c))
            self.weight = nn.Parameter(q)

        def forward(self, h):
            logdet = torch.linalg.slogdet(self.weight)[1] * h.shape[2] * h.shape[3]
            return F.conv2d(h, self.weight[:, :, None, None]), logdet

        def inverse(self, h):
            return F.conv2d(h, torch.linalg.inv(self.weight)[:, :, None, None])

    class Coupling(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.net = nn.Sequential(nn.Conv2d(c // 2, 8, 3, padding=1), nn.ReLU(),
                                     nn.Conv2d(8, c, 3, padding=1))

        def forward(self, h):
            a, b = h.chunk(2, 1)
            shift, raw = self.net(a).chunk(2, 1)
            scale = torch.sigmoid(raw + 2.0)
            return torch.cat([a, (b + shift) * scale], 1), torch.log(scale).flatten(1).sum(1)

        def inverse(self, h):
            a, b = h.chunk(2, 1)
            shift, raw = self.net(a).chunk(2, 1)
            return torch.cat([a, b / torch.sigmoid(raw + 2.0) - shift], 1)

    class Glow(nn.Module):
        def __init__(self):
            super().__init__()
            self.steps = nn.ModuleList()
            for _ in range(2):
                self.steps.extend([ActNorm(4), InvConv(4), Coupling(4)])

        def forward(self, img):
            h = F.pixel_unshuffle(img - 0.5, 2)  # squeeze: (b, 4, 2, 2)
            total = torch.zeros(img.shape[0])
            for step in self.steps:
                h, logdet = step(h)
                total = total + logdet
            prior = -0.5 * (h ** 2 + math.log(2 * math.pi)).flatten(1).sum(1)
            dims = img[0].numel()
            return -(prior + total).mean() / (dims * math.log(2)), h

        def inverse(self, h):
            for step in reversed(self.steps):
                h = step.inverse(h)
            return F.pixel_shuffle(h, 2) + 0.5

    model = Glow()
    with torch.no_grad():  # data-dependent initialisation, one layer at a time
        h = F.pixel_unshuffle(x - 0.5, 2)
        for step in model.steps:
            if isinstance(step, ActNorm):
                step.initialize(h)
            h = step(h)[0]
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    rec = []
    for _ in range(3):
        bpd, z = run(x)
        opt.zero_grad()
        bpd.backward()
        opt.step()
        rec.append(bpd.item())
    with torch.no_grad():
        back = model.inverse(model(x)[1])
    return rec, (back - x).abs().max() < 1e-4, z[0], model.steps[1].weight.grad, \
        model.steps[0].log_scale


PROGRAMS += [glow_flow]


def selective_scan(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(3)
    rng = np.random.default_rng(3)
    seq = torch.tensor(rng.standard_normal((2, 6, 4)), dtype=torch.float32)
    target = seq.cumsum(1) * 0.3

    class MambaBlock(nn.Module):
        """Input-dependent discretisation of a diagonal state space, scanned step by step."""

        def __init__(self, d=4, e=6, n=3, rank=2):
            super().__init__()
            self.e, self.n, self.rank = e, n, rank
            self.norm = nn.RMSNorm(d)
            self.in_proj = nn.Linear(d, 2 * e)
            self.conv = nn.Conv1d(e, e, 3, groups=e, padding=2)
            self.x_proj = nn.Linear(e, rank + 2 * n, bias=False)
            self.dt_proj = nn.Linear(rank, e)
            self.A_log = nn.Parameter(torch.log(torch.arange(1, n + 1).float()).repeat(e, 1))
            self.D = nn.Parameter(torch.ones(e))
            self.out_proj = nn.Linear(e, d)

        def forward(self, u):
            b, length, _ = u.shape
            xz = self.in_proj(self.norm(u))
            x, z = xz.chunk(2, -1)
            x = F.silu(self.conv(x.transpose(1, 2))[..., :length].transpose(1, 2))
            dt, B, C = self.x_proj(x).split([self.rank, self.n, self.n], -1)
            dt = F.softplus(self.dt_proj(dt))
            A = -torch.exp(self.A_log)
            dA = torch.exp(dt.unsqueeze(-1) * A)  # (b, l, e, n)
            dBx = dt.unsqueeze(-1) * B.unsqueeze(2) * x.unsqueeze(-1)
            state = torch.zeros(b, self.e, self.n)
            ys = []
            for t in range(length):
                state = dA[:, t] * state + dBx[:, t]
                ys.append((state * C[:, t].unsqueeze(1)).sum(-1))
            y = torch.stack(ys, 1) + x * self.D
            return u + self.out_proj(y * F.silu(z))

    model = nn.Sequential(MambaBlock(), MambaBlock())
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    rec = []
    for _ in range(3):
        out = run(seq)
        loss = F.mse_loss(out, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    return rec, out[0, -1], model[0].A_log.grad, model[1].conv.weight.grad, model[0].D


PROGRAMS += [selective_scan]


def retnet_retention(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(4)
    rng = np.random.default_rng(4)
    tokens = torch.tensor(rng.integers(0, 7, (2, 8)))
    heads, dh = 2, 4
    gammas = 1 - 2.0 ** (-3 - torch.arange(heads, dtype=torch.float32))

    class Retention(nn.Module):
        """Multi-scale retention: a decaying causal mask (parallel) or a decaying state
        (recurrent); the two forms give the same outputs."""

        def __init__(self, d=8):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d, bias=False)
            self.gate = nn.Linear(d, d)
            self.norm = nn.GroupNorm(heads, d)
            self.out = nn.Linear(d, d)

        def split(self, x):
            q, k, v = self.qkv(x).chunk(3, -1)
            shape = x.shape[:-1] + (heads, dh)
            return [t.reshape(shape).transpose(-3, -2) for t in (q, k, v)]

        def finish(self, x, o):
            o = self.norm(o.transpose(-3, -2).reshape(-1, heads * dh))
            return self.out(F.silu(self.gate(x)) * o.reshape(x.shape))

        def forward(self, x):
            q, k, v = self.split(x)  # (b, h, l, dh)
            n = torch.arange(x.shape[1])
            diff = (n[:, None] - n[None, :]).float()
            decay = torch.where(diff >= 0, gammas[:, None, None] ** diff.clamp(min=0),
                                torch.zeros(()))
            o = (q @ k.transpose(-1, -2) * decay) @ v
            return self.finish(x, o)

        def recurrent(self, x):
            q, k, v = self.split(x)
            state = torch.zeros(x.shape[0], heads, dh, dh)
            outs = []
            for t in range(x.shape[1]):
                state = gammas[:, None, None] * state + k[:, :, t, :, None] * v[:, :, t, None]
                outs.append(q[:, :, t, None] @ state)
            return self.finish(x, torch.cat(outs, 2))

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(7, 8)
            self.ret = Retention()
            self.ln = nn.LayerNorm(8)
            self.head = nn.Linear(8, 7)

        def forward(self, t, recurrent=False):
            h = self.emb(t)
            h = h + (self.ret.recurrent(h) if recurrent else self.ret(h))
            return self.head(self.ln(h))

    model = LM()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rec = []
    for _ in range(3):
        logits = run(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 7), tokens[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    with torch.no_grad():
        par, rnn = model(tokens), model(tokens, recurrent=True)
    return rec, (par - rnn).abs().max() < 1e-4, par[1, -1], model.ret.qkv.weight.grad


PROGRAMS += [retnet_retention]


def linear_attention_causal(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(5)
    rng = np.random.default_rng(5)
    tokens = torch.tensor(rng.integers(0, 6, (3, 7)))

    class LinearAttention(nn.Module):
        """Causal attention with the elu+1 feature map, by prefix sums over positions."""

        def __init__(self, d=8):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)

        def forward(self, x, quadratic=False):
            q, k, v = self.qkv(x).chunk(3, -1)
            q, k = F.elu(q) + 1, F.elu(k) + 1
            if quadratic:
                scores = torch.einsum("bnd,bmd->bnm", q, k)
                scores = scores.masked_fill(
                    torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1), 0.0)
                out = scores @ v / scores.sum(-1, keepdim=True)
            else:
                kv = torch.einsum("bnd,bne->bnde", k, v).cumsum(1)
                num = torch.einsum("bnd,bnde->bne", q, kv)
                den = torch.einsum("bnd,bnd->bn", q, k.cumsum(1))
                out = num / den.unsqueeze(-1)
            return self.proj(out)

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(6, 8)
            self.pos = nn.Parameter(torch.randn(7, 8) * 0.1)
            self.attn = LinearAttention()
            self.ff = nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 16), nn.GELU(),
                                    nn.Linear(16, 8))
            self.head = nn.Linear(8, 6)

        def forward(self, t, quadratic=False):
            h = self.emb(t) + self.pos[:t.shape[1]]
            h = h + self.attn(h, quadratic)
            return self.head(h + self.ff(h))

    model = LM()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rec = []
    for _ in range(3):
        logits = run(tokens[:, :-1])
        loss = F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    with torch.no_grad():
        same = (model(tokens) - model(tokens, quadratic=True)).abs().max() < 1e-4
    return rec, same, logits[0, -1], model.pos.grad, model.attn.qkv.bias.grad


PROGRAMS += [linear_attention_causal]


def neural_cellular_automata(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(6)
    rng = np.random.default_rng(6)
    c, size = 6, 8
    target = torch.zeros(4, size, size)
    target[:, 2:6, 3:5] = torch.tensor(rng.uniform(0.2, 1, (4, 4, 2)), dtype=torch.float32)
    target[3] = (target[3] > 0).float()  # alpha

    sobel = torch.tensor([[-1.0, 0, 1], [-2, 0, 2], [-1, 0, 1]]) / 8
    ident = torch.zeros(3, 3)
    ident[1, 1] = 1
    kernels = torch.stack([ident, sobel, sobel.T]).repeat(c, 1, 1)[:, None]

    class CA(nn.Module):
        def __init__(self):
            super().__init__()
            self.update = nn.Sequential(nn.Conv2d(3 * c, 16, 1), nn.ReLU(),
                                        nn.Conv2d(16, c, 1, bias=False))
            with torch.no_grad():
                self.update[2].weight.mul_(0.1)

        def alive(self, s):
            return F.max_pool2d(s[:, 3:4], 3, 1, 1) > 0.1

        def forward(self, s, fire):
            pre = self.alive(s)
            perceived = F.conv2d(s, kernels, padding=1, groups=c)
            s = s + self.update(perceived) * fire
            return s * (pre & self.alive(s)).float()

    model = CA()
    step = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    rec = []
    for it in range(2):
        s = torch.zeros(2, c, size, size)
        s[:, 3:, size // 2, size // 2] = 1.0  # the seed cell
        for _ in range(4):
            fire = (torch.rand(2, 1, size, size) < 0.5).float()
            s = step(s, fire)
        # the target seen rotated, as an augmentation
        goal = torch.stack([target, torch.rot90(target, it + 1, (1, 2))])
        loss = F.mse_loss(s[:, :4], goal)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        rec.append(loss.item())
    return rec, s[0, 3], model.update[0].weight.grad[:3, :5], model.update[2].weight


PROGRAMS += [neural_cellular_automata]


def siren_gradient_fit(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(7)
    g = torch.linspace(-1, 1, 6)
    coords = torch.stack(torch.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    # supervise only the gradient of f(x, y) = sin(2x) * y
    target_grad = torch.stack([2 * torch.cos(2 * coords[:, 0]) * coords[:, 1],
                               torch.sin(2 * coords[:, 0])], -1)

    class Sine(nn.Module):
        def __init__(self, fan_in, fan_out, first=False, w0=6.0):
            super().__init__()
            self.w0, self.lin = w0, nn.Linear(fan_in, fan_out)
            bound = 1 / fan_in if first else math.sqrt(6 / fan_in) / w0
            nn.init.uniform_(self.lin.weight, -bound, bound)

        def forward(self, x):
            return torch.sin(self.w0 * self.lin(x))

    model = nn.Sequential(Sine(2, 16, first=True), Sine(16, 16), nn.Linear(16, 1))
    render = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    rec = []
    for _ in range(3):
        pts = coords.clone().requires_grad_(True)
        f = model(pts)
        (grad,) = torch.autograd.grad(f.sum(), pts, create_graph=True)
        loss = F.mse_loss(grad, target_grad)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    with torch.no_grad():
        field = render(coords).reshape(6, 6)
    # the recovered function is known only up to a constant
    return rec, field - field.mean(), model[0].lin.weight.grad, grad.grad_fn is not None


PROGRAMS += [siren_gradient_fit]


def lista_sparse_coding(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(8)
    rng = np.random.default_rng(8)
    m, n = 6, 10
    A = torch.tensor(rng.standard_normal((m, n)) / math.sqrt(m), dtype=torch.float32)
    codes = torch.tensor(rng.standard_normal((16, n)) * (rng.uniform(size=(16, n)) < 0.2),
                         dtype=torch.float32)
    y = codes @ A.T + 0.01 * torch.tensor(rng.standard_normal((16, m)), dtype=torch.float32)
    L = torch.linalg.matrix_norm(A, 2) ** 2

    def ista(y, lam=0.05, iters=20):
        x = torch.zeros(y.shape[0], n)
        for _ in range(iters):
            x = F.softshrink(x - (x @ A.T - y) @ A / L, (lam / L).item())
        return x

    class LISTA(nn.Module):
        """ISTA unrolled: learned matrices and one learned threshold per layer."""

        def __init__(self, layers=4):
            super().__init__()
            self.We = nn.Linear(m, n, bias=False)
            self.S = nn.Linear(n, n, bias=False)
            with torch.no_grad():
                self.We.weight.copy_(A.T / L)
                self.S.weight.copy_(torch.eye(n) - A.T @ A / L)
            self.theta = nn.Parameter(torch.full((layers,), 0.05) / L)

        def forward(self, y):
            b = self.We(y)
            x = torch.zeros_like(b)
            for t in self.theta:
                z = b + self.S(x)
                x = torch.sign(z) * F.relu(z.abs() - t)
            return x

    model = LISTA()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    rec = []
    for _ in range(4):
        est = run(y)
        loss = F.mse_loss(est, codes)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    base = ista(y)
    nmse_db = 10 * torch.log10(((base - codes) ** 2).sum() / (codes ** 2).sum())
    return rec, nmse_db, (base != 0).sum(), model.theta, model.S.weight.grad[:3]


PROGRAMS += [lista_sparse_coding]


def adversarial_pgd(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(9)
    rng = np.random.default_rng(9)
    x = torch.tensor(rng.uniform(0, 1, (24, 4)), dtype=torch.float32)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0.8).long()
    eps, alpha = 0.1, 0.04

    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))
    run = _maybe_compile(torch, compiled)(model)

    def pgd(inputs, labels, steps=3):
        """Projected gradient ascent on the loss within an L-infinity ball, in [0, 1]."""
        delta = torch.zeros_like(inputs).uniform_(-eps, eps).requires_grad_(True)
        for _ in range(steps):
            loss = F.cross_entropy(run((inputs + delta).clamp(0, 1)), labels)
            (g,) = torch.autograd.grad(loss, delta)
            delta = (delta + alpha * g.sign()).clamp_(-eps, eps).detach().requires_grad_(True)
        return (inputs + delta).clamp(0, 1).detach()

    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9, nesterov=True)
    rec = []
    for _ in range(3):
        adv = pgd(x, y)
        loss = 0.5 * (F.cross_entropy(run(x), y) + F.cross_entropy(run(adv), y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.set_grad_enabled(False):
            clean = (run(x).argmax(1) == y).float().mean()
        rec.append((loss.item(), clean.item(), torch.is_grad_enabled()))
    adv = pgd(x, y)
    robust = (model(adv).argmax(1) == y).float().mean()
    return rec, robust, (adv - x).abs().max() <= eps + 1e-6, adv[:3], model[0].weight.grad


PROGRAMS += [adversarial_pgd]


def shufflenet_fused(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(10)
    rng = np.random.default_rng(10)
    img = torch.tensor(rng.standard_normal((4, 1, 8, 8)), dtype=torch.float32)
    y = torch.tensor([0, 1, 2, 1])

    class Unit(nn.Module):
        """ShuffleNet unit: grouped 1x1, channel shuffle, depthwise 3x3, grouped 1x1."""

        def __init__(self, c, groups=2):
            super().__init__()
            self.groups = groups
            self.reduce = nn.Conv2d(c, c, 1, groups=groups, bias=False)
            self.bn1 = nn.BatchNorm2d(c)
            self.dw = nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False)
            self.bn2 = nn.BatchNorm2d(c)
            self.expand = nn.Conv2d(c, c, 1, groups=groups, bias=False)
            self.bn3 = nn.BatchNorm2d(c)

        def forward(self, x):
            h = F.hardswish(self.bn1(self.reduce(x)))
            h = F.channel_shuffle(h, self.groups)
            h = self.bn3(self.expand(self.bn2(self.dw(h))))
            return F.hardswish(x + h)

    model = nn.Sequential(nn.PixelUnshuffle(2), nn.Conv2d(4, 8, 1), Unit(8), nn.ChannelShuffle(4),
                          Unit(8), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3))
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    rec = []
    for _ in range(3):
        loss = F.cross_entropy(run(img), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    model.eval()
    with torch.no_grad():
        want = run(img)
        # fold each BatchNorm into the convolution before it, for inference
        unit = model[2]
        unit.reduce = torch.nn.utils.fusion.fuse_conv_bn_eval(unit.reduce, unit.bn1)
        unit.bn1 = nn.Identity()
        got = model(img)
    return rec, want, (got - want).abs().max() < 1e-5, unit.reduce.bias, \
        model[4].bn2.running_var, model[4].dw.weight.grad[0, 0]


PROGRAMS += [shufflenet_fused]


def switch_capacity_routing(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(11)
    rng = np.random.default_rng(11)
    tokens = torch.tensor(rng.standard_normal((12, 6)), dtype=torch.float32)
    target = torch.tanh(tokens @ torch.tensor(rng.standard_normal((6, 6)), dtype=torch.float32))
    experts, capacity = 3, 5

    class SwitchFFN(nn.Module):
        """Top-1 routing with a capacity per expert: tokens past it are dropped (pass
        through the residual); a load-balancing loss and a router z-loss."""

        def __init__(self, d=6, hidden=8):
            super().__init__()
            self.router = nn.Linear(d, experts, bias=False)
            self.w1 = nn.Parameter(torch.randn(experts, d, hidden) * 0.3)
            self.w2 = nn.Parameter(torch.randn(experts, hidden, d) * 0.3)

        def forward(self, x):
            logits = self.router(x)
            probs = logits.softmax(-1)
            gate, index = probs.max(-1)
            mask = F.one_hot(index, experts)
            position = (mask.cumsum(0) - 1) * mask  # the token's slot in its expert
            keep = (position < capacity) & (mask > 0)
            dispatch = F.one_hot(position.clamp(max=capacity - 1), capacity) * keep[..., None]
            dispatch = dispatch.float()  # (tokens, experts, capacity)
            inputs = torch.einsum("tec,td->ecd", dispatch, x)
            out = torch.bmm(F.gelu(torch.bmm(inputs, self.w1)), self.w2)
            combined = torch.einsum("tec,ecd->td", dispatch * gate[:, None, None], out)
            frac = mask.float().mean(0)
            balance = experts * (frac * probs.mean(0)).sum()
            z_loss = torch.logsumexp(logits, -1).pow(2).mean()
            return x + combined, balance, z_loss, keep.sum(0)

    model = SwitchFFN()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rec = []
    for _ in range(3):
        out, balance, z_loss, kept = run(tokens)
        loss = F.mse_loss(out, target) + 0.01 * balance + 1e-3 * z_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((loss.item(), balance.item(), kept.tolist()))
    return rec, out[:3], model.router.weight.grad, model.w1.grad[:, 0]


PROGRAMS += [switch_capacity_routing]


def differentiable_ranking(torch, compiled=False):
    nn = torch.nn
    torch.manual_seed(12)
    rng = np.random.default_rng(12)
    feats = torch.tensor(rng.standard_normal((10, 5)), dtype=torch.float32)
    relevance = feats @ torch.tensor([1.0, -0.5, 0.2, 0.0, 0.8]) + 0.1 * torch.tensor(
        rng.standard_normal(10), dtype=torch.float32)

    def soft_rank(s, tau=0.3):
        """Each item's rank as a sum of pairwise sigmoids (1 for the smallest)."""
        return 0.5 + torch.sigmoid((s[:, None] - s[None, :]) / tau).sum(1)

    def hard_rank(s):
        return s.argsort().argsort().float() + 1

    scorer = nn.Sequential(nn.Linear(5, 8), nn.Softplus(), nn.Linear(8, 1))
    run = _maybe_compile(torch, compiled)(scorer)
    opt = torch.optim.Adam(scorer.parameters(), lr=2e-2)
    pairs = torch.combinations(torch.arange(10), 2)
    sign = torch.sign(relevance[pairs[:, 0]] - relevance[pairs[:, 1]])
    margin = nn.MarginRankingLoss(margin=0.1)
    rec = []
    for _ in range(4):
        s = run(feats).squeeze(-1)
        ranks = soft_rank(s)
        spearman = torch.corrcoef(torch.stack([ranks, hard_rank(relevance)]))[0, 1]
        loss = (1 - spearman) + margin(s[pairs[:, 0]], s[pairs[:, 1]], sign)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((loss.item(), spearman.item()))
    order = torch.argsort(s, descending=True)
    ranked = torch.take_along_dim(relevance, order)
    # DCG of the top 5 against the ideal ordering
    disc = 1 / torch.log2(torch.arange(2, 7).float())
    ndcg = (ranked[:5] * disc).sum() / (torch.msort(relevance).flip(0)[:5] * disc).sum()
    return rec, pairs.shape, ndcg, hard_rank(s), scorer[0].weight.grad


PROGRAMS += [differentiable_ranking]


def calibration_metrics(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(13)
    rng = np.random.default_rng(13)
    x = torch.tensor(rng.standard_normal((60, 3)), dtype=torch.float32)
    y = ((x[:, 0] - x[:, 1] + 0.5 * torch.tensor(rng.standard_normal(60),
                                                 dtype=torch.float32)) > 0).long()
    train, val = slice(0, 40), slice(40, 60)

    model = nn.Sequential(nn.Linear(3, 12), nn.ReLU(), nn.Linear(12, 2))
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=5e-2)
    for _ in range(5):
        loss = F.cross_entropy(run(x[train]), y[train])
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        logits = run(x[val])
    # temperature scaling on the held-out part
    log_t = torch.zeros(1, requires_grad=True)
    t_opt = torch.optim.Adam([log_t], lr=0.1)
    for _ in range(5):
        nll = F.cross_entropy(logits / log_t.exp(), y[val])
        t_opt.zero_grad()
        nll.backward()
        t_opt.step()
    probs = (logits / log_t.exp()).softmax(-1).detach()
    conf, pred = probs.max(-1)
    correct = (pred == y[val]).float()
    # expected calibration error over five confidence bins
    edges = torch.linspace(0.5, 1.0, 6)
    bins = torch.bucketize(conf, edges[1:-1])
    counts = torch.bincount(bins, minlength=5).float()
    acc_bin = torch.zeros(5).scatter_add_(0, bins, correct) / counts
    conf_bin = torch.zeros(5).scatter_add_(0, bins, conf) / counts
    ece = (counts / counts.sum() * (acc_bin - conf_bin).abs()).nansum()
    # ROC AUC by the trapezoid rule over thresholds
    score = probs[:, 1]
    order = score.argsort(descending=True)
    pos = y[val][order].float()
    tpr = torch.cat([torch.zeros(1), pos.cumsum(0) / pos.sum()])
    fpr = torch.cat([torch.zeros(1), (1 - pos).cumsum(0) / (1 - pos).sum()])
    auc = torch.trapezoid(tpr, fpr)
    std, mean = torch.std_mean(score)
    hist = torch.histogram(score, bins=4, range=(0.0, 1.0))
    return loss, log_t, ece, acc_bin.nanmean(), auc, (std, mean), \
        torch.quantile(score, torch.tensor([0.1, 0.5, 0.9])), hist.hist, hist.bin_edges, \
        torch.cov(torch.stack([score, y[val].float()])), model[0].weight.grad


PROGRAMS += [calibration_metrics]


def cyclic_polynomial_schedules(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(14)
    rng = np.random.default_rng(14)
    x = torch.tensor(rng.standard_normal((16, 3)), dtype=torch.float32)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5]])
    sched = torch.optim.lr_scheduler

    def make(kind):
        model = nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        if kind == "cyclic":
            s = sched.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=2,
                               mode="triangular2", base_momentum=0.8, max_momentum=0.95)
        elif kind == "poly":
            s = sched.PolynomialLR(opt, total_iters=5, power=2.0)
        elif kind == "onecycle":
            s = sched.OneCycleLR(opt, max_lr=0.1, total_steps=8, pct_start=0.25,
                                 three_phase=True, anneal_strategy="linear")
        else:
            s = sched.SequentialLR(opt, [sched.ConstantLR(opt, factor=0.5, total_iters=2),
                                         sched.CosineAnnealingWarmRestarts(opt, T_0=3,
                                                                           T_mult=2)],
                                   milestones=[3])
        return model, opt, s

    out = {}
    for kind in ("cyclic", "poly", "onecycle", "sequential"):
        model, opt, s = make(kind)
        run = _maybe_compile(torch, compiled)(model)
        lrs, moms = [], []
        for step in range(7):
            loss = F.mse_loss(run(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            s.step()
            lrs.append(s.get_last_lr()[0])
            moms.append(opt.param_groups[0]["momentum"])
            if step == 3:
                # resume from a checkpoint midway: the schedule carries on where it was
                state = s.state_dict()
                model2, opt2, s2 = make(kind)
                opt2.load_state_dict(opt.state_dict())
                s2.load_state_dict(state)
                resumed = s2.last_epoch
        out[kind] = (lrs, moms, loss.item(), model.weight, resumed)
    return out


PROGRAMS += [cyclic_polynomial_schedules]


def rnncell_truncated_bptt(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(15)
    text = "abcabcaabbccabcacb" * 2
    vocab = sorted(set(text))
    ids = torch.tensor([vocab.index(c) for c in text])

    class CharRNN(nn.Module):
        def __init__(self, v=3, h=10):
            super().__init__()
            self.emb = nn.Embedding(v, 6)
            self.cell1 = nn.RNNCell(6, h, nonlinearity="relu")
            self.cell2 = nn.RNNCell(h, h)
            self.clip = nn.Hardtanh(-2.0, 2.0)
            self.out = nn.Linear(h, v)

        def forward(self, t, h1, h2):
            h1 = self.clip(self.cell1(self.emb(t), h1))
            h2 = self.cell2(h1, h2)
            return self.out(h2), h1, h2

    model = CharRNN()
    step = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-2)
    h1, h2 = torch.zeros(1, 10), torch.zeros(1, 10)
    rec, window = [], 6
    for start in range(0, 24, window):
        # truncated back-propagation: the state carries on, its history does not
        h1, h2 = h1.detach(), h2.detach()
        loss = 0
        for t in range(start, start + window):
            logits, h1, h2 = step(ids[t:t + 1], h1, h2)
            loss = loss + F.cross_entropy(logits, ids[t + 1:t + 2])
        opt.zero_grad()
        (loss / window).backward()
        nn.utils.clip_grad_value_(model.parameters(), 0.5)
        opt.step()
        rec.append(loss.item() / window)
    # sampled generation, then its runs of repeated characters
    with torch.no_grad():
        t, h1, h2, out = ids[:1], torch.zeros(1, 10), torch.zeros(1, 10), []
        for _ in range(12):
            logits, h1, h2 = model(t, h1, h2)
            t = torch.multinomial(logits.softmax(-1), 1)[0]
            out.append(t)
    gen = torch.cat(out)
    values, counts = torch.unique_consecutive(gen, return_counts=True)
    return rec, gen, values, counts, model.cell1.weight_ih.grad, model.cell2.bias_hh


PROGRAMS += [rnncell_truncated_bptt]


def structured_weights(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(16)
    rng = np.random.default_rng(16)
    x = torch.tensor(rng.standard_normal((20, 8)), dtype=torch.float32)
    y = torch.tensor(rng.standard_normal((20, 8)), dtype=torch.float32)

    class KroneckerLinear(nn.Module):
        """W = A kron B: 8x8 from a 2x2 and a 4x4 factor."""

        def __init__(self):
            super().__init__()
            self.A = nn.Parameter(torch.randn(2, 2) * 0.5)
            self.B = nn.Parameter(torch.randn(4, 4) * 0.5)

        def forward(self, x):
            return x @ torch.kron(self.A, self.B).T

    class BlockDiagonal(nn.Module):
        """Independent 2x2 blocks, then a fixed interleaving permutation (Monarch-like)."""

        def __init__(self):
            super().__init__()
            self.blocks = nn.ParameterList([nn.Parameter(torch.randn(2, 2) * 0.5)
                                            for _ in range(4)])
            self.register_buffer("perm", torch.arange(8).reshape(2, 4).T.reshape(-1))

        def forward(self, x):
            return (x @ torch.block_diag(*self.blocks).T)[:, self.perm]

    class LowRankDiag(nn.Module):
        def __init__(self):
            super().__init__()
            self.u = nn.Parameter(torch.randn(8, 2) * 0.3)
            self.v = nn.Parameter(torch.randn(2, 8) * 0.3)
            self.d = nn.Parameter(torch.ones(8))

        def forward(self, x):
            return x * self.d + (x @ self.u) @ self.v

    model = nn.Sequential(KroneckerLinear(), nn.Tanh(), BlockDiagonal(), nn.Tanh(),
                          LowRankDiag())
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
    rec = []
    for _ in range(3):
        loss = F.mse_loss(run(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    params = sum(p.numel() for p in model.parameters())
    dense = torch.kron(model[0].A, model[0].B)
    return rec, params, dense[:2], model[0].B.grad, model[2].blocks[1].grad, model[4].d


PROGRAMS += [structured_weights]


def neural_process(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    torch.manual_seed(17)
    rng = np.random.default_rng(17)
    # a batch of sine tasks: random amplitude and phase
    amp = rng.uniform(0.5, 2, (4, 1))
    phase = rng.uniform(0, np.pi, (4, 1))
    xs = rng.uniform(-3, 3, (4, 12))
    x = torch.tensor(xs, dtype=torch.float32)[..., None]
    y = torch.tensor(amp * np.sin(xs + phase), dtype=torch.float32)[..., None]
    ctx = 5

    class NP(nn.Module):
        """A latent neural process: a deterministic path (mean of encodings) and a latent
        path (a Normal over z), decoded into a Normal over each target y."""

        def __init__(self, d=12):
            super().__init__()
            self.det = nn.Sequential(nn.Linear(2, d), nn.ReLU(), nn.Linear(d, d))
            self.lat = nn.Sequential(nn.Linear(2, d), nn.ReLU(), nn.Linear(d, 2 * 4))
            self.dec = nn.Sequential(nn.Linear(1 + d + 4, d), nn.ReLU(), nn.Linear(d, 2))

        def latent(self, xc, yc):
            mu, raw = self.lat(torch.cat([xc, yc], -1)).mean(1).chunk(2, -1)
            return D.Normal(mu, 0.1 + 0.9 * torch.sigmoid(raw))

        def decode(self, xc, yc, xt, z):
            r = self.det(torch.cat([xc, yc], -1)).mean(1, keepdim=True)
            h = torch.cat([xt, r.expand(-1, xt.shape[1], -1),
                           z[:, None].expand(-1, xt.shape[1], -1)], -1)
            mu, raw = self.dec(h).chunk(2, -1)
            return mu, 0.1 + 0.9 * F.softplus(raw)

    model = NP()
    decode = _maybe_compile(torch, compiled)(model.decode)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    rec = []
    for _ in range(3):
        prior = model.latent(x[:, :ctx], y[:, :ctx])
        posterior = model.latent(x, y)
        z = posterior.rsample()
        mu, sigma = decode(x[:, :ctx], y[:, :ctx], x, z)
        nll = F.gaussian_nll_loss(mu, y, sigma ** 2, full=True)
        kl = D.kl_divergence(posterior, prior).sum(-1).mean()
        loss = nll + kl / x.shape[1]
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((nll.item(), kl.item()))
    return rec, mu[0, :4, 0], sigma[0, :4, 0], model.lat[2].weight.grad[:2], \
        model.dec[0].weight.grad[:2]


PROGRAMS += [neural_process]


def zinb_counts(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(18)
    rng = np.random.default_rng(18)
    covariates = torch.tensor(rng.standard_normal((30, 4)), dtype=torch.float32)
    rate = np.exp(covariates.numpy() @ np.array([0.5, -0.3, 0.2, 0.0]) + 1.0)
    counts = rng.poisson(rate) * (rng.uniform(size=30) > 0.3)  # zero-inflated
    k = torch.tensor(counts, dtype=torch.float32)

    def zinb_log_prob(k, mu, theta, pi_logit):
        """Zero-inflated negative binomial (mean mu, inverse dispersion theta, dropout
        logit), computed in log space as scVI does."""
        log_theta_mu = torch.log(theta + mu + 1e-8)
        nb = (theta * (torch.log(theta + 1e-8) - log_theta_mu)
              + torch.xlogy(k, mu + 1e-8) - k * log_theta_mu
              + torch.lgamma(k + theta) - torch.lgamma(theta) - torch.lgamma(k + 1))
        zero_case = torch.logaddexp(pi_logit, nb) - F.softplus(pi_logit)
        nonzero_case = nb - F.softplus(pi_logit)
        return torch.where(k < 0.5, zero_case, nonzero_case)

    def poisson_log_prob(k, log_mu):
        return torch.xlogy(k, log_mu.exp()) - log_mu.exp() - torch.lgamma(k + 1)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.mean = nn.Linear(4, 1)
            self.dropout = nn.Linear(4, 1)
            self.log_theta = nn.Parameter(torch.zeros(1))

        def forward(self, c, k):
            mu = self.mean(c).squeeze(-1).exp()
            ll = zinb_log_prob(k, mu, self.log_theta.exp(), self.dropout(c).squeeze(-1))
            return -ll.mean()

    model = Model()
    glm = nn.Linear(4, 1)
    loss_fn = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(list(model.parameters()) + list(glm.parameters()), lr=5e-2)
    rec = []
    for _ in range(4):
        zinb = loss_fn(covariates, k)
        pois = -poisson_log_prob(k, glm(covariates).squeeze(-1)).mean()
        opt.zero_grad()
        (zinb + pois).backward()
        opt.step()
        rec.append((zinb.item(), pois.item()))
    # torch's own Poisson agrees with the hand-written one
    ref = F.poisson_nll_loss(glm(covariates).squeeze(-1), k, full=False)
    mine = -(torch.xlogy(k, glm(covariates).squeeze(-1).exp())
             - glm(covariates).squeeze(-1).exp()).mean()
    # the gradient of lgamma is digamma
    t = model.log_theta.exp().detach().requires_grad_(True)
    (g,) = torch.autograd.grad(torch.lgamma(t).sum(), t)
    return rec, (ref - mine).abs() < 1e-5, model.log_theta.grad, model.dropout.weight.grad, \
        g - torch.digamma(t), glm.weight


PROGRAMS += [zinb_counts]


def von_mises_angles(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(19)
    rng = np.random.default_rng(19)
    x = torch.tensor(rng.standard_normal((24, 3)), dtype=torch.float32)
    theta = torch.atan2(x[:, 1], x[:, 0] + 0.5) + 0.2 * torch.tensor(
        rng.standard_normal(24), dtype=torch.float32)

    class AngleHead(nn.Module):
        """Predicts a direction as a unit (cos, sin) pair and a concentration kappa."""

        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 3))

        def forward(self, x):
            c, s, raw = self.body(x).unbind(-1)
            norm = torch.hypot(c, s) + 1e-6
            mu = torch.atan2(s / norm, c / norm)
            kappa = F.softplus(raw) + 0.1
            return mu, kappa

    def nll(theta, mu, kappa):
        # log I0(kappa) = log i0e(kappa) + kappa, stable for large kappa
        log_norm = math.log(2 * math.pi) + torch.log(torch.special.i0e(kappa)) + kappa
        return (log_norm - kappa * torch.cos(theta - mu)).mean()

    model = AngleHead()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adamax(model.parameters(), lr=2e-2)
    rec = []
    for _ in range(4):
        mu, kappa = run(x)
        loss = nll(theta, mu, kappa)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    ref = torch.distributions.VonMises(mu.detach(), kappa.detach()).log_prob(theta).mean()
    # a Gaussian copula of the predictions: ranks through the probit, erfinv
    u = (kappa.argsort().argsort().float() + 0.5) / kappa.numel()
    z = math.sqrt(2) * torch.erfinv(2 * u - 1)
    return rec, (ref + loss).abs() < 1e-3, kappa[:4], z[:4], torch.special.i0(kappa[:3]), \
        model.body[0].weight.grad


PROGRAMS += [von_mises_angles]


def complex_spectral_filter(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(20)
    rng = np.random.default_rng(20)
    n = 16
    t = np.arange(n)
    clean = np.sin(2 * np.pi * 2 * t / n)[None] * rng.uniform(0.5, 1.5, (8, 1))
    noisy = clean + 0.4 * rng.standard_normal((8, n))
    x = torch.tensor(noisy, dtype=torch.float32)
    target = torch.tensor(clean, dtype=torch.float32)

    class SpectralFilter(nn.Module):
        """A learned complex gain per frequency, applied with the FFT (complex64 weights)."""

        def __init__(self):
            super().__init__()
            self.gain = nn.Parameter(torch.ones(n, dtype=torch.complex64) * 0.5)

        def forward(self, x):
            spec = torch.fft.fft(x.to(torch.complex64))
            return torch.fft.ifft(spec * self.gain).real

    model = SpectralFilter()
    run = _maybe_compile(torch, compiled)(model)
    # (plain SGD: some gains' imaginary gradients are zero up to rounding, which Adam's
    # normalisation would blow up to full steps)
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.5)
    rec = []
    for _ in range(4):
        loss = F.mse_loss(run(x), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    g = model.gain.detach()
    return rec, g.dtype, torch.view_as_real(g)[:4], g.abs()[:4], g.angle()[:4], \
        torch.view_as_real(model.gain.grad)[:4], torch.polar(g.abs(), g.angle())[1]


PROGRAMS += [complex_spectral_filter]


def alexnet_era_layers(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(21)
    rng = np.random.default_rng(21)
    img = torch.tensor(rng.uniform(0, 1, (4, 3, 12, 12)), dtype=torch.float32)
    y = torch.tensor([0, 1, 1, 0])
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.Threshold(0.05, 0.0),
        nn.LocalResponseNorm(3, alpha=1e-2, beta=0.75, k=2.0),
        nn.LPPool2d(2, 2),
        nn.Conv2d(8, 8, 3, padding=1), nn.Tanhshrink(),
        nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.0), nn.Linear(72, 2))
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, dampening=0.1)
    rec = []
    for _ in range(3):
        loss = F.cross_entropy(run(img), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    feats = model[:4](img)
    # the legacy cross-map normalisation (eager only: torch.compile breaks its graph too)
    # against LocalResponseNorm with the same settings. (Its values only: fusegrad's
    # backward is the exact derivative, which PyTorch's legacy backward is not.)
    lrn_in = model[:2](img).detach().requires_grad_(True)
    legacy = nn.CrossMapLRN2d(3, alpha=1e-2, beta=0.75, k=2.0)(lrn_in)
    return rec, feats.shape, feats[0, 0, :2], model[0].weight.grad[0, 0], \
        model[4].weight.grad[1, 2], model[9].bias, legacy[0, :2, 0], \
        (legacy - model[2](lrn_in)).abs().max()


PROGRAMS += [alexnet_era_layers]


_OP_NAMES = itertools.count()


def custom_op_library(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(22)
    rng = np.random.default_rng(22)
    x = torch.tensor(rng.standard_normal((10, 4)), dtype=torch.float32)
    y = torch.tensor(rng.standard_normal((10, 1)), dtype=torch.float32)
    # (a fresh name per run: an operator is defined once per process)
    name = f"progs9::soft_clip{next(_OP_NAMES)}"

    @torch.library.custom_op(name, mutates_args=())
    def soft_clip(x: torch.Tensor, limit: float) -> torch.Tensor:
        """limit * tanh(x / limit), computed outside autograd."""
        return limit * torch.tanh(x / limit)

    @soft_clip.register_fake
    def _(x, limit):
        return torch.empty_like(x)

    def setup_context(ctx, inputs, output):
        x, limit = inputs
        ctx.save_for_backward(output)
        ctx.limit = limit

    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * (1 - (out / ctx.limit) ** 2), None

    soft_clip.register_autograd(backward, setup_context=setup_context)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 8)
            self.b = nn.Linear(8, 1)

        def forward(self, x):
            return self.b(soft_clip(self.a(x), 1.5))

    model = Net()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.NAdam(model.parameters(), lr=1e-2)
    rec = []
    for _ in range(3):
        loss = F.mse_loss(run(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    probe = torch.tensor([-3.0, 0.0, 3.0], requires_grad=True)
    out = soft_clip(probe, 1.5)
    out.sum().backward()
    # (the node's name carries the operator's, which differs between runs)
    node = type(out.grad_fn).__name__
    return rec, out.detach(), node == f"GeneratedBackwardFor_{name.replace('::', '_')}" \
        "_defaultBackward", probe.grad, model.a.weight.grad, model.b.weight


PROGRAMS += [custom_op_library]


def cond_and_export(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(23)
    rng = np.random.default_rng(23)
    xs = [torch.tensor(rng.standard_normal((3, 4)) + shift, dtype=torch.float32)
          for shift in (1.5, -1.5)]

    class Gated(nn.Module):
        """Two branches chosen by a data-dependent predicate, through torch.cond."""

        def __init__(self):
            super().__init__()
            self.pos = nn.Linear(4, 4)
            self.neg = nn.Linear(4, 4)

        def forward(self, x):
            def if_pos(x):
                return F.relu(self.pos(x))

            def if_neg(x):
                return torch.sigmoid(self.neg(x)) - 1

            return torch.cond(x.sum() > 0, if_pos, if_neg, (x,))

    model = Gated()
    run = _maybe_compile(torch, compiled)(model)
    eager = [model(x) for x in xs]
    outs = [run(x) for x in xs]
    sum(o.sum() for o in outs).backward()
    # a head without data-dependent control flow, exported, saved and loaded back
    head = nn.Sequential(nn.Linear(4, 6), nn.GELU(), nn.LayerNorm(6), nn.Linear(6, 2))
    exported = torch.export.export(head, (eager[0].detach(),))
    buf = io.BytesIO()
    torch.export.save(exported, buf)
    buf.seek(0)
    loaded = torch.export.load(buf)
    want = head(eager[1])
    got = loaded.module()(eager[1])
    return eager, [(a - b).abs().max() for a, b in zip(eager, outs)], model.pos.weight.grad, \
        model.neg.bias.grad, (got - want).abs().max() < 1e-6, sorted(loaded.state_dict), \
        [s.arg.name for s in exported.graph_signature.input_specs
         if s.kind.name == "USER_INPUT"]


PROGRAMS += [cond_and_export]


def transformer_xl_memory(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(24)
    rng = np.random.default_rng(24)
    stream = torch.tensor(rng.integers(0, 8, (2, 19)))
    seg, mem_len, d, heads = 6, 6, 8, 2

    class XLLayer(nn.Module):
        """Attention over [memory; segment] with a learned relative-position bias; the
        memory is the previous segment's hidden states, without their history."""

        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d)
            self.rel = nn.Embedding(seg + mem_len, heads)
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.ff = nn.Sequential(nn.Linear(d, 16), nn.ReLU(), nn.Linear(16, d))

        def forward(self, h, mem):
            full = torch.cat([mem, h], 1)
            q = self.qkv(h)[..., :d]
            k, v = self.qkv(full)[..., d:].chunk(2, -1)
            b, lq, lk = h.shape[0], h.shape[1], full.shape[1]
            q = q.view(b, lq, heads, -1).transpose(1, 2)
            k = k.view(b, lk, heads, -1).transpose(1, 2)
            v = v.view(b, lk, heads, -1).transpose(1, 2)
            i = torch.arange(lq)[:, None] + (lk - lq)
            j = torch.arange(lk)[None, :]
            dist = (i - j).clamp(0, seg + mem_len - 1)
            bias = self.rel(dist).permute(2, 0, 1)  # (heads, lq, lk)
            mask = j > i
            scores = q @ k.transpose(-1, -2) / math.sqrt(d // heads) + bias
            attn = scores.masked_fill(mask, float("-inf")).softmax(-1)
            out = (attn @ v).transpose(1, 2).reshape(b, lq, d)
            h = self.ln1(h + out)
            return self.ln2(h + self.ff(h))

    class XL(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(8, d)
            self.layer = XLLayer()
            self.head = nn.Linear(d, 8)

        def forward(self, t, mem):
            h = self.layer(self.emb(t), mem)
            return self.head(h), h[:, -mem_len:].detach()

    model = XL()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.RAdam(model.parameters(), lr=1e-2)
    mem = torch.zeros(2, mem_len, d)
    rec = []
    for start in range(0, 18, seg):
        inp, tgt = stream[:, start:start + seg], stream[:, start + 1:start + seg + 1]
        logits, mem = run(inp, mem)
        loss = F.cross_entropy(logits.reshape(-1, 8), tgt.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((loss.item(), mem.requires_grad))
    return rec, mem[0, 0], model.layer.rel.weight.grad, model.layer.qkv.weight.grad[:2]


PROGRAMS += [transformer_xl_memory]


def optimizer_in_backward(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    P = torch.nn.utils.parametrize
    torch.manual_seed(25)
    rng = np.random.default_rng(25)
    x = torch.tensor(rng.standard_normal((16, 5)), dtype=torch.float32)
    y = torch.tensor(rng.standard_normal((16, 2)), dtype=torch.float32)

    def make():
        torch.manual_seed(26)
        model = nn.Sequential(nn.Linear(5, 5), nn.Tanh(), nn.Linear(5, 2))
        torch.nn.utils.parametrizations.orthogonal(model[0])
        return model

    # the reference: one optimizer stepped after backward
    ref = make()
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    # each parameter stepped as soon as its gradient is accumulated, then freed
    fused = make()
    run = _maybe_compile(torch, compiled)(fused)
    opts = {p: torch.optim.AdamW([p], lr=1e-2) for p in fused.parameters()}

    def step_now(p):
        opts[p].step()
        opts[p].zero_grad()

    handles = [p.register_post_accumulate_grad_hook(step_now) for p in fused.parameters()]
    rec = []
    for _ in range(3):
        loss = F.mse_loss(ref(x), y)
        ref_opt.zero_grad()
        loss.backward()
        ref_opt.step()
        loss2 = F.mse_loss(run(x), y)
        loss2.backward()
        rec.append((loss.item(), loss2.item()))
    for h in handles:
        h.remove()
    with P.cached():  # the orthogonal weight computed once for the block
        w = fused[0].weight
        ortho = (w @ w.T - torch.eye(5)).abs().max() < 1e-5
        same = w is fused[0].weight
    return rec, ortho, same, [p.grad for p in fused.parameters()], \
        fused[0].parametrizations.weight.original - ref[0].parametrizations.weight.original, \
        fused[2].bias, ref[2].bias


PROGRAMS += [optimizer_in_backward]


def graphsage_sparse(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(27)
    rng = np.random.default_rng(27)
    n, graphs = 12, 3
    adj = (rng.uniform(size=(n, n)) < 0.3).astype(np.float32)
    adj = np.maximum(adj, adj.T)
    np.fill_diagonal(adj, 0)
    graph_of = torch.tensor(np.repeat(np.arange(graphs), n // graphs))
    # no edges between the graphs of the batch
    adj *= (graph_of[:, None] == graph_of[None, :]).numpy()
    deg = adj.sum(1, keepdims=True).clip(min=1)
    A = torch.tensor(adj / deg).to_sparse()  # row-normalised: the neighbours' mean
    feats = torch.tensor(rng.standard_normal((n, 4)), dtype=torch.float32)
    labels = torch.tensor([0, 1, 1])

    class SAGE(nn.Module):
        def __init__(self, d_in, d_out):
            super().__init__()
            self.self_lin = nn.Linear(d_in, d_out)
            self.neigh_lin = nn.Linear(d_in, d_out, bias=False)

        def forward(self, h, neigh):
            return F.normalize(F.relu(self.self_lin(h) + self.neigh_lin(neigh)), dim=-1)

    l1, l2, head = SAGE(4, 8), SAGE(8, 8), nn.Linear(8, 2)
    layer1 = _maybe_compile(torch, compiled)(l1)
    layer2 = _maybe_compile(torch, compiled)(l2)
    params = [*l1.parameters(), *l2.parameters(), *head.parameters()]
    opt = torch.optim.Adam(params, lr=1e-2)
    rec = []
    for _ in range(3):
        h = layer1(feats, torch.sparse.mm(A.float(), feats))
        h = layer2(h, torch.sparse.mm(A.float(), h))
        # max-pool each graph's nodes
        pooled = torch.full((graphs, 8), -1e9).index_reduce(0, graph_of, h, "amax")
        loss = F.cross_entropy(head(pooled), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    same = (A.to_dense().float() @ feats - torch.sparse.mm(A.float(), feats)).abs().max() < 1e-6
    return rec, same, A._nnz(), A.is_coalesced(), pooled[:, :3], l1.neigh_lin.weight.grad, \
        l2.self_lin.bias.grad


PROGRAMS += [graphsage_sparse]


def contractive_autoencoder(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    func = torch.func
    torch.manual_seed(28)
    rng = np.random.default_rng(28)
    x = torch.tensor(rng.standard_normal((8, 4)), dtype=torch.float32)

    enc = nn.Sequential(nn.Linear(4, 3), nn.Sigmoid())
    dec = nn.Linear(3, 4)
    encode = _maybe_compile(torch, compiled)(enc)
    opt = torch.optim.Adam([*enc.parameters(), *dec.parameters()], lr=1e-2)
    params = dict(enc.named_parameters())

    def code_of(p, sample):
        return func.functional_call(enc, p, (sample,))

    rec = []
    for _ in range(3):
        recon = dec(encode(x))
        # the contractive penalty: each sample's encoder Jacobian, squared Frobenius norm
        jac = func.vmap(func.jacfwd(code_of, argnums=1), in_dims=(None, 0))(params, x)
        penalty = jac.pow(2).sum((1, 2)).mean()
        loss = F.mse_loss(recon, x) + 0.1 * penalty
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((loss.item(), penalty.item()))
    # the same Jacobian by reverse mode, and a Jacobian-vector product by forward mode
    jr = torch.autograd.functional.jacobian(lambda s: enc(s), x[0])
    v = torch.ones(4)
    _, jv = torch.autograd.functional.jvp(lambda s: enc(s), x[0], v)
    return rec, jac.shape, (jr - jac[0].detach()).abs().max() < 1e-5, jv, jr @ v, \
        enc[0].weight.grad, dec.bias


PROGRAMS += [contractive_autoencoder]


def occupancy_grid(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(29)
    rng = np.random.default_rng(29)
    side = 4
    # points in the unit square, scattered into a side x side grid of cells
    pts = torch.tensor(rng.uniform(0, 1, (2, 10, 2)), dtype=torch.float32)
    labels = torch.tensor([0, 1])
    centres = (torch.cartesian_prod(torch.arange(side), torch.arange(side)).float() + 0.5) / side

    class GridNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.point = nn.Sequential(nn.Linear(4, 6), nn.ReLU())
            self.conv = nn.Sequential(nn.Conv2d(6, 6, 3, padding=1), nn.ReLU(),
                                      nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(6, 2))

        def forward(self, feats, occupied):
            grid = torch.zeros(occupied.shape[0], side * side, feats.shape[-1])
            # each occupied cell takes the next point feature in order
            grid = grid.masked_scatter(occupied[..., None], feats)
            return self.conv(grid.transpose(1, 2).reshape(-1, feats.shape[-1], side, side))

    model = GridNet()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    # the nearest cell of each point; the first point of a cell claims it
    nearest = torch.cdist(pts, centres.expand(2, -1, -1)).argmin(-1)
    occupied = torch.zeros(2, side * side, dtype=torch.bool)
    occupied.scatter_(1, nearest, True)
    keep = occupied.sum(1)
    rec = []
    for _ in range(3):
        offsets = pts - centres[nearest]
        per_point = model.point(torch.cat([pts, offsets], -1))
        # one feature per occupied cell: the max over the points in it
        cell = torch.full((2, side * side, 6), -1e9).scatter_reduce(
            1, nearest[..., None].expand(-1, -1, 6), per_point, "amax")
        feats = cell[occupied]
        logits = run(feats, occupied)
        loss = F.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    return rec, keep, centres[:3], logits.detach(), model.point[0].weight.grad, \
        model.conv[0].weight.grad[0, 0]


PROGRAMS += [occupancy_grid]


def running_normalizer(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(30)
    rng = np.random.default_rng(30)
    obs = torch.tensor(rng.standard_normal((5, 6, 3)) * [1.0, 5.0, 0.1] + [0, 2, -1],
                       dtype=torch.float32)
    returns = torch.tensor(rng.standard_normal((5, 6)), dtype=torch.float32)

    class RunningNorm(nn.Module):
        """Welford's running mean and variance in float64 buffers, updated in place while
        training; float32 observations normalised and clipped."""

        def __init__(self, d, clip=3.0):
            super().__init__()
            self.clip = clip
            self.register_buffer("mean", torch.zeros(d, dtype=torch.float64))
            self.register_buffer("m2", torch.zeros(d, dtype=torch.float64))
            self.register_buffer("count", torch.tensor(0, dtype=torch.long))

        def forward(self, x):
            if self.training:
                n = x.shape[0]
                batch_mean = x.mean(0).double()
                batch_m2 = ((x.double() - batch_mean) ** 2).sum(0)
                total = self.count + n
                delta = batch_mean - self.mean
                self.mean.add_(delta * n / total)
                self.m2.add_(batch_m2 + delta ** 2 * self.count * n / total)
                self.count.add_(n)
            var = self.m2 / (self.count - 1).clamp(min=1)
            z = (x - self.mean) / torch.sqrt(var + 1e-8)
            return z.float().clamp_(-self.clip, self.clip)

    class Critic(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = RunningNorm(3)
            self.body = nn.Sequential(nn.Linear(3, 8), nn.ELU(), nn.Linear(8, 1))

        def forward(self, x):
            return self.body(self.norm(x)).squeeze(-1)

    model = Critic()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.body.parameters(), lr=1e-2)
    rec = []
    for i in range(5):
        v = run(obs[i])
        loss = F.smooth_l1_loss(v, returns[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    model.eval()
    with torch.no_grad():
        frozen = run(obs[0])
    ref_mean = obs.reshape(-1, 3).double().mean(0)
    ref_var = obs.reshape(-1, 3).double().var(0)
    return rec, model.norm.mean, model.norm.count, (model.norm.mean - ref_mean).abs().max(), \
        model.norm.m2 / (model.norm.count - 1) - ref_var, frozen, model.body[0].weight.grad


PROGRAMS += [running_normalizer]


def hashed_features(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(31)
    rng = np.random.default_rng(31)
    ids = torch.tensor(rng.integers(-2**40, 2**40, (6, 5)))
    y = torch.tensor(rng.integers(0, 2, 6))
    buckets = 37

    class HashEmbedding(nn.Module):
        """The hashing trick with two hash functions: 64-bit integer arithmetic (products
        that wrap around, xor, arithmetic shifts, floor remainders of negative numbers)."""

        def __init__(self):
            super().__init__()
            self.table = nn.Embedding(buckets, 4)
            self.mix = nn.Parameter(torch.ones(2))

        def forward(self, ids):
            h1 = torch.remainder(ids * 2654435761 + 97, buckets)
            h2 = ((ids ^ (ids >> 7)) * -7046029254386353131) % buckets
            q = torch.div(ids, 1000, rounding_mode="floor") % buckets
            e = self.mix[0] * self.table(h1) + self.mix[1] * self.table(h2)
            return e.sum(1), h1, h2, q

    model = nn.ModuleDict({"emb": HashEmbedding(), "head": nn.Linear(4, 2)})

    def forward(ids):
        e, h1, h2, q = model["emb"](ids)
        return model["head"](e), h1, h2, q

    run = _maybe_compile(torch, compiled)(forward)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
    rec = []
    for _ in range(3):
        logits, h1, h2, q = run(ids)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    return rec, h1, h2, q, ids * 2654435761, model["emb"].mix, \
        model["emb"].table.weight.grad[:5]


PROGRAMS += [hashed_features]


def strided_patch_ops(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(32)
    rng = np.random.default_rng(32)
    img = torch.tensor(rng.standard_normal((2, 8, 8)), dtype=torch.float32)
    target = torch.tensor(rng.standard_normal((2, 8, 8)), dtype=torch.float32)

    class PatchMixer(nn.Module):
        """Overlapping 4x4 patches read with Tensor.unfold, mixed, and folded back by
        index_put with accumulation (overlaps summed), normalised by the overlap count."""

        def __init__(self):
            super().__init__()
            self.mix = nn.Linear(16, 16)
            self.gain = nn.Parameter(torch.ones(8))

        def forward(self, x):
            patches = x.unfold(1, 4, 2).unfold(2, 4, 2)  # (b, 3, 3, 4, 4)
            mixed = self.mix(patches.reshape(*patches.shape[:3], 16)).reshape(patches.shape)
            rows = (torch.arange(3)[:, None] * 2 + torch.arange(4)[None, :])
            r = rows[:, None, :, None].expand(3, 3, 4, 4)
            c = rows[None, :, None, :].expand(3, 3, 4, 4)
            out = torch.zeros_like(x)
            count = torch.zeros(8, 8)
            for b in range(x.shape[0]):
                out[b].index_put_((r, c), mixed[b], accumulate=True)
            count.index_put_((r, c), torch.ones(3, 3, 4, 4), accumulate=True)
            out = out / count
            # a learned gain on the diagonal, written through a view
            diag = out.diagonal(dim1=1, dim2=2)
            diag.mul_(self.gain)
            return out.transpose(1, 2).contiguous().narrow(1, 1, 6), count

    model = PatchMixer()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rec = []
    for _ in range(3):
        out, count = run(img)
        loss = F.mse_loss(out, target.transpose(1, 2)[:, 1:7])
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    return rec, count, out[0, :2], model.gain.grad, model.mix.weight.grad[:2]


PROGRAMS += [strided_patch_ops]


def varying_shapes_and_guards(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(33)
    rng = np.random.default_rng(33)
    # length-bucketed batches: each has its own sequence length and batch size
    batches = [(torch.tensor(rng.standard_normal((b, t, 4)), dtype=torch.float32),
                torch.tensor(rng.integers(0, 3, b))) for b, t in
               [(4, 5), (3, 7), (4, 9), (2, 7), (4, 5)]]

    class Tagger(nn.Module):
        """A convolution over the sequence, attention pooling with a temperature annealed
        between steps (a float attribute), label smoothing switched off for evaluation."""

        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(4, 8, 3, padding=1)
            self.score = nn.Linear(8, 1)
            self.head = nn.Linear(8, 3)
            self.temperature = 2.0
            self.smoothing = 0.1

        def forward(self, x, y):
            h = torch.tanh(self.conv(x.transpose(1, 2))).transpose(1, 2)
            w = (self.score(h).squeeze(-1) / self.temperature).softmax(-1)
            logits = self.head((w.unsqueeze(-1) * h).sum(1))
            eps = self.smoothing if self.training else 0.0
            return F.cross_entropy(logits, y, label_smoothing=eps), w

    model = Tagger()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rec = []
    for x, y in batches:
        loss, w = run(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        model.temperature *= 0.7
        rec.append((loss.item(), tuple(w.shape), w[0, 0].item()))
    model.eval()
    with torch.no_grad():
        x, y = batches[1]
        evals = [run(x, y)[0]]
        # the same data laid out time-major, read through a transposed view
        evals.append(run(x.transpose(0, 1).contiguous().transpose(0, 1), y)[0])
    # (not the score's bias: the softmax ignores it, so its gradient is rounding noise)
    return rec, evals, model.temperature, model.conv.weight.grad[:2], model.score.weight


PROGRAMS += [varying_shapes_and_guards]


def spline_flow(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(34)
    rng = np.random.default_rng(34)
    # a bimodal 1-d sample inside the spline's interval
    data = torch.tensor(np.concatenate([rng.normal(-1.2, 0.3, 20), rng.normal(1.0, 0.4, 20)]),
                        dtype=torch.float32).clamp(-2.9, 2.9)
    K, bound = 5, 3.0

    class RQSpline(nn.Module):
        """A monotone rational-quadratic spline on [-B, B] (identity outside): bins found
        with searchsorted, the log-determinant from the spline's derivative."""

        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(K) * 0.1)
            self.h = nn.Parameter(torch.randn(K) * 0.1)
            self.d = nn.Parameter(torch.randn(K - 1) * 0.1)

        def knots(self, raw):
            widths = F.softmax(raw, -1) * 2 * bound
            return F.pad(torch.cumsum(widths, -1), (1, 0)) - bound, widths

        def forward(self, x):
            xk, w = self.knots(self.w)
            yk, h = self.knots(self.h)
            deriv = F.pad(F.softplus(self.d) + 1e-3, (1, 1), value=1.0)
            idx = (torch.searchsorted(xk.detach(), x.detach()) - 1).clamp(0, K - 1)
            x0, w_k, y0, h_k = xk[idx], w[idx], yk[idx], h[idx]
            d0, d1 = deriv[idx], deriv[idx + 1]
            s = h_k / w_k
            xi = (x - x0) / w_k
            num = h_k * (s * xi ** 2 + d0 * xi * (1 - xi))
            den = s + (d1 + d0 - 2 * s) * xi * (1 - xi)
            y = y0 + num / den
            dnum = s ** 2 * (d1 * xi ** 2 + 2 * s * xi * (1 - xi) + d0 * (1 - xi) ** 2)
            logdet = torch.log(dnum) - 2 * torch.log(den)
            return y, logdet

    flow = RQSpline()
    run = _maybe_compile(torch, compiled)(flow)
    base = torch.distributions.Normal(0.0, 1.0)
    opt = torch.optim.Adam(flow.parameters(), lr=5e-2)
    rec = []
    for _ in range(4):
        z, logdet = run(data)
        nll = -(base.log_prob(z) + logdet).mean()
        opt.zero_grad()
        nll.backward()
        opt.step()
        rec.append(nll.item())
    grid = torch.linspace(-2.5, 2.5, 6)
    with torch.no_grad():
        zg, ldg = flow(grid)
    monotone = bool((zg[1:] > zg[:-1]).all())
    return rec, zg, ldg.exp(), monotone, flow.w.grad, flow.d.grad


PROGRAMS += [spline_flow]


def rotate_knowledge_graph(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(35)
    rng = np.random.default_rng(35)
    entities, relations, dim = 10, 3, 4
    triples = torch.tensor(np.stack([rng.integers(0, entities, 24), rng.integers(0, relations, 24),
                                     rng.integers(0, entities, 24)], 1))

    class RotatE(nn.Module):
        """Entities as complex vectors, relations as rotations (unit complex numbers from a
        phase); the score is the distance of head * rotation from the tail."""

        def __init__(self, gamma=4.0):
            super().__init__()
            self.gamma = gamma
            self.ent = nn.Embedding(entities, 2 * dim)
            self.phase = nn.Embedding(relations, dim)
            nn.init.uniform_(self.phase.weight, -math.pi, math.pi)

        def forward(self, h, r, t):
            head = torch.view_as_complex(self.ent(h).view(*h.shape, dim, 2))
            tail = torch.view_as_complex(self.ent(t).view(*t.shape, dim, 2))
            rot = torch.polar(torch.ones_like(self.phase(r)), self.phase(r))
            return self.gamma - (head * rot - tail).abs().sum(-1)

    model = RotatE()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=5e-2)
    rec = []
    for _ in range(3):
        h, r, t = triples.unbind(1)
        # negatives: each triple's tail corrupted by a fixed shift
        neg_t = (t[:, None] + torch.arange(1, 4)) % entities
        pos = run(h, r, t)
        neg = run(h[:, None].expand(-1, 3), r[:, None].expand(-1, 3), neg_t)
        # self-adversarial weights over the negatives (no gradient through them)
        weights = F.softmax(neg.detach(), -1)
        loss = -(F.logsigmoid(pos).mean() + (weights * F.logsigmoid(-neg)).sum(-1).mean())
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    ranks = (run(h[:, None].expand(-1, entities), r[:, None].expand(-1, entities),
                 torch.arange(entities).expand(24, -1)) > pos[:, None]).sum(-1) + 1
    return rec, ranks, (1.0 / ranks.float()).mean(), model.ent.weight.grad[:3], \
        model.phase.weight.grad


PROGRAMS += [rotate_knowledge_graph]


# Loosened where a program's values are long sums of float32 rounding that PyTorch's kernels
# and NumPy's accumulate in a different order.
_TOLERANCES = {}


@pytest.mark.parametrize("prog", PROGRAMS, ids=[p.__name__ for p in PROGRAMS])
def test_program(prog):
    _check(prog, *_TOLERANCES.get(prog.__name__, (1e-4, 1e-5)))


# The programs that compile a model or function when asked.
COMPILED = [p for p in PROGRAMS if "_maybe_compile(torch, compiled)" in inspect.getsource(p)]
_RUNS = [(p, b) for p in COMPILED for b in ("eager", "aot_eager", "inductor")]




# Programs one of whose graphs AOT autograd cannot trace yet, so that it runs as FX code
# instead (the values are still compared); each gap's minimal repro. When a gap closes its
# test fails here, to be taken off the list.
_AOT_GAPS: dict = {
    "cond_and_export":
        "a cond whose branches read different lifted parameters is not traced (eager gives "
        "the parameters of the branch not taken no gradient, a select would give zeros): "
        "lin1, lin2 = nn.Linear(2, 2), nn.Linear(2, 2); f = lambda x: fg.cond(x.sum() > 0, "
        "lambda x: lin1(x), lambda x: lin2(x), (x,)); fg.compile(f, backend='aot_eager')"
        "(fg.ones(2)) runs its graph as FX code ('the branches' results depend on different "
        "operands')",
}


@pytest.mark.parametrize("prog,backend", _RUNS, ids=[f"{p.__name__}-{b}" for p, b in _RUNS])
def test_compiled_matches_eager(prog, backend):
    want, want_error, want_text = run_program(prog, fg)
    with compiler_fallbacks() as fallbacks:
        got, got_error, got_text = run_program(functools.partial(prog, compiled=backend), fg)
    assert got_error == want_error is None
    assert got_text == want_text
    compare(want, got, "compiled", 1e-5, 1e-5)
    if backend != "eager":
        # AOT autograd and the code generator compile every graph: none run eagerly
        if prog.__name__ in _AOT_GAPS:
            assert fallbacks, f"closed, take it off _AOT_GAPS: {_AOT_GAPS[prog.__name__]}"
        else:
            assert not fallbacks, fallbacks


# torch.compile (2.13, backend="eager") captures each compiled program without a graph break
# (checked with torch._dynamo's graph-break counters). fusegrad must capture them whole too.
# Where it breaks instead, the values are still right (test_compiled_matches_eager): the break
# only costs the graph. Each gap's minimal repro is in the reason.
_CAPTURE_GAPS = {
}
_NO_BREAK = [pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=_CAPTURE_GAPS[p.__name__]))
             if p.__name__ in _CAPTURE_GAPS else p for p in COMPILED]


@pytest.mark.parametrize("prog", _NO_BREAK,
                         ids=[p.values[0].__name__ if hasattr(p, "values") else p.__name__
                              for p in _NO_BREAK])
def test_compiled_without_graph_breaks(prog):
    from fusegrad._dynamo.utils import counters

    fg._dynamo.reset()
    counters.clear()
    _, error, _ = run_program(functools.partial(prog, compiled="eager"), fg)
    assert error is None
    assert not counters["graph_break"], dict(counters["graph_break"])
    assert counters["stats"]["unique_graphs"] >= 1
