"""Factory functions: tensor, from_numpy, zeros, arange, rand, ... and their `*_like` forms.

Under a mode that makes its own tensors (fake mode), factories ask the mode for a tensor of
the requested shape and dtype instead of allocating data.
"""

from __future__ import annotations

import math
import numbers
import operator
import sys

import numpy as np

from . import _dtype, _random
from . import _random_draws as _draws
from ._device import cpu as _cpu
from ._device import device as _device_cls
from ._device import meta as _META
from ._scalar_conversion import (
    check_python_int,
    checked_scalar,
    fill_value,
    half_input,
    not_implemented_for,
)
from ._shapes import (
    FORMAT_ORDERS,
    elem_strides,
    format_empty,
    format_order,
    in_memory_order,
    memory_order,
    strided_empty,
    strides_order,
)
from ._symbolic import SymInt, size_int
from ._tensor import (
    Tensor,
    int_list_error,
    is_int_argument,
    rebuild_tensor,  # noqa: F401  (pickles written before it moved name it here)
)
from ._thread_state import active as _active
from ._thread_state import local as _thread_local
from ._torch_function import warning_stacklevel as _warning_stacklevel
from ._type_names import call_keywords, python_type_name
from ._warn import warn_at_caller, warn_once, warn_once_at_caller


def _sizes(size, caller: str = "empty", position: int | None = 1) -> tuple:
    """The shape in `size` (the sizes spread out, or one sequence of them), checked as
    PyTorch's parser reads an `int[]` given at `position` (None: by keyword): ints, or 0-d
    integer tensors read as theirs, a bool only past the first."""
    given = size
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    out = []
    for s in size:
        if isinstance(s, Tensor) and is_int_argument(s):
            s = s.__index__()
        if not isinstance(s, numbers.Integral) or (s.__class__ is bool and not out):
            raise _size_error(given, caller, position)
        out.append(s)
    # PyTorch reads the whole size before it checks any of it (a bad type is the error
    # even after a negative size)
    check_sizes(out, caller)
    return tuple(size_int(s) for s in out)


def _size_error(size, caller: str, position: int | None) -> TypeError:
    """PyTorch's parser's error for a shape argument that is no list of ints: by position,
    as an `int[]` (one size alone is read as the whole argument); by keyword, naming the
    type of what was given."""
    value = size[0] if len(size) == 1 else size
    if position is None:
        return TypeError(f"{caller}(): argument 'size' must be tuple of ints, not "
                         f"{python_type_name(value)}")
    return int_list_error(value, caller, "size", position) or TypeError(
        f"{caller}(): argument 'size' (position {position}) must be tuple of ints, not "
        f"{python_type_name(value)}")


def check_sizes(shape, caller: str = "empty") -> None:
    """PyTorch's error for a negative size in the shape of a tensor to make: `zeros` has
    its own message; every other factory (ones, empty, full, rand, randint, new_*,
    empty_strided, ...) names the first negative size and the whole shape."""
    for s in shape:
        if s < 0:
            if caller == "zeros":
                raise RuntimeError("zeros: Dimension size must be non-negative.")
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: "
                               f"{[int(d) for d in shape]}")


_FACTORY_OPTIONS = _random.FACTORY_OPTIONS
_with_generator = _random.factory_signatures
_RANDOM_SIGNATURES = _with_generator("tuple of ints size")
_RANDINT_SIGNATURES = _random.RANDINT_SIGNATURES
_RANDPERM_SIGNATURES = _random.RANDPERM_SIGNATURES
_LIKE_SIGNATURES = _with_generator("Tensor input", options=_random.LIKE_OPTIONS)
_RANDINT_LIKE_SIGNATURES = _with_generator("Tensor input, int low, int high",
                                           "Tensor input, Tensor high", "Tensor input, int high",
                                           options=_random.LIKE_OPTIONS)
_NORMAL_SIGNATURES = (
    " * (Tensor mean, Tensor std, *, torch.Generator generator = None, Tensor out = None)\n"
    " * (Tensor mean, float std = 1, *, torch.Generator generator = None, Tensor out = None)\n"
    " * (float mean, Tensor std, *, torch.Generator generator = None, Tensor out = None)\n"
    " * (float mean, float std, tuple of ints size, *, torch.Generator generator = None, "
    + _FACTORY_OPTIONS + ")\n")


def _generator_error(fname: str, args: tuple, signatures: str, **kwargs) -> TypeError:
    """PyTorch's error for a random factory given a `generator` that is no Generator. The
    keywords listed are those given a value other than their default, in the signature's
    order (the order they were written in is not known here)."""
    given = {k: v for k, v in kwargs.items()
             if k == "generator" or not (v is None or v is False)}
    return _random.invalid_generator_combination(fname, args, given, signatures)


def _size_arg(sizes: tuple, size, caller: str, signatures: str = "") -> tuple:
    """The shape a factory was given, as `zeros(2, 3)`, `zeros((2, 3))` or `zeros(size=...)`.

    `signatures`: PyTorch's overload list for the factories (rand, randn) whose argument
    errors name it instead of the missing or repeated argument.
    """
    if (size is None and sizes) or (size is not None and not sizes
                                    and isinstance(size, (tuple, list))):
        return _sizes(sizes, caller) if sizes else _sizes((size,), caller, None)
    if signatures:
        got = [type(s).__name__ for s in sizes]
        if size is not None:
            got.append(f"size={type(size).__name__}")
        raise TypeError(f"{caller}() received an invalid combination of arguments - got "
                        f"({', '.join(got)}), but expected one of:\n{signatures}")
    if size is None:
        raise TypeError(f'{caller}() missing 1 required positional arguments: "size"')
    if sizes:
        raise TypeError(f"{caller}() got multiple values for argument 'size'")
    raise TypeError(f"{caller}(): argument 'size' must be tuple of ints, not "
                    f"{type(size).__name__}")


def _check_device(device) -> _device_cls | None:
    """The device a factory was given (checked), or None."""
    if device is not None:
        device = _device_cls(device)
        device._check_available()
    return device


def _finish(data: np.ndarray, dtype: _dtype.dtype, requires_grad: bool) -> Tensor:
    if not data.size:  # PyTorch's strides, which the tensor's views derive theirs from
        data = strided_empty(data)
    t = Tensor._make(data, dtype)
    if requires_grad:
        t._set_requires_grad(
            True, "Only Tensors of floating point and complex dtype can require gradients")
    return t


def meta_factory(shape, dtype: _dtype.dtype, requires_grad: bool, strides=None) -> Tensor:
    """What a factory makes on the meta device (`_meta.factory_tensor`). The meta device's
    module is loaded by its first factory: most programs never make a meta tensor."""
    from . import _meta

    return _meta.factory_tensor(shape, dtype, requires_grad, strides)


def on_meta(device: _device_cls | None) -> bool:
    """Whether a factory given `device` (checked, or None for the default) makes a meta
    tensor."""
    if device is None and _active.default_device:
        device = _thread_local.default_device
    return device is not None and device.type == "meta"


