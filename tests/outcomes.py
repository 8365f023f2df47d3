"""Program outcomes compared across fusegrad and torch: a result as plain Python values, or
the exception it raised, with the warnings given on the way."""

from __future__ import annotations

import warnings

import numpy as np
import torch

import fusegrad

LIBS = (torch, fusegrad)


class Values:
    """A tensor's values, equal to another's within float32 rounding."""

    def __init__(self, values):
        self.values = np.asarray(values, dtype=np.complex128 if np.iscomplexobj(values)
                                 else np.float64)

    def __eq__(self, other):
        return (isinstance(other, Values) and self.values.shape == other.values.shape
                and np.allclose(self.values, other.values, rtol=1e-5, atol=1e-6,
                                equal_nan=True))

    def __repr__(self):
        return repr(self.values.tolist())


def plain(value):
    """A result as plain Python (tensors as kind, dtype name, shape and values; dtypes and
    classes by name), comparable with == across the two libraries."""
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if hasattr(value, "shape") and hasattr(value, "tolist"):
        kind = "Parameter" if type(value).__name__ == "Parameter" else "tensor"
        return (kind, str(value.dtype).split(".")[-1], tuple(value.shape),
                Values(value.detach().tolist()))
    if isinstance(value, (torch.dtype, fusegrad.dtype)):
        return ("dtype", str(value).split(".")[-1])
    if isinstance(value, type):
        return ("class", value.__name__)
    return value


def outcome(program, lib):
    """('ok', plain result) or (exception type name, message) of `program(lib)`, run with
    the same seed in each library; warnings as (category, message) pairs."""
    lib.manual_seed(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = ("ok", plain(program(lib)))
        except Exception as e:  # noqa: BLE001  (the exception is what is compared)
            # PyTorch's C++ errors end with a stack trace: the message is what precedes it
            result = (type(e).__name__, str(e).split("\nException raised from")[0].rstrip())
    return result, [(w.category.__name__, str(w.message)) for w in caught]


def same_outcome(program, warns: bool = True):
    """Both libraries return the same (or raise the same error), with the same warnings
    unless `warns` is false; the outcome."""
    expected, got = (outcome(program, lib) for lib in LIBS)
    if warns:
        assert got == expected
    else:
        assert got[0] == expected[0]
    return expected
