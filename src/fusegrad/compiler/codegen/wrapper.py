"""The wrapper: generated Python `call(args)` that runs one compiled graph.

`generate` plans the graph's buffers and writes `call` as an `Artifact`: the Python source
and a description of every object the source names (kernels by symbol, extern kernels by
registry name, dtypes, constants, preallocated buffers), all picklable, so the graph-level
cache (`graph_cache.py`) can keep it on disk and `load` can rebuild the callable in another
process without lowering the graph again.

`call` binds the inputs' addresses into the pointer table `P`, allocates outputs, calls the
kernels with the prepared `P` and `K` tables (ctypes arrays built once) and the extern
kernels with NumPy arrays, and returns fusegrad Tensors. It first writes into `K` the
threads a large kernel's pieces are shared among (`c.PRELUDE`: the C workers run them).
An extern's input that is a view of a buffer (`ir.View`) is passed as a NumPy view of it
(`base.transpose(...)`, a reshape, or `as_strided`), never copied, as PyTorch's inductor
passes strided views to its externs; the extern's results are copied only if they share
memory with such a view (a kernel returning its input), so results never alias other
buffers. An extern's result whose buffer has eager's
non-row-major layout (flash attention's output) is kept as the kernel returns it.

Buffers: outputs are new arrays on every call (a returned tensor is never written by a later
call). An intermediate buffer whose last reader has run gives its memory to a later
intermediate of the same dtype and number of elements (`allow_buffer_reuse`); an extern's
results count as possible views of its inputs, so an input of an extern lives as long as
the extern's results. By default intermediates are allocated on each call; with `persistent`
(mode "reduce-overhead") they are allocated once, when the wrapper is loaded, and an input's
address is written into `P` only when its array is not the one of the previous call.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

import numpy as np

from ..._dtype import FROM_NP, own_instance
from ...ops import _native, _parallel
from .c import K_RUN, K_THREADS, Slots
from .ir import (
    Buffer,
    Extern,
    Pointwise,
    PythonCall,
    ScalarInput,
    View,
    contiguous_strides,
    numel,
)

_LIVE_TO_END = 1 << 60


# The address of an array's first element, read from the array object's data field (about
# 0.3 us against 1.3-4 us for `__array_interface__`, which builds a dict; a compiled GPT step
# writes some 200 addresses): the eager kernels' reader, with its checks.
_array_address = _native.address


def _contiguous(a, dtype) -> np.ndarray:
    """`a` as a C-contiguous array of `dtype` (a copy only when it is not one already)."""
    if a.__class__ is np.ndarray and a.dtype == dtype and a.flags.c_contiguous:
        return a
    return np.array(a, dtype=dtype, order="C")


def _laid_out(a, dtype, shape: tuple, strides: tuple) -> np.ndarray:
    """`a` as an array of `dtype` with `strides` (in bytes; a copy only when it is not one
    already): an extern's result in the layout its buffer was given."""
    if a.__class__ is np.ndarray and a.dtype == dtype and a.strides == strides:
        return a
    from .layout import restrided

    item = np.dtype(dtype).itemsize
    return restrided(np.asarray(a, dtype=dtype), shape, tuple(s // item for s in strides), 0)


def _in_memory_order(kernel, order: tuple, first, *args, **kwargs):
    """`kernel(first, *args, **kwargs)` with `first` laid out with its dims in `order` in
    memory, as eager lays it out: the kernel sees eager's layout, so it draws its values in
    the order eager's does (a filler and dropout along memory, `bernoulli(p)` and
    `poisson` along the logical order). The results come back in any layout."""
    inverse = [0] * len(order)
    for i, d in enumerate(order):
        inverse[d] = i
    return kernel(np.ascontiguousarray(first.transpose(order)).transpose(inverse), *args,
                  **kwargs)


def _strided(base: np.ndarray, start: tuple, shape: tuple, strides: tuple) -> np.ndarray:
    """The view of `base` starting at its element `start` with `shape` and `strides` (in
    bytes): an extern's input passed without a copy."""
    if base.__class__ is np.ndarray and base.flags.c_contiguous:
        # (the view built on `base`'s buffer directly: 0.7 us against `as_strided`'s 6)
        offset = sum(i * s for i, s in zip(start, base.strides))
        try:
            return np.ndarray(shape, base.dtype, base, offset, strides)
        except (TypeError, ValueError):  # (a view reaching outside the buffer)
            pass
    if any(start):
        base = base[tuple(slice(i, None) for i in start)]
    return _as_strided(base, shape, strides)


def _gathered(base: np.ndarray, addresses: np.ndarray) -> np.ndarray:
    """The elements of `base` at `addresses` (in elements from its first one): a view
    whose geometry a later layout choice made irregular, copied."""
    flat = _as_strided(base, (int(addresses.max()) + 1,), (base.itemsize,))
    return flat[addresses]


def _fresh(a: np.ndarray, views: tuple) -> np.ndarray:
    """An extern's result, copied where it shares memory with one of the views it was
    given (a kernel returning its input as it is): results never alias other buffers."""
    for v in views:
        if np.may_share_memory(a, v):
            return a.copy()
    return a


_as_strided = np.lib.stride_tricks.as_strided


def _scalar(value: float) -> np.ndarray:
    """A float input as the 0-d double array kernels read."""
    return np.array(value, dtype=np.float64)


def _status() -> np.ndarray:
    """The status word a scatter kernel sets on an index out of range."""
    return np.zeros(1, np.int64)


def _scatter_error(index, size: int, dim: int) -> None:
    from .scatter import raise_out_of_range

    raise_out_of_range(index, size, dim)


def _own(a: np.ndarray, kept: tuple) -> np.ndarray:
    """`a`, copied when it shares memory with one of the wrapper's preallocated buffers
    (an extern returning a view of its input), so the caller's tensor is never overwritten
    by a later call."""
    for b in kept:
        if np.may_share_memory(a, b):
            return a.copy()
    return a


@dataclass
class Artifact:
    """A generated wrapper, picklable: `source` defines `call(args)`; `refs` maps each name
    the source uses to what it stands for: ("dtype", numpy dtype), ("extern", registry op
    name), ("value", a Python value), ("kernel", symbol, build variant); `persistent` lists
    the preallocated buffers (name, shape, numpy dtype, P slot, root buffer name or None)."""

    source: str
    refs: dict
    persistent: list
    n_slots: int
    ints: list
    # kernel symbol -> [(P slot, number of bytes)] of the buffers it writes (autotuning
    # compares the variants' results through them)
    writes: dict = field(default_factory=dict)
    n_inputs: int = 0


class _Writer:
    def __init__(self, slots: Slots):
        self.slots = slots
        self.lines: list[str] = []
        self.refs: dict = {}
        self.names: dict = {}  # Buffer -> Python expression of its array

    def emit(self, line: str) -> None:
        self.lines.append("    " + line)

    def dtype(self, np_dtype) -> str:
        name = f"_dt_{np.dtype(np_dtype).name}"
        self.refs[name] = ("dtype", np.dtype(np_dtype))
        return name


def _buffer_args(args) -> list:
    """The buffers among an extern's (nested) arguments."""
    out = []
    for a in args:
        if isinstance(a, Pointwise):
            a = a.buffer
        if isinstance(a, View):  # (an extern reads its base's memory)
            a = a.base
        if isinstance(a, Buffer):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out += _buffer_args(a)
    return out


def _steps(g, computations: list, kernels: dict) -> list:
    """(kind, item, reads, writes) per step: ("extern", Extern, ...) or ("kernel",
    (symbol, members), ...)."""
    from .schedule import _reads

    steps = []
    for c in computations:
        if isinstance(c, Extern):
            steps.append(("extern", c, _buffer_args(list(c.args) + list(c.kwargs.values())),
                          list(c.outputs)))
        elif kernels[c] is not None:
            kname, members = kernels[c]
            reads = [ld.buffer for m in members for ld in _reads(m)]
            steps.append(("kernel", (kname, members), reads, [g.buffers[m] for m in members]))
    return steps


def _lifetimes(steps: list, outputs: set) -> dict:
    """Buffer -> index of the last step that needs its memory (outputs: never ends)."""
    end: dict = {}
    for i, (_, _, reads, writes) in enumerate(steps):
        for b in writes:
            end[b] = _LIVE_TO_END if b in outputs else i
        for b in reads:
            if b in end:
                end[b] = max(end[b], i)
    # An extern's results may be views of its inputs: those live while the results do.
    for i in range(len(steps) - 1, -1, -1):
        kind, _, reads, writes = steps[i]
        if kind == "extern":
            last = max((end.get(b, i) for b in writes), default=i)
            for b in reads:
                if b in end:
                    end[b] = max(end[b], last)
    return end


def _plan(steps: list, outputs: set, reuse: bool) -> dict:
    """Intermediate kernel buffer -> the buffer whose memory it takes (itself when new)."""
    end = _lifetimes(steps, outputs)
    root: dict = {}
    free: dict = {}  # (dtype, numel) -> roots whose buffers have all ended
    holders: dict = {}  # root -> buffers using it, still alive
    for i, (kind, _, _, writes) in enumerate(steps):
        for r, users in list(holders.items()):
            if users and all(end[b] < i for b in users):
                free.setdefault((r.dtype, numel(r.shape)), []).append(r)
                holders[r] = []
        if kind != "kernel":
            continue
        for b in writes:
            if b in outputs:
                continue
            pool = free.get((b.dtype, numel(b.shape))) if reuse else None
            r = pool.pop() if pool else b
            root[b] = r
            holders.setdefault(r, []).append(b)
    return root




def generate(g, computations: list, kernels: dict, slots: Slots, reuse: bool = True,
             persistent: bool = False) -> Artifact:
    """The wrapper of the lowered graph `g` (see the module's docstring for `reuse` and
    `persistent`)."""
    w = _Writer(slots)
    outputs = set()
    views = getattr(g, "output_views", {})
    for o in g.outputs:
        v = g.env.get(o, o) if not isinstance(o, (int, float)) else o
        if isinstance(v, Pointwise):
            # (an output view's base lives to the end, in memory of its own)
            v = views[v].base if v in views else v.buffer
        if isinstance(v, Buffer):
            outputs.add(v)
    names = [f"arg{i}" for i in range(len(g.inputs))]
    if names:
        w.emit(f"{', '.join(names)}{',' if len(names) == 1 else ''} = args")
    for i, (name, inp) in enumerate(zip(names, g.inputs)):
        if isinstance(inp, ScalarInput):
            # A float input: the Python float for externs, a 0-d double array for kernels
            # (kept alive by its name until the call returns).
            w.names[inp] = name
            w.emit(f"{inp.name} = _scalar({name})")
            w.emit(f"P[{slots.buffer(inp)}] = _addr({inp.name})")
        elif isinstance(inp, Buffer):
            w.names[inp] = f"{name}._data"
            slot = slots.buffer(inp)
            if persistent:
                # The same array as last call: its address is in P already.
                w.emit(f"d = {name}._data")
                w.emit(f"if d is not _last[{i}]:")
                w.emit(f"    P[{slot}] = _addr(d)")
                w.emit(f"    _last[{i}] = d")
            else:
                w.emit(f"P[{slot}] = _addr({name}._data)")
    steps = _steps(g, computations, kernels)
    root = _plan(steps, outputs, reuse)
    shared = _shared_storages(g, steps, outputs)
    kept: list = []  # Python names of preallocated buffers
    plan_persistent: list = []
    writes: dict = {}
    for kind, item, _, outs in steps:
        if kind == "extern":
            _extern(w, item, outputs, kept, g.inputs)
            continue
        kname, members = item
        writes[kname] = []
        for out in outs:
            var = out.name
            w.names[out] = var
            slot = slots.buffer(out)
            writes[kname].append((slot, numel(out.shape) * out.dtype.np.itemsize))
            dt = w.dtype(out.dtype.np)
            if out in outputs:
                layout = g.output_layouts.get(out)
                if layout is None or tuple(out.strides) != tuple(layout[0]):
                    # (an expanded layout: the kernel writes every element, and the buffer
                    # is copied into that layout when returned)
                    w.emit(f"{var} = _empty({tuple(out.shape)!r}, {dt})")
                elif out in shared:
                    name, size, first = shared[out]
                    if first:
                        w.emit(f"{name} = _empty(({size},), {dt})")
                    w.emit(f"{var} = _in_storage({name}, {tuple(out.shape)!r}, "
                           f"{layout[0]!r}, {layout[1]})")
                else:  # eager's layout: the kernel writes through the buffer's strides
                    w.emit(f"{var} = _empty_strided({tuple(out.shape)!r}, {layout[0]!r}, "
                           f"{layout[1]}, {dt})")
                w.emit(f"P[{slot}] = _addr({var})")
                continue
            r = root[out]
            if persistent:
                plan_persistent.append((var, tuple(out.shape), out.dtype.np, slot,
                                        None if r is out else r.name))
                kept.append(var)
            elif r is out:
                w.emit(f"{var} = _empty({tuple(out.shape)!r}, {dt})")
                w.emit(f"P[{slot}] = _addr({var})")
            else:
                reshape = "" if tuple(r.shape) == tuple(out.shape) else \
                    f".reshape({tuple(out.shape)!r})"
                w.emit(f"{var} = {r.name}{reshape}  # reuses {r.name}'s memory")
                w.emit(f"P[{slot}] = P[{slots.buffer(r)}]")
        w.refs[kname] = ("kernel", kname, "default")
        scatters = [m for m in members if hasattr(m, "accumulate")]
        for m in scatters:  # (the status word its kernel sets on an index out of range)
            w.emit(f"_st{slots.buffer(m.status)} = _status()")
            w.emit(f"P[{slots.buffer(m.status)}] = _addr(_st{slots.buffer(m.status)})")
        w.emit(f"{kname}(P, K)")
        for m in scatters:
            from .scatter import checked_expr

            w.emit(f"if _st{slots.buffer(m.status)}[0]:")
            w.emit(f"    _scatter_error({checked_expr(w, m, _view_expr)}, "
                   f"{int(m.shape[-1])}, {len(m.shape) - 1})")
    if writes:  # the threads the kernels' pieces are shared among now (`c.PRELUDE`)
        w.lines.insert(0, f"    K[{K_THREADS}] = _threads(K)")
    rets = []
    # One tensor per buffer: a value the graph returns twice (a forward output that is also
    # saved for the backward) must be one tensor with one version counter, so that writing
    # the output in place is seen by the backward's check of its saved values.
    wrapped: dict = {}
    for o in g.outputs:
        v = g.env.get(o, o) if hasattr(o, "op") else o
        if isinstance(v, Pointwise) and v in views:  # a view of an intermediate buffer
            if v not in wrapped:
                wrapped[v] = f"_out{len(wrapped)}"
                w.emit(f"{wrapped[v]} = _wrap({_view_expr(w, views[v])})")
            rets.append(wrapped[v])
            continue
        if isinstance(v, Pointwise):
            v = v.buffer
        if isinstance(v, ScalarInput):  # a float input, or Python arithmetic on them
            rets.append(w.names[v] if v in g.inputs else f"float({w.names[v]})")
        elif isinstance(v, Buffer):
            if v in g.inputs:
                rets.append(w.names[v].rsplit("._data", 1)[0])
            elif v in wrapped:
                rets.append(wrapped[v])
            else:
                var = wrapped[v] = f"_out{len(wrapped)}"
                layout = g.output_layouts.get(v)
                if layout is not None and tuple(v.strides) != tuple(layout[0]):
                    # An extern's result (contiguous), or a kernel's of an expanded layout:
                    # copied into eager's layout.
                    w.emit(f"{var} = _wrap(_restrided({w.names[v]}, {tuple(v.shape)!r}, "
                           f"{layout[0]!r}, {layout[1]}))")
                else:
                    w.emit(f"{var} = _wrap({w.names[v]})")
                rets.append(var)
        else:
            name = f"_const{len(rets)}"
            w.refs[name] = ("value", v)
            rets.append(name)
    w.emit(f"return ({', '.join(rets)}{',' if len(rets) == 1 else ''})")
    src = "def call(args):\n" + "\n".join(w.lines) + "\n"
    return Artifact(src, w.refs, plan_persistent, max(len(slots.buffers), 1),
                    list(slots.ints), writes, len(names))


def _shared_storages(g, steps: list, outputs: set) -> dict:
    """Output kernel buffers laid out with gaps (eager's views of a larger tensor: the
    query, key and value a split of one projection makes) that fill one storage together:
    buffer -> (storage name, elements, whether it is the first to be allocated). They get
    one uninitialised storage, each its view of it, where each alone would need a zeroed
    storage of the whole size (its gaps must never show stale memory; here its siblings
    fill them). The elements of each are its own: no two outputs share one."""
    from .layout import storage_size

    candidates: dict = {}
    for kind, _, _, writes in steps:
        if kind != "kernel":
            continue
        for b in writes:
            layout = g.output_layouts.get(b)
            if b not in outputs or layout is None or tuple(b.strides) != tuple(layout[0]):
                continue
            n = storage_size(b.shape, layout[0], layout[1])
            if n <= numel(b.shape):
                continue  # (dense: an uninitialised storage of its own already)
            key = (tuple(int(x) for x in b.shape), tuple(int(x) for x in layout[0]),
                   b.dtype)
            candidates.setdefault(key, []).append((b, int(layout[1]), n))
    out: dict = {}
    for (shape, strides, _), members in candidates.items():
        # Consecutive members (in the order they are computed) that fill a storage: the
        # outputs one split makes come one after another.
        run: list = []
        for m in members:
            run.append(m)
            n = max(x[2] for x in run)
            total = numel(shape) * len(run)
            if total < n:
                continue
            if total == n and n <= 1 << 28 and _partition(shape, strides, run, n):
                name = f"_storage{len(out)}"
                for i, (b, _, _) in enumerate(run):
                    out[b] = (name, n, i == 0)
            run = []
    return out


def _partition(shape: tuple, strides: tuple, members: list, n: int) -> bool:
    """Whether the elements of `members` ((buffer, offset, _) of one geometry) are each
    of the `n` positions of a storage exactly once."""
    positions = []
    for _, offset, _ in members:
        at = np.full((), offset, np.int64)
        for size, stride in zip(shape, strides):
            at = np.add.outer(at, np.arange(size, dtype=np.int64) * stride)
        positions.append(at.reshape(-1))
    return bool((np.bincount(np.concatenate(positions), minlength=n) == 1).all())


def _in_storage(storage: np.ndarray, shape: tuple, strides: tuple, offset: int) -> np.ndarray:
    """The view of `storage` with this geometry (strides and offset in elements)."""
    item = storage.itemsize
    return np.ndarray(shape, storage.dtype, buffer=storage, offset=offset * item,
                      strides=tuple(int(s) * item for s in strides))


def _extern(w: _Writer, c: Extern, outputs: set, kept: list, inputs=()) -> None:
    """Emit a call of a registry kernel on NumPy arrays (`inputs`: the graph's inputs)."""
    op_name = f"_extern_{c.op.name.replace('.', '_')}"
    if isinstance(c.op, PythonCall):  # a Python function the graph calls (a runtime check)
        base, k = op_name, 0
        while op_name in w.refs and w.refs[op_name][1] is not c.op.kernel:
            k += 1  # another function of that name (each random factory's draw)
            op_name = f"{base}_{k}"
        w.refs[op_name] = ("value", c.op.kernel)
    elif c.writes is None:
        w.refs[op_name] = ("extern", c.op.name)

    views: list = []

    def arg(a):
        if isinstance(a, View):
            name = f"{c.outputs[0].name if c.outputs else 'check'}_v{len(views)}"
            w.emit(f"{name} = {_view_expr(w, a)}")
            views.append(name)
            return name
        if isinstance(a, Pointwise):
            a = a.buffer
        if isinstance(a, ScalarInput):  # kernels of NumPy take the Python float
            return w.names[a] if a in inputs else f"float({w.names[a]})"
        if isinstance(a, Buffer):
            return w.names[a]
        if isinstance(a, (list, tuple)):
            inner = ", ".join(arg(x) for x in a)
            return f"[{inner}]" if isinstance(a, list) else f"({inner}{',' if len(a) == 1 else ''})"
        key = f"_c{len(w.refs)}"
        w.refs[key] = ("value", a)
        return key

    if c.writes is not None:  # an in-place op: eager's in-place path writes the memory
        _write(w, c, inputs, arg)
        return
    args = ", ".join(arg(a) for a in c.args)
    kwargs = "".join(f", {k}={arg(v)}" for k, v in c.kwargs.items())
    outs = [b.name for b in c.outputs]
    if not outs:  # called for its effect (a runtime check)
        w.emit(f"{op_name}({args}{kwargs})")
    elif c.memory_order is not None:  # a random op drawing in its input's memory order
        w.emit(f"{', '.join(outs)} = _in_memory_order({op_name}, {c.memory_order!r}, "
               f"{args}{kwargs})")
    else:
        w.emit(f"{', '.join(outs)} = {op_name}({args}{kwargs})")
    for b in c.outputs:
        w.names[b] = b.name
        if tuple(b.strides) == contiguous_strides(b.shape):
            w.emit(f"{b.name} = _contig({b.name}, {w.dtype(b.dtype.np)})")
        else:  # eager's layout of the result, which the kernel gives it
            item = b.dtype.np.itemsize
            w.emit(f"{b.name} = _laid_out({b.name}, {w.dtype(b.dtype.np)}, "
                   f"{tuple(int(n) for n in b.shape)!r}, "
                   f"{tuple(int(s) * item for s in b.strides)!r})")
        if views:
            w.emit(f"{b.name} = _fresh({b.name}, ({', '.join(views)},))")
        if b in outputs and kept:
            w.emit(f"{b.name} = _own({b.name}, ({', '.join(kept)},))")
        w.emit(f"P[{w.slots.buffer(b)}] = _addr({b.name})")


def _write(w: _Writer, c: Extern, inputs, arg) -> None:
    """Emit in-place op `c` writing its first argument (see `writes.py`): the graph's input
    tensor itself when it writes the whole of one (eager's version counter and checks), else
    a NumPy view of the buffer, after which an input's version counter is advanced."""
    op_name = f"_write_{c.op.name.replace('.', '_')}"
    w.refs[op_name] = ("write", c.op.name)
    first, base = c.args[0], c.writes
    tensor = w.names[base].rsplit("._data", 1)[0] if base in inputs else None
    whole = first is base and tensor is not None
    rest = "".join(", " + arg(a) for a in c.args[1:])
    w.emit(f"{op_name}({tensor if whole else arg(first)}{rest})")
    if tensor is not None and not whole:
        w.emit(f"{tensor}._vc[0] += 1")


def _writer(op):
    """The call that runs in-place op `op` as eager does on its first argument (a Tensor,
    or an array wrapped as one; operands that are arrays are wrapped too)."""
    from ... import _dispatch
    from ..._tensor import Tensor
    from ...autograd.grad_mode import no_grad

    def tensor(a):
        if isinstance(a, np.ndarray):
            return _dispatch._wrap(a)
        if isinstance(a, (list, tuple)):
            return type(a)(tensor(x) for x in a)
        return a

    def write(dst, *args):
        args = tuple(tensor(a) for a in args)
        if isinstance(dst, Tensor):  # a graph input, written as eager writes it
            _dispatch.call(op, dst, *args)
            return
        with no_grad():
            _dispatch.call(op, tensor(dst), *args)

    return write


def _view_expr(w: _Writer, v: View) -> str:
    """Python expression of view `v` of its base's array: the base itself, a transpose or
    a reshape where those give its geometry (cheaper to make), else an `as_strided` view;
    copied through the addresses of its elements where its base's final layout (an output
    buffer's, chosen after lowering) leaves it no strided geometry."""
    base = v.base
    name = w.names[base]
    shape = tuple(int(n) for n in v.shape)
    geometry = v.geometry()
    if geometry is None:
        from .ir import evaluate_index

        nd = len(shape)
        grids = {f"x{i}": np.arange(n, dtype=np.int64).reshape(
            [-1 if i == j else 1 for j in range(nd)]) for i, n in enumerate(shape)}
        addr = np.zeros(shape, np.int64)
        for e, s in zip(v.index, base.strides):
            addr = addr + evaluate_index(e, grids) * int(s)
        key = f"_addresses{len(w.refs)}"
        w.refs[key] = ("value", addr)
        return f"_gathered({name}, {key})"
    strides, offset = geometry
    bshape, bstrides = tuple(int(n) for n in base.shape), tuple(int(s) for s in base.strides)

    def same(a, b) -> bool:  # equal geometries (strides of size-1 dims do not matter)
        return a[0] == b[0] and all(n == 1 or s == t for n, s, t in zip(a[0], a[1], b[1]))

    if offset == 0 and same((shape, strides), (bshape, bstrides)):
        return name
    if offset == 0 and len(shape) == len(bshape) > 1:
        perm = _permutation(shape, strides, bshape, bstrides)
        if perm is not None:
            return f"{name}.transpose({perm!r})"
    if offset == 0 and bstrides == contiguous_strides(bshape) and \
            numel(shape) == numel(bshape) and \
            same((shape, strides), (shape, contiguous_strides(shape))):
        return f"{name}.reshape({shape!r})"
    start = tuple(_start(v))
    item = v.dtype.np.itemsize
    return f"_strided({name}, {start!r}, {shape!r}, {tuple(s * item for s in strides)!r})"


def _permutation(shape, strides, bshape, bstrides) -> tuple | None:
    """`perm` with `base.transpose(perm)` of geometry (shape, strides), or None."""
    perm: list = []
    for n, s in zip(shape, strides):
        for d, (m, t) in enumerate(zip(bshape, bstrides)):
            if d not in perm and m == n and (t == s or n == 1):
                perm.append(d)
                break
        else:
            return None
    return tuple(perm)


def _start(v: View) -> list:
    """The base's logical index of the view's first element."""
    from .ir import IInt, IVar

    def value(e):
        if isinstance(e, IInt):
            return e.value
        if isinstance(e, IVar):
            return 0
        a, b = value(e.a), value(e.b)
        return {"+": a + b, "*": a * b, "/": a // b if b else 0, "%": a % b if b else 0}[e.op]

    return [value(e) for e in v.index]


def _threads(K) -> int:
    """The threads a kernel's pieces may be shared among now: the intra-op thread count,
    one inside a side-by-side task (`_parallel.concurrently`). The first call that shares
    writes the C workers' entry into `K` (loaded no sooner: one thread never needs them)."""
    threads = _parallel.sharing_threads(_parallel.MIN_CHUNK)
    if threads > 1 and not K[K_RUN]:
        K[K_RUN] = _workers_entry()
    return threads


def _workers_entry() -> int:
    """The address of the C workers' `fg_workers_call` (`ops/native/workers.c`), which
    runs a kernel's pieces on them, the workers told their CPUs as for the eager kernels;
    0 without them (C kernels off or not built: every kernel runs whole)."""
    from ...ops import _native

    return _native.workers_call_address()


def _own_dtype(dt: np.dtype) -> np.dtype:
    """NumPy's own instance of dtype `dt` (an unpickled dtype is a separate, equal object)."""
    d = FROM_NP.get(dt)
    return dt if d is None else d.np


def load(art: Artifact, libs: dict):
    """The `call` function of `art`, its kernels taken from `libs` (build variant ->
    loaded shared object)."""
    from ... import _dispatch
    from ...ops import REGISTRY

    P = (ctypes.c_void_p * art.n_slots)()
    K = (ctypes.c_int64 * max(len(art.ints), 1))(*art.ints)
    from .layout import empty_strided, restrided

    scope: dict = {"_empty": np.empty, "_contig": _contiguous, "_own": _own,
                   "_strided": _strided, "_gathered": _gathered, "_fresh": _fresh,
                   "_laid_out": _laid_out,
                   "_in_memory_order": _in_memory_order,
                   "_empty_strided": empty_strided, "_restrided": restrided,
                   "_scalar": _scalar, "_threads": _threads, "_in_storage": _in_storage,
                   "_status": _status, "_scatter_error": _scatter_error,
                   "_addr": _array_address, "_wrap": _dispatch._wrap, "P": P, "K": K,
                   "_last": [None] * art.n_inputs}
    # An artifact read back from the disk cache holds unpickled dtypes and arrays: each is
    # given NumPy's own dtype instance, which the kernels the wrapper's arrays reach
    # recognise by identity (`_dtype.own_instance`).
    for name, ref in art.refs.items():
        kind = ref[0]
        if kind == "dtype":
            scope[name] = _own_dtype(ref[1])
        elif kind == "extern":
            scope[name] = REGISTRY[ref[1]].kernel
        elif kind == "write":
            scope[name] = _writer(REGISTRY[ref[1]])
        elif kind == "kernel":
            scope[name] = getattr(libs[ref[2]], ref[1])
        elif isinstance(ref[1], np.ndarray):
            scope[name] = own_instance(ref[1])
        else:
            scope[name] = ref[1]
    for var, shape, dtype, slot, root in art.persistent:
        arr = np.empty(shape, _own_dtype(dtype)) if root is None else \
            scope[root].reshape(shape)
        scope[var] = arr
        P[slot] = _array_address(arr)
    exec(compile(art.source, "<fusegrad wrapper>", "exec"), scope)
    call = scope["call"]
    call.scope = scope
    return call
