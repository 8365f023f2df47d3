"""Batch 5 of whole programs (seq2seq with GRU attention, U-Net with Dice loss, CTC with
Conv1d, a recommender with sparse embeddings and SparseAdam, PointNet with a CLIP-style loss,
flows and mixtures with torch.distributions, GP regression with Cholesky solves, TransE with
capsule routing, a tabular model with OneCycleLR/ReduceLROnPlateau, checkpoints saved and
loaded mid-training with a custom DataLoader, FX rewriting, torch.func ensembling, losses,
module APIs, random layers, initialisers, serialization and CPU autocast with GradScaler).

Each program takes the library as its argument (`torch` or fusegrad), seeds it and builds its
data with NumPy, and returns what it recorded: losses per step, outputs, gradients, parameters,
reprs. The test runs it with both libraries and compares values (~1e-4 relative), dtypes,
shapes, grad_fn names, printed text and raised errors."""

import io
import math
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from program_support import check_program, run_program  # noqa: E402

import fusegrad as fg  # noqa: E402


def _check(prog, rtol=1e-4, atol=1e-5):
    check_program(prog, torch, fg, rtol, atol)

def seq2seq_gru_attention(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    V, H, S, T, B = 11, 16, 6, 5, 4
    src = torch.tensor(rng.integers(1, V, (B, S)))
    tgt = torch.tensor(rng.integers(1, V, (B, T)))

    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, H, padding_idx=0)
            self.rnn = nn.GRU(H, H, batch_first=True, bidirectional=True)
            self.proj = nn.Linear(2 * H, H)

        def forward(self, x):
            out, h = self.rnn(self.emb(x))
            return self.proj(out), torch.tanh(self.proj(torch.cat([h[0], h[1]], -1)))

    class Dec(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, H)
            self.cell = nn.GRUCell(2 * H, H)
            self.attn = nn.Linear(H, H, bias=False)
            self.out = nn.Linear(2 * H, V)

        def forward(self, tok, h, enc):
            scores = torch.bmm(enc, self.attn(h).unsqueeze(2)).squeeze(2)
            a = F.softmax(scores, dim=1)
            ctx = torch.bmm(a.unsqueeze(1), enc).squeeze(1)
            h = self.cell(torch.cat([self.emb(tok), ctx], 1), h)
            return self.out(torch.cat([h, ctx], 1)), h, a

    enc, dec = Enc(), Dec()
    opt = torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()), lr=1e-2)
    crit = nn.CrossEntropyLoss(ignore_index=0, label_smoothing=0.1)
    losses = []
    tf = [True, False, True]
    for step in range(3):
        opt.zero_grad()
        e, h = enc(src)
        tok = torch.zeros(B, dtype=torch.long)
        loss = 0
        for t in range(T):
            logits, h, a = dec(tok, h, e)
            loss = loss + crit(logits, tgt[:, t])
            tok = tgt[:, t] if tf[step] else logits.argmax(1).detach()
        loss = loss / T
        loss.backward()
        gn = nn.utils.clip_grad_norm_(list(enc.parameters()) + list(dec.parameters()), 1.0)
        opt.step()
        losses.append(loss.item())
        losses.append(gn.item())
    return losses, a, logits, [p.sum() for p in enc.parameters()], enc.rnn.weight_hh_l0_reverse.grad


def unet_dice(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(1)
    rng = np.random.default_rng(1)
    x = torch.tensor(rng.standard_normal((2, 1, 16, 16)), dtype=torch.float32)
    y = torch.tensor((rng.random((2, 16, 16)) > 0.6).astype(np.int64))

    def block(i, o):
        return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.GroupNorm(2, o),
                             nn.ReLU(inplace=True))

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1 = block(1, 4)
            self.d2 = block(4, 8)
            self.pool = nn.MaxPool2d(2)
            self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
            self.u1 = block(8, 4)
            self.head = nn.Conv2d(4, 2, 1)

        def forward(self, x):
            a = self.d1(x)
            b = self.d2(self.pool(a))
            u = self.up(b)
            return self.head(self.u1(torch.cat([u, a], 1)))

    def dice_loss(logits, y, eps=1.0):
        p = logits.softmax(1)
        oh = F.one_hot(y, 2).permute(0, 3, 1, 2).float()
        inter = (p * oh).sum((2, 3))
        den = p.sum((2, 3)) + oh.sum((2, 3))
        return 1 - ((2 * inter + eps) / (den + eps)).mean()

    net = UNet()
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    out = []
    for _ in range(3):
        opt.zero_grad()
        lg = net(x)
        loss = dice_loss(lg, y) + F.cross_entropy(lg, y)
        loss.backward()
        opt.step()
        out.append(loss.item())
    iou = ((lg.argmax(1) == 1) & (y == 1)).sum() / ((lg.argmax(1) == 1) | (y == 1)).sum()
    return out, lg, iou, net.up.weight.grad, net.up.weight.sum(), print(net)


