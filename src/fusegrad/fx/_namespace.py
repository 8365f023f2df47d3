"""Unique, valid Python names for nodes, made the way torch.fx makes them.

A candidate is turned into snake case with illegal characters replaced (`FooBar` is
`foo_bar`, `layers.0` is `layers_0`, `<lambda>` is `_lambda_`). A name that is taken, or that
would shadow a builtin or keyword (`sum`, `abs`, `if`), gets the next free numeric suffix of
its base (`sum_1`, `add_2`).
"""

from __future__ import annotations

import builtins
import keyword
import re

_ILLEGAL = re.compile(r"[^0-9a-zA-Z_]")
_SUFFIX = re.compile(r"(.*)_(\d+)$")
_CAMEL = re.compile(r"([a-z])([A-Z])")

RESERVED = frozenset(dir(builtins)) | frozenset(keyword.kwlist) | frozenset(
    {"inf", "nan", "NoneType", "torch", "fusegrad"})


def snake_case(s: str) -> str:
    """`FooBar` -> `foo_bar`, `Conv2d` -> `conv2d`."""
    return _CAMEL.sub(r"\1_\2", s).lower()


class Namespace:
    """Hands out unique names; remembers the object each name belongs to."""

    def __init__(self) -> None:
        self._used: set[str] = set()
        self._base_count: dict[str, int] = {}
        self._obj_to_name: dict[int, str] = {}

    def create_name(self, candidate: str, obj: object = None) -> str:
        """A fresh legal name derived from `candidate` (the same name again for `obj`)."""
        if obj is not None and id(obj) in self._obj_to_name:
            return self._obj_to_name[id(obj)]
        candidate = _ILLEGAL.sub("_", snake_case(candidate)) if candidate else "_unnamed"
        if candidate[0].isdigit():
            candidate = "_" + candidate
        m = _SUFFIX.match(candidate)
        if m is not None:
            base, num = m.group(1), int(m.group(2))
        else:
            base, num = candidate, None
        name = candidate
        if name in self._used or name in RESERVED:
            num = self._base_count.get(base, 0) + 1
            name = f"{base}_{num}"
            while name in self._used:
                num += 1
                name = f"{base}_{num}"
        self._used.add(name)
        self._base_count[base] = max(self._base_count.get(base, 0), num or 0)
        if obj is not None:
            self._obj_to_name[id(obj)] = name
        return name

    def associate_name_with_obj(self, name: str, obj: object) -> None:
        """Record that `name` belongs to `obj`."""
        self._obj_to_name[id(obj)] = name

    def rename_obj(self, obj: object, name: str) -> None:
        """Change the name recorded for `obj`."""
        self._obj_to_name[id(obj)] = name

    def release(self, name: str) -> None:
        """Make `name` usable again (its node was erased)."""
        self._used.discard(name)
