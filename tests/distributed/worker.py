"""Checks run on every rank under `mpiexec` by tests/test_distributed.py.

`python worker.py SCENARIO` prints `OK <check>` for each check that passed on this rank; a
failed check raises, which ends the whole MPI job with a non-zero status. The scenarios:
`checks` (2 ranks: collectives against NumPy, DDP against one process), `three` (3 ranks:
collectives and groups), `kill` (rank 1 dies mid-training), `stall` (rank 1 stops calling
collectives), `raise` (rank 1 raises mid-training).
"""

import copy
import datetime
import gc
import math
import os
import sys
import time

import numpy as np

import fusegrad as torch
import fusegrad.distributed as dist
from fusegrad import nn

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(
    os.environ.get("WORKER_TIMEOUT", "60"))))
RANK = dist.get_rank()
WORLD = dist.get_world_size()


def ok(name):
    print(f"OK {name}", flush=True)


def data_of(rank, shape, dtype=np.float64):
    """The tensor rank `rank` contributes (every rank can compute every rank's)."""
    rng = np.random.default_rng(100 + rank)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(1, 5, size=shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    return rng.uniform(0.5, 1.5, size=shape).astype(dtype)


def tensor(a):
    return torch.from_numpy(np.array(a))


def check_collectives():
    everyone = lambda shape, dt=np.float64: [data_of(r, shape, dt) for r in range(WORLD)]  # noqa
    for dt in (np.float64, np.float32, np.int64):
        parts = everyone((3, 4), dt)
        for op, ref in ((dist.ReduceOp.SUM, np.sum), (dist.ReduceOp.PRODUCT, np.prod),
                        (dist.ReduceOp.MIN, np.min), (dist.ReduceOp.MAX, np.max)):
            t = tensor(parts[RANK])
            address = t._data.__array_interface__["data"][0]
            version = t._version
            assert dist.all_reduce(t, op=op) is None
            np.testing.assert_allclose(t.numpy(), ref(np.stack(parts), axis=0), rtol=1e-6)
            # In place on the tensor's own memory, and a visible in-place change.
            assert t._data.__array_interface__["data"][0] == address
            assert t._version > version
        t = tensor(parts[RANK])
        if np.dtype(dt).kind == "i":  # PyTorch's gloo refuses to average integers
            try:
                dist.all_reduce(t, op=dist.ReduceOp.AVG)
            except RuntimeError as e:
                assert "can't be cast to the desired output type" in str(e), e
            else:
                raise AssertionError("integer AVG did not raise")
        else:
            dist.all_reduce(t, op=dist.ReduceOp.AVG)
            np.testing.assert_allclose(t.numpy(), np.stack(parts).sum(0) / WORLD, rtol=1e-6)
    ok("all_reduce")
    # A non-contiguous view is reduced into its base's memory.
    parts = everyone((4, 3))
    base = tensor(parts[RANK])
    dist.all_reduce(base.t())
    np.testing.assert_allclose(base.numpy(), np.sum(parts, 0))
    half = tensor(parts[RANK]).to(torch.bfloat16)
    dist.all_reduce(half)
    np.testing.assert_allclose(half.float().numpy(),
                               np.sum([tensor(p).to(torch.bfloat16).float().numpy()
                                       for p in parts], 0), rtol=1e-2)
    scalar = torch.tensor(float(RANK + 1))
    dist.all_reduce(scalar, op=dist.ReduceOp.PRODUCT)
    assert scalar.shape == () and scalar.item() == math.prod(range(1, WORLD + 1))
    flags = tensor(data_of(RANK, (6,), bool))
    dist.all_reduce(flags)
    np.testing.assert_array_equal(flags.numpy(), np.any(everyone((6,), bool), 0))
    ok("all_reduce_views_dtypes")
    work = dist.all_reduce(t := tensor(parts[RANK]), async_op=True)
    assert isinstance(work, dist.Work) and work.wait() is True and work.is_completed()
    np.testing.assert_allclose(t.numpy(), np.sum(parts, 0))
    assert work.result()[0] is t
    ok("async")
    for src in range(WORLD):
        t = tensor(data_of(RANK, (2, 5)))
        dist.broadcast(t, src=src)
        np.testing.assert_array_equal(t.numpy(), data_of(src, (2, 5)))
    ok("broadcast")
    parts = everyone((2, 3))
    outs = [torch.zeros(2, 3, dtype=torch.float64) for _ in range(WORLD)]
    dist.all_gather(outs, tensor(parts[RANK]))
    for o, p in zip(outs, parts):
        np.testing.assert_array_equal(o.numpy(), p)
    out = torch.zeros(WORLD * 2, 3, dtype=torch.float64)
    dist.all_gather_into_tensor(out, tensor(parts[RANK]))
    np.testing.assert_array_equal(out.numpy(), np.concatenate(parts))
    ok("all_gather")
    parts = everyone((WORLD * 2, 3))
    out = torch.zeros(2, 3, dtype=torch.float64)
    dist.reduce_scatter_tensor(out, tensor(parts[RANK]))
    np.testing.assert_allclose(out.numpy(), np.sum(parts, 0)[RANK * 2:RANK * 2 + 2])
    ok("reduce_scatter_tensor")
    dst = WORLD - 1
    parts = everyone((3,))
    t = tensor(parts[RANK])
    dist.reduce(t, dst=dst, op=dist.ReduceOp.MAX)
    np.testing.assert_allclose(t.numpy(), np.max(parts, 0) if RANK == dst else parts[RANK])
    gl = [torch.zeros(3, dtype=torch.float64) for _ in range(WORLD)] if RANK == dst else None
    dist.gather(tensor(parts[RANK]), gl, dst=dst)
    if RANK == dst:
        for g, p in zip(gl, parts):
            np.testing.assert_array_equal(g.numpy(), p)
    ok("reduce_gather")
    t = torch.zeros(3, dtype=torch.float64)
    dist.scatter(t, [tensor(p) for p in parts] if RANK == 0 else None, src=0)
    np.testing.assert_array_equal(t.numpy(), parts[RANK])
    ok("scatter")
    nxt, prv = (RANK + 1) % WORLD, (RANK - 1) % WORLD
    t = torch.zeros(4, dtype=torch.int64)
    sent = dist.isend(tensor(data_of(RANK, (4,), np.int64)), dst=nxt)
    got = dist.irecv(t, src=prv)
    got.wait()
    sent.wait()
    np.testing.assert_array_equal(t.numpy(), data_of(prv, (4,), np.int64))
    if RANK == 0:
        dist.send(tensor(data_of(0, (2,))), dst=1)
    elif RANK == 1:
        t = torch.zeros(2, dtype=torch.float64)
        assert dist.recv(t) == 0
        np.testing.assert_array_equal(t.numpy(), data_of(0, (2,)))
    ok("send_recv")
    objs = [None] * WORLD
    dist.all_gather_object(objs, {"rank": RANK})
    assert objs == [{"rank": r} for r in range(WORLD)]
    dist.barrier()
    ok("objects_barrier")
    try:
        dist.init_process_group("gloo")
    except ValueError as exc:
        assert str(exc) == "trying to initialize the default process group twice!"
        ok("init_twice")


def digest_everywhere(t):
    """Every rank's SHA-256 of `t`'s bytes (equal digests: bit-identical results)."""
    import hashlib

    digests = [None] * WORLD
    dist.all_gather_object(digests, hashlib.sha256(t.numpy().tobytes()).hexdigest())
    return digests


def check_large_all_reduce():
    """Tensors from 1 MiB on take the ring all-reduce: same sums, the same bits on all ranks."""
    pg = dist.group.WORLD
    calls = pg.ring_calls
    n = (1 << 20) // 4 + 13                    # float32, segments and chunks of unequal sizes
    parts = [data_of(r, (n,), np.float32) for r in range(WORLD)]
    t = tensor(parts[RANK])
    address, version = t._data.__array_interface__["data"][0], t._version
    dist.all_reduce(t)
    assert pg.ring_calls == calls + 1          # the ring ran, not MPI's all-reduce
    np.testing.assert_allclose(t.numpy(), np.sum(parts, 0, dtype=np.float64), rtol=1e-6)
    assert t._data.__array_interface__["data"][0] == address and t._version > version
    assert len(set(digest_everywhere(t))) == 1
    # Integers are exact through the ring.
    ints = [data_of(r, (3 << 17,), np.int64) for r in range(WORLD)]
    t = tensor(ints[RANK])
    dist.all_reduce(t)
    np.testing.assert_array_equal(t.numpy(), np.sum(ints, 0))
    # Several in flight at once (a small one through MPI between them), waited in reverse,
    # while point-to-point messages with the same tags cross: nothing mixes.
    big = [data_of(r, (5 << 18,), np.float64) for r in range(WORLD)]
    a, b, small = tensor(big[RANK]), tensor(2 * big[RANK]), tensor(big[RANK][:7])
    works = [dist.all_reduce(a, async_op=True), dist.all_reduce(small, async_op=True),
             dist.all_reduce(b, async_op=True)]
    p2p = torch.zeros(4, dtype=torch.int64)
    nxt, prv = (RANK + 1) % WORLD, (RANK - 1) % WORLD
    sent = dist.isend(tensor(data_of(RANK, (4,), np.int64)), dst=nxt, tag=pg.ring_calls << 12)
    got = dist.irecv(p2p, src=prv, tag=pg.ring_calls << 12)
    for w in reversed(works):
        w.wait()
    got.wait()
    sent.wait()
    np.testing.assert_array_equal(p2p.numpy(), data_of(prv, (4,), np.int64))
    np.testing.assert_allclose(a.numpy(), np.sum(big, 0), rtol=1e-12)
    np.testing.assert_allclose(b.numpy(), 2 * np.sum(big, 0), rtol=1e-12)
    np.testing.assert_allclose(small.numpy(), np.sum(big, 0)[:7], rtol=1e-12)
    # A staged dtype and a non-contiguous view go through the ring and back.
    half = tensor(parts[RANK]).to(torch.bfloat16)
    dist.all_reduce(half)
    np.testing.assert_allclose(half.float().numpy(),
                               np.sum([tensor(p).to(torch.bfloat16).float().numpy()
                                       for p in parts], 0), rtol=1e-2)
    grid = [data_of(r, (512, 640)) for r in range(WORLD)]
    base = tensor(grid[RANK])
    dist.all_reduce(base.t())
    np.testing.assert_allclose(base.numpy(), np.sum(grid, 0), rtol=1e-12)
    assert pg.ring_calls == calls + 6
    ok("large_all_reduce")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(5, 6)
        self.b = nn.Linear(6, 3)
        self.c = nn.Linear(5, 3)      # used on rank 0 only in the unused-parameter check
        self.d = nn.Linear(5, 3)      # never used
        self.register_buffer("stat", torch.full((2,), float(RANK)))

    def forward(self, x, use_c=False):
        y = self.b(torch.tanh(self.a(x)))
        return y + self.c(x) if use_c else y


def make_net(seed):
    torch.manual_seed(seed)
    return Net().double()


def global_batch(n):
    rng = np.random.default_rng(7)
    return tensor(rng.normal(size=(n, 5))), tensor(rng.normal(size=(n, 3)))


def params_equal(model, ref, names=None):
    for (n, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        if names is None or n.split(".")[0] in names:
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-12,
                                       atol=1e-14, err_msg=n)


def check_ddp_equivalence(find_unused=True, **ddp_kwargs):
    """5 SGD steps of DDP on 2 ranks == 5 steps of one process on the concatenated batch."""
    # Different weights per rank: construction broadcasts rank 0's.
    if find_unused:
        model = make_net(RANK)
    else:
        torch.manual_seed(RANK)
        model = nn.Sequential(nn.Linear(5, 6), nn.Tanh(), nn.Linear(6, 3)).double()
        model.register_buffer("stat", torch.full((2,), float(RANK)))
    ddp = nn.parallel.DistributedDataParallel(model, find_unused_parameters=find_unused,
                                              **ddp_kwargs)
    assert model.stat.tolist() == [0.0, 0.0]
    ref = copy.deepcopy(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    x, y = global_batch(4 * WORLD)
    per = x.shape[0] // WORLD
    for _ in range(5):
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x[RANK * per:(RANK + 1) * per]), y[RANK * per:
                                                                            (RANK + 1) * per])
        loss.backward()
        opt.step()
        ref_opt.zero_grad()
        nn.functional.mse_loss(ref(x), y).backward()
        ref_opt.step()
    params_equal(model, ref, names={"a", "b"} if find_unused else None)
    if find_unused:
        assert model.d.weight.grad is None
    if ddp_kwargs.get("gradient_as_bucket_view"):
        # The gradient is a view of the communication bucket: no copy after the all-reduce.
        first = next(model.parameters())
        slot = ddp.reducer.slot[0]
        assert first.grad is slot[2]
        assert np.shares_memory(first.grad._data, slot[0].flat)
    return ddp


