"""`Dim` and `dims` (`torch.export.dynamic_shapes`): the sizes an exported program accepts."""

from __future__ import annotations

import enum


class _DimHint(enum.Enum):
    """`Dim.AUTO` / `Dim.DYNAMIC` / `Dim.STATIC`: let export decide, require dynamic, fix."""

    AUTO = enum.auto()
    DYNAMIC = enum.auto()
    STATIC = enum.auto()

    def __repr__(self) -> str:
        return f"DimHint({self.name})"


_INT_OO = 2 ** 63 - 1  # "no upper bound"


class Dim:
    """A named dynamic dimension with an inclusive range [min, max]."""

    AUTO = _DimHint.AUTO
    DYNAMIC = _DimHint.DYNAMIC
    STATIC = _DimHint.STATIC

    def __init__(self, name: str, *, min: int | None = None, max: int | None = None) -> None:
        lo = 0 if min is None else min
        hi = _INT_OO if max is None else max
        if hi <= lo:
            raise AssertionError(f"Cannot create Dim with an empty range: [{lo}, {hi}]")
        self.__name__ = name
        self.min = lo
        self.max = hi

    def __repr__(self) -> str:
        parts = [repr(self.__name__)]
        if self.min > 2 or self.min == 0 and self.max == _INT_OO:
            parts.append(f"min={self.min}")
        if self.max != _INT_OO:
            parts.append(f"max={self.max}")
        return f"Dim({', '.join(parts)})"


def dims(*names: str, min: int | None = None, max: int | None = None) -> tuple:
    """One `Dim` per name, all with the same range."""
    return tuple(Dim(n, min=min, max=max) for n in names)


Dim.__module__ = "fusegrad.export.dynamic_shapes"
dims.__module__ = "fusegrad.export.dynamic_shapes"

__all__ = ["Dim", "dims"]
