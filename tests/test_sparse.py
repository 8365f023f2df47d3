"""Sparse COO tensors against PyTorch: construction, printing, metadata, layout conversions,
products and sums with their values, node names and gradients (for the values, for the dense
operand and for a sparse leaf, whose `.grad` is sparse), PyTorch's errors for what sparse
tensors do not support, and a small GCN trained for 20 steps."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import re  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

LIBS = (torch, fusegrad)
IDX = [[0, 1, 1, 0, 2], [2, 0, 2, 2, 1]]  # entry (0, 2) is stored twice
VALS = [3.0, 4.0, 5.0, 1.0, -2.0]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _addresses(text: str) -> str:
    return re.sub(r" at 0x[0-9a-f]+", "", text)


def _sparse(T, vals_grad=False, leaf=False, **kw):
    """The uncoalesced 3x3 test matrix (entry (0, 2) stored twice)."""
    v = T.tensor(VALS, requires_grad=vals_grad, **kw)
    s = T.sparse_coo_tensor(T.tensor(IDX), v, (3, 3), requires_grad=leaf)
    return s, v


def _describe(x):
    """What a result is, in comparable form: layout, dense values, node, and for sparse
    tensors the stored pattern."""
    if isinstance(x, (torch.Tensor, fusegrad.Tensor)):
        node = type(x.grad_fn).__name__ if x.grad_fn is not None else None
        if x.is_sparse:
            return ("sparse", tuple(x.shape), str(x.dtype), node, x.is_coalesced(),
                    x._indices().tolist(), np.round(x._values().detach().tolist(), 5).tolist(),
                    np.round(x.detach().to_dense().tolist(), 5).tolist())
        return ("strided", tuple(x.shape), str(x.dtype), node,
                np.round(np.asarray(x.detach().tolist(), dtype=float), 5).tolist())
    return x


def _both(prog):
    """prog(T) under both libraries: results described, or the error's type and message."""
    out = []
    for T in LIBS:
        try:
            res = prog(T)
            out.append([_describe(r) for r in (res if isinstance(res, tuple) else (res,))])
        except Exception as e:  # noqa: BLE001 - the error is the result compared
            out.append((type(e).__name__, str(e).split(". This could")[0]))
    return out


def _check(prog):
    want, got = _both(prog)
    assert got == want


# ---------------------------------------------------------------- construction and printing

REPRS = {
    "uncoalesced": lambda T: _sparse(T)[0],
    "coalesced": lambda T: _sparse(T)[0].coalesce(),
    "with grad_fn": lambda T: _sparse(T, vals_grad=True)[0],
    "coalesce node": lambda T: _sparse(T, vals_grad=True)[0].coalesce(),
    "requires_grad leaf": lambda T: _sparse(T, leaf=True)[0],
    "float64": lambda T: _sparse(T, dtype=T.float64)[0],
    "int values, size inferred": lambda T: T.sparse_coo_tensor([[0, 3], [2, 0]], [1, 2]),
    "dense dims": lambda T: T.sparse_coo_tensor(T.tensor([[0, 1]]),
                                                T.tensor([[1.0, 2.0], [3.0, 4.0]]), (2, 2)),
    "empty": lambda T: T.sparse_coo_tensor(T.zeros(2, 0, dtype=T.long), T.zeros(0), (2, 3)),
    "to_sparse": lambda T: T.tensor([[0.0, 2.5, 0.0], [3.0, 0.0, 4.0]]).to_sparse(),
    "to_sparse(1)": lambda T: T.tensor([[0.0, 2.5, 0.0], [0.0, 0.0, 0.0]]).to_sparse(1),
    "dtype keyword": lambda T: T.sparse_coo_tensor([[0, 3]], [1, 2], dtype=T.float64),
    "sum over a sparse dim": lambda T: T.sparse.sum(_sparse(T, vals_grad=True)[0], 1),
}


@pytest.mark.parametrize("name", REPRS)
def test_repr_matches_torch(name):
    got, want = (_addresses(repr(REPRS[name](T))) for T in (fusegrad, torch))
    assert got == want


