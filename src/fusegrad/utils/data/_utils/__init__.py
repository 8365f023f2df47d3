"""Helpers of the DataLoader, at PyTorch's module paths: `collate` (batching samples and the
`default_collate_fn_map` registry), `fetch` (reading samples for a batch) and `worker`
(`get_worker_info`); and the constants and `ExceptionWrapper` PyTorch keeps here."""

from __future__ import annotations

import sys
import traceback

from .._worker import raise_carried
from . import collate, fetch, worker

__all__ = ["collate", "fetch", "worker"]

IS_WINDOWS = sys.platform == "win32"
# Seconds between a waiting process's checks that its peer still lives (PyTorch's value).
MP_STATUS_CHECK_INTERVAL = 5.0
python_exit_status = False  # set once the interpreter is shutting down (never read here)
HAS_NUMPY = True


class ExceptionWrapper:
    """An exception (from `exc_info`, the one being handled by default) kept as its type and
    formatted traceback, to be raised again elsewhere (another thread or process) with
    `reraise()`: "Caught <type> <where>." and the original traceback as the message."""

    def __init__(self, exc_info: tuple | None = None, where: str = "in background") -> None:
        if exc_info is None:
            exc_info = sys.exc_info()
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self) -> None:
        """Raise the exception's type with the traceback as its message (RuntimeError when
        the type cannot be built from one message)."""
        raise_carried(self.exc_type,
                      f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}")
