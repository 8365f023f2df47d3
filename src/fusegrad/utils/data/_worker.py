"""DataLoader worker processes (`num_workers > 0`).

The main process hands out tasks, numbered in sampler order, to the workers in turn (at most
`prefetch_factor` outstanding per worker); each worker fetches and collates its batch and
sends it back with the task's number, and the main process yields the batches in task order,
so the output equals the single-process one. With an IterableDataset each worker iterates its
own copy of the dataset (split it with `get_worker_info()`), and batches are taken from the
workers in turn, a worker leaving the rotation once its copy is exhausted (as PyTorch does).

Failures on either side are noticed by polling: the main process checks its workers every
`_CHECK_S` while it waits, so a worker that dies is reported at once; each worker checks its
parent every `_WATCH_S` while it waits for a task, so workers end when the main process is
killed instead of waiting forever on a queue nobody writes to.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import random
import traceback
from dataclasses import dataclass
from typing import Any

_WORKER_INFO: WorkerInfo | None = None
_POLL_S = 5.0  # how long shutdown waits for a worker to finish its task and stop
_CHECK_S = 0.1  # how often the waiting main process looks for dead workers
_WATCH_S = 0.5  # how often an idle worker looks for its parent


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """What `get_worker_info()` returns inside a worker process (`rng` and `worker_method`
    keep PyTorch's defaults: process workers carry no RNG container)."""

    id: int
    num_workers: int
    seed: int
    dataset: Any
    rng: Any = None
    worker_method: str | None = "multiprocessing"


def get_worker_info() -> WorkerInfo | None:
    """This worker's id, the worker count, its seed and its dataset copy; None in the main
    process."""
    return _WORKER_INFO


class _Stop:
    """A worker's IterableDataset copy is exhausted."""


class _KeyErrorMessage(str):
    """A message whose repr is itself: `str(KeyError(m))` is `repr(m)`, which would show the
    carried traceback on one line with escaped newlines."""

    __slots__ = ()

    def __repr__(self) -> str:
        return self


class _WorkerError:
    """An exception raised in a worker, carried back as its type and formatted traceback."""

    def __init__(self, exc: BaseException, worker_id: int) -> None:
        self.exc_type = type(exc)
        self.message = (f"Caught {type(exc).__name__} in DataLoader worker process "
                        f"{worker_id}.\nOriginal "
                        + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))

    def reraise(self):
        """Raise the worker's exception type with the traceback as its message."""
        raise_carried(self.exc_type, self.message)


def raise_carried(exc_type: type, msg: str):
    """Raise `exc_type` with `msg` (a carried traceback) as its message: RuntimeError when
    the type cannot be built from one message."""
    if exc_type is KeyError:
        msg = _KeyErrorMessage(msg)
    elif getattr(exc_type, "message", None):
        # types whose first argument is not the text but that take it as `message=`
        raise exc_type(message=msg)
    try:
        err = exc_type(msg)
    except Exception:  # noqa: BLE001 - constructors with other signatures
        raise RuntimeError(msg) from None
    raise err


# Constants of the SeedSequence-style hash PyTorch uses to turn (base seed, worker id) into
# NumPy's seed in a worker (32-bit multiplicative hashing, as in numpy.random.SeedSequence):
# reproduced so that workers drawing from `np.random` get PyTorch's values.
_HASH_INIT_A, _HASH_MULT_A = 0x43B0D7E5, 0x931E8875
_HASH_INIT_B, _HASH_MULT_B = 0x8B51F9DD, 0x58F38DED
_MIX_MULT_L, _MIX_MULT_R = 0xCA01F9DD, 0x4973F715
_MASK32 = 0xFFFFFFFF


def _numpy_seed(base_seed: int, worker_id: int) -> list[int]:
    """The four 32-bit words NumPy's global RNG is seeded with in worker `worker_id`.

    The entropy words (worker id, low and high halves of the base seed, 0) are hashed into a
    pool, every word is mixed into every other one, and the pool is hashed once more with a
    second constant sequence.
    """
    mult_a = _HASH_INIT_A

    def hash_a(value: int) -> int:
        nonlocal mult_a
        value = (value ^ mult_a) & _MASK32
        mult_a = (mult_a * _HASH_MULT_A) & _MASK32
        value = (value * mult_a) & _MASK32
        return value ^ (value >> 16)

    def mix(x: int, y: int) -> int:
        r = (x * _MIX_MULT_L - y * _MIX_MULT_R) & _MASK32
        return r ^ (r >> 16)

    pool = [hash_a(v) for v in (worker_id, base_seed & _MASK32, base_seed >> 32, 0)]
    for src in range(4):
        for dst in range(4):
            if src != dst:
                pool[dst] = mix(pool[dst], hash_a(pool[src]))
    mult_b = _HASH_INIT_B
    state = []
    for value in pool:
        value ^= mult_b
        mult_b = (mult_b * _HASH_MULT_B) & _MASK32
        value = (value * mult_b) & _MASK32
        state.append(value ^ (value >> 16))
    return state


