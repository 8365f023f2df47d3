"""Leftovers of the eager core, checked against PyTorch 2.13 in each test: the order in which
leaves' hooks run when several leaves become ready together (the engine's ready heap breaks
their ties as PyTorch's does), and fake tensors refusing `allclose`, `equal` and `numpy`."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode as TorchFakeMode

import fusegrad as fg
from fusegrad._subclasses.fake_tensor import FakeTensorMode as FgFakeMode

# ------------------------------------------------------------ hook order among tied leaves


def _leaves(lib, n: int, log: list, post=()):
    """`n` leaves named a, b, ...; each logs its tensor hook (and, for those in `post`, its
    post-accumulate hook) when it runs."""
    out = []
    for i in range(n):
        x = lib.tensor([1.0 + i, 2.0], requires_grad=True)
        name = "abcdefghij"[i]
        x.register_hook(lambda g, n=name: log.append(n))
        if name in post:
            x.register_post_accumulate_grad_hook(lambda p, n=name: log.append(n + "*"))
        out.append(x)
    return out


def _sum_of_products(lib, n):
    log = []
    xs = _leaves(lib, n, log, post="bd")
    y = xs[0] * xs[1]
    for k in range(2, n - 1, 2):
        y = y + xs[k] * xs[k + 1]
    y.sum().backward()
    return log


def _stacked(lib, n):
    log = []
    xs = _leaves(lib, n, log, post="ac")
    lib.stack(xs).sum().backward()  # one node makes every leaf ready at once
    return log


def _shared(lib, n):
    log = []
    xs = _leaves(lib, n, log)
    h = xs[0] * xs[1]
    h.register_hook(lambda g: log.append("h"))
    (lib.stack(xs[2:]).sum(0) * h + h * xs[1]).sum().backward()
    return log


def _several_roots(lib, n):
    log = []
    xs = _leaves(lib, n, log, post="e")
    lib.autograd.backward([(xs[0] * xs[1]).sum(), lib.stack(xs).sum(), xs[2].sum()])
    return log


@pytest.mark.parametrize("n", [4, 5, 6])
@pytest.mark.parametrize("graph", [_sum_of_products, _stacked, _shared, _several_roots])
def test_tied_leaves_hook_order(graph, n):
    assert graph(fg, n) == graph(torch, n)


def _random_graph(lib, seed: int, mode: str):
    """A random graph over 4-8 leaves (products, sums, stacks, unbinds), some intermediate
    hooks; backward of one or several roots, or grad of some leaves."""
    rnd = random.Random(seed)
    log = []
    n = rnd.randint(4, 8)
    xs = _leaves(lib, n, log, post=rnd.sample("abcdefgh", 3))
    pool = list(xs)
    for k in range(rnd.randint(2, 10)):
        kind = rnd.randrange(4)
        if kind == 0:
            y = rnd.choice(pool) * rnd.choice(pool)
        elif kind == 1:
            y = lib.stack(rnd.sample(pool, min(len(pool), rnd.randint(2, 4)))).sum(0)
        elif kind == 2:
            u = lib.stack([rnd.choice(pool) for _ in range(3)]).unbind(0)
            y = u[rnd.randrange(3)] * u[rnd.randrange(3)]
        else:
            y = rnd.choice(pool) * rnd.choice(pool) + rnd.choice(pool)
        if rnd.random() < 0.3:
            y.register_hook(lambda g, k=k: log.append(f"t{k}"))
        pool.append(y)
    outs = rnd.sample(pool[n:], min(3, len(pool) - n))
    if mode == "several":
        lib.autograd.backward([o.sum() for o in outs])
    elif mode == "grad":
        lib.autograd.grad(sum(o.sum() for o in outs), rnd.sample(xs, rnd.randint(1, n)),
                          allow_unused=True)
    else:
        sum(o.sum() for o in outs).backward()
    return log


@pytest.mark.parametrize("mode", ["one", "several", "grad"])
def test_random_graphs_hook_order(mode):
    for seed in range(60):
        assert _random_graph(fg, seed, mode) == _random_graph(torch, seed, mode), seed


def test_layers_parameter_hook_order():
    def run(lib):
        nn = lib.nn
        lib.manual_seed(0)
        m = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.ReLU(), nn.Linear(4, 4),
                          nn.LayerNorm(4), nn.Linear(4, 2))
        log = []
        for name, p in m.named_parameters():
            p.register_hook(lambda g, n=name: log.append(n))
            p.register_post_accumulate_grad_hook(lambda p, n=name: log.append(n + "*"))
        x = lib.randn(2, 3, requires_grad=True)
        x.register_hook(lambda g: log.append("x"))
        m(x).pow(2).sum().backward()
        return log

    assert run(fg) == run(torch)


def test_tied_leaves_gradients_and_handoff():
    # The chain after the leaves still passes gradients on: values as torch's.
    def run(lib):
        xs = [lib.tensor([0.5 * i + 1.0, -1.0], requires_grad=True) for i in range(5)]
        y = lib.stack(xs).prod(0).exp().sum() + (xs[0] * xs[4]).sum()
        y.backward()
        return [x.grad.tolist() for x in xs]

    got, want = run(fg), run(torch)
    for g, w in zip(got, want):
        assert g == pytest.approx(w, rel=1e-6)


# ------------------------------------------------------------ fake tensors


def _fake_outcome(lib, mode_cls, what):
    with mode_cls():
        a, b = lib.ones(3), lib.ones(4 if what == "equal_shapes" else 3)
    fns = {"allclose": lambda: lib.allclose(a, b), "equal": lambda: lib.equal(a, b),
           "equal_shapes": lambda: lib.equal(a, b), "method": lambda: a.allclose(b),
           "numpy": lambda: a.numpy(), "item": lambda: a.sum().item()}
    try:
        fns[what]()
    except RuntimeError as e:
        return type(e).__name__ if type(e).__name__ != "DataDependentOutputError" else \
            "RuntimeError", str(e), str(getattr(e, "func", ""))
    raise AssertionError("no error")


@pytest.mark.parametrize("what", ["allclose", "equal", "equal_shapes", "method", "numpy",
                                  "item"])
def test_fake_reads_refused_as_torch(what):
    assert _fake_outcome(fg, FgFakeMode, what) == _fake_outcome(torch, TorchFakeMode, what)


# ------------------------------------------------------------ sparse CSR matrices


def _csr_layout(lib):
    # (`torch.sparse_csr` itself: the layout object, wherever the namespace puts it)
    return lib.tensor([[1.0]]).to_sparse_csr().layout


_DENSE = [[0.0, 2.0, 0.0], [1.0, 0.0, 3.0], [0.0, 0.0, 0.0]]


def _csr_outcome(lib, what):
    d = lib.tensor(_DENSE)
    c = d.to_sparse_csr()
    cases = {
        "repr": lambda: repr(c),
        "repr_int": lambda: repr(lib.tensor([[1, 0], [0, 2]]).to_sparse_csr()),
        "repr_empty": lambda: repr(lib.zeros(2, 2, dtype=lib.float64).to_sparse_csr()),
        "parts": lambda: (c.crow_indices().tolist(), c.col_indices().tolist(),
                          c.values().tolist(), c._nnz(), str(c.layout), c.is_sparse,
                          c.is_sparse_csr, tuple(c.shape), str(c.dtype)),
        "to_dense": lambda: c.to_dense().tolist(),
        "to_coo": lambda: repr(c.to_sparse()),
        "from_coo": lambda: repr(d.to_sparse().to_sparse_csr()),
        "layout_arg": lambda: repr(d.to_sparse(layout=_csr_layout(lib))),
        "idempotent": lambda: (c.to_sparse_csr() is c,
                               c.to_sparse(layout=_csr_layout(lib)) is c),
        "mm": lambda: (c @ lib.ones(3, 2)).tolist() + lib.mm(c, lib.ones(3, 2)).tolist(),
        "rmm": lambda: (lib.arange(6.0).reshape(2, 3) @ c).tolist(),
        "one_d": lambda: lib.ones(3).to_sparse_csr(),
        "indices": lambda: c.indices(),
        "dense_crow": lambda: lib.ones(2, 2).crow_indices(),
        "coo_col": lambda: d.to_sparse().col_indices(),
        "numpy": lambda: c.numpy(),
        "stride": lambda: c.stride(),
        "storage": lambda: c.untyped_storage(),
        "item": lambda: c.item(),
    }
    try:
        return cases[what]()
    except Exception as e:  # noqa: BLE001  (compared against torch's)
        return type(e).__name__, str(e)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize("what", ["repr", "repr_int", "repr_empty", "parts", "to_dense",
                                  "to_coo", "from_coo", "layout_arg", "idempotent", "mm",
                                  "rmm", "one_d", "indices", "dense_crow", "coo_col", "numpy",
                                  "stride", "storage", "item"])
def test_csr_as_torch(what):
    assert _csr_outcome(fg, what) == _csr_outcome(torch, what)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_csr_mm_gradient_of_dense_operand():
    def run(lib):
        c = lib.tensor(_DENSE).to_sparse_csr()
        w = lib.arange(6.0).reshape(3, 2).requires_grad_()
        v = lib.arange(6.0).reshape(2, 3).requires_grad_()
        y = c @ w
        z = v @ c
        ((y * y).sum() + (z * z).sum()).backward()
        return type(y.grad_fn).__name__, type(z.grad_fn).__name__, w.grad.tolist(), \
            v.grad.tolist()

    assert run(fg) == run(torch)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_csr_refuses_a_tensor_requiring_grad():
    # A documented difference: PyTorch records ToSparseCsrBackward0; fusegrad raises rather
    # than drop the gradient, and converts once detached (or under no_grad).
    x = fg.ones(2, 2, requires_grad=True)
    with pytest.raises(NotImplementedError, match="requires grad"):
        x.to_sparse_csr()
    with fg.no_grad():
        assert x.to_sparse_csr().to_dense().tolist() == [[1.0, 1.0], [1.0, 1.0]]


# ------------------------------------------------------------ sparse softmax


def _coo(lib, hybrid=False):
    i = lib.tensor([[0, 0, 1, 1, 2, 0], [0, 2, 0, 1, 2, 0]])  # (0, 0) twice: uncoalesced
    s = lib.sparse_coo_tensor(i, lib.tensor([1.0, 2.0, 3.0, 4.0, 5.0, -0.5]), (3, 3))
    return s.to_dense().to_sparse(1) if hybrid else s


@pytest.mark.filterwarnings("ignore:Sparse invariant checks")
@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("hybrid", [False, True])
def test_sparse_softmax_as_torch(fn, dim, hybrid):
    def run(lib, dim):
        s = _coo(lib, hybrid).coalesce().requires_grad_()
        y = getattr(lib.sparse, fn)(s, dim)
        w = lib.arange(9.0).reshape(3, 3)
        (y.to_dense() * w).sum().backward()
        return (type(y.grad_fn).__name__, y._indices().tolist(), y.to_dense().detach(),
                s.grad.to_dense())

    got = run(fg, dim)
    want = run(torch, dim)
    # PyTorch's gradient for a negative dim is not that of its output (the wrapped dim's
    # is): fusegrad's is, so that is the oracle there.
    want_grad = run(torch, dim % 2)[3]
    assert got[:2] == want[:2]
    np.testing.assert_allclose(got[2].numpy(), want[2].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[3].numpy(), want_grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.filterwarnings("ignore:Sparse invariant checks")
def test_sparse_softmax_uncoalesced_dtype_and_errors():
    def run(lib):
        y = lib.sparse.softmax(_coo(lib), 1, dtype=lib.float64)
        out = [str(y.dtype), y._indices().tolist(), y._values().tolist()]
        for f in (lambda: lib.sparse.softmax(_coo(lib), 2),):
            try:
                f()
            except Exception as e:  # noqa: BLE001  (compared against torch's)
                out.append((type(e).__name__, str(e)))
        return out

    got, want = run(fg), run(torch)
    assert got[:2] == want[:2] and got[3:] == want[3:]
    assert got[2] == pytest.approx(want[2], rel=1e-12)
