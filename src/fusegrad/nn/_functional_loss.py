"""The losses of `torch.nn.functional` beyond nll/mse/bce: each is either one registry op
(smooth_l1, huber, soft_margin, multi_margin, multilabel_margin) or composed of the ops
PyTorch's own composite records, in the same order, so graphs carry PyTorch's node names.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _dtype
from .._autocast import composite
from .._dispatch import call
from .._fake import DataDependentOutputError, FakeTensor, FakeTensorMode
from .._functions._args import int_parameter
from .._tensor import Tensor
from .._thread_state import active as _active
from .._thread_state import local as _local
from .._torch_function import warning_stacklevel as _warning_stacklevel
from ..autograd.grad_mode import is_grad_enabled, no_grad
from ..ops import loss as LS
from ..ops import nn as N
from ..ops import scalar as SC
from ..ops import special as SP
from ..ops.nn import REDUCTION_ENUM
from ._reduction import legacy_get_string

_EPS = 1e-12  # cosine_embedding_loss's guard against a zero norm


def _reduction(size_average, reduce, reduction: str, extra: tuple = ()) -> str:
    """The reduction string, honouring the deprecated `size_average`/`reduce` flags."""
    if size_average is None and reduce is None:
        if reduction not in REDUCTION_ENUM and reduction not in extra:
            raise ValueError(f"{reduction} is not a valid value for reduction")
        return reduction
    # (`torch.nn._reduction`'s reading of the flags; the warning names the caller's line)
    result = legacy_get_string(size_average, reduce, emit_warning=False)
    warnings.warn("size_average and reduce args will be deprecated, please use reduction="
                  f"'{result}' instead.", UserWarning, stacklevel=_warning_stacklevel(3))
    return result


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _broadcast_pair(input: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    if tuple(target.shape) == tuple(input.shape):
        return input, target
    warnings.warn(
        f"Using a target size ({target.shape}) that is different to the input size "
        f"({input.shape}). This will likely lead to incorrect results due to broadcasting. "
        "Please ensure they have the same size.", UserWarning, stacklevel=_warning_stacklevel(3))
    from ..ops._util import broadcast_shapes

    shape = broadcast_shapes(tuple(input.shape), tuple(target.shape))
    return input.expand(shape), target.expand(shape)


def _not_differentiable(fn: str, arg: str, t: Tensor | None) -> None:
    """PyTorch's error for an argument ATen does not differentiate that requires grad while
    grad mode is on."""
    if t is not None and t.requires_grad and is_grad_enabled():
        raise RuntimeError(f"The function '{fn}' is not differentiable with respect to "
                           f"argument '{arg}'. This input cannot have requires_grad True.")


def smooth_l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                   reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """Quadratic below `beta`, linear above (one `smooth_l1_loss`; beta 0 is the L1 loss)."""
    reduction = _reduction(size_average, reduce, reduction)
    if beta == 0.0:
        from .functional import l1_loss

        return l1_loss(input, target, reduction=reduction)
    input, target = _broadcast_pair(input, target)
    return call(LS.smooth_l1_loss, input, target, REDUCTION_ENUM[reduction], float(beta))


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """0.5 d**2 where |d| < delta, else delta (|d| - delta / 2), with d = input - target."""
    if reduction not in REDUCTION_ENUM:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    input, target = _broadcast_pair(input, target)
    if weight is None:
        return call(LS.huber_loss, input, target, REDUCTION_ENUM[reduction], float(delta))
    loss = call(LS.huber_loss, input, target, 0, float(delta)) * weight
    return _reduce(loss, reduction)


@composite("fp32")
def kl_div(input: Tensor, target: Tensor, size_average=None, reduce=None,
           reduction: str = "mean", log_target: bool = False) -> Tensor:
    """KL divergence of `target` from log-probabilities `input` (xlogy(t, t) - t * input)."""
    reduction = _reduction(size_average, reduce, reduction, ("batchmean",))
    if isinstance(input, Tensor) and isinstance(target, Tensor) and (
            not (input.is_floating_point() or input.is_complex())
            or not (target.is_floating_point() or target.is_complex())):
        raise RuntimeError("kl_div: Integral inputs not supported.")
    if reduction == "mean":
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the support "
            "size.'batchmean' divides only by the batch size, and aligns with the KL div math "
            "definition.'mean' will be changed to behave the same as 'batchmean' in the next "
            "major release.", UserWarning, stacklevel=_warning_stacklevel(2))
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = call(SP.xlogy, target, target) - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.dim() else loss.sum()
    return _reduce(loss, reduction)


def soft_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """log(1 + exp(-target * input)), averaged."""
    reduction = _reduction(size_average, reduce, reduction)
    _not_differentiable("soft_margin_loss", "target", target)
    input, target = _broadcast_pair(input, target)
    return call(LS.soft_margin_loss, input, target, REDUCTION_ENUM[reduction])


@composite("fp32")
def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """max(0, -target * (input1 - input2) + margin)."""
    reduction = _reduction(size_average, reduce, reduction)
    if not input1.dim() == input2.dim() == target.dim():
        raise RuntimeError(
            f"margin_ranking_loss : All input tensors should have same dimension but got "
            f"sizes: input1: {input1.shape}, input2: {input2.shape}, target: {target.shape} ")
    raw = call(SC.add_scalar, -target * (input1 - input2), margin)
    return _reduce(call(SC.clamp_min, raw, 0), reduction)


@composite("fp32")
def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,
                         size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """input where target is 1, max(0, margin - input) where it is -1."""
    reduction = _reduction(size_average, reduce, reduction)
    zeros = input.new_zeros(())
    clamped = call(SC.clamp_min, input.new_full((), margin) - input, 0)
    loss = clamped.where(target != 1, zeros) + input.where(target != -1, zeros)
    return _reduce(loss, reduction)


@composite("fp32")
def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where it is -1."""
    reduction = _reduction(size_average, reduce, reduction)
    # PyTorch's checks: the target's rank fixes the inputs' (one less)
    t_dim = target.dim()
    if t_dim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if input1.dim() != t_dim + 1 or input2.dim() != t_dim + 1:
        raise RuntimeError(f"{t_dim}D target tensor expects {t_dim + 1}D input tensors, "
                           f"but found inputs with sizes {list(input1.shape)} and "
                           f"{list(input2.shape)}.")
    d = t_dim
    prod = (input1 * input2).sum(d)
    mag1 = call(SC.add_scalar, (input1 * input1).sum(d), _EPS)
    mag2 = call(SC.add_scalar, (input2 * input2).sum(d), _EPS)
    cos = prod / (mag1 * mag2).sqrt()
    zeros = cos.new_zeros(())
    pos = cos.new_ones(()) - cos
    neg = call(SC.clamp_min, call(SC.sub_scalar, cos, margin), 0)
    loss = pos.where(target == 1, zeros) + neg.where(target == -1, zeros)
    return _reduce(loss, reduction)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """||x1 - x2 + eps||_p over the last dim (one legacy `norm`, NormBackward1)."""
    dim = max(x1.dim(), x2.dim()) - 1
    return call(SP.norm_dim, call(SC.add_scalar, x1 - x2, eps), p, [max(dim, 0)], keepdim)


