"""`fusegrad.jit.trace`: a function or module recorded on example inputs, returned as
PyTorch's types: a `ScriptFunction` for a function, a `TopLevelTracedModule` (whose
submodules are `TracedModule`s sharing the original's parameters and buffers) for a module.

The recording (the "engine" those objects run) is an FX `GraphModule`: made by
`fusegrad.fx.symbolic_trace` where that works; where it does not (control flow on a shape),
the function is run on the example inputs under the compiler's bytecode capture; where that
fails too (control flow on tensor values), the example run is recorded op by op (`make_fx`),
and, as PyTorch's tracer does, each conversion of a tensor to a Python value warns with a
`TracerWarning`: the branch taken is what the trace keeps. `.graph`, `.code` and `.save`
are those of the script program made from the recording (`_from_fx.program_from_trace`).
"""

from __future__ import annotations

import copy
import inspect
import os
import sys
import warnings

from ..ops.surface import RANDOM, has_flag
from ._markers import recording
from ._script import UNIT, Method, RecursiveScriptModule, ScriptFunction, ScriptModule


class TracerWarning(Warning):
    """A trace may not generalise: a tensor's value was read into Python while tracing."""


_DEPRECATED = "`torch.jit.{}` is deprecated. Please switch to `torch.compile` or `torch.export`."
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class TracedModule(ScriptModule):
    """A module recorded by `jit.trace`: a `ScriptModule` holding the traced module's own
    parameters and buffers (the same tensors) and its submodules as `TracedModule`s. Only
    the top-level module (`TopLevelTracedModule`) can be called, as in PyTorch."""

    def __init__(self, orig, engine=None):
        cls = type(orig)
        super().__init__(UNIT.type_name(cls.__name__, cls.__module__), cls.__name__, UNIT,
                         cls, None)
        if engine is not None:
            self.__dict__["_jit_engine"] = engine
        self.training = orig.training
        for name, p in orig._parameters.items():
            self._parameters[name] = p
        for name, b in orig._buffers.items():
            self._buffers[name] = b
        self._non_persistent_buffers_set.update(orig._non_persistent_buffers_set)
        for name, child in orig._modules.items():
            # a scripted or traced submodule stays what it is, as in PyTorch
            keep = child is None or isinstance(child, ScriptModule)
            self._modules[name] = child if keep else TracedModule(child)
        if engine is None:  # a submodule: its code is its scripted source, where it scripts
            self.__dict__["_jit_source"] = orig
        elif "_jit_trace" in engine.__dict__:
            _mark_uncalled(self, engine)

    def forward(self, *args, **kwargs):
        """Refused, as PyTorch refuses it: only the whole traced module runs."""
        raise RuntimeError("Trace submodules cannot be called.")

    def _jit_program(self) -> ScriptModule:
        source = self.__dict__.get("_jit_source")
        if source is None:
            return super()._jit_program()
        program = self.__dict__.get("_jit_program_cache")
        if program is None:
            from ._script import Unit, script_module

            try:
                program = script_module(source, Unit())
                program._forward()
            except Exception:
                raise AttributeError(f"'{type(self).__name__}' object has no attribute "
                                     "'code'") from None
            self.__dict__["_jit_program_cache"] = program
        return program

    def _compile_method(self, name: str) -> Method | None:
        """Scripted code calling a traced module's `forward` runs the recording (typed as
        the program made from it); a submodule's methods stay uncallable."""
        if self.__dict__.get("_jit_engine") is None:
            return None
        return super()._compile_method(name)

    @property
    def graph(self):
        """`forward`'s IR (a submodule the trace never called has none)."""
        if self.__dict__.get("_jit_uncalled"):
            raise RuntimeError("Method 'forward' is not defined.")
        return super().graph

    @property
    def code(self) -> str:
        """`forward` as source (a submodule the trace never called has none)."""
        if self.__dict__.get("_jit_uncalled"):
            raise AttributeError("'RecursiveScriptModule' object has no attribute 'code'")
        return super().code

    def __getattr__(self, name: str):
        # (reached when the `code` property refuses: PyTorch's message names the class
        # it gives such a submodule)
        if name == "code" and self.__dict__.get("_jit_uncalled"):
            raise AttributeError("'RecursiveScriptModule' object has no attribute 'code'")
        return super().__getattr__(name)

    def __deepcopy__(self, memo):
        """A copy as a `RecursiveScriptModule` (its submodules too), as PyTorch copies a
        traced module: the same state, the recording included."""
        new = RecursiveScriptModule.__new__(RecursiveScriptModule)
        memo[id(self)] = new
        state = {k: v for k, v in self.__getstate__().items()
                 if k not in ("_jit_source", "_jit_program_cache")}
        new.__setstate__(copy.deepcopy(state, memo))
        if "_jit_source" in self.__dict__ and not self.__dict__.get("_jit_uncalled"):
            # a submodule's copy runs (and prints) its compiled forward, on its own state
            try:
                new._jit_methods.update(self._jit_program()._jit_methods)
            except AttributeError:  # (its source does not script)
                pass
        return new

    def _get_name(self) -> str:
        return self.original_name

    def extra_repr(self) -> str:
        return f"original_name={self.original_name}"

    # a traced Sequential is no sequence (PyTorch's traced modules are not)

    def __getitem__(self, index):
        raise TypeError(f"'{type(self).__name__}' object is not subscriptable")

    def __len__(self) -> int:
        raise TypeError(f"object of type '{type(self).__name__}' has no len()")

    def __iter__(self):
        raise TypeError(f"'{type(self).__name__}' object is not iterable")

    def __bool__(self) -> bool:
        return True


