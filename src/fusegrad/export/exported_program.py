"""`ExportedProgram` (`torch.export.exported_program`): an exported graph with its state."""

from __future__ import annotations

from typing import Any, NamedTuple

from .._tensor import Tensor
from ..utils import _pytree as pytree
from .graph_signature import ConstantArgument, ExportGraphSignature, InputKind, OutputKind


class CallSpec(NamedTuple):
    """How the flat graph inputs and outputs nest (`ExportedProgram.call_spec`)."""

    in_spec: Any
    out_spec: Any


class ExportedProgram:
    """A traced graph of registry ops, its signature (which placeholder is which parameter,
    buffer or user input), its state and the structure of its inputs and outputs."""

    def __init__(self, *, graph: Any, signature: ExportGraphSignature, state_dict: dict,
                 constants: dict, in_spec: Any, out_spec: Any, example_inputs: Any,
                 leaves: list, arg_order: list, forward_arg_names: list,
                 is_training: bool = False) -> None:
        from ..fx import GraphModule

        self._graph_module = GraphModule(dict(constants), graph)
        self._graph_signature = signature
        self._state_dict = state_dict
        self._constants = constants
        self._in_spec = in_spec
        self._out_spec = out_spec
        self._example_inputs = example_inputs
        # The example shape of each tensor leaf, None for a constant leaf.
        self._leaf_shapes = [tuple(t.shape) if isinstance(t, Tensor) else None
                             for t in leaves]
        self._arg_order = list(arg_order)
        self._forward_arg_names = list(forward_arg_names)
        self._is_training = is_training

    # ------------------------------------------------------------------ accessors

    @property
    def graph_module(self) -> Any:
        """The graph as a GraphModule taking every input (state first) as a placeholder."""
        return self._graph_module

    @property
    def graph(self) -> Any:
        """The graph."""
        return self._graph_module.graph

    @property
    def graph_signature(self) -> ExportGraphSignature:
        """Which placeholder and output is what."""
        return self._graph_signature

    @property
    def state_dict(self) -> dict:
        """The parameters and persistent buffers, by state key."""
        return self._state_dict

    @property
    def constants(self) -> dict:
        """Tensor constants and non-persistent buffers."""
        return self._constants

    @property
    def example_inputs(self) -> Any:
        """The (args, kwargs) the program was exported with."""
        return self._example_inputs

    @property
    def range_constraints(self) -> dict:
        """The ranges of the dynamic dims: none (exported shapes are static)."""
        return {}

    @property
    def call_spec(self) -> Any:
        """The pytree specs of the inputs (args, kwargs) and of the outputs."""
        return CallSpec(self._in_spec, self._out_spec)

    def named_parameters(self):
        """(key, parameter) of each parameter input, in graph order."""
        for key in self._graph_signature.parameters:
            yield key, self._state_dict[key]

    def parameters(self):
        """Each parameter input, in graph order."""
        for _, p in self.named_parameters():
            yield p

    def named_buffers(self):
        """(key, buffer) of each buffer input, in graph order."""
        for key in self._graph_signature.buffers:
            yield key, (self._state_dict[key] if key in self._state_dict
                        else self._constants[key])

    def buffers(self):
        """Each buffer input, in graph order."""
        for _, b in self.named_buffers():
            yield b

    # ------------------------------------------------------------------ running

    def module(self) -> Any:
        """A GraphModule running the program: parameters and buffers are its attributes
        (a buffer the program updates in place is updated on the module), arguments are
        taken as the original module took them and checked against the exported shapes."""
        from ..fx import Graph

        new = Graph()
        env: dict = {}
        by_name = {s.arg.name: s for s in self._graph_signature.input_specs}
        root = dict(self._constants)
        for node in self.graph.nodes:
            spec = by_name.get(node.name) if node.op == "placeholder" else None
            if spec is not None and spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
                env[node] = new.get_attr(spec.target)
                root[spec.target] = self._state_dict.get(spec.target,
                                                         self._constants.get(spec.target))
            else:
                env[node] = new.node_copy(node, lambda n: env[n])
        mod = _ExportedModule(root, new)
        object.__setattr__(mod, "_ep", self)
        mod.train(self._is_training)
        return mod

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("Unable to call ExportedProgram directly. You should use "
                           "`exported_program.module()` instead.")

    def _flat_user_inputs(self, args: tuple, kwargs: dict) -> list:
        """The leaves of a call's arguments, checked against the exported shapes."""
        flat, spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
        expected = list(self._in_spec.child(1).context or ())
        if sorted(kwargs) != sorted(expected):
            raise ValueError(f"Ran into a kwarg keyword mismatch: Got the following keywords "
                             f"{list(kwargs)} but expected {expected}")
        # Keywords in the exported order (a dict's leaves follow its keys' order).
        flat = pytree.tree_leaves((tuple(args), {k: kwargs[k] for k in expected}))
        names = [s.arg.name for s in self._graph_signature.input_specs
                 if s.kind == InputKind.USER_INPUT]
        if len(flat) != len(self._leaf_shapes):
            raise TypeError(f"Trying to flatten user inputs with exported input tree spec: "
                            f"\n{self._in_spec}\nbut actually got inputs with tree spec of: "
                            f"\n{spec}.")
        for name, value, shape in zip(names, flat, self._leaf_shapes):
            if shape is None or not isinstance(value, Tensor):
                continue
            got = tuple(value.shape)
            for d, expected in enumerate(shape):
                if d >= len(got):
                    break
                if got[d] != expected:
                    raise AssertionError(f"Guard failed: {name}.size()[{d}] == {expected}")
        return flat

    # ------------------------------------------------------------------ transforms

    def run_decompositions(self, decomp_table: dict | None = None) -> ExportedProgram:
        """The program with each op that has a decomposition traced through it."""
        from ._decompose import run_decompositions

        return run_decompositions(self, decomp_table)

    def __str__(self) -> str:
        # Every line is indented, blank ones included, as torch.export prints.
        code = self._graph_module.print_readable(print_output=False).replace("\n", "\n    ")
        # (the signature's text starts with a newline, which this layout leaves out)
        sig = str(self._graph_signature)[1:].replace("\n", "\n    ")
        return ("ExportedProgram:\n    " + code + "\n" + "Graph signature: \n    " + sig
                + "\nRange constraints: {}\n")

    __repr__ = __str__


