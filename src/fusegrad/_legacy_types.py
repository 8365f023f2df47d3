"""The typed tensor classes of old PyTorch code: `FloatTensor(2, 3)`, `LongTensor([1, 2])`.

Each is an instance of `tensortype`, a metaclass: calling the class builds a plain `Tensor` of
its dtype (as PyTorch's legacy constructors do), and `isinstance(x, FloatTensor)` asks whether
`x` is a float32 tensor. They are not subclasses of `Tensor`, as in PyTorch. The CUDA classes
(`fusegrad.cuda.FloatTensor`) exist as in PyTorch's CPU build: they answer `dtype`, `is_cuda`
and `isinstance` (always False), and refuse construction.
"""

from __future__ import annotations

import numbers

import numpy as np

from . import _dtype
from ._sparse import sparse_coo, strided
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


# PyTorch's error for anything that needs its CUDA library, which a CPU build lacks.
CUDA_LIBRARY_MISSING = (
    "Cannot initialize CUDA without ATen_cuda library. PyTorch splits its backend into two "
    "shared libraries: a CPU library and a CUDA library; this error has occurred because you "
    "are trying to use some CUDA functionality, but the CUDA library has not been loaded by "
    "the dynamic linker for some reason.  The CUDA library MUST be loaded, EVEN IF you don't "
    "directly use any symbols from the CUDA library! One common culprit is a lack of "
    "-Wl,--no-as-needed in your link arguments; many dynamic linkers will delete dynamic "
    "library dependencies if you don't depend on any of their symbols.  You can check if this "
    "has occurred by using ldd on your binary to see if there is a dependency on *_cuda.so "
    "library.")


def torch_name(cls: type) -> str:
    """A typed class's name as PyTorch spells it in messages: `torch.cuda.FloatTensor`."""
    return cls.__module__.replace("fusegrad", "torch", 1) + "." + cls.__name__


def unavailable_type(cls: type) -> TypeError:
    """PyTorch's error for a typed class its build cannot make tensors of (CUDA's)."""
    return TypeError(f"type {torch_name(cls)} not available. Torch not compiled with CUDA "
                     f"enabled.")


class tensortype(type):
    """The metaclass of `FloatTensor` and the other typed tensor classes."""

    dtype: _dtype.dtype
    is_cuda: bool

    def __call__(cls, *args, **kwargs) -> Tensor:
        if cls.is_cuda:
            raise unavailable_type(cls)
        if cls.is_sparse:
            return legacy_sparse_new(cls.dtype, args, kwargs)
        return legacy_new(cls.dtype, args, kwargs)

    def __instancecheck__(cls, obj) -> bool:
        # (every tensor is a CPU tensor: none is an instance of a CUDA class; a sparse one
        # is an instance of the sparse classes only)
        return not cls.is_cuda and isinstance(obj, Tensor) and obj.dtype is cls.dtype and \
            obj.is_sparse is cls.is_sparse

    def __repr__(cls) -> str:
        return f"<class '{cls.__module__}.{cls.__name__}'>"


def make_types(module: str, sparse: bool = False) -> dict:
    """The typed classes of `module` (`fusegrad`, `fusegrad.cuda`, `fusegrad.sparse`,
    `fusegrad.cuda.sparse`) by name: CUDA ones in a module under `fusegrad.cuda`, sparse
    ones with `sparse`."""
    types = {}
    # (PyTorch has no sparse bool class)
    for name in ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16",
                 "int8", "uint8") + (() if sparse else ("bool",)):
        dt = _dtype.BY_NAME[name]
        cls_name = f"{dt.legacy}Tensor"
        types[cls_name] = tensortype(cls_name, (), {
            "dtype": dt, "is_cuda": ".cuda" in module, "is_sparse": sparse,
            "layout": sparse_coo if sparse else strided, "__module__": module,
            "__doc__": f"Legacy constructor and type test for {name} tensors."})
    return types


TYPES = make_types("fusegrad")
# The classes of `fusegrad.cuda` and `fusegrad.sparse` (`CUDA_TYPES`, `SPARSE_TYPES`), made
# when those modules first ask for them (`__getattr__`): `import fusegrad` loads neither.
_LATER = {"CUDA_TYPES": ("fusegrad.cuda", False), "SPARSE_TYPES": ("fusegrad.sparse", True)}


def __getattr__(name: str) -> dict:
    """`CUDA_TYPES` or `SPARSE_TYPES`, made on first look-up (one dict for every thread)."""
    later = _LATER.get(name)
    if later is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return globals().setdefault(name, make_types(later[0], sparse=later[1]))


_USER = 4  # (the stack level of a warning from `legacy_sparse_new`: the constructor's caller)
_SPARSE_SIGNATURES = (
    " * (*, torch.device device = None)\n"
    " * (Tensor indices, Tensor values, *, torch.device device = None)\n"
    " * (Tensor indices, Tensor values, tuple of ints size, *, torch.device device = None)\n"
    " * (tuple of ints size, *, torch.device device = None)\n")


