"""Eager findings against PyTorch 2.13, round 4: `out=` on renorm and scatter (every
overload), and the second-order graphs of pooling and layer norm (PyTorch's backward ops:
`AvgPool2DBackwardBackward0`, `MaxPool2DWithIndicesBackwardBackward0`,
`NativeLayerNormBackwardBackward0`), their values to the third order."""

from __future__ import annotations

import os
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

LIBS = (torch, fusegrad)


def _outcome(fn):
    """("ok", value, warnings) or ("err", "Type: message", warnings) of `fn()`."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = fn()
        except Exception as e:  # noqa: BLE001 - the error itself is compared
            return ("err", f"{type(e).__name__}: {e}", [])
    texts = [str(w.message) for w in caught if "deprecated" not in str(w.message) or
             "resized" in str(w.message)]
    return ("ok", result, texts)


def _same(theirs, ours):
    assert ours[0] == theirs[0], (ours[1], theirs[1])
    if theirs[0] == "err":
        assert ours[1] == theirs[1]
        return
    t, o = theirs[1], ours[1]
    assert o.dtype.__str__().split(".")[-1] == t.dtype.__str__().split(".")[-1]
    assert tuple(o.shape) == tuple(t.shape)
    np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=1e-6, atol=1e-6)
    assert [w.split(" This")[0] for w in ours[2]] == [w.split(" This")[0] for w in theirs[2]]


# ---------------------------------------------------------------- out= on renorm, scatter


def _x(T, shape=(4, 5), seed=0, dtype="float32"):
    rng = np.random.default_rng(seed)
    return T.tensor(rng.uniform(-2, 2, shape).astype(dtype).tolist(),
                    dtype=getattr(T, dtype))


SCATTERS = {
    "src": lambda T, x, src: ((x, 0, T.tensor([[0, 1, 3, 2, 0], [2, 3, 0, 1, 1]]), src), {}),
    "value": lambda T, x, src: ((x, 1, T.tensor([[0, 4], [1, 1], [2, 0], [3, 3]])),
                                {"value": 0.5}),
    "value_positional": lambda T, x, src: ((x, 1, T.tensor([[0, 4], [2, 2]]), -1.5), {}),
    "src_add": lambda T, x, src: ((x, 0, T.tensor([[0, 1, 3, 2, 0], [0, 3, 0, 1, 1]]), src),
                                  {"reduce": "add"}),
    "src_multiply": lambda T, x, src: ((x, 1, T.tensor([[0, 4, 4], [1, 1, 0]]), src),
                                       {"reduce": "multiply"}),
    "value_add": lambda T, x, src: ((x, 1, T.tensor([[0, 4], [1, 1]])),
                                    {"value": 2.0, "reduce": "add"}),
    "value_multiply": lambda T, x, src: ((x, 0, T.tensor([[0, 1, 1, 2, 3]]), 3.0),
                                         {"reduce": "multiply"}),
}


def _scatter_call(T, kind, x=None, src=None):
    x = _x(T) if x is None else x
    src = _x(T, (2, 5), seed=1) if src is None else src
    args, kwargs = SCATTERS[kind](T, x, src)
    return lambda out: T.scatter(*args, **kwargs, out=out)


def _renorm_call(T, p=2, dim=0, maxnorm=1.5, x=None):
    x = _x(T) if x is None else x
    return lambda out: T.renorm(x, p, dim, maxnorm, out=out)


CALLS = {**{f"scatter_{k}": (lambda T, k=k: _scatter_call(T, k)) for k in SCATTERS},
         "renorm_p2": lambda T: _renorm_call(T),
         "renorm_p1_dim1": lambda T: _renorm_call(T, 1, 1, 0.7),
         "renorm_inf": lambda T: _renorm_call(T, float("inf"), -1, 1.0)}


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("shape", [(4, 5), (0,), (3,), (2, 2, 5)],
                         ids=["same", "empty", "wrong", "wrong_rank"])
def test_out_values_and_resize(name, shape):
    """The result written into `out` (resized, with PyTorch's warning where it had
    elements); `out` itself returned."""
    results = []
    for T in LIBS:
        out = T.full(shape, 7.0)
        got = _outcome(lambda T=T, out=out: CALLS[name](T)(out))
        if got[0] == "ok":
            assert got[1] is out
        results.append(got)
    _same(*results)


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("dtype", ["float64", "float16", "int64", "complex64", "bool"])
def test_out_dtype_must_match_exactly(name, dtype):
    """Both kernels want `out` of the result's dtype exactly: PyTorch's message otherwise
    (even where a cast would be safe)."""
    _same(*[_outcome(lambda T=T: CALLS[name](T)(T.zeros(4, 5, dtype=getattr(T, dtype))))
            for T in LIBS])


def _overlap_cases(T):
    """(name, call) pairs that write into memory an input shares."""
    def base():
        return T.arange(24.0).reshape(6, 4) / 7

    idx = T.tensor([[0, 1, 0, 1]])
    return {
        "renorm_itself": lambda: (lambda y: T.renorm(y, 2, 0, 3.0, out=y))(base()),
        "renorm_partial": lambda: (lambda y: T.renorm(y[:3], 2, 0, 3.0, out=y[1:4]))(base()),
        "renorm_partial_after_resize": lambda: (
            lambda y: T.renorm(y[:2], 2, 0, 3.0, out=y[1:2]))(base()),
        "renorm_disjoint": lambda: (lambda y: T.renorm(y[:3], 2, 0, 3.0, out=y[3:]))(base()),
        "scatter_itself": lambda: (lambda y: T.scatter(y, 0, idx, 1.5, out=y))(base()),
        "scatter_partial": lambda: (lambda y: T.scatter(y[:2], 0, idx, 1.5, out=y[1:3]))(
            base()),
        "scatter_src_is_out": lambda: (lambda y: T.scatter(y[:2], 0, idx, y[2:4],
                                                           out=y[2:4]))(base()),
        "scatter_src_partial": lambda: (lambda y: T.scatter(y[:2], 0, idx, y[2:3],
                                                            out=y[2:4]))(base()),
        "scatter_reduce_src_partial": lambda: (lambda y: T.scatter(
            y[:2], 0, idx, y[2:3], reduce="add", out=y[1:3]))(base()),
        "scatter_disjoint": lambda: (lambda y: T.scatter(y[:2], 0, idx, y[2:3],
                                                         out=y[4:]))(base()),
        "scatter_index_is_out": lambda: (lambda i: T.scatter(
            T.zeros(1, 4, dtype=T.long), 0, i, T.ones(1, 4, dtype=T.long), out=i))(
            T.zeros(1, 4, dtype=T.long)),
    }


@pytest.mark.parametrize("case", sorted(_overlap_cases(torch)))
def test_out_overlapping_an_input(case):
    """renorm refuses an `out` partly overlapping its input (itself is fine); scatter a
    partial overlap with `self` and any with `src` or `index`."""
    _same(*[_outcome(_overlap_cases(T)[case]) for T in LIBS])


@pytest.mark.parametrize("name", [n for n in sorted(CALLS) if "add" not in n and
                                  "multiply" not in n])
@pytest.mark.parametrize("which", ["input", "out"])
def test_out_refuses_autograd(name, which):
    """In grad mode an input or an `out` requiring grad is PyTorch's error naming the op;
    under no_grad the call writes."""
    def run(T, grad_mode):
        x = _x(T).requires_grad_(which == "input")
        out = T.zeros(4, 5).requires_grad_(which == "out")
        call = _scatter_call(T, name[8:], x=x) if name.startswith("scatter") else \
            _renorm_call(T, x=x) if name == "renorm_p2" else \
            _renorm_call(T, 1, 1, 0.7, x=x) if name == "renorm_p1_dim1" else \
            _renorm_call(T, float("inf"), -1, 1.0, x=x)
        with T.set_grad_enabled(grad_mode):
            return _outcome(lambda: call(out))

    _same(run(torch, True), run(fusegrad, True))
    _same(run(torch, False), run(fusegrad, False))


def test_scatter_reduce_checks_its_reduction_first():
    """An unknown reduction is scatter's own error, out= or not."""
    for kwargs in ({"value": 1.0}, {"src": None}):
        res = []
        for T in LIBS:
            x = _x(T)
            kw = {k: (x if v is None else v) for k, v in kwargs.items()}
            res.append(_outcome(lambda T=T, x=x, kw=kw: T.scatter(
                x, 0, T.tensor([[0, 1]]), **kw, reduce="sum", out=T.zeros(4, 5))))
        _same(*res)


