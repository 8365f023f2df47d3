"""Conv1d/2d/3d and ConvTranspose1d/2d/3d (one `convolution` op each call)."""

import math
import warnings

from ... import _creation
from ..._tensor import Tensor
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
    """The parameters, initialisation and repr of every convolution. Its constructor takes
    PyTorch's internal argument list (sizes as tuples, `transposed` and `output_padding`
    explicit), which the layers' own constructors fill in."""

    _spatial = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride, padding,
                 dilation, transposed: bool, output_padding, groups: int, bias: bool,
                 padding_mode: str, device=None, dtype=None) -> None:
        super().__init__()
        # a subclass of this base alone (not of a layer) gives its dims by its tuples
        n = len(kernel_size) if isinstance(kernel_size, (tuple, list)) else self._spatial
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                # PyTorch shows a set's repr, whose order follows the strings' hashes
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 f"{ {'same', 'valid'} }")
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
        self.transposed = transposed
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

    def _conv_forward(self, input, weight, bias):
        """The convolution with the given weight and bias (each layer's own)."""
        raise NotImplementedError

    def _pad_pairs(self, padding, dilation) -> tuple | list:
        """F.pad's list for a non-zero `padding_mode`: (before, after) per spatial dim, last
        dim first; 'same' puts the odd element of the total after."""
        out = []
        for i in reversed(range(len(self.kernel_size))):
            if padding == "valid":
                out += [0, 0]
            elif padding == "same":
                total = dilation[i] * (self.kernel_size[i] - 1)
                out += [total // 2, total - total // 2]
            else:
                out += [padding[i], padding[i]]
        # a tuple, as PyTorch keeps it, except for a padding string (its list)
        return out if isinstance(padding, str) else tuple(out)

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

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        if not hasattr(self, "padding_mode"):  # pickles from before padding modes
            self.padding_mode = "zeros"


def _conv_init(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
               dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
               device=None, dtype=None) -> None:
    """The constructor of Conv1d/2d/3d (PyTorch's argument list)."""
    n = self._spatial
    _ConvNd.__init__(self, in_channels, out_channels, _tuple(kernel_size, n), _tuple(stride, n),
                     padding if isinstance(padding, str) else _tuple(padding, n),
                     _tuple(dilation, n), False, (0,) * n, groups, bias, padding_mode, device,
                     dtype)


class Conv1d(_ConvNd):
    """1-D convolution over (N, C, L) or (C, L) input."""

    _spatial = 1
    __init__ = _conv_init

    def _conv_forward(self, input, weight, bias):
        """The convolution of `input` with `weight` and `bias` (this layer's settings):
        what forward runs with the layer's own parameters, and weight-standardising
        subclasses with others."""
        if self.padding_mode != "zeros":
            return F.conv1d(self._pad(input), weight, bias, self.stride, 0, self.dilation,
                            self.groups)
        return F.conv1d(input, weight, bias, self.stride, self.padding, self.dilation,
                        self.groups)

    def forward(self, input: Tensor) -> Tensor:
        """The convolution of `input` with this layer's weight (and bias)."""
        return self._conv_forward(input, self.weight, self.bias)


class Conv2d(_ConvNd):
    """2-D convolution over (N, C, H, W) or (C, H, W) input."""

    _spatial = 2
    __init__ = _conv_init

    def _conv_forward(self, input, weight, bias):
        """The convolution of `input` with `weight` and `bias` (this layer's settings)."""
        if self.padding_mode != "zeros":
            return F.conv2d(self._pad(input), weight, bias, self.stride, 0, self.dilation,
                            self.groups)
        return F.conv2d(input, weight, bias, self.stride, self.padding, self.dilation,
                        self.groups)

    def forward(self, input: Tensor) -> Tensor:
        """The convolution of `input` with this layer's weight (and bias)."""
        return self._conv_forward(input, self.weight, self.bias)


class Conv3d(_ConvNd):
    """3-D convolution over (N, C, D, H, W) or (C, D, H, W) input."""

    _spatial = 3
    __init__ = _conv_init

    def _conv_forward(self, input, weight, bias):
        """The convolution of `input` with `weight` and `bias` (this layer's settings)."""
        if self.padding_mode != "zeros":
            return F.conv3d(self._pad(input), weight, bias, self.stride, 0, self.dilation,
                            self.groups)
        return F.conv3d(input, weight, bias, self.stride, self.padding, self.dilation,
                        self.groups)

    def forward(self, input: Tensor) -> Tensor:
        """The convolution of `input` with this layer's weight (and bias)."""
        return self._conv_forward(input, self.weight, self.bias)


class _ConvTransposeNd(_ConvNd):
    """The transposed convolutions' base: zero padding only, and the output padding that
    reaches a requested output size."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride, padding,
                 dilation, transposed: bool, output_padding, groups: int, bias: bool,
                 padding_mode: str, device=None, dtype=None) -> None:
        if padding_mode != "zeros":
            raise ValueError('Only "zeros" padding mode is supported for '
                             f"{type(self).__name__}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         transposed, output_padding, groups, bias, padding_mode, device, dtype)

    def _output_padding(self, input, output_size, stride=None, padding=None,
                        kernel_size=None, num_spatial_dims=None, dilation=None) -> tuple:
        """The output_padding that makes the output `output_size` (spatial sizes, optionally
        preceded by the batch and channel sizes); only sizes up to stride - 1 past the
        smallest are reachable. PyTorch's callers pass the layer's geometry (a dilation left
        out is 1); given only the sizes, this layer's own is used."""
        if output_size is None:
            return self.output_padding
        if stride is None:
            stride, padding, kernel_size = self.stride, self.padding, self.kernel_size
            num_spatial_dims, dilation = len(self.kernel_size), self.dilation
        elif dilation is None:
            dilation = [1] * num_spatial_dims
        n = num_spatial_dims
        lead = 2 if input.dim() == n + 2 else 1
        if len(output_size) == n + lead:
            output_size = output_size[lead:]
        if len(output_size) != n:
            raise ValueError(f"ConvTranspose{n}D: for {input.dim()}D input, output_size must "
                             f"have {n} or {n + lead} elements (got {len(output_size)})")
        low = [(input.shape[lead + i] - 1) * stride[i] - 2 * padding[i]
               + dilation[i] * (kernel_size[i] - 1) + 1 for i in range(n)]
        high = [low[i] + stride[i] - 1 for i in range(n)]
        for i in range(n):
            if not low[i] <= output_size[i] <= high[i]:
                # PyTorch names the input by its sizes from dim 2 on, even when unbatched
                raise ValueError(f"requested an output size of {output_size}, but valid sizes "
                                 f"range from {low} to {high} (for an input of "
                                 f"{input.shape[2:]})")
        return [output_size[i] - low[i] for i in range(n)]


def _conv_transpose_init(self, in_channels: int, out_channels: int, kernel_size, stride=1,
                         padding=0, output_padding=0, groups: int = 1, bias: bool = True,
                         dilation=1, padding_mode: str = "zeros", device=None,
                         dtype=None) -> None:
    """The constructor of ConvTranspose1d/2d/3d (PyTorch's argument list). A padding string
    is no mode here: as in PyTorch, it is taken as a sequence (its characters)."""
    n = self._spatial
    if isinstance(padding, str):
        padding = tuple(padding)
    _ConvTransposeNd.__init__(self, in_channels, out_channels, _tuple(kernel_size, n),
                              _tuple(stride, n), _tuple(padding, n), _tuple(dilation, n),
                              True, _tuple(output_padding, n), groups, bias, padding_mode,
                              device, dtype)


class _ConvTransposeMixin(_ConvTransposeNd):
    """A former base of the transposed convolutions, kept for old subclasses (deprecated,
    as in PyTorch)."""

    def __init__(self, *args, **kwargs) -> None:
        warnings.warn("`_ConvTransposeMixin` is a deprecated internal class. Please consider "
                      "using public APIs.", FutureWarning, stacklevel=2)
        super().__init__(*args, **kwargs)


class ConvTranspose1d(_ConvTransposeNd):
    """The transpose (adjoint) of Conv1d, as used for learned upsampling."""

    _spatial = 1
    __init__ = _conv_transpose_init

    def forward(self, input: Tensor, output_size: list[int] | None = None) -> Tensor:
        """The transposed convolution of `input`."""
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)


