"""The GRU's and the Elman RNN's whole-layer ops (`_gru_layer`, `_rnn_layer` and their
backward ops, ops/rnn_gru.py): nn.GRU/nn.RNN through them against torch.nn (values, final
states, input, state and parameter gradients), gradcheck and gradgradcheck of the ops, their
fake-tensor shapes, ONNX GRU/RNN nodes through onnxruntime at several sequence lengths and
batch sizes, and compiled (aot_eager, inductor) against eager."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_nn_support import close, sync

import fusegrad
import fusegrad.nn as fnn
import fusegrad.nn.modules.rnn as rnn_module
from fusegrad import _dispatch
from fusegrad.ops import rnn_gru

TOL = {"float32": 2e-5, "float64": 1e-10}
MODELS = [("GRU", {}), ("RNN", {}), ("RNN", {"nonlinearity": "relu"})]
CONFIGS = [
    dict(),
    dict(batch_first=True),
    dict(num_layers=2, bidirectional=True),
    dict(num_layers=2, bidirectional=True, batch_first=True, bias=False),
]


def data(*shape, seed=0, dtype="float64"):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def pair(name, kw, dtype, **cfg):
    """(torch module, fusegrad module) in `dtype`, with the torch module's weights."""
    torch.manual_seed(0)
    th = getattr(torch.nn, name)(3, 4, **kw, **cfg).to(getattr(torch, dtype))
    fg = getattr(fnn, name)(3, 4, **kw, **cfg).to(getattr(fusegrad, dtype))
    sync(th, fg)
    return th, fg


@pytest.fixture
def layer_calls(monkeypatch):
    """Counts of the layer ops' kernel runs ({"forward": n, "backward": n})."""
    counts = {"forward": 0, "backward": 0}
    for op, key in ((rnn_gru.gru_layer, "forward"), (rnn_gru.rnn_layer, "forward"),
                    (rnn_gru.gru_layer_backward, "backward"),
                    (rnn_gru.rnn_layer_backward, "backward")):
        def counted(*args, _kernel=op.kernel, _key=key):
            counts[_key] += 1
            return _kernel(*args)
        monkeypatch.setattr(op, "kernel", counted)
    return counts


def _run(th, fg, x, h0, dtype):
    """Forward and backward of both modules for one cotangent: (outputs, leaves) of each."""
    res = []
    for T, mod in ((torch, th), (fusegrad, fg)):
        leaves = [T.tensor(x, requires_grad=True)]
        if h0 is not None:
            leaves.append(T.tensor(h0, requires_grad=True))
        out, hn = mod(*leaves)
        cot = [T.tensor(data(*out.shape, seed=5, dtype=dtype)),
               T.tensor(data(*hn.shape, seed=6, dtype=dtype))]
        ((out * cot[0]).sum() + (hn * cot[1]).sum()).backward()
        res.append(([out, hn], leaves))
    return res


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cfg", CONFIGS, ids=str)
@pytest.mark.parametrize("name,kw", MODELS, ids=["gru", "rnn_tanh", "rnn_relu"])
def test_layer_ops_match_torch(monkeypatch, layer_calls, name, kw, cfg, dtype):
    """With the layer ops taken while autograd records (EAGER_GRAD_LAYER_OPS), with and
    without h_0: torch's values and gradients; the output's node is the layer op's where
    PyTorch's is its final stack (CatBackward0 and TransposeBackward1 otherwise)."""
    monkeypatch.setattr(rnn_module, "EAGER_GRAD_LAYER_OPS", True)
    dirs = (2 if cfg.get("bidirectional") else 1) * cfg.get("num_layers", 1)
    x = data(*((2, 5, 3) if cfg.get("batch_first") else (5, 2, 3)), dtype=dtype)
    for h0 in (None, data(dirs, 2, 4, seed=1, dtype=dtype)):
        th, fg = pair(name, kw, dtype, **cfg)
        (out_t, leaves_t), (out_f, leaves_f) = _run(th, fg, x, h0, dtype)
        for a, b in zip(out_f, out_t):
            close(a, b, TOL[dtype], TOL[dtype], "output")
        for a, b in zip(leaves_f, leaves_t):
            close(a.grad, b.grad, TOL[dtype], TOL[dtype], "input grad")
        th_p = dict(th.named_parameters())
        for pname, p in fg.named_parameters():
            close(p.grad, th_p[pname].grad, TOL[dtype], TOL[dtype], f"{pname}.grad")
        names = [type(t.grad_fn).__name__ for t in out_f]
        want = [type(t.grad_fn).__name__ for t in out_t]
        if want[0] == "StackBackward0":
            want[0] = "GruLayerBackward0" if name == "GRU" else "RnnLayerBackward0"
        assert names == want
    assert layer_calls["forward"] == 2 * dirs


