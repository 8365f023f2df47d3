"""The `*_copy` forms of the views (`torch.permute_copy`, ...): values in new contiguous
memory, gradients and node names (`PermuteBackward0_copy`) against PyTorch."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

X = np.random.default_rng(5).standard_normal((3, 4, 1))

CASES = [
    ("permute_copy", ((2, 1, 0),)), ("t_copy", ()), ("view_copy", ((4, 3),)),
    ("alias_copy", ()), ("detach_copy", ()), ("expand_copy", ((2, 3, 4, 5),)),
    ("select_copy", (1, -1)), ("slice_copy", (1, 1, 4, 2)), ("slice_copy", ()),
    ("unfold_copy", (1, 2, 1)), ("diagonal_copy", (1, 0, 1)), ("split_copy", (2,)),
    ("split_copy", (3, 1)), ("split_with_sizes_copy", ([1, 3], 1)), ("unbind_copy", (1,)),
    ("squeeze_copy", ()), ("squeeze_copy", (2,)), ("squeeze_copy", ((0, 2),)),
    ("unsqueeze_copy", (0,)), ("transpose_copy", (0, 1)),
    ("as_strided_copy", ((2, 2), (1, 2), 1)),
]


@pytest.mark.parametrize("name, args", CASES, ids=[f"{c[0]}{i}" for i, c in enumerate(CASES)])
def test_copy_variant(name, args):
    results = []
    for lib in (torch, fusegrad):
        leaf = lib.tensor(X, requires_grad=True)
        base = leaf * 1.0
        if name == "t_copy":
            base = base.squeeze(-1)
        if name == "detach_copy":  # PyTorch records a node that raises in backward
            base = base.detach()
        out = getattr(lib, name)(base, *args)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        total = sum((o * lib.arange(o.numel(), dtype=o.dtype).view(o.shape)).sum() for o in outs
                    if o.requires_grad)
        if isinstance(total, lib.Tensor):
            total.backward()
        results.append(([o.detach().numpy().copy() for o in outs],
                        [type(o.grad_fn).__name__ if o.grad_fn else None for o in outs],
                        [o.is_contiguous() for o in outs], type(out).__name__,
                        None if leaf.grad is None else leaf.grad.numpy()))
        if lib is fusegrad:  # new memory: writing the copy leaves the input alone
            before = base.detach().numpy().copy()
            outs[0].detach().add_(1.0)
            np.testing.assert_array_equal(base.detach().numpy(), before)
    (wv, wn, wc, wt, wg), (gv, gn, gc, gt, gg) = results
    assert gn == wn and gc == wc and gt == wt
    for w, g in zip(wv, gv):
        np.testing.assert_array_equal(g, w)
    assert (wg is None) == (gg is None)
    if wg is not None:
        np.testing.assert_array_equal(gg, wg)
