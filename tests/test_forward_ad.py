"""Forward-mode AD (`autograd.forward_ad`): each program runs on fusegrad and on PyTorch from
the same data; primals, tangents (values, dtypes, whether they require grad), the state
programs change and the errors raised must agree. Programs follow PyTorch's forward-mode
tutorial and the ways models use it (layers, in-place writes and views, custom Functions,
forward-over-reverse Hessian-vector products)."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad

torch = pytest.importorskip("torch")


def _fw(lib):
    return lib.autograd.forward_ad


def _data(*shape, seed=0, dtype="float32"):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _summary(value):
    """What is compared of a program's result: arrays (and None, dtypes, flags) as lists."""
    if isinstance(value, (fusegrad.Tensor, torch.Tensor)):
        return ("tensor", str(value.dtype).replace("fusegrad.", "torch."), tuple(value.shape),
                value.detach().double().numpy(), value.requires_grad)
    if isinstance(value, (list, tuple)):
        return [_summary(v) for v in value]
    if isinstance(value, dict):
        return {k: _summary(v) for k, v in value.items()}
    return value


def _assert_same(a, b, rtol=2e-5, atol=2e-6, where="result"):
    if isinstance(a, tuple) and a and a[0] == "tensor":
        assert b[0] == "tensor", where
        assert a[1:3] == b[1:3], where
        np.testing.assert_allclose(a[3], b[3], rtol=rtol, atol=atol, err_msg=where)
        assert a[4] == b[4], f"{where}: requires_grad"
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, rtol, atol, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _assert_same(a[k], b[k], rtol, atol, f"{where}[{k!r}]")
    else:
        assert a == b, where


def _check(program, **tolerance):
    """Run `program(lib)` on both libraries and compare what it returns."""
    ours = _summary(program(fusegrad))
    theirs = _summary(program(torch))
    _assert_same(ours, theirs, **tolerance)


def _error(program, lib):
    try:
        program(lib)
    except Exception as e:  # (any type: the type is compared)
        return type(e).__name__, str(e)
    return None


def _tangent(lib, t):
    return _fw(lib).unpack_dual(t).tangent


# ---------------------------------------------------------------- the tutorial's programs


def test_dual_tensors_as_the_tutorial_makes_them():
    def program(lib):
        fw = _fw(lib)
        primal = lib.tensor(_data(10, 10))
        tangent = lib.tensor(_data(10, 10, seed=1))
        plain = lib.tensor(_data(10, 10, seed=2))
        with fw.dual_level():
            dual = fw.make_dual(primal, tangent)
            same = fw.unpack_dual(dual).tangent is tangent
            other = fw.make_dual(primal, tangent.T)
            copied = fw.unpack_dual(other).tangent is not tangent
            out = dual ** 2 + plain ** 2
            inside = fw.unpack_dual(out)
        after = fw.unpack_dual(out).tangent
        return [same, copied, inside.primal, inside.tangent, after,
                type(inside).__name__, dual._base is primal, dual.requires_grad]

    _check(program)


def test_modules_with_dual_parameters():
    def program(lib):
        fw = _fw(lib)
        lib.manual_seed(0)
        model = lib.nn.Linear(5, 5)
        inp = lib.tensor(_data(16, 5))
        params = dict(model.named_parameters())
        tangents = {n: lib.tensor(_data(*p.shape, seed=3)) for n, p in params.items()}
        with fw.dual_level():
            for name, p in params.items():
                delattr(model, name)
                setattr(model, name, fw.make_dual(p, tangents[name]))
            out = model(inp)
            # (The tangents' own requires_grad is not compared: PyTorch's follows how its
            # forward formulas are written, fusegrad's whether the tangent depends on a
            # tensor requiring grad.)
            by_attribute = [fw.unpack_dual(out).primal, _tangent(lib, out).detach(),
                            out.requires_grad]
        model = lib.nn.Linear(5, 5)
        params = dict(model.named_parameters())
        with fw.dual_level():
            duals = {n: fw.make_dual(p, tangents[n]) for n, p in params.items()}
            out = lib.func.functional_call(model, duals, inp)
            functional = _tangent(lib, out).detach()
        return by_attribute + [functional]

    _check(program)


