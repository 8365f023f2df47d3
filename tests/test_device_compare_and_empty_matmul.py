"""Devices compare equal to devices only (a string never equals one, as in PyTorch), and
matmul of a batch with a matrix when the contracted dimension is empty."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad

torch = pytest.importorskip("torch")


def _comparisons(lib):
    cpu = lib.device("cpu")
    x = lib.ones(1)
    return [cpu == "cpu", "cpu" == cpu, cpu != "cpu", x.device == "cpu", x.device.type == "cpu",
            x.device == lib.device("cpu"), cpu == lib.device("cpu", 0), cpu == 0,
            lib.device("meta") != lib.device("cpu"), {cpu: 1}.get(lib.device("cpu"))]


def test_device_comparisons_as_pytorch():
    assert _comparisons(fusegrad) == _comparisons(torch)


@pytest.mark.parametrize("shapes", [((1, 4, 0), (0, 2)), ((2, 3, 0), (0,)), ((0, 3, 5), (5, 2)),
                                    ((2, 0, 5), (5,)), ((2, 3, 4), (4, 0))])
def test_batch_matmul_with_empty_dimensions(shapes):
    a, b = shapes

    def run(lib):
        x = lib.ones(*a, requires_grad=True)
        y = lib.ones(*b, requires_grad=True)
        out = lib.matmul(x, y)
        out.sum().backward()
        return out.detach().numpy(), x.grad.numpy(), y.grad.numpy()

    for ours, theirs in zip(run(fusegrad), run(torch)):
        assert ours.shape == theirs.shape
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("bias_shape", [(3,), (2, 4), (4, 1), (1,), (4,)])
def test_addmm_bias_that_cannot_expand(bias_shape):
    def run(lib):
        x = lib.ones(6, 4)
        try:
            return tuple(lib.addmm(lib.ones(*bias_shape), x.T, x).shape)
        except RuntimeError as e:
            return str(e)

    assert run(fusegrad) == run(torch)
