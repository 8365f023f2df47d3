"""`fusegrad.func` against `torch.func` 2.13: `jacfwd`/`hessian` as forward mode computes
them (NaN/inf placement, strides), custom `autograd.Function`s under transforms (`vmap`
rules, PyTorch's errors), vmap over an empty dimension, and the small utilities."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402

LIBS = (torch, fusegrad)


def _desc(obj):
    if isinstance(obj, (torch.Tensor, fusegrad.Tensor)):
        return ("T", obj.detach().numpy().astype(np.float64), str(obj.dtype).split(".")[-1],
                tuple(obj.shape), tuple(obj.stride()))
    if isinstance(obj, dict):
        return "dict", [(k, _desc(v)) for k, v in obj.items()]
    if isinstance(obj, (tuple, list)):
        return type(obj).__name__, [_desc(v) for v in obj]
    return obj


def _same(got, want, strides=True):
    if isinstance(want, tuple) and want and want[0] == "T":
        assert got[0] == "T" and got[2:4] == want[2:4], (got, want)
        if strides:
            assert got[4] == want[4], (got[4], want[4])
        np.testing.assert_allclose(got[1], want[1], rtol=1e-6, atol=1e-12, equal_nan=True)
    elif isinstance(want, tuple) and want and want[0] == "dict":
        assert [k for k, _ in got[1]] == [k for k, _ in want[1]]
        for (_, g), (_, w) in zip(got[1], want[1]):
            _same(g, w, strides)
    elif isinstance(want, tuple):
        assert got[0] == want[0] and len(got[1]) == len(want[1]), (got, want)
        for g, w in zip(got[1], want[1]):
            _same(g, w, strides)
    else:
        assert got == want


def same(fn, strides=True):
    want, got = (_desc(fn(lib)) for lib in LIBS)
    _same(got, want, strides)


def same_error(fn):
    raised = []
    for lib in LIBS:
        with pytest.raises(Exception) as info:
            fn(lib)
        raised.append((type(info.value).__name__, str(info.value)))
    assert raised[1] == raised[0]


def _x(L):
    return L.tensor([1.0, 2.0, 3.0], dtype=L.float64)


JACFWD = {
    "where_sqrt": lambda L: L.func.jacfwd(lambda x: L.where(x > 0, x.sqrt(), x ** 2))(
        L.tensor([-1.0, 4.0])),
    "sqrt_at_zero": lambda L: L.func.jacfwd(L.sqrt)(L.tensor([1.0, 0.0])),
    "outer": lambda L: L.func.jacfwd(lambda a: a.reshape(3, 1) * a)(_x(L)),
    "argnums": lambda L: L.func.jacfwd(lambda a, b: a * b.sum(), argnums=(0, 1))(
        _x(L), _x(L)[:2]),
    "dict_in": lambda L: L.func.jacfwd(lambda d: d["a"] * d["b"].sum())(
        {"a": _x(L), "b": _x(L)[:2]}),
    "dict_out": lambda L: L.func.jacfwd(lambda a: {"s": a.sum(), "p": a * 2})(_x(L)),
    "aux": lambda L: L.func.jacfwd(lambda a: (a.sin(), {"c": a.cos()}), has_aux=True)(_x(L)),
    "integer_output": lambda L: L.func.jacfwd(lambda a: (a > 1).long())(_x(L)),
    "scalar_input": lambda L: L.func.jacfwd(lambda a: a * _x(L))(
        L.tensor(3.0, dtype=L.float64)),
    "hessian_matrix": lambda L: L.func.hessian(lambda a: (a ** 3).sum())(L.ones(2, 3)),
    "hessian_pow_at_zero": lambda L: L.func.hessian(lambda a: (a ** 1.5).sum())(
        L.tensor([1.0, 0.0])),
    "jacfwd_jacrev_where": lambda L: L.func.jacfwd(L.func.jacrev(
        lambda a: L.where(a > 0, a.sqrt(), a ** 2).sum()))(L.tensor([-1.0, 4.0])),
    "vmap_jacfwd": lambda L: L.func.vmap(L.func.jacfwd(L.sin))(L.ones(2, 3)),
    "grad_of_jacfwd": lambda L: L.func.grad(lambda a: L.func.jacfwd(L.sin)(a).sum())(_x(L)),
    "jacfwd_of_grad": lambda L: L.func.jacfwd(L.func.grad(lambda a: a.sin().sum()))(_x(L)),
}


@pytest.mark.parametrize("case", sorted(JACFWD))
def test_jacfwd_matches_forward_mode(case):
    # Nested transforms build their results with other layouts in PyTorch; compare values.
    nested = case in ("vmap_jacfwd", "grad_of_jacfwd", "jacfwd_of_grad", "aux")
    same(JACFWD[case], strides=not nested)


def test_jacfwd_errors():
    F = "func"
    same_error(lambda L: getattr(L, F).jacfwd(lambda a: a, has_aux=True)(_x(L)))
    same_error(lambda L: getattr(L, F).jacfwd(lambda a: (a, 3), has_aux=True)(_x(L)))
    same_error(lambda L: getattr(L, F).jacfwd(lambda a: [a, 3])(_x(L)))
    same_error(lambda L: getattr(L, F).jacfwd(lambda a: a)(L.ones(3, dtype=L.int64)))
    same_error(lambda L: getattr(L, F).jacfwd(lambda a: a)(3.0))
    same_error(lambda L: getattr(L, F).jacfwd(lambda a: a * L.rand(3))(_x(L)))


def test_jacfwd_keeps_history_under_outer_graph():
    for L in LIBS:
        x = _x(L).requires_grad_()
        assert L.func.jacfwd(L.sin)(x).requires_grad


def _functions(L, log):
    class Cube(L.autograd.Function):
        @staticmethod
        def forward(x):
            return x ** 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            return 3 * g * ctx.saved_tensors[0] ** 2

    class Old(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class Generated(Cube):
        generate_vmap_rule = True

    class Ruled(L.autograd.Function):
        @staticmethod
        def forward(x, k):
            return x * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 2, None

        @staticmethod
        def vmap(info, in_dims, x, k):
            log.append((info.batch_size, info.randomness, in_dims, tuple(x.shape), k))
            return x * k + 100, in_dims[0]

    class Pair(Ruled):
        @staticmethod
        def vmap(info, in_dims, x, k):
            log.append(repr(info))
            return (x + k, x.sum(in_dims[0])), (in_dims[0], None)

    return Cube, Old, Generated, Ruled, Pair


def test_custom_function_vmap_rules():
    def run(L):
        log = []
        Cube, Old, Generated, Ruled, Pair = _functions(L, log)
        x = L.arange(6.0).reshape(2, 3)
        res = [
            L.func.vmap(Generated.apply)(x),
            L.func.grad(lambda a: Generated.apply(a).sum())(x),
            L.func.vmap(lambda a: Ruled.apply(a, 3))(x),
            L.func.vmap(lambda a: Ruled.apply(a, 3), in_dims=1)(x),
            L.func.vmap(lambda a, b: Ruled.apply(b, 3), in_dims=(0, None))(x, x[0]),
            L.func.vmap(lambda a: Pair.apply(a, 1.0), out_dims=(0, None))(x),
            L.func.vmap(lambda a: Ruled.apply(a, 2), randomness="same")(x),
        ]
        return res, log

    same(run, strides=False)


def test_custom_function_errors_under_transforms():
    def fns(L):
        return _functions(L, [])

    same_error(lambda L: L.func.vmap(fns(L)[0].apply)(L.ones(3)))
    same_error(lambda L: L.func.vmap(fns(L)[1].apply)(L.ones(3)))
    same_error(lambda L: L.func.grad(lambda a: fns(L)[1].apply(a).sum())(L.ones(3)))
    same_error(lambda L: L.func.jacrev(fns(L)[1].apply)(L.ones(3)))
    # Outside transforms an old-style Function still runs.
    same(lambda L: fns(L)[1].apply(L.ones(3)))


VMAP_EMPTY = {
    "sum": lambda L: L.func.vmap(lambda x: x.sum())(L.ones(0, 3)),
    "scale": lambda L: L.func.vmap(lambda x: x * 2)(L.ones(0, 3)),
    "in_dim_1": lambda L: L.func.vmap(lambda x: x.sum(), in_dims=1)(L.ones(3, 0)),
    "out_dim_1": lambda L: L.func.vmap(lambda x: x * 2, out_dims=1)(L.ones(0, 3)),
    "tuple_out": lambda L: L.func.vmap(lambda x, y: (x @ y, y.long()), in_dims=(0, None))(
        L.ones(0, 2, 3), L.ones(3)),
}


@pytest.mark.parametrize("case", sorted(VMAP_EMPTY))
def test_vmap_over_empty_dimension(case):
    same(VMAP_EMPTY[case], strides=False)


def test_debug_unwrap_and_batch_norm_replacement():
    for L in LIBS:
        x = L.ones(2)
        assert L.func.debug_unwrap(x) is x

    def run(L):
        L.manual_seed(0)
        m = L.nn.Sequential(L.nn.BatchNorm1d(3), L.nn.Linear(3, 3),
                            L.nn.BatchNorm2d(2, affine=False))
        assert L.func.replace_all_batch_norm_modules_(m) is m
        bn = m[0]
        return (bn.running_mean, bn.running_var, bn.num_batches_tracked,
                bn.track_running_stats, sorted(dict(bn.named_buffers())), repr(bn),
                bn(L.tensor([[1.0, 2.0, 3.0], [2.0, 0.0, 1.0]])))

    same(run)


def test_backward_inside_a_transform_raises_as_torch():
    def outcome(lib, transform):
        def f(x):
            y = (x * 2).sum()
            y.backward()
            return y

        try:
            transform(lib)(f)(lib.ones(3, requires_grad=True))
        except RuntimeError as e:
            return str(e)
        return "ran"

    for transform in (lambda lib: lib.func.grad, lambda lib: lib.func.vmap):
        assert outcome(fusegrad, transform) == outcome(torch, transform)


def test_set_multithreading_enabled_is_a_context_and_decorator():
    for lib in (fusegrad, torch):
        with lib.autograd.set_multithreading_enabled(False):
            x = lib.ones(2, requires_grad=True)
            (x * 3).sum().backward()
        assert x.grad.tolist() == [3.0, 3.0]

        @lib.autograd.set_multithreading_enabled(False)
        def f():
            return 7

        assert f() == 7
        assert type(lib.autograd.set_multithreading_enabled(True).clone()).__name__ == \
            "set_multithreading_enabled"
