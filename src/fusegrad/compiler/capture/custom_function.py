"""`MyFunction.apply(...)` of a user `autograd.Function` inside a captured frame.

The call becomes one graph node that runs `apply` itself: eagerly (the "eager" backend) it
records the Function's own backward node, and AOT autograd traces through its forward and,
for the backward graph, its custom `backward`. Both are then run once per trace, not once per
call, so they must be free of effects outside themselves: before recording the node, the
capture speculates - it translates `forward` (and `setup_context`) and then `backward` into
the graph as usual, checks that neither assigned anything outside itself, wrote into a
tensor from outside, or needed a graph break (printing, reading tensor values, NumPy), and
erases what they recorded. A Function that fails the check runs for real (a graph break), as
Dynamo treats a Function whose speculation fails. So does one the compiled node would run
differently: a backward changing ctx (seen by a second backward), a backward giving no input
that requires grad a gradient (eager's outputs still require grad), a tensor kept on ctx
that later code can write (eager's backward reads it unchecked). Forward is speculated under
no_grad, as eager runs it: the numbers it returns are taken from the speculation.
"""

from __future__ import annotations

import types

from .builder import holds_symbol
from .variables import (
    ConstantVariable,
    ObjectVariable,
    TensorVariable,
    TupleVariable,
    Unsupported,
    Variable,
)


class SpeculatedContext:
    """The `ctx` a Function's `forward`, `setup_context` and `backward` see while they are
    speculated: attributes they set are kept on it, and its methods are translated like user
    code (what they store is what `backward` reads). `mark_dirty` (a forward writing into its
    input) and `save_for_forward` (forward-mode derivatives) are not offered: such a Function
    runs for real."""

    def save_for_backward(self, *tensors):
        """Keep `tensors` for `saved_tensors`."""
        self.saved_tensors = tensors

    def mark_non_differentiable(self, *tensors):
        """Non-differentiable outputs: nothing to check while speculating."""
        self.non_differentiable = tensors

    def set_materialize_grads(self, value):
        """Whether absent gradients reach backward as zeros (only True is speculated)."""
        self.materialize_grads = value


def is_function_apply(f) -> bool:
    """Whether `f` is `apply` of a user subclass of `autograd.Function` (bound to it)."""
    from ...autograd.function import Function

    return isinstance(f, types.MethodType) and isinstance(f.__self__, type) and \
        issubclass(f.__self__, Function) and f.__func__ is Function.apply.__func__ and \
        (not f.__self__.__module__.startswith(_PACKAGE) or
         f.__self__.__module__.startswith(_FOLLOWED))


_PACKAGE = __name__.split(".compiler.")[0] + "."
# The library's own Functions speculated as a user's are (a reparameterised draw's, as
# PyTorch's Dynamo traces its `_Dirichlet`); the others are called for real.
_FOLLOWED = _PACKAGE + "distributions."


def call_function_apply(tr, fn: Variable, args: list, kwargs: dict) -> Variable:
    """`cls.apply(*args)` during translation: one graph node once `forward` and `backward`
    are shown free of effects outside themselves; otherwise `Unsupported` (a break)."""
    from ...autograd import function as function_module
    from ...autograd.function import Function, once_differentiable

    cls = fn.value.__self__
    if kwargs:
        raise Unsupported(f"{cls.__name__}.apply() with keyword arguments")
    if function_module._forward_grads is not None:
        raise Unsupported(f"{cls.__name__}.apply() at an open forward-AD level")
    for a in args:
        if not _plain_argument(a):
            raise Unsupported(f"{cls.__name__}.apply() of a {type(a).__name__}")
    if fn.source is None:
        raise Unsupported(f"{cls.__name__}.apply() of a Function no guard reaches")
    forward, backward = _static(cls, "forward"), _static(cls, "backward")
    setup = _static(cls, "setup_context")
    separate = setup is not _static(Function, "setup_context")
    if forward is None or backward is None or (separate and setup is None):
        raise Unsupported(f"{cls.__name__}'s forward/backward are not Python functions")
    guards = tr.builder.guards
    owner = fn.source + ".__self__"
    for name in ("forward", "backward", "setup_context"):  # (reassigned: compiled again)
        guards.constant(f"{owner}.{name}", getattr(cls, name))
    if getattr(backward, "__code__", None) is once_differentiable(len).__code__:
        backward = backward.__wrapped__  # its wrapper only adds a node under grad mode
    out = _speculate(tr, cls, forward, backward, setup if separate else None, args)
    if type(out) is not TupleVariable or \
            all(isinstance(o, TensorVariable) for o in out.items):
        return tr.builder.call("call_function", fn.value, tuple(args), {})
    # Numbers among the outputs (`return y, n`): forward made them from what the capture
    # knows (a value read would have failed the speculation), so they are the speculated
    # constants; the node returns the tensors alone.
    if any(not isinstance(o.value, (int, float, bool, str, type(None))) or
           holds_symbol(o.value) for o in out.items if isinstance(o, ConstantVariable)):
        raise Unsupported(f"{cls.__name__}.forward returned a value other than tensors "
                          "and numbers")
    positions = tuple(i for i, o in enumerate(out.items) if isinstance(o, TensorVariable))
    tensors = tr.builder.call("call_function", _tensor_outputs(fn.value, positions),
                              tuple(args), {})
    items = list(out.items)
    for i, t in zip(positions, tensors.items if type(tensors) is TupleVariable else
                    [tensors]):
        items[i] = t
    return TupleVariable(items)