def _mark_uncalled(root: TracedModule, engine) -> None:
    """Mark the traced submodules the recording never used (none of their parameters or
    buffers read, no call of them recorded): PyTorch's have no `forward`, so no code."""
    used = [str(n.target) for n in engine.graph.nodes if n.op in ("call_module", "get_attr")]
    for path, sub in root.named_modules():
        if not path or not isinstance(sub, TracedModule) or "_jit_engine" in sub.__dict__:
            continue
        has_state = any(True for _ in sub.parameters()) or any(True for _ in sub.buffers())
        if has_state and not any(t == path or t.startswith(path + ".") for t in used):
            sub.__dict__["_jit_uncalled"] = True


class TopLevelTracedModule(TracedModule):
    """What `jit.trace` of a module returns: a `TracedModule` that runs the recording."""

    def forward(self, *args, **kwargs):
        """Run the recording of the traced module's `forward`."""
        return self.__dict__["_jit_engine"](*args, **kwargs)


def trace(func, example_inputs=None, optimizer=None, check_trace=True, check_inputs=None,
          check_tolerance=1e-5, strict=True, example_kwarg_inputs=None, **unused):
    """Record `func` (a function or Module) on example inputs: a `ScriptFunction` for a
    function, a `TopLevelTracedModule` for a module (or its bound `forward`).

    The result is called like `func`, and has `.graph`, `.code` and `.save(path)` (the
    script format, read by `fusegrad.jit.load`). The recording is made with
    `fusegrad.fx.symbolic_trace`; where symbolic tracing fails (control flow on a shape, say),
    `func` is run on `example_inputs` under the compiler's bytecode capture instead, which,
    like PyTorch's tracer, fixes the branches the example inputs take (the module's
    parameters and buffers stay live). A branch on a tensor's values is recorded as the
    example run takes it, with a `TracerWarning`. A traced module shares its parameters and
    buffers with `func`.

    example_inputs: a tensor or a tuple of positional arguments; or `example_kwarg_inputs`, a
    dict of arguments by name (the traced result then takes them by name or position). With
    `check_trace`, the result is run on them (and on each tuple of `check_inputs`) and must
    agree with `func` within `check_tolerance`. `optimizer`, `strict` and other PyTorch
    arguments are accepted and ignored.
    """
    from ..nn.modules.module import Module

    if inspect.ismethod(func) and isinstance(func.__self__, Module) and \
            func.__name__ == "forward":
        func = func.__self__  # PyTorch traces a module's bound forward as the module
    engine = _record_trace(func, example_inputs, check_trace, check_inputs, check_tolerance,
                           example_kwarg_inputs)
    if isinstance(func, Module):
        return TopLevelTracedModule(func, engine)
    return ScriptFunction._from_trace(engine, engine._jit_trace[1], _qualified_name(func))


