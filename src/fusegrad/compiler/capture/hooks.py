"""`h.register_hook(fn)` on a tensor the captured frame computed.

The call becomes a graph node that registers `fn` on the tensor the graph computes: run
eagerly (the "eager" backend) it is eager's own registration, so the hook sees the tensor's
whole gradient in the backward and what it returns replaces it; AOT autograd, tracing the
forward, registers it on the traced tensor, and its backward trace runs it there, so the
hook's ops become part of the backward graph. Either way the hook's body runs once per trace
and not once per backward, so, as Dynamo does, the capture first speculates it: `fn` is
translated on a stand-in gradient and must assign nothing outside itself, write into no
tensor from outside, need no graph break (printing, reading values), and return None or a
tensor of the gradient's shape and dtype; what it recorded is erased. A hook that fails runs
for real (a graph break), as does one on a view, or one whose handle the program keeps
(`handle.remove()`).

A hook on a graph input that requires grad (its gradient also comes from outside the graph)
is not traced: it is registered on the real tensor after the graph ran, as Dynamo replays
the registration, and runs in the backward as eager's does (`_register_on_input`).
"""

from __future__ import annotations

import types
import weakref

from ...fx import has_side_effect
from .variables import (
    CellVariable,
    ConstantVariable,
    NestedFunctionVariable,
    TensorVariable,
    Unsupported,
    Variable,
)

# The hook functions the capture speculated: AOT autograd may trace them into the backward
# graph (`aot.tracing.Tracer.check_no_hooks`).
TRACEABLE_HOOKS: weakref.WeakSet = weakref.WeakSet()


@has_side_effect  # (dead-code elimination keeps it)
def register_traced_hook(t, fn):
    """Register hook `fn` on `t` (a graph node's target); returns `t`."""
    t.register_hook(fn)
    return t



_PLAIN = (int, float, bool, str, type(None))


def real_function(tr, fn: Variable, what: str = "Tensor.register_hook()"):
    """The Python function a graph node calls for variable `fn` (a hook, a cond branch): a
    function made in the frame (a lambda) rebuilt from its code where its closure and
    defaults are plain constants, or a function from outside that a guard pins; otherwise
    `Unsupported`."""
    if isinstance(fn, NestedFunctionVariable):
        cells = []
        for cell in fn.closure:
            if not isinstance(cell, CellVariable) or cell.real is not None or \
                    not isinstance(cell.contents, ConstantVariable) or \
                    type(cell.contents.value) not in _PLAIN:
                raise Unsupported(f"{what} of a function whose closure holds more than "
                                  "constants")
            cells.append(types.CellType(cell.contents.value))
        defaults = fn.defaults
        if defaults is not None and not (isinstance(defaults, ConstantVariable) and isinstance(
                defaults.value, tuple) and all(type(v) in _PLAIN for v in defaults.value)):
            raise Unsupported(f"{what} of a function with non-constant defaults")
        if fn.kwdefaults is not None and not (isinstance(fn.kwdefaults, ConstantVariable)
                                              and fn.kwdefaults.value is None):
            raise Unsupported(f"{what} of a function with keyword defaults")
        real = types.FunctionType(fn.code, fn.f_globals, fn.code.co_name,
                                  defaults.value if defaults is not None else None,
                                  tuple(cells) or None)
        tr.builder.fresh_functions.append(real)
        return real
    value = fn.value if isinstance(fn, ConstantVariable) else None
    if isinstance(value, types.FunctionType) and _plain_parts(value):
        if any(value is f for f in tr.builder.fresh_functions):
            return value  # (made by the frame from its code and constants: a lambda)
        if fn.source is not None:
            tr.builder.guards.constant(fn.source, value)  # (rebound: captured again)
            return value
    raise Unsupported(f"{what} of a callable the capture cannot speculate")


def _plain_parts(f: types.FunctionType) -> bool:
    """Whether `f`'s closure cells and defaults hold plain constants only (what the graph
    may keep for every run: the capture specialised them)."""
    try:
        cells = [c.cell_contents for c in f.__closure__ or ()]
    except ValueError:  # (an empty cell)
        return False
    kw = list((f.__kwdefaults__ or {}).values())
    return all(type(v) in _PLAIN for v in (*cells, *(f.__defaults__ or ()), *kw))