def _factory(shape, dtype, requires_grad, fill, random: bool = False,
             device: _device_cls | None = None):
    """Make a tensor of `shape` and `dtype` whose data `fill(np_dtype)` computes (`random`:
    the values are drawn from a generator, so a graph must not keep them as a constant), on
    `device` (None: the default device; on the meta device nothing is computed)."""
    if (device is not None or _active.default_device) and on_meta(device):
        if dtype.__class__ is type:
            dtype = _dtype.as_dtype(dtype)
        return meta_factory(shape, dtype, requires_grad)
    if dtype.__class__ is not _dtype.dtype:
        if dtype.__class__ is type:  # `dtype=float` (float64), as PyTorch reads Python types
            dtype = _dtype.as_dtype(dtype)
        if not isinstance(dtype, _dtype.dtype):  # (bfloat16's class is a subclass)
            _bad_dtype(_public_caller(), dtype)
    if _active.modes:  # a mode in some thread: look at this thread's
        for mode in reversed(_thread_local.modes):
            make = getattr(mode, "make_factory_tensor", None)
            if make is not None:
                if getattr(mode, "factory_values", False):  # a tracer that keeps the values
                    return make(shape, dtype, requires_grad, fill, random)
                return make(shape, dtype, requires_grad)
    return _finish(fill(dtype.np), dtype, requires_grad)


def _public_caller() -> str:
    """The name of the outermost public function of this module in the calls that reached
    the caller (`empty` for `empty` -> `zeros` -> `_factory`): the function an error names."""
    frame, name, here = sys._getframe(2), "tensor", globals()
    while frame is not None and frame.f_globals is here:
        code = frame.f_code
        if not code.co_name.startswith("_") and \
                getattr(here.get(code.co_name), "__code__", None) is code:
            name = code.co_name
        frame = frame.f_back
    return name


def _bad_dtype(function: str, dtype) -> None:
    """PyTorch's argument parser's error for a `dtype` that is no dtype (a string)."""
    raise TypeError(f"{function}(): argument 'dtype' must be torch.dtype, not "
                    f"{type(dtype).__name__}")


def _float_dtype(dtype):
    if dtype is None:
        return _dtype.defaults.float
    return dtype if dtype.__class__ is not type else _dtype.as_dtype(dtype)


# ---------------------------------------------------------------- from data


def _numpy_text_error(np_dtype: np.dtype) -> TypeError:
    """PyTorch's error for NumPy strings or bytes (an array of them, or one as an element)."""
    return TypeError(
        f"can't convert np.ndarray of type numpy.{np_dtype.type.__name__}. The only supported "
        "types are: float64, float32, float16, complex64, complex128, int64, int32, int16, "
        "int8, uint64, uint32, uint16, uint8, and bool.")


def _infer_dtype(data):
    """The dtype PyTorch gives `data`, read depth-first in order as PyTorch reads it (so the
    first element it cannot read is the error: text, or a value of no number type)."""
    if isinstance(data, Tensor):
        return data.dtype
    if isinstance(data, (np.ndarray, np.generic)):
        if data.dtype.kind in "US":
            raise _numpy_text_error(data.dtype)
        return _dtype.from_numpy_dtype(data.dtype)
    if isinstance(data, bool):
        return _dtype.bool_
    if isinstance(data, numbers.Integral):
        return _dtype.int64
    if isinstance(data, numbers.Real):
        return _dtype.defaults.float
    if isinstance(data, numbers.Complex):
        return _dtype.defaults.float.to_complex()
    if isinstance(data, _TEXT):
        raise TypeError(f"new(): invalid data type '{python_type_name(data)}'")
    if isinstance(data, (list, tuple, bytearray)):
        if not data:
            return _dtype.defaults.float
        kinds = set(map(type, data))
        if kinds <= _PYTHON_NUMBERS:  # the common case, read at once (no element can fail)
            if complex in kinds:
                return _dtype.defaults.float.to_complex()
            if float in kinds:
                return _dtype.defaults.float
            return _dtype.int64 if int in kinds else _dtype.bool_
        out = None
        for x in data:
            kind = _infer_dtype(x)
            out = kind if out is None else _dtype.promote_types(out, kind)
            if out is _dtype.complex128:  # nothing promotes further: PyTorch reads no more
                return out
        return out
    raise RuntimeError(f"Could not infer dtype of {type(data).__name__}")


_PYTHON_NUMBERS = {bool, int, float, complex}
# Strings and bytes: sequences to PyTorch (of strings, and of ints), never numbers.
_TEXT = (str, bytes)
_SEQUENCES = (list, tuple, str, bytes, bytearray)
_MAX_DIMS = 128  # the most dimensions PyTorch reads off nested sequences


def _sequence_sizes(data) -> list:
    """The shape PyTorch reads off nested sequences before anything else: the lengths along
    the chain of first elements. A non-empty string never ends that chain (its first
    element is a string again), which is why text there is "too many dimensions 'str'"."""
    sizes = []
    seq = data
    while isinstance(seq, _SEQUENCES) or (isinstance(seq, np.ndarray) and seq.ndim):
        n = len(seq)
        sizes.append(n)
        if len(sizes) > _MAX_DIMS:
            raise ValueError(f"too many dimensions '{python_type_name(seq)}'")
        if not n:
            break
        seq = seq[0]
    return sizes


def _plain(data) -> bool:
    """Whether nested lists and tuples `data` hold only numbers, tensors and numeric arrays:
    the fast path. Text, None and other objects take `_read`, PyTorch's element-by-element
    reading, for its errors (NumPy would parse '1.5' as a number, and None as NaN)."""
    nested = False
    for kind in set(map(type, data)):
        if issubclass(kind, np.ndarray):  # (read as fast here, but PyTorch's is slow)
            warn_once_at_caller(_LIST_OF_ARRAYS)
        if issubclass(kind, (list, tuple)):
            nested = True
        elif issubclass(kind, _TEXT) or not issubclass(kind, _NUMERIC):
            return False
        elif issubclass(kind, (np.ndarray, np.generic)) and any(
                x.dtype.kind in "US" for x in data if isinstance(x, (np.ndarray, np.generic))):
            return False
    return not nested or all(_plain(x) for x in data if isinstance(x, (list, tuple)))


_NUMERIC = (numbers.Number, np.generic, np.ndarray, Tensor)
_LIST_OF_ARRAYS = ("Creating a tensor from a list of numpy.ndarrays is extremely slow. Please "
                   "consider converting the list to a single numpy.ndarray with numpy.array() "
                   "before converting to a tensor.")


def _read(data, sizes: list, dt: _dtype.dtype):
    """`data` (nested sequences holding text or other objects) read as PyTorch stores it in
    a tensor of `sizes` and dtype `dt`: depth-first, each sequence checked for its length
    and each element for a number, so the first problem is the error; bytes that get
    through are sequences of ints (`tensor([b'ab'], dtype=torch.float32)` is [[97., 98.]])."""
    if 0 in sizes:  # PyTorch stores nothing in an empty tensor, whatever the data holds
        return np.zeros(sizes, dt.np)
    return _stored(data, sizes, 0, dt)


def _stored(obj, sizes: list, dim: int, dt: _dtype.dtype):
    if dim == len(sizes):
        return _stored_number(obj, dt)
    try:
        items = list(iter(obj))
    except TypeError:
        raise TypeError("not a sequence") from None
    if len(items) != sizes[dim]:
        raise ValueError(f"expected sequence of length {sizes[dim]} at dim {dim} "
                         f"(got {len(items)})")
    return [_stored(x, sizes, dim + 1, dt) for x in items]


