"""Shared pieces of op entries: dtype rules on arrays, kernel makers, meta helpers, samples.

Kernels take NumPy arrays (and Python numbers) and return arrays of PyTorch's result dtype.
Metas take tensors or fakes (anything with `shape`, `dtype`, `stride()`) and return `Spec`s;
they also own the shape error messages: when a kernel fails, dispatch re-runs the meta so the
user sees PyTorch's text.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import _dtype, _tensor
from .._dtype import FLOAT, FROM_NP
from .._recording import saved_shape  # noqa: F401  (the ops' saves read it here)
from .._scalar_conversion import (
    check_python_int,
    checked_scalar,  # noqa: F401  (the kernels' fill values)
    not_implemented_for,  # (the ops' message for a dtype without a kernel)
)
from .._shapes import (  # noqa: F401  (the op entries' helpers, with the shape ones)
    FORMAT_ORDERS,
    broadcast_shapes,
    contiguous_strides,
    dense_order,
    dense_strides,
    elem_strides,
    empty_laid,
    in_memory_order,
    infer_dense_strides,
    is_dense_in,
    is_format_contiguous,
    iterator_layout,
    iterator_strides,
    size_str,
    strides_order,
    suggest_format,
    wrap_dim,
)
from .._thread_state import active as _active
from .._thread_state import local as _local
from .._warn import warn_once_at_caller
from . import _native, _parallel
from .registry import Sample, Spec

_nd = np.ndarray
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
HALF = _dtype.HALF_NP  # float16, and bfloat16 once ml_dtypes is loaded


# ---------------------------------------------------------------- the CPU


_CAPABILITY: list = []


def cpu_capability() -> str:
    """'AVX512', 'AVX2' or 'DEFAULT': the vector instructions PyTorch's CPU kernels use here
    (on x86, from the CPU flags; 'DEFAULT' elsewhere), read once."""
    if not _CAPABILITY:
        flags = set()
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith("flags"):
                        flags = set(line.split(":", 1)[1].split())
                        break
        except OSError:
            pass
        # PyTorch's AVX512 kernels need the foundation, byte/word, dword/qword and
        # vector-length extensions together.
        if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags:
            _CAPABILITY.append("AVX512")
        elif {"avx2", "fma"} <= flags:
            _CAPABILITY.append("AVX2")
        else:
            _CAPABILITY.append("DEFAULT")
    return _CAPABILITY[0]


# ---------------------------------------------------------------- dtype rules on arrays


def result_np(*xs) -> np.dtype:
    """PyTorch's result dtype for arrays and Python numbers, as a NumPy dtype."""
    return _dtype.result_type(*xs).np


def as_dtype(x, dt: np.dtype):
    """`x` (array or Python number) converted to `dt` for computing; numbers stay weak."""
    if x.__class__ is _nd:
        return x if x.dtype is dt else x.astype(dt)
    if dt.kind in "iu" and x.__class__ is int:
        info = np.iinfo(dt)
        if not info.min <= x <= info.max:  # wraps, as PyTorch converts the number
            check_python_int(x)  # (unless beyond what PyTorch takes as a number at all)
            return np.array(x).astype(dt)[()]
    return x


def real_part_for(a: np.ndarray, dt: np.dtype) -> np.ndarray:
    """`a` about to be cast to `dt`: a complex array cast to a number dtype gives its real
    part, with PyTorch's warning (once per process) instead of NumPy's ComplexWarning; to
    bool it stays complex (its test for nonzero)."""
    if a.dtype.kind == "c" and (dt.kind in "fiu" or dt in HALF):
        warn_once_at_caller("Casting complex values to real discards the imaginary part")
        return a.real
    return a


def float_np(dt: np.dtype) -> np.dtype:
    """`dt` if floating or complex, else the default float dtype (what `exp(int tensor)`
    gives)."""
    return dt if dt.kind in "fc" or dt in HALF else _dtype.defaults.float.np


def _in_half_type(x, dt: np.dtype):
    """`x` (array or Python number) rounded to the half type `dt`."""
    if x.__class__ is _nd:
        return x if x.dtype is dt else x.astype(dt)
    return np.asarray(x).astype(dt)


