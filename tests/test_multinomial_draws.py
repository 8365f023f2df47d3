"""`multinomial` draws PyTorch's samples after the same seed, and leaves the generator where
PyTorch's does: one sample (with or without replacement) and samples without replacement by
the exponential race, several with replacement by the running sums."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("shape", [(5,), (3, 7), (4, 50)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("samples,replacement", [(1, True), (1, False), (3, True), (3, False)])
def test_multinomial_as_pytorch(shape, dtype, samples, replacement):
    probs = np.random.default_rng(sum(shape)).random(shape).astype(dtype)

    def draw(lib):
        lib.manual_seed(123)
        picked = lib.multinomial(lib.tensor(probs), samples, replacement)
        return picked.numpy().tolist(), lib.rand(3).numpy().tolist()

    assert draw(fusegrad) == draw(torch)
