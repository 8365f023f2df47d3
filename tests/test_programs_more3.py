"""More whole programs, of kinds the other program files do not cover: a masked autoencoder
with Unfold/Fold patches and random masking, a top-2 mixture of experts with a load-balancing
loss, a dilated causal TCN with weight norm and quantile losses, an SN-GAN with hinge losses,
an anchor-based detector with focal loss and a pure-tensor NMS, a Hamiltonian network trained
through second derivatives with a Sinkhorn loss, a BERT-style masked language model, a
MobileNet-style network with squeeze-excitation saved and restored mid-training, a
multi-task model with GradNorm weighting, a ConvLSTM video predictor, a Fourier neural
operator with complex weights, activation checkpointing with Gumbel-softmax and embedding
bags, rigid registration with matrix exponentials and factorizations, classifiers in
bfloat16/float16 without autocast, and quantization-aware training with fake quantization.

Each program takes the library as its argument (`torch` or fusegrad), seeds it and builds its
data with NumPy, and returns what it recorded: losses per step, outputs, gradients, parameters,
reprs and the errors of deliberate mistakes. The test runs it with both libraries and compares
values (~1e-4 relative), dtypes, shapes, grad_fn names, printed text and raised errors."""

import io
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


def masked_autoencoder(torch):
    nn = torch.nn
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    B, C, H, P, D = 3, 2, 8, 4, 16
    N = (H // P) ** 2
    imgs = torch.tensor(rng.standard_normal((B, C, H, H)), dtype=torch.float32)
    unfold, fold = nn.Unfold(P, stride=P), nn.Fold((H, H), P, stride=P)

    class MAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(C * P * P, D)
            self.pos = nn.Parameter(torch.zeros(1, N, D))
            nn.init.trunc_normal_(self.pos, std=0.02)
            self.cls = nn.Parameter(torch.randn(1, 1, D) * 0.02)
            self.enc = nn.TransformerEncoder(
                nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True),
                num_layers=2, enable_nested_tensor=False)
            self.mask_token = nn.Parameter(torch.zeros(1, 1, D))
            self.dec = nn.Sequential(nn.LayerNorm(D), nn.Linear(D, D), nn.GELU("tanh"),
                                     nn.Linear(D, C * P * P))

        def forward(self, x, ratio=0.5):
            patches = unfold(x).transpose(1, 2)  # B, N, C*P*P
            tok = self.embed(patches) + self.pos
            keep = int(N * (1 - ratio))
            noise = torch.rand(x.shape[0], N)
            shuffle = torch.argsort(noise, dim=1)
            restore = torch.argsort(shuffle, dim=1)
            kept = torch.gather(tok, 1, shuffle[:, :keep, None].expand(-1, -1, D))
            mask = torch.ones(x.shape[0], N)
            mask[:, :keep] = 0
            mask = torch.gather(mask, 1, restore)
            h = self.enc(torch.cat([self.cls.expand(x.shape[0], -1, -1), kept], 1))[:, 1:]
            full = torch.cat([h, self.mask_token.expand(x.shape[0], N - keep, -1)], 1)
            full = torch.gather(full, 1, restore[..., None].expand(-1, -1, D))
            pred = self.dec(full + self.pos)
            mean = patches.mean(-1, keepdim=True)
            var = patches.var(-1, keepdim=True)
            target = (patches - mean) / (var + 1e-6) ** 0.5
            loss = ((pred - target) ** 2).mean(-1)
            loss = (loss * mask).sum() / mask.sum()
            return loss, pred, mask

    model = MAE()
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim < 2 or "pos" in name or "token" in name else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                             {"params": no_decay, "weight_decay": 0.0}], lr=3e-3,
                            betas=(0.9, 0.95))
    warm = 2
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else 0.5 * (1 + math.cos(math.pi * s / 6)))
    losses = []
    for _step in range(4):
        opt.zero_grad(set_to_none=True)
        loss, pred, mask = model(imgs)
        loss.backward()
        opt.step()
        sched.step()
        losses.append((loss.item(), sched.get_last_lr()))
    recon = fold(pred.detach().transpose(1, 2))
    overlap = fold(unfold(torch.ones(1, C, H, H)))
    bad = _error(lambda: nn.Fold((H, H), P, stride=P)(torch.zeros(1, C * P * P, N + 1)))
    return (losses, recon, overlap, mask, model.pos.grad, model.cls.grad,
            [len(g["params"]) for g in opt.param_groups], bad)


PROGRAMS += [masked_autoencoder]


def mixture_of_experts(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(1)
    rng = np.random.default_rng(1)
    T, D, E, K = 24, 8, 4, 2
    x = torch.tensor(rng.standard_normal((T, D)), dtype=torch.float32)
    y = torch.tensor(rng.integers(0, 3, T))

    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = nn.Linear(D, E, bias=False)
            self.w1 = nn.Parameter(torch.randn(E, D, 16) * 0.1)
            self.w2 = nn.Parameter(torch.randn(E, 16, D) * 0.1)
            self.head = nn.Linear(D, 3)

        def forward(self, x):
            logits = self.gate(x)
            probs = F.softmax(logits, dim=-1)
            topv, topi = torch.topk(probs, K, dim=-1)
            topv = topv / topv.sum(-1, keepdim=True)
            out = torch.zeros_like(x)
            counts = torch.bincount(topi.flatten(), minlength=E)
            for e in range(E):
                rows, slot = torch.nonzero(topi == e, as_tuple=True)
                if rows.numel() == 0:
                    continue
                h = F.silu(x[rows] @ self.w1[e]) @ self.w2[e]
                out.index_add_(0, rows, h * topv[rows, slot, None])
            frac = F.one_hot(topi[:, 0], E).float().mean(0)
            aux = E * (frac * probs.mean(0)).sum()
            z = torch.logsumexp(logits, -1).pow(2).mean()
            return self.head(out + x), aux, z, counts

    model = MoE()
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    rec = []
    for _step in range(4):
        opt.zero_grad()
        out, aux, z, counts = model(x)
        loss = F.cross_entropy(out, y) + 0.01 * aux + 1e-3 * z
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), 0.05)
        opt.step()
        rec.append((loss.item(), aux.item(), counts.tolist()))
    vec = nn.utils.parameters_to_vector(model.parameters())
    nn.utils.vector_to_parameters(vec * 0.5, model.parameters())
    grads = nn.utils.parameters_to_vector([p.grad for p in model.parameters()])
    bad = _error(lambda: nn.utils.vector_to_parameters(vec[:-1], model.parameters()))
    bad2 = _error(lambda: nn.utils.parameters_to_vector(model.w1))
    return rec, vec, grads, model.w2, out, bad, bad2


