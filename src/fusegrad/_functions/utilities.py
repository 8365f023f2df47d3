"""Utilities users reach for first: thread settings, determinism and matmul-precision flags,
default device, dtype predicates, `broadcast_shapes`, `scalar_tensor`, `empty_strided`,
`asarray`, and Tensor attributes (`data_ptr`, `nbytes`, `is_cpu`, `new`, `ravel`, `resize_`,
the in-place `squeeze_`/`unsqueeze_`/`t_`/`swapaxes_`).

Settings that have no effect on NumPy kernels are recorded and reported back, so code that
sets and reads them runs unchanged.
"""

from __future__ import annotations

import numbers
import os
import sys

import numpy as np

from .. import _device as _device_module
from .. import _dtype, _tensor
from .._creation import (
    _check_device,
    _no_pinned_memory,
    check_sizes,
    from_numpy,
    meta_factory,
    on_meta,
    tensor,
    zeros,
)
from .._device import device as _device_cls
from .._dispatch import call
from .._scalar_conversion import checked_scalar, half_input
from .._shapes import in_memory_order, memory_order, resize_shape
from .._tensor import Size, Tensor, inference_tensor
from .._torch_function import warning_stacklevel as _warning_stacklevel
from .._type_names import python_type_name
from ..ops import _parallel
from ..ops import shape as S
from ..ops import shape_extra as SX
from ..ops.views import empty_at
from . import _args
from .inplace import contiguous
from .shape import transpose_, view

# ---------------------------------------------------------------- threads


class _Settings:
    """Process-wide flags that fusegrad records (PyTorch keeps them in its global context)."""

    num_threads: int | None = None
    interop_threads: int | None = None
    deterministic = False
    deterministic_warn_only = False
    matmul_precision = "highest"
    limiter = None  # a threadpoolctl limit kept alive while it applies


_settings = _Settings()


def _blas_threads() -> int:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - depends on the environment
        return os.cpu_count() or 1
    counts = [int(p.get("num_threads", 1)) for p in threadpool_info()]
    return max(counts, default=os.cpu_count() or 1)


def set_num_threads(num: int) -> None:
    """Set the number of intra-op threads: fusegrad's own (im2col, col2im and layout copies)
    and NumPy's BLAS/OpenMP pools (through threadpoolctl when it is installed; otherwise the
    BLAS pools keep the size `OMP_NUM_THREADS` gave them at start)."""
    if not isinstance(num, numbers.Integral) or num <= 0:
        raise RuntimeError("set_num_threads expects a positive integer")
    _settings.num_threads = int(num)
    _parallel.set_threads(int(num))
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - depends on the environment
        return
    _settings.limiter = threadpool_limits(limits=int(num))


def get_num_threads() -> int:
    """The number of threads used for intra-op parallelism: as PyTorch's, the value set by
    `set_num_threads`, else `OMP_NUM_THREADS`, else the number of CPUs."""
    return _parallel.num_threads()


def set_num_interop_threads(num: int) -> None:
    """Record the inter-op thread count (fusegrad runs ops on the calling thread)."""
    if not isinstance(num, numbers.Integral) or num <= 0:
        raise RuntimeError("Expected positive number of threads")
    _settings.interop_threads = int(num)


def get_num_interop_threads() -> int:
    """The inter-op thread count set by `set_num_interop_threads` (else the BLAS pool's)."""
    if _settings.interop_threads is not None:
        return _settings.interop_threads
    return _blas_threads()


# ---------------------------------------------------------------- global flags


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Record the flag: fusegrad's NumPy kernels are deterministic either way."""
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms(): argument 'mode' (position 1) must "
                        f"be bool, not {mode.__class__.__name__}")
    _settings.deterministic = mode
    _settings.deterministic_warn_only = bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    """Whether `use_deterministic_algorithms(True)` is in effect."""
    return _settings.deterministic


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """Whether the deterministic flag was set with `warn_only=True`."""
    return _settings.deterministic_warn_only


