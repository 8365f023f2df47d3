"""Loss ops PyTorch records as one node: smooth_l1_loss, huber_loss, soft_margin_loss,
multi_margin_loss and multilabel_margin_loss_forward (`SmoothL1LossBackward0`,
`HuberLossBackward0`, `SoftMarginLossBackward0`, `MultiMarginLossBackward0`,
`MultilabelMarginLossBackward0`). `reduction` is ATen's enum: 0 none, 1 mean, 2 sum.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from . import _onnx as ox
from ._util import (
    HALF,
    Spec,
    c_contiguous,
    dtype_of,
    half_formula,
    not_implemented_for,
    rand_array,
    size_str,
)
from .arithmetic import not_implemented_derivative
from .nn import (
    _call,
    _const,
    _loss_backward_samples,
    _loss_meta,
    _loss_samples,
    _reduce,
    _register_multi,
    _scale,
    _work,
    first_order_kernel,
    float_loss_dtype,
    float_loss_meta,
    loss_backward_meta,
    loss_difference,
    recording,
    reduced,
    sum_to_grad,
)
from .registry import Sample, register


def _result(loss: np.ndarray, reduction: int, dt) -> np.ndarray:
    return np.asarray(_reduce(loss, reduction)).astype(dt, copy=False)


# ---------------------------------------------------------------- smooth L1 and Huber


def _smooth_l1_kernel(x, t, reduction=1, beta=1.0):
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    dt = float_loss_dtype(x, t, "smooth_l1").np
    d = np.abs(_work(x) - _work(t))
    loss = d if beta == 0 else np.where(d < beta, 0.5 * d * d / max(beta, 1e-300),
                                        d - 0.5 * beta)
    return _result(loss, reduction, dt)


def _smooth_l1_derivative(g, x, t, reduction, beta):
    if recording():  # create_graph: PyTorch's op, the target's with its roles swapped
        return (_call(smooth_l1_loss_backward, g, x, t, reduction, beta),
                _call(smooth_l1_loss_backward, g, t, x, reduction, beta), None, None)
    # (contiguous, as PyTorch's kernel writes it, whatever the operands' layout)
    gx = _smooth_l1_first_order(g, x, t, reduction, beta).contiguous()
    return (gx, -gx, None, None)


def _smooth_l1_first_order(g, x, t, reduction, beta):
    norm = 1.0 / max(x.numel(), t.numel(), 1) if reduction == 1 else 1.0

    def formula(g, x, t):  # PyTorch's kernel: norm * d * g / beta inside, ±norm * g outside
        d = loss_difference(x, t)
        outside = d.sign() * (g * norm)
        # (a NaN difference is "inside", as PyTorch's kernel tests the two outsides)
        return outside if beta == 0 else ((d * norm) * g / beta).where(~(d.abs() >= beta),
                                                                        outside)

    # (computed in float32 for a half type and rounded once, as PyTorch's kernel does)
    return half_formula(formula, g, x, t)


def _smooth_l1_backward_derivative(gg, g, x, t, reduction, beta):
    n = max(x.numel(), t.numel(), 1)
    d = loss_difference(x, t)
    inside = ~(d.abs() >= beta)
    # the first derivative's slope: d / beta inside the quadratic part, sign(d) outside;
    # its own derivative in the input: 1 / beta inside, 0 outside
    slope = d.sign() if beta == 0 else (d / beta).where(inside, d.sign())
    gg_out = sum_to_grad(gg * slope, reduction)
    if beta == 0:
        gx = gg * 0
    else:
        gx = (gg * _scale(g, reduction, n) / beta).where(inside, gg.new_zeros(()))
    return (gg_out / n if reduction == 1 else gg_out, gx, -gx, None, None)


def _smooth_l1_decomposition(x, t, reduction=1, beta=1.0):
    d = (x - t).abs()
    if beta == 0:
        return reduced(d, reduction)
    return reduced((d * d * (0.5 / beta)).where(d < beta, d - 0.5 * beta), reduction)


def _huber_decomposition(x, t, reduction=1, delta=1.0):
    d = (x - t).abs()
    return reduced((d * d * 0.5).where(d < delta, (d - 0.5 * delta) * delta), reduction)


def _with_param(param):
    def samples(rng, dt):
        out = _loss_samples(rng, dt, (-2, 2))
        return [Sample(s.args + (param,), name=s.name) for s in out] + [
            Sample((rand_array(rng, (3, 4), dt), rand_array(rng, (3, 4), dt), 1, 0.25),
                   name="param 0.25")]

    return samples


smooth_l1_loss = register(
    "smooth_l1_loss", autocast="fp32", kernel=_smooth_l1_kernel, meta=float_loss_meta("smooth_l1"),
    node="SmoothL1LossBackward0",
    derivative=_smooth_l1_derivative,
    save=lambda out, x, t, reduction=1, beta=1.0: (x, t, reduction, beta),
    samples=_with_param(1.0), saved_names=("self", "target", "reduction", "beta"),
    decomposition=_smooth_l1_decomposition, result_order="operands")
smooth_l1_loss_backward = register(
    # (PyTorch's kernel writes into a contiguous zeros_like of the input, whatever its layout)
    "smooth_l1_loss_backward", kernel=c_contiguous(first_order_kernel(_smooth_l1_first_order)),
    meta=loss_backward_meta, node="SmoothL1LossBackwardBackward0",
    derivative=_smooth_l1_backward_derivative,
    save=lambda out, g, x, t, reduction, beta: (g, x, t, reduction, beta),
    samples=lambda rng, dt: _loss_backward_samples(_with_param(1.0)(rng, dt), rng, dt, -2),
    decomposition=_smooth_l1_first_order,
    saved_names=("grad_output", "self", "target", "reduction", "beta"),
    result_order="contiguous")


def _huber_kernel(x, t, reduction=1, delta=1.0):
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    float_loss_dtype(x, t, "huber")
    _huber_out_check(x, t)
    dt = x.dtype  # (the input's dtype, whatever the target's: PyTorch's result)
    d = _work(x) - _work(t)
    a = np.abs(d)
    loss = np.where(a < delta, 0.5 * d * d, delta * (a - 0.5 * delta))
    return _result(loss, reduction, dt)


def _huber_out_check(x, t) -> None:
    """Huber's result takes the input's dtype: a float result cannot go into an integer one."""
    dx, dt = dtype_of(x), _dtype.result_type(x, t)
    if dx.category != dt.category:
        raise RuntimeError(f"result type {dt.legacy} can't be cast to the desired output type "
                           f"{dx.legacy}")


def _huber_meta(x, t, *rest):
    float_loss_dtype(x, t, "huber")
    _huber_out_check(x, t)
    return Spec(_loss_meta(x, t, *rest).shape, dtype_of(x))


def _huber_derivative(g, x, t, reduction, delta):
    if recording():  # create_graph: PyTorch's op, the target's with its roles swapped
        return (_call(huber_loss_backward, g, x, t, reduction, delta),
                _call(huber_loss_backward, g, t, x, reduction, delta), None, None)
    # (contiguous, as PyTorch's kernel writes it, whatever the operands' layout)
    gx = _huber_first_order(g, x, t, reduction, delta).contiguous()
    return (gx, -gx, None, None)


def _huber_first_order(g, x, t, reduction, delta):
    return _scale(g, reduction, max(x.numel(), t.numel(), 1)) * \
        loss_difference(x, t).clamp(-delta, delta)


def _huber_backward_derivative(gg, g, x, t, reduction, delta):
    n = max(x.numel(), t.numel(), 1)
    d = loss_difference(x, t)
    gg_out = sum_to_grad(gg * d.clamp(-delta, delta), reduction)
    # (the clamp's slope: 1 from -delta to delta, ends included)
    inside = (d >= -delta) & (d <= delta)
    gx = (gg * _scale(g, reduction, n)).where(inside, gg.new_zeros(()))
    return (gg_out / n if reduction == 1 else gg_out, gx, -gx, None, None)


huber_loss = register(
    "huber_loss", autocast="fp32",
    kernel=_huber_kernel, meta=_huber_meta,
    node="HuberLossBackward0",
    derivative=_huber_derivative,
    save=lambda out, x, t, reduction=1, delta=1.0: (x, t, reduction, delta),
    samples=_with_param(1.0), saved_names=("self", "target", "reduction", "delta"),
    decomposition=_huber_decomposition, result_order="operands", onnx=ox.huber_loss)
huber_loss_backward = register(
    "huber_loss_backward", kernel=c_contiguous(first_order_kernel(_huber_first_order)),
    meta=loss_backward_meta, node="HuberLossBackwardBackward0",
    derivative=_huber_backward_derivative,
    save=lambda out, g, x, t, reduction, delta: (g, x, t, reduction, delta),
    samples=lambda rng, dt: _loss_backward_samples(_with_param(1.0)(rng, dt), rng, dt, -2),
    decomposition=_huber_first_order,
    saved_names=("grad_output", "self", "target", "reduction", "delta"),
    result_order="contiguous")

# ---------------------------------------------------------------- soft margin


def _soft_margin_kernel(x, t, reduction=1):
    xw = _work(x)
    z = -_work(t).astype(xw.dtype) * xw
    # (PyTorch's kernel: log1p(exp(-t x)), each step in the input's type, so infinite where
    # the exponential overflows it: a half type's from 11 on)
    with np.errstate(over="ignore"):
        if x.dtype in HALF:
            def r(v):
                return v.astype(x.dtype).astype(xw.dtype)

            loss = r(np.log1p(r(np.exp(r(z)))))
        else:
            loss = np.log1p(np.exp(z))
    return _result(loss, reduction, x.dtype)


def _soft_margin_derivative(g, x, t, reduction):
    if recording():  # create_graph: PyTorch's op, SoftMarginLossBackwardBackward0
        return (_call(soft_margin_loss_backward, g, x, t, reduction), None, None)
    return (_soft_margin_first_order(g, x, t, reduction), None, None)


def _soft_margin_first_order(g, x, t, reduction):
    # PyTorch's kernel: -t z / (1 + z) with z = exp(-t x), so an overflowing z gives NaN
    # (inf / inf) where a sigmoid would give 1 (a bool target: PyTorch's error for `-`)
    z = (-t * x).exp()
    norm = 1.0 / max(x.numel(), 1) if reduction == 1 else 1.0
    if not t.is_floating_point():  # (an integer target times a number would be float32)
        t = t.to(z.dtype)
    return -t * norm * z / (z + 1) * g


def _soft_margin_backward_derivative(gg, g, x, t, reduction):
    n = max(x.numel(), 1)
    s = (-t * x).sigmoid()
    gg_out = sum_to_grad(gg * -t * s, reduction)
    gx = gg * _scale(g, reduction, n) * t * t * s * (1 - s)
    return (gg_out / n if reduction == 1 else gg_out, gx, None, None)


def _soft_margin_decomposition(x, t, reduction=1):
    z = -t * x  # log(1 + exp(z)) as max(z, 0) + log1p(exp(-|z|))
    return reduced(z.clamp(min=0) + (-z.abs()).exp().log1p(), reduction)


def _soft_margin_samples(rng, dt):
    out = []
    for shape in ((3, 4), (5,), ()):
        for red in (0, 1, 2):
            sign = np.where(rng.random(shape) > 0.5, 1, -1).astype(np.int64)
            out.append(Sample((rand_array(rng, shape, dt), sign, red), name=f"{shape} {red}"))
    return out


soft_margin_loss = register(
    "soft_margin_loss", autocast="fp32", kernel=_soft_margin_kernel,
    meta=lambda x, t, reduction=1: Spec(tuple(x.shape) if reduction == 0 else (), x.dtype),
    node="SoftMarginLossBackward0", derivative=_soft_margin_derivative,
    save=lambda out, x, t, reduction=1: (x, t, reduction), samples=_soft_margin_samples,
    nondiff_args=(1,), saved_names=("self", "target", "reduction"),
    decomposition=_soft_margin_decomposition, result_order="operands")
soft_margin_loss_backward = register(
    "soft_margin_loss_backward", kernel=first_order_kernel(_soft_margin_first_order),
    meta=lambda g, x, t, reduction: Spec(tuple(x.shape), x.dtype),
    node="SoftMarginLossBackwardBackward0", derivative=_soft_margin_backward_derivative,
    save=lambda out, g, x, t, reduction: (g, x, t, reduction),
    samples=lambda rng, dt: _loss_backward_samples(_soft_margin_samples(rng, dt), rng, dt),
    nondiff_args=(2,), decomposition=_soft_margin_first_order,
    saved_names=("grad_output", "self", "target", "reduction"), result_order="operands")

# ---------------------------------------------------------------- multi margin


def _mm_check(x, t, p, weight):
    if p not in (1, 2):
        raise RuntimeError("only p == 1 and p == 2 supported")
    nd = len(x.shape)
    if nd > 2 or (nd == 2 and x.shape[1] == 0) or (nd == 1 and x.shape[0] == 0):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch "
                           f"size, but got: {size_str(x.shape)}")
    n = x.shape[0] if nd == 2 else 1
    c = x.shape[-1] if nd else 1
    if len(t.shape) > 1 or (t.shape[0] if t.shape else 1) != n:
        raise RuntimeError(f"multi_margin_loss: target tensor should be 1-D with size equal to "
                           f"the number of input samples (batch size). Expected target size "
                           f"[{n}], but got {size_str(t.shape)}. Input has shape "
                           f"{size_str(x.shape)}.")
    if weight is not None and (len(weight.shape) != 1 or weight.shape[0] != c):
        raise RuntimeError(f"inconsistent weight size, expected {c} but got "
                           f"{size_str(weight.shape)}")
    return n, c


def _mm_parts(x, t):
    """(x as (N, C), one-hot of the targets as (N, C)) for 1-D or 2-D `x`."""
    x2 = x.reshape(-1, x.shape[-1] if x.ndim else 1)
    t1 = np.asarray(t).reshape(-1)
    c = x2.shape[1]
    if ((t1 < 0) | (t1 >= c)).any():
        raise RuntimeError("target out of range")
    return x2, np.arange(c)[None, :] == t1[:, None]


def _mm_dtype_check(x, t, weight) -> None:
    """PyTorch's CPU kernel exists for float32 and float64 only; it reads the targets as
    int64 and the class weights in the input's dtype, refusing others."""
    d = dtype_of(x)
    if d is not _dtype.float32 and d is not _dtype.float64:
        raise not_implemented_for("multi_margin_loss_cpu_kernel", d)
    for arg, want in ((t, _dtype.int64), (weight, d)):
        if arg is not None and dtype_of(arg) is not want:
            raise RuntimeError(f"expected scalar type {want.legacy} but found "
                               f"{dtype_of(arg).legacy}")


