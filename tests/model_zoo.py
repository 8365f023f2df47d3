"""Models the compiler tests share: each built in fusegrad and in torch with equal weights.

`ZOO` maps a name to a builder; `build(name, train=...)` returns a `Pair`: the fusegrad model,
the torch model (weights copied from it through the state_dict), and example inputs for each
(the same values). Each model is written once against a library argument (`lib` is `fusegrad`
or `torch`), so one definition builds both: MLP, LeNet-5 and the ResNets are
`fusegrad.models`' own source run with `torch.nn` as its `nn` for the torch side; the others
are defined here. Shapes are small: batch 2, 32x32 images,
a GPT of 2 layers, 2 heads, 32 dimensions and a vocabulary of 64.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np


@dataclass
class Pair:
    """The same model in both libraries, and inputs for each (equal values)."""

    name: str
    fg: object
    th: object
    fg_inputs: tuple
    th_inputs: tuple
    fg_kwargs: dict
    th_kwargs: dict


# ------------------------------------------------------------------ definitions


@functools.cache
def definitions(lib) -> SimpleNamespace:
    """The zoo's model classes for `lib` (`fusegrad` or `torch`)."""
    nn = lib.nn
    F = nn.functional

    # ---- a GPT in nanoGPT's shape

    class LayerNorm(nn.Module):
        """LayerNorm with an optional bias (nanoGPT's own)."""

        def __init__(self, ndim, bias):
            super().__init__()
            self.weight = nn.Parameter(lib.ones(ndim))
            self.bias = nn.Parameter(lib.zeros(ndim)) if bias else None

        def forward(self, input):
            return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)

    class CausalSelfAttention(nn.Module):
        def __init__(self, config):
            super().__init__()
            assert config.n_embd % config.n_head == 0
            self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
            self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
            self.attn_dropout = nn.Dropout(config.dropout)
            self.resid_dropout = nn.Dropout(config.dropout)
            self.n_head = config.n_head
            self.n_embd = config.n_embd
            self.dropout = config.dropout

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0,
                is_causal=True)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class GPTMLP(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
            self.dropout = nn.Dropout(config.dropout)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
            self.attn = CausalSelfAttention(config)
            self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
            self.mlp = GPTMLP(config)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            x = x + self.mlp(self.ln_2(x))
            return x

    class GPT(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                drop=nn.Dropout(config.dropout),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=LayerNorm(config.n_embd, bias=config.bias)))
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight  # weight tying

        def forward(self, idx, targets=None):
            device = idx.device
            b, t = idx.size()
            assert t <= self.config.block_size, \
                f"Cannot forward sequence of length {t}, block size is only " \
                f"{self.config.block_size}"
            pos = lib.arange(0, t, dtype=lib.long, device=device)
            tok_emb = self.transformer.wte(idx)
            pos_emb = self.transformer.wpe(pos)
            x = self.transformer.drop(tok_emb + pos_emb)
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            if targets is not None:
                logits = self.lm_head(x)
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                       ignore_index=-1)
            else:
                logits = self.lm_head(x[:, [-1], :])
                loss = None
            return logits, loss

        @lib.no_grad()
        def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
            for _ in range(max_new_tokens):
                idx_cond = idx if idx.size(1) <= self.config.block_size \
                    else idx[:, -self.config.block_size:]
                logits, _ = self(idx_cond)
                logits = logits[:, -1, :] / temperature
                if top_k is not None:
                    v, _ = lib.topk(logits, min(top_k, logits.size(-1)))
                    logits[logits < v[:, [-1]]] = -float("Inf")
                probs = F.softmax(logits, dim=-1)
                idx_next = lib.multinomial(probs, num_samples=1)
                idx = lib.cat((idx, idx_next), dim=1)
            return idx

    # ---- sequence models

    class LSTMLanguageModel(nn.Module):
        def __init__(self, vocab=64, emb=16, hidden=32, layers=2):
            super().__init__()
            self.embed = nn.Embedding(vocab, emb)
            self.lstm = nn.LSTM(emb, hidden, num_layers=layers, batch_first=True)
            self.head = nn.Linear(hidden, vocab)

        def forward(self, tokens, state=None):
            out, state = self.lstm(self.embed(tokens), state)
            return self.head(out), state

    class Encoder(nn.Module):
        def __init__(self, d_model=32, nhead=2, layers=2):
            super().__init__()
            layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=64, dropout=0.0,
                                               batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

        def forward(self, src, src_key_padding_mask):
            return self.encoder(src, src_key_padding_mask=src_key_padding_mask)

    class Attention(nn.Module):
        def __init__(self, d_model=32, nhead=2):
            super().__init__()
            self.mha = nn.MultiheadAttention(d_model, nhead, batch_first=True)

        def forward(self, q, k, v):
            return self.mha(q, k, v)

    return SimpleNamespace(GPT=GPT, LSTMLanguageModel=LSTMLanguageModel, Encoder=Encoder,
                           Attention=Attention)


