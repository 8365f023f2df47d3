"""Quantized tensors against PyTorch, continued: checkpoints that cross both ways between
`torch.save`/`torch.load` and fusegrad's (per tensor and per channel, weights_only, the state
of a `quantize_dynamic` model), the quantization methods of tensors that are not quantized,
and the ops PyTorch runs on quantized tensors with kernels of their own (mean, cat,
comparisons, fill_, copy_, repeat, per-channel indexing and views), values, parameters and
errors."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import io  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

LIBS = (torch, fusegrad)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


X = [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]


def _tensors(lib) -> dict:
    """The same quantized tensors made by `lib` (torch or fusegrad)."""
    x = lib.tensor(X)
    return {
        "q": lib.quantize_per_tensor(x, 0.1, 3, lib.qint8),
        "q2": lib.quantize_per_tensor(x * 0.5, 0.2, 1, lib.qint8),
        "qu": lib.quantize_per_tensor(x, 0.1, 3, lib.quint8),
        "qi": lib.quantize_per_tensor(x, 0.5, 1, lib.qint32),
        "q4": lib.quantize_per_tensor(lib.tensor([1.0, 2.0, 3.0]), 0.5, 1, lib.quint4x2),
        "qc": lib.quantize_per_channel(x, lib.tensor([0.1, 0.2]), lib.tensor([1, 2]), 0,
                                       lib.qint8),
        "qc1": lib.quantize_per_channel(x, lib.tensor([0.1, 0.2, 0.3]),
                                        lib.tensor([1, 2, 0]), 1, lib.qint8),
        "qv": lib.quantize_per_tensor(lib.arange(12.0).reshape(3, 4), 0.5, 1,
                                      lib.quint8)[:, 1:3],
        "x": x,
        "q4d": lib.quantize_per_channel(lib.arange(6.0).reshape(1, 2, 1, 3),
                                        lib.tensor([0.1, 0.2]), lib.tensor([1, 2]), 1,
                                        lib.qint8),
        "q1": lib.quantize_per_channel(lib.arange(6.0).reshape(1, 2, 1, 3), lib.tensor([0.1]),
                                       lib.tensor([1]), 0, lib.qint8),
    }


def _summary(t):
    """What a result is: a quantized tensor's dtype, integers and parameters, a tensor's dtype
    and values, or the value itself."""
    if isinstance(t, (torch.Tensor, fusegrad.Tensor)):
        if t.is_quantized:
            if str(t.qscheme()) == "torch.per_tensor_affine":
                params = (t.q_scale(), t.q_zero_point())
            else:
                params = (t.q_per_channel_scales().tolist(),
                          t.q_per_channel_zero_points().tolist(), t.q_per_channel_axis())
            return ("q", str(t.dtype), str(t.qscheme()), t.int_repr().tolist(), params)
        return ("t", str(t.dtype), t.tolist())
    return ("v", t)


def _outcome(expr: str, lib):
    env = dict(_tensors(lib), torch=lib)
    try:
        return _summary(eval(expr, {}, env)), None  # noqa: S307 - the tests' own expressions
    except Exception as e:  # noqa: BLE001 - the error is the outcome compared
        # (PyTorch's "Could not run" message goes on to list its backends: its start is kept)
        return None, (type(e).__name__, str(e).split("\n")[0][:160])


# ---------------------------------------------------------------- checkpoints


@pytest.mark.parametrize("name", ["q", "qu", "qi", "q4", "qc", "qc1", "qv"])
@pytest.mark.parametrize("direction", ["torch->fusegrad", "fusegrad->torch"])
def test_checkpoint_crosses(name, direction):
    src, dst = (torch, fusegrad) if direction == "torch->fusegrad" else (fusegrad, torch)
    t = _tensors(src)[name]
    buf = io.BytesIO()
    src.save({"a": t, "b": [t, t]}, buf)
    got = dst.load(io.BytesIO(buf.getvalue()), weights_only=True)
    assert got["b"][0] is got["b"][1]
    assert _summary(got["a"]) == _summary(t)
    np.testing.assert_array_equal(got["a"].dequantize().numpy(), t.dequantize().numpy())


def test_checkpoint_whole_object_and_views():
    # a view shares its base's storage in the file, as torch.save writes it; the whole-object
    # writer (weights_only=False) lays out quantized tensors alike
    q = _tensors(fusegrad)["q"]
    buf = io.BytesIO()
    fusegrad.save((q, q[1]), buf)
    a, b = torch.load(io.BytesIO(buf.getvalue()), weights_only=True)
    assert b.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    assert _summary(b) == _summary(q[1])

    holder = Holder()
    holder.q = _tensors(fusegrad)["qc"]
    buf = io.BytesIO()
    fusegrad.save(holder, buf)
    got = fusegrad.load(io.BytesIO(buf.getvalue()), weights_only=False)
    assert _summary(got.q) == _summary(holder.q)


class Holder:
    """An object whose pickle holds a quantized tensor (the whole-object writer's case)."""


def _dynamic_model(lib, seed):
    lib.manual_seed(seed)
    nn = lib.nn
    model = nn.Sequential(nn.Linear(3, 2))
    return lib.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=lib.qint8)


@pytest.mark.parametrize("direction", ["torch->fusegrad", "fusegrad->torch"])
def test_dynamic_state_dict_crosses(direction):
    src, dst = (torch, fusegrad) if direction == "torch->fusegrad" else (fusegrad, torch)
    model = _dynamic_model(src, 0)
    buf = io.BytesIO()
    src.save(model.state_dict(), buf)
    other = _dynamic_model(dst, 1)  # different weights until loaded
    other.load_state_dict(dst.load(io.BytesIO(buf.getvalue()), weights_only=True))
    x = [[0.5, -1.0, 2.0]]
    np.testing.assert_array_equal(other(dst.tensor(x)).detach().numpy(),
                                  model(src.tensor(x)).detach().numpy())


