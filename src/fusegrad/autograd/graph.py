"""The autograd graph: Nodes, their edges, saved tensors and leaf accumulators.

Every differentiable op call makes one Node whose class is named as PyTorch names it
(`MulBackward0`); `next_functions` holds one `(node, input_nr)` edge per tensor input, with
`(None, 0)` for inputs that need no gradient. A leaf that requires grad is reached through its
`AccumulateGrad` node. Nodes carry a sequence number: the engine runs ready nodes newest first.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import weakref
from typing import Any, NamedTuple

from .. import _thread_state
from .._dtype import COMPLEX as _COMPLEX
from .._dtype import FLOAT as _FLOAT
from .._thread_state import active as _active
from .._thread_state import local as _local
from .anomaly_mode import state as _anomaly_state
from .grad_mode import check_inference_save

SEQUENCE = itertools.count()
_new_object = object.__new__
_weakref = weakref.ref
_tensor_class = [None]  # given by fusegrad._tensor (`register_tensor_class`)


def register_tensor_class(cls) -> None:
    """Registration by fusegrad._tensor, which sits above the graph: the class saved values
    are rebuilt as, and the class the recorders' inline tests compare with."""
    global _Tensor, _set_grad_acc
    _tensor_class[0] = _Tensor = cls
    # A leaf's `_grad_acc` slot written directly: a Parameter's own `__setattr__` (which
    # keeps the attributes a program sets on it) cost 0.4 us per accumulator.
    _set_grad_acc = cls.__dict__["_grad_acc"].__set__


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


# What `dir(node)` shows of the underscored names, and hides of the dunder ones.
_NODE_DIR_PRIVATE = frozenset(("_sequence_nr", "_forward_cls", "_raw_saved_tensors"))
_NODE_DIR_HIDDEN = frozenset(("__slots__", "__weakref__", "__module__"))


def _raw_saved_tensor(node, name: str) -> bool:
    """Whether `node.<name>` (a `_raw_saved_` attribute) is a saved tensor, which PyTorch
    lists (a saved number or size has no raw form there)."""
    try:
        getattr(node, name)
    except Exception:  # noqa: BLE001 (no such entry, or one freed: either way not listed)
        return False
    return True


