"""`Parameter`: a Tensor that a Module registers as one of its parameters."""

from __future__ import annotations

import numpy as np

from .. import _dispatch, _dtype, _meta
from .._fake import FakeTensor
from .._tensor import TENSOR_REPR_CLASSES, Tensor
from .._torch_function import _disabled_torch_function_impl

_ATTRIBUTES: dict[int, dict] = {}  # id(parameter) -> the attributes set on it


class Parameter(Tensor):
    """A leaf tensor that requires grad by default and registers itself on Modules.

    It shares its data with the tensor it is made from. Being a plain Tensor subclass
    (`_plain` is inherited), it takes dispatch's fast path; op results are plain Tensors.
    """

    __slots__ = ()  # Tensor's layout: `swap_tensors` exchanges a parameter with a tensor
    # Ops on parameters give plain Tensors and do not consult the protocol, as in PyTorch.
    __torch_function__ = _disabled_torch_function_impl

    # Attributes a program sets on a parameter (`p.no_decay = True`), as on PyTorch's, kept
    # beside it (`_ATTRIBUTES`, by identity): an instance dict would change the layout, and
    # on Tensor itself it slowed Python's method lookups on every tensor.
    def __setattr__(self, name: str, value) -> None:
        if hasattr(type(self), name):  # a slot or a property: the class's own
            object.__setattr__(self, name, value)
            return
        own = _ATTRIBUTES.get(id(self))
        if own is None:
            own = _ATTRIBUTES[id(self)] = {}
        own[name] = value

    def __del__(self) -> None:
        if _ATTRIBUTES:
            _ATTRIBUTES.pop(id(self), None)

    @staticmethod
    def _exchange_attributes(t1, t2) -> None:
        """`swap_tensors`: the attributes move with the contents, as the dicts of PyTorch's
        tensors do."""
        first, second = _ATTRIBUTES.pop(id(t1), None), _ATTRIBUTES.pop(id(t2), None)
        if second is not None:
            _ATTRIBUTES[id(t1)] = second
        if first is not None:
            _ATTRIBUTES[id(t2)] = first

    def __getattr__(self, name: str):
        own = _ATTRIBUTES.get(id(self))
        if own is not None and name in own:
            return own[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        own = _ATTRIBUTES.get(id(self))
        if own is not None and name in own:
            del own[name]
        else:
            object.__delattr__(self, name)

    def _attributes(self) -> dict:
        """The attributes a program set on this parameter (a copy)."""
        return dict(_ATTRIBUTES.get(id(self), ()))

    def __setstate__(self, state: dict) -> None:
        for name, value in state.items():
            setattr(self, name, value)

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            data = Tensor._make(np.empty((0,), dtype=_dtype.defaults.float.np))
        if isinstance(data, _meta.MetaTensor) and cls is Parameter:
            p = _meta.make(data.shape, data._dtype, data.stride(), data.storage_offset(),
                           _MetaParameter)
            p._vc = data._vc
            if requires_grad:
                p._set_requires_grad(True, "Only Tensors of floating point and complex dtype "
                                           "can require gradients")
            return p
        if isinstance(data, FakeTensor) and cls is Parameter:
            p = _FakeParameter._make_fake(data.shape, data._dtype, data.stride(),
                                          data.storage_offset())
            p._vc = data._vc
            if requires_grad:
                p._set_requires_grad(True, "Only Tensors of floating point and complex dtype "
                                           "can require gradients")
            return p
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
        # The data and requires_grad only, as PyTorch copies a parameter: no grad.
        p = Parameter(Tensor._make(self._data.copy(), self._dtype), self._rg)
        memo[id(self)] = p
        return p

    def __reduce_ex__(self, protocol):
        args = (np.array(self._data), self._dtype.name, self._rg)
        state = self._attributes()
        if state:  # the program's attributes travel with it, as PyTorch's
            return (_rebuild_parameter, args, state)
        return (_rebuild_parameter, args)


TENSOR_REPR_CLASSES.add(Parameter)
_dispatch.treat_as_plain(Parameter)


class _MetaParameter(_meta.MetaTensor, Parameter):
    """A Parameter on the meta device (what `Parameter(meta_tensor)` makes): a meta tensor
    that registers on Modules as parameters do. Named Parameter, as it is one."""

    __slots__ = ()

    def __repr__(self, *, tensor_contents=None) -> str:
        return "Parameter containing:\n" + _meta.MetaTensor.__repr__(self)

    __str__ = __repr__

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        # (a clone keeps a dense layout, as PyTorch's copy does)
        p = Parameter(self.detach().clone(), self._rg)
        memo[id(self)] = p
        return p

    def __reduce_ex__(self, protocol):
        args = (tuple(self._fshape), self._dtype.name, tuple(self._fstrides), self._rg)
        state = self._attributes()
        if state:  # the program's attributes travel with it, as PyTorch's
            return (_rebuild_meta_parameter, args, state)
        return (_rebuild_meta_parameter, args)


_MetaParameter.__name__ = _MetaParameter.__qualname__ = "Parameter"


class _FakeParameter(FakeTensor, Parameter):
    """A Parameter made from a fake tensor (a module built under FakeTensorMode): a fake
    tensor that registers on Modules as parameters do. Named FakeTensor, as PyTorch's is."""

    __slots__ = ()

    def __repr__(self, *, tensor_contents=None) -> str:
        return f"Parameter({FakeTensor.__repr__(self)})"

    __str__ = __repr__

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        p = Parameter(FakeTensor._make_fake(self._fshape, self._dtype), self._rg)
        memo[id(self)] = p
        return p


_FakeParameter.__name__ = _FakeParameter.__qualname__ = "FakeTensor"


def _rebuild_meta_parameter(shape: tuple, dtype_name: str, strides: tuple,
                            requires_grad: bool) -> Parameter:
    """Unpickle a meta Parameter written by `_MetaParameter.__reduce_ex__`."""
    return Parameter(_meta.make(shape, _dtype.BY_NAME[dtype_name], strides), requires_grad)


def _rebuild_parameter(data: np.ndarray, dtype_name: str, requires_grad: bool) -> Parameter:
    """Unpickle a Parameter written by `Parameter.__reduce_ex__`."""
    return Parameter(Tensor._make(_dtype.own_instance(data), _dtype.BY_NAME[dtype_name]),
                     requires_grad)


def is_lazy(param) -> bool:
    """Whether `param` is an uninitialised parameter or buffer of a lazy module."""
    return isinstance(param, UninitializedTensorMixin)


# Tensor methods that PyTorch writes in Python: a call on a placeholder names them as Python
# functions (`<function Tensor.__len__ at 0x...>`), the others as methods of its C base.
_PYTHON_TENSOR_METHODS = frozenset({
    "__deepcopy__", "__reduce_ex__", "__setstate__", "__repr__", "__format__", "__len__",
    "__iter__", "__hash__", "__dir__", "__array__", "__array_wrap__", "__contains__",
    "__reversed__", "__rsub__", "__rdiv__", "__rtruediv__", "__itruediv__", "__pow__",
    "__ipow__", "__rpow__", "__rmod__", "__floordiv__", "__rfloordiv__", "__rlshift__",
    "__rrshift__", "__rmatmul__", "__pos__", "__neg__", "__abs__", "backward", "register_hook",
    "register_post_accumulate_grad_hook", "is_shared", "share_memory_", "module_load",
    "storage", "storage_type", "refine_names", "align_to", "rename", "rename_", "dim_order",
    "__dlpack__", "__dlpack_device__"})

# What a placeholder still allows: reading its size and kind, copies into it, and the dtype
# and device conversions that `Module.to`/`.double()` apply to every parameter.
_ALLOWED_ON_PLACEHOLDER = frozenset({
    "__hash__", "size", "copy_", "is_complex", "is_floating_point", "half", "float", "double",
    "char", "short", "int", "long", "cuda", "cpu", "to", "get_device", "_get_device",
    "_has_compatible_shallow_copy_type"})


def _called_name(func) -> str:
    """`func` as PyTorch's message prints it: a Tensor method, a `torch` function, or the
    object itself."""
    name = getattr(func, "__name__", None)
    qualname = getattr(func, "__qualname__", "") or ""
    if name is None:
        return repr(func)
    if qualname.startswith("Tensor.") or getattr(Tensor, name, None) is func:
        if name in _PYTHON_TENSOR_METHODS:
            return f"<function Tensor.{name} at {id(func):#x}>"
        return f"<method '{name}' of 'torch._C.TensorBase' objects>"
    module = getattr(func, "__module__", "") or ""
    if name == "linear" and module.startswith("fusegrad.nn"):
        return "<built-in function linear>"  # a C function of `torch._C._nn`
    if module.startswith("fusegrad.nn"):
        return f"<function {name} at {id(func):#x}>"
    if module.startswith("fusegrad"):
        return f"<built-in method {name} of type object at {id(Tensor):#x}>"
    return repr(func)


def _is_tensor_method(func, name) -> bool:
    qualname = getattr(func, "__qualname__", "") or ""
    # `Tensor.get_device` is a shared function under another name
    return (qualname.startswith("Tensor.") or getattr(Tensor, name, None) is func
            or name == "_get_device")


class UninitializedTensorMixin:
    """A placeholder whose shape is not known yet: `materialize(shape)` gives it storage and
    turns it into `cls_to_become` (a Parameter or a plain Tensor) in place. Until then any
    use but a few conversions raises PyTorch's ValueError."""

    __slots__ = ()
    cls_to_become: type = Tensor

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", None)
        # properties (`p.dtype`) reach here as their `__get__` method-wrapper: allowed
        if type(func).__name__ == "method-wrapper" or (
                name in _ALLOWED_ON_PLACEHOLDER and _is_tensor_method(func, name)):
            return super().__torch_function__(func, types, args, kwargs or {})
        raise ValueError(
            f"Attempted to use an uninitialized parameter in {_called_name(func)}. This error "
            "happens when you are using a `LazyModule` or explicitly manipulating "
            f"`torch.nn.parameter.{cls.__name__}` objects. When using LazyModules Call "
            "`forward` with a dummy batch to initialize the parameters before calling torch "
            "functions")

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Give the placeholder an (uninitialised) array of `shape` and its final class."""
        if isinstance(shape, int):
            shape = (shape,)
        dt = dtype if dtype is not None else self._dtype
        self._data = np.empty(tuple(int(s) for s in shape), dtype=dt.np)
        self._dtype = dt
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError(
            "Can't access the shape of an uninitialized parameter or buffer. This error "
            "usually happens in `load_state_dict` when trying to load an uninitialized "
            "parameter into an initialized one. Call `forward` to initialize the parameters "
            "before accessing their attributes.")

    def share_memory_(self):
        raise RuntimeError(
            "Can't share memory on an uninitialized parameter or buffer. Call `forward` to "
            "initialize the parameters before calling `module.share_memory()`.")

    def __repr__(self) -> str:
        return f"<{self.__class__.__name__}>"

    def __reduce_ex__(self, proto):
        return (self.__class__, (self._rg,))


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A parameter of a lazy module before its first call; it becomes a Parameter."""

    __slots__ = ()
    cls_to_become = Parameter

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None):
        dt = dtype if dtype is not None else _dtype.defaults.float
        data = Tensor._make(np.empty((0,), dtype=dt.np), dt)
        return Parameter.__new__(cls, data, requires_grad)

    def __init__(self, requires_grad: bool = True, device=None, dtype=None):
        pass

    def __deepcopy__(self, memo):
        return type(self)(self._rg, dtype=self._dtype)


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer of a lazy module before its first call; it becomes a plain Tensor."""

    __slots__ = ()
    cls_to_become = Tensor

    def __new__(cls, requires_grad: bool = False, device=None, dtype=None):
        dt = dtype if dtype is not None else _dtype.defaults.float
        return cls._make(np.empty((0,), dtype=dt.np), dt)

    def __init__(self, requires_grad: bool = False, device=None, dtype=None):
        pass


class Buffer(Tensor):
    """A tensor that, assigned to a Module attribute, registers itself as a buffer
    (persistent or not); the module keeps it as a plain Tensor, as PyTorch does."""

    __slots__ = ("persistent",)

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True):
        if data is None:
            data = Tensor._make(np.empty((0,), dtype=_dtype.defaults.float.np))
        if isinstance(data, _meta.MetaTensor) and cls is Buffer:
            return _MetaBuffer.of(data, persistent)
        b = cls._make(data._data, data._dtype)
        b._vc = data._vc
        b.persistent = persistent
        # (always called, as PyTorch's Buffer does: refused inside a function transform)
        b.requires_grad_(data.requires_grad)
        return b

    def __init__(self, data: Tensor | None = None, *, persistent: bool = True):
        pass

    def _as_tensor(self) -> Tensor:
        """The plain tensor a module registers (same data and version counter)."""
        t = Tensor._make(self._data, self._dtype)
        t._vc = self._vc
        if self._rg:
            t._requires_grad_unguarded(True)
        return t


TENSOR_REPR_CLASSES.add(Buffer)


class _MetaBuffer(_meta.MetaTensor):
    """A Buffer on the meta device (what `Buffer(meta_tensor)` makes): a meta tensor that
    registers on Modules as buffers do. Named Tensor, as PyTorch's Buffer makes one."""

    __slots__ = ("persistent",)

    @classmethod
    def of(cls, data: Tensor, persistent: bool) -> _MetaBuffer:
        """The buffer holding meta tensor `data`'s geometry, version and requires_grad."""
        b = _meta.make(data.shape, data._dtype, data.stride(), data.storage_offset(), cls)
        b._vc = data._vc
        b.persistent = persistent
        # (always called, as PyTorch's Buffer does: refused inside a function transform)
        b.requires_grad_(data.requires_grad)
        return b

    def _as_tensor(self) -> Tensor:
        """The meta tensor a module registers (same geometry and version counter)."""
        t = _meta.make(self._fshape, self._dtype, self._fstrides, self._foffset)
        t._vc = self._vc
        if self._rg:
            t._requires_grad_unguarded(True)
        return t

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        t = self._as_tensor().detach().clone()
        memo[id(self)] = t
        return t

    def __reduce_ex__(self, protocol):
        return self._as_tensor().__reduce_ex__(protocol)



_MetaBuffer.__name__ = _MetaBuffer.__qualname__ = "Tensor"
