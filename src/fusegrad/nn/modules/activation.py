"""Activation layers: thin modules over `nn.functional`."""

from ..._tensor import Tensor
from .. import functional as F
from ._arg_errors import inplace_op, missing_attribute, tensor_arguments
from .module import Module


class ReLU(Module):
    """max(x, 0)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """relu(input)."""
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class ReLU6(Module):
    """min(max(x, 0), 6)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """hardtanh(input, 0.0, 6.0): the module passes floats, as PyTorch's (F.relu6 ints)."""
        return F.hardtanh(input, 0.0, 6.0, self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    """x if x > 0 else negative_slope * x."""

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """leaky_relu(input)."""
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace
                                                           else "")


class Hardtanh(Module):
    """Clamp to [min_val, max_val]."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0,
                 inplace: bool = False) -> None:
        super().__init__()
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """hardtanh(input)."""
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + (
            ", inplace=True" if self.inplace else "")


class ELU(Module):
    """x if x > 0 else alpha * (exp(x) - 1)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """elu(input)."""
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Sigmoid(Module):
    """1 / (1 + exp(-x))."""

    def forward(self, input: Tensor) -> Tensor:
        """sigmoid(input)."""
        return input.sigmoid()


class Tanh(Module):
    """Hyperbolic tangent."""

    def forward(self, input: Tensor) -> Tensor:
        """tanh(input)."""
        return input.tanh()


class GELU(Module):
    """x * Phi(x)."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        """gelu(input)."""
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """x * sigmoid(x)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """silu(input)."""
        return F.silu(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Softplus(Module):
    """log(1 + exp(beta x)) / beta."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input: Tensor) -> Tensor:
        """softplus(input)."""
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Softmax(Module):
    """softmax along `dim`."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        """softmax(input, dim)."""
        return F.softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """log_softmax along `dim`."""

    def forward(self, input: Tensor) -> Tensor:
        """log_softmax(input, dim)."""
        return F.log_softmax(input, self.dim, _stacklevel=5)


class _InplaceActivation(Module):
    """An activation whose only option is `inplace`."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class SELU(_InplaceActivation):
    """scale * elu(x, alpha) with the self-normalising constants."""

    def forward(self, input: Tensor) -> Tensor:
        """selu(input)."""
        return F.selu(input, self.inplace)


class CELU(Module):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """celu(input)."""
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Mish(_InplaceActivation):
    """x * tanh(softplus(x))."""

    def forward(self, input: Tensor) -> Tensor:
        """mish(input)."""
        return F.mish(input, inplace=self.inplace)


class Hardsigmoid(_InplaceActivation):
    """clamp(x / 6 + 1 / 2, 0, 1)."""

    def forward(self, input: Tensor) -> Tensor:
        """hardsigmoid(input)."""
        return F.hardsigmoid(input, self.inplace)

    def extra_repr(self) -> str:
        return ""  # (PyTorch's prints no `inplace` for this one)


class Hardswish(_InplaceActivation):
    """x * hardsigmoid(x)."""

    def forward(self, input: Tensor) -> Tensor:
        """hardswish(input)."""
        return F.hardswish(input, self.inplace)

    def extra_repr(self) -> str:
        return ""  # (PyTorch's prints no `inplace` for this one)


class LogSigmoid(Module):
    """log(sigmoid(x))."""

    def forward(self, input: Tensor) -> Tensor:
        """logsigmoid(input)."""
        return F.logsigmoid(input)


class Softsign(Module):
    """x / (1 + |x|)."""

    def forward(self, input: Tensor) -> Tensor:
        """softsign(input)."""
        return F.softsign(input)


class Tanhshrink(Module):
    """x - tanh(x)."""

    def forward(self, input: Tensor) -> Tensor:
        """tanhshrink(input)."""
        return F.tanhshrink(input)


class Softshrink(Module):
    """Shrink towards zero by `lambd`."""

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        """softshrink(input)."""
        return F.softshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return str(self.lambd)


class Hardshrink(Softshrink):
    """Zero where |x| <= lambd."""

    def forward(self, input: Tensor) -> Tensor:
        """hardshrink(input)."""
        return F.hardshrink(input, self.lambd)


class Threshold(Module):
    """x where x > threshold, else value."""

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """threshold(input)."""
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}" + (
            ", inplace=True" if self.inplace else "")


class GLU(Module):
    """Gated linear unit: a * sigmoid(b) for the halves a, b of the input along `dim`."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        """glu(input, dim)."""
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class PReLU(Module):
    """x if x > 0 else a * x, with a learnt slope (one, or one per channel)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None,
                 dtype=None) -> None:
        from ... import _creation
        from ..parameter import Parameter

        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(_creation.empty(num_parameters, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every slope set to `init`."""
        from .. import init as _init

        _init.constant_(self.weight, self.init)

    def forward(self, input: Tensor) -> Tensor:
        """prelu(input, weight)."""
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class RReLU(Module):
    """Leaky ReLU with a random slope in [lower, upper] when training, their mean in eval."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
                 inplace: bool = False) -> None:
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        """rrelu(input)."""
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (
            ", inplace=True" if self.inplace else "")


class Softmin(Softmax):
    """softmax(-x) along `dim`."""

    def forward(self, input: Tensor) -> Tensor:
        """softmin(input, dim)."""
        return F.softmin(input, self.dim, _stacklevel=5)


class Softmax2d(Module):
    """softmax over the channels (dim -3) of a 3-D or 4-D input."""

    def forward(self, input: Tensor) -> Tensor:
        """softmax(input, -3)."""
        if input.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.dim()}D "
                             "instead")
        return F.softmax(input, -3, _stacklevel=5)


# What PyTorch's op says of a non-tensor input (see `_arg_errors`).
for _cls, _op in ((ReLU, inplace_op("relu")), (ReLU6, inplace_op("hardtanh")),
                  (LeakyReLU, inplace_op("leaky_relu")), (Hardtanh, inplace_op("hardtanh")),
                  (ELU, inplace_op("elu")), (Sigmoid, "sigmoid"), (Tanh, "tanh"),
                  (GELU, "gelu"), (SiLU, inplace_op("silu")), (Softplus, "softplus"),
                  (SELU, inplace_op("selu")), (CELU, inplace_op("celu")),
                  (Mish, inplace_op("mish")), (Hardsigmoid, inplace_op("hardsigmoid")),
                  (Hardswish, inplace_op("hardswish")), (LogSigmoid, "log_sigmoid"),
                  (Softshrink, "softshrink"), (Hardshrink, "hardshrink"),
                  (Threshold, inplace_op("threshold")), (PReLU, "prelu"),
                  (RReLU, inplace_op("rrelu"))):
    tensor_arguments(_cls, _op, "input")
missing_attribute(GLU, "dim")
missing_attribute(Softsign, "abs")
missing_attribute(Tanhshrink, "tanh")
del _cls, _op


# Defined beside its helpers in `attention`; PyTorch's module for it is this one.
from .attention import MultiheadAttention  # noqa: E402, F401
