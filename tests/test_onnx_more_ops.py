"""fusegrad.onnx.export of reductions with indices, sorting, scans, masks, padding, resizing,
normalizations, activations, integer arithmetic, recurrent layers and attention: each tiny
model is exported, run by onnxruntime and compared with the eager model (values, dtypes,
shapes), also at a second batch size when the mapping does not read the batch size."""

import numpy as np
import pytest

import fusegrad as torch
import fusegrad.nn.functional as F
from fusegrad import nn

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


class Fn(nn.Module):
    """A function of the inputs (and of an optional submodule's parameters)."""

    def __init__(self, fn, inner=None):
        super().__init__()
        self.fn = fn
        self.inner = inner

    def forward(self, *xs):
        return self.fn(self, *xs)


def _as_list(out):
    """The tensors of a (nested) tuple output, in order."""
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _as_list(o)]
    return [out]


def _run(model, make, tmp_path, batches=(2, 5), dynamic=True, opset=17, ops=None,
         atol=1e-5):
    """Export `model` on `make(batches[0])`, then compare onnxruntime with the eager model on
    `make(n)` for every n (only the first when not `dynamic`). Returns the ONNX op types."""
    torch.manual_seed(0)
    model = model.eval()
    example = make(batches[0])
    names = [f"x{i}" for i in range(len(example))]
    with torch.no_grad():
        n_out = len(_as_list(model(*example)))
    outs = [f"y{i}" for i in range(n_out)]
    axes = {name: {0: "batch"} for name in names} if dynamic else None
    path = tmp_path / "m.onnx"
    torch.onnx.export(model, tuple(example), str(path), input_names=names, output_names=outs,
                      dynamic_axes=axes, opset_version=opset)
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for n in batches if dynamic else batches[:1]:
        xs = make(n) if n != batches[0] else example
        with torch.no_grad():
            expected = [t.numpy() for t in _as_list(model(*xs))]
        got = session.run(None, {k: x.numpy() for k, x in zip(names, xs)})
        for g, e in zip(got, expected):
            assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, e.shape, g.dtype)
            if e.dtype.kind == "f":
                np.testing.assert_allclose(g, e, atol=atol, rtol=1e-5)
            else:
                np.testing.assert_array_equal(g, e)
    types = {node.op_type for node in proto.graph.node}
    if ops is not None:
        assert set(ops) <= types, types
    return types


def randn(*shape):
    return lambda n: [torch.randn(n, *shape)]


def ints(*shape, low=-9, high=9):
    return lambda n: [torch.randint(low, high, (n, *shape))]


