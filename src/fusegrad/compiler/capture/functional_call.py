"""`func.functional_call(module, tensors, args)` inside a captured frame.

Eagerly it swaps the given tensors into the module's parameter and buffer tables, calls the
module and swaps them back. Translated, nothing is swapped: the module's call is inlined
while `StateOverrides` answers reads of `submodule.name` for the given names with the given
tensors' variables. A read of an overridden parameter by any other path (a listing such as
`parameters()`, a list of weights kept at construction, `_parameters[...]`) would see the
old tensor: it is a graph break, and the call runs for real.
"""

from __future__ import annotations

import inspect
import sys

from .variables import (
    ConstantVariable,
    DictVariable,
    ListVariable,
    TensorVariable,
    TupleVariable,
    Unsupported,
    Variable,
)


class StateOverrides:
    """The tensors standing for module state during translated `functional_call`s:
    (id(submodule), name) -> variable, and the ids of the real tensors they replace."""

    def __init__(self, by_name: dict, replaced: dict):
        self.by_name = by_name
        self.replaced = replaced  # id(real tensor) -> real tensor (kept alive)

    def combined(self, other: StateOverrides | None) -> StateOverrides:
        """These overrides inside `other`'s (an inner call's names win)."""
        if other is None:
            return self
        return StateOverrides({**other.by_name, **self.by_name},
                              {**other.replaced, **self.replaced})


def is_functional_call(f) -> bool:
    """Whether `f` is `func.functional_call` or `nn.utils.stateless.functional_call`."""
    package = __name__.split(".compiler.")[0]
    for name in ("func._functional_call", "nn.utils.stateless"):
        module = sys.modules.get(f"{package}.{name}")
        if module is not None and f is getattr(module, "functional_call", None):
            return True
    return False


def call_functional(tr, fn: Variable, args: list, kwargs: dict) -> Variable:
    """`functional_call(module, dicts, args, kwargs, tie_weights=, strict=)` translated: the
    module's call inlined under the overrides its dicts give."""
    from ...func import _functional_call as real
    from .calls import call_variable

    try:
        bound = inspect.signature(fn.value).bind(*args, **kwargs)
    except TypeError as e:
        raise Unsupported(f"functional_call(): {e}") from None
    bound.apply_defaults()
    given = {k: v if isinstance(v, Variable) else ConstantVariable(v)  # (defaults)
             for k, v in bound.arguments.items()}
    module_var = given["module"]
    dicts = given.get("parameter_and_buffer_dicts", given.get("parameters_and_buffers"))
    options = {k: given[k] for k in ("tie_weights", "strict")}
    if not isinstance(module_var, ConstantVariable) or \
            not hasattr(module_var.value, "_parameters") or \
            not all(isinstance(v, ConstantVariable) for v in options.values()):
        raise Unsupported("functional_call() of a module or options not known while "
                          "translating")
    module = module_var.value
    values = _named_tensors(dicts)
    try:
        names = real._tie(module, values) if options["tie_weights"].value else values
        if options["strict"].value:
            real._check_strict(module, names)
        owners = {name: real._owner(module, name) for name in names}
    except (AttributeError, RuntimeError, ValueError, TypeError):
        raise Unsupported("functional_call() that raises (run for real)") from None
    by_name, replaced = {}, {}
    for name, (owner, attr) in owners.items():
        old = owner._parameters.get(attr, owner._buffers.get(attr))
        if attr not in owner._parameters and attr not in owner._buffers:
            raise Unsupported(f"functional_call() of {name!r}, not a parameter or buffer")
        by_name[(id(owner), attr)] = names[name]
        if old is not None:
            replaced[id(old)] = old
    call_args = given.get("args")
    if isinstance(call_args, ConstantVariable) and call_args.value is None:
        call_args = []
    elif type(call_args) is TupleVariable:
        call_args = list(call_args.items)
    else:
        call_args = [call_args]
    call_kwargs = given.get("kwargs")
    if isinstance(call_kwargs, ConstantVariable) and call_kwargs.value is None:
        call_kwargs = {}
    elif isinstance(call_kwargs, DictVariable) and \
            all(isinstance(k, str) for k in call_kwargs.items):
        call_kwargs = dict(call_kwargs.items)
    else:
        raise Unsupported("functional_call() with keyword arguments not known while "
                          "translating")
    builder = tr.builder
    outer = builder.state_overrides
    builder.state_overrides = StateOverrides(by_name, replaced).combined(outer)
    try:
        return call_variable(tr, module_var, call_args, call_kwargs)
    finally:
        builder.state_overrides = outer


def _named_tensors(dicts: Variable) -> dict:
    """name -> tensor variable of a dict variable (or a tuple/list of them, names merged);
    `Unsupported` for anything else or a name given twice (the real call raises)."""
    parts = dicts.items if type(dicts) in (TupleVariable, ListVariable) else [dicts]
    values: dict = {}
    for part in parts:
        if type(part) is not DictVariable:
            raise Unsupported("functional_call() of tensors not in a dict made of names")
        for key, value in part.items.items():
            if not isinstance(key, str) or not isinstance(value, TensorVariable) or \
                    key in values:
                raise Unsupported("functional_call() of a dict holding other than "
                                  "distinct names and tensors")
            values[key] = value
    return values


def overridden_read(overrides: StateOverrides | None, obj, name: str):
    """The variable standing for `obj.name` during a translated `functional_call`, else
    None."""
    if overrides is None:
        return None
    return overrides.by_name.get((id(obj), name))


def check_not_replaced(overrides: StateOverrides | None, value) -> None:
    """Refuse a read of a tensor a translated `functional_call` replaces by a path other
    than its module attribute (the eager call would see the given tensor there)."""
    if overrides is not None and overrides.replaced.get(id(value)) is value:
        raise Unsupported("functional_call(): a replaced parameter read other than as its "
                          "module's attribute")
