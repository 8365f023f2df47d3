"""Tensor methods with a signature of their own that PyTorch keeps for older code: the
in-place forms of `addmm`/`baddbmm`/`addmv`/`cumprod`, `fill_diagonal_`, `sum_to_size`, the
element-wise Python callbacks (`apply_`, `map_`, `map2_`), `new_empty_strided`, `resize`,
and `dim_order`.
"""

from __future__ import annotations

import builtins
import warnings

import numpy as np

from .._dispatch import call
from .._tensor import Tensor, int_list_error
from .._torch_function import warning_stacklevel
from .._type_names import python_type_name
from ..ops import linalg as L
from ..ops import nn as N
from ..ops import scans as SC
from .inplace import copy_, fill_
from .shape import _keyword_shape, int_argument


def _addmm_(self: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """In place: self = beta * self + alpha * mat1 @ mat2."""
    return call(N.addmm_, self, mat1, mat2, beta, alpha)


def _baddbmm_(self: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """In place: self = beta * self + alpha * batch1 @ batch2 (per batch)."""
    return call(L.baddbmm_, self, batch1, batch2, beta, alpha)


def _addmv_(self: Tensor, mat: Tensor, vec: Tensor, *, beta=1, alpha=1) -> Tensor:
    """In place: self = beta * self + alpha * mat @ vec."""
    from .linear_algebra import _addmv_check, _one_op_addmv, addmv

    if all(isinstance(t, Tensor) for t in (mat, vec)):
        _addmv_check(self, mat, vec, beta, alpha)
        if tuple(self.shape) != (mat.shape[0],):
            raise RuntimeError(f"Bad in-place call: input tensor size {list(self.shape)} and "
                               f"output tensor size {[mat.shape[0]]} should match")
        if _one_op_addmv(self, mat, vec, beta, alpha):
            return call(L.addmv_, self, mat, vec, beta, alpha)  # (one AddmvBackward0)
    return copy_(self, addmv(self, mat, vec, beta=beta, alpha=alpha))


def _cumprod_(self: Tensor, dim: int, *, dtype=None) -> Tensor:
    """In-place cumulative product along `dim` (`dtype`, if given, must be the tensor's)."""
    return call(SC.cumprod_, self, dim) if dtype is None else \
        call(SC.cumprod_, self, dim, dtype)


def _fill_diagonal_(self: Tensor, fill_value, wrap: bool = False) -> Tensor:
    """Fill the main diagonal (all indices equal) in place; `wrap` continues below a tall
    matrix's square part every `columns + 1` elements."""
    if wrap.__class__ is not builtins.bool:  # (PyTorch's parser takes a bool only)
        raise TypeError(f"fill_diagonal_(): argument 'wrap' (position 2) must be bool, not "
                        f"{python_type_name(wrap)}")
    if self.dim() < 2:
        raise RuntimeError("dimensions must larger than 1")
    n = self.shape[0]
    if self.dim() > 2 and any(s != n for s in self.shape):
        raise RuntimeError("all dimensions of input must be of equal length")
    step = sum(self.stride())
    offset = self.storage_offset()
    rows, cols = self.shape[0], self.shape[1]
    if wrap and self.dim() == 2 and rows > cols:
        # Below the square part the diagonal goes on after one skipped row (every cols + 1
        # rows, in the rows' order whatever the strides)
        start = 0
        while start < rows:
            count = builtins.min(cols, rows - start)
            fill_(self.as_strided((count,), (step,), offset + start * self.stride(0)),
                  fill_value)
            start += cols + 1
        return self
    count = builtins.min(self.shape)
    if count:
        fill_(self.as_strided((count,), (step,), offset), fill_value)
    return self


def _sum_to_size(self: Tensor, *sizes, size=None) -> Tensor:
    """Sum `self` down to `size` (given spread out, as one sequence, or by keyword), which
    `self` must be expandable from."""
    if size is not None:
        sizes = _keyword_shape("sum_to_size", "size", sizes, size)
    size = sizes
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    size = tuple(int_argument(s) for s in size)
    shape = tuple(self.shape)
    lead = len(shape) - len(size)
    if lead < 0 or any(s != 1 and s != d for s, d in zip(size, shape[lead:])):
        raise RuntimeError(f"size {{{list(size)}}} is not expandable to size "
                           f"{{{list(shape)}}}.")
    dims = list(range(lead)) + [lead + i for i, s in enumerate(size)
                                if s == 1 and shape[lead + i] != 1]
    if not dims:
        return self
    out = self.sum(dims, keepdim=True)
    return out.view(size) if lead else out


def _elementwise(self: Tensor, name: str, others, fn) -> Tensor:
    """self[i] = fn(self[i], *(o[i] for o in others)) in place, through Python numbers; not
    recorded by autograd and, as in PyTorch, no version bump."""
    if self.requires_grad:
        raise RuntimeError(f"Can't call {name}() on Variable that requires grad. Use "
                           f"var.detach().{name}() instead.")
    arr = self.numpy()
    columns = [arr.reshape(-1).tolist()] + [
        np.broadcast_to(o.detach().numpy(), arr.shape).reshape(-1).tolist() for o in others]
    values = [fn(*vs) for vs in zip(*columns)]
    if values:
        arr[...] = np.asarray(values).astype(arr.dtype).reshape(arr.shape)
    return self


def _apply_(self: Tensor, callable) -> Tensor:  # noqa: A002 (PyTorch's argument name)
    """Replace each element x with callable(x), in place."""
    return _elementwise(self, "apply_", (), callable)


def _map_(self: Tensor, tensor: Tensor, callable) -> Tensor:  # noqa: A002
    """self[i] = callable(self[i], tensor[i]) in place, `tensor` broadcast to self."""
    return _elementwise(self, "map_", (tensor,), callable)


def _map2_(self: Tensor, x: Tensor, y: Tensor, callable) -> Tensor:  # noqa: A002
    """self[i] = callable(self[i], x[i], y[i]) in place, `x` and `y` broadcast to self."""
    return _elementwise(self, "map2_", (x, y), callable)


def _new_empty_strided(self: Tensor, size, stride, *, dtype=None, layout=None, device=None,
                       requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """`empty_strided(size, stride)` with self's dtype unless given."""
    from .utilities import empty_strided, strided_arguments

    if not isinstance(size, (list, tuple)) or not isinstance(stride, (list, tuple)) or \
            int_list_error(size, "", "", 1) or int_list_error(stride, "", "", 2):
        strided_arguments("new_empty_strided", size, stride)

    return empty_strided(size, stride, dtype=dtype or self.dtype, device=device,
                         requires_grad=requires_grad)


_new_empty_strided.__name__ = _new_empty_strided.__qualname__ = "new_empty_strided"


def _resize(self: Tensor, *sizes) -> Tensor:
    """A copy of self's leading elements in a new shape (the deprecated out-of-place resize)."""
    warnings.warn("non-inplace resize is deprecated", UserWarning,
                  stacklevel=warning_stacklevel(2))
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    out = self.detach().clone()
    return out.resize_(*sizes)


def _resize_as(self: Tensor, tensor: Tensor) -> Tensor:
    """A copy of self's leading elements in `tensor`'s shape (deprecated)."""
    warnings.warn("non-inplace resize_as is deprecated", UserWarning,
                  stacklevel=warning_stacklevel(2))
    return self.detach().clone().resize_(tuple(tensor.shape))


def _dim_order(self: Tensor, *, ambiguity_check=False) -> tuple:
    """The dimensions from outermost to innermost in memory (by decreasing stride)."""
    if not isinstance(ambiguity_check, (bool, list)):
        raise TypeError("The ambiguity_check argument must be a bool or a list of "
                        "memory formats.")
    strides = self.stride()
    return tuple(sorted(range(self.dim()), key=lambda d: -strides[d]))


def _const_data_ptr(self: Tensor) -> int:
    """The address of the first element (the same as `data_ptr`)."""
    return self.data_ptr()


def _module_load(self: Tensor, other, assign: bool = False):
    """What `Module.load_state_dict` puts in place of parameter `self` given `other`: `other`
    detached when assigning, else self with `other` copied in, detached."""
    if assign:
        return other.detach()
    return self.copy_(other).detach()

