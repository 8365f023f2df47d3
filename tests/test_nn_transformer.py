"""TransformerEncoderLayer/Encoder, TransformerDecoderLayer/Decoder and Transformer against
torch: outputs, every parameter and input gradient and the node-name set of the graph, in
float32 and float64 (dropout 0 or eval mode: random streams differ from PyTorch's), plus
state_dict keys, repr, default initialisation and errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from test_nn_attention import causal, data, kpm, oracle
from test_nn_support import sync

import fusegrad
import fusegrad.nn as fnn

DTYPES = pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])


def _fg_value(v):
    """A constructor argument for fusegrad: torch activations become fusegrad's."""
    if v is torch.nn.functional.gelu:
        return fusegrad.nn.functional.gelu
    if v is torch.nn.functional.relu:
        return fusegrad.nn.functional.relu
    if isinstance(v, torch.nn.Module):
        return getattr(fnn, type(v).__name__)()
    return v


def build(name, *args, dtype=np.float64, **kwargs):
    """torch and fusegrad modules `name` with torch's (seeded) weights copied into fusegrad."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # enable_nested_tensor notices
        torch.manual_seed(0)
        th = getattr(torch.nn, name)(*args, **kwargs)
        fg = getattr(fnn, name)(*args, **{k: _fg_value(v) for k, v in kwargs.items()})
    th, fg = (th.double(), fg.double()) if dtype == np.float64 else (th.float(), fg.float())
    sync(th, fg)
    return th, fg


def _masks(src=5, tgt=5):
    return {"src_kpm": kpm(2, src), "tgt_kpm": kpm(2, tgt), "causal": ~causal(tgt),
            "src_causal": ~causal(src),
            "float_causal": np.where(causal(tgt), 0.0, -np.inf),
            "float_mem": data(tgt, src, seed=3), "bool_mem": ~causal(tgt, src)}


def _resolve(kwargs, src=5, tgt=5):
    masks = _masks(src, tgt)
    return {k: masks[v] if isinstance(v, str) else v for k, v in kwargs.items()}


# ---------------------------------------------------------------- encoder


@DTYPES
@pytest.mark.parametrize("ctor,kwargs", [
    ({}, {}),
    ({}, {"src_key_padding_mask": "src_kpm"}),
    ({"norm_first": True}, {"src_mask": "causal"}),
    ({"activation": "gelu"}, {"src_mask": "float_causal", "is_causal": True}),
    ({"activation": torch.nn.functional.gelu, "batch_first": True}, {}),
    ({"activation": torch.nn.GELU(), "norm_first": True, "batch_first": True},
     {"src_key_padding_mask": "src_kpm"}),
    ({"bias": False, "layer_norm_eps": 1e-3}, {"src_mask": "float_mem"}),
])
def test_encoder_layer(ctor, kwargs, dtype):
    th, fg = build("TransformerEncoderLayer", 8, 2, dim_feedforward=16, dropout=0.0,
                   dtype=dtype, **ctor)
    x = data(2, 5, 8) if ctor.get("batch_first") else data(5, 2, 8)
    oracle(th, fg, [x], _resolve(kwargs), dtype=dtype)


@DTYPES
def test_encoder_layer_unbatched_and_nodes(dtype):
    th, fg = build("TransformerEncoderLayer", 8, 2, dim_feedforward=16, dropout=0.0,
                   dtype=dtype)
    oracle(th, fg, [data(5, 8)], dtype=dtype)
    out, _ = oracle(th, fg, [data(5, 2, 8)], dtype=dtype)
    names = _names(out[0])
    assert {"NativeLayerNormBackward0", "ReluBackward0", "PermuteBackward0",
            "ScaledDotProductFlashAttentionForCpuBackward0"} <= names


def _names(t):
    from test_nn_attention import graph_names

    return graph_names(t)


@DTYPES
@pytest.mark.parametrize("kwargs", [
    {}, {"mask": "causal", "src_key_padding_mask": "src_kpm"}, {"mask": "float_causal"},
    {"mask": "float_causal", "is_causal": True},
])
def test_encoder(kwargs, dtype):
    with pytest.warns(UserWarning, match="enable_nested_tensor is True"):
        layer = fnn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
        fg = fnn.TransformerEncoder(layer, 2, norm=fnn.LayerNorm(8))
    with pytest.warns(UserWarning, match="enable_nested_tensor is True"):
        th = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0),
                                         2, norm=torch.nn.LayerNorm(8))
    th, fg = (th.double(), fg.double()) if dtype == np.float64 else (th, fg)
    sync(th, fg)
    oracle(th, fg, [data(5, 2, 8)], _resolve(kwargs), dtype=dtype)


# ---------------------------------------------------------------- decoder


@DTYPES
@pytest.mark.parametrize("ctor,kwargs", [
    ({}, {}),
    ({}, {"tgt_mask": "causal", "tgt_key_padding_mask": "tgt_kpm"}),
    ({}, {"tgt_mask": "float_causal", "tgt_is_causal": True, "memory_mask": "float_mem",
          "memory_key_padding_mask": "src_kpm"}),
    ({"norm_first": True}, {"tgt_mask": "float_causal", "memory_mask": "bool_mem"}),
    ({"batch_first": True, "activation": "gelu"}, {"memory_key_padding_mask": "src_kpm"}),
    ({"batch_first": True, "norm_first": True, "activation": torch.nn.functional.gelu},
     {"tgt_mask": "causal", "tgt_is_causal": True}),
    ({"bias": False, "layer_norm_eps": 1e-3}, {"tgt_key_padding_mask": "tgt_kpm"}),
])
def test_decoder_layer(ctor, kwargs, dtype):
    th, fg = build("TransformerDecoderLayer", 8, 2, dim_feedforward=16, dropout=0.0,
                   dtype=dtype, **ctor)
    if ctor.get("batch_first"):
        arrays = [data(2, 4, 8), data(2, 6, 8, seed=1)]
    else:
        arrays = [data(4, 2, 8), data(6, 2, 8, seed=1)]
    oracle(th, fg, arrays, _resolve(kwargs, src=6, tgt=4), dtype=dtype)


@DTYPES
def test_decoder_layer_unbatched_and_memory_identity(dtype):
    """Unbatched inputs; memory equal to tgt (same object) still uses the key-is-value
    projection in the cross-attention, as PyTorch does."""
    th, fg = build("TransformerDecoderLayer", 8, 2, dim_feedforward=16, dropout=0.0,
                   dtype=dtype)
    oracle(th, fg, [data(4, 8), data(6, 8, seed=1)], dtype=dtype)
    oracle(th, fg, [data(4, 2, 8), 0], dtype=dtype)


@DTYPES
@pytest.mark.parametrize("kwargs", [
    {}, {"tgt_mask": "float_causal"}, {"tgt_mask": "causal", "tgt_is_causal": False,
                                       "memory_key_padding_mask": "src_kpm"},
])
def test_decoder(kwargs, dtype):
    th, fg = build("TransformerDecoderLayer", 8, 2, dim_feedforward=16, dropout=0.0,
                   dtype=dtype)
    th = torch.nn.TransformerDecoder(th, 2, norm=torch.nn.LayerNorm(8))
    fg = fnn.TransformerDecoder(fg, 2, norm=fnn.LayerNorm(8))
    th, fg = (th.double(), fg.double()) if dtype == np.float64 else (th, fg)
    sync(th, fg)
    assert list(fg.state_dict()) == list(th.state_dict())
    assert fg.layers[0].linear1.weight is not fg.layers[1].linear1.weight
    oracle(th, fg, [data(5, 2, 8), data(6, 2, 8, seed=1)], _resolve(kwargs, src=6),
           dtype=dtype)


def test_decoder_layer_keys_repr_and_activation_error():
    th = torch.nn.TransformerDecoderLayer(8, 2, 16)
    fg = fnn.TransformerDecoderLayer(8, 2, 16)
    assert list(fg.state_dict()) == list(th.state_dict())
    assert repr(fg) == repr(th)
    assert [n for n, _ in fg.named_children()] == [n for n, _ in th.named_children()]
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        fnn.TransformerDecoderLayer(8, 2, activation="tanh")


# ---------------------------------------------------------------- Transformer


def _transformer(dtype=np.float64, **kwargs):
    return build("Transformer", 8, 2, num_encoder_layers=2, num_decoder_layers=2,
                 dim_feedforward=16, dropout=0.0, dtype=dtype, **kwargs)


@DTYPES
@pytest.mark.parametrize("ctor,kwargs", [
    ({}, {}),
    ({}, {"src_mask": "src_causal", "tgt_mask": "float_causal", "memory_mask": "bool_mem",
          "src_key_padding_mask": "src_kpm", "tgt_key_padding_mask": "tgt_kpm",
          "memory_key_padding_mask": "src_kpm"}),
    ({"batch_first": True, "norm_first": True}, {"tgt_mask": "float_causal",
                                                 "tgt_is_causal": True}),
    ({"activation": "gelu", "bias": False}, {"src_key_padding_mask": "src_kpm"}),
])
def test_transformer(ctor, kwargs, dtype):
    th, fg = _transformer(dtype, **ctor)
    if ctor.get("batch_first"):
        arrays = [data(2, 5, 8), data(2, 4, 8, seed=1)]
    else:
        arrays = [data(5, 2, 8), data(4, 2, 8, seed=1)]
    oracle(th, fg, arrays, _resolve(kwargs, src=5, tgt=4), dtype=dtype)


def test_transformer_eval_default_dropout_and_unbatched():
    th, fg = build("Transformer", 8, 2, num_encoder_layers=1, num_decoder_layers=1,
                   dim_feedforward=16)
    th.eval()
    fg.eval()
    oracle(th, fg, [data(5, 2, 8), data(4, 2, 8, seed=1)],
           {"tgt_mask": fnn.Transformer.generate_square_subsequent_mask(4).numpy()})
    oracle(th, fg, [data(5, 8), data(4, 8, seed=1)])


def test_transformer_keys_init_and_loading():
    """Same state_dict keys and repr; torch's state_dict loads; PyTorch's default init
    (Xavier-uniform matrices, zero attention biases, unit LayerNorms)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        th = torch.nn.Transformer(16, 4, 2, 2, 32)
        fg = fnn.Transformer(16, 4, 2, 2, 32)
    assert list(fg.state_dict()) == list(th.state_dict())
    assert repr(fg) == repr(th)
    assert (fg.d_model, fg.nhead, fg.batch_first) == (16, 4, False)
    for name, p in fg.named_parameters():
        w = p.detach().numpy()
        if w.ndim > 1:
            bound = np.sqrt(6 / (w.shape[0] + w.shape[1]))
            assert np.abs(w).max() <= bound and np.abs(w).max() > 0.7 * bound, name
        elif "norm" in name:
            assert np.all(w == (1.0 if name.endswith("weight") else 0.0)), name
        elif "in_proj_bias" in name or "out_proj.bias" in name:
            assert not w.any(), name
    fg.load_state_dict({k: fusegrad.from_numpy(v.numpy().copy())
                        for k, v in th.state_dict().items()})
    for (k, a), b in zip(fg.state_dict().items(), th.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)


