"""Eager fidelity against torch 2.13: `Tensor.requires_grad_()` refused while a function
transform runs the user's function (not the `requires_grad` setter, parameters or factories;
not under `linearize`), `enable_grad()` inside `inference_mode()` (grad mode on, no history),
and leftovers of the eager surface."""

from __future__ import annotations

import threading

import pytest
import torch
from oracle import expression_cases, outcome, same_outcome

import fusegrad as fg

# ---------------------------------------------------------------- requires_grad_ in transforms


def _body(L, kind):
    """A statement run inside the transformed function."""
    nn = L.nn
    return {
        "detach_rg": lambda x: x.detach().requires_grad_(),
        "rg_false": lambda x: x.detach().requires_grad_(False),
        "input_rg": lambda x: x.requires_grad_(),
        "setter": lambda x: setattr(L.zeros(3), "requires_grad", True),
        "parameter": lambda x: nn.Parameter(L.zeros(3)),
        "factory": lambda x: L.zeros(3, requires_grad=True),
        "variable": lambda x: L.autograd.Variable(L.ones(2), requires_grad=True),
        "buffer": lambda x: nn.Buffer(L.ones(2)),
        "module": lambda x: _LINEAR[L].requires_grad_(),
        "af_jacobian": lambda x: L.autograd.functional.jacobian(lambda a: a * 2, L.ones(2)),
        "make_tensor": lambda x: L.testing.make_tensor(2, dtype=L.float32, device="cpu",
                                                       requires_grad=True),
    }[kind]


_LINEAR = {torch: torch.nn.Linear(3, 3), fg: fg.nn.Linear(3, 3)}


def _transformed(L, transform, body):
    def f(x):
        body(x)
        return (x * x).sum()

    func = L.func
    return {
        "grad": lambda x: func.grad(f)(x),
        "vjp": lambda x: func.vjp(f, x)[0],
        "jvp": lambda x: func.jvp(f, (x,), (x,))[1],
        "jacrev": lambda x: func.jacrev(f)(x),
        "jacfwd": lambda x: func.jacfwd(f)(x),
        "hessian": lambda x: func.hessian(f)(x),
        "vmap": lambda x: func.vmap(f)(x.reshape(3, 1)),
        "linearize": lambda x: func.linearize(f, x)[0],
    }[transform]


@pytest.mark.parametrize("transform", ["grad", "vjp", "jvp", "jacrev", "jacfwd", "hessian",
                                       "vmap", "linearize"])
@pytest.mark.parametrize("kind", ["detach_rg", "rg_false", "input_rg", "setter", "parameter",
                                  "factory", "variable", "buffer", "module", "af_jacobian",
                                  "make_tensor"])
def test_requires_grad_under_transforms(transform, kind):
    if transform in ("jacfwd", "hessian", "vmap") and kind == "make_tensor":
        pytest.skip("a random op under vmap: randomness errors, compared elsewhere")
    got = []
    for L in (torch, fg):
        x = L.tensor([1.0, -2.0, 0.5])
        run = _transformed(L, transform, _body(L, kind))
        got.append(repr(outcome(lambda run=run, x=x: run(x), lambda r: (
            "tensor", tuple(r.shape), r.detach().tolist()))).replace("fusegrad", "torch"))
    assert got[1] == got[0]


def test_requires_grad_after_transform_and_in_custom_rules():
    """Outside a transform (after one raised, too) `requires_grad_` works; a transform's own
    leaves (nested transforms) and `torch.autograd.grad(create_graph=True)` inside one work."""
    def bad(x):
        return x.detach().requires_grad_().sum()

    got = []
    for L in (torch, fg):
        with pytest.raises(RuntimeError, match="functorch transform"):
            L.func.grad(bad)(L.ones(2))
        assert L.ones(2).requires_grad_().requires_grad
        x = L.tensor([0.3, -1.2])
        h = L.func.jacfwd(L.func.jacrev(lambda a, L=L: (a.sin() * a).sum()))(x)
        hh = L.func.grad(lambda a, L=L: L.func.grad(lambda b: (b ** 3).sum())(a).sum())(x)
        got.append((h.tolist(), hh.tolist()))
    assert got[1][0] == [pytest.approx(r) for r in got[0][0]]
    assert got[1][1] == pytest.approx(got[0][1])


# ---------------------------------------------------------------- enable_grad in inference


