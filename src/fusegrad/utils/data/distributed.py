"""`DistributedSampler`: each rank's share of a dataset for data-parallel training."""

from __future__ import annotations

import math
from collections.abc import Iterator

from .sampler import Sampler, T_co


class DistributedSampler(Sampler[T_co]):
    """The indices of `dataset` that rank `rank` of `num_replicas` visits in an epoch.

    With `shuffle` the order is a permutation drawn from `seed + epoch` (call `set_epoch` every
    epoch to change it; every rank must use the same seed). The index list is padded by
    repeating its start to a multiple of `num_replicas` (or, with `drop_last`, trimmed to one),
    and rank r takes every `num_replicas`-th index from position r: the shares are disjoint
    apart from the padding and all have the same length.
    """

    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        from ... import distributed as dist

        if num_replicas is None:
            num_replicas = dist.get_world_size()
        if rank is None:
            rank = dist.get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            # Trim to the largest multiple of num_replicas so no rank needs padding.
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def _order(self) -> list[int]:
        n = len(self.dataset)
        if not self.shuffle:
            return list(range(n))
        from ... import Generator, randperm

        g = Generator()
        g.manual_seed(self.seed + self.epoch)
        return randperm(n, generator=g).tolist()

    def __iter__(self) -> Iterator[int]:
        indices = self._order()
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Use `epoch` in the shuffling seed, so each epoch has its own order."""
        self.epoch = epoch