class _Resume:
    """Sent to a persistent worker at the start of a new pass: restart the dataset
    iterator (IterableDataset) and answer tasks tagged with the new pass number."""

    __slots__ = ("epoch",)

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch


def _worker_loop(dataset, fetch_kind: str, collate_fn, drop_last: bool, batch_size,
                 index_q, result_q, worker_id: int, num_workers: int, base_seed: int,
                 init_fn, stopping=None) -> None:
    """Body of a worker process: seed, run `init_fn`, then answer tasks until told to stop.

    Seeds as PyTorch does: Python's and the torch RNG with `base_seed + worker_id`, NumPy's
    global RNG with `_numpy_seed(base_seed, worker_id)`.
    """
    global _WORKER_INFO
    import numpy as np

    from ..._random import manual_seed
    from ._utils.fetch import fetch_samples

    parent = os.getppid()
    seed = base_seed + worker_id
    random.seed(seed)
    manual_seed(seed % (2 ** 63))
    np.random.seed(_numpy_seed(base_seed, worker_id))
    _WORKER_INFO = WorkerInfo(worker_id, num_workers, seed, dataset)
    it = None
    exhausted = False
    init_error = None
    try:
        if init_fn is not None:
            init_fn(worker_id)
        if fetch_kind == "iterable":
            it = iter(dataset)
    except Exception as exc:  # noqa: BLE001 - sent to the main process
        init_error = _WorkerError(exc, worker_id)
    while True:
        try:
            task = index_q.get(timeout=_WATCH_S)
        except queue.Empty:
            # The main process is gone, or told the workers to stop and its message may
            # never come (an iterator collected late: its queues already closed): nobody
            # wants the results.
            if os.getppid() != parent or stopping is not None and stopping.is_set():
                result_q.cancel_join_thread()
                return
            continue
        if task is not None and stopping is not None and stopping.is_set():
            continue  # shutting down: the tasks queued before the stop are unwanted
        if task is None:
            # Told to stop: what is still buffered for the main process is unwanted, and a
            # process holding results the pipe cannot take would not exit (its queue's
            # feeder thread waits for room), until shutdown's wait ran out and killed it.
            result_q.cancel_join_thread()
            break
        if isinstance(task, _Resume):  # a persistent worker's next pass
            if fetch_kind == "iterable" and init_error is None:
                exhausted = False
                try:
                    it = iter(dataset)
                except Exception as exc:  # noqa: BLE001 - sent with the next task
                    init_error = _WorkerError(exc, worker_id)
            continue
        epoch, number, payload = task
        if init_error is not None:
            result_q.put((epoch, number, init_error))
            continue
        try:
            if fetch_kind == "iterable":
                data = _next_iterable(it, batch_size, drop_last, collate_fn, exhausted)
                if data is _Stop:
                    exhausted = True
                    data = _Stop()
            elif fetch_kind == "batch":
                data = collate_fn(fetch_samples(dataset, payload))
            else:
                data = collate_fn(dataset[payload])
        except Exception as exc:  # noqa: BLE001 - sent to the main process
            data = _WorkerError(exc, worker_id)
        result_q.put((epoch, number, data))


def _next_iterable(it, batch_size, drop_last, collate_fn, exhausted):
    """The worker's next (collated) item or batch from its iterator, or `_Stop`."""
    if exhausted or it is None:
        return _Stop
    if batch_size is None:
        try:
            return collate_fn(next(it))
        except StopIteration:
            return _Stop
    batch = []
    for item in it:
        batch.append(item)
        if len(batch) == batch_size:
            break
    if not batch or (drop_last and len(batch) < batch_size):
        return _Stop
    return collate_fn(batch)