PROGRAMS += [mixture_of_experts]


def tcn_quantiles(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(2)
    rng = np.random.default_rng(2)
    t = np.arange(40, dtype=np.float32)
    series = np.sin(t / 4)[None, None] + 0.1 * rng.standard_normal((3, 1, 40))
    x = torch.tensor(series[..., :-1], dtype=torch.float32)
    target = torch.tensor(series[..., 1:], dtype=torch.float32)
    qs = torch.tensor([0.1, 0.5, 0.9])
    wn = nn.utils.parametrizations.weight_norm

    class Block(nn.Module):
        def __init__(self, i, o, d):
            super().__init__()
            self.pad = 2 * d
            self.c1 = wn(nn.Conv1d(i, o, 3, dilation=d))
            self.c2 = wn(nn.Conv1d(o, o, 3, dilation=d))
            self.down = nn.Conv1d(i, o, 1) if i != o else nn.Identity()

        def forward(self, x):
            h = F.relu(self.c1(F.pad(x, (self.pad, 0))))
            h = F.relu(self.c2(F.pad(h, (self.pad, 0))))
            return F.relu(h + self.down(x))

    net = nn.Sequential(Block(1, 8, 1), Block(8, 8, 2), Block(8, 8, 4), nn.Conv1d(8, 3, 1))
    opt = torch.optim.RMSprop(net.parameters(), lr=3e-3, momentum=0.5, centered=True)
    sched = torch.optim.lr_scheduler.SequentialLR(
        opt, [torch.optim.lr_scheduler.LinearLR(opt, 0.2, 1.0, total_iters=2),
              torch.optim.lr_scheduler.ExponentialLR(opt, 0.8)], milestones=[2])
    huber = nn.HuberLoss(delta=0.5)
    rec = []
    for _step in range(5):
        opt.zero_grad()
        pred = net(x)  # B, 3 quantiles, T
        err = target - pred
        pinball = torch.maximum(qs[None, :, None] * err, (qs[None, :, None] - 1) * err).mean()
        loss = pinball + 0.1 * huber(pred[:, 1:2], target)
        loss.backward()
        opt.step()
        sched.step()
        rec.append((loss.item(), opt.param_groups[0]["lr"]))
    causal = net(torch.cat([x[..., :20], torch.zeros(3, 1, 19)], -1))[..., :20] - pred[..., :20]
    first = net[0].c1
    names = sorted(n for n, _ in first.named_parameters())
    nn.utils.parametrize.remove_parametrizations(first, "weight")
    smooth = F.smooth_l1_loss(pred, target.expand_as(pred), beta=0.3, reduction="none")
    return (rec, causal.abs().max(), names, first.weight, net[3].weight.grad, smooth.sum(),
            pred.grad_fn.name())


PROGRAMS += [tcn_quantiles]


def sngan_hinge(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(3)
    rng = np.random.default_rng(3)
    real = torch.tensor(rng.standard_normal((4, 3, 8, 8)), dtype=torch.float32).tanh()
    sn = nn.utils.spectral_norm
    G = nn.Sequential(nn.Linear(6, 16 * 2 * 2), nn.Unflatten(1, (16, 2, 2)),
                      nn.ConvTranspose2d(16, 8, 4, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                      nn.Conv2d(8, 12, 3, padding=1), nn.PixelShuffle(2), nn.Tanh())
    D = nn.Sequential(sn(nn.Conv2d(3, 8, 3, 2, 1)), nn.LeakyReLU(0.1),
                      sn(nn.Conv2d(8, 16, 3, 2, 1)), nn.LeakyReLU(0.1),
                      nn.Flatten(), sn(nn.Linear(16 * 2 * 2, 1)))
    D2 = nn.Sequential(nn.utils.parametrizations.spectral_norm(nn.Linear(4, 3)))
    og = torch.optim.Adam(G.parameters(), lr=1e-3, betas=(0.0, 0.9))
    od = torch.optim.Adam(D.parameters(), lr=4e-3, betas=(0.0, 0.9))
    rec = []
    for _step in range(3):
        z = torch.randn(4, 6)
        fake = G(z)
        od.zero_grad()
        ld = F.relu(1 - D(real)).mean() + F.relu(1 + D(fake.detach())).mean()
        ld.backward()
        od.step()
        og.zero_grad()
        lg = -D(fake).mean()
        lg.backward()
        og.step()
        rec.append((ld.item(), lg.item()))
    D.eval()
    sigma = torch.linalg.matrix_norm(D[0].weight.flatten(1), ord=2)
    D2out = D2(torch.ones(2, 4))
    u = D[0].weight_u
    keys = sorted(D[0].state_dict())
    return (rec, fake, G[3].running_mean, G[3].running_var, G[3].num_batches_tracked,
            sigma, u, keys, D[5].weight_orig.grad, D2out, D2[0].parametrizations.weight.original)


PROGRAMS += [sngan_hinge]


def anchor_detector(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(4)
    rng = np.random.default_rng(4)
    img = torch.tensor(rng.standard_normal((2, 3, 16, 16)), dtype=torch.float32)
    gt = [torch.tensor([[1.0, 2.0, 9.0, 10.0], [8.0, 8.0, 15.0, 14.0]]),
          torch.tensor([[0.0, 0.0, 6.0, 7.0]])]
    gl = [torch.tensor([1, 2]), torch.tensor([0])]
    stride, sizes = 4, torch.tensor([4.0, 8.0])
    ys, xs = torch.meshgrid(torch.arange(4.0), torch.arange(4.0), indexing="ij")
    ctr = torch.stack([xs, ys], -1).reshape(-1, 1, 2) * stride + stride / 2
    half = sizes.view(1, -1, 1) / 2
    anchors = torch.cat([ctr - half, ctr + half], -1).reshape(-1, 4)  # 32, 4

    def box_iou(a, b):
        area = lambda t: (t[:, 2] - t[:, 0]).clamp(min=0) * (t[:, 3] - t[:, 1]).clamp(min=0)
        lt = torch.max(a[:, None, :2], b[None, :, :2])
        rb = torch.min(a[:, None, 2:], b[None, :, 2:])
        wh = (rb - lt).clamp(min=0)
        inter = wh[..., 0] * wh[..., 1]
        return inter / (area(a)[:, None] + area(b)[None] - inter)

    def encode(a, g):
        aw, ah = a[:, 2] - a[:, 0], a[:, 3] - a[:, 1]
        gw, gh = g[:, 2] - g[:, 0], g[:, 3] - g[:, 1]
        return torch.stack([((g[:, 0] + g[:, 2]) - (a[:, 0] + a[:, 2])) / 2 / aw,
                            ((g[:, 1] + g[:, 3]) - (a[:, 1] + a[:, 3])) / 2 / ah,
                            torch.log(gw / aw), torch.log(gh / ah)], 1)

    def nms(boxes, scores, thr):
        order = scores.argsort(descending=True)
        keep = []
        while order.numel() > 0:
            i = order[0]
            keep.append(i.item())
            if order.numel() == 1:
                break
            iou = box_iou(boxes[i].unsqueeze(0), boxes[order[1:]]).squeeze(0)
            order = order[1:][iou <= thr]
        return torch.tensor(keep, dtype=torch.long)

    backbone = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 8, 3, 2, 1),
                             nn.ReLU())
    cls_head, box_head = nn.Conv2d(8, 2 * 3, 3, padding=1), nn.Conv2d(8, 2 * 4, 3, padding=1)
    nn.init.constant_(cls_head.bias, -math.log((1 - 0.01) / 0.01))
    params = [*backbone.parameters(), *cls_head.parameters(), *box_head.parameters()]
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9, weight_decay=1e-4)
    rec = []
    for _step in range(3):
        f = backbone(img)
        cls = cls_head(f).permute(0, 2, 3, 1).reshape(2, -1, 3)
        reg = box_head(f).permute(0, 2, 3, 1).reshape(2, -1, 4)
        lc = lr = 0
        for b in range(2):
            iou = box_iou(anchors, gt[b])
            best, idx = iou.max(1)
            pos = best >= 0.3
            t = torch.zeros(anchors.shape[0], 3)
            t[pos, gl[b][idx[pos]]] = 1.0
            p = torch.sigmoid(cls[b])
            ce = F.binary_cross_entropy_with_logits(cls[b], t, reduction="none")
            pt = p * t + (1 - p) * (1 - t)
            alpha = 0.25 * t + 0.75 * (1 - t)
            lc = lc + (alpha * (1 - pt) ** 2 * ce).sum() / pos.sum().clamp(min=1)
            if pos.any():
                lr = lr + F.smooth_l1_loss(reg[b][pos], encode(anchors[pos], gt[b][idx[pos]]),
                                           beta=1 / 9)
        loss = lc + lr
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((lc.item(), lr.item()))
    scores, labels = torch.sigmoid(cls[0]).detach().max(1)
    d = reg[0].detach()
    aw, ah = anchors[:, 2] - anchors[:, 0], anchors[:, 3] - anchors[:, 1]
    cx = (anchors[:, 0] + anchors[:, 2]) / 2 + d[:, 0] * aw
    cy = (anchors[:, 1] + anchors[:, 3]) / 2 + d[:, 1] * ah
    w, h = aw * d[:, 2].exp(), ah * d[:, 3].exp()
    boxes = torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], 1).clamp(0, 16)
    keep = nms(boxes, scores, 0.5)
    top = torch.unique(labels[keep], return_counts=True)
    return rec, keep, boxes[keep], top, anchors, cls_head.weight.grad


