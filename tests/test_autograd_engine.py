"""Autograd: gradients, grad_fn node names and graph structure, grad modes, the engine, and
autograd errors, compared with torch."""

import sys

import numpy as np
import pytest
import torch
from oracle import (
    FLOAT_DTYPES,
    assert_same_error,
    assert_same_warnings,
    check,
    fg,
    graph_signature,
    pair,
    rand_pos,
    randn,
)


def upstream(T, out, seed=5):
    """A deterministic non-trivial upstream gradient shaped like ``out``."""
    g = np.random.default_rng(seed).standard_normal(tuple(out.shape))
    return T.tensor(g, dtype=out.dtype)


def backprop(prog):
    """prog(T, *xs) -> out; wrapped to also run backward (the output's grad_fn name and the
    inputs' grads are compared by ``check``)."""
    def run(T, *xs):
        out = prog(T, *xs)
        out.backward(upstream(T, out))
        return out
    return run


def graph_of(prog):
    """prog(T, *xs) -> out; wrapped to describe the whole graph below out."""
    def run(T, *xs):
        out = prog(T, *xs)
        return graph_signature(out.grad_fn, xs)
    return run


# name -> (prog, input shapes)
OPS = {
    "add": (lambda T, x, y: x + y, [(2, 3), (2, 3)]),
    "add_bcast": (lambda T, x, y: x + y, [(2, 3), (3,)]),
    "add_bcast2": (lambda T, x, y: T.add(x, y), [(4, 1, 3), (2, 1)]),
    "add_scalar": (lambda T, x: x + 2.0, [(3,)]),
    "radd": (lambda T, x: 2 + x, [(3,)]),
    "sub": (lambda T, x, y: x - y, [(2, 3), (1, 3)]),
    "rsub": (lambda T, x: 1.5 - x, [(3,)]),
    "mul": (lambda T, x, y: x * y, [(2, 3), (2, 1)]),
    "mul_scalar": (lambda T, x: x * 3, [(2, 3)]),
    "div": (lambda T, x, y: x / (y.abs() + 0.5), [(2, 3), (3,)]),
    "div_scalar": (lambda T, x: x / 4, [(2, 3)]),
    "rdiv": (lambda T, x: 2 / (x.abs() + 0.5), [(2, 3)]),
    "neg": (lambda T, x: -x, [(2, 3)]),
    "pow_scalar": (lambda T, x: x ** 3, [(2, 3)]),
    "pow_tensor": (lambda T, x, y: (x.abs() + 0.5) ** y, [(2, 3), (2, 3)]),
    "pow_rscalar": (lambda T, x: 2 ** x, [(2, 3)]),
    "pow_zero_d": (lambda T, x, y: T.pow(x.abs() + 0.5, y), [(2, 3), ()]),
    "exp": (lambda T, x: T.exp(x), [(2, 3)]),
    "log": (lambda T, x: (x.abs() + 0.1).log(), [(2, 3)]),
    "sin": (lambda T, x: x.sin(), [(2, 3)]),
    "cos": (lambda T, x: T.cos(x), [(2, 3)]),
    "tanh": (lambda T, x: x.tanh(), [(2, 3)]),
    "sigmoid": (lambda T, x: T.sigmoid(x), [(2, 3)]),
    "relu": (lambda T, x: x.relu(), [(2, 3)]),
    "abs": (lambda T, x: x.abs(), [(2, 3)]),
    "sqrt": (lambda T, x: (x * x + 0.1).sqrt(), [(2, 3)]),
    "where": (lambda T, x, y: T.where(x > y, x, y), [(2, 3), (3,)]),
    "where_scalar": (lambda T, x: T.where(x > 0, x, 0.0), [(2, 3)]),
    "maximum": (lambda T, x, y: T.maximum(x, y), [(2, 3), (2, 3)]),
    "clamp": (lambda T, x: x.clamp(-0.5, 0.5), [(2, 3)]),
    "clamp_min": (lambda T, x: T.clamp(x, min=0.0), [(2, 3)]),
    "clamp_max": (lambda T, x: x.clamp(max=0.2), [(2, 3)]),
    "sum": (lambda T, x: x.sum(), [(2, 3)]),
    "sum_dim": (lambda T, x: x.sum(1), [(2, 3, 4)]),
    "sum_keep": (lambda T, x: x.sum((0, 2), keepdim=True), [(2, 3, 4)]),
    "mean": (lambda T, x: x.mean(), [(2, 3)]),
    "mean_dim": (lambda T, x: T.mean(x, -1), [(2, 3, 4)]),
    "amax": (lambda T, x: x.amax(1), [(2, 3, 4)]),
    "amax_keep": (lambda T, x: x.amax((0, 2), keepdim=True), [(2, 3, 4)]),
    "mm": (lambda T, x, y: x @ y, [(2, 3), (3, 4)]),
    "dot": (lambda T, x, y: x @ y, [(3,), (3,)]),
    "mv": (lambda T, x, y: x @ y, [(2, 3), (3,)]),
    "vm": (lambda T, x, y: T.matmul(x, y), [(3,), (3, 4)]),
    "bmm": (lambda T, x, y: x @ y, [(5, 2, 3), (5, 3, 4)]),
    "bmm_2d": (lambda T, x, y: x @ y, [(5, 2, 3), (3, 4)]),
    "bmm_bcast": (lambda T, x, y: x.matmul(y), [(2, 1, 2, 3), (5, 3, 4)]),
    "matmul_1_3": (lambda T, x, y: x @ y, [(3,), (5, 3, 4)]),
    "matmul_3_1": (lambda T, x, y: x @ y, [(5, 2, 3), (3,)]),
    "view": (lambda T, x: x.view(6), [(2, 3)]),
    "reshape": (lambda T, x: x.reshape(3, 2), [(2, 3)]),
    "reshape_copy": (lambda T, x: x.t().reshape(6), [(2, 3)]),
    "permute": (lambda T, x: x.permute(2, 0, 1), [(2, 3, 4)]),
    "transpose": (lambda T, x: x.transpose(0, 1), [(2, 3)]),
    "t": (lambda T, x: x.t(), [(2, 3)]),
    "T": (lambda T, x: x.T, [(2, 3)]),
    "mT": (lambda T, x: x.mT, [(4, 2, 3)]),
    "expand": (lambda T, x: x.expand(4, 2, 3), [(2, 1)]),
    "unsqueeze": (lambda T, x: x.unsqueeze(1), [(2, 3)]),
    "squeeze": (lambda T, x: x.squeeze(), [(2, 1, 3)]),
    "squeeze_dim": (lambda T, x: x.squeeze(1), [(2, 1, 3)]),
    "cat": (lambda T, x, y: T.cat([x, y], 1), [(2, 3), (2, 2)]),
    "cat_same": (lambda T, x: T.cat([x, x * 2, x]), [(2, 3)]),
    "select": (lambda T, x: x[1], [(2, 3)]),
    "slice": (lambda T, x: x[:, 1::2], [(2, 5)]),
    "index_mixed": (lambda T, x: x[0, None, ..., -1], [(2, 3, 4)]),
    "index_none": (lambda T, x: x[None], [(2, 3)]),
    "softmax": (lambda T, x: x.softmax(-1), [(2, 3)]),
    "softmax_fn": (lambda T, x: T.softmax(x, 0), [(2, 3)]),
    "log_softmax": (lambda T, x: T.log_softmax(x, dim=1), [(2, 3)]),
    "log_softmax_m": (lambda T, x: x.log_softmax(0), [(2, 3)]),
    "clone": (lambda T, x: x.clone(), [(2, 3)]),
    "contiguous_t": (lambda T, x: x.t().contiguous(), [(2, 3)]),
    "to_double": (lambda T, x: x.to(T.float64) * 2, [(2, 3)]),
    "double": (lambda T, x: x.double(), [(2, 3)]),
    "float": (lambda T, x: x.float(), [(2, 3)]),
    "half_roundtrip": (lambda T, x: x.half().float(), [(2, 3)]),
    "zero_d": (lambda T, x, y: (x * y).sin(), [(), ()]),
    "zero_d_bcast": (lambda T, x, y: x * y, [(), (2, 3)]),
    "empty": (lambda T, x, y: x * y, [(0, 3), (3,)]),
    "empty_sum": (lambda T, x: x.sum(), [(0, 3)]),
    "composite": (lambda T, x, y: ((x @ y).tanh() + 1).log_softmax(-1).mean(0),
                  [(4, 3), (3, 5)]),
}