def _stored_number(x, dt: _dtype.dtype):
    """`x` if PyTorch reads it as a number for dtype `dt`, else its error: a float dtype
    reads a real number, an integer one an int (a float truncates), bool either or a
    complex."""
    if isinstance(x, Tensor):
        if x.numel() != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return x
    cls = type(x)
    text = isinstance(x, _TEXT)  # NumPy's strings have __float__, yet are no numbers
    if dt.is_floating_point or dt.is_complex:
        if text or not (hasattr(cls, "__float__") or hasattr(cls, "__index__")
                        or (dt.is_complex and hasattr(cls, "__complex__"))):
            raise TypeError(f"must be real number, not {python_type_name(x)}")
    elif text or not (isinstance(x, float) or hasattr(cls, "__index__")
                      or (dt is _dtype.bool_ and isinstance(x, complex))):
        raise TypeError(f"'{python_type_name(x)}' object cannot be interpreted as an integer")
    return x


def _element(x, dt: np.dtype) -> np.ndarray:
    """An element of a sequence given as data: a tensor there is a number, as PyTorch
    reads it (a one-element tensor of any shape; more is an error)."""
    if isinstance(x, Tensor):
        if x.numel() != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return x._data.reshape(()).astype(dt)
    return _to_array(x, dt)


def _to_array(data, dt: np.dtype) -> np.ndarray:
    if isinstance(data, Tensor):
        return data._data.astype(dt)
    if isinstance(data, (list, tuple)) and any(isinstance(x, (Tensor, list, tuple))
                                               for x in data):
        parts = [_element(x, dt) for x in data]
        shapes = {p.shape for p in parts}
        if len(shapes) > 1:
            first, last = parts[0], parts[-1]
            raise ValueError(
                f"expected sequence of length {first.shape[0] if first.ndim else 0} at dim 1 "
                f"(got {last.shape[0] if last.ndim else 0})")
        return np.stack(parts).astype(dt, copy=False) if parts else np.zeros((0,), dt)
    try:
        return np.array(half_input(data, dt), dtype=dt)
    except TypeError as e:
        if dt.kind != "c" and "complex" in str(e):  # a complex number for a real dtype
            raise TypeError("must be real number, not complex") from None
        raise


def tensor(data, *, dtype=None, device=None, requires_grad: bool = False,
           pin_memory: bool = False) -> Tensor:
    """A new tensor holding a copy of `data` (numbers, nested lists, arrays, tensors)."""
    if pin_memory:
        _no_pinned_memory()
    dev = _check_device(device)
    if (dev is not None or _active.default_device) and on_meta(dev):
        made = tensor(data, dtype=dtype, device=_cpu)  # (read and checked as on the CPU)
        return meta_factory(tuple(made.shape), made.dtype, requires_grad)
    if isinstance(data, range):  # a sequence of ints, as PyTorch reads it
        data = list(data)
    if isinstance(data, _TEXT):  # refused first, whatever the dtype
        raise TypeError(f"new(): invalid data type '{python_type_name(data)}'")
    if isinstance(data, np.ndarray) and data.dtype.kind in "US":  # NumPy would parse numbers
        raise _numpy_text_error(data.dtype)
    sizes = _sequence_sizes(data) if isinstance(data, (list, tuple, bytearray)) else None
    dt = _dtype.as_dtype(dtype) or _infer_dtype(data)
    if dt.__class__ is not _dtype.dtype and not isinstance(dt, _dtype.dtype):
        _bad_dtype("tensor", dt)
    if sizes is not None and (isinstance(data, bytearray) or not _plain(data)):
        # What inference let through (a dtype was given, or bytes as a sequence of ints):
        # PyTorch's reading of it, not NumPy's
        data = _read(data, sizes, dt)
    elif sizes is None and not isinstance(data, _NUMERIC):
        _stored_number(data, dt)  # `tensor(None, dtype=...)`: PyTorch's error, not NaN
    if isinstance(data, Tensor):
        spelling = "tensor.new_tensor" if _public_caller() == "new_tensor" else "torch.tensor"
        warn_at_caller(
            "To copy construct from a tensor, it is recommended to use "
            "sourceTensor.detach().clone() or sourceTensor.detach().clone().requires_grad_(True), "
            f"rather than {spelling}(sourceTensor).")
        if not data._plain:
            return data.detach().to(dt).clone()
    if _active.modes:
        shape = _symbolic_shape(data)
        if shape is not None:  # a traced program's sizes (`tensor(x.shape)`): kept symbolic
            return _factory(shape, dt, requires_grad,
                            lambda np_dtype: _to_array(_concrete(data), np_dtype), device=dev)
    try:
        array = _to_array(data, dt.np)
    except OverflowError:
        if _beyond_int64(data):  # PyTorch reads each Python int as a C long long first
            raise ValueError("Overflow when unpacking long long") from None
        array = _wrapped_unsigned(data, dt)
        if array is None:
            raise RuntimeError(f"value cannot be converted to type {dt.name} without "
                               "overflow") from None
    except (ValueError, TypeError) as e:
        # PyTorch's element-by-element reading names the problem NumPy met: a number where
        # a sequence belongs ("not a sequence"), a sequence or a complex number where an
        # integer belongs, a NaN for an integer dtype (an overflow, as infinities are)
        if sizes is not None and not isinstance(data, bytearray):
            _read(data, sizes, dt)
        elif sizes is None:
            _stored_number(data, dt)
        if "NaN" in str(e):
            raise RuntimeError(f"value cannot be converted to type {dt.name} without "
                               "overflow") from None
        raise
    # (checked where the dtype was given: an inferred integer dtype holds no floats)
    if dtype is not None and array.dtype.kind in "iu" and \
            isinstance(data, (float, list, tuple)) and _floats_beyond(data, array.dtype):
        raise RuntimeError(f"value cannot be converted to type {dt.name} without overflow")
    # (an array from pickle keeps its separate dtype object through the copy: NumPy's own)
    array = _dtype.own_instance(array)
    if _active.modes and not requires_grad and _traces_factories() and \
            not _holds_tensor(data):
        # A tracer (AOT autograd) keeps the values as a graph constant, as it keeps a
        # factory's: the program's literal is the same on every run. (Data holding tensors
        # or arrays reads values a trace must not fix, which can change between runs, and a
        # leaf requiring grad is the caller's to read: they stay tensors made outside
        # dispatch, which the tracer refuses.)
        return _factory(array.shape, dt, requires_grad, lambda np_dtype: array)
    return _finish(array, dt, requires_grad)


def _floats_beyond(data, np_dtype) -> bool:
    """Whether Python floats of `data` (nested lists and tuples) lie outside integer dtype
    `np_dtype`'s range before they are truncated (PyTorch checks a float as it is: 127.9 is
    an int8 overflow, -0.5 a uint8 one; NumPy truncates first). Ints are not looked at:
    PyTorch wraps them into the dtype (-1 is uint8 255)."""
    info = np.iinfo(np_dtype)
    todo = [data]
    while todo:
        x = todo.pop()
        if x.__class__ is float:
            if x < info.min or x > info.max:
                return True
        elif isinstance(x, (list, tuple)):
            todo.extend(x)
    return False


def _factory_mode_says(attribute: str) -> bool:
    """`attribute` of this thread's innermost mode that makes factory results (False where
    none does, or it lacks the attribute)."""
    for mode in reversed(_thread_local.modes):
        if getattr(mode, "make_factory_tensor", None) is not None:
            return getattr(mode, attribute, False)
    return False


