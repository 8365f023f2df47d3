"""InstanceNorm1d/2d/3d and their lazy forms."""

import warnings

from ..._tensor import Tensor
from .. import functional as F
from .batchnorm import _LazyNormBase, _NormBase


class _InstanceNorm(_NormBase):
    """Instance normalisation over `_spatial` dims, batched or not; the parameters and
    running statistics are `_NormBase`'s (off by default here)."""

    _spatial = 2

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device=None,
                 dtype=None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def _get_no_batch_dim(self) -> int:
        """The number of dims of an unbatched input."""
        return self._spatial + 1

    def _check_input_dim(self, input) -> None:
        unbatched = self._get_no_batch_dim()
        if input.dim() not in (unbatched, unbatched + 1):
            raise ValueError(f"expected {unbatched}D or {unbatched + 1}D input (got "
                             f"{input.dim()}D input)")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs) -> None:
        # Checkpoints without a version (before instance norm stopped tracking statistics by
        # default) may hold running statistics this module does not keep: PyTorch's error,
        # and the entries dropped.
        if local_metadata.get("version") is None and not self.track_running_stats:
            keys = [prefix + name for name in ("running_mean", "running_var")
                    if prefix + name in state_dict]
            if keys:
                klass = self.__class__.__name__
                names = " and ".join(f'"{k}"' for k in keys)
                error_msgs.append(
                    f"Unexpected running stats buffer(s) {names} for {klass} with "
                    "track_running_stats=False. If state_dict is a checkpoint saved before "
                    f"0.4.0, this may be expected because {klass} does not track running "
                    "stats by default since 0.4.0. Please remove these keys from state_dict. "
                    "If the running stats are actually needed, instead set "
                    f"track_running_stats=True in {klass} to enable them. See the "
                    f"documentation of {klass} for details.")
                for key in keys:
                    state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)

    def forward(self, input: Tensor) -> Tensor:
        """instance_norm(input), an unbatched input given a batch dim for the call."""
        self._check_input_dim(input)
        feature_dim = input.dim() - self._get_no_batch_dim()
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match "
                                 f"num_features ({self.num_features}), but got: "
                                 f"{input.shape[feature_dim]}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. "
                          "You can silence this warning by not passing in num_features, "
                          "which is not used because affine=False", stacklevel=2)
        if input.dim() == self._get_no_batch_dim():
            return self._handle_no_batch_input(input)
        return self._apply_instance_norm(input)

    def _handle_no_batch_input(self, input):
        """An unbatched input normalised as a batch of one."""
        return self._apply_instance_norm(input.unsqueeze(0)).squeeze(0)

    def _apply_instance_norm(self, input):
        """instance_norm of a batched input with this layer's state."""
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight,
                               self.bias, self.training or not self.track_running_stats,
                               self.momentum if self.momentum is not None else 0.0, self.eps)


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of (N, C, L) or (C, L) input."""

    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of (N, C, H, W) or (C, H, W) input."""

    _spatial = 2


class InstanceNorm3d(_InstanceNorm):
    """Instance normalisation of (N, C, D, H, W) or (C, D, H, W) input."""

    _spatial = 3


# The lazy forms derive from `_InstanceNorm`, not from the class they become, and keep batch
# norm's defaults (affine, tracking), as PyTorch's do.
class LazyInstanceNorm1d(_LazyNormBase, _InstanceNorm):
    """An InstanceNorm1d whose num_features is read from its first input."""

    cls_to_become = InstanceNorm1d
    _spatial = 1


class LazyInstanceNorm2d(_LazyNormBase, _InstanceNorm):
    """An InstanceNorm2d whose num_features is read from its first input."""

    cls_to_become = InstanceNorm2d
    _spatial = 2


class LazyInstanceNorm3d(_LazyNormBase, _InstanceNorm):
    """An InstanceNorm3d whose num_features is read from its first input."""

    cls_to_become = InstanceNorm3d
    _spatial = 3