def set_float32_matmul_precision(precision: str) -> None:
    """Record the float32 matmul precision ('highest', 'high' or 'medium'); NumPy always
    computes float32 matmuls in full precision."""
    if precision not in ("highest", "high", "medium"):
        import warnings

        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current"
                      f"setFloat32MatmulPrecision call has no effect.", UserWarning,
                      stacklevel=_warning_stacklevel(2))
        return
    _settings.matmul_precision = precision


def get_float32_matmul_precision() -> str:
    """The value last given to `set_float32_matmul_precision` ('highest' by default)."""
    return _settings.matmul_precision


def set_default_device(device) -> None:
    """The device factory functions make tensors on when given none ('cpu', 'meta'; None
    for the CPU), in this thread."""
    _device_module.set_default(device)


def get_default_device() -> _device_cls:
    """The device factory functions make tensors on when given none."""
    return _device_module.default()


# ---------------------------------------------------------------- predicates


def _need_tensor(fn: str, x) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument 'input' (position 1) must be Tensor, not "
                        f"{x.__class__.__name__}")


def is_floating_point(input: Tensor) -> bool:
    """True for floating dtypes."""
    _need_tensor("is_floating_point", input)
    return input.is_floating_point()


def is_complex(input: Tensor) -> bool:
    """True for complex dtypes."""
    _need_tensor("is_complex", input)
    return input.is_complex()


def is_signed(input: Tensor) -> bool:
    """True when the dtype holds negative values (all but uint8 and bool)."""
    _need_tensor("is_signed", input)
    return input.dtype.is_signed


def is_nonzero(input: Tensor) -> bool:
    """The truth value of a one-element tensor, with PyTorch's errors otherwise."""
    _need_tensor("is_nonzero", input)
    n = input.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input._data.reshape(-1)[0])


def is_same_size(input: Tensor, other: Tensor) -> bool:
    """True when both tensors have the same shape."""
    return tuple(input.shape) == tuple(other.shape)


def broadcast_shapes(*shapes) -> Size:
    """The shape tensors of `shapes` broadcast to (ints count as 1-D shapes)."""
    norm = []
    for s in shapes:
        if isinstance(s, numbers.Integral):
            norm.append((int(s),))
        else:
            norm.append(tuple(int(v) for v in s))
    ndim = max((len(s) for s in norm), default=0)
    out = [1] * ndim
    for i, shape in enumerate(norm):
        for k, size in enumerate(reversed(shape)):
            j = ndim - 1 - k
            if size < 0:
                raise RuntimeError(f"Trying to create tensor with negative dimension {size}: "
                                   f"{list(shape)}")
            if size == out[j] or size == 1:
                continue
            if out[j] == 1:
                out[j] = size
                continue
            raise RuntimeError(
                f"Attempting to broadcast a dimension of length {size} at {-k - 1}! "
                f"Mismatching argument at index {i} had {shape}; but expected shape should be "
                f"broadcastable to {out}")
    return Size(out)


# ---------------------------------------------------------------- factories


def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None,
                  requires_grad: bool = False) -> Tensor:
    """A 0-d tensor holding `s`; the default float dtype unless `dtype` says otherwise."""
    if pin_memory:
        _no_pinned_memory()
    dev = _check_device(device)
    dt = dtype or _dtype.get_default_dtype()
    if on_meta(dev):
        return meta_factory((), dt, requires_grad)
    # The number converted as PyTorch converts it: past an integer dtype's or float32's
    # range (a NaN into an integer dtype too) or complex into a real dtype, an overflow
    # error; the half types round a large number to inf.
    value = s.item() if isinstance(s, Tensor) else s
    if dt.itemsize != 2 or not dt.is_floating_point or value.__class__ is complex:
        value = checked_scalar(value, dt.np)
    out = Tensor._make(np.array(half_input(value, dt.np), dtype=dt.np), dt)
    return out._requires_grad_unguarded(True) if requires_grad else out


