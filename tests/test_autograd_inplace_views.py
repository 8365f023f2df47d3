"""In-place operations on views of non-leaf tensors (CopySlices and view replay) against
torch, the in-place form of every pointwise registry op, grad modes and anomaly detection."""

import warnings

import numpy as np
import pytest
import test_ops_registry as reg
import torch
from oracle import check, fg, graph_signature, randn

from fusegrad.ops import REGISTRY


def cot(T, t, seed=7):
    return T.tensor(np.random.default_rng(seed).standard_normal(tuple(t.shape)), dtype=t.dtype)


def run(prog):
    """prog(T, *xs) -> h; also backprop a random cotangent through h and report its graph."""
    def wrapped(T, *xs):
        h = prog(T, *xs)
        sig = graph_signature(h.grad_fn, xs)
        (h * cot(T, h)).sum().backward()
        return h, sig, h._version
    return wrapped


VIEW_CASES = {
    "setitem_row": (lambda T, x: _setitem_row(x), [(3, 4)]),
    "t_slice_mul_": (lambda T, x: _t_slice_mul(x), [(4, 5)]),
    "view_add_": (lambda T, x: _view_add(x), [(2, 3)]),
    "select_then_slice": (lambda T, x: _sel_slice(x), [(3, 4)]),
    "two_writes_overlapping": (lambda T, x: _overlap(x), [(4, 4)]),
    "write_other_tensor": (lambda T, x, y: _write_other(x, y), [(3, 4), (4,)]),
    "chain_of_views": (lambda T, x: _chain(x), [(2, 3, 4)]),
    "diagonal_write": (lambda T, x: _diag(x), [(3, 3)]),
    "copy_into_view": (lambda T, x, y: _copy(x, y), [(3, 4), (2, 4)]),
    "unsqueeze_expand_read": (lambda T, x: _unsq(x), [(3,)]),
    "transpose_then_exp_": (lambda T, x: _tr_exp(x), [(2, 3)]),
    "zero_and_fill": (lambda T, x: _zero_fill(x), [(3, 4)]),
}


def _setitem_row(x):
    h = x * 2
    h[1] = h[1] * 3
    return h


def _t_slice_mul(x):
    h = x.sin()
    h.t()[1:3].mul_(2)
    return h


def _view_add(x):
    h = x * 1
    h.view(-1).add_(1)
    return h


def _sel_slice(x):
    h = x.exp()
    h[2][1:3].mul_(h[0][:2].detach().clone())
    return h


def _overlap(x):
    h = x * 1
    h[1:3].mul_(2)
    h[:, 2:].sin_()
    h[2].add_(h[0] * h[3])
    return h


def _write_other(x, y):
    h = x * 1
    h[0].mul_(y)
    h[:, 1] += y[:3]
    return h


def _chain(x):
    h = x + 0
    v = h.permute(2, 0, 1)[1:3].transpose(1, 2)
    v.mul_(v.detach() + 1)
    return h


def _diag(x):
    h = x * 1
    h.diagonal().mul_(3)
    return h


def _copy(x, y):
    h = x * 1
    h[1:].copy_(y.tanh())
    return h


def _unsq(x):
    h = x * 1
    v = h.unsqueeze(0)
    v.mul_(2)
    return v.expand(2, 3) * h


def _tr_exp(x):
    h = x * 1
    h.t().exp_()
    return h


def _zero_fill(x):
    h = x * 1
    h[0].zero_()
    h[:, 1].fill_(2.5)
    return h


@pytest.mark.parametrize("name", list(VIEW_CASES))
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_inplace_on_view_of_non_leaf(name, dt):
    prog, shapes = VIEW_CASES[name]
    arrays = [randn(*s, seed=i) for i, s in enumerate(shapes)]
    check(run(prog), *arrays, requires_grad=True, dtype=dt)


