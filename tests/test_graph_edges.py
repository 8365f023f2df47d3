"""The edges of index, mask and loss nodes against torch: an index, a mask or a class
target is not differentiable and gets no edge in `next_functions`, an absent optional
tensor (clamp's bound) gets a `None` one, as PyTorch's nodes have, and the gradients are
unchanged."""

import numpy as np
import pytest
import torch

import fusegrad

F = "nn.functional"


def _fn(lib, path):
    obj = lib
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


CASES = {
    "gather": lambda t, a, b: a.gather(1, t.tensor([[0, 1], [2, 3], [1, 1]])),
    "scatter_add": lambda t, a, b: a.scatter_add(1, t.tensor([[0, 1], [2, 3], [1, 1]]),
                                                 b[:, :2]),
    "scatter": lambda t, a, b: a.scatter(1, t.tensor([[0, 1], [2, 3], [1, 2]]), b[:, :2]),
    "scatter_value": lambda t, a, b: a.scatter(1, t.tensor([[0], [2], [1]]), 2.0),
    "scatter_reduce": lambda t, a, b: a.scatter_reduce(1, t.tensor([[0, 1], [2, 3], [1, 1]]),
                                                       b[:, :2], "sum"),
    "scatter_inplace": lambda t, a, b: a.clone().scatter_(1, t.tensor([[0], [1], [2]]),
                                                         b[:, :1]),
    "index_select": lambda t, a, b: a.index_select(0, t.tensor([0, 2])),
    "index_add": lambda t, a, b: a.index_add(0, t.tensor([0, 2]), b[:2]),
    "index_copy": lambda t, a, b: a.index_copy(0, t.tensor([0, 2]), b[:2]),
    "index_fill": lambda t, a, b: a.index_fill(0, t.tensor([0, 2]), 1.0),
    "index_fill_tensor": lambda t, a, b: a.index_fill(0, t.tensor([0, 2]), b[0, 0]),
    "masked_fill": lambda t, a, b: a.masked_fill(a > 0, 0.0),
    "masked_fill_tensor": lambda t, a, b: a.masked_fill(a > 0, t.tensor(1.0)),
    "masked_fill_inplace": lambda t, a, b: a.clone().masked_fill_(a > 0, 0.0),
    "masked_scatter": lambda t, a, b: a.masked_scatter(a > 0, b),
    "masked_select": lambda t, a, b: a.masked_select(a > 0),
    "take": lambda t, a, b: a.take(t.tensor([0, 5])),
    "put": lambda t, a, b: a.put(t.tensor([0, 5]), b[0, :2]),
    "embedding": lambda t, a, b: _fn(t, F).embedding(t.tensor([0, 2]), a),
    "embedding_bag": lambda t, a, b: _fn(t, F).embedding_bag(t.tensor([0, 1, 2]), a,
                                                            t.tensor([0, 2])),
    "repeat_interleave": lambda t, a, b: a.repeat_interleave(t.tensor([1, 2, 0]), dim=0),
    "cross_entropy": lambda t, a, b: _fn(t, F).cross_entropy(a, t.tensor([0, 1, 2])),
    "nll_loss_weight": lambda t, a, b: _fn(t, F).nll_loss(a, t.tensor([0, 1, 2]),
                                                         weight=t.ones(4, dtype=t.float64)),
    "multi_margin": lambda t, a, b: _fn(t, F).multi_margin_loss(a, t.tensor([0, 1, 2])),
    "clamp_min_tensor": lambda t, a, b: a.clamp(min=b),
    "clamp_max_tensor": lambda t, a, b: a.clamp(max=b),
    "clamp_both": lambda t, a, b: a.clamp(b, b + 1),
}


def _graph(lib, name):
    rng = np.random.default_rng(0)
    a = lib.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    b = lib.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    out = CASES[name](lib, a, b)
    edges = [None if n is None else n.name() for n, _ in out.grad_fn.next_functions]
    out.sum().backward()
    grads = [None if t.grad is None else t.grad.numpy().round(10).tolist() for t in (a, b)]
    return out.grad_fn.name(), edges, grads


@pytest.mark.parametrize("name", CASES)
def test_edges_and_grads_match_torch(name):
    assert _graph(fusegrad, name) == _graph(torch, name)
