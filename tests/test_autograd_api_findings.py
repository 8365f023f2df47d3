"""gradcheck/gradgradcheck as programs meet them, against torch run here: which output and
input a mismatch names, backward before forward checks, fast mode's report, the undefined
output gradient check, and gradgradcheck's seeded random grad_outputs."""

import warnings

import pytest
import torch

import fusegrad as fg


def _functions(T):
    """Custom Functions with a wrong or fragile backward, written against module T."""
    F = T.autograd.Function

    class Wrong(F):  # backward 3 where the derivative is 2
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 3

    class WrongJvp(F):  # right backward, wrong forward-mode derivative
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

        @staticmethod
        def jvp(ctx, t):
            return t * 3

    class OnesForNone(F):  # a nonzero gradient for an undefined output gradient
        @staticmethod
        def forward(ctx, a):
            ctx.set_materialize_grads(False)
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return T.ones(3, dtype=T.float64) if g is None else g * 2

    class RaisesForNone(F):
        @staticmethod
        def forward(ctx, a):
            ctx.set_materialize_grads(False)
            return a * 2

        @staticmethod
        def backward(ctx, g):
            if g is None:
                raise RuntimeError("undefined!")
            return g * 2

    class TwoOutputs(F):  # wrong for output 0 alone; fails without output 0's gradient
        @staticmethod
        def forward(ctx, a):
            ctx.set_materialize_grads(False)
            return a * 2, a * 3

        @staticmethod
        def backward(ctx, g, h):
            if g is None:
                raise RuntimeError("no gradient for output 0")
            return g * 2 + h * 3 if h is not None else g + 1

    class WrongSecond(F):  # right first derivative, wrong second one
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a ** 3

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g * 3 * a * a.detach()

    calls = [0]

    class Drifts(F):  # a backward that changes from call to call, and not linear in g
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            calls[0] += 1
            return g * 2 + calls[0] * 1e-7

    return {"drifts": Drifts.apply, "wrong": Wrong.apply, "wrong_jvp": WrongJvp.apply,
            "ones": OnesForNone.apply,
            "raises": RaisesForNone.apply, "two": TwoOutputs.apply,
            "second": WrongSecond.apply}


def _inputs(T):
    a = T.tensor([1.0, 2.0, 3.0], dtype=T.float64, requires_grad=True)
    b = T.tensor([[1.0, -2.0], [0.5, 3.0]], dtype=T.float64, requires_grad=True)
    c = T.tensor([1.0, 2.0], dtype=T.float64)  # no grad: not counted as an input
    return a, b, c


