"""The autograd engine: walk the graph backwards from roots, newest node first.

Iterative throughout (a chain of any length runs at the default recursion limit): one pass
finds the nodes that must run and counts each one's incoming edges; a node becomes ready
when every edge into it has delivered its gradient, and ready nodes run in decreasing
sequence number, accumulators first, as PyTorch's engine does.

A backward runs in the calling thread, with that thread's state (`fusegrad._thread_state`:
dispatch modes, saved-tensor hooks, inference mode) and grad mode set to `create_graph`.
Every node starts from that state, whatever a hook or custom backward before it left
changed, and the caller's own state is back when backward returns or raises (as PyTorch's
engine does around each node it runs).
"""

from __future__ import annotations

import _thread
import heapq
import itertools
from sys import getrefcount as _refcount

import numpy as np

from .. import _dispatch, _thread_state
from .._creation import zeros
from .._shapes import contiguous_strides, dense_order, elem_strides
from .._tensor import Tensor, make_plain
from .._thread_state import local as _local
from .._torch_function import DisableTorchFunction
from ..ops import _parallel
from ..ops._util import strided_copy
from .anomaly_mode import run_node as _anomaly_run_node
from .anomaly_mode import state as _anomaly_state
from .graph import (
    ACCUMULATE_SEQ,
    AccumulateGrad,
    GradientEdge,
    fit_array,
    fit_grad,
    unpack_saved,
)

_Tensor, _make_plain = Tensor, make_plain
# Writes a leaf's `_grad` slot directly: a Parameter's own `__setattr__` (which keeps the
# attributes a program sets on it) cost 0.4 us per gradient.
_set_grad_slot = Tensor.__dict__["_grad"].__set__

_task_ids = itertools.count()
_ndarray = np.ndarray


class _Tied(tuple):
    """A leaf's accumulator on the ready heap, `(node,)`. All accumulators share one
    sequence number, and PyTorch's binary heap leaves equal entries where its sift rules put
    them: this entry compares equal to any other (a heap entry is `(-sequence number, node or
    _Tied)`, compared past the number only on a tie), so that `heapq`, whose sift rules give
    the same order on ties as libstdc++'s `push_heap`/`pop_heap`, runs hooks in PyTorch's
    order. (A tuple: made without a Python `__init__`.)
    """

    __slots__ = ()

    def __eq__(self, other) -> bool:
        return True

    __hash__ = None


def _entry(node) -> tuple:
    """`node`'s entry on the ready heap."""
    s = node._seq
    return (-s, _Tied((node,))) if s == ACCUMULATE_SEQ else (-s, node)


def checkpoint_valid() -> bool:
    """Whether the backward pass now running in this thread may run a nested, accumulating
    backward. A pass that computes the gradients of chosen inputs only (`grad()`,
    `backward(inputs=...)`) must not: a reentrant checkpoint asks this first."""
    passes = _local.restricted_passes
    return not (passes and passes[-1])


def _root_edge(t, i):
    if t._base is not None:
        from .._dispatch import sync_view

        sync_view(t)
    if not t.requires_grad:
        raise RuntimeError(
            f"element {i} of tensors does not require grad and does not have a grad_fn")
    if t._grad_fn is not None:
        return t._grad_fn, t._output_nr
    return t._grad_accumulator(), 0


def _root_grad(t, g, i):
    if g is None:
        data = t._data
        if t.__class__ is _Tensor and data.__class__ is _ndarray and data.size == 1 and \
                data.dtype.kind == "f":
            # A scalar loss (nearly every backward): its ones made directly, not by the
            # dispatched `new_ones` (~6 us).
            return make_plain(np.ones(data.shape, data.dtype), t._dtype)
        if t.numel() != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        if t.dtype.is_complex:
            raise RuntimeError("grad can be implicitly created only for real scalar outputs but "
                               f"got {t.dtype}")
        return t.new_ones(t.shape)
    if not isinstance(g, Tensor):
        raise TypeError(f"gradients can be either Tensors or None, but got {type(g).__name__}")
    if tuple(g.shape) != tuple(t.shape):
        raise RuntimeError(
            f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} and output[{i}] has a "
            f"shape of {t.shape}.")
    return g


def _dependencies(roots, targets):
    """{node: number of edges into it} over the nodes that must run."""
    if targets is not None:
        needed = _needed_nodes(roots, targets)
        deps = dict.fromkeys(needed, 0)
        for node in needed:
            for child, _ in node.next_functions:
                if child in deps:
                    deps[child] += 1
        return deps
    deps = dict.fromkeys(roots, 0)
    stack = list(deps)
    while stack:
        for child, _ in stack.pop().next_functions:
            if child is not None:
                n = deps.get(child)
                if n is None:
                    deps[child] = 1
                    stack.append(child)
                else:
                    deps[child] = n + 1
    return deps


