"""Transformer layers: encoder and decoder layers and stacks, and the full `Transformer`.

Each layer is attention plus a feed-forward block, with residual sums and LayerNorms; the
module names, state_dict keys and initialisation are PyTorch's, so its state_dicts load.
"""

import copy
import warnings

import numpy as np

from ... import _dtype
from ..._creation import full
from ..._functions.shape import triu
from ..._tensor import Tensor
from ..._warn import warn_once_at_caller
from ...autograd.grad_mode import is_grad_enabled
from .. import functional as F
from .. import init
from .attention import MultiheadAttention, _check_masks, _fast_path_switches, _native_attention
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm
from .rnn import _compiling


def _get_activation_fn(activation: str):
    """The function an activation name stands for ("relu" or "gelu")."""
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


_activation = _get_activation_fn

# PyTorch's C++ core gives this once per process when its inference path packs the padded
# batch into a nested tensor (TransformerEncoder with a key padding mask).
_NESTED_PROTOTYPE = (
    "The PyTorch API of nested tensors is in prototype stage and will change in the near "
    "future. We recommend specifying layout=torch.jagged when constructing a nested tensor, "
    "as this layout receives active development, has better operator coverage, and works "
    "with torch.compile.")


def _get_clones(module: Module, N: int) -> ModuleList:  # noqa: N803  (PyTorch's name)
    """A ModuleList of `N` deep copies of `module` (the layers of a stack)."""
    return ModuleList([copy.deepcopy(module) for _ in range(N)])


def _square_subsequent_mask(size: int, dtype, device=None) -> Tensor:
    """(size, size) float mask: 0 on and below the diagonal, -inf above, on `device`. Made of
    tensor ops, as PyTorch's (`full`, whose size check is the error for a negative size, then
    `triu`), so that a compiled forward captures it in its graph."""
    return triu(full((size, size), float("-inf"), dtype=dtype, device=device), 1)


def _generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> Tensor:
    """The causal mask of a sequence of `sz` steps: 0 on and below the diagonal, -inf
    above (True above for a bool dtype), in the default float dtype unless `dtype`."""
    return _square_subsequent_mask(sz, dtype if dtype is not None else _dtype.defaults.float,
                                   device)


def _get_seq_len(src: Tensor, batch_first: bool) -> int | None:
    """The sequence length of a (S, E), (S, N, E) or (N, S, E) input (None for a nested
    tensor)."""
    if getattr(src, "is_nested", False):
        return None
    if src.dim() == 2:
        return src.shape[0]
    return src.shape[1 if batch_first else 0]