def _tensor_outputs(apply, positions: tuple):
    """A graph target calling `apply` and returning its outputs at `positions`."""
    def tensor_outputs(*args):
        out = apply(*args)
        return tuple(out[i] for i in positions) if len(positions) > 1 else out[positions[0]]

    tensor_outputs.__name__ = f"{apply.__self__.__name__}_apply"
    return tensor_outputs


def _static(cls, name: str):
    """The Python function `cls.name` stands for (a staticmethod's), or None."""
    for klass in cls.__mro__:
        if name in vars(klass):
            raw = vars(klass)[name]
            func = raw.__func__ if isinstance(raw, staticmethod) else raw
            return func if isinstance(func, types.FunctionType) else None
    return None


def _plain_argument(v: Variable) -> bool:
    """A tensor, a constant, or a tuple of those: what a graph node can be called with."""
    if isinstance(v, (TensorVariable, ConstantVariable)):
        return not isinstance(v, ConstantVariable) or not callable(v.value)
    return type(v) is TupleVariable and all(_plain_argument(i) for i in v.items)


def _speculate(tr, cls, forward, backward, setup, args: list) -> Variable:
    """Translate forward then backward into the graph, check they had no effect outside
    themselves, and erase what they recorded (raising `Unsupported` if they had one);
    returns forward's result variable (its tensors' nodes erased)."""
    from ..._thread_state import local
    from .calls import effect_since, inline, speculation

    builder = tr.builder
    needs = tuple(isinstance(a, TensorVariable) and bool(a.example.requires_grad)
                  for a in args)
    ctx = ObjectVariable(SpeculatedContext, {
        "needs_input_grad": TupleVariable([ConstantVariable(n) for n in needs]),
        "saved_tensors": TupleVariable([]),
        "materialize_grads": ConstantVariable(True)})
    name = cls.__name__
    grad_mode = local.grad_mode
    try:
        with speculation(builder) as (mark, n_stores):
            # Eager runs forward under no_grad (what it returns may read the mode); setup_context
            # and backward (unless create_graph) with grad mode as the caller has it.
            builder.set_grad_enabled(False)
            if setup is None:
                out = inline(tr, forward, [ctx, *args], {})
            else:
                out = inline(tr, forward, list(args), {})
            builder.set_grad_enabled(grad_mode)
            if setup is not None:
                inline(tr, setup, [ctx, TupleVariable(list(args)), out], {})
            outs = out.items if type(out) is TupleVariable else [out]
            if not outs or not all(isinstance(o, (TensorVariable, ConstantVariable))
                                   for o in outs):
                raise Unsupported(f"{name}.forward returned something other than tensors")
            made = {id(n) for n in builder.created[mark:]}
            if any(isinstance(o, TensorVariable) and id(o.node) not in made for o in outs):
                # Eager returns an alias of it carrying the Function's node (and refusing
                # in-place writes); traced, the tensor itself would be the output, without it.
                raise Unsupported(f"{name}.forward returned a tensor it did not make")
            _check_ctx_tensors(name, ctx, made, outs)
            grads = [builder.call("call_function", _zeros_like(), (o,), {})
                     if isinstance(o, TensorVariable) else ConstantVariable(None) for o in outs]
            materialize = ctx.items["materialize_grads"]
            if not (isinstance(materialize, ConstantVariable) and materialize.value is True):
                raise Unsupported("set_materialize_grads(False) (backward may get None)")
            before = _fingerprint(ctx)
            returned = inline(tr, backward, [ctx, *grads], {})
            if _fingerprint(ctx) != before:
                # Eager's backward changes the node's ctx for the next backward through it
                # (`retain_graph=True`); the compiled backward would replay the traced values.
                raise Unsupported(f"{name}.backward changes what ctx holds")
            _check_gradients_reach(name, needs, returned)
            effect = effect_since(builder, mark, n_stores)
            if effect == "stores":
                raise Unsupported(f"{name}'s forward or backward has a side effect (an "
                                  "assignment or an append outside it)")
            if effect == "writes":
                raise Unsupported(f"{name}'s forward or backward writes into a tensor from "
                                  "outside it")
            return out
    except Unsupported as e:
        raise Unsupported(f"{name}.apply(): {e}") from None


