"""Pooling layers: max, average, adaptive (average and max), power-average (LPPool),
fractional max and max unpooling, over 1, 2 and 3 dims."""

from ..._tensor import Tensor
from .. import functional as F
from ._arg_errors import missing_attribute, tensor_arguments
from .module import Module


class _MaxPoolNd(Module):
    """The window arguments of the max pooling layers (the base PyTorch gives them)."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, "
                f"ceil_mode={self.ceil_mode}")


class MaxPool2d(_MaxPoolNd):
    """2-D max pooling."""

    def forward(self, input: Tensor):
        """Maxima over the windows."""
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class MaxPool1d(_MaxPoolNd):
    """1-D max pooling."""

    def forward(self, input: Tensor):
        """Maxima over the windows."""
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class MaxPool3d(_MaxPoolNd):
    """3-D max pooling."""

    def forward(self, input: Tensor):
        """Maxima over the windows."""
        return F.max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class _AvgPoolNd(Module):
    """The base PyTorch gives the average pooling layers (their repr); the 2-D and 3-D
    layers' arguments."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override=None) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(_AvgPoolNd):
    """2-D average pooling."""

    def forward(self, input: Tensor) -> Tensor:
        """Means over the windows."""
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class AvgPool3d(_AvgPoolNd):
    """3-D average pooling."""

    def forward(self, input: Tensor) -> Tensor:
        """Means over the windows."""
        return F.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class AvgPool1d(_AvgPoolNd):
    """1-D average pooling."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:
        Module.__init__(self)  # (PyTorch's 1-D layer has no divisor_override)
        self.kernel_size = _one(kernel_size)
        self.stride = _one(stride if stride is not None else kernel_size)
        self.padding = _one(padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input: Tensor) -> Tensor:
        """Means over the windows."""
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


def _one(v) -> tuple:
    return (v,) if isinstance(v, int) else tuple(v)


class _AdaptiveAvgPoolNd(Module):
    """The output size of the adaptive average pooling layers (the base PyTorch gives
    them)."""

    def __init__(self, output_size) -> None:
        super().__init__()
        self.output_size = output_size

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """Average pooling to a fixed output size."""

    def forward(self, input: Tensor) -> Tensor:
        """Means over adaptive windows."""
        return F.adaptive_avg_pool2d(input, self.output_size)


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """1-D average pooling to a fixed output size."""

    def forward(self, input: Tensor) -> Tensor:
        """Means over adaptive windows."""
        return F.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    """3-D average pooling to a fixed output size."""

    def forward(self, input: Tensor) -> Tensor:
        """Means over adaptive windows."""
        return F.adaptive_avg_pool3d(input, self.output_size)


class _AdaptiveMaxPoolNd(Module):
    """The output size and `return_indices` of the adaptive max pooling layers."""

    def __init__(self, output_size, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """Max over adaptive windows of (N, C, L) input."""

    def forward(self, input: Tensor):
        """adaptive_max_pool1d(input)."""
        return F.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """Max over adaptive windows of (N, C, H, W) input."""

    def forward(self, input: Tensor):
        """adaptive_max_pool2d(input)."""
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """Max over adaptive windows of (N, C, D, H, W) input."""

    def forward(self, input: Tensor):
        """adaptive_max_pool3d(input)."""
        return F.adaptive_max_pool3d(input, self.output_size, self.return_indices)


class _LPPoolNd(Module):
    """The arguments of the power-average pooling layers."""

    def __init__(self, norm_type: float, kernel_size, stride=None,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    """Power-average pooling over (N, C, L) input."""

    def forward(self, input: Tensor) -> Tensor:
        """lp_pool1d(input)."""
        return F.lp_pool1d(input, float(self.norm_type), self.kernel_size, self.stride,
                           self.ceil_mode)


class LPPool2d(_LPPoolNd):
    """Power-average pooling over (N, C, H, W) input."""

    def forward(self, input: Tensor) -> Tensor:
        """lp_pool2d(input)."""
        return F.lp_pool2d(input, float(self.norm_type), self.kernel_size, self.stride,
                           self.ceil_mode)


class LPPool3d(_LPPoolNd):
    """Power-average pooling over (N, C, D, H, W) input."""

    def forward(self, input: Tensor) -> Tensor:
        """lp_pool3d(input)."""
        return F.lp_pool3d(input, float(self.norm_type), self.kernel_size, self.stride,
                           self.ceil_mode)


class _MaxUnpoolNd(Module):
    """The window arguments of the max unpooling layers, as tuples of `_n`."""

    _n = 1

    def __init__(self, kernel_size, stride=None, padding=0) -> None:
        super().__init__()

        def tup(v):
            return tuple(v) if isinstance(v, (tuple, list)) else (v,) * self._n

        self.kernel_size = tup(kernel_size)
        self.stride = tup(stride if stride is not None else kernel_size)
        self.padding = tup(padding)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """The partial inverse of MaxPool1d: values back at their indices, zeros elsewhere."""

    def forward(self, input: Tensor, indices: Tensor,
                output_size: list[int] | None = None) -> Tensor:
        """max_unpool1d(input, indices)."""
        return F.max_unpool1d(input, indices, self.kernel_size, self.stride, self.padding,
                              output_size)


class MaxUnpool2d(_MaxUnpoolNd):
    """The partial inverse of MaxPool2d: values back at their indices, zeros elsewhere."""

    _n = 2

    def forward(self, input: Tensor, indices: Tensor,
                output_size: list[int] | None = None) -> Tensor:
        """max_unpool2d(input, indices)."""
        return F.max_unpool2d(input, indices, self.kernel_size, self.stride, self.padding,
                              output_size)


class MaxUnpool3d(_MaxUnpoolNd):
    """The partial inverse of MaxPool3d: values back at their indices, zeros elsewhere."""

    _n = 3

    def forward(self, input: Tensor, indices: Tensor,
                output_size: list[int] | None = None) -> Tensor:
        """max_unpool3d(input, indices)."""
        return F.max_unpool3d(input, indices, self.kernel_size, self.stride, self.padding,
                              output_size)


class _FractionalMaxPoolNd(Module):
    _n = 2

    def __init__(self, kernel_size, output_size=None, output_ratio=None,
                 return_indices: bool = False, _random_samples=None) -> None:
        super().__init__()

        def tup(v):
            return (v,) * self._n if not isinstance(v, (tuple, list)) else tuple(v)

        self.kernel_size = tup(kernel_size)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = tup(output_size) if output_size is not None else None
        self.output_ratio = tup(output_ratio) if output_ratio is not None else None
        name = type(self).__name__
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a "
                             f"pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Max pooling over windows at pseudo-random offsets, to `output_size` or
    `output_ratio` of the input's size."""

    def forward(self, input: Tensor):
        """fractional_max_pool2d(input)."""
        return F.fractional_max_pool2d(input, self.kernel_size, self.output_size,
                                       self.output_ratio, self.return_indices,
                                       _random_samples=self._random_samples)


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """3-D max pooling over windows at pseudo-random offsets."""

    _n = 3

    def forward(self, input: Tensor):
        """fractional_max_pool3d(input)."""
        return F.fractional_max_pool3d(input, self.kernel_size, self.output_size,
                                       self.output_ratio, self.return_indices,
                                       _random_samples=self._random_samples)