def records_factory_calls() -> bool:
    """Whether the innermost factory mode records the call the program made (make_fx,
    export: `record_factories`), where a number the program writes is a literal tensor too
    (`x[0] = 1.0` fills from `lift_fresh_copy` of `tensor(1.)`)."""
    return _factory_mode_says("record_factories")


def _traces_factories() -> bool:
    """Whether the innermost factory mode is a tracer keeping their values
    (`factory_values`), not one making fake tensors (the capture's, whose example of a
    literal stays real, so a mask written in the program keeps its known shape)."""
    return _factory_mode_says("factory_values")


def _holds_tensor(data) -> bool:
    """Whether `data` (a number, array or nested sequences) is or holds a tensor or a NumPy
    array (values the program can change in place)."""
    if isinstance(data, (Tensor, np.ndarray)):
        return True
    if isinstance(data, (list, tuple)):
        return any(_holds_tensor(x) for x in data)
    return False


_INT64 = np.iinfo(np.int64)
_PLAIN_NUMBERS = (int, float, complex, np.generic, Tensor)


def _symbolic_shape(data) -> tuple | None:
    """The shape of `data` (a number or nested sequences of them) when it holds a symbolic
    number (a size or scalar of a traced program), else None (also for ragged data, which
    the plain path refuses with its error)."""
    found = False

    def shape_of(x):
        nonlocal found
        if isinstance(x, (list, tuple)):
            shapes = {shape_of(v) for v in x}
            if len(shapes) > 1 or None in shapes:
                return None
            return (len(x),) + (shapes.pop() if shapes else ())
        if not isinstance(x, _PLAIN_NUMBERS) and isinstance(x, numbers.Number):
            found = True
        return ()

    shape = shape_of(data)
    return shape if found else None


def _concrete(data):
    """`data` with its symbolic numbers replaced by their values."""
    if isinstance(data, (list, tuple)):
        return [_concrete(v) for v in data]
    if isinstance(data, _PLAIN_NUMBERS) or not isinstance(data, numbers.Number):
        return data
    return int(data) if isinstance(data, numbers.Integral) else float(data)


def _wrapped_unsigned(data, dt: _dtype.dtype) -> np.ndarray | None:
    """Integer `data` for an unsigned dtype with negative values down to minus its maximum
    as their two's complement (`tensor([-1], dtype=torch.uint8)` holds 255, as PyTorch's);
    None if other values are out of range."""
    if dt.np.kind != "u":
        return None
    try:
        wide = np.array(data)
    except (OverflowError, TypeError, ValueError):
        return None
    if wide.dtype.kind == "f":  # ints beside floats: each as PyTorch converts it
        wide = np.array(_truncated(data, np.iinfo(dt.np).max))
    if wide.dtype.kind not in "iu":  # floats beyond the range are PyTorch's error
        return None
    top = np.iinfo(dt.np).max
    if wide.size and (wide.min() < -top or wide.max() > top):
        return None
    return wide.astype(dt.np)


def _truncated(data, top: int):
    """Nested `data` with each float in [0, top] truncated to an int (ints as they are), or
    a float (which the caller refuses) where a float is out of that range or NaN."""
    if isinstance(data, (list, tuple)):
        return [_truncated(x, top) for x in data]
    if data.__class__ is float:
        return int(data) if 0 <= data <= top else 0.5
    return data


def _beyond_int64(data) -> bool:
    """Whether `data` (numbers, nested sequences) holds a Python int no int64 holds."""
    if isinstance(data, (list, tuple)):
        return any(_beyond_int64(x) for x in data)
    return isinstance(data, int) and not isinstance(data, bool) and \
        not _INT64.min <= data <= _INT64.max


def literal(data) -> Tensor:
    """`tensor(data)` for data written in the program (an index list): a tracing mode keeps
    its values as a graph constant, as it keeps a factory's."""
    t = tensor(data)
    if not _active.modes or (_traces_factories() and not _holds_tensor(data)):
        return t  # (a tracer's constant already: `tensor` routes it through the factory)
    return _factory(tuple(t.shape), t.dtype, False, lambda np_dtype: t._data)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """`data` as a tensor, sharing memory with tensors and arrays when the dtype allows."""
    dev = _check_device(device)
    if (dev is not None or _active.default_device) and on_meta(dev):
        if isinstance(data, Tensor):  # (PyTorch's `to`: a CPU tensor is copied there)
            return data.to(dtype=dtype, device=_META)
        return tensor(data, dtype=dtype, device=_META)
    if isinstance(data, Tensor):
        if dev is not None and data._data is None and data.is_meta:
            return data.to(dtype=dtype, device=dev)  # (no data to copy off the meta device)
        return data if dtype is None or dtype is data.dtype else data.to(dtype)
    if isinstance(data, np.ndarray) and (dtype is None or dtype.np == data.dtype):
        return from_numpy(data)
    return tensor(data, dtype=dtype)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with the NumPy array `array`."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    if any(s < 0 for s in array.strides):
        raise ValueError(
            "At least one stride in the given numpy array is negative, and tensors with "
            "negative strides are not currently supported. (You can probably work around this "
            "by making a copy of your array  with array.copy().) ")
    dtype = _dtype.from_numpy_dtype(array.dtype)
    if not array.flags.writeable:
        # PyTorch shares the memory all the same and leaves writes undefined; here the tensor
        # gets its own copy, so writing to it works (and leaves the array as it was).
        warn_once(_NOT_WRITABLE, stacklevel=_warning_stacklevel(2))
        array = array.copy()
    return Tensor._make(_dtype.own_instance(array), dtype)


_NOT_WRITABLE = (
    "The given NumPy array is not writable, and PyTorch does not support non-writable tensors. "
    "This means writing to this tensor will result in undefined behavior. You may want to copy "
    "the array to protect its data or make it writable before converting it to a tensor. This "
    "type of warning will be suppressed for the rest of this program.")


# ---------------------------------------------------------------- constant fills


def _no_pinned_memory() -> None:
    """PyTorch's refusal of `pin_memory=True` where no accelerator is."""
    raise RuntimeError("pin_memory=True requires a CUDA or other accelerator backend; no "
                       "pinned memory allocator is available on this system.")



def zeros(*sizes, size=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
          pin_memory=False):
    """A tensor of zeros."""
    if pin_memory:
        _no_pinned_memory()
    dev = _check_device(device)
    shape = _size_arg(sizes, size, "zeros")
    return _factory(shape, _float_dtype(dtype), requires_grad, lambda dt: np.zeros(shape, dt),
                    device=dev)


def ones(*sizes, size=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
         pin_memory=False):
    """A tensor of ones."""
    if pin_memory:
        _no_pinned_memory()
    dev = _check_device(device)
    shape = _size_arg(sizes, size, "ones")
    return _factory(shape, _float_dtype(dtype), requires_grad, lambda dt: np.ones(shape, dt),
                    device=dev)


def empty(*sizes, size=None, out=None, dtype=None, layout=None, device=None,
          requires_grad=False, memory_format=None, pin_memory=False):
    """An uninitialised tensor (filled with zeros here, so results are reproducible), laid
    out in `memory_format` (row-major by default)."""
    if pin_memory:
        _no_pinned_memory()
    shape = _size_arg(sizes, size, "empty")
    name = getattr(memory_format, "name", None)
    if name not in FORMAT_ORDERS:
        return zeros(shape, dtype=dtype, device=device, requires_grad=requires_grad)
    return _in_order(zeros, shape, format_order(name, len(shape)), dtype=dtype, device=device,
                     requires_grad=requires_grad)


