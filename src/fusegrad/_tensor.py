"""The Tensor: a NumPy array plus dtype, autograd state and a version counter.

Views share their base's array memory and its version counter (`_vc`, a one-element list
bumped by every in-place op). Op methods (`add`, `sum`, `view`, ...) are thin wrappers over
registry ops, attached from `fusegrad._functions`; this file holds the state, attributes,
conversions and autograd entry points.
"""

from __future__ import annotations

import warnings
import weakref

import numpy as np

from . import _dtype
from ._device import cpu as _cpu
from ._device import device as _device_cls
from ._shapes import (
    FORMAT_ORDERS,
    Size,
    contiguous_strides,
    elem_strides,
    is_format_contiguous,
    storage_offset,
    wrap_dim,
)
from ._thread_state import local as _grad_local
from ._type_names import python_type_name
from ._warn import warn_once
from .autograd import grad_mode as _grad_mode
from .autograd import graph as _graph
from .autograd.grad_mode import InferenceVersion

# PyTorch's warning (once per process) when `float()` or `complex()`, and so the math
# module's functions, take the value of a tensor that requires grad (`item()` and `int()`
# do not warn).
SCALAR_OF_GRAD = ("Converting a tensor with requires_grad=True to a scalar may lead to "
                  "unexpected behavior.\nConsider using tensor.detach() first.")

_ndarray = np.ndarray
_new = object.__new__

_T_WARNING = ("The use of `x.T` on tensors of dimension other than 2 to reverse their shape "
              "is deprecated and it will throw an error in a future release. Consider `x.mT` "
              "to transpose batches of matrices or `x.permute(*torch.arange(x.ndim - 1, -1, "
              "-1))` to reverse the dimensions of a tensor.")
_NONLEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
    "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. "
    "If you access the non-leaf Tensor by mistake, make sure you access the leaf Tensor "
    "instead. See github.com/pytorch/pytorch/pull/30531 for more information.")

_GRAD_DTYPE_ERROR = (
    "attempting to assign a gradient with dtype '{}' to a tensor with grad_dtype '{}'. The "
    "gradient must match the tensor's grad_dtype (defaults to the tensor's dtype). You can set "
    "the tensor's grad_dtype attribute with a specific dtype, or None to allow any dtype. Set "
    "grad_dtype with caution. Diverging the dtypes of a tensor and its gradient may break "
    "downstream systems that assume they match.")

# Called as hook(kind, tensor) when a tensor's values are read into a Python value (kind:
# "boolean", "number", "integer", "float", "list", "NumPy array") or its `.data` is taken
# ("data"); `jit.trace` warns through it and `vmap` refuses those of batched tensors. The
# list is empty except while a trace or a vmap runs, so a conversion pays one truth test.
CONVERSION_HOOKS: list = []


def _converted(kind: str, tensor) -> None:
    for hook in list(CONVERSION_HOOKS):
        hook(kind, tensor)


def _real_value(value, c_type: str):
    """A complex scalar as the real number it equals (PyTorch's error if it has an
    imaginary part); any other value as it is."""
    if value.__class__ is complex:
        if value.imag:
            raise RuntimeError(f"value cannot be converted to type {c_type} without overflow")
        return value.real
    return value


def is_int_argument(value) -> bool:
    """Whether PyTorch's argument parser reads `value` as an int: anything with `__index__`
    but a bool, a tensor only when it is a 0-d integer one (`x.size(torch.tensor(1))`)."""
    if isinstance(value, Tensor):
        dt = value._dtype
        return not value.ndim and not (dt.is_floating_point or dt.is_complex or
                                       dt is _dtype.bool_)
    return value.__class__ is not bool and hasattr(type(value), "__index__")


def int_list_error(value, name: str, param: str, position: int | None) -> TypeError | None:
    """PyTorch's parser's TypeError for `value` given by position (None: by keyword) for an
    `int[]` parameter (one int or a sequence of them), or None when it reads as one: a first
    element that is no int is named as an element of the tuple (by keyword: the sequence
    is named, `not list`), a later one as a failure to unpack it (where a bool is taken as
    an int)."""
    at = "" if position is None else f" (position {position})"
    where = f"{name}(): argument '{param}'{at} must be tuple of ints"
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            if i == 0 and not is_int_argument(item):
                if position is None:
                    return TypeError(f"{where}, not {python_type_name(value)}")
                return TypeError(f"{where}, but found element of type "
                                 f"{python_type_name(item)} at pos 0")
            if not hasattr(type(item), "__index__") or (
                    isinstance(item, Tensor) and not is_int_argument(item)):
                return TypeError(f"{name}(): argument '{param}' failed to unpack the object "
                                 f"at pos {i + 1} with error \"type must be tuple of ints,but "
                                 f"got {python_type_name(item)}\"")
        return None
    if not is_int_argument(value):
        return TypeError(f"{where}, not {python_type_name(value)}")
    return None


