"""The `inductor` backend: a captured graph through AOT autograd into generated code.

`compile_fx(gm, example_inputs)` traces the captured graph with AOT autograd and the core
decompositions (the joint graph, split into forward and backward graphs by the partitioner,
or an inference graph when nothing needs a gradient), and gives each graph to the code
generator (`compiler/codegen`) as AOT's forward, backward and inference compiler. Ops the
code generator has no lowering for run as extern calls of their NumPy kernels inside the
compiled graph; a graph the code generator cannot compile at all (or a new input signature
it fails on) runs through its FX code instead, the reason logged under `graph_breaks`: a
slower graph, never a wrong answer.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ..compiler import logs


class _CodegenOrFx:
    """A compiled graph with its FX code as the fallback: a signature the code generator
    fails on runs the graph's Python code (the reason logged once per signature).

    The code generator sees the graph with its constants as inputs and without the
    `copy_` nodes that write the new value of an input (functionalization's write-backs,
    batch norm's running statistics): those values become extra outputs, copied into the
    inputs after the kernels ran. `options`: the backend's resolved options (mode and
    `options=`), handed to the code generator (`CompiledGraph`)."""

    def __init__(self, gm: Any, options: dict):
        self.gm = gm
        self.options = options
        self.debug = options.get("debug", False)
        self.lifted, self.constants, self.writes = _for_codegen(gm)
        self.compiled = None
        self.failed: set = set()

    def __call__(self, *args):
        from ..compiler.codegen import CompiledGraph, compile_graph

        full = args + self.constants if self.constants else args
        compiled = self.compiled
        key = CompiledGraph._signature(full)
        fn = compiled.variants.get(key) if compiled is not None else None
        if fn is None and key not in self.failed:
            try:
                with _output_code(self.debug):
                    if compiled is None:
                        compiled = compile_graph(self.lifted, list(full), self.options)
                        self.compiled = compiled
                    fn = compiled._prepare(list(full))
            except Exception as e:  # noqa: BLE001
                self.failed.add(key)
                _log_fallback(e)
        if fn is None:
            return self.gm.forward(*args)
        out = fn(full)
        if self.writes:
            out = _write_back(args, out, self.writes)
        return out


def _log_fallback(e: Exception) -> None:
    logs.emit("graph_breaks", "inductor: the code generator cannot compile this graph; it "
              f"runs as FX code: {type(e).__name__}: {e}")


def _same_elements(a, b) -> bool:
    """Whether NumPy arrays `a` and `b` are the same elements of the same memory (the
    strides of dims of one element mean nothing)."""
    return a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and \
        a.shape == b.shape and a.dtype == b.dtype and \
        all(x == y for n, x, y in zip(a.shape, a.strides, b.strides) if n > 1)


def _write_back(args: tuple, out: tuple, writes: list) -> tuple:
    """Copy the trailing outputs into the inputs `writes` names (as the graph's `copy_`
    nodes would have, version counters included); the graph's own outputs."""
    from .. import _dispatch
    from ..autograd.grad_mode import no_grad
    from ..ops import REGISTRY

    n = len(out) - len(writes)
    with no_grad():
        for i, value in zip(writes, out[n:]):
            dst, src = args[i]._data, getattr(value, "_data", None)
            if not dst.size or (src is not None and _same_elements(dst, src)):
                # Nothing to write: no elements (copy_ would refuse an empty expanded tensor,
                # whose zero strides look like shared elements), or the new value is the
                # input's memory itself (`x.copy_(x)`). The version changes as eager's does.
                args[i]._vc[0] += 1
                continue
            _dispatch.call(REGISTRY["copy_"], args[i], value)
    return out[:n]


@contextlib.contextmanager
def _output_code(on: bool):
    """The `output_code` log on while a graph compiles (the `debug` option)."""
    if not on or "output_code" in logs.enabled:
        yield
        return
    logs.set_logs(output_code=True)
    try:
        yield
    finally:
        logs.set_logs(output_code=False)