@composite("fp32")
def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor,
                        margin: float = 1.0, p: float = 2, eps: float = 1e-6,
                        swap: bool = False, size_average=None, reduce=None,
                        reduction: str = "mean") -> Tensor:
    """max(0, d(a, p) - d(a, n) + margin) with d the pairwise p-norm distance."""
    reduction = _reduction(size_average, reduce, reduction)
    dims = (anchor.dim(), positive.dim(), negative.dim())
    if len(set(dims)) != 1:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have "
                           f"the same number of dimensions, but got: anchor {dims[0]}D, "
                           f"positive {dims[1]}D, and negative {dims[2]}D inputs")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = d_neg.minimum(pairwise_distance(positive, negative, p, eps))
    loss = call(SC.clamp_min, call(SC.add_scalar, d_pos, margin) - d_neg, 0)
    return _reduce(loss, reduction)


@composite("fp32")
def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False,
                     size_average=None, eps: float = 1e-8, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """Poisson negative log-likelihood of `target` under rate exp(input) (or input)."""
    reduction = _reduction(size_average, reduce, reduction)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * call(SC.add_scalar, input, eps).log()
    if full:
        t = target
        stirling = t * t.log() - t + call(SC.mul_scalar, call(SC.mul_scalar, t, 2 * math.pi).log(),
                                                0.5)
        loss = loss + stirling.masked_fill(t <= 1, 0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input: Tensor, target: Tensor, var: Tensor | float, full: bool = False,
                      eps: float = 1e-6, reduction: str = "mean") -> Tensor:
    """0.5 (log(var) + (input - target)**2 / var), var clamped below by eps."""
    # The values are checked first, as PyTorch checks them: a meta var has none to read
    # (its `bool` raises PyTorch's error), a number is checked before it becomes a tensor.
    if not isinstance(var, Tensor):
        if float(var) < 0:
            raise ValueError("var has negative entry/entries")
        var = input.new_full(tuple(input.shape), float(var))
    elif bool((var < 0).any() if var.is_meta else (var._data < 0).any()):
        raise ValueError("var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        # otherwise var may differ from input in one dimension, where it has size 1
        elif not (input.dim() == var.dim() and sum(
                v for i, v in zip(input.shape, var.shape) if i != v) == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in REDUCTION_ENUM:
        raise ValueError(reduction + " is not valid")
    var = var.clone()
    with no_grad():
        var.clamp_(min=eps)
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0,
                      weight: Tensor | None = None, size_average=None, reduce=None,
                      reduction: str = "mean") -> Tensor:
    """Multi-class hinge loss: sum over j != y of max(0, margin - x[y] + x[j])**p / C."""
    reduction = _reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    _not_differentiable("multi_margin_loss", "weight", weight)
    return call(LS.multi_margin_loss, input, target, p, margin, weight,
                REDUCTION_ENUM[reduction])


@composite("fp32")
def multilabel_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                           reduction: str = "mean") -> Tensor:
    """Hinge loss between each listed target class and every class not listed."""
    reduction = _reduction(size_average, reduce, reduction)
    return call(LS.multilabel_margin_loss, input, target, REDUCTION_ENUM[reduction])[0]


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                size_average=None, reduce=None,
                                reduction: str = "mean") -> Tensor:
    """Per-class binary cross entropy of logits, averaged over classes."""
    reduction = _reduction(size_average, reduce, reduction)
    from ._functional_activation import logsigmoid

    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.dim() - 1
    loss = loss.sum(class_dim) / input.shape[class_dim]
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _lengths(x) -> list:
    """The lengths `ctc_loss` was given (a tensor, a sequence or an int) as ints."""
    if isinstance(x, Tensor):
        if x.__class__ is not Tensor and isinstance(x, FakeTensor) or \
                _active.modes and any(isinstance(m, FakeTensorMode) for m in _local.modes):
            # The loss's sizes follow the lengths' values, which a traced call does not have
            # (under a fake mode a tensor made in the traced code is an example only):
            # PyTorch's overload taking length tensors is a dynamic-shape operator, so
            # capture breaks the graph here and AOT autograd never meets it.
            raise DataDependentOutputError(
                "ctc_loss given its lengths as tensors reads their values (aten._ctc_loss."
                "Tensor's output shape depends on input Tensor data)")
        return [int(v) for v in np.asarray(x._data).reshape(-1)]
    if isinstance(x, (int, np.integer)):
        return [int(x)]
    return [int(v) for v in x]


