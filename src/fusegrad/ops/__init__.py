"""The op registry (`REGISTRY`) and the modules that fill it."""

# Importing the modules registers their ops.
from . import (  # noqa: F401
    activation,
    arithmetic,
    attention,
    comparison,
    conv,
    embedding,
    factorizations,
    indexing,
    inplace,
    joins,
    layers,
    linalg,
    loss,
    lu,
    math_special,
    misc,
    nn,
    normalization,
    norms,
    padding,
    pooling,
    random,
    rearrange,
    reductions,
    rnn,
    scalar,
    scans,
    scatter,
    shape_extra,
    shifts,
    shrink,
    solvers,
    sorting,
    special,
    statistics,
    unary,
    unpool,
    upsample,
    view_copies,
    views,
)
from .overloads import aten
from .registry import REGISTRY, OpDef, Sample, Spec, register

__all__ = ["REGISTRY", "OpDef", "Sample", "Spec", "aten", "register"]
