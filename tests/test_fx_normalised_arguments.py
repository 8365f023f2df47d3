"""torch.fx records a call of a function PyTorch writes in Python (most of nn.functional)
with its arguments normalised: required ones by position, the rest by keyword with their
defaults filled in; functions written in C keep the call's own arguments."""

import pytest
import torch
import torch.fx

import fusegrad
import fusegrad.fx

CALLS = {
    "relu": lambda L, x: L.nn.functional.relu(x),
    "softmax": lambda L, x: L.nn.functional.softmax(x, -1),
    "dropout": lambda L, x: L.nn.functional.dropout(x, 0.1, training=False),
    "layer_norm": lambda L, x: L.nn.functional.layer_norm(x, (4,)),
    "gelu": lambda L, x: L.nn.functional.gelu(x),
    "mse_loss": lambda L, x: L.nn.functional.mse_loss(x, x),
    "pad": lambda L, x: L.nn.functional.pad(x, (1, 1)),
    "linear": lambda L, x: L.nn.functional.linear(x, x),
    "elu": lambda L, x: L.nn.functional.elu(x),
    "cross_entropy": lambda L, x: L.nn.functional.cross_entropy(x, x.argmax(-1)),
    "interpolate": lambda L, x: L.nn.functional.interpolate(x[None], scale_factor=2),
    "sum": lambda L, x: L.sum(x, 1),
    "flatten": lambda L, x: L.flatten(x, 1),
    "cat": lambda L, x: L.cat([x, x], 0),
}


def _nodes(lib, fx, call):
    graph = fx.symbolic_trace(lambda x: call(lib, x)).graph
    return [(getattr(n.target, "__name__", str(n.target)), str(n.args), n.kwargs)
            for n in graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("name", sorted(CALLS))
def test_call_function_arguments_read_as_torchs(name):
    assert _nodes(fusegrad, fusegrad.fx, CALLS[name]) == _nodes(torch, torch.fx, CALLS[name])