def test_layouts_and_metadata():
    for T in LIBS:
        s, _ = _sparse(T)
        d = T.zeros(2, 3)
        assert repr(T.strided) == "torch.strided" and repr(T.sparse_coo) == "torch.sparse_coo"
        assert str(T.sparse_coo) == "torch.sparse_coo"
        assert d.layout is T.strided and s.layout is T.sparse_coo
        assert (s.is_sparse, d.is_sparse) == (True, False)
        assert (s.sparse_dim(), s.dense_dim(), s._nnz()) == (2, 0, 5)
        assert (d.sparse_dim(), d.dense_dim()) == (0, 2)
        assert not s.is_coalesced() and s.coalesce().is_coalesced()
        assert s.coalesce().coalesce() is not None
        assert tuple(s.shape) == (3, 3) and s.dim() == 2 and s.numel() == 9 and len(s) == 3
        assert s.stride() == (0, 0)
        assert d.to_dense() is d and s.to_sparse() is s
        assert s.dtype is T.float32 and not s.requires_grad


def test_is_coalesced_keyword_is_trusted():
    for T in LIBS:
        s = T.sparse_coo_tensor(T.tensor([[0, 1]]), T.tensor([1.0, 2.0]), (2,),
                                is_coalesced=True)
        assert s.is_coalesced()


def test_invariants_warning_once():
    """PyTorch warns once per process that invariant checks are off unless the caller
    chooses (`check_invariants=`); each library runs in a fresh interpreter."""
    import subprocess
    import sys

    program = ("import warnings; warnings.simplefilter('always'); import {lib} as T; "
               "T.sparse_coo_tensor([[0]], [1.0], (1,)); "
               "T.sparse_coo_tensor([[0]], [1.0], (1,)); "
               "T.sparse_coo_tensor([[0]], [1.0], (1,), check_invariants=False)")
    found = []
    for lib in ("torch", "fusegrad"):
        err = subprocess.run([sys.executable, "-c", program.format(lib=lib)],
                             capture_output=True, text=True, env=os.environ).stderr
        lines = [line.split(" (Triggered")[0].strip().split("UserWarning: ")[-1]
                 for line in err.splitlines() if "UserWarning" in line]
        found.append(lines)
    assert found[0] == found[1] and len(found[1]) == 1


# ---------------------------------------------------------------- errors

ERRORS = {
    "indices of uncoalesced": lambda T: _sparse(T)[0].indices(),
    "values of uncoalesced": lambda T: _sparse(T)[0].values(),
    "dense coalesce": lambda T: T.zeros(2).coalesce(),
    "dense indices": lambda T: T.zeros(2).indices(),
    "dense values": lambda T: T.zeros(2).values(),
    "dense is_coalesced": lambda T: T.zeros(2).is_coalesced(),
    "dense _nnz": lambda T: T.zeros(2)._nnz(),
    "dense _values": lambda T: T.zeros(2)._values(),
    "view": lambda T: _sparse(T)[0].view(9),
    "exp": lambda T: _sparse(T)[0].exp(),
    "sigmoid": lambda T: T.sigmoid(_sparse(T)[0]),
    "log": lambda T: _sparse(T)[0].log(),
    "cumsum": lambda T: _sparse(T)[0].cumsum(0),
    "reshape": lambda T: _sparse(T)[0].reshape(9),
    "numpy": lambda T: _sparse(T)[0].numpy(),
    "item": lambda T: _sparse(T)[0].item(),
    "bool": lambda T: bool(_sparse(T)[0]),
    "add(sparse, dense)": lambda T: _sparse(T)[0] + T.ones(3, 3),
    "sub(sparse, dense)": lambda T: _sparse(T)[0] - T.ones(3, 3),
    "mm shapes": lambda T: T.mm(_sparse(T)[0], T.ones(2, 2)),
    "sparse.mm shapes": lambda T: T.sparse.mm(_sparse(T)[0], T.ones(2, 2)),
    "sparse.sum of dense": lambda T: T.sparse.sum(T.ones(2)),
    "to_sparse range": lambda T: T.ones(2, 2).to_sparse(3),
    "indices not 2-D": lambda T: T.sparse_coo_tensor(T.tensor([0, 1]), T.tensor([1.0, 2.0])),
    "nnz mismatch": lambda T: T.sparse_coo_tensor(T.tensor([[0, 1]]), T.tensor([1.0, 2, 3])),
    "size rank": lambda T: T.sparse_coo_tensor(T.tensor(IDX), T.tensor(VALS), (3,)),
    "out of range": lambda T: T.sparse_coo_tensor(T.tensor([[0, 3]]), T.tensor([1.0, 2]), (2,),
                                                  check_invariants=True),
    "negative index": lambda T: T.sparse_coo_tensor(T.tensor([[0, -1]]), T.tensor([1.0, 2]),
                                                    (2,), check_invariants=True),
}