class Node:
    """A backward function in the autograd graph."""

    # `_x` holds a NodeExtras once a hook or metadata is attached; most nodes never need one.
    __slots__ = ("next_functions", "_seq", "_saved", "_x", "_out_meta", "__weakref__")
    _op = None  # the registry op of a FunctionNode (the engine runs those inline)

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
        """The class name, as PyTorch's `Node.name()` (its C++ name for the node of an op
        without a derivative, whose class PyTorch names `NotImplemented` too)."""
        name = type(self).__name__
        return "torch::autograd::NotImplemented" if name == "NotImplemented" else name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} object at {id(self):#x}>"

    def __dir__(self) -> list:
        """The attributes as PyTorch's nodes list them: the node API and the saved values
        (`_saved_<name>`, `_raw_saved_<name>`), not the slots and helpers of this
        implementation (a custom Function's node lists its `apply` and no `__call__`, as
        PyTorch's)."""
        custom = hasattr(type(self), "_forward_cls")
        return sorted(n for n in object.__dir__(self) if (
            n.startswith("_saved_") or n in _NODE_DIR_PRIVATE or
            (n.startswith("_raw_saved_") and _raw_saved_tensor(self, n)) or
            (n.startswith("__") and n not in _NODE_DIR_HIDDEN and not (
                custom and n == "__call__")) or
            (not n.startswith("_") and n != "release" and (custom or n != "apply"))))

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
        # As PyTorch's node call: one input's gradient as it is, several as a tuple.
        out = self.apply(list(grads))
        return out[0] if len(out) == 1 else tuple(out)


class RemovableHandle:
    """Unregisters one hook: `remove()` takes its entry out of the hook dict (and out of
    `extra_dict`, the per-hook flag dicts such as a module's `with_kwargs` set); usable as a
    context manager that removes on exit. `id` is the key of the hook in those dicts.

    Public as `fusegrad.utils.hooks.RemovableHandle`; it lives here, below Tensor, which
    returns it from `register_hook`."""

    __slots__ = ("_hooks", "_extra", "id")
    _ids = itertools.count()

    def __init__(self, hooks_dict: Any, *, extra_dict: Any = None) -> None:
        # PyTorch's handle refers to the dicts weakly: one that cannot be (a plain dict) is
        # PyTorch's TypeError. (fusegrad's own plain-dict tables go through `_add_hook`.)
        for table in (hooks_dict, *(extra_dict if isinstance(extra_dict, list) else
                                    () if extra_dict is None else (extra_dict,))):
            weakref.ref(table)
        self._init(hooks_dict, extra_dict)

    def _init(self, hooks_dict: Any, extra_dict: Any) -> None:
        self._hooks = hooks_dict
        self.id = next(RemovableHandle._ids)
        if extra_dict is None:
            self._extra = ()
        elif isinstance(extra_dict, list):
            self._extra = tuple(extra_dict)
        else:
            self._extra = (extra_dict,)

    def remove(self) -> None:
        """Unregister the hook (a second call does nothing)."""
        self._hooks.pop(self.id, None)
        for extra in self._extra:
            extra.pop(self.id, None)

    def __getstate__(self) -> tuple:
        return (self._hooks, self.id, self._extra)

    def __setstate__(self, state: tuple) -> None:
        self._hooks, self.id, self._extra = state

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


RemovableHandle.__module__ = "fusegrad.utils.hooks"


def _add_hook(hooks: dict, fn) -> RemovableHandle:
    handle = RemovableHandle.__new__(RemovableHandle)
    handle._init(hooks, None)
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
        self.requires_grad = t._dtype.category >= _FLOAT
        self.fake = None if t._plain else t

    def unpack(self, node):
        """The output as a tensor; RuntimeError if it was modified in place since."""
        t = self.tensor(node)
        if self.vc[0] != self.version:
            raise RuntimeError(_modified_message(t, self.version))
        return t

    def tensor(self, node):
        """The output as a tensor, whatever its version now."""
        if self.fake is not None:
            t = self.fake._shallow_copy()
        else:
            t = _tensor_class[0]._make(self.data, self.dtype)
            t._vc = self.vc
        t._output_nr = self.output_nr
        if self.requires_grad:
            t._rg = True
            t._grad_fn = node
        return t


def saved_output(t) -> SavedOutput:
    """`SavedOutput(t)` without the class call and its __init__ frame (once per op that
    saves its own output: exp, sigmoid, tanh, ...)."""
    s = _new_object(SavedOutput)
    s.data = t._data
    dt = s.dtype = t._dtype
    vc = s.vc = t._vc
    s.version = vc[0]
    s.output_nr = t._output_nr
    s.requires_grad = dt.category >= _FLOAT
    s.fake = None if t._plain else t
    return s


class SavedAlias(SavedOutput):
    """An input of an in-place op that is the very tensor the op writes (`y.mul_(y)`,
    `y.addcmul_(y, y)`): its value before the write, which the derivative needs, is gone
    (the op is recorded after its write), so backward, or reading the saved value, reports
    the modification as PyTorch does. `version` is the one before the write; the message
    names the tensor's history at that time (`ref`), as PyTorch's does for a saved input.
    Dispatch bumps only a SavedOutput's version after saving (`_bump_after_save`)."""

    __slots__ = ("ref",)

    def __init__(self, t):
        super().__init__(t)
        self.ref = _weakref(t)

    def unpack(self, node):
        """Always a RuntimeError: the op overwrote this input."""
        expected = self.version
        if self.vc[0] == expected:
            # Recorded after a mode ran the op, which bumped the version before the save.
            expected -= 1
        t = self.ref()
        if t is None:  # the tensor is gone: the message names the node that saved it
            t = self.fake._shallow_copy() if self.fake is not None else \
                _tensor_class[0]._make(self.data, self.dtype)
            t._vc = self.vc
            t._output_nr = self.output_nr
            t._rg = True
            t._grad_fn = node
        raise RuntimeError(_modified_message(t, expected))


def _aliases_result(op, hits: int) -> bool:
    """Whether the `hits` saved entries of in-place op `op` that are its result are inputs
    that are the tensor it writes (so SavedAlias), not its own output (so SavedOutput).

    The save reads the output only if the save function reads its first argument (`out`):
    otherwise every such entry is an input. A save that reads it saves it once, so a second
    entry is an input (`y.pow_(y)` saves the base, the exponent and the output), and backward
    must fail either way."""
    if hits > 1:
        return True
    reads = op.save_reads_output
    if reads is None:  # derived once, into the op's entry
        reads = op.save_reads_output = _reads_first_argument(op.save)
    return not reads


def _reads_first_argument(fn) -> bool:
    """Whether function `fn` reads its first parameter (True when that cannot be told: a
    callable without code, or a parameter a nested function uses)."""
    code = getattr(fn, "__code__", None)
    if code is None or not code.co_argcount:
        return True
    name = code.co_varnames[0]
    if name in code.co_cellvars:
        return True
    import dis  # here: the first in-place op that saves its own result pays for it

    for ins in dis.get_instructions(code):
        if ins.opname.startswith("LOAD_"):
            arg = ins.argval
            if arg == name or (arg.__class__ is tuple and name in arg):
                return True
    return False


def save_into(node, saved, result) -> None:
    """Set `node._saved` and `node._versions`: the saved values, with the op's own outputs
    kept as SavedOutput (and an in-place op's inputs that are the tensor it writes as
    SavedAlias), and each saved input tensor's version at saving (-1 for those two, None for
    other values; `_versions` is None when nothing saved is a tensor)."""
    if _active.saved_hooks and _local.saved_hooks:  # hooks in some thread: in this one?
        node._saved, node._versions = _save_hooked(saved, result, node)
        return
    # Most ops save one or two values (an input, the output, a number or a shape): those are
    # written out, which costs a third of the loop below; anything else takes the loop.
    n = len(saved)
    if n == 2 and result.__class__ is not tuple:
        s0, s1 = saved
        cls = s0.__class__
        if cls is _Tensor:
            if s0 is result:
                v0 = -1
            else:
                v0 = (vc := s0._vc)[0]
                if vc.__class__ is not list:
                    check_inference_save(s0)
        elif cls in PLAIN:
            v0 = None
        else:
            node._saved, node._versions = save_loop(saved, result, node)
            return
        cls = s1.__class__
        if cls is _Tensor:
            if s1 is result:
                v1 = -1
            else:
                v1 = (vc := s1._vc)[0]
                if vc.__class__ is not list:
                    check_inference_save(s1)
        elif cls in PLAIN:
            v1 = None
        else:
            node._saved, node._versions = save_loop(saved, result, node)
            return
        if v0 is None:
            if v1 is None:
                node._saved = saved
                node._versions = None
                return
            if v1 == -1:
                # In place, the result may be an input (`y.mul_(y)`): not when the op's save
                # is known to read its output (leaky_relu_), which it then saved once.
                op = node.__class__._op  # (a custom Function's node: None)
                if op is not None and op.inplace and op.save_reads_output is not True:
                    node._saved, node._versions = save_loop(saved, result, node)
                    return
                saved = (s0, saved_output(s1))
        elif v0 == -1 or v1 == -1:
            op = node.__class__._op
            if op is not None and op.inplace and \
                    (v0 == v1 or op.save_reads_output is not True):
                node._saved, node._versions = save_loop(saved, result, node)
                return
            saved = (saved_output(s0) if v0 == -1 else s0,
                     saved_output(s1) if v1 == -1 else s1)
        node._saved = saved
        node._versions = (v0, v1)
        return
    if n == 1 and result.__class__ is not tuple:
        s0 = saved[0]
        cls = s0.__class__
        if cls is _Tensor:
            if s0 is result:
                # The output, even in place (relu_, sigmoid_): no in-place op saves just one
                # input that could be `self` (`y.mul_(y)` saves two entries), so the check
                # for one (`_aliases_result`) stays off this path.
                node._saved = (saved_output(s0),)
                node._versions = OUTPUT_VERSIONS
            else:
                if (vc := s0._vc).__class__ is not list:
                    check_inference_save(s0)
                node._saved = saved
                node._versions = (vc[0],)
            return
        if cls in PLAIN:
            node._saved = saved
            node._versions = None
            return
    node._saved, node._versions = save_loop(saved, result, node)


def save_loop(saved, result, node=None):
    """(saved, versions) as `save_into` sets them, for any number and kind of values (tensor
    subclasses, tuple results). `node` given: an entry that is `result` may be an input of
    an in-place op (`_aliases_result`), kept as a SavedAlias."""
    versions = None
    Tensor = _tensor_class[0]
    hits = 0  # entries that are the result
    i = -1
    for s in saved:
        i += 1
        # None and numbers (most saved entries that are not tensors) skip `isinstance`.
        if s.__class__ in PLAIN or not isinstance(s, Tensor):
            continue
        if versions is None:
            versions = [None] * len(saved)
            saved = list(saved)
        if s is result or (result.__class__ is tuple and _contains(result, s)):
            saved[i] = saved_output(s)
            versions[i] = -1
            hits += 1
        else:
            if (vc := s._vc).__class__ is not list:
                check_inference_save(s)
            versions[i] = vc[0]
    if hits and node is not None:
        # In place, the result's entries may be inputs: not when the op's save is known to
        # read its output (elu_, cumprod_) and saved it once, the test made here.
        # (The class's op: a custom Function's node is its ctx, its attributes the user's.)
        op = node.__class__._op
        if op is not None and op.inplace and result.__class__ is not tuple and \
                (hits > 1 or op.save_reads_output is not True) and \
                _aliases_result(op, hits):
            for k in range(len(versions)):
                if versions[k] == -1:
                    saved[k] = SavedAlias(result)
    return saved, versions


# Values that are never tensors (a saved tuple or list is a shape or a list of numbers).
PLAIN = frozenset({type(None), int, float, bool, str, tuple, list})
OUTPUT_VERSIONS = (-1,)  # the versions of a node that saved only its own output
_Tensor = None  # the Tensor class, given by fusegrad._tensor (`register_tensor_class`)
_set_grad_acc = None  # its `_grad_acc` slot's setter, given with it


def _contains(items, x) -> bool:
    for item in items:
        if item is x:
            return True
    return False


_BACKWARD_SUFFIX = re.compile(r"Backward(\d*)$")


def _short_suffix(match) -> str:
    digits = match.group(1)
    return "" if digits == "0" else digits


def _modified_message(t, expected: int) -> str:
    where = ""
    owner = t.grad_fn
    if owner is not None:
        # PyTorch's short form of the node's name: `MulBackward0` is "Mul", `PowBackward1`
        # "Pow1", a custom Function's `MyFnBackward` "MyFn"; C++ names stay whole.
        short = _BACKWARD_SUFFIX.sub(_short_suffix, owner.name())
        where = f", which is output {t._output_nr} of {short},"
    # (With anomaly detection on, its traceback of the forward op is printed above.)
    hint = ("the backtrace further above shows the operation that failed to compute its "
            "gradient. The variable in question was changed in there or anywhere later. Good "
            "luck!") if _anomaly_state.enabled else (
        "enable anomaly detection to find the operation that failed to compute its gradient, "
        "with torch.autograd.set_detect_anomaly(True, check_nan=False).")
    return (
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: [torch.{t.dtype.legacy}Tensor [{', '.join(map(str, t.shape))}]]{where} is at "
        f"version {t._vc[0]}; expected version {expected} instead. Hint: {hint}"
    )


def _unpack_hooked(node, saved, out: list) -> None:
    """Put each hooked saved value of `saved` into `out`, calling the unpack hooks in the
    order PyTorch's node unpacks them."""
    hooked = [(s.rank, i) for i, s in enumerate(saved) if s.__class__ is SavedHooked]
    for _, i in sorted(hooked):
        out[i] = saved[i].unpack(node)


def unpack_saved(node, saved, versions, arrays: bool = False):
    """The saved values with tensors version-checked and outputs rebuilt (`saved` itself
    when no output is among them); with `arrays`, a plain tensor's saved output unchanged
    since is given as its array, not rebuilt (for a derivative on arrays, which reads saved
    tensors through `saved_array`)."""
    if saved is None:
        raise RuntimeError(_FREED)
    if versions is None:
        return saved
    out = None
    i = -1
    hooked = False
    for v in versions:
        i += 1
        if v is not None:
            s = saved[i]
            if v < 0:
                if out is None:
                    out = list(saved)
                if s.__class__ is SavedHooked:
                    if not hooked:  # every hooked value now, in PyTorch's order
                        hooked = True
                        _unpack_hooked(node, saved, out)
                elif arrays and s.__class__ is SavedOutput and s.fake is None and \
                        s.vc[0] == s.version:
                    out[i] = s.data
                else:
                    out[i] = s.unpack(node)
            elif s._vc[0] != v:
                raise RuntimeError(_modified_message(s, v))
    return saved if out is None else out


class AccumulateGrad(Node):
    """The node that adds incoming gradient into a leaf tensor's `.grad`.

    `_meta` is the leaf's (shape, dtype) for the edges recorded into it, valid while the
    leaf's array is still `_meta_of` (None: not noted). The recorders note it when a leaf
    meets its live accumulator again and read it from then on, instead of making the pair
    on every op; a leaf used once per graph (most parameters) pays nothing for it, and a
    leaf whose `.data` was replaced gets its pair made afresh.
    """

    __slots__ = ("variable", "_meta", "_meta_of")

    def __init__(self, variable):
        super().__init__()
        self._seq = ACCUMULATE_SEQ
        self.variable = variable
        self._meta_of = None

    def release(self) -> None:
        pass

    def name(self) -> str:
        """PyTorch's C++ name of the node."""
        return "torch::autograd::AccumulateGrad"


def new_accumulator(variable) -> AccumulateGrad | None:
    """A new AccumulateGrad for leaf `variable`, which refers to it weakly (the graph holds
    it): `AccumulateGrad(variable)` without the __init__ chain, since a leaf gets a new
    accumulator for every graph it joins (the old one dies with its graph). A view made under
    no_grad of a tensor that requires grad requires grad too but has none (None, as in
    PyTorch: its edges lead nowhere)."""
    ver = getattr(variable, "_view_ver", None)
    if ver is not None and ver < 0 and -ver % 4 == 2:  # (`_recording.view_version`)
        return None
    node = _new_object(AccumulateGrad)
    node.next_functions = ()
    node._seq = ACCUMULATE_SEQ
    node._saved = ()
    node._x = None
    node._out_meta = None
    node.variable = variable
    node._meta_of = None
    _set_grad_acc(variable, _weakref(node))
    return node


class FunctionNode(Node):
    """The node of a registry op: its derivative is the op's `derivative` entry.

    The derivative returns one entry per positional argument of the op (a list for a list of
    tensors); `_pos` picks the entries of the inputs that have edges, and each gradient is
    summed back to its input's shape and cast to its dtype. Each op has its own subclass
    (named as PyTorch names the node), so `_op` is a class attribute.
    """

    __slots__ = ("_versions", "_in_meta", "_pos")
    _op = None
    # Made only by the recorders, which set every slot themselves: `cls()` then runs no
    # Python `__init__` (and is cheaper than `object.__new__(cls)`), once per recorded op.
    __init__ = object.__init__

    def apply(self, grads: list) -> list:
        saved = self._saved
        if self._versions is not None or saved is None:  # no tensors saved: nothing to check
            saved = unpack_saved(self, saved, self._versions)
        raw = self._op.derivative(grads[0] if len(grads) == 1 else grads, *saved)
        out = []
        for (p, sub), (shape, dt) in zip(self._pos, self._in_meta):
            g = raw[p] if sub < 0 else raw[p][sub]
            if g is not None and shape is not None:
                # Identity checks first: the gradient nearly always has its input's shape
                # and dtype already, and then needs neither a sum nor a cast.
                data = g._data
                if (data.shape if data is not None else g.shape) != shape or \
                        g._dtype is not dt:
                    g = fit_grad(g, shape, dt)
            else:
                g = None
            out.append(g)
        return out

    def release(self) -> None:
        if self._versions is not None:  # only saved tensors are freed
            self._saved = None


def fit_grad(g, shape: tuple, dt):
    """Gradient `g` of an input of `shape` and dtype `dt`: a broadcast gradient summed back
    to the input's shape, then cast to its dtype (callers test for a match first)."""
    if (g._data.shape if g._data is not None else g.shape) != shape:
        g = _sum_to(g, shape)
    if g._dtype is not dt:
        g = cast_grad(g, dt)
    return g


def fit_array(g, shape: tuple, dt):
    """`fit_grad` of a gradient array (the entry of a derivative on arrays): an array where
    only a sum to the input's shape is needed, else a tensor."""
    if g.dtype is dt.np and g.ndim >= len(shape):
        return (_reductions or _load_reductions()).sum_to_array(g, shape)
    return fit_grad(_tensor_class[0]._make(g), shape, dt)


def cast_grad(g, dt):
    """A gradient in its input's dtype: a real input of a complex computation gets the real
    part (the conjugate Wirtinger gradient restricted to real directions), as in PyTorch."""
    if g._dtype.category == _COMPLEX and dt.category != _COMPLEX:
        g = g.real
        if g._dtype is dt:
            return g
    return g.to(dt)


def _sum_to(g, shape):
    return (_reductions or _load_reductions()).sum_to_shape(g, shape)


def _load_reductions():
    """ops.reductions (its sums to an input's shape), which sits above the graph's Nodes:
    imported once (an import statement per call cost a microsecond)."""
    global _reductions
    from ..ops import reductions

    _reductions = reductions
    return reductions


_reductions = None  # ops.reductions, once a gradient has been summed to its input's shape


_SAVED_ATTRIBUTES: list = []  # index -> its property, shared by every node class


def _saved_attribute(i: int) -> property:
    """Entry `i` of a node's saved values (tensors version-checked, as for backward). One
    property per index serves every node class (a property per op and name cost import
    time)."""
    while len(_SAVED_ATTRIBUTES) <= i:
        _SAVED_ATTRIBUTES.append(_make_saved_attribute(len(_SAVED_ATTRIBUTES)))
    return _SAVED_ATTRIBUTES[i]


# Python number -> the dtype of PyTorch's wrapped-number tensor for it.
_WRAPPED_DTYPES = {int: "int64", float: "float64", complex: "complex128", bool: "bool_"}


_RAW_SAVED_ATTRIBUTES: list = []  # index -> its `_raw_saved_<name>` property


def _raw_saved_attribute(i: int) -> property:
    """The `_raw_saved_<name>` property of entry `i`: a SavedTensor when the entry is a
    tensor (or None, or freed), else no such attribute (as PyTorch has none for numbers)."""
    while len(_RAW_SAVED_ATTRIBUTES) <= i:
        j = len(_RAW_SAVED_ATTRIBUTES)

        def get(self, j=j):
            saved = self._saved
            versions = self._versions
            # A freed node still has its versions: None marks a value that was no tensor.
            if (versions is None or versions[j] is None) and (saved is None or (
                    saved[j] is not None and not _wrapped_number(saved[j], versions))):
                raise AttributeError(f"'{type(self).__name__}' object has no attribute "
                                     f"'_raw_saved_{self._op.saved_names[j]}'")
            return SavedTensor(self, j)

        _RAW_SAVED_ATTRIBUTES.append(property(get, doc=f"Saved tensor {j}, to hook."))
    return _RAW_SAVED_ATTRIBUTES[i]


_FREED_HOOKS = (
    "Calling register_hooks on a saved tensor after it has been freed. Saved intermediate "
    "values of the graph are freed when you call .backward() or autograd.grad(). Specify "
    "retain_graph=True if you need to backward through the graph a second time or if you "
    "need to access saved variables after calling backward."
)


def _wrapped_number(value, versions) -> bool:
    """Whether saved `value` is a number PyTorch saved as a tensor (`x * 2`'s other)."""
    return versions is not None and value.__class__ in _WRAPPED_DTYPES and \
        all(v is None for v in versions)


def _as_wrapped_tensor(value):
    """PyTorch's 0-d wrapped-number tensor for a saved Python number."""
    import numpy as np

    from .. import _dtype

    dt = getattr(_dtype, _WRAPPED_DTYPES[value.__class__])
    return _tensor_class[0]._make(np.array(value, dt.np), dt)


class SavedTensor:
    """One tensor a node saved for backward (`grad_fn._raw_saved_<name>`): `register_hooks`
    packs it now and has backward read it through the unpack hook, as a
    `saved_tensors_hooks` context would have done when it was saved."""

    __slots__ = ("_node", "_i")

    def __init__(self, node, i: int) -> None:
        self._node = node
        self._i = i

    def _entry(self):
        saved = self._node._saved
        if saved is None:
            raise RuntimeError(_FREED)
        return saved[self._i]

    def register_hooks(self, pack_hook, unpack_hook) -> None:
        """Pack the saved tensor with `pack_hook` now; `unpack_hook` gives it back (with the
        saved tensor's history) whenever backward needs it. One pair per saved tensor."""
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("register_hooks(): incompatible function arguments. The following "
                            "argument types are supported:\n    1. (self: torch._C._autograd."
                            "SavedTensor, arg0: collections.abc.Callable, arg1: "
                            "collections.abc.Callable) -> None")
        node, i = self._node, self._i
        saved = node._saved
        if saved is None:
            raise RuntimeError(_FREED_HOOKS)
        entry = saved[i]
        if entry is None:
            raise RuntimeError("Calling register_hooks on a saved tensor with value None is "
                               "forbidden")
        if entry.__class__ is SavedHooked:
            raise RuntimeError("Calling register_hooks on a saved tensor whose hooks have "
                               "already been set. Hint: only one pair of hooks is allowed at "
                               "a time.")
        is_output = isinstance(entry, SavedOutput)
        # As in PyTorch, the hooks then own the value: no version check from here on.
        t = entry.tensor(node) if is_output else entry
        if not isinstance(t, _tensor_class[0]):
            t = _as_wrapped_tensor(t)
        hooked = SavedHooked(t, pack_hook, unpack_hook, is_output)
        hooked.rank = pack_order(node, len(saved)).index(i)
        versions = list(node._versions or (None,) * len(saved))
        versions[i] = -1
        entries = list(saved)
        entries[i] = hooked
        node._saved = tuple(entries) if saved.__class__ is tuple else entries
        node._versions = tuple(versions)

    @property
    def data(self):
        """The packed value once hooks are set, else the saved tensor."""
        entry = self._entry()
        if entry.__class__ is SavedHooked:
            return entry.packed
        if isinstance(entry, SavedOutput):
            return entry.tensor(self._node)
        return entry if entry is None or isinstance(entry, _tensor_class[0]) else \
            _as_wrapped_tensor(entry)

    @property
    def unpack_hook(self):
        """The unpack hook (None before `register_hooks`)."""
        entry = self._entry()
        return entry.unpack_fn if entry.__class__ is SavedHooked else None

    def unpack(self):
        """The saved tensor, as backward reads it."""
        entry = self._entry()
        if entry is None or isinstance(entry, _tensor_class[0]):
            return entry
        if isinstance(entry, (SavedOutput, SavedHooked)):
            return entry.unpack(self._node)
        return _as_wrapped_tensor(entry)


    def __repr__(self) -> str:
        # PyTorch's class lives in its C++ extension; its repr names that path.
        return f"<torch._C._autograd.SavedTensor object at {id(self):#x}>"


def _make_saved_attribute(i: int) -> property:

    def get(self):
        from .._shapes import Size

        saved = self._saved
        if saved is None:
            raise RuntimeError(_FREED)
        value = saved[i]
        versions = self._versions
        # Only this entry is checked, as PyTorch unpacks only the value asked for: another
        # saved tensor modified in place does not stop reading this one.
        v = None if versions is None else versions[i]
        if v is not None:
            if v < 0:
                value = value.unpack(self)
            elif value._vc[0] != v:
                raise RuntimeError(_modified_message(value, v))
        if value.__class__ is Size:
            return tuple(value)  # a saved size reads as a tuple of ints, as in PyTorch
        if versions is not None and value.__class__ in _WRAPPED_DTYPES and \
                all(v is None for v in versions):
            # A number given for a tensor (`x * 2`'s other): PyTorch saved it as a 0-d
            # tensor (its wrapped number), and reads it back so.
            return _as_wrapped_tensor(value)
        if self._op.saved_names[i] in _INT64_FIELDS:
            return _as_unsigned(value)
        return value

    return property(get, doc=f"Saved value {i} (what PyTorch's node saves under this name).")


# Saved arguments PyTorch's nodes keep as int64 (or lists of them), which its attribute
# getters read back as unsigned 64-bit numbers: a dim of -1 reads 18446744073709551615.
# (Scalars, such as `alpha` or `ord`, read back signed.)
_INT64_FIELDS = frozenset({"dim", "dims", "dim0", "dim1", "diagonal", "start", "end", "step",
                           "ignore_index", "shifts", "index", "offset", "k"})


def _as_unsigned(value):
    """A saved int64 (or a tuple or list of them) as PyTorch's getter reads it."""
    if value.__class__ is int:
        return value + (1 << 64) if value < 0 else value
    if value.__class__ in (tuple, list):
        return value.__class__(_as_unsigned(v) for v in value)
    return value


# Nodes PyTorch writes by hand rather than generating from its derivative formulas: their
# `name()` is the C++ class's qualified name, as AccumulateGrad's and CopySlices' are.
_HAND_WRITTEN = frozenset({"CopyBackwards"})


def _qualified_name(self) -> str:
    """PyTorch's C++ name of the node."""
    return "torch::autograd::" + type(self).__name__


def node_class(name: str, op=None, base: type = FunctionNode) -> type:
    """A new Node subclass called `name` (PyTorch's backward name) for registry op `op`.

    Each named entry of the op's `saved_names` becomes a `_saved_<name>` attribute."""
    attrs = {"__slots__": (), "_op": op}
    if getattr(op, "undefined_grads", False):  # the engine leaves missing gradients None
        attrs["_materialize"] = False
    for i, saved in enumerate(getattr(op, "saved_names", ())):
        if saved:
            attrs["_saved_" + saved] = _saved_attribute(i)
            attrs["_raw_saved_" + saved] = _raw_saved_attribute(i)
    if name in _HAND_WRITTEN:
        attrs["name"] = _qualified_name
    cls = type(name, (base,), attrs)
    cls.__module__ = "fusegrad.autograd.graph"
    return cls


class CopySlices(Node):
    """History of a base whose view was modified in place.

    `fn` is the in-place op's node as if the view stood alone. Backward takes the base's
    gradient, runs `fn` on the part the view covers, and puts `fn`'s gradient for the old
    view values back into that part; the rest of the base's gradient passes through.
    """

    # `_pos`: which of `fn`'s inputs is the view (0 for ops; any for custom Functions).
    __slots__ = ("_fn", "_base_geom", "_view_geom", "_pos")

    def __init__(self):
        super().__init__()
        self._pos = 0

    def apply(self, grads: list) -> list:
        from ..ops.views import strided_transfer_fn

        g = grads[0]
        part = strided_transfer_fn(g, self._base_geom, self._view_geom)
        res = list(self._fn.apply([part]))
        view_grad = res.pop(self._pos)
        out = g - strided_transfer_fn(part, self._view_geom, self._base_geom)
        if view_grad is not None:
            out = out + strided_transfer_fn(view_grad, self._view_geom, self._base_geom)
        return [out, *res]

    def release(self) -> None:
        self._fn.release()

    def name(self) -> str:
        """PyTorch's C++ name of the node."""
        return "torch::autograd::CopySlices"


# ----------------------------------------------------------------------------------------------
# saved_tensors_hooks
# ----------------------------------------------------------------------------------------------


# The open forward AD level's tangent keeper, None while none is open (see
# `use_saved_tangents`).
_saved_tangents = None


def use_saved_tangents(keeper) -> None:
    """Registration by `autograd.forward_ad`, a new `keeper` for each level it opens (None as
    it closes): `keeper.lookup(t)` gives tensor `t`'s tangent or None, `keeper.restore(t,
    tangent)` gives an unpacked saved tensor the tangent the saved one had."""
    global _saved_tangents
    _saved_tangents = keeper


class SavedHooked:
    """A saved tensor packed by a `saved_tensors_hooks` pack hook.

    Unpacking calls the unpack hook and gives its result the saved tensor's autograd identity
    (grad_fn, output number, leaf accumulator). Versions are not checked: the hooks own the
    data.
    """

    # `rank`: where PyTorch's node packs and unpacks this value among the node's others.
    # `tangent`: (the open forward AD level's keeper, the tangent) when the tensor had one
    # at an open level, else None; PyTorch keeps it beside the packed value, whatever the
    # hooks do with the tensor, for the unpacked one to carry until the level closes.
    __slots__ = ("packed", "unpack_fn", "grad_fn", "output_nr", "requires_grad", "acc",
                 "is_output", "rank", "tangent")

    def __init__(self, t, pack, unpack, is_output):
        self.rank = 0
        self.tangent = None
        keeper = _saved_tangents
        if keeper is not None:  # at an open level (an output has its tangent by now)
            tangent = keeper.lookup(t)
            if tangent is not None:
                self.tangent = (keeper, tangent)
        self.unpack_fn = unpack
        self.is_output = is_output
        self.output_nr = t._output_nr
        if is_output:
            self.grad_fn = None
            self.requires_grad = t._dtype.category >= _FLOAT
            self.acc = None
        else:
            self.grad_fn = t._grad_fn
            self.requires_grad = t._rg
            self.acc = t._grad_acc
        # PyTorch runs the pack hook with grad mode off: what it computes (`t.numpy()`, a
        # copy) records no history
        if _local.grad_mode:
            _thread_state.set_grad_enabled(False)
            try:
                self.packed = pack(t)
            finally:
                _thread_state.set_grad_enabled(True)
        else:
            self.packed = pack(t)

    def unpack(self, node):
        """The unpack hook's tensor, carrying the saved tensor's history."""
        Tensor = _tensor_class[0]
        t = self.unpack_fn(self.packed)
        if not isinstance(t, Tensor):
            raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but got "
                            f"result of type {type(t).__name__}")
        out = t._shallow_copy()
        out._base = None
        out._view_ver = None
        out._output_nr = self.output_nr
        out._rg = self.requires_grad
        out._grad_fn = node if self.is_output and self.requires_grad else self.grad_fn
        out._grad_acc = self.acc
        if self.tangent is not None and self.tangent[0] is _saved_tangents:
            self.tangent[0].restore(out, self.tangent[1])  # (its level still open)
        return out


