"""fusegrad.onnx.export: models checked by onnx and run by onnxruntime against fusegrad.

The exporter maps registry ops through their `OpDef.onnx` entries; these tests also check
that every node it writes came from such an entry."""

import io
import os
import subprocess
import sys

import numpy as np
import pytest

import fusegrad as torch
import fusegrad.nn.functional as F
from fusegrad import _dispatch, nn
from fusegrad.models import MLP, LeNet5, resnet18
from fusegrad.onnx import UnsupportedOperatorError
from fusegrad.onnx.export import capture
from fusegrad.ops import REGISTRY
from fusegrad.ops.registry import Sample

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

DYN = {"input": {0: "batch"}, "output": {0: "batch"}}


def _export(model, example, path, **kwargs):
    kwargs.setdefault("input_names", ["input"])
    kwargs.setdefault("output_names", ["output"])
    kwargs.setdefault("dynamic_axes", DYN)
    torch.onnx.export(model, example, str(path), **kwargs)
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)
    return proto


def _compare(model, path, shape, batches=(1, 7), atol=1e-4):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for n in batches:
        x = torch.randn(n, *shape)
        with torch.no_grad():
            expected = model(x).numpy()
        (got,) = session.run(None, {"input": x.numpy()})
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, atol=atol, rtol=0)


def _dims(value_info):
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


@pytest.mark.parametrize("make, shape", [
    (lambda: MLP(20, (32, 16), 5), (20,)),
    (lambda: LeNet5(), (1, 32, 32)),
    (lambda: resnet18(num_classes=10), (3, 32, 32)),
], ids=["mlp", "lenet5", "resnet18"])
def test_models_match_onnxruntime(tmp_path, make, shape):
    torch.manual_seed(0)
    model = make().eval()
    path = tmp_path / "model.onnx"
    proto = _export(model, torch.randn(2, *shape), path)
    assert proto.ir_version == 9  # PyTorch's default opset 20, and its IR version
    assert proto.opset_import[0].version == 20
    assert _dims(proto.graph.input[0])[0] == "batch"
    assert _dims(proto.graph.output[0])[0] == "batch"
    _compare(model, path, shape)


def test_resnet_ops_and_initializer_names(tmp_path):
    model = resnet18(num_classes=10).eval()
    proto = _export(model, torch.randn(1, 3, 32, 32), tmp_path / "r.onnx")
    ops = {n.op_type for n in proto.graph.node}
    assert {"Conv", "BatchNormalization", "Relu", "MaxPool", "Add", "GlobalAveragePool",
            "Flatten", "Gemm"} <= ops
    gemm = next(n for n in proto.graph.node if n.op_type == "Gemm")
    assert any(a.name == "transB" and a.i == 1 for a in gemm.attribute)
    names = {i.name for i in proto.graph.initializer}
    assert {"conv1.weight", "bn1.running_mean", "layer1.0.conv1.weight", "fc.weight"} <= names
    assert names <= set(model.state_dict())


def test_training_mode_restored_and_eval_semantics(tmp_path):
    model = LeNet5().train()
    _export(model, torch.randn(1, 1, 32, 32), tmp_path / "l.onnx")
    assert model.training and model.features[0].training


class Mixed(nn.Module):
    """Functions, operators and Tensor methods the exporter maps."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.proj = nn.Parameter(torch.randn(4, 8))
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        y = torch.relu(self.conv(x)) + 1.5
        y = torch.cat([y, y * 2], 1)[:, 2:6]          # getitem on a tensor
        y = y.permute(0, 2, 3, 1).reshape(x.shape[0], -1, 4)
        y = y @ self.proj
        y = F.gelu(self.norm(y)) - F.gelu(y, approximate="tanh")
        z = y.transpose(1, 2).softmax(-1).mean(dim=2, keepdim=True)
        return torch.flatten(z, 1).view(x.size(0), -1)


@pytest.mark.parametrize("opset, ir", [(13, 7), (17, 8), (18, 8)])
def test_functions_and_methods(tmp_path, opset, ir):
    torch.manual_seed(1)
    model = Mixed().eval()
    path = tmp_path / "m.onnx"
    proto = _export(model, torch.randn(2, 3, 5, 5), path, opset_version=opset)
    assert proto.ir_version == ir
    ops = [n.op_type for n in proto.graph.node]
    assert "Gelu" not in ops and "Erf" in ops and "Tanh" in ops  # decomposed before opset 20
    assert ("LayerNormalization" in ops) == (opset >= 17) and "Reshape" in ops
    _compare(model, path, (3, 5, 5))


class Functional(nn.Module):
    """Functional forms with parameters read as get_attr nodes."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(3, 5)

    def forward(self, x):
        y = F.conv2d(x, self.conv.weight, self.conv.bias, padding=1)
        y = F.batch_norm(y, self.bn.running_mean, self.bn.running_var, self.bn.weight,
                         self.bn.bias, False, 0.1, 1e-5)
        y = F.hardtanh(F.max_pool2d(y, 2, 1), -0.5) + F.avg_pool2d(y, 3, 1, 1)[:, :, :-1, 1:]
        y = F.adaptive_avg_pool2d(y, 2).flatten(2).transpose(1, 2)   # (N, 4, 4)
        y = F.layer_norm(y, (4,))[..., :3]  # contiguous, as PyTorch's, then sliced
        # 3-D and contiguous after leaky_relu: one addmm over the flattened rows (Gemm)
        return F.linear(F.leaky_relu(y, 0.1), self.fc.weight, self.fc.bias)