def _mm_kernel(x, t, p=1, margin=1, weight=None, reduction=1):
    _mm_check(x, t, p, weight)
    if x.size:  # (an empty batch runs no kernel)
        _mm_dtype_check(x, t, weight)
    x2, onehot = _mm_parts(_work(x), t)
    c = x2.shape[1]
    # (the target's value picked, not summed with zeros: a NaN elsewhere stays there; and a
    # NaN margin term counts as no margin at all, as PyTorch's `z > 0` test skips it)
    picked = np.where(onehot, x2, 0).sum(1, keepdims=True)
    z = margin - picked + x2
    h = np.where((z > 0) & ~onehot, z, 0)
    if p == 2:
        h = h * h
    if weight is not None:
        h = h * _work(weight)[np.asarray(t).reshape(-1)][:, None]
    loss = h.sum(1) / c
    if x.ndim < 2 and reduction == 0:
        loss = loss.reshape(())
    return _result(loss, reduction, x.dtype)


def _mm_meta(x, t, p=1, margin=1, weight=None, reduction=1):
    n, _ = _mm_check(x, t, p, weight)
    if x.numel():
        _mm_dtype_check(x, t, weight)
    shape = () if reduction or len(x.shape) < 2 else (n,)
    return Spec(shape, x.dtype)


