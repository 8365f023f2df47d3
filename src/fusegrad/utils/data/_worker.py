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
        """Raise the worker's exception type with the traceback as its message (RuntimeError
        if the type cannot be built from one message)."""
        msg = self.message
        if self.exc_type is KeyError:
            msg = _KeyErrorMessage(msg)
        elif getattr(self.exc_type, "message", None):
            # types whose first argument is not the text but that take it as `message=`
            raise self.exc_type(message=msg)
        try:
            err = self.exc_type(msg)
        except Exception:  # noqa: BLE001 - constructors with other signatures
            raise RuntimeError(msg) from None
        raise err


def _worker_loop(dataset, fetch_kind: str, collate_fn, drop_last: bool, batch_size,
                 index_q, result_q, worker_id: int, num_workers: int, seed: int,
                 init_fn) -> None:
    """Body of a worker process: seed, run `init_fn`, then answer tasks until told to stop."""
    global _WORKER_INFO
    import numpy as np

    from ..._random import manual_seed
    from ._utils.fetch import fetch_samples

    parent = os.getppid()
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
        try:
            task = index_q.get(timeout=_WATCH_S)
        except queue.Empty:
            if os.getppid() != parent:  # the main process is gone: nobody wants the results
                result_q.cancel_join_thread()
                return
            continue
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
                data = collate_fn(fetch_samples(dataset, payload))
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

    failed = False
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
    except GeneratorExit:  # the consumer stopped early: workers may finish their task
        raise
    except BaseException:
        failed = True
        raise
    finally:
        _shutdown(workers, index_qs, result_q, graceful=not failed)


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
