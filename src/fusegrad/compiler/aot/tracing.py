"""Tracing to registry ops: a dispatch mode that records every op a program runs.

`Tracer` sits on the dispatch mode stack. Each `dispatch.call(op, ...)` reaching it is computed
(for real, or on fake tensors: meta functions only) and recorded as an FX `call_function` node
whose target is the op's `fusegrad.ops.aten` handle. Composite functions (matmul, reshape,
indexing) are not ops, so they leave only the registry ops they call. Autograd records on the
traced tensors as it does in eager mode, so running the engine under the tracer records the
derivatives too (they are registry ops): that is how the joint graph is made.

The tracer keeps, per tensor, the node holding its current value. Factory results become graph
constants (with `record_factories`, make_fx's choice, the factory call the program made, as
torch's make_fx records it: `zeros.default([3], ...)`); a tensor made outside dispatch that
aliases a traced one (`detach`, `.data`) takes that tensor's node. With `functionalize=True`,
in-place ops and writes through views are rewritten as out-of-place ops (see
functionalize.py); with `strict=True` (AOT), anything whose
value the graph would get wrong (random factories, tensors made from NumPy while tracing,
writes the tracer did not see) raises `AOTUnsupported` instead.
"""

from __future__ import annotations

import operator

import numpy as np

from ... import _dispatch, _dtype, _thread_state
from ..._fake import FakeTensor, FakeTensorMode
from ..._recording import no_grad_view_error
from ..._tensor import Tensor, tensors_in
from ..._thread_state import local as _thread_local
from ..._thread_state import set_grad_enabled as _set_mode
from ...autograd.grad_mode import is_grad_enabled, no_grad
from ...fx import Graph, has_side_effect
from ...ops.overloads import aten, overload_of
from ...ops.shape import contiguous_format
from ..codegen.layout import iterator_order, with_eager_layout
from ..markers import RECOMPUTE_REGIONS
from .functionalize import AOTUnsupported, dense_order, functional_variant, scatter_into_base
from .traced_float import TracedFloat, plain


@has_side_effect  # dead-code elimination keeps it
def _set_grad_enabled(mode: bool) -> None:
    """Graph node target: switch grad mode (a `no_grad` / `enable_grad` block's edge)."""
    _set_mode(mode)


# Compiled code computes without autograd whatever the mode (kernels and extern calls of
# NumPy kernels record nothing), and the runtime sets the mode the program leaves after the
# graph ran: in generated code the switch is a no-op.
_set_grad_enabled.lowering = lambda v, mode: None


@has_side_effect  # (its instances, the graph's targets)
class RandomFactory:
    """Graph node target: the draw of a random factory (rand, randn, randint, ...) the
    program called, made each time the graph runs, where the program made it: `fill`
    draws the values from the factory's generator, so a compiled program draws what eager
    draws for one seed. Dead-code elimination keeps it (a draw advances the generator even
    when its values go unused); partitioners never recompute it. In generated code it is a
    Python call between kernels (`lowering`)."""

    __name__ = "random_factory"

    def __init__(self, fill, shape, dtype):
        self.fill = fill
        self.shape = tuple(int(n) for n in shape)
        self.dtype = dtype

    def draw(self) -> np.ndarray:
        """The values, drawn now (a NumPy array of the factory's shape and dtype)."""
        return np.asarray(self.fill(self.dtype.np), self.dtype.np).reshape(self.shape)

    def __call__(self) -> Tensor:
        return Tensor._make(self.draw(), self.dtype)

    def lowering(self, v):
        """The draw as a buffer the wrapper fills by calling `draw` between kernels."""
        return v.call(self.draw, self.shape, self.dtype)

    def __repr__(self) -> str:
        return f"random_factory({list(self.shape)}, dtype={self.dtype!r})"


def _reads_traced_values(fn, depth: int = 0) -> bool:
    """Whether function `fn` (a factory's `fill`) holds, in its closure or the closures of
    the functions it holds, a traced float or a tensor: values of one trace, which a draw
    made when the graph runs must not read."""
    if depth > 4:
        return True  # (deeper than any factory's fill: assume it does)
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        items = value if isinstance(value, (list, tuple)) else (value,)
        for v in items:
            if isinstance(v, (TracedFloat, Tensor)):
                return True
            if getattr(v, "__closure__", None) and _reads_traced_values(v, depth + 1):
                return True
    return False


def _geometry(t) -> tuple:
    return (tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype)


def _constant_views(node) -> list | None:
    """The view nodes from a graph constant (a factory's result) to `node`, outermost last
    ([] for the constant itself), or None when `node` is no constant or view of one. Such a
    value returned as it is would be one tensor for every call, and a caller's write into it
    would change what later calls return."""
    chain = []
    while node.op == "call_function":
        op = getattr(node.target, "op", None)
        if op is None or not op.view or not node.args:
            return None
        chain.append(node)
        node = node.args[0]
    return chain[::-1] if node.op == "get_attr" else None


