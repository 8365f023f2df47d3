"""Whole programs written the way they are posted, compiled on the model, the loss or the
training step: a ResNeXt block with CBAM's channel and spatial gates (grouped convolution,
nesterov SGD), DiT's adaLN-Zero blocks (zero-initialised modulation, sinusoidal timesteps,
unpatchify by einsum, classifier-free label dropout), finite scalar quantization (tanh bounds,
rounding straight through, code indices by a cumprod basis), virtual adversarial training
(a power iteration by autograd.grad on a random direction, KL by batchmean), elastic weight
consolidation (a Fisher diagonal from sampled labels, a quadratic anchor penalty), federated
averaging (deep-copied clients, state_dicts averaged by sample weight, BatchNorm's integer
counter cast back), SwAV (Sinkhorn-Knopp codes under no_grad, prototypes renormalised, their
gradients dropped at first), ELECTRA (a shared embedding, Gumbel-max replacements, a
discriminator's BCE), an RNN transducer loss written as the lattice's forward recursion by
logaddexp, Tacotron's location-sensitive attention (cumulative weights through a Conv1d,
LSTMCell, teacher forcing), FixMatch (weak and strong views, a confidence mask on pseudo
labels), a relativistic average GAN, DeepAR with a negative binomial head and ancestral
sampling, Autoformer's series decomposition and FFT auto-correlation (time-delay aggregation
by gather), PatchTST with RevIN (unfold patches, OneCycleLR, a smaller batch at evaluation),
mixture-of-depths routing (top-k tokens gathered and scattered back, a bookkeeping function
marked torch.compiler.disable), a learned TransformedDistribution (affine and tanh
transforms), a Koopman autoencoder (matrix_power, lu_factor / lu_solve, eigvals), QR-DQN's
quantile Huber loss (torch.where chains, a double-DQN target), Performer's FAVOR+ features
(orthogonal random features by QR, redrawn mid-training, causal prefix sums), attention with
a key padding mask and a per-head ALiBi float mask (average_attn_weights=False), a PINN under
set_default_dtype(float64) (second derivatives by autograd.grad in the compiled loss), a
torchvision-style ViT (torch._assert on the image size), an adapter added by forward hooks
registered with_kwargs=True, a loss breakdown logged through dataclasses.asdict, xLSTM's
mLSTM (exponential gating stabilised in log space), DeltaNet's delta-rule fast weights,
a test-time-training layer (an inner gradient step per token with create_graph),
StyleGAN2's modulated convolution (demodulation, a grouped convolution over the batch, an R1
penalty), a user contextmanager switching autocast on and off, a PWC-Net style cost volume
(displacements by itertools.product), layers given the keyword arguments their signatures
accept (inspect.signature), LoRA wrappers forwarding attribute reads to the frozen base by
__getattr__, CLIP's temperature clamped through .data inside the compiled forward and a
SwiGLU autograd.Function under custom_fwd(cast_inputs=float32) inside bf16 autocast, a
classifier dividing by a learned temperature in its own __call__, a decoder silencing a
deprecation warning by warnings.catch_warnings in forward and detection losses fenced in
float32 by the deprecated torch.cuda.amp.autocast(enabled=False).

Tests against torch of what the programs found: a module class's own `__call__` was skipped
in compiled code (compiled calls returned forward's value, half the module's: the class's
`__call__` is inlined now, its `super().__call__` the module's forward between its hooks),
`warnings.catch_warnings()` in a compiled frame raised "Cannot enter catch_warnings()
twice" (the inlined `__enter__`'s mark was kept though the `with` then ran for real; the
warnings module is now called for real, never inlined), and the guard exportable models put
in forward (`jit.is_tracing() or onnx.is_in_onnx_export()`: fusegrad.onnx lacked
is_in_onnx_export; both fold in compiled code). A layer handing its auxiliary loss along as
a Python attribute of its output tensor is a strict xfail (fusegrad's tensors take no new
attributes, a decision recorded in docs/architecture.md).

As in test_programs_more15.py, `test_program` compares the torch and fusegrad runs value by
value, `test_compiled_matches_eager` compares fusegrad compiled under each backend with eager
fusegrad (no graph left to run eagerly; the programs of _COMPILED_GAPS, where compiled
fusegrad gives other values or fails, are strict xfails naming their minimal repro), and
`test_compiled_graph_breaks` checks that fusegrad breaks the graph no more often than
torch.compile does (recorded in _TORCH_BREAKS, checked against torch by
`test_torch_graph_breaks`); the gaps where fusegrad breaks more often are strict xfails
naming their minimal repro.

The programs that read distributions in compiled code pass validate_args=False, as compiled
programs do: the first compile of a process switches validation off (in torch and fusegrad
alike), and the test harness switches it back on before each test."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import copy  # noqa: E402
import math  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from program_support import maybe_compile as _maybe_compile  # noqa: E402
from program_support import program_tests  # noqa: E402

import fusegrad as fg  # noqa: E402

PROGRAMS = []


def cbam_resnext_block(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(11)
    rng = np.random.default_rng(11)
    x = torch.tensor(rng.standard_normal((4, 3, 12, 12)), dtype=torch.float32)
    y = torch.tensor([0, 2, 1, 2])

    class ChannelGate(nn.Module):
        def __init__(self, c, reduction=4):
            super().__init__()
            self.mlp = nn.Sequential(nn.Flatten(), nn.Linear(c, c // reduction), nn.ReLU(),
                                     nn.Linear(c // reduction, c))

        def forward(self, x):
            avg = self.mlp(F.adaptive_avg_pool2d(x, 1))
            mx = self.mlp(F.adaptive_max_pool2d(x, 1))
            return x * torch.sigmoid(avg + mx)[..., None, None]

    class SpatialGate(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 1, 7, padding=3, bias=False)
            self.bn = nn.BatchNorm2d(1)

        def forward(self, x):
            pooled = torch.cat([x.max(1, keepdim=True)[0], x.mean(1, keepdim=True)], dim=1)
            return x * torch.sigmoid(self.bn(self.conv(pooled)))

    class ResNeXtBlock(nn.Module):
        def __init__(self, c, width, groups):
            super().__init__()
            self.reduce = nn.Conv2d(c, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.grouped = nn.Conv2d(width, width, 3, padding=1, groups=groups, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.expand = nn.Conv2d(width, c, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(c)
            self.cbam = nn.Sequential(ChannelGate(c), SpatialGate())

        def forward(self, x):
            h = F.relu(self.bn1(self.reduce(x)))
            h = F.relu(self.bn2(self.grouped(h)))
            h = self.cbam(self.bn3(self.expand(h)))
            return F.relu(x + h)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False),
                                      nn.BatchNorm2d(8), nn.ReLU(inplace=True))
            self.block = ResNeXtBlock(8, 8, groups=4)
            self.head = nn.Linear(8, 3)

        def forward(self, x):
            h = self.block(self.stem(x))
            return self.head(torch.flatten(F.adaptive_avg_pool2d(h, 1), 1))

    model = Net()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                          weight_decay=1e-4)
    rec = []
    for _ in range(3):
        loss = F.cross_entropy(run(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    model.eval()
    with torch.no_grad():
        out = run(x)
    return (rec, out, model.block.cbam[1].bn.running_var, model.block.grouped.weight.grad,
            model.block.cbam[0].mlp[1].weight)


PROGRAMS += [cbam_resnext_block]


def dit_adaln_zero(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(12)
    rng = np.random.default_rng(12)
    images = torch.tensor(rng.standard_normal((4, 2, 8, 8)), dtype=torch.float32)
    labels = torch.tensor([0, 1, 2, 1])
    patch, dim = 4, 16

    def timestep_embedding(t, d, max_period=10000):
        half = d // 2
        freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32)
                          / half)
        args = t[:, None].float() * freqs[None]
        return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)

    def modulate(x, shift, scale):
        return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)

    class DiTBlock(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.norm1 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
            self.norm2 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
            self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(approximate="tanh"),
                                     nn.Linear(2 * d, d))
            self.ada = nn.Sequential(nn.SiLU(), nn.Linear(d, 6 * d))
            nn.init.zeros_(self.ada[1].weight)  # adaLN-Zero: each block starts as identity
            nn.init.zeros_(self.ada[1].bias)

        def forward(self, x, c):
            sh1, sc1, g1, sh2, sc2, g2 = self.ada(c).chunk(6, dim=1)
            h = modulate(self.norm1(x), sh1, sc1)
            x = x + g1.unsqueeze(1) * self.attn(h, h, h, need_weights=False)[0]
            return x + g2.unsqueeze(1) * self.mlp(modulate(self.norm2(x), sh2, sc2))

    class DiT(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Conv2d(2, dim, patch, stride=patch)
            self.pos = nn.Parameter(torch.zeros(1, 4, dim))
            self.t_mlp = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim))
            self.y_embed = nn.Embedding(4, dim)  # the last row is the null class
            self.blocks = nn.ModuleList([DiTBlock(dim, 2) for _ in range(2)])
            self.final_norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
            self.final_ada = nn.Sequential(nn.SiLU(), nn.Linear(dim, 2 * dim))
            self.out = nn.Linear(dim, patch * patch * 2)

        def forward(self, x, t, y):
            n, c, hh, ww = x.shape
            h = self.embed(x).flatten(2).transpose(1, 2) + self.pos
            cond = self.t_mlp(timestep_embedding(t, dim)) + self.y_embed(y)
            for block in self.blocks:
                h = block(h, cond)
            shift, scale = self.final_ada(cond).chunk(2, dim=1)
            h = self.out(modulate(self.final_norm(h), shift, scale))
            # unpatchify: (n, tokens, p*p*c) back to (n, c, H, W)
            g = hh // patch
            h = h.reshape(n, g, g, patch, patch, c)
            return torch.einsum("nhwpqc->nchpwq", h).reshape(n, c, hh, ww)

    model = DiT()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.0)
    betas = torch.linspace(1e-4, 0.2, 50)
    abar = torch.cumprod(1 - betas, 0)
    rec = []
    for _ in range(3):
        t = torch.randint(0, 50, (4,))
        noise = torch.randn_like(images)
        drop = torch.rand(4) < 0.25  # classifier-free guidance: drop some labels
        y = torch.where(drop, torch.full_like(labels, 3), labels)
        a = abar[t].view(-1, 1, 1, 1)
        noisy = a.sqrt() * images + (1 - a).sqrt() * noise
        loss = F.mse_loss(run(noisy, t, y), noise)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    return rec, model.blocks[0].ada[1].weight, model.final_ada[1].bias.grad, model.pos


PROGRAMS += [dit_adaln_zero]


def fsq_autoencoder(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(13)
    rng = np.random.default_rng(13)
    data = torch.tensor(rng.standard_normal((16, 10)), dtype=torch.float32)

    class FSQ(nn.Module):
        """Finite scalar quantization: each latent bounded then rounded to one of L levels."""

        def __init__(self, levels):
            super().__init__()
            self.register_buffer("levels", torch.tensor(levels, dtype=torch.int32),
                                 persistent=False)
            basis = torch.cumprod(torch.tensor([1] + levels[:-1]), dim=0, dtype=torch.int32)
            self.register_buffer("basis", basis, persistent=False)

        def bound(self, z, eps=1e-3):
            half_l = (self.levels - 1) * (1 + eps) / 2
            offset = torch.where(self.levels % 2 == 0, 0.5, 0.0)
            shift = (offset / half_l).atanh()
            return (z + shift).tanh() * half_l - offset

        def forward(self, z):
            bounded = self.bound(z)
            quantized = bounded + (bounded.round() - bounded).detach()  # straight through
            half_width = self.levels // 2
            codes = quantized / half_width
            idx = ((codes * half_width + half_width) * self.basis).sum(-1).to(torch.int32)
            return codes, idx

    class AE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(10, 16), nn.GELU(), nn.Linear(16, 3))
            self.fsq = FSQ([8, 5, 5])
            self.dec = nn.Sequential(nn.Linear(3, 16), nn.GELU(), nn.Linear(16, 10))

        def forward(self, x):
            codes, idx = self.fsq(self.enc(x))
            return self.dec(codes), idx

    model = AE()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rec = []
    for _ in range(4):
        recon, idx = run(data)
        loss = F.mse_loss(recon, data)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((loss.item(), int(idx.unique().numel())))
    usage = torch.bincount(idx.long(), minlength=200)
    return rec, idx, usage.nonzero().flatten(), model.enc[2].weight.grad, recon.detach()


PROGRAMS += [fsq_autoencoder]


def virtual_adversarial_training(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(14)
    rng = np.random.default_rng(14)
    xl = torch.tensor(rng.standard_normal((6, 5)), dtype=torch.float32)
    yl = torch.tensor([0, 1, 2, 0, 1, 2])
    xu = torch.tensor(rng.standard_normal((10, 5)), dtype=torch.float32)

    model = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 3))
    run = _maybe_compile(torch, compiled)(model)

    def l2_normalize(d):
        return d / (d.flatten(1).norm(dim=1).view(-1, *([1] * (d.dim() - 1))) + 1e-8)

    def vat_loss(x, xi=1e-6, eps=1.0, power_iterations=1):
        with torch.no_grad():
            pred = F.softmax(run(x), dim=1)
        d = l2_normalize(torch.rand(x.shape).sub(0.5))
        for _ in range(power_iterations):
            d.requires_grad_()
            adv_distance = F.kl_div(F.log_softmax(run(x + xi * d), dim=1), pred,
                                    reduction="batchmean")
            (grad,) = torch.autograd.grad(adv_distance, d)
            d = l2_normalize(grad)
        r_adv = d * eps
        return F.kl_div(F.log_softmax(run(x + r_adv), dim=1), pred, reduction="batchmean")

    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rec = []
    for _ in range(3):
        lds = vat_loss(xu, xi=0.5)
        loss = F.cross_entropy(run(xl), yl) + 0.5 * lds
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((loss.item(), lds.item()))
    return rec, model[0].weight.grad, model[2].bias


PROGRAMS += [virtual_adversarial_training]


def ewc_two_tasks(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(15)
    rng = np.random.default_rng(15)
    xa = torch.tensor(rng.standard_normal((12, 4)), dtype=torch.float32)
    ya = (xa[:, 0] > 0).long()
    xb = torch.tensor(rng.standard_normal((12, 4)), dtype=torch.float32)
    yb = (xb[:, 1] + xb[:, 2] > 0).long()

    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    run = _maybe_compile(torch, compiled)(model)

    def train(x, y, steps, penalty=None):
        opt = torch.optim.SGD(model.parameters(), lr=0.2)
        losses = []
        for _ in range(steps):
            loss = F.cross_entropy(run(x), y)
            if penalty is not None:
                loss = loss + penalty()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    def fisher_diagonal(x):
        # the empirical Fisher: squared gradients of the log-likelihood of sampled labels
        fisher = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
        for i in range(x.size(0)):
            logp = F.log_softmax(run(x[i:i + 1]), dim=1)
            label = torch.multinomial(logp.exp().detach(), 1).item()
            model.zero_grad()
            logp[0, label].backward()
            for n, p in model.named_parameters():
                fisher[n] += p.grad.detach() ** 2 / x.size(0)
        return fisher

    first = train(xa, ya, 4)
    fisher = fisher_diagonal(xa)
    anchor = {n: p.detach().clone() for n, p in model.named_parameters()}

    def ewc_penalty(lam=50.0):
        return lam / 2 * sum((fisher[n] * (p - anchor[n]) ** 2).sum()
                             for n, p in model.named_parameters())

    second = train(xb, yb, 4, ewc_penalty)
    with torch.no_grad():
        acc_a = (run(xa).argmax(1) == ya).float().mean()
    return first, second, acc_a, fisher["0.weight"], model[2].weight


PROGRAMS += [ewc_two_tasks]


def fedavg_clients(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(16)
    rng = np.random.default_rng(16)
    shards = [(torch.tensor(rng.standard_normal((8, 6)), dtype=torch.float32),
               torch.tensor(rng.integers(0, 3, 8))) for _ in range(3)]

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(6, 12)
            self.bn = nn.BatchNorm1d(12)
            self.fc2 = nn.Linear(12, 3)

        def forward(self, x):
            return self.fc2(F.relu(self.bn(self.fc1(x))))

    global_model = Net()

    def local_update(model, x, y, epochs=2):
        run = _maybe_compile(torch, compiled)(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
        model.train()
        for _ in range(epochs):
            for i in range(0, x.size(0), 4):
                loss = F.cross_entropy(run(x[i:i + 4]), y[i:i + 4])
                opt.zero_grad()
                loss.backward()
                opt.step()
        return model.state_dict(), loss.item()

    rec = []
    for _ in range(2):
        states, losses = [], []
        for x, y in shards:
            state, loss = local_update(copy.deepcopy(global_model), x, y)
            states.append(state)
            losses.append(loss)
        sizes = torch.tensor([float(x.size(0)) for x, _ in shards])
        weights = sizes / sizes.sum()
        averaged = {}
        for key, value in states[0].items():
            stacked = torch.stack([s[key].float() for s in states])
            mean = (weights.view(-1, *[1] * value.dim()) * stacked).sum(0)
            averaged[key] = mean.to(value.dtype)
        global_model.load_state_dict(averaged)
        rec.append(losses)
    global_model.eval()
    with torch.no_grad():
        out = global_model(shards[0][0])
    return rec, out, global_model.bn.running_mean, global_model.bn.num_batches_tracked


PROGRAMS += [fedavg_clients]



def swav_sinkhorn_prototypes(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(17)
    rng = np.random.default_rng(17)
    images = torch.tensor(rng.standard_normal((8, 12)), dtype=torch.float32)

    class SwAV(nn.Module):
        def __init__(self, n_prototypes=6):
            super().__init__()
            self.backbone = nn.Sequential(nn.Linear(12, 16), nn.BatchNorm1d(16), nn.ReLU(),
                                          nn.Linear(16, 8))
            self.prototypes = nn.Linear(8, n_prototypes, bias=False)

        def forward(self, views):
            z = F.normalize(self.backbone(torch.cat(views)), dim=1, p=2)
            return z, self.prototypes(z)

    @torch.no_grad()
    def sinkhorn(scores, eps=0.05, iters=3):
        q = torch.exp(scores / eps).t()  # prototypes x samples
        k, b = q.shape
        q /= q.sum()
        for _ in range(iters):
            q /= q.sum(dim=1, keepdim=True)
            q /= k
            q /= q.sum(dim=0, keepdim=True)
            q /= b
        return (q * b).t()

    model = SwAV()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rec = []
    for it in range(3):
        with torch.no_grad():  # prototypes kept on the unit sphere
            w = model.prototypes.weight.data.clone()
            model.prototypes.weight.copy_(F.normalize(w, dim=1, p=2))
        view1 = images + 0.1 * torch.randn_like(images)
        view2 = images * (torch.rand(8, 1) * 0.4 + 0.8)
        z, scores = run([view1, view2])
        s1, s2 = scores.chunk(2)
        q1, q2 = sinkhorn(s1.detach()), sinkhorn(s2.detach())
        temperature = 0.1
        loss = -0.5 * ((q1 * F.log_softmax(s2 / temperature, dim=1)).sum(1).mean()
                       + (q2 * F.log_softmax(s1 / temperature, dim=1)).sum(1).mean())
        opt.zero_grad()
        loss.backward()
        if it < 1:  # the prototypes are frozen for the first iterations
            for name, p in model.named_parameters():
                if "prototypes" in name:
                    p.grad = None
        opt.step()
        rec.append(loss.item())
    return rec, q1, model.prototypes.weight, model.backbone[0].weight.grad


PROGRAMS += [swav_sinkhorn_prototypes]


def electra_replaced_tokens(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(18)
    rng = np.random.default_rng(18)
    vocab, mask_id, d = 30, 1, 16
    ids = torch.tensor(rng.integers(2, vocab, (4, 10)))

    class Encoder(nn.Module):
        def __init__(self, embedding, out):
            super().__init__()
            self.embedding = embedding  # the generator and discriminator share it
            self.pos = nn.Embedding(10, d)
            layer = nn.TransformerEncoderLayer(d, 2, 32, dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
            self.out = nn.Linear(d, out)

        def forward(self, x):
            h = self.embedding(x) + self.pos(torch.arange(x.size(1)))
            return self.out(self.encoder(h))

    shared = nn.Embedding(vocab, d)
    generator = Encoder(shared, vocab)
    discriminator = Encoder(shared, 1)
    gen_run = _maybe_compile(torch, compiled)(generator)
    disc_run = _maybe_compile(torch, compiled)(discriminator)
    params = list({id(p): p for p in [*generator.parameters(),
                                      *discriminator.parameters()]}.values())
    opt = torch.optim.AdamW(params, lr=3e-3)
    rec = []
    for _ in range(3):
        masked = torch.bernoulli(torch.full(ids.shape, 0.25)).bool()
        masked[:, 0] = True
        inputs = ids.masked_fill(masked, mask_id)
        gen_logits = gen_run(inputs)
        mlm_loss = F.cross_entropy(gen_logits[masked], ids[masked])
        with torch.no_grad():  # sample replacements by the Gumbel-max trick
            u = torch.rand_like(gen_logits).clamp(1e-9, 1.0)
            sampled = (gen_logits - torch.log(-torch.log(u))).argmax(-1)
        corrupted = torch.where(masked, sampled, ids)
        is_replaced = (corrupted != ids).float()
        disc_logits = disc_run(corrupted).squeeze(-1)
        disc_loss = F.binary_cross_entropy_with_logits(disc_logits, is_replaced)
        loss = mlm_loss + 50.0 * disc_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((mlm_loss.item(), disc_loss.item(), int(is_replaced.sum())))
    return rec, shared.weight.grad, discriminator.out.weight, corrupted


PROGRAMS += [electra_replaced_tokens]


def rnn_transducer_loss(torch, compiled=False):
    nn = torch.nn
    torch.manual_seed(19)
    rng = np.random.default_rng(19)
    blank, n_labels = 0, 5
    feats = torch.tensor(rng.standard_normal((2, 5, 6)), dtype=torch.float32)
    targets = torch.tensor([[2, 4, 1], [3, 3, 0]])
    target_lengths = torch.tensor([3, 2])
    frame_lengths = torch.tensor([5, 4])

    class Transducer(nn.Module):
        def __init__(self, d=8):
            super().__init__()
            self.encoder = nn.Linear(6, d)
            self.predictor = nn.Embedding(n_labels, d)
            self.pred_rnn = nn.GRUCell(d, d)
            self.joint = nn.Sequential(nn.Tanh(), nn.Linear(d, n_labels))

        def forward(self, x, y):
            enc = self.encoder(x)  # (B, T, d)
            h = torch.zeros(y.size(0), enc.size(-1))
            states = [h]
            for u in range(y.size(1)):  # the prediction network over blank + labels
                h = self.pred_rnn(self.predictor(y[:, u]), h)
                states.append(h)
            pred = torch.stack(states, 1)  # (B, U + 1, d)
            return self.joint(enc[:, :, None] + pred[:, None]).log_softmax(-1)

    def transducer_loss(logp, y, t_len, u_len):
        # the forward variables over the (T, U + 1) lattice, one anti-diagonal at a time
        b, t_max, u_max, _ = logp.shape
        blank_lp = logp[..., blank]
        label_lp = logp[:, :, :-1].gather(3, y[:, None, :, None].expand(-1, t_max, -1, 1))
        label_lp = label_lp.squeeze(-1)
        neg_inf = torch.full((b,), -1e30)
        alpha = [[None] * u_max for _ in range(t_max)]
        for t in range(t_max):
            for u in range(u_max):
                if t == 0 and u == 0:
                    alpha[t][u] = torch.zeros(b)
                    continue
                from_blank = alpha[t - 1][u] + blank_lp[:, t - 1, u] if t > 0 else neg_inf
                from_label = (alpha[t][u - 1] + label_lp[:, t, u - 1] if u > 0
                              else neg_inf)
                alpha[t][u] = torch.logaddexp(from_blank, from_label)
        grid = torch.stack([torch.stack(row, 1) for row in alpha], 1)  # (B, T, U + 1)
        rows = torch.arange(b)
        final = grid[rows, t_len - 1, u_len] + blank_lp[rows, t_len - 1, u_len]
        return -(final / u_len.clamp_min(1)).mean()

    model = Transducer()
    criterion = _maybe_compile(torch, compiled)(transducer_loss)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rec = []
    for _ in range(3):
        logp = model(feats, targets)
        loss = criterion(logp, targets, frame_lengths, target_lengths)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    with torch.no_grad():  # greedy decoding of the first utterance, one symbol per frame
        logp = model(feats, targets)
    return rec, logp[0].argmax(-1), model.joint[1].weight.grad, model.pred_rnn.weight_hh


PROGRAMS += [rnn_transducer_loss]


def tacotron_location_attention(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(20)
    rng = np.random.default_rng(20)
    text = torch.tensor(rng.integers(1, 12, (2, 7)))
    text_lengths = torch.tensor([7, 5])
    mels = torch.tensor(rng.standard_normal((2, 6, 4)), dtype=torch.float32)

    class LocationSensitiveAttention(nn.Module):
        def __init__(self, query_dim, memory_dim, attn_dim=8, filters=4, kernel=5):
            super().__init__()
            self.query = nn.Linear(query_dim, attn_dim, bias=False)
            self.memory = nn.Linear(memory_dim, attn_dim, bias=False)
            self.location_conv = nn.Conv1d(2, filters, kernel, padding=kernel // 2,
                                           bias=False)
            self.location = nn.Linear(filters, attn_dim, bias=False)
            self.v = nn.Linear(attn_dim, 1, bias=True)

        def forward(self, query, memory, processed, weights, cumulative, mask):
            loc = self.location_conv(torch.stack([weights, cumulative], 1)).transpose(1, 2)
            energies = self.v(torch.tanh(self.query(query)[:, None] + processed
                                         + self.location(loc))).squeeze(-1)
            energies = energies.masked_fill(~mask, -float("inf"))
            weights = F.softmax(energies, dim=1)
            context = torch.bmm(weights[:, None], memory).squeeze(1)
            return context, weights

    class Decoder(nn.Module):
        def __init__(self, d=10, n_mels=4):
            super().__init__()
            self.embed = nn.Embedding(12, d, padding_idx=0)
            self.encoder = nn.GRU(d, d // 2, batch_first=True, bidirectional=True)
            self.prenet = nn.Sequential(nn.Linear(n_mels, 8), nn.ReLU(), nn.Linear(8, 8),
                                        nn.ReLU())
            self.attn_rnn = nn.LSTMCell(8 + d, 12)
            self.attention = LocationSensitiveAttention(12, d)
            self.proj = nn.Linear(12 + d, n_mels)
            self.stop = nn.Linear(12 + d, 1)
            self.n_mels = n_mels

        def forward(self, text, lengths, targets):
            memory, _ = self.encoder(self.embed(text))
            mask = torch.arange(text.size(1))[None] < lengths[:, None]
            processed = self.attention.memory(memory)
            b, steps = text.size(0), targets.size(1)
            h = c = torch.zeros(b, 12)
            context = torch.zeros(b, memory.size(-1))
            weights = torch.zeros(b, text.size(1))
            cumulative = torch.zeros_like(weights)
            frame = torch.zeros(b, self.n_mels)  # the go frame
            outputs, stops, alignments = [], [], []
            for t in range(steps):
                h, c = self.attn_rnn(torch.cat([self.prenet(frame), context], -1), (h, c))
                context, weights = self.attention(h, memory, processed, weights,
                                                  cumulative, mask)
                cumulative = cumulative + weights
                hc = torch.cat([h, context], -1)
                outputs.append(self.proj(hc))
                stops.append(self.stop(hc).squeeze(-1))
                alignments.append(weights)
                frame = targets[:, t]  # teacher forcing
            return torch.stack(outputs, 1), torch.stack(stops, 1), torch.stack(alignments, 1)

    model = Decoder()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    stop_targets = torch.zeros(2, 6)
    stop_targets[:, -1] = 1.0
    rec = []
    for _ in range(2):
        out, stop, align = run(text, text_lengths, mels)
        loss = F.mse_loss(out, mels) + F.binary_cross_entropy_with_logits(stop, stop_targets)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        rec.append(loss.item())
    return rec, align.detach(), model.attention.location_conv.weight.grad, out.detach()


PROGRAMS += [tacotron_location_attention]


def fixmatch_pseudo_labels(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(21)
    rng = np.random.default_rng(21)
    xl = torch.tensor(rng.standard_normal((4, 1, 6, 6)), dtype=torch.float32)
    yl = torch.tensor([0, 1, 2, 1])
    xu = torch.tensor(rng.standard_normal((8, 1, 6, 6)), dtype=torch.float32)

    def weak(x):
        flip = torch.rand(x.size(0)) < 0.5
        return torch.where(flip[:, None, None, None], x.flip(-1), x)

    def strong(x):
        x = weak(x)
        shifts = torch.randint(-2, 3, (2,))
        x = torch.roll(x, shifts=(int(shifts[0]), int(shifts[1])), dims=(2, 3))
        keep = torch.ones_like(x)
        keep[:, :, 1:4, 1:4] = 0  # cutout
        return x * keep + 0.05 * torch.randn_like(x)

    model = nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.BatchNorm2d(6), nn.LeakyReLU(0.1),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 3))
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9, nesterov=True)
    threshold, lambda_u = 0.4, 1.0
    rec = []
    for _ in range(3):
        inputs = torch.cat([weak(xl), weak(xu), strong(xu)])
        logits = run(inputs)
        logits_x = logits[:xl.size(0)]
        logits_w, logits_s = logits[xl.size(0):].chunk(2)
        probs = torch.softmax(logits_w.detach() / 1.0, dim=-1)
        max_probs, pseudo = probs.max(dim=-1)
        mask = max_probs.ge(threshold).float()
        loss_u = (F.cross_entropy(logits_s, pseudo, reduction="none") * mask).mean()
        loss = F.cross_entropy(logits_x, yl) + lambda_u * loss_u
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((loss.item(), mask.mean().item()))
    return rec, pseudo, model[0].weight.grad, model[1].running_mean


PROGRAMS += [fixmatch_pseudo_labels]


def relativistic_average_gan(torch, compiled=False):
    nn = torch.nn
    torch.manual_seed(22)
    rng = np.random.default_rng(22)
    real = torch.tensor(rng.standard_normal((8, 2)) * 0.5 + [2.0, -1.0], dtype=torch.float32)

    generator = nn.Sequential(nn.Linear(3, 16), nn.LeakyReLU(0.2), nn.Linear(16, 2))
    discriminator = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
    gen = _maybe_compile(torch, compiled)(generator)
    disc = _maybe_compile(torch, compiled)(discriminator)
    opt_g = torch.optim.Adam(generator.parameters(), lr=2e-3, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=2e-3, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    ones, zeros = torch.ones(8, 1), torch.zeros(8, 1)
    rec = []
    for _ in range(3):
        z = torch.randn(8, 3)
        fake = gen(z)
        # discriminator: is real more realistic than the average fake, and vice versa
        d_real, d_fake = disc(real), disc(fake.detach())
        loss_d = (bce(d_real - d_fake.mean(0, keepdim=True), ones)
                  + bce(d_fake - d_real.mean(0, keepdim=True), zeros)) / 2
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()
        # generator: the same with the labels swapped, through both terms
        d_real, d_fake = disc(real).detach(), disc(fake)
        loss_g = (bce(d_real - d_fake.mean(0, keepdim=True), zeros)
                  + bce(d_fake - d_real.mean(0, keepdim=True), ones)) / 2
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
        rec.append((loss_d.item(), loss_g.item()))
    return rec, fake.detach(), generator[0].weight.grad, discriminator[2].weight


PROGRAMS += [relativistic_average_gan]



def deepar_negative_binomial(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions
    torch.manual_seed(23)
    rng = np.random.default_rng(23)
    counts = torch.tensor(rng.poisson(4.0, (3, 12)), dtype=torch.float32)
    covariates = torch.tensor(rng.standard_normal((3, 12, 2)), dtype=torch.float32)

    class DeepAR(nn.Module):
        def __init__(self, hidden=10):
            super().__init__()
            self.rnn = nn.LSTM(3, hidden, batch_first=True)
            self.mu = nn.Linear(hidden, 1)
            self.alpha = nn.Linear(hidden, 1)

        def forward(self, lagged, cov, scale):
            h, state = self.rnn(torch.cat([lagged / scale, cov], -1))
            mu = F.softplus(self.mu(h)).squeeze(-1) * scale[..., 0]
            alpha = F.softplus(self.alpha(h)).squeeze(-1) / scale[..., 0].sqrt()
            return mu, alpha, state

    def nb_nll(mu, alpha, target):
        # a negative binomial in (mean, shape) form: total_count 1/alpha, p mu*alpha/(1+..)
        total = 1.0 / alpha
        dist = D.NegativeBinomial(total_count=total, probs=mu * alpha / (1 + mu * alpha),
                                  validate_args=False)  # no value checks in the graph
        return -dist.log_prob(target).mean(), dist.mean, dist.variance

    model = DeepAR()
    nll = _maybe_compile(torch, compiled)(nb_nll)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    context = 8
    scale = 1 + counts[:, :context].mean(1, keepdim=True)[..., None]  # (B, 1, 1)
    lagged = F.pad(counts, (1, 0))[:, :-1, None]
    rec = []
    for _ in range(3):
        mu, alpha, _ = model(lagged, covariates, scale)
        loss, mean, var = nll(mu, alpha, counts)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    with torch.no_grad():  # ancestral sampling of the horizon from the context's state
        _, state = model.rnn(torch.cat([lagged[:, :context] / scale,
                                        covariates[:, :context]], -1))
        last = counts[:, context - 1:context, None]
        samples = []
        for t in range(context, 12):
            h, state = model.rnn(torch.cat([last / scale, covariates[:, t:t + 1]], -1), state)
            mu = F.softplus(model.mu(h)).squeeze(-1) * scale[..., 0]
            alpha = F.softplus(model.alpha(h)).squeeze(-1) / scale[..., 0].sqrt()
            draw = D.NegativeBinomial(1.0 / alpha, probs=mu * alpha / (1 + mu * alpha)).sample()
            samples.append(draw)
            last = draw[..., None]
    return rec, mean.detach(), var.detach(), torch.cat(samples, 1), model.alpha.weight.grad


PROGRAMS += [deepar_negative_binomial]


def autoformer_decomposition(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(24)
    rng = np.random.default_rng(24)
    t = np.arange(24)
    series = np.sin(2 * np.pi * t / 6)[None, :, None] + 0.05 * t[None, :, None]
    series = series + 0.1 * rng.standard_normal((4, 24, 2))
    x = torch.tensor(series, dtype=torch.float32)
    past, future = x[:, :16], x[:, 16:]

    class SeriesDecomp(nn.Module):
        def __init__(self, kernel):
            super().__init__()
            self.pool = nn.AvgPool1d(kernel, stride=1)
            self.pad = (kernel - 1) // 2

        def forward(self, x):
            # replicate the ends so the moving average keeps the length
            front = x[:, :1].repeat(1, self.pad, 1)
            end = x[:, -1:].repeat(1, self.pad, 1)
            trend = self.pool(torch.cat([front, x, end], 1).permute(0, 2, 1)).permute(0, 2, 1)
            return x - trend, trend

    class AutoCorrelation(nn.Module):
        def __init__(self, d, top_k=2):
            super().__init__()
            self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
            self.out = nn.Linear(d, d)
            self.top_k = top_k

        def forward(self, x):
            q, k, v = self.q(x), self.k(x), self.v(x)
            length = x.size(1)
            # period-based dependencies: autocorrelation by FFT (Wiener-Khinchin)
            qf = torch.fft.rfft(q.permute(0, 2, 1), dim=-1)
            kf = torch.fft.rfft(k.permute(0, 2, 1), dim=-1)
            corr = torch.fft.irfft(qf * torch.conj(kf), n=length, dim=-1)  # (B, d, L)
            mean_corr = corr.mean(1)
            weights, delays = torch.topk(mean_corr, self.top_k, dim=-1)
            weights = torch.softmax(weights, dim=-1)
            # time-delay aggregation: roll the values by each delay through a gather
            base = torch.arange(length)[None, :]
            agg = torch.zeros_like(v)
            for i in range(self.top_k):
                idx = (base + delays[:, i:i + 1]) % length  # (B, L)
                rolled = v.gather(1, idx[..., None].expand(-1, -1, v.size(-1)))
                agg = agg + rolled * weights[:, i, None, None]
            return self.out(agg)

    class Autoformer(nn.Module):
        def __init__(self, d=8, horizon=8):
            super().__init__()
            self.embed = nn.Conv1d(2, d, 3, padding=1, padding_mode="circular", bias=False)
            self.decomp = SeriesDecomp(5)
            self.attn = AutoCorrelation(d)
            self.ff = nn.Sequential(nn.Linear(d, 16), nn.GELU(), nn.Linear(16, d))
            self.season_head = nn.Linear(d, 2)
            self.trend_head = nn.Linear(16, horizon)
            self.horizon = horizon

        def forward(self, x):
            seasonal, trend = self.decomp(x)
            h = self.embed(seasonal.permute(0, 2, 1)).permute(0, 2, 1)
            h, _ = self.decomp(h + self.attn(h))
            h, _ = self.decomp(h + self.ff(h))
            season = self.season_head(h[:, -self.horizon:])
            trend_out = self.trend_head(trend.permute(0, 2, 1)).permute(0, 2, 1)
            return season + trend_out

    model = Autoformer()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    rec = []
    for _ in range(3):
        pred = run(past)
        loss = F.mse_loss(pred, future)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    return rec, pred.detach(), model.embed.weight.grad, model.attn.q.weight.grad


PROGRAMS += [autoformer_decomposition]


def revin_patch_transformer(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(25)
    rng = np.random.default_rng(25)
    series = torch.tensor(rng.standard_normal((6, 20, 3)).cumsum(1), dtype=torch.float32)
    past, future = series[:, :16], series[:, 16:]

    class RevIN(nn.Module):
        """Reversible instance normalization: per-series statistics taken off, put back."""

        def __init__(self, channels, eps=1e-5):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(channels))
            self.bias = nn.Parameter(torch.zeros(channels))

        def forward(self, x, mode):
            if mode == "norm":
                self.mean = x.mean(1, keepdim=True).detach()
                self.stdev = torch.sqrt(x.var(1, keepdim=True, unbiased=False)
                                        + self.eps).detach()
                return (x - self.mean) / self.stdev * self.weight + self.bias
            x = (x - self.bias) / (self.weight + self.eps * self.eps)
            return x * self.stdev + self.mean

    class PatchTST(nn.Module):
        def __init__(self, length=16, patch=4, stride=2, d=16, horizon=4):
            super().__init__()
            self.revin = RevIN(3)
            self.patch, self.stride = patch, stride
            n_patches = (length - patch) // stride + 2  # one more from the end padding
            self.pad = nn.ReplicationPad1d((0, stride))
            self.proj = nn.Linear(patch, d)
            self.pos = nn.Parameter(torch.randn(1, n_patches, d) * 0.02)
            layer = nn.TransformerEncoderLayer(d, 2, 32, dropout=0.1, batch_first=True,
                                               norm_first=True, activation="gelu")
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = nn.Sequential(nn.Flatten(-2), nn.Dropout(0.1),
                                      nn.Linear(n_patches * d, horizon))

        def forward(self, x):
            b, _, c = x.shape
            x = self.revin(x, "norm").permute(0, 2, 1)  # channel independence
            x = self.pad(x).unfold(-1, self.patch, self.stride)  # (B, C, N, P)
            h = self.proj(x.reshape(b * c, x.size(2), -1)) + self.pos
            h = self.encoder(h).reshape(b, c, h.size(1), -1)
            out = self.head(h).permute(0, 2, 1)
            return self.revin(out, "denorm")

    model = PatchTST()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=5e-3, total_steps=4)
    rec = []
    for _ in range(3):
        pred = run(past)
        loss = F.mse_loss(pred, future)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        rec.append((loss.item(), sched.get_last_lr()[0]))
    model.eval()
    with torch.no_grad():
        pred = run(past[:2])  # a smaller batch at evaluation
    return rec, pred, model.revin.weight.grad, model.proj.weight


PROGRAMS += [revin_patch_transformer]


def mixture_of_depths(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(26)
    rng = np.random.default_rng(26)
    ids = torch.tensor(rng.integers(0, 20, (3, 8)))

    routed_fraction = []

    @torch.compiler.disable
    def log_routing(selected, length):
        # bookkeeping outside the graph, as a metrics hook would be
        routed_fraction.append(selected.numel() / (selected.size(0) * length))

    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.norm = nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, 2, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Linear(2 * d, d))

        def forward(self, x):
            n = x.size(1)
            causal = torch.triu(torch.ones(n, n, dtype=torch.bool), 1)
            h = self.norm(x)
            x = x + self.attn(h, h, h, attn_mask=causal, need_weights=False)[0]
            return x + self.mlp(self.norm(x))

    class MoDBlock(nn.Module):
        """Only the top-capacity tokens by a router's score go through the block."""

        def __init__(self, d, capacity):
            super().__init__()
            self.router = nn.Linear(d, 1)
            self.block = Block(d)
            self.capacity = capacity

        def forward(self, x):
            b, n, d = x.shape
            scores = self.router(x).squeeze(-1)
            k = int(self.capacity * n)
            top_scores, idx = torch.topk(scores, k, dim=1, sorted=False)
            idx, order = idx.sort(dim=1)  # keep causal order among the selected tokens
            top_scores = top_scores.gather(1, order)
            log_routing(idx, n)
            gather_idx = idx[..., None].expand(-1, -1, d)
            selected = x.gather(1, gather_idx)
            processed = self.block(selected) - selected
            # the residual update scaled by the router's weight, scattered back in place
            update = processed * torch.sigmoid(top_scores)[..., None]
            return x.scatter_add(1, gather_idx, update), scores

    class LM(nn.Module):
        def __init__(self, d=12):
            super().__init__()
            self.emb = nn.Embedding(20, d)
            self.layers = nn.ModuleList([Block(d), MoDBlock(d, 0.5), Block(d)])
            self.head = nn.Linear(d, 20)

        def forward(self, ids):
            x = self.emb(ids)
            router_scores = []
            for layer in self.layers:
                if isinstance(layer, MoDBlock):
                    x, s = layer(x)
                    router_scores.append(s)
                else:
                    x = layer(x)
            return self.head(x), router_scores

    model = LM()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    rec = []
    for _ in range(3):
        logits, scores = run(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 20), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    return rec, routed_fraction, scores[0].detach(), model.layers[1].router.weight.grad


