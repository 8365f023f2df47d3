"""`torch.jit.freeze`: a scripted or traced module in eval mode with its weights as constants.

The frozen copy holds the parameters and buffers as plain tensors (no gradient, not listed by
`parameters()` or `buffers()`), so the program reads them as the constants PyTorch's freezing
folds into the graph; attributes named in `preserved_attrs` stay as they were. The module it
is made from is left unchanged.
"""

from __future__ import annotations

import copy


def _constants_of(module, keep: set, prefix: str = "") -> None:
    from ._script import ScriptModule

    for name in list(module._parameters) + list(module._buffers):
        if prefix + name in keep:
            continue
        table = module._parameters if name in module._parameters else module._buffers
        value = table.pop(name)
        if value is not None:
            value = value.detach()
        if isinstance(module, ScriptModule):
            module._jit_consts[name] = value  # what the interpreter's attribute reads find
        module.__dict__[name] = value
    for name, child in module._modules.items():
        if child is not None and prefix + name not in keep:
            _constants_of(child, keep, f"{prefix}{name}.")


def freeze(mod, preserved_attrs=None, optimize_numerics: bool = True):
    """A copy of `mod` (from `jit.script` or `jit.trace`, in eval mode) whose parameters and
    buffers are constants; `preserved_attrs` names attributes (or submodules) kept as they
    are. `optimize_numerics` is accepted (the arithmetic is unchanged either way)."""
    from ._script import ScriptModule

    if not isinstance(mod, ScriptModule) and "_jit_trace" not in getattr(mod, "__dict__", {}):
        raise RuntimeError(
            "Freezing expects a ScriptModule as input. Please use torch.jit.script or "
            "torch.jit.trace to script your 'nn.Module'.")
    if mod.training:
        raise RuntimeError(
            "Freezing is currently only implemented for modules in eval mode. Please call "
            ".eval() on your module before freezing.")
    frozen = copy.deepcopy(mod)
    _constants_of(frozen, set(preserved_attrs or ()))
    return frozen
