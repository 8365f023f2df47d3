"""Running AOT-compiled graphs: one autograd node around a forward/backward graph pair.

`CompiledFunction` is an `autograd.Function` made per compiled graph pair: its forward runs
the forward graph (outputs, then the values saved for backward), its backward runs the
backward graph on the saved values and the incoming gradients; the backward graph is compiled
on its first use. Its node prints as `CompiledFunctionBackward`, as PyTorch's. Outputs the
program returned as an input itself, a view of an input, or twice, are rebuilt outside the
node from the real inputs, so they alias as in eager mode; a view of an intermediate is
rebuilt from that intermediate, which the node returns as an extra output.
"""

from __future__ import annotations

from ..._autocast import set_aside as _autocast_set_aside
from ..._tensor import Tensor
from ..._thread_state import set_grad_enabled
from ...autograd import graph as _graph
from ...autograd.function import BackwardCFunction, Function
from ...autograd.grad_mode import enable_grad, is_grad_enabled, no_grad
from ...ops._util import contiguous_strides
from .joint import TraceResult


def example_values(gm) -> list:
    """The traced (fake) values of `gm`'s placeholders (what its compiler is shown)."""
    return [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]


def _zeros_like_output(info_shape, dtype):
    from ..._creation import zeros

    return zeros(info_shape, dtype=dtype)


def make_compiled_function(fw, bw_module, bw_compiler, trace: TraceResult):
    """The autograd Function running compiled forward `fw` and backward `bw_module`."""
    infos = trace.outputs
    # Outputs that are inputs, views or aliases of inputs or of earlier outputs, or repeats
    # are rebuilt outside the node (as eager makes them): the graph's value for such a slot
    # may be the very tensor of another output (`y, y.detach()`), which the node must not
    # return twice, nor mark non-differentiable for the alias's sake.
    returned = [k for k, info in enumerate(infos)
                if info.same_as is None and info.alias_of_input is None
                and info.view_of_input is None and info.view_of_output is None
                and info.view_of_base is None]
    diff = [k for k in returned if infos[k].takes_tangent]
    written = [infos[k].mutated_input for k in returned if infos[k].mutated_input is not None]
    num_out = trace.num_fwd_outputs
    node_sets = trace.tangent_nodes
    state = {"bw": None}
    switches = trace.switches_grad

    class CompiledFunction(Function):
        """A forward graph and its backward graph as one autograd node."""

        @staticmethod
        def forward(ctx, *args):
            """Run the forward graph; keep what it saves for the backward graph."""
            # The graph's grad-mode switches would make its ops record history on the inputs
            # (this node records it): it computes on aliases without history.
            result = fw(*[a.detach() if isinstance(a, Tensor) else a for a in args]) \
                if switches else fw(*args)
            # An input the graph wrote (and that has history) is returned as itself, marked
            # dirty: it takes this node as its grad_fn, as an in-place op would give it.
            # A view the graph made of its own value is a tensor of its own, as eager's
            # output is (see `_unview`), whether or not it requires grad: a view of it made
            # later is then a plain view, which eager lets the program write in place.
            outs = [args[infos[k].mutated_input] if infos[k].mutated_input is not None
                    else _unview(result[k], args)
                    if infos[k].requires_grad or (infos[k].is_tensor and not infos[k].eager_view)
                    else result[k]
                    for k in returned]
            ctx.mark_dirty(*[args[i] for i in written])
            # What earlier backwards (without retain_graph) went through: the outputs that
            # took a gradient, and eager's nodes of theirs that freed their saved values.
            ctx._used, ctx._freed, ctx._pending = set(), set(), ((), ())
            saved = result[num_out:]
            # Float inputs the backward reads (a dynamic float) are kept beside the tensors.
            ctx._floats = {i: v for i, v in enumerate(saved) if not isinstance(v, Tensor)}
            ctx.save_for_backward(*[v for v in saved if isinstance(v, Tensor)])
            # Gradients of unused outputs arrive as None: the backward tells them apart.
            ctx.set_materialize_grads(False)
            ctx._shapes = [(tuple(result[k].shape), result[k].dtype) for k in diff]
            ctx.mark_non_differentiable(*[o for k, o in zip(returned, outs)
                                          if infos[k].is_tensor and not infos[k].requires_grad])
            return tuple(outs)

        @staticmethod
        def backward(ctx, *grads):
            """Run the backward graph (compiled now if this is its first use)."""
            if all(g is None for g in grads) and trace.grad_tangents:
                # No gradient reached the node (an input the program wrote with history,
                # then used by a later call, passes None on from that call's node): eager's
                # nodes pass nothing on either, nor read what they saved, which an earlier
                # backward may have freed.
                return (None,) * len(trace.grad_tangents)
            if state["bw"] is None:  # compiled on first use, as PyTorch's
                state["bw"] = bw_compiler(bw_module, example_values(bw_module))
            tangents = []
            missing = set()
            for j, (k, (shape, dtype)) in enumerate(zip(diff, ctx._shapes)):
                pos = returned.index(k)
                g = grads[pos] if pos < len(grads) else None  # none arrived at all: [None]
                if g is None:
                    missing.add(j)
                    g = _zeros_like_output(shape, dtype)
                elif tuple(g.stride()) != contiguous_strides(tuple(g.shape)):
                    g = g.contiguous()
                tangents.append(g)
            present = [j for j in range(len(diff)) if j not in missing]
            nodes = set().union(*(node_sets[j] for j in present if j < len(node_sets)))
            if nodes & ctx._freed:
                # Eager's history of these outputs shares a node an earlier backward freed.
                raise RuntimeError(_graph._FREED)
            ctx._pending = (present, nodes)
            saved = list(ctx.saved_tensors)
            for i, v in sorted(ctx._floats.items()):
                saved.insert(i, v)
            with _autocast_set_aside():  # (its casts were traced into it: see AOTRunner)
                if is_grad_enabled() and any(isinstance(v, Tensor) and v.requires_grad
                                             for v in (*saved, *tangents)):
                    # create_graph: the gradients record a node whose own backward refuses
                    # (the graph was traced without second-order terms), PyTorch's behaviour.
                    out = list(CompiledFunctionBackward.apply(state["bw"], *saved, *tangents))
                else:
                    out = list(state["bw"](*saved, *tangents))
            # An input reached only through outputs nobody used gets no gradient (None), as
            # in eager mode, rather than the zeros computed from materialised tangents.
            for i, reads in enumerate(trace.grad_tangents):
                if reads and reads <= missing:
                    out[i] = None
            return tuple(out)

    def release(node) -> None:
        # One node stands for the histories of all its outputs, which eager frees one
        # backward at a time (a backward through the loss inside the program, then one
        # through another output): its saved values stay until no output has a history
        # eager could still go through, one whose nodes that keep saved values are not all
        # freed (or, without such nodes, that took no gradient yet).
        if not hasattr(node, "_used"):  # (its forward never ran to the end)
            BackwardCFunction.release(node)
            return
        used, nodes = node._pending
        node._pending = ((), ())
        node._used.update(used)
        node._freed.update(nodes)
        if node._saved is not None and not node._saved:
            return  # (nothing to free: any later backward can run, as eager's can)
        if all(node_sets[j] <= node._freed if j < len(node_sets) and node_sets[j]
               else j in node._used for j in range(len(diff))):
            BackwardCFunction.release(node)

    CompiledFunction._backward_cls.release = release
    return CompiledFunction, returned


