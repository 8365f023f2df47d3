"""`fusegrad.cuda.sparse`, as `torch.cuda.sparse` in PyTorch's CPU build: the sparse CUDA
typed classes (`FloatTensor`, `LongTensor`, ...; no bool one), which answer `dtype`,
`is_cuda`, `is_sparse`, `layout` and `isinstance` (always False) and refuse construction
with PyTorch's "not compiled with CUDA" TypeError."""

from __future__ import annotations

from .._legacy_types import make_types

globals().update(make_types(__name__, sparse=True))
