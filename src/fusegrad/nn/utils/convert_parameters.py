"""Flatten parameters into one vector and back (`torch.nn.utils.convert_parameters`)."""

from __future__ import annotations

from collections.abc import Iterable

from ..._tensor import Tensor

_ACCELERATOR_TYPES = ("cuda", "privateuseone")


def _check_param_device(param: Tensor, old_param_device: int | None) -> int:
    """The device index all the parameters share (-1 for the CPU), given the one found so
    far (None before the first); parameters on different devices are a TypeError."""
    on_accelerator = param.device.type in _ACCELERATOR_TYPES
    if old_param_device is None:
        return param.get_device() if on_accelerator else -1
    if (param.get_device() != old_param_device) if on_accelerator else (
            old_param_device != -1):
        raise TypeError("Found two parameters on different devices, this is currently not "
                        "supported.")
    return old_param_device


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """All parameters flattened (`view(-1)`) and concatenated into one 1-D tensor."""
    from ... import cat

    device = None
    flat = []
    for p in parameters:
        device = _check_param_device(p, device)
        flat.append(p.view(-1))
    return cat(flat)


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Point each parameter's data at its consecutive slice of `vec`: the parameters then
    share `vec`'s memory and dtype (later writes into `vec` show in them), as in PyTorch."""
    if not isinstance(vec, Tensor):
        from ..._functions.compat_more import typename

        raise TypeError(f"expected torch.Tensor, but got: {typename(vec)}")
    device = None
    offset = 0
    for p in parameters:
        device = _check_param_device(p, device)
        n = p.numel()
        p.data = vec[offset:offset + n].view_as(p).data
        offset += n


__all__ = ["parameters_to_vector", "vector_to_parameters"]