@pytest.mark.parametrize("name,kw", MODELS, ids=["gru", "rnn_tanh", "rnn_relu"])
def test_default_paths(layer_calls, name, kw):
    """By default a recorded forward keeps PyTorch's per-step nodes, and one that records
    nothing (no_grad, nothing requiring grad) takes the layer ops, with torch's values; an
    unbatched input and dropout between layers (p=1: deterministic) too."""
    th, fg = pair(name, kw, "float32", num_layers=2, bidirectional=True)
    x = data(5, 2, 3, dtype="float32")
    out_f, _ = fg(fusegrad.tensor(x, requires_grad=True))
    assert type(out_f.grad_fn).__name__ == "CatBackward0" and layer_calls["forward"] == 0
    with torch.no_grad():
        want = th(torch.tensor(x))
    with fusegrad.no_grad():
        got = fg(fusegrad.tensor(x))
    assert layer_calls["forward"] == 4
    for a, b in zip(got, want):
        close(a, b, 2e-6, 2e-6, "no_grad output")
    fg.requires_grad_(False)
    got = fg(fusegrad.tensor(x[:, 0]))
    want = th(torch.tensor(x[:, 0]))
    assert layer_calls["forward"] == 8 and got[0].grad_fn is None
    for a, b in zip(got, want):
        close(a, b, 2e-6, 2e-6, "unbatched output")
    th, fg = pair(name, kw, "float64", num_layers=2, dropout=1.0)
    fg.requires_grad_(False)
    x = x.astype("float64")
    close(fg(fusegrad.tensor(x))[0], th(torch.tensor(x))[0], 1e-10, 1e-10, "dropout")


def _op_args(name, dtype, reverse, has_biases):
    if name == "GRU":
        op, extra = rnn_gru.gru_layer, ()
    else:
        op, extra = rnn_gru.rnn_layer, (name == "RNN_RELU",)
    gates = 3 if name == "GRU" else 1
    args = rnn_gru.gru_layer_sample_args(np.random.default_rng(3), np.dtype(dtype), steps=3,
                                         batch=2, n_in=2, hsz=2, reverse=reverse,
                                         has_biases=has_biases, gates=gates) + extra
    if name == "RNN_RELU":  # keep the pre-activations away from relu's kink (finite diffs)
        args = (args[0],) + tuple(a * 0.3 if isinstance(a, np.ndarray) else a
                                  for a in args[1:])
    return op, args