@pytest.mark.parametrize("name", list(OPS))
@pytest.mark.parametrize("dt", FLOAT_DTYPES)
def test_op_gradients(name, dt):
    prog, shapes = OPS[name]
    arrays = [randn(*s, seed=100 + i) for i, s in enumerate(shapes)]
    check(backprop(prog), *arrays, requires_grad=True, dtype=dt, check_grad_fn=True)


@pytest.mark.parametrize("name", list(OPS))
@pytest.mark.parametrize("dt", FLOAT_DTYPES)
def test_op_graph_structure(name, dt):
    prog, shapes = OPS[name]
    arrays = [randn(*s, seed=100 + i) for i, s in enumerate(shapes)]
    check(graph_of(prog), *arrays, requires_grad=True, dtype=dt)


@pytest.mark.parametrize("name", ["add_bcast", "mul", "mm", "where", "cat", "pow_tensor",
                                  "maximum", "bmm_2d"])
def test_op_gradients_partial_requires_grad(name):
    prog, shapes = OPS[name]
    arrays = [randn(*s, seed=200 + i) for i, s in enumerate(shapes)]
    for mask in [(True, False), (False, True)]:
        check(backprop(prog), *arrays, requires_grad=mask, dtype="float64", check_grad_fn=True)
        check(graph_of(prog), *arrays, requires_grad=mask, dtype="float64")


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["add_bcast", "mul", "exp", "sum_dim", "sigmoid", "view"])
def test_op_gradients_low_precision(name, dt):
    prog, shapes = OPS[name]
    arrays = [randn(*s, seed=300 + i) for i, s in enumerate(shapes)]
    check(backprop(prog), *arrays, requires_grad=True, dtype=dt, check_grad_fn=True)
    check(graph_of(prog), *arrays, requires_grad=True, dtype=dt)


