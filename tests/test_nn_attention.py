"""scaled_dot_product_attention, MultiheadAttention, TransformerEncoderLayer and
TransformerEncoder against torch (float64): outputs, attention weights, input and parameter
gradients, masks of every kind."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_nn_recurrent import compare as compare_rec
from test_nn_support import close, sync

import fusegrad
import fusegrad.nn as fnn
import fusegrad.nn.functional as F

ATOL = 1e-8


def data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def both(name, *args, **kwargs):
    torch.manual_seed(0)
    th = getattr(torch.nn, name)(*args, **kwargs).double()
    fg = getattr(fnn, name)(*args, **kwargs).double()
    sync(th, fg)
    return th, fg


def _tensor(a, T):
    if a is None or not isinstance(a, np.ndarray):
        return a
    return T.tensor(a, requires_grad=a.dtype.kind == "f")


def run(th, fg, arrays, kwargs=None, *, leaves=True):
    """Call both modules (or functions) with the same inputs; compare outputs and grads."""
    kwargs = kwargs or {}
    ins = {}
    for T, mod in ((torch, th), (fusegrad, fg)):
        args = [_tensor(a, T) for a in arrays]
        kw = {k: (T.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
        out = mod(*args, **kw)
        ins[T] = (args, out if isinstance(out, tuple) else (out,))
    (args_t, out_t), (args_f, out_f) = ins[torch], ins[fusegrad]
    assert len(out_t) == len(out_f)
    loss_t, loss_f = 0, 0
    for i, (a, b) in enumerate(zip(out_f, out_t)):
        if b is None:
            assert a is None, f"output {i}"
            continue
        close(a, b, ATOL, ATOL, f"output {i}")
        cot = data(*b.shape, seed=20 + i)
        loss_t = loss_t + (b * torch.tensor(cot)).sum()
        loss_f = loss_f + (a * fusegrad.tensor(cot)).sum()
    loss_t.backward()
    loss_f.backward()
    for i, (a, b) in enumerate(zip(args_f, args_t)):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            close(a.grad, b.grad, ATOL, ATOL, f"input {i} grad")
    if isinstance(th, torch.nn.Module):
        th_p, fg_p = dict(th.named_parameters()), dict(fg.named_parameters())
        assert list(fg_p) == list(th_p)
        for name, p in th_p.items():
            if p.grad is None:
                assert fg_p[name].grad is None, name
            else:
                close(fg_p[name].grad, p.grad, ATOL, ATOL, f"{name}.grad")
    return out_f, out_t


# ---------------------------------------------------------------- scaled_dot_product_attention


def causal(n, m=None):
    return np.tril(np.ones((n, m or n), dtype=bool))


@pytest.mark.parametrize("kwargs", [
    {}, {"scale": 0.3}, {"is_causal": True},
    {"attn_mask": np.random.default_rng(1).random((5, 6)) > 0.3},
    {"attn_mask": data(2, 3, 5, 6, seed=4)},
])
def test_sdpa(kwargs):
    q, k, v = data(2, 3, 5, 4), data(2, 3, 6, 4, seed=1), data(2, 3, 6, 7, seed=2)
    mask = kwargs.get("attn_mask")
    if mask is not None and mask.dtype == bool:
        mask[:, 0] = True
    run(torch.nn.functional.scaled_dot_product_attention, F.scaled_dot_product_attention,
        [q, k, v], kwargs)


def test_sdpa_fully_masked_row_is_zero_and_gqa():
    mask = np.ones((4, 5), dtype=bool)
    mask[2] = False
    out, _ = run(torch.nn.functional.scaled_dot_product_attention,
                 F.scaled_dot_product_attention,
                 [data(1, 4, 3), data(1, 5, 3, seed=1), data(1, 5, 3, seed=2)],
                 {"attn_mask": mask})
    assert np.all(out[0].detach().numpy()[:, 2] == 0)
    run(torch.nn.functional.scaled_dot_product_attention, F.scaled_dot_product_attention,
        [data(2, 4, 3, 5), data(2, 2, 6, 5, seed=1), data(2, 2, 6, 5, seed=2)],
        {"enable_gqa": True})


def test_sdpa_mask_with_causal_raises():
    for T in (torch, fusegrad):
        x = T.zeros(1, 2, 3)
        with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set"):
            T.nn.functional.scaled_dot_product_attention(x, x, x, attn_mask=T.ones(2, 2),
                                                         is_causal=True)


# ---------------------------------------------------------------- MultiheadAttention


def kpm(n=2, s=6):
    m = np.zeros((n, s), dtype=bool)
    m[0, -2:] = True
    m[1, 1] = True
    return m


@pytest.mark.parametrize("ctor,kwargs", [
    ({}, {}),
    ({"batch_first": True}, {}),
    ({}, {"key_padding_mask": kpm()}),
    ({}, {"attn_mask": ~causal(5, 6)}),
    ({}, {"attn_mask": data(5, 6, seed=7), "average_attn_weights": False}),
    ({"batch_first": True}, {"attn_mask": ~causal(5, 6), "key_padding_mask": kpm(),
                             "need_weights": False}),
    ({}, {"attn_mask": data(4, 5, 6, seed=8), "key_padding_mask": data(2, 6, seed=9)}),
    ({}, {"need_weights": False}),
    ({"bias": False}, {"key_padding_mask": kpm()}),
    ({"kdim": 3, "vdim": 5}, {"key_padding_mask": kpm()}),
    ({"add_bias_kv": True, "add_zero_attn": True}, {"attn_mask": ~causal(5, 6),
                                                    "key_padding_mask": kpm()}),
])
def test_multihead_attention(ctor, kwargs):
    th, fg = both("MultiheadAttention", 8, 2, **ctor)
    kd, vd = ctor.get("kdim", 8), ctor.get("vdim", 8)
    if ctor.get("batch_first"):
        arrays = [data(2, 5, 8), data(2, 6, kd, seed=1), data(2, 6, vd, seed=2)]
    else:
        arrays = [data(5, 2, 8), data(6, 2, kd, seed=1), data(6, 2, vd, seed=2)]
    run(th, fg, arrays, kwargs)


def test_multihead_self_attention_causal_and_unbatched():
    th, fg = both("MultiheadAttention", 6, 3)
    mask = ~causal(4)
    x = data(4, 2, 6)
    for kw in ({"need_weights": False}, {}, {"key_padding_mask": kpm(2, 4),
                                              "need_weights": False}):
        run(th, fg, [x, x, x], {"attn_mask": mask, "is_causal": True, **kw})
    run(th, fg, [data(4, 6), data(3, 6, seed=1), data(3, 6, seed=2)],
        {"key_padding_mask": np.array([False, True, False])})
    run(th, fg, [data(4, 6), data(3, 6, seed=1), data(3, 6, seed=2)], {"need_weights": False})


def test_multihead_dropout_modes():
    """p=1 zeroes the attention weights in training mode; eval mode ignores dropout."""
    th, fg = both("MultiheadAttention", 4, 2, dropout=1.0)
    arrays = [data(3, 2, 4), data(5, 2, 4, seed=1), data(5, 2, 4, seed=2)]
    run(th, fg, arrays)
    th.eval()
    fg.eval()
    run(th, fg, arrays)


def test_multihead_init_keys_repr():
    fg = fnn.MultiheadAttention(16, 4)
    th = torch.nn.MultiheadAttention(16, 4)
    assert list(fg.state_dict()) == list(th.state_dict()) == [
        "in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    assert repr(fg) == repr(th)
    w = fg.in_proj_weight.detach().numpy()
    bound = np.sqrt(6 / (16 + 48))
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert not fg.in_proj_bias.detach().numpy().any()
    assert not fg.out_proj.bias.detach().numpy().any()
    for kw in ({"kdim": 3, "vdim": 5, "bias": False}, {"add_bias_kv": True}):
        assert list(fnn.MultiheadAttention(8, 2, **kw).state_dict()) == list(
            torch.nn.MultiheadAttention(8, 2, **kw).state_dict())
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        fnn.MultiheadAttention(6, 4)
    for T in (torch, fusegrad):
        with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal"):
            x = T.zeros(3, 1, 4)
            T.nn.MultiheadAttention(4, 2)(x, x, x, is_causal=True)


# ---------------------------------------------------------------- transformer encoder


@pytest.mark.parametrize("ctor,kwargs", [
    ({}, {}),
    ({"activation": "gelu", "batch_first": True}, {"src_key_padding_mask": kpm(2, 5)}),
    ({"norm_first": True}, {"src_mask": ~causal(5)}),
    ({"norm_first": True, "batch_first": True}, {"src_mask": ~causal(5), "is_causal": True}),
    ({"bias": False, "layer_norm_eps": 1e-3}, {"src_mask": data(5, 5, seed=3),
                                               "src_key_padding_mask": data(2, 5, seed=4)}),
])
def test_transformer_encoder_layer(ctor, kwargs):
    th, fg = both("TransformerEncoderLayer", 8, 2, dim_feedforward=16, dropout=0.0, **ctor)
    x = data(2, 5, 8) if ctor.get("batch_first") else data(5, 2, 8)
    run(th, fg, [x], kwargs)


def test_transformer_encoder_layer_eval_default_dropout_and_steps():
    th, fg = both("TransformerEncoderLayer", 8, 4, dim_feedforward=12)
    assert list(fg.state_dict()) == list(th.state_dict())
    assert repr(fg) == repr(th)
    th.eval()
    fg.eval()
    run(th, fg, [data(4, 3, 8)], {"src_key_padding_mask": kpm(3, 4)})
    compare_rec(th, fg, data(4, 3, 8), steps=3)


def test_transformer_encoder():
    with pytest.warns(UserWarning, match="enable_nested_tensor is True"):
        torch_layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
        th = torch.nn.TransformerEncoder(torch_layer, 2, norm=torch.nn.LayerNorm(8)).double()
    with pytest.warns(UserWarning, match="enable_nested_tensor is True"):
        fg_layer = fnn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
        fg = fnn.TransformerEncoder(fg_layer, 2, norm=fnn.LayerNorm(8)).double()
    sync(th, fg)
    assert list(fg.state_dict()) == list(th.state_dict())
    assert fg.layers[0].linear1.weight is not fg.layers[1].linear1.weight
    x = data(5, 2, 8)
    run(th, fg, [x], {"mask": ~causal(5), "src_key_padding_mask": kpm(2, 5)})
    float_causal = np.where(causal(5), 0.0, -np.inf)
    run(th, fg, [x], {"mask": float_causal})
    run(th, fg, [x])


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_transformer_encoder_inference_zeroes_padding():
    """Eval mode without gradients: PyTorch's nested-tensor path leaves zeros (before the final
    norm) at padded positions of right-padded sequences."""
    torch.manual_seed(0)
    th = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True),
                                     2, norm=torch.nn.LayerNorm(8)).double().eval()
    fg = fnn.TransformerEncoder(fnn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 2,
                                norm=fnn.LayerNorm(8)).double().eval()
    sync(th, fg)
    x = data(3, 5, 8)
    for m in (kpm(3, 5), np.array([[0, 0, 0, 1, 1], [0, 0, 0, 0, 0], [0, 1, 1, 1, 1]], bool)):
        with torch.no_grad():
            ref = th(torch.tensor(x), src_key_padding_mask=torch.tensor(m))
        with fusegrad.no_grad():
            out = fg(fusegrad.tensor(x), src_key_padding_mask=fusegrad.tensor(m))
        close(out, ref, ATOL, ATOL, "inference output")