def test_functional_forms(tmp_path):
    torch.manual_seed(2)
    model = Functional().eval()
    path = tmp_path / "fn.onnx"
    proto = _export(model, torch.randn(2, 3, 7, 7), path)
    ops = {n.op_type for n in proto.graph.node}
    assert {"Conv", "BatchNormalization", "Clip", "AveragePool", "Gemm"} <= ops
    _compare(model, path, (3, 7, 7))


def test_gelu_native_at_opset_20(tmp_path):
    model = nn.Sequential(nn.Linear(4, 4), nn.GELU())
    proto = _export(model, torch.randn(2, 4), tmp_path / "g.onnx", opset_version=20)
    assert proto.ir_version == 9
    assert "Gelu" in [n.op_type for n in proto.graph.node]
    _compare(model, tmp_path / "g.onnx", (4,))


class Folded(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(6, 3))

    def forward(self, x):
        return x @ (self.w.t() * 2 + 1)


@pytest.mark.parametrize("fold", [True, False])
def test_constant_folding(tmp_path, fold):
    model = Folded()
    path = tmp_path / "f.onnx"
    proto = _export(model, torch.randn(2, 3), path, do_constant_folding=fold)
    ops = [n.op_type for n in proto.graph.node]
    if fold:
        assert ops == ["MatMul"]
    else:
        assert {"Transpose", "Mul", "Add", "MatMul"} <= set(ops)
    _compare(model, path, (3,))


def test_export_params_false_and_verbose(tmp_path, capsys):
    model = nn.Sequential(nn.Linear(3, 2))
    proto = _export(model, torch.randn(2, 3), tmp_path / "p.onnx", export_params=False,
                    verbose=True)
    assert "Gemm" in capsys.readouterr().out
    assert not proto.graph.initializer
    assert {i.name for i in proto.graph.input} == {"input", "0.weight", "0.bias"}


def test_unmapped_op_raises_naming_it(tmp_path):
    class Bessel(nn.Module):
        def forward(self, x):
            return torch.special.i1(x)

    # PyTorch's text (no final period), at its default opset 20
    message = ("Exporting the operator 'aten::special_i1' to ONNX opset version 20 is not "
               "supported")
    with pytest.raises(UnsupportedOperatorError) as info:
        torch.onnx.export(Bessel(), torch.randn(2, 3), str(tmp_path / "c.onnx"))
    assert str(info.value) == message and isinstance(info.value, RuntimeError)
    assert not os.listdir(tmp_path)


def test_op_without_entry_raises(tmp_path, monkeypatch):
    # The exporter has no table of its own: an op whose registry entry lost its mapping
    # cannot be exported, even one every model uses.
    monkeypatch.setattr(REGISTRY["addmm"], "onnx", None)
    with pytest.raises(UnsupportedOperatorError, match="'aten::addmm' to ONNX opset version 13"):
        torch.onnx.export(MLP(4, (3,), 2), torch.randn(2, 4), str(tmp_path / "m.onnx"),
                          opset_version=13)


def test_every_node_comes_from_a_registry_entry():
    model = resnet18(num_classes=10).eval()
    proto, exporter = capture(model, torch.randn(2, 3, 32, 32), dynamic_axes=DYN,
                              input_names=["input"], output_names=["output"])
    origins = exporter.b.origins
    assert len(origins) == len(proto.graph.node)
    assert all(o in REGISTRY and REGISTRY[o].onnx is not None for o in origins)
    handled = {op.name for op in exporter.handled}
    assert set(origins) <= handled
    assert {"convolution", "native_batch_norm", "relu_", "max_pool2d_with_indices",
            "add_.Tensor", "mean.dim", "view", "addmm"} <= handled
    assert all(REGISTRY[op.name] is op for op in exporter.handled)