def full(size, fill_value, *, out=None, dtype=None, layout=None, device=None,
         requires_grad=False, pin_memory=False):
    """A tensor filled with `fill_value`; the dtype follows the value's type."""
    if pin_memory:
        _no_pinned_memory()
    dev = _check_device(device)
    if isinstance(fill_value, Tensor):  # a 0-d tensor fills as its number
        fill_value = fill_value.item()
    dt = dtype or _dtype.scalar_dtype(fill_value)
    shape = _sizes((size,), "full")
    return _factory(shape, dt, requires_grad, lambda nd: _full_array(shape, fill_value, nd),
                    device=dev)


def _full_array(shape: tuple, value, nd: np.dtype) -> np.ndarray:
    """`shape` filled with `value` converted for NumPy dtype `nd` as PyTorch's fill does."""
    value = fill_value(value, nd, math.prod(shape))
    with np.errstate(over="ignore"):
        return np.full(shape, value, nd)


def eye(n: int, m: int | None = None, *, out=None, dtype=None, layout=None, device=None,
        requires_grad=False, pin_memory=False):
    """The identity matrix (n x m)."""
    if pin_memory:
        _no_pinned_memory()
    if n.__class__ is not int and not is_int_argument(n):
        raise TypeError(f"eye(): argument 'n' (position 1) must be int, not "
                        f"{python_type_name(n)}")
    if m is not None and m.__class__ is not int and not is_int_argument(m):
        raise _random.invalid_generator_combination(
            "eye", (n, m), {}, "".join(f" * ({head}, *, {_FACTORY_OPTIONS})\n"
                                       for head in ("int n", "int n, int m")))
    dev = _check_device(device)
    m = n if m is None else m
    if n < 0:  # eye checks its sizes itself, in its own words
        raise RuntimeError(f"n must be greater or equal to 0, got {n}")
    if m < 0:
        raise RuntimeError(f"m must be greater or equal to 0, got {m}")
    return _factory((n, m), _float_dtype(dtype), requires_grad,
                    lambda dt: np.eye(n, m, dtype=dt), device=dev)


def arange(start=None, end=None, step=1, *, out=None, dtype=None, layout=None, device=None,
           requires_grad=False, pin_memory=False):
    """Values from `start` to `end` (exclusive) by `step`: `arange(end)`, `arange(start,
    end[, step])`, or by keyword (`arange(end=3)`)."""
    if pin_memory:
        _no_pinned_memory()
    dev = _check_device(device)
    if end is None:
        if start is None:
            raise TypeError("arange() received an invalid combination of arguments - got (), "
                            "but expected one of:\n * (Number end, *, ...)\n"
                            " * (Number start, Number end, *, ...)\n"
                            " * (Number start, Number end, Number step, *, ...)")
        start, end = 0, start
    elif start is None:
        start = 0
    vals = [v.item() if isinstance(v, Tensor) else
            _dtype.python_scalar(v) if isinstance(v, np.generic) else v
            for v in (start, end, step)]
    start, end, step = vals
    for v in vals:  # (numbers beyond int64 and uint64 are refused as arguments)
        check_python_int(v)
    if dtype is None:
        dtype = (_dtype.defaults.float if any(isinstance(v, float) for v in vals)
                 else _dtype.int64)
    if not dtype.is_floating_point and any(v.__class__ is int and v >= 1 << 63 for v in vals) \
            or dtype is _dtype.int64 and any(v.__class__ is float and not _INT64_RANGE[0] <= v <
                                             _INT64_RANGE[1] for v in vals):
        # (an integer range is reckoned in int64, which a uint64 number (or a float beyond
        # int64's range, for an int64 result) overflows)
        raise RuntimeError("value cannot be converted to type int64_t without overflow")
    if dtype is _dtype.bool_ or dtype.is_complex:
        raise not_implemented_for("arange_cpu", dtype)
    if not (step > 0 or step < 0):  # (a NaN step too)
        raise RuntimeError("step must be nonzero")
    if not all(math.isfinite(v) for v in (start, end) if isinstance(v, float)):
        raise RuntimeError(f"unsupported range: {_fmt_number(start)} -> {_fmt_number(end)}")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if dtype is _dtype.int64 and all(v.__class__ is int or v.__class__ is float for v in vals):
        n = _int64_range_size(start, end, step)
    elif all(isinstance(v, numbers.Integral) for v in vals):
        n = max(-((start - end) // step), 0)  # exact for integers (and symbolic sizes)
    else:
        n = math.ceil((end - start) / step)  # the size is reckoned in doubles
        if n >= 2 ** 63:
            raise RuntimeError("invalid size, possible overflow?")
        n = max(n, 0)
    if not dtype.is_floating_point:
        # An integer dtype steps by the integer parts of start and step (PyTorch casts them
        # to int64 before stepping: arange(1, 4, 0.5, dtype=int8) is six 1s; int64's
        # argument check refuses a step that truncates to 0).
        if isinstance(step, float) and int(step) == 0 and dtype is _dtype.int64:
            raise ValueError("step must be nonzero")
        start, step = int(start), int(step)
    return _factory((n,), dtype, requires_grad,
                    lambda dt: (start + np.arange(n, dtype=np.float64 if dtype.is_floating_point
                                                  else np.int64) * step).astype(dt), device=dev)


_INT64_RANGE = (-2.0 ** 63, 2.0 ** 63)


def _int64_range_size(start, end, step) -> int:
    """The length of an int64 `arange`, reckoned as PyTorch does: in int64 arithmetic (which
    wraps) on the arguments' integer parts, so a range whose span passes int64's limits is
    refused or empty rather than counted exactly."""
    start, end, step = int(start), int(end), int(step)
    if step == 0:  # (a fractional step: its integer part)
        raise ValueError("step must be nonzero")
    sign = (step > 0) - (step < 0)
    span = (end - start + step - sign + (1 << 63)) % (1 << 64) - (1 << 63)
    n = abs(span) // abs(step)  # (C's division, towards zero)
    if (span < 0) != (step < 0) and n:
        raise RuntimeError("invalid size, possible overflow?")
    return n


def _fmt_number(v) -> str:
    """A number as C++'s stream writes it into PyTorch's messages (6 significant digits)."""
    return str(v) if isinstance(v, numbers.Integral) else f"{v:g}"


def _tri_indices(row: int, col: int, offset: int, lower: bool, dtype, device):
    name = "tril_indices" if lower else "triu_indices"
    # (ints only: a float is `__index__`'s TypeError, which the public function's wrapper
    # words as PyTorch's parser does)
    for position, (param, value) in enumerate((("row", row), ("col", col),
                                                ("offset", offset)), 1):
        if value.__class__ is bool:  # (anything else that is no int: `__index__`'s error)
            raise TypeError(f"{name}(): argument '{param}' (position {position}) must be int, "
                            "not bool")
    row, col, offset = (v if v.__class__ is int or v.__class__ is SymInt else operator.index(v)
                        for v in (row, col, offset))
    dev = _check_device(device)
    dtype = dtype or _dtype.int64
    if row < 0:
        raise RuntimeError(f"row must be non-negative, got{row}")
    if col < 0:
        raise RuntimeError(f"col must be non-negative, got{col}")
    mask = np.tri(row, col, offset, dtype=bool) if lower else ~np.tri(row, col, offset - 1,
                                                                      dtype=bool)
    rows, cols = np.nonzero(mask)
    return _factory((2, rows.size), dtype, False,
                    lambda dt: np.stack([rows, cols]).astype(dt).reshape(2, rows.size), device=dev)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, layout=None, device=None):
    """Indices (2 x N, row-major) of the lower triangle of a row x col matrix."""
    return _tri_indices(row, col, offset, True, dtype, device)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, layout=None, device=None):
    """Indices (2 x N, row-major) of the upper triangle of a row x col matrix."""
    return _tri_indices(row, col, offset, False, dtype, device)


