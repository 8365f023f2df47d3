"""RMSprop (PyTorch's single-tensor update) and the scalar step state the optimizers share."""

from __future__ import annotations

import numpy as np

from .._tensor import Tensor
from ._checks import check_lr
from .optimizer import Optimizer, number_lr


def _scalar_state(value: float = 0.0) -> Tensor:
    return Tensor._make(np.array(value, dtype=np.float32))


class RMSprop(Optimizer):
    """Divide the gradient by a running root-mean-square of recent gradients."""

    _complex_as_real = True
    _capturable_xla = (True, True)

    _SETSTATE_DEFAULTS = (("momentum", 0), ("centered", False), ("foreach", None),
                        ("maximize", False), ("differentiable", False), ("capturable", False))

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False,
                 capturable: bool = False, foreach=None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        check_lr(lr)
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                        maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        -group["lr"]  # noqa: B018 (the update's first use of lr; see Optimizer._check_group)

    def _init_state(self, data, grad, group, state) -> None:
        state["step"] = _scalar_state()
        state["square_avg"] = Tensor._make(np.zeros_like(data))
        if group["momentum"] > 0:
            state["momentum_buffer"] = Tensor._make(np.zeros_like(data))
        if group["centered"]:
            state["grad_avg"] = Tensor._make(np.zeros_like(data))

    def _version_bumps(self, group: dict) -> tuple:
        """PyTorch's in-place operations per step (see `Optimizer._version_bumps`)."""
        bumps = (("step", 1), ("square_avg", 2))
        if group["momentum"] > 0:
            bumps += (("momentum_buffer", 2),)
        if group["centered"]:
            bumps += (("grad_avg", 1),)
        return 1, bumps

    def _update_differentiable(self, p, grad, group, state) -> None:
        """PyTorch's single-tensor update as tensor operations (`differentiable=True`): the
        averages in place, `eps` added out of place, the parameter in place."""
        d_p = self._differentiable_start(p, grad, group, state)
        lr, alpha, momentum = number_lr(group), group["alpha"], group["momentum"]
        state["step"] += 1
        if group["weight_decay"] != 0:
            d_p = d_p.add(p, alpha=group["weight_decay"])
        square_avg = state["square_avg"]
        square_avg.mul_(alpha).addcmul_(d_p, d_p, value=1 - alpha)
        if group["centered"]:
            grad_avg = state["grad_avg"]
            grad_avg.lerp_(d_p, 1 - alpha)
            avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
        else:
            avg = square_avg.sqrt()
        avg = avg.add(group["eps"])
        if momentum > 0:
            buf = state["momentum_buffer"]
            buf.mul_(momentum).addcdiv_(d_p, avg)
            p.add_(buf, alpha=-lr)
        else:
            p.addcdiv_(d_p, avg, value=-lr)

    def _update(self, p, grad, group, state) -> None:
        data = p._data
        if not state:
            self._init_state(data, grad, group, state)
        if group["maximize"]:
            grad = -grad
        state["step"]._data += 1
        if group["weight_decay"] != 0:
            grad = grad + group["weight_decay"] * data
        alpha = group["alpha"]
        sq = state["square_avg"]._data
        sq *= alpha
        sq += (1 - alpha) * grad * grad
        if group["centered"]:
            ga = state["grad_avg"]._data
            ga += (grad - ga) * (1 - alpha)
            avg = np.sqrt(sq - ga * ga) + group["eps"]
        else:
            avg = np.sqrt(sq) + group["eps"]
        if group["momentum"] > 0:
            buf = state["momentum_buffer"]._data
            buf *= group["momentum"]
            buf += grad / avg
            data -= group["lr"] * buf
        else:
            data += -group["lr"] * (grad / avg)