@composite("fp32")
def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths,
             blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """Connectionist temporal classification loss of (T, N, C) log-probabilities (one
    `_ctc_loss`); "mean" divides each sample's loss by its target length first."""
    if reduction not in REDUCTION_ENUM:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    meta = log_probs.is_meta
    if meta and isinstance(input_lengths, Tensor) and isinstance(target_lengths, Tensor):
        # PyTorch's overload taking lengths as tensors reads them: it has no meta kernel
        from .._meta import no_meta_kernel

        raise no_meta_kernel("_ctc_loss.Tensor")
    il, tl = _lengths(input_lengths), _lengths(target_lengths)
    # PyTorch adds the batch dimension to any log_probs that is not 3-D (its error then
    # quotes the rank plus one); only 2-D ones get through its checks. The targets stay as
    # given: 1-D ones are read as concatenated, so their length must be the target length.
    unbatched = log_probs.dim() != 3
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
    res = call(LS.ctc_loss, log_probs, targets, il, tl, blank, bool(zero_infinity))[0]
    if zero_infinity:
        res = res.new_zeros(()).where(res.detach().isinf(), res)
    if reduction == "mean":
        # (by a factory, so that a traced graph holds the lengths as its constant; on the
        # meta device the tensor is made there, as PyTorch's)
        lengths = res.new_tensor([max(v, 1) for v in tl])
        return (res / lengths).mean()
    if reduction == "sum":
        return res.sum()
    return res.squeeze(0) if unbatched else res


