"""`fusegrad.nn`: modules, functional, init and utils, as PyTorch's `torch.nn`."""

from . import (  # noqa: F401
    _reduction,
    attention,
    common_types,
    functional,
    grad,
    init,
    modules,
    parallel,
    parameter,
    utils,
)
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

_FACTORY_KEYS = frozenset({"device", "dtype", "memory_format"})


def factory_kwargs(kwargs: dict | None) -> dict:
    """The factory arguments (`device`, `dtype`, `memory_format`) among a module's keyword
    arguments, merged with those of its `factory_kwargs` entry; anything else, or an argument
    given both ways, is a TypeError."""
    if kwargs is None:
        return {}
    unknown = kwargs.keys() - (_FACTORY_KEYS | {"factory_kwargs"})
    if unknown:
        raise TypeError(f"unexpected kwargs {unknown}")
    merged = dict(kwargs.get("factory_kwargs", {}))
    for key in _FACTORY_KEYS & kwargs.keys():
        if key in merged:
            raise TypeError(f"{key} specified twice, in **kwargs and in factory_kwargs")
        merged[key] = kwargs[key]
    return merged


def __getattr__(name: str):
    """`nn.quantized` (the legacy spelling of `ao.nn.quantized`), loaded on first use."""
    if name == "quantized":
        import importlib

        return importlib.import_module(f"{__name__}.quantized")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