# ---------------------------------------------------------------- random


def _drawn(draw, shape, dt: np.dtype) -> np.ndarray:
    """`draw(n, real_dtype)` laid out in `shape`. A complex dtype draws its parts interleaved
    (real, imaginary, real...), as PyTorch fills the tensor's real view."""
    n = math.prod(shape)
    if dt.kind != "c":
        return draw(n, dt).reshape(shape)
    part = np.float32 if dt == np.complex64 else np.float64
    return draw(2 * n, part).view(dt).reshape(shape)


def _continuous_dtype_check(dtype, kernel: str, device, meta_refuses: bool,
                            empty: bool = False) -> None:
    """PyTorch's refusal of rand's and randn's integer and bool dtypes: their CPU kernel
    (`kernel`) names the dtype, before anything is drawn or any requires_grad check (randn's
    kernel does not run for an `empty` tensor; rand's bounds check does). On the meta device
    randn refuses them in its own words and rand makes the tensor."""
    if not isinstance(dtype, _dtype.dtype) or dtype.category in (_dtype.FLOAT, _dtype.COMPLEX):
        return
    if (device is not None or _active.default_device) and on_meta(device):
        if meta_refuses:
            raise RuntimeError("expected a floating-point or complex dtype, but got "
                               f"dtype={dtype}")
        return
    if empty:
        return
    raise not_implemented_for(kernel, dtype)


def rand(*sizes, size=None, generator=None, out=None, dtype=None, layout=None, device=None,
         requires_grad=False, pin_memory=False):
    """Uniform random values in [0, 1)."""
    if pin_memory:
        _no_pinned_memory()
    if generator is not None and _random.bad_generator(generator):
        raise _generator_error("rand", sizes, _RANDOM_SIGNATURES, size=size,
                               generator=generator, out=out, dtype=dtype, layout=layout,
                               device=device, pin_memory=pin_memory,
                               requires_grad=requires_grad)
    dev = _check_device(device)
    shape = _size_arg(sizes, size, "rand", _RANDOM_SIGNATURES)
    _continuous_dtype_check(_float_dtype(dtype), "check_uniform_bounds", dev, False)
    return _factory(shape, _float_dtype(dtype), requires_grad,
                    lambda dt: _drawn(lambda n, d: _draws.uniform(generator, n, d), shape, dt),
                    random=True, device=dev)


def randn(*sizes, size=None, generator=None, out=None, dtype=None, layout=None, device=None,
          requires_grad=False, pin_memory=False):
    """Standard normal random values."""
    if pin_memory:
        _no_pinned_memory()
    if generator is not None and _random.bad_generator(generator):
        raise _generator_error("randn", sizes, _RANDOM_SIGNATURES, size=size,
                               generator=generator, out=out, dtype=dtype, layout=layout,
                               device=device, pin_memory=pin_memory,
                               requires_grad=requires_grad)
    dev = _check_device(device)
    shape = _size_arg(sizes, size, "randn", _RANDOM_SIGNATURES)
    return _normal_values(shape, generator, dtype, requires_grad, True, dev)


def _normal_values(shape, generator, dtype, requires_grad, contiguous: bool,
                   device: _device_cls | None = None) -> Tensor:
    """Standard normals drawn for a tensor of `shape`; `contiguous`: the tensor they fill is
    row-major (PyTorch draws in blocks of 16 only then)."""
    _continuous_dtype_check(_float_dtype(dtype), "normal_kernel_cpu", device, True,
                            0 in shape)

    def fill(dt):
        # a complex normal has variance 1 in all, 1/2 per part (std 1 / sqrt(2), as divided)
        std = 1.0 / math.sqrt(2.0) if dt.kind == "c" else 1.0
        return _drawn(lambda n, d: _draws.normal(generator, n, d, 0.0, std, contiguous),
                      shape, dt)

    return _factory(shape, _float_dtype(dtype), requires_grad, fill, random=True,
                    device=device)


def randint(low=None, high=None, size=None, *, generator=None, out=None, dtype=None,
            layout=None, device=None, requires_grad=False, pin_memory=False):
    """Random integers in [low, high): `randint(high, size)` or `randint(low, high, size)`."""
    if pin_memory:
        _no_pinned_memory()
    if generator is not None and _random.bad_generator(generator):
        # (`randint(high, size=...)`: a size without a high was given by keyword)
        args = (low,) if high is None else (low, high) if size is None else (low, high, size)
        raise _generator_error("randint", args, _RANDINT_SIGNATURES,
                               size=size if high is None else None, generator=generator,
                               out=out, dtype=dtype, layout=layout, device=device,
                               requires_grad=requires_grad)
    dev = _check_device(device)
    low, high, shape = _randint_args(low, high, size)
    dt = dtype or _dtype.int64
    if not on_meta(dev):
        _random.check_random_bounds(low, high, dt.np)
    return _factory(shape, dt, requires_grad,
                    lambda nd: _draws.integers(generator, math.prod(shape), low, high)
                    .astype(nd).reshape(shape), random=True, device=dev)


def _randint_args(low, high, size) -> tuple:
    """randint's (low, high, shape), read as PyTorch's parser reads its overloads: `(high,
    size)` (`low` holds the high given by position) or `(low, high, size)`. In the first a
    wrong high or size is named (its position given when it was given by position); in the
    second the call matches no overload."""
    if high is None or size is None or low is None:  # randint(high, size): named singly
        if (high is None or low is None) and size is None:
            given = tuple(v for v in (low, high) if v is not None)
            raise _random.invalid_generator_combination("randint", given, {},
                                                        _RANDINT_SIGNATURES)
        keyword = low is None  # (`randint(high=3, size=(2,))`)
        top, size = (high, size) if keyword else (low, high if size is None else size)
        if not is_int_argument(top):
            where = "" if keyword else " (position 1)"
            raise TypeError(f"randint(): argument 'high'{where} must be int, not "
                            f"{python_type_name(top)}")
        position = 2 if high is not None and not keyword else None
        return 0, _random.int64_argument(top), _sizes((size,), "randint", position)
    if not (is_int_argument(low) and is_int_argument(high) and isinstance(size, (tuple, list))
            and int_list_error(size, "randint", "size", 3) is None):
        raise _random.invalid_generator_combination("randint", (low, high, size), {},
                                                    _RANDINT_SIGNATURES)
    shape = _sizes((size,), "randint", 3)  # PyTorch makes the tensor before drawing
    return _random.int64_argument(low), _random.int64_argument(high), shape