def _modes(L):
    """(is_grad_enabled, is_inference_mode_enabled, requires_grad, is_inference, has grad_fn)
    of `a * 2` and friends under nestings of the grad-mode contexts."""
    a = L.ones(2, requires_grad=True)
    rows = []

    def show(z):
        rows.append((L.is_grad_enabled(), L.is_inference_mode_enabled(), z.requires_grad,
                     z.is_inference(), z.grad_fn is not None))

    with L.inference_mode():
        with L.enable_grad():
            show(a * 2)
            show(a.view(2))
            show(L.ones(2, requires_grad=True) * 3)
            with L.inference_mode(False):
                show(a * 2)
        with L.set_grad_enabled(True):
            show(a * 2)
        L.set_grad_enabled(True)
        show(a * 2)
        L.set_grad_enabled(False)
        with L.no_grad():
            with L.enable_grad():
                show(a * 2)
        show(a * 2)
    with L.no_grad():
        with L.inference_mode():
            with L.enable_grad():
                show(a * 2)
        show(a * 2)
    show(a * 2)
    return rows


def test_enable_grad_inside_inference_mode():
    assert _modes(fg) == _modes(torch)


def test_enable_grad_inside_inference_mode_functions():
    """Custom Functions still record (grad mode is on), `numpy()` refuses, a backward with
    `create_graph` gives no history, and another thread starts with grad on."""
    got = []
    for L in (torch, fg):
        class Twice(L.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2

        a = L.ones(2, requires_grad=True)
        y = (a * a).sum()
        row = []
        with L.inference_mode(), L.enable_grad():
            out = Twice.apply(a)
            row.append((out.requires_grad, out.grad_fn is not None))
            row.append(outcome(lambda a=a: a.numpy(), repr))
            g, = L.autograd.grad(y, a, create_graph=True)
            row.append((g.tolist(), g.requires_grad, L.is_grad_enabled()))
            seen: list = []
            t = threading.Thread(target=lambda L=L, a=a, seen=seen: seen.append(
                (L.is_grad_enabled(), (a * 2).requires_grad)))
            t.start()
            t.join()
            row.append(seen[0])
        row.append(L.is_grad_enabled())
        got.append(row)
    assert got[1] == got[0]


# ---------------------------------------------------------------- ranges past int64's limits

RANGES = expression_cases("""
L.arange(0, 2**63-1, 2**62)
L.arange(0, 2**63-1, 2**61)
L.arange(-2**63, 2**63-1, 2**62)
L.arange(2**62, -2**63, -2**62)
L.arange(2**63-1, 0, -2**62)
L.arange(-2**63, 0, 2**62)
L.arange(2**63-10, 2**63-1, 3)
L.arange(0, 1e20, 1e18, dtype=L.int64)
L.arange(0, -1e19, -1e18, dtype=L.int64)
L.arange(0., 2**63-1, 2**62, dtype=L.int64)
L.arange(0, 10.5, 1.5, dtype=L.int64)
L.arange(-3.5, 2, 1.5, dtype=L.int64)
L.arange(0, 10.5, 1.5, dtype=L.int32)
L.arange(0, 5, 0.5, dtype=L.int64)
L.arange(0, 2**63-1, 2**62, dtype=L.int32)
L.range(0, 1, 0.1)
L.range(0, 2**63-1, 2**62)
L.range(0, -1, 1)
L.range(3, 0, -0.7)
L.range(0.5, 3, dtype=L.int64)
L.range(0, float('inf'))
L.range(0, 3, 0)
L.range(5)
""")


@pytest.mark.parametrize("expression", RANGES)
def test_range_edges(expression):
    same_outcome(expression)


# ---------------------------------------------------------------- layouts of results

LAYOUTS = expression_cases("""
L.xlogy(L.zeros(0, 3).t(), 1.).stride()
L.xlogy(2., L.zeros(0, 3).t()).stride()
L.special.xlog1py(L.zeros(0, 3).t(), 2.).stride()
L.special.zeta(2., L.zeros(0, 3).t()).stride()
L.isclose(L.zeros(0, 3).t(), L.zeros(1)).stride()
L.nn.functional.hardtanh(L.zeros(0, 3).t()).stride()
L.nn.functional.relu6(L.zeros(3, 0).t()).stride()
L.deg2rad(L.zeros(3, 0).t()).stride()
L.rad2deg(L.zeros(2, 0, 3).permute(2, 0, 1)).stride()
L.frexp(L.zeros(3, 0).t())
L.isreal(L.ones(3, 2).t()).stride()
L.isreal(L.zeros(3, 0).t()).stride()
L.ones_like(L.zeros(3, 0).t()).stride()
L.empty_like(L.zeros(2, 0, 3).permute(2, 0, 1)).stride()
L.zeros_like(L.zeros(0, 3).t(), memory_format=L.contiguous_format).stride()
L.nonzero(L.zeros(2, 3))
L.nonzero(L.zeros(0))
L.nonzero(L.tensor(0.))
L.nonzero(L.tensor(1.))
L.argwhere(L.zeros(3, 0).t())
L.nonzero_static(L.ones(2, 3), size=4)
L.nonzero_static(L.ones(2, 3), size=0)
L.nonzero_static(L.tensor([0., 1., 1.]), size=4)
L.renorm(L.zeros(0, 3), 2, 0, 1.0)
""")


@pytest.mark.parametrize("expression", LAYOUTS)
def test_result_layouts(expression):
    same_outcome(expression)


# ---------------------------------------------------------------- argument checks

CHECKS = expression_cases("""
L.fliplr(L.tensor(1.))
L.fliplr(L.ones(3))
L.flipud(L.tensor(1.))
L.ones(3).fliplr()
L.cov(L.ones(2, 3).bool())
L.corrcoef(L.ones(2, 3).bool())
L.cov(L.ones(2, 2, 2).bool())
L.cross(L.tensor(1.), L.tensor(1.), dim=-1)
L.linalg.cross(L.tensor(1.), L.tensor(1.))
L.cross(L.ones(3).bool(), L.ones(3).bool(), dim=0)
L.cross(L.ones(3).long(), L.ones(3).long(), dim=0)
L.dist(L.ones(2, 3).long(), L.ones(2, 3).long())
L.dist(L.ones(3).bool(), L.ones(3))
L.dist(L.ones(3).bool(), L.ones(3).bool())
L.ones(3).long().dist(L.ones(3), 1)
L.roll(L.tensor(1.), 1, 0)
L.roll(L.tensor(1.), 1, -1)
L.roll(L.tensor(1.), 1)
L.chunk(L.tensor(1.), 2)
L.chunk(L.tensor(1.), 0)
L.histc(L.ones(3).bool())
L.histc(L.ones(3).long())
""")


@pytest.mark.parametrize("expression", CHECKS)
def test_argument_checks(expression):
    same_outcome(expression)


# ---------------------------------------------------------------- dir() of a node


def _nodes(L):
    """Nodes of each kind: a registry op's (tensors and a size saved), a leaf's accumulator,
    a custom Function's, an in-place write into a view's, and one after its backward."""
    class Twice(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = L.ones(2, requires_grad=True)
    b = x * 1
    b[0] = 5
    done = (x * x).sum()
    nodes = [(x * x).grad_fn, x.sum().grad_fn, (x * 2).grad_fn.next_functions[0][0],
             Twice.apply(x).grad_fn, b.grad_fn, x.view(2).grad_fn]
    done.backward()
    return nodes + [done.grad_fn]


def test_node_dir_shows_the_node_api():
    """`dir(grad_fn)` lists PyTorch's attributes (what it has of them), never the slots and
    helpers of this implementation."""
    for fg_node, th_node in zip(_nodes(fg), _nodes(torch)):
        got, want = set(dir(fg_node)), set(dir(th_node))
        assert type(fg_node).__name__ == type(th_node).__name__
        assert got <= want, sorted(got - want)
        public = {n for n in want if not n.startswith("_")} - {"requires_grad"}
        saved = {n for n in want if n.startswith(("_saved_", "_raw_saved_"))}
        if type(fg_node).__name__ != "TwiceBackward":  # (PyTorch lists more of its API)
            assert public | saved <= got | {"__call__"}, sorted((public | saved) - got)


# ---------------------------------------------------------------- unknown keywords

KEYWORDS = expression_cases("""
L.sum(L.ones(2), foo=1)
L.sum(L.ones(2), 0, foo=1)
L.sum(L.ones(2), dtype=L.float64, foo=1)
L.sum(input=L.ones(2), foo=1)
L.mean(L.ones(2), bogus=2)
L.var(L.ones(2), bogus=2)
L.std_mean(L.ones(2), out=(L.empty(0), L.empty(0)))
L.var_mean(L.ones(2), 0, out=(L.empty(0), L.empty(0)))
L.topk(L.ones(2), 1, bogus=1)
L.ones(2).add(L.ones(2), bogus=2)
L.nn.functional.relu(L.ones(2), bad=1)
L.sum(L.ones(2, 3), axis=1, keepdims=True)
""")


@pytest.mark.parametrize("expression", KEYWORDS)
def test_unknown_keywords(expression):
    same_outcome(expression)


def test_compiled_calls_inside_inference_mode_keep_enable_grads_mode():
    """A compiled call (one graph, or two around a break) inside `inference_mode()` and
    `enable_grad()` leaves grad mode on and records nothing, as eager and torch do."""
    a = fg.ones(2, requires_grad=True)

    def whole(x):
        return x * 2 + 1

    def broken(x):
        y = x * 2
        fg._dynamo.graph_break()
        return y + 1

    for fn in (whole, broken):
        compiled = fg.compile(fn, backend="aot_eager")
        with fg.inference_mode():
            with fg.enable_grad():
                z = compiled(a)
                assert fg.is_grad_enabled()
                assert not z.requires_grad and z.is_inference()
                assert z.tolist() == [3.0, 3.0]
            assert not fg.is_grad_enabled()
        assert fg.is_grad_enabled()
