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
from ...ops.registry import OpDef
from .ir import (
    Buffer,
    Const,
    Extern,
    IBin,
    IInt,
    Index,
    IVar,
    Load,
    Op,
    Pointwise,
    PythonCall,
    Reduction,
    ScalarInput,
    View,
    contiguous_strides,
    is_float,
    numel,
)


class NotLowered(Exception):
    """A lowering cannot handle these arguments: the op runs as an extern call."""


def resolve_op(target: Any) -> OpDef | None:
    """The registry entry a graph target stands for (None for anything else)."""
    for _ in range(3):
        if isinstance(target, OpDef):
            return target
        target = getattr(target, "opdef", None) or getattr(target, "op", None)
        if target is None:
            return None
    return None


class _DtypeShim:
    """What `_dtype.result_type` reads of a tensor: its dtype and its number of dims."""

    __slots__ = ("_dtype", "ndim")

    def __init__(self, dtype, ndim):
        self._dtype, self.ndim = dtype, ndim


# Dtypes the C renderer has types for; half types stay with the NumPy kernels.
SUPPORTED = {_dtype.float32, _dtype.float64, _dtype.int64, _dtype.int32, _dtype.int16,
             _dtype.int8, _dtype.uint8, _dtype.bool_}


def body_at(value: Any, index: tuple):
    """The value expression of IR tensor `value` at `index`."""
    if isinstance(value, Buffer):
        return value.load(index)
    return value.body(index)


def _broadcast(shapes) -> tuple:
    out: list = []
    for s in shapes:
        s = tuple(s)
        if len(s) > len(out):
            out = [1] * (len(s) - len(out)) + out
        for i, n in enumerate(s, len(out) - len(s)):
            if out[i] == 1:
                out[i] = n
            elif n not in (1, out[i]):
                raise NotLowered(f"shapes {shapes} do not broadcast")
    return tuple(out)


def _wrap(d: int, n: int) -> int:
    return d + n if d < 0 else d


def is_tensor(x: Any) -> bool:
    """True for an IR tensor value."""
    return isinstance(x, (Buffer, Pointwise))


