"""`fusegrad.utils.hooks`: `RemovableHandle`, what every `register_*hook` returns."""

from ..autograd.graph import RemovableHandle

__all__ = ["RemovableHandle"]
