"""Hooks against torch: tensor hooks (leaf and non-leaf), node pre/post hooks, retain_grad,
post-accumulate hooks, their call order and return values, and saved_tensors_hooks."""

import pytest
import torch
from oracle import assert_same_error, check, fg, randn


def test_call_order_tensor_pre_node_post():
    def prog(T, x):
        log = []
        y = x * 2
        z = y.exp()
        y.register_hook(lambda g: log.append(("tensor y", g.shape)))
        y.grad_fn.register_prehook(lambda go: log.append(("pre Mul", len(go))))
        y.grad_fn.register_hook(lambda gi, go: log.append(("post Mul", len(gi), len(go))))
        z.grad_fn.register_prehook(lambda go: log.append("pre Exp"))
        z.grad_fn.register_hook(lambda gi, go: log.append("post Exp"))
        z.register_hook(lambda g: log.append("tensor z"))
        x.register_hook(lambda g: log.append("tensor x"))
        x.register_post_accumulate_grad_hook(lambda t: log.append(("post acc", t.grad.shape)))
        y.retain_grad()
        z.sum().backward()
        return log, y.grad, x.grad
    check(prog, randn(3), requires_grad=True)


def test_hooks_replace_gradients():
    def prog(T, x, w):
        y = x * w
        y.register_hook(lambda g: g * 10)
        x.register_hook(lambda g: g + 1)  # leaf: runs before accumulation
        z = y.sin()
        z.grad_fn.register_hook(lambda gi, go: (gi[0] * 3,))
        y.grad_fn.register_prehook(lambda go: (go[0] - 1,))
        z.sum().backward()
        return z
    check(prog, randn(3), randn(3, seed=1), requires_grad=True)


def test_multiple_hooks_run_in_registration_order_and_remove():
    def prog(T, x):
        log = []
        y = x.exp()
        y.register_hook(lambda g: log.append(1) or g * 2)
        h = y.register_hook(lambda g: log.append(2) or g * 3)
        y.register_hook(lambda g: log.append(3))
        y.sum().backward(retain_graph=True)
        first = x.grad.clone()
        h.remove()
        x.grad = None
        y.sum().backward()
        return log, first, x.grad
    check(prog, randn(3), requires_grad=True)


def test_hook_sees_gradient_once_per_backward_when_used_twice():
    def prog(T, x):
        log = []
        y = x * 3
        y.register_hook(lambda g: log.append(g.clone()))
        (y * y + y).sum().backward()
        return log
    check(prog, randn(3), requires_grad=True)


def test_retain_grad_sees_hooked_value():
    def prog(T, x):
        y = x * 2
        y.retain_grad()
        y.register_hook(lambda g: g * 5)  # registered after retain_grad: still before it
        y.sum().backward()
        return y.grad, x.grad
    check(prog, randn(3), requires_grad=True)


def test_post_accumulate_grad_hook_sees_accumulated_grad():
    def prog(T, x):
        seen = []
        x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.clone()))
        (x * 2).sum().backward()
        (x * 3).sum().backward()
        return seen
    check(prog, randn(3), requires_grad=True)


def test_accumulate_grad_node_hooks():
    def prog(T, x):
        log = []
        y = x * 2
        acc = y.grad_fn.next_functions[0][0]
        acc.register_hook(lambda gi, go: log.append(("post", len(gi), [g.tolist() for g in go])))
        acc.register_prehook(lambda go: log.append(("acc pre", go[0].shape)))
        x.register_hook(lambda g: log.append(("tensor", g.tolist())))
        x.register_post_accumulate_grad_hook(lambda t: log.append(("post acc", t.grad.tolist())))
        y.sum().backward()
        return log, acc.name()
    check(prog, randn(3), requires_grad=True)


def test_hooks_with_autograd_grad_and_inputs():
    def prog(T, x, w):
        log = []
        y = x * w
        y.register_hook(lambda g: log.append("y") or g * 2)
        x.register_hook(lambda g: log.append("x") or g * 3)
        (gx,) = T.autograd.grad(y.sum(), x)
        return log, gx, x.grad
    check(prog, randn(3), randn(3, seed=1), requires_grad=True)


@pytest.mark.parametrize("case", ["no_grad_tensor", "post_acc_nonleaf"])
def test_hook_errors(case):
    def prog(T, x):
        if case == "no_grad_tensor":
            return x.detach().register_hook(lambda g: g)
        return (x * 2).register_post_accumulate_grad_hook(lambda t: None)
    check(prog, randn(3), requires_grad=True, expect_error=True)


