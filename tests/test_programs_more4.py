"""Whole programs of kinds the other program files do not cover: a decoder-only language model
generating with a key/value cache and temperature / top-k / top-p sampling, a BiLSTM-CRF
tagger (forward algorithm and Viterbi decoding over packed sequences), a neural ODE
integrated with fixed-step RK4 and a Hutchinson trace estimate, a PixelCNN whose masked
convolutions apply their mask buffer in a forward pre-hook, LoRA fine-tuning (frozen base,
filtered state dicts, merged weights), DP-SGD with per-sample gradients from torch.func,
Grad-CAM style feature extraction with module and tensor hooks, Mixup/CutMix with a Beta
distribution and soft-target cross entropy, PPO with generalised advantage estimation,
skip-gram word2vec with negative sampling, a Gumbel-softmax VAE with one-hot categorical
distributions, keyword spotting on STFT log-mel features with SpecAugment, an energy-based
model sampled by Langevin dynamics with a replay buffer, a set transformer trained in
bfloat16 under autocast with its optimizer stepping in gradient hooks, and a patch denoiser
(convolutions, average pooling, unfold/fold) trained under autocast.

Each program takes the library as its argument (`torch` or fusegrad), seeds it and builds its
data with NumPy, and returns what it recorded: losses per step, outputs, gradients, parameters,
reprs and the errors of deliberate mistakes. The test runs it with both libraries and compares
values (~1e-4 relative), dtypes, shapes, grad_fn names, printed text and raised errors."""

import math
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from program_support import check_program  # noqa: E402
from program_support import error_of as _error  # noqa: E402

import fusegrad as fg  # noqa: E402


def _check(prog, rtol=1e-4, atol=1e-5):
    check_program(prog, torch, fg, rtol, atol)


PROGRAMS = []


