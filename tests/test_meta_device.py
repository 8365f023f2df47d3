"""The meta device: tensors and modules without data, as PyTorch's (each program runs on both
libraries; reprs, devices, shapes, dtypes, errors and the values after materialising must
agree)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fusegrad

torch = pytest.importorskip("torch")


def _outcome(fn, lib):
    try:
        out = fn(lib)
    except Exception as e:  # (any type: the type is compared)
        return ("error", type(e).__name__, str(e))
    return ("value", _plain(out))


def _plain(value):
    if isinstance(value, (fusegrad.Tensor, torch.Tensor)):
        return (str(value.device), tuple(value.shape), str(value.dtype).split(".")[-1],
                value.requires_grad, repr(value))
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (fusegrad.device, torch.device)):
        return repr(value)
    if isinstance(value, (fusegrad.Size, torch.Size)):
        return tuple(value)
    return value


CASES = {
    "empty": lambda T: T.empty(2, 3, device="meta"),
    "factories": lambda T: [T.zeros(3, device="meta"), T.ones(2, 2, dtype=T.int64, device="meta"),
                            T.full((2,), 1.5, device="meta"), T.arange(5, device="meta"),
                            T.eye(3, device="meta"), T.randn(3, device="meta", requires_grad=True),
                            T.rand(2, device="meta"), T.randint(0, 5, (3,), device="meta"),
                            T.linspace(0, 1, 4, device="meta"), T.tensor([1, 2], device="meta"),
                            T.empty_strided((2, 3), (1, 2), device="meta")],
    "geometry": lambda T: [T.empty(2, 3, device="meta").stride(), T.empty(2, device="meta").device,
                           T.empty(2, device="meta").is_meta, T.ones(2).is_meta],
    "ops": lambda T: (T.empty(2, 3, device="meta") @ T.empty(3, 4, device="meta")).sum(1),
    "likes": lambda T: [T.zeros_like(T.empty(2, 3, device="meta")),
                        T.randn_like(T.empty(2, device="meta")),
                        T.empty(2, device="meta").new_zeros(3)],
    "to_meta": lambda T: [T.ones(2, 3).to("meta"), T.ones(2).to("meta", T.float64),
                          T.empty(2, device="meta").to(T.float16)],
    "context": lambda T: _in_context(T),
    "default_device": lambda T: _with_default(T),
    "item": lambda T: T.zeros(1, device="meta").item(),
    "bool": lambda T: bool(T.zeros(1, device="meta")),
    "tolist": lambda T: T.zeros(2, device="meta").tolist(),
    "numpy": lambda T: T.zeros(2, device="meta").numpy(),
    "cpu": lambda T: T.zeros(2, device="meta").cpu(),
    "to_cpu": lambda T: T.zeros(2, device="meta").to("cpu"),
    "mixed": lambda T: T.empty(2, device="meta") + T.ones(2),
    "backward": lambda T: _meta_backward(T),
    "parameter": lambda T: [T.nn.Parameter(T.empty(2, device="meta")),
                            str(T.nn.Parameter(T.empty(2, device="meta")))],
}


def _in_context(T):
    with T.device("meta"):
        x = T.zeros(2, 3)
        layer = T.nn.Linear(3, 4)
    return [x, layer.weight, T.zeros(1), layer(T.empty(5, 3, device="meta"))]


def _with_default(T):
    T.set_default_device("meta")
    try:
        return [T.ones(2), T.get_default_device()]
    finally:
        T.set_default_device(None)


def _meta_backward(T):
    x = T.randn(3, device="meta", requires_grad=True)
    (x * 2).sum().backward()
    return x.grad


@pytest.mark.parametrize("case", sorted(CASES))
def test_meta_tensors_as_pytorch(case):
    assert _outcome(CASES[case], fusegrad) == _outcome(CASES[case], torch)


LAYERS = {
    "Linear": lambda nn, **k: nn.Linear(4, 3, **k),
    "Conv2d": lambda nn, **k: nn.Conv2d(2, 3, 3, **k),
    "BatchNorm2d": lambda nn, **k: nn.BatchNorm2d(3, **k),
    "LayerNorm": lambda nn, **k: nn.LayerNorm(3, **k),
    "Embedding": lambda nn, **k: nn.Embedding(5, 3, **k),
    "LSTM": lambda nn, **k: nn.LSTM(3, 4, **k),
    "MultiheadAttention": lambda nn, **k: nn.MultiheadAttention(4, 2, **k),
    "TransformerEncoderLayer": lambda nn, **k: nn.TransformerEncoderLayer(4, 2, 8, **k),
    "PReLU": lambda nn, **k: nn.PReLU(**k),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layers_built_on_the_meta_device(name):
    def program(T):
        layer = LAYERS[name](T.nn, device="meta")
        return [(n, str(p.device), tuple(p.shape), type(p).__name__, p.requires_grad)
                for n, p in list(layer.named_parameters()) + list(layer.named_buffers())]

    assert program(fusegrad) == program(torch)


def _model(T):
    nn = T.nn
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 6 * 6, 5))


def test_model_initialised_on_meta_then_materialised():
    """Describe a model without memory, count its parameters, infer its output's shape, then
    give it storage (`to_empty`) and the weights of a checkpoint (`assign=True`)."""
    def program(T):
        T.manual_seed(0)
        reference = _model(T)
        state = reference.state_dict()
        with T.device("meta"):
            model = _model(T)
        described = [repr(model), sum(p.numel() for p in model.parameters()),
                     tuple(model(T.empty(2, 3, 8, 8, device="meta")).shape),
                     str(model[0].weight.device)]
        model.to_empty(device="cpu")
        on_cpu = [str(p.device) for p in model.parameters()]
        model.load_state_dict(state, assign=True)
        x = T.tensor(np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype("float32"))
        model.eval()
        reference.eval()
        return described, on_cpu, model(x).detach().numpy(), reference(x).detach().numpy()

    ours, theirs = program(fusegrad), program(torch)
    assert ours[0] == theirs[0] and ours[1] == theirs[1]
    np.testing.assert_allclose(ours[2], ours[3], rtol=0, atol=0)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5, atol=1e-6)


def test_module_moves_and_loads():
    def program(T):
        out = []
        for fn in (lambda m: m.to("cpu"), lambda m: m.cpu(),
                   lambda m: m.to(T.float64).weight.dtype,
                   lambda m: T.nn.Linear(2, 2).to("meta").weight.device):
            out.append(_outcome(lambda _T, fn=fn: fn(T.nn.Linear(4, 3, device="meta")), T))
        layer = T.nn.Linear(4, 3, device="meta")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = layer.load_state_dict(T.nn.Linear(4, 3).state_dict())
        out.append((str(result), str(layer.weight.device), [str(w.message) for w in caught]))
        parameter = T.nn.Parameter(T.ones(2))
        out.append(_outcome(lambda _T: setattr(parameter, "data", T.empty(2, device="meta")),
                            T))
        return out

    assert str(program(fusegrad)) == str(program(torch))


def test_recurrent_and_attention_layers_run_on_meta():
    """Layers that make tensors of their own while running (zero states, float masks) make
    them on the meta device for meta inputs."""
    def program(T):
        with T.device("meta"):
            lstm = T.nn.LSTM(3, 4, num_layers=2, bidirectional=True)
            cell = T.nn.GRUCell(3, 4)
            attention = T.nn.MultiheadAttention(8, 2, batch_first=True)
        out, (h, c) = lstm(T.empty(5, 2, 3, device="meta"))
        q = T.empty(2, 5, 8, device="meta")
        mask = T.ones(5, 5, dtype=T.bool).triu(1).to("meta")
        attended = attention(q, q, q, attn_mask=mask)[0]
        x = T.empty(2, 3, device="meta")
        return [(str(t.device), tuple(t.shape)) for t in (
            out, h, c, cell(T.empty(2, 3, device="meta")), attended, T.full_like(x, 2.0),
            T.randint_like(x, 5))]

    assert program(fusegrad) == program(torch)