# ---------------------------------------------------------------- tensors not quantized


def test_dequantize_of_plain_tensors():
    for lib in LIBS:
        x = lib.tensor([1.0, 2.0])
        assert x.dequantize() is x and lib.dequantize(x) is x
    for dtype in ("int64", "float64"):
        a = torch.tensor([1, 2], dtype=getattr(torch, dtype)).dequantize()
        b = fusegrad.tensor([1, 2], dtype=getattr(fusegrad, dtype)).dequantize()
        assert str(a.dtype) == str(b.dtype) and a.tolist() == b.tolist()


@pytest.mark.parametrize("method", ["q_scale", "q_zero_point", "q_per_channel_scales",
                                    "q_per_channel_zero_points", "q_per_channel_axis",
                                    "int_repr", "qscheme"])
def test_quantization_methods_of_plain_tensors(method):
    assert _outcome(f"x.{method}()", fusegrad) == _outcome(f"x.{method}()", torch)


# ---------------------------------------------------------------- ops


OPS = [
    "q.mean()", "q.mean(0)", "q.mean(1, keepdim=True)", "qu.mean()", "qc.mean()",
    "q.mean(dtype=torch.float32)", "q.mean(0, dtype=torch.float32)",
    "torch.cat([q, q])", "torch.cat([q, q2], 1)", "torch.cat([q, qu])", "torch.cat([q, x])",
    "torch.cat([qc, qc])", "torch.cat([q, q[0]])",
    "q == q", "q == q2", "qc == qc", "q != q2", "q == x", "q == 1", "q > 1", "q <= qu",
    "q.clone().fill_(1)", "qc.clone().fill_(1)", "q.clone().fill_(torch.tensor(1.0))",
    "q.clone().fill_(1000)", "x.clone().fill_(q[0, 0])", "q.clone().fill_(q2[0, 0])",
    "torch.cat([x, q])",
    "q.clone().copy_(q2)", "q.clone().copy_(x)", "qc.clone().copy_(qc1)", "x.clone().copy_(q)",
    "q.clone().copy_(qu)", "q.clone().copy_(torch.tensor([[1, 2, 3], [4, 5, 6]]))",
    "q.clone().copy_(x[0])", "qc.clone().copy_(x)",
    "q.repeat(2, 1)", "qc.repeat(2, 1)",
    "qc[1]", "qc[-1]", "qc1[1]", "qc[:, 1]", "qc1[:, 1]", "qc[:, 1].dequantize()",
    "qc.select(0, 1)", "qc[0:1]", "qc1[:, 0:2]", "qc1[:, ::2]", "qc1[:, 1:2]",
    "qc.narrow(1, 0, 2)", "qc.narrow(0, 1, 1)",
    "qc.view(3, 2)", "qc.view(2, 3)", "qc1.view(6)", "qc.reshape(6)", "qc.flatten()",
    "qc.view(3, 2).dequantize()", "qc.view(2, 3).dequantize()",
    "qc.unsqueeze(0)", "qc.unsqueeze(1)", "qc1.unsqueeze(-1)", "qc.t()",
    "q4d.squeeze()", "q4d.squeeze(0)", "q4d.squeeze(2)", "q4d.squeeze((0, 2))",
    "q4d.squeeze(1)", "q4d.squeeze(-2)", "q4d.squeeze(5)", "q1.squeeze()", "q1.squeeze(0)",
    "q1.squeeze(1)",
]


@pytest.mark.parametrize("expr", OPS)
def test_op_matches_torch(expr):
    assert _outcome(expr, fusegrad) == _outcome(expr, torch)


def test_inplace_ops_write_through_views():
    results = []
    for lib in LIBS:
        t = _tensors(lib)
        base = t["q"].clone()
        base[1].fill_(2.0)
        base[0].copy_(t["x"][1])
        results.append(_summary(base))
    assert results[0] == results[1]


def _equal_pairs(lib) -> list:
    x = lib.tensor([0.5, 1.0, -1.0])
    a = lib.quantize_per_tensor(x, 0.1, 0, lib.qint8)
    e = lib.quantize_per_channel(x.reshape(3, 1), lib.tensor([0.1, 0.1, 0.1]),
                                 lib.tensor([0, 0, 0]), 0, lib.qint8)
    return [
        (a, a.clone()), (a, lib.quantize_per_tensor(x, 0.1, 1, lib.qint8)),
        (a, lib.quantize_per_tensor(x, 0.2, 0, lib.qint8)),
        (a, lib.quantize_per_tensor(x, 0.1, 0, lib.quint8)), (a, x), (x, a),
        (a, lib.quantize_per_tensor(x + 0.01, 0.1, 0, lib.qint8)), (a, e), (e, e.clone()),
        (e, lib.quantize_per_channel(x.reshape(3, 1), lib.tensor([0.1, 0.1, 0.2]),
                                     lib.tensor([0, 0, 0]), 0, lib.qint8)),
        (a, a[:2]), (a[:2], a[1:]),
    ]


def test_equal_of_quantized_tensors_compares_parameters():
    """`torch.equal` with a quantized tensor: both quantized, one dtype, scheme, shape and
    parameters, and the same integers (a float tensor never equals a quantized one)."""
    want = [torch.equal(a, b) for a, b in _equal_pairs(torch)]
    assert [fusegrad.equal(a, b) for a, b in _equal_pairs(fusegrad)] == want
    assert want.count(True) == 3  # (the pairs tell the facts apart)
