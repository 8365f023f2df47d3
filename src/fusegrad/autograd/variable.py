"""`torch.autograd.Variable`, the name tensors had before they carried autograd themselves:
every tensor is an instance, and `Variable(t, requires_grad=...)` gives a new leaf sharing
`t`'s data."""

from __future__ import annotations

import warnings

from .._tensor import Tensor

__all__ = ["Variable"]


class _VariableMeta(type):
    def __instancecheck__(cls, other) -> bool:
        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    """`Variable(data, requires_grad=False)`: a leaf tensor on `data`'s memory (no history);
    `Variable()` an empty one. `volatile` has no effect any more (it warns)."""

    def __new__(cls, data=None, requires_grad: bool = False, volatile: bool = False):
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with torch.no_grad():` "
                          "instead.", UserWarning, stacklevel=2)
        if data is None:
            from .._creation import tensor

            data = tensor([])
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        out = data.detach()
        out._requires_grad_unguarded(bool(requires_grad))
        return out
