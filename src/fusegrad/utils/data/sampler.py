"""Samplers: which indices a DataLoader visits, and how they are batched."""

from __future__ import annotations

from collections.abc import Iterator, Sized
from typing import Generic, TypeVar

from ... import _random_draws as _draws

T_co = TypeVar("T_co", covariant=True)  # `Sampler[int]` works in annotations


class Sampler(Generic[T_co]):
    """Base class: an iterable of dataset indices. It has no `__init__` of its own (as in
    PyTorch 2.13, which dropped the `data_source` argument): a subclass passing one to
    `super().__init__` gets object's TypeError."""

    def __iter__(self) -> Iterator[int]:
        raise NotImplementedError


class SequentialSampler(Sampler[int]):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


def _positive_samples(num_samples) -> None:
    if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
        raise ValueError("num_samples should be a positive integer value, but got "
                         f"num_samples={num_samples}")


def _epoch_generator(generator):
    """The generator one pass draws from: the caller's, or (as PyTorch) a fresh one seeded
    by a single draw from the default generator, so a pass advances the default stream by
    one number however many indices it yields."""
    if generator is not None:
        return generator
    from ..._random import Generator

    fresh = Generator()
    fresh.manual_seed(int(_draws.random_bits(None, 1, "int64")[0]))
    return fresh


class RandomSampler(Sampler[int]):
    """A random permutation (or draws with replacement), from `generator` when given.

    Indices are drawn as the iteration asks for them (32 at a time with replacement, one
    permutation at a time without), so `num_samples` may be far larger than memory.
    """

    def __init__(self, data_source: Sized, replacement: bool = False,
                 num_samples: int | None = None, generator=None) -> None:
        if not isinstance(replacement, bool):
            raise TypeError("replacement should be a boolean value, but got "
                            f"replacement={replacement}")
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        _positive_samples(self.num_samples)

    @property
    def num_samples(self) -> int:
        """How many indices one pass yields."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        r = _epoch_generator(self.generator)
        total = self.num_samples
        # PyTorch's chunks: 32 indices per draw with replacement, then the remainder; whole
        # permutations without, then one more cut short (drawn even when nothing is left).
        if self.replacement:
            for _ in range(total // 32):
                yield from _draws.integers(r, 32, 0, n).tolist()
            yield from _draws.integers(r, total % 32, 0, n).tolist()
            return
        for _ in range(total // n):
            yield from _draws.randperm(r, n).tolist()
        yield from _draws.randperm(r, n)[:total % n].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given indices in random order."""

    def __init__(self, indices, generator=None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for i in _draws.randperm(self.generator, len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """`num_samples` indices drawn with probabilities proportional to `weights`."""

    def __init__(self, weights, num_samples: int, replacement: bool = True,
                 generator=None) -> None:
        _positive_samples(num_samples)
        if not isinstance(replacement, bool):
            raise ValueError("replacement should be a boolean value, but got "
                             f"replacement={replacement}")
        from ..._creation import as_tensor
        from ..._dtype import float64

        weights_tensor = as_tensor(weights, dtype=float64)
        if len(weights_tensor.shape) != 1:
            raise ValueError("weights should be a 1d sequence but given weights have shape "
                             f"{tuple(weights_tensor.shape)}")
        self.weights = weights_tensor
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        from ..._distributions import multinomial

        drawn = multinomial(self.weights, self.num_samples, self.replacement,
                            generator=self.generator)
        yield from drawn.tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list[int]]):
    """Groups another sampler's indices into lists of `batch_size`."""

    def __init__(self, sampler, batch_size: int, drop_last: bool) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError("batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError("drop_last should be a boolean value, but got "
                             f"drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