def in_float32(fn, args, dt, scalar_at_full_precision: bool = False):
    """Compute in float32 and round to the half type `dt`, as PyTorch's CPU kernels do: each
    operand is first cast to `dt` (its iterator's common dtype: `x + 1/3` adds the half
    nearest 1/3), except that the kernels that read a scalar second operand at full
    precision (mul, div: `scalar_at_full_precision`) take a Python number or 0-d array there
    as a float32."""
    if scalar_at_full_precision and len(args) == 2:
        a, b = args
        if b.__class__ is not _nd:  # a Python number: NumPy takes it as a float32 here
            return fn(_in_half_type(a, dt).astype(F32), b).astype(dt)
        if b.ndim == 0:
            return fn(_in_half_type(a, dt).astype(F32), b.astype(F32)).astype(dt)
    return fn(*[_in_half_type(a, dt).astype(F32) for a in args]).astype(dt)


def complex_unsupported(kernel_name: str, dt) -> None:
    """PyTorch's NotImplementedError for a kernel without a complex form (`lt` on complex)."""
    if dt.kind == "c" if isinstance(dt, np.dtype) else dt.category == _dtype.COMPLEX:
        raise not_implemented_for(kernel_name, dt)


def binary_kernel(ufunc, *, to_float: bool = False, compare: bool = False,
                  real_only: str | None = None, scalar_at_full_precision: bool = False):
    """A kernel for a broadcasting binary op with PyTorch's promotion; `real_only` names
    the kernel in the error for complex operands; `scalar_at_full_precision`: on half types,
    a scalar second operand is not rounded to the half type first (see `in_float32`)."""

    def kernel(a, b):
        # Fast paths: same float dtype, or a float array with a Python number.
        if a.__class__ is _nd:
            dt = a.dtype
            if dt is F32 or dt is F64:
                cls = b.__class__
                if (cls is _nd and b.dtype is dt) or cls is float or cls is int:
                    out = ufunc(a, b)  # (NumPy's order: see `_iterator_laid`)
                    return out if out.size else empty_laid(out, a, b)
            if b.__class__ is _nd and b.dtype is dt:
                pass
            else:
                dt = result_np(a, b)
        else:
            dt = result_np(a, b)
        if b.__class__ is int or a.__class__ is int:
            check_python_int(b)  # (NumPy would take a huge int as a float or inf)
            check_python_int(a)
        if to_float:
            dt = float_np(dt)
        if real_only is not None:  # complex operands never take the fast paths above
            complex_unsupported(real_only, dt)
        if dt in HALF and not compare:
            return _iterator_laid(in_float32(ufunc, (a, b), dt, scalar_at_full_precision), a, b,
                                  dt)
        try:
            return _iterator_laid(ufunc(as_dtype(a, dt), as_dtype(b, dt)), a, b, dt)
        except OverflowError:  # a Python int that the dtype cannot hold wraps, as in PyTorch
            return ufunc(np.asarray(a).astype(dt), np.asarray(b).astype(dt))

    kernel.ufunc = ufunc  # its fast path, which dispatch's recorders take themselves
    return kernel


def _iterator_laid(out, a, b, dt=None):
    """`out` (`ufunc(a, b)`'s result, computed in dtype `dt`) laid out in TensorIterator's
    order where NumPy's may differ: only when an operand is not row-major. Not on the fast
    paths (one float dtype), whose two flag reads would cost about a tenth of `x + y`: there
    NumPy's order stays (it differs only where the operands' orders conflict, as
    `x.t() + y`)."""
    if (a.__class__ is _nd and not a.flags.c_contiguous) or \
            (b.__class__ is _nd and not b.flags.c_contiguous):
        if out.__class__ is not _nd:
            return out
        if dt is not None and ((a.__class__ is _nd and a.dtype != dt) or
                               (b.__class__ is _nd and b.dtype != dt)):
            return _promoted_layout(out, (a, b), dt)
        return iterator_layout(out, a, b)
    if out.__class__ is _nd and not out.size:
        return empty_laid(out, a, b)
    return out


def laid_if_empty(out, *operands):
    """`out`, an elementwise result over `operands` (arrays, and numbers that take part as
    0-d operands), with the strides PyTorch's iterator gives it when it is empty
    (`_shapes.empty_laid`); any other `out` as it is."""
    if out.__class__ is _nd and not out.size:
        return empty_laid(out, *operands)
    return out


