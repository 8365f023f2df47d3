"""`NamedMemberAccessor`: get, set, swap and delete a module's tensors and submodules by
dotted name, caching the submodule lookups (`torch.nn.utils._named_member_accessor`, which
functional-call style libraries import)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..._tensor import Tensor
from ..modules.module import Module

# Stands for "no such attribute" in swaps (given: delete it; returned: there was none).
_MISSING: Tensor = object()  # type: ignore[assignment]


def _check_member_name(name: str, what: str) -> None:
    if "." in name:
        raise KeyError(f'{what} name can\'t contain "."')
    if name == "":
        raise KeyError(f'{what} name can\'t be empty string ""')


def set_tensor(module: Module, name: str, tensor: Tensor | None) -> None:
    """Put `tensor` at `module.<name>`: into its parameters or buffers when the name is one
    (bypassing the type checks of assignment), else as an attribute."""
    if not isinstance(module, Module):
        raise TypeError(f"{module} is not an instance of torch.nn.Module")
    if tensor is not None and not isinstance(tensor, Tensor):
        raise TypeError(f"{tensor} is not an instance of torch.Tensor")
    _check_member_name(name, "tensor")
    if name in module._parameters:
        module._parameters[name] = tensor
    elif name in module._buffers:
        module._buffers[name] = tensor
    else:
        setattr(module, name, tensor)


def swap_tensor(module: Module, name: str, tensor: Tensor | None,
                allow_missing: bool = False) -> Tensor | None:
    """Put `tensor` at `module.<name>` (`_MISSING`: delete it) and return what was there
    (`_MISSING` when nothing was and `allow_missing`)."""
    if not isinstance(module, Module):
        raise TypeError(f"{module} is not an instance of torch.nn.Module")
    if tensor is not _MISSING and tensor is not None and not isinstance(tensor, Tensor):
        raise TypeError(f"{tensor} is not an instance of torch.Tensor")
    _check_member_name(name, "tensor")
    for table in (module._parameters, module._buffers):
        if name in table:
            original = table[name]
            if tensor is _MISSING:
                del table[name]
            else:
                table[name] = tensor
            return original
    if hasattr(module, name):
        original = getattr(module, name)
    elif allow_missing:
        original = _MISSING
    else:
        raise AttributeError(f"{module._get_name()} has no attribute `{name}`")
    if original is not _MISSING and original is not None and not isinstance(original, Tensor):
        raise TypeError(f"attribute `{name}`: {original} is not an instance of torch.Tensor")
    if tensor is not _MISSING:
        setattr(module, name, tensor)
    elif hasattr(module, name):
        delattr(module, name)
    return original


def swap_submodule(module: Module, name: str, submodule: Module) -> Module:
    """Replace the existing child `name` of `module` by `submodule`; returns the old one."""
    if not isinstance(module, Module):
        raise TypeError(f"{module} is not an instance of torch.nn.Module")
    if not isinstance(submodule, Module):
        raise TypeError(f"{submodule} is not an instance of torch.nn.Module")
    _check_member_name(name, "submodule")
    if name not in module._modules:
        raise KeyError(f"submodule {name} does not exist")
    original = module._modules[name]
    if not isinstance(original, Module):
        raise TypeError(f"{name} attribute is not an instance of torch.nn.Module")
    module._modules[name] = submodule
    return original


def _same_length(names, values) -> tuple[list, list]:
    names = names if isinstance(names, (list, tuple)) else list(names)
    values = values if isinstance(values, (list, tuple)) else list(values)
    if len(names) != len(values):
        raise AssertionError(f"names and values must have the same length, got {len(names)} "
                             f"names and {len(values)} values")
    return names, values


class NamedMemberAccessor:
    """Dotted-name access to the tensors and submodules of `module`; the submodules found
    on the way are remembered (`memo`), so repeated lookups are cheap."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self.memo: dict[str, Module] = {}

    def get_submodule(self, name: str) -> Module:
        """The submodule at dotted path `name` ('' is the module itself)."""
        if not name:
            return self.module
        found = self.memo.get(name)
        if found is not None:
            return found
        prefix, _, attr = name.rpartition(".")
        parent = self.get_submodule(prefix)
        try:
            submodule = getattr(parent, attr)
        except AttributeError as e:
            raise AttributeError(f"{parent._get_name()} has no attribute `{attr}`") from e
        if not isinstance(submodule, Module):
            raise TypeError(
                f"submodule `{name}`: {submodule} is not an instance of torch.nn.Module")
        self.memo[name] = submodule
        return submodule

    def swap_submodule(self, path: str, value: Module) -> Module:
        """Replace the submodule at `path` by `value`; returns the old one."""
        prefix, _, attr = path.rpartition(".")
        return swap_submodule(self.get_submodule(prefix), attr, value)

    def get_tensor(self, name: str) -> Tensor | None:
        """The tensor at dotted path `name`."""
        prefix, _, attr = name.rpartition(".")
        owner = self.get_submodule(prefix)
        try:
            tensor = getattr(owner, attr)
        except AttributeError as e:
            raise AttributeError(f"{owner._get_name()} has no attribute `{name}`") from e
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"{tensor} is not an instance of torch.Tensor")
        return tensor

    def set_tensor(self, name: str, value: Tensor | None) -> None:
        """Put `value` at dotted path `name` (see `set_tensor`)."""
        prefix, _, attr = name.rpartition(".")
        set_tensor(self.get_submodule(prefix), attr, value)

    def del_tensor(self, name: str) -> None:
        """Delete the attribute at dotted path `name`."""
        prefix, _, attr = name.rpartition(".")
        owner = self.get_submodule(prefix)
        try:
            delattr(owner, attr)
        except AttributeError as e:
            raise AttributeError(f"{owner._get_name()} has no attribute `{name}`") from e

    def swap_tensor(self, name: str, value: Tensor | None,
                    allow_missing: bool = False) -> Tensor | None:
        """Put `value` at dotted path `name`; returns what was there (see `swap_tensor`)."""
        prefix, _, attr = name.rpartition(".")
        return swap_tensor(self.get_submodule(prefix), attr, value,
                           allow_missing=allow_missing)

    def get_tensors(self, names: Iterable[str]) -> list:
        """The tensors at each of `names`."""
        return [self.get_tensor(name) for name in names]

    def set_tensors(self, names: Iterable[str], values: Iterable[Tensor]) -> None:
        """`set_tensor` for each (name, value) pair; the two must be as long."""
        names, values = _same_length(names, values)
        for name, value in zip(names, values):
            self.set_tensor(name, value)

    def set_tensors_dict(self, named_tensors: dict) -> None:
        """`set_tensor` for each entry of `named_tensors`."""
        for name, value in named_tensors.items():
            self.set_tensor(name, value)

    def del_tensors(self, names: Iterable[str]) -> None:
        """`del_tensor` for each of `names`."""
        for name in names:
            self.del_tensor(name)

    def swap_tensors(self, names: Iterable[str], values: Iterable[Tensor],
                     allow_missing: bool = False) -> list:
        """`swap_tensor` for each (name, value) pair; returns the old tensors."""
        names, values = _same_length(names, values)
        return [self.swap_tensor(name, value, allow_missing=allow_missing)
                for name, value in zip(names, values)]

    def swap_tensors_dict(self, named_tensors: dict,
                          allow_missing: bool = False) -> tuple[dict, list]:
        """Swap in every entry of `named_tensors`: (the old tensors by name, the names that
        had none). On an error, or a missing name without `allow_missing`, everything
        swapped so far is swapped back first."""
        originals: dict = {}
        missing: list = []

        def restore() -> None:
            for key, old in originals.items():
                self.swap_tensor(key, old, allow_missing=True)

        try:
            for name, tensor in named_tensors.items():
                old = self.swap_tensor(name, tensor, allow_missing=True)
                if old is _MISSING:
                    missing.append(name)
                originals[name] = old
        except Exception:
            restore()
            raise
        if missing and not allow_missing:
            restore()
            raise RuntimeError(f"Missing key(s): {', '.join(map(repr, missing))}.")
        return originals, missing

    def check_keys(self, keys: Iterable[str]) -> tuple[list, list]:
        """(sorted names of the module's tensors not in `keys`, sorted `keys` that name no
        tensor of the module)."""
        keys = set(keys)
        valid = {name for name, _ in self.named_tensors(remove_duplicate=False)}
        return sorted(valid - keys), sorted(keys - valid)

    def named_parameters(self, remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """The module's `named_parameters`."""
        yield from self.module.named_parameters(remove_duplicate=remove_duplicate)

    def named_buffers(self, remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """The module's `named_buffers`."""
        yield from self.module.named_buffers(remove_duplicate=remove_duplicate)

    def named_tensors(self, remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """The module's parameters, then its buffers."""
        yield from self.module.named_parameters(remove_duplicate=remove_duplicate)
        yield from self.module.named_buffers(remove_duplicate=remove_duplicate)

    def named_modules(self, remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """The module's `named_modules`."""
        yield from self.module.named_modules(remove_duplicate=remove_duplicate)
