"""Differences found by running user programs under both libraries, each checked against
torch directly: EmbeddingBag.from_pretrained, the index types Embedding and EmbeddingBag
accept, the recurrent layers' checks of the input dtype and of the given state (and those of
the cells), layers given a non-tensor input, and nn.init's errors and missing functions."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from outcomes import Values, outcome, plain, same_outcome  # noqa: E402

import fusegrad  # noqa: E402

LIBS = (torch, fusegrad)
_Values, _plain, _outcome, _same = Values, plain, outcome, same_outcome


# ---------------------------------------------------------------- EmbeddingBag.from_pretrained


def _pretrained(T, **kwargs):
    weight = T.arange(12.0).reshape(4, 3)
    bag = T.nn.EmbeddingBag.from_pretrained(weight, **kwargs)
    shares = bag.weight.data_ptr() == weight.data_ptr()
    # (a 2-D input with include_last_offset differs in the functional: not checked here)
    values = None if bag.include_last_offset else bag(T.tensor([[0, 1, 2], [3, 1, 1]]))
    return (repr(bag), bag.weight.requires_grad, shares, bag.mode, bag.padding_idx,
            bag.max_norm, bag.norm_type, bag.scale_grad_by_freq, bag.sparse,
            bag.include_last_offset, values)


@pytest.mark.parametrize("kwargs", [
    {}, {"freeze": False}, {"mode": "sum", "padding_idx": 1}, {"padding_idx": -1},
    {"mode": "max", "max_norm": 5.0, "norm_type": 1.0}, {"include_last_offset": True},
    {"scale_grad_by_freq": True, "sparse": True}, {"padding_idx": 4}, {"padding_idx": -5},
])
def test_embedding_bag_from_pretrained(kwargs):
    _same(lambda T: _pretrained(T, **kwargs))


@pytest.mark.parametrize("shape", [(3,), (3, 2, 2), ()])
def test_from_pretrained_rejects_non_2d(shape):
    _same(lambda T: T.nn.EmbeddingBag.from_pretrained(T.ones(shape)))
    _same(lambda T: T.nn.Embedding.from_pretrained(T.ones(shape)))


def test_embedding_bag_from_pretrained_trains_when_unfrozen():
    def program(T):
        bag = T.nn.EmbeddingBag.from_pretrained(T.arange(6.0).reshape(3, 2), freeze=False,
                                                 mode="sum")
        bag(T.tensor([0, 2, 2]), T.tensor([0, 1])).sum().backward()
        return bag.weight.grad

    _same(program)


def test_embedding_from_pretrained_keyword_arguments():
    def program(T):
        emb = T.nn.Embedding.from_pretrained(T.arange(6.0).reshape(3, 2), freeze=False,
                                              padding_idx=0, max_norm=2.0, norm_type=1.0,
                                              scale_grad_by_freq=True, sparse=False)
        return repr(emb), emb.weight.requires_grad, emb(T.tensor([0, 1, 2]))

    _same(program)


# ---------------------------------------------------------------- Embedding index types

DTYPES = ["uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64", "bool", "complex64"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("max_norm", [None, 1.0])
def test_embedding_index_dtype(dtype, max_norm):
    def program(T):
        emb = T.nn.Embedding(5, 2, max_norm=max_norm)
        return emb(T.tensor([1, 0, 3]).to(getattr(T, dtype)))

    _same(program)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("max_norm", [None, 1.0])
def test_embedding_bag_2d_index_dtype(dtype, max_norm):
    def program(T):
        bag = T.nn.EmbeddingBag(5, 2, max_norm=max_norm)
        return bag(T.tensor([[1, 0], [3, 1]]).to(getattr(T, dtype)))

    _same(program)


@pytest.mark.parametrize("pair", [
    ("bool", "bool"), ("uint8", "int32"), ("int8", "uint8"), ("int32", "int32"),
    ("bool", "int64"), ("float64", "float64"), ("int64", "bool"), ("int16", "int64"),
    ("int32", "int16"), ("bfloat16", "int64"), ("uint8", "uint8"), ("int64", "uint8"),
    ("int64", "float32"),
])
@pytest.mark.parametrize("max_norm", [None, 1.0])
def test_embedding_bag_1d_index_and_offset_dtypes(pair, max_norm):
    def program(T):
        bag = T.nn.EmbeddingBag(5, 2, mode="sum", max_norm=max_norm)
        return bag(T.tensor([1, 0, 3]).to(getattr(T, pair[0])),
                   T.tensor([0, 1]).to(getattr(T, pair[1])))

    _same(program)


@pytest.mark.parametrize("case", ["bad mode", "max scale", "psw mean", "psw sum",
                                  "psw shape", "3d", "offsets 2d", "no offsets"])
def test_embedding_bag_earlier_errors_come_first(case):
    """The functional's own checks precede the kernel's index check, as in PyTorch."""
    def program(T):
        u8 = T.uint8
        kwargs = {"mode": "max", "scale_grad_by_freq": True} if case == "max scale" else {}
        bag = T.nn.EmbeddingBag(5, 2, **kwargs)
        if case == "bad mode":
            bag.mode = "foo"
        if case == "psw sum":
            bag.mode = "sum"
        if case.startswith("psw"):
            weights = T.ones(3 if case == "psw shape" else 2)
            return bag(T.tensor([1, 0], dtype=u8), T.tensor([0], dtype=u8),
                       per_sample_weights=weights)
        if case == "3d":
            return bag(T.tensor([[[1, 0]]], dtype=u8))
        if case == "offsets 2d":
            return bag(T.tensor([1, 0], dtype=u8), T.tensor([[0]]))
        if case == "no offsets":
            return bag(T.tensor([1.0, 0.0]))
        return bag(T.tensor([[1, 0]], dtype=u8))

    _same(program)


@pytest.mark.parametrize("offsets", ["tensor", "parameter", "list", "int"])
def test_embedding_bag_2d_input_with_offsets_names_their_type(offsets):
    def program(T):
        given = {"tensor": T.tensor([0]), "parameter": T.nn.Parameter(T.zeros(1)),
                 "list": [0], "int": 0}[offsets]
        return T.nn.EmbeddingBag(5, 2)(T.tensor([[1, 2]]), given)

    _same(program)


@pytest.mark.parametrize("value", ["list", "packed"])
@pytest.mark.parametrize("max_norm", [None, 1.0])
def test_embedding_non_tensor_indices(value, max_norm):
    def program(T):
        given = ([1, 2] if value == "list"
                 else T.nn.utils.rnn.pack_sequence([T.ones(2, dtype=T.long)]))
        return T.nn.Embedding(4, 2, max_norm=max_norm)(given)

    _same(program)


def test_embedding_bag_non_tensor_arguments():
    _same(lambda T: T.nn.EmbeddingBag(4, 2)([1, 0], T.tensor([0])))
    _same(lambda T: T.nn.EmbeddingBag(4, 2)(T.tensor([1, 0]), [0]))


def test_scripted_embedding_bag_takes_no_offsets():
    """The checks wrap the forward without changing what `jit.script` compiles."""
    results = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # jit.script's, in both
        for T in LIBS:
            bag = T.nn.EmbeddingBag(4, 2)
            scripted = T.jit.script(bag)
            code = scripted.code
            results.append(("offsets: Optional[Tensor]=None" in code,
                            _plain(scripted(T.tensor([[1, 2]])) - bag(T.tensor([[1, 2]])))))
        assert results[0] == results[1]
        emb = fusegrad.nn.Embedding(4, 2)
        assert "torch.embedding(input, weight" in fusegrad.jit.script(emb).code


# ---------------------------------------------------------------- recurrent layers: dtypes

RNNS = ["RNN", "LSTM", "GRU"]


@pytest.mark.parametrize("layer", RNNS)
@pytest.mark.parametrize("dtype", ["float64", "int64", "float16", "bfloat16", "int32", "bool"])
@pytest.mark.parametrize("shape", [(2, 1, 3), (2, 3)])
def test_rnn_input_dtype_must_match_weights(layer, dtype, shape):
    _same(lambda T: getattr(T.nn, layer)(3, 4)(T.ones(shape, dtype=getattr(T, dtype))))


@pytest.mark.parametrize("layer", RNNS)
def test_rnn_input_dtype_checks_and_their_order(layer):
    f64 = "float64"

    def run(make_input, hx=None, double=False):
        def program(T):
            module = getattr(T.nn, layer)(3, 4)
            if double:
                module = module.double()
            x = make_input(T)
            return module(x) if hx is None else module(x, hx(T))
        return program

    _same(run(lambda T: T.ones(2, 1, 3)))
    _same(run(lambda T: T.ones(2, 1, 3), double=True))
    _same(run(lambda T: T.ones(2, 1, 1, 3, dtype=getattr(T, f64))))
    _same(run(lambda T: T.ones(2, 1, 5, dtype=getattr(T, f64))))
    _same(run(lambda T: T.ones(0, 1, 3, dtype=getattr(T, f64))))
    _same(run(lambda T: T.ones(0, 1, 3)))
    _same(run(lambda T: T.nn.utils.rnn.pack_sequence([T.ones(2, 3, dtype=T.float64)])))
    _same(run(lambda T: T.nn.utils.rnn.pack_sequence([T.ones(2, 3, dtype=T.float64)]),
              hx=lambda T: T.zeros(1, 2, 4)))
    if layer == "LSTM":
        _same(run(lambda T: T.ones(2, 1, 3, dtype=T.float64),
                  hx=lambda T: (T.zeros(1, 4), T.zeros(1, 4))))
    else:
        _same(run(lambda T: T.ones(2, 1, 3, dtype=T.float64), hx=lambda T: T.zeros(1, 4)))
        _same(run(lambda T: T.ones(2, 1, 3), hx=lambda T: T.zeros(1, 1, 4, dtype=T.float64)))


def test_rnn_dtype_check_is_off_under_autocast():
    def program(T):
        with T.autocast("cpu", dtype=T.bfloat16):
            return T.nn.GRU(3, 4)(T.ones(2, 1, 3, dtype=T.bfloat16))[0].dtype

    _same(program)


@pytest.mark.parametrize("which", ["h", "c"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64", "int64"])
def test_lstm_onednn_state_dtype(which, dtype):
    def program(T):
        state = [T.zeros(1, 1, 4), T.zeros(1, 1, 4)]
        state["hc".index(which)] = state["hc".index(which)].to(getattr(T, dtype))
        return T.nn.LSTM(3, 4)(T.ones(2, 1, 3), tuple(state))

    _same(program)


@pytest.mark.parametrize("case", ["unbatched", "packed", "bidirectional", "module half",
                                  "module double", "projection", "empty batch"])
def test_lstm_onednn_dtype_cases(case):
    def program(T):
        f64 = T.float64
        if case == "unbatched":
            return T.nn.LSTM(3, 4)(T.ones(2, 3), (T.zeros(1, 4, dtype=f64), T.zeros(1, 4)))
        if case == "packed":
            data = T.nn.utils.rnn.pack_sequence([T.ones(2, 3)])
            return T.nn.LSTM(3, 4)(data, (T.zeros(1, 1, 4, dtype=f64), T.zeros(1, 1, 4)))
        if case == "bidirectional":
            lstm = T.nn.LSTM(3, 4, num_layers=2, bidirectional=True)
            return lstm(T.ones(2, 1, 3), (T.zeros(4, 1, 4, dtype=f64), T.zeros(4, 1, 4)))
        if case.startswith("module"):
            lstm = T.nn.LSTM(3, 4).to(T.float16 if case == "module half" else f64)
            return lstm(T.nn.utils.rnn.pack_sequence([T.ones(2, 3)]))
        if case == "projection":
            lstm = T.nn.LSTM(3, 4, proj_size=2)
            return lstm(T.ones(2, 1, 3), (T.zeros(1, 1, 2, dtype=f64), T.zeros(1, 1, 4)))
        return T.nn.LSTM(3, 4)(T.ones(2, 0, 3), (T.zeros(1, 0, 4, dtype=f64),
                                                 T.zeros(1, 0, 4)))

    # PyTorch's note that projections skip oneDNN is a once-per-process C++ warning
    _same(program, warns=case != "projection")


# ---------------------------------------------------------------- recurrent layers: states


def _z(T, *shape):
    return T.zeros(*shape)


LSTM_STATES = {
    "single 3d": (3, lambda T: _z(T, 1, 1, 4)),
    "single 3d two layers": (3, lambda T: _z(T, 2, 1, 4)),
    "single 3d wide": (3, lambda T: _z(T, 1, 1, 8)),
    "single 2d": (3, lambda T: _z(T, 1, 4)),
    "single 1d": (3, lambda T: _z(T, 4)),
    "single 4d": (3, lambda T: _z(T, 1, 1, 1, 4)),
    "single 4d pair": (3, lambda T: _z(T, 2, 1, 1, 4)),
    "tuple 2d 2d": (3, lambda T: (_z(T, 1, 4), _z(T, 1, 4))),
    "tuple 3d 2d": (3, lambda T: (_z(T, 1, 1, 4), _z(T, 1, 4))),
    "tuple 2d 3d": (3, lambda T: (_z(T, 1, 4), _z(T, 1, 1, 4))),
    "tuple of one": (3, lambda T: (_z(T, 1, 1, 4),)),
    "tuple of three": (3, lambda T: (_z(T, 1, 1, 4),) * 3),
    "tuple of three, wrong size": (3, lambda T: (_z(T, 1, 2, 4),) * 3),
    "list": (3, lambda T: [_z(T, 1, 1, 4), _z(T, 1, 1, 4)]),
    "wrong h size": (3, lambda T: (_z(T, 1, 2, 4), _z(T, 1, 1, 4))),
    "wrong c size": (3, lambda T: (_z(T, 1, 1, 4), _z(T, 2, 1, 4))),
    "tuple 4d 4d": (3, lambda T: (_z(T, 1, 1, 1, 4), _z(T, 1, 1, 1, 4))),
    "nones": (3, lambda T: (None, None)),
    "unbatched single 2d": (2, lambda T: _z(T, 1, 4)),
    "unbatched single 3d": (2, lambda T: _z(T, 1, 1, 4)),
    "unbatched tuple 3d": (2, lambda T: (_z(T, 1, 1, 4), _z(T, 1, 1, 4))),
    "unbatched tuple 2d 3d": (2, lambda T: (_z(T, 1, 4), _z(T, 1, 1, 4))),
    "unbatched tuple 1d": (2, lambda T: (_z(T, 4), _z(T, 4))),
    "unbatched wrong h": (2, lambda T: (_z(T, 2, 4), _z(T, 1, 4))),
    "unbatched wrong c": (2, lambda T: (_z(T, 1, 4), _z(T, 1, 5))),
    "unbatched tuple of three": (2, lambda T: (_z(T, 1, 4),) * 3),
    "unbatched pair tensor": (2, lambda T: _z(T, 2, 1, 4)),
}


@pytest.mark.parametrize("case", list(LSTM_STATES))
@pytest.mark.parametrize("bias", [True, False])
def test_lstm_state_forms(case, bias):
    dims, state = LSTM_STATES[case]

    def program(T):
        x = T.ones(2, 1, 3) if dims == 3 else T.ones(2, 3)
        return T.nn.LSTM(3, 4, bias=bias)(x, state(T))

    _same(program)


@pytest.mark.parametrize("case", ["single", "tuple of one", "tuple of three",
                                  "unsorted single", "unsorted tuple of three"])
def test_packed_lstm_state_forms(case):
    def program(T):
        if case.startswith("unsorted"):
            data = T.nn.utils.rnn.pack_sequence([T.ones(1, 3), T.ones(2, 3)],
                                                enforce_sorted=False)
            batch = 2
        else:
            data, batch = T.nn.utils.rnn.pack_sequence([T.ones(2, 3)]), 1
        state = {"single": _z(T, 1, batch, 4), "tuple of one": (_z(T, 1, batch, 4),)}.get(
            case.replace("unsorted ", ""), (_z(T, 1, batch, 4),) * 3)
        if case == "unsorted single":
            state = _z(T, 2, 1, batch, 4)
        output, (h, c) = T.nn.LSTM(3, 4)(data, state)
        return output.data, h, c

    _same(program)


OTHER_STATES = {
    "tuple": (3, lambda T: (_z(T, 1, 1, 4), _z(T, 1, 1, 4))),
    "tuple of one": (3, lambda T: (_z(T, 1, 1, 4),)),
    "list of one": (3, lambda T: [_z(T, 1, 1, 4)]),
    "2d": (3, lambda T: _z(T, 1, 4)),
    "4d": (3, lambda T: _z(T, 1, 1, 1, 4)),
    "wrong size": (3, lambda T: _z(T, 2, 1, 4)),
    "unbatched 3d": (2, lambda T: _z(T, 1, 1, 4)),
    "unbatched 1d": (2, lambda T: _z(T, 4)),
    "unbatched wrong": (2, lambda T: _z(T, 2, 4)),
    "nested list": (3, lambda T: [[0.0] * 4]),
    "packed 2d": ("packed", lambda T: _z(T, 1, 4)),
    "packed tuple": ("packed", lambda T: (_z(T, 1, 1, 4),)),
    "packed wrong": ("packed", lambda T: _z(T, 1, 2, 4)),
    "packed unsorted tuple": ("unsorted", lambda T: (_z(T, 1, 2, 4),)),
}


@pytest.mark.parametrize("layer", ["RNN", "GRU"])
@pytest.mark.parametrize("case", list(OTHER_STATES))
def test_rnn_and_gru_state_forms(layer, case):
    kind, state = OTHER_STATES[case]

    def program(T):
        if kind == "packed":
            x = T.nn.utils.rnn.pack_sequence([T.ones(2, 3)])
        elif kind == "unsorted":
            x = T.nn.utils.rnn.pack_sequence([T.ones(1, 3), T.ones(2, 3)],
                                             enforce_sorted=False)
        else:
            x = T.ones(2, 1, 3) if kind == 3 else T.ones(2, 3)
        output, h = getattr(T.nn, layer)(3, 4)(x, state(T))
        return getattr(output, "data", output), h

    _same(program)


@pytest.mark.parametrize("layer", RNNS)
@pytest.mark.parametrize("rank", [1, 4])
def test_rnn_input_rank_message(layer, rank):
    _same(lambda T: getattr(T.nn, layer)(3, 4)(T.ones((1,) * (rank - 1) + (3,))))


# ---------------------------------------------------------------- cells


def _cell_cases():
    z = _z
    return {
        "x3d": (lambda T: T.ones(1, 2, 3), None),
        "x0d": (lambda T: T.tensor(1.0), None),
        "x wrong size": (lambda T: T.ones(2, 5), None),
        "single 2d": (lambda T: T.ones(2, 3), lambda T: z(T, 2, 4)),
        "single 3d": (lambda T: T.ones(2, 3), lambda T: z(T, 2, 2, 4)),
        "single 1d": (lambda T: T.ones(2, 3), lambda T: z(T, 4)),
        "single 1d unbatched": (lambda T: T.ones(3), lambda T: z(T, 4)),
        "single 2d unbatched": (lambda T: T.ones(3), lambda T: z(T, 1, 4)),
        "single (2, 4) unbatched": (lambda T: T.ones(3), lambda T: z(T, 2, 4)),
        "single 0d": (lambda T: T.ones(2, 3), lambda T: z(T)),
        "single 1d batch-sized": (lambda T: T.ones(2, 3), lambda T: z(T, 2)),
        "tuple": (lambda T: T.ones(2, 3), lambda T: (z(T, 2, 4), z(T, 2, 4))),
        "list": (lambda T: T.ones(2, 3), lambda T: [z(T, 2, 4), z(T, 2, 4)]),
        "tuple of one": (lambda T: T.ones(2, 3), lambda T: (z(T, 2, 4),)),
        "tuple of three": (lambda T: T.ones(2, 3), lambda T: (z(T, 2, 4),) * 3),
        "unbatched tuple of one": (lambda T: T.ones(3), lambda T: (z(T, 4),)),
        "unbatched tuple of three": (lambda T: T.ones(3), lambda T: (z(T, 4),) * 3),
        "tuple of one, bad input": (lambda T: T.ones(2, 5), lambda T: (z(T, 2, 4),)),
        "wrong batch": (lambda T: T.ones(2, 3), lambda T: z(T, 3, 4)),
        "wrong hidden": (lambda T: T.ones(2, 3), lambda T: z(T, 2, 5)),
        "both wrong": (lambda T: T.ones(2, 5), lambda T: z(T, 3, 4)),
        "tuple wrong c": (lambda T: T.ones(2, 3), lambda T: (z(T, 2, 4), z(T, 2, 5))),
        "tuple wrong h": (lambda T: T.ones(2, 3), lambda T: (z(T, 3, 4), z(T, 2, 4))),
        "tuple c batch": (lambda T: T.ones(2, 3), lambda T: (z(T, 2, 4), z(T, 3, 4))),
        "tuple 3d": (lambda T: T.ones(2, 3), lambda T: (z(T, 1, 2, 4), z(T, 1, 2, 4))),
        "tuple c 3d": (lambda T: T.ones(2, 3), lambda T: (z(T, 2, 4), z(T, 1, 2, 4))),
        "tuple c 0d": (lambda T: T.ones(2, 3), lambda T: (z(T, 2, 4), z(T))),
        "tuple 1d": (lambda T: T.ones(2, 3), lambda T: (z(T, 4), z(T, 4))),
        "tuple 1d batch-sized": (lambda T: T.ones(2, 3), lambda T: (z(T, 2), z(T, 2))),
        "tuple unbatched 2d": (lambda T: T.ones(3), lambda T: (z(T, 1, 4), z(T, 1, 4))),
        "tuple unbatched mixed": (lambda T: T.ones(3), lambda T: (z(T, 4), z(T, 1, 4))),
        "tuple batched mixed": (lambda T: T.ones(2, 3), lambda T: (z(T, 2, 4), z(T, 4))),
        "nones": (lambda T: T.ones(2, 3), lambda T: (None, None)),
        "list input": (lambda T: [1.0, 2.0, 3.0], None),
        "nested list state": (lambda T: T.ones(2, 3), lambda T: [[0.0] * 4] * 2),
        "int input": (lambda T: T.ones(2, 3, dtype=T.long), None),
        "float64 input": (lambda T: T.ones(2, 3, dtype=T.float64), None),
        "float64 state": (lambda T: T.ones(2, 3), lambda T: z(T, 2, 4).double()),
        "empty batch": (lambda T: T.ones(0, 3), None),
    }


@pytest.mark.parametrize("cell", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("case", list(_cell_cases()))
def test_cell_checks(cell, case):
    make_input, make_state = _cell_cases()[case]

    def program(T):
        module = getattr(T.nn, cell)(3, 4)
        x = make_input(T)
        return module(x) if make_state is None else module(x, make_state(T))

    _same(program)


# ---------------------------------------------------------------- non-tensor inputs


def _layers(T):
    nn = T.nn
    return {
        "Linear": (nn.Linear(4, 2), 1), "Bilinear": (nn.Bilinear(4, 4, 2), 2),
        "ConvTranspose1d": (nn.ConvTranspose1d(4, 2, 1), 1),
        "ConvTranspose2d": (nn.ConvTranspose2d(4, 2, 1), 1),
        "ConvTranspose3d": (nn.ConvTranspose3d(4, 2, 1), 1),
        "LayerNorm": (nn.LayerNorm(4), 1), "RMSNorm": (nn.RMSNorm(4), 1),
        "ReLU": (nn.ReLU(), 1), "ReLU inplace": (nn.ReLU(inplace=True), 1),
        "ReLU6": (nn.ReLU6(), 1), "GELU": (nn.GELU(), 1), "Tanh": (nn.Tanh(), 1),
        "Sigmoid": (nn.Sigmoid(), 1), "LeakyReLU": (nn.LeakyReLU(inplace=True), 1),
        "SiLU": (nn.SiLU(), 1), "ELU": (nn.ELU(), 1), "Softplus": (nn.Softplus(), 1),
        "Hardtanh": (nn.Hardtanh(inplace=True), 1), "PReLU": (nn.PReLU(), 1),
        "Hardswish": (nn.Hardswish(), 1), "Hardsigmoid": (nn.Hardsigmoid(), 1),
        "Mish": (nn.Mish(), 1), "CELU": (nn.CELU(), 1), "SELU": (nn.SELU(inplace=True), 1),
        "LogSigmoid": (nn.LogSigmoid(), 1), "Hardshrink": (nn.Hardshrink(), 1),
        "Softshrink": (nn.Softshrink(), 1), "RReLU": (nn.RReLU(), 1),
        "Threshold": (nn.Threshold(0.1, 0.0), 1), "GLU": (nn.GLU(), 1),
        "Softsign": (nn.Softsign(), 1), "Tanhshrink": (nn.Tanhshrink(), 1),
        "Dropout": (nn.Dropout(), 1), "Dropout inplace": (nn.Dropout(inplace=True), 1),
        "AlphaDropout": (nn.AlphaDropout(), 1),
        "FeatureAlphaDropout": (nn.FeatureAlphaDropout(), 1),
        "MaxPool1d": (nn.MaxPool1d(2), 1), "MaxPool2d": (nn.MaxPool2d(2), 1),
        "MaxPool2d indices": (nn.MaxPool2d(2, return_indices=True), 1),
        "MaxPool1d indices": (nn.MaxPool1d(2, return_indices=True), 1),
        "MaxPool3d": (nn.MaxPool3d(2), 1),
        "MaxPool3d indices": (nn.MaxPool3d(2, return_indices=True), 1),
        "AvgPool1d": (nn.AvgPool1d(2), 1), "AvgPool2d": (nn.AvgPool2d(2), 1),
        "AvgPool3d": (nn.AvgPool3d(2), 1), "AdaptiveAvgPool1d": (nn.AdaptiveAvgPool1d(1), 1),
        "AdaptiveAvgPool2d": (nn.AdaptiveAvgPool2d(1), 1),
        "AdaptiveMaxPool1d": (nn.AdaptiveMaxPool1d(1), 1),
        "AdaptiveMaxPool3d": (nn.AdaptiveMaxPool3d(1), 1),
        "LPPool2d": (nn.LPPool2d(2, 2), 1), "MaxUnpool1d": (nn.MaxUnpool1d(2), 2),
        "FractionalMaxPool2d": (nn.FractionalMaxPool2d(2, output_size=1), 1),
        "MSELoss": (nn.MSELoss(), 2), "BCEWithLogitsLoss": (nn.BCEWithLogitsLoss(), 2),
        "KLDivLoss": (nn.KLDivLoss(), 2), "SoftMarginLoss": (nn.SoftMarginLoss(), 2),
        "CrossEntropyLoss": (nn.CrossEntropyLoss(), 2), "NLLLoss": (nn.NLLLoss(), 2),
        "MultiMarginLoss": (nn.MultiMarginLoss(), 2),
        "MultiLabelMarginLoss": (nn.MultiLabelMarginLoss(), 2),
        "PoissonNLLLoss": (nn.PoissonNLLLoss(), 2),
        "HingeEmbeddingLoss": (nn.HingeEmbeddingLoss(), 2),
        "CosineEmbeddingLoss": (nn.CosineEmbeddingLoss(), 3),
        "TripletMarginLoss": (nn.TripletMarginLoss(), 3),
        "MarginRankingLoss": (nn.MarginRankingLoss(), 3),
        "PixelShuffle": (nn.PixelShuffle(2), 1), "PixelUnshuffle": (nn.PixelUnshuffle(2), 1),
        "ChannelShuffle": (nn.ChannelShuffle(2), 1), "ZeroPad2d": (nn.ZeroPad2d(1), 1),
        "ReflectionPad1d": (nn.ReflectionPad1d(1), 1),
        "ConstantPad3d": (nn.ConstantPad3d(1, 2.0), 1),
        "CosineSimilarity": (nn.CosineSimilarity(), 2),
        "PairwiseDistance": (nn.PairwiseDistance(), 2), "Unfold": (nn.Unfold(1), 1),
        "Fold": (nn.Fold(1, 1), 1), "Flatten": (nn.Flatten(), 1),
        "Unflatten": (nn.Unflatten(1, (2, 2)), 1), "Embedding": (nn.Embedding(4, 2), 1),
    }


LAYERS = list(_layers(torch))


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("bad", ["list", "packed", "first tensor", "last tensor"])
def test_layer_given_non_tensor(layer, bad):
    def program(T):
        module, count = _layers(T)[layer]
        wrong = ([[1.0, 2.0, 3.0, 4.0]] if bad != "packed"
                 else T.nn.utils.rnn.pack_sequence([T.ones(2, 4)]))
        args = [wrong] * count
        if bad == "first tensor" and count > 1:
            args[0] = T.ones(1, 4)
        if bad == "last tensor" and count > 1:
            args[-1] = T.ones(1, 4)
        return module(*args)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _same(program)


@pytest.mark.parametrize("value", ["none", "int", "str", "tuple", "dict", "ndarray",
                                   "numpy scalar"])
def test_linear_names_the_argument_type(value):
    def program(T):
        given = {"none": None, "int": 3, "str": "abc", "tuple": (1.0, 2.0), "dict": {},
                 "ndarray": np.ones((1, 4)), "numpy scalar": np.float32(1.0)}[value]
        return T.nn.Linear(4, 2)(given)

    _same(program)


def test_non_tensor_keyword_argument_and_arity_errors():
    _same(lambda T: T.nn.Linear(4, 2)(input=[[1.0] * 4]))
    _same(lambda T: T.nn.ReLU()(input=[1.0]))
    _same(lambda T: T.nn.Linear(4, 2)([1.0], 2))
    _same(lambda T: T.nn.ConvTranspose1d(4, 2, 1)([[1.0]], [3]))
    _same(lambda T: T.nn.ConvTranspose1d(4, 2, 1)([[1.0]], None))


def test_non_tensor_with_hooks():
    """The module's own hooks (an always-called one sees the failure) and global hooks."""
    def program(T):
        seen = []
        layer = T.nn.Linear(4, 2)
        layer.register_forward_hook(lambda m, a, o: seen.append(o), always_call=True)
        try:
            layer([1.0])
        except TypeError as e:
            first = str(e)
        handle = T.nn.modules.module.register_module_forward_hook(lambda m, a, o: None)
        try:
            T.nn.Linear(4, 2)([1.0])
        except TypeError as e:
            second = str(e)
        finally:
            handle.remove()
        return first, second, seen

    _same(program)