def _needed_nodes(roots, targets):
    """Nodes reachable from `roots`; if `targets` is given, only those that lead to one."""
    seen = set()
    order = []  # post-order: children before parents
    for root in roots:
        if root in seen:
            continue
        seen.add(root)
        stack = [(root, iter(root.next_functions))]
        while stack:
            node, it = stack[-1]
            for child, _ in it:
                if child is not None and child not in seen:
                    seen.add(child)
                    stack.append((child, iter(child.next_functions)))
                    break
            else:
                stack.pop()
                order.append(node)
    if targets is None:
        return seen
    needed = set()
    for node in order:
        if node in targets or any(c in needed for c, _ in node.next_functions if c is not None):
            needed.add(node)
    return needed


def run_backward(tensors, grad_tensors, retain_graph, create_graph, inputs=None,
                 accumulate=True, allow_unused=False):
    """Backpropagate from `tensors`; accumulate into leaves, or return grads of `inputs`.

    Derivatives run outside `__torch_function__`: saved inputs may be tensor subclasses, and
    their gradients are plain computations (PyTorch's derivatives are not Python calls)."""
    with DisableTorchFunction():
        return _run_backward(tensors, grad_tensors, retain_graph, create_graph, inputs,
                             accumulate, allow_unused)


def _run_backward(tensors, grad_tensors, retain_graph, create_graph, inputs, accumulate,
                  allow_unused):
    Tensor, make_plain = _Tensor, _make_plain  # locals: the loop below reads them often

    # No tensors: nothing runs (PyTorch's backward of none returns; its grad finds every
    # input unused).
    root_edges = [_root_edge(t, i) for i, t in enumerate(tensors)]
    roots = [_root_grad(t, g, i) for i, (t, g) in enumerate(zip(tensors, grad_tensors))]

    # node -> [(output_nr, index in inputs)]: a list, since an input may be given twice
    # (each of its places gets the gradient), or two outputs of one node given.
    captures = None
    if inputs is not None:
        captures = {}
        for k, x in enumerate(inputs):
            if isinstance(x, GradientEdge):  # the gradient entering this node's output
                node, nr = x.node, x.output_nr
                entry = captures.get(node)
                if entry is None:
                    captures[node] = [(nr, k)]
                else:
                    entry.append((nr, k))
                continue
            if not isinstance(x, Tensor):
                raise RuntimeError("all inputs have to be Tensors or GradientEdges, but got "
                                   f"{type(x).__name__}")
            if accumulate:
                # As PyTorch: a non-leaf input of backward() retains its grad from now on,
                # and its `.grad` is written by that (once, with its hooks applied).
                x.retain_grad()
            if not x.requires_grad:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
            if x._grad_fn is not None:
                node, nr = x._grad_fn, x._output_nr
            else:
                node, nr = x._grad_accumulator(), 0
            entry = captures.get(node)
            if entry is None:
                captures[node] = [(nr, k)]
            else:
                entry.append((nr, k))
        targets = captures
    else:
        targets = None
    deps = _dependencies([n for n, _ in root_edges], targets)
    needed = deps

    buffers = {}
    # The ready nodes, highest sequence number first: a binary heap pushed and popped in
    # the order PyTorch's engine pushes and pops its own, so that nodes of one number
    # (leaves' accumulators) come off it in PyTorch's order, the order their hooks run in.
    ready = []
    # One root (nearly every pass: a loss) goes to the loop's first step with its gradient,
    # as `handoff` and `hgrad` pass a chain's next node on, with no buffer and no heap.
    single = len(root_edges) == 1 and captures is None
    if not single:
        for (node, nr), g in zip(root_edges, roots):
            _add_to_buffer(buffers, node, nr, g)
        # PyTorch's root node hands each root edge on in turn: a node given twice is ready
        # (pushed) at its last edge.
        last = {node: k for k, (node, _) in enumerate(root_edges)}
        for k, (node, _) in enumerate(root_edges):
            if last[node] == k and node in needed and deps[node] == 0:
                heapq.heappush(ready, _entry(node))

    results = [None] * len(inputs) if inputs is not None else None
    caller = _thread_state.snapshot()
    grad_before, passes_before, tasks_before = \
        _local.grad_mode, _local.restricted_passes, _local.graph_tasks
    _thread_state.set_grad_enabled(create_graph)
    # One entry per pass in progress in this thread, innermost last (`checkpoint_valid`).
    _local.restricted_passes = passes_before + (inputs is not None,)
    _local.graph_tasks = tasks_before + ((next(_task_ids), deps, inputs is not None),)
    state = _local.__dict__  # this thread's live state (the same dict for its lifetime)
    node_state = dict(state)
    restore = _thread_state.restore
    try:
        heappop, heappush = heapq.heappop, heapq.heappush
        # Gradients need no history: add their arrays directly (not while a dispatch mode,
        # such as a tracer, must see every op).
        fast_add = not create_graph and not _dispatch.computing_mode()
        anomaly = _anomaly_state.enabled
        observer = _dispatch.observer()  # a profiler recording this thread, or None
        # A registry node without hooks (nearly every node) runs inline, below, unless the
        # pass captures gradients or a profiler or anomaly mode watches each node.
        inline = captures is None and observer is None and not anomaly
        # Grad mode and the modes read once for the whole pass: while they record nothing and
        # change nothing, a registry op with a derivative on arrays (`OpDef.on_arrays`: mul)
        # runs it on the gradient's array and its saved arrays, with no Tensor made, no
        # dispatch and no grad-mode test per product; its entries stay arrays until a node
        # or a buffer needs a Tensor.
        arrays_ok = fast_add and inline
        # Leaves' first gradients may be taken straight from the arrays (below).
        first_grads = arrays_ok and accumulate

        add = np.add
        asarray = np.asarray
        deps_get = deps.get
        buffers_get = buffers.get
        # The sums this loop made itself (child -> tensor): nothing else holds them, so the
        # next gradient for the same input adds into them in place. Not one of one element:
        # NumPy adds into a one-element array in place at twice the cost of a new one.
        own = {}
        own_get = own.get
        buffers_pop = buffers.pop
        # `handoff`: the node to run next when it became ready in the last step and no node
        # on the heap comes before it (a chain's next node), passed on without the heap.
        # When that step gave it its only gradient, `hgrad` (for output `hnr`) is that
        # gradient, passed on without a buffer, and `grads` reads None below; `hgrad` is an
        # array when an array derivative made it (wrapped when a Tensor is needed).
        handoff = hgrad = None
        hnr = 0
        later = []  # the nodes a step made ready after its handoff
        if single:
            handoff, hnr = root_edges[0]
            hgrad = roots[0]
            if arrays_ok and grad_tensors[0] is None and hgrad.__class__ is Tensor and \
                    hgrad._data.__class__ is _ndarray:  # the ones made above, as an array
                hgrad = hgrad._data
        # Whether the last node ran code that may change this thread's state (hooks, a
        # custom backward, the general path): a registry derivative run inline changes
        # nothing, so after one the state needs no comparing.
        dirty = False
        while True:
            if dirty:
                dirty = False
                if state != node_state:  # a hook or custom backward changed it: undo that
                    restore(node_state)
            if handoff is not None:
                node = handoff
                handoff = None
                grads = buffers_pop(node, None) or [None] if hgrad is None else None
            elif ready:
                node = heappop(ready)[1]
                if node.__class__ is _Tied:
                    node = node[0]
                grads = buffers_pop(node, None) or [None]
            else:
                break
            extras = node._x
            # The class's `_op`: a custom Function's node is also its ctx, whose attributes
            # (`ctx._op` among them) are the user's.
            op = type(node)._op
            edges = node.next_functions
            if op is not None and grads is not None and (
                    grads[0] is None if len(grads) == 1 else _all_none(grads)) and (
                    captures is None or node not in captures):
                # A built-in node that received no gradient at all (a custom Function's
                # backward gave None for an input this node made): PyTorch's gives none either,
                # so nothing reaches its inputs (a leaf's `.grad` stays None); its tensor
                # hooks still see None. Its inputs still count it as done (the loop below
                # passes None on): an input that another path also reaches (`s = f(w)` and
                # `w` both given to one Function) waits for this node, and would never run.
                dirty = True
                if extras is not None:
                    _none_hooks(node)
                _release(node, retain_graph)
                raw = None
                grad_inputs = (None,) * len(edges)
            elif op is not None and extras is None and inline:
                # `FunctionNode.apply` written out: the derivative's entries are fitted to
                # their inputs only for the edges that need them (in the loop below), with
                # no list of results in between, and the saved values released here.
                if grads is None:
                    if hnr == 0 and len(node._out_meta) == 1:
                        g = hgrad
                    elif arrays_ok and hgrad.__class__ is _ndarray and op.on_arrays is not None:
                        # (nll_loss's: its total weight takes no gradient) The list of
                        # arrays goes to the derivative on arrays below.
                        g = _materialize(node, _spread(node, hgrad, hnr), True)
                    else:
                        if hgrad.__class__ is _ndarray:
                            hgrad = make_plain(hgrad)
                        g = _materialize(node, _spread(node, hgrad, hnr))
                    hgrad = None
                elif len(grads) == 1:
                    g = grads[0]
                    if g is None:
                        g = _materialize(node, grads)[0]
                else:
                    g = _materialize(node, grads) if _any_none(grads) else grads
                saved = node._saved
                versions = node._versions
                if saved is None:
                    unpack_saved(node, saved, versions)  # raises: freed by an earlier pass
                # `as_arrays`: a derivative on arrays may run, so saved outputs are unpacked
                # as their arrays (rebuilt as tensors below if it declines).
                as_arrays = arrays_ok and op.on_arrays is not None
                unpacked = False
                if versions is not None:
                    # Saved inputs unchanged since (the usual case) are used as they are;
                    # an output to rebuild, or a version to report, takes `unpack_saved`.
                    # Two entries (a binary op's inputs) are tested without a loop.
                    if len(versions) == 2:
                        v, w = versions
                        if (v is not None and (v < 0 or saved[0]._vc[0] != v)) or \
                                (w is not None and (w < 0 or saved[1]._vc[0] != w)):
                            saved = unpack_saved(node, saved, versions, as_arrays)
                            unpacked = as_arrays
                    else:
                        k = 0
                        for v in versions:
                            if v is not None and (v < 0 or saved[k]._vc[0] != v):
                                saved = unpack_saved(node, saved, versions, as_arrays)
                                unpacked = as_arrays
                                break
                            k += 1
                # `arr`: the derivative ran on arrays and its entries are arrays.
                arr = False
                if g.__class__ is _ndarray:
                    if op.on_arrays is not None:
                        raw = op.on_arrays(g, *saved)
                        arr = raw is not None
                    if not arr:
                        g = make_plain(g)
                elif arrays_ok and op.on_arrays is not None:
                    if g.__class__ is Tensor:
                        raw = op.on_arrays(g._data, *saved)
                        arr = raw is not None
                    elif g.__class__ is list:  # an op of several outputs: one entry each
                        gs = _grad_arrays(g)
                        if gs is not None:
                            raw = op.on_arrays(gs, *saved)
                            arr = raw is not None
                        if not arr:
                            g = [make_plain(x) if x.__class__ is _ndarray else x for x in g]
                if not arr:
                    if unpacked:  # the outputs as tensors, for the recorded derivative
                        saved = unpack_saved(node, node._saved, versions)
                    raw = op.derivative(g, *saved)
                if versions is not None and not retain_graph:
                    node._saved = None
                pos = node._pos
                in_meta = node._in_meta
            else:
                if grads is None and extras is None and first_grads and \
                        hgrad.__class__ is _ndarray and node.__class__ is AccumulateGrad:
                    var = node.variable
                    if var._grad is None and var._hooks is None and not var._post_acc_hooks:
                        # A leaf's first gradient with no hook to run, an array of this pass
                        # that nothing else holds: it becomes `.grad` as it is (PyTorch's
                        # AccumulateGrad steals it), with no tensor made in between and no
                        # state to compare after. (The last node's references dropped
                        # first: `hgrad` is the one this loop keeps.)
                        g = raw = grad_inputs = prev = data = pd = gd = saved = None
                        if _owned_array(hgrad, var._data, 1):
                            # (under `_accumulate`'s lock: a pass in another thread may set
                            # `.grad` between the test above and this write, and its
                            # contribution would be lost)
                            with _ACCUMULATING:
                                if var._grad is None:
                                    _set_grad_slot(var, make_plain(hgrad))
                                    hgrad = None
                            if hgrad is None:
                                continue
                raw = None
                dirty = True
                if grads is None:
                    if hgrad.__class__ is _ndarray:
                        hgrad = make_plain(hgrad)
                    grads = _spread(node, hgrad, hnr)
                    hgrad = None
                is_acc = node.__class__ is AccumulateGrad
                capture = None if captures is None else captures.get(node)
                if capture is not None:
                    # A node that runs on (it leads to another input) gives its gradients
                    # as they arrive, its tensor hooks running later with it; one that
                    # does not gives them after its tensor hooks, and stops (PyTorch's
                    # engine captures so).
                    runs = not is_acc and \
                        any(c in needed for c, _ in edges if c is not None)
                    if runs:
                        _capture(results, capture, grads)
                if extras is not None or is_acc:
                    grads = _call_tensor_hooks(node, grads)
                if capture is not None and not runs:
                    _capture(results, capture, grads)
                    if not is_acc:
                        _release(node, retain_graph)
                        continue
                if is_acc:
                    if extras is not None and extras.pre_hooks:
                        grads = _call_pre_hooks(node, grads)
                    if accumulate and grads[0] is not None:
                        # The loop's own references to the last node's results dropped, so
                        # that `grads` holds the only one this pass keeps to the gradient
                        # (`_accumulate` may then take its array without a copy).
                        g = raw = grad_inputs = prev = data = pd = gd = saved = None
                        own.pop(node, None)
                        if observer is None:
                            _accumulate(node, grads, create_graph)
                        else:
                            observer.__fusegrad_observe_node__(
                                node, grads, lambda n, g: _accumulate(n, g, create_graph))
                    if extras is not None and extras.post_hooks:
                        for hook in list(extras.post_hooks.values()):
                            hook((), tuple(grads))
                    continue
                # Hooks see None for an output that received no gradient (as PyTorch's);
                # the node's own backward gets zeros there.
                if extras is not None and extras.pre_hooks:
                    grads = _call_pre_hooks(node, grads)
                seen = grads
                # Identity tests, not `None in grads`: that compares each tensor with `==`,
                # which runs Tensor.__eq__ for every node.
                if grads[0] is None if len(grads) == 1 else _any_none(grads):
                    grads = _materialize(node, grads)
                if observer is None:
                    grad_inputs = node.apply(grads) if not anomaly else \
                        _anomaly_run_node(node, grads)
                else:  # the profiler times the node
                    grad_inputs = observer.__fusegrad_observe_node__(
                        node, grads, _anomaly_run_node if anomaly else _apply)
                if extras is not None and extras.post_hooks:
                    for hook in list(extras.post_hooks.values()):
                        r = hook(tuple(grad_inputs), tuple(seen))
                        if r is not None:
                            grad_inputs = _checked_values(hook, r, grad_inputs)
                if not retain_graph:
                    node.release()
                if len(grad_inputs) < len(edges):  # edges without a gradient stay waiting
                    edges = edges[:len(grad_inputs)]
            i = -1
            for child, nr in edges:
                i += 1
                if child is None:
                    continue
                n = deps_get(child)
                if n is None:
                    continue
                if raw is None:
                    g = grad_inputs[i]
                else:  # the derivative's entry for input i, in its shape and dtype
                    p, sub = pos[i]
                    g = raw[p] if sub < 0 else raw[p][sub]
                    if g is None:
                        pass
                    elif arr:  # an array: wrapped only when it must be fitted
                        shape, dt = in_meta[i]
                        if g.shape != shape or g.dtype is not dt.np:
                            g = fit_array(g, shape, dt) if shape is not None else None
                    else:
                        shape, dt = in_meta[i]
                        data = g._data
                        if (data.shape if data is not None else g.shape) != shape or \
                                g._dtype is not dt:
                            g = fit_grad(g, shape, dt) if shape is not None else None
                if g is not None:
                    buf = buffers_get(child)
                    if buf is None:
                        if n == 1 and handoff is None:  # its only gradient: runs next
                            handoff = child
                            hgrad = g
                            hnr = nr
                            deps[child] = 0
                            continue
                        out_meta = child._out_meta
                        buf = buffers[child] = [None] * (len(out_meta) if out_meta else 1)
                    prev = buf[nr]
                    if prev is None:
                        if g.__class__ is _ndarray:
                            # An array derivative's entry: a new array that nothing else
                            # holds, so later gradients are added into it (`own` at once);
                            # not a view (`t` and `sum` give views of their gradient).
                            g = make_plain(g)
                            if g._data.size != 1 and g._data.base is None:
                                own[child] = g
                        buf[nr] = g
                    elif fast_add:  # (an array entry implies it, as `arrays_ok` does)
                        pd = prev._data
                        gd = g if g.__class__ is _ndarray else g._data
                        if pd is None or gd is None:
                            buf[nr] = prev + (make_plain(g) if gd is g else g)
                        elif own_get(child) is prev and pd.dtype is gd.dtype and \
                                pd.shape == gd.shape:
                            add(pd, gd, pd)  # `out` positionally: no keyword to parse
                        else:
                            buf[nr] = g = make_plain(asarray(add(pd, gd)), prev._dtype)
                            if pd.size != 1:
                                own[child] = g
                    else:
                        buf[nr] = prev + g
                if n == 1:
                    if handoff is None:
                        handoff = child
                    else:  # pushed after the handoff, below
                        later.append(child)
                deps[child] = n - 1
            if handoff is not None:
                # PyTorch's engine pushes every ready node on its heap, in order, and pops the
                # first: the handoff skips the heap only where that would pop it and leave
                # the heap as pushing the rest alone would (at most one node after it, both
                # before all on the heap: tested against that heap on random graphs).
                # (Entries made inline, as `_entry` makes them.)
                if later:
                    c = later[0]
                    s = c._seq
                    if len(later) == 1 and handoff._seq >= s and (
                            not ready or ready[0][0] > -s):
                        heappush(ready, (-s, c) if s != ACCUMULATE_SEQ else (-s, _Tied((c,))))
                    else:
                        if hgrad is not None:  # its gradient to its buffer
                            if hgrad.__class__ is _ndarray:
                                hgrad = make_plain(hgrad)
                            buffers[handoff] = _spread(handoff, hgrad, hnr)
                            hgrad = None
                        s = handoff._seq
                        heappush(ready, (-s, handoff) if s != ACCUMULATE_SEQ else
                                 (-s, _Tied((handoff,))))
                        handoff = None
                        for c in later:
                            s = c._seq
                            heappush(ready,
                                     (-s, c) if s != ACCUMULATE_SEQ else (-s, _Tied((c,))))
                    later.clear()
                elif ready and ready[0][0] <= -handoff._seq:  # one on the heap runs first
                    _to_heap(ready, buffers, handoff, hgrad, hnr)
                    handoff = hgrad = None
    finally:
        if state == node_state:
            # Nothing ran that changed the state (or the change was undone after its node):
            # the pass's own three entries are put back, without comparing the whole state.
            _thread_state.set_grad_enabled(grad_before)
            _local.restricted_passes = passes_before
            _local.graph_tasks = tasks_before
        else:
            restore(caller)

    if inputs is None or accumulate:  # backward(inputs=...): `.grad` is written already
        return None
    for k, g in enumerate(results):
        if g is None and not allow_unused:
            raise RuntimeError(
                f"The differentiated Tensor at index {k} appears to not have been used in the "
                "graph. Set allow_unused=True if this is the desired behavior.")
    return tuple(results)


