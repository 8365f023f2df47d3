"""`torch.nn.attention.flex_attention`: attention whose scores a user function rewrites.

`flex_attention(q, k, v, score_mod, block_mask)` computes softmax(q kᵀ · scale) v where each
score first goes through `score_mod(score, b, h, q_idx, kv_idx)` and the positions where
the block mask's `mask_mod(b, h, q_idx, kv_idx)` is False are left out; a query row with no
position left gives zeros (and a log-sum-exp of -inf). This is PyTorch's eager (unfused)
computation on CPU: scores in float32 (float64 for float64 inputs), the probabilities cast
back to the query's dtype before the product with v. PyTorch evaluates the mods through four
nested vmaps; here they are called once on index tensors shaped to broadcast against the
(B, H, Q, KV) scores (b: (B,1,1,1), h: (1,H,1,1), ...), which gives the same values for the
elementwise and indexing code that mods are made of, without a Python call per position.
As on PyTorch's CPU, q, k and v must not require grad.

`create_block_mask` evaluates a mask_mod on every position and records, per block of
BLOCK_SIZE queries, which key blocks are partly (`kv_num_blocks`, `kv_indices`) and wholly
(`full_kv_*`) kept, and the transposed tables (`q_*`). The eager computation reads only the
`mask_mod` back, as PyTorch's does; the tables serve `to_dense`, `sparsity` and printing.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["BlockMask", "flex_attention", "AuxOutput", "AuxRequest", "FlexKernelOptions",
           "create_block_mask", "create_mask", "or_masks", "and_masks", "noop_mask"]

_DEFAULT_SPARSE_BLOCK_SIZE = 128
_LARGE_SPARSE_BLOCK_SIZE = 1 << 30
_WARNINGS_SHOWN: set[str] = set()
# PyTorch's switch for calling the mods without compiling them; they are never compiled here.
_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = False
FlexKernelOptions = dict  # the kernels' tuning options: no fused kernel reads them here


def _torch():
    import fusegrad

    return fusegrad


def _warn_once(key: str, message: str, category: type[Warning] = UserWarning) -> None:
    if key not in _WARNINGS_SHOWN:
        warnings.warn(message, category, stacklevel=3)
        _WARNINGS_SHOWN.add(key)


class AuxRequest(NamedTuple):
    """Which auxiliary outputs `flex_attention` should return."""

    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    """The auxiliary outputs of `flex_attention` (None where not requested)."""

    lse: Any = None
    max_scores: Any = None


def noop_mask(batch, head, token_q, token_kv):
    """The mask_mod that keeps every position."""
    return batch.new_ones(size=(), dtype=_torch().bool, device=batch.device)


def _identity(score, batch, head, token_q, token_kv):
    return score


def or_masks(*mask_mods: Callable) -> Callable:
    """The mask_mod keeping a position when any of `mask_mods` keeps it."""
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def or_mask(b, h, q_idx, kv_idx):
        result = b.new_zeros((), dtype=_torch().bool)
        for mod in mask_mods:
            result = result | mod(b, h, q_idx, kv_idx)
        return result
    return or_mask


def and_masks(*mask_mods: Callable) -> Callable:
    """The mask_mod keeping a position when all of `mask_mods` keep it."""
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def and_mask(b, h, q_idx, kv_idx):
        result = b.new_ones((), dtype=_torch().bool)
        for mod in mask_mods:
            result = result & mod(b, h, q_idx, kv_idx)
        return result
    return and_mask


def _positional_count(fn: Callable) -> int:
    if hasattr(fn, "__code__"):
        return fn.__code__.co_argcount - len(getattr(fn, "__defaults__", None) or ())
    import inspect

    return sum(1 for p in inspect.signature(fn).parameters.values()
               if p.default is inspect.Parameter.empty)


def _is_score_mod(fn: Callable) -> bool:
    n = _positional_count(fn)
    if n not in (4, 5):
        raise AssertionError(f"Expected 4 or 5 positional args, got {n}")
    return n == 5


def _grid(B: int, H: int, Q: int, KV: int, device: Any) -> tuple:
    """The batch, head, query and key indices as int64 tensors that broadcast to
    (B, H, Q, KV)."""
    torch = _torch()
    return (torch.arange(B, device=device).view(B, 1, 1, 1),
            torch.arange(H, device=device).view(1, H, 1, 1),
            torch.arange(Q, device=device).view(1, 1, Q, 1),
            torch.arange(KV, device=device).view(1, 1, 1, KV))


def create_mask(mod_fn: Callable, B: int | None, H: int | None, Q_LEN: int, KV_LEN: int,
                device: Any = None):
    """The (B, H, Q_LEN, KV_LEN) boolean mask of `mod_fn`: a mask_mod's values, or where a
    score_mod leaves a score finite (B and H of None count as 1)."""
    torch = _torch()
    device = "cpu" if device is None else device
    B = 1 if B is None else B
    H = 1 if H is None else H
    grid = _grid(B, H, Q_LEN, KV_LEN, device)
    if _is_score_mod(mod_fn):
        out = mod_fn(torch.zeros(B, H, Q_LEN, KV_LEN, device=device), *grid)
        return torch.where(torch.isneginf(out), False, True).expand(B, H, Q_LEN, KV_LEN)
    return mod_fn(*grid).expand(B, H, Q_LEN, KV_LEN)


def _ordered_to_dense(num_blocks, indices, num_cols: int):
    # Row r keeps the columns indices[..., r, :num_blocks[..., r]].
    torch = _torch()
    entries = torch.arange(indices.shape[-1], dtype=torch.int32, device=indices.device)
    cols = torch.where(entries < num_blocks.unsqueeze(-1), indices, num_cols)
    dense = torch.zeros(*indices.shape[:-1], num_cols + 1, dtype=torch.int32,
                        device=indices.device)
    dense.scatter_(-1, cols.long(), 1)
    return dense[..., :num_cols].contiguous()


def _dense_to_ordered(dense) -> tuple:
    # Per row: how many columns are kept, and the kept columns first (in order), then the
    # others.
    torch = _torch()
    dense = dense.to(torch.int32)
    order = torch.argsort(dense, dim=-1, descending=True, stable=True)
    return dense.sum(dim=-1).to(torch.int32), order.to(torch.int32)


def _transpose_ordered(num_blocks, indices) -> tuple:
    dense = _ordered_to_dense(num_blocks, indices, indices.shape[-1])
    return _dense_to_ordered(dense.transpose(-2, -1))


class BlockMask:
    """Which (query block, key block) pairs attention computes, and the `mask_mod` that
    decides the positions inside them; see the module's description."""

    def __init__(self, seq_lengths: tuple[int, int], kv_num_blocks, kv_indices,
                 full_kv_num_blocks, full_kv_indices, q_num_blocks, q_indices,
                 full_q_num_blocks, full_q_indices,
                 BLOCK_SIZE: tuple[int, int] = (_DEFAULT_SPARSE_BLOCK_SIZE,
                                                _DEFAULT_SPARSE_BLOCK_SIZE),
                 mask_mod: Callable = noop_mask, *, dq_write_order=None,
                 dq_write_order_full=None, dq_kv_order=None,
                 dq_kv_order_spt: bool | None = None) -> None:
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        self.seq_lengths = seq_lengths
        self.kv_num_blocks = kv_num_blocks
        self.kv_indices = kv_indices
        self.full_kv_num_blocks = full_kv_num_blocks
        self.full_kv_indices = full_kv_indices
        self.q_num_blocks = q_num_blocks
        self.q_indices = q_indices
        self.full_q_num_blocks = full_q_num_blocks
        self.full_q_indices = full_q_indices
        self.BLOCK_SIZE = BLOCK_SIZE
        self.mask_mod = mask_mod
        self.dq_write_order = dq_write_order
        self.dq_write_order_full = dq_write_order_full
        self.dq_kv_order = dq_kv_order
        self.dq_kv_order_spt = dq_kv_order_spt

    @classmethod
    def from_kv_blocks(cls, kv_num_blocks, kv_indices, full_kv_num_blocks=None,
                       full_kv_indices=None,
                       BLOCK_SIZE: int | tuple[int, int] = _DEFAULT_SPARSE_BLOCK_SIZE,
                       mask_mod: Callable | None = None,
                       seq_lengths: tuple[int, int] | None = None,
                       compute_q_blocks: bool = True, **kwargs: Any) -> BlockMask:
        """A BlockMask from its key-block tables; the query-block tables are derived."""
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError(
                "full_kv_num_blocks and full_kv_indices must be both provided or omitted")
        q_num = q_idx = full_q_num = full_q_idx = None
        if compute_q_blocks:
            q_num, q_idx = _transpose_ordered(kv_num_blocks, kv_indices)
            if full_kv_num_blocks is not None:
                full_q_num, full_q_idx = _transpose_ordered(full_kv_num_blocks,
                                                            full_kv_indices)
        if isinstance(BLOCK_SIZE, int):
            BLOCK_SIZE = (BLOCK_SIZE, BLOCK_SIZE)
        if seq_lengths is None:
            seq_lengths = (kv_indices.shape[-2] * BLOCK_SIZE[0],
                           kv_indices.shape[-1] * BLOCK_SIZE[1])
        return cls(seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks,
                   full_kv_indices, q_num, q_idx, full_q_num, full_q_idx, BLOCK_SIZE,
                   mask_mod if mask_mod is not None else noop_mask, **kwargs)

    def as_tuple(self, flatten: bool = True) -> tuple:
        """The fields, in the order of PyTorch's flex attention operator."""
        block = tuple(self.BLOCK_SIZE) if flatten else (self.BLOCK_SIZE,)
        lengths = tuple(self.seq_lengths) if flatten else (self.seq_lengths,)
        return (*lengths, self.kv_num_blocks, self.kv_indices, self.full_kv_num_blocks,
                self.full_kv_indices, self.q_num_blocks, self.q_indices,
                self.full_q_num_blocks, self.full_q_indices, self.dq_write_order,
                self.dq_write_order_full, self.dq_kv_order, self.dq_kv_order_spt,
                *block, self.mask_mod)

    @property
    def shape(self) -> tuple[int, ...]:
        """(batch dims..., query length, key length)."""
        return tuple(self.kv_indices.shape[:-2]) + tuple(self.seq_lengths)

    def numel(self) -> int:
        """The number of positions the mask covers (sparsity not counted)."""
        return math.prod(self.shape)

    def sparsity(self) -> float:
        """The percentage of the positions in blocks that are not computed."""
        computed = int(self.kv_num_blocks.sum().item())
        if self.full_kv_num_blocks is not None:
            computed += int(self.full_kv_num_blocks.sum().item())
        return 100 * (1 - computed * self.BLOCK_SIZE[0] * self.BLOCK_SIZE[1] / self.numel())

    def to_dense(self):
        """The (..., query blocks, key blocks) int32 map of the computed blocks."""
        dense = _ordered_to_dense(self.kv_num_blocks, self.kv_indices,
                                  self.kv_indices.shape[-1])
        if self.full_kv_num_blocks is not None:
            dense = dense | _ordered_to_dense(self.full_kv_num_blocks, self.full_kv_indices,
                                              self.full_kv_indices.shape[-1])
        return dense

    def to_string(self, grid_size: int | tuple[int, int] = (20, 20), limit: int = 4) -> str:
        """A drawing of the computed blocks per batch and head: "█" computed, " " skipped,
        "░" a cell of a shrunk drawing that mixes both (grid_size -1: never shrunk)."""
        dense = self.to_dense()
        *batch_dims, rows, cols = dense.shape
        if isinstance(grid_size, int):
            max_rows = max_cols = grid_size
        elif grid_size == -1:
            max_rows, max_cols = rows, cols
        else:
            max_rows, max_cols = grid_size
        row_step = max(1, -(-rows // max_rows))
        col_step = max(1, -(-cols // max_cols))
        drawings = []
        for i, index in enumerate(itertools.product(*[range(d) for d in batch_dims])):
            if i == limit:
                drawings += ["...", "To print out more, set BlockMask.to_string(limit=N)",
                             "You can also index (BlockMask[batch, head]) to choose a "
                             "specific batch or head"]
                break
            cells = dense[index] if index else dense
            text = f"{index}\n"
            for r in range(0, rows, row_step):
                for c in range(0, cols, col_step):
                    share = cells[r:r + row_step, c:c + col_step].float().mean().item()
                    text += ("█" if share == 1 else " " if share == 0 else "░") * 2
                text += "\n"
            drawings.append(text)
        return "\n".join(drawings)

    def __str__(self) -> str:
        return (f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%, \n"
                f"{self.to_string().strip()}\n)")

    def __repr__(self) -> str:
        def shape(t):
            return t.shape if t is not None else None

        name = getattr(self.mask_mod, "__name__", self.mask_mod)
        return ("BlockMask(\n"
                f"    kv_num_blocks={self.kv_num_blocks.shape},\n"
                f"    kv_indices={self.kv_indices.shape},\n"
                f"    full_kv_num_blocks={shape(self.full_kv_num_blocks)},\n"
                f"    full_kv_indices={shape(self.full_kv_indices)},\n"
                f"    q_num_blocks={shape(self.q_num_blocks)},\n"
                f"    q_indices={shape(self.q_indices)},\n"
                f"    full_q_num_blocks={shape(self.full_q_num_blocks)},\n"
                f"    full_q_indices={shape(self.full_q_indices)},\n"
                f"    BLOCK_SIZE={self.BLOCK_SIZE},\n"
                f"    shape={self.shape},\n"
                f"    sparsity={self.sparsity():.2f}%,\n"
                f"    mask_mod={name}\n"
                ")")


def _block_tables(mask, q_block: int, kv_block: int, separate_full_blocks: bool) -> tuple:
    # Per (query block, key block): partly kept, and (separately) wholly kept, as int8.
    torch = _torch()
    B, H, Q, KV = mask.shape
    pad_q, pad_kv = -Q % q_block, -KV % kv_block
    mask = torch.nn.functional.pad(mask, (0, pad_kv, 0, pad_q))
    nq, nkv = (Q + pad_q) // q_block, (KV + pad_kv) // kv_block
    kept = mask.view(B, H, nq, q_block, nkv, kv_block).permute(0, 1, 2, 4, 3, 5) \
        .sum(dim=[-2, -1])
    if not separate_full_blocks:
        return (kept > 0).to(torch.int8), None
    whole = q_block * kv_block
    return ((kept > 0) & (kept < whole)).to(torch.int8), (kept == whole).to(torch.int8)


def create_block_mask(mask_mod: Callable, B: int | None, H: int | None, Q_LEN: int,
                      KV_LEN: int, device: Any = None,
                      BLOCK_SIZE: int | tuple[int, int] = _DEFAULT_SPARSE_BLOCK_SIZE,
                      _compile: bool = False, separate_full_blocks: bool = True,
                      compute_dq_write_order: bool = False,
                      dq_kv_order: bool = True) -> BlockMask:
    """The BlockMask of `mask_mod` over (B, H, Q_LEN, KV_LEN) (B and H of None: shared by
    every batch entry or head) in blocks of BLOCK_SIZE queries by BLOCK_SIZE keys."""
    if _is_score_mod(mask_mod):
        raise AssertionError(f"create-block_mask requires a mask_mod function! Got {mask_mod}")
    B = 1 if B is None else B
    H = 1 if H is None else H
    q_block, kv_block = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) \
        else BLOCK_SIZE
    if _compile:
        warnings.warn(
            "_compile flag on create_block_mask was originally added to work around a "
            "torch.compile limitation. That limitation has since been addressed. So, to "
            "compile create_block_mask, we suggest doing torch.compile(create_block_mask). "
            "This still works for now, but will be removed in the future.",
            DeprecationWarning, stacklevel=2)
    if compute_dq_write_order:
        raise NotImplementedError("create_block_mask: compute_dq_write_order (the write "
                                  "order of a GPU backward kernel) is not supported")
    if not isinstance(dq_kv_order, bool):
        raise ValueError("dq_kv_order must be a bool when using create_block_mask")
    mask = create_mask(mask_mod, B, H, Q_LEN, KV_LEN, device)
    partial, full = _block_tables(mask, q_block, kv_block, separate_full_blocks)
    kv_num, kv_idx = _dense_to_ordered(partial)
    full_num, full_idx = _dense_to_ordered(full) if full is not None else (None, None)
    return BlockMask.from_kv_blocks(kv_num, kv_idx, full_num, full_idx,
                                    BLOCK_SIZE=(q_block, kv_block), mask_mod=mask_mod,
                                    seq_lengths=(Q_LEN, KV_LEN))


def _empty_block_mask(query) -> BlockMask:
    torch = _torch()
    return BlockMask.from_kv_blocks(
        torch.ones([1, 1, 1], dtype=torch.int32, device=query.device),
        torch.zeros([1, 1, 1, 1], dtype=torch.int32, device=query.device),
        BLOCK_SIZE=_LARGE_SPARSE_BLOCK_SIZE, seq_lengths=(1, 1))


def _validate(query, key, value, block_mask, enable_gqa: bool) -> None:
    if query.device != key.device or query.device != value.device:
        raise ValueError(
            "Expected query, key, and value to have the same device type, but got "
            f"query.device: {query.device}, key.device: {key.device}, and value.device: "
            f"{value.device} instead.")
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise ValueError(
            "Expected query, key, and value to all be  at least 2 dimensional, but got "
            f"query.dim: {query.dim()}, key.dim: {key.dim()} and value.dim: {value.dim()} "
            "instead.")
    if query.size(-1) != key.size(-1):
        raise ValueError("Expect query and key/value to have the same embedding dimension "
                         f"but got E={query.size(-1)} and E={key.size(-1)}.")
    if query.requires_grad or key.requires_grad or value.requires_grad:
        raise NotImplementedError(
            "FlexAttention does not support backward on CPU. Please set the input "
            "requires_grad to False or use another device.")
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise NotImplementedError("NYI: query, key, and value must be 4D tensors")
    if not enable_gqa and query.size(-3) != key.size(-3):
        raise ValueError(
            "Expect query and key/value to have the same number of heads but got "
            f"Hq={query.size(-3)} and Hkv={key.size(-3)}. Try setting enable_gqa=True for GQA.")
    if enable_gqa and query.size(1) % key.size(1) != 0:
        raise ValueError("Expect number of query heads to be a multiple of kv heads for GQA "
                         f"but got Hq={query.size(1)} and Hkv={key.size(1)}.")
    if query.size(0) != key.size(0):
        if block_mask is None:
            raise ValueError(
                "Expect query and key/value to have the same batch size, or non-none "
                f"block_mask, but got block_mask=None, Bq={query.size(0)}, and "
                f"Bkv={key.size(0)}.")
        if block_mask.kv_num_blocks.size(0) != query.size(0):
            raise ValueError(
                "Expect query and key/value to have the same batch size, or block_mask and "
                f"query to have the same batch size, but got Bq={query.size(0)}, "
                f"Bkv={key.size(0)}, B_block_mask={block_mask.kv_num_blocks.size(0)}.")


def _check_lengths(block_mask: BlockMask, q_len: int, kv_len: int) -> None:
    mq, mkv = block_mask.shape[-2], block_mask.shape[-1]
    said = (f"block_mask was created for block_mask.shape={block_mask.shape} but got "
            f"q_len={q_len} and kv_len={kv_len}. ")
    if q_len > mq or kv_len > mkv:
        raise ValueError(said + "As the block mask was created for a smaller length than "
                         "you're using it for, you likely need to create a new block mask.")
    if q_len < mq or kv_len < mkv:
        raise ValueError(
            said + "As the block mask was created for a larger length than you're using it "
            "for, you can either 1. create a new block mask with the correct length, or 2. "
            "'adjust' the existing block mask to the correct length by calling "
            "block_mask._adjust(q_len, kv_len). This essentially 'crops' the block mask to "
            "the upper left corner, which does not work for all mask_mods!")


def _math_attention(query, key, value, score_mod: Callable, mask_mod: Callable,
                    scale: float) -> tuple:
    """(output, log-sum-exp per query) of the unfused computation."""
    torch = _torch()
    groups = query.size(1) // key.size(1)
    key = torch.repeat_interleave(key, groups, dim=1)
    value = torch.repeat_interleave(value, groups, dim=1)
    Bq, Bkv = query.size(0), key.size(0)
    if not (Bq == Bkv or (Bq > 1 and Bkv == 1)):
        raise RuntimeError(f"Bq and Bkv must broadcast. Got Bq={Bq} and Bkv={Bkv}")
    key = key.expand((Bq, *key.size()[1:]))
    value = value.expand((Bq, *value.size()[1:]))
    work = torch.float64 if query.dtype == torch.float64 else torch.float32
    scores = query.to(work) @ key.to(work).transpose(-2, -1)
    grid = _grid(*scores.shape, scores.device)
    scores = (scores * scale).to(work)
    kept = mask_mod(*grid)
    post = torch.where(kept, score_mod(scores, *grid),
                       torch.full((), -float("inf"), dtype=work, device=scores.device))
    post = post.expand(scores.shape)
    empty = torch.all(post == -float("inf"), dim=-1)
    lse = torch.where(empty, -float("inf"), post.logsumexp(dim=-1))
    # A row with nothing kept gives zeros (softmax over a row of zeros, then dropped).
    probs = torch.softmax(torch.where(empty.unsqueeze(-1), 0.0, post), dim=-1)
    probs = torch.where(empty.unsqueeze(-1), 0.0, probs)
    return probs.to(query.dtype) @ value.to(query.dtype), lse


def _autograd_op() -> type:
    # The output's node carries the name of PyTorch's operator node; the gradients flow
    # through the unfused computation recorded behind it.
    global _AUTOGRAD_OP
    if _AUTOGRAD_OP is None:
        from ...autograd import Function

        class FlexAttentionAutogradOp(Function):
            @staticmethod
            def forward(ctx, out, lse):
                return out.clone(), lse.clone()

            @staticmethod
            def backward(ctx, grad_out, grad_lse):
                return grad_out, grad_lse

        _AUTOGRAD_OP = FlexAttentionAutogradOp
    return _AUTOGRAD_OP


_AUTOGRAD_OP: type | None = None


def flex_attention(query, key, value, score_mod: Callable | None = None,
                   block_mask: BlockMask | None = None, scale: float | None = None,
                   enable_gqa: bool = False, return_lse: bool = False,
                   kernel_options: dict | None = None, *,
                   return_aux: AuxRequest | None = None):
    """Attention of `query` (B, Hq, L, E) over `key` (B, Hkv, S, E) and `value`
    (B, Hkv, S, Ev) with scores rewritten by `score_mod` and positions dropped by
    `block_mask`; see the module's description. Returns the output (B, Hq, L, Ev), with
    the log-sum-exp per query (B, Hq, L) under `return_lse` or an `AuxOutput` under
    `return_aux`."""
    _validate(query, key, value, block_mask, enable_gqa)
    score_mod = _identity if score_mod is None else score_mod
    block_mask = _empty_block_mask(query) if block_mask is None else block_mask
    if tuple(block_mask.BLOCK_SIZE) != (_LARGE_SPARSE_BLOCK_SIZE, _LARGE_SPARSE_BLOCK_SIZE):
        _check_lengths(block_mask, query.size(-2), key.size(-2))
    scale = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
    if return_lse and return_aux is not None:
        raise ValueError(
            "Cannot specify both return_lse and return_aux. return_lse is deprecated, please "
            "use return_aux=AuxRequest(lse=True) instead.")
    if return_lse:
        _warn_once("deprecated_return_lse",
                   "return_lse is deprecated and will be removed in v2.10. Please use "
                   "return_aux=AuxRequest(lse=True) instead.", FutureWarning)
    if return_aux is not None and return_aux.max_scores:
        raise NotImplementedError("Returning max scores is not supported on CPU/MPS.")
    _warn_once(
        "flex_attention_performance",
        "flex_attention called without torch.compile() - this will use an unfused "
        "implementation that materializes the full scores matrix instead of generating a "
        "fused kernel.\n\nSOLUTION: Use torch.compile(flex_attention)(...)\n\nIf you want "
        "to debug your score_mod/mask_mod, you can set:\n"
        "torch.nn.attention.flex_attention._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = True\n\n"
        "This will allow you to use print statements or breakpoints. Note: This doesn't "
        "work with the backwards pass and may produce incorrect results.")
    out, lse = _math_attention(query, key, value, score_mod, block_mask.mask_mod, scale)
    if out.requires_grad or lse.requires_grad:  # a mod read a tensor that requires grad
        out, lse = _autograd_op().apply(out, lse)
    # PyTorch's kernels report the log-sum-exp in base 2 and scale it back.
    lse = lse / math.log(2) * math.log(2.0)
    if return_aux is not None:
        return out, AuxOutput(lse=lse if return_aux.lse else None)
    return (out, lse) if return_lse else out
