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
    fails on runs the graph's Python code (the reason logged once per signature)."""

    def __init__(self, gm: Any, debug: bool = False):
        self.gm = gm
        self.debug = debug
        self.lifted, self.constants = _lift_constants(gm)
        self.compiled = None
        self.failed: set = set()

    def __call__(self, *args):
        from ..compiler.codegen import CompiledGraph, compile_graph

        if self.constants:
            args = args + self.constants
        compiled = self.compiled
        key = CompiledGraph._signature(args)
        fn = compiled.variants.get(key) if compiled is not None else None
        if fn is None and key not in self.failed:
            try:
                with _output_code(self.debug):
                    if compiled is None:
                        compiled = self.compiled = compile_graph(self.lifted, list(args))
                    fn = compiled._prepare(list(args))
            except Exception as e:  # noqa: BLE001
                self.failed.add(key)
                _log_fallback(e)
        if fn is None:
            return self.gm.forward(*args[:len(args) - len(self.constants)])
        return fn(args)


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


def _lift_constants(gm: Any) -> tuple:
    """`gm` with its constants (get_attr nodes: tensors the trace kept) as placeholders after
    its inputs, and their values, which each call passes after the graph's arguments."""
    from ..fx import Graph, GraphModule

    attrs = [n for n in gm.graph.nodes if n.op == "get_attr"]
    if not attrs:
        return gm, ()
    graph = Graph()
    env: dict = {}
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            env[n] = graph.placeholder(n.name)
    values = []
    for n in attrs:
        env[n] = graph.placeholder(n.name)
        value = gm
        for part in n.target.split("."):
            value = getattr(value, part)
        values.append(value)
    for n in gm.graph.nodes:
        if n.op not in ("placeholder", "get_attr"):
            env[n] = graph.node_copy(n, lambda x: env[x])
    return GraphModule(gm, graph), tuple(values)


def _log_fallback(e: Exception) -> None:
    logs.emit("graph_breaks", "inductor: the code generator cannot compile this graph; it "
              f"runs as FX code: {type(e).__name__}: {e}")


def codegen_compiler(gm: Any, example_inputs: list) -> Any:
    """AOT autograd's compiler for one forward, backward or inference graph: fused C
    kernels (`compile_graph`), built on the first call (AOT's example values are fake, and
    the kernels' layout comes from the real inputs' strides), or the graph's FX code when
    code generation fails."""
    return _CodegenOrFx(gm)



def compile_fx(gm: Any, example_inputs: list, config_patches: dict | None = None) -> Any:
    """The `inductor` backend (torch._inductor.compile_fx's role): AOT autograd with the core
    decompositions, each resulting graph compiled to fused C kernels. `config_patches`: the
    options of `compile(mode=..., options=...)` (`fusegrad._inductor.config`)."""
    from .._decomp import core_aten_decompositions
    from ..compiler.aot.api import aot_module_simplified
    from . import config

    options = config.resolve(None, None) if config_patches is None else config_patches

    def compiler(g: Any, example: list) -> Any:
        return _CodegenOrFx(g, debug=options["debug"])

    return aot_module_simplified(gm, example_inputs, fw_compiler=compiler,
                                 bw_compiler=compiler,
                                 decompositions=core_aten_decompositions())

