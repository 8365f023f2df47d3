"""The loop IR: what a lowered graph is before it becomes C.

Two small languages:

- *index expressions* (`IVar`, `IInt`, `IBin`): integer arithmetic over loop variables
  (`min`/`max` keep an index in bounds where a select reads one of several tensors).
  Every integer in them (sizes, strides, offsets, a `select`'s index) is a kernel argument
  when rendered, never a literal, so one kernel serves every shape;
- *value expressions* (`Const`, `Load`, `Op`, `Index`): the arithmetic of one element,
  typed with fusegrad dtypes; `Index` is an index expression's value (an int64), so a
  select can depend on where an element is (cat, the scatters). `Load(buffer, index)`
  reads a buffer at a *logical* index (one index expression per dimension of the buffer);
  the buffer's strides turn it into an address.

Nodes: `Buffer` (a materialised tensor: a graph input, an extern's output, a kernel's
output), `Pointwise` (a shape and a function from an index to a value expression),
`Reduction` (an output shape, a reduced shape, a combine kind, and a function from both
indices to the value being combined) and `Extern` (a registry kernel run through NumPy).
Views and broadcasting are `Pointwise` nodes whose function remaps the index before loading
(no copies): a view of a view composes two index maps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ... import _dtype

# ---------------------------------------------------------------- index expressions


class IExpr:
    """An integer index expression."""

    __slots__ = ()

    def __add__(self, other: IExpr) -> IExpr:
        if isinstance(other, IInt) and other.value == 0:
            return self
        if isinstance(self, IInt) and self.value == 0:
            return other
        return IBin("+", self, other)

    def __mul__(self, other: IExpr) -> IExpr:
        for a, b in ((self, other), (other, self)):
            if isinstance(a, IInt) and a.value == 0:
                return a
            if isinstance(a, IInt) and a.value == 1:
                return b
        return IBin("*", self, other)

    def __floordiv__(self, other: IExpr) -> IExpr:
        if isinstance(other, IInt) and other.value == 1:
            return self
        return IBin("/", self, other)

    def __mod__(self, other: IExpr) -> IExpr:
        if isinstance(other, IInt) and other.value == 1:
            return IInt(0)
        return IBin("%", self, other)

    def clip(self, lo: int, hi: int) -> IExpr:
        """`self` limited to [lo, hi] (an index that stays in bounds where it is not read)."""
        return IBin("min", IBin("max", self, IInt(lo)), IInt(hi))


@dataclass(frozen=True, eq=True)
class IVar(IExpr):
    """A loop variable (`x0`, `r1`, ...)."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, eq=True)
class IInt(IExpr):
    """An integer the kernel receives as an argument (a size, stride, offset or index)."""

    value: int

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True, eq=True)
class IBin(IExpr):
    """`a op b` for op in + * / % (division and remainder of non-negative integers), or
    `min(a, b)` / `max(a, b)` for op min, max."""

    op: str
    a: IExpr
    b: IExpr

    def __str__(self) -> str:
        if self.op in ("min", "max"):
            return f"{self.op}({self.a}, {self.b})"
        op = "//" if self.op == "/" else self.op
        return f"({self.a} {op} {self.b})"


# ---------------------------------------------------------------- value expressions


class Expr:
    """A typed value expression; `dtype` is a fusegrad dtype (None: a weak Python number)."""

    __slots__ = ()
    dtype: Any


@dataclass(frozen=True, eq=False)
class Const(Expr):
    """A number. A weak constant (dtype None) takes the type of what it meets."""

    value: Any
    dtype: Any = None

    def __str__(self) -> str:
        return repr(self.value)


@dataclass(frozen=True, eq=False)
class Load(Expr):
    """The element of `buffer` at the logical `index`."""

    buffer: Buffer
    index: tuple
    dtype: Any = None

    def __str__(self) -> str:
        return f"{self.buffer.name}[{', '.join(map(str, self.index))}]"