def ctc_conv1d(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(2)
    rng = np.random.default_rng(2)
    B, C, L, K = 3, 5, 20, 6
    feats = torch.tensor(rng.standard_normal((B, C, L)), dtype=torch.float32)
    tl = [4, 3, 5]
    targets = torch.tensor(rng.integers(1, K, sum(tl)))
    net = nn.Sequential(nn.Conv1d(C, 8, 3, padding=1, bias=False), nn.BatchNorm1d(8), nn.GELU(),
                        nn.Conv1d(8, 8, 5, padding=2, dilation=1, groups=2), nn.ReLU(),
                        nn.Conv1d(8, K, 1))
    ctc = nn.CTCLoss(blank=0, zero_infinity=True)
    opt = torch.optim.AdamW(net.parameters(), lr=3e-3, weight_decay=0.01)
    in_len = torch.tensor([20, 18, 15])
    tgt_len = torch.tensor(tl)
    res = []
    for _ in range(3):
        opt.zero_grad()
        lp = net(feats).permute(2, 0, 1).log_softmax(2)
        loss = ctc(lp, targets, in_len, tgt_len)
        loss.backward()
        opt.step()
        res.append(loss.item())
    l2 = F.ctc_loss(lp, targets.view(-1), in_len, tgt_len, reduction="none")
    greedy = lp.argmax(2).T
    return res, l2, greedy, net[0].weight.grad, net[1].running_mean, net[1].running_var


def recommender_sparse(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(3)
    rng = np.random.default_rng(3)
    NU, NI, D = 20, 30, 8
    users = torch.tensor(rng.integers(0, NU, 16))
    items = torch.tensor(rng.integers(0, NI, 40))
    offsets = torch.tensor([0, 3, 5, 9, 10, 14, 18, 20, 25, 26, 28, 30, 33, 35, 37, 39])
    labels = torch.tensor((rng.random(16) > 0.7).astype(np.float32))

    class Rec(nn.Module):
        def __init__(self):
            super().__init__()
            self.u = nn.Embedding(NU, D, sparse=True)
            self.i = nn.EmbeddingBag(NI, D, mode="mean", sparse=True)
            self.mlp = nn.Sequential(nn.Linear(2 * D, 8), nn.ReLU(), nn.Linear(8, 1))

        def forward(self, u, it, off):
            z = torch.cat([self.u(u), self.i(it, off)], 1)
            return self.mlp(z).squeeze(1) + (self.u(u) * self.i(it, off)).sum(1)

    m = Rec()
    sparse = [m.u.weight, m.i.weight]
    opt1 = torch.optim.SparseAdam(sparse, lr=0.05)
    opt2 = torch.optim.Adam(m.mlp.parameters(), lr=0.01)
    crit = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([2.5]))
    res = []
    for _ in range(3):
        opt1.zero_grad()
        opt2.zero_grad()
        logit = m(users, items, offsets)
        loss = crit(logit, labels)
        loss.backward()
        opt1.step()
        opt2.step()
        res.append(loss.item())
    g = m.u.weight.grad
    res.append(g.is_sparse)
    res.append(g.coalesce().indices().shape[1])
    eb = F.embedding_bag(items, m.i.weight, offsets, mode="sum",
                         per_sample_weights=torch.ones(40) * 0.5)
    eb_max = F.embedding_bag(items, m.i.weight, offsets, mode="max")
    return res, g.to_dense(), m.u.weight, m.i.weight, eb, eb_max, torch.sigmoid(logit)


def pointnet_clip(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(4)
    rng = np.random.default_rng(4)
    pts = torch.tensor(rng.standard_normal((6, 3, 32)), dtype=torch.float32)
    txt = torch.tensor(rng.integers(0, 50, (6, 7)))

    class PointNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv1d(3, 16, 1)
            self.c2 = nn.Conv1d(16, 32, 1)
            self.bn = nn.BatchNorm1d(16)
            self.fc = nn.Linear(32, 16)

        def forward(self, x):
            h = F.relu(self.bn(self.c1(x)))
            h = self.c2(h)
            g, idx = torch.max(h, 2)
            return self.fc(g), idx

    class Text(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(50, 16)
            self.ln = nn.LayerNorm(16)
            self.fc = nn.Linear(16, 16)

        def forward(self, t):
            return self.fc(self.ln(self.emb(t).mean(1)))

    pn, tx = PointNet(), Text()
    logit_scale = nn.Parameter(torch.ones([]) * math.log(1 / 0.07))
    params = list(pn.parameters()) + list(tx.parameters()) + [logit_scale]
    opt = torch.optim.Adam(params, lr=1e-3)
    res = []
    for _ in range(3):
        opt.zero_grad()
        a, idx = pn(pts)
        b = tx(txt)
        a = a / a.norm(dim=-1, keepdim=True)
        b = F.normalize(b, dim=-1)
        logits = logit_scale.exp() * a @ b.t()
        lab = torch.arange(6)
        loss = (F.cross_entropy(logits, lab) + F.cross_entropy(logits.t(), lab)) / 2
        loss.backward()
        opt.step()
        with torch.no_grad():
            logit_scale.clamp_(0, math.log(100))
        res.append(loss.item())
    return res, logit_scale, logit_scale.grad, idx, logits, pn.c1.weight.grad


def flow_distributions(torch):
    nn = torch.nn
    D = torch.distributions
    torch.manual_seed(5)
    rng = np.random.default_rng(5)
    x = torch.tensor(rng.standard_normal((64, 2)) * [1.5, 0.5] + [1, -1], dtype=torch.float32)
    loc = nn.Parameter(torch.zeros(2))
    log_scale = nn.Parameter(torch.zeros(2))
    opt = torch.optim.Adam([loc, log_scale], lr=0.1)
    res = []
    for _ in range(4):
        opt.zero_grad()
        base = D.Independent(D.Normal(torch.zeros(2), torch.ones(2)), 1)
        flow = D.TransformedDistribution(base, [D.AffineTransform(loc, log_scale.exp()),
                                                D.transforms.TanhTransform().inv.inv])
        y = torch.tanh(x * 0.3)
        nll = -flow.log_prob(y).mean()
        nll.backward()
        opt.step()
        res.append(nll.item())
    torch.manual_seed(7)
    s = flow.rsample((5,))
    L = torch.tensor([[1.0, 0.0], [0.5, 0.8]])
    mvn = D.MultivariateNormal(loc.detach(), scale_tril=L)
    lp = mvn.log_prob(x[:5])
    ent = mvn.entropy()
    kl = D.kl_divergence(mvn, D.MultivariateNormal(torch.zeros(2), torch.eye(2)))
    torch.manual_seed(8)
    ms = mvn.rsample((3,))
    lnd = D.LogNormal(0.0, 1.0)
    bern = D.Bernoulli(logits=torch.tensor([0.2, -1.0]))
    return (res, s, lp, ent, kl, ms, mvn.covariance_matrix, lnd.mean, bern.entropy(),
            flow.event_shape, flow.batch_shape, repr(mvn), repr(base), loc.grad, log_scale.grad)


def gp_regression(torch):
    nn = torch.nn
    torch.manual_seed(6)
    rng = np.random.default_rng(6)
    X = torch.tensor(rng.uniform(-3, 3, (20, 1)), dtype=torch.float64)
    y = torch.sin(X).squeeze(1) + 0.1 * torch.tensor(rng.standard_normal(20))
    Xs = torch.linspace(-3, 3, 7, dtype=torch.float64).unsqueeze(1)
    log_ls = nn.Parameter(torch.tensor(0.0, dtype=torch.float64))
    log_sf = nn.Parameter(torch.tensor(0.0, dtype=torch.float64))
    log_sn = nn.Parameter(torch.tensor(-2.0, dtype=torch.float64))

    def k(a, b):
        d = torch.cdist(a, b).pow(2)
        return log_sf.exp() ** 2 * torch.exp(-0.5 * d / log_ls.exp() ** 2)

    opt = torch.optim.LBFGS([log_ls, log_sf, log_sn], lr=0.5, max_iter=5,
                            line_search_fn="strong_wolfe")
    hist = []

    def closure():
        opt.zero_grad()
        K = k(X, X) + (log_sn.exp() ** 2 + 1e-6) * torch.eye(20, dtype=torch.float64)
        L = torch.linalg.cholesky(K)
        alpha = torch.cholesky_solve(y.unsqueeze(1), L)
        nlml = 0.5 * (y.unsqueeze(0) @ alpha).squeeze() + L.diagonal().log().sum() \
            + 10 * math.log(2 * math.pi)
        nlml.backward()
        hist.append(nlml.item())
        return nlml

    for _ in range(2):
        opt.step(closure)
    with torch.no_grad():
        K = k(X, X) + (log_sn.exp() ** 2 + 1e-6) * torch.eye(20, dtype=torch.float64)
        L, info = torch.linalg.cholesky_ex(K)
        Ks = k(Xs, X)
        mu = Ks @ torch.cholesky_solve(y.unsqueeze(1), L)
        v = torch.linalg.solve_triangular(L, Ks.T, upper=False)
        var = k(Xs, Xs).diagonal() - (v * v).sum(0)
    return hist, mu, var, info, log_ls, log_sf, log_sn


def mdn(torch):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    torch.manual_seed(7)
    rng = np.random.default_rng(7)
    x = torch.tensor(rng.uniform(-1, 1, (50, 1)), dtype=torch.float32)
    y = torch.sin(3 * x) + 0.1 * torch.tensor(rng.standard_normal((50, 1)), dtype=torch.float32)
    M = 3
    net = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 3 * M))
    opt = torch.optim.RMSprop(net.parameters(), lr=1e-2, alpha=0.9, centered=True)
    res = []
    for _ in range(4):
        opt.zero_grad()
        pi_l, mu, ls = net(x).chunk(3, dim=1)
        log_pi = F.log_softmax(pi_l, 1)
        comp = -0.5 * ((y - mu) / ls.exp()) ** 2 - ls - 0.5 * math.log(2 * math.pi)
        nll = -torch.logsumexp(log_pi + comp, dim=1).mean()
        mix = D.MixtureSameFamily(D.Categorical(logits=pi_l), D.Normal(mu, ls.exp()))
        nll2 = -mix.log_prob(y.squeeze(1)).mean()
        (nll + 0 * nll2).backward()
        opt.step()
        res.append((nll.item(), nll2.item()))
    torch.manual_seed(9)
    samp = mix.sample()
    return res, samp.shape, mix.mean, mix.variance, net[2].bias.grad


def transe_capsules(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(8)
    rng = np.random.default_rng(8)
    NE, NR, D = 15, 4, 6
    h = torch.tensor(rng.integers(0, NE, 10))
    r = torch.tensor(rng.integers(0, NR, 10))
    t = torch.tensor(rng.integers(0, NE, 10))
    ent = nn.Embedding(NE, D, max_norm=1.0)
    rel = nn.Embedding(NR, D)
    nn.init.xavier_uniform_(rel.weight)
    crit = nn.MarginRankingLoss(margin=1.0)
    opt = torch.optim.Adagrad(list(ent.parameters()) + list(rel.parameters()), lr=0.1)
    res = []
    for step in range(3):
        torch.manual_seed(100 + step)
        tc = torch.randint(0, NE, (10,))
        opt.zero_grad()
        pos = (ent(h) + rel(r) - ent(t)).norm(p=1, dim=1)
        neg = (ent(h) + rel(r) - ent(tc)).norm(p=1, dim=1)
        loss = crit(neg, pos, torch.ones(10))
        loss.backward()
        opt.step()
        res.append(loss.item())

    # dynamic routing between capsules
    def squash(s, dim=-1):
        n2 = (s ** 2).sum(dim, keepdim=True)
        return n2 / (1 + n2) * s / torch.sqrt(n2 + 1e-8)

    W = nn.Parameter(torch.randn(1, 8, 4, 5, 3) * 0.1)
    u = torch.tensor(rng.standard_normal((2, 8, 1, 3, 1)), dtype=torch.float32)
    u_hat = (W @ u).squeeze(-1)  # (2, 8, 4, 5)
    b = torch.zeros(2, 8, 4)
    for it in range(3):
        c = F.softmax(b, dim=2)
        s = (c.unsqueeze(-1) * u_hat).sum(1)
        v = squash(s)
        if it < 2:
            b = b + (u_hat * v.unsqueeze(1)).sum(-1)
    lengths = v.norm(dim=-1)
    target = torch.tensor([1, 3])
    T = F.one_hot(target, 4).float()
    margin = (T * F.relu(0.9 - lengths) ** 2 + 0.5 * (1 - T) * F.relu(lengths - 0.1) ** 2)
    ml = margin.sum(1).mean()
    ml.backward()
    return res, ent.weight, rel.weight, v, ml, W.grad, lengths


def tabular_schedulers(torch):
    nn = torch.nn
    torch.manual_seed(9)
    rng = np.random.default_rng(9)
    X = torch.tensor(rng.standard_normal((64, 6)), dtype=torch.float32)
    y = (X[:, :1] * 2 - X[:, 1:2] + 0.3 * torch.tensor(rng.standard_normal((64, 1)),
                                                       dtype=torch.float32))
    net = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.2),
                        nn.Linear(16, 3))
    decay, no_decay = [], []
    for n, p in net.named_parameters():
        (no_decay if n.endswith("bias") or "1." in n else decay).append(p)
    opt = torch.optim.SGD([{"params": decay, "weight_decay": 1e-2},
                           {"params": no_decay, "weight_decay": 0.0}], lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.2, total_steps=8)
    qs = torch.tensor([0.1, 0.5, 0.9])

    def pinball(pred, y):
        e = y - pred
        return torch.max(qs * e, (qs - 1) * e).mean()

    res, lrs = [], []
    for step in range(8):
        idx = torch.arange(step * 8, step * 8 + 8)
        net.train()
        opt.zero_grad()
        loss = pinball(net(X[idx]), y[idx])
        loss.backward()
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr())
        res.append(loss.item())
    opt2 = torch.optim.Adam(net.parameters(), lr=0.01)
    plat = torch.optim.lr_scheduler.ReduceLROnPlateau(opt2, factor=0.5, patience=0)
    net.eval()
    vals = []
    for _ in range(4):
        with torch.no_grad():
            v = pinball(net(X), y)
        plat.step(v.item() if len(vals) == 0 else 10.0)
        vals.append(opt2.param_groups[0]["lr"])
    return res, lrs, vals, net[1].running_mean, net[1].num_batches_tracked, net(X[:4]), \
        opt.state_dict()["param_groups"][0]["lr"], sched.state_dict()["_step_count"]


