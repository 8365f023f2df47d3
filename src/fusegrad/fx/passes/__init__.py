"""Graph passes: analyses and rewrites over fusegrad.fx graphs."""

from . import fake_tensor_prop, infra, shape_prop, utils

__all__ = ["fake_tensor_prop", "infra", "shape_prop", "utils"]
