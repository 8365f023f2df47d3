"""The op registry (`REGISTRY`) and the modules that fill it."""

# Importing the modules registers their ops.
from . import (  # noqa: F401
    activation,
    attention,
    indexing,
    inplace,
    layers,
    linalg,
    loss,
    misc,
    nn,
    normalization,
    padding,
    pointwise,
    random,
    reduction,
    rnn,
    scalar,
    shape,
    shrink,
    special,
    upsample,
)
from .registry import REGISTRY, OpDef, Sample, Spec, register

__all__ = ["REGISTRY", "OpDef", "Sample", "Spec", "register"]
