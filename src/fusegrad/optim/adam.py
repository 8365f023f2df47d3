"""Adam (with amsgrad and maximize), PyTorch's single-tensor update."""

from __future__ import annotations

import math
import struct

import numpy as np

from .. import _dtype
from .._dispatch import call
from .._tensor import Tensor
from ..ops import _native
from ..ops._util import HALF
from ..ops.scalar import mul_scalar_
from ._checks import check_lr
from .optimizer import BLOCKED_MIN, Optimizer

# `flags` bits of the C update (ops/native/optim.c).
_MAXIMIZE, _DECOUPLED, _L2, _AMSGRAD = 1, 2, 4, 8
# The C update's eight scalars as the bits of doubles read as 64-bit integers (what
# `_native.double_bits` gives each), in one pack and unpack: a call per scalar costs more.
_DOUBLES = struct.Struct("<8d")
_INT64S = struct.Struct("<8q")


def _half_update(data: np.ndarray, grad: np.ndarray, group: dict, state: dict,
                 consts: tuple) -> None:
    """The update of a float16/bfloat16 parameter: PyTorch's single-tensor operations in its
    order (`lerp_`, `mul_`, `addcmul_`, `sqrt`, `/`, `add_`, `addcdiv_`), each rounding to
    the half dtype as PyTorch's kernels do, as fusegrad's operations on the arrays (fresh
    tensors over them: the version counters move as `_step_group` counts)."""
    def wrap(a: np.ndarray) -> Tensor:
        return Tensor._make(a, _dtype.from_numpy_dtype(a.dtype))

    def scale(t: Tensor, factor: float) -> None:
        # PyTorch's foreach update scales by `_foreach_mul_`, which runs mul_.Scalar and so
        # rounds the factor to the half dtype first (found by experiment: AdamW's decay and
        # the second moment's beta2 left up to 10% of float16 values an ulp off);
        # the single-tensor update's `mul_` takes the factor in float32.
        if group["foreach"]:
            call(mul_scalar_, t, factor)
        else:
            t.mul_(factor)

    w1, b2, c2, step_size, bc2_sqrt = consts
    p, g = wrap(data), wrap(grad)
    if group["maximize"]:
        g = -g
    lr, wd = group["lr"], group["weight_decay"]
    if wd != 0:
        if group["decoupled_weight_decay"]:
            scale(p, 1 - lr * wd)
        else:
            g = g.add(p, alpha=wd)
    m, v = wrap(state["exp_avg"]._data), wrap(state["exp_avg_sq"]._data)
    m.lerp_(g, w1)
    scale(v, b2)
    v.addcmul_(g, g, value=c2)
    if group["amsgrad"]:
        vmax = wrap(state["max_exp_avg_sq"]._data)
        vmax.copy_(vmax.maximum(v))
        v = vmax
    p.addcdiv_(m, (v.sqrt() / bc2_sqrt).add_(group["eps"]), value=-step_size)


def adam_state(data: np.ndarray) -> dict:
    """Fresh step counter and first/second moment buffers for a parameter."""
    return {"step": Tensor._make(np.array(0.0, dtype=np.float32)),
            "exp_avg": Tensor._make(np.zeros_like(data)),
            "exp_avg_sq": Tensor._make(np.zeros_like(data))}


def weight_decay_grad(data: np.ndarray, grad: np.ndarray, lr: float, wd: float,
                      decoupled: bool) -> np.ndarray:
    """Apply weight decay: shrink the weights in place (decoupled) or add wd * w to the
    gradient (L2); returns the gradient to use."""
    if wd != 0:
        if decoupled:
            data *= 1 - lr * wd
        else:
            grad = grad + wd * data
    return grad


def update_moments(state: dict, grad: np.ndarray, beta1: float,
                   beta2: float) -> tuple[np.ndarray, np.ndarray]:
    """Move the running mean and uncentred variance of the gradient one step, in place."""
    m = state["exp_avg"]._data
    v = state["exp_avg_sq"]._data
    m += (grad - m) * (1 - beta1)
    v *= beta2
    v += (1 - beta2) * grad * grad
    return m, v


