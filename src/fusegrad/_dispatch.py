"""Dispatch: run a registry op on its arguments and record it for autograd.

Fast path: no mode is active and every tensor argument is a plain Tensor (or Parameter):
unwrap the NumPy arrays, run the kernel, wrap the result, and make a Node only when grad mode
is on and an input requires grad. The commonest call shapes (one tensor; two tensors; a
tensor and a number or shape; a tensor and two ints) have their own recorders, with the
Node's edges and input shapes written directly, since every eager op pays for it; all the
recorders are generated from one template (`_recorders`), so the recording path is written
once.

Slow path: a mode is active (fake, tracing, profiling: a stack, innermost last), or an
argument is a tensor subclass with its own compute (FakeTensor), or an argument is a foreign
type that declares `__fusegrad_function__` (FX's Proxy). Modes and fake tensors replace only
the computation; autograd recording is the same code for every path, so graphs recorded on
fake tensors look exactly like eager ones.

Grad mode and the mode stack are the calling thread's (`_thread_state`); both are tested
through its process-wide counts first (`not _active.grad_off or _local.grad_enabled`), so
while no thread has grad off or a mode, no op pays a thread-local lookup.
"""

from __future__ import annotations

import sys

import numpy as np

from . import _dtype, _thread_state
from ._autocast import dispatch as _autocast_dispatch

# The recorders `call` picks by call shape, generated from one template (`_recorders`).
from ._recorded_calls import (
    _call_binary,
    _call_ints,
    _call_list,
    _call_tensors,
    _call_three,
    _call_unary,
    make_calls,
)
from ._recording import (  # noqa: F401 - `_edge`, `_wrap`, `save_partners`...: read by others
    _SIMPLE,
    _edge,
    _geometry,
    _make,
    _mark_view,
    _ndarray,
    _new_node,
    _node_label,
    _record,
    _shape,
    _wrap,
    no_grad_view_error,
    save_partners,
    save_result,
    save_shape,
    sync_view,
    view_requires_grad,
)
from ._tensor import Tensor
from ._thread_state import active as _active
from ._thread_state import local as _local
from ._warn import warn_at_caller
from .autograd import graph as _graph


class DispatchMode:
    """Base of dispatch modes: `__fusegrad_dispatch__(op, args)` computes an op's outputs.

    Entering a mode pushes it on the calling thread's stack (other threads do not see it, as
    in PyTorch); while its handler runs it is popped, so ops the handler itself calls dispatch
    to the modes below it (as PyTorch's modes do).
    """

    def __fusegrad_dispatch__(self, op, args):
        raise NotImplementedError

    def __enter__(self):
        _thread_state.push("modes", self)
        return self

    def __exit__(self, *exc) -> None:
        _thread_state.pop("modes", self)


class CallObserver(DispatchMode):
    """A mode that watches whole calls instead of computing them (the profiler). While it is
    the innermost mode, `__fusegrad_observe__(op, args)` runs in its place, with the observer
    off the stack, and makes the call itself through `call`; so an observer costs the fast
    path nothing beyond the mode check every mode already costs it."""

    def __fusegrad_observe__(self, op, args):
        raise NotImplementedError


def observer():
    """The innermost `CallObserver` on this thread's mode stack, or None."""
    if _active.modes and _local.modes:
        for mode in reversed(_local.modes):
            if isinstance(mode, CallObserver):
                return mode
    return None


def computing_mode(besides=None) -> bool:
    """Whether this thread has a mode that computes ops itself (observers only watch: code
    that takes a shortcut when no mode is active may take it under a profiler too), other
    than `besides`."""
    if _active.modes and _local.modes:
        for mode in _local.modes:
            if mode is not besides and not isinstance(mode, CallObserver):
                return True
    return False


def tracing_mode() -> bool:
    """Whether a mode records ops into a trace (export, capture, AOT tracing): a computing
    mode other than forward-mode AD's levels alone, which compute each op as eager does."""
    if not computing_mode():
        return False
    forward_ad = sys.modules.get(_FORWARD_AD)  # (a level can be open only once loaded)
    return not (forward_ad is not None and forward_ad.only_level_modes())


_FORWARD_AD = __name__.rpartition(".")[0] + ".autograd.forward_ad"


class _Plain:
    """The Tensor class and how to build results quickly, for the ops that read them here."""

    Tensor = None
    make = None