@dataclass(frozen=True, eq=False)
class Op(Expr):
    """An operation of the expression language (see `c.py`'s table for the list)."""

    name: str
    args: tuple
    dtype: Any = None

    def __str__(self) -> str:
        args = ", ".join(map(str, self.args))
        if self.name == "cast":
            return f"{self.dtype!r}({args})"
        return f"{self.name}({args})"


@dataclass(frozen=True, eq=False)
class Index(Expr):
    """The value (an int64) of index expression `expr` at the current element."""

    expr: IExpr
    dtype: Any = _dtype.int64

    def __str__(self) -> str:
        return f"index({self.expr})"


def walk(e: Expr):
    """Every sub-expression of `e` (pre-order)."""
    yield e
    if isinstance(e, Op):
        for a in e.args:
            yield from walk(a)


def loads(e: Expr) -> list:
    """The `Load`s in `e`."""
    return [x for x in walk(e) if isinstance(x, Load)]


def inline_producers(e: Expr, inline: dict, memo: dict | None = None) -> Expr:
    """`e` with every load of a buffer in `inline` (buffer -> the Pointwise computing it)
    replaced by that node's value at the load's index, recursively: the expression a kernel
    computing those producers in its own loop evaluates. The nodes are not touched."""
    if not inline:
        return e
    # The memo is keyed by identity and holds each key expression beside its result: a
    # producer's value is a fresh tree, dropped once replaced, and a later fresh tree at the
    # same address would otherwise be taken for it (another index's value: a wrong kernel).
    memo = {} if memo is None else memo
    got = memo.get(id(e))
    if got is not None:
        return got[1]
    if isinstance(e, Load) and e.buffer in inline:
        r = inline_producers(inline[e.buffer].fn(e.index), inline, memo)
    elif isinstance(e, Op):
        args = tuple(inline_producers(a, inline, memo) for a in e.args)
        r = e if all(a is b for a, b in zip(args, e.args)) else Op(e.name, args, e.dtype)
    else:
        r = e
    memo[id(e)] = (e, r)
    return r


# ---------------------------------------------------------------- nodes


@dataclass(eq=False)
class Buffer:
    """A materialised tensor: `strides` and `offset` in elements."""

    name: str
    shape: tuple
    dtype: Any
    strides: tuple
    offset: int = 0

    def load(self, index) -> Expr:
        """Read the element at the logical `index`."""
        return Load(self, tuple(index), self.dtype)

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype!r}{list(self.shape)}"


@dataclass(eq=False)
class ScalarInput(Buffer):
    """A float input of the graph (a dynamic float of capture): kernels read it from a 0-d
    float64 buffer the wrapper fills on each call, so no value is compiled in. It is weak,
    as a Python number: it takes the dtype of the tensors it meets."""

    weak = True


def contiguous_strides(shape) -> tuple:
    """Row-major strides (in elements) of `shape`."""
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(strides))


@dataclass(eq=False)
class Pointwise:
    """`out[idx] = fn(idx)` over `shape`; `origins` are the graph nodes it computes."""

    shape: tuple
    dtype: Any
    fn: Callable
    origins: list = field(default_factory=list)
    buffer: Any = None  # set when the scheduler computes it into a buffer of its own
    realized_because: str = ""
    # The same value piece by piece along one dim, for its own kernel: (dim, ((start, size,
    # piece_fn), ...)) covering the dim in order, `piece_fn(idx)` the value at `idx` with
    # `idx[dim]` counted from `start` (a cat: one loop per input, no select per element).
    pieces: Any = None
    # The value this one is a view of (a permute, reshape, ... of it), where it is one.
    source: Any = None

    def body(self, index) -> Expr:
        """The value expression at `index` (a load once the node has its own buffer)."""
        if self.buffer is not None:
            return self.buffer.load(index)
        return self.fn(tuple(index))