def _tensor_betas_check(betas, foreach, capturable) -> tuple:
    """PyTorch's checks of Adam's betas (both floats or both one-element tensors) after the
    range checks; the betas as a tuple, a tensor squeezed to a scalar."""
    both_floats = isinstance(betas[0], float) and isinstance(betas[1], float)
    if not (both_floats or isinstance(betas[0], Tensor) and isinstance(betas[1], Tensor)):
        raise ValueError("betas must be either both floats or both Tensors")
    for i in (0, 1):
        if isinstance(betas[i], Tensor):
            if not capturable and foreach:
                raise ValueError(f"betas[{i}] as a Tensor is not supported for "
                                 "capturable=False and foreach=True")
            if betas[i].numel() != 1:
                raise ValueError(f"Tensor betas[{i}] must be 1-element")
    return tuple(b.squeeze() if isinstance(b, Tensor) and b.dim() != 0 else b for b in betas)


def _beta_consts(beta1, beta2, step: float, lr: float, dtype: np.dtype) -> tuple:
    """(1 - beta1, beta2, 1 - beta2, lr / (1 - beta1 ** step), sqrt(1 - beta2 ** step)) as
    PyTorch's update forms them: in double precision from float betas; from a tensor beta
    in the tensor's dtype (float32: 1 - beta1 in the parameter's dtype, the step size as
    lr times the reciprocal, `beta ** 3` as two products), each the value its kernel
    reads."""
    if isinstance(beta1, Tensor):
        b1 = beta1._data[()]
        w1 = float(1 - b1.astype(dtype))
        power = b1 * b1 * b1 if step == 3 else b1 ** b1.dtype.type(step)
        bc1 = b1.dtype.type(1) - power
        step_size = float((b1.dtype.type(1) / bc1) * b1.dtype.type(lr))
    else:
        w1 = 1 - beta1
        step_size = lr / (1 - beta1 ** step)
    if isinstance(beta2, Tensor):
        b2 = beta2._data[()]
        one = b2.dtype.type(1)
        power = b2 * b2 * b2 if step == 3 else b2 ** b2.dtype.type(step)
        return w1, float(b2), float(one - b2), step_size, float(np.sqrt(one - power))
    return w1, beta2, 1 - beta2, step_size, math.sqrt(1 - beta2 ** step)


# Version counter moves of Adam's state per step: `step += 1`, `exp_avg.lerp_`,
# `exp_avg_sq.mul_().addcmul_()` and amsgrad's `torch.maximum(..., out=max_exp_avg_sq)`.
_ADAM_BUMPS = (("step", 1), ("exp_avg", 1), ("exp_avg_sq", 2))
_AMSGRAD_BUMPS = (*_ADAM_BUMPS, ("max_exp_avg_sq", 1))

