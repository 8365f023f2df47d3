"""`torch._subclasses.fake_tensor`: fusegrad's fake tensors (`fusegrad._fake`) under
PyTorch's names.

`FakeTensorMode` takes PyTorch's constructor options. It makes fakes of the real tensors an
op meets (a module's parameters included) whatever `allow_non_fake_inputs` says, where
PyTorch's mode refuses them unless that option is set; and its sizes are always static (a
`shape_env` is accepted and not used). An op whose output depends on the data raises
`DataDependentOutputError`, which both of PyTorch's exceptions for it name
(`DataDependentOutputException`, `DynamicOutputShapeException`).
"""

from __future__ import annotations

from typing import Any

from .._fake import DataDependentOutputError, FakeTensor
from .._fake import FakeTensorMode as _FakeTensorMode

__all__ = ["FakeTensor", "FakeTensorMode", "DataDependentOutputException",
           "DynamicOutputShapeException", "UnsupportedFakeTensorException"]

DataDependentOutputException = DataDependentOutputError
DynamicOutputShapeException = DataDependentOutputError


class UnsupportedFakeTensorException(RuntimeError):
    """An operation fake tensors cannot run."""


class FakeTensorMode(_FakeTensorMode):
    """While active, ops and factory functions make FakeTensors (see the module)."""

    def __init__(self, *, allow_fallback_kernels: bool = True,
                 allow_non_fake_inputs: bool = False, shape_env: Any = None,
                 static_shapes: bool | None = None, export: bool = False) -> None:
        self.allow_fallback_kernels = allow_fallback_kernels
        self.allow_non_fake_inputs = allow_non_fake_inputs
        self.shape_env = shape_env
        self.static_shapes = True if static_shapes is None else static_shapes
        self.export = export