def _unview(t, args):
    """`t`, a differentiable output, as a tensor of its own when the graph made it as a view
    of one of its own intermediates (a functionalized write leaves `view(clone(...))`): such
    a view was made under the node's no_grad, and autograd refuses to write it in place. Its
    memory and version counter stay shared: only the graph held its base. A view of an input
    stays a view (it is the input's memory)."""
    if not isinstance(t, Tensor) or t._base is None:
        return t
    base = t._base
    if any(isinstance(a, Tensor) and (a is base or a._base is base) for a in args):
        return t
    own = t._shallow_copy()
    own._base = None
    own._view_ver = None  # (not a view any more: views of it are plain ones)
    return own


class CompiledFunctionBackward(Function):
    """A compiled backward graph run under create_graph: its results have history (they
    require grad as PyTorch's do; their node prints as PyTorch's,
    `CompiledFunctionBackwardBackward`), and differentiating them again raises."""

    @staticmethod
    def forward(ctx, bw, *args):
        """The backward graph's gradients."""
        return tuple(bw(*args))

    @staticmethod
    def backward(ctx, *grads):
        """Double backward through a compiled graph is not supported."""
        raise RuntimeError("torch.compile with aot_autograd does not currently support double "
                           "backward")


def _replay_mode(info) -> bool | None:
    """The grad mode an output rebuilt as a view is made in: off where eager's was made
    under no_grad (it requires grad as its base does, with no history), on where eager's
    has history (the program may leave grad mode off, set before outputs are made); None:
    either (its base has no history)."""
    if info.no_grad_view:
        return False
    return True if info.has_history else None


