"""TransformerEncoderLayer and TransformerEncoder (self-attention plus a feed-forward block)."""

from __future__ import annotations

import copy
import warnings

import numpy as np

from ..._tensor import Tensor
from ...autograd.grad_mode import is_grad_enabled
from .. import functional as F
from .attention import MultiheadAttention
from .container import ModuleList
from .linear import Linear
from .misc import Dropout
from .module import Module
from .normalization import LayerNorm


def _activation(name):
    if name == "relu":
        return F.relu
    if name == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {name}")


def _square_subsequent_mask(size: int, dtype) -> Tensor:
    """(size, size) float mask: 0 on and below the diagonal, -inf above."""
    upper = np.triu(np.ones((size, size), dtype=bool), 1)
    return Tensor._make(np.where(upper, -np.inf, 0.0).astype(dtype.np))


class TransformerEncoderLayer(Module):
    """Self-attention then a two-layer feed-forward block, each with residual and LayerNorm.

    With norm_first the LayerNorms come before each block (pre-norm), otherwise after the
    residual sum (post-norm).
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            self.activation_relu_or_gelu = 1 if activation == "relu" else 2 if (
                activation == "gelu") else 0
            activation = _activation(activation)
        else:
            from .activation import GELU, ReLU

            self.activation_relu_or_gelu = 1 if (
                activation is F.relu or isinstance(activation, ReLU)) else 2 if (
                activation is F.gelu or isinstance(activation, GELU)) else 0
        self.activation = activation

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False):
        """One encoder layer over `src` ((S, N, E), (N, S, E) with batch_first, or (S, E))."""
        src_key_padding_mask = F._float_mask(src_key_padding_mask, src.dtype)
        src_mask = F._float_mask(src_mask, src.dtype)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout2(x)


def _why_no_nested(layer) -> str:
    """Why PyTorch's nested-tensor fast path would be off for this encoder layer ('' if on)."""
    name = "encoder_layer"
    if not isinstance(layer, TransformerEncoderLayer):
        return f"{name} was not TransformerEncoderLayer"
    if layer.norm_first:
        return f"{name}.norm_first was True"
    if not layer.self_attn.batch_first:
        return (f"{name}.self_attn.batch_first was not True(use batch_first for better "
                "inference performance)")
    if not layer.self_attn._qkv_same_embed_dim:
        return f"{name}.self_attn._qkv_same_embed_dim was not True"
    if layer.self_attn.in_proj_bias is None:
        return f"{name}.self_attn was passed bias=False"
    if not layer.activation_relu_or_gelu:
        return f"{name}.activation_relu_or_gelu was not True"
    if layer.norm1.eps != layer.norm2.eps:
        return f"{name}.norm1.eps was not equal to {name}.norm2.eps"
    if layer.self_attn.num_heads % 2 == 1:
        return f"{name}.self_attn.num_heads is odd"
    return ""


class TransformerEncoder(Module):
    """`num_layers` deep copies of `encoder_layer` applied in turn, then an optional norm."""

    def __init__(self, encoder_layer, num_layers: int, norm=None,
                 enable_nested_tensor: bool = True, mask_check: bool = True) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        why = _why_no_nested(encoder_layer)
        if enable_nested_tensor and why:
            warnings.warn(f"enable_nested_tensor is True, but self.use_nested_tensor is False "
                          f"because {why}", UserWarning, stacklevel=2)
            self.use_nested_tensor = False

    def _nested_padding(self, src, mask, key_padding_mask):
        """The (N, S, 1) padded positions PyTorch's inference path (nested tensors) sets to zero
        in the output, or None where PyTorch takes the ordinary path."""
        first = self.layers[0] if len(self.layers) else None
        if (first is None or not self.use_nested_tensor or first.training or src.dim() != 3
                or key_padding_mask is None or mask is not None):
            return None
        pad = key_padding_mask._data != 0
        if self.mask_check and np.any(pad[:, :-1] & ~pad[:, 1:]):
            return None
        attn = first.self_attn
        args = (src, attn.in_proj_weight, attn.in_proj_bias, attn.out_proj.weight,
                attn.out_proj.bias, first.norm1.weight, first.norm1.bias, first.norm2.weight,
                first.norm2.bias, first.linear1.weight, first.linear1.bias,
                first.linear2.weight, first.linear2.bias)
        if is_grad_enabled() and any(a is not None and a.requires_grad for a in args):
            return None
        return Tensor._make(pad[:, :, None])

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        """Run every layer (same masks for each), then `norm` if given."""
        src_key_padding_mask = F._float_mask(src_key_padding_mask, src.dtype)
        mask = F._float_mask(mask, src.dtype)
        causal = is_causal is True
        if is_causal is None and mask is not None:
            size = mask.shape[-2]
            ref = _square_subsequent_mask(size, mask.dtype)
            causal = tuple(mask.shape) == (size, size) and bool(
                np.array_equal(mask._data, ref._data))
        padded = self._nested_padding(src, mask, src_key_padding_mask)
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, is_causal=causal,
                        src_key_padding_mask=src_key_padding_mask)
        if padded is not None:
            out = out.masked_fill(padded, 0.0)
        if self.norm is not None:
            out = self.norm(out)
        return out


__all__ = ["TransformerEncoderLayer", "TransformerEncoder"]
