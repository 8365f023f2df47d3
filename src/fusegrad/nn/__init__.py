"""`fusegrad.nn`: modules, functional, init and utils, as PyTorch's `torch.nn`."""

from . import functional, init, parallel, utils  # noqa: F401
from .modules import *  # noqa: F403
from .modules import __all__ as _modules_all
from .parallel import DataParallel
from .parameter import (  # noqa: F401
    Buffer,
    Parameter,
    UninitializedBuffer,
    UninitializedParameter,
)

__all__ = ["Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer",
           "DataParallel", "functional", "init", "parallel", "utils",
           *_modules_all]
