"""Containers: Container (deprecated), Sequential, ModuleList, ModuleDict, ParameterList,
ParameterDict."""

from __future__ import annotations

import operator
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping

from ..._tensor import Tensor
from ..parameter import Parameter
from .module import Module, _addindent


def _type_repr(cls: type) -> str:
    """`str(cls)` as PyTorch shows it: fusegrad's classes under torch's module names."""
    module = cls.__module__
    if module == "fusegrad" or module.startswith("fusegrad."):
        module = "torch" + module[len("fusegrad"):]
    if module == "builtins":
        return f"<class '{cls.__qualname__}'>"
    return f"<class '{module}.{cls.__qualname__}'>"



def _copy_to_script_wrapper(fn):
    """`fn` itself (PyTorch marks container methods for TorchScript with it)."""
    return fn


def _list_key(idx, n: int) -> str:
    """The key under which a list container of `n` entries keeps entry `idx` (negative
    counting from the end); PyTorch's IndexError out of range."""
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range")
    return str(idx % n)

class Container(Module):
    """The deprecated module holding the submodules given as keywords."""

    def __init__(self, **kwargs) -> None:
        warnings.warn("`nn.Container` is deprecated. All of its functionality is now "
                      "implemented in `nn.Module`. Subclass that instead.", FutureWarning,
                      stacklevel=2)
        super().__init__()
        for key, value in kwargs.items():
            self.add_module(key, value)


class Sequential(Module):
    """Modules called in order, each on the previous one's output."""

    def __init__(self, *args) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def _get_item_by_idx(self, iterator, idx):
        size = len(self)
        idx = operator.index(idx)
        if not -size <= idx < size:
            raise IndexError(f"index {idx} is out of range")
        idx %= size
        return next(v for i, v in enumerate(iterator) if i == idx)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self.__class__(OrderedDict(list(self._modules.items())[idx]))
        return self._get_item_by_idx(self._modules.values(), idx)

    def __setitem__(self, idx: int, module: Module) -> None:
        key = self._get_item_by_idx(self._modules.keys(), idx)
        setattr(self, key, module)

    def __delitem__(self, idx) -> None:
        if isinstance(idx, slice):
            for key in list(self._modules.keys())[idx]:
                delattr(self, key)
        else:
            delattr(self, self._get_item_by_idx(self._modules.keys(), idx))
        # Renumber, as PyTorch does, so that keys stay 0..n-1.
        items = list(self._modules.values())
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __add__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class, but "
                             f"{_type_repr(type(other))} is given.")
        out = Sequential()
        for m in list(self) + list(other):
            out.append(m)
        return out

    def __iadd__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class, but "
                             f"{_type_repr(type(other))} is given.")
        offset = len(self)
        for i, m in enumerate(other):  # `s += s` fails as PyTorch's does (dict changed)
            self.add_module(str(i + offset), m)
        return self

    def _check_factor(self, other) -> None:
        if not isinstance(other, int):
            raise TypeError(f"unsupported operand type(s) for *: {_type_repr(type(self))} and "
                            f"{_type_repr(type(other))}")
        if other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for "
                             f"{_type_repr(type(self))}")

    def __mul__(self, other: int) -> Sequential:
        """A new Sequential of these modules (the same objects) `other` times over."""
        self._check_factor(other)
        out = Sequential()
        modules = list(self)
        for i, m in enumerate(modules * other):
            out.add_module(str(i), m)
        return out

    def __rmul__(self, other: int) -> Sequential:
        return self.__mul__(other)

    def __imul__(self, other: int) -> Sequential:
        self._check_factor(other)
        n = len(self)
        # PyTorch repeats the entries under the keys "0".."n-1" (whatever the names are).
        for k in range(1, other):
            for i in range(n):
                self.add_module(str(k * n + i), self._modules[str(i)])
        return self

    def pop(self, key: int | slice) -> Module:
        """Remove and return the module at `key` (a Sequential for a slice); the rest are
        renumbered."""
        v = self[key]
        del self[key]
        return v

    def __dir__(self):
        return [key for key in super().__dir__() if not key.isdigit()]

    def append(self, module: Module) -> Sequential:
        """Add `module` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        """Insert `module` before position `index`; returns self."""
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {_type_repr(Module)}")
        items = list(self._modules.values())
        n = len(items)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        items.insert(index if index >= 0 else index + n, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)
        return self

    def extend(self, sequential: Iterable[Module]) -> Sequential:
        """Append each module of `sequential`; returns self."""
        for m in sequential:
            self.append(m)
        return self

    def forward(self, input):
        """Run the modules in order."""
        for module in self._modules.values():
            input = module(input)
        return input


class ModuleList(Module):
    """A list of modules, registered as children."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _index(self, idx) -> str:
        return _list_key(idx, len(self))

    def _get_abs_string_index(self, idx) -> str:
        """The key of entry `idx` (negative from the end); IndexError out of range."""
        return _list_key(idx, len(self))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self.__class__(list(self._modules.values())[idx])
        return self._modules[self._index(idx)]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, self._index(idx), module)

    def __delitem__(self, idx) -> None:
        if isinstance(idx, slice):
            for k in range(len(self._modules))[idx]:
                delattr(self, str(k))
        else:
            delattr(self, self._index(idx))
        items = list(self._modules.values())
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        out = ModuleList()
        for m in list(self) + list(other):
            out.append(m)
        return out

    def insert(self, index: int, module: Module) -> None:
        """Insert `module` before position `index`."""
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)

    def append(self, module: Module) -> ModuleList:
        """Add `module` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        """Append each of `modules`; returns self."""
        if not isinstance(modules, Iterable):
            raise TypeError("ModuleList.extend should be called with an iterable, but got "
                            + type(modules).__name__)
        for m in modules:
            self.append(m)
        return self

    def pop(self, key: int) -> Module:
        """Remove and return the module at `key`."""
        m = self[key]
        del self[key]
        return m

    def _child_lines(self) -> list:
        # Runs of identical reprs print once, as "(0-2): 3 x Linear(...)".
        reprs = [repr(m) for m in self]
        lines = []
        start = 0
        for i in range(1, len(reprs) + 1):
            if i < len(reprs) and reprs[i] == reprs[start]:
                continue
            body = _addindent(reprs[start], 2)
            if i - start > 1:
                lines.append(f"({start}-{i - 1}): {i - start} x {body}")
            else:
                lines.append(f"({start}): {body}")
            start = i
        return lines

    def __repr__(self) -> str:
        lines = self._child_lines()
        if not lines:
            return self._get_name() + "()"
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """A dict of modules, registered as children (insertion ordered)."""

    def __init__(self, modules: Mapping[str, Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def clear(self) -> None:
        """Remove every module."""
        self._modules.clear()

    def pop(self, key: str) -> Module:
        """Remove and return the module under `key`."""
        m = self[key]
        del self[key]
        return m

    def keys(self):
        """The keys."""
        return self._modules.keys()

    def items(self):
        """(key, module) pairs."""
        return self._modules.items()

    def values(self):
        """The modules."""
        return self._modules.values()

    def update(self, modules) -> None:
        """Add modules from a mapping (or ModuleDict) or an iterable of (key, module)
        pairs, with PyTorch's errors for anything else."""
        if not isinstance(modules, Iterable):
            raise TypeError("ModuleDict.update should be called with an iterable of key/value "
                            "pairs, but got " + type(modules).__name__)
        if isinstance(modules, (Mapping, ModuleDict)):
            for key, m in modules.items():
                self[key] = m
            return
        _update_from_pairs(self, modules)


