"""`make_fx`: trace a function into a graph of registry ops (torch's `make_fx`)."""

from __future__ import annotations

import functools
import inspect

from ..._fake import FakeTensor
from ..._tensor import Tensor
from ...ops.registry import OpDef
from .tracing import Tracer

# Parameters whose Python default in some kernel is no default in PyTorch's schema (the
# `half_to_float` of `_softmax`, the `train` of `native_dropout`, the `dims` of `mean.dim`
# given None): an argument there, and any before it, is always written out.
_NO_SCHEMA_DEFAULT = frozenset(("half_to_float", "self_is_result", "train", "ord",
                                "full_matrices", "reduction"))


def _defaults(op: OpDef) -> list:
    """The positional parameters of `op`'s kernel as (name, default or `_EMPTY`) pairs,
    defaults kept only where the meta function has the same one (both run on a call that
    leaves the argument out)."""
    try:
        kernel = inspect.signature(op.kernel).parameters
        meta = inspect.signature(op.meta).parameters
    except (TypeError, ValueError):
        return []
    out = []
    for name, p in kernel.items():
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        m = meta.get(name)
        same = m is not None and p.default is not p.empty and _same(m.default, p.default)
        out.append((name, p.default if same else _EMPTY))
    return out


_EMPTY = inspect.Parameter.empty


def _same(a, b) -> bool:
    """Whether values `a` and `b` are one argument (a bool is no int; a tuple is a list)."""
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _int_list(a):
    """A tuple of ints (a size, dims) as the list PyTorch's ops record it as."""
    if a.__class__ is tuple and all(x.__class__ is int for x in a):
        return list(a)
    return a


def torch_style_args(graph) -> None:
    """Write the op calls of a traced graph as PyTorch's dispatcher hands them over: int
    tuples as lists, and trailing arguments equal to their defaults left out (its printed
    `aten.sum.dim_IntList(x, [1], True)`)."""
    for node in graph.nodes:
        op = getattr(node.target, "op", None) if node.op == "call_function" else None
        if not isinstance(op, OpDef):
            continue
        args = [_int_list(a) for a in node.args]
        params = _defaults(op)
        while args and len(args) <= len(params):
            name, default = params[len(args) - 1]
            if name in _NO_SCHEMA_DEFAULT or default is _EMPTY or \
                    (name == "dims" and args[-1] is None) or not _same(args[-1], default):
                break
            args.pop()
        node.args = tuple(args)


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
        torch_style_args(tracer.graph)
        return graph_module(tracer, class_name)

    return wrapped