def iterator_ordered(kernel, operands: int = 2):
    """Elementwise `kernel` whose first `operands` arguments are its iterator's operands, with
    its result laid out in PyTorch's iterator's order over them (`iterator_laid`, in their
    common dtype): for kernels that compute through temporaries or `np.where` (remainder,
    heaviside), whose NumPy order differs where the operands' orders conflict."""

    @functools.wraps(kernel)
    def ordered(*args, **kwargs):
        out = kernel(*args, **kwargs)
        given = args[:operands]
        if out.__class__ is _nd and not out.size:  # (a number among them is an operand too)
            return empty_laid(out, *given)
        if out.__class__ is _nd and any(x.__class__ is _nd and not x.flags.c_contiguous
                                        for x in given):
            return iterator_laid(out, *given, dt=result_np(*given))
        return out

    return ordered


def _promoted_layout(out: np.ndarray, operands: tuple, dt: np.dtype,
                     keep: int = -1) -> np.ndarray:
    """`out` laid out as TensorIterator lays out a result over `operands` (arrays, and numbers
    that do not count) of which some are not of the common dtype `dt`: on the CPU the iterator
    first converts those (`to(dt)`, which keeps a dense operand's strides and lays out any
    other densely in its order of dims, as `empty_like`; not the operand at `keep`), and
    orders the dims over the converted ones. A number among `operands` takes part as a 0-d
    operand, None none."""
    shape = out.shape
    if out.ndim < 2 or out.size <= 1:
        return out
    pairs = []
    for i, x in enumerate(operands):
        if x.__class__ is not _nd:
            continue
        strides = elem_strides(x)
        if x.dtype != dt and i != keep and dense_order(x.shape, strides) is None:
            strides = infer_dense_strides(x.shape, strides)  # (`to`'s, as `empty_like`'s)
        pairs.append((x.shape, strides))
    numbers = any(x is not None and x.__class__ is not _nd for x in operands)
    want = iterator_strides(shape, pairs, scalars=numbers)
    have = elem_strides(out)
    if all(n <= 1 or w == h for n, w, h in zip(shape, want, have)):
        return out
    laid = np.ndarray(shape, out.dtype, buffer=np.empty(out.size, out.dtype),
                      strides=tuple(v * out.itemsize for v in want))
    laid[...] = out
    return laid


def iterator_laid(out, *operands, dt: np.dtype | None = None, keep: int = -1):
    """`out`, the result of an elementwise kernel over `operands` (the arrays among them are
    its iterator's operands, in its order) computed through temporaries or in another order
    (lerp's formulas, `where`, clamp's bounds), laid out as TensorIterator lays out PyTorch's:
    asked only when an operand is not row-major (all row-major operands give a row-major
    result in both). `dt`: the dtype the iterator converts operands of another dtype to
    first, except the operand at `keep` (`where`'s condition)."""
    for a in operands:  # (the common case, all row-major, at a flag read per operand)
        if a.__class__ is _nd and not a.flags.c_contiguous:
            break
    else:
        if out.__class__ is _nd and not out.size:  # (numbers are no operands here)
            return empty_laid(out, *[a for a in operands if a.__class__ is _nd])
        return out
    if out.__class__ is not _nd:
        return out
    if dt is not None and any(a.dtype != dt for i, a in enumerate(operands)
                              if a.__class__ is _nd and i != keep):
        return _promoted_layout(out, operands, dt, keep)
    return iterator_layout(out, *[a for a in operands if a.__class__ is _nd])


def refuse_dtypes(op, kernel_name: str, kinds: str, at: tuple = (0,), message=None) -> None:
    """Make registry op `op` (its kernel and its meta) refuse, as PyTorch's kernel does, an
    argument at a position in `at` whose dtype is of a NumPy kind in `kinds` ("b" bool,
    "iu" integers, "c" complex): PyTorch's NotImplementedError ('"<kernel_name>" not
    implemented for 'Long''), or `message(legacy name)`'s RuntimeError. The check runs
    before the kernel's own; the float fast path (`op.ufunc`) never meets these dtypes."""

    def check(args) -> None:
        for i in at:
            dt = getattr(args[i], "dtype", None) if i < len(args) else None
            if dt is None:
                continue
            np_dt = dt if isinstance(dt, np.dtype) else getattr(dt, "np", None)
            if np_dt is not None and np_dt.kind in kinds:
                legacy = (FROM_NP[np_dt] if isinstance(dt, np.dtype) else dt).legacy
                if message is not None:
                    raise RuntimeError(message(legacy))
                raise not_implemented_for(kernel_name, legacy)

    _check_first(op, check)


