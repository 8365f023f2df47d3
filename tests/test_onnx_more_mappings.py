"""fusegrad.onnx.export of the ops mapped in `ops/_onnx_mappings_more.py`: data-dependent
results (nonzero, masked_select, unique, index_put), order statistics, searches, histc,
cumprod and pointwise math, losses and matrix builders. Each tiny model is exported, run by
onnxruntime and compared with the eager model (values, dtypes, shapes), at PyTorch's default
opset and at 17, and at a second batch size where the mapping keeps the batch dynamic;
cases cheap to run in torch are also compared with torch itself."""

import io

import numpy as np
import pytest
import torch

import fusegrad as fg
import fusegrad.nn.functional as F

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


class Fn(fg.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


def _session(fn, example, opset, dynamic):
    names = [f"x{i}" for i in range(len(example))]
    axes = {n: {0: "batch"} for n in names} if dynamic else None
    buf = io.BytesIO()
    fg.onnx.export(Fn(fn), tuple(example), buf, input_names=names, dynamic_axes=axes,
                   opset_version=opset)
    proto = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(proto, full_check=True)
    session = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    return session, names, {n.op_type for n in proto.graph.node}


def _check(fn, make, opset=20, batches=(3,), rtol=1e-5, atol=1e-6):
    """Export `fn` on `make(batches[0])`; compare onnxruntime with eager fusegrad on
    `make(n)` for each n (the first only unless there are more: a dynamic batch)."""
    fg.manual_seed(0)
    example = make(batches[0])
    session, names, types = _session(fn, example, opset, dynamic=len(batches) > 1)
    for n in batches:
        xs = make(n) if n != batches[0] else example
        expected = [t.numpy() for t in _flat(fn(*xs))]
        got = session.run(None, {k: x.numpy() for k, x in zip(names, xs)})
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, e.shape, g.dtype, e.dtype)
            if e.dtype.kind == "f":
                np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
            else:
                np.testing.assert_array_equal(g, e)
    return types


def randn(*shape):
    return lambda n: [fg.randn(n, *shape)]


def with_nan(*shape):
    """Normal values with NaN in every third element (one row without NaN)."""
    def make(n):
        x = fg.randn(n, *shape)
        x.view(-1)[2::3] = float("nan")
        x[0] = 0.5
        return [x]

    return make


def ints(*shape, low=-3, high=4):
    return lambda n: [fg.randint(low, high, (n, *shape))]


def _setitem(x, key, value):
    """`x[key] = value` on a copy (index_put_ with None among the indices)."""
    y = x.clone()
    y[key] = value
    return y


