"""More of `torch.distributed` without MPI, each against torch 2.13's own behaviour.

In this process: `init_process_group("gloo")` with nothing to rendezvous with (torch's env://
error, not a world of one), and the stores' queue, barrier and clone operations, FileStore's
reference counting of its file, PrefixStore's listing (all run on torch's stores and ours in
the same order, outcomes compared). Spawned: one `file://` path serving successive process
groups, a timeout closing a group's pairs (here and at the peer, other groups unharmed), and
PyTorch's distributed tutorials (point-to-point, the ring, collectives, subgroups, DDP and its
checkpoint) on three ranks, each program run once with `import torch` (gloo) and once with
`import fusegrad as torch`.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import json
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch.distributed as tdist
from test_distributed_tcp import _free_port, _launch, _outcome

import fusegrad.distributed as fdist

REUSE = r'''
import datetime, json, os, sys, time
import LIB as torch
import LIB.distributed as dist
import LIB.multiprocessing as mp


def run(rank, ws, path, out_dir):
    out = []
    for i in range(3):       # the same file:// path for three groups in a row
        dist.init_process_group("gloo", init_method="file://" + path, rank=rank,
                                world_size=ws, timeout=datetime.timedelta(seconds=20))
        t = torch.ones(2) * (rank + 1 + i)
        dist.all_reduce(t)
        objs = [None] * ws
        dist.all_gather_object(objs, (i, rank))
        if rank == 1:        # rank 0 makes its next group first
            time.sleep(0.2)
        dist.destroy_process_group()
        out.append([t.tolist(), objs])
    with open(os.path.join(out_dir, f"{rank}.json"), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    ws, path, out_dir, how = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    mp.start_processes(run, args=(ws, path, out_dir), nprocs=ws, start_method=how)
    print("file left:", os.path.exists(path))
'''

CLOSURE = r'''
import datetime, json, os, re, sys, time
import LIB as torch
import LIB.distributed as dist
import LIB.multiprocessing as mp


def text(e):
    # gloo's messages start with its source location, which is not compared
    message = str(e).split("] ", 1)[-1].split(". This")[0]
    return type(e).__name__ + ": " + re.sub(r"\]:\d+", "]", message)


def run(rank, ws, port, out_dir):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=ws,
                            timeout=datetime.timedelta(seconds=20))
    other = dist.new_group([0, 1])
    lines = []

    def attempt(name, fn):
        start = time.monotonic()
        try:
            lines.append([name, "ok", fn()])
        except RuntimeError as e:
            # (a peer's closed pair must be reported at once, not after the group's timeout)
            lines.append([name, text(e), time.monotonic() - start < 10])

    t = torch.ones(2)
    if rank == 0:
        w = dist.irecv(t, 1, tag=9)
        attempt("irecv timed out", lambda: w.wait(datetime.timedelta(seconds=0.3)))
        attempt("work state", lambda: [w.is_completed(), w.is_success(),
                                       type(w.exception()).__name__])
        attempt("world all_reduce", lambda: dist.all_reduce(t))
        attempt("world send", lambda: dist.send(t, 1))
    else:
        time.sleep(1.0)          # rank 0's wait has timed out by now
        attempt("world all_reduce", lambda: dist.all_reduce(t))
        attempt("world recv", lambda: dist.recv(t, 0))
    # The other group's pairs are not the timed-out group's: it still works.
    attempt("other group", lambda: [dist.all_reduce(t, group=other), t.tolist()])
    attempt("tensor", lambda: t.tolist())
    with open(os.path.join(out_dir, f"{rank}.json"), "w") as f:
        json.dump(lines, f)
    time.sleep(0.5)
    os._exit(0)


if __name__ == "__main__":
    ws, port, out_dir, how = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    mp.start_processes(run, args=(ws, port, out_dir), nprocs=ws, start_method=how)
'''

TUTORIAL = r'''
"""PyTorch's tutorials "Writing Distributed Applications with PyTorch" and "Getting Started
with Distributed Data Parallel" (their CPU parts), on every rank of the world."""
import json, os, sys, warnings
from random import Random
import LIB as torch
import LIB.distributed as dist
import LIB.multiprocessing as mp
import LIB.nn as nn
import LIB.optim as optim
from LIB.nn.parallel import DistributedDataParallel as DDP


