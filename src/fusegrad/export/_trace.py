"""`export`: trace a module's forward into a graph of registry ops, non-strict.

The module runs once under the AOT tracer (`compiler.aot.tracing.Tracer`, fake tensors: the
module's own parameters and buffers are never written) with its parameters, buffers and the
user's tensors as the graph's placeholders, named as PyTorch names them (`p_fc1_weight`,
`b_bn_running_mean`, the argument names). Nested arguments and results are flattened with
pytree; the specs rebuild them around the graph.

Shapes are static: the graph records sizes as plain integers (`view(x, (4, 3))`), and
`ExportedProgram.module()` refuses other sizes with PyTorch's guard errors. `dynamic_shapes`
is checked against the arguments as PyTorch checks it; `Dim.AUTO` dims are exported static,
a `Dim` or `Dim.DYNAMIC` is refused (`_refuse_dynamic`).
"""

from __future__ import annotations

import inspect
from typing import Any

from .._fake import FakeTensor
from .._tensor import Tensor
from ..utils import _pytree as pytree
from .dynamic_shapes import _DimHint
from .graph_signature import (
    ConstantArgument,
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    TensorArgument,
)


def _user_error(msg: str) -> Exception:
    from ..compiler.exc import UserError

    return UserError(None, msg)


def _bind(mod: Any, args: tuple, kwargs: dict) -> tuple[list, list]:
    """The (name, value) of each argument the call passes, in signature order."""
    sig = inspect.signature(mod.forward)
    bound = sig.bind(*args, **kwargs)
    pairs = []
    for name, value in bound.arguments.items():
        kind = sig.parameters[name].kind
        if kind == inspect.Parameter.VAR_POSITIONAL:
            pairs += [(f"{name}_{i}", v) for i, v in enumerate(value)]
        elif kind == inspect.Parameter.VAR_KEYWORD:
            pairs += list(value.items())
        else:
            pairs.append((name, value))
    return pairs, list(sig.parameters)


def _leaf_names(pairs: list) -> tuple[list, list]:
    """The leaves of the arguments and a placeholder name for each."""
    leaves, names = [], []
    for name, value in pairs:
        flat = pytree.tree_leaves_with_path(value)
        for path, leaf in flat:
            suffix = "".join("_" + "".join(c if c.isalnum() else "" for c in str(k))
                             for k in path)
            names.append(name + suffix)
            leaves.append(leaf)
    return leaves, names


def _dynamic_dims(dynamic_shapes: Any, pairs: list, arg_names: list) -> dict:
    """(leaf index, dim) -> Dim (or a DimHint) from `dynamic_shapes`."""
    if dynamic_shapes is None:
        return {}
    names = [n for n, _ in pairs]
    if isinstance(dynamic_shapes, dict):
        extra = [k for k in dynamic_shapes if k not in names]
        if extra:
            raise _user_error(
                "When `dynamic_shapes` is specified as a dict, its top-level keys must be the "
                f"arg names {names} of `inputs`, but here they are {list(dynamic_shapes)}. "
                "Alternatively, you could also ignore arg names entirely and specify "
                "`dynamic_shapes` as a list/tuple matching `inputs`.")
        per_arg = [dynamic_shapes.get(n) for n in names]
    else:
        per_arg = list(dynamic_shapes) + [None] * (len(names) - len(dynamic_shapes))
    out: dict = {}
    index = 0
    dict_form = isinstance(dynamic_shapes, dict)
    for (name, value), spec in zip(pairs, per_arg):
        leaves = pytree.tree_leaves(value)
        if isinstance(value, Tensor):
            specs = [spec]
        elif isinstance(value, (list, tuple)):
            if not isinstance(spec, (list, tuple)) or len(spec) != len(value):
                where = f"['{name}']" if dict_form else f"[{names.index(name)}]"
                raise _user_error(
                    f"Detected mismatch between the structure of `inputs` and "
                    f"`dynamic_shapes`: `inputs{where}` is a {type(value)}, but "
                    f"`dynamic_shapes{where}` is "
                    + ("not" if spec is None else f"a {type(spec)}"))
            specs = list(spec) if len(spec) == len(leaves) else [None] * len(leaves)
        else:
            specs = [None] * len(leaves)
        for leaf, s in zip(leaves, specs):
            if s is not None and isinstance(leaf, Tensor):
                items = s.items() if isinstance(s, dict) else enumerate(s)
                for d, dim in items:
                    if dim is not None and dim is not _DimHint.STATIC:
                        out[(index, d if d >= 0 else d + leaf.dim())] = dim
            index += 1
    return out


