"""Lazy modules: parameters whose shape is inferred from the first input.

A lazy module holds `UninitializedParameter`/`UninitializedBuffer` placeholders; a forward
pre-hook calls its `initialize_parameters(*inputs)` on the first call, which materialises
them and resets them, and the module then becomes its `cls_to_become` (`LazyLinear` becomes
`Linear`), as in PyTorch. A `load_state_dict` pre-hook materialises the placeholders the
state dict has values for, with those values' shapes, so a checkpoint loads into a module
that never ran; the class changes on the next forward, as in PyTorch.
"""

from __future__ import annotations

import itertools

from ...autograd.grad_mode import no_grad
from ..parameter import is_lazy


class LazyModuleMixin:
    """Infers parameter shapes on the first forward call, then becomes `cls_to_become`."""

    cls_to_become = None

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._load_hook = self._register_load_state_dict_pre_hook(self._lazy_load_hook)
        self._initialize_hook = self.register_forward_pre_hook(
            self._infer_parameters, with_kwargs=True)

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        # A placeholder is stored as itself (detaching one would be a use of it, which
        # raises), so the state dict of a module that never ran holds placeholders.
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = (
                    param if keep_vars or is_lazy(param) else param.detach())
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if keep_vars or is_lazy(buf) else buf.detach()

    def _lazy_load_hook(self, state_dict, prefix, local_metadata, strict, missing_keys,
                        unexpected_keys, error_msgs) -> None:
        """`load_state_dict` pre-hook: each placeholder the state dict holds a real tensor
        for takes that tensor's shape (the load then copies the values in)."""
        for name, param in itertools.chain(self._parameters.items(), self._buffers.items()):
            key = prefix + name
            if param is None or key not in state_dict or not is_lazy(param):
                continue
            value = state_dict[key]
            if not is_lazy(value):
                with no_grad():
                    param.materialize(value.shape)

    def has_uninitialized_params(self) -> bool:
        """Whether any parameter or buffer of this module is still a placeholder."""
        tensors = itertools.chain(self._parameters.values(), self._buffers.values())
        return any(is_lazy(t) for t in tensors)

    def initialize_parameters(self, *args, **kwargs) -> None:
        """Materialise the placeholders from the first input (each lazy class's own)."""
        raise NotImplementedError(
            f"initialize_parameters is not implemented for {self.__class__.__name__}")

    def _infer_parameters(self, module, args, kwargs=None) -> None:
        """The first forward's pre-hook: materialise from the inputs, drop both hooks, and
        become `cls_to_become`."""
        kwargs = kwargs or {}
        with no_grad():
            module.initialize_parameters(*args, **kwargs)
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        module._load_hook.remove()
        del module._initialize_hook
        del module._load_hook
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    def _replicate_for_data_parallel(self):
        raise RuntimeError(
            "Modules with uninitialized parameters can't be used with `DataParallel`. Run a "
            "dummy forward pass to correctly initialize the modules")
