"""Custom autograd Functions (forward/backward staticmethods, setup_context style, ctx API,
once_differentiable) against torch: values, gradients, node names and error messages."""

import numpy as np
import pytest
import torch
from oracle import assert_same_error, check, fg, randn

MODULES = (fg, torch)


def make_fns(T):
    """The same family of custom Functions, written against module T."""
    F = T.autograd.Function

    class MyReLU(F):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return input.clamp(min=0)

        @staticmethod
        def backward(ctx, grad_output):
            (input,) = ctx.saved_tensors
            # (the seed writes grad_input[input < 0] = 0: see test_autograd_seed2.py)
            return T.where(input < 0, 0.0, grad_output)

    class Scale(F):
        @staticmethod
        def forward(ctx, x, k):
            ctx.k = k
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None

    class MulAdd(F):  # two tensor inputs, a keyword-free number in between
        @staticmethod
        def forward(ctx, a, alpha, b):
            ctx.save_for_backward(a, b)
            ctx.alpha = alpha
            return a * b + alpha * a

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * (b + ctx.alpha), None, g * a

    class Exp(F):  # saves its own output
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    class SplitTwo(F):  # two outputs
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * x

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 2 + g2 * 0

    class Cube(F):  # setup_context style, differentiable backward
        @staticmethod
        def forward(x):
            return x ** 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            (x,) = inputs
            ctx.save_for_backward(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g

    return {"MyReLU": MyReLU, "Scale": Scale, "MulAdd": MulAdd, "Exp": Exp,
            "SplitTwo": SplitTwo, "Cube": Cube}


def test_myrelu_values_grads_node():
    def prog(T, x):
        y = make_fns(T)["MyReLU"].apply(x)
        (y * T.arange(10.0)).sum().backward()
        return y, y.grad_fn.name(), type(y.grad_fn).__name__, len(y.grad_fn.next_functions)
    check(prog, randn(10), requires_grad=True)


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_non_tensor_argument_and_two_tensor_inputs(dt):
    def prog(T, a, b):
        fns = make_fns(T)
        y = fns["MulAdd"].apply(a, 0.5, b)
        z = fns["Scale"].apply(y, 3.0)
        z.sum().backward()
        names = [type(n).__name__ if n else None for n, _ in y.grad_fn.next_functions]
        return z, names, z.grad_fn.name()
    check(prog, randn(2, 3), randn(2, 3, seed=1), requires_grad=True, dtype=dt)


def test_saved_output_and_double_backward():
    def prog(T, x):
        fns = make_fns(T)
        y = fns["Exp"].apply(x)
        (g,) = T.autograd.grad(y.sum(), x, create_graph=True)
        c = fns["Cube"].apply(x)
        (h,) = T.autograd.grad(c.sum(), x, create_graph=True)
        (h2,) = T.autograd.grad(h.sum(), x)
        return y, g, h, h2, g.grad_fn is not None, y.grad_fn.saved_tensors[0]
    check(prog, randn(4), requires_grad=True)


def test_two_outputs_one_unused_gets_zeros():
    def prog(T, x):
        a, b = make_fns(T)["SplitTwo"].apply(x)
        a.sum().backward()
        return a, b, a.grad_fn is b.grad_fn, a.grad_fn.name()
    check(prog, randn(3), requires_grad=True)


def test_needs_input_grad_and_no_grad():
    def prog(T, x, w):
        seen = []

        class F(T.autograd.Function):
            @staticmethod
            def forward(ctx, a, k, b):
                seen.append(ctx.needs_input_grad)
                return a * b * k

            @staticmethod
            def backward(ctx, g):
                seen.append(ctx.needs_input_grad)
                return None, None, g

        y = F.apply(x, 2, w)
        y.sum().backward()
        with T.no_grad():
            z = F.apply(x, 2, w)
        u = F.apply(x, 2, x)
        return seen, z.requires_grad, z.grad_fn is None, u.requires_grad
    check(prog, randn(3), randn(3, seed=1), requires_grad=(False, True))


def test_mark_non_differentiable_and_materialize():
    def prog(T, x):
        log = []

        class Sort(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                idx = (x * 0).long()
                ctx.mark_non_differentiable(idx)
                return x * 2, idx

            @staticmethod
            def backward(ctx, g, gi):
                log.append((gi.dtype, gi.shape))
                return g * 2

        class NoMat(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(False)
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, g1, g2):
                log.append((g1 is None, g2 is None))
                return g1 * 2

        class Mat(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, g1, g2):
                log.append(g2)
                return g1 * 2 + g2

        y, i = Sort.apply(x)
        y.sum().backward()
        a, _ = NoMat.apply(x)
        a.sum().backward()
        b, _ = Mat.apply(x)
        b.sum().backward()
        return i, i.requires_grad, log
    check(prog, randn(3), requires_grad=True)


def test_mark_non_differentiable_only_output():
    def prog(T, x):
        class F(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x * 2
                ctx.mark_non_differentiable(y)
                return y

            @staticmethod
            def backward(ctx, g):
                return g

        y = F.apply(x)
        return y.requires_grad, y.grad_fn is None, y.sum().backward()
    check(prog, randn(3), requires_grad=True, expect_error=True)


def test_mark_dirty():
    def prog(T, x):
        class MulTwo_(T.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                a.mul_(2)
                ctx.mark_dirty(a)
                return a

            @staticmethod
            def backward(ctx, g):
                return g * 2

        h = x * 1
        y = MulTwo_.apply(h)
        (y * y).sum().backward()
        return y is h, y._version, y.grad_fn.name(), y
    check(prog, randn(3), requires_grad=True)


def _dbl(T):
    class Dbl(T.autograd.Function):
        @staticmethod
        def forward(ctx, a, w):
            a.mul_(w)
            ctx.mark_dirty(a)
            ctx.save_for_backward(w)
            return a

        @staticmethod
        def backward(ctx, g):
            (w,) = ctx.saved_tensors
            return g * w, None
    return Dbl


@pytest.mark.parametrize("where", ["row", "column"])
def test_mark_dirty_on_view(where):
    def prog(T, x):
        w = T.tensor([2.0, 3.0, 4.0]) if where != "column" else T.tensor([2.0, 3.0])
        h = x * 1 if where != "leaf_view" else x
        v = h[1] if where != "column" else h[:, 2]
        y = _dbl(T).apply(v, w)
        (h * T.arange(6.0).reshape(2, 3)).sum().backward()
        return y is v, v.grad_fn.name(), h.grad_fn.name(), v._version, h
    check(prog, randn(2, 3), requires_grad=True)


def test_mark_dirty_view_of_leaf_error():
    # the forward writes into the leaf before the check, in both libraries: compare errors
    assert_same_error(lambda: _dbl(fg).apply(fg.ones(2, 3, requires_grad=True)[0], fg.ones(3)),
                      lambda: _dbl(torch).apply(torch.ones(2, 3, requires_grad=True)[0],
                                                torch.ones(3)))


def test_mark_dirty_leaf_error():
    def prog(T, x):
        class MulTwo_(T.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                a.mul_(2)
                ctx.mark_dirty(a)
                return a

            @staticmethod
            def backward(ctx, g):
                return g * 2

        return MulTwo_.apply(x)
    # the leaf is modified before the check in both libraries; compare the error only
    e = []
    for T in MODULES:
        x = T.tensor(randn(3), requires_grad=True)
        try:
            prog(T, x)
        except RuntimeError as err:
            e.append(str(err))
    assert len(e) == 2 and e[0] == e[1]


def test_input_returned_unchanged_is_a_view():
    def prog(T, x):
        class Same(T.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a

            @staticmethod
            def backward(ctx, g):
                return g * 2

        y = Same.apply(x)
        (y * 3).sum().backward()
        return y is x, y.is_leaf, y._base is x, y.grad_fn.name()
    check(prog, randn(3), requires_grad=True)


def test_once_differentiable():
    def prog(T, x, v):
        from importlib import import_module

        once = import_module(T.__name__ + ".autograd.function").once_differentiable

        class Sq(T.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                ctx.save_for_backward(a)
                return a * a

            @staticmethod
            @once
            def backward(ctx, g):
                (a,) = ctx.saved_tensors
                return 2 * a * g

        y = Sq.apply(x)
        (g1,) = T.autograd.grad(y.sum(), x, create_graph=True)
        (g,) = T.autograd.grad(Sq.apply(x), x, v, create_graph=True)
        info = (g1.requires_grad, g.requires_grad, type(g.grad_fn).__name__,
                g.grad_fn.name(), len(g.grad_fn.next_functions), g)
        if info_only:
            return info
        return info, g.sum().backward()
    info_only = True
    check(prog, randn(3), randn(3, seed=1), requires_grad=True)
    info_only = False
    check(prog, randn(3), randn(3, seed=1), requires_grad=True, expect_error=True)


@pytest.mark.parametrize("case", ["too_few", "too_many", "extra_none", "not_none_for_number",
                                  "bad_shape", "scalar_for_matrix", "bad_type",
                                  "bad_shape_second", "broadcastable", "dtype"])
def test_backward_return_checks(case):
    def prog(T, x, y):
        class F(T.autograd.Function):
            @staticmethod
            def forward(ctx, a, k, b):
                return a * b * k

            @staticmethod
            def backward(ctx, g):
                return {
                    "too_few": lambda: (g,),
                    "too_many": lambda: (g, None, g, g),
                    "extra_none": lambda: (g, None, g, None, None),
                    "not_none_for_number": lambda: (g, g, g),
                    "bad_shape": lambda: (g[0], None, g),
                    "scalar_for_matrix": lambda: (g.sum(), None, g),
                    "bad_type": lambda: (g, None, 3),
                    "bad_shape_second": lambda: (g, None, g[:, :1].t()),
                    "broadcastable": lambda: (g.unsqueeze(0).expand(2, 2, 3), None, g),
                    "dtype": lambda: (g.double(), None, g.double()),
                }[case]()

        F.apply(x, 2.0, y).sum().backward()
        return x.grad.dtype
    check(prog, randn(2, 3), randn(2, 3, seed=1), requires_grad=True, dtype="float32")


@pytest.mark.parametrize("case", ["save_int", "no_forward", "no_backward",
                                  "saved_after_backward", "saved_modified"])
def test_function_errors(case):
    def prog(T, x):
        F = T.autograd.Function
        if case == "save_int":
            class G(F):
                @staticmethod
                def forward(ctx, a, k):
                    ctx.save_for_backward(a, k)
                    return a * k
            return G.apply(x, 2)
        if case == "no_forward":
            class G(F):
                pass
            return G.apply(x)
        if case == "no_backward":
            class G(F):
                @staticmethod
                def forward(ctx, a):
                    return a * 2
            return G.apply(x).sum().backward()
        fns = make_fns(T)
        if case == "saved_after_backward":
            y = fns["Exp"].apply(x)
            y.sum().backward()
            return y.grad_fn.saved_tensors
        h = x * 1
        y = fns["MyReLU"].apply(h)
        h.add_(1)
        return y.sum().backward()
    check(prog, randn(3), requires_grad=True, expect_error=True)


def test_custom_node_in_graph_walk_and_hooks():
    def prog(T, x):
        fns = make_fns(T)
        y = fns["Cube"].apply(x.sin())
        z = (y * 2).sum()
        log = []
        y.grad_fn.register_prehook(lambda go: log.append("pre"))
        y.grad_fn.register_hook(lambda gi, go: log.append(("post", len(gi), len(go))))
        y.register_hook(lambda g: log.append("tensor"))
        z.backward()

        def walk(fn, depth=0, out=None):
            out = [] if out is None else out
            if fn is not None:
                out.append((depth, fn.name()))
                for nxt, _ in fn.next_functions:
                    walk(nxt, depth + 1, out)
            return out
        return log, walk(z.grad_fn)
    check(prog, randn(3), requires_grad=True)


def test_gradcheck_custom_function():
    for T in MODULES:
        x = T.tensor(randn(4), requires_grad=True)
        fns = make_fns(T)
        assert T.autograd.gradcheck(fns["Cube"].apply, (x,))
        assert T.autograd.gradcheck(lambda a, f=fns: f["MulAdd"].apply(a, 0.3, a), (x,))


def test_deprecated_instantiation_warns():
    for T in MODULES:
        class G(T.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a

        with pytest.warns(DeprecationWarning, match="should not be instantiated"):
            G()
    assert_same_error(lambda: _legacy_call(fg), lambda: _legacy_call(torch))


def _legacy_call(T):
    import warnings

    class G(T.autograd.Function):
        def forward(self, a):
            return a
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return G()(T.ones(2))


def test_not_recorded_without_grad_inputs():
    def prog(T, x):
        y = make_fns(T)["Exp"].apply(x)
        return y, y.requires_grad, y.grad_fn is None
    check(prog, randn(3))
    assert np.isfinite(1.0)


def test_apply_binds_keywords_to_forward_parameters():
    """A tensor passed to `apply` by keyword is an input as a positional one is (its
    gradient recorded), and defaults are filled in, as PyTorch binds them (old style and
    setup_context style)."""
    def run(lib):
        class Scale(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a, k=2.0):
                ctx.k = k
                return a * k

            @staticmethod
            def backward(ctx, g):
                return g * ctx.k, None

        class Split(lib.autograd.Function):
            @staticmethod
            def forward(a, k=2.0):
                return a * k

            @staticmethod
            def setup_context(ctx, inputs, output):
                ctx.k = inputs[1]

            @staticmethod
            def backward(ctx, g):
                return g * ctx.k, None

        out = []
        for fn, kwargs in ((Scale, {"a": None}), (Scale, {"k": 3.0}), (Split, {"a": None,
                                                                         "k": 5.0})):
            x = lib.ones(2, requires_grad=True)
            y = fn.apply(**{k: (x if v is None else v) for k, v in kwargs.items()}) \
                if "a" in kwargs else fn.apply(x, **kwargs)
            y.sum().backward()
            out.append((y.requires_grad, x.grad.tolist()))
        return out

    assert run(fg) == run(torch)


def test_forward_mode_needs_the_functions_jvp():
    """jvp/jacfwd through a custom Function without `jvp` raise PyTorch's error (fusegrad
    computes forward-mode products by reverse passes, but the Function's contract is
    PyTorch's)."""
    def run(lib):
        class Double(lib.autograd.Function):
            @staticmethod
            def forward(x):
                return x * 2

            @staticmethod
            def setup_context(ctx, inputs, output):
                pass

            @staticmethod
            def backward(ctx, g):
                return g * 2

        out = []
        for call in (lambda: lib.func.jvp(Double.apply, (lib.ones(3),), (lib.ones(3),)),
                     lambda: lib.func.jacfwd(Double.apply)(lib.ones(3)),
                     lambda: lib.func.jacrev(Double.apply)(lib.ones(3)).tolist()):
            try:
                out.append(("ok", call()))
            except (NotImplementedError, RuntimeError) as e:
                out.append(("error", type(e).__name__, str(e)))
        return out

    assert run(fg) == run(torch)


def test_dirty_input_not_returned_and_output_nr():
    def run(lib):
        class Dirty(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                ctx.mark_dirty(a)
                a.add_(1)
                return a * 2

            @staticmethod
            def backward(ctx, g):
                return g

        out = []
        try:
            Dirty.apply(lib.ones(2, requires_grad=True).clone())
        except RuntimeError as e:
            out.append(str(e))
        x = lib.ones(4, requires_grad=True)
        out.append([x.output_nr, (x * 2).output_nr, x.split(2)[1].output_nr,
                    x.unbind()[3].output_nr])
        return out

    assert run(fg) == run(torch)


@pytest.mark.parametrize("case", ["different classes", "determinism_check"])
def test_transform_and_checkpoint_argument_errors(case):
    def call(lib):
        if case == "determinism_check":
            x = lib.ones(2, requires_grad=True)
            return lib.utils.checkpoint.checkpoint(lambda t: t * 2, x, use_reentrant=False,
                                                   determinism_check="foo")

        class A(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = lib.nn.Linear(2, 2)

        class B(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc2 = lib.nn.Linear(2, 2)

        return lib.func.stack_module_state([A(), B()])

    assert_same_error(lambda: call(fg), lambda: call(torch), full=True)


def test_calling_a_node_returns_as_pytorch():
    """A node called directly gives one input's gradient as a tensor, several as a tuple."""
    def run(lib):
        x = lib.ones(2, requires_grad=True)
        y = lib.ones(2, requires_grad=True)
        out = []
        for node in ((x * 3).sum().grad_fn, (x * y).grad_fn, (x * 2).grad_fn,
                     (x + y).grad_fn, x.neg().grad_fn):
            r = node(lib.tensor(1.0) if node.name() == "SumBackward0" else lib.ones(2))
            out.append((type(r).__name__, [None if t is None else t.tolist()
                                           for t in (r if isinstance(r, tuple) else (r,))]))
        return out

    assert run(fg) == run(torch)


def test_gradient_edges_as_inputs():
    """`autograd.graph.get_gradient_edge` and `grad()` of a GradientEdge (a non-leaf's, a
    leaf's, one of several outputs'), against PyTorch."""
    def run(lib):
        G = lib.autograd.graph
        x = lib.ones(2, requires_grad=True)
        y = x * 2
        z = (y * y).sum()
        e = G.get_gradient_edge(y)
        out = [type(e).__name__, e.node.name(), e.output_nr, e._fields]
        out.append([t.tolist() for t in lib.autograd.grad(z, e, retain_graph=True)])
        out.append([t.tolist() for t in lib.autograd.grad(z, (e, x), retain_graph=True)])
        leaf = G.get_gradient_edge(x)
        out.append((leaf.node.name(), [t.tolist() for t in lib.autograd.grad(z, [leaf])]))
        a, b = lib.ones(4, requires_grad=True).split(2)
        w = (a * 3 + b * 5).sum()
        out.append([t.tolist() for t in lib.autograd.grad(w, G.get_gradient_edge(b))])
        try:
            G.get_gradient_edge(lib.ones(2))
        except RuntimeError as err:
            out.append(str(err))
        return out

    assert run(fg) == run(torch)