# ---------------------------------------------------------------- second-order graphs


def _pool_fn(T, kind):
    F = T.nn.functional
    return {
        "avg": lambda x: F.avg_pool2d(x, 2),
        "avg_pad_ceil": lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True,
                                               count_include_pad=False),
        "avg_divisor": lambda x: F.avg_pool2d(x, (2, 3), (1, 2), divisor_override=4),
        "avg_unbatched": lambda x: F.avg_pool2d(x[0], 3, 1, 1),
        "avg_module": lambda x: T.nn.AvgPool2d(2, ceil_mode=True)(x),
        "max": lambda x: F.max_pool2d(x, 2),
        "max_pad_stride": lambda x: F.max_pool2d(x, 3, 2, 1),
        "max_dilated_ceil": lambda x: F.max_pool2d(x, 2, 1, dilation=2, ceil_mode=True),
        "max_indices": lambda x: F.max_pool2d(x, 3, 1, 1, return_indices=True)[0],
        "max_unbatched": lambda x: F.max_pool2d(x[1], (2, 3), (2, 1)),
        "max_module": lambda x: T.nn.MaxPool2d(2, 2)(x),
        "max_channels_last": lambda x: F.max_pool2d(
            x.contiguous(memory_format=T.channels_last), 2),
        "avg_channels_last": lambda x: F.avg_pool2d(
            x.contiguous(memory_format=T.channels_last), 2),
    }[kind]


