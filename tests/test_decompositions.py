"""Every registry entry with a `decomposition` against the entry itself, on its own samples.

The oracle is eager execution of the op (its kernel and derivative, which
tests/test_ops_registry.py checks against PyTorch): the decomposition, run eagerly with
autograd, must give the op's values and the op's input gradients for a random cotangent,
within the entry's tolerance. The decomposed graph must close over core ops (entries without
a decomposition), and random ops must draw the same values as eager for the same seed.
"""

from __future__ import annotations

import os
import zlib

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import fusegrad  # noqa: E402
from fusegrad import _dispatch  # noqa: E402
from fusegrad.ops import REGISTRY  # noqa: E402

DTYPES = [np.float32, np.float64]
DECOMPOSED = sorted(n for n, op in REGISTRY.items() if op.decomposition is not None)
# Gradient tolerances where the op's derivative is PyTorch's rounded formula and the
# decomposition's is exact: hardsigmoid's backward multiplies by float32 1/6 in every dtype.
GRAD_TOL = {"hardsigmoid": 1e-7, "hardsigmoid_": 1e-7}


def _fg(x, requires_grad=True):
    if isinstance(x, np.ndarray):
        t = fusegrad.from_numpy(x.copy())
        return t.requires_grad_(requires_grad and t.is_floating_point())
    if isinstance(x, list):
        return [_fg(v, requires_grad) for v in x]
    return x


def _leaves(args):
    out = []
    for a in args:
        if isinstance(a, list):
            out += _leaves(a)
        elif isinstance(a, fusegrad.Tensor) and a.requires_grad:
            out.append(a)
    return out


def _tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _tol(op, dtype):
    default = 1e-4 if dtype == np.float32 else 1e-10
    return op.tolerance.get(np.dtype(dtype).name, default)


def _samples(op, dtype):
    rng = np.random.default_rng(zlib.crc32(op.name.encode()))
    return op.samples(rng, np.dtype(dtype))


def _close(a, b, tol, what):
    a = np.asarray(a.detach().numpy(), dtype=np.float64)
    b = np.asarray(b.detach().numpy(), dtype=np.float64)
    assert a.shape == b.shape, f"{what}: shape {a.shape} != {b.shape}"
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=what, equal_nan=True)


def check_decomposition(op, args, tol, what, seed=0, grad_tol=None) -> None:
    """`op.decomposition(*args)` against `op(*args)`: values, dtypes, and input gradients."""
    ref_in = tuple(_fg(a) for a in args)
    dec_in = tuple(_fg(a) for a in args)
    fusegrad.manual_seed(seed)
    ref = _tuple(_dispatch.call(op, *ref_in))
    fusegrad.manual_seed(seed)
    dec = _tuple(op.decomposition(*dec_in))
    assert len(ref) == len(dec), what
    for i, (r, d) in enumerate(zip(ref, dec)):
        assert r.dtype == d.dtype, f"{what} output {i}: dtype {d.dtype} != {r.dtype}"
        _close(d, r, tol, f"{what} output {i}")
    pairs = [(r, d) for r, d in zip(ref, dec) if r.grad_fn is not None]
    if not pairs:
        return
    rng = np.random.default_rng(seed)
    ref_loss = dec_loss = 0
    for r, d in pairs:
        cot = fusegrad.from_numpy(rng.standard_normal(tuple(r.shape)).astype(r.dtype.np))
        ref_loss = ref_loss + (r * cot).sum()
        dec_loss = dec_loss + (d * cot).sum()
    ref_loss.backward()
    dec_loss.backward()
    for i, (a, b) in enumerate(zip(_leaves(dec_in), _leaves(ref_in))):
        if b.grad is None:
            assert a.grad is None or not a.grad.numpy().any(), f"{what} grad {i}"
            continue
        assert a.grad is not None, f"{what}: no gradient for input {i}"
        _close(a.grad, b.grad, grad_tol or tol * 10, f"{what} grad {i}")


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("name", DECOMPOSED)
def test_decomposition_matches_op(name, dtype):
    op = REGISTRY[name]
    for k, sample in enumerate(_samples(op, dtype)):
        check_decomposition(op, sample.args, _tol(op, dtype), f"{name} sample {k} "
                            f"({sample.name})", seed=k, grad_tol=GRAD_TOL.get(name))
