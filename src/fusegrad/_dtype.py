"""dtypes, PyTorch's type promotion, and the default dtype.

A `dtype` wraps the NumPy dtype that stores its values. Promotion follows PyTorch, not NumPy:
operands are ranked by kind (dimensioned tensors, then 0-d tensors, then Python numbers) and a
lower-ranked operand only changes the result when it belongs to a higher category
(bool < integer < floating < complex). So `int64 tensor * 2.5` is float32 and `float32 tensor
+ float64 0-d tensor` stays float32.
"""

from __future__ import annotations

import numbers
import sys

import numpy as np

from . import _type_names

BOOL, INT, FLOAT, COMPLEX = 0, 1, 2, 3
# Quantized dtypes (`qint8`, ...) rank below every other category: no promotion, no gradients.
QUANTIZED = -1
# Categories at or above FLOAT are differentiable (`category >= FLOAT`: one comparison on the
# recording path whether the tensor is real or complex).


# The C++ name of each dtype's element type as PyTorch's messages print it (its TypeMeta
# name: `float`, `long int`, `c10::Half`).
_CPP_NAMES = {
    "float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
    "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
    "uint8": "unsigned char", "uint16": "short unsigned int", "bool": "bool",
    "complex64": "c10::complex<float>", "complex128": "c10::complex<double>",
    "qint8": "c10::qint8", "quint8": "c10::quint8", "qint32": "c10::qint32",
    "quint4x2": "c10::quint4x2"}


# The element types that still have a legacy tensor class (`torch.FloatTensor`); PyTorch's
# checks name every other type by its dispatch name (`CPUBoolType`).
_LEGACY_CLASSES = frozenset(("Byte", "Char", "Short", "Int", "Long", "Half", "Float", "Double"))


class dtype:
    """A tensor element type, printed as PyTorch prints it (`torch.float32`)."""

    __slots__ = ("name", "np", "category", "itemsize", "is_signed", "legacy", "cpp")

    def __init__(self, name: str, np_dtype, category: int, legacy: str):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.category = category
        self.itemsize = self.np.itemsize
        self.is_signed = name not in ("uint8", "uint16", "bool")
        self.legacy = legacy  # the old tensor type name PyTorch uses in some messages
        self.cpp = _CPP_NAMES[name]  # its C++ element type's name, in other messages

    @property
    def tensor_type_name(self) -> str:
        """The type of a CPU tensor of this dtype as PyTorch's checks name it:
        `torch.FloatTensor`, or `CPUBoolType` where no legacy class exists."""
        legacy = self.legacy
        return f"torch.{legacy}Tensor" if legacy in _LEGACY_CLASSES else f"CPU{legacy}Type"

    @property
    def is_floating_point(self) -> bool:
        """True for float16, bfloat16, float32 and float64."""
        return self.category == FLOAT

    @property
    def is_complex(self) -> bool:
        """True for complex64 and complex128."""
        return self.category == COMPLEX

    def to_real(self) -> dtype:
        """The real dtype of a complex one's components; any other dtype itself."""
        return _TO_REAL.get(self, self)

    def to_complex(self) -> dtype:
        """The complex dtype whose components have this floating dtype (float32 ->
        complex64); a complex dtype itself."""
        if self.category == COMPLEX:
            return self
        try:
            return _TO_COMPLEX[self]
        except KeyError:
            raise RuntimeError(f"Unsupported dtype {self.legacy}") from None

    def __repr__(self) -> str:
        return "torch." + self.name

    def __reduce__(self):
        return (_lookup, (self.name,))


class _ExtensionDtype(dtype):
    """A dtype whose NumPy type comes from `ml_dtypes`, imported on the first use of `.np`
    (making a value, or reading the NumPy dtype): the import costs about a second, and
    most programs never touch bfloat16. The object itself exists from the start, so
    `fusegrad.bfloat16`, isinstance, pickling and promotion work without it."""

    __slots__ = ()

    def __init__(self, name: str, itemsize: int, category: int, legacy: str):
        self.name = name
        self.category = category
        self.itemsize = itemsize
        self.is_signed = True
        self.legacy = legacy
        self.cpp = _CPP_NAMES[name]

    @property
    def np(self):
        """The NumPy dtype that stores the values (imports `ml_dtypes` the first time)."""
        try:
            return _NP_SLOT.__get__(self, dtype)
        except AttributeError:
            _load_ml_dtypes()
            return _NP_SLOT.__get__(self, dtype)


_NP_SLOT = dtype.np  # the slot descriptor under the property, set once ml_dtypes is loaded