def _no_meta_backward(name: str):
    """PyTorch's error for a backward it has no meta kernel for (what a meta input's save
    keeps instead of the values the backward reads)."""
    from .._meta import no_meta_kernel

    raise no_meta_kernel(name)


def _mm_derivative(g, x, onehot, weight_t, p, margin, reduction, t=None, weight=None):
    if onehot is None:
        # No values (a meta tensor, or a graph being traced): PyTorch's backward op, which
        # refuses a meta tensor and gives a traced graph the gradient's shape (the graph
        # runs its kernel on the values).
        return (_call(multi_margin_loss_backward, g, x, t, p, margin, weight, reduction),
                None, None, None, None, None)
    if t is not None and recording():
        # create_graph: PyTorch's op, a NotImplemented node (no second derivative)
        return (_call(multi_margin_loss_backward, g, x, t, p, margin, weight, reduction),
                None, None, None, None, None)
    x2 = x.reshape(onehot.shape)
    c = onehot.shape[1]
    picked = x2.where(onehot > 0, x2.new_zeros(())).sum(1, keepdim=True)
    h = margin - picked + x2
    coef = (h > 0) * (1 - onehot)
    if p == 2:  # (selected, not multiplied: a NaN term takes no part, as in the value)
        coef = (h * 2).where(coef > 0, h.new_zeros(()))
    if weight_t is not None:
        coef = coef * weight_t
    coef = coef / c
    # (the target's entry alone takes the sum: an infinite one stays off the others)
    gx = coef - coef.sum(1, keepdim=True).where(onehot > 0, coef.new_zeros(()))
    if reduction == 0:
        g = g.reshape(-1, 1)
    elif reduction == 1:
        g = g / onehot.shape[0]
    return ((g * gx).reshape(x.shape), None, None, None, None, None)


