"""Batch normalisation: running statistics while training, used in eval mode."""

from ... import _creation, _dtype
from ..._tensor import Tensor
from ...autograd.function import Function
from .. import functional as F
from .. import init
from ..parameter import UninitializedBuffer, UninitializedParameter
from .lazy import LazyModuleMixin
from .module import Module
from .normalization import add_affine_parameters


class _NormBase(Module):
    """What batch and instance normalisation share: the affine parameters, the running
    statistics and their reset, the repr, and loading checkpoints from before the batch
    counter existed (the base PyTorch gives them)."""

    _version = 2

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None,
                 dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        add_affine_parameters(self, (num_features,), affine, bias, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", _creation.zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", _creation.ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked",
                                 _creation.tensor(0, dtype=_dtype.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        """Running mean 0, running variance 1, no batches seen."""
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self) -> None:
        """Running statistics reset; weight 1, bias 0."""
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input) -> None:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs) -> None:
        # Checkpoints from before num_batches_tracked existed (version < 2) load with the
        # counter this module already has.
        version = local_metadata.get("version")
        key = prefix + "num_batches_tracked"
        if (version is None or version < 2) and self.track_running_stats and (
                key not in state_dict):
            state_dict[key] = (self.num_batches_tracked if self.num_batches_tracked is not None
                               else _creation.tensor(0, dtype=_dtype.int64))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)


class _BatchNorm(_NormBase):
    """Batch normalisation's forward (the dimension checks are each subclass's)."""

    def forward(self, input: Tensor) -> Tensor:
        """Normalise with batch statistics (training) or running statistics (eval)."""
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)  # in place: a compiled graph keeps it
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked.item())
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if keep else None,
                            self.running_var if keep else None, self.weight, self.bias,
                            use_batch, factor, self.eps)


def _check_1d(self, input) -> None:
    if input.dim() not in (2, 3):
        raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


def _check_2d(self, input) -> None:
    if input.dim() != 4:
        raise ValueError(f"expected 4D input (got {input.dim()}D input)")


def _check_3d(self, input) -> None:
    if input.dim() != 5:
        raise ValueError(f"expected 5D input (got {input.dim()}D input)")


class BatchNorm1d(_BatchNorm):
    """Batch normalisation over (N, C) or (N, C, L) input."""

    _check_input_dim = _check_1d


class BatchNorm2d(_BatchNorm):
    """Batch normalisation over (N, C, H, W) input."""

    _check_input_dim = _check_2d


class BatchNorm3d(_BatchNorm):
    """Batch normalisation over (N, C, D, H, W) input, per channel."""

    _check_input_dim = _check_3d