float16 = dtype("float16", np.float16, FLOAT, "Half")
# A dtype to programs that print its class (`type(torch.bfloat16)`), as PyTorch's is one.
_ExtensionDtype.__name__ = _ExtensionDtype.__qualname__ = "dtype"
_ExtensionDtype.__module__ = "fusegrad"
bfloat16 = _ExtensionDtype("bfloat16", 2, FLOAT, "BFloat16")
float32 = dtype("float32", np.float32, FLOAT, "Float")
float64 = dtype("float64", np.float64, FLOAT, "Double")
int8 = dtype("int8", np.int8, INT, "Char")
int16 = dtype("int16", np.int16, INT, "Short")
int32 = dtype("int32", np.int32, INT, "Int")
int64 = dtype("int64", np.int64, INT, "Long")
uint8 = dtype("uint8", np.uint8, INT, "Byte")
# PyTorch's uint16 is a storage-only dtype with few kernels and no promotion to other dtypes;
# it exists here so checkpoints holding uint16 tensors load.
uint16 = dtype("uint16", np.uint16, INT, "UInt16")
bool_ = dtype("bool", np.bool_, BOOL, "Bool")
complex64 = dtype("complex64", np.complex64, COMPLEX, "ComplexFloat")
complex128 = dtype("complex128", np.complex128, COMPLEX, "ComplexDouble")


class _QuantizedDtype(dtype):
    """A quantized element type (`qint8`, ...). Only quantized tensors (`_quantized.py`)
    hold one, storing the integer representation in `storage` (int8, uint8, int32); `.np`
    raises PyTorch's error, so that no factory or conversion makes a plain tensor of it."""

    __slots__ = ("storage",)

    def __init__(self, name: str, storage, legacy: str):
        self.name = name
        self.storage = np.dtype(storage)
        self.category = QUANTIZED
        self.itemsize = self.storage.itemsize
        self.is_signed = self.storage.kind == "i"
        self.legacy = legacy
        self.cpp = _CPP_NAMES[name]

    @property
    def np(self):
        """Refused: a quantized tensor is made by `quantize_per_tensor` and its kin."""
        raise RuntimeError("empty_strided not supported on quantized tensors yet see "
                           "https://github.com/pytorch/pytorch/issues/74540")


_QuantizedDtype.__name__ = _QuantizedDtype.__qualname__ = "dtype"
_QuantizedDtype.__module__ = "fusegrad"
# Not in `ALL` nor `FROM_NP` (an int8 array is an int8 tensor); `BY_NAME` finds them.
qint8 = _QuantizedDtype("qint8", np.int8, "QInt8")
quint8 = _QuantizedDtype("quint8", np.uint8, "QUInt8")
qint32 = _QuantizedDtype("qint32", np.int32, "QInt32")
quint4x2 = _QuantizedDtype("quint4x2", np.uint8, "QUInt4x2")  # one value per byte here
QUANTIZED_DTYPES = (qint8, quint8, qint32, quint4x2)

ALL = (float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8, uint16, bool_,
       complex64, complex128)
_TO_REAL = {complex64: float32, complex128: float64}
_TO_COMPLEX = {float32: complex64, float64: complex128}
BY_NAME = {d.name: d for d in ALL + QUANTIZED_DTYPES}
# The dtypes with a legacy storage class (`torch.FloatStorage`: the legacy name + "Storage").
LEGACY_STORAGE = ("uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
                  "bool", "bfloat16", "complex64", "complex128")
# PyTorch's aliases (torch.float, torch.half, torch.long, ...).
ALIASES = {"half": float16, "float": float32, "double": float64, "short": int16,
           "int": int32, "long": int64, "cfloat": complex64, "cdouble": complex128}
# Python's number types, which PyTorch takes wherever it takes a dtype (`dtype=float` is
# float64, as NumPy reads it, not the default float dtype).
PYTHON_TYPES = {float: float64, int: int64, bool: bool_, complex: complex128}


def as_dtype(d):
    """`d`, or the dtype a Python number type given for one stands for (`float`: float64,
    `int`: int64, `bool`: bool, `complex`: complex128); anything else unchanged, for the
    caller's own checks."""
    if d.__class__ is type:
        return PYTHON_TYPES.get(d, d)
    return d


_EXTENSION = (bfloat16,)
_EXTENSION_NAMES = frozenset(d.name for d in _EXTENSION)
# NumPy dtype -> fusegrad dtype; a plain dict, read on the hot path. The ml_dtypes entries
# join when ml_dtypes is loaded (`_load_ml_dtypes`); `from_numpy_dtype`, which arrays from
# outside pass through, loads them for an ml_dtypes array the program made itself.
FROM_NP = {d.np: d for d in ALL if d not in _EXTENSION}
# The half-width floating NumPy dtypes (computed in float32); ml_dtypes' join when loaded.
HALF_NP = [np.dtype(np.float16)]