def trace_module(mod, inputs, optimizer=None, check_trace=True, check_inputs=None,
                 check_tolerance=1e-5, strict=True, _force_outplace=False,
                 _module_class=None, _compilation_unit=None, example_inputs_is_kwarg=False,
                 _store_inputs=True):
    """Trace methods of `mod`: `inputs` maps method names to their example inputs (a dict
    of arguments by name when `example_inputs_is_kwarg`). The result is a
    `TopLevelTracedModule` running the traced `forward` (when given); each other method
    traced becomes an attribute of it, a `ScriptFunction` of the method's arguments."""
    if not isinstance(inputs, dict):
        raise AttributeError("expected a dictionary of (method_name, input) pairs")

    def example(value):
        return {"example_kwarg_inputs": value} if example_inputs_is_kwarg else \
            {"example_inputs": value}

    methods = {name: getattr(mod, name) for name in inputs}  # AttributeError as PyTorch's
    if "forward" in inputs:
        engine = _record_trace(mod, check_trace=check_trace, check_inputs=check_inputs,
                               check_tolerance=check_tolerance, **example(inputs["forward"]))
        result = TopLevelTracedModule(mod, engine)
    else:
        result = TopLevelTracedModule(mod, None)
        del result.__dict__["_jit_source"]
    for name, method in methods.items():
        if name != "forward":
            engine = _record_trace(method, check_trace=check_trace, check_inputs=check_inputs,
                                   check_tolerance=check_tolerance, **example(inputs[name]))
            result.__dict__[name] = ScriptFunction._from_trace(engine, name,
                                                               _qualified_name(method))
    return result


def _record_trace(func, example_inputs=None, check_trace=True, check_inputs=None,
                  check_tolerance=1e-5, example_kwarg_inputs=None):
    """The recording of `func` on the example inputs (an FX GraphModule holding what
    `save` needs as `_jit_trace`), checked against `func` with `check_trace`."""
    from ..fx import TraceError, symbolic_trace

    warnings.warn(_DEPRECATED.format("trace"), DeprecationWarning, stacklevel=1)
    if hasattr(func, "named_parameters"):
        warnings.warn(_DEPRECATED.format("trace_method"), DeprecationWarning, stacklevel=1)
    args = _example_args(func, example_inputs, example_kwarg_inputs)
    symbolic = True
    with recording():  # (the traced code sees `jit.is_tracing()` True, as PyTorch's tracer)
        try:
            traced = symbolic_trace(func)
            _fix_modes(traced)
        except (TraceError, NotImplementedError, TypeError, AttributeError,
                NameError) as symbolic_error:  # (NameError: a module's method, not forward)
            symbolic = False
            try:
                traced = _trace_by_running(func, args)
            except Exception:
                try:
                    traced = _trace_by_recording(func, args)
                except Exception as e:
                    raise RuntimeError(
                        f"fusegrad.jit.trace could not trace {_name(func)}: symbolic tracing "
                        f"failed ({symbolic_error}) and so did recording a run on the "
                        f"example inputs ({e})") from e
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
    # what the script program (`.code`, `save`) is made from, kept picklable (a symbolic
    # trace reads sizes from its inputs, so the program can keep them dynamic)
    traced.__dict__["_jit_trace"] = (hasattr(func, "named_parameters"), _script_name(func),
                                     tuple(args), symbolic)
    return traced


def _shadow(module):
    """A module object like `module` holding the same parameter and buffer tables (shared:
    what is assigned or updated there is seen here) but its own `training` flag and, in
    turn, shadows of its submodules."""
    copy = type(module).__new__(type(module))
    copy.__dict__.update(module.__dict__)
    copy.__dict__["_modules"] = type(module._modules)(
        (k, None if v is None else _shadow(v)) for k, v in module._modules.items())
    return copy


def _fix_modes(gm) -> None:
    """A symbolic trace calls the traced module's submodules themselves, which read their
    `training` flag as they run; PyTorch's trace keeps the mode it was recorded in, whatever
    the module does later. So the trace calls shadows of them (see `_shadow`) instead."""
    for name, child in list(gm._modules.items()):
        if child is not None:
            gm._modules[name] = _shadow(child)


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


def _qualified_name(func) -> str:
    """PyTorch's qualified name of a traced function: `__torch__.` with its module's name
    (none for `__main__`) and its own name."""
    module = (getattr(func, "__module__", None) or "").replace("__main__", "").strip(".")
    name = _script_name(func)
    return f"__torch__.{module}.{name}" if module else f"__torch__.{name}"


def _script_name(func) -> str:
    """The name PyTorch gives the trace: the module's class, or the function's own name."""
    if hasattr(func, "named_parameters"):
        return type(func).__name__
    name = getattr(func, "__name__", None) or type(func).__name__
    return "_lambda" if name == "<lambda>" else name


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
                      "torch.jit.trace()", TracerWarning, stacklevel=4)


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
                          f"{err}", TracerWarning, stacklevel=5)


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
