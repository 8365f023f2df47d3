"""Process groups without MPI (the TCP transport), against torch's gloo backend.

The same program text (`PROGRAM`: PyTorch's DDP-tutorial shape, `mp.spawn` + `MASTER_ADDR`
/`MASTER_PORT` + `init_process_group("gloo", rank=, world_size=)`) runs once with
`import torch` and once with `import fusegrad as torch`; every rank writes what its collectives
and its DDP training produced, and the two runs must agree (exactly for data movement and
small-integer sums, closely for trained parameters), down to the error texts of timeouts and
of a peer that died. DDP is also compared with one process training on the whole batch, three
ranks with NumPy, and `python -m fusegrad.distributed.run --transport tcp` with the MPI
launch of the same script. The stores (TCPStore, HashStore, FileStore, PrefixStore) are
compared with torch's in this process, and so are the errors of a bad rendezvous.
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import os
import random
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as tdist

import fusegrad as fg
import fusegrad.distributed as fdist

SRC = str(Path(__file__).parents[1] / "src")

PROGRAM = r'''
import datetime, json, os, re, sys, time
import numpy as np
import LIB as torch
import LIB.distributed as dist
import LIB.multiprocessing as mp
from LIB.nn.parallel import DistributedDataParallel as DDP


def data(n=12):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((n, 4)).astype(np.float32),
            rng.standard_normal((n, 2)).astype(np.float32))


def net(rank):
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            values = np.linspace(-0.5, 0.5, p.numel(), dtype=np.float32) * (i + 1)
            # Only rank 0's values are right: DDP must broadcast them.
            p.copy_(torch.tensor(values.reshape(tuple(p.shape))) + rank)
    return model


def collectives(rank, ws, out):
    t = torch.arange(6, dtype=torch.float32) * (rank + 1)
    dist.all_reduce(t)
    out["sum"] = t.tolist()
    for name in ("MAX", "MIN", "PRODUCT"):
        t = torch.tensor([rank + 1.0, 3.0 - rank, 2.0])
        dist.all_reduce(t, op=getattr(dist.ReduceOp, name))
        out[name] = t.tolist()
    t = torch.tensor([1.0, 2.0]) * rank
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    out["avg"] = t.tolist()
    i = torch.tensor([rank, 10 * rank], dtype=torch.int64)
    dist.all_reduce(i)
    out["int64"] = i.tolist()
    b = torch.tensor([rank == 0, False, True])
    dist.all_reduce(b)
    out["bool"] = b.tolist()
    big = torch.tensor(np.random.default_rng(rank).standard_normal(300001).astype(np.float32))
    work = dist.all_reduce(big, async_op=True)
    work.wait()
    out["big_done"] = work.is_completed()
    out["big_head"] = big[:3].tolist()
    gathered = [None] * ws
    dist.all_gather_object(gathered, big.numpy().tobytes().hex()[:64])
    out["big_same_on_all"] = len(set(gathered)) == 1
    t = torch.full((2,), float(rank))
    dist.broadcast(t, src=ws - 1)
    out["broadcast"] = t.tolist()
    outs = [torch.zeros(2, dtype=torch.int32) for _ in range(ws)]
    dist.all_gather(outs, torch.tensor([rank, -rank], dtype=torch.int32))
    out["all_gather"] = [o.tolist() for o in outs]
    flat = torch.zeros(2 * ws)
    dist.all_gather_into_tensor(flat, torch.tensor([rank, rank + 0.5]))
    out["all_gather_into_tensor"] = flat.tolist()
    rs = torch.zeros(2)
    dist.reduce_scatter_tensor(rs, torch.arange(2 * ws, dtype=torch.float32) + rank)
    out["reduce_scatter_tensor"] = rs.tolist()
    t = torch.tensor([rank + 1.0])
    dist.reduce(t, dst=1)
    if rank == 1:      # the other ranks' tensors are left unspecified
        out["reduce"] = t.tolist()
    glist = [torch.zeros(1) for _ in range(ws)] if rank == 0 else None
    dist.gather(torch.tensor([rank * 2.0]), glist, dst=0)
    out["gather"] = None if glist is None else [g.tolist() for g in glist]
    s = torch.zeros(3)
    dist.scatter(s, [torch.full((3,), i + 0.25) for i in range(ws)] if rank == 0 else None,
                 src=0)
    out["scatter"] = s.tolist()
    a2a = torch.zeros(ws)
    dist.all_to_all_single(a2a, torch.arange(ws, dtype=torch.float32) + 10 * rank)
    out["all_to_all_single"] = a2a.tolist()
    if rank == 0:
        dist.send(torch.tensor([1.0, 2.0]), 1, tag=3)
        w = dist.isend(torch.tensor([5.0]), 1, tag=4)
        w.wait()
        got = torch.zeros(1)
        out["recv_any_src"] = dist.recv(got)
        out["recv_any"] = got.tolist()
    elif rank == 1:
        late = torch.zeros(1)
        w = dist.irecv(late, 0, tag=4)
        first = torch.zeros(2)
        dist.recv(first, 0, tag=3)
        w.wait()
        out["recv_tags"] = first.tolist() + late.tolist()
        dist.send(torch.tensor([9.0]), 0)
    objs = [None] * ws
    dist.all_gather_object(objs, {"rank": rank, "s": "x" * rank})
    out["all_gather_object"] = objs
    lst = [rank, "mine"] if rank == 0 else [None, None]
    dist.broadcast_object_list(lst, src=0)
    out["broadcast_object_list"] = lst
    g = dist.new_group([0, ws - 1])
    t = torch.ones(1) * (rank + 1)
    dist.all_reduce(t, group=g)
    out["new_group"] = [dist.get_rank(g), dist.get_world_size(g), t.tolist()]
    dist.barrier()
    out["rank_size"] = [dist.get_rank(), dist.get_world_size(), str(dist.get_backend())]
    more_collectives(rank, ws, out, g)


def more_collectives(rank, ws, out, pair):
    objs = [None] * ws if rank == 0 else None
    dist.gather_object({"r": rank}, objs, dst=0)
    out["gather_object"] = objs
    got = [None]
    dist.scatter_object_list(got, [f"item{i}" for i in range(ws)] if rank == 0 else None, src=0)
    out["scatter_object_list"] = got
    if rank == 0:
        dist.send_object_list([1, "two", {"3": 3}], dst=1)
    elif rank == 1:
        got = [None] * 3
        out["recv_object_list"] = [dist.recv_object_list(got, src=0), got]
    outs = [torch.zeros(2) for _ in range(ws)]
    dist.all_to_all(outs, [torch.full((2,), 10.0 * rank + j) for j in range(ws)])
    out["all_to_all"] = [t.tolist() for t in outs]
    r = torch.zeros(3)
    dist.reduce_scatter(r, [torch.full((3,), float(rank + j)) for j in range(ws)])
    out["reduce_scatter"] = r.tolist()
    got = torch.zeros(2)
    ops = [dist.P2POp(dist.isend, torch.full((2,), float(rank)), (rank + 1) % ws),
           dist.P2POp(dist.irecv, got, (rank - 1) % ws)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    out["batch_isend_irecv"] = got.tolist()
    dist.monitored_barrier()
    if rank in (0, ws - 1):              # DDP on a group of two of the ranks
        m = torch.nn.Linear(3, 1)
        with torch.no_grad():
            m.weight.fill_(0.5 + rank)
            m.bias.fill_(rank)
        ddp = DDP(m, process_group=pair)
        ddp(torch.ones(2, 3) * (rank + 1)).sum().backward()
        out["ddp_group"] = [m.weight.grad.tolist(), m.bias.grad.tolist(), m.weight.tolist()]
    w = dist.all_reduce(torch.ones(1), async_op=True)
    out["work"] = [w.wait(), w.is_completed(), w.is_success()]
    works = [dist.broadcast(torch.full((1,), float(rank)), src=0, async_op=True)
             for _ in range(3)]
    for w in reversed(works):           # waited on in another order than issued
        w.wait()
    i8 = torch.tensor([rank + 1], dtype=torch.int8)
    dist.all_reduce(i8, op=dist.ReduceOp.BXOR)
    h = torch.tensor([1.5 * rank], dtype=torch.float16)
    dist.all_reduce(h)
    c = torch.tensor([1 + 2j * rank], dtype=torch.complex64)
    dist.all_reduce(c)
    nc = torch.arange(6.).reshape(2, 3).t()
    dist.all_reduce(nc)
    out["dtypes"] = [i8.tolist(), h.tolist(), c.real.tolist(), c.imag.tolist(), nc.tolist()]


def train(rank, ws, out, steps=4):
    torch.manual_seed(0)
    x, y = data()
    share = len(x) // ws
    xs = torch.tensor(x[rank * share:(rank + 1) * share])
    ys = torch.tensor(y[rank * share:(rank + 1) * share])
    model = DDP(net(rank))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(xs), ys)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out["losses"] = losses
    out["params"] = [p.detach().numpy().ravel().tolist() for p in model.module.parameters()]


def text(e):
    # gloo's messages start with its source location, which is not compared
    message = str(e).split("] ", 1)[-1].split(". This")[0]
    return type(e).__name__ + ": " + re.sub(r"\]:\d+", "]", message)


def errors(rank, out):
    """Timeouts and a dead peer (the last thing the program does: it breaks the groups)."""
    short = datetime.timedelta(seconds=0.5)
    second = dist.new_group([0, 1], timeout=short)
    third = dist.new_group([0, 1], timeout=short)
    if rank != 0:
        time.sleep(0.8)
        os._exit(0)                      # a rank that dies without a word
    t = torch.ones(2)
    lines = []
    for step in range(4):
        try:
            if step == 0:                # nothing is sent: the wait's own timeout
                dist.irecv(t, 1, tag=9).wait(datetime.timedelta(seconds=0.2))
            elif step == 1:              # the timed-out group is closed
                dist.all_reduce(t)
            elif step == 2:              # rank 1 never joins: the group's timeout
                dist.all_reduce(t, group=second)
            else:                        # rank 1 has died
                time.sleep(1.0)
                dist.all_reduce(t, group=third)
            lines.append("no error")
        except RuntimeError as e:
            lines.append(text(e))
    out["errors"] = lines


def run(rank, ws, port, out_dir, what):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=ws)
    out = {}
    if "collectives" in what:
        collectives(rank, ws, out)
    if "ddp" in what:
        train(rank, ws, out)
    path = os.path.join(out_dir, f"{rank}.json")
    if "errors" in what:
        with open(path, "w") as f:
            json.dump(out, f)
        errors(rank, out)
    else:
        dist.destroy_process_group()
    with open(path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    ws, port, out_dir, what = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    if "fork" in what:   # (the oracle's ranks: no second import of torch in each)
        mp.start_processes(run, args=(ws, port, out_dir, what), nprocs=ws, start_method="fork")
    else:
        mp.spawn(run, args=(ws, port, out_dir, what), nprocs=ws, join=True)
'''

def _free_port() -> int:
    """A free port below the kernel's ephemeral range: a port the kernel handed out by
    binding to 0 can be handed out again (to another test worker's connection) before the
    program it is meant for binds it, and its rank then fails with EADDRINUSE."""
    low = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    for _ in range(200):
        port = _PORTS.randrange(max(1024, low - 12000), low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port found below the ephemeral range")


_PORTS = random.SystemRandom()   # (not seeded alike in every test worker)


def _env() -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(var, None)
    return env


def _launch(program: str, lib: str, args: list, tmp: Path, name: str):
    """Start `program`, with `LIB` = `lib`, as a script (its output piped)."""
    script = tmp / f"{name}_{lib}.py"
    script.write_text(program.replace("LIB", lib))
    return subprocess.Popen([sys.executable, str(script), *map(str, args)], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _start(program, lib, ws, what, tmp, name):
    out = tmp / f"{name}_{lib}_{ws}"
    out.mkdir()
    return _launch(program, lib, [ws, _free_port(), out, what], tmp, name), out


def _single_process_training(steps: int = 4) -> dict:
    """The oracle of DDP: one process, the whole batch, plain SGD."""
    ns: dict = {}
    exec(PROGRAM.replace("LIB", "fusegrad").split("def collectives")[0], ns)
    x, y = ns["data"]()
    model = ns["net"](0)
    opt = fg.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        fg.nn.functional.mse_loss(model(fg.tensor(x)), fg.tensor(y)).backward()
        opt.step()
    return {"params": [p.detach().numpy().ravel().tolist() for p in model.parameters()]}


def _close_params(a: list, b: list, rtol: float = 2e-5, atol: float = 2e-6) -> None:
    for pa, pb in zip(a, b, strict=True):
        np.testing.assert_allclose(np.array(pa), np.array(pb), rtol=rtol, atol=atol)


def _check_against(ours: list, theirs: list) -> None:
    for r, (mine, ref) in enumerate(zip(ours, theirs, strict=True)):
        assert set(mine) == set(ref), r
        for key in mine:
            if key in ("params", "losses", "big_head"):
                _close_params(mine[key] if key == "params" else [mine[key]],
                              ref[key] if key == "params" else [ref[key]])
            else:
                assert mine[key] == ref[key], (r, key, mine[key], ref[key])


@pytest.fixture(scope="module", autouse=True)
def runs(tmp_path_factory):
    """Every spawned program, started together before the module's first test (they mostly
    wait on each other's ranks; the in-process tests run meanwhile)."""
    tmp = tmp_path_factory.mktemp("tcp")
    started = {
        "fusegrad2": _start(PROGRAM, "fusegrad", 2, "collectives,ddp,errors", tmp, "prog"),
        "torch2": _start(PROGRAM, "torch", 2, "collectives,ddp,errors,fork", tmp, "prog"),
        "fusegrad3": _start(PROGRAM, "fusegrad", 3, "collectives,ddp", tmp, "prog"),
    }
    snippets = str(Path(__file__).parent / "distributed" / "seed_snippets.py")
    for transport in ("tcp", "mpi"):
        if transport == "mpi" and (importlib.util.find_spec("mpi4py") is None or (
                shutil.which("mpiexec") is None and not os.access(
                    os.path.join(os.path.dirname(sys.executable), "mpiexec"), os.X_OK))):
            continue
        command = [sys.executable, "-m", "fusegrad.distributed.run", "--transport", transport,
                   "--nproc-per-node", "2", "--master-port", str(_free_port()), snippets]
        started[f"launcher_{transport}"] = (subprocess.Popen(
            command, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
            None)
    yield started
    for proc, _ in started.values():   # programs whose test did not run: let them end
        if proc.returncode is None:
            proc.communicate(timeout=120)


def _get(runs, name: str) -> list:
    proc, out = runs[name]
    if proc.returncode is None:
        output, _ = proc.communicate(timeout=120)
        proc.output = output
    assert proc.returncode == 0, proc.output
    return [json.loads((out / f"{r}.json").read_text()) for r in range(int(name[-1]))]


def _outcome(fn):
    try:
        value = fn()
    except Exception as exc:  # noqa: BLE001 - the error itself is compared
        return type(exc).__name__, str(exc).replace("torch.", "").split("Invoked with")[0]
    return "ok", value


def _store_script(store) -> list:
    """Every store operation, with errors, in one sequence."""
    out = [_outcome(lambda: store.set("a", "x")), _outcome(lambda: store.get("a")),
           _outcome(lambda: store.set("b", b"\x00\xff")), _outcome(lambda: store.get("b")),
           _outcome(lambda: store.add("c", 3)), _outcome(lambda: store.add("c", -1)),
           _outcome(lambda: store.get("c")), _outcome(lambda: store.check(["a", "zz"])),
           _outcome(lambda: store.check(["a", "c"])), _outcome(lambda: store.delete_key("a")),
           _outcome(lambda: store.delete_key("a")), _outcome(lambda: store.num_keys()),
           _outcome(lambda: store.compare_set("k", "", "v")),
           _outcome(lambda: store.compare_set("k", "w", "v2")),
           _outcome(lambda: store.compare_set("k", "v", "v3")),
           _outcome(lambda: store.compare_set("k2", "nope", "v")),
           _outcome(lambda: store.append("ap", "12")), _outcome(lambda: store.append("ap", "3")),
           _outcome(lambda: store.multi_get(["ap", "b"])),
           _outcome(lambda: store.multi_set(["m1", "m2"], ["1", b"2"])),
           _outcome(lambda: store.get("m2")), _outcome(lambda: store.wait(["b", "m1"])),
           _outcome(lambda: store.num_keys())]
    store.set_timeout(datetime.timedelta(seconds=0.05))
    out += [_outcome(lambda: store.get("missing")),
            _outcome(lambda: store.wait(["nothing"], datetime.timedelta(seconds=0.03))),
            _outcome(lambda: store.timeout)]
    return out


def test_stores_match_torch(tmp_path):
    t_master = tdist.TCPStore("127.0.0.1", 0, 2, True, wait_for_workers=False)
    f_master = fdist.TCPStore("127.0.0.1", 0, 2, True, wait_for_workers=False)
    # A client sees the master's keys and counts itself in.
    t_client = tdist.TCPStore("127.0.0.1", t_master.port, 2, False)
    f_client = fdist.TCPStore("127.0.0.1", f_master.port, 2, False)
    assert f_master.port != 0 and f_client.port == f_master.port
    assert f_client.num_keys() == t_client.num_keys()
    assert _store_script(f_client) == _store_script(t_client)
    assert f_master.get("ap") == t_master.get("ap") == b"123"
    assert f_master.num_keys() == t_master.num_keys()
    pairs = [(fdist.HashStore(), tdist.HashStore()),
             (fdist.FileStore(str(tmp_path / "f"), 1), tdist.FileStore(str(tmp_path / "t"), 1)),
             (fdist.PrefixStore("pre", fdist.HashStore()),
              tdist.PrefixStore("pre", tdist.HashStore()))]
    for ours, theirs in pairs:
        assert _store_script(ours) == _store_script(theirs), type(ours).__name__
    inner = fdist.HashStore()
    fdist.PrefixStore("p", inner).set("k", "1")
    assert inner.get("p/k") == b"1"
    for cls in ("TCPStore", "FileStore", "HashStore", "PrefixStore", "Store"):
        assert issubclass(getattr(fdist, cls), fdist.Store)
    # The master's port is taken: the same error as torch's.
    assert _outcome(lambda: fdist.TCPStore("127.0.0.1", f_master.port, 1, True)) == \
        _outcome(lambda: tdist.TCPStore("127.0.0.1", t_master.port, 1, True))[:1] + \
        (_outcome(lambda: tdist.TCPStore("127.0.0.1", f_master.port, 1, True))[1],)


def test_store_timeouts_match_torch():
    short = datetime.timedelta(seconds=0.3)
    port = _free_port()
    for fn in (lambda d: d.TCPStore("127.0.0.1", port, 2, False, timeout=short),
               lambda d: d.TCPStore("127.0.0.1", 0, 2, True, timeout=short),
               lambda d: d.TCPStore("127.0.0.1", 0, 0, True)):
        assert _outcome(lambda f=fn: f(fdist)) == _outcome(lambda f=fn: f(tdist))


def _init_error(dist, monkeypatch, env: dict, **kwargs):
    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    kwargs.setdefault("timeout", datetime.timedelta(seconds=0.3))
    outcome = _outcome(lambda: dist.init_process_group("gloo", **kwargs))
    assert not dist.is_initialized()
    return outcome


ADDR = {"MASTER_ADDR": "127.0.0.1"}


@pytest.mark.parametrize("env, kwargs", [
    ({}, dict(rank=0, world_size=1)),
    (ADDR, dict(rank=0, world_size=1)),
    ({**ADDR, "MASTER_PORT": "1"}, {}),
    ({**ADDR, "MASTER_PORT": "1", "RANK": "0"}, {}),
    ({**ADDR, "MASTER_PORT": "1", "RANK": "x", "WORLD_SIZE": "1"}, {}),
    ({**ADDR, "MASTER_PORT": "PORT"}, dict(rank=0, world_size=0)),
    ({**ADDR, "MASTER_PORT": "PORT"}, dict(rank=2, world_size=2)),
    ({**ADDR, "MASTER_PORT": "PORT"}, dict(rank=0, world_size=2)),
    ({}, dict(init_method="tcp://127.0.0.1:PORT", world_size=1)),
    ({}, dict(init_method="tcp://127.0.0.1:PORT", rank=0)),
    ({}, dict(init_method="tcp://127.0.0.1", rank=0, world_size=1)),
    ({}, dict(init_method="bogus://x", rank=0, world_size=1)),
    ({}, dict(init_method="env://", store="hash", rank=0, world_size=1)),
    ({}, dict(store="hash")),
    ({}, dict(store="hash", rank=2, world_size=2)),
    ({}, dict(store="hash", rank=-2, world_size=2)),
])
def test_rendezvous_errors_match_torch(env, kwargs, monkeypatch):
    results = []
    for dist in (fdist, tdist):
        port = str(_free_port())
        e = {k: v.replace("PORT", port) for k, v in env.items()}
        kw = {k: (v.replace("PORT", port) if isinstance(v, str) else v)
              for k, v in kwargs.items()}
        if kw.get("store") == "hash":
            kw["store"] = dist.HashStore()
        outcome = _init_error(dist, monkeypatch, e, **kw)
        # (gloo's enforce messages start with their source location)
        message = outcome[1].split("] ", 1)[-1] if outcome[1].startswith("[enforce") \
            else outcome[1]
        results.append((outcome[0], message.replace(port, "PORT")))
    assert results[0] == results[1]


@pytest.mark.parametrize("how", ["env", "tcp", "file", "store"])
def test_single_rank_init_methods(how, monkeypatch, tmp_path):
    """One rank by every rendezvous: the group works and can be made again after destroy."""
    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)
    port = _free_port()
    if how == "env":
        monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
        monkeypatch.setenv("MASTER_PORT", str(port))
        monkeypatch.setenv("RANK", "0")
        monkeypatch.setenv("WORLD_SIZE", "1")
    kwargs = {"env": {}, "tcp": dict(init_method=f"tcp://127.0.0.1:{port}?rank=0&world_size=1"),
              "file": dict(init_method=f"file://{tmp_path}/rdv", rank=0, world_size=1),
              "store": dict(store=fdist.HashStore(), rank=0, world_size=1)}[how]
    for _ in range(2):
        fdist.init_process_group("gloo", **kwargs)
        try:
            t = fg.arange(4.0)
            fdist.all_reduce(t)
            assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
            assert (fdist.get_rank(), fdist.get_world_size()) == (0, 1)
            assert fdist.get_backend() == "gloo"
        finally:
            fdist.destroy_process_group()
    if how == "file":      # the last store of the world removes its file, as torch's does
        assert not (tmp_path / "rdv").exists()


def test_deprecated_gather_scatter_names_warn_as_torch():
    """all_gather_into_tensor / reduce_scatter_tensor: torch's FutureWarning, then the same
    result as their new names (one rank, a HashStore rendezvous)."""
    seen = []
    for lib, dist in ((fg, fdist), (torch, tdist)):
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        try:
            with pytest.warns(FutureWarning) as record:
                out = lib.zeros(2)
                dist.all_gather_into_tensor(out, lib.ones(2))
                red = lib.zeros(2)
                dist.reduce_scatter_tensor(red, lib.arange(2.0))
            new_out, new_red = lib.zeros(2), lib.zeros(2)
            dist.all_gather_single(new_out, lib.ones(2))
            dist.reduce_scatter_single(new_red, lib.arange(2.0))
            seen.append(([str(w.message) for w in record], out.tolist(), red.tolist(),
                         new_out.tolist(), new_red.tolist()))
        finally:
            dist.destroy_process_group()
    assert seen[0] == seen[1]


# The spawned programs (started at the module's first test, running meanwhile).
def test_spawned_collectives_and_ddp_match_torch_gloo(runs):
    """Two ranks under mp.spawn: every collective and a DDP training loop as torch's gloo,
    and the trained parameters as one process on the whole batch."""
    mine, ref = _get(runs, "fusegrad2"), _get(runs, "torch2")
    _check_against(mine, ref)
    oracle = _single_process_training()
    for r in range(2):
        _close_params(mine[r]["params"], oracle["params"])
    assert mine[0]["params"] == mine[1]["params"]          # replicas stay identical


def test_three_ranks_against_numpy_and_one_process(runs):
    """Three ranks: the collectives' values from NumPy, bit-identical all-reduce results on
    every rank, and DDP's parameters as one process on the whole batch."""
    res = _get(runs, "fusegrad3")
    ws = 3
    for r, o in enumerate(res):
        assert o["sum"] == (np.arange(6) * 6.0).tolist()
        assert o["MAX"] == [3.0, 3.0, 2.0] and o["MIN"] == [1.0, 1.0, 2.0]
        assert o["PRODUCT"] == [6.0, 6.0, 8.0]
        assert o["avg"] == [1.0, 2.0] and o["int64"] == [3, 30]
        assert o["bool"] == [True, False, True]
        assert o["big_done"] and o["big_same_on_all"]
        want = sum(np.random.default_rng(k).standard_normal(300001).astype(np.float32)[:3]
                   for k in range(ws))
        np.testing.assert_allclose(o["big_head"], want, rtol=1e-6)
        assert o["broadcast"] == [2.0, 2.0]
        assert o["all_gather"] == [[k, -k] for k in range(ws)]
        assert o["all_gather_into_tensor"] == [v for k in range(ws) for v in (k, k + 0.5)]
        full = sum(np.arange(2 * ws, dtype=np.float32) + k for k in range(ws))
        assert o["reduce_scatter_tensor"] == full[2 * r:2 * r + 2].tolist()
        assert o.get("reduce") == ([6.0] if r == 1 else None)
        assert o["gather"] == ([[0.0], [2.0], [4.0]] if r == 0 else None)
        assert o["scatter"] == [r + 0.25] * 3
        assert o["all_to_all_single"] == [10.0 * k + r for k in range(ws)]
        assert o["all_gather_object"] == [{"rank": k, "s": "x" * k} for k in range(ws)]
        assert o["broadcast_object_list"] == [0, "mine"]
        assert o["new_group"] == ([-1, -1, [2.0]] if r == 1 else [r // 2, 2, [4.0]])
        assert o["rank_size"] == [r, ws, "gloo"]
        assert o["all_to_all"] == [[10.0 * k + r] * 2 for k in range(ws)]
        assert o["reduce_scatter"] == [3.0 * r + 3.0] * 3
        assert o["batch_isend_irecv"] == [float((r - 1) % ws)] * 2
        assert o["dtypes"] == [[0], [4.5], [3.0], [6.0], [[0.0, 9.0], [3.0, 12.0], [6.0, 15.0]]]
        assert o["scatter_object_list"] == [f"item{r}"]
    assert res[0]["recv_any"] == [9.0] and res[0]["recv_any_src"] == 1
    assert res[1]["recv_tags"] == [1.0, 2.0, 5.0]
    oracle = _single_process_training()
    for r in range(ws):
        _close_params(res[r]["params"], oracle["params"])
        assert res[r]["params"] == res[0]["params"]


def test_timeout_and_dead_peer_errors_match_torch(runs):
    """A wait's timeout, the timed-out group refusing work, the group's timeout, and a
    collective with a rank that died: gloo's texts (without its source location)."""
    mine, ref = _get(runs, "fusegrad2")[0]["errors"], _get(runs, "torch2")[0]["errors"]
    assert mine == ref
    assert mine == ["RuntimeError: Timed out waiting 200ms for recv operation to complete",
                    "RuntimeError: Application timeout caused pair closure",
                    "RuntimeError: Timed out waiting 500ms for recv operation to complete",
                    "RuntimeError: Connection closed by peer [127.0.0.1]"]


def _launcher_lines(runs, transport: str) -> tuple:
    proc, _ = runs[f"launcher_{transport}"]
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, output
    envs = sorted(line.split()[1:4] for line in output.splitlines() if line.startswith("env "))
    sums = {line.split()[-1] for line in output.splitlines()
            if line.startswith("rank ") and " checksum " in line}
    return envs, sums


def test_launcher_without_mpi_as_with_it(runs):
    """`python -m fusegrad.distributed.run --transport tcp`: torchrun's variables on every
    rank, replicas kept identical, and the same trained weights as the MPI launch."""
    envs, sums = _launcher_lines(runs, "tcp")
    assert envs == [["0", "0", "2"], ["1", "1", "2"]]
    assert len(sums) == 1
    if "launcher_mpi" in runs:
        assert _launcher_lines(runs, "mpi") == (envs, sums)


class _Planted:
    """What a pickle would run when loaded: it creates a file."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_store_requests_and_files_are_never_unpickled(tmp_path):
    """The store's port is open to the network and its file may be written by others: a
    pickled payload runs nothing, and the store keeps serving."""
    import pickle
    import struct

    planted = tmp_path / "planted"
    master = fdist.TCPStore("127.0.0.1", 0, 1, True, wait_for_workers=False)
    payload = pickle.dumps(("set", _Planted(str(planted))))
    with socket.create_connection(("127.0.0.1", master.port)) as sock:
        sock.sendall(struct.pack("<Q", len(payload)) + payload)
        sock.settimeout(5)
        assert sock.recv(1) == b""  # (the server closes a connection it cannot read)
    master.set("key", "value")
    assert master.get("key") == b"value" and not planted.exists()
    path = tmp_path / "store"
    path.write_bytes(pickle.dumps({"key": _Planted(str(planted))}))
    with pytest.raises(fdist.DistStoreError):
        fdist.FileStore(str(path), 1).get("key")
    assert not planted.exists()
