"""DataLoader and `default_collate`; `num_workers > 0` fetches in worker processes (see
`_worker`), giving the same batches in the same order as the single-process loader."""

from __future__ import annotations

import collections.abc
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from ..._tensor import Tensor
from . import _worker
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler


def default_convert(data: Any) -> Any:
    """NumPy arrays to tensors, recursively through containers."""
    if isinstance(data, np.ndarray):
        return Tensor._make(np.array(data))
    if isinstance(data, collections.abc.Mapping):
        return type(data)({k: default_convert(v) for k, v in data.items()})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):  # a plain tuple becomes a list, as PyTorch's does
        return [default_convert(d) for d in data]
    if isinstance(data, list):
        return [default_convert(d) for d in data]
    return data


def default_collate(batch: list) -> Any:
    """Stack a list of samples into a batch: tensors, arrays and numbers are stacked along a
    new first dim; dicts, tuples and lists are collated field by field."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        for k, b in enumerate(batch):
            if tuple(b.shape) != tuple(elem.shape):
                raise RuntimeError("stack expects each tensor to be equal size, but got "
                                   f"{list(elem.shape)} at entry 0 and {list(b.shape)} at "
                                   f"entry {k}")
        return Tensor._make(np.stack([b._data for b in batch]), elem.dtype)
    if isinstance(elem, np.ndarray):
        return Tensor._make(np.stack(batch))
    if isinstance(elem, np.generic):
        return Tensor._make(np.array(batch))
    if isinstance(elem, bool):
        return Tensor._make(np.array(batch, dtype=np.bool_))
    if isinstance(elem, float):
        return Tensor._make(np.array(batch, dtype=np.float64))
    if isinstance(elem, numbers.Integral):
        return Tensor._make(np.array(batch, dtype=np.int64))
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        return type(elem)({k: default_collate([d[k] for d in batch]) for k in elem}) if type(
            elem) is not dict else {k: default_collate([d[k] for d in batch]) for k in elem}
    # A field's samples go on as the tuple `zip` makes, so a field of strings is collated to
    # a tuple of them, as in PyTorch.
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(b) != len(elem) for b in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(s) for s in zip(*batch)]
    raise TypeError("default_collate: batch must contain tensors, numpy arrays, numbers, "
                    f"dicts or lists; found {type(elem)}")


class DataLoader:
    """Iterate a dataset in (optionally shuffled) batches, collated by `collate_fn`."""

    def __init__(self, dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler=None, batch_sampler=None, num_workers: int = 0,
                 collate_fn: Callable | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None,
                 persistent_workers: bool = False, pin_memory_device: str = "",
                 in_order: bool = True) -> None:
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 "
                             "to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in "
                             "multiprocessing.let num_workers > 0 to enable multiprocessing, "
                             "otherwise set prefetch_factor to None.")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.generator = generator
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (None, False):
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"shuffle option, but got shuffle={shuffle}")
            if sampler is not None or batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 "sampler option")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
            self.batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None and not self._iterable:
            sampler = (RandomSampler(dataset, generator=generator) if shuffle
                       else SequentialSampler(dataset))
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if (batch_sampler is not None or (
                self._iterable and batch_size is not None)) else default_convert
        self.collate_fn = collate_fn

    def _base_seed(self) -> int:
        """A seed for the workers (worker w uses base + w), drawn from the loader's generator
        or the global one."""
        from ... import _random_draws
        return int(_random_draws.random_bits(self.generator, 1, "int64")[0])

    def __iter__(self):
        # Drawn whether or not there are workers (as PyTorch does), so that a shuffled order
        # from the same generator state is the same for any num_workers.
        base_seed = self._base_seed()
        if self.num_workers > 0:
            if self._iterable:
                tasks = None
            elif self.batch_sampler is None:
                tasks = iter(self.sampler)
            else:
                tasks = iter(self.batch_sampler)
            yield from _worker.iterate_workers(self, tasks, base_seed)
            return
        if self._iterable:
            yield from self._iter_iterable()
            return
        if self.batch_sampler is None:
            for idx in self.sampler:
                yield self.collate_fn(self.dataset[idx])
            return
        for indices in self.batch_sampler:
            yield self.collate_fn([self.dataset[i] for i in indices])

    def _iter_iterable(self):
        if self.batch_size is None:
            for item in self.dataset:
                yield self.collate_fn(item)
            return
        batch = []
        for item in self.dataset:
            batch.append(item)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)

