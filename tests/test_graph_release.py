"""What a backward without `retain_graph` frees, against torch: a second backward through a
node that saved a tensor raises PyTorch's error, one through nodes that saved none runs again.
A Python number given for a tensor argument (`x * 3`, `x / 3`) is a saved tensor to PyTorch
(its wrapped number), so its node is freed too: the second backward raised nothing and added
the gradient twice before."""

import pytest
import torch

import fusegrad

CASES = {
    "mul number": lambda z: z * 3,
    "number mul": lambda z: 3 * z,
    "mul method": lambda z: z.mul(2.5),
    "div number": lambda z: z / 3,
    "number div": lambda z: 3 / z,
    "true_divide": lambda z: z.true_divide(4),
    "mul tensor": lambda z: z * z,
    "add number": lambda z: z + 3,
    "sub number": lambda z: z - 3,
    "number sub": lambda z: 3 - z,
    "view": lambda z: z.view(2, 1),
    "select": lambda z: z.select(0, 1),
    "pow": lambda z: z ** 2,
}


def _second_backward(lib, fn):
    z = lib.tensor([1.0, 2.0], requires_grad=True)
    loss = fn(z).sum()
    loss.backward()
    try:
        loss.backward()
    except RuntimeError as e:
        return "raised", str(e).split(".")[0]
    return "ran", z.grad.tolist()


@pytest.mark.parametrize("name", sorted(CASES))
def test_second_backward_as_torch(name):
    assert _second_backward(fusegrad, CASES[name]) == _second_backward(torch, CASES[name])


@pytest.mark.parametrize("name", sorted(CASES))
def test_retain_graph_keeps_what_was_saved(name):
    def run(lib):
        z = lib.tensor([1.0, 2.0], requires_grad=True)
        loss = CASES[name](z).sum()
        loss.backward(retain_graph=True)
        loss.backward()
        return z.grad.tolist()

    assert run(fusegrad) == run(torch)


def test_saved_wrapped_numbers_read_as_tensors():
    """A number given for a tensor argument is read back as PyTorch's wrapped-number tensor
    (`tensor(2)`, `tensor(2.5, dtype=float64)`); a Scalar argument stays a number."""
    def saved(lib):
        x = lib.tensor([1.0], requires_grad=True)
        return [repr(v) for v in ((x * 2).grad_fn._saved_other,
                                  (x * 2.5).grad_fn._saved_other,
                                  (x / 4).grad_fn._saved_other,
                                  lib.mul(x, 3).grad_fn._saved_other,
                                  (x ** 2).grad_fn._saved_exponent,
                                  (x + 1).grad_fn._saved_alpha,
                                  x.clamp(0, 1).grad_fn._saved_min)]

    assert saved(fusegrad) == saved(torch)


def _save_nothing(lib, calls_save: bool):
    class Triple(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            if calls_save:
                ctx.save_for_backward()
            return x * 3

        @staticmethod
        def backward(ctx, g):
            if calls_save:
                ctx.saved_tensors  # noqa: B018  (reading them is what raises once freed)
            return g * 3

    return Triple


@pytest.mark.parametrize("calls_save", [True, False])
def test_custom_function_saving_nothing_as_torch(calls_save):
    """A Function that called `save_for_backward` (even with nothing) has its buffers freed
    by a backward without retain_graph: reading `saved_tensors` again raises."""
    assert _second_backward(fusegrad, _save_nothing(fusegrad, calls_save).apply) == \
        _second_backward(torch, _save_nothing(torch, calls_save).apply)


def test_compiled_graph_freed_after_backward():
    """A compiled graph's backward is freed as eager's would be (PyTorch's compiled graphs
    raise on a second backward); with retain_graph it runs twice."""
    for backend in ("aot_eager", "eager"):
        fusegrad._dynamo.reset()
        f = fusegrad.compile(lambda a: a * 3, backend=backend)
        assert _second_backward(fusegrad, f) == _second_backward(torch, lambda a: a * 3)
        z = fusegrad.tensor([1.0, 2.0], requires_grad=True)
        loss = f(z).sum()
        loss.backward(retain_graph=True)
        loss.backward()
        assert z.grad.tolist() == [6.0, 6.0]