def check_ddp_large_buckets():
    """Buckets of several MiB (reduced by the ring) average as one process on the batch."""
    torch.manual_seed(RANK)
    model = nn.Sequential(nn.Linear(600, 600), nn.Tanh(), nn.Linear(600, 3)).double()
    ddp = nn.parallel.DistributedDataParallel(model)
    ref = copy.deepcopy(model)
    calls = dist.group.WORLD.ring_calls
    rng = np.random.default_rng(3)
    x, y = tensor(rng.normal(size=(2 * WORLD, 600))), tensor(rng.normal(size=(2 * WORLD, 3)))
    nn.functional.mse_loss(ddp(x[2 * RANK:2 * RANK + 2]), y[2 * RANK:2 * RANK + 2]).backward()
    nn.functional.mse_loss(ref(x), y).backward()
    assert dist.group.WORLD.ring_calls > calls
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-15)


def check_no_sync():
    """no_sync on the first of two micro-batches + accumulation == one big batch."""
    model = make_net(0)
    ddp = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)
    ref = copy.deepcopy(model)
    x, y = global_batch(8 * WORLD)
    per = 8
    mine_x, mine_y = x[RANK * per:(RANK + 1) * per], y[RANK * per:(RANK + 1) * per]
    with ddp.no_sync():
        (nn.functional.mse_loss(ddp(mine_x[:4]), mine_y[:4]) / 2).backward()
    local = model.a.weight.grad.clone()
    (nn.functional.mse_loss(ddp(mine_x[4:]), mine_y[4:]) / 2).backward()
    nn.functional.mse_loss(ref(x), y).backward()
    params_equal(model, ref)
    for p, q in zip(model.parameters(), ref.parameters()):
        if q.grad is not None:
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-12, atol=1e-15)
    assert not np.allclose(local.numpy(), model.a.weight.grad.numpy())
    ok("no_sync")


