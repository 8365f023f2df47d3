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

from . import _dispatch, _dtype
from ._device import device as _device_cls
from ._device import meta as META
from ._fake import DataDependentOutputError, FakeTensor
from ._shapes import (
    FORMAT_ORDERS,
    broadcast_shapes,
    contiguous_strides,
    dense_order,
    dense_strides,
    is_dense_in,
    is_format_contiguous,
    iterator_order,
    resize_shape,
)
from ._tensor import INCOMPATIBLE_DATA, Size, Tensor
from ._thread_state import active as _active
from ._thread_state import local as _local

_NO_DATA = "Cannot copy out of meta tensor; no data!"

_NONZERO = ("The register_meta function for torch.nonzero() raises unimplemented by default, "
            "as a correct data-independent implementation does not exist. This implementation "
            "returns a fake value, assuming all elements of the tensor are non-zero. To enable "
            "this registration, please set "
            "'torch.fx.experimental._config.meta_nonzero_assume_all_nonzero' to True.")
_NO_META_KERNEL = (
    "aten::{}: attempted to run this operator with Meta tensors, but there was no fake impl "
    "or Meta kernel registered. You may have run into this message while using an operator "
    "with PT2 compilation APIs (torch.compile/torch.export); in order to use this operator "
    "with those APIs you'll need to add a fake impl. Please see the following for next "
    "steps:  https://pytorch.org/tutorials/advanced/custom_ops_landing_page.html")


