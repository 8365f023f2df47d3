"""`torch.nn.attention.bias`: causal masks that `scaled_dot_product_attention` takes as its
`attn_mask` without the caller building the (L, S) matrix.

`causal_upper_left(L, S)` lets query i attend keys 0..i (the causal mask of `is_causal=True`);
`causal_lower_right(L, S)` aligns the diagonal to the last key instead (query i attends keys
0..i + S - L), as a decoder with a key-value cache needs. A `CausalBias` is a Tensor subclass
holding that boolean mask; its `__torch_function__` turns a call of
`scaled_dot_product_attention` into the call PyTorch makes: `is_causal=True` where the two
variants agree (upper left, or a square mask), the boolean mask otherwise.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

from ..._tensor import Tensor
from ..._torch_function import tensor_torch_function

__all__ = ["causal_upper_left", "causal_lower_right", "CausalVariant", "CausalBias"]


class CausalVariant(IntEnum):
    """Where a causal mask's diagonal starts: the top-left corner or the bottom-right."""

    UPPER_LEFT = 1
    LOWER_RIGHT = 2


def _mask(variant: CausalVariant, seq_len_q: int, seq_len_kv: int) -> np.ndarray:
    """The (seq_len_q, seq_len_kv) "may attend" matrix of `variant`."""
    shift = 0 if variant == CausalVariant.UPPER_LEFT else seq_len_kv - seq_len_q
    return np.tri(seq_len_q, seq_len_kv, shift, dtype=bool)


class CausalBias(Tensor):
    """A causal attention mask of `variant` for `seq_len_q` queries and `seq_len_kv` keys,
    given to `scaled_dot_product_attention` as its `attn_mask`."""

    def __new__(cls, variant: CausalVariant, seq_len_q: int, seq_len_kv: int) -> CausalBias:
        if not isinstance(variant, CausalVariant):
            raise AssertionError(f"variant must be a CausalVariant, got {type(variant).__name__}")
        return cls._make(_mask(variant, seq_len_q, seq_len_kv))

    def __init__(self, variant: CausalVariant, seq_len_q: int, seq_len_kv: int) -> None:
        self.variant = variant
        self.seq_len_q = seq_len_q
        self.seq_len_kv = seq_len_kv
        if seq_len_q > seq_len_kv and variant == CausalVariant.LOWER_RIGHT:
            import warnings

            warnings.warn("Lower right causal bias will produce NaNs in the output when "
                          "seq_len_q > seq_len_kv!", stacklevel=2)

    def _upper_left(self, device=None) -> Tensor:
        """The upper-left aligned mask as a plain boolean tensor."""
        return Tensor._make(_mask(CausalVariant.UPPER_LEFT, self.seq_len_q, self.seq_len_kv))

    def _lower_right(self, device=None) -> Tensor:
        """The lower-right aligned mask as a plain boolean tensor."""
        return Tensor._make(_mask(CausalVariant.LOWER_RIGHT, self.seq_len_q, self.seq_len_kv))

    def _materialize(self, device=None) -> Tensor:
        """This bias as a plain boolean (seq_len_q, seq_len_kv) tensor (True = may attend)."""
        if self.variant == CausalVariant.UPPER_LEFT:
            return self._upper_left(device)
        return self._lower_right(device)

    @staticmethod
    def _dispatch(query: Tensor, key: Tensor, value: Tensor, attn_mask: CausalBias,
                  dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                  enable_gqa: bool = False) -> Tensor:
        """`scaled_dot_product_attention` with this bias as its mask: `is_causal=True`
        where the upper-left mask is meant, the explicit boolean mask otherwise."""
        from .. import functional as F

        if is_causal:
            raise ValueError("CausalBias should not be used with causal=True")
        if (attn_mask.seq_len_q == attn_mask.seq_len_kv
                or attn_mask.variant == CausalVariant.UPPER_LEFT):
            return F.scaled_dot_product_attention(query, key, value, attn_mask=None,
                                                  dropout_p=dropout_p, is_causal=True,
                                                  scale=scale, enable_gqa=enable_gqa)
        if attn_mask.variant == CausalVariant.LOWER_RIGHT:
            return F.scaled_dot_product_attention(query, key, value,
                                                  attn_mask=attn_mask._lower_right(),
                                                  dropout_p=dropout_p, is_causal=False,
                                                  scale=scale, enable_gqa=enable_gqa)
        raise ValueError(f"CausalBias.variant must be a CausalVariant type, but found: "
                         f"{attn_mask.variant}")

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """Attention calls use the mask's variant; any other function sees the mask as a
        boolean tensor."""
        from .. import functional as F

        if kwargs is None:
            kwargs = {}
        if func is F.scaled_dot_product_attention:
            return cls._dispatch(*args, **kwargs)
        return tensor_torch_function(cls, func, types, args, kwargs)

    def __repr__(self) -> str:
        return self._materialize().__repr__()


def causal_upper_left(*size) -> CausalBias:
    """A causal mask whose diagonal starts at the top left: query i attends keys 0..i.
    `size` is (seq_len_q, seq_len_kv)."""
    if len(size) != 2:
        raise AssertionError("causal_upper_left only supports 2D tensors")
    seq_len_q, seq_len_kv = size
    return CausalBias(CausalVariant.UPPER_LEFT, seq_len_q, seq_len_kv)


def causal_lower_right(*size) -> CausalBias:
    """A causal mask whose diagonal ends at the bottom right: query i attends keys
    0..i + seq_len_kv - seq_len_q. `size` is (seq_len_q, seq_len_kv)."""
    if len(size) != 2:
        raise AssertionError("causal_lower_right only supports 2D tensors")
    seq_len_q, seq_len_kv = size
    return CausalBias(CausalVariant.LOWER_RIGHT, seq_len_q, seq_len_kv)