# What PyTorch's op says of a non-tensor input (see `_arg_errors`).
tensor_arguments(MaxPool1d, lambda m: "max_pool1d_with_indices" if m.return_indices
                 else "max_pool1d", "input")
tensor_arguments(MaxPool2d, lambda m: "max_pool2d_with_indices" if m.return_indices
                 else "max_pool2d", "input")
# with indices, PyTorch reads `.is_cuda` first (a PackedSequence has one and reaches the op)
missing_attribute(MaxPool3d, "is_cuda", when=lambda module, args, kwargs: (
    module.return_indices and not hasattr(args[0] if args else kwargs.get("input"), "is_cuda")))
tensor_arguments(MaxPool3d, lambda m: "max_pool3d_with_indices" if m.return_indices
                 else "max_pool3d", "input")
tensor_arguments(AvgPool1d, "avg_pool1d", "input")
tensor_arguments(AvgPool2d, "avg_pool2d", "input")
tensor_arguments(AvgPool3d, "avg_pool3d", "input")
tensor_arguments(AdaptiveAvgPool1d, "adaptive_avg_pool1d", "input")
tensor_arguments(AdaptiveMaxPool1d, "adaptive_max_pool1d", "input")
for _cls in (AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool2d, AdaptiveMaxPool3d):
    missing_attribute(_cls, "size")
for _cls in (LPPool1d, LPPool2d, LPPool3d):
    missing_attribute(_cls, "pow")
for _cls in (MaxUnpool1d, MaxUnpool2d, MaxUnpool3d):
    missing_attribute(_cls, "size")
missing_attribute(FractionalMaxPool2d, "dim")
missing_attribute(FractionalMaxPool3d, "dim")
del _cls
