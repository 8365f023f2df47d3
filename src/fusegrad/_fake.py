"""Fake tensors: shape, strides, dtype and autograd state without data.

Ops on fakes run only their meta function; autograd records on fakes exactly as on real
tensors (so a backward graph can be traced without computing anything). Under
`FakeTensorMode` every op and factory makes fakes, and real tensors met by an op are treated
as fakes of the same geometry. Anything whose result depends on the data (`item`, `bool`,
`tolist`, `numpy`) raises `DataDependentOutputError`; capture turns that into a graph break.
Reading a value raises its subclass `DataDependentOutputException`; its subclass
`DynamicOutputShapeException` is what `torch._subclasses`' FakeTensorMode raises for an op
whose output shape depends on the data: PyTorch's two exceptions, each naming the aten op.
"""

from __future__ import annotations

from . import _dispatch, _thread_state
from ._shapes import contiguous_strides, wrap_dim
from ._tensor import Size, Tensor
from ._torch_function import _disabled_torch_function_impl


class DataDependentOutputError(RuntimeError):
    """An operation needs tensor values that a fake tensor does not have."""


class _OpException(DataDependentOutputError):
    """PyTorch's fake-tensor exception naming an op (`func`: its `aten` handle, or its name
    where fusegrad has no such op); the message is the op's name."""

    def __init__(self, func) -> None:
        super().__init__(str(func))
        self.func = func


class DataDependentOutputException(_OpException):
    """An op's output value depends on the data (`aten._local_scalar_dense.default`: `item`,
    `bool`, `tolist`)."""


class DynamicOutputShapeException(_OpException):
    """An op's output shape depends on the data (`nonzero`, `masked_select`, `unique`)."""


class FakeTensor(Tensor):
    """A tensor with metadata only."""

    __slots__ = ("_fshape", "_fstrides", "_foffset")
    _plain = False
    __torch_function__ = _disabled_torch_function_impl

    @classmethod
    def _make_fake(cls, shape, dtype, strides=None, offset: int = 0) -> FakeTensor:
        t = Tensor._make.__func__(cls, None, dtype)
        t._fshape = tuple(shape)
        t._fstrides = tuple(strides) if strides is not None else contiguous_strides(shape)
        t._foffset = offset
        return t

    @classmethod
    def from_tensor(cls, t: Tensor) -> FakeTensor:
        """A fake with `t`'s geometry, dtype and requires_grad (a leaf)."""
        f = cls._make_fake(tuple(t.shape), t.dtype, tuple(t.stride()), t.storage_offset())
        f._rg = t.requires_grad
        return f

    @classmethod
    def _compute(cls, op, args) -> FakeTensor | tuple:
        """Run `op`'s meta on `args` and make fakes of the specs it returns."""
        spec = op.meta(*args)
        if op.metadata_only:
            return cls._make_fake(spec.shape, spec.dtype, spec.strides,
                                  args[0].storage_offset() + spec.offset)
        if op.inplace:
            self = args[0]
            self._vc[0] += 1
            return self
        if isinstance(spec, (tuple, list)):
            return tuple(cls._from_spec(s, op, args) for s in spec)
        return cls._from_spec(spec, op, args)

    @classmethod
    def _from_spec(cls, spec, op, args) -> FakeTensor:
        offset = 0
        if op.view and spec.strides is not None:
            offset = args[0].storage_offset() + spec.offset
        return cls._make_fake(spec.shape, spec.dtype, spec.strides, offset)

    def _take_geometry(self, other: FakeTensor) -> None:
        self._fshape, self._fstrides, self._foffset = (other._fshape, other._fstrides,
                                                       other._foffset)

    def _shallow_copy(self) -> FakeTensor:
        t = Tensor._shallow_copy(self)
        t._fshape, t._fstrides, t._foffset = self._fshape, self._fstrides, self._foffset
        return t

    def _data_dependent(self, what: str):
        if what in ("item", "tolist", "bool"):  # (PyTorch's `_local_scalar_dense` reads)
            raise DataDependentOutputException("aten._local_scalar_dense.default")
        if what in ("numpy", "__array__"):  # (PyTorch's message: its fakes are a tensor subclass)
            raise DataDependentOutputError(".numpy() is not supported for tensor subclasses.")
        raise DataDependentOutputError(
            f"{what}() needs the values of a FakeTensor, which has none (data-dependent "
            "output)")

    @property
    def shape(self) -> Size:
        return Size(self._fshape)

    def size(self, dim=None):
        if dim is None:
            return Size(self._fshape)
        return self._fshape[wrap_dim(dim, len(self._fshape))]

    @property
    def ndim(self) -> int:
        return len(self._fshape)

    def dim(self) -> int:
        return len(self._fshape)

    ndimension = dim

    def numel(self) -> int:
        n = 1
        for s in self._fshape:
            n *= s
        return n

    nelement = numel

    def stride(self, dim=None):
        if dim is None:
            return self._fstrides
        return self._fstrides[wrap_dim(dim, len(self._fstrides))]

    def storage_offset(self) -> int:
        return self._foffset

    def __len__(self) -> int:
        if not self._fshape:
            raise TypeError("len() of a 0-d tensor")
        return self._fshape[0]

    @property
    def data(self) -> FakeTensor:
        return FakeTensor._make_fake(self._fshape, self._dtype, self._fstrides, self._foffset)

    def detach(self) -> FakeTensor:
        t = self.data
        t._vc = self._vc
        return t

    def _detached_copy(self) -> FakeTensor:
        return FakeTensor._make_fake(self._fshape, self._dtype)

    def new_zeros(self, *size, dtype=None, **kwargs) -> FakeTensor:
        return self._new_filled(size, dtype, "zeros")

    def new_ones(self, *size, dtype=None, **kwargs) -> FakeTensor:
        return self._new_filled(size, dtype, "ones")

    new_empty = new_zeros

    def _new_filled(self, size, dtype, factory: str) -> FakeTensor:
        from . import _creation

        shape = _creation._sizes(size)
        # A mode makes factory results (a tracer keeps their values); a profiler only watches.
        if _thread_state.local.modes and _dispatch.computing_mode():
            return getattr(_creation, factory)(shape, dtype=dtype or self._dtype)
        return FakeTensor._make_fake(shape, dtype or self._dtype)

    def __repr__(self) -> str:
        extra = ""
        if self._grad_fn is not None:
            extra = f", grad_fn=<{type(self._grad_fn).__name__}>"
        elif self._rg:
            extra = ", requires_grad=True"
        dt = "" if self._dtype.name == "float32" else f", dtype={self._dtype!r}"
        return f"FakeTensor(..., size={self._fshape}{dt}{extra})"

    __str__ = __repr__


class FakeTensorMode(_dispatch.DispatchMode):
    """While active, ops and factory functions make FakeTensors (meta functions only)."""

    def __fusegrad_dispatch__(self, op, args):
        return FakeTensor._compute(op, tuple(self._fakeify(a) for a in args))

    def _fakeify(self, a):
        if isinstance(a, Tensor) and not isinstance(a, FakeTensor):
            return self.from_tensor(a)
        if isinstance(a, list):
            return [self._fakeify(x) for x in a]
        return a

    def from_tensor(self, t: Tensor) -> FakeTensor:
        """A fake with `t`'s geometry, dtype and requires_grad."""
        return FakeTensor.from_tensor(t)

    def make_factory_tensor(self, shape, dtype, requires_grad: bool) -> FakeTensor:
        """What factory functions return under this mode."""
        f = FakeTensor._make_fake(shape, dtype)
        f._rg = bool(requires_grad)
        return f
