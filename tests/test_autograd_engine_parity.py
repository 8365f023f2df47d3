"""The engine's edges against torch: an in-place op whose argument is the tensor it writes,
the same tensor given twice as an input of `grad()`, `backward(inputs=...)` on a tensor that
retains its grad, and the argument forms `grad()` and `backward()` take (any iterable of
tensors, a dict, the pairing of outputs with their gradients)."""

import contextlib
import types

import pytest
import torch
from oracle import assert_close, assert_same_error, assert_same_warnings, fg
from torch.utils._python_dispatch import TorchDispatchMode

import fusegrad._dispatch as fg_dispatch


def both(prog, *, check_grad_fn=False):
    """prog(T) -> value, run under fusegrad and torch; the values must agree."""
    assert_close(prog(fg), prog(torch), check_grad_fn=check_grad_fn)


def same_error(prog):
    """prog(T) raises the same exception, with the same whole message, in both."""
    assert_same_error(lambda: prog(fg), lambda: prog(torch), full=True)


# ----------------------------------------------------------------------------------------------
# an in-place op whose argument is the tensor it writes
# ----------------------------------------------------------------------------------------------

def _imul(T, y, z):
    y *= y


SELF_ARGUMENT_OPS = {
    "imul": _imul,
    "mul_": lambda T, y, z: y.mul_(y),
    "addcmul_ y y": lambda T, y, z: y.addcmul_(y, y),
    "addcmul_ z y": lambda T, y, z: y.addcmul_(z, y),
    "addcdiv_": lambda T, y, z: y.addcdiv_(y, z),
    "atan2_": lambda T, y, z: y.atan2_(y),
    "lerp_ end": lambda T, y, z: y.lerp_(z, y),
    "lerp_ weight": lambda T, y, z: y.lerp_(y, z),
    "hypot_": lambda T, y, z: y.hypot_(y),
    "div_": lambda T, y, z: y.div_(y),
    "true_divide_": lambda T, y, z: y.true_divide_(y),
    "fmod_": lambda T, y, z: y.fmod_(y),
    "remainder_": lambda T, y, z: y.remainder_(y),
    "xlogy_": lambda T, y, z: y.xlogy_(y),
    "clamp_ min": lambda T, y, z: y.clamp_(min=y),
}


@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("name", list(SELF_ARGUMENT_OPS))
def test_inplace_op_reading_the_tensor_it_writes_refuses_backward(name, n):
    """The op saved its argument before writing it: backward reports the write, naming the
    op's node (the tensor's history then), as torch does, rather than using the new value."""
    op = SELF_ARGUMENT_OPS[name]

    def prog(T):
        x = T.tensor([3.0, 2.5, 1.5][:n], requires_grad=True)
        z = T.tensor([2.0, 1.5, 4.0][:n], requires_grad=True)
        y = x * 1
        op(T, y, z)
        y.sum().backward()

    same_error(prog)


@pytest.mark.parametrize("n", [1, 3])
def test_pow_with_its_own_exponent_reports_the_write(n):
    """`y.pow_(y)` raised "Boolean value of Tensor ... is ambiguous" for several elements;
    now the modification, as torch."""
    def prog(T):
        x = T.tensor([3.0, 2.5, 1.5][:n], requires_grad=True)
        y = x * 1
        y.pow_(y)
        y.sum().backward()

    def head(T):
        try:
            prog(T)
        except RuntimeError as e:
            text = str(e)
            return text[:text.index(", which is output")], text[text.index(", is at"):]
        raise AssertionError("no error")

    assert head(fg) == head(torch)


def test_pow_with_its_own_exponent_names_pow1():
    def prog(T):
        x = T.tensor([3.0], requires_grad=True)
        y = x * 1
        y.pow_(y)
        y.backward()

    same_error(prog)


def test_inplace_self_argument_after_a_node_that_saved_its_output():
    def prog(T):
        x = T.tensor([0.5, 1.0], requires_grad=True)
        y = x.exp()
        y.mul_(y)
        y.sum().backward()

    same_error(prog)


def test_inplace_self_argument_on_a_tensor_without_history():
    """`y` requires grad only after its first in-place op: the second saves it at version
    1 and finds it at version 2."""
    def prog(T):
        x = T.tensor([3.0], requires_grad=True)
        y = T.tensor([2.0])
        y.mul_(x)
        y.mul_(y)
        y.backward()

    same_error(prog)


def test_inplace_self_argument_on_a_view_names_its_as_strided_history():
    def prog(T):
        x = T.tensor([3.0, 4.0], requires_grad=True)
        y = x.exp()
        v = y[:]
        v.mul_(v)
        y.sum().backward()

    same_error(prog)