class ConvTranspose2d(_ConvTransposeNd):
    """The transpose (adjoint) of Conv2d, as used for learned upsampling."""

    _spatial = 2
    __init__ = _conv_transpose_init

    def forward(self, input: Tensor, output_size: list[int] | None = None) -> Tensor:
        """The transposed convolution of `input`."""
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)


class ConvTranspose3d(_ConvTransposeNd):
    """The transpose (adjoint) of Conv3d, as used for learned upsampling of volumes."""

    _spatial = 3
    __init__ = _conv_transpose_init

    def forward(self, input: Tensor, output_size: list[int] | None = None) -> Tensor:
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

    def _get_num_spatial_dims(self) -> int:
        return self._spatial

    def _get_in_channels(self, input) -> int:
        """The channel count of a batched or unbatched input (any other rank raises)."""
        unbatched = self._get_num_spatial_dims() + 1
        if input.dim() not in (unbatched, unbatched + 1):
            raise RuntimeError(
                f"Expected {unbatched}D (unbatched) or {unbatched + 1}D (batched) input to "
                f"{self.__class__.__name__}, but got input of size: {input.shape}")
        return input.shape[1] if input.dim() == unbatched + 1 else input.shape[0]

    def initialize_parameters(self, input, *args, **kwargs) -> None:
        """Materialise the weight (and bias) for the input's channel count."""
        if not self.has_uninitialized_params():
            return
        self.in_channels = self._get_in_channels(input)
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
