"""Programs written in the style of pytorch.org's tutorials and recipes, run once with torch
and once with fusegrad (same seeds, so the same weights and data), comparing values,
gradients, grad_fn names, what they print and the errors they raise.

Each program takes the library as its argument and returns what it computed; `_check` runs
it with both and compares. Printed text is compared with object addresses blanked out."""

import math
import os
import tempfile

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.utils.prune  # noqa: E402,F401  (torch needs the import; the tutorial has it)
from program_support import compare as _compare  # noqa: E402
from program_support import run_program  # noqa: E402

import fusegrad as fg  # noqa: E402


def _check(prog, rtol=1e-4, atol=1e-5, stdout=True):
    want, want_error, want_text = run_program(prog, torch)
    got, got_error, got_text = run_program(prog, fg)
    assert got_error == want_error
    if stdout:
        assert got_text == want_text
    _compare(want, got, "result", rtol, atol)


# ---------------------------------------------------------------------------- torch.func


def _per_sample_grads(torch):
    nn, F, func = torch.nn, torch.nn.functional, torch.func

    class SimpleCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 4, 3, 1)
            self.fc1 = nn.Linear(4 * 3 * 3, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            return F.log_softmax(self.fc1(torch.flatten(x, 1)), dim=1)

    torch.manual_seed(0)
    model = SimpleCNN()
    data = torch.randn(4, 1, 8, 8)
    targets = torch.randint(10, (4,))

    def compute_grad(sample, target):
        loss = F.nll_loss(model(sample.unsqueeze(0)), target.unsqueeze(0))
        return torch.autograd.grad(loss, list(model.parameters()))

    loop = [torch.stack(s) for s in zip(*[compute_grad(data[i], targets[i]) for i in range(4)])]
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def compute_loss(params, buffers, sample, target):
        predictions = func.functional_call(model, (params, buffers), (sample.unsqueeze(0),))
        return F.nll_loss(predictions, target.unsqueeze(0))

    ft = func.vmap(func.grad(compute_loss), in_dims=(None, None, 0, 0))(
        params, buffers, data, targets)
    return loop, ft


def _jacobians_hessians(torch):
    func, F = torch.func, torch.nn.functional
    torch.manual_seed(0)
    D = 6
    weight, bias, x = torch.randn(D, D), torch.randn(D), torch.randn(D)

    def predict(weight, bias, x):
        return F.linear(x, weight, bias).tanh()

    jac = func.jacrev(predict, argnums=2)(weight, bias, x)
    jw, jb = func.jacrev(predict, argnums=(0, 1))(weight, bias, x)
    jf = func.jacfwd(predict, argnums=2)(weight, bias, x)
    hess = func.hessian(predict, argnums=2)(weight, bias, x)
    hess2 = func.jacrev(func.jacrev(predict, argnums=2), argnums=2)(weight, bias, x)
    xb = torch.randn(3, D)
    bj = func.vmap(func.jacrev(predict, argnums=2), in_dims=(None, None, 0))(weight, bias, xb)
    hvp = func.jvp(func.jacrev(lambda x: x.sin().sum()), (x,), (torch.randn(D),))[1]
    for bad in (lambda: func.jacrev(lambda x: 3.0)(x),
                lambda: func.jacrev(predict, argnums=3)(weight, bias, x)):
        try:
            bad()
        except Exception as e:
            print(type(e).__name__, e)
    return jac, jw, jb, jf, hess, hess2, bj, hvp


def test_per_sample_gradients():
    _check(_per_sample_grads)


def test_jacobians_and_hessians():
    _check(_jacobians_hessians)


# ---------------------------------------------------------------------------- NLP


def _seq2seq(torch):
    nn, F = torch.nn, torch.nn.functional
    SOS, MAX_LENGTH = 0, 4
    torch.manual_seed(0)

    class Encoder(nn.Module):
        def __init__(self, vocab, hidden):
            super().__init__()
            self.embedding = nn.Embedding(vocab, hidden)
            self.gru = nn.GRU(hidden, hidden, batch_first=True)
            self.dropout = nn.Dropout(0.1)

        def forward(self, input):
            return self.gru(self.dropout(self.embedding(input)))

    class Attention(nn.Module):
        def __init__(self, hidden):
            super().__init__()
            self.Wa, self.Ua, self.Va = (nn.Linear(hidden, hidden), nn.Linear(hidden, hidden),
                                         nn.Linear(hidden, 1))

        def forward(self, query, keys):
            scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
            weights = F.softmax(scores.squeeze(2).unsqueeze(1), dim=-1)
            return torch.bmm(weights, keys), weights

    class Decoder(nn.Module):
        def __init__(self, hidden, vocab):
            super().__init__()
            self.embedding = nn.Embedding(vocab, hidden)
            self.attention = Attention(hidden)
            self.gru = nn.GRU(2 * hidden, hidden, batch_first=True)
            self.out = nn.Linear(hidden, vocab)

        def forward(self, encoder_outputs, hidden, target=None):
            input = torch.empty(encoder_outputs.size(0), 1, dtype=torch.long).fill_(SOS)
            outputs, attentions = [], []
            for i in range(MAX_LENGTH):
                embedded = self.embedding(input)
                context, attn = self.attention(hidden.permute(1, 0, 2), encoder_outputs)
                output, hidden = self.gru(torch.cat((embedded, context), dim=2), hidden)
                output = self.out(output)
                outputs.append(output)
                attentions.append(attn)
                if target is not None:
                    input = target[:, i].unsqueeze(1)
                else:
                    input = output.topk(1)[1].squeeze(-1).detach()
            return F.log_softmax(torch.cat(outputs, 1), -1), hidden, torch.cat(attentions, 1)

    enc, dec = Encoder(9, 8), Decoder(8, 7)
    print(enc, dec)
    opts = [torch.optim.Adam(m.parameters(), lr=0.01) for m in (enc, dec)]
    inp, tgt = torch.randint(2, 9, (3, MAX_LENGTH)), torch.randint(2, 7, (3, MAX_LENGTH))
    losses = []
    for _ in range(2):
        for o in opts:
            o.zero_grad()
        outputs, hidden = enc(inp)
        dout, _, attn = dec(outputs, hidden, tgt)
        loss = nn.NLLLoss()(dout.view(-1, dout.size(-1)), tgt.view(-1))
        loss.backward()
        for o in opts:
            o.step()
        losses.append(loss)
        print(loss.grad_fn, dout.grad_fn.name(), attn.grad_fn.name())
    enc.eval()
    with torch.no_grad():
        dout, _, attn = dec(*enc(inp[:1]))
    return losses, dout, attn, enc.state_dict(), dec.gru.weight_hh_l0.grad


def _char_rnn(torch):
    nn = torch.nn
    torch.manual_seed(1)

    class CharRNN(nn.Module):
        def __init__(self, n_in, n_hidden, n_out):
            super().__init__()
            self.rnn = nn.RNN(n_in, n_hidden)
            self.h2o = nn.Linear(n_hidden, n_out)
            self.softmax = nn.LogSoftmax(dim=1)

        def forward(self, line):
            return self.softmax(self.h2o(self.rnn(line)[1][0]))

    def line_tensor(idx):
        t = torch.zeros(len(idx), 1, 10)
        for i, k in enumerate(idx):
            t[i][0][k] = 1
        return t

    model = CharRNN(10, 16, 4)
    print(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.15)
    batch = [line_tensor(torch.randint(0, 10, (k,)).tolist()) for k in (3, 5, 2)]
    total = sum(nn.NLLLoss()(model(t), torch.tensor([c])) for t, c in zip(batch, (0, 3, 2)))
    (total / 3).backward()
    norm = nn.utils.clip_grad_norm_(model.parameters(), 3)
    opt.step()
    guess = model(batch[0])
    top_n, top_i = guess.topk(3)
    print(total, top_n, top_i, top_i[0][0].item())
    packed = nn.utils.rnn.pack_sequence([b.squeeze(1) for b in batch], enforce_sorted=False)
    out, h = model.rnn(packed)
    print(type(out).__name__, out.batch_sizes, out.sorted_indices)
    return norm, model.state_dict(), guess, out.data, h


def _transformer_lm(torch):
    nn = torch.nn
    torch.manual_seed(0)

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, dropout=0.1, max_len=20):
            super().__init__()
            self.dropout = nn.Dropout(p=dropout)
            position = torch.arange(max_len).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
            pe = torch.zeros(max_len, 1, d_model)
            pe[:, 0, 0::2] = torch.sin(position * div_term)
            pe[:, 0, 1::2] = torch.cos(position * div_term)
            self.register_buffer('pe', pe)

        def forward(self, x):
            return self.dropout(x + self.pe[:x.size(0)])

    class TransformerModel(nn.Module):
        def __init__(self, ntoken, d_model, nhead, d_hid, nlayers, dropout=0.5):
            super().__init__()
            self.pos_encoder = PositionalEncoding(d_model, dropout)
            layer = nn.TransformerEncoderLayer(d_model, nhead, d_hid, dropout)
            self.transformer_encoder = nn.TransformerEncoder(layer, nlayers)
            self.embedding = nn.Embedding(ntoken, d_model)
            self.d_model = d_model
            self.linear = nn.Linear(d_model, ntoken)
            self.embedding.weight.data.uniform_(-0.1, 0.1)
            self.linear.bias.data.zero_()
            self.linear.weight.data.uniform_(-0.1, 0.1)

        def forward(self, src):
            src = self.pos_encoder(self.embedding(src) * math.sqrt(self.d_model))
            mask = nn.Transformer.generate_square_subsequent_mask(len(src))
            return self.linear(self.transformer_encoder(src, mask))

    model = TransformerModel(20, 8, 2, 16, 2, 0.2)
    print(model)
    print(nn.Transformer.generate_square_subsequent_mask(3))
    data = torch.randint(0, 20, (32,)).view(4, 8).t().contiguous()
    optimizer = torch.optim.SGD(model.parameters(), lr=5.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.95)
    losses, norms = [], []
    for i in range(0, 6, 3):
        src, target = data[i:i + 3], data[i + 1:i + 4].reshape(-1)
        loss = nn.CrossEntropyLoss()(model(src).view(-1, 20), target)
        optimizer.zero_grad()
        loss.backward()
        norms.append(nn.utils.clip_grad_norm_(model.parameters(), 0.5))
        optimizer.step()
        scheduler.step()
        losses.append(loss)
        print(scheduler.get_last_lr())
    model.eval()
    with torch.no_grad():
        out = model(data[:3])
    return losses, norms, out, model.state_dict()


