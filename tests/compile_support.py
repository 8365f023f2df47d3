"""Shared by the compile tests (imports no torch, so the 3.12/3.13 runs can use it).

`Counter` is the tests' backend: it counts the graphs it is given and hands fusegrad's graphs
to an inner backend, `FUSEGRAD_TEST_BACKEND` (`eager`, the default, `aot_eager` or
`inductor`), so one test file runs against each stage of the compiler:
`FUSEGRAD_TEST_BACKEND=inductor pytest tests/test_compile_*.py`.
"""

from __future__ import annotations

import os
import sys

BACKENDS = ("eager", "aot_eager", "inductor")
# The Python versions whose bytecode capture reads (others run the functions eagerly).
CAPTURES = sys.version_info[:2] in ((3, 11), (3, 12), (3, 13))


def test_backend() -> str:
    """The inner backend selected for this test run (`FUSEGRAD_TEST_BACKEND`)."""
    name = os.environ.get("FUSEGRAD_TEST_BACKEND", "eager")
    if name not in BACKENDS:
        raise ValueError(f"FUSEGRAD_TEST_BACKEND={name!r}; expected one of {BACKENDS}")
    return name


test_backend.__test__ = False  # a helper, not a test


class Counter:
    """A backend that counts the graphs it is given and their ops (call_function and
    call_method nodes), keeps them (`modules`), and compiles fusegrad's graphs with `inner`
    (by default the run's `FUSEGRAD_TEST_BACKEND`); torch's graphs run as they are."""

    def __init__(self, inner: str | None = None):
        self.inner = inner or test_backend()
        self.graphs = 0
        self.ops = 0
        self.modules = []

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        self.modules.append(gm)
        self.ops += sum(n.op in ("call_function", "call_method") for n in gm.graph.nodes)
        if self.inner == "eager" or not type(gm).__module__.startswith("fusegrad"):
            return gm.forward
        from fusegrad.compiler import lookup_backend

        return lookup_backend(self.inner)(gm, example_inputs)


def tolerances(dtype) -> dict:
    """`assert_allclose` tolerances for compiled against eager values: float32 through the
    generated code within eager's float32 tolerances (fused kernels accumulate in double and
    use their own vectorised math, so the last bits may differ), anything else tight."""
    if test_backend() == "inductor" and str(dtype).rsplit(".", 1)[-1] in (
            "float32", "float16", "bfloat16"):
        return {"rtol": 1e-5, "atol": 1e-5}
    return {"rtol": 1e-12, "atol": 1e-12}


def compiled(fn, **kwargs):
    """`fusegrad.compile(fn, **kwargs)` with a new `Counter` as its backend: (the compiled
    function, the counter)."""
    import fusegrad

    counter = Counter()
    return fusegrad.compile(fn, backend=counter, **kwargs), counter