@pytest.mark.parametrize("reverse,has_biases", [(False, True), (True, False)])
@pytest.mark.parametrize("name", ["GRU", "RNN_TANH", "RNN_RELU"])
def test_gradcheck_and_meta(name, reverse, has_biases):
    """float64 gradcheck and gradgradcheck of the ops (first two outputs); the backward op
    (run where nothing is recorded) and the derivative on arrays give the recorded
    derivative's gradients; fake tensors get the kernel's shapes."""
    from layer_op_support import check_fake_shapes, gradchecked

    op, args = _op_args(name, "float64", reverse, has_biases)
    fn, leaves, base, pos = gradchecked(op, args, has_biases, 2)
    # The three backward forms agree: recorded (create_graph: fusegrad ops), on arrays (the
    # engine's fast path) and the backward op (what compiled backward graphs call).
    out = fn(*leaves)
    cots = [fusegrad.tensor(data(*o.shape, seed=9 + i)) for i, o in enumerate(out)]
    recorded = fusegrad.autograd.grad(sum((o * c).sum() for o, c in zip(out, cots)), leaves,
                                      create_graph=True)
    out = fn(*leaves)
    arrays = fusegrad.autograd.grad(sum((o * c).sum() for o, c in zip(out, cots)), leaves)
    backward_op = rnn_gru.gru_layer_backward if name == "GRU" else rnn_gru.rnn_layer_backward
    ws = _dispatch.call(op, *base)[2]
    by_op = _dispatch.call(backward_op, cots[0], cots[1], base[0], base[1], base[2], base[5],
                           ws, reverse, *args[8:])
    for a, b, c in zip(recorded, arrays, [by_op[i] for i in pos]):
        close(a.detach(), b, 1e-12, 1e-12, "on arrays")
        close(c, b, 1e-12, 1e-12, "backward op")
    check_fake_shapes(op, base)


# ---------------------------------------------------------------- ONNX

onnx_cases = [("GRU", {}, dict(num_layers=2, bidirectional=True), False),
              ("GRU", {}, dict(batch_first=True, bias=False), True),
              ("RNN", {"nonlinearity": "relu"}, dict(num_layers=2, batch_first=True), False),
              ("RNN", {}, dict(bidirectional=True), True)]


@pytest.mark.parametrize("name,kw,cfg,with_h0", onnx_cases,
                         ids=["gru", "gru_bf_h0", "relu_bf", "tanh_h0"])
