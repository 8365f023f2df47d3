"""Arguments as PyTorch's C-level argument parser reads them, for the public functions whose
Tensor methods run without the `__torch_function__` wrapper (the self-only methods), which
therefore meet every spelling PyTorch accepts themselves:

- a 0-d integer tensor where an int (or a list of ints) is expected: `x.sum(torch.tensor(1))`
  reads it as the int its `__index__` gives;
- NumPy's keyword names, `axis` for `dim` and `keepdims` for `keepdim` (`x.sum(axis=0)`);
- PyTorch's own wording of a missing required argument, for parameters that became optional
  so that `axis` can stand in for them.

Each helper runs only once a call has left its function's common path.
"""

from __future__ import annotations

import numbers

from .._symbolic import SymInt
from .._tensor import Tensor
from .._type_names import python_type_name


def index(value):
    """`value`, or the int a tensor given for an int stands for (a 0-d integer tensor: its
    `__index__`, whose TypeError names anything else)."""
    return value.__index__() if isinstance(value, Tensor) else value


def dims(dim) -> tuple | None:
    """The dims of an `int[]` parameter as a tuple (None stays None): one int, a 0-d integer
    tensor (read as its int) or a sequence of either."""
    if dim is None:
        return None
    if dim.__class__ is int or dim.__class__ is SymInt:  # (a traced size stays symbolic)
        return (dim,)
    if isinstance(dim, numbers.Integral):
        return (int(dim),)
    if isinstance(dim, Tensor):
        return (dim.__index__(),)
    return tuple(dim)


def reduced_dims(dim) -> tuple | None:
    """`dims(dim)`, where an empty list means every dim (None), as PyTorch's sum and mean
    read `dim=()`: a reduction over all dims, not over none."""
    return dims(dim) or None


def axis(name: str, dim, given, default=None):
    """`dim`, or NumPy's `axis` (`given`) standing for it. PyTorch's parser takes the NumPy
    name only for a parameter not filled otherwise: `dim` must still hold its `default`."""
    if given is None:
        return dim
    if not (dim is default or (dim.__class__ is int and dim == default)):
        raise TypeError(f"{name}() got an unexpected keyword argument 'axis'")
    return given


def keepdims(name: str, keepdim, given):
    """`keepdim`, or NumPy's `keepdims` (`given`) standing for it."""
    if given is None:
        return keepdim
    if keepdim:
        raise TypeError(f"{name}() got an unexpected keyword argument 'keepdims'")
    return given


def missing(name: str, parameter: str) -> TypeError:
    """PyTorch's error for a required argument left out (its own wording, not Python's)."""
    return TypeError(f'{name}() missing 1 required positional arguments: "{parameter}"')


def required_dim(name: str, dim, given):
    """A required `dim`, given by position or keyword or as NumPy's `axis`."""
    if given is not None:
        if dim is not None:
            raise TypeError(f"{name}() got an unexpected keyword argument 'axis'")
        return given
    if dim is None:
        raise missing(name, "dim")
    return dim


def tensor_sequence(name: str, tensors) -> list:
    """`tensors` (a list or tuple of tensors, as `cat` and `stack` take) as a list, with
    PyTorch's argument parser's errors for anything else."""
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{name}(): argument 'tensors' (position 1) must be tuple of Tensors, "
                        f"not {python_type_name(tensors)}")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got "
                            f"{python_type_name(t)}")
    return list(tensors)