class Adam(Optimizer):
    """Adam; `decoupled_weight_decay=True` is AdamW."""

    _complex_as_real = True
    _capturable_xla = (True, False)
    # (AdamW's refusal too)
    _sparse_error = ("Adam does not support sparse gradients, please consider SparseAdam "
                     "instead")

    _SETSTATE_DEFAULTS = (("amsgrad", False), ("maximize", False), ("foreach", None),
                        ("capturable", False), ("differentiable", False),
                        ("decoupled_weight_decay", False), ("fused", None))

    def __init__(self, params, lr: float = 1e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, amsgrad: bool = False, *,
                 foreach=None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused=None,
                 decoupled_weight_decay: bool = False) -> None:
        if isinstance(lr, Tensor):
            if foreach and not capturable:
                raise ValueError("lr as a Tensor is not supported for capturable=False and "
                                 "foreach=True")
        check_lr(lr)
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        betas = _tensor_betas_check(betas, foreach, capturable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)
        if fused:
            if differentiable:
                raise RuntimeError("`fused` does not support `differentiable`")
            if foreach:
                raise RuntimeError("`fused` and `foreach` cannot be `True` together.")

    # The group options a traced step reads (see `Optimizer._TRACED_OPTIONS`).
    _TRACED_OPTIONS = ("lr", "betas", "eps", "weight_decay", "amsgrad", "maximize",
                       "decoupled_weight_decay")

    def _traced_state_keys(self, group: dict) -> tuple[str, ...]:
        keys = ("step", "exp_avg", "exp_avg_sq")
        return (*keys, "max_exp_avg_sq") if group["amsgrad"] else keys

    def _traced_options(self, group: dict) -> dict:
        beta1, beta2 = group["betas"]
        return dict(lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"],
                    weight_decay=group["weight_decay"], amsgrad=group["amsgrad"],
                    maximize=group["maximize"],
                    decoupled=group["decoupled_weight_decay"],
                    step_dtype=_dtype.float32)  # (the step counter's, as adam_state's)

    @staticmethod
    def _traced_update(p, grad, *state, first, lr, beta1, beta2, eps, weight_decay,
                       amsgrad, maximize, decoupled, step_dtype) -> tuple:
        """PyTorch's single-tensor update of one parameter as tensor operations, in the
        form torch.compile traces it (the bias corrections computed from the step tensor
        in the graph, so one graph serves every step), which capture records into a
        compiled step's graph (under no_grad). `state`: the step, exp_avg, exp_avg_sq and
        (amsgrad) max_exp_avg_sq tensors, made here at the `first` step (and returned, as
        the new state's tensors, as `adam_state` makes them)."""
        made = ()
        if first:
            made = [p.new_zeros((), dtype=step_dtype), p.new_zeros(p.shape),
                    p.new_zeros(p.shape)]
            if amsgrad:
                made.append(p.new_zeros(p.shape))
            state = made
        step_t, exp_avg, exp_avg_sq = state[:3]
        max_exp_avg_sq = state[3:]
        if maximize:
            grad = -grad
        step_t += 1
        if weight_decay != 0:
            if decoupled:
                p.mul_(1 - lr * weight_decay)
            else:
                grad = grad.add(p, alpha=weight_decay)
        # `lerp_`, `addcmul_` and `addcdiv_` (PyTorch's spelling) as the arithmetic they do
        # (for a weight under 0.5, lerp's formula), one in-place op each as theirs: code
        # generation fuses these into its kernels, where it runs those three as calls.
        exp_avg.add_(grad - exp_avg, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2).add_(grad * grad, alpha=1 - beta2)
        # The corrections in double precision, as eager's (and PyTorch's eager) update
        # forms them from the step as a number: from the float32 step tensor itself (as
        # torch.compile's graph does), `1 - beta2 ** step` loses about 1e-5 of its value.
        step = step_t.double()
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        step_size_neg = (lr / bias_correction1).neg()
        bias_correction2_sqrt = bias_correction2.sqrt()
        second = exp_avg_sq
        if amsgrad:
            second = max_exp_avg_sq[0]
            second.copy_(second.maximum(exp_avg_sq))
        denom = (second.sqrt() / (bias_correction2_sqrt * step_size_neg)).add_(
            eps / step_size_neg)
        p.add_(exp_avg / denom)
        return made

    def _init_state(self, data, grad, group, state) -> None:
        state.update(adam_state(data))
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = Tensor._make(np.zeros_like(data))

    def _check_group(self, group: dict) -> None:
        # The update's first uses of lr (see Optimizer._check_group).
        if group["weight_decay"] != 0 and group["decoupled_weight_decay"]:
            1 - group["lr"] * group["weight_decay"]  # noqa: B018
        group["lr"] / 1.0  # noqa: B018

    def _version_bumps(self, group: dict) -> tuple:
        """PyTorch's in-place operations per step (see `Optimizer._version_bumps`)."""
        if group.get("fused"):
            return 0, (("step", 1),)
        decay = group["weight_decay"] != 0 and group["decoupled_weight_decay"]
        return (2 if decay else 1), (_AMSGRAD_BUMPS if group["amsgrad"] else _ADAM_BUMPS)

    def _update(self, p, grad, group, state) -> None:
        data = p._data
        if not state:
            self._init_state(data, grad, group, state)
        beta1, beta2 = group["betas"]
        lr, wd = group["lr"], group["weight_decay"]
        step_t = state["step"]
        step_t._data += 1
        step = float(step_t._data)
        if type(beta1) is float and type(beta2) is float:
            # Float betas (the common case) inline: `_beta_consts` computes these the same.
            consts = (1 - beta1, beta2, 1 - beta2, lr / (1 - beta1 ** step),
                      math.sqrt(1 - beta2 ** step))
        else:
            consts = _beta_consts(beta1, beta2, step, lr, data.dtype)
        if self._native_update(data, grad, group, state, consts):
            return
        if data.dtype in HALF and grad.dtype == data.dtype:
            _half_update(data, grad, group, state, consts)
            return
        w1, b2, c2, step_size, bc2_sqrt = consts
        if group["maximize"]:
            grad = -grad
        grad = weight_decay_grad(data, grad, lr, wd, group["decoupled_weight_decay"])
        if not group["amsgrad"] and self._blocked_adam(data, grad, state, consts,
                                                       group["eps"]):
            return
        m = state["exp_avg"]._data
        v = state["exp_avg_sq"]._data
        m += (grad - m) * w1
        v *= b2
        v += c2 * grad * grad
        if group["amsgrad"]:
            vmax = state["max_exp_avg_sq"]._data
            np.maximum(vmax, v, out=vmax)
            denom = np.sqrt(vmax) / bc2_sqrt + group["eps"]
        else:
            denom = np.sqrt(v) / bc2_sqrt + group["eps"]
        data += -step_size * (m / denom)

    def _update_differentiable(self, p, grad, group, state) -> None:
        """PyTorch's single-tensor update as tensor operations (`differentiable=True`, the
        form its capturable update takes): bias corrections from the step tensor, the step
        as `addcdiv_` of a copy of the first moment; a weight decay or beta that requires
        grad enters through the operations that let its gradient flow."""
        d_p = self._differentiable_start(p, grad, group, state)
        lr, wd, eps = group["lr"], group["weight_decay"], group["eps"]
        beta1, beta2 = (b.squeeze() if isinstance(b, Tensor) and b.dim() != 0 else b
                        for b in group["betas"])
        if isinstance(lr, Tensor) and lr.dim() != 0:
            lr = lr.squeeze()
        exp_avg, exp_avg_sq, step_t = state["exp_avg"], state["exp_avg_sq"], state["step"]
        step_t += 1
        if wd != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * wd)
            elif isinstance(wd, Tensor) and wd.requires_grad:
                d_p = d_p.addcmul_(p.clone(), wd)
            else:
                d_p = d_p.add(p, alpha=wd)
        exp_avg.lerp_(d_p, 1 - beta1)
        if isinstance(beta2, Tensor) and beta2.requires_grad:
            exp_avg_sq.lerp_(d_p.square(), weight=1 - beta2)
        else:
            exp_avg_sq.mul_(beta2).addcmul_(d_p, d_p, value=float(1 - beta2))
        # (a beta that requires grad is raised to a copy of the step tensor)
        step1 = step_t.clone() if isinstance(beta1, Tensor) and beta1.requires_grad else step_t
        step2 = step_t.clone() if isinstance(beta2, Tensor) and beta2.requires_grad else step_t
        bias_correction1 = 1 - beta1 ** step1
        bias_correction2 = 1 - beta2 ** step2
        step_size_neg = (lr / bias_correction1).neg()
        bias_correction2_sqrt = bias_correction2.sqrt()
        if group["amsgrad"]:
            max_sq = state["max_exp_avg_sq"]
            max_sq.copy_(max_sq.clone().maximum(exp_avg_sq))
            second = max_sq
        else:
            second = exp_avg_sq
        denom = (second.sqrt() / (bias_correction2_sqrt * step_size_neg)).add_(
            eps / step_size_neg)
        p.addcdiv_(exp_avg.clone(), denom)

    @staticmethod
    def _native_update(data: np.ndarray, grad: np.ndarray, group: dict, state: dict,
                       consts: tuple) -> bool:
        """The whole update, with the step's `consts` (`_beta_consts`), in one C pass over
        the parameter (gradient, moments and parameter read once, moments and parameter
        written), its element ranges shared between the C workers, with PyTorch's
        operations in its order (`lerp_` and `addcmul_` as the fused multiply-adds of its
        CPU kernels). At every size: the one call costs less than Adam's dozen NumPy passes
        even for a small parameter (13.7 against 14.5 us at 256 elements, 9.6 against 12.9
        at 2400). False, doing nothing, without the C kernels, for arrays of another dtype
        or layout, or hyperparameters that are not numbers."""
        n = data.size
        m, v = state["exp_avg"]._data, state["exp_avg_sq"]._data
        arrays = [data, grad, m, v]
        amsgrad = group["amsgrad"]
        if amsgrad:
            arrays.append(state["max_exp_avg_sq"]._data)
        if not all(a.dtype == data.dtype and a.shape == data.shape
                                   and a.flags.c_contiguous for a in arrays):
            return False
        fn = _native.typed("optim", "adam", data.dtype, "ppppp" + "i" * 11)
        if fn is None:
            return False
        lr, wd, eps = group["lr"], group["weight_decay"], group["eps"]
        for x in (lr, wd, eps):
            if type(x) is not float and type(x) is not int:
                return False  # (a tensor learning rate, ...: the NumPy update serves)
        decoupled = group["decoupled_weight_decay"]
        flags = (_MAXIMIZE if group["maximize"] else 0) | (_AMSGRAD if amsgrad else 0)
        if wd != 0:
            flags |= _DECOUPLED if decoupled else _L2
        w1, b2, c2, step_size, bc2_sqrt = consts
        bits = _INT64S.unpack(_DOUBLES.pack(1 - lr * wd, wd, w1, b2, c2, -step_size,
                                            bc2_sqrt, eps))
        addresses = [_native.address(a) for a in arrays]
        if not amsgrad:
            addresses.append(None)
        # Element ranges on the C workers.
        _native.run_pieces(fn, (*addresses, *bits, flags), (), n, n)
        return True

    def _blocked_adam(self, data: np.ndarray, grad: np.ndarray, state: dict, consts: tuple,
                      eps: float) -> bool:
        """The moment updates and the step of a large parameter (no amsgrad) in cache-sized
        blocks shared between intra-op threads (`Optimizer._blocked`): each element gets
        the whole-array operations of `update_moments` and `_update` in their order, through
        one work block instead of a fresh parameter-sized temporary per operation, so the
        same bits at every thread count. False, doing nothing, when the arrays are small,
        of mixed dtype or not contiguous."""
        m, v = state["exp_avg"]._data, state["exp_avg_sq"]._data
        if data.size < BLOCKED_MIN or not (
                data.dtype == grad.dtype == m.dtype == v.dtype
                and data.shape == grad.shape == m.shape == v.shape
                and data.dtype.kind == "f" and data.flags.c_contiguous
                and grad.flags.c_contiguous and m.flags.c_contiguous and v.flags.c_contiguous):
            return False
        fp, fg, fm, fv = (a.reshape(-1) for a in (data, grad, m, v))
        w1, beta2, c2, step_size, bc2_sqrt = consts

        def update(i: int, j: int, t: np.ndarray) -> None:
            g, mb, vb = fg[i:j], fm[i:j], fv[i:j]
            np.subtract(g, mb, out=t)           # m += (grad - m) * (1 - beta1)
            t *= w1
            mb += t
            vb *= beta2                         # v = v * beta2 + (1 - beta2) * grad * grad
            np.multiply(g, c2, out=t)
            t *= g
            vb += t
            np.sqrt(vb, out=t)                  # denom = sqrt(v) / bc2_sqrt + eps
            t /= bc2_sqrt
            t += eps
            np.divide(mb, t, out=t)             # data += -(lr / bc1) * (m / denom)
            t *= -step_size
            fp[i:j] += t

        self._blocked(data, update)
        return True