def pack_order(node, n: int) -> list:
    """The positions of a node's `n` saved values in the order PyTorch packs (and unpacks)
    them: its generated nodes keep saved inputs by name in alphabetical order, then outputs
    (`other` before `self`, `mat2` before `self`); a custom Function's in the order given."""
    names = getattr(getattr(type(node), "_op", None), "saved_names", None) or ()
    if len(names) != n:
        return list(range(n))

    def key(i: int) -> tuple:
        name = names[i]
        return (2, "", i) if not name else (name.startswith("result"), name, i)

    return sorted(range(n), key=key)


def _save_hooked(saved, result, node):
    pack, unpack = _local.saved_hooks[-1]
    Tensor = _tensor_class[0]
    versions = None
    out = list(saved)
    for rank, i in enumerate(pack_order(node, len(saved))):
        s = saved[i]
        if isinstance(s, Tensor):
            if versions is None:
                versions = [None] * len(saved)
            is_output = s is result or (result.__class__ is tuple and _contains(result, s))
            if not is_output:
                check_inference_save(s)
            if is_output and s._grad_fn is None and s._dtype.category >= _FLOAT:
                s._rg = True  # about to be marked by dispatch; the pack hook sees it so
            out[i] = SavedHooked(s, pack, unpack, is_output)
            out[i].rank = rank
            versions[i] = -1
    return (out, versions) if versions is not None else (saved, None)


