"""Recording: what every recorder shares, and the general one.

An op called with grad on and an input that requires grad gets a Node: its edges (one per
tensor input: the input's grad_fn, or its leaf's accumulator), its inputs' shapes and dtypes,
the argument positions of the inputs and the values its derivative needs saved. The
commonest call shapes have their own recorders, generated from one template
(`_recorders`, written to `_recorded_calls`); this module holds the general recorder
(`_record`, `_new_node`: any arguments, tuple results), view linking (`_mark_view`,
`sync_view`), the saves the recorders write out (mul's `save_partners`, `save_result`,
`save_shape`) and the constants the generated recorders read. Dispatch (`_dispatch`) picks
a recorder and handles modes, in-place ops and tensor subclasses.
"""

from __future__ import annotations

import weakref

import numpy as np

from . import _dtype, _tensor
from ._tensor import Tensor
from ._tensor import make_plain as _make
from ._thread_state import active as _active
from ._thread_state import local as _local
from .autograd import graph as _graph
from .autograd.anomaly_mode import state as _anomaly_state

_ndarray = np.ndarray
_FROM_NP = _dtype.FROM_NP
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)  # the dtypes of `op.ufunc`'s calls
_new = object.__new__
_SIMPLE = frozenset({int, float, bool, type(None), str})
_seq = _graph.SEQUENCE


def save_partners(out, a, b):
    """The values a product's derivative needs (mul's `save`): each factor when the other
    requires grad. The recorders of two operands know it by identity and write it out."""
    return (a if (b._rg if b.__class__ is Tensor else getattr(b, "_rg", False)) else None,
            b if (a._rg if a.__class__ is Tensor else getattr(a, "_rg", False)) else None)


_save_partners = save_partners


def save_result(out, *args):
    """The op's own output, the one value its derivative needs (exp, tanh, relu: their
    `save`). The recorders know it by identity and keep it as a SavedOutput themselves."""
    return (out,)


_save_result = save_result


def saved_shape(t) -> tuple:
    """A tensor's shape as a plain tuple of ints, as PyTorch's nodes keep a saved size
    (`_saved_self_sym_sizes` is a tuple); the array's own shape, without building a `Size`,
    when the tensor has data (every eager op that records a node pays for this)."""
    data = t._data
    return data.shape if data is not None else tuple(t.shape)


def save_shape(out, a, *args):
    """The first input's shape, the one value its derivative needs (sum, view, reshape:
    their `save`). The recorders know it by identity and save the shape themselves."""
    return (saved_shape(a),)


_save_shape = save_shape


def _meta_error(op, *args) -> Exception | None:
    """The error `op`'s meta raises for `args` (PyTorch's message for bad shapes and types),
    or None when the meta accepts them. A recorder calls it once the kernel failed and
    raises the answer `from None`: the kernel's NumPy error is not the user's concern, and
    PyTorch's tracebacks show no earlier exception."""
    try:
        op.meta(*args)
    except Exception as error:  # (any type: the meta's error is the one to report)
        return error
    return None


def _wrap(out):
    if out.__class__ is not _ndarray:
        out = np.asarray(out)
    return _make(out)


def _mark_view(result, base):
    if result.__class__ is tuple:
        for r in result:
            _mark_view(r, base)
        return
    result._base = base if base._base is None else base._base
    result._vc = base._vc
    if not _active.grad_off or _local.grad_enabled:
        result._view_ver = view_version(base)
    else:  # made under no_grad: requires grad as its root base does, with no history
        rg = result._rg = result._base._rg
        result._view_ver = (-2 if rg else -1) - 4 * base._vc[0]


def _node_label(fn) -> str:
    """A node's name as PyTorch's errors name the op (`Slice` for SliceBackward0)."""
    name = fn.name()
    for suffix in ("Backward0", "Backward"):
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return name


def view_version(base) -> int:
    """`_view_ver` of a view of `base` made with grad mode on: the version `v` of their
    storage, or `-3 - 4 * v` when `base` was made under no_grad or is a view of such a view.

    A view made under no_grad itself holds `-1 - 4 * v` (its base did not require grad) or
    `-2 - 4 * v` (it did: the view requires grad with no history and no accumulator). So a
    negative `_view_ver` keeps the view's origin in `-_view_ver % 4` and its version in
    `-_view_ver // 4`, as PyTorch's views keep their creation meta: writing into such a view
    in place with grad on, or reading its history once its storage changed, is refused. The
    generated recorders (`ops._view_calls` among them) write these expressions out."""
    ver = base._vc[0]
    pv = base._view_ver
    return ver if pv is None or pv >= 0 else -3 - 4 * ver