def check_unused():
    """A branch used on rank 0 only gets rank 0's gradient / world; an unused one stays None."""
    model = make_net(0)
    ref = copy.deepcopy(model)
    ddp = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)
    x, y = global_batch(2 * WORLD)
    ddp(x[RANK * 2:RANK * 2 + 2], use_c=RANK == 0).pow(2).sum().backward()
    total = sum(ref(x[r * 2:r * 2 + 2], use_c=r == 0).pow(2).sum() for r in range(WORLD))
    (total / WORLD).backward()
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        if q.grad is None:
            assert p.grad is None, n
        else:
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-12, err_msg=n)
    ok("find_unused_parameters")
    # Without detection, the next iteration reports the parameters that got no gradient.
    plain = nn.parallel.DistributedDataParallel(make_net(0))
    plain(x).sum().backward()
    try:
        plain(x)
    except RuntimeError as exc:
        assert str(exc).startswith("Expected to have finished reduction in the prior iteration")
        assert f"Parameter indices which did not receive grad for rank {RANK}: 4 5 6 7\n" \
            in str(exc)
        ok("unfinished_reduction")


def check_module_api():
    model = make_net(0)
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1e-4)
    assert ddp.module is model
    assert list(ddp.state_dict()) == ["module." + k for k in model.state_dict()]
    # Reverse registration order, a bucket closed once it holds >= the cap (104 bytes): each
    # Linear's bias (24 or 48 bytes) shares a bucket with its weight.
    assert [b.indices for b in ddp.reducer.buckets] == [[7, 6], [5, 4], [3, 2], [1, 0]]
    model.stat.fill_(float(RANK + 5))
    with torch.no_grad():
        ddp(torch.zeros(1, 5, dtype=torch.float64))
    ddp(torch.zeros(1, 5, dtype=torch.float64))
    # The forward after a no-grad one does not sync; the next does (broadcast_buffers).
    ddp(torch.zeros(1, 5, dtype=torch.float64))
    assert model.stat.tolist() == [5.0, 5.0], model.stat
    # A discarded DDP takes its gradient hooks with it.
    assert model.a.weight._post_acc_hooks
    del ddp
    gc.collect()
    assert not model.a.weight._post_acc_hooks
    ok("module_api_buffers")


