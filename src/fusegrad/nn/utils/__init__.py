"""`fusegrad.nn.utils`: gradient clipping, parameter vector helpers, `rnn` (packed
sequences), `stateless` (the deprecated `functional_call`), `skip_init`, `fusion`, the
hook-based `weight_norm` and `spectral_norm`, convolution weight memory formats, and the
submodules `parametrize`, `parametrizations` and `prune`, which load on first use."""

from . import _named_member_accessor, clip_grad, convert_parameters, memory_format, rnn, stateless
from .clip_grad import (
    clip_grad_norm,
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .fusion import (
    fuse_conv_bn_eval,
    fuse_conv_bn_weights,
    fuse_linear_bn_eval,
    fuse_linear_bn_weights,
)
from .init import skip_init
from .memory_format import convert_conv2d_weight_memory_format, convert_conv3d_weight_memory_format
from .spectral_norm import remove_spectral_norm, spectral_norm
from .weight_norm import remove_weight_norm, weight_norm

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_",
           "get_total_norm", "parameters_to_vector", "vector_to_parameters", "rnn",
           "skip_init", "fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights", "stateless", "weight_norm", "remove_weight_norm",
           "spectral_norm", "remove_spectral_norm", "convert_conv2d_weight_memory_format",
           "convert_conv3d_weight_memory_format"]


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

