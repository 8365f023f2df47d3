"""Dispatch: run a registry op on its arguments and record it for autograd.

Fast path: no mode is active and every tensor argument is a plain Tensor (or Parameter):
unwrap the NumPy arrays, run the kernel, wrap the result, and make a Node only when grad mode
is on and an input requires grad.

Slow path: a mode is active (fake, tracing, profiling: a stack, innermost last), or an
argument is a tensor subclass with its own compute (FakeTensor), or an argument is a foreign
type that declares `__fusegrad_function__` (FX's Proxy). Modes and fake tensors replace only
the computation; autograd recording is the same code for every path, so graphs recorded on
fake tensors look exactly like eager ones.
"""

from __future__ import annotations

import numpy as np

from . import _dtype
from .autograd import graph as _graph
from .autograd.grad_mode import state as _grad_state

_ndarray = np.ndarray


class _ModeStack:
    __slots__ = ("modes",)

    def __init__(self):
        self.modes = []


mode_stack = _ModeStack()
_modes = mode_stack.modes  # shared list; never rebound


class DispatchMode:
    """Base of dispatch modes: `__fusegrad_dispatch__(op, args)` computes an op's outputs.

    Entering a mode pushes it on the stack; while its handler runs it is popped, so ops the
    handler itself calls dispatch to the modes below it (as PyTorch's modes do).
    """

    def __fusegrad_dispatch__(self, op, args):
        raise NotImplementedError

    def __enter__(self):
        _modes.append(self)
        return self

    def __exit__(self, *exc) -> None:
        if _modes and _modes[-1] is self:
            _modes.pop()
        else:
            _modes.remove(self)


class _Plain:
    """Set by fusegrad._tensor: the Tensor class and how to build results quickly."""

    Tensor = None
    make = None


plain = _Plain()


def call(op, *args):
    """Run registry op `op` on positional `args` (tensors, numbers, lists of tensors)."""
    Tensor = plain.Tensor
    if not _modes:
        raw = []
        inputs = None
        for a in args:
            if isinstance(a, Tensor):
                if not a._plain:
                    return _call_slow(op, args)
                raw.append(a._data)
            elif a.__class__ is list or a.__class__ is tuple:
                if op.list_arg:
                    for t in a:
                        if not (isinstance(t, Tensor) and t._plain):
                            return _call_slow(op, args)
                    raw.append([t._data for t in a])
                else:
                    raw.append(a)
            elif hasattr(type(a), "__fusegrad_function__"):
                return _call_slow(op, args)
            else:
                raw.append(a)
        if op.inplace:
            return _inplace(op, args, raw)
        out = op.kernel(*raw)
        if out.__class__ is tuple:
            result = tuple(_wrap(o) for o in out)
        else:
            result = _wrap(out)
        if op.view:
            _mark_view(result, args[0])
        if _grad_state.enabled and op.differentiable:
            inputs = _diff_inputs(op, args)
            if inputs is not None:
                _record(op, args, inputs, result)
        return result
    return _call_slow(op, args)


def _wrap(out):
    if out.__class__ is not _ndarray:
        out = np.asarray(out)
    return plain.make(out)


def _mark_view(result, base):
    if result.__class__ is tuple:
        for r in result:
            _mark_view(r, base)
        return
    result._base = base if base._base is None else base._base
    result._vc = base._vc


def _diff_inputs(op, args):
    """The tensors that get an edge with their (arg position, list index), or None when
    none of them requires grad."""
    inputs = []
    any_rg = False
    nondiff = op.nondiff_args
    Tensor = plain.Tensor
    for i, a in enumerate(args):
        if i in nondiff:
            continue
        if isinstance(a, Tensor):
            inputs.append((a, (i, -1)))
            any_rg = any_rg or a._rg
        elif op.list_arg and (a.__class__ is list or a.__class__ is tuple):
            for k, t in enumerate(a):
                inputs.append((t, (i, k)))
                any_rg = any_rg or t._rg
    return inputs if any_rg else None


def _link(node, op, inputs):
    node._op = op
    node.next_functions = tuple([_edge(t) for t, _ in inputs])
    node._in_meta = tuple([(t.shape, t._dtype) for t, _ in inputs])
    node._pos = tuple([p for _, p in inputs])


def _edge(t):
    if not t._rg:
        return (None, 0)
    fn = t._grad_fn
    if fn is not None:
        return (fn, t._output_nr)
    return (t._grad_accumulator(), 0)


def _record(op, args, inputs, result):
    """Make `op`'s Node, link it to the inputs' history and make it the result's grad_fn."""
    node = op.node_cls()
    _link(node, op, inputs)
    if op.save is not None:
        saved = op.save(result, *args)
        node._saved = tuple([_save(s, result) for s in saved])
    outs = result if result.__class__ is tuple else (result,)
    for i, r in enumerate(outs):
        if r._dtype.category == _dtype.FLOAT:
            r._rg = True
            r._grad_fn = node
            r._output_nr = i
    node._out_meta = tuple([(r.shape, r._dtype) for r in outs])
    return node