def save_load_dataloader(torch):
    nn = torch.nn
    DataLoader, Dataset, Sampler = (torch.utils.data.DataLoader, torch.utils.data.Dataset,
                                    torch.utils.data.Sampler)
    torch.manual_seed(10)
    rng = np.random.default_rng(10)
    seqs = [rng.standard_normal((int(n), 3)).astype(np.float32) for n in rng.integers(2, 6, 12)]
    labels = rng.integers(0, 2, 12)

    class DS(Dataset):
        def __len__(self):
            return len(seqs)

        def __getitem__(self, i):
            return torch.from_numpy(seqs[i]), int(labels[i])

    class BySize(Sampler):
        def __init__(self, ds):
            self.order = sorted(range(len(ds)), key=lambda i: len(seqs[i]))

        def __iter__(self):
            return iter(self.order)

        def __len__(self):
            return len(self.order)

    def collate(batch):
        xs, ys = zip(*batch)
        lens = torch.tensor([len(x) for x in xs])
        pad = nn.utils.rnn.pad_sequence(xs, batch_first=True)
        return pad, lens, torch.tensor(ys)

    ds = DS()
    dl = DataLoader(ds, batch_size=4, sampler=BySize(ds), collate_fn=collate, num_workers=0)
    model = nn.LSTM(3, 5, batch_first=True)
    head = nn.Linear(5, 2)
    params = list(model.parameters()) + list(head.parameters())
    opt = torch.optim.Adam(params, lr=0.01)

    def epoch():
        out = []
        for pad, lens, ys in dl:
            packed = nn.utils.rnn.pack_padded_sequence(pad, lens, batch_first=True,
                                                       enforce_sorted=False)
            _, (h, _) = model(packed)
            loss = nn.functional.cross_entropy(head(h[-1]), ys)
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append((loss.item(), tuple(pad.shape)))
        return out

    r1 = epoch()
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "head": head.state_dict(),
                "opt": opt.state_dict(), "epoch": 1}, buf)
    r2 = epoch()
    buf.seek(0)
    ck = torch.load(buf, weights_only=True)
    model.load_state_dict(ck["model"])
    head.load_state_dict(ck["head"])
    opt.load_state_dict(ck["opt"])
    r3 = epoch()
    keys = list(ck["model"].keys())
    st = ck["opt"]["state"][0]
    missing = head.load_state_dict({"weight": ck["head"]["weight"]}, strict=False)
    return (r1, r2, r3, keys, ck["epoch"], st["step"], st["exp_avg"], repr(missing),
            len(dl), [p.sum() for p in params])


PROGRAMS = [seq2seq_gru_attention, unet_dice, ctc_conv1d, recommender_sparse, pointnet_clip,
            flow_distributions, gp_regression, mdn, transe_capsules, tabular_schedulers,
            save_load_dataloader]


def fx_rewrite(torch):
    nn, F = torch.nn, torch.nn.functional
    fxm = torch.fx
    torch.manual_seed(11)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = nn.Linear(4, 8)
            self.l2 = nn.Linear(8, 2)

        def forward(self, x):
            h = F.relu(self.l1(x))
            h = h + torch.sigmoid(h) * 2
            return self.l2(h).softmax(-1)

    m = M()
    gm = fxm.symbolic_trace(m)
    ops = [(n.op, getattr(n.target, '__name__', n.target)) for n in gm.graph.nodes]
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is F.relu:
            with gm.graph.inserting_after(n):
                g = gm.graph.call_function(F.gelu, (n.args[0],))
            n.replace_all_uses_with(g)
            gm.graph.erase_node(n)
    gm.recompile()
    x = torch.tensor(np.random.default_rng(11).standard_normal((3, 4)), dtype=torch.float32)
    y = gm(x)
    y.sum().backward()
    ops2 = [(n.op, getattr(n.target, '__name__', n.target), [str(a) for a in n.args])
            for n in gm.graph.nodes]
    # gm.code spells fusegrad's functions `fusegrad.f` (by design): compare its shape only
    print(gm.code.replace('torch._C._nn.', 'F.').replace('fusegrad.nn.functional.', 'F.')
          .replace('fusegrad.', 'torch.'))
    return ops, ops2, y, m.l1.weight.grad, len(list(gm.modules()))


def func_ensemble(torch):
    nn = torch.nn
    tf = torch.func
    functional_call, grad, stack_module_state, vmap = (tf.functional_call, tf.grad,
                                                       tf.stack_module_state, tf.vmap)
    torch.manual_seed(12)
    rng = np.random.default_rng(12)
    models = [nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 1)) for _ in range(4)]
    params, buffers = stack_module_state(models)
    base = models[0]
    x = torch.tensor(rng.standard_normal((6, 3)), dtype=torch.float32)
    y = torch.tensor(rng.standard_normal((6, 1)), dtype=torch.float32)

    def f(p, b, x):
        return functional_call(base, (p, b), (x,))

    preds = vmap(f, in_dims=(0, 0, None))(params, buffers, x)

    def loss(p, x, y):
        return ((functional_call(base, p, (x.unsqueeze(0),)) - y) ** 2).mean()

    p0 = {k: v.detach() for k, v in base.named_parameters()}
    ps_grads = vmap(grad(loss), in_dims=(None, 0, 0))(p0, x, y)
    jac = torch.func.jacrev(lambda x: functional_call(base, p0, (x,)))(x[0])
    hess = torch.func.hessian(lambda x: functional_call(base, p0, (x,)).sum())(x[0])
    # fusegrad's vmap loops and stacks (documented): compare values, not the grad_fn name
    return preds.detach(), {k: v for k, v in ps_grads.items()}, jac, hess, sorted(params)


def distributions_zoo(torch):
    D = torch.distributions
    torch.manual_seed(13)
    a = torch.tensor([0.5, 2.0, 3.0], requires_grad=True)
    b = torch.tensor([1.5, 0.7, 2.0], requires_grad=True)
    out = []
    dists = [D.Beta(a, b), D.Gamma(a, b), D.Dirichlet(a), D.Normal(a, b), D.Laplace(a, b),
             D.StudentT(a + 2, a, b), D.Exponential(b), D.Poisson(b), D.Uniform(a - 1, a + b),
             D.Cauchy(a, b), D.Gumbel(a, b), D.HalfNormal(b), D.Chi2(a + 1),
             D.Binomial(5, probs=b / 3), D.Geometric(probs=b / 3),
             D.OneHotCategorical(logits=a), D.RelaxedBernoulli(torch.tensor(0.5), logits=a),
             D.LowRankMultivariateNormal(a, b.unsqueeze(1), b), D.VonMises(a, b),
             D.Weibull(b, a + 1), D.Kumaraswamy(a + 1, b + 1), D.ContinuousBernoulli(b / 3)]
    for d in dists:
        torch.manual_seed(1)
        s = d.rsample() if d.has_rsample else d.sample()
        lp = d.log_prob(s.detach()).sum()
        item = [type(d).__name__, tuple(d.batch_shape), tuple(d.event_shape), s, lp]
        try:
            item.append(d.entropy())
        except NotImplementedError as e:
            item.append(("NIE", str(e)))
        try:
            item.append(d.mean)
            item.append(d.variance)
        except NotImplementedError:
            item.append("nomean")
        out.append(item)
        out.append(repr(d))
    tot = sum(x[4] for x in out[::2])
    tot.backward()
    kl = D.kl_divergence(D.Beta(a, b), D.Beta(b, a)).sum() + \
        D.kl_divergence(D.Gamma(a, b), D.Gamma(b, a)).sum()
    t = D.biject_to(D.constraints.simplex)
    u = torch.tensor([0.1, -0.3])
    sx = t(u)
    ladj = t.log_abs_det_jacobian(u, sx)
    return out, a.grad, b.grad, kl, sx, ladj, str(D.constraints.positive), \
        D.Normal(0., 1.).cdf(torch.tensor(0.3)), D.Normal(0., 1.).icdf(torch.tensor(0.3))