def test_handle_as_context_manager():
    def prog(T, x):
        log = []
        y = x * 2
        with y.register_hook(lambda g: log.append("in")):
            pass
        y.sum().backward()
        return log
    check(prog, randn(3), requires_grad=True)


# ---------------------------------------------------------------------------------------------
# saved_tensors_hooks
# ---------------------------------------------------------------------------------------------


def test_saved_tensors_hooks_pack_unpack():
    def prog(T, x, w):
        log = []

        def pack(t):
            log.append(("pack", tuple(t.shape), t.requires_grad))
            return t.clone() * 1

        def unpack(p):
            log.append(("unpack", tuple(p.shape)))
            return p

        with T.autograd.graph.saved_tensors_hooks(pack, unpack):
            y = (x * w).exp()
        z = (y * x).sum()  # outside the context: not packed
        n_packed = len(log)
        z.backward()
        return n_packed, sorted(log, key=str), z
    check(prog, randn(3), randn(3, seed=1), requires_grad=True)


def test_saved_tensors_hooks_unpack_value_is_used():
    def prog(T, x):
        with T.autograd.graph.saved_tensors_hooks(lambda t: 2.0, lambda p: T.full((3,), p)):
            y = x * x
        y.sum().backward()
        return y
    check(prog, randn(3), requires_grad=True)


def test_saved_tensors_hooks_double_backward_and_freed():
    def prog(T, x):
        with T.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            y = (x.sin() * x).sum()
        (g,) = T.autograd.grad(y, x, create_graph=True)
        (h,) = T.autograd.grad(g.sum(), x)
        return g, h, y.backward()
    check(prog, randn(3), requires_grad=True, expect_error=True)


def test_saved_tensors_hooks_custom_function_and_nesting():
    def prog(T, x):
        log = []

        class Sq(T.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                ctx.save_for_backward(a)
                return a * a

            @staticmethod
            def backward(ctx, g):
                (a,) = ctx.saved_tensors
                return 2 * a * g

        outer = T.autograd.graph.saved_tensors_hooks(lambda t: log.append("outer") or t,
                                                     lambda t: t)
        inner = T.autograd.graph.saved_tensors_hooks(lambda t: log.append("inner") or t,
                                                     lambda t: log.append("unpack") or t)
        with outer:
            with inner:
                y = Sq.apply(x)
            z = y.exp()
        z.sum().backward()
        return log
    check(prog, randn(3), requires_grad=True)


@pytest.mark.parametrize("case", ["unpack_not_tensor", "disabled"])
def test_saved_tensors_hooks_errors(case):
    def prog(T, x):
        if case == "unpack_not_tensor":
            with T.autograd.graph.saved_tensors_hooks(lambda t: 1, lambda p: p):
                y = x.exp()
            return y.sum().backward()
        with T.autograd.graph.disable_saved_tensors_hooks("hooks are off here"):
            with T.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                return x.exp()
    check(prog, randn(3), requires_grad=True, expect_error=True, full_message=True)


def test_hook_order_oracle_is_meaningful():
    # guards: a library that skipped the pre-hook would log differently
    assert_same_error(lambda: fg.ones(2).register_hook(lambda g: g),
                      lambda: torch.ones(2).register_hook(lambda g: g))


def _accumulation_order(T):
    """The order post-accumulate hooks run in for leaves one node reaches at once (a
    layer norm's weight and bias, a convolution's, an addcmul's three operands), repeated
    over fresh layers so that the leaves' addresses vary."""
    order = []
    for k in range(6):
        T.manual_seed(k)
        ln, conv = T.nn.LayerNorm(3), T.nn.Conv1d(2, 3, 2)
        a, b, c = (T.randn(4, requires_grad=True) for _ in range(3))
        names = {ln.weight: "ln.w", ln.bias: "ln.b", conv.weight: "conv.w",
                 conv.bias: "conv.b", a: "a", b: "b", c: "c"}
        for p, name in names.items():
            p.register_post_accumulate_grad_hook(lambda t, name=name: order.append(name))
        x = T.randn(2, 2, 4)
        y = ln(conv(x).sum(1)).sum() + T.addcmul(a, b, c).sum()
        y.backward()
        order.append("|")
    return order


def test_leaves_reached_at_once_accumulate_in_pytorchs_order():
    """Nodes of one sequence number (accumulators) run in the order they became ready, as
    PyTorch's ready queue gives them, not in an order of their addresses."""
    assert _accumulation_order(fg) == _accumulation_order(torch)
