"""Small `torch.func` utilities: `debug_unwrap`, `functionalize` and
`replace_all_batch_norm_modules_`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

_REMOVE_OPTIONS = ("mutations", "mutations_and_views")


def debug_unwrap(tensor, *, recurse: bool = True):
    """The plain tensor behind a transform's wrapper. fusegrad's transforms hand `func` plain
    tensors (vmap runs it per example, the others on tape leaves), so this is `tensor`
    itself."""
    return tensor


def replace_all_batch_norm_modules_(root):
    """Make every batch-norm module in `root` stop tracking running statistics (in place),
    so that it normalises with batch statistics under vmap; returns `root`."""
    from ..nn.modules.batchnorm import _BatchNorm

    for module in root.modules():
        if isinstance(module, _BatchNorm):
            module.running_mean = None
            module.running_var = None
            module.num_batches_tracked = None
            module.track_running_stats = False
    return root


def functionalize(func: Callable[..., Any], *, remove: str = "mutations") -> Callable[..., Any]:
    """`func` with its in-place ops removed (PyTorch's `torch.func.functionalize`).

    Functionalization keeps a program's meaning: the outputs have the values `func` computes
    and the inputs `func` writes into are written. So this runs `func` itself, which gives
    those values; what differs from PyTorch is how the outputs were made: a view that `func`
    wrote through keeps eager's `grad_fn` (`AsStridedBackward0`, `CopySlices`) where
    PyTorch's functionalized program regenerates it (`SliceBackward0`, `SelectScatterBackward0`),
    and traced under `make_fx` the graph records the in-place ops as they are.
    """
    if remove not in _REMOVE_OPTIONS:
        raise RuntimeError(
            f"functionalize(f, remove='mutations'): received invalid argument for remove="
            f"{remove}. Valid options are:\n"
            "     remove='mutations': all inplace and out= operators will be removed from the "
            "program, and replaced with their out-of-place equivalents.\n"
            "     remove='mutations_and_views': In addition to the above, all aliasing "
            "operators {view} will be replaced with their non-aliasing counterparts, "
            "{view}_copy.\n")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapped
