"""`opt.step()` inside compiled code: the optimizer's update recorded as graph ops.

Eager optimizers update NumPy arrays (C passes, ops/native/optim.c) that capture cannot see.
An optimizer whose class offers a traced update (`Optimizer._trace_plan`: SGD, Adam, AdamW)
is stepped in the graph instead, as torch.compile traces `opt.step()`: under no_grad, each
parameter with a gradient updated by its class's `_traced_update` (PyTorch's single-tensor
operations, inlined like any function), with the parameter, its gradient and its state
tensors as graph inputs read through their sources
(`G['opt'].param_groups[0]['params'][1]`, `....grad`, `G['opt'].state[...]['exp_avg']`).
The in-place writes reach those tensors as any graph's writes into its inputs do (the eager
backend runs them; AOT's `copy_` epilogue writes them back).

Guards: the optimizer's type, then its `_trace_signature()` (hooks, options by value,
parameters with gradients, state keys), both tested before any tensor guard, since the
state's sources index `opt.state` (a defaultdict: reading a missing parameter's entry
would make one). The first step (no state yet) makes the state in the graph, set on
`opt.state[p]` after it; the next call then recompiles (its state keys changed). Everything
else (a closure, another optimizer, foreach/fused/differentiable, a tensor learning rate,
sparse gradients) is a graph break: `step` then runs for real, eagerly.

Version counters: on the eager backend the graph's in-place ops move each tensor's
`_version` as eager's update does (PyTorch's count of in-place ops per step). Under
`aot_eager` and `inductor` each written input is written back by one `copy_`, so its
counter moves by one per step (SGD's momentum buffer, Adam's `exp_avg_sq` and AdamW's
parameter move by two in eager).
"""

from __future__ import annotations

from ..._thread_state import local as _thread_local
from ..._thread_state import set_grad_enabled as _set_mode
from .variables import ConstantVariable, Unsupported, Variable


def is_traced_step(obj, name: str) -> bool:
    """Whether `obj.name(...)` is an optimizer's `step` that capture may record."""
    return name == "step" and callable(getattr(type(obj), "_trace_plan", None)) and \
        callable(getattr(type(obj), "_trace_signature", None))


def is_scheduled_step(f) -> bool:
    """Whether `f` is the `step` an LR scheduler put on its optimizer (which notes that the
    optimizer stepped, then steps)."""
    return getattr(f, "_wrapped_by_lr_sched", False) is True and \
        getattr(f, "_lr_sched_owner", None) is not None


def call_scheduled_step(tr, fn: ConstantVariable, args: list, kwargs: dict) -> Variable:
    """`opt.step()` through an LR scheduler's wrapper (`fn`, guarded by identity where it
    was read): the note it makes (`opt._opt_called = True`, set after the graph) and the
    traced update, or a graph break."""
    opt = fn.value._lr_sched_owner()
    if opt is None or not is_traced_step(opt, "step"):
        raise Unsupported("call to an optimizer's step wrapped by an LR scheduler")
    src = fn.source[:-len(".step")] if fn.source and fn.source.endswith(".step") else None
    if src is not None:
        tr.builder.guards.add(f"{src} is {tr.builder.guards.ref(opt)}")
    obj = ConstantVariable(opt, src)
    tr.builder.store_attr(opt, "_opt_called", ConstantVariable(True))
    return call_step(tr, obj, args, kwargs)


def call_step(tr, obj: ConstantVariable, args: list, kwargs: dict) -> Variable:
    """Record `obj.value.step(*args, **kwargs)` into the graph (returns its None), or raise
    Unsupported (a graph break: the call runs for real)."""
    from .calls import inline

    opt = obj.value
    name = type(opt).__name__
    if args or kwargs:
        raise Unsupported(f"{name}.step with a closure or arguments")
    if _thread_local.autocast is not None:
        # (eager's update ignores autocast; the graph's ops would cast)
        raise Unsupported(f"{name}.step inside an autocast region")
    src = tr.source_of(obj)
    if src is None:
        raise Unsupported(f"{name}.step of an optimizer no guard reaches")
    guards = tr.builder.guards
    # Tested first (see the module docstring); a refused step keeps them too, so that a
    # later call whose options or state changed (the hooks removed, ...) captures again.
    guards.add(f"type({src}) is {guards.ref(type(opt), 'type')}", first=True)
    signature = opt._trace_signature()
    guards.add(f"{src}._trace_signature() == {guards.ref(signature, 'const')}", first=True)
    plan = opt._trace_plan()
    if isinstance(plan, str):
        raise Unsupported(plan)
    builder = tr.builder
    for item in plan:
        state = opt.state.get(item[2])
        if state is not None and builder.written_dicts.get(id(state)) is state:
            # (its items are set after the graph: this step would not see them)
            raise Unsupported(f"{name}.step after a step that made its state in this graph")
    update = type(opt)._traced_update
    before = _thread_local.grad_enabled
    try:
        if before:
            builder.set_grad_enabled(False)  # (PyTorch's step runs under no_grad)
        for gi, pi, p, keys, first, options in plan:
            psrc = f"{src}.param_groups[{gi}]['params'][{pi}]"
            values = [builder.wrap(p, psrc), builder.wrap(p.grad, f"{psrc}.grad")]
            if keys and not first:  # (an optimizer without state has no entry: none is
                # made here)
                state = opt.state[p]
                values += [builder.wrap(state[k], f"{src}.state[{psrc}][{k!r}]")
                           for k in keys]
            kw = {k: ConstantVariable(v) for k, v in options.items()}
            made = inline(tr, update, values, {**kw, "first": ConstantVariable(first)})
            if first:
                # The state the first step makes (PyTorch's lazy state), set after the graph
                # as dict items: `opt.state[p]` (a defaultdict's entry, made now: the step
                # is sure to run) takes the graph's new tensors, in eager's key order.
                state = opt.state[p]
                for k, v in zip(keys, made.items, strict=True):  # (a tuple or list variable)
                    builder.store_item(state, k, v, f"{src}.state[{psrc}]")
        if before:
            builder.set_grad_enabled(True)
    finally:
        # (on a break the nodes are discarded: the real mode must be the frame's again)
        _set_mode(before)
    return ConstantVariable(None)
