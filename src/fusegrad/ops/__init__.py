"""The op registry (`REGISTRY`) and the modules that fill it."""

# Importing the modules registers their ops.
from . import (  # noqa: F401
    activation,
    indexing,
    inplace,
    linalg,
    misc,
    nn,
    pointwise,
    random,
    reduction,
    shape,
)
from .registry import REGISTRY, OpDef, Sample, Spec, register

__all__ = ["REGISTRY", "OpDef", "Sample", "Spec", "register"]
