"""Fractional max pooling and 3-D adaptive max pooling against PyTorch: values, indices,
gradients (overlapping windows' shared maxima summed) and the node names
(`FractionalMaxPool2DBackward0`, ...), batched and unbatched."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad

torch = pytest.importorskip("torch")

CASES = {
    "adaptive 3d": lambda F, x4, x5, s2, s3: F.adaptive_max_pool3d(x5, 2, return_indices=True),
    "adaptive 3d unbatched": lambda F, x4, x5, s2, s3: F.adaptive_max_pool3d(
        x5[0], (3, 2, 2), return_indices=True),
    "fractional 2d": lambda F, x4, x5, s2, s3: F.fractional_max_pool2d(
        x4, 2, output_size=3, _random_samples=s2, return_indices=True),
    "fractional 2d unbatched, overlapping": lambda F, x4, x5, s2, s3: F.fractional_max_pool2d(
        x4[0], 3, output_size=5, _random_samples=s2[:1], return_indices=True),
    "fractional 3d": lambda F, x4, x5, s2, s3: F.fractional_max_pool3d(
        x5, 2, output_size=(3, 3, 3), _random_samples=s3, return_indices=True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_as_pytorch(case):
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((2, 3, 7, 7)), rng.standard_normal((2, 3, 6, 7, 7)),
            rng.random((2, 3, 2)), rng.random((2, 3, 3))]

    def run(lib):
        x4, x5 = (lib.tensor(d, requires_grad=True) for d in data[:2])
        s2, s3 = (lib.tensor(d) for d in data[2:])
        out, idx = CASES[case](lib.nn.functional, x4, x5, s2, s3)
        weights = lib.arange(out.numel(), dtype=out.dtype).reshape(tuple(out.shape))
        (out * weights).sum().backward()
        grads = [x.grad.numpy() if x.grad is not None else None for x in (x4, x5)]
        return out.grad_fn.name(), out.detach().numpy(), idx.numpy(), grads

    ours, theirs = run(fusegrad), run(torch)
    assert ours[0] == theirs[0]
    np.testing.assert_array_equal(ours[1], theirs[1])
    np.testing.assert_array_equal(ours[2], theirs[2])
    for a, b in zip(ours[3], theirs[3]):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-12)
