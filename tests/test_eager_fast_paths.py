"""The eager fast paths give what PyTorch gives: mm on small contiguous operands, relu's
zero, and the backward engine's order when it hands a node on without its heap."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad

SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 2.5, np.inf, -np.inf, np.nan])


def _pair(a: np.ndarray):
    return fusegrad.from_numpy(a.copy()), torch.from_numpy(a.copy())


def _same_bits(got, want) -> None:
    got, want = got.detach().numpy(), want.detach().numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = ~np.isnan(want)
    np.testing.assert_array_equal(got[finite], want[finite])
    np.testing.assert_array_equal(np.signbit(got[finite]), np.signbit(want[finite]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", [((1, 1), (1, 1)), ((1, 1), (1, 3)), ((3, 1), (1, 1)),
                                    ((1, 1), (1, 1))])
def test_mm_one_by_one_signed_zero(dtype, shapes):
    # A 1x1 operand: a product of zero and a negative number is +0, as PyTorch's GEMM gives.
    (sa, sb) = shapes
    a = np.full(sa, 0.0, dtype)
    b = np.full(sb, -1.5, dtype)
    fa, ta = _pair(a)
    fb, tb = _pair(b)
    _same_bits(fa @ fb, ta @ tb)
    _same_bits(fusegrad.mm(fb.T if sb[0] == 1 and sb[1] == 1 else fa, fb), torch.mm(
        tb.T if sb[0] == 1 and sb[1] == 1 else ta, tb))


@pytest.mark.parametrize("layout", ["cc", "cf", "fc", "ff", "strided"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mm_layouts_match_torch(layout, dtype):
    rng = np.random.default_rng(len(layout) + (dtype == np.float64))
    for n, k, m in [(4, 4, 4), (2, 3, 5), (1, 4, 3), (3, 4, 1), (5, 1, 2), (2, 2, 2),
                    (0, 3, 2), (3, 0, 2)]:
        a = rng.standard_normal((n, 2 * k)).astype(dtype)
        b = rng.standard_normal((k, m)).astype(dtype)
        a = a[:, ::2] if layout == "strided" else np.ascontiguousarray(a[:, :k])
        if layout[0] == "f":
            a = np.asfortranarray(a)
        if layout[1:] == "f":
            b = np.asfortranarray(b)
        fa, fb = fusegrad.from_numpy(a), fusegrad.from_numpy(b)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        got, want = fa @ fb, ta @ tb
        assert tuple(got.shape) == tuple(want.shape) and got.stride() == want.stride()
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
def test_relu_values_and_dtype(dtype):
    if np.dtype(dtype).kind == "f":  # (-0.0 keeps its sign, as in PyTorch)
        a = np.array([0.0, 1.0, -1.0, 2.5, np.inf, -np.inf, np.nan, -0.0, 4.0, 0.5], dtype)
    else:
        a = np.array([-3, 0, 4, -1, 7, 2, -8, 0, 1, 5], dtype)
    for x in (a, a.reshape(2, -1)[:, ::2], a[3]):
        fx, tx = _pair(np.asarray(x))
        got, want = fusegrad.relu(fx), torch.relu(tx)
        _same_bits(got, want)
        assert got.dtype == fusegrad.from_numpy(np.asarray(x)).dtype
        assert tuple(got.shape) == tuple(want.shape)


def test_relu_bool_error():
    with pytest.raises(RuntimeError, match="Boolean inputs not supported for relu"):
        fusegrad.relu(fusegrad.tensor([True, False]))
    with pytest.raises(RuntimeError, match="Boolean inputs not supported for relu"):
        torch.relu(torch.tensor([True, False]))


def _run_order(lib):
    """The order in which backward runs the nodes of a graph where a node makes two nodes
    ready at once, the later-made one second in its edges (so the engine must not run the
    first one next), and a chain follows."""
    x = lib.tensor([0.25, -0.5], requires_grad=True)
    order = []
    a = x * 2
    b = x * 3
    c = (x * 0.5).exp()
    names = {}
    for name, t in (("a", a), ("b", b), ("c", c)):
        names[name] = t.grad_fn
        t.grad_fn.register_prehook(lambda g, name=name: order.append(name))
    s = (a + b) * c  # AddBackward's edges: a's node, then b's (made later, runs first)
    s = s.sin().cos()
    s.sum().backward()
    return order, x.grad


def test_backward_order_matches_torch():
    order, grad = _run_order(fusegrad)
    want_order, want_grad = _run_order(torch)
    assert order == want_order
    np.testing.assert_allclose(grad.numpy(), want_grad.numpy(), rtol=1e-6)


def test_long_chain_backward_matches_torch():
    # Every node of a chain is handed on without the heap; the leaf sums 300 contributions.
    data = (1 + 1e-3 * np.random.default_rng(0).standard_normal((3, 3))).astype(np.float32)
    grads = []
    for lib in (fusegrad, torch):
        x = lib.from_numpy(data.copy()).requires_grad_()
        c = x.detach()
        y = x
        for i in range(300):
            y = x * y if i % 2 else y * c
        y.sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-4)


@pytest.mark.parametrize("expr", ["x.sum()", "x.sum(1)", "x.view(6)", "x[0]", "x.mean()",
                                  "x.reshape(3, 2)", "x.select(1, 2)", "x.expand(4, 2, 3)"])
def test_saved_sizes_are_tuples(expr):
    # A node's saved size reads as PyTorch's: a plain tuple of ints, not a Size.
    got = eval(expr, {"x": fusegrad.ones(2, 3, requires_grad=True)}).grad_fn
    want = eval(expr, {"x": torch.ones(2, 3, requires_grad=True)}).grad_fn
    names = [n for n in dir(want) if n.startswith("_saved_") and n.endswith("sizes")]
    assert names, expr
    for name in names:
        w = getattr(want, name)
        g = getattr(got, name)
        assert type(g) is type(w) and g == w, (name, g, w)


def _many_uses(lib):
    """A leaf used by many ops (its gradient summed over them), with a node hook keeping
    the gradients one node passed on."""
    x = lib.tensor([0.5, -1.25, 2.0], requires_grad=True)
    kept = []
    y = x * 3
    y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: kept.append(grad_inputs))
    total = y + x + x
    for i in range(5):
        total = total + x * (i + 1) + y
    total.sum().backward()
    return x.grad, [[None if g is None else g.clone() for g in k] for k in kept], kept


def test_repeated_gradients_sum_as_torch_and_leave_passed_grads_alone():
    grad, kept_copy, kept = _many_uses(fusegrad)
    want, want_kept, _ = _many_uses(torch)
    np.testing.assert_allclose(grad.numpy(), want.numpy(), rtol=1e-6)
    assert len(kept) == len(want_kept) == 1
    assert len(kept[0]) == len(want_kept[0])
    for got, copy, exp in zip(kept[0], kept_copy[0], want_kept[0]):
        assert (got is None) == (exp is None)
        if got is None:
            continue
        np.testing.assert_array_equal(got.numpy(), copy.numpy())  # not added into since
        np.testing.assert_allclose(got.numpy(), exp.numpy(), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mm_one_by_one_specials_match_torch(dtype):
    # 1x1 @ 1x1 takes its own path: every pair of special values, bit for bit (signed zeros,
    # infinities, NaN), as PyTorch's GEMM gives; the result is a fresh tensor each time.
    for x in SPECIAL:
        for y in SPECIAL:
            fa, ta = _pair(np.full((1, 1), x, dtype))
            fb, tb = _pair(np.full((1, 1), y, dtype))
            got = fa @ fb
            _same_bits(got, ta @ tb)
            _same_bits(fusegrad.mm(fa, fb), torch.mm(ta, tb))
            got.add_(1.0)
            assert fa.item() == x or np.isnan(x)
            assert fb.item() == y or np.isnan(y)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.float16])
def test_sum_all_matches_torch(dtype):
    # The full sum of a float array is a fresh 0-d tensor of the input's dtype, with grad.
    rng = np.random.default_rng(3)
    base = (rng.standard_normal((4, 6)) * 10).astype(dtype)
    for x in (base, base[:, ::2], base.T, base[0, 0], np.zeros((0, 3), dtype), base[:1, :1]):
        fx, tx = _pair(np.asarray(x))
        got, want = fx.sum(), tx.sum()
        assert got.dtype == fusegrad.from_numpy(np.asarray(want.numpy())).dtype
        assert tuple(got.shape) == () and got.stride() == ()
        tol = 0.1 if dtype == np.float16 else 1e-4  # summation order: differences near 0
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol)
        got.add_(1)  # its own storage: the input is left alone
        np.testing.assert_array_equal(fx.numpy(), np.asarray(x))
    leaf = fusegrad.from_numpy(base.astype(np.float32)).requires_grad_()
    tleaf = torch.from_numpy(base.astype(np.float32)).requires_grad_()
    out, tout = leaf.sum(), tleaf.sum()
    assert out.grad_fn.name() == tout.grad_fn.name()
    (out * 2).backward()
    (tout * 2).backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), tleaf.grad.numpy())


def test_view_single_size_matches_torch():
    # `x.view(n)` takes a short path: sizes, -1, views sharing storage and version, errors.
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    fa, ta = _pair(a)
    for n in (12, -1):
        got, want = fa.view(n), ta.view(n)
        assert tuple(got.shape) == tuple(want.shape) and got._base is fa
        got[0] = 7.0
        assert fa[0, 0].item() == 7.0 and fa._version == got._version
        fa[0, 0] = 0.0
    for x, tx, n in ((fa, ta, 5), (fa, ta, -2), (fa.T, ta.T, 12)):
        with pytest.raises(RuntimeError) as theirs:
            tx.view(n)
        with pytest.raises(RuntimeError) as mine:
            x.view(n)
        assert str(mine.value) == str(theirs.value)
    leaf = fusegrad.ones(2, 3, requires_grad=True)
    assert leaf.view(6).grad_fn.name() == torch.ones(2, 3, requires_grad=True).view(6) \
        .grad_fn.name()


def _select(mod, x, how: str, i: int):
    if how == "select":
        return mod.select(x, 0, i)
    return x[np.int64(i)] if how == "numpy index" else x[i]


@pytest.mark.parametrize("shape", [(4, 3), (4,), ()])
def test_select_dim0_int_matches_torch(shape):
    # `x[i]` and `select(x, 0, i)` index the array directly: views, values and PyTorch's
    # errors for indices out of range (a 0-d input: "invalid index" for 0 only), with and
    # without grad.
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    for rg in (False, True):
        fa = fusegrad.from_numpy(a.copy()).requires_grad_(rg)
        ta = torch.from_numpy(a.copy()).requires_grad_(rg)
        for i in (0, 3, -1, -4, 4, -5):
            for how in ("index", "numpy index", "select"):
                try:
                    want = _select(torch, ta, how, i)
                except IndexError as e:
                    with pytest.raises(IndexError) as mine:
                        _select(fusegrad, fa, how, i)
                    assert str(mine.value) == str(e)
                    continue
                got = _select(fusegrad, fa, how, i)
                _same_bits(got, want)
                assert got._base is fa and got.stride() == want.stride()
                if rg:
                    assert got.grad_fn.name() == want.grad_fn.name()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_add_sub_fast_path_matches_torch(dtype):
    # add and sub take their float fast path in the kernel itself: same values, dtypes and
    # errors as PyTorch for tensor, float, int and bool operands, with and without alpha.
    a = np.array([[1.5, -2.0], [0.25, 3.0]], dtype)
    fa, ta = _pair(a)
    others = [(fusegrad.from_numpy(a * 2), torch.from_numpy(a * 2)),
              (fusegrad.from_numpy(a.astype(np.float16)), torch.from_numpy(a.astype(np.float16))),
              (fusegrad.tensor([1, 2]), torch.tensor([1, 2])), (2.5, 2.5), (3, 3), (True, True)]
    calls = [(lambda m, x, y: m.add(x, y), {}), (lambda m, x, y: m.sub(x, y), {}),
             (lambda m, x, y, **k: m.add(x, y, **k), {"alpha": 2}),
             (lambda m, x, y, **k: m.sub(x, y, **k), {"alpha": 2}),
             (lambda m, x, y, **k: m.add(x, y, **k), {"alpha": 1}),
             (lambda m, x, y: x + y, {}), (lambda m, x, y: x - y, {})]
    for fo, to in others:
        for f, kwargs in calls:
            try:
                want = f(torch, ta, to, **kwargs)
            except RuntimeError as e:
                with pytest.raises(RuntimeError) as mine:
                    f(fusegrad, fa, fo, **kwargs)
                assert str(mine.value) == str(e)
                continue
            _same_bits(f(fusegrad, fa, fo, **kwargs), want)
    with pytest.raises(RuntimeError) as mine:
        fusegrad.sub(fusegrad.tensor([True]), fusegrad.tensor([False]))
    with pytest.raises(RuntimeError) as theirs:
        torch.sub(torch.tensor([True]), torch.tensor([False]))
    assert str(mine.value) == str(theirs.value)