def test_transformer_errors_and_mask():
    th, fg = _transformer()
    for T, m in ((torch, th), (fusegrad, fg)):
        with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
            m(T.zeros(5, 2, 8, dtype=T.float64), T.zeros(4, 3, 8, dtype=T.float64))
        with pytest.raises(RuntimeError, match="the feature number of src and tgt must be "
                                               "equal to d_model"):
            m(T.zeros(5, 2, 8, dtype=T.float64), T.zeros(4, 2, 6, dtype=T.float64))
    for args in ((3,), (4,)):
        a = fnn.Transformer.generate_square_subsequent_mask(*args)
        b = torch.nn.Transformer.generate_square_subsequent_mask(*args)
        assert a.dtype == fusegrad.float32
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    m = fnn.Transformer.generate_square_subsequent_mask(2, dtype=fusegrad.float64)
    assert m.dtype == fusegrad.float64


def test_custom_encoder_decoder():
    th, fg = build("Transformer", 8, 2, 1, 1, 16, 0.0)
    enc_t, enc_f = th.encoder, fg.encoder
    th2 = torch.nn.Transformer(8, 2, dim_feedforward=16, custom_encoder=enc_t,
                               custom_decoder=th.decoder).double()
    fg2 = fnn.Transformer(8, 2, dim_feedforward=16, custom_encoder=enc_f,
                          custom_decoder=fg.decoder).double()
    assert list(fg2.state_dict()) == list(th2.state_dict())
    sync(th2, fg2)
    oracle(th2, fg2, [data(5, 2, 8), data(4, 2, 8, seed=1)])


