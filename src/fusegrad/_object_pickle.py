"""Whole objects in checkpoints: `save(model)` and `load(f, weights_only=False)`.

Modules, optimizers and any other picklable object are pickled by reference (their class by
module and name), as `torch.save` does; tensors inside them are written exactly as in a
state_dict (`torch._utils._rebuild_tensor_v2` over storages kept as separate zip entries), so
the tensors of a whole-object file read like any checkpoint's.

Reading such a file runs code named by it (the classes' constructors and `__setstate__`), so
it happens only when the caller passes `weights_only=False`. Globals under `torch.` resolve to
fusegrad's objects of the same path (`torch.nn.modules.linear.Linear` is
`fusegrad.nn.modules.linear.Linear`): a whole model saved by PyTorch loads into fusegrad's
classes.
"""

from __future__ import annotations

import importlib
import io
import pickle
import types
from collections import OrderedDict
from typing import Any

from . import _dtype
from ._checkpoint_read import (
    ALLOWED,
    STORAGE_BY_DTYPE,
    _rebuild_from_type_v2,
    _rebuild_meta_tensor_no_storage,
    _rebuild_parameter,
    _rebuild_parameter_with_state,
    _rebuild_qtensor,
    _rebuild_tensor_v2,
    _rebuild_tensor_v3,
    _size,
    _StorageType,
    compat_name,
    storage_for,
)
from ._device import device
from ._quantized import QuantizedTensor, pickled_params, qscheme
from ._tensor import Size, Tensor


class _StorageRef:
    """A storage of the archive, written as PyTorch's persistent id."""

    __slots__ = ("pid",)

    def __init__(self, pid: tuple) -> None:
        self.pid = pid


# The objects the reader rebuilds tensors with, by the PyTorch names the file must give them.
_SPELLING = {id(obj): key for key, obj in ALLOWED.items() if key[0].startswith("torch")}
_SPELLING[id(Tensor)] = ("torch", "Tensor")
_STORAGE_TYPES = {name: ALLOWED[("torch", kind)] for name, kind in STORAGE_BY_DTYPE.items()}
_UNTYPED = ALLOWED[("torch.storage", "UntypedStorage")]