@pytest.mark.parametrize("name", ERRORS)
def test_errors_match_torch(name):
    want, got = _both(ERRORS[name])
    assert isinstance(want, tuple), f"torch did not raise: {want}"
    assert got == want


# ---------------------------------------------------------------- values, nodes, gradients

D = np.arange(12.0).reshape(3, 4) / 7 - 0.5


def _values_path(T, fn):
    """fn on a sparse tensor built from values that require grad, with a dense operand that
    requires grad: the result and both gradients."""
    s, v = _sparse(T, vals_grad=True)
    d = T.tensor(D, dtype=T.float32, requires_grad=True)
    out = fn(T, s, d)
    dense = out.to_dense() if out.is_sparse else out
    w = T.tensor(np.linspace(-1, 1, dense.numel()).reshape(tuple(dense.shape)),
                 dtype=T.float32)
    (dense * w).sum().backward()
    return out, v.grad, d.grad


OPS = {
    "sparse.mm": lambda T, s, d: T.sparse.mm(s, d),
    "mm": lambda T, s, d: T.mm(s, d),
    "matmul": lambda T, s, d: s @ d,
    "spmm": lambda T, s, d: T.spmm(s, d),
    "sparse.addmm": lambda T, s, d: T.sparse.addmm(T.ones(3, 4) * 0.25, s, d, beta=0.5,
                                                   alpha=2.0),
    "mm coalesced": lambda T, s, d: T.mm(s.coalesce(), d),
    "mv": lambda T, s, d: s @ d[:, 1],
    "dense @ sparse": lambda T, s, d: T.mm(d.t(), s),
    "to_dense": lambda T, s, d: s.to_dense() * d[:, :3],
    "sum": lambda T, s, d: s.sum() * d.sum(),
    "sparse.sum": lambda T, s, d: T.sparse.sum(s),
    "sparse.sum dim": lambda T, s, d: T.sparse.sum(s, 1),
    "sparse.sum dim 0": lambda T, s, d: T.sparse.sum(s, 0),
    "sparse.sum both dims": lambda T, s, d: T.sparse.sum(s, (0, 1)),
    "sum dim": lambda T, s, d: s.sum(1),
    "coalesce values": lambda T, s, d: s.coalesce().values() * d[0, :3],
    "sparse + sparse": lambda T, s, d: s + s.coalesce() * 3,
    "sparse + same pattern": lambda T, s, d: s + s,
    "sparse - sparse": lambda T, s, d: s - s.coalesce() * 0.5,
    "dense + sparse": lambda T, s, d: d[:, :3] + s,
    "sparse * scalar": lambda T, s, d: 2.5 * s,
    "sparse / scalar": lambda T, s, d: s / 4,
    "neg": lambda T, s, d: -s,
    "sparse * dense": lambda T, s, d: s * d[:, :3],
    "t": lambda T, s, d: T.mm(s.t(), d),
    "transpose": lambda T, s, d: T.mm(s.transpose(0, 1), d),
    "T": lambda T, s, d: T.mm(s.T, d),
    "permute": lambda T, s, d: s.permute(1, 0).to_dense(),
    "clone": lambda T, s, d: s.clone(),
    "double": lambda T, s, d: s.double(),
    "select": lambda T, s, d: s[1],
    "select dim 1": lambda T, s, d: s.select(1, 2),
    "to_sparse of dense": lambda T, s, d: T.mm(s, d).to_sparse(),
    "to_sparse(1) of dense": lambda T, s, d: T.mm(s, d).to_sparse(1),
}


