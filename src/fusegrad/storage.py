"""Storages: the memory a tensor views, as PyTorch's `torch.storage` shows it.

A tensor's elements live in a NumPy array; its views are NumPy views of the array at the root
of their `base` chain. A storage is that root's memory seen as bytes: `UntypedStorage` wraps
a one-dimensional uint8 view of it (from its lowest address), so reading or writing a storage
reads or writes every tensor that views it, and `x.untyped_storage()` is one object for all of
them while it lives. `TypedStorage` (`x.storage()`, deprecated in PyTorch) reads the same bytes
as elements of a dtype; `FloatStorage` and its siblings are PyTorch's legacy spellings of it.
`Tensor.set_` points a tensor at a storage (or at another tensor's), as PyTorch's does.
"""

from __future__ import annotations

import os
import weakref

import numpy as np

from . import _dtype
from ._device import cpu as _CPU
from ._tensor import Tensor
from ._warn import warning_stacklevel

__all__ = ["TypedStorage", "UntypedStorage"]


def _flat_bytes(root: np.ndarray) -> np.ndarray:
    """All of `root`'s memory as a one-dimensional uint8 view, from its lowest address."""
    if root.flags.c_contiguous or root.flags.f_contiguous:
        return root.reshape(-1, order="A").view(np.uint8)
    if root.size == 0:
        return np.empty(0, np.uint8)
    # The element at the lowest address, then the span to the highest one.
    lowest = tuple(slice(n - 1, n) if s < 0 else slice(0, 1)
                   for n, s in zip(root.shape, root.strides))
    span = sum((n - 1) * abs(s) for n, s in zip(root.shape, root.strides)) + root.itemsize
    first = root[lowest].reshape(-1).view(np.uint8)
    return np.lib.stride_tricks.as_strided(first, shape=(span,), strides=(1,))


def _root(t: Tensor) -> np.ndarray:
    arr = t._base._data if t._base is not None else t._data
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


# One storage object per root array while it lives (PyTorch's `x.untyped_storage() is
# y.untyped_storage()` for views of one tensor): id(root) -> weak reference to the storage.
_LIVE: dict[int, weakref.ref] = {}


def untyped_storage_of(t: Tensor) -> UntypedStorage:
    """The storage tensor `t` views."""
    root = _root(t)
    ref = _LIVE.get(id(root))
    storage = ref() if ref is not None else None
    if storage is None or storage._root is not root:
        storage = UntypedStorage._wrap(_flat_bytes(root), root)
        key = id(root)
        _LIVE[key] = weakref.ref(storage, lambda _, key=key: _LIVE.pop(key, None))
    return storage


_TYPED_WARNED = [False]


def _map_file(filename, shared: bool, nbytes: int) -> np.ndarray:
    """`nbytes` bytes of file `filename` mapped into memory: with `shared`, writes go to the
    file (which is created, or grown, to `nbytes`); else they stay in this process (a
    private copy-on-write mapping of a file that must be large enough)."""
    path = os.fspath(filename)
    if shared:
        with open(path, "ab") as f:  # created if missing, never truncated
            if f.seek(0, os.SEEK_END) < nbytes:
                f.truncate(nbytes)
    elif not os.path.exists(path):
        raise RuntimeError(f"unable to open file <{path}> in read-only mode: No such file "
                           "or directory (2)")
    elif os.path.getsize(path) < nbytes:
        raise RuntimeError(f"file <{path}> size <{os.path.getsize(path)}> is smaller than "
                           f"the required mapping size <{nbytes}>")
    if nbytes == 0:
        return np.empty(0, np.uint8)
    return np.memmap(path, dtype=np.uint8, mode="r+" if shared else "c", shape=(nbytes,))


def _warn_typed_storage_removal(level: int = 3) -> None:
    """PyTorch's one-time deprecation warning of TypedStorage, naming the user's line
    (`level`: frames from the warning function to the user's code)."""
    if _TYPED_WARNED[0]:
        return
    _TYPED_WARNED[0] = True
    import warnings

    warnings.warn(
        "TypedStorage is deprecated. It will be removed in the future and UntypedStorage will "
        "be the only storage class. This should only matter to you if you are using storages "
        "directly.  To access UntypedStorage directly, use tensor.untyped_storage() instead "
        "of tensor.storage()", UserWarning, stacklevel=warning_stacklevel(level))


