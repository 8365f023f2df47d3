"""What PyTorch's C++ argument parser's errors say of a call: the name it gives a Python
value's type, and which arguments the call gave by keyword (named without a position)."""

from __future__ import annotations

import dis
import sys

# The file names of the generated wrappers a call of a public function passes through (the
# `__torch_function__` protocol's, out='s), and the codes of those that take the call's
# arguments as `*args, **kwargs` (their modules register them): frames `call_keywords`
# looks through.
WRAPPER_FILE = "<torch function wrapper>"
PASSING_FILES = {WRAPPER_FILE, "<out= wrapper>"}
PASSING_CODES: set = set()

_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class defined in Python


def python_type_name(value) -> str:
    """The type name PyTorch's argument parser prints: a Python class's bare name (`list`,
    `PackedSequence`), an extension type's dotted name (`numpy.ndarray`)."""
    cls = type(value)
    if cls.__flags__ & _HEAP_TYPE or cls.__module__ == "builtins":
        return cls.__name__
    return f"{cls.__module__}.{cls.__qualname__}"


def call_keywords(depth: int = 1) -> tuple:
    """The names of the arguments that the call which entered the function `depth` frames
    up (1: the function asking) gave by keyword, read from the calling instruction (3.11 and
    3.12: the `KW_NAMES` before `CALL`; 3.13: the names `CALL_KW` takes); () where there is
    none or the call is of another kind (`f(*args, **kwargs)`).

    Only PyTorch's parser knows which arguments came by keyword, and its messages name a
    position for the others only (`tril(): argument 'diagonal' must be int` for
    `x.tril(diagonal=1.5)`). A Tensor method that is its public function's own code cannot
    tell; asked on error paths only, so the common call pays nothing."""
    caller = sys._getframe(depth + 1)
    while caller.f_code.co_filename in PASSING_FILES or caller.f_code in PASSING_CODES:
        # (a protocol wrapper passes the call on: its caller's call is the one to read, or
        # the keywords the wrapper met on its first call, when it took them as `**kwargs`)
        if caller.f_code in PASSING_CODES:
            return tuple(caller.f_locals.get("kwargs", ()))
        caller = caller.f_back
    code, last = caller.f_code, caller.f_lasti
    instructions = [i for i in dis.get_instructions(code) if i.offset <= last]
    if not instructions:
        return ()
    call = instructions[-1]  # (f_lasti may point into the call's inline caches)
    if call.opname == "CALL_KW" and len(instructions) > 1:
        names = instructions[-2].argval
        return names if isinstance(names, tuple) else ()
    if call.opname != "CALL":
        return ()
    for before in reversed(instructions[:-1]):
        if before.opname == "KW_NAMES":
            return code.co_consts[before.arg]
        if before.opname != "PRECALL":
            return ()
    return ()
