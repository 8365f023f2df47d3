"""In-place ops inside `vmap` against PyTorch: a batched value written into an unmapped
tensor is an error, an in-place op on unbatched values happens once, and writes into an
example's slice reach the mapped input."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402


def _run(lib, fn, in_dims):
    a = lib.ones(3)
    b = lib.arange(6.0).view(2, 3)
    try:
        out = lib.func.vmap(fn, in_dims=in_dims)(a, b)
    except RuntimeError:
        return "error", a.tolist(), b.tolist()
    return out.tolist(), a.tolist(), b.tolist()


PROGRAMS = {
    "batched_into_unmapped": (lambda a, b: a.add_(b), (None, 0)),
    "batched_sum_into_unmapped": (lambda a, b: a.mul_(b.sum()), (None, 0)),
    "unbatched_in_place_once": (lambda a, b: a.add_(1) * b, (None, 0)),
    "self_referencing_once": (lambda a, b: a.add_(a) + b, (None, 0)),
    "into_the_mapped_input": (lambda a, b: b.mul_(2) + a, (None, 0)),
    "into_a_new_tensor": (lambda a, b: (b * 1).add_(a), (None, 0)),
    "into_a_view_of_unmapped": (lambda a, b: a[:2].add_(b[:2]), (None, 0)),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_vmap_in_place_as_torch(name):
    fn, in_dims = PROGRAMS[name]
    assert _run(fusegrad, fn, in_dims) == _run(torch, fn, in_dims)
