"""Selective activation checkpointing (`create_selective_checkpoint_contexts`): the policy is
asked as PyTorch asks (the ops, their order, their results), gradients equal PyTorch's and
those of the region run without checkpointing, kept results are not recomputed, and the
errors are PyTorch's."""

from __future__ import annotations

import functools
import importlib

import numpy as np
import pytest

import fusegrad
from fusegrad.utils import _selective_checkpoint as sac

torch = pytest.importorskip("torch")


def _checkpoint(lib):
    return importlib.import_module(lib.__name__ + ".utils.checkpoint")


def _data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


def _region(lib, x, y):
    return lib.sigmoid(lib.matmul(lib.matmul(x, y), y)) * y


def _run(lib, policy):
    cp = _checkpoint(lib)
    asked = []

    def policy_fn(ctx, op, *args, **kwargs):
        asked.append((str(op), ctx.is_recompute, tuple(ctx.op_output.shape)))
        if policy == "mm" and op is lib.ops.aten.mm.default:
            return cp.CheckpointPolicy.MUST_SAVE
        return cp.CheckpointPolicy.PREFER_RECOMPUTE if policy != "bool" else op is \
            lib.ops.aten.sigmoid.default

    x = lib.tensor(_data(4, 4), requires_grad=True)
    y = lib.tensor(_data(4, 4, seed=1), requires_grad=True)
    context = (functools.partial(cp.create_selective_checkpoint_contexts, policy_fn)
               if policy != "list" else functools.partial(
                   cp.create_selective_checkpoint_contexts,
                   [lib.ops.aten.mm.default, lib.ops.aten.sigmoid.default]))
    out = cp.checkpoint(_region, lib, x, y, use_reentrant=False, context_fn=context)
    out.sum().backward()
    return asked, x.grad.numpy(), y.grad.numpy()


@pytest.mark.parametrize("policy", ["mm", "recompute", "bool", "list"])
def test_policy_asked_and_gradients_as_pytorch(policy):
    ours, theirs = _run(fusegrad, policy), _run(torch, policy)
    assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5, atol=1e-6)


def test_kept_results_are_not_recomputed():
    """A model's linear layers kept (`addmm`): the recomputation runs everything else."""
    fusegrad.manual_seed(0)
    model = fusegrad.nn.Sequential(fusegrad.nn.Linear(6, 8), fusegrad.nn.GELU(),
                                   fusegrad.nn.Linear(8, 3))
    x = fusegrad.tensor(_data(5, 6), requires_grad=True)
    store_of = []

    def context():
        forward, recompute = sac.create_selective_checkpoint_contexts(
            [fusegrad.ops.aten.addmm.default])
        store_of.append(forward.store)
        return forward, recompute

    cp = _checkpoint(fusegrad)
    out = cp.checkpoint(model, x, use_reentrant=False, context_fn=context)
    out.pow(2).sum().backward()
    got = [x.grad.clone()] + [p.grad.clone() for p in model.parameters()]
    store = store_of[0]
    assert len(store["addmm"]) == 2 and all(e is sac._CONSUMED for e in store["addmm"])
    assert all(e is sac._RECOMPUTE for name, entries in store.items() if name != "addmm"
               for e in entries)
    x.grad = None
    model.zero_grad()
    model(x).pow(2).sum().backward()
    want = [x.grad] + [p.grad for p in model.parameters()]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("bad", ["packet", "number"])
def test_bad_policies_as_pytorch(bad):
    def error(lib):
        value = [lib.ops.aten.mm] if bad == "packet" else 3
        try:
            _checkpoint(lib).create_selective_checkpoint_contexts(value)
        except Exception as e:  # (any type: the type is compared)
            return type(e).__name__, str(e).split(" of type ")[0]
        return None

    assert error(fusegrad) == error(torch) is not None


def test_helpers_as_pytorch():
    def program(lib):
        cp = _checkpoint(lib)
        x = lib.ones(2, requires_grad=True)
        detached = cp.detach_variable((x, 3))
        try:
            cp.detach_variable([x])
        except RuntimeError as e:
            message = str(e)
        return [detached[0].requires_grad, detached[0].grad_fn is None, detached[1],
                cp.get_device_states(x), message]

    assert program(fusegrad) == program(torch)


def _second_backward(lib, selective: bool):
    cp = _checkpoint(lib)
    calls = [0]

    def region(x):
        calls[0] += 1
        return lib.nn.functional.dropout(x.sin(), 0.5).exp()

    lib.manual_seed(0)
    x = lib.tensor(_data(6), requires_grad=True)
    extra = {}
    if selective:
        extra["context_fn"] = functools.partial(
            cp.create_selective_checkpoint_contexts,
            lambda ctx, op, *a, **k: cp.CheckpointPolicy.MUST_SAVE
            if op is lib.ops.aten.sin.default else cp.CheckpointPolicy.PREFER_RECOMPUTE)
    y = cp.checkpoint(region, x, use_reentrant=False, **extra).sum()
    y.backward(retain_graph=True)
    first = x.grad.clone()
    try:
        y.backward(retain_graph=True)
        second = x.grad.clone()
    except RuntimeError as e:
        return calls[0], first.numpy(), str(e)
    again = lib.autograd.grad(y, x)[0]
    return calls[0], first.numpy(), second.numpy(), again.numpy()


@pytest.mark.parametrize("selective", [False, True])
def test_each_backward_recomputes_as_pytorch(selective):
    # A second backward under retain_graph recomputes the region again (the call count, the
    # dropout mask from the forward's RNG state); a selective region refuses it instead.
    ours, theirs = _second_backward(fusegrad, selective), _second_backward(torch, selective)
    assert ours[0] == theirs[0]
    for a, b in zip(ours[1:], theirs[1:]):
        if isinstance(a, str):
            assert a == b
        else:
            np.testing.assert_allclose(a, b, rtol=1e-6)
