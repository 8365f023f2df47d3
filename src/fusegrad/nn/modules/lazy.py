"""Lazy modules: parameters whose shape is inferred from the first input.

A lazy module holds `UninitializedParameter`/`UninitializedBuffer` placeholders; a forward
pre-hook calls its `initialize_parameters(*inputs)` on the first call, which materialises
them and resets them, and the module then becomes its `cls_to_become` (`LazyLinear` becomes
`Linear`), as in PyTorch.
"""

from __future__ import annotations

from ...autograd.grad_mode import no_grad
from ..parameter import is_lazy


class LazyModuleMixin:
    """Infers parameter shapes on the first forward call, then becomes `cls_to_become`."""

    cls_to_become = None

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(
            LazyModuleMixin._infer_parameters, with_kwargs=True)

    def has_uninitialized_params(self) -> bool:
        """Whether any parameter or buffer of this module is still a placeholder."""
        tensors = list(self._parameters.values()) + list(self._buffers.values())
        return any(is_lazy(t) for t in tensors)

    def initialize_parameters(self, *args, **kwargs) -> None:
        """Materialise the placeholders from the first input (each lazy class's own)."""
        raise NotImplementedError(
            f"initialize_parameters is not implemented for {self.__class__.__name__}")

    @staticmethod
    def _infer_parameters(module, args, kwargs=None):
        kwargs = kwargs or {}
        with no_grad():
            module.initialize_parameters(*args, **kwargs)
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {module._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        del module._initialize_hook
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become