PROGRAMS += [mixture_of_depths]


def learned_transformed_distribution(torch, compiled=False):
    nn = torch.nn
    D = torch.distributions
    T = torch.distributions.transforms
    torch.manual_seed(27)
    rng = np.random.default_rng(27)
    # data in (0, 1): a skewed beta sample the flow has to fit
    data = torch.tensor(rng.beta(2.0, 5.0, (64, 1)), dtype=torch.float32)

    class Flow(nn.Module):
        def __init__(self):
            super().__init__()
            self.loc = nn.Parameter(torch.zeros(1))
            self.log_scale = nn.Parameter(torch.zeros(1))
            self.shift2 = nn.Parameter(torch.tensor([0.1]))

        def dist(self):
            base = D.Normal(torch.zeros(1), torch.ones(1), validate_args=False)
            transforms = [T.AffineTransform(self.loc, self.log_scale.exp()),
                          T.TanhTransform(),
                          T.AffineTransform(0.5, 0.5)]  # (-1, 1) onto (0, 1)
            return D.TransformedDistribution(base, transforms, validate_args=False)

        def forward(self, x):
            return -self.dist().log_prob(x).mean()

    flow = Flow()
    run = _maybe_compile(torch, compiled)(flow)
    opt = torch.optim.Adam(flow.parameters(), lr=5e-2)
    rec = []
    for _ in range(4):
        loss = run(data)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    with torch.no_grad():
        samples = flow.dist().sample((5,))
        lp = flow.dist().log_prob(torch.tensor([[0.2], [0.5], [0.9]]))
    return rec, samples, lp, flow.loc.grad, flow.log_scale


