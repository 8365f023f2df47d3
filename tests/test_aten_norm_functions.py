"""`torch.native_layer_norm`, `native_batch_norm`, `native_group_norm` and `native_dropout`:
ATen's spellings at the top level, against PyTorch (results, statistics, running-statistic
updates, gradients and node names)."""

import numpy as np
import pytest
import torch

import fusegrad

RNG = np.random.default_rng(11)


def _both(fn, *arrays):
    """`fn(lib, *tensors)` under both frameworks, with gradients of the first output's
    weighted sum; returns ((outputs, grads, nodes) of fusegrad, of torch)."""
    g = None
    results = []
    for lib in (fusegrad, torch):
        tensors = [None if a is None else lib.from_numpy(a.copy()).requires_grad_()
                   for a in arrays]
        outs = fn(lib, *tensors)
        if g is None:
            g = RNG.standard_normal(tuple(outs[0].shape)).astype(np.float32)
        (outs[0] * lib.from_numpy(g)).sum().backward()
        results.append(([None if o is None else o.detach().numpy() for o in outs],
                        [None if t is None else t.grad.numpy() for t in tensors],
                        type(outs[0].grad_fn).__name__))
    return results


def _close(ours, theirs):
    (o_out, o_grad, o_node), (t_out, t_grad, t_node) = ours, theirs
    assert o_node == t_node
    for a, b in zip(o_out + o_grad, t_out + t_grad, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.shape == b.shape and a.dtype == b.dtype
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_native_layer_norm():
    x = RNG.standard_normal((2, 3, 8)).astype(np.float32)
    w, b = RNG.standard_normal(8).astype(np.float32), RNG.standard_normal(8).astype(np.float32)
    _close(*_both(lambda lib, x, w, b: lib.native_layer_norm(x, [8], w, b, 1e-5), x, w, b))
    _close(*_both(lambda lib, x: lib.native_layer_norm(x, (3, 8), None, None, 1e-5), x))


@pytest.mark.parametrize("training", [True, False])
def test_native_batch_norm_and_its_running_statistics(training):
    x = RNG.standard_normal((4, 3, 5)).astype(np.float32)
    w, b = RNG.standard_normal(3).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
    stats = []

    def fn(lib, x, w, b):
        mean, var = lib.zeros(3), lib.ones(3)
        stats.append((mean, var))
        return lib.native_batch_norm(x, w, b, mean, var, training, 0.1, 1e-5)

    _close(*_both(fn, x, w, b))
    (m1, v1), (m2, v2) = stats
    np.testing.assert_allclose(m1.numpy(), m2.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(v1.numpy(), v2.numpy(), rtol=1e-5, atol=1e-6)


def test_native_group_norm():
    x = RNG.standard_normal((2, 4, 6)).astype(np.float32)
    w, b = RNG.standard_normal(4).astype(np.float32), RNG.standard_normal(4).astype(np.float32)
    _close(*_both(lambda lib, x, w, b: lib.native_group_norm(x, w, b, 2, 4, 6, 2, 1e-5),
                  x, w, b))


def test_native_dropout():
    x = RNG.standard_normal((50, 40)).astype(np.float32)
    _close(*_both(lambda lib, x: lib.native_dropout(x, 0.3, False), x))
    out, mask = fusegrad.native_dropout(fusegrad.from_numpy(x), 0.3, True)
    assert mask.dtype == fusegrad.bool and 0.5 < float(mask.float().mean()) < 0.9
    np.testing.assert_allclose(out.numpy(), np.where(mask.numpy(), x / 0.7, 0), rtol=1e-6)