def _check_first(op, check) -> None:
    """Make registry op `op`'s kernel and meta call `check(args)` before computing."""
    def wrap(fn):
        @functools.wraps(fn)
        def checked(*args, **kwargs):
            check(args)
            return fn(*args, **kwargs)

        return checked

    op.kernel = wrap(op.kernel)
    if op.meta is not None:
        op.meta = wrap(op.meta)


def inplace_result_check(op, result_shape) -> None:
    """Make in-place registry op `op` (its kernel and meta) refuse, before computing, a
    `self` of another shape than the result, with PyTorch's message for its structured
    in-place kernels (`addmm_`): `result_shape(*args)` gives the result's shape, or None
    where the other arguments do not fit (their own errors come from the kernel)."""

    def check(args) -> None:
        shape = result_shape(*args)
        have = tuple(args[0].shape)
        if shape is not None and tuple(shape) != have:
            raise RuntimeError(f"Bad in-place call: input tensor size {size_str(have)} and "
                               f"output tensor size {size_str(tuple(shape))} should match")

    _check_first(op, check)


def c_contiguous(kernel):
    """`kernel` with its array result laid out C-contiguous: for ops whose PyTorch kernel
    allocates a contiguous result where the NumPy one follows its operands' memory order
    (softmax, cumsum, masked_fill of a transposed tensor), so `view` works on it as there."""

    def contiguous_kernel(*args, **kwargs):
        return in_format(kernel(*args, **kwargs), None)  # (row-major size-1 strides too)

    name = getattr(kernel, "__name__", "kernel")  # a partial has none
    contiguous_kernel.__name__ = contiguous_kernel.__qualname__ = name
    return contiguous_kernel


def dense_format(kernel):
    """`kernel` with its array result C-contiguous unless it is laid out channels-last (a 4-D
    or 5-D result with the channels innermost): the two memory formats PyTorch's kernels
    that keep their inputs' format (cat, constant padding) give their results."""

    def format_kernel(*args, **kwargs):
        out = kernel(*args, **kwargs)
        if out.flags.c_contiguous or (out.ndim in (4, 5) and is_format_contiguous(
                out.shape, elem_strides(out), "channels_last" if out.ndim == 4
                else "channels_last_3d")):
            return out
        return np.ascontiguousarray(out)

    name = getattr(kernel, "__name__", "kernel")  # a partial has none
    format_kernel.__name__ = format_kernel.__qualname__ = name
    return format_kernel


# ---------------------------------------------------------------- memory formats of results
#
# PyTorch's layers allocate their results in a memory format read off their inputs, by one
# of two rules, which these helpers give the kernels (arrays) and the metas (fakes) alike:
# - `suggest_format` (PyTorch's `suggest_memory_format`): pooling, upsampling, group norm,
#   the input gradient of batch norm, convolution (of its input or its weight); the result
#   has exactly the format's strides (`in_format`);
# - `kept_format` (an elementwise kernel's, TensorIterator's): batch norm's output; a
#   tensor contiguous in both senses (N, C, 1, 1) stays contiguous.


def array_format(a) -> str | None:
    """`suggest_format` of array `a`: "channels_last", "channels_last_3d" or None. A
    C-contiguous array whose channel stride is neither one element nor zero is never laid
    out like channels-last (its innermost non-trivial dim is a spatial one): the common case
    costs two flag reads."""
    nd = a.ndim
    if nd != 4 and nd != 5:
        return None
    step = a.strides[1]
    if a.flags.c_contiguous and step > a.itemsize and a.size > 1:
        return None
    return suggest_format(a.shape, elem_strides(a))


def format_of(t) -> str | None:
    """`suggest_format` of an array, a tensor or a fake (None for anything else)."""
    if t.__class__ is _nd:
        return array_format(t)
    data = getattr(t, "_data", None)
    if data.__class__ is _nd:
        return array_format(data)
    if t is None or not hasattr(t, "stride"):
        return None
    return suggest_format(tuple(t.shape), tuple(t.stride()))


