"""The order PyTorch's CPU kernels give to equal values in sort, topk, kthvalue and mode.

PyTorch sorts (value, index) pairs with the C++ standard library's unstable algorithms
(introsort for `sort(stable=False)`, heap selection or introselect for `topk`) and its own
quickselect for `kthvalue`. Where values tie, which index comes first is whatever those
algorithms leave, and users' results (top-k sampling masks, say) depend on it. The functions
here replay the same algorithms step by step on one row of integer ranks (equal values share
a rank), so the order of ties is PyTorch's.

They run in Python, one comparison at a time: callers use them only for rows where ties
change the answer, and take NumPy's order otherwise. `before(x, y)` is the strict order the
kernel sorts by; each function permutes the list `keys` and the parallel list `idx` in place.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from ._util import HALF

_THRESHOLD = 16  # the introsort's insertion-sort cut-off


def ranks(row: np.ndarray) -> list:
    """Integer ranks of a row's values: equal values (and all NaNs, ranked largest) share one,
    so comparing ranks compares the values as PyTorch's comparators do."""
    if row.dtype.kind == "f" or row.dtype in HALF:  # bfloat16's kind is "V"
        nan = np.isnan(row)
        finite = np.where(nan, 0, row)
        _, inverse = np.unique(finite, return_inverse=True)
        inverse = np.where(nan, inverse.max(initial=0) + 1, inverse)
    else:
        _, inverse = np.unique(row, return_inverse=True)
    return inverse.reshape(-1).tolist()


def _swap(keys: list, idx: list, i: int, j: int) -> None:
    keys[i], keys[j] = keys[j], keys[i]
    idx[i], idx[j] = idx[j], idx[i]


# ---------------------------------------------------------------- heaps


