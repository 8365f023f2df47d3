"""Leftovers of the eager core, checked against PyTorch 2.13 in each test: the index
`nanmedian` gives a slice of only NaNs (and its gradient), and arithmetic on sparse CSR
matrices (`add`, `mul`, `neg`, `sum`)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import fusegrad as fg

NAN = float("nan")

# ------------------------------------------------------------ nanmedian / median indices

_ROWS = [
    [NAN] * 4, [NAN] * 3, [NAN] * 7, [NAN] * 19,
    [1.0, NAN, 1.0, NAN], [NAN, 2.0, NAN, 2.0, NAN], [3.0, 3.0, NAN, 3.0, 3.0],
    [2.0, 1.0, 1.0, 2.0, NAN, NAN, NAN],
]


@pytest.mark.parametrize("fn", ["nanmedian", "median"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_median_indices_and_grads_match(fn, dtype):
    """Each row alone (indices, values, the gradient through them), then all the rows of
    one length together along dim 0 (strided slices)."""
    for row in _ROWS:
        for dim, shape in ((1, (1, -1)), (0, (-1, 1))):
            out = []
            for lib in (torch, fg):
                x = lib.tensor(row, dtype=getattr(lib, dtype)).reshape(shape)
                x.requires_grad_()
                r = getattr(lib, fn)(x, dim)
                r.values.float().nan_to_num(7.0).sum().backward()
                out.append((r.indices.tolist(), r.values.float().nan_to_num(7.0).tolist(),
                            x.grad.float().tolist()))
            assert out[0] == out[1], (row, dim)
    block = [r for r in _ROWS if len(r) == 4] * 2
    t = getattr(torch, fn)(torch.tensor(block).T, 0).indices.tolist()
    f = getattr(fg, fn)(fg.tensor(block).T, 0).indices.tolist()
    assert t == f


@pytest.mark.parametrize("fn", ["nanmedian", "median"])
def test_median_all_grad_shared(fn):
    row = [1.0, NAN, 1.0, NAN, 4.0]
    grads = []
    for lib in (torch, fg):
        x = lib.tensor(row, requires_grad=True)
        getattr(lib, fn)(x).backward()
        grads.append(x.grad.tolist())
    assert grads[0] == grads[1]


# ------------------------------------------------------------ CSR arithmetic

_D = [[0.0, 1.5, 0.0], [2.0, 0.0, 3.0], [0.0, 0.0, 0.0]]
_E = [[1.0, -1.5, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 4.0]]


def _csr(lib, rows, dtype="float32"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return lib.tensor(rows, dtype=getattr(lib, dtype)).to_sparse_csr()


def _parts(r):
    if r.layout == torch.sparse_csr or r.layout is fg.sparse_csr:
        return ("csr", str(r.dtype), r.crow_indices().tolist(), r.col_indices().tolist(),
                r.values().tolist())
    return (str(r.layout), str(r.dtype), r.tolist())


def _same(fn):
    out = []
    for lib in (torch, fg):
        try:
            out.append(_parts(fn(lib)))
        except (RuntimeError, NotImplementedError) as e:
            out.append((type(e).__name__, str(e)[:90]))
    assert out[0] == out[1]


_CASES = {
    "add": lambda L: _csr(L, _D) + _csr(L, _E),
    "add_alpha": lambda L: L.add(_csr(L, _D), _csr(L, _E), alpha=2),
    "add_cancels": lambda L: _csr(L, _D) + (-_csr(L, _D)),
    "add_self_int": lambda L: (lambda c: L.add(c, c, alpha=3))(_csr(L, [[0, 1], [2, 0]],
                                                                     "int64")),
    "add_self_bool": lambda L: (lambda c: c + c)(_csr(L, [[False, True]], "bool")),
    "add_float_alpha_int": lambda L: (lambda c: L.add(c, c, alpha=0.5))(_csr(L, [[0, 1]],
                                                                          "int64")),
    "add_int_refused": lambda L: _csr(L, [[0, 1]], "int64") + _csr(L, [[0, 1]], "int64"),
    "add_mixed_refused": lambda L: _csr(L, _D, "float64") + _csr(L, _D),
    "add_shape": lambda L: _csr(L, _D) + _csr(L, [[1.0]]),
    "add_number": lambda L: _csr(L, _D) + 1,
    "add_dense": lambda L: L.add(_csr(L, _D), L.tensor(_E, dtype=L.float64), alpha=3),
    "dense_add": lambda L: L.add(L.tensor(_E), _csr(L, _D, "int32"), alpha=3),
    "dense_add_shape": lambda L: L.ones(2, 3) + _csr(L, _D),
    "mul_number": lambda L: _csr(L, _D) * 2,
    "rmul_number": lambda L: 2 * _csr(L, _D),
    "mul_float_of_int": lambda L: _csr(L, [[0, 1], [2, 0]], "int64") * 2.5,
    "mul_zero_keeps": lambda L: _csr(L, _D) * 0,
    "mul_0d_wider": lambda L: _csr(L, _D) * L.tensor(2.0, dtype=L.float64),
    "mul_0d_kind": lambda L: _csr(L, [[0, 1]], "int32") * L.tensor(2.0, dtype=L.float64),
    "mul_csr": lambda L: _csr(L, _D) * _csr(L, _E),
    "mul_dense": lambda L: L.tensor(_E) * _csr(L, _D),
    "mul_dense_shape": lambda L: _csr(L, _D) * L.tensor([2.0]),
    "mul_bool_refused": lambda L: _csr(L, [[True]], "bool") * _csr(L, [[True]], "bool"),
    "neg": lambda L: -_csr(L, _D, "int32"),
    "neg_bool": lambda L: -_csr(L, [[True, False]], "bool"),
    "sum": lambda L: _csr(L, _D).sum(),
    "sum_int": lambda L: L.sum(_csr(L, [[0, 1], [2, 0]], "int32")),
    "sum_dtype": lambda L: _csr(L, _D).sum(dtype=L.float64),
    "sum_empty": lambda L: _csr(L, np.zeros((2, 0)).tolist()).sum(),
}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_csr_arithmetic_matches(case):
    _same(_CASES[case])


def test_csr_dense_add_records_gradient():
    grads = []
    for lib in (torch, fg):
        d = lib.ones(3, 3, requires_grad=True)
        r = lib.add(_csr(lib, _D), d, alpha=3)
        assert type(r.grad_fn).__name__ == "AddBackward0"
        (r * lib.arange(9.0).reshape(3, 3)).sum().backward()
        grads.append((r.tolist(), d.grad.tolist()))
    assert grads[0] == grads[1]


def test_csr_transpose_still_refused():
    with pytest.raises(NotImplementedError, match="SparseCsrCPU"):
        _csr(fg, _D).t()
