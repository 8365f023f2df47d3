"""Distributed costs on this machine: all_reduce bandwidth and DDP training throughput.

fusegrad.distributed (MPI) beside torch.distributed with gloo, in the same MPI job:
- all_reduce of 1 KiB ... 64 MiB float32 tensors between 2 local ranks: algorithm bandwidth
  (tensor bytes / time per all_reduce), median of timed repetitions;
- a DDP training step (SGD) of an MLP 784-1024-1024-10 on a batch of 256 per rank, on 2 ranks
  and on 1 rank: samples per second over all ranks; beside it the same step without DDP run
  on every rank at once, which separates DDP's cost from how the ranks share the cores. The
  four configurations take turns for 5 rounds of 3 steps; each figure is the best round.

Run: `python benchmarks/distributed.py` (add `--quick` for fewer repetitions). It starts the
MPI jobs itself (`mpiexec` of the distributed extra); both libraries use one thread per rank.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

SIZES = [1 << k for k in range(10, 27, 2)]   # bytes: 1 KiB, 4 KiB, ..., 64 MiB
BATCH = 256


def _fmt_size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def _time_all_reduce(run, barrier, nbytes: int, quick: bool) -> float:
    """Median seconds of one all_reduce of `nbytes` (after warm-up).

    The repetition count depends only on the size: every rank must run the same collectives."""
    run()
    run()
    reps = max(5 if quick else 12, min(100, (1 << (24 if quick else 26)) // nbytes))
    times = []
    for _ in range(reps):
        barrier()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _mlp(lib):
    lib.manual_seed(0)
    nn = lib.nn
    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 10))


def _training_step(lib, ddp: bool):
    """A closure running one SGD step of the MLP (wrapped in DDP when `ddp`)."""
    model = _mlp(lib)
    if ddp:
        model = lib.nn.parallel.DistributedDataParallel(model)
    opt = lib.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = lib.nn.CrossEntropyLoss()
    x = lib.randn(BATCH, 784)
    y = lib.randint(0, 10, (BATCH,))

    def step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    step()
    step()
    return step


def _throughputs(configs: list, steps: int, rounds: int, world: int) -> list[float]:
    """Best samples/s (all ranks together) of each (step, barrier) config over `rounds`
    rounds of `steps` steps; the configs take turns, so a change of load hits all of them."""
    best = [0.0] * len(configs)
    for _ in range(rounds):
        for i, (step, barrier) in enumerate(configs):
            barrier()
            start = time.perf_counter()
            for _ in range(steps):
                step()
            barrier()
            best[i] = max(best[i], steps * BATCH * world / (time.perf_counter() - start))
    return best


def worker(quick: bool) -> None:
    """One rank: both libraries' measurements; rank 0 prints result lines."""
    import torch
    import torch.distributed as tdist

    import fusegrad
    import fusegrad.distributed as fdist

    torch.set_num_threads(1)
    os.environ["RANK"] = os.environ["OMPI_COMM_WORLD_RANK"]
    os.environ["WORLD_SIZE"] = os.environ["OMPI_COMM_WORLD_SIZE"]
    tdist.init_process_group("gloo")
    fdist.init_process_group("gloo")
    rank, world = fdist.get_rank(), fdist.get_world_size()
    if world > 1:
        for nbytes in SIZES:
            f = fusegrad.ones(nbytes // 4)
            t = torch.ones(nbytes // 4)
            ft = _time_all_reduce(lambda f=f: fdist.all_reduce(f), fdist.barrier, nbytes, quick)
            tt = _time_all_reduce(lambda t=t: tdist.all_reduce(t), tdist.barrier, nbytes, quick)
            if rank == 0:
                print(f"allreduce {nbytes} {ft} {tt}", flush=True)
    configs = [(_training_step(fusegrad, True), fdist.barrier),
               (_training_step(torch, True), tdist.barrier),
               (_training_step(fusegrad, False), fdist.barrier),
               (_training_step(torch, False), tdist.barrier)]
    figures = _throughputs(configs, 3, 2 if quick else 5, world)
    if rank == 0:
        print(f"ddp {world}", *figures, flush=True)
    fdist.destroy_process_group()
    tdist.destroy_process_group()


def _job(nproc: int, quick: bool) -> list[str]:
    from fusegrad.distributed.run import mpiexec_command

    here = os.path.abspath(__file__)
    cmd = mpiexec_command(nproc, [here, "--worker"] + (["--quick"] if quick else []))
    env = dict(os.environ, OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(29400 + nproc))
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return out.splitlines()


def main() -> None:
    """Run the jobs and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.quick)
        return
    lines = _job(2, args.quick) + _job(1, args.quick)
    print("all_reduce, 2 ranks, float32 (algorithm bandwidth, MB/s)\n")
    print("| size | fusegrad (MPI) | torch (gloo) | fusegrad / torch |")
    print("|---:|---:|---:|---:|")
    for line in lines:
        if line.startswith("allreduce "):
            _, n, ft, tt = line.split()
            n, ft, tt = int(n), float(ft), float(tt)
            print(f"| {_fmt_size(n)} | {n / ft / 1e6:,.0f} | {n / tt / 1e6:,.0f} | "
                  f"{tt / ft:.2f}x |")
    print(f"\nDDP step, MLP 784-1024-1024-10, batch {BATCH} per rank, SGD (samples/s)\n")
    print("| ranks | fusegrad DDP | torch DDP (gloo) | fusegrad / torch | fusegrad, no DDP | "
          "torch, no DDP |")
    print("|---:|---:|---:|---:|---:|---:|")
    for line in lines:
        if line.startswith("ddp "):
            world, fs, ts, fp, tp = line.split()[1:]
            fs, ts, fp, tp = map(float, (fs, ts, fp, tp))
            print(f"| {world} | {fs:,.0f} | {ts:,.0f} | {fs / ts:.2f}x | {fp:,.0f} | "
                  f"{tp:,.0f} |")


if __name__ == "__main__":
    sys.exit(main())
