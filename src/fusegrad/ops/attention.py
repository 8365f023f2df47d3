"""Attention ops: the fused `_scaled_dot_product_flash_attention_for_cpu` and its backward,
and `_safe_softmax` (the composite attention path's softmax).

PyTorch's `F.scaled_dot_product_attention` records this op as one node
(`ScaledDotProductFlashAttentionForCpuBackward0`) whenever its CPU flash kernel accepts the
inputs (`nn.functional.scaled_dot_product_attention` makes the same choice). The kernels here
are NumPy: one batched matmul for the scores, a numerically stable softmax, one batched
matmul for the output. The forward also returns the log-sum-exp of each score row, which the
backward uses to rebuild the probabilities instead of saving them, as the flash kernel does.

PyTorch has no derivative for the backward op (double backward raises "derivative for
aten::..._backward is not implemented"); fusegrad records the same `NotImplemented` node.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype
from .._shapes import dense_strides, is_dense_in
from . import _onnx as ox
from ._util import F32, HALF, Spec, c_contiguous, rand_array, wrap_dims
from .reductions import check_softmax_dtype
from .registry import Sample, register

_PREFIX = "scaled_dot_product_attention_flash_attention: "
_FLOATS = ("float32", "float64", "float16", "bfloat16")


def _call(op, *args):
    from .._dispatch import call

    return call(op, *args)


def _dt(x):
    """fusegrad dtype of an array or a tensor/fake."""
    return _dtype.FROM_NP[x.dtype] if isinstance(x, np.ndarray) else x.dtype


def _check(q, k, v, dropout_p, attn_mask) -> None:
    """The flash kernel's argument checks, with PyTorch's messages (kernel and meta)."""
    dq = _dt(q)
    if dq.name not in _FLOATS:
        raise RuntimeError(f"{_PREFIX}Expected data type in FP32, FP64, BF16, FP16, but got "
                           f"{dq.legacy} instead.")
    for other in (k, v):
        if _dt(other) is not dq:
            raise RuntimeError(f"expected scalar type {dq.legacy} but found "
                               f"{_dt(other).legacy}")
    if len(q.shape) != 4 or len(k.shape) != 4 or len(v.shape) != 4:
        raise RuntimeError(f"{_PREFIX}Accept only 4 dims inputs shape of {{B, H, T, K}}")
    if dropout_p != 0.0:  # (a negative probability reaches the kernel and fails here too)
        raise RuntimeError(f"{_PREFIX}Currently do not support dropout > 0")
    if not q.shape[3] == k.shape[3] == v.shape[3]:
        raise RuntimeError(f"{_PREFIX}Q/K/V should have the same head size")
    if attn_mask is not None:
        dm = _dt(attn_mask)
        if dm is not dq and dm.name != "float32":
            raise RuntimeError(f"{_PREFIX}Attention mask is the same data type as query")
        if len(attn_mask.shape) not in (2, 4):
            raise RuntimeError(f"{_PREFIX}Attention mask dim in {{2, 4}}")


def _work(a: np.ndarray) -> np.ndarray:
    """Half types are computed in float32, as PyTorch's CPU kernels accumulate."""
    return a.astype(F32) if a.dtype in HALF else a


def _factor(q_shape, scale) -> float:
    return 1.0 / math.sqrt(q_shape[-1]) if scale is None else scale


