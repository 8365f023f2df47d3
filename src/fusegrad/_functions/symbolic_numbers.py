"""`sym_int`, `sym_float`, `sym_max`, `sym_min`, `sym_not`, `sym_ite`, `sym_sqrt` and
`sym_sum`: PyTorch's spellings of Python's int/float/max/min/not/if-else/sqrt/sum that work on
plain numbers and on the symbolic sizes of capture (`_symbolic.SymInt`, an int to these
functions; comparing one records a guard, as Python's own max would)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._symbolic import SymInt

__all__ = ["sym_int", "sym_float", "sym_max", "sym_min", "sym_not", "sym_ite", "sym_sqrt",
           "sym_sum"]  # (and the `_sym_*` twins of `math` functions, added below)

_NUMBERS = (np.integer, np.floating, int, float)


def sym_int(a: Any) -> int:
    """`int(a)`: a float rounds toward zero."""
    if isinstance(a, SymInt):
        return a
    return int(a)


def sym_float(a: Any) -> float:
    """`float(a)`."""
    return float(a)


def _check_number(value) -> None:
    if not isinstance(value, (*_NUMBERS, SymInt)):
        raise AssertionError(f"expected {_NUMBERS}, got {type(value)}")


def _extreme(pick, a, b):
    _check_number(a)
    _check_number(b)
    result = pick(a, b)
    # An int and a float give a float, whichever is picked, as PyTorch's symbolic form does.
    if isinstance(a, (float, np.floating)) or isinstance(b, (float, np.floating)):
        return float(result)
    return result


def sym_max(a: Any, b: Any) -> Any:
    """max(a, b) of two numbers; a float if either is one."""
    return _extreme(max, a, b)


def sym_min(a: Any, b: Any) -> Any:
    """min(a, b) of two numbers; a float if either is one."""
    return _extreme(min, a, b)


def sym_not(a: Any) -> bool:
    """`not a`."""
    return not a


def sym_ite(b: Any, t: Any, f: Any) -> Any:
    """`t if b else f`; `b` must be a bool and the branches of one type."""
    if not isinstance(b, bool):
        raise AssertionError(f"expected SymBool or bool, got {type(b)}")
    if type(t) is not type(f):
        raise AssertionError(f"type mismatch: {type(t)} vs {type(f)}")
    return t if b else f


def _math_twin(fn):
    """`_sym_<name>` for Python's `math.<name>`: `fn(a)` of a number, or of a value standing
    for one in a trace (AOT's float inputs define `__sym_<name>__`, which records the call)."""
    name = fn.__name__
    hook = f"__sym_{name}__"

    def twin(a: Any) -> float:
        method = getattr(type(a), hook, None)
        return method(a) if method is not None else fn(a)

    twin.__name__ = twin.__qualname__ = f"_sym_{name}"
    twin.__doc__ = f"`math.{name}(a)`, also of a float standing for a graph value."
    twin.math_name = name  # the `math` function it computes (guard text, code generation)
    return twin


# Python's `math` functions of one float that PyTorch spells `torch._sym_<name>`, each to its
# twin: captured code calling one on a symbolic number records the twin in the graph.
SYM_MATH = {fn: _math_twin(fn) for fn in (
    math.sqrt, math.cos, math.cosh, math.sin, math.sinh, math.tan, math.tanh, math.asin,
    math.acos, math.atan, math.log2)}
for _twin in SYM_MATH.values():
    globals()[_twin.__name__] = _twin
__all__ += [t.__name__ for t in SYM_MATH.values()]
_sym_sqrt = SYM_MATH[math.sqrt]
# (each twin also takes its `math` function's place in the table, for calls made through
# `torch._sym_sqrt` itself)
SYM_MATH.update({t: t for t in list(SYM_MATH.values())})


def sym_sqrt(a: Any) -> float:
    """`math.sqrt(a)`."""
    return _sym_sqrt(a)


def sym_sum(*args: Any) -> Any:
    """The sum of the numbers given (or of one list or tuple of them), starting from 0."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = args[0]
    total = 0
    for value in args:
        total = total + value
    return total