plain = _Plain()
plain.Tensor = Tensor
plain.make = _make
_np_scalar = np.generic
_PY_NUMBERS = (int, float, complex)


def _user_number(a) -> bool:
    """Whether `a` is an instance of a subclass of int, float or complex that a user made
    (an IntEnum member): read as the Python number it holds. fusegrad's own subclasses (a
    traced float input of AOT autograd, capture's stand-ins, fx's node references) carry
    what they stand for and pass as they are."""
    cls = a.__class__
    return cls not in _SIMPLE and cls is not complex and isinstance(a, _PY_NUMBERS) and \
        not (cls.__module__ or "").startswith("fusegrad.")


# Tensor subclasses that dispatch treats as Tensor in the recorders of the call shapes (a
# module's Parameter: a linear layer's bias is addmm's first argument), given by
# `treat_as_plain`.
_PLAIN_CLASSES: set = set()


def treat_as_plain(cls: type) -> None:
    """Let Tensor subclass `cls` (its layout Tensor's, no protocol of its own, ops giving
    plain Tensors) take the recorders of the call shapes as Tensor does."""
    _PLAIN_CLASSES.add(cls)


def call(op, *args):
    """Run registry op `op` on positional `args` (tensors, numbers, lists of tensors)."""
    if _active.modes and _local.modes:  # a mode in some thread: is it in this one?
        return _call_slow(op, args)
    n = len(args)
    if n == 1:
        a = args[0]
        cls = a.__class__
        if (cls is Tensor or cls in _PLAIN_CLASSES) and not op.inplace:
            return _call_unary(op, a)  # unary ops: no argument list to build
    elif n == 2:
        # Binary ops and views (`a + b`, `a * 2`, `view(a, shape)`): no argument list either.
        a, b = args
        cls = a.__class__
        if (cls is Tensor or cls in _PLAIN_CLASSES) and not op.inplace:
            cls = b.__class__
            if cls is Tensor or cls in _PLAIN_CLASSES:
                return _call_tensors(op, a, b)
            if cls is float or cls is int or (cls is tuple and not op.list_arg):
                return _call_binary(op, a, b)
    elif n == 3:
        # A tensor and two ints: transpose(a, d0, d1), select(a, dim, i); three tensors:
        # addmm(bias, x, w.t()), where(c, a, b).
        a, b, c = args
        cls = a.__class__
        if (cls is Tensor or cls in _PLAIN_CLASSES) and not op.inplace:
            cls = b.__class__
            if cls is int and (c.__class__ is int or c.__class__ is bool):
                return _call_ints(op, a, b, c)  # (log_softmax(a, dim, False) too)
            if (cls is Tensor or cls in _PLAIN_CLASSES) and (
                    c.__class__ is Tensor or c.__class__ in _PLAIN_CLASSES):
                return _call_three(op, a, b, c)
    raw = []
    needs_grad = False
    for a in args:
        cls = a.__class__
        if cls is Tensor:  # the common case first: an exact plain Tensor
            raw.append(a._data)
            if a._rg or a._base is not None and view_requires_grad(a):
                needs_grad = True
        elif isinstance(a, Tensor):
            if not a._plain:
                return _call_slow(op, args)
            raw.append(a._data)
            if a._rg or a._base is not None and view_requires_grad(a):
                needs_grad = True
        elif cls is list or cls is tuple:
            if op.list_arg:
                for t in a:
                    if not (isinstance(t, Tensor) and t._plain):
                        return _call_slow(op, args)
                    if t._rg or t._base is not None and view_requires_grad(t):
                        needs_grad = True
                raw.append([t._data for t in a])
            else:
                raw.append(a)
        elif cls in _SIMPLE:
            raw.append(a)
        elif isinstance(a, _np_scalar) or isinstance(a, _PY_NUMBERS) and _user_number(a):
            # A NumPy scalar, or an instance of a user's subclass of int or float (an
            # IntEnum member): the Python number it holds, as PyTorch reads it (NumPy would
            # take the subclass as a strong, 64-bit operand). (The isinstance first: dtypes
            # and other arguments pass here on every call.)
            return call(op, *python_scalars(args))
        elif not hasattr(cls, "__fusegrad_function__"):
            raw.append(a)
        else:
            return _call_slow(op, args)
    if op.inplace:
        return _inplace(op, args, raw)
    return _call_list(op, args, raw, needs_grad)


