"""`fusegrad.backends.cpu`: the CPU's vector capability, as PyTorch names it."""

from __future__ import annotations


def get_cpu_capability() -> str:
    """'AVX512', 'AVX2' or 'DEFAULT' (on x86, from the CPU flags); 'DEFAULT' elsewhere."""
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        return "DEFAULT"
    # PyTorch's AVX512 kernels need the foundation, byte/word, dword/qword and vector-length
    # extensions together.
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags:
        return "AVX512"
    if {"avx2", "fma"} <= flags:
        return "AVX2"
    return "DEFAULT"