class saved_tensors_hooks:
    """Context manager: tensors saved for backward inside it go through `pack_hook` when
    saved and `unpack_hook` when backward needs them (in the thread that entered it only)."""

    def __init__(self, pack_hook, unpack_hook) -> None:
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        disabled = _local.hooks_disabled
        if disabled:
            raise RuntimeError(disabled[-1])
        self._entry = (self.pack_hook, self.unpack_hook)
        _thread_state.push("saved_hooks", self._entry)
        return self

    def __exit__(self, *exc) -> None:
        _thread_state.pop("saved_hooks", self._entry)


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors are kept on the CPU (where every fusegrad tensor already lives)."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        super().__init__(lambda t: t, lambda t: t)


class disable_saved_tensors_hooks(contextlib.ContextDecorator):
    """Context manager (and decorator): entering `saved_tensors_hooks` inside it raises
    `error_message`; entering it while saved-tensor hooks are active raises it at once."""

    def __init__(self, error_message: str) -> None:
        self.error_message = error_message
        self._prevs = []

    def __enter__(self) -> None:
        if _local.saved_hooks:  # (PyTorch's check: nothing is disabled then)
            raise RuntimeError(self.error_message)
        self._prevs.append(_local.hooks_disabled)
        _local.hooks_disabled = _local.hooks_disabled + (self.error_message,)

    def __exit__(self, *exc) -> None:
        _local.hooks_disabled = self._prevs.pop()