def test_view_sees_base_history_after_inplace():
    def prog(T, x):
        h = x * 2
        v = h[1]
        h.mul_(3)  # the view's history is regenerated from the new base
        out = v.exp()
        out.sum().backward()
        return v, v.grad_fn.name(), out
    check(prog, randn(3, 2), requires_grad=True)


def test_double_backward_through_copyslices():
    def prog(T, x):
        h = x * x
        h[0].mul_(h[1].clone())
        (g,) = T.autograd.grad(h.sum(), x, create_graph=True)
        (gg,) = T.autograd.grad((g * g).sum(), x)
        return h, g, gg
    check(prog, randn(2, 3), requires_grad=True, dtype="float64")


def test_retain_grad_follows_inplace():
    def prog(T, x):
        h = x * 2
        h.retain_grad()
        h.mul_(3)
        g = x * 1
        g.retain_grad()
        v = g[1]
        v.retain_grad()
        v.add_(1)
        (h * g).sum().backward()
        return h.grad, g.grad, v.grad
    check(prog, randn(2, 3), requires_grad=True)


def test_retain_grad_and_hook_on_view_base():
    def prog(T, x):
        log = []
        h = x * 2
        h.retain_grad()
        v = h[0]
        v.mul_(5)
        h.register_hook(lambda g: log.append(g.clone()))
        h.sum().backward()
        return log, h.grad
    check(prog, randn(2, 3), requires_grad=True)


@pytest.mark.parametrize("case", ["leaf_view", "saved_then_modified", "no_grad_view",
                                  "detach_view", "alias_saved"])
def test_inplace_view_errors(case):
    def prog(T, x):
        if case == "leaf_view":
            x[0].mul_(2)
        elif case == "saved_then_modified":
            h = x * 1
            y = h.exp()
            y[0].mul_(2)
            y.sum().backward()
        elif case == "alias_saved":  # the saved operand aliases the written tensor: saved
            # versions are taken before the write, as in PyTorch (an op that saves an operand
            # its gradients do not need would raise here where PyTorch does not: addcmul_)
            h = x * 1
            h[0].mul_(h[0].detach())
            h.sum().backward()
        elif case == "no_grad_view":
            h = x * 1
            with T.no_grad():
                v = h[0]
            v.mul_(2)
        else:
            h = x * 1
            h[0].detach_()
        return x
    check(prog, randn(2, 3), requires_grad=True, expect_error=True)


# ---------------------------------------------------------------------------------------------
# every pointwise op has an in-place form, and it differentiates like torch's on a view
# ---------------------------------------------------------------------------------------------

_POINTWISE_MODULES = ("fusegrad.ops.arithmetic", "fusegrad.ops.unary", "fusegrad.ops.comparison",
                      "fusegrad.ops._util", "numpy")


def _pointwise():
    seen = {}
    for n, op in REGISTRY.items():
        if op.inplace or getattr(op.kernel, "__module__", None) not in _POINTWISE_MODULES:
            continue
        method = op.public + "_"
        if hasattr(torch.Tensor, method) and method not in seen:
            seen[method] = n
    return seen


POINTWISE = _pointwise()


def _params():
    for method, name in sorted(POINTWISE.items()):
        yield pytest.param(method, name, id=method)


@pytest.mark.parametrize("method, name", list(_params()))
def test_pointwise_inplace_form_on_view(method, name):
    assert hasattr(fg.Tensor, method), f"fusegrad.Tensor has no {method}"
    op = REGISTRY[name]
    sample = next(s for s in reg._samples(op, np.float64)
                  if isinstance(s.args[0], np.ndarray) and s.args[0].ndim >= 1)
    arrays = sample.args

    def prog(T, *args):
        first = args[0]
        h = first * 1 if first.is_floating_point() else first.clone()
        v = h.view(h.shape)
        if method in ("addcmul_", "addcdiv_"):  # value is keyword-only
            out = getattr(v, method)(*args[1:3], value=args[3])
        else:
            out = getattr(v, method)(*args[1:])
        res = [out is v, h]
        if h.requires_grad:
            (h * cot(T, h)).sum().backward()
        return res
    rg = tuple(isinstance(a, np.ndarray) and a.dtype.kind == "f" for a in arrays)
    check(prog, *arrays, requires_grad=rg, dtype=None, rtol=1e-7, atol=1e-9)