class MetaTensor(FakeTensor):
    """A tensor on the meta device."""

    __slots__ = ()

    @classmethod
    def _compute(cls, op, args):
        base = op.name.partition(".")[0]
        if base.startswith("copy_"):  # (into a meta tensor: a no-op, from any device)
            if args[0]._plain:  # (into a CPU tensor: there is nothing to copy)
                raise NotImplementedError(_NO_DATA)
            src = args[1]
            if isinstance(src, Tensor) and src._plain:
                args = (args[0], from_tensor(src)) + args[2:]
        elif base == "index":
            args = (args[0], _cpu_masks_as_positions(args[1])) + args[2:]
        first = True
        for position, a in enumerate(args):
            many = a.__class__ is list or a.__class__ is tuple
            # Integer index tensors may live on the CPU, as PyTorch's index kernels allow
            # (they carry no data a meta kernel needs): the op's non-differentiable
            # arguments (gather's index, embedding's indices), or a list of indices after
            # the tensor indexed (index, index_put).
            index_position = position in op.nondiff_args or (many and position > 0)
            for t in a if many else (a,):
                if not isinstance(t, Tensor):
                    continue
                if t._plain and t.ndim and not (index_position and not t.dtype.is_floating_point
                                                and not t.dtype.is_complex):
                    # (a 0-d tensor: a number; the expected device is the first tensor's)
                    raise RuntimeError(
                        "Tensor on device meta is not on the expected device cpu!" if first
                        else "Tensor on device cpu is not on the expected device meta!")
                first = False
        if op.inplace:
            _check_inplace(op, args)
        try:
            # (results are meta tensors, whatever the argument's class: a meta Parameter's)
            out = FakeTensor._compute.__func__(MetaTensor, op, args)
        except DataDependentOutputError as e:
            raise _data_dependent_error(op.name, str(e)) from None
        if op.result_order in ("operands", "iterator") and out.__class__ is MetaTensor and not (
                op.view or op.metadata_only or op.inplace):
            _lay_out_as_operands(out, op, args)
        return out

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
        if what == "item" and self.numel() != 1:  # (the count is checked before the data)
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to "
                               f"Scalar")
        raise RuntimeError("Tensor.item() cannot be called on meta tensors")

    def cpu(self, memory_format=None):
        raise NotImplementedError(_NO_DATA)

    def __bool__(self) -> bool:
        if self.numel() != 1:  # (ambiguous before any value is read, as PyTorch says)
            what = "no values" if self.numel() == 0 else "more than one value"
            raise RuntimeError(f"Boolean value of Tensor with {what} is ambiguous")
        return Tensor.__bool__(self)

    def share_memory_(self):
        """PyTorch's refusal: shared memory holds data, which a meta tensor has none of."""
        raise RuntimeError("_share_fd_: only available on CPU")

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

    def _new_on(self, factory: str, shape_args: tuple, dtype, device, requires_grad,
                *extra) -> Tensor:
        """`new_<factory>`: a meta tensor of this dtype by default, or the CPU factory's
        result when `device` names another device."""
        from . import _creation

        if device is not None and _device_cls(device).type != "meta":
            return getattr(_creation, "new_" + factory)(
                self, *shape_args, *extra, dtype=dtype, device=device,
                requires_grad=requires_grad)
        shape = _creation._size_arg(shape_args, None, "new_" + factory) \
            if factory != "full" else _creation._sizes(shape_args[0], "new_full")
        return factory_tensor(shape, _dtype.as_dtype(dtype) or self._dtype, requires_grad)

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False, layout=None,
                  pin_memory=False) -> Tensor:
        """A meta tensor of `size` (PyTorch's `new_zeros` on the meta device)."""
        return self._new_on("zeros", size, dtype, device, requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False, layout=None,
                 pin_memory=False) -> Tensor:
        """A meta tensor of `size` (PyTorch's `new_ones` on the meta device)."""
        return self._new_on("ones", size, dtype, device, requires_grad)

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False, layout=None,
                  pin_memory=False) -> Tensor:
        """A meta tensor of `size` (PyTorch's `new_empty` on the meta device)."""
        return self._new_on("empty", size, dtype, device, requires_grad)

    def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False,
                 layout=None, pin_memory=False) -> Tensor:
        """A meta tensor of `size` (PyTorch's `new_full` on the meta device)."""
        return self._new_on("full", (size,), dtype, device, requires_grad, fill_value)

    def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False, layout=None,
                   pin_memory=False) -> Tensor:
        """A meta tensor of `data`'s shape and this tensor's dtype by default."""
        from . import _creation

        made = _creation.new_tensor(self, data, dtype=dtype, requires_grad=requires_grad)
        if device is not None and _device_cls(device).type != "meta":
            return made
        return factory_tensor(tuple(made.shape), made.dtype, requires_grad)

    def new(self, *args, **kwargs) -> Tensor:
        """The legacy constructor on the meta device: `x.new(2, 3)`, `x.new(data)`, `x.new()`."""
        made = Tensor.new(self, *args, **kwargs)
        return make(tuple(made.shape), made.dtype)

    def type(self, dtype=None):
        """The legacy type name (`torch.meta.FloatTensor`), or a conversion to `dtype`."""
        if dtype is None:
            return Tensor.type(self).replace("torch.", "torch.meta.", 1)
        if isinstance(dtype, str):  # a legacy CPU type name: a copy to the CPU
            raise NotImplementedError(_NO_DATA)
        return Tensor.type(self, dtype)

    def resize_(self, *sizes, memory_format=None, size=None) -> MetaTensor:
        """A new shape (contiguous) for the same meta tensor; the version counts the change
        unless the shape is the one it has, as PyTorch's."""
        shape = resize_shape(sizes, size, self.requires_grad)
        if shape != self._fshape:
            self._fshape, self._fstrides = shape, contiguous_strides(shape)
            self._vc[0] += 1
        return self

    @property
    def nbytes(self) -> int:
        """Bytes the tensor's elements would take (an expanded one counts each)."""
        return self.numel() * self._dtype.itemsize

    def data_ptr(self) -> int:
        """The first element's offset in bytes from 0 (a meta storage's address)."""
        return self._foffset * self._dtype.itemsize

    def untyped_storage(self) -> MetaStorage:
        """The storage the tensor (or the tensor it views) would have: its size only."""
        base = self._base if self._base is not None else self
        return MetaStorage(_storage_bytes(base))

    def __deepcopy__(self, memo) -> MetaTensor:
        self._check_deepcopy()
        if id(self) in memo:
            return memo[id(self)]
        t = make(self._fshape, self._dtype, self._fstrides, self._foffset)
        t._rg = self._rg
        memo[id(self)] = t
        return t

    def __reduce_ex__(self, protocol):
        if type(self) is not MetaTensor:  # (a subclass pickles as its class says)
            return Tensor.__reduce_ex__(self, protocol)
        # (PyTorch's pickle keeps the strides, not the offset)
        return (_rebuild, (self._fshape, self._dtype.name, self._fstrides, self._rg))

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

    def __format__(self, spec: str) -> str:
        # (a 0-d meta tensor has no item to format: its repr, and no format spec)
        if spec:
            raise TypeError("unsupported format string passed to Tensor.__format__")
        return self.__repr__()