def _replay_view(x: Tensor, steps, mode: bool | None = None):
    """The view `steps` make of `x`, in grad mode `mode` (None: the current one)."""
    if mode is not None and mode != is_grad_enabled():
        with (enable_grad() if mode else no_grad()):
            return _replay_view(x, steps)
    from ... import _dispatch

    for op, args, index in steps:
        if op is None:  # an alias made outside dispatch: `detach()`
            x = x.detach()
            continue
        x = _dispatch.call(op, x, *args)
        if index is not None:
            x = x[index]
    return x


def finish_outputs(trace: TraceResult, args, outs: list):
    """The program's outputs: computed ones, inputs, views of inputs and repeats."""
    infos = trace.outputs[:trace.num_user_outputs]
    final: list = [None] * len(infos)
    done = [False] * len(infos)
    for k in range(len(infos)):
        _make_output(k, infos, final, done, args, outs)
    if trace.structure is None:
        return final[0]
    return trace.structure(final)


def _make_output(k: int, infos, final: list, done: list, args, outs):
    """Output `k` of `finish_outputs`, made once. (A module-level function: a nested one
    calling itself through its closure made a cycle that held every output, and the arrays
    behind them, until the garbage collector ran, so each call of a graph with large outputs
    page-faulted fresh memory: `x + 1` on 2048x1024 took 1.9 ms against eager's 0.2.)"""
    # A view of another output is made from it, which may come later (`y.t(), y`).
    if done[k]:
        return final[k]
    info = infos[k]
    if info.same_as is not None:
        value = _make_output(info.same_as, infos, final, done, args, outs)
    elif info.alias_of_input is not None:
        value = args[info.alias_of_input]
    elif info.view_of_input is not None:
        value = _replay_view(args[info.view_of_input], info.view_steps, _replay_mode(info))
    elif info.view_of_output is not None:
        value = _replay_view(_make_output(info.view_of_output, infos, final, done, args, outs),
                             info.view_steps, _replay_mode(info))
    elif info.view_of_base is not None:  # a view of an intermediate the node returned
        value = _replay_view(outs[info.view_of_base], info.view_steps, _replay_mode(info))
    else:
        value = outs[k]
    final[k], done[k] = value, True
    return value


class AOTRunner:
    """Calls the compiled graphs of one trace: training (the autograd Function) or inference."""

    def __init__(self, trace: TraceResult, fw, bw_module=None, bw_compiler=None):
        self.trace = trace
        self.fw = fw
        self.training = bw_module is not None
        if self.training:
            self.fn, self.returned = make_compiled_function(fw, bw_module, bw_compiler, trace)
            # Inputs that get no gradient (read only through `.detach()`, say) and that the
            # graph does not write: the node takes them detached, so it has no edge to their
            # history (eager's graph has none: a backward through the node must not run, and
            # free, the history of such an input).
            written = set(trace.mutated_inputs)
            self.no_grad_inputs = [i for i, reads in enumerate(trace.grad_tangents)
                                   if reads is None and i not in written]

    def __call__(self, *args):
        # The graphs hold the casts autocast made while tracing: run under autocast again,
        # their ops would be cast twice (PyTorch's runtime disables autocast around them).
        with _autocast_set_aside():
            full = self._run(args)
        if self.trace.grad_mode_after is not None:  # the program leaves grad mode switched
            set_grad_enabled(self.trace.grad_mode_after)
        return finish_outputs(self.trace, args, full)

    def _run(self, args: tuple) -> list:
        """The forward graph's outputs for `args` (through the autograd Function when
        training)."""
        if self.training:
            node_args = args
            if self.no_grad_inputs:
                node_args = list(args)
                for i in self.no_grad_inputs:
                    a = node_args[i]
                    if isinstance(a, Tensor) and a.requires_grad:
                        node_args[i] = a.detach()
            if self.trace.grad_mode_before:
                outs = self.fn.apply(*node_args)
            else:  # the program switches grad mode on: the node records its history
                with enable_grad():
                    outs = self.fn.apply(*node_args)
            outs = outs if isinstance(outs, tuple) else (outs,)
            full = [None] * self.trace.num_fwd_outputs
            for k, o in zip(self.returned, outs):
                full[k] = o
            return full
        outs = list(self.fw(*args))
        for k, info in enumerate(self.trace.outputs[:self.trace.num_user_outputs]):
            if info.is_tensor and not info.eager_view:
                # (a view the graph made of its own value, where eager's is none: a
                # geometry written in place, `y.transpose_(0, 1)`)
                outs[k] = _unview(outs[k], args)
        return outs


def needs_autograd(args) -> bool:
    """Whether a call must record gradients (grad mode on and an input requiring grad)."""
    return is_grad_enabled() and any(isinstance(a, Tensor) and a.requires_grad for a in args)
