"""The common operator calls (`a * b`, `a @ b`, `a == b`, `x[i]`, `x[i:j]`) on plain tensors,
Parameters, subclasses and under a TorchFunctionMode, checked against PyTorch: their short
paths give the same values, autograd nodes, errors and protocol calls as the general ones.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad as fg

DATA = np.random.default_rng(3).standard_normal((5, 4)).round(3)
OTHER = np.random.default_rng(4).standard_normal((4, 4)).round(3)

_INDICES = ["0", "-1", "4", "1:3", ":", "::2", "-3:", "10:20", "3:1", ":, 1", "0, 1", "..., 0",
            "None"]
_ERRORS = ["5", "-6", "::-1", "::0", "1.5"]


def _observe(T, fn):
    try:
        r = fn()
    except Exception as e:  # noqa: BLE001 - the error is what is compared
        return type(e).__name__, str(e)
    values = r.detach().numpy().astype(float).round(4).tolist()
    return tuple(r.shape), values, type(r.grad_fn).__name__


@pytest.mark.parametrize("index", _INDICES + _ERRORS)
@pytest.mark.parametrize("grad", [False, True])
def test_basic_indexing_matches_pytorch(index, grad):
    """Values, the recorded node and the gradient of `x[index]`; PyTorch's error for a bad
    index."""

    def scenario(T):
        x = T.tensor(DATA, dtype=T.float32, requires_grad=grad)
        got = _observe(T, lambda: eval(f"x[{index}]", {"x": x}))
        if grad and len(got) == 3:
            eval(f"x[{index}]", {"x": x}).sum().backward()
            got += (x.grad.numpy().tolist(),)
        return got

    assert scenario(fg) == scenario(torch)


def test_indexing_zero_dim_and_parameter():
    def scenario(T):
        p = T.nn.Parameter(T.tensor(DATA, dtype=T.float32))
        s = T.tensor(2.0)
        return [_observe(T, lambda: p[1]), _observe(T, lambda: p[1:4:2]),
                _observe(T, lambda: s[0])[0], _observe(T, lambda: s[...])]

    assert scenario(fg) == scenario(torch)


@pytest.mark.parametrize("expr", ["x * y", "x * 2", "2.5 * x", "x + True", "x - y", "x / y",
                                  "x @ y", "x @ v", "x == y", "x < 0.5", "x != 1", "p * x",
                                  "p @ y", "x * p", "x[1] * y[2]", "x ** 2", "2 ** x",
                                  "1 / x", "x.abs() ** y", "2.5 / x"])
def test_operators_values_and_nodes(expr):
    def scenario(T):
        x = T.tensor(OTHER, dtype=T.float32, requires_grad=True)
        y = T.tensor(OTHER.T.copy(), dtype=T.float32)
        v = T.tensor(OTHER[0], dtype=T.float32)
        p = T.nn.Parameter(T.tensor(OTHER * 2, dtype=T.float32))
        return _observe(T, lambda: eval(expr, {"x": x, "y": y, "v": v, "p": p}))

    assert scenario(fg) == scenario(torch)


def test_mode_sees_plain_operators_and_indexing():
    """While a mode is active, the short paths give way: the mode sees each operator."""

    def scenario(T):
        log = []

        class Recorder(T.overrides.TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                log.append((func.__name__, len(args)))
                return func(*args, **(kwargs or {}))

        x = T.tensor(OTHER, dtype=T.float32)
        with Recorder():
            results = [x * x, x * 2, x @ x, x == x, x[0], x[1:3], x[0, 1], x ** 2, 2 / x]
        after = x * x
        return log, [r.numpy().astype(float).round(4).tolist() for r in results + [after]]

    assert scenario(fg) == scenario(torch)


def test_plain_self_with_subclass_operand_asks_the_subclass():
    def scenario(T):
        log = []

        class Logged(T.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                log.append(func.__name__)
                return super().__torch_function__(func, types, args, kwargs)

        x = T.tensor(OTHER, dtype=T.float32)
        sub = x.as_subclass(Logged)
        del log[:]
        results = [x * sub, x @ sub, x == sub, x[sub[0, 0].long() * 0], sub[1:2]]
        return log, [type(r).__name__ for r in results]

    assert scenario(fg) == scenario(torch)
