"""The name PyTorch's C++ argument parser gives a Python value's type in its errors."""

from __future__ import annotations

_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class defined in Python


def python_type_name(value) -> str:
    """The type name PyTorch's argument parser prints: a Python class's bare name (`list`,
    `PackedSequence`), an extension type's dotted name (`numpy.ndarray`)."""
    cls = type(value)
    if cls.__flags__ & _HEAP_TYPE or cls.__module__ == "builtins":
        return cls.__name__
    return f"{cls.__module__}.{cls.__qualname__}"
