"""`torch._foreach_*` calls inside compiled functions: recorded as their per-tensor ops (one
graph, no break), checked against the same code run eagerly on each backend: model-EMA
updates (`_foreach_lerp_`, `_foreach_mul_`/`_foreach_add_`, a decay that changes per call),
a hand-written foreach Adam step, out-of-place forms under autograd, the other families
(clamps, maximum/minimum, pow of a number, norm, max, clone, copy_, zero_), aliasing within
a list, and calls eager refuses (raised the same, the same tensors left written)."""

from __future__ import annotations

import pytest

import fusegrad as torch
from fusegrad._dynamo import explain

BACKENDS = ["eager", "aot_eager", "inductor"]


def _tensors(seed: int, shapes=((3,), (2, 2), (4,))) -> list:
    torch.manual_seed(seed)
    return [torch.randn(*s) for s in shapes]


def _copies(ts: list) -> list:
    return [t.clone() for t in ts]


def _same(got, want, rtol=1e-6, atol=1e-7) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.allclose(a, b, rtol=rtol, atol=atol), (a, b)


def _one_graph(fn, *args) -> None:
    report = explain(fn)(*args)
    assert report.graph_count == 1 and report.graph_break_count == 0, report.break_reasons


def _ema_update(ema: list, params: list, decay: float) -> None:
    with torch.no_grad():
        torch._foreach_lerp_(ema, params, 1 - decay)


def _ema_mul_add(ema: list, params: list, decay: float) -> None:
    with torch.no_grad():
        torch._foreach_mul_(ema, decay)
        torch._foreach_add_(ema, params, alpha=1 - decay)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("update", [_ema_update, _ema_mul_add])
def test_ema_updates_with_a_changing_decay(backend, update):
    params = _tensors(0)
    ema_eager, ema_compiled = _copies(params), _copies(params)
    compiled = torch.compile(update, backend=backend)
    for step in range(5):
        params = [p + 0.1 * (step + 1) for p in params]
        decay = min(0.999, (1 + step) / (10 + step))  # a warm-up: changes every call
        update(ema_eager, params, decay)
        compiled(ema_compiled, params, decay)
        _same(ema_compiled, ema_eager)
    _one_graph(update, _copies(params), params, 0.5)


def _adam_foreach(params, grads, exp_avg, exp_avg_sq, lr, b1, b2, eps):
    with torch.no_grad():
        torch._foreach_mul_(exp_avg, b1)
        torch._foreach_add_(exp_avg, grads, alpha=1 - b1)
        torch._foreach_mul_(exp_avg_sq, b2)
        torch._foreach_addcmul_(exp_avg_sq, grads, grads, value=1 - b2)
        denom = torch._foreach_sqrt(exp_avg_sq)
        torch._foreach_add_(denom, eps)
        torch._foreach_addcdiv_(params, exp_avg, denom, value=-lr)


@pytest.mark.parametrize("backend", BACKENDS)
def test_hand_written_foreach_adam(backend):
    def state():
        params = _tensors(1)
        return params, [torch.zeros_like(p) for p in params], [torch.zeros_like(p) for p in params]

    eager, compiled_state = state(), state()
    compiled = torch.compile(_adam_foreach, backend=backend)
    for step in range(4):
        grads = _tensors(10 + step)
        _adam_foreach(*eager[:1], grads, *eager[1:], 1e-2, 0.9, 0.999, 1e-8)
        compiled(*compiled_state[:1], grads, *compiled_state[1:], 1e-2, 0.9, 0.999, 1e-8)
        for got, want in zip(compiled_state, eager):
            _same(got, want)
    _one_graph(_adam_foreach, *state()[:1], _tensors(3), *state()[1:], 1e-2, 0.9, 0.999, 1e-8)


def _out_of_place(xs, ys):
    scaled = torch._foreach_mul(xs, 2.0)
    moved = torch._foreach_add(scaled, ys, alpha=0.5)
    squashed = torch._foreach_sigmoid(moved)
    norms = torch._foreach_norm(squashed)
    return sum(n for n in norms) + sum(s.sum() for s in torch._foreach_exp(xs))


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_of_place_forms_under_autograd(backend):
    def leaves(seed):
        return [t.requires_grad_() for t in _tensors(seed)]

    xs_e, ys_e, xs_c, ys_c = leaves(4), leaves(5), leaves(4), leaves(5)
    want = _out_of_place(xs_e, ys_e)
    got = torch.compile(_out_of_place, backend=backend)(xs_c, ys_c)
    assert torch.allclose(got, want, rtol=1e-6)
    want.backward()
    got.backward()
    _same([x.grad for x in xs_c + ys_c], [x.grad for x in xs_e + ys_e], rtol=1e-5, atol=1e-6)
    _one_graph(_out_of_place, leaves(4), leaves(5))


