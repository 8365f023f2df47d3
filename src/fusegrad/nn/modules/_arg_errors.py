"""The errors PyTorch's C++ argument parser and kernel checks raise for a layer's arguments,
as text, and the table `Module.__call__` reads to report a non-tensor argument as PyTorch does.

PyTorch's layers hand their inputs to C++ ops whose argument parser rejects anything that is
not a tensor (`linear(): argument 'input' (position 1) must be Tensor, not list`); fusegrad's
layers run Python that fails on the first attribute it reads (`'list' object has no attribute
'dim'`). Checking the type on every call would cost the tensor path, so the check runs only
after a layer's forward has failed: `Module.__call__` catches the error, asks
`reported_error` whether a registered argument is not a tensor, and if so raises PyTorch's
error instead.
"""

from __future__ import annotations

import inspect

from ..._tensor import Tensor
from ..._type_names import python_type_name

# ---------------------------------------------------------------- the table for Module.__call__

# forward function -> rules(module, args, kwargs), each returning the error PyTorch raises or
# None
_RULES: dict = {}


def _argument_values(params: list, args: tuple, kwargs: dict):
    """(index, value) of each argument the call passed, in the forward's parameter order."""
    for i, name in enumerate(params):
        if i < len(args):
            yield i, args[i]
        elif name in kwargs:
            yield i, kwargs[name]


def _forward_params(cls: type) -> list:
    """The parameter names of `cls`'s own forward (after self): a rule belongs to that one
    function, so an inherited forward would give its rule to the parent's layers too."""
    assert "forward" in vars(cls), f"{cls.__name__} inherits its forward"
    return list(inspect.signature(cls.forward).parameters)[1:]


def tensor_arguments(cls: type, op, *names, when=None) -> None:
    """Record that `cls.forward` passes its leading arguments to PyTorch's op `op` (a name,
    or a function of the module giving it, for ops whose in-place form depends on a flag) as
    arguments `names`: each a name (position = its place) or (name, position), or None for an
    argument the op does not take as a tensor. `when(module, args, kwargs)`, if given, says
    whether the rule applies to a call."""
    params = _forward_params(cls)

    def rule(module, args, kwargs):
        if when is not None and not when(module, args, kwargs):
            return None
        for i, value in _argument_values(params, args, kwargs):
            if i >= len(names) or names[i] is None or isinstance(value, Tensor):
                continue
            name, position = names[i] if isinstance(names[i], tuple) else (names[i], i + 1)
            op_name = op(module) if callable(op) else op
            return TypeError(f"{op_name}(): argument '{name}' (position {position}) must be "
                             f"Tensor, not {python_type_name(value)}")
        return None

    _RULES.setdefault(cls.forward, []).append(rule)


def missing_attribute(cls: type, attribute: str, count: int = 1, when=None) -> None:
    """Record that PyTorch's `cls.forward` first reads `attribute` of its leading `count`
    arguments, so that a non-tensor among them is an AttributeError naming it (for calls
    `when(module, args, kwargs)` accepts, if given)."""
    params = _forward_params(cls)[:count]

    def rule(module, args, kwargs):
        if when is not None and not when(module, args, kwargs):
            return None
        for _, value in _argument_values(params, args, kwargs):
            if not isinstance(value, Tensor):
                return AttributeError(f"'{type(value).__name__}' object has no attribute "
                                      f"'{attribute}'")
        return None

    _RULES.setdefault(cls.forward, []).append(rule)


def inplace_op(name: str):
    """The op name `name`, or its in-place form `name_` for a module built with inplace=True."""
    return lambda module: f"{name}_" if module.inplace else name


def reported_error(module, args: tuple, kwargs: dict, exc: BaseException):
    """The error PyTorch raises where `module`'s forward failed with `exc` on an argument that
    is not a tensor, or None (then `exc` stands)."""
    rules = _RULES.get(getattr(module.forward, "__func__", None))
    if rules is None:
        return None
    tb = exc.__traceback__
    # An error raised by the call itself (a wrong number of arguments) is Python's own, as
    # in PyTorch: only one raised inside the forward is the argument's fault.
    if tb is None or tb.tb_next is None:
        return None
    for rule in rules:
        error = rule(module, args, kwargs)
        if error is not None:
            return error
    return None
