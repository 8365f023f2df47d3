"""`fusegrad.autograd.backward` and `fusegrad.autograd.grad`: the engine's entry points with
PyTorch's argument handling. A module of their own, below `functional` and `gradcheck`,
which call `grad`; the package namespace re-exports both."""

from __future__ import annotations

from .engine import run_backward


def _as_tuple(x):
    if x is None:
        return None
    if isinstance(x, (list, tuple)):
        return tuple(x)
    return (x,)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             grad_variables=None, inputs=None) -> None:
    """Accumulate into leaves' `.grad` the gradient of `tensors` (weighted by `grad_tensors`)."""
    tensors = _as_tuple(tensors)
    grads = _as_tuple(grad_tensors if grad_tensors is not None else grad_variables)
    if grads is None:
        grads = (None,) * len(tensors)
    if len(grads) != len(tensors):
        raise RuntimeError(f"got {len(grads)} tensors and {len(tensors)} gradients")
    if retain_graph is None:
        retain_graph = create_graph
    inputs = _as_tuple(inputs)
    if inputs is not None and not inputs:
        raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    run_backward(tensors, grads, retain_graph, create_graph, inputs=inputs, accumulate=True)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of `outputs` with respect to `inputs`, without touching `.grad`."""
    outputs = _as_tuple(outputs)
    single = not isinstance(inputs, (list, tuple))
    inputs = _as_tuple(inputs)
    if not inputs:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    grads = _as_tuple(grad_outputs) or (None,) * len(outputs)
    if retain_graph is None:
        retain_graph = create_graph
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when "
                         "materialize_grads=True, but got: allow_unused=False.")
    if allow_unused is None:
        allow_unused = materialize_grads
    if is_grads_batched:
        result = _batched_grads(outputs, grads, inputs, retain_graph, create_graph,
                                allow_unused)
    else:
        result = run_backward(outputs, grads, retain_graph, create_graph, inputs=inputs,
                              accumulate=False, allow_unused=allow_unused)
    if materialize_grads:
        result = tuple(g if g is not None else x.new_zeros(x.shape)
                       for g, x in zip(result, inputs))
    del single
    return result


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
