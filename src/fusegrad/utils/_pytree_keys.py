"""The key entries of `torch.utils._pytree`'s key paths, and how each built-in node type
names its children with them.

A key path is a tuple of entries, one per container passed on the way from the root to a
leaf: `SequenceKey(i)` for a position, `MappingKey(k)` for a dict key, `GetAttrKey(name)`
for an attribute (a named tuple's field). Each prints as the Python that reaches the child
(`[0]`, `['a']`, `.x`), so `keystr` of a path reads like the expression, and `get` takes
one step down. This module knows nothing of the node registry: `_pytree` registers the
keyed flatten functions below with its built-in node types.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict, deque
from collections.abc import Hashable
from typing import Any


@dataclasses.dataclass(frozen=True, slots=True)
class SequenceKey:
    """A child at position `idx` of a sequence."""

    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"

    def get(self, sequence: Any) -> Any:
        """The child of `sequence` this key names."""
        return sequence[self.idx]


@dataclasses.dataclass(frozen=True, slots=True)
class MappingKey:
    """A child under key `key` of a mapping."""

    key: Hashable

    def __str__(self) -> str:
        return f"[{self.key!r}]"

    def get(self, mapping: Any) -> Any:
        """The child of `mapping` this key names."""
        return mapping[self.key]


@dataclasses.dataclass(frozen=True, slots=True)
class GetAttrKey:
    """A child held in attribute `name` of an object."""

    name: str

    def __str__(self) -> str:
        return f".{self.name}"

    def get(self, obj: Any) -> Any:
        """The child of `obj` this key names."""
        return getattr(obj, self.name)


def sequence_flatten_with_keys(seq: tuple | list | deque) -> tuple[list, Any]:
    """Children of a tuple, list or return-type tuple keyed by position (context unused by
    the key-path functions, which take the spec from the plain flatten)."""
    return [(SequenceKey(i), v) for i, v in enumerate(seq)], None


def deque_flatten_with_keys(d: deque) -> tuple[list, int | None]:
    """Children of a deque keyed by position; the context is its `maxlen`."""
    return [(SequenceKey(i), v) for i, v in enumerate(d)], d.maxlen


def mapping_flatten_with_keys(d: dict) -> tuple[list, list]:
    """Children of a dict or OrderedDict keyed by their keys, in insertion order."""
    keys = list(d)
    return [(MappingKey(k), d[k]) for k in keys], keys


def defaultdict_flatten_with_keys(d: defaultdict) -> tuple[list, list]:
    """Children of a defaultdict keyed by their keys; the context also holds the factory."""
    children, keys = mapping_flatten_with_keys(d)
    return children, [d.default_factory, keys]


def namedtuple_flatten_with_keys(t: tuple) -> tuple[list, type]:
    """Children of a named tuple keyed by field name; the context is its class."""
    cls = type(t)
    return [(GetAttrKey(f), v) for f, v in zip(cls._fields, t)], cls
