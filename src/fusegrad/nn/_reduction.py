"""Loss reductions as the enum numbers ATen's loss ops take, and the legacy
`size_average`/`reduce` flags read as a reduction (`torch.nn._reduction`, which loss code
outside PyTorch imports)."""

from __future__ import annotations

import warnings

_ENUM = {"none": 0, "mean": 1, "sum": 2}


def get_enum(reduction: str) -> int:
    """0, 1 or 2 for 'none', 'mean' or 'sum' ('elementwise_mean', deprecated, is 'mean')."""
    if reduction == "elementwise_mean":
        warnings.warn("reduction='elementwise_mean' is deprecated. Please use "
                      "reduction='mean' instead.", stacklevel=2)
        return 1
    if reduction not in _ENUM:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return _ENUM[reduction]


def legacy_get_string(size_average: bool | None, reduce: bool | None,
                      emit_warning: bool = True) -> str:
    """The reduction the deprecated flags mean (None counts as True): 'mean' when both hold,
    'sum' when only `reduce` does, else 'none'; warns that the flags are deprecated."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    result = ("mean" if size_average else "sum") if reduce else "none"
    if emit_warning:
        warnings.warn("size_average and reduce args will be deprecated, please use "
                      f"reduction='{result}' instead.", stacklevel=2)
    return result


def legacy_get_enum(size_average: bool | None, reduce: bool | None,
                    emit_warning: bool = True) -> int:
    """`get_enum` of `legacy_get_string`."""
    return get_enum(legacy_get_string(size_average, reduce, emit_warning))
