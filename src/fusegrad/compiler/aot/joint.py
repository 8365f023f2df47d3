"""The joint graph: a function's forward and backward traced as one graph.

The inputs become fake tensors (`primals_1`, ...) that keep their requires_grad; the function
runs under the functionalizing `Tracer` with grad mode on, so autograd records its nodes on
the fakes exactly as in eager mode. Then `autograd.grad(outputs, inputs that need grad,
tangents)` runs the engine under the same tracer: each derivative is made of registry ops, so
the backward is recorded too, reading the tangents (`tangents_1`, ...). The graph returns the
forward's outputs followed by one gradient per input (None where there is none), as
PyTorch's joint graphs do. `trace_inference` traces the forward alone.
"""

from __future__ import annotations

import contextlib
import operator
import threading
from dataclasses import dataclass, field

from ..._autocast import set_aside as _autocast_set_aside
from ..._fake import FakeTensor
from ..._tensor import Tensor
from ..._torch_function import _FAST_CLASSES as _PROTOCOL_FREE_CLASSES
from ...autograd.grad_mode import is_grad_enabled, set_grad_enabled
from ...fx.node import is_impure_call
from ...ops.overloads import OpOverload, aten
from .functionalize import AOTUnsupported
from .make_fx import graph_module
from .traced_float import TracedFloat
from .tracing import Tracer


@dataclass
class OutputInfo:
    """What the runtime must know of one forward output."""

    is_tensor: bool
    requires_grad: bool = False
    alias_of_input: int | None = None  # the output is this input itself
    view_of_input: int | None = None  # the output is a view of this input ...
    view_steps: list = field(default_factory=list)  # ... made by these (op, args, index)
    view_of_output: int | None = None  # the output is a view (view_steps) of an earlier one
    # The output is a view (view_steps) of an intermediate the program did not return: the
    # node returns that intermediate as this extra output, the view is made from it outside.
    view_of_base: int | None = None
    same_as: int | None = None  # the output is the same tensor as an earlier output
    mutated_input: int | None = None  # not the program's: the new value of this input
    eager_view: bool = False  # eager's output is a view (a geometry written in place is not)
    # Eager's output is a view made under no_grad of a tensor requiring grad: it requires
    # grad with no history (a leaf), so it is rebuilt under no_grad, outside the node.
    no_grad_view: bool = False
    # Eager's output has history (a view rebuilt outside the node is made with grad mode
    # on, whatever mode the program leaves).
    has_history: bool = False

    @property
    def takes_tangent(self) -> bool:
        """Whether the backward graph reads a gradient for this output: not when the runtime
        rebuilds it outside the compiled node (an input, a view of one, a repeat), since
        autograd then reaches the inputs through the rebuilt tensor itself."""
        return (self.is_tensor and self.requires_grad and self.same_as is None
                and self.alias_of_input is None and self.view_of_input is None
                and self.view_of_output is None and self.view_of_base is None)


@dataclass
class TraceResult:
    """A traced graph and what the runtime needs to run it."""

    module: object
    outputs: list  # OutputInfo per forward output
    num_fwd_outputs: int
    grad_inputs: list  # indices of the inputs that receive a gradient
    mutated_inputs: list  # indices of the inputs written back at the end of the forward
    structure: type | None = tuple  # the program returned a tuple, a list, or one value (None)
    num_user_outputs: int = 0  # the program's outputs (then the inputs it wrote with history)
    # Per input: the tangents (0-based) its gradient reads; None where it gets no gradient.
    grad_tangents: list = field(default_factory=list)
    grad_mode_after: bool | None = None  # the grad mode the program leaves, if it changed it
    grad_mode_before: bool = True  # the grad mode the program was traced (and is run) in
    # Per tangent: the eager autograd nodes (numbered) a backward through its output frees.
    tangent_nodes: list = field(default_factory=list)

    @property
    def switches_grad(self) -> bool:
        """Whether the graph switches grad mode (it holds `_set_grad_enabled` nodes)."""
        return any(getattr(n.target, "__name__", "") == "_set_grad_enabled"
                   and is_impure_call(n.target)
                   for n in self.module.graph.nodes)


