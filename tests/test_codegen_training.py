"""Compiled training graphs: what the backward graphs hold and what the code generator makes
of them.

Oracles: PyTorch's AOT graphs of the same torch.nn model (which ops appear), eager execution
(gradients to the last bit where the same NumPy kernels run).
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from test_aot_graphs import _compile_both

import fusegrad
from fusegrad.compiler import logs
from fusegrad.compiler.codegen import build

needs_cc = pytest.mark.skipif(build.compiler() is None, reason="no C compiler")


def _count(gm, name: str) -> int:
    return sum(1 for n in gm.graph.nodes if n.op == "call_function" and str(n.target) == name)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_backward_graph_holds_convolution_backward_as_torch():
    """One `convolution_backward` node per convolution, where PyTorch's graph has it, and
    none of the im2col / col2im ops the derivative is written with (tests/test_aot_graphs.py
    checks these graphs' gradients against PyTorch's, the test below against eager's)."""
    _, _, _, _, theirs, ours, _ = _compile_both("lenet5", True)
    name = "aten.convolution_backward.default"
    assert _count(ours["bw"], name) == _count(theirs["bw"], name) == 2
    text = ours["bw"].code
    assert "im2col" not in text and "col2im" not in text
    # LeNet's 2x2 stride-2 pools have disjoint windows: their gradient is a plain scatter
    # (a store), not scatter_add's accumulation.
    assert _count(ours["bw"], "aten.scatter.src") == 2
    assert "scatter_add" not in text


@needs_cc
def test_compiled_lenet_step_runs_convolution_backward_extern(caplog):
    """The inductor backend runs each convolution's gradient as one extern call, with
    eager's gradients (the same NumPy kernel computes them)."""
    fusegrad.manual_seed(0)
    model = fusegrad.models.LeNet5()
    twin = fusegrad.models.LeNet5()
    twin.load_state_dict(model.state_dict())
    x = fusegrad.randn(8, 1, 32, 32)
    y = fusegrad.tensor(np.arange(8) % 10)
    loss_fn = fusegrad.nn.CrossEntropyLoss()
    logs.set_logs(output_code=True, graph_breaks=True)
    caplog.set_level(logging.INFO, logger="fusegrad.compiler")
    logs.log.propagate = True
    try:
        loss_fn(fusegrad.compile(model)(x), y).backward()
    finally:
        logs.set_logs(output_code=False, graph_breaks=False)
        logs.log.propagate = False
    loss_fn(twin(x), y).backward()
    for (k, a), b in zip(model.named_parameters(), twin.parameters()):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-7,
                                   err_msg=k)
    codes = [r.getMessage() for r in caplog.records if "extern convolution_backward" in
             r.getMessage()]
    assert codes and codes[0].count("extern convolution_backward") == 2  # the backward graph
    text = caplog.text
    assert "col2im" not in text and "runs as FX code" not in text
