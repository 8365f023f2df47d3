"""Fetchers: read one batch (or one sample) of a dataset and collate it.

A map-style dataset that defines `__getitems__` is asked for a whole batch's samples in one
call (datasets that read rows in bulk rely on this); otherwise each index is looked up in
turn. An iterable dataset's fetcher draws from one iterator over the dataset and raises
StopIteration once it is exhausted (or, with `drop_last`, once a batch would be short).
"""

from __future__ import annotations

__all__ = ["fetch_samples"]


def fetch_samples(dataset, indices) -> list:
    """The samples of map-style `dataset` at `indices`, by `__getitems__` when it has one."""
    getitems = getattr(dataset, "__getitems__", None)
    if getitems:
        return getitems(indices)
    return [dataset[i] for i in indices]


class _BaseDatasetFetcher:
    """Reads from `dataset` and collates with `collate_fn`; `auto_collation` says whether a
    fetch gets a list of indices (a batch) or one index."""

    def __init__(self, dataset, auto_collation: bool, collate_fn, drop_last: bool) -> None:
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last

    def fetch(self, possibly_batched_index):
        """The collated data for one index or one list of indices."""
        raise NotImplementedError


class _MapDatasetFetcher(_BaseDatasetFetcher):
    """Fetches from a map-style dataset by index."""

    def fetch(self, possibly_batched_index):
        """The collated samples at the index (or indices)."""
        if self.auto_collation:
            data = fetch_samples(self.dataset, possibly_batched_index)
        else:
            data = self.dataset[possibly_batched_index]
        return self.collate_fn(data)


class _IterableDatasetFetcher(_BaseDatasetFetcher):
    """Fetches the next samples of one iterator over an iterable dataset; the indices only
    say how many samples a batch takes."""

    def __init__(self, dataset, auto_collation: bool, collate_fn, drop_last: bool) -> None:
        super().__init__(dataset, auto_collation, collate_fn, drop_last)
        self.dataset_iter = iter(dataset)
        self.ended = False

    def fetch(self, possibly_batched_index):
        """The next collated sample or batch; StopIteration when there is none."""
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.dataset_iter))
        data = []
        for _ in possibly_batched_index:
            try:
                data.append(next(self.dataset_iter))
            except StopIteration:
                self.ended = True
                break
        if not data or (self.drop_last and len(data) < len(possibly_batched_index)):
            raise StopIteration
        return self.collate_fn(data)