class ObjectPickler(pickle._Pickler):
    """Protocol-2 pickling of any object, with tensors laid out as `torch.save` lays them.

    `storages` keeps the storages (a `serialization._PickleWriter`, whose `storage_of` puts
    views of one buffer in one storage); the caller writes them as zip entries.
    """

    dispatch = dict(pickle._Pickler.dispatch)

    def __init__(self, file: io.BytesIO, storages) -> None:
        super().__init__(file, protocol=2)
        self.storages = storages

    def persistent_id(self, obj: Any):
        return obj.pid if type(obj) is _StorageRef else None

    def reducer_override(self, obj: Any):
        cls = type(obj)
        if cls is Size:
            return _size, (tuple(int(s) for s in obj),)
        if cls is device:
            return device, (obj.type,) if obj.index is None else (obj.type, obj.index)
        if isinstance(obj, QuantizedTensor):  # PyTorch's form: integers and parameters
            key, numel, offset, shape, strides = self.storages.qstorage_of(obj)
            kind = ALLOWED[("torch", f"{obj.dtype.legacy}Storage")]
            return _rebuild_qtensor, (_StorageRef(("storage", kind, key, "cpu", numel)),
                                      int(offset), tuple(int(s) for s in shape),
                                      tuple(int(s) for s in strides), pickled_params(obj),
                                      False, OrderedDict())
        if isinstance(obj, Tensor):
            from .nn.parameter import Parameter, UninitializedTensorMixin

            if isinstance(obj, UninitializedTensorMixin):
                return NotImplemented  # a lazy placeholder: its class and requires_grad
            if isinstance(obj, Parameter):
                data = obj.data if obj.is_meta else Tensor._make(obj._data, obj.dtype)
                args = (data, bool(obj.requires_grad), OrderedDict())
                state = obj._attributes()
                if state:  # the program's attributes, as PyTorch writes a parameter's dict
                    return _rebuild_parameter_with_state, args + (state,)
                return _rebuild_parameter, args
            if cls.__module__.startswith("fusegrad."):  # fusegrad's own (fake, buffer)
                return self._tensor(obj)
            # A program's subclass: rebuilt as a plain tensor, then given its class and its
            # attributes (None when it has none), as PyTorch writes it.
            rebuild, args = self._tensor(obj)
            state = dict(getattr(obj, "__dict__", None) or {}) or None
            return _rebuild_from_type_v2, (rebuild, cls, args, state)
        return NotImplemented

    def _tensor(self, t: Tensor) -> tuple:
        if t.is_meta:  # no storage: PyTorch's dtype, size, strides
            return _rebuild_meta_tensor_no_storage, (t.dtype, tuple(t.shape), tuple(t.stride()),
                                                     bool(t.requires_grad))
        key, numel, offset, shape, strides = self.storages.storage_of(t)
        geometry = (int(offset), tuple(int(s) for s in shape), tuple(int(s) for s in strides),
                    bool(t.requires_grad), OrderedDict())
        if t.dtype.name in STORAGE_BY_DTYPE:
            ref = _StorageRef(("storage", _STORAGE_TYPES[t.dtype.name], key, "cpu", numel))
            return _rebuild_tensor_v2, (ref,) + geometry
        ref = _StorageRef(("storage", _UNTYPED, key, "cpu", numel * t.dtype.itemsize))
        return _rebuild_tensor_v3, (ref,) + geometry + (t.dtype,)

    def save_global(self, obj: Any, name: str | None = None) -> None:
        spelled = _SPELLING.get(id(obj))
        if spelled is None:
            try:
                super().save_global(obj, name)
            except pickle.PicklingError:
                _raise_as_c_pickler(obj)
                raise
            return
        self.write(pickle.GLOBAL + f"{spelled[0]}\n{spelled[1]}\n".encode())
        self.memoize(obj)

    # (the copied table holds the base class's save_global for functions)
    dispatch[types.FunctionType] = save_global
    dispatch[_dtype.dtype] = save_global
    dispatch[_StorageType] = save_global
    dispatch[qscheme] = save_global


def _raise_as_c_pickler(obj: Any) -> None:
    """Raise the error PyTorch's (C) pickler gives for a class or function it cannot find
    by name (a local class is an AttributeError there, not a PicklingError); return when it
    pickles `obj` after all."""
    try:
        pickle.dumps(obj, protocol=2)
    except (pickle.PicklingError, AttributeError) as error:
        raise error from None


class ObjectUnpickler(pickle._Unpickler):
    """Unpickles anything, as Python's unpickler does, with storages read from the archive
    and `torch.*` globals resolved to fusegrad's objects of the same path."""

    def __init__(self, file, archive, root: str) -> None:
        super().__init__(file)
        self.archive = archive
        self.root = root
        self.loaded: dict = {}

    def persistent_load(self, pid):
        return storage_for(pid, self.archive, self.root, self.loaded)

    def find_class(self, module: str, name: str):
        module, name = compat_name(self.proto, module, name)
        found = ALLOWED.get((module, name))
        if found is not None:
            return found
        if (module, name) == ("torch", "Tensor"):
            return Tensor
        if module == "torch" or module.startswith("torch."):
            ours = "fusegrad" + module[len("torch"):]
            try:
                target = importlib.import_module(ours)
                for part in name.split("."):
                    target = getattr(target, part)
            except (ImportError, AttributeError):
                raise pickle.UnpicklingError(
                    f"the checkpoint names {module}.{name}, which fusegrad does not have "
                    f"(looked for {ours}.{name})") from None
            return target
        return super().find_class(module, name)
