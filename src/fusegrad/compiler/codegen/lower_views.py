"""Lowering's views and copies: `ViewOps`, views as index arithmetic on their input (permute,
reshape, slices, ...) and copies, joins and scatters as selects on the index."""

from __future__ import annotations

from ... import _dtype
from .ir import (
    Const,
    IBin,
    IInt,
    Index,
    IVar,
    Op,
    Pointwise,
    ScalarInput,
    is_float,
    numel,
)
from .lower_pointwise import (
    SUPPORTED,
    NotLowered,
    PointwiseOps,
    _broadcast,
    _tensor_of_c_type,
    _wrap,
    body_at,
    is_tensor,
)


class ViewOps(PointwiseOps):
    """The expression builder's views, copies, joins and scatters."""

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