def test_seq2seq_translation():
    _check(_seq2seq)


def test_char_rnn_classification():
    _check(_char_rnn)


def test_transformer_language_model():
    _check(_transformer_lm)


# ---------------------------------------------------------------------------- vision


def test_affine_grid_rounds_as_torch():
    """The spatial transformer tutorial trains fc_loc from the identity theta, where every
    grid point falls on a pixel centre: which cell grid_sample's gradient takes there turns
    on the last bit of affine_grid's base grid (PyTorch: linspace * (n - 1) / n)."""
    theta = [[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]]
    for size in ([1, 1, 28, 28], [1, 1, 7, 13], [1, 1, 5, 100], [1, 1, 2, 3]):
        for ac in (False, True):
            want = torch.nn.functional.affine_grid(torch.tensor(theta), size, align_corners=ac)
            got = fg.nn.functional.affine_grid(fg.tensor(theta), size, align_corners=ac)
            assert np.array_equal(got.numpy(), want.numpy()), (size, ac)


def _stn_grads(torch):
    """Gradient of the identity-initialised localisation head through grid_sample."""
    F = torch.nn.functional
    torch.manual_seed(0)
    theta = torch.tensor([[[1.0, 0, 0], [0, 1, 0]]] * 2, requires_grad=True)
    x = torch.randn(2, 1, 28, 28)
    grid = F.affine_grid(theta, x.size(), align_corners=False)
    out = F.grid_sample(x, grid, align_corners=False)
    (out * torch.randn_like(out)).sum().backward()
    return out.detach(), theta.grad