@composite("fp32")
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean") -> Tensor:
    """Negative log-likelihood of log-probabilities `input` (N, C, ...) at class `target`."""
    reduction = _reduction(size_average, reduce, reduction)
    if ignore_index.__class__ is not int:  # (PyTorch's C function takes it by position)
        int_parameter(ignore_index, "nll_loss_nd", "ignore_index", 5)
    return _nll(input, target, weight, REDUCTION_ENUM[reduction], ignore_index)


def _nll(input, target, weight, red: int, ignore_index: int) -> Tensor:
    """`nll_loss` with its reduction read (`red`, the enum), which `cross_entropy` calls as
    PyTorch's calls its kernel: not through the public function (nor its protocol)."""
    dim = input.dim()
    if dim < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {dim})")
    if dim == 1 and target.dim() == 1 and target.dtype in (_dtype.int64, _dtype.uint8):
        # One sample's classes with its index in a one-element target (other target
        # dtypes meet the kernel's dtype error first)
        if target.shape[0] != 1:
            raise ValueError(f"For 1D input, 1D target must have size 1, but got target size: "
                             f"{target.shape[0]}")
        target = target.squeeze(0)
    if dim != 1 and input.shape[0] != target.shape[0]:
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target "
                         f"batch_size ({target.shape[0]}).")
    _not_differentiable(
        "nll_loss_forward" if dim <= 2 else "nll_loss2d_forward", "weight", weight)
    if dim <= 2:
        return call(N.nll_loss, input, target, weight, red, ignore_index)[0]
    if dim == 4:
        return call(N.nll_loss2d, input, target, weight, red, ignore_index)[0]
    n, c = input.shape[:2]
    out_size = (n,) + tuple(input.shape[2:])
    if tuple(target.shape[1:]) != tuple(input.shape[2:]):
        raise RuntimeError(f"Expected target size {list(out_size)}, got {list(target.shape)}")
    # (the positions counted out: an empty batch leaves -1 ambiguous)
    x = input.contiguous().view(n, c, 1, math.prod(input.shape[2:]))
    t = target.contiguous().view(n, 1, math.prod(target.shape[1:]))
    out = call(N.nll_loss2d, x, t, weight, red, ignore_index)[0]
    return out.view(out_size) if red == 0 else out