def p2p(rank, size, out):
    tensor = torch.zeros(1)
    if rank == 0:
        tensor += 1
        dist.send(tensor=tensor, dst=1)
    elif rank == 1:
        dist.recv(tensor=tensor, src=0)
    out["p2p_blocking"] = tensor.tolist()
    tensor = torch.zeros(1)
    req = None
    if rank == 0:
        tensor += 2
        req = dist.isend(tensor=tensor, dst=1)
    elif rank == 1:
        req = dist.irecv(tensor=tensor, src=0)
    if req is not None:
        req.wait()
    out["p2p_nonblocking"] = tensor.tolist()


def group_all_reduce(rank, size, out):
    group = dist.new_group([0, 1])
    tensor = torch.ones(1)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    out["group_all_reduce"] = [tensor.tolist(), [str(w.message) for w in seen]]


def ring(rank, size, out):
    send_buff = torch.arange(3.0) + rank
    recv_buff = torch.zeros(3)
    accum = send_buff.clone()
    left = ((rank - 1) + size) % size
    right = (rank + 1) % size
    for i in range(size - 1):
        if i % 2 == 0:
            send_req = dist.isend(send_buff, right)
            dist.recv(recv_buff, left)
            accum[:] += recv_buff[:]
        else:
            send_req = dist.isend(recv_buff, right)
            dist.recv(send_buff, left)
            accum[:] += send_buff[:]
        send_req.wait()
    out["ring"] = accum.tolist()


def collectives(rank, size, out):
    t = torch.tensor([float(rank)])
    dist.broadcast(t, src=2)
    out["broadcast"] = t.tolist()
    t = torch.tensor([float(rank + 1)])
    dist.reduce(t, dst=0, op=dist.ReduceOp.MAX)
    if rank == 0:
        out["reduce_max"] = t.tolist()
    s = torch.zeros(2)
    dist.scatter(s, [torch.full((2,), float(i)) for i in range(size)] if rank == 1 else None,
                 src=1)
    out["scatter"] = s.tolist()
    g = [torch.zeros(2) for _ in range(size)] if rank == 2 else None
    dist.gather(torch.tensor([rank, -rank], dtype=torch.float32), g, dst=2)
    out["gather"] = None if g is None else [x.tolist() for x in g]
    outs = [torch.zeros(2, dtype=torch.int64) for _ in range(size)]
    dist.all_gather(outs, torch.tensor([rank, rank * rank]))
    out["all_gather"] = [o.tolist() for o in outs]
    objs = [None] * size
    dist.all_gather_object(objs, {"rank": rank, "data": [rank] * rank, "t": (rank, "x")})
    out["all_gather_object"] = [[o["rank"], o["data"], list(o["t"])] for o in objs]
    rs = torch.zeros(2)
    dist.reduce_scatter(rs, [torch.full((2,), float(rank * 10 + j)) for j in range(size)])
    out["reduce_scatter"] = rs.tolist()
    objs = ["a", rank, None] if rank == 0 else [None, None, None]
    dist.broadcast_object_list(objs, src=0)
    out["broadcast_object_list"] = objs
    dist.barrier()
    sub = dist.new_group([1, 2])
    t = torch.tensor([rank * 1.5])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        r = dist.all_reduce(t, group=sub)
        dist.barrier(group=sub)
    out["subgroup"] = [r, t.tolist(), dist.get_rank(sub), dist.get_world_size(sub),
                       [str(w.message) for w in seen]]
    if rank in (1, 2):
        t = torch.tensor([float(rank)])
        dist.broadcast(t, src=2, group=sub)
        out["subgroup_broadcast"] = t.tolist()
    if rank == 0:
        works = [dist.isend(torch.tensor([float(j)]), dst=j, tag=j) for j in (1, 2)]
        got = [torch.zeros(1), torch.zeros(1)]
        works += [dist.irecv(got[0], src=1, tag=5), dist.irecv(got[1], src=2, tag=5)]
    else:
        got = [torch.zeros(1)]
        works = [dist.irecv(got[0], src=0, tag=rank),
                 dist.isend(torch.tensor([rank * 7.0]), 0, tag=5)]
    for w in works:
        w.wait()
    out["isend_irecv"] = [g.tolist() for g in got]
    a2a = torch.empty(3)
    dist.all_to_all_single(a2a, torch.arange(3.0) + 3 * rank)
    out["all_to_all_single"] = a2a.tolist()