def _layer_norm_fn(T, kind):
    F = T.nn.functional
    rng = np.random.default_rng(5)
    w = T.tensor(rng.standard_normal(6) + 1, requires_grad=True)
    b = T.tensor(rng.standard_normal(6), requires_grad=True)
    w2 = T.tensor(rng.standard_normal((7, 6)) + 1, requires_grad=True)
    return {
        "ln_affine": (lambda x: F.layer_norm(x, (6,), w, b), [w, b]),
        "ln_weight_only": (lambda x: F.layer_norm(x, (6,), w, None), [w]),
        "ln_plain": (lambda x: F.layer_norm(x, (6,)), []),
        "ln_two_dims": (lambda x: F.layer_norm(x, (7, 6), w2, None, 1e-3), [w2]),
        "ln_module": (lambda x: T.nn.LayerNorm(6, dtype=T.float64)(x), []),
    }[kind]


def _graph(T, kind, order: int):
    """Names of the gradients' nodes (taken with create_graph) and the gradients of the
    first `order` orders, for a fixed input and fixed random weightings."""
    rng = np.random.default_rng(0)
    x = T.tensor(rng.standard_normal((2, 7, 7, 6)), requires_grad=True)
    if kind.startswith("ln"):
        fn, params = _layer_norm_fn(T, kind)
    else:
        fn, params = _pool_fn(T, kind), []
    ins = [x] + params
    y = fn(x)
    c = T.tensor(rng.standard_normal(tuple(y.shape)))
    loss = (y * y * c).sum()
    grads = T.autograd.grad(loss, ins, create_graph=True)
    names = [g.grad_fn.name() if g.grad_fn is not None else None for g in grads]
    flags = [g.requires_grad for g in grads]
    values = [g.detach().numpy().copy() for g in grads]
    level = grads
    for k in range(1, order):
        s = sum((g * T.tensor(rng.standard_normal(tuple(g.shape)))).sum()
                for g in level if g is not None)
        level = T.autograd.grad(s, ins, create_graph=k + 1 < order, allow_unused=True)
        values += [None if g is None else g.detach().numpy().copy() for g in level]
    return names, flags, values


POOLS = ["avg", "avg_pad_ceil", "avg_divisor", "avg_unbatched", "avg_module", "max",
         "max_pad_stride", "max_dilated_ceil", "max_indices", "max_unbatched", "max_module",
         "max_channels_last", "avg_channels_last"]
LAYER_NORMS = ["ln_affine", "ln_weight_only", "ln_plain", "ln_two_dims", "ln_module"]


@pytest.mark.parametrize("kind", POOLS + LAYER_NORMS)
def test_second_order_nodes_and_values(kind):
    """The gradient taken with create_graph ends in PyTorch's backward op's node; its own
    gradient (second order) and, for layer norm, the third order equal PyTorch's."""
    order = 3 if kind.startswith("ln") else 2
    theirs = _graph(torch, kind, order)
    ours = _graph(fusegrad, kind, order)
    assert ours[0] == theirs[0]
    assert ours[1] == theirs[1]
    assert len(ours[2]) == len(theirs[2])
    for o, t in zip(ours[2], theirs[2]):
        assert (o is None) == (t is None)
        if t is not None:
            np.testing.assert_allclose(o, t, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kind", ["avg", "max", "max_indices"])
def test_pool_gradient_of_a_constant_cotangent_requires_grad(kind):
    """A pooling gradient taken with create_graph requires grad even where the cotangent
    does not (its node connects to the input, whose second derivative is zero)."""
    res = []
    for T in LIBS:
        x = T.ones(1, 2, 4, 4, requires_grad=True)
        g, = T.autograd.grad(_pool_fn(T, kind)(x).sum(), x, create_graph=True)
        again = T.autograd.grad(g.sum(), x, allow_unused=True)[0]
        res.append((g.requires_grad, g.grad_fn.name(), g.detach().numpy().tolist(),
                    None if again is None else again.numpy().tolist()))
    assert res[0] == res[1]


def _first_order(T, kind, create_graph):
    rng = np.random.default_rng(3)
    x = T.tensor(rng.standard_normal((2, 7, 7, 6)).astype(np.float32), requires_grad=True)
    fn = _pool_fn(T, kind) if not kind.startswith("ln") else \
        (lambda t: T.nn.functional.layer_norm(t, (6,)))
    y = fn(x)
    g, = T.autograd.grad((y * y * y).sum(), x, create_graph=create_graph)
    return g.detach().numpy()


@pytest.mark.parametrize("kind", ["avg", "avg_pad_ceil", "max", "max_dilated_ceil"])
def test_pool_first_order_gradients_unchanged_by_create_graph(kind):
    """A pooling gradient taken with create_graph has the bits of one taken without."""
    np.testing.assert_array_equal(_first_order(fusegrad, kind, True),
                                  _first_order(fusegrad, kind, False))


def test_layer_norm_first_order_gradient_with_create_graph_is_torchs():
    """Layer norm's backward op (computed from the forward's float32 statistics) gives
    PyTorch's float32 gradient within float32's rounding, as the first-order kernel does."""
    theirs = _first_order(torch, "ln", False)
    scale = np.abs(theirs).max()
    for create_graph in (False, True):
        np.testing.assert_allclose(_first_order(fusegrad, "ln", create_graph), theirs,
                                   rtol=0, atol=2e-6 * scale)