def test_custom_function_jvp_and_gradcheck():
    def program(lib):
        fw = _fw(lib)
        seen = []

        class Exp(lib.autograd.Function):
            @staticmethod
            def forward(ctx, foo):
                seen.append(fw.unpack_dual(foo).tangent is None)
                result = lib.exp(foo)
                ctx.result = result
                return result

            @staticmethod
            def jvp(ctx, g):
                out = g * ctx.result
                del ctx.result
                return out

        class Scale(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, y, k):
                ctx.save_for_forward(x, y)
                ctx.k = k
                return x * y * k, x + 1

            @staticmethod
            def jvp(ctx, tx, ty, tk):
                x, y = ctx.saved_tensors
                seen.append(tk is None)
                return tx * y * ctx.k + x * ty * ctx.k, tx

            @staticmethod
            def backward(ctx, g, h):
                return g, g, None

        primal = lib.tensor(_data(4, 4, dtype="float64"), requires_grad=True)
        tangent = lib.tensor(_data(4, 4, seed=1))
        y = lib.tensor(_data(4, 4, seed=2))
        with fw.dual_level():
            dual = fw.make_dual(primal, tangent)
            out = Exp.apply(dual)
            a, b = Scale.apply(fw.make_dual(y, tangent), y, 2.0)
            result = [_tangent(lib, out), _tangent(lib, a), _tangent(lib, b)]
        checked = lib.autograd.gradcheck(
            Exp.apply, (primal,), check_forward_ad=True, check_backward_ad=False,
            check_undefined_grad=False, check_batched_grad=False)
        return result + [checked, seen]

    _check(program)


def test_a_function_without_jvp_is_refused():
    def program(lib):
        fw = _fw(lib)

        class NoJvp(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g

        with fw.dual_level():
            NoJvp.apply(fw.make_dual(lib.ones(2), lib.ones(2)))

    assert _error(program, fusegrad) == _error(program, torch) is not None


# ---------------------------------------------------------------- layers, views, writes


def test_a_small_network_in_training_mode():
    """Convolution, batch norm (its running statistics updated once), pooling, dropout
    (the same mask for the seed) and log-softmax."""
    def program(lib):
        fw = _fw(lib)
        lib.manual_seed(1)
        nn = lib.nn
        net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Flatten(), nn.Dropout(0.3), nn.Linear(36, 5), nn.LogSoftmax(-1))
        x = lib.tensor(_data(2, 3, 8, 8))
        v = lib.tensor(_data(2, 3, 8, 8, seed=1))
        with fw.dual_level():
            y = net(fw.make_dual(x, v))
            got = [fw.unpack_dual(y).primal, _tangent(lib, y)]
        return got + [net[1].running_mean, net[1].num_batches_tracked]

    _check(program, rtol=1e-4, atol=1e-5)


def test_recurrent_attention_and_everyday_ops():
    def program(lib):
        fw = _fw(lib)
        F = lib.nn.functional
        lib.manual_seed(2)
        gru = lib.nn.GRU(4, 6, batch_first=True)
        norm = lib.nn.LayerNorm(6)
        attention = lib.nn.MultiheadAttention(6, 2, batch_first=True)
        x = lib.tensor(_data(2, 5, 4))
        v = lib.tensor(_data(2, 5, 4, seed=1))
        out = {}
        with fw.dual_level():
            h, _ = gru(fw.make_dual(x, v))
            h = norm(h)
            a, w = attention(h, h, h)
            out["attention"] = [_tangent(lib, a), _tangent(lib, w)]
            with lib.no_grad():
                out["no_grad"] = _tangent(lib, (h * 3).tanh().sum(1))
            out["stack"] = _tangent(lib, lib.stack([h.sum(), h.mean(), h.max(), h.norm()]))
            out["cat"] = _tangent(lib, lib.cat([h, lib.ones(2, 5, 6)], dim=0))
            out["softmax"] = _tangent(lib, F.softmax(h, -1))
            target = lib.tensor([0, 1, 2, 3, 4, 5, 0, 1, 2, 3])
            out["cross_entropy"] = _tangent(lib, F.cross_entropy(h.reshape(10, 6), target))
            out["einsum"] = _tangent(lib, lib.einsum("bij,bkj->bik", h, h))
            out["where"] = _tangent(lib, lib.where(h > 0, h, h * 0.1))
            out["split"] = [_tangent(lib, p) for p in h.split(2, dim=1)]
            out["not_floating"] = [_tangent(lib, h > 0), _tangent(lib, h.argmax())]
            out["detached"] = [_tangent(lib, h.detach()), _tangent(lib, lib.zeros_like(h))]
        return out

    _check(program, rtol=1e-4, atol=1e-5)


