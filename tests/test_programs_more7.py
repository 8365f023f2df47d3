"""Whole programs as PyTorch users write them, of kinds the other program files touch only
in part: a small GAN (two optimizers, detached fakes, BCE with logits), a VAE with the
reparameterisation trick and a Bernoulli decoder, a seq2seq GRU translator with additive
attention and teacher forcing, a char-RNN trained and sampled with a temperature through a
seeded generator, a tiny U-Net (skip concatenation, transposed convolutions, GroupNorm), a
diffusion training loop on a cosine noise schedule with sinusoidal time embeddings and DDIM
sampling, an InfoNCE momentum encoder with a queue buffer, knowledge distillation with a
temperature, mixup with label smoothing, gradient accumulation under bfloat16 autocast with a
GradScaler, a custom module with hooks and buffers, weight tying, a learning-rate finder,
early stopping with state_dict copies, a graph network with index_add_ / scatter_reduce, a
top-k mixture of experts with a load-balancing loss, a tokenizer with an EmbeddingBag text
classifier, a transformer decoding with a KV cache, a planar / affine-coupling normalizing
flow with log-determinants, REINFORCE with Categorical sampling, a Siamese network with a
contrastive margin loss, a padded TransformerEncoder classifier, straight-through rounding,
MADE (masked Linear subclasses, ancestral sampling), set pooling with MultiheadAttention,
focal loss over a WeightedRandomSampler, Gaussian-mixture EM (Cholesky, logsumexp),
uncertainty-weighted multi-task learning, a convolutional autoencoder (Upsample,
PixelShuffle, reflect padding), a compiled forward that writes its buffers, sparsemax
feature selection, an ArcFace margin and ALiBi sliding-window attention.

Each program takes the library as its argument (`torch` or fusegrad), seeds it and builds its
data with NumPy, and returns what it recorded: losses per step, outputs, gradients, parameters,
reprs and the errors of deliberate mistakes. `test_program` runs it with both libraries and
compares values (~1e-4 relative), dtypes, shapes, grad_fn names, printed text and raised
errors. Programs whose model or step torch.compile compiles take `compiled=<backend>`;
`test_compiled_matches_eager` compares fusegrad compiled under each backend against fusegrad
eager (and checks that AOT autograd and the code generator compiled every graph, none run
eagerly or as FX code instead), and `test_compiled_without_graph_breaks` checks that fusegrad
captures them whole where torch.compile does."""

import functools
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import copy  # noqa: E402
import inspect  # noqa: E402
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
from program_support import error_of as _error  # noqa: E402
from program_support import maybe_compile as _maybe_compile  # noqa: E402

import fusegrad as fg  # noqa: E402


def _check(prog, rtol=1e-4, atol=1e-5):
    check_program(prog, torch, fg, rtol, atol)


PROGRAMS = []


def gan_two_optimizers(torch, compiled=False):
    nn = torch.nn
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    # real data: a noisy ring in the plane
    ang = rng.uniform(0, 2 * np.pi, 64)
    real = torch.tensor(np.stack([np.cos(ang), np.sin(ang)], 1)
                        + 0.05 * rng.standard_normal((64, 2)), dtype=torch.float32)
    noise = torch.tensor(rng.standard_normal((5, 16, 4)), dtype=torch.float32)
    G = nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 2))
    D = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Dropout(0.0), nn.Linear(16, 1))
    run_g, run_d = _maybe_compile(torch, compiled)(G), _maybe_compile(torch, compiled)(D)
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-3, betas=(0.5, 0.999))
    crit = nn.BCEWithLogitsLoss()
    rec = []
    for step in range(5):
        batch = real[step * 12:step * 12 + 16]
        fake = run_g(noise[step])
        # discriminator: real labelled 0.9 (one-sided smoothing), fakes detached
        opt_d.zero_grad()
        d_real, d_fake = run_d(batch), run_d(fake.detach())
        loss_d = crit(d_real, torch.full_like(d_real, 0.9)) + \
            crit(d_fake, torch.zeros_like(d_fake))
        loss_d.backward()
        opt_d.step()
        # generator: the non-saturating loss through the updated discriminator
        opt_g.zero_grad()
        loss_g = crit(run_d(fake), torch.ones(16, 1))
        loss_g.backward()
        d_grad_norm = sum(p.grad.norm() ** 2 for p in D.parameters()).sqrt()
        opt_g.step()
        rec.append((loss_d.item(), loss_g.item(), d_grad_norm.item(), fake.grad_fn is None))
    with torch.no_grad():
        samples = G(noise[0])
    return rec, samples, G[2].bias, D[0].weight.grad, type(loss_d.grad_fn).__name__


PROGRAMS += [gan_two_optimizers]


def vae_reparam(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(1)
    rng = np.random.default_rng(1)
    x = torch.tensor((rng.uniform(size=(24, 12)) > 0.6).astype(np.float32))
    eps_all = torch.tensor(rng.standard_normal((4, 8, 3)), dtype=torch.float32)

    class VAE(nn.Module):
        def __init__(self, d=12, h=10, z=3):
            super().__init__()
            self.enc = nn.Linear(d, h)
            self.mu, self.logvar = nn.Linear(h, z), nn.Linear(h, z)
            self.dec = nn.Sequential(nn.Linear(z, h), nn.Tanh(), nn.Linear(h, d))

        def forward(self, x, eps):
            h = F.softplus(self.enc(x))
            mu, logvar = self.mu(h), self.logvar(h).clamp(-6, 6)
            z = mu + torch.exp(0.5 * logvar) * eps
            return self.dec(z), mu, logvar

    model = VAE()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.RMSprop(model.parameters(), lr=5e-3, alpha=0.9, centered=True)
    rec = []
    for step in range(4):
        xb = x[step * 6:step * 6 + 8] if step < 3 else x[-8:]
        logits, mu, logvar = run(xb, eps_all[step])
        rec_loss = F.binary_cross_entropy_with_logits(logits, xb, reduction="sum") / len(xb)
        kl = -0.5 * torch.mean(torch.sum(1 + logvar - mu.pow(2) - logvar.exp(), dim=1))
        beta = min(1.0, (step + 1) / 3)
        loss = rec_loss + beta * kl
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((rec_loss.item(), kl.item(), loss.item()))
    # a decoded draw and the ELBO under the trained model; the posterior in torch.distributions
    with torch.no_grad():
        logits, mu, logvar = model(x[:4], eps_all[0, :4])
        q = torch.distributions.Normal(mu, (0.5 * logvar).exp())
        p = torch.distributions.Normal(torch.zeros_like(mu), torch.ones_like(mu))
        kl_closed = torch.distributions.kl_divergence(q, p).sum(-1)
        like = torch.distributions.Bernoulli(logits=logits).log_prob(x[:4]).sum(-1)
    return rec, kl_closed, like, torch.sigmoid(logits), model.logvar.weight, \
        opt.state_dict()["state"][1]["grad_avg"]


PROGRAMS += [vae_reparam]


def seq2seq_teacher_forcing(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(2)
    rng = np.random.default_rng(2)
    SOS, EOS, V, H = 0, 1, 9, 12
    # the task: reverse a sequence of digits 2..8
    src = torch.tensor(rng.integers(2, V, (6, 5)))
    tgt = torch.cat([src.flip(1), torch.full((6, 1), EOS)], 1)
    teacher = rng.uniform(size=(4, 6)) < 0.5

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, H)
            self.rnn = nn.GRU(H, H, batch_first=True, bidirectional=True)
            self.bridge = nn.Linear(2 * H, H)

        def forward(self, s):
            out, h = self.rnn(self.emb(s))
            return out, torch.tanh(self.bridge(torch.cat([h[0], h[1]], -1)))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, H)
            self.wq, self.wk = nn.Linear(H, H, bias=False), nn.Linear(2 * H, H)
            self.v = nn.Linear(H, 1, bias=False)
            self.cell = nn.GRUCell(H + 2 * H, H)
            self.out = nn.Linear(H, V)

        def forward(self, tok, h, enc):
            # Bahdanau additive attention over the encoder states
            scores = self.v(torch.tanh(self.wq(h).unsqueeze(1) + self.wk(enc))).squeeze(-1)
            attn = F.softmax(scores, -1)
            ctx = torch.bmm(attn.unsqueeze(1), enc).squeeze(1)
            h = self.cell(torch.cat([self.emb(tok), ctx], -1), h)
            return F.log_softmax(self.out(h), -1), h, attn

    enc, dec = Encoder(), Decoder()
    step_fn = _maybe_compile(torch, compiled)(dec)
    params = list(enc.parameters()) + list(dec.parameters())
    opt = torch.optim.Adam(params, lr=1e-2)
    crit = nn.NLLLoss()
    rec = []
    for epoch in range(4):
        enc_out, h = enc(src)
        tok = torch.full((6,), SOS)
        loss = 0
        for t in range(tgt.shape[1]):
            logp, h, attn = step_fn(tok, h, enc_out)
            loss = loss + crit(logp, tgt[:, t])
            # teacher forcing per step, decided by the NumPy draw
            tok = tgt[:, t] if teacher[epoch, t] else logp.argmax(-1).detach()
        opt.zero_grad()
        (loss / tgt.shape[1]).backward()
        gn = nn.utils.clip_grad_norm_(params, 5.0)
        opt.step()
        rec.append((loss.item(), gn.item(), attn.sum(-1)))
    with torch.no_grad():
        enc_out, h = enc(src[:2])
        tok, outs = torch.full((2,), SOS), []
        for _ in range(6):
            logp, h, attn = dec(tok, h, enc_out)
            tok = logp.argmax(-1)
            outs.append(tok)
    return rec, torch.stack(outs, 1), attn, dec.cell.weight_hh.grad, enc.rnn.weight_ih_l0_reverse


