"""More registry `onnx` entries: data-dependent results (nonzero, masked_select, unique,
index_put), order statistics (kthvalue, median), searches (searchsorted, bucketize, isin,
histc), scans (cumprod) and pointwise math, losses and matrix builders without one ONNX
operator of their own.

Loaded with `_onnx_mappings` (which re-exports `__all__`), so the op modules name these
functions as `ox.<name>` like the others. Entries of `_onnx_mappings` used here are read
through `_onnx` when a mapping runs (`ox.vector_norm`), not imported, so the two modules do
not import each other. Each entry uses ONNX standard operators only and is written to agree
with the op's kernel to floating-point rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _onnx as ox

__all__ = [
    "nonzero", "masked_select", "masked_scatter", "index_put", "take", "cumprod",
    "var_mean", "threshold", "search_sorted", "bucketize", "unique2", "kthvalue",
    "median_all", "median_dim", "erfinv", "hypot", "linalg_cross", "pdist", "aminmax",
    "count_nonzero", "histc", "heaviside", "isin", "trace", "diag_embed", "block_diag",
    "xlogy", "sinc", "angle_scale", "multi_margin_loss", "legacy_norm", "huber_loss",
    "shrink",
]

I64 = np.dtype(np.int64)
BOOL = np.dtype(np.bool_)


def _arg(args: Any, i: int, default: Any) -> Any:
    """Positional argument `i`, or `default` when the call left it out."""
    return args[i] if i < len(args) else default


def _norm_dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


def _flat(b, x, dtype: Any = None):
    """`x` as a 1-D vector."""
    return b.emit("Reshape", [x, b.ints([-1])], dtype=dtype or b.dtype_of(x), rank=1)


def _broadcast_pair(b, x, mask, same: bool):
    """`x` and boolean `mask` broadcast to their common shape (Where broadcasts all three of
    its operands), read at run time; nothing to do when their shapes are equal."""
    m = b.cast(mask, np.bool_)
    if same:
        return x, m
    xb = b.emit("Where", [m, x, x], dtype=b.dtype_of(x))
    return xb, b.emit("Expand", [m, b.shape(xb)], dtype=BOOL)


# ---------------------------------------------------------------------- data-dependent shapes


def nonzero(b, inputs, args, kwargs, opset):
    """nonzero(self): NonZero, transposed to (count, rank) as PyTorch's export writes it; a
    0-d input as a 1-element vector, its one column dropped ((count, 0))."""
    x, rank = inputs[0], args[0].dim()
    if rank == 0:
        x = b.unsqueeze(x, [0])
    where = b.emit("NonZero", [x], dtype=I64, rank=2)
    out = b.emit("Transpose", [where], dtype=I64, rank=2, perm=[1, 0])
    if rank == 0:
        out = b.emit("Slice", [out, b.ints([0]), b.ints([0]), b.ints([1])], dtype=I64,
                     rank=2)
    return out


def masked_select(b, inputs, args, kwargs, opset):
    """masked_select(self, mask): the two broadcast together and flattened, then Compress
    (the elements where the mask is true, in row-major order)."""
    same = tuple(args[0].shape) == tuple(args[1].shape)
    x, m = _broadcast_pair(b, b.cast(inputs[0], b.out_dtype), inputs[1], same)
    return b.emit("Compress", [_flat(b, x), _flat(b, m, BOOL)], axis=0)


def masked_scatter(b, inputs, args, kwargs, opset):
    """masked_scatter(self, mask, source): the k-th true position of the (broadcast) mask
    takes the k-th element of the flattened source: a CumSum of the mask gives k, Gather
    reads it, Where keeps self elsewhere."""
    dtype = b.out_dtype
    same = tuple(args[0].shape) == tuple(args[1].shape)
    x, m = _broadcast_pair(b, b.cast(inputs[0], dtype), inputs[1], same)
    mf = _flat(b, m, BOOL)
    k = b.emit("CumSum", [b.cast(mf, np.int64), b.const(np.asarray(0, np.int64))],
               dtype=I64, rank=1)
    k = b.emit("Max", [b.emit("Sub", [k, b.operand(1, I64)], dtype=I64, rank=1),
                       b.operand(0, I64)], dtype=I64, rank=1)
    src = _flat(b, b.cast(inputs[2], dtype))
    picked = b.emit("Gather", [src, k], rank=1, axis=0)
    out = b.emit("Where", [mf, picked, _flat(b, x)], rank=1)
    return b.emit("Reshape", [out, b.shape(x)])


def take(b, inputs, args, kwargs, opset):
    """take(self, index): Gather on the flattened input (negative indices count from its
    end, as Gather's do)."""
    return b.emit("Gather", [_flat(b, inputs[0]), b.cast(inputs[1], np.int64)], axis=0)


def index_put(b, inputs, args, kwargs, opset):
    """index_put(self, indices, values, accumulate=False): ScatterND (reduction add when
    accumulating, from opset 16) on self with its indexed dims moved first. A boolean mask
    stands for the rows of its NonZero; the integer indices are broadcast together at run
    time (each plus zeros of the others) and made non-negative; the values are broadcast to
    the shape `self[indices]` has, then laid out as ScatterND reads them."""
    dtype = b.out_dtype
    x, rank = b.cast(inputs[0], dtype), args[0].dim()
    accumulate = bool(_arg(args, 3, False))
    if accumulate and opset < 16:
        b.fail("with accumulate=True before opset 16")
    raw, idx = list(args[1]), [b.const(i) if isinstance(i, np.ndarray) else i
                               for i in inputs[1]]
    per_dim: list = []  # (dim, int64 index value, example shape)
    d = 0
    for t, v in zip(raw, idx):
        if t is None:
            d += 1
            continue
        if b.dtype_of(v) == np.bool_:
            k = t.dim()
            count = int(np.count_nonzero(np.asarray(t._data)))
            where = b.emit("NonZero", [v], dtype=I64, rank=2)
            for j in range(k):
                row = b.emit("Gather", [where, b.const(np.asarray(j, np.int64))], dtype=I64,
                             rank=1, axis=0)
                per_dim.append((d + j, row, (count,)))
            d += k
        else:
            per_dim.append((d, b.cast(v, np.int64), tuple(int(n) for n in t.shape)))
            d += 1
    if not per_dim:
        b.fail("without index tensors")
    pos = [p for p, _, _ in per_dim]
    nb = len(np.broadcast_shapes(*[s for _, _, s in per_dim]))
    # non-negative indices (dim size + i for i < 0)
    fixed = []
    for p, v, shape in per_dim:
        n, r = b.shape(x, p, p + 1), len(shape)
        if r == 0:  # (a 0-d index: Add with the 1-element size would make it 1-D)
            n = b.squeeze(n, [0])
        fixed.append(b.emit("Mod", [b.emit("Add", [v, n], dtype=I64, rank=r), n], dtype=I64,
                            rank=r, fmod=0))
    if len(fixed) > 1:
        zeros = None
        for v in fixed:
            z = b.emit("Mul", [v, b.operand(0, I64)], dtype=I64)
            zeros = z if zeros is None else b.emit("Add", [zeros, z], dtype=I64)
        fixed = [b.emit("Add", [v, zeros], dtype=I64, rank=nb) for v in fixed]
    stacked = b.emit("Concat", [b.unsqueeze(v, [nb]) for v in fixed], dtype=I64,
                     rank=nb + 1, axis=nb)
    rest = [i for i in range(rank) if i not in pos]
    perm = pos + rest
    moved = x if perm == list(range(rank)) else b.emit("Transpose", [x], perm=perm)
    lead = pos[0]
    adjacent = pos == list(range(lead, lead + len(pos)))
    bshape = b.shape(stacked, 0, nb)
    if adjacent:
        parts = [b.shape(x, 0, lead), bshape, b.shape(x, lead + len(pos))]
        lead_dims = lead
    else:
        parts = [bshape] + [b.shape(x, r, r + 1) for r in rest]
        lead_dims = 0
    target = b.op("Concat", [p for p in parts], I64, 1, is_shape=True, axis=0)
    values = b.emit("Expand", [b.operand(inputs[2], dtype), target], rank=nb + len(rest))
    if lead_dims:  # the broadcast dims to the front, as the moved input has them
        vperm = (list(range(lead_dims, lead_dims + nb)) + list(range(lead_dims))
                 + list(range(lead_dims + nb, nb + len(rest))))
        values = b.emit("Transpose", [values], rank=nb + len(rest), perm=vperm)
    attrs = {"reduction": "add"} if accumulate else {}
    out = b.emit("ScatterND", [moved, stacked, values], **attrs)
    if perm != list(range(rank)):
        out = b.emit("Transpose", [out], perm=[perm.index(i) for i in range(rank)])
    return out


def unique2(b, inputs, args, kwargs, opset):
    """_unique2(self, sorted, return_inverse, return_counts): Unique (sorted, as the kernel
    always is) of the flattened input; the inverse in the input's shape; outputs not asked
    for are empty int64 vectors, as the op's are."""
    x = inputs[0]
    flat = _flat(b, x)
    if b.dtype_of(flat) in (np.dtype(np.int32), np.dtype(np.int16), np.dtype(np.uint8),
                            BOOL):
        flat = b.cast(flat, np.int64)  # (Unique takes float, double, int64, int8, string)
    y, _, inverse, counts = b.emit("Unique", [flat], dtype=b.dtype_of(flat), rank=1, n_out=4,
                                   sorted=1)
    inverse.dtype = counts.dtype = I64
    y = b.cast(y, b.out_dtype)
    empty = b.const(np.zeros(0, np.int64))
    inv = empty
    if bool(_arg(args, 2, False)):
        inv = b.emit("Reshape", [inverse, b.shape(x)], dtype=I64, rank=args[0].dim())
    return [y, inv, counts if bool(_arg(args, 3, False)) else empty]


# ---------------------------------------------------------------------- order statistics


def _kth_smallest(b, x, k: int, d: int, keep: bool, rank: int, dtype):
    """The k-th smallest (1-based) along dim `d` and its index: TopK of the k smallest
    (sorted), then its last entry."""
    xn = b.cast(x, np.int32) if b.dtype_of(x) == np.bool_ else x
    values, index = b.op("TopK", [xn, b.ints([k])], b.dtype_of(xn), rank,
                         name=b.origin.split(".")[0], n_out=2, axis=d, largest=0, sorted=1)
    index.dtype = I64
    out = []
    for v in (values, index):
        v = b.emit("Slice", [v, b.ints([k - 1]), b.ints([k]), b.ints([d])], dtype=v.dtype,
                   rank=rank)
        out.append(v if keep else b.squeeze(v, [d]))
    return [b.cast(out[0], dtype), out[1]]


def _nan_first(b, x, d: int | None, keep: bool, rank: int, outs: list) -> list:
    """`outs` (a value and, optionally, its index along `d`; None: over every element) with
    NaN where `x` has one, and the index of its first NaN: as median and aminmax propagate
    NaN (TopK and the Reduce ops of ONNX Runtime skip it)."""
    if b.dtype_of(x).kind != "f":
        return outs
    axes = list(range(rank)) if d is None else [d]
    nan = b.cast(b.emit("IsNaN", [x], dtype=BOOL, rank=rank), np.int64)
    found = b.cast(b.reduce("ReduceMax", nan, axes, keep, I64, b.out_rank), np.bool_)
    value = b.emit("Where", [found, b.operand(math.nan, b.dtype_of(outs[0])), outs[0]],
                   dtype=b.dtype_of(outs[0]), rank=b.out_rank)
    if len(outs) == 1:
        return [value]
    first = b.emit("ArgMax", [nan], dtype=I64, rank=b.out_rank, axis=d, keepdims=int(keep))
    return [value, b.emit("Where", [found, first, outs[1]], dtype=I64, rank=b.out_rank)]


def kthvalue(b, inputs, args, kwargs, opset):
    """kthvalue(self, k, dim=-1, keepdim=False): the k-th smallest and its index."""
    x, rank = inputs[0], args[0].dim()
    if rank == 0:
        return [x, b.const(np.zeros((), np.int64))]
    d = _norm_dim(int(_arg(args, 2, -1)), rank)
    return _kth_smallest(b, x, int(args[1]), d, bool(_arg(args, 3, False)), rank,
                         b.out_dtype)


def median_dim(b, inputs, args, kwargs, opset):
    """median.dim(self, dim, keepdim=False): the lower median ((n + 1) // 2-th smallest)
    and its index."""
    x, rank = inputs[0], args[0].dim()
    if rank == 0:
        return [x, b.const(np.zeros((), np.int64))]
    d = _norm_dim(int(args[1]), rank)
    n, keep = int(args[0].shape[d]), bool(_arg(args, 2, False))
    outs = _kth_smallest(b, x, (n + 1) // 2, d, keep, rank, b.out_dtype)
    return _nan_first(b, x, d, keep, rank, outs)


def median_all(b, inputs, args, kwargs, opset):
    """median(self): the lower median of every element."""
    if args[0].dim() == 0:
        return inputs[0]
    n = int(np.prod(args[0].shape))
    flat = _flat(b, inputs[0])
    outs = _kth_smallest(b, flat, (n + 1) // 2, 0, False, 1, b.out_dtype)[:1]
    return _nan_first(b, flat, 0, False, 1, outs)[0]


def aminmax(b, inputs, args, kwargs, opset):
    """aminmax(self, *, dim=None, keepdim=False): ReduceMin and ReduceMax (over every dim,
    or one)."""
    x, rank = inputs[0], args[0].dim()
    if rank == 0:
        return [x, x]
    dim, keep = _arg(args, 1, None), bool(_arg(args, 2, False))
    axes = list(range(rank)) if dim is None else [_norm_dim(int(dim), rank)]
    xn = b.cast(x, np.int32) if b.dtype_of(x) == np.bool_ else x
    return [_nan_first(b, x, None if dim is None else axes[0], keep, rank, [
        b.cast(b.reduce(op, xn, axes, keep, b.dtype_of(xn), b.out_rank), b.out_dtype)])[0]
        for op in ("ReduceMin", "ReduceMax")]


def var_mean(sqrt: bool) -> Callable:
    """var_mean/std_mean.correction(self, dim=None, correction=None, keepdim=False): the
    variance (or standard deviation) mapping, and ReduceMean over the same dims."""

    def mapping(b, inputs, args, kwargs, opset):
        spread = ox.variance(sqrt)(b, inputs, args, kwargs, opset)
        x, rank = b.cast(inputs[0], b.out_dtype), args[0].dim()
        if rank == 0:
            return [spread, x]
        dims = ox._reduce_dims(args, 1, rank)
        mean = b.reduce("ReduceMean", x, dims, bool(_arg(args, 3, False)), b.out_dtype,
                        b.out_rank)
        return [spread, mean]

    mapping.__doc__ = f"{'std' if sqrt else 'var'} and mean."
    return mapping


# ---------------------------------------------------------------------- searches and counts


def _count_below(b, seq, v, right: bool, seq_rank: int):
    """How many entries of sorted `seq` (along its last dim) are below `v` (at or below
    when `right`): where a binary search would insert v."""
    s = ox._unsqueeze(b, seq, [-2]) if seq_rank > 1 else seq
    # not (s >= v): a NaN value is above every entry, as in the kernel's binary search
    above = b.emit("Greater" if right else "GreaterOrEqual", [s, ox._unsqueeze(b, v, [-1])],
                   dtype=BOOL)
    hit = b.emit("Not", [above], dtype=BOOL)
    return b.reduce("ReduceSum", b.cast(hit, np.int64), [-1], False, I64, b.out_rank)


def _common(b, args, inputs, i: int, j: int):
    from .. import _dtype

    dtype = np.dtype(_dtype.result_type(args[i], args[j]).np)
    return b.operand(inputs[i], dtype), b.operand(inputs[j], dtype)


def search_sorted(b, inputs, args, kwargs, opset):
    """searchsorted.Tensor(sorted_sequence, self, out_int32=False, right=False, side=None,
    sorter=None): the count of sequence entries below each value (at or below for the right
    side), the sequence first reordered by `sorter`."""
    seq, v = _common(b, args, inputs, 0, 1)
    right = bool(_arg(args, 3, False)) or _arg(args, 4, None) == "right"
    sorter = _arg(inputs, 5, None)
    if sorter is not None:
        seq = b.emit("GatherElements", [seq, b.cast(sorter, np.int64)], dtype=b.dtype_of(seq),
                     rank=args[0].dim(), axis=-1)
    return b.cast(_count_below(b, seq, v, right, args[0].dim()), b.out_dtype)


def bucketize(b, inputs, args, kwargs, opset):
    """bucketize.Tensor(self, boundaries, out_int32=False, right=False): the count of
    boundaries below each value (at or below when `right`)."""
    v, seq = _common(b, args, inputs, 0, 1)
    return b.cast(_count_below(b, seq, v, bool(_arg(args, 3, False)), 1), b.out_dtype)


def isin(b, inputs, args, kwargs, opset):
    """isin.Tensor_Tensor(elements, test_elements, assume_unique=False, invert=False):
    whether each element equals any test element (their count, so that no test elements
    gives False)."""
    e, t = _common(b, args, inputs, 0, 1)
    eq = b.emit("Equal", [ox._unsqueeze(b, e, [-1]), _flat(b, t)], dtype=BOOL)
    count = b.reduce("ReduceSum", b.cast(eq, np.int64), [-1], False, I64, b.out_rank)
    hit = b.emit("Greater", [count, b.operand(0, I64)], dtype=BOOL)
    return b.emit("Not", [hit], dtype=BOOL) if bool(_arg(args, 3, False)) else hit


def count_nonzero(b, inputs, args, kwargs, opset):
    """count_nonzero(self, dim=None) and count_nonzero.dim_IntList(self, dims): ReduceSum
    of the non-zero elements (NaN counts) as int64."""
    x, rank = inputs[0], args[0].dim()
    nz = b.cast(ox._truthy(b, x), np.int64)
    dims = _arg(args, 1, None)
    if rank == 0:
        return nz
    if dims is None or (isinstance(dims, (list, tuple)) and not dims):
        axes = list(range(rank))
    else:
        axes = sorted({_norm_dim(int(d), rank) for d in ox.ints(dims, 1)})
    return b.reduce("ReduceSum", nz, axes, False, I64, b.out_rank)


def histc(b, inputs, args, kwargs, opset):
    """histc(self, bins=100, min=0, max=0): NumPy's histogram, as the kernel computes it: in
    float64, an element's bin is the number of inner edges (k (max - min) / bins + min, the
    kernel's linspace) at or below it; elements outside [min, max] are not counted. With
    min = max the range is the data's (widened by 1 on each side when they are equal)."""
    bins = int(_arg(args, 1, 100))
    lo, hi = float(_arg(args, 2, 0)), float(_arg(args, 3, 0))
    f64 = np.dtype(np.float64)
    x = b.cast(_flat(b, inputs[0]), f64)
    if lo != hi:
        edges = np.linspace(lo, hi, bins + 1)
        lo_v, hi_v = b.const(np.asarray(lo)), b.const(np.asarray(hi))
        inner = b.const(edges[1:-1])
    else:  # the data's range, at run time
        lo_v = b.cast(b.reduce("ReduceMin", inputs[0], None, False, b.dtype_of(inputs[0]), 0),
                      f64)
        hi_v = b.cast(b.reduce("ReduceMax", inputs[0], None, False, b.dtype_of(inputs[0]), 0),
                      f64)
        equal = b.emit("Equal", [lo_v, hi_v], dtype=BOOL, rank=0)
        one = b.operand(1.0, f64)
        lo_v = b.emit("Where", [equal, b.emit("Sub", [lo_v, one], dtype=f64, rank=0), lo_v],
                      dtype=f64, rank=0)
        hi_v = b.emit("Where", [equal, b.emit("Add", [hi_v, one], dtype=f64, rank=0), hi_v],
                      dtype=f64, rank=0)
        step = b.emit("Div", [b.emit("Sub", [hi_v, lo_v], dtype=f64, rank=0),
                              b.operand(float(bins), f64)], dtype=f64, rank=0)
        k = b.const(np.arange(1, bins, dtype=np.float64))
        inner = b.emit("Add", [b.emit("Mul", [k, step], dtype=f64, rank=1), lo_v], dtype=f64,
                       rank=1)
    xe = b.unsqueeze(x, [1])
    above = b.emit("GreaterOrEqual", [xe, b.unsqueeze(inner, [0]) if not b.is_const(inner)
                                      else b.const(inner.array[None])], dtype=BOOL, rank=2)
    index = b.reduce("ReduceSum", b.cast(above, np.int64), [1], True, I64, 2)
    inside = b.emit("And", [b.emit("GreaterOrEqual", [x, lo_v], dtype=BOOL, rank=1),
                            b.emit("LessOrEqual", [x, hi_v], dtype=BOOL, rank=1)],
                    dtype=BOOL, rank=1)
    hit = b.emit("And", [b.emit("Equal", [index, b.const(np.arange(bins, dtype=np.int64)[None])],
                                dtype=BOOL, rank=2), b.unsqueeze(inside, [1])],
                 dtype=BOOL, rank=2)
    counts = b.reduce("ReduceSum", b.cast(hit, np.int64), [0], False, I64, 1)
    return b.cast(counts, b.out_dtype)


# ---------------------------------------------------------------------- scans and matrices


def cumprod(b, inputs, args, kwargs, opset):
    """cumprod(self, dim, dtype=None): a log-depth scan (ONNX has no CumProd): ceil(log2 n)
    steps, each multiplying by the running products shifted by 1, 2, 4, ... along the dim
    (Pad with ones, then Slice back to n). n is the example's size of the dim."""
    x = b.cast(inputs[0], b.out_dtype)
    rank = args[0].dim()
    if rank == 0:
        return x
    d = _norm_dim(int(args[1]), rank)
    n = int(args[0].shape[d])
    one = b.operand(1, b.out_dtype)
    shift = 1
    while shift < n:
        cut = b.emit("Slice", [x, b.ints([0]), b.ints([n - shift]), b.ints([d])])
        pads = [0] * (2 * rank)
        pads[d] = shift
        moved = b.emit("Pad", [cut, b.ints(pads), one], mode="constant")
        x = b.emit("Mul", [x, moved])
        shift *= 2
    return x


def trace(b, inputs, args, kwargs, opset):
    """trace(self): ReduceSum of the diagonal's elements, gathered from the flattened
    matrix (their positions a constant of its shape)."""
    rows, cols = (int(s) for s in args[0].shape)
    k = min(rows, cols)
    flat = _flat(b, b.cast(inputs[0], b.out_dtype))
    diag = b.emit("Gather", [flat, b.const(np.arange(k, dtype=np.int64) * (cols + 1))],
                  rank=1, axis=0)
    return b.reduce("ReduceSum", diag, [0], False, b.out_dtype, 0)


def diag_embed(b, inputs, args, kwargs, opset):
    """diag_embed(self, offset=0, dim1=-2, dim2=-1): a zero appended to the last dim, then
    one Gather of a constant (m, m) index (the diagonal's positions read the input, the
    others the zero), the two new dims then moved to dim1 and dim2."""
    x, rank = inputs[0], args[0].dim()
    n = int(args[0].shape[-1])
    offset = int(_arg(args, 1, 0))
    out_rank = rank + 1
    d1 = _norm_dim(int(_arg(args, 2, -2)), out_rank)
    d2 = _norm_dim(int(_arg(args, 3, -1)), out_rank)
    m = n + abs(offset)
    index = np.full((m, m), n, np.int64)
    k = np.arange(n)
    rows, cols = (k, k + offset) if offset >= 0 else (k - offset, k)
    index[rows, cols] = k
    zero = b.emit("Expand", [b.operand(0, b.out_dtype),
                             b.shape_tensor([b.shape(x, 0, rank - 1), 1])], rank=rank)
    padded = b.emit("Concat", [x, zero], rank=rank, axis=rank - 1)
    out = b.emit("Gather", [padded, b.const(index)], rank=out_rank, axis=rank - 1)
    batch = iter(range(rank - 1))
    perm = [rank - 1 if p == d1 else rank if p == d2 else next(batch) for p in range(out_rank)]
    if perm != list(range(out_rank)):
        out = b.emit("Transpose", [out], perm=perm)
    return out


def block_diag(b, inputs, args, kwargs, opset):
    """block_diag(tensors): each block as a matrix, padded with zeros to the total width at
    its column offset, the blocks then concatenated along the rows."""
    dtype = b.out_dtype
    shapes = []
    for t in args[0]:
        s = tuple(int(n) for n in t.shape)
        shapes.append((1, 1) if not s else (1, s[0]) if len(s) == 1 else s)
    width = sum(c for _, c in shapes)
    rows, left = [], 0
    for v, (r, c) in zip(inputs[0], shapes):
        v = b.emit("Reshape", [b.cast(v, dtype), b.ints([r, c])], rank=2)
        if c != width:
            v = b.emit("Pad", [v, b.ints([0, left, 0, width - left - c]),
                               b.operand(0, dtype)], rank=2, mode="constant")
        rows.append(v)
        left += c
    return rows[0] if len(rows) == 1 else b.emit("Concat", rows, axis=0)


def linalg_cross(b, inputs, args, kwargs, opset):
    """linalg_cross(self, other, dim=-1): a[1,2,0] b[2,0,1] - a[2,0,1] b[1,2,0] along dim
    (each operand's components gathered on its own dim, then broadcast)."""
    dtype, out_rank = b.out_dtype, b.out_rank
    d = _norm_dim(int(_arg(args, 2, -1)), out_rank)
    parts = []
    for v, t in zip(inputs[:2], args[:2]):
        axis = d - (out_rank - t.dim())
        v = b.cast(v, dtype)
        parts.append([b.emit("Gather", [v, b.const(np.asarray(order, np.int64))],
                             rank=t.dim(), axis=axis) for order in ([1, 2, 0], [2, 0, 1])])
    (a1, a2), (b1, b2) = parts
    return b.emit("Sub", [b.emit("Mul", [a1, b2]), b.emit("Mul", [a2, b1])])


def _pnorm_last(b, diff, p: float, rank: int, dtype):
    """The p-norm of `diff` over its last dim (of `rank` dims)."""
    ax = [rank - 1]
    if p == 2:
        return b.reduce("ReduceL2", diff, ax, False, dtype, rank - 1)
    a = b.emit("Abs", [diff], rank=rank)
    if p == 1:
        return b.reduce("ReduceSum", a, ax, False, dtype, rank - 1)
    if math.isinf(p):
        return b.reduce("ReduceMax", a, ax, False, dtype, rank - 1)
    if p == 0:
        return b.reduce("ReduceSum", b.cast(ox._truthy(b, a), dtype), ax, False, dtype,
                        rank - 1)
    s = b.reduce("ReduceSum", b.emit("Pow", [a, b.operand(p, dtype)], rank=rank), ax, False,
                 dtype, rank - 1)
    return b.emit("Pow", [s, b.operand(1.0 / p, dtype)], rank=rank - 1)


def pdist(b, inputs, args, kwargs, opset):
    """_pdist_forward(self, p=2): the p-norm of every row difference (N, N), then the
    entries above the diagonal in row-major order (their positions a constant of N)."""
    dtype = b.out_dtype
    x = b.cast(inputs[0], dtype)
    n = int(args[0].shape[0])
    diff = b.emit("Sub", [b.unsqueeze(x, [1]), b.unsqueeze(x, [0])], rank=3)
    dist = _pnorm_last(b, diff, float(_arg(args, 1, 2.0)), 3, dtype)
    i, j = np.triu_indices(n, 1)
    return b.emit("Gather", [_flat(b, dist), b.const((i * n + j).astype(np.int64))], axis=0)


# ---------------------------------------------------------------------- pointwise math


def threshold(b, inputs, args, kwargs, opset):
    """threshold(self, threshold, value): `value` where x <= threshold, else x (NaN kept);
    integers compared in float64 with a fractional threshold."""
    dtype = b.out_dtype
    x = b.cast(inputs[0], dtype)
    th = args[1]
    cmp_dtype = dtype if dtype.kind == "f" or float(th) == int(th) else np.dtype(np.float64)
    low = b.emit("LessOrEqual", [b.cast(x, cmp_dtype), b.operand(th, cmp_dtype)], dtype=BOOL)
    return b.emit("Where", [low, b.operand(args[2], dtype), x])


def shrink(soft: bool) -> Callable:
    """softshrink (`soft`) / hardshrink(self, lambd=0.5): x moved `lambd` towards zero, or
    kept, outside [-lambd, lambd], zero inside. Comparisons and Where rather than ONNX's
    Shrink, which maps NaN to 0 where PyTorch keeps it."""

    def mapping(b, inputs, args, kwargs, opset):
        dtype = b.out_dtype
        x = b.cast(inputs[0], dtype)
        lambd = float(_arg(args, 1, kwargs.get("lambd", 0.5)))
        above = b.emit("Greater", [x, b.operand(lambd, dtype)], dtype=BOOL)
        below = b.emit("Less", [x, b.operand(-lambd, dtype)], dtype=BOOL)
        hi, lo = x, x
        if soft:
            hi = b.emit("Sub", [x, b.operand(lambd, dtype)])
            lo = b.emit("Add", [x, b.operand(lambd, dtype)])
        inside = b.emit("Mul", [x, b.operand(0.0, dtype)])  # (0, and NaN for NaN)
        return b.emit("Where", [above, hi, b.emit("Where", [below, lo, inside])])

    mapping.__doc__ = ("softshrink" if soft else "hardshrink") + ": Where of comparisons."
    return mapping


# Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011): the single
# precision polynomials in w = -log((1 - x)(1 + x)), relative error about 1.3e-7.
_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                   0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def erfinv(b, inputs, args, kwargs, opset):
    """erfinv(self): Giles's polynomials in w = -log(1 - x^2) (w - 2.5 for w < 5, sqrt(w) - 3
    beyond), relative error below 3e-7 in float32 (1.3e-7 in float64); +-inf at +-1, NaN
    outside [-1, 1]."""
    dtype = b.out_dtype
    x = b.cast(inputs[0], dtype)

    def c(v):
        return b.operand(v, dtype)

    one = c(1.0)
    w = b.emit("Neg", [b.emit("Log", [b.emit("Mul", [b.emit("Sub", [one, x]),
                                                     b.emit("Add", [one, x])])])])

    def poly(coeffs, t):
        p = c(coeffs[0])
        for k in coeffs[1:]:
            p = b.emit("Add", [c(k), b.emit("Mul", [p, t])])
        return p

    central = poly(_ERFINV_CENTRAL, b.emit("Sub", [w, c(2.5)]))
    tail = poly(_ERFINV_TAIL, b.emit("Sub", [b.emit("Sqrt", [w]), c(3.0)]))
    small = b.emit("Less", [w, c(5.0)], dtype=BOOL)
    out = b.emit("Mul", [b.emit("Where", [small, central, tail]), x])
    edge = b.emit("Equal", [b.emit("Abs", [x]), one], dtype=BOOL)
    return b.emit("Where", [edge, b.emit("Mul", [x, c(math.inf)]), out])


def hypot(b, inputs, args, kwargs, opset):
    """hypot(self, other): max(|a|, |b|) sqrt(1 + (min / max)^2), without the overflow of
    sqrt(a^2 + b^2); 0 for (0, 0) and +inf where either is infinite."""
    dtype = b.out_dtype
    a = b.emit("Abs", [b.operand(inputs[0], dtype)])
    c = b.emit("Abs", [b.operand(inputs[1], dtype)])
    hi, lo = b.emit("Max", [a, c]), b.emit("Min", [a, c])
    zero = b.operand(0, dtype)
    is_zero = b.emit("Equal", [hi, zero], dtype=BOOL)
    safe = b.emit("Where", [is_zero, b.operand(1, dtype), hi])
    r = b.emit("Div", [lo, safe])
    out = b.emit("Mul", [hi, b.emit("Sqrt", [b.emit("Add", [b.operand(1, dtype),
                                                          b.emit("Mul", [r, r])])])])
    out = b.emit("Where", [is_zero, zero, out])
    inf = b.emit("Or", [b.emit("IsInf", [a], dtype=BOOL), b.emit("IsInf", [c], dtype=BOOL)],
                 dtype=BOOL)
    return b.emit("Where", [inf, b.operand(math.inf, dtype), out])


def heaviside(b, inputs, args, kwargs, opset):
    """heaviside(self, values): `values` where x == 0, else whether x > 0 (NaN gives 0, as
    the kernel's)."""
    dtype = b.out_dtype
    x, v = b.operand(inputs[0], dtype), b.operand(inputs[1], dtype)
    pos = b.cast(b.emit("Greater", [x, b.operand(0, dtype)], dtype=BOOL), dtype)
    return b.emit("Where", [b.emit("Equal", [x, b.operand(0, dtype)], dtype=BOOL), v, pos])


def xlogy(b, inputs, args, kwargs, opset):
    """xlogy(self, other) (tensor or number operands): x log(y), 0 where x == 0, NaN where
    y is NaN."""
    dtype = b.out_dtype
    x, y = b.operand(inputs[0], dtype), b.operand(inputs[1], dtype)
    prod = b.emit("Mul", [x, b.emit("Log", [y])])
    out = b.emit("Where", [b.emit("Equal", [x, b.operand(0, dtype)], dtype=BOOL),
                           b.operand(0, dtype), prod])
    return b.emit("Where", [b.emit("IsNaN", [y], dtype=BOOL), b.operand(math.nan, dtype),
                            out])


def sinc(b, inputs, args, kwargs, opset):
    """sinc(self): sin(pi x) / (pi x), 1 at 0."""
    dtype = b.out_dtype
    x = b.cast(inputs[0], dtype)
    px = b.emit("Mul", [x, b.operand(math.pi, dtype)])
    zero = b.emit("Equal", [x, b.operand(0, dtype)], dtype=BOOL)
    safe = b.emit("Where", [zero, b.operand(1, dtype), px])
    return b.emit("Where", [zero, b.operand(1, dtype),
                            b.emit("Div", [b.emit("Sin", [safe]), safe])])


def angle_scale(factor: float) -> Callable:
    """rad2deg / deg2rad: x times `factor` in the result's dtype."""

    def mapping(b, inputs, args, kwargs, opset):
        dtype = b.out_dtype
        return b.emit("Mul", [b.cast(inputs[0], dtype), b.operand(factor, dtype)])

    mapping.__doc__ = f"Mul by {factor!r}."
    return mapping


# ---------------------------------------------------------------------- losses and norms


def legacy_norm(b, inputs, args, kwargs, opset):
    """norm.ScalarOpt_dim(self, p=2, dim, keepdim=False): the vector norm's mapping (p None
    is 2)."""
    p = _arg(args, 1, None)
    args = (args[0], 2 if p is None else p) + tuple(args[2:])
    return ox.vector_norm(b, inputs, args, kwargs, opset)


def huber_loss(b, inputs, args, kwargs, opset):
    """huber_loss(self, target, reduction=mean, delta=1): 0.5 d^2 where |d| < delta, else
    delta (|d| - delta / 2), reduced."""
    dtype = b.out_dtype
    delta = float(_arg(args, 3, 1.0))
    d = b.emit("Sub", [b.operand(inputs[0], dtype), b.operand(inputs[1], dtype)])
    a = b.emit("Abs", [d])
    quad = b.emit("Mul", [b.emit("Mul", [b.operand(0.5, dtype), d]), d])
    lin = b.emit("Mul", [b.operand(delta, dtype), b.emit("Sub", [a, b.operand(0.5 * delta,
                                                                              dtype)])])
    loss = b.emit("Where", [b.emit("Less", [a, b.operand(delta, dtype)], dtype=BOOL), quad,
                            lin])
    rank = max(args[0].dim(), args[1].dim())
    loss.rank = rank
    return ox._reduced(b, loss, int(_arg(args, 2, 1)), rank)


def multi_margin_loss(b, inputs, args, kwargs, opset):
    """multi_margin_loss(self, target, p=1, margin=1, weight=None, reduction=mean): per row,
    the sum over the other classes of max(0, margin - x[y] + x[j])^p (times weight[y]),
    over C, then reduced."""
    dtype = b.out_dtype
    x, t = b.cast(inputs[0], dtype), b.cast(inputs[1], np.int64)
    p, margin = int(_arg(args, 2, 1)), float(_arg(args, 3, 1.0))
    weight, reduction = _arg(inputs, 4, None), int(_arg(args, 5, 1))
    vector = args[0].dim() < 2
    c = int(args[0].shape[-1]) if args[0].dim() else 1
    x = b.emit("Reshape", [x, b.ints([-1, c])], rank=2)
    t = _flat(b, t, I64)
    tcol = b.unsqueeze(t, [1])
    picked = b.emit("GatherElements", [x, tcol], rank=2, axis=1)
    h = b.emit("Relu", [b.emit("Add", [b.emit("Sub", [b.operand(margin, dtype), picked],
                                              rank=2), x], rank=2)], rank=2)
    own = b.emit("Equal", [b.const(np.arange(c, dtype=np.int64)[None]), tcol], dtype=BOOL,
                 rank=2)
    h = b.emit("Where", [own, b.operand(0, dtype), h], rank=2)
    if p == 2:
        h = b.emit("Mul", [h, h], rank=2)
    if weight is not None:
        w = b.emit("Gather", [b.cast(weight, dtype), t], rank=1, axis=0)
        h = b.emit("Mul", [h, b.unsqueeze(w, [1])], rank=2)
    loss = b.emit("Div", [b.reduce("ReduceSum", h, [1], False, dtype, 1),
                          b.operand(c, dtype)], rank=1)
    if reduction == 0:
        return b.emit("Reshape", [loss, b.ints([])], rank=0) if vector else loss
    return ox._reduced(b, loss, reduction, 1)