@functools.cache
def project_models(lib, module: str) -> SimpleNamespace:
    """A module of `fusegrad.models` (written against `nn`) with `lib.nn` as its `nn`: the
    project's own definition, built in torch for the oracle."""
    import importlib.util

    path = importlib.util.find_spec(f"fusegrad.models.{module}").origin
    with open(path) as f:
        source = f.read()
    assert "from .. import nn\n" in source, f"{path} no longer imports nn as expected"
    scope = {"__name__": f"model_zoo.{lib.__name__}.{module}", "nn": lib.nn}
    exec(compile(source.replace("from .. import nn\n", ""), path, "exec"), scope)  # noqa: S102
    return SimpleNamespace(**scope)


@dataclass
class GPTConfig:
    """nanoGPT's config, tiny."""

    block_size: int = 16
    vocab_size: int = 64
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 32
    dropout: float = 0.0
    bias: bool = True


# ------------------------------------------------------------------ building pairs


def _models(name: str, lib):
    if name in ("mlp", "lenet5"):
        simple = project_models(lib, "simple")
        return simple.MLP(64, (32, 32), 10) if name == "mlp" else simple.LeNet5()
    if name in ("resnet18", "resnet50"):
        return getattr(project_models(lib, "resnet"), name)(num_classes=10)
    d = definitions(lib)
    if name == "gpt":
        return d.GPT(GPTConfig())
    if name == "lstm_lm":
        return d.LSTMLanguageModel()
    if name == "transformer_encoder":
        return d.Encoder()
    if name == "multihead_attention":
        return d.Attention()
    raise KeyError(name)


def _inputs(name: str, rng) -> tuple[list, dict]:
    """Example inputs as NumPy arrays (positional, keyword)."""
    if name == "mlp":
        return [rng.standard_normal((2, 64)).astype(np.float32)], {}
    if name == "lenet5":
        return [rng.standard_normal((2, 1, 32, 32)).astype(np.float32)], {}
    if name in ("resnet18", "resnet50"):
        return [rng.standard_normal((2, 3, 32, 32)).astype(np.float32)], {}
    if name == "gpt":
        idx = rng.integers(0, 64, (2, 8)).astype(np.int64)
        return [idx], {"targets": np.roll(idx, -1, axis=1)}
    if name == "lstm_lm":
        return [rng.integers(0, 64, (2, 7)).astype(np.int64)], {}
    if name == "transformer_encoder":
        mask = np.zeros((2, 5), bool)
        mask[0, 3:] = True  # the first sequence is padded after 3 tokens
        return [rng.standard_normal((2, 5, 32)).astype(np.float32)], \
            {"src_key_padding_mask": mask}
    if name == "multihead_attention":
        return [rng.standard_normal((2, s, 32)).astype(np.float32) for s in (4, 6, 6)], {}
    raise KeyError(name)


ZOO = ("mlp", "lenet5", "resnet18", "resnet50", "gpt", "lstm_lm", "transformer_encoder",
       "multihead_attention")


# The last pair built, untouched (see `build`): (name, seed, double) -> (torch model, fusegrad
# model, torch's random state after the build). One entry only: a ResNet-50 pair in float64
# holds some 400 MB.
_LAST: dict = {}


def _pristine(name: str, seed: int, double: bool) -> tuple:
    """Both models built from `seed` with equal weights (never handed out: `build` returns
    copies) and torch's random state after the build."""
    import torch

    import fusegrad

    key = (name, seed, double)
    if key not in _LAST:
        _LAST.clear()
        torch.manual_seed(seed)
        th = _models(name, torch)
        fg = _models(name, fusegrad)
        if double:
            th.double()
            fg.double()
        state = {k: fusegrad.tensor(v.detach().numpy().copy()) for k, v in
                 th.state_dict().items()}
        fg.load_state_dict(state, strict=True)
        _LAST[key] = (th, fg, torch.get_rng_state())
    return _LAST[key]


def build(name: str, train: bool = True, seed: int = 0, double: bool = False) -> Pair:
    """The model `name` in fusegrad and torch with the same weights, in train or eval mode
    (`double`: parameters, buffers and float inputs in float64, where float32 rounding would
    hide a difference, e.g. batch norm over two values in train mode).

    Each call returns new models: deep copies of a pair built once for consecutive calls with
    the same name, seed and precision (building a ResNet-50 initialises its weights in both
    libraries, some ten times the time of copying them), and torch's random state is left as
    the build leaves it."""
    import torch

    import fusegrad

    th0, fg0, rng_state = _pristine(name, seed, double)
    th, fg = copy.deepcopy(th0), copy.deepcopy(fg0)
    torch.set_rng_state(rng_state)
    th.train(train)
    fg.train(train)
    args, kwargs = _inputs(name, np.random.default_rng(seed))
    if double:
        args = [a.astype(np.float64) if a.dtype == np.float32 else a for a in args]
    return Pair(name, fg, th,
                tuple(fusegrad.tensor(a) for a in args), tuple(torch.tensor(a) for a in args),
                {k: fusegrad.tensor(v) for k, v in kwargs.items()},
                {k: torch.tensor(v) for k, v in kwargs.items()})
