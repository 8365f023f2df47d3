"""Conv1d/2d/3d and ConvTranspose1d/2d/3d (one `convolution` op each call)."""

from __future__ import annotations

import math

from ... import _creation
from .. import functional as F
from .. import init
from ..parameter import Parameter, UninitializedParameter
from ._arg_errors import missing_attribute, tensor_arguments
from .lazy import LazyModuleMixin
from .module import Module


def _tuple(x, n: int) -> tuple:
    if isinstance(x, int):
        return (x,) * n
    x = tuple(x)
    return x * n if len(x) == 1 and n > 1 else x


class _ConvNd(Module):
    _spatial = 2
    _transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None, output_padding=0) -> None:
        super().__init__()
        n = self._spatial
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and any(s != 1 for s in _tuple(stride, n)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        modes = {"zeros", "reflect", "replicate", "circular"}  # a set: PyTorch shows its repr
        if padding_mode not in modes:
            raise ValueError(f"padding_mode must be one of {modes}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _tuple(kernel_size, n)
        self.stride = _tuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _tuple(padding, n)
        self.dilation = _tuple(dilation, n)
        self.transposed = self._transposed
        self.output_padding = _tuple(output_padding, n)
        self.groups = groups
        self.padding_mode = padding_mode
        self._reversed_padding_repeated_twice = self._pad_pairs(self.padding, self.dilation)
        shape = ((in_channels, out_channels // groups) if self.transposed
                 else (out_channels, in_channels // groups))
        self.weight = Parameter(_creation.empty(shape + self.kernel_size, dtype=dtype))
        if bias:
            self.bias = Parameter(_creation.empty(out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def _pad_pairs(self, padding, dilation) -> list:
        """F.pad's list for a non-zero `padding_mode`: (before, after) per spatial dim, last
        dim first; 'same' puts the odd element of the total after."""
        out = []
        for i in reversed(range(self._spatial)):
            if padding == "valid":
                out += [0, 0]
            elif padding == "same":
                total = dilation[i] * (self.kernel_size[i] - 1)
                out += [total // 2, total - total // 2]
            else:
                out += [padding[i], padding[i]]
        return out

    def _pad(self, input):
        """`input` padded as a `padding_mode` other than 'zeros' asks (the convolution then
        pads nothing itself)."""
        return F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)

    def reset_parameters(self) -> None:
        """PyTorch's default: kaiming_uniform_(a=sqrt(5)) weights, U(+-1/sqrt(fan_in)) bias."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        if self.padding != (0,) * len(self.padding):
            s += ", padding={padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += ", dilation={dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__)


class Conv1d(_ConvNd):
    """1-D convolution over (N, C, L) or (C, L) input."""

    _spatial = 1

    def forward(self, input):
        """The convolution of `input` with this layer's weight (and bias)."""
        if self.padding_mode != "zeros":
            return F.conv1d(self._pad(input), self.weight, self.bias, self.stride, 0,
                             self.dilation, self.groups)
        return F.conv1d(input, self.weight, self.bias, self.stride, self.padding,
                         self.dilation, self.groups)


class Conv2d(_ConvNd):
    """2-D convolution over (N, C, H, W) or (C, H, W) input."""

    _spatial = 2

    def forward(self, input):
        """The convolution of `input` with this layer's weight (and bias)."""
        if self.padding_mode != "zeros":
            return F.conv2d(self._pad(input), self.weight, self.bias, self.stride, 0,
                             self.dilation, self.groups)
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding,
                         self.dilation, self.groups)


class Conv3d(_ConvNd):
    """3-D convolution over (N, C, D, H, W) or (C, D, H, W) input."""

    _spatial = 3

    def forward(self, input):
        """The convolution of `input` with this layer's weight (and bias)."""
        if self.padding_mode != "zeros":
            return F.conv3d(self._pad(input), self.weight, self.bias, self.stride, 0,
                             self.dilation, self.groups)
        return F.conv3d(input, self.weight, self.bias, self.stride, self.padding,
                         self.dilation, self.groups)


class _ConvTransposeNd(_ConvNd):
    _transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None) -> None:
        if isinstance(padding, str):
            raise ValueError("padding strings are not supported for transposed convolutions")
        if padding_mode != "zeros":
            raise ValueError('Only "zeros" padding mode is supported for '
                             f"{type(self).__name__}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype, output_padding)

    def _output_padding(self, input, output_size) -> tuple:
        """The output_padding that makes the output `output_size` (spatial sizes, optionally
        preceded by the batch and channel sizes); only sizes up to stride - 1 past the
        smallest are reachable."""
        if output_size is None:
            return self.output_padding
        n = self._spatial
        lead = 2 if input.dim() == n + 2 else 1
        if len(output_size) == n + lead:
            output_size = output_size[lead:]
        if len(output_size) != n:
            raise ValueError(f"ConvTranspose{n}D: for {input.dim()}D input, output_size must "
                             f"have {n} or {n + lead} elements (got {len(output_size)})")
        low = [(input.shape[lead + i] - 1) * self.stride[i] - 2 * self.padding[i]
               + self.dilation[i] * (self.kernel_size[i] - 1) + 1 for i in range(n)]
        high = [low[i] + self.stride[i] - 1 for i in range(n)]
        for i in range(n):
            if not low[i] <= output_size[i] <= high[i]:
                # PyTorch names the input by its sizes from dim 2 on, even when unbatched
                raise ValueError(f"requested an output size of {output_size}, but valid sizes "
                                 f"range from {low} to {high} (for an input of "
                                 f"{input.shape[2:]})")
        return tuple(output_size[i] - low[i] for i in range(n))


class ConvTranspose1d(_ConvTransposeNd):
    """The transpose (adjoint) of Conv1d, as used for learned upsampling."""

    _spatial = 1

    def forward(self, input, output_size=None):
        """The transposed convolution of `input`."""
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)


class ConvTranspose2d(_ConvTransposeNd):
    """The transpose (adjoint) of Conv2d, as used for learned upsampling."""

    _spatial = 2

    def forward(self, input, output_size=None):
        """The transposed convolution of `input`."""
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)


class ConvTranspose3d(_ConvTransposeNd):
    """The transpose (adjoint) of Conv3d, as used for learned upsampling of volumes."""

    _spatial = 3

    def forward(self, input, output_size=None):
        """The transposed convolution of `input`."""
        return F.conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)

class _LazyConvXdMixin(LazyModuleMixin):
    """in_channels from the first input (dim 1, or 0 unbatched); then the weight and bias."""

    def reset_parameters(self) -> None:
        """The convolution's initialisation, once the shapes are known."""
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs) -> None:
        """Materialise the weight (and bias) for the input's channel count."""
        if not self.has_uninitialized_params():
            return
        batched = input.dim() == self._spatial + 2
        self.in_channels = input.shape[1] if batched else input.shape[0]
        if self.in_channels % self.groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if self.transposed:
            shape = (self.in_channels, self.out_channels // self.groups)
        else:
            shape = (self.out_channels, self.in_channels // self.groups)
        self.weight.materialize(shape + tuple(self.kernel_size))
        if self.bias is not None:
            self.bias.materialize((self.out_channels,))
        self.reset_parameters()


def _lazy_conv():
    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None,
                 dtype=None) -> None:
        LazyModuleMixin.__init__(self, 0, 0, kernel_size, stride, padding, dilation, groups,
                                 False, padding_mode)
        self._lazy_placeholders(out_channels, bias, dtype)

    return __init__


def _lazy_conv_transpose():
    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros",
                 device=None, dtype=None) -> None:
        LazyModuleMixin.__init__(self, 0, 0, kernel_size, stride, padding, output_padding,
                                 groups, False, dilation, padding_mode)
        self._lazy_placeholders(out_channels, bias, dtype)

    return __init__


def _lazy_placeholders(self, out_channels: int, bias: bool, dtype) -> None:
    self.weight = UninitializedParameter(dtype=dtype)
    self.out_channels = out_channels
    if bias:
        self.bias = UninitializedParameter(dtype=dtype)


_LazyConvXdMixin._lazy_placeholders = _lazy_placeholders


class LazyConv1d(_LazyConvXdMixin, Conv1d):
    """A Conv1d whose in_channels is read from its first input."""

    cls_to_become = Conv1d
    __init__ = _lazy_conv()


class LazyConv2d(_LazyConvXdMixin, Conv2d):
    """A Conv2d whose in_channels is read from its first input."""

    cls_to_become = Conv2d
    __init__ = _lazy_conv()


class LazyConv3d(_LazyConvXdMixin, Conv3d):
    """A Conv3d whose in_channels is read from its first input."""

    cls_to_become = Conv3d
    __init__ = _lazy_conv()


class LazyConvTranspose1d(_LazyConvXdMixin, ConvTranspose1d):
    """A ConvTranspose1d whose in_channels is read from its first input."""

    cls_to_become = ConvTranspose1d
    __init__ = _lazy_conv_transpose()


class LazyConvTranspose2d(_LazyConvXdMixin, ConvTranspose2d):
    """A ConvTranspose2d whose in_channels is read from its first input."""

    cls_to_become = ConvTranspose2d
    __init__ = _lazy_conv_transpose()


class LazyConvTranspose3d(_LazyConvXdMixin, ConvTranspose3d):
    """A ConvTranspose3d whose in_channels is read from its first input."""

    cls_to_become = ConvTranspose3d
    __init__ = _lazy_conv_transpose()


def _no_output_size(module, args, kwargs) -> bool:
    return (args[1] if len(args) > 1 else kwargs.get("output_size")) is None


# What PyTorch's op says of a non-tensor input (see `_arg_errors`); given an output size,
# PyTorch reads the input's `.dim()` first.
for _n, _cls in ((1, ConvTranspose1d), (2, ConvTranspose2d), (3, ConvTranspose3d)):
    tensor_arguments(_cls, f"conv_transpose{_n}d", "input", when=_no_output_size)
    missing_attribute(_cls, "dim", when=lambda module, args, kwargs: not _no_output_size(
        module, args, kwargs))
del _n, _cls