def test_inplace_self_argument_refuses_grad_and_the_saved_value():
    def grad(T):
        x = T.tensor([3.0], requires_grad=True)
        y = x * 1
        y.mul_(y)
        T.autograd.grad(y, x)

    def saved_other(T):
        x = T.tensor([3.0], requires_grad=True)
        y = x.exp()
        y.mul_(y)
        return y.grad_fn._saved_other

    same_error(grad)
    same_error(saved_other)


def test_saved_value_reads_alone_while_another_is_stale():
    """Reading one saved value checks that value only, as torch unpacks it alone."""
    def prog(T):
        x = T.tensor([3.0], requires_grad=True)
        y = x.exp()
        y.mul_(y)
        return y.grad_fn._saved_self.detach()

    both(prog)


def test_inplace_self_argument_under_a_dispatch_mode():
    """Recorded after a mode ran the op (its version already moved): still refused."""
    class TorchMode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    class FusegradMode(fg_dispatch.DispatchMode):
        def __fusegrad_dispatch__(self, op, args):
            with fg.no_grad():
                return fg_dispatch.call(op, *args)

    def prog(T, mode):
        x = T.tensor([3.0], requires_grad=True)
        with mode():
            y = x * 1
            y.mul_(y)
        y.backward()

    assert_same_error(lambda: prog(fg, FusegradMode), lambda: prog(torch, TorchMode),
                      full=True)


@pytest.mark.parametrize("name", ["add_", "sub_", "copy_", "copysign_", "sigmoid_", "relu_",
                                  "exp_", "hooks"])
def test_inplace_ops_that_keep_their_gradient(name):
    """Ops that do not save the written argument (or save only their output) still work,
    and under saved-tensor hooks versions are not checked, as in torch."""
    def prog(T):
        x = T.tensor([3.0, -0.5, 1.25], requires_grad=True)
        y = x * 1
        if name == "hooks":
            with T.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                y.mul_(y)
        elif name in ("sigmoid_", "relu_", "exp_"):
            getattr(y, name)()
        else:
            getattr(y, name)(y)
        y.sum().backward()
        return y.detach(), x.grad

    both(prog)


@pytest.mark.parametrize("node", ["detach", "custom", "copy_slices", "copy", "lerp_weight"])
def test_modified_message_names_the_node_as_torch(node):
    """Backward0 nodes read "Mul", others keep their number ("Lerp1"), a custom Function's
    drops "Backward", C++ nodes keep their qualified name."""
    def prog(T):
        class Double(T.autograd.Function):
            @staticmethod
            def forward(ctx, t):
                t.mul_(2)
                ctx.mark_dirty(t)
                return t

            @staticmethod
            def backward(ctx, g):
                return g * 2

        x = T.tensor([3.0, 4.0], requires_grad=True)
        y = x * 1
        w = y * x
        if node == "detach":
            w = y.mul_(y.detach())
        elif node == "custom":
            Double.apply(y)
        elif node == "copy_slices":
            y[0].mul_(2)
        elif node == "copy":
            y.copy_(T.tensor([2.0, 2.0], requires_grad=True))
        else:
            y.lerp_(T.tensor([2.0, 2.0]), T.tensor([0.5, 0.5]))
        w.sum().backward()

    same_error(prog)


# ----------------------------------------------------------------------------------------------
# grad(): an input given more than once, and where a captured gradient is taken
# ----------------------------------------------------------------------------------------------

def _graph(T):
    a = T.tensor([1.0, 2.0], requires_grad=True)
    c = a * 3
    return a, c, (c ** 2).sum()


@pytest.mark.parametrize("which", ["leaf", "non-leaf", "mixed", "create_graph",
                                   "materialize"])
def test_grad_of_an_input_given_twice(which):
    def prog(T):
        a, c, out = _graph(T)
        if which == "leaf":
            return T.autograd.grad(out, [a, a])
        if which == "non-leaf":
            return T.autograd.grad(out, (c, c))
        if which == "mixed":
            return T.autograd.grad(out, [c, a, c])
        if which == "create_graph":
            return T.autograd.grad(out, [a, a], create_graph=True)
        return T.autograd.grad(out, [c, c], materialize_grads=True)

    both(prog)


def test_grad_of_an_input_given_twice_is_one_tensor():
    for T in (fg, torch):
        a, _, out = _graph(T)
        first, second = T.autograd.grad(out, [a, a])
        assert first is second


