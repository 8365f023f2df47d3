"""The op registry (`REGISTRY`) and the modules that fill it."""

# Importing the modules registers their ops.
from . import (  # noqa: F401
    activation,
    attention,
    conv,
    decompositions,
    embedding,
    indexing,
    inplace,
    layers,
    linalg,
    loss,
    lu,
    math_special,
    misc,
    nn,
    normalization,
    padding,
    pointwise,
    pooling,
    random,
    reduction,
    rnn,
    scalar,
    scatter,
    shape,
    shape_extra,
    shrink,
    solvers,
    special,
    statistics,
    upsample,
)
from .registry import REGISTRY, OpDef, Sample, Spec, register

__all__ = ["REGISTRY", "OpDef", "Sample", "Spec", "register"]
