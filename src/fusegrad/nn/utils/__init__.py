"""`fusegrad.nn.utils`: gradient clipping, parameter vector helpers, `rnn` (packed
sequences), `stateless` (the deprecated `functional_call`), `skip_init`, `fusion`, the
hook-based `weight_norm` and `spectral_norm`, and the submodules `parametrize`,
`parametrizations` and `prune`, which load on first use."""

import warnings

from . import rnn, stateless
from .clip_grad import clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm
from .convert import parameters_to_vector, vector_to_parameters
from .fusion import (
    fuse_conv_bn_eval,
    fuse_conv_bn_weights,
    fuse_linear_bn_eval,
    fuse_linear_bn_weights,
)
from .init import skip_init
from .spectral_norm import remove_spectral_norm, spectral_norm
from .weight_norm import remove_weight_norm, weight_norm

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_",
           "get_total_norm", "parameters_to_vector", "vector_to_parameters", "rnn",
           "skip_init", "fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights", "stateless", "weight_norm", "remove_weight_norm",
           "spectral_norm", "remove_spectral_norm"]


_LAZY_MODULES = frozenset({"parametrize", "parametrizations", "prune"})


def __getattr__(name: str):
    """Import `parametrize`, `parametrizations` or `prune` on first access."""
    if name in _LAZY_MODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The namespace including the submodules not loaded yet."""
    return sorted(set(globals()) | _LAZY_MODULES)


def clip_grad_norm(parameters, max_norm: float, norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None):
    """Deprecated spelling of `clip_grad_norm_` (warns as PyTorch does)."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`torch.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)