def test_out_of_place_results_keep_their_nodes():
    """Under the eager backend the graph runs the per-tensor ops, so autograd records the
    nodes PyTorch's loops record (`MulBackward0` of a number, ...)."""
    def f(xs):
        return torch._foreach_mul(xs, 2.0), torch._foreach_sqrt(xs)

    xs = [t.abs().requires_grad_() for t in _tensors(6)]
    got = torch.compile(f, backend="eager")(xs)
    want = f(xs)
    assert isinstance(got[0], tuple) and len(got[0]) == 3
    for g, w in zip(got[0] + got[1], want[0] + want[1]):
        assert type(g.grad_fn).__name__ == type(w.grad_fn).__name__
        assert torch.equal(g, w)


def _families(xs, ys, lo):
    with torch.no_grad():
        torch._foreach_clamp_min_(xs, lo)
        torch._foreach_maximum_(ys, xs)
        mins = torch._foreach_minimum(xs, [0.5, 0.25, 0.0])
        powers = torch._foreach_pow(2.0, ys)
        tops = torch._foreach_max(powers)
        copies = torch._foreach_clone(mins)
        torch._foreach_zero_(copies[:1])
        torch._foreach_copy_(copies[1:], mins[:1] * 2)
        sums = torch._foreach_powsum(ys, 1)
    return mins, powers, tops, copies, sums


@pytest.mark.parametrize("backend", BACKENDS)
def test_other_families(backend):
    xs_e, ys_e = _tensors(7, ((3,), (3,), (3,))), _tensors(8, ((3,), (3,), (3,)))
    xs_c, ys_c = _copies(xs_e), _copies(ys_e)
    want = _families(xs_e, ys_e, -0.2)
    got = torch.compile(_families, backend=backend)(xs_c, ys_c, -0.2)
    for g, w in zip(got, want):
        _same(g, w)
    _same(xs_c + ys_c, xs_e + ys_e)
    _one_graph(_families, _copies(xs_e), _copies(ys_e), -0.2)


def test_maximum_in_place_under_grad_mode():
    """`_foreach_maximum_` has no in-place Tensor method: the result is computed and copied
    in (from a clone when autograd records it), as eagerly."""
    def f(xs, ys):
        out = [x * 1 for x in xs]
        torch._foreach_maximum_(out, ys)
        return sum(o.sum() for o in out)

    xs_e = [t.requires_grad_() for t in _tensors(9)]
    xs_c = [t.detach().clone().requires_grad_() for t in xs_e]
    ys = _tensors(10)
    for backend in BACKENDS:
        xs_c = [t.detach().clone().requires_grad_() for t in xs_e]
        got = torch.compile(f, backend=backend)(xs_c, ys)
        want = f(xs_e, ys)
        assert torch.allclose(got, want)
        got.backward()
        xs_e_grads = torch.autograd.grad(f(xs_e, ys), xs_e)
        _same([x.grad for x in xs_c], list(xs_e_grads))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tensor_twice_in_the_list(backend):
    def f(a, b):
        with torch.no_grad():
            torch._foreach_add_([a, a, b], [b, a, a])
            torch._foreach_mul_([a, b, a], 2.0)
        return a, b

    a, b = torch.arange(3.0), torch.ones(3)
    want = f(a.clone(), b.clone())
    got = torch.compile(f, backend=backend)(a.clone(), b.clone())
    _same(got, want)


def _refused(kind: str):
    def f(xs, ys):
        with torch.no_grad() if kind != "leaf" else torch.enable_grad():
            ys = [y * 1 for y in ys]
            if kind == "lengths":
                torch._foreach_add_(xs, ys[:2])
            elif kind == "cast":
                torch._foreach_add_(xs, 0.5)
            else:
                torch._foreach_mul_(xs, 2.0)
        return ys

    return f


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["lengths", "cast", "leaf"])
def test_calls_eager_refuses(backend, kind):
    def inputs():
        xs = _tensors(11)
        if kind == "cast":
            xs[1] = xs[1].long()
        if kind == "leaf":
            xs[2].requires_grad_()
        return xs, _tensors(12)

    f = _refused(kind)
    xs_e, ys = inputs()
    with pytest.raises(RuntimeError) as want:
        f(xs_e, ys)
    xs_c, ys = inputs()
    with pytest.raises(RuntimeError) as got:
        torch.compile(f, backend=backend)(xs_c, ys)
    assert str(got.value) == str(want.value)
    _same([x.detach() for x in xs_c], [x.detach() for x in xs_e])
