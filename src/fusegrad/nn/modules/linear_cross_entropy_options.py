"""LinearCrossEntropyOptions: how PyTorch's fused linear + cross entropy may chunk its
work. The result does not depend on them; fusegrad computes the logits whole and accepts
the options for programs that pass them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LinearCrossEntropyOptions:
    """Memory/accuracy settings of `linear_cross_entropy`'s chunked path."""

    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str | None = "auto"
    acc_policy: str = "auto"
    acc_dtype: object = None


__all__ = ["LinearCrossEntropyOptions"]
