"""fusegrad.viz.make_dot draws the autograd graph as torchviz does: ResNet-18's loss gives the
same multiset of backward node names as PyTorch's graph for the same model, and renders."""

from __future__ import annotations

import inspect
import re
from collections import Counter

import numpy as np
import pytest
import torch

import fusegrad
import fusegrad.nn as fnn
from fusegrad.models import resnet as fresnet

graphviz = pytest.importorskip("graphviz")


def torch_resnet18(**kwargs):
    """fusegrad's resnet module executed with torch.nn in place of fusegrad.nn."""
    src = inspect.getsource(fresnet).replace("from .. import nn", "from torch import nn")
    ns = {"__name__": "twin"}
    exec(compile(src, fresnet.__name__, "exec"), ns)
    return ns["resnet18"](**kwargs)


def torch_node_names(root) -> Counter:
    """Class names of every node reachable from `root` through next_functions."""
    seen, stack, names = set(), [root], Counter()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names[type(node).__name__] += 1
        stack.extend(child for child, _ in node.next_functions)
    return names


_NODE = re.compile(r'^\t(\d+) \[label=(?:"([^"]*)"|(\S+?))( fillcolor=(\S+))?\]$', re.M)


def dot_nodes(dot) -> list[tuple[str, str | None]]:
    """(label, fillcolor) of each node statement of `dot`."""
    return [(m[2] if m[2] is not None else m[3], m[5]) for m in _NODE.finditer(dot.source)]


def dot_fn_names(dot) -> Counter:
    """The backward nodes of a make_dot graph (the boxes without a fill colour), by name."""
    return Counter(label.split("\n")[0] for label, color in dot_nodes(dot) if color is None)


@pytest.mark.parametrize("train", [False, True])
def test_resnet18_graph_matches_torch(train, tmp_path):
    n = 2 if train else 1  # batch norm needs two values per channel to train
    x = np.random.default_rng(0).standard_normal((n, 3, 32, 32)).astype(np.float32)
    target = np.arange(n)
    th, fg = torch_resnet18(num_classes=4), fresnet.resnet18(num_classes=4)
    th.train(train)
    fg.train(train)
    ref = torch.nn.functional.cross_entropy(th(torch.tensor(x)), torch.tensor(target))
    loss = fnn.functional.cross_entropy(fg(fusegrad.tensor(x)), fusegrad.tensor(target))
    dot = fusegrad.viz.make_dot(loss, params=dict(fg.named_parameters()))
    assert isinstance(dot, graphviz.Digraph)
    expected = torch_node_names(ref.grad_fn)
    assert dot_fn_names(dot) == expected
    assert expected["AccumulateGrad"] == len(list(th.parameters()))
    labels = {label for label, color in dot_nodes(dot) if color == "lightblue"}
    assert "conv1.weight\n (64, 3, 7, 7)" in labels and "fc.bias\n (4)" in labels
    assert [c for _, c in dot_nodes(dot)].count("darkolivegreen1") == 1
    if train:
        path = dot.render(tmp_path / "resnet18", format="png")
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_show_saved_and_attrs():
    lin = fnn.Linear(4, 3)
    x = fusegrad.randn(2, 4)
    y = lin(x).relu().sum()
    dot = fusegrad.viz.make_dot(y, params=dict(lin.named_parameters()), show_attrs=True,
                                show_saved=True, max_attr_chars=10)
    nodes = dot_nodes(dot)
    saved = [label for label, color in nodes if color == "orange"]
    assert "result\n (2, 3)" in saved  # ReluBackward0 keeps its output
    # AddmmBackward0 saves the input for the weight's gradient; the weight only where the
    # input requires grad (it does not here), as PyTorch's node.
    assert "mat1\n (2, 4)" in saved and not any(s.startswith("mat2") for s in saved)
    relu = next(label for label, color in nodes if label.startswith("ReluBackward0"))
    assert relu.split("\n")[2] == "result: [saved ..."  # cut to max_attr_chars
    addmm = next(label for label, color in nodes if label.startswith("AddmmBackward0"))
    assert "alpha: " in addmm
    plain = fusegrad.viz.make_dot(y)
    assert all(color != "orange" for _, color in dot_nodes(plain))
    assert {label for label, color in dot_nodes(plain) if color == "lightblue"} == {
        "\n (3)", "\n (3, 4)"}


