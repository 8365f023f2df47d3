"""The typed tensor classes of old PyTorch code: `FloatTensor(2, 3)`, `LongTensor([1, 2])`.

Each is an instance of `tensortype`, a metaclass: calling the class builds a plain `Tensor` of
its dtype (as PyTorch's legacy constructors do), and `isinstance(x, FloatTensor)` asks whether
`x` is a float32 tensor. They are not subclasses of `Tensor`, as in PyTorch.
"""

from __future__ import annotations

import numbers

import numpy as np

from . import _dtype
from ._tensor import STATE_SLOTS, Size, Tensor

# The C++ element type names PyTorch prints in a legacy constructor's dtype mismatch.
# PyTorch's signature lines after the first, `(*, torch.device device = None)`.
_OTHER_SIGNATURES = (
    " * (torch.Storage storage)\n"
    " * (Tensor other)\n"
    " * (tuple of ints size, *, torch.device device = None)\n"
    " * (object data, *, torch.device device = None)\n")


def _options(dt: _dtype.dtype) -> str:
    return (f"TensorOptions(dtype={dt.cpp}, device=cpu, layout=Strided, "
            f"requires_grad=false (default), pinned_memory=false (default), "
            f"memory_format=(nullopt))")


def _type_name(value) -> str:
    """A value's type as PyTorch's argument parser names it (`list of [int]`, `torch.dtype`)."""
    if isinstance(value, Tensor):
        return "Tensor"
    cls = type(value)
    if isinstance(value, (list, tuple)) and value:
        kinds = list(dict.fromkeys(_type_name(v) for v in value))
        return f"{cls.__name__} of [{', '.join(kinds)}]"
    return f"torch.{cls.__name__}" if cls.__module__.startswith("fusegrad") else cls.__name__


def _no_overload(args: tuple, kwargs: dict, why: str) -> TypeError:
    got = ", ".join([_type_name(a).split(" of ")[0] for a in args]
                    + [f"{k}={_type_name(v)}" for k, v in kwargs.items()])
    return TypeError(
        f"new() received an invalid combination of arguments - got ({got}), but expected one "
        f"of:\n * (*, torch.device device = None)\n      didn't match because {why}\n"
        + _OTHER_SIGNATURES)


def _check_keywords(args: tuple, kwargs: dict) -> None:
    """Only `device=` (a CPU device) is a keyword of the legacy constructors."""
    extra = [k for k in kwargs if k != "device"]
    if extra:
        raise _no_overload(args, kwargs,
                           f"some of the keywords were incorrect: {', '.join(extra)}")
    device = kwargs.get("device")
    if device is not None:
        from ._device import device as device_cls

        kind = device_cls(device).type
        if kind != "cpu":
            raise RuntimeError(
                f"legacy constructor expects device type: cpu but device type: {kind} was "
                f"passed")


def _sizes(args: tuple) -> tuple:
    sizes = []
    for pos, s in enumerate(args, 1):
        if not isinstance(s, numbers.Integral) or isinstance(s, bool):
            raise TypeError(
                f"new(): argument 'size' failed to unpack the object at pos {pos} with error "
                f"\"type must be tuple of ints,but got {type(s).__name__}\"")
        if s < 0:
            raise RuntimeError(
                f"Trying to create tensor with negative dimension {s}: {list(args)}")
        sizes.append(int(s))
    return tuple(sizes)


def _is_size(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def legacy_tensor_init(t: Tensor, *args, **kwargs) -> None:
    """`Tensor(2, 3)` (uninitialised float32) or `Tensor(data)` (float32 copy), as
    `FloatTensor(...)` makes them."""
    src = legacy_new(_dtype.float32, args, kwargs, any_dtype=True)
    for slot in STATE_SLOTS:
        setattr(t, slot, getattr(src, slot))


def legacy_new(dt: _dtype.dtype, args: tuple, kwargs: dict, any_dtype: bool = False) -> Tensor:
    """What `<Type>Tensor(*args, **kwargs)` returns for the dtype `dt`.

    No arguments: an empty tensor; integers or a `Size`: an uninitialised tensor of that size
    (zero-filled here, so results are reproducible); a tensor of the same dtype (of any dtype
    with `any_dtype`, as `Tensor(t)`): an alias of it; a storage: a vector over its memory; a
    sequence or array: a copy converted to `dt`.
    """
    from ._creation import _to_array

    _check_keywords(args, kwargs)
    if not args:
        return Tensor._make(np.zeros((0,), dt.np), dt)
    if len(args) == 1 and isinstance(args[0], Size):
        args = tuple(args[0])
    elif not _is_size(args[0]):
        if len(args) > 1:
            marks = ", ".join(f"!{_type_name(a)}!" for a in args)
            raise _no_overload(args, {}, f"some of the arguments have invalid types: ({marks})")
        data = args[0]
        if isinstance(data, Tensor):
            if kwargs.get("device") is not None:
                raise RuntimeError(
                    "Legacy tensor constructor of the form torch.Tensor(tensor, device=device) "
                    "is not supported.  Use torch.tensor(...) or torch.as_tensor(...) instead.")
            if data.dtype is not dt and not any_dtype:
                raise TypeError(f"expected {_options(dt)} (got {_options(data.dtype)})")
            from ._dispatch import call
            from .ops.views import alias

            return call(alias, data)
        if data is None or isinstance(data, (bool, numbers.Number, np.generic)):
            raise TypeError(f"new(): data must be a sequence (got {type(data).__name__})")
        from . import storage

        if isinstance(data, storage.TypedStorage) and data.dtype is not dt:
            raise RuntimeError(
                f"Expected a Storage of type {dt.legacy} or an UntypedStorage, but got type "
                f"{data.dtype.legacy} for argument 1 'storage'")
        if isinstance(data, (storage.UntypedStorage, storage.TypedStorage)):
            return storage.set_(Tensor._make(np.zeros((0,), dt.np), dt), data)
        return Tensor._make(_to_array(data, dt.np), dt)
    return Tensor._make(np.zeros(_sizes(args), dt.np), dt)


class tensortype(type):
    """The metaclass of `FloatTensor` and the other typed tensor classes."""

    dtype: _dtype.dtype

    def __call__(cls, *args, **kwargs) -> Tensor:
        return legacy_new(cls.dtype, args, kwargs)

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype

    def __repr__(cls) -> str:
        return f"<class 'fusegrad.{cls.__name__}'>"


def _make_types() -> dict:
    types = {}
    for name in ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16",
                 "int8", "uint8", "bool"):
        dt = _dtype.BY_NAME[name]
        cls_name = f"{dt.legacy}Tensor"
        types[cls_name] = tensortype(cls_name, (), {
            "dtype": dt, "is_cuda": False, "is_sparse": False, "__module__": "fusegrad",
            "__doc__": f"Legacy constructor and type test for {name} tensors."})
    return types


TYPES = _make_types()