class MetaStorage:
    """A meta tensor's storage: a size in bytes and no memory (address 0)."""

    __slots__ = ("_nbytes",)

    def __init__(self, nbytes: int) -> None:
        self._nbytes = nbytes

    def nbytes(self) -> int:
        """Bytes the storage would hold."""
        return self._nbytes

    size = nbytes

    def data_ptr(self) -> int:
        """0: no memory."""
        return 0

    @property
    def device(self):
        """The meta device."""
        return META

    def __len__(self) -> int:
        return self._nbytes

    def __repr__(self) -> str:
        return f"...\n[torch.storage.UntypedStorage(device=meta) of size {self._nbytes}]"


MetaStorage.__name__ = MetaStorage.__qualname__ = "UntypedStorage"


def _storage_bytes(t: Tensor) -> int:
    """Bytes a storage needs for `t`'s elements (its offset and farthest element)."""
    shape, strides = t._fshape, t._fstrides
    if 0 in shape:
        return 0
    last = t._foffset + sum((n - 1) * s for n, s in zip(shape, strides))
    return (last + 1) * t._dtype.itemsize


# A meta tensor is a Tensor to programs that print its type's name, as PyTorch's is one.
MetaTensor.__name__ = MetaTensor.__qualname__ = "Tensor"


def _check_inplace(op, args) -> None:
    """PyTorch's errors for an in-place op on a meta tensor: into a leaf that requires grad,
    a result that does not fit `self` (broadcast larger) or whose dtype `self` cannot hold."""
    self = args[0]
    record = (not _active.grad_off or _local.grad_enabled) and op.differentiable and any(
        t._rg for a in args
        for t in (a if a.__class__ is list or a.__class__ is tuple else (a,))
        if isinstance(t, Tensor))
    _dispatch.check_inplace_allowed(self, record)
    if op.metadata_only:
        return
    spec = op.meta(*args)
    if isinstance(spec, (tuple, list)) or spec is None:
        return
    shape = tuple(self.shape)
    if spec.shape != shape:
        full = broadcast_shapes(shape, tuple(spec.shape))
        if full != shape:
            raise RuntimeError(f"output with shape {Size(shape)} doesn't match the broadcast "
                               f"shape {full}")
    if spec.dtype is not self._dtype and op.name.partition(".")[0] in ("add_", "sub_"):
        # (PyTorch's meta add/sub words these two refusals its own way)
        if self._dtype is _dtype.bool_:
            raise RuntimeError("Promotion of bool.add/sub_(others) in in-place ops are not "
                               "possible due to element size change.")
        if not self._dtype.is_floating_point and not self._dtype.is_complex and \
                spec.dtype.is_floating_point:
            raise RuntimeError("Promotion of int.add/sub_(float) in in-place ops are not "
                               "possible due to element size change.")
    if spec.dtype is not self._dtype and not _dtype.can_cast(spec.dtype, self._dtype):
        raise RuntimeError(f"result type {spec.dtype} can't be cast to the desired output type "
                           f"{self._dtype}")


def no_meta_kernel(name: str) -> NotImplementedError:
    """PyTorch's error for operator `name` (ATen's name) run on meta tensors when it has no
    meta kernel: for the raise of a function or derivative that would read values."""
    return NotImplementedError(_NO_META_KERNEL.format(name))


def _data_dependent_error(name: str, message: str) -> Exception:
    """PyTorch's error for an op whose result's shape depends on values a meta tensor lacks:
    the mask of an index and nonzero's say they assume no zeros, one_hot without a class
    count reads an item, the others have no meta kernel."""
    what = message.partition(":")[0]
    if what in ("nonzero", "index with a boolean mask"):
        return NotImplementedError(_NONZERO)
    if what.startswith("one_hot"):
        return RuntimeError("Tensor.item() cannot be called on meta tensors")
    return no_meta_kernel(name.partition(".")[0])


def _cpu_masks_as_positions(indices):
    """An index's boolean masks on the CPU as the positions they select (a mask of k dims:
    k integer tensors), as PyTorch reads them before indexing; the rest as given."""
    if not any(isinstance(i, Tensor) and i._plain and i.dtype in (_dtype.bool_, _dtype.uint8)
               for i in indices):
        return indices
    out = []
    for i in indices:
        if isinstance(i, Tensor) and i._plain and i.dtype in (_dtype.bool_, _dtype.uint8):
            out.extend(i.nonzero(as_tuple=True) if i.ndim else (i,))
        else:
            out.append(i)
    return type(indices)(out)