def module_utils(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(14)
    rng = np.random.default_rng(14)
    x = torch.tensor(rng.standard_normal((2, 3, 8, 8)), dtype=torch.float32)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.utils.parametrizations.weight_norm(nn.Conv2d(3, 8, 3, padding=1))
            self.inorm = nn.InstanceNorm2d(8, affine=True)
            self.ps = nn.PixelShuffle(2)
            self.pool = nn.AdaptiveAvgPool2d((3, 3))
            self.unfold = nn.Unfold(2, stride=2)
            self.fc = nn.utils.parametrizations.spectral_norm(nn.Linear(18, 4))
            self.register_buffer("scale", torch.tensor(2.0), persistent=False)

        def forward(self, x):
            h = F.leaky_relu(self.inorm(self.conv(x)))
            h = self.ps(h)  # (2, 2, 16, 16)
            h = F.interpolate(h, scale_factor=0.5, mode="bilinear", align_corners=False)
            u = self.unfold(h)  # (2, 8, 16)
            fo = F.fold(u, (8, 8), 2, stride=2)
            p = self.pool(fo + h).flatten(1)
            return self.fc(p) * self.scale

    net = Net()
    seen = []
    net.conv.register_forward_pre_hook(lambda m, a: seen.append(("pre", tuple(a[0].shape))))
    net.fc.register_full_backward_hook(
        lambda m, gi, go: seen.append(("bw", tuple(go[0].shape), gi[0] is None)))
    out = net(x)
    out.pow(2).sum().backward()
    nn.utils.clip_grad_value_(net.parameters(), 0.01)
    vec = nn.utils.parameters_to_vector(net.parameters())
    names = [n for n, _ in net.named_parameters()]
    sd = list(net.state_dict().keys())
    print(net)
    return out, seen, vec.shape, names, sd, net.conv.parametrizations.weight.original0.grad, \
        [type(m).__name__ for m in net.modules()]


def losses_zoo(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(15)
    rng = np.random.default_rng(15)
    x = torch.tensor(rng.standard_normal((5, 4)), dtype=torch.float32, requires_grad=True)
    y = torch.tensor(rng.standard_normal((5, 4)), dtype=torch.float32)
    c = torch.tensor(rng.integers(0, 4, 5))
    sgn = torch.tensor([1., -1., 1., 1., -1.])
    res = [
        nn.KLDivLoss(reduction="batchmean", log_target=True)(x.log_softmax(1), y.log_softmax(1)),
        nn.HuberLoss(delta=0.5)(x, y), nn.SmoothL1Loss(beta=0.3)(x, y),
        nn.TripletMarginLoss(margin=0.5, p=2, swap=True)(x, y, x.flip(0)),
        nn.CosineEmbeddingLoss(margin=0.1)(x, y, sgn),
        nn.NLLLoss(weight=torch.tensor([1., 2., 0.5, 1.]))(x.log_softmax(1), c),
        nn.PoissonNLLLoss(log_input=True, full=True)(x, y.abs()),
        nn.GaussianNLLLoss()(x, y, torch.ones(5, 4) * 0.5),
        nn.MultiLabelSoftMarginLoss()(x, (y > 0).float()),
        nn.MultiMarginLoss(p=1, margin=0.7)(x, c),
        nn.HingeEmbeddingLoss(margin=0.5)(x[:, 0], sgn),
        nn.SoftMarginLoss()(x[:, 0], sgn),
        nn.CrossEntropyLoss(label_smoothing=0.2)(x, y.softmax(1)),
        nn.MultiLabelMarginLoss()(x, torch.tensor([[3, 0, -1, 1]] * 5)),
        nn.TripletMarginWithDistanceLoss(distance_function=nn.PairwiseDistance())(x, y, -y),
        nn.L1Loss(reduction="sum")(x, y),
        nn.BCELoss(weight=torch.rand(4))(x.sigmoid(), y.sigmoid()),
        F.cross_entropy(x, c, reduction="none", ignore_index=2),
    ]
    total = sum(r.sum() for r in res)
    total.backward()
    return res, x.grad


PROGRAMS += [fx_rewrite, func_ensemble, distributions_zoo, module_utils, losses_zoo]


def data_utilities(torch):
    tud = torch.utils.data
    torch.manual_seed(16)
    X = torch.arange(40, dtype=torch.float32).view(20, 2)
    Y = torch.arange(20) % 3
    ds = tud.TensorDataset(X, Y)
    g = torch.Generator().manual_seed(3)
    tr, va = tud.random_split(ds, [0.75, 0.25], generator=g)
    out = [len(tr), len(va), list(tr.indices), list(va.indices)]
    cat = tud.ConcatDataset([tr, va])
    out.append([int(cat[i][1]) for i in range(len(cat))])
    w = torch.tensor([0.1, 0.5, 2.0])[Y]
    sampler = tud.WeightedRandomSampler(w, num_samples=10, replacement=True,
                                        generator=torch.Generator().manual_seed(5))
    out.append(list(sampler))
    bs = tud.BatchSampler(tud.SequentialSampler(range(7)), batch_size=3, drop_last=False)
    out.append(list(bs))
    rs = tud.RandomSampler(range(6), generator=torch.Generator().manual_seed(9))
    out.append(list(rs))
    sub = tud.Subset(ds, [3, 1, 4])
    dl = tud.DataLoader(sub, batch_size=2, shuffle=False)
    out.append([(x.tolist(), y.tolist()) for x, y in dl])
    col = tud.default_collate([{"a": torch.tensor([1., 2.]), "b": (1, 2.5), "c": "s"},
                               {"a": torch.tensor([3., 4.]), "b": (3, 4.5), "c": "t"}])
    out.append(col)
    torch.manual_seed(21)
    dl2 = tud.DataLoader(ds, batch_size=6, shuffle=True, drop_last=True)
    out.append([y.tolist() for _, y in dl2])
    out.append(len(dl2))

    class Stream(tud.IterableDataset):
        def __iter__(self):
            info = tud.get_worker_info()
            return iter(range(5) if info is None else [])

    out.append([b.tolist() for b in tud.DataLoader(Stream(), batch_size=2)])
    out.append(type(col["b"]).__name__)
    return out


def rnn_variants(torch):
    nn = torch.nn
    rnnu = nn.utils.rnn
    torch.manual_seed(17)
    rng = np.random.default_rng(17)
    seqs = [torch.tensor(rng.standard_normal((n, 3)), dtype=torch.float32) for n in (5, 3, 2)]
    packed = rnnu.pack_sequence(seqs)
    lstm = nn.LSTM(3, 6, num_layers=2, proj_size=2, dropout=0.0)
    rnn = nn.RNN(3, 4, nonlinearity="relu", bidirectional=True)
    out, (h, c) = lstm(packed)
    padded, lens = rnnu.pad_packed_sequence(out, batch_first=True, padding_value=-1.0)
    o2, h2 = rnn(packed)
    p2, _ = rnnu.pad_packed_sequence(o2)
    mha = nn.MultiheadAttention(4, 2, kdim=3, vdim=5, batch_first=True)
    q = torch.tensor(rng.standard_normal((2, 3, 4)), dtype=torch.float32)
    k = torch.tensor(rng.standard_normal((2, 4, 3)), dtype=torch.float32)
    v = torch.tensor(rng.standard_normal((2, 4, 5)), dtype=torch.float32)
    kpm = torch.tensor([[False, False, True, True], [False, False, False, False]])
    ao, aw = mha(q, k, v, key_padding_mask=kpm, average_attn_weights=False)
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(4, 2, 8, dropout=0.0,
                                                           batch_first=True, norm_first=True),
                                num_layers=2)
    mask = nn.Transformer.generate_square_subsequent_mask(3)
    d = dec(q, q * 0.5, tgt_mask=mask, tgt_is_causal=True)
    loss = padded.sum() + p2.pow(2).sum() + ao.sum() + d.pow(2).sum() + h.sum() + c.sum()
    loss.backward()
    return (packed.batch_sizes, padded, lens, h, c, p2, h2, ao, aw, d, mask,
            lstm.weight_hr_l1.grad, mha.k_proj_weight.grad, loss, str(lstm), str(mha))


def init_and_serialization(torch):
    nn = torch.nn
    torch.manual_seed(18)
    lin = nn.Linear(5, 4)
    conv = nn.Conv2d(2, 3, 3)
    nn.init.orthogonal_(lin.weight, gain=nn.init.calculate_gain("tanh"))
    nn.init.kaiming_normal_(conv.weight, mode="fan_out", nonlinearity="relu")
    nn.init.trunc_normal_(lin.bias, std=0.02, a=-0.04, b=0.04)
    nn.init.sparse_(torch.empty(6, 4), 0.5)
    e = torch.empty(3, 4)
    nn.init.xavier_normal_(e)
    d = torch.empty(2, 3, 3, 3)
    nn.init.dirac_(d)
    eye = nn.init.eye_(torch.empty(3, 4))
    buf = io.BytesIO()
    obj = {"lin": lin.state_dict(), "t": [torch.arange(3), torch.tensor(2.5)],
           "dtype": torch.float16, "shape": torch.Size([2, 3]), "half": e.half(),
           "view": e[1:, ::2], "base": e}
    torch.save(obj, buf)
    buf.seek(0)
    back = torch.load(buf, weights_only=True)
    shared = back["view"].untyped_storage().data_ptr() == back["base"].untyped_storage().data_ptr()
    buf2 = io.BytesIO()
    torch.save(lin, buf2)
    buf2.seek(0)
    err = None
    try:
        torch.load(buf2, weights_only=True)
    except Exception as ex:  # the message is long; compare its type and first line
        err = (type(ex).__name__, str(ex).splitlines()[0])
    buf2.seek(0)
    whole = torch.load(buf2, weights_only=False)
    missing = lin.load_state_dict({"weight": lin.weight.detach() * 2}, strict=False)
    try:
        lin.load_state_dict({"weight": torch.zeros(2, 2), "bias": torch.zeros(4)})
    except RuntimeError as ex:
        err2 = str(ex)
    return (lin.weight, conv.weight, lin.bias, e, d, eye, back, shared, err, whole.weight,
            type(whole).__name__, str(missing), err2, back["shape"], back["dtype"])


def amp_scaler(torch):
    nn = torch.nn
    torch.manual_seed(19)
    rng = np.random.default_rng(19)
    x = torch.tensor(rng.standard_normal((8, 6)), dtype=torch.float32)
    y = torch.tensor(rng.integers(0, 3, 8))
    net = nn.Sequential(nn.Linear(6, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 3))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8, growth_interval=2)
    res = []
    for _ in range(4):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = net(x)
            loss = nn.functional.cross_entropy(logits, y)
        res.append((logits.dtype, loss.dtype, loss.item()))
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(net.parameters(), 5.0)
        scaler.step(opt)
        scaler.update()
        res.append(scaler.get_scale())
    return res, net[0].weight.grad, net[3].weight, scaler.state_dict()