def speculate_call(tr, fn: Variable, args: list, what: str, grad_mode: bool,
                   inspect=None) -> Variable:
    """Translate `fn(*args)` under `grad_mode`, check it had no effect outside itself (an
    assignment or append outside it, a write into a tensor from outside, a graph break),
    and erase what it recorded; returns its result variable (its tensors' nodes erased,
    their examples kept). `Unsupported`, naming `what`, otherwise. `inspect(mark,
    returned)`, if given, sees the recorded nodes (`builder.created[mark:]`) before they
    are erased."""
    from .calls import effect_since, inline, inline_nested, speculation

    builder = tr.builder
    try:
        with speculation(builder) as (mark, n_stores):
            builder.set_grad_enabled(grad_mode)
            if isinstance(fn, NestedFunctionVariable):
                returned = inline_nested(tr, fn, list(args), {})
            else:
                returned = inline(tr, fn.value, list(args), {})
            effect = effect_since(builder, mark, n_stores)
            if effect == "stores":
                raise Unsupported("a side effect (an assignment or an append outside it)")
            if effect == "writes":
                raise Unsupported("a write into a tensor from outside it")
            if inspect is not None:
                inspect(mark, returned)
            return returned
    except Unsupported as e:
        raise Unsupported(f"{what}: {e}") from None


def _speculate(tr, fn: Variable, t: TensorVariable) -> None:
    """Speculate hook `fn` on a stand-in gradient of `t` (the backward runs hooks without
    grad mode): it must return None or a tensor of the gradient's shape and dtype."""
    from ..._creation import zeros_like

    what = "Tensor.register_hook()"
    mark = len(tr.builder.created)
    try:
        grad = tr.builder.call("call_function", zeros_like, (t,), {})
        returned = speculate_call(tr, fn, [grad], what, False)
    finally:
        tr.builder.discard_since(mark)  # (the stand-in)
    if isinstance(returned, TensorVariable):
        e, want = returned.example, t.example
        if tuple(e.shape) != tuple(want.shape) or e.dtype != want.dtype:
            raise Unsupported(f"{what}: the hook returns a tensor of another shape or dtype")
    elif not (isinstance(returned, ConstantVariable) and returned.value is None):
        raise Unsupported(f"{what}: the hook returns something other than a tensor or None")


def register_hook(tr, t: TensorVariable, args: list, kwargs: dict) -> Variable:
    """`t.register_hook(fn)` during translation: a graph node registering the speculated
    hook; the call's handle is a variable that breaks the graph where it is used."""
    if kwargs or len(args) != 1:
        raise Unsupported("Tensor.register_hook() with other arguments")
    example = t.example
    if t.node is not None and t.node.op == "placeholder" and t.source is not None and \
            example.requires_grad:
        return _register_on_input(tr, t, args[0])
    if t.node is None or t.node.op == "placeholder" or t.source is not None:
        raise Unsupported("Tensor.register_hook() on a graph input (its gradient also "
                          "comes from outside the graph)")
    if not example.requires_grad:
        raise Unsupported("Tensor.register_hook() on a tensor that does not require grad")
    if example._base is not None:
        raise Unsupported("Tensor.register_hook() on a view")
    fn = args[0]
    real = real_function(tr, fn)
    _speculate(tr, fn, t)
    TRACEABLE_HOOKS.add(real)
    # (recorded, not run on the fake example: a hook there would outlive the capture)
    node = tr.builder.graph.create_node("call_function", register_traced_hook,
                                        (t.node, real), {})
    tr.builder.created.append(node)
    node.meta["example_value"] = example
    return HookHandleVariable()


class HookRegistration:
    """The name of a recorded store that registers a hook on a graph input
    (`GraphBuilder.stores`): replayed after the graph as `tensor.register_hook(fn)`."""

    __slots__ = ()


def _register_on_input(tr, t: TensorVariable, fn: Variable) -> Variable:
    """`x.register_hook(fn)` of a graph input `x` that requires grad: registered on the real
    tensor after the graph ran (as Dynamo replays it), so the hook runs in the backward as
    eager's does, on the whole gradient that reaches `x`, its body never traced. An
    in-place op in the graph (before or after, which eager orders around the registration)
    is a break, and so is a hook function made in the frame whose closure holds more than
    constants (it cannot be made again after the graph)."""
    builder = tr.builder
    if builder.mutated:
        raise Unsupported("Tensor.register_hook() on a graph input after an in-place op")
    if isinstance(fn, NestedFunctionVariable):
        hook = ConstantVariable(real_function(tr, fn))
    elif isinstance(fn, ConstantVariable) and callable(fn.value):
        hook = fn  # (the real object, guarded where it was read)
    else:
        raise Unsupported("Tensor.register_hook() of a callable the capture cannot rebuild")
    real = builder.input_values[t.source]
    builder.stores.append((real, HookRegistration(), hook, t.source))
    return HookHandleVariable()


def registers_hooks(stores: list) -> bool:
    """Whether recorded stores register hooks on graph inputs."""
    return any(type(name) is HookRegistration for _, name, _, _ in stores)


class HookHandleVariable(Variable):
    """The handle `register_hook` returns inside the graph: using it (`remove()`) or letting
    it leave the frame is not captured."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(None)

    def python_type(self) -> type:
        from ...autograd.graph import RemovableHandle

        return RemovableHandle
