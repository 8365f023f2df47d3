"""Utilities: `fusegrad.utils.checkpoint` (activation checkpointing), `fusegrad.utils.data`."""

from . import checkpoint  # noqa: F401

# isort: split
from . import data  # noqa: F401