def _check_ctx_tensors(name: str, ctx: ObjectVariable, made: set, outs: list) -> None:
    """Refuse a tensor kept as a ctx attribute (not through `save_for_backward`) that code
    after the Function can write in place: an input, an output, a view, one from outside.

    Eager's backward reads such a tensor as it is then, unchecked; the compiled node saves
    it for its backward, and would refuse (or miss) the write."""
    outputs = {id(o.node) for o in outs if isinstance(o, TensorVariable)}
    # (`non_differentiable`: the outputs `mark_non_differentiable` names, a mark the real
    # call makes again, not something backward reads)
    kept = [v for k, v in ctx.items.items() if k not in ("saved_tensors", "non_differentiable")]
    seen: set = set()
    while kept:
        v = kept.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, TensorVariable):
            if id(v.node) not in made or id(v.node) in outputs or v.example._base is not None:
                raise Unsupported(f"{name}'s ctx keeps a tensor that may be written after "
                                  "forward (not through save_for_backward)")
        items = getattr(v, "items", None)
        if isinstance(items, dict):
            kept.extend(i for i in items.values() if isinstance(i, Variable))
        elif isinstance(items, list):
            kept.extend(i for i in items if isinstance(i, Variable))


def _fingerprint(v: Variable, seen: set | None = None):
    """What `v` holds, as nested ids of its parts: equal fingerprints mean that nothing was
    assigned, appended or removed inside it (containers are changed in place)."""
    seen = set() if seen is None else seen
    if id(v) in seen:
        return id(v)
    seen.add(id(v))
    items = getattr(v, "items", None)
    if isinstance(items, dict):
        return id(v), tuple((k, _fingerprint(i, seen)) if isinstance(i, Variable) else
                            (k, id(i)) for k, i in items.items())
    if isinstance(items, list):
        return id(v), tuple(_fingerprint(i, seen) if isinstance(i, Variable) else id(i)
                            for i in items)
    return id(v)


def _check_gradients_reach(name: str, needs: tuple, returned: Variable) -> None:
    """Refuse a backward giving no gradient (None) to every input that requires grad.

    Eager still records the Function's node, so its outputs require grad; the compiled
    node takes inputs that get no gradient detached, and its outputs would not."""
    from ..._thread_state import local

    if isinstance(returned, ConstantVariable) and type(returned.value) is tuple:
        items = [ConstantVariable(v) for v in returned.value]  # (`return None, None`)
    else:
        items = returned.items if type(returned) is TupleVariable else [returned]
    if not local.grad_enabled or not any(needs) or len(items) < len(needs):
        return
    if all(isinstance(g, ConstantVariable) and g.value is None
           for g, need in zip(items, needs) if need):
        raise Unsupported(f"{name}.backward gives no input requiring grad a gradient")


def _zeros_like():
    from ..._creation import zeros_like

    return zeros_like