SPECIAL_POINTS = {
    "relu_at_zero": (lambda T, x: x.relu(), [0.0, -1.0, 2.0]),
    "abs_at_zero": (lambda T, x: x.abs(), [0.0, -1.0, 2.0]),
    "clamp_at_bounds": (lambda T, x: x.clamp(-1.0, 1.0), [-1.0, 1.0, 0.5, 3.0]),
    "clamp_min_at_bound": (lambda T, x: x.clamp(min=0.0), [0.0, -1.0, 2.0]),
    "maximum_ties": (lambda T, x: T.maximum(x, T.tensor([0.0, 2.0, 1.0], dtype=x.dtype)),
                     [0.0, 1.0, 1.0]),
    "maximum_self_ties": (lambda T, x: T.maximum(x, x[:1].expand(3)), [1.0, 1.0, 0.5]),
    "amax_ties": (lambda T, x: x.amax(), [1.0, 3.0, 3.0]),
    "amax_dim_ties": (lambda T, x: x.view(2, 2).amax(1), [2.0, 2.0, 1.0, 5.0]),
    "sqrt_at_zero": (lambda T, x: x.sqrt(), [0.0, 4.0]),
    "pow_zero_exponent": (lambda T, x: x ** 0, [0.0, 2.0]),
    "pow_at_zero": (lambda T, x: x ** 2, [0.0, -3.0]),
    "pow_half_at_zero": (lambda T, x: x ** 0.5, [0.0, 4.0]),
    "log_at_zero": (lambda T, x: x.log(), [0.0, 1.0]),
    "div_by_zero": (lambda T, x: T.ones(2, dtype=x.dtype) / x, [0.0, 2.0]),
    "softmax_inf": (lambda T, x: x.softmax(0), [float("-inf"), 0.0, 1.0]),
    "where_nan_branch": (lambda T, x: T.where(x > 0, x.sqrt(), x * 0), [-1.0, 4.0]),
}


@pytest.mark.parametrize("name", list(SPECIAL_POINTS))
@pytest.mark.parametrize("dt", FLOAT_DTYPES)
def test_gradients_at_special_points(name, dt):
    prog, data = SPECIAL_POINTS[name]
    check(backprop(prog), np.array(data), requires_grad=True, dtype=dt, check_grad_fn=True)


def test_mixed_dtype_gradients():
    def prog(T, x, y):
        z = (x * y).sum()
        z.backward()
        return z, x.grad.dtype, y.grad.dtype
    check(prog, randn(3), randn(3), requires_grad=True, dtype=("float32", "float64"))


def test_iteration_unbinds():
    def prog(T, x):
        rows = list(x)
        (rows[0] * rows[1]).sum().backward()
        return rows, [graph_signature(r.grad_fn, (x,)) for r in rows], x.grad
    check(prog, randn(2, 3), requires_grad=True, check_grad_fn=True)


def test_no_grad_for_non_differentiable_outputs():
    def prog(T, x):
        return [(t.requires_grad, t.grad_fn is None, t.is_leaf)
                for t in (x > 0, x == x, x.eq(1), x.detach(), x.long(), x.bool())]
    check(prog, randn(3), requires_grad=True)


