"""Shared helpers of the nn/optim oracle tests (no tests here).

`compare_modules(th, fg, *arrays)` copies the torch module's parameters and buffers into
the fusegrad module, runs both on the same inputs and compares outputs, grad_fn names, every
gradient, then ten optimizer steps and the final state.
"""

from __future__ import annotations

import numpy as np
import torch

import fusegrad


def to_fg(t: torch.Tensor) -> fusegrad.Tensor:
    """A fusegrad tensor holding a copy of torch tensor `t`'s values."""
    return fusegrad.from_numpy(t.detach().numpy().copy())


def sync(th: torch.nn.Module, fg: fusegrad.nn.Module) -> None:
    """Load torch module `th`'s state into fusegrad module `fg` (same key names)."""
    fg.load_state_dict({k: to_fg(v) for k, v in th.state_dict().items()})


def close(a, b, atol: float = 1e-5, rtol: float = 1e-5, what: str = "") -> None:
    """fusegrad tensor `a` equals torch tensor `b` (shape, dtype name, values)."""
    assert tuple(a.shape) == tuple(b.shape), f"{what}: shape {tuple(a.shape)} != {b.shape}"
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1], what
    np.testing.assert_allclose(np.asarray(a.detach().numpy(), dtype=np.float64),
                               b.detach().double().numpy(), atol=atol, rtol=rtol, err_msg=what)


def node(t) -> str | None:
    """The class name of `t`'s grad_fn."""
    return None if t.grad_fn is None else type(t.grad_fn).__name__


def _inputs(arrays, requires_grad):
    th, fg = [], []
    for a in arrays:
        if isinstance(a, np.ndarray):
            rg = requires_grad and a.dtype.kind == "f"
            th.append(torch.tensor(a, requires_grad=rg))
            fg.append(fusegrad.tensor(a, requires_grad=rg))
        else:
            th.append(a)
            fg.append(a)
    return th, fg


def compare_modules(th_mod, fg_mod, *arrays, steps: int = 10, optimizer=("SGD", {"lr": 0.05}),
                    atol: float = 1e-5, step_atol: float = 1e-4, grad_input: bool = True,
                    check_node: bool = True, seed: int = 0):
    """Forward, node name, gradients and `steps` optimizer steps of two modules agree."""
    sync(th_mod, fg_mod)
    th_in, fg_in = _inputs(arrays, grad_input)
    out_t, out_f = th_mod(*th_in), fg_mod(*fg_in)
    close(out_f, out_t, atol, atol, "output")
    if check_node:
        assert node(out_f) == node(out_t), f"grad_fn {node(out_f)} != {node(out_t)}"
    cot = np.random.default_rng(seed).standard_normal(tuple(out_t.shape)).astype(np.float32)
    if out_t.dtype == torch.float64:
        cot = cot.astype(np.float64)
    (out_t * torch.tensor(cot)).sum().backward()
    (out_f * fusegrad.tensor(cot)).sum().backward()
    for i, (a, b) in enumerate(zip(fg_in, th_in)):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            close(a.grad, b.grad, atol * 10, atol * 10, f"input {i} grad")
    th_params = dict(th_mod.named_parameters())
    fg_params = dict(fg_mod.named_parameters())
    assert list(fg_params) == list(th_params)
    for name, p in th_params.items():
        if p.grad is None:
            assert fg_params[name].grad is None, name
        else:
            close(fg_params[name].grad, p.grad, atol * 10, atol * 10, f"{name}.grad")
    if not steps or not th_params:
        return out_f, out_t
    name, kwargs = optimizer
    opt_t = getattr(torch.optim, name)(th_mod.parameters(), **kwargs)
    opt_f = getattr(fusegrad.optim, name)(fg_mod.parameters(), **kwargs)
    th_in, fg_in = _inputs(arrays, False)
    for _ in range(steps):
        for mod, opt, ins, T in ((th_mod, opt_t, th_in, torch), (fg_mod, opt_f, fg_in, fusegrad)):
            opt.zero_grad()
            (mod(*ins) * T.tensor(cot)).sum().backward()
            opt.step()
    sd_t, sd_f = th_mod.state_dict(), fg_mod.state_dict()
    assert list(sd_f) == list(sd_t)
    for k in sd_t:
        close(sd_f[k], sd_t[k], step_atol, step_atol, f"after {steps} steps: {k}")
    return out_f, out_t