def kv_cache_sampling(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(1)
    rng = np.random.default_rng(1)
    V, D, Hh, T = 13, 16, 2, 8
    data = torch.tensor(rng.integers(0, V, (4, T + 1)))

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(D, 3 * D, bias=False)
            self.proj = nn.Linear(D, D)

        def forward(self, x, cache=None):
            B, L, _ = x.shape
            q, k, v = self.qkv(x).split(D, dim=-1)
            q, k, v = (t.view(B, L, Hh, D // Hh).transpose(1, 2) for t in (q, k, v))
            if cache is not None:
                k = torch.cat([cache[0], k], dim=2)
                v = torch.cat([cache[1], v], dim=2)
            causal = cache is None
            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            return self.proj(y.transpose(1, 2).reshape(B, L, D)), (k, v)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.attn = Attn()
            self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

        def forward(self, x, cache=None):
            a, cache = self.attn(self.ln1(x), cache)
            x = x + a
            return x + self.mlp(self.ln2(x)), cache

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(V, D)
            self.pos = nn.Embedding(32, D)
            self.blocks = nn.ModuleList([Block(), Block()])
            self.ln = nn.LayerNorm(D)
            self.head = nn.Linear(D, V, bias=False)
            self.head.weight = self.tok.weight  # tied

        def forward(self, idx, caches=None, start=0):
            pos = torch.arange(start, start + idx.shape[1])
            x = self.tok(idx) + self.pos(pos)
            new = []
            for i, b in enumerate(self.blocks):
                x, c = b(x, None if caches is None else caches[i])
                new.append(c)
            return self.head(self.ln(x)), new

    model = LM()
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    losses = []
    for _ in range(4):
        logits, _ = model(data[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, V), data[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())

    def top_p_filter(logits, p):
        sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        drop = cum > p
        drop[..., 1:] = drop[..., :-1].clone()
        drop[..., 0] = False
        mask = drop.scatter(-1, order, drop)
        return logits.masked_fill(mask, float("-inf"))

    model.eval()
    outs = []
    with torch.inference_mode():
        full, _ = model(data[:2, :5])
        # incremental decoding must match the full pass
        step_logits, caches = model(data[:2, :3])
        for t in range(3, 5):
            lg, caches = model(data[:2, t:t + 1], caches, start=t)
            step_logits = torch.cat([step_logits, lg], 1)
        agree = torch.allclose(full, step_logits, atol=1e-5)
        idx = data[:2, :2]
        logits, caches = model(idx)
        for _ in range(6):
            lg = logits[:, -1, :] / 0.8
            v, _ = torch.topk(lg, 5)
            lg = lg.masked_fill(lg < v[:, [-1]], float("-inf"))
            lg = top_p_filter(lg, 0.9)
            probs = F.softmax(lg, dim=-1)
            nxt = torch.multinomial(probs, num_samples=1)
            # more candidates than the filter kept: the zero-weight ones fill the row
            ranked = torch.multinomial(probs, 7)
            outs.append((probs, ranked))
            idx = torch.cat([idx, nxt], dim=1)
            logits, caches = model(nxt, caches, start=idx.shape[1] - 1)
        greedy = logits.argmax(-1)
    bad = _error(lambda: torch.multinomial(torch.tensor([0.0, 0.0]), 1))
    bad2 = _error(lambda: torch.multinomial(torch.tensor([0.5, 0.5]), 3))
    return (losses, n_params, agree, idx, outs, greedy, idx.is_inference(),
            model.head.weight is model.tok.weight, caches[0][0].shape, bad, bad2)


def bilstm_crf(torch):
    nn = torch.nn
    pack_padded_sequence = torch.nn.utils.rnn.pack_padded_sequence
    pad_packed_sequence = torch.nn.utils.rnn.pad_packed_sequence
    torch.manual_seed(2)
    rng = np.random.default_rng(2)
    V, K, E, H, B, T = 20, 5, 8, 6, 4, 7
    START, STOP = K, K + 1
    lengths = torch.tensor([7, 4, 6, 3])
    words = torch.tensor(rng.integers(1, V, (B, T)))
    tags = torch.tensor(rng.integers(0, K, (B, T)))
    mask = torch.arange(T)[None, :] < lengths[:, None]
    words = words.masked_fill(~mask, 0)

    class CRFTagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, E, padding_idx=0)
            self.lstm = nn.LSTM(E, H, batch_first=True, bidirectional=True)
            self.out = nn.Linear(2 * H, K + 2)
            self.trans = nn.Parameter(torch.randn(K + 2, K + 2))
            with torch.no_grad():
                self.trans[START, :] = -1e4  # nothing goes to START
                self.trans[:, STOP] = -1e4  # nothing leaves STOP

        def emissions(self, w, lens):
            packed = pack_padded_sequence(self.emb(w), lens, batch_first=True,
                                          enforce_sorted=False)
            out, _ = self.lstm(packed)
            out, out_lens = pad_packed_sequence(out, batch_first=True, total_length=T)
            return self.out(out), out_lens

        def log_partition(self, em, m):
            # trans[i, j]: score of moving to i from j
            alpha = torch.full((em.shape[0], K + 2), -1e4)
            alpha[:, START] = 0.0
            for t in range(T):
                nxt = torch.logsumexp(alpha[:, None, :] + self.trans[None], dim=2) + em[:, t]
                alpha = torch.where(m[:, t:t + 1], nxt, alpha)
            return torch.logsumexp(alpha + self.trans[STOP][None], dim=1)

        def gold(self, em, y, m):
            score = torch.zeros(em.shape[0])
            prev = torch.full((em.shape[0],), START, dtype=torch.long)
            for t in range(T):
                s = self.trans[y[:, t], prev] + em[:, t].gather(1, y[:, t:t + 1]).squeeze(1)
                score = score + s * m[:, t]
                prev = torch.where(m[:, t], y[:, t], prev)
            return score + self.trans[STOP, prev]

        def viterbi(self, em, m):
            score = torch.full((em.shape[0], K + 2), -1e4)
            score[:, START] = 0.0
            back = []
            for t in range(T):
                cand = score[:, None, :] + self.trans[None]
                best, arg = cand.max(dim=2)
                nxt = best + em[:, t]
                score = torch.where(m[:, t:t + 1], nxt, score)
                back.append(torch.where(m[:, t:t + 1], arg,
                                        torch.arange(K + 2).expand(em.shape[0], -1)))
            score = score + self.trans[STOP][None]
            best_score, last = score.max(1)
            path = [last]
            for bp in reversed(back[1:]):
                last = bp.gather(1, last[:, None]).squeeze(1)
                path.append(last)
            return best_score, torch.stack(path[::-1], 1)

    model = CRFTagger()
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for _ in range(5):
        em, out_lens = model.emissions(words, lengths)
        nll = (model.log_partition(em, mask) - model.gold(em, tags, mask)).mean()
        opt.zero_grad()
        nll.backward()
        opt.step()
        losses.append(nll.item())
    with torch.no_grad():
        em, _ = model.emissions(words, lengths)
        best, path = model.viterbi(em, mask)
    path = path.masked_fill(~mask, -1)
    acc = ((path == tags) & mask).sum().item() / mask.sum().item()
    packed = pack_padded_sequence(torch.zeros(B, T, 1), lengths, batch_first=True,
                                  enforce_sorted=False)
    bad = _error(lambda: pack_padded_sequence(torch.zeros(B, T, 1), lengths, batch_first=True))
    return (losses, best, path, acc, out_lens, packed.batch_sizes, packed.sorted_indices,
            packed.unsorted_indices, model.trans.grad, model.lstm.weight_hh_l0_reverse.grad,
            bad)


def neural_ode_rk4(torch):
    nn = torch.nn
    torch.manual_seed(3)
    rng = np.random.default_rng(3)
    ts = torch.linspace(0.0, 2.0, 9)
    true_A = torch.tensor([[-0.1, 2.0], [-2.0, -0.1]])
    y0 = torch.tensor([[2.0, 0.0]])

    def rk4(f, y, t0, t1, steps):
        h = (t1 - t0) / steps
        t = t0
        for _ in range(steps):
            k1 = f(t, y)
            k2 = f(t + h / 2, y + h / 2 * k1)
            k3 = f(t + h / 2, y + h / 2 * k2)
            k4 = f(t + h, y + h * k3)
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            t = t + h
        return y

    def odeint(f, y, times, steps=2):
        out = [y]
        for a, b in zip(times[:-1], times[1:]):
            y = rk4(f, y, a, b, steps)
            out.append(y)
        return torch.stack(out)

    with torch.no_grad():
        truth = odeint(lambda t, y: (y ** 3) @ true_A.T, y0, ts)
    truth = truth + torch.tensor(rng.standard_normal(truth.shape) * 0.01, dtype=torch.float32)

    class ODEFunc(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2))
            for m in self.net.modules():
                if isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, mean=0, std=0.1)
                    nn.init.constant_(m.bias, val=0)
            self.nfe = 0

        def forward(self, t, y):
            self.nfe += 1
            return self.net(y ** 3)

    func = ODEFunc()
    opt = torch.optim.RMSprop(func.parameters(), lr=1e-2)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        pred = odeint(func, y0, ts)
        loss = torch.mean(torch.abs(pred - truth))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    # Hutchinson estimate of the divergence (as in continuous normalizing flows)
    y = torch.tensor(rng.standard_normal((5, 2)), dtype=torch.float32, requires_grad=True)
    eps = torch.tensor(rng.choice([-1.0, 1.0], (5, 2)), dtype=torch.float32)
    f = func(0.0, y)
    (vjp,) = torch.autograd.grad(f, y, eps, create_graph=True)
    div = (vjp * eps).sum(1)
    exact = torch.stack([torch.autograd.functional.jacobian(
        lambda z: func(0.0, z), y[i].detach()).trace() for i in range(5)])
    div.sum().backward()
    return (losses, pred, func.nfe, div, exact, y.grad, func.net[0].weight.grad,
            type(vjp.grad_fn).__name__)


PROGRAMS += [kv_cache_sampling, bilstm_crf, neural_ode_rk4]


def pixelcnn(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(4)
    rng = np.random.default_rng(4)
    L = 4  # grey levels
    imgs = torch.tensor(rng.integers(0, L, (6, 1, 6, 6)))

    class MaskedConv2d(nn.Conv2d):
        def __init__(self, kind, *args, **kwargs):
            super().__init__(*args, **kwargs)
            k = self.kernel_size[0]
            mask = torch.ones_like(self.weight)
            mask[:, :, k // 2, k // 2 + (kind == "B"):] = 0
            mask[:, :, k // 2 + 1:] = 0
            self.register_buffer("mask", mask)
            self.register_forward_pre_hook(self._apply_mask)

        @staticmethod
        def _apply_mask(module, inputs):
            with torch.no_grad():
                module.weight.mul_(module.mask)

    net = nn.Sequential(
        MaskedConv2d("A", 1, 8, 5, padding=2), nn.ReLU(),
        MaskedConv2d("B", 8, 8, 3, padding="same", bias=False), nn.BatchNorm2d(8), nn.ReLU(),
        MaskedConv2d("B", 8, 8, 3, padding=1), nn.ReLU(),
        nn.Conv2d(8, L, 1))
    text = repr(net)
    keys = list(net.state_dict().keys())
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    losses = []
    for _ in range(4):
        x = imgs.float() / (L - 1)
        logits = net(x)
        loss = F.cross_entropy(logits, imgs.squeeze(1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    # the receptive field: an output pixel's gradient reaches only pixels before it
    x = torch.zeros(1, 1, 6, 6, requires_grad=True)
    net.eval()
    net(x)[0, :, 2, 3].sum().backward()
    seen = x.grad[0, 0] != 0
    masked_zero = bool((net[0].weight * (1 - net[0].mask)).abs().sum() == 0)
    # sampling pixel by pixel
    sample = torch.zeros(2, 1, 6, 6)
    with torch.no_grad():
        for i in range(6):
            for j in range(6):
                probs = F.softmax(net(sample)[:, :, i, j], dim=1)
                sample[:, 0, i, j] = torch.multinomial(probs, 1).squeeze(1).float() / (L - 1)
    bad = _error(lambda: nn.Conv2d(1, 2, 3, stride=2, padding="same"))
    return (text, keys, losses, seen, masked_zero, sample, net[2].weight.grad,
            net[3].running_mean, bad)


def lora_finetune(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(5)
    rng = np.random.default_rng(5)
    x = torch.tensor(rng.standard_normal((32, 12)), dtype=torch.float32)
    y = torch.tensor(rng.integers(0, 3, 32))

    base = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                         nn.Linear(16, 3))
    pre = {k: v.clone() for k, v in base.state_dict().items()}

    class LoRALinear(nn.Module):
        def __init__(self, linear, r=2, alpha=4):
            super().__init__()
            self.linear = linear
            self.linear.requires_grad_(False)
            self.A = nn.Parameter(torch.empty(r, linear.in_features))
            self.B = nn.Parameter(torch.zeros(linear.out_features, r))
            nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
            self.scale = alpha / r

        def forward(self, x):
            return self.linear(x) + (x @ self.A.t() @ self.B.t()) * self.scale

        def merged(self):
            out = nn.Linear(self.linear.in_features, self.linear.out_features)
            with torch.no_grad():
                out.weight.copy_(self.linear.weight + self.scale * self.B @ self.A)
                out.bias.copy_(self.linear.bias)
            return out

    for name, mod in list(base.named_children()):
        if isinstance(mod, nn.Linear) and name != "4":
            setattr(base, name, LoRALinear(mod))
    base[4].requires_grad_(False)
    trainable = [n for n, p in base.named_parameters() if p.requires_grad]
    frozen = sum(p.numel() for p in base.parameters() if not p.requires_grad)
    opt = torch.optim.Adam([p for p in base.parameters() if p.requires_grad], lr=2e-2)
    losses = []
    for _ in range(5):
        loss = F.cross_entropy(base(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    lora_state = {k: v for k, v in base.state_dict().items() if k.endswith((".A", ".B"))}
    before = base(x).detach()
    for name, mod in list(base.named_children()):
        if isinstance(mod, LoRALinear):
            setattr(base, name, mod.merged())
    after = base(x).detach()
    same_base = all(torch.equal(pre[k], v) for k, v in base.state_dict().items()
                    if k.startswith("4."))
    fresh = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                          nn.Linear(16, 3))
    result = fresh.load_state_dict({"0.weight": pre["0.weight"], "extra": torch.zeros(1)},
                                   strict=False)
    bad = _error(lambda: fresh.load_state_dict({"0.weight": torch.zeros(3, 3)}, strict=False))
    bad2 = _error(lambda: fresh.load_state_dict(lora_state))
    return (losses, trainable, frozen, sorted(lora_state), before, after, same_base,
            repr(result), result.missing_keys, result.unexpected_keys, bad, bad2,
            base[0].weight.requires_grad, base[4].weight.grad)


def dp_sgd_per_sample(torch):
    nn, F = torch.nn, torch.nn.functional
    from_func = torch.func
    torch.manual_seed(6)
    rng = np.random.default_rng(6)
    x = torch.tensor(rng.standard_normal((16, 1, 8, 8)), dtype=torch.float32)
    y = torch.tensor(rng.integers(0, 4, 16))
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.GroupNorm(2, 4), nn.Tanh(),
                          nn.Flatten(), nn.Linear(4 * 36, 4))
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def loss_one(p, b, xi, yi):
        out = from_func.functional_call(model, (p, b), (xi.unsqueeze(0),))
        return F.cross_entropy(out, yi.unsqueeze(0))

    per_grad = from_func.vmap(from_func.grad(loss_one), in_dims=(None, None, 0, 0))
    clip, sigma, lr = 1.0, 0.5, 0.1
    losses, norms_seen = [], []
    for _ in range(3):
        g = per_grad(params, buffers, x, y)
        flat = torch.cat([v.reshape(16, -1) for v in g.values()], 1)
        norms = flat.norm(dim=1)
        factor = (clip / (norms + 1e-6)).clamp(max=1.0)
        new = {}
        for k, v in g.items():
            clipped = (v * factor.view(-1, *([1] * (v.dim() - 1)))).sum(0)
            noise = torch.normal(0.0, sigma * clip, size=clipped.shape)
            new[k] = params[k] - lr * (clipped + noise) / 16
        params = new
        with torch.no_grad():
            out = from_func.functional_call(model, params, (x,))
        losses.append(F.cross_entropy(out, y).item())
        norms_seen.append(norms)
    # per-sample gradients agree with a loop of ordinary backward passes
    loop = []
    for i in range(3):
        model.zero_grad()
        F.cross_entropy(model(x[i:i + 1]), y[i:i + 1]).backward()
        loop.append(model[4].weight.grad.clone())
    g0 = per_grad({k: v.detach() for k, v in model.named_parameters()}, buffers, x[:3], y[:3])
    jac = from_func.jacrev(lambda w: from_func.functional_call(
        model, {**dict(model.named_parameters()), "4.bias": w}, (x[:2],)))(model[4].bias)
    bad = _error(lambda: from_func.vmap(torch.sum, in_dims=1)(torch.zeros(3)))
    return (losses, norms_seen, params["4.weight"], torch.stack(loop), g0["4.weight"], jac,
            bad)


PROGRAMS += [pixelcnn, lora_finetune, dp_sgd_per_sample]


def gradcam_hooks(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(7)
    rng = np.random.default_rng(7)
    x = torch.tensor(rng.standard_normal((3, 3, 12, 12)), dtype=torch.float32)
    y = torch.tensor([0, 2, 1])

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(inplace=True),
                nn.MaxPool2d(2), nn.Conv2d(6, 8, 3, padding=1), nn.ReLU())
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(8, 3)

        def forward(self, x):
            return self.fc(self.pool(self.features(x)).flatten(1))

    net = Net()
    acts, grads, log = {}, {}, []

    def fwd_hook(name):
        def hook(module, inp, out):
            acts[name] = out.detach()
            log.append(("fwd", name, tuple(out.shape)))
        return hook

    def bwd_hook(name):
        def hook(module, grad_in, grad_out):
            grads[name] = grad_out[0].detach()
            log.append(("bwd", name, [None if g is None else tuple(g.shape) for g in grad_in]))
        return hook

    def pre_bwd(module, grad_out):
        log.append(("pre_bwd", type(module).__name__))
        return (grad_out[0] * 2,)  # doubles what flows into fc

    handles = [net.features[4].register_forward_hook(fwd_hook("conv2")),
               net.features[4].register_full_backward_hook(bwd_hook("conv2")),
               net.fc.register_full_backward_pre_hook(pre_bwd),
               net.features[0].register_forward_hook(
                   lambda m, args, kwargs, out: log.append(("kw", sorted(kwargs))),
                   with_kwargs=True)]
    out = net(x)
    score = out.gather(1, y[:, None]).sum()
    feats = net.features(x)
    feats.retain_grad()
    seen = []
    feats.register_hook(lambda g: seen.append(g.abs().sum()))
    score2 = net.fc(net.pool(feats).flatten(1)).gather(1, y[:, None]).sum()
    score.backward()
    score2.backward()
    weights = grads["conv2"].mean((2, 3), keepdim=True)
    cam = F.relu((weights * acts["conv2"]).sum(1))
    cam = F.interpolate(cam[:, None], size=(12, 12), mode="bilinear", align_corners=False)
    cam = cam / cam.amax((2, 3), keepdim=True).clamp_min(1e-8)
    for h in handles:
        h.remove()
    after = len(log)
    net(x)
    acc = []
    for p in net.fc.parameters():
        p.register_post_accumulate_grad_hook(lambda p: acc.append(p.grad.norm()))
    net.zero_grad()
    net(x).sum().backward()
    # saliency: gradient of the top logit with respect to the input
    xi = x.clone().requires_grad_()
    net.eval()
    net(xi).max(1).values.sum().backward()
    sal = xi.grad.abs().amax(1)
    return (log, after == len(log), cam, feats.grad, seen, acc, sal,
            net.features[4].weight.grad, net.fc.weight.grad, feats.is_leaf,
            feats.retains_grad)


def mixup_cutmix(torch):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    torch.manual_seed(8)
    rng = np.random.default_rng(8)
    x = torch.tensor(rng.standard_normal((8, 3, 8, 8)), dtype=torch.float32)
    y = torch.tensor(rng.integers(0, 5, 8))
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.Hardswish(),
                        nn.AdaptiveMaxPool2d(2), nn.Flatten(), nn.Dropout(0.2),
                        nn.Linear(32, 5))
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                          weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2)
    beta = D.Beta(torch.tensor(0.4), torch.tensor(0.4))
    rec = []
    for step in range(6):
        lam = beta.sample()
        perm = torch.randperm(8)
        onehot = F.one_hot(y, 5).float()
        if step % 2 == 0:  # mixup
            xm = lam * x + (1 - lam) * x[perm]
            ym = lam * onehot + (1 - lam) * onehot[perm]
        else:  # cutmix
            cut = int(8 * math.sqrt(1 - lam.item()))
            cy, cx = torch.randint(8, (2,)).tolist()
            y0, y1 = max(cy - cut // 2, 0), min(cy + cut // 2, 8)
            x0, x1 = max(cx - cut // 2, 0), min(cx + cut // 2, 8)
            xm = x.clone()
            xm[:, :, y0:y1, x0:x1] = x[perm][:, :, y0:y1, x0:x1]
            area = 1 - (y1 - y0) * (x1 - x0) / 64
            ym = area * onehot + (1 - area) * onehot[perm]
        out = net(xm)
        loss = F.cross_entropy(out, ym, label_smoothing=0.1)
        hard = F.cross_entropy(out, y, label_smoothing=0.1, reduction="none")
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step(step + 1)
        rec.append((lam, perm, loss.item(), hard, sched.get_last_lr()[0]))
    dist = D.Beta(torch.tensor([0.5, 2.0]), torch.tensor([0.5, 3.0]))
    stats = (dist.mean, dist.variance, dist.entropy(),
             dist.log_prob(torch.tensor([0.3, 0.6])), repr(dist))
    bad = _error(lambda: F.cross_entropy(torch.zeros(2, 3), torch.zeros(2, 4)))
    bad2 = _error(lambda: F.cross_entropy(torch.zeros(2, 3), torch.zeros(2).long(),
                                          label_smoothing=1.5))
    return rec, stats, net[6].weight, opt.state_dict()["state"][0]["momentum_buffer"], bad, bad2


def ppo_gae(torch):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    torch.manual_seed(9)
    rng = np.random.default_rng(9)
    S, A, T = 4, 3, 16

    class ActorCritic(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(S, 32), nn.Tanh())
            self.pi = nn.Linear(32, A)
            self.v = nn.Linear(32, 1)
            self.mu = nn.Linear(32, 1)
            self.log_std = nn.Parameter(torch.zeros(1))
            nn.init.orthogonal_(self.pi.weight, gain=0.01)
            nn.init.orthogonal_(self.body[0].weight, gain=math.sqrt(2))

        def forward(self, s):
            h = self.body(s)
            return (D.Categorical(logits=self.pi(h)),
                    D.Normal(self.mu(h).squeeze(-1), self.log_std.exp()),
                    self.v(h).squeeze(-1))

    ac = ActorCritic()
    opt = torch.optim.Adam(ac.parameters(), lr=3e-3, eps=1e-5)
    states = torch.tensor(rng.standard_normal((T, S)), dtype=torch.float32)
    rewards = torch.tensor(rng.standard_normal(T), dtype=torch.float32)
    dones = torch.tensor(rng.random(T) < 0.15, dtype=torch.float32)
    with torch.no_grad():
        cat, norm, values = ac(states)
        actions = cat.sample()
        cont = norm.sample()
        old_logp = cat.log_prob(actions) + norm.log_prob(cont)
    gamma, lam = 0.99, 0.95
    adv = torch.zeros(T)
    last = 0.0
    for t in reversed(range(T)):
        next_v = values[t + 1] if t + 1 < T else torch.tensor(0.0)
        nonterm = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_v * nonterm - values[t]
        last = delta + gamma * lam * nonterm * last
        adv[t] = last
    returns = adv + values
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    rec = []
    for _epoch in range(3):
        for idx in torch.randperm(T).split(8):
            cat, norm, v = ac(states[idx])
            logp = cat.log_prob(actions[idx]) + norm.log_prob(cont[idx])
            ratio = (logp - old_logp[idx]).exp()
            s1 = ratio * adv[idx]
            s2 = torch.clamp(ratio, 0.8, 1.2) * adv[idx]
            pg = -torch.min(s1, s2).mean()
            vf = F.mse_loss(v, returns[idx])
            ent = (cat.entropy() + norm.entropy()).mean()
            loss = pg + 0.5 * vf - 0.01 * ent
            opt.zero_grad()
            loss.backward()
            gn = nn.utils.clip_grad_norm_(ac.parameters(), 0.5)
            opt.step()
            approx_kl = ((ratio - 1) - (ratio.log())).mean()
            rec.append((loss.item(), gn, approx_kl.item(),
                        (ratio - 1).abs().gt(0.2).float().mean().item()))
    bad = _error(lambda: D.Categorical(probs=torch.tensor([0.5, -0.1, 0.6])))
    bad2 = _error(lambda: D.Normal(torch.zeros(2), torch.tensor([1.0, -1.0])))
    return (rec, actions, cont, adv, returns, ac.log_std, ac.pi.weight.grad, repr(cat),
            bad, bad2)


def word2vec_negative_sampling(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(10)
    rng = np.random.default_rng(10)
    V, D, K, W = 30, 8, 4, 2
    corpus = torch.tensor(rng.zipf(1.5, 200) % V)
    counts = torch.bincount(corpus, minlength=V).float()
    noise = counts.pow(0.75)
    noise = noise / noise.sum()
    pairs = []
    for i in range(W, len(corpus) - W):
        for j in range(-W, W + 1):
            if j:
                pairs.append((corpus[i].item(), corpus[i + j].item()))
    pairs = torch.tensor(pairs)
    # subsample frequent words
    freq = counts / counts.sum()
    keep_p = (torch.sqrt(freq / 1e-2) + 1) * 1e-2 / freq.clamp_min(1e-12)
    keep = torch.rand(len(pairs)) < keep_p[pairs[:, 0]].clamp(max=1.0)
    pairs = pairs[keep]

    class SGNS(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Embedding(V, D, sparse=True)
            self.out = nn.Embedding(V, D, sparse=True)
            nn.init.uniform_(self.inp.weight, -0.5 / D, 0.5 / D)
            nn.init.zeros_(self.out.weight)

        def forward(self, c, o, neg):
            vc = self.inp(c)
            pos = F.logsigmoid((vc * self.out(o)).sum(-1))
            negs = torch.bmm(self.out(neg), vc.unsqueeze(2)).squeeze(2)
            return -(pos + F.logsigmoid(-negs).sum(-1)).mean()

    model = SGNS()
    opt = torch.optim.SparseAdam(list(model.parameters()), lr=0.05)
    losses = []
    for batch in pairs.split(64):
        neg = torch.multinomial(noise, len(batch) * K, replacement=True).view(-1, K)
        loss = model(batch[:, 0], batch[:, 1], neg)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    g = model.inp.weight.grad
    emb = F.normalize(model.inp.weight.detach(), dim=1)
    sims = emb @ emb[:3].T
    nearest = sims.topk(3, dim=0).indices
    return (len(pairs), losses, g.is_sparse, g.coalesce().indices(), g.to_dense(), nearest,
            model.out.weight, counts)


PROGRAMS += [gradcam_hooks, mixup_cutmix, ppo_gae, word2vec_negative_sampling]


def gumbel_softmax_vae(torch):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    torch.manual_seed(11)
    rng = np.random.default_rng(11)
    N, K, X = 3, 4, 12  # 3 categorical latents of 4 classes, 12 binary pixels
    data = torch.tensor(rng.random((16, X)) < 0.4, dtype=torch.float32)

    class GumbelVAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(X, 24), nn.ELU(), nn.Linear(24, N * K))
            self.dec = nn.Sequential(nn.Linear(N * K, 24), nn.ELU(), nn.Linear(24, X))

        def forward(self, x, tau, hard):
            logits = self.enc(x).view(-1, N, K)
            z = F.gumbel_softmax(logits, tau=tau, hard=hard, dim=-1)
            return self.dec(z.flatten(1)), logits, z

    model = GumbelVAE()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    prior = D.OneHotCategorical(probs=torch.full((N, K), 1.0 / K))
    rec = []
    for step in range(6):
        tau = max(0.5, math.exp(-0.3 * step))
        recon, logits, z = model(data, tau, hard=step >= 3)
        nll = F.binary_cross_entropy_with_logits(recon, data, reduction="sum") / len(data)
        q = D.OneHotCategorical(logits=logits)
        kl = D.kl_divergence(q, prior).sum(-1).mean()
        loss = nll + kl
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((nll.item(), kl.item(), tau, z.sum(-1)))
    relaxed = D.RelaxedOneHotCategorical(torch.tensor(0.5), logits=logits.detach()[:2])
    s = relaxed.rsample()
    hard = D.OneHotCategorical(logits=logits.detach()[:2]).sample((2,))
    bern = D.Bernoulli(logits=model.dec(hard[0].flatten(1)))
    with torch.no_grad():
        gen = bern.sample()
    extra = (relaxed.log_prob(s), bern.log_prob(gen).sum(-1), bern.entropy().sum(-1),
             D.kl_divergence(D.Categorical(logits=logits.detach()),
                             D.Categorical(probs=torch.full((N, K), 1.0 / K))).sum(-1),
             prior.entropy(), prior.enumerate_support().shape, repr(relaxed), repr(prior))
    bad = _error(lambda: F.gumbel_softmax(logits, tau=0.5, dim=3))
    bad2 = _error(lambda: prior.log_prob(torch.tensor([0.5, 0.5, 0.0, 0.0])))
    return rec, s, hard, gen, extra, model.enc[0].weight.grad, bad, bad2


def keyword_spotting_stft(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(12)
    rng = np.random.default_rng(12)
    B, L, NFFT, HOP, MELS = 6, 480, 64, 32, 12
    t = np.arange(L) / 8000.0
    freqs = rng.choice([300.0, 900.0, 1700.0], B)
    wav = np.sin(2 * np.pi * freqs[:, None] * t) + 0.3 * rng.standard_normal((B, L))
    wav = torch.tensor(wav, dtype=torch.float32)
    labels = torch.tensor([[300.0, 900.0, 1700.0].index(f) for f in freqs])
    # a triangular mel-like filterbank, built as PyTorch code would
    bins = torch.fft.rfftfreq(NFFT, d=1 / 8000.0)
    centers = torch.linspace(100.0, 3500.0, MELS + 2)
    lo, mid, hi = centers[:-2, None], centers[1:-1, None], centers[2:, None]
    fbank = torch.clamp(torch.minimum((bins - lo) / (mid - lo), (hi - bins) / (hi - mid)), min=0)
    window = torch.hann_window(NFFT)

    def features(x, augment):
        spec = torch.stft(x, NFFT, HOP, window=window, return_complex=True)
        logmel = torch.log1p(fbank @ spec.abs().pow(2))
        logmel = (logmel - logmel.mean((1, 2), keepdim=True)) / (logmel.std((1, 2),
                                                                            keepdim=True) + 1e-5)
        if augment:  # SpecAugment: one frequency band and one time span masked per example
            f0 = torch.randint(0, MELS - 3, (x.shape[0], 1, 1))
            t0 = torch.randint(0, logmel.shape[-1] - 4, (x.shape[0], 1, 1))
            fr = torch.arange(MELS)[None, :, None]
            tr = torch.arange(logmel.shape[-1])[None, None, :]
            mask = ((fr >= f0) & (fr < f0 + 3)) | ((tr >= t0) & (tr < t0 + 4))
            logmel = logmel.masked_fill(mask, 0.0)
        return logmel

    # no bias before batch norm: its gradient is rounding noise, which Adam would amplify
    model = nn.Sequential(nn.Conv1d(MELS, 16, 3, padding=1, bias=False), nn.BatchNorm1d(16),
                          nn.GELU(), nn.Conv1d(16, 16, 3, padding=2, dilation=2), nn.ReLU(),
                          nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(16, 3))
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=5)
    losses = []
    for _ in range(5):
        loss = F.cross_entropy(model(features(wav, True)), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append((loss.item(), sched.get_last_lr()[0]))
    model.eval()
    x = wav[:2].clone().requires_grad_()
    logits = model(features(x, False))
    logits[:, 0].sum().backward()
    spec = torch.stft(wav[:2], NFFT, HOP, window=window, return_complex=True)
    back = torch.istft(spec, NFFT, HOP, window=window, length=L)
    bad = _error(lambda: torch.stft(wav, NFFT, HOP))
    bad2 = _error(lambda: torch.stft(wav, NFFT, HOP, window=torch.hann_window(NFFT + 1),
                                     return_complex=True))
    return (losses, fbank, logits, x.grad, (back - wav[:2]).abs().max() < 1e-4,
            spec.dtype, spec.shape, model[1].running_var, bad, bad2)


def ebm_langevin(torch):
    nn = torch.nn
    torch.manual_seed(13)
    rng = np.random.default_rng(13)
    # data: points on a ring
    ang = rng.uniform(0, 2 * np.pi, 64)
    data = torch.tensor(np.stack([np.cos(ang), np.sin(ang)], 1) * 2
                        + 0.05 * rng.standard_normal((64, 2)), dtype=torch.float32)
    sn = nn.utils.parametrizations.spectral_norm
    energy = nn.Sequential(sn(nn.Linear(2, 32)), nn.SiLU(), sn(nn.Linear(32, 32)), nn.Tanh(),
                           nn.Linear(32, 1))
    opt = torch.optim.Adam(energy.parameters(), lr=3e-3, betas=(0.0, 0.999))
    buffer = torch.rand(128, 2) * 6 - 3

    def langevin(x, steps=5, step_size=0.05):
        x = x.clone().requires_grad_(True)
        for _ in range(steps):
            (g,) = torch.autograd.grad(energy(x).sum(), x)
            x = (x - step_size * g + math.sqrt(2 * step_size) * 0.1 * torch.randn_like(x))
            x = x.detach().clamp(-3, 3).requires_grad_(True)
        return x.detach()

    rec = []
    for _ in range(4):
        idx = torch.randint(0, len(buffer), (32,))
        fresh = torch.rand(32, 2) < 0.05
        init = torch.where(fresh, torch.rand(32, 2) * 6 - 3, buffer[idx])
        neg = langevin(init)
        buffer[idx] = neg
        pos = data[torch.randperm(64)[:32]].requires_grad_(True)
        e_pos, e_neg = energy(pos), energy(neg)
        # contrastive divergence with an energy regulariser and a gradient penalty on data
        (g_pos,) = torch.autograd.grad(e_pos.sum(), pos, create_graph=True)
        loss = e_pos.mean() - e_neg.mean() + 0.1 * (e_pos ** 2 + e_neg ** 2).mean() \
            + 0.01 * g_pos.pow(2).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((loss.item(), e_pos.mean().item(), e_neg.mean().item()))
    energy.eval()
    grid = torch.stack(torch.meshgrid(torch.linspace(-3, 3, 5), torch.linspace(-3, 3, 5),
                                      indexing="ij"), -1).view(-1, 2)
    with torch.no_grad():
        landscape = energy(grid).view(5, 5)
    return (rec, buffer[:8], landscape, type(g_pos.grad_fn).__name__,
            sorted(energy.state_dict()), energy[4].weight.grad,
            energy[0].parametrizations.weight.original.grad)


PROGRAMS += [gumbel_softmax_vae, keyword_spotting_stft, ebm_langevin]


def set_transformer_bf16(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(14)
    rng = np.random.default_rng(14)
    B, N, D, H = 4, 6, 16, 2
    pts = torch.tensor(rng.standard_normal((B, N, 3)), dtype=torch.float32)
    target = pts.norm(dim=-1).amax(1, keepdim=True)  # the set's largest radius

    class SetTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(3, D)
            self.qkv = nn.Linear(D, 3 * D)
            self.seed = nn.Parameter(torch.randn(1, H, 1, D // H))
            self.kv = nn.Linear(D, 2 * D)
            self.head = nn.Sequential(nn.LayerNorm(D), nn.Linear(D, 1))

        def forward(self, x):
            h = self.embed(x)
            q, k, v = self.qkv(h).chunk(3, -1)
            h = h + F.scaled_dot_product_attention(q, k, v)  # 3-D: PyTorch's math path
            k, v = (t.view(B, N, H, D // H).transpose(1, 2) for t in self.kv(h).chunk(2, -1))
            pooled = F.scaled_dot_product_attention(self.seed.expand(B, -1, -1, -1), k, v)
            return self.head(pooled.transpose(1, 2).reshape(B, D)), pooled

    model = SetTransformer()
    # optimizer in backward: each parameter steps as soon as its gradient is accumulated
    opts = {p: torch.optim.SGD([p], lr=0.05) for p in model.parameters()}
    names = {p: n for n, p in model.named_parameters()}
    order = []

    def step(p):
        order.append(names[p])
        opts[p].step()
        opts[p].zero_grad()

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(step)
    rec = []
    for _ in range(3):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out, pooled = model(pts)
            loss = F.mse_loss(out, target)
        loss.backward()
        rec.append((loss.item(), out.dtype, pooled.dtype, type(loss.grad_fn).__name__))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        q = model.qkv(model.embed(pts)).chunk(3, -1)
        att = F.scaled_dot_product_attention(*q, is_causal=True)
        att4 = F.scaled_dot_product_attention(*(t.view(B, N, H, D // H).transpose(1, 2)
                                                for t in q), is_causal=True)
    chain = []
    fn = att.grad_fn
    while fn is not None and len(chain) < 4:
        chain.append(type(fn).__name__)
        fn = fn.next_functions[0][0]
    return rec, order, out, pooled, att, att4, chain, model.seed, model.embed.weight


PROGRAMS += [set_transformer_bf16]


def patch_denoiser_bf16(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(15)
    rng = np.random.default_rng(15)
    clean = torch.tensor(np.cumsum(rng.standard_normal((4, 1, 10, 10)), -1) / 3,
                         dtype=torch.float32)
    noisy = clean + 0.3 * torch.tensor(rng.standard_normal((4, 1, 10, 10)),
                                       dtype=torch.float32)

    class Denoiser(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Conv2d(1, 8, 3, padding=1)
            self.mid = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=2)
            self.smooth = nn.AvgPool2d(3, stride=1, padding=1)
            self.patch = nn.Linear(9, 9)  # acts on each 3x3 patch of the features

        def forward(self, x):
            h = F.silu(self.enc(x))
            h = self.smooth(F.silu(self.mid(h))).mean(1, keepdim=True)  # bfloat16 here
            cols = F.unfold(h, 3, padding=1)  # (N, 9, 100): overlapping patches
            cols = self.patch(cols.transpose(1, 2)).transpose(1, 2)
            # overlapping patches averaged back into the image, in bfloat16
            count = F.fold(torch.ones_like(cols), (10, 10), 3, padding=1)
            return x - F.fold(cols, (10, 10), 3, padding=1) / count

    model = Denoiser()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rec = []
    for _ in range(3):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(noisy)
            loss = F.mse_loss(out.float(), clean)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((loss.item(), out.dtype))
    x = noisy[:1].clone().bfloat16().requires_grad_()
    model.bfloat16()
    y = model(x)
    # upsampled views of the bfloat16 output (PyTorch's generic kernel keeps its weights
    # in bfloat16, its bilinear one in float32)
    ups = [F.interpolate(y, scale_factor=2.5, mode="bicubic"),
           F.interpolate(y, scale_factor=1.5, mode="bilinear", align_corners=True),
           F.interpolate(y.flatten(2), scale_factor=1.7, mode="linear"),
           F.interpolate(y[:, :, None], size=(3, 13, 13), mode="trilinear")]
    (y.float().pow(2).sum() + sum(u.float().sum() for u in ups)).backward()
    return (rec, out, y, ups, x.grad, model.enc.weight.grad, model.mid.weight.grad,
            model.patch.weight.grad, type(y.grad_fn).__name__)


PROGRAMS += [patch_denoiser_bf16]


def message_passing_bf16(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(16)
    rng = np.random.default_rng(16)
    N, E, D, C = 12, 40, 8, 3
    src = torch.tensor(rng.integers(0, N, E))
    dst = torch.tensor(rng.integers(0, N, E))
    labels = torch.tensor(rng.integers(0, C, N))

    class MPNN(nn.Module):
        """Node embeddings, two rounds of messages (summed, averaged and maxed per node)."""

        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(N, D)
            self.msg = nn.Linear(2 * D, D)
            self.upd = nn.Linear(3 * D, D)
            self.out = nn.Linear(D, C)

        def forward(self):
            h = self.emb(torch.arange(N))
            for _ in range(2):
                m = F.relu(self.msg(torch.cat([h[src], h[dst]], -1)))
                total = torch.zeros_like(h).index_add(0, dst, m)
                mean = torch.zeros_like(h).scatter_reduce(
                    0, dst[:, None].expand(-1, D), m, "mean", include_self=False)
                peak = torch.zeros_like(h).scatter_reduce(
                    0, dst[:, None].expand(-1, D), m, "amax", include_self=False)
                h = h + torch.tanh(self.upd(torch.cat([total, mean, peak], -1)))
            deg = torch.zeros(N, dtype=h.dtype).scatter_add(0, dst, torch.ones(E, dtype=h.dtype))
            return self.out(h), deg

    model = MPNN().bfloat16()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rec = []
    for _ in range(3):
        logits, deg = model()
        loss = F.cross_entropy(logits.float(), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    return (rec, logits, deg, model.emb.weight.grad, model.msg.weight.grad,
            model.upd.weight.grad, model.emb.weight)


PROGRAMS += [message_passing_bf16]


_TOLERANCES = {}


@pytest.mark.parametrize("prog", PROGRAMS, ids=[p.__name__ for p in PROGRAMS])
def test_program(prog):
    _check(prog, *_TOLERANCES.get(prog.__name__, (1e-4, 1e-5)))
