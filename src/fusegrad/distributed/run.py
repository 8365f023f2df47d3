"""`python -m fusegrad.distributed.run --nproc-per-node N script.py args`: torchrun.

Starts N ranks of `script.py` on this machine with torchrun's environment on every rank:
RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT. With
`--transport mpi` (the default when an `mpiexec` is found beside the Python interpreter, on
PATH, or in FUSEGRAD_MPIEXEC) they start through `mpiexec` and their groups run on MPI; with
`--transport tcp` (the default without one) they are plain processes whose groups meet at
MASTER_ADDR:MASTER_PORT and talk over TCP. The exit status is non-zero when any rank fails,
and then the others have been stopped.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time


def find_mpiexec() -> str:
    """The mpiexec to use: FUSEGRAD_MPIEXEC, the one beside this Python, or PATH's."""
    explicit = os.environ.get("FUSEGRAD_MPIEXEC")
    if explicit:
        return explicit
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.access(beside, os.X_OK):
        return beside
    found = shutil.which("mpiexec")
    if found is None:
        raise RuntimeError("mpiexec not found: install the distributed extra "
                           "(`pip install 'fusegrad[distributed]'`) or set FUSEGRAD_MPIEXEC")
    return found


def mpiexec_command(nproc: int, target: list[str], mpiexec: str | None = None) -> list[str]:
    """The mpiexec command line that runs `target` (`[-m] name args...`) on `nproc` ranks."""
    cmd = [mpiexec or find_mpiexec(), "-n", str(nproc)]
    # Open MPI refuses root without this flag, and more ranks than cores without the other;
    # ranks are not pinned to cores so that they share a busy machine as ordinary processes.
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    if nproc > (os.cpu_count() or 1):
        cmd.append("--oversubscribe")
    cmd += ["--bind-to", "none"]
    return [*cmd, sys.executable, "-m", "fusegrad.distributed._rank_env", *target]


def _nproc(value: str) -> int:
    if value in ("cpu", "auto"):
        return os.cpu_count() or 1
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError("--nproc-per-node must be at least 1")
    return n


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """torchrun's options that apply to one machine."""
    parser = argparse.ArgumentParser(
        prog="python -m fusegrad.distributed.run",
        description="Start N ranks of a training script on this machine (torchrun on MPI).")
    parser.add_argument("--nproc-per-node", "--nproc_per_node", type=_nproc, default=1,
                        help="number of ranks (an integer, or 'cpu'/'auto' for one per core)")
    parser.add_argument("--nnodes", default="1", help="only 1 (one machine) is supported")
    parser.add_argument("--node-rank", "--node_rank", type=int, default=0)
    parser.add_argument("--master-addr", "--master_addr", default="127.0.0.1")
    parser.add_argument("--master-port", "--master_port", type=int, default=29500)
    parser.add_argument("--standalone", action="store_true", help="accepted; always one node")
    parser.add_argument("--transport", choices=("auto", "mpi", "tcp"), default="auto",
                        help="start the ranks through mpiexec (mpi) or as plain processes "
                             "meeting over TCP (tcp); auto: mpi when mpiexec is found")
    parser.add_argument("-m", "--module", action="store_true",
                        help="run the target as a module (python -m)")
    parser.add_argument("training_script")
    parser.add_argument("training_script_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.nnodes not in ("1", "1:1"):
        parser.error("only --nnodes 1 is supported: ranks run on this machine")
    return args


def rank_env(env: dict, rank: int, nproc: int) -> dict:
    """torchrun's per-rank variables for rank `rank` of `nproc` on this one machine."""
    values = {"RANK": rank, "LOCAL_RANK": rank, "WORLD_SIZE": nproc,
              "LOCAL_WORLD_SIZE": nproc, "GROUP_RANK": 0, "ROLE_RANK": rank,
              "ROLE_WORLD_SIZE": nproc}
    return dict(env, **{k: str(v) for k, v in values.items()})


def run_tcp(nproc: int, target: list[str], env: dict) -> int:
    """Start `nproc` processes of `target`; when one fails, stop the others. Returns the first
    failure's exit status (0 when all succeed)."""
    command = [sys.executable, *target]
    procs = [subprocess.Popen(command, env=rank_env(env, r, nproc)) for r in range(nproc)]
    status = 0
    try:
        running = list(procs)
        while running:
            for proc in list(running):
                code = proc.poll()
                if code is None:
                    continue
                running.remove(proc)
                if code != 0 and status == 0:
                    status = code if code > 0 else 128 - code
                    for other in running:       # as torchrun: one failure ends the job
                        other.send_signal(signal.SIGTERM)
            time.sleep(0.05)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return status


def main(argv: list[str] | None = None) -> int:
    """Run the script on N ranks; return the job's exit status."""
    args = parse_args(argv)
    env = dict(os.environ, MASTER_ADDR=args.master_addr, MASTER_PORT=str(args.master_port))
    if args.nproc_per_node > 1 and "OMP_NUM_THREADS" not in env:
        # As torchrun does: N ranks each using every core would oversubscribe the machine.
        env["OMP_NUM_THREADS"] = "1"
    module = ["-m"] if args.module else []
    target = [*module, args.training_script, *args.training_script_args]
    transport = args.transport
    if transport == "auto":
        try:
            find_mpiexec()
            transport = "mpi"
        except RuntimeError:
            transport = "tcp"
    if transport == "tcp":
        return run_tcp(args.nproc_per_node, target, env)
    return subprocess.call(mpiexec_command(args.nproc_per_node, target), env=env)


if __name__ == "__main__":
    sys.exit(main())
