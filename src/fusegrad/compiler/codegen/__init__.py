"""Code generation: a registry-level FX graph becomes fused C kernels (TorchInductor's role).

`compile_graph(gm, example_inputs, options)` returns a callable running the graph: lowered
to loop IR (`lower.py`, the registry's `lowering` entries), scheduled into fused kernels
(`schedule.py`), rendered to C (`c.py`, with `mathlib.py`'s vectorisable math), built and
cached (`build.py`), and called by a generated Python wrapper (`wrapper.py`). A graph
compiled before, by this or any process, comes from the graph-level cache
(`graph_cache.py`) without lowering. Without a C compiler, or when the compiler rejects a
kernel, the graph runs op by op through the registry's NumPy kernels after one warning.

`FUSEGRAD_LOGS=output_code` prints each compiled graph's IR, wrapper and kernels;
`FUSEGRAD_DEBUG_DIR=<dir>` (or the `trace.debug_dir` option) writes them to files, one
directory per graph and input signature.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from .. import logs
from . import build, c, graph_cache
from .ir import Extern, Reduction, describe
from .lower import GraphLowering, resolve_op
from .schedule import group, schedule

__all__ = ["compile_graph", "CompiledGraph", "resolve_op"]

_warned_no_compiler = [False]


class CompiledGraph:
    """A compiled graph: call it with the graph's inputs (fusegrad Tensors); returns a tuple
    of outputs. One variant per input signature (shapes, strides, dtypes), each cheap when
    the graph was compiled before (the graph-level disk cache).

    `options`: the inductor options (`fusegrad._inductor.config`) that change the code:
    `allow_buffer_reuse`, `triton.cudagraphs` (mode "reduce-overhead": intermediate buffers
    kept between calls), `max_autotune` (kernel variants timed), `fx_graph_cache`,
    `trace.debug_dir`."""

    def __init__(self, gm: Any, example_inputs: list, options: dict | None = None):
        self.gm = gm
        self.options = dict(options or {})
        self.variants: dict = {}
        self.source = ""  # the last variant's IR, wrapper and kernels, for printing
        self.from_cache = False  # whether the last variant came from the graph-level cache
        self._prepare(list(example_inputs))

    @staticmethod
    def _signature(args) -> tuple:
        sig = []
        for a in args:
            d = getattr(a, "_data", None)
            if d is not None:
                sig.append((d.shape, d.strides, d.dtype))
            else:  # a float input is a kernel argument: one variant serves every value
                sig.append((float, "a float input") if type(a) is float else (type(a), a))
        return tuple(sig)

    def _prepare(self, args: list):
        key = self._signature(args)
        fn = self.variants.get(key)
        if fn is None:
            fn = self.variants[key] = self._compile(args, key)
        return fn

    def __call__(self, *args):
        key = self._signature(args)
        fn = self.variants.get(key) or self._prepare(list(args))
        return fn(args)

    def _flags(self) -> tuple:
        o = self.options
        return (bool(o.get("allow_buffer_reuse", True)), bool(o.get("triton.cudagraphs")),
                bool(o.get("max_autotune")))

    def _compile(self, args: list, signature: tuple):
        if build.compiler() is None:
            if not _warned_no_compiler[0]:
                _warned_no_compiler[0] = True
                warnings.warn("fusegrad codegen: no C compiler found (cc or $CC); compiled "
                              "graphs run through the registry's NumPy kernels", stacklevel=3)
            return _eager_runner(self.gm)
        key = None
        if self.options.get("fx_graph_cache", True):
            key = graph_cache.graph_key(self.gm, signature, self._flags())
        entry = graph_cache.load(key) if key else None
        self.from_cache = entry is not None
        if entry is None:
            entry = self._generate(args)
        try:
            libs = _libraries(entry)
        except build.CompileError as e:
            sources = "\n\n".join(src for _, src in entry["kernels"])
            warnings.warn(f"fusegrad codegen: the C compiler failed; the graph runs through "
                          f"the registry's NumPy kernels.\n{e}\nKernel source:\n{sources}",
                          stacklevel=3)
            return _eager_runner(self.gm)
        from . import autotune, wrapper

        art = entry["artifact"]
        if not self.from_cache:
            if self._flags()[2] and autotune.tunable(art):
                libs["serial"] = build.build(entry["c_source"], "serial", build.split(
                    c.prefix(), [src for _, src in entry["kernels"]]))
                autotune.tune(art, libs, tuple(args))
            if key:
                graph_cache.store(key, entry)
        self.source = entry["text"]
        logs.emit("output_code", ("(from the graph cache)\n" if self.from_cache else "\n")
                  + self.source)
        debug_dir = os.environ.get("FUSEGRAD_DEBUG_DIR") or self.options.get("trace.debug_dir")
        if debug_dir:
            _write_debug(debug_dir, key, entry)
        return wrapper.load(art, libs)

    def _generate(self, args: list) -> dict:
        """Lower, schedule and render the graph for `args`: the graph-level cache's entry."""
        from . import wrapper

        g = GraphLowering(self.gm, args).run()
        computations = schedule(g)
        g.plan_output_layouts()
        slots = c.Slots()
        kernels: dict = {}
        sources = []
        for i, item in enumerate(group(g, computations)):
            if isinstance(item, Extern):
                continue
            if len(item) == 1:
                name, src = c.render_kernel(item[0], g.buffers[item[0]], slots, i)
            elif not isinstance(item[0], Reduction):  # producers computed in its loop
                name, src = c.render_kernel(item[0], g.buffers[item[0]], slots, i,
                                            [(m, g.buffers[m]) for m in item[1:]])
            else:
                name, src = c.render_group([(m, g.buffers[m]) for m in item], slots, i)
            kernels[item[0]] = (name, item)
            for m in item[1:]:
                kernels[m] = None  # computed by the group's kernel
            sources.append((name, src))
        full = c.prefix() + "\n\n" + "\n\n".join(s for _, s in sources) + "\n"
        reuse, persistent, _ = self._flags()
        art = wrapper.generate(g, computations, kernels, slots, reuse=reuse,
                               persistent=persistent)
        ir_text = "\n".join("# " + describe(comp, g.buffers[comp].name if comp in g.buffers
                                            else "extern") for comp in computations)
        text = f"{ir_text}\n{art.source}\n" + "\n\n".join(s for _, s in sources)
        return {"artifact": art, "c_source": full if sources else "", "kernels": sources,
                "text": text}