def _requires_grad(op, args) -> bool:
    """Whether any input of `op` that gets an edge requires grad."""
    nondiff = op.nondiff_args
    for i, a in enumerate(args):
        if i in nondiff:
            continue
        if isinstance(a, Tensor):
            if a._rg or a._base is not None and view_requires_grad(a):
                return True
        elif op.list_arg and (a.__class__ is list or a.__class__ is tuple):
            for t in a:
                if t._rg or t._base is not None and view_requires_grad(t):
                    return True
    return False


def check_inplace_allowed(self, record: bool = True) -> None:
    """PyTorch's errors for writing into a leaf (or a view of one) that requires grad, or into
    a view made under no_grad when the write would be recorded; or into an inference tensor
    outside inference mode."""
    if _active.grad_off and not _local.grad_enabled:
        if self._vc.__class__ is not list:
            _check_inference_write()
        return
    base = self._base
    if base is not None:
        fn = self._grad_fn
        if fn is not None:
            _check_custom_function_view(self, fn)
        if fn is not None and fn._op is not None and fn._op.view and \
                fn._out_meta is not None and len(fn._out_meta) > 1:
            name = fn.name()
            raise RuntimeError(
                f"Output {self._output_nr} of "
                f"{name[:-9] if name.endswith('Backward0') else name} is a view and is being "
                "modified inplace. This view is the output of a function that returns "
                "multiple views. Such functions do not allow the output views to be modified "
                "inplace. You should replace the inplace operation by an out-of-place one.")
        # (-1: a view made under no_grad; -2: one that requires grad as its base did; below:
        # a view of such a view, `_recording.view_version`)
        if (ver := self._view_ver) is not None and ver < 0 and (record or base._rg):
            raise no_grad_view_error(self, modified=False)
        if (self._rg or base._rg) and base._grad_fn is None:  # (the view set to require
            # grad itself, of a base that does not, counts: PyTorch asks the view)
            raise RuntimeError(
                "a view of a leaf Variable that requires grad is being used in an in-place "
                "operation.")
    elif self._rg and self._grad_fn is None:
        raise RuntimeError(
            "a leaf Variable that requires grad is being used in an in-place operation.")
    if self._vc.__class__ is not list:
        _check_inference_write()


def _check_inference_write() -> None:
    """PyTorch's error for writing into an inference tensor outside inference mode."""
    if not _local.inference:
        raise RuntimeError(
            "Inplace update to inference tensor outside InferenceMode is not allowed.You can "
            "make a clone to get a normal tensor before doing inplace update.See "
            "https://github.com/pytorch/rfcs/pull/17 for more details.")


def _check_custom_function_view(t, fn) -> None:
    """PyTorch's error for writing in place into an output of a custom Function that is a
    view of one of its inputs, or into a view of such an output: the Function's backward
    would be bypassed."""
    nr = t._output_nr
    node = fn
    while node is not None:
        views = getattr(node, "_custom_views", None)
        if views is not None:
            if nr not in views[0]:
                return
            head = (f"Output {t._output_nr} of {_node_label(fn)} is a view and is being "
                    "modified inplace.")
            if views[1]:
                raise RuntimeError(
                    f"{head} This view is the output of a function that returns multiple "
                    "views. Such functions do not allow the output views to be modified "
                    "inplace. You should replace the inplace operation by an out-of-place one.")
            raise RuntimeError(
                f"{head} This view was created inside a custom Function (or because an input "
                "was returned as-is) and the autograd logic to handle view+inplace would "
                "override the custom backward associated with the custom Function, leading to "
                "incorrect gradients. This behavior is forbidden. You can fix this by cloning "
                "the output of the custom Function.")
        op = node._op
        if op is None or not op.view or not node.next_functions:
            return
        node, nr = node.next_functions[0]


