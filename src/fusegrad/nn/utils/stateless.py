"""`nn.utils.stateless.functional_call`: the deprecated spelling of `func.functional_call`."""

from __future__ import annotations

import warnings


def functional_call(module, parameters_and_buffers: dict, args=None, kwargs=None, *,
                    tie_weights: bool = True, strict: bool = False):
    """`func.functional_call` with one dict of parameters and buffers, with PyTorch's
    deprecation warning."""
    warnings.warn(
        "`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 and will "
        "be removed in a future version of PyTorch. Please use `torch.func.functional_call` "
        "instead which is a drop-in replacement.", FutureWarning, stacklevel=2)
    from ...func._functional_call import call_with  # loads `fusegrad.func` when first used

    return call_with(module, parameters_and_buffers, args, kwargs, tie_weights, strict)


__all__ = ["functional_call"]
