"""Flatten parameters into one vector and back."""

from __future__ import annotations

from collections.abc import Iterable

from ..._tensor import Tensor


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """All parameters flattened and concatenated into one 1-D tensor."""
    from ... import cat

    flat = []
    for p in parameters:
        p.device  # noqa: B018  (PyTorch reads each one's device first: its AttributeError)
        flat.append(p.reshape(-1))
    return cat(flat)


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copy consecutive slices of `vec` into the parameters' data."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    offset = 0
    for p in parameters:
        p.device  # noqa: B018  (PyTorch reads each one's device first: its AttributeError)
        n = p.numel()
        p._data[...] = vec._data[offset:offset + n].reshape(p._data.shape)
        p._vc[0] += 1
        offset += n