# ----------------------------------------------------------------------------------------------
# graph structure
# ----------------------------------------------------------------------------------------------

def test_next_functions_structure():
    def prog(T, x, y, c):
        outs = [x * y, x * c, c * x, x + c * y, (x * x).sum(), (x + y) * (x + c),
                T.cat([x, c, y]), T.where(c > 0, x, c), T.maximum(c, x), c @ x]
        return [graph_signature(o.grad_fn, (x, y, c)) for o in outs]
    check(prog, randn(3), randn(3), randn(3), requires_grad=(True, True, False))


def test_accumulate_grad_node():
    def prog(T, x, y):
        a = x * y
        b = x * 3
        acc = a.grad_fn.next_functions[0][0]
        same = acc is b.grad_fn.next_functions[0][0]
        return (type(acc).__name__, acc.variable is x, same, acc.next_functions,
                a.grad_fn.next_functions[1][0].variable is y, a.grad_fn.next_functions[1][1])
    check(prog, randn(3), randn(3), requires_grad=True)


def test_python_scalar_operand_is_a_none_edge():
    def prog(T, x):
        return [[(n is None, nr) for n, nr in t.grad_fn.next_functions]
                for t in (x * 2, 2 * x, x + 1.5, x - 1, 1 - x, x / 2, x ** 2, 2 ** x,
                          T.where(x > 0, x, 0.0))]
    check(prog, randn(3), requires_grad=True)


def test_grad_fn_repr_and_name():
    def prog(T, x):
        fn = (x * 2).grad_fn
        return type(fn).__name__, repr(fn).split(" object at ")[0], fn.name()
    check(prog, randn(2), requires_grad=True)


# ----------------------------------------------------------------------------------------------
# backward() semantics
# ----------------------------------------------------------------------------------------------

def test_retain_grad():
    def prog(T, x):
        a = x * 2
        b = a.sin()
        c = b.sum()
        a.retain_grad()
        c.retain_grad()
        x.retain_grad()
        c.backward()
        return a.grad, c.grad, x.grad, a.retains_grad, b.retains_grad, x.retains_grad, a.is_leaf
    check(prog, randn(3), requires_grad=True)


def test_retain_grad_accumulates():
    def prog(T, x):
        a = x * x
        a.retain_grad()
        s = a.sum()
        s.backward(retain_graph=True)
        first = a.grad.clone()
        s.backward()
        return first, a.grad, x.grad
    check(prog, randn(3), requires_grad=True)


def test_nonleaf_grad_warning():
    def prog(T):
        x = T.ones(2, requires_grad=True)
        y = x * 2
        y.sum().backward()
        return y.grad
    assert_same_warnings(lambda: prog(fg), lambda: prog(torch))
    check(prog)


def test_nonleaf_grad_no_warning_with_retain_grad():
    def prog(T):
        x = T.ones(2, requires_grad=True)
        y = x * 2
        y.retain_grad()
        y.sum().backward()
        return y.grad, x.grad
    assert_same_warnings(lambda: prog(fg), lambda: prog(torch))


@pytest.mark.parametrize("dt", FLOAT_DTYPES)
def test_backward_with_gradient(dt):
    def prog(T, x, g):
        y = x.exp() * 2
        y.backward(gradient=g)
        return x.grad, y.requires_grad, x.grad.requires_grad, x.grad.is_leaf, g.grad
    check(prog, randn(2, 3), randn(2, 3), requires_grad=(True, False), dtype=dt)


def test_implicit_gradient_for_one_element_outputs():
    def prog(T, x):
        (x[:1] * 2).backward()
        x[1:2].reshape(1, 1).exp().backward()
        return x.grad
    check(prog, randn(3), requires_grad=True)


def test_backward_scalar_and_zero_d_gradient():
    def prog(T, x):
        y = (x * x).sum()
        y.backward(T.tensor(3.0))
        z = (x * 2).sum()
        z.backward()
        return x.grad, z.grad_fn.next_functions[0][0].next_functions[0][0].variable is x
    check(prog, randn(4), requires_grad=True, dtype="float32")


def test_backward_accumulates_across_calls():
    def prog(T, x):
        (x * 3).sum().backward()
        g1 = x.grad.clone()
        (x * x).sum().backward()
        g2 = x.grad.clone()
        x.grad = None
        x.sin().sum().backward()
        g3 = x.grad.clone()
        x.grad.zero_()
        (x * 2).sum().backward()
        return g1, g2, g3, x.grad
    check(prog, randn(3), requires_grad=True)