def _index(storage, idx, size: int) -> int:
    """`idx` as a non-negative element index of a storage of `size` elements."""
    if isinstance(idx, bool) or not isinstance(idx, (int, np.integer)):
        raise RuntimeError(f"can't index a <class '{_torch_name(type(storage))}'> with "
                           f"{type(idx)}")
    i = int(idx)
    if not -size <= i < size:
        raise IndexError(f"index {i} out of range for storage of size {size}")
    return i + size if i < 0 else i


def _repr(storage, items: list, title: str) -> str:
    body = "\n".join(f" {v}" for v in items)
    return f"{body}\n[{title} of size {len(items)}]"


class _StorageBase:
    """What every CPU storage answers alike."""

    __slots__ = ()
    is_sparse = False
    is_cuda = False

    def get_device(self):
        """None: the CPU's storages have no device index (PyTorch's answer)."""
        return None

    def is_shared(self) -> bool:
        """Whether the memory is a shared mapping (`Tensor.share_memory_`'s, or a file's:
        PyTorch counts a private file mapping too)."""
        from . import _shared_memory

        return _shared_memory.buffer_of(self.untyped()._root) is not None

    def share_memory_(self):
        """Returns `self` (fusegrad's worker processes receive copies)."""
        return self

    def is_pinned(self, device="cuda") -> bool:
        """False: no pinned memory without CUDA."""
        return False

    def resizable(self) -> bool:
        """Whether the storage owns memory it could grow."""
        return self.untyped()._root.base is None


