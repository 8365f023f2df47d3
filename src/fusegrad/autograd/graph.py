"""The autograd graph: Nodes, their edges, saved tensors and leaf accumulators.

Every differentiable op call makes one Node whose class is named as PyTorch names it
(`MulBackward0`); `next_functions` holds one `(node, input_nr)` edge per tensor input, with
`(None, 0)` for inputs that need no gradient. A leaf that requires grad is reached through its
`AccumulateGrad` node. Nodes carry a sequence number: the engine runs ready nodes newest first.
"""

from __future__ import annotations

import itertools
import re

SEQUENCE = itertools.count()
# Accumulators run before any other ready node, as PyTorch's do.
ACCUMULATE_SEQ = 1 << 62

_FREED = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)


class Node:
    """A backward function in the autograd graph."""

    __slots__ = ("next_functions", "_seq", "_saved", "_pre_hooks", "_post_hooks",
                 "_tensor_pre_hooks", "_retains_grad", "_out_meta", "metadata", "__weakref__")

    def __init__(self):
        self.next_functions = ()
        self._seq = next(SEQUENCE)
        self._saved = ()
        self._pre_hooks = None
        self._post_hooks = None
        self._tensor_pre_hooks = None
        self._retains_grad = None
        self._out_meta = None
        self.metadata = {}

    def name(self) -> str:
        """The class name, as PyTorch's `Node.name()`."""
        return type(self).__name__

    def __repr__(self) -> str:
        return f"<{type(self).__name__} object at {id(self):#x}>"

    def _sequence_nr(self) -> int:
        return self._seq

    def register_hook(self, fn):
        """Call `fn(grad_inputs, grad_outputs)` after this node runs; it may return new grads."""
        if self._post_hooks is None:
            self._post_hooks = {}
        return _add_hook(self._post_hooks, fn)

    def register_prehook(self, fn):
        """Call `fn(grad_outputs)` before this node runs; it may return new grad_outputs."""
        if self._pre_hooks is None:
            self._pre_hooks = {}
        return _add_hook(self._pre_hooks, fn)

    def apply(self, grads: list) -> tuple:
        """Compute the gradients for `next_functions` from the gradients of the outputs."""
        raise NotImplementedError(f"{type(self).__name__} does not define apply")

    def release(self) -> None:
        """Free saved tensors (after a backward without retain_graph)."""
        self._saved = None

    def __call__(self, *grads):
        return self.apply(list(grads))


class RemovableHandle:
    """Returned by every `register_*hook`; `remove()` unregisters the hook."""

    __slots__ = ("_hooks", "id")
    _ids = itertools.count()

    def __init__(self, hooks: dict):
        self._hooks = hooks
        self.id = next(RemovableHandle._ids)

    def remove(self) -> None:
        """Unregister the hook (a second call does nothing)."""
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def _add_hook(hooks: dict, fn) -> RemovableHandle:
    handle = RemovableHandle(hooks)
    hooks[handle.id] = fn
    return handle


class SavedTensor:
    """A tensor kept for backward, with the version it had when saved.

    An op's own output is saved without its grad_fn (which would form a reference cycle with
    the node) and given the node back when unpacked.
    """

    __slots__ = ("tensor", "version", "is_output")

    def __init__(self, tensor, is_output: bool = False):
        if is_output:
            tensor = tensor._shallow_copy()
        self.tensor = tensor
        self.version = tensor._vc[0]
        self.is_output = is_output

    def unpack(self, node):
        """The saved tensor; RuntimeError if it was modified in place since it was saved."""
        t = self.tensor
        if t._vc[0] != self.version:
            raise RuntimeError(_modified_message(t, self.version))
        if self.is_output and node is not None and t.requires_grad:
            # A fresh alias each time, so the node and its saved output form no cycle.
            t = t._shallow_copy()
            t._grad_fn = node
        return t


def _modified_message(t, expected: int) -> str:
    where = ""
    owner = t._grad_fn
    if owner is not None:
        short = re.sub(r"Backward\d*$", "", type(owner).__name__)
        where = f", which is output {t._output_nr} of {short},"
    return (
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: [torch.{t.dtype.legacy}Tensor [{', '.join(map(str, t.shape))}]]{where} is at "
        f"version {t._vc[0]}; expected version {expected} instead. Hint: enable anomaly "
        "detection to find the operation that failed to compute its gradient, with "
        "torch.autograd.set_detect_anomaly(True, check_nan=False)."
    )


def unpack_saved(node, saved):
    """Replace each SavedTensor in `saved` by its tensor (version-checked)."""
    if saved is None:
        raise RuntimeError(_FREED)
    return [s.unpack(node) if s.__class__ is SavedTensor else s for s in saved]


class AccumulateGrad(Node):
    """The node that adds incoming gradient into a leaf tensor's `.grad`."""

    __slots__ = ("variable",)

    def __init__(self, variable):
        super().__init__()
        self._seq = ACCUMULATE_SEQ
        self.variable = variable

    def release(self) -> None:
        pass


class FunctionNode(Node):
    """The node of a registry op: its derivative is the op's `derivative` entry.

    The derivative returns one entry per positional argument of the op (a list for a list of
    tensors); `_pos` picks the entries of the inputs that have edges, and each gradient is
    summed back to its input's shape and cast to its dtype.
    """

    __slots__ = ("_op", "_in_meta", "_pos")

    def apply(self, grads: list) -> list:
        saved = unpack_saved(self, self._saved)
        raw = self._op.derivative(grads[0] if len(grads) == 1 else grads, *saved)
        out = []
        for (p, sub), (shape, dt) in zip(self._pos, self._in_meta):
            g = raw[p] if sub < 0 else raw[p][sub]
            if g is not None:
                if g.shape != shape:
                    g = _sum_to(g, shape)
                if g._dtype is not dt:
                    g = g.to(dt)
            out.append(g)
        return out

    def release(self) -> None:
        saved = self._saved
        if saved and any(s.__class__ is SavedTensor for s in saved):
            self._saved = None


def _sum_to(g, shape):
    from ..ops.shape import sum_to_shape

    return sum_to_shape(g, shape)


_NODE_CLASSES: dict[str, type] = {}


def node_class(name: str, base: type = FunctionNode) -> type:
    """The Node subclass called `name` (one class per PyTorch backward name)."""
    cls = _NODE_CLASSES.get(name)
    if cls is None:
        cls = _NODE_CLASSES[name] = type(name, (base,), {"__slots__": ()})
        cls.__module__ = "fusegrad.autograd.graph"
    return cls
