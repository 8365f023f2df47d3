"""DataLoader worker processes (`num_workers > 0`).

The main process hands out tasks, numbered in sampler order, to the workers in turn (at most
`prefetch_factor` outstanding per worker); each worker fetches and collates its batch and
sends it back with the task's number, and the main process yields the batches in task order,
so the output equals the single-process one. With an IterableDataset each worker iterates its
own copy of the dataset (split it with `get_worker_info()`), and batches are taken from the
workers in turn, a worker leaving the rotation once its copy is exhausted (as PyTorch does).
"""

from __future__ import annotations

import multiprocessing
import queue
import random
import traceback
from dataclasses import dataclass
from typing import Any

_WORKER_INFO: WorkerInfo | None = None
_POLL_S = 5.0


@dataclass(frozen=True)
class WorkerInfo:
    """What `get_worker_info()` returns inside a worker process."""

    id: int
    num_workers: int
    seed: int
    dataset: Any


def get_worker_info() -> WorkerInfo | None:
    """This worker's id, the worker count, its seed and its dataset copy; None in the main
    process."""
    return _WORKER_INFO


class _Stop:
    """A worker's IterableDataset copy is exhausted."""


class _WorkerError:
    """An exception raised in a worker, carried back as text."""

    def __init__(self, exc: BaseException, worker_id: int) -> None:
        self.exc_type = type(exc)
        self.message = (f"Caught {type(exc).__name__} in DataLoader worker process "
                        f"{worker_id}.\nOriginal {traceback.format_exc()}")

    def reraise(self):
        """Raise the worker's exception type (RuntimeError if it takes no message)."""
        try:
            err = self.exc_type(self.message)
        except Exception:  # noqa: BLE001 - constructors with other signatures
            err = RuntimeError(self.message)
        raise err


def _worker_loop(dataset, fetch_kind: str, collate_fn, drop_last: bool, batch_size,
                 index_q, result_q, worker_id: int, num_workers: int, seed: int,
                 init_fn) -> None:
    """Body of a worker process: seed, run `init_fn`, then answer tasks until told to stop."""
    global _WORKER_INFO
    import numpy as np

    from ..._random import manual_seed

    random.seed(seed)
    manual_seed(seed % (2 ** 63))
    np.random.seed(seed % (2 ** 32))
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
        task = index_q.get()
        if task is None:
            break
        number, payload = task
        if init_error is not None:
            result_q.put((number, init_error))
            continue
        try:
            if fetch_kind == "iterable":
                data = _next_iterable(it, batch_size, drop_last, collate_fn, exhausted)
                if data is _Stop:
                    exhausted = True
                    data = _Stop()
            elif fetch_kind == "batch":
                data = collate_fn([dataset[i] for i in payload])
            else:
                data = collate_fn(dataset[payload])
        except Exception as exc:  # noqa: BLE001 - sent to the main process
            data = _WorkerError(exc, worker_id)
        result_q.put((number, data))


def _next_iterable(it, batch_size, drop_last, collate_fn, exhausted):
    """The worker's next (collated) item or batch from its iterator, or `_Stop`."""
    if exhausted:
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


def iterate_workers(loader, tasks, base_seed: int) -> Any:
    """Yield `loader`'s batches computed by `loader.num_workers` worker processes.

    `tasks` is an iterator of payloads (index lists, single indices, or None for an
    IterableDataset: "your next batch"); worker w is seeded with `base_seed + w`.
    """
    ctx = loader.multiprocessing_context
    if ctx is None:
        ctx = multiprocessing.get_context()
    elif isinstance(ctx, str):
        ctx = multiprocessing.get_context(ctx)
    n = loader.num_workers
    kind = ("iterable" if loader._iterable else
            "batch" if loader.batch_sampler is not None else "single")
    result_q = ctx.Queue()
    index_qs, workers = [], []
    for w in range(n):
        iq = ctx.Queue()
        p = ctx.Process(target=_worker_loop, daemon=True, args=(
            loader.dataset, kind, loader.collate_fn, loader.drop_last, loader.batch_size, iq,
            result_q, w, n, base_seed + w, loader.worker_init_fn))
        p.start()
        index_qs.append(iq)
        workers.append(p)
    prefetch = loader.prefetch_factor if loader.prefetch_factor is not None else 2
    active = [True] * n
    owner: dict[int, int] = {}
    done: dict[int, Any] = {}
    sent = 0
    next_out = 0
    rr = 0
    source = iter(tasks) if tasks is not None else None

    def put_one() -> bool:
        nonlocal sent, rr
        if not any(active):
            return False
        if source is not None:
            try:
                payload = next(source)
            except StopIteration:
                return False
        else:
            payload = None
        while not active[rr % n]:
            rr += 1
        w = rr % n
        rr += 1
        index_qs[w].put((sent, payload))
        owner[sent] = w
        sent += 1
        return True

    try:
        for _ in range(prefetch * n):
            if not put_one():
                break
        while next_out < sent:
            while next_out not in done:
                done.update([_get(result_q, loader.timeout, workers)])
            data = done.pop(next_out)
            w = owner.pop(next_out)
            next_out += 1
            if isinstance(data, _Stop):
                active[w] = False
                put_one()
                continue
            if isinstance(data, _WorkerError):
                data.reraise()
            put_one()
            yield data
    finally:
        for iq in index_qs:
            iq.put(None)
        for p in workers:
            p.join(timeout=_POLL_S)
            if p.is_alive():
                p.terminate()
                p.join()
        for iq in index_qs:
            iq.cancel_join_thread()
            iq.close()
        result_q.cancel_join_thread()
        result_q.close()


def _get(result_q, timeout: float, workers) -> tuple[int, Any]:
    """The next result, failing if `timeout` passes or a worker died."""
    waited = 0.0
    while True:
        step = _POLL_S if timeout <= 0 else min(_POLL_S, timeout - waited)
        try:
            return result_q.get(timeout=step)
        except queue.Empty:
            waited += step
            dead = [p for p in workers if not p.is_alive() and p.exitcode not in (0, None)]
            if dead:
                raise RuntimeError(f"DataLoader worker (pid(s) {[p.pid for p in dead]}) "
                                   "exited unexpectedly") from None
            if timeout > 0 and waited >= timeout:
                raise RuntimeError(f"DataLoader timed out after {timeout} seconds") from None