def no_grad_view_error(t, modified: bool) -> RuntimeError:
    """PyTorch's error for view `t`, made under no_grad (or a view of such a view), written
    in place with grad mode on (`modified` False) or read for its history once its base or
    another view of it changed in place (`modified` True)."""
    fn = t._grad_fn
    if -t._view_ver % 4 == 3 and fn is not None:
        what = f"Output {t._output_nr} of {_node_label(fn)} is a view of a view which was"
    else:
        what = "A view was"
    happened = ("its base or another view of its base has been modified inplace"
                if modified else "is being modified inplace")
    return RuntimeError(
        f"{what} created in no_grad mode and {happened} with grad mode enabled. Given that "
        "this use case is ambiguous and error-prone, it is forbidden. You can clarify your "
        "code by moving both the view and the inplace either both inside the no_grad block "
        "(if you don't want the inplace to be tracked) or both outside (if you want the "
        "inplace to be tracked).")


def sync_view(t) -> None:
    """Give view `t` a fresh history if its base was modified in place since it was made.

    A view's grad_fn describes how it was computed from its base's history at the time; once
    the base changes in place, the view is `as_strided` of the base's new history (PyTorch
    regenerates it the same way, on access)."""
    ver = t._view_ver
    if ver is None or ver == t._vc[0]:
        return
    if ver < 0:  # made under no_grad, or a view of such a view (`view_version`)
        if -ver // 4 != t._vc[0]:
            if t._base._rg:
                raise no_grad_view_error(t, modified=True)
            t._view_ver = -(-ver % 4) - 4 * t._vc[0]
        return
    t._view_ver = t._vc[0]
    base = t._base
    if base._rg:
        from .ops.views import as_strided

        size, stride, offset = _geometry(t)
        t._output_nr = 0
        _record(as_strided, (base, size, stride, offset), t)


def view_requires_grad(t) -> bool:
    """Whether view `t` requires grad now (the recorders ask it of a view whose flag is
    off): its base, or another view of it, may have been written in place with history
    since `t` was made, which gives `t` a history too (`sync_view`), as PyTorch's views
    answer from their regenerated grad_fn. A view made under no_grad keeps its flag."""
    ver = t._view_ver
    if ver is not None and ver >= 0 and ver != t._vc[0]:
        sync_view(t)
    return t._rg


_tensor.use_view_sync(sync_view)


def _shape(t) -> tuple:
    data = t._data
    return data.shape if data is not None else tuple(t.shape)


def _edge(t):
    if t._base is not None:
        sync_view(t)
    if not t._rg:
        return (None, 0)
    fn = t._grad_fn
    if fn is not None:
        return (fn, t._output_nr)
    return (t._grad_accumulator(), 0)


_NO_EDGE = (None, 0)  # the edge of an input without grad, or of a number in a Tensor slot
_NO_META = (None, None)  # the shape and dtype of a number in a Tensor slot
# Shared `(position, -1)` entries of a node's `_pos` (a tensor argument, not a list element).
_POS = tuple((i, -1) for i in range(32))
_FLOAT = _dtype.FLOAT
_save_into = _graph.save_into
_new_accumulator = _graph.new_accumulator
_save_loop = _graph.save_loop
_saved_output = _graph.saved_output
_PLAIN = _graph.PLAIN
_OUTPUT_VERSIONS = _graph.OUTPUT_VERSIONS
# The versions of a node that saved a Python number given for a tensor (PyTorch's wrapped
# number, a saved tensor): none to check, but the node's saved values are freed with the
# graph (a second backward raises), as a node's with saved tensors are.
_NUMBER_VERSIONS = (None, None)
# What the recorders need to make a leaf's accumulator and a SavedOutput themselves
# (`_graph.new_accumulator` and `_graph.saved_output` written out, a call less per op).
_AccumulateGrad = _graph.AccumulateGrad
_ACCUMULATE_SEQ = _graph.ACCUMULATE_SEQ
_SavedOutput = _graph.SavedOutput
_weakref = weakref.ref
_OTHER = object()  # a saved value the recorders' short form leaves to `_save_into`


