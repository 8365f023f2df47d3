"""Eager kernels written in C, for loops that NumPy runs as many passes or many small calls.

A kernel family is one C file in `ops/native/` (`conv.c`, ...), compiled by the system C
compiler on first use, kept in the build cache (`fusegrad._cbuild`: once per machine, source
and CPU) and loaded with ctypes. Two reasons to write a loop in C rather than NumPy:

- one pass instead of several: NumPy builds a batch norm, an im2col or a momentum update out
  of whole-array passes and temporaries; a C loop reads each input once;
- both cores: ctypes releases the GIL for the whole call, so the pieces of one kernel handed
  to the intra-op pool (`_parallel.share_by_cost`, each piece a call over a range of rows or
  channels) run at once, where NumPy pieces made of many small calls take turns on the GIL.

Every function takes its arrays as addresses and its sizes as 64-bit integers, and computes
each output element in an order that does not depend on the range it is given, so results
are the same at every thread count. Floating-point contraction is off, as in generated code
(the direct convolutions turn it on for themselves: their sums follow no NumPy order).

`run_pieces` runs such a function's range on the C workers (`native/workers.c`): threads
that start a piece within microseconds of the call, where the intra-op pool's Python
threads take tens (see docs/architecture.md).

Without a C compiler, when a build fails, or with `FUSEGRAD_NATIVE=0` in the environment,
`function` returns None and callers keep their NumPy path; the tests run both
(`native_kernels(False)`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct
import warnings
from _thread import allocate_lock
from collections.abc import Iterator

import numpy as np

from .. import _shapes
from . import _parallel

FLAGS = ("-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-fwrapv",
         "-ffp-contract=off", "-fPIC", "-shared")
HERE = os.path.join(os.path.dirname(__file__), "native")
# Flags some families add: the C workers' threads (`workers.c`).
EXTRA_FLAGS = {"workers": ("-pthread",)}
# Families whose file is compiled after the float32 math functions the code generator uses
# (`_mathlib.source()`), so that eager and generated kernels compute them alike.
WITH_MATHLIB = frozenset({"math"})
# The dtypes the kernels are written for, and the suffix of each one's C function.
SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
# Argument codes of `function`: an array's address, a 64-bit integer, a double, a float.
_TYPES = {"p": ctypes.c_void_p, "i": ctypes.c_int64, "d": ctypes.c_double,
          "f": ctypes.c_float}


class _State:
    on = os.environ.get("FUSEGRAD_NATIVE", "1") != "0"
    # Whether the C workers have been told their CPUs (`_parallel.helper_cpus`).
    placed = False


_state = _State()
_libraries: dict[str, ctypes.CDLL | None] = {}
_functions: dict[tuple, object] = {}
_lock = allocate_lock()


def library(family: str) -> ctypes.CDLL | None:
    """Kernel family `family` (`ops/native/<family>.c`) built and loaded, or None when
    native kernels are off or cannot be built (a warning says why, once per family)."""
    if family in _libraries:
        return _libraries[family]
    with _lock:
        if family not in _libraries:
            _libraries[family] = _build(family)
    return _libraries[family]


def _build(family: str) -> ctypes.CDLL | None:
    from .. import _cbuild

    cc = _cbuild.compiler()
    if cc is None:
        return None  # no compiler: the NumPy kernels serve, as they did before
    with open(os.path.join(HERE, f"{family}.c")) as f:
        source = f.read()
    if family in WITH_MATHLIB:
        from . import _mathlib

        source = _mathlib.source() + "\n" + source
    flags = FLAGS + EXTRA_FLAGS.get(family, ())
    try:
        path = _cbuild.shared_object(cc, [source], flags, _cbuild.source_key(source, cc, flags))
        return ctypes.CDLL(path)
    except (OSError, _cbuild.CompileError) as e:
        warnings.warn(f"fusegrad: the C kernels '{family}' could not be built, NumPy runs "
                      f"them instead: {e}", RuntimeWarning, stacklevel=3)
        return None


def function(family: str, name: str, args: str, result: str | None = None):
    """C function `name` of kernel family `family`, its arguments typed by the codes in
    `args` ("p" address, "i" int64, "d" double, "f" float), returning nothing or a value of
    type code `result`; None when native kernels are off or the family could not be
    built."""
    if not _state.on:
        return None
    key = (family, name)
    fn = _functions.get(key)
    if fn is None:
        lib = library(family)
        if lib is None:
            return None
        fn = getattr(lib, name)
        fn.argtypes = [_TYPES[c] for c in args]
        fn.restype = None if result is None else _TYPES[result]
        _functions[key] = fn
    return fn


# (family, name, dtype, args, result) -> `typed`'s answer, found once: formatting the
# function's name on every call cost as much as a small kernel's call.
_typed_functions: dict = {}


def typed(family: str, name: str, dtype, args: str, result: str | None = None):
    """`function(family, name + "_" + suffix, args, result)` for `dtype`'s C function
    (`SUFFIX`); None for another dtype, or as `function` gives (while kernels are off,
    without keeping that answer)."""
    if not _state.on:
        return None
    key = (family, name, dtype, args, result)
    fn = _typed_functions.get(key, _typed_functions)  # (the dict itself: not looked up yet)
    if fn is _typed_functions:
        suffix = SUFFIX.get(dtype)
        fn = _typed_functions[key] = None if suffix is None else \
            function(family, f"{name}_{suffix}", args, result)
    return fn


def enabled() -> bool:
    """Whether kernels may run in C (see `native_kernels`)."""
    return _state.on


@contextlib.contextmanager
def native_kernels(on: bool) -> Iterator[None]:
    """Run the block with the C kernels on or off (off: every caller's NumPy path), for
    tests that compare the two and for timing them."""
    before = _state.on
    _state.on = on
    try:
        yield
    finally:
        _state.on = before


_char = ctypes.c_char
_addressof = ctypes.addressof
_ndarray = np.ndarray


def _data_field_offset() -> int | None:
    """Where an ndarray object keeps the address of its first element: NumPy's `data`
    field comes right after CPython's object header. Checked here on arrays with and without
    an offset into their memory; None where that does not hold (another interpreter's
    header), and `address` then asks each array."""
    offset = object.__basicsize__
    read = ctypes.c_void_p.from_address
    probes = (np.zeros(3), np.zeros((4, 5), np.float32)[1:, 2:], np.zeros(0), np.arange(6)[::-2])
    try:
        if all(read(id(p) + offset).value == p.ctypes.data for p in probes):
            return offset
    except (OSError, ValueError):  # (a read the platform refuses)
        pass
    return None


_DATA_FIELD = _data_field_offset()
_read_pointer = ctypes.c_void_p.from_address


def address(a) -> int:
    """The address of NumPy array `a`'s first element: read from the array object's data
    field where `a` is a plain ndarray (0.3 us: a kernel call takes several), else through
    the buffer protocol (a ctypes char over the array's memory: 0.5 us) where the array
    allows it (writable, contiguous, not empty), else through `a.ctypes` (1 us)."""
    if a.__class__ is _ndarray and _DATA_FIELD is not None:
        return _read_pointer(id(a) + _DATA_FIELD).value or 0
    try:
        return _addressof(_char.from_buffer(a))
    except (TypeError, ValueError, BufferError):
        return a.ctypes.data


_addresses: dict[int, int] = {}
_elementwise_functions: dict[tuple, object] = {}  # see `elementwise`
_UNKNOWN = object()
_pack_double = struct.Struct("<d").pack
_unpack_int = struct.Struct("<q").unpack


def double_bits(x: float) -> int:
    """The bits of `x` as a double, read as a 64-bit integer: how a kernel run by the C
    workers (which pass integers only) takes a floating-point scalar."""
    return _unpack_int(_pack_double(float(x)))[0]


def elementwise(family: str, name: str, arrays: tuple, scalars: tuple = (),
                cost: int = 4, row: int = 0) -> np.ndarray | None:
    """Elementwise C kernel `name` of `family` (its `_f32`/`_f64` function, called as
    `fn(*arrays, out, start, stop, *scalars)` over flat ranges, scalars passed as the bits of
    doubles) over same-shaped arrays of one float dtype, into a new array of that shape,
    element ranges shared by the C workers (`cost` units of work per value); None where it
    does not apply (another dtype, shapes that differ, no C kernels). With `row`, a kernel
    over rows of that many values, C-contiguous: `fn(*arrays, out, first, last, row,
    *scalars)` over row ranges."""
    a = arrays[-1]
    for other in arrays[:-1]:
        if other.dtype != a.dtype or other.shape != a.shape:
            return None
    if row and not a.flags.c_contiguous:  # rows are the last dimension's runs
        return None
    if not _state.on:
        return None
    # The function looked up once per signature: on a tensor of a few values the lookup
    # (its name and argument codes formatted) cost as much as the kernel's call.
    key = (family, name, a.dtype, len(arrays), len(scalars), row > 0)
    fn = _elementwise_functions.get(key, _UNKNOWN)
    if fn is _UNKNOWN:
        fn = _elementwise_functions[key] = typed(
            family, name, a.dtype,
            "p" * (len(arrays) + 1) + "ii" + "i" * (len(scalars) + (row > 0)))
    if fn is None:
        return None
    # The result is laid out as PyTorch's TensorIterator lays out an elementwise op's: dense,
    # its dims ordered by the arrays' strides, the first array with an opinion deciding and
    # broadcast (zero-stride) dims keeping their row-major places, where NumPy's `empty_like`
    # follows the last array alone and scatters broadcast dims. The kernel runs over that
    # order.
    n = a.size
    after = tuple(map(double_bits, scalars)) if scalars else ()
    if row:
        # A row is a run of the last dimension in every array and in the result: all
        # C-contiguous (a transposed gradient laid the rows along another dimension, and
        # the kernel then summed the wrong values).
        out = np.empty(a.shape, a.dtype)
        if n:
            sources = [x if x.flags.c_contiguous else np.ascontiguousarray(x) for x in arrays]
            run_pieces(fn, (*map(address, sources), address(out)), (row, *after), n // row,
                       n * cost)
        return out
    out = np.empty_like(a)
    if not out.flags.c_contiguous or any(not x.flags.c_contiguous for x in arrays[:-1]):
        out = _iterator_empty(arrays)
    if n:
        dense = out.flags.c_contiguous
        if dense:
            for x in arrays:
                if not x.flags.c_contiguous:
                    dense = False
                    break
        if dense:
            sources = arrays  # (the common case: a small kernel's call costs what this does)
        else:
            order = None
            if not out.flags.c_contiguous:
                order = sorted(range(out.ndim), key=lambda d: -out.strides[d])
            # (The contiguous copies are held here until the kernel has run.)
            sources = [x if order is None and x.flags.c_contiguous else
                       np.ascontiguousarray(x if order is None else x.transpose(order))
                       for x in arrays]
        run_pieces(fn, (*map(address, sources), address(out)), after, n, n * cost)
    return out


def run_elementwise(fn, arrays: tuple, scalars: tuple = (), minimum: int = 0) -> bool:
    """Flat elementwise C function `fn` (from `function` or `typed`; None while kernels are
    off) run as `fn(*addresses of arrays, start, stop, *scalars)` over the values of
    `arrays[0]`, the ranges shared by the C workers: `arrays` are its operands and result
    (the result may be an operand: in place), all of `arrays[0]`'s shape, then any arrays of
    parameters (a scale, bounds). False, having run nothing, where `fn` is None, where
    `arrays[0]` holds fewer than `minimum` values (below it NumPy's call costs less than
    ctypes') or an array is not C-contiguous."""
    n = arrays[0].size
    if fn is None or n < minimum:
        return False
    for x in arrays:
        if not x.flags.c_contiguous:
            return False
    run_pieces(fn, tuple(map(address, arrays)), scalars, n, n)
    return True


def _iterator_empty(arrays: tuple) -> np.ndarray:
    """A new array of the same-shaped `arrays`' shape and dtype, laid out as TensorIterator
    lays out an elementwise result over them (`_shapes.iterator_strides`)."""
    a = arrays[-1]
    want = _shapes.iterator_strides(a.shape, [(x.shape, _shapes.elem_strides(x))
                                              for x in arrays])
    return np.ndarray(a.shape, a.dtype, buffer=np.empty(a.size, a.dtype),
                      strides=tuple(v * a.itemsize for v in want))


# The most arguments a kernel run by the C workers takes (`MAX_ARGS` in native/workers.c,
# which `fg_workers_max_args` reports: a test compares them).
MAX_WORKER_ARGS = 32


_int64_array = None  # `array.array`, imported by the first call sharing work


def run_pieces(fn, before: tuple, after: tuple, units: int, work: int) -> None:
    """C function `fn` (from `function`; its arguments all addresses and 64-bit integers,
    None for a null pointer) called as `fn(*before, start, stop, *after)` over units
    [0, units) (`work` units of work in all): one piece per intra-op thread on the C
    workers; run whole here at one thread, inside a side-by-side task
    (`_parallel.concurrently`) or when the work is small; without the workers, shared on the
    intra-op pool by measured cost."""
    # (Work too small to share is told first, without asking for the thread count.)
    threads = 1 if work < _parallel.MIN_CHUNK else _parallel.sharing_threads(work)
    if threads <= 1:
        fn(*before, 0, units, *after)
        return
    call = function("workers", "fg_workers_call", "ppiiii")
    if call is None:
        def piece(start: int, stop: int) -> None:
            fn(*before, start, stop, *after)

        _parallel.share_by_cost(piece, units, work, (id(fn), *after, units))
        return
    if not _state.placed:
        _place_workers(_parallel.helper_cpus())
    address = _addresses.get(id(fn))
    if address is None:
        address = _addresses[id(fn)] = ctypes.cast(fn, ctypes.c_void_p).value
    # The arguments as 64-bit integers in a block the workers read (an `array` is made in
    # half the time of a ctypes array); it lives until the call returns.
    global _int64_array
    if _int64_array is None:  # (the module loads with the first shared call, not at import)
        from array import array as _int64_array
    block = _int64_array("q", [0 if v is None else v for v in (*before, 0, 0, *after)])
    if len(block) > MAX_WORKER_ARGS:  # (the workers' prototype would drop the rest)
        raise ValueError(f"a kernel run by the C workers takes at most {MAX_WORKER_ARGS} "
                         f"arguments, not {len(block)}")
    call(address, block.buffer_info()[0], len(block), len(before), units, threads)


def workers_call_address() -> int:
    """The address of the C workers' `fg_workers_call` (generated kernels call it to share
    their pieces), the workers told their CPUs first as for the eager kernels; 0 without
    them (C kernels off or not built)."""
    fn = function("workers", "fg_workers_call", "ppiiii")
    if fn is None:
        return 0
    if not _state.placed:
        _place_workers(_parallel.helper_cpus())
    return ctypes.cast(fn, ctypes.c_void_p).value or 0


def _place_workers(cpus: list[int]) -> None:
    """Tell the C workers, before the first starts, the CPU each keeps to (by index) and
    the CPUs this process may use (a worker leaves the caller's CPU for another of them)."""
    _state.placed = True
    allowed = sorted(os.sched_getaffinity(0)) if cpus else []
    block = (ctypes.c_int64 * max(len(cpus), 1))(*cpus)
    spare = (ctypes.c_int64 * max(len(allowed), 1))(*allowed)
    function("workers", "fg_workers_cpus", "pipi")(ctypes.addressof(block), len(cpus),
                                                   ctypes.addressof(spare), len(allowed))


def workers_started() -> int:
    """How many C workers this process has started (0 without them)."""
    lib = library("workers")
    if lib is None:
        return 0
    fn = lib.fg_workers_started
    fn.restype, fn.argtypes = ctypes.c_int64, []
    return fn()