def test_writes_and_views_share_tangents():
    def program(lib):
        fw = _fw(lib)
        x = lib.tensor(_data(2, 3, 4))
        t = lib.tensor(_data(2, 3, 4, seed=1))
        out = {}
        with fw.dual_level():
            d = fw.make_dual(x, t)
            buf = lib.zeros(3, 3, 4)
            row = buf[0]  # a view made before its base gets a tangent
            buf[1:] = d
            buf[0].add_(d[0] * 2)
            out["buf"] = [_tangent(lib, buf), _tangent(lib, row)]
            q = d.transpose(1, 2).reshape(2, -1)
            q.mul_(2)
            q.relu_()
            out["q"] = [_tangent(lib, q), _tangent(lib, d)]
            v = d.view(2, 12)
            out["view_base"] = _tangent(lib, v)._base is t
            d.mul_(2)  # the tangent given to make_dual is the one written (as PyTorch's)
            out["written"] = [t, _tangent(lib, v)]
            z = lib.zeros(2, 3, 4)
            z.copy_(d)
            z += d
            out["copy"] = _tangent(lib, z)
            out["transpose_"] = _tangent(lib, d.clone().transpose_(0, 2))
        return out

    _check(program)


def test_forward_over_reverse():
    """A gradient computed with history gets its tangent: Hessian-vector products, cross
    terms with another dual input, and parameters' gradients."""
    def program(lib):
        fw = _fw(lib)
        lib.manual_seed(0)
        x = lib.tensor(_data(5, dtype="float64"), requires_grad=True)
        v = lib.tensor(_data(5, seed=1, dtype="float64"))
        w = lib.tensor(_data(5, seed=2, dtype="float64"))
        tw = lib.tensor(_data(5, seed=3, dtype="float64"))
        lin = lib.nn.Linear(5, 3).double()

        def loss(x, w):
            return (x.exp() * x.sin() * w).sum() + (x[:-1] * x[1:]).sum() + \
                lin(x * w).tanh().pow(2).sum() + lib.softmax(x * w, 0).log().sum()

        out = {}
        with fw.dual_level():
            xd = fw.make_dual(x, v)
            wd = fw.make_dual(w, tw)
            (g,) = lib.autograd.grad(loss(xd, w), x, create_graph=True)
            out["hvp"] = _tangent(lib, g)
            (g,) = lib.autograd.grad(loss(x, wd), x, create_graph=True)
            out["cross"] = _tangent(lib, g)
            got = lib.autograd.grad(loss(xd, wd), [x, *lin.parameters()], create_graph=True)
            out["all"] = [_tangent(lib, g) for g in got]
        return out

    _check(program, rtol=1e-9, atol=1e-10)


def test_tangents_against_func_jvp():
    """The tangent of a composite function equals `func.jvp`'s (and PyTorch's)."""
    def program(lib):
        fw = _fw(lib)

        def f(x):
            return (x.sin() * x.cos()).sum(0) + lib.logsumexp(x, 0) + x.norm(dim=0) ** 2

        x = lib.tensor(_data(4, 3, dtype="float64"))
        v = lib.tensor(_data(4, 3, seed=1, dtype="float64"))
        with fw.dual_level():
            forward = _tangent(lib, f(fw.make_dual(x, v)))
        return [forward, lib.func.jvp(f, (x,), (v,))[1]]

    ours = _summary(program(fusegrad))
    _assert_same(ours[0], ours[1], rtol=1e-12, atol=1e-12)
    _assert_same(ours, _summary(program(torch)), rtol=1e-10, atol=1e-12)


def test_reverse_over_forward_through_parameters():
    """A tangent depending on a parameter keeps its history: a loss on the
    Jacobian-vector product trains the parameter."""
    def program(lib):
        fw = _fw(lib)
        lib.manual_seed(3)
        model = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.Tanh(), lib.nn.Linear(8, 2))
        x = lib.tensor(_data(6, 4))
        v = lib.tensor(_data(6, 4, seed=1))
        with fw.dual_level():
            y = model(fw.make_dual(x, v))
            jvp = _tangent(lib, y)
            penalty = (jvp ** 2).sum() + y.pow(2).mean()
        penalty.backward()
        return [jvp, penalty] + [p.grad for p in model.parameters()]

    _check(program, rtol=1e-4, atol=1e-6)


# ---------------------------------------------------------------- reprs and errors


