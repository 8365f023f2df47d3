"""MultiheadAttention, built from linear, matmul, softmax and dropout."""

import math
import warnings
from types import SimpleNamespace

from ... import _creation
from ..._autocast import is_autocast_enabled
from ..._functions import baddbmm as _baddbmm
from ..._functions import bmm as _bmm
from ..._functions import cat as _cat
from ..._tensor import Tensor
from ...autograd.grad_mode import is_grad_enabled
from ...backends.mha import get_fastpath_enabled
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .linear import NonDynamicallyQuantizableLinear
from .module import Module


def _pad_last(mask):
    """`mask` with one more zero column at the end (None stays None)."""
    if mask is None:
        return None
    extra = _creation.zeros(tuple(mask.shape[:-1]) + (1,), dtype=mask.dtype)
    return _cat([mask, extra], -1)


def _fast_path_switches() -> bool:
    """Whether the fused inference kernels may run at all: the fast-path switch is on and
    autocast is off."""
    return get_fastpath_enabled() and not is_autocast_enabled()


# Compiled code reads the switches once, as constants (PyTorch's compiler folds them too).
_fast_path_switches._fusegrad_constant_result = True


def _check_masks(mask, name: str, other=None, other_name: str = "") -> None:
    """PyTorch's mask checks: bool or float only; a warning when `mask` and `other` (both
    given) differ in type (a boolean padding mask with a float attention mask)."""
    def check_type(m, n: str) -> None:
        if m is not None and m.dtype.name != "bool" and not m.dtype.is_floating_point:
            raise AssertionError(f"only bool and floating types of {n} are supported")

    # (PyTorch's order: `mask`'s type, the warning, then `other`'s type)
    check_type(mask, name)
    if mask is not None and other is not None and mask.dtype is not other.dtype:
        warnings.warn(f"Support for mismatched {name} and {other_name} is deprecated. Use same "
                      f"type for both instead.", UserWarning, stacklevel=3)
    check_type(other, other_name)


def _check_shapes(query, key, value, key_padding_mask, attn_mask, num_heads: int) -> None:
    """PyTorch's rank checks of attention's inputs: a 3-D (batched) or 2-D (unbatched)
    query, key and value of its rank, a padding mask of one rank less and a 2-D or 3-D
    attention mask (an unbatched query's 3-D mask one per head)."""
    rank = query.dim()
    if rank not in (2, 3):
        raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received "
                             f"{rank}-D query tensor")
    kind = "batched (3-D)" if rank == 3 else "unbatched (2-D)"
    if key.dim() != rank or value.dim() != rank:
        raise AssertionError(f"For {kind} `query`, expected `key` and `value` to be {rank}-D "
                             f"but found {key.dim()}-D and {value.dim()}-D tensors "
                             "respectively")
    if key_padding_mask is not None and key_padding_mask.dim() != rank - 1:
        raise AssertionError(f"For {kind} `query`, expected `key_padding_mask` to be `None` "
                             f"or {rank - 1}-D but found {key_padding_mask.dim()}-D tensor "
                             "instead")
    if attn_mask is not None:
        if attn_mask.dim() not in (2, 3):
            raise AssertionError(f"For {kind} `query`, expected `attn_mask` to be `None`, 2-D "
                                 f"or 3-D but found {attn_mask.dim()}-D tensor instead")
        if rank == 2 and attn_mask.dim() == 3:
            expected = (num_heads, query.shape[0], key.shape[0])
            if tuple(attn_mask.shape) != expected:
                raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got "
                                     f"{attn_mask.shape}")


