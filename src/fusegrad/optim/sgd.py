"""SGD with momentum, dampening, Nesterov momentum, weight decay and maximize."""

from __future__ import annotations

import numpy as np

from .. import _dtype, _sparse
from .._tensor import Tensor
from ..ops import _native
from ..ops._util import HALF
from ._checks import check_tensor_lr
from .optimizer import BLOCKED_MIN, Optimizer

# PyTorch's error for a sparse tensor plus a strided one (weight decay, or a momentum
# buffer of the other layout, on a sparse gradient).
_SPARSE_PLUS_DENSE = "add(sparse, dense) is not supported. Use add(dense, sparse) instead."

# `flags` bits of the C update (ops/native/optim.c).
_MAXIMIZE, _NESTEROV, _MOMENTUM, _FIRST = 1, 2, 4, 8
# Parameters of fewer elements keep the NumPy passes: a C call and its three addresses cost
# more than the passes save (measured per parameter: 6 against 4 us at 2400 elements, 9.6
# against 10.9 at 30000).
NATIVE_MIN = 1 << 14


class SGD(Optimizer):
    """Stochastic gradient descent (PyTorch's update rule, term for term)."""

    _fused_check_once = True
    _sparse_grads = True
    _foreach_differentiable = True

    _numeric_step_to_tensor = False  # (PyTorch's SGD keeps no step to convert)
    _SETSTATE_DEFAULTS = (("nesterov", False), ("maximize", False), ("foreach", None),
                        ("differentiable", False), ("fused", False))

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach=None, differentiable: bool = False, fused=None) -> None:
        check_tensor_lr(lr)
        if lr < 0.0:  # (SGD's own comparison: its TypeError for a string names `<`)
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        if fused:
            if differentiable:
                raise RuntimeError("`fused` does not support `differentiable`")
            if foreach:
                raise RuntimeError("`fused` and `foreach` cannot be `True` together.")

    # The options `_traced_update` reads (see `Optimizer._TRACED_OPTIONS`).
    _TRACED_OPTIONS = ("lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize")

    def _traced_state_keys(self, group: dict) -> tuple[str, ...]:
        return ("momentum_buffer",) if group["momentum"] != 0 else ()

    @staticmethod
    def _traced_update(p, grad, *bufs, first, lr, momentum, dampening, weight_decay,
                       nesterov, maximize) -> tuple:
        """PyTorch's single-tensor update of one parameter as tensor operations, which
        capture records into a compiled step's graph (under no_grad): `bufs` holds the
        momentum buffer when there is momentum, except at the `first` step, which makes
        it (returned, as the new state's tensors)."""
        made = ()
        if maximize:
            grad = -grad
        if weight_decay != 0:
            grad = grad.add(p, alpha=weight_decay)
        if momentum != 0:
            if first:
                buf = grad.clone()
                made = (buf,)
            else:
                buf = bufs[0]
                buf.mul_(momentum).add_(grad, alpha=1 - dampening)
            if nesterov:
                grad = grad.add(buf, alpha=momentum)
            else:
                grad = buf
        p.add_(grad, alpha=-lr)
        return made

    def _check_group(self, group: dict) -> None:
        -group["lr"]  # noqa: B018 (the update's first use of lr; see Optimizer._check_group)

    def _update_differentiable(self, p, grad, group, state) -> None:
        """PyTorch's single-tensor update as tensor operations (`differentiable=True`):
        weight decay and Nesterov's term out of place, the momentum buffer (made as a
        detached copy of the first step's gradient) and the parameter in place; a learning
        rate or weight decay that requires grad enters through `addcmul_`, so its gradient
        flows."""
        lr, wd, momentum = group["lr"], group["weight_decay"], group["momentum"]
        if isinstance(lr, Tensor) and lr.dim() != 0:
            lr = lr.squeeze()
        d_p = -grad if group["maximize"] else grad
        if wd != 0:
            if isinstance(wd, Tensor) and wd.requires_grad:
                d_p = d_p.addcmul_(p.clone(), wd)
            else:
                d_p = d_p.add(p, alpha=wd)
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = d_p.detach().clone()
                state["momentum_buffer"] = buf
            else:
                buf.mul_(momentum).add_(d_p, alpha=1 - group["dampening"])
            d_p = d_p.add(buf, alpha=momentum) if group["nesterov"] else buf
        if isinstance(lr, Tensor) and lr.requires_grad:
            p.addcmul_(d_p, lr, value=-1)
        else:
            p.add_(d_p, alpha=-lr)

    def _version_bumps(self, group: dict) -> tuple:
        """PyTorch's in-place operations per step (see `Optimizer._version_bumps`); the
        momentum buffer's are counted in `_update` (none in the step that makes it)."""
        return (0 if group.get("fused") else 1), ()

    def _keeps_state(self, group: dict) -> bool:
        """Only a momentum buffer is kept: plain SGD leaves `state` empty, as in PyTorch."""
        return group["momentum"] != 0

    def _check_sparse(self, group: dict) -> None:
        """The fused update refuses sparse gradients (before any update)."""
        if group.get("fused") and any(p.grad is not None and p.grad.is_sparse
                                      for p in group["params"]):
            raise RuntimeError("`_fused_sgd` does not support sparse gradients")

    def _update_sparse(self, p, grad, group, state) -> None:
        """The step for a sparse gradient, as PyTorch's (found by experiment): the sparse
        momentum buffer scaled and summed with the gradient as sparse tensors are (its
        entries growing, uncoalesced), and the parameter's rows moved entry by entry
        (`_sparse.add_to_dense`). Weight decay, or a buffer and gradient of different
        layouts, raise PyTorch's error for a sparse plus a strided tensor."""
        d_p = _neg(grad) if group["maximize"] else grad
        if group["weight_decay"] != 0:
            raise RuntimeError(_SPARSE_PLUS_DENSE)
        momentum = group["momentum"]
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = d_p._detached_copy()
                state["momentum_buffer"] = buf
            elif buf.is_sparse:
                buf._val = buf._val * momentum
                buf._vc[0] += 1  # (PyTorch's `mul_`; `add_` counts its own)
                _sparse.add_(buf, d_p, 1 - group["dampening"])
            else:  # a strided buffer (from strided gradients) takes the sparse one in
                b = buf._data
                b *= momentum
                _sparse.add_to_dense(b, d_p, 1 - group["dampening"])
                buf._vc[0] += 2  # (PyTorch's `mul_` and `add_`)
            if group["nesterov"]:
                if not buf.is_sparse:
                    raise RuntimeError(_SPARSE_PLUS_DENSE)
                idx, val, coal = _sparse.sum_entries(d_p, buf, momentum)
                d_p = _sparse.make(idx, val, d_p._sshape, coal, d_p._dtype)
            else:
                d_p = buf
        if d_p.is_sparse:
            _sparse.add_to_dense(p._data, d_p, -group["lr"])
        else:  # the strided buffer, added as one (fused) step: PyTorch's add_ with alpha
            data = p._data
            data[...] = _sparse.plus(data, d_p._data, -group["lr"], data.dtype)

    def _update(self, p, grad, group, state) -> None:
        if _sparse.made[0] and state.get("momentum_buffer") is not None and \
                state["momentum_buffer"].is_sparse:  # (it cannot take a strided gradient)
            raise RuntimeError(_SPARSE_PLUS_DENSE)
        data = p._data
        # PyTorch's `mul_` and `add_` on a kept momentum buffer (a new one is a clone; a
        # group without momentum keeps no state; the fused kernel moves no counters).
        buf = state.get("momentum_buffer")
        if buf is not None and not group.get("fused"):
            buf._vc[0] += 2
        if self._native_update(data, grad, group, state):
            return
        if data.dtype in HALF and grad.dtype == data.dtype:
            self._half_update(data, grad, group, state)
            return
        d_p = -grad if group["maximize"] else grad
        wd = group["weight_decay"]
        if wd != 0:
            d_p = d_p + wd * data
        momentum = group["momentum"]
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = Tensor._make(np.array(d_p, copy=True))
                state["momentum_buffer"] = buf
            else:
                damp = 1 - group["dampening"]
                if not group["nesterov"] and self._fused_momentum(data, d_p, buf._data,
                                                                  momentum, damp, group["lr"]):
                    return
                b = buf._data
                b *= momentum
                if damp == 1:  # 1.0 * d_p is d_p exactly: skip the temporary
                    b += d_p
                else:
                    b += damp * d_p
            if group["nesterov"]:
                d_p = d_p + momentum * buf._data
            else:
                d_p = buf._data
        lr = group["lr"]
        if d_p.dtype == data.dtype and d_p.shape == data.shape:
            # lr * d_p into a reused buffer, not a fresh parameter-sized temporary per step.
            step = np.multiply(d_p, lr, out=self._scratch(data))
            data -= step
        else:
            data -= lr * d_p

    @staticmethod
    def _half_update(data: np.ndarray, grad: np.ndarray, group: dict, state: dict) -> None:
        """The update of a float16/bfloat16 parameter: PyTorch's single-tensor operations in
        its order (`add` with an alpha, `mul_`, `add_`), each rounding to the half dtype as
        PyTorch's kernels do, as fusegrad's operations on the arrays (fresh tensors over
        them: the version counters move as `_step_group` counts)."""
        def wrap(a: np.ndarray) -> Tensor:
            return Tensor._make(a, _dtype.from_numpy_dtype(a.dtype))

        p = wrap(data)
        d_p = -wrap(grad) if group["maximize"] else wrap(grad)
        if group["weight_decay"] != 0:
            d_p = d_p.add(p, alpha=group["weight_decay"])
        momentum = group["momentum"]
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = Tensor._make(np.array(d_p._data, copy=True),
                                                              d_p.dtype)
            elif group.get("foreach"):  # (whose `_foreach_mul_` takes the number in the dtype)
                from .._functions.foreach import _foreach_mul_

                b = wrap(buf._data)
                _foreach_mul_([b], momentum)
                b.add_(d_p, alpha=1 - group["dampening"])
            else:
                wrap(buf._data).mul_(momentum).add_(d_p, alpha=1 - group["dampening"])
            d_p = d_p.add(wrap(buf._data), alpha=momentum) if group["nesterov"] else \
                wrap(buf._data)
        p.add_(d_p, alpha=-group["lr"])

    @staticmethod
    def _native_update(data: np.ndarray, grad: np.ndarray, group: dict, state: dict) -> bool:
        """The whole update in one C pass over the parameter (reading its gradient and
        momentum buffer, writing the buffer and the parameter), its element ranges shared
        between the C workers; PyTorch's operations in its order, each `add` with an
        alpha one fused multiply-add as in its CPU kernels, so PyTorch's bits. False, doing
        nothing, for a parameter under `NATIVE_MIN` elements (the NumPy passes cost less
        than the call), without the C kernels or for arrays of another dtype or layout."""
        n = data.size
        if n < NATIVE_MIN:
            return False
        if grad.dtype != data.dtype or grad.shape != data.shape or \
                not (data.flags.c_contiguous and grad.flags.c_contiguous):
            return False
        fn = _native.typed("optim", "sgd", data.dtype, "ppp" + "i" * 7)
        if fn is None:
            return False
        momentum = group["momentum"]
        lr, damp, wd = group["lr"], group["dampening"], group["weight_decay"]
        for v in (lr, momentum, damp, wd):
            if type(v) is not float and type(v) is not int:
                return False  # (a tensor learning rate, ...: the NumPy update serves)
        flags = (_MAXIMIZE if group["maximize"] else 0) | (
            _NESTEROV if group["nesterov"] else 0)
        buf = None
        if momentum != 0:
            flags |= _MOMENTUM
            tensor = state.get("momentum_buffer")
            if tensor is None:
                flags |= _FIRST
                buf = np.empty_like(data)
            else:
                buf = tensor._data
                if buf.dtype != data.dtype or buf.shape != data.shape or \
                        not buf.flags.c_contiguous:
                    return False
        bits = _native.double_bits
        args = (_native.address(data), _native.address(grad),
                _native.address(buf) if buf is not None else None, bits(-lr), bits(momentum),
                bits(1 - damp), bits(wd), flags)
        _native.run_pieces(fn, args, (), n, n)  # element ranges on the C workers
        if flags & _FIRST:
            state["momentum_buffer"] = Tensor._make(buf)
        return True

    def _fused_momentum(self, data: np.ndarray, d_p: np.ndarray, buf: np.ndarray,
                        momentum: float, damp: float, lr: float) -> bool:
        """`buf = momentum * buf + damp * d_p; data -= lr * buf` for a large parameter, one
        cache-sized block of elements after another (the four passes over a block run while
        it is in cache, instead of four passes over the whole parameter through memory),
        the blocks shared between intra-op threads. Each element gets the one-pass
        operations in their order, so the same bits at every block size and thread count.
        False, doing nothing, with dampening or when the arrays are small, of mixed dtype or
        not contiguous (the caller's loop handles those)."""
        if damp != 1 or data.size < BLOCKED_MIN:
            return False
        if not (data.dtype == d_p.dtype == buf.dtype and data.shape == d_p.shape == buf.shape
                and data.flags.c_contiguous and d_p.flags.c_contiguous
                and buf.flags.c_contiguous):
            return False
        flat_p, flat_g, flat_b = data.reshape(-1), d_p.reshape(-1), buf.reshape(-1)

        def update(i: int, j: int, step: np.ndarray) -> None:
            b = flat_b[i:j]
            b *= momentum
            b += flat_g[i:j]
            np.multiply(b, lr, out=step)
            flat_p[i:j] -= step

        self._blocked(data, update)
        return True


def _neg(s):
    """A sparse tensor's negation (a new value array, its entries kept)."""
    return _sparse.make(s._idx, -s._val, s._sshape, s._coal, s._dtype)