class Single(nn.Module):
    """One function applied to the input (and the model's own parameters)."""

    def __init__(self, fn, module=None):
        super().__init__()
        self.fn = fn
        self.inner = module

    def forward(self, x):
        return self.fn(self, x)


@pytest.mark.parametrize("make, shape, expect", [
    (lambda: Single(lambda m, x: F.gelu(x)), (5,), {"Erf", "Mul", "Add"}),
    (lambda: Single(lambda m, x: F.gelu(x, approximate="tanh")), (5,), {"Tanh"}),
    (lambda: Single(lambda m, x: (x.round() != 0).float()), (6,), {"Equal", "Not"}),
    (lambda: Single(lambda m, x: x.ne(0.5) * x), (6,), {"Equal", "Not"}),
    (lambda: Single(lambda m, x: F.softmax(x, dim=-1)), (3, 4), {"Softmax"}),
    (lambda: Single(lambda m, x: F.log_softmax(x, 1)), (3, 4), {"LogSoftmax"}),
    (lambda: Single(lambda m, x: m.inner(x), nn.LayerNorm(4)), (3, 4),
     {"LayerNormalization"}),
    (lambda: Single(lambda m, x: m.inner(x.abs().mul(3).long()), nn.Embedding(30, 5)),
     (4,), {"Gather", "Cast"}),
    (lambda: Single(lambda m, x: torch.clamp(x, -0.2, 0.3).sum(1) + x.mean()), (3, 4),
     {"Clip", "ReduceSum", "ReduceMean"}),
    (lambda: Single(lambda m, x: torch.sigmoid(x) * torch.tanh(x) - F.silu(x)), (4,),
     {"Sigmoid", "Tanh"}),
    (lambda: Single(lambda m, x: torch.addmm(x[:, :3], x, m.inner.weight.t(), beta=0.5,
                                             alpha=2.0), nn.Linear(4, 3)), (4,),
     {"Gemm"}),
], ids=["gelu", "gelu_tanh", "ne_tensor", "ne_scalar", "softmax", "log_softmax",
        "layer_norm", "embedding", "clamp_reductions", "pointwise", "addmm_beta_alpha"])
def test_single_ops_match_onnxruntime(tmp_path, make, shape, expect):
    torch.manual_seed(3)
    model = make().eval()
    path = tmp_path / "s.onnx"
    proto = _export(model, torch.randn(2, *shape), path, opset_version=17)  # GELU formula
    assert expect <= {n.op_type for n in proto.graph.node}
    _compare(model, path, shape)


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        h = self.fc(x)
        return F.softplus(h, beta=2.0, threshold=1.0), torch.stack([h, -h], 1).sum(1)


def test_multiple_outputs(tmp_path):
    model = TwoHeads()
    path = tmp_path / "two.onnx"
    torch.onnx.export(model, torch.randn(2, 4), str(path), input_names=["input"],
                      output_names=["a", "b"], dynamic_axes={"input": {0: "n"}})
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    x = torch.randn(7, 4)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(["a", "b"], {"input": x.numpy()})
    with torch.no_grad():
        expected = [t.numpy() for t in model(x)]
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, atol=1e-5)


def test_atomic_save_and_file_object(tmp_path):
    model = MLP(4, (3,), 2)
    path = tmp_path / "a.onnx"
    path.write_bytes(b"old")
    torch.onnx.export(model, torch.randn(1, 4), str(path))
    assert os.listdir(tmp_path) == ["a.onnx"]
    buffer = io.BytesIO()
    torch.onnx.export(model, torch.randn(1, 4), buffer)
    assert onnx.load_from_string(buffer.getvalue()).graph.node
    assert path.read_bytes() == buffer.getvalue()


def test_list_dynamic_axes_and_bad_opset(tmp_path):
    proto = _export(MLP(4, (3,), 2), torch.randn(1, 4), tmp_path / "d.onnx",
                    dynamic_axes={"input": [0]})
    assert _dims(proto.graph.input[0]) == ["input_dynamic_axes_1", 4]
    with pytest.raises(ValueError, match="opset_version"):
        torch.onnx.export(MLP(4, (3,), 2), torch.randn(1, 4), str(tmp_path / "x.onnx"),
                          opset_version=7)


def test_fusegrad_imports_without_onnx():
    code = ("import sys; sys.modules['onnx'] = None; import fusegrad\n"
            "try:\n    fusegrad.onnx.export(fusegrad.nn.Linear(2, 2), fusegrad.randn(1, 2), "
            "'x.onnx')\nexcept ImportError as e:\n    assert 'pip install onnx' in str(e)\n"
            "else:\n    raise SystemExit('no ImportError')")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ,
                                                                  "OMP_NUM_THREADS": "1"})