@pytest.mark.parametrize("name", OPS)
def test_values_path_matches_torch(name):
    """Values, node names and the gradients of the values and of the dense operand."""
    _check(lambda T: _values_path(T, OPS[name]))


LEAF_OPS = {
    "sparse.mm": lambda T, s, d: T.sparse.mm(s, d),
    "sparse.addmm": lambda T, s, d: T.sparse.addmm(T.ones(3, 4), s, d, alpha=3.0),
    "mm (dense grad)": lambda T, s, d: T.mm(s, d),
    "to_dense": lambda T, s, d: s.to_dense() * d[:, :3],
    "sum": lambda T, s, d: T.sparse.sum(s),
    "sparse.sum dim": lambda T, s, d: T.sparse.sum(s, 1).to_dense() * d[:, 0],
    "coalesce": lambda T, s, d: s.coalesce().values() * d[0, :4],
    "mul": lambda T, s, d: (s * 2).to_dense(),
}


@pytest.mark.parametrize("name", LEAF_OPS)
def test_sparse_leaf_grad_matches_torch(name):
    """A sparse leaf that requires grad gets PyTorch's `.grad` (sparse, on its pattern, except
    through torch.mm, which gives a dense one), then accumulated over a second backward
    (compared coalesced: PyTorch's accumulation may keep duplicate entries)."""
    def prog(T):
        s, _ = _sparse(T, leaf=True)
        d = T.tensor(D, dtype=T.float32)
        grads = []
        for _ in range(2):
            out = LEAF_OPS[name](T, s, d)
            out = out.to_dense() if out.is_sparse else out
            out.pow(2).sum().backward()
            g = s.grad
            grads.append(_describe(g if not grads or not g.is_sparse else g.coalesce()))
        return tuple(grads)
    _check(prog)


def test_sparse_grad_repr_matches_torch():
    got, want = [], []
    for T, acc in ((torch, want), (fusegrad, got)):
        s, _ = _sparse(T, leaf=True)
        T.sparse.mm(s, T.ones(3, 2)).sum().backward()
        acc.append(_addresses(repr(s.grad)))
    assert got == want


def test_next_functions_match_torch():
    for T in LIBS:
        s, v = _sparse(T, vals_grad=True)
        (node, nr), = s.grad_fn.next_functions
        assert type(node).__name__ == "AccumulateGrad" and node.variable is v and nr == 0


def test_spmm_of_dense_inputs():
    """`spmm` accepts strided inputs (as mm)."""
    def prog(T):
        a = T.tensor([[0.0, 2.0, 0.0], [3.0, 0.0, 4.0]], requires_grad=True)
        out = T.spmm(a, T.ones(3, 2))
        out.sum().backward()
        return out, a.grad, T.sparse.mm(a.detach(), T.ones(3, 2))
    _check(prog)


def test_dense_fast_path_untouched():
    """Strided tensors keep their class and take no sparse path."""
    x = fusegrad.ones(2, 2)
    assert type(x + x) is fusegrad.Tensor and (x + x).layout is fusegrad.strided


def test_pickle_round_trip():
    import pickle

    s, _ = _sparse(fusegrad)
    back = pickle.loads(pickle.dumps(s))
    assert repr(back) == repr(s)


# ---------------------------------------------------------------- a graph network


def _gcn_data():
    rng = np.random.default_rng(0)
    n, f, h, c = 12, 5, 8, 3
    edges = rng.integers(0, n, size=(2, 30))
    edges = np.concatenate([edges, edges[::-1], np.tile(np.arange(n), (2, 1))], axis=1)
    a = np.zeros((n, n))
    a[edges[0], edges[1]] = 1.0
    deg = a.sum(1)
    norm = a / np.sqrt(deg[:, None] * deg[None, :])
    idx = np.array(np.nonzero(norm))
    return (idx, norm[tuple(idx)], n, rng.standard_normal((n, f)),
            rng.standard_normal((f, h)) * 0.3, rng.standard_normal((h, c)) * 0.3,
            rng.integers(0, c, size=n))


