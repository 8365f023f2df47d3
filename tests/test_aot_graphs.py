"""AOT graphs against PyTorch's: the `fusegrad.ops.aten` namespace, make_fx (real and fake
tracing, decomposition tables), and the forward/backward/joint graphs of an MLP, LeNet-5 and
a ResNet BasicBlock next to those torch._functorch makes for the same torch.nn models."""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.fx
from aot_models import MODELS, close, compiler_logs, copy_weights
from torch._functorch.aot_autograd import aot_module_simplified as torch_aot_module
from torch._functorch.partitioners import default_partition as torch_default_partition
from torch.fx.experimental.proxy_tensor import make_fx as torch_make_fx

import fusegrad
import fusegrad.fx
from fusegrad._functorch.aot_autograd import aot_module_simplified
from fusegrad._functorch.partitioners import default_partition
from fusegrad.fx.experimental.proxy_tensor import make_fx

aten = fusegrad.ops.aten

# Ops that only rearrange or alias (views, detach, getitem): graphs are compared without them.
_LAYOUT = {"aten._unsafe_view.default", "aten.detach.default", "aten.clone.default"}
# Where an op has another ATen name in PyTorch's functionalized graphs: in eval mode batch
# norm stays `native_batch_norm` here (it writes nothing); training mode is
# `_native_batch_norm_legit_functional` in both.
_SAME_OP = {"aten._native_batch_norm_legit_no_training.default":
            "aten.native_batch_norm.default"}


def _compute_ops(gm) -> collections.Counter:
    """Multiset of the compute ops of a graph (either library): views, getitem and write-backs
    into inputs (which PyTorch does outside the graph) left out."""
    ops = collections.Counter()
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        t = n.target
        if getattr(t, "is_view", False) or getattr(getattr(t, "op", None), "view", False):
            continue
        name = str(t)
        if name in _LAYOUT or "getitem" in name or name == "aten.copy_.default":
            continue
        ops[_SAME_OP.get(name, name)] += 1
    return ops


# ---------------------------------------------------------------- the namespace


def test_aten_namespace_spells_overloads_as_torch():
    for key in ("mul.Tensor", "mul.Scalar", "relu", "sum.dim_IntList", "convolution",
                "add_.Tensor", "native_batch_norm"):
        packet, _, overload = key.partition(".")
        ours = getattr(getattr(aten, packet), overload or "default")
        theirs = getattr(getattr(torch.ops.aten, packet), overload or "default")
        assert str(ours) == str(theirs)
        assert ours.name() == theirs.name()
        assert ours.op is fusegrad.ops.REGISTRY[key]
    # Every registry entry has its handle.
    for key in fusegrad.ops.REGISTRY:
        packet, _, overload = key.partition(".")
        assert getattr(getattr(aten, packet), overload or "default").op.name == key
    with pytest.raises(AttributeError):
        aten.no_such_op  # noqa: B018


def test_aten_handles_run_through_dispatch():
    a = fusegrad.tensor([1.0, 2.0], requires_grad=True)
    out = aten.mul.Tensor(a, 3.0)
    ref = torch.ops.aten.mul.Tensor(torch.tensor([1.0, 2.0], requires_grad=True), 3.0)
    assert close(out, ref, 0) and type(out.grad_fn).__name__ == type(ref.grad_fn).__name__


# ---------------------------------------------------------------- make_fx


def _program(t):
    def f(x, y):
        z = t.matmul(x, y).relu()                  # composite: mm
        a, b = z.split(1, dim=1)                   # multiple outputs: getitem nodes
        w = x.clone()
        w.add_(1)                                  # in place
        v = w[0, 1:]                               # indexing: select + slice views
        s = t.cat([a, b * 2.5], 1).reshape(-1)     # lists of tensors, scalars
        return s.sum() + v.sum(), t.stack([s, s]).amax(1)
    return f


@pytest.mark.parametrize("mode", ["real", "fake"])
def test_make_fx_records_the_ops_torch_records(mode):
    xs = [np.random.default_rng(0).standard_normal(s).astype(np.float32) for s in ((2, 2),
                                                                                   (2, 2))]
    gm = make_fx(_program(fusegrad), tracing_mode=mode)(*[fusegrad.tensor(x) for x in xs])
    ref = torch_make_fx(_program(torch))(*[torch.tensor(x) for x in xs])
    assert _compute_ops(gm) == _compute_ops(ref)
    assert "fusegrad.ops.aten.mm.default(x_1, y_1)" in gm.code
    assert "fusegrad.ops.aten.add_.Tensor" in gm.code  # make_fx keeps in-place ops
    out = gm(*[fusegrad.tensor(x) for x in xs])
    expected = _program(torch)(*[torch.tensor(x) for x in xs])
    assert all(close(o, e, 1e-6) for o, e in zip(out, expected))


def test_make_fx_real_and_fake_give_the_same_graph():
    x, y = fusegrad.randn(2, 2), fusegrad.randn(2, 2)
    real = make_fx(_program(fusegrad))(x, y)
    fake = make_fx(_program(fusegrad), tracing_mode="fake")(x, y)
    assert real.code == fake.code