class MultiheadAttention(Module):
    """Attention of `num_heads` heads, each over embed_dim // num_heads features.

    forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False) returns (output, weights or None).  Boolean
    masks mark positions that may NOT be attended (True = masked out); float masks are added.
    """

    # PyTorch defines it in `nn.modules.activation`: pickles and `isinstance` checks name
    # that module, which re-exports it from here.
    __module__ = "fusegrad.nn.modules.activation"

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim=None, vdim=None,
                 batch_first: bool = False, device=None, dtype=None) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        assert self.head_dim * num_heads == embed_dim, "embed_dim must be divisible by num_heads"
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(_creation.empty((embed_dim, embed_dim), dtype=dtype))
            self.k_proj_weight = Parameter(_creation.empty((embed_dim, self.kdim), dtype=dtype))
            self.v_proj_weight = Parameter(_creation.empty((embed_dim, self.vdim), dtype=dtype))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(_creation.empty((3 * embed_dim, embed_dim),
                                                            dtype=dtype))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(_creation.empty(3 * embed_dim, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias,
                                                        dtype=dtype)
        if add_bias_kv:
            self.bias_k = Parameter(_creation.empty((1, 1, embed_dim), dtype=dtype))
            self.bias_v = Parameter(_creation.empty((1, 1, embed_dim), dtype=dtype))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        """Xavier-uniform projections, zero projection biases, Xavier-normal bias_k/bias_v."""
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def _project(self, query, key, value):
        """The query, key and value projections, grouped as PyTorch groups them.

        Self-attention (query is key is value) runs one projection of width 3E and splits it;
        encoder-decoder attention (key is value) runs the query's and one of width 2E for key
        and value; otherwise (or with kdim/vdim) three separate projections.
        """
        e = self.embed_dim
        b = self.in_proj_bias
        if not self._qkv_same_embed_dim:
            bq, bk, bv = (None, None, None) if b is None else b.chunk(3)
            ws = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
            _check_separate_projections(query, key, value, ws, (bq, bk, bv))
            return (F.linear(query, ws[0], bq), F.linear(key, ws[1], bk),
                    F.linear(value, ws[2], bv))
        w = self.in_proj_weight
        if key is value:
            if query is key:
                return _split_packed(F.linear(query, w, b), 3, e)
            wq, wkv = w.split([e, 2 * e])
            bq, bkv = (None, None) if b is None else b.split([e, 2 * e])
            return (F.linear(query, wq, bq),) + _split_packed(F.linear(key, wkv, bkv), 2, e)
        wq, wk, wv = w.chunk(3)
        bq, bk, bv = (None, None, None) if b is None else b.chunk(3)
        return F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)

    def _takes_fast_path(self, query, key, value, key_padding_mask, attn_mask) -> bool:
        """Whether PyTorch would run its fused inference kernel for these arguments: batched,
        batch-first self-attention of an even head count in eval mode, with boolean masks (or
        none), a packed projection with biases, and nothing that needs a gradient."""
        float_mask = any(m is not None and m.dtype.is_floating_point
                         for m in (attn_mask, key_padding_mask))
        b, w = self.in_proj_bias, self.in_proj_weight
        if (float_mask or not _fast_path_switches() or query.dim() != 3
                or query is not key or key is not value or w is None or b is None
                or query.dtype is not w.dtype or query.dtype is not b.dtype or self.training
                or self.num_heads % 2 or not self.batch_first or self.bias_k is not None
                or self.bias_v is not None or self.add_zero_attn
                or not self._qkv_same_embed_dim):
            return False
        args = (query, w, b, self.out_proj.weight, self.out_proj.bias)
        return not (is_grad_enabled() and any(a is not None and a.requires_grad for a in args))

    def merge_masks(self, attn_mask, key_padding_mask, query):
        """(merged mask, mask type) as the fused kernels take them: type 1 is the (N, S)
        padding mask alone, type 2 an (N, heads, L, S) sum of the expanded attention mask and
        padding mask; (None, None) without masks."""
        merged, kind = None, None
        if key_padding_mask is not None:
            merged, kind = key_padding_mask, 1
        if attn_mask is not None:
            bsz, seq_len, _ = query.shape
            if attn_mask.dim() == 3:
                merged = attn_mask.view(bsz, -1, seq_len, seq_len)
            else:
                merged = attn_mask.view(1, 1, seq_len, seq_len).expand(
                    bsz, self.num_heads, -1, -1)
            kind = 2
            if key_padding_mask is not None:
                merged = merged + key_padding_mask.view(bsz, 1, 1, seq_len).expand(
                    -1, self.num_heads, -1, -1)
        return merged, kind

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | None = None, need_weights: bool = True,
                attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        """(attention output, head-averaged or per-head weights, or None)."""
        _check_masks(key_padding_mask, "key_padding_mask", attn_mask, "attn_mask")
        if self._takes_fast_path(query, key, value, key_padding_mask, attn_mask):
            # PyTorch's inference kernel: its own mask checks, a contiguous (N, L, E) output,
            # is_causal ignored, and fully masked rows are NaN whatever need_weights says.
            merged, kind = self.merge_masks(F._float_mask(attn_mask, query.dtype),
                                            F._float_mask(key_padding_mask, query.dtype), query)
            return _native_attention(query, self.embed_dim, self.num_heads,
                                     self.in_proj_weight, self.in_proj_bias,
                                     self.out_proj.weight, self.out_proj.bias, merged, kind,
                                     need_weights, average_attn_weights)
        _check_shapes(query, key, value, key_padding_mask, attn_mask, self.num_heads)
        batched = query.dim() == 3
        if self.batch_first and batched:
            # One transpose per distinct tensor, so that self-attention stays recognisable.
            if key is value:
                if query is key:
                    query = key = value = query.transpose(1, 0)
                else:
                    query = query.transpose(1, 0)
                    key = value = key.transpose(1, 0)
            else:
                query, key, value = (t.transpose(1, 0) for t in (query, key, value))
        if not batched:
            # Three separate unsqueezes: unbatched self-attention projects as three (PyTorch's).
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        tgt_len, bsz, embed_dim = query.shape
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use "
                               "the Transformer module method `generate_square_subsequent_mask`"
                               " to create this mask.")
        use_causal = is_causal and key_padding_mask is None and not need_weights
        if use_causal:
            attn_mask = None
        else:
            attn_mask = F._float_mask(attn_mask, query.dtype)
            if key_padding_mask is not None:
                use_causal = False
        key_padding_mask = F._float_mask(key_padding_mask, query.dtype)
        if embed_dim != self.embed_dim:
            raise AssertionError(f"was expecting embedding dimension of {self.embed_dim}, "
                                 f"but got {embed_dim}")
        # Separate projections may have other widths: only the sequence and batch dims of
        # key and value must agree then.
        if not self._qkv_same_embed_dim:
            if key.shape[:2] != value.shape[:2]:
                raise AssertionError(f"key's sequence and batch dims {key.shape[:2]} do not "
                                     f"match value's {value.shape[:2]}")
        elif key.shape != value.shape:
            raise AssertionError(f"key shape {key.shape} does not match value shape "
                                 f"{value.shape}")
        heads, hd = self.num_heads, self.head_dim
        q, k, v = self._project(query, key, value)
        if attn_mask is not None:
            if attn_mask.dim() == 2:
                if tuple(attn_mask.shape) != (tgt_len, key.shape[0]):
                    raise RuntimeError(f"The shape of the 2D attn_mask is "
                                       f"{attn_mask.shape}, but should be "
                                       f"{(tgt_len, key.shape[0])}.")
                attn_mask = attn_mask.unsqueeze(0)
            elif attn_mask.dim() == 3:
                if tuple(attn_mask.shape) != (bsz * heads, tgt_len, key.shape[0]):
                    raise RuntimeError(f"The shape of the 3D attn_mask is "
                                       f"{attn_mask.shape}, but should be "
                                       f"{(bsz * heads, tgt_len, key.shape[0])}.")
            else:
                raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")
        if self.bias_k is not None and self.bias_v is not None:
            k = _cat([k, self.bias_k.repeat(1, bsz, 1)])
            v = _cat([v, self.bias_v.repeat(1, bsz, 1)])
            attn_mask = _pad_last(attn_mask)
            key_padding_mask = _pad_last(key_padding_mask)
        q = q.view(tgt_len, bsz * heads, hd).transpose(0, 1)
        k = k.view(k.shape[0], bsz * heads, hd).transpose(0, 1)
        v = v.view(v.shape[0], bsz * heads, hd).transpose(0, 1)
        if self.add_zero_attn:
            k = _cat([k, _creation.zeros((bsz * heads, 1, hd), dtype=k.dtype)], 1)
            v = _cat([v, _creation.zeros((bsz * heads, 1, hd), dtype=v.dtype)], 1)
            attn_mask = _pad_last(attn_mask)
            key_padding_mask = _pad_last(key_padding_mask)
        src_len = k.shape[1]
        if key_padding_mask is not None:
            for i, size in enumerate((bsz, src_len)):
                if key_padding_mask.shape[i] != size:
                    raise AssertionError(f"Expected key_padded_mask.shape[{i}] to be {size}, "
                                         f"but got {key_padding_mask.shape[i]}")
            kpm = key_padding_mask.view(bsz, 1, 1, src_len).expand(
                -1, heads, -1, -1).reshape(bsz * heads, 1, src_len)
            attn_mask = kpm if attn_mask is None else attn_mask + kpm
        p = self.dropout if self.training else 0.0
        if need_weights:
            q_scaled = q * math.sqrt(1.0 / float(hd))
            if attn_mask is not None:
                weights = _baddbmm(attn_mask, q_scaled, k.transpose(-2, -1))
            else:
                weights = _bmm(q_scaled, k.transpose(-2, -1))
            weights = F.softmax(weights, dim=-1)
            if p > 0.0:
                weights = F.dropout(weights, p=p)
            out = _bmm(weights, v)
            out = out.transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
            # the out_proj module is not called (PyTorch reads its tensors): no hooks of it run
            out = F.linear(out, self.out_proj.weight, self.out_proj.bias)
            out = out.view(tgt_len, bsz, out.shape[1])
            weights = weights.view(bsz, heads, tgt_len, src_len)
            if average_attn_weights:
                weights = weights.mean(dim=1)
            if not batched:
                out, weights = out.squeeze(1), weights.squeeze(0)
            elif self.batch_first:
                out = out.transpose(1, 0)
            return out, weights
        if attn_mask is not None:
            if attn_mask.shape[0] == 1 and attn_mask.dim() == 3:
                attn_mask = attn_mask.unsqueeze(0)
            else:
                attn_mask = attn_mask.view(bsz, heads, -1, src_len)
        q = q.view(bsz, heads, tgt_len, hd)
        k = k.view(bsz, heads, src_len, hd)
        v = v.view(bsz, heads, src_len, hd)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask, p, use_causal)
        out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
        # the out_proj module is not called (PyTorch reads its tensors): no hooks of it run
        out = F.linear(out, self.out_proj.weight, self.out_proj.bias)
        out = out.view(tgt_len, bsz, out.shape[1])
        if not batched:
            out = out.squeeze(1)
        elif self.batch_first:
            out = out.transpose(1, 0)
        return out, None