def _overlaps_itself(t) -> bool:
    """Whether some elements of tensor `t` share memory: a zero stride over more than one
    (an expanded tensor)."""
    return any(st == 0 and n > 1 for n, st in zip(t.shape, t.stride()))


def _memory_order(shape: tuple, strides: tuple) -> tuple:
    """The dims longer than 1 from the outermost in memory to the innermost."""
    return tuple(sorted((d for d, n in enumerate(shape) if int(n) > 1),
                        key=lambda d: (-int(strides[d]), d)))


def _row_or_column_major(t) -> bool:
    """Whether tensor `t` is laid out row-major or column-major without gaps (dims of size
    1 aside), the arrays eager's overlap test judges."""
    dims = [(int(n), int(s)) for n, s in zip(t.shape, t.stride()) if int(n) > 1]
    for order in (dims[::-1], dims):
        span = 1
        for n, s in order:
            if s != span:
                break
            span *= n
        else:
            return True
    return False


def _ranges_meet(a, b) -> bool:
    """Whether the memory ranges of tensors `a` and `b` (over one storage) meet."""
    def extent(t):
        start = int(t.storage_offset())
        return start, start + sum((int(n) - 1) * int(s) for n, s in zip(t.shape, t.stride()))

    if a.numel() == 0 or b.numel() == 0:
        return False
    (a0, a1), (b0, b1) = extent(a), extent(b)
    return a0 <= b1 and b0 <= a1


def _contiguous_results(out):
    """`out` (a tensor, or a tuple or list of results) with each tensor made contiguous."""
    if isinstance(out, Tensor):
        return out if out.is_contiguous() else out.contiguous()
    if isinstance(out, (list, tuple)) and any(
            isinstance(o, Tensor) and not o.is_contiguous() for o in out):
        items = [_contiguous_results(o) if isinstance(o, Tensor) else o for o in out]
        return type(out)(*items) if hasattr(out, "_fields") else type(out)(items)
    return out


def _iterator_laid(out: Tensor, args) -> Tensor:
    """`out`, a decomposition's result for an op whose kernel lays its result out in
    TensorIterator's order (`OpDef.result_order` "iterator"), in that order: the
    decomposition's last op follows NumPy's, which differs where the operands' orders
    conflict (`lerp(x.t(), y, w)`: a copy in the kernel's order, recorded)."""
    shape = tuple(out.shape)
    operands = [t for t in tensors_in(args) if t.dim() <= len(shape) and all(
        n in (1, m) for n, m in zip(t.shape, shape[len(shape) - t.dim():]))]
    strides = iterator_order(out, operands)
    if strides is None or strides == tuple(out.stride()):
        return out
    ranked = sorted(range(len(shape)), key=lambda d: (-int(strides[d]), d))
    back = [0] * len(ranked)
    for i, d in enumerate(ranked):
        back[d] = i
    return out.permute(ranked).contiguous().permute(back)


def _check_view_write(op, args) -> None:
    """Eager's errors for an in-place write into a view, which eager checks before computing
    it (`_dispatch.check_inplace_allowed`) and a mode's path does not: a write into an
    output of a multi-view op (`unbind`, `split`), or into a view made under no_grad, with
    grad mode on. Raised while tracing, they leave the program to eager execution, which
    raises them (a functionalized graph would compute a value). The leaf checks are not
    made: the inputs are leaf fakes whatever the caller's tensors are."""
    t = args[0]
    if not isinstance(t, Tensor) or t._base is None or not is_grad_enabled():
        return
    fn = t._grad_fn
    if fn is not None and fn._op is not None and fn._op.view and \
            fn._out_meta is not None and len(fn._out_meta) > 1:
        _dispatch.check_inplace_allowed(t, True)  # (raises the multi-view error)
    ver = t._view_ver
    if ver is not None and ver < 0 and (
            t._base._rg or (op.differentiable and _dispatch._requires_grad(op, args))):
        raise no_grad_view_error(t, modified=False)


def _check_cast(result, dest) -> None:
    """Eager's error for an in-place op whose result type cannot be written into the
    tensor (`int_tensor.add_(1.5)`): fake tensors compute no values, so the kernel's check
    never runs while tracing; raising here lets the program run eagerly and raise there."""
    if result != dest and not _dtype.can_cast(result, dest):
        raise RuntimeError(f"result type {result.legacy} can't be cast to the desired output "
                           f"type {dest.legacy}")


