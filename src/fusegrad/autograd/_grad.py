"""`fusegrad.autograd.backward` and `fusegrad.autograd.grad`: the engine's entry points with
PyTorch's argument handling. A module of their own, below `functional` and `gradcheck`,
which call `grad`; the package namespace re-exports both."""

from __future__ import annotations

import warnings
from collections.abc import Mapping

from .._tensor import Tensor
from .._thread_state import local as _thread_local
from .._warn import warn_once_at_caller
from .engine import run_backward
from .graph import GradientEdge


def _as_tuple(x):
    # A tensor alone, or any iterable of them (a list, a generator such as
    # `module.parameters()`, dict values), as PyTorch takes them; None stays None.
    if x is None:
        return None
    if isinstance(x, Tensor):
        return (x,)
    return tuple(x)


def _inputs_tuple(inputs, caller: str) -> tuple:
    """`inputs` of `grad()` or `backward()` (`caller`) as a tuple: a tensor, a dict (its
    values) or any other iterable of tensors."""
    if isinstance(inputs, (Tensor, GradientEdge)):
        return (inputs,)
    if type(inputs) is dict:
        return tuple(inputs.values())
    if isinstance(inputs, Mapping):
        raise TypeError(f"`inputs` argument to `{caller}` must be a dict, not "
                        f"{type(inputs).__name__}. Other Mapping types are not supported.")
    return tuple(inputs)


def _output_grads(outputs: tuple, grad_outputs) -> tuple:
    """One gradient (or None) per output: extra gradients are ignored and missing ones
    refused, as PyTorch pairs them."""
    grads = (None,) * len(outputs) if grad_outputs is None else _as_tuple(grad_outputs)
    for out in outputs[:len(grads)]:
        if not isinstance(out, Tensor):
            raise AssertionError("Expected output to be a torch.Tensor")
    if len(grads) != len(outputs):
        if len(grads) < len(outputs):
            raise RuntimeError(f"got {len(outputs)} tensors and {len(grads)} gradients")
        grads = grads[:len(outputs)]
    return grads


# `autograd.forward_ad.differentiated` while a forward AD level is open, else None: the
# passes run without making tangents, and grad()'s results with history get theirs.
forward_grads = None


def use_forward_grads(run) -> None:
    """Registration by `autograd.forward_ad` (None once its level closes)."""
    global forward_grads
    forward_grads = run


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             grad_variables=None, inputs=None) -> None:
    """Accumulate into leaves' `.grad` the gradient of `tensors` (weighted by `grad_tensors`)."""
    if forward_grads is not None:
        return forward_grads(_backward, (tensors, grad_tensors, retain_graph, create_graph,
                                         grad_variables, inputs), False)
    return _backward(tensors, grad_tensors, retain_graph, create_graph, grad_variables, inputs)


