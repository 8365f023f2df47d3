"""Older spellings user programs still run: `torch.autograd.Variable`, `torch.cpu.amp`'s
autocast and GradScaler (with their deprecation warnings), and `autograd.grad` with
`is_grads_batched` and `materialize_grads`, each against PyTorch."""

import importlib
import warnings

import pytest
import torch

import fusegrad


def _variable_facts(lib):
    variable = importlib.import_module(lib.__name__ + ".autograd").Variable
    x = lib.ones(2)
    v = variable(x)
    v2 = variable(x, requires_grad=True)
    y = lib.ones(2, requires_grad=True) * 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        variable(x, volatile=True)
    with pytest.raises(TypeError) as info:
        variable([1, 2])
    return (v.tolist(), v.requires_grad, v.is_leaf, v.data_ptr() == x.data_ptr(),
            isinstance(x, variable), issubclass(lib.Tensor, variable), v2.requires_grad,
            v2 is x, variable().tolist(), variable(y).grad_fn, variable(y).requires_grad,
            [str(w.message) for w in caught], str(info.value),
            lib.autograd.variable.Variable is variable)


def test_variable_as_torch():
    assert _variable_facts(fusegrad) == _variable_facts(torch)


def _cpu_amp_facts(lib):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with lib.cpu.amp.autocast():
            dtype = (lib.ones(2, 2) @ lib.ones(2, 2)).dtype
        with lib.cpu.amp.autocast(enabled=False):
            off = (lib.ones(2, 2) @ lib.ones(2, 2)).dtype
        scaler = lib.cpu.amp.GradScaler(init_scale=4.0)
    return (str(dtype).split(".")[-1], str(off).split(".")[-1], scaler.get_scale(),
            [(w.category.__name__, str(w.message)) for w in caught])


def test_cpu_amp_as_torch():
    assert _cpu_amp_facts(fusegrad) == _cpu_amp_facts(torch)


def _batched(lib):
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = lib.ones(3, 2, requires_grad=True)
    u = lib.ones(2, requires_grad=True)
    out = [lib.autograd.grad(x ** 2, x, grad_outputs=lib.eye(3), is_grads_batched=True)]
    y = x @ w
    out.append(lib.autograd.grad(y, [x, w, u], grad_outputs=lib.eye(2), retain_graph=True,
                                 is_grads_batched=True, allow_unused=True))
    out.append(lib.autograd.grad(y, [x, u], grad_outputs=lib.eye(2), retain_graph=True,
                                 is_grads_batched=True, materialize_grads=True))
    (g,) = lib.autograd.grad(y, x, grad_outputs=lib.eye(2), is_grads_batched=True,
                             create_graph=True)
    with pytest.raises(ValueError) as info:
        lib.autograd.grad((x * 2).sum(), [x, u], allow_unused=False, materialize_grads=True)
    return ([[None if t is None else t.tolist() for t in r] for r in out], g.requires_grad,
            str(info.value))


def test_grads_batched_and_materialized_as_torch():
    assert _batched(fusegrad) == _batched(torch)
