"""`fusegrad.jit.trace`: a function or module recorded on example inputs as an FX
`GraphModule`, with `.save` writing it in the script format.

The recording is `fusegrad.fx.symbolic_trace` where that works; where it does not (control
flow on a shape), the function is run on the example inputs under the compiler's bytecode
capture; where that fails too (control flow on tensor values), the example run is recorded
op by op (`make_fx`), and, as PyTorch's tracer does, each conversion of a tensor to a Python
value warns with a `TracerWarning`: the branch taken is what the trace keeps.
"""

from __future__ import annotations

import inspect
import os
import sys
import warnings

from ..ops.surface import RANDOM, has_flag


class TracerWarning(Warning):
    """A trace may not generalise: a tensor's value was read into Python while tracing."""


_DEPRECATED = "`torch.jit.{}` is deprecated. Please switch to `torch.compile` or `torch.export`."
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def trace(func, example_inputs=None, optimizer=None, check_trace=True, check_inputs=None,
          check_tolerance=1e-5, strict=True, example_kwarg_inputs=None, **unused):
    """Record `func` (a function or Module) as a `fusegrad.fx.GraphModule`.

    The result has `.graph` (the FX graph), `.code` (the Python source of its `forward`) and
    is called like `func`. It is made with `fusegrad.fx.symbolic_trace`; where symbolic
    tracing fails (control flow on a shape, say), `func` is run on `example_inputs` under the
    compiler's bytecode capture instead, which, like PyTorch's tracer, fixes the branches the
    example inputs take (the module's parameters and buffers stay live attributes). A branch
    on a tensor's values is recorded as the example run takes it, with a `TracerWarning`.
    `.save(path)` writes the result in the script format (`fusegrad.jit.load` reads it).

    example_inputs: a tensor or a tuple of positional arguments; or `example_kwarg_inputs`, a
    dict of arguments by name (the traced result then takes them by name or position). With
    `check_trace`, the result is run on them (and on each tuple of `check_inputs`) and must
    agree with `func` within `check_tolerance`. `optimizer`, `strict` and other PyTorch
    arguments are accepted and ignored.
    """
    from ..fx import TraceError, symbolic_trace

    warnings.warn(_DEPRECATED.format("trace"), DeprecationWarning, stacklevel=1)
    if hasattr(func, "named_parameters"):
        warnings.warn(_DEPRECATED.format("trace_method"), DeprecationWarning, stacklevel=1)
    args = _example_args(func, example_inputs, example_kwarg_inputs)
    symbolic = True
    try:
        traced = symbolic_trace(func)
    except (TraceError, NotImplementedError, TypeError, AttributeError) as symbolic_error:
        symbolic = False
        try:
            traced = _trace_by_running(func, args)
        except Exception:
            try:
                traced = _trace_by_recording(func, args)
            except Exception as e:
                raise RuntimeError(
                    f"fusegrad.jit.trace could not trace {_name(func)}: symbolic tracing "
                    f"failed ({symbolic_error}) and so did recording a run on the example "
                    f"inputs ({e})") from e
    if check_trace:
        # PyTorch checks by tracing again, which warns again
        again = "trace_method" if hasattr(func, "named_parameters") else "trace"
        warnings.warn(_DEPRECATED.format(again), DeprecationWarning, stacklevel=1)
        _warn_nondeterministic(traced)
        for check in [args, *(check_inputs or ())]:
            check = check if isinstance(check, tuple) else (check,)
            _check_same(func(*check), traced(*check), check_tolerance, func)
        if example_kwarg_inputs is not None:
            _check_same(func(**example_kwarg_inputs), traced(**example_kwarg_inputs),
                        check_tolerance, func)
    # what `save` needs, kept picklable; `save` goes on the trace's own class
    # (a symbolic trace reads sizes from its inputs, so `save` can keep them dynamic)
    traced.__dict__["_jit_trace"] = (hasattr(func, "named_parameters"), _name(func),
                                     tuple(args), symbolic)
    type(traced).save = _save_trace
    return traced


def _example_args(func, example_inputs, example_kwarg_inputs) -> tuple:
    """The example inputs as positional arguments in `func`'s parameter order."""
    if example_kwarg_inputs is None:
        if example_inputs is None:
            raise TypeError("fusegrad.jit.trace: give example_inputs (a tensor or a tuple) or "
                            "example_kwarg_inputs (a dict)")
        return example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    if not isinstance(example_kwarg_inputs, dict):
        raise TypeError("fusegrad.jit.trace: example_kwarg_inputs must be a dict of arguments "
                        f"by name, not {type(example_kwarg_inputs).__name__}")
    target = func.forward if hasattr(func, "named_parameters") else func
    try:
        bound = inspect.signature(target).bind(**example_kwarg_inputs)
    except TypeError as e:
        raise TypeError(f"fusegrad.jit.trace: example_kwarg_inputs do not fit {_name(func)}: "
                        f"{e}") from None
    return tuple(bound.args)