PROGRAMS += [learned_transformed_distribution]


def koopman_linear_dynamics(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(28)
    rng = np.random.default_rng(28)
    # a damped pendulum's trajectories, observed through a fixed nonlinear map
    theta = rng.uniform(-1, 1, (5, 1))
    omega = rng.uniform(-1, 1, (5, 1))
    traj = []
    for _ in range(10):
        traj.append(np.concatenate([np.sin(theta), np.cos(theta), omega], -1))
        omega = omega - 0.1 * np.sin(theta) - 0.02 * omega
        theta = theta + 0.1 * omega
    states = torch.tensor(np.stack(traj, 1), dtype=torch.float32)  # (B, T, 3)

    class Koopman(nn.Module):
        def __init__(self, d=3, latent=4):
            super().__init__()
            self.encoder = nn.Sequential(nn.Linear(d, 16), nn.Tanh(), nn.Linear(16, latent))
            self.decoder = nn.Sequential(nn.Linear(latent, 16), nn.Tanh(), nn.Linear(16, d))
            self.K = nn.Parameter(torch.eye(latent) + 0.01 * torch.randn(latent, latent))

        def forward(self, x0, steps):
            z0 = self.encoder(x0)
            # multi-step predictions by powers of the Koopman matrix
            powers = torch.stack([torch.linalg.matrix_power(self.K, k)
                                  for k in range(1, steps + 1)])
            z = torch.einsum("kij,bj->bki", powers, z0)
            return self.decoder(z), z0, z

    model = Koopman()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    rec = []
    for _ in range(3):
        pred, z0, z = run(states[:, 0], 4)
        recon = model.decoder(z0)
        with torch.no_grad():
            target_z = model.encoder(states[:, 1:5])
        loss = (F.mse_loss(pred, states[:, 1:5]) + F.mse_loss(recon, states[:, 0])
                + 0.1 * F.mse_loss(z, target_z))
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    with torch.no_grad():  # the latent that reaches a target state in one step, by LU solve
        lu, pivots = torch.linalg.lu_factor(model.K)
        target = model.encoder(states[:, 3])
        previous = torch.linalg.lu_solve(lu, pivots, target.T).T
        eig = torch.linalg.eigvals(model.K)
        radius = eig.abs().max()
    return rec, previous, radius, model.K.grad, pred.detach()


PROGRAMS += [koopman_linear_dynamics]



def qr_dqn_quantile_huber(torch, compiled=False):
    nn = torch.nn
    torch.manual_seed(29)
    rng = np.random.default_rng(29)
    n_quantiles, n_actions, gamma = 8, 3, 0.9
    obs = torch.tensor(rng.standard_normal((16, 4)), dtype=torch.float32)
    next_obs = obs + 0.1 * torch.tensor(rng.standard_normal((16, 4)), dtype=torch.float32)
    actions = torch.tensor(rng.integers(0, n_actions, 16))
    rewards = torch.tensor(rng.standard_normal(16), dtype=torch.float32)
    dones = torch.tensor(rng.random(16) < 0.2)

    class QuantileNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
            self.out = nn.Linear(32, n_actions * n_quantiles)

        def forward(self, x):
            return self.out(self.body(x)).view(-1, n_actions, n_quantiles)

    def quantile_huber(pred, target, kappa=1.0):
        # pairwise TD errors: predicted quantile i against target sample j
        td = target[:, None, :] - pred[:, :, None]
        abs_td = td.abs()
        huber = torch.where(abs_td <= kappa, 0.5 * td.pow(2), kappa * (abs_td - 0.5 * kappa))
        taus = (torch.arange(n_quantiles, dtype=torch.float32) + 0.5) / n_quantiles
        weight = torch.where(td < 0, 1 - taus[None, :, None], taus[None, :, None])
        weight = torch.where(abs_td == 0, torch.full_like(weight, 0.5), weight)
        return (weight * huber / kappa).sum(1).mean(1).mean()

    online, target_net = QuantileNet(), QuantileNet()
    target_net.load_state_dict(online.state_dict())
    for p in target_net.parameters():
        p.requires_grad = False

    def td_loss(obs, actions, rewards, next_obs, dones):
        quantiles = online(obs)
        chosen = quantiles[torch.arange(obs.size(0)), actions]
        with torch.no_grad():
            next_q = target_net(next_obs)
            best = next_q.mean(-1).argmax(-1)
            next_quantiles = next_q.gather(1, best[:, None, None].expand(-1, 1, n_quantiles))
            target = rewards[:, None] + gamma * (~dones)[:, None] * next_quantiles.squeeze(1)
        return quantile_huber(chosen, target)

    step = _maybe_compile(torch, compiled)(td_loss)
    opt = torch.optim.Adam(online.parameters(), lr=5e-3, eps=0.01 / 32)
    rec = []
    for it in range(4):
        loss = step(obs, actions, rewards, next_obs, dones)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(online.parameters(), 10.0)
        opt.step()
        if it % 2 == 1:  # a hard target update every other step
            target_net.load_state_dict(online.state_dict())
        rec.append(loss.item())
    with torch.no_grad():
        greedy = online(obs).mean(-1).argmax(-1)
    return rec, greedy, online.out.weight.grad, target_net.out.bias


PROGRAMS += [qr_dqn_quantile_huber]


def performer_favor_attention(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(30)
    rng = np.random.default_rng(30)
    ids = torch.tensor(rng.integers(0, 16, (2, 9)))

    def orthogonal_gaussian(m, d):
        # blocks of orthogonal rows (QR of Gaussian blocks) with chi-distributed norms
        blocks = []
        for _ in range(math.ceil(m / d)):
            q, _ = torch.linalg.qr(torch.randn(d, d))
            blocks.append(q.T)
        rows = torch.cat(blocks)[:m]
        norms = torch.randn(m, d).norm(dim=1)
        return norms[:, None] * rows

    def positive_features(x, proj, eps=1e-4):
        # softmax-kernel features exp(w.x - |x|^2/2), stabilised by the row maximum
        d = x.size(-1)
        x = x * d ** -0.25
        wx = x @ proj.T
        sq = x.pow(2).sum(-1, keepdim=True) / 2
        stab = wx.amax(-1, keepdim=True).detach()
        return torch.exp(wx - sq - stab) / math.sqrt(proj.size(0)) + eps

    class FavorAttention(nn.Module):
        def __init__(self, d, heads, features=8):
            super().__init__()
            self.heads, self.hd = heads, d // heads
            self.qkv = nn.Linear(d, 3 * d)
            self.out = nn.Linear(d, d)
            self.features = features
            self.register_buffer("proj", orthogonal_gaussian(features, self.hd))

        def redraw(self):
            self.proj.copy_(orthogonal_gaussian(self.features, self.hd))

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = self.qkv(x).view(b, n, 3, self.heads, self.hd).unbind(2)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, H, N, hd)
            qf, kf = positive_features(q, self.proj), positive_features(k, self.proj)
            # the causal form: prefix sums of the key-value outer products
            kv = torch.einsum("bhnf,bhnd->bhnfd", kf, v).cumsum(2)
            num = torch.einsum("bhnf,bhnfd->bhnd", qf, kv)
            den = torch.einsum("bhnf,bhnf->bhn", qf, kf.cumsum(2))
            out = (num / den[..., None]).transpose(1, 2).reshape(b, n, -1)
            return self.out(out)

    class LM(nn.Module):
        def __init__(self, d=16):
            super().__init__()
            self.emb = nn.Embedding(16, d)
            self.attn = FavorAttention(d, 2)
            self.norm = nn.LayerNorm(d)
            self.head = nn.Linear(d, 16)

        def forward(self, ids):
            h = self.emb(ids)
            return self.head(self.norm(h + self.attn(h)))

    model = LM()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    rec = []
    for it in range(4):
        if it == 2:
            with torch.no_grad():
                model.attn.redraw()  # fresh random features mid-training
        logits = run(ids[:, :-1])
        loss = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    return rec, model.attn.proj, model.attn.qkv.weight.grad, logits.detach()


PROGRAMS += [performer_favor_attention]


def mha_padding_and_alibi_masks(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(31)
    rng = np.random.default_rng(31)
    ids = torch.tensor(rng.integers(1, 14, (3, 7)))
    lengths = torch.tensor([7, 4, 5])
    ids = ids.masked_fill(torch.arange(7)[None] >= lengths[:, None], 0)
    labels = torch.tensor([1, 0, 1])
    heads = 2

    def alibi_bias(n, heads):
        slopes = torch.tensor([2 ** (-8 * (h + 1) / heads) for h in range(heads)])
        pos = torch.arange(n)
        distance = (pos[None, :] - pos[:, None]).abs().float()
        return -slopes[:, None, None] * distance  # (H, N, N)

    class Encoder(nn.Module):
        def __init__(self, d=8):
            super().__init__()
            self.emb = nn.Embedding(14, d, padding_idx=0)
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True, dropout=0.0)
            self.norm = nn.LayerNorm(d)
            self.head = nn.Linear(d, 2)

        def forward(self, ids):
            pad = ids == 0
            h = self.emb(ids)
            bias = alibi_bias(ids.size(1), heads).repeat(ids.size(0), 1, 1)  # (B*H, N, N)
            out, weights = self.attn(h, h, h, key_padding_mask=pad, attn_mask=bias,
                                     need_weights=True, average_attn_weights=False)
            h = self.norm(h + out)
            keep = (~pad).float()[..., None]
            pooled = (h * keep).sum(1) / keep.sum(1)
            return self.head(pooled), weights

    model = Encoder()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rec = []
    for _ in range(3):
        logits, weights = run(ids)
        loss = F.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    # padded keys get no weight, each row sums to one
    return rec, weights.detach(), weights[1, :, :, 4:].abs().max(), model.attn.in_proj_weight.grad


PROGRAMS += [mha_padding_and_alibi_masks]


def float64_default_dtype_pinn(torch, compiled=False):
    nn = torch.nn
    torch.manual_seed(32)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # scientific codes often train in double
    try:
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.Sequential(nn.Linear(1, 12), nn.Tanh(), nn.Linear(12, 12),
                                            nn.Tanh(), nn.Linear(12, 1))

            def forward(self, x):
                return self.layers(x)

        net = Net()

        def residual_loss(x):
            # u'' + pi^2 sin(pi x) = 0 on (0, 1), u(0) = u(1) = 0: u = sin(pi x)
            x = x.requires_grad_(True)
            u = net(x)
            (du,) = torch.autograd.grad(u.sum(), x, create_graph=True)
            (d2u,) = torch.autograd.grad(du.sum(), x, create_graph=True)
            interior = (d2u + math.pi ** 2 * torch.sin(math.pi * x)).pow(2).mean()
            boundary = net(torch.tensor([[0.0], [1.0]])).pow(2).mean()
            return interior + 10 * boundary

        loss_fn = _maybe_compile(torch, compiled)(residual_loss)
        opt = torch.optim.Adam(net.parameters(), lr=1e-2)
        xs = torch.linspace(0, 1, 9)[1:-1, None]
        rec = []
        for _ in range(3):
            loss = loss_fn(xs.clone())
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.append(loss.item())
        u = net(torch.tensor([[0.5]])).detach()
        return rec, u, net.layers[0].weight.grad, torch.tensor(1.5).dtype
    finally:
        torch.set_default_dtype(previous)


PROGRAMS += [float64_default_dtype_pinn]



def vit_torchvision_style(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(33)
    rng = np.random.default_rng(33)
    images = torch.tensor(rng.standard_normal((4, 3, 8, 8)), dtype=torch.float32)
    labels = torch.tensor([0, 1, 1, 0])

    class VisionTransformer(nn.Module):
        def __init__(self, image_size=8, patch_size=4, hidden=16, classes=2):
            super().__init__()
            self.image_size, self.patch_size, self.hidden = image_size, patch_size, hidden
            self.conv_proj = nn.Conv2d(3, hidden, patch_size, stride=patch_size)
            seq = (image_size // patch_size) ** 2 + 1
            self.class_token = nn.Parameter(torch.zeros(1, 1, hidden))
            self.pos_embedding = nn.Parameter(torch.empty(1, seq, hidden).normal_(std=0.02))
            layer = nn.TransformerEncoderLayer(hidden, 2, 32, dropout=0.0, batch_first=True,
                                               norm_first=True, activation="gelu")
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.ln = nn.LayerNorm(hidden, eps=1e-6)
            self.heads = nn.Sequential()
            self.heads.add_module("head", nn.Linear(hidden, classes))

        def _process_input(self, x):
            n, c, h, w = x.shape
            p = self.patch_size
            torch._assert(h == self.image_size, f"Wrong image height! Expected "
                          f"{self.image_size} but got {h}!")
            torch._assert(w == self.image_size, f"Wrong image width! Expected "
                          f"{self.image_size} but got {w}!")
            x = self.conv_proj(x).reshape(n, self.hidden, (h // p) * (w // p))
            return x.permute(0, 2, 1)

        def forward(self, x):
            x = self._process_input(x)
            x = torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1)
            x = self.ln(self.encoder(x + self.pos_embedding))
            return self.heads(x[:, 0])

    model = VisionTransformer()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
    rec = []
    for _ in range(3):
        loss = F.cross_entropy(run(images), labels, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    return rec, model.class_token.grad, model.heads.head.weight


PROGRAMS += [vit_torchvision_style]


def adapter_mask_hook_with_kwargs(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(34)
    rng = np.random.default_rng(34)
    ids = torch.tensor(rng.integers(1, 15, (3, 6)))
    ids[1, 4:] = 0
    labels = torch.tensor([1, 0, 1])

    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.attn = nn.MultiheadAttention(d, 2, batch_first=True)
            self.norm = nn.LayerNorm(d)

        def forward(self, x, key_padding_mask=None):
            h = self.norm(x)
            return x + self.attn(h, h, h, key_padding_mask=key_padding_mask,
                                 need_weights=False)[0]

    class Classifier(nn.Module):
        def __init__(self, d=8):
            super().__init__()
            self.emb = nn.Embedding(15, d, padding_idx=0)
            self.block = Block(d)
            self.head = nn.Linear(d, 2)

        def forward(self, ids, mask=None):
            h = self.block(self.emb(ids), key_padding_mask=mask)
            return self.head(h.mean(1))

    model = Classifier()
    model.requires_grad_(False)
    # a bottleneck adapter added from outside by hooks, as adapter libraries do: the
    # pre-hook fills in the padding mask the caller left out, the hook adds the adapter
    adapter = nn.Sequential(nn.Linear(8, 2), nn.ReLU(), nn.Linear(2, 8))
    nn.init.zeros_(adapter[2].weight)

    def fill_mask(module, args, kwargs):
        if kwargs.get("key_padding_mask") is None:
            kwargs["key_padding_mask"] = current["ids"] == 0
        return args, kwargs

    def add_adapter(module, args, kwargs, output):
        return output + adapter(output)

    current = {}
    model.block.register_forward_pre_hook(fill_mask, with_kwargs=True)
    model.block.register_forward_hook(add_adapter, with_kwargs=True)
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(adapter.parameters(), lr=1e-2)
    rec = []
    for _ in range(3):
        current["ids"] = ids
        loss = F.cross_entropy(run(ids), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    return rec, adapter[2].weight.grad, adapter[0].weight, model.head.weight.grad


PROGRAMS += [adapter_mask_hook_with_kwargs]


def dataclass_loss_breakdown(torch, compiled=False):
    import dataclasses
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(35)
    rng = np.random.default_rng(35)
    x = torch.tensor(rng.standard_normal((10, 4)), dtype=torch.float32)
    boxes = torch.tensor(rng.random((10, 4)), dtype=torch.float32)
    cls = torch.tensor(rng.integers(0, 3, 10))

    @dataclasses.dataclass
    class Losses:
        classification: object
        box: object
        weight: float = 2.0

        @property
        def total(self):
            return self.classification + self.weight * self.box

    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 7))

    def train_losses(x):
        out = model(x)
        losses = Losses(F.cross_entropy(out[:, :3], cls),
                        F.smooth_l1_loss(out[:, 3:].sigmoid(), boxes, beta=0.1))
        # the total backpropagated, the detached terms logged by name (asdict deep-copies
        # its values, which only leaves and detached tensors allow)
        logged = Losses(losses.classification.detach(), losses.box.detach())
        return losses.total, dataclasses.asdict(logged)

    step = _maybe_compile(torch, compiled)(train_losses)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rec = []
    for _ in range(3):
        total, parts = step(x)
        opt.zero_grad()
        total.backward()
        opt.step()
        rec.append({k: float(v) for k, v in parts.items()})
    return rec, model[2].weight.grad, model[0].bias


PROGRAMS += [dataclass_loss_breakdown]



def xlstm_matrix_memory(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(36)
    rng = np.random.default_rng(36)
    ids = torch.tensor(rng.integers(0, 12, (2, 7)))

    class MLSTMCell(nn.Module):
        """xLSTM's mLSTM: a matrix memory with exponential input gates, stabilised in log
        space by a running maximum."""

        def __init__(self, d, hd):
            super().__init__()
            self.hd = hd
            self.qkv = nn.Linear(d, 3 * hd)
            self.gates = nn.Linear(d, 3)  # input (log), forget (pre-sigmoid), output
            self.out = nn.Linear(hd, d)

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = self.qkv(x).chunk(3, -1)
            k = k / math.sqrt(self.hd)
            i_tilde, f_tilde, o_tilde = self.gates(x).unbind(-1)
            log_f = F.logsigmoid(f_tilde)
            c = x.new_zeros(b, self.hd, self.hd)
            norm = x.new_zeros(b, self.hd)
            m = x.new_full((b,), float("-inf"))
            hs = []
            for t in range(n):
                m_new = torch.maximum(log_f[:, t] + m, i_tilde[:, t])
                i_gate = torch.exp(i_tilde[:, t] - m_new)
                f_gate = torch.exp(log_f[:, t] + m - m_new)
                c = f_gate[:, None, None] * c + i_gate[:, None, None] * (
                    v[:, t, :, None] * k[:, t, None, :])
                norm = f_gate[:, None] * norm + i_gate[:, None] * k[:, t]
                m = m_new
                num = (c @ q[:, t, :, None]).squeeze(-1)
                den = torch.maximum((norm * q[:, t]).sum(-1).abs(), torch.exp(-m))
                hs.append(torch.sigmoid(o_tilde[:, t, None]) * num / den[:, None])
            return self.out(torch.stack(hs, 1))

    class LM(nn.Module):
        def __init__(self, d=10):
            super().__init__()
            self.emb = nn.Embedding(12, d)
            self.norm = nn.LayerNorm(d)
            self.cell = MLSTMCell(d, 6)
            self.head = nn.Linear(d, 12)

        def forward(self, ids):
            h = self.emb(ids)
            return self.head(h + self.cell(self.norm(h)))

    model = LM()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
    rec = []
    for _ in range(3):
        logits = run(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 12), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        rec.append(loss.item())
    return rec, model.cell.gates.weight.grad, logits.detach()


PROGRAMS += [xlstm_matrix_memory]


def deltanet_delta_rule(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(37)
    rng = np.random.default_rng(37)
    # an associative recall task: key-value pairs, then a query key
    keys = torch.tensor(rng.standard_normal((4, 5, 6)), dtype=torch.float32)
    values = torch.tensor(rng.integers(0, 4, (4, 5)))
    query_pos = torch.tensor(rng.integers(0, 5, 4))

    class DeltaNetLayer(nn.Module):
        """A fast-weight memory written by the delta rule: S <- S - beta (S k - v) k^T."""

        def __init__(self, d, hd):
            super().__init__()
            self.k, self.v, self.q = nn.Linear(d, hd), nn.Linear(d, hd), nn.Linear(d, hd)
            self.beta = nn.Linear(d, 1)
            self.o = nn.Linear(hd, d)

        def forward(self, x):
            b, n, _ = x.shape
            k = F.normalize(F.silu(self.k(x)), dim=-1)
            q = F.normalize(F.silu(self.q(x)), dim=-1)
            v = self.v(x)
            beta = torch.sigmoid(self.beta(x))
            state = x.new_zeros(b, v.size(-1), k.size(-1))
            outs = []
            for t in range(n):
                kt, vt = k[:, t], v[:, t]
                predicted = torch.einsum("bij,bj->bi", state, kt)
                state = state + torch.einsum("bi,bj->bij", beta[:, t] * (vt - predicted), kt)
                outs.append(torch.einsum("bij,bj->bi", state, q[:, t]))
            return self.o(torch.stack(outs, 1))

    class Recall(nn.Module):
        def __init__(self, d=12):
            super().__init__()
            self.key_in = nn.Linear(6, d)
            self.value_emb = nn.Embedding(4, d)
            self.layer = DeltaNetLayer(d, 8)
            self.head = nn.Linear(d, 4)

        def forward(self, keys, values, query):
            pairs = self.key_in(keys) + self.value_emb(values)
            seq = torch.cat([pairs, self.key_in(query)[:, None]], 1)
            return self.head(self.layer(seq)[:, -1])

    model = Recall()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    query = keys[torch.arange(4), query_pos]
    target = values[torch.arange(4), query_pos]
    rec = []
    for _ in range(3):
        logits = run(keys, values, query)
        loss = F.cross_entropy(logits, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    return rec, logits.detach(), model.layer.beta.weight.grad


PROGRAMS += [deltanet_delta_rule]


def ttt_linear_inner_loop(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(38)
    rng = np.random.default_rng(38)
    x = torch.tensor(rng.standard_normal((3, 6, 8)), dtype=torch.float32)
    y = torch.tensor(rng.standard_normal((3, 8)), dtype=torch.float32)

    class TTTLinear(nn.Module):
        """A hidden state that is itself a linear model, trained by one gradient step per
        token on a self-supervised reconstruction loss (create_graph: the outer loss
        differentiates through the inner steps)."""

        def __init__(self, d, inner_lr=0.5):
            super().__init__()
            self.theta_k = nn.Linear(d, d, bias=False)
            self.theta_v = nn.Linear(d, d, bias=False)
            self.theta_q = nn.Linear(d, d, bias=False)
            self.w0 = nn.Parameter(torch.eye(d) * 0.5)
            self.inner_lr = inner_lr

        def forward(self, x):
            b, n, d = x.shape
            w = self.w0.expand(b, d, d)
            outs = []
            for t in range(n):
                k, v = self.theta_k(x[:, t]), self.theta_v(x[:, t])
                inner = (torch.einsum("bij,bj->bi", w, k) - v).pow(2).sum()
                (g,) = torch.autograd.grad(inner, w, create_graph=True)
                w = w - self.inner_lr * g / b
                outs.append(torch.einsum("bij,bj->bi", w, self.theta_q(x[:, t])))
            return torch.stack(outs, 1)

    model = nn.ModuleDict({"ttt": TTTLinear(8), "head": nn.Linear(8, 8)})

    def forward_loss(x, y):
        h = model["ttt"](x)
        return F.mse_loss(model["head"](h[:, -1]), y)

    step = _maybe_compile(torch, compiled)(forward_loss)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    rec = []
    for _ in range(2):
        loss = step(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    return rec, model["ttt"].w0.grad, model["ttt"].theta_k.weight


PROGRAMS += [ttt_linear_inner_loop]


def stylegan2_modulated_conv(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(39)
    rng = np.random.default_rng(39)
    real = torch.tensor(rng.standard_normal((4, 1, 8, 8)), dtype=torch.float32)

    class ModulatedConv(nn.Module):
        def __init__(self, cin, cout, k, w_dim, demodulate=True):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(1, cout, cin, k, k))
            self.affine = nn.Linear(w_dim, cin)
            nn.init.ones_(self.affine.bias)  # styles start at one
            self.scale = 1 / math.sqrt(cin * k * k)
            self.demodulate, self.padding = demodulate, k // 2

        def forward(self, x, w):
            b, cin, h, wd = x.shape
            style = self.affine(w).view(b, 1, cin, 1, 1)
            weight = self.scale * self.weight * style
            if self.demodulate:
                demod = torch.rsqrt(weight.pow(2).sum([2, 3, 4]) + 1e-8)
                weight = weight * demod.view(b, -1, 1, 1, 1)
            # per-sample weights as one grouped convolution over the batch
            weight = weight.reshape(-1, cin, *weight.shape[3:])
            out = F.conv2d(x.reshape(1, -1, h, wd), weight, padding=self.padding, groups=b)
            return out.view(b, -1, *out.shape[2:])

    class Generator(nn.Module):
        def __init__(self, z_dim=6, w_dim=6):
            super().__init__()
            self.mapping = nn.Sequential(nn.Linear(z_dim, w_dim), nn.LeakyReLU(0.2),
                                         nn.Linear(w_dim, w_dim))
            self.const = nn.Parameter(torch.randn(1, 4, 4, 4))
            self.conv1 = ModulatedConv(4, 4, 3, w_dim)
            self.noise_strength = nn.Parameter(torch.zeros(1))
            self.conv2 = ModulatedConv(4, 4, 3, w_dim)
            self.to_rgb = ModulatedConv(4, 1, 1, w_dim, demodulate=False)

        def forward(self, z, noise):
            w = self.mapping(F.normalize(z, dim=1) * math.sqrt(z.size(1)))
            x = self.const.expand(z.size(0), -1, -1, -1)
            x = F.leaky_relu(self.conv1(x, w) + self.noise_strength * noise[:, :, :4, :4],
                             0.2)
            x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
            x = F.leaky_relu(self.conv2(x, w) + self.noise_strength * noise, 0.2)
            return self.to_rgb(x, w)

    gen = Generator()
    disc = nn.Sequential(nn.Conv2d(1, 4, 3, stride=2, padding=1), nn.LeakyReLU(0.2),
                         nn.Flatten(), nn.Linear(64, 1))
    g_run = _maybe_compile(torch, compiled)(gen)
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-3, betas=(0.0, 0.99))
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-3, betas=(0.0, 0.99))
    rec = []
    for _ in range(2):
        z, noise = torch.randn(4, 6), torch.randn(4, 1, 8, 8)
        fake = g_run(z, noise)
        # non-saturating logistic losses with an R1 penalty on the reals
        real_in = real.detach().requires_grad_(True)
        real_score = disc(real_in)
        (grad_real,) = torch.autograd.grad(real_score.sum(), real_in, create_graph=True)
        r1 = grad_real.pow(2).sum([1, 2, 3]).mean()
        loss_d = (F.softplus(disc(fake.detach())) + F.softplus(-real_score)).mean() + 5 * r1
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()
        loss_g = F.softplus(-disc(fake)).mean()
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
        rec.append((loss_d.item(), loss_g.item(), r1.item()))
    return rec, fake.detach(), gen.conv1.weight.grad, gen.noise_strength.grad


PROGRAMS += [stylegan2_modulated_conv]



def maybe_autocast_context(torch, compiled=False):
    import contextlib
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(40)
    rng = np.random.default_rng(40)
    x = torch.tensor(rng.standard_normal((8, 6)), dtype=torch.float32)
    y = torch.tensor(rng.integers(0, 3, 8))

    @contextlib.contextmanager
    def maybe_autocast(enabled):
        # one code path for mixed and full precision, as training scripts write it
        if enabled:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                yield
        else:
            yield

    model = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 3))

    def loss_fn(x, y, use_amp):
        with maybe_autocast(use_amp):
            logits = model(x)
        return F.cross_entropy(logits.float(), y), logits.dtype

    step = _maybe_compile(torch, compiled)(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rec = []
    for i in range(4):
        loss, dtype = step(x, y, i % 2 == 0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((loss.item(), dtype))
    return rec, model[2].weight.grad, model[0].bias


PROGRAMS += [maybe_autocast_context]



def optical_flow_cost_volume(torch, compiled=False):
    import itertools
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(42)
    rng = np.random.default_rng(42)
    frame1 = torch.tensor(rng.standard_normal((2, 1, 8, 8)), dtype=torch.float32)
    true_flow = torch.tensor([[1.0, 0.0], [0.0, -1.0]])  # one global shift per pair
    frame2 = torch.stack([torch.roll(frame1[0], (0, 1), (1, 2)),
                          torch.roll(frame1[1], (-1, 0), (1, 2))])

    class FlowNet(nn.Module):
        """A correlation layer between the two frames' features over a (2r+1)^2 window of
        displacements, then a head regressing the flow (PWC-Net style)."""

        def __init__(self, radius=1):
            super().__init__()
            self.radius = radius
            self.features = nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.LeakyReLU(0.1),
                                          nn.Conv2d(6, 6, 3, padding=1))
            self.head = nn.Sequential(nn.Conv2d((2 * radius + 1) ** 2, 8, 3, padding=1),
                                      nn.LeakyReLU(0.1), nn.Conv2d(8, 2, 3, padding=1))

        def correlation(self, f1, f2):
            r = self.radius
            padded = F.pad(f2, (r, r, r, r))
            h, w = f1.shape[-2:]
            costs = []
            for dy, dx in itertools.product(range(2 * r + 1), repeat=2):
                shifted = padded[..., dy:dy + h, dx:dx + w]
                costs.append((f1 * shifted).mean(1))
            return F.leaky_relu(torch.stack(costs, 1), 0.1)

        def forward(self, a, b):
            return self.head(self.correlation(self.features(a), self.features(b)))

    model = FlowNet()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    target = true_flow[:, :, None, None].expand(-1, -1, 8, 8)
    rec = []
    for _ in range(3):
        flow = run(frame1, frame2)
        epe = (flow - target).norm(dim=1).mean()  # the average end-point error
        opt.zero_grad()
        epe.backward()
        opt.step()
        rec.append(epe.item())
    return rec, flow.detach().mean((2, 3)), model.head[0].weight.grad


PROGRAMS += [optical_flow_cost_volume]


def signature_filtered_kwargs(torch, compiled=False):
    import inspect as pyinspect
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(43)
    rng = np.random.default_rng(43)
    ids = torch.tensor(rng.integers(1, 10, (3, 5)))
    ids[2, 3:] = 0
    labels = torch.tensor([0, 1, 1])

    class Attention(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.mha = nn.MultiheadAttention(d, 2, batch_first=True)

        def forward(self, x, attention_mask=None):
            pad = None if attention_mask is None else attention_mask == 0
            return x + self.mha(x, x, x, key_padding_mask=pad, need_weights=False)[0]

    class FeedForward(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.net = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.GELU(),
                                     nn.Linear(2 * d, d))

        def forward(self, x):
            return x + self.net(x)

    class Encoder(nn.Module):
        """Layers of different kinds, each given the keyword arguments its forward takes
        (the signature check model libraries use to route optional inputs)."""

        def __init__(self, d=8):
            super().__init__()
            self.emb = nn.Embedding(10, d, padding_idx=0)
            self.layers = nn.ModuleList([Attention(d), FeedForward(d), Attention(d)])
            self.head = nn.Linear(d, 2)

        def forward(self, ids, **kwargs):
            x = self.emb(ids)
            for layer in self.layers:
                accepted = pyinspect.signature(layer.forward).parameters
                x = layer(x, **{k: v for k, v in kwargs.items() if k in accepted})
            return self.head(x[:, 0])

    model = Encoder()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    mask = (ids != 0).long()
    rec = []
    for _ in range(3):
        loss = F.cross_entropy(run(ids, attention_mask=mask), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    return rec, model.layers[0].mha.in_proj_weight.grad, model.head.bias


PROGRAMS += [signature_filtered_kwargs]


def lora_wrapper_getattr(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(44)
    rng = np.random.default_rng(44)
    x = torch.tensor(rng.standard_normal((6, 8)), dtype=torch.float32)
    y = torch.tensor(rng.integers(0, 4, 6))

    class LoraLinear(nn.Module):
        """A LoRA layer wrapping a frozen base layer; attribute reads it does not answer
        (in_features, weight, ...) are forwarded to the base, as adapter libraries do."""

        def __init__(self, base, r=2, alpha=4):
            super().__init__()
            self.base = base
            self.lora_a = nn.Parameter(torch.randn(r, base.in_features) * 0.1)
            self.lora_b = nn.Parameter(torch.zeros(base.out_features, r))
            self.scaling = alpha / r

        def __getattr__(self, name):
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(self.base, name)

        def forward(self, x):
            delta = (x @ self.lora_a.T) @ self.lora_b.T
            # the base's own attributes, read through the wrapper
            assert x.shape[-1] == self.in_features
            return F.linear(x, self.weight, self.bias) + self.scaling * delta

    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))
    model.requires_grad_(False)
    model[0] = LoraLinear(model[0])
    model[2] = LoraLinear(model[2])
    run = _maybe_compile(torch, compiled)(model)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-2)
    rec = []
    for _ in range(3):
        loss = F.cross_entropy(run(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    return rec, model[2].lora_b.grad, model[0].lora_a, len(params), model[2].out_features


PROGRAMS += [lora_wrapper_getattr]



def clip_logit_scale_data_clamp(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(45)
    rng = np.random.default_rng(45)
    images = torch.tensor(rng.standard_normal((6, 10)), dtype=torch.float32)
    captions = torch.tensor(rng.integers(1, 16, (6, 5)))

    class CLIP(nn.Module):
        def __init__(self, d=8):
            super().__init__()
            self.visual = nn.Sequential(nn.Linear(10, 16), nn.GELU(), nn.Linear(16, d))
            self.token = nn.Embedding(16, d)
            self.text = nn.GRU(d, d, batch_first=True)
            self.text_proj = nn.Parameter(torch.randn(d, d) * d ** -0.5)
            # (as resumed from a run whose temperature went past the bound)
            self.logit_scale = nn.Parameter(torch.ones([]) * 4.75)

        def forward(self, images, captions):
            # the temperature kept within [0, log 100] by writing through .data, as some
            # implementations do in forward
            self.logit_scale.data.clamp_(0, math.log(100))
            img = F.normalize(self.visual(images), dim=-1)
            h, _ = self.text(self.token(captions))
            txt = F.normalize(h[:, -1] @ self.text_proj, dim=-1)
            scale = self.logit_scale.exp()
            return scale * img @ txt.t(), scale

    model = CLIP()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.AdamW(model.parameters(), lr=0.5, weight_decay=0.2)
    labels = torch.arange(6)
    rec = []
    for _ in range(3):
        logits, scale = run(images, captions)
        loss = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((loss.item(), scale.item(), model.logit_scale.item()))
    return rec, model.logit_scale.grad, model.text_proj.grad


PROGRAMS += [clip_logit_scale_data_clamp]



def custom_fwd_swiglu_autocast(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(46)
    rng = np.random.default_rng(46)
    x = torch.tensor(rng.standard_normal((6, 8)), dtype=torch.float32)
    y = torch.tensor(rng.standard_normal((6, 8)), dtype=torch.float32)

    class SwiGLU(torch.autograd.Function):
        """silu(a) * b with a hand-written backward, run in float32 under autocast (the
        cast_inputs of custom_fwd) for its exp's range."""

        @staticmethod
        @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return F.silu(a) * b

        @staticmethod
        @torch.amp.custom_bwd(device_type="cpu")
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            sig = torch.sigmoid(a)
            silu = a * sig
            return grad * b * sig * (1 + a * (1 - sig)), grad * silu

    class MLP(nn.Module):
        def __init__(self, d=8, hidden=16):
            super().__init__()
            self.gate_up = nn.Linear(d, 2 * hidden, bias=False)
            self.down = nn.Linear(hidden, d, bias=False)

        def forward(self, x):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                a, b = self.gate_up(x).chunk(2, -1)
                h = SwiGLU.apply(a, b)
                return self.down(h), h.dtype

    model = MLP()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    rec = []
    for _ in range(3):
        out, dtype = run(x)
        loss = F.mse_loss(out.float(), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append((loss.item(), dtype, out.dtype))
    return rec, model.gate_up.weight.grad, model.down.weight


PROGRAMS += [custom_fwd_swiglu_autocast]



def calibrated_call_override(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(47)
    rng = np.random.default_rng(47)
    x = torch.tensor(rng.standard_normal((8, 5)), dtype=torch.float32)
    y = torch.tensor(rng.integers(0, 3, 8))

    class CalibratedClassifier(nn.Module):
        """Logits divided by a learned temperature in __call__, so every caller gets the
        calibrated scores while forward stays the plain network."""

        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(5, 12), nn.ReLU(), nn.Linear(12, 3))
            self.temperature = nn.Parameter(torch.tensor(1.5))

        def __call__(self, *args, **kwargs):
            return super().__call__(*args, **kwargs) / self.temperature

        def forward(self, x):
            return self.net(x)

    model = CalibratedClassifier()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rec = []
    for _ in range(3):
        logits = run(x)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    return rec, logits.detach(), model.temperature.grad, model.net[2].weight


PROGRAMS += [calibrated_call_override]


def silenced_warning_decoder(torch, compiled=False):
    import warnings
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(48)
    rng = np.random.default_rng(48)
    images = torch.tensor(rng.standard_normal((2, 1, 8, 8)), dtype=torch.float32)

    class AutoEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.down = nn.Sequential(nn.Conv2d(1, 4, 3, stride=2, padding=1), nn.ReLU())
            self.up = nn.Conv2d(4, 1, 3, padding=1)

        def forward(self, x):
            h = self.down(x)
            with warnings.catch_warnings():
                # old code keeps the deprecated upsample and silences its warning
                warnings.simplefilter("ignore")
                h = F.upsample(h, scale_factor=2, mode="nearest")
            return self.up(h)

    model = AutoEncoder()
    run = _maybe_compile(torch, compiled)(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rec = []
    for _ in range(3):
        loss = F.mse_loss(run(images), images)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    return rec, model.up.weight.grad, model.down[0].bias


PROGRAMS += [silenced_warning_decoder]



def fp32_loss_region_cuda_autocast(torch, compiled=False):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(49)
    rng = np.random.default_rng(49)
    feats = torch.tensor(rng.standard_normal((6, 4)), dtype=torch.float32)
    boxes = torch.tensor(rng.random((6, 4)), dtype=torch.float32)
    labels = torch.tensor(rng.integers(0, 2, 6)).float()

    head = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 5))

    def detection_loss(feats):
        out = head(feats)
        # losses computed in full precision, as detection codebases fence them (the CUDA
        # spelling, disabled, is the idiom even where the model runs on the CPU)
        with torch.cuda.amp.autocast(enabled=False):
            out = out.float()
            cls = F.binary_cross_entropy_with_logits(out[:, 0], labels)
            reg = F.smooth_l1_loss(out[:, 1:].sigmoid(), boxes, beta=0.05)
        return cls + reg

    step = _maybe_compile(torch, compiled)(detection_loss)
    opt = torch.optim.SGD(head.parameters(), lr=0.2, momentum=0.9)
    rec = []
    for _ in range(3):
        loss = step(feats)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.append(loss.item())
    return rec, head[2].weight.grad, head[0].bias


PROGRAMS += [fp32_loss_region_cuda_autocast]



# Loosened where a program's values are long sums of float32 rounding that PyTorch's kernels
# and NumPy's accumulate in a different order (none so far).
_TOLERANCES = {}

# The code generator's compile time dominates the file's (the suite is near its time budget):
# the programs run on inductor are nine whose graphs are small; the others (recurrent loops
# unrolled into long graphs, transformer stacks, the convolutional GANs and flow network, and
# the rest to keep the file's time down) run on eager and aot_eager only, and each matched
# eager fusegrad under inductor when written.
_ON_INDUCTOR = {"fsq_autoencoder", "virtual_adversarial_training", "ewc_two_tasks",
                "swav_sinkhorn_prototypes", "fixmatch_pseudo_labels",
                "relativistic_average_gan", "learned_transformed_distribution",
                "qr_dqn_quantile_huber", "adapter_mask_hook_with_kwargs"}

# Programs whose compiled runs differ from eager fusegrad (values or errors), under every
# backend, with each gap's minimal repro.
_COMPILED_GAPS: dict = {}

# The graph breaks torch.compile (2.13, backend="eager") takes at least in each compiled
# program; a program left out takes none.
_TORCH_BREAKS = {
    # the GRU encoders ('Attempted to wrap RNN, GRU, or LSTM'); fusegrad captures them
    "tacotron_location_attention": 1,
    "clip_logit_scale_data_clamp": 1,
    # the routing log marked torch.compiler.disable ('Skip calling
    # `torch.compiler.disable()`d function'); fusegrad breaks there too
    "mixture_of_depths": 2,
    # MultiheadAttention's warning that a bool padding mask and a float attention mask
    # differ in type, at _warnings.warn ('Attempted to call function marked as skipped');
    # fusegrad breaks at the same call
    "mha_padding_and_alibi_masks": 1,
    # requires_grad_ on the input and both autograd.grad calls; fusegrad breaks at
    # requires_grad_ only
    "float64_default_dtype_pinn": 3,
    # asdict's copy.deepcopy of a tensor and a generator it traces
    "dataclass_loss_breakdown": 2,
    # warnings.catch_warnings ('Attempted to call function marked as skipped',
    # 'Reconstruction failure')
    "silenced_warning_decoder": 2,
    # the inner gradient steps' autograd.grad calls ('using `torch.autograd.grad` with
    # `torch._dynamo.config.trace_autograd_ops=False`'); fusegrad captures them
    "ttt_linear_inner_loop": 2,
}

# Programs where fusegrad breaks the graph more often than torch does, with each gap's minimal
# repro.
_CAPTURE_GAPS: dict = {}

# The file's tests over its programs, with the tables above (program_tests).
(test_program, test_compiled_matches_eager, test_compiled_graph_breaks,
 test_torch_graph_breaks) = program_tests(
    PROGRAMS, torch, fg, tolerances=_TOLERANCES, on_inductor=_ON_INDUCTOR,
    compiled_gaps=_COMPILED_GAPS, torch_breaks=_TORCH_BREAKS, capture_gaps=_CAPTURE_GAPS)


def _export_guarded_decoder(lib):
    """Boxes decoded from a detection head's offsets, the decoding skipped when the model
    is traced or exported (the guard exportable models put around their post-processing)."""
    lib.manual_seed(41)
    head = lib.nn.Conv2d(4, 4, 1)
    anchors = lib.rand(9, 4)

    def decode(features):
        offsets = head(features).flatten(2).transpose(1, 2)  # (B, 9, 4)
        if lib.jit.is_tracing() or lib.onnx.is_in_onnx_export():
            return offsets  # left to the exported graph's consumer
        centers = anchors[:, :2] + offsets[..., :2] * anchors[:, 2:]
        sizes = anchors[:, 2:] * offsets[..., 2:].exp()
        return lib.cat([centers - sizes / 2, centers + sizes / 2], -1)

    return decode(lib.randn(2, 4, 3, 3)).detach().numpy()


def test_export_guard_in_forward():
    """A forward guarded by jit.is_tracing() or onnx.is_in_onnx_export() runs as PyTorch's."""
    np.testing.assert_allclose(_export_guarded_decoder(fg), _export_guarded_decoder(torch),
                               rtol=1e-5, atol=1e-6)


def _aux_loss_on_output(lib):
    """A mixture-of-experts layer hands its load-balancing loss to the training loop as an
    attribute of its output tensor (as some MoE layers do), summed over the layers."""
    lib.manual_seed(50)
    nn, F = lib.nn, lib.nn.functional
    router, experts = nn.Linear(4, 2), nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])

    def moe(x):
        probs = F.softmax(router(x), -1)
        top = probs.argmax(-1)
        out = sum(experts[i](x) * (top == i).float()[:, None] * probs[:, i:i + 1]
                  for i in range(2))
        fraction = F.one_hot(top, 2).float().mean(0)
        out.aux_loss = 2 * (fraction * probs.mean(0)).sum()
        return out

    x = lib.randn(5, 4)
    h = moe(moe(x))
    loss = h.pow(2).mean() + 0.01 * h.aux_loss
    loss.backward()
    return loss.item(), h.aux_loss.item(), router.weight.grad.numpy().copy()


@pytest.mark.xfail(strict=True, reason=(
    "fusegrad's Tensor takes no new Python attributes: y = fg.ones(1) * 2; y.note = 'x' "
    "raises AttributeError(\"'Tensor' object has no attribute 'note'\") (a Parameter takes "
    "them); torch's tensors carry them"))
def test_python_attribute_on_an_output_tensor():
    """A loss handed along as an attribute of a layer's output tensor, as under PyTorch."""
    want, got = _aux_loss_on_output(torch), _aux_loss_on_output(fg)
    assert got[:2] == pytest.approx(want[:2], rel=1e-5)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-5, atol=1e-6)


def _module_with_own_call(lib):
    """A module class whose own `__call__` scales what `Module.__call__` gives, nested in
    another, called eagerly and compiled three ways (the module, a lambda calling it, its
    parent)."""
    lib.manual_seed(51)

    class Scaled(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = lib.nn.Linear(2, 2)

        def __call__(self, x):
            return super().__call__(x) * 2

        def forward(self, x):
            return self.l(x)

    class Outer(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Scaled()

        def forward(self, x):
            return self.inner(x) + 1

    outer, x = Outer(), lib.randn(3, 2)
    lib._dynamo.reset()
    runs = [outer.inner(x), lib.compile(outer.inner, backend="eager")(x),
            lib.compile(lambda v: outer.inner(v), backend="eager")(x),
            outer(x), lib.compile(outer, backend="eager")(x)]
    return [r.detach().numpy() for r in runs]


def test_a_module_class_with_its_own_call_compiles_as_it_runs():
    """The class's `__call__` runs in compiled code too (it was skipped: compiled calls
    returned forward's value, half the module's)."""
    got, want = _module_with_own_call(fg), _module_with_own_call(torch)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], got[0], rtol=1e-6)
    np.testing.assert_allclose(got[4], got[3], rtol=1e-6)


def _guarded_by_export_queries(lib):
    """`jit.is_tracing() or onnx.is_in_onnx_export()` in compiled code: folded, no break."""
    lib._dynamo.reset()

    def f(x):
        if lib.jit.is_tracing() or lib.onnx.is_in_onnx_export():
            return x
        return x * 2

    return lib.compile(f, backend="eager")(lib.ones(2)).numpy()


def test_export_queries_fold_in_compiled_code():
    counters = fg._dynamo.utils.counters
    counters.clear()
    got = _guarded_by_export_queries(fg)
    assert not counters["graph_break"] and counters["stats"]["unique_graphs"] == 1
    np.testing.assert_array_equal(got, _guarded_by_export_queries(torch))