def test_pointwise_inplace_coverage_list_is_current():
    missing = {m for m in POINTWISE if not hasattr(fg.Tensor, m)}
    assert not missing, f"pointwise ops without an in-place form: {missing}"


# ---------------------------------------------------------------------------------------------
# grad modes and detach_
# ---------------------------------------------------------------------------------------------


def test_inference_mode():
    def prog(T, x):
        states = [T.is_inference_mode_enabled(), T.is_grad_enabled()]
        with T.inference_mode():
            y = x * 2
            states += [T.is_inference_mode_enabled(), T.is_grad_enabled()]
            with T.inference_mode(False):
                states.append(T.is_inference_mode_enabled())
        states += [T.is_inference_mode_enabled(), T.is_grad_enabled()]

        @T.inference_mode()
        def f(a):
            return a * 3, T.is_inference_mode_enabled()

        @T.inference_mode
        def g(a):
            return a * 4
        z, flag = f(x)
        return states, y.requires_grad, z.requires_grad, flag, g(x).requires_grad, y
    check(prog, randn(3), requires_grad=True)


def test_grad_mode_nesting_with_inference():
    def prog(T, x):
        out = []
        with T.no_grad():
            with T.enable_grad():
                out.append((x * 2).requires_grad)
                with T.inference_mode():
                    out.append((x * 2).requires_grad)
                out.append(T.is_grad_enabled())
        with T.set_grad_enabled(False):
            out.append((x * 2).requires_grad)
        return out
    check(prog, randn(3), requires_grad=True)


def test_detach_():
    def prog(T, x):
        h = x * 2
        y = h.exp()
        h.detach_()
        z = (h * y).sum()
        z.backward()
        return h.requires_grad, h.is_leaf, h.grad_fn is None, z
    check(prog, randn(3), requires_grad=True)


# ---------------------------------------------------------------------------------------------
# anomaly detection
# ---------------------------------------------------------------------------------------------


