"""`fusegrad._C`: the spellings PyTorch's extension module gives the `__torch_function__`
machinery (`_disabled_torch_function_impl`, the two disabling context managers) and the
`Generator` and `_LinAlgError` classes, which PyTorch defines there (pickles and tracebacks
name them `torch._C.Generator`, `torch._C._LinAlgError`)."""

from __future__ import annotations

from ._random import Generator
from ._torch_function import (
    DisableTorchFunction,
    DisableTorchFunctionSubclass,
    _disabled_torch_function_impl,
)
from ._torch_function import is_torch_function_enabled as _is_torch_function_enabled
from ._torch_function import (
    is_torch_function_mode_enabled as _is_torch_function_mode_enabled,
)
from .autograd.graph import _current_graph_task_id

Generator.__module__ = __name__

__all__ = ["DisableTorchFunction", "DisableTorchFunctionSubclass", "Generator",
           "_LinAlgError", "_current_graph_task_id", "_disabled_torch_function_impl",  # noqa: F822
           "_is_torch_function_enabled", "_is_torch_function_mode_enabled"]


def __getattr__(name: str):
    """`_LinAlgError`, defined beside the linear algebra kernels, which `import fusegrad`
    does not load (its first use imports them)."""
    if name == "_LinAlgError":
        from .ops._linalg_common import LinAlgError

        return LinAlgError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
