"""`fusegrad.backends.opt_einsum`: whether the opt_einsum package is importable, and the
contraction-order flags (recorded; NumPy's own `optimize` path orders contractions here)."""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator


def is_available() -> bool:
    """True when the opt_einsum package can be imported."""
    return importlib.util.find_spec("opt_einsum") is not None


# As in PyTorch: on, with the 'auto' strategy, only when the package is there.
enabled = is_available()
strategy = "auto" if enabled else None


def get_opt_einsum():
    """The opt_einsum module, or None when it is not installed."""
    if not is_available():
        return None
    import opt_einsum

    return opt_einsum


@contextlib.contextmanager
def flags(enabled=None, strategy=None) -> Iterator[None]:
    """Set `enabled`/`strategy` for the block, restoring them after it."""
    from . import opt_einsum
    from ._flags import flag_context

    with flag_context(opt_einsum, enabled=enabled, strategy=strategy):
        yield