def test_retain_graph_twice_accumulates():
    def prog(T, x):
        y = (x.exp() * x).sum()
        y.backward(retain_graph=True)
        y.backward(retain_graph=True)
        y.backward()
        return x.grad
    check(prog, randn(3), requires_grad=True)


def test_backward_inputs_restricts():
    def prog(T, x, y):
        z = (x * y).sum() + x.sum()
        z.backward(inputs=[x], retain_graph=True)
        gx = x.grad.clone()
        gy = y.grad
        z.backward(inputs=y)
        return gx, gy, x.grad, y.grad
    check(prog, randn(3), randn(3), requires_grad=True)


def test_backward_inputs_nonleaf():
    def prog(T, x):
        a = x * 2
        b = (a * a).sum()
        b.backward(inputs=[a])
        return a.grad, x.grad
    check(prog, randn(3), requires_grad=True)


def test_grad_is_not_tracked():
    def prog(T, x):
        (x * x).sum().backward()
        g = x.grad
        return g.requires_grad, g.grad_fn, g.is_leaf, g.dtype, g.shape
    check(prog, randn(2, 2), requires_grad=True, dtype="float32")


def test_set_grad_attribute():
    def prog(T, x):
        x.grad = T.ones(3)
        (x * 2).sum().backward()
        return x.grad
    check(prog, randn(3), requires_grad=True, dtype="float32")


# ----------------------------------------------------------------------------------------------
# grad modes, detach, requires_grad_
# ----------------------------------------------------------------------------------------------

def test_no_grad_context():
    def prog(T, x):
        with T.no_grad():
            y = x * 2
            with T.enable_grad():
                z = x * 3
            w = x + 1
        v = x * 4
        return [(t.requires_grad, t.grad_fn is None, t.is_leaf) for t in (y, z, w, v)] + [y]
    check(prog, randn(3), requires_grad=True)


def test_set_grad_enabled():
    def prog(T, x):
        with T.set_grad_enabled(False):
            a = x * 2
            with T.set_grad_enabled(True):
                b = x * 2
        with T.no_grad(), T.set_grad_enabled(True):
            c = x * 2
        T.set_grad_enabled(False)
        d = x * 2
        T.set_grad_enabled(True)
        e = x * 2
        return [t.requires_grad for t in (a, b, c, d, e)]
    check(prog, randn(3), requires_grad=True)


def test_grad_mode_decorators():
    def prog(T, x):
        @T.no_grad()
        def f(t):
            return t * 2

        @T.no_grad
        def f_bare(t):
            return t * 2

        @T.enable_grad()
        def g(t):
            return t * 2

        @T.set_grad_enabled(False)
        def h(t):
            return t * 2

        with T.no_grad():
            inner = g(x)
        return (f(x).requires_grad, f_bare(x).requires_grad, inner.requires_grad,
                h(x).requires_grad, (x * 2).requires_grad, f.__name__, T.is_grad_enabled())
    check(prog, randn(3), requires_grad=True)


def test_grad_mode_restored_after_exception():
    def prog(T, x):
        try:
            with T.no_grad():
                raise ValueError("boom")
        except ValueError:
            pass

        @T.no_grad()
        def f():
            raise KeyError("k")
        try:
            f()
        except KeyError:
            pass
        return (x * 2).requires_grad, T.is_grad_enabled()
    check(prog, randn(3), requires_grad=True)


def test_detach():
    def prog(T, x):
        y = x * 2
        d = y.detach()
        dx = x.detach()
        dx.add_(1)
        return (d, d.requires_grad, d.grad_fn, d.is_leaf, dx.requires_grad, x, x._version,
                dx._version)
    check(prog, randn(3), requires_grad=True)


def test_requires_grad_():
    def prog(T, x):
        r = x.requires_grad_()
        a = (x * 2)
        x.requires_grad_(False)
        b = x * 2
        x.requires_grad = True
        c = x * 2
        return r is x, a.requires_grad, b.requires_grad, c.requires_grad, a.requires_grad_() is a
    check(prog, randn(3))


def test_requires_grad_leaf_flow():
    def prog(T, x):
        y = x * 2
        y.requires_grad_()
        z = (y * y).sum()
        z.backward()
        return y.is_leaf, y.grad, x.grad, graph_signature(z.grad_fn, (x, y))
    check(prog, randn(3))