def _inplace(op, args, raw):
    self = args[0]
    record = (not _active.grad_off or _local.grad_enabled) and op.differentiable and \
        _requires_grad(op, args)
    check_inplace_allowed(self, record)
    if op.metadata_only:
        return _inplace_metadata(op, args, raw)
    dst = self._data
    write_into = op.write_into
    # The kernel's result written straight into `self` where the op's writer can
    # (`OpDef.write_into`): not when the derivative needs `self` as it was, nor where an
    # input partially overlaps `self` or `self`'s elements share memory (the general path's
    # errors and writes).
    if write_into is not None and not (record and op.saves_self_before_write) and \
            dst.__class__ is _ndarray and (dst.flags.c_contiguous or not _internal_overlap(dst)) \
            and not _any_partial_overlap(dst, raw) and write_into(*raw):
        if record:
            _record_inplace(op, args, self, bump=True)
        else:
            self._vc[0] += 1
        return self
    try:
        value = op.kernel(*raw)
    except (ValueError, IndexError, TypeError):
        if (error := _inplace_failure(op, args, dst.shape)) is not None:
            raise error from None  # (PyTorch's message, without NumPy's error as context)
        raise
    if value.__class__ is not _ndarray:
        value = np.asarray(value)
    if value.shape != dst.shape:
        _inplace_shape_error(value.shape, dst.shape)
    if value.dtype != dst.dtype:
        src = _dtype.FROM_NP[value.dtype]
        if not _dtype.can_cast(src, self._dtype):
            raise RuntimeError(
                f"result type {src.legacy} can't be cast to the desired output type "
                f"{self._dtype.legacy}")
    if record and op.saves_self_before_write:
        original = self._shallow_copy()
        original._data = dst.copy()
        original._vc = [0]
        original._base = None
        original._view_ver = None
        args = (original,) + args[1:]
    if _any_partial_overlap(dst, raw):
        raise RuntimeError(
            "unsupported operation: some elements of the input tensor and the written-to "
            "tensor refer to a single memory location. Please clone() the tensor before "
            "performing the operation.")
    try:
        np.copyto(dst, value, casting="unsafe")
    except ValueError as e:
        if dst.flags.writeable:
            raise RuntimeError(str(e)) from None
        if not _internal_overlap(dst):
            # A view without repeated elements of a read-only (broadcast) array: written
            # through a writable alias of its memory, as PyTorch writes it.
            np.copyto(_writable_alias(dst, self), value, casting="unsafe")
        elif op.overlap_ok is None:
            raise RuntimeError(
                "unsupported operation: more than one element of the written-to tensor refers "
                "to a single memory location. Please clone() the tensor before performing the "
                "operation.") from None
        else:
            _write_overlapping(op, dst, value, self)
    if record:  # saved inputs keep the version they had before the write, as in PyTorch
        _record_inplace(op, args, self, bump=True)
    else:
        self._vc[0] += 1
    return self


def _any_partial_overlap(dst, raw) -> bool:
    """Whether an array among in-place arguments `raw` partially overlaps `dst`."""
    for a in raw:
        # Two arrays that own their memory (no base) cannot overlap: the common case costs
        # two attribute reads.
        if a is not dst and a.__class__ is _ndarray and (
                a.base is not None or dst.base is not None) and _partial_overlap(dst, a):
            return True
    return False


def _dense(a) -> bool:
    """Whether array `a` covers its memory range exactly once (contiguous in some order)."""
    flags = a.flags
    return flags.c_contiguous or flags.f_contiguous


def _partial_overlap(dst, src) -> bool:
    """PyTorch's partial-overlap test of an in-place op's input against its output: two
    dense arrays whose memory ranges meet without being the same view (arrays it cannot
    judge, neither dense, pass)."""
    if not np.may_share_memory(dst, src):
        return False
    if dst.shape == src.shape and dst.strides == src.strides and \
            dst.__array_interface__["data"][0] == src.__array_interface__["data"][0]:
        return False  # the same elements: the full overlap an in-place op allows
    return _dense(dst) and _dense(src)


def _internal_overlap(a) -> bool:
    """Whether some elements of `a` share memory: a zero stride over more than one (an
    empty array has no elements to share, as PyTorch judges it)."""
    return a.size != 0 and any(st == 0 and n > 1 for n, st in zip(a.shape, a.strides))


def _write_overlapping(op, dst, value, t) -> None:
    """Write `value` into `dst`, whose elements share memory, for an op PyTorch allows it
    (`OpDef.overlap_ok`). Only the elements the op changes are written: an element it leaves
    as it was must not undo the change made through another element at the same place
    (`masked_fill_` of an expanded tensor fills every alias of a masked element)."""
    if op.overlap_ok:  # PyTorch's deprecation warning
        warn_at_caller(op.overlap_ok)
    changed = value != dst
    if changed.dtype != np.bool_:  # an elementwise comparison NumPy could not make
        changed = np.ones(dst.shape, np.bool_)
    elif value.dtype == dst.dtype and dst.dtype.kind in "fcV":  # NaN stays NaN
        changed &= ~(np.isnan(value) & np.isnan(dst))
    np.copyto(_writable_alias(dst, t), value, casting="unsafe", where=changed)


