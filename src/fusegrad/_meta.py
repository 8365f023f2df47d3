"""The meta device: tensors with shape, strides, dtype and autograd state but no data.

A meta tensor is a fake tensor (`_fake.FakeTensor`: ops run their meta function only, and
autograd records on it as on any tensor) that says it lives on `device('meta')`, as
PyTorch's does: factories given `device='meta'` (or called inside `with
torch.device('meta')`, or after `set_default_device('meta')`) make one without allocating,
`x.to('meta')` makes one of `x`'s geometry, and a module built on the meta device is
described without memory (`Module.to_empty` then gives it real storage). Reading values
(`item`, `tolist`, `numpy`, `.cpu()`) raises PyTorch's errors, and an op mixing a meta
tensor with a tensor on the CPU is refused, as PyTorch refuses mixing devices.
"""

from __future__ import annotations

from . import _dtype
from ._device import device as _device_cls
from ._fake import FakeTensor
from ._shapes import contiguous_strides
from ._tensor import INCOMPATIBLE_DATA, Tensor

META = _device_cls("meta")

_NO_DATA = "Cannot copy out of meta tensor; no data!"


class MetaTensor(FakeTensor):
    """A tensor on the meta device."""

    __slots__ = ()

    @classmethod
    def _compute(cls, op, args):
        if op.name.startswith("copy_"):  # (into a meta tensor: a no-op, from any device)
            args = (args[0], from_tensor(args[1]) if args[1]._plain else args[1]) + args[2:]
        for a in args:
            for t in a if a.__class__ is list or a.__class__ is tuple else (a,):
                if isinstance(t, Tensor) and t._plain and t.ndim:  # (a 0-d tensor: a number)
                    raise RuntimeError(
                        "Tensor on device cpu is not on the expected device meta!")
        # (results are meta tensors, whatever the argument's class: a meta Parameter's too)
        return FakeTensor._compute.__func__(MetaTensor, op, args)

    @property
    def device(self):
        return META

    @property
    def is_meta(self) -> bool:
        return True

    @property
    def is_cpu(self) -> bool:
        return False

    def _data_dependent(self, what: str):
        if what in ("numpy", "__array__"):
            raise TypeError("can't convert meta device type tensor to numpy. Use Tensor.cpu() "
                            "to copy the tensor to host memory first.")
        if what == "tolist":
            raise NotImplementedError(_NO_DATA)
        raise RuntimeError("Tensor.item() cannot be called on meta tensors")

    def cpu(self, memory_format=None):
        raise NotImplementedError(_NO_DATA)

    def to(self, *args, **kwargs):
        """A conversion that stays on the meta device (leaving it has no data to copy)."""
        target = kwargs.get("device")
        for a in args:
            if isinstance(a, (str, _device_cls)):
                target = a
            elif isinstance(a, Tensor):
                target = a.device
        if target is not None and _device_cls(target).type != "meta":
            raise NotImplementedError(_NO_DATA)
        return Tensor.to(self, *[a for a in args if not isinstance(a, (str, _device_cls))],
                         **{k: v for k, v in kwargs.items() if k != "device"})

    @property
    def data(self) -> MetaTensor:
        return make(self._fshape, self._dtype, self._fstrides, self._foffset)

    @data.setter
    def data(self, value) -> None:
        if not isinstance(value, MetaTensor):
            raise RuntimeError(INCOMPATIBLE_DATA)
        self._fshape, self._fstrides, self._foffset = (value._fshape, value._fstrides,
                                                       value._foffset)
        self._dtype = value._dtype

    def detach(self) -> MetaTensor:
        t = self.data
        t._vc = self._vc
        return t

    def _detached_copy(self) -> MetaTensor:
        return make(self._fshape, self._dtype)

    def _new_filled(self, size, dtype, factory: str) -> MetaTensor:
        from ._creation import _sizes

        return make(_sizes(size), dtype or self._dtype)

    def __deepcopy__(self, memo) -> MetaTensor:
        t = make(self._fshape, self._dtype, self._fstrides, self._foffset)
        t._rg = self._rg
        memo[id(self)] = t
        return t

    def __repr__(self, *, tensor_contents=None) -> str:
        items = ["device='meta'", f"size={tuple(self._fshape)}"]
        if self._dtype is not _dtype.defaults.float:
            items.append(f"dtype={self._dtype!r}")
        if self._grad_fn is not None:
            items.append(f"grad_fn=<{type(self._grad_fn).__name__}>")
        elif self._rg:
            items.append("requires_grad=True")
        return "tensor(..., " + ", ".join(items) + ")"

    __str__ = __repr__


# A meta tensor is a Tensor to programs that print its type's name, as PyTorch's is one.
MetaTensor.__name__ = MetaTensor.__qualname__ = "Tensor"


def make(shape, dtype, strides=None, offset: int = 0, cls: type = MetaTensor) -> MetaTensor:
    """A meta tensor of `shape` and `dtype` (contiguous unless `strides` are given)."""
    t = Tensor._make.__func__(cls, None, dtype)
    t._fshape = tuple(shape)
    t._fstrides = tuple(strides) if strides is not None else contiguous_strides(shape)
    t._foffset = offset
    return t


def factory_tensor(shape, dtype, requires_grad: bool, strides=None) -> MetaTensor:
    """What a factory function makes on the meta device."""
    t = make(shape, dtype, strides)
    if requires_grad:
        t._set_requires_grad(
            True, "Only Tensors of floating point and complex dtype can require gradients")
    return t


def from_tensor(t: Tensor, dtype=None) -> MetaTensor:
    """`t.to('meta')`: a meta tensor of `t`'s geometry (and `dtype`, if given)."""
    return make(tuple(t.shape), dtype or t.dtype, tuple(t.stride()) if dtype is None else None)