PROGRAMS += [seq2seq_teacher_forcing]


def char_rnn_sampler(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(3)
    text = "hello world, hello fusegrad. the world says hello.\n"
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    V, H, T = len(chars), 16, 10

    class CharRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, 8)
            self.lstm = nn.LSTM(8, H, num_layers=2, batch_first=True, dropout=0.0)
            self.head = nn.Linear(H, V)

        def forward(self, x, state=None):
            out, state = self.lstm(self.emb(x), state)
            return self.head(out), state

    model = CharRNN()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    starts = np.arange(0, len(text) - T - 1, 7)
    xb = torch.stack([data[s:s + T] for s in starts])
    yb = torch.stack([data[s + 1:s + T + 1] for s in starts])
    rec = []
    for _ in range(5):
        logits, (h, c) = run(xb)
        loss = F.cross_entropy(logits.transpose(1, 2), yb)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), 0.5)
        opt.step()
        rec.append((loss.item(), math.exp(loss.item())))
    # sampling: temperature, a seeded generator and a top-k filter
    g = torch.Generator().manual_seed(42)
    model.eval()
    out, state = [stoi["h"]], None
    with torch.inference_mode():
        x = torch.tensor([[out[0]]])
        for _ in range(12):
            logits, state = model(x, state)
            logits = logits[0, -1] / 0.8
            v, _ = torch.topk(logits, 5)
            logits[logits < v[-1]] = -float("inf")
            probs = F.softmax(logits, -1)
            nxt = torch.multinomial(probs, 1, generator=g).item()
            out.append(nxt)
            x = torch.tensor([[nxt]])
    sample = "".join(chars[i] for i in out)
    return rec, sample, state[0].shape, probs, model.lstm.bias_hh_l1, g.initial_seed(), \
        probs.is_inference()


PROGRAMS += [char_rnn_sampler]


def unet_tiny(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(4)
    rng = np.random.default_rng(4)
    img = torch.tensor(rng.standard_normal((3, 1, 16, 16)), dtype=torch.float32)
    mask = (F.avg_pool2d(img, 3, 1, 1) > 0.2).float()

    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False),
                             nn.GroupNorm(2, cout), nn.SiLU(),
                             nn.Conv2d(cout, cout, 3, padding=1), nn.SiLU())

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1, self.d2 = block(1, 4), block(4, 8)
            self.mid = block(8, 8)
            self.up2 = nn.ConvTranspose2d(8, 8, 2, stride=2)
            self.u2 = block(16, 4)
            self.up1 = nn.ConvTranspose2d(4, 4, 2, stride=2)
            self.u1 = block(8, 4)
            self.out = nn.Conv2d(4, 1, 1)

        def forward(self, x):
            s1 = self.d1(x)
            s2 = self.d2(F.max_pool2d(s1, 2))
            m = self.mid(F.max_pool2d(s2, 2))
            y = self.u2(torch.cat([self.up2(m), s2], 1))
            y = self.u1(torch.cat([self.up1(y), s1], 1))
            return self.out(y)

    model = UNet()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)

    def dice(logits, target, eps=1.0):
        p = torch.sigmoid(logits)
        inter = (p * target).sum((1, 2, 3))
        return 1 - ((2 * inter + eps) / (p.sum((1, 2, 3)) + target.sum((1, 2, 3)) + eps)).mean()

    rec = []
    for _ in range(4):
        logits = run(img)
        loss = F.binary_cross_entropy_with_logits(logits, mask, pos_weight=torch.tensor(2.0)) \
            + dice(logits, mask)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    iou = ((logits > 0) & (mask > 0)).sum() / ((logits > 0) | (mask > 0)).sum().clamp(min=1)
    return rec, iou, logits.shape, model.up2.weight.grad, model.d1[1].weight, \
        sum(p.numel() for p in model.parameters())


PROGRAMS += [unet_tiny]


def diffusion_cosine(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(5)
    rng = np.random.default_rng(5)
    T = 20
    # the cosine schedule (Nichol & Dhariwal), betas clipped at 0.999
    s = 0.008
    steps = torch.arange(T + 1, dtype=torch.float64) / T
    abar = torch.cos((steps + s) / (1 + s) * math.pi / 2) ** 2
    abar = abar / abar[0]
    betas = (1 - abar[1:] / abar[:-1]).clamp(max=0.999).float()
    alphas_cumprod = torch.cumprod(1 - betas, 0)
    x0_all = torch.tensor(rng.standard_normal((40, 2)) * 0.3 + np.array([1.0, -0.5]),
                          dtype=torch.float32)
    t_all = torch.tensor(rng.integers(0, T, (4, 16)))
    noise_all = torch.tensor(rng.standard_normal((4, 16, 2)), dtype=torch.float32)

    def time_embedding(t, dim=8):
        half = dim // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
        args = t.float()[:, None] * freqs[None]
        return torch.cat([torch.sin(args), torch.cos(args)], -1)

    class Denoiser(nn.Module):
        def __init__(self):
            super().__init__()
            self.t_mlp = nn.Sequential(nn.Linear(8, 16), nn.Mish())
            self.inp = nn.Linear(2, 16)
            self.body = nn.Sequential(nn.LayerNorm(16), nn.GELU(approximate="tanh"),
                                      nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 2))

        def forward(self, x, t):
            return self.body(self.inp(x) + self.t_mlp(time_embedding(t)))

    model = Denoiser()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    ema = torch.optim.swa_utils.AveragedModel(
        model, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.9))
    rec = []
    for i in range(4):
        x0, t, eps = x0_all[i * 8:i * 8 + 16], t_all[i], noise_all[i]
        ab = alphas_cumprod.gather(0, t).view(-1, 1)
        xt = ab.sqrt() * x0 + (1 - ab).sqrt() * eps
        loss = F.mse_loss(run(xt, t), eps)
        opt.zero_grad()
        loss.backward()
        opt.step()
        ema.update_parameters(model)
        rec.append(loss.item())
    # DDIM (eta = 0) sampling with the EMA weights on a strided schedule
    x = torch.tensor(rng.standard_normal((3, 2)), dtype=torch.float32)
    taus = list(range(T - 1, -1, -5))
    with torch.no_grad():
        for j, tau in enumerate(taus):
            tt = torch.full((3,), tau, dtype=torch.long)
            eps = ema.module(x, tt)
            a_t = alphas_cumprod[tau]
            a_prev = alphas_cumprod[taus[j + 1]] if j + 1 < len(taus) else torch.tensor(1.0)
            x0_hat = (x - (1 - a_t).sqrt() * eps) / a_t.sqrt()
            x = a_prev.sqrt() * x0_hat + (1 - a_prev).sqrt() * eps
    return rec, betas, x, ema.n_averaged, ema.module.inp.weight, model.t_mlp[0].weight.grad


PROGRAMS += [diffusion_cosine]


