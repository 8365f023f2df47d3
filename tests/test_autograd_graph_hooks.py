"""`autograd.graph.register_multi_grad_hook` ("all" and "any") and
`allow_mutation_on_saved_tensors`, against torch: when the hooks fire and with what,
gradients with saved tensors changed in place, and the messages."""

import numpy as np
import pytest
import torch

import fusegrad as fg


def _plain(x):
    """Tensors as NumPy arrays, containers recursively, for comparing the two runs."""
    if isinstance(x, (torch.Tensor, fg.Tensor)):
        # Five significant digits: the two libraries' float32 sin may differ in the last bit.
        rounded = [float(f"{v:.5g}") for v in x.detach().numpy().ravel().tolist()]
        return ("tensor", tuple(x.shape), rounded, x.grad_fn is not None)
    if isinstance(x, (list, tuple)):
        return type(x).__name__, [_plain(v) for v in x]
    if isinstance(x, BaseException):
        return type(x).__name__, str(x)
    return x


def _both(prog):
    logs = []
    for T in (fg, torch):
        log = []
        try:
            prog(T, log)
        except Exception as e:  # noqa: BLE001 - the error is part of what is compared
            log.append(e)
        logs.append(_plain(log))
    assert logs[0] == logs[1]
    return logs[0]


def _leaves(T):
    return T.ones(2, requires_grad=True), T.full((2,), 2.0, requires_grad=True)


def test_all_mode_leaves():
    def prog(T, log):
        a, b = _leaves(T)
        h = T.autograd.graph.register_multi_grad_hook((a, b), lambda g: log.append(g))
        (a * 2).sum().backward()
        (a * 2 + b * b).sum().backward()
        log.append("removed")
        h.remove()
        (a * 2 + b).sum().backward()
    assert len(_both(prog)[1]) == 3


def test_all_mode_non_leaves_and_grad():
    def prog(T, log):
        a, _ = _leaves(T)
        x, y = a * 1, a * 2
        T.autograd.graph.register_multi_grad_hook((x, y), lambda g: log.append(g))
        (x + y * 3).sum().backward(retain_graph=True)
        (x * 3).sum().backward(retain_graph=True)
        log.append(T.autograd.grad((x * 5 + y).sum(), [a]))
    _both(prog)


def test_any_mode_fires_once_per_pass():
    def prog(T, log):
        a, b = _leaves(T)
        c = T.ones(2)
        with T.autograd.graph.register_multi_grad_hook(
                (a, b, c), lambda g: log.append(g), mode="any"):
            (a * 2 + b * 3).sum().backward()
            log.append(T.autograd.grad((a * 2 + b * 3).sum(), [b]))
        (a * 2 + b * 3).sum().backward()
    assert len(_both(prog)[1]) == 3


@pytest.mark.parametrize("case", ["mode", "no_grad_tensor", "leaf_in_grad"])
def test_multi_grad_hook_errors(case):
    def prog(T, log):
        a, b = _leaves(T)
        register = T.autograd.graph.register_multi_grad_hook
        if case == "mode":
            register((a, b), log.append, mode="some")
        elif case == "no_grad_tensor":
            register((a, T.ones(2)), log.append)
        else:
            register((a, b), log.append)
            T.autograd.grad((a * 2 + b * 3).sum(), [b])
    assert _both(prog)[1][0][0] in ("ValueError", "AssertionError", "RuntimeError")


def test_mutation_on_saved_tensors():
    def prog(T, log):
        with T.autograd.graph.allow_mutation_on_saved_tensors() as ctx:
            log.append(type(ctx).__name__)
            a = T.arange(6.0).reshape(2, 3).requires_grad_()
            b = a.clone()
            out = (b ** 2).sum()
            b.sin_()
            out.backward()
            log += [a.grad.clone(), b]
            c = a.clone()
            view = c[0]
            prod = (c * c).sum()
            view.mul_(2)
            prod.backward()
            log.append(a.grad.clone())
            d = a.exp()
            first = d.sum() * 1
            d.add_(1)
            second = (d * d).sum()
            d.zero_()
            (first + second).backward()
            log.append(a.grad.clone())
    got = _both(prog)
    # The gradients are those of the values before the writes: 2b, then 2b + 2c.
    np.testing.assert_allclose(got[1][1][2], 2 * np.arange(6.0))


def test_mutation_on_saved_tensors_refusals():
    def outside(T, log):
        a = T.ones(2, requires_grad=True)
        with T.autograd.graph.allow_mutation_on_saved_tensors():
            out = (a.clone() * a.clone()).sum()
        out.backward()

    def nested(T, log):
        with T.autograd.graph.allow_mutation_on_saved_tensors():
            with T.autograd.graph.allow_mutation_on_saved_tensors():
                pass

    def not_inside(T, log):
        a = T.ones(2, requires_grad=True)
        b = a.clone()
        out = (b * b).sum()
        b.add_(1)
        out.backward()
    assert _both(outside)[1][0][0] == "AssertionError"
    assert _both(nested)[1][0][0] == "RuntimeError"
    assert _both(not_inside)[1][0][0] == "RuntimeError"
