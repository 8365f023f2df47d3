"""ATen's functional spellings that programs and exported code call from `torch.*`: index
and strided scatters (`index_reduce`, `as_strided_scatter`), `adjoint`, `norm_except_dim` and
`_weight_norm`, the deprecated `range`, and eager `cond` / `while_loop`. (The spellings of
recurrent layers, samplers and losses are written in nn: `nn/_aten_compat.py`.)
"""

from __future__ import annotations

import builtins
import functools
import math
import warnings

from .. import _creation, _device, _dtype
from .._dispatch import call
from .._tensor import Tensor
from .._torch_function import warn_once_at, warning_stacklevel
from ..ops import normalization as NORM
from ..ops import random as _random_ops
from ..ops import scatter as SC
from ..ops import weight_norm as WN

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}
# index_reduce's reduction modes, after whose check PyTorch gives its beta warning (the op's
# entry, `ops.scatter.index_reduce`, checks them)
_INDEX_REDUCES = ("prod", "mean", "amax", "amin")


# ---------------------------------------------------------------- scatters and views


def adjoint(input: Tensor) -> Tensor:
    """The conjugate transpose of the last two dimensions (a view)."""
    if input.dim() == 1:
        raise RuntimeError("tensor.adjoint() is only supported on matrices or batches of "
                           "matrices. Got 1-D tensor.")
    return input._adjoint("adjoint()")  # conjugates complex dtypes, as `mH`


def as_strided_scatter(input: Tensor, src: Tensor, size, stride,
                       storage_offset=None) -> Tensor:
    """A copy of `input` with `src` written into its `as_strided(size, stride, offset)`
    view."""
    out = input.clone()
    out.as_strided(size, stride, storage_offset).copy_(src)
    return out


def index_reduce(input: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                 include_self: bool = True, out=None) -> Tensor:
    """input with the slices of `source` reduced into the positions `index` names along
    `dim` (prod, mean, amax or amin)."""
    if reduce in _INDEX_REDUCES:  # (PyTorch warns once the reduction passes its check)
        warn_once_at(3, "index_reduce() is in beta and the API may change at any time.")
    result = call(SC.index_reduce, input, dim, index, source, reduce, include_self)
    if out is not None:
        return out.resize_(result.shape).copy_(result)
    return result


def _index_reduce_(self: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                   include_self: bool = True) -> Tensor:
    """In-place index_reduce."""
    if reduce in _INDEX_REDUCES:
        warn_once_at(3, "index_reduce() is in beta and the API may change at any time.")
    return call(SC.index_reduce_, self, dim, index, source, reduce, include_self)


def norm_except_dim(v: Tensor, pow: float = 2, dim: int = 0) -> Tensor:  # noqa: A002
    """The `pow`-norm over every dimension but `dim` (all of them for dim -1), keeping
    `dim`'s size and size 1 elsewhere."""
    if dim == -1:
        return v.norm(pow)
    others = [d for d in builtins.range(v.dim()) if d != dim]
    return v.norm(pow, others, keepdim=True)


def _weight_norm(v: Tensor, g: Tensor, dim: int = 0) -> Tensor:
    """v * g / ||v||, the norm over every dimension but `dim` (all for -1): the fused
    `_weight_norm_interface` for the first or last dim, as PyTorch runs it."""
    if dim == 0 or dim == v.dim() - 1:
        return call(WN.weight_norm_interface, v, g, dim)[0]
    return v * (g / norm_except_dim(v, 2, dim))


def range(start=0, end=None, step=1, *, out=None, dtype=None, layout=None,  # noqa: A001
          device=None, requires_grad: bool = False) -> Tensor:
    """The deprecated inclusive range [start, end] by `step` (default floating dtype)."""
    warnings.warn("torch.range is deprecated and will be removed in a future release because "
                  "its behavior is inconsistent with Python's range builtin. Instead, use "
                  "torch.arange, which produces values in [start, end).", UserWarning,
                  stacklevel=warning_stacklevel(2))
    if end is None:  # (no one-argument form, unlike arange)
        raise TypeError('range() missing 1 required positional arguments: "end"')
    dtype = dtype or _dtype.get_default_dtype()
    # Reckoned as PyTorch's kernel does: in doubles for a floating dtype, in the arguments'
    # integer parts for an integer one; the count is truncated from the division (so
    # `range(0, 1, 0.1)` has 11 elements where floor division would give 10).
    wide = float if dtype.is_floating_point else int
    start, end, step = (wide(v.item() if isinstance(v, Tensor) else v)
                        for v in (start, end, step))
    if not (step > 0 or step < 0):  # (a NaN step too)
        raise RuntimeError("step must be nonzero")
    if wide is float and not (math.isfinite(start) and math.isfinite(end)):
        raise RuntimeError(f"unsupported range: {_creation._fmt_number(start)} -> "
                           f"{_creation._fmt_number(end)}")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    count = int((end - start) / step + 1) if wide is float else (end - start) // step + 1
    dev = _creation._check_device(device)
    # (on the CPU unless told otherwise: PyTorch's default device does not reach `range`)
    out = _creation.arange(count, dtype=_dtype.float64 if wide is float else _dtype.int64,
                           device=_device.cpu) * step + start
    out = out.to(dtype)
    if dev is not None and dev.type == "meta":
        out = out.to(dev)
    return out._requires_grad_unguarded(True) if requires_grad else out