def infonce_momentum_queue(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(6)
    rng = np.random.default_rng(6)
    base = rng.standard_normal((40, 10))
    view1 = torch.tensor(base + 0.1 * rng.standard_normal(base.shape), dtype=torch.float32)
    view2 = torch.tensor(base * 1.1 + 0.1 * rng.standard_normal(base.shape),
                         dtype=torch.float32)

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(10, 16), nn.BatchNorm1d(16), nn.ReLU(),
                                     nn.Linear(16, 8))

        def forward(self, x):
            return F.normalize(self.net(x), dim=1)

    class MoCo(nn.Module):
        def __init__(self, K=16, m=0.9, tau=0.2):
            super().__init__()
            self.q, self.k = Encoder(), Encoder()
            self.k.load_state_dict(self.q.state_dict())
            for p in self.k.parameters():
                p.requires_grad_(False)
            self.m, self.tau = m, tau
            self.register_buffer("queue", F.normalize(torch.randn(K, 8), dim=1))
            self.register_buffer("ptr", torch.zeros(1, dtype=torch.long))

        @torch.no_grad()
        def momentum_update(self):
            for pq, pk in zip(self.q.parameters(), self.k.parameters()):
                pk.mul_(self.m).add_(pq.detach(), alpha=1 - self.m)

        @torch.no_grad()
        def enqueue(self, keys):
            p = int(self.ptr)
            self.queue[p:p + len(keys)] = keys
            self.ptr[0] = (p + len(keys)) % self.queue.shape[0]

    moco = MoCo()
    q_enc = _maybe_compile(torch, compiled)(moco.q)
    opt = torch.optim.SGD(moco.q.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    rec = []
    for i in range(4):
        a, b = view1[i * 8:i * 8 + 8], view2[i * 8:i * 8 + 8]
        q = q_enc(a)
        with torch.no_grad():
            moco.momentum_update()
            k = moco.k(b)
        l_pos = torch.einsum("nc,nc->n", q, k).unsqueeze(-1)
        l_neg = torch.einsum("nc,kc->nk", q, moco.queue.clone().detach())
        logits = torch.cat([l_pos, l_neg], 1) / moco.tau
        loss = F.cross_entropy(logits, torch.zeros(len(q), dtype=torch.long))
        opt.zero_grad()
        loss.backward()
        opt.step()
        moco.enqueue(k)
        acc = (logits.argmax(1) == 0).float().mean()
        rec.append((loss.item(), acc.item(), int(moco.ptr)))
    return rec, moco.queue, moco.k.net[1].running_var, moco.q.net[0].weight, \
        sorted(moco.state_dict().keys())[:4], moco.k.net[0].weight.requires_grad


PROGRAMS += [infonce_momentum_queue]


def distill_temperature(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(7)
    rng = np.random.default_rng(7)
    x = torch.tensor(rng.standard_normal((48, 6)), dtype=torch.float32)
    y = torch.tensor((rng.standard_normal(48) > 0).astype(np.int64) +
                     (rng.standard_normal(48) > 1).astype(np.int64))
    teacher = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                            nn.Linear(32, 3))
    student = nn.Sequential(nn.Linear(6, 8), nn.Hardswish(), nn.Linear(8, 3))
    t_opt = torch.optim.Adam(teacher.parameters(), lr=1e-2)
    for _ in range(3):  # a briefly trained teacher
        t_opt.zero_grad()
        F.cross_entropy(teacher(x), y).backward()
        t_opt.step()
    teacher.eval().requires_grad_(False)
    run_s = _maybe_compile(torch, compiled)(student)
    opt = torch.optim.Adamax(student.parameters(), lr=2e-2)
    T, alpha = 3.0, 0.7
    kl = nn.KLDivLoss(reduction="batchmean")
    rec = []
    for i in range(5):
        xb, yb = x[i * 8:i * 8 + 16], y[i * 8:i * 8 + 16]
        with torch.no_grad():
            soft = F.softmax(teacher(xb) / T, -1)
        logits = run_s(xb)
        distill = kl(F.log_softmax(logits / T, -1), soft) * T * T
        hard = F.cross_entropy(logits, yb, label_smoothing=0.05)
        loss = alpha * distill + (1 - alpha) * hard
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((distill.item(), hard.item(), loss.item()))
    # log-target form, agreement and the teacher's frozen state
    with torch.no_grad():
        lt = F.kl_div(F.log_softmax(student(x) / T, -1), F.log_softmax(teacher(x) / T, -1),
                      reduction="sum", log_target=True)
        agree = (student(x).argmax(1) == teacher(x).argmax(1)).float().mean()
    return rec, lt, agree, student[2].weight, teacher[0].weight.requires_grad, teacher.training


PROGRAMS += [distill_temperature]


def mixup_label_smoothing(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(8)
    rng = np.random.default_rng(8)
    x = torch.tensor(rng.standard_normal((32, 3, 6, 6)), dtype=torch.float32)
    y = torch.tensor(rng.integers(0, 4, 32))
    lams = rng.beta(0.4, 0.4, 4)
    perms = [torch.tensor(rng.permutation(8)) for _ in range(4)]
    # (no bias before the batch norm: its gradient is rounding noise that NAdam would amplify)
    net = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1, bias=False), nn.BatchNorm2d(6), nn.ReLU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 4))
    run = _maybe_compile(torch, compiled)(net)
    opt = torch.optim.NAdam(net.parameters(), lr=1e-2, weight_decay=1e-3,
                            decoupled_weight_decay=True)
    crit = nn.CrossEntropyLoss(label_smoothing=0.1)
    rec = []
    for i in range(4):
        xb, yb = x[i * 8:i * 8 + 8], y[i * 8:i * 8 + 8]
        lam, perm = float(lams[i]), perms[i]
        mixed = lam * xb + (1 - lam) * xb[perm]
        out = run(mixed)
        loss = lam * crit(out, yb) + (1 - lam) * crit(out, yb[perm])
        # the same loss with soft targets: one-hot mixes, smoothed
        soft = lam * F.one_hot(yb, 4).float() + (1 - lam) * F.one_hot(yb[perm], 4).float()
        soft = soft * 0.9 + 0.1 / 4
        soft_loss = F.cross_entropy(out, soft)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((loss.item(), soft_loss.item(), round(lam, 6)))
    net.eval()
    with torch.no_grad():
        acc = (net(x).argmax(1) == y).float().mean()
    return rec, acc, net[1].running_mean, net[1].num_batches_tracked, net[0].weight.grad, \
        opt.state_dict()["param_groups"][0]["decoupled_weight_decay"]


PROGRAMS += [mixup_label_smoothing]


def accumulate_autocast_scaler(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(9)
    rng = np.random.default_rng(9)
    x = torch.tensor(rng.standard_normal((24, 8)), dtype=torch.float32)
    y = torch.tensor(rng.standard_normal((24, 1)), dtype=torch.float32)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8, growth_interval=2)
    accum, rec = 3, []
    for step in range(8):
        xb, yb = x[step * 3:step * 3 + 3], y[step * 3:step * 3 + 3]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = run(xb)
            loss = F.mse_loss(out.float(), yb) / accum
        scaler.scale(loss).backward()
        if step == 4:  # a poisoned gradient: the scaler skips the step and backs off
            model[0].weight.grad[0, 0] = float("inf")
        if (step + 1) % accum == 0 or step == 4:
            scaler.unscale_(opt)
            gn = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            rec.append((step, gn.item(), scaler.get_scale()))
        rec.append((out.dtype, loss.dtype, round(loss.item(), 3)))
    state = scaler.state_dict()
    return rec, model[0].weight, model[2].bias, state["scale"], state["_growth_tracker"], \
        scaler.is_enabled()


PROGRAMS += [accumulate_autocast_scaler]


def hooks_and_buffers(torch, compiled=False):
    nn = torch.nn
    torch.manual_seed(10)
    rng = np.random.default_rng(10)
    x = torch.tensor(rng.standard_normal((6, 5)), dtype=torch.float32)
    log = []

    class RunningNorm(nn.Module):
        """Normalises by running statistics kept in buffers, updated in training mode."""

        def __init__(self, d, momentum=0.5):
            super().__init__()
            self.momentum = momentum
            self.register_buffer("mean", torch.zeros(d))
            self.register_buffer("var", torch.ones(d))
            self.register_buffer("scratch", torch.zeros(d), persistent=False)
            self.scale = nn.Parameter(torch.ones(d))

        def forward(self, x):
            if self.training:
                with torch.no_grad():
                    self.mean.lerp_(x.mean(0), self.momentum)
                    self.var.lerp_(x.var(0, unbiased=False), self.momentum)
            return (x - self.mean) / torch.sqrt(self.var + 1e-5) * self.scale

        def extra_repr(self):
            return f"d={self.mean.numel()}, momentum={self.momentum}"

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = RunningNorm(5)
            self.fc = nn.Linear(5, 3)

        def forward(self, x, scale=1.0):
            return self.fc(self.norm(x)) * scale

    net = Net()

    def pre_hook(mod, args, kwargs):
        log.append(("pre", type(mod).__name__, sorted(kwargs)))
        return (args[0] * 2,), kwargs

    def fwd_hook(mod, args, out):
        log.append(("fwd", tuple(out.shape)))
        return out + 1

    def bwd_hook(mod, grad_in, grad_out):
        log.append(("bwd", [None if g is None else tuple(g.shape) for g in grad_in]))
        return (grad_in[0] * 0.5,)

    grads = {}
    h1 = net.register_forward_pre_hook(pre_hook, with_kwargs=True)
    h2 = net.fc.register_forward_hook(fwd_hook)
    h3 = net.fc.register_full_backward_hook(bwd_hook)
    h4 = net.norm.scale.register_hook(lambda g: grads.setdefault("scale", g.clone()))
    xr = x.clone().requires_grad_()
    out = net(xr, scale=3.0)
    out.sum().backward()
    rec = [out, xr.grad, net.norm.scale.grad, grads["scale"], net.norm.mean]
    for h in (h1, h2, h3, h4):
        h.remove()
    net.zero_grad()
    out2 = net(x)
    rec += [out2, list(log), repr(net), sorted(net.state_dict()),
            [n for n, _ in net.named_buffers()]]
    net.eval()
    run = _maybe_compile(torch, compiled)(net)
    with torch.no_grad():
        rec.append(run(x, scale=0.5))
    net.train()
    sd = copy.deepcopy(net.state_dict())
    fresh = Net()
    missing = fresh.load_state_dict(sd, strict=True)
    rec += [fresh.norm.var, str(missing), fresh.norm.scratch,
            _error(lambda: fresh.load_state_dict({"fc.weight": sd["fc.weight"]}))]
    return rec


PROGRAMS += [hooks_and_buffers]


def tied_autoencoder_lm(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(11)
    rng = np.random.default_rng(11)
    V, D = 13, 8
    tokens = torch.tensor(rng.integers(0, V, (4, 9)))

    class TiedLM(nn.Module):
        """A GRU language model whose output layer shares the embedding's weight, plus a tied
        autoencoder head that decodes with the encoder's transposed weight."""

        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D, padding_idx=0)
            self.rnn = nn.GRU(D, D, batch_first=True)
            self.proj = nn.Linear(V, D, bias=False)
            self.out = nn.Linear(D, V)
            self.out.weight = self.emb.weight

        def forward(self, x):
            h, _ = self.rnn(self.emb(x))
            return self.out(h)

        def autoencode(self, onehot):
            z = torch.tanh(self.proj(onehot))
            return F.linear(z, self.proj.weight.t())

    model = TiedLM()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rec = [len(list(model.parameters())), len(model.state_dict()),
           model.out.weight.data_ptr() == model.emb.weight.data_ptr()]
    for _ in range(4):
        logits = run(tokens[:, :-1])
        lm = F.cross_entropy(logits.reshape(-1, V), tokens[:, 1:].reshape(-1), ignore_index=0)
        onehot = F.one_hot(tokens[:, 0], V).float()
        ae = F.mse_loss(model.autoencode(onehot), onehot)
        loss = lm + ae
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((lm.item(), ae.item()))
    # the tie survives a state-dict round trip into a fresh model
    fresh = TiedLM()
    fresh.load_state_dict(model.state_dict())
    rec += [fresh.out.weight is fresh.emb.weight, torch.equal(fresh.out.weight, model.emb.weight)]
    return rec, model.emb.weight.grad, model.emb.weight[0], model.proj.weight.grad


PROGRAMS += [tied_autoencoder_lm]


