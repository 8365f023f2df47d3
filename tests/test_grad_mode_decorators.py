"""Grad-mode context managers used as decorators, against torch: plain functions, and
generator functions, whose body runs under the mode at each resumption (send, throw,
close) while the caller's code between items does not."""

import pytest
import torch

import fusegrad


def _run(lib, make):
    """What a decorated generator yields and sees, and the mode its caller sees."""
    x = lib.ones(2, requires_grad=True)
    log = []

    def gen(n):
        for i in range(n):
            got = yield (x * i).requires_grad, lib.is_grad_enabled()
            log.append(("got", got, lib.is_grad_enabled()))
        return "done"

    def catching():
        try:
            yield 1
        except ValueError:
            log.append(("caught", lib.is_grad_enabled()))
            yield 2
        finally:
            log.append(("closed", lib.is_grad_enabled()))

    deco = make(lib)
    log.append([(*item, lib.is_grad_enabled()) for item in deco(gen)(3)])
    it = deco(gen)(2)
    next(it)
    log.append(it.send("hi"))
    try:
        next(it)
    except StopIteration as stop:
        log.append(("stop", stop.value))
    c = deco(catching)()
    next(c)
    log.append(c.throw(ValueError()))
    c.close()
    log.append(((x * 2).requires_grad, deco(gen).__name__))
    return log


@pytest.mark.parametrize("make", [
    lambda t: t.no_grad(), lambda t: t.enable_grad(), lambda t: t.set_grad_enabled(False),
    lambda t: t.inference_mode(), lambda t: t.no_grad,
], ids=["no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "bare_no_grad"])
@pytest.mark.parametrize("outer", [True, False])
def test_decorated_generators_match_torch(make, outer):
    def run(lib):
        with lib.set_grad_enabled(outer):
            return _run(lib, make)
    assert run(fusegrad) == run(torch)


@pytest.mark.parametrize("outer", ["no_grad", "inference_mode", "enable_grad"])
@pytest.mark.parametrize("as_decorator", [False, True])
def test_inference_mode_false_enables_grad(outer, as_decorator):
    """`inference_mode(False)` enables grad inside `no_grad` and `inference_mode()` (it is
    no no-op there): the graph is recorded, and the outer mode returns afterwards."""
    def run(lib):
        x = lib.ones(2, requires_grad=True)

        def body():
            return lib.is_grad_enabled(), (x * 2).requires_grad, lib.is_inference_mode_enabled()

        with getattr(lib, outer)():
            inner = lib.inference_mode(False)(body)() if as_decorator else None
            if not as_decorator:
                with lib.inference_mode(False):
                    inner = body()
            return inner, lib.is_grad_enabled(), lib.is_inference_mode_enabled()

    assert run(fusegrad) == run(torch)