def kept_format(t) -> str | None:
    """The memory format an elementwise kernel gives its result over `t` (an array, tensor
    or fake), as PyTorch's TensorIterator: None (contiguous) when `t` is contiguous, even
    when it is channels-last too ((N, C, 1, 1)); its channels-last format when it is laid
    out densely in one; else None."""
    data = t if t.__class__ is _nd else getattr(t, "_data", None)
    if data.__class__ is _nd:
        if data.flags.c_contiguous or data.ndim not in (4, 5):
            return None
        shape, strides = data.shape, elem_strides(data)
    else:
        shape, strides = tuple(t.shape), tuple(t.stride())
        if len(shape) not in (4, 5) or is_dense_in(shape, strides, range(len(shape))):
            return None
    name = "channels_last" if len(shape) == 4 else "channels_last_3d"
    return name if is_format_contiguous(shape, strides, name) else None


def format_strides(shape, fmt: str | None) -> tuple | None:
    """The element strides of a new tensor of `shape` in memory format `fmt`, for a meta's
    `Spec` (None, contiguous, for None)."""
    return None if fmt is None else dense_strides(shape, FORMAT_ORDERS[fmt])


def in_format(a: np.ndarray, fmt: str | None) -> np.ndarray:
    """`a`'s values with the strides of a new tensor in memory format `fmt` (row-major for
    None), as PyTorch's kernels allocate their results: `a` itself when it has them (a
    C-contiguous array for None), else one copy (shared between threads) into an array that
    owns its memory (so autograd may take it as a leaf's `.grad` without another)."""
    if fmt is None:
        # (C-contiguous by NumPy's flag allows any strides on size-1 dims; PyTorch's new
        # tensors have row-major ones there too)
        if a.flags.c_contiguous and (1 not in a.shape or a.strides == tuple(
                v * a.itemsize for v in contiguous_strides(a.shape))):
            return a
        return _parallel.copy(a)
    order = FORMAT_ORDERS[fmt]
    item = a.itemsize
    if a.strides == tuple(s * item for s in dense_strides(a.shape, order)):
        return a
    out = in_memory_order(lambda s: np.empty(s, a.dtype), a.shape, order)
    _parallel.copyto(out, a)
    return out


def strided_copy(a: np.ndarray, strides: tuple) -> np.ndarray:
    """A copy of `a` with these element strides (a dense layout of its shape), in memory of
    its own."""
    out = np.ndarray(a.shape, a.dtype, buffer=np.empty(a.size, a.dtype),
                     strides=tuple(v * a.itemsize for v in strides))
    _parallel.copyto(out, a)
    return out


def input_format(kernel):
    """`kernel` with its array result (or each of a tuple's) laid out in the memory format
    its first argument suggests (`array_format`), C-contiguous otherwise: PyTorch's pooling
    and upsampling kernels allocate their results so. A contiguous input costs two flag
    reads and a flag test per result."""

    def format_kernel(*args, **kwargs):
        out = kernel(*args, **kwargs)
        fmt = array_format(args[0])
        if out.__class__ is tuple:
            if fmt is None:
                return tuple(o if o.flags.c_contiguous and 1 not in o.shape else
                             in_format(o, None) for o in out)
            return tuple(in_format(o, fmt) for o in out)
        if fmt is None and out.flags.c_contiguous and 1 not in out.shape:
            return out
        return in_format(out, fmt)

    name = getattr(kernel, "__name__", "kernel")  # a partial has none
    format_kernel.__name__ = format_kernel.__qualname__ = name
    return format_kernel


def operand_order(fn):
    """Unary array function `fn` with its result laid out in its operand's memory order
    (NumPy's order "K"), as PyTorch's elementwise kernels lay theirs: for functions that
    allocate a contiguous result whatever their operand's layout (series evaluations)."""

    def in_operand_order(a):
        out = fn(a)
        if a.flags.c_contiguous or out.shape != a.shape:
            return out
        laid = np.empty_like(a, dtype=out.dtype)  # order "K"
        np.copyto(laid, out)
        return laid

    in_operand_order.__name__ = in_operand_order.__qualname__ = fn.__name__
    return in_operand_order


def unary_kernel(ufunc, *, to_float: bool = True):
    """A kernel for a pointwise unary op; integer inputs give the default float dtype."""

    def kernel(a):
        dt = a.dtype
        if dt is F32 or dt is F64:
            return ufunc(a)
        if to_float:
            dt = float_np(dt)
        if dt in HALF:
            out = in_float32(ufunc, (a,), dt)
        else:
            out = ufunc(a if a.dtype is dt else a.astype(dt))
        # (TensorIterator's layout off the fast path, as `_iterator_laid` for binary ops)
        if a.__class__ is _nd and out.__class__ is _nd and not a.flags.c_contiguous:
            return iterator_layout(out, a)
        return out

    kernel.ufunc = ufunc  # its fast path, which dispatch's recorders take themselves
    return kernel