PROGRAMS += [anchor_detector]


def hamiltonian_sinkhorn(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(5)
    rng = np.random.default_rng(5)
    q = rng.uniform(-1, 1, (32, 1))
    p = rng.uniform(-1, 1, (32, 1))
    state = torch.tensor(np.concatenate([q, p], 1), dtype=torch.float32)
    deriv = torch.tensor(np.concatenate([p, -q], 1), dtype=torch.float32)  # harmonic oscillator
    Hnet = nn.Sequential(nn.Linear(2, 16), nn.Softplus(beta=2.0), nn.Linear(16, 16), nn.Tanh(),
                         nn.Linear(16, 1))
    J = torch.tensor([[0.0, 1.0], [-1.0, 0.0]])

    def field(s):
        s = s.requires_grad_(True) if not s.requires_grad else s
        H = Hnet(s).sum()
        (dH,) = torch.autograd.grad(H, s, create_graph=True)
        return dH @ J.t()

    opt = torch.optim.Adam(Hnet.parameters(), lr=5e-3)
    rec = []
    for _step in range(4):
        opt.zero_grad()
        loss = F.mse_loss(field(state.clone()), deriv)
        loss.backward()
        opt.step()
        rec.append(loss.item())

    def rk4(s, dt, n):
        out = [s]
        for _ in range(n):
            k1 = field(s)
            k2 = field(s + dt / 2 * k1)
            k3 = field(s + dt / 2 * k2)
            k4 = field(s + dt * k3)
            s = s + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            out.append(s)
        return torch.stack(out)

    s0 = state[:4].clone().requires_grad_(True)
    traj = rk4(s0, 0.1, 3)

    def sinkhorn(a, b, eps=0.1, iters=20):
        cost = torch.cdist(a, b) ** 2
        n, m = cost.shape
        log_mu = torch.full((n,), -math.log(n))
        log_nu = torch.full((m,), -math.log(m))
        f, g = torch.zeros(n), torch.zeros(m)
        for _ in range(iters):
            f = -eps * torch.logsumexp((g[None] - cost) / eps + log_nu[None], 1)
            g = -eps * torch.logsumexp((f[:, None] - cost) / eps + log_mu[:, None], 0)
        plan = torch.exp((f[:, None] + g[None] - cost) / eps + log_mu[:, None] + log_nu[None])
        return (plan * cost).sum(), plan

    ot, plan = sinkhorn(traj[-1], state[4:10])
    ot.backward()
    hess = torch.autograd.functional.hessian(lambda s: Hnet(s).sum(), state[:1])
    return rec, traj, ot, plan.sum(0), s0.grad, hess, Hnet[0].weight.grad


PROGRAMS += [hamiltonian_sinkhorn]


def bert_mlm(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(6)
    rng = np.random.default_rng(6)
    V, D, B, S, MASK, PAD = 20, 16, 4, 7, 1, 0
    lengths = [7, 5, 6, 3]
    ids = torch.tensor(rng.integers(2, V, (B, S)))
    pad = torch.arange(S)[None] >= torch.tensor(lengths)[:, None]
    ids = ids.masked_fill(pad, PAD)

    class MLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(V, D, padding_idx=PAD)
            self.pos = nn.Embedding(S, D)
            self.norm = nn.LayerNorm(D, eps=1e-12)
            self.drop = nn.Dropout(0.1)
            self.attn = nn.MultiheadAttention(D, 4, dropout=0.1, batch_first=True)
            self.ff = nn.Sequential(nn.Linear(D, 32), nn.GELU(), nn.Dropout(0.1),
                                    nn.Linear(32, D))
            self.n1, self.n2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.head = nn.Linear(D, V)
            self.head.weight = self.tok.weight  # tied

        def forward(self, x, pad):
            h = self.drop(self.norm(self.tok(x) + self.pos(torch.arange(x.shape[1]))))
            a, w = self.attn(h, h, h, key_padding_mask=pad, need_weights=True,
                             average_attn_weights=False)
            h = self.n1(h + a)
            h = self.n2(h + self.ff(h))
            return self.head(h), w

    model = MLM()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    rec = []
    for _step in range(3):
        probs = torch.full(ids.shape, 0.3).masked_fill(pad, 0.0)
        chosen = torch.bernoulli(probs).bool()
        labels = ids.masked_fill(~chosen, -100)
        replace = torch.bernoulli(torch.full(ids.shape, 0.8)).bool() & chosen
        rand_tok = torch.randint(2, V, ids.shape)
        randomise = torch.bernoulli(torch.full(ids.shape, 0.5)).bool() & chosen & ~replace
        inp = torch.where(replace, torch.full_like(ids, MASK), ids)
        inp = torch.where(randomise, rand_tok, inp)
        model.train()
        logits, w = model(inp, pad)
        loss = F.cross_entropy(logits.view(-1, V), labels.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((loss.item(), chosen.sum().item(), inp))
    model.eval()
    with torch.no_grad():
        logits, w = model(ids, pad)
    mask_f = torch.zeros(B, S).masked_fill(pad, float("-inf"))
    attn_eval = model.attn(model.tok.weight[:S][None], model.tok.weight[:S][None],
                           model.tok.weight[:S][None], key_padding_mask=mask_f[:1])[1]
    tied = model.head.weight is model.tok.weight
    n_params = sum(p.numel() for p in model.parameters())
    bad = _error(lambda: model.attn(torch.zeros(2, 3, 5), torch.zeros(2, 3, 5),
                                    torch.zeros(2, 3, 5)))
    return rec, logits, w, attn_eval, tied, n_params, model.tok.weight.grad, bad


PROGRAMS += [bert_mlm]


def mobilenet_se_resume(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(7)
    rng = np.random.default_rng(7)
    x = torch.tensor(rng.standard_normal((4, 3, 12, 12)), dtype=torch.float32)
    y = torch.tensor(rng.integers(0, 5, 4))

    class SE(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc1, self.fc2 = nn.Conv2d(c, c // 2, 1), nn.Conv2d(c // 2, c, 1)

        def forward(self, x):
            return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(self.pool(x)))))

    def dw_block(i, o, s):
        return nn.Sequential(
            nn.Conv2d(i, i * 2, 1, bias=False), nn.BatchNorm2d(i * 2), nn.Hardswish(),
            nn.Conv2d(i * 2, i * 2, 3, s, 1, groups=i * 2, bias=False),
            nn.BatchNorm2d(i * 2), nn.ReLU6(), SE(i * 2),
            nn.Conv2d(i * 2, o, 1, bias=False), nn.BatchNorm2d(o))

    def make():
        return nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8),
                             nn.Hardswish(), dw_block(8, 8, 1), dw_block(8, 12, 2),
                             nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Dropout(0.2),
                             nn.Linear(12, 5))

    def make_opt(m):
        opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                              weight_decay=4e-5)
        return opt, torch.optim.lr_scheduler.StepLR(opt, 2, gamma=0.5)

    model = make().to(memory_format=torch.channels_last)
    opt, sched = make_opt(model)
    crit = nn.CrossEntropyLoss(label_smoothing=0.1)
    xc = x.to(memory_format=torch.channels_last)
    rec, buf = [], io.BytesIO()
    for step in range(5):
        if step == 3:  # save, rebuild everything and resume from the bytes
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                        "sched": sched.state_dict(), "rng": torch.get_rng_state()}, buf)
            buf.seek(0)
            ck = torch.load(buf, weights_only=True)
            model = make().to(memory_format=torch.channels_last)
            opt, sched = make_opt(model)
            model.load_state_dict(ck["model"])
            opt.load_state_dict(ck["opt"])
            sched.load_state_dict(ck["sched"])
            torch.set_rng_state(ck["rng"])
        model.train()
        out = model(xc)
        loss = crit(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        rec.append((loss.item(), sched.get_last_lr()[0]))
    model.eval()
    ev = model(xc)
    layouts = (out.is_contiguous(), model[0].weight.grad.is_contiguous(
        memory_format=torch.channels_last), ev.shape)
    bad = _error(lambda: model.load_state_dict({"0.weight": torch.zeros(8, 3, 3, 3)}))
    print(model[3][6])
    print(sorted(ck["opt"]["state"][0]), ck["opt"]["param_groups"][0]["nesterov"])
    return rec, ev, layouts, model[1].running_var, model[3][6].fc1.weight.grad, bad


PROGRAMS += [mobilenet_se_resume]


def gradnorm_multitask(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(8)
    rng = np.random.default_rng(8)
    N = 16
    x = torch.tensor(rng.standard_normal((N, 6)), dtype=torch.float32)
    y_lab = torch.tensor((rng.random((N, 4)) > 0.5).astype(np.float32))
    y_cnt = torch.tensor(rng.poisson(2.0, (N, 1)).astype(np.float32))
    y_reg = torch.tensor(rng.standard_normal((N, 1)), dtype=torch.float32)
    shared = nn.Sequential(nn.Linear(6, 16), nn.ELU(alpha=0.5), nn.Linear(16, 16), nn.SELU())
    heads = nn.ModuleList([nn.Linear(16, 4), nn.Linear(16, 1), nn.Linear(16, 2)])
    weights = nn.Parameter(torch.ones(3))
    opt = torch.optim.Adam([*shared.parameters(), *heads.parameters()], lr=3e-3)
    opt_w = torch.optim.Adam([weights], lr=0.02)
    crits = [nn.MultiLabelSoftMarginLoss(), nn.PoissonNLLLoss(log_input=True, full=True),
             nn.GaussianNLLLoss(eps=1e-4)]
    last = shared[2].weight
    rec, initial = [], None
    for _step in range(4):
        h = shared(x)
        o = [hd(h) for hd in heads]
        mean, var = o[2][:, :1], F.softplus(o[2][:, 1:])
        losses = torch.stack([crits[0](o[0], y_lab), crits[1](o[1], y_cnt),
                              crits[2](mean, y_reg, var)])
        if initial is None:
            initial = losses.detach()
        total = (weights * losses).sum()
        opt.zero_grad()
        opt_w.zero_grad()
        total.backward(retain_graph=True)
        norms = torch.stack([torch.autograd.grad(weights[i] * losses[i], last,
                                                 retain_graph=True, create_graph=True)[0].norm()
                             for i in range(3)])
        ratio = losses.detach() / initial
        r = ratio / ratio.mean()
        target = (norms.mean() * r ** 1.5).detach()
        gl = (norms - target).abs().sum()
        weights.grad = torch.autograd.grad(gl, weights)[0]
        opt.step()
        opt_w.step()
        with torch.no_grad():
            weights.mul_(3 / weights.sum())
        rec.append((losses.tolist(), norms.tolist(), weights.tolist()))
    ml = nn.MultiLabelMarginLoss()(o[0], torch.tensor([[0, 2, -1, 1]] * N))
    return rec, ml, shared[0].weight.grad, heads[2].bias.grad, o[2].grad_fn.name()


PROGRAMS += [gradnorm_multitask]


def convlstm_video(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(9)
    rng = np.random.default_rng(9)
    T, B, C, H = 5, 2, 1, 8
    frames = np.zeros((B, T, C, H, H), np.float32)
    for b in range(B):
        for t in range(T):
            r = 1 + t + b
            frames[b, t, 0, r:r + 3, r:r + 2] = 1.0
    video = torch.tensor(frames + 0.05 * rng.standard_normal(frames.shape).astype(np.float32))

    class Cell(nn.Module):
        def __init__(self, i, h):
            super().__init__()
            self.h = h
            self.conv = nn.Conv2d(i + h, 4 * h, 3, padding=1)

        def forward(self, x, state):
            hh, cc = state
            i, f, o, g = torch.chunk(self.conv(torch.cat([x, hh], 1)), 4, 1)
            cc = torch.sigmoid(f) * cc + torch.sigmoid(i) * torch.tanh(g)
            hh = torch.sigmoid(o) * torch.tanh(cc)
            return hh, cc

    cell = Cell(C, 6)
    out_conv = nn.Conv2d(6, C, 1)
    enc3d = nn.Conv3d(C, 2, (3, 3, 3), padding=(0, 1, 1))
    params = [*cell.parameters(), *out_conv.parameters(), *enc3d.parameters()]
    opt = torch.optim.Adamax(params, lr=0.01)
    sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2)
    rec = []
    for step in range(4):
        state = (torch.zeros(B, 6, H, H), torch.zeros(B, 6, H, H))
        inp = video[:, 0]
        preds = []
        for t in range(1, T):
            state = cell(inp, state)
            pred = torch.sigmoid(out_conv(state[0]))
            preds.append(pred)
            use_truth = torch.rand(()) < 0.5
            inp = video[:, t] if use_truth else pred.detach()
        preds = torch.stack(preds, 1)
        feat = enc3d(video.transpose(1, 2))
        up = F.interpolate(preds.flatten(0, 1), scale_factor=2, mode="bilinear",
                           align_corners=False)
        down = F.avg_pool2d(up, 2)
        loss = F.binary_cross_entropy(preds, video[:, 1:].clamp(0, 1)) + feat.pow(2).mean()
        loss = loss + 0.1 * F.l1_loss(down, preds.flatten(0, 1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step(step + 0.5)
        rec.append((loss.item(), sched.get_last_lr()[0]))
    near = F.interpolate(preds[:, -1], size=(5, 5), mode="nearest-exact")
    area = F.interpolate(preds[:, -1], size=(3, 3), mode="area")
    bic = F.interpolate(preds[:, -1], scale_factor=1.5, mode="bicubic", align_corners=True)
    return rec, preds, feat.shape, enc3d.weight.grad, near, area, bic, cell.conv.bias.grad


PROGRAMS += [convlstm_video]


def fourier_neural_operator(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(10)
    rng = np.random.default_rng(10)
    B, N, W, M = 4, 16, 6, 5
    a = rng.standard_normal((B, N, N)).astype(np.float32)
    u = np.real(np.fft.ifft2(np.fft.fft2(a) * np.exp(-np.add.outer(np.arange(N), np.arange(N))
                                                      / 4)))
    a = torch.tensor(a)[:, None]
    u = torch.tensor(u.astype(np.float32))[:, None]

    class Spectral(nn.Module):
        def __init__(self):
            super().__init__()
            scale = 1 / (W * W)
            self.w = nn.Parameter(scale * torch.rand(W, W, M, M, dtype=torch.cfloat))

        def forward(self, x):
            xf = torch.fft.rfft2(x, norm="ortho")
            out = torch.zeros(x.shape[0], W, N, N // 2 + 1, dtype=torch.cfloat)
            out[:, :, :M, :M] = torch.einsum("bixy,ioxy->boxy", xf[:, :, :M, :M], self.w)
            return torch.fft.irfft2(out, s=(N, N), norm="ortho")

    class FNO(nn.Module):
        def __init__(self):
            super().__init__()
            self.lift = nn.Conv2d(3, W, 1)
            self.spec = nn.ModuleList([Spectral(), Spectral()])
            self.skip = nn.ModuleList([nn.Conv2d(W, W, 1), nn.Conv2d(W, W, 1)])
            self.proj = nn.Conv2d(W, 1, 1)

        def forward(self, x):
            g = torch.linspace(0, 1, N)
            gx, gy = torch.meshgrid(g, g, indexing="xy")
            grid = torch.stack([gx, gy]).expand(x.shape[0], -1, -1, -1)
            h = self.lift(torch.cat([x, grid], 1))
            for s, k in zip(self.spec, self.skip):
                h = F.gelu(s(h) + k(h))
            return self.proj(h)

    model = FNO()
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    rec = []
    for _step in range(3):
        pred = model(a)
        loss = (torch.linalg.vector_norm(pred - u, dim=(-2, -1))
                / torch.linalg.vector_norm(u, dim=(-2, -1))).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    w = model.spec[0].w
    spec = torch.fft.fftshift(torch.fft.fft2(u[0, 0]).abs())
    hf = torch.fft.hfft(torch.fft.ihfft(u[0, 0, 0]), n=N)
    return (rec, pred, w.grad, w.dtype, w.grad.dtype, torch.view_as_real(w)[0, 0, 0],
            spec, hf, torch.fft.rfftfreq(N, d=0.5), model.lift.weight.grad)


PROGRAMS += [fourier_neural_operator]


def checkpointed_gumbel(torch):
    nn, F = torch.nn, torch.nn.functional
    # (the library's own: an import statement would name the real torch module)
    checkpoint = torch.utils.checkpoint.checkpoint
    checkpoint_sequential = torch.utils.checkpoint.checkpoint_sequential
    torch.manual_seed(11)
    rng = np.random.default_rng(11)
    x = torch.tensor(rng.standard_normal((6, 10)), dtype=torch.float32)
    blocks = nn.ModuleList([nn.Sequential(nn.Linear(10, 10), nn.Dropout(0.2), nn.Mish())
                            for _ in range(4)])
    bag = nn.EmbeddingBag(12, 10, mode="sum")
    bag_max = nn.EmbeddingBag(12, 10, mode="max", include_last_offset=True)
    codebook = nn.Linear(10, 5)
    opt = torch.optim.NAdam([*blocks.parameters(), *bag.parameters(), *bag_max.parameters(),
                             *codebook.parameters()], lr=0.01, decoupled_weight_decay=True,
                            weight_decay=0.01)
    ids = torch.tensor(rng.integers(0, 12, 14))
    offsets = torch.tensor([0, 2, 5, 5, 9, 11])
    psw = torch.tensor(rng.random(14), dtype=torch.float32)
    rec = []
    for _step in range(3):
        h = x + bag(ids, offsets, per_sample_weights=psw)
        h = h + bag_max(ids, torch.tensor([0, 2, 5, 6, 9, 11, 14]))
        for i, blk in enumerate(blocks):
            h = checkpoint(blk, h, use_reentrant=(i % 2 == 0))
        hard = F.gumbel_softmax(codebook(h), tau=0.5, hard=True)
        soft = F.gumbel_softmax(codebook(h), tau=2.0)
        loss = (hard * torch.arange(5.0)).sum() + soft.pow(2).sum() + h.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((loss.item(), hard.argmax(1).tolist()))
    seq = nn.Sequential(*[nn.Linear(10, 10) for _ in range(4)])
    xs = x.clone().requires_grad_(True)
    out = checkpoint_sequential(seq, 2, xs, use_reentrant=False)
    out.sum().backward()
    dist = torch.distributions
    relaxed = dist.RelaxedOneHotCategorical(torch.tensor(0.7), logits=codebook(h[:2]))
    sample = relaxed.rsample()
    lp = relaxed.log_prob(sample)
    return (rec, bag.weight.grad, bag_max.weight.grad, xs.grad, blocks[1][0].weight.grad,
            sample, lp)


PROGRAMS += [checkpointed_gumbel]


def linalg_geometry(torch):
    nn = torch.nn
    torch.manual_seed(12)
    rng = np.random.default_rng(12)
    pts = torch.tensor(rng.standard_normal((20, 3)), dtype=torch.float32)
    R_true = torch.tensor([[math.cos(0.7), -math.sin(0.7), 0], [math.sin(0.7), math.cos(0.7), 0],
                           [0, 0, 1.0]])
    target = pts @ R_true.T + torch.tensor([0.5, -0.2, 0.1])
    # rotation parametrised by the matrix exponential of a skew matrix, trained by Adam
    omega = nn.Parameter(torch.zeros(3))
    trans = nn.Parameter(torch.zeros(3))
    opt = torch.optim.Adam([omega, trans], lr=0.1)
    rec = []
    for _step in range(6):
        K = torch.zeros(3, 3)
        K = K.index_put((torch.tensor([0, 0, 1]), torch.tensor([1, 2, 2])), -omega)
        K = K - K.T
        R = torch.linalg.matrix_exp(K)
        loss = (pts @ R.T + trans - target).pow(2).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    # closed-form Procrustes with SVD, PCA with eigh, log-det and least squares
    pc, tc = pts - pts.mean(0), target - target.mean(0)
    U, S, Vh = torch.linalg.svd(pc.T @ tc)
    d = torch.sign(torch.linalg.det(Vh.T @ U.T))
    R_hat = Vh.T @ torch.diag(torch.stack([torch.tensor(1.0), torch.tensor(1.0), d])) @ U.T
    cov = (pc.T @ pc / 19).requires_grad_(True)
    evals, evecs = torch.linalg.eigh(cov)
    sign, logdet = torch.linalg.slogdet(cov)
    (evals.sum() + logdet + evecs[:, -1].abs().sum()).backward()
    A = torch.cat([pts, torch.ones(20, 1)], 1)
    sol = torch.linalg.lstsq(A, target).solution
    Q, Rq = torch.linalg.qr(A)
    pinv = torch.linalg.pinv(A)
    cond = torch.linalg.cond(A[:4, :4])
    bad = _error(lambda: torch.linalg.cholesky(-torch.eye(3)))
    bad2 = _error(lambda: torch.linalg.solve(torch.zeros(3, 3), torch.ones(3)))
    return (rec, omega, trans, R_hat, evals, cov.grad, sign, sol, Rq.abs(), pinv, cond,
            S, bad, bad2)


PROGRAMS += [linalg_geometry]


def _half_classifier(torch, dt):
    """A classifier and a segmentation head in `dt` (no autocast), their data."""
    nn = torch.nn
    torch.manual_seed(13)
    rng = np.random.default_rng(13)
    x = torch.tensor(rng.standard_normal((40, 6)), dtype=torch.float32).to(dt)
    y = torch.tensor(rng.integers(0, 4, 40))
    y[::7] = -100  # padding positions, ignored
    img = torch.tensor(rng.standard_normal((2, 3, 6, 6)), dtype=torch.float32).to(dt)
    seg = torch.tensor(rng.integers(0, 3, (2, 6, 6)))
    seg[:, 0] = 255
    m = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4)).to(dt)
    conv = nn.Conv2d(3, 3, 3, padding=1).to(dt)
    return m, conv, x, y, img, seg


def _half_losses(torch, m, conv, x, y, img, seg):
    F = torch.nn.functional
    logits = m(x)
    lp = F.log_softmax(logits, -1)
    cw = torch.tensor([1.0, 2.0, 0.5, 1.5], dtype=logits.dtype)
    return lp, [F.cross_entropy(logits, y, weight=cw), F.nll_loss(lp, y, reduction="sum"),
                F.cross_entropy(conv(img), seg, ignore_index=255),
                F.cross_entropy(logits, y.clamp(min=0), label_smoothing=0.2),
                F.nll_loss(lp, y, weight=cw, reduction="sum")]


def half_precision_losses(torch):
    """One forward and backward in bfloat16 and float16: PyTorch's half-precision kernels
    round inside log_softmax, the losses' sums and layer norm's backward, bit for bit."""
    nn = torch.nn
    rec = []
    for dt in (torch.bfloat16, torch.float16):
        m, conv, x, y, img, seg = _half_classifier(torch, dt)
        lp, losses = _half_losses(torch, m, conv, x, y, img, seg)
        (losses[0] + 0.01 * losses[1] + losses[2] + losses[3]).backward()
        ln = nn.LayerNorm(16, dtype=dt)
        mixed = nn.LayerNorm(16)  # float32 parameters on a half input
        h = m[1](m[0](x)).detach().requires_grad_(True)
        (ln(h) * torch.arange(16.0, dtype=dt)).sum().backward()
        (mixed(h) * torch.arange(16.0)).sum().backward()
        # (h.grad is left out: PyTorch's forward takes a row's mean by vectorised Welford
        # steps, which round the odd mean an ulp of bfloat16 apart from a float32 mean's.)
        # (float16 convolutions' weight gradients accumulate in another order than
        # PyTorch's: a few ulps apart, so only bfloat16's is recorded.)
        rec.append((lp, losses, [p.grad for p in m.parameters()],
                    conv.weight.grad if dt is torch.bfloat16 else None,
                    ln.weight.grad, ln.bias.grad, mixed.weight.grad, mixed.bias.grad))
        # a detector's and a regressor's losses on half-precision scores
        F = torch.nn.functional
        z = torch.linspace(-3, 3, 60).reshape(20, 3).to(dt).requires_grad_(True)
        target = (torch.arange(60).reshape(20, 3) % 3 == 0).to(dt)
        terms = [F.binary_cross_entropy_with_logits(z, target, pos_weight=torch.tensor(
                     [1.0, 2.0, 3.0], dtype=dt)),
                 F.binary_cross_entropy(torch.sigmoid(z), target, weight=target + 0.5),
                 F.smooth_l1_loss(z, target, beta=0.5), z.var(0).sum(),
                 torch.logsumexp(z * 2, 1).sum() / 10]
        grads = [torch.autograd.grad(term, z, retain_graph=True)[0] for term in terms]
        rec.append((terms, grads, torch.logsumexp(z, 0)))
    return rec


PROGRAMS += [half_precision_losses]


def half_precision_training(torch):
    rec = []
    for dt in (torch.bfloat16, torch.float16):
        m, conv, x, y, img, seg = _half_classifier(torch, dt)
        opt = torch.optim.SGD([*m.parameters(), *conv.parameters()], lr=0.1, momentum=0.9,
                              nesterov=True, weight_decay=1e-3)
        for _step in range(3):
            lp, losses = _half_losses(torch, m, conv, x, y, img, seg)
            loss = losses[0] + 0.01 * losses[1] + losses[2] + losses[3]
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.append(losses)
        rec.append((lp, m[3].weight.grad, conv.bias.grad, m[0].weight,
                    opt.state[m[0].weight]["momentum_buffer"]))
    return rec


PROGRAMS += [half_precision_training]


def quantization_aware_training(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(15)
    rng = np.random.default_rng(15)
    x = torch.tensor(rng.standard_normal((32, 8)), dtype=torch.float32)
    y = torch.tensor(rng.integers(0, 3, 32))

    class QLinear(nn.Linear):
        """Per-channel int8 weights, per-tensor uint8 activations with an EMA min/max
        observer, both through fake quantization (straight-through gradients)."""

        def __init__(self, i, o):
            super().__init__(i, o)
            self.register_buffer("act_range", torch.tensor([0.0, 0.0]))
            self.register_buffer("seen", torch.tensor(0))

        def forward(self, a):
            if self.training:
                lo, hi = a.detach().min(), a.detach().max()
                if self.seen == 0:
                    self.act_range.copy_(torch.stack([lo, hi]))
                else:
                    self.act_range.lerp_(torch.stack([lo, hi]), 0.1)
                self.seen += 1
            lo, hi = self.act_range[0].clamp(max=0), self.act_range[1].clamp(min=0)
            scale = ((hi - lo) / 255).clamp(min=1e-8)
            zp = (-lo / scale).round().clamp(0, 255).to(torch.int32)
            a = torch.fake_quantize_per_tensor_affine(a, scale, zp, 0, 255)
            w_scale = self.weight.detach().abs().amax(1).clamp(min=1e-8) / 127
            w = torch.fake_quantize_per_channel_affine(
                self.weight, w_scale, torch.zeros(self.out_features, dtype=torch.int32), 0,
                -127, 127)
            return F.linear(a, w, self.bias)

    model = nn.Sequential(QLinear(8, 16), nn.ReLU(), QLinear(16, 3))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rec = []
    for _step in range(4):
        out = model(x)
        loss = F.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    model.eval()
    ev = model(x)
    q = torch.fake_quantize_per_tensor_affine(x, 0.05, 10, -128, 127)
    node = q.grad_fn
    xs = x.clone().requires_grad_(True)
    torch.fake_quantize_per_tensor_affine(xs, 0.05, 10, -128, 127).sum().backward()
    bad = [_error(lambda: torch.fake_quantize_per_tensor_affine(x, 0.1, 300, -128, 127)),
           _error(lambda: torch.fake_quantize_per_tensor_affine(x, 0.1, 0, 5, 1)),
           _error(lambda: torch.fake_quantize_per_channel_affine(
               x, torch.ones(3), torch.zeros(3, dtype=torch.int32), 0, 0, 255)),
           _error(lambda: torch.fake_quantize_per_channel_affine(
               x, torch.ones(32), torch.zeros(32, dtype=torch.long), 0, 0, 255))]
    return (rec, ev, model[0].act_range, model[2].seen, model[0].weight.grad, q,
            node is None, xs.grad, bad)


PROGRAMS += [quantization_aware_training]


_TOLERANCES = {}


@pytest.mark.parametrize("prog", PROGRAMS, ids=[p.__name__ for p in PROGRAMS])
def test_program(prog):
    _check(prog, *_TOLERANCES.get(prog.__name__, (1e-4, 1e-5)))