def _libraries(entry: dict) -> dict:
    """The loaded shared objects `entry`'s wrapper calls, by build variant."""
    variants = {r[2] for r in entry["artifact"].refs.values() if r[0] == "kernel"}
    if not entry["c_source"]:
        return {}
    units = build.split(c.prefix(), [src for _, src in entry["kernels"]])
    return {v: build.build(entry["c_source"], v, units) for v in variants | {"default"}}


def _write_debug(root: str, key: str | None, entry: dict) -> None:
    """Write the graph's IR and wrapper (`wrapper.py`), each kernel (`<name>.c`) and the
    whole C file with the math library (`kernels.c`) under `root/graph_<key>/`."""
    import hashlib

    name = key or hashlib.sha256(entry["text"].encode()).hexdigest()[:40]
    folder = os.path.join(root, f"graph_{name[:16]}")
    os.makedirs(folder, exist_ok=True)
    files = {"wrapper.py": _wrapper_text(entry), "kernels.c": entry["c_source"]}
    for kname, src in entry["kernels"]:
        files[f"{kname}.c"] = src
    for fname, text in files.items():
        with open(os.path.join(folder, fname), "w") as f:
            f.write(text)
    logs.emit("output_code", f"written to {folder}")


def _wrapper_text(entry: dict) -> str:
    """The IR (as comments) and the wrapper's Python source."""
    ir = [line for line in entry["text"].splitlines() if line.startswith("# ")]
    return "\n".join(ir) + "\n" + entry["artifact"].source


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
                    elif op is None:  # size arithmetic (`s0 * 4`), a Python function
                        # (grad-mode switch, tensor assert)
                        env[n] = n.target(*a, **{k: val(v) for k, v in n.kwargs.items()})
                    else:
                        env[n] = _dispatch.call(op, *a)
                elif n.op == "output":
                    out = val(n.args[0])
                    return tuple(out) if isinstance(out, (list, tuple)) else (out,)
        return ()

    return run


def compile_graph(gm: Any, example_inputs: list, options: dict | None = None) -> CompiledGraph:
    """Compile a GraphModule whose call_function targets are registry ops (an `OpDef`, or an
    object leading to one, see `resolve_op`) for `example_inputs`; returns a callable.
    `options`: see `CompiledGraph`."""
    return CompiledGraph(gm, example_inputs, options)