class Partition:
    def __init__(self, data, index):
        self.data = data
        self.index = index

    def __len__(self):
        return len(self.index)

    def __getitem__(self, index):
        return self.data[self.index[index]]


class DataPartitioner:
    def __init__(self, data, sizes, seed=1234):
        self.data = data
        self.partitions = []
        rng = Random()
        rng.seed(seed)
        indexes = list(range(len(data)))
        rng.shuffle(indexes)
        for frac in sizes:
            part_len = int(frac * len(data))
            self.partitions.append(indexes[0:part_len])
            indexes = indexes[part_len:]

    def use(self, partition):
        return Partition(self.data, self.partitions[partition])


def average_gradients(model):
    size = float(dist.get_world_size())
    for param in model.parameters():
        dist.all_reduce(param.grad.data, op=dist.ReduceOp.SUM)
        param.grad.data /= size


def synchronous_sgd(rank, size, out):
    """The tutorial's "Distributed Training": a partitioned dataset, gradients averaged."""
    x = torch.linspace(-2, 2, 48 * 8).reshape(48, 8)
    data = torch.utils.data.TensorDataset(x, torch.arange(48) % 3)
    bsz = 12 // size
    part = DataPartitioner(data, [1.0 / size] * size).use(dist.get_rank())
    train_set = torch.utils.data.DataLoader(part, batch_size=bsz, shuffle=False)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3), nn.LogSoftmax(dim=1))
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(torch.linspace(-0.3, 0.3, p.numel()).reshape(p.shape) * (i + 1))
    optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
    losses = []
    for epoch in range(2):
        epoch_loss = 0.0
        for data, target in train_set:
            optimizer.zero_grad()
            loss = nn.functional.nll_loss(model(data), target)
            epoch_loss += loss.item()
            loss.backward()
            average_gradients(model)
            optimizer.step()
        losses.append(epoch_loss)
    out["synchronous_sgd"] = [p.detach().reshape(-1).tolist() for p in model.parameters()]
    out["synchronous_sgd_losses"] = [losses]


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def toy(rank):
    model = ToyModel()
    with torch.no_grad():     # only rank 0's values survive DDP's broadcast
        for i, p in enumerate(model.parameters()):
            p.copy_(torch.linspace(-1, 1, p.numel()).reshape(p.shape) * (i + 1) + rank)
    return model


def demo_basic(rank, size, out):
    ddp_model = DDP(toy(rank))
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.01)
    for _ in range(2):
        optimizer.zero_grad()
        outputs = ddp_model(torch.linspace(-1, 1, 200).reshape(20, 10) * (rank + 1))
        loss_fn(outputs, torch.linspace(0, 1, 100).reshape(20, 5)).backward()
        optimizer.step()
    out["demo_basic"] = [p.detach().reshape(-1).tolist() for p in ddp_model.parameters()]