def test_a_subclass_with_its_own_forward_keeps_its_errors():
    class Wrapped(torch.nn.Linear):
        def forward(self, input):
            return input.missing

    class FgWrapped(fusegrad.nn.Linear):
        def forward(self, input):
            return input.missing

    for cls in (Wrapped, FgWrapped):
        with pytest.raises(AttributeError, match="'list' object has no attribute 'missing'"):
            cls(4, 2)([1.0])


# ---------------------------------------------------------------- nn.init


@pytest.mark.parametrize("case", [
    "kaiming_normal fan_x", "kaiming_uniform fan_x", "kaiming_normal FAN_X",
    "kaiming_normal FAN_IN", "kaiming_normal 1d", "kaiming_normal 0d", "kaiming_uniform empty",
    "kaiming_normal empty", "kaiming_normal bad nonlinearity", "gain foo", "gain None",
    "gain leaky str", "gain leaky bool", "gain leaky int", "xavier_uniform 1d",
    "xavier_normal 0d", "xavier_normal empty", "fan 1d", "fan empty", "orthogonal 1d",
    "orthogonal 0d", "orthogonal empty", "sparse 3d", "sparse 1d", "sparse empty",
    "eye 3d", "eye 1d", "dirac 2d", "dirac 6d", "dirac groups", "dirac groups zero",
    "trunc_normal far mean", "trunc_normal empty", "uniform int", "normal int",
    "uniform reversed", "normal negative std", "kaiming_normal mode None",
])
def test_init_errors_and_warnings(case):
    def program(T):
        init, E = T.nn.init, T.empty
        run = {
            "kaiming_normal fan_x": lambda: init.kaiming_normal_(E(5, 5), mode="fan_x"),
            "kaiming_uniform fan_x": lambda: init.kaiming_uniform_(E(5, 5), mode="fan_x"),
            "kaiming_normal FAN_X": lambda: init.kaiming_normal_(E(5, 5), mode="FAN_X"),
            "kaiming_normal FAN_IN": lambda: init.kaiming_normal_(E(5, 5), mode="FAN_IN"),
            "kaiming_normal 1d": lambda: init.kaiming_normal_(E(5)),
            "kaiming_normal 0d": lambda: init.kaiming_normal_(E(())),
            "kaiming_uniform empty": lambda: init.kaiming_uniform_(E(0, 5), mode="fan_x"),
            "kaiming_normal empty": lambda: init.kaiming_normal_(E(3, 0)),
            "kaiming_normal bad nonlinearity":
                lambda: init.kaiming_normal_(E(5, 5), nonlinearity="foo"),
            "gain foo": lambda: init.calculate_gain("foo"),
            "gain None": lambda: init.calculate_gain(None),
            "gain leaky str": lambda: init.calculate_gain("leaky_relu", "a"),
            "gain leaky bool": lambda: init.calculate_gain("leaky_relu", True),
            "gain leaky int": lambda: init.calculate_gain("leaky_relu", 1),
            "xavier_uniform 1d": lambda: init.xavier_uniform_(E(5)),
            "xavier_normal 0d": lambda: init.xavier_normal_(E(())),
            "xavier_normal empty": lambda: init.xavier_normal_(E(0, 3)),
            "fan 1d": lambda: init._calculate_fan_in_and_fan_out(E(5)),
            "fan empty": lambda: init._calculate_fan_in_and_fan_out(E(0, 5)),
            "orthogonal 1d": lambda: init.orthogonal_(E(5)),
            "orthogonal 0d": lambda: init.orthogonal_(E(())),
            "orthogonal empty": lambda: init.orthogonal_(E(0, 5)),
            "sparse 3d": lambda: init.sparse_(E(2, 3, 4), 0.5),
            "sparse 1d": lambda: init.sparse_(E(4), 0.5),
            "sparse empty": lambda: init.sparse_(E(0, 3), 0.5),
            "eye 3d": lambda: init.eye_(E(2, 3, 4)),
            "eye 1d": lambda: init.eye_(E(2)),
            "dirac 2d": lambda: init.dirac_(E(2, 3)),
            "dirac 6d": lambda: init.dirac_(E(2, 3, 1, 1, 1, 1)),
            "dirac groups": lambda: init.dirac_(E(3, 3, 3), groups=2),
            "dirac groups zero": lambda: init.dirac_(E(3, 3, 3), groups=0),
            "trunc_normal far mean": lambda: init.trunc_normal_(E(5), mean=10.0),
            "trunc_normal empty": lambda: init.trunc_normal_(E(0)),
            "uniform int": lambda: init.uniform_(E(3, dtype=T.long)),
            "normal int": lambda: init.normal_(E(3, dtype=T.long)),
            "uniform reversed": lambda: init.uniform_(E(3), 2, 1),
            "normal negative std": lambda: init.normal_(E(3), 0, -1),
            "kaiming_normal mode None": lambda: init.kaiming_normal_(E(3, 3), mode=None),
        }[case]
        result = run()
        return tuple(result.shape) if hasattr(result, "shape") else result

    _same(program)


