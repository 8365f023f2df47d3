"""`export(..., dynamo=True)` returns an `ONNXProgram` as PyTorch's does (`model_proto`,
`save`, calling it runs the model in ONNX Runtime), and `dynamic_shapes` given as
`torch.export` `Dim`s make those input sizes symbolic: the model runs at other batch sizes,
equal to eager fusegrad."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fusegrad

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _model():
    nn = fusegrad.nn
    fusegrad.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2)).eval()


@pytest.mark.parametrize("form", ["tuple", "dict", "axes"])
def test_dynamic_shapes_program_runs_at_other_sizes(tmp_path, form):
    m = _model()
    x = fusegrad.randn(2, 3, 8, 8)
    batch = fusegrad.export.Dim("batch", min=1, max=64)
    shapes = {"tuple": ({0: batch},), "dict": {"input": (batch, None, None, None)},
              "axes": ((batch, None, fusegrad.export.Dim.AUTO, None),)}[form]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = fusegrad.onnx.export(m, (x,), dynamo=True, dynamic_shapes=shapes)
    assert isinstance(program, fusegrad.onnx.ONNXProgram)
    dims = [d.dim_param or d.dim_value
            for d in program.model_proto.graph.input[0].type.tensor_type.shape.dim]
    assert dims[0] == "batch" and dims[1] == 3 and (dims[2] == 8) == (form != "axes")
    path = tmp_path / "m.onnx"
    program.save(str(path))
    session = ort.InferenceSession(str(path))
    name = session.get_inputs()[0].name
    for b in (1, 5):
        xi = fusegrad.randn(b, 3, 8, 8)
        want = m(xi).detach().numpy()
        np.testing.assert_allclose(session.run(None, {name: xi.numpy()})[0], want,
                                   rtol=1e-5, atol=1e-5)
        (got,) = program(xi)
        assert isinstance(got, fusegrad.Tensor)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_program_save_without_weights_and_apply_weights(tmp_path):
    m = _model()
    x = fusegrad.randn(2, 3, 8, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = fusegrad.onnx.export(m, (x,), dynamo=True)
    path = tmp_path / "light.onnx"
    program.save(str(path), include_initializers=False)
    assert not onnx.load(str(path)).graph.initializer
    assert len(program.model_proto.graph.initializer) > 0
    before = program(x)[0].numpy()
    np.testing.assert_allclose(before, m(x).detach().numpy(), rtol=1e-5, atol=1e-5)
    with fusegrad.no_grad():
        m[5].bias.add_(1.0)
    program.apply_weights({"5.bias": m[5].bias})
    np.testing.assert_allclose(program(x)[0].numpy(), m(x).detach().numpy(), rtol=1e-5,
                               atol=1e-5)
    program.rename_axes({})
    program.release()