def _load_ml_dtypes() -> None:
    """Import ml_dtypes and give the extension dtypes their NumPy types (once)."""
    import ml_dtypes

    for d in _EXTENSION:
        try:
            _NP_SLOT.__get__(d, dtype)
            continue
        except AttributeError:
            pass
        np_dtype = np.dtype(getattr(ml_dtypes, d.name))
        _NP_SLOT.__set__(d, np_dtype)
        FROM_NP[np_dtype] = d
        if d.itemsize == 2:
            HALF_NP.append(np_dtype)


if "ml_dtypes" in sys.modules:  # already paid for by the program: no reason to wait
    _load_ml_dtypes()


def _lookup(name: str) -> dtype:
    return BY_NAME[name]


def own_instance(a: np.ndarray) -> np.ndarray:
    """`a`, or a view of it (the same memory) whose dtype is NumPy's own instance of its
    type (`dtype.np`). An array that came through pickle (a DataLoader worker's batch, a
    pickled tensor, a compiled graph's cached constants) carries an equal but separate
    dtype object, which NumPy's operations pass on to their results; fusegrad's kernels
    recognise their common cases by identity (`dt is float32`), so every op downstream of
    such an array took its general path, and products went to OpenBLAS instead of the
    float32 kernel of `ops/_sgemm.py` (other bits than the same program fed in-process)."""
    dt = a.dtype
    d = FROM_NP.get(dt)
    if d is None or d.np is dt:
        return a
    return a.view(d.np)


def from_numpy_dtype(np_dtype) -> dtype:
    """The fusegrad dtype that stores its values as `np_dtype`; TypeError for others."""
    np_dtype = np.dtype(np_dtype)
    try:
        return FROM_NP[np_dtype]
    except KeyError:
        if np_dtype.name in _EXTENSION_NAMES and "ml_dtypes" in sys.modules:
            _load_ml_dtypes()
            return FROM_NP[np_dtype]
        if np_dtype.byteorder not in "=|" and np_dtype.newbyteorder("=") in FROM_NP:
            raise ValueError(
                "given numpy array has byte order different from the native byte order. "
                "Conversion between byte orders is currently not supported.") from None
        raise TypeError(  # (PyTorch names the scalar type and lists every dtype it takes)
            f"can't convert np.ndarray of type numpy.{np_dtype.type.__name__}. The only "
            "supported types are: float64, float32, float16, complex64, complex128, int64, "
            "int32, int16, int8, uint64, uint32, uint16, uint8, and bool."
        ) from None


class _Defaults:
    """Process-wide defaults (PyTorch keeps these per process too)."""

    __slots__ = ("float",)

    def __init__(self):
        self.float = float32


defaults = _Defaults()


def get_default_dtype() -> dtype:
    """The dtype of floating tensors created from Python floats (float32 unless changed)."""
    return defaults.float


def set_default_dtype(d: dtype) -> None:
    """Set the default floating dtype; only float16/bfloat16/float32/float64 are allowed."""
    if not isinstance(d, dtype):  # Python's `float` too: PyTorch takes no type object here
        raise TypeError("invalid dtype object: only floating-point types are supported as "
                        "the default type")
    if not d.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    defaults.float = d


_PROMOTE: dict[tuple[dtype, dtype], dtype] = {}


def _promote_uncached(a: dtype, b: dtype) -> dtype:
    if a.category == QUANTIZED or b.category == QUANTIZED:
        raise RuntimeError("promoteTypes with quantized numbers is not handled yet; figure "
                           "out what the correct rules should be, offending types: "
                           f"{a.legacy} {b.legacy}")
    if a is uint16 or b is uint16:
        raise RuntimeError("Promotion for uint16, uint32, uint64 types is not supported, "
                           f"attempted to promote {a.legacy} and {b.legacy}")
    if a.category != b.category:
        hi, lo = (a, b) if a.category > b.category else (b, a)
        if hi.category == COMPLEX and lo.category == FLOAT:  # float64 with complex64
            return _promote(hi.to_real(), lo).to_complex()
        return hi
    if a.category == BOOL:
        return a
    if a.category == COMPLEX or b.category == COMPLEX:
        # The complex dtype whose components hold both operands' real types.
        return _promote(a.to_real(), b.to_real()).to_complex()
    if a.category == FLOAT:
        if {a, b} == {float16, bfloat16}:
            return float32
        return a if a.itemsize >= b.itemsize else b
    # Integers: uint8 with a signed type needs a signed type wider than 8 bits.
    if a.is_signed == b.is_signed:
        return a if a.itemsize >= b.itemsize else b
    signed = a if a.is_signed else b
    return signed if signed.itemsize > 1 else int16