def strided_arguments(name: str, size, stride, depth: int = 2) -> None:
    """PyTorch's parser's TypeError for a `size` or `stride` of `empty_strided` or
    `new_empty_strided` (the function `depth` frames up) that is no list of ints: both are
    `int[]` parameters at positions 1 and 2 that take no bare int."""
    for position, param, value in ((1, "size", size), (2, "stride", stride)):
        error = _tensor.int_list_error(value, name, param, position)
        if error is None and isinstance(value, (list, tuple)):
            continue
        if param in _args.call_keywords(depth):
            position = None
        error = _tensor.int_list_error(value, name, param, position)
        if error is None:  # (a bare int)
            at = "" if position is None else f" (position {position})"
            error = TypeError(f"{name}(): argument '{param}'{at} must be tuple of ints, not "
                              f"{python_type_name(value)}")
        raise error


def empty_strided(size, stride, *, dtype=None, layout=None, device=None,
                  requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """A tensor of `size` whose elements are laid out with `stride` (filled with zeros)."""
    if pin_memory:
        _no_pinned_memory()
    if not isinstance(size, (list, tuple)) or not isinstance(stride, (list, tuple)) or \
            _tensor.int_list_error(size, "", "", 1) or _tensor.int_list_error(stride, "", "", 2):
        strided_arguments("empty_strided", size, stride)
    device = _check_device(device)
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    check_sizes(size)  # PyTorch's error for a negative size (before the strides' check)
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    dt = dtype or _dtype.get_default_dtype()
    if on_meta(device):
        return meta_factory(size, dt, requires_grad, stride)
    span = 1 + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else 0
    buf = np.zeros(span, dt.np)
    item = dt.np.itemsize
    data = np.lib.stride_tricks.as_strided(buf, size, tuple(s * item for s in stride))
    out = Tensor._make(data, dt)
    return out._requires_grad_unguarded(True) if requires_grad else out


def asarray(obj, *, dtype=None, device=None, copy: bool | None = None,
            requires_grad: bool = False) -> Tensor:
    """`obj` as a tensor, sharing memory with tensors and arrays unless `copy` or a dtype
    change forces a copy."""
    if device is not None:
        _device_cls(device)._check_available()
    if isinstance(obj, Tensor):
        out = obj if dtype is None or dtype is obj.dtype else obj.to(dtype)
        if copy and out is obj:
            out = obj.clone()
    elif isinstance(obj, np.ndarray) and obj.dtype in _dtype.FROM_NP and (
            dtype is None or dtype.np == obj.dtype):
        out = from_numpy(obj.copy() if copy else obj)
    elif isinstance(obj, (np.generic,)) or hasattr(obj, "__array__") and not isinstance(
            obj, (list, tuple)):
        arr = np.asarray(obj)
        out = tensor(arr, dtype=dtype)
    else:
        out = tensor(obj, dtype=dtype)
    if requires_grad:
        out._requires_grad_unguarded(True)
    return out


# ---------------------------------------------------------------- Tensor attributes


def _ptr(arr: np.ndarray) -> int:
    return arr.__array_interface__["data"][0]


def is_set_to(self: Tensor, tensor: Tensor) -> bool:
    """True when both tensors use the same memory with the same offset, sizes and strides."""
    return (data_ptr(self) == data_ptr(tensor) and self.shape == tensor.shape
            and self.stride() == tensor.stride() and self.dtype is tensor.dtype)


def is_coalesced(self: Tensor) -> bool:
    """Raises, as for any strided tensor (only sparse COO tensors have the property)."""
    raise RuntimeError("is_coalesced expected sparse coordinate tensor layout but got Strided")


def data_ptr(self: Tensor) -> int:
    """The address of the tensor's first element."""
    return _ptr(self._data)


def new(self: Tensor, *args, **kwargs) -> Tensor:
    """The legacy constructor: `x.new(2, 3)` (a tensor of that size, zeros here), `x.new(data)`
    (a copy of `data`; a storage: a vector over its memory), `x.new()` (empty); the dtype is
    `self`'s."""
    if kwargs.get("dtype") not in (None, self.dtype):
        raise TypeError(f"new(): dtype {kwargs['dtype']} does not match the tensor's "
                        f"{self.dtype}")
    if not args:
        return zeros(0, dtype=self.dtype)
    if len(args) == 1 and isinstance(args[0], Size):
        return zeros(tuple(args[0]), dtype=self.dtype)
    if len(args) == 1 and not isinstance(args[0], numbers.Integral):
        src = args[0]
        # A storage (there is none before its module is loaded): a vector over its memory.
        storage = sys.modules.get("fusegrad.storage")
        if storage is not None and isinstance(src, (storage.UntypedStorage,
                                                    storage.TypedStorage)):
            return storage.set_(zeros(0, dtype=self.dtype), src)
        if isinstance(src, Tensor):
            return src.detach() if src.dtype is self.dtype else src.detach().to(self.dtype)
        return tensor(src, dtype=self.dtype)
    return zeros(tuple(int(a) for a in args), dtype=self.dtype)


def ravel(input: Tensor) -> Tensor:
    """The elements as a 1-D tensor (a view of contiguous input, else of a copy)."""
    return view(contiguous(input), (-1,))


def resize_(self: Tensor, *sizes, size=None, memory_format=None) -> Tensor:
    """Give `self` a new shape in place, contiguous from its storage offset: the elements are
    the storage's from there on (not `self`'s in logical order), and elements past the
    storage's end are zero (PyTorch leaves them uninitialised). Not recorded by autograd; a
    new shape bumps the version counter, as PyTorch's does."""
    if size is None and not sizes:
        raise _args.missing("resize_", "size")
    given = size if size is not None else sizes[0] if len(sizes) == 1 else sizes
    if given.__class__ is not int and (given.__class__ is not tuple or
                                       any(s.__class__ is not int for s in given)):
        _args.int_list_parameter(given, "resize_", "size", 1)  # (a float: never truncated)
    shape = resize_shape(sizes, size, self.requires_grad)
    lookup = _tensor.tangent_lookup  # (set at an open forward AD level)
    if lookup is not None and lookup(self) is not None:
        raise RuntimeError("cannot resize variables that has a forward grad")
    old = self._data
    if shape == old.shape:  # PyTorch keeps the geometry (and the version) as it is
        return self
    n = int(np.prod(shape, dtype=np.int64))
    storage = old
    while isinstance(storage.base, np.ndarray):
        storage = storage.base
    if storage.dtype == old.dtype and storage.flags.c_contiguous:
        flat = storage.reshape(-1)
        offset = self.storage_offset()
        if offset + n > flat.size:
            # PyTorch grows the storage in place; here a new one takes its contents, and
            # `self` stops sharing memory with other views of the old one.
            grown = np.zeros(offset + n, old.dtype)
            grown[:flat.size] = flat
            flat = grown
            self._base = None  # so storage_offset reads the new storage, not the old base
            self._view_ver = None
        data = flat[offset:offset + n].reshape(shape)
        # An empty result keeps the offset (NumPy would put it at the storage's start).
        self._data = empty_at(flat, data, offset) if not n and offset else data
    else:  # a storage NumPy cannot address as one flat array: the elements in order
        flat = np.zeros(n, old.dtype)
        k = min(n, old.size)
        flat[:k] = old.reshape(-1)[:k]
        self._data = flat.reshape(shape)
    self._vc[0] += 1
    return self


def resize_as_(self: Tensor, the_template: Tensor, *, memory_format=None) -> Tensor:
    """`self.resize_(the_template.shape)`."""
    return resize_(self, tuple(the_template.shape))


def squeeze_(self: Tensor, *dims, dim=None, axis=None) -> Tensor:
    """Remove size-1 dimensions of `self` in place (all, one, or a tuple of them, which may
    come spread out: `x.squeeze_(0, 2)`)."""
    if dims:
        if dim is not None:
            raise TypeError("squeeze_() got multiple values for argument 'dim'")
        dim = dims[0] if len(dims) == 1 else dims
    if axis is not None:
        dim = _args.axis("squeeze_", dim, axis)
    if dim is None:
        return call(SX.squeeze_, self)
    if isinstance(dim, (numbers.Integral, Tensor)):
        return call(S.squeeze_inplace, self, dim.__index__())
    return call(SX.squeeze_dims_, self, tuple(dim))


def unsqueeze_(self: Tensor, dim: int | None = None, *, axis=None) -> Tensor:
    """Insert a size-1 dimension into `self` in place."""
    dim = _args.index(_args.required_dim("unsqueeze_", dim, axis))
    if dim.__class__ is not int:
        _args.int_parameter(dim, "unsqueeze_", "dim", 1)
    return call(SX.unsqueeze_, self, dim)


def t_(self: Tensor) -> Tensor:
    """Transpose a tensor of at most 2 dimensions in place."""
    return call(SX.t_, self)


def swapaxes_(self: Tensor, axis0: int, axis1: int) -> Tensor:
    """`transpose_` under NumPy's name."""
    return transpose_(self, axis0, axis1)


def swapdims_(self: Tensor, dim0: int, dim1: int) -> Tensor:
    """`transpose_` under NumPy's other name."""
    return transpose_(self, dim0, dim1)


def unfold(self: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """A view of all windows of `size` elements, `step` apart, along `dimension` (a new last
    dimension indexes within a window)."""
    if dimension.__class__ is not int or size.__class__ is not int or \
            step.__class__ is not int:
        for position, (param, value) in enumerate(
                (("dimension", dimension), ("size", size), ("step", step)), 1):
            if value.__class__ is not int and not _args.is_int_argument(value):
                keyword = param in _args.call_keywords()
                _args.int_parameter(value, "unfold", param, None if keyword else position)
    return call(SX.unfold, self, dimension, size, step)


# Tensor predicates and properties with fixed answers in fusegrad (the table in
# ops/spellings.py attaches them): no pinned, shared, conjugated-view, negated-view,
# distributed or inference tensors, and no device but the CPU.


def _nbytes(self: Tensor) -> int:
    return self._data.size * self._dtype.itemsize


def _itemsize(self: Tensor) -> int:
    return self._dtype.itemsize


def _always(self: Tensor) -> bool:
    return True


def _never(self: Tensor) -> bool:
    return False


def is_inference(self: Tensor) -> bool:
    """Whether this tensor was made inside `inference_mode` (or is a view of one that
    was)."""
    return inference_tensor(self)


def _is_pinned(self: Tensor, device=None) -> bool:
    return False


def pin_memory(self: Tensor, device=None) -> Tensor:
    """Page-locked memory is for copies to an accelerator, and none exists here: PyTorch's
    error without one."""
    raise RuntimeError("Cannot access accelerator device when none is available.")


def _in_shared_memory(a) -> bool:
    """Whether array `a`'s memory is a shared mapping (`share_memory_`'s)."""
    from .. import _shared_memory  # here: `import fusegrad` need not load mmap

    return _shared_memory.buffer_of(a) is not None


def is_shared(self: Tensor) -> bool:
    """Whether the tensor's data lies in shared memory (`share_memory_`)."""
    return self._data is not None and _in_shared_memory(self._data)


def share_memory_(self: Tensor) -> Tensor:
    """Move the tensor's data into shared memory (`_shared_memory`), in its memory order:
    processes forked afterwards, those it is passed to through `fusegrad.multiprocessing`
    (Hogwild training) and this one see each other's in-place writes, as with PyTorch's.
    Views taken before the move keep the old memory (PyTorch moves the whole storage; call
    this on fresh tensors, as `Module.share_memory` does). Already shared: nothing to do."""
    data = self._data
    if data is None or _in_shared_memory(data):
        return self

    from .. import _shared_memory

    def make(shape: tuple) -> np.ndarray:
        # a shared memory file: inherited by forks, passed to other processes by descriptor
        buffer = _shared_memory.allocate(data.nbytes)
        return np.frombuffer(buffer, dtype=data.dtype, count=data.size).reshape(shape)

    shared = in_memory_order(make, data.shape, memory_order(data))
    shared[...] = data
    self._data = shared
    return self


def _is_signed(self: Tensor) -> bool:
    return self.dtype.is_signed


def _get_device(self: Tensor) -> int:
    return -1

__all__ = [
    "set_num_threads", "get_num_threads", "set_num_interop_threads", "get_num_interop_threads",
    "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "is_deterministic_algorithms_warn_only_enabled", "set_float32_matmul_precision",
    "get_float32_matmul_precision", "set_default_device", "get_default_device",
    "is_floating_point", "is_complex", "is_signed", "is_nonzero", "is_same_size",
    "broadcast_shapes", "scalar_tensor", "empty_strided", "asarray", "ravel",
]
