"""Lowering: a registry-level FX graph becomes loop IR.

Each registry entry's `lowering` is a function `lowering(v, *args, **kwargs)`: `v` is a
`LoweringOps` (below), tensor arguments arrive as IR values (`Buffer`/`Pointwise`), the rest
as the graph gave them. It returns an IR value built with `v`'s methods, e.g.
`lambda v, a, b, alpha=1: v.add(a, v.mul(b, alpha))` or
`lambda v, x, dim, keepdim=False, dtype=None: v.reduce("sum", x, dim, keepdim, dtype)`.
An entry whose `lowering` is None or `"extern"`, or whose lowering raises `NotLowered` for
the arguments it got (a half dtype, a shape it does not handle), runs its NumPy kernel as an
`Extern` call between kernels. A graph target that is a plain Python function (no registry
op) may carry a `lowering` attribute of the same form.

Graph targets: `resolve_op` accepts an `OpDef` or any object leading to one through an `op`
or `opdef` attribute (the printable `fusegrad.ops.aten.<name>.<overload>` handles).
"""

from __future__ import annotations

import operator
from typing import Any

from ... import _dtype
from .ir import (
    Buffer,
    Extern,
    IInt,
    IVar,
    Load,
    Pointwise,
    PythonCall,
    ScalarInput,
    View,
    contiguous_strides,
    is_float,
    numel,
)
from .lower_pointwise import SUPPORTED, NotLowered, body_at, is_tensor, resolve_op
from .lower_reduce import ReductionOps


class LoweringOps(ReductionOps):
    """The expression builder lowerings use: tensor-level ops whose results are lazy IR
    (elementwise ops in `lower_pointwise.py`, views, copies and joins in `lower_views.py`,
    reductions in `lower_reduce.py`).

    Arithmetic follows eager's dtype rules (`_dtype.result_type`); floating functions of
    integer tensors compute in the default float dtype, as eager's kernels do.
    """

    def attention(self, q, k, v, dropout_p=0.0, is_causal=False, attn_mask=None, scale=None):
        """The CPU flash attention's (out, logsumexp) by the C attention kernel
        (`attention.py`): an extern call of it; NotLowered for what it does not compute."""
        from .attention import lower_forward

        return lower_forward(self.graph, q, k, v, dropout_p, is_causal, attn_mask, scale)

    def attention_backward(self, grad, q, k, v, out, lse, dropout_p=0.0, is_causal=False,
                           attn_mask=None, scale=None):
        """The CPU flash attention's (grad_q, grad_k, grad_v) by the C attention kernel."""
        from .attention import lower_backward

        return lower_backward(self.graph, grad, q, k, v, out, lse, dropout_p, is_causal,
                              attn_mask, scale)


