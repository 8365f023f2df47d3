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
    assert "out\n (2, 3)" in saved  # ReluBackward0 keeps its output
    assert "m1\n (2, 4)" in saved and "m2\n (4, 3)" in saved  # AddmmBackward0's operands
    relu = next(label for label, color in nodes if label.startswith("ReluBackward0"))
    assert relu.split("\n")[2] == "out: [saved ..."  # cut to max_attr_chars
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