# ----------------------------------------------------------------------------------------------
# autograd.grad, autograd.backward, gradcheck
# ----------------------------------------------------------------------------------------------

def test_autograd_grad_basic():
    def prog(T, x, y):
        z = (x * y + x.exp()).sum()
        gx, gy = T.autograd.grad(z, [x, y], retain_graph=True)
        (gx2,) = T.autograd.grad(z, x)
        w = x * y
        (gw,) = T.autograd.grad(w, (y,), grad_outputs=T.ones(3) * 2)
        return gx, gy, gx2, gw, x.grad, y.grad, gx.requires_grad
    check(prog, randn(3), randn(3), requires_grad=True)


def test_autograd_grad_tuple_type():
    def prog(T, x):
        r = T.autograd.grad(x.sum(), x)
        return type(r).__name__, len(r)
    check(prog, randn(2), requires_grad=True)


def test_autograd_grad_allow_unused():
    def prog(T, x, y):
        z = (x * 2).sum()
        return T.autograd.grad(z, [x, y], allow_unused=True)
    check(prog, randn(3), randn(3), requires_grad=True)


def test_autograd_backward_multiple_roots():
    def prog(T, x, y):
        a = x * y
        b = (x + y).sin()
        T.autograd.backward([a, b], [T.ones(3), T.full((3,), 2.0)])
        gx, gy = x.grad.clone(), y.grad.clone()
        T.autograd.backward([(x * 3).sum(), (y * y).sum()])
        return gx, gy, x.grad, y.grad
    check(prog, randn(3), randn(3), requires_grad=True, dtype="float32")


def test_autograd_backward_shared_subgraph():
    def prog(T, x):
        h = x.exp()
        a = h * 2
        b = h.sin()
        h.retain_grad()
        T.autograd.backward((a, b), (T.ones(3, dtype=T.float64), T.ones(3, dtype=T.float64)))
        return x.grad, h.grad
    check(prog, randn(3), requires_grad=True)


GRADCHECK_FNS = {
    "mul_sin": lambda a, b: (a * b).sin(),
    "matmul": lambda a, b: (a @ b.t()).tanh(),
    "softmax": lambda a, b: (a + b).softmax(-1),
    "log_softmax": lambda a, b: (a * b).log_softmax(0),
    "div_exp": lambda a, b: a.exp() / (b * b + 1),
    "views": lambda a, b: a.t().reshape(-1)[1:] * b.view(-1)[:-1],
    "reductions": lambda a, b: a.sum(0) * b.mean(0) + a.amax(1).sum(),
}


@pytest.mark.parametrize("name", list(GRADCHECK_FNS))
def test_gradcheck(name):
    f = GRADCHECK_FNS[name]
    arrays = [randn(2, 3, seed=400), randn(2, 3, seed=401)]
    check(lambda T, a, b: T.autograd.gradcheck(f, (a, b)), *arrays, requires_grad=True)


def test_gradcheck_with_non_requiring_input():
    def prog(T, a, c):
        return T.autograd.gradcheck(lambda u, v: (u * v).exp(), (a, c))
    check(prog, randn(3, seed=402), randn(3, seed=403), requires_grad=(True, False))


def _wrong_grad(a):
    return a * a.detach()  # analytical d/da = a, numerical = 2a


def test_gradcheck_detects_wrong_gradient():
    check(lambda T, a: T.autograd.gradcheck(_wrong_grad, (a,), raise_exception=False),
          randn(3, seed=404), requires_grad=True)
    check(lambda T, a: T.autograd.gradcheck(_wrong_grad, (a,)), randn(3, seed=404),
          requires_grad=True, expect_error=True)


# ----------------------------------------------------------------------------------------------
# the engine
# ----------------------------------------------------------------------------------------------

def test_deep_chain_at_default_recursion_limit():
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        def prog(T, x):
            y = x
            for _ in range(200_000):
                y = y * 1.0001
            y.backward()
            name = type(y.grad_fn).__name__
            del y
            return x.grad, name
        check(prog, np.array(1.0), requires_grad=True, dtype="float32", rtol=1e-3)
    finally:
        sys.setrecursionlimit(old)


def test_deep_mixed_chain_graph_freed():
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        def prog(T, x):
            y = x
            for i in range(5000):
                y = (y.sin() + 1.0) if i % 2 else y * 0.5
            y.sum().backward()
            return x.grad
        check(prog, randn(3), requires_grad=True, dtype="float64")
    finally:
        sys.setrecursionlimit(old)


