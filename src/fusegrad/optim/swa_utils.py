"""Stochastic weight averaging: `AveragedModel` (SWA or EMA of a model's parameters), the
`SWALR` schedule, and `update_bn` to recompute BatchNorm statistics for the averaged weights."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from copy import deepcopy

from .._tensor import Tensor
from ..nn.modules.module import Module
from .lr_scheduler import LRScheduler
from .optimizer import Optimizer

__all__ = ["AveragedModel", "SWALR", "get_ema_avg_fn", "get_ema_multi_avg_fn",
           "get_swa_avg_fn", "get_swa_multi_avg_fn", "update_bn"]


def _is_float_or_complex(t: Tensor) -> bool:
    return t.dtype.is_floating_point or t.dtype.is_complex


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable:
    """In-place exponential moving average over lists of tensors (one dtype per call)."""
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         "[0,1] range.")

    def ema_update(ema_params: list, current_params: list, num_averaged) -> None:
        if _is_float_or_complex(ema_params[0]):
            for e, c in zip(ema_params, current_params):
                e.lerp_(c, 1 - decay)
        else:
            # lerp has no integer kernel: PyTorch averages integer tensors (BatchNorm's
            # num_batches_tracked) in floating point and truncates on the copy back
            for e, c in zip(ema_params, current_params):
                e.copy_(e * decay + c * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn() -> Callable:
    """In-place running mean over lists of tensors (one dtype per call)."""

    def swa_update(averaged_params: list, current_params: list, num_averaged) -> None:
        if _is_float_or_complex(averaged_params[0]):
            weight = 1 / (num_averaged + 1)
            for a, c in zip(averaged_params, current_params):
                a.lerp_(c, weight if not isinstance(weight, Tensor) else weight.item())
            return
        # Integer tensors take the difference route, which PyTorch refuses as it refuses
        # integer division by the count (a tensor) or a fractional alpha (a number).
        diffs = [c - a for a, c in zip(averaged_params, current_params)]
        if isinstance(num_averaged, Tensor):
            for a, d in zip(averaged_params, diffs):
                a.addcdiv_(d, num_averaged + 1)
        elif diffs:
            # the step would add diff * (1 / (n + 1)): a float alpha on integer tensors
            raise RuntimeError("For integral input tensors, argument alpha must not be a "
                               "floating point number.")

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable:
    """decay * averaged + (1 - decay) * current."""
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         "[0,1] range.")

    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn() -> Callable:
    """The running mean: averaged + (current - averaged) / (n + 1)."""

    def swa_update(averaged_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A copy of `model` whose parameters (and, with `use_buffers`, buffers) are averaged by
    `update_parameters`; the default average is the equal-weight running mean (SWA)."""

    def __init__(self, model: Module, device=None, avg_fn: Callable | None = None,
                 multi_avg_fn: Callable | None = None, use_buffers: bool = False) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        from .. import int64, tensor

        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=int64))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        """Run the averaged copy."""
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Module) -> None:
        """Fold `model`'s current parameters into the average (the first call copies them)."""
        if self.use_buffers:
            mine = itertools.chain(self.module.parameters(), self.module.buffers())
            theirs = itertools.chain(model.parameters(), model.buffers())
        else:
            mine, theirs = self.parameters(), model.parameters()
        averaged, current = [], []
        first = int(self.n_averaged.item()) == 0
        for p_avg, p_model in zip(mine, theirs):
            averaged.append(p_avg.detach())
            current.append(p_model.detach())
            if first:
                p_avg.detach().copy_(p_model.detach())
        if not first and (self.multi_avg_fn is not None or self.avg_fn is None):
            # One call per dtype, as PyTorch groups the tensors for its foreach kernels
            for group_avg, group_cur in _group_by_dtype(averaged, current):
                if self.multi_avg_fn is not None:
                    self.multi_avg_fn(group_avg, group_cur, self.n_averaged)
                else:
                    # the CPU default: the running mean tensor by tensor
                    fn = get_swa_avg_fn()
                    for p_avg, p_model in zip(group_avg, group_cur):
                        p_avg.copy_(fn(p_avg, p_model, self.n_averaged))
        elif not first:
            for p_avg, p_model in zip(averaged, current):
                p_avg.copy_(self.avg_fn(p_avg, p_model, self.n_averaged))
        if not self.use_buffers:
            # Buffers (BatchNorm statistics) follow the latest model unless averaged.
            for b_swa, b_model in zip(self.module.buffers(), model.buffers()):
                b_swa.detach().copy_(b_model.detach())
        self.n_averaged += 1


def _group_by_dtype(averaged: list, current: list) -> list:
    """[(averaged, current)] lists per dtype. PyTorch's grouping is a hash map whose order,
    for the few dtypes a model has, is the reverse of first appearance."""
    groups: dict = {}
    for a, c in zip(averaged, current):
        pair = groups.setdefault(a.dtype, ([], []))
        pair[0].append(a)
        pair[1].append(c)
    return list(reversed(groups.values()))


def update_bn(loader: Iterable, model: Module, device=None) -> None:
    """Recompute every BatchNorm's running statistics with one pass over `loader` (cumulative
    averages), leaving momenta and the training flag as they were."""
    from ..autograd import no_grad
    from ..nn.modules.batchnorm import _BatchNorm

    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    with no_grad():
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's learning rate to `swa_lr` over `anneal_epochs` epochs ('cos' or
    'linear'), then hold it there."""

    def __init__(self, optimizer: Optimizer, swa_lr, anneal_epochs: int = 10,
                 anneal_strategy: str = "cos", last_epoch: int = -1) -> None:
        groups = optimizer.param_groups
        if isinstance(swa_lr, (list, tuple)):
            if len(swa_lr) != len(groups):
                raise ValueError(f"swa_lr must have the same length as "
                                 f"optimizer.param_groups. swa_lr has {len(swa_lr)} values, "
                                 f"param_groups has {len(groups)}.")
            swa_lrs = list(swa_lr)
        else:
            swa_lrs = [swa_lr] * len(groups)
        for lr, group in zip(swa_lrs, groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ["cos", "linear"]:
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got "
                             f"{anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def _set_anneal_func(self, anneal_strategy: str) -> None:
        # The strategy's name is what state_dict keeps (PyTorch's `_anneal_strategy`); the
        # function is derived from it again on loading.
        self._anneal_strategy = anneal_strategy
        self.anneal_func = (self._cosine_anneal if anneal_strategy == "cos"
                            else self._linear_anneal)

    def state_dict(self) -> dict:
        """The scheduler's state, without the optimizer and the annealing function."""
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore a `state_dict`, the annealing function set from its strategy."""
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)

    @staticmethod
    def _linear_anneal(t: float) -> float:
        return t

    @staticmethod
    def _cosine_anneal(t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self) -> list[float]:
        """Recover the pre-annealing rate from the current one, then anneal one step."""
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha)
                    for g in self.optimizer.param_groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [g["swa_lr"] * alpha + lr * (1 - alpha)
                for g, lr in zip(self.optimizer.param_groups, prev_lrs)]