def _train_gcn(T, data, steps=20):
    idx, vals, n, x, w1, w2, y = data
    adj = T.sparse_coo_tensor(T.tensor(idx), T.tensor(vals, dtype=T.float32), (n, n))
    x = T.tensor(x, dtype=T.float32)
    w1 = T.nn.Parameter(T.tensor(w1, dtype=T.float32))
    w2 = T.nn.Parameter(T.tensor(w2, dtype=T.float32))
    y = T.tensor(y)
    opt = T.optim.Adam([w1, w2], lr=0.05)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        hidden = T.relu(T.sparse.mm(adj, x @ w1))
        logits = adj @ (hidden @ w2)
        loss = T.nn.functional.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses), w1.detach().numpy(), w2.detach().numpy()


def test_gcn_trains_as_torch():
    """A two-layer GCN (normalised adjacency as sparse COO @ features @ weight) trained for
    20 Adam steps gives PyTorch's losses and weights within float32 tolerance."""
    data = _gcn_data()
    want = _train_gcn(torch, data)
    got = _train_gcn(fusegrad, data)
    assert want[0][-1] < want[0][0]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- checkpoints


@pytest.mark.parametrize("writer", LIBS, ids=["torch", "fusegrad"])
def test_weights_only_checkpoint_round_trip(writer, tmp_path):
    """Sparse tensors in a checkpoint load with weights_only (the default) both ways:
    PyTorch's `_rebuild_sparse_tensor` form, coalesced flag kept."""
    path = str(tmp_path / "sparse.pt")
    s, _ = _sparse(writer)
    writer.save({"a": s, "b": s.coalesce(), "w": writer.ones(2)}, path)
    want = None
    for reader in LIBS:
        loaded = reader.load(path, weights_only=True)
        got = [_addresses(repr(loaded[k])) for k in ("a", "b", "w")]
        assert loaded["b"].is_coalesced() and not loaded["a"].is_coalesced()
        want = want or got
        assert got == want


def test_loaded_sparse_tensor_is_not_checked(tmp_path):
    """As PyTorch, a loaded sparse tensor's indices are not checked against its size."""
    path = str(tmp_path / "bad.pt")
    torch.save(torch.sparse_coo_tensor(torch.tensor([[0, 3]]), torch.tensor([1.0, 2.0]), (2,)),
               path)
    assert repr(fusegrad.load(path)) == repr(torch.load(path))


HYBRID = {
    "to_dense": lambda T, h: h.to_dense(),
    "coalesce values": lambda T, h: h.coalesce().values(),
    "sum": lambda T, h: h.sum(),
    "sparse.sum sparse dim": lambda T, h: T.sparse.sum(h, 0),
    "sparse.sum dense dim": lambda T, h: T.sparse.sum(h, 1),
    "sparse + sparse": lambda T, h: (h + h.coalesce()).to_dense(),
    "scale": lambda T, h: (h * 3).to_dense(),
}


@pytest.mark.parametrize("name", HYBRID)
def test_hybrid_sparse_dense_dims(name):
    """A tensor with a sparse and a dense dimension (values are rows): values and the
    gradient of the values."""
    def prog(T):
        v = T.tensor([[1.0, 2.0], [3.0, -4.0], [0.5, 6.0]], requires_grad=True)
        h = T.sparse_coo_tensor(T.tensor([[2, 0, 2]]), v, (3, 2))
        out = HYBRID[name](T, h)
        dense = out.to_dense() if out.is_sparse else out
        (dense * T.arange(float(dense.numel())).reshape(tuple(dense.shape))).sum().backward()
        return out, v.grad
    _check(prog)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compiled_function_of_sparse_gives_eager_values(backend):
    """A compiled function given a sparse tensor computes what eager computes."""
    s, _ = _sparse(fusegrad)
    d = fusegrad.tensor(D, dtype=fusegrad.float32)

    def f(s, d):
        return (fusegrad.sparse.mm(s, d) + 1).relu() + s @ d

    fusegrad._dynamo.reset()
    got = fusegrad.compile(f, backend=backend)(s, d)
    np.testing.assert_allclose(got.numpy(), f(s, d).numpy(), rtol=1e-6)