def cj(x):
    """`x` conjugated when it is complex, else `x` itself: derivatives multiply the incoming
    gradient by the conjugate of a partner (the conjugate Wirtinger rule of PyTorch's complex
    autograd), which for real values is the value."""
    if x.__class__ is complex:
        return x.conjugate()
    dt = getattr(x, "_dtype", None)
    if dt is not None and dt.category == _dtype.COMPLEX:
        return x.conj()
    return x


# ---------------------------------------------------------------- NumPy backward fast paths


def numpy_backward(*ts, halves: bool = False) -> bool:
    """Whether a derivative may compute its gradients with NumPy kernels: no graph is being
    recorded (backward without create_graph runs with grad mode off), no dispatch mode is
    active, and every tensor is a plain float32/float64 one (or a half type, with
    `halves`). Otherwise derivatives use the fusegrad ops that double backward and modes
    need."""
    if not _active.grad_off or _local.grad_enabled:
        return False
    if _active.modes and _local.modes and _computing_mode_besides_autocast():
        return False
    for t in ts:
        if t is not None and (not t._plain or t._data is None or (
                t._data.dtype not in _FLOATS and not (halves and t._data.dtype in HALF))):
            return False
    return True


_FLOATS = (F32, F64)


def _computing_mode_besides_autocast() -> bool:
    """Whether a mode that computes ops itself is on (a profiler, which only watches, is
    not). CPU autocast's marker is not counted: these paths stand for PyTorch's backward
    kernels (`native_layer_norm_backward`, `gelu_backward` ...), which are not on its
    autocast lists, so a backward run inside an autocast region computes as outside it.
    (Derivatives that call autocast's ops, mm's, call them through dispatch, cast as in
    PyTorch.)"""
    from .._autocast import MARKER
    from .._dispatch import computing_mode

    return computing_mode(besides=MARKER)


def c_gradient(name: str, g, saved, *scalars, row: int = 0):
    """The gradient by C kernel `name` of `native/math.c` from the incoming gradient and one
    saved tensor (`row`: a kernel over rows of that many values, `_native.elementwise`),
    where NumPy gradients are taken (`numpy_backward`); None elsewhere (and without C
    kernels), where the derivative records its formula."""
    if not numpy_backward(g, saved, halves=True):
        return None
    gd, sd = g._data, saved._data
    dt = sd.dtype
    if dt in HALF and gd.dtype is dt:
        # Half types in float32, rounded once, as PyTorch's kernels compute their gradients
        # (a chain of half-precision ops left a third of the elements an ulp off).
        out = _native.elementwise("math", name, (gd.astype(F32), sd.astype(F32)), scalars,
                                  row=row)
        return None if out is None else wrap_grad(out.astype(dt))
    return wrap_grad(_native.elementwise("math", name, (gd, sd), scalars, row=row))


def half_formula(formula, g, *saved):
    """`formula(g, *saved)`, written as tensor ops, computed in float32 when `g` has a half
    type (so have the other tensors of that type) and its result rounded to it once, as
    PyTorch's kernels compute half types (a chain of half-type ops rounds at every step: a
    decomposed gelu underflowed to 0 below -4, recorded gradients were ulps off)."""
    dt = g.dtype
    if dt is not _dtype.float16 and dt is not _dtype.bfloat16:
        return formula(g, *saved)
    up = [t.float() if getattr(t, "dtype", None) is dt else t for t in (g, *saved)]
    return formula(*up).to(dt)


def half_in_float32(fn):
    """`fn` (tensor ops: a decomposition) computed as `half_formula` computes, its first
    argument deciding."""

    def in_float32(x, *rest):
        return half_formula(fn, x, *rest)

    in_float32.__name__ = in_float32.__qualname__ = getattr(fn, "__name__", "decomposition")
    return in_float32


