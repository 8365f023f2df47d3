"""Flatten and Unflatten."""

from ..._tensor import Tensor
from ._arg_errors import missing_attribute
from .module import Module


class Flatten(Module):
    """Flatten dims start_dim..end_dim into one."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:
        """The flattened input (a view when possible): `Tensor.flatten`, as PyTorch's."""
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dim `dim` into `unflattened_size` (a tuple or list of ints, kept as given)."""

    def __init__(self, dim: int, unflattened_size) -> None:
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError("unflattened_size must be a tuple of ints, but found type "
                            f"{type(unflattened_size).__name__}")
        for idx, elem in enumerate(unflattened_size):
            if not isinstance(elem, int):
                raise TypeError("unflattened_size must be tuple of ints, but found element of "
                                f"type {type(elem).__name__} at pos {idx}")
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input: Tensor) -> Tensor:
        """The input with `dim` unflattened."""
        return _unflatten(input, self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


def _unflatten(input, dim, sizes):
    """`input.unflatten(dim, sizes)` (its errors are PyTorch's op's)."""
    return input.unflatten(dim, sizes if isinstance(sizes, (tuple, list)) else tuple(sizes))


# What PyTorch says of a non-tensor input (see `_arg_errors`).
missing_attribute(Flatten, "flatten")
missing_attribute(Unflatten, "unflatten")
