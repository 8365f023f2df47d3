"""`fusegrad.types`: the type aliases PyTorch's annotations use (`Number`, `_size`, `Device`,
`FileLike`, ...), for user code that annotates with them."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import IO, Any, TypeAlias

from ._device import device as _device
from ._dtype import dtype as _dtype
from ._sparse import layout as _layout
from ._symbolic import SymInt
from ._tensor import Size, Tensor

_int: TypeAlias = int
_float: TypeAlias = float
_bool: TypeAlias = bool
_complex: TypeAlias = complex
_str: TypeAlias = str
_bytes: TypeAlias = bytes

_TensorOrTensors: TypeAlias = Tensor | Sequence[Tensor]
_TensorOrOptionalTensors: TypeAlias = Tensor | Sequence[Tensor | None]
_size: TypeAlias = Size | list[int] | tuple[int, ...]
_symsize: TypeAlias = Size | Sequence[int | SymInt]

IntLikeType: TypeAlias = int | SymInt
FloatLikeType: TypeAlias = float
BoolLikeType: TypeAlias = bool
py_sym_types = (SymInt,)

Number: TypeAlias = int | float | bool
_Number = (int, float, bool)
Device: TypeAlias = _device | str | int | None
FileLike: TypeAlias = str | os.PathLike | IO[bytes]
Storage: TypeAlias = Any  # (the storage classes: fusegrad.storage)

__all__ = ["BoolLikeType", "Device", "FileLike", "FloatLikeType", "IntLikeType", "Number",
           "Size", "Storage", "SymInt", "Tensor", "py_sym_types", "_bool", "_complex",
           "_device", "_dtype", "_float", "_int", "_layout", "_size", "_str", "_symsize"]