# ---------------------------------------------------------------- control flow, eager


def cond(pred, true_fn, false_fn, operands=()):
    """`true_fn(*operands)` if `pred` else `false_fn(*operands)` (run eagerly). Outputs that
    carry history end in one `CondAutogradOpBackward` node, as PyTorch's cond operator's do;
    the gradient passes through it unchanged into the branch that ran."""
    if isinstance(pred, Tensor) and pred.numel() != 1:
        raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got "
                           f"{pred}.")
    out = true_fn(*operands) if bool(pred) else false_fn(*operands)
    flat = out if isinstance(out, (tuple, list)) else (out,)
    if not any(isinstance(t, Tensor) and t.requires_grad for t in flat):
        return out
    marked = iter(_cond_autograd_op().apply(*flat))
    result = tuple(next(marked) for _ in flat)
    if isinstance(out, (tuple, list)):
        return type(out)(result)
    return result[0]


@functools.cache
def _cond_autograd_op():
    """The autograd Function whose node names a cond's outputs (made on first use: the
    autograd package imports this module's package)."""
    from ..autograd.function import Function

    class CondAutogradOp(Function):
        @staticmethod
        def forward(ctx, *outs):
            return tuple(t.view_as(t) if isinstance(t, Tensor) else t for t in outs)

        @staticmethod
        def backward(ctx, *grads):
            return grads

    return CondAutogradOp


def while_loop(cond_fn, body_fn, carried_inputs):
    """Apply `body_fn` to the carried values while `cond_fn` of them holds (run eagerly)."""
    carried = tuple(carried_inputs)
    while bool(cond_fn(*carried)):
        carried = tuple(body_fn(*carried))
    return carried


class _CompletedFuture:
    """The result of `fork`: already computed, since eager code runs it at once (as
    TorchScript's fork does outside a scripted function)."""

    def __init__(self, value) -> None:
        self._value = value

    def done(self) -> bool:
        """Always True."""
        return True

    def wait(self):
        """The forked call's result."""
        return self._value

    def value(self):
        """The forked call's result."""
        return self._value

    def then(self, callback):
        """A future of `callback(self)`."""
        return _CompletedFuture(callback(self))


def fork(func, *args, **kwargs) -> _CompletedFuture:
    """Run `func(*args, **kwargs)` and return a completed future of its result."""
    return _CompletedFuture(func(*args, **kwargs))


def wait(future):
    """The result of a future from `fork`."""
    return future.wait()


def classproperty(func):
    """A read-only property of the class (the getter receives the class)."""
    if not isinstance(func, (classmethod, staticmethod)):
        func = classmethod(func)
    return _ClassProperty(func)


class _ClassProperty:
    def __init__(self, getter) -> None:
        self.getter = getter

    def __get__(self, instance, owner=None):
        return self.getter.__get__(instance, owner if owner is not None else type(instance))()


def get_file_path(*path_components: str) -> str:
    """A path under the directory that holds the package."""
    import os

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(os.path.dirname(root), *path_components)


# ---------------------------------------------------------------- ATen's normalisation ops


def native_layer_norm(input: Tensor, normalized_shape, weight: Tensor | None,
                      bias: Tensor | None, eps: float) -> tuple:
    """ATen's layer norm: (output, mean, rstd), the statistics keeping the normalised
    dimensions as ones."""
    return call(NORM.native_layer_norm, input, list(normalized_shape), weight, bias, eps)


def native_batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None,
                      running_mean: Tensor | None, running_var: Tensor | None, training: bool,
                      momentum: float, eps: float) -> tuple:
    """ATen's batch norm: (output, saved mean, saved inverse standard deviation); in training
    the running statistics are updated in place."""
    return call(NORM.native_batch_norm, input, weight, bias, running_mean, running_var,
                training, momentum, eps)


def native_group_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None, N: int,
                      C: int, HxW: int, group: int, eps: float) -> tuple:
    """ATen's group norm: (output, mean, rstd), the statistics of shape (N, group)."""
    return call(NORM.native_group_norm, input, weight, bias, N, C, HxW, group, eps)


def native_dropout(input: Tensor, p: float, train: bool | None) -> tuple:
    """ATen's dropout: (output, mask), the mask all True when not training."""
    return call(_random_ops.native_dropout, input, p, train)


__all__ = [
    "native_layer_norm", "native_batch_norm", "native_group_norm", "native_dropout",
    "fork", "wait", "classproperty", "get_file_path",
    "adjoint", "as_strided_scatter", "index_reduce",
    "norm_except_dim", "range", "cond", "while_loop", "_weight_norm",
]
