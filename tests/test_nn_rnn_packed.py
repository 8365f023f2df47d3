"""nn.utils.rnn (PackedSequence, pack/pad/unpack) and the recurrent layers on packed input,
against torch: values, batch sizes and permutations, gradients, node names and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_nn_recurrent import data, graph_names, pair
from test_nn_support import close
from torch.nn.utils import rnn as trnn

import fusegrad
from fusegrad.nn.utils import rnn as frnn

TOL = {"float32": 2e-5, "float64": 1e-10}


def _mods():
    return ((torch, trnn), (fusegrad, frnn))


def _same_ints(a, b, what=""):
    if b is None:
        assert a is None, what
        return
    assert a is not None, what
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1], what
    np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=what)


def _same_packed(pf, pt, atol, what=""):
    close(pf.data, pt.data, atol, atol, what + " data")
    _same_ints(pf.batch_sizes, pt.batch_sizes, what + " batch_sizes")
    _same_ints(pf.sorted_indices, pt.sorted_indices, what + " sorted_indices")
    _same_ints(pf.unsorted_indices, pt.unsorted_indices, what + " unsorted_indices")


# ---------------------------------------------------------------- packing and padding


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("lengths,enforce", [([5, 3, 2], True), ([2, 5, 3], False),
                                             ([4, 4, 1], True), ([1, 4, 4], False)])
def test_pack_pad_round_trip(lengths, enforce, batch_first):
    x = data(3, 5, 2) if batch_first else data(5, 3, 2)
    res = []
    for T, R in _mods():
        xi = T.tensor(x, requires_grad=True)
        packed = R.pack_padded_sequence(xi, lengths, batch_first=batch_first,
                                        enforce_sorted=enforce)
        padded, lens = R.pad_packed_sequence(packed, batch_first=batch_first,
                                             padding_value=-1.5, total_length=6)
        res.append((xi, packed, padded, lens))
    (xt, pt, padt, lt), (xf, pf, padf, lf) = res
    _same_packed(pf, pt, 1e-12)
    close(padf, padt, 1e-12, 1e-12, "padded")
    _same_ints(lf, lt, "lengths")
    assert graph_names(pf.data.sum()) == graph_names(pt.data.sum())
    assert graph_names(padf.sum()) == graph_names(padt.sum())
    cot = data(*padt.shape, seed=4)
    (padt * torch.tensor(cot)).sum().backward()
    (padf * fusegrad.tensor(cot)).sum().backward()
    close(xf.grad, xt.grad, 1e-12, 1e-12, "input grad")


def test_pack_padded_sequence_grad_fn_and_lengths_forms():
    x = data(4, 3, 2)
    for lengths in ([4, 2, 1], (4, 2, 1), torch.tensor([4, 2, 1]), np.array([4, 2, 1])):
        lf = fusegrad.tensor(np.asarray(lengths)) if isinstance(lengths, torch.Tensor) \
            else lengths
        pt = trnn.pack_padded_sequence(torch.tensor(x, requires_grad=True), lengths)
        pf = frnn.pack_padded_sequence(fusegrad.tensor(x, requires_grad=True), lf)
        _same_packed(pf, pt, 1e-12)
        assert type(pf.data.grad_fn).__name__ == "PackPaddedSequenceBackward0"
    assert isinstance(pf, tuple) and pf._fields == pt._fields
    assert pf.batch_sizes.dtype == fusegrad.int64
    data_, sizes, sorted_, unsorted = pf
    assert sorted_ is None and unsorted is None and data_ is pf.data and sizes is pf.batch_sizes


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_sequence(batch_first, side):
    seqs = [data(3, 2), data(1, 2, seed=1), data(4, 2, seed=2)]
    res = []
    for T, R in _mods():
        ts = [T.tensor(s, requires_grad=True) for s in seqs]
        res.append((ts, R.pad_sequence(ts, batch_first=batch_first, padding_value=0.5,
                                       padding_side=side)))
    (tt, pt), (tf, pf) = res
    close(pf, pt, 1e-12, 1e-12, "padded")
    assert graph_names(pf.sum()) == graph_names(pt.sum())
    cot = data(*pt.shape, seed=5)
    (pt * torch.tensor(cot)).sum().backward()
    (pf * fusegrad.tensor(cot)).sum().backward()
    for a, b in zip(tf, tt):
        close(a.grad, b.grad, 1e-12, 1e-12, "grad")


@pytest.mark.parametrize("enforce", [True, False])
def test_pack_unpack_unpad_sequence(enforce):
    seqs = [data(4, 2), data(3, 2, seed=1), data(1, 2, seed=2)]
    if not enforce:
        seqs = seqs[::-1]
    res = []
    for T, R in _mods():
        ts = [T.tensor(s, requires_grad=True) for s in seqs]
        packed = R.pack_sequence(ts, enforce_sorted=enforce)
        back = R.unpack_sequence(packed)
        padded = R.pad_sequence(ts)
        lens = T.tensor([s.shape[0] for s in seqs])
        unpadded = R.unpad_sequence(padded, lens)
        res.append((ts, packed, back, unpadded))
    (tt, pt, bt, ut), (tf, pf, bf, uf) = res
    _same_packed(pf, pt, 1e-12)
    assert graph_names(pf.data.sum()) == graph_names(pt.data.sum())
    for a, b, s in zip(bf, bt, seqs):
        close(a, b, 1e-12, 1e-12, "unpacked")
        np.testing.assert_array_equal(a.detach().numpy(), s)
    for a, b in zip(uf, ut):
        close(a, b, 1e-12, 1e-12, "unpadded")
    sum((b * b).sum() for b in bt).backward()
    sum((b * b).sum() for b in bf).backward()
    for a, b in zip(tf, tt):
        close(a.grad, b.grad, 1e-12, 1e-12, "grad")


def test_packed_sequence_methods():
    pf = frnn.pack_sequence([fusegrad.ones(3, 2), fusegrad.ones(1, 2)])
    pd = pf.double()
    assert pd.data.dtype == fusegrad.float64 and pd.batch_sizes is pf.batch_sizes
    assert pf.to(fusegrad.float32) is pf
    assert pf.to(fusegrad.float64).data.dtype == fusegrad.float64
    assert pf.float() is pf and not pf.is_cuda and pf.cpu() is pf
    p2 = frnn.PackedSequence(pf.data, pf.batch_sizes, fusegrad.tensor([1, 0]))
    np.testing.assert_array_equal(p2.unsorted_indices.numpy(), [1, 0])
    p3 = frnn.PackedSequence(fusegrad.tensor([1.0, 2.0]), fusegrad.tensor([1, 1]),
                             fusegrad.tensor([2, 0, 1]))
    pt = trnn.PackedSequence(torch.tensor([1.0, 2.0]), torch.tensor([1, 1]),
                             torch.tensor([2, 0, 1]))
    _same_ints(p3.unsorted_indices, pt.unsorted_indices)
    reprs = [repr(R.pack_padded_sequence(T.arange(6.0).reshape(3, 2), T.tensor([3.0, 2.0])))
             for T, R in _mods()]
    assert reprs[0] == reprs[1]


def test_errors():
    x3 = data(4, 3, 2)
    cases = [
        lambda R, T: R.pack_padded_sequence(T.tensor(x3), [2, 4, 1]),
        lambda R, T: R.pack_padded_sequence(T.tensor(x3), [4, 2, 0]),
        lambda R, T: R.pack_padded_sequence(T.tensor(x3), [4, 2]),
        lambda R, T: R.pad_packed_sequence(R.pack_padded_sequence(T.tensor(x3), [4, 2, 1]),
                                           total_length=2),
        lambda R, T: R.pad_sequence([T.ones(2)], padding_side="mid"),
        lambda R, T: R.pad_sequence([]),
        lambda R, T: R.pack_sequence([]),
    ]
    for case in cases:
        with pytest.raises(Exception) as et:
            case(trnn, torch)
        with pytest.raises(Exception) as ef:
            case(frnn, fusegrad)
        assert type(ef.value) is type(et.value)
        assert str(ef.value) == str(et.value)


# ---------------------------------------------------------------- layers on packed input


def _run_packed(T, R, mod, x, lengths, enforce, batch_first, hx, input_grad=True):
    xi = T.tensor(x, requires_grad=input_grad)
    leaves = [xi] if input_grad else []
    packed = R.pack_padded_sequence(xi, lengths, batch_first=batch_first,
                                    enforce_sorted=enforce)
    args = [packed]
    if hx is not None:
        h = tuple(T.tensor(a, requires_grad=True) for a in hx)
        leaves += list(h)
        args.append(h if len(h) > 1 else h[0])
    out, hidden = mod(*args)
    assert type(out) is R.PackedSequence
    finals = list(hidden) if isinstance(hidden, tuple) else [hidden]
    padded, lens = R.pad_packed_sequence(out, batch_first=batch_first)
    return out, finals, padded, lens, leaves


PACKED_CONFIGS = [
    dict(),
    dict(num_layers=2),
    dict(bidirectional=True),
    dict(num_layers=2, bidirectional=True, batch_first=True),
    dict(bias=False, batch_first=True),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("cfg", PACKED_CONFIGS, ids=str)
@pytest.mark.parametrize("lengths,enforce,with_hx", [([5, 3, 2], True, False),
                                                     ([3, 5, 2], False, True)])
def test_layers_on_packed_sequences(name, cfg, dtype, lengths, enforce, with_hx):
    bf = cfg.get("batch_first", False)
    x = (data(3, 5, 3) if bf else data(5, 3, 3)).astype(dtype)
    dirs = (2 if cfg.get("bidirectional") else 1) * cfg.get("num_layers", 1)
    hx = None
    if with_hx:
        hx = (data(dirs, 3, 4, seed=1).astype(dtype),)
        if name == "LSTM":
            hx += (data(dirs, 3, 4, seed=2).astype(dtype),)
    th, fg = pair(name, dtype, input_size=3, hidden_size=4, **cfg)
    tol = TOL[dtype]
    ot, ft, padt, lt, leaves_t = _run_packed(torch, trnn, th, x, lengths, enforce, bf, hx)
    of, ff, padf, lf, leaves_f = _run_packed(fusegrad, frnn, fg, x, lengths, enforce, bf, hx)
    _same_packed(of, ot, tol, "output")
    close(padf, padt, tol, tol, "padded output")
    _same_ints(lf, lt, "lengths")
    for i, (a, b) in enumerate(zip(ff, ft)):
        close(a, b, tol, tol, f"final state {i}")
    outs_t, outs_f = [ot.data] + ft, [of.data] + ff
    names_t = graph_names(sum(o.sum() for o in outs_t))
    assert graph_names(sum(o.sum() for o in outs_f)) == names_t
    assert "MkldnnRnnLayerBackward0" not in names_t
    cots = [data(*o.shape, seed=40 + i).astype(dtype) for i, o in enumerate(outs_t)]
    sum((o * torch.tensor(c)).sum() for o, c in zip(outs_t, cots)).backward()
    sum((o * fusegrad.tensor(c)).sum() for o, c in zip(outs_f, cots)).backward()
    for i, (a, b) in enumerate(zip(leaves_f, leaves_t)):
        close(a.grad, b.grad, tol, tol, f"leaf {i} grad")
    th_p, fg_p = dict(th.named_parameters()), dict(fg.named_parameters())
    for k, p in th_p.items():
        close(fg_p[k].grad, p.grad, tol, tol, f"{k}.grad")


def test_packed_lstm_proj_size():
    th, fg = pair("LSTM", "float64", input_size=3, hidden_size=5, proj_size=2,
                  bidirectional=True)
    hx = (data(2, 3, 2, seed=1), data(2, 3, 5, seed=2))
    x = data(4, 3, 3)
    ot, ft, *_ = _run_packed(torch, trnn, th, x, [2, 4, 1], False, False, hx)
    of, ff, *_ = _run_packed(fusegrad, frnn, fg, x, [2, 4, 1], False, False, hx)
    _same_packed(of, ot, 1e-10)
    for a, b in zip(ff, ft):
        close(a, b, 1e-10, 1e-10, "final")
    assert graph_names(sum(o.sum() for o in [of.data] + ff)) == graph_names(
        sum(o.sum() for o in [ot.data] + ft))


def test_packed_hidden_size_error():
    for T, R in _mods():
        gru = T.nn.GRU(3, 4)
        packed = R.pack_padded_sequence(T.zeros(5, 2, 3), [5, 3])
        with pytest.raises(RuntimeError, match=r"Expected hidden size \(1, 2, 4\), got"):
            gru(packed, T.zeros(1, 3, 4))