def check_mismatch():
    for make, expect in (
        (lambda: nn.Linear(3 if RANK else 2, 2),
         "[1]: params[0] in this process with sizes [2, 3] appears not to match sizes of the "
         "same param in process 0." if RANK == 1 else
         "[0]: params[0] in this process with sizes [2, 2] appears not to match sizes of the "
         "same param in process 1."),
        (lambda: nn.Linear(2, 2, bias=bool(RANK)),
         f"DDP expects same model across all ranks, but Rank {RANK} has {1 + RANK} params, "
         f"while rank {1 - RANK} has inconsistent {2 - RANK} params."),
    ):
        try:
            nn.parallel.DistributedDataParallel(make())
        except RuntimeError as exc:
            assert str(exc) == expect, str(exc)
        else:
            raise AssertionError("no error")
    ok("shape_mismatch")


def train_until(die_at, action):
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(8, 16), nn.ReLU(),
                                                              nn.Linear(16, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 8)
    for step in range(1000):
        if RANK == 1 and step == die_at:
            action()
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        if step == 1:
            print(f"rank {RANK} training", flush=True)


def main(scenario):
    if scenario in ("checks", "three"):
        check_collectives()
        check_large_all_reduce()
        if scenario == "three":
            members = [0, 2]
            sub = dist.new_group(members)
            t = tensor(data_of(RANK, (3,)))
            if RANK in members:
                assert dist.get_world_size(sub) == 2 and dist.get_rank(sub) == members.index(RANK)
                dist.all_reduce(t, group=sub)
                np.testing.assert_allclose(t.numpy(), data_of(0, (3,)) + data_of(2, (3,)))
            else:
                assert sub is dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(sub) == -1
                assert dist.all_reduce(t, group=sub) is None
            ok("new_group")
            objs = [{"from": RANK}, RANK] if RANK == 1 else [None, None]
            dist.broadcast_object_list(objs, src=1)
            assert objs == [{"from": 1}, 1], objs
            # Re-initialising after destroy works; a world size MPI contradicts is refused.
            dist.destroy_process_group()
            try:
                dist.init_process_group("gloo", world_size=WORLD + 2)
            except RuntimeError as exc:
                assert f"world_size={WORLD + 2} but this process is rank {RANK} of an MPI " \
                    f"world of {WORLD}" in str(exc), str(exc)
            else:
                raise AssertionError("no error")
            assert not dist.is_initialized()
            dist.init_process_group("mpi")
            assert dist.get_backend() == "mpi" and dist.get_world_size() == WORLD
            ok("reinit")
        else:
            check_ddp_equivalence()
            check_ddp_equivalence(find_unused=False)
            check_ddp_equivalence(find_unused=False, bucket_cap_mb=1e-4)
            check_ddp_equivalence(gradient_as_bucket_view=True)
            check_ddp_equivalence(find_unused=False, gradient_as_bucket_view=True)
            check_ddp_large_buckets()
            ok("ddp_equivalence")
            check_no_sync()
            check_unused()
            check_module_api()
            check_mismatch()
    elif scenario == "kill":
        train_until(3, lambda: os.kill(os.getpid(), 9))
    elif scenario == "stall":
        train_until(3, lambda: time.sleep(60))
    elif scenario == "raise":
        def fail():
            raise ValueError("rank 1 failed on purpose")
        train_until(3, fail)
    dist.destroy_process_group()
    ok("done")


if __name__ == "__main__":
    main(sys.argv[1])