def increment_version(tensor) -> None:
    """Bump the version counter of `tensor` (or of each tensor in a list)."""
    for t in tensor if isinstance(tensor, (list, tuple)) else (tensor,):
        t._vc[0] += 1


def _gradient_edge_class() -> type:
    """`GradientEdge`, made at its first look-up (the module's `__getattr__`): making a
    `NamedTuple` class takes a fifth of a millisecond, which `import fusegrad` need not
    pay. One class for every thread (the first one bound wins)."""
    made = globals().get("GradientEdge")
    if made is not None:
        return made

    class GradientEdge(NamedTuple):
        """Where a tensor's gradient enters the graph: its node (its grad_fn, or a leaf's
        AccumulateGrad) and which of the node's outputs it is; `grad()` and `backward()`
        take one in place of the tensor."""

        node: Any
        output_nr: int
        ownership_token: Any = None

    GradientEdge.__qualname__ = "GradientEdge"
    return globals().setdefault("GradientEdge", GradientEdge)


def __getattr__(name: str):
    """`GradientEdge` on first look-up (`_gradient_edge_class`)."""
    if name == "GradientEdge":
        return _gradient_edge_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names, `GradientEdge` included before it is made."""
    return sorted({*globals(), "GradientEdge"})


def get_gradient_edge(tensor) -> tuple:
    """The `GradientEdge` (a named tuple) of `tensor`, which must require grad."""
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that "
                           "does not require gradients")
    edge = _gradient_edge_class()
    if tensor.grad_fn is not None:
        return edge(tensor.grad_fn, tensor._output_nr)
    return edge(tensor._grad_accumulator(), 0)


def _current_graph_task():
    """(id, {node that runs: ...}, restricted) of the backward pass running in this thread
    (the innermost); hooks that need it run only inside one."""
    tasks = _local.graph_tasks
    if not tasks:
        raise AssertionError("expected this hook to be called inside a backward call")
    return tasks[-1]


def _current_graph_task_id() -> int:
    """The id of the backward pass running in this thread (the innermost), -1 outside one."""
    tasks = _local.graph_tasks
    return tasks[-1][0] if tasks else -1


def _will_engine_execute_node(node) -> bool:
    """Whether the backward pass now running runs `node`."""
    _, runs, restricted = _current_graph_task()
    if restricted and isinstance(node, AccumulateGrad):
        raise RuntimeError("A leaf node was passed to _will_engine_execute_node but we are "
                           "currently running autograd.grad(). This is currently not "
                           "supported.")
    return node in runs


class _MultiHandle(RemovableHandle):
    """The handles of one multi-tensor hook, removed together."""

    __slots__ = ("handles",)

    def __init__(self, handles: tuple) -> None:
        self.handles = handles

    def remove(self) -> None:
        """Unregister the hook from every tensor."""
        for handle in self.handles:
            handle.remove()

    def __getstate__(self) -> tuple:
        return self.handles

    def __setstate__(self, state: tuple) -> None:
        self.handles = state


def _grad_node(t):
    # The node whose gradient for `t` the engine computes: its grad_fn, or the accumulator
    # of a leaf (held here, so that later graphs use the same one).
    if t.requires_grad and t.grad_fn is None:
        return t._grad_accumulator()
    if t.grad_fn is None:
        raise AssertionError("Expected gradient function to be set")
    return t.grad_fn


def register_multi_grad_hook(tensors, fn, *, mode: str = "all") -> RemovableHandle:
    """Call `fn` once per backward pass over several tensors. mode "all": after the
    gradients of all of them that the pass computes, with the list of gradients (None for
    those it does not compute); mode "any": with the first gradient computed among them."""
    import functools
    import threading

    modes = ("all", "any")
    if mode not in modes:
        raise ValueError(f"Expects mode to be one of {modes} but got {mode}")
    lock = threading.Lock()
    if mode == "any":
        fired: dict = {}

        @functools.wraps(fn)
        def first_only(grad) -> None:
            task = _current_graph_task()[0]
            with lock:
                seen = fired.get(task, False)
                fired[task] = True
            if not seen:
                fn(grad)
        return _MultiHandle(tuple(t.register_hook(first_only) for t in tensors
                                  if t.requires_grad))
    nodes = [_grad_node(t) for t in tensors]
    pending: dict = {}  # task id -> [gradients so far, number still expected]

    def collector(i: int):
        def hook(grad) -> None:
            task = _current_graph_task()[0]
            with lock:
                entry = pending.get(task)
                if entry is None:
                    expected = sum(map(_will_engine_execute_node, nodes))
                    entry = pending[task] = [[None] * len(nodes), expected]
                entry[0][i] = grad
                entry[1] -= 1
                done = entry[1] == 0
                if done:
                    del pending[task]
            if done:
                fn(entry[0])
        return hook
    return _MultiHandle(tuple(t.register_hook(collector(i)) for i, t in enumerate(tensors)))


def allow_mutation_on_saved_tensors():
    """Context manager: tensors saved for backward inside it may be changed in place
    (the saved value is copied before the first write); it yields the context's record."""
    from ._mutation_on_saved import allow_mutation_on_saved_tensors as allow

    return allow()
