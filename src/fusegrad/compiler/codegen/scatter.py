"""Scatter kernels: `scatter` and `scatter_add` along the last dim, one loop nest per row.

Max pooling's backward is `zeros.scatter(-1, indices, grad)` (disjoint windows) or
`zeros.scatter_add(-1, indices, grad)` (overlapping ones): each output gradient goes to the
input position its index names. As a generated kernel, each row of the result is written
with its initial values (the lowered `self`, usually zeros, computed in the loop), then
every element of the row's index and source is stored (`scatter`) or added (`scatter_add`)
at its position, in index order: the order eager's kernel adds them, so the same bits
(NumPy's `add.at` adds in the index's C order; a repeated position in `scatter` keeps the
last value, as NumPy's assignment). Rows are independent, so the kernel is cut into pieces
over them like any other.

An index outside `[0, size)` is not written: the kernel sets a status word, and the wrapper
then raises eager's error, reading the index through the array it was lowered from (a
buffer, or a strided view of one). Other forms (another dim, an index or source of other
shapes, dtypes without a C type, empty indices) stay externs (`NotLowered`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ... import _dtype
from .ir import Buffer, IVar, Op, Pointwise, ScalarInput, View, numel

# Dtypes scatter kernels are generated for.
_DTYPES = (_dtype.float32, _dtype.float64, _dtype.int64, _dtype.int32)


@dataclass(eq=False)
class Scatter:
    """`out = base`, then for each row and each `j` in order `out[row, index[row, j]] =
    src[row, j]` (`+=` with `accumulate`). `base`, `index` and `src` are IR tensors; `shape`
    is `base`'s, `index` and `src` have its leading dims. `checked` is the index as the
    wrapper reads it for the error (a Buffer or a View); `status` the int64 word the kernel
    sets on an index out of range."""

    shape: tuple
    dtype: Any
    base: Any
    index: Any
    src: Any
    accumulate: bool
    checked: Any
    status: Buffer
    origins: list = field(default_factory=list)

    def fn(self, idx: tuple):
        """Every value the kernel reads, as one expression (for the scheduler's reads):
        `base` at `idx`, `index` and `src` along the row at a symbolic position `s0`."""
        row = tuple(idx[:-1]) + (IVar("s0"),)
        return Op("scatter", (_at(self.base, tuple(idx)), _at(self.index, row),
                              _at(self.src, row)), self.dtype)


def _at(value: Any, index: tuple):
    from .lower_pointwise import body_at

    return body_at(value, index)


def lower_scatter(g, a, dim, index, src, accumulate: bool = False) -> Buffer:
    """The scatter kernel of `scatter(a, dim, index, src)` (`scatter_add` with
    `accumulate`), registered as a computation of graph lowering `g`; its buffer."""
    from .lower_pointwise import NotLowered, is_tensor

    if not all(is_tensor(x) and not isinstance(x, ScalarInput) for x in (a, index, src)):
        raise NotLowered("scatter of numbers")
    nd = len(a.shape)
    if not nd or not isinstance(dim, int) or dim not in (-1, nd - 1):
        raise NotLowered("scatter along a dim other than the last")
    if index.dtype is not _dtype.int64 or src.dtype is not a.dtype or a.dtype not in _DTYPES:
        raise NotLowered("scatter of these dtypes")
    ishape = tuple(int(n) for n in index.shape)
    if ishape != tuple(int(n) for n in src.shape) or len(ishape) != nd or \
            ishape[:-1] != tuple(int(n) for n in a.shape[:-1]) or not numel(ishape):
        raise NotLowered("scatter of an index and source of other shapes")
    checked = index if isinstance(index, Buffer) else None
    if checked is None and index.buffer is None:
        checked = g.view_of(index)
    if checked is None:
        checked = g.realize(index, "the index of a scatter kernel")
    status = Buffer(g.new_name() + "_status", (1,), _dtype.int64, (1,))
    node = Scatter(tuple(a.shape), a.dtype, a, index, src, bool(accumulate), checked, status)
    return g.add_computation(node)


def render(node: Scatter, out: Buffer, w) -> list:
    """The C lines of `node`'s kernel (`c.render_kernel`): a loop nest over the rows, in
    each the row's initial values, then its stores or additions."""
    from . import c

    k = len(node.shape) - 1
    row = [IVar(f"x{i}") for i in range(k)]
    init = Pointwise(tuple(node.shape), node.dtype, lambda idx: _at(node.base, tuple(idx)))
    lines = c._pointwise_inner(init, out, w, k)
    w.lines, w.cse = [], {}
    s = IVar("s0")
    w.inner, w.hoisted, w.offsets = {s.name}, [], {}
    at = w.value(_at(node.index, tuple(row) + (s,)))
    v = w.value(_at(node.src, tuple(row) + (s,)))
    size = w.kint(int(node.shape[-1]))
    status = w.pointer(node.status, write=True)
    target = w.address(out, tuple(row) + (IVar(at),))
    w.ops.append("scatter_add" if node.accumulate else "scatter")
    body = w.lines
    check = [f"if ((uint64_t){at} >= (uint64_t){size}) {{",
             f"  __atomic_store_n({status}, 1, __ATOMIC_RELAXED);", "  continue;", "}"]
    # (checked once the index is read: the source is not read for a skipped element)
    cut = next((i + 1 for i, x in enumerate(body) if f" {at} = " in x), 0)
    n = w.kint(int(node.index.shape[-1]))
    loop = list(w.hoisted) + [f"for (int64_t {s.name} = 0; {s.name} < {n}; {s.name}++) {{"]
    loop += ["  " + x for x in body[:cut] + check + body[cut:]]
    loop += [f"  {target} {'+=' if node.accumulate else '='} {v};", "}"]
    lines += ["{"] + ["  " + x for x in loop] + ["}"]
    extents = [w.kint(int(d)) if int(d) != 1 else "1" for d in node.shape[:-1]]
    work = numel(node.shape) + numel(node.index.shape)
    return c._loops(w, extents, [x.name for x in row], lines, work)


def checked_expr(w, node: Scatter, view_expr) -> str:
    """The wrapper's Python expression of the index array the error is read from."""
    if isinstance(node.checked, View):
        return view_expr(w, node.checked)
    return w.names[node.checked]


def raise_out_of_range(index, size: int, dim: int) -> None:
    """Eager's error for a scatter index outside [0, size) along `dim` (`index`: the
    index array as the graph holds it)."""
    import numpy as np

    from ...ops._util import index_out_of_range

    bad = index_out_of_range(np.asarray(index), size)
    raise RuntimeError(f"index {bad} is out of bounds for dimension {dim} with size {size}")