def _classes(input: Tensor, cdim: int) -> tuple[int, list]:
    """The number of classes (`input`'s size at `cdim`) and the shape a class weight is
    viewed as to broadcast over `input`."""
    c = input.shape[cdim]
    wshape = [1] * input.dim()
    wshape[cdim] = c
    return c, wshape


@composite("fp32")
def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  size_average=None, ignore_index: int = -100, reduce=None,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """log_softmax over classes (dim 1, or 0 for a single sample) then the NLL; `target`
    holds class indices or class probabilities. Label smoothing is composed as PyTorch
    composes it (masked_fill, then the two terms scaled by `mul.Scalar`)."""
    reduction = _reduction(size_average, reduce, reduction)
    if ignore_index.__class__ is not int:  # (PyTorch's C function takes it by position)
        int_parameter(ignore_index, "cross_entropy_loss", "ignore_index", 5)
    # PyTorch refuses only a value above 1: a negative (or NaN) one smooths nothing.
    if label_smoothing > 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: "
                           f"{label_smoothing}")
    dim = input.dim()
    cdim = 0 if dim == 1 else 1
    logp = input.log_softmax(cdim)
    if tuple(target.shape) == tuple(input.shape):
        # Class probabilities; a float target of another shape is taken as class indices
        # (nll_loss then names its dtype).
        if not target.is_floating_point():
            raise RuntimeError("Expected floating point type for target with class "
                               f"probabilities, got {target.dtype.legacy}")
        c, wshape = _classes(input, cdim)
        if weight is not None and (weight.dim() != 1 or weight.numel() != c):
            raise RuntimeError(f"cross_entropy: weight tensor should be defined either for all "
                               f"{c} classes or no classes but got weight tensor of shape: "
                               f"{list(weight.shape)}")
        if ignore_index >= 0:
            raise RuntimeError("ignore_index is not supported for floating point target")
        if label_smoothing > 0:
            target = target * (1 - label_smoothing) + label_smoothing / c
        prod = logp * target
        if weight is not None:
            prod = prod * weight.view(wshape)
        if reduction == "none":
            return -prod.sum(cdim)
        if reduction == "sum":
            return -prod.sum()
        if input.numel() == 0:  # (PyTorch's empty mean: NaN, negated last)
            return -call(SC.div_scalar, prod.sum(), 0)
        return call(SC.div_scalar, -prod.sum(), input.numel() // max(c, 1))
    nll = _nll(logp, target, weight, REDUCTION_ENUM[reduction], ignore_index)
    if not label_smoothing > 0:  # (NaN included, as PyTorch)
        return nll
    c, wshape = _classes(input, cdim)
    # The mask and mean's denominator are computed by ops on the target (no gradient: a
    # target has none, a weight cannot require one), not read off its values: a traced
    # program (AOT autograd) computes them from each call's target.
    ignored = target == ignore_index
    terms = logp * weight.view(wshape) if weight is not None else logp
    smooth = (-terms.sum(cdim)).masked_fill(ignored, 0.0)
    if reduction == "mean":
        with no_grad():
            kept = ignored.logical_not()
            denom = kept.sum() if weight is None else (
                weight[target.masked_fill(ignored, 0)] * kept).sum()
        smooth = smooth.sum() / denom
    elif reduction == "sum":
        smooth = smooth.sum()
    return (call(SC.mul_scalar, nll, 1 - label_smoothing)
            + call(SC.mul_scalar, smooth, label_smoothing / c))


__all__ = [
    "smooth_l1_loss", "huber_loss", "kl_div", "soft_margin_loss", "margin_ranking_loss",
    "hinge_embedding_loss", "cosine_embedding_loss", "pairwise_distance",
    "triplet_margin_loss", "poisson_nll_loss", "gaussian_nll_loss", "multi_margin_loss",
    "multilabel_margin_loss", "multilabel_soft_margin_loss", "cross_entropy", "ctc_loss",
]