def _push_heap(keys, idx, first, hole, top, value, before):
    key, pos = value
    parent = (hole - 1) // 2
    while hole > top and before(keys[first + parent], key):
        keys[first + hole] = keys[first + parent]
        idx[first + hole] = idx[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    keys[first + hole] = key
    idx[first + hole] = pos


def _adjust_heap(keys, idx, first, hole, length, value, before):
    top = hole
    child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if before(keys[first + child], keys[first + child - 1]):
            child -= 1
        keys[first + hole] = keys[first + child]
        idx[first + hole] = idx[first + child]
        hole = child
    if length % 2 == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        keys[first + hole] = keys[first + child - 1]
        idx[first + hole] = idx[first + child - 1]
        hole = child - 1
    _push_heap(keys, idx, first, hole, top, value, before)


def _make_heap(keys, idx, first, last, before):
    length = last - first
    if length < 2:
        return
    parent = (length - 2) // 2
    while True:
        value = (keys[first + parent], idx[first + parent])
        _adjust_heap(keys, idx, first, parent, length, value, before)
        if parent == 0:
            return
        parent -= 1


def _pop_heap(keys, idx, first, last, result, before):
    value = (keys[result], idx[result])
    keys[result] = keys[first]
    idx[result] = idx[first]
    _adjust_heap(keys, idx, first, 0, last - first, value, before)


def _heap_select(keys, idx, first, middle, last, before):
    _make_heap(keys, idx, first, middle, before)
    for i in range(middle, last):
        if before(keys[i], keys[first]):
            _pop_heap(keys, idx, first, middle, i, before)


def _sort_heap(keys, idx, first, last, before):
    while last - first > 1:
        last -= 1
        _pop_heap(keys, idx, first, last, last, before)


def partial_sort(keys: list, idx: list, middle: int, before: Callable) -> None:
    """`std::partial_sort(begin, begin + middle, end)`."""
    _heap_select(keys, idx, 0, middle, len(keys), before)
    _sort_heap(keys, idx, 0, middle, before)


# ---------------------------------------------------------------- introsort / introselect


def _median_to_first(keys, idx, result, a, b, c, before):
    if before(keys[a], keys[b]):
        if before(keys[b], keys[c]):
            _swap(keys, idx, result, b)
        elif before(keys[a], keys[c]):
            _swap(keys, idx, result, c)
        else:
            _swap(keys, idx, result, a)
    elif before(keys[a], keys[c]):
        _swap(keys, idx, result, a)
    elif before(keys[b], keys[c]):
        _swap(keys, idx, result, c)
    else:
        _swap(keys, idx, result, b)


def _partition_pivot(keys, idx, first, last, before) -> int:
    mid = first + (last - first) // 2
    _median_to_first(keys, idx, first, first + 1, mid, last - 1, before)
    lo, hi, pivot = first + 1, last, keys[first]
    while True:
        while before(keys[lo], pivot):
            lo += 1
        hi -= 1
        while before(pivot, keys[hi]):
            hi -= 1
        if not lo < hi:
            return lo
        _swap(keys, idx, lo, hi)
        lo += 1


def _insertion_sort(keys, idx, first, last, before):
    if first == last:
        return
    for i in range(first + 1, last):
        key, pos = keys[i], idx[i]
        if before(key, keys[first]):
            keys[first + 1:i + 1] = keys[first:i]
            idx[first + 1:i + 1] = idx[first:i]
            keys[first], idx[first] = key, pos
        else:
            _linear_insert(keys, idx, i, before)


def _linear_insert(keys, idx, last, before):
    key, pos = keys[last], idx[last]
    nxt = last - 1
    while before(key, keys[nxt]):
        keys[last], idx[last] = keys[nxt], idx[nxt]
        last = nxt
        nxt -= 1
    keys[last], idx[last] = key, pos


def _depth_limit(n: int) -> int:
    return 2 * (n.bit_length() - 1)


def _introsort_loop(keys, idx, first, last, depth, before):
    while last - first > _THRESHOLD:
        if depth == 0:
            _heap_select(keys, idx, first, last, last, before)
            _sort_heap(keys, idx, first, last, before)
            return
        depth -= 1
        cut = _partition_pivot(keys, idx, first, last, before)
        _introsort_loop(keys, idx, cut, last, depth, before)
        last = cut


def sort(keys: list, idx: list, first: int, last: int, before: Callable) -> None:
    """`std::sort(begin + first, begin + last)`."""
    if first == last:
        return
    _introsort_loop(keys, idx, first, last, _depth_limit(last - first), before)
    if last - first > _THRESHOLD:
        _insertion_sort(keys, idx, first, first + _THRESHOLD, before)
        for i in range(first + _THRESHOLD, last):
            _linear_insert(keys, idx, i, before)
    else:
        _insertion_sort(keys, idx, first, last, before)


def nth_element(keys: list, idx: list, nth: int, before: Callable) -> None:
    """`std::nth_element(begin, begin + nth, end)`."""
    first, last = 0, len(keys)
    if nth == last:
        return
    depth = _depth_limit(last - first)
    while last - first > 3:
        if depth == 0:
            _heap_select(keys, idx, first, nth + 1, last, before)
            _swap(keys, idx, first, nth)
            return
        depth -= 1
        cut = _partition_pivot(keys, idx, first, last, before)
        if cut <= nth:
            first = cut
        else:
            last = cut
    _insertion_sort(keys, idx, first, last, before)


def quickselect(keys: list, idx: list, k: int, greater: Callable) -> None:
    """PyTorch's own quickselect (median of three), used by `kthvalue`: afterwards position
    `k` holds the k-th smallest."""
    lo, hi = 0, len(keys) - 1
    while True:
        if hi <= lo:
            return
        if hi == lo + 1:
            if greater(keys[lo], keys[hi]):
                _swap(keys, idx, lo, hi)
            return
        mid = lo + (hi - lo) // 2
        _swap(keys, idx, mid, lo + 1)
        if greater(keys[lo + 1], keys[hi]):
            _swap(keys, idx, lo + 1, hi)
        if greater(keys[lo], keys[hi]):
            _swap(keys, idx, lo, hi)
        if greater(keys[lo + 1], keys[lo]):
            _swap(keys, idx, lo + 1, lo)
        i, j, pivot = lo + 1, hi, keys[lo]
        while True:
            i += 1
            while greater(pivot, keys[i]):
                i += 1
            j -= 1
            while greater(keys[j], pivot):
                j -= 1
            if j < i:
                break
            _swap(keys, idx, i, j)
        _swap(keys, idx, lo, j)
        if j <= k:
            lo = i
        if j >= k:
            hi = j - 1


@functools.lru_cache(maxsize=256)
def first_of_equals(n: int) -> int:
    """The index `std::nth_element(begin, begin, end)` leaves first in a row of `n` values that
    all compare equivalent (none before another), as PyTorch's `nanmedian` kernel sorts a row
    of only NaNs: its partitions still swap elements, so the index is a function of `n`."""
    keys, idx = [0] * n, list(range(n))
    nth_element(keys, idx, 0, lambda x, y: False)
    return idx[0]
