"""`torch._subclasses`: the tensor subclasses of the compiler stack; here the fake tensors
(`fake_tensor.FakeTensor`, `FakeTensorMode`)."""

from .fake_tensor import (
                          DynamicOutputShapeException,
                          FakeTensor,
                          FakeTensorMode,
                          UnsupportedFakeTensorException,
)

__all__ = ["DynamicOutputShapeException", "FakeTensor", "FakeTensorMode",
           "UnsupportedFakeTensorException"]