# (id, function, inputs, batches: more than one = a dynamic batch)
CASES = [
    ("nonzero", lambda x: fg.nonzero(x > 0), randn(4), (3, 6)),
    ("nonzero_0d", lambda x: fg.nonzero(x.sum() > 0), randn(4), (3,)),
    ("masked_select", lambda x: x.masked_select(x > 0), randn(4), (3, 6)),
    ("masked_select_bcast", lambda x: x.masked_select(fg.tensor([True, False, True, True])),
     randn(4), (3, 6)),
    ("index_put", lambda x: x.index_put((fg.tensor([0, -1]),), fg.ones(2, 4)), randn(4),
     (3, 6)),
    ("index_put_acc", lambda x: x.index_put((fg.tensor([0, 2, 0]),), fg.ones(4),
                                            accumulate=True), randn(4), (3, 6)),
    ("index_put_2d", lambda x: x.index_put((fg.tensor([0, 1]), fg.tensor([[3], [1]])),
                                           fg.tensor(5.0)), randn(4), (3, 6)),
    ("index_put_dims", lambda x: _setitem(x, (slice(None), fg.tensor([1, 2])),
                                          fg.arange(2.0)), randn(4), (3, 6)),
    ("index_put_apart", lambda x: _setitem(x, (fg.tensor([0, 1]), slice(None),
                                               fg.tensor([2, 0])), fg.ones(2, 3) * 7),
     randn(3, 4), (3,)),
    ("index_put_middle", lambda x: _setitem(x, (slice(None), fg.tensor([[0], [2]]),
                                                fg.tensor([1, 3])), fg.ones(6, 2, 2)),
     randn(3, 4), (6,)),
    ("index_put_mask", lambda x: x.index_put((x > 0,), fg.tensor(0.0)), randn(4), (3, 6)),
    ("index_put_inplace", lambda x: x.clone().index_put_((fg.tensor([1]),), fg.zeros(4)),
     randn(4), (3, 6)),
    ("cumprod", lambda x: x.cumprod(1), randn(7), (3, 6)),
    ("cumprod_int", lambda x: x.cumprod(0), ints(5), (4,)),
    ("vander", lambda x: fg.vander(x[0], 5), randn(4), (3,)),
    ("var_mean", lambda x: fg.var_mean(x, 1, keepdim=True), randn(5), (3, 6)),
    ("std_mean", lambda x: fg.std_mean(x, 0, correction=0), randn(5), (3,)),
    ("std_mean_all", lambda x: fg.std_mean(x), randn(5), (3,)),
    ("threshold", lambda x: F.threshold(x, 0.1, 20.0), randn(5), (3, 6)),
    ("threshold_int", lambda x: F.threshold(x, 1, -7), ints(5), (3,)),
    ("searchsorted", lambda x: fg.searchsorted(fg.tensor([-1.0, 0.0, 0.5, 1.0]), x),
     randn(5), (3, 6)),
    ("searchsorted_right32", lambda x: fg.searchsorted(
        fg.tensor([-1, 0, 0, 2]), x, right=True, out_int32=True), ints(5), (3, 6)),
    ("searchsorted_rows", lambda x: fg.searchsorted(x.sort(1)[0], x[:, :2] + 0.1,
                                                    side="right"), randn(5), (3, 6)),
    ("searchsorted_sorter", lambda x: fg.searchsorted(
        fg.tensor([3.0, -1.0, 0.5]), x, sorter=fg.tensor([1, 2, 0])), randn(5), (3,)),
    ("bucketize", lambda x: fg.bucketize(x, fg.tensor([-1, 0, 1])), ints(5), (3, 6)),
    ("bucketize_right", lambda x: fg.bucketize(x, fg.tensor([-1, 0, 1]), right=True),
     ints(5), (3,)),
    ("unique", lambda x: fg.unique(x), ints(5), (3, 6)),
    ("unique_all", lambda x: fg.unique(x, return_inverse=True, return_counts=True),
     ints(5), (3, 6)),
    ("unique_float", lambda x: fg.unique(x.round(), return_counts=True), randn(5), (3,)),
    ("kthvalue", lambda x: x.kthvalue(2, 1), randn(5), (3, 6)),
    ("kthvalue_keep", lambda x: x.kthvalue(3, 0, keepdim=True), randn(5), (4,)),
    ("median_dim", lambda x: x.median(1), randn(6), (3, 6)),
    ("median_all", lambda x: x.median(), randn(5), (3,)),
    ("median_nan", lambda x: x.median(1), with_nan(5), (3, 6)),
    ("median_all_nan", lambda x: x.median(), with_nan(5), (3,)),
    ("aminmax_nan", lambda x: fg.aminmax(x, dim=1), with_nan(5), (3, 6)),
    ("searchsorted_nan", lambda x: fg.searchsorted(fg.tensor([-1.0, 0.0, 1.0]), x),
     with_nan(5), (3, 6)),
    ("bucketize_nan", lambda x: fg.bucketize(x, fg.tensor([-1.0, 0.0, 1.0]), right=True),
     with_nan(5), (3,)),
    ("histc_nan", lambda x: fg.histc(x, 4, -2, 2), with_nan(5), (3,)),
    ("erfinv", lambda x: fg.erfinv(x.tanh()), randn(6), (3, 6)),
    ("hypot", lambda x: fg.hypot(x, x.flip(1) * 3), randn(5), (3, 6)),
    ("linalg_cross", lambda x: fg.linalg.cross(x[:, :3], x[:, 1:]), randn(4), (3, 6)),
    ("cross_dim0", lambda x: fg.cross(x[:3], x[1:4], dim=0), randn(5), (4,)),
    ("pdist", lambda x: F.pdist(x), randn(4), (5,)),
    ("pdist_p1", lambda x: F.pdist(x, 1.0), randn(4), (5,)),
    ("aminmax", lambda x: fg.aminmax(x), randn(4), (3, 6)),
    ("aminmax_dim", lambda x: fg.aminmax(x, dim=1, keepdim=True), randn(4), (3, 6)),
    ("count_nonzero", lambda x: fg.count_nonzero(x, 1), ints(5), (3, 6)),
    ("count_nonzero_all", lambda x: fg.count_nonzero(x), ints(5), (3, 6)),
    ("histc_range", lambda x: fg.histc(x, 6, -1.5, 1.5), randn(8), (3, 6)),
    ("histc_data", lambda x: fg.histc(x, 5), randn(8), (3, 6)),
    ("histc_edges", lambda x: fg.histc(x.round() / 4, 8, -1, 1), randn(8), (3,)),
    ("masked_scatter", lambda x: x.masked_scatter(x > 0, fg.arange(48.0).reshape(6, 8)),
     randn(8), (3, 6)),
    ("masked_scatter_bcast", lambda x: x.masked_scatter(fg.tensor([True, False, True]),
                                                        fg.arange(30.0)), randn(3), (3, 6)),
    ("take", lambda x: x.take(fg.tensor([[0, 5], [-1, 2]])), randn(4), (3, 6)),
    ("heaviside", lambda x: fg.heaviside(x.round(), fg.tensor(0.5)), randn(5), (3, 6)),
    ("isin", lambda x: fg.isin(x, fg.tensor([0, 2, 3])), ints(5), (3, 6)),
    ("isin_invert", lambda x: fg.isin(x, x[0], invert=True), ints(5), (3,)),
    ("trace", lambda x: fg.trace(x[:, :3]), randn(4), (3,)),
    ("trace_int", lambda x: fg.trace(x), ints(3), (4,)),
    ("diag_embed", lambda x: fg.diag_embed(x), randn(4), (3, 6)),
    ("diag_embed_offset", lambda x: fg.diag_embed(x, 1, 0, 2), randn(4), (3,)),
    ("diag_embed_neg", lambda x: fg.diag_embed(x, -2, 2, 0), randn(3), (2,)),
    ("block_diag", lambda x: fg.block_diag(x, x[0], x[0, 0], x[:1, :2]), randn(4), (3,)),
    ("xlogy", lambda x: fg.xlogy(x.round(), x.abs() + 0.5), randn(5), (3, 6)),
    ("xlogy_scalar", lambda x: fg.xlogy(2.0, x.abs() + 0.5) + fg.xlogy(x, 3.0), randn(5),
     (3, 6)),
    ("kl_div", lambda x: F.kl_div(x.log_softmax(1), x.softmax(1), reduction="batchmean"),
     randn(5), (3,)),
    ("sinc", lambda x: fg.sinc(x.round() * 0.5 + x * (x.abs() > 1)), randn(5), (3, 6)),
    ("rad2deg", lambda x: fg.rad2deg(x) + fg.deg2rad(x), randn(5), (3, 6)),
    ("rad2deg_int", lambda x: fg.rad2deg(x), ints(5), (3,)),
    ("multi_margin", lambda x: F.multi_margin_loss(x, fg.tensor([0, 3, 1])), randn(4), (3,)),
    ("multi_margin_p2", lambda x: F.multi_margin_loss(
        x, fg.tensor([0, 3, 1]), p=2, margin=0.7, weight=fg.tensor([1.0, 2.0, 0.5, 3.0]),
        reduction="none"), randn(4), (3,)),
    ("multi_margin_1d", lambda x: F.multi_margin_loss(x[0], fg.tensor(2), reduction="sum"),
     randn(4), (3,)),
    ("triplet", lambda x: F.triplet_margin_loss(x, x + 1, x - 1), randn(4), (3, 6)),
    ("pairwise", lambda x: F.pairwise_distance(x, x.flip(0), p=3.0), randn(4), (3, 6)),
    ("huber", lambda x: F.huber_loss(x, x * 0.5, delta=0.7), randn(4), (3, 6)),
    ("huber_none", lambda x: F.huber_loss(x, x.flip(1) * 2, reduction="none"), randn(4),
     (3, 6)),
]