def _to_heap(ready, buffers, node, g, nr) -> None:
    """Push `node` on the ready heap, its gradient `g` (for output `nr`, or None where its
    buffer holds them) put in its buffer."""
    if g is not None:
        if g.__class__ is _ndarray:
            g = make_plain(g)
        buffers[node] = _spread(node, g, nr)
    heapq.heappush(ready, _entry(node))


def _capture(results, capture, grads) -> None:
    """Put a captured node's gradients in `results`: `capture` lists (output_nr, index in
    inputs), an output given twice taking the same gradient in both places."""
    for nr, k in capture:
        g = grads[nr] if nr < len(grads) else None
        prev = results[k]
        results[k] = g if prev is None or g is None else prev + g


def _apply(node, grads):
    return node.apply(grads)


def _add_to_buffer(buffers, node, nr, g):
    buf = buffers.get(node)
    if buf is None:
        n = len(node._out_meta) if node._out_meta else 1
        buf = buffers[node] = [None] * n
    buf[nr] = g if buf[nr] is None else buf[nr] + g


def _spread(node, g, nr) -> list:
    """The gradients of `node`'s outputs when `g`, for output `nr`, is the only one."""
    out_meta = node._out_meta
    grads = [None] * (len(out_meta) if out_meta else 1)
    grads[nr] = g
    return grads