def _lay_out_as_operands(out: MetaTensor, op, args) -> None:
    """Give `out` the strides PyTorch's elementwise kernels (TensorIterator) give a new result:
    a meta only says contiguous, while `x.t() + 1` or a channels_last input keep their
    operands' memory order."""
    if op.name.partition(".")[0] == "clone" and len(args) > 1 and args[1] is not None and \
            str(args[1]) != "torch.preserve_format":
        return  # clone(memory_format=...): the meta's own layout
    shape = out._fshape
    operands = [t for a in args
                for t in (a if a.__class__ is list or a.__class__ is tuple else (a,))
                if isinstance(t, Tensor) and (t.ndim or not t._plain)  # (not a CPU scalar)
                and _broadcasts(tuple(t.shape), shape)]
    if len(shape) < 2 or 0 in shape or not operands:
        return
    if op.name.partition(".")[0] in ("clone", "_to_copy"):  # (empty_like's preserve_format)
        st = tuple(operands[0].stride())
        if dense_order(shape, st) is not None:
            out._fstrides = st
            return
    strides = _iterator_strides(shape, [(tuple(t.shape), tuple(t.stride())) for t in operands])
    if strides is not None:
        out._fstrides = strides


def _iterator_strides(shape: tuple, operands: list) -> tuple | None:
    """The strides PyTorch's meta kernels give an elementwise result of `shape` from its
    operands' (shape, strides), broadcast to it: contiguous when all operands are contiguous
    and not all channels_last (channels_last when only that holds); else the dims sorted by
    the operands' strides (the first operand that orders two dims decides; broadcast dims
    order nothing; equal strides put the larger dim inside). None: contiguous."""
    ndim = len(shape)
    padded = []
    for s, st in operands:  # each expanded to `shape`, as `expand` lays it out
        lead = ndim - len(s)
        out = [0] * ndim
        for i in range(ndim - 1, -1, -1):
            n, v = (s[i - lead], st[i - lead]) if i >= lead else (
                1, shape[i + 1] * out[i + 1] if i + 1 < ndim else 1)
            out[i] = 0 if n != shape[i] else v  # (a size-1 dim broadcast)
        padded.append(out)
    every = range(ndim)
    contiguous = all(is_dense_in(shape, st, every) for st in padded)
    channels_last = ndim == 4 and all(
        is_format_contiguous(shape, st, "channels_last") for st in padded)
    if contiguous and not channels_last:
        return None
    if channels_last and not contiguous:
        return dense_strides(shape, FORMAT_ORDERS["channels_last"])

    def should_swap(d0: int, d1: int) -> int:
        for st in padded:
            s0, s1 = st[d0], st[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 < s1:
                return -1
            if s0 > s1:
                return 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    perm = iterator_order(list(range(ndim - 1, -1, -1)), should_swap)  # innermost first
    return dense_strides(shape, perm[::-1])


def _broadcasts(small: tuple, big: tuple) -> bool:
    """Whether `small` broadcasts to `big` (an operand of the result, not a weight or index)."""
    if len(small) > len(big):
        return False
    return all(a in (1, b) for a, b in zip(small[::-1], big[::-1]))


def _rebuild(shape: tuple, dtype_name: str, strides: tuple, requires_grad: bool) -> MetaTensor:
    """Unpickle a meta tensor written by `MetaTensor.__reduce_ex__`."""
    return factory_tensor(shape, _dtype.BY_NAME[dtype_name], requires_grad, strides)


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
    """`t.to('meta')`: a meta tensor of `t`'s geometry (and `dtype`, if given); recorded as
    PyTorch's copy (`ToCopyBackward0`) when `t` requires grad, whose backward, having no
    data to copy back, raises PyTorch's error."""
    out = make(tuple(t.shape), dtype or t.dtype, tuple(t.stride()) if dtype is None else None)
    if t._rg:
        from .ops.rearrange import to_copy

        _dispatch._finish(to_copy, (t, out._dtype), out)
        if out._grad_fn is not None:
            out._grad_fn.register_prehook(_no_data_back)
    return out


def _no_data_back(grad_outputs):
    """The backward of a copy to the meta device: the gradient has no data for the source."""
    raise NotImplementedError(_NO_DATA)