def test_spatial_transformer_gradient_at_identity():
    _check(_stn_grads)


def _dcgan(torch):
    nn = torch.nn
    torch.manual_seed(999)
    nz, ngf, ndf, nc = 4, 2, 2, 3

    def weights_init(m):
        classname = m.__class__.__name__
        if classname.find('Conv') != -1:
            nn.init.normal_(m.weight.data, 0.0, 0.02)
        elif classname.find('BatchNorm') != -1:
            nn.init.normal_(m.weight.data, 1.0, 0.02)
            nn.init.constant_(m.bias.data, 0)

    netG = nn.Sequential(nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False),
                         nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
                         nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False), nn.Tanh())
    netD = nn.Sequential(nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
                         nn.LeakyReLU(0.2, inplace=True),
                         nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2),
                         nn.LeakyReLU(0.2, inplace=True),
                         nn.Conv2d(ndf * 2, 1, 2, 1, 0, bias=False), nn.Sigmoid())
    netG.apply(weights_init)
    netD.apply(weights_init)
    print(netG, netD)
    criterion = nn.BCELoss()
    optD = torch.optim.Adam(netD.parameters(), lr=0.0002, betas=(0.5, 0.999))
    optG = torch.optim.Adam(netG.parameters(), lr=0.0002, betas=(0.5, 0.999))
    real = torch.randn(3, nc, 8, 8).tanh()
    log = []
    for _ in range(2):
        netD.zero_grad()
        label = torch.full((3,), 1.0)
        errD_real = criterion(netD(real).view(-1), label)
        errD_real.backward()
        fake = netG(torch.randn(3, nz, 1, 1))
        label.fill_(0.0)
        errD_fake = criterion(netD(fake.detach()).view(-1), label)
        errD_fake.backward()
        optD.step()
        netG.zero_grad()
        label.fill_(1.0)
        output = netD(fake).view(-1)
        errG = criterion(output, label)
        errG.backward()
        optG.step()
        log.append((errD_real + errD_fake, errG, output))
    return log, netG.state_dict(), netD.state_dict(), optD.state_dict()


def test_dcgan():
    _check(_dcgan)


def _text_classification(torch):
    nn = torch.nn
    torch.manual_seed(0)

    class TextClassificationModel(nn.Module):
        def __init__(self, vocab_size, embed_dim, num_class):
            super().__init__()
            self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, sparse=False)
            self.fc = nn.Linear(embed_dim, num_class)
            self.embedding.weight.data.uniform_(-0.5, 0.5)
            self.fc.weight.data.uniform_(-0.5, 0.5)
            self.fc.bias.data.zero_()

        def forward(self, text, offsets):
            return self.fc(self.embedding(text, offsets))

    def collate_batch(batch):
        labels, texts, offsets = [], [], [0]
        for label, text in batch:
            labels.append(label)
            texts.append(torch.tensor(text, dtype=torch.int64))
            offsets.append(len(text))
        return (torch.tensor(labels), torch.cat(texts),
                torch.tensor(offsets[:-1]).cumsum(dim=0))

    model = TextClassificationModel(30, 6, 4)
    g = torch.Generator().manual_seed(3)
    data = [(i % 4, torch.randint(0, 30, (int(torch.randint(1, 6, (1,), generator=g)),),
                                  generator=g).tolist()) for i in range(10)]
    train, valid = torch.utils.data.random_split(data, [7, 3],
                                                 generator=torch.Generator().manual_seed(1))
    print(list(train.indices), list(valid.indices))
    loader = torch.utils.data.DataLoader(train, batch_size=3, shuffle=True,
                                         collate_fn=collate_batch,
                                         generator=torch.Generator().manual_seed(2))
    optimizer = torch.optim.SGD(model.parameters(), lr=5)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.1)
    out = []
    for _ in range(2):
        for label, text, offsets in loader:
            optimizer.zero_grad()
            predicted = model(text, offsets)
            loss = nn.CrossEntropyLoss()(predicted, label)
            loss.backward()
            norm = nn.utils.clip_grad_norm_(model.parameters(), 0.1)
            optimizer.step()
            out.append((loss, norm, offsets, (predicted.argmax(1) == label).sum().item()))
        scheduler.step()
        print(scheduler.get_last_lr())
    return out, model.state_dict()


