"""Dynamic axes in ONNX export: a graph that works at any size of its dynamic axes (sizes
read from them included: the graph computes those) runs in onnxruntime at another size as the
eager model does; one that computes with the example's size (a size read as a plain number)
is refused, where it would give wrong results silently."""

import numpy as np
import pytest

import fusegrad

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")


class Lambda(fusegrad.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


VALID = [
    lambda x: x.view(x.size(0), -1, 2).sum(-1),
    lambda x: x.reshape(x.shape[0] * 2, 3),
    lambda x: x + fusegrad.arange(x.size(1)),
    lambda x: x[:, None, :].expand(-1, 3, -1),
    lambda x: x[1:].relu() * 2,
    # Sizes read from a dynamic axis are computed by the graph, as PyTorch's tracer records
    # aten::size: these run at other sizes too.
    lambda x: x.sum(0) / x.shape[0],
    lambda x: x[-1],
    lambda x: x * fusegrad.arange(x.size(0)).unsqueeze(1),
    lambda x: x + fusegrad.zeros(x.shape[0], 1),
]
# A size read as a plain number (`len`, `int`) is fixed to the example's.
SIZE_BOUND = [
    lambda x: x.sum(0) / len(x),
    lambda x: x * fusegrad.arange(len(x)).unsqueeze(1),
    lambda x: x + fusegrad.zeros(len(x), 1),
    lambda x: x[: int(x.shape[0]) - 1],
]


@pytest.mark.parametrize("case", range(len(VALID)))
def test_a_size_independent_graph_runs_at_other_sizes(case, tmp_path):
    model = Lambda(VALID[case])
    path = tmp_path / "m.onnx"
    fusegrad.onnx.export(model, (fusegrad.randn(2, 6),), str(path), input_names=["x"],
                         dynamic_axes={"x": {0: "batch"}})
    session = ort.InferenceSession(str(path))
    x = fusegrad.randn(5, 6)
    (out,) = session.run(None, {"x": x.numpy()})
    np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", range(len(SIZE_BOUND)))
def test_a_graph_bound_to_the_examples_size_is_refused(case, tmp_path):
    model = Lambda(SIZE_BOUND[case])
    path = tmp_path / "m.onnx"
    with pytest.raises(RuntimeError, match="depends on the example's size of a dynamic axis"):
        fusegrad.onnx.export(model, (fusegrad.randn(2, 6),), str(path), input_names=["x"],
                             dynamic_axes={"x": {0: "batch"}})
    assert not path.exists()
    # Without dynamic axes the same model exports (its sizes are fixed, as declared).
    fusegrad.onnx.export(model, (fusegrad.randn(2, 6),), str(path), input_names=["x"])
    assert path.exists()
