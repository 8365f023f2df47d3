"""`fusegrad.backends`: the backend switches PyTorch programs set and query.

fusegrad computes with NumPy on the CPU, so the answers are those of PyTorch's CPU build on a
machine without CUDA or MPS: cuDNN and MPS are unavailable, their flags are recorded and read
back (setting `cudnn.benchmark` changes nothing here, as it changes nothing on a CPU-only
PyTorch).
"""

from __future__ import annotations

from . import cpu, cuda, cudnn, mha, mkl, mkldnn, mps, openmp, opt_einsum

__all__ = ["cpu", "cuda", "cudnn", "mha", "mkl", "mkldnn", "mps", "openmp", "opt_einsum"]