class _Trace:
    """One trace of the module: its graph, signature, flattened leaves and output spec."""

    def __init__(self, mod: Any, pairs: list, leaves: list, names: list) -> None:
        from ..compiler.aot.make_fx import torch_style_args
        from ..compiler.aot.tracing import Tracer
        from ..func import functional_call
        from ._whole import kept_whole

        tracer = Tracer(fake=True)
        tracer.record_factories = True  # (`ones.default(...)`, as torch.export's graphs)
        params = dict(mod.named_parameters())
        buffers = dict(mod.named_buffers())
        non_persistent = set()
        for prefix, sub in mod.named_modules():
            for b in getattr(sub, "_non_persistent_buffers_set", ()):
                non_persistent.add(f"{prefix}.{b}" if prefix else b)
        specs, state = [], {}
        for key, t in params.items():
            f = FakeTensor.from_tensor(t)
            name = "p_" + key.replace(".", "_")
            tracer.placeholder(f, name)
            state[key] = f
            specs.append(InputSpec(InputKind.PARAMETER, TensorArgument(name), key))
        for key, t in buffers.items():
            f = FakeTensor.from_tensor(t)
            name = "b_" + key.replace(".", "_")
            tracer.placeholder(f, name)
            state[key] = f
            specs.append(InputSpec(InputKind.BUFFER, TensorArgument(name), key,
                                   key not in non_persistent))
        fakes = []
        for leaf, name in zip(leaves, names):
            if isinstance(leaf, Tensor):
                f = FakeTensor.from_tensor(leaf)
                tracer.placeholder(f, name)
                # PyTorch names the input after its argument even where that is a builtin's
                # name (`input`), which the graph's namespace would rename.
                tracer.node_of(f).name = name
                specs.append(InputSpec(InputKind.USER_INPUT, TensorArgument(name), None))
                fakes.append(f)
            else:
                tracer.graph.placeholder(name).name = name
                specs.append(InputSpec(InputKind.USER_INPUT, ConstantArgument(name, leaf),
                                       None))
                fakes.append(leaf)
        # Rebuild the call's arguments around the fakes.
        it = iter(fakes)
        call_kwargs = {}
        for name, value in pairs:
            flat, spec = pytree.tree_flatten(value)
            rebuilt = pytree.tree_unflatten([next(it) for _ in flat], spec)
            call_kwargs[name] = rebuilt
        self.params, self.buffers = params, buffers
        with tracer, _module_stack(mod, tracer), kept_whole(tracer):
            out = _call(mod, functional_call, state, call_kwargs)
        flat_out, self.out_spec = pytree.tree_flatten(out)
        tracer.output(tuple(flat_out))
        # (the op calls as PyTorch's exported graphs write them: `sum.dim_IntList(x, [-1],
        # dtype = torch.float64)`)
        torch_style_args(tracer.graph)
        self.tracer = tracer
        self.graph = tracer.graph
        names_out = [a.name if hasattr(a, "name") else str(a)
                     for a in self.graph.output_node().args[0]]
        outs = [OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(n), None) for n in names_out]
        self.signature = ExportGraphSignature(specs, outs)
        self.constants = dict(tracer.constants)


class _module_stack:  # noqa: N801 (a context manager, named as what it records)
    """Notes on each recorded node the submodule calls it was made in, as PyTorch's
    `nn_module_stack` ({key: (path, class name)}, the root first; a module's second call is
    keyed `path@1`), through global module hooks while the module runs."""

    def __init__(self, mod: Any, tracer: Any) -> None:
        self.names = {id(m): n for n, m in mod.named_modules(remove_duplicate=False)}
        self.root = mod
        self.stack: list = []
        self.calls: dict = {}
        self.tracer = tracer

    def _meta(self) -> dict:
        cls = type(self.root)
        stack = {"L__self__": ("", f"{cls.__module__}.{cls.__qualname__}")}
        stack.update(e for e in self.stack if e is not None)
        return {"nn_module_stack": stack}

    def _enter(self, module: Any, args: Any) -> None:
        path = self.names.get(id(module))
        if not path:  # the root, or a module that is not one of the root's
            self.stack.append(None)
            return
        k = self.calls.get(path, 0)
        self.calls[path] = k + 1
        cls = type(module)
        key = "L__self__" + path + (f"@{k}" if k else "")
        self.stack.append((key, (path, f"{cls.__module__}.{cls.__qualname__}")))

    def _leave(self, module: Any, args: Any, out: Any) -> None:
        if self.stack:
            self.stack.pop()

    def __enter__(self) -> _module_stack:
        from ..nn.modules._global_hooks import (
            register_module_forward_hook,
            register_module_forward_pre_hook,
        )

        enter, leave = self._enter, self._leave
        self.handles = [register_module_forward_pre_hook(enter),
                        register_module_forward_hook(leave)]
        self.tracer.node_meta = self._meta
        return self

    def __exit__(self, *exc) -> None:
        for handle in self.handles:
            handle.remove()
        self.tracer.node_meta = None