# Reduction kinds: the accumulator's start value (as a function of the value dtype) and the
# combine step are rendered by c.py; `argmax`/`argmin` also track the index.
REDUCTION_KINDS = ("sum", "prod", "max", "min", "argmax", "argmin", "any", "all")


@dataclass(eq=False)
class Reduction:
    """`out[idx] = combine over ridx in reduced_shape of fn(idx, ridx)`."""

    shape: tuple
    reduced_shape: tuple
    kind: str
    dtype: Any  # the accumulated (and stored) dtype
    fn: Callable
    origins: list = field(default_factory=list)

    def body(self, index, rindex) -> Expr:
        """The value combined at (`index`, `rindex`)."""
        return self.fn(tuple(index), tuple(rindex))


@dataclass(eq=False)
class Extern:
    """A registry kernel called through NumPy (matmul, convolution, any op without a
    lowering): `args` mixes IR values and Python values, `outputs` the result buffers."""

    op: Any
    args: tuple
    kwargs: dict
    outputs: list
    origins: list = field(default_factory=list)
    # A random op whose first input eager lays out in another order than row-major: that
    # order of its dims (the kernel then draws in it, as eager's draws in memory order).
    memory_order: tuple | None = None
    # Whether its Pointwise inputs may be passed as strided views (`View`): not for ops
    # writing their inputs, returning views of them or drawing random numbers. Buffers
    # written in place by earlier externs: their views are copied.
    views_allowed: bool = False
    written_before: frozenset = frozenset()
    # An in-place op (`writes.py`): the buffer whose memory it writes, through its first
    # argument (that buffer or a `View` of it); eager's in-place path runs on it.
    writes: Any = None


@dataclass(eq=False)
class View:
    """An extern's input that is a strided view of `base` (a transpose, permute, slice,
    select, expand or reshape of it): the wrapper passes the extern a NumPy view of
    `base`'s array instead of a kernel copying it, as PyTorch's inductor passes strided
    views to its externs. `index` maps the view's loop variables (`x0`, `x1`, ...) to
    `base`'s logical index; the view's strides follow from `base`'s strides when the
    wrapper is written (`geometry`), since an output buffer's layout is chosen after
    lowering."""

    base: Buffer
    shape: tuple
    dtype: Any
    index: tuple

    def geometry(self) -> tuple | None:
        """(strides, offset) in elements from `base`'s first element, or None where the
        elements are not one strided geometry of `base`'s memory under its strides."""
        return strided_geometry(self.base, self.shape, self.index)


# Views larger than this whose index uses division or remainder (a reshape merging dims)
# are not checked element by element: they are copied by a kernel, as before.
_NUMERIC_CHECK_LIMIT = 1 << 22


def _linear(e: IExpr) -> dict | None:
    """`e` as {variable name: coefficient, None: constant}, None when not linear."""
    if isinstance(e, IInt):
        return {None: e.value}
    if isinstance(e, IVar):
        return {e.name: 1}
    if not isinstance(e, IBin) or e.op not in ("+", "*"):
        return None
    a, b = _linear(e.a), _linear(e.b)
    if a is None or b is None:
        return None
    if e.op == "+":
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + v
        return out
    for x, y in ((a, b), (b, a)):
        if set(x) <= {None}:  # a constant times a linear form
            c = x.get(None, 0)
            return {k: c * v for k, v in y.items()}
    return None


def evaluate_index(e: IExpr, grids: dict):
    """`e` over whole index grids (NumPy integer arrays broadcasting to the view)."""
    import numpy as np

    if isinstance(e, IInt):
        return np.int64(e.value)
    if isinstance(e, IVar):
        return grids[e.name]
    a, b = evaluate_index(e.a, grids), evaluate_index(e.b, grids)
    return {"+": np.add, "*": np.multiply, "/": np.floor_divide, "%": np.remainder,
            "min": np.minimum, "max": np.maximum}[e.op](a, b)


