"""`fusegrad.backends`: the backend switches PyTorch programs set and query.

fusegrad computes with NumPy on the CPU, so the answers are those of PyTorch's CPU build on a
machine without CUDA or MPS: cuDNN and MPS are unavailable, their flags are recorded and read
back (setting `cudnn.benchmark` changes nothing here, as it changes nothing on a CPU-only
PyTorch).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import ModuleType

from . import cpu, cuda, cudnn, mha, mkl, mkldnn, mps, openmp, opt_einsum

__all__ = ["cpu", "cuda", "cudnn", "mha", "mkl", "mkldnn", "mps", "openmp", "opt_einsum"]


@contextlib.contextmanager
def _flag_context(module: ModuleType, **values) -> Iterator[None]:
    """Set `module`'s flags for the block (None leaves one as it is), restoring them after."""
    saved = {k: getattr(module, k) for k in values}
    for k, v in values.items():
        if v is not None:
            setattr(module, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(module, k, v)
