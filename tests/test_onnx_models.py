"""ONNX export of real models, written once for torch.nn and fusegrad.nn with the same
weights: each export is checked by onnx (full_check), run by onnxruntime at the example's
sizes and at other sizes of its dynamic axes, and compared with fusegrad eager and torch
eager (values, dtypes, output count); plus the export options' documented behaviour."""

import math
import warnings

import numpy as np
import pytest
import torch

import fusegrad as fg

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def model_defs(T):
    """The models, written against namespace `T` (torch or fusegrad) as users write them."""
    nn, F = T.nn, T.nn.functional
    defs = {}

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.sc = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                    nn.BatchNorm2d(cout))

        def forward(self, x):
            out = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
            return F.relu(out + self.sc(x))

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), nn.BatchNorm2d(8), nn.ReLU(),
                                      nn.MaxPool2d(2))
            self.layer = Block(8, 16, 2)
            self.pool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(16, 5)

        def forward(self, x):
            return self.fc(T.flatten(self.pool(self.layer(self.stem(x))), 1))
    defs["resnet"] = ResNet

    class MobileNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False),
                                      nn.BatchNorm2d(16), nn.Hardswish())
            self.dw = nn.Sequential(nn.Conv2d(16, 16, 3, 1, 1, groups=16, bias=False),
                                    nn.BatchNorm2d(16), nn.ReLU6(inplace=True))
            self.se1, self.se2 = nn.Linear(16, 4), nn.Linear(4, 16)
            self.pw = nn.Sequential(nn.Conv2d(16, 24, 1, bias=False), nn.BatchNorm2d(24))
            self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                      nn.Linear(24, 10), nn.Hardswish(), nn.Dropout(0.2),
                                      nn.Linear(10, 4))

        def forward(self, x):
            x = self.stem(x)
            y = self.dw(x)
            s = F.adaptive_avg_pool2d(y, 1).flatten(1)  # squeeze and excite
            s = F.hardsigmoid(self.se2(F.relu(self.se1(s)))).view(-1, 16, 1, 1)
            x = F.relu6(x + self.pw(y * s)[:, :16])
            return self.head(T.cat([x, x[:, :8]], 1))
    defs["mobilenet"] = MobileNet

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1 = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU())
            self.d2 = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
            self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
            self.up2 = nn.Upsample(scale_factor=2, mode="nearest")
            self.out = nn.Conv2d(24, 2, 1)

        def forward(self, x):
            a = self.d1(x)
            b = self.d2(F.max_pool2d(a, 2))
            v = self.up2(b)[:, :8]
            w = F.interpolate(b, scale_factor=2.0, mode="bilinear", align_corners=False)[:, 8:]
            return self.out(T.cat([self.up(b), v + a, w], dim=1))
    defs["unet"] = UNet

    class Attention(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.h = h
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)

        def forward(self, x):
            B, L, C = x.size()
            q, k, v = self.qkv(x).split(C, dim=2)
            q, k, v = (t.view(B, L, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).contiguous().view(B, L, C))

    class GPTBlock(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.ln1, self.attn, self.ln2 = nn.LayerNorm(d), Attention(d, h), nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"),
                                     nn.Linear(4 * d, d))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self, vocab=50, d=32, ctx=16):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.blocks = nn.ModuleList([GPTBlock(d, 4) for _ in range(2)])
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)
            self.head.weight = self.wte.weight  # tied

        def forward(self, idx):
            b, t = idx.size()
            x = self.wte(idx) + self.wpe(T.arange(0, t, dtype=T.long))
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln_f(x))
    defs["gpt"] = GPT

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

        def forward(self, x):
            return self.enc(x)
    defs["encoder"] = Encoder

    class CrossAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.self_attn = nn.MultiheadAttention(16, 4, batch_first=True)
            self.cross = nn.MultiheadAttention(16, 2, batch_first=True)

        def forward(self, q, kv):
            h, w = self.self_attn(q, q, q)
            out, _ = self.cross(h, kv, kv, need_weights=False)
            return out, w
    defs["mha"] = CrossAttention

    class LSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(6, 8, num_layers=2, bidirectional=True, batch_first=True)

        def forward(self, x):
            out, (h, c) = self.rnn(x)
            return out, h, c
    defs["lstm"] = LSTM

    class GRU(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(6, 8, num_layers=2, bidirectional=True)

        def forward(self, x):
            return self.rnn(x)
    defs["gru"] = GRU

    class Ops(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            y = self.fc(x)
            a, b = y.chunk(2, dim=-1)
            c, d = T.split(y, [3, 5], dim=-1)
            i = T.argmax(y, dim=-1, keepdim=True)
            tv, ti = T.topk(y, 3, dim=-1)
            sm = F.softmax(y, -1) + F.log_softmax(y, dim=1)
            r = y.reshape(y.shape[0], -1).view(-1, 8).permute(1, 0)
            return (T.where(a > 0, a, b * 2) + y.masked_fill(y < 0, 0.5)[..., :4],
                    T.gather(y, -1, i), c.sum(-1) + d.mean(-1), T.cumsum(y, dim=1), tv, ti,
                    sm, F.pad(y, (1, 2), value=1.5), r, i.squeeze(-1))
    defs["ops"] = Ops

    class Pixels(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.ps = nn.Conv2d(3, 12, 3, padding=1), nn.PixelShuffle(2)

        def forward(self, x):
            y = self.ps(self.conv(x))
            return (F.adaptive_avg_pool2d(y, (2, 2)), F.adaptive_max_pool2d(y, 2),
                    F.pad(y, (1, 1, 2, 2), mode="reflect"))
    defs["pixels"] = Pixels

    class Integers(nn.Module):
        def forward(self, x, n, mask):
            w = ((n % 3).to(T.float32) + x).masked_fill(mask, -1.0)
            return n * 2 + 1, w, mask.long().sum(dim=1), mask & (n > 2), n // 2

    defs["integers"] = Integers

    class Numbers(nn.Module):
        def forward(self, x, alpha: float = 0.5, k: int = 2):
            return x * alpha + k, T.clamp(x, min=-alpha), x.pow(k)
    defs["numbers"] = Numbers

    class MaskedAttention(nn.Module):
        """A registered causal-mask buffer sliced to the sequence, and masked_fill."""

        def __init__(self, d=16, ctx=12):
            super().__init__()
            self.emb, self.qkv = nn.Embedding(20, d), nn.Linear(d, 3 * d)
            self.register_buffer("bias", T.tril(T.ones(ctx, ctx)).view(1, ctx, ctx))

        def forward(self, idx):
            x = self.emb(idx)
            B, L, C = x.shape
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C))
            att = att.masked_fill(self.bias[:, :L, :L] == 0, float("-inf"))
            return F.softmax(att, dim=-1) @ v, x[:, -1]
    defs["masked_attention"] = MaskedAttention
    return defs


TORCH_DEFS, FG_DEFS = model_defs(torch), model_defs(fg)
RNG = np.random.RandomState(0)


def f32(*shape):
    return RNG.randn(*shape).astype(np.float32)


def tokens(high, *shape):
    return RNG.randint(0, high, shape).astype(np.int64)


# name: (example inputs, inputs at other sizes, input names, dynamic axes)
CASES = {
    "resnet": ([f32(2, 3, 16, 16)], [f32(5, 3, 16, 16)], ["x"], {"x": {0: "b"}}),
    "mobilenet": ([f32(2, 3, 16, 16)], [f32(3, 3, 16, 16)], ["x"], {"x": {0: "b"}}),
    "unet": ([f32(2, 1, 16, 16)], [f32(1, 1, 24, 32)], ["x"],
             {"x": {0: "b", 2: "h", 3: "w"}}),
    "gpt": ([tokens(50, 2, 8)], [tokens(50, 3, 5)], ["idx"], {"idx": {0: "b", 1: "t"}}),
    "encoder": ([f32(2, 7, 16)], [f32(3, 4, 16)], ["x"], {"x": {0: "b", 1: "s"}}),
    "mha": ([f32(2, 5, 16), f32(2, 7, 16)], [f32(4, 3, 16), f32(4, 6, 16)], ["q", "kv"],
            {"q": {0: "b", 1: "l"}, "kv": {0: "b", 1: "s"}}),
    "lstm": ([f32(2, 5, 6)], [f32(3, 9, 6)], ["x"], {"x": {0: "b", 1: "s"}}),
    # one ONNX GRU node per layer and direction: sequence and batch both dynamic
    "gru": ([f32(5, 2, 6)], [f32(7, 4, 6)], ["x"], {"x": {0: "s", 1: "b"}}),
    "ops": ([f32(3, 8)], [f32(6, 8)], ["x"], {"x": {0: "b"}}),
    "pixels": ([f32(2, 3, 4, 4)], [f32(1, 3, 4, 4)], ["x"], {"x": {0: "b"}}),
    "integers": ([f32(2, 4), tokens(9, 2, 4) - 4, RNG.rand(2, 4) > 0.5],
                 [f32(3, 4), tokens(9, 3, 4) - 4, RNG.rand(3, 4) > 0.5], ["x", "n", "mask"],
                 {"x": {0: "b"}, "n": {0: "b"}, "mask": {0: "b"}}),
    "numbers": ([f32(2, 4), 0.25, 3], None, ["x"], None),
}


def pair(name):
    """The torch and fusegrad models of `name`, in eval mode, with the same weights."""
    torch.manual_seed(0)
    tm = TORCH_DEFS[name]().eval()
    fm = FG_DEFS[name]().eval()
    fm.load_state_dict({k: fg.tensor(v.detach().numpy().copy())
                        for k, v in tm.state_dict().items()})
    return tm, fm


def flat(out):
    if isinstance(out, (list, tuple)):
        return [x for o in out for x in flat(o)]
    return [out]


def export(model, inputs, path, **kwargs):
    args = tuple(fg.tensor(x) if isinstance(x, np.ndarray) else x for x in inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert fg.onnx.export(model, args, str(path), dynamo=False, **kwargs) is None
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)
    return proto


def check_against_eager(path, tm, fm, inputs, atol=1e-4):
    """onnxruntime's outputs at `inputs` equal fusegrad's and torch's eager outputs."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed = dict(zip([i.name for i in session.get_inputs()],
                    [x for x in inputs if isinstance(x, np.ndarray)]))
    got = session.run(None, feed)
    with fg.no_grad():
        fo = flat(fm(*[fg.tensor(x) if isinstance(x, np.ndarray) else x for x in inputs]))
    with torch.no_grad():
        to = flat(tm(*[torch.tensor(x) if isinstance(x, np.ndarray) else x for x in inputs]))
    assert len(got) == len(fo) == len(to)
    for g, f, t in zip(got, fo, to):
        f, t = f.numpy(), t.numpy()
        assert g.dtype == f.dtype == t.dtype and g.shape == f.shape == t.shape
        np.testing.assert_allclose(g, f, atol=atol, rtol=1e-4)
        np.testing.assert_allclose(f, t, atol=atol, rtol=1e-4)


@pytest.mark.parametrize("name", list(CASES))
def test_model_runs_in_onnxruntime_as_eager(tmp_path, name):
    example, other, names, dynamic = CASES[name]
    tm, fm = pair(name)
    path = tmp_path / f"{name}.onnx"
    proto = export(fm, example, path, input_names=names, dynamic_axes=dynamic)
    assert [i.name for i in proto.graph.input] == names
    for axis_name, axes in (dynamic or {}).items():
        graph_input = next(i for i in proto.graph.input if i.name == axis_name)
        dims = graph_input.type.tensor_type.shape.dim
        assert {dims[a].dim_param for a in axes} == set(axes.values())
    check_against_eager(path, tm, fm, example)
    if other is not None:
        check_against_eager(path, tm, fm, other)


@pytest.mark.parametrize("name, opset", [("gpt", 13), ("ops", 14), ("gpt", 15), ("ops", 16),
                                         ("gpt", 17), ("ops", 18)])
def test_opsets(tmp_path, name, opset):
    example, other, names, dynamic = CASES[name]
    tm, fm = pair(name)
    path = tmp_path / f"{name}.onnx"
    proto = export(fm, example, path, input_names=names, dynamic_axes=dynamic,
                   opset_version=opset)
    assert proto.opset_import[0].version == opset
    check_against_eager(path, tm, fm, other)


def test_gpt_output_names_and_dims(tmp_path):
    example, other, names, _ = CASES["gpt"]
    tm, fm = pair("gpt")
    proto = export(fm, example, tmp_path / "g.onnx", input_names=["idx"],
                   output_names=["logits"],
                   dynamic_axes={"idx": {0: "b", 1: "t"}, "logits": {0: "b", 1: "t"}})
    (out,) = proto.graph.output
    assert out.name == "logits"
    assert [d.dim_param or d.dim_value for d in out.type.tensor_type.shape.dim] == \
        ["b", "t", 50]
    # the tied head is one initializer
    assert sum(i.name in ("wte.weight", "head.weight") for i in proto.graph.initializer) == 1


class Lambda(fg.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def indexing_and_scatter(T, x):
    i = T.tensor([[0, 1], [1, 2], [2, 3], [3, 4]])
    return (x[T.tensor([0, 2])], x[:, T.tensor([[1, 0], [4, 4]])], x[x > 0],
            x[T.tensor([0, 1]), T.tensor([2, -1])], x[None, :, T.tensor([1, 2])],
            x.view(2, 2, 5)[:, T.tensor([1, 0]), T.tensor([3])],
            x.view(2, 2, 5)[T.tensor([1]), :, T.tensor([0, 4])],
            x.scatter(1, i, 2.5), T.zeros(4, 5).scatter(1, i, x),
            T.zeros(4, 5).scatter_add(0, T.tensor([[0, 1, 0, 1, 0]]), x),
            T.ones(4, 5).scatter_reduce(0, T.tensor([[0, 1, 0, 1, 0], [3, 3, 3, 3, 3]]), x[:2],
                                        "amax"),
            T.zeros(4, 5).scatter(1, T.tensor([[0], [1], [2], [3]]), x[:, :2], reduce="add"),
            T.addbmm(x[0, :4], x[:3, :3].expand(2, 3, 3), x[1:, 1:].expand(2, 3, 4), beta=0.5,
                     alpha=2),
            T.baddbmm(x[:2, :3].unsqueeze(0), x[:2, :2].unsqueeze(0), x[2:, 1:4].unsqueeze(0),
                      beta=0),
            T.log2(x.abs() + 1) + T.expm1(x) + T.log10(x.abs() + 1))


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
def test_indexing_scatter_and_math_mappings(tmp_path):
    path = tmp_path / "i.onnx"
    x = f32(4, 5)
    export(Lambda(lambda x: indexing_and_scatter(fg, x)), [x], path, opset_version=18)
    got = ort.InferenceSession(str(path)).run(None, {"x": x})
    expected = indexing_and_scatter(torch, torch.tensor(x))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.dtype == e.numpy().dtype and g.shape == e.shape
        np.testing.assert_allclose(g, e.numpy(), rtol=1e-5, atol=1e-5)


def test_slice_expand_select_of_dynamic_sizes(tmp_path):
    tm, fm = pair("masked_attention")
    path = tmp_path / "m.onnx"
    export(fm, [tokens(20, 2, 8)], path, input_names=["idx"],
           dynamic_axes={"idx": {0: "b", 1: "t"}})
    check_against_eager(path, tm, fm, [tokens(20, 3, 5)])

    class Expand(fg.nn.Module):
        def forward(self, x):
            return x[:, None, :].expand(x.shape[0], x.shape[1] + 2, x.shape[1]) + x[-1]

    export(Expand(), [f32(2, 6)], path, input_names=["x"],
           dynamic_axes={"x": {0: "n", 1: "m"}})
    x = f32(4, 3)
    (got,) = ort.InferenceSession(str(path)).run(None, {"x": x})
    np.testing.assert_allclose(got, Expand()(fg.tensor(x)).numpy())

    chunks = Lambda(lambda x: fg.cat(x.chunk(2, dim=0)[::-1], 1)[:, :6])
    export(chunks, [f32(4, 6)], path, input_names=["x"], dynamic_axes={"x": {0: "n"}})
    x = f32(8, 6)
    (got,) = ort.InferenceSession(str(path)).run(None, {"x": x})
    np.testing.assert_allclose(got, chunks(fg.tensor(x)).numpy())


@pytest.mark.parametrize("fn", [
    lambda T, x: x.sum(0) / x.shape[0],
    lambda T, x: x * T.arange(x.size(0)).unsqueeze(1),
    lambda T, x: x + T.zeros(x.shape[0], 1) + T.ones(1, x.size(1)),
    lambda T, x: x.view(x.size(0) * 2, x.size(1) // 2).t().reshape(x.size(1) // 2, -1),
    lambda T, x: x + T.full((x.size(0), 1), 2.0),
    lambda T, x: x.new_zeros(x.shape) + T.zeros_like(x) + T.ones_like(x[:, :1]) + x,
    lambda T, x: T.nn.functional.pad(x, (0, x.size(0))),
    lambda T, x: x.sum() + T.zeros((x.size(0) + 1) // 2, (-x.size(0)) // 4 + 5),
], ids=["div", "arange", "zeros-ones", "view", "full", "like", "pad", "floordiv"])
def test_sizes_of_dynamic_axes_are_computed_at_run_time(tmp_path, fn):
    """As PyTorch's tracer records aten::size: a size read from a dynamic axis is computed
    by the graph, so the model runs at other sizes."""
    path = tmp_path / "s.onnx"
    export(Lambda(lambda x: fn(fg, x)), [f32(2, 6)], path, input_names=["x"],
           dynamic_axes={"x": {0: "n"}})
    for n in (3, 7):
        x = f32(n, 6)
        (got,) = ort.InferenceSession(str(path)).run(None, {"x": x})
        np.testing.assert_allclose(got, fn(torch, torch.tensor(x)).numpy(), rtol=1e-6,
                                   atol=1e-6)
    assert type(fg.randn(2, 3).shape[0]) is int  # the sizes are plain again afterwards


@pytest.mark.parametrize("fn", [
    lambda x: x.sum(0) / len(x),
    lambda x: x + fg.zeros(len(x), 1),
    lambda x: x[: int(x.shape[0]) - 1],
])
def test_a_size_read_as_a_plain_number_is_refused(tmp_path, fn):
    with pytest.raises(RuntimeError, match="depends on the example's size of a dynamic axis"):
        export(Lambda(fn), [f32(2, 6)], tmp_path / "r.onnx", input_names=["x"],
               dynamic_axes={"x": {0: "n"}})


def test_params_as_inputs(tmp_path):
    tm, fm = pair("resnet")
    keys = set(fm.state_dict()) - {k for k in fm.state_dict() if "num_batches" in k}
    proto = export(fm, [f32(1, 3, 8, 8)], tmp_path / "a.onnx", export_params=False,
                   input_names=["x"])
    inputs = [i.name for i in proto.graph.input]
    assert inputs[0] == "x" and set(inputs[1:]) == keys
    assert not keys & {i.name for i in proto.graph.initializer}
    proto = export(fm, [f32(1, 3, 8, 8)], tmp_path / "b.onnx",
                   keep_initializers_as_inputs=True, input_names=["x"])
    assert set(i.name for i in proto.graph.input[1:]) == keys
    assert keys <= {i.name for i in proto.graph.initializer}
    check_against_eager(tmp_path / "b.onnx", tm, fm, [f32(1, 3, 8, 8)])


def test_output_names(tmp_path):
    tm, fm = pair("lstm")
    proto = export(fm, [f32(2, 5, 6)], tmp_path / "o.onnx", output_names=["y", "h"])
    assert [o.name for o in proto.graph.output] == ["y", "h", "output_2"]
    with pytest.raises(RuntimeError, match=r"number of output names provided \(4\) exceeded "
                                           r"number of outputs \(3\)"):
        export(fm, [f32(2, 5, 6)], tmp_path / "p.onnx", output_names=list("abcd"))


@pytest.mark.parametrize("fold", [True, False])
def test_training_mode(tmp_path, fold):
    """TrainingMode.TRAINING exports batch statistics (PyTorch's train-mode values); the
    modules' modes are restored."""
    tm, fm = pair("resnet")
    x = f32(4, 3, 8, 8)
    path = tmp_path / "t.onnx"
    export(fm, [x], path, training=fg.onnx.TrainingMode.TRAINING, do_constant_folding=fold,
           input_names=["x"])
    assert not fm.training and not fm.layer.b1.training
    (got,) = ort.InferenceSession(str(path)).run(None, {"x": x})
    with torch.no_grad():
        expected = tm.train()(torch.tensor(x)).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-4)


def test_training_export_updates_statistics_once(tmp_path):
    """As PyTorch's: a training-mode export runs the model once (batch norm counts one
    batch), even with the dynamic-axes check's captures at other sizes."""
    counts = []
    for T in (torch, fg):
        T.manual_seed(0)
        model = T.nn.Sequential(T.nn.Linear(3, 4), T.nn.BatchNorm1d(4))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            T.onnx.export(model, (T.randn(5, 3),), str(tmp_path / "b.onnx"), dynamo=False,
                          training=T.onnx.TrainingMode.TRAINING, input_names=["x"],
                          dynamic_axes={"x": [0]})
        counts.append(int(model[1].num_batches_tracked))
    assert counts[0] == counts[1] == 1


def test_code_needing_plain_sizes_is_captured_with_them(tmp_path):
    """A model that cannot run on symbolic sizes is captured with the example's (and the
    dynamic-axes check decides)."""
    model = Lambda(lambda x: x.sum(0) * (1 if isinstance(x.size(0), int) else None))
    path = tmp_path / "p.onnx"
    export(model, [f32(2, 6)], path, input_names=["x"], dynamic_axes={"x": {0: "n"}})
    x = f32(5, 6)
    (got,) = ort.InferenceSession(str(path)).run(None, {"x": x})
    np.testing.assert_allclose(got, x.sum(0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("options", [
    dict(dynamic_axes={"input": {0: "b"}}),
    dict(output_names=["y"], dynamic_axes={"y": [0], "x": [0]}),
    dict(input_names=["x"], dynamic_axes={"x": {0: "b"}, "output": [0]}),
])
def test_dynamic_axes_warnings(tmp_path, options):
    """PyTorch's warnings for keys that are not given names and for axes without names,
    and its naming of those axes in the caller's dict."""
    seen = []
    for T in (torch, fg):
        opts = {k: (dict(v) if isinstance(v, dict) else v) for k, v in options.items()}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            T.onnx.export(T.nn.Linear(3, 2), (T.randn(4, 3),), str(tmp_path / "w.onnx"),
                          dynamo=False, **opts)
        seen.append(([str(w.message) for w in caught if w.category is UserWarning],
                     opts["dynamic_axes"]))
    assert seen[0] == seen[1]


def test_unsupported_operator_names_the_op(tmp_path):
    model = Lambda(lambda x: fg.special.i1(x) + 1)
    with pytest.raises(fg.onnx.UnsupportedOperatorError) as info:
        export(model, [f32(3)], tmp_path / "u.onnx")
    assert str(info.value) == ("Exporting the operator 'aten::special_i1' to ONNX opset "
                               "version 20 is not supported")
    assert type(fg.randn(2).shape[0]) is int


def test_interpolate_to_another_tensors_dynamic_size(tmp_path):
    """`interpolate(x, size=y.shape[2:])` (a UNet's skip join) reads the sizes as sizes: the
    graph resizes to `y`'s size at run time."""
    class Join(fg.nn.Module):
        def forward(self, x, y):
            return fg.nn.functional.interpolate(x, size=y.shape[2:], mode="bilinear",
                                                align_corners=False) + y

    path = tmp_path / "j.onnx"
    export(Join(), [f32(1, 2, 4, 4), f32(1, 2, 8, 6)], path, input_names=["x", "y"],
           dynamic_axes={"x": {2: "h", 3: "w"}, "y": {2: "H", 3: "W"}})
    x, y = f32(1, 2, 5, 3), f32(1, 2, 10, 7)
    (got,) = ort.InferenceSession(str(path)).run(None, {"x": x, "y": y})
    want = torch.nn.functional.interpolate(torch.tensor(x), size=(10, 7), mode="bilinear",
                                           align_corners=False) + torch.tensor(y)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)
