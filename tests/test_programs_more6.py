"""Whole programs of kinds the other program files do not cover: a Llama-style decoder block
(RMSNorm, rotary embeddings through complex numbers, grouped-query attention, SwiGLU, tied
weights, no-decay parameter groups, a warm-up cosine LambdaLR), an S4D state-space layer
(complex parameters, a Vandermonde kernel, an FFT convolution), ProdLDA (a VAE topic model over
Dirichlet reparameterised draws), soft actor-critic (tanh-squashed Normal policy, twin
critics, temperature tuning, Polyak averaging with _foreach_lerp_), SimCLR's NT-Xent with a
LARS optimizer written as an Optimizer subclass, domain-adversarial training (a gradient
reversal Function, once_differentiable, non-differentiable outputs, unmaterialised grads),
GCN over a sparse COO adjacency and GIN with index_add_, a neural Turing machine, a pointer
network trained with REINFORCE, influence functions (Hessian-vector products, conjugate
gradients, L-BFGS), Poincare embeddings (sparse gradients rescaled, renorm_, SparseAdam), a
ViT with DropPath, layer-wise learning rates and interpolated position embeddings, ESPCN
super-resolution (ICNR, PixelShuffle, SSIM, ReduceLROnPlateau), a mu-law WaveNet with
sampling, learning to rank (ListNet, LambdaRank weights, NDCG, Adagrad), a Kalman filter
learning its noise (Cholesky solves, Rprop), module hooks and state-dict hooks (meta-device
init, to_empty, strict=False loads), a hypernetwork with FiLM through functional_call, NeRF
with hierarchical sampling (searchsorted), deep embedded clustering (k-means++, KLDivLoss),
BYOL + Barlow Twins, selective activation checkpointing, a Bayesian mixture with
constraint bijections and an LKJ prior, autograd machinery (setup_context, jvp, vmap of a
Function, forward-mode AD, multi-grad hooks, batched grads, saved-tensor hooks), custom
parametrizations with fuse_conv_bn_eval, and a compiled whole training step.

Each program takes the library as its argument (`torch` or fusegrad), seeds it and builds its
data with NumPy, and returns what it recorded: losses per step, outputs, gradients, parameters,
reprs and the errors of deliberate mistakes. `test_program` runs it with both libraries and
compares values (~1e-4 relative), dtypes, shapes, grad_fn names, printed text and raised
errors. Programs whose model torch.compile compiles take `compiled=<backend>` to wrap it in
`torch.compile(backend=...)`; `test_compiled_matches_eager` compares fusegrad compiled under
each backend against fusegrad eager, and `test_compiled_without_graph_breaks` checks that
fusegrad captures them whole where torch.compile does."""

import functools
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import copy  # noqa: E402
import math  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from program_support import check_program, compare, run_program  # noqa: E402
from program_support import error_of as _error  # noqa: E402
from program_support import maybe_compile as _maybe_compile  # noqa: E402

import fusegrad as fg  # noqa: E402


def _check(prog, rtol=1e-4, atol=1e-5):
    check_program(prog, torch, fg, rtol, atol)


PROGRAMS = []


