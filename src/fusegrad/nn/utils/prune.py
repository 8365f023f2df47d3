"""Pruning: zeroing entries of a parameter through a mask, as `torch.nn.utils.prune` does.

Pruning `name` of a module moves the parameter to `name + "_orig"`, keeps the mask in the
buffer `name + "_mask"`, makes `name` a plain attribute holding `orig * mask`, and registers
the method as a forward pre-hook that recomputes it before every call (so the gradient
reaches `name_orig` through the mask). Pruning the same tensor again combines the methods in
a `PruningContainer`, each later one acting on the entries the earlier ones kept.
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured",
           "L1Unstructured", "RandomStructured", "LnStructured", "CustomFromMask", "identity",
           "random_unstructured", "l1_unstructured", "random_structured", "ln_structured",
           "global_unstructured", "custom_from_mask", "remove", "is_pruned"]


class BasePruningMethod(ABC):
    """A way of computing a mask; subclasses define `compute_mask` and `PRUNING_TYPE`
    ("unstructured", "structured" with a `dim`, or "global")."""

    _tensor_name: str

    def __call__(self, module, inputs) -> None:
        """The forward pre-hook: the pruned tensor from the current original and mask."""
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The mask for `t`, given the mask of earlier pruning (`default_mask`)."""

    def apply_mask(self, module) -> Tensor:
        """`name_orig * name_mask` of `module`."""
        assert self._tensor_name is not None, (
            f"Module {module} has to be pruned")  # only hooks made by `apply` get here
        mask = getattr(module, self._tensor_name + "_mask")
        orig = getattr(module, self._tensor_name + "_orig")
        return orig * mask.to(dtype=orig.dtype)

    @classmethod
    def apply(cls, module, name: str, *args, importance_scores: Tensor | None = None,
              **kwargs):
        """Prune `module.name` with `cls(*args, **kwargs)` (after any earlier pruning of it);
        returns the method (a `PruningContainer` if the tensor was pruned before)."""
        previous = [(k, hook) for k, hook in module._forward_pre_hooks.items()
                    if isinstance(hook, BasePruningMethod) and hook._tensor_name == name]
        assert len(previous) <= 1, (
            f"Avoid adding multiple pruning hooks to the same tensor {name} of module "
            f"{module}. Use a PruningContainer.")
        for k, _ in previous:
            del module._forward_pre_hooks[k]
        method = cls(*args, **kwargs)
        method._tensor_name = name
        if previous:
            container = PruningContainer(previous[0][1])
            container.add_pruning_method(method)
            method = container
        orig = getattr(module, name)
        if importance_scores is not None:
            assert importance_scores.shape == orig.shape, (
                f"importance_scores should have the same shape as parameter {name} of "
                f"{module}, got {importance_scores.shape} vs {orig.shape}")
        else:
            importance_scores = orig
        first = not isinstance(method, PruningContainer)
        if first:
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = _ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        try:
            with no_grad():
                mask = method.compute_mask(importance_scores, default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            if first:  # leave the module as it was
                orig = getattr(module, name + "_orig")
                module.register_parameter(name, orig)
                del module._parameters[name + "_orig"]
            raise
        return method

    def prune(self, t: Tensor, default_mask: Tensor | None = None,
              importance_scores: Tensor | None = None) -> Tensor:
        """`t` with this method's mask applied (nothing registered anywhere)."""
        if importance_scores is not None:
            assert importance_scores.shape == t.shape, (
                "importance_scores should have the same shape as tensor t")
        else:
            importance_scores = t
        default_mask = default_mask if default_mask is not None else _ones_like(t)
        with no_grad():
            mask = self.compute_mask(importance_scores, default_mask=default_mask)
        return t * mask

    def remove(self, module) -> None:
        """Make the pruning permanent: `name` becomes a parameter again holding
        `orig * mask`, and `name_orig`, `name_mask` go."""
        assert self._tensor_name is not None, (
            f"Module {module} has to be pruned before pruning can be removed")
        name = self._tensor_name
        with no_grad():
            weight = self.apply_mask(module)
        if hasattr(module, name):
            delattr(module, name)
        orig = module._parameters[name + "_orig"]
        orig.data = weight.data
        del module._parameters[name + "_orig"]
        del module._buffers[name + "_mask"]
        setattr(module, name, orig)


def _ones_like(t: Tensor) -> Tensor:
    from ... import ones_like

    return ones_like(t)


class PruningContainer(BasePruningMethod):
    """The pruning methods applied in turn to one tensor; the last one computes the mask on
    the entries (unstructured), channels (structured) or whole tensor (global) the earlier
    masks kept."""

    def __init__(self, *args) -> None:
        self._pruning_methods: tuple = ()
        if len(args) == 1:
            self._tensor_name = args[0]._tensor_name
            self.add_pruning_method(args[0])
        else:
            for method in args:
                self.add_pruning_method(method)

    def add_pruning_method(self, method) -> None:
        """Append `method` (it must prune the same tensor)."""
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError(
                "Can only add pruning methods acting on the parameter named "
                f"'{self._tensor_name}' to PruningContainer {self}. Found "
                f"'{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self) -> int:
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The last method's mask, computed on what `default_mask` kept."""
        method = self._pruning_methods[-1]
        mask = default_mask.to(dtype=t.dtype)
        kind = method.PRUNING_TYPE
        if kind == "unstructured":
            keep = mask == 1
        elif kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError('Pruning methods of PRUNING_TYPE "structured" need to '
                                     "have the attribute `dim` defined.")
            n_dims = t.dim()
            dim = method.dim + n_dims if method.dim < 0 else method.dim
            if dim < 0:
                raise IndexError(f"Index is out of bounds for tensor of dimension {n_dims}")
            others = [d for d in range(n_dims) if d != dim]
            keep = [slice(None)] * n_dims
            keep[dim] = default_mask.sum(dim=others) != 0
            keep = tuple(keep)
        elif kind == "global":
            keep = (slice(None),) * t.dim()
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {kind}")
        partial = method.compute_mask(t[keep], default_mask=default_mask[keep])
        mask[keep] = partial.to(dtype=mask.dtype)
        return mask


class Identity(BasePruningMethod):
    """Prunes nothing: the mask is all ones (makes a tensor look pruned)."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """`default_mask` itself."""
        return default_mask

    @classmethod
    def apply(cls, module, name: str):
        """Register the identity pruning of `module.name`."""
        return super().apply(module, name)


def _structured_count(t: Tensor, dim: int, amount) -> tuple:
    """The number of channels of `t` along `dim` and how many of them `amount` prunes,
    both checked."""
    _check_structured(t, dim)
    size = t.shape[dim]
    k = _count(amount, size)
    _check_count(k, size)
    return size, k


def _unstructured_mask(amount, default_mask: Tensor, scores, largest: bool) -> Tensor:
    """`default_mask` with the `amount` entries of highest (`largest`) or lowest `scores()`
    zeroed; the scores are drawn only when something is pruned."""
    from ... import topk

    size = default_mask.nelement()
    k = _count(amount, size)
    _check_count(k, size)
    mask = default_mask.clone()
    if k:
        picked = topk(scores().view(-1), k=k, largest=largest).indices
        mask.view(-1)[picked] = 0
    return mask


class RandomUnstructured(BasePruningMethod):
    """Prunes `amount` (a fraction or a count) of the entries, chosen at random."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount) -> None:
        _check_amount(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """Zero the entries with the largest of uniform random draws."""
        from ... import rand_like

        return _unstructured_mask(self.amount, default_mask, lambda: rand_like(t), True)

    @classmethod
    def apply(cls, module, name: str, amount):
        """Prune `amount` random entries of `module.name`."""
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """Prunes `amount` of the entries with the smallest magnitude."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount) -> None:
        _check_amount(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """Zero the `amount` smallest |t|."""
        return _unstructured_mask(self.amount, default_mask, t.abs, False)

    @classmethod
    def apply(cls, module, name: str, amount, importance_scores: Tensor | None = None):
        """Prune the `amount` smallest entries of `module.name` (or of `importance_scores`)."""
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class RandomStructured(BasePruningMethod):
    """Prunes `amount` of the channels along `dim`, chosen at random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim: int = -1) -> None:
        _check_amount(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """Keep the channels whose random draw is above the k-th smallest."""
        from ... import kthvalue, rand

        size, k = _structured_count(t, self.dim, self.amount)
        if not k:
            return default_mask
        draws = rand(size)
        keep = draws > kthvalue(draws, k=k).values
        return _channel_mask(t, self.dim, keep) * default_mask.to(dtype=t.dtype)

    @classmethod
    def apply(cls, module, name: str, amount, dim: int = -1):
        """Prune `amount` random channels of `module.name` along `dim`."""
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    """Prunes `amount` of the channels along `dim` with the smallest `n`-norm."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim: int = -1) -> None:
        _check_amount(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """Keep the channels with the largest norms."""
        from ... import norm, topk

        size, k = _structured_count(t, self.dim, self.amount)
        dims = list(range(t.dim()))
        dims.remove(dims[self.dim])
        kept = topk(norm(t, p=self.n, dim=dims), k=size - k, largest=True).indices
        if not k:
            return default_mask
        return _channel_mask(t, self.dim, kept) * default_mask.to(dtype=t.dtype)

    @classmethod
    def apply(cls, module, name: str, amount, n, dim: int,
              importance_scores: Tensor | None = None):
        """Prune the `amount` channels of `module.name` along `dim` of smallest `n`-norm."""
        return super().apply(module, name, amount=amount, n=n, dim=dim,
                             importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes with a given mask."""

    PRUNING_TYPE = "global"

    def __init__(self, mask: Tensor) -> None:
        self.mask = mask

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """`default_mask * mask`."""
        assert default_mask.shape == self.mask.shape
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name: str, mask: Tensor):
        """Prune `module.name` with `mask`."""
        return super().apply(module, name, mask=mask)


def _channel_mask(t: Tensor, dim: int, keep: Tensor) -> Tensor:
    """Ones in the channels `keep` (a boolean mask or indices) of `dim`, zeros elsewhere."""
    from ... import zeros_like

    mask = zeros_like(t)
    index = [slice(None)] * t.dim()
    index[dim] = keep
    mask[tuple(index)] = 1
    return mask


def _check_amount(amount) -> None:
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
            not isinstance(amount, numbers.Integral) and not 0.0 <= float(amount) <= 1.0):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a "
                         "non-negative integer")


