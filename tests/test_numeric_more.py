"""gradient, histogramdd, binomial, vmap and DLPack exchange against PyTorch."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

RNG = np.random.default_rng(29)


@pytest.mark.parametrize("kwargs", [{}, {"spacing": 2.0}, {"spacing": [2.0, 0.5], "dim": [0, 1]},
                                    {"dim": 1, "edge_order": 2}, {"edge_order": 2},
                                    {"spacing": "coords", "dim": 1},
                                    {"spacing": "coords", "dim": 1, "edge_order": 2}])
def test_gradient(kwargs):
    x = RNG.standard_normal((4, 5))
    coords = np.array([0.0, 0.5, 1.7, 2.0, 3.5])
    results = []
    for lib in (torch, fusegrad):
        kw = dict(kwargs)
        if kw.get("spacing") == "coords":
            kw["spacing"] = (lib.tensor(coords),)
        leaf = lib.tensor(x, requires_grad=True)
        outs = lib.gradient(leaf, **kw)
        sum((o * (k + 1.5)).sum() for k, o in enumerate(outs)).backward()
        results.append(([o.detach().numpy() for o in outs], leaf.grad.numpy()))
    assert len(results[0][0]) == len(results[1][0])
    for w, g in zip(results[0][0] + [results[0][1]], results[1][0] + [results[1][1]]):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-10)
    for lib in (torch, fusegrad):
        with pytest.raises(RuntimeError, match="expected each dimension size to be at least "
                           "edge_order\\+1"):
            lib.gradient(lib.ones(2), edge_order=2)


@pytest.mark.parametrize("kwargs", [{"bins": [3, 4]}, {"bins": 5, "density": True},
                                    {"bins": [2, 3], "range": [-1.0, 1.0, -2.0, 2.0]},
                                    {"bins": [3, 3], "weight": "w"}])
def test_histogramdd(kwargs):
    x = RNG.standard_normal((40, 2))
    w = RNG.uniform(0, 2, 40)
    results = []
    for lib in (torch, fusegrad):
        kw = dict(kwargs)
        if kw.get("weight") == "w":
            kw["weight"] = lib.tensor(w)
        h = lib.histogramdd(lib.tensor(x), **kw)
        results.append((type(h).__name__, h.hist.numpy(), [e.numpy() for e in h.bin_edges],
                        str(h.hist.dtype).split(".")[-1]))
    assert results[0][0] == results[1][0] and results[0][3] == results[1][3]
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-10)
    for w_, g in zip(results[0][2], results[1][2]):
        np.testing.assert_allclose(g, w_, rtol=1e-12)


def test_binomial_statistics():
    count = fusegrad.full((20000,), 12.0)
    prob = fusegrad.full((20000,), 0.25)
    draws = fusegrad.binomial(count, prob)
    assert draws.dtype == fusegrad.float32
    assert torch.binomial(torch.ones(1), torch.ones(1) / 2).dtype == torch.float32
    values = draws.numpy()
    assert values.min() >= 0 and values.max() <= 12 and np.all(values == np.round(values))
    assert abs(values.mean() - 3.0) < 0.1 and abs(values.var() - 2.25) < 0.15
    edge = fusegrad.binomial(fusegrad.tensor([5.0, 7.0]), fusegrad.tensor([0.0, 1.0]))
    assert edge.tolist() == torch.binomial(torch.tensor([5.0, 7.0]),
                                           torch.tensor([0.0, 1.0])).tolist()


def test_vmap():
    a = RNG.standard_normal((3, 2))
    b = RNG.standard_normal(2)
    results = []
    for lib in (torch, fusegrad):
        x = lib.tensor(a, requires_grad=True)
        f = lib.vmap(lambda u, v: (u * v).sum(), in_dims=(0, None))
        out = f(x, lib.tensor(b))
        pair = lib.vmap(lambda u: (u * 2, u.sum()), out_dims=(1, 0))(x)
        (out.sum() + pair[0].sum() + pair[1].sum()).backward()
        inner = lib.vmap(lib.vmap(lambda u: u * u))(x)
        t_in = lib.vmap(lambda u: u.max(), in_dims=1)(x)
        results.append([out, pair[0], pair[1], inner, t_in, x.grad])
    for w, g in zip(*results):
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-12)


def test_dlpack():
    arr = np.arange(6.0).reshape(2, 3)
    t = fusegrad.from_dlpack(arr)
    assert t.tolist() == torch.from_dlpack(arr).tolist() and t.dtype == fusegrad.float64
    t[0, 0] = 9.0
    assert arr[0, 0] == 9.0  # shared memory
    back = fusegrad.from_dlpack(fusegrad.to_dlpack(fusegrad.tensor([1, 2, 3])))
    assert back.tolist() == [1, 2, 3] and back.dtype == fusegrad.int64
    from_torch = fusegrad.from_dlpack(torch.to_dlpack(torch.tensor([1.5, 2.5])))
    assert from_torch.tolist() == [1.5, 2.5]
    to_torch = torch.from_dlpack(fusegrad.to_dlpack(fusegrad.tensor([4.0, 5.0])))
    assert to_torch.tolist() == [4.0, 5.0]


@pytest.mark.parametrize("fn", ["svd_lowrank", "pca_lowrank"])
def test_low_rank(fn):
    """On an exactly rank-3 matrix PyTorch's randomized result is exact too: the same
    singular values, subspaces and reconstruction."""
    base = RNG.standard_normal((8, 3)) @ RNG.standard_normal((3, 6))
    results = []
    for lib in (torch, fusegrad):
        torch.manual_seed(0)
        u, s, v = getattr(lib, fn)(lib.tensor(base), q=3)
        results.append((u.numpy(), s.numpy(), v.numpy()))
    (tu, ts, tv), (fu, fs, fv) = results
    assert fu.shape == tu.shape and fs.shape == ts.shape and fv.shape == tv.shape
    np.testing.assert_allclose(fs, ts, rtol=1e-8)
    np.testing.assert_allclose((fu * fs) @ fv.T, (tu * ts) @ tv.T, atol=1e-8)
    np.testing.assert_allclose(np.abs(fu.T @ tu), np.eye(3), atol=1e-8)  # same vectors
    for lib in (torch, fusegrad):
        with pytest.raises(ValueError, match=r"q\(=5\) must be non-negative integer and not "
                           r"greater than min\(m, n\)=3"):
            lib.pca_lowrank(lib.ones(3, 4), q=5)


def test_fork_wait_classproperty_file_path():
    for lib in (torch, fusegrad):
        fut = lib.jit.fork(lambda a, b=1: a + b, lib.ones(2), b=2) if lib is torch else \
            lib.fork(lambda a, b=1: a + b, lib.ones(2), b=2)
        assert fut.done() and lib.wait(fut).tolist() == [3.0, 3.0]

        class K:
            scale = 3

            @lib.classproperty
            def doubled(cls):
                return cls.scale * 2

        assert K.doubled == 6 and K().doubled == 6
    assert fusegrad.get_file_path("fusegrad", "nn") == \
        os.path.join(os.path.dirname(os.path.dirname(fusegrad.__file__)), "fusegrad", "nn")
    assert torch.get_file_path("torch", "nn") == \
        os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "torch", "nn")


@pytest.mark.parametrize("dtype", ["uint8", "int32", "float16", "float32", "float64",
                                   "complex64"])
def test_trace_as_pytorch(dtype):
    # One op with PyTorch's node (TraceBackward0), result dtype, value and gradient.
    x = (RNG.standard_normal((4, 3)) * 4).astype(dtype if dtype != "uint8" else "int8")
    got = []
    for lib in (torch, fusegrad):
        t = lib.tensor(np.abs(x) if dtype == "uint8" else x).to(getattr(lib, dtype))
        if t.dtype.is_floating_point:
            t.requires_grad_()
        y = lib.trace(t)
        entry = [str(y.dtype).split(".")[-1], y.detach().numpy(),
                 None if y.grad_fn is None else type(y.grad_fn).__name__]
        if t.requires_grad:
            y.backward()
            entry.append(t.grad.numpy())
        got.append(entry)
    (a, *ra), (b, *rb) = got
    assert a == b and ra[1:2] == rb[1:2]
    for u, v in zip(ra[:1] + ra[2:], rb[:1] + rb[2:]):
        np.testing.assert_allclose(v, u, rtol=1e-3 if dtype == "float16" else 1e-6)
    for bad in (lambda lib: lib.trace(lib.ones(3)), lambda lib: lib.trace(lib.ones(2, 2, 2)),
                lambda lib: lib.trace(lib.ones(2, 2, dtype=lib.bool))):
        errors = []
        for lib in (torch, fusegrad):
            with pytest.raises(Exception) as e:
                bad(lib)
            errors.append((type(e.value).__name__, str(e.value)))
        assert errors[0] == errors[1]
