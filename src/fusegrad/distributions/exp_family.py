"""ExponentialFamily: the base class PyTorch gives its exponential-family distributions."""

from __future__ import annotations

from .distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """Marker base of the exponential-family distributions (Normal, Gamma, Bernoulli, ...)."""
