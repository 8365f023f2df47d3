"""Compiled modules and the hooks registered for every module: the compiled call runs them
as eager does, and a graph captured before a hook existed is not reused after."""

from __future__ import annotations

import numpy as np
from compile_support import Counter

import fusegrad

nn = fusegrad.nn
module_hooks = fusegrad.nn.modules.module


def _net():
    fusegrad.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))


def _close(a, b) -> None:
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-7)


def _doubling_hook(module, args, output):
    return output * 2 if isinstance(module, nn.Linear) else None


def test_forward_hook_for_every_module_changes_compiled_output_as_eager():
    net, x = _net(), fusegrad.randn(3, 4)
    for compiled in (fusegrad.compile(net, backend=Counter()),
                     fusegrad.compile(lambda t: net(t), backend=Counter())):
        before = compiled(x)  # captured while no global hook exists
        _close(before, net(x))
        handle = module_hooks.register_module_forward_hook(_doubling_hook)
        try:
            hooked_eager = net(x)
            hooked = compiled(x)
        finally:
            handle.remove()
        _close(hooked, hooked_eager)
        doubled = 2 * net[2](2 * net[1](net[0](x)))  # each Linear's output doubled
        _close(hooked_eager, doubled)
        _close(compiled(x), before)


def test_pre_hook_for_every_module_sees_each_call_in_compiled_code():
    net, x = _net(), fusegrad.randn(3, 4)
    compiled = fusegrad.compile(lambda t: net(t).sum(), backend=Counter())
    compiled(x)
    seen = []
    handle = module_hooks.register_module_forward_pre_hook(
        lambda module, args: seen.append(type(module).__name__))
    try:
        out = compiled(x)
    finally:
        handle.remove()
    assert seen == ["Sequential", "Linear", "ReLU", "Linear"]
    np.testing.assert_allclose(out.item(), net(x).sum().item(), rtol=1e-6)
