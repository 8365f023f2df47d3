"""Graph passes: analyses and rewrites over fusegrad.fx graphs."""

from . import shape_prop

__all__ = ["shape_prop"]
