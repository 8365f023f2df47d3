"""`torch._foreach_*` calls recorded as their per-tensor ops.

A foreach function applies one op to every tensor of a list (`_foreach_lerp_(ema, params,
0.001)` is `e.lerp_(p, 0.001)` for each pair). The function decides its calls up front from
its arguments (`_functions/foreach.py`'s plan: the overload, PyTorch's checks, one step per
tensor); the translator asks it for that plan on the fake examples and records each step as
the program's own call would be recorded: a method of the tensor, or the registry overload
PyTorch's loop calls. So the graph holds ordinary per-tensor nodes (in-place writes tracked
as any other), and a foreach call that eager execution refuses is a graph break, raising
when it runs for real.
"""

from __future__ import annotations

from collections.abc import Callable

from ..._symbolic import SymInt
from ..._tensor import Tensor
from .symfloat import SymFloat
from .variables import (
    ConstantVariable,
    ListVariable,
    MethodVariable,
    TensorVariable,
    TupleVariable,
    Unsupported,
    Variable,
)


class _FloatStandIn(float):
    """A dynamic float's place in the arguments a plan is made from (a number to the
    plan's checks, a distinct object so that its steps' arguments map back to it)."""


class _IntStandIn(int):
    """A dynamic int's place, as `_FloatStandIn`."""


def is_foreach(f) -> bool:
    """Whether `f` is one of fusegrad's `_foreach_*` functions."""
    return getattr(f, "foreach_plan", None) is not None


def call_foreach(tr, f, args: list, kwargs: dict, call: Callable) -> Variable:
    """Record `f(*args, **kwargs)` (`f` a foreach function) as its per-tensor calls, each
    made through `call` (the translator's `call_variable`); the first argument's variable
    (an in-place form) or a tuple of the results."""
    from ..._functions.foreach import PREVIOUS

    variables: dict[int, Variable] = {}

    def value_of(v: Variable):
        if isinstance(v, TensorVariable):
            variables[id(v.example)] = v
            return v.example
        if isinstance(v, TupleVariable):
            items = [value_of(item) for item in v.items]
            return items if isinstance(v, ListVariable) else tuple(items)
        if isinstance(v, ConstantVariable):
            value = v.value
            if isinstance(value, (SymFloat, SymInt)):
                stand_in = (_FloatStandIn if isinstance(value, SymFloat) else _IntStandIn)(
                    value.hint)
                variables[id(stand_in)] = v
                return stand_in
            return value
        raise Unsupported(f"{f.__name__}() on a {type(v).__name__}")

    values = [value_of(a) for a in args]
    named = {k: value_of(v) for k, v in kwargs.items()}
    try:
        with tr.builder.fake_mode:
            plan = f.foreach_plan(tuple(values), named)
    except Exception as e:  # noqa: BLE001 (refused arguments: eager raises the same)
        raise Unsupported(f"{f.__name__}() raised {type(e).__name__}: {e}") from None

    def variable_of(value, previous: Variable | None) -> Variable:
        if value is PREVIOUS:
            return previous
        found = variables.get(id(value))
        if found is not None:
            return found
        if isinstance(value, Tensor):  # (a tensor the plan made: none does)
            raise Unsupported(f"{f.__name__}() planned a call on a tensor it made")
        return ConstantVariable(value)

    results, previous = [], None
    for step in plan.steps:
        step_args = [variable_of(a, previous) for a in step.args]
        step_kwargs = {k: variable_of(v, previous) for k, v in (step.kwargs or {}).items()}
        if type(step.target) is str:
            previous = call(tr, MethodVariable(step_args[0], step.target), step_args[1:],
                            step_kwargs)
        else:
            previous = call(tr, ConstantVariable(step.target), step_args, step_kwargs)
        if step.kept:
            results.append(previous)
    if plan.inplace:
        return args[0] if args else kwargs["self"]
    return TupleVariable(results)
