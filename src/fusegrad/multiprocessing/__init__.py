"""`fusegrad.multiprocessing`: Python's `multiprocessing` with tensors that processes share,
and `spawn`, as `torch.multiprocessing`.

Everything of `multiprocessing` is here (`Process`, `Queue`, `Pool`, `get_context`, ...).
Importing this package registers how tensors travel between processes (`reductions`): a
tensor whose data lies in shared memory (`share_memory_`, `Module.share_memory`) reaches the
other process as a view of the same memory, so in-place writes on either side are seen by
both (Hogwild training); any other tensor is copied, as pickling copies it. (PyTorch moves a
tensor put on a queue into shared memory first; here the sender's tensor is left where it is.)
`spawn(fn, args, nprocs)` starts `nprocs` processes running `fn(i, *args)` and reports the
first failure as PyTorch does.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing import *  # noqa: F403

from . import reductions
from .spawn import (
    ProcessContext,
    ProcessExitedException,
    ProcessRaisedException,
    spawn,
    start_processes,
)

_STRATEGIES = frozenset({"file_descriptor", "file_system"})
_strategy = "file_descriptor"


def set_sharing_strategy(new_strategy: str) -> None:
    """Choose how shared tensors are passed ("file_descriptor" or "file_system"); both pass
    the memory file's descriptor here."""
    global _strategy
    if new_strategy not in _STRATEGIES:
        raise AssertionError(f"{new_strategy!r} is not a valid sharing strategy")
    _strategy = new_strategy


def get_sharing_strategy() -> str:
    """The current sharing strategy."""
    return _strategy


def get_all_sharing_strategies() -> set:
    """The sharing strategies this platform supports."""
    return set(_STRATEGIES)


reductions.init_reductions()

__all__ = ["set_sharing_strategy", "get_sharing_strategy", "get_all_sharing_strategies",
           "spawn", "start_processes", "ProcessContext", "ProcessExitedException",
           "ProcessRaisedException", *multiprocessing.__all__]