def lr_finder(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(12)
    rng = np.random.default_rng(12)
    x = torch.tensor(rng.standard_normal((64, 4)), dtype=torch.float32)
    w = torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
    y = x @ w + 0.1 * torch.tensor(rng.standard_normal((64, 1)), dtype=torch.float32)
    model = nn.Sequential(nn.Linear(4, 8), nn.ELU(), nn.Linear(8, 1))
    run = _maybe_compile(torch, compiled)(model)
    init_state = copy.deepcopy(model.state_dict())
    opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    opt_state = copy.deepcopy(opt.state_dict())
    start, end, n = 1e-4, 10.0, 12
    gamma = (end / start) ** (1 / (n - 1))
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma)
    lrs, losses, smoothed, best = [], [], 0.0, float("inf")
    for i in range(n):
        xb, yb = x[(i * 8) % 64:(i * 8) % 64 + 8], y[(i * 8) % 64:(i * 8) % 64 + 8]
        loss = F.mse_loss(run(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        lrs.append(sched.get_last_lr()[0])
        smoothed = 0.7 * smoothed + 0.3 * loss.item()
        debiased = smoothed / (1 - 0.7 ** (i + 1))
        losses.append(debiased)
        best = min(best, debiased)
        sched.step()
        if not math.isfinite(debiased) or debiased > 4 * best:
            break
    # the steepest descent of the smoothed curve picks the rate; the model is restored
    grads = np.gradient(np.array(losses))
    suggested = lrs[int(np.argmin(grads))]
    model.load_state_dict(init_state)
    opt.load_state_dict(opt_state)
    for g in opt.param_groups:
        g["lr"] = suggested
    final = F.mse_loss(model(x), y)
    return [round(v, 10) for v in lrs], losses, suggested, final, model[0].weight, \
        opt.state_dict()["state"], len(lrs)


PROGRAMS += [lr_finder]


def early_stopping_best_state(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(13)
    rng = np.random.default_rng(13)
    x = torch.tensor(rng.standard_normal((60, 5)), dtype=torch.float32)
    y = torch.tensor((x.numpy()[:, 0] + 0.5 * x.numpy()[:, 1] > 0).astype(np.float32))
    y[:10] = 1 - y[:10]  # label noise, so the validation loss turns around
    gen = torch.Generator().manual_seed(0)
    train, val = torch.utils.data.random_split(
        torch.utils.data.TensorDataset(x, y), [40, 20], generator=gen)
    loader = torch.utils.data.DataLoader(train, batch_size=10, shuffle=True,
                                         generator=torch.Generator().manual_seed(1))
    vx, vy = next(iter(torch.utils.data.DataLoader(val, batch_size=20)))
    model = nn.Sequential(nn.Linear(5, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                          nn.Linear(32, 1))
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=3e-2)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1)
    best, best_state, patience, bad, rec = float("inf"), None, 3, 0, []
    for epoch in range(12):
        model.train()
        for xb, yb in loader:
            loss = F.binary_cross_entropy_with_logits(run(xb).squeeze(1), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            v = F.binary_cross_entropy_with_logits(model(vx).squeeze(1), vy).item()
        sched.step(v)
        rec.append((epoch, round(loss.item(), 5), round(v, 5), opt.param_groups[0]["lr"]))
        if v < best - 1e-4:
            best, bad = v, 0
            best_state = {k: t.detach().clone() for k, t in model.state_dict().items()}
        else:
            bad += 1
            if bad >= patience:
                break
    last = model[0].weight.clone()
    model.load_state_dict(best_state)
    with torch.no_grad():
        restored = F.binary_cross_entropy_with_logits(model(vx).squeeze(1), vy)
    return rec, best, restored, last, model[0].weight, train.indices, \
        sched.state_dict()["num_bad_epochs"]


PROGRAMS += [early_stopping_best_state]


def gnn_scatter(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(14)
    rng = np.random.default_rng(14)
    # two small graphs in one batch: 7 and 5 nodes, directed edges both ways
    n_nodes = 12
    edges = [(0, 1), (1, 2), (2, 3), (3, 0), (3, 4), (4, 5), (5, 6), (6, 2),
             (7, 8), (8, 9), (9, 10), (10, 11), (11, 7), (8, 10)]
    ei = torch.tensor(edges + [(b, a) for a, b in edges]).t().contiguous()
    batch = torch.tensor([0] * 7 + [1] * 5)
    feats = torch.tensor(rng.standard_normal((n_nodes, 4)), dtype=torch.float32)
    target = torch.tensor([[1.0], [-1.0]])

    class SAGE(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.self_lin, self.nbr_lin = nn.Linear(cin, cout), nn.Linear(cin, cout, bias=False)

        def forward(self, x, ei):
            src, dst = ei
            deg = torch.zeros(x.shape[0]).index_add_(0, dst, torch.ones(dst.shape[0]))
            agg = torch.zeros_like(x).index_add_(0, dst, x[src]) / deg.clamp(min=1)[:, None]
            mx = torch.full_like(x, -1e9).scatter_reduce(
                0, dst[:, None].expand(-1, x.shape[1]), x[src], reduce="amax",
                include_self=True)
            return self.self_lin(x) + self.nbr_lin(agg + mx)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.c2 = SAGE(4, 8), SAGE(8, 8)
            self.att = nn.Linear(8, 1)
            self.head = nn.Linear(8, 1)

        def forward(self, x, ei, batch):
            h = F.relu(self.c1(x, ei))
            h = F.relu(self.c2(h, ei))
            # attention pooling per graph: a scatter softmax
            s = self.att(h).squeeze(-1)
            smax = torch.zeros(2).scatter_reduce(0, batch, s, "amax", include_self=False)
            e = torch.exp(s - smax[batch])
            denom = torch.zeros(2).index_add(0, batch, e)
            a = e / denom[batch]
            pooled = torch.zeros(2, h.shape[1]).index_add(0, batch, a[:, None] * h)
            return self.head(pooled), a

    model = Net()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rec = []
    for _ in range(4):
        out, a = run(feats, ei, batch)
        loss = F.smooth_l1_loss(out, target, beta=0.5)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    sums = torch.zeros(2).scatter_add(0, batch, a.detach())
    counts = torch.bincount(batch)
    return rec, out.detach(), sums, counts, model.c1.nbr_lin.weight.grad, model.att.weight.grad, \
        torch.unique(ei[1], return_counts=True)


PROGRAMS += [gnn_scatter]


def moe_topk_routing(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(15)
    rng = np.random.default_rng(15)
    x = torch.tensor(rng.standard_normal((20, 6)), dtype=torch.float32)
    y = torch.tensor(rng.standard_normal((20, 6)), dtype=torch.float32)
    E, K = 4, 2

    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = nn.Linear(6, E, bias=False)
            self.w1 = nn.Parameter(torch.randn(E, 6, 12) * 0.3)
            self.w2 = nn.Parameter(torch.randn(E, 12, 6) * 0.3)

        def route(self, x):
            probs = F.softmax(self.gate(x), -1)
            topv, topi = probs.topk(K, dim=-1)
            return probs, topv / topv.sum(-1, keepdim=True), topi

        def forward(self, x):
            # dense dispatch: every expert on every token, combined by a scattered gate matrix
            probs, topv, topi = self.route(x)
            gates = torch.zeros_like(probs).scatter(1, topi, topv)
            h = F.gelu(torch.einsum("nd,edh->neh", x, self.w1))
            out = torch.einsum("neh,eho,ne->no", h, self.w2, gates)
            # Switch-style load balancing: fraction routed times mean gate probability
            frac = F.one_hot(topi[:, 0], E).float().mean(0)
            aux = E * (frac * probs.mean(0)).sum()
            return out, aux, topi

        def forward_loop(self, x):
            # sparse dispatch: each expert on the tokens routed to it (data-dependent shapes)
            probs, topv, topi = self.route(x)
            out = torch.zeros_like(x)
            for e in range(E):
                rows, slot = torch.where(topi == e)
                if rows.numel() == 0:
                    continue
                h = F.gelu(x[rows] @ self.w1[e]) @ self.w2[e]
                out.index_add_(0, rows, h * topv[rows, slot, None])
            return out

    model = MoE()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    rec = []
    for _ in range(4):
        out, aux, topi = run(x)
        loss = F.mse_loss(out, y) + 0.01 * aux
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((loss.item(), aux.item(), torch.bincount(topi.flatten(), minlength=E)))
    loop_out = model.forward_loop(x)
    loop_out.sum().backward()
    with torch.no_grad():
        dense_out = model(x)[0]
    return rec, model.gate.weight.grad, model.w1.grad[:, 0], model.w2, topi, loop_out, \
        (loop_out - dense_out).abs().max() < 1e-5


PROGRAMS += [moe_topk_routing]


def embedding_bag_classifier(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(16)
    corpus = [("the film was great fun", 1), ("a dull and boring plot", 0),
              ("great acting and a fun story", 1), ("boring , dull , too long", 0),
              ("fun fun fun", 1), ("the plot was too long and dull", 0),
              ("a great story", 1), ("not fun at all", 0)]

    def tokenize(s):
        return s.lower().replace(",", " ").split()

    vocab = {"<unk>": 0}
    for text, _ in corpus:
        for tok in tokenize(text):
            vocab.setdefault(tok, len(vocab))

    def collate(batch):
        ids, offsets, labels = [], [0], []
        for text, label in batch:
            t = [vocab.get(w, 0) for w in tokenize(text)]
            ids.extend(t)
            offsets.append(offsets[-1] + len(t))
            labels.append(label)
        return (torch.tensor(ids), torch.tensor(offsets[:-1]), torch.tensor(labels))

    loader = torch.utils.data.DataLoader(corpus, batch_size=4, shuffle=True, collate_fn=collate,
                                         generator=torch.Generator().manual_seed(2))

    class TextClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = nn.EmbeddingBag(len(vocab), 6, mode="mean")
            self.fc = nn.Linear(6, 2)
            self.bag.weight.data.uniform_(-0.5, 0.5)
            self.fc.weight.data.uniform_(-0.5, 0.5)
            self.fc.bias.data.zero_()

        def forward(self, ids, offsets):
            return self.fc(self.bag(ids, offsets))

    model = TextClassifier()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.SGD(model.parameters(), lr=2.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)
    rec = []
    for _ in range(3):
        for ids, offsets, labels in loader:
            logits = run(ids, offsets)
            loss = F.cross_entropy(logits, labels)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()
            rec.append((loss.item(), (logits.argmax(1) == labels).sum().item()))
        sched.step()
    # a weighted sum bag and an unknown word at prediction time
    ids, offsets, _ = collate([("great fun movie", 1), ("dull", 0)])
    summed = F.embedding_bag(ids, model.bag.weight, offsets, mode="sum",
                             per_sample_weights=torch.tensor([1.0, 0.5, 2.0, 1.0]))
    with torch.no_grad():
        pred = F.softmax(model(ids, offsets), 1)
    return rec, pred, summed, len(vocab), model.bag.weight.grad, \
        _error(lambda: model.bag(ids, torch.tensor([1, 0])))


PROGRAMS += [embedding_bag_classifier]


def kv_cache_generation(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(17)
    rng = np.random.default_rng(17)
    V, D, Hh, L = 11, 16, 2, 12
    data = torch.tensor(rng.integers(0, V, (4, L)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
            self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

        def forward(self, x, cache=None):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(D, -1)
            q, k, v = (z.view(b, t, Hh, D // Hh).transpose(1, 2) for z in (q, k, v))
            if cache is not None:
                k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
            # a causal mask only while the whole sequence is processed at once
            o = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
            x = x + self.proj(o.transpose(1, 2).reshape(b, t, D))
            return x + self.mlp(self.ln2(x)), (k, v)

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(V, D), nn.Embedding(L, D)
            self.blocks = nn.ModuleList([Block(), Block()])
            self.ln = nn.LayerNorm(D)
            self.head = nn.Linear(D, V, bias=False)

        def forward(self, idx, caches=None, start=0):
            pos = torch.arange(start, start + idx.shape[1])
            x = self.tok(idx) + self.pos(pos)
            new = []
            for i, blk in enumerate(self.blocks):
                x, c = blk(x, None if caches is None else caches[i])
                new.append(c)
            return self.head(self.ln(x)), new

    model = GPT()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01)
    rec = []
    for _ in range(4):
        logits, _ = run(data[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), data[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    model.eval()
    # generation: a prompt through the whole model, then one token at a time on the cache;
    # the cached logits must match those of a full recompute
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        idx = data[:2, :3]
        logits, caches = model(idx)
        outs, full_gap = [], []
        for _ in range(5):
            probs = F.softmax(logits[:, -1] / 0.9, -1)
            nxt = torch.multinomial(probs, 1, generator=g)
            idx = torch.cat([idx, nxt], 1)
            logits, caches = model(nxt, caches, start=idx.shape[1] - 1)
            full, _ = model(idx)
            full_gap.append((full[:, -1] - logits[:, -1]).abs().max().item() < 1e-4)
            outs.append(nxt)
    return rec, idx, full_gap, caches[1][0].shape, logits, model.head.weight


PROGRAMS += [kv_cache_generation]


def coupling_flow_logdet(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(18)
    rng = np.random.default_rng(18)
    # two moons-ish data in 2-D
    t = rng.uniform(0, np.pi, 64)
    pts = np.concatenate([np.stack([np.cos(t[:32]), np.sin(t[:32])], 1),
                          np.stack([1 - np.cos(t[32:]), 0.5 - np.sin(t[32:])], 1)])
    data = torch.tensor(pts + 0.05 * rng.standard_normal(pts.shape), dtype=torch.float32)

    class Planar(nn.Module):
        def __init__(self):
            super().__init__()
            self.u, self.w = nn.Parameter(torch.randn(2) * 0.1), nn.Parameter(torch.randn(2))
            self.b = nn.Parameter(torch.zeros(1))

        def forward(self, z):
            # u constrained so that the map stays invertible (w.u >= -1)
            wu = self.w @ self.u
            u_hat = self.u + (F.softplus(wu) - 1 - wu) * self.w / (self.w @ self.w)
            a = torch.tanh(z @ self.w + self.b)
            psi = (1 - a ** 2)[:, None] * self.w
            logdet = torch.log(torch.abs(1 + psi @ u_hat) + 1e-8)
            return z + u_hat * a[:, None], logdet

    class Coupling(nn.Module):
        def __init__(self, flip):
            super().__init__()
            self.flip = flip
            self.net = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 2))

        def forward(self, z):
            a, b = z.chunk(2, 1)
            if self.flip:
                a, b = b, a
            s, t = self.net(a).chunk(2, 1)
            s = torch.tanh(s)
            b = b * torch.exp(s) + t
            out = torch.cat([b, a], 1) if self.flip else torch.cat([a, b], 1)
            return out, s.sum(1)

        def inverse(self, y):
            a, b = y.chunk(2, 1)
            if self.flip:
                b, a = a, b
            s, t = self.net(a).chunk(2, 1)
            b = (b - t) * torch.exp(-torch.tanh(s))
            return torch.cat([b, a], 1) if self.flip else torch.cat([a, b], 1)

    class Flow(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([Coupling(False), Planar(), Coupling(True)])

        def forward(self, x):
            logdet = torch.zeros(x.shape[0])
            for layer in self.layers:
                x, ld = layer(x)
                logdet = logdet + ld
            return x, logdet

    flow = Flow()
    base = torch.distributions.MultivariateNormal(torch.zeros(2), torch.eye(2))
    run = _maybe_compile(torch, compiled)(flow)
    opt = torch.optim.Adam(flow.parameters(), lr=1e-2)
    rec = []
    for i in range(5):
        xb = data[(i * 16) % 64:(i * 16) % 64 + 16]
        z, logdet = run(xb)
        nll = -(base.log_prob(z) + logdet).mean()
        opt.zero_grad()
        nll.backward()
        opt.step()
        rec.append(nll.item())
    # the log-determinant against autograd's Jacobian for one point
    x0 = data[:1]
    jac = torch.autograd.functional.jacobian(lambda v: flow(v)[0], x0).reshape(2, 2)
    _, ld0 = flow(x0)
    # the couplings invert exactly
    c = flow.layers[0]
    y, _ = c(data[:4])
    back = c.inverse(y)
    return rec, torch.logdet(jac), ld0, (back - data[:4]).abs().max() < 1e-5, \
        flow.layers[1].u.grad, flow.layers[2].net[0].weight


PROGRAMS += [coupling_flow_logdet]


def reinforce_categorical(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(19)
    # a 1-D corridor: move left or right, reward +1 at the right end, -0.01 per step
    n_states, horizon = 6, 8

    def env_step(s, a):
        s2 = min(max(s + (1 if a == 1 else -1), 0), n_states - 1)
        done = s2 == n_states - 1
        return s2, (1.0 if done else -0.01), done

    policy = nn.Sequential(nn.Linear(n_states, 16), nn.Tanh(), nn.Linear(16, 2))
    value = nn.Linear(n_states, 1)
    run = _maybe_compile(torch, compiled)(policy)
    opt = torch.optim.Adam(list(policy.parameters()) + list(value.parameters()), lr=2e-2)
    g = torch.Generator().manual_seed(7)
    eye = torch.eye(n_states)
    rec = []
    for _ in range(6):
        s, logps, ents, vals, rewards, actions = 0, [], [], [], [], []
        for _ in range(horizon):
            obs = eye[s]
            dist = torch.distributions.Categorical(logits=run(obs[None])[0])
            # a sample drawn from the seeded generator (Categorical.sample uses the global one)
            a = torch.multinomial(dist.probs.detach(), 1, generator=g)[0]
            logps.append(dist.log_prob(a))
            ents.append(dist.entropy())
            vals.append(value(obs[None])[0, 0])
            s, r, done = env_step(s, a.item())
            rewards.append(r)
            actions.append(a.item())
            if done:
                break
        returns, ret = [], 0.0
        for r in reversed(rewards):
            ret = r + 0.95 * ret
            returns.insert(0, ret)
        returns = torch.tensor(returns)
        vals = torch.stack(vals)
        adv = returns - vals.detach()
        if len(adv) > 1:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        loss = -(torch.stack(logps) * adv).sum() + 0.5 * F.mse_loss(vals, returns) \
            - 0.01 * torch.stack(ents).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((actions, sum(rewards), loss.item()))
    # the global generator drives Categorical.sample: the same draws in both libraries
    torch.manual_seed(5)
    d = torch.distributions.Categorical(probs=torch.tensor([0.2, 0.5, 0.3]))
    return rec, d.sample((8,)), d.log_prob(torch.tensor([0, 1, 2])), policy[2].weight, \
        value.weight.grad, g.get_state().shape


PROGRAMS += [reinforce_categorical]


def siamese_contrastive(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(20)
    rng = np.random.default_rng(20)
    protos = rng.standard_normal((4, 8))
    labels = rng.integers(0, 4, 48)
    x = torch.tensor(protos[labels] + 0.3 * rng.standard_normal((48, 8)), dtype=torch.float32)
    lab = torch.tensor(labels)
    pairs = torch.tensor(rng.integers(0, 48, (5, 12, 2)))

    class Tower(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(8, 16), nn.PReLU(), nn.Linear(16, 4))

        def forward(self, a, b):
            # one shared tower for both inputs
            return self.net(a), self.net(b)

    model = Tower()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.5)
    margin, rec = 1.0, []
    for i in range(5):
        ia, ib = pairs[i].unbind(1)
        ea, eb = run(x[ia], x[ib])
        same = (lab[ia] == lab[ib]).float()
        d = F.pairwise_distance(ea, eb)
        loss = (same * d.pow(2) + (1 - same) * F.relu(margin - d).pow(2)).mean() / 2
        cos = F.cosine_embedding_loss(ea, eb, same * 2 - 1, margin=0.2)
        opt.zero_grad()
        (loss + 0.1 * cos).backward()
        opt.step()
        rec.append((loss.item(), cos.item(), int(same.sum())))
    with torch.no_grad():
        emb = model.net(x)
        dist = torch.cdist(emb, emb)
        nn_idx = dist.fill_diagonal_(float("inf")).argmin(1)
        acc = (lab[nn_idx] == lab).float().mean()
        sim = F.cosine_similarity(emb[:3, None], emb[None, :3], dim=-1)
    return rec, acc, sim, model.net[1].weight, model.net[0].weight.grad


PROGRAMS += [siamese_contrastive]


def transformer_encoder_padding(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(21)
    rng = np.random.default_rng(21)
    V, D, PAD = 10, 8, 0
    lengths = rng.integers(2, 7, 6)
    seqs = np.zeros((6, 6), dtype=np.int64)
    for i, n in enumerate(lengths):
        seqs[i, :n] = rng.integers(1, V, n)
    tokens = torch.tensor(seqs)
    y = torch.tensor((seqs.sum(1) % 2).astype(np.int64))

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D, padding_idx=PAD)
            layer = nn.TransformerEncoderLayer(D, 2, dim_feedforward=16, dropout=0.0,
                                               batch_first=True, norm_first=True)
            self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.cls = nn.Linear(D, 2)

        def forward(self, tok):
            pad = tok == PAD
            h = self.enc(self.emb(tok) * math.sqrt(D), src_key_padding_mask=pad)
            keep = (~pad).unsqueeze(-1).float()
            pooled = (h * keep).sum(1) / keep.sum(1)  # a masked mean over real tokens
            return self.cls(pooled)

    model = Classifier()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=1e-4)
    rec = []
    for _ in range(4):
        logits = run(tokens)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        rec.append((loss.item(), sched.get_last_lr()[0]))
    # padding does not change a sequence's output: the same sequence with more padding
    model.eval()
    with torch.no_grad():
        short = model(tokens[:1, :int(lengths[0])])
        long = model(tokens[:1])
    return rec, (short - long).abs().max() < 1e-5, model.emb.weight.grad[PAD], \
        model.enc.layers[1].linear2.weight, len(model.enc.layers)


PROGRAMS += [transformer_encoder_padding]


def straight_through_quantizer(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(22)
    rng = np.random.default_rng(22)
    x = torch.tensor(rng.standard_normal((32, 6)), dtype=torch.float32)

    class RoundSTE(torch.autograd.Function):
        """Rounds forward, passes the gradient straight through (clipped to |x| <= 1)."""

        @staticmethod
        def forward(ctx, v):
            ctx.save_for_backward(v)
            return torch.round(v)

        @staticmethod
        def backward(ctx, g):
            (v,) = ctx.saved_tensors
            return g * (v.abs() <= 1).to(g.dtype)

    class QuantAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(6, 3)
            self.dec = nn.Linear(3, 6)
            self.register_buffer("levels", torch.tensor(4.0))

        def forward(self, v):
            z = torch.sigmoid(self.enc(v)) * self.levels
            # the detach trick and the Function give the same straight-through estimate
            zq = z + (torch.round(z) - z).detach()
            return self.dec(zq / self.levels), z

    model = QuantAE()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rec = []
    for i in range(4):
        out, z = run(x[i * 8:i * 8 + 8])
        loss = F.mse_loss(out, x[i * 8:i * 8 + 8])
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((loss.item(), torch.unique(torch.round(z.detach())).numel()))
    v = torch.linspace(-2, 2, 9, requires_grad=True)
    r = RoundSTE.apply(v * 1.5)
    r.sum().backward()
    return rec, r, v.grad, type(r.grad_fn).__name__, model.enc.weight.grad, model.dec.bias


PROGRAMS += [straight_through_quantizer]


def made_autoregressive(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(23)
    rng = np.random.default_rng(23)
    D, H = 5, 12
    x = torch.tensor((rng.uniform(size=(40, D)) < np.linspace(0.2, 0.8, D)).astype(np.float32))

    class MaskedLinear(nn.Linear):
        """A Linear whose weight is multiplied by a fixed mask (a buffer)."""

        def __init__(self, cin, cout, mask):
            super().__init__(cin, cout)
            self.register_buffer("mask", mask)

        def forward(self, v):
            return F.linear(v, self.weight * self.mask, self.bias)

    # MADE's masks: hidden unit k sees inputs 1..m(k); output d sees hidden units m < d
    degrees_in = torch.arange(1, D + 1)
    degrees_h = torch.tensor(rng.integers(1, D, H))
    m1 = (degrees_h[:, None] >= degrees_in[None, :]).float()
    m2 = (degrees_in[:, None] > degrees_h[None, :]).float()
    model = nn.Sequential(MaskedLinear(D, H, m1), nn.ReLU(), MaskedLinear(H, D, m2))
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=2e-2)
    rec = []
    for i in range(5):
        xb = x[i * 8:i * 8 + 8]
        nll = F.binary_cross_entropy_with_logits(run(xb), xb, reduction="none").sum(1).mean()
        opt.zero_grad()
        nll.backward()
        opt.step()
        rec.append(nll.item())
    # autoregressive: output d's Jacobian row has no entries at or after input d
    jac = torch.autograd.functional.jacobian(lambda v: model(v), x[:1].squeeze(0))
    # ancestral sampling, one dimension at a time, from a seeded generator
    g = torch.Generator().manual_seed(4)
    s = torch.zeros(3, D)
    with torch.no_grad():
        for d in range(D):
            p = torch.sigmoid(model(s)[:, d])
            s[:, d] = torch.bernoulli(p, generator=g)
    return rec, torch.triu(jac).abs().sum() == 0, s, model[0].weight.grad * (1 - m1), \
        model[2].weight, sorted(model.state_dict())


PROGRAMS += [made_autoregressive]


def mha_set_pooling(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(24)
    rng = np.random.default_rng(24)
    # sets of up to 6 points; the target is each set's maximum norm
    sizes = rng.integers(2, 7, 10)
    pts = np.zeros((10, 6, 3), dtype=np.float32)
    mask = np.ones((10, 6), dtype=bool)
    for i, n in enumerate(sizes):
        pts[i, :n] = rng.standard_normal((n, 3))
        mask[i, :n] = False
    x, pad = torch.tensor(pts), torch.tensor(mask)
    y = torch.tensor(np.linalg.norm(pts, axis=-1).max(1, keepdims=True))

    class PMA(nn.Module):
        """Pooling by multi-head attention: learned seeds attend over the set."""

        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(3, 8)
            self.sab = nn.MultiheadAttention(8, 2, batch_first=True)
            self.seed = nn.Parameter(torch.randn(1, 1, 8) * 0.5)
            self.pool = nn.MultiheadAttention(8, 2, batch_first=True, kdim=8, vdim=8)
            self.out = nn.Linear(8, 1)

        def forward(self, x, pad):
            h = self.embed(x)
            h = h + self.sab(h, h, h, key_padding_mask=pad, need_weights=False)[0]
            q = self.seed.expand(x.shape[0], -1, -1)
            pooled, w = self.pool(q, h, h, key_padding_mask=pad, average_attn_weights=True)
            return self.out(pooled.squeeze(1)), w

    model = PMA()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rec = []
    for _ in range(4):
        pred, w = run(x, pad)
        loss = F.l1_loss(pred, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    # the padded slots get no attention; the weights sum to one
    return rec, w.detach().masked_select(pad[:, None, :]).abs().max(), w.detach().sum(-1), \
        model.pool.in_proj_weight.grad, model.seed, model.sab.out_proj.bias


PROGRAMS += [mha_set_pooling]


def focal_weighted_sampler(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(25)
    rng = np.random.default_rng(25)
    # imbalanced: 90 negatives, 10 positives
    y = torch.tensor(np.r_[np.zeros(90), np.ones(10)].astype(np.int64))
    x = torch.tensor(rng.standard_normal((100, 4)) + y.numpy()[:, None] * 1.5,
                     dtype=torch.float32)
    counts = torch.bincount(y)
    weights = (1.0 / counts.float())[y]
    sampler = torch.utils.data.WeightedRandomSampler(weights, num_samples=40, replacement=True,
                                                     generator=torch.Generator().manual_seed(6))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=10,
                                         sampler=sampler)

    def focal(logits, target, gamma=2.0, alpha=0.25):
        p = torch.sigmoid(logits)
        ce = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
        p_t = p * target + (1 - p) * (1 - target)
        a_t = alpha * target + (1 - alpha) * (1 - target)
        return (a_t * (1 - p_t) ** gamma * ce).mean()

    model = nn.Sequential(nn.Linear(4, 8), nn.SELU(), nn.AlphaDropout(0.0), nn.Linear(8, 1))
    with torch.no_grad():  # the prior-probability bias initialisation of RetinaNet
        model[3].bias.fill_(-math.log((1 - 0.1) / 0.1))
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1, lr_decay=0.01)
    rec, seen = [], []
    for _ in range(2):
        for xb, yb in loader:
            loss = focal(run(xb).squeeze(1), yb.float())
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.append(loss.item())
            seen.append(int(yb.sum()))
    with torch.no_grad():
        probs = torch.sigmoid(model(x)).squeeze(1)
        pred = probs > 0.5
        tp = (pred & (y == 1)).sum()
        precision = tp / pred.sum().clamp(min=1)
        recall = tp / (y == 1).sum()
    return rec, seen, precision, recall, model[0].weight, \
        opt.state_dict()["state"][0]["sum"]


PROGRAMS += [focal_weighted_sampler]


def gmm_em_compiled(torch, compiled=False):
    torch.manual_seed(26)
    rng = np.random.default_rng(26)
    centers = np.array([[0.0, 0.0], [3.0, 3.0], [-3.0, 2.0]])
    pts = np.concatenate([c + rng.standard_normal((20, 2)) * s
                          for c, s in zip(centers, (0.5, 0.8, 0.3))])
    x = torch.tensor(pts, dtype=torch.float64)
    K = 3

    def e_step(x, means, covs, logw):
        # log N(x | mu_k, Sigma_k) through Cholesky factors, responsibilities by logsumexp
        chol = torch.linalg.cholesky(covs)
        diff = x[None] - means[:, None]  # (K, N, D)
        sol = torch.linalg.solve_triangular(chol, diff.transpose(1, 2), upper=False)
        maha = (sol ** 2).sum(1)  # (K, N)
        logdet = 2 * torch.log(torch.diagonal(chol, dim1=-2, dim2=-1)).sum(-1)
        logp = -0.5 * (maha + logdet[:, None] + x.shape[1] * math.log(2 * math.pi))
        joint = logp + logw[:, None]
        norm = torch.logsumexp(joint, 0)
        return (joint - norm).exp().T, norm.sum()

    def m_step(x, resp):
        nk = resp.sum(0) + 1e-10
        means = resp.T @ x / nk[:, None]
        diff = x[None] - means[:, None]
        covs = torch.einsum("nk,kni,knj->kij", resp, diff, diff) / nk[:, None, None]
        covs = covs + 1e-6 * torch.eye(x.shape[1], dtype=x.dtype)
        return means, covs, torch.log(nk / nk.sum())

    e = _maybe_compile(torch, compiled)(e_step)
    means = x[torch.tensor([0, 25, 45])].clone()
    covs = torch.eye(2, dtype=torch.float64).repeat(K, 1, 1)
    logw = torch.full((K,), -math.log(K), dtype=torch.float64)
    rec = []
    for _ in range(6):
        resp, ll = e(x, means, covs, logw)
        means, covs, logw = m_step(x, resp)
        rec.append(ll.item())
    labels = resp.argmax(1)
    return rec, means, covs, logw.exp(), torch.bincount(labels, minlength=K), \
        all(b >= a - 1e-9 for a, b in zip(rec, rec[1:]))


PROGRAMS += [gmm_em_compiled]


def uncertainty_multitask(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(27)
    rng = np.random.default_rng(27)
    x = torch.tensor(rng.standard_normal((32, 5)), dtype=torch.float32)
    y_reg = x[:, :1] * 2 - x[:, 1:2] + 0.1 * torch.tensor(rng.standard_normal((32, 1)),
                                                          dtype=torch.float32)
    y_cls = (x[:, 2] > 0).long() + (x[:, 3] > 1).long()

    class MultiTask(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(5, 16), nn.CELU(), nn.Linear(16, 16),
                                       nn.Softsign())
            self.reg, self.cls = nn.Linear(16, 1), nn.Linear(16, 3)
            # Kendall et al.: one learned log-variance per task
            self.log_vars = nn.Parameter(torch.zeros(2))

        def forward(self, v):
            h = self.trunk(v)
            return self.reg(h), self.cls(h)

    model = MultiTask()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam([{"params": [p for n, p in model.named_parameters()
                                        if n != "log_vars"]},
                            {"params": [model.log_vars], "lr": 5e-2}], lr=1e-2)
    rec = []
    for _ in range(5):
        reg, cls = run(x)
        l_reg = F.mse_loss(reg, y_reg)
        l_cls = F.cross_entropy(cls, y_cls)
        prec = torch.exp(-model.log_vars)
        loss = 0.5 * prec[0] * l_reg + prec[1] * l_cls + model.log_vars.sum()
        # per-task gradient norms on the shared trunk (GradNorm-style diagnostics)
        g_reg = torch.autograd.grad(l_reg, model.trunk[0].weight, retain_graph=True)[0]
        g_cls = torch.autograd.grad(l_cls, model.trunk[0].weight, retain_graph=True)[0]
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((l_reg.item(), l_cls.item(), g_reg.norm().item(), g_cls.norm().item()))
    return rec, model.log_vars, model.log_vars.grad, model.cls.weight, \
        [g["lr"] for g in opt.param_groups]


PROGRAMS += [uncertainty_multitask]


def conv_autoencoder_upsample(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(28)
    rng = np.random.default_rng(28)
    yy, xx = np.mgrid[0:8, 0:8] / 7.0
    imgs = np.stack([np.sin(2 * np.pi * (a * xx + b * yy)) for a, b in
                     rng.uniform(0.2, 1.0, (6, 2))])[:, None].astype(np.float32)
    x = torch.tensor(imgs)

    class AE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Conv2d(1, 4, 3, stride=2, padding=1),
                                     nn.InstanceNorm2d(4, affine=True), nn.ReLU6(),
                                     nn.Conv2d(4, 8, 3, stride=2, padding=1), nn.Tanh())
            self.up1 = nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear",
                                                 align_corners=False),
                                     nn.Conv2d(8, 4, 3, padding=1), nn.ELU())
            self.up2 = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.PixelShuffle(2),
                                     nn.Conv2d(1, 1, 3, padding=1, padding_mode="reflect"))

        def forward(self, v):
            z = self.enc(v)
            return self.up2(self.up1(z)), z

    model = AE()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[2, 3], gamma=0.3)
    rec = []
    for _ in range(4):
        out, z = run(x)
        loss = F.mse_loss(out, x) + 1e-3 * z.abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        rec.append((loss.item(), sched.get_last_lr()[0]))
    with torch.no_grad():
        near = F.interpolate(z, size=(3, 5), mode="nearest")
        bic = F.interpolate(x, scale_factor=0.5, mode="bicubic", align_corners=True)
    return rec, out.shape, near, bic, model.up2[2].weight.grad, model.enc[1].weight


PROGRAMS += [conv_autoencoder_upsample]


def compiled_state_updates(torch, compiled=False):
    nn = torch.nn
    torch.manual_seed(29)
    rng = np.random.default_rng(29)
    batches = [torch.tensor(rng.standard_normal((n, 4)), dtype=torch.float32)
               for n in (6, 6, 9, 5, 6)]

    class Stateful(nn.Module):
        """A forward that writes its buffers: EMA statistics, a step counter, a ring buffer
        of recent features written with index_copy_, and a running maximum."""

        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.register_buffer("ema", torch.zeros(4))
            self.register_buffer("steps", torch.zeros((), dtype=torch.long))
            self.register_buffer("ring", torch.zeros(8, 4))
            self.register_buffer("peak", torch.full((4,), -float("inf")))

        def forward(self, x):
            h = torch.tanh(self.fc(x))
            if self.training:
                with torch.no_grad():
                    self.steps += 1
                    decay = 1.0 - 1.0 / (self.steps.float() + 1.0)
                    self.ema.mul_(decay).add_((1 - decay) * h.mean(0))
                    slot = (self.steps % 8).view(1)
                    self.ring.index_copy_(0, slot, h[:1].detach())
                    torch.maximum(self.peak, h.amax(0), out=self.peak)
            return h - self.ema, {"norm": h.norm(dim=1), "first": h[0]}

    model = Stateful()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rec = []
    for xb in batches:  # (the odd batch sizes recompile, or mark the size dynamic)
        out, extra = run(xb)
        loss = out.pow(2).mean() + extra["norm"].mean() * 0.1
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((loss.item(), extra["first"].detach(), int(model.steps)))
    model.eval()
    with torch.no_grad():
        ev, _ = run(batches[0])
    return rec, model.ema, model.ring, model.peak, model.steps, ev, model.fc.weight.grad


PROGRAMS += [compiled_state_updates]


def sparsemax_attention(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(30)
    rng = np.random.default_rng(30)
    x = torch.tensor(rng.standard_normal((24, 6)), dtype=torch.float32)
    y = (x[:, 0] * x[:, 1] > 0).long()

    def sparsemax(z, dim=-1):
        # Martins & Astudillo: the Euclidean projection onto the simplex, via a sort
        zs, _ = torch.sort(z, dim=dim, descending=True)
        k = torch.arange(1, z.shape[dim] + 1, dtype=z.dtype)
        cum = zs.cumsum(dim)
        support = (1 + k * zs) > cum
        k_z = support.sum(dim, keepdim=True)
        tau = (cum.gather(dim, k_z - 1) - 1) / k_z.to(z.dtype)
        return torch.clamp(z - tau, min=0)

    class FeatureSelector(nn.Module):
        """TabNet-style: a sparse mask over the features, then a classifier."""

        def __init__(self):
            super().__init__()
            self.att = nn.Linear(6, 6)
            self.bn = nn.BatchNorm1d(6, momentum=0.3)
            self.head = nn.Sequential(nn.Linear(6, 8), nn.GLU(), nn.Linear(4, 2))

        def forward(self, v):
            mask = sparsemax(self.bn(self.att(v)))
            return self.head(v * mask), mask

    model = FeatureSelector()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=2e-2)
    rec = []
    for i in range(4):
        xb, yb = x[i * 6:i * 6 + 12], y[i * 6:i * 6 + 12]
        logits, mask = run(xb)
        # the entropy of the masks pushes towards sparse selections
        ent = -(mask * torch.log(mask + 1e-10)).sum(1).mean()
        loss = F.cross_entropy(logits, yb) + 1e-3 * ent
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((loss.item(), (mask.detach() == 0).sum().item()))
    return rec, mask.detach().sum(1), model.att.weight.grad, model.bn.running_var, \
        sparsemax(torch.tensor([[0.1, 1.2, -0.5, 1.0]]))


PROGRAMS += [sparsemax_attention]


def arcface_margin(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(31)
    rng = np.random.default_rng(31)
    n_cls = 4
    centers = rng.standard_normal((n_cls, 6)) * 2
    labels = rng.integers(0, n_cls, 40)
    x = torch.tensor(centers[labels] + rng.standard_normal((40, 6)), dtype=torch.float32)
    y = torch.tensor(labels)

    class ArcFace(nn.Module):
        def __init__(self, s=8.0, m=0.3):
            super().__init__()
            self.backbone = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.PReLU(16),
                                          nn.Linear(16, 5))
            self.w = nn.Parameter(torch.empty(n_cls, 5))
            nn.init.xavier_uniform_(self.w)
            self.s, self.m = s, m

        def forward(self, v, target):
            emb = F.normalize(self.backbone(v))
            cos = F.linear(emb, F.normalize(self.w)).clamp(-1 + 1e-7, 1 - 1e-7)
            theta = torch.acos(cos)
            # the additive angular margin on the target class only (easy-margin off)
            target_logit = torch.cos(theta + self.m)
            onehot = torch.zeros_like(cos).scatter_(1, target.view(-1, 1), 1.0)
            logits = self.s * (onehot * target_logit + (1 - onehot) * cos)
            return logits, cos

    model = ArcFace()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, dampening=0.1)
    rec = []
    for i in range(4):
        xb, yb = x[i * 10:i * 10 + 10], y[i * 10:i * 10 + 10]
        logits, cos = run(xb, yb)
        loss = F.cross_entropy(logits, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((loss.item(), (cos.argmax(1) == yb).sum().item()))
    model.eval()
    with torch.no_grad():
        _, cos = model(x, y)
    return rec, (cos.argmax(1) == y).float().mean(), model.w, model.backbone[2].weight.grad, \
        model.backbone[1].running_mean


PROGRAMS += [arcface_margin]


def alibi_sliding_window(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(32)
    rng = np.random.default_rng(32)
    V, D, H, T, W = 9, 8, 2, 10, 4
    seq = torch.tensor(rng.integers(0, V, (3, T + 1)))

    def alibi_slopes(n):
        start = 2 ** (-8 / n)
        return torch.tensor([start ** (i + 1) for i in range(n)])

    class LocalAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.qkv = nn.Linear(D, 3 * D, bias=False)
            self.out = nn.Linear(D, V)
            pos = torch.arange(T)
            rel = pos[None, :] - pos[:, None]  # key minus query
            # causal and within a window of W: a boolean mask; ALiBi: a linear distance bias
            allowed = (rel <= 0) & (rel > -W)
            bias = alibi_slopes(H)[:, None, None] * rel[None].float()
            self.register_buffer("bias", bias.masked_fill(~allowed, float("-inf")))

        def forward(self, idx):
            b, t = idx.shape
            q, k, v = self.qkv(self.emb(idx)).view(b, t, 3, H, D // H).permute(2, 0, 3, 1, 4)
            att = q @ k.transpose(-2, -1) / math.sqrt(D // H) + self.bias[:, :t, :t]
            att = torch.softmax(att, -1)
            y = (att @ v).transpose(1, 2).reshape(b, t, D)
            return self.out(y), att

    model = LocalAttention()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.RAdam(model.parameters(), lr=1e-2)
    rec = []
    for _ in range(4):
        logits, att = run(seq[:, :-1])
        loss = F.cross_entropy(logits.transpose(1, 2), seq[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    # a shorter input uses the top-left of the bias; the masked weights are exact zeros
    with torch.no_grad():
        _, short = model(seq[:, :5])
    return rec, short[0, 1], (att.detach() == 0).sum(), model.qkv.weight.grad, model.bias[1, 3]


PROGRAMS += [alibi_sliding_window]


_TOLERANCES = {}


@pytest.mark.parametrize("prog", PROGRAMS, ids=[p.__name__ for p in PROGRAMS])
def test_program(prog):
    _check(prog, *_TOLERANCES.get(prog.__name__, (1e-4, 1e-5)))


# The programs that compile a model or function when asked.
COMPILED = [p for p in PROGRAMS if "_maybe_compile(torch, compiled)" in inspect.getsource(p)]
# Programs whose inductor compilation (C compiled from a cold cache: an unrolled LSTM sampler
# and two transformers, 4-12 s each on a loaded machine) would overrun this file's time; their
# eager and aot_eager runs cover the capture and the joint graph (and
# test_inductor_keeps_3d_matmul_outputs_compiled the KV-cache model's inductor fix).
_SLOW_INDUCTOR = {"char_rnn_sampler", "kv_cache_generation", "transformer_encoder_padding"}
_RUNS = [(p, b) for p in COMPILED for b in ("eager", "aot_eager", "inductor")
         if not (b == "inductor" and p.__name__ in _SLOW_INDUCTOR)]


# Graphs AOT autograd cannot trace (they run eagerly, with the right values: only the
# compilation is lost), each with its minimal repro. Elsewhere AOT and the code generator
# must compile every graph: a fall-back is a failure here, as is a listed one that compiles.
_AOT_FALLBACKS = {
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
        # (a listed program that compiles now: drop it from _AOT_FALLBACKS)
        assert bool(fallbacks) == (prog.__name__ in _AOT_FALLBACKS), fallbacks


# torch.compile (2.13, backend="eager") captures each compiled program without a graph break
# (it runs nn.LSTM / nn.GRU eagerly, without a graph: char_rnn_sampler, tied_autoencoder_lm;
# fusegrad captures them). fusegrad must capture them whole too. Where it breaks instead, the
# values are still right (test_compiled_matches_eager): the break only costs the graph. Each
# gap's minimal repro is in the reason.
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


def test_inductor_keeps_3d_matmul_outputs_compiled():
    """A bias-free Linear on a 3-D input (matmul ending in `_unsafe_view`) returned from an
    inductor graph: compiled (not run eagerly after AOT gave up on a decomposed view),
    with eager's values and gradients."""
    fg.manual_seed(0)
    head = fg.nn.Linear(6, 4, bias=False)
    x = fg.randn(2, 3, 6, requires_grad=True)
    want = head(x)
    want_grads = fg.autograd.grad(want.pow(2).sum(), [x, head.weight])
    fg._dynamo.reset()
    with compiler_fallbacks() as messages:
        got = fg.compile(head, backend="inductor")(x)
    assert not messages, messages
    assert type(got.grad_fn).__name__ == "CompiledFunctionBackward"
    grads = fg.autograd.grad(got.pow(2).sum(), [x, head.weight])
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
    for a, b in zip(grads, want_grads):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