def _new_node(op, args, result):
    """`op`'s Node: one edge per tensor input (and per number in a Tensor slot, and per
    missing optional tensor, as PyTorch's wrapped numbers), each input's shape and dtype, the
    argument positions of the inputs, and what the derivative needs saved."""
    node = (op.node_cls or op.node_class_of())()  # FunctionNode: no __init__ runs
    node._seq = next(_seq)
    node._x = None
    edges = []
    meta = []
    pos = []
    nondiff = op.nondiff_args
    tensor_args = op.tensor_args
    number = _OTHER  # a Python number given for a tensor (PyTorch's wrapped number)
    number_at = -1  # and its position
    i = -1
    for a in args:
        i += 1
        if nondiff and i in nondiff:
            continue
        cls = a.__class__
        # Numbers (the common non-tensor argument) skip the isinstance call.
        if cls is Tensor or (cls not in _SIMPLE and isinstance(a, Tensor)):
            if a._base is not None:
                sync_view(a)
            if not a._rg:  # no gradient flows to it (hooks see None): its shape is not kept
                edges.append(_NO_EDGE)
                meta.append(_NO_META)
            else:
                fn = a._grad_fn
                if fn is not None:  # its shape and dtype as its node recorded them
                    nr = a._output_nr
                    edges.append((fn, nr))
                    meta.append(fn._out_meta[nr])
                else:
                    edges.append((a._grad_accumulator(), 0))
                    data = a._data
                    meta.append((data.shape if data is not None else tuple(a.shape), a._dtype))
            pos.append(_POS[i] if i < 32 else (i, -1))
        elif cls is list or cls is tuple:
            if op.list_arg:
                for k, t in enumerate(a):
                    # PyTorch computes every element's gradient of a list argument.
                    edges.append(_edge(t))
                    meta.append((_shape(t), t._dtype))
                    pos.append((i, k))
        elif a is None:
            if i in op.optional_tensor_args:
                edges.append(_NO_EDGE)
                meta.append(_NO_META)
                pos.append(_POS[i] if i < 32 else (i, -1))
        elif tensor_args and i in tensor_args and cls in _SIMPLE:
            edges.append(_NO_EDGE)
            meta.append(_NO_META)
            pos.append(_POS[i] if i < 32 else (i, -1))
            number, number_at = a, i
    node.next_functions = tuple(edges)
    node._in_meta = tuple(meta)
    node._pos = tuple(pos)
    save = op.save
    if save is not None:
        saved = save(result, *args)
        _save_into(node, saved, result)
        # Saved at its own position (as the recorders test): a saved tensor to PyTorch,
        # freed with the graph. (An equal small int elsewhere, add's alpha, is none.)
        if number is not _OTHER and node._versions is None and number_at < len(saved) and \
                saved[number_at] is number:
            node._versions = (None,) * len(saved)
    else:
        node._saved = ()
        node._versions = None
    if _anomaly_state.enabled:
        _record_traceback(node)
    return node


def _record_traceback(node) -> None:
    """Anomaly mode: keep the forward traceback of the op that made `node`."""
    from .autograd.anomaly_mode import record_traceback

    record_traceback(node)


def _record(op, args, result):
    """Make `op`'s Node and make it the grad_fn of the (floating) results."""
    if result.__class__ is tuple:
        for i, r in enumerate(result):
            r._output_nr = i
        node = _new_node(op, args, result)
        # Outputs an op declares non-differentiable (batch norm's saved statistics) stay
        # outside the graph, as in PyTorch.
        skip = op.nondiff_outputs
        for i, r in enumerate(result):
            if r._dtype.category >= _dtype.FLOAT and i not in skip:
                r._rg = True
                r._grad_fn = node
        node._out_meta = tuple([(_shape(r), r._dtype) for r in result])
        return node
    node = _new_node(op, args, result)
    dt = result._dtype
    if dt.category >= _FLOAT:  # floating or complex
        result._rg = True
        result._grad_fn = node
    data = result._data
    node._out_meta = ((data.shape if data is not None else tuple(result.shape), dt),)
    return node


def _geometry(t) -> tuple:
    return (tuple(t.shape), tuple(t.stride()), t.storage_offset())