def _backward(tensors, grad_tensors, retain_graph, create_graph, grad_variables, inputs):
    if grad_variables is not None:
        warnings.warn("`grad_variables` is deprecated. Use `grad_tensors` instead.",
                      FutureWarning, stacklevel=2)
        if grad_tensors is not None:
            raise RuntimeError("`grad_tensors` and `grad_variables` (deprecated) arguments "
                               "both passed to `backward()`. Please only use `grad_tensors`.")
        grad_tensors = grad_variables
    if inputs is not None:
        inputs = _inputs_tuple(inputs, "backward()")
        if not inputs:
            raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    tensors = _as_tuple(tensors)
    grads = _output_grads(tensors, grad_tensors)
    if retain_graph is None:
        retain_graph = create_graph
    if _thread_local.transforms:  # `torch.func`'s transforms differentiate by themselves
        raise RuntimeError(
            "backward() called inside a functorch transform. This is not supported, please use "
            "functorch.grad or functorch.vjp instead or call backward() outside of functorch "
            "transforms.")
    if create_graph:  # (PyTorch's engine warns once per process)
        warn_once_at_caller(
            "Using backward() with create_graph=True will create a reference cycle between "
            "the parameter and its gradient which can cause a memory leak. We recommend using "
            "autograd.grad when creating the graph to avoid this. If you have to use this "
            "function, make sure to reset the .grad fields of your parameters to None after "
            "use to break the cycle and avoid the leak.")
    run_backward(tensors, grads, retain_graph, create_graph, inputs=inputs, accumulate=True)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of `outputs` with respect to `inputs`, without touching `.grad` (a dict
    of them, under the same keys, when `inputs` is a dict)."""
    if forward_grads is not None:
        return forward_grads(_grad, (outputs, inputs, grad_outputs, retain_graph, create_graph,
                                     only_inputs, allow_unused, is_grads_batched,
                                     materialize_grads), create_graph)
    return _grad(outputs, inputs, grad_outputs, retain_graph, create_graph, only_inputs,
                 allow_unused, is_grads_batched, materialize_grads)


def _grad(outputs, inputs, grad_outputs, retain_graph, create_graph, only_inputs,
          allow_unused, is_grads_batched, materialize_grads):
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when "
                         "materialize_grads=True, but got: allow_unused=False.")
    if allow_unused is None:
        allow_unused = materialize_grads
    outputs = _as_tuple(outputs)
    named = inputs if type(inputs) is dict else None
    inputs = _inputs_tuple(inputs, "grad()")
    if not inputs:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    if not only_inputs:
        warnings.warn("only_inputs argument is deprecated and is ignored now (defaults to "
                      "True). To accumulate gradient for other parts of the graph, please use "
                      "torch.autograd.backward.", FutureWarning, stacklevel=2)
    grads = _output_grads(outputs, grad_outputs)
    if retain_graph is None:
        retain_graph = create_graph
    if is_grads_batched:
        result = _batched_grads(outputs, grads, inputs, retain_graph, create_graph,
                                allow_unused)
    else:
        result = run_backward(outputs, grads, retain_graph, create_graph, inputs=inputs,
                              accumulate=False, allow_unused=allow_unused)
    if materialize_grads:
        result = tuple(g if g is not None else _zeros_for(x, create_graph)
                       for g, x in zip(result, inputs))
    if named is not None:
        return dict(zip(named.keys(), result))
    return result


def _zeros_for(x, create_graph: bool):
    # An unused input's materialized gradient: zeros like it, themselves requiring grad
    # under create_graph (as PyTorch's, to be differentiated further).
    zeros = x.new_zeros(x.shape)
    return zeros._requires_grad_unguarded() if create_graph else zeros


def _batched_grads(outputs, grads, inputs, retain_graph, create_graph, allow_unused):
    """`grad` with `is_grads_batched`: each grad_output holds a batch of gradients along its
    first dim; one backward pass per batch entry (the graph kept until the last), the results
    stacked along a new first dim (None where an input is unused)."""
    from .._dispatch import call
    from ..ops.joins import stack

    if any(g is None for g in grads):
        raise RuntimeError("grad_outputs must be given (one batched tensor per output) when "
                           "is_grads_batched=True")
    n = grads[0].shape[0] if grads[0].dim() else 0
    if any(g.dim() == 0 or g.shape[0] != n for g in grads):
        raise RuntimeError("If `is_grads_batched=True`, each grad_output must have the same "
                           "size along its first dimension")
    rows = [run_backward(outputs, tuple(g[b] for g in grads), retain_graph or b < n - 1,
                         create_graph, inputs=inputs, accumulate=False,
                         allow_unused=allow_unused) for b in range(n)]
    return tuple(None if not rows or rows[0][i] is None else call(stack, [r[i] for r in rows], 0)
                 for i in range(len(inputs)))


# Their public home is the package, as PyTorch's are in `torch.autograd`.
backward.__module__ = grad.__module__ = "fusegrad.autograd"