def test_diamond():
    def prog(T, x):
        a = x.exp()
        b = a.sin()
        c = a.cos()
        d = b * c + a
        a.retain_grad()
        d.sum().backward()
        return x.grad, a.grad, graph_signature(d.grad_fn, (x,))
    check(prog, randn(4), requires_grad=True)


def test_nested_diamonds():
    def prog(T, x):
        y = x
        for _ in range(20):
            y = y.sin() * y.cos() + y * 0.5
        y.sum().backward()
        return x.grad
    check(prog, randn(5), requires_grad=True)


def test_tensor_used_many_times():
    def prog(T, x, w):
        total = x * 0
        for i in range(100):
            total = total + x * (i % 7) + w
        y = x * x * x * x * x * x * x * x
        (total.sum() + y.sum()).backward()
        return x.grad, w.grad
    check(prog, rand_pos(3), randn(3), requires_grad=True)


def test_many_leaves():
    def prog(T, x):
        leaves = [x[i].detach().clone().requires_grad_() for i in range(x.shape[0])]
        total = leaves[0] * 0
        for i, leaf in enumerate(leaves):
            total = total + leaf * (i % 5) + leaf.sin()
        total.backward()
        return T.cat([leaf.grad.reshape(1) for leaf in leaves]), total
    check(prog, randn(1000), dtype="float64")


def test_backward_on_leaf_itself():
    def prog(T, x):
        x.backward(T.full_like(x, 2.0))
        x.sum().backward()
        return x.grad
    check(prog, randn(2, 2), requires_grad=True)


def test_same_input_in_one_op():
    def prog(T, x):
        y = T.cat([x, x, x]) * T.cat([x, x, x])
        z = T.maximum(x, x) + T.where(x > 0, x, x) + x @ x
        (y.sum() + z.sum()).backward()
        return x.grad
    check(prog, randn(4), requires_grad=True)


def test_graph_through_non_requiring_branch():
    def prog(T, x, c):
        a = c * 2
        b = a.exp() * x
        b.sum().backward()
        return x.grad, c.grad, a.grad_fn
    check(prog, randn(3), randn(3), requires_grad=(True, False))


# ----------------------------------------------------------------------------------------------
# autograd errors
# ----------------------------------------------------------------------------------------------

def _backward_twice(T, x):
    y = (x * x).sum()
    y.backward()
    y.backward()


def _backward_twice_retain_then_free(T, x):
    y = x.exp().sum()
    y.backward(retain_graph=True)
    y.backward()
    y.backward()


def _grad_twice(T, x):
    y = x.sin().sum()
    T.autograd.grad(y, x)
    T.autograd.grad(y, x)


def _saved_tensor(T, x):
    a = x * 2
    b = a * a
    a.add_(1)
    b.sum().backward()


def _saved_output(T, x):
    y = x.exp()
    y.add_(1)
    y.sum().backward()


def _saved_output_sigmoid(T, x):
    y = x.sigmoid()
    y.mul_(2)
    y.sum().backward()


def _saved_input_sin(T, x):
    a = x * 1
    y = a.sin()
    a.zero_()
    y.sum().backward()


def _saved_through_view(T, x):
    a = x * 1
    y = a.tanh()
    v = a.view(-1)
    b = v.exp()
    y.fill_(0)
    (y.sum() + b.sum()).backward()


def _saved_leaf_under_no_grad(T, x0):
    x = x0.detach().clone().requires_grad_()
    y = x.exp() * x
    with T.no_grad():
        x.mul_(2)
    y.sum().backward()


def _saved_modified_via_detach(T, x):
    y = x.exp()
    y.detach().zero_()
    y.sum().backward()


def _no_grad_view_modified(T, x):
    a = x * 1
    with T.no_grad():
        v = a[0]
    v.mul_(2)


def _detached_view_modified(T, x):
    a = x.clone()
    y = a.sin()
    a.detach()[0].fill_(0)
    y.sum().backward()


