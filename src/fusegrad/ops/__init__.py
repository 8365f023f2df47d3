"""The op registry (`REGISTRY`) and the modules that fill it."""

from . import inplace, linalg, pointwise, reduction, shape  # noqa: F401  (register the ops)
from .registry import REGISTRY, OpDef, Sample, Spec, register

__all__ = ["REGISTRY", "OpDef", "Sample", "Spec", "register"]