def _not_int_dim(name: str, dim) -> TypeError:
    """PyTorch's parser's error for `size(dim)` or `stride(dim)` given no int."""
    return TypeError(f"{name}(): argument 'dim' (position 1) must be int, not "
                     f"{python_type_name(dim)}")


class Tensor:
    """A multi-dimensional array that records operations for automatic differentiation."""

    # `_view_ver`, for views: the version their grad_fn was made at (negative: made under
    # no_grad, or a view of such a view: `_recording.view_version`).
    # No `__dict__`: an instance dict made Python's method lookups on tensors slower (2-4%
    # of a tiny op); a parameter keeps the attributes programs set on it beside it.
    __slots__ = ("_data", "_dtype", "_rg", "_grad_fn", "_grad", "_vc", "_base", "_view_ver",
                 "_output_nr", "_retains", "_hooks", "_grad_acc", "_post_acc_hooks",
                 "__weakref__")
    # Plain tensors take dispatch's fast path; FakeTensor and protocol subclasses do not.
    _plain = True
    __array_priority__ = 1000

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        from ._torch_function import note_subclass

        note_subclass(cls)

    def __init__(self, *args, **kwargs):
        # `torch.Tensor(2, 3)` (uninitialised float tensor) and `torch.Tensor([1, 2])` (data).
        from ._legacy_types import legacy_tensor_init

        legacy_tensor_init(self, *args, **kwargs)

    @classmethod
    def _make(cls, data: np.ndarray, dtype=None):
        """Wrap an array (no copy) as a tensor that does not require grad."""
        return make_plain(data, dtype, cls)

    def _shallow_copy(self):
        """A new tensor object with the same data, version counter and history."""
        t = _new(type(self))
        for slot in STATE_SLOTS:
            setattr(t, slot, getattr(self, slot))
        t._retains = False
        t._hooks = None
        t._grad = None
        t._post_acc_hooks = None
        return t

    def _take_geometry(self, other) -> None:
        """Adopt `other`'s view of the same storage (for metadata-only in-place ops)."""
        self._data = other._data

    # ------------------------------------------------------------ attributes

    @property
    def shape(self) -> Size:
        """The sizes of each dimension."""
        return Size(self._data.shape)

    def size(self, dim: int | None = None):
        """The shape, or the size of dimension `dim`."""
        if dim is None:
            return Size(self._data.shape)
        if dim.__class__ is not int and not is_int_argument(dim):
            raise _not_int_dim("size", dim)
        if not self._data.ndim:
            raise IndexError(f"dimension specified as {dim} but tensor has no dimensions")
        return self._data.shape[wrap_dim(dim, self._data.ndim)]

    @property
    def dtype(self) -> _dtype.dtype:
        """The element type."""
        return self._dtype

    @property
    def device(self) -> _device_cls:
        """Where the data lives (always the CPU for now)."""
        return _cpu

    @property
    def is_cuda(self) -> bool:
        """False: only CPU tensors exist."""
        return False

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return self._data.ndim

    def dim(self) -> int:
        """Number of dimensions."""
        return self._data.ndim

    ndimension = dim

    def numel(self) -> int:
        """Number of elements."""
        return self._data.size

    nelement = numel

    def element_size(self) -> int:
        """Bytes per element."""
        return self._dtype.itemsize

    def stride(self, dim: int | None = None):
        """Strides in elements, as PyTorch reports them."""
        st = elem_strides(self._data)
        if dim is None:
            return st
        if dim.__class__ is not int and not is_int_argument(dim):
            raise _not_int_dim("stride", dim)
        return st[wrap_dim(dim, len(st))]

    def storage_offset(self) -> int:
        """Offset of the first element in the underlying storage, in elements."""
        base = self._base
        if base is None or base._data is None:
            return storage_offset(self._data)
        delta = (self._data.__array_interface__["data"][0]
                 - base._data.__array_interface__["data"][0])
        return delta // self._dtype.itemsize + storage_offset(base._data)

    def is_contiguous(self, memory_format=None) -> bool:
        """True when the elements are laid out row-major without gaps (or densely in
        `memory_format`'s order: `torch.channels_last` is N, H, W, C)."""
        name = getattr(memory_format, "name", None)
        if name in FORMAT_ORDERS:
            return is_format_contiguous(self.shape, self.stride(), name)
        if 0 in self.shape:  # (as PyTorch: an empty tensor is, whatever its strides)
            return True
        expected = contiguous_strides(self.shape)
        return all(s == 1 or a == b for s, a, b in zip(self.shape, self.stride(), expected))

    def is_floating_point(self) -> bool:
        """True for floating dtypes."""
        return self._dtype.category == _dtype.FLOAT

    def is_complex(self) -> bool:
        """True for complex dtypes."""
        return self._dtype.category == _dtype.COMPLEX

    @property
    def is_leaf(self) -> bool:
        """True for tensors not produced by a recorded operation."""
        if self._base is not None:
            _sync_view(self)
        return self._grad_fn is None

    def _is_view(self) -> bool:
        """True for a tensor made as a view of another (it has a `_base`), as PyTorch's."""
        return self._base is not None

    @property
    def grad_fn(self):
        """The Node that produced this tensor, or None for leaves."""
        if self._base is not None:
            _sync_view(self)
        return self._grad_fn

    @property
    def requires_grad(self) -> bool:
        """Whether gradients are computed for this tensor."""
        # (a view made under no_grad keeps its flag: PyTorch answers it even once the view's
        # history is invalid)
        if self._base is not None and (ver := self._view_ver) is not None and ver >= 0:
            _sync_view(self)
        return self._rg

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self._set_requires_grad(
            value, "only Tensors of floating point and complex dtype can require gradients")

    def _set_requires_grad(self, value, message: str) -> None:
        value = bool(value)
        if self._grad_fn is not None:
            if not value:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want to "
                    "use a computed variable in a subgraph that doesn't require differentiation "
                    "use var_no_grad = var.detach().")
            return
        if value and self._dtype.category < _dtype.FLOAT:
            raise RuntimeError(message)
        if value and self._vc.__class__ is InferenceVersion and not _grad_local.inference:
            raise RuntimeError("Setting requires_grad=True on inference tensor outside "
                               "InferenceMode is not allowed.")
        self._rg = value

    @property
    def grad(self):
        """The accumulated gradient (leaves, and non-leaves that `retain_grad()`)."""
        if self._grad_fn is not None and not self._retains and self._grad is None:
            warnings.warn(_NONLEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                # PyTorch names the C type ("type int", "type numpy.ndarray")
                from ._type_names import python_type_name

                raise TypeError(
                    f"assigned grad expected to be a Tensor or None but got grad of type "
                    f"{python_type_name(value)}")
            # PyTorch 2.13 checks the dtype first, so a gradient wrong in both is told of
            # its dtype. (grad_dtype, which can relax this, is not modelled: it is always
            # the tensor's dtype here.)
            if value._dtype is not self._dtype:
                raise RuntimeError(_GRAD_DTYPE_ERROR.format(
                    value._dtype.cpp, self._dtype.legacy))
            if tuple(value.shape) != tuple(self.shape):
                raise RuntimeError(
                    f"attempting to assign a gradient of size '{list(value.shape)}' to a tensor "
                    f"of size '{list(self.shape)}'. Please ensure that the gradient and the "
                    "tensor are the same size".replace(", ", ", "))
        self._grad = value

    @grad.deleter
    def grad(self) -> None:
        self._grad = None

    @property
    def retains_grad(self) -> bool:
        """True for a non-leaf on which `retain_grad()` was called."""
        return self._retains

    @property
    def data(self):
        """This tensor's data as a new tensor outside autograd (no shared version counter;
        an inference tensor's is one too)."""
        if CONVERSION_HOOKS:
            _converted("data", self)
        t = Tensor._make(self._data, self._dtype)
        if self._vc.__class__ is InferenceVersion:
            t._vc = InferenceVersion((0,))
        return t

    @data.setter
    def data(self, value) -> None:
        if not isinstance(value, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(value).__name__}")
        if self._rg and not (value._dtype.is_floating_point or value._dtype.is_complex):
            raise RuntimeError("data set to a tensor that requires gradients must be floating "
                               "point or complex dtype")
        if value._data is None and self._data is not None:  # (a meta or fake tensor)
            raise RuntimeError(INCOMPATIBLE_DATA)
        if value._dtype is not self._dtype:
            # Another dtype: the next use makes a new AccumulateGrad, as PyTorch's does (a
            # new shape keeps it, and its recorded shape, also as in PyTorch).
            self._grad_acc = None
        self._data = value._data
        self._dtype = value._dtype

    @property
    def output_nr(self) -> int:
        """Which output of its `grad_fn` this tensor is (0 for a leaf)."""
        return self._output_nr

    @property
    def _version(self) -> int:
        vc = self._vc
        if vc.__class__ is InferenceVersion:
            raise RuntimeError("Inference tensors do not track version counter.")
        return vc[0]

    @property
    def T(self):  # noqa: N802
        """Dimensions reversed (`permute`); deprecated by PyTorch on other than 2-D tensors,
        with its warning."""
        n = self.ndim
        if n != 2:  # (once per process each, as PyTorch's)
            warn_once(_T_WARNING if n else "Tensor.T is deprecated on 0-D tensors. This "
                      "function is the identity in these cases.")
        return self.permute(tuple(range(n - 1, -1, -1)))

    @property
    def mT(self):  # noqa: N802
        """The last two dimensions swapped (a 0-D tensor itself, with PyTorch's deprecation
        warning)."""
        if self.ndim < 2:
            if self.ndim == 0:
                from ._torch_function import warn_once_at

                warn_once_at(2, "Tensor.mT is deprecated on 0-D tensors. This function is the "
                             "identity in these cases.")
                return self
            raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices. "
                               f"Got {self.ndim}-D tensor.")
        return self.transpose(-2, -1)

    @property
    def H(self):  # noqa: N802
        """Conjugate transpose of a matrix (the transpose, for real dtypes)."""
        nd = self.ndim
        if nd != 2 and nd != 0:
            raise RuntimeError(
                f"tensor.H is only supported on matrices (2-D tensors). Got {nd}-D tensor."
                + (" For batches of matrices, consider using tensor.mH" if nd > 2 else ""))
        return self._adjoint("Tensor.H")

    @property
    def mH(self):  # noqa: N802
        """Conjugate transpose of the last two dimensions (the transpose, for real dtypes)."""
        if self.ndim == 1:
            raise RuntimeError("tensor.mH is only supported on matrices or batches of matrices. "
                               "Got 1-D tensor.")
        return self._adjoint("Tensor.mH")

    def _adjoint(self, what: str):
        """`transpose(-2, -1)` then `conj` (PyTorch records TransposeBackward0 and, for complex
        dtypes only, ConjBackward0 over it); a 0-D tensor, which PyTorch still accepts with a
        deprecation warning, is only conjugated. Callers have refused 1-D tensors."""
        if self.ndim == 0:
            from ._torch_function import warn_once_at

            # Named at the user's line, past this method and the property or function.
            warn_once_at(3, f"{what} is deprecated on 0-D tensors. Consider using x.conj().")
            return self.conj()
        t = self.transpose(-2, -1)
        # A real tensor's conj is itself: only complex dtypes pay for the conjugate.
        return t.conj() if self._dtype.is_complex else t

    # ------------------------------------------------------------ conversions

    def _data_dependent(self, what: str) -> np.ndarray:
        return self._data

    def item(self):
        """The value of a one-element tensor as a Python number."""
        if CONVERSION_HOOKS:
            _converted("number", self)
        return self._item()

    def _item(self):
        data = self._data_dependent("item")
        if data.size != 1:
            raise RuntimeError(
                f"a Tensor with {data.size} elements cannot be converted to Scalar")
        return data.reshape(()).item() if self._dtype.name != "bfloat16" else float(
            data.reshape(()))

    def tolist(self):
        """The data as (nested) Python lists of numbers."""
        if CONVERSION_HOOKS:
            _converted("list", self)
        data = self._data_dependent("tolist")
        if self._dtype.name == "bfloat16":
            data = data.astype(np.float32)
        return data.tolist()

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The data as a NumPy array sharing memory."""
        # as in PyTorch, refused only while grad mode is on: under no_grad the array cannot
        # feed a recorded graph
        if self._rg and not force and _grad_local.grad_mode:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                "instead.")
        if CONVERSION_HOOKS:
            _converted("NumPy array", self)
        return self._data_dependent("numpy")

    def __array__(self, dtype=None, copy=None):
        if self._rg and _grad_local.grad_mode:
            self.numpy()  # raises PyTorch's error: NumPy may not read a tensor requiring grad
        data = self._data_dependent("__array__")
        if dtype is not None:
            return data.astype(dtype)
        # `np.array(t)` asks for a copy (NumPy 2 passes copy=True and trusts the answer);
        # `np.asarray(t)` shares the memory, as with PyTorch's tensors.
        return data.copy() if copy else data

    def __dlpack__(self, *, stream=-1, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule of the tensor's memory (`np.from_dlpack(t)`,
        `torch.from_dlpack(t)` read it without a copy); PyTorch's error for a tensor that
        requires grad."""
        if self._rg:
            raise BufferError("Can't export tensors that require gradient, use "
                              "tensor.detach()")
        data = self._data_dependent("__dlpack__")
        if max_version is None:
            return data.__dlpack__()
        return data.__dlpack__(max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> tuple:
        """(device type, index) as DLPack numbers them: (1, 0), the CPU."""
        return self._data_dependent("__dlpack_device__").__dlpack_device__()

    def __array_wrap__(self, array, context=None, return_scalar=False):
        """NumPy's result of a ufunc on this tensor (`x * array` computed by NumPy), as a
        tensor sharing its memory; a bool result becomes uint8, as in PyTorch."""
        array = np.asarray(array)
        return Tensor._make(array.astype(np.uint8) if array.dtype == np.bool_ else array)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __contains__(self, element) -> bool:
        """`element in t`: whether any entry equals the number or tensor `element`."""
        if isinstance(element, (Tensor, int, float, complex)):  # bool is an int
            return bool((self == element).any())
        raise RuntimeError("Tensor.__contains__ only supports Tensor or scalar, but you passed "
                           f"in a {type(element)}.")

    def __iter__(self):
        if self.dim() == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __bool__(self) -> bool:
        if CONVERSION_HOOKS:
            _converted("boolean", self)
        data = self._data_dependent("bool")
        if data.size != 1:
            what = "no values" if data.size == 0 else "more than one value"
            raise RuntimeError(f"Boolean value of Tensor with {what} is ambiguous")
        return bool(data.reshape(()))

    def _scalar(self):
        if self.numel() != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return self._item()

    def __float__(self) -> float:
        if CONVERSION_HOOKS:
            _converted("float", self)
        if self.requires_grad:
            warn_once(SCALAR_OF_GRAD)
        return float(_real_value(self._scalar(), "double"))

    def __int__(self) -> int:
        if CONVERSION_HOOKS:
            _converted("integer", self)
        return int(_real_value(self._scalar(), "int64_t"))

    def __index__(self) -> int:
        # (a bool tensor is an integer here, as in PyTorch: `[10, 20][t > 0]`)
        if self._dtype.category > _dtype.INT or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an "
                            "index")
        if CONVERSION_HOOKS:
            _converted("integer", self)
        return int(self._item())

    def __complex__(self) -> complex:
        if self.requires_grad:
            warn_once(SCALAR_OF_GRAD)
        return complex(self._scalar())

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self, *, tensor_contents=None) -> str:
        suffixes = []
        invalid = False
        if self._base is not None:  # a view shows its current history, as `grad_fn` gives it
            try:
                _sync_view(self)
            except RuntimeError:  # a view made under no_grad whose storage changed since
                invalid = True
        if invalid:
            suffixes.append("grad_fn=<Invalid>")
        elif self._grad_fn is not None:
            name = type(self._grad_fn).__name__
            if name == "CppFunction":  # (a node without a class of its own: its C++ name)
                name = self._grad_fn.name().rpartition("::")[2]
            suffixes.append(f"grad_fn=<{name}>")
        elif self._rg:
            suffixes.append("requires_grad=True")
        if tangent_lookup is not None:  # at an open forward AD level
            tangent = tangent_lookup(self)
            if tangent is not None:
                suffixes.append(f"tangent={tangent}")
        cls = type(self)
        prefix = "tensor(" if cls in TENSOR_REPR_CLASSES else f"{cls.__name__}("
        from ._printing import format_tensor  # loaded on the first repr, not by the import

        return format_tensor(self._data, self._dtype.name, _dtype.defaults.float.name,
                             suffixes, prefix)

    # No `__str__`: `object.__str__` calls the class's `__repr__`, a subclass's own included.

    def __format__(self, spec: str) -> str:
        if self.ndim == 0:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def __reduce_ex__(self, protocol):
        args = (np.array(self._data), self._dtype.name, self._rg)
        if type(self) is Tensor:
            return (rebuild_tensor, args)
        from ._torch_function import rebuild_subclass  # the class and its attributes too

        return (rebuild_subclass, (type(self), args, dict(getattr(self, "__dict__", {}))))

    def _check_deepcopy(self) -> None:
        """PyTorch's refusal to deepcopy a tensor with history."""
        if not self.is_leaf:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the "
                "deepcopy protocol at the moment.  If you were attempting to deepcopy a module, "
                "this may be because of a torch.nn.utils.weight_norm usage, see "
                "https://github.com/pytorch/pytorch/pull/103001")

    def __deepcopy__(self, memo):
        self._check_deepcopy()
        t = Tensor._make(self._data.copy(), self._dtype)
        t._rg = self._rg
        if self._grad is not None:
            t._grad = self._grad.__deepcopy__(memo)
        memo[id(self)] = t
        return t

    # ------------------------------------------------------------ dtype and device

    def to(self, *args, **kwargs):
        """Convert dtype and/or device, as PyTorch's overloads read the arguments:
        `to(device=None, dtype=None, non_blocking=False, copy=False, *, memory_format=None)`,
        `to(dtype, ...)` or `to(other, ...)` (a tensor, or a number standing for one)."""
        if not kwargs and len(args) == 1 and args[0].__class__ is _dtype.dtype:
            dtype = args[0]  # (the common call, bound without the parser)
            if dtype is self._dtype:
                return self
            from ._functions import to_copy

            return to_copy(self, dtype)
        from ._functions._args import to_arguments

        device, dtype, copy, memory_format = to_arguments(args, kwargs)
        if device is not None:
            device = _device_cls(device)
            device._check_available()
            if device.type == "meta":
                from ._meta import from_tensor

                return from_tensor(self, dtype)
        if memory_format is not None and getattr(memory_format, "name", "") != "preserve_format":
            # Self when it suggests that format already (as PyTorch: even if not contiguous
            # in it), else a copy with the format's strides, converted as it is copied.
            from ._functions import clone, to_copy
            from ._shapes import dense_strides, suggest_format

            name = memory_format.name
            shape, strides = tuple(self.shape), tuple(self.stride())
            if dtype is None or dtype is self._dtype:
                if not copy and suggest_format(shape, strides) == (
                        None if name == "contiguous_format" else name):
                    return self
                return clone(self, memory_format=memory_format)
            if name in FORMAT_ORDERS and len(shape) != len(FORMAT_ORDERS[name]):
                return clone(self, memory_format=memory_format)  # (PyTorch's rank error)
            t = to_copy(self, dtype)
            want = dense_strides(shape, FORMAT_ORDERS[name]) if name in FORMAT_ORDERS else \
                contiguous_strides(shape)
            return t if tuple(t.stride()) == want else clone(t, memory_format=memory_format)
        if dtype is None or dtype is self._dtype:
            return self.clone() if copy else self
        from ._functions import to_copy

        return to_copy(self, dtype)

    def type(self, *args, **kwargs):
        """`type(dtype=None, non_blocking=False, *, memory_format=None)`: the legacy type name
        (`torch.FloatTensor`), or a conversion to `dtype`: a dtype, a typed class
        (`fusegrad.DoubleTensor`) or its name (`"torch.DoubleTensor"`)."""
        from ._legacy_types import legacy_type_arguments

        dtype = legacy_type_arguments(args, kwargs)
        if dtype is None:
            return f"torch.{'sparse.' if self.is_sparse else ''}{self._dtype.legacy}Tensor"
        return self.to(dtype)

    def type_as(self, other):
        """This tensor converted to `other`'s dtype."""
        if not isinstance(other, Tensor):
            from ._functions._args import not_a_tensor

            raise not_a_tensor(other, "type_as", "other", 1)
        return self.to(other.dtype)

    def cpu(self, memory_format=None):
        """This tensor (already on the CPU)."""
        return self

    def cuda(self, device=None, non_blocking=False, memory_format=None):
        """Not available: no CUDA backend exists yet."""
        _device_cls("cuda")._check_available()

    def float(self, memory_format=None):
        """Converted to float32."""
        return self.to(_dtype.float32)

    def double(self, memory_format=None):
        """Converted to float64."""
        return self.to(_dtype.float64)

    def half(self, memory_format=None):
        """Converted to float16."""
        return self.to(_dtype.float16)

    def bfloat16(self, memory_format=None):
        """Converted to bfloat16."""
        return self.to(_dtype.bfloat16)

    def long(self, memory_format=None):
        """Converted to int64."""
        return self.to(_dtype.int64)

    def int(self, memory_format=None):
        """Converted to int32."""
        return self.to(_dtype.int32)

    def short(self, memory_format=None):
        """Converted to int16."""
        return self.to(_dtype.int16)

    def char(self, memory_format=None):
        """Converted to int8."""
        return self.to(_dtype.int8)

    def byte(self, memory_format=None):
        """Converted to uint8."""
        return self.to(_dtype.uint8)

    def bool(self, memory_format=None):
        """Converted to bool."""
        return self.to(_dtype.bool_)

    # ------------------------------------------------------------ autograd

    def detach(self):
        """A tensor sharing data and version counter, outside the graph."""
        t = Tensor._make(self._data, self._dtype)
        t._vc = self._vc  # shares storage and version, but is not a view for autograd
        return t

    def detach_(self):
        """Detach this tensor from the graph in place, making it a leaf."""
        if self._base is not None and self._base._rg:
            raise RuntimeError(
                "Can't detach views in-place. Use detach() instead. If you are using "
                "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is set "
                "as True, gradients are views of DDP buckets, and hence detach_() cannot be "
                "called on these gradients. To fix this error, please refer to the "
                "Optimizer.zero_grad() function in torch/optim/optimizer.py as the solution.")
        self._grad_fn = None
        self._rg = False
        self._output_nr = 0
        return self

    def _detached_copy(self):
        t = Tensor._make(self._data.copy(), self._dtype)
        return t

    def requires_grad_(self, requires_grad: bool = True):
        """Set `requires_grad` in place; returns self."""
        if _grad_local.transforms and _refuses_requires_grad(_grad_local.transforms):
            raise RuntimeError(_REQUIRES_GRAD_UNDER_TRANSFORM)
        self._set_requires_grad(
            requires_grad, "only Tensors of floating point dtype can require gradients")
        return self

    def _requires_grad_unguarded(self, requires_grad: bool = True):
        """`requires_grad_` without the refusal under a function transform: the spelling of
        fusegrad's own code (transforms' leaves, factories' `requires_grad=True`)."""
        self._set_requires_grad(
            requires_grad, "only Tensors of floating point dtype can require gradients")
        return self

    def retain_grad(self) -> None:
        """Populate `.grad` of this non-leaf tensor during backward."""
        if not self._rg:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._grad_fn is None or self._retains:
            return
        self._grad_fn._extras().retains_grad[self._output_nr] = weakref.ref(self)
        self._retains = True

    def register_hook(self, hook):
        """Call `hook(grad)` when this tensor's gradient is computed; it may return a new one."""
        if not self._rg:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._grad_fn is None:
            if self._hooks is None:
                self._hooks = {0: {}}
            return _graph._add_hook(self._hooks[0], hook)
        hooks = self._grad_fn._extras().tensor_pre_hooks
        return _graph._add_hook(hooks.setdefault(self._output_nr, {}), hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Call `hook(tensor)` after gradient is accumulated into this leaf's `.grad`."""
        if self._grad_fn is not None:
            raise RuntimeError(
                "post accumulate grad hooks cannot be registered on non-leaf tensors")
        if self._post_acc_hooks is None:
            self._post_acc_hooks = {}
        return _graph._add_hook(self._post_acc_hooks, hook)

    def _grad_accumulator(self):
        """This leaf's AccumulateGrad node (one per leaf while the graph holds it)."""
        ref = self._grad_acc
        node = ref() if ref is not None else None
        if node is None:
            node = _graph.new_accumulator(self)
        return node

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Compute the gradient of this tensor w.r.t. the graph leaves."""
        (_backward or _load_backward())(self, gradient, retain_graph, create_graph,
                                         inputs=inputs)


_REQUIRES_GRAD_UNDER_TRANSFORM = (
    "You are attempting to call Tensor.requires_grad_() (or perhaps using "
    "torch.autograd.functional.* APIs) inside of a function being transformed by a functorch "
    "transform. This is unsupported, please attempt to use the functorch transforms (e.g. "
    "grad, vjp, jacrev, jacfwd, hessian) or call requires_grad_() outside of a function being "
    "transformed instead.")


def _refuses_requires_grad(transforms: tuple) -> bool:
    """Whether a running transform refuses `Tensor.requires_grad_()`: all do but
    `linearize`, whose function PyTorch traces outside any transform."""
    return any(getattr(t, "refuses_requires_grad", True) for t in transforms)


_FROM_NP = _dtype.FROM_NP
# Classes whose repr opens with `tensor(`; other subclasses print their own name, as PyTorch.
TENSOR_REPR_CLASSES = {Tensor}
# A tensor's own state: every slot but the weak-reference list.
INCOMPATIBLE_DATA = ("Attempted to call `variable.set_data(tensor)`, but `variable` and "
                     "`tensor` have incompatible tensor type.")
# `autograd.forward_ad.tangent_of` while a forward AD level is open (reprs show tangents).
tangent_lookup = None


def use_tangent_lookup(lookup) -> None:
    """Registration by `autograd.forward_ad`: how a repr finds a tensor's tangent (None once
    the level closes)."""
    global tangent_lookup
    tangent_lookup = lookup


STATE_SLOTS = tuple(s for s in Tensor.__slots__ if s != "__weakref__")


def tensors_in(values) -> list:
    """The tensors among `values`, looking into nested lists and tuples, in order."""
    out = []
    for v in values:
        if isinstance(v, Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out += tensors_in(v)
    return out


def make_plain(data: np.ndarray, dtype=None, cls: type = Tensor) -> Tensor:
    """Wrap an array (no copy) as a `cls` tensor that does not require grad. The hot paths
    (dispatch, the engine) call it directly: a function skips binding `Tensor._make`."""
    t = _new(cls)
    t._data = data
    t._dtype = dtype or _FROM_NP[data.dtype]
    t._rg = False
    t._grad_fn = None
    t._grad = None
    t._vc = [0]
    t._base = None
    t._view_ver = None
    t._output_nr = 0
    t._retains = False
    t._hooks = None
    t._grad_acc = None
    t._post_acc_hooks = None
    if _on_new is not None:  # a component watches new tensors (`watch_new_tensors`)
        _on_new(t)
    return t


def rebuild_tensor(data: np.ndarray, dtype_name: str, requires_grad: bool) -> Tensor:
    """Unpickle a tensor written by `Tensor.__reduce_ex__`."""
    t = Tensor._make(_dtype.own_instance(data), _dtype.BY_NAME[dtype_name])
    if requires_grad:
        t._set_requires_grad(
            True, "Only Tensors of floating point and complex dtype can require gradients")
    return t


def inference_tensor(t) -> bool:
    """Whether `t` is an inference tensor (see `InferenceVersion`)."""
    return t._vc.__class__ is InferenceVersion


# The function every tensor made by the hot paths is given to while some component watches
# new tensors (storage accounting, inference mode in some thread), else None: the paths pay
# one global read while nothing watches. `watch_new_tensors` composes the watchers.
_on_new = None
_watchers: dict = {}


def watch_new_tensors(name: str, fn) -> None:
    """Registration by the components above Tensor that watch every new tensor
    (`fusegrad._memory`'s storage accounting, `inference_mode`): `fn(tensor)` is called with
    each new tensor from now on, under `name`; None stops that watcher."""
    global _on_new
    if fn is None:
        _watchers.pop(name, None)
    else:
        _watchers[name] = fn
    fns = tuple(_watchers.values())
    if not fns:
        _on_new = None
    elif len(fns) == 1:
        _on_new = fns[0]
    else:
        def _on_new(t, fns=fns):
            for fn in fns:
                fn(t)


_grad_mode.use_new_tensor_watch(watch_new_tensors)
_sync_view = None  # fusegrad._dispatch.sync_view, given by `use_view_sync`
_backward = None  # fusegrad.autograd.backward, once `Tensor.backward` has run


def _load_backward():
    """fusegrad.autograd's `backward`, which sits above Tensor and loads on first use: kept
    here after the first call (an import statement per call cost ~1 us, once a step)."""
    global _backward
    from .autograd._grad import backward

    _backward = backward
    return backward


def use_view_sync(sync_view) -> None:
    """Registration by fusegrad._dispatch, which sits above Tensor: the function that gives a
    view whose base changed in place its new history (the history properties call it)."""
    global _sync_view
    _sync_view = sync_view


_graph.register_tensor_class(Tensor)