def _constant_args(signature: ExportGraphSignature) -> list:
    return [s.arg.value for s in signature.input_specs
            if isinstance(s.arg, ConstantArgument)]


def _make_exported_module_class() -> type:
    from ..autograd.grad_mode import no_grad
    from ..fx import GraphModule

    class _ExportedModule(GraphModule):
        """`ExportedProgram.module()`: takes the original arguments, runs the graph."""

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            ep = self._ep
            flat = ep._flat_user_inputs(args, kwargs)
            out = list(super().__call__(*flat))
            # Buffer updates come first (a decomposed program's BUFFER_MUTATION outputs):
            # written into the module's buffers, as PyTorch's unlifted module does.
            for spec in ep.graph_signature.output_specs:
                if spec.kind == OutputKind.BUFFER_MUTATION:
                    owner = self
                    for part in spec.target.split("."):
                        owner = getattr(owner, part)
                    with no_grad():
                        owner.copy_(out.pop(0))
            return pytree.tree_unflatten(out, ep._out_spec)

    return _ExportedModule


class _Lazy:
    cls: type | None = None


def _ExportedModule(root: dict, graph: Any) -> Any:  # noqa: N802 (stands for the class)
    if _Lazy.cls is None:
        _Lazy.cls = _make_exported_module_class()
    return _Lazy.cls(root, graph)


ExportedProgram.__module__ = "fusegrad.export.exported_program"
CallSpec.__module__ = "fusegrad.export.exported_program"

__all__ = ["ExportedProgram"]
