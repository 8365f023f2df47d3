"""Code generation: a registry-level FX graph becomes fused C kernels (TorchInductor's role).

`compile_graph(gm, example_inputs)` returns a callable running the graph: lowered to loop IR
(`lower.py`, the registry's `lowering` entries), scheduled into fused kernels (`schedule.py`),
rendered to C (`c.py`, with `mathlib.py`'s vectorisable math), built and cached (`build.py`),
and called by a generated Python wrapper (`wrapper.py`). Without a C compiler, or when the
compiler rejects a kernel, the graph runs op by op through the registry's NumPy kernels
after one warning.
"""

from __future__ import annotations

import warnings
from typing import Any

from .. import logs
from . import build, c, mathlib
from .ir import Extern, describe
from .lower import GraphLowering, resolve_op
from .schedule import group, schedule

__all__ = ["compile_graph", "CompiledGraph", "resolve_op"]

_warned_no_compiler = [False]


class CompiledGraph:
    """A compiled graph: call it with the graph's inputs (fusegrad Tensors); returns a tuple
    of outputs. One variant per input signature (shapes, strides, dtypes), each cheap when the
    kernels' source was built before (the disk cache)."""

    def __init__(self, gm: Any, example_inputs: list):
        self.gm = gm
        self.variants: dict = {}
        self.source = ""  # the last variant's wrapper and kernels, for printing
        self._prepare(list(example_inputs))

    @staticmethod
    def _signature(args) -> tuple:
        sig = []
        for a in args:
            d = getattr(a, "_data", None)
            sig.append((d.shape, d.strides, d.dtype) if d is not None else (type(a), a))
        return tuple(sig)

    def _prepare(self, args: list):
        key = self._signature(args)
        fn = self.variants.get(key)
        if fn is None:
            fn = self.variants[key] = self._compile(args)
        return fn

    def __call__(self, *args):
        key = self._signature(args)
        fn = self.variants.get(key) or self._prepare(list(args))
        return fn(args)

    def _compile(self, args: list):
        if build.compiler() is None:
            if not _warned_no_compiler[0]:
                _warned_no_compiler[0] = True
                warnings.warn("fusegrad codegen: no C compiler found (cc or $CC); compiled "
                              "graphs run through the registry's NumPy kernels", stacklevel=3)
            return _eager_runner(self.gm)
        g = GraphLowering(self.gm, args).run()
        computations = schedule(g)
        slots = c.Slots()
        kernels: dict = {}
        sources = []
        for i, item in enumerate(group(g, computations)):
            if isinstance(item, Extern):
                continue
            if len(item) == 1:
                name, src = c.render_kernel(item[0], g.buffers[item[0]], slots, i)
            else:
                name, src = c.render_group([(m, g.buffers[m]) for m in item], slots, i)
            kernels[item[0]] = (name, item)
            for m in item[1:]:
                kernels[m] = None  # computed by the group's kernel
            sources.append(src)
        full = mathlib.source() + "\n\n" + "\n\n".join(sources) + "\n"
        try:
            lib = build.build(full) if sources else None
        except build.CompileError as e:
            warnings.warn(f"fusegrad codegen: the C compiler failed; the graph runs through "
                          f"the registry's NumPy kernels.\n{e}\nKernel source:\n"
                          f"{chr(10).join(sources)}", stacklevel=3)
            return _eager_runner(self.gm)
        from . import wrapper

        call, wsrc = wrapper.generate(g, computations, kernels, lib, slots)
        ir_text = "\n".join("# " + describe(comp, g.buffers[comp].name if comp in g.buffers
                                            else "extern") for comp in computations)
        self.source = f"{ir_text}\n{wsrc}\n" + "\n\n".join(sources)
        logs.emit("output_code", "\n" + self.source)
        return call


def _eager_runner(gm: Any):
    """Run the graph node by node with the registry's kernels (eager dispatch, no grad)."""
    import operator

    from ... import _dispatch
    from ...autograd.grad_mode import no_grad
    from ...fx.node import Node

    nodes = list(gm.graph.nodes)

    def run(args):
        env: dict = {}
        it = iter(args)

        def val(a):
            if isinstance(a, Node):
                return env[a]
            if isinstance(a, (list, tuple)):
                return type(a)(val(x) for x in a)
            return a

        with no_grad():
            for n in nodes:
                if n.op == "placeholder":
                    env[n] = next(it)
                elif n.op == "call_function":
                    a = val(n.args)
                    op = resolve_op(n.target)
                    if n.target is operator.getitem:
                        env[n] = a[0][a[1]]
                    elif op is None:  # a Python function (grad-mode switch, tensor assert)
                        env[n] = n.target(*a, **{k: val(v) for k, v in n.kwargs.items()})
                    else:
                        env[n] = _dispatch.call(op, *a)
                elif n.op == "output":
                    out = val(n.args[0])
                    return tuple(out) if isinstance(out, (list, tuple)) else (out,)
        return ()

    return run


def compile_graph(gm: Any, example_inputs: list) -> CompiledGraph:
    """Compile a GraphModule whose call_function targets are registry ops (an `OpDef`, or an
    object leading to one, see `resolve_op`) for `example_inputs`; returns a callable."""
    return CompiledGraph(gm, example_inputs)