@pytest.mark.parametrize("name", ["sparse_", "dirac_", "orthogonal_", "trunc_normal_",
                                  "kaiming_uniform_", "eye_", "ones_", "zeros_", "constant_",
                                  "xavier_normal_", "uniform_", "normal_"])
def test_init_of_a_non_tensor(name):
    extra = {"sparse_": (0.5,), "constant_": (1.0,)}.get(name, ())
    _same(lambda T: getattr(T.nn.init, name)([[1.0, 2.0], [3.0, 4.0]], *extra))


@pytest.mark.parametrize("sparsity", [0.0, 0.3, 0.5, 1.0, 1.5, -0.5])
def test_sparse_values(sparsity):
    _same(lambda T: T.nn.init.sparse_(T.empty(6, 4), sparsity))
    _same(lambda T: T.nn.init.sparse_(T.empty(5, 3, dtype=T.float64), sparsity, std=2.0,
                                      generator=T.Generator().manual_seed(3)))


@pytest.mark.parametrize("shape,groups", [((2, 3, 3), 1), ((4, 2, 3), 2), ((6, 4, 3, 3), 2),
                                          ((2, 4, 3, 2, 5), 1), ((3, 1, 2), 3)])
def test_dirac_values(shape, groups):
    _same(lambda T: T.nn.init.dirac_(T.empty(shape), groups=groups))


@pytest.mark.parametrize("name", ["uniform", "normal", "constant", "eye", "dirac",
                                  "xavier_uniform", "xavier_normal", "kaiming_uniform",
                                  "kaiming_normal", "orthogonal", "sparse"])
def test_deprecated_init_names(name):
    def program(T):
        tensor = T.empty(3, 3, 3) if name == "dirac" else T.empty(3, 3)
        extra = (0.5,) if name in ("constant", "sparse") else ()
        result = getattr(T.nn.init, name)(tensor, *extra)
        return result is tensor, result

    _same(program)


def test_init_public_names():
    def public(T):
        return {n for n in dir(T.nn.init) if not n.startswith("_") and callable(
            getattr(T.nn.init, n)) and n[0].islower() and n not in ("annotations",)}

    missing = public(torch) - public(fusegrad)
    assert missing <= {"Callable", "Literal", "ParamSpec", "TypeVar"}, missing
