"""SGD with momentum, dampening, Nesterov momentum, weight decay and maximize."""

from __future__ import annotations

import numpy as np

from .._tensor import Tensor
from ..ops import _native
from .optimizer import BLOCKED_MIN, Optimizer

# `flags` bits of the C update (ops/native/optim.c).
_MAXIMIZE, _NESTEROV, _MOMENTUM, _FIRST = 1, 2, 4, 8
# Parameters of fewer elements keep the NumPy passes: a C call and its three addresses cost
# more than the passes save (measured per parameter: 6 against 4 us at 2400 elements, 9.6
# against 10.9 at 30000).
NATIVE_MIN = 1 << 14


class SGD(Optimizer):
    """Stochastic gradient descent (PyTorch's update rule, term for term)."""

    _fused_check_once = True

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach=None, differentiable: bool = False, fused=None) -> None:
        if isinstance(lr, Tensor):
            lr = lr.item()
        if lr < 0.0:
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

    def _check_group(self, group: dict) -> None:
        -group["lr"]  # noqa: B018 (the update's first use of lr; see Optimizer._check_group)

    def _keeps_state(self, group: dict) -> bool:
        """Only a momentum buffer is kept: plain SGD leaves `state` empty, as in PyTorch."""
        return group["momentum"] != 0

    def _update(self, p, grad, group, state) -> None:
        data = p._data
        if self._native_update(data, grad, group, state):
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