def _for_codegen(gm: Any) -> tuple:
    """(graph for the code generator, constant values, written input indices): `gm` with
    its constants (get_attr nodes: tensors the trace kept) as placeholders after its inputs
    (each call passes their values after the graph's arguments), and each `copy_` into an
    input replaced by an extra output holding the value to copy."""
    from ..compiler.codegen import resolve_op
    from ..fx import Graph, GraphModule

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    attrs = [n for n in gm.graph.nodes if n.op == "get_attr"]
    copies = [n for n in gm.graph.nodes if n.op == "call_function" and n.args
              and getattr(resolve_op(n.target), "name", None) == "copy_"
              and n.args[0] in placeholders]
    if not attrs and not copies:
        return gm, (), []
    graph = Graph()
    env: dict = {}
    for n in placeholders:
        env[n] = graph.placeholder(n.name)
    values = []
    for n in attrs:
        env[n] = graph.placeholder(n.name)
        value = gm
        for part in n.target.split("."):
            value = getattr(value, part)
        values.append(value)
    writes = []
    for n in gm.graph.nodes:
        if n.op in ("placeholder", "get_attr"):
            continue
        if n in copies:
            env[n] = env[n.args[1]]  # later readers of the written input see the new value
            writes.append((placeholders.index(n.args[0]), env[n.args[1]]))
        elif n.op == "output":
            outs = n.args[0]
            outs = tuple(outs) if isinstance(outs, (list, tuple)) else (outs,)
            mapped = tuple(env[o] if o is not None and hasattr(o, "op") else o for o in outs)
            graph.output(mapped + tuple(v for _, v in writes))
        else:
            env[n] = graph.node_copy(n, lambda x: env[x])
    return GraphModule(gm, graph), tuple(values), [i for i, _ in writes]


def _has_half(args) -> bool:
    """Whether `args` (nested lists included) hold a float16 or bfloat16 tensor."""
    from .. import _dtype
    from .._tensor import Tensor

    for a in args:
        if isinstance(a, Tensor) and a.dtype in (_dtype.float16, _dtype.bfloat16):
            return True
        if isinstance(a, (list, tuple)) and _has_half(a):
            return True
    return False


