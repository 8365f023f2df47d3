"""Eager discrepancies against PyTorch 2.13: which inputs an `out=` may share memory with
(per op family: scans, index ops, sort/topk, selections, addmm-like ops, stacks), `where`'s
out= overload taking only tensors, and a NaN weight multiplied by a convolution's padding.
Each case runs under torch and fusegrad in the test."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import fusegrad as fg
import fusegrad.nn.functional as G


def _error(fn, *args):
    """The (type name, text) of what `fn(*args)` raises, or None."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (the resize warning of a reshaped `out`)
            fn(*args)
    except Exception as e:  # noqa: BLE001  (compared against torch's)
        return type(e).__name__, str(e)
    return None


def _base(T, n=12, dtype=None):
    return T.arange(n, dtype=dtype or T.float32) * 0.37 + 0.5


def _idx(T):
    return T.tensor([0, 2, 1])


def _long(T, *shape):
    return T.empty(shape, dtype=T.long)


# Each case: calls that torch refuses (at least one) and calls it allows, of one op family.
OVERLAP_CASES = {
    "cumsum": [
        lambda T: (b := _base(T), T.cumsum(b[:2], 0, out=b[1:3])),
        lambda T: (b := _base(T), T.cumsum(b, 0, out=b)),                 # full: allowed
        lambda T: (b := _base(T), T.cumsum(b[:4].view(2, 2), 1, out=b[:4])),  # full once resized
        lambda T: (b := _base(T), T.logcumsumexp(b[:4], 0, out=b[1:5])),
        lambda T: (b := _base(T), T.cummax(b[:4], 0, out=(b[1:5], _long(T, 4)))),  # allowed
    ],
    "index_select": [
        lambda T: (b := _base(T), T.index_select(b[:4], 0, _idx(T), out=b[1:3])),
        lambda T: (b := _base(T), T.index_select(b[:3], 0, _idx(T), out=b[:3])),  # full too
        lambda T: (b := T.arange(6), T.index_select(T.arange(9), 0, b[:3], out=b[1:4])),
        lambda T: (b := _base(T), T.index_select(b[:4], 0, _idx(T), out=b[5:8])),  # apart
    ],
    "gather_take": [
        lambda T: (b := _base(T), T.gather(b[:3], 0, _idx(T), out=b[:3])),
        lambda T: (b := _base(T), T.take(b[:4], _idx(T), out=b[1:4])),
        lambda T: (b := _base(T), T.take_along_dim(b[:3], _idx(T), 0, out=b[:3])),
        lambda T: (b := _base(T), T.masked_select(b[:3], T.tensor([True] * 3), out=b[:3])),
    ],
    "nonzero": [
        lambda T: (b := T.ones(8, dtype=T.long), T.nonzero(b[:2].view(2, 1),
                                                           out=b[1:3].view(2, 1))),
    ],
    "sort": [
        lambda T: (b := _base(T), T.sort(b[:2], out=(b[1:3], _long(T, 2)))),
        lambda T: (b := _base(T), T.sort(b, out=(b, _long(T, 12)))),      # full: allowed
        lambda T: (b := T.arange(8), T.sort(b[:4], out=(_long(T, 4), b[1:5]))),  # indices: ok
        lambda T: (b := _base(T), T.msort(b[:4], out=b[1:5])),
    ],
    "topk": [
        lambda T: (b := _base(T), T.topk(b[:4], 2, out=(b[1:3], _long(T, 2)))),
        lambda T: (b := T.arange(8), T.topk(b[:4], 2, out=(_long(T, 2), b[1:3]))),
        lambda T: (b := _base(T), T.topk(b[:4], 4, out=(b[:4], _long(T, 4)))),  # full: allowed
    ],
    "kthvalue": [
        lambda T: (b := _base(T), T.kthvalue(b[:2].view(2, 1), 1, 1, True,
                                             out=(b[:2].view(2, 1), _long(T, 2, 1)))),
        lambda T: (b := T.arange(8), T.kthvalue(b[:4], 1, out=(_long(T), b[1]))),  # allowed
    ],
    "max_mode_median": [
        lambda T: (b := _base(T), T.max(b[:4].view(2, 2), 1, out=(b[1:3], _long(T, 2)))),
        lambda T: (b := _base(T), T.mode(b[:4].view(2, 2), 1, out=(b[1:3], _long(T, 2)))),
        lambda T: (b := _base(T), T.nanmedian(b[:4].view(2, 2), 1, out=(b[1:3], _long(T, 2)))),
        lambda T: (b := _base(T), T.aminmax(b[:4].view(2, 2), dim=1, out=(b[1:3], T.empty(2)))),
        lambda T: (b := _base(T), T.max(b[:2].view(2, 1), 1, True,
                                        out=(b[:2].view(2, 1), _long(T, 2, 1)))),  # allowed
    ],
    "addmm": [
        lambda T: (b := _base(T), T.addmm(b[:4].view(2, 2), b[4:8].view(2, 2),
                                          b[8:12].view(2, 2), out=b[1:5].view(2, 2))),
        lambda T: (b := _base(T), T.addmv(b[:2], b[2:6].view(2, 2), b[6:8], out=b[1:3])),
        lambda T: (b := _base(T), T.baddbmm(b[:4].view(1, 2, 2), b[4:8].view(1, 2, 2),
                                            b[8:12].view(1, 2, 2), out=b[1:5].view(1, 2, 2))),
        lambda T: (b := _base(T), T.addmm(b[8:12].view(2, 2), b[:4].view(2, 2),
                                          b[4:8].view(2, 2), out=b[1:5].view(2, 2))),  # ok
    ],
    "index_add": [
        lambda T: (b := _base(T), T.index_add(b[:4], 0, _idx(T), b[4:7], out=b[1:5])),
        lambda T: (b := _base(T), T.index_add(b[:3].clone(), 0, _idx(T), b[4:7], out=b[4:7])),
        lambda T: (b := _base(T), T.index_add(b[:4], 0, _idx(T), b[4:7], out=b[:4])),  # ok
    ],
    "products": [
        lambda T: (b := _base(T), T.outer(b[:2], b[4:6], out=b[1:5].view(2, 2))),
        lambda T: (b := _base(T), T.kron(b[:2], b[4:5], out=b[1:3])),
        lambda T: (b := _base(T), T.linalg.cross(b[:3], b[3:6], out=b[3:6])),
        lambda T: (b := _base(T), T.frexp(b[:4], out=(b[1:5], T.empty(4, dtype=T.int32)))),
        lambda T: (b := _base(T), T.mm(b[:4].view(2, 2), b[4:8].view(2, 2),
                                       out=b[1:5].view(2, 2))),  # allowed
    ],
    "stacks": [
        lambda T: (b := _base(T), T.hstack([b[:2], b[4:6]], out=b[4:8])),
        lambda T: (b := _base(T), T.vstack([b[:4].view(2, 2)], out=b[:4].view(2, 2))),
        lambda T: (b := _base(T), T.dstack([b[:2], b[4:6]], out=b[1:5].view(1, 2, 2))),
    ],
}


