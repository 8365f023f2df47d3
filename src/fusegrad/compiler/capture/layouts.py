"""Eager's layouts of computed tensors, carried by capture's fake examples.

A meta gives a computing op's result row-major strides, where eager keeps the memory order of
its operands for elementwise ops (`(x.t() * 2).stride()` is `(1, 4)`). Capture answers
`stride()`, `is_contiguous()` and `contiguous()` from the fake example, so the example must
have eager's strides, or the question must break the graph. `LayoutFakeMode` computes fakes
as `FakeTensorMode` does, then gives each computed result the strides eager's kernel gives
it where a simple rule says which, and counts the results for which none does: a call whose
ops all had their layout known leaves its result's layout known (`calls._layout_known`).

The rules, each checked against eager over many (op, input layout) pairs by the tests:

- an elementwise op computed by a NumPy ufunc lays its result out in NumPy's order "K" over
  its operands (and TensorIterator's order off the binary kernel's fast path), which
  `codegen.layout.with_eager_layout` computes, but over an expanded operand (a stride 0:
  some kernels compute over its distinct values and lay the result out their own way);
- any other elementwise op (`result_order` "operands" or "iterator": kernels through temporaries,
  `where`, `lerp`, the activations' derivatives) follows TensorIterator, whose order differs
  from NumPy's only where its operands' orders conflict: known where there is no conflict,
  every tensor operand of the result's shape with the same strides (numbers and 0-d
  tensors beside them order nothing);
- the reductions, matrix products, softmax, layer norm, scans, top-k and masked_fill
  (flagged `ROW_MAJOR` in `ops.surface`) allocate a row-major result whatever their inputs'
  layout, as the meta says (sort keeps its input's layout, the FFTs and group norm their
  own: not known);
- any other op whose operands are all row-major gives a row-major result where its meta
  does, but those flagged `OWN_LAYOUT` (geqrf's and ormqr's column-major results).
"""

from __future__ import annotations

from ..._fake import FakeTensor, FakeTensorMode
from ..._tensor import Tensor
from ...ops.surface import OWN_LAYOUT, ROW_MAJOR, has_flag


def _plain_ints(values) -> bool:
    """Whether `values` are all plain integers (a symbolic size would be specialised by the
    rules' arithmetic, so a symbolic geometry is left to the meta)."""
    return all(type(v) is int for v in values)


def _row_major(t) -> bool:
    """Whether fake `t` is row-major contiguous (a symbolic answer counts as not)."""
    try:
        return t.is_contiguous() is True
    except Exception:  # noqa: BLE001 - an undecidable symbolic comparison: not known
        return False


def _tensors(args) -> list:
    return [t for a in args for t in (a if isinstance(a, (list, tuple)) else (a,))
            if isinstance(t, Tensor)]


def _memory_format_given(args):
    """The memory format other than `preserve_format` among `args` (`clone`'s, `_to_copy`'s),
    which the result takes; None where there is none."""
    from ...ops.rearrange import MemoryFormat, preserve_format

    return next((a for a in args if isinstance(a, MemoryFormat) and a is not preserve_format),
                None)


# `eager_layout`'s answer for a result whose layout does not depend on its operands' (a
# reduction's, a row-major copy's): known even where theirs is not.
FREE = "free"


def eager_layout(op, args: tuple, out) -> bool | str:
    """Give `out`, the fake result of computing `op` on fake `args`, eager's strides; False
    where no rule says what they are (its fake keeps the meta's), `FREE` where they are
    row-major whatever the operands' layout."""
    from ...ops.rearrange import contiguous_format
    from ..codegen.layout import with_eager_layout

    if op.inplace or op.metadata_only:
        return True  # (the written or described tensor keeps its layout)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    if not all(isinstance(o, FakeTensor) for o in outs):
        return False
    tensors = _tensors(args)
    plain = all(_plain_ints((*t.shape, *t.stride())) for t in (*tensors, *outs))
    if op.view:
        if plain and op.name.partition(".")[0] == "view":  # (size-1 dims: eager's strides)
            with_eager_layout(op, args, out)
        return True
    elementwise = op.result_order == "operands" or op.result_order == "iterator"
    if not elementwise and has_flag(op.public, ROW_MAJOR):
        return FREE if all(_row_major(o) for o in outs) else False
    if not has_flag(op.public, OWN_LAYOUT) and all(_row_major(t) for t in tensors):
        # (row-major operands give a row-major result where the meta's is: matmul's
        # `_unsafe_view` of its product, `x + bias`; with symbolic sizes too)
        return all(_row_major(o) for o in outs)
    if not plain:
        return False
    if not elementwise or len(outs) != 1:
        return False
    given = _memory_format_given(args)
    if given is not None:  # (`reshape`'s copy, `contiguous()`: row-major, as the meta's)
        return FREE if given is contiguous_format and out.is_contiguous() else False
    shape = tuple(out.shape)
    laid = [t for t in tensors if t.ndim]
    if any(s == 0 and n > 1 for t in laid for s, n in zip(t.stride(), t.shape)):
        return False  # (an expanded operand: kernels compute some over its distinct values)
    if op.ufunc is None and (any(tuple(t.shape) != shape for t in laid) or
                             len({tuple(t.stride()) for t in laid}) > 1):
        return False  # (orders that conflict, or broadcast operands)
    with_eager_layout(op, args, out)
    return True


class LayoutFakeMode(FakeTensorMode):
    """`FakeTensorMode` whose results carry eager's strides where they are known; `unknown`
    counts the computed results whose layout no rule gives, `free` holds the results of the
    current call whose layout does not depend on their operands' (`FREE`), by id."""

    def __init__(self) -> None:
        super().__init__()
        self.unknown = 0
        self.free: dict = {}  # id -> the result itself (alive, so that no id is reused)

    def __fusegrad_dispatch__(self, op, args):
        fakes = tuple(self._fakeify(a) for a in args)
        out = FakeTensor._compute(op, fakes)
        try:
            known = eager_layout(op, fakes, out)
        except Exception:  # noqa: BLE001 - a layout no rule computes: not known
            known = False
        if not known:
            self.unknown += 1
        elif known == FREE:
            self.free.update((id(o), o) for o in (out if isinstance(out, (tuple, list))
                                                  else (out,)))
        return out