def strided_view(a: np.ndarray, shape: tuple, strides: tuple) -> np.ndarray:
    """A read-only view of `a`'s memory with `shape` and byte `strides` (from its first
    element). Made over the array's buffer where it allows (a C-contiguous array: 0.3 us);
    NumPy's `as_strided` builds a helper object first (4 us), and serves dtypes that export
    no buffer (ml_dtypes') and other layouts."""
    if a.flags.c_contiguous and a.size:
        try:
            out = np.ndarray(shape, a.dtype, a, 0, strides)
        except (TypeError, ValueError, BufferError):
            pass
        else:
            out.flags.writeable = False
            return out
    return np.lib.stride_tricks.as_strided(a, shape, strides, writeable=False)


def saved_array(t, dt: np.dtype | None = None) -> np.ndarray | None:
    """The array of saved tensor `t` where a derivative on arrays (`OpDef.on_arrays`) may
    read it: a plain tensor holding a float32/float64 NumPy array (of dtype `dt`, if given),
    or such an array itself (a saved output, which the engine unpacks as its array); None
    for anything else (a subclass, a fake, another dtype), whose gradient the recorded
    derivative computes."""
    cls = t.__class__
    if cls is _Tensor or (cls is not np.ndarray and isinstance(t, _Tensor) and t._plain):
        t = t._data
    if t.__class__ is np.ndarray and t.dtype in _FLOATS and (dt is None or t.dtype is dt):
        return t
    return None


_Tensor = _tensor.Tensor


def wrap_grad(a):
    """A gradient array as a tensor (None stays None)."""
    if a is None:
        return None
    return _tensor.Tensor._make(a)


# ---------------------------------------------------------------- meta helpers






def shape_of(x) -> tuple:
    """Shape of a tensor, fake or array; () for Python numbers."""
    return tuple(x.shape) if hasattr(x, "shape") else ()


def dtype_of(x) -> _dtype.dtype:
    """fusegrad dtype of a tensor, fake or array."""
    if x.__class__ is _nd:
        return FROM_NP[x.dtype]
    return x.dtype


def binary_meta(to_float: bool = False, out_bool: bool = False, real_only: str | None = None):
    """Meta of a broadcasting binary op."""

    def meta(a, b):
        shape = broadcast_shapes(shape_of(a), shape_of(b))
        dt = _dtype.result_type(a, b)
        if real_only is not None:
            complex_unsupported(real_only, dt)
        if to_float and dt.category < FLOAT:
            dt = _dtype.defaults.float
        return Spec(shape, _dtype.bool_ if out_bool else dt)

    return meta


def unary_meta(to_float: bool = True):
    """Meta of a pointwise unary op."""

    def meta(a):
        dt = a.dtype
        if to_float and dt.category < FLOAT:
            dt = _dtype.defaults.float
        return Spec(tuple(a.shape), dt)

    return meta




def wrap_dims(dims, ndim: int) -> tuple:
    """A dim or list of dims, each wrapped; None means all dims."""
    if dims is None:
        return tuple(range(ndim))
    if isinstance(dims, int):
        dims = (dims,)
    out = tuple(wrap_dim(d, ndim) for d in dims)
    if len(set(out)) != len(out):
        dup = next(d for d in out if out.count(d) > 1)
        raise RuntimeError(f"dim {dup} appears multiple times in the list of dims")
    return out


_UNSIGNED = {np.dtype(f"i{n}"): np.dtype(f"u{n}") for n in (1, 2, 4, 8)}


def add_rows(out: np.ndarray, index: np.ndarray, rows: np.ndarray,
             scale: np.ndarray | None = None) -> None:
    """`np.add.at(out, index, rows)` for a 1-d integer `index` into `out`'s first dim: row
    `i` of `rows` added into row `index[i]` of `out`, in index order (PyTorch's order, and
    `np.add.at`'s); with `scale` (one value per row, `out`'s dtype), row `i` times
    `scale[i]`, each element one fused multiply-add as PyTorch's kernels compute it. In C
    where it can run there (`out` and `rows` contiguous float32/float64 of one dtype, `rows`
    of shape (len(index), *out.shape[1:]), every index in range): `np.add.at` makes one call
    per element, 3-5x the time on an embedding's gradient. NumPy's path rounds a scaled
    row's product and sum apart (an ulp from PyTorch's at times)."""
    cols = out.size // out.shape[0] if out.shape[0] else 0
    fn = None
    if cols and index.size and out.dtype == rows.dtype and out.flags.c_contiguous and \
            rows.flags.c_contiguous and rows.size == index.size * cols and index.ndim == 1:
        fn = _native.typed("pointwise", "add_rows" if scale is None else "add_rows_scaled",
                           out.dtype, "pppiiii" if scale is None else "ppppiiii")
        if fn is not None:
            index = np.ascontiguousarray(index, dtype=np.int64)
            if index.min() < 0 or index.max() >= out.shape[0]:  # np.add.at's wrap or error
                fn = None
    if fn is None:
        if scale is not None:
            rows = rows * scale.reshape((-1,) + (1,) * (rows.ndim - 1))
        np.add.at(out, index, rows)
        return
    arrays = (out, index, rows) if scale is None else \
        (out, index, rows, np.ascontiguousarray(scale, dtype=out.dtype))
    _native.run_pieces(fn, tuple(_native.address(a) for a in arrays), (index.size, cols), cols,
                       rows.size)