def _detect_is_causal_mask(mask: Tensor | None, is_causal: bool | None = None,
                           size: int | None = None) -> bool:
    """`is_causal` when given; when None, whether `mask` equals the causal mask of `size`
    steps (default: its own second-to-last size) in its own dtype."""
    if is_causal is not None or mask is None:
        return is_causal is True
    sz = size if size is not None else mask.shape[-2]
    ref = _generate_square_subsequent_mask(sz, device=mask.device, dtype=mask.dtype)
    if tuple(mask.shape) != tuple(ref.shape):
        return False
    return bool((mask == ref).all())


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

    def forward(self, src: Tensor, src_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        """One encoder layer over `src` ((S, N, E), (N, S, E) with batch_first, or (S, E))."""
        _check_masks(src_key_padding_mask, "src_key_padding_mask", src_mask, "src_mask")
        src_key_padding_mask = F._float_mask(src_key_padding_mask, src.dtype)
        src_mask = F._float_mask(src_mask, src.dtype)
        if self._takes_fast_path(src):
            return self._fast_forward(src, src_mask, src_key_padding_mask)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _tensor_args(self) -> tuple:
        """The tensors PyTorch's fused encoder-layer kernel reads."""
        attn = self.self_attn
        return (attn.in_proj_weight, attn.in_proj_bias, attn.out_proj.weight,
                attn.out_proj.bias, self.norm1.weight, self.norm1.bias, self.norm2.weight,
                self.norm2.bias, self.linear1.weight, self.linear1.bias, self.linear2.weight,
                self.linear2.bias)

    def _takes_fast_path(self, src) -> bool:
        """Whether PyTorch would run its fused inference kernel for this layer: batched
        batch-first input in eval mode, packed biased projections, ReLU or GELU, equal norm
        eps, an even head count, no hooks anywhere in the layer, nothing needing a gradient.
        Unlike MultiheadAttention's, this path takes float masks too."""
        attn = self.self_attn
        if (not _fast_path_switches() or src.dim() != 3 or self.training
                or not attn.batch_first or attn.in_proj_bias is None
                or not attn._qkv_same_embed_dim or not self.activation_relu_or_gelu
                or self.norm1.eps != self.norm2.eps or attn.num_heads % 2 == 1):
            return False
        if any(m._forward_hooks or m._forward_pre_hooks for m in self.modules()):
            return False
        args = (src,) + self._tensor_args()
        return not (is_grad_enabled() and any(a is not None and a.requires_grad for a in args))

    def _fast_forward(self, src, src_mask, src_key_padding_mask):
        """The fused kernel's computation: no dropout, the attention's masks made boolean
        (any nonzero entry masked, so fully masked rows are NaN), exact GELU."""
        attn = self.self_attn
        mask, kind = attn.merge_masks(src_mask, src_key_padding_mask, src)
        act = F.gelu if self.activation_relu_or_gelu == 2 else F.relu

        def sa(x):
            return _native_attention(x, attn.embed_dim, attn.num_heads, attn.in_proj_weight,
                                     attn.in_proj_bias, attn.out_proj.weight,
                                     attn.out_proj.bias, mask, kind, False, False)[0]

        def norm(layer, x):
            return F.layer_norm(x, layer.normalized_shape, layer.weight, layer.bias, layer.eps)

        def ff(x):
            return F.linear(act(F.linear(x, self.linear1.weight, self.linear1.bias)),
                            self.linear2.weight, self.linear2.bias)

        x = src
        if self.norm_first:
            x = x + sa(norm(self.norm1, x))
            return x + ff(norm(self.norm2, x))
        x = norm(self.norm1, x + sa(x))
        return norm(self.norm2, x + ff(x))

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
        self.layers = _get_clones(encoder_layer, num_layers)
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
        if (first is None or not _fast_path_switches() or not self.use_nested_tensor
                or first.training or src.dim() != 3 or key_padding_mask is None):
            return None
        if self.mask_check and _compiling():
            # PyTorch skips the left-alignment check (it reads the mask's values) under
            # torch.compile by taking the ordinary path: padded positions keep their values
            return None
        if self.mask_check and key_padding_mask.is_meta:  # (PyTorch's check reads values)
            from ..._meta import no_meta_kernel

            raise no_meta_kernel("_nested_tensor_from_mask_left_aligned")
        if mask is not None:
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
        warn_once_at_caller(_NESTED_PROTOTYPE)
        return Tensor._make(pad[:, :, None])

    def forward(self, src: Tensor, mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                is_causal: bool | None = None) -> Tensor:
        """Run every layer (same masks for each), then `norm` if given."""
        _check_masks(src_key_padding_mask, "src_key_padding_mask", mask, "mask")
        src_key_padding_mask = F._float_mask(src_key_padding_mask, src.dtype)
        mask = F._float_mask(mask, src.dtype)
        causal = is_causal is True
        if is_causal is None and mask is not None:
            size = mask.shape[-2]
            ref = _square_subsequent_mask(size, mask.dtype, mask.device)
            causal = tuple(mask.shape) == (size, size) and bool(
                (mask == ref).all() if mask._data is None  # (meta: PyTorch's item() error)
                else np.array_equal(mask._data, ref._data))
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


_seq_len = _get_seq_len
_detect_causal = _detect_is_causal_mask


class TransformerDecoderLayer(Module):
    """Self-attention, attention over the encoder's `memory`, then a feed-forward block.

    Each of the three blocks has a residual sum and a LayerNorm: after the sum (post-norm)
    or, with norm_first, on the block's input (pre-norm).
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation=F.relu, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, dtype=dtype)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation) if isinstance(activation, str) else activation

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> Tensor:
        """One decoder layer over `tgt`, attending to the encoder output `memory`."""
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                               memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           is_causal=is_causal, need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout3(x)


class TransformerDecoder(Module):
    """`num_layers` deep copies of `decoder_layer` applied in turn, then an optional norm."""

    def __init__(self, decoder_layer, num_layers: int, norm=None) -> None:
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor:
        """Run every layer (same masks for each), then `norm` if given.

        With tgt_is_causal=None, a tgt_mask equal to the square subsequent mask counts as
        causal (as in PyTorch; the outputs are the same either way).
        """
        out = tgt
        first = self.layers[0] if len(self.layers) else None
        batch_first = first.self_attn.batch_first if first is not None else False
        causal = _detect_causal(tgt_mask, tgt_is_causal, _seq_len(tgt, batch_first))
        for layer in self.layers:
            out = layer(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                        tgt_key_padding_mask=tgt_key_padding_mask,
                        memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=causal,
                        memory_is_causal=memory_is_causal)
        if self.norm is not None:
            out = self.norm(out)
        return out


class Transformer(Module):
    """An encoder stack and a decoder stack (each with a final LayerNorm), as in PyTorch.

    Weight matrices (every parameter of two or more dims) are Xavier-uniform initialised.
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation=F.relu, custom_encoder=None,
                 custom_decoder=None, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            enc_layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout,
                                                activation, layer_norm_eps, batch_first,
                                                norm_first, bias, dtype=dtype)
            enc_norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
            self.encoder = TransformerEncoder(enc_layer, num_encoder_layers, enc_norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            dec_layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout,
                                                activation, layer_norm_eps, batch_first,
                                                norm_first, bias, dtype=dtype)
            dec_norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
            self.decoder = TransformerDecoder(dec_layer, num_decoder_layers, dec_norm)
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def _reset_parameters(self) -> None:
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None,
                tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None, src_is_causal: bool | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Tensor:
        """Encode `src`, then decode `tgt` against the encoder's output."""
        batched = src.dim() == 3
        batch_dim = 0 if self.batch_first else 1
        if batched and src.shape[batch_dim] != tgt.shape[batch_dim]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> Tensor:
        """(sz, sz) float mask: 0 on and below the diagonal, -inf above (default dtype)."""
        return _square_subsequent_mask(sz, dtype if dtype is not None else _dtype.defaults.float,
                                       device)


__all__ = ["TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer",
           "TransformerDecoder", "Transformer"]