def test_make_fx_factories_are_constants_each_run_gets_its_own():
    def f(x):
        z = fusegrad.zeros(3)
        z.add_(x)      # writes into the factory's tensor: must not leak into the next run
        return z + fusegrad.ones(3) * 2

    x = fusegrad.tensor([1.0, 2.0, 3.0])
    gm = make_fx(f)(x)
    expected = f(x)
    for _ in range(2):
        assert close(gm(x), expected, 0)
    fake = make_fx(f, tracing_mode="fake")(x)
    assert close(fake(x), expected, 0)


def test_make_fx_decomposition_table_is_applied_recursively():
    def addmm(bias, m1, m2, *rest):
        return fusegrad.ops.aten.add.Tensor(fusegrad.ops.aten.mm.default(m1, m2), bias)

    def mm(a, b):
        return (a.unsqueeze(2) * b.unsqueeze(0)).sum(1)

    def torch_addmm(bias, m1, m2, *rest):
        return torch.ops.aten.add.Tensor(torch.ops.aten.mm.default(m1, m2), bias)

    def torch_mm(a, b):
        return (a.unsqueeze(2) * b.unsqueeze(0)).sum(1)

    rng = np.random.default_rng(1)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (5, 4), (5,)))

    def prog(t):
        return lambda x, w, b: t.nn.functional.linear(x, w, b).tanh()

    gm = make_fx(prog(fusegrad), decomposition_table={aten.addmm.default: addmm,
                                                      aten.mm.default: mm})(
        *map(fusegrad.tensor, (x, w, b)))
    ref = torch_make_fx(prog(torch), decomposition_table={
        torch.ops.aten.addmm.default: torch_addmm, torch.ops.aten.mm.default: torch_mm})(
        *map(torch.tensor, (x, w, b)))
    ops = _compute_ops(gm)
    assert "aten.addmm.default" not in ops and "aten.mm.default" not in ops
    assert ops == _compute_ops(ref)
    assert close(gm(*map(fusegrad.tensor, (x, w, b))),
                 prog(torch)(*map(torch.tensor, (x, w, b))), 1e-5)


def test_make_fx_symbolic_is_not_available_yet_and_bad_modes_fail_as_torch():
    with pytest.raises(NotImplementedError):
        make_fx(lambda x: x, tracing_mode="symbolic")(fusegrad.ones(2))
    with pytest.raises(AssertionError) as ours:
        make_fx(lambda x: x, tracing_mode="bogus")
    with pytest.raises(AssertionError) as theirs:
        torch_make_fx(lambda x: x, tracing_mode="bogus")
    assert str(ours.value) == str(theirs.value)


# ---------------------------------------------------------------- forward / backward graphs


def _recorder(store: dict, kind: str):
    def compiler(gm, example_inputs):
        store[kind] = gm
        return gm.forward
    return compiler


def _compile_both(name: str, train: bool):
    build, shape = MODELS[name]
    torch.manual_seed(0)
    tm = build(torch).train(train)
    fm = build(fusegrad).train(train)
    copy_weights(tm, fm)
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    theirs, ours = {}, {}
    tgm = torch.fx.symbolic_trace(tm)
    tc = torch_aot_module(tgm, [torch.tensor(x)], fw_compiler=_recorder(theirs, "fw"),
                          bw_compiler=_recorder(theirs, "bw"),
                          partition_fn=torch_default_partition)
    fgm = fusegrad.fx.symbolic_trace(fm)
    fc = aot_module_simplified(fgm, [fusegrad.tensor(x)], fw_compiler=_recorder(ours, "fw"),
                               bw_compiler=_recorder(ours, "bw"), partition_fn=default_partition)
    tout = tc(torch.tensor(x))[0]
    fout = fc(fusegrad.tensor(x))[0]
    g = np.random.default_rng(3).standard_normal(tuple(tout.shape)).astype(np.float32)
    tout.backward(torch.tensor(g))
    fout.backward(fusegrad.tensor(g))
    return tm, fm, tout, fout, theirs, ours, fc


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name,train", [("mlp", True), ("lenet5", True),
                                        ("basic_block", False), ("basic_block", True)])
def test_forward_graph_ops_match_torch_and_backward_values(name, train):
    tm, fm, tout, fout, theirs, ours, fc = _compile_both(name, train)
    assert fc.fallback_reason is None
    assert type(fout.grad_fn).__name__ == "CompiledFunctionBackward" == \
        type(tout.grad_fn).__name__
    assert _compute_ops(ours["fw"]) == _compute_ops(theirs["fw"])
    # Readable Python with registry-op targets; the backward graph is checked by its values.
    for gm in (ours["fw"], ours["bw"]):
        assert "fusegrad.ops.aten." in gm.code and "def forward(self, " in gm.code
    assert "tangents_1" in ours["bw"].code
    assert close(fout, tout, 1e-5)
    for (k, tp), fp in zip(tm.named_parameters(), fm.parameters()):
        assert close(fp.grad, tp.grad, 1e-4), k
    for (k, tb), fb in zip(tm.named_buffers(), fm.buffers()):
        assert close(fb, tb, 1e-5), k


