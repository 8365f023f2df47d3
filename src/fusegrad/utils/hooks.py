"""`fusegrad.utils.hooks`: `RemovableHandle`, what every `register_*hook` returns; the
full-backward-hook machinery of modules as `BackwardHook`; marking hooks that are not meant
to be saved with a tensor."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from ..autograd.graph import RemovableHandle
from ..nn.modules.module import _BackwardHook

__all__ = ["RemovableHandle", "unserializable_hook", "warn_if_has_hooks", "BackwardHook"]


def unserializable_hook(f: Callable) -> Callable:
    """Mark `f` as a tensor hook that is not saved with the tensor, so that
    `warn_if_has_hooks` keeps quiet about it; returns `f`."""
    f.__torch_unserializable__ = True
    return f


def _tensor_hooks(tensor) -> dict:
    """The hooks `register_hook` put on `tensor` (by handle id)."""
    hooks = getattr(tensor, "_backward_hooks", None)
    if hooks is not None:
        return hooks
    if tensor.grad_fn is None:
        table = tensor._hooks
        return table.get(0, {}) if table else {}
    pre = tensor.grad_fn._extras().tensor_pre_hooks
    return pre.get(tensor._output_nr, {}) if pre else {}


def warn_if_has_hooks(tensor) -> None:
    """Warn for each hook on `tensor` that saving the tensor will drop (hooks marked with
    `unserializable_hook` excepted)."""
    for hook in _tensor_hooks(tensor).values():
        if not hasattr(hook, "__torch_unserializable__"):
            warnings.warn(
                f"backward hook {hook!r} on tensor will not be serialized.  If this is "
                "expected, you can decorate the function with "
                "@torch.utils.hooks.unserializable_hook to suppress this warning",
                stacklevel=2)


class BackwardHook(_BackwardHook):
    """A module's full backward hooks around one call: `setup_input_hook(args)` before the
    forward and `setup_output_hook(result)` after it wrap the tensors in identity autograd
    nodes; when the gradients pass through them, `user_pre_hooks(module, grad_output)` and
    then `user_hooks(module, grad_input, grad_output)` run, as `Module.__call__` runs the
    module's registered hooks."""

    def __init__(self, module, user_hooks: list, user_pre_hooks: list) -> None:
        super().__init__(module, list(user_hooks), list(user_pre_hooks))

    def setup_input_hook(self, args: Any) -> Any:
        """`args` with its tensors wrapped (a lone tensor stays a lone tensor)."""
        if isinstance(args, tuple):
            return self.setup_inputs(args)
        return self.setup_inputs((args,))[0]

    def setup_output_hook(self, args: Any) -> Any:
        """The forward's result with its tensors wrapped."""
        return self.setup_outputs(args)