def strided_geometry(base: Buffer, shape: tuple, index: tuple) -> tuple | None:
    """(strides, offset), in elements from `base`'s first element, of the elements of
    `base` at `index` (one expression per dim of `base` over `x0`, `x1`, ... of `shape`),
    or None when they are not one strided geometry (or `base` has an offset, or a stride
    would be negative)."""
    if base.offset or len(index) != len(base.strides):
        return None
    names = [f"x{i}" for i in range(len(shape))]
    forms = [_linear(e) for e in index]
    if all(f is not None for f in forms):
        strides = [0] * len(shape)
        offset = 0
        for f, s in zip(forms, base.strides):
            for k, v in f.items():
                if k is None:
                    offset += v * s
                elif k in names:
                    strides[names.index(k)] += v * s
                else:
                    return None
        strides = [0 if n == 1 else st for n, st in zip(shape, strides)]
    else:
        import numpy as np

        if numel(shape) > _NUMERIC_CHECK_LIMIT or not numel(shape):
            return None
        nd = len(shape)
        grids = {n: np.arange(int(d), dtype=np.int64).reshape(
            [-1 if i == j else 1 for j in range(nd)]) for i, (n, d) in enumerate(
                zip(names, shape))}
        addr = np.zeros(tuple(int(d) for d in shape), np.int64)
        for e, s in zip(index, base.strides):
            addr = addr + evaluate_index(e, grids) * int(s)
        offset = int(addr.reshape(-1)[0])
        strides = []
        for i, d in enumerate(shape):
            step = [0] * nd
            step[i] = 1 if d > 1 else 0
            strides.append(int(addr[tuple(step)]) - offset if d > 1 else 0)
        expected = offset + sum(g * st for g, st in zip(grids.values(), strides))
        if not np.array_equal(addr, np.broadcast_to(expected, addr.shape)):
            return None
    if offset < 0 or any(st < 0 for st in strides):
        return None
    return tuple(int(st) for st in strides), int(offset)


@dataclass(frozen=True)
class PythonCall:
    """The `op` of an `Extern` that is no registry op: a Python function the graph calls
    for its effect (a runtime check that raises as eager), or in place of an op's registry
    kernel (`layout`), run between kernels on the NumPy values of its arguments."""

    name: str
    kernel: Callable
    # Whether its results are laid out as the graph node's (eager's results): an op's
    # kernel run in place of its registry kernel (the C attention kernels, attention.py).
    layout: bool = False


def numel(shape) -> int:
    """The number of elements of `shape`."""
    n = 1
    for s in shape:
        n *= int(s)
    return n


def is_float(dtype) -> bool:
    """True for floating dtypes."""
    return dtype is not None and dtype.category == _dtype.FLOAT


def describe(node: Any, name: str) -> str:
    """A node as readable text: `buf2 = pointwise[3, 4] float32: add(x[x0, x1], 1.0)`."""
    if isinstance(node, Pointwise):
        idx = [IVar(f"x{i}") for i in range(len(node.shape))]
        return f"{name} = pointwise{list(node.shape)} {node.dtype!r}: {node.fn(tuple(idx))}"
    if isinstance(node, Reduction):
        idx = [IVar(f"x{i}") for i in range(len(node.shape))]
        ridx = [IVar(f"r{i}") for i in range(len(node.reduced_shape))]
        return (f"{name} = {node.kind}{list(node.shape)} over {list(node.reduced_shape)} "
                f"{node.dtype!r}: {node.fn(tuple(idx), tuple(ridx))}")
    if isinstance(node, Extern):
        return f"{name} = extern {node.op.name}(...)"
    if hasattr(node, "accumulate"):  # a scatter kernel (scatter.py)
        idx = [IVar(f"x{i}") for i in range(len(node.shape))]
        kind = "scatter_add" if node.accumulate else "scatter"
        return f"{name} = {kind}{list(node.shape)} {node.dtype!r}: {node.fn(tuple(idx))}"
    return f"{name} = {node}"
