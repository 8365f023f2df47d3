"""`ExportedProgram.run_decompositions`: retrace the graph through the registry's
decompositions (`_decomp.core_aten_decompositions`), functionalized: an in-place update of a
buffer becomes an out-of-place op whose result is an extra output marked BUFFER_MUTATION,
as PyTorch's decomposed programs have."""

from __future__ import annotations

from typing import Any

from .._fake import FakeTensor
from .._tensor import Tensor
from ._trace import _impure
from .graph_signature import (
    ExportGraphSignature,
    InputKind,
    OutputKind,
    OutputSpec,
    TensorArgument,
)


def run_decompositions(ep: Any, decomp_table: dict | None = None) -> Any:
    """A new ExportedProgram whose graph holds only ops without a decomposition (or, with
    `decomp_table`, the ops that table does not decompose)."""
    from .._decomp import core_aten_decompositions
    from ..compiler.aot.make_fx import torch_style_args
    from ..compiler.aot.tracing import Tracer
    from .exported_program import ExportedProgram

    table = core_aten_decompositions() if decomp_table is None else decomp_table
    tracer = Tracer(fake=True, decomposition_table=table, functionalize=True)
    sig = ep.graph_signature
    by_name = {s.arg.name: s for s in sig.input_specs}
    inputs, fakes_of = [], {}
    user = iter(ep._leaf_shapes)
    for node in ep.graph.nodes:
        if node.op != "placeholder":
            continue
        spec = by_name[node.name]
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            t = ep.state_dict.get(spec.target, ep.constants.get(spec.target))
        else:
            shape = next(user)
            t = None if shape is None else spec
        if isinstance(t, Tensor):
            f = FakeTensor.from_tensor(t)
            tracer.placeholder(f, node.name)
            fakes_of[spec.target] = f
            inputs.append(f)
        elif t is spec:  # a user tensor: its example's geometry
            example = _example_leaf(ep, node.name)
            f = FakeTensor.from_tensor(example)
            tracer.placeholder(f, node.name)
            inputs.append(f)
        else:
            tracer.graph.placeholder(node.name)
            inputs.append(spec.arg.value)
    with tracer:
        out = ep.graph_module(*inputs)
    outputs = list(out)
    specs = []
    for s in sig.input_specs:
        if s.kind == InputKind.BUFFER:
            f = fakes_of[s.target]
            if tracer.node_of(f).name != s.arg.name:
                outputs.insert(len(specs), f)
                specs.append((OutputKind.BUFFER_MUTATION, s.target))
    tracer.output(tuple(outputs))
    graph = tracer.graph
    # The tracer writes each updated input back at the end (`copy_(b_bn_running_mean, new)`);
    # here those updates are BUFFER_MUTATION outputs instead, applied by `module()`.
    for node in list(graph.nodes):
        op = getattr(node.target, "op", None)
        if (op is not None and op.name.startswith("copy_") and not node.users
                and node.args[0].op == "placeholder"):
            graph.erase_node(node)
    graph.eliminate_dead_code(_impure)
    torch_style_args(graph)  # (`permute.default(w, [1, 0])`, as the exported graph's calls)
    out_nodes = graph.output_node().args[0]
    kinds = specs + [(OutputKind.USER_OUTPUT, None)] * (len(out_nodes) - len(specs))
    out_specs = [OutputSpec(k, TensorArgument(getattr(n, "name", str(n))), t)
                 for (k, t), n in zip(kinds, out_nodes)]
    new = ExportedProgram(
        graph=graph, signature=ExportGraphSignature(list(sig.input_specs), out_specs),
        state_dict=ep.state_dict, constants={**ep.constants, **tracer.constants},
        in_spec=ep._in_spec, out_spec=ep._out_spec, example_inputs=ep.example_inputs,
        # (static, as every exported program: guards refuse other sizes)
        leaves=[], arg_order=ep._arg_order,
        forward_arg_names=ep._forward_arg_names, is_training=ep._is_training)
    new._leaf_shapes = list(ep._leaf_shapes)
    return new


def _example_leaf(ep: Any, name: str) -> Tensor:
    from ..utils import _pytree as pytree

    leaves = pytree.tree_leaves(ep.example_inputs)
    names = [s.arg.name for s in ep.graph_signature.input_specs
             if s.kind == InputKind.USER_INPUT]
    return leaves[names.index(name)]
