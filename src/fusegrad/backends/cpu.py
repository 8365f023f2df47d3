"""`fusegrad.backends.cpu`: the CPU's vector capability, as PyTorch names it."""

from __future__ import annotations

from ..ops._util import cpu_capability


def get_cpu_capability() -> str:
    """'AVX512', 'AVX2' or 'DEFAULT' (on x86, from the CPU flags); 'DEFAULT' elsewhere."""
    return cpu_capability()