class LoweringOps:
    """The expression builder lowerings use: tensor-level ops whose results are lazy IR.

    Arithmetic follows eager's dtype rules (`_dtype.result_type`); floating functions of
    integer tensors compute in the default float dtype, as eager's kernels do.
    """

    def __init__(self, graph: GraphLowering):
        self.graph = graph

    # ------------------------------------------------------------ helpers

    def dtype_of(self, x: Any):
        """The dtype of an IR value, or None for a Python number (weak)."""
        return x.dtype if is_tensor(x) else None

    def promote(self, *xs):
        """Eager's result dtype of combining `xs` (tensors and Python numbers; a float input
        of the graph is a Python float, and numbers alone compute in double, as Python)."""
        xs = [x for x in xs if x is not None]
        if any(_is_weak(x) for x in xs) and all(_is_weak(x) or not is_tensor(x) for x in xs):
            return _dtype.float64
        ops = [0.5 if _is_weak(x) else _DtypeShim(x.dtype, len(x.shape)) if is_tensor(x)
               else x for x in xs]
        return _dtype.result_type(*ops)

    def pointwise(self, name: str, *args, dtype=None, compute=None) -> Pointwise:
        """`name(args)` elementwise with broadcasting; operands are cast to `compute` (the
        promoted dtype by default) and the result has `dtype` (default: `compute`)."""
        compute = compute or self.promote(*args)
        dtype = dtype or compute
        for d in (compute, dtype, *(a.dtype for a in args if is_tensor(a))):
            if d not in SUPPORTED:  # (an operand too: a kernel would load it)
                raise NotLowered(f"dtype {d!r} has no C type")
        shape = _broadcast([a.shape for a in args if is_tensor(a)])

        def fn(index):
            operands = [self._element(a, index, shape, compute) for a in args]
            return Op(name, tuple(operands), dtype)

        out = Pointwise(shape, dtype, fn)
        if dtype is _dtype.float64 and any(_is_weak(a) for a in args) and \
                all(_is_weak(a) or not is_tensor(a) for a in args):
            out.weak = True  # arithmetic on float inputs alone: still a Python float
        return out

    def _element(self, a, index, shape, dtype):
        if not is_tensor(a):
            if isinstance(a, bool) and dtype is not _dtype.bool_:
                a = int(a)
            return Const(a, dtype)
        lead = len(shape) - len(a.shape)
        idx = tuple(IInt(0) if n == 1 and shape[lead + i] != 1 else index[lead + i]
                    for i, n in enumerate(a.shape))
        e = body_at(a, idx)
        return e if a.dtype is dtype else Op("cast", (e,), dtype)

    def to(self, x, dtype) -> Any:
        """`x` converted to `dtype` (eager's conversion: C's, booleans as `!= 0`)."""
        if is_tensor(x) and x.dtype is dtype:
            return x
        return self.pointwise("cast", x, dtype=dtype, compute=self.dtype_of(x) or dtype)

    def floating(self, x) -> Any:
        """`x`, converted to the default float dtype when it is not floating."""
        dt = self.dtype_of(x)
        if dt is None or not is_float(dt):
            return self.to(x, _dtype.defaults.float)
        return x

    def effect(self, fn, *args) -> None:
        """Call `fn(*args)` between kernels for its effect (tensors as NumPy arrays), in graph
        order: a check that raises as eager does. No value."""
        self.graph.extern(PythonCall(getattr(fn, "__name__", "call"), fn), args, {}, [])

    def call(self, fn, shape, dtype, *args):
        """Call Python function `fn(*args)` between kernels, in graph order (tensors as
        NumPy arrays); its result, a NumPy array of `shape` and `dtype`, is a buffer (the
        values of a random factory, drawn when the graph runs)."""
        return self.graph.extern(PythonCall(getattr(fn, "__name__", "call"), fn), args, {},
                                 (tuple(shape), dtype))

    def unsupported(self, why: str):
        """Give up on this node: it runs as an extern call of its NumPy kernel."""
        raise NotLowered(why)

    # ------------------------------------------------------------ arithmetic

    def add(self, a, b):
        """a + b."""
        return self.pointwise("add", a, b)

    def sub(self, a, b):
        """a - b."""
        return self.pointwise("sub", a, b)

    def mul(self, a, b):
        """a * b."""
        if not is_tensor(a) and not is_tensor(b):
            return a * b
        if not is_tensor(b) and not isinstance(b, bool) and b == 1 and is_tensor(a):
            return a
        return self.pointwise("mul", a, b)

    def clamp(self, a, lo=None, hi=None):
        """a limited to [lo, hi] (either may be None); NaN stays NaN."""
        x = self.to(a, self.promote(a, lo, hi))
        # The bound first: maximum/minimum return their second operand on a tie, and
        # PyTorch's clamp keeps x there (its zero's sign).
        if lo is not None:
            x = self.maximum(lo, x)
        if hi is not None:
            x = self.minimum(hi, x)
        return x

    def truediv(self, a, b):
        """a / b in floating point (integers convert first)."""
        dt = self.promote(a, b)
        if not is_float(dt):
            dt = _dtype.defaults.float
        return self.pointwise("truediv", a, b, compute=dt)

    def neg(self, a):
        """-a."""
        return self.pointwise("neg", a)

    def abs(self, a):
        """|a| (|-0.0| is 0.0)."""
        return self.pointwise("abs", a)

    def maximum(self, a, b):
        """The larger of a and b; NaN if either is NaN."""
        return self.pointwise("maximum", a, b)

    def minimum(self, a, b):
        """The smaller of a and b; NaN if either is NaN."""
        return self.pointwise("minimum", a, b)

    def where(self, cond, a, b):
        """cond ? a : b, with a and b promoted together."""
        dt = self.promote(a, b)
        cond = self.to(cond, _dtype.bool_)
        a, b = self.to(a, dt), self.to(b, dt)
        return self.pointwise("where", cond, a, b, dtype=dt, compute=dt)

    def compare(self, name: str, a, b):
        """One of eq ne lt le gt ge; a bool result."""
        return self.pointwise(name, a, b, dtype=_dtype.bool_)

    def logical_not(self, a):
        """not a, as bool."""
        return self.pointwise("logical_not", self.to(a, _dtype.bool_))

    # ------------------------------------------------------------ floating functions

    def unary(self, name: str, a):
        """A floating function (exp, log, sin, cos, tanh, sqrt, rsqrt, sigmoid, ...)."""
        return self.pointwise(name, self.floating(a))

    def pow_scalar(self, a, exponent):
        """a ** exponent for a Python number exponent."""
        if isinstance(exponent, bool) or not isinstance(exponent, (int, float)):
            raise NotLowered("pow with a non-number exponent")
        dt = self.promote(a, exponent)
        if exponent == 1:
            return self.to(a, dt)
        if exponent == 2:
            a = self.to(a, dt)
            return self.mul(a, a)
        if not is_float(dt):
            raise NotLowered("integer powers stay with the NumPy kernel")
        if exponent == 0.5:  # as eager (and torch): sqrt's -0.0 and -inf results
            return self.unary("sqrt", self.to(a, dt))
        if exponent == -1:
            return self.truediv(1, self.to(a, dt))
        if dt in (_dtype.float32, _dtype.float64) and exponent in (3, -2, -0.5):
            # Eager's products and divisions for these powers (ops/arithmetic.py's
            # `_PRODUCT_POWERS`, PyTorch's bits): pow(-0.0, -0.5) would be +inf, not -inf.
            a = self.to(a, dt)
            if exponent == 3:
                return self.mul(self.mul(a, a), a)
            if exponent == -2:
                return self.truediv(1, self.mul(a, a))
            return self.truediv(1, self.unary("sqrt", a))
        return self.pointwise("pow", a, float(exponent), compute=dt)

    # ------------------------------------------------------------ reductions

    def reduce(self, kind: str, x, dims=None, keepdim: bool = False, dtype=None) -> Pointwise:
        """Reduce `x` over `dims` (all when None or empty) with `kind` (sum prod max min
        argmax argmin); the result is computed by its own loop nest."""
        if not is_tensor(x):
            raise NotLowered("reduction of a number")
        nd = len(x.shape)
        if isinstance(dims, int):
            dims = (dims,)
        axes = sorted({_wrap(d, max(nd, 1)) for d in dims}) if dims else list(range(nd))
        if nd == 0:
            axes = []
        acc = dtype or x.dtype
        if kind in ("sum", "prod") and dtype is None and not is_float(x.dtype):
            acc = _dtype.int64
        if kind in ("argmax", "argmin"):
            acc = _dtype.int64
            if dims is not None and not isinstance(dims, (list, tuple)):
                dims = (dims,)
        if acc not in SUPPORTED or x.dtype not in SUPPORTED:
            raise NotLowered(f"dtype {acc!r} has no C type")
        kept = [d for d in range(nd) if d not in axes]
        out_shape = tuple(x.shape[d] for d in kept)
        red_shape = tuple(x.shape[d] for d in axes)
        value_dtype = acc if kind in ("sum", "prod") else x.dtype
        if kind in ("max", "min", "argmax", "argmin") and not numel(red_shape):
            raise NotLowered("max of nothing")  # eager raises its error

        def fn(index, rindex):
            full = [None] * nd
            for d, i in zip(kept, index):
                full[d] = i
            for d, r in zip(axes, rindex):
                full[d] = r
            e = body_at(x, tuple(full))
            return e if x.dtype is value_dtype else Op("cast", (e,), value_dtype)

        red = Reduction(out_shape, red_shape, kind, acc, fn)
        buf = self.graph.add_computation(red)
        if not keepdim:
            return buf
        shape = tuple(1 if d in axes else x.shape[d] for d in range(nd))
        return self.view_index(buf, shape, lambda idx: tuple(idx[d] for d in kept))

    def scatter(self, a, dim, index, src, accumulate: bool = False):
        """`a.scatter(dim, index, src)` (`scatter_add` with `accumulate`) as a kernel of
        its own (`scatter.py`): along the last dim, an index and source of one shape."""
        from .scatter import lower_scatter

        return lower_scatter(self.graph, a, dim, index, src, accumulate)

    def mean(self, x, dims=None, keepdim: bool = False, dtype=None):
        """The mean over `dims` (all when None or empty): a sum, then one division."""
        dt = dtype or x.dtype
        total = self.reduce("sum", x, dims, keepdim, dt)
        return self.to(self.truediv(total, self.count(x, dims)), dt)

    def var(self, x, dims=None, correction=None, keepdim: bool = False, sqrt: bool = False):
        """Variance (two passes: the mean, then the sum of squared deviations, so no
        cancellation as in E[x^2] - E[x]^2) divided by `count - correction` (1 when None);
        its square root with `sqrt`. Both reductions run in one loop nest per row."""
        return self.var_mean(x, dims, correction, keepdim, sqrt)[0]

    def var_mean(self, x, dims=None, correction=None, keepdim: bool = False,
                 sqrt: bool = False, wide: bool = False) -> tuple:
        """(var or std, mean) as `var`, the mean being its first pass. With `wide` (the
        var_mean ops), float32 and half inputs are computed in float64 and rounded once, as
        eager's (PyTorch's Welford pass) are; `var` alone stays in float32 as its kernel."""
        if not is_float(x.dtype):
            raise NotLowered("var of an integer tensor")
        if wide and x.dtype is not _dtype.float64:
            v, m = self.var_mean(self.to(x, _dtype.float64), dims, correction, keepdim, sqrt)
            return self.to(v, x.dtype), self.to(m, x.dtype)
        dims = dims if dims else None
        n = self.count(x, dims)
        if n == 0:
            raise NotLowered("var of an empty tensor")
        mean = self.truediv(self.reduce("sum", x, dims, True), n)
        d = self.sub(x, mean)
        ss = self.reduce("sum", self.mul(d, d), dims, keepdim)
        out = self.truediv(ss, max(n - (1.0 if correction is None else correction), 0))
        nd = len(x.shape)
        axes = {_wrap(a, max(nd, 1)) for a in ([dims] if isinstance(dims, int) else dims)} \
            if dims is not None else set(range(nd))
        mean = self._welford_mean(x, mean, dims, axes)
        if not keepdim:
            kept = [a for a in range(nd) if a not in axes]
            mean = self.view_index(mean, tuple(x.shape[a] for a in kept), lambda idx: tuple(
                idx[kept.index(a)] if a in kept else IInt(0) for a in range(nd)))
        return (self.unary("sqrt", out) if sqrt else out), mean

    def _welford_mean(self, x, mean, dims, axes):
        """var_mean's mean as eager's (PyTorch's Welford pass): NaN where a row holds an
        infinity anywhere but at its very end (x - x is NaN exactly for inf and NaN)."""
        z = self.sub(x, x)
        bad = self.reduce("sum", self.where(self.compare("ne", z, z), 1.0, 0.0), dims, True)
        last = self.view_index(x, mean.shape, lambda idx: tuple(
            IInt(x.shape[a] - 1) if a in axes else idx[a] for a in range(len(x.shape))))
        zl = self.sub(last, last)
        ends = self.where(self.compare("ne", zl, zl), 1.0, 0.0)  # 1 where the last is bad
        keep = self.compare("eq", bad, ends)  # no bad element, or only the last one
        return self.where(keep, mean, float("nan"))

    def softmax(self, x, dim: int, log: bool = False):
        """softmax (or log_softmax) along `dim`: max, sum of exp, then the division."""
        if not is_float(x.dtype) or not len(x.shape) or not numel(x.shape):
            raise NotLowered("softmax of a 0-d, empty or integer tensor")
        shifted = self.sub(x, self.reduce("max", x, (dim,), True))
        total = self.reduce("sum", self.unary("exp", shifted), (dim,), True)
        if log:
            return self.sub(shifted, self.unary("log", total))
        return self.truediv(self.unary("exp", shifted), total)

    def count(self, x, dims=None) -> int:
        """How many elements a reduction of `x` over `dims` combines."""
        nd = len(x.shape)
        if isinstance(dims, int):
            dims = (dims,)
        axes = {_wrap(d, max(nd, 1)) for d in dims} if dims else set(range(nd))
        return numel([x.shape[d] for d in axes if d < nd])

    # ------------------------------------------------------------ views (index arithmetic)

    def view_index(self, x, shape, remap) -> Pointwise:
        """A view of `x` with `shape` whose element at `idx` is `x`'s at `remap(idx)`."""
        out = Pointwise(tuple(shape), x.dtype, lambda idx: body_at(x, remap(idx)))
        out.source = x
        if getattr(x, "pieces", None) is not None:
            out.pieces = _view_pieces(x, tuple(shape), remap)
        return out

    def permute(self, x, dims):
        """x.permute(dims)."""
        nd = len(x.shape)
        dims = [_wrap(d, nd) for d in dims]
        inverse = [0] * nd
        for i, d in enumerate(dims):
            inverse[d] = i
        return self.view_index(x, [x.shape[d] for d in dims],
                               lambda idx: tuple(idx[inverse[d]] for d in range(nd)))

    def transpose(self, x, d0, d1):
        """x.transpose(d0, d1)."""
        nd = len(x.shape)
        if nd == 0:
            return x
        dims = list(range(nd))
        a, b = _wrap(d0, nd), _wrap(d1, nd)
        dims[a], dims[b] = dims[b], dims[a]
        return self.permute(x, dims)

    def expand(self, x, sizes):
        """x.expand(sizes) (-1 keeps a size)."""
        lead = len(sizes) - len(x.shape)
        shape = tuple(x.shape[i - lead] if s == -1 else s for i, s in enumerate(sizes))
        return self.view_index(x, shape, lambda idx: tuple(
            IInt(0) if n == 1 and shape[lead + i] != 1 else idx[lead + i]
            for i, n in enumerate(x.shape)))

    def unsqueeze(self, x, dim):
        """x.unsqueeze(dim)."""
        d = _wrap(dim, len(x.shape) + 1)
        shape = tuple(x.shape[:d]) + (1,) + tuple(x.shape[d:])
        return self.view_index(x, shape, lambda idx: tuple(idx[:d]) + tuple(idx[d + 1:]))

    def squeeze(self, x, dims=None):
        """x.squeeze(dims) (all size-1 dims when None)."""
        nd = len(x.shape)
        if isinstance(dims, int):
            dims = (dims,)
        drop = {_wrap(d, max(nd, 1)) for d in dims} if dims is not None else set(range(nd))
        drop = {d for d in drop if d < nd and x.shape[d] == 1}
        keep = [d for d in range(nd) if d not in drop]

        def remap(idx):
            it = iter(idx)
            return tuple(IInt(0) if d in drop else next(it) for d in range(nd))

        return self.view_index(x, [x.shape[d] for d in keep], remap)

    def reshape(self, x, sizes):
        """x.view(sizes): dims are matched in groups of equal products, so only groups that
        merge or split dims need division and remainder."""
        total = numel(x.shape)
        sizes = list(sizes)
        if -1 in sizes:
            known = numel([s for s in sizes if s != -1])
            sizes[sizes.index(-1)] = total // known if known else 0
        old, new = list(x.shape), sizes
        if numel(new) != total or total == 0:
            raise NotLowered("reshape of an empty tensor")
        groups = []  # (old dims, new dims)
        i = j = 0
        while i < len(old) or j < len(new):
            gi, gj = [i] if i < len(old) else [], [j] if j < len(new) else []
            po = old[i] if gi else 1
            pn = new[j] if gj else 1
            i, j = i + bool(gi), j + bool(gj)
            while po != pn:
                if po < pn:
                    gi.append(i)
                    po *= old[i]
                    i += 1
                else:
                    gj.append(j)
                    pn *= new[j]
                    j += 1
            groups.append((gi, gj))

        def remap(idx):
            out = [IInt(0)] * len(old)
            for gi, gj in groups:
                flat = IInt(0)
                for d in gj:
                    flat = flat * IInt(new[d]) + idx[d]
                for d in reversed(gi):
                    out[d] = flat % IInt(old[d]) if d != gi[0] else flat
                    flat = flat // IInt(old[d])
            return tuple(out)

        return self.view_index(x, new, remap)

    def select(self, x, dim, index):
        """x.select(dim, index)."""
        nd = len(x.shape)
        d = _wrap(dim, nd)
        i = index + x.shape[d] if index < 0 else index
        shape = tuple(x.shape[:d]) + tuple(x.shape[d + 1:])
        return self.view_index(x, shape,
                               lambda idx: tuple(idx[:d]) + (IInt(i),) + tuple(idx[d:]))

    def slice(self, x, dim=0, start=None, end=None, step=1):
        """x[start:end:step] along dim."""
        nd = len(x.shape)
        d = _wrap(dim, nd)
        start, end, step = slice(start, end, step).indices(x.shape[d])
        n = max(0, (end - start + step - 1) // step)
        shape = tuple(x.shape[:d]) + (n,) + tuple(x.shape[d + 1:])
        return self.view_index(x, shape, lambda idx: tuple(idx[:d]) + (
            IInt(start) + idx[d] * IInt(step),) + tuple(idx[d + 1:]))

    # ------------------------------------------------------------ copies, joins, scatters
    # Selects between tensors by where an element is (`Index` values compared in the
    # kernel); every load is of an index kept in bounds (`IExpr.clip`), since both sides of
    # a select are read.

    def copy(self, x):
        """A new tensor holding `x`'s elements (clone; an output gets eager's layout)."""
        _tensor_of_c_type(x)
        return Pointwise(tuple(x.shape), x.dtype, lambda idx: body_at(x, tuple(idx)))

    def copy_into(self, dst, src):
        """The value `dst.copy_(src)` leaves in `dst`: `src` broadcast to `dst`'s shape and
        converted to its dtype (lowered only where nothing else reads `dst`)."""
        _tensor_of_c_type(dst)
        _tensor_of_c_type(src)
        if len(src.shape) > len(dst.shape):
            raise NotLowered("copy_ from a tensor of more dims")
        return self.to(self.expand(src, tuple(dst.shape)), dst.dtype)

    def masked_fill(self, x, mask, value):
        """x with `value` where `mask` (broadcast to x's shape) is True; `value` a number or
        a 0-d tensor, converted to x's dtype as eager converts it."""
        _tensor_of_c_type(x)
        _tensor_of_c_type(mask)
        if mask.dtype is not _dtype.bool_ or len(mask.shape) > len(x.shape) or \
                _broadcast([x.shape, mask.shape]) != tuple(x.shape):
            raise NotLowered("masked_fill's mask is no bool of x's shape")
        if is_tensor(value):
            if isinstance(value, ScalarInput) or tuple(value.shape) != ():
                raise NotLowered("masked_fill with a float input or a tensor value")
            _tensor_of_c_type(value)
            fill = self.to(value, x.dtype)
        else:
            fill = _fill_number(value, x.dtype)
        return self.where(mask, fill, x)

    def cat(self, tensors, dim: int = 0):
        """torch.cat: each element read from the tensor whose rows along `dim` hold it (a
        chain of selects on the index; 1-d empty tensors are skipped, as eager does)."""
        tensors = list(tensors)
        for t in tensors:
            _tensor_of_c_type(t)
        parts = [t for t in tensors if tuple(t.shape) != (0,)]
        if not parts or not parts[0].shape or len(parts) > _MAX_CAT:
            raise NotLowered("cat of 0-d or only empty tensors, or of many tensors")
        dt = self.promote(*tensors)
        if dt not in SUPPORTED:
            raise NotLowered(f"dtype {dt!r} has no C type")
        nd = len(parts[0].shape)
        d = _wrap(dim, nd)
        if any(len(t.shape) != nd or tuple(t.shape[:d]) + tuple(t.shape[d + 1:]) !=
               tuple(parts[0].shape[:d]) + tuple(parts[0].shape[d + 1:]) for t in parts):
            raise NotLowered("cat of tensors whose shapes differ")
        shape = list(parts[0].shape)
        shape[d] = sum(int(t.shape[d]) for t in parts)
        parts = [t for t in parts if t.shape[d]]
        offsets, total = [], 0
        for t in parts:
            offsets.append(total)
            total += int(t.shape[d])
        if not parts:
            return Pointwise(tuple(shape), dt, lambda idx: Const(0, dt))

        def fn(idx):
            xd, out = idx[d], None
            for k in reversed(range(len(parts))):
                t, o, n = parts[k], offsets[k], int(parts[k].shape[d])
                i = xd + IInt(-o) if o else xd
                if o:
                    i = IBin("max", i, IInt(0))
                if o + n < total:
                    i = IBin("min", i, IInt(n - 1))
                v = body_at(t, tuple(idx[:d]) + (i,) + tuple(idx[d + 1:]))
                v = v if t.dtype is dt else Op("cast", (v,), dt)
                if out is None:
                    out = v
                else:
                    cond = Op("lt", (Index(xd), Index(IInt(offsets[k + 1]))), _dtype.bool_)
                    out = Op("where", (cond, v, out), dt)
            return out

        def piece(t):
            def piece_fn(idx):
                v = body_at(t, tuple(idx))
                return v if t.dtype is dt else Op("cast", (v,), dt)
            return piece_fn

        out = Pointwise(tuple(shape), dt, fn)
        out.pieces = (d, tuple((o, int(t.shape[d]), piece(t)) for o, t in zip(offsets, parts)))
        return out

    def select_scatter(self, x, src, dim, index):
        """x with `src` written at `index` along `dim`."""
        _tensor_of_c_type(x)
        _tensor_of_c_type(src)
        nd = len(x.shape)
        if not nd:
            raise NotLowered("select_scatter of a 0-d tensor")
        d = _wrap(dim, nd)
        i = index + x.shape[d] if index < 0 else index
        if src.dtype is not x.dtype or not 0 <= i < x.shape[d] or \
                tuple(src.shape) != tuple(x.shape[:d]) + tuple(x.shape[d + 1:]):
            raise NotLowered("select_scatter of another dtype or shape")

        def fn(idx):
            cond = Op("eq", (Index(idx[d]), Index(IInt(i))), _dtype.bool_)
            a = body_at(src, tuple(idx[:d]) + tuple(idx[d + 1:]))
            return Op("where", (cond, a, body_at(x, tuple(idx))), x.dtype)

        return Pointwise(tuple(x.shape), x.dtype, fn)

    def slice_scatter(self, x, src, dim=0, start=None, end=None, step=1):
        """x with `src` written at x[start:end:step] along `dim`."""
        _tensor_of_c_type(x)
        _tensor_of_c_type(src)
        nd = len(x.shape)
        if not nd or not isinstance(step, int) or step < 1:
            raise NotLowered("slice_scatter of a 0-d tensor or with a step below 1")
        d = _wrap(dim, nd)
        if d == nd - 1 and x.shape[d] > 1:
            # Selecting along the innermost loop reads through clamped, non-affine addresses
            # that gcc does not vectorise: measured 2-3x slower than the NumPy kernel (along
            # an outer dim the generated kernel is faster), so that case stays an extern.
            raise NotLowered("slice_scatter along the innermost dim")
        start, end, step = slice(start, end, step).indices(x.shape[d])
        n = len(range(start, end, step))
        want = tuple(x.shape[:d]) + (n,) + tuple(x.shape[d + 1:])
        if src.dtype is not x.dtype or tuple(src.shape) != want:
            raise NotLowered("slice_scatter of another dtype or shape")
        if not n:
            return self.copy(x)
        stop = start + (n - 1) * step + 1

        def fn(idx):
            xd = idx[d]
            rel = IBin("max", xd + IInt(-start), IInt(0)) if start else xd
            k = IBin("min", rel // IInt(step), IInt(n - 1))
            a = body_at(src, tuple(idx[:d]) + (k,) + tuple(idx[d + 1:]))
            cond = Op("lt", (Index(xd), Index(IInt(stop))), _dtype.bool_)
            if start:
                cond = Op("mul", (Op("ge", (Index(xd), Index(IInt(start))), _dtype.bool_),
                                  cond), _dtype.bool_)
            if step > 1:
                on = Op("eq", (Index(rel % IInt(step)), Index(IInt(0))), _dtype.bool_)
                cond = Op("mul", (cond, on), _dtype.bool_)
            return Op("where", (cond, a, body_at(x, tuple(idx))), x.dtype)

        return Pointwise(tuple(x.shape), x.dtype, fn)

    def repeat(self, x, repeats):
        """x.repeat(repeats): each output index reads x at its remainder by x's size."""
        _tensor_of_c_type(x)
        repeats = [int(r) for r in repeats]
        lead = len(repeats) - len(x.shape)
        if lead < 0 or any(r < 0 for r in repeats):
            raise NotLowered("repeat with fewer repeats than dims or a negative one")
        sizes = [int(s) for s in x.shape]
        if sizes and sizes[-1] > 1 and repeats[-1] > 1:
            # A remainder in the innermost loop stops gcc vectorising it: measured 2x slower
            # than the NumPy kernel (repeats of outer dims are 2x faster), so it stays extern.
            raise NotLowered("repeat of the innermost dim")
        shape = tuple(repeats[:lead]) + tuple(r * s for r, s in zip(repeats[lead:], sizes))

        def remap(idx):
            out = []
            for j, s in enumerate(sizes):
                i = idx[lead + j]
                out.append(IInt(0) if s <= 1 else i if repeats[lead + j] == 1 else
                           i % IInt(s))
            return tuple(out)

        return self.view_index(x, shape, remap)

    def bitwise(self, name: str, *args):
        """bitwise_not / bitwise_and / bitwise_or / bitwise_xor of integer or bool values."""
        dt = self.promote(*args)
        if dt is None or is_float(dt) or dt not in SUPPORTED:
            raise NotLowered("bitwise op of floating values")
        return self.pointwise(name, *args, compute=dt)

    def float_class(self, kind: str, x):
        """isnan / isinf / isfinite (`kind`): an integer or bool tensor is never NaN or
        infinite."""
        _tensor_of_c_type(x)
        if kind == "isnan":
            return self.compare("ne", x, x)
        if not is_float(x.dtype):
            return self.compare("eq" if kind == "isfinite" else "ne", x, x)
        return self.compare("lt" if kind == "isfinite" else "eq", self.abs(x), float("inf"))


# At most this many tensors are joined by one chain of selects; more run as the extern.
_MAX_CAT = 16


def _uses(e, name: str) -> bool:
    """Whether index expression `e` reads loop variable `name`."""
    if isinstance(e, IVar):
        return e.name == name
    return isinstance(e, IBin) and (_uses(e.a, name) or _uses(e.b, name))


def _view_pieces(x: Pointwise, shape: tuple, remap) -> tuple | None:
    """`x.pieces` for a view of `x` (`remap` from the view's index to `x`'s) where one dim
    of the view is `x`'s pieced dim unchanged (the (B*S, 3C) view of a cat of (B, S, C)
    tensors along its last dim), else None. A piece reads `x`'s buffer once `x` has one."""
    d, parts = x.pieces
    idx = tuple(IVar(f"x{i}") for i in range(len(shape)))
    mapped = remap(idx)
    j = next((i for i, v in enumerate(idx) if mapped[d] == v), None)
    if j is None or int(shape[j]) != int(x.shape[d]) or any(
            _uses(e, idx[j].name) for k, e in enumerate(mapped) if k != d):
        return None

    def piece(start, fn):
        def piece_fn(i):
            if x.buffer is None:
                return fn(remap(tuple(i)))
            at = list(i)
            at[j] = IInt(start) + at[j]
            return x.buffer.load(remap(tuple(at)))
        return piece_fn

    return j, tuple((o, n, piece(o, fn)) for o, n, fn in parts)


def _tensor_of_c_type(x) -> None:
    """Raise NotLowered unless `x` is an IR tensor of a dtype the C renderer has."""
    if not is_tensor(x) or x.dtype not in SUPPORTED:
        raise NotLowered("a number, or a dtype with no C type")


def _fill_number(value, dtype):
    """Python number `value` converted as eager converts it to `dtype` (a Python number of
    the kind `dtype` promotes with to `dtype`: an integer in range, a float truncated, a
    float32 in range); NotLowered where eager raises its overflow error or the value is no
    real number."""
    import math

    import numpy as np

    if isinstance(value, bool) or dtype is _dtype.bool_:
        if not isinstance(value, (bool, int, float)):
            raise NotLowered("a fill value that is no real number")
        return bool(value)
    if not isinstance(value, (int, float)):
        raise NotLowered("a fill value that is no real number")
    if is_float(dtype):
        if dtype is _dtype.float32 and math.isfinite(value) and \
                abs(value) > float(np.finfo(np.float32).max):
            raise NotLowered("overflow: eager raises")
        return float(value)
    if not math.isfinite(value):
        raise NotLowered("a non-finite fill of an integer tensor")
    info = np.iinfo(dtype.np)
    if not info.min <= int(value) <= info.max:
        raise NotLowered("overflow: eager raises")
    return int(value)


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
                isinstance(op, PythonCall):
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


def _is_weak(x) -> bool:
    """A float input of the graph, or arithmetic on such inputs alone (a Python float)."""
    return getattr(x, "weak", False)


def _flatten_output(out):
    if isinstance(out, (list, tuple)):
        for o in out:
            yield from _flatten_output(o)
    else:
        yield out


__all__ = ["GraphLowering", "LoweringOps", "NotLowered", "resolve_op", "IVar"]