def test_text_classification_embedding_bag():
    _check(_text_classification)


# ---------------------------------------------------------------------------- pruning,
# parametrizations


def _pruning(torch):
    nn, prune = torch.nn, torch.nn.utils.prune
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 3, 3), nn.Flatten(), nn.Linear(3 * 4 * 4, 10),
                          nn.Linear(10, 4))
    module = model[0]
    prune.random_unstructured(module, name="weight", amount=0.3)
    print([n for n, _ in module.named_parameters()], [n for n, _ in module.named_buffers()])
    # (the hooks' ids count every hook the process made: their number is compared)
    print(module.weight.grad_fn.name(), len(module._forward_pre_hooks))
    prune.l1_unstructured(module, name="bias", amount=2)
    print(module.bias, module.bias_mask)
    prune.ln_structured(module, name="weight", amount=0.5, n=2, dim=0)
    hook = [h for h in module._forward_pre_hooks.values() if h._tensor_name == "weight"][0]
    print(type(hook).__name__, [type(h).__name__ for h in hook])
    print(list(model.state_dict()))
    prune.remove(module, 'weight')
    print([n for n, _ in module.named_parameters()], [n for n, _ in module.named_buffers()])
    prune.global_unstructured([(model[2], 'weight'), (model[3], 'weight')],
                              pruning_method=prune.L1Unstructured, amount=0.4)
    print([float(torch.sum(m.weight == 0)) for m in (model[2], model[3])])

    class FooBarPruningMethod(prune.BasePruningMethod):
        PRUNING_TYPE = 'unstructured'

        def compute_mask(self, t, default_mask):
            mask = default_mask.clone()
            mask.view(-1)[::2] = 0
            return mask

    FooBarPruningMethod.apply(model[3], 'bias')
    out = model(torch.randn(2, 1, 6, 6))
    out.sum().backward()
    prune.random_structured(model[2], 'weight', amount=0.3, dim=1)
    print(prune.is_pruned(model), model[2].weight_mask.sum(0))
    for amount in (1.5, -1, 100000):
        try:
            prune.l1_unstructured(model[2], 'weight', amount=amount)
        except Exception as e:
            print(type(e).__name__, e)
    return out, model.state_dict(), model[3].bias_orig.grad


def _parametrizations(torch):
    nn, parametrize = torch.nn, torch.nn.utils.parametrize
    torch.manual_seed(0)

    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu()

    class Noisy(nn.Module):
        def forward(self, X):
            print("Computing the Parametrization")
            return X

    layer = nn.Linear(3, 3)
    parametrize.register_parametrization(layer, "weight", Symmetric())
    print(layer, type(layer).__name__, layer.weight)
    X = torch.rand(3, 3)
    layer.weight = X + X.T
    print(layer.parametrizations.weight.original)
    noisy = nn.Linear(2, 2)
    parametrize.register_parametrization(noisy, "weight", Noisy())
    noisy.weight + noisy.weight.T
    with parametrize.cached():
        noisy.weight + noisy.weight.T
    parametrize.remove_parametrizations(layer, "weight", leave_parametrized=True)
    print(layer)
    ortho = nn.utils.parametrizations.orthogonal(nn.Linear(4, 3))
    out = ortho(torch.randn(2, 4))
    out.sum().backward()
    print(list(ortho.state_dict()))
    try:
        parametrize.register_parametrization(nn.Linear(3, 3), "weight", nn.Linear(3, 4))
    except Exception as e:
        print(type(e).__name__, e)
    return layer.weight, out, ortho.parametrizations.weight.original.grad


def test_pruning():
    _check(_pruning)


def test_parametrizations():
    _check(_parametrizations)


# ---------------------------------------------------------------------------- autograd


