"""Learning-rate schedulers: StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR,
LambdaLR, MultiplicativeLR, ConstantLR, LinearLR, PolynomialLR, OneCycleLR, SequentialLR,
ChainedScheduler and ReduceLROnPlateau here; CyclicLR and CosineAnnealingWarmRestarts in
`_cyclic_lr.py`. Each computes the new rate from the current one as PyTorch does, so the
float values agree step for step."""

from __future__ import annotations

import functools
import math
import types
import warnings
import weakref
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable

from .._tensor import Tensor
from .optimizer import Optimizer


def _set_group_value(group: dict, key: str, value) -> None:
    """group[key] = value, or, where the group holds a tensor there (a tensor learning
    rate), that tensor filled with the value in place, as PyTorch's schedulers do."""
    current = group.get(key)
    if isinstance(current, Tensor):
        current.fill_(value.item() if isinstance(value, Tensor) else value)
    else:
        group[key] = value

_ORDER_WARNING = (
    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and "
    "later, you should call them in the opposite order: `optimizer.step()` before "
    "`lr_scheduler.step()`.  Failure to do this will result in PyTorch skipping the first "
    "value of the learning rate schedule. See more details at "
    "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate")
_EPOCH_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated "
    "where possible. Please use `scheduler.step()` to step the scheduler. During the "
    "deprecation, if epoch is different from None, the closed form is used instead of the new "
    "chainable form, where available. Please open an issue if you are unable to replicate "
    "your use case: https://github.com/pytorch/pytorch/issues/new/choose.")
# PyTorch's public name for the message (some training scripts import it)
EPOCH_DEPRECATION_WARNING = _EPOCH_WARNING
_REPLACED_STEP_WARNING = (
    "Seems like `optimizer.step()` has been overridden after learning rate scheduler "
    "initialization. Please, make sure to call `optimizer.step()` before "
    "`lr_scheduler.step()`. See more details at "
    "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate")


def _track_step_calls(optimizer: Optimizer) -> None:
    """Make `optimizer.step` note (`_opt_called`) that it ran, so a scheduler's first step
    can tell whether it came first, as PyTorch warns (once per optimizer)."""
    if hasattr(optimizer.step, "_wrapped_by_lr_sched"):
        return
    owner = weakref.ref(optimizer)  # the wrapper lives on the optimizer: no cycle
    step = optimizer.step.__func__

    @functools.wraps(step)
    def wrapper(*args, **kwargs):
        opt = owner()
        opt._opt_called = True
        return step.__get__(opt, opt.__class__)(*args, **kwargs)

    wrapper._wrapped_by_lr_sched = True
    # (capture finds the optimizer through it: a compiled `opt.step()` records the note,
    # `opt._opt_called = True`, and the optimizer's traced update)
    wrapper._lr_sched_owner = owner
    optimizer.step = wrapper


def _warn_outside_step(get_lr: Callable) -> Callable:
    """`get_lr` warning when called other than from `step`."""
    @functools.wraps(get_lr)
    def checked(self):
        if not getattr(self, "_get_lr_called_within_step", True):
            warnings.warn("To get the last learning rate computed by the scheduler, please use "
                          "`get_last_lr()`.", UserWarning, stacklevel=1)  # the library, as PyTorch
        return get_lr(self)

    return checked