class Tracer(_dispatch.DispatchMode):
    """Records registry ops into `self.graph` (see the module docstring)."""

    factory_values = True  # factories pass their values (and whether they are random)
    # Record the program's factory calls (`aten.zeros.default`) rather than their values as
    # constants, and its detaching aliases (`detach()`, `.data`) as `aten.detach.default`:
    # make_fx's and export's graphs, which PyTorch's users read; AOT's lowerings take neither.
    record_factories = False

    def __init__(self, *, fake: bool, decomposition_table: dict | None = None,
                 functionalize: bool = False, strict: bool = False, known_constants=()):
        from ...ops.overloads import as_opdef

        self.graph = Graph()
        self.fake = fake
        self.decomp = {}
        for key, fn in (decomposition_table or {}).items():
            op = as_opdef(key)
            if op is not None:
                self.decomp[op] = fn
        self.functional = functionalize
        self.strict = strict
        self.constants: dict[str, Tensor] = {}
        self._known = {id(t): t for t in known_constants}
        self._lifted: dict[int, tuple] = {}  # id(tensor read from outside) -> (it, its input)
        self._entries: dict[int, list] = {}  # id(tensor) -> [tensor, node, version]
        # id(view) -> (view op, its other arguments, output index or None, parent tensor);
        # op None: an alias made outside dispatch (detach).
        self._recipes: dict[int, tuple] = {}
        # id(tensor) -> (step, tensor) for the results of decomposed ops. A view op's: the
        # step (view op, its other arguments, output index or None, parent) an output
        # rebuilt outside the graph replays, the op the program called (`t`, not the
        # `permute` it decomposes to), as eager makes it. A view of the decomposition's own
        # values: step None, as autograd records the op itself on it, so it is no view to
        # rebuild (group_norm's final `reshape`).
        self._replays: dict[int, tuple] = {}
        self._by_vc: dict[int, list] = {}  # id(version counter) -> tensors sharing it
        self._by_data: dict[int, Tensor] = {}  # id(ndarray) -> tensor (real mode)
        self._const_nodes: dict[int, object] = {}
        self._const_roots: set[int] = set()
        self.inputs: list[tuple] = []  # (tensor, placeholder node)
        self._fake_mode = FakeTensorMode()
        # The grad mode the graph has at its end so far; None: switches are not recorded.
        self.grad_mode: bool | None = None
        # Recompute regions (a checkpointed function's ops) open before this trace began.
        self._regions_before = RECOMPUTE_REGIONS.depth
        # Metadata for each recorded call (export sets it: `nn_module_stack`), or None.
        self.node_meta = None
        # Where the traced program's ops come from (a captured graph's nodes), or None: it
        # is told the outermost op being recorded (`original_aten`).
        self.provenance = None

    # ------------------------------------------------------------ tensors and nodes

    def placeholder(self, t: Tensor, name: str):
        """Make `t` a graph input named `name`."""
        node = self.graph.placeholder(name)
        self._set(t, node)
        self.inputs.append((t, node))
        return node

    def _set(self, t: Tensor, node) -> None:
        if "val" not in node.meta:  # the traced value's metadata, as node.meta["val"]
            node.meta["val"] = t if isinstance(t, FakeTensor) else FakeTensor.from_tensor(t)
        e = self._entries.get(id(t))
        if e is not None and e[0] is t:
            e[1], e[2] = node, t._vc[0]
            return
        self._entries[id(t)] = [t, node, t._vc[0]]
        self._by_vc.setdefault(id(t._vc), []).append(t)
        if t._data is not None:
            self._by_data.setdefault(id(t._data), t)

    def node_of(self, t: Tensor):
        """The node holding `t`'s current value."""
        e = self._entries.get(id(t))
        if e is None or e[0] is not t:
            return self._unknown(t)
        if self.functional and e[2] != t._vc[0]:
            return self._refresh(t, e)
        return e[1]

    def _refresh(self, t: Tensor, e: list):
        """`t` was written (through another alias) since its node was made: regenerate it."""
        recipe = self._recipes.get(id(t))
        if recipe is None:
            if self.strict:
                raise AOTUnsupported("a tensor was modified outside dispatch while tracing")
            e[2] = t._vc[0]
            return e[1]
        op, rest, index, parent = recipe
        node = self.node_of(parent)
        if op is not None:
            node = self._view_node(op, parent, node, self._map(rest))
            if index is not None:
                node = self.emit(operator.getitem, (node, index))
        e[1], e[2] = node, t._vc[0]
        return node

    def _unknown(self, t: Tensor):
        """A tensor the trace did not make: an alias of a traced one, or a constant."""
        geometry = _geometry(t)
        # detach() shares the version counter. (A listed tensor's counter may have been
        # swapped for its base's since, and the old one's id reused: check identity.)
        for cand in self._by_vc.get(id(t._vc), ()):
            if cand is not t and cand._vc is t._vc and _geometry(cand) == geometry:
                return self._alias(t, cand, detached=True)
        # A view takes its base's version counter only after the mode returns (dispatch links
        # it), so views are not listed under that counter: look through every traced tensor.
        for cand, _, _ in list(self._entries.values()):
            if cand is not t and cand._vc is t._vc and _geometry(cand) == geometry:
                return self._alias(t, cand, detached=True)
        cand = self._by_data.get(id(t._data)) if t._data is not None else None
        if cand is not None and cand._data is t._data and _geometry(cand) == geometry:
            # (`.data` shares the array; a listed tensor given another array since no longer)
            return self._alias(t, cand, detached=True)
        lifted = self._lifted.get(id(t))
        if lifted is not None and lifted[0] is t:  # read from outside: an input stands for it
            return self._alias(t, lifted[1])
        if self.strict and id(t) not in self._known:
            raise AOTUnsupported("a tensor made outside dispatch (from NumPy data, or random "
                                 "values) is used while tracing")
        return self._constant(t)

    def lift(self, t: Tensor, stand_in: Tensor) -> None:
        """Take tensor `t`, which the program reads from outside its arguments (a global a
        function held by a captured graph reads: lifted.py), as the input `stand_in`."""
        if t.requires_grad:
            # (its history, and the gradient it takes, are outside the trace)
            raise AOTUnsupported("a function of the graph reads a tensor that requires grad")
        self._lifted[id(t)] = (t, stand_in)

    def _alias(self, t: Tensor, cand: Tensor, detached: bool = False):
        node = self.node_of(cand)
        if detached and self.record_factories and not self.functional:
            # (`detach()`, `.data`: recorded as torch's make_fx records them)
            from ...ops.call_handles import handle

            node = self.emit(handle("detach.default"), (node,))
        self._set(t, node)
        if self.functional:
            self._recipes[id(t)] = (None, (), None, cand)
        return node

    def _constant(self, t: Tensor):
        node = self._const_nodes.get(id(t))
        if node is not None:
            return node
        if isinstance(t, FakeTensor):
            raise AOTUnsupported("a fake tensor made outside dispatch has no value to keep")
        name = f"_tensor_constant{len(self.constants)}"
        self.constants[name] = t
        node = self.graph.get_attr(name)
        self._const_nodes[id(t)] = node
        self._const_roots.add(id(t))
        self._set(t, node)
        return node

    def _map(self, a):
        if isinstance(a, Tensor):
            return self.node_of(a)
        if isinstance(a, TracedFloat):
            return a.node
        if a.__class__ is list or a.__class__ is tuple:
            return a.__class__(self._map(x) for x in a)
        return a

    def emit(self, target, args: tuple, kwargs: dict | None = None):
        """Record a call of `target` on `args` (nodes and literals); inside a recompute
        region (`markers.enter_recompute_region`) the node is tagged for the partitioners."""
        node = self.graph.call_function(target, tuple(args), kwargs)
        if RECOMPUTE_REGIONS.depth > self._regions_before:
            node.meta["recompute"] = True
        if self.node_meta is not None:  # (export: the module calls the node is made in)
            node.meta.update(self.node_meta())
        return node

    def output(self, result) -> None:
        """Finish the graph: write mutated inputs back, then return `result`'s nodes."""
        if self.functional:
            for t, node in self.inputs:
                current = self.node_of(t)
                if current is not node:
                    self.emit(aten.copy_.default, (node, current))
        self.graph.output(self._map_output(result))

    def _map_output(self, r):
        if isinstance(r, Tensor):
            node = self.node_of(r)
            views = _constant_views(node)
            if views is not None:  # a new tensor per call, as eager's factory makes
                root = node if not views else views[0].args[0]
                node = self.emit(aten.clone.default, (root,))
                for view in views:  # the same views of the copy: eager's strides
                    node = self.emit(view.target, (node,) + tuple(view.args[1:]))
            return node
        if isinstance(r, TracedFloat):
            return r.node
        if isinstance(r, (list, tuple)):
            return type(r)(self._map_output(x) for x in r)
        if isinstance(r, dict):
            return {k: self._map_output(v) for k, v in r.items()}
        return r

    # ------------------------------------------------------------ the dispatch mode

    def sync_grad_mode(self) -> None:
        """Record a switch of grad mode made since the last op (the program's `no_grad`
        block): the graph then computes each op in the mode the program ran it in."""
        if self.grad_mode is not None and is_grad_enabled() != self.grad_mode:
            self.grad_mode = is_grad_enabled()
            self.emit(_set_grad_enabled, (self.grad_mode,))

    def __fusegrad_dispatch__(self, op, args):
        provenance = self.provenance
        if provenance is None or provenance.original is not None:
            return self._record(op, args)
        provenance.original = overload_of(op)  # (the parts of a decomposition keep it)
        try:
            return self._record(op, args)
        finally:
            provenance.original = None

    def _record(self, op, args):
        """Compute and record registry op `op` on `args` (the dispatch mode's work)."""
        self.sync_grad_mode()
        if op.inplace:
            _check_view_write(op, args)
        fn = self.decomp.get(op)
        if fn is not None and getattr(fn, "keep_whole", None) is not None and \
                fn.keep_whole(args):
            fn = None  # the table keeps the op whole for these arguments (a half dtype)
        if fn is not None:
            # Run the decomposition under this mode: its ops are recorded instead of `op`.
            # Autograd records `op` itself afterwards (as PyTorch, which decomposes below
            # autograd), so the inner calls record nothing (nor their grad mode).
            mode, self.grad_mode = self.grad_mode, None
            # (A non-in-place op's inputs: their version counts before the decomposition.)
            counts = None if op.inplace else _version_counts(args)
            try:
                with self, no_grad():
                    out = fn(*args)
                    if counts:
                        self._restore_versions(counts)
                    if self._decomposition_agrees(op, args, out):
                        # The decomposition's last op decides its result's layout (a
                        # softmax ends in a division, which follows its operands); eager's
                        # kernel of `op` makes a contiguous one, which the program can see.
                        if op.result_order == "contiguous" and not op.view:
                            out = _contiguous_results(out)  # (native_layer_norm's three)
                        elif op.result_order == "iterator" and isinstance(out, Tensor):
                            out = _iterator_laid(out, args)  # (lerp's, where operands conflict)
                        if self.functional:
                            self._note_replay(op, args, out)
                        return out
                    # Otherwise `op` is recorded whole below (the decomposition's nodes
                    # are dead code).
            finally:
                self.grad_mode = mode
        if self.functional and op.inplace:
            return self._functional_inplace(op, args)
        if self.functional and op.name == "native_batch_norm" and args[5] and \
                args[3] is not None:
            return self._functional_batch_norm(op, args)
        mapped = self._map(args)
        out = self._compute(op, args)
        if op.view and isinstance(args[0], Tensor):
            node = self._view_node(op, args[0], mapped[0], mapped[1:])
        else:
            node = self.emit(overload_of(op), mapped)
        self._bind(op, args, out, node)
        return out

    def _restore_versions(self, counts: list) -> None:
        """Put back the version counts a decomposition changed on its op's inputs (`counts`:
        (counter, count before) pairs): an op that is not in place and still writes an input
        (training batch norm's running statistics) does so in its kernel without counting a
        change, as PyTorch's, so a node that saved the input (the op's own, or an earlier
        call's on the same buffers) unpacks it in the backward; the decomposition writes with
        copies, which count. The entries that recorded the new count take the old one."""
        for vc, before in counts:
            now = vc[0]
            if now == before:
                continue
            vc[0] = before
            for t in self._by_vc.get(id(vc), ()):
                e = self._entries.get(id(t))
                if e is not None and e[0] is t and e[2] == now:
                    e[2] = before

    def _decomposition_agrees(self, op, args, out) -> bool:
        """Whether decomposition result `out` has the dtypes and shapes of `op`'s own results
        for `args`. A decomposition written for the common case can promote where the op
        does not (`hardtanh` of integers as a clamp to float bounds, `masked_fill` of an
        integer tensor with 0.5 as a `where`): the graph would compute another dtype and
        other values than eager, so the op is recorded whole instead."""
        if op.inplace or op.view or not self.fake:
            return True
        try:
            fargs = tuple(self._fake_mode._fakeify(a) for a in plain(args))
            ref = op.meta(*fargs)
        except Exception:  # noqa: BLE001 - no meta to compare with: trust the table
            return True
        refs = list(ref) if isinstance(ref, (list, tuple)) else [ref]
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        if len(refs) != len(outs):
            return False
        for r, o in zip(refs, outs):  # (a meta gives specs: a shape and a dtype each)
            if not isinstance(o, Tensor) or getattr(r, "dtype", None) is None:
                continue
            if r.dtype is not o.dtype or tuple(r.shape) != tuple(o.shape):
                return False
        return True

    def _compute(self, op, args):
        args = plain(args)  # a float input computes with its example value
        if self.fake:
            from ..codegen.layout import with_eager_layout

            fakeify = self._fake_mode._fakeify
            fargs = tuple(fakeify(a) for a in args)
            # Metas make results contiguous; eager's elementwise results follow their
            # operands' layout, which the program can see (`contiguous()`, `view`).
            return with_eager_layout(op, fargs, FakeTensor._compute(op, fargs))
        with no_grad():  # autograd records once, after the mode returns (dispatch._finish)
            return _dispatch.call(op, *args)

    def _bind(self, op, args, out, node) -> None:
        if isinstance(out, (tuple, list)):
            for i, o in enumerate(out):
                if isinstance(o, Tensor):
                    self._set(o, self.emit(operator.getitem, (node, i)))
                    if self.functional and op.view:
                        self._recipes[id(o)] = (op, tuple(args[1:]), i, args[0])
        elif isinstance(out, Tensor):
            self._set(out, node)
            if self.functional and op.view and out is not args[0]:
                self._recipes[id(out)] = (op, tuple(args[1:]), None, args[0])

    def _note_replay(self, op, args, out) -> None:
        """Remember how decomposed op `op` made its results (see `_replays`)."""
        outs = out if isinstance(out, (tuple, list)) else (out,)
        inputs = [a for a in args if isinstance(a, Tensor)]
        for i, o in enumerate(outs):
            if not isinstance(o, Tensor) or id(o) not in self._recipes or \
                    any(o is a for a in inputs):
                continue  # (a result that is no view needs no note)
            t = o
            while id(t) in self._recipes and not any(t is a for a in inputs):
                t = self._recipes[id(t)][3]
            if op.view and args and t is args[0]:  # a view of it (not a copy): replay `op`
                index = i if isinstance(out, (tuple, list)) else None
                self._replays[id(o)] = ((op, tuple(args[1:]), index, args[0]), o)
            elif not any(t is a for a in inputs):  # a view of the decomposition's own value
                self._replays[id(o)] = (None, o)

    def replay_step(self, t: Tensor) -> tuple | None:
        """(op, other arguments, output index, parent) making view `t` from its parent: the
        op the program called where it was decomposed; None where `t` is no view for
        autograd (the result of a decomposed op that is not a view op)."""
        entry = self._replays.get(id(t))
        if entry is not None and entry[1] is t:
            return entry[0]
        return self._recipes[id(t)]

    def _chain(self, t: Tensor) -> list:
        """`t`, the tensor it is a view of, and so on up to its base, with current nodes."""
        chain = [(t, self.node_of(t))]
        while id(t) in self._recipes:
            t = self._recipes[id(t)][3]
            chain.append((t, self.node_of(t)))
        return chain

    def _functional_inplace(self, op, args):
        target = args[0]
        if not isinstance(target, Tensor):
            raise AOTUnsupported(f"{op.name} on a non-tensor")
        chain = self._chain(target)  # values before the write
        if not op.metadata_only and self._partly_overlaps(target, chain[-1][0], args[1:]):
            # Eager's kernel refuses to read memory it writes in part; the functional graph
            # would compute a value. Eager runs it and raises its error.
            raise AOTUnsupported(f"{op.name} reads memory it writes in part")
        mapped = self._map(args)
        func = functional_variant(op)
        if func is not None and not op.metadata_only:
            _check_cast(func.meta(*plain(args)).dtype, target.dtype)
        out = self._compute(op, args)
        if any(_overlaps_itself(t) for t, _ in chain):
            # A write into an expanded tensor (or a view of one): its elements share memory,
            # so a write to one changes the others, which the functional graph (one value
            # per element) cannot express. Eager runs it (or raises its error).
            raise AOTUnsupported(f"{op.name} writes a tensor whose elements share memory")
        if op.metadata_only:
            # Only a tensor no other traced tensor aliases changes geometry in the graph:
            # views (which share its version counter once made) would be replayed from
            # the new geometry, and an input's new geometry would have to reach the caller.
            if len(chain) > 1 or any(t is not target and t._vc is target._vc
                                     for t, _, _ in self._entries.values()):
                raise AOTUnsupported(f"{op.name} on a tensor that has views")
            if any(t is target for t, _ in self.inputs):
                raise AOTUnsupported(f"{op.name} changes the geometry of an input")
            if func is None:
                raise AOTUnsupported(f"{op.name} has no out-of-place form")
            self._set(target, self.emit(overload_of(func), mapped))
            # Dispatch bumps the version after the mode returns (`_inplace_metadata` takes
            # `out`'s geometry): the node holds that version's value, not a stale one.
            self._entries[id(target)][2] = target._vc[0] + 1
            return out
        if func is not None:
            new = self.emit(overload_of(func), mapped)
            spec = func.meta(*plain(args))
            if tuple(spec.shape) != tuple(target.shape):
                # Eager refuses a result its tensor cannot hold (operands broadcast to a
                # larger shape); the graph would write it on. Eager raises its error.
                raise AOTUnsupported(f"{op.name} gives a result of another shape")
            if spec.dtype != target.dtype:  # add_(float64) on float32 keeps float32
                new = self.emit(aten._to_copy.default, (new, target.dtype))
            new = self._in_layout_of(target, func, args, new)
        else:  # no out-of-place entry: write into a fresh copy
            new = self.emit(overload_of(op),
                            (self.emit(aten.clone.default, (mapped[0],)),) + mapped[1:])
        if self.strict and id(chain[-1][0]) in self._const_roots:
            raise AOTUnsupported("an in-place write into a tensor constant")
        self._write(chain, new)
        return out

    def _root(self, t: Tensor) -> Tensor:
        """The tensor `t` is a view (or alias) of, followed up to the one owning its memory."""
        while id(t) in self._recipes:
            t = self._recipes[id(t)][3]
        return t

    def _partly_overlaps(self, target: Tensor, root: Tensor, others) -> bool:
        """Eager's partial-overlap test of an in-place op's tensor arguments `others`
        against the written `target` (whose memory is `root`'s): two row- or column-major
        geometries over one memory whose ranges meet without being the same elements."""
        geometry = _geometry(target)
        for a in others:
            if not isinstance(a, Tensor) or a is target or _geometry(a) == geometry or \
                    self._root(a) is not root:
                continue
            if _row_or_column_major(a) and _row_or_column_major(target) and \
                    _ranges_meet(a, target):
                return True
        return False

    def _in_layout_of(self, target: Tensor, func, args, new):
        """`new` (the node of out-of-place `func` on `args`) laid out in the memory order of
        `target`, which the in-place op keeps. The written value becomes the node of
        `target` and, through the inverse views, of its base: another order would make
        later `as_strided` reads of it pick other elements, `view` fail where eager's
        succeeds, and elementwise results take other strides."""
        shape, strides = tuple(target.shape), tuple(target.stride())
        if target.is_contiguous():
            return new
        order = _memory_order(shape, strides)
        try:
            fargs = tuple(self._fake_mode._fakeify(a) for a in plain(args))
            got = with_eager_layout(func, fargs, FakeTensor._compute(func, fargs)).stride()
        except Exception:  # noqa: BLE001 - layout not known: make it the target's
            got = None
        if got is not None and _memory_order(shape, tuple(got)) == order:
            return new
        # Permute to the target's memory order, copy contiguously, permute back.
        ranked = sorted(range(len(shape)), key=lambda d: (-int(strides[d]), d))
        back = [0] * len(ranked)
        for i, d in enumerate(ranked):
            back[d] = i
        node = self.emit(aten.permute.default, (new, ranked))
        node = self.emit(aten.clone.default, (node, contiguous_format))
        return self.emit(aten.permute.default, (node, back))

    def _functional_batch_norm(self, op, args):
        """Training batch norm writes its running statistics in place: record the functional
        op instead, whose last two outputs are the statistics' new values."""
        from ...ops.normalization import native_batch_norm_functional

        chains = [self._chain(args[3]), self._chain(args[4])]  # values before the write
        if self.strict and any(id(c[-1][0]) in self._const_roots for c in chains):
            raise AOTUnsupported("an in-place write into a tensor constant")
        mapped = self._map(args)
        out = self._compute(op, args)
        node = self.emit(overload_of(native_batch_norm_functional), mapped)
        for i, o in enumerate(out):
            self._set(o, self.emit(operator.getitem, (node, i)))
        for i in (3, 4):  # (each chain read after the other's write: both may view one base)
            self._write(self._chain(args[i]), self.emit(operator.getitem, (node, i)))
        return out

    def _write(self, chain: list, value) -> None:
        self._set(chain[0][0], value)
        for k in range(len(chain) - 1):
            child = chain[k][0]
            op, rest, index, parent = self._recipes[id(child)]
            if op is not None:
                value = scatter_into_base(self.emit, aten, op, self._map(rest), index, parent,
                                          chain[k + 1][1], value, self._index_constant)
            self._set(parent, value)

    def _index_constant(self, positions: np.ndarray):
        """A graph constant holding int64 array `positions` (a strided write's targets)."""
        return self._constant(Tensor._make(np.ascontiguousarray(positions, np.int64),
                                           _dtype.int64))

    def _view_node(self, op, parent: Tensor, parent_node, rest: tuple):
        """The node of view `op(parent, *rest)` of `parent`'s value `parent_node`. An
        `as_strided` view addresses storage, which a graph value need not lay out as eager
        does (a written tensor's new value is a fresh array): it is made from the values of
        `parent`, or of the nearest tensor it is a view of, whose elements fill a range of
        the storage holding every element the view reads, copied contiguously in that
        tensor's memory order (the storage's order there), the offset counted from its
        first element. Without one, only an input's own storage (the caller's tensor)
        serves, and anything else is refused."""
        if op.name != "as_strided" or not self.functional:
            return self.emit(overload_of(op), (parent_node,) + tuple(rest))
        size, stride = [int(n) for n in rest[0]], [int(st) for st in rest[1]]
        offset = rest[2] if len(rest) > 2 else None
        first = int(parent.storage_offset()) if offset is None else int(offset)
        last = first + sum((n - 1) * st for n, st in zip(size, stride))
        holder, t = None, parent
        while holder is None:
            order = dense_order(t)
            start = int(t.storage_offset())
            if order is not None and t.numel() > 0 and min(stride, default=0) >= 0 and \
                    start <= first and (0 in size or last < start + t.numel()):
                holder = t
            elif id(t) in self._recipes:
                t = self._recipes[id(t)][3]
            else:
                break
        if holder is None:
            if parent_node.op == "placeholder":
                return self.emit(overload_of(op), (parent_node,) + tuple(rest))
            raise AOTUnsupported("as_strided reads storage beyond the elements of a value "
                                 "the graph computes")
        node = parent_node if holder is parent else self.node_of(holder)
        if order != list(range(holder.dim())):
            node = self.emit(aten.permute.default, (node, order))
        node = self.emit(aten.clone.default, (node, contiguous_format))
        # (A fresh row-major array, as the code generator reads the metadata: its lowering
        # of as_strided then addresses the copy's elements.)
        node.meta["val"] = FakeTensor._make_fake(
            tuple(holder.shape[d] for d in order), holder.dtype)
        # (the holder's memory order is now row-major: strides and offset mean the same)
        return self.emit(overload_of(op), (node, size, stride, first - start))

    def record_call(self, fn, args: tuple) -> None:
        """Record a call of Python function `fn` made for its effect (a tensor assertion):
        run with the graph, kept by dead-code elimination (`fx.has_side_effect`)."""
        self.sync_grad_mode()
        self.emit(fn, self._map(args))

    def note_snapshot(self, t: Tensor, original: Tensor) -> None:
        """Dispatch copied `t` before an in-place write its derivative reads: same value."""
        self._set(original, self.node_of(t))

    def make_factory_tensor(self, shape, dtype, requires_grad: bool, fill=None,
                            random: bool = False):
        """A factory's result: its values become a graph constant; a random factory's
        (`random`) are drawn by a node each time the graph runs (`RandomFactory`)."""
        self.sync_grad_mode()
        if self.record_factories:
            from ...ops.call_handles import traced_call

            call = traced_call()
            if call is not None:
                return self._factory_call(call, shape, dtype, requires_grad, fill)
        if random:
            if _reads_traced_values(fill):
                # (`normal(p, 1.0, size)` of a float input: the draw would keep its traced
                # stand-in, whose value a run cannot read)
                raise AOTUnsupported("a random factory is given a float input or a tensor")
            draw = RandomFactory(fill, shape, dtype)
            node = self.emit(draw, ())
            # (A real trace draws now, as eager would; a fake one draws nothing.)
            t = FakeTensor._make_fake(shape, dtype) if self.fake else draw()
            self._set(t, node)
            if requires_grad:
                t._rg = True
            return t
        real = Tensor._make(np.asarray(fill(dtype.np)), dtype)
        node = self._constant(real)
        if not self.functional:  # the graph may write into it: each run gets its own copy
            node = self.emit(aten.clone.default, (node,))
        if self.fake:
            t = FakeTensor._make_fake(shape, dtype)
        else:
            t = Tensor._make(real._data.copy(), dtype)
        self._set(t, node)
        if requires_grad:
            t._rg = True
        return t

    def record_whole(self, target, args: tuple, kwargs: dict, run):
        """Record one call of `target` (a `call_handles` handle: a layer export keeps whole,
        `aten.linear.default`) on `args` and `kwargs`, whose result `run()` computes: `run`
        runs with this tracer off the mode stack, on fakes, so the registry ops the layer is
        made of are not recorded (a buffer it writes, batch norm's statistics, is written by
        the call when the graph runs)."""
        self.sync_grad_mode()
        node = self.emit(target, tuple(self._map(a) for a in args),
                         {k: self._map(v) for k, v in kwargs.items()} or None)
        saved = _thread_local.modes
        _thread_state.pop("modes", self)
        try:
            with self._fake_mode:
                out = run()
        finally:
            _thread_state.push("modes", self)
            _thread_local.modes = saved  # (in its place on the stack again)
        if isinstance(out, Tensor):  # (one the layer returns as it got it too, as torch's)
            self._set(out, node)
        return out

    def _factory_call(self, call: tuple, shape, dtype, requires_grad: bool, fill):
        """A factory's result recorded as the call `call` (`ops.call_handles.traced_call`) the
        program made: a literal's values as a constant copied by `lift_fresh_copy`."""
        from ...ops.overloads import _overload_of_handle

        name, args, kwargs = call
        handle = _overload_of_handle(*name.split("."))
        if args is None:  # a literal
            real = Tensor._make(np.asarray(fill(dtype.np)), dtype)
            node = self.emit(handle, (self._constant(real),))
        else:
            node = self.emit(handle, tuple(self._map(a) for a in args), kwargs)
        if self.fake:
            t = FakeTensor._make_fake(shape, dtype)
        else:  # (a random factory draws now, as eager would)
            t = Tensor._make(np.asarray(fill(dtype.np)).copy(), dtype)
        self._set(t, node)
        if requires_grad:
            t._rg = True
        return t

    def check_no_hooks(self) -> None:
        """Hooks on traced tensors would run at trace time only: AOT cannot keep them."""
        for t, _, _ in self._entries.values():
            fn = t._grad_fn
            hooks = t._hooks
            if (hooks and any(hooks.values())) or t._retains or t._post_acc_hooks:
                raise AOTUnsupported("a hook (or retain_grad) on a tensor inside the graph")
            extras = fn._x if fn is not None else None
            if extras is not None and (extras.pre_hooks or extras.post_hooks
                                       or _untraceable(extras.tensor_pre_hooks)
                                       or extras.retains_grad):
                raise AOTUnsupported("a hook on an autograd node inside the graph")


def _version_counts(args) -> list:
    """(version counter, its count) of each tensor among `args`, one per counter (inference
    tensors count none)."""
    counts, seen = [], set()
    for a in args:
        if isinstance(a, Tensor) and a._vc.__class__ is list and id(a._vc) not in seen:
            seen.add(id(a._vc))
            counts.append((a._vc, a._vc[0]))
    return counts


def _untraceable(tensor_pre_hooks: dict) -> bool:
    """Whether a tensor hook among `tensor_pre_hooks` is one capture did not speculate: a
    speculated one (`capture.hooks`) has no effect outside itself, so running it while the
    backward is traced records it into the backward graph."""
    from ..capture.hooks import TRACEABLE_HOOKS

    return any(h not in TRACEABLE_HOOKS for hooks in tensor_pre_hooks.values()
               for h in hooks.values())
