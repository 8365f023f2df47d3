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
_tensor_class = [None]  # set by fusegrad._tensor (the graph module is imported first)
# Accumulators run before any other ready node, as PyTorch's do.
ACCUMULATE_SEQ = 1 << 62

_FREED = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)


class NodeExtras:
    """The rarely used parts of a Node: hooks, retained grads, metadata."""

    __slots__ = ("pre_hooks", "post_hooks", "tensor_pre_hooks", "retains_grad", "metadata")

    def __init__(self):
        self.pre_hooks = {}
        self.post_hooks = {}
        self.tensor_pre_hooks = {}  # output_nr -> {handle id: hook}
        self.retains_grad = {}  # output_nr -> weakref to the tensor
        self.metadata = {}


class Node:
    """A backward function in the autograd graph."""

    # `_x` holds a NodeExtras once a hook or metadata is attached; most nodes never need one.
    __slots__ = ("next_functions", "_seq", "_saved", "_x", "_out_meta", "__weakref__")

    def __init__(self):
        self.next_functions = ()
        self._seq = next(SEQUENCE)
        self._saved = ()
        self._x = None
        self._out_meta = None

    def _extras(self) -> NodeExtras:
        x = self._x
        if x is None:
            x = self._x = NodeExtras()
        return x

    @property
    def metadata(self) -> dict:
        """A dict for user annotations, kept with the node."""
        return self._extras().metadata

    def name(self) -> str:
        """The class name, as PyTorch's `Node.name()`."""
        return type(self).__name__

    def __repr__(self) -> str:
        return f"<{type(self).__name__} object at {id(self):#x}>"

    def _sequence_nr(self) -> int:
        return self._seq

    def register_hook(self, fn):
        """Call `fn(grad_inputs, grad_outputs)` after this node runs; it may return new grads."""
        return _add_hook(self._extras().post_hooks, fn)

    def register_prehook(self, fn):
        """Call `fn(grad_outputs)` before this node runs; it may return new grad_outputs."""
        return _add_hook(self._extras().pre_hooks, fn)

    def apply(self, grads: list) -> list:
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


class SavedOutput:
    """An op's own output kept for backward, without its grad_fn.

    Holding the output tensor itself would make a reference cycle with the node; this holds
    its data, and unpacking makes a fresh alias whose grad_fn is the node.
    """

    __slots__ = ("data", "dtype", "vc", "version", "output_nr", "requires_grad", "fake")

    def __init__(self, t):
        self.data = t._data
        self.dtype = t._dtype
        self.vc = t._vc
        self.version = t._vc[0]
        self.output_nr = t._output_nr
        # Saved before dispatch marks the output; a floating output will require grad.
        self.requires_grad = t._dtype.is_floating_point
        self.fake = None if t._plain else t

    def unpack(self, node):
        """The output as a tensor; RuntimeError if it was modified in place since."""
        from .._tensor import Tensor

        if self.fake is not None:
            t = self.fake._shallow_copy()
        else:
            t = Tensor._make(self.data, self.dtype)
            t._vc = self.vc
        t._output_nr = self.output_nr
        if self.requires_grad:
            t._rg = True
            t._grad_fn = node
        if self.vc[0] != self.version:
            raise RuntimeError(_modified_message(t, self.version))
        return t


def save_values(saved, result):
    """(saved values, versions) for a node: each input tensor's version when saved, -1 for the
    op's own outputs (kept as SavedOutput), None for other values; versions is None when
    nothing saved is a tensor."""
    versions = None
    Tensor = _tensor_class[0]
    for i, s in enumerate(saved):
        if isinstance(s, Tensor):
            if versions is None:
                versions = [None] * len(saved)
                saved = list(saved)
            if s is result or (result.__class__ is tuple and _contains(result, s)):
                saved[i] = SavedOutput(s)
                versions[i] = -1
            else:
                versions[i] = s._vc[0]
    return saved, versions


def _contains(items, x) -> bool:
    for item in items:
        if item is x:
            return True
    return False


def _modified_message(t, expected: int) -> str:
    where = ""
    owner = t.grad_fn
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


def unpack_saved(node, saved, versions):
    """The saved values with tensors version-checked and outputs rebuilt."""
    if saved is None:
        raise RuntimeError(_FREED)
    if versions is None:
        return saved
    out = list(saved)
    for i, v in enumerate(versions):
        if v is not None:
            s = saved[i]
            if v < 0:
                out[i] = s.unpack(node)
            elif s._vc[0] != v:
                raise RuntimeError(_modified_message(s, v))
    return out


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
    summed back to its input's shape and cast to its dtype. Each op has its own subclass
    (named as PyTorch names the node), so `_op` is a class attribute.
    """

    __slots__ = ("_versions", "_in_meta", "_pos")
    _op = None

    def apply(self, grads: list) -> list:
        saved = unpack_saved(self, self._saved, self._versions)
        raw = self._op.derivative(grads[0] if len(grads) == 1 else grads, *saved)
        out = []
        for (p, sub), (shape, dt) in zip(self._pos, self._in_meta):
            g = raw[p] if sub < 0 else raw[p][sub]
            if g is not None and shape is not None:
                data = g._data
                if (data.shape if data is not None else g.shape) != shape:
                    g = _sum_to(g, shape)
                if g._dtype is not dt:
                    g = g.to(dt)
            else:
                g = None
            out.append(g)
        return out

    def release(self) -> None:
        if self._versions is not None:  # only saved tensors are freed
            self._saved = None


def _sum_to(g, shape):
    from ..ops.shape import sum_to_shape

    return sum_to_shape(g, shape)


def node_class(name: str, op=None, base: type = FunctionNode) -> type:
    """A new Node subclass called `name` (PyTorch's backward name) for registry op `op`."""
    cls = type(name, (base,), {"__slots__": (), "_op": op})
    cls.__module__ = "fusegrad.autograd.graph"
    return cls


class CopySlices(Node):
    """History of a base whose view was modified in place.

    `fn` is the in-place op's node as if the view stood alone. Backward takes the base's
    gradient, runs `fn` on the part the view covers, and puts `fn`'s gradient for the old
    view values back into that part; the rest of the base's gradient passes through.
    """

    __slots__ = ("_fn", "_base_geom", "_view_geom")

    def __init__(self):
        super().__init__()

    def apply(self, grads: list) -> list:
        from ..ops.shape import strided_transfer_fn

        g = grads[0]
        part = strided_transfer_fn(g, self._base_geom, self._view_geom)
        res = self._fn.apply([part])
        out = g - strided_transfer_fn(part, self._view_geom, self._base_geom)
        if res[0] is not None:
            out = out + strided_transfer_fn(res[0], self._view_geom, self._base_geom)
        return [out, *res[1:]]

    def release(self) -> None:
        self._fn.release()