def _native_attention(query, embed_dim: int, num_heads: int, in_proj_weight, in_proj_bias,
                      out_proj_weight, out_proj_bias, mask, mask_type, need_weights: bool,
                      average_attn_weights: bool):
    """PyTorch's fused batch-first self-attention for inference: (output, weights or None).

    Its masks are boolean: any nonzero entry of a (canonical, float) mask is masked out, and a
    row with every key masked gives NaN. The output is a contiguous (N, L, E) tensor.
    """
    bsz, seq_len, width = query.shape
    if width != embed_dim:
        raise RuntimeError(f"passed-in embed_dim {embed_dim} didn't match last dim of query "
                           f"{width}")
    if mask_type == 1 and tuple(mask.shape) != (bsz, seq_len):
        raise RuntimeError("For mask_type == 1 mask shape should be (B, L)")
    if mask_type == 2 and tuple(mask.shape) != (bsz, num_heads, seq_len, seq_len):
        raise RuntimeError("For mask_type == 2 mask shape should match input shape")
    if query.numel() == 0:
        return _creation.empty(tuple(query.shape), dtype=query.dtype), None
    head_dim = embed_dim // num_heads
    qkv = F.linear(query, in_proj_weight, in_proj_bias)
    q, k, v = qkv.view(bsz, seq_len, 3, num_heads, head_dim).permute(2, 0, 3, 1, 4)
    scores = (q * math.sqrt(1.0 / float(head_dim))).matmul(k.transpose(-2, -1))
    if mask is not None:
        blocked = mask != 0
        if mask_type == 1:
            blocked = blocked.view(bsz, 1, 1, seq_len)
        scores = scores.masked_fill(blocked, float("-inf"))
    weights = F.softmax(scores, dim=-1)
    ctx = weights.matmul(v).transpose(1, 2).reshape(bsz, seq_len, embed_dim)
    out = F.linear(ctx, out_proj_weight, out_proj_bias)
    if not need_weights:
        return out, None
    if average_attn_weights:
        weights = weights.mean(dim=1)
    return out, weights.contiguous()


