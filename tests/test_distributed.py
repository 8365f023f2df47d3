"""Distributed training on MPI: every check runs under `mpiexec` started from here.

Each test starts one MPI job whose ranks run a script of tests/distributed/ that does many
checks (each printing `OK <name>` per rank), so the whole file needs only a few MPI launches.
Collectives are compared with NumPy on every rank, DDP with one process on the whole batch.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mpi4py")

from fusegrad.distributed.run import find_mpiexec, mpiexec_command  # noqa: E402

HERE = Path(__file__).parent / "distributed"
SRC = str(Path(__file__).parents[1] / "src")

try:
    MPIEXEC = find_mpiexec()
except RuntimeError:
    pytest.skip("mpiexec is not installed", allow_module_level=True)


def _env(**extra):
    env = dict(os.environ, OMP_NUM_THREADS="1", **extra)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_job(cmd, timeout=120, **env):
    """(return code, combined output, seconds) of a command that starts an MPI job."""
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=_env(**env))
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start


def run_worker(nproc, scenario, timeout=120, **env):
    return run_job(mpiexec_command(nproc, [str(HERE / "worker.py"), scenario], MPIEXEC),
                   timeout, **env)


def passed(output):
    return [line[3:] for line in output.splitlines() if line.startswith("OK ")]


COLLECTIVES = ["all_reduce", "all_reduce_views_dtypes", "async", "broadcast", "all_gather",
               "reduce_scatter_tensor", "reduce_gather", "scatter", "send_recv",
               "objects_barrier", "init_twice", "large_all_reduce"]
DDP = ["ddp_equivalence", "no_sync", "find_unused_parameters", "unfinished_reduction",
       "module_api_buffers", "shape_mismatch"]


def test_two_ranks_collectives_and_ddp():
    rc, out, _ = run_worker(2, "checks")
    assert rc == 0, out
    for name in [*COLLECTIVES, *DDP, "done"]:
        assert passed(out).count(name) == 2, (name, out)


def test_three_ranks_oversubscribed():
    rc, out, _ = run_worker(3, "three")
    assert rc == 0, out
    for name in [*COLLECTIVES, "new_group", "reinit", "done"]:
        assert passed(out).count(name) == 3, (name, out)


def test_launcher_runs_the_seed_snippets():
    cmd = [sys.executable, "-m", "fusegrad.distributed.run", "--nproc-per-node", "2",
           str(HERE / "seed_snippets.py")]
    rc, out, _ = run_job(cmd, MASTER_PORT="1")   # the launcher's own port wins
    assert rc == 0, out
    envs = sorted(line.split()[1:] for line in out.splitlines() if line.startswith("env "))
    assert envs == [["0", "0", "2", "127.0.0.1", "29500"], ["1", "1", "2", "127.0.0.1", "29500"]]
    sums = {line.split()[-1] for line in out.splitlines()
            if line.startswith("rank ") and " checksum " in line}
    assert len(sums) == 1, out


def test_demo_ddp_prints_rank_zero_lines():
    cmd = [sys.executable, "-m", "fusegrad", "demo", "--ddp", "2", "--model", "mlp",
           "--epochs", "1", "--no-progress"]
    rc, out, _ = run_job(cmd)
    assert rc == 0, out
    assert out.count("Epoch 00 |") == 1 and out.count("Done: 1 epochs") == 1, out


@pytest.mark.parametrize("scenario, evidence", [
    ("kill", "exited on\nsignal 9"),
    ("raise", "ValueError: rank 1 failed on purpose"),
    ("stall", "did not complete within the timeout of 3 s"),
])
def test_a_failed_rank_ends_the_job_within_the_timeout(scenario, evidence):
    rc, out, seconds = run_worker(2, scenario, timeout=60, WORKER_TIMEOUT="3")
    assert rc != 0, out
    assert "rank 0 training" in out, out      # it failed mid-training, not at start-up
    assert evidence in out, out
    assert "OK done" not in out
    assert seconds < 45, seconds
