"""Datasets: Dataset, IterableDataset, TensorDataset, StackDataset, Subset, ConcatDataset,
ChainDataset, random_split."""

from __future__ import annotations

import bisect
import math
import warnings
from collections.abc import Iterable, Sequence
from typing import Any, Generic, TypeVar

from ... import _random_draws as _draws
from ..._tensor import Tensor

# Type parameters, so that `Dataset[int]` and the like work in annotations as in PyTorch.
T_co = TypeVar("T_co", covariant=True)
_T_stack = TypeVar("_T_stack", tuple[T_co, ...], dict[str, T_co])


class Dataset(Generic[T_co]):
    """A map-style dataset: `__getitem__(index)` and usually `__len__`."""

    def __getitem__(self, index) -> Any:
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co], Iterable[T_co]):
    """A dataset that is iterated over (`__iter__`) rather than indexed."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other: Dataset) -> ChainDataset:
        return ChainDataset([self, other])


class TensorDataset(Dataset[tuple[Tensor, ...]]):
    """Samples are tuples of the tensors' rows at one index."""

    def __init__(self, *tensors: Tensor) -> None:
        if any(tensors[0].size(0) != t.size(0) for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].size(0)


class StackDataset(Dataset[_T_stack]):
    """Samples of several datasets of one length side by side: tuples (datasets given by
    position) or dicts (given by keyword)."""

    def __init__(self, *args: Dataset, **kwargs: Dataset) -> None:
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via "
                             "``kwargs``) like input/output, but both types are given.")
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        parts = list(args) if args else list(kwargs.values())
        self._length = len(parts[0])
        if any(len(d) != self._length for d in parts):
            raise ValueError("Size mismatch between datasets")
        self.datasets = args if args else kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices: list) -> list:
        """The samples at `indices`, each part read by its dataset's `__getitems__` where it
        has one (a whole batch per call)."""
        if isinstance(self.datasets, dict):
            parts = {k: _batch_of(d, indices) for k, d in self.datasets.items()}
            return [{k: part[i] for k, part in parts.items()} for i in range(len(indices))]
        parts = [_batch_of(d, indices) for d in self.datasets]
        return [tuple(part[i] for part in parts) for i in range(len(indices))]

    def __len__(self) -> int:
        return self._length


def _batch_of(dataset, indices: list) -> list:
    """`dataset`'s samples at `indices`: by its `__getitems__` (checked to give one sample per
    index) or one `__getitem__` each."""
    getitems = getattr(dataset, "__getitems__", None)
    if not callable(getitems):
        return [dataset[i] for i in indices]
    items = getitems(indices)
    if len(items) != len(indices):
        raise ValueError(f"Nested dataset's output size mismatch. Expected {len(indices)}, "
                         f"got {len(items)}")
    return items


class Subset(Dataset[T_co]):
    """The samples of `dataset` at `indices`.

    The DataLoader reads a batch through `__getitems__`, so a subclass that overrides
    `__getitem__` must override `__getitems__` too (it is refused otherwise, as in PyTorch).
    """

    def __init__(self, dataset: Dataset, indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices
        cls = type(self)
        if cls.__getitem__ is not Subset.__getitem__ and \
                cls.__getitems__ is Subset.__getitems__:
            raise NotImplementedError(
                f"{cls.__name__} overrides __getitem__ but not __getitems__. When subclassing "
                "Subset and overriding __getitem__, you must also override __getitems__ to "
                "ensure DataLoader works correctly with your custom logic. A simple "
                "implementation:\n\ndef __getitems__(self, indices):\n    return "
                "[self.__getitem__(idx) for idx in indices]")

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list) -> list:
        """The samples at `indices` (positions in the subset), by the wrapped dataset's
        `__getitems__` when it has one."""
        getitems = getattr(self.dataset, "__getitems__", None)
        if callable(getitems):
            return getitems([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset[T_co]):
    """Several datasets one after the other."""

    def __init__(self, datasets) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        if any(isinstance(d, IterableDataset) for d in self.datasets):
            raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = self.cumsum(self.datasets)

    @staticmethod
    def cumsum(sequence) -> list[int]:
        """The running totals of the lengths of `sequence`'s items."""
        totals, total = [], 0
        for d in sequence:
            total += len(d)
            totals.append(total)
        return totals

    @property
    def cummulative_sizes(self) -> list[int]:
        """The old, misspelt name of `cumulative_sizes` (warns)."""
        warnings.warn("`cummulative_sizes` attribute is renamed to `cumulative_sizes`",
                      FutureWarning, stacklevel=2)
        return self.cumulative_sizes

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        k = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[k - 1] if k else 0
        return self.datasets[k][idx - start]


class ChainDataset(IterableDataset):
    """Several iterable datasets one after the other, chained as they are iterated."""

    def __init__(self, datasets) -> None:
        self.datasets = datasets

    def _check(self, d) -> None:
        if not isinstance(d, IterableDataset):
            raise AssertionError("ChainDataset only supports IterableDataset")

    def __iter__(self):
        for d in self.datasets:
            self._check(d)
            yield from d

    def __len__(self) -> int:
        total = 0
        for d in self.datasets:
            self._check(d)
            total += len(d)
        return total


def random_split(dataset: Dataset, lengths: Sequence[int | float], generator=None) -> list:
    """Split `dataset` into non-overlapping random Subsets of the given lengths (or
    fractions summing to 1)."""
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        sizes = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            sizes.append(int(math.floor(n * frac)))
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        lengths = sizes
        # Only fractions can round down to an empty split unnoticed: warn then (as PyTorch).
        for i, length in enumerate(lengths):
            if length == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an "
                              "empty dataset.", stacklevel=2)
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    perm = _draws.randperm(generator, n).tolist()
    out, offset = [], 0
    for length in lengths:
        out.append(Subset(dataset, perm[offset:offset + length]))
        offset += length
    return out
