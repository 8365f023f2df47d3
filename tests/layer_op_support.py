"""Checks shared by the tests of the recurrent layers' whole-layer registry ops
(`mkldnn_rnn_layer`, `_gru_layer`, `_rnn_layer`): float64 gradcheck and gradgradcheck of
the op's derivative, and the shapes fake tensors get."""

from __future__ import annotations

import numpy as np

import fusegrad
from fusegrad import _dispatch


def gradchecked(op, args: list, has_biases: bool, outputs: int):
    """gradcheck and gradgradcheck of `op` over its first `outputs` outputs, every array of
    `args` a leaf (the two bias slots, 3 and 4, constants when `has_biases` is False).
    Returns (fn of the leaves, leaves, the arguments as tensors, the leaves' positions)."""
    pos = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]
    if not has_biases:
        pos = [i for i in pos if i not in (3, 4)]
    leaves = tuple(fusegrad.tensor(args[i], requires_grad=True) for i in pos)
    base = [fusegrad.tensor(a) if isinstance(a, np.ndarray) else a for a in args]

    def fn(*xs):
        a = list(base)
        for i, x in zip(pos, xs):
            a[i] = x
        return tuple(_dispatch.call(op, *a)[:outputs])

    assert fusegrad.autograd.gradcheck(fn, leaves)
    assert fusegrad.autograd.gradgradcheck(fn, leaves)
    return fn, leaves, base, pos


def check_fake_shapes(op, base: list) -> None:
    """Fake tensors get the kernel's shapes and dtypes."""
    from fusegrad._fake import FakeTensorMode

    real = _dispatch.call(op, *base)
    with FakeTensorMode() as mode:
        fakes = _dispatch.call(op, *[mode.from_tensor(a) if isinstance(a, fusegrad.Tensor)
                                     else a for a in base])
    assert [tuple(f.shape) for f in fakes] == [tuple(r.shape) for r in real]
    assert [f.dtype for f in fakes] == [r.dtype for r in real]