def _parameter_names(func, count: int) -> list[str]:
    """Names for the traced graph's inputs: `func`'s own, so it can be called by keyword."""
    target = func.forward if hasattr(func, "named_parameters") else func
    try:
        names = [p.name for p in inspect.signature(target).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    if len(names) >= count:
        return names[:count]
    return [f"input_{i}" if count > 1 else "input" for i in range(count)]


def _name(func) -> str:
    return getattr(func, "__qualname__", None) or type(func).__name__


def _warn_nondeterministic(traced) -> None:
    """PyTorch's warning for a trace holding random operations (which the check then
    usually finds disagreeing)."""
    nodes = []
    for node in getattr(getattr(traced, "graph", None), "nodes", ()):
        if node.op == "call_module":
            mod = traced.get_submodule(node.target)
            name = type(mod).__name__.lower()
            random = "dropout" in name and mod.training
        elif node.op in ("call_function", "call_method"):
            name = node.target if isinstance(node.target, str) else \
                getattr(node.target, "__name__", "")
            random = has_flag(name, RANDOM) and node.kwargs.get("training", True) is not False
        else:
            continue
        if random:
            nodes.append(f"\t{node.format_node()}")
    if nodes:
        warnings.warn("Trace had nondeterministic nodes. Did you forget call .eval() on your "
                      "model? Nodes:\n" + "\n".join(nodes) + "\nThis may cause errors in "
                      "trace checking. To disable trace checking, pass check_trace=False to "
                      "torch.jit.trace()", TracerWarning, stacklevel=3)


def _flat_tensors(value) -> list:
    from .._tensor import Tensor

    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _flat_tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _flat_tensors(v)]
    return [value] if isinstance(value, Tensor) else []


def _check_same(expected, got, tol, func) -> None:
    """Compare the traced result with `func`'s: a different structure raises; each tensor
    output that differs warns with a TracerWarning, as PyTorch's trace check does (its
    number counted from 1, with `testing.assert_close`'s report)."""
    from .. import float64, testing

    if _structure(expected) != _structure(got):
        raise RuntimeError(f"trace of {_name(func)} returns a different structure")
    for i, (g, e) in enumerate(zip(_flat_tensors(got), _flat_tensors(expected))):
        atol = 1e-7 if g.dtype == float64 or e.dtype == float64 else 1e-5
        try:
            testing.assert_close(g.detach().to(float64), e.detach().to(float64), rtol=tol,
                                 atol=atol, equal_nan=True)
        except AssertionError as err:
            warnings.warn(f"Output nr {i + 1}. of the traced function does not match the "
                          "corresponding output of the Python function. Detailed error:\n"
                          f"{err}", TracerWarning, stacklevel=4)


def _structure(value):
    from .._tensor import Tensor

    if isinstance(value, (tuple, list)):
        return [_structure(v) for v in value]
    return "T" if isinstance(value, Tensor) else None


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
    inputs = [graph.placeholder(n) for n in _parameter_names(func, len(args))]
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


def _warn_conversion(kind: str, tensor=None) -> None:
    """The `TracerWarning` for a tensor read into a Python value by the traced code (reads
    made inside fusegrad itself are its own business and pass silently; `.data` is no read)."""
    if kind == "data":
        return
    frame = sys._getframe(3)  # this hook <- _converted <- the Tensor method <- its caller
    if os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        return
    message = (f"Converting a tensor to a Python {kind} might cause the trace to be "
               "incorrect. We can't record the data flow of Python values, so this value "
               "will be treated as a constant in the future. This means that the trace might "
               "not generalize to other inputs!")
    if kind == "NumPy array":
        message = message.replace("a Python NumPy array", "a NumPy array")
    registry = frame.f_globals.setdefault("__warningregistry__", {})
    warnings.warn_explicit(message, TracerWarning, frame.f_code.co_filename, frame.f_lineno,
                           module=frame.f_globals.get("__name__"), registry=registry)


def _record(func, args):
    """`make_fx` of `func` on `args`, warning on each tensor read into Python."""
    from .._tensor import CONVERSION_HOOKS
    from ..compiler.aot.make_fx import make_fx

    CONVERSION_HOOKS.append(_warn_conversion)
    try:
        return make_fx(func)(*args)
    finally:
        CONVERSION_HOOKS.remove(_warn_conversion)


def _trace_by_recording(func, args):
    """Record the ops one run of `func` on `args` performs, as a GraphModule whose inputs
    are `func`'s parameters and whose tensors are the module's own (by their names)."""
    from ..fx import Graph, GraphModule

    gm = _record(func, args)
    names = {}
    if hasattr(func, "named_parameters"):
        for qual, t in [*func.named_parameters(), *func.named_buffers()]:
            names.setdefault(id(t), qual)
    graph, attrs, env = Graph(), {}, {}
    inputs = [graph.placeholder(n) for n in _parameter_names(func, len(args))]
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            env[node] = inputs[len(env)]
        elif node.op == "get_attr":
            value = getattr(gm, node.target)
            qual = names.get(id(value), node.target)
            attrs[qual] = value
            env[node] = graph.get_attr(qual)
    graph.output(graph.graph_copy(gm.graph, env))
    return GraphModule(attrs, graph, class_name=type(func).__name__
                       if hasattr(func, "named_parameters") else "GraphModule")


def _save_trace(self, f) -> None:
    """Write the trace in the script format, to be read by `fusegrad.jit.load`."""
    from ._from_fx import program_from_trace

    program_from_trace(self).save(f)
