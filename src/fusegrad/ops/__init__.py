"""The op registry (`REGISTRY`) and the modules that fill it."""

import sys

# Importing the modules registers their ops.
from . import (  # noqa: F401
    activation,
    activation_backward,
    arithmetic,
    comparison,
    complex,
    deferred,
    incomplete_gamma,
    indexing,
    inplace,
    joins,
    linalg,
    math_special,
    misc,
    nn,
    norms,
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
    sorting,
    special,
    statistics,
    unary,
    view_copies,
    views,
)
from .overloads import aten
from .registry import REGISTRY, OpDef, Sample, Spec, register

complex.forbid_complex(REGISTRY)  # after every module above registered its ops
# Run on first use (`deferred`): the layers' kernels, factorizations and solvers, FFT, sparse
# twins, the rarer special functions, and the facts of out= (read at the first out= call).
deferred.defer(sys.modules[__name__], (
    "attention", "batch_norm_backward", "conv", "conv_backward", "embedding", "factorizations",
    "fft", "layers", "loss", "lu", "normalization", "padding", "pooling",
    "out_facts", "solvers", "sparse", "sparse_twins", "special_functions", "unpool", "upsample",
    "weight_norm"))

__all__ = ["REGISTRY", "OpDef", "Sample", "Spec", "aten", "register"]
