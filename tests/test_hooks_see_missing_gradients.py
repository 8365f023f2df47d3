"""Hooks see None for an output that received no gradient (a node's pre-hooks and hooks,
a module's full backward hooks), while the node's own backward gets zeros there; a module's
tensor input without grad gets a zero grad_input once another input requires grad. All as
PyTorch's."""

import torch

import fusegrad


def _listed(grads):
    return [None if g is None else g.tolist() for g in grads]


def _node_hooks(lib):
    seen = []

    class TwoOutputs(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            seen.append(("backward", _listed((g1, g2))))
            return g1 * 2 + g2 * 3

    x = lib.ones(2, requires_grad=True)
    a, _ = TwoOutputs.apply(x)
    a.grad_fn.register_prehook(lambda go: seen.append(("pre", _listed(go))))
    a.grad_fn.register_hook(lambda gi, go: seen.append(("post", _listed(gi), _listed(go))))
    a.sum().backward()
    first = x.unbind(0)[0]
    first.grad_fn.register_prehook(lambda go: seen.append(("unbind", _listed(go))))
    first.backward()
    seen.append(("grad", x.grad.tolist()))
    return seen


def test_node_hooks_see_none_for_outputs_without_gradient():
    assert _node_hooks(fusegrad) == _node_hooks(torch)


def _module_hooks(lib):
    class Two(lib.nn.Module):
        def forward(self, a, b):
            return a * b, a + b

    log = []
    m = Two()
    m.register_full_backward_hook(lambda mod, gi, go: log.append((_listed(gi), _listed(go))))
    m.register_full_backward_pre_hook(lambda mod, go: log.append(_listed(go)))
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    for b in (lib.tensor([3.0, 4.0], requires_grad=True), lib.tensor([3.0, 4.0])):
        o1, _ = m(a, b)
        o1.sum().backward()
    o1, o2 = m(lib.tensor([1.0, 2.0]), lib.tensor([3.0, 4.0], requires_grad=True))
    (o1 * 2 + o2).sum().backward()
    return log, a.grad.tolist()


def test_module_full_backward_hooks_see_what_torchs_see():
    assert _module_hooks(fusegrad) == _module_hooks(torch)