PROGRAMS += [data_utilities, rnn_variants, init_and_serialization, amp_scaler]


def module_api(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(20)
    rng = np.random.default_rng(20)
    x = torch.tensor(rng.standard_normal((2, 4, 6, 6)), dtype=torch.float32)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleDict({"pad": nn.ReflectionPad2d(1),
                                         "conv": nn.Conv2d(4, 4, 3), "cs": nn.ChannelShuffle(2),
                                         "lrn": nn.LocalResponseNorm(2)})
            self.scales = nn.ParameterList([nn.Parameter(torch.ones(1)) for _ in range(2)])
            self.extra = nn.ParameterDict({"b": nn.Parameter(torch.zeros(4))})
            self.lazy = nn.LazyLinear(3)
            self.bil = nn.Bilinear(3, 3, 2)
            self.up = nn.Upsample(scale_factor=2, mode="nearest-exact")
            self.flat = nn.Flatten(1)
            self.unflat = nn.Unflatten(1, (2, 3))
            self.circ = nn.CircularPad2d((1, 0, 0, 1))

        def forward(self, x):
            for k in ("pad", "conv", "cs", "lrn"):
                x = self.layers[k](x)
            x = x * self.scales[0] + self.extra["b"].view(1, 4, 1, 1)
            x = self.circ(self.up(x)[:, :, ::3, ::3])
            z = self.lazy(self.flat(F.softmax2d(x) if hasattr(F, "softmax2d") else x.softmax(-3)))
            return self.unflat(torch.cat([self.bil(z, z), z[:, :1] * self.scales[1],
                                          z[:, 1:2], z[:, 2:] ** 2, z[:, :1]], 1))

    b = Block()
    out = b(x)
    order = []
    b.register_forward_hook(lambda m, a, o: order.append("fwd"))
    b.layers["conv"].register_forward_hook(lambda m, a, o: order.append("conv"), prepend=True)
    handle = b.register_forward_pre_hook(lambda m, a: order.append("pre"))
    out = b(x)
    handle.remove()
    out.sum().backward()
    sd = b.state_dict()
    b2 = Block()
    b2(x)
    res = b2.load_state_dict(sd, assign=True)
    b2.zero_grad()
    sub = b.get_submodule("layers.conv")
    emb = nn.Embedding.from_pretrained(torch.arange(6.).view(3, 2), freeze=False, padding_idx=1)
    ebag = nn.EmbeddingBag(5, 2, mode="sum", padding_idx=0)
    eb = ebag(torch.tensor([[0, 1, 2], [4, 0, 0]]))
    half = nn.Linear(2, 2).to(torch.float64)
    print(b)
    print(nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU(), nn.Identity())))
    return (out, order, list(sd), str(res), type(sub).__name__, b.lazy.weight.shape,
            b.layers["conv"].weight.grad, b.scales[1].grad, emb(torch.tensor([1, 2])), eb,
            half.weight.dtype, [n for n, _ in b.named_modules()], b2.lazy.weight.grad)


def random_layers(torch):
    nn = torch.nn
    torch.manual_seed(21)
    x = torch.randn(2, 4, 8, 8)
    layers = [nn.Dropout(0.3), nn.Dropout2d(0.5), nn.AlphaDropout(0.2), nn.RReLU(),
              nn.FeatureAlphaDropout(0.3), nn.Dropout1d(0.5)]
    out = []
    for layer in layers:
        torch.manual_seed(5)
        inp = x if not isinstance(layer, nn.Dropout1d) else x[:, :, 0]
        out.append(layer(inp))
    torch.manual_seed(6)
    fmp = nn.FractionalMaxPool2d(3, output_size=(5, 5), return_indices=True)
    out.append(fmp(x))
    torch.manual_seed(7)
    out.append(torch.multinomial(torch.tensor([0.1, 0.5, 0.4]), 6, replacement=True))
    out.append(torch.randperm(7))
    out.append(torch.nn.functional.gumbel_softmax(torch.zeros(2, 3), tau=0.5, hard=True))
    out.append(torch.bernoulli(torch.full((5,), 0.5)))
    out.append(torch.normal(torch.zeros(3), torch.ones(3)))
    out.append(torch.rand(2, 2, dtype=torch.float64))
    out.append(torch.randint(0, 10, (4,), dtype=torch.int32))
    return out


PROGRAMS += [module_api, random_layers]


def distributions_more(torch):
    D = torch.distributions
    T = D.transforms
    torch.manual_seed(22)
    a = torch.tensor([0.5, 2.0, 3.0], requires_grad=True)
    out = []
    cov = torch.tensor([[2.0, 0.3, 0.1], [0.3, 1.0, 0.2], [0.1, 0.2, 1.5]])
    dists = [D.MultivariateNormal(a, precision_matrix=cov), D.Multinomial(7, logits=a),
             D.NegativeBinomial(3.0, logits=a), D.FisherSnedecor(a + 1, a + 2),
             D.Pareto(a + 0.5, a + 1), D.LogisticNormal(a, a + 0.2), D.HalfCauchy(a),
             D.RelaxedOneHotCategorical(torch.tensor(0.7), logits=a),
             D.InverseGamma(a + 1, a), D.Wishart(torch.tensor(4.0), covariance_matrix=cov),
             D.LKJCholesky(3, torch.tensor(1.5)),
             D.Normal(a, 1.0).expand((2, 3)),
             D.TransformedDistribution(D.Normal(a, 1.0), T.ComposeTransform(
                 [T.SigmoidTransform(), T.PowerTransform(torch.tensor(2.0))])),
             D.TransformedDistribution(D.Normal(torch.zeros(2, 3), 1.0), T.StackTransform(
                 [T.ExpTransform(), T.SoftplusTransform()], dim=0)),
             D.TransformedDistribution(D.Uniform(torch.zeros(4), torch.ones(4)), T.CatTransform(
                 [T.AffineTransform(1.0, 2.0), T.ExpTransform()], dim=-1, lengths=[2, 2]))]
    for d in dists:
        torch.manual_seed(2)
        s = d.rsample((2,)) if d.has_rsample else d.sample((2,))
        lp = d.log_prob(s.detach())
        out.append([type(d).__name__, tuple(d.batch_shape), tuple(d.event_shape), s, lp,
                    str(d.support)])
    total = sum(x[4].sum() for x in out if x[4].requires_grad)
    total.backward()
    errs = []
    # Validation on, as by default (importing torch._dynamo switches torch's default off for
    # the whole process, so it depends on what ran before in this one).
    saved = D.Distribution._validate_args
    D.Distribution.set_default_validate_args(True)
    try:
        for make in (lambda: D.Normal(0.0, -1.0),
                     lambda: D.Categorical(torch.tensor([0.5, -0.1])),
                     lambda: D.Normal(0.0, 1.0).log_prob(torch.tensor([1.0])).sum() +
                     D.Bernoulli(0.3).log_prob(torch.tensor(2.0)),
                     lambda: D.Beta(1.0, 1.0).sample().log_prob(),
                     lambda: D.Dirichlet(torch.tensor(1.0))):
            try:
                make()
                errs.append(None)
            except Exception as e:
                errs.append((type(e).__name__, str(e)))
    finally:
        D.Distribution.set_default_validate_args(saved)
    ct = T.ComposeTransform([T.ExpTransform(), T.AffineTransform(0.0, 2.0)])
    return out, a.grad, errs, repr(ct), repr(ct.inv), str(T.ExpTransform().codomain), \
        D.Normal(a, 1.0).expand((2, 3)).batch_shape


PROGRAMS += [distributions_more]


def vqvae_ema(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(24)
    rng = np.random.default_rng(24)
    x = torch.tensor(rng.standard_normal((4, 3, 8, 8)), dtype=torch.float32)
    enc = nn.Sequential(nn.Conv2d(3, 8, 4, 2, 1), nn.ReLU(), nn.Conv2d(8, 4, 1))
    dec = nn.Sequential(nn.ConvTranspose2d(4, 8, 4, 2, 1), nn.ReLU(), nn.Conv2d(8, 3, 3, 1, 1))
    K, Dm = 6, 4
    codebook = torch.randn(K, Dm)
    ema_count = torch.zeros(K)
    ema_w = codebook.clone()
    opt = torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()), lr=2e-3)
    res = []
    for _ in range(3):
        z = enc(x)
        flat = z.permute(0, 2, 3, 1).reshape(-1, Dm)
        d = torch.cdist(flat, codebook)
        idx = d.argmin(1)
        q = codebook[idx].view(z.shape[0], z.shape[2], z.shape[3], Dm).permute(0, 3, 1, 2)
        q_st = z + (q - z).detach()
        recon = dec(q_st)
        loss = F.mse_loss(recon, x) + 0.25 * F.mse_loss(z, q.detach())
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            onehot = F.one_hot(idx, K).type(flat.dtype)
            ema_count.mul_(0.9).add_(onehot.sum(0), alpha=0.1)
            n = ema_count.sum()
            cnt = (ema_count + 1e-5) / (n + K * 1e-5) * n
            dw = torch.zeros(K, Dm).index_add_(0, idx, flat)
            ema_w.mul_(0.9).add_(dw, alpha=0.1)
            codebook.copy_(ema_w / cnt.unsqueeze(1))
        perplexity = torch.exp(-(onehot.mean(0) * torch.log(onehot.mean(0) + 1e-10)).sum())
        res.append((loss.item(), perplexity.item(), torch.bincount(idx, minlength=K).tolist()))
    return res, codebook, recon, enc[0].weight.grad


