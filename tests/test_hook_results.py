"""What a gradient hook may return, checked as PyTorch checks it: node hooks return a tuple
with one entry per gradient, and every tensor keeps the size and dtype it replaces."""

import pytest
import torch

import fusegrad


def _run(lib, kind: str, make):
    """Backward through `a * b` with a hook of `kind` that returns `make(values)`."""
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([3.0, 4.0], requires_grad=True)
    y = a * b
    if kind == "node":
        y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: make(grad_inputs))
    elif kind == "pre":
        y.grad_fn.register_prehook(lambda grad_outputs: make(grad_outputs))
    else:
        y.register_hook(lambda grad: make(grad))
    try:
        (y * lib.tensor([1.0, 5.0])).sum().backward()
    except Exception as e:  # noqa: BLE001 (the error is what is compared)
        return type(e).__name__, str(e)
    return a.grad.tolist(), None if b.grad is None else b.grad.tolist()


CASES = {
    "node, one value for two": ("node", lambda g: (g[0],)),
    "node, three values": ("node", lambda g: (g[0], g[1], g[1])),
    "node, a list": ("node", lambda g: [g[0], g[1]]),
    "node, a bare tensor": ("node", lambda g: g[0]),
    "node, None kept": ("node", lambda g: (g[0], None)),
    "node, scaled": ("node", lambda g: (g[0] * 2, g[1])),
    "node, other size": ("node", lambda g: (g[0][:1], g[1])),
    "node, other dtype": ("node", lambda g: (g[0].double(), g[1])),
    "node, a number": ("node", lambda g: (1, g[1])),
    "pre, two values for one": ("pre", lambda g: (g[0], g[0])),
    "pre, none": ("pre", lambda g: ()),
    "pre, a bare tensor": ("pre", lambda g: g[0]),
    "pre, other size": ("pre", lambda g: (g[0][:1],)),
    "pre, scaled": ("pre", lambda g: (g[0] * 3,)),
    "tensor, other size": ("tensor", lambda g: g[:1]),
    "tensor, other dtype": ("tensor", lambda g: g.double()),
    "tensor, a tuple": ("tensor", lambda g: (g,)),
    "tensor, a number": ("tensor", lambda g: 3),
    "tensor, scaled": ("tensor", lambda g: g * 4),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hook_result_checked_as_pytorch(case):
    kind, make = CASES[case]
    assert _run(fusegrad, kind, make) == _run(torch, kind, make)
