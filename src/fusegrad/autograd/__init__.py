"""Automatic differentiation: `backward`, `grad`, grad and inference modes, the graph, custom
Functions, `functional` (jacobian, hessian, vjp, jvp, hvp), anomaly detection, gradcheck."""

from __future__ import annotations

from . import function, functional, graph
from ._grad import backward, grad
from .anomaly_mode import (
    detect_anomaly,
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
    set_detect_anomaly,
)
from .engine import checkpoint_valid as _is_checkpoint_valid
from .engine import run_backward  # noqa: F401
from .function import Function, once_differentiable
from .grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from .gradcheck import gradcheck, gradgradcheck

__all__ = ["backward", "grad", "graph", "no_grad", "enable_grad", "set_grad_enabled",
           "is_grad_enabled", "gradcheck", "gradgradcheck", "Function", "function",
           "functional", "once_differentiable", "inference_mode", "is_inference_mode_enabled",
           "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled",
           "is_anomaly_check_nan_enabled"]


def __getattr__(name: str):
    """`fusegrad.autograd.profiler` loads on first use (as `fusegrad.profiler` does)."""
    if name == "profiler":
        import importlib

        return importlib.import_module(f"{__name__}.profiler")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