def index_out_of_range(index: np.ndarray, size: int, negative: bool = False) -> int | None:
    """The first element of the integer array `index` outside `[0, size)` (or
    `[-size, size)` when `negative` indices count from the end), or None when all are valid.

    Index ops (index_select, gather, scatter, index_add/copy/fill, embedding) share it, and
    each words its own error. The valid case costs one max over the array (viewed unsigned,
    a negative index is larger than any size), or a min and a max with `negative`.
    """
    if not index.size:
        return None
    lo = -size if negative else 0
    if negative:
        if index.min() >= lo and index.max() < size:
            return None
    elif index.view(_UNSIGNED.get(index.dtype, index.dtype)).max() < size:
        return None
    flat = index.reshape(-1)
    return int(flat[(flat < lo) | (flat >= size)][0])


def mismatched_source(a, source) -> tuple[str, str] | None:
    """(`a`'s, `source`'s) legacy dtype names (`Float`, `Long`) when `source`, a tensor
    (array or fake) to be written into `a`, has another dtype: PyTorch's scatter-like ops
    refuse to convert it. None when they agree or `source` is a number."""
    if isinstance(source, (int, float, complex, bool, np.generic)):
        return None
    mine, theirs = dtype_of(a), dtype_of(source)
    return None if mine is theirs else (mine.legacy, theirs.legacy)


def bad_index_dtype(index, long_only: bool = False) -> str | None:
    """None when `index` (array or fake tensor) has an index dtype (int64, or int32 unless
    `long_only`); else its dtype's legacy name (`Float`), which the ops' errors quote."""
    name = dtype_of(index).legacy
    if name == "Long" or (name == "Int" and not long_only):
        return None
    return name




def numel(shape) -> int:
    """Number of elements of `shape`."""
    return math.prod(shape)


# ---------------------------------------------------------------- samples


def rand_array(rng, shape, dtype, domain=None):
    """Random test data of `shape` for a NumPy `dtype`, inside `domain` when given."""
    lo, hi = domain if domain else (-2.0, 2.0)
    if np.dtype(dtype).kind == "b":
        return rng.random(shape) > 0.5
    if np.dtype(dtype).kind in "iu":
        return rng.integers(max(lo, -5), min(hi, 6) + 1, size=shape).astype(dtype)
    if np.dtype(dtype).kind == "c":
        parts = rng.uniform(lo, hi, size=(2,) + tuple(shape))
        return np.asarray(parts[0] + 1j * parts[1]).astype(dtype)  # 0-d stays an array
    return rng.uniform(lo, hi, size=shape).astype(dtype)


BINARY_SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 3), (4, 1)), ((), ()),
                 ((5,), ()), ((), (2, 3)), ((0, 3), (3,)), ((1,), (2, 2))]
UNARY_SHAPES = [(3, 4), (), (5,), (2, 0, 3), (2, 3, 4)]


def unary_samples(domain=None):
    """Samples for pointwise unary ops: several shapes incl. 0-d and empty."""

    def samples(rng, dtype):
        return [Sample((rand_array(rng, s, dtype, domain),), name=str(s)) for s in UNARY_SHAPES]

    return samples


def binary_samples(domain=None, scalars=(2.5,)):
    """Samples for broadcasting binary ops, plus tensor-with-number forms."""

    def samples(rng, dtype):
        out = [Sample((rand_array(rng, a, dtype, domain), rand_array(rng, b, dtype, domain)),
                      name=f"{a}x{b}") for a, b in BINARY_SHAPES]
        for c in scalars:
            out.append(Sample((rand_array(rng, (3, 4), dtype, domain), c), name=f"scalar {c}"))
        return out

    return samples