def _any_none(grads) -> bool:
    for g in grads:
        if g is None:
            return True
    return False


def _materialize(node, grads, arrays: bool = False):
    """Zero-fill the gradients of outputs that received none (not of an op's
    non-differentiable outputs, which never receive one: nll_loss's total weight); with
    `arrays`, the zeros are NumPy arrays (for a derivative on arrays)."""
    if node._out_meta and getattr(node, "_materialize", True):
        op = type(node)._op
        skip = op.nondiff_outputs if op is not None else ()
        # (`zeros`, a factory, so tracing modes see the zeros)
        grads = list(grads)
        device = False  # (not looked up yet)
        for i, g in enumerate(grads):
            if g is None and node._out_meta[i] is not None and i not in skip:
                shape, dt = node._out_meta[i]
                if arrays:
                    grads[i] = np.zeros(shape, dt.np)
                    continue
                if device is False:  # the meta device when the other gradients are there
                    device = next((x.device for x in grads
                                   if isinstance(x, Tensor) and x.is_meta), None)
                grads[i] = zeros(shape, dtype=dt, device=device)
    return grads


def _grad_arrays(grads: list) -> list | None:
    """The arrays of a list of gradients (arrays, plain tensors or None), or None where one
    is another kind of tensor (its derivative then runs on tensors)."""
    out = []
    for g in grads:
        if g is not None and g.__class__ is not _ndarray:
            if g.__class__ is not Tensor or g._data.__class__ is not _ndarray:
                return None
            g = g._data
        out.append(g)
    return out


