"""Batch and layer norm refuse statistics and parameters of the wrong size with PyTorch's
errors (the C kernels would read past their ends), leaving the running statistics as they
were."""

import numpy as np
import pytest
import torch

import fusegrad

X = np.arange(32, dtype=np.float32).reshape(2, 4, 2, 2)

BATCH_NORM = {
    "module, train": lambda L, x: L.nn.BatchNorm2d(3)(x),
    "module, eval": lambda L, x: L.nn.BatchNorm2d(3).eval()(x),
    "1-d module": lambda L, x: L.nn.BatchNorm1d(3)(L.zeros(2, 4)),
    "weight": lambda L, x: L.nn.functional.batch_norm(
        x, None, None, weight=L.ones(3), bias=L.ones(3), training=True),
    "bias": lambda L, x: L.nn.functional.batch_norm(
        x, None, None, weight=L.ones(4), bias=L.ones(3), training=True),
    "eval without running_mean": lambda L, x: L.nn.functional.batch_norm(x, None, None),
    "eval without running_var": lambda L, x: L.nn.functional.batch_norm(x, L.zeros(4), None),
    "torch.batch_norm": lambda L, x: L.batch_norm(x, L.ones(3), None, L.zeros(4), L.ones(4),
                                                  True, 0.1, 1e-5, False),
    "instance norm": lambda L, x: L.nn.functional.instance_norm(x, L.zeros(3), L.ones(3)),
}
LAYER_NORM = {
    "weight": lambda L, x: L.nn.functional.layer_norm(x, (2, 2), L.ones(3)),
    "bias": lambda L, x: L.nn.functional.layer_norm(x, (2, 2), None, L.ones(2)),
    "weight of the input's size": lambda L, x: L.nn.functional.layer_norm(x, (2, 2), L.ones(4)),
    "input": lambda L, x: L.nn.functional.layer_norm(x, (3,)),
    "empty shape": lambda L, x: L.nn.functional.layer_norm(x, ()),
    "module": lambda L, x: L.nn.LayerNorm(3)(x),
}


def _error(fn, lib):
    with pytest.raises(Exception) as info:
        fn(lib, lib.from_numpy(X.copy()))
    return type(info.value), str(info.value)


@pytest.mark.parametrize("name", list(BATCH_NORM) + list(LAYER_NORM))
def test_error_as_torch(name):
    fn = BATCH_NORM.get(name) or LAYER_NORM[name]
    assert _error(fn, fusegrad) == _error(fn, torch)


def test_running_statistics_untouched_by_a_refused_call():
    """(The module counts the batch before the functional call refuses it, in both.)"""
    state = []
    for lib in (fusegrad, torch):
        bn = lib.nn.BatchNorm2d(3)
        with pytest.raises(RuntimeError, match="running_mean should contain 4 elements not 3"):
            bn(lib.from_numpy(X.copy()))
        state.append((bn.running_mean.tolist(), bn.running_var.tolist(),
                      int(bn.num_batches_tracked)))
    assert state[0] == state[1] == ([0.0] * 3, [1.0] * 3, 1)


def test_right_sizes_still_normalise_as_torch():
    outs = []
    for lib in (fusegrad, torch):
        x = lib.from_numpy(X.copy())
        outs.append((lib.nn.functional.batch_norm(x, lib.zeros(4), lib.ones(4), lib.ones(4),
                                                   lib.zeros(4), training=True).numpy(),
                     lib.nn.functional.layer_norm(x, (2, 2), lib.ones(2, 2)).numpy()))
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