def normal(mean=0.0, std=1.0, size=None, *, generator=None, out=None, dtype=None,
           layout=None, device=None, requires_grad=False):
    """Normal random values with the given mean and std: numbers, or meta tensors (the public
    `normal`, `_distributions.normal`, runs the registry op for tensors with values)."""
    if generator is not None and _random.bad_generator(generator):
        # (a std of 1 without a size counts as not given: `normal(mean_tensor)`)
        args = (mean,) if size is None and not isinstance(std, Tensor) and std == 1.0 \
            else (mean, std) if size is None else (mean, std, size)
        raise _generator_error("normal", args, _NORMAL_SIGNATURES, generator=generator,
                               out=out, dtype=dtype, layout=layout, device=device,
                               requires_grad=requires_grad)
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        # (tensors with data take the registry's `normal.Tensor_*` ops: `_distributions`)
        return _meta_normal(mean, std)
    dev = _check_device(device)
    if size is not None and not (isinstance(size, (tuple, list)) and
                                 int_list_error(size, "normal", "size", 3) is None):
        raise _random.invalid_generator_combination("normal", (mean, std, size), {},
                                                    _NORMAL_SIGNATURES)
    shape = _sizes((size,)) if size is not None else ()  # the tensor is made before std's check
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {float(std):g}")
    # (PyTorch's default device does not reach `normal`: on the CPU unless told otherwise)
    return _factory(shape, _float_dtype(dtype), requires_grad,
                    lambda dt: _drawn(lambda n, d: _draws.normal(generator, n, d, mean, std),
                                      shape, dt), random=True, device=dev or _cpu)


def _meta_normal(mean, std) -> Tensor:
    """`normal` of a meta mean or std: a meta tensor of their broadcast shape (a CPU tensor
    beside it refused as PyTorch refuses it)."""
    tensors = [t for t in (mean, std) if isinstance(t, Tensor)]
    if any(not t.is_meta for t in tensors):
        raise RuntimeError("Tensor on device meta is not on the expected device cpu!")
    shape = np.broadcast_shapes(*(tuple(t.shape) for t in tensors))
    return meta_factory(shape, tensors[0].dtype, False)


def randperm(n: int, *, generator=None, out=None, dtype=None, layout=None, device=None,
             requires_grad=False, pin_memory=False):
    """A random permutation of 0..n-1."""
    if pin_memory:
        _no_pinned_memory()
    if generator is not None and _random.bad_generator(generator):
        raise _generator_error("randperm", (n,), _RANDPERM_SIGNATURES, generator=generator,
                               out=out, dtype=dtype, layout=layout, device=device,
                               requires_grad=requires_grad)
    if n.__class__ is not int and n.__class__ is not SymInt:  # (a traced size stays symbolic)
        if not is_int_argument(n):
            raise TypeError(f"randperm(): argument 'n' (position 1) must be int, not "
                            f"{python_type_name(n)}")
        n = _random.int64_argument(n)
    elif n.__class__ is int:
        _random.int64_argument(n)
    dev = _check_device(device)
    check_sizes((n,))
    dtype = dtype or _dtype.int64
    if not on_meta(dev) and n.__class__ is int:
        _randperm_dtype_check(n, dtype)
    return _factory((n,), dtype, requires_grad,
                    lambda dt: _draws.randperm(generator, n).astype(dt), random=True, device=dev)


# The largest n whose permutation a floating dtype holds exactly (PyTorch's limits).
_RANDPERM_FLOAT_LIMITS = {"float16": (2049, "2049"), "float32": (2 ** 24 + 1, "2^24+1")}


def _randperm_dtype_check(n: int, dtype: _dtype.dtype) -> None:
    """PyTorch's refusals of randperm's dtype: bool and complex ones have no kernel; an
    integer dtype must hold n - 1, a half or float one count exactly up to n."""
    if dtype is _dtype.bool_ or dtype.is_complex:
        raise not_implemented_for("randperm", dtype)
    limit = _RANDPERM_FLOAT_LIMITS.get(dtype.name)
    if limit is not None and n > limit[0]:
        raise RuntimeError(f"n cannot be greater than {limit[1]} for {dtype.legacy} type.")
    if not dtype.is_floating_point and n:
        checked_scalar(n - 1, dtype.np)  # (its error: `value cannot be converted ...`)


# ---------------------------------------------------------------- *_like and new_*


def _like_order(input: Tensor, memory_format) -> tuple | None:
    """The memory order of dims a tensor made like `input` takes (None: row-major):
    `preserve_format` (the default) keeps `input`'s order, as PyTorch's `empty_like` does."""
    if memory_format is None or memory_format.name == "preserve_format":
        if input._data is None:  # a fake tensor (tracing): its strides tell the order
            return strides_order(tuple(input.shape), input.stride())
        return memory_order(input._data)
    if memory_format.name in FORMAT_ORDERS:
        return format_order(memory_format.name, input.ndim)
    return None


def _in_order(fn, shape: tuple, order: tuple | None, *args, **kwargs) -> Tensor:
    """`fn(shape, *args, **kwargs)` (a factory) with its dims in memory in `order`, its values
    written in memory order (as PyTorch fills a new tensor: `rand_like` of a transposed
    tensor holds the transpose of `rand` of the transposed shape)."""
    if order is None:
        return fn(shape, *args, **kwargs)
    out = fn(tuple(shape[d] for d in order), *args, **kwargs)
    if _active.modes or not out._plain:  # a mode's tensor (a tracer's, a fake), a meta one
        inverse = [0] * len(order)
        for i, d in enumerate(order):
            inverse[d] = i
        return out.permute(*inverse)
    out._data = in_memory_order(lambda s: out._data, shape, order)
    if not out._data.size and order in _FORMATS:  # (PyTorch's strides for the format)
        out._data = format_empty(out._data, order)
    return out


_FORMATS = tuple(FORMAT_ORDERS.values())


def _like(fn, name):
    def like(input, *args, dtype=None, layout=None, device=None, requires_grad=False,
             memory_format=None, **kwargs):
        if device is None and (_active.default_device or not input._plain):
            device = input.device  # (by default, the input's device: a meta tensor's too)
        out = _in_order(fn, tuple(input.shape), _like_order(input, memory_format), *args,
                        dtype=dtype or input.dtype, device=device, requires_grad=requires_grad,
                        **kwargs)
        if input._data.__class__ is np.ndarray and not input._data.size and \
                out._data.__class__ is np.ndarray and (
                    memory_format is None or memory_format.name == "preserve_format"):
            # An empty input's strides are kept as they are, as PyTorch's (nothing orders
            # the dims of an empty tensor).
            out._data = strided_empty(out._data, elem_strides(input._data))
        return out

    like.__name__ = name
    like.__doc__ = f"`{fn.__name__}` with the shape (and by default dtype) of `input`."
    return like


zeros_like = _like(zeros, "zeros_like")
ones_like = _like(ones, "ones_like")
empty_like = _like(empty, "empty_like")
_rand_like = _like(rand, "rand_like")


def _check_like_generator(fname: str, args: tuple, signatures: str, generator, dtype, layout,
                          device, requires_grad, memory_format) -> None:
    """PyTorch's error for a random `*_like` factory given a `generator` that is no
    Generator."""
    if generator is not None and _random.bad_generator(generator):
        raise _generator_error(fname, args, signatures, generator=generator,
                               memory_format=memory_format, dtype=dtype, layout=layout,
                               device=device, requires_grad=requires_grad)