def _call_tensor_hooks(node, grads):
    if node.__class__ is AccumulateGrad:
        hooks = node.variable._hooks
        keep = None
    else:
        hooks = node._x.tensor_pre_hooks
        keep = node._x.retains_grad
    if hooks:
        grads = list(grads)
        for nr, fns in hooks.items():
            for fn in list(fns.values()):
                if grads[nr] is None:
                    continue
                r = fn(grads[nr])
                if r is not None:
                    grads[nr] = _checked_value(fn, r, grads[nr])
    if keep:
        for nr, ref in keep.items():
            t = ref()
            if t is not None and nr < len(grads) and grads[nr] is not None:
                _set_grad(t, grads[nr], _local.grad_enabled)
    return grads


def _all_none(grads) -> bool:
    for g in grads:
        if g is not None:
            return False
    return True


def _none_hooks(node) -> None:
    """Run the tensor hooks of a node that received no gradient with None, as PyTorch calls
    them (what they return is not used: the node gives no gradient)."""
    hooks = node._x.tensor_pre_hooks
    if hooks:
        for fns in hooks.values():
            for fn in list(fns.values()):
                fn(None)


def _call_pre_hooks(node, grads):
    for hook in list(node._x.pre_hooks.values()):
        r = hook(tuple(grads))
        if r is not None:
            grads = _checked_values(hook, r, grads)
    return grads


