"""`segment_reduce` against PyTorch: values, gradients, node names, saved values and errors."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad as fg  # noqa: E402

REDUCES = ["sum", "mean", "max", "min", "prod", "amax", "amin"]
# Ties, zeros and a NaN: max/min share their gradient, prod takes the product of the others.
DATA = [2.0, 2.0, 0.0, 3.0, 0.0, 0.0, float("nan"), 1.0, 5.0, -1.5]
LENGTHS = [2, 2, 2, 0, 3, 1]


def _both(values, dtype="float64", requires_grad=False):
    a = np.asarray(values, dtype=dtype)
    t = torch.from_numpy(a.copy()).requires_grad_(requires_grad)
    f = fg.from_numpy(a.copy()).requires_grad_(requires_grad)
    return t, f


def _ints(values, dtype="int64"):
    if values is None:
        return None, None
    a = np.asarray(values, dtype=dtype)
    return torch.from_numpy(a.copy()), fg.from_numpy(a.copy())


def _close(f, t):
    assert tuple(f.shape) == tuple(t.shape)
    assert str(f.dtype) == str(t.dtype)
    np.testing.assert_allclose(f.detach().to(fg.float64).numpy(),
                               t.detach().to(torch.float64).numpy(), rtol=1e-6, atol=1e-6,
                               equal_nan=True)


def _check(data, reduce, lengths=None, offsets=None, axis=0, initial=None, unsafe=False,
           index_dtype="int64"):
    """Forward, node name, and gradient for a fixed cotangent, against torch."""
    td, fd = _both(data, requires_grad=True)
    tl, fl = _ints(lengths, index_dtype)
    to, fo = _ints(offsets, index_dtype)
    kw = dict(axis=axis, initial=initial, unsafe=unsafe)
    ty = torch.segment_reduce(td, reduce, lengths=tl, offsets=to, **kw)
    fy = fg.segment_reduce(fd, reduce, lengths=fl, offsets=fo, **kw)
    _close(fy, ty)
    assert type(fy.grad_fn).__name__ == type(ty.grad_fn).__name__ == "SegmentReduceBackward0"
    cot = np.linspace(-1.0, 2.0, ty.numel()).reshape(tuple(ty.shape))
    (tg,) = torch.autograd.grad(ty, td, torch.from_numpy(cot))
    (fg_,) = fg.autograd.grad(fy, fd, fg.from_numpy(cot))
    _close(fg_, tg)


@pytest.mark.parametrize("initial", [None, 2.0, -1])
@pytest.mark.parametrize("reduce", REDUCES)
def test_lengths_1d(reduce, initial):
    _check(DATA, reduce, lengths=LENGTHS, initial=initial)


@pytest.mark.parametrize("reduce", REDUCES)
def test_offsets_and_int32(reduce):
    offsets = np.concatenate([[0], np.cumsum(LENGTHS)])
    _check(DATA, reduce, offsets=offsets, index_dtype="int32")
    _check(DATA, reduce, lengths=LENGTHS, index_dtype="int32", initial=0.5)
    # Offsets need not start at 0 nor end at the data's end; they win over lengths.
    _check(DATA, reduce, offsets=[1, 3, 3, 7])


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "prod"])
@pytest.mark.parametrize("axis", [1, -1, 2])
def test_axis(reduce, axis):
    rng = np.random.default_rng(0)
    data = rng.uniform(0.5, 2.0, (2, 3, 5))
    ax = axis % 3
    lead = data.shape[:ax]
    n = data.shape[ax]
    lengths = np.zeros(lead + (3,), np.int64)
    flat = lengths.reshape(-1, 3)
    for row in flat:
        cut = np.sort(rng.integers(0, n + 1, 2))
        row[:] = (cut[0], cut[1] - cut[0], n - cut[1])
    _check(data, reduce, lengths=lengths, axis=axis, initial=None if axis == 1 else 1.5)
    offsets = np.concatenate([np.zeros(lead + (1,), np.int64), np.cumsum(lengths, -1)], -1)
    _check(data, reduce, offsets=offsets, axis=axis)


def test_empty_data_and_unsafe():
    _check(np.zeros(0), "sum", lengths=[0, 0])
    _check(np.zeros(0), "max", lengths=[0, 0])
    _check(np.zeros((2, 0)), "min", lengths=np.zeros((2, 2), np.int64), axis=1)
    _check(DATA, "sum", lengths=[], unsafe=True)
    _check(DATA, "mean", offsets=[0])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_low_precision_dtypes(dtype):
    td = torch.tensor([1.5, 2.25, 3.0, 4.0, 300.0, 300.0], dtype=getattr(torch, dtype))
    fd = fg.tensor([1.5, 2.25, 3.0, 4.0, 300.0, 300.0], dtype=getattr(fg, dtype))
    for reduce in ("sum", "mean", "prod", "max"):
        ty = torch.segment_reduce(td, reduce, lengths=torch.tensor([3, 1, 2]))
        fy = fg.segment_reduce(fd, reduce, lengths=fg.tensor([3, 1, 2]))
        _close(fy, ty)


def test_saved_values_and_no_double_backward():
    for axis in (0, -1):
        td, fd = _both([1.0, 3.0, 2.0], requires_grad=True)
        ty = torch.segment_reduce(td, "max", offsets=torch.tensor([0, 2, 3]), axis=axis,
                                  initial=1)
        fy = fg.segment_reduce(fd, "max", offsets=fg.tensor([0, 2, 3]), axis=axis, initial=1)
        for name in ("axis", "initial", "reduce"):
            assert getattr(fy.grad_fn, f"_saved_{name}") == getattr(ty.grad_fn,
                                                                    f"_saved_{name}"), name
        assert fy.grad_fn._saved_lengths is ty.grad_fn._saved_lengths is None
        assert fy.grad_fn._saved_offsets.tolist() == ty.grad_fn._saved_offsets.tolist()
        _close(fy.grad_fn._saved_result, ty.grad_fn._saved_result)
        _close(fy.grad_fn._saved_data, ty.grad_fn._saved_data)
    (tg,) = torch.autograd.grad(ty.sum(), td, create_graph=True)
    (fgr,) = fg.autograd.grad(fy.sum(), fd, create_graph=True)
    assert type(fgr.grad_fn).__name__ == type(tg.grad_fn).__name__
    with pytest.raises(RuntimeError) as te:
        tg.sum().backward()
    with pytest.raises(RuntimeError) as fe:
        fgr.sum().backward()
    assert str(fe.value) == str(te.value)


def _error(lib, data, reduce, data_dtype="float32", **kw):
    d = lib.tensor(data, dtype=getattr(lib, data_dtype)) if isinstance(data, list) else data
    for name in ("lengths", "offsets", "indices"):
        if isinstance(kw.get(name), tuple):
            values, dtype = kw[name]
            kw[name] = lib.tensor(values, dtype=getattr(lib, dtype))
    try:
        lib.segment_reduce(d, reduce, **kw)
    except Exception as e:  # noqa: BLE001 (the type is compared)
        return type(e), str(e)
    return None


SIX = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
ERRORS = [
    (SIX, "foo", {"lengths": ([6], "int64")}),
    (SIX, "SUM", {"lengths": ([6], "int64")}),
    (SIX, "foo", {}),
    (SIX, "sum", {}),
    (SIX, "sum", {"indices": ([1], "int64")}),
    (SIX, "sum", {"lengths": ([6], "int64"), "indices": ([1], "int64")}),
    (SIX, "sum", {"lengths": ([6], "int64"), "axis": 3}),
    (SIX, "sum", {"lengths": ([6], "int64"), "axis": -2}),
    (SIX, "sum", {"lengths": ([2, 0, 3, 2], "int64")}),
    (SIX, "sum", {"lengths": ([2, -1, 4, 1], "int64")}),
    (SIX, "sum", {"lengths": ([2, -1, 3], "int64")}),
    (SIX, "sum", {"lengths": ([2, -1, 3], "int64"), "unsafe": True}),
    (SIX, "sum", {"lengths": ([6.0], "float32")}),
    (SIX, "sum", {"lengths": ([1.0], "float32")}),
    (SIX, "sum", {"lengths": ([6], "int16")}),
    (SIX, "sum", {"lengths": ([6], "uint8")}),
    (SIX, "sum", {"lengths": ([True], "bool")}),
    (SIX, "sum", {"lengths": ([[6]], "int64")}),
    (SIX, "sum", {"lengths": (6, "int64")}),
    (SIX, "sum", {"lengths": ([], "int64")}),
    (SIX, "sum", {"offsets": ([0, 3, 2, 6], "int64")}),
    (SIX, "sum", {"offsets": ([0.0, 6.0], "float32")}),
    (SIX, "sum", {"offsets": ([[0, 6]], "int64")}),
    (SIX, "sum", {"offsets": ([], "int64")}),
    (SIX, "sum", {"lengths": ([6], "int64"), "offsets": ([0.0, 6.0], "float32")}),
    (SIX, "sum", {"data_dtype": "int64", "lengths": ([6], "int64")}),
    (SIX, "max", {"data_dtype": "int32", "lengths": ([6], "int64")}),
    (SIX, "sum", {"data_dtype": "bool", "lengths": ([6], "int64")}),
    (SIX, "sum", {"data_dtype": "complex64", "lengths": ([6], "int64")}),
    (SIX, "sum", {"data_dtype": "int64", "lengths": ([1], "int64")}),
    (SIX, "sum", {"data_dtype": "int64", "lengths": ([6.0], "float32")}),
    (SIX, "sum", {"data_dtype": "int64", "offsets": ([0, 3, 2], "int64")}),
    (SIX, "sum", {"lengths": ([6], "int64"), "initial": "a"}),
    (SIX, "sum", {"lengths": ([6], "int64"), "initial": 1 + 2j}),
    (SIX, "sum", {"lengths": ([6], "int64"), "axis": 1.0}),
    (SIX, "sum", {"lengths": ([6], "int64"), "axis": True}),
    (SIX, "sum", {"lengths": ([6], "int64"), "unsafe": 1}),
    (SIX, "sum", {"lengths": [6]}),
    (SIX, "sum", {"offsets": [0, 6]}),
    (SIX, "sum", {"indices": 5}),
    (SIX, 3, {"lengths": ([6], "int64")}),
    (SIX, None, {"lengths": ([6], "int64")}),
    (SIX, "sum", {"lengths": ([6], "int64"), "foo": 1}),
]


@pytest.mark.parametrize("data,reduce,kw", ERRORS, ids=[str(i) for i in range(len(ERRORS))])
def test_errors_match_torch(data, reduce, kw):
    expected = _error(torch, data, reduce, **dict(kw))
    assert expected is not None
    assert _error(fg, data, reduce, **dict(kw)) == expected


def test_argument_errors_of_the_call():
    t = torch.tensor([1.0, 2.0])
    f = fg.tensor([1.0, 2.0])
    for call in (lambda lib, x: lib.segment_reduce(x), lambda lib, x: lib.segment_reduce(),
                 lambda lib, x: lib.segment_reduce(x.tolist(), "sum",
                                                   lengths=lib.tensor([2])),
                 lambda lib, x: lib.segment_reduce(x, "sum", lib.tensor([2]))):
        with pytest.raises(TypeError) as te:
            call(torch, t)
        with pytest.raises(TypeError) as fe:
            call(fg, f)
        assert str(fe.value) == str(te.value)


def test_number_like_initial():
    for initial in (np.float64(1.5), True, torch.tensor(2.0)):
        t = torch.segment_reduce(torch.tensor([1.0, 2.0]), "sum", lengths=torch.tensor([1, 1]),
                                 initial=initial)
        f_init = fg.tensor(2.0) if isinstance(initial, torch.Tensor) else initial
        f = fg.segment_reduce(fg.tensor([1.0, 2.0]), "sum", lengths=fg.tensor([1, 1]),
                              initial=f_init)
        _close(f, t)


def test_fx_traces_the_call():
    def f(lib, x, lengths):
        return lib.segment_reduce(x, "max", lengths=lengths, initial=0.5) * 2

    def traced(lib):
        return lib.fx.symbolic_trace(lambda x, lengths: f(lib, x, lengths))

    tgm, fgm = traced(torch), traced(fg)
    targets = [n.target for n in fgm.graph.nodes if n.op == "call_function"]
    assert fg.segment_reduce in targets
    call = next(n for n in fgm.graph.nodes if n.target is fg.segment_reduce)
    tcall = next(n for n in tgm.graph.nodes if n.target is torch.segment_reduce)
    assert sorted(call.kwargs) == sorted(tcall.kwargs)
    x = np.array([1.0, 3.0, -2.0, 0.25])
    lengths = np.array([1, 3])
    _close(fgm(fg.from_numpy(x), fg.from_numpy(lengths)),
           tgm(torch.from_numpy(x), torch.from_numpy(lengths)))