def _fused_conv_bn(torch):
    F = torch.nn.functional

    def conv_backward(grad_out, X, weight):
        grad_weight = F.conv2d(X.transpose(0, 1), grad_out.transpose(0, 1)).transpose(0, 1)
        return F.conv_transpose2d(grad_out, weight), grad_weight

    def unsqueeze_all(t):
        return t[None, :, None, None]

    def bn_backward(grad_out, X, sum, sqrt_var, N, eps):
        tmp = ((X - unsqueeze_all(sum) / N) * grad_out).sum(dim=(0, 2, 3))
        tmp *= -1
        d_var = tmp / (sqrt_var + eps) ** 2 / (2 * sqrt_var)
        d_mean_dx = unsqueeze_all(-(grad_out / unsqueeze_all(sqrt_var + eps)).sum(
            dim=(0, 2, 3)) / N)
        grad_input = X * unsqueeze_all(d_var * N)
        grad_input += unsqueeze_all(-d_var * sum)
        grad_input *= 2 / ((N - 1) * N)
        grad_input += d_mean_dx
        grad_input *= unsqueeze_all(sqrt_var + eps)
        grad_input += grad_out
        grad_input /= unsqueeze_all(sqrt_var + eps)
        return grad_input

    class FusedConvBN2DFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, X, conv_weight, eps=1e-3):
            ctx.save_for_backward(X, conv_weight)
            X = F.conv2d(X, conv_weight)
            sum = X.sum(dim=(0, 2, 3))
            var = X.var(unbiased=True, dim=(0, 2, 3))
            N = X.numel() / X.size(1)
            ctx.eps, ctx.sum, ctx.N, ctx.sqrt_var = eps, sum, N, torch.sqrt(var)
            out = X - unsqueeze_all(sum / N)
            out /= unsqueeze_all(ctx.sqrt_var + eps)
            return out

        @staticmethod
        def backward(ctx, grad_out):
            X, conv_weight = ctx.saved_tensors
            grad_out = bn_backward(grad_out, F.conv2d(X, conv_weight), ctx.sum, ctx.sqrt_var,
                                   ctx.N, ctx.eps)
            grad_X, grad_weight = conv_backward(grad_out, X, conv_weight)
            return grad_X, grad_weight, None

    torch.manual_seed(0)
    weight = torch.rand(3, 2, 2, 2, requires_grad=True, dtype=torch.double)
    X = torch.rand(2, 2, 4, 4, requires_grad=True, dtype=torch.double)
    print(torch.autograd.gradcheck(FusedConvBN2DFunction.apply, (X, weight)))
    out = FusedConvBN2DFunction.apply(X, weight)
    out.pow(2).sum().backward()
    print(type(out.grad_fn).__name__)
    try:
        FusedConvBN2DFunction.apply(X, weight, 1e-3, 4)
    except Exception as e:
        print(type(e).__name__, e)
    return out, X.grad, weight.grad


def test_fused_conv_bn_custom_function():
    _check(_fused_conv_bn)


def _saved_tensor_hooks(torch):
    torch.manual_seed(0)
    log = []
    x = torch.randn(5, requires_grad=True)
    y = x.pow(2)
    print(y.grad_fn._saved_self is x, x.equal(y.grad_fn._saved_self))
    raw = y.grad_fn._raw_saved_self
    print(type(raw).__name__, raw.unpack_hook)
    raw.register_hooks(lambda t: ("packed", t * 0 + 1), lambda p: p[1])
    print(raw.data[0], raw.unpack_hook is not None, y.grad_fn._saved_self)
    for again in (lambda: raw.register_hooks(lambda t: t, lambda t: t),):
        try:
            again()
        except Exception as e:
            print(type(e).__name__, e)
    y.sum().backward()
    gx = x.grad.clone()
    try:
        raw.register_hooks(lambda t: t, lambda t: t)
    except Exception as e:
        print(type(e).__name__, e)
    # the saved output (exp's result), hooked after the fact
    x.grad = None
    e = x.exp()
    e.grad_fn._raw_saved_result.register_hooks(lambda t: log.append("pack") or t * 2,
                                               lambda t: log.append("unpack") or t)
    e.sum().backward()
    print(log, hasattr(e.grad_fn, "_raw_saved_exponent"), hasattr(y.grad_fn, "_raw_saved_exponent"))
    # a saved number that PyTorch keeps as a tensor, and hooks already set by the context
    m = x * 3
    print(m.grad_fn._raw_saved_other.unpack())
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        z = x * x
    try:
        z.grad_fn._raw_saved_self.register_hooks(lambda t: t, lambda t: t)
    except Exception as e:
        print(type(e).__name__, e)
    bad = x.sin()
    bad.grad_fn._raw_saved_self.register_hooks(lambda t: t, lambda t: 3)
    try:
        bad.sum().backward()
    except Exception as e:
        print(type(e).__name__, e)

    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * 2

        @staticmethod
        def backward(ctx, g):
            a, = ctx.saved_tensors
            return g * a

    t = Twice.apply(x)
    raws = t.grad_fn._raw_saved_tensors
    print(len(raws), type(raws[0]).__name__)
    raws[0].register_hooks(lambda v: v + 1, lambda v: v)
    g2, = torch.autograd.grad(t.sum(), x)
    return gx, x.grad, g2


def test_saved_tensor_hooks_registered_on_a_node():
    _check(_saved_tensor_hooks)


def _pack_unpack_order(torch):
    """The saved tensors hooks tutorial prints each pack and unpack of `a * b`: PyTorch's
    nodes pack their saved inputs in the order of their names (`other` before `self`), then
    their outputs, and unpack them in that order."""
    torch.manual_seed(0)
    a = torch.ones(2, 3, requires_grad=True)
    b = torch.ones(2, 3, requires_grad=True) * 2

    def pack(x):
        print("Packing", x)
        return x

    def unpack(x):
        print("Unpacking", x)
        return x

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = a * b
    y.sum().backward()
    log = []
    names = {id(a): "a", id(b): "b"}

    def pack_name(x):
        log.append("pack " + names.get(id(x), str(tuple(x.shape))))
        return x

    def unpack_name(x):
        log.append("unpack " + names.get(id(x), str(tuple(x.shape))))
        return x

    programs = (lambda: a / b, lambda: a.mm(b.T), lambda: a.pow(b), lambda: torch.atan2(a, b),
                lambda: torch.maximum(a, b), lambda: torch.minimum(a, b),
                lambda: torch.hypot(a, b), lambda: a.clamp(b, b + 1),
                lambda: a[None].bmm(b.T[None]))
    for program in programs:
        with torch.autograd.graph.saved_tensors_hooks(pack_name, unpack_name):
            out = program()
        out.sum().backward()
        log.append("|")
    # hooks registered on one saved value after the fact keep that node's order too
    z = a * b
    z.grad_fn._raw_saved_self.register_hooks(pack_name, unpack_name)
    z.grad_fn._raw_saved_other.register_hooks(pack_name, unpack_name)
    z.sum().backward()
    print(log)
    return a.grad, b.grad