CASES = {
    "wrong": lambda T, f, a, b, c: T.autograd.gradcheck(f["wrong"], (a,)),
    "wrong fast": lambda T, f, a, b, c: T.autograd.gradcheck(f["wrong"], (a,), fast_mode=True),
    "wrong scaled fast": lambda T, f, a, b, c: T.autograd.gradcheck(
        lambda x: f["wrong"](x) * 1e-3, (a,), fast_mode=True),
    "wrong no raise fast": lambda T, f, a, b, c: T.autograd.gradcheck(
        lambda x: f["wrong"](x) * 1e-6, (a,), raise_exception=False, fast_mode=True),
    # numbering among the outputs and inputs that require grad
    "indices": lambda T, f, a, b, c: T.autograd.gradcheck(
        lambda x, y, z: (x.sum() * z, y.detach(), f["wrong"](y)), (c, a, b)),
    "indices forward": lambda T, f, a, b, c: T.autograd.gradcheck(
        lambda x, y, z: (x.sum() * z, f["wrong_jvp"](z)), (c, a, b), check_forward_ad=True),
    # backward is checked (and fails) before forward mode is tried (no jvp here)
    "backward first": lambda T, f, a, b, c: T.autograd.gradcheck(
        f["wrong"], (a,), check_forward_ad=True),
    "wrong jvp": lambda T, f, a, b, c: T.autograd.gradcheck(
        f["wrong_jvp"], (a,), check_forward_ad=True),
    "wrong jvp fast": lambda T, f, a, b, c: T.autograd.gradcheck(
        f["wrong_jvp"], (a,), check_forward_ad=True, fast_mode=True),
    "undefined nonzero": lambda T, f, a, b, c: T.autograd.gradcheck(f["ones"], (a,)),
    "undefined nonzero no raise": lambda T, f, a, b, c: T.autograd.gradcheck(
        f["ones"], (a,), raise_exception=False),
    "undefined raises": lambda T, f, a, b, c: T.autograd.gradcheck(f["raises"], (a,)),
    "undefined raises fast": lambda T, f, a, b, c: T.autograd.gradcheck(
        f["raises"], (a,), fast_mode=True),
    "undefined off": lambda T, f, a, b, c: T.autograd.gradcheck(
        f["raises"], (a,), check_undefined_grad=False),
    "undefined builtin ok": lambda T, f, a, b, c: T.autograd.gradcheck(
        lambda x: (x.exp() * x, x.sin()), (a,)),
    # slow mode compares output 0 before computing output 1's backward; fast mode computes
    # every backward first
    "output order": lambda T, f, a, b, c: T.autograd.gradcheck(f["two"], (a,)),
    "output order fast": lambda T, f, a, b, c: T.autograd.gradcheck(
        f["two"], (a,), fast_mode=True),
    "not reentrant": lambda T, f, a, b, c: T.autograd.gradcheck(f["drifts"], (a,)),
    "not reentrant no raise": lambda T, f, a, b, c: T.autograd.gradcheck(
        f["drifts"], (a,), raise_exception=False),
    "not reentrant fast": lambda T, f, a, b, c: T.autograd.gradcheck(
        f["drifts"], (a,), fast_mode=True),
    "not multiplied by grad_output": lambda T, f, a, b, c: T.autograd.gradcheck(
        f["drifts"], (a,), nondet_tol=1e-5),
    "noncontiguous input": lambda T, f, a, b, c: T.autograd.gradcheck(
        lambda x: (x.exp() * x[:1]), (b.detach().t().requires_grad_(),)),
    "noncontiguous input fast": lambda T, f, a, b, c: T.autograd.gradcheck(
        lambda x: (x.exp() * x[:1]), (b.detach().t().requires_grad_(),), fast_mode=True),
    "empty input": lambda T, f, a, b, c: T.autograd.gradcheck(
        lambda x: x.exp(), (T.zeros(0, dtype=T.float64, requires_grad=True),)),
    "no check asked": lambda T, f, a, b, c: T.autograd.gradcheck(
        lambda x: x * 2, (a,), check_backward_ad=False),
    "no differentiable output": lambda T, f, a, b, c: T.autograd.gradcheck(
        lambda x: x.detach() * x.detach(), (a,)),
}


def _outcome(T, name):
    """(result or (error type, message, cause), warnings) of case `name` under module T."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = ("ok", CASES[name](T, _functions(T), *_inputs(T)))
        except Exception as e:  # noqa: BLE001 - the error is the result compared
            result = (type(e).__name__, str(e), repr(e.__cause__))
    seen = [(w.category.__name__, str(w.message)) for w in caught
            if "jit" not in str(w.message)]  # (torch's own import-time notices)
    return result, seen


@pytest.mark.parametrize("name", list(CASES))
def test_gradcheck_like_torch(name):
    assert _outcome(fg, name) == _outcome(torch, name)


@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("two_inputs", [False, True])
def test_gradgradcheck_seeded_grad_outputs_like_torch(fast, two_inputs):
    """Default grad_outputs come from the global generator, as PyTorch draws them."""
    def run(T):
        f = _functions(T)["second"]
        a, b, _ = _inputs(T)
        T.manual_seed(0)
        try:
            if two_inputs:
                T.autograd.gradgradcheck(lambda x, y: (f(x) * y.sum(), y * 2), (a, b),
                                         fast_mode=fast)
            else:
                T.autograd.gradgradcheck(f, (a,), fast_mode=fast)
        except Exception as e:  # noqa: BLE001 - the error is the result compared
            return type(e).__name__, str(e)
        return "ok"

    got, want = run(fg), run(torch)
    assert want != "ok"
    assert got == want
