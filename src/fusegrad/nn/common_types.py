"""The type aliases PyTorch's layers annotate sizes and ratios with (`_size_2_t` is an int or
a pair of ints), for code that imports them from `torch.nn.common_types`."""

from __future__ import annotations

from typing import TypeVar, Union

from .._tensor import Tensor

# `Union[...]` rather than `|`: the aliases are values, built at import (as PyTorch's are).
# ruff: noqa: UP007

T = TypeVar("T")

# a value, or a tuple of such values
_scalar_or_tuple_any_t = Union[T, tuple[T, ...]]
_scalar_or_tuple_1_t = Union[T, tuple[T]]
_scalar_or_tuple_2_t = Union[T, tuple[T, T]]
_scalar_or_tuple_3_t = Union[T, tuple[T, T, T]]
_scalar_or_tuple_4_t = Union[T, tuple[T, T, T, T]]
_scalar_or_tuple_5_t = Union[T, tuple[T, T, T, T, T]]
_scalar_or_tuple_6_t = Union[T, tuple[T, T, T, T, T, T]]

# sizes: kernel sizes, strides, paddings
_size_any_t = _scalar_or_tuple_any_t[int]
_size_1_t = _scalar_or_tuple_1_t[int]
_size_2_t = _scalar_or_tuple_2_t[int]
_size_3_t = _scalar_or_tuple_3_t[int]
_size_4_t = _scalar_or_tuple_4_t[int]
_size_5_t = _scalar_or_tuple_5_t[int]
_size_6_t = _scalar_or_tuple_6_t[int]

# sizes where None keeps the input's size (adaptive pooling)
_size_any_opt_t = _scalar_or_tuple_any_t[int | None]
_size_2_opt_t = _scalar_or_tuple_2_t[int | None]
_size_3_opt_t = _scalar_or_tuple_3_t[int | None]

# ratios (fractional max pooling)
_ratio_2_t = _scalar_or_tuple_2_t[float]
_ratio_3_t = _scalar_or_tuple_3_t[float]
_ratio_any_t = _scalar_or_tuple_any_t[float]

_tensor_list_t = _scalar_or_tuple_any_t[Tensor]

# a result, or a (result, indices) pair (max pooling with return_indices)
_maybe_indices_t = _scalar_or_tuple_2_t[Tensor]
