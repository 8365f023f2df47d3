"""torch.onnx.export parity: the newer op mappings, writes into views, the export signature
(kwargs, TrainingMode, return value, opsets), PyTorch's messages, and the dynamic-axes check
on size arithmetic. Each exported model runs in onnxruntime against eager fusegrad."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import io  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import fusegrad as torch  # noqa: E402
import fusegrad.nn.functional as F  # noqa: E402
from fusegrad import nn  # noqa: E402
from fusegrad.onnx import UnsupportedOperatorError  # noqa: E402

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def _run(model, xs, **kwargs):
    """Export to memory, run in onnxruntime, compare with eager fusegrad; the proto."""
    buffer = io.BytesIO()
    torch.onnx.export(model, xs, buffer, **kwargs)
    proto = onnx.load_from_string(buffer.getvalue())
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    got = session.run(None, {i.name: x.numpy() for i, x in zip(session.get_inputs(), xs)})
    with torch.no_grad():
        expected = model(*[x.clone() for x in xs])
    expected = expected if isinstance(expected, tuple) else (expected,)
    for g, e in zip(got, expected):
        assert g.shape == tuple(e.shape) and g.dtype == e.numpy().dtype
        np.testing.assert_allclose(g, e.numpy(), rtol=1e-4, atol=1e-5)
    return proto


torch.manual_seed(0)
X = torch.randn(3, 4)
IMG = torch.randn(1, 4, 6, 6)
IDX = torch.tensor([2, 0])

CASES = {
    "gather": lambda x: torch.gather(x, 1, torch.tensor([[0, 1], [1, 2], [3, 0]])),
    "index_select": lambda x: x.index_select(1, IDX),
    "std": lambda x: x.std(1),
    "var": lambda x: x.var(1, unbiased=False),
    "norm": lambda x: x.norm(dim=1),
    "normalize": lambda x: F.normalize(x, dim=1),
    "cosine": lambda x: F.cosine_similarity(x, x.flip(0)),
    "atan2": lambda x: torch.atan2(x, x.flip(1)),
    "log1p": lambda x: x.abs().log1p(),
    "lerp": lambda x: torch.lerp(x, x.flip(0), 0.3),
    "addcmul": lambda x: torch.addcmul(x, x, x, value=0.5),
    "cross_entropy": lambda x: F.cross_entropy(x, torch.tensor([0, 1, 2])),
    "mse": lambda x: F.mse_loss(x, x.flip(0)),
    "bce_logits": lambda x: F.binary_cross_entropy_with_logits(x, x.sigmoid()),
    "sdpa_causal": lambda x: F.scaled_dot_product_attention(x[None], x[None], x[None],
                                                            is_causal=True),
    "nan_to_num": lambda x: x.log().nan_to_num(0.0),
    "logit": lambda x: torch.sigmoid(x).logit(),
    "diagonal": lambda x: torch.diagonal(x, 1),
    "trunc_frac": lambda x: (x * 3).trunc() + (x * 3).frac(),
    "cdist": lambda x: torch.cdist(x, x.flip(0)),
    "rmsnorm_add_scalar": lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6),
    "setitem": lambda x: (lambda c: (c.__setitem__((slice(None), 0), 5.0), c)[1])(x.clone()),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_mapped_op_matches_onnxruntime(name):
    _run(Fn(CASES[name]), (X,), opset_version=17)


def test_pixel_shuffle():
    _run(nn.PixelShuffle(2), (IMG,), opset_version=17)


def test_writes_into_views_reach_base_and_other_views():
    def fn(x):
        y = x * 1
        v = y[0]
        y[1:, ::2] = x[:2, 1::2] * 3
        y.add_(1)
        y.flip(1)[0].copy_(torch.arange(4.0))
        return y, v

    _run(Fn(fn), (X,))


def test_dynamic_size_arithmetic_is_refused():
    # A size read as a plain number: 4 // 2 == 5 // 2, so the check must look at a clearly
    # different size too.
    model = Fn(lambda x: x[:, : int(x.size(1)) // 2] * 2)
    with pytest.raises(RuntimeError, match="depends on the example's size"):
        torch.onnx.export(model, (torch.randn(2, 4, 3),), io.BytesIO(), input_names=["x"],
                          dynamic_axes={"x": {1: "t"}})
    # Read as a size, the graph computes it (as PyTorch's exporter records aten::size).
    halves = Fn(lambda x: x[:, : x.size(1) // 2] * 2)
    buffer = io.BytesIO()
    torch.onnx.export(halves, (torch.randn(2, 4, 3),), buffer, input_names=["x"],
                      dynamic_axes={"x": {1: "t"}})
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    x = torch.randn(2, 7, 3)
    np.testing.assert_allclose(session.run(None, {"x": x.numpy()})[0], halves(x).numpy())
    # An even-only model that is size-independent still exports with the dynamic axis.
    pairs = Fn(lambda x: x.reshape(x.shape[0], x.shape[1] // 2, 2 * x.shape[2]))
    buffer = io.BytesIO()
    torch.onnx.export(pairs, (torch.randn(2, 4, 3),), buffer, input_names=["x"],
                      dynamic_axes={"x": {0: "b", 1: "t"}})
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    x = torch.randn(3, 8, 3)
    np.testing.assert_allclose(session.run(None, {"x": x.numpy()})[0], pairs(x).numpy())


class KW(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.drop = nn.Dropout(0.5)

    def forward(self, x, y=None, z=2.0):
        out = self.drop(self.lin(x))
        if y is not None:
            out = out + y
        return out * z


def test_kwargs_and_trailing_dict():
    model = KW()
    x, y = torch.randn(4, 3), torch.randn(4, 2)
    for call_args, kwargs in (((x,), {"kwargs": {"y": y}}), ((x, {"y": y}), {})):
        buffer = io.BytesIO()
        assert torch.onnx.export(model, call_args, buffer, dynamo=False, **kwargs) is None
        session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
        assert [i.name for i in session.get_inputs()] == ["x", "y"]
        got = session.run(None, {"x": x.numpy(), "y": y.numpy()})[0]
        np.testing.assert_allclose(got, model.eval()(x, y=y).detach().numpy(), rtol=1e-6)
    buffer = io.BytesIO()
    torch.onnx.export(model, (x, {"z": 3.0}), buffer)  # a keyword number: a constant
    assert len(onnx.load_from_string(buffer.getvalue()).graph.input) == 1


def test_training_mode_and_default_opset():
    model = KW()
    model.train()
    buffer = io.BytesIO()
    torch.onnx.export(model, (torch.randn(4, 3),), buffer,
                      training=torch.onnx.TrainingMode.EVAL)
    proto = onnx.load_from_string(buffer.getvalue())
    assert proto.opset_import[0].version == 20 and proto.ir_version == 9
    assert model.training  # restored
    model.eval()
    torch.onnx.export(model, (torch.randn(4, 3),), io.BytesIO(),
                      training=torch.onnx.TrainingMode.PRESERVE)
    assert not model.training
    assert [m.name for m in torch.onnx.TrainingMode] == ["EVAL", "PRESERVE", "TRAINING"]
    with pytest.raises(TypeError, match="should be a torch.onnx.TrainingMode enum"):
        torch.onnx.export(model, (torch.randn(4, 3),), io.BytesIO(), training=True)


def test_opset_range_and_messages():
    model = nn.Linear(3, 2)
    with pytest.raises(ValueError, match="opset versions 13 to"):
        torch.onnx.export(model, (torch.randn(1, 3),), io.BytesIO(), opset_version=11)
    with pytest.raises(RuntimeError, match="Unsupported onnx_opset_version: 24"):
        torch.onnx.export(model, (torch.randn(1, 3),), io.BytesIO(), opset_version=24)
    with pytest.raises(RuntimeError) as info:
        torch.onnx.export(model, (torch.randn(1, 3),), io.BytesIO(), output_names=["a", "b"])
    assert str(info.value) == "number of output names provided (2) exceeded number of outputs (1)"
    with pytest.raises(UnsupportedOperatorError) as info:
        torch.onnx.export(Fn(lambda x: torch.special.i1(x)), (X,), io.BytesIO())
    assert str(info.value).endswith("is not supported")


def test_masked_fill_none_mask_message():
    with pytest.raises(TypeError) as info:
        X.masked_fill(None, 0.0)
    assert str(info.value).startswith(
        "masked_fill() received an invalid combination of arguments - got (NoneType, float), "
        "but expected one of:\n * (Tensor mask, Tensor value)\n")
    with pytest.raises(TypeError, match=r"masked_fill_\(\) received"):
        X.clone().masked_fill_(X > 0, None)