class LRScheduler:
    """Base: sets each group's lr from `get_lr()` at every `step()`."""

    # True only during the step construction makes: a scheduler resumed at `last_epoch`
    # then keeps the rates it was given rather than moving them one epoch on.
    _is_initial = False

    def __init_subclass__(cls, **kwargs) -> None:
        # The schedulers here warn, as PyTorch's do, when `get_lr` is called outside
        # `step` (where it is not the rate in use); user subclasses are left as written.
        super().__init_subclass__(**kwargs)
        get_lr = cls.__dict__.get("get_lr")
        if get_lr is not None and cls.__module__.startswith(__name__.rpartition(".")[0]):
            cls.get_lr = _warn_outside_step(get_lr)

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                initial = group["lr"]
                # A tensor rate is copied: the group's own is then updated in place.
                group.setdefault("initial_lr", initial.clone()
                                 if isinstance(initial, Tensor) else initial)
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                                   "when resuming scheduler with last_epoch >= 0.\nThis "
                                   "typically happens when:\n1. You're trying to resume "
                                   "training from a checkpoint but haven't properly loaded "
                                   "the optimizer state\n2. You're using last_epoch >= 0 for "
                                   "a fresh training run (not recommended)")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        _track_step_calls(optimizer)
        # (set in PyTorch's order: state_dict keeps the attributes' order)
        self._step_count = 0
        self._is_initial = True
        self._get_lr_called_within_step = False
        self._initial_step()

    def _initial_step(self) -> None:
        """The step construction makes (kept a method, as in PyTorch, for subclasses that
        call or override it)."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list[float]:
        """The rates for the current `last_epoch`."""
        raise NotImplementedError

    def get_last_lr(self) -> list[float]:
        """The rates set by the last `step()`."""
        return self._last_lr

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch and set the groups' learning rates."""
        if self._step_count == 1:  # the first step after the one construction made
            if not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
                warnings.warn(_REPLACED_STEP_WARNING, UserWarning, stacklevel=2)
            elif not getattr(self.optimizer, "_opt_called", False):
                warnings.warn(_ORDER_WARNING, UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(_EPOCH_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        """Set the groups' rates for the next epoch (or for `epoch`, by the closed form where
        there is one), without the order checks, the step count or the deprecation warning
        of `step`: what SequentialLR uses to restart a scheduler at a milestone."""
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed = getattr(self, "_get_closed_form_lr", None)
                values = closed() if closed is not None else self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        # Strict, as PyTorch: a group added after construction (no rate for it) is an error.
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            _set_group_value(group, "lr", lr)
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        """Everything but the optimizer (and callables)."""
        return {k: v for k, v in self.__dict__.items()
                if k != "optimizer" and k != "lr_lambdas"}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore a `state_dict`."""
        self.__dict__.update(state_dict)


class _LRScheduler(LRScheduler):
    """The pre-2.0 name of `LRScheduler`: a subclass of it in PyTorch (not an alias), so old
    custom schedulers keep `_LRScheduler` in their method resolution order."""


class _RateFunctions:
    """state_dict for schedulers driven by per-group rate functions: functions and lambdas
    are saved as None, callable objects as a copy of their attributes."""

    def state_dict(self) -> dict:
        """The scheduler's state with `lr_lambdas` as saved entries."""
        state = LRScheduler.state_dict(self)
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else
                               fn.__dict__.copy() for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore a `state_dict`; saved attributes go back onto this scheduler's callable
        objects (the entry is taken out of `state_dict`, as PyTorch does)."""
        saved = state_dict.pop("lr_lambdas")
        LRScheduler.load_state_dict(self, state_dict)
        state_dict["lr_lambdas"] = saved
        for fn, attributes in zip(self.lr_lambdas, saved):
            if attributes is not None:
                fn.__dict__.update(attributes)


class LambdaLR(_RateFunctions, LRScheduler):
    """lr = initial_lr * lr_lambda(epoch)."""

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable | list,
                 last_epoch: int = -1) -> None:
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [base * fn(self.last_epoch)
                for fn, base in zip(self.lr_lambdas, self.base_lrs, strict=True)]


class MultiplicativeLR(_RateFunctions, LRScheduler):
    """Multiply the rate by `lr_lambda(epoch)` every epoch after the first."""

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable | list,
                 last_epoch: int = -1) -> None:
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if not self._is_initial:
            return [g["lr"] * fn(self.last_epoch)
                    for fn, g in zip(self.lr_lambdas, groups, strict=True)]
        return [g["lr"] for g in groups]


def _lambdas(optimizer: Optimizer, lr_lambda) -> list:
    """One rate function per param group: the one given, or a list checked for length."""
    n = len(optimizer.param_groups)
    if isinstance(lr_lambda, (list, tuple)):
        if len(lr_lambda) != n:
            raise ValueError(f"Expected {n} lr_lambdas, but got {len(lr_lambda)}")
        return list(lr_lambda)
    return [lr_lambda] * n


class ConstantLR(LRScheduler):
    """Scale the initial rate by `factor` for the first `total_iters` epochs."""

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1) -> None:
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [g["lr"] * self.factor for g in groups]
        if self.last_epoch != self.total_iters:
            return [g["lr"] for g in groups]
        return [g["lr"] * (1.0 / self.factor) for g in groups]

    def _get_closed_form_lr(self) -> list[float]:
        scale = self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor)
        return [base * scale for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """Decay the initial rate to zero over `total_iters` epochs as (1 - t / total) ** power."""

    def __init__(self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0,
                 last_epoch: int = -1) -> None:
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self._is_initial or self.last_epoch > self.total_iters:
            return [g["lr"] for g in groups]
        decay = ((1.0 - self.last_epoch / self.total_iters)
                 / (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power
        return [g["lr"] * decay for g in groups]

    def _get_closed_form_lr(self) -> list[float]:
        left = (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters) ** self.power
        return [base * left for base in self.base_lrs]


class StepLR(LRScheduler):
    """Multiply the rate by `gamma` every `step_size` epochs."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return [g["lr"] for g in groups]
        return [g["lr"] * self.gamma for g in groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base * self.gamma ** (self.last_epoch // self.step_size)
                for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the rate by `gamma` at each milestone epoch."""

    def __init__(self, optimizer: Optimizer, milestones, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self.last_epoch not in self.milestones:
            return [g["lr"] for g in groups]
        return [g["lr"] * self.gamma ** self.milestones[self.last_epoch] for g in groups]

    def _get_closed_form_lr(self) -> list[float]:
        marks = sorted(self.milestones.elements())
        return [base * self.gamma ** bisect_right(marks, self.last_epoch)
                for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the rate by `gamma` every epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self._is_initial:
            return [g["lr"] for g in groups]
        return [g["lr"] * self.gamma for g in groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine decay from the initial rate to `eta_min` over `T_max` epochs."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,  # noqa: N803
                 last_epoch: int = -1) -> None:
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        e, t, lo = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return [g["lr"] for g in groups]
        if self._step_count == 1 and e > 0:
            return [lo + (base - lo) * (1 + math.cos(e * math.pi / t)) / 2
                    for base, _ in zip(self.base_lrs, groups, strict=True)]
        if (e - 1 - t) % (2 * t) == 0:
            return [g["lr"] + (base - lo) * (1 - math.cos(math.pi / t)) / 2
                    for base, g in zip(self.base_lrs, groups, strict=True)]
        return [(1 + math.cos(math.pi * e / t)) / (1 + math.cos(math.pi * (e - 1) / t))
                * (g["lr"] - lo) + lo for g in groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [self.eta_min + (base - self.eta_min)
                * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale the initial rate by a factor moving linearly from `start_factor` to `end_factor`
    over `total_iters` epochs (then kept)."""

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3,
                 end_factor: float = 1.0, total_iters: int = 5, last_epoch: int = -1) -> None:
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 "
                             "and less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [g["lr"] * self.start_factor for g in groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return [g["lr"] for g in groups]
        span = self.end_factor - self.start_factor
        ratio = 1.0 + span / (self.total_iters * self.start_factor
                              + (self.last_epoch - 1) * span)
        return [g["lr"] * ratio for g in groups]

    def _get_closed_form_lr(self) -> list[float]:
        frac = min(self.total_iters, self.last_epoch) / self.total_iters
        return [base * (self.start_factor + (self.end_factor - self.start_factor) * frac)
                for base in self.base_lrs]


def uses_beta1(optimizer) -> bool:
    """Whether a cycled momentum is the optimizer's `betas[0]` (else its `momentum`); an
    optimizer with neither cannot cycle it."""
    defaults = optimizer.defaults
    if "momentum" not in defaults and "betas" not in defaults:
        raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` "
                         "option enabled")
    return "betas" in defaults


def _per_group(name: str, optimizer: Optimizer, value) -> list:
    """`value` repeated for every param group, or checked to have one entry per group."""
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. "
                             f"{name} has {len(value)} values, param_groups has {n}.")
        return list(value)
    return [value] * n


def _phase(end_step: float, start_lr: str, end_lr: str, start_momentum: str,
           end_momentum: str) -> dict:
    """One phase of OneCycleLR's schedule: the step it ends at and the param-group keys of
    the rates and momentums it anneals between (PyTorch's state_dict layout)."""
    return {"end_step": end_step, "start_lr": start_lr, "end_lr": end_lr,
            "start_momentum": start_momentum, "end_momentum": end_momentum}


class OneCycleLR(LRScheduler):
    """The 1cycle policy: warm up from `max_lr / div_factor` to `max_lr`, then anneal to
    `initial_lr / final_div_factor` (optionally in three phases), cycling momentum the
    opposite way. Stepped once per batch."""

    def __init__(self, optimizer: Optimizer, max_lr, total_steps: int | None = None,
                 epochs: int | None = None, steps_per_epoch: int | None = None,
                 pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = True, base_momentum=0.85, max_momentum=0.95,
                 div_factor: float = 25.0, final_div_factor: float = 1e4,
                 three_phase: bool = False, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if total_steps is not None:
            # The sign is compared first, as in PyTorch (a string total_steps is a TypeError).
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError(f"Expected positive integer total_steps, but got "
                                 f"{total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(f"Expected positive integer steps_per_epoch, but got "
                                 f"{steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR "
                             "(epochs AND steps_per_epoch)")
        # Built before pct_start is checked, as in PyTorch, so a bad pct_start fails the same
        # way; saved in state_dict as PyTorch's list of dicts.
        n = self.total_steps
        if three_phase:
            self._schedule_phases = [
                _phase(float(pct_start * n) - 1, "initial_lr", "max_lr", "max_momentum",
                       "base_momentum"),
                _phase(float(2 * pct_start * n) - 2, "max_lr", "initial_lr", "base_momentum",
                       "max_momentum"),
                _phase(n - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum")]
        else:
            self._schedule_phases = [
                _phase(float(pct_start * n) - 1, "initial_lr", "max_lr", "max_momentum",
                       "base_momentum"),
                _phase(n - 1, "max_lr", "min_lr", "base_momentum", "max_momentum")]
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._anneal_func_type = anneal_strategy  # PyTorch's state_dict entry, in its place
        max_lrs = _per_group("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for top, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = top / div_factor
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = uses_beta1(optimizer)
            highs = _per_group("max_momentum", optimizer, max_momentum)
            lows = _per_group("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for hi, lo, group in zip(highs, lows, optimizer.param_groups):
                    if self.use_beta1:
                        group["betas"] = (hi, *group["betas"][1:])
                    else:
                        group["momentum"] = hi
                    group["max_momentum"] = hi
                    group["base_momentum"] = lo
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        if self._anneal_func_type == "linear":
            return (end - start) * pct + start
        # Only reachable through a loaded state_dict; PyTorch's error.
        raise ValueError(f"Unknown _anneal_func_type: {self._anneal_func_type}")

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore a `state_dict`; phases saved as tuples (by earlier fusegrad versions) are
        read into PyTorch's dict layout."""
        super().load_state_dict(state_dict)
        phases = self._schedule_phases
        if not all(isinstance(phase, dict) for phase in phases):
            self._schedule_phases = [phase if isinstance(phase, dict) else _phase(*phase)
                                     for phase in phases]

    def get_lr(self) -> list[float]:
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"Tried to step {step} times. The specified number of total "
                             f"steps is {self.total_steps}")
        lrs = []
        last = len(self._schedule_phases) - 1
        for group in self.optimizer.param_groups:
            begin = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end = phase["end_step"]
                if step <= end or i == last:
                    pct = (step - begin) / (end - begin)
                    lr = self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        mom = self._anneal(group[phase["start_momentum"]],
                                           group[phase["end_momentum"]], pct)
                    break
                begin = end
            lrs.append(lr)
            if self.cycle_momentum:
                if self.use_beta1:
                    group["betas"] = (mom, *group["betas"][1:])
                else:
                    group["momentum"] = mom
        return lrs


class SequentialLR(LRScheduler):
    """Run `schedulers` one after another, switching at each epoch in `milestones`."""

    def __init__(self, optimizer: Optimizer, schedulers: list, milestones: list[int],
                 last_epoch: int = -1) -> None:
        if len(schedulers) < 1:
            raise ValueError(f"{type(self).__name__} expects at least one scheduler, but got "
                             "no scheduler.")
        for i, sched in enumerate(schedulers):
            if not hasattr(sched, "optimizer"):
                raise TypeError(f"{type(self).__name__} at index {i} should have "
                                f"`optimizer` as its attribute.")
            if isinstance(sched, ReduceLROnPlateau):
                raise ValueError(f"{type(self).__name__} does not support "
                                 f"`ReduceLROnPlateau` scheduler as it requires additional "
                                 f"kwargs to be specified when calling `step`, but got one at "
                                 f"index {i} in the given schedulers sequence.")
            if sched.optimizer is not optimizer:
                raise ValueError(f"{type(self).__name__} expects all schedulers to belong to "
                                 f"the same optimizer, but got scheduler "
                                 f"{type(sched).__name__} at index {i} has "
                                 f"{sched.optimizer}, which is different from "
                                 f"{type(optimizer).__name__}.")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError("Sequential Schedulers expects number of schedulers provided to "
                             f"be one more than the number of milestone points, but got "
                             f"number of schedulers {len(schedulers)} and the number of "
                             f"milestones to be equal to {len(milestones)}")
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            _set_group_value(group, "lr", group["initial_lr"])
        self._undo(self)
        first = self._schedulers[bisect_right(self._milestones, 0)]
        first._step_count = 0
        first._is_initial = True
        first.step()
        first._is_initial = False
        self._last_lr = first.get_last_lr()

    @staticmethod
    def _undo(sched) -> None:
        """Take back the step every (nested) scheduler made when it was built."""
        if hasattr(sched, "_schedulers"):
            for s in sched._schedulers:
                SequentialLR._undo(s)
        elif hasattr(sched, "last_epoch"):
            sched.last_epoch -= 1

    def step(self) -> None:  # type: ignore[override]
        """Advance one epoch with the scheduler whose turn it is."""
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        sched = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            # A restart at epoch 0, as PyTorch does it: neither a step of the count (the
            # order check runs on the next real step) nor a deprecated `step(epoch)` call.
            sched._update_lr(0)
        else:
            sched.step()
        self._last_lr = sched.get_last_lr()

    def state_dict(self) -> dict:
        """Own state plus each wrapped scheduler's `state_dict`."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore a `state_dict`, the wrapped schedulers' included."""
        state = dict(state_dict)
        scheds = state.pop("_schedulers")
        self.__dict__.update(state)
        for s, sd in zip(self._schedulers, scheds):
            s.load_state_dict(sd)


class ChainedScheduler(LRScheduler):
    """Step every scheduler of `schedulers` at each `step()`, so their changes compose."""

    def __init__(self, schedulers, optimizer: Optimizer | None = None) -> None:
        if len(schedulers) < 1:
            raise ValueError(f"{type(self).__name__} expects at least one scheduler to be "
                             "chained, but got no scheduler.")
        optimizer = optimizer or schedulers[0].optimizer
        for i, sched in enumerate(schedulers):
            if not hasattr(sched, "optimizer"):
                raise TypeError(f"{type(self).__name__} at index {i} should have "
                                "`optimizer` as its attribute.")
            if isinstance(sched, ReduceLROnPlateau):
                raise ValueError(f"{type(self).__name__} does not support "
                                 "`ReduceLROnPlateau` scheduler as it requires additional "
                                 "kwargs to be specified when calling `step`, but got one at "
                                 f"index {i} in the given schedulers sequence.")
            if sched.optimizer is not optimizer:
                raise ValueError(f"{type(self).__name__} expects all schedulers to belong to "
                                 f"the same optimizer, but got scheduler "
                                 f"{type(sched).__name__} at index {i} has "
                                 f"{sched.optimizer}, which is different from "
                                 f"{type(optimizer).__name__}.")
        self._schedulers = list(schedulers)
        self.optimizer = optimizer
        self._last_lr = [g["lr"] for g in self._schedulers[-1].optimizer.param_groups]

    def step(self) -> None:  # type: ignore[override]
        """Step each chained scheduler in turn."""
        for sched in self._schedulers:
            sched.step()
        self._last_lr = [g["lr"] for g in self._schedulers[-1].optimizer.param_groups]

    def state_dict(self) -> dict:
        """Own state plus each chained scheduler's `state_dict`."""
        return SequentialLR.state_dict(self)

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore a `state_dict`, the chained schedulers' included."""
        SequentialLR.load_state_dict(self, state_dict)


class ReduceLROnPlateau(LRScheduler):
    """Multiply the rate by `factor` once the metric passed to `step` has not improved for
    more than `patience` epochs (then wait `cooldown` epochs before counting again)."""

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1,
                 patience: int = 10, threshold: float = 1e-4, threshold_mode: str = "rel",
                 cooldown: int = 0, min_lr=0, eps: float = 1e-8) -> None:
        # Checks and attributes in PyTorch's order: the state_dict keys come out in it.
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        self.factor = factor
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        n = len(optimizer.param_groups)
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != n:
                raise ValueError(f"expected {n} min_lrs, got {len(min_lr)}")
            # No single bound to extend to param groups added later.
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * n
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = [g["lr"] for g in optimizer.param_groups]
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _init_is_better(self, mode: str, threshold: float, threshold_mode: str) -> None:
        """Check and set the comparison options (and the worst value for `mode`)."""
        if mode not in ("min", "max"):
            raise ValueError("mode " + mode + " is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError("threshold mode " + threshold_mode + " is unknown!")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def _reset(self) -> None:
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @property
    def in_cooldown(self) -> bool:
        """Whether the scheduler is waiting out a cooldown."""
        return self.cooldown_counter > 0

    def _is_better(self, a: float, best: float) -> bool:
        """Whether metric `a` improves on `best` by more than the threshold."""
        rel = self.threshold_mode == "rel"
        if self.mode == "min":
            return a < best * (1.0 - self.threshold) if rel else a < best - self.threshold
        return a > best * (self.threshold + 1.0) if rel else a > best + self.threshold

    def step(self, metrics, epoch: int | None = None) -> None:  # type: ignore[override]
        """Record this epoch's metric and reduce the rates when it has plateaued."""
        current = float(metrics)
        if epoch is not None:
            warnings.warn(_EPOCH_WARNING, UserWarning, stacklevel=2)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def _reduce_lr(self) -> None:
        """Multiply each group's rate by `factor`, down to its `min_lrs` bound."""
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"The number of param groups in the `optimizer` ({len(groups)}) differs "
                    f"from when `ReduceLROnPlateau` was initialized ({len(self.min_lrs)}), "
                    "usually due to a new param group being added to the optimizer. Please "
                    "modify the `min_lrs` field to match the length of the `optimizer` param "
                    "groups.")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for i, group in enumerate(groups):
            old = float(group["lr"])
            new = max(old * self.factor, self.min_lrs[i])
            if old - new > self.eps:
                _set_group_value(group, "lr", new)

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore a `state_dict`, the comparison options checked and set again."""
        super().load_state_dict(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)


# The cyclic family is written over the base class above.
from ._cyclic_lr import CosineAnnealingWarmRestarts, CyclicLR  # noqa: E402

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR",
           "LinearLR", "ExponentialLR", "SequentialLR", "CosineAnnealingLR", "ChainedScheduler",
           "ReduceLROnPlateau", "CyclicLR", "CosineAnnealingWarmRestarts", "OneCycleLR",
           "PolynomialLR"]
