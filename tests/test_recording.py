"""Recording a Node gives what PyTorch's recording gives: the gradients a node hands its
inputs (None for an input that does not require grad, as node hooks see them), and the
saved values of one- and two-entry saves, with their version checks."""

from __future__ import annotations

import pytest
import torch

import fusegrad


def _shapes(grads) -> list:
    return [None if g is None else tuple(g.shape) for g in grads]


# Each case: (inputs as (shape, requires_grad), function of the inputs); every call shape of
# the dispatcher's recorders (one tensor, two tensors, a tensor and a number, the general
# path with a list or three tensors, an in-place op on a tensor without grad).
HOOK_CASES = {
    "add": ([((2, 3), True), ((2, 3), False)], lambda m, a, b: a + b),
    "add broadcast": ([((2, 3), True), ((3, 1, 1), False)], lambda m, a, b: a + b),
    "sub other": ([((2, 3), False), ((2, 3), True)], lambda m, a, b: a - b),
    "mul": ([((2, 3), True), ((2, 3), False)], lambda m, a, b: a * b),
    "mul both": ([((2, 3), True), ((2, 3), True)], lambda m, a, b: a * b),
    "add scalar": ([((2, 3), True)], lambda m, a: a + 2.0),
    "matmul": ([((2, 3), False), ((3, 4), True)], lambda m, a, b: a @ b),
    "addcmul": ([((2, 3), True), ((2, 3), False), ((2, 3), True)],
                lambda m, a, b, c: m.addcmul(a, b, c, value=0.5)),
    "cat": ([((2, 3), True), ((1, 3), False), ((2, 3), True)],
            lambda m, a, b, c: m.cat([a, b, c])),
    "where": ([((2, 3), False), ((2, 3), True)], lambda m, a, b: m.where(a > 0, a, b)),
    "mul_ into no-grad": ([((2, 3), False), ((2, 3), True)],
                          lambda m, a, b: (a * 1.0).mul_(b)),
    "add_ into no-grad view": ([((4, 3), False), ((2, 3), True)],
                               lambda m, a, b: (a * 1.0)[:2].add_(b)),
}


@pytest.mark.parametrize("name", list(HOOK_CASES))
def test_node_hook_grads_match_torch(name):
    specs, fn = HOOK_CASES[name]
    seen = {}
    for mod in (fusegrad, torch):
        mod.manual_seed(0)
        inputs = [mod.randn(*shape).requires_grad_(rg) for shape, rg in specs]
        out = fn(mod, *inputs)
        got = seen[mod.__name__] = []
        out.grad_fn.register_hook(lambda gi, go, got=got: got.append(_shapes(gi)))
        out.sum().backward()
        got.append([None if t.grad is None else tuple(t.grad.shape) for t in inputs])
    assert seen["fusegrad"] == seen["torch"]


def _version_error(mod, fn):
    """The message of the RuntimeError `fn(mod)` raises, or None."""
    try:
        fn(mod)
    except RuntimeError as e:
        return str(e)
    return None


# Saves of one entry (an input, the output) and two (inputs, an input and None, the output
# twice), each saved value then modified in place before backward (an error, or none where
# PyTorch does not save that value).
SAVE_CASES = {
    "sin saves its input": lambda m, x, w: (x.sin(), x),
    "exp saves its output": lambda m, x, w: (lambda y: (y, y))(x.exp()),
    "mul saves the other": lambda m, x, w: (x * w, w),
    "mul saves both": lambda m, x, w: (lambda p: (p * x, p))(x * 1.0),
    "mul by itself": lambda m, x, w: (lambda p: (p * p, p))(x * 1.0),
    "div saves the divisor": lambda m, x, w: (lambda d: (x / d, d))(w.abs().add(1)),
    "div by no-grad saves no input": lambda m, x, w: (lambda p: (p / w.abs().add(1), p))(x * 1.0),
    "div saves both": lambda m, x, w: (lambda p: (p / (x + 2), p))(x * 1.0),
    "pow saves input and output": lambda m, x, w: (lambda p: (p.pow(w), p))(x.abs() + 1),
}


@pytest.mark.parametrize("name", list(SAVE_CASES))
def test_saved_value_modified_in_place_errors_as_torch(name):
    def run(mod):
        mod.manual_seed(0)
        x = mod.randn(2, 3, requires_grad=True)
        w = mod.randn(2, 3)
        out, modified = SAVE_CASES[name](mod, x, w)
        with mod.no_grad():
            modified.add_(1)
        out.sum().backward()

    want = _version_error(torch, run)
    assert _version_error(fusegrad, run) == want
    assert want is not None or name == "div by no-grad saves no input"


X = [[0.3, -1.2, 0.7], [1.5, -0.4, 0.9]]
W = [[-0.6, 0.8, 1.1], [0.2, -1.3, 0.5]]


@pytest.mark.parametrize("name", list(SAVE_CASES))
def test_saved_values_give_torch_gradients(name):
    grads = {}
    for mod in (fusegrad, torch):
        x = mod.tensor(X, dtype=mod.float64, requires_grad=True)
        w = mod.tensor(W, dtype=mod.float64)
        out, _ = SAVE_CASES[name](mod, x, w)
        out.sum().backward()
        grads[mod.__name__] = x.grad.numpy().ravel().tolist()
    assert grads["fusegrad"] == pytest.approx(grads["torch"], rel=1e-12)


def test_saved_attributes_read_as_torch():
    # The nodes' `_saved_*` attributes read the values saved by the short recorders.
    got = {}
    for mod in (fusegrad, torch):
        x = mod.ones(2, 3, dtype=mod.float64, requires_grad=True)
        w = mod.full((2, 3), 2.0, dtype=mod.float64)
        mul = x * w
        e = x.exp()
        got[mod.__name__] = (mul.grad_fn._saved_self, mul.grad_fn._saved_other.tolist(),
                             e.grad_fn._saved_result.tolist(),
                             e.grad_fn._saved_result.grad_fn is e.grad_fn)
    assert got["fusegrad"] == got["torch"]
