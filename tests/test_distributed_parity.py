"""PyTorch-parity checks of `fusegrad.distributed` that need several ranks.

Each test starts one MPI job that runs this file as a script (`python test_distributed_parity.py
worker`); every rank does all the checks and prints `OK <name>` for each, so a whole batch of
checks costs one launch. A hang makes the job exceed its timeout and the test fail.

Covered: async all-reduces on the ring (large tensors) waited in different orders or with
point-to-point traffic in between, `new_group(use_local_synchronization=True)` called by the
members only, SyncBatchNorm against BatchNorm on the concatenated batch, object collectives,
all-to-all, reduce_scatter, batched point-to-point and PyTorch's error messages.
"""

import os
import subprocess
import sys
from pathlib import Path

if __name__ != "__main__":
    import pytest

    pytest.importorskip("mpi4py")

    from fusegrad.distributed.run import find_mpiexec, mpiexec_command

    try:
        MPIEXEC = find_mpiexec()
    except RuntimeError:
        pytest.skip("mpiexec is not installed", allow_module_level=True)

SRC = str(Path(__file__).parents[1] / "src")
CHECKS = ["ring_wait_order", "ring_p2p_between", "local_sync_group", "sync_batch_norm",
          "sync_batch_norm_2d", "sync_batch_norm_eval", "broadcast_object_list",
          "object_collectives", "all_to_all", "reduce_scatter", "batch_isend_irecv",
          "group_ranks", "availability", "reduce_op_errors", "p2p_errors", "work_result",
          "expanded_all_reduce", "done"]


def _run(nproc):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    cmd = mpiexec_command(nproc, [__file__, "worker"], MPIEXEC)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=150, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    passed = [line[3:] for line in out.splitlines() if line.startswith("OK ")]
    for name in CHECKS:
        assert passed.count(name) == nproc, (name, out)


def test_parity_two_ranks():
    _run(2)


def test_parity_three_ranks():
    _run(3)


# ----------------------------------------------------------------------------- the worker