def rope_llama(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    vocab, dim, heads, kv_heads, seq = 23, 16, 4, 2, 7
    tokens = torch.tensor(rng.integers(0, vocab, (3, seq + 1)))

    def rope_table(head_dim, n, theta=10000.0):
        freqs = 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
        angles = torch.outer(torch.arange(n).float(), freqs)
        return torch.polar(torch.ones_like(angles), angles)

    def apply_rope(x, table):
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        out = torch.view_as_real(xc * table[None, :, None, :]).flatten(3)
        return out.type_as(x)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.hd = dim // heads
            self.wq = nn.Linear(dim, heads * self.hd, bias=False)
            self.wkv = nn.Linear(dim, 2 * kv_heads * self.hd, bias=False)
            self.wo = nn.Linear(dim, dim, bias=False)

        def forward(self, x, table):
            b, t, _ = x.shape
            q = self.wq(x).view(b, t, heads, self.hd)
            k, v = self.wkv(x).view(b, t, 2, kv_heads, self.hd).unbind(2)
            q, k = apply_rope(q, table), apply_rope(k, table)
            rep = heads // kv_heads
            k = k.repeat_interleave(rep, dim=2)
            v = v.repeat_interleave(rep, dim=2)
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                               v.transpose(1, 2), is_causal=True)
            return self.wo(o.transpose(1, 2).reshape(b, t, dim))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = nn.RMSNorm(dim, eps=1e-6), nn.RMSNorm(dim, eps=1e-6)
            self.attn = Attention()
            self.w13 = nn.Linear(dim, 2 * 24, bias=False)
            self.w2 = nn.Linear(24, dim, bias=False)

        def forward(self, x, table):
            x = x + self.attn(self.n1(x), table)
            a, g = self.w13(self.n2(x)).chunk(2, -1)
            return x + self.w2(F.silu(a) * g)

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, dim)
            self.blocks = nn.ModuleList([Block(), Block()])
            self.norm = nn.RMSNorm(dim)
            self.head = nn.Linear(dim, vocab, bias=False)
            self.head.weight = self.emb.weight  # tied
            self.register_buffer("table", rope_table(dim // heads, 32), persistent=False)

        def forward(self, idx):
            x = self.emb(idx)
            table = self.table[: idx.shape[1]]
            for blk in self.blocks:
                x = blk(x, table)
            return self.head(self.norm(x))

    model = LM()
    run = _maybe_compile(torch, compiled)(model)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], lr=3e-3,
                            betas=(0.9, 0.95))
    warm, total = 2, 6

    def lr_lambda(step):
        if step < warm:
            return (step + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * (step - warm) / (total - warm)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    rec = []
    for _ in range(total):
        logits = run(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        rec.append((loss.item(), norm.item(), sched.get_last_lr()))
    names = sorted(model.state_dict())
    shared = model.head.weight is model.emb.weight
    n_params = sum(p.numel() for p in model.parameters())
    return (rec, names, shared, n_params, model.table.dtype, model.blocks[1].n1.weight,
            model.emb.weight.grad, repr(model.norm))


PROGRAMS += [rope_llama]


def s4d_ssm(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(1)
    rng = np.random.default_rng(1)
    L, H, N = 16, 4, 4
    t = np.linspace(0, 4 * np.pi, L)
    xs = np.stack([np.sin(t * f) for f in rng.uniform(0.5, 2, 6)])[:, :, None]
    x = torch.tensor(np.repeat(xs, H, 2), dtype=torch.float32)  # (B, L, H)
    y = torch.roll(x, 2, 1).sum(-1)

    class S4D(nn.Module):
        def __init__(self):
            super().__init__()
            self.log_dt = nn.Parameter(torch.rand(H) * (math.log(0.1) - math.log(0.001))
                                       + math.log(0.001))
            self.log_a_real = nn.Parameter(torch.log(0.5 * torch.ones(H, N // 2)))
            self.a_imag = nn.Parameter(math.pi * torch.arange(N // 2).float().repeat(H, 1))
            self.c = nn.Parameter(torch.view_as_real(torch.randn(H, N // 2,
                                                                 dtype=torch.cfloat)))
            self.d = nn.Parameter(torch.randn(H))

        def kernel(self, length):
            dt = torch.exp(self.log_dt)
            c = torch.view_as_complex(self.c)
            a = -torch.exp(self.log_a_real) + 1j * self.a_imag
            dta = a * dt.unsqueeze(-1)
            k = dta.unsqueeze(-1) * torch.arange(length, device=a.device)
            c = c * (torch.exp(dta) - 1.0) / a
            return 2 * torch.einsum("hn,hnl->hl", c, torch.exp(k)).real

        def forward(self, u):  # (B, L, H)
            u = u.transpose(1, 2)
            length = u.shape[-1]
            k = self.kernel(length)
            kf = torch.fft.rfft(k, n=2 * length)
            uf = torch.fft.rfft(u, n=2 * length)
            out = torch.fft.irfft(uf * kf, n=2 * length)[..., :length]
            out = out + u * self.d.unsqueeze(-1)
            return F.gelu(out).transpose(1, 2)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.s4 = S4D()
            self.norm = nn.LayerNorm(H)
            self.out = nn.Linear(H, 1)

        def forward(self, u):
            return self.out(self.norm(u + self.s4(u))).squeeze(-1)

    model = Net()
    run = _maybe_compile(torch, compiled)(model)
    ssm = [model.s4.log_dt, model.s4.log_a_real, model.s4.a_imag]
    rest = [p for p in model.parameters() if all(p is not q for q in ssm)]
    opt = torch.optim.Adam([{"params": rest}, {"params": ssm, "lr": 1e-3}], lr=1e-2)
    rec = []
    for _ in range(5):
        loss = F.mse_loss(run(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    with torch.no_grad():
        k = model.s4.kernel(L)
    return (rec, k, model.s4.c.grad, model.s4.log_dt.grad, model.s4.a_imag.grad,
            torch.view_as_complex(model.s4.c).abs())


PROGRAMS += [s4d_ssm]


def prodlda_dirichlet(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    torch.manual_seed(2)
    rng = np.random.default_rng(2)
    vocab, topics = 20, 3
    bows = torch.tensor(rng.poisson(rng.dirichlet(np.ones(vocab) * 0.3, 12) * 15),
                        dtype=torch.float32)

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Sequential(nn.Linear(vocab, 16), nn.Softplus(), nn.Dropout(0.2))
            # (no bias before the batch norm: its gradient would be rounding noise, which
            # Adam scales up to a full step of either sign)
            self.alpha = nn.Linear(16, topics, bias=False)
            self.bn = nn.BatchNorm1d(topics, affine=False)

        def forward(self, x):
            return F.softplus(self.bn(self.alpha(self.fc(x)))) + 1e-3

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.beta = nn.Linear(topics, vocab, bias=False)
            self.bn = nn.BatchNorm1d(vocab, affine=False)
            self.drop = nn.Dropout(0.2)

        def forward(self, theta):
            return F.softmax(self.bn(self.beta(self.drop(theta))), dim=1)

    enc, dec = Encoder(), Decoder()
    run_enc = _maybe_compile(torch, compiled)(enc)
    prior = D.Dirichlet(torch.full((topics,), 0.5))
    opt = torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()), lr=1e-2)
    rec = []
    for _ in range(5):
        conc = run_enc(bows)
        q = D.Dirichlet(conc)
        theta = q.rsample()
        word_probs = dec(theta)
        nll = -(bows * torch.log(word_probs + 1e-10)).sum(1)
        kl = D.kl_divergence(q, prior)
        loss = (nll + kl).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((loss.item(), kl.mean().item()))
    enc.eval()
    dec.eval()
    with torch.no_grad():
        conc = enc(bows)
        mean_theta = D.Dirichlet(conc).mean
        top = dec.beta.weight.t().topk(4, dim=1).indices
        ent = D.Dirichlet(conc).entropy()
    bad = _error(lambda: D.Dirichlet(torch.tensor([0.5, -1.0]), validate_args=True))
    return (rec, mean_theta, top, ent, enc.alpha.weight.grad, dec.beta.weight.grad,
            enc.bn.running_var, bad, repr(prior))


PROGRAMS += [prodlda_dirichlet]


def sac_tanh_gaussian(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    torch.manual_seed(3)
    rng = np.random.default_rng(3)
    obs_dim, act_dim, n = 3, 2, 40
    obs = torch.tensor(rng.standard_normal((n, obs_dim)), dtype=torch.float32)
    act = torch.tensor(rng.uniform(-0.9, 0.9, (n, act_dim)), dtype=torch.float32)
    rew = torch.tensor(rng.standard_normal(n), dtype=torch.float32)
    nxt = torch.tensor(rng.standard_normal((n, obs_dim)), dtype=torch.float32)
    done = torch.tensor(rng.random(n) < 0.1, dtype=torch.float32)

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(obs_dim, 32), nn.ReLU())
            self.mu = nn.Linear(32, act_dim)
            self.log_std = nn.Linear(32, act_dim)

        def forward(self, s):
            h = self.body(s)
            log_std = self.log_std(h).clamp(-5, 2)
            base = D.Normal(self.mu(h), log_std.exp())
            return D.Independent(D.TransformedDistribution(
                base, [D.TanhTransform(cache_size=1)]), 1)

    class Critic(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Sequential(nn.Linear(obs_dim + act_dim, 32), nn.ReLU(), nn.Linear(32, 1))

        def forward(self, s, a):
            return self.q(torch.cat([s, a], -1)).squeeze(-1)

    actor = Actor()
    critics = nn.ModuleList([Critic(), Critic()])
    target = copy.deepcopy(critics)
    for p in target.parameters():
        p.requires_grad_(False)
    q_run = _maybe_compile(torch, compiled)(critics[0])
    log_alpha = torch.zeros(1, requires_grad=True)
    a_opt = torch.optim.Adam(actor.parameters(), lr=3e-3)
    c_opt = torch.optim.Adam(critics.parameters(), lr=3e-3)
    t_opt = torch.optim.Adam([log_alpha], lr=3e-3)
    gamma, tau, target_ent = 0.99, 0.05, -float(act_dim)
    idx = torch.arange(n).view(5, 8)
    rec = []
    for b in idx:
        s, a, r, s2, d = obs[b], act[b], rew[b], nxt[b], done[b]
        with torch.no_grad():
            pi2 = actor(s2)
            a2 = pi2.rsample()
            lp2 = pi2.log_prob(a2)
            q2 = torch.min(target[0](s2, a2), target[1](s2, a2))
            y = r + gamma * (1 - d) * (q2 - log_alpha.exp() * lp2)
        c_loss = F.mse_loss(q_run(s, a), y) + F.mse_loss(critics[1](s, a), y)
        c_opt.zero_grad()
        c_loss.backward()
        c_opt.step()
        pi = actor(s)
        a_new = pi.rsample()
        lp = pi.log_prob(a_new)
        q_new = torch.min(critics[0](s, a_new), critics[1](s, a_new))
        a_loss = (log_alpha.exp().detach() * lp - q_new).mean()
        a_opt.zero_grad()
        a_loss.backward()
        a_opt.step()
        t_loss = -(log_alpha * (lp.detach() + target_ent)).mean()
        t_opt.zero_grad()
        t_loss.backward()
        t_opt.step()
        with torch.no_grad():
            tp = list(target.parameters())
            torch._foreach_lerp_(tp, list(critics.parameters()), tau)
        rec.append((c_loss.item(), a_loss.item(), t_loss.item(), log_alpha.item()))
    with torch.no_grad():
        pi = actor(obs[:4])
        mean_action = torch.tanh(pi.base_dist.base_dist.loc)
        sample = pi.sample((2,))
    return (rec, mean_action, sample, pi.event_shape, pi.batch_shape,
            actor.log_std.weight.grad, target[1].q[2].weight, critics[0].q[0].bias.grad,
            log_alpha.grad)


PROGRAMS += [sac_tanh_gaussian]


def simclr_lars(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(4)
    rng = np.random.default_rng(4)
    imgs = torch.tensor(rng.standard_normal((8, 1, 10, 10)), dtype=torch.float32)

    class LARS(torch.optim.Optimizer):
        def __init__(self, params, lr, momentum=0.9, weight_decay=1e-4, eta=0.02):
            super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay,
                                          eta=eta, lars=True))

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for g in self.param_groups:
                for p in g["params"]:
                    if p.grad is None:
                        continue
                    d = p.grad
                    if g["lars"]:
                        d = d.add(p, alpha=g["weight_decay"])
                        pn, dn = torch.norm(p), torch.norm(d)
                        q = torch.where(pn > 0, torch.where(dn > 0, g["eta"] * pn / dn, 1.0),
                                        1.0)
                        d = d.mul(q)
                    st = self.state[p]
                    if "mu" not in st:
                        st["mu"] = torch.zeros_like(p)
                    mu = st["mu"]
                    mu.mul_(g["momentum"]).add_(d)
                    p.add_(mu, alpha=-g["lr"])
            return loss

    def augment(x, gen):
        n = x.shape[0]
        flip = torch.rand(n, generator=gen) < 0.5
        x = torch.where(flip[:, None, None, None], x.flip(-1), x)
        i, j = torch.randint(0, 3, (2,), generator=gen).tolist()
        x = F.pad(x, (1, 1, 1, 1), mode="reflect")[..., i:i + 10, j:j + 10]
        return x + 0.1 * torch.randn(x.shape, generator=gen)

    def nt_xent(z1, z2, temp=0.5):
        z = F.normalize(torch.cat([z1, z2]), dim=1)
        n = z1.shape[0]
        sim = z @ z.t() / temp
        sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool), float("-inf"))
        target = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
        return F.cross_entropy(sim, target)

    encoder = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                            nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8),
                            nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    head = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))
    model = nn.Sequential(encoder, head)
    run = _maybe_compile(torch, compiled)(model)
    plain, excluded = [], []
    for p in model.parameters():
        (excluded if p.dim() == 1 else plain).append(p)
    opt = LARS([{"params": plain}, {"params": excluded, "lars": False, "weight_decay": 0.0}],
               lr=0.1)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=0.01)
    gen = torch.Generator().manual_seed(7)
    rec = []
    for _ in range(4):
        v1, v2 = augment(imgs, gen), augment(imgs, gen)
        loss = nt_xent(run(v1), run(v2))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        rec.append((loss.item(), sched.get_last_lr()[0]))
    state = opt.state_dict()
    groups = [{k: v for k, v in g.items() if k != "params"} for g in state["param_groups"]]
    opt2 = LARS([{"params": plain}, {"params": excluded}], lr=1.0)
    opt2.load_state_dict(state)
    return (rec, groups, len(state["state"]), encoder[1].running_mean,
            encoder[0].weight.grad, head[2].weight, opt2.param_groups[1]["lars"],
            repr(opt).splitlines()[:4])


PROGRAMS += [simclr_lars]


def dann_grad_reversal(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    once_differentiable = torch.autograd.function.once_differentiable
    torch.manual_seed(5)
    rng = np.random.default_rng(5)
    xs = torch.tensor(rng.standard_normal((16, 5)), dtype=torch.float32)
    ys = (xs[:, 0] + xs[:, 1] > 0).long()
    xt = torch.tensor(rng.standard_normal((16, 5)) + 0.7, dtype=torch.float32)
    seen = []

    class GradReverse(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, alpha):
            ctx.alpha = alpha
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            return grad.neg() * ctx.alpha, None

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            seen.append(ctx.needs_input_grad)
            return g, g

    class ClampWithIndex(torch.autograd.Function):
        """Clamps and returns the argmax too (not differentiable); backward written once."""

        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            mask = (x > -1) & (x < 1)
            idx = x.argmax(dim=1)
            ctx.save_for_backward(mask)
            ctx.mark_non_differentiable(idx)
            return x.clamp(-1, 1), idx

        @staticmethod
        @once_differentiable
        def backward(ctx, grad, grad_idx):
            (mask,) = ctx.saved_tensors
            if grad is None:
                return None
            return grad * mask

    feat = nn.Sequential(nn.Linear(5, 12), nn.ReLU(), nn.Linear(12, 8))
    label_head = nn.Linear(8, 2)
    domain_head = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))

    def forward(x, alpha):
        h, idx = ClampWithIndex.apply(feat(x))
        return label_head(h), domain_head(GradReverse.apply(h, alpha)).squeeze(-1), idx

    run = _maybe_compile(torch, compiled)(forward)
    params = [*feat.parameters(), *label_head.parameters(), *domain_head.parameters()]
    opt = torch.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True)
    rec = []
    for step in range(5):
        p = step / 4
        alpha = 2.0 / (1.0 + math.exp(-10 * p)) - 1
        ls, ds, idx_s = run(xs, alpha)
        _, dt, _ = run(xt, alpha)
        dom = torch.cat([ds, dt])
        dlabels = torch.cat([torch.zeros(16), torch.ones(16)])
        loss = F.cross_entropy(ls, ys) + F.binary_cross_entropy_with_logits(dom, dlabels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((loss.item(), idx_s.requires_grad, idx_s[:4]))
    x = torch.randn(3, 8, requires_grad=True)
    y, idx = ClampWithIndex.apply(x * 2)
    (g,) = torch.autograd.grad(y.pow(2).sum(), x, create_graph=True)
    twice = _error(lambda: g.sum().backward())
    # only the second output used: its gradient is None (not materialised as zeros)
    x2 = torch.randn(2, 8, requires_grad=True)
    out, _ = ClampWithIndex.apply(x2)
    (out * 0).sum().backward()
    Probe.apply(torch.ones(2, requires_grad=True), torch.ones(2)).sum().backward()
    return (rec, seen, feat[0].weight.grad, domain_head[0].weight.grad,
            type(y.grad_fn).__name__, idx.requires_grad, twice, g, x2.grad)


PROGRAMS += [dann_grad_reversal]


def gcn_sparse(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(6)
    rng = np.random.default_rng(6)
    n, fdim, classes = 12, 6, 3
    edges = set()
    while len(edges) < 20:
        a, b = rng.integers(0, n, 2)
        if a != b:
            edges.add((min(a, b), max(a, b)))
    e = np.array(sorted(edges)).T
    src = torch.tensor(np.concatenate([e[0], e[1], np.arange(n)]))
    dst = torch.tensor(np.concatenate([e[1], e[0], np.arange(n)]))
    feats = torch.tensor(rng.standard_normal((n, fdim)), dtype=torch.float32)
    labels = torch.tensor(rng.integers(0, classes, n))
    train_mask = torch.zeros(n, dtype=torch.bool)
    train_mask[:6] = True
    adj = torch.sparse_coo_tensor(torch.stack([dst, src]), torch.ones(src.numel()), (n, n))
    adj = adj.coalesce()
    deg = torch.sparse.sum(adj, dim=1).to_dense()
    dinv = deg.pow(-0.5)
    i = adj.indices()
    norm_adj = torch.sparse_coo_tensor(i, dinv[i[0]] * adj.values() * dinv[i[1]], (n, n))

    class GCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = nn.Linear(fdim, 8)
            self.l2 = nn.Linear(8, classes)

        def forward(self, a, x):
            h = F.relu(torch.sparse.mm(a, self.l1(x)))
            h = F.dropout(h, 0.3, self.training)
            return torch.sparse.mm(a, self.l2(h))

    class GIN(nn.Module):
        def __init__(self):
            super().__init__()
            self.eps = nn.Parameter(torch.zeros(1))
            self.mlp = nn.Sequential(nn.Linear(fdim, 8), nn.ReLU(), nn.Linear(8, classes))

        def forward(self, x):
            agg = torch.zeros_like(x).index_add_(0, dst, x[src])
            return self.mlp((1 + self.eps) * x + agg)

    gcn, gin = GCN(), GIN()
    gin_run = _maybe_compile(torch, compiled)(gin)
    opt = torch.optim.Adam([{"params": gcn.l1.parameters(), "weight_decay": 5e-4},
                            {"params": gcn.l2.parameters()},
                            {"params": gin.parameters()}], lr=0.02)
    rec = []
    for _ in range(5):
        gcn.train()
        out = gcn(norm_adj, feats)
        loss = F.cross_entropy(out[train_mask], labels[train_mask])
        loss2 = F.cross_entropy(gin_run(feats)[train_mask], labels[train_mask])
        opt.zero_grad()
        (loss + loss2).backward()
        opt.step()
        rec.append((loss.item(), loss2.item()))
    gcn.eval()
    with torch.no_grad():
        pred = gcn(norm_adj, feats).argmax(1)
        acc = (pred[~train_mask] == labels[~train_mask]).float().mean()
    dense = norm_adj.to_dense()
    return (rec, pred, acc, deg, dense.sum(0), norm_adj.is_coalesced(), str(adj.layout),
            adj._nnz(), gcn.l1.weight.grad, gin.eps.grad, gin.mlp[0].weight.grad)


PROGRAMS += [gcn_sparse]


def ntm_copy(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(7)
    rng = np.random.default_rng(7)
    B, T, W, M, N = 4, 4, 5, 6, 8
    seq = torch.tensor(rng.integers(0, 2, (T, B, W)), dtype=torch.float32)
    delim = torch.zeros(1, B, W + 1)
    delim[..., -1] = 1
    inp = torch.cat([F.pad(seq, (0, 1)), delim, torch.zeros(T, B, W + 1)])

    class Head(nn.Module):
        def __init__(self, ctrl):
            super().__init__()
            self.fc = nn.Linear(ctrl, M + 1 + 1 + 3 + 1)

        def address(self, h, memory, w_prev):
            k, beta, g, s, gamma = self.fc(h).split([M, 1, 1, 3, 1], dim=1)
            beta, g = F.softplus(beta), torch.sigmoid(g)
            s, gamma = F.softmax(s, dim=1), 1 + F.softplus(gamma)
            sim = F.cosine_similarity(memory + 1e-16, k.unsqueeze(1) + 1e-16, dim=-1)
            wc = F.softmax(beta * sim, dim=1)
            wg = g * wc + (1 - g) * w_prev
            shifted = torch.stack([torch.roll(wg, sh, dims=1) for sh in (-1, 0, 1)], -1)
            w = (shifted * s.unsqueeze(1)).sum(-1) ** gamma
            return w / (w.sum(1, keepdim=True) + 1e-16)

    class NTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.ctrl = nn.LSTMCell(W + 1 + M, 16)
            self.read = Head(16)
            self.write = Head(16)
            self.erase_add = nn.Linear(16, 2 * M)
            self.out = nn.Linear(16 + M, W)
            self.register_buffer("mem0", torch.full((N, M), 1e-6))

        def forward(self, xs):
            b = xs.shape[1]
            memory = self.mem0.expand(b, N, M).clone()
            wr = torch.zeros(b, N)
            wr[:, 0] = 1
            ww = wr.clone()
            r = memory[:, 0]
            h = c = torch.zeros(b, 16)
            outs = []
            for x in xs.unbind(0):
                h, c = self.ctrl(torch.cat([x, r], 1), (h, c))
                ww = self.write.address(h, memory, ww)
                e, a = self.erase_add(h).chunk(2, 1)
                memory = memory * (1 - torch.bmm(ww.unsqueeze(2), torch.sigmoid(e).unsqueeze(1)))
                memory = memory + ww.unsqueeze(2) * torch.tanh(a).unsqueeze(1)
                wr = self.read.address(h, memory, wr)
                r = torch.einsum("bn,bnm->bm", wr, memory)
                outs.append(self.out(torch.cat([h, r], 1)))
            return torch.stack(outs), wr

    model = NTM()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.RMSprop(model.parameters(), lr=3e-3, momentum=0.9, alpha=0.95)
    rec = []
    for _ in range(4):
        logits, wr = run(inp)
        loss = F.binary_cross_entropy_with_logits(logits[T + 1:], seq)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), 0.5)
        opt.step()
        rec.append(loss.item())
    return (rec, wr.detach(), model.read.fc.weight.grad, model.ctrl.weight_hh.grad,
            model.erase_add.bias.grad)


PROGRAMS += [ntm_copy]


def pointer_tsp(torch, compiled=False):
    nn = torch.nn
    D = torch.distributions
    torch.manual_seed(8)
    rng = np.random.default_rng(8)
    B, n, hid = 4, 6, 16
    cities = torch.tensor(rng.random((B, n, 2)), dtype=torch.float32)

    class Pointer(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(2, hid)
            self.encoder = nn.GRU(hid, hid, batch_first=True)
            self.decoder = nn.GRUCell(hid, hid)
            self.w_ref = nn.Conv1d(hid, hid, 1)
            self.w_q = nn.Linear(hid, hid)
            self.v = nn.Parameter(torch.empty(hid).uniform_(-0.3, 0.3))
            self.start = nn.Parameter(torch.zeros(hid))

        def forward(self, x, greedy=False):
            b = x.shape[0]
            emb = self.embed(x)
            enc, h = self.encoder(emb)
            h = h.squeeze(0)
            ref = self.w_ref(enc.transpose(1, 2))  # (b, hid, n)
            visited = torch.zeros(b, n, dtype=torch.bool)
            inp = self.start.expand(b, hid)
            tour, logps = [], []
            for _ in range(n):
                h = self.decoder(inp, h)
                u = torch.einsum("d,bdn->bn", self.v, torch.tanh(ref + self.w_q(h)[..., None]))
                u = 10 * torch.tanh(u)
                u = u.masked_fill(visited, float("-inf"))
                dist = D.Categorical(logits=u)
                idx = u.argmax(1) if greedy else dist.sample()
                logps.append(dist.log_prob(idx))
                visited = visited.scatter(1, idx[:, None], True)
                tour.append(idx)
                inp = emb.gather(1, idx[:, None, None].expand(b, 1, hid)).squeeze(1)
            return torch.stack(tour, 1), torch.stack(logps, 1).sum(1)

    def tour_length(x, tour):
        pts = x.gather(1, tour[..., None].expand(-1, -1, 2))
        return (pts - pts.roll(-1, dims=1)).norm(dim=-1).sum(1)

    model = Pointer()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    baseline = None
    rec = []
    for _ in range(4):
        tour, logp = model(cities)
        length = tour_length(cities, tour)
        baseline = length.mean() if baseline is None else 0.8 * baseline + 0.2 * length.mean()
        adv = (length - baseline).detach()
        loss = (adv * logp).mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 2.0, norm_type=2.0)
        opt.step()
        rec.append((loss.item(), length, tour))
    with torch.no_grad():
        gtour, glogp = model(cities, greedy=True)
    perm_ok = (gtour.sort(1).values == torch.arange(n)).all()
    return (rec, gtour, glogp, perm_ok, tour_length(cities, gtour), model.v.grad,
            model.encoder.weight_hh_l0.grad, model.w_ref.weight.grad)


PROGRAMS += [pointer_tsp]


def influence_hvp(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(9)
    rng = np.random.default_rng(9)
    x = torch.tensor(rng.standard_normal((20, 4)), dtype=torch.float64)
    y = torch.tensor(rng.integers(0, 2, 20), dtype=torch.float64)
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 1)).double()
    opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=10, history_size=4)
    params = list(model.parameters())

    def loss_fn(xb, yb):
        reg = 0.01 * sum((p ** 2).sum() for p in params)
        return F.binary_cross_entropy_with_logits(model(xb).squeeze(-1), yb) + reg

    def closure():
        opt.zero_grad()
        loss = loss_fn(x, y)
        loss.backward()
        return loss

    first = opt.step(closure)
    train_loss = loss_fn(x, y).item()

    def hvp(v):
        loss = loss_fn(x, y)
        grads = torch.autograd.grad(loss, params, create_graph=True)
        dot = sum((g * vi).sum() for g, vi in zip(grads, v))
        return torch.autograd.grad(dot, params)

    def cg(b, iters=30):
        xk = [torch.zeros_like(t) for t in b]
        r = [t.clone() for t in b]
        p = [t.clone() for t in b]
        rs = sum((t * t).sum() for t in r)
        for _ in range(iters):
            hp = [h + 0.01 * pi for h, pi in zip(hvp(p), p)]
            alpha = rs / sum((pi * h).sum() for pi, h in zip(p, hp))
            xk = [a + alpha * pi for a, pi in zip(xk, p)]
            r = [a - alpha * h for a, h in zip(r, hp)]
            rs_new = sum((t * t).sum() for t in r)
            if rs_new.sqrt() < 1e-10:
                break
            p = [a + (rs_new / rs) * pi for a, pi in zip(r, p)]
            rs = rs_new
        return xk

    test_grad = torch.autograd.grad(loss_fn(x[:2], y[:2]), params)
    s_test = cg(test_grad)
    influences = []
    for i in range(5):
        gi = torch.autograd.grad(loss_fn(x[i:i + 1], y[i:i + 1]), params)
        influences.append(-sum((a * b).sum() for a, b in zip(gi, s_test)))
    flat = torch.cat([p.detach().flatten() for p in params])

    def flat_loss(theta):
        chunks = theta.split([p.numel() for p in params])
        shaped = {n: c.view_as(p) for (n, p), c in zip(model.named_parameters(), chunks)}
        out = torch.func.functional_call(model, shaped, (x,)).squeeze(-1)
        return F.binary_cross_entropy_with_logits(out, y) + 0.01 * (theta ** 2).sum()

    v = torch.ones_like(flat)
    _, hv = torch.autograd.functional.hvp(flat_loss, flat, v)
    _, vh = torch.autograd.functional.vhp(flat_loss, flat, v)
    hv_mine = torch.cat([t.flatten() for t in hvp([torch.ones_like(p) for p in params])])
    hess = torch.autograd.functional.hessian(flat_loss, flat)
    eig = torch.linalg.eigvalsh(hess)
    return (first, train_loss, torch.stack(influences), hv, (hv - vh).abs().max(),
            (hv - hv_mine).abs().max() < 1e-10, eig, opt.state_dict()["state"][0]["n_iter"])


