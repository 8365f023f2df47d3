"""torch.unique(dim=...) and unique_consecutive(dim=...) against PyTorch: values, inverse
indices, counts, graph node, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad

INPUTS = [
    [[1.0, 2.0], [1.0, 2.0], [0.0, 5.0], [1.0, 2.0], [0.0, 5.0]],
    [[3, 1, 3], [1, 2, 1], [3, 0, 3]],
    [[[1, 0], [1, 0]], [[0, 1], [1, 0]], [[1, 0], [1, 0]]],
    [[True, False], [False, True], [True, False]],
    [[-0.0, 1.0], [0.0, 1.0], [2.0, 1.0]],
]


def _outputs(out):
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("fn", ["unique", "unique_consecutive"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("case", range(len(INPUTS)))
@pytest.mark.parametrize("flags", [(False, False), (True, False), (False, True), (True, True)])
def test_unique_dim_matches_torch(fn, dim, case, flags):
    inv, cnt = flags
    kw = dict(return_inverse=inv, return_counts=cnt, dim=dim)
    if fn == "unique":
        kw["sorted"] = case % 2 == 0
    ref = _outputs(getattr(torch, fn)(torch.tensor(INPUTS[case]), **kw))
    got = _outputs(getattr(fusegrad, fn)(fusegrad.tensor(INPUTS[case]), **kw))
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert g.dtype.name == str(r.dtype).split(".")[1]
        np.testing.assert_array_equal(g.numpy(), r.numpy())


@pytest.mark.parametrize("fn", ["unique", "unique_consecutive"])
def test_node_and_backward_error(fn):
    data = [[1.0, 2.0], [1.0, 2.0], [0.0, 5.0]]
    xt = torch.tensor(data, requires_grad=True)
    xf = fusegrad.tensor(data, requires_grad=True)
    yt, it, ct = getattr(torch, fn)(xt, return_inverse=True, return_counts=True, dim=0)
    yf, i_f, cf = getattr(fusegrad, fn)(xf, return_inverse=True, return_counts=True, dim=0)
    assert type(yf.grad_fn).__name__ == type(yt.grad_fn).__name__
    assert i_f.grad_fn is None and cf.grad_fn is None
    with pytest.raises(NotImplementedError) as e:
        yt.sum().backward()
    with pytest.raises(NotImplementedError) as err:
        yf.sum().backward()
    assert str(err.value) == str(e.value)


@pytest.mark.parametrize("fn", ["unique", "unique_consecutive"])
@pytest.mark.parametrize("shape,dim", [((3, 0), 0), ((0, 0), 0), ((3, 2), 2), ((), 0),
                                       ((), -1), ((3, 2), -3), ((0, 3), 0), ((2, 0), 1)])
def test_errors_and_empty(fn, shape, dim):
    kw = dict(return_inverse=True, return_counts=True, dim=dim)
    try:
        ref = getattr(torch, fn)(torch.zeros(shape), **kw)
    except (RuntimeError, IndexError) as e:
        with pytest.raises(type(e)) as err:
            getattr(fusegrad, fn)(fusegrad.zeros(shape), **kw)
        assert str(err.value) == str(e)
        return
    got = getattr(fusegrad, fn)(fusegrad.zeros(shape), **kw)
    for g, r in zip(got, ref):
        assert tuple(g.shape) == tuple(r.shape)
