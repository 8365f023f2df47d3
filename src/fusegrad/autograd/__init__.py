"""Automatic differentiation: `backward`, `grad`, grad and inference modes, the graph, custom
Functions, `functional` (jacobian, hessian, vjp, jvp, hvp), anomaly detection, gradcheck.

The package holds two layers (docs/architecture.md, "Import layers"): grad mode, anomaly mode
and the graph's Nodes, which Tensor and dispatch record with, sit below them and load with
the package; the engine, `Function`, `functional` and `gradcheck` sit above the ops and load
on first use (PEP 562), so that importing the graph does not import what is built on the
ops."""

from __future__ import annotations

import importlib

from . import graph
from .anomaly_mode import (
    detect_anomaly,
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
    set_detect_anomaly,
)
from .grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
    set_multithreading_enabled,
)

__all__ = ["backward", "grad", "graph", "no_grad", "enable_grad", "set_grad_enabled",
           "is_grad_enabled", "gradcheck", "gradgradcheck", "Function", "function",
           "functional", "once_differentiable", "inference_mode", "is_inference_mode_enabled",
           "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled",
           "is_anomaly_check_nan_enabled", "Variable", "set_multithreading_enabled",
           "forward_ad"]

# name -> (submodule, attribute; None for the submodule itself), loaded on first use.
_LAZY = {
    "backward": ("_grad", "backward"), "grad": ("_grad", "grad"),
    "run_backward": ("engine", "run_backward"),
    "_is_checkpoint_valid": ("engine", "checkpoint_valid"),
    "Function": ("function", "Function"),
    "once_differentiable": ("function", "once_differentiable"),
    "gradcheck": ("gradcheck", "gradcheck"), "gradgradcheck": ("gradcheck", "gradgradcheck"),
    "Variable": ("variable", "Variable"),
    **{name: (name, None) for name in ("engine", "forward_ad", "function", "functional",
                                       "profiler", "variable")},
}


def __getattr__(name: str):
    """The engine, `Function`, `functional`, `gradcheck` and `profiler`, loaded on first use."""
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{where[0]}")
    value = module if where[1] is None else getattr(module, where[1])
    # Set after the import, which binds the submodule's own name here first: where that name
    # is a function's (`gradcheck`, reached first through `gradgradcheck`), the function.
    globals()[name] = value
    shadowed = _LAZY.get(where[0])
    if shadowed is not None and shadowed[0] == where[0] and shadowed[1] is not None:
        globals()[where[0]] = getattr(module, shadowed[1])
    return value


def __dir__() -> list[str]:
    """The namespace including the names not loaded yet."""
    return sorted(set(globals()) | set(_LAZY))
