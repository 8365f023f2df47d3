"""The shared construction and expansion of two-parameter (loc, scale)-style families."""

from __future__ import annotations

from numbers import Number

import fusegrad as F

from .distribution import Distribution
from .utils import broadcast_all

__all__ = []


class _LocScale(Distribution):
    """Shared construction and expansion of two-parameter (loc, scale) families."""

    _names = ("loc", "scale")

    def __init__(self, a, b, validate_args=None) -> None:
        first, second = broadcast_all(a, b)
        setattr(self, self._names[0], first)
        setattr(self, self._names[1], second)
        shape = F.Size() if isinstance(a, Number) and isinstance(b, Number) else first.size()
        super().__init__(shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        """A copy with both parameters expanded to `batch_shape`."""
        shape = F.Size(batch_shape)
        return self._expanded(type(self), shape, _instance,
                              **{n: getattr(self, n).expand(shape) for n in self._names})