def _count(amount, size: int) -> int:
    return amount if isinstance(amount, numbers.Integral) else round(amount * size)


def _check_count(k: int, size: int) -> None:
    if k > size:
        raise ValueError(f"amount={k} should be smaller than the number of parameters to "
                         f"prune={size}")


def _check_structured(t: Tensor, dim: int) -> None:
    if t.dim() <= 1:
        raise ValueError("Structured pruning can only be applied to multidimensional tensors. "
                         f"Found tensor of shape {t.shape} with {t.dim()} dims")
    if dim >= t.dim():
        raise IndexError(f"Invalid index {dim} for tensor of size {t.shape}")


def identity(module, name: str):
    """Prune `module.name` with an all-ones mask; returns `module`."""
    Identity.apply(module, name)
    return module


def random_unstructured(module, name: str, amount):
    """Prune `amount` random entries of `module.name`; returns `module`."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name: str, amount, importance_scores: Tensor | None = None):
    """Prune the `amount` entries of `module.name` of smallest magnitude; returns `module`."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name: str, amount, dim: int):
    """Prune `amount` random channels of `module.name` along `dim`; returns `module`."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name: str, amount, n, dim: int,
                  importance_scores: Tensor | None = None):
    """Prune the `amount` channels along `dim` of smallest `n`-norm; returns `module`."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module, name: str, mask: Tensor):
    """Prune `module.name` with `mask`; returns `module`."""
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs) -> None:
    """Prune the (module, name) pairs of `parameters` as one vector with the unstructured
    `pruning_method(**kwargs)`, so that the amount is counted over all of them."""
    from .convert import parameters_to_vector

    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    parameters = list(parameters)
    scores = parameters_to_vector([importance_scores.get((m, n), getattr(m, n))
                                   for m, n in parameters])
    masks = parameters_to_vector([getattr(m, n + "_mask") if hasattr(m, n + "_mask")
                                  else _ones_like(getattr(m, n)) for m, n in parameters])
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError('Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. '
                        f"Found method {pruning_method} of type {method.PRUNING_TYPE}")
    container = PruningContainer()
    container._tensor_name = "temp"
    container.add_pruning_method(method)
    with no_grad():
        final = container.compute_mask(scores, masks)
    start = 0
    for m, n in parameters:
        param = getattr(m, n)
        count = param.numel()
        custom_from_mask(m, n, mask=final[start:start + count].view_as(param))
        start += count


def remove(module, name: str):
    """Make the pruning of `module.name` permanent and drop its hook; returns `module`."""
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning "
                     "can be removed")


def is_pruned(module) -> bool:
    """True if `module` or a descendant has a pruning hook."""
    return any(isinstance(hook, BasePruningMethod)
               for m in module.modules() for hook in m._forward_pre_hooks.values())