def test_saved_tensor_hooks_pack_in_pytorchs_order():
    _check(_pack_unpack_order)


def test_unary_nodes_name_their_saved_values():
    names = ("sin cos tan exp2 expm1 log2 log10 log1p rsqrt asin acos atan sinh cosh asinh "
             "acosh atanh erf erfc").split()
    for name in names:
        for inplace in (False, True):
            seen = []
            for lib in (torch, fg):
                x = lib.tensor([0.3, 0.6], requires_grad=True)
                y = getattr(x * 1 + (1.5 if name == "acosh" else 0.0),
                            name + ("_" if inplace else ""))()
                attrs = sorted(a for a in dir(y.grad_fn) if a.startswith("_saved_"))
                values = [getattr(y.grad_fn, a) for a in attrs]
                seen.append((type(y.grad_fn).__name__, attrs,
                             [[round(v, 5) for v in t.tolist()] for t in values]))
            assert seen[1] == seen[0], name


# ---------------------------------------------------------------------------- recipes


def _checkpoints(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 4, 3)
            self.fc1 = nn.Linear(4 * 3 * 3, 8)
            self.bn = nn.BatchNorm1d(8)
            self.fc2 = nn.Linear(8, 3)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2).flatten(1)
            return self.fc2(F.relu(self.bn(self.fc1(x))))

    net = Net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
    for name, value in net.state_dict().items():
        print(name, "\t", value.size())
    x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 3, (4,))
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    optimizer.step()
    print(optimizer.state_dict()["param_groups"])
    path = os.path.join(tempfile.mkdtemp(), "model.pt")
    torch.save({'epoch': 5, 'model_state_dict': net.state_dict(),
                'optimizer_state_dict': optimizer.state_dict(), 'loss': loss}, path)
    model = Net()
    opt2 = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.1)
    checkpoint = torch.load(path, weights_only=True)
    print(model.load_state_dict(checkpoint['model_state_dict']))
    opt2.load_state_dict(checkpoint['optimizer_state_dict'])
    print(checkpoint['epoch'], checkpoint['loss'], opt2.param_groups[0]['lr'])
    model.eval()
    out = model(x)
    model.train()
    F.cross_entropy(model(x), y).backward()
    opt2.step()
    try:
        torch.save(model, os.path.join(tempfile.mkdtemp(), "whole.pt"))  # a local class
    except Exception as e:
        print(type(e).__name__, e)
    result = model.load_state_dict({'fc1.weight': net.fc1.weight.detach(),
                                    'extra': torch.ones(1)}, strict=False)
    print(result.missing_keys[:2], result.unexpected_keys)
    for bad in ({'fc1.weight': net.fc1.weight.detach()}, {'fc1.weight': torch.ones(3, 3)}):
        try:
            model.load_state_dict(bad)
        except Exception as e:
            print(type(e).__name__, e)
    return out, model.state_dict(), opt2.state_dict()


def test_saving_and_loading_checkpoints():
    _check(_checkpoints)


def _amp_cpu(torch):
    nn = torch.nn
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    data = [(torch.randn(4, 8), torch.randn(4, 4)) for _ in range(2)]
    scaler = torch.amp.GradScaler("cpu")
    res = []
    for input, target in data:
        with torch.autocast(device_type='cpu', dtype=torch.bfloat16):
            output = net(input)
            loss = nn.MSELoss()(output, target)
        print(output.dtype, loss.dtype, output.grad_fn.name(), loss.grad_fn.name())
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        norm = nn.utils.clip_grad_norm_(net.parameters(), max_norm=0.1)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        res.append((output, loss, norm))
    print(scaler.get_scale(), scaler.state_dict())
    with torch.autocast('cpu'):
        a = torch.randn(3, 3)
        print(torch.mm(a, a).dtype, (a + a).dtype, torch.get_autocast_dtype('cpu'))
    return res, net.state_dict()


def test_amp_recipe_on_cpu():
    _check(_amp_cpu, rtol=2e-2, atol=2e-2)  # bfloat16 matmuls


def _data_and_checkpointing(torch):
    data, nn = torch.utils.data, torch.nn
    torch.manual_seed(0)

    class Landmarks(data.Dataset):
        def __init__(self, n):
            self.items = [torch.randn(2, 3) for _ in range(n)]

        def __len__(self):
            return len(self.items)

        def __getitem__(self, idx):
            if torch.is_tensor(idx):
                idx = idx.tolist()
            return {'image': self.items[idx], 'idx': idx, 'name': f"img{idx}.jpg"}

    ds = Landmarks(7)
    batches = list(data.DataLoader(ds, batch_size=3, shuffle=True))
    print([b['name'] for b in batches], [b['idx'] for b in batches])
    sampler = data.WeightedRandomSampler([0.1, 0.9, 0.4, 1, 1, 1, 1], 6, replacement=True)
    loader = data.DataLoader(ds, batch_size=4, sampler=sampler, drop_last=True,
                             collate_fn=lambda b: torch.stack([s['image'] for s in b]))
    print(len(loader), [b.shape for b in loader])
    for bad in (lambda: data.DataLoader(ds, batch_size=2, shuffle=True, sampler=sampler),):
        try:
            bad()
        except Exception as e:
            print(type(e).__name__, e)
    model = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.3), nn.Tanh(), nn.Linear(4, 2))
    x = torch.randn(5, 3, requires_grad=True)
    out = torch.utils.checkpoint.checkpoint(model, x, use_reentrant=False)
    out.sum().backward()
    seq = torch.utils.checkpoint.checkpoint_sequential(model, 2, x, use_reentrant=False)
    print(out.grad_fn.name(), seq.grad_fn.name())
    return batches, [p.grad for p in model.parameters()], x.grad, seq