class UntypedStorage(_StorageBase):
    """Bytes of memory, shared by the tensors that view them: `UntypedStorage(n)` (n bytes,
    zero here where PyTorch leaves them unset), `UntypedStorage([1, 2, 3])`, or a tensor's
    `x.untyped_storage()`."""

    __slots__ = ("_bytes", "_root", "__weakref__")
    is_sparse_csr = False
    is_hpu = False

    def __init__(self, *args, device=None) -> None:
        if device is not None and str(device) != "cpu":
            raise RuntimeError(f"Device '{device}' is not available here: storages live on "
                               "the CPU")
        if not args:
            data = np.empty(0, np.uint8)
        elif len(args) == 1 and isinstance(args[0], (int, np.integer)) \
                and not isinstance(args[0], bool):
            data = np.zeros(int(args[0]), np.uint8)
        elif len(args) == 1 and not isinstance(args[0], (str, bytes)) \
                and hasattr(args[0], "__len__"):
            data = np.array([int(v) & 0xFF for v in args[0]], np.uint8)
        else:
            raise TypeError(
                f"<class '{_torch_name(type(self))}'>.__new__ received an invalid combination "
                "of arguments. Expected "
                "one of:\n * no arguments\n * (int size)\n * (Sequence data)\n * "
                "(torch.UntypedStorage view_source)\n")
        self._bytes = data
        self._root = data

    @classmethod
    def _wrap(cls, data: np.ndarray, root: np.ndarray) -> UntypedStorage:
        s = cls.__new__(cls)
        s._bytes = data
        s._root = root
        return s

    @classmethod
    def from_buffer(cls, buffer, byte_order: str = "native", count: int = -1,
                    offset: int = 0, *, dtype=None):
        """A storage holding a copy of `buffer`'s bytes (`count` elements of `dtype` from
        byte `offset`; byte order "little", "big" or "native")."""
        typed = TypedStorage.from_buffer(buffer, byte_order, count, offset,
                                         dtype=dtype or _dtype.uint8)
        return typed._untyped_storage

    @classmethod
    def from_file(cls, filename, shared: bool = False, nbytes: int = 0) -> UntypedStorage:
        """A storage of `nbytes` bytes mapped from file `filename` (see `_map_file`)."""
        data = _map_file(filename, bool(shared), int(nbytes))
        return cls._wrap(data, data)

    # sizes and addresses
    def nbytes(self) -> int:
        """Bytes held by the storage."""
        return int(self._bytes.size)

    def size(self) -> int:
        """Bytes held by the storage."""
        return int(self._bytes.size)

    def __len__(self) -> int:
        return int(self._bytes.size)

    def element_size(self) -> int:
        """1: an untyped storage's elements are bytes."""
        return 1

    def data_ptr(self) -> int:
        """The address of the storage's first byte."""
        return self._bytes.__array_interface__["data"][0]

    @property
    def device(self):
        """The CPU device."""
        return _CPU

    def type(self, dtype=None, non_blocking: bool = False):
        """The storage's type name (`torch.storage.UntypedStorage`)."""
        if dtype is not None:
            raise RuntimeError("UntypedStorage.type(dtype) is not supported: use "
                               "TypedStorage(wrap_storage=..., dtype=...)")
        return "torch.storage.UntypedStorage"

    def untyped(self) -> UntypedStorage:
        """The storage itself."""
        return self

    def cpu(self) -> UntypedStorage:
        """The storage itself (already on the CPU)."""
        return self

    # elements
    def __getitem__(self, idx):
        if isinstance(idx, slice):
            start, stop, step = idx.indices(len(self))
            if step != 1:
                raise RuntimeError(f"Trying to slice with a step of {step}, but only a step "
                                   "of 1 is supported")
            return UntypedStorage._wrap(self._bytes[start:max(start, stop)], self._root)
        return int(self._bytes[_index(self, idx, len(self))])

    def __setitem__(self, idx, value) -> None:
        if isinstance(idx, slice):
            self._bytes[idx] = np.uint8(int(value) & 0xFF)
            return
        self._bytes[_index(self, idx, len(self))] = int(value) & 0xFF

    def __iter__(self):
        return iter(self.tolist())

    def tolist(self) -> list:
        """The bytes as Python ints."""
        return self._bytes.tolist()

    def fill_(self, value) -> UntypedStorage:
        """Every byte set to `value`."""
        self._bytes[...] = int(value) & 0xFF
        return self

    def copy_(self, source, non_blocking: bool | None = None) -> UntypedStorage:
        """The bytes of storage `source` (of the same size) copied in."""
        src = source.untyped() if isinstance(source, TypedStorage) else source
        if src.nbytes() != self.nbytes():
            raise RuntimeError(f"size does not match, self was {self.nbytes()} bytes but src "
                               f"was {src.nbytes()} bytes")
        self._bytes[...] = src._bytes
        return self

    def clone(self) -> UntypedStorage:
        """A storage with a copy of the bytes."""
        s = UntypedStorage.__new__(UntypedStorage)
        s._bytes = s._root = self._bytes.copy()
        return s

    def __copy__(self) -> UntypedStorage:
        return self.clone()

    def __deepcopy__(self, memo) -> UntypedStorage:
        return memo.setdefault(id(self), self.clone())

    def __reduce__(self):
        return (_untyped_from_bytes, (self._bytes.tobytes(),))

    def __sizeof__(self) -> int:
        return object.__sizeof__(self) + self.nbytes()

    def __repr__(self) -> str:
        return _repr(self, self.tolist(), f"torch.storage.UntypedStorage(device={self.device})")

    __str__ = __repr__

    def _typed(self, dt) -> TypedStorage:
        """The bytes read as elements of `dt`, copied into a new storage."""
        values = np.array(self.tolist(), dtype=dt.np)
        return TypedStorage._wrap_array(values, dt)


def _typed_from_file(dt, filename, shared: bool, size: int) -> TypedStorage:
    """`size` elements of `dt` mapped from file `filename` (`UntypedStorage.from_file`)."""
    untyped = UntypedStorage.from_file(filename, shared, int(size) * dt.itemsize)
    return TypedStorage._wrap(untyped, dt)


def _untyped_from_bytes(data: bytes) -> UntypedStorage:
    s = UntypedStorage.__new__(UntypedStorage)
    s._bytes = s._root = np.frombuffer(bytearray(data), np.uint8)
    return s


def _typed_from_bytes(data: bytes, dt) -> TypedStorage:
    return TypedStorage._wrap(_untyped_from_bytes(data), dt)


