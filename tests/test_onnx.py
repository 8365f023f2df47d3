"""fusegrad.onnx.export: models checked by onnx and run by onnxruntime against fusegrad."""

import io
import os
import subprocess
import sys

import numpy as np
import pytest

import fusegrad as torch
import fusegrad.nn.functional as F
from fusegrad import nn
from fusegrad.models import MLP, LeNet5, resnet18
from fusegrad.onnx import UnsupportedOperatorError

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
    assert proto.ir_version == 8
    assert proto.opset_import[0].version == 17
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
    assert ("LayerNormalization" in ops) == (opset >= 17) and "Shape" in ops
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
        y = F.layer_norm(y, 4)[..., :3]
        return F.linear(F.leaky_relu(y, 0.1), self.fc.weight, self.fc.bias)  # 3-D: MatMul


def test_functional_forms(tmp_path):
    torch.manual_seed(2)
    model = Functional().eval()
    path = tmp_path / "fn.onnx"
    proto = _export(model, torch.randn(2, 3, 7, 7), path)
    ops = {n.op_type for n in proto.graph.node}
    assert {"Conv", "BatchNormalization", "Clip", "AveragePool", "MatMul"} <= ops
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
    class Cumulative(nn.Module):
        def forward(self, x):
            return torch.cumsum(x, 1)

    with pytest.raises(UnsupportedOperatorError, match="cumsum"):
        torch.onnx.export(Cumulative(), torch.randn(2, 3), str(tmp_path / "c.onnx"))
    assert not os.listdir(tmp_path)


def test_unmapped_module_raises_naming_it(tmp_path):
    class Recurrent(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(3, 4)

        def forward(self, x):
            return self.rnn(x)[0]

    with pytest.raises(UnsupportedOperatorError, match="LSTM"):
        torch.onnx.export(Recurrent(), torch.randn(5, 2, 3), str(tmp_path / "r.onnx"))


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