class _AllReduceSum(Function):
    """The sum of a tensor over a process group.

    Every rank's loss depends on the sum, so the gradient of one rank's contribution is the
    sum of all ranks' gradients of it: backward is the same all-reduce (as in PyTorch's
    SyncBatchNorm backward, which all-reduces its per-channel gradient sums)."""

    @staticmethod
    def forward(ctx, tensor, group):
        from ... import distributed as dist

        ctx.group = group
        out = tensor.clone()
        dist.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        from ... import distributed as dist

        grad = grad.clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class SyncBatchNorm(_BatchNorm):
    """Batch normalisation with the statistics of the whole batch across a process group.

    While training under an initialized process group of more than one rank, the mean and
    variance of each channel are those of the batches of all ranks together (two all-reduces:
    the sums and counts, then the sums of squared deviations from the global mean, which keeps
    the variance exact where the sum of squares would cancel), the running statistics take the
    global mean and unbiased variance, and backward all-reduces the gradients of the
    statistics. Weight and bias gradients stay per rank: data parallelism averages them.
    Otherwise it is BatchNorm over any input of 2 or more dimensions."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, process_group=None,
                 device=None, dtype=None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)
        self.process_group = process_group

    def _check_input_dim(self, input) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def _sync_group(self):
        """The group to reduce the statistics over, or None when no synchronisation applies
        (eval mode, no process group, one rank, or this rank outside the group)."""
        if not self.training:
            return None
        from ... import distributed as dist

        # The default group read where `dist.is_initialized()` would be called: compiled code
        # reads (and guards) the attribute, where the call would break the graph of every
        # model converted for distributed training.
        if dist.GroupMember.WORLD is None:
            return None
        group = self.process_group if self.process_group else dist.group.WORLD
        return group if dist.get_world_size(group) > 1 else None

    def forward(self, input: Tensor) -> Tensor:
        """Normalise with the global batch statistics when training across ranks."""
        self._check_input_dim(input)
        group = self._sync_group()
        if group is None:
            return super().forward(input)
        if input.shape[1] == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked.item())
        return self._sync_forward(input, group, factor)

    def _sync_forward(self, input, group, factor: float):
        import fusegrad

        channels = input.shape[1]
        dims = [0, *range(2, input.dim())]
        shape = (1, channels) + (1,) * (input.dim() - 2)
        # The statistics are summed in float64: float32 sums over many ranks' elements lose
        # digits the single-process BatchNorm keeps.
        local = input.sum(dims).double()
        count = fusegrad.full((1,), float(input.numel() // max(channels, 1)),
                              dtype=fusegrad.float64)
        totals = _AllReduceSum.apply(fusegrad.cat([local, count]), group)
        n = float(totals[channels].item())
        if n <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got "
                             f"input size {list(input.shape)}")
        mean = totals[:channels] / n
        centered = input - mean.to(input.dtype).reshape(shape)
        squares = (centered * centered).sum(dims).double()
        var = _AllReduceSum.apply(squares, group) / n
        invstd = (var + self.eps).rsqrt()
        out = centered * invstd.to(input.dtype).reshape(shape)
        if self.weight is not None:
            out = out * self.weight.reshape(shape)
        if self.bias is not None:
            out = out + self.bias.reshape(shape)
        if self.running_mean is not None and self.running_var is not None:
            with fusegrad.no_grad():
                self.running_mean.mul_(1 - factor).add_(
                    (mean * factor).to(self.running_mean.dtype))
                self.running_var.mul_(1 - factor).add_(
                    (var * (factor * n / (n - 1))).to(self.running_var.dtype))
        return out

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """`module` with every batch-norm layer replaced by a SyncBatchNorm sharing its
        parameters and running statistics (the module itself if it is one)."""
        out = module
        if isinstance(module, _BatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group, bias=module.bias is not None)
            if module.affine:
                out.weight = module.weight
                out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
            if hasattr(module, "qconfig"):
                out.qconfig = module.qconfig
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out


class _LazyNormBase(LazyModuleMixin):
    """num_features from the first input's dim 1; then the affine parameters and running
    statistics are materialised and reset."""

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None) -> None:
        super().__init__(0, eps, momentum, False, False)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if self.affine:
            self.weight = UninitializedParameter(dtype=dtype)
            self.bias = UninitializedParameter(dtype=dtype)
        if self.track_running_stats:
            self.running_mean = UninitializedBuffer(dtype=dtype)
            self.running_var = UninitializedBuffer(dtype=dtype)
            self.num_batches_tracked = _creation.tensor(0, dtype=_dtype.int64)

    def reset_parameters(self) -> None:
        """Running statistics 0 and 1, weight 1, bias 0, once the shapes are known."""
        if self.has_uninitialized_params() or self.num_features == 0:
            return
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def initialize_parameters(self, input) -> None:
        """Materialise the placeholders for the input's feature count."""
        if not self.has_uninitialized_params():
            return
        self.num_features = input.shape[1]
        if self.affine:
            self.weight.materialize((self.num_features,))
            self.bias.materialize((self.num_features,))
        if self.track_running_stats:
            self.running_mean.materialize((self.num_features,))
            self.running_var.materialize((self.num_features,))
        self.reset_parameters()


# The lazy forms derive from `_BatchNorm`, not from the class they become, as PyTorch's do.
class LazyBatchNorm1d(_LazyNormBase, _BatchNorm):
    """A BatchNorm1d whose num_features is read from its first input."""

    cls_to_become = BatchNorm1d
    _check_input_dim = _check_1d


class LazyBatchNorm2d(_LazyNormBase, _BatchNorm):
    """A BatchNorm2d whose num_features is read from its first input."""

    cls_to_become = BatchNorm2d
    _check_input_dim = _check_2d


class LazyBatchNorm3d(_LazyNormBase, _BatchNorm):
    """A BatchNorm3d whose num_features is read from its first input."""

    cls_to_become = BatchNorm3d
    _check_input_dim = _check_3d