def _save(s, result):
    if isinstance(s, plain.Tensor):
        if s is result or (result.__class__ is tuple and any(s is r for r in result)):
            return _graph.SavedTensor(s, is_output=True)
        return _graph.SavedTensor(s)
    return s


def check_inplace_allowed(self) -> None:
    """PyTorch's errors for writing into a leaf (or a view of one) that requires grad."""
    if not _grad_state.enabled:
        return
    if self._rg and self._grad_fn is None:
        base = self._base
        if base is not None and base._rg and base._grad_fn is None:
            raise RuntimeError(
                "a view of a leaf Variable that requires grad is being used in an in-place "
                "operation.")
        raise RuntimeError(
            "a leaf Variable that requires grad is being used in an in-place operation.")


def _inplace(op, args, raw):
    self = args[0]
    check_inplace_allowed(self)
    value = op.kernel(*raw)
    dst = self._data
    if value.__class__ is not _ndarray:
        value = np.asarray(value)
    if value.dtype != dst.dtype:
        src = _dtype.FROM_NP[value.dtype]
        if not _dtype.can_cast(src, self._dtype):
            raise RuntimeError(
                f"result type {src.legacy} can't be cast to the desired output type "
                f"{self._dtype.legacy}")
    if value.shape != dst.shape:
        try:
            np.broadcast_shapes(value.shape, dst.shape)
            ok = np.broadcast_shapes(value.shape, dst.shape) == dst.shape
        except ValueError:
            ok = False
        if not ok:
            raise RuntimeError(
                f"output with shape [{', '.join(map(str, dst.shape))}] doesn't match the "
                f"broadcast shape [{', '.join(map(str, np.broadcast_shapes(value.shape, dst.shape)))}]"
            )
    inputs = None
    if _grad_state.enabled and op.differentiable:
        inputs = _diff_inputs(op, args)
    if inputs is not None and self._base is not None and self._base._rg:
        raise RuntimeError(
            "in-place operations on a view of a tensor that requires grad are not supported "
            "yet: apply the operation out of place (e.g. `x = x.mul(2)` instead of "
            "`x.mul_(2)`)")
    if inputs is not None and op.saves_self_before_write:
        original = self._shallow_copy()
        original._data = dst.copy()
        original._vc = [0]
        args = (original,) + args[1:]
        inputs = [(original if t is self else t, p) for t, p in inputs]
    try:
        np.copyto(dst, value, casting="unsafe")
    except ValueError as e:
        if not dst.flags.writeable:
            raise RuntimeError(
                "unsupported operation: more than one element of the written-to tensor refers "
                "to a single memory location. Please clone() the tensor before performing the "
                "operation.") from None
        raise RuntimeError(str(e)) from None
    self._vc[0] += 1
    if inputs is not None:
        _record_inplace(op, args, inputs, self)
    return self


def _record_inplace(op, args, inputs, self):
    node = op.node_cls()
    _link(node, op, inputs)
    if op.save is not None:
        saved = op.save(self, *args)
        node._saved = tuple([_save(s, self) for s in saved])
    self._rg = True
    self._grad_fn = node
    self._output_nr = 0
    node._out_meta = ((self.shape, self._dtype),)


def _call_slow(op, args):
    """Modes, fake tensors and foreign `__fusegrad_function__` types."""
    Tensor = plain.Tensor
    if _modes:
        mode = _modes.pop()
        try:
            result = mode.__fusegrad_dispatch__(op, args)
        finally:
            _modes.append(mode)
        return _finish(op, args, result)
    for a in _flat(args):
        if not isinstance(a, Tensor) and hasattr(type(a), "__fusegrad_function__"):
            return handle_function(op.public_function(), args, {})
    for a in _flat(args):
        if isinstance(a, Tensor) and not a._plain:
            return _finish(op, args, type(a)._compute(op, args))
    raise TypeError(f"{op.public}(): unsupported argument types "
                    f"{tuple(type(a).__name__ for a in args)}")


def _finish(op, args, result):
    """Autograd recording for results computed by a mode or a tensor subclass."""
    if op.inplace:
        self = args[0]
        inputs = _diff_inputs(op, args) if _grad_state.enabled and op.differentiable else None
        if inputs is not None:
            _record_inplace(op, args, inputs, self)
        return self
    if op.view:
        _mark_view(result, args[0])
    if _grad_state.enabled and op.differentiable:
        inputs = _diff_inputs(op, args)
        if inputs is not None:
            _record(op, args, inputs, result)
    return result


def _flat(args):
    for a in args:
        if a.__class__ is list or a.__class__ is tuple:
            yield from a
        else:
            yield a


def handle_function(public, args, kwargs):
    """Route a public function called with a foreign argument to its `__fusegrad_function__`."""
    Tensor = plain.Tensor
    foreign = [a for a in _flat(args) if not isinstance(a, Tensor)
               and hasattr(type(a), "__fusegrad_function__")]
    if foreign:
        types = tuple(dict.fromkeys(type(a) for a in foreign))
        return types[0].__fusegrad_function__(public, types, args, kwargs)
    bad = next(a for a in args if not isinstance(a, Tensor))
    raise TypeError(f"{public.__name__}(): argument 'input' must be Tensor, not "
                    f"{type(bad).__name__}")
