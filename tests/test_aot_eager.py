"""backend="aot_eager" (and aot_module_simplified with the same compilers) against eager
execution and PyTorch: outputs, gradients, buffers, SGD steps, the CompiledFunctionBackward
node, and the inference graph when nothing needs a gradient."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from aot_models import MODELS, close, copy_weights

import fusegrad
from fusegrad._functorch.aot_autograd import aot_function, aot_module_simplified
from fusegrad.compiler.aot.api import nop

nn = fusegrad.nn


def _rand(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _programs():
    def pointwise(x, y):
        return ((x.sin() * y).sum(dim=1).exp(),)

    def composite(x, w):
        h = fusegrad.matmul(x, w).reshape(-1, 2)
        return (h[1:, 0].softmax(0), h.log_softmax(1).mean())

    def broadcast_and_scalars(x, b):
        return ((x * 2.5 + b).clamp(-1, 1).pow(2).sum() / 3,)

    return {"pointwise": (pointwise, [(3, 4), (3, 4)]),
            "composite": (composite, [(3, 4), (4, 4)]),
            "broadcast_and_scalars": (broadcast_and_scalars, [(2, 3), (3,)])}


@pytest.mark.parametrize("name", list(_programs()))
def test_compiled_programs_give_eager_values_and_gradients(name):
    fn, shapes = _programs()[name]
    arrays = [_rand(s, seed=i) for i, s in enumerate(shapes)]
    ins_c = [fusegrad.tensor(a, requires_grad=True) for a in arrays]
    ins_e = [fusegrad.tensor(a, requires_grad=True) for a in arrays]
    out_c = fusegrad.compile(fn, backend="aot_eager")(*ins_c)
    out_e = fn(*ins_e)
    for oc, oe in zip(out_c, out_e):
        assert close(oc, oe, 1e-6)
        assert type(oc.grad_fn).__name__ == "CompiledFunctionBackward"
    sum(o.sum() for o in out_c).backward()
    sum(o.sum() for o in out_e).backward()
    for a, b in zip(ins_c, ins_e):
        assert close(a.grad, b.grad, 1e-6)


def test_aot_function_compiles_once_per_signature_and_recompiles_on_change():
    calls = []

    def counting(gm, example_inputs):
        calls.append(gm)
        return gm.forward

    f = aot_function(lambda x: (x * x).sum(), counting)
    x = fusegrad.randn(3, requires_grad=True)
    f(x)
    f(fusegrad.randn(3, requires_grad=True))
    assert len(calls) == 1  # forward compiled once; the backward is compiled on first use
    f(x).backward()
    assert len(calls) == 2 and close(x.grad, 2 * x, 1e-6)
    f(fusegrad.randn(4, requires_grad=True))  # another shape: traced again
    assert len(calls) == 3


def test_inference_graph_when_no_gradient_is_needed():
    seen = []
    f = aot_function(lambda x, w: (x @ w).relu(), lambda gm, ex: seen.append(gm) or gm.forward)
    x, w = fusegrad.randn(2, 3), fusegrad.randn(3, 4, requires_grad=True)
    with fusegrad.no_grad():
        out = f(x, w)
    assert out.grad_fn is None and close(out, (x @ w).relu(), 1e-6)
    assert len(seen) == 1 and "tangents" not in seen[0].code and "arg0_1" in seen[0].code
    out = f(x, w.detach())  # grad mode on, nothing requires grad: inference graph too
    assert out.grad_fn is None and len(seen) == 2 and "tangents" not in seen[1].code


@pytest.mark.parametrize("name", list(MODELS))
def test_models_give_eager_outputs_gradients_and_buffers(name):
    build, shape = MODELS[name]
    model = build(fusegrad).train()
    eager = copy.deepcopy(model)
    x = fusegrad.tensor(_rand(shape))
    compiled = aot_module_simplified(model, [x], nop, nop)
    out = compiled(x)[0]
    ref = eager(x)[0]
    assert compiled.fallback_reason is None
    assert type(out.grad_fn).__name__ == "CompiledFunctionBackward"
    assert close(out, ref, 1e-6)
    g = fusegrad.tensor(_rand(tuple(out.shape), seed=5))
    out.backward(g)
    ref.backward(g)
    for (k, p), q in zip(model.named_parameters(), eager.parameters()):
        assert close(p.grad, q.grad, 1e-5), k
    for (k, b), c in zip(model.named_buffers(), eager.buffers()):
        assert close(b, c, 1e-6), k  # running statistics and num_batches_tracked


@pytest.mark.parametrize("name", list(MODELS))
def test_compile_backend_aot_eager_gives_eager_results(name):
    build, shape = MODELS[name]
    model = build(fusegrad).train()
    eager = copy.deepcopy(model)
    compiled = fusegrad.compile(model, backend="aot_eager")
    x = fusegrad.tensor(_rand(shape))
    out, ref = compiled(x)[0], eager(x)[0]
    assert close(out, ref, 1e-6)
    assert type(out.grad_fn).__name__ == "CompiledFunctionBackward"
    out.sum().backward()
    ref.sum().backward()
    for p, q in zip(model.parameters(), eager.parameters()):
        assert close(p.grad, q.grad, 1e-5)
    for b, c in zip(model.buffers(), eager.buffers()):
        assert close(b, c, 1e-6)


def test_batchnorm_train_mode_updates_buffers_as_torch():
    tm = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.BatchNorm1d(6), torch.nn.ReLU())
    fm = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU())
    copy_weights(tm, fm)
    compiled = aot_module_simplified(fm, [fusegrad.randn(5, 4)], nop, nop)
    for step in range(3):
        x = _rand((5, 4), seed=step)
        out = compiled(fusegrad.tensor(x))
        ref = tm(torch.tensor(x))
        assert close(out, ref, 1e-5)
        out.sum().backward()
        ref.sum().backward()
    assert compiled.fallback_reason is None
    for (k, b), (_, c) in zip(fm.named_buffers(), tm.named_buffers()):
        assert close(b, c, 1e-5), k
    assert int(fm[1].num_batches_tracked) == 3
    for p, (k, q) in zip(fm.parameters(), tm.named_parameters()):
        assert close(p.grad, q.grad, 1e-4), k


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
@pytest.mark.parametrize("name", ["mlp", "lenet5", "basic_block"])
def test_five_sgd_steps_give_eager_weights(name, dtype, tol):
    build, shape = MODELS[name]
    fdt = fusegrad.float64 if dtype is np.float64 else fusegrad.float32
    model = build(fusegrad).to(fdt).train()
    eager = copy.deepcopy(model)
    compiled = aot_module_simplified(model, [fusegrad.tensor(_rand(shape, dtype))], nop, nop)
    opt_c = fusegrad.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    opt_e = fusegrad.optim.SGD(eager.parameters(), lr=0.05, momentum=0.9)
    for step in range(5):
        x = fusegrad.tensor(_rand(shape, dtype, seed=10 + step))
        for run, opt in ((compiled, opt_c), (eager, opt_e)):
            opt.zero_grad()
            run(x)[0].pow(2).mean().backward()
            opt.step()
    assert compiled.fallback_reason is None
    for (k, p), q in zip(model.state_dict().items(), eager.state_dict().values()):
        assert close(p, q, tol), k


def test_compiled_mlp_matches_torch():
    build, shape = MODELS["mlp"]
    tm, fm = build(torch), build(fusegrad)
    copy_weights(tm, fm)
    x = _rand(shape)
    out = fusegrad.compile(fm, backend="aot_eager")(fusegrad.tensor(x))[0]
    ref = torch.compile(tm, backend="aot_eager")(torch.tensor(x))[0]
    assert close(out, ref, 1e-5)
    assert type(out.grad_fn).__name__ == type(ref.grad_fn).__name__ == "CompiledFunctionBackward"
    out.sum().backward()
    ref.sum().backward()
    for p, (k, q) in zip(fm.parameters(), tm.named_parameters()):
        assert close(p.grad, q.grad, 1e-5), k


def test_aot_eager_is_a_debug_backend_as_in_torch():
    assert "aot_eager" in fusegrad._dynamo.list_backends(exclude_tags=())
    assert "aot_eager" in torch._dynamo.list_backends(exclude_tags=())
    assert "aot_eager" not in fusegrad._dynamo.list_backends()
    assert "aot_eager" not in torch._dynamo.list_backends()


def test_aot_function_applies_decompositions_to_forward_and_backward():
    aten = fusegrad.ops.aten
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def mm(a, b):
        return (a.unsqueeze(2) * b.unsqueeze(0)).sum(1)

    def f(x, w):
        return (x @ w).tanh()

    compiled = aot_function(f, keep, decompositions={aten.mm.default: mm})
    arrays = (_rand((3, 4)), _rand((4, 2), seed=1))
    (xc, wc), (xe, we) = ([fusegrad.tensor(a, requires_grad=True) for a in arrays]
                          for _ in range(2))
    out, ref = compiled(xc, wc), f(xe, we)
    out.sum().backward()
    ref.sum().backward()
    assert compiled.fallback_reason is None
    assert all("aten.mm." not in g.code and "aten.mul.Tensor" in g.code for g in graphs)
    assert len(graphs) == 2  # forward, then backward on first use
    assert close(out, ref, 1e-6)
    assert close(xc.grad, xe.grad, 1e-5) and close(wc.grad, we.grad, 1e-5)


def test_joint_graph_takes_primals_then_tangents_and_returns_outputs_then_gradients():
    from fusegrad.compiler.aot.joint import trace_joint

    x, w = fusegrad.randn(3, requires_grad=True), fusegrad.randn(3)
    trace = trace_joint(lambda x, w: ((x * w).sin(),), [x, w])
    code = trace.module.code
    assert "def forward(self, primals_1, primals_2, tangents_1):" in code
    out = trace.module.graph.output_node().args[0]
    assert len(out) == 3 and out[2] is None  # one output, then a gradient per input
    assert trace.grad_inputs == [0] and trace.num_fwd_outputs == 1
    # The joint graph runs: the gradient of sin(x * w) . t is cos(x * w) * w * t.
    t = fusegrad.randn(3)
    res = trace.module(x.detach(), w, t)
    assert close(res[1], (x * w).cos().detach() * w * t, 1e-6)


def test_graph_with_symbolic_sizes_traced_per_input_signature():
    """A captured graph whose batch size is symbolic (an integer input `s77`) is accepted:
    AOT autograd has no symbolic tracing yet, so it traces the graph once per input
    signature (logged under `recompiles`); values and gradients equal torch's."""
    import logging

    from fusegrad._symbolic import graph_is_dynamic
    from fusegrad.compiler import logs
    from fusegrad.compiler.aot.api import aot_eager

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return aot_eager(gm, example_inputs)

    def f(lib, x, w):
        return (lib.relu(x @ w) + 1).view(x.shape[0], -1).sum(1)

    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    logs.set_logs(recompiles=True)
    logs.log.addHandler(handler)
    try:
        w_np = _rand((4, 6), seed=1)
        w, tw = fusegrad.tensor(w_np, requires_grad=True), torch.tensor(w_np, requires_grad=True)
        compiled = fusegrad.compile(lambda x, w: f(fusegrad, x, w), backend=backend)
        for b in (2, 3, 5):
            x_np = _rand((b, 4), seed=b)
            x, tx = (fusegrad.tensor(x_np, requires_grad=True),
                     torch.tensor(x_np, requires_grad=True))
            out, ref = compiled(x, w), f(torch, tx, tw)
            out.sum().backward()
            ref.sum().backward()
            np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5)
            np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5)
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5)
    finally:
        logs.log.removeHandler(handler)
        logs.set_logs(recompiles=False)
    assert len(graphs) == 2 and graph_is_dynamic(graphs[1])
    assert any("AOT autograd traces a graph with symbolic sizes per input signature" in line
               for line in lines)