def _mm_save(out, x, t, p=1, margin=1, weight=None, reduction=1):
    if x._data is None or t._data is None:  # meta: no targets to read (see _mm_derivative)
        return (x, None, None, p, margin, reduction, t, weight)
    onehot, wt = _mm_saved_arrays(x._data, t._data, weight)
    return (x, onehot, wt, p, margin, reduction, t, weight)


def _mm_saved_arrays(x, t, weight):
    """(one-hot of the targets, each sample's target weight) as constant tensors."""
    _, onehot = _mm_parts(x, t)
    wt = None
    if weight is not None:
        w = weight._data if hasattr(weight, "_data") else weight
        wt = _const(w[t.reshape(-1)][:, None])
    return _const(onehot.astype(x.dtype)), wt


def _mm_first_order(g, x, t, p, margin, weight, reduction):
    onehot, wt = _mm_saved_arrays(x._data, t._data, weight)
    return _mm_derivative(g, x, onehot, wt, p, margin, reduction)[0]


def _mm_samples(rng, dt):
    out = []
    for shape in ((4, 5), (5,)):
        n = shape[0] if len(shape) == 2 else 1
        t = rng.integers(0, shape[-1], size=(n,) if len(shape) == 2 else ())
        for p, margin, red in ((1, 1, 1), (2, 0.5, 0), (1, 2.0, 2)):
            out.append(Sample((rand_array(rng, shape, dt), np.asarray(t, np.int64), p, margin,
                               None, red), name=f"{shape} p={p} red={red}"))
    return out