def test_grad_of_an_unused_input_given_twice():
    def prog(T, allow_unused):
        a, _, out = _graph(T)
        b = T.tensor([1.0], requires_grad=True)
        return T.autograd.grad(out, [b, a, b], allow_unused=allow_unused)

    both(lambda T: prog(T, True))
    same_error(lambda T: prog(T, None))


@pytest.mark.parametrize("inputs", ["c a", "c", "c c", "a c c"])
def test_grad_captures_before_hooks_only_where_the_node_runs_on(inputs):
    """torch captures a node's gradient as it arrives when the node also runs (it leads to
    another input), after the tensor's hooks when it does not."""
    def prog(T):
        a, c, out = _graph(T)
        c.register_hook(lambda g: g * 10)
        return T.autograd.grad(out, [{"a": a, "c": c}[k] for k in inputs.split()])

    both(prog)


def test_grad_captures_a_retained_tensor_that_runs_on():
    def prog(T):
        a, c, out = _graph(T)
        c.retain_grad()
        c.register_hook(lambda g: g * 10)
        return T.autograd.grad(out, [c, a]), c.grad

    both(prog)


# ----------------------------------------------------------------------------------------------
# backward(inputs=...): non-leaf inputs retain their grad, written once
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["retained c", "retained c a", "c", "c c", "a a", "hooked c",
                                  "retained hooked c"])
def test_backward_inputs_writes_grad_once(case):
    def prog(T):
        a, c, out = _graph(T)
        if "retained" in case:
            c.retain_grad()
        if "hooked" in case:
            c.register_hook(lambda g: g * 10)
        names = case.replace("retained", "").replace("hooked", "").split()
        out.backward(inputs=[{"a": a, "c": c}[k] for k in names])
        return c.grad, a.grad, c.retains_grad

    both(prog)


def test_backward_inputs_leaves_the_input_retaining_its_grad():
    """A later backward without inputs accumulates into it too, as in torch."""
    def prog(T):
        a, c, out = _graph(T)
        out.backward(inputs=[c], retain_graph=True)
        out.backward()
        return c.grad, a.grad, c.retains_grad

    both(prog)


def test_backward_inputs_without_grad():
    same_error(lambda T: (T.tensor(2.0, requires_grad=True) * 2).backward(
        inputs=T.tensor(1.0)))


# ----------------------------------------------------------------------------------------------
# argument forms
# ----------------------------------------------------------------------------------------------

def _model(T):
    m = T.nn.Linear(2, 1)
    with T.no_grad():
        m.weight.copy_(T.tensor([[1.0, 2.0]]))
        m.bias.fill_(0.5)
    return m, (m(T.tensor([[1.0, 3.0]])) ** 2).sum()


ITERABLE_FORMS = {
    "grad parameters()": lambda T, m, loss: T.autograd.grad(loss, m.parameters()),
    "grad dict values": lambda T, m, loss: T.autograd.grad(
        loss, dict(m.named_parameters()).values()),
    "grad dict": lambda T, m, loss: T.autograd.grad(loss, dict(m.named_parameters())),
    "grad outputs generator": lambda T, m, loss: T.autograd.grad(
        (t for t in [loss]), (p for p in m.parameters())),
    "grad_outputs generator": lambda T, m, loss: T.autograd.grad(
        [loss], list(m.parameters()), grad_outputs=(g for g in [T.tensor(2.0)])),
    "grad_outputs one too many": lambda T, m, loss: T.autograd.grad(
        loss, m.parameters(), grad_outputs=[T.tensor(2.0), T.tensor(1.0)]),
    "grad_outputs tensor": lambda T, m, loss: T.autograd.grad(
        loss, m.weight, grad_outputs=T.tensor(2.0)),
    "backward parameters()": lambda T, m, loss: (
        loss.backward(inputs=m.parameters()), m.weight.grad, m.bias.grad),
    "backward dict": lambda T, m, loss: (
        T.autograd.backward(loss, inputs={"w": m.weight}), m.weight.grad, m.bias.grad),
    "backward generator": lambda T, m, loss: (
        T.autograd.backward((t for t in [loss]), inputs=(p for p in m.parameters())),
        m.weight.grad),
    "backward grads one too many": lambda T, m, loss: (
        T.autograd.backward(loss, grad_tensors=[T.tensor(2.0), T.tensor(1.0)]),
        m.weight.grad),
    "backward of nothing": lambda T, m, loss: (T.autograd.backward([]), m.weight.grad),
    "grad of nothing": lambda T, m, loss: T.autograd.grad([], m.weight, allow_unused=True),
    "grad of nothing materialized": lambda T, m, loss: T.autograd.grad(
        [], m.weight, materialize_grads=True),
}