def _worker():  # noqa: C901 - one flat list of checks, each reported by name
    import datetime

    import numpy as np

    import fusegrad as torch
    import fusegrad.distributed as dist
    from fusegrad import nn

    dist.init_process_group("cpu:gloo", timeout=datetime.timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()

    def ok(name):
        print(f"OK {name}", flush=True)

    def raises(kind, text, fn):
        try:
            fn()
        except kind as exc:
            assert text in str(exc), (text, str(exc))
            return
        raise AssertionError(f"no {kind.__name__} ({text})")

    n = 300_000     # 1.2 MB of float32: the ring all-reduce
    total = sum(range(1, world + 1))
    a, b = torch.ones(n) * (rank + 1), torch.ones(n) * (rank + 10)
    wa = dist.all_reduce(a, async_op=True)
    wb = dist.all_reduce(b, async_op=True)
    for w in ((wa, wb) if rank % 2 == 0 else (wb, wa)):
        w.wait()
    assert float(a[0]) == float(a[-1]) == total
    assert float(b[-1]) == total + 9 * world
    ok("ring_wait_order")

    x = torch.ones(n) * (rank + 1)
    w = dist.all_reduce(x, async_op=True)
    t = torch.zeros(1)
    if rank == 0:
        for src in range(1, world):
            dist.recv(t, src=src)
            assert float(t[0]) == src
        w.wait()
    else:
        w.wait()
        dist.send(torch.ones(1) * rank, dst=0)
    assert float(x[0]) == float(x[-1]) == total
    ok("ring_p2p_between")

    if rank in (0, 1):
        g = dist.new_group([0, 1], use_local_synchronization=True)
        y = torch.ones(2) * (rank + 1)
        dist.all_reduce(y, group=g)
        assert y.tolist() == [3.0, 3.0]
        assert dist.get_process_group_ranks(g) == [0, 1]
    dist.barrier()
    ok("local_sync_group")

    # SyncBatchNorm: rank r holds r + 2 samples of one global batch; the reference is
    # BatchNorm on the whole batch in this process, the loss the sum of all ranks' losses.
    def sync_bn(shape, momentum, name):
        counts = [r + 2 for r in range(world)]
        lo, hi = sum(counts[:rank]), sum(counts[:rank + 1])
        rng = np.random.default_rng(0)
        data = (rng.standard_normal((sum(counts), *shape)) * 3 + 5).astype(np.float32)
        upstream = rng.standard_normal(data.shape).astype(np.float32)
        sbn = nn.SyncBatchNorm(shape[0], momentum=momentum)
        ref = (nn.BatchNorm1d if len(shape) < 3 else nn.BatchNorm2d)(shape[0],
                                                                    momentum=momentum)
        with torch.no_grad():
            for m in (sbn, ref):
                m.weight.copy_(torch.arange(1.0, shape[0] + 1))
                m.bias.copy_(torch.arange(shape[0]) * 0.5)
        for _ in range(2):
            xs = torch.from_numpy(data[lo:hi].copy()).requires_grad_(True)
            xr = torch.from_numpy(data.copy()).requires_grad_(True)
            ys, yr = sbn(xs), ref(xr)
            (ys * torch.from_numpy(upstream[lo:hi])).sum().backward()
            (yr * torch.from_numpy(upstream)).sum().backward()
            np.testing.assert_allclose(ys.detach().numpy(), yr.detach().numpy()[lo:hi],
                                       atol=2e-6, rtol=1e-5)
            np.testing.assert_allclose(xs.grad.numpy(), xr.grad.numpy()[lo:hi], atol=2e-5,
                                       rtol=1e-5)
            for p, q in ((sbn.weight, ref.weight), (sbn.bias, ref.bias)):
                grad = p.grad.clone()       # per-rank, as in PyTorch: DDP averages them
                dist.all_reduce(grad)
                np.testing.assert_allclose(grad.numpy(), q.grad.numpy(), atol=1e-4,
                                           rtol=1e-5)
            np.testing.assert_allclose(sbn.running_mean.numpy(), ref.running_mean.numpy(),
                                       atol=1e-6, rtol=1e-6)
            np.testing.assert_allclose(sbn.running_var.numpy(), ref.running_var.numpy(),
                                       atol=1e-5, rtol=1e-6)
        assert int(sbn.num_batches_tracked) == 2
        ok(name)
        return sbn, ref, data[lo:hi]

    sync_bn((3,), 0.1, "sync_batch_norm")
    sbn, ref, local = sync_bn((2, 3, 2), None, "sync_batch_norm_2d")
    sbn.eval()
    ref.eval()
    xs = torch.from_numpy(local.copy())
    np.testing.assert_allclose(sbn(xs).detach().numpy(), ref(xs).detach().numpy(), atol=1e-6)
    converted = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.BatchNorm1d(3)))
    assert isinstance(converted[0], nn.SyncBatchNorm)
    ok("sync_batch_norm_eval")

    obj = {"from": rank}
    items = [obj, 2] if rank == 0 else [None, None]
    dist.broadcast_object_list(items, src=0)
    assert items == [{"from": 0}, 2]
    assert (items[0] is obj) == (rank == 0)
    bad = [None] * (3 if rank == 1 else 2)
    if rank == 1:
        raises(RuntimeError, "items", lambda: dist.broadcast_object_list(bad, src=0))
    else:
        dist.broadcast_object_list(bad, src=0)
    ok("broadcast_object_list")

    gathered = [None] * world if rank == 0 else None
    dist.gather_object({"r": rank}, gathered, dst=0)
    if rank == 0:
        assert gathered == [{"r": r} for r in range(world)]
    out = [None]
    dist.scatter_object_list(out, [{"i": i} for i in range(world)] if rank == 1 else None,
                             src=1)
    assert out == [{"i": rank}]
    if rank == 0:
        dist.send_object_list([1, "a", {"x": 2}], dst=1)
    elif rank == 1:
        got = [None] * 3
        assert dist.recv_object_list(got, src=0) == 0
        assert got == [1, "a", {"x": 2}]
    ok("object_collectives")

    inp = torch.arange(2.0 * world) + 100 * rank
    outp = torch.zeros(2 * world)
    dist.all_to_all_single(outp, inp)
    assert outp.tolist() == [100.0 * r + 2 * rank + k for r in range(world) for k in range(2)]
    # Rank r sends r + j + 1 rows of width 2 to rank j.
    sends = [rank + j + 1 for j in range(world)]
    recvs = [r + rank + 1 for r in range(world)]
    inp = (torch.arange(2.0 * sum(sends)) + 1000 * rank).reshape(-1, 2)
    outp = torch.zeros(sum(recvs), 2)
    dist.all_to_all_single(outp, inp, recvs, sends)
    start = 0
    for r in range(world):
        first = sum(r + j + 1 for j in range(rank))       # rank r's rows before ours
        expect = np.arange(2.0 * (r + 5 * world)).reshape(-1, 2)[first:first + recvs[r]]
        np.testing.assert_array_equal(outp.numpy()[start:start + recvs[r]], expect + 1000 * r)
        start += recvs[r]
    ins = [torch.full((rank + 1,), float(10 * rank + i)) for i in range(world)]
    outs = [torch.zeros(r + 1) for r in range(world)]
    dist.all_to_all(outs, ins)
    assert [o.tolist() for o in outs] == [[float(10 * r + rank)] * (r + 1) for r in range(world)]
    ok("all_to_all")

    out = torch.zeros(2)
    dist.reduce_scatter(out, [torch.ones(2) * (rank + 1 + i) for i in range(world)])
    assert out.tolist() == [float(total + world * rank)] * 2
    ok("reduce_scatter")

    right, left = (rank + 1) % world, (rank - 1) % world
    got = torch.zeros(2)
    ops = [dist.P2POp(dist.isend, torch.ones(2) * rank, right),
           dist.P2POp(dist.irecv, got, left)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert got.tolist() == [float(left)] * 2
    raises(ValueError, "Invalid ``op``", lambda: dist.P2POp(dist.send, got, right))
    w = dist.irecv(torch.zeros(1))
    dist.send(torch.ones(1), dst=right)
    assert w.source_rank() == left
    raises(RuntimeError, "sourceRank()", lambda: dist.isend(torch.ones(1), right).source_rank())
    dist.recv(torch.zeros(1), src=left)
    ok("batch_isend_irecv")

    assert dist.get_global_rank(dist.group.WORLD, 1) == 1
    assert dist.get_group_rank(dist.group.WORLD, 1) == 1
    assert dist.get_process_group_ranks(dist.group.WORLD) == list(range(world))
    g = dist.new_group([world - 1])
    if rank == world - 1:
        assert dist.get_global_rank(g, 0) == world - 1
        assert dist.get_group_rank(g, world - 1) == 0
        raises(ValueError, "Group rank 3 is not part of group", lambda: dist.get_global_rank(g, 3))
        raises(ValueError, "Global rank 0 is not part of group", lambda: dist.get_group_rank(g, 0))
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=20))
    ok("group_ranks")

    assert dist.is_gloo_available() and not dist.is_nccl_available()
    assert dist.is_torchelastic_launched() == ("TORCHELASTIC_RUN_ID" in os.environ)
    assert issubclass(dist.DistBackendError, dist.DistError)
    assert issubclass(dist.DistError, RuntimeError)
    ok("availability")

    for op in ("BAND", "BOR", "BXOR"):
        raises(RuntimeError, f"Cannot use ReduceOp.{op} with non-integral dtype",
               lambda op=op: dist.all_reduce(torch.ones(2), op=getattr(dist.ReduceOp, op)))
    raises(RuntimeError, "can't be cast to the desired output type Long",
           lambda: dist.all_reduce(torch.ones(2, dtype=torch.int64), op=dist.ReduceOp.AVG))
    raises(ValueError, "all_reduce does not support RedOpType.PRODUCT on complex tensors",
           lambda: dist.all_reduce(torch.ones(2, dtype=torch.complex64),
                                   op=dist.ReduceOp.PRODUCT))
    raises(RuntimeError, "ProcessGroupGloo::broadcast: invalid root rank: 7",
           lambda: dist.broadcast(torch.ones(1), src=7))
    flags = torch.tensor([True, False, rank == 0, True])
    dist.all_reduce(flags, op=dist.ReduceOp.BXOR)
    assert flags.tolist() == [world % 2 == 1, False, True, world % 2 == 1]
    avg = torch.ones(2) * (rank + 1)
    dist.all_reduce(avg, op=dist.ReduceOp.AVG)
    assert avg.tolist() == [total / world] * 2
    ok("reduce_op_errors")

    raises(RuntimeError, "Tag must be nonnegative",
           lambda: dist.isend(torch.ones(1), dst=right, tag=-1))
    raises(RuntimeError, "Tag must be nonnegative",
           lambda: dist.irecv(torch.ones(1), src=left, tag=-1))
    raises(ValueError, "Invalid destination rank: destination rank should not be the same",
           lambda: dist.send(torch.ones(1), dst=rank))
    ok("p2p_errors")

    w = dist.all_reduce(torch.ones(3), async_op=True)
    w.wait()
    assert [t.tolist() for t in w.result()] == [[float(world)] * 3]
    w = dist.isend(torch.ones(1), right)
    dist.recv(torch.zeros(1), src=left)
    w.wait()
    raises(RuntimeError, "result() not implemented", w.result)
    ok("work_result")

    base = torch.ones(1)
    view = base.expand(3)
    dist.all_reduce(view)
    assert view.tolist() == [float(world)] * 3 and base.tolist() == [float(world)]
    ok("expanded_all_reduce")

    dist.barrier()
    dist.destroy_process_group()
    ok("done")


if __name__ == "__main__" and sys.argv[1:] == ["worker"]:
    _worker()
