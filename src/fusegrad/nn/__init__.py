"""`fusegrad.nn`: modules, functional, init and utils, as PyTorch's `torch.nn`."""

from . import functional, init, utils  # noqa: F401
from .modules import *  # noqa: F403
from .modules import __all__ as _modules_all
from .parameter import Parameter

__all__ = ["Parameter", "functional", "init", "utils", *_modules_all]
