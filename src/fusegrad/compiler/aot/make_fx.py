"""`make_fx`: trace a function into a graph of registry ops (torch's `make_fx`)."""

from __future__ import annotations

import functools
import inspect

from ..._fake import FakeTensor
from ..._tensor import Tensor
from .tracing import Tracer


def placeholder_names(fn, n: int) -> list[str]:
    """Names for `n` inputs of `fn`: its parameter names with `_1` appended, as make_fx's."""
    names: list[str] = []
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    for p in params:
        if len(names) == n:
            break
        if p.kind == p.VAR_POSITIONAL:
            while len(names) < n:
                names.append(f"{p.name}_{len(names) + 1}")
        elif p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(f"{p.name}_1")
    while len(names) < n:
        names.append(f"arg{len(names)}_1")
    return names


def _signature_of(f, n: int) -> tuple[str, list[str]]:
    # make_fx traces a function by its own parameters; anything else (a module, a partial, a
    # function taking *args) through a stand-in lambda of parameters arg0, arg1, ... (so the
    # class is named "<lambda>"), as torch's make_fx does.
    fn = inspect.unwrap(f)
    code = getattr(fn, "__code__", None)
    if code is None or code.co_flags & inspect.CO_VARARGS:
        return "<lambda>", [f"arg{i}_1" for i in range(n)]
    return getattr(fn, "__name__", "<lambda>"), placeholder_names(fn, n)


def graph_module(tracer: Tracer, class_name: str = "GraphModule"):
    """The GraphModule of a finished trace (its constants become attributes)."""
    from ...fx import GraphModule

    return GraphModule(dict(tracer.constants), tracer.graph, class_name)


def make_fx(f, decomposition_table: dict | None = None, tracing_mode: str = "real",
            _allow_non_fake_inputs: bool = False, pre_dispatch: bool = False,
            record_module_stack: bool = False, _allow_fake_constant: bool = False,
            _error_on_data_dependent_ops: bool = True):
    """A function that traces `f` on its arguments into a GraphModule of registry ops.

    `tracing_mode`: "real" runs every op, "fake" computes shapes only (inputs become fake
    tensors). `decomposition_table` maps ops to functions that run instead of them, traced
    in turn. The graph records what `f` does, in-place ops and views included.
    """
    if tracing_mode not in ("real", "fake", "symbolic"):
        raise AssertionError(f"tracing_mode must be real/fake/symbolic, got {tracing_mode}")
    if tracing_mode == "symbolic":
        raise NotImplementedError("make_fx(tracing_mode='symbolic'): symbolic shapes are not "
                                  "supported yet")

    @functools.wraps(f)
    def wrapped(*args):
        tracer = Tracer(fake=tracing_mode == "fake", decomposition_table=decomposition_table)
        class_name, names = _signature_of(f, len(args))
        names = iter(names)
        inputs = []
        for a in args:
            name = next(names)
            if isinstance(a, Tensor):
                if tracing_mode == "fake" and not isinstance(a, FakeTensor):
                    a = FakeTensor.from_tensor(a)
                tracer.placeholder(a, name)
            else:  # non-tensor arguments are baked in (still an input of the signature)
                tracer.graph.placeholder(name)
            inputs.append(a)
        with tracer:
            out = f(*inputs)
        tracer.output(out)
        return graph_module(tracer, class_name)

    return wrapped