def test_data_pipeline_and_activation_checkpointing():
    _check(_data_and_checkpointing)


# ---------------------------------------------------------------------------- basics


def _quickstart(torch):
    """The Datasets & DataLoaders tutorial's one-hot target_transform (a scatter_ with a
    0-d index), then the optimization tutorial's train and test loops."""
    torch.manual_seed(0)

    def target_transform(y):
        return torch.zeros(4, dtype=torch.float).scatter_(0, torch.tensor(y), value=1)

    xs = torch.randn(10, 3)
    ys = [int(v) for v in torch.randint(0, 4, (10,))]
    data = [(xs[i], target_transform(ys[i])) for i in range(10)]
    print(data[0][1])
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    loss_fn = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-1)
    print(optimizer)
    for batch, (X, y) in enumerate(loader):
        loss = loss_fn(model(X), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(f"loss: {loss.item():>7f}  [{batch * 4 + len(X):>5d}/{len(loader.dataset):>5d}]")
    correct = 0
    with torch.no_grad():
        for X, y in loader:
            correct += (model(X).argmax(1) == y.argmax(1)).type(torch.float).sum().item()
    print(f"Accuracy: {(100 * correct / 10):>0.1f}%")
    # The same scatter family with 0-d indices and sources, and gather's gradient through it
    x = torch.arange(4.0, requires_grad=True)
    picked = x.gather(0, torch.tensor(2))
    picked.backward()
    s = torch.tensor(3.0, requires_grad=True)
    z = torch.zeros(4).scatter(0, torch.tensor(1), s)
    z.sum().backward()
    others = [torch.zeros(4).scatter_add(0, torch.tensor(2), torch.tensor(5.0)),
              torch.zeros(4).scatter(-1, torch.tensor(3), 1.0, reduce='add'),
              torch.zeros(4).scatter_reduce(0, torch.tensor(2), torch.tensor(5.0), 'amax'),
              torch.tensor(1.0).index_copy(0, torch.tensor([0, 0]), torch.tensor([5.0, 3]))]
    return model.state_dict(), x.grad, s.grad, z, others


def test_quickstart_one_hot_target_transform():
    _check(_quickstart)


def _index_add_copy_errors(torch):
    """Wrong source shapes for index_add / index_copy: PyTorch's checks, in its order."""
    cases = [
        lambda: torch.zeros(2, 3).index_add(0, torch.tensor([0, 1, 1]), torch.ones(2, 3)),
        lambda: torch.zeros(2, 3).index_add(0, torch.tensor([0, 1, 1]), torch.ones(3, 2)),
        lambda: torch.zeros(2, 3).index_add(1, torch.tensor([0, 1]), torch.ones(2)),
        lambda: torch.zeros(4).index_add(0, torch.tensor(2), torch.tensor(5.0)),
        lambda: torch.zeros(4).index_add(0, torch.tensor([1, 2]), torch.tensor(5.0)),
        lambda: torch.tensor(2.0).index_add(0, torch.tensor([0, 0]), torch.ones(2)),
        lambda: torch.zeros(2, 3).index_add(-1, torch.tensor([1, 2]), torch.ones(2, 3)),
        lambda: torch.zeros(2, 3, 4).index_copy(0, torch.tensor([0, 1]), torch.ones(2, 5, 4)),
        lambda: torch.zeros(2, 3, 4).index_copy(1, torch.tensor([0, 1]), torch.ones(2, 5, 4)),
        lambda: torch.zeros(2, 3, 4).index_copy(1, torch.tensor([0, 1]), torch.ones(2, 5)),
        lambda: torch.zeros(4).index_copy(0, torch.tensor([1, 2]), torch.tensor(5.0)),
        lambda: torch.zeros(2, 3).index_copy(0, torch.tensor([0, 1]),
                                             torch.ones(2, 3, 3).double()),
        lambda: torch.zeros(2, 3).index_copy(0, torch.tensor([0, 1, 1]),
                                             torch.ones(2, 3).double()),
    ]
    for case in cases:
        try:
            print(case())
        except Exception as e:
            print(type(e).__name__, e)


def test_index_add_and_index_copy_shape_errors():
    _check(_index_add_copy_errors)


# ---------------------------------------------------------------------------- custom ops

_NAMESPACES = iter(range(1000))


def _custom_python_ops(torch):
    """The Custom Python Operators tutorial: `torch.library.custom_op` with a fake
    implementation, an autograd formula, a mutating op, and the checks on the schema."""
    ns = f"tutorial{next(_NAMESPACES) // 2}"  # one namespace per pair of runs
    Tensor = torch.Tensor

    @torch.library.custom_op(f"{ns}::numpy_sin", mutates_args=())
    def numpy_sin(x: Tensor) -> Tensor:
        return torch.from_numpy(np.sin(x.numpy()))

    @numpy_sin.register_fake
    def _(x):
        return torch.empty_like(x)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad * x.cos()

    torch.manual_seed(0)
    x = torch.randn(3, requires_grad=True)
    y = numpy_sin(x)
    print(y.requires_grad, y.grad_fn)
    try:
        y.sum().backward()
    except Exception as e:
        print(type(e).__name__, e)
    numpy_sin.register_autograd(backward, setup_context=setup_context)
    y = numpy_sin(x)
    print(numpy_sin, y.grad_fn, y.grad_fn.name())
    y.sum().backward()
    print(torch.library.opcheck(numpy_sin, (torch.randn(3, requires_grad=True),)))

    @torch.library.custom_op(f"{ns}::scale_", mutates_args={"x"})
    def scale_(x: Tensor, factor: float = 2.0) -> None:
        x.numpy()[:] *= factor

    z = torch.ones(3)
    version = z._version
    print(scale_(z), z, z._version - version)

    @torch.library.custom_op(f"{ns}::pair", mutates_args=())
    def pair(x: Tensor, n: int, s: float = 2.0) -> tuple[Tensor, Tensor]:
        return x * n, x * s

    packet = getattr(torch.ops, ns).pair
    print(packet, packet.default, type(packet).__name__, type(packet.default).__name__)
    print(packet(torch.ones(2), 3), packet.default(torch.ones(1), 2, s=0.5))
    print(packet.default._schema)
    for bad in (lambda: pair(torch.ones(2)), lambda: pair(torch.ones(2), 3.5),
                lambda: getattr(torch.ops, ns).nope,
                lambda: torch.library.custom_op(f"{ns}::a", mutates_args=())(lambda x: x)):
        try:
            bad()
        except Exception as e:
            print(type(e).__name__, str(e).splitlines()[0])

    def no_return(x: Tensor):
        return x

    def aliasing(x: Tensor) -> Tensor:
        return x

    for fn in (no_return, aliasing):
        try:
            torch.library.custom_op(f"{ns}::{fn.__name__}", mutates_args=())(fn)(torch.ones(1))
        except Exception as e:
            print(type(e).__name__, str(e).split(" (with implementation")[0][:60])
    return x.grad, z


def test_custom_python_operators():
    _check(_custom_python_ops)


def _saved_attributes(lib, build):
    lib.manual_seed(0)
    x = lib.rand(3, 4, requires_grad=True) + 0.1
    y = lib.rand(3, 4, requires_grad=True) + 0.1
    node = build(lib, x, y).grad_fn
    values = {}
    for name in dir(node):
        if name.startswith("_saved_"):
            value = getattr(node, name)
            values[name] = (np.round(value.detach().numpy().astype(float), 5).tolist()
                            if hasattr(value, "detach") else value)
    return type(node).__name__, values


def test_nodes_name_their_saved_values():
    """`grad_fn._saved_<name>`, as the autograd mechanics notes read them, for reductions,
    scans, indexing and losses: each name fusegrad shows is PyTorch's, with its value."""
    programs = [
        lambda L, x, y: x.cumsum(0), lambda L, x, y: x.prod(0, keepdim=True),
        lambda L, x, y: L.linalg.vector_norm(x, 3, dim=1, keepdim=True),
        lambda L, x, y: x.logsumexp(1), lambda L, x, y: x.index_select(0, L.tensor([0, 2])),
        lambda L, x, y: x.gather(1, L.tensor([[0], [1], [2]])), lambda L, x, y: L.stack([x, y], 1),
        lambda L, x, y: x.flip(0), lambda L, x, y: x.roll((1, 2), (0, 1)),
        lambda L, x, y: x.cummax(1)[0], lambda L, x, y: (x * 1).masked_fill_(x > 0.5, 0),
        lambda L, x, y: x.scatter(1, L.tensor([[0], [1], [2]]), y),
        lambda L, x, y: x.scatter(1, L.tensor([[0], [1], [2]]), 2.0),
        lambda L, x, y: L.lerp(x, y, 0.3), lambda L, x, y: L.atan2(x, y),
        lambda L, x, y: L.minimum(x, y), lambda L, x, y: x.pow(y),
        lambda L, x, y: x.clamp(y, y + 1),
        lambda L, x, y: L.nn.functional.binary_cross_entropy(
            x.clamp(0, 0.9), y.clamp(0, 1), weight=y.detach(), reduction='sum'),
        # negative dims read back as PyTorch's getters give int64 fields: unsigned
        lambda L, x, y: x.cumsum(-1), lambda L, x, y: L.stack([x, y], -1),
        lambda L, x, y: x.roll(1, -1), lambda L, x, y: x.logsumexp(-1),
        lambda L, x, y: L.nn.functional.nll_loss(x, L.tensor([0, 1, 2])),
        lambda L, x, y: x.select(-1, -1), lambda L, x, y: x[:, -2:],
    ]
    for build in programs:
        name, want = _saved_attributes(torch, build)
        got_name, got = _saved_attributes(fg, build)
        assert got_name == name
        assert set(got) <= set(want), (name, set(got) - set(want))
        assert {k: want[k] for k in got} == got, name
        # (what fusegrad does not keep: prod's result, gather's and cummax's input tensor)
        assert got and set(want) - set(got) <= {"_saved_result", "_saved_self",
                                                "_saved_sparse_grad"}, name
