"""Freed buffers are reused by the next step without page faults (fusegrad._heap), and a
program that tunes glibc's malloc itself keeps its own settings."""

import os
import platform
import subprocess
import sys

import pytest

from fusegrad import _heap

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="glibc's malloc thresholds")

# A step's pattern: eight 1.2 MB buffers made, touched and freed, repeated; prints the minor
# page faults per repetition after three to warm up.
STEPS = """
import resource, sys
import numpy as np
if sys.argv[1] == "fusegrad":
    import fusegrad
def step():
    bufs = [np.ones(300_000, np.float32) for _ in range(8)]
    del bufs
for _ in range(3):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    step()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20)
"""


def faults_per_step(library: str, **env: str) -> float:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    environ.pop("GLIBC_TUNABLES", None)
    out = subprocess.run([sys.executable, "-c", STEPS, library], env={**environ, **env},
                         capture_output=True, text=True, check=True)
    return float(out.stdout)


def test_steps_reuse_freed_buffers_without_page_faults():
    # NumPy alone gives the pages back between steps (each of the 8 buffers faults its
    # ~290 pages in again); with fusegrad imported the heap keeps them.
    assert faults_per_step("numpy") > 1000
    assert faults_per_step("fusegrad") < 50


def test_user_malloc_settings_are_left_alone():
    assert faults_per_step("fusegrad", MALLOC_TRIM_THRESHOLD_="131072") > 1000
    assert _heap.user_tuned({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=131072"})
    assert _heap.user_tuned({"MALLOC_MMAP_THRESHOLD_": "65536"})
    assert not _heap.user_tuned({"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2"})