def _hook_name(hook) -> str:
    return getattr(hook, "__name__", type(hook).__name__)


def _checked_values(hook, result, before) -> list:
    """A node hook's returned gradients, checked as PyTorch checks them: a tuple with one
    entry (a tensor of the same size and dtype, or None) per value it replaces."""
    if not isinstance(result, tuple):
        raise TypeError(f"expected tuple, but hook returned '{type(result).__name__}'")
    if len(result) != len(before):
        raise RuntimeError(
            f"hook '{_hook_name(hook)}' has returned an incorrect number of values (got "
            f"{len(result)}, but expected {len(before)})")
    return [_checked_value(hook, r, b) for r, b in zip(result, before)]


def _checked_value(hook, value, before):
    """One gradient a hook returned in place of `before`: a tensor of the same size and
    dtype (or None, where a tuple allows it)."""
    if value is None:
        return None
    from .._tensor import Tensor

    if not isinstance(value, Tensor):
        raise TypeError(f"expected Variable, but hook returned '{type(value).__name__}'")
    if before is not None:
        if value.shape != before.shape:
            raise RuntimeError(f"hook '{_hook_name(hook)}' has changed the size of value")
        if value.dtype != before.dtype:
            raise RuntimeError(
                f"hook '{_hook_name(hook)}' has changed the type of value (was "
                f"{before.type()} got {value.type()})")
    return value


