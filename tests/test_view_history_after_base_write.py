"""A view made before its base (or another view of it) was written in place with history
requires grad from then on, as PyTorch's views answer from their regenerated grad_fn: ops
taking that view as an input record it (the recorders once read its stale flag and made
results that required no grad, dropping the gradient). Checked against torch: the results'
requires_grad and the gradient reaching the written values."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg

torch = pytest.importorskip("torch")

# Ops taking the stale view as an input, by call shape (one tensor, two, three, a list,
# views, indexing, layers).
OPS = {
    "mul_number": lambda L, v: v * 2,
    "add_self": lambda L, v: v + v,
    "sum": lambda L, v: v.sum(),
    "neg": lambda L, v: -v,
    "matmul": lambda L, v: v @ v,
    "exp": lambda L, v: v.exp(),
    "relu": lambda L, v: L.relu(v),
    "reshape": lambda L, v: v.reshape(16),
    "select": lambda L, v: v[0],
    "slice": lambda L, v: v[1:, :2],
    "index_list": lambda L, v: v[[0, 1]],
    "mask": lambda L, v: v[v > 0],
    "addmm": lambda L, v: L.addmm(L.zeros(4), v, L.ones(4, 4)),
    "where": lambda L, v: L.where(v > 0, v, L.zeros(4, 4)),
    "cat": lambda L, v: L.cat([L.zeros(4, 4), v]),
    "linear": lambda L, v: L.nn.functional.linear(v, L.ones(3, 4)),
    "conv2d": lambda L, v: L.nn.functional.conv2d(v.reshape(1, 1, 4, 4), L.ones(1, 1, 2, 2)),
    "softmax": lambda L, v: v.softmax(-1),
    "double": lambda L, v: v.double(),
}

# How the base gets its history: through another view, through the base itself.
WRITES = {
    "diagonal_of_transpose": lambda v, y, x: v.diagonal().add_(x.diagonal()),
    "row_of_base": lambda v, y, x: y[2].mul_(x[0]),
    "base_itself": lambda v, y, x: y.add_(x),
}


def _run(L, op, write):
    x = L.tensor(np.arange(1.0, 17.0).reshape(4, 4) / 7, requires_grad=True)
    y = L.zeros(4, 4)
    v = y.t()  # made before the write; nothing reads its flag in between
    WRITES[write](v, y, x)
    r = OPS[op](L, v)
    rg = r.requires_grad
    if rg:
        r.abs().sum().backward()
    return rg, None if x.grad is None else x.grad.numpy()


@pytest.mark.parametrize("write", list(WRITES))
@pytest.mark.parametrize("op", list(OPS))
def test_stale_view_records_as_torch(op, write):
    got_rg, got_grad = _run(fg, op, write)
    want_rg, want_grad = _run(torch, op, write)
    assert got_rg == want_rg
    if want_grad is None:
        assert got_grad is None
    else:
        np.testing.assert_allclose(got_grad, want_grad, rtol=1e-6, atol=1e-7)


def test_no_grad_view_keeps_its_flag():
    """A view made under no_grad of a tensor that requires no grad keeps requiring none
    after its base is written without history (nothing to regenerate)."""
    for L in (fg, torch):
        y = L.zeros(3)
        with L.no_grad():
            v = y[:2]
        y.add_(1)
        assert not (v * 2).requires_grad
