"""Argument helpers of the layers (`torch.nn.modules.utils`): a size given as one number or as
a sequence made a tuple of n (`_pair(3) == (3, 3)`), and the state-dict key prefix that
`DataParallel` adds, removed."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["consume_prefix_in_state_dict_if_present"]


def _ntuple(n: int, name: str = "parse") -> Callable[[Any], tuple]:
    """A function that gives an iterable as a tuple and repeats anything else `n` times."""

    def parse(x: Any) -> tuple:
        if isinstance(x, Iterable):
            return tuple(x)
        return (x,) * n

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t: tuple, n: int) -> tuple:
    """The items of `t` in reverse order, each repeated `n` times: per-dim padding (first dim
    first) as `F.pad` takes it (last dim first, both sides)."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _list_with_default(out_size, defaults: list) -> Any:
    """An adaptive pooling output size with its None entries taken from the matching trailing
    input sizes `defaults`; an int passes through."""
    if isinstance(out_size, int):
        return out_size
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    return [v if v is not None else d for v, d in zip(out_size, defaults[-len(out_size):])]


def consume_prefix_in_state_dict_if_present(state_dict: dict, prefix: str) -> None:
    """Drop `prefix` from the keys of `state_dict` (and of its `_metadata`) that start with
    it, in place: a checkpoint saved from a `DataParallel` (`module.`) loads into the bare
    model."""
    for key in list(state_dict):
        if key.startswith(prefix):
            state_dict[key[len(prefix):]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is None:
        return
    for key in list(metadata):
        # the metadata of the wrapper's own entry is the prefix without its dot: it becomes
        # the root's ("")
        if key and (key == prefix.replace(".", "") or key.startswith(prefix)):
            metadata[key[len(prefix):]] = metadata.pop(key)
