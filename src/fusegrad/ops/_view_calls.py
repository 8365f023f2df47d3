"""The two commonest views run and recorded in one frame: `x[i]` and `x.view(n)`.

Dispatch reaches these ops through `call`, the `TII`/`TN` recorder, the kernel, the op's
`save` and the saved-value loop: six Python frames for a view whose NumPy work is one index
or one reshape, so `x[i]` with grad cost about a quarter more than `x.exp()`. Here each is
one function with the op's facts written in: the kernel's common case, the result's slots
(a view: its base's version counter, its base, the version its history was made at), and
with grad the Node as the generated recorders build it (`_recorders.TEMPLATE`: one edge,
its input's shape and dtype, the saved values, which are a shape and numbers, so never a
version to keep). Anything else (a mode, a tensor subclass, an index out of range, a shape
NumPy would refuse or copy for) goes through `call` as before, so errors and modes are
dispatch's. `tests/test_view_calls.py` checks every slot of the results and Nodes against
the general recorder's, in every grad state.
"""

from __future__ import annotations

from .. import _tensor
from .._dispatch import call
from .._recording import (
    _FLOAT,
    _FROM_NP,
    _active,
    _anomaly_state,
    _local,
    _meta_error,
    _new,
    _new_accumulator,
    _record_traceback,
    _save_into,
    _seq,
    sync_view,
    view_requires_grad,
)
from .._tensor import Tensor
from .views import select, view

_POS0 = ((0, -1),)  # a Node's `_pos` for one tensor input, the call's first argument


def select_first(a, index: int, data, shape: tuple):
    """`a[index]` of a plain Tensor `a` whose array `data` has `shape` (at least one dim) and
    an int `index` within dim 0 (the caller checked both, and answers any other index):
    `select(a, 0, index)`."""
    if _active.modes and _local.modes:
        return call(select, a, 0, index)
    # `...` keeps a 1-D tensor's element a 0-d view, not a NumPy scalar.
    out = data[index] if len(shape) > 1 else data[index, ...]
    result = _new(Tensor)
    result._data = out
    result._dtype = dt = _FROM_NP[out.dtype]
    result._rg = False
    result._grad_fn = None
    result._grad = None
    vc = result._vc = a._vc
    base = a._base
    result._base = a if base is None else base
    grad = not _active.grad_off or _local.grad_enabled
    if grad:  # (of a view made under no_grad: that origin kept, `_recording.view_version`)
        result._view_ver = vc[0] if (pv := a._view_ver) is None or pv >= 0 else -3 - 4 * vc[0]
    else:  # made under no_grad: requires grad as the root base does, with no history
        rg = result._rg = result._base._rg
        result._view_ver = (-2 if rg else -1) - 4 * vc[0]
    result._output_nr = 0
    result._retains = False
    result._hooks = None
    result._grad_acc = None
    result._post_acc_hooks = None
    if _tensor._on_new is not None:  # new tensors watched (`_tensor.watch_new_tensors`)
        _tensor._on_new(result)
    if (a._rg or a._base is not None and view_requires_grad(a)) and grad:
        _record_view(select, a, data, result, out, dt, (shape, 0, index))
    return result


def view_shape(a, shape: tuple):
    """`a.view(shape)` of a plain Tensor `a` and a tuple of ints `shape`: `view(a, shape)`."""
    data = a._data
    if _active.modes and _local.modes:
        return call(view, a, shape)
    try:
        # A C-contiguous array reshapes without a copy; anything else, and a size NumPy
        # reads otherwise than PyTorch (below -1, or -1 of an empty array), is the
        # kernel's, which refuses copies and bad sizes.
        for s in shape:
            if s.__class__ is not int or s < 0 and (s < -1 or not data.size):
                out = view.kernel(data, shape)
                break
        else:
            out = data.reshape(shape) if data.flags.c_contiguous else view.kernel(data, shape)
    except (ValueError, IndexError, TypeError):
        if (error := _meta_error(view, a, shape)) is not None:  # PyTorch's message
            raise error from None
        raise
    result = _new(Tensor)
    result._data = out
    result._dtype = dt = _FROM_NP[out.dtype]
    result._rg = False
    result._grad_fn = None
    result._grad = None
    vc = result._vc = a._vc
    base = a._base
    result._base = a if base is None else base
    grad = not _active.grad_off or _local.grad_enabled
    if grad:  # (of a view made under no_grad: that origin kept, `_recording.view_version`)
        result._view_ver = vc[0] if (pv := a._view_ver) is None or pv >= 0 else -3 - 4 * vc[0]
    else:  # made under no_grad: requires grad as the root base does, with no history
        rg = result._rg = result._base._rg
        result._view_ver = (-2 if rg else -1) - 4 * vc[0]
    result._output_nr = 0
    result._retains = False
    result._hooks = None
    result._grad_acc = None
    result._post_acc_hooks = None
    if _tensor._on_new is not None:  # new tensors watched (`_tensor.watch_new_tensors`)
        _tensor._on_new(result)
    if (a._rg or a._base is not None and view_requires_grad(a)) and grad:
        _record_view(view, a, data, result, out, dt, (data.shape,))
    return result


def _record_view(op, a, data, result, out, dt, saved: tuple) -> None:
    """Make `op`'s Node for view `result` of `a` (whose array is `data`): what the generated
    recorders build for one tensor input and saved values that are not tensors."""
    node = (op.node_cls or op.node_class_of())()  # FunctionNode: no __init__ runs
    node._seq = next(_seq)
    node._x = None
    if a._base is not None:
        sync_view(a)
    fn = a._grad_fn
    if fn is not None:
        nr = a._output_nr
        node.next_functions = ((fn, nr),)
        node._in_meta = (fn._out_meta[nr],)
    else:
        acc = a._grad_acc
        if acc is not None and (acc := acc()) is not None:  # met again in this graph
            node.next_functions = ((acc, 0),)
            if acc._meta_of is data:
                node._in_meta = (acc._meta,)
            else:
                meta = acc._meta = (data.shape, a._dtype)
                acc._meta_of = data
                node._in_meta = (meta,)
        else:
            node.next_functions = ((_new_accumulator(a), 0),)
            node._in_meta = ((data.shape, a._dtype),)
    node._pos = _POS0
    if _active.saved_hooks:  # hooks in some thread: `_save_into` asks this one's
        _save_into(node, saved, result)
    else:
        node._saved = saved
        node._versions = None
    if _anomaly_state.enabled:
        _record_traceback(node)
    if dt.category >= _FLOAT:
        result._rg = True
        result._grad_fn = node
    node._out_meta = ((out.shape, dt),)