@pytest.mark.parametrize("family", sorted(OVERLAP_CASES))
def test_out_overlap_refused_as_torch(family):
    for i, case in enumerate(OVERLAP_CASES[family]):
        assert _error(case, fg) == _error(case, torch), (family, i)


def test_out_overlap_refusal_leaves_values():
    for T in (torch, fg):
        b = _base(T)
        with pytest.raises(RuntimeError, match="refer to a single memory location"):
            T.cumsum(b[:2], 0, out=b[1:3])
        assert b.tolist() == _base(T).tolist()


WHERE_CALLS = [
    lambda T, c, a, t: T.where(c, a, 0., out=t),
    lambda T, c, a, t: T.where(c, 0., a, out=t),
    lambda T, c, a, t: T.where(c, a, 1, out=t),
    lambda T, c, a, t: T.where(True, a, a, out=t),
    lambda T, c, a, t: T.where(c, [1.0, 2.0], a, out=t),
]


def test_where_out_takes_only_tensors():
    def run(T, call):
        c, a, t = T.tensor([True, False]), T.tensor([1.0, 2.0]), T.empty(2)
        return call(T, c, a, t)

    for i, call in enumerate(WHERE_CALLS):
        want = _error(run, torch, call)
        assert want is not None and want[0] == "TypeError"
        assert _error(run, fg, call) == want, i
    # the tensor form still writes
    c, a, t = fg.tensor([True, False]), fg.tensor([1.0, 2.0]), fg.empty(2)
    assert fg.where(c, a, fg.tensor(0.0), out=t) is t and t.tolist() == [1.0, 0.0]