def test_repr_shows_the_tangent():
    def program(lib):
        fw = _fw(lib)
        with fw.dual_level():
            d = fw.make_dual(lib.tensor([1.5, -2.0]), lib.tensor([0.5, 1.0]))
            s = fw.make_dual(lib.tensor(1.0), lib.tensor(3.0))
            p = lib.tensor([1.0, 2.0], requires_grad=True)
            dp = fw.make_dual(p, lib.tensor([1.0, 1.0]))
            texts = [repr(d), repr(lib.tensor(2.0) * s), repr((dp * 2).sum()), repr(d * 2)]
        return texts + [repr(d * 2)]

    ours = program(fusegrad)
    theirs = program(torch)
    assert ours[:2] == theirs[:2] and ours[4] == theirs[4]
    # (the names of the tangents' own nodes are the backward pass's here)
    for a, b in zip(ours[2:4], theirs[2:4]):
        assert a.split("tangent=")[0] == b.split("tangent=")[0]


@pytest.mark.parametrize("case", [
    "no_level", "integer_primal", "integer_tangent", "size", "twice", "nested", "exit_none",
])
def test_errors_as_pytorch(case):
    def program(lib):
        fw = _fw(lib)
        x = lib.ones(3)
        if case == "no_level":
            return fw.make_dual(x, x)
        if case == "exit_none":
            return fw.exit_dual_level()
        with fw.dual_level():
            if case == "integer_primal":
                fw.make_dual(lib.arange(3), x)
            elif case == "integer_tangent":
                fw.make_dual(x, lib.arange(3))
            elif case == "size":
                fw.make_dual(x, lib.ones(4))
            elif case == "twice":
                d = fw.make_dual(x, x)
                fw.make_dual(d[0:2], lib.ones(2))
            elif case == "nested":
                with fw.dual_level():
                    pass

    assert _error(program, fusegrad) == _error(program, torch) is not None


def test_level_numbers_and_unpacking_outside():
    def program(lib):
        fw = _fw(lib)
        x = lib.ones(2)
        outside = fw.unpack_dual(x)
        level = fw.enter_dual_level()
        fw.exit_dual_level()
        return [outside.primal is x, outside.tangent, level]

    assert program(fusegrad) == program(torch)


def test_level_leaves_no_state_behind():
    """After the level, ops run on the eager path again and no tangent is kept."""
    from fusegrad._thread_state import local

    fw = _fw(fusegrad)
    x = fusegrad.ones(3, requires_grad=True)
    with fw.dual_level():
        y = fw.make_dual(x, fusegrad.ones(3)) * 2
    assert local.modes == () and not fw._TANGENTS and not fw._BY_ARRAY
    assert fw.unpack_dual(y).tangent is None
    (y.sum()).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])


@pytest.mark.parametrize("backend", ["inductor", "aot_eager", "eager"])
def test_compiled_code_at_a_level_runs_its_ops(backend):
    """A compiled function or module called at an open level gives eager's tangents (its
    generated kernels would bypass the ops that make them)."""
    fw = _fw(fusegrad)
    fusegrad.manual_seed(0)
    model = fusegrad.nn.Sequential(fusegrad.nn.Linear(3, 4), fusegrad.nn.Tanh())

    def f(x):
        return (x.sin() * 2).sum(0)

    compiled_f = fusegrad.compile(f, backend=backend)
    compiled_model = fusegrad.compile(model, backend=backend)
    x = fusegrad.tensor(_data(2, 3))
    v = fusegrad.tensor(_data(2, 3, seed=1))
    compiled_f(x), compiled_model(x)  # (compiled before the level opens)
    with fw.dual_level():
        got = [_tangent(fusegrad, compiled_f(fw.make_dual(x, v))),
               _tangent(fusegrad, compiled_model(fw.make_dual(x, v)))]
        want = [_tangent(fusegrad, f(fw.make_dual(x, v))),
                _tangent(fusegrad, model(fw.make_dual(x, v)))]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-7)


def test_forward_transforms_inside_a_level_as_pytorch():
    def errors(lib):
        fw = _fw(lib)
        x = lib.ones(2)
        found = []
        with fw.dual_level():
            for transform in (lambda: lib.func.jvp(lib.sin, (x,), (x,)),
                              lambda: lib.func.linearize(lib.sin, x),
                              lambda: lib.func.jacfwd(lib.sin)(x)):
                try:
                    transform()
                except RuntimeError as e:
                    found.append(str(e))
        return found

    assert errors(fusegrad) == errors(torch) and len(errors(torch)) == 3