class OpModel(nn.Module):
    """Calls one registry op; its tensor arguments (also inside lists) are graph inputs."""

    def __init__(self, op, args):
        super().__init__()
        self.op, self.args = op, args

    def forward(self, *tensors):
        it = iter(tensors)
        args = [next(it) if isinstance(a, np.ndarray) else
                [None if x is None else next(it) for x in a] if _is_array_list(a) else a
                for a in self.args]
        out = _dispatch.call(self.op, *args)
        return out[0] if isinstance(out, tuple) else out  # the saved statistics stay out


def _is_array_list(a):
    """A list of arrays (an index list may hold None among them: a dim kept whole)."""
    return isinstance(a, list) and any(isinstance(x, np.ndarray) for x in a)


@pytest.mark.parametrize("opset", [13, 17, 18])
@pytest.mark.parametrize("name", sorted(n for n, op in REGISTRY.items()
                                        if op.onnx is not None and op.samples is not None))
def test_registry_entries_match_onnxruntime(name, opset):
    # Each entry on its own samples (graph inputs, no folding): onnxruntime's result has the
    # op's shape, dtype and values, or the export refuses with an error naming the op.
    op = REGISTRY[name]
    passed = before_opset = 0
    samples = op.samples(np.random.default_rng(0), np.float32)
    if not samples:  # (mkldnn_rnn_layer: float32-only, tested through nn.LSTM elsewhere)
        pytest.skip(f"{name} has no registry samples")
    if name == "native_batch_norm":  # exported in eval mode only: add running statistics
        rng = np.random.default_rng(1)
        samples = [Sample(s.args[:3] + (rng.standard_normal(c).astype(np.float32),
                                        rng.uniform(0.5, 2, c).astype(np.float32), False)
                          + s.args[6:], name=s.name)
                   for s in samples for c in [s.args[0].shape[1]]]
    for sample in samples:
        arrays = [x for a in sample.args
                  for x in (a if _is_array_list(a) else [a] if isinstance(a, np.ndarray)
                            else []) if x is not None]
        if any(x.size == 0 for x in arrays):
            continue  # empty tensors: nothing to compare
        model = OpModel(op, sample.args)
        inputs = tuple(torch.from_numpy(np.array(x)) for x in arrays)
        with torch.no_grad():
            expected = model(*[t.clone() for t in inputs]).numpy()
        try:
            proto, _ = capture(model, inputs, opset, fold=False)
        except UnsupportedOperatorError as e:
            assert f"'aten::{name.split('.')[0]}'" in str(e)
            before_opset += "before opset" in str(e)  # (an ONNX operator this opset lacks)
            continue
        onnx.checker.check_model(proto, full_check=True)
        session = ort.InferenceSession(proto.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        (got,) = session.run(None, {i.name: x for i, x in zip(proto.graph.input, arrays)})
        assert got.shape == expected.shape and got.dtype == expected.dtype, sample.name
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5, err_msg=sample.name)
        passed += 1
    assert passed or before_opset, f"no sample of {name} was exported"


def test_inplace_writes_into_views(tmp_path):
    class Masked(nn.Module):
        def forward(self, x):
            mask = torch.zeros(3, 3)
            mask[0] = 1.0             # constants written through views: folded
            mask[:, 2].fill_(2.0)
            return x + mask, x.detach() * 2

    class Written(nn.Module):
        def forward(self, x):
            y = x * 1
            y[0] = 5.0
            return y

    model = Masked()
    path = tmp_path / "m.onnx"
    torch.onnx.export(model, torch.randn(3, 3), str(path), input_names=["input"])
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = torch.randn(3, 3)
    for got, expected in zip(session.run(None, {"input": x.numpy()}), model(x)):
        np.testing.assert_allclose(got, expected.numpy())
    # A write into a view of a graph value: scattered into its base.
    torch.onnx.export(Written(), x, str(tmp_path / "w.onnx"), input_names=["input"])
    session = ort.InferenceSession(str(tmp_path / "w.onnx"), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"input": x.numpy()})
    np.testing.assert_allclose(got, Written()(x).numpy())


def test_dynamo_false_exports_with_pytorchs_legacy_warning():
    import warnings

    import torch as real

    def run(lib):
        lib.manual_seed(0)
        model = lib.nn.Linear(3, 2).eval()
        buffer = io.BytesIO()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            lib.onnx.export(model, (lib.ones(1, 3),), buffer, input_names=["input"],
                            output_names=["output"], dynamo=False)
        proto = onnx.load_from_string(buffer.getvalue())
        legacy = [str(w.message) for w in seen if w.category is DeprecationWarning
                  and "legacy TorchScript-based ONNX export" in str(w.message)]
        return legacy, [i.name for i in proto.graph.input], [o.name for o in proto.graph.output]

    assert run(torch) == run(real)