def test_several_outputs_and_views():
    a = fusegrad.randn(3, 4, requires_grad=True)
    b = a * 2
    v = b[0]
    dot = fusegrad.viz.make_dot((v, a.sum()), params={"a": a})
    colors = Counter(color for _, color in dot_nodes(dot))
    assert colors["darkolivegreen1"] == 2 and colors["darkolivegreen3"] == 1
    assert colors["lightblue"] == 1
    assert 'style=dotted' in dot.source
    with pytest.raises(TypeError):
        fusegrad.viz.make_dot(v, params={"a": 1.0})


def saved_tensor_names(root, is_tensor) -> dict[str, set[str]]:
    """Node class name -> names of the `_saved_*` attributes holding tensors (or None)."""
    seen, stack, out = set(), [root], {}
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names = out.setdefault(type(node).__name__, set())
        for attr in dir(node):
            if attr.startswith("_saved_"):
                value = getattr(node, attr)
                if value is None or is_tensor(value):
                    names.add(attr[len("_saved_"):])
        stack.extend(child for child, _ in node.next_functions)
    return out


def small_conv_net(nn):
    """Conv, batch norm and linear layers from `nn` (fusegrad's or torch's)."""
    m = nn.Module()
    m.conv, m.bn = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)
    m.fc, m.proj = nn.Linear(16, 5), nn.Linear(5, 3, bias=False)
    return m


def run_small_conv_net(m, x, F):
    """Pooling, matmuls, reductions, shape and pointwise ops around the layers of `m`."""
    y = F.max_pool2d(F.relu(m.bn(m.conv(x))), 2)
    y = F.adaptive_avg_pool2d(y, 2).flatten(1)
    z = F.gelu(m.fc(y)) * y.mean(1, keepdim=True)
    z = m.proj(F.leaky_relu(z, 0.1)).softmax(-1).sigmoid() / z.sum(1, keepdim=True)
    return (z.tanh().exp() - z.permute(1, 0).t()).log_softmax(1)


# What fusegrad does not keep where PyTorch does (its derivatives recompute or do not need
# these): max pooling's input, nll_loss's input.
NOT_SAVED = {"MaxPool2DWithIndicesBackward0": {"self"},
             "NllLossBackward0": {"self"}, "AdaptiveAvgPool2DBackward0": {"self"}}


@pytest.mark.parametrize("train", [True, False])
def test_saved_tensor_names_match_torch(train):
    x = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
    target = np.array([0, 2])
    th, fg = small_conv_net(torch.nn), small_conv_net(fnn)
    th.train(train)
    fg.train(train)
    ref = torch.nn.functional.nll_loss(
        run_small_conv_net(th, torch.tensor(x), torch.nn.functional), torch.tensor(target))
    loss = fnn.functional.nll_loss(run_small_conv_net(fg, fusegrad.tensor(x), fnn.functional),
                                   fusegrad.tensor(target))
    expected = saved_tensor_names(ref.grad_fn, torch.is_tensor)
    got = saved_tensor_names(loss.grad_fn, lambda v: isinstance(v, fusegrad.Tensor))
    assert set(got) == set(expected)
    assert {"ConvolutionBackward0", "AddmmBackward0", "MmBackward0", "ReluBackward0",
            "MeanBackward1", "ViewBackward0", "TBackward0", "GeluBackward0"} <= set(got)
    for name, names in expected.items():
        assert got[name] | NOT_SAVED.get(name, set()) == names, name