PROGRAMS += [influence_hvp]


def poincare_sparse(torch, compiled=False):
    nn = torch.nn
    torch.manual_seed(10)
    rng = np.random.default_rng(10)
    n, dim = 15, 2
    parents = rng.integers(0, np.arange(1, n))  # a random tree: i's parent is < i
    pairs = torch.tensor(np.stack([np.arange(1, n), parents], 1))
    eps = 1e-5

    def dist(u, v):
        sq = ((u - v) ** 2).sum(-1)
        nu = (u ** 2).sum(-1).clamp(max=1 - eps)
        nv = (v ** 2).sum(-1).clamp(max=1 - eps)
        # (clamped: a negative equal to the anchor is at distance 0, where acosh' is inf)
        return torch.acosh((1 + 2 * sq / ((1 - nu) * (1 - nv))).clamp(min=1 + 1e-5))

    emb = nn.Embedding(n, dim, sparse=True)
    with torch.no_grad():
        emb.weight.uniform_(-1e-3, 1e-3)
    opt = torch.optim.SGD(emb.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(3)
    rec = []
    for _ in range(5):
        neg = torch.randint(0, n, (pairs.shape[0], 4), generator=gen)
        u = emb(pairs[:, 0])
        cand = emb(torch.cat([pairs[:, 1:], neg], 1))
        d = dist(u.unsqueeze(1), cand)
        loss = nn.functional.cross_entropy(-d, torch.zeros(pairs.shape[0], dtype=torch.long))
        opt.zero_grad()
        loss.backward()
        g = emb.weight.grad.coalesce()
        # Riemannian rescaling of the Euclidean gradient, on the touched rows only
        rows = emb.weight.detach()[g.indices()[0]]
        scale = ((1 - (rows ** 2).sum(-1, keepdim=True)) ** 2) / 4
        emb.weight.grad = torch.sparse_coo_tensor(g.indices(), g.values() * scale, g.shape)
        opt.step()
        with torch.no_grad():
            emb.weight.renorm_(2, 0, 1 - eps)
        rec.append((loss.item(), g._nnz(), g.is_sparse))
    norms = emb.weight.detach().norm(dim=1)
    adam = torch.optim.SparseAdam(emb.parameters(), lr=0.01)
    emb.weight.grad = None
    emb(torch.tensor([1, 3, 3])).sum().backward()
    adam.step()
    bad = _error(lambda: torch.optim.Adam(emb.parameters()).step())
    return (rec, norms, emb.weight, emb.weight.grad.to_dense(), bad,
            dist(emb.weight[:1], emb.weight[1:3]))


PROGRAMS += [poincare_sparse]


def vit_droppath(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(11)
    rng = np.random.default_rng(11)
    imgs = torch.tensor(rng.standard_normal((6, 3, 8, 8)), dtype=torch.float32)
    labels = torch.tensor(rng.integers(0, 4, 6))
    P, dim = 4, 12

    class DropPath(nn.Module):
        def __init__(self, p):
            super().__init__()
            self.p = p

        def forward(self, x):
            if not self.training or self.p == 0:
                return x
            keep = x.new_empty((x.shape[0],) + (1,) * (x.dim() - 1)).bernoulli_(1 - self.p)
            return x * keep.div_(1 - self.p)

        def extra_repr(self):
            return f"p={self.p}"

    class Block(nn.Module):
        def __init__(self, drop):
            super().__init__()
            self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.attn = nn.MultiheadAttention(dim, 3, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(dim, 24), nn.GELU(approximate="tanh"),
                                     nn.Linear(24, dim))
            self.g1 = nn.Parameter(1e-1 * torch.ones(dim))
            self.g2 = nn.Parameter(1e-1 * torch.ones(dim))
            self.drop = DropPath(drop)

        def forward(self, x):
            h = self.n1(x)
            a, w = self.attn(h, h, h, need_weights=True, average_attn_weights=False)
            x = x + self.drop(self.g1 * a)
            return x + self.drop(self.g2 * self.mlp(self.n2(x))), w

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(3 * P * P, dim)
            self.cls = nn.Parameter(torch.zeros(1, 1, dim))
            self.pos = nn.Parameter(torch.randn(1, 1 + 4, dim) * 0.02)
            self.blocks = nn.ModuleList([Block(0.0), Block(0.2)])
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, 4)

        def pos_embed(self, grid):
            cls_pos, patch_pos = self.pos[:, :1], self.pos[:, 1:]
            if grid == 2:
                return self.pos
            g = patch_pos.reshape(1, 2, 2, dim).permute(0, 3, 1, 2)
            g = F.interpolate(g, size=(grid, grid), mode="bicubic", align_corners=False)
            return torch.cat([cls_pos, g.permute(0, 2, 3, 1).reshape(1, grid * grid, dim)], 1)

        def forward(self, x):
            patches = F.unfold(x, kernel_size=P, stride=P).transpose(1, 2)
            t = self.proj(patches)
            t = torch.cat([self.cls.expand(x.shape[0], -1, -1), t], 1)
            t = t + self.pos_embed(int(math.isqrt(patches.shape[1])))
            maps = []
            for blk in self.blocks:
                t, w = blk(t)
                maps.append(w)
            return self.head(self.norm(t)[:, 0]), maps

    model = ViT()
    run = _maybe_compile(torch, compiled)(model)
    base_lr, decay = 4e-3, 0.7
    groups = [{"params": list(model.head.parameters()) + list(model.norm.parameters()),
               "lr": base_lr}]
    for depth, blk in enumerate(reversed(model.blocks)):
        groups.append({"params": list(blk.parameters()), "lr": base_lr * decay ** (depth + 1)})
    groups.append({"params": [model.cls, model.pos, *model.proj.parameters()],
                   "lr": base_lr * decay ** 3})
    opt = torch.optim.AdamW(groups, weight_decay=0.05)
    crit = nn.CrossEntropyLoss(label_smoothing=0.1)
    rec = []
    for _ in range(4):
        model.train()
        logits, maps = run(imgs)
        loss = crit(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    model.eval()
    with torch.no_grad():
        logits, maps = model(imgs)
        big = torch.randn(2, 3, 12, 12)
        big_logits, _ = model(big)
    return (rec, logits, maps[1].shape, maps[1][0, :, 0], big_logits, model.cls.grad,
            model.pos.grad, repr(model.blocks[1].drop), [g["lr"] for g in opt.param_groups])


PROGRAMS += [vit_droppath]


def super_resolution_ssim(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(12)
    rng = np.random.default_rng(12)
    yy, xx = np.mgrid[0:16, 0:16] / 16.0
    hr = np.stack([np.sin(2 * np.pi * (f * xx + g * yy)) for f, g in rng.uniform(0, 2, (4, 2))])
    hr = torch.tensor(hr[:, None] * 0.5 + 0.5, dtype=torch.float32)
    lr = F.interpolate(hr, scale_factor=0.5, mode="bilinear", antialias=True,
                       align_corners=False)

    def icnr_(w, scale, init=nn.init.kaiming_normal_):
        out, cin, kh, kw = w.shape
        sub = torch.empty(out // scale ** 2, cin, kh, kw)
        init(sub)
        with torch.no_grad():
            w.copy_(sub.repeat_interleave(scale ** 2, dim=0))

    class ESPCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.ReflectionPad2d(2), nn.Conv2d(1, 8, 5), nn.PReLU(8),
                                      nn.ReplicationPad2d(1), nn.Conv2d(8, 4, 3))
            icnr_(self.body[-1].weight, 2)
            self.shuffle = nn.PixelShuffle(2)

        def forward(self, x):
            base = F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=False)
            return base + self.shuffle(self.body(x))

    def gaussian_window(size=5, sigma=1.5):
        g = torch.exp(-(torch.arange(size).float() - size // 2) ** 2 / (2 * sigma ** 2))
        g = g / g.sum()
        return (g[:, None] * g[None, :]).expand(1, 1, size, size)

    def ssim(a, b, win):
        c1, c2 = 0.01 ** 2, 0.03 ** 2
        mu_a, mu_b = F.conv2d(a, win, groups=1), F.conv2d(b, win, groups=1)
        saa = F.conv2d(a * a, win) - mu_a ** 2
        sbb = F.conv2d(b * b, win) - mu_b ** 2
        sab = F.conv2d(a * b, win) - mu_a * mu_b
        num = (2 * mu_a * mu_b + c1) * (2 * sab + c2)
        return (num / ((mu_a ** 2 + mu_b ** 2 + c1) * (saa + sbb + c2))).mean()

    model = ESPCN()
    run = _maybe_compile(torch, compiled)(model)
    win = gaussian_window()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=0,
                                                       threshold=1e-3)
    rec = []
    for _ in range(5):
        sr = run(lr)
        charb = torch.sqrt((sr - hr) ** 2 + 1e-6).mean()
        loss = charb + 0.5 * (1 - ssim(sr, hr, win))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step(loss.item())
        rec.append((loss.item(), opt.param_groups[0]["lr"]))
    with torch.no_grad():
        sr = model(lr).clamp(0, 1)
        psnr = 10 * torch.log10(1 / F.mse_loss(sr, hr))
        unshuf = nn.PixelUnshuffle(2)(sr)
    return (rec, psnr, unshuf.shape, sr[0, 0, :3, :3], model.body[2].weight.grad,
            model.body[-1].weight.grad, sched.state_dict()["num_bad_epochs"], lr[0, 0, :2])


PROGRAMS += [super_resolution_ssim]


def wavenet_mulaw(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(13)
    rng = np.random.default_rng(13)
    Q, T = 16, 40
    t = np.arange(T + 1) / 8.0
    wave = torch.tensor(0.8 * np.sin(2 * np.pi * t[None] * rng.uniform(0.5, 1.5, (3, 1))),
                        dtype=torch.float32)

    def mu_encode(x, mu=Q - 1):
        y = torch.sign(x) * torch.log1p(mu * x.abs()) / math.log1p(mu)
        return ((y + 1) / 2 * mu + 0.5).long()

    def mu_decode(q, mu=Q - 1):
        y = 2 * q.float() / mu - 1
        return torch.sign(y) * torch.expm1(y.abs() * math.log1p(mu)) / mu

    class CausalConv(nn.Conv1d):
        def __init__(self, cin, cout, k, dilation):
            super().__init__(cin, cout, k, dilation=dilation)
            self.left = (k - 1) * dilation

        def forward(self, x):
            return super().forward(F.pad(x, (self.left, 0)))

    class Residual(nn.Module):
        def __init__(self, ch, dilation):
            super().__init__()
            self.conv = CausalConv(ch, 2 * ch, 2, dilation)
            self.res = nn.Conv1d(ch, ch, 1)
            self.skip = nn.Conv1d(ch, ch, 1)

        def forward(self, x):
            f, g = self.conv(x).chunk(2, 1)
            z = torch.tanh(f) * torch.sigmoid(g)
            return x + self.res(z), self.skip(z)

    class WaveNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = CausalConv(Q, 8, 2, 1)
            self.layers = nn.ModuleList([Residual(8, d) for d in (1, 2, 4, 8)])
            self.out = nn.Sequential(nn.ReLU(), nn.Conv1d(8, 8, 1), nn.ReLU(),
                                     nn.Conv1d(8, Q, 1))

        def forward(self, q):
            x = self.inp(F.one_hot(q, Q).float().transpose(1, 2))
            skips = 0
            for layer in self.layers:
                x, s = layer(x)
                skips = skips + s
            return self.out(skips)

    model = WaveNet()
    run = _maybe_compile(torch, compiled)(model)
    q = mu_encode(wave)
    opt = torch.optim.Adamax(model.parameters(), lr=5e-3)
    rec = []
    for _ in range(5):
        logits = run(q[:, :-1])
        loss = F.cross_entropy(logits, q[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    receptive = 1 + sum(layer.conv.left for layer in model.layers) + model.inp.left
    model.eval()
    gen = torch.Generator().manual_seed(0)
    seq = q[:1, :receptive]
    with torch.no_grad():
        for _ in range(6):
            probs = F.softmax(model(seq)[:, :, -1] / 0.8, dim=1)
            nxt = torch.multinomial(probs, 1, generator=gen)
            seq = torch.cat([seq, nxt], 1)
    roundtrip = (mu_decode(q) - wave).abs().max()
    return (rec, receptive, seq, mu_decode(seq), roundtrip, q[0, :8],
            model.layers[3].conv.weight.grad, model.inp.weight.grad.sum(), repr(model.inp))


PROGRAMS += [wavenet_mulaw]


def listwise_rank(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(14)
    rng = np.random.default_rng(14)
    Qn, docs, fdim = 5, 6, 4
    feats = torch.tensor(rng.standard_normal((Qn, docs, fdim)), dtype=torch.float32)
    w_true = torch.tensor([1.0, -0.5, 0.3, 0.0])
    rel = (feats @ w_true + 0.3 * torch.tensor(rng.standard_normal((Qn, docs)),
                                               dtype=torch.float32))
    rel = torch.bucketize(rel, torch.tensor([-0.5, 0.3, 1.0]))  # grades 0..3

    def dcg(gains, order, k):
        g = gains.gather(1, order)[:, :k].float()
        disc = 1 / torch.log2(torch.arange(2, k + 2).float())
        return ((2 ** g - 1) * disc).sum(1)

    def ndcg(scores, rel, k=4):
        ideal = dcg(rel, rel.argsort(dim=1, descending=True, stable=True), k)
        got = dcg(rel, scores.argsort(dim=1, descending=True, stable=True), k)
        return torch.where(ideal > 0, got / ideal, torch.ones_like(got))

    scorer = nn.Sequential(nn.Linear(fdim, 8), nn.ELU(), nn.Linear(8, 1))
    run = _maybe_compile(torch, compiled)(scorer)
    opt = torch.optim.Adagrad(scorer.parameters(), lr=0.1, lr_decay=0.01,
                              initial_accumulator_value=0.1)
    margin = nn.MarginRankingLoss(margin=0.5)
    rec = []
    for _ in range(5):
        s = run(feats).squeeze(-1)
        listnet = -(F.softmax(rel.float(), 1) * F.log_softmax(s, 1)).sum(1).mean()
        # LambdaRank-style pairwise weights from the |delta NDCG| of swapping two documents
        diff = rel[:, :, None] - rel[:, None, :]
        pairs = diff > 0
        with torch.no_grad():
            ranks = s.argsort(1, descending=True).argsort(1)
            disc = 1 / torch.log2(ranks.float() + 2)
            gain = 2 ** rel.float() - 1
            ideal = dcg(rel, rel.argsort(dim=1, descending=True, stable=True), docs)
            delta = ((gain[:, :, None] - gain[:, None, :])
                     * (disc[:, :, None] - disc[:, None, :])).abs() / ideal[:, None, None]
        sd = s[:, :, None] - s[:, None, :]
        lam = (delta * F.softplus(-sd))[pairs].sum() / pairs.sum()
        q, i, j = pairs.nonzero(as_tuple=True)
        si, sj = s[q, i], s[q, j]
        pair = margin(si, sj, torch.ones_like(si))
        loss = listnet + lam + 0.1 * pair
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((loss.item(), ndcg(s.detach(), rel).mean().item(), int(pairs.sum())))
    s = scorer(feats).squeeze(-1).detach()
    topk = s.topk(3, dim=1)
    srt = torch.sort(s, dim=1, descending=True, stable=True)
    return (rec, rel, ndcg(s, rel), topk.values, topk.indices, srt.indices,
            scorer[0].weight.grad, opt.state_dict()["state"][0]["sum"])


PROGRAMS += [listwise_rank]


def kalman_noise(torch, compiled=False):
    nn = torch.nn
    D = torch.distributions
    torch.manual_seed(15)
    rng = np.random.default_rng(15)
    T, dt = 12, 0.1
    A = torch.tensor([[1.0, dt], [0.0, 1.0]], dtype=torch.float64)
    H = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    xs, x = [], np.array([0.0, 1.0])
    for _ in range(T):
        x = A.numpy() @ x + rng.multivariate_normal([0, 0], [[1e-3, 0], [0, 5e-2]])
        xs.append(x)
    obs = torch.tensor(np.array(xs)[:, :1] + 0.3 * rng.standard_normal((T, 1)))

    class Noise(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_diag = nn.Parameter(torch.full((2,), -2.0, dtype=torch.float64))
            self.q_off = nn.Parameter(torch.zeros(1, dtype=torch.float64))
            self.log_r = nn.Parameter(torch.zeros(1, dtype=torch.float64))

        def Q(self):
            L = torch.diag_embed(self.q_diag.exp())
            L = L + torch.zeros_like(L).index_put((torch.tensor([1]), torch.tensor([0])),
                                                  self.q_off)
            return L @ L.mT

        def R(self):
            return torch.diag_embed(self.log_r.exp() ** 2)

    def filter_nll(noise):
        m = torch.tensor([0.0, 1.0], dtype=torch.float64)
        P = torch.eye(2, dtype=torch.float64)
        Q, R = noise.Q(), noise.R()
        nll = 0
        means = []
        for y in obs:
            m = A @ m
            P = A @ P @ A.T + Q
            S = H @ P @ H.T + R
            innov = y - H @ m
            nll = nll - D.MultivariateNormal(torch.zeros(1, dtype=torch.float64),
                                             covariance_matrix=S).log_prob(innov)
            Lc = torch.linalg.cholesky(S)
            K = torch.cholesky_solve(H @ P, Lc).T
            m = m + K @ innov
            IKH = torch.eye(2, dtype=torch.float64) - K @ H
            P = IKH @ P @ IKH.T + K @ R @ K.T  # Joseph form
            means.append(m)
        return nll, torch.stack(means), P

    noise = Noise()
    opt = torch.optim.Rprop(noise.parameters(), lr=0.05, etas=(0.5, 1.2), step_sizes=(1e-4, 1))
    rec = []
    for _ in range(5):
        nll, means, P = filter_nll(noise)
        opt.zero_grad()
        nll.backward()
        opt.step()
        rec.append(nll.item())
    nll, means, P = filter_nll(noise)
    sign, logdet = torch.linalg.slogdet(P)
    L, info = torch.linalg.cholesky_ex(noise.Q())
    bad = _error(lambda: torch.linalg.cholesky(-torch.eye(2)))
    return (rec, means.detach(), noise.Q().detach(), noise.R().detach(), logdet.detach(), info,
            L.detach(), noise.q_off.grad, bad)


PROGRAMS += [kalman_noise]


def module_state_hooks(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(16)
    rng = np.random.default_rng(16)
    x = torch.tensor(rng.standard_normal((6, 5)), dtype=torch.float32)
    y = torch.tensor(rng.standard_normal((6, 2)), dtype=torch.float32)
    log = []

    class Scaler(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.register_buffer("mean", torch.zeros(n))
            self.register_buffer("count", torch.tensor(0), persistent=False)

        def forward(self, x):
            if self.training:
                with torch.no_grad():
                    self.count += 1
                    self.mean.lerp_(x.mean(0), 1.0 / self.count.item())
            return x - self.mean

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = Scaler(5)
            self.body = nn.Sequential(nn.Linear(5, 8), nn.Tanh())
            self.head = nn.Linear(8, 2)

        def forward(self, x, *, temperature=1.0):
            return self.head(self.body(self.scale(x))) / temperature

    def make():
        with torch.device("meta"):
            m = Net()
        m = m.to_empty(device="cpu")
        torch.manual_seed(0)
        for mod in m.modules():
            if isinstance(mod, nn.Linear):
                mod.reset_parameters()
        m.scale.mean.zero_()
        m.scale.count.zero_()
        return m

    model = make()

    def pre(mod, args, kwargs):
        log.append(("pre", type(mod).__name__, kwargs.get("temperature")))
        return args, {**kwargs, "temperature": kwargs.get("temperature", 1.0) * 2}

    def post(mod, args, kwargs, out):
        log.append(("post", tuple(out.shape)))

    def bwd_pre(mod, grad_out):
        log.append(("bwd_pre", type(mod).__name__, grad_out[0].shape))
        return (grad_out[0] * 0.5,)

    def bwd(mod, gin, gout):
        log.append(("bwd", type(mod).__name__, [g is None for g in gin]))

    h1 = model.register_forward_pre_hook(pre, with_kwargs=True)
    h2 = model.register_forward_hook(post, with_kwargs=True, always_call=True)
    h3 = model.head.register_full_backward_pre_hook(bwd_pre)
    h4 = model.body.register_full_backward_hook(bwd)
    feats = {}
    h5 = model.body[1].register_forward_hook(lambda m, i, o: feats.__setitem__("h", o.detach()))
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0, rho=0.8)
    run = _maybe_compile(torch, compiled)(model)
    rec = []
    for _ in range(3):
        loss = F.smooth_l1_loss(run(x, temperature=0.5), y, beta=0.5)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    for h in (h1, h2, h3, h4, h5):
        h.remove()

    def sd_post(mod, sd, prefix, local_metadata):
        sd[prefix + "version_tag"] = torch.tensor(3)

    def load_pre(mod, sd, prefix, local_metadata, strict, missing, unexpected, errors):
        sd.pop(prefix + "version_tag", None)

    def load_post(mod, keys):
        log.append(("load_post", sorted(keys.missing_keys), sorted(keys.unexpected_keys)))

    model.register_state_dict_post_hook(sd_post)
    sd = model.state_dict()
    fresh = make()
    fresh.register_load_state_dict_pre_hook(load_pre)
    fresh.register_load_state_dict_post_hook(load_post)
    result = fresh.load_state_dict(sd)
    partial = {k: v for k, v in sd.items() if not k.startswith("head")}
    partial["extra.weight"] = torch.ones(1)
    res2 = fresh.load_state_dict(partial, strict=False)
    bad = _error(lambda: fresh.load_state_dict(partial))
    shape_bad = _error(lambda: fresh.load_state_dict({**sd, "head.bias": torch.zeros(3)}))
    same = all(torch.equal(a, b) for a, b in zip(model.parameters(), fresh.parameters()))
    fresh.set_submodule("head", nn.Linear(8, 3))
    sub = fresh.get_submodule("body.0")
    missing_sub = _error(lambda: fresh.get_submodule("body.7"))
    return (rec, log, list(sd), [tuple(r) for r in (result, res2)], bad, shape_bad, same,
            repr(sub), missing_sub, feats["h"], model.scale.mean, model.scale.count,
            fresh(x).shape, model.head.weight.grad)


PROGRAMS += [module_state_hooks]


def hypernetwork_film(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(17)
    rng = np.random.default_rng(17)
    tasks, n = 3, 10
    xs = torch.tensor(rng.uniform(-2, 2, (tasks, n, 1)), dtype=torch.float32)
    amp = torch.tensor(rng.uniform(0.5, 2, tasks), dtype=torch.float32)
    ys = amp[:, None, None] * torch.sin(xs + torch.arange(tasks)[:, None, None].float())

    target = nn.Sequential(nn.Linear(1, 8), nn.ReLU(), nn.Linear(8, 1))
    shapes = {k: v.shape for k, v in target.named_parameters()}
    sizes = [math.prod(s) for s in shapes.values()]

    class Hyper(nn.Module):
        def __init__(self):
            super().__init__()
            self.task_emb = nn.Embedding(tasks, 4)
            self.net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, sum(sizes)))
            self.film = nn.Linear(4, 16)
            nn.init.normal_(self.net[2].weight, std=0.05)

        def forward(self, t):
            e = self.task_emb(t)
            flat = self.net(e)
            params = {k: c.view(s) for (k, s), c in zip(shapes.items(), flat.split(sizes))}
            gamma, beta = self.film(e).chunk(2)
            return params, gamma, beta

    hyper = Hyper()
    opt = torch.optim.RAdam(hyper.parameters(), lr=5e-3, decoupled_weight_decay=True,
                            weight_decay=1e-2)

    def task_loss(t):
        params, gamma, beta = hyper(torch.tensor(t))
        out = torch.func.functional_call(target, params, (xs[t],))
        out = out * (1 + gamma[:1]) + beta[:1]
        return F.mse_loss(out, ys[t])

    step_fn = _maybe_compile(torch, compiled)(task_loss)
    rec = []
    for _ in range(4):
        losses = torch.stack([step_fn(t) for t in range(tasks)])
        loss = losses.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(losses.detach())
    # the target network's own parameters are untouched (functional_call swaps them back)
    untouched = all(p.grad is None for p in target.parameters())
    params, _, _ = hyper(torch.tensor(1))
    stacked = torch.func.stack_module_state([target, copy.deepcopy(target)])[0]
    kw = _error(lambda: torch.func.functional_call(target, {"0.weight": torch.ones(3)}, (xs[0],)))
    tied = torch.func.functional_call(target, (params, {}), (xs[1],), strict=True)
    return (rec, untouched, sorted(stacked), stacked["0.weight"].shape, kw, tied.detach(),
            hyper.task_emb.weight.grad, hyper.net[2].weight.grad.abs().sum())


PROGRAMS += [hypernetwork_film]


def nerf_hierarchical(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(18)
    rng = np.random.default_rng(18)
    R, Nc, Nf, L = 8, 8, 6, 4
    origins = torch.tensor(rng.uniform(-0.2, 0.2, (R, 3)), dtype=torch.float32)
    dirs = F.normalize(torch.tensor(rng.standard_normal((R, 3)), dtype=torch.float32), dim=-1)
    target_rgb = torch.tensor(rng.random((R, 3)), dtype=torch.float32)

    def encode(p):
        freqs = 2.0 ** torch.arange(L).float() * math.pi
        ang = p[..., None] * freqs
        return torch.cat([p, torch.sin(ang).flatten(-2), torch.cos(ang).flatten(-2)], -1)

    class Field(nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(3 + 6 * L, 32), nn.ReLU(),
                                     nn.Linear(32, 32), nn.ReLU())
            self.sigma = nn.Linear(32, 1)
            self.rgb = nn.Sequential(nn.Linear(32 + 3, 16), nn.ReLU(), nn.Linear(16, 3),
                                     nn.Sigmoid())

        def forward(self, pts, d):
            h = self.mlp(encode(pts))
            sigma = F.softplus(self.sigma(h).squeeze(-1) - 1)
            rgb = self.rgb(torch.cat([h, d.unsqueeze(-2).expand(*h.shape[:-1], 3)], -1))
            return sigma, rgb

    def render(field, t):
        pts = origins[:, None] + dirs[:, None] * t[..., None]
        sigma, rgb = field(pts, dirs)
        delta = torch.cat([t[:, 1:] - t[:, :-1], torch.full_like(t[:, :1], 1e10)], -1)
        alpha = 1 - torch.exp(-sigma * delta)
        trans = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]),
                                         1 - alpha + 1e-10], -1), -1)[:, :-1]
        w = alpha * trans
        return (w[..., None] * rgb).sum(-2), w, (w * t).sum(-1)

    def sample_pdf(bins, weights, n, gen):
        pdf = (weights + 1e-5) / (weights + 1e-5).sum(-1, keepdim=True)
        cdf = torch.cat([torch.zeros_like(pdf[:, :1]), torch.cumsum(pdf, -1)], -1)
        u = torch.rand(cdf.shape[0], n, generator=gen)
        idx = torch.searchsorted(cdf, u, right=True)
        lo = (idx - 1).clamp(min=0)
        hi = idx.clamp(max=cdf.shape[-1] - 1)
        c_lo, c_hi = cdf.gather(1, lo), cdf.gather(1, hi)
        b_lo, b_hi = bins.gather(1, lo), bins.gather(1, hi)
        frac = (u - c_lo) / torch.where(c_hi - c_lo < 1e-5, torch.ones_like(u), c_hi - c_lo)
        return b_lo + frac * (b_hi - b_lo)

    coarse, fine = Field(), Field()
    coarse_run = _maybe_compile(torch, compiled)(coarse)
    opt = torch.optim.Adam([*coarse.parameters(), *fine.parameters()], lr=5e-3)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
    gen = torch.Generator().manual_seed(5)
    near, far = 0.5, 2.0
    rec = []
    for _ in range(4):
        t = torch.linspace(near, far, Nc).expand(R, Nc)
        mids = 0.5 * (t[:, 1:] + t[:, :-1])
        upper, lower = torch.cat([mids, t[:, -1:]], -1), torch.cat([t[:, :1], mids], -1)
        t = lower + (upper - lower) * torch.rand(R, Nc, generator=gen)
        rgb_c, w, _ = render(coarse_run, t)
        bins = torch.cat([t[:, :1], 0.5 * (t[:, 1:] + t[:, :-1]), t[:, -1:]], -1)
        t_f = sample_pdf(bins, w.detach(), Nf, gen)
        t_all, _ = torch.sort(torch.cat([t, t_f], -1), -1)
        rgb_f, _, depth = render(fine, t_all)
        loss = F.mse_loss(rgb_c, target_rgb) + F.mse_loss(rgb_f, target_rgb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        rec.append((loss.item(), -10 * math.log10(F.mse_loss(rgb_f, target_rgb).item())))
    return (rec, depth.detach(), t_f, w.detach(), coarse.sigma.weight.grad,
            fine.rgb[0].weight.grad, encode(origins[:1]))


PROGRAMS += [nerf_hierarchical]


def dec_clustering(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(19)
    rng = np.random.default_rng(19)
    K, n = 3, 30
    centers = rng.standard_normal((K, 6)) * 3
    data = torch.tensor(centers[rng.integers(0, K, n)] + rng.standard_normal((n, 6)),
                        dtype=torch.float32)

    encoder = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3))
    decoder = nn.Sequential(nn.Linear(3, 12), nn.ReLU(), nn.Linear(12, 6))
    ae_opt = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=1e-2)
    rec = []
    for _ in range(3):  # pretraining the autoencoder
        loss = F.mse_loss(decoder(encoder(data)), data)
        ae_opt.zero_grad()
        loss.backward()
        ae_opt.step()
        rec.append(loss.item())

    with torch.no_grad():  # k-means on the embeddings (k-means++ seeding)
        z = encoder(data)
        gen = torch.Generator().manual_seed(1)
        cent = z[torch.randint(0, n, (1,), generator=gen)]
        while cent.shape[0] < K:
            d2 = torch.cdist(z, cent).min(1).values ** 2
            pick = torch.multinomial(d2 / d2.sum(), 1, generator=gen)
            cent = torch.cat([cent, z[pick]])
        for _ in range(5):
            assign = torch.cdist(z, cent).argmin(1)
            sums = torch.zeros(K, 3).index_add_(0, assign, z)
            counts = torch.bincount(assign, minlength=K).clamp(min=1).unsqueeze(1)
            cent = sums / counts
        inertia = torch.cdist(z, cent).min(1).values.pow(2).sum()

    mu = nn.Parameter(cent.clone())

    def soft_assign(z):
        q = 1.0 / (1.0 + torch.cdist(z, mu) ** 2)
        return q / q.sum(1, keepdim=True)

    run = _maybe_compile(torch, compiled)(encoder)
    opt = torch.optim.SGD([*encoder.parameters(), mu], lr=0.05, momentum=0.9)
    kl = nn.KLDivLoss(reduction="batchmean")
    for it in range(4):
        q = soft_assign(run(data))
        if it % 2 == 0:
            with torch.no_grad():
                p = q ** 2 / q.sum(0)
                p = p / p.sum(1, keepdim=True)
        loss = kl(q.log(), p)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    final = soft_assign(encoder(data)).argmax(1)
    changed = (final != assign).sum()
    counts = torch.bincount(final, minlength=K)
    sr = torch.zeros(K).scatter_reduce(0, final, data[:, 0], reduce="amax", include_self=False)
    return (rec, cent, inertia, assign, final, changed, counts, sr, mu.grad,
            encoder[0].weight.grad, kl(torch.log(p[:3]), q[:3].detach()))


PROGRAMS += [dec_clustering]


def barlow_byol(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(20)
    rng = np.random.default_rng(20)
    data = torch.tensor(rng.standard_normal((12, 10)), dtype=torch.float32)

    def views(x, gen):
        mask = (torch.rand(x.shape, generator=gen) > 0.2).float()
        return x * mask + 0.1 * torch.randn(x.shape, generator=gen)

    def mlp(i, h, o, last_bn=False):
        layers = [nn.Linear(i, h), nn.BatchNorm1d(h), nn.ReLU(), nn.Linear(h, o)]
        if last_bn:
            layers.append(nn.BatchNorm1d(o, affine=False))
        return nn.Sequential(*layers)

    online = nn.Sequential(mlp(10, 16, 8), mlp(8, 16, 8))  # encoder + projector
    predictor = mlp(8, 16, 8)
    target = copy.deepcopy(online).requires_grad_(False)
    bt_net = mlp(10, 16, 8, last_bn=True)
    online_run = _maybe_compile(torch, compiled)(online)
    opt = torch.optim.SGD([*online.parameters(), *predictor.parameters(), *bt_net.parameters()],
                          lr=0.05, momentum=0.9, weight_decay=1e-4, dampening=0.1)

    def byol_loss(p, z):
        return 2 - 2 * F.cosine_similarity(p, z.detach(), dim=-1).mean()

    def off_diagonal(m):
        k = m.shape[0]
        return m.flatten()[:-1].view(k - 1, k + 1)[:, 1:].flatten()

    def barlow(z1, z2, lam=5e-3):
        c = z1.T @ z2 / z1.shape[0]
        on = (torch.diagonal(c) - 1).pow(2).sum()
        return on + lam * off_diagonal(c).pow(2).sum(), c

    gen = torch.Generator().manual_seed(2)
    rec = []
    for step in range(4):
        v1, v2 = views(data, gen), views(data, gen)
        p1, p2 = predictor(online_run(v1)), predictor(online_run(v2))
        with torch.no_grad():
            t1, t2 = target(v1), target(v2)
        lb = byol_loss(p1, t2) + byol_loss(p2, t1)
        lbt, c = barlow(bt_net(v1), bt_net(v2))
        loss = lb + 0.1 * lbt
        opt.zero_grad()
        loss.backward()
        opt.step()
        tau = 1 - (1 - 0.9) * (math.cos(math.pi * step / 4) + 1) / 2
        with torch.no_grad():
            for pt, po in zip(target.parameters(), online.parameters()):
                pt.mul_(tau).add_(po, alpha=1 - tau)
            for bt, bo in zip(target.buffers(), online.buffers()):
                bt.copy_(bo)
        rec.append((lb.item(), lbt.item(), tau))
    return (rec, c.detach(), off_diagonal(torch.arange(16.0).view(4, 4)),
            target[0][0].weight, target[1][1].running_var, predictor[0].weight.grad,
            bt_net[4].running_mean, online[0][1].num_batches_tracked)


PROGRAMS += [barlow_byol]


def selective_checkpoint(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    cp = torch.utils.checkpoint
    torch.manual_seed(21)
    rng = np.random.default_rng(21)
    x = torch.tensor(rng.standard_normal((4, 6, 8)), dtype=torch.float32)
    y = torch.tensor(rng.standard_normal((4, 6, 8)), dtype=torch.float32)
    ops = []

    class FF(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(8)
            self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 8)
            self.drop = nn.Dropout(0.25)

        def forward(self, h):
            ops.append("ff")
            return h + self.drop(self.fc2(F.gelu(self.fc1(self.ln(h)))))

    blocks = nn.ModuleList([FF() for _ in range(4)])

    def policy(ctx, op, *args, **kwargs):
        # keep the matmuls, recompute the rest
        keep = op in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default)
        return (cp.CheckpointPolicy.MUST_SAVE if keep else cp.CheckpointPolicy.PREFER_RECOMPUTE)

    def context_fn():
        return cp.create_selective_checkpoint_contexts(policy)

    def forward(h, mode):
        for blk in blocks:
            if mode == "reentrant":
                h = cp.checkpoint(blk, h, use_reentrant=True, preserve_rng_state=True)
            elif mode == "selective":
                h = cp.checkpoint(blk, h, use_reentrant=False, context_fn=context_fn)
            elif mode == "sequential":
                return cp.checkpoint_sequential(blocks, 2, h, use_reentrant=False)
            else:
                h = cp.checkpoint(blk, h, use_reentrant=False, determinism_check="default")
        return h

    run = _maybe_compile(torch, compiled)(forward)
    opt = torch.optim.SGD(blocks.parameters(), lr=0.1)
    rec = []
    for mode in ("plain", "reentrant", "selective", "sequential"):
        torch.manual_seed(5)
        ops.clear()
        out = run(x.requires_grad_(mode == "reentrant"), mode)
        n_fwd = len(ops)
        loss = F.mse_loss(out, y)
        opt.zero_grad()
        loss.backward()
        rec.append((mode, loss.item(), n_fwd, len(ops), blocks[0].fc1.weight.grad.clone(),
                    blocks[3].ln.weight.grad.clone()))
        opt.step()
        x.requires_grad_(False)
        x.grad = None
    # a recomputation that differs: its error under the default determinism check
    flip = [0]

    def unstable(h):
        flip[0] += 1
        return h * h if flip[0] == 1 else h[:, :3] * h[:, :3]

    h = x.clone().requires_grad_()
    bad = _error(lambda: cp.checkpoint(unstable, h, use_reentrant=False).sum().backward())
    no_grad_reentrant = _error(lambda: cp.checkpoint(lambda a: a * 2, torch.ones(2),
                                                     use_reentrant=True).sum().backward())
    return rec, bad, no_grad_reentrant


PROGRAMS += [selective_checkpoint]


def bayesian_mixture(torch, compiled=False):
    D = torch.distributions
    C = D.constraints
    torch.manual_seed(22)
    rng = np.random.default_rng(22)
    K, dim, n = 2, 2, 40
    comps = rng.integers(0, K, n)
    locs = np.array([[-2.0, 0.5], [1.5, -1.0]])
    data = torch.tensor(locs[comps] + 0.5 * rng.standard_normal((n, dim)), dtype=torch.float32)

    unconstrained = {
        "weights": torch.zeros(K - 1, requires_grad=True),
        "loc": torch.tensor([[-1.0, 0.0], [1.0, 0.0]], requires_grad=True),
        "scale_tril": torch.zeros(K, dim, dim, requires_grad=True),
        "corr": torch.zeros(dim * (dim - 1) // 2, requires_grad=True),
        "conc": torch.zeros(1, requires_grad=True),
    }
    to_simplex = D.biject_to(C.simplex)
    to_tril = D.transform_to(C.lower_cholesky)
    to_corr = D.biject_to(C.corr_cholesky)
    to_pos = D.biject_to(C.positive)

    def model_dist():
        w = to_simplex(unconstrained["weights"])
        tril = to_tril(unconstrained["scale_tril"] - 0.5 * torch.eye(dim))
        mix = D.Categorical(probs=w)
        comp = D.MultivariateNormal(unconstrained["loc"], scale_tril=tril)
        return D.MixtureSameFamily(mix, comp), w, tril

    def log_prior():
        corr = to_corr(unconstrained["corr"])
        lkj = D.LKJCholesky(dim, concentration=to_pos(unconstrained["conc"]) + 1.0)
        lp = lkj.log_prob(corr) + D.Dirichlet(torch.ones(K)).log_prob(
            to_simplex(unconstrained["weights"]))
        lp = lp + to_simplex.log_abs_det_jacobian(unconstrained["weights"],
                                                  to_simplex(unconstrained["weights"]))
        return lp + D.Normal(0.0, 3.0).log_prob(unconstrained["loc"]).sum()

    params = list(unconstrained.values())
    opt = torch.optim.Adam(params, lr=0.05)
    rec = []
    for _ in range(6):
        mixture, w, tril = model_dist()
        loss = -(mixture.log_prob(data).sum() + log_prior())
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    mixture, w, tril = model_dist()
    resp = mixture.component_distribution.log_prob(data[:5, None])
    resp = (resp + mixture.mixture_distribution.logits).softmax(-1)
    torch.manual_seed(1)
    draws = mixture.sample((3,))
    stick = D.transforms.StickBreakingTransform()
    z = torch.tensor([0.3, -0.2, 1.0])
    corr_t = D.transforms.CorrCholeskyTransform()
    lowrank = D.LowRankMultivariateNormal(torch.zeros(2), torch.ones(2, 1), torch.ones(2))
    return (rec, w.detach(), tril.detach(), resp.detach(), draws, mixture.mean.detach(),
            mixture.variance.detach(), stick(z), stick.inv(stick(z)),
            stick.log_abs_det_jacobian(z, stick(z)), corr_t(torch.tensor([0.4])),
            lowrank.log_prob(torch.ones(2)), lowrank.covariance_matrix,
            [p.grad for p in params], repr(C.simplex), str(to_tril))


PROGRAMS += [bayesian_mixture]


def autograd_machinery(torch, compiled=False):
    nn = torch.nn
    fwAD = torch.autograd.forward_ad
    torch.manual_seed(23)
    rng = np.random.default_rng(23)
    x = torch.tensor(rng.uniform(-1, 1, (16, 1)), dtype=torch.float32)

    class Swish(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x, beta):
            return x * torch.sigmoid(beta * x)

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, beta = inputs
            ctx.save_for_backward(x, beta)
            ctx.save_for_forward(x, beta)

        @staticmethod
        def backward(ctx, g):
            x, beta = ctx.saved_tensors
            s = torch.sigmoid(beta * x)
            dx = s + x * beta * s * (1 - s)
            dbeta = (x * x * s * (1 - s) * g).sum().reshape(beta.shape)
            return g * dx, dbeta

        @staticmethod
        def jvp(ctx, tx, tbeta):
            x, beta = ctx.saved_tensors
            tbeta = 0 if tbeta is None else tbeta
            s = torch.sigmoid(beta * x)
            return tx * (s + x * beta * s * (1 - s)) + (tbeta * x * x * s * (1 - s))

    beta = nn.Parameter(torch.ones(1))
    net = nn.Sequential(nn.Linear(1, 12), nn.Linear(12, 12), nn.Linear(12, 1))

    def u(inp):
        h = Swish.apply(net[0](inp), beta)
        h = Swish.apply(net[1](h), beta)
        return net[2](h)

    # PINN residual of u' = -u (u(0) = 1), u' by forward-mode AD
    opt = torch.optim.Adam([*net.parameters(), beta], lr=1e-2)
    log = []
    handle = torch.autograd.graph.register_multi_grad_hook(
        (net[0].weight, net[2].weight), lambda grads: log.append([g is None for g in grads]),
        mode="all")
    rec = []
    for _ in range(4):
        with fwAD.dual_level():
            dual = fwAD.make_dual(x, torch.ones_like(x))
            out = u(dual)
            val, du = fwAD.unpack_dual(out)
        loss = (du + val).pow(2).mean() + (u(torch.zeros(1, 1)) - 1).pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    handle.remove()
    # per-row gradients of a vmapped custom Function, batched grads of a Jacobian
    xs = torch.linspace(-1, 1, 5).reshape(5, 1)
    per = torch.func.vmap(lambda r: Swish.apply(r, beta.detach()))(xs)
    inp = torch.randn(3, requires_grad=True)
    out = Swish.apply(inp, beta)
    eye = torch.eye(3)
    (jac,) = torch.autograd.grad(out, inp, eye, is_grads_batched=True, retain_graph=True)
    unused = torch.autograd.grad(out.sum(), [inp, torch.ones(1, requires_grad=True)],
                                 allow_unused=True, materialize_grads=True)
    # saved tensors packed as float16 (memory compression) and unpacked back
    packed = []

    def pack(t):
        packed.append(t.dtype)
        return t.to(torch.float16)

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t.to(torch.float32)):
        z = torch.tanh(inp * 3).sum()
    (gz,) = torch.autograd.grad(z, inp)
    node_log = []
    o = torch.exp(inp).sum()
    o.grad_fn.register_prehook(lambda g: node_log.append(g[0].item()))
    o.grad_fn.next_functions[0][0].register_hook(lambda gi, go: node_log.append(len(gi)))
    o.backward()
    gc_ok = torch.autograd.gradcheck(lambda a: Swish.apply(a, torch.ones(1, dtype=torch.float64)),
                                     (torch.randn(4, dtype=torch.float64, requires_grad=True),))
    return (rec, log[:2], per, jac, unused, packed, gz, node_log, gc_ok, beta.grad,
            net[1].weight.grad, type(out.grad_fn).__name__)


PROGRAMS += [autograd_machinery]


def parametrize_utils(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    P = nn.utils.parametrize
    torch.manual_seed(24)
    rng = np.random.default_rng(24)
    x = torch.tensor(rng.standard_normal((6, 2, 8, 8)), dtype=torch.float32)
    y = torch.tensor(rng.integers(0, 3, 6))

    class Symmetric(nn.Module):
        def forward(self, w):
            return w.triu() + w.triu(1).mT

        def right_inverse(self, s):
            return s.triu()

    class PositiveScale(nn.Module):
        def forward(self, w):
            return F.softplus(w)

        def right_inverse(self, w):
            return torch.log(torch.expm1(w))

    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.Flatten(1), nn.Linear(4 * 64, 8), nn.Tanh(), nn.Linear(8, 8),
                          nn.Linear(8, 3))
    P.register_parametrization(model[6], "weight", Symmetric())
    P.register_parametrization(model[7], "bias", PositiveScale())
    sym_init = model[6].weight.clone()
    model[7].bias = torch.full((3,), 0.5)  # through right_inverse
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.ASGD(model.parameters(), lr=0.05, t0=2)
    rec = []
    for _ in range(4):
        loss = F.cross_entropy(run(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    w = model[6].weight
    with P.cached():
        same = model[6].weight is model[6].weight
    orig = model[6].parametrizations.weight.original
    names = [n for n, _ in model.named_parameters()]
    vec = nn.utils.parameters_to_vector(model.parameters())
    nn.utils.vector_to_parameters(vec * 0 + 0.1, model[4].parameters())
    model.eval()
    fused = nn.utils.fuse_conv_bn_eval(model[0], model[1])
    with torch.no_grad():
        ref = model[1](model[0](x))
        err = (fused(x) - ref).abs().max() < 1e-5
    P.remove_parametrizations(model[6], "weight", leave_parametrized=True)
    P.remove_parametrizations(model[7], "bias", leave_parametrized=False)
    bad = _error(lambda: P.remove_parametrizations(model[6], "weight"))
    return (rec, (w - w.mT).abs().max().item(), sym_init.shape, same, orig.grad, names,
            vec.shape, model[4].bias[:3], err, fused.weight.shape, model[6].weight,
            type(model[7].bias).__name__, model[7].bias, bad, P.is_parametrized(model[6]))


PROGRAMS += [parametrize_utils]


def compiled_train_step(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(25)
    rng = np.random.default_rng(25)
    data = torch.tensor(rng.standard_normal((30, 6)), dtype=torch.float32)
    target = torch.tensor(rng.integers(0, 3, 30))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(6, 16, bias=False)  # (a bias before a batch norm: noise)
            self.bn = nn.BatchNorm1d(16)
            self.fc2 = nn.Linear(16, 3)

        def forward(self, x):
            return self.fc2(F.leaky_relu(self.bn(self.fc1(x)), 0.1))

    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, amsgrad=True)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=2e-2, total_steps=9,
                                                anneal_strategy="linear")

    def smooth(logits, y):
        # the label-smoothed loss written out: log-probabilities, a one-hot mix
        logp = F.log_softmax(logits, -1)
        soft = F.one_hot(y, 3).float() * 0.9 + 0.1 / 3
        return -(soft * logp).sum(-1).mean()

    def train_step(x, y):
        logits = model(x)
        loss = smooth(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach(), logits.argmax(-1)

    step = _maybe_compile(torch, compiled)(train_step)
    rec = []
    # batches of 8, 8, 8 and 6: the last batch has another size
    for _ in range(2):
        for i in range(0, 30, 8):
            loss, pred = step(data[i:i + 8], target[i:i + 8])
            sched.step()
            rec.append((loss.item(), pred, round(sched.get_last_lr()[0], 8)))
    model.eval()
    with torch.no_grad():
        acc = (model(data).argmax(-1) == target).float().mean()
    return (rec, acc, model.bn.running_mean, model.bn.num_batches_tracked,
            opt.state_dict()["state"][0]["max_exp_avg_sq"], model.fc1.weight)


PROGRAMS += [compiled_train_step]


_TOLERANCES = {}


@pytest.mark.parametrize("prog", PROGRAMS, ids=[p.__name__ for p in PROGRAMS])
def test_program(prog):
    _check(prog, *_TOLERANCES.get(prog.__name__, (1e-4, 1e-5)))


# The programs that compile a model or function when asked.
COMPILED = [p for p in PROGRAMS if "_maybe_compile(torch, compiled)" in
            __import__("inspect").getsource(p)]
# Programs whose inductor compilation (C compiled from a cold cache: ntm_copy's unrolled 9-step
# graph takes ~80 s, rope_llama's and vit_droppath's 12-15 s, the others' 3-5 s) would overrun
# this file's time; their eager and aot_eager runs cover the capture and the joint graph.
_SLOW_INDUCTOR = {"ntm_copy", "rope_llama", "vit_droppath", "hypernetwork_film",
                  "nerf_hierarchical", "wavenet_mulaw"}
_RUNS = [(p, b) for p in COMPILED for b in ("eager", "aot_eager", "inductor")
         if not (b == "inductor" and p.__name__ in _SLOW_INDUCTOR)]


@pytest.mark.parametrize("prog,backend", _RUNS, ids=[f"{p.__name__}-{b}" for p, b in _RUNS])
def test_compiled_matches_eager(prog, backend):
    want, want_error, want_text = run_program(prog, fg)
    got, got_error, got_text = run_program(functools.partial(prog, compiled=backend), fg)
    assert got_error == want_error is None
    assert got_text == want_text
    compare(want, got, "compiled", 1e-5, 1e-5)


# torch.compile (2.13, backend="eager") captures each compiled program without a graph break,
# but for module_state_hooks (Tensor.item, module backward hooks), compiled_train_step
# (zero_grad, backward) and dann_grad_reversal (its Probe Function's backward appends to a list
# from outside: "HOP: Unsafe side effect"): it breaks there too.
# Where fusegrad breaks instead, the values are still right (test_compiled_matches_eager): the
# break only costs the graph. Each gap's minimal repro is in the reason.
_TORCH_BREAKS = {"module_state_hooks", "compiled_train_step", "dann_grad_reversal"}
_CAPTURE_GAPS = {
    "selective_checkpoint": "a checkpointed block appends to a list from outside it (run "
                            "again by the backward): the checkpoint runs eagerly, a break",
}
_NO_BREAK = [pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=_CAPTURE_GAPS[p.__name__]))
             if p.__name__ in _CAPTURE_GAPS else p
             for p in COMPILED if p.__name__ not in _TORCH_BREAKS]


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