def _anomaly_run(T, make_nan_in_custom):
    x = T.tensor([0.0, 1.0, 4.0], requires_grad=True)

    class BadSqrt(T.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a.sqrt()

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g / (a * 0)  # the upstream gradient is 0: 0 / 0 is NaN

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with T.autograd.detect_anomaly():
            if make_nan_in_custom:
                y = BadSqrt.apply(x)  # FORWARD-LINE-CUSTOM
            else:
                y = x.sqrt()  # FORWARD-LINE-SQRT
            loss = (y * 0).sum()
            try:
                loss.backward()
                err = None
            except RuntimeError as e:
                err = str(e)
    return err, [str(m.message) for m in w], [m.category for m in w]


@pytest.mark.parametrize("custom", [True, False])
def test_anomaly_reports_nan_with_forward_line(custom):
    res = {T: _anomaly_run(T, custom) for T in (fg, torch)}
    (e_fg, w_fg, c_fg), (e_th, w_th, c_th) = res[fg], res[torch]
    assert e_th is not None and e_fg == e_th
    assert c_fg == c_th == [UserWarning, UserWarning]
    assert w_fg[0] == w_th[0]  # "Anomaly Detection has been enabled. ..."
    head_fg, _, tb_fg = w_fg[1].partition("\n")
    head_th, _, tb_th = w_th[1].partition("\n")
    assert head_fg == head_th  # "Error detected in XBackward. Traceback of forward call..."
    marker = "FORWARD-LINE-CUSTOM" if custom else "FORWARD-LINE-SQRT"
    assert marker in tb_th and marker in tb_fg
    assert "test_autograd_inplace_views.py" in tb_fg


def test_set_detect_anomaly_check_nan_false_and_flags():
    def prog(T, x):
        flags = [T.is_anomaly_enabled()]
        with T.autograd.set_detect_anomaly(True, check_nan=False):
            flags += [T.is_anomaly_enabled(), T.is_anomaly_check_nan_enabled()]
            y = x.sqrt()
            (y * 0).sum().backward()
        flags += [T.is_anomaly_enabled(), T.is_anomaly_check_nan_enabled()]
        T.autograd.set_detect_anomaly(True)
        flags.append(T.is_anomaly_enabled())
        T.autograd.set_detect_anomaly(False)
        return flags, "traceback_" in y.grad_fn.metadata
    check(prog, np.array([0.0, 1.0]), requires_grad=True)


def test_anomaly_error_in_backward_warns_and_propagates():
    def prog(T, x):
        class Boom(T.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 1

            @staticmethod
            def backward(ctx, g):
                raise ValueError("boom in backward")

        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with T.autograd.set_detect_anomaly(True):
                y = Boom.apply(x)
                try:
                    y.sum().backward()
                except ValueError as e:
                    return str(e), [str(m.message).split(".")[0] for m in w]
    check(prog, randn(3), requires_grad=True)


# ---------------------------------------------------------------------------------------------
# random chains of views and in-place writes on a non-leaf, against torch
# ---------------------------------------------------------------------------------------------

_VIEWS = ["h[{i}]", "h[:, {j}]", "h[{a}:{b}]", "h.t()[{c}:{d}]", "h.view(-1)[{e}:{f}]",
          "h.diagonal()", "h[{a}:{b}, {c}:{d}]", "h.transpose(0, 1)[{j}]", "h.narrow(1, {c}, 2)",
          "h.unsqueeze(0)[0, {i}]"]
_OPS = ["v.mul_({s})", "v.add_({s})", "v.sin_()", "v.mul_(v.detach() * 0 + {s})", "v.tanh_()",
        "v.mul_(w[:v.shape[0]] if v.dim() == 1 else {s})", "v.sub_(v * {s})", "v.zero_()",
        "v.copy_(v.detach().exp())", "v.div_({s} + 1.5)",
        "v.addcmul_(v.detach().clone(), v.detach().clone())",
        "v.sigmoid_()"]


def _random_program(seed):
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(int(rng.integers(1, 4))):
        a = int(rng.integers(0, 3))
        c = int(rng.integers(0, 3))
        fmt = {"i": int(rng.integers(0, 4)), "j": int(rng.integers(0, 4)), "a": a,
               "b": a + int(rng.integers(1, 3)), "c": c, "d": c + int(rng.integers(1, 3)),
               "e": int(rng.integers(0, 8)), "f": int(rng.integers(9, 16)),
               "s": round(float(rng.uniform(-2, 2)), 3)}
        lines.append("v = " + _VIEWS[rng.integers(len(_VIEWS))].format(**fmt))
        lines.append(_OPS[rng.integers(len(_OPS))].format(**fmt))
    return lines


@pytest.mark.parametrize("seed", range(40))
def test_random_inplace_view_programs(seed):
    lines = _random_program(seed)

    def prog(T, x, w):
        h = x * 1
        env = {"h": h, "w": w, "T": T}
        for line in lines:
            exec(line, env)
        out = (h * cot(T, h)).sum() + env["v"].sum()
        out.backward()
        return h, env["v"], h._version
    check(prog, randn(4, 4, seed=seed), randn(4, seed=seed + 1), requires_grad=True)


def _outcome(fn, T):
    """What `fn(T)` gives: its value as a list, or its error's type and message."""
    try:
        out = fn(T)
    except RuntimeError as e:
        return ("RuntimeError", str(e))
    return ("ok", None if out is None else np.asarray(out.detach()).tolist())


def _nograd_view(T, requires_grad=True):
    a = T.ones(5, requires_grad=requires_grad)
    b = a * 1
    with T.no_grad():
        v0 = b[1:]
    return a, b, v0


NO_GRAD_VIEW_CHAINS = {
    # a view (made with grad on) of a view made under no_grad, written in place
    "slice_mul_": lambda T: _nograd_view(T)[2][1:].mul_(2),
    "view_add_": lambda T: _nograd_view(T)[2].view(4).add_(1),
    "two_levels": lambda T: _nograd_view(T)[2][1:][:2].mul_(2),
    "select": lambda T: _nograd_view(T)[2].unsqueeze(0).squeeze(0).select(0, 1).mul_(2),
    "expand": lambda T: _nograd_view(T)[2].transpose(0, 0).expand(4).mul_(2),
    "plain_base": lambda T: _nograd_view(T, False)[2][1:].mul_(2),
    "plain_base_grad_operand": lambda T: _nograd_view(T, False)[2][1:].mul_(
        T.ones(3, requires_grad=True)),
    "under_no_grad": lambda T: _under_no_grad(T),
    # its history read after its base changed in place (with grad on, or under no_grad)
    "base_modified": lambda T: _base_modified(T, grad=True),
    "base_modified_no_grad": lambda T: _base_modified(T, grad=False),
    "base_modified_plain": lambda T: _base_modified(T, grad=True, requires_grad=False),
    "backward_after_base_modified": lambda T: _backward_after(T),
    # a view of a leaf made under no_grad, the leaf changed in place (as an optimizer does)
    "leaf_view_use": lambda T: _leaf_view(T)[1] * 1,
    "leaf_view_sum": lambda T: _leaf_view(T)[1].sum(),
    "leaf_view_clone": lambda T: _leaf_view(T)[1].clone(),
    "leaf_view_flags": lambda T: T.tensor([float(_leaf_view(T)[1].requires_grad)]),
    "leaf_view_is_leaf": lambda T: T.tensor([float(_leaf_view(T)[1].is_leaf)]),
    "leaf_view_detach": lambda T: _leaf_view(T)[1].detach().sum(),
    "leaf_view_under_no_grad": lambda T: _leaf_view_no_grad_use(T),
    "leaf_view_made_after": lambda T: _leaf_view(T, after=True)[1] * 1,
    "plain_view_base_changed": lambda T: _leaf_view(T, requires_grad=False)[1] * 1,
}


def _leaf_view(T, requires_grad=True, after=False):
    p = T.ones(4, requires_grad=requires_grad)
    with T.no_grad():
        if not after:
            v = p[:2]
        p.add_(1)
        if after:
            v = p[:2]
    return p, v


def _leaf_view_no_grad_use(T):
    v = _leaf_view(T)[1]
    with T.no_grad():
        return v * 1


def _under_no_grad(T):
    v = _nograd_view(T)[2][1:]
    with T.no_grad():
        v.mul_(2)
    return v


def _base_modified(T, grad, requires_grad=True):
    _, b, v0 = _nograd_view(T, requires_grad)
    v = v0[1:]
    with T.set_grad_enabled(grad):
        b.mul_(3)
    return T.tensor(float(v.grad_fn is None))


def _backward_after(T):
    a, b, v0 = _nograd_view(T)
    v = v0[1:]
    b.mul_(3)
    (v * 1).sum().backward()
    return a.grad


@pytest.mark.parametrize("name", sorted(NO_GRAD_VIEW_CHAINS))
def test_views_of_no_grad_views(name):
    """A view of a view made under no_grad keeps that origin, as PyTorch's views do: writing
    into it with grad on, or reading its history once its base changed, raises PyTorch's
    error naming the view's op."""
    fn = NO_GRAD_VIEW_CHAINS[name]
    assert _outcome(fn, fg) == _outcome(fn, torch)


def test_repr_of_a_view_whose_history_is_invalid():
    """A view made under no_grad whose storage changed since prints `grad_fn=<Invalid>`."""
    texts = []
    for T in (fg, torch):
        v = _leaf_view(T)[1]
        texts.append(repr(v))
    assert texts[0] == texts[1]
