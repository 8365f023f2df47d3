"""The wrapper: generated Python `call(args)` that runs one compiled graph.

It binds the inputs' addresses into the pointer table, allocates the outputs (intermediate
buffers are allocated once and reused: nothing outside reads them), calls the kernels with
the prepared `P` and `K` tables (ctypes arrays built once) and the extern kernels with NumPy
arrays, and returns fusegrad Tensors. `FUSEGRAD_LOGS=output_code` prints it with the kernels'
C source.
"""

from __future__ import annotations

import ctypes

import numpy as np

from .c import Slots
from .ir import Buffer, Extern, Pointwise


def _array_address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _contiguous(a, dtype) -> np.ndarray:
    """`a` as a C-contiguous array of `dtype` (a copy only when it is not one already)."""
    if a.__class__ is np.ndarray and a.dtype == dtype and a.flags.c_contiguous:
        return a
    return np.array(a, dtype=dtype, order="C")


class WrapperCode:
    """Writes the Python source of `call` and the objects it refers to."""

    def __init__(self, slots: Slots):
        self.slots = slots
        self.lines: list[str] = []
        self.scope: dict = {"_addr": _array_address, "_empty": np.empty,
                            "_contig": _contiguous}
        self.names: dict = {}  # Buffer -> Python variable name

    def emit(self, line: str) -> None:
        """Add a line to `call`'s body."""
        self.lines.append("    " + line)

    def source(self) -> str:
        """The wrapper's Python source."""
        return "def call(args):\n" + "\n".join(self.lines) + "\n"


def generate(g, computations: list, kernels: dict, lib, slots: Slots) -> tuple:
    """(call function, its source) for the lowered graph `g`."""
    from ... import _dispatch

    w = WrapperCode(slots)
    w.scope["_wrap"] = _dispatch._wrap
    names = [f"arg{i}" for i in range(len(g.inputs))]
    w.emit(f"{', '.join(names)}{',' if len(names) == 1 else ''} = args" if names else "pass")
    P = None  # built after all slots are known
    outputs = set()
    for o in g.outputs:
        v = g.env.get(o, o) if not isinstance(o, (int, float)) else o
        if isinstance(v, Pointwise):
            v = v.buffer
        if isinstance(v, Buffer):
            outputs.add(v)
    for name, inp in zip(names, g.inputs):
        if isinstance(inp, Buffer):
            w.names[inp] = f"{name}._data"
            w.emit(f"P[{slots.buffer(inp)}] = _addr({name}._data)")
    persistent = []
    for i, c in enumerate(computations):
        if isinstance(c, Extern):
            _extern(w, c, i)
            continue
        if kernels[c] is None:
            continue  # computed by an earlier kernel of its group
        kname, members = kernels[c]
        for m in members:
            out = g.buffers[m]
            var = out.name
            w.names[out] = var
            dt = f"_dt_{var}"
            w.scope[dt] = out.dtype.np
            if out in outputs:
                w.emit(f"{var} = _empty({tuple(out.shape)!r}, {dt})")
                w.emit(f"P[{slots.buffer(out)}] = _addr({var})")
            else:
                persistent.append(out)
                w.scope[var] = np.empty(out.shape, out.dtype.np)
        w.scope[kname] = getattr(lib, kname)
        w.emit(f"{kname}(P, K)")
    rets = []
    for o in g.outputs:
        v = g.env.get(o, o) if hasattr(o, "op") else o
        if isinstance(v, Pointwise):
            v = v.buffer
        if isinstance(v, Buffer):
            if v in g.inputs:
                rets.append(w.names[v].rsplit("._data", 1)[0])
            else:
                rets.append(f"_wrap({w.names[v]})")
        else:
            w.scope[f"_const{len(rets)}"] = v
            rets.append(f"_const{len(rets)}")
    w.emit(f"return ({', '.join(rets)}{',' if len(rets) == 1 else ''})")
    P = (ctypes.c_void_p * max(len(slots.buffers), 1))()
    for buf in persistent:
        if buf in slots.buffers:
            P[slots.buffer(buf)] = _array_address(w.scope[buf.name])
    K = (ctypes.c_int64 * max(len(slots.ints), 1))(*slots.ints)
    w.scope["P"], w.scope["K"] = P, K
    src = w.source()
    exec(compile(src, "<fusegrad wrapper>", "exec"), w.scope)
    return w.scope["call"], src


def _extern(w: WrapperCode, c: Extern, i: int) -> None:
    """Emit a call of a registry kernel on NumPy arrays."""
    op_name = f"_extern{i}"
    w.scope[op_name] = c.op.kernel

    def arg(a):
        if isinstance(a, Pointwise):
            a = a.buffer
        if isinstance(a, Buffer):
            return w.names[a]
        if isinstance(a, (list, tuple)):
            inner = ", ".join(arg(x) for x in a)
            return f"[{inner}]" if isinstance(a, list) else f"({inner}{',' if len(a) == 1 else ''})"
        key = f"_c{i}_{len(w.scope)}"
        w.scope[key] = a
        return key

    args = ", ".join(arg(a) for a in c.args)
    kwargs = "".join(f", {k}={arg(v)}" for k, v in c.kwargs.items())
    outs = [b.name for b in c.outputs]
    target = ", ".join(outs) + ("," if len(outs) == 1 else "")
    if not outs:  # called for its effect (a runtime check)
        w.emit(f"{op_name}({args}{kwargs})")
    elif len(outs) == 1:
        w.emit(f"{outs[0]} = {op_name}({args}{kwargs})")
    else:
        w.emit(f"{target} = {op_name}({args}{kwargs})")
    for b in c.outputs:
        w.names[b] = b.name
        dt = f"_dt_{b.name}"
        w.scope[dt] = b.dtype.np
        w.emit(f"{b.name} = _contig({b.name}, {dt})")
        w.emit(f"P[{w.slots.buffer(b)}] = _addr({b.name})")