def test_mask_type_warnings_and_errors():
    """A boolean padding mask with a float attention mask warns as in PyTorch (once, from the
    outermost module that receives both); integer masks are refused."""
    x = data(5, 2, 8)
    for T in (torch, fusegrad):
        pad, square = T.tensor(kpm(2, 5)), T.zeros(5, 5)
        xt = T.tensor(x.astype(np.float32))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            layer = T.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
            encoder = T.nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        mha = T.nn.MultiheadAttention(8, 2)
        for mod, args, kw, name in (
                (mha, (xt, xt, xt), {"key_padding_mask": pad, "attn_mask": square},
                 "key_padding_mask and attn_mask"),
                (layer, (xt,), {"src_mask": square, "src_key_padding_mask": pad},
                 "src_key_padding_mask and src_mask"),
                (encoder, (xt,), {"mask": square, "src_key_padding_mask": pad},
                 "src_key_padding_mask and mask")):
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                mod(*args, **kw)
            texts = [str(w.message) for w in seen if "mismatched" in str(w.message)]
            assert texts == [f"Support for mismatched {name} is deprecated. Use same type for "
                             f"both instead."], (T.__name__, texts)
        with pytest.raises(AssertionError, match="only bool and floating types of attn_mask"):
            T.nn.MultiheadAttention(8, 2)(xt, xt, xt, attn_mask=T.zeros(5, 5, dtype=T.int64))