def rand_like(input, *, dtype=None, layout=None, device=None, requires_grad=False,
              memory_format=None, generator=None, pin_memory=False):
    """`rand` with the shape (and by default dtype) and memory order of `input`."""
    if pin_memory:
        _no_pinned_memory()
    _check_like_generator("rand_like", (input,), _LIKE_SIGNATURES, generator, dtype, layout,
                          device, requires_grad, memory_format)
    return _rand_like(input, dtype=dtype, layout=layout, device=device,
                      requires_grad=requires_grad, memory_format=memory_format,
                      generator=generator)


def randn_like(input, *, dtype=None, layout=None, device=None, requires_grad=False,
               memory_format=None, generator=None, pin_memory=False):
    """`randn` with the shape (and by default dtype) and memory order of `input`."""
    if pin_memory:
        _no_pinned_memory()
    _check_like_generator("randn_like", (input,), _LIKE_SIGNATURES, generator, dtype, layout,
                          device, requires_grad, memory_format)
    if device is None and (_active.default_device or not input._plain):
        device = input.device
    dev = _check_device(device)
    order = _like_order(input, memory_format)
    return _in_order(lambda shape, **kw: _normal_values(shape, generator, contiguous=order is None,
                                                        device=dev, **kw),
                     tuple(input.shape), order, dtype=dtype or input.dtype,
                     requires_grad=requires_grad)


def full_like(input, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False,
              memory_format=None, pin_memory=False):
    """`full` with the shape (and by default dtype) of `input`."""
    if pin_memory:
        _no_pinned_memory()
    if device is None and (_active.default_device or not input._plain):
        device = input.device  # (by default, the input's device: a meta tensor's too)
    return _in_order(full, tuple(input.shape), _like_order(input, memory_format), fill_value,
                     dtype=dtype or input.dtype, device=device, requires_grad=requires_grad)


def randint_like(input, low=None, high=None, *, dtype=None, layout=None, device=None,
                 requires_grad=False, memory_format=None, generator=None):
    """`randint` with the shape (and by default dtype) of `input`: `randint_like(x, high)`,
    `randint_like(x, low, high)` or `randint_like(x, high=high)` (low 0)."""
    options = dict(memory_format=memory_format, dtype=dtype, layout=layout, device=device,
                   requires_grad=requires_grad)
    if generator is not None:
        options = dict(generator=generator, **options)
    if low is None and (high is None or (generator is not None
                                         and _random.bad_generator(generator))):
        # no overload matches (neither bound, or a `high=` keyword beside a bad generator):
        # PyTorch's list of them, `high` named among the keywords
        named = {} if high is None else {"high": high}
        raise _generator_error("randint_like", (input,), _RANDINT_LIKE_SIGNATURES, **named,
                               **options)
    _check_like_generator("randint_like", (input, low) if high is None else (input, low, high),
                          _RANDINT_LIKE_SIGNATURES, generator, dtype, layout, device,
                          requires_grad, memory_format)
    given = (input, low) if high is None else (input, low, high)
    if low is None:
        low, given = 0, (input,)  # randint_like(x, high=...)
    elif high is None:
        low, high = 0, low
    # ints, or (PyTorch's `Tensor high` overload) a 0-d tensor for a high given alone
    tensor_high = isinstance(high, Tensor) and len(given) < 3
    if not (is_int_argument(low) and (is_int_argument(high) or tensor_high)):
        raise _generator_error("randint_like", given, _RANDINT_LIKE_SIGNATURES,
                               **({"high": high} if len(given) == 1 else {}), **options)
    if tensor_high:
        if high.ndim:
            raise RuntimeError("high must be a scalar tensor and on CPU")
        high = int(high.item())  # (any dtype: its value as an int64)
    low, high = _random.int64_argument(low), _random.int64_argument(high)
    if device is None and (_active.default_device or not input._plain):
        device = input.device
    return _in_order(lambda shape, **kw: randint(low, high, shape, generator=generator, **kw),
                     tuple(input.shape), _like_order(input, memory_format),
                     dtype=dtype or input.dtype,
                     device=device, requires_grad=requires_grad)


def _new(fn):
    name = "new_" + fn.__name__

    def method(self, *sizes, size=None, dtype=None, device=None, requires_grad=False,
               layout=None, pin_memory=False):
        if pin_memory:
            _no_pinned_memory()
        # the shape is read (and its errors named) as `new_zeros`'s, not `zeros`'s: a negative
        # size is PyTorch's "Trying to create tensor with negative dimension" for all three
        if len(sizes) > 1 and not is_int_argument(sizes[0]):  # (no sizes spread out)
            raise TypeError(f"{name}() takes 1 positional argument but {len(sizes)} were "
                            "given")
        shape = _size_arg(sizes, size, name)
        return fn(shape, dtype=_dtype.as_dtype(dtype) or self.dtype, device=device,
                  requires_grad=requires_grad)

    method.__name__ = method.__qualname__ = name  # (named so by Python's errors, too)
    method.__doc__ = f"`{fn.__name__}` with this tensor's dtype by default."
    return method


def _new_full_error(size, fill_value, keywords: tuple) -> None:
    """PyTorch's parser's TypeError for `new_full`'s `size` that is no list of sizes (one int
    included) or `fill_value` that is no number (a tensor of more than one dim, or one that
    requires grad), positions named for arguments not given by keyword."""
    if not isinstance(size, (tuple, list)):
        where = "" if "size" in keywords else " (position 1)"
        raise TypeError(f"new_full(): argument 'size'{where} must be tuple of ints, not "
                        f"{python_type_name(size)}")
    where = "" if "fill_value" in keywords else " (position 2)"
    raise TypeError(f"new_full(): argument 'fill_value'{where} must be Number, not "
                    f"{python_type_name(fill_value)}")


def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False,
             layout=None, pin_memory=False):
    """`full` with this tensor's dtype by default."""
    if pin_memory:
        _no_pinned_memory()
    if not isinstance(size, (tuple, list)) or (isinstance(fill_value, Tensor) and (
            fill_value.ndim or fill_value.requires_grad)):
        _new_full_error(size, fill_value, call_keywords())
    try:
        shape = _sizes((size,), "new_full")
    except TypeError:
        if "size" not in call_keywords():
            raise
        shape = _sizes((size,), "new_full", None)  # (raises, naming no position)
    return full(shape, fill_value, dtype=_dtype.as_dtype(dtype) or self.dtype,
                requires_grad=requires_grad)


def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
    """`tensor` with this tensor's dtype by default."""
    return tensor(data, dtype=_dtype.as_dtype(dtype) or self.dtype, requires_grad=requires_grad)


new_zeros = _new(zeros)
new_ones = _new(ones)
new_empty = _new(empty)


# ---------------------------------------------------------------- factories in traced graphs

def lift_fresh_copy(t: Tensor) -> Tensor:
    """A copy of `t`, made as a literal's tensor is (`aten.lift_fresh_copy`, which a traced
    graph runs on a literal's constant): under a tracer, recorded so again."""
    if not _active.modes or t._data is None:
        return t.clone()
    data = t._data
    return _factory(tuple(t.shape), t.dtype, False, lambda nd: np.array(data, dtype=nd))