class GraphLowering:
    """Lowers one FX graph: each node becomes an IR value; reductions, externs and (later,
    by the scheduler) some pointwise values are computations with buffers of their own."""

    def __init__(self, gm: Any, example_inputs: list):
        self.gm = gm
        self.example_inputs = list(example_inputs)
        self.computations: list = []  # Reduction / Extern / realised Pointwise, in order
        self.buffers: dict = {}  # computation -> Buffer
        self.inputs: list[Buffer] = []
        self.env: dict = {}  # fx node -> IR value (or Python value)
        self.users: dict = {}
        self.outputs: list = []
        self.ops = LoweringOps(self)
        self._count = 0
        self._current = None
        # ids of the IR values earlier nodes (and the inputs) lowered to: a non-view op whose
        # lowering simplifies to one of them (`y * 1`, `x.to(x.dtype)`) must still get memory
        # of its own, or two outputs that are separate tensors in eager would share it.
        self._taken: dict = {}
        # Output buffer -> (strides, storage offset) eager gives it, where not contiguous
        # (set by `plan_output_layouts` once the scheduler chose the buffers).
        self.output_layouts: dict = {}
        self._layouts = None  # eager's layout of each node, computed when first needed
        self._written: set = set()  # buffers an in-place extern writes
        # Output Pointwise -> the `View` of a buffer it is returned as (no copy; set by the
        # scheduler).
        self.output_views: dict = {}

    def layouts(self) -> dict:
        """Eager's layout of each node of the graph (`layout.eager_layouts`), computed when
        first needed."""
        if self._layouts is None:
            from .layout import eager_layouts

            self._layouts = eager_layouts(self.gm, self.example_inputs)
        return self._layouts

    def new_name(self) -> str:
        """A fresh buffer name."""
        self._count += 1
        return f"buf{self._count - 1}"

    def add_computation(self, node: Any) -> Buffer:
        """Register a computation (it gets an output buffer) and return the buffer."""
        if self._current is not None:
            node.origins.append(self._current)
        buf = Buffer(self.new_name(), node.shape, node.dtype, contiguous_strides(node.shape))
        self.computations.append(node)
        self.buffers[node] = buf
        return buf

    def run(self) -> GraphLowering:
        """Lower every node of the graph."""
        from ... import _tensor

        graph = self.gm.graph
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        for i, (n, t) in enumerate(zip(placeholders, self.example_inputs)):
            if type(t) is float:  # a float input: read by kernels, never compiled in
                buf = ScalarInput(f"in_ptr{i}", (), _dtype.float64, ())
                self.inputs.append(buf)
                self.env[n] = buf
            elif isinstance(t, _tensor.Tensor):
                a = t._data
                strides = tuple(s // a.itemsize for s in a.strides) if a.size else \
                    contiguous_strides(a.shape)
                buf = Buffer(f"in_ptr{i}", tuple(a.shape), t.dtype, strides)
                self.inputs.append(buf)
                self.env[n] = buf
                self._taken[id(buf)] = buf
            else:
                self.inputs.append(t)
                self.env[n] = t
        for n in graph.nodes:
            if n.op == "call_function":
                self._current = n
                self.env[n] = value = self.lower_node(n)
                self._current = None
                for v in _iter_values([value]):
                    if is_tensor(v):
                        self._taken[id(v)] = v
            elif n.op == "output":
                self.outputs = list(_flatten_output(n.args[0]))
        return self

    def plan_output_layouts(self) -> None:
        """Give each output buffer eager's layout (see layout.py): a kernel then writes it
        in that layout; an extern's result is copied into it when returned. A layout that
        overlaps itself (an expanded view, whose elements share memory as eager's and
        PyTorch inductor's do) is computed into the contiguous buffer and copied into it
        when returned."""
        from .layout import non_overlapping

        layouts = self.layouts()
        kernel_buffers = set(self.buffers.values())
        for o in self.outputs:
            fake = layouts.get(o) if hasattr(o, "op") else None
            v = self.env.get(o) if hasattr(o, "op") else None
            if isinstance(v, Pointwise):
                v = v.buffer
            if fake is None or not isinstance(v, Buffer) or isinstance(v, ScalarInput) or \
                    v in self.inputs or v in self.output_layouts:
                continue
            shape, strides = tuple(fake.shape), tuple(fake.stride())
            offset = fake.storage_offset()
            if shape != tuple(v.shape) or not numel(shape) or \
                    (strides == tuple(v.strides) and offset == 0):
                continue
            self.output_layouts[v] = (strides, offset)
            if v in kernel_buffers and non_overlapping(shape, strides) and \
                    v not in self._written:  # (a write's views were made on its strides)
                v.strides = strides  # the kernel writes it in place (its strides)

    def _value(self, a):
        from ...fx.node import Node

        if isinstance(a, Node):
            return self.env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(self._value(x) for x in a)
        return a

    def lower_node(self, n) -> Any:
        """Lower one call_function node (a registry op, or `operator.getitem`)."""
        import operator

        args = self._value(n.args)
        kwargs = {k: self._value(v) for k, v in n.kwargs.items()}
        if n.target is operator.getitem:
            return args[0][args[1]]
        if n.target in _SIZE_ARITHMETIC and all(type(a) is int for a in args):
            # Arithmetic on size inputs (`s77 * 4` of a dynamic graph): the graph is lowered
            # per input signature, so sizes are known here.
            return n.target(*args)
        number = n.target in _FLOAT_ARITHMETIC or \
            getattr(n.target, "math_name", None) is not None  # (a `_sym_*` twin of math's)
        if number and not kwargs and all(type(a) in (int, float) for a in args):
            return n.target(*args)  # (sizes are known here: the graph is lowered per sizes)
        if number and any(isinstance(a, ScalarInput) for a in args):
            # Python arithmetic on float inputs (`1 - p`): computed by Python between
            # kernels, exactly as the program computes it; the result is a float input too.
            out = ScalarInput(self.new_name(), (), _dtype.float64, ())
            ext = Extern(PythonCall(n.target.__name__, n.target), args, {}, [out])
            ext.origins.append(n)
            self.computations.append(ext)
            return out
        op = resolve_op(n.target)
        if op is None:
            # A Python function the graph calls (a grad-mode switch, a tensor assert) lowers
            # through the `lowering` it carries, as a registry entry's.
            low = getattr(n.target, "lowering", None)
            if callable(low):
                return low(self.ops, *args, **kwargs)
            raise NotImplementedError(f"codegen: {n.target!r} is not a registry op")
        if op.name == "as_strided":
            # It reads its input's storage, which a buffer of the graph need not keep (a
            # realised transpose has its own layout; an input's buffer may be written back
            # before a kernel reads the view). Where the input is contiguous from offset 0
            # and the view reads within its elements (stft's frames of a signal), the
            # storage is the input's values in order: the view is index arithmetic on them.
            value = self._as_strided_of_contiguous(n, args, kwargs)
            if value is None:
                raise NotImplementedError("codegen: as_strided reads its input's storage, "
                                          "which the graph's buffers do not keep")
            return self._check(value, _meta(op, args, kwargs), op)
        meta = _meta(op, args, kwargs)
        if op.inplace and not self._fresh_destination(n):
            from .writes import lower_write

            return lower_write(self, n, op, args, kwargs)
        low = op.lowering
        if callable(low) and not op.random and (not op.inplace or self._fresh_destination(n)):
            scalar = any(isinstance(a, ScalarInput) for a in _iter_values(
                list(args) + list(kwargs.values())))
            try:
                if not op.view and not isinstance(meta, list):
                    args = tuple(self._widened(a, meta[1]) for a in args)
                value = low(self.ops, *args, **kwargs)
                return self._check(value, meta, op)
            except NotLowered:
                pass
            except (TypeError, AttributeError, ValueError):
                if not scalar:
                    raise
                # A lowering that needs a Python number where a float input came: the
                # NumPy kernel gets the number.
        return self.extern(op, args, kwargs, meta)

    def _as_strided_of_contiguous(self, n, args, kwargs) -> Any:
        """`as_strided(x, size, stride, storage_offset)` as a view of `x`'s values, or None
        where it may read storage that is not `x`'s elements in order: `x` (as the program
        makes it) not contiguous, or the view reaching past it. Without a storage offset
        the view starts where `x` does; an offset counts from the storage's start, which
        is `x`'s only for a tensor this graph made with a non-view op."""
        bound = dict(zip(("input", "size", "stride", "storage_offset"), args), **kwargs)
        x, size, stride = bound.get("input"), bound.get("size"), bound.get("stride")
        offset = bound.get("storage_offset")
        src = n.args[0] if n.args else None
        val = getattr(src, "meta", {}).get("val")
        if not isinstance(x, (Buffer, Pointwise)) or size is None or stride is None or \
                len(size) != len(stride) or \
                not all(type(v) is int for v in (*size, *stride, offset or 0)):
            return None
        shape = tuple(int(d) for d in x.shape)
        if val is None and not isinstance(x, Buffer):
            return None
        if val is not None and (tuple(val.shape) != shape or not val.is_contiguous()):
            return None
        if isinstance(x, Buffer) and any(  # (the layout the compiled code is given)
                s != c for s, c, d in zip(x.strides, contiguous_strides(shape), shape) if d != 1):
            return None
        if offset is not None:
            made = resolve_op(src.target) if getattr(src, "op", None) == "call_function" \
                else None
            if made is None or made.view or val is None or val.storage_offset() != 0:
                return None
        offset = offset or 0
        total = numel(shape)
        if numel(size) == 0 or total == 0 or min(stride, default=0) < 0:
            return None
        last = offset + sum((d - 1) * s for d, s in zip(size, stride))
        if offset < 0 or last >= total:
            return None

        def remap(idx):
            flat = IInt(offset)
            for i, st in zip(idx, stride):
                if st:
                    flat = flat + i * IInt(st)
            out = []
            for d in reversed(range(len(shape))):  # unravel over x's (contiguous) shape
                out.append(flat % IInt(shape[d]) if d else flat)
                flat = flat // IInt(shape[d])
            return tuple(reversed(out))

        return self.ops.view_index(x, tuple(size), remap)

    @staticmethod
    def _fresh_destination(n) -> bool:
        """Whether in-place node `n` writes a tensor this graph made that nothing else reads
        (batch norm's `copy_(clone(running_mean), new)` after functionalization): its value
        is then the new one alone, which the op's lowering computes (not a write)."""
        dst = n.args[0] if n.args else None
        if getattr(dst, "op", None) != "call_function":
            return False
        made = resolve_op(dst.target)
        from .writes import _reshapes

        # (a reshape's result is its input's memory in eager: `_unsafe_view`)
        if made is None or made.view or made.inplace or made.random or _reshapes(made):
            return False
        return list(dst.users) == [n]

    def _widened(self, a, result):
        """Tensor operand `a` converted to the op's `result` dtype where it is of the same
        kind (integer or floating) but narrower: eager computes in the result dtype, while
        a lowering's steps keep their operands' (`add(int32, uint8, alpha=2)` as
        `a + b * 2` would double the uint8 in uint8)."""
        if not is_tensor(a) or a.dtype is result or result not in SUPPORTED or \
                a.dtype not in SUPPORTED or _dtype.bool_ in (a.dtype, result) or \
                is_float(a.dtype) != is_float(result) or \
                a.dtype.itemsize >= result.itemsize:
            return a
        return self.ops.to(a, result)

    def _check(self, value, meta, op):
        if isinstance(meta, list):  # several results: each checked as one
            if not isinstance(value, (tuple, list)) or len(value) != len(meta):
                raise NotImplementedError(f"lowering of {op.name} gave {len(value)} results, "
                                          f"its meta says {len(meta)}")
            return [self._check(v, m, op) for v, m in zip(value, meta)]
        shape, dtype = meta
        if dtype not in SUPPORTED or (is_tensor(value) and value.dtype not in SUPPORTED):
            # A view or copy of a half tensor (`clone`, `slice`) builds no arithmetic, so
            # `pointwise`'s check never ran: the C renderer has no type for it.
            raise NotLowered(f"dtype {dtype!r} has no C type")
        if not is_tensor(value) or tuple(value.shape) != tuple(shape):
            raise NotImplementedError(
                f"lowering of {op.name} gave shape {getattr(value, 'shape', value)}, "
                f"its meta says {tuple(shape)}")
        if value.dtype is not dtype:
            value = self.ops.to(value, dtype)
        if not op.view and id(value) in self._taken:  # a new value, never an earlier one
            value = self.ops.view_index(value, value.shape, lambda idx: idx)
        if isinstance(value, Pointwise) and self._current is not None:
            value.origins.append(self._current)
        return value

    def extern(self, op, args, kwargs, meta) -> Any:
        """Run `op`'s NumPy kernel between kernels; its tensor inputs are realised, except
        those that are strided views of a buffer, passed as NumPy views (`View`) to an op
        that neither writes its inputs nor returns views of them nor draws random numbers
        (every registry kernel takes strided arrays: eager gives them views)."""
        if getattr(op, "inplace", False) or getattr(op, "view", False) or \
                getattr(op, "random", False):
            for a in _iter_values(args):
                if isinstance(a, Pointwise):
                    self.realize(a, "input of extern " + op.name)
            if getattr(op, "inplace", False):
                # A later view of what it writes is copied by a kernel, as before views:
                # (a view passed later would read the written values).
                self._written.update(a for a in _iter_values(args) if isinstance(a, Buffer))
        metas = meta if isinstance(meta, list) else [meta]
        strides = self._kernel_strides(op, metas)
        outs = [Buffer(self.new_name(), tuple(s), d, st) for (s, d), st in zip(metas, strides)]
        ext = Extern(op, args, kwargs, outs)
        if not (getattr(op, "inplace", False) or getattr(op, "view", False) or
                getattr(op, "random", False)):
            # Its Pointwise inputs are resolved by the scheduler (`resolve_extern_args`),
            # once it chose which values get buffers: a view of such a value is a view too.
            ext.views_allowed = True
            ext.written_before = frozenset(self._written)
        if self._current is not None:
            ext.origins.append(self._current)
            if getattr(op, "random", False):  # (a PythonCall is no registry op)
                ext.memory_order = self._draw_order(self._current, metas)
        self.computations.append(ext)
        return outs if isinstance(meta, list) else outs[0]

    def resolve_extern_args(self) -> None:
        """Give each extern's Pointwise inputs a form the wrapper can pass: a `View` where
        the value is a strided view of a buffer (none written in place before the extern),
        else a buffer of its own (a kernel computes it). Called by the scheduler once it
        realised the values it keeps (graph outputs, values read by several nodes)."""
        for c in list(self.computations):
            if isinstance(c, Extern) and getattr(c, "views_allowed", False):
                name = c.op.name
                c.args = tuple(self._extern_args(c.args, name, c.written_before))
                c.kwargs = {k: self._extern_args([v], name, c.written_before)[0]
                            for k, v in c.kwargs.items()}

    def _extern_args(self, args, why: str, written=frozenset()):
        """`args` with each Pointwise that is a strided view of a buffer as a `View` of it,
        and every other Pointwise realised (a kernel computes it into a buffer)."""
        out = []
        for a in args:
            if isinstance(a, (list, tuple)):
                out.append(type(a)(self._extern_args(a, why, written)))
            elif isinstance(a, Pointwise):
                view = None if a.buffer is not None else self.view_of(a)
                if view is None and a.buffer is None:
                    view = self._view_of_computed(a, why)
                if view is not None and view.base in written:
                    view = None
                out.append(view if view is not None else
                           self.realize(a, "input of extern " + why))
            else:
                out.append(a)
        return out

    def _view_of_computed(self, value: Pointwise, why: str) -> View | None:
        """`value`, a permutation or reshape of a computed value of as many elements (the
        transposed ReLU gradient a weight gradient's `mm` reads), as a `View` of that value
        computed into a row-major buffer: the kernel writes memory in order where computing
        `value` itself would write it transposed (a tiled transpose whose rows, 4 KiB
        apart, share cache sets), and the extern reads the view as eager's kernel reads
        eager's. None (nothing realised) where the view would not be a strided one."""
        src = value.source
        if not isinstance(src, Pointwise) or src.buffer is not None or \
                numel(src.shape) != numel(value.shape) or not numel(value.shape) or \
                self.view_of(src) is not None:
            return None
        probe = Buffer("probe", tuple(src.shape), src.dtype, contiguous_strides(src.shape))
        src.buffer = probe  # (a trial: is `value` a strided view of src's buffer?)
        try:
            strided = self.view_of(value) is not None
        finally:
            src.buffer = None
        if not strided:
            return None
        self.realize(src, f"read by extern {why} through a view")
        return self.view_of(value)

    @staticmethod
    def view_of(value: Pointwise) -> View | None:
        """`value` as a `View` of the buffer it reads, when it only reads one buffer's
        elements (no arithmetic, no cast) at a strided geometry of its current strides."""
        if not numel(value.shape):
            return None
        idx = tuple(IVar(f"x{i}") for i in range(len(value.shape)))
        e = value.body(idx)
        if not isinstance(e, Load) or e.dtype is not value.dtype or \
                isinstance(e.buffer, (ScalarInput, View)) or not isinstance(e.buffer, Buffer):
            return None
        view = View(e.buffer, tuple(value.shape), value.dtype, tuple(e.index))
        return view if view.geometry() is not None else None

    def _kernel_strides(self, op, metas) -> list:
        """The strides of each result buffer of extern `op`: eager's layout of the result
        where it is a dense permutation of the dims (flash attention's output, laid out
        (B, S, H, D) under its (B, H, S, D) shape), so the wrapper keeps the kernel's array
        as it is instead of copying it row-major; row-major otherwise."""
        out = [contiguous_strides(s) for s, _ in metas]
        if self._current is None or getattr(op, "random", False) or \
                isinstance(op, PythonCall) and not op.layout:
            return out
        from .layout import non_overlapping, storage_size

        fake = self.layouts().get(self._current)
        fakes = list(fake) if isinstance(fake, (list, tuple)) else [fake]
        if len(fakes) != len(metas):
            return out
        for i, (f, (shape, _)) in enumerate(zip(fakes, metas)):
            if not hasattr(f, "stride") or tuple(f.shape) != tuple(shape):
                continue
            try:
                st = tuple(int(x) for x in f.stride())
                dense = f.storage_offset() == 0 and non_overlapping(shape, st) and \
                    storage_size(shape, st, 0) == max(numel(shape), 1)
            except (TypeError, ValueError):  # symbolic strides
                continue
            if dense and numel(shape):
                out[i] = st
        return out

    def _draw_order(self, node, metas) -> tuple | None:
        """The order of dims in memory eager gives random op `node`'s first input, where not
        row-major and every result has its shape (dropout's mask of a transposed tensor):
        the kernel must draw in it, or the same seed gives another mask."""
        from ..._shapes import strides_order
        from .layout import non_overlapping

        first = node.args[0] if node.args else None
        if not hasattr(first, "op"):
            return None
        fake = self.layouts().get(first)
        if not hasattr(fake, "stride"):
            return None
        shape, strides = tuple(fake.shape), tuple(fake.stride())
        if any(tuple(s) != shape for s, _ in metas) or not non_overlapping(shape, strides):
            return None
        return strides_order(shape, strides)

    def realize(self, value: Pointwise, why: str) -> Buffer:
        """Compute `value` into a buffer of its own (once)."""
        if value.buffer is None:
            buf = self.add_computation(value)
            value.buffer = buf
            value.realized_because = why
        return value.buffer


def _meta(op, args, kwargs):
    """(shape, dtype) of the op's result (a list of them for several results)."""
    from ... import _fake

    def fake(x):
        if isinstance(x, ScalarInput):
            return 0.5  # a Python float (any value: its result's shape does not depend on it)
        if isinstance(x, (Buffer, Pointwise)):
            return _fake.FakeTensor._make_fake(tuple(x.shape), x.dtype)
        if isinstance(x, (list, tuple)):
            return type(x)(fake(y) for y in x)
        return x

    fargs = [fake(a) for a in args]
    if kwargs:
        spec = op.meta(*fargs, **{k: fake(v) for k, v in kwargs.items()})
    else:
        spec = op.meta(*fargs)
    if isinstance(spec, (list, tuple)):
        return [(tuple(s.shape), s.dtype) for s in spec]
    return (tuple(spec.shape), spec.dtype)


def _iter_values(args):
    for a in args:
        if isinstance(a, (list, tuple)):
            yield from _iter_values(a)
        else:
            yield a


_SIZE_ARITHMETIC = frozenset([operator.add, operator.sub, operator.mul, operator.floordiv,
                              operator.mod])


_FLOAT_ARITHMETIC = frozenset([operator.add, operator.sub, operator.mul, operator.truediv,
                               operator.floordiv, operator.mod, operator.pow, operator.neg,
                               operator.abs])


def _flatten_output(out):
    if isinstance(out, (list, tuple)):
        for o in out:
            yield from _flatten_output(o)
    else:
        yield out


__all__ = ["GraphLowering", "LoweringOps", "NotLowered", "resolve_op", "IVar", "SUPPORTED",
           "body_at", "is_tensor"]
