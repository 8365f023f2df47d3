"""`Parameter`: a Tensor that a Module registers as one of its parameters."""

from __future__ import annotations

import numpy as np

from .. import _dtype
from .._tensor import TENSOR_REPR_CLASSES, Tensor
from .._torch_function import _disabled_torch_function_impl


class Parameter(Tensor):
    """A leaf tensor that requires grad by default and registers itself on Modules.

    It shares its data with the tensor it is made from. Being a plain Tensor subclass
    (`_plain` is inherited), it takes dispatch's fast path; op results are plain Tensors.
    """

    __slots__ = ()
    # Ops on parameters give plain Tensors and do not consult the protocol, as in PyTorch.
    __torch_function__ = _disabled_torch_function_impl

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            data = Tensor._make(np.empty((0,), dtype=_dtype.defaults.float.np))
        p = cls._make(data._data, data._dtype)
        p._vc = data._vc
        if requires_grad:
            p._set_requires_grad(
                True, "Only Tensors of floating point and complex dtype can require gradients")
        return p

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True):
        pass

    def __repr__(self, *, tensor_contents=None) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        p = Parameter(Tensor._make(self._data.copy(), self._dtype), self._rg)
        if self._grad is not None:
            p._grad = self._grad.__deepcopy__(memo)
        memo[id(self)] = p
        return p

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (np.array(self._data), self._dtype.name, self._rg))


TENSOR_REPR_CLASSES.add(Parameter)


def _rebuild_parameter(data: np.ndarray, dtype_name: str, requires_grad: bool) -> Parameter:
    """Unpickle a Parameter written by `Parameter.__reduce_ex__`."""
    return Parameter(Tensor._make(data, _dtype.BY_NAME[dtype_name]), requires_grad)


def is_lazy(param) -> bool:
    """Always False: no lazy modules exist."""
    return False