@pytest.mark.parametrize("name", list(ITERABLE_FORMS))
def test_grad_and_backward_take_any_iterable(name):
    def prog(T):
        m, loss = _model(T)
        return ITERABLE_FORMS[name](T, m, loss)

    both(prog)


ARGUMENT_ERRORS = {
    "grad_outputs one too few": lambda T, m, loss: T.autograd.grad(
        [loss, loss * 2], m.parameters(), grad_outputs=[T.tensor(2.0)]),
    "grad_outputs empty": lambda T, m, loss: T.autograd.grad(loss, m.weight, grad_outputs=[]),
    "grad_outputs int": lambda T, m, loss: T.autograd.grad(loss, m.weight, grad_outputs=5),
    "grad_outputs [int]": lambda T, m, loss: T.autograd.grad(
        loss, m.weight, grad_outputs=[5]),
    "grad_tensors one too few": lambda T, m, loss: T.autograd.backward(
        [loss, loss * 2], grad_tensors=[T.tensor(2.0)]),
    "batched one too few": lambda T, m, loss: T.autograd.grad(
        [loss, loss], [m.weight], is_grads_batched=True, grad_outputs=[T.ones(2)]),
    "grad empty iterator": lambda T, m, loss: T.autograd.grad(loss, iter([])),
    "backward empty iterator": lambda T, m, loss: loss.backward(inputs=iter([])),
    "backward empty list": lambda T, m, loss: loss.backward(inputs=[]),
    "grad mapping": lambda T, m, loss: T.autograd.grad(
        loss, types.MappingProxyType({"w": m.weight})),
    "backward mapping": lambda T, m, loss: loss.backward(
        inputs=types.MappingProxyType({"w": m.weight})),
    "grad inputs int": lambda T, m, loss: T.autograd.grad(loss, 5),
    "grad inputs [tensor, int]": lambda T, m, loss: T.autograd.grad(loss, [m.weight, 5]),
    "grad inputs [tensor, None]": lambda T, m, loss: T.autograd.grad(loss, [m.weight, None]),
    "grad inputs str": lambda T, m, loss: T.autograd.grad(loss, "ab"),
    "backward inputs [tensor, int]": lambda T, m, loss: loss.backward(inputs=[m.weight, 3]),
    "grad outputs [tensor, int]": lambda T, m, loss: T.autograd.grad([loss, 3], [m.weight]),
    "backward tensors [tensor, int]": lambda T, m, loss: T.autograd.backward([loss, 3]),
    "grad of nothing": lambda T, m, loss: T.autograd.grad([], m.weight),
    "grad_tensors and grad_variables": lambda T, m, loss: T.autograd.backward(
        loss, grad_tensors=T.tensor(1.0), grad_variables=T.tensor(1.0)),
}


@pytest.mark.parametrize("name", list(ARGUMENT_ERRORS))
def test_grad_and_backward_argument_errors(name):
    def prog(T):
        m, loss = _model(T)
        ARGUMENT_ERRORS[name](T, m, loss)

    deprecated = "grad_variables" in name
    with pytest.warns(FutureWarning) if deprecated else contextlib.nullcontext():
        same_error(prog)


def test_deprecated_arguments_warn():
    def grad_variables(T):
        m, loss = _model(T)
        T.autograd.backward(loss, grad_variables=T.tensor(1.0))

    def only_inputs(T):
        m, loss = _model(T)
        T.autograd.grad(loss, m.weight, only_inputs=False)

    for prog in (grad_variables, only_inputs):
        assert_same_warnings(lambda p=prog: p(fg), lambda p=prog: p(torch))


def test_materialized_gradient_requires_grad_under_create_graph():
    def prog(T):
        x = T.tensor([1.0, 2.0], requires_grad=True)
        unused = T.tensor([1.0], requires_grad=True)
        return T.autograd.grad((x * 2).sum(), [x, unused], materialize_grads=True,
                               create_graph=True)

    both(prog)


def test_in_place_power_operator_as_torch():
    """`y **= z` writes into `y` (PowBackward1 for a tensor exponent, PowBackward0 for a
    number), as PyTorch's `__ipow__`."""
    for exponent in ("tensor", "number"):
        def prog(T, exponent=exponent):
            y = T.ones(3, requires_grad=True) * 2
            before = y
            y **= T.tensor([1.0, 2.0, 3.0]) if exponent == "tensor" else 2
            return y is before, y._version, type(y.grad_fn).__name__

        assert prog(fg) == prog(torch)