def _promote(a: dtype, b: dtype) -> dtype:
    """`promote_types` of two dtypes, cached: what the hot paths (`result_type`) call."""
    if a is b:
        return a
    r = _PROMOTE.get((a, b))
    if r is None:
        r = _PROMOTE[(a, b)] = _promote_uncached(a, b)
    return r


def _dtype_argument(caller: str, name: str, position: int, d) -> dtype:
    """`d` as a dtype (a Python number type read as one), or PyTorch's error."""
    d = as_dtype(d)
    if not isinstance(d, dtype):
        # (the position unless the call named the argument: read from the call's code)
        at = "" if name in _type_names.call_keywords(2) else f" (position {position})"
        raise TypeError(f"{caller}(): argument '{name}'{at} must be torch.dtype, not "
                        f"{type(d).__name__}")
    return d


def promote_types(type1: dtype, type2: dtype) -> dtype:
    """PyTorch's `promote_types`: the smallest dtype both `type1` and `type2` convert to
    safely."""
    if type1.__class__ is not dtype or type2.__class__ is not dtype:  # bfloat16's, `float`
        type1 = _dtype_argument("promote_types", "type1", 1, type1)
        type2 = _dtype_argument("promote_types", "type2", 2, type2)
    return _promote(type1, type2)


def scalar_dtype(value) -> dtype:
    """The dtype PyTorch gives a number standing for a Scalar (`full((2,), 2.5)`): a NumPy
    scalar counts as the Python number `python_scalar` makes of it."""
    if isinstance(value, np.generic):
        value = python_scalar(value)
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        return int64
    if isinstance(value, float):
        return defaults.float
    if isinstance(value, complex):
        return defaults.float.to_complex()
    if isinstance(value, numbers.Integral):  # a symbolic size or int (capture's SymInt)
        return int64
    return defaults.float


def python_scalar(value: np.generic):
    """The Python value PyTorch reads a NumPy scalar as where it takes a number (a Scalar;
    its bool and int arguments take no np.bool_): np.integer an int, np.floating a float
    whatever its width (np.longdouble too), np.bool_ a float (`mask + np.bool_(True)` and
    `full((2,), np.bool_(True))` are float32), np.complex128 (a subclass of Python's complex)
    a complex, the other complex scalars their real part (NumPy warns that the imaginary part
    is dropped), as PyTorch reads them. Never a NumPy type again."""
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, complex):
        return complex(value)
    if isinstance(value, (np.bool_, np.number)):
        return float(value)
    return value.item()  # str_, bytes_, datetime64: their Python forms


def _combine(higher: dtype | None, lower: dtype | None) -> dtype | None:
    """Merge two ranks of operands: `lower` only matters if its category is higher."""
    if higher is None:
        return lower
    if lower is None or higher.category >= lower.category:
        return higher
    if lower.category == COMPLEX and higher.category == FLOAT:
        # A complex number with a float64 tensor: complex128, the tensor's width kept
        # (bfloat16's, which has no complex type, is complex64's).
        return complex64 if higher is bfloat16 else higher.to_complex()
    return _promote(higher, lower)


def result_type(*operands) -> dtype:
    """The dtype of an operation on `operands` (tensors and Python numbers), as PyTorch's."""
    dim = zero = wrapped = None
    for x in operands:
        if x.__class__ is np.ndarray:
            d = FROM_NP[x.dtype]
        else:
            d = getattr(x, "_dtype", None)
        if d is not None:
            if x.ndim:
                dim = d if dim is None else _promote(dim, d)
            else:
                zero = d if zero is None else _promote(zero, d)
        elif x is not None:
            d = scalar_dtype(x)
            wrapped = d if wrapped is None else _promote(wrapped, d)
    r = _combine(dim, _combine(zero, wrapped))
    if r is None:
        raise TypeError("result_type needs at least one operand")
    return r


def default_np(category: int):
    """The NumPy dtype PyTorch gives a result of `category` computed from integer inputs."""
    return defaults.float.np if category == FLOAT else np.dtype(np.int64)


def can_cast(from_: dtype, to: dtype) -> bool:
    """PyTorch's `can_cast`: no float to integer, and nothing but bool to bool."""
    if from_.__class__ is not dtype or to.__class__ is not dtype:  # `can_cast(float, int)`
        from_ = _dtype_argument("can_cast", "from_", 1, from_)
        to = _dtype_argument("can_cast", "to", 2, to)
    src, dst = from_, to
    if src.category > dst.category and src.category >= FLOAT:
        return False
    return not (dst.category == BOOL and src.category != BOOL)