def _frees_saved(node) -> bool:
    """Whether eager autograd node `node` frees saved values after a backward (so that a
    second backward through it raises)."""
    inner = getattr(node, "_fn", None)  # (CopySlices: the node of the op written through)
    return getattr(node, "_versions", None) is not None or \
        (inner is not None and getattr(inner, "_versions", None) is not None)


def _nodes_freed(outs: list) -> list:
    """Per tensor of `outs`: the numbers of the nodes of eager's history of it that keep
    saved values (numbered across all of `outs`, so that shared ones compare equal)."""
    numbers: dict = {}
    held = []  # (the nodes stay alive while their ids number them)
    result = []
    for o in outs:
        found = set()
        stack, seen = [o.grad_fn], set()
        while stack:
            n = stack.pop()
            if n is None or id(n) in seen:
                continue
            seen.add(id(n))
            held.append(n)
            if _frees_saved(n):
                found.add(numbers.setdefault(id(n), len(numbers)))
            stack.extend(child for child, _ in (n.next_functions or ()))
        result.append(frozenset(found))
    return result


def _tangents_read(node) -> frozenset:
    """The indices of the `tangents_N` placeholders `node` is computed from."""
    found, seen, stack = set(), set(), [node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op == "placeholder" and n.target.startswith("tangents_"):
            found.add(int(n.target.rpartition("_")[2]) - 1)
        stack.extend(n._input_nodes)
    return frozenset(found)


def _check_inputs(args) -> None:
    """Refuse tensor subclasses other than those that opted out of `__torch_function__`
    (Parameter and its kin): the trace runs on fake tensors, so a subclass's override (and
    the subclass of its results) would be lost. `_plain` alone does not tell: subclasses
    inherit Tensor's True."""
    for a in args:
        if isinstance(a, Tensor) and (type(a)._plain is False
                                      or type(a) not in _PROTOCOL_FREE_CLASSES):
            raise AOTUnsupported(f"input of type {type(a).__name__} (a tensor subclass)")


def _fake_inputs(tracer: Tracer, args, prefix: str) -> list:
    fakes = []
    for i, a in enumerate(args):
        name = f"{prefix}_{i + 1}" if prefix == "primals" else f"{prefix}{i}_1"
        if isinstance(a, Tensor):
            f = FakeTensor.from_tensor(a)
            tracer.placeholder(f, name)
            fakes.append(f)
        elif type(a) is float:  # a dynamic float of capture: an input of the graph too
            node = tracer.graph.placeholder(name)
            node.meta["val"] = a
            fakes.append(TracedFloat(a, node, tracer))
        else:
            tracer.graph.placeholder(name)
            fakes.append(a)
    return fakes


# Threads tracing a program whose inputs have history (see below), each with its depth, and
# the real `run_backward` while any does (the wrapper in its place refuses only theirs).
_REFUSING: dict = {}
_REFUSING_LOCK = threading.Lock()
_REAL_RUN_BACKWARD: list = []


@contextlib.contextmanager
def _refusing_gradients_past_inputs(args):
    """While the program is traced: refuse its own gradient computations (`autograd.grad`
    inside the graph) where an input has history outside the graph. The traced inputs are
    leaves, so the traced gradients would stop at them, where eager's go on through the
    history that made them (into the program's earlier values, `x` among them). Only this
    thread's gradients are refused: other threads' run as always."""
    from ...autograd import _grad

    if not any(isinstance(a, Tensor) and a.requires_grad and a.grad_fn is not None
               for a in args):
        yield
        return
    me = threading.get_ident()
    with _REFUSING_LOCK:
        if not _REFUSING:
            real = _grad.run_backward
            _REAL_RUN_BACKWARD[:] = [real]

            def refused(*a, **k):
                if threading.get_ident() in _REFUSING:
                    raise AOTUnsupported("a gradient taken inside the graph would stop at "
                                         "an input that has history")
                return real(*a, **k)

            _grad.run_backward = refused
        _REFUSING[me] = _REFUSING.get(me, 0) + 1
    try:
        yield
    finally:
        with _REFUSING_LOCK:
            _REFUSING[me] -= 1
            if not _REFUSING[me]:
                del _REFUSING[me]
            if not _REFUSING:
                _grad.run_backward = _REAL_RUN_BACKWARD.pop()


def _flat_outputs(out) -> tuple:
    """The outputs as a tuple, and how the program returned them (tuple, list, None: one)."""
    if type(out) in (tuple, list):
        return tuple(out), type(out)
    return (out,), None


def _view_steps(tracer: Tracer, t: Tensor, bases: list):
    """(index in `bases`, [(op, args, index), ...]) if `t` is a view chain of one of `bases`
    (the inputs, or earlier outputs), else None."""
    steps = []
    while id(t) in tracer._recipes:
        step = tracer.replay_step(t)
        if step is None:  # made anew for autograd (a decomposed op's result)
            return None
        op, rest, index, parent = step
        # op None: an alias made outside dispatch (`detach`), replayed as `detach()`.
        if op is not None and any(isinstance(a, Tensor) for a in rest):
            return None
        steps.append((op, rest, index))
        t = parent
        for i, b in enumerate(bases):
            if b is t:
                return i, steps[::-1]
    return None


def _intermediate_view(tracer: Tracer, o: Tensor, outs: tuple, fakes: list):
    """(base, steps) if `o` is a view chain, replayable outside the graph, of an intermediate
    (a tensor the graph computed that is neither an input nor an output); else None. Chains
    of `detach` alone are left as they are: they make no autograd view."""
    if id(o) not in tracer._recipes:
        return None
    root = _root(tracer, o)
    if not isinstance(root, FakeTensor) or root._base is not None or \
            root.requires_grad != o.requires_grad or \
            any(root is t for t in outs) or any(root is f for f in fakes):
        return None  # (a view made under no_grad of a tensor with history stays as it is)
    found = _view_steps(tracer, o, [root])
    if found is None or all(op is None for op, _, _ in found[1]):
        return None
    return root, found[1]


def _made_anew(tracer: Tracer, o: Tensor) -> bool:
    """Whether `o` is a decomposed op's result that the decomposition made as a view of its
    own value (group_norm's final `reshape`): eager's kernel makes a new tensor, no view."""
    entry = tracer._replays.get(id(o))
    return entry is not None and entry[1] is o and entry[0] is None


def _no_grad_view(o: Tensor) -> bool:
    """Whether output `o` is, as eager makes it, a view made under no_grad of a tensor that
    requires grad: it requires grad but has no history. (A view of such a view made with
    grad mode on has history, which a rebuild cannot give it: it is not traced.)"""
    if o._base is None or not o.requires_grad:
        return False
    if o._grad_fn is None:
        return True
    if o._view_ver is not None and o._view_ver < 0:
        raise AOTUnsupported("an output is a view, made with grad mode on, of a view made "
                             "under no_grad")
    return False


def _output_infos(tracer: Tracer, outs: tuple, fakes: list, bases: list | None = None) -> list:
    """What the runtime must know of each output. With `bases` (a training graph), a view of
    an intermediate is rebuilt outside the node from that intermediate, appended to `bases`
    (`view_of_base` indexes it there): a view the graph made would come out of the node
    made under no_grad, which autograd refuses to write in place."""
    infos = []
    for k, o in enumerate(outs):
        if not isinstance(o, Tensor):
            infos.append(OutputInfo(False))
            continue
        anew = _made_anew(tracer, o)  # (no view in eager mode, whatever the trace made)
        info = OutputInfo(True, requires_grad=o.requires_grad,
                          eager_view=o._base is not None and not anew,
                          no_grad_view=not anew and _no_grad_view(o),
                          has_history=o._grad_fn is not None)
        for j in range(k):
            if outs[j] is o:
                info.same_as = j
                break
        for i, f in enumerate(fakes):
            if f is o:
                info.alias_of_input = i
        if info.alias_of_input is None and info.same_as is None:
            found = _view_steps(tracer, o, fakes)
            if found is not None:
                info.view_of_input, info.view_steps = found
            elif o._base is not None and any(o._base is f or o._base is f._base
                                             for f in fakes if isinstance(f, Tensor)):
                raise AOTUnsupported("an output is a view of an input made outside dispatch")
            else:
                # A view of another output (earlier or later: `y.t(), y`) is rebuilt from
                # it at run time, so the two share memory as in eager mode (writing one
                # shows in the other). Its nearest ancestor among the outputs is taken, so
                # two outputs are never rebuilt from each other.
                found = _view_steps(tracer, o, [None if j == k else x
                                                for j, x in enumerate(outs)])
                if found is not None:
                    info.view_of_output, info.view_steps = found
                elif bases is not None:
                    found = _intermediate_view(tracer, o, outs, fakes)
                    if found is not None:
                        base, info.view_steps = found
                        index = next((j for j, b in enumerate(bases) if b is base), None)
                        if index is None:
                            index = len(bases)
                            bases.append(base)
                        info.view_of_base = index
        if o.requires_grad and info.view_steps is not None and \
                any(op is None for op, _, _ in info.view_steps):
            # A detached alias given history afterwards (written in place with a tensor
            # requiring grad): a replay of `detach()` would have none.
            raise AOTUnsupported("an output is a detached alias written with history")
        if info.no_grad_view and info.same_as is None and info.view_of_input is None and \
                info.view_of_output is None and info.view_of_base is None:
            # (the node would return it with its history)
            raise AOTUnsupported("an output is a view made under no_grad that is not rebuilt")
        infos.append(info)
    if bases:
        _detached_from_bases(tracer, outs, infos, bases)
    _check_output_aliases(tracer, outs, infos)
    return infos


def _detached_from_bases(tracer: Tracer, outs: tuple, infos: list, bases: list) -> None:
    """Outputs that are detached aliases (`detach()`, or views of one) of an intermediate
    other outputs are rebuilt from (`y[0], y.detach()`) are rebuilt from it too, outside the
    node: all share its memory and version counter as eager's do. (Alone, a detached
    intermediate is returned by the node as it is.)"""
    for o, info in zip(outs, infos):
        if not info.is_tensor or o.requires_grad or id(o) not in tracer._recipes or \
                info.same_as is not None or info.alias_of_input is not None or \
                info.view_of_input is not None or info.view_of_output is not None or \
                info.view_of_base is not None:
            continue
        root = _root(tracer, o)
        index = next((j for j, b in enumerate(bases) if b is root), None)
        if index is None:
            continue
        found = _view_steps(tracer, o, [root])
        # (A detach among the steps: the replay has no history, as `o`; without one, a
        # view made under no_grad, which a replay in grad mode would give history.)
        if found is not None and any(op is None for op, _, _ in found[1]):
            info.view_of_base, info.view_steps = index, found[1]


def _root(tracer: Tracer, t: Tensor) -> Tensor:
    """The tensor `t` is a view or alias (`detach`) of, through the chains the tracer
    recorded, up to one that is none."""
    while id(t) in tracer._recipes:
        t = tracer._recipes[id(t)][3]
    return t


def _check_output_aliases(tracer: Tracer, outs: tuple, infos: list) -> None:
    """Outputs sharing memory must be rebuilt as views of one of them (or be it): any other
    aliasing would come back as separate copies, or as one tensor where eager returns two,
    so it is not traced. Views of one intermediate are rebuilt from it (`view_of_base`)
    when every output sharing it (other than views of outputs) is such a view."""
    groups: dict = {}  # root -> whether each output sharing it is rebuilt from the root
    for o, info in zip(outs, infos):
        if not info.is_tensor or info.same_as is not None or info.alias_of_input is not None \
                or info.view_of_input is not None or info.view_of_output is not None:
            continue  # (a view of another output aliases it as eager's does)
        root = _root(tracer, o)
        groups.setdefault(id(root._base if root._base is not None else root), []).append(
            info.view_of_base is not None)
    for from_base in groups.values():
        if len(from_base) > 1 and not all(from_base):
            raise AOTUnsupported("outputs that are views of one another")


def _writebacks(tracer: Tracer, fakes: list, args, training: bool) -> list:
    """Emit `copy_` into each input whose value the program changed; their indices."""
    mutated = []
    for t, node in tracer.inputs:
        current = tracer.node_of(t)
        if current is not node:
            i = next(k for k, f in enumerate(fakes) if f is t)
            if training and t.grad_fn is not None:  # written with history (grad mode on)
                real = args[i]
                if real.requires_grad and real.grad_fn is None:
                    raise AOTUnsupported("a leaf that requires grad is modified in place")
                if real._base is not None:
                    raise AOTUnsupported("a view that requires grad is modified in place")
            tracer.emit(aten.copy_.default, (node, current))
            mutated.append(i)
    return mutated


def is_impure(node) -> bool:
    """Nodes dead-code elimination keeps: writes, random draws and checks (assertions)."""
    return node.op in ("placeholder", "output") or \
        node.op == "call_function" and is_impure_call(node.target)


def recompute_tagged(node) -> bool:
    """Whether `node` is a forward value of a checkpointed function (tagged by the tracer)
    that the backward recomputes rather than reads from a saved value: anything but random
    draws and writes."""
    if not node.meta.get("recompute") or node.op != "call_function":
        return False
    return node.target is operator.getitem or \
        isinstance(node.target, OpOverload) and not is_impure(node)


def _finish(tracer: Tracer, out_nodes: list, class_name: str):
    tracer.graph.output(tuple(out_nodes))
    tracer.graph.eliminate_dead_code(is_impure)
    return graph_module(tracer, class_name)


def _start(args, decompositions, known_constants, prefix: str):
    _check_inputs(args)
    tracer = Tracer(fake=True, decomposition_table=decompositions, functionalize=True,
                    strict=True, known_constants=known_constants)
    return tracer, _fake_inputs(tracer, args, prefix)


def _check_input_flags(fakes: list, args) -> None:
    """Refuse a program that changes whether an input requires grad without writing it with
    history (`x.detach_()`, `x.requires_grad_()`): the graph cannot change that flag of the
    caller's tensor, which eager changes (an input written with history gets it from the
    compiled node instead)."""
    for f, a in zip(fakes, args):
        if isinstance(f, Tensor) and f.grad_fn is None and f.requires_grad != a.requires_grad:
            raise AOTUnsupported("the program changes whether an input requires grad "
                                 "(detach_, requires_grad_)")


def _forward(tracer: Tracer, fn, fakes: list, args, training: bool, bases=None):
    """Run the program under the tracer: its outputs, how they were returned, what the
    runtime must know of them, their nodes, and the inputs it wrote. `bases`: see
    `_output_infos`."""
    with set_grad_enabled(is_grad_enabled()), tracer, \
            _refusing_gradients_past_inputs(args):  # (the caller's mode comes back after)
        # The program starts in the caller's grad mode; its switches are recorded (and take
        # effect in the trace, so what it computes under no_grad has no gradient); the mode
        # it ends in is kept.
        start = tracer.grad_mode = is_grad_enabled()
        try:
            outs, structure = _flat_outputs(fn(*fakes))
            tracer.sync_grad_mode()
            end = tracer.grad_mode
        finally:
            tracer.grad_mode = None
            if tracer.provenance is not None:
                tracer.provenance.forward_done()
    tracer.grad_mode_after = None if end == start else end
    tracer.grad_mode_before = start
    _check_input_flags(fakes, args)
    tracer.check_no_hooks()
    with tracer:
        # Nodes first: an output made outside dispatch (`y.detach()`) is linked to the
        # tensor it aliases only when its node is looked up, which `_output_infos` reads.
        fw_nodes = [tracer._map_output(o) for o in outs]
    infos = _output_infos(tracer, outs, fakes, bases)
    with tracer:
        mutated = _writebacks(tracer, fakes, args, training)
    return outs, structure, infos, fw_nodes, mutated


def _return_bases(tracer: Tracer, outs: tuple, user_infos: list, fw_nodes: list, bases: list,
                  infos: list | None = None) -> tuple:
    """Make `bases` (intermediates that outputs are views of) extra outputs after `outs`:
    their nodes and infos appended (to `infos`, by default `user_infos`), the user outputs'
    `view_of_base` turned into output indices; the bases as a tuple."""
    infos = user_infos if infos is None else infos
    first_base = len(outs)
    for info in user_infos:
        if info.view_of_base is not None:
            info.view_of_base += first_base
    for b in bases:
        infos.append(OutputInfo(True, requires_grad=b.requires_grad))
        with tracer:
            fw_nodes.append(tracer._map_output(b))
    return tuple(bases)


def _watching_backward(tracer: Tracer):
    """The tracer's provenance watching the autograd nodes of the backward, if it has one."""
    provenance = tracer.provenance
    return contextlib.nullcontext() if provenance is None else provenance.backward()


def _located(provenance, tracer: Tracer):
    """`provenance` (a captured graph's, or None) armed for a trace by `tracer`."""
    return contextlib.nullcontext() if provenance is None else provenance.tracing(tracer)


def trace_joint(fn, args, decompositions=None, known_constants=(),
                provenance=None) -> TraceResult:
    """Trace `fn(*args)` and its backward into one joint graph (see the module docstring).
    `provenance`: the captured graph `fn` runs, whose nodes' stack traces the graph's nodes
    take (provenance.py)."""
    tracer, fakes = _start(args, decompositions, known_constants, "primals")
    with _located(provenance, tracer):
        return _trace_joint(tracer, fakes, fn, args)


def _trace_joint(tracer: Tracer, fakes: list, fn, args) -> TraceResult:
    """`trace_joint`'s work, on the inputs `fakes` made for `args`."""
    grad_inputs = [i for i, f in enumerate(fakes) if isinstance(f, Tensor) and f.requires_grad]
    # Gradients are taken at the inputs as they come in: an input written in place gets new
    # history, so each is reached through a stand-in sharing its AccumulateGrad node.
    accumulators = [fakes[i]._grad_accumulator() for i in grad_inputs]
    targets = [fakes[i]._shallow_copy() for i in grad_inputs]
    bases: list = []
    outs, structure, infos, fw_nodes, mutated = _forward(tracer, fn, fakes, args, True, bases)
    n_user = len(outs)
    for i in mutated:  # an input written with history is an output of the node too
        if fakes[i].grad_fn is not None:  # (not one written under no_grad)
            outs += (fakes[i],)
            infos.append(OutputInfo(True, requires_grad=True, mutated_input=i))
            fw_nodes.append(tracer.node_of(fakes[i]))
    # The intermediates returned views are rebuilt from come last: outputs of the node,
    # through which autograd reaches the graph (their tangents), not the program's.
    outs += _return_bases(tracer, outs, infos[:n_user], fw_nodes, bases, infos)
    diff = [o for o, info in zip(outs, infos) if info.takes_tangent]
    tangents = []
    # (A graph of placeholders alone, returning detached inputs, appends its tangents.)
    first = next((n for n in tracer.graph.nodes if n.op != "placeholder"), None)
    for k, o in enumerate(diff):
        t = FakeTensor._make_fake(tuple(o.shape), o.dtype)
        with tracer.graph.inserting_before(first) if first is not None else \
                contextlib.nullcontext():
            tracer.placeholder(t, f"tangents_{k + 1}")
        tracer.inputs.pop()  # a tangent is never written back
        tangents.append(t)
    grads = [None] * len(fakes)
    freed = _nodes_freed(diff)  # (before the traced backward frees them)
    if diff and grad_inputs:
        from ...autograd import grad as autograd_grad

        # The backward is traced as eager's runs: its nodes replay the forward's casts, and
        # the program's autocast regions (entered while tracing the forward) do not apply.
        # (The provenance watches beneath the tracer which autograd node each op is for.)
        with _watching_backward(tracer), tracer, _autocast_set_aside():
            found = autograd_grad(diff, targets, tangents, allow_unused=True)
            for i, g in zip(grad_inputs, found):
                grads[i] = tracer.node_of(g) if g is not None else None
    del accumulators
    tracer.check_no_hooks()
    module = _finish(tracer, fw_nodes + grads, "GraphModule")
    reads = [None if g is None else _tangents_read(g) for g in grads]
    return TraceResult(module, infos, len(fw_nodes), grad_inputs, mutated, structure, n_user,
                       reads, tracer.grad_mode_after, tracer.grad_mode_before, freed)


def trace_inference(fn, args, decompositions=None, known_constants=(),
                    provenance=None) -> TraceResult:
    """Trace `fn(*args)` alone (no input needs a gradient, or grad mode is off);
    `provenance` as `trace_joint`'s."""
    tracer, fakes = _start(args, decompositions, known_constants, "arg")
    bases: list = []
    with _located(provenance, tracer):
        outs, structure, infos, fw_nodes, mutated = _forward(tracer, fn, fakes, args, False,
                                                             bases)
    # Outputs that are views of one intermediate (`y[0], y[1]`) are rebuilt from it, which
    # the graph returns last, so they share its memory as eager's do.
    _return_bases(tracer, outs, infos, fw_nodes, bases)
    module = _finish(tracer, fw_nodes, "GraphModule")
    return TraceResult(module, infos, len(fw_nodes), [], mutated, structure, len(outs),
                       grad_mode_after=tracer.grad_mode_after,
                       grad_mode_before=tracer.grad_mode_before)
