"""Where the helper threads run: the intra-op pool's thread i and C worker i keep to the
same CPU, the (i + 1)-th this process may use (`_parallel.helper_cpus`), unless
`FUSEGRAD_PIN_THREADS=0`; the calling thread is left free."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fusegrad
from fusegrad import _cbuild
from fusegrad.ops import _parallel

SRC = str(Path(fusegrad.__file__).resolve().parent.parent)

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs CPU affinity and two CPUs")

# Starts a pool thread and (with a C compiler) a C worker, then prints each thread's name
# and CPUs.
PROGRAM = """
import json, os
import numpy as np
import fusegrad
from fusegrad.ops import _gemm, _parallel
fusegrad.set_num_threads(2)
a = np.ones((512, 512), np.float32)
_gemm.matmul(a, a)
_parallel.share_by_cost(lambda i, j: None, 4, 1 << 30, "probe")
threads = {}
for tid in os.listdir("/proc/self/task"):
    with open(f"/proc/self/task/{tid}/comm") as f:
        name = f.read().strip()
    threads[tid] = [name, sorted(os.sched_getaffinity(int(tid)))]
print(json.dumps([os.getpid(), threads, [t.native_id for t in __import__("threading").enumerate()
                                         if t.name.startswith("fusegrad-intraop")]]))
"""


def _threads(**env) -> tuple[int, dict, list[int]]:
    out = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "2", **env},
                         timeout=120, check=True)
    pid, threads, pool = json.loads(out.stdout.strip().splitlines()[-1])
    return pid, threads, pool


def test_helper_cpus_rule(monkeypatch):
    allowed = sorted(os.sched_getaffinity(0))
    cpus = _parallel.helper_cpus()
    assert len(cpus) == _parallel.MAX_HELPERS
    assert cpus[:3] == [allowed[(i + 1) % len(allowed)] for i in range(3)]
    monkeypatch.setenv("FUSEGRAD_PIN_THREADS", "0")
    assert _parallel.helper_cpus() == []


def test_pool_thread_and_c_worker_share_a_cpu_and_the_caller_is_free():
    allowed = sorted(os.sched_getaffinity(0))
    pid, threads, pool = _threads()
    assert threads[str(pid)][1] == allowed  # the calling thread: as it was
    assert [threads[str(t)][1] for t in pool] == [[allowed[1]]]
    workers = [cpus for name, cpus in threads.values() if name == "fusegrad-worker"]
    if _cbuild.compiler() is not None:
        assert workers == [[allowed[1]]]


def test_no_pinning_when_asked():
    allowed = sorted(os.sched_getaffinity(0))
    pid, threads, pool = _threads(FUSEGRAD_PIN_THREADS="0")
    assert all(cpus == allowed for _, cpus in threads.values())
    assert len(pool) == 1
