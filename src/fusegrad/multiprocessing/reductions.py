"""How tensors travel between processes (registered on `multiprocessing`'s pickler): a tensor
in a shared buffer with a memory file goes as the file's descriptor and its place in the
buffer, and the receiver maps the same memory; any other tensor is pickled by value."""

from __future__ import annotations

from multiprocessing.reduction import DupFd, ForkingPickler

import numpy as np

from .. import _shared_memory
from .._tensor import Tensor


def _rebuild_shared(cls, dup, nbytes: int, offset: int, shape: tuple, strides: tuple,
                    dtype: str, requires_grad: bool):
    """The receiving side of `_reduce_tensor`: a tensor over the sender's shared memory."""
    buffer = _shared_memory.attach(dup.detach(), nbytes)
    array = np.ndarray(shape, dtype=np.dtype(dtype), buffer=buffer, offset=offset,
                       strides=strides)
    t = Tensor._make(array)
    if cls is not Tensor:
        from ..nn.parameter import Parameter

        if issubclass(cls, Parameter):
            return cls(t, requires_grad=requires_grad)
    return t._requires_grad_unguarded(requires_grad) if requires_grad else t


def _reduce_tensor(t: Tensor):
    if t.requires_grad and t.grad_fn is not None:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since "
            "autograd does not support crossing process boundaries.  If you just want to "
            "transfer the data, call detach() on the tensor before serializing (e.g., putting "
            "it on the queue).")
    data = t._data
    buffer = _shared_memory.buffer_of(data) if data is not None else None
    fd = getattr(buffer, "fd", None)
    if fd is None or data.dtype.kind not in "biufc":
        return t.__reduce_ex__(4)  # copied by value
    start = np.frombuffer(buffer, dtype=np.uint8).__array_interface__["data"][0]
    offset = data.__array_interface__["data"][0] - start
    return _rebuild_shared, (type(t), DupFd(fd), len(buffer), offset, data.shape,
                             data.strides, data.dtype.str, t.requires_grad)


def init_reductions() -> None:
    """Register the tensor reduction for Tensor and Parameter."""
    from ..nn.parameter import Parameter

    for cls in (Tensor, Parameter):
        ForkingPickler.register(cls, _reduce_tensor)