def _repeat_heads(t: np.ndarray, heads: int) -> np.ndarray:
    """Grouped-query attention: each key/value head serves heads // t.shape[1] query heads."""
    return t if t.shape[1] == heads else np.repeat(t, heads // t.shape[1], axis=1)


def _scores(q, k, is_causal, attn_mask, scale) -> np.ndarray:
    """Scaled scores (B, H, L, S) with the causal and additive masks applied."""
    s = np.matmul(q, _repeat_heads(k, q.shape[1]).swapaxes(-1, -2))
    s *= s.dtype.type(_factor(q.shape, scale))  # (in place: the same product, no new array)
    if is_causal:
        np.copyto(s, -np.inf, where=_above_diagonal(s.shape[-2:]))
    if attn_mask is not None:
        s = s + _work(attn_mask).astype(s.dtype, copy=False)
    return s


def _above_diagonal(shape: tuple) -> np.ndarray:
    """The positions a causal mask hides: above the diagonal."""
    return np.triu(np.ones(shape, dtype=bool), 1)


def _lse_layout(lse: np.ndarray) -> np.ndarray:
    """(B, H, L) values in PyTorch's (B, L, H) memory order (its strides)."""
    return np.ascontiguousarray(lse.transpose(0, 2, 1)).transpose(0, 2, 1)


def _in_layout_of(out: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """`out` laid out in memory as `ref` is (PyTorch allocates the output like the query):
    dense, its dimensions in the order of the query's strides (largest first, ties in dim
    order), whether or not the query itself is dense (a query that is a view of a
    projection, as in MultiheadAttention, or a slice of one), so permuting it back (to
    sequence-major) needs no copy."""
    if out.shape != ref.shape:
        return np.ascontiguousarray(out)
    order = sorted(range(ref.ndim), key=lambda d: -ref.strides[d])
    laid = np.ascontiguousarray(out.transpose(order)).transpose(np.argsort(order))
    if laid.strides != ref.strides and _dense(ref):
        # a dense query's strides exactly, those of its size-1 dims included
        same = np.lib.stride_tricks.as_strided(np.empty(out.size, out.dtype), ref.shape,
                                               tuple(s // ref.itemsize * out.itemsize
                                                     for s in ref.strides))
        same[...] = out
        return same
    return laid


def _dense(a: np.ndarray) -> bool:
    """Whether `a`'s elements fill its memory without gaps or overlaps (strides positive)."""
    expected = a.itemsize
    for d in sorted(range(a.ndim), key=lambda d: a.strides[d]):
        if a.shape[d] == 1:
            continue
        if a.strides[d] != expected:
            return False
        expected *= a.shape[d]
    return all(s > 0 for n, s in zip(a.shape, a.strides) if n != 1)


def _flash_kernel(q, k, v, dropout_p=0.0, is_causal=False, attn_mask=None, scale=None):
    _check(q, k, v, dropout_p, attn_mask)
    dt = q.dtype
    qw, kw, vw = _work(q), _work(k), _work(v)
    s = _scores(qw, kw, is_causal, attn_mask, scale)
    top = s.max(-1, keepdims=True)
    # A row with every position masked has max -inf: its probabilities (and output) are 0
    # and its log-sum-exp is 0, as PyTorch's kernel leaves them.
    top = np.where(np.isneginf(top), 0.0, top)
    e = np.exp(np.subtract(s, top, out=s), out=s)  # (in place: `s` is not read again)
    total = e.sum(-1, keepdims=True)
    empty = total == 0
    if dt in HALF:
        # PyTorch's kernel sums the float32 exponentials, but multiplies them into the
        # values in the input's type (its reduced-precision GEMM), dividing afterwards.
        out = np.matmul(e.astype(dt).astype(F32), _repeat_heads(vw, q.shape[1]))
        out = out / np.where(empty, 1.0, total)
    else:
        p = np.divide(e, np.where(empty, 1.0, total), out=e)
        out = np.matmul(p, _repeat_heads(vw, q.shape[1]))
    lse = np.where(empty, 0.0, top + np.log(np.where(empty, 1.0, total)))[..., 0]
    sdt = F32 if dt in HALF else dt
    out = _in_layout_of(out.astype(dt, copy=False), q)
    return out, _lse_layout(lse.astype(sdt, copy=False))


def _safe_probabilities(s, dim: int):
    """softmax(s) along `dim` in fusegrad ops, with rows of only -inf giving zeros (not NaN,
    in values or gradients), and the row totals and maxima it divided by."""
    top = s.amax([dim], True)
    top = top.new_zeros(()).where(top.isneginf(), top)
    e = (s - top).exp()
    total = e.sum([dim], True)
    empty = total == 0
    return e / total.new_ones(()).where(empty, total), total, top, empty


def _flash_decomposition(q, k, v, dropout_p=0.0, is_causal=False, attn_mask=None, scale=None):
    """softmax(q k^T * scale + masks) v with matmuls and the safe softmax; the log-sum-exp
    of each score row (0 for a row with every key masked)."""
    _check(q, k, v, dropout_p, attn_mask)
    heads = q.shape[1]
    if k.shape[1] != heads:  # grouped-query attention: each key/value head serves a group
        b, group, (n, e) = k.shape[0], heads // k.shape[1], k.shape[2:]
        k = k.unsqueeze(2).expand(b, k.shape[1], group, n, e).reshape(b, heads, n, e)
        v = v.unsqueeze(2).expand(b, v.shape[1], group, n, v.shape[3]).reshape(
            b, heads, n, v.shape[3])
    s = q.matmul(k.transpose(-2, -1)) * _factor(tuple(q.shape), scale)
    if is_causal:
        keep = q.new_ones(tuple(s.shape[-2:]), dtype=_dtype.bool_).tril()
        s = s.where(keep, -math.inf)
    if attn_mask is not None:
        s = s + attn_mask.to(s.dtype)
    p, total, top, empty = _safe_probabilities(s, -1)
    lse = (top + total.new_ones(()).where(empty, total).log()).where(
        empty.logical_not(), 0.0)
    return p.matmul(v), lse.squeeze(-1)


def _flash_meta(q, k, v, dropout_p=0.0, is_causal=False, attn_mask=None, scale=None):
    _check(q, k, v, dropout_p, attn_mask)
    b, h, length = q.shape[0], q.shape[1], q.shape[2]
    sdt = _dtype.float32 if q.dtype in (_dtype.float16, _dtype.bfloat16) else q.dtype
    shape = (b, h, length, v.shape[3])
    # The kernel's layouts (`_in_layout_of`, `_lse_layout`), so fake tensors and compiled
    # code (which calls the kernel as an extern) see eager's strides.
    return [Spec(shape, q.dtype, _out_strides(q, shape)),
            Spec((b, h, length), sdt, dense_strides((b, h, length), (0, 2, 1)))]


def _out_strides(q, shape: tuple) -> tuple | None:
    """The strides `_in_layout_of` gives the output of a query `q` (a fake): a dense
    query's own, else dense in the order of the query's strides; None (row-major) where the
    query's shape differs."""
    q_shape, q_strides = tuple(q.shape), tuple(q.stride())
    if q_shape != shape:
        return None
    order = tuple(sorted(range(len(shape)), key=lambda d: -q_strides[d]))
    if is_dense_in(q_shape, q_strides, order) and all(
            s > 0 for n, s in zip(q_shape, q_strides) if n != 1):
        return q_strides
    return dense_strides(shape, order)


def _flash_save(out, q, k, v, dropout_p=0.0, is_causal=False, attn_mask=None, scale=None):
    return (q, k, v, out[0], out[1], dropout_p, is_causal,
            None if attn_mask is None else attn_mask.detach(), scale)


def _flash_derivative(grads, q, k, v, out, lse, dropout_p, is_causal, attn_mask, scale):
    g = grads[0] if isinstance(grads, list) else grads
    if g is None:
        return (None,) * 7
    gq, gk, gv = _call(flash_attention_backward, g, q, k, v, out.detach(), lse.detach(),
                       dropout_p, is_causal, attn_mask, scale)
    return (gq, gk, gv, None, None, None, None)


def _backward_kernel(g, q, k, v, out, lse, dropout_p, is_causal, attn_mask=None, scale=None):
    _check(q, k, v, dropout_p, attn_mask)
    dt = q.dtype
    gw, qw, kw, vw, ow = _work(g), _work(q), _work(k), _work(v), _work(out)
    heads, kv_heads = q.shape[1], k.shape[1]
    factor = _factor(q.shape, scale)
    s = _scores(qw, kw, is_causal, attn_mask, scale)
    # The probabilities, rebuilt from the saved log-sum-exp (masked positions give exp(-inf)).
    p = np.exp(np.subtract(s, _work(lse)[..., None].astype(s.dtype, copy=False), out=s),
               out=s)
    gp = np.matmul(gw, _repeat_heads(vw, heads).swapaxes(-1, -2))
    delta = (gw * ow).sum(-1, keepdims=True)
    gs = np.multiply(p, np.subtract(gp, delta, out=gp), out=gp)  # (in place, as above)
    if dt in HALF:
        # PyTorch's kernel multiplies the probabilities and the score gradients into the
        # other operands in the input's type (its reduced-precision GEMMs, accumulating in
        # float32); the scale comes after.
        p, gs = p.astype(dt).astype(F32), gs.astype(dt).astype(F32)
    gq = np.matmul(gs, _repeat_heads(kw, heads)) * factor
    gk = np.matmul(gs.swapaxes(-1, -2), qw) * factor
    gv = np.matmul(p.swapaxes(-1, -2), gw)
    if kv_heads != heads:  # each shared key/value head sums the gradients of its group
        b = q.shape[0]
        gk = gk.reshape((b, kv_heads, -1) + gk.shape[2:]).sum(2)
        gv = gv.reshape((b, kv_heads, -1) + gv.shape[2:]).sum(2)
    return (gq.astype(dt, copy=False), gk.astype(dt, copy=False), gv.astype(dt, copy=False))


def _backward_decomposition(g, q, k, v, out, lse, dropout_p, is_causal, attn_mask=None,
                            scale=None):
    """The flash backward in fusegrad ops: probabilities rebuilt from the log-sum-exp."""
    _check(q, k, v, dropout_p, attn_mask)
    b, heads, kv_heads = q.shape[0], q.shape[1], k.shape[1]
    group = heads // kv_heads
    kr, vr = k, v
    if group != 1:
        kr = k.unsqueeze(2).expand(b, kv_heads, group, *k.shape[2:]).reshape(
            b, heads, *k.shape[2:])
        vr = v.unsqueeze(2).expand(b, kv_heads, group, *v.shape[2:]).reshape(
            b, heads, *v.shape[2:])
    factor = _factor(tuple(q.shape), scale)
    s = q.matmul(kr.transpose(-2, -1)) * factor
    if is_causal:
        s = s.where(q.new_ones(tuple(s.shape[-2:]), dtype=_dtype.bool_).tril(), -math.inf)
    if attn_mask is not None:
        s = s + attn_mask.to(s.dtype)
    p = (s - lse.unsqueeze(-1)).exp()
    gs = p * (g.matmul(vr.transpose(-2, -1)) - (g * out).sum([-1], True))
    gq = gs.matmul(kr) * factor
    gk = gs.transpose(-2, -1).matmul(q) * factor
    gv = p.transpose(-2, -1).matmul(g)
    if group != 1:  # each shared key/value head sums the gradients of its group
        gk = gk.reshape(b, kv_heads, group, *gk.shape[2:]).sum([2])
        gv = gv.reshape(b, kv_heads, group, *gv.shape[2:]).sum([2])
    return gq, gk, gv


def _backward_meta(g, q, k, v, out, lse, dropout_p, is_causal, attn_mask=None, scale=None):
    _check(q, k, v, dropout_p, attn_mask)
    return [Spec(tuple(t.shape), t.dtype) for t in (q, k, v)]


def _backward_not_implemented(grads, *saved):
    raise RuntimeError("derivative for aten::_scaled_dot_product_flash_attention_for_cpu_backward"
                       " is not implemented")


_backward_not_implemented.not_implemented = True

# (B, Hq, Hkv, L, S, E, is_causal, scale): plain, causal with L != S, grouped-query heads,
# an explicit scale, a single head of size 1.
_SHAPES = (
    (2, 3, 3, 5, 6, 4, False, None),
    (1, 2, 2, 6, 4, 3, True, None),
    (2, 4, 2, 3, 5, 4, False, 0.3),
    (1, 1, 1, 4, 4, 1, False, -0.7),
)


def _inputs(rng, dt, shape):
    b, hq, hk, length, source, e, _, _ = shape
    return (rand_array(rng, (b, hq, length, e), dt), rand_array(rng, (b, hk, source, e), dt),
            rand_array(rng, (b, hk, source, e), dt))


def _flash_samples(rng, dt):
    # Masks are not sample inputs: the oracle makes every float array require grad, which
    # PyTorch refuses for attn_mask; tests/test_nn_attention.py covers masks.
    return [Sample(_inputs(rng, dt, s) + (0.0, s[6], None, s[7]), name=str(s)) for s in _SHAPES]


def _backward_samples(rng, dt):
    samples = []
    for s in _SHAPES:
        q, k, v = _inputs(rng, dt, s)
        out, lse = _flash_kernel(q, k, v, 0.0, s[6], None, s[7])
        g = rand_array(rng, out.shape, dt)
        samples.append(Sample((g, q, k, v, out, np.ascontiguousarray(lse), 0.0, s[6], None,
                               s[7]), name=str(s)))
    return samples


def _lower_forward(v, *args, **kwargs):
    return v.attention(*args, **kwargs)


def _lower_backward(v, *args, **kwargs):
    return v.attention_backward(*args, **kwargs)


# Compiled graphs keep both ops whole (their decompositions would make every score row a
# tensor): the code generator runs its C attention kernels, or else these NumPy kernels.
_lower_forward.whole = _lower_backward.whole = True

flash_attention = register(
    "_scaled_dot_product_flash_attention_for_cpu", kernel=_flash_kernel, meta=_flash_meta,
    node="ScaledDotProductFlashAttentionForCpuBackward0", derivative=_flash_derivative,
    save=_flash_save, nondiff_outputs=(1,), nondiff_args=(5,), samples=_flash_samples,
    decomposition=_flash_decomposition, lowering=_lower_forward,
    public="_scaled_dot_product_flash_attention_for_cpu", tolerance={"float32": 1e-4},
    onnx=ox.attention)

flash_attention_backward = register(
    "_scaled_dot_product_flash_attention_for_cpu_backward", kernel=_backward_kernel,
    meta=_backward_meta, node="NotImplemented", derivative=_backward_not_implemented,
    nondiff_args=(8,), gradcheck=False, samples=_backward_samples,
    decomposition=_backward_decomposition, lowering=_lower_backward,
    public="_scaled_dot_product_flash_attention_for_cpu_backward", tolerance={"float32": 1e-4})


# ---------------------------------------------------------------- _safe_softmax


def _safe_softmax_kernel(a, dim, dtype=None):
    if a.dtype.kind != "f" and a.dtype not in HALF and dtype is None and \
            check_softmax_dtype(a, dim):
        return a.copy()
    out_dt = a.dtype if dtype is None else dtype.np
    x = _work(a.astype(out_dt, copy=False))
    if x.ndim == 0:
        return np.ones_like(x).astype(out_dt)
    axis = wrap_dims(dim, x.ndim)[0]
    top = np.max(x, axis=axis, keepdims=True) if x.size else x
    # A slice with every entry -inf (a query with no allowed key) gives zeros, not NaN.
    e = np.exp(x - np.where(np.isneginf(top), 0.0, top)) if x.size else x
    total = np.sum(e, axis=axis, keepdims=True)
    return (e / np.where(total == 0, 1.0, total)).astype(out_dt, copy=False)


def _safe_softmax_meta(a, dim, dtype=None):
    wrap_dims(dim, len(a.shape))
    if dtype is None:
        check_softmax_dtype(a, dim)
    return Spec(tuple(a.shape), a.dtype if dtype is None else dtype)


def _safe_softmax_samples(rng, dt):
    rows = rand_array(rng, (3, 4), dt)
    rows[1] = -np.inf  # a fully masked row
    rows[2, :2] = -np.inf
    return [Sample((rows, -1), name="masked rows"),
            Sample((rand_array(rng, (2, 3, 4), dt), 1), name="(2, 3, 4) dim=1"),
            Sample((rand_array(rng, (2, 5), dt), 0, _dtype.float64), name="dtype=float64")]


safe_softmax = register(
    "_safe_softmax", kernel=c_contiguous(_safe_softmax_kernel), meta=_safe_softmax_meta,
    node="SafeSoftmaxBackward0",
    derivative=lambda g, out, dim: (out * (g - (g * out).sum(dim, keepdim=True)), None, None),
    save=lambda out, a, dim, dtype=None: (out, dim), samples=_safe_softmax_samples,
    public="_safe_softmax",
    decomposition=lambda a, dim, dtype=None: _safe_probabilities(
        a if dtype is None else a.to(dtype), dim)[0], result_order="contiguous",
    onnx=ox.safe_softmax)