def _release(node, retain_graph):
    if not retain_graph:
        node.release()


# `autograd.forward_ad.accumulated` while a forward AD level is open, else None: a
# gradient added into `.grad` outside dispatch (copied, or added in place) gives `.grad`
# its tangent as PyTorch's AccumulateGrad does (a stolen gradient keeps none, as PyTorch's
# detached one).
forward_accumulated = None


def _set_grad(t, g, create_graph, refs=0):
    """Add `g` into `t.grad`: the first time its array itself when no one else can see it
    (`_owned`, with `refs` the references to `g` the caller's path holds; 0: never), else a
    private copy; in place afterwards. With `create_graph` the copy is recorded, as PyTorch
    records it: a leaf's (`refs` given) as a copy into a new tensor (CopyBackwards), a
    retained or captured gradient's as a clone (CloneBackward0)."""
    if t._grad is None:
        # PyTorch's gradient layout contract: a leaf's new gradient has the leaf's strides
        # when the leaf is laid out densely (channels-last, a transpose), else row-major
        # (`_contract_strides`: None for the row-major case); one taken as it is obeys it.
        if create_graph:
            # (a sparse gradient is cloned, leaf or not: PyTorch's CloneBackward0)
            keep = _contract_strides(t._data) if refs else None
            if not refs or g.is_sparse:
                t._grad = g.clone()
            elif keep is not None:
                t._grad = g.new_empty_strided(g.shape, keep).copy_(g)
            else:
                t._grad = g.new_empty(g.shape).copy_(g)
        elif refs and _owned(t, g, refs):
            _set_grad_slot(t, Tensor._make(g._data, g._dtype))
        elif refs and (keep := _contract_strides(t._data)) is not None and g._plain and \
                g._data.__class__ is np.ndarray:
            data = g._data
            if _refcount(g) == refs + 1 and _obeys_contract(data, t._data):
                # No one else holds `g` (`refs` and getrefcount's references): PyTorch would
                # take it as it is (its size-1 dims' strides too); its array could not be
                # taken (a view), so a copy of its layout.
                keep = elem_strides(data)
            _set_grad_slot(t, Tensor._make(strided_copy(data, keep), g._dtype))
        elif g._plain and (data := g._data).__class__ is np.ndarray and \
                data.size >= _parallel.MIN_CHUNK:  # a large copy: shared between threads
            _set_grad_slot(t, Tensor._make(_parallel.copy(data), g._dtype))
        else:
            _set_grad_slot(t, g._detached_copy())
        if forward_accumulated is not None and not create_graph and \
                t._grad._data is not g._data:  # a copy keeps the tangent (not a stolen one)
            forward_accumulated(t._grad, g)
    elif create_graph or t._grad.requires_grad or not t._grad._plain:
        if t._grad.is_sparse:
            _add_to_sparse_grad(t, g, create_graph)
        else:
            t._grad = t._grad + g
    else:
        if forward_accumulated is not None:  # (before the add: the tangents add too)
            forward_accumulated(t._grad, g)
        dst = t._grad._data
        src = g._data
        if src is None:  # a sparse gradient: its entries added into the strided `.grad`
            from .. import _sparse

            _sparse.add_to_dense(dst, g)
            t._grad._vc[0] += 1
            return
        if src.dtype != dst.dtype:
            src = src.astype(dst.dtype)
        if src.shape == dst.shape and dst.size >= _parallel.MIN_CHUNK and \
                src.flags.c_contiguous and dst.flags.c_contiguous:
            _parallel.elementwise(np.add, dst, dst, src)
        else:
            np.add(dst, src, out=dst, casting="unsafe")
        t._grad._vc[0] += 1