def _check_separate_projections(query, key, value, weights, biases) -> None:
    """PyTorch's checks of separate projections against the inputs' widths, made before any
    projection runs (so a wrong key or value width is an AssertionError naming the weight)."""
    eq = query.shape[-1]
    widths = (eq, key.shape[-1], value.shape[-1])
    for name, w, width in zip(("query", "key", "value"), weights, widths):
        if tuple(w.shape) != (eq, width):
            raise AssertionError(f"expecting {name} weights shape of {(eq, width)}, "
                                 f"but got {w.shape}")
    for name, b in zip(("query", "key", "value"), biases):
        if b is not None and tuple(b.shape) != (eq,):
            raise AssertionError(f"expecting {name} bias shape of {(eq,)}, but got {b.shape}")


def _split_packed(proj, n: int, e: int) -> tuple:
    """`n` projections of width `e` from one of width n * e, each contiguous on its own.

    The (n, E) split is moved to the front and made contiguous once, so each part is a select
    of one block (PyTorch's layout and nodes: view, unsqueeze, transpose, squeeze, clone).
    """
    parts = proj.unflatten(-1, (n, e)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
    return tuple(parts[i] for i in range(n))


class _Weights:
    """The attributes of MultiheadAttention that its forward reads, from loose tensors."""

    batch_first = False
    _project = MultiheadAttention._project

    def __init__(self, **fields) -> None:
        self.__dict__.update(fields)

    def _takes_fast_path(self, *args) -> bool:
        # the functional form never runs the module's fused inference kernel
        return False


def multi_head_attention_forward(
        query, key, value, embed_dim_to_check: int, num_heads: int, in_proj_weight,
        in_proj_bias, bias_k, bias_v, add_zero_attn: bool, dropout_p: float, out_proj_weight,
        out_proj_bias, training: bool = True, key_padding_mask=None, need_weights: bool = True,
        attn_mask=None, use_separate_proj_weight: bool = False, q_proj_weight=None,
        k_proj_weight=None, v_proj_weight=None, static_k=None, static_v=None,
        average_attn_weights: bool = True, is_causal: bool = False):
    """MultiheadAttention's forward over loose weights, sequence-first (L, N, E) inputs or
    unbatched (L, E): (output, weights or None)."""
    if static_k is not None or static_v is not None:
        raise NotImplementedError("multi_head_attention_forward: static_k/static_v are not "
                                  "supported yet")  # ours
    embed_dim = query.shape[-1]
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, "
                             f"but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    weights = _Weights(
        embed_dim=embed_dim, num_heads=num_heads, head_dim=head_dim,
        in_proj_weight=None if use_separate_proj_weight else in_proj_weight,
        in_proj_bias=in_proj_bias, bias_k=bias_k, bias_v=bias_v, add_zero_attn=add_zero_attn,
        dropout=dropout_p, training=training,
        out_proj=SimpleNamespace(weight=out_proj_weight, bias=out_proj_bias),
        _qkv_same_embed_dim=not use_separate_proj_weight, q_proj_weight=q_proj_weight,
        k_proj_weight=k_proj_weight, v_proj_weight=v_proj_weight)
    return MultiheadAttention.forward(weights, query, key, value, key_padding_mask,
                                      need_weights, attn_mask, average_attn_weights, is_causal)


__all__ = ["MultiheadAttention"]