def demo_checkpoint(rank, size, out, path):
    ddp_model = DDP(toy(rank + 1))
    if rank == 0:
        torch.save(ddp_model.state_dict(), path)
    dist.barrier()
    ddp_model.load_state_dict(torch.load(path, map_location={"cpu": "cpu"}, weights_only=True))
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.01)
    optimizer.zero_grad()
    nn.MSELoss()(ddp_model(torch.ones(20, 10) * rank), torch.zeros(20, 5)).backward()
    optimizer.step()
    dist.barrier()
    if rank == 0:
        os.remove(path)
    out["demo_checkpoint"] = [p.detach().reshape(-1).tolist() for p in ddp_model.parameters()]
    out["state_dict_keys"] = list(ddp_model.state_dict())


def run(rank, size, port, out_dir):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=size)
    out = {}
    p2p(rank, size, out)
    group_all_reduce(rank, size, out)
    ring(rank, size, out)
    collectives(rank, size, out)
    synchronous_sgd(rank, size, out)
    demo_basic(rank, size, out)
    demo_checkpoint(rank, size, out, os.path.join(out_dir, "model.checkpoint"))
    dist.destroy_process_group()
    with open(os.path.join(out_dir, f"{rank}.json"), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    size, port, out_dir, how = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    mp.start_processes(run, args=(size, port, out_dir), nprocs=size, start_method=how)
'''

# The ranks fork (no second import in each), but ours spawn for the tutorials, as they do.
_HOW = {"torch": "fork", "fusegrad": "fork"}


@pytest.fixture(scope="module", autouse=True)
def runs(tmp_path_factory):
    """Every spawned program, started together (they mostly wait on their own ranks)."""
    tmp = tmp_path_factory.mktemp("tcp2")
    started = {}
    for lib in ("torch", "fusegrad"):
        for name, program, ws, where in (("reuse", REUSE, 2, "path"),
                                         ("closure", CLOSURE, 2, "port"),
                                         ("tutorial", TUTORIAL, 3, "port")):
            if name == "reuse" and lib == "torch":
                continue     # (see test_one_file_path_for_successive_groups)
            out = tmp / f"{name}_{lib}"
            out.mkdir()
            first = str(tmp / f"rdv_{lib}") if where == "path" else _free_port()
            how = "spawn" if name == "tutorial" and lib == "fusegrad" else _HOW[lib]
            proc = _launch(program, lib, [ws, first, out, how], tmp, name)
            started[f"{name}_{lib}"] = (proc, out, ws)
    yield started
    for proc, _, _ in started.values():
        if proc.returncode is None:
            proc.kill()
            proc.communicate()


def _results(runs, name: str) -> tuple:
    """(each rank's JSON output, the program's printed output)."""
    proc, out, ws = runs[name]
    output, _ = proc.communicate(timeout=150)
    assert proc.returncode == 0, output
    return [json.loads((out / f"{r}.json").read_text()) for r in range(ws)], output


# ---------------------------------------------------------------------------- in this process
@pytest.mark.parametrize("kwargs", [{}, dict(world_size=1), dict(rank=0),
                                    dict(backend=None), dict(init_method="env://")])
def test_init_without_rendezvous_is_torchs_env_error(kwargs, monkeypatch):
    """No launcher, no variables, no init method: torch's env:// error (not an MPI world of
    one, which stays for mpiexec's processes and the "mpi" backend)."""
    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_SIZE",
                "PMI_SIZE", "PMIX_RANK"):
        monkeypatch.delenv(var, raising=False)
    kw = dict(kwargs)
    backend = kw.pop("backend", "gloo")
    outcomes = [_outcome(lambda d=d: d.init_process_group(backend, **kw))
                for d in (fdist, tdist)]
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == "ValueError" and "env:// rendezvous" in outcomes[0][1]
    assert not fdist.is_initialized()


SHORT = datetime.timedelta(seconds=0.1)


def _queue_script(s, clone_of) -> list:
    """Queues, barriers, clones and the rest of the extended store API, in one sequence."""
    o = _outcome
    s.set_timeout(SHORT)
    out = [o(lambda: s.has_extended_api()), o(lambda: s.queue_len("q")),
           o(lambda: s.queue_push("q", "a")), o(lambda: s.queue_push("q", b"b\x00")),
           o(lambda: s.queue_len("q")), o(lambda: s.check(["q"])), o(lambda: s.num_keys()),
           o(lambda: sorted(s.list_keys())), o(lambda: s.wait(["q"])),
           o(lambda: s.delete_key("q")), o(lambda: s.queue_len("q")),
           o(lambda: s.queue_pop("q")), o(lambda: s.queue_pop("q", False)),
           o(lambda: s.queue_len("q")), o(lambda: s.check(["q"])),
           o(lambda: s.queue_pop("q", block=False)), o(lambda: s.queue_pop("q")),
           o(lambda: s.get("q"))]
    s.set("kv", "x")
    out += [o(lambda: s.queue_len("kv")), o(lambda: s.queue_pop("kv", False)),
            o(lambda: s.queue_push("kv", "y")), o(lambda: s.get("kv")),
            o(lambda: s.queue_len("kv")),
            o(lambda: s.queue_push(1, "y")), o(lambda: s.queue_push("q2", 5)),
            o(lambda: s.barrier(3, 1)), o(lambda: s.wait([1]))]
    # A clone shares the keys; TCPStore's keeps the timeout, FileStore's starts afresh.
    clone = clone_of(s)
    out += [type(clone).__name__, o(lambda: clone.set("from_clone", "1")),
            o(lambda: s.get("from_clone")), o(lambda: clone.timeout), clone is s]
    # Barriers: passed at once by the last of `world_size` callers, and after them.
    out += [o(lambda: s.barrier("b", 1)), o(lambda: s.barrier("b", 1)),
            o(lambda: s.barrier("c", 2, datetime.timedelta(seconds=0.05))),
            o(lambda: s.barrier("c", 2, SHORT)), o(lambda: s.barrier("c", 2, SHORT)),
            o(lambda: s.barrier("z", 0, SHORT)), o(lambda: s.barrier("", 1)),
            o(lambda: sorted(s.list_keys())), o(lambda: s.num_keys()),
            o(lambda: s.multi_set(["m"], ["1", "2"])), o(lambda: s.multi_get([])),
            o(lambda: s.compare_set("nk", "", "")), o(lambda: s.append("kv", b"\xff")),
            o(lambda: s.get("kv"))]
    # A blocking pop is woken by a push from another thread (through a clone, as PyTorch
    # advises for threads).
    if out[0] == ("ok", True):
        s.set_timeout(datetime.timedelta(seconds=20))

        def push_later():
            time.sleep(0.1)
            clone_of(s).queue_push("w", "late")

        thread = threading.Thread(target=push_later)
        thread.start()
        out.append(o(lambda: s.queue_pop("w")))
        thread.join()
    out.append(o(lambda: s.add("kv", 1)))     # (last: it ends a TCPStore's connection)
    return out


def _clone(store):
    return store.clone()


def _stores(dist, tmp: Path, keep: list) -> list:
    """(name, store) of every kind; `keep` holds the masters of clients (a master store that
    goes away stops serving)."""
    master = dist.TCPStore("127.0.0.1", 0, 1, True, wait_for_workers=False)
    keep.append(dist.TCPStore("127.0.0.1", 0, 1, True, wait_for_workers=False))
    return [("tcp master", master),
            ("tcp client", dist.TCPStore("127.0.0.1", keep[-1].port, 1, False)),
            ("hash", dist.HashStore()),
            ("file", dist.FileStore(str(tmp / "f"), 1)),
            ("file without world", dist.FileStore(str(tmp / "g"))),
            ("prefix hash", dist.PrefixStore("p", dist.HashStore())),
            ("prefix tcp", dist.PrefixStore("p", dist.TCPStore(
                "127.0.0.1", 0, 1, True, wait_for_workers=False)))]


def _normal(outcome):
    """An outcome without the module names of the two libraries."""
    text = json.dumps(outcome, default=repr)
    return json.loads(text.replace("fusegrad.", "").replace("torch.", ""))


def test_store_queues_barriers_and_clones_match_torch(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "f").mkdir()
    keep: list = []
    # torch's stores run their scripts each in a thread of its own, while ours run one after
    # another here: torch's waits release the GIL, and a FileStore's times out in whole
    # seconds only, so that one after another they took most of the test's time.
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        pending = {name: pool.submit(_queue_script, s, _clone)
                   for name, s in _stores(tdist, tmp_path / "t", keep)}
        ours = {name: _queue_script(s, _clone)
                for name, s in _stores(fdist, tmp_path / "f", keep)}
        theirs = {name: job.result() for name, job in pending.items()}
    for name in theirs:
        assert _normal(ours[name]) == _normal(theirs[name]), name
    assert issubclass(fdist.QueueEmptyError, fdist.DistStoreError)
    assert fdist.QueueEmptyError.__module__ == "fusegrad.distributed"


def test_prefix_store_lists_and_waits_as_torch():
    """PrefixStore lists the keys under its prefix (matched without its "/", as torch), and
    a barrier without a timeout takes the prefix store's own, not the underlying one's."""
    seen = []
    for dist in (fdist, tdist):
        inner = dist.HashStore()
        for k, v in (("other", "1"), ("p/x", "2"), ("pq", "3")):
            inner.set(k, v)
        outer = dist.PrefixStore("p", inner)
        outer.set("y", "4")
        inner.set_timeout(SHORT)
        nested = dist.PrefixStore("a", outer)
        nested.set("z", "5")
        seen.append([sorted(outer.list_keys()), outer.num_keys(), sorted(nested.list_keys()),
                     nested._underlying_non_prefix_store is inner,
                     type(nested.underlying_store).__name__, outer.timeout,
                     _outcome(lambda o=outer: o.wait(["nothing"])),
                     outer.clone().timeout, dist.PrefixStore("p", inner).has_extended_api()])
    assert _normal(seen[0]) == _normal(seen[1])
    store = fdist.PrefixStore("p", fdist.HashStore())
    store.set_timeout(SHORT)
    assert store._barrier_timeout() == datetime.timedelta(seconds=300)


def test_file_store_counts_its_users_as_torch(tmp_path):
    """The file stays while a store object uses it and goes with the last one (once
    `world_size` have gone; never for world size -1)."""
    seen = []
    for dist in (fdist, tdist):
        d = tmp_path / dist.__name__
        d.mkdir()
        events = []
        a = dist.FileStore(str(d / "x"), 2)
        b = dist.FileStore(str(d / "x"), 2)
        events += [a.num_keys(), sorted(a.list_keys())]
        del a
        events.append((d / "x").exists())
        c = dist.FileStore(str(d / "x"), 2)          # a new user before the last has gone
        del b
        events.append((d / "x").exists())
        c.set("k", "v")
        del c
        events.append((d / "x").exists())
        one = dist.FileStore(str(d / "y"), 1)
        two = dist.FileStore(str(d / "y"), 1)
        del one
        events.append((d / "y").exists())
        events.append(two.clone().path == two.path)
        del two
        events.append((d / "y").exists())
        keep = dist.FileStore(str(d / "z"))
        keep.set("k", "v")
        events += [keep.num_keys(), sorted(keep.list_keys()), keep.has_extended_api(),
                   _outcome(lambda k=keep: k.queue_push("q", "1")),
                   _outcome(lambda k=keep: k.queue_pop("q", False))]
        del keep
        events.append((d / "z").exists())
        seen.append(events)
    assert seen[0] == seen[1]


# ------------------------------------------------------------------------ spawned programs
def test_one_file_path_for_successive_groups(runs):
    """Three process groups in a row on one file:// path, rank 0 making the next while rank 1
    still holds the last: the file is shared and stays while a store uses it (torch's
    FileStore counting, compared with torch's in test_file_store_counts_its_users_as_torch),
    and the last store removes it. (torch's own gloo is no oracle here: its groups reuse one
    key prefix, so a group made while the old keys persist may read the old addresses.)"""
    mine, output = _results(runs, "reuse_fusegrad")
    for rank in range(2):
        assert mine[rank] == [[[3.0 + 2 * i] * 2, [[i, 0], [i, 1]]] for i in range(3)]
    assert "file left: False" in output


def test_timeout_closes_the_groups_pairs_as_gloo(runs):
    """A wait that times out closes that group's pairs: this rank's later operations on it
    fail at once, the peer's with "Connection closed by peer", another group works on."""
    mine, _ = _results(runs, "closure_fusegrad")
    ref, _ = _results(runs, "closure_torch")
    assert mine == ref
    assert mine[0][0] == ["irecv timed out",
                          "RuntimeError: Timed out waiting 300ms for recv operation to complete",
                          True]
    assert mine[1][0] == ["world all_reduce",
                          "RuntimeError: Connection closed by peer [127.0.0.1]", True]


def test_tutorials_on_three_ranks_match_torch_gloo(runs):
    """The distributed tutorials' programs on three ranks: every value as torch's gloo
    (DDP's trained parameters to float32 rounding), replicas identical."""
    mine, _ = _results(runs, "tutorial_fusegrad")
    ref, _ = _results(runs, "tutorial_torch")
    for r in range(3):
        assert set(mine[r]) == set(ref[r]), r
        for key in ref[r]:
            if key in ("demo_basic", "demo_checkpoint", "synchronous_sgd"):
                for a, b in zip(mine[r][key], ref[r][key], strict=True):
                    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
                assert mine[r][key] == mine[0][key]
            elif key == "synchronous_sgd_losses":
                np.testing.assert_allclose(mine[r][key], ref[r][key], rtol=1e-5)
            else:
                assert mine[r][key] == ref[r][key], (r, key)
    assert ref[2]["group_all_reduce"][1] == [
        "Running all_reduce on global rank 2 which does not belong to the given group."]
    # (the checkpoint is gone: rank 0 removed it after the barrier)
    assert sorted(os.listdir(runs["tutorial_fusegrad"][1])) == ["0.json", "1.json", "2.json"]


def test_work_future_and_argument_errors_as_torch():
    """`Work.get_future()` (its value, `then` chaining) and the texts of wrong arguments, on
    one rank of a HashStore rendezvous."""
    import torch

    import fusegrad

    seen = []
    for lib, dist in ((fusegrad, fdist), (torch, tdist)):
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        try:
            t = lib.arange(3.0)
            fut = dist.all_reduce(t, async_op=True).get_future()
            doubled = fut.then(lambda f: f.value()[0] * 2)
            gathered = [lib.zeros(3)]
            gather_future = dist.all_gather(gathered, t, async_op=True).get_future()
            seen.append([type(fut).__name__, [v.tolist() for v in fut.wait()], fut.done(),
                         doubled.wait().tolist(), dist.barrier(async_op=True).get_future().wait(),
                         [v.tolist() for v in gather_future.wait()],
                         _outcome(lambda d=dist: d.all_reduce([1, 2])),
                         _outcome(lambda d=dist, m=lib: d.all_gather([1], m.ones(1))),
                         _outcome(lambda d=dist, m=lib: d.all_gather(5, m.ones(1)))])
        finally:
            dist.destroy_process_group()
    ours, theirs = _normal(seen[0]), _normal(seen[1])
    assert ours[:6] == theirs[:6]
    for a, b in zip(ours[6:], theirs[6:]):    # (the element types name each library's class)
        assert a == b or a[1].replace("fusegrad._tensor.Tensor", "Tensor") == b[1]