# (x shape, w shape, non-finite weight's index, value, dtype, conv kwargs): PyTorch's
# oneDNN kernels (float32, one group or depthwise) never read the padding; its others
# (float64, a single small sample, grouped) multiply it as im2col does.
CONV_CASES = [
    ((32, 4, 6, 7), (6, 4, 3, 3), (2, 1, 0, 2), np.nan, "float32", {"padding": 1}),
    ((32, 4, 6, 7), (6, 4, 3, 3), (2, 1, 0, 2), np.inf, "float32", {"padding": 1}),
    ((2, 4, 20, 20), (6, 4, 3, 3), (2, 1, 0, 2), np.nan, "float32", {"padding": 1}),
    ((2, 4, 30, 30), (6, 4, 3, 3), (2, 1, 2, 0), -np.inf, "float32", {"padding": 1}),
    ((4, 6, 9, 9), (6, 6, 3, 3), (4, 1, 0, 2), np.nan, "float32",
     {"padding": (0, 1), "stride": (2, 1)}),
    ((4, 6, 9, 9), (6, 1, 3, 3), (4, 0, 0, 2), np.nan, "float32",
     {"padding": 2, "dilation": 2, "groups": 6}),
    ((4, 6, 9, 9), (6, 3, 3, 3), (4, 1, 0, 2), np.nan, "float32",
     {"padding": 2, "stride": 2, "groups": 2}),
    ((32, 4, 6, 7), (6, 4, 3, 3), (2, 1, 0, 2), np.nan, "float64", {"padding": 1}),
    ((1, 4, 6, 7), (6, 4, 3, 3), (2, 1, 0, 2), np.nan, "float32", {"padding": 1}),
    ((4, 3, 10), (5, 3, 3), (1, 2, 0), np.nan, "float32", {"padding": 1}),
    ((2, 3, 5, 5, 5), (4, 3, 3, 3, 3), (1, 2, 0, 1, 2), np.nan, "float32", {"padding": 1}),
]


def test_conv_nonfinite_weight_skips_padding_as_torch():
    rng = np.random.default_rng(0)
    for xs, ws, where, value, dt, kw in CONV_CASES:
        x = rng.standard_normal(xs)
        w = rng.standard_normal(ws)
        w[where] = value
        name = {3: "conv1d", 4: "conv2d", 5: "conv3d"}[len(xs)]
        want = getattr(F, name)(torch.tensor(x, dtype=getattr(torch, dt)),
                                torch.tensor(w, dtype=getattr(torch, dt)), **kw).numpy()
        got = getattr(G, name)(fg.tensor(x, dtype=getattr(fg, dt)),
                               fg.tensor(w, dtype=getattr(fg, dt)), **kw).numpy()
        case = (xs, ws, value, dt, kw)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=str(case))
        np.testing.assert_array_equal(np.isinf(got), np.isinf(want), err_msg=str(case))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, equal_nan=True,
                                   err_msg=str(case))