class WorkerPool:
    """`loader.num_workers` worker processes and one pass over their results at a time.

    `reset(tasks)` starts a pass: `tasks` is an iterator of payloads (index lists, single
    indices, or None for an IterableDataset: "your next batch"). `next()` gives the pass's
    batches in task order. A worker's exception is re-raised by `next()` without ending the
    pass (as in PyTorch, the following `next()` goes on with the next batch), so a
    `StopIteration` raised by a dataset ends a `for` loop quietly. Persistent pools keep their
    processes between passes, so the workers' random streams continue; results of tasks
    still in flight from an earlier pass are dropped by their pass number.
    """

    def __init__(self, loader, base_seed: int) -> None:
        ctx = loader.multiprocessing_context
        if ctx is None:
            ctx = multiprocessing.get_context()
        elif isinstance(ctx, str):
            ctx = multiprocessing.get_context(ctx)
        n = self.n = loader.num_workers
        kind = ("iterable" if loader._iterable else
                "batch" if loader.batch_sampler is not None else "single")
        self.persistent = loader.persistent_workers
        self.timeout = loader.timeout
        self.prefetch = loader.prefetch_factor if loader.prefetch_factor is not None else 2
        self.result_q = ctx.Queue()
        # Set at shutdown: workers skip the tasks still queued for them (each would be a
        # batch fetched for nothing before the stop is read), as PyTorch's done event.
        self.stopping = ctx.Event()
        self.index_qs, self.workers = [], []
        self.closed = False
        self.epoch = -1
        for w in range(n):
            iq = ctx.Queue()
            p = ctx.Process(target=_worker_loop, daemon=True, args=(
                loader.dataset, kind, loader.collate_fn, loader.drop_last, loader.batch_size,
                iq, self.result_q, w, n, base_seed, loader.worker_init_fn, self.stopping))
            p.start()
            self.index_qs.append(iq)
            self.workers.append(p)

    def reset(self, tasks) -> None:
        """Start a new pass over `tasks` (None: an IterableDataset's workers)."""
        if self.closed:
            raise AssertionError("DataLoader workers were shut down")
        self.epoch += 1
        if self.epoch:
            for iq in self.index_qs:
                iq.put(_Resume(self.epoch))
        self.active = [True] * self.n
        self.owner: dict[int, int] = {}
        self.done: dict[int, Any] = {}
        self.sent = self.next_out = self.rr = 0
        self.source = iter(tasks) if tasks is not None else None
        self.started = False

    def _put_one(self) -> bool:
        """Hand the next task to the next active worker in turn; False when none is left."""
        n = self.n
        if not any(self.active):
            return False
        if self.source is not None:
            try:
                payload = next(self.source)
            except StopIteration:
                return False
        else:
            payload = None
        while not self.active[self.rr % n]:
            self.rr += 1
        w = self.rr % n
        self.rr += 1
        self.index_qs[w].put((self.epoch, self.sent, payload))
        self.owner[self.sent] = w
        self.sent += 1
        return True

    def next(self) -> Any:
        """The pass's next batch; StopIteration at its end (stopping non-persistent
        workers)."""
        if self.closed:
            raise StopIteration
        try:
            data = self._next_result()
        except BaseException:  # a worker died or timed out, or an interrupt: stop them all
            self.shutdown(graceful=False)
            raise
        if data is _Stop:
            if not self.persistent:
                self.shutdown()
            raise StopIteration
        if isinstance(data, _WorkerError):
            data.reraise()
        return data

    def _next_result(self) -> Any:
        """The next result in task order (a batch or a `_WorkerError`), `_Stop` at the end
        of the pass."""
        if not self.started:
            self.started = True
            for _ in range(self.prefetch * self.n):
                if not self._put_one():
                    break
        while self.next_out < self.sent:
            while self.next_out not in self.done:
                epoch, number, data = _get(self.result_q, self.timeout, self.workers)
                if epoch == self.epoch:  # else left over from an abandoned pass
                    self.done[number] = data
            data = self.done.pop(self.next_out)
            w = self.owner.pop(self.next_out)
            self.next_out += 1
            if isinstance(data, _Stop):
                self.active[w] = False
                self._put_one()
                continue
            self._put_one()
            return data
        return _Stop

    def shutdown(self, graceful: bool = True) -> None:
        """Stop the workers (once)."""
        if not self.closed:
            self.closed = True
            self.stopping.set()
            _shutdown(self.workers, self.index_qs, self.result_q, graceful)


def _shutdown(workers, index_qs, result_q, graceful: bool) -> None:
    """Stop the workers: ask them to stop and wait up to `_POLL_S` each, then terminate the
    rest; after a failure the results are unwanted and they are terminated at once, so the
    error is not held up by a worker busy with a slow item."""
    for iq in index_qs:
        iq.put(None)
    for p in workers:
        if graceful:
            p.join(timeout=_POLL_S)
        if p.is_alive():
            p.terminate()
        p.join()
    # a dead worker never reads its queue: do not wait to flush it
    for iq in index_qs:
        iq.cancel_join_thread()
        iq.close()
    result_q.cancel_join_thread()
    result_q.close()


def _get(result_q, timeout: float, workers) -> tuple[int, Any]:
    """The next result, failing if `timeout` passes or a worker died (checked every
    `_CHECK_S`: a dead worker cannot send a result, so waiting longer only hides it)."""
    waited = 0.0
    while True:
        step = _CHECK_S if timeout <= 0 else min(_CHECK_S, timeout - waited)
        try:
            return result_q.get(timeout=step)
        except queue.Empty:
            waited += step
            dead = [p for p in workers if not p.is_alive()]
            if dead:
                pids = ", ".join(str(p.pid) for p in dead)
                raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited "
                                   "unexpectedly") from None
            if timeout > 0 and waited >= timeout:
                raise RuntimeError(f"DataLoader timed out after {timeout} seconds") from None
