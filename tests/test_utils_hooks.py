"""`torch.utils.hooks.RemovableHandle` and `torch.utils.swap_tensors` against PyTorch: the
handles every `register_*hook` returns are the public class, removal (also of a module hook's
flag entries) and the context manager, and swapping two tensors in place."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

from collections import OrderedDict  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402


@pytest.mark.parametrize("lib", [torch, fusegrad])
def test_handles_are_the_public_class(lib):
    from importlib import import_module

    hooks = import_module(f"{lib.__name__}.utils.hooks")
    lin = lib.nn.Linear(2, 2)
    t = lib.ones(2, requires_grad=True)
    handles = [lin.register_forward_hook(lambda *a: None),
               lin.register_full_backward_hook(lambda *a: None),
               t.register_hook(lambda g: g), (t * 2).grad_fn.register_hook(lambda *a: None)]
    assert all(type(h) is hooks.RemovableHandle for h in handles)
    assert len({h.id for h in handles}) == 4


@pytest.mark.parametrize("lib", [torch, fusegrad])
def test_remove_clears_hook_and_extra_dicts(lib):
    from importlib import import_module

    handle_cls = import_module(f"{lib.__name__}.utils.hooks").RemovableHandle
    hooks, extra = OrderedDict(), OrderedDict()
    h = handle_cls(hooks, extra_dict=extra)
    hooks[h.id] = "hook"
    extra[h.id] = True
    h.remove()
    h.remove()
    assert not hooks and not extra
    with handle_cls(hooks) as h2:
        hooks[h2.id] = "again"
        assert list(hooks) == [h2.id]
    assert not hooks
    # A module's kwargs and always-call flags go with the hook.
    lin = lib.nn.Linear(2, 2)
    h3 = lin.register_forward_hook(lambda m, a, k, o: None, with_kwargs=True, always_call=True)
    h4 = lin.register_forward_pre_hook(lambda m, a, k: None, with_kwargs=True)
    h3.remove()
    h4.remove()
    assert not lin._forward_hooks_with_kwargs and not lin._forward_hooks_always_called
    assert not lin._forward_pre_hooks_with_kwargs


def _swap_story(lib):
    a = lib.ones(2, requires_grad=True)
    b = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)
    p = lib.nn.Parameter(lib.zeros(1))
    q = lib.full((2, 2), 5.0)
    lib.utils.swap_tensors(p, q)
    out = [a.shape, type(p).__name__, type(q).__name__, p.tolist(), q.tolist()]
    c = a * 2
    lib.utils.swap_tensors(a, b)
    out += [a.tolist(), a.dtype == lib.float64, a.requires_grad, b.requires_grad]
    try:
        c.sum().backward()
    except RuntimeError as e:
        out.append(str(e))
    del c
    (a.sum() + b.sum()).backward()
    out += [a.grad, b.grad.tolist()]
    for bad in (1, "x"):
        try:
            lib.utils.swap_tensors(a, bad)
        except AttributeError as e:
            out.append(str(e))
    import weakref

    w = lib.zeros(1)
    ref = weakref.ref(w)
    try:
        lib.utils.swap_tensors(w, lib.zeros(1))
    except RuntimeError as e:
        out.append(str(e))
    try:
        lib.utils.swap_tensors(lib.zeros(1), w)
    except RuntimeError as e:
        out.append(str(e))
    del ref
    return [tuple(x) if hasattr(x, "__len__") and not isinstance(x, (str, list)) else x
            for x in out]


def test_swap_tensors_matches_torch():
    ours, theirs = _swap_story(fusegrad), _swap_story(torch)
    assert ours == theirs
