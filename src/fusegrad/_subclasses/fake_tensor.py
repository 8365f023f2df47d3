"""`torch._subclasses.fake_tensor`: fusegrad's fake tensors (`fusegrad._fake`) under
PyTorch's names.

`FakeTensorMode` takes PyTorch's constructor options. It makes fakes of the real tensors an
op meets (a module's parameters included) whatever `allow_non_fake_inputs` says, where
PyTorch's mode refuses them unless that option is set; and its sizes are always static (a
`shape_env` is accepted and not used). Reading a fake's value raises
`DataDependentOutputException`, an op whose output shape depends on the data
`DynamicOutputShapeException` (both subclasses of fusegrad's `DataDependentOutputError`, which
the compiler catches).
"""

from __future__ import annotations

from typing import Any

from .._fake import (
    DataDependentOutputError,
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
)
from .._fake import FakeTensorMode as _FakeTensorMode
from ..ops.overloads import aten, overload_of

__all__ = ["FakeTensor", "FakeTensorMode", "DataDependentOutputException",
           "DynamicOutputShapeException", "UnsupportedFakeTensorException"]


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

    def __fusegrad_dispatch__(self, op, args):
        try:
            return super().__fusegrad_dispatch__(op, args)
        except (DataDependentOutputException, DynamicOutputShapeException):
            raise
        except DataDependentOutputError as e:
            raise _dynamic_output_shape(op, e) from None


def _dynamic_output_shape(op, e: DataDependentOutputError) -> DynamicOutputShapeException:
    """PyTorch's exception for registry op `op`, whose meta function found the output shape
    depends on the data (`e`): it names the op, or nonzero for a boolean mask's index, which
    PyTorch's index runs."""
    if str(e).startswith("index with a boolean mask"):
        return DynamicOutputShapeException(aten.nonzero.default)
    return DynamicOutputShapeException(overload_of(op))
