"""`finfo` and `iinfo`: the numeric limits of fusegrad's dtypes, read from NumPy (and
ml_dtypes for bfloat16), with PyTorch's attribute names, repr and errors."""

from __future__ import annotations

import math

import numpy as np

from . import _dtype


def _g(x: float) -> str:
    # PyTorch prints the limits with six significant digits (C's %g).
    return f"{x:g}"


class finfo:
    """Machine limits of a floating point dtype: `bits`, `eps`, `max`, `min`, `tiny`,
    `smallest_normal`, `resolution` and `dtype` (the dtype's name)."""

    __slots__ = ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype")

    def __init__(self, type: _dtype.dtype | None = None) -> None:  # noqa: A002
        d = _dtype.get_default_dtype() if type is None else _dtype.as_dtype(type)
        if not isinstance(d, _dtype.dtype):
            raise TypeError(f"finfo(): argument 'type' (position 1) must be torch.dtype, "
                            f"not {d.__class__.__name__}")
        d = d.to_real()  # a complex dtype's limits are its components'

        if not d.is_floating_point:
            raise TypeError("torch.finfo() requires a floating point input type. Use "
                            "torch.iinfo to handle 'torch.finfo'")
        if d is _dtype.bfloat16:
            import ml_dtypes

            info = ml_dtypes.finfo(d.np)
        else:
            info = np.finfo(d.np)
        self.bits = int(info.bits)
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        # 10 ** -(decimal digits of precision), as PyTorch derives it from eps.
        self.resolution = float(f"1e-{int(math.floor(-math.log10(self.eps)))}")
        self.dtype = d.name

    def __repr__(self) -> str:
        return (f"finfo(resolution={_g(self.resolution)}, min={_g(self.min)}, "
                f"max={_g(self.max)}, eps={_g(self.eps)}, "
                f"smallest_normal={_g(self.smallest_normal)}, tiny={_g(self.tiny)}, "
                f"dtype={self.dtype})")

    def __eq__(self, other) -> bool:
        return isinstance(other, finfo) and other.dtype == self.dtype

    def __hash__(self) -> int:
        return hash(("finfo", self.dtype))


class iinfo:
    """Machine limits of an integer dtype: `bits`, `max`, `min` and `dtype` (its name)."""

    __slots__ = ("bits", "max", "min", "dtype")

    def __init__(self, type: _dtype.dtype) -> None:  # noqa: A002
        type = _dtype.as_dtype(type)  # noqa: A001  (`int` stands for int64, as in PyTorch)
        if not isinstance(type, _dtype.dtype):
            raise TypeError(f"iinfo(): argument 'type' (position 1) must be torch.dtype, "
                            f"not {type.__class__.__name__}")
        if type is _dtype.bool_:
            raise TypeError("torch.bool is not supported by torch.iinfo")
        if type.is_floating_point:
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo "
                            "to handle 'torch.iinfo'")
        info = np.iinfo(type.np)
        self.bits = int(info.bits)
        self.max = int(info.max)
        self.min = int(info.min)
        self.dtype = type.name

    def __repr__(self) -> str:
        return f"iinfo(min={_g(self.min)}, max={_g(self.max)}, dtype={self.dtype})"

    def __eq__(self, other) -> bool:
        return isinstance(other, iinfo) and other.dtype == self.dtype

    def __hash__(self) -> int:
        return hash(("iinfo", self.dtype))
