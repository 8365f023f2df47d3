"""The op registry (`REGISTRY`) and the modules that fill it."""

# Importing the modules registers their ops.
from . import (  # noqa: F401
    activation,
    arithmetic,
    attention,
    batch_norm_backward,
    comparison,
    complex,
    conv,
    conv_backward,
    embedding,
    factorizations,
    fft,
    incomplete_gamma,
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
    sparse,
    sparse_twins,
    special,
    special_functions,
    statistics,
    unary,
    unpool,
    upsample,
    view_copies,
    views,
)
from .overloads import aten
from .registry import REGISTRY, OpDef, Sample, Spec, register

complex.forbid_complex(REGISTRY)  # after every module registered its ops

__all__ = ["REGISTRY", "OpDef", "Sample", "Spec", "aten", "register"]
