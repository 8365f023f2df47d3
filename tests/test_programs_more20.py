"""Whole programs written the way they are posted, compiled on the model, the loss or the
training step: a C51 distributional DQN (the target distribution projected onto the support by
floor and ceil with index_add_, a target network synced by load_state_dict, a replay buffer),
a decision transformer (returns-to-go by flip and cumsum, interleaved return, state and action
tokens, a causal nn.TransformerEncoderLayer), A-GEM continual learning (gradients flattened by
parameters_to_vector, projected against a memory gradient, written back into .grad), Meta-SGD
(learned per-parameter inner learning rates through functional_call and autograd.grad with
create_graph), an end-to-end memory network (position-encoded sentence sums, three hops with
adjacent weight tying), BiDAF span extraction (a trilinear similarity matrix, context-to-query
and query-to-context attention, masked start and end logits, the best span by triu), CenterNet
(a penalty-reduced focal loss on a Gaussian heatmap, peaks by max_pool2d, top-k decoding with
gathered offsets), a PSPNet head (pyramid pooling by adaptive_avg_pool2d, bilinear upsampling,
cross entropy with ignore_index, PolynomialLR), partial convolutions for inpainting (the mask
updated by a convolution of ones, re-normalised outputs, hole and valid L1 terms), xDeepFM (a
compressed interaction network by einsum outer products and conv1d, Adagrad), SimSiam (a
predictor and a stop-gradient negative cosine, a fixed-rate parameter group), InfoGAN (a
categorical and a continuous latent code recovered by a Q head, gaussian_nll_loss), a
Wasserstein autoencoder with an inverse multiquadric MMD, and a hidden Markov model trained by
its forward algorithm (logsumexp recursion, posteriors as the log-likelihood's gradient, Viterbi
decoding).

As in test_programs_more19.py, `test_program` compares the torch and fusegrad runs value by
value, `test_compiled_matches_eager` compares fusegrad compiled under each backend with eager
fusegrad, and `test_compiled_graph_breaks` checks that fusegrad breaks the graph no more often
than torch.compile does (recorded in _TORCH_BREAKS, checked against torch by
`test_torch_graph_breaks`)."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import collections  # noqa: E402
import math  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from program_support import maybe_compile as _maybe_compile  # noqa: E402
from program_support import program_tests  # noqa: E402

import fusegrad as fg  # noqa: E402

PROGRAMS = []


def c51_distributional_dqn(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    n_atoms, v_min, v_max, n_actions, gamma = 11, -2.0, 2.0, 3, 0.9
    support = torch.linspace(v_min, v_max, n_atoms)
    delta_z = (v_max - v_min) / (n_atoms - 1)

    class DistributionalNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU())
            self.head = nn.Linear(16, n_actions * n_atoms)

        def forward(self, s):
            logits = self.head(self.body(s)).view(-1, n_actions, n_atoms)
            return F.softmax(logits, dim=-1)

    online, target = DistributionalNet(), DistributionalNet()
    target.load_state_dict(online.state_dict())
    run = _maybe_compile(torch, compiled)(online)
    opt = torch.optim.Adam(online.parameters(), lr=1e-2)
    replay = collections.deque(maxlen=32)
    for _ in range(24):
        s = rng.standard_normal(4).astype(np.float32)
        replay.append((s, int(rng.integers(0, n_actions)), float(rng.standard_normal()),
                       rng.standard_normal(4).astype(np.float32), bool(rng.random() < 0.2)))

    def project(next_probs, rewards, dones):
        tz = (rewards[:, None] + gamma * (1 - dones[:, None]) * support[None]).clamp(v_min,
                                                                                      v_max)
        b = (tz - v_min) / delta_z
        lower, upper = b.floor().long(), b.ceil().long()
        # an atom landing exactly on the support keeps its whole mass
        lower[(upper > 0) & (lower == upper)] -= 1
        upper[(lower < n_atoms - 1) & (lower == upper)] += 1
        m = torch.zeros(len(rewards) * n_atoms)
        offset = (torch.arange(len(rewards)) * n_atoms)[:, None]
        m.index_add_(0, (lower + offset).view(-1), (next_probs * (upper - b)).view(-1))
        m.index_add_(0, (upper + offset).view(-1), (next_probs * (b - lower)).view(-1))
        return m.view(len(rewards), n_atoms)

    rec = []
    for step in range(5):
        idx = rng.choice(len(replay), size=8, replace=False)
        batch = [replay[i] for i in idx]
        s = torch.tensor(np.stack([b[0] for b in batch]))
        a = torch.tensor([b[1] for b in batch])
        r = torch.tensor([b[2] for b in batch])
        s2 = torch.tensor(np.stack([b[3] for b in batch]))
        d = torch.tensor([b[4] for b in batch], dtype=torch.float32)
        with torch.no_grad():
            next_dist = target(s2)
            best = (next_dist * support).sum(-1).argmax(-1)
            target_dist = project(next_dist[torch.arange(8), best], r, d)
        probs = run(s)[torch.arange(8), a]
        loss = -(target_dist * probs.clamp_min(1e-6).log()).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 2 == 1:
            target.load_state_dict(online.state_dict())
        rec.append((loss.item(), target_dist.sum(-1)))
    return rec, online.head.weight.grad, (run(s) * support).sum(-1)


PROGRAMS += [c51_distributional_dqn]


def decision_transformer_rtg(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(1)
    rng = np.random.default_rng(1)
    T, state_dim, act_dim, d = 5, 3, 2, 16
    states = torch.tensor(rng.standard_normal((4, T, state_dim)), dtype=torch.float32)
    actions = torch.tensor(rng.uniform(-1, 1, (4, T, act_dim)), dtype=torch.float32)
    rewards = torch.tensor(rng.standard_normal((4, T)), dtype=torch.float32)
    returns_to_go = rewards.flip(1).cumsum(1).flip(1)

    class DecisionTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_return = nn.Linear(1, d)
            self.embed_state = nn.Linear(state_dim, d)
            self.embed_action = nn.Linear(act_dim, d)
            self.embed_time = nn.Embedding(T, d)
            self.ln = nn.LayerNorm(d)
            self.block = nn.TransformerEncoderLayer(d, 2, dim_feedforward=32, dropout=0.0,
                                                    batch_first=True, norm_first=True)
            self.predict_action = nn.Sequential(nn.Linear(d, act_dim), nn.Tanh())

        def forward(self, rtg, s, a):
            B, L = s.shape[:2]
            t = self.embed_time(torch.arange(L)).unsqueeze(0)
            tokens = torch.stack([self.embed_return(rtg.unsqueeze(-1)) + t,
                                  self.embed_state(s) + t, self.embed_action(a) + t], dim=2)
            tokens = self.ln(tokens.reshape(B, 3 * L, d))
            mask = nn.Transformer.generate_square_subsequent_mask(3 * L)
            h = self.block(tokens, src_mask=mask, is_causal=True).reshape(B, L, 3, d)
            # actions are predicted from the state tokens, which see the return before them
            return self.predict_action(h[:, :, 1])

    model = DecisionTransformer()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / 3, 1.0))
    rec = []
    for _ in range(4):
        pred = run(returns_to_go, states, actions)
        loss = F.mse_loss(pred, actions)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        sched.step()
        rec.append((loss.item(), sched.get_last_lr()[0]))
    return rec, returns_to_go, pred.detach(), model.embed_return.weight.grad


PROGRAMS += [decision_transformer_rtg]


def agem_gradient_projection(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    vec = torch.nn.utils.parameters_to_vector
    torch.manual_seed(2)
    rng = np.random.default_rng(2)

    def task(shift):
        x = torch.tensor(rng.standard_normal((24, 5)) + shift, dtype=torch.float32)
        y = torch.tensor((x.numpy() @ np.array([1.0, -1, 0.5, 0, 2]) > shift).astype(np.int64))
        return x, y

    tasks = [task(0.0), task(1.5)]
    model = nn.Sequential(nn.Linear(5, 12), nn.Tanh(), nn.Linear(12, 2))
    loss_of = _maybe_compile(torch, compiled)(lambda x, y: F.cross_entropy(model(x), y))
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    params = list(model.parameters())
    memory, rec = None, []

    def flat_grad(loss):
        opt.zero_grad()
        loss.backward()
        return vec([p.grad for p in params])

    for t, (x, y) in enumerate(tasks):
        for step in range(4):
            xb, yb = x[step * 6:step * 6 + 6], y[step * 6:step * 6 + 6]
            if memory is not None:
                g_ref = flat_grad(loss_of(*memory))
            g = flat_grad(loss_of(xb, yb))
            projected = False
            if memory is not None:
                dot = torch.dot(g, g_ref)
                if dot < 0:
                    g = g - dot / torch.dot(g_ref, g_ref) * g_ref
                    projected = True
            offset = 0
            for p in params:
                p.grad.copy_(g[offset:offset + p.numel()].view_as(p))
                offset += p.numel()
            opt.step()
            rec.append((t, projected, g.norm().item()))
        memory = (x[:8], y[:8])
    with torch.no_grad():
        accs = [(model(x).argmax(1) == y).float().mean().item() for x, y in tasks]
    return rec, accs, model[0].weight


PROGRAMS += [agem_gradient_projection]


def meta_sgd_learned_lrs(torch, compiled=False):
    nn = torch.nn
    from importlib import import_module

    functional_call = import_module(torch.__name__ + ".func").functional_call
    torch.manual_seed(3)
    rng = np.random.default_rng(3)
    model = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))
    names = [n for n, _ in model.named_parameters()]
    alphas = nn.ParameterList([nn.Parameter(torch.full_like(p, 0.05))
                               for p in model.parameters()])
    meta_opt = torch.optim.Adam(list(model.parameters()) + list(alphas), lr=5e-3)

    def sine_task():
        amp, phase = rng.uniform(0.5, 2.0), rng.uniform(0, math.pi)
        x = rng.uniform(-3, 3, (10, 1)).astype(np.float32)
        return torch.tensor(x), torch.tensor((amp * np.sin(x + phase)).astype(np.float32))

    def adapted_loss(xs, ys, xq, yq):
        params = dict(model.named_parameters())
        support = (functional_call(model, params, (xs,)) - ys).pow(2).mean()
        grads = torch.autograd.grad(support, list(params.values()), create_graph=True)
        fast = {n: params[n] - a * g for n, a, g in zip(names, alphas, grads)}
        return (functional_call(model, fast, (xq,)) - yq).pow(2).mean(), support

    step_loss = _maybe_compile(torch, compiled)(adapted_loss)
    rec = []
    for _ in range(4):
        meta_opt.zero_grad()
        total = 0.0
        for _ in range(2):
            x, y = sine_task()
            query, support = step_loss(x[:5], y[:5], x[5:], y[5:])
            (query / 2).backward()
            total += query.item()
        meta_opt.step()
        rec.append((total, support.item()))
    return rec, [a.detach() for a in alphas], alphas[0].grad, model[2].bias.grad


PROGRAMS += [meta_sgd_learned_lrs]


def memn2n_multi_hop(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(4)
    rng = np.random.default_rng(4)
    vocab, d, hops, n_mem, sent_len = 20, 12, 3, 6, 4
    stories = torch.tensor(rng.integers(1, vocab, (8, n_mem, sent_len)))
    stories[:, :, -1] = 0  # padded last word
    questions = torch.tensor(rng.integers(1, vocab, (8, sent_len)))
    answers = torch.tensor(rng.integers(0, vocab, 8))

    def position_encoding(J, d):
        j = torch.arange(1, J + 1, dtype=torch.float32)[:, None]
        k = torch.arange(1, d + 1, dtype=torch.float32)[None]
        return (1 - j / J) - (k / d) * (1 - 2 * j / J)

    class MemN2N(nn.Module):
        def __init__(self):
            super().__init__()
            # adjacent tying: the output embedding of hop k is the input embedding of hop k+1
            self.embeds = nn.ModuleList([nn.Embedding(vocab, d, padding_idx=0)
                                         for _ in range(hops + 1)])
            self.temporal = nn.Parameter(torch.randn(hops + 1, n_mem, d) * 0.1)
            self.register_buffer("pe", position_encoding(sent_len, d))

        def forward(self, story, question):
            u = (self.embeds[0](question) * self.pe).sum(1)
            attentions = []
            for k in range(hops):
                m = (self.embeds[k](story) * self.pe).sum(2) + self.temporal[k]
                c = (self.embeds[k + 1](story) * self.pe).sum(2) + self.temporal[k + 1]
                p = F.softmax(torch.einsum("bmd,bd->bm", m, u), dim=1)
                u = u + torch.einsum("bm,bmd->bd", p, c)
                attentions.append(p)
            return u @ self.embeds[-1].weight.T, torch.stack(attentions, 1)

    model = MemN2N()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rec = []
    for _ in range(4):
        logits, att = run(stories, questions)
        loss = F.cross_entropy(logits, answers)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 40.0)
        opt.step()
        # the padding row stays zero
        rec.append((loss.item(), model.embeds[1].weight[0].abs().sum().item()))
    return rec, att.detach(), model.temporal.grad, model.embeds[2].weight.grad


PROGRAMS += [memn2n_multi_hop]


def bidaf_span_extraction(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(5)
    rng = np.random.default_rng(5)
    vocab, d, B, Lc, Lq = 25, 8, 3, 9, 4
    context = torch.tensor(rng.integers(1, vocab, (B, Lc)))
    query = torch.tensor(rng.integers(1, vocab, (B, Lq)))
    c_len, q_len = torch.tensor([9, 7, 6]), torch.tensor([4, 3, 4])
    c_mask = torch.arange(Lc)[None] < c_len[:, None]
    q_mask = torch.arange(Lq)[None] < q_len[:, None]
    context = context.masked_fill(~c_mask, 0)
    starts, ends = torch.tensor([1, 2, 0]), torch.tensor([3, 2, 4])

    class BiDAF(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, d, padding_idx=0)
            self.enc = nn.Linear(d, d)
            self.w_sim = nn.Linear(3 * d, 1, bias=False)
            self.model_layer = nn.Linear(4 * d, d)
            self.start_head, self.end_head = nn.Linear(5 * d, 1), nn.Linear(5 * d, 1)

        def forward(self, c_ids, q_ids, c_mask, q_mask):
            c, q = torch.tanh(self.enc(self.embed(c_ids))), torch.tanh(self.enc(self.embed(q_ids)))
            ce = c.unsqueeze(2).expand(-1, -1, q.shape[1], -1)
            qe = q.unsqueeze(1).expand(-1, c.shape[1], -1, -1)
            s = self.w_sim(torch.cat([ce, qe, ce * qe], -1)).squeeze(-1)  # (B, Lc, Lq)
            a = F.softmax(s.masked_fill(~q_mask[:, None], -1e30), dim=-1)
            c2q = a @ q
            b = F.softmax(s.max(-1).values.masked_fill(~c_mask, -1e30), dim=-1)
            q2c = (b.unsqueeze(1) @ c).expand(-1, c.shape[1], -1)
            g = torch.cat([c, c2q, c * c2q, c * q2c], -1)
            m = torch.relu(self.model_layer(g))
            gm = torch.cat([g, m], -1)
            start = self.start_head(gm).squeeze(-1).masked_fill(~c_mask, -1e30)
            end = self.end_head(gm).squeeze(-1).masked_fill(~c_mask, -1e30)
            return start, end

    model = BiDAF()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
    rec = []
    for _ in range(4):
        start, end = run(context, query, c_mask, q_mask)
        loss = F.cross_entropy(start, starts) + F.cross_entropy(end, ends)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    with torch.no_grad():
        p = F.softmax(start, -1).unsqueeze(2) * F.softmax(end, -1).unsqueeze(1)
        p = torch.triu(p).tril(3)  # spans of at most four tokens, end after start
        best = p.flatten(1).argmax(-1)
    return rec, best // Lc, best % Lc, model.w_sim.weight.grad, model.embed.weight.grad[0]


PROGRAMS += [bidaf_span_extraction]


def centernet_heatmap_decode(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(6)
    H = W = 8
    centers = [[(2, 3), (6, 5)], [(4, 4)]]
    heat = torch.zeros(2, 1, H, W)
    ys, xs = torch.meshgrid(torch.arange(H, dtype=torch.float32),
                            torch.arange(W, dtype=torch.float32), indexing="ij")
    for b, objects in enumerate(centers):
        for cy, cx in objects:
            g = torch.exp(-((ys - cy) ** 2 + (xs - cx) ** 2) / (2 * 1.0 ** 2))
            heat[b, 0] = torch.maximum(heat[b, 0], g)
    images = heat.repeat(1, 3, 1, 1) + 0.1 * torch.randn(2, 3, H, W)

    class CenterHead(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                                      nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
            self.heatmap = nn.Conv2d(16, 1, 1)
            self.offset = nn.Conv2d(16, 2, 1)
            nn.init.constant_(self.heatmap.bias, -2.19)  # a prior of 0.1 objects a pixel

        def forward(self, x):
            f = self.body(x)
            return self.heatmap(f).sigmoid().clamp(1e-4, 1 - 1e-4), self.offset(f)

    def focal(pred, gt, alpha=2, beta=4):
        pos = gt.eq(1).float()
        pos_loss = torch.log(pred) * (1 - pred) ** alpha * pos
        neg_loss = torch.log(1 - pred) * pred ** alpha * (1 - gt) ** beta * (1 - pos)
        return -(pos_loss.sum() + neg_loss.sum()) / pos.sum().clamp(min=1)

    model = CenterHead()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    rec = []
    for _ in range(4):
        pred, offset = run(images)
        loss = focal(pred, heat) + 0.1 * offset.abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    with torch.no_grad():
        peaks = F.max_pool2d(pred, 3, stride=1, padding=1)
        kept = pred * (peaks == pred).float()
        scores, idx = kept.flatten(1).topk(3)
        off = offset.flatten(2).gather(2, idx.unsqueeze(1).expand(-1, 2, -1))
        boxes = torch.stack([idx // W + off[:, 0], idx % W + off[:, 1]], -1)
    return rec, scores, idx, boxes, model.heatmap.weight.grad


PROGRAMS += [centernet_heatmap_decode]


def pspnet_pyramid_pooling(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(7)
    rng = np.random.default_rng(7)
    images = torch.tensor(rng.standard_normal((2, 3, 12, 12)), dtype=torch.float32)
    labels = torch.tensor(rng.integers(0, 4, (2, 12, 12)))
    labels[:, :2] = 255  # unlabelled border rows

    class PyramidPooling(nn.Module):
        def __init__(self, channels, bins=(1, 2, 3)):
            super().__init__()
            self.bins = bins
            self.stages = nn.ModuleList([
                nn.Sequential(nn.Conv2d(channels, channels // 4, 1, bias=False),
                              nn.BatchNorm2d(channels // 4), nn.ReLU()) for _ in bins])

        def forward(self, x):
            size = x.shape[-2:]
            pooled = [F.interpolate(stage(F.adaptive_avg_pool2d(x, b)), size=size,
                                    mode="bilinear", align_corners=False)
                      for b, stage in zip(self.bins, self.stages)]
            return torch.cat([x] + pooled, dim=1)

    class PSPNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1),
                                          nn.BatchNorm2d(16), nn.ReLU())
            self.ppm = PyramidPooling(16)
            self.classifier = nn.Sequential(nn.Conv2d(16 + 3 * 4, 8, 3, padding=1), nn.ReLU(),
                                            nn.Dropout2d(0.0), nn.Conv2d(8, 4, 1))

        def forward(self, x):
            out = self.classifier(self.ppm(self.backbone(x)))
            return F.interpolate(out, size=x.shape[-2:], mode="bilinear", align_corners=False)

    model = PSPNet()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.PolynomialLR(opt, total_iters=4, power=0.9)
    criterion = nn.CrossEntropyLoss(ignore_index=255)
    rec = []
    for _ in range(4):
        out = run(images)
        loss = criterion(out, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        rec.append((loss.item(), opt.param_groups[0]["lr"]))
    valid = labels != 255
    pixel_acc = (out.argmax(1)[valid] == labels[valid]).float().mean()
    return rec, pixel_acc, model.ppm.stages[1][0].weight.grad, model.backbone[1].running_var


PROGRAMS += [pspnet_pyramid_pooling]


def partial_conv_inpainting(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(8)
    rng = np.random.default_rng(8)
    images = torch.tensor(rng.uniform(0, 1, (2, 3, 10, 10)), dtype=torch.float32)
    masks = torch.ones(2, 1, 10, 10)
    masks[0, :, 3:7, 2:6] = 0
    masks[1, :, 5:9, 4:9] = 0

    class PartialConv2d(nn.Conv2d):
        def forward(self, x, mask):
            with torch.no_grad():
                ones = torch.ones(1, 1, *self.kernel_size)
                coverage = F.conv2d(mask, ones, stride=self.stride, padding=self.padding)
                new_mask = coverage.clamp(0, 1)
                ratio = self.kernel_size[0] * self.kernel_size[1] / coverage.clamp(min=1e-8)
                ratio = ratio * new_mask
            raw = F.conv2d(x * mask, self.weight, None, self.stride, self.padding)
            out = raw * ratio + self.bias.view(1, -1, 1, 1)
            return out * new_mask, new_mask

    class InpaintNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc1 = PartialConv2d(3, 8, 3, padding=1)
            self.enc2 = PartialConv2d(8, 8, 3, padding=1)
            self.dec = PartialConv2d(11, 3, 3, padding=1)

        def forward(self, x, mask):
            h, m = self.enc1(x, mask)
            h = F.relu(h)
            h, m = self.enc2(h, m)
            h = F.leaky_relu(h, 0.2)
            out, _ = self.dec(torch.cat([h, x], 1), torch.max(m, mask))
            return torch.sigmoid(out), m

    model = InpaintNet()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    rec = []
    for _ in range(4):
        out, final_mask = run(images * masks, masks)
        hole = F.l1_loss((1 - masks) * out, (1 - masks) * images)
        valid = F.l1_loss(masks * out, masks * images)
        composite = masks * images + (1 - masks) * out
        tv = (composite[..., 1:, :] - composite[..., :-1, :]).abs().mean()
        loss = 6 * hole + valid + 0.1 * tv
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((hole.item(), valid.item()))
    return rec, final_mask.sum((1, 2, 3)), model.enc1.weight.grad, model.dec.bias.grad


PROGRAMS += [partial_conv_inpainting]


def xdeepfm_cin(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(9)
    rng = np.random.default_rng(9)
    field_sizes, k = [5, 7, 4], 6
    offsets = torch.tensor(np.cumsum([0] + field_sizes[:-1]))
    ids = torch.tensor(np.stack([rng.integers(0, s, 32) for s in field_sizes], 1))
    clicks = torch.tensor(rng.random(32) < 0.3, dtype=torch.float32)

    class CIN(nn.Module):
        def __init__(self, m, layers=(4, 4)):
            super().__init__()
            self.convs = nn.ModuleList()
            h = m
            for n in layers:
                self.convs.append(nn.Conv1d(m * h, n, 1))
                h = n

        def forward(self, x0):  # (B, m, k)
            xs, xk = [], x0
            for conv in self.convs:
                z = torch.einsum("bhd,bmd->bhmd", xk, x0).flatten(1, 2)
                xk = F.relu(conv(z))
                xs.append(xk.sum(-1))
            return torch.cat(xs, 1)

    class XDeepFM(nn.Module):
        def __init__(self):
            super().__init__()
            n = sum(field_sizes)
            self.embed = nn.Embedding(n, k)
            self.linear = nn.Embedding(n, 1)
            self.bias = nn.Parameter(torch.zeros(1))
            self.cin = CIN(len(field_sizes))
            self.cin_out = nn.Linear(8, 1)
            self.dnn = nn.Sequential(nn.Linear(len(field_sizes) * k, 16), nn.ReLU(),
                                     nn.Linear(16, 1))

        def forward(self, ids):
            idx = ids + offsets
            e = self.embed(idx)
            logit = self.linear(idx).sum((1, 2)) + self.bias
            logit = logit + self.cin_out(self.cin(e)).squeeze(-1)
            return logit + self.dnn(e.flatten(1)).squeeze(-1)

    model = XDeepFM()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.05, initial_accumulator_value=0.1)
    pos_weight = (1 - clicks.mean()) / clicks.mean()
    rec = []
    for step in range(4):
        batch = slice(step * 8, step * 8 + 8)
        logits = run(ids[batch])
        loss = F.binary_cross_entropy_with_logits(logits, clicks[batch], pos_weight=pos_weight)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    return rec, torch.sigmoid(logits), model.cin.convs[0].weight.grad, model.embed.weight.grad


PROGRAMS += [xdeepfm_cin]


def simsiam_stop_gradient(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(10)
    rng = np.random.default_rng(10)
    data = torch.tensor(rng.standard_normal((16, 10)), dtype=torch.float32)

    class SimSiam(nn.Module):
        def __init__(self, dim=12, pred_dim=4):
            super().__init__()
            self.encoder = nn.Sequential(nn.Linear(10, 16, bias=False), nn.BatchNorm1d(16),
                                         nn.ReLU(), nn.Linear(16, dim, bias=False),
                                         nn.BatchNorm1d(dim, affine=False))
            self.predictor = nn.Sequential(nn.Linear(dim, pred_dim, bias=False),
                                           nn.BatchNorm1d(pred_dim), nn.ReLU(),
                                           nn.Linear(pred_dim, dim))

        def forward(self, x1, x2):
            z1, z2 = self.encoder(x1), self.encoder(x2)
            p1, p2 = self.predictor(z1), self.predictor(z2)
            return p1, p2, z1.detach(), z2.detach()

    model = SimSiam()
    run = _maybe_compile(torch, compiled)(model)
    criterion = nn.CosineSimilarity(dim=1)
    base_lr = 0.05 * 8 / 256 * 10
    # the predictor keeps a fixed learning rate; the encoder's follows the cosine schedule
    groups = [{"params": model.encoder.parameters(), "fix_lr": False},
              {"params": model.predictor.parameters(), "fix_lr": True}]
    opt = torch.optim.SGD(groups, lr=base_lr, momentum=0.9, weight_decay=1e-4)
    rec = []
    for epoch in range(4):
        lr = base_lr * 0.5 * (1 + math.cos(math.pi * epoch / 4))
        for group in opt.param_groups:
            group["lr"] = base_lr if group["fix_lr"] else lr
        x = data[(epoch % 2) * 8:(epoch % 2) * 8 + 8]
        x1, x2 = x + 0.2 * torch.randn_like(x), x * (torch.rand_like(x) > 0.2)
        p1, p2, z1, z2 = run(x1, x2)
        loss = -(criterion(p1, z2).mean() + criterion(p2, z1).mean()) * 0.5
        opt.zero_grad()
        loss.backward()
        opt.step()
        # a collapse shows as the normalised outputs' spread going to zero
        rec.append((loss.item(), F.normalize(z1, dim=1).std(0).mean().item()))
    return rec, model.predictor[0].weight.grad, model.encoder[4].running_mean


PROGRAMS += [simsiam_stop_gradient]


def infogan_codes(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(11)
    rng = np.random.default_rng(11)
    real = torch.tensor(rng.standard_normal((16, 6)) * 0.5 + 1.0, dtype=torch.float32)
    n_cat, n_cont, n_noise = 3, 1, 4

    G = nn.Sequential(nn.Linear(n_noise + n_cat + n_cont, 16), nn.ReLU(), nn.Linear(16, 6))
    D_body = nn.Sequential(nn.Linear(6, 16), nn.LeakyReLU(0.1))
    D_head = nn.Linear(16, 1)
    Q_head = nn.Linear(16, n_cat + 2 * n_cont)

    def discriminate(x):
        h = D_body(x)
        q = Q_head(h)
        return D_head(h).squeeze(-1), q[:, :n_cat], q[:, n_cat:n_cat + n_cont], \
            q[:, n_cat + n_cont:]

    disc = _maybe_compile(torch, compiled)(discriminate)
    opt_d = torch.optim.Adam(list(D_body.parameters()) + list(D_head.parameters()), lr=2e-3,
                             betas=(0.5, 0.999))
    opt_gq = torch.optim.Adam(list(G.parameters()) + list(Q_head.parameters()), lr=1e-3,
                              betas=(0.5, 0.999))
    rec = []
    for step in range(4):
        cat = torch.randint(0, n_cat, (8,))
        cont = torch.rand(8, n_cont) * 2 - 1
        z = torch.cat([torch.randn(8, n_noise), F.one_hot(cat, n_cat).float(), cont], 1)
        fake = G(z)
        x = real[(step % 2) * 8:(step % 2) * 8 + 8]
        d_real, *_ = disc(x)
        d_fake, *_ = disc(fake.detach())
        loss_d = F.binary_cross_entropy_with_logits(d_real, torch.ones(8)) + \
            F.binary_cross_entropy_with_logits(d_fake, torch.zeros(8))
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()
        d_fake, cat_logits, mu, log_sigma = disc(fake)
        info_cat = F.cross_entropy(cat_logits, cat)
        info_cont = F.gaussian_nll_loss(mu, cont, log_sigma.exp().pow(2))
        loss_g = F.binary_cross_entropy_with_logits(d_fake, torch.ones(8)) + info_cat + \
            0.1 * info_cont
        opt_gq.zero_grad()
        loss_g.backward()
        opt_gq.step()
        rec.append((loss_d.item(), loss_g.item(), info_cat.item()))
    return rec, Q_head.weight.grad, G[0].weight.grad, D_head.bias


PROGRAMS += [infogan_codes]


def wae_mmd_imq(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(12)
    rng = np.random.default_rng(12)
    data = torch.tensor(rng.standard_normal((24, 8)), dtype=torch.float32).tanh()
    latent = 2

    def imq_mmd(z, z_prior, scales=(0.2, 0.5, 1.0)):
        n = z.shape[0]
        c_base = 2.0 * latent
        zz, pp, zp = (z @ z.T), (z_prior @ z_prior.T), (z @ z_prior.T)
        d_z = zz.diag()[:, None] + zz.diag()[None] - 2 * zz
        d_p = pp.diag()[:, None] + pp.diag()[None] - 2 * pp
        d_zp = zz.diag()[:, None] + pp.diag()[None] - 2 * zp
        off_diag = 1 - torch.eye(n)
        total = 0.0
        for s in scales:
            c = c_base * s
            total = total + ((c / (c + d_z)) * off_diag).sum() / (n * (n - 1)) \
                + ((c / (c + d_p)) * off_diag).sum() / (n * (n - 1)) \
                - 2 * (c / (c + d_zp)).sum() / (n * n)
        return total

    encoder = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, latent))
    decoder = nn.Sequential(nn.Linear(latent, 16), nn.ReLU(), nn.Linear(16, 8), nn.Tanh())

    def losses(x, z_prior):
        z = encoder(x)
        recon = F.mse_loss(decoder(z), x, reduction="sum") / x.shape[0]
        return recon, imq_mmd(z, z_prior)

    step_losses = _maybe_compile(torch, compiled)(losses)
    params = list(encoder.parameters()) + list(decoder.parameters())
    opt = torch.optim.Adam(params, lr=3e-3)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[2, 3], gamma=0.5)
    rec = []
    for step in range(4):
        x = data[(step % 3) * 8:(step % 3) * 8 + 8]
        recon, mmd = step_losses(x, torch.randn(8, latent))
        loss = recon + 10.0 * mmd
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        rec.append((recon.item(), mmd.item()))
    return rec, encoder[0].weight.grad, decoder[2].bias


PROGRAMS += [wae_mmd_imq]


def hmm_forward_viterbi(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(13)
    rng = np.random.default_rng(13)
    n_states, n_symbols, T = 3, 4, 7
    obs = torch.tensor(rng.integers(0, n_symbols, (5, T)))

    class HMM(nn.Module):
        def __init__(self):
            super().__init__()
            self.start_logits = nn.Parameter(torch.randn(n_states))
            self.trans_logits = nn.Parameter(torch.randn(n_states, n_states))
            self.emit_logits = nn.Parameter(torch.randn(n_states, n_symbols))

        def log_probs(self):
            return (F.log_softmax(self.start_logits, 0), F.log_softmax(self.trans_logits, 1),
                    F.log_softmax(self.emit_logits, 1))

        def forward(self, obs, emission_scores=None):
            log_start, log_trans, log_emit = self.log_probs()
            emissions = log_emit[:, obs].permute(1, 2, 0)  # (B, T, states)
            if emission_scores is not None:
                emissions = emissions + emission_scores
            alpha = log_start + emissions[:, 0]
            for t in range(1, obs.shape[1]):
                alpha = torch.logsumexp(alpha.unsqueeze(2) + log_trans, dim=1) + emissions[:, t]
            return torch.logsumexp(alpha, dim=1)

    model = HMM()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    rec = []
    for _ in range(4):
        nll = -run(obs).mean()
        opt.zero_grad()
        nll.backward()
        opt.step()
        rec.append(nll.item())
    # the posterior marginals are the log-likelihood's gradient with respect to the emissions
    scores = torch.zeros(5, T, n_states, requires_grad=True)
    (posteriors,) = torch.autograd.grad(run(obs, scores).sum(), scores)
    with torch.no_grad():
        log_start, log_trans, log_emit = model.log_probs()
        emissions = log_emit[:, obs].permute(1, 2, 0)
        delta, back = log_start + emissions[:, 0], []
        for t in range(1, T):
            best, arg = (delta.unsqueeze(2) + log_trans).max(dim=1)
            delta = best + emissions[:, t]
            back.append(arg)
        path = [delta.argmax(1)]
        for arg in reversed(back):
            path.append(arg.gather(1, path[-1].unsqueeze(1)).squeeze(1))
        path = torch.stack(path[::-1], 1)
    return rec, posteriors, posteriors.sum(-1), path, model.trans_logits.grad


PROGRAMS += [hmm_forward_viterbi]


# Loosened where a program's values are long sums of float32 rounding that PyTorch's kernels
# and NumPy's accumulate in a different order (none so far).
_TOLERANCES: dict = {}

# The code generator's compile time dominates the file's: the programs run on inductor are
# a few whose graphs are small; the others run on eager and aot_eager only.
_ON_INDUCTOR = {"centernet_heatmap_decode", "xdeepfm_cin", "wae_mmd_imq"}

# Programs whose compiled runs differ from eager fusegrad (values or errors), under every
# backend, with each gap's minimal repro.
_COMPILED_GAPS: dict = {}

# The graph breaks torch.compile (2.13, backend="eager") takes at least in each compiled
# program; a program left out takes none.
_TORCH_BREAKS = {
    # the inner step's autograd.grad ('using `torch.autograd.grad` with
    # `torch._dynamo.config.trace_autograd_ops=False`'); fusegrad captures it
    "meta_sgd_learned_lrs": 1,
}

# Programs where fusegrad breaks the graph more often than torch does, with each gap's minimal
# repro.
_CAPTURE_GAPS: dict = {}

# The file's tests over its programs, with the tables above (program_tests).
(test_program, test_compiled_matches_eager, test_compiled_graph_breaks,
 test_torch_graph_breaks) = program_tests(
    PROGRAMS, torch, fg, tolerances=_TOLERANCES, on_inductor=_ON_INDUCTOR,
    compiled_gaps=_COMPILED_GAPS, torch_breaks=_TORCH_BREAKS, capture_gaps=_CAPTURE_GAPS)