def _tensors(args) -> list:
    """The tensors in `args` (nested lists included)."""
    from .._tensor import Tensor

    out = []
    for a in args:
        if isinstance(a, Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(_tensors(a))
    return out


def _narrower_operands(op: Any, args) -> bool:
    """Whether a decomposition of `op` could compute some step in a narrower dtype than the
    op's result, where eager's kernel converts its operands first: decompositions are made
    of ops that keep their operands' dtype, so `addcmul(float64, float32, float32)` as
    `a + t1 * t2 * value` rounds `t1 * t2` to float32, logsumexp of uint8 wraps in
    `a - max(a)`, `1.5 - uint8` as `-a + 1.5` negates a uint8. True when a floating
    operand is not of the (floating) result's dtype, when only integer tensors make a
    floating result, or when an integer operand is no wider than a different integer
    result. (Index and mask operands, int64 and bool, stay out of it.)"""
    from .. import _dtype

    tensors = [t for t in _tensors(args) if not t.dtype.is_complex]
    if not tensors:
        return False
    try:
        spec = op.meta(*args)
    except Exception:  # noqa: BLE001 - no meta for these arguments: the op's own error
        return False
    result = getattr(spec[0] if isinstance(spec, (list, tuple)) and spec else spec,
                     "dtype", None)
    if result is None or result.is_complex:
        return False
    if result.is_floating_point:
        floats = [t for t in tensors if t.dtype.is_floating_point]
        return not floats or any(t.dtype is not result for t in floats)
    if result is _dtype.bool_:
        return False
    return any(t.dtype is not result and not t.dtype.is_floating_point and
               t.dtype.itemsize <= result.itemsize and t.dtype is not _dtype.bool_
               for t in tensors)


def _views_an_input(out, args) -> bool:
    """Whether a result in `out` (a tensor or a sequence of them) is a view of a tensor in
    `args` (of it or of its base)."""
    from .._tensor import Tensor

    bases = set()
    for a in _tensors(args):
        bases.add(id(a))
        if a._base is not None:
            bases.add(id(a._base))
    outs = out if isinstance(out, (list, tuple)) else (out,)
    return any(isinstance(o, Tensor) and o._base is not None and id(o._base) in bases
               for o in outs)


# The ops whose decomposition is being declined for the call in progress (see
# `_whole_in_half`): the tracer then records them whole.
_RECORDING_WHOLE: set = set()


def _whole_in_half(fn, op: Any = None):
    """Decomposition `fn` of `op`, declined (`keep_whole`) for half-dtype arguments: a
    decomposition rounds each intermediate to the half type (a variance's squares overflow
    float16) where eager's kernel computes in float32 or float64 and rounds once, and the
    code generator runs half-dtype ops as their NumPy kernels anyway, so nothing fuses.
    Declined too where its steps could compute in a narrower dtype than eager's kernel (see
    `_narrower_operands`), and where it makes a view of an input for an op that is no view
    for autograd (`_unsafe_view` as `view`, the last step of a 3-D `matmul`): the result
    would be a view of an intermediate made under the tracer's no_grad, which AOT autograd
    cannot return as an output (the whole graph then ran eagerly). That op is recorded
    whole instead (the decomposition's nodes are dead code), as PyTorch's inductor lowers
    `_unsafe_view` itself."""

    def decomposition(*args, **kwargs):
        out = fn(*args, **kwargs)
        if op is None or op.view or kwargs or not _views_an_input(out, args):
            return out
        from .. import _dispatch

        _RECORDING_WHOLE.add(op)
        try:
            return _dispatch.call(op, *args)
        finally:
            _RECORDING_WHOLE.discard(op)

    def keep_whole(args) -> bool:
        return op in _RECORDING_WHOLE or _has_half(args) or \
            (op is not None and _narrower_operands(op, args))

    decomposition.keep_whole = keep_whole
    return decomposition


def compile_fx(gm: Any, example_inputs: list, config_patches: dict | None = None) -> Any:
    """The `inductor` backend (torch._inductor.compile_fx's role): AOT autograd with the core
    decompositions, each resulting graph compiled to fused C kernels. `config_patches`: the
    options of `compile(mode=..., options=...)` (`fusegrad._inductor.config`)."""
    from .._decomp import core_aten_decompositions
    from ..compiler.aot.api import aot_module_simplified
    from . import config

    # An op whose entry says its NumPy kernel is its lowering ("extern"), or whose lowering
    # takes the op whole (`whole`: CPU flash attention, a C kernel of the code generator),
    # stays whole, as PyTorch's inductor keeps its fallbacks: the kernel gives eager's
    # values and layout, a decomposition only the values.
    decompositions = {op: _whole_in_half(fn, op) for op, fn in core_aten_decompositions().items()
                      if op.lowering != "extern" and not getattr(op.lowering, "whole", False)}

    options = config.resolve(None, None) if config_patches is None else config_patches

    def compiler(g: Any, example: list) -> Any:
        return _CodegenOrFx(g, options)

    return aot_module_simplified(gm, example_inputs, fw_compiler=compiler,
                                 bw_compiler=compiler, partition_fn=_cse_then_partition,
                                 decompositions=decompositions)


def _cse_then_partition(joint_module: Any, joint_inputs: Any = None, *,
                        num_fwd_outputs: int, **kwargs) -> tuple:
    """The partition of the joint graph with its common subexpressions merged first
    (`aot.cse`), as PyTorch's AOT autograd merges them: a backward that recomputes a
    forward value (GELU's `erf`, layer norm's moments) reads the saved value instead.
    Then a minimum cut that never recomputes what a backward matmul reads, as PyTorch's
    min-cut partitioner: of a GELU it saves the input and the output (the next matmul's
    operand) and recomputes `erf(x / sqrt 2) + 1` from the input."""
    from ..compiler.aot.cse import cse_joint
    from ..compiler.aot.mincut import min_cut_rematerialization_partition

    cse_joint(joint_module)
    return min_cut_rematerialization_partition(
        joint_module, joint_inputs, num_fwd_outputs=num_fwd_outputs, keep_materialized=True,
        **kwargs)

