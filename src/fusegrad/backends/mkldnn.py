"""`fusegrad.backends.mkldnn`: oneDNN flags as PyTorch's CPU build reports them (NumPy does
the work here; the flags are recorded and read back)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

enabled = True
deterministic = False


def is_available() -> bool:
    """True, as on PyTorch's CPU build (the flag gates nothing in fusegrad)."""
    return True


@contextlib.contextmanager
def flags(enabled=False, deterministic=False, allow_tf32=True,
          fp32_precision="none") -> Iterator[None]:
    """Set `enabled`/`deterministic` for the block, restoring them after it."""
    from . import mkldnn
    from ._flags import flag_context

    with flag_context(mkldnn, enabled=enabled, deterministic=deterministic):
        yield
