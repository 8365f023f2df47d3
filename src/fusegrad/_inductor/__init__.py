"""PyTorch-compatible names for code generation (`torch._inductor`)."""

from __future__ import annotations

from . import config
from .compile_fx import compile_fx
from .config import list_mode_options, list_options

__all__ = ["compile_fx", "config", "list_options", "list_mode_options"]
