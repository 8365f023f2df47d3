"""`fusegrad.jit`: `script(fn)` is `compile(fn, fullgraph=True)` (no TorchScript format);
`trace(fn, example_inputs)` records a function or module as an FX `GraphModule`."""

from __future__ import annotations


def script(obj, optimize=None, _frames_up: int = 0, _rcb=None, example_inputs=None):
    """Capture `obj` (a function or module) whole: a graph break is an error."""
    from ..compiler import compile as _compile

    return _compile(obj, fullgraph=True)


def trace(func, example_inputs=None, optimizer=None, check_trace=True, check_inputs=None,
          check_tolerance=1e-5, strict=True, example_kwarg_inputs=None, **unused):
    """Record `func` (a function or Module) as a `fusegrad.fx.GraphModule`.

    The result has `.graph` (the FX graph), `.code` (the Python source of its `forward`) and
    is called like `func`. It is made with `fusegrad.fx.symbolic_trace`; where symbolic
    tracing fails (control flow on a shape, say), `func` is run on `example_inputs` under the
    compiler's bytecode capture instead, which, like PyTorch's tracer, fixes the branches the
    example inputs take (the module's parameters and buffers stay live attributes). A branch
    on a tensor's values can be captured by neither: that is a RuntimeError.

    example_inputs: a tensor or a tuple of positional arguments. With `check_trace`, the
    result is run on them (and on each tuple of `check_inputs`) and must agree with `func`
    within `check_tolerance`. `optimizer`, `strict` and other PyTorch arguments are accepted
    and ignored.
    """
    from ..fx import TraceError, symbolic_trace

    if example_inputs is None and example_kwarg_inputs is not None:
        raise NotImplementedError("fusegrad.jit.trace: pass example_inputs positionally")
    args = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    if example_inputs is None:
        args = ()
    try:
        traced = symbolic_trace(func)
    except (TraceError, NotImplementedError, TypeError, AttributeError) as symbolic_error:
        try:
            traced = _trace_by_running(func, args)
        except Exception as e:
            raise RuntimeError(
                f"fusegrad.jit.trace could not trace {_name(func)}: symbolic tracing failed "
                f"({symbolic_error}) and so did capturing a run on the example inputs ({e})"
            ) from e
    if check_trace:
        for check in [args, *(check_inputs or ())]:
            check = check if isinstance(check, tuple) else (check,)
            _check_same(func(*check), traced(*check), check_tolerance, func)
    return traced


def _name(func) -> str:
    return getattr(func, "__qualname__", None) or type(func).__name__


def _check_same(expected, got, tol, func) -> None:
    """Raise when the traced result differs from `func`'s (a tensor or nested tuples/lists)."""
    import numpy as np

    from .._tensor import Tensor

    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            raise RuntimeError(f"trace of {_name(func)} returns a different structure")
        for e, g in zip(expected, got):
            _check_same(e, g, tol, func)
    elif isinstance(expected, Tensor):
        if not isinstance(got, Tensor) or tuple(got.shape) != tuple(expected.shape) or \
                not np.allclose(got.detach().numpy(), expected.detach().numpy(), rtol=tol,
                                atol=tol, equal_nan=True):
            raise RuntimeError(
                f"trace of {_name(func)} disagrees with it on the example inputs (was there "
                "control flow on tensor values or randomness?)")


def _trace_by_running(func, args):
    """Run `func` on `args` under the compiler's whole-function capture and turn the captured
    graph into a GraphModule whose placeholders are `func`'s positional arguments."""
    from ..compiler import compile as _compile
    from ..fx import Graph, GraphModule

    captured = []

    def backend(gm, example_values):
        captured.append((gm, list(example_values)))
        return gm.forward

    result = _compile(func, backend=backend, fullgraph=True)(*args)
    if len(captured) != 1:
        raise RuntimeError(f"expected one captured graph, got {len(captured)}")
    gm, values = captured[0]

    names = {}  # id(tensor) -> attribute name, for the module's own parameters and buffers
    if hasattr(func, "named_parameters"):
        for qual, t in [*func.named_parameters(), *func.named_buffers()]:
            names.setdefault(id(t), qual)
    graph, attrs, env = Graph(), {}, {}
    inputs = [graph.placeholder(f"input_{i}" if len(args) > 1 else "input")
              for i in range(len(args))]
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, value in zip(placeholders, values):
        k = next((i for i, a in enumerate(args) if a is value), None)
        if k is not None:
            env[node] = inputs[k]
        else:  # a tensor the function reads (a parameter, buffer or global)
            qual = names.get(id(value), f"_tensor_constant{len(attrs)}")
            attrs[qual] = value
            env[node] = graph.get_attr(qual)
    for node in gm.graph.nodes:  # attributes the captured graph reads itself
        if node.op == "get_attr":
            obj = gm
            for part in node.target.split("."):
                obj = getattr(obj, part)
            attrs[node.target] = obj
    out = graph.graph_copy(gm.graph, env)
    if not isinstance(result, (tuple, list)):
        if isinstance(out, (tuple, list)) and len(out) == 1:
            out = out[0]
    elif isinstance(result, list):
        out = list(out)
    graph.output(out)
    return GraphModule(attrs, graph, class_name=type(func).__name__
                       if hasattr(func, "named_parameters") else "GraphModule")


__all__ = ["script", "trace"]