def gat_scatter(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(25)
    rng = np.random.default_rng(25)
    N, E, Fi, H = 7, 18, 5, 4
    src = torch.tensor(rng.integers(0, N, E))
    dst = torch.tensor(rng.integers(0, N, E))
    x = torch.tensor(rng.standard_normal((N, Fi)), dtype=torch.float32)
    y = torch.tensor(rng.integers(0, 3, N))
    W = nn.Linear(Fi, H, bias=False)
    a_src = nn.Parameter(torch.randn(H) * 0.1)
    a_dst = nn.Parameter(torch.randn(H) * 0.1)
    out_lin = nn.Linear(H, 3)
    opt = torch.optim.Adam(list(W.parameters()) + [a_src, a_dst] + list(out_lin.parameters()),
                           lr=0.01)
    res = []
    for _ in range(3):
        h = W(x)
        e = F.leaky_relu((h[src] * a_src).sum(-1) + (h[dst] * a_dst).sum(-1), 0.2)
        emax = torch.full((N,), float("-inf")).scatter_reduce(0, dst, e, "amax",
                                                              include_self=False)
        ex = (e - emax[dst]).exp()
        denom = torch.zeros(N).scatter_add(0, dst, ex)
        alpha = ex / denom[dst]
        agg = torch.zeros(N, H).index_add(0, dst, alpha.unsqueeze(1) * h[src])
        mean_deg = torch.zeros(N).scatter_reduce(0, dst, torch.ones(E), "sum")
        out = out_lin(F.elu(agg + h))
        loss = F.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res.append(loss.item())
    return res, alpha, agg, mean_deg, a_src.grad, W.weight.grad, emax.isinf().sum()


def pinn_wgan_gp(torch):
    nn = torch.nn
    torch.manual_seed(26)
    rng = np.random.default_rng(26)
    # PINN for u'' = -u on [0, pi] with second derivatives through autograd.grad
    net = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 16), nn.Softplus(),
                        nn.Linear(16, 1))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    t = torch.linspace(0, math.pi, 12).unsqueeze(1).requires_grad_(True)
    res = []
    for _ in range(3):
        u = net(t)
        du = torch.autograd.grad(u.sum(), t, create_graph=True)[0]
        d2u = torch.autograd.grad(du.sum(), t, create_graph=True)[0]
        bc = net(torch.tensor([[0.0], [math.pi / 2]])) - torch.tensor([[0.0], [1.0]])
        loss = (d2u + u).pow(2).mean() + bc.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res.append(loss.item())
    # WGAN-GP critic step with gradient penalty
    critic = nn.Sequential(nn.Conv2d(1, 4, 3, 2, 1), nn.LeakyReLU(0.2), nn.InstanceNorm2d(4),
                           nn.Flatten(), nn.Linear(4 * 4 * 4, 1))
    real = torch.tensor(rng.standard_normal((3, 1, 8, 8)), dtype=torch.float32)
    fake = torch.tensor(rng.standard_normal((3, 1, 8, 8)), dtype=torch.float32)
    copt = torch.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.0, 0.9))
    for _ in range(2):
        torch.manual_seed(3)
        eps = torch.rand(3, 1, 1, 1)
        xi = (eps * real + (1 - eps) * fake).requires_grad_(True)
        g = torch.autograd.grad(critic(xi).sum(), xi, create_graph=True)[0]
        gp = ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
        closs = critic(fake).mean() - critic(real).mean() + 10 * gp
        copt.zero_grad()
        closs.backward()
        copt.step()
        res.append((closs.item(), gp.item()))
    return res, d2u, critic[0].weight.grad, critic[4].weight, net[0].weight.grad


def dqn_replay(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(27)
    rng = np.random.default_rng(27)
    S, A, N = 4, 3, 32
    states = torch.tensor(rng.standard_normal((N, S)), dtype=torch.float32)
    actions = torch.tensor(rng.integers(0, A, N))
    rewards = torch.tensor(rng.standard_normal(N), dtype=torch.float32)
    nxt = torch.tensor(rng.standard_normal((N, S)), dtype=torch.float32)
    done = torch.tensor(rng.random(N) < 0.2)
    q = nn.Sequential(nn.Linear(S, 16), nn.ReLU(), nn.Linear(16, A))
    target = nn.Sequential(nn.Linear(S, 16), nn.ReLU(), nn.Linear(16, A))
    target.load_state_dict(q.state_dict())
    target.requires_grad_(False)
    opt = torch.optim.RMSprop(q.parameters(), lr=1e-3)
    res = []
    g = torch.Generator().manual_seed(4)
    for step in range(4):
        idx = torch.randint(0, N, (8,), generator=g)
        qa = q(states[idx]).gather(1, actions[idx].unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            best = q(nxt[idx]).argmax(1, keepdim=True)  # double DQN
            tq = target(nxt[idx]).gather(1, best).squeeze(1)
            y = rewards[idx] + 0.99 * tq * (~done[idx]).float()
        loss = F.smooth_l1_loss(qa, y)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(q.parameters(), 10.0, foreach=True)
        opt.step()
        with torch.no_grad():  # Polyak averaging of the target network
            for tp, p in zip(target.parameters(), q.parameters()):
                tp.lerp_(p, 0.1)
        eps = max(0.05, 1.0 - step * 0.3)
        explore = torch.rand(1, generator=g).item() < eps
        act = torch.randint(0, A, (1,), generator=g).item() if explore else \
            q(states[:1]).argmax().item()
        res.append((loss.item(), act, idx.tolist()))
    return res, [p.sum() for p in target.parameters()], q[2].weight.grad


def lm_schedulers(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(28)
    rng = np.random.default_rng(28)
    V, D, B, L = 20, 8, 3, 6
    data = torch.tensor(rng.integers(0, V, (B, L + 1)))

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.gru = nn.GRU(D, D, num_layers=2, batch_first=True, dropout=0.0)
            self.norm = nn.RMSNorm(D)
            self.head = nn.Linear(D, V, bias=False)
            self.head.weight = self.emb.weight  # tied

        def forward(self, x, h=None):
            o, h = self.gru(self.emb(x), h)
            return self.head(self.norm(o)), h

    m = LM()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1,
                            amsgrad=True)
    warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=2)
    cos = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2,
                                                                eta_min=1e-4)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[2])
    res = []
    h = None
    for _ in range(6):
        for micro in range(2):  # gradient accumulation with truncated BPTT
            x, y = data[:, micro * 3:micro * 3 + 3], data[:, micro * 3 + 1:micro * 3 + 4]
            logits, h = m(x, None if h is None else h.detach())
            loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1)) / 2
            loss.backward()
        gn = nn.utils.clip_grad_norm_(m.parameters(), 0.5, norm_type=2.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step()
        res.append((loss.item(), gn.item(), sched.get_last_lr()[0]))
    names = [n for n, _ in m.named_parameters()]
    return res, names, m.emb.weight, m.head.weight is m.emb.weight, \
        sorted(opt.state_dict()["state"][0].keys())


PROGRAMS += [vqvae_ema, gat_scatter, pinn_wgan_gp, dqn_replay, lm_schedulers]


def func_transforms(torch):
    nn, F = torch.nn, torch.nn.functional
    tf = torch.func
    torch.manual_seed(29)
    rng = np.random.default_rng(29)
    net = nn.Sequential(nn.Linear(3, 6), nn.BatchNorm1d(6), nn.GELU(), nn.Linear(6, 2))
    net.eval()
    x = torch.tensor(rng.standard_normal((5, 3)), dtype=torch.float32)
    params = dict(net.named_parameters())
    buffers = dict(net.named_buffers())

    def loss_fn(p, x):
        out = tf.functional_call(net, (p, buffers), (x,))
        return out.pow(2).mean(), out

    (g, aux) = tf.grad(loss_fn, has_aux=True)(params, x)
    val, jvp_out = tf.jvp(lambda x: net(x), (x,), (torch.ones_like(x),))
    out, vjp_fn = tf.vjp(lambda x: net(x).sin(), x)
    (vx,) = vjp_fn(torch.ones_like(out))
    jf = tf.jacfwd(lambda x: net(x).sum(0))(x)
    per = tf.vmap(tf.grad(lambda p, xi: loss_fn(p, xi.unsqueeze(0))[0]),
                  in_dims=(None, 0))(params, x)
    lin_out, lin_fn = tf.linearize(lambda x: net(x).tanh(), x)
    lt = lin_fn(torch.full_like(x, 0.5))
    hvp = tf.jvp(lambda x: tf.grad(lambda y: net(y).pow(3).sum())(x), (x,),
                 (torch.ones_like(x),))[1]
    net.train()
    tf.replace_all_batch_norm_modules_(net)
    bn_state = (net[1].running_mean, net[1].track_running_stats)
    torch.manual_seed(3)
    rv = tf.vmap(lambda t: F.dropout(t, 0.5, training=True), randomness="same")(torch.ones(3, 4))
    # Forward-mode tangents and vmap's results carry other grad_fn names than PyTorch's
    # (see the report): their values are compared.
    return g, aux, val, jvp_out.detach(), vx, jf, {k: v.detach() for k, v in per.items()}, \
        lin_out, lt.detach(), hvp.detach(), bn_state, rv


def fx_passes(torch):
    nn, F = torch.nn, torch.nn.functional
    fx = torch.fx
    torch.manual_seed(30)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 3, 3, padding=1)
            self.bn = nn.BatchNorm2d(3)
            self.lin = nn.Linear(3, 2)

        def forward(self, x):
            h = F.relu(self.bn(self.conv(x)))
            h = torch.add(h, 1.0).mul(0.5)
            return self.lin(h.mean((2, 3))), h.shape[1]

    m = M().eval()
    gm = fx.symbolic_trace(m)
    x = torch.tensor(np.random.default_rng(30).standard_normal((2, 2, 5, 5)),
                     dtype=torch.float32)
    from_interp = fx.Interpreter(gm).run(x)

    class Counter(fx.Interpreter):
        def __init__(self, mod):
            super().__init__(mod)
            self.seen = []

        def call_module(self, target, args, kwargs):
            self.seen.append((target, tuple(args[0].shape)))
            return super().call_module(target, args, kwargs)

    c = Counter(gm)
    c.run(x)

    def pattern(a):
        return torch.add(a, 1.0).mul(0.5)

    def replacement(a):
        return (a + 1.0) * 0.5

    matches = fx.subgraph_rewriter.replace_pattern(gm, pattern, replacement)
    gm.recompile()

    class SwapRelu(fx.Transformer):
        def call_function(self, target, args, kwargs):
            if target is F.relu:
                target, kwargs = torch.sigmoid, {}
            return super().call_function(target, args, kwargs)

    gm2 = SwapRelu(gm).transform()
    sp = fx.passes.shape_prop.ShapeProp(gm2)
    sp.propagate(x)
    metas = [(n.name, tuple(n.meta["tensor_meta"].shape)) for n in gm2.graph.nodes
             if hasattr(n.meta.get("tensor_meta"), "shape")]
    gm2.graph.lint()
    nodes = [(n.op, n.name) for n in gm2.graph.nodes]
    return from_interp, c.seen, len(matches), gm(x), gm2(x), metas, nodes, \
        [n.name for n in gm.graph.nodes]