def _writable_alias(a, t):
    """A writable array over read-only view `a` (tensor `t`'s elements, a view of a
    broadcast array), over the memory of the writable array it was made from."""
    root = t._base._data if t._base is not None else a
    while not (root.flags.writeable and root.flags.c_contiguous) and \
            isinstance(root.base, _ndarray):
        root = root.base
    offset = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return np.ndarray(a.shape, a.dtype, buffer=root, offset=offset, strides=a.strides)


def _inplace_metadata(op, args, raw, new=None):
    """squeeze_ and friends: `self` takes the geometry of `new` (the kernel's view)."""
    self = args[0]
    old = self._shallow_copy()
    if new is None:
        self._data = op.kernel(*raw)
    else:
        self._take_geometry(new)
    self._vc[0] += 1
    if self._rg and (not _active.grad_off or _local.grad_enabled):
        args = (old,) + args[1:]
        node = _new_node(op, args, None)
        self._grad_fn = node
        self._output_nr = 0
        node._out_meta = ((_shape(self), self._dtype),)
    return self


def _inplace_failure(op, args, self_shape) -> Exception | None:
    """The error to report for in-place `op` on `args` whose kernel failed: the meta's, or
    PyTorch's for a result that does not fit `self`; None when neither applies."""
    try:
        _inplace_shape_error(op.meta(*args).shape, self_shape)
    except Exception as error:  # (any type: the meta's error is the one to report)
        return error
    return None


def _inplace_shape_error(shape, self_shape) -> None:
    """PyTorch's error when an in-place result does not fit `self` (no-op if it does)."""
    from ._shapes import broadcast_shapes, size_str

    full = broadcast_shapes(tuple(self_shape), tuple(shape))
    if full != tuple(self_shape):
        raise RuntimeError(f"output with shape {size_str(self_shape)} doesn't match the "
                           f"broadcast shape {size_str(full)}")


def _record_inplace(op, args, self, bump=False):
    if self._base is not None:
        return _record_inplace_on_view(op, args, self, bump)
    old, old_nr = self._grad_fn, self._output_nr
    node = _new_node(op, args, self)  # (its edge to `self`'s history keeps the old number)
    self._output_nr = 0
    if bump:
        _bump_after_save(self, node)
    self._rg = True
    self._grad_fn = node
    node._out_meta = ((_shape(self), self._dtype),)
    if self._retains:
        _move_retained(self, old, old_nr)


def _bump_after_save(t, node) -> None:
    """Bump `t`'s version after `node` saved its inputs; its saved own output (`t` itself)
    is recorded at the new version."""
    t._vc[0] += 1
    versions = node._versions
    if versions is not None:
        for s, v in zip(node._saved, versions):
            if v == -1 and s.__class__ is _graph.SavedOutput:
                s.version += 1


def _move_retained(t, old, old_nr) -> None:
    """`t` got a new grad_fn: its retain_grad entry follows it (PyTorch keeps the latest)."""
    if old is not None and old._x is not None:
        old._x.retains_grad.pop(old_nr, None)
    t._retains = False
    t.retain_grad()


def _record_inplace_on_view(op, args, view, bump=False):
    """An in-place op on a view: the base's history becomes CopySlices around the op's node,
    and the view's history becomes an as_strided view of the new base (as in PyTorch)."""
    from .ops.views import as_strided

    base = view._base
    fn = _new_node(op, args, view)
    if bump:
        _bump_after_save(view, fn)
    fn._out_meta = ((_shape(view), view._dtype),)
    node = _graph.CopySlices()
    node._fn = fn
    if fn._x is not None:
        node._extras().metadata.update(fn._x.metadata)
    node._base_geom = _geometry(base)
    node._view_geom = _geometry(view)
    node.next_functions = (_edge(base),) + fn.next_functions[1:]
    node._out_meta = ((base.shape, base._dtype),)
    old_base = (base._grad_fn, base._output_nr)
    old_view = (view._grad_fn, view._output_nr)
    base._rg = True
    base._grad_fn = node
    base._output_nr = 0
    size, stride, offset = node._view_geom
    view._grad_fn = None
    _record(as_strided, (base, size, stride, offset), view)
    view._view_ver = view._vc[0]
    if base._retains:
        _move_retained(base, *old_base)
    if view._retains:
        _move_retained(view, *old_view)