def legacy_sparse_new(dt: _dtype.dtype, args: tuple, kwargs: dict) -> Tensor:
    """What `torch.sparse.<Type>Tensor(*args, **kwargs)` returns for the dtype `dt`: a sparse
    COO tensor without elements (of shape (0,), or of the sizes given), or of the given
    indices and values (whose dtype they keep, as PyTorch's do), each with PyTorch's
    deprecation warning naming `sparse_coo_tensor`."""
    from ._creation import _check_device
    from ._functions.sparse import sparse_coo_tensor
    from ._warn import warn_once

    for key in kwargs:
        if key != "device":
            raise TypeError(f"new() got an unexpected keyword argument '{key}'")
    _check_device(kwargs.get("device"))
    if not args:
        warn_once("torch.sparse.SparseTensor() is deprecated.  Please use "
                  "torch.sparse_coo_tensor((0,), dtype=).", _USER)
        return _empty_sparse((0,), dt)
    if len(args) == 1 and isinstance(args[0], Size) or all(map(_is_size, args)):
        warn_once("torch.sparse.SparseTensor(shape, *, device=) is deprecated.  Please use "
                  "torch.sparse_coo_tensor(shape, dtype=, device=).", _USER)
        sizes = tuple(args[0]) if len(args) == 1 and isinstance(args[0], Size) else args
        return _empty_sparse(_sizes(sizes), dt)
    if len(args) in (2, 3) and all(isinstance(a, Tensor) for a in args[:2]) and (
            len(args) == 2 or isinstance(args[2], (tuple, list))):
        shape = "shape, " if len(args) == 3 else ""
        warn_once(f"torch.sparse.SparseTensor(indices, values, {shape}*, device=) is "
                  "deprecated.  Please use torch.sparse_coo_tensor(indices, values, "
                  f"{shape}dtype=, device=).", _USER)
        return sparse_coo_tensor(*args, check_invariants=False)
    got = ", ".join(type(a).__name__ for a in args)
    raise TypeError(f"new() received an invalid combination of arguments - got ({got}), but "
                    f"expected one of:\n{_SPARSE_SIGNATURES}")


def _empty_sparse(shape: tuple, dt: _dtype.dtype) -> Tensor:
    """A sparse COO tensor of `shape` and `dt` without elements (all its dims sparse)."""
    from ._functions.sparse import sparse_coo_tensor

    indices = Tensor._make(np.zeros((len(shape), 0), np.int64))
    return sparse_coo_tensor(indices, Tensor._make(np.zeros((0,), dt.np), dt), shape,
                             check_invariants=False)


_TYPE_PARAMETERS = ("dtype", "non_blocking")


def legacy_type_arguments(args: tuple, kwargs: dict) -> _dtype.dtype | None:
    """The dtype `Tensor.type(*args, **kwargs)` converts to (None: it asks for the name),
    after PyTorch's checks of `(dtype=None, non_blocking=False, *, memory_format=None)`."""
    if len(args) > 2:
        raise TypeError(f"type() takes from 0 to 2 positional arguments but {len(args)} were "
                        f"given")
    values = dict(zip(_TYPE_PARAMETERS, args))
    for name, value in kwargs.items():
        if name in values:
            raise TypeError(f"type() got multiple values for argument '{name}'")
        if name not in _TYPE_PARAMETERS and name != "memory_format":
            raise TypeError(f"type() got an unexpected keyword argument '{name}'")
        values[name] = value
    blocking = values.get("non_blocking", False)
    if blocking.__class__ is not bool:
        where = "" if "non_blocking" in kwargs else " (position 2)"
        raise TypeError(f"type(): argument 'non_blocking'{where} must be bool, not "
                        f"{type(blocking).__name__}")
    dtype = values.get("dtype")
    return None if dtype is None else legacy_type_dtype(dtype)


def legacy_type_dtype(spec) -> _dtype.dtype:
    """The dtype a `Tensor.type` argument names: a dtype, a typed class, its name
    (`"torch.DoubleTensor"`), or `Tensor` (the default dtype); a CUDA type is PyTorch's
    missing-library error, anything else its ValueError or TypeError."""
    if isinstance(spec, _dtype.dtype):
        return spec
    if isinstance(spec, str):
        if spec.startswith("torch.cuda."):
            raise RuntimeError(CUDA_LIBRARY_MISSING)
        name = spec.rsplit(".", 1)[-1]
        prefix = spec[:len(spec) - len(name)]
        found = next((d for d in _dtype.ALL if f"{d.legacy}Tensor" == name), None)
        if found is None or prefix not in ("torch.", "torch.sparse."):
            raise ValueError(f"invalid type: '{spec}'")
        return found
    if isinstance(spec, tensortype):
        if spec.is_cuda:
            raise RuntimeError(CUDA_LIBRARY_MISSING)
        return spec.dtype
    if spec is Tensor:
        return _dtype.get_default_dtype()
    if isinstance(spec, type):
        module = spec.__module__.replace("fusegrad", "torch", 1)
        name = spec.__qualname__ if module == "builtins" else f"{module}.{spec.__qualname__}"
        raise ValueError(f"invalid type: '{name}'")
    raise TypeError("dtype must be a type, str, or dtype object")
