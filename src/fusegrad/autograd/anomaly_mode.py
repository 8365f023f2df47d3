"""Anomaly detection: remember where each node was made, and check backward for NaNs.

While enabled, every recorded node keeps the Python stack of the forward call that made it
(in `node.metadata["traceback_"]`). When a node fails in backward, or (with `check_nan`)
returns NaN gradients, a warning shows that stack before the error propagates.
"""

from __future__ import annotations

import os
import warnings

from .._dtype import FLOAT


class _AnomalyState:
    __slots__ = ("enabled", "check_nan")

    def __init__(self):
        self.enabled = False
        self.check_nan = True


state = _AnomalyState()
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def is_anomaly_enabled() -> bool:
    """True while anomaly detection is on."""
    return state.enabled


def is_anomaly_check_nan_enabled() -> bool:
    """True when anomaly detection also checks backward outputs for NaN."""
    return state.check_nan


def record_traceback(node) -> None:
    """Keep the user's part of the current stack in the node's metadata."""
    import traceback  # only under anomaly mode: not loaded by `import fusegrad`

    frames = traceback.extract_stack()
    while frames and frames[-1].filename.startswith(_PACKAGE_DIR):
        frames.pop()
    node.metadata["traceback_"] = "".join(traceback.format_list(frames))


def _warn_for(node) -> None:
    name = type(node).__name__
    x = node._x
    tb = x.metadata.get("traceback_") if x is not None else None
    if tb is None:
        warnings.warn(
            f"Error detected in {name}. No forward pass information available. Enable detect "
            "anomaly during forward pass for more information.", UserWarning, stacklevel=2)
        return
    warnings.warn(f"Error detected in {name}. Traceback of forward call that caused the "
                  f"error:\n{tb}", UserWarning, stacklevel=2)


def run_node(node, grads):
    """`node.apply(grads)` with anomaly checks: NaN outputs raise; failures show the stack."""
    try:
        out = node.apply(grads)
        if state.check_nan:
            for i, g in enumerate(out):
                if g is not None and g._dtype.category >= FLOAT and _has_nan(g):
                    raise RuntimeError(
                        f"Function '{type(node).__name__}' returned nan values in its {i}th "
                        "output.")
        return out
    except Exception:
        _warn_for(node)
        raise


def _has_nan(g) -> bool:
    import numpy as np

    data = g._data
    if data is None:  # fake tensors carry no values
        return False
    return bool(np.isnan(data).any())


class _AnomalyContext:
    """Context managers only: PyTorch's are no decorators ("object is not callable")."""


class detect_anomaly(_AnomalyContext):
    """Context manager and decorator that enables anomaly detection."""

    def __init__(self, check_nan: bool = True) -> None:
        self._args = (check_nan,)
        self.check_nan = check_nan
        self.prev = state.enabled
        self.prev_check_nan = state.check_nan
        warnings.warn(
            "Anomaly Detection has been enabled. This mode will increase the runtime and should "
            "only be enabled for debugging.", UserWarning, stacklevel=2)

    def __enter__(self) -> None:
        self.prev = state.enabled
        self.prev_check_nan = state.check_nan
        state.enabled = True
        state.check_nan = self.check_nan

    def __exit__(self, *exc) -> None:
        state.enabled = self.prev
        state.check_nan = self.prev_check_nan


class set_detect_anomaly(_AnomalyContext):
    """Turn anomaly detection on or off: at once as a call, restored on exit as a context."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self._args = (mode, check_nan)
        self.prev = state.enabled
        self.prev_check_nan = state.check_nan
        state.enabled = bool(mode)
        state.check_nan = bool(check_nan)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc) -> None:
        state.enabled = self.prev
        state.check_nan = self.prev_check_nan