multi_margin_loss = register(
    "multi_margin_loss", autocast="fp32",
    kernel=_mm_kernel, meta=_mm_meta, node="MultiMarginLossBackward0",
    derivative=_mm_derivative, save=_mm_save, samples=_mm_samples,
    nondiff_args=(1, 4),
    saved_names=("self", "", "", "p", "margin", "reduction", "target", "weight"),
    onnx=ox.multi_margin_loss)
# ATen's multi_margin_loss_backward has no derivative: a gradient taken with create_graph
# records its NotImplemented node, whose backward raises, as PyTorch's.
multi_margin_loss_backward = register(
    "multi_margin_loss_backward", kernel=first_order_kernel(_mm_first_order),
    # (PyTorch has no meta kernel for it, but its fake tensors trace it: a graph's input)
    meta=lambda g, x, *rest: (_no_meta_backward("multi_margin_loss_backward") if x.is_meta
                              else Spec(tuple(x.shape), x.dtype)), node="NotImplemented",
    derivative=not_implemented_derivative("multi_margin_loss_backward"),
    save=lambda out, *args: (), nondiff_args=(2, 5), optional_tensor_args=(5,),
    gradcheck=False,
    samples=lambda rng, dt: [
        Sample((rand_array(rng, (np.shape(s.args[0])[0],) if s.args[5] == 0 and
                           np.ndim(s.args[0]) == 2 else (), dt),) + tuple(s.args), name=s.name)
        for s in _mm_samples(rng, dt)])

# ---------------------------------------------------------------- multilabel margin


def _mlm_check(x, t):
    nd = len(x.shape)
    if nd > 2 or (nd == 2 and x.shape[1] == 0) or (nd == 1 and x.shape[0] == 0):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch "
                           f"size, but got: {size_str(x.shape)}")
    if tuple(t.shape) != tuple(x.shape):
        raise RuntimeError(f"inconsistent target size: {size_str(t.shape)} for input of "
                           f"size: {size_str(x.shape)}")
    if dtype_of(t).legacy != "Long":  # (the kernel reads the target as int64)
        raise RuntimeError(f"expected scalar type Long but found {dtype_of(t).legacy}")


def _mlm_masks(x, t):
    """(counts of each class among the listed targets, is_target) as (N, C) arrays."""
    t2 = np.asarray(t).reshape(-1, x.shape[-1] if x.ndim else 1)
    n, c = t2.shape
    # the targets of a row are its entries before the first -1
    listed = np.cumprod(t2 >= 0, axis=1).astype(bool)
    if (t2[listed] >= c).any():
        raise RuntimeError("multilabel_margin_loss: target out of range")
    counts = np.zeros((n, c))
    rows = np.repeat(np.arange(n)[:, None], c, axis=1)
    np.add.at(counts, (rows[listed], t2[listed]), 1)
    return counts, counts > 0


def _mlm_kernel(x, t, reduction=1):
    _mlm_check(x, t)
    xw = _work(x)
    x2 = xw.reshape(-1, xw.shape[-1] if xw.ndim else 1)
    counts, is_t = _mlm_masks(xw, t)
    c = x2.shape[1]
    margin = np.maximum(1 - x2[:, :, None] + x2[:, None, :], 0)
    loss = (margin * counts[:, :, None] * ~is_t[:, None, :]).sum((1, 2)) / c
    if x.ndim < 2 and reduction == 0:
        loss = loss.reshape(())
    return (_result(loss, reduction, x.dtype), is_t.reshape(t.shape).astype(x.dtype))


def _mlm_meta(x, t, reduction=1):
    _mlm_check(x, t)
    shape = () if reduction or len(x.shape) < 2 else (x.shape[0],)
    return (Spec(shape, x.dtype), Spec(tuple(t.shape), x.dtype))


