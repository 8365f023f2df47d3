"""Flatten and Unflatten."""

from __future__ import annotations

from ._arg_errors import missing_attribute
from .module import Module


def flatten(input, start_dim: int = 0, end_dim: int = -1):
    """`input` with dims start_dim..end_dim merged."""
    from ...ops._util import wrap_dim

    nd = max(input.dim(), 1)
    s, e = wrap_dim(start_dim, nd), wrap_dim(end_dim, nd)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if input.dim() == 0:
        return input.reshape(1)
    if s == e:
        return input
    shape = tuple(input.shape)
    n = 1
    for v in shape[s:e + 1]:
        n *= v
    return input.reshape(shape[:s] + (n,) + shape[e + 1:])


class Flatten(Module):
    """Flatten dims start_dim..end_dim into one."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        """The flattened input (a view when possible)."""
        return flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dim `dim` into `unflattened_size`."""

    def __init__(self, dim: int, unflattened_size) -> None:
        super().__init__()
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input):
        """The input with `dim` unflattened."""
        from ...ops._util import wrap_dim

        d = wrap_dim(self.dim, input.dim())
        shape = tuple(input.shape)
        return input.view(shape[:d] + self.unflattened_size + shape[d + 1:])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


# What PyTorch says of a non-tensor input (see `_arg_errors`).
missing_attribute(Flatten, "flatten")
missing_attribute(Unflatten, "unflatten")