def test_mlp_partition_saves_inputs_and_recomputes_transposes():
    _, _, _, _, _, ours, _ = _compile_both("mlp", True)
    fw_out = list(ours["fw"].graph.output_node().args[0])
    saved = [n.name for n in fw_out[1:]]
    bw_inputs = [n.name for n in ours["bw"].graph.nodes if n.op == "placeholder"]
    assert bw_inputs == saved + ["tangents_1"]
    # The weight is saved, not its transpose (a view the backward recomputes).
    assert not any(n.startswith("t") and n[1:].lstrip("_").isdigit() for n in saved), saved


# ---------------------------------------------------------------- logs


def test_aot_logs_print_joint_forward_and_backward_graphs():
    with compiler_logs(aot_graphs=True, aot_joint_graph=True) as messages:
        m = MODELS["mlp"][0](fusegrad)
        c = fusegrad.compile(m, backend="aot_eager")
        c(fusegrad.randn(3, 8))[0].sum().backward()
    text = "\n".join(messages)
    assert re.search(r"aot_joint_graph: TRACED GRAPH\n ===== Joint graph \d+ =====", text)
    assert re.search(r"aot_graphs: TRACED GRAPH\n ===== Forward graph \d+ =====", text)
    assert re.search(r"aot_graphs: TRACED GRAPH\n ===== Backward graph \d+ =====", text)
    assert "fusegrad.ops.aten.addmm.default" in text and "tangents_1" in text


def test_fusegrad_logs_environment_variable_selects_aot_graphs():
    code = ("import fusegrad\n"
            "f = fusegrad.compile(lambda x: (x.sin() * 2).sum(), backend='aot_eager')\n"
            "f(fusegrad.randn(3, requires_grad=True)).backward()\n")
    env = dict(os.environ, FUSEGRAD_LOGS="aot_graphs",
               PYTHONPATH=os.path.join(os.path.dirname(__file__), "..", "src"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "===== Forward graph" in out.stderr and "fusegrad.ops.aten.sin.default" in out.stderr


def test_named_constants_print_as_fusegrad_attributes():
    gm = make_fx(lambda x: x.t().contiguous() + 1)(fusegrad.randn(2, 3))
    assert ("fusegrad.ops.aten.clone.default(t, memory_format = fusegrad.contiguous_format)"
            in gm.code)
    ref = torch_make_fx(lambda x: x.t().contiguous() + 1)(torch.randn(2, 3))
    assert _compute_ops(gm) == _compute_ops(ref)


def test_node_values_are_fake_tensors_with_the_traced_metadata():
    gm = make_fx(lambda x: (x.t() * 2, x.sum(0)))(fusegrad.randn(2, 3))
    vals = {n.name: n.meta["val"] for n in gm.graph.nodes if n.op != "output"}
    assert all(isinstance(v, fusegrad._fake.FakeTensor) for v in vals.values())
    assert tuple(vals["t"].shape) == (3, 2) and vals["t"].stride() == (1, 3)
    assert tuple(vals["sum_1"].shape) == (3,)


def test_print_tabular_names_targets_as_torch(capsys):
    def prog(t):
        return lambda x, y: (t.matmul(x, y) * 2).relu()

    make_fx(prog(fusegrad))(fusegrad.randn(2, 2), fusegrad.randn(2, 2)).graph.print_tabular()
    ours = capsys.readouterr().out
    torch_make_fx(prog(torch))(torch.randn(2, 2), torch.randn(2, 2)).graph.print_tabular()
    theirs = capsys.readouterr().out
    assert ours.splitlines()[2:] == theirs.splitlines()[2:]  # rows after the header


def test_a_view_of_a_view_of_an_input_is_recomputed_not_saved():
    """`a[1:4, 2:]` (two slices) read by a matmul's gradient: the forward saves the input,
    and the backward slices it again, as it does for one view."""
    graphs = []

    def keep(g, example):
        graphs.append(g)
        return g.forward

    def backend(gm, example_inputs):
        return aot_module_simplified(gm, example_inputs, fw_compiler=keep, bw_compiler=keep)

    fusegrad._dynamo.reset()
    f = fusegrad.compile(lambda a, b: (a[1:4, 2:] @ b).sum(), backend=backend)
    a, b = fusegrad.randn(6, 5, requires_grad=True), fusegrad.randn(3, 2, requires_grad=True)
    f(a, b).backward()
    a2, b2 = a.detach().requires_grad_(), b.detach().requires_grad_()
    (a2[1:4, 2:] @ b2).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), a2.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(b.grad.numpy(), b2.grad.numpy(), rtol=1e-6)
    saved = [n.name for n in list(graphs[0].graph.output_node().args[0])[1:]]
    assert saved == ["primals_1", "primals_2"], saved