def _mlm_derivative(grads, x, pairs, reduction, t=None, is_target=None):
    if pairs is None:
        if t is None or is_target is None:
            _no_meta_backward("multilabel_margin_loss_backward")
        # No values to read (a traced graph): the pairs from the target and is_target by
        # ops, as `_mlm_masks` finds them.
        pairs = _mlm_traced_pairs(t, is_target, x)
    g = grads[0] if isinstance(grads, (list, tuple)) else grads
    if t is not None and recording():
        # create_graph: PyTorch's op, a NotImplemented node (no second derivative)
        return (_call(multilabel_margin_loss_backward, g, x, t, reduction, is_target), None,
                None)
    x2 = x.reshape(pairs.shape[0], pairs.shape[1])
    active = ((1 - x2.unsqueeze(2) + x2.unsqueeze(1)) > 0) * pairs
    gx = (active.sum(1) - active.sum(2)) / pairs.shape[1]
    if reduction == 0:
        g = g.reshape(-1, 1)
    elif reduction == 1:
        g = g / pairs.shape[0]
    return ((g * gx).reshape(x.shape), None, None)


def _mlm_save(out, x, t, reduction=1):
    if x._data is None or t._data is None:  # no targets to read (see _mlm_derivative)
        return (x, None, reduction, t, out[1])
    return (x, _mlm_pairs(x._data, t._data), reduction, t, out[1])


def _mlm_traced_pairs(t, is_target, x):
    """`_mlm_pairs` by tensor ops on target `t` and the forward's `is_target`: (N, C, C),
    entry [n, j, i] the count of class j among row n's listed targets (those before its
    first -1) where class i is not one of them."""
    c = x.shape[-1] if x.dim() else 1
    t2 = t.reshape(-1, c)
    listed = (t2 >= 0).cumprod(1).to(x.dtype)
    counts = x.new_zeros(tuple(t2.shape)).scatter_add(1, t2.clamp(min=0), listed)
    return counts.unsqueeze(2) * (1 - is_target.reshape(-1, c)).unsqueeze(1)


def _mlm_pairs(x, t):
    counts, is_t = _mlm_masks(x, t)
    pairs = counts[:, :, None] * ~is_t[:, None, :]
    return _const(pairs.astype(x.dtype))


def _mlm_first_order(g, x, t, reduction, is_target):
    return _mlm_derivative(g, x, _mlm_pairs(x._data, t._data), reduction)[0]


def _mlm_samples(rng, dt):
    t = np.array([[3, 0, -1, 1, 1], [1, 2, 4, 0, 3], [-1, 0, 1, 2, 3], [2, 2, -1, 0, 0]])
    return [Sample((rand_array(rng, (4, 5), dt, (-1, 1)), t, red), name=f"2-d red={red}")
            for red in (0, 1, 2)] + [
        Sample((rand_array(rng, (5,), dt, (-1, 1)), t[0], 0), name="1-d")]


multilabel_margin_loss = _register_multi(
    "multilabel_margin_loss_forward", autocast="fp32", kernel=_mlm_kernel, meta=_mlm_meta,
    node="MultilabelMarginLossBackward0", derivative=_mlm_derivative, save=_mlm_save,
    samples=_mlm_samples, nondiff_outputs=(1,), public="multilabel_margin_loss",
    saved_names=("self", "", "reduction", "target", "is_target"))
multilabel_margin_loss_backward = register(
    "multilabel_margin_loss_backward", kernel=first_order_kernel(_mlm_first_order),
    meta=lambda g, x, *rest: Spec(tuple(x.shape), x.dtype), node="NotImplemented",
    derivative=not_implemented_derivative("multilabel_margin_loss_backward"),
    save=lambda out, *args: (), nondiff_args=(2, 4), gradcheck=False,
    samples=lambda rng, dt: [
        Sample((rand_array(rng, (np.shape(s.args[0])[0],) if s.args[2] == 0 and
                           np.ndim(s.args[0]) == 2 else (), dt),) + tuple(s.args) +
               (_mlm_kernel(*s.args)[1],), name=s.name) for s in _mlm_samples(rng, dt)])

# ---------------------------------------------------------------- CTC


def _ctc_targets(targets, target_lengths, n):
    """Each sample's label sequence, from padded (N, S) or concatenated 1-D targets."""
    t = np.asarray(targets).astype(np.int64)
    out, pos = [], 0
    for b in range(n):
        k = int(target_lengths[b])
        if t.ndim == 2:
            out.append(t[b, :k])
        else:
            out.append(t[pos:pos + k])
            pos += k
    return out


def _extended(labels, blank):
    ext = np.full(2 * len(labels) + 1, blank, np.int64)
    ext[1::2] = labels
    return ext


def _skip_allowed(ext, blank):
    """Where the path may skip from s - 2 to s: PyTorch's rule is a label position (odd s)
    whose label differs from the one before, even when that label is the blank."""
    ok = np.zeros(len(ext), bool)
    ok[3::2] = ext[3::2] != ext[1:-2:2]
    return ok


def _lse(*xs):
    m = np.maximum.reduce(xs)
    safe = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):
        return safe + np.log(sum(np.exp(x - safe) for x in xs))