PROGRAMS += [func_transforms, fx_passes]


class _RandDS:
    """A dataset drawing from the library's global generator in its worker (module level, so
    worker processes can unpickle it)."""

    def __init__(self, lib):
        self.lib = lib.__name__

    def __len__(self):
        return 8

    def __getitem__(self, i):
        import importlib
        lib = importlib.import_module(self.lib)
        info = lib.utils.data.get_worker_info()
        return lib.rand(2) + i, -1 if info is None else info.id, \
            -1 if info is None else info.seed % 1000


def _seed_worker(worker_id):
    np.random.seed(worker_id)


def dataloader_workers(torch):
    tud = torch.utils.data
    torch.manual_seed(31)
    g = torch.Generator()
    g.manual_seed(7)
    dl = tud.DataLoader(_RandDS(torch), batch_size=3, num_workers=2, shuffle=True,
                        generator=g, worker_init_fn=_seed_worker, persistent_workers=False,
                        prefetch_factor=2)
    out = [(x, list(w), list(s)) for x, w, s in dl]
    dl0 = tud.DataLoader(_RandDS(torch), batch_size=4, num_workers=0, shuffle=True,
                         generator=torch.Generator().manual_seed(7))
    out.append([(x, list(w)) for x, w, _ in dl0])
    return out


PROGRAMS += [dataloader_workers]