AUTOGRAD_ERRORS = {
    "no_grad_view_modified": (_no_grad_view_modified, (3,)),
    "detached_view_modified": (_detached_view_modified, (3,)),
    "saved_modified_via_detach": (_saved_modified_via_detach, (3,)),
    "backward_twice": (_backward_twice, (3,)),
    "backward_twice_retain": (_backward_twice_retain_then_free, (3,)),
    "grad_twice": (_grad_twice, (3,)),
    "no_grad_fn": (lambda T, x: (x.detach() * 2).sum().backward(), (3,)),
    "no_grad_fn_ctx": (lambda T, x: _no_grad_backward(T, x), (3,)),
    "implicit_nonscalar": (lambda T, x: (x * 2).backward(), (3,)),
    "gradient_shape": (lambda T, x: (x * 2).backward(T.ones(2)), (3,)),
    "numpy_requires_grad": (lambda T, x: x.numpy(), (3,)),
    "numpy_requires_grad_nonleaf": (lambda T, x: (x * 2).numpy(), (3,)),
    "inplace_leaf_add": (lambda T, x: x.add_(1), (3,)),
    "inplace_leaf_mul": (lambda T, x: x.mul_(2), (3,)),
    "inplace_leaf_zero": (lambda T, x: x.zero_(), (3,)),
    "inplace_leaf_fill": (lambda T, x: x.fill_(1.0), (3,)),
    "inplace_leaf_copy": (lambda T, x: x.copy_(T.ones(3)), (3,)),
    "inplace_view_leaf": (lambda T, x: x[0].add_(1), (3,)),
    "inplace_view_leaf_view": (lambda T, x: x.view(-1).mul_(2), (3,)),
    "inplace_view_leaf_t": (lambda T, x: x.t().zero_(), (2, 3)),
    "saved_tensor_modified": (_saved_tensor, (3,)),
    "saved_output_modified": (_saved_output, (3,)),
    "saved_output_sigmoid": (_saved_output_sigmoid, (2, 3)),
    "saved_input_sin": (_saved_input_sin, ()),
    "saved_through_view": (_saved_through_view, (2, 2)),
    "saved_leaf_no_grad": (_saved_leaf_under_no_grad, (3,)),
    "requires_grad_nonleaf": (lambda T, x: (x * 2).requires_grad_(False), (3,)),
    "grad_unused": (lambda T, x: T.autograd.grad((x * 2).sum(), [x, T.ones(2,
                                                 requires_grad=True)]), (3,)),
    "grad_not_requiring": (lambda T, x: T.autograd.grad((x * 2).sum(), [x.detach()]), (3,)),
    "grad_nonscalar": (lambda T, x: T.autograd.grad(x * 2, x), (3,)),
    "grad_assign_shape": (lambda T, x: setattr(x, "grad", T.zeros(2, dtype=x.dtype)), (3,)),
}


def _no_grad_backward(T, x):
    with T.no_grad():
        y = (x * 2).sum()
    y.backward()


@pytest.mark.parametrize("name", list(AUTOGRAD_ERRORS))
@pytest.mark.parametrize("dt", FLOAT_DTYPES)
def test_autograd_errors(name, dt):
    prog, shape = AUTOGRAD_ERRORS[name]
    check(prog, randn(*shape, seed=500), requires_grad=True, dtype=dt, expect_error=True,
          full_message=True)


def _rg_factory(T, dt):
    return T.tensor([1, 0, 1], dtype=dt, requires_grad=True)


def _rg_method(T, dt):
    T.ones(2, dtype=dt).requires_grad_()


def _rg_attribute(T, dt):
    t = T.zeros(2, dtype=dt)
    t.requires_grad = True


def _rg_zeros(T, dt):
    T.zeros(2, dtype=dt, requires_grad=True)


@pytest.mark.parametrize("make", [_rg_factory, _rg_method, _rg_attribute, _rg_zeros])
@pytest.mark.parametrize("dt", ["int64", "int32", "uint8", "bool"])
def test_requires_grad_integer_errors(make, dt):
    assert_same_error(lambda: make(fg, getattr(fg, dt)), lambda: make(torch, getattr(torch, dt)),
                      full=True)


def test_data_modification_is_not_tracked():
    def prog(T, x):
        y = x.exp()
        y.data.mul_(0.5)
        y.sum().backward()
        return x.grad, y._version, y
    check(prog, randn(3), requires_grad=True)


def test_failed_backward_leaves_grads_untouched():
    def prog(T, x, y):
        (x * y).sum().backward()
        try:
            (x * 2).backward()
        except RuntimeError:
            pass
        return x.grad, y.grad
    check(prog, randn(3), randn(3), requires_grad=True)


def test_inplace_leaf_error_leaves_state():
    xf, xt = pair(randn(3), requires_grad=True, dtype="float32")
    assert_same_error(lambda: xf.add_(1), lambda: xt.add_(1), full=True)
    assert xf._version == xt._version == 0
    assert xf.grad_fn is None and xf.is_leaf
    check(lambda T, x: (x, x._version, x.is_leaf), randn(3), requires_grad=True)