def _ctc_alpha(lp, ext, blank, length):
    """log alpha (T_b, 2S+1) of one sample; lp is its (T, C) log-probabilities."""
    s_len = len(ext)
    alpha = np.full((length, s_len), -np.inf)
    skip = _skip_allowed(ext, blank)
    if length == 0:
        return alpha
    alpha[0, 0] = lp[0, blank]
    if s_len > 1:
        alpha[0, 1] = lp[0, ext[1]]
    for t in range(1, length):
        prev = alpha[t - 1]
        one = np.full(s_len, -np.inf)
        one[1:] = prev[:-1]
        two = np.full(s_len, -np.inf)
        two[2:] = np.where(skip[2:], prev[:-2], -np.inf)
        alpha[t] = _lse(prev, one, two) + lp[t, ext]
    return alpha


def _ctc_beta(lp, ext, blank, length):
    s_len = len(ext)
    beta = np.full((length, s_len), -np.inf)
    skip = _skip_allowed(ext, blank)
    if length == 0:
        return beta
    beta[length - 1, s_len - 1] = lp[length - 1, blank]
    if s_len > 1:
        beta[length - 1, s_len - 2] = lp[length - 1, ext[s_len - 2]]
    for t in range(length - 2, -1, -1):
        nxt = beta[t + 1]
        one = np.full(s_len, -np.inf)
        one[:-1] = nxt[1:]
        two = np.full(s_len, -np.inf)
        two[:-2] = np.where(skip[2:], nxt[2:], -np.inf)
        beta[t] = _lse(nxt, one, two) + lp[t, ext]
    return beta


def _ctc_check(lp, targets, input_lengths, target_lengths, blank):
    """PyTorch's argument checks of `_ctc_loss`, in its order and words."""
    where = " (while checking arguments for ctc_loss_allocate_outputs)"
    if len(lp.shape) != 3:
        raise RuntimeError(f"Expected 3-dimensional tensor, but got {len(lp.shape)}-dimensional "
                           f"tensor for argument #1 'log_probs'{where}")
    # Targets are padded (N, S) or concatenated (sum of lengths,): any other rank is refused
    # before the values are read.
    if len(targets.shape) not in (1, 2):
        raise RuntimeError(f"Expected 1 to 2 dimensions, but got {len(targets.shape)}-"
                           f"dimensional tensor for argument #2 'targets'{where}")
    t_max, n, c = lp.shape
    if not 0 <= blank < c:
        raise RuntimeError("blank must be in label range")
    if len(input_lengths) != n:
        raise RuntimeError(f"input_lengths must be of size batch_size, but got "
                           f"{len(input_lengths)}")
    if len(target_lengths) != n:
        raise RuntimeError(f"target_lengths must be of size batch_size, but got "
                           f"{len(target_lengths)}")
    for tl in target_lengths:
        if tl < 0:
            raise RuntimeError(f"Expected target_lengths to have value at least 0, but got "
                               f"value {tl}{where}")
    shape = tuple(targets.shape)
    if len(shape) == 1:
        total = sum(int(v) for v in target_lengths)
        if shape[0] != total:
            raise RuntimeError(f"Expected tensor to have size {total} at dimension 0, but got "
                               f"size {shape[0]} for argument #2 'targets'{where}")
    else:
        if shape[0] != n:
            raise RuntimeError(f"Expected tensor to have size {n} at dimension 0, but got "
                               f"size {shape[0]} for argument #2 'targets'{where}")
        longest = max([int(v) for v in target_lengths] + [0])
        if shape[1] < longest:
            raise RuntimeError(f"Expected tensor to have size at least {longest} at dimension "
                               f"1, but got size {shape[1]} for argument #2 'targets'{where}")
    for il in input_lengths:
        if il < 0:
            raise RuntimeError(f"Expected input_lengths to have value at least 0, but got "
                               f"value {il}{where}")
        if il > t_max:
            raise RuntimeError(f"Expected input_lengths to have value at most {t_max}, but "
                               f"got value {il}{where}")