def python_scalars(args: tuple) -> tuple:
    """`args` with each NumPy scalar, and each instance of a subclass of a Python number
    type, replaced by the Python number PyTorch reads it as."""
    return tuple([_python_number(a) for a in args])


def _python_number(a):
    if isinstance(a, _np_scalar):
        return _dtype.python_scalar(a)
    if not _user_number(a):
        return a
    return int(a) if isinstance(a, int) else float(a) if isinstance(a, float) else complex(a)


def _call_slow(op, args):
    """Modes, fake tensors and foreign `__fusegrad_function__` types."""
    for a in args:
        if isinstance(a, _np_scalar) or isinstance(a, _PY_NUMBERS) and _user_number(a):
            args = python_scalars(args)
            break
    if _local.autocast is not None:  # before the modes, as PyTorch's autocast keys
        return _autocast_dispatch(op, args, call)
    modes = _local.modes
    if modes:
        _local.modes = modes[:-1]
        if isinstance(modes[-1], CallObserver):  # the profiler: it makes the whole call
            try:
                return modes[-1].__fusegrad_observe__(op, args)
            finally:
                _local.modes = modes
        original = None
        try:
            if op.saves_self_before_write and (not _active.grad_off or _local.grad_enabled) \
                    and _requires_grad(op, args):
                original = _snapshot(modes[-1], args[0])
            result = modes[-1].__fusegrad_dispatch__(op, args)
        finally:
            _local.modes = modes
        return _finish(op, args, result, original)
    for a in _flat(args):
        if not isinstance(a, Tensor) and hasattr(type(a), "__fusegrad_function__"):
            return handle_function(op.public_function(), args, {})
    for a in _flat(args):
        if isinstance(a, Tensor) and not a._plain:
            cls = type(a)
            op_for = getattr(cls, "_op_for", None)  # a layout of its own runs its twin op
            if op_for is not None:
                op = op_for(op)
            return _finish(op, args, cls._compute(op, args))
    raise TypeError(f"{op.public}(): unsupported argument types "
                    f"{tuple(type(a).__name__ for a in args)}")


def _snapshot(mode, t):
    """`t` as it is before an in-place write whose derivative reads it (as the fast path's
    copy in `_inplace`); a mode that tracks tensors is told which tensor it stands for."""
    original = t._shallow_copy()
    if original._data is not None:
        original._data = original._data.copy()
    original._vc = [0]
    original._base = None
    original._view_ver = None
    note = getattr(mode, "note_snapshot", None)
    if note is not None:
        note(t, original)
    return original


def _finish(op, args, result, original=None):
    """Autograd recording for results computed by a mode or a tensor subclass (`original`:
    the snapshot of `self` an in-place op's derivative reads)."""
    if op.inplace:
        self = args[0]
        if op.metadata_only:
            return _inplace_metadata(op, args, None, result)
        if (not _active.grad_off or _local.grad_enabled) and op.differentiable and \
                _requires_grad(op, args):
            _record_inplace(op, args if original is None else (original,) + args[1:], self)
        return self
    if op.view:
        _mark_view(result, args[0])
    if (not _active.grad_off or _local.grad_enabled) and op.differentiable and \
            _requires_grad(op, args):
        _record(op, args, result)
    return result


# `call(op, ...)` for the commonest call shapes (`exp(a)`; `a * b`, `a + 2` and the
# derivatives' products; `transpose(a, 0, 1)`), without the argument tuple and with their
# recorders written in (generated): what the public functions call for those shapes.
call1, call2, call3 = make_calls(call, _call_slow)


def _flat(args):
    for a in args:
        if a.__class__ is list or a.__class__ is tuple:
            yield from a
        else:
            yield a


def handle_function(public, args, kwargs):
    """Route a public function called with a foreign argument to its `__fusegrad_function__`."""
    foreign = [a for a in _flat(args) if not isinstance(a, Tensor)
               and hasattr(type(a), "__fusegrad_function__")]
    if foreign:
        types = tuple(dict.fromkeys(type(a) for a in foreign))
        return types[0].__fusegrad_function__(public, types, args, kwargs)
    bad = next(a for a in args if not isinstance(a, Tensor))
    raise TypeError(f"{public.__name__}(): argument 'input' must be Tensor, not "
                    f"{type(bad).__name__}")