def test_onnx_dynamic_sequence_and_batch(tmp_path, name, kw, cfg, with_h0):
    """One GRU/RNN node per layer and direction (no unrolled cell ops), with the initial
    state given or zeros; onnxruntime equals fusegrad's and torch's eager outputs at other
    sequence lengths and batch sizes."""
    import warnings

    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    th, fg = pair(name, kw, "float32", **cfg)
    th.eval(), fg.eval()
    bf = cfg.get("batch_first", False)
    dirs = (2 if cfg.get("bidirectional") else 1) * cfg.get("num_layers", 1)

    def inputs(steps, batch, seed):
        xs = [data(*((batch, steps, 3) if bf else (steps, batch, 3)), seed=seed,
                   dtype="float32")]
        if with_h0:
            xs.append(data(dirs, batch, 4, seed=seed + 1, dtype="float32"))
        return xs

    names = ["x", "h0"][:1 + with_h0]
    axes = {"x": {0: "b", 1: "s"} if bf else {0: "s", 1: "b"}, "h0": {1: "b"}}
    path = str(tmp_path / "m.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        fusegrad.onnx.export(fg, tuple(fusegrad.tensor(a) for a in inputs(5, 2, 0)), path,
                             input_names=names, dynamic_axes={n: axes[n] for n in names},
                             dynamo=False)
    proto = onnx.load(path)
    onnx.checker.check_model(proto, full_check=True)
    types = [n.op_type for n in proto.graph.node]
    assert types.count("GRU" if name == "GRU" else "RNN") == dirs
    assert "Sigmoid" not in types and "Tanh" not in types and "MatMul" not in types
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for steps, batch, seed in ((5, 2, 0), (9, 3, 2), (1, 1, 4)):
        xs = inputs(steps, batch, seed)
        got = session.run(None, dict(zip(names, xs)))
        with fusegrad.no_grad():
            fo = fg(*[fusegrad.tensor(a) for a in xs])
        with torch.no_grad():
            to = th(*[torch.tensor(a) for a in xs])
        for g, f, t in zip(got, fo, to):
            assert g.shape == tuple(t.shape) and g.dtype == np.float32
            np.testing.assert_allclose(g, f.numpy(), atol=2e-6, rtol=1e-5)
            np.testing.assert_allclose(f.numpy(), t.numpy(), atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("name", ["GRU", "LSTM"])
def test_onnx_weights_computed_by_the_model(tmp_path, name):
    """Weights that are graph values (here graph inputs, through functional_call) get their
    gate blocks reordered by Split/Concat nodes: onnxruntime equals eager at other weights,
    sequence lengths and batch sizes."""
    import warnings

    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    fusegrad.manual_seed(0)
    layer = getattr(fnn, name)(3, 4)

    class Model(fnn.Module):
        def __init__(self):
            super().__init__()
            self.layer = layer

        def forward(self, x, w, b):
            out = fusegrad.func.functional_call(
                self.layer, {"weight_hh_l0": w, "bias_ih_l0": b}, (x,))
            return out[0], out[1][0] if name == "LSTM" else out[1]

    model = Model().eval()
    w0, b0 = layer.weight_hh_l0.detach().numpy(), layer.bias_ih_l0.detach().numpy()
    path = str(tmp_path / "w.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        fusegrad.onnx.export(model, (fusegrad.randn(5, 2, 3), fusegrad.tensor(w0),
                                     fusegrad.tensor(b0)), path, input_names=["x", "w", "b"],
                             dynamic_axes={"x": {0: "s", 1: "b"}}, dynamo=False)
    proto = onnx.load(path)
    assert name in [n.op_type for n in proto.graph.node]
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for steps, batch in ((5, 2), (8, 3)):
        feed = {"x": data(steps, batch, 3, seed=steps, dtype="float32"),
                "w": (w0 * (1 + 0.1 * steps)).astype(np.float32), "b": b0 - 0.05 * steps}
        got = session.run(None, feed)
        with fusegrad.no_grad():
            want = model(*[fusegrad.tensor(v) for v in feed.values()])
        for g, f in zip(got, want):
            np.testing.assert_allclose(g, f.numpy(), atol=2e-6, rtol=1e-5)


# ---------------------------------------------------------------- compile


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("name,kw,cfg", [
    ("GRU", {}, dict(num_layers=2, bidirectional=True)),
    ("RNN", {"nonlinearity": "relu"}, dict(num_layers=2, batch_first=True)),
], ids=["gru", "rnn_relu"])
def test_compiled_matches_eager(layer_calls, backend, name, kw, cfg):
    """Compiled code calls the layer ops (no unrolled loop) and gives eager's outputs and
    input, state and parameter gradients at two sequence lengths."""
    fusegrad.manual_seed(0)
    m = getattr(fnn, name)(3, 4, **kw, **cfg)
    compiled = fusegrad.compile(m, backend=backend)
    bf = cfg.get("batch_first", False)
    for steps in (5, 8):
        x = data(*((2, steps, 3) if bf else (steps, 2, 3)), seed=steps, dtype="float32")
        h0 = data(cfg.get("num_layers", 1) * (2 if cfg.get("bidirectional") else 1), 2, 4,
                  seed=1, dtype="float32")
        results = []
        for mod in (m, compiled):
            m.zero_grad(set_to_none=True)
            xt = fusegrad.tensor(x, requires_grad=True)
            ht = fusegrad.tensor(h0, requires_grad=True)
            before = dict(layer_calls)
            out, hn = mod(xt, ht)
            ((out * out).sum() + hn.sum()).backward()
            results.append([out.detach(), hn.detach(), xt.grad, ht.grad]
                           + [p.grad for p in m.parameters()])
            if mod is compiled:
                assert layer_calls["forward"] > before["forward"]
        for a, b in zip(*results):
            close(b, a, 2e-6, 2e-6, f"{backend} {steps}")