@pytest.mark.parametrize("name, fn, make, batches", CASES, ids=[c[0] for c in CASES])
def test_export_matches_eager(name, fn, make, batches):
    _check(fn, make, batches=batches)


@pytest.mark.parametrize("name", ["nonzero", "index_put", "index_put_acc", "cumprod",
                                  "searchsorted", "unique_all", "median_dim", "erfinv",
                                  "histc_data", "masked_scatter", "diag_embed_offset",
                                  "multi_margin_p2", "aminmax"])
def test_export_at_opset_17(name):
    _, fn, make, batches = next(c for c in CASES if c[0] == name)
    _check(fn, make, opset=17, batches=batches)


def test_index_put_accumulate_needs_opset_16():
    fn = CASES[[c[0] for c in CASES].index("index_put_acc")][1]
    with pytest.raises(fg.onnx.UnsupportedOperatorError,
                       match="'aten::index_put' to ONNX opset version 13 is not supported "
                             "with accumulate=True before opset 16"):
        _session(fn, [fg.randn(3, 4)], 13, False)


def test_erfinv_accuracy_against_torch():
    # Dense in (-1, 1), the tails near +-1 and the ends themselves, in float32 and float64.
    grid = np.concatenate([np.linspace(-1, 1, 20001), 1 - np.logspace(-7, -1, 200),
                           -1 + np.logspace(-7, -1, 200), [0.0, 1e-30, -1e-20, 1.5, -2.0]])
    for dt, tol in ((np.float32, 1e-6), (np.float64, 3e-7)):
        x = grid.astype(dt)
        session, names, _ = _session(lambda t: fg.erfinv(t), [fg.from_numpy(x)], 20, False)
        (got,) = session.run(None, {names[0]: x})
        ref = torch.erfinv(torch.from_numpy(x.astype(np.float64))).numpy()
        assert got.dtype == dt
        finite = np.isfinite(ref)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
        np.testing.assert_array_equal(got[np.isinf(ref)], ref[np.isinf(ref)])
        np.testing.assert_allclose(got[finite], ref[finite], rtol=tol, atol=0)


