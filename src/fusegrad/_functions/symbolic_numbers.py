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
           "sym_sum"]

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


def sym_sqrt(a: Any) -> float:
    """`math.sqrt(a)`."""
    return math.sqrt(a)


def sym_sum(*args: Any) -> Any:
    """The sum of the numbers given (or of one list or tuple of them), starting from 0."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = args[0]
    total = 0
    for value in args:
        total = total + value
    return total
