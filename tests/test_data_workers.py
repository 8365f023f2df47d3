"""DataLoader with worker processes: the same batches, in the same order, as with
num_workers=0; worker info, seeding, init functions, errors and IterableDataset sharding;
failures (an exception in a worker, a killed worker, a killed main process) against torch."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch

import fusegrad
import fusegrad.utils.data as fud


def _dataset(n=23):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    return fud.TensorDataset(fusegrad.tensor(x), fusegrad.tensor(np.arange(n)))


def _flat(batches):
    """Batches as nested lists of plain values, for exact comparison."""
    out = []
    for b in batches:
        if isinstance(b, (list, tuple)):
            out.append([t.tolist() if isinstance(t, fusegrad.Tensor) else t for t in b])
        elif isinstance(b, fusegrad.Tensor):
            out.append(b.tolist())
        else:
            out.append(b)
    return out


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("kwargs", [dict(batch_size=4), dict(batch_size=5, drop_last=True),
                                    dict(batch_size=None), dict(batch_size=1)])
def test_same_batches_as_single_process(workers, kwargs):
    ds = _dataset()
    ref = _flat(fud.DataLoader(ds, **kwargs))
    got = _flat(fud.DataLoader(ds, num_workers=workers, **kwargs))
    assert got == ref and len(got) == len(fud.DataLoader(ds, **kwargs))


def test_shuffled_with_generator_and_prefetch():
    ds = _dataset(40)

    def run(workers, **kw):
        g = fusegrad.Generator().manual_seed(7)
        return _flat(fud.DataLoader(ds, batch_size=3, shuffle=True, generator=g,
                                    num_workers=workers, **kw))

    ref = run(0)
    assert run(2) == ref and run(3, prefetch_factor=1) == ref
    assert sorted(sum((b[1] for b in ref), [])) == list(range(40))


class Slow(fud.Dataset):
    """Items that take longer for low indices, so workers finish out of order."""

    def __len__(self):
        return 12

    def __getitem__(self, i):
        import time
        time.sleep(0.02 if i < 4 else 0.0)
        info = fud.get_worker_info()
        return {"i": i, "sq": np.full(2, i * i, dtype=np.int64),
                "worker": -1 if info is None else info.id}


def test_order_kept_when_workers_finish_out_of_order_and_worker_info():
    out = list(fud.DataLoader(Slow(), batch_size=2, num_workers=3))
    assert [b["i"].tolist() for b in out] == [[2 * k, 2 * k + 1] for k in range(6)]
    assert [b["sq"][:, 0].tolist() for b in out] == [[(2 * k) ** 2, (2 * k + 1) ** 2]
                                                     for k in range(6)]
    # batches are handed out to the workers in turn
    assert [b["worker"].tolist()[0] for b in out] == [0, 1, 2, 0, 1, 2]
    assert fud.get_worker_info() is None
    assert list(fud.DataLoader(Slow(), batch_size=12))[0]["worker"].tolist() == [-1] * 12


def test_custom_collate_and_worker_init_fn():
    ds = _dataset(9)
    loader = fud.DataLoader(ds, batch_size=4, num_workers=2, collate_fn=len,
                            worker_init_fn=_init)
    assert list(loader) == [4, 4, 1]


def _init(worker_id):
    info = fud.get_worker_info()
    assert info is not None and info.id == worker_id and info.num_workers == 2


class Stream(fud.IterableDataset):
    """0..n-1, split between the workers with get_worker_info()."""

    def __init__(self, n=17):
        self.n = n

    def __iter__(self):
        info = fud.get_worker_info()
        if info is None:
            return iter(range(self.n))
        per = math.ceil(self.n / info.num_workers)
        return iter(range(info.id * per, min(self.n, (info.id + 1) * per)))


def test_iterable_dataset_sharded_by_worker_info():
    assert _flat(fud.DataLoader(Stream(), batch_size=4)) == [
        [0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15], [16]]
    # worker 0 holds 0..8, worker 1 holds 9..16; batches alternate between them
    got = _flat(fud.DataLoader(Stream(), batch_size=4, num_workers=2))
    assert got == [[0, 1, 2, 3], [9, 10, 11, 12], [4, 5, 6, 7], [13, 14, 15, 16], [8]]
    items = sorted(x for b in got for x in b)
    assert items == list(range(17))
    unbatched = _flat(fud.DataLoader(Stream(5), batch_size=None, num_workers=2))
    assert sorted(unbatched) == list(range(5))


def test_iterable_dataset_copies_without_sharding():
    class Plain(fud.IterableDataset):
        def __iter__(self):
            return iter(range(3))

    got = _flat(fud.DataLoader(Plain(), batch_size=2, num_workers=2))
    assert got == [[0, 1], [0, 1], [2], [2]]


class Boom(fud.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5:
            raise KeyError("bad index 5")
        return i


def test_worker_error_is_raised_in_main_process():
    it = iter(fud.DataLoader(Boom(), batch_size=2, num_workers=2))
    assert next(it).tolist() == [0, 1]
    assert next(it).tolist() == [2, 3]
    with pytest.raises(KeyError, match="Caught KeyError in DataLoader worker process 0"):
        next(it)
    # The pass goes on after the error; running it to its end stops the workers now, where
    # the iterator (held by the exception's traceback, a reference cycle) left to the cyclic
    # collector would find its queues closed and wait out the workers' join timeout.
    assert _flat(it) == [[6, 7]]


def test_worker_seeds_differ_and_options_validated():
    class Draw(fud.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return float(fusegrad.rand(()))

    vals = [v for b in fud.DataLoader(Draw(), batch_size=1, num_workers=2) for v in b.tolist()]
    assert vals[0] != vals[1]
    with pytest.raises(ValueError, match="prefetch_factor"):
        fud.DataLoader(_dataset(), prefetch_factor=2)
    with pytest.raises(ValueError, match="num_workers option should be non-negative"):
        fud.DataLoader(_dataset(), num_workers=-1)
    with pytest.raises(ValueError, match="timeout"):
        fud.DataLoader(_dataset(), timeout=-1)


# ---- failures, with torch's DataLoader as the oracle ----

LOADERS = {"fusegrad": fud.DataLoader, "torch": torch.utils.data.DataLoader}


class TwoArgs(Exception):
    """Cannot be rebuilt from one message: re-raised as RuntimeError."""

    def __init__(self, a, b):
        super().__init__(a, b)


class WithMessage(Exception):
    """Takes its text as `message=` (a class attribute `message` says so)."""

    message = "class default"

    def __init__(self, code=0, message=""):
        super().__init__(code, message)
        self.message = message


class Raises:
    """Map-style dataset (plain class, usable by both loaders) failing at index 5."""

    def __init__(self, exc):
        self.exc = exc

    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5:
            raise self.exc
        return i


def _worker_failure(lib, exc):
    it = iter(LOADERS[lib](Raises(exc), batch_size=2, num_workers=2))
    assert [next(it).tolist(), next(it).tolist()] == [[0, 1], [2, 3]]
    with pytest.raises(Exception) as info:
        next(it)
    list(it)  # torch's loader goes on after a worker error: let it finish and stop its workers
    return info.value


@pytest.mark.parametrize("exc", [KeyError("bad index 5"), ValueError("bad\nvalue"),
                                 TwoArgs(1, 2), WithMessage(3, "msg")],
                         ids=["KeyError", "ValueError", "TwoArgs", "WithMessage"])
def test_worker_exception_reraised_as_torch(exc):
    """Same type; the text is torch's: a header, then the worker's traceback with real
    newlines (a KeyError's text too, which Python would otherwise show as a repr)."""
    got, ref = (_worker_failure(lib, exc) for lib in ("fusegrad", "torch"))
    assert type(got) is type(ref)
    texts = []
    for e in (got, ref):
        text = e.message if isinstance(e, WithMessage) else str(e)
        lines = text.splitlines()
        assert "\\n" not in text and len(lines) > 4
        texts.append((lines[:2], lines[-1]))
    assert texts[0] == texts[1]
    header = f"Caught {type(exc).__name__} in DataLoader worker process 0."
    assert texts[0][0] == [header, "Original Traceback (most recent call last):"]


def _pid_dataset_item(i):
    time.sleep(0.01)
    return os.getpid()


class Pids:
    """Each item is the pid of the worker that fetched it."""

    def __len__(self):
        return 400

    def __getitem__(self, i):
        return _pid_dataset_item(i)


def _kill_second_worker(loader_cls) -> tuple[str, float]:
    """SIGKILL worker 1 mid-iteration; the error text (pid written `{pid}`) and how long after
    the kill it came."""
    it = iter(loader_cls(Pids(), batch_size=2, num_workers=2))
    first, second = next(it), next(it)  # handed out in turn: worker 0, then worker 1
    victim = int(second[0])
    assert int(first[0]) != victim
    os.kill(victim, signal.SIGKILL)
    start = time.monotonic()
    try:
        for _ in it:
            pass
    except RuntimeError as e:
        return str(e).replace(str(victim), "{pid}"), time.monotonic() - start
    raise AssertionError("the iteration ended without an error")


# torch's loader reports a dead worker from a SIGCHLD handler that can raise anywhere in the
# process later on, so it runs in a process of its own.
_TORCH_KILLED_WORKER = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import torch
    from test_data_workers import _kill_second_worker
    print(_kill_second_worker(torch.utils.data.DataLoader)[0], flush=True)
""")


def _env_with_fusegrad():
    src = os.path.dirname(os.path.dirname(os.path.abspath(fusegrad.__file__)))
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}


# PyTorch's two reports of a killed worker: which one it gives is a race between its SIGCHLD
# handler (the second) and its queue's timeout check (the first); on a busy machine either.
_TORCH_KILLED_MESSAGES = ("DataLoader worker (pid(s) {pid}) exited unexpectedly",
                          "DataLoader worker (pid {pid}) is killed by signal: Killed.")


def test_killed_worker_reported_within_a_second_as_torch():
    text, elapsed = _kill_second_worker(fud.DataLoader)
    assert elapsed < 1.5, elapsed
    # PyTorch's own report of the kill: on a loaded machine its main process sometimes sees
    # the worker's pipe close first (an EOFError on stderr, nothing reported), so up to three
    # tries.
    for _ in range(3):
        torch_run = subprocess.run(
            [sys.executable, "-c", _TORCH_KILLED_WORKER,
             os.path.dirname(os.path.abspath(__file__))],
            capture_output=True, text=True, env=_env_with_fusegrad(), timeout=120)
        if torch_run.stdout.strip() in _TORCH_KILLED_MESSAGES:
            break
    assert torch_run.stdout.strip() in _TORCH_KILLED_MESSAGES, torch_run.stdout
    assert text == _TORCH_KILLED_MESSAGES[0]


_KILLED_MAIN = textwrap.dedent("""
    import os, sys, time
    import fusegrad.utils.data as fud

    class Slow:
        def __len__(self):
            return 10 ** 6

        def __getitem__(self, i):
            time.sleep(0.005)
            return os.getpid()

    pids = set()
    for batch in fud.DataLoader(Slow(), batch_size=2, num_workers=2):
        pids.update(batch.tolist())
        if len(pids) == 2:
            print(*sorted(pids), flush=True)
            pids.add(None)  # print once; keep iterating until killed
""")


def _alive(pid: int) -> bool:
    """Whether `pid` is a running (not zombie) process, read from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_workers_exit_when_main_process_is_killed():
    main = subprocess.Popen([sys.executable, "-c", _KILLED_MAIN], stdout=subprocess.PIPE,
                            env=_env_with_fusegrad(), text=True)
    workers = []
    try:
        workers = [int(p) for p in main.stdout.readline().split()]
        assert len(workers) == 2 and all(_ppid(p) == main.pid for p in workers)
        main.kill()  # SIGKILL: no cleanup runs in the main process
        main.wait()
        deadline = time.monotonic() + 5
        while any(map(_alive, workers)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(map(_alive, workers))
    finally:
        main.kill()
        main.wait()
        for p in workers:  # leave nothing behind if the workers did not exit
            if _alive(p):
                os.kill(p, signal.SIGKILL)


def test_an_iterator_collected_after_an_error_does_not_wait_for_its_workers():
    """A pass left at an error and collected later (its queues already closed, so the stop
    message never reaches the workers): the workers see the stop on their next idle poll
    (0.5 s) instead of shutdown waiting `_POLL_S` (5 s) for each of them."""
    import gc

    from fusegrad.utils.data import _worker

    enabled = gc.isenabled()
    gc.disable()
    try:
        it = iter(fud.DataLoader(Boom(), batch_size=2, num_workers=2))
        with pytest.raises(KeyError, match="bad index 5"):
            for _ in it:
                pass
        start = time.monotonic()
        del it
        gc.collect()
        assert time.monotonic() - start < _worker._POLL_S
    finally:
        if enabled:
            gc.enable()
