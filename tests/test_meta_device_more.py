"""The meta device against PyTorch's, continued: optimizer steps over meta parameters, saving
and loading meta tensors, functions that read values, factories given the meta device,
copies to it that record autograd, and common models built, run and materialised there.
Each program runs on both libraries; what it returns is described (class, shape, dtype,
strides, requires_grad, node name, device) or its error's type and message compared."""

from __future__ import annotations

import copy
import io
import pickle
import warnings

import numpy as np
import pytest
import torch

import fusegrad as fg


def _describe(o):
    """What a program returned, in a form both libraries print alike."""
    if isinstance(o, (torch.Tensor, fg.Tensor)):
        fn = type(o.grad_fn).__name__ if o.grad_fn is not None else None
        return ("tensor", type(o).__name__, tuple(o.shape), str(o.dtype).split(".")[-1],
                tuple(o.stride()), o.requires_grad, fn, str(o.device))
    if isinstance(o, dict):
        return {k: _describe(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_describe(x) for x in o]
    if isinstance(o, (int, float, bool, str)) or o is None:
        return o
    return repr(o).replace("fusegrad", "torch")


def _run(prog, T):
    """The program's description and the warnings it gave, or its error."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = _describe(prog(T))
        return out, [str(w.message) for w in caught]
    except Exception as e:  # noqa: BLE001 - the error is what is compared
        return ("raised", type(e).__name__, str(e))


def _meta(T, *shape, dtype=None, rg=False):
    return T.empty(*shape, device="meta", dtype=dtype, requires_grad=rg)


def _long(T, *shape):
    return T.zeros(*shape, dtype=T.long, device="meta")


# ---------------------------------------------------------------- optimizers


def _steps(T, name, shape=(2, 3), steps=2, **options):
    """`steps` steps of optimizer `name` over a meta parameter: the parameter, its version,
    the state (buffers on the meta device, step counters on the CPU)."""
    p = T.nn.Parameter(T.empty(*shape, device="meta"))
    opt = getattr(T.optim, name)([p], **options)
    for _ in range(steps):
        p.grad = T.empty(*shape, device="meta")
        opt.step()
    state = opt.state[p]
    return [p, {k: state[k] for k in sorted(state)},
            [float(v) for k, v in sorted(state.items()) if not v.is_meta]]


def _model_steps(T, name, **options):
    with T.device("meta"):
        model = T.nn.Linear(3, 2)
    opt = getattr(T.optim, name)(model.parameters(), lr=0.1, **options)
    for _ in range(2):
        model(T.empty(4, 3, device="meta")).sum().backward()
        opt.step()
    return [model.weight, model.weight.grad, opt.state_dict()["state"]]


def _state_to_meta(T):
    """A CPU optimizer's state loaded into one over meta parameters: moved to the meta
    device, as PyTorch moves state to its parameter's device."""
    p = T.nn.Parameter(T.ones(2, 3))
    opt = T.optim.Adam([p])
    p.grad = T.ones(2, 3)
    opt.step()
    q = T.nn.Parameter(T.ones(2, 3, device="meta"))
    other = T.optim.Adam([q])
    other.load_state_dict(opt.state_dict())
    return other.state[q]


def _state_from_meta(T):
    q = T.nn.Parameter(T.ones(2, 3, device="meta"))
    opt = T.optim.Adam([q])
    q.grad = T.ones(2, 3, device="meta")
    opt.step()
    p = T.nn.Parameter(T.ones(2, 3))
    T.optim.Adam([p]).load_state_dict(opt.state_dict())


OPTIMIZERS = {
    "SGD": lambda T: _steps(T, "SGD"),
    "SGD momentum": lambda T: _steps(T, "SGD", lr=0.1, momentum=0.9),
    "SGD nesterov": lambda T: _steps(T, "SGD", lr=0.1, momentum=0.9, nesterov=True),
    "Adam": lambda T: _steps(T, "Adam"),
    "Adam amsgrad": lambda T: _steps(T, "Adam", amsgrad=True, weight_decay=0.1),
    "Adam 0-d": lambda T: _steps(T, "Adam", shape=()),
    "Adam tensor lr": lambda T: _steps(T, "Adam", lr=T.tensor(0.01)),
    "AdamW amsgrad": lambda T: _steps(T, "AdamW", amsgrad=True, steps=1),
    "Adagrad": lambda T: _steps(T, "Adagrad"),
    "Adadelta": lambda T: _steps(T, "Adadelta"),
    "Adamax": lambda T: _steps(T, "Adamax"),
    "RAdam": lambda T: _steps(T, "RAdam"),
    "Rprop": lambda T: _steps(T, "Rprop"),
    "RMSprop centered": lambda T: _steps(T, "RMSprop", centered=True, momentum=0.5),
    "ASGD": lambda T: _steps(T, "ASGD"),
    "Adafactor": lambda T: _steps(T, "Adafactor"),
    "Adam fused": lambda T: _steps(T, "Adam", fused=True),
    "SGD fused": lambda T: _steps(T, "SGD", fused=True),
    "Adam capturable": lambda T: _steps(T, "Adam", capturable=True),
    "model SGD momentum": lambda T: _model_steps(T, "SGD", momentum=0.9),
    "model Adam": lambda T: _model_steps(T, "Adam"),
    "model AdamW": lambda T: _model_steps(T, "AdamW", amsgrad=True)[2],
    "state to meta": _state_to_meta,
    "state from meta": _state_from_meta,
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_steps_meta_parameters(name):
    prog = OPTIMIZERS[name]
    assert _run(prog, fg) == _run(prog, torch)


# ---------------------------------------------------------------- saving and copying


def _round_trip(T, obj, **options):
    buf = io.BytesIO()
    T.save(obj, buf)
    buf.seek(0)
    return T.load(buf, **options)


def _with_attribute(T):
    p = T.nn.Parameter(T.empty(3, 2, device="meta").t())
    p.tag = 3
    q = pickle.loads(pickle.dumps(p))
    return [q, q.tag, copy.deepcopy(p)]


def _offsets_mapped(T):
    x = T.arange(12.0).reshape(3, 4)
    out = _round_trip(T, {"v": x[1:].t(), "p": T.nn.Parameter(T.ones(2))}, map_location="meta")
    return [(t, t.storage_offset()) for t in out.values()]


def _module_buffers(T):
    """`nn.Buffer`s assigned in a module built on the meta device."""
    class WithBuffers(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.kept = T.nn.Buffer(T.zeros(3))
            self.scratch = T.nn.Buffer(T.zeros(2), persistent=False)

    with T.device("meta"):
        module = WithBuffers()
    return [module.kept, module.scratch, list(module.state_dict())]


SAVING = {
    "tensor": lambda T: _round_trip(T, _meta(T, 3, 4).t()),
    "requires grad": lambda T: _round_trip(T, _meta(T, 2, rg=True)),
    "0-d bfloat16": lambda T: _round_trip(T, _meta(T, (), dtype=T.bfloat16)),
    "parameter": lambda T: _round_trip(T, T.nn.Parameter(_meta(T, 2))),
    "state_dict": lambda T: _round_trip(T, T.nn.Linear(3, 2, device="meta").state_dict()),
    "whole module": lambda T: list(_round_trip(T, T.nn.Linear(2, 3, device="meta"),
                                               weights_only=False).parameters()),
    "map_location meta": lambda T: _round_trip(
        T, {"a": T.ones(2, 3), "i": [T.ones(2, dtype=T.int64)], "n": 3}, map_location="meta"),
    "map_location offsets": _offsets_mapped,
    "pickle parameter": lambda T: pickle.loads(pickle.dumps(T.nn.Parameter(_meta(T, 2)))),
    "pickle module": lambda T: list(pickle.loads(pickle.dumps(
        T.nn.Linear(2, 3, device="meta"))).parameters()),
    "parameter attribute": _with_attribute,
    "deepcopy parameter": lambda T: copy.deepcopy(T.nn.Parameter(_meta(T, 3, 2).t())),
    "deepcopy module": lambda T: copy.deepcopy(
        T.nn.Sequential(T.nn.Linear(2, 3), T.nn.BatchNorm1d(3)).to("meta")).state_dict(),
    "buffer": lambda T: (lambda b: [b, b.persistent, repr(b), type(b).__name__, b + 1])(
        T.nn.Buffer(_meta(T, 3), persistent=False)),
    "module buffers": _module_buffers,
    "deepcopy buffer": lambda T: copy.deepcopy(T.nn.Buffer(_meta(T, 3, 2))),
    "pickle buffer": lambda T: pickle.loads(pickle.dumps(T.nn.Buffer(_meta(T, 3, 2)))),
}


@pytest.mark.parametrize("name", sorted(SAVING))
def test_saving_meta_tensors(name):
    prog = SAVING[name]
    assert _run(prog, fg) == _run(prog, torch)


def test_meta_checkpoints_read_by_the_other_library():
    for writer, reader in ((fg, torch), (torch, fg)):
        buf = io.BytesIO()
        writer.save({"w": writer.nn.Parameter(writer.empty(3, 2, device="meta").t()),
                     "b": writer.empty(4, device="meta", dtype=writer.float64)}, buf)
        buf.seek(0)
        got = reader.load(buf)
        assert [_describe(v) for v in got.values()] == [
            ("tensor", "Parameter", (2, 3), "float32", (1, 2), True, None, "meta"),
            ("tensor", "Tensor", (4,), "float64", (1,), False, None, "meta")]


# ---------------------------------------------------------------- functions that read values


def _setitem(T, index, value, rg=False):
    x = _meta(T, 3, 4, rg=rg)
    y = x * 1 if rg else x
    y[index(T) if callable(index) else index] = value(T) if callable(value) else value
    return [y, y._version]


def _init(T, fn, shape=(3, 4)):
    """An initialisation of a meta tensor: the same tensor, its version, and whether the
    default generator was drawn from (the next draw)."""
    t = T.empty(*shape, device="meta")
    T.manual_seed(0)
    out = fn(T.nn.init, t)
    return [out is t, t._version, T.rand(1).item()]


VALUES = {
    "setitem number": lambda T: _setitem(T, 0, 1.0),
    "setitem grad": lambda T: _setitem(T, 0, 1.0, rg=True),
    "setitem slice": lambda T: _setitem(T, slice(0, 2), lambda T: _meta(T, 4, rg=True), True),
    "setitem meta mask": lambda T: _setitem(T, lambda T: _meta(T, 3, 4) > 0, 0.0, True),
    "setitem cpu mask": lambda T: _setitem(T, lambda T: T.tensor([True, False, True]), 0.0),
    "setitem list": lambda T: _setitem(T, [0, 2], 1.0, True),
    "setitem bad shape": lambda T: _setitem(T, 0, lambda T: _meta(T, 5)),
    "repeat_interleave meta counts": lambda T: _meta(T, 3, 4, rg=True).repeat_interleave(
        _long(T, 3), dim=0, output_size=6),
    "repeat_interleave no output_size": lambda T: _meta(T, 3, 4).repeat_interleave(
        _long(T, 3), dim=0),
    "repeat_interleave one count": lambda T: _meta(T, 3, 4).repeat_interleave(
        _long(T, 1), output_size=24),
    "repeat_interleave wrong count": lambda T: _meta(T, 3, 4).repeat_interleave(
        _long(T, 2), dim=0, output_size=6),
    "repeat_interleave counts only": lambda T: T.repeat_interleave(_long(T, 3), output_size=7),
    "repeat_interleave cpu counts": lambda T: _meta(T, 3, 4).repeat_interleave(
        T.tensor([1, 2, 3]), dim=0),
    "quantile": lambda T: T.quantile(_meta(T, 3, 4, rg=True), 0.5, dim=1),
    "quantile all": lambda T: T.quantile(_meta(T, 3, 4, rg=True), 0.5),
    "quantile tensor q": lambda T: T.quantile(_meta(T, 3, 4, rg=True), _meta(T, 2), dim=0,
                                              keepdim=True),
    "quantile cpu q": lambda T: T.quantile(_meta(T, 3, 4), T.tensor([0.1, 0.5]), dim=0),
    "nanquantile midpoint": lambda T: T.nanquantile(_meta(T, 3, 4, rg=True), _meta(T, 3), dim=0,
                                                    interpolation="midpoint"),
    "quantile lower": lambda T: T.quantile(_meta(T, 2, 3, 4, dtype=T.float64), 0.3, dim=1,
                                           interpolation="lower"),
    "eye_": lambda T: _init(T, lambda init, t: init.eye_(t)),
    "dirac_": lambda T: _init(T, lambda init, t: init.dirac_(t), (3, 4, 1, 1)),
    "dirac_ groups": lambda T: _init(T, lambda init, t: init.dirac_(t, groups=2), (3, 4, 1)),
    "sparse_": lambda T: _init(T, lambda init, t: init.sparse_(t, 0.5)),
    "sparse_ 3-d": lambda T: _init(T, lambda init, t: init.sparse_(t, 0.5), (3, 1, 1)),
    "trunc_normal_": lambda T: _init(T, lambda init, t: init.trunc_normal_(t, mean=10.0)),
    "orthogonal_": lambda T: _init(T, lambda init, t: init.orthogonal_(t)),
    "kaiming_normal_": lambda T: _init(T, lambda init, t: init.kaiming_normal_(t)),
    "ndimension": lambda T: (_meta(T, 2, 3).ndimension(), _meta(T, 2, 3).nelement()),
    "assert_close": lambda T: T.testing.assert_close(_meta(T, 3), _meta(T, 3)),
    "assert_close shapes": lambda T: T.testing.assert_close(_meta(T, 3), _meta(T, 4)),
    "assert_close devices": lambda T: T.testing.assert_close(_meta(T, 3), T.ones(3)),
    "assert_close no device": lambda T: T.testing.assert_close(_meta(T, 3), T.ones(3),
                                                               check_device=False),
    "equal": lambda T: T.equal(_meta(T, 2), _meta(T, 3)),
    "bool of two": lambda T: bool(_meta(T, 2)),
    "bool of none": lambda T: bool(_meta(T, 0)),
    "bool of one": lambda T: bool(_meta(T, 1)),
    "share_memory_": lambda T: _meta(T, 2).share_memory_(),
    "cpu copy_ from meta": lambda T: T.ones(2).copy_(_meta(T, 2)),
    "clip_grad_value_": lambda T: (lambda p: (
        setattr(p, "grad", _meta(T, 3)), T.nn.utils.clip_grad_value_([p], 1.0),
        p.grad._version)[2])(T.nn.Parameter(_meta(T, 3))),
    "multi_margin_loss backward": lambda T: T.nn.functional.multi_margin_loss(
        _meta(T, 4, 5, rg=True), _long(T, 4)).backward(),
    "multilabel_margin_loss": lambda T: T.nn.functional.multilabel_margin_loss(
        _meta(T, 4, 5, rg=True), _long(T, 4, 5)),
}


@pytest.mark.parametrize("name", sorted(VALUES))
def test_functions_reading_values(name):
    prog = VALUES[name]
    assert _run(prog, fg) == _run(prog, torch)


# ---------------------------------------------------------------- factories and copies


def _in_context(T):
    x = T.ones(2)
    with T.device("meta"):
        return [T.as_tensor(x), T.as_tensor(np.ones(2)), T.scalar_tensor(2),
                T.hann_window(3, dtype=T.float64), T.kaiser_window(4),
                T.normal(0.0, 1.0, (2,)), T.normal(T.zeros(2), 1.0), T.range(0, 2)]


FACTORIES = {
    "context": _in_context,
    "as_tensor list": lambda T: T.as_tensor([1, 2], device="meta", dtype=T.float16),
    "as_tensor array": lambda T: T.as_tensor(np.ones(2), device="meta"),
    "as_tensor tensor": lambda T: T.as_tensor(T.ones(2), device="meta", dtype=T.int32),
    "as_tensor grad": lambda T: T.as_tensor(T.ones(2, requires_grad=True), device="meta"),
    "as_tensor meta to cpu": lambda T: T.as_tensor(_meta(T, 2), device="cpu"),
    "scalar_tensor": lambda T: T.scalar_tensor(True, device="meta"),
    "normal sizes": lambda T: T.normal(0.0, 1.0, (2, 3), device="meta", requires_grad=True),
    "normal meta mean": lambda T: T.normal(_meta(T, 2, dtype=T.float64), 1.0),
    "normal meta std": lambda T: T.normal(1.0, _meta(T, 3, 1)),
    "normal both": lambda T: T.normal(_meta(T, 2), _meta(T, 3, 1)),
    "normal mixed devices": lambda T: T.normal(_meta(T, 2), T.ones(2)),
    "windows": lambda T: [T.hann_window(0, device="meta"),
                          T.hamming_window(5, periodic=False, device="meta"),
                          T.blackman_window(5, device="meta"), T.bartlett_window(5, device="meta"),
                          T.kaiser_window(1, device="meta", requires_grad=True)],
    "hann integer": lambda T: T.hann_window(3, device="meta", dtype=T.int64),
    "hann negative": lambda T: T.hann_window(-1, device="meta"),
    "hamming integer": lambda T: T.hamming_window(3, device="meta", dtype=T.int64),
    "range meta": lambda T: T.range(0, 3, device="meta"),
    "to meta grad": lambda T: T.ones(2, requires_grad=True).to("meta"),
    "to meta dtype grad": lambda T: T.ones(2, requires_grad=True).to("meta", T.float64),
    "to meta backward": lambda T: (lambda x: (x.to("meta").sum().backward(), x.grad))(
        T.ones(2, requires_grad=True)),
    "to meta no grad": lambda T: T.ones(2).to("meta"),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_factories_and_copies(name):
    prog = FACTORIES[name]
    assert _run(prog, fg) == _run(prog, torch)


# ---------------------------------------------------------------- models


def _forward_backward(T, build, inputs):
    with T.device("meta"):
        model = build(T)
    out = model(*inputs(T))
    loss = (out[0] if isinstance(out, tuple) else out).sum()
    loss.backward()
    return [out, loss, [(n, p.grad) for n, p in model.named_parameters()]]


def _materialised(T, build, inputs):
    """Built on meta, given storage (`to_empty`), initialised, run on ones."""
    with T.device("meta"):
        model = build(T)
    model.to_empty(device="cpu")
    for m in model.modules():
        if hasattr(m, "reset_parameters"):
            m.reset_parameters()
    out = model(*[T.ones(x.shape, dtype=x.dtype) for x in inputs(T)])
    return [list(model.state_dict().items()), out]


def _assigned(T, build):
    T.manual_seed(0)
    reference = build(T)
    with T.device("meta"):
        model = build(T)
    result = model.load_state_dict(reference.state_dict(), assign=True)
    return [str(result), list(model.named_parameters()), list(model.named_buffers())]


MODELS = {
    "transformer": (lambda T: T.nn.Transformer(8, 2, 1, 1, 16, dropout=0.0),
                    lambda T: (_meta(T, 5, 2, 8), _meta(T, 4, 2, 8))),
    "lstm": (lambda T: T.nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True),
             lambda T: (_meta(T, 2, 5, 3),)),
    "lstm projections": (lambda T: T.nn.LSTM(3, 4, proj_size=2), lambda T: (_meta(T, 5, 2, 3),)),
    "conv net": (lambda T: T.nn.Sequential(
        T.nn.Conv2d(3, 4, 3, padding=1), T.nn.BatchNorm2d(4), T.nn.ReLU(), T.nn.MaxPool2d(2),
        T.nn.AvgPool2d(3, 2, padding=1, ceil_mode=True, count_include_pad=False),
        T.nn.AdaptiveAvgPool2d((2, 3)), T.nn.Flatten(), T.nn.Linear(24, 2)),
        lambda T: (_meta(T, 2, 3, 8, 8),)),
    "conv1d groupnorm": (lambda T: T.nn.Sequential(
        T.nn.Conv1d(3, 4, 3, dilation=2), T.nn.GroupNorm(2, 4),
        T.nn.ConvTranspose1d(4, 2, 3, stride=2)), lambda T: (_meta(T, 2, 3, 10),)),
    "embedding": (lambda T: T.nn.Embedding(10, 4, padding_idx=0),
                  lambda T: (_long(T, 2, 5),)),
    "embedding bag": (lambda T: T.nn.EmbeddingBag(10, 4, mode="mean"),
                      lambda T: (_long(T, 2, 5),)),
    "attention": (lambda T: T.nn.MultiheadAttention(8, 2, batch_first=True),
                  lambda T: (_meta(T, 2, 5, 8), _meta(T, 2, 6, 8), _meta(T, 2, 6, 8))),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_models_on_meta(name):
    build, inputs = MODELS[name]
    for prog in (lambda T: _forward_backward(T, build, inputs),
                 lambda T: _assigned(T, build)):
        assert _run(prog, fg) == _run(prog, torch)


@pytest.mark.parametrize("name", ["conv net", "lstm", "embedding"])
def test_models_materialised(name):
    build, inputs = MODELS[name]
    prog = (lambda T: _materialised(T, build, inputs))
    assert _run(prog, fg) == _run(prog, torch)


OPS = {
    "embedding cpu indices": lambda T: _forward_backward(
        T, lambda T: T.nn.Embedding(10, 4), lambda T: (T.tensor([[1, 2], [3, 4]]),)),
    "causal attention": lambda T: _forward_backward(
        T, lambda T: T.nn.Identity(), lambda T: (T.nn.functional.scaled_dot_product_attention(
            *[_meta(T, 2, 2, 5, 4, rg=True)] * 3, is_causal=True),)),
    "masked_scatter": lambda T: (lambda x, s: (
        x.masked_scatter(_meta(T, 4, 5, dtype=T.bool), s).sum().backward(), x.grad, s.grad))(
        _meta(T, 4, 5, rg=True), _meta(T, 20, rg=True)),
    "ctc backward": lambda T: T.nn.functional.ctc_loss(
        _meta(T, 5, 2, 4, rg=True).log_softmax(2), _long(T, 2, 3) + 1, [5, 5], [3, 2],
        reduction="none").sum().backward(),
    "det": lambda T: (lambda x: (T.linalg.det(x).backward(), x.grad)[1])(_meta(T, 3, 3, rg=True)),
    "adaptive_avg_pool3d": lambda T: (lambda x: (
        T.nn.functional.adaptive_avg_pool3d(x, 2).sum().backward(), x.grad)[1])(
        _meta(T, 1, 2, 4, 4, 4, rg=True)),
}


def _packed_lstm(T):
    lstm = T.nn.LSTM(3, 4, device="meta")
    x = _meta(T, 5, 2, 3, rg=True)
    out, _ = lstm(T.nn.utils.rnn.pack_padded_sequence(x, T.tensor([5, 3])))
    padded, lengths = T.nn.utils.rnn.pad_packed_sequence(out)
    padded.sum().backward()
    return [padded, lengths, x.grad]


def _encoder(T, training: bool):
    """A transformer encoder over a meta batch with a padding mask: PyTorch's errors where
    its causal-mask test and nested-tensor check read values."""
    layer = T.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, device="meta")
    encoder = T.nn.TransformerEncoder(layer, 2, enable_nested_tensor=not training)
    encoder.train(training)
    pad = _meta(T, 2, 5, dtype=T.bool)
    with T.no_grad():
        if training:
            mask = T.nn.Transformer.generate_square_subsequent_mask(5, device="meta")
            return encoder(_meta(T, 2, 5, 8), mask=mask, src_key_padding_mask=pad)
        return encoder(_meta(T, 2, 5, 8), src_key_padding_mask=pad)


OPS.update({
    "packed lstm": _packed_lstm,
    "encoder padding mask": lambda T: _encoder(T, False),
    "encoder causal mask": lambda T: _encoder(T, True),
    "square mask": lambda T: T.nn.Transformer.generate_square_subsequent_mask(4, device="meta"),
    "lu_factor": lambda T: T.linalg.lu_factor(_meta(T, 3, 3)),
    "vander": lambda T: T.vander(_meta(T, 3)),
})


@pytest.mark.parametrize("name", sorted(OPS))
def test_ops_backward_on_meta(name):
    prog = OPS[name]
    assert _run(prog, fg) == _run(prog, torch)
