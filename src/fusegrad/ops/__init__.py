"""The op registry (`REGISTRY`) and the modules that fill it."""

import sys

from .. import _random_draws, _sparse
from . import deferred

# Kernels' helpers that register no op and that the modules below reach only when a kernel
# runs (`_gemm.matmul(a, b)`): the blocked GEMMs, the intra-op thread pool's sharing, scratch
# buffers, the tie order of sorts; each loads with the first kernel that asks for it.
deferred.defer(sys.modules[__name__], ("_gemm", "_parallel", "_workspace", "_tie_order"),
               registers=False)
# Op modules no Tensor method or import-time table needs, deferred before the modules below
# import them, and first in the order the registry runs pending modules when asked for an
# op it lacks (`addmm`, the losses, quantization).
deferred.defer(sys.modules[__name__], ("nn", "quantize", "random"))

# Importing the modules registers their ops.
from . import (  # noqa: E402, F401
    _native,
    activation,
    activation_backward,
    arithmetic,
    comparison,
    complex,
    indexing,
    inplace,
    joins,
    linalg,
    misc,
    norms,
    rearrange,
    reductions,
    scalar,
    scans,
    shape_extra,
    shifts,
    sorting,
    unary,
    view_copies,
    views,
)
from .overloads import aten  # noqa: E402
from .registry import REGISTRY, OpDef, Sample, Spec, register  # noqa: E402

# The float32 uniform and normal draws' C kernels (`native/random.c`), found through the
# native layer: registered here, not by `random` (run on first use), since the factories
# (`fusegrad.rand`, `randn`) draw through `_random_draws` without it.
_random_draws.use_native_kernels(_native.function)
complex.forbid_complex(REGISTRY)  # after every module above registered its ops
deferred.after_execute(lambda: complex.forbid_complex(REGISTRY))  # and each deferred one's
# Run on first use (`deferred`): less common pointwise math and special functions, scatter
# and statistics, the shrinking activations, RNN cells, the layers' kernels, factorizations
# and solvers, FFT, sparse twins, and the facts of out= (read at the first out= call). A
# name the registry lacks runs them in this order until one registers it: the small modules
# whose ops Tensor methods find by name come first.
deferred.defer(sys.modules[__name__], (
    "math_special", "incomplete_gamma", "special", "scatter", "statistics", "shrink", "rnn",
    "attention", "batch_norm_backward", "conv", "conv_backward", "embedding",
    "factorizations", "fft", "grid_sampler", "layers", "loss", "lu", "normalization",
    "padding", "pooling",
    "out_facts", "segment", "solvers", "sparse", "sparse_twins", "special_functions", "unpool",
    "upsample", "weight_norm"))

_sparse.use_twin_loader(lambda: deferred.execute(sys.modules[__name__].sparse_twins))

__all__ = ["REGISTRY", "OpDef", "Sample", "Spec", "aten", "register"]


def __getattr__(name: str):
    """`ops.<namespace>` of the operators `library.custom_op` registered under it, as
    `torch.ops.<namespace>` (any other missing name is an AttributeError)."""
    library = sys.modules.get(__name__.rpartition(".")[0] + ".library")
    found = library.namespace_of_ops(name) if library is not None else None
    if found is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return found