def _add_to_sparse_grad(t, g, create_graph) -> None:
    """Add `g` into leaf `t`'s sparse `.grad` as PyTorch does: a sparse `g` in place
    (the same tensor, its entries as a sparse sum orders them), unless the sum is to be
    recorded; a strided `g` gives a new strided `.grad`, `g + grad`."""
    grad = t._grad
    if not g.is_sparse:
        t._grad = g + grad
    elif create_graph or grad.requires_grad:
        t._grad = grad + g
    else:
        from .. import _sparse

        _sparse.add_(grad, g)


def _contract_strides(leaf) -> tuple | None:
    """The element strides PyTorch's gradient layout contract gives a new gradient of leaf
    array `leaf` where they are not row-major (None): the leaf's own when it is laid out
    densely in another order (channels-last, a transpose) or with other strides on its
    size-1 dims; row-major when it is not dense (a slice with a step)."""
    if leaf.__class__ is not np.ndarray or (leaf.flags.c_contiguous and 1 not in leaf.shape):
        return None
    strides = elem_strides(leaf)
    if strides == contiguous_strides(leaf.shape) or dense_order(leaf.shape, strides) is None:
        return None
    return strides


def _obeys_contract(data: np.ndarray, leaf: np.ndarray) -> bool:
    """Whether gradient array `data` may become leaf `leaf`'s `.grad` as it is under the
    gradient layout contract: the leaf's strides on every dim of size above 1 (and no zero
    stride) when the leaf is dense, C-contiguous otherwise."""
    strides = elem_strides(leaf)
    if dense_order(leaf.shape, strides) is None:
        return data.flags.c_contiguous
    return all(g == s if n != 1 else g != 0
               for n, g, s in zip(data.shape, elem_strides(data), strides))


def _owned(t, g, refs) -> bool:
    """Whether leaf `t`'s first gradient may be `g`'s array itself (PyTorch steals the
    incoming gradient when nothing else holds it): a plain tensor, held only by the caller's
    `refs` references, whose array `_owned_array` allows, held only by `g` (and, for a view
    tensor, its base tensor's array, held only by that base, itself held by `g` alone).
    Anything the user (a hook, a saved tensor, another leaf's grad, a view) or the graph
    still holds adds a reference, and the array is copied as before."""
    if g.__class__ is not Tensor or g._rg or g._grad_fn is not None:
        return False
    # References to `g`: the caller's, this frame's argument and getrefcount's.
    if _refcount(g) != refs + 2:
        return False
    gb = g._base
    data = g._data
    if gb is None:
        return _owned_array(data, t._data, 2)  # (`g._data` and `data`)
    # (`g._base`, `gb` and getrefcount's argument.)
    if gb.__class__ is not Tensor or gb._rg or data.__class__ is not _ndarray or \
            gb._data is not data.base or _refcount(gb) != 3:
        return False
    return _owned_array(data, t._data, 2, 1)


def _owned_array(data, leaf, held: int, base_held: int = 0) -> bool:
    """Whether array `data` may become the gradient of leaf array `leaf` as it is: writable,
    of the leaf's shape and dtype, C-contiguous (the layout a copy would have, for a
    C-contiguous leaf) or obeying the gradient layout contract, held by `held` references
    besides this call's (its caller's path), and owning its memory or the only view of an
    array of the same size held by the view alone (and `base_held` other references: a
    view tensor's base tensor)."""
    if data.__class__ is not _ndarray or leaf.__class__ is not _ndarray or \
            data.shape != leaf.shape or data.dtype != leaf.dtype:
        return False
    # (`flags` holds a reference to its array: not kept in a variable past the count.)
    flags = data.flags
    if not flags.writeable or not (
            flags.c_contiguous and leaf.flags.c_contiguous or _obeys_contract(data, leaf)):
        return False
    flags = None
    # (This frame's argument and getrefcount's.)
    if _refcount(data) != held + 2:
        return False
    base = data.base
    if base is None:
        return data.flags.owndata
    # A view (a reshaped sum, a transposed product): `base` held by the view, this frame's
    # `base` and getrefcount's argument.
    return base.__class__ is _ndarray and base.base is None and base.flags.owndata and \
        base.nbytes == data.nbytes and _refcount(base) == 3 + base_held


_ACCUMULATING = _thread.allocate_lock()


def _accumulate(node, grads, create_graph):
    """Accumulate `grads[0]` into the node's leaf (`grads`, the engine's list of the node's
    gradients, holds the one reference to it the engine keeps) and run the post-accumulate
    hooks."""
    var = node.variable
    hooks = var._post_acc_hooks
    # One accumulation at a time, as PyTorch locks each AccumulateGrad: backward passes in
    # several threads reaching one leaf would otherwise both find `.grad` None, or read it
    # before the other's add, and lose a contribution. (The list's entry and `_set_grad`'s
    # argument are the two references the lock adds none to.)
    with _ACCUMULATING:
        _set_grad(var, grads[0], create_graph, 2)
    if hooks:
        for fn in list(hooks.values()):
            fn(var)