def _ctc_kernel(lp, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    _ctc_check(lp, targets, input_lengths, target_lengths, blank)
    x = _work(lp).astype(np.float64)
    t_max, n = x.shape[:2]
    labels = _ctc_targets(targets, target_lengths, n)
    s_max = max([len(v) for v in labels] + [0])
    log_alpha = np.full((n, t_max, 2 * s_max + 1), -np.inf)
    nll = np.empty(n)
    for b in range(n):
        ext = _extended(labels[b], blank)
        length = int(input_lengths[b])
        alpha = _ctc_alpha(x[:, b], ext, blank, length)
        log_alpha[b, :length, :len(ext)] = alpha
        if length == 0:  # only an empty target has a path through no frames
            nll[b] = -0.0 if len(ext) == 1 else np.inf
        elif len(ext) == 1:
            nll[b] = -alpha[length - 1, 0]
        else:
            nll[b] = -_lse(alpha[length - 1, -1], alpha[length - 1, -2])
    # zero_infinity zeroes only the gradient here; ctc_loss zeroes the value after the op
    return nll.astype(lp.dtype), log_alpha.astype(lp.dtype)


def _ctc_meta(lp, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    _ctc_check(lp, targets, input_lengths, target_lengths, blank)
    t_max, n = lp.shape[:2]
    s_max = max([int(v) for v in target_lengths] + [0])
    return (Spec((n,), lp.dtype), Spec((n, t_max, 2 * s_max + 1), lp.dtype))


def _ctc_backward_kernel(grad, lp, targets, input_lengths, target_lengths, nll, log_alpha,
                         blank, zero_infinity=False):
    x = _work(lp).astype(np.float64)
    t_max, n, c = x.shape
    labels = _ctc_targets(targets, target_lengths, n)
    out = np.zeros_like(x)
    g = np.broadcast_to(np.asarray(grad, np.float64), (n,))
    for b in range(n):
        length = int(input_lengths[b])
        loss = float(nll[b])
        if zero_infinity and np.isinf(loss) or length == 0:
            continue
        ext = _extended(labels[b], blank)
        alpha = np.asarray(log_alpha[b, :length, :len(ext)], np.float64)
        beta = _ctc_beta(x[:, b], ext, blank, length)
        ab = alpha + beta
        if len(ext) > 1 and ext[-2] == blank:
            # PyTorch's gradient leaves out the path ending in the final blank at the last
            # frame when the target's last label is the blank itself (its value does not).
            ab[length - 1, -1] = -np.inf
        lcab = np.full((length, c), -np.inf)
        for s, lab in enumerate(ext):
            lcab[:, lab] = _lse(lcab[:, lab], ab[:, s])
        lpb = x[:length, b]
        out[:length, b] = (np.exp(lpb) - np.exp(lcab + loss - lpb)) * g[b]
    return out.astype(lp.dtype)


def _ctc_samples(rng, dt):
    t_max, n, c = 6, 2, 4
    lp = rng.standard_normal((t_max, n, c))
    lp = (lp - np.log(np.exp(lp).sum(-1, keepdims=True))).astype(dt)
    # Equal lengths across the batch: PyTorch leaves the log_alpha entries past a sample's
    # lengths uninitialised, so only full-length samples can be compared.
    padded = np.array([[1, 2, 2], [3, 1, 1]])
    return [Sample((lp, padded, [6, 6], [3, 3], 0, False), name="padded"),
            Sample((lp, np.array([1, 2, 3, 3]), [6, 6], [2, 2], 0, False), name="1-d"),
            Sample((lp, np.array([[1, 3, 0], [3, 1, 1]]), [6, 6], [3, 3], 2, False),
                   name="blank 2"),
            Sample((lp, np.array([[1, 1, 1, 1]]).repeat(2, 0), [6, 6], [4, 4], 0, True),
                   name="zero_infinity")]


def _ctc_double_backward(*args):
    raise RuntimeError("derivative for aten::_ctc_loss_backward is not implemented")


# PyTorch gives the gradient a node whose own backward raises; so does fusegrad.
ctc_loss_backward = register(
    "_ctc_loss_backward", kernel=c_contiguous(_ctc_backward_kernel), node="NotImplemented",
    derivative=_ctc_double_backward, save=lambda out, *args: (), gradcheck=False,
    meta=lambda grad, lp, *rest: (_no_meta_backward("_ctc_loss_backward") if lp.is_meta
                                  else Spec(tuple(lp.shape), lp.dtype)),
    samples=lambda rng, dt: [
        Sample((np.ones(2, dt), s.args[0], s.args[1], s.args[2], s.args[3],
                *_ctc_kernel(*s.args), s.args[4], s.args[5]), name=s.name)
        for s in _ctc_samples(rng, dt)])
ctc_loss = _register_multi(
    "_ctc_loss", kernel=_ctc_kernel, meta=_ctc_meta, node="CtcLossBackward0",
    derivative=lambda grads, lp, targets, il, tl, nll, log_alpha, blank, zi: (
        _call(ctc_loss_backward, grads[0] if isinstance(grads, (list, tuple)) else grads, lp,
              targets, il, tl, nll, log_alpha, blank, zi), None, None, None, None, None),
    save=lambda out, lp, targets, il, tl, blank=0, zi=False: (
        lp, targets, list(il), list(tl), out[0].detach(), out[1], blank, zi),
    # The gradient is PyTorch's: taken through the log_softmax that made log_probs, so it is
    # not the plain derivative gradcheck would measure.
    samples=_ctc_samples, nondiff_outputs=(1,), public="ctc_loss", gradcheck=False,
    saved_names=("log_probs", "targets", "input_lengths", "target_lengths", "result0",
                 "result1", "blank", "zero_infinity"))
