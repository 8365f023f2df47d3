"""What fx needs from `nn.Module`, written against PyTorch's Module interface.

fx works with any object that looks like an `nn.Module` (`_modules`, `named_modules`,
`named_parameters`, `named_buffers`, `forward`, `__call__`). `Module` is `fusegrad.nn.Module`
when that exists, otherwise `ModuleShim`, a minimal stand-in with the same storage layout.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def is_module(obj: Any) -> bool:
    """Whether `obj` looks like an nn.Module."""
    return not isinstance(obj, type) and hasattr(obj, "_modules") and hasattr(obj, "forward")


class ModuleShim:
    """The part of nn.Module's behaviour GraphModule relies on (used until fusegrad.nn exists).

    Submodules, parameters and buffers live in `_modules`, `_parameters` and `_buffers` and are
    reached through `__getattr__`, as in PyTorch."""

    def __init__(self) -> None:
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "training", True)

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        if is_module(value):
            d.pop(name, None)
            d["_modules"][name] = value
            return
        d["_modules"].pop(name, None)
        if name in d["_buffers"]:
            d["_buffers"][name] = value
            return
        if name in d["_parameters"]:
            d["_parameters"][name] = value
            return
        object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for store in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__[store]:
                del self.__dict__[store][name]
                return
        object.__delattr__(self, name)

    def register_buffer(self, name: str, tensor: Any, persistent: bool = True) -> None:
        """Store `tensor` as a buffer called `name`."""
        self.__dict__.pop(name, None)
        self._buffers[name] = tensor

    def register_parameter(self, name: str, param: Any) -> None:
        """Store `param` as a parameter called `name`."""
        self.__dict__.pop(name, None)
        self._parameters[name] = param

    def add_module(self, name: str, module: Any) -> None:
        """Store `module` as a submodule called `name`."""
        self._modules[name] = module

    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Any]]:
        """(qualified name, module) for this module and every submodule."""
        return _named_modules(self, memo, prefix, remove_duplicate)

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Any]]:
        """(qualified name, parameter) pairs."""
        return _named_members(self, "_parameters", recurse)

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Any]]:
        """(qualified name, buffer) pairs."""
        return _named_members(self, "_buffers", recurse)

    def parameters(self, recurse: bool = True) -> Iterator[Any]:
        """All parameters."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def get_submodule(self, target: str) -> Any:
        """The submodule at dotted path `target` ('' is this module)."""
        mod = self
        for atom in target.split(".") if target else ():
            if atom not in getattr(mod, "_modules", {}):
                raise AttributeError(f"{type(mod).__name__} has no attribute `{atom}`")
            mod = mod._modules[atom]
        return mod

    def train(self, mode: bool = True) -> ModuleShim:
        """Set training mode on this module and its children."""
        for _, m in self.named_modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> ModuleShim:
        """Evaluation mode."""
        return self.train(False)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Subclasses define the computation."""
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  '"forward" function')

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)


def _named_modules(mod, memo, prefix, remove_duplicate):
    memo = set() if memo is None else memo
    if remove_duplicate and id(mod) in memo:
        return
    memo.add(id(mod))
    yield prefix, mod
    for name, child in getattr(mod, "_modules", {}).items():
        if child is None:
            continue
        yield from _named_modules(child, memo, f"{prefix}.{name}" if prefix else name,
                                  remove_duplicate)


def _named_members(root, store: str, recurse: bool):
    seen: set[int] = set()
    mods = _named_modules(root, None, "", True) if recurse else [("", root)]
    for prefix, mod in mods:
        for name, value in getattr(mod, store, {}).items():
            if value is None or id(value) in seen:
                continue
            seen.add(id(value))
            yield (f"{prefix}.{name}" if prefix else name), value


def named_modules(mod: Any) -> Iterator[tuple[str, Any]]:
    """`mod.named_modules()`, for any Module-like object."""
    if hasattr(mod, "named_modules"):
        return mod.named_modules()
    return _named_modules(mod, None, "", True)


def named_tensors(mod: Any) -> Iterator[tuple[str, Any]]:
    """Parameters, buffers and plain tensor attributes of `mod` and its submodules."""
    from .._tensor import Tensor

    for prefix, m in named_modules(mod):
        seen = set()
        for store in ("_parameters", "_buffers"):
            for name, value in (getattr(m, store, None) or {}).items():
                if isinstance(value, Tensor):
                    seen.add(name)
                    yield (f"{prefix}.{name}" if prefix else name), value
        for name, value in vars(m).items():
            if isinstance(value, Tensor) and name not in seen:
                yield (f"{prefix}.{name}" if prefix else name), value


def _base() -> type:
    try:
        from ..nn import Module
    except ImportError:
        return ModuleShim
    return Module


Module: type = _base()