def _call(mod: Any, functional_call: Any, state: dict, kwargs: dict) -> Any:
    """`mod(**kwargs)` with its state replaced by `state` (positional-only arguments
    are passed by position)."""
    sig = inspect.signature(mod.forward)
    args, kw = [], {}
    for name, p in sig.parameters.items():
        if p.kind == p.VAR_POSITIONAL:
            i = 0
            while f"{name}_{i}" in kwargs:
                args.append(kwargs.pop(f"{name}_{i}"))
                i += 1
        elif name in kwargs and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) \
                and not kw:
            args.append(kwargs.pop(name))
        elif name in kwargs:
            kw[name] = kwargs.pop(name)
    kw.update(kwargs)
    return functional_call(mod, state, tuple(args), kw)


def _traced(mod: Any, pairs: list, leaves: list, names: list) -> _Trace:
    from .._fake import DataDependentOutputError
    from ..fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    try:
        return _Trace(mod, pairs, leaves, names)
    except DataDependentOutputError as e:
        raise GuardOnDataDependentSymNode(
            "Could not guard on data-dependent expression Eq(u0, 1) (unhinted: Eq(u0, 1)).  "
            "(Size-like symbols: none)\n\n" + str(e)) from e


def _refuse_dynamic(dynamic: dict) -> None:
    """Dims marked `Dim.AUTO` are exported static (AUTO allows it); a `Dim` or
    `Dim.DYNAMIC` is refused. The graph holds sizes as plain integers, and a size the
    program derived from a dynamic dim (`x[: x.shape[0] // 2]`) cannot be told from a
    constant by tracing at a few sizes: that needs symbolic sizes in the tracer, and a
    guess would compute wrong results at other sizes."""
    for dim in dynamic.values():
        if dim is not _DimHint.AUTO:
            name = getattr(dim, "__name__", str(dim))
            raise NotImplementedError(
                f"fusegrad.export does not export dynamic dims yet ({name}): export with "
                "static shapes (Dim.STATIC, Dim.AUTO or no dynamic_shapes) and export again "
                "for other sizes")


def _impure(node: Any) -> bool:
    """Whether dead-code elimination must keep `node`: in-place ops (a buffer's `add_`)
    change state although nothing reads their result."""
    return bool(getattr(getattr(node.target, "op", None), "inplace", False)) or node.is_impure()


def export(mod: Any, args: tuple, kwargs: dict | None = None, *, dynamic_shapes: Any = None,
           strict: bool = False, preserve_module_call_signature: tuple = ()) -> Any:
    """Trace `mod(*args, **kwargs)` into an `ExportedProgram` (see the module docstring)."""
    from .exported_program import ExportedProgram

    if not isinstance(args, tuple):
        raise ValueError(f"Expecting `args` to be a tuple of example positional inputs, "
                         f"got {type(args)}")
    kwargs = dict(kwargs or {})
    pairs, arg_names = _bind(mod, args, kwargs)
    leaves, names = _leaf_names(pairs)
    _refuse_dynamic(_dynamic_dims(dynamic_shapes, pairs, arg_names))  # (before tracing)
    trace = _traced(mod, pairs, leaves, names)
    trace.graph.eliminate_dead_code(_impure)
    in_spec = pytree.tree_flatten((tuple(args), kwargs))[1]
    # Non-persistent buffers are the program's constants, as in PyTorch.
    transient = {s.target for s in trace.signature.input_specs if s.persistent is False}
    return ExportedProgram(
        graph=trace.graph, signature=trace.signature,
        state_dict={**trace.params,
                    **{k: v for k, v in trace.buffers.items() if k not in transient}},
        constants={**trace.constants,
                   **{k: v for k, v in trace.buffers.items() if k in transient}},
        in_spec=in_spec, out_spec=trace.out_spec, example_inputs=(tuple(args), kwargs),
        leaves=leaves, arg_order=[n for n, _ in pairs],
        forward_arg_names=arg_names, is_training=mod.training)