def nn_utils_misc(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(32)
    rng = np.random.default_rng(32)
    x = torch.tensor(rng.standard_normal((2, 3, 6, 6)), dtype=torch.float32)
    conv, bn = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)
    bn.train()
    bn(conv(x))
    conv.eval()
    bn.eval()
    fused = nn.utils.fusion.fuse_conv_bn_eval(conv, bn)
    same = (fused(x) - bn(conv(x))).abs().max()
    lin = nn.Linear(4, 3)
    w2 = torch.ones(3, 4)
    sf = nn.utils.stateless.functional_call(lin, {"weight": w2}, (torch.ones(1, 4),))
    with torch.device("meta"):
        big = nn.Linear(5, 5)
    meta_info = (big.weight.device.type, big.weight.shape)
    big.to_empty(device="cpu")
    nn.init.zeros_(big.weight)
    sk = nn.utils.skip_init(nn.Linear, 2, 3)
    gen = torch.Generator().manual_seed(3)
    wi = nn.init.uniform_(torch.empty(2, 3), generator=gen)
    wi2 = nn.init.kaiming_uniform_(torch.empty(2, 3), generator=gen)
    q = torch.tensor(rng.standard_normal((1, 4, 5, 8)), dtype=torch.float32, requires_grad=True)
    kv = torch.tensor(rng.standard_normal((1, 2, 5, 8)), dtype=torch.float32)
    att = F.scaled_dot_product_attention(q, kv, kv, is_causal=True, scale=0.3, enable_gqa=True)
    mask = torch.tensor(rng.random((5, 5)) > 0.3)
    att2 = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    (att.sum() + att2.pow(2).sum()).backward()
    seqs = [torch.ones(2, 3), torch.zeros(4, 3)]
    pad = nn.utils.rnn.pad_sequence(seqs, batch_first=True)
    unp = nn.utils.rnn.unpad_sequence(pad, torch.tensor([2, 4]), batch_first=True)
    pk = nn.utils.rnn.pack_sequence(seqs, enforce_sorted=False)
    unk = nn.utils.rnn.unpack_sequence(pk)

    class Sym(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu()

    P = nn.utils.parametrize
    layer = nn.Linear(3, 3)
    P.register_parametrization(layer, "weight", Sym())
    with P.cached():
        a = layer.weight
        b = layer.weight
    layer.weight = torch.eye(3) * 2
    sym = layer.weight
    P.remove_parametrizations(layer, "weight", leave_parametrized=True)
    cw = nn.utils.convert_conv2d_weight_memory_format(nn.Conv2d(2, 2, 1),
                                                      torch.channels_last)
    return (same.item() < 1e-5, fused.weight, fused.bias, sf, meta_info, big.weight,
            sk.weight.shape, wi, wi2, att, att2, q.grad, unp, unk, a is b, sym,
            type(layer.weight).__name__,
            cw.weight.is_contiguous(memory_format=torch.channels_last))


PROGRAMS += [nn_utils_misc]


def amp_details(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(33)
    rng = np.random.default_rng(33)
    x = torch.tensor(rng.standard_normal((4, 5)), dtype=torch.float32)
    lin = nn.Linear(5, 3)
    out = []

    class MyFn(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
        def forward(ctx, a, w):
            ctx.save_for_backward(a, w)
            return a @ w

        @staticmethod
        @torch.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            a, w = ctx.saved_tensors
            return g @ w.t(), a.t() @ g

    w = torch.randn(5, 2, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.float16):
        h = lin(x)
        out.append((h.dtype, torch.is_autocast_enabled("cpu"),
                    torch.get_autocast_dtype("cpu")))
        with torch.autocast("cpu", enabled=False):
            h2 = lin(x)
            out.append((h2.dtype, torch.is_autocast_enabled("cpu")))
        m = MyFn.apply(x.half(), w)
        out.append(m.dtype)
        s = F.softmax(h, 1)
        ls = F.log_softmax(h, 1)
        ce = F.cross_entropy(h, torch.tensor([0, 1, 2, 0]))
        cat = torch.cat([h, x[:, :3]], 1)
        bmm = torch.bmm(x.unsqueeze(0), x.t().unsqueeze(0))
        sm = h.sum()
        pw = h.pow(2)
        out.append([t.dtype for t in (s, ls, ce, cat, bmm, sm, pw)])
    (m.sum() + h.float().sum()).backward()
    out.append((w.grad, lin.weight.grad.dtype))
    # GradScaler skips the step when gradients overflow
    p = nn.Parameter(torch.ones(3))
    opt = torch.optim.SGD([p], lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=4.0, backoff_factor=0.25,
                                  growth_factor=3.0, growth_interval=1)
    for g in [1.0, float("inf"), 2.0, float("nan"), 0.5]:
        opt.zero_grad()
        scaler.scale((p * g).sum()).backward()
        scaler.step(opt)
        scaler.update()
        out.append((p.detach().clone(), scaler.get_scale()))
    out.append(scaler.state_dict())
    out.append(scaler.is_enabled())
    return out


PROGRAMS += [amp_details]


def caption_beam_search(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(34)
    rng = np.random.default_rng(34)
    img = torch.tensor(rng.standard_normal((2, 3, 16, 16)), dtype=torch.float32)
    caps = torch.tensor(rng.integers(3, 12, (2, 5)))
    V, H = 12, 10
    cnn = nn.Sequential(nn.Conv2d(3, 6, 3, 2, 1), nn.BatchNorm2d(6), nn.SiLU(),
                        nn.Conv2d(6, H, 3, 2, 1, groups=2), nn.AdaptiveAvgPool2d(2))
    emb = nn.Embedding(V, H)
    cell = nn.LSTMCell(2 * H, H)
    att = nn.Linear(H, H)
    fc = nn.Linear(H, V)
    mods = nn.ModuleList([cnn, emb, cell, att, fc])
    opt = torch.optim.NAdam(mods.parameters(), lr=5e-3, momentum_decay=4e-3)

    def step(feats, tok, state):
        h, c = state
        a = torch.softmax(torch.einsum("bnd,bd->bn", feats, att(h)), -1)
        ctx = (a.unsqueeze(-1) * feats).sum(1)
        h, c = cell(torch.cat([emb(tok), ctx], -1), (h, c))
        return F.log_softmax(fc(h), -1), (h, c)

    losses = []
    for _ in range(2):
        feats = cnn(img).flatten(2).transpose(1, 2)  # (B, 4, H)
        state = (feats.mean(1), torch.zeros(2, H))
        tok = torch.full((2,), 1, dtype=torch.long)
        loss = 0
        for t in range(5):
            lp, state = step(feats, tok, state)
            loss = loss + F.nll_loss(lp, caps[:, t])
            tok = caps[:, t]
        opt.zero_grad()
        (loss / 5).backward()
        opt.step()
        losses.append(loss.item())
    # beam search on the first image
    cnn.eval()
    with torch.no_grad():
        feats = cnn(img[:1]).flatten(2).transpose(1, 2)
        k = 3
        feats = feats.expand(k, -1, -1)
        state = (feats.mean(1), torch.zeros(k, H))
        seqs = torch.full((k, 1), 1, dtype=torch.long)
        scores = torch.tensor([0.0, float("-inf"), float("-inf")])
        for _ in range(4):
            lp, state = step(feats, seqs[:, -1], state)
            cand = (scores.unsqueeze(1) + lp).view(-1)
            top, idx = cand.topk(k)
            beam = torch.div(idx, V, rounding_mode="floor")
            word = idx % V
            seqs = torch.cat([seqs.index_select(0, beam), word.unsqueeze(1)], 1)
            state = (state[0][beam], state[1].gather(0, beam.unsqueeze(1).expand(-1, H)))
            scores = top
    return losses, seqs, scores, fc.weight.grad, cnn[1].running_var


def conformer_ctc(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(35)
    rng = np.random.default_rng(35)
    B, T, D, K = 2, 12, 8, 5
    x = torch.tensor(rng.standard_normal((B, T, D)), dtype=torch.float32)
    targets = torch.tensor([[1, 2, 3, 0], [4, 4, 0, 0]])
    tl = torch.tensor([3, 2])
    il = torch.tensor([12, 9])

    class ConvModule(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(D)
            self.pw1 = nn.Conv1d(D, 2 * D, 1)
            self.dw = nn.Conv1d(D, D, 5, padding=2, groups=D)
            self.bn = nn.BatchNorm1d(D)
            self.pw2 = nn.Conv1d(D, D, 1)

        def forward(self, x):
            h = self.ln(x).transpose(1, 2)
            h = F.glu(self.pw1(h), dim=1)
            h = F.silu(self.bn(self.dw(h)))
            return x + self.pw2(h).transpose(1, 2)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ff = nn.Sequential(nn.LayerNorm(D), nn.Linear(D, 16), nn.SiLU(),
                                    nn.Linear(16, D))
            self.mha = nn.MultiheadAttention(D, 2, batch_first=True)
            self.ln = nn.LayerNorm(D)
            self.conv = ConvModule()

        def forward(self, x, pad):
            x = x + 0.5 * self.ff(x)
            h = self.ln(x)
            x = x + self.mha(h, h, h, key_padding_mask=pad, need_weights=False)[0]
            return self.conv(x)

    blk = Block()
    head = nn.Linear(D, K)
    params = list(blk.parameters()) + list(head.parameters())
    opt = torch.optim.Adamax(params, lr=2e-3)
    pad = torch.arange(T).unsqueeze(0) >= il.unsqueeze(1)
    res = []
    for _ in range(3):
        lp = head(blk(x, pad)).log_softmax(-1).transpose(0, 1)
        loss = F.ctc_loss(lp, targets, il, tl, reduction="sum", zero_infinity=False)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res.append(loss.item())
    return res, lp, blk.conv.dw.weight.grad, blk.mha.in_proj_weight.grad


PROGRAMS += [caption_beam_search, conformer_ctc]


# bf16 rounding inside CPU autocast's backward differs by an ulp or so (layer_norm's backward
# on bfloat16 inputs): that program is compared at bfloat16's precision.
_TOLERANCES = {"amp_scaler": (2e-2, 2e-3)}


@pytest.mark.parametrize("prog", PROGRAMS, ids=[p.__name__ for p in PROGRAMS])
def test_program(prog):
    _check(prog, *_TOLERANCES.get(prog.__name__, (1e-4, 1e-5)))


def _fisher_snedecor(torch):
    D = torch.distributions
    a = torch.tensor([0.5, 2.0, 3.0], requires_grad=True)
    torch.manual_seed(0)
    d = D.FisherSnedecor(a + 1, a + 2)
    s = d.rsample((2,))
    s.sum().backward()
    plain = D.FisherSnedecor(torch.tensor([2.0]), torch.tensor([3.0])).rsample((2,))
    return s, a.grad, d.mode, plain, plain._version


def _uniform_mode(torch):
    low = torch.tensor([0.0, 1.0], requires_grad=True)
    high = torch.tensor([2.0, 3.0], requires_grad=True)
    return torch.distributions.Uniform(low, high).mode


def test_fisher_snedecor_clamps_in_place_and_masks_its_mode():
    """rsample's draws are clamped in place (ClampBackward1), the mode written through a mask
    (IndexPutBackward0)."""
    _check(_fisher_snedecor)


def test_uniform_mode_keeps_the_graph():
    """Uniform's mode is NaN computed from `high` (MulBackward0, requires grad)."""
    _check(_uniform_mode)


def _readable(torch):
    fx = torch.fx
    g = fx.symbolic_trace(lambda x: (x + 1).relu() * 2)
    nodes = list(g.graph.nodes)
    nodes[1].meta["stack_trace"] = '  File "a.py", line 3, in f\n    y = x + 1\n'
    nodes[3].meta["stack_trace"] = ('Traceback:\n  File "b.py", line 9, in outer\n    f()\n'
                                    '  File "a.py", line 4, in f\n    z = y * 2\n')
    g.recompile()

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.sub = fx.symbolic_trace(torch.nn.Sequential(torch.nn.ReLU()))
            self.lin = torch.nn.Linear(1, 1)
            self.sub2 = fx.symbolic_trace(lambda x: x * 2)

        def forward(self, x):
            return self.sub2(self.lin(self.sub(x)))

    tracer = fx.Tracer()
    tracer.is_leaf_module = lambda m, qualified_name: True
    nested = fx.GraphModule(Outer(), tracer.trace(Outer()))
    texts = [g.print_readable(False), g.code, nested.print_readable(False),
             fx.symbolic_trace(lambda x: x).print_readable(False)]
    # fusegrad's generated code names its own package where torch.fx writes `torch` (by design)
    return [t.replace("fusegrad", "torch") for t in texts]


def _iterate_proxy(torch):
    return torch.fx.symbolic_trace(lambda x: [a for a in x])


def test_print_readable_comments_stack_traces_and_nests_graph_modules():
    """print_readable heads each run of nodes with its stack trace's innermost frame (or
    that there is none) and shows GraphModule children as nested classes."""
    _check(_readable)


def test_iterating_a_proxy_is_pytorchs_trace_error():
    want, got = run_program(_iterate_proxy, torch)[1], run_program(_iterate_proxy, fg)[1]
    assert want is not None and got == want


class _Marker:
    """A user class used as an annotation."""


def _annotated(torch):
    import typing

    fx = torch.fx

    class M(torch.nn.Module):
        def forward(self, x: torch.Tensor, n: int = 2,
                    s: typing.Optional[torch.Tensor] = None) -> torch.Tensor:  # noqa: UP045
            return x * n

    # (the typing module's forms, as older code writes them, are what is tested)
    def f(x: torch.Tensor, y: "int", b: typing.List[int] = None,  # noqa: UP006
          c: typing.Dict[str, float] = None, d: typing.Union[int, float] = 1,  # noqa: UP006,UP007
          m: _Marker = None) -> typing.Tuple[torch.Tensor, torch.Tensor]:  # noqa: UP006
        return x + y * d, x

    def g(x: torch.Tensor, b: list[int] = None, c: int | None = None,
          d: tuple[torch.Tensor, ...] = ()) -> dict[str, torch.Tensor]:
        return {"a": x}

    out = []
    for gm in (fx.symbolic_trace(M(), concrete_args={"s": None}), fx.symbolic_trace(f),
               fx.symbolic_trace(g)):
        out += [gm.code, str(gm.graph), str([str(n.type) for n in gm.graph.nodes])]
    out.append(fx.symbolic_trace(f)(torch.ones(2), 3))
    # fusegrad's generated code names its own package where torch.fx writes `torch` (by design)
    return [o.replace("fusegrad", "torch") if isinstance(o, str) else o for o in out]


def test_annotations_type_the_placeholders_and_the_signature():
    """Traced parameters' annotations become the placeholders' types: shown in print(graph)
    and written into the generated signature, with its return annotation."""
    _check(_annotated)


def _specialised_int(torch):
    fx = torch.fx

    class M(torch.nn.Module):
        def forward(self, x, k=3):
            return x * k

    gm = fx.symbolic_trace(M(), concrete_args={"k": 3})
    out = [gm.code.replace("fusegrad", "torch"), gm(torch.ones(2)).tolist()]
    try:
        torch._assert(torch.tensor(False), "not this")
    except AssertionError as e:
        out.append(str(e))
    return out


def test_concrete_int_argument_is_checked_by_torch_assert():
    """A specialised int argument is checked by `torch._assert` in the traced code, a public
    function of the top-level namespace as in PyTorch."""
    _check(_specialised_int)