class ParameterList(Module):
    """A list of parameters, registered on the module (tensors become Parameters; other
    values are kept as plain attributes, as in PyTorch)."""

    def __init__(self, values: Iterable | None = None) -> None:
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def _index(self, idx) -> str:
        return _list_key(idx, len(self))

    def _get_abs_string_index(self, idx) -> str:
        """The key of entry `idx` (negative from the end); IndexError out of range."""
        return _list_key(idx, len(self))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            out = self.__class__()
            for i in range(*idx.indices(len(self))):
                out.append(self[i])
            return out
        return getattr(self, self._index(idx))

    def __setitem__(self, idx: int, param) -> None:
        key = self._index(idx)
        if isinstance(param, Tensor) and not isinstance(param, Parameter):
            param = Parameter(param)
        setattr(self, key, param)

    def __len__(self) -> int:
        return self._size

    def __iter__(self):
        return iter(self[i] for i in range(len(self)))

    def __iadd__(self, parameters: Iterable) -> ParameterList:
        return self.extend(parameters)

    def __dir__(self):
        return [key for key in super().__dir__() if not key.isdigit()]

    def append(self, value) -> ParameterList:
        """Add a value (a tensor becomes a Parameter) at the end; returns self."""
        new_idx = len(self)
        self._size += 1
        self[new_idx] = value
        return self

    def extend(self, values: Iterable) -> ParameterList:
        """Append each of `values` (an iterable, not a tensor); returns self."""
        if not isinstance(values, Iterable) or isinstance(values, Tensor):
            raise TypeError("ParameterList.extend should be called with an iterable, but got "
                            + type(values).__name__)
        for value in values:
            self.append(value)
        return self

    def extra_repr(self) -> str:
        # PyTorch names the dtype here (`torch.float32`), the tensor type in ParameterDict's.
        return "\n".join(_entry_line(k, p, str(p.dtype) if isinstance(p, Tensor) else "")
                         for k, p in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


def _entry_line(key, p, kind: str) -> str:
    """One entry of ParameterList's or ParameterDict's repr, as PyTorch prints it."""
    if not isinstance(p, Tensor):
        return f"  ({key}): Object of type: {type(p).__name__}"
    size = "x".join(str(s) for s in p.size())
    return f"  ({key}): {'Parameter' if isinstance(p, Parameter) else 'Tensor'} containing: " \
        f"[{kind} of size {size}]"


class ParameterDict(Module):
    """An ordered dict of parameters, registered on the module (tensors become Parameters;
    other values are kept as plain attributes, as in PyTorch)."""

    def __init__(self, parameters=None) -> None:
        super().__init__()
        self._keys: dict = {}
        if parameters is not None:
            self.update(parameters)

    @staticmethod
    def _key_to_attr(key) -> str:
        if not isinstance(key, str):
            raise TypeError("Index given to ParameterDict cannot be used as a key as it is not "
                            f"a string (type is '{type(key).__name__}'). Open an issue on "
                            "github if you need non-string keys.")
        return key

    def __getitem__(self, key: str):
        return getattr(self, self._key_to_attr(key))

    def __setitem__(self, key: str, value) -> None:
        # The key is recorded first, even when it proves invalid (PyTorch's order).
        self._keys[key] = None
        attr = self._key_to_attr(key)
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, attr, value)

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, self._key_to_attr(key))

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(self._keys)

    def __contains__(self, key) -> bool:
        return key in self._keys

    def copy(self) -> ParameterDict:
        """A new ParameterDict holding the same values."""
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def setdefault(self, key: str, default=None):
        """The value under `key`, stored as `default` first if absent."""
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self) -> None:
        """Remove every entry."""
        for k in self._keys.copy():
            del self[k]

    def pop(self, key: str):
        """Remove and return the value under `key`."""
        v = self[key]
        del self[key]
        return v

    def popitem(self) -> tuple:
        """Remove and return the last inserted (key, value) pair."""
        k, _ = self._keys.popitem()
        self._keys[k] = None  # back for `del self[k]`, which removes the attribute too
        val = self[k]
        del self[k]
        return k, val

    def get(self, key: str, default=None):
        """The value under `key`, or `default`."""
        return self[key] if key in self else default

    def fromkeys(self, keys: Iterable[str], default=None) -> ParameterDict:
        """A new ParameterDict with `keys`, each holding `default`."""
        return ParameterDict((k, default) for k in keys)

    def keys(self):
        """The keys, in insertion order."""
        return self._keys.keys()

    def items(self):
        """(key, value) pairs, in insertion order."""
        return ((k, self[k]) for k in self._keys)

    def values(self):
        """The values, in insertion order."""
        return (self[k] for k in self._keys)

    def update(self, parameters) -> None:
        """Add entries from a mapping or an iterable of (key, value) pairs. A plain dict's
        entries go in sorted by key (PyTorch's rule); an OrderedDict's or a ParameterDict's,
        and a sequence's, in their order."""
        if not isinstance(parameters, Iterable):
            raise TypeError("ParametersDict.update should be called with an iterable of "
                            "key/value pairs, but got " + type(parameters).__name__)
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            for key, value in parameters.items():
                self[key] = value
        elif isinstance(parameters, Mapping):
            for key, value in sorted(parameters.items()):
                self[key] = value
        else:
            _update_from_pairs(self, parameters)

    def extra_repr(self) -> str:
        return "\n".join(_entry_line(k, p, p.type() if isinstance(p, Tensor) else "")
                         for k, p in self.items())

    def __call__(self, input):
        raise RuntimeError("ParameterDict should not be called.")

    def __or__(self, other: ParameterDict) -> ParameterDict:
        out = self.copy()
        out.update(other)
        return out

    def __ror__(self, other: ParameterDict) -> ParameterDict:
        out = other.copy()
        out.update(self)
        return out

    def __ior__(self, other: ParameterDict) -> ParameterDict:
        self.update(other)
        return self


def _update_from_pairs(container, pairs) -> None:
    """`container[key] = value` for each (key, value) pair of `pairs`, with PyTorch's errors
    naming the container's class for an element that is not a pair."""
    kind = "ParameterDict" if isinstance(container, ParameterDict) else "ModuleDict"
    for j, pair in enumerate(pairs):
        if not isinstance(pair, Iterable):
            raise TypeError(f"{kind} update sequence element #{j} should be Iterable; "
                            f"is{type(pair).__name__}")
        if len(pair) != 2:
            raise ValueError(f"{kind} update sequence element #{j} has length {len(pair)}; "
                             "2 is required")
        container[pair[0]] = pair[1]
