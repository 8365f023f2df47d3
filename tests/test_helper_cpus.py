"""Where the helper threads run: the intra-op pool's thread i and C worker i keep to the
same CPU, the (i + 1)-th this process may use (`_parallel.helper_cpus`), unless
`FUSEGRAD_PIN_THREADS=0`; the calling thread is left free, and a C worker on the CPU it
runs on moves to another."""

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
allowed = sorted(os.sched_getaffinity(0))
fusegrad.set_num_threads(2)
a = np.ones((512, 512), np.float32)
_gemm.matmul(a, a)
_parallel.share_by_cost(lambda i, j: None, 4, 1 << 30, "probe")
if "CALLER_CPU" in os.environ:  # one more product with the calling thread on this CPU
    os.sched_setaffinity(0, {allowed[int(os.environ["CALLER_CPU"])]})
    _gemm.matmul(a, a)
    os.sched_setaffinity(0, allowed)
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
    pid, threads, pool = _threads(CALLER_CPU="0")
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


def test_a_c_worker_leaves_the_callers_cpu():
    """With the calling thread on the CPU a C worker keeps to, the worker moves to another
    (a worker there could run none of the pieces while the caller computes)."""
    if _cbuild.compiler() is None:
        pytest.skip("no C compiler")
    allowed = sorted(os.sched_getaffinity(0))
    pid, threads, pool = _threads(CALLER_CPU="1")
    workers = [cpus for name, cpus in threads.values() if name == "fusegrad-worker"]
    assert len(workers) == 1 and len(workers[0]) == 1
    assert workers[0][0] in allowed and workers[0][0] != allowed[1]
    assert [threads[str(t)][1] for t in pool] == [[allowed[1]]]  # the pool thread stays