def test_hypot_and_sinc_against_torch():
    x = np.array([[0.0, 3.0, -1e30, np.inf], [0.0, -4.0, 1e30, np.nan]], np.float32)
    y = np.array([[0.0, 4.0, 1e30, np.nan], [-0.0, 3.0, 1e-30, -np.inf]], np.float32)

    def fn(a, b):
        return fg.hypot(a, b), fg.sinc(a), fg.xlogy(a, b.abs())

    session, names, _ = _session(fn, [fg.from_numpy(x), fg.from_numpy(y)], 20, False)
    got = session.run(None, {names[0]: x, names[1]: y})
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    for g, e in zip(got, (torch.hypot(tx, ty), torch.sinc(tx), torch.xlogy(tx, ty.abs()))):
        np.testing.assert_allclose(g, e.numpy(), rtol=1e-6, equal_nan=True)


def test_against_torch():
    # A few cases run in torch itself: same values, shapes and dtypes as the ONNX graph.
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    cases = [
        lambda T, t: T.searchsorted(T.tensor([-1.0, 0.0, 1.0]), t),
        lambda T, t: T.unique(t.round(), return_inverse=True, return_counts=True),
        lambda T, t: t.kthvalue(3, 1),
        lambda T, t: T.histc(t, 5, -1, 1),
        lambda T, t: T.nonzero(t > 0.5),
        lambda T, t: t.index_put((T.tensor([0, 0, 2]),), T.ones(3, 6), accumulate=True),
        lambda T, t: T.nn.functional.multi_margin_loss(t, T.tensor([0, 5, 2, 1])),
        lambda T, t: T.diag_embed(t[:, :3], -1),
        lambda T, t: t.cumprod(1),
    ]
    for case in cases:
        session, names, _ = _session(lambda t, case=case: case(fg, t), [fg.from_numpy(x)], 20,
                                     False)
        got = session.run(None, {names[0]: x})
        expected = [e.numpy() for e in _flat(case(torch, torch.from_numpy(x)))]
        for g, e in zip(got, expected):
            assert g.shape == e.shape and g.dtype == e.dtype
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_polar_stays_unsupported():
    # A complex result: ONNX Runtime has no complex tensors, so PyTorch's refusal stands.
    with pytest.raises(fg.onnx.UnsupportedOperatorError) as info:
        _session(lambda t: fg.polar(t.abs(), t).real, [fg.randn(3)], 20, False)
    assert str(info.value) == ("Exporting the operator 'aten::polar' to ONNX opset version 20 "
                               "is not supported")


def test_a_dynamic_size_as_a_number_keeps_the_tensors_dtype():
    """`x.sum() / x.shape[0]` with a dynamic batch: the size is a Python int's weak operand,
    so the graph computes in float32 as eager does (it ran the model's op on a 64-bit size
    and exported a float64 output)."""
    fn = (lambda x: (x.sum() / x.shape[0], x * x.shape[1], x.shape[0] - x,
                     F.kl_div(x.log_softmax(1), x.softmax(1), reduction="batchmean")))
    _check(fn, randn(4), batches=(3, 5, 8))