# (id, function of (module, x), input maker, dynamic batch, expected ONNX ops)
CASES = [
    ("argmax_dim", lambda m, x: torch.argmax(x, 1, keepdim=True), randn(6), True, {"ArgMax"}),
    ("argmin_dim", lambda m, x: x.argmin(-1), randn(3, 6), True, {"ArgMin"}),
    ("argmax_all", lambda m, x: x.argmax(), randn(6), True, {"ArgMax", "Reshape"}),
    ("argmin_all_keep", lambda m, x: x.argmin(None, True), randn(6), True, {"ArgMin"}),
    ("max_dim", lambda m, x: torch.max(x, 1), randn(6), True, {"ReduceMax", "ArgMax"}),
    ("min_dim_keep", lambda m, x: x.min(2, keepdim=True), randn(3, 4), True,
     {"ReduceMin", "ArgMin"}),
    ("max_all", lambda m, x: x.max() + x.min(), randn(6), True, {"ReduceMax", "ReduceMin"}),
    ("max_int", lambda m, x: (x.max(1)[0], x.max()), ints(6), True, {"ReduceMax"}),
    ("topk", lambda m, x: x.topk(3, 1), randn(6), True, {"TopK"}),
    ("topk_smallest", lambda m, x: torch.topk(x, 2, dim=0, largest=False), randn(6), False,
     {"TopK"}),
    ("sort", lambda m, x: x.sort(1, descending=True), randn(6), True, {"TopK"}),
    ("sort_batch_dim", lambda m, x: x.sort(0), randn(3), True, {"TopK", "Shape"}),
    ("argsort", lambda m, x: x.argsort(-1), randn(2, 5), True, {"TopK"}),
    ("cumsum", lambda m, x: x.cumsum(1), randn(6), True, {"CumSum"}),
    ("cumsum_int", lambda m, x: x.cumsum(-1), ints(5), True, {"CumSum"}),
    ("prod", lambda m, x: x.prod(1) + x.prod(), randn(4), False, {"ReduceProd"}),
    ("prod_keep", lambda m, x: x.prod(1, keepdim=True), randn(4), True, {"ReduceProd"}),
    ("any_all", lambda m, x: ((x > 1).any(1), (x > -2).all(), (x > 0).any()), randn(6), True,
     {"ReduceSum"}),
    ("all_dims", lambda m, x: torch.all(x > -1, dim=(1, 2)), randn(3, 4), True, {"ReduceSum"}),
    ("isnan_isinf", lambda m, x: (x.log().isnan(), (1 / (x * 0)).isinf(),
                                  (x.log() / (x - x)).isfinite()), randn(6), True,
     {"IsNaN", "IsInf"}),
    ("masked_fill", lambda m, x: x.masked_fill(x > 0.5, -1.0), randn(6), True, {"Where"}),
    ("masked_fill_tensor", lambda m, x: x.masked_fill(x < 0, x.sum()), randn(6), True,
     {"Where"}),
    ("where_scalars", lambda m, x: (torch.where(x > 0, x, 0.0), torch.where(x > 0, 1.0, -1.0)),
     randn(6), True, {"Where"}),
    ("triu_tril", lambda m, x: x.triu(1) + x.tril(-1), randn(4, 5), True, {"Trilu"}),
    ("flip", lambda m, x: x.flip(1) + x.flip([0, 2]), randn(3, 4), True, {"Slice"}),
    ("roll", lambda m, x: x.roll(2, 1) + x.roll((1, -1), (1, 2)), randn(5, 4), True,
     {"Concat"}),
    ("roll_flat", lambda m, x: x.roll(3), randn(4), False, {"Concat"}),
    ("repeat", lambda m, x: x.repeat(2, 1, 3), randn(4), False, {"Tile"}),
    ("repeat_batch", lambda m, x: x.repeat(1, 2), randn(3), True, {"Tile"}),
    ("expand_as", lambda m, x: x[:, :1].expand_as(x) * x, randn(5), True, {"Expand"}),
    ("one_hot", lambda m, x: F.one_hot(x, 6), ints(4, low=0, high=6), True, {"OneHot"}),
    ("pad_constant", lambda m, x: F.pad(x, (1, 2, 0, 1), value=0.5), randn(3, 4, 5), True,
     {"Pad"}),
    ("pad_reflect", lambda m, x: F.pad(x, (1, 2, 2, 1), mode="reflect"), randn(3, 4, 5), True,
     {"Pad"}),
    ("pad_replicate", lambda m, x: F.pad(x, (2, 1), mode="replicate"), randn(3, 5), True,
     {"Pad"}),
    ("interp_nearest", lambda m, x: F.interpolate(x, scale_factor=2), randn(3, 4, 5), True,
     {"Resize"}),
    ("interp_nearest_size", lambda m, x: F.interpolate(x, size=(7, 3)), randn(3, 4, 5), True,
     {"Resize"}),
    ("interp_bilinear", lambda m, x: F.interpolate(x, scale_factor=2, mode="bilinear"),
     randn(3, 4, 5), True, {"Resize"}),
    ("interp_bilinear_align", lambda m, x: F.interpolate(x, size=(7, 9), mode="bilinear",
                                                         align_corners=True),
     randn(3, 4, 5), True, {"Resize"}),
    ("interp_bilinear_size", lambda m, x: F.interpolate(x, size=(3, 8), mode="bilinear"),
     randn(3, 4, 5), True, {"Resize"}),
    ("upsample_module", lambda m, x: m.inner(x), randn(2, 3, 3), True, {"Gather"}),
    ("glu", lambda m, x: (F.glu(x), F.glu(x, 1)), randn(6, 6), True,
     {"Split", "Sigmoid"}),
    ("celu", lambda m, x: F.celu(x, 0.7), randn(6), True, {"Celu"}),
    ("logsigmoid", lambda m, x: F.logsigmoid(x * 30), randn(6), True, {"Softplus"}),
    ("mish", lambda m, x: F.mish(x), randn(6), True, {"Tanh", "Softplus"}),
    ("floor_divide_int", lambda m, x: (x // 4, x // -3, torch.floor_divide(x, x.abs() + 1)),
     ints(7), True, {"Mod", "Div"}),
    ("remainder_int", lambda m, x: (x % 4, x % -3, torch.remainder(x, x.flip(1) * 2 + 1)),
     ints(7), True, {"Mod"}),
    ("floor_divide_float", lambda m, x: (x // 0.3, x // -0.7, torch.floor_divide(x, x.flip(1))),
     randn(7), True, {"Mod", "Round"}),
    ("remainder_float", lambda m, x: (x % 0.3, torch.remainder(x, -0.7), torch.fmod(x, 0.4)),
     randn(7), True, {"Mod"}),
    ("div_modes", lambda m, x: (torch.div(x, 3, rounding_mode="floor"),
                                torch.div(x, -3, rounding_mode="trunc")), ints(7), True,
     {"Mod", "Div"}),
    ("bitwise_xor", lambda m, x: (x ^ 5, x ^ x.flip(1), x & -4, x | 3, ~x), ints(6), True,
     {"BitwiseXor", "BitwiseAnd", "BitwiseOr", "BitwiseNot"}),
    ("bitwise_bool", lambda m, x: (x > 0) ^ (x < 3), ints(6), True, {"Xor"}),
    ("unfold_im2col", lambda m, x: F.unfold(x, 2, padding=1, stride=(1, 2)), randn(3, 5, 6),
     True, {"Slice", "Concat"}),
    ("unfold_dilated", lambda m, x: F.unfold(x, (2, 3), dilation=2), randn(2, 6, 7), True,
     {"Slice"}),
    ("tensor_unfold", lambda m, x: x.unfold(1, 3, 2), randn(8, 2), True, {"Slice", "Concat"}),
    ("adaptive_max_pool2d", lambda m, x: F.adaptive_max_pool2d(x, (2, 3)), randn(3, 4, 6), True,
     {"MaxPool"}),
    ("adaptive_max_pool2d_global", lambda m, x: F.adaptive_max_pool2d(x, 1), randn(3, 4, 6),
     True, {"GlobalMaxPool"}),
    ("sdpa", lambda m, x: F.scaled_dot_product_attention(x, x * 0.5, x.flip(2)),
     randn(2, 5, 4), True, {"MatMul", "Softmax"}),
    ("sdpa_causal_scale", lambda m, x: F.scaled_dot_product_attention(
        x, x, x, is_causal=True, scale=0.3), randn(2, 5, 4), True, {"Where", "Softmax"}),
    ("sdpa_mask", lambda m, x: F.scaled_dot_product_attention(
        x, x, x, attn_mask=torch.ones(5, 5).tril() * 0.5), randn(2, 5, 4), True, {"Add"}),
]


def _inner(name):
    if name == "upsample_module":
        return nn.Upsample(scale_factor=(2, 1.5), mode="nearest")
    return None


@pytest.mark.parametrize("name, fn, make, dynamic, ops", CASES, ids=[c[0] for c in CASES])
def test_op_matches_onnxruntime(tmp_path, name, fn, make, dynamic, ops):
    opset = 18 if name.startswith("bitwise_xor") else 17
    _run(Fn(fn, _inner(name)), make, tmp_path, dynamic=dynamic, ops=ops, opset=opset)


@pytest.mark.parametrize("opset", [13, 14, 17, 18])
def test_opsets(tmp_path, opset):
    # Trilu from opset 14 (a constant mask before); integer bitwise ops on bit planes before
    # opset 18; reductions with axes as inputs from opset 18.
    fn = (lambda m, x: (x.float().triu(), x ^ 6, x.max(1)[1], x.prod(1), x.argmax(),
                        (x > 0).any(1), x.sort(1)[0], x.cumsum(1)))
    types = _run(Fn(fn), ints(4, 5), tmp_path, opset=opset)
    assert ("Trilu" in types) == (opset >= 14)
    assert ("BitwiseXor" in types) == (opset >= 18)


def test_nearest_with_scale_not_the_size_ratio(tmp_path):
    # PyTorch divides by the given scale: 5 * 1.7 -> 8 rows placed by 1/1.7, not 5/8
    _run(Fn(lambda m, x: F.interpolate(x, scale_factor=1.7)), randn(2, 5, 3), tmp_path)


@pytest.mark.parametrize("make_norm, shape, dynamic", [
    (lambda: nn.GroupNorm(2, 4), (4, 3, 5), True),
    (lambda: nn.GroupNorm(1, 6, affine=False), (6, 7), True),
    (lambda: nn.InstanceNorm2d(3, affine=True), (3, 4, 5), False),
    (lambda: nn.InstanceNorm1d(4), (4, 6), False),
], ids=["group_norm", "group_norm_1d", "instance_norm2d", "instance_norm1d"])
def test_normalizations(tmp_path, make_norm, shape, dynamic):
    # instance_norm views (N, C) as one batch of N*C channels: the graph reads N
    norm = make_norm()
    with torch.no_grad():
        for p in norm.parameters():
            p.copy_(torch.randn(*p.shape))
    _run(Fn(lambda m, x: m.inner(x), norm), randn(*shape), tmp_path, dynamic=dynamic,
         ops={"ReduceMean"})


def test_prelu(tmp_path):
    for prelu, shape in ((nn.PReLU(), (5,)), (nn.PReLU(3, 0.1), (3, 4))):
        _run(Fn(lambda m, x: m.inner(x), prelu), randn(*shape), tmp_path, ops={"PRelu"})


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_fixed_bags(tmp_path, mode):
    bag = nn.EmbeddingBag(10, 3, mode=mode)
    _run(Fn(lambda m, x: m.inner(x), bag), ints(4, low=0, high=10), tmp_path,
         ops={"Gather", "Reshape"})


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_offsets_and_padding(tmp_path, mode):
    bag = nn.EmbeddingBag(10, 3, mode=mode, padding_idx=2)
    offsets = torch.tensor([0, 2, 2, 5])

    def make(n):
        return [torch.randint(0, 5, (n,))]

    # bags [0:2], [2:2] (empty), [2:5], [5:n]: offsets fixed, the indices' length too
    _run(Fn(lambda m, x: m.inner(x, offsets), bag), make, tmp_path, batches=(8,),
         dynamic=False, ops={"MatMul"})
    # per-sample weights (sum) on fixed-size bags keep the batch dynamic
    if mode == "sum":
        bag2 = nn.EmbeddingBag(10, 3, mode="sum")
        _run(Fn(lambda m, x, w: m.inner(x, per_sample_weights=w), bag2),
             lambda n: [torch.randint(0, 10, (n, 3)), torch.rand(n, 3)], tmp_path)


@pytest.mark.parametrize("kwargs", [
    dict(),
    dict(batch_first=True),
    dict(num_layers=2, bidirectional=True),
    dict(batch_first=True, bidirectional=True, bias=False),
], ids=["plain", "batch_first", "2layer_bidir", "bf_bidir_nobias"])
def test_lstm(tmp_path, kwargs):
    lstm = nn.LSTM(5, 4, **kwargs)

    def make(n):  # dim 0 grows: the batch when batch_first, else the sequence
        return [torch.randn(n, 3, 5)]

    _run(Fn(lambda m, x: m.inner(x), lstm), make, tmp_path, ops={"LSTM"}, atol=1e-5)


def test_lstm_initial_state(tmp_path):
    lstm = nn.LSTM(5, 4, num_layers=2)
    _run(Fn(lambda m, x, h, c: m.inner(x, (h, c)), lstm),
         lambda n: [torch.randn(n, 2, 5), torch.randn(2, 2, 4), torch.randn(2, 2, 4)],
         tmp_path, dynamic=False, ops={"LSTM"})


@pytest.mark.parametrize("kwargs", [dict(), dict(batch_first=True, bidirectional=True)],
                         ids=["plain", "bf_bidir"])
def test_gru_layer(tmp_path, kwargs):
    # Exported, the GRU is one ONNX GRU node per layer and direction (its whole-layer op), so
    # the sequence and batch axes stay dynamic
    gru = nn.GRU(5, 4, **kwargs)
    _run(Fn(lambda m, x: m.inner(x), gru), lambda n: [torch.randn(n, 3, 5)], tmp_path,
         ops={"GRU"}, atol=1e-5)


def test_multihead_attention(tmp_path):
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    _run(Fn(lambda m, x: m.inner(x, x, x), mha), randn(5, 8), tmp_path, dynamic=False,
         ops={"MatMul", "Softmax"})


def test_transformer_encoder_layer(tmp_path):
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    _run(Fn(lambda m, x: m.inner(x), layer), randn(5, 8), tmp_path, dynamic=False,
         ops={"MatMul", "Softmax", "LayerNormalization"})


def test_unmapped_cases_name_the_operator(tmp_path):
    from fusegrad.onnx import UnsupportedOperatorError

    cases = [
        (lambda m, x: F.adaptive_max_pool2d(x, (4, 4)), (1, 3, 6, 6), "adaptive_max_pool2d"),
    ]
    for fn, shape, name in cases:
        with pytest.raises(UnsupportedOperatorError, match=f"'aten::{name}'"):
            torch.onnx.export(Fn(fn), torch.randn(*shape), str(tmp_path / "u.onnx"))