# PyTorch's legacy storage class name of each dtype that has one (`float32`: FloatStorage).
_LEGACY_NAME = {d: f"{_dtype.BY_NAME[d].legacy}Storage" for d in _dtype.LEGACY_STORAGE}


class TypedStorage(_StorageBase):
    """A storage's bytes read as elements of one dtype (`x.storage()`; PyTorch deprecates
    the class in favour of `UntypedStorage`). `TypedStorage(n, dtype=...)`,
    `TypedStorage([1.5, 2.0])`, `TypedStorage(wrap_storage=u, dtype=...)`."""

    __slots__ = ("_untyped_storage", "dtype")

    def __init__(self, *args, device=None, dtype=None, wrap_storage=None,
                 _internal: bool = False, _called: type | None = None) -> None:
        if not _internal:
            _warn_typed_storage_removal()
        dt = dtype if dtype is not None else _dtype.get_default_dtype()
        if device is not None and str(device) != "cpu":
            raise RuntimeError(f"Device '{device}' is not available here: storages live on "
                               "the CPU")
        if wrap_storage is not None:
            if args:
                raise RuntimeError("No positional arguments should be given when using "
                                   "'wrap_storage'")
            if not isinstance(wrap_storage, UntypedStorage):
                raise TypeError(f"expected 'wrap_storage' to be an UntypedStorage, but got "
                                f"{type(wrap_storage)}")
            self._untyped_storage, self.dtype = wrap_storage, dt
            return
        if not args:
            values = np.empty(0, dt.np)
        elif len(args) == 1 and isinstance(args[0], (int, np.integer)) \
                and not isinstance(args[0], bool):
            values = np.zeros(int(args[0]), dt.np)
        elif len(args) == 1 and not isinstance(args[0], (str, bytes)) \
                and hasattr(args[0], "__len__"):
            values = np.array(list(args[0]), dtype=dt.np)
        else:
            raise TypeError(
                f"<class '{_torch_name(_called or type(self))}'>.__new__ received an invalid "
                "combination of arguments. Expected one of:\n * no arguments\n * (int size)\n"
                " * (Sequence data)\n")
        typed = TypedStorage._wrap_array(values, dt)
        self._untyped_storage, self.dtype = typed._untyped_storage, dt

    @classmethod
    def _wrap(cls, untyped: UntypedStorage, dt) -> TypedStorage:
        s = TypedStorage.__new__(TypedStorage)
        s._untyped_storage, s.dtype = untyped, dt
        return s

    @classmethod
    def _wrap_array(cls, values: np.ndarray, dt) -> TypedStorage:
        values = np.ascontiguousarray(values)
        return cls._wrap(UntypedStorage._wrap(_flat_bytes(values), values), dt)

    @classmethod
    def from_file(cls, filename, shared: bool = False, size: int = 0) -> TypedStorage:
        """A storage of `size` elements of the default dtype (a legacy class's own) mapped
        from file `filename`."""
        _warn_typed_storage_removal()
        return _typed_from_file(_dtype.get_default_dtype(), filename, shared, size)

    @classmethod
    def from_buffer(cls, buffer, byte_order: str = "native", count: int = -1,
                    offset: int = 0, *, dtype=None) -> TypedStorage:
        """A storage of `count` elements (all by default) of `dtype` copied from `buffer`
        at byte `offset`, in `byte_order` ("little", "big" or "native")."""
        dt = dtype or _dtype.get_default_dtype()
        if byte_order not in ("little", "big", "native"):
            raise ValueError(f"Expected 'little', 'big' or 'native' for byte_order, but got "
                             f"'{byte_order}'")
        npdt = dt.np
        if byte_order != "native" and npdt.itemsize > 1:
            npdt = npdt.newbyteorder("<" if byte_order == "little" else ">")
        values = np.frombuffer(buffer, dtype=npdt, count=count, offset=offset)
        return cls._wrap_array(values.astype(dt.np), dt)

    # sizes and addresses
    def size(self) -> int:
        """The number of elements."""
        return self._untyped_storage.nbytes() // self.dtype.itemsize

    def __len__(self) -> int:
        return self.size()

    def nbytes(self) -> int:
        """Bytes held by the storage."""
        return self._untyped_storage.nbytes()

    def element_size(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize

    def data_ptr(self) -> int:
        """The address of the first element."""
        return self._untyped_storage.data_ptr()

    @property
    def device(self):
        """The CPU device."""
        return self._untyped_storage.device

    def untyped(self) -> UntypedStorage:
        """The bytes beneath, shared."""
        return self._untyped_storage

    def pickle_storage_type(self) -> str:
        """The legacy class name saved for this dtype (`FloatStorage`)."""
        return _LEGACY_NAME[self.dtype.name]

    def type(self, dtype=None, non_blocking: bool = False):
        """The legacy type name (`torch.FloatStorage`)."""
        if dtype is not None:
            raise RuntimeError("TypedStorage.type(dtype) is not supported: use the "
                               "conversions (`.double()`, ...)")
        return f"torch.{self.pickle_storage_type()}"

    def cpu(self) -> TypedStorage:
        """A new TypedStorage object over the same bytes."""
        return TypedStorage._wrap(self._untyped_storage, self.dtype)

    def _array(self) -> np.ndarray:
        raw = self._untyped_storage._bytes
        n = self.size() * self.dtype.itemsize
        return raw[:n].view(self.dtype.np)

    # elements
    def __getitem__(self, idx):
        if isinstance(idx, slice):
            raise RuntimeError("slices are only supported in UntypedStorage.__getitem__")
        return self._array()[_index(self, idx, self.size())].item()

    def __setitem__(self, idx, value) -> None:
        if isinstance(value, Tensor):
            value = value.item()
        if isinstance(idx, slice):
            self._array()[idx] = value
            return
        self._array()[_index(self, idx, self.size())] = value

    def __iter__(self):
        return iter(self.tolist())

    def tolist(self) -> list:
        """The elements as Python numbers."""
        return self._array().tolist()

    def fill_(self, value) -> TypedStorage:
        """Every element set to `value`."""
        self._array()[...] = value.item() if isinstance(value, Tensor) else value
        return self

    def copy_(self, source, non_blocking: bool | None = None) -> TypedStorage:
        """The bytes of storage `source` (of the same size in bytes) copied in."""
        self._untyped_storage.copy_(source, non_blocking)
        return self

    def clone(self) -> TypedStorage:
        """A storage with a copy of the elements."""
        return TypedStorage._wrap(self._untyped_storage.clone(), self.dtype)

    def __copy__(self) -> TypedStorage:
        return self.clone()

    def __deepcopy__(self, memo) -> TypedStorage:
        return memo.setdefault(id(self), self.clone())

    def __reduce__(self):
        return (_typed_from_bytes, (self._untyped_storage._bytes.tobytes(), self.dtype))

    def __sizeof__(self) -> int:
        return object.__sizeof__(self) + self.nbytes()

    def __repr__(self) -> str:
        return _repr(self, self.tolist(), f"torch.storage.TypedStorage(dtype={self.dtype}, "
                                          f"device={self.device})")

    __str__ = __repr__

    def _to(self, dt) -> TypedStorage:
        if dt is self.dtype:
            return self
        return TypedStorage._wrap_array(self._array().astype(dt.np), dt)


def _conversion(name: str, dtype_name: str, untyped: bool):
    def convert(self):
        dt = _dtype.BY_NAME[dtype_name]
        return self._typed(dt) if untyped else self._to(dt)

    convert.__name__ = convert.__qualname__ = name
    convert.__doc__ = f"The elements as a TypedStorage of {dtype_name}."
    return convert


for _name, _dtname in (("byte", "uint8"), ("char", "int8"), ("short", "int16"), ("int", "int32"),
                       ("long", "int64"), ("half", "float16"), ("float", "float32"),
                       ("double", "float64"), ("bool", "bool"), ("bfloat16", "bfloat16"),
                       ("complex_float", "complex64"), ("complex_double", "complex128")):
    setattr(UntypedStorage, _name, _conversion(_name, _dtname, True))
    setattr(TypedStorage, _name, _conversion(_name, _dtname, False))


class _LegacyStorageMeta(type):
    """`isinstance(s, FloatStorage)`: a TypedStorage of the class's dtype."""

    dtype = None

    def __instancecheck__(cls, instance) -> bool:
        if type.__instancecheck__(cls, instance):
            return True
        return (isinstance(instance, TypedStorage) and cls.dtype is not None
                and instance.dtype is cls.dtype)


class _LegacyStorage(TypedStorage, metaclass=_LegacyStorageMeta):
    """The legacy storage classes: calling one makes a TypedStorage of its dtype."""

    __slots__ = ()

    def __new__(cls, *args, wrap_storage=None, device=None):
        _warn_typed_storage_removal()
        s = TypedStorage.__new__(TypedStorage)
        TypedStorage.__init__(s, *args, wrap_storage=wrap_storage, device=device,
                              dtype=cls.dtype, _internal=True, _called=cls)
        return s

    @classmethod
    def from_file(cls, filename, shared: bool = False, size: int = 0) -> TypedStorage:
        """`TypedStorage.from_file` with this class's dtype."""
        _warn_typed_storage_removal()
        return _typed_from_file(cls.dtype, filename, shared, size)

    @classmethod
    def from_buffer(cls, *args, **kwargs) -> TypedStorage:
        """`TypedStorage.from_buffer` with this class's dtype."""
        kwargs.setdefault("dtype", cls.dtype)
        return TypedStorage.from_buffer(*args, **kwargs)


def _legacy_class(dtype_name: str) -> type:
    cls = _LegacyStorageMeta(_LEGACY_NAME[dtype_name], (_LegacyStorage,),
                             {"__slots__": (), "__module__": "fusegrad"})
    type.__setattr__(cls, "dtype", _dtype.BY_NAME[dtype_name])
    return cls


LEGACY_CLASSES = {_LEGACY_NAME[d]: _legacy_class(d) for d in _dtype.LEGACY_STORAGE}
globals().update(LEGACY_CLASSES)  # `fusegrad.FloatStorage` is read from here



# ---------------------------------------------------------------- the Tensor methods


def tensor_storage(self: Tensor) -> TypedStorage:
    """The tensor's storage as elements of its dtype (PyTorch deprecates TypedStorage)."""
    _warn_typed_storage_removal()
    return TypedStorage._wrap(self.untyped_storage(), self.dtype)


def storage_type(self: Tensor) -> type:
    """The legacy storage class of the tensor's dtype (`FloatStorage` for float32)."""
    _warn_typed_storage_removal()
    return LEGACY_CLASSES[_LEGACY_NAME[self.dtype.name]]


def _check_settable(self: Tensor, source) -> None:
    from .autograd import grad_mode

    if not grad_mode.is_grad_enabled():
        return
    if self._rg and self._grad_fn is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    if self._rg or (isinstance(source, Tensor) and source._rg):
        raise RuntimeError("derivative for aten::set_ is not implemented")


_SET_SIGNATURES = (" * ()\n * (torch.Storage source)\n * (torch.Storage source, int "
                   "storage_offset, tuple of ints size, tuple of ints stride = None)\n"
                   " * (Tensor source)\n * (Tensor source, int storage_offset, tuple of ints "
                   "size, tuple of ints stride = None)\n")
_SET_PARAMETERS = ("source", "storage_offset", "size", "stride")


def _set_arguments(args: tuple, kwargs: dict) -> tuple:
    """(source, storage_offset, size, stride) of a `set_` call, or PyTorch's TypeError."""
    given = dict(zip(_SET_PARAMETERS, args))
    unknown = [k for k in kwargs if k not in _SET_PARAMETERS or k in given]
    source = kwargs.get("source", given.get("source"))
    storage_like = isinstance(source, (Tensor, UntypedStorage, TypedStorage))
    if len(args) > 4 or unknown or (source is None and len(given) + len(kwargs) > 0) or \
            (source is not None and not storage_like) or \
            (len(given) + len(kwargs) in (2,) and "stride" not in kwargs):
        got = ", ".join([_arg_type(a) for a in args]
                        + [f"{k}={_arg_type(v)}" for k, v in kwargs.items()])
        raise TypeError(f"set_() received an invalid combination of arguments - got ({got}), "
                        f"but expected one of:\n{_SET_SIGNATURES}")
    values = {**given, **kwargs}
    return (source, values.get("storage_offset", 0), values.get("size"), values.get("stride"))


def _arg_type(value) -> str:
    if isinstance(value, Tensor):
        return "Tensor"
    cls = type(value)
    return _torch_name(cls) if cls.__module__.startswith("fusegrad") else cls.__name__


def _torch_name(cls: type) -> str:
    """A class's name as PyTorch's messages spell it (`torch.storage.UntypedStorage`)."""
    return f"{cls.__module__.replace('fusegrad', 'torch', 1)}.{cls.__qualname__}"


def set_(self: Tensor, *args, **kwargs) -> Tensor:
    """`set_(source=None, storage_offset=0, size=None, stride=None)`: point `self` at
    `source`'s memory: another tensor's (its offset, sizes and strides, or those given), a
    storage's (all of it as a 1-D tensor of `self`'s dtype, or `size` and `stride` from
    element `storage_offset`), or a new empty storage (no argument)."""
    source, storage_offset, size, stride = _set_arguments(args, kwargs)
    _check_settable(self, source)
    dt = self.dtype
    if source is None:
        data = np.empty(0, dt.np)
    else:
        if isinstance(source, Tensor):
            if source.dtype is not dt:
                raise RuntimeError(f"Could not set tensor of type {source.dtype.cpp} to a "
                                   f"tensor of type {dt.cpp}")
            if len(args) + len(kwargs) == 1:  # the tensor's own geometry
                data = source._data
                self._data = data if data.dtype == dt.np else data.view(dt.np)
                self._base = None
                self._view_ver = None
                self._vc[0] += 1
                return self
            storage_offset = storage_offset or 0
            source = source.untyped_storage()
        elif isinstance(source, TypedStorage):
            if source.dtype is not dt:
                raise RuntimeError(
                    f"Expected a Storage of type {dt.cpp} or an UntypedStorage, but got type "
                    f"{source.dtype.legacy} for argument 1 'storage'")
            source = source._untyped_storage
        data = _view_of(source, dt, storage_offset, size, stride)
    self._data = data
    self._base = None
    self._view_ver = None
    self._vc[0] += 1
    return self


def _view_of(storage: UntypedStorage, dt, offset: int, size, stride) -> np.ndarray:
    """`size`/`stride` elements of `dt` from element `offset` of `storage` (all of it as a
    vector when `size` is None), a NumPy view of its memory."""
    item = dt.itemsize
    raw = storage._bytes
    if size is None:
        shape, strides = (storage.nbytes() // item,), (1,)
    else:
        shape = tuple(int(n) for n in size)
        strides = tuple(int(s) for s in stride) if stride is not None else \
            tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape)))
    offset = int(offset)
    if 0 in shape:
        needed = 0
    else:
        needed = (offset + sum((n - 1) * s for n, s in zip(shape, strides)) + 1) * item
    if needed > storage.nbytes() or offset < 0 or any(s < 0 for s in strides):
        raise RuntimeError(
            f"setStorage: sizes {list(shape)}, strides {list(stride or ())}, storage offset "
            f"{offset}, and itemsize {item} requiring a storage size of {needed} are out of "
            f"bounds for storage of size {storage.nbytes()}")
    if not raw.flags.c_contiguous:
        raise RuntimeError("set_: this storage's memory is not one run of bytes")
    base = raw[:raw.size - raw.size % item].view(dt.np) if raw.size >= item else \
        np.empty(0, dt.np)
    return np.ndarray(shape, dt.np, buffer=base, offset=offset * item,
                      strides=tuple(s * item for s in strides))


def from_file(filename, shared: bool | None = None, size: int = 0, *, dtype=None, layout=None,
              device=None, pin_memory: bool = False) -> Tensor:
    """A one-dimensional tensor of `size` elements (of `dtype`, the default dtype if None)
    over file `filename` mapped into memory: with `shared`, writes go to the file."""
    if device is not None and str(device) != "cpu":
        raise RuntimeError(f"Device '{device}' is not available here: tensors live on the CPU")
    dt = dtype if dtype is not None else _dtype.get_default_dtype()
    data = _map_file(filename, bool(shared), int(size) * dt.itemsize)
    return Tensor._make(data.view(dt.np), dt)
