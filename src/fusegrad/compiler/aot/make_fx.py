"""`make_fx`: trace a function into a graph of registry ops (torch's `make_fx`)."""

from __future__ import annotations

import functools
import inspect

from ..._fake import FakeTensor
from ..._tensor import Tensor
from ...fx import Node
from ...ops.overloads import _SCALAR_OVERLOADS, _same, aten
from ...ops.overloads import EMPTY as _EMPTY
from ...ops.overloads import parameters as _defaults
from ...ops.registry import OpDef
from .tracing import Tracer

# Parameters whose Python default in some kernel is no default in PyTorch's schema (the
# `half_to_float` of `_softmax`, the `train` of `native_dropout`, the `dims` of `mean.dim`
# given None): an argument there, and any before it, is always written out.
_NO_SCHEMA_DEFAULT = frozenset(("half_to_float", "self_is_result", "train", "ord",
                                "full_matrices"))
# The same for one op only: the losses' schemas default `reduction` to Mean (`mse_loss(x, t)`),
# this one's does not.
_NO_SCHEMA_DEFAULT_OF = {"multilabel_margin_loss_forward": frozenset(("reduction",))}


# Parameters PyTorch's schemas take by keyword only wherever they take them (`cumsum(Tensor
# self, int dim, *, ScalarType? dtype=None)`); one of them in a call starts its keyword part.
_KEYWORD_ONLY = frozenset((
    "dtype", "memory_format", "rounding_mode", "correction", "decimals", "include_self",
    "stable", "approximate", "out_int32", "right", "side", "sorter", "invert",
    "assume_unique", "check_errors", "hermitian", "driver", "pivot", "adjoint", "density",
    "sparse_grad", "implicit", "attn_mask"))
# Scale factors PyTorch's schemas take by keyword where they follow the tensor operands
# (`add.Tensor(self, other, *, Scalar alpha=1)`, `addcmul(..., *, Scalar value=1)`) but
# positionally in the overloads of a number (`add.Scalar(self, Scalar other, Scalar alpha=1)`)
# and where they are an operand (`celu(self, alpha)`): by keyword with the default 1.
_KEYWORD_SCALES = frozenset(("alpha", "beta", "value"))


def _keyword_start(op: OpDef, params: list) -> int | None:
    """The position of the first parameter of `op` PyTorch's schema takes by keyword only
    (`params` from `_defaults`), or None."""
    if op.view:  # (`view.dtype(self, ScalarType dtype)`)
        return None
    for i, (name, default) in enumerate(params):
        if name in _KEYWORD_ONLY:
            return i
        if name in _KEYWORD_SCALES and i >= 2 and default.__class__ is int and \
                default == 1 and not op.name.endswith(".Scalar"):
            return i
    return None


_INT64_MAX = 9223372036854775807


def _number(a) -> bool:
    """Whether `a` is a Python number (a Scalar argument, not a graph value)."""
    return a.__class__ in (int, float, bool, complex)


def _as_torch_passes(op: OpDef, args: list, params: list) -> list:
    """`args` of `op` as PyTorch's Python layer passes them where the registry's call says the
    same in other words: a slice's omitted start and end as 0 and INT64_MAX (`x[1:]` is
    `slice.Tensor(x, 0, 1, 9223372036854775807)`), a reduction's default correction as 1
    (the variance family's `.correction` overloads, which PyTorch's Python layer hands
    `correction = 1` for a reduction over dims without one, `x.std(0)`, none for `x.std()`)."""
    if op.name == "slice.Tensor" and len(args) <= len(params):
        args = args + [default for _, default in params[len(args):]]
        if args[2] is None:
            args[2] = 0
        if args[3] is None:
            args[3] = _INT64_MAX
    elif op.name.endswith(".correction") and 2 <= len(args) and args[1] is not None and \
            (len(args) < 3 or args[2] is None):
        args = args[:2] + [1] + args[3:]
    return args


def _int_list(a):
    """A tuple of ints (a size, dims) as the list PyTorch's ops record it as."""
    if a.__class__ is tuple and all(x.__class__ is int for x in a):
        return list(a)
    return a


def _scalar_operands(graph, node) -> None:
    """`where.self(c, x, 0.0)`: the numbers made 0-d tensors of the result's dtype by
    `scalar_tensor` nodes before it (the later operand's first), as PyTorch's Python layer
    wraps a number given for a Tensor operand. Left as it is where a tensor operand has
    another dtype (PyTorch converts it first, with its own nodes)."""
    val = node.meta.get("val")
    if val is None or any(isinstance(a, Node) and getattr(a.meta.get("val"), "dtype", None)
                          is not val.dtype for a in node.args[1:]):
        return
    args = list(node.args)
    from ... import _device, strided

    for i in (2, 1):
        if _number(args[i]):
            with graph.inserting_before(node):
                args[i] = graph.call_function(
                    aten.scalar_tensor.default, (args[i],),
                    {"dtype": val.dtype, "layout": strided, "device": _device.cpu})
    node.args = tuple(args)


def torch_style_args(graph) -> None:
    """Write the op calls of a traced graph as PyTorch's dispatcher hands them over: int
    tuples as lists, the parameters its schema takes by keyword only as keyword arguments,
    and arguments equal to their defaults left out where nothing positional follows them (its
    printed `aten.sum.dim_IntList(x, [1], dtype = torch.float64)`)."""
    for node in graph.nodes:
        op = getattr(node.target, "op", None) if node.op == "call_function" else None
        if not isinstance(op, OpDef):
            continue
        if op.name == "where.self" and len(node.args) == 3:
            _scalar_operands(graph, node)
        args = [_int_list(a) for a in node.args]
        params = _defaults(op)
        args = _as_torch_passes(op, args, params)
        packet, _, overload = op.name.partition(".")
        if packet in _SCALAR_OVERLOADS and overload == "Tensor" and len(args) == 2 and \
                _number(args[1]):
            node.target = getattr(aten, packet).Scalar  # (`x > 0` is `gt.Scalar`)
        elif op.name == "floor_divide.Scalar":  # (PyTorch's `x // 2` takes the number there)
            node.target = aten.floor_divide.default
        # (the overloads named for their dims, `mean.dim`, `squeeze.dims`, have no default
        # for them in torch's schema: None is written out there)
        start = _keyword_start(op, params)
        no_default = _NO_SCHEMA_DEFAULT | _NO_SCHEMA_DEFAULT_OF.get(op.name, frozenset())
        kwargs = {}
        if start is not None and start < len(args):
            for (name, default), value in zip(params[start:], args[start:]):
                if default is _EMPTY or name in no_default or \
                        not _same(value, default):
                    kwargs[name] = value
            args = args[:start]
        while args and len(args) <= len(params):
            name, default = params[len(args) - 1]
            if name in no_default or default is _EMPTY or not _same(args[-1], default) \
                    or (name == "dims" and args[-1] is None and "dim" in overload):
                break
            args.pop()
        node.args = tuple(args)
        if kwargs:
            node.kwargs = kwargs


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
        tracer.record_factories = True
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
