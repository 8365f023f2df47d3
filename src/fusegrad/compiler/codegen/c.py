"""The C renderer: one C function per kernel, `void name(void **P, const int64_t *K)`.

`P` holds the graph's buffer addresses, `K` its integers (sizes, strides, offsets, indices);
the source names slots of both and no size, so one kernel serves every shape with the same
layout pattern. Loops: one per dimension, the innermost contiguous one vectorisable by gcc
(every operation is branch-free; clamps, max/min and NaN checks are selects). When the work
is large, the outermost loop of more than one iteration is cut into one range per thread,
run by the eager kernels' C workers (`ops/native/workers.c`; `PRELUDE`): each output
element is computed by one piece in the order it has at one thread, so the results are the
same bits at every thread count. Reductions accumulate in 16 lanes (a loop gcc
vectorises without reassociating: the lanes are combined at the end). A pointwise kernel's
loops nest in its output's memory order, the two innermost tiled where a load reads across
them (a transposition); an innermost variable that loads divide and take the remainder of
(a reshape merging dims) is two loops, and a `cat` is one loop nest per input. Column sums
read whole rows, 64 outputs at a time; an argmax over long rows keeps 64 lanes.
"""

from __future__ import annotations

import math
import re

from ... import _dtype
from ...ops import _mathlib as mathlib
from . import erf_float
from .ir import (
    Buffer,
    Const,
    IBin,
    IExpr,
    IInt,
    Index,
    IVar,
    Load,
    Op,
    Pointwise,
    Reduction,
    numel,
)

CTYPES = {_dtype.float32: "float", _dtype.float64: "double", _dtype.int64: "int64_t",
          _dtype.int32: "int32_t", _dtype.int16: "int16_t", _dtype.int8: "int8_t",
          _dtype.uint8: "uint8_t", _dtype.bool_: "uint8_t"}
LANES = 16
ARG_LANES = 64
# Work (elements, times the reduced ones) from which a kernel is cut into pieces run by the C
# workers (`PRELUDE`), as the eager kernels share theirs (`_parallel.MIN_CHUNK`).
PARALLEL_WORK = 1 << 14
# The `K` slots the wrapper writes (see `Slots`).
K_RUN, K_THREADS = 0, 1


class Slots:
    """The graph-wide tables `P` (buffers) and `K` (integers) kernels read."""

    def __init__(self):
        self.buffers: dict = {}  # Buffer -> slot
        # K[0]: the C workers' entry (an address, written when the wrapper is loaded),
        # K[1]: the threads a kernel's pieces are shared among (written on every call).
        self.ints: list[int] = [0, 1]

    def buffer(self, buf: Buffer) -> int:
        """The `P` slot of `buf`."""
        if buf not in self.buffers:
            self.buffers[buf] = len(self.buffers)
        return self.buffers[buf]

    def int(self, value: int) -> int:
        """A new `K` slot holding `value`."""
        self.ints.append(int(value))
        return len(self.ints) - 1


def _vars(index) -> set:
    out: set = set()
    for i in index:
        if isinstance(i, IVar):
            out.add(i.name)
        elif isinstance(i, IBin):
            out |= _vars((i.a, i.b))
    return out


def _c_number(value, dtype) -> str:
    ct = CTYPES[dtype]
    if dtype.category == _dtype.FLOAT:
        v = float(value)
        if math.isnan(v):
            text = "NAN"
        elif math.isinf(v):
            text = "INFINITY" if v > 0 else "-INFINITY"
        else:
            text = v.hex()
        return f"(({ct}){text})"
    if dtype is _dtype.bool_:
        return "1" if value else "0"
    return f"(({ct}){int(value)}LL)"


# float32 erf in generated code: computed in float (`erf_float`), within 1 ulp, where the
# math library's (eager's) computes in double.
FLOAT32_ERF = "fg_erff_float"

# The C functions a costly operation calls: the math library's and the square root and
# power (see `costly`).
_MATH_NAMES = "|".join(re.escape(n) for n in sorted(
    {*mathlib.FLOAT32.values(), *mathlib.FLOAT64.values(), "sqrt", "sqrtf", "pow", "powf",
     FLOAT32_ERF},
    key=len, reverse=True))
_MATH_CALL = re.compile(rf"(?<![\w.])({_MATH_NAMES})\(")


def costly(e: Op) -> bool:
    """Whether operation `e` costs far more than a load: its C form divides (a division by
    a number excepted: one multiplication or division, hoisted where its operand is
    loop-invariant) or calls a math function."""
    if e.name == "cast" or (e.name == "truediv" and isinstance(e.args[1], Const)):
        return False
    try:
        text = KernelWriter(Slots()).op(e, ["a"] * len(e.args))
    except (NotImplementedError, KeyError, AttributeError, IndexError):
        return False
    return "/" in text or "%" in text or _MATH_CALL.search(text) is not None


class KernelWriter:
    """Renders one kernel's body: temporaries for sub-expressions (shared when equal)."""

    def __init__(self, slots: Slots, exact: bool = False):
        self.slots = slots
        self.lines: list[str] = []
        self.cse: dict = {}
        self.kslots: dict = {}  # value -> local name (equal values share one slot)
        self.ptrs: dict = {}
        self.exact = exact
        self.uses_fast = False
        # Whether the kernel is cut into pieces (every top-level loop nest over the piece's
        # range: `_top`), and the work of its top-level nests (`_render` decides from it).
        self.cut = False
        self.top_work = 0
        self.ops: list[str] = []
        self.tmp = 0
        # Loads not depending on these (innermost) loop variables are read once, before
        # the innermost loop: gcc then vectorises it (it does not hoist them itself).
        self.inner: set = set()
        self.hoisted: list[str] = []
        self.offsets: dict = {}  # hoisted address offsets: C text -> local name

    def kint(self, value: int) -> str:
        """The local holding integer `value` (read from `K`)."""
        if value not in self.kslots:
            self.kslots[value] = (f"ks{len(self.kslots)}", self.slots.int(value))
        return self.kslots[value][0]

    def index(self, e) -> str:
        """C text of an index expression."""
        if isinstance(e, IVar):
            return e.name
        if isinstance(e, IInt):
            return str(e.value) if e.value in (0, 1) else self.kint(e.value)
        if isinstance(e, IBin):
            a, b = self.index(e.a), self.index(e.b)
            if e.op in ("min", "max"):
                return f"({a} {'<' if e.op == 'min' else '>'} {b} ? {a} : {b})"
            return f"({a} {e.op} {b})"
        raise TypeError(e)

    def pointer(self, buf: Buffer, write: bool = False) -> str:
        """The local pointer variable of `buf`."""
        if buf not in self.ptrs:
            self.ptrs[buf] = (f"{'out' if write else 'in'}{len(self.ptrs)}", write)
        return self.ptrs[buf][0]

    def address(self, buf: Buffer, index) -> str:
        """`ptr[offset]` of `buf` at logical `index`."""
        terms = [] if buf.offset == 0 else [self.kint(buf.offset)]
        outer: list[str] = []  # terms not depending on the innermost loop variables
        for i, s in zip(index, buf.strides):
            if isinstance(i, IInt) and i.value == 0 or s == 0:
                continue
            t = self.index(i)
            term = t if s == 1 else f"{t} * {self.kint(s)}"
            if self.inner and not (_vars((i,)) & self.inner):
                outer.append(term)
            else:
                terms.append(term)
        if outer and any("/" in t or "%" in t for t in outer):
            # Computed once before the innermost loop: a division or remainder of an outer
            # variable in the address stops gcc from vectorising the loop ("evolution of
            # base is not affine"), as a reshape of a merged dim gives.
            text = " + ".join(outer)
            name = self.offsets.get(text)
            if name is None:
                name = self.offsets[text] = f"off{len(self.offsets)}"
                self.hoisted.append(f"const int64_t {name} = {text};")
            outer = [name]
        return f"{self.pointer(buf)}[{' + '.join(outer + terms) or '0'}]"

    def emit(self, line: str) -> None:
        """Add a line to the body."""
        self.lines.append(line)

    def value(self, e) -> str:
        """A name or literal holding `e`'s value (emitting temporaries as needed)."""
        if isinstance(e, Const):
            return _c_number(e.value, e.dtype or _dtype.float32)
        if isinstance(e, Load):
            text = self.address(e.buffer, e.index)
        elif isinstance(e, Index):
            text = f"((int64_t){self.index(e.expr)})"
        else:
            args = [self.value(a) for a in e.args]
            text = self.op(e, args)
        if text in self.cse:
            return self.cse[text]
        name = f"tmp{self.tmp}"
        self.tmp += 1
        line = f"{CTYPES[e.dtype]} {name} = {text};"
        if isinstance(e, Load) and self.inner and not (_vars(e.index) & self.inner):
            self.hoisted.append(line)
        else:
            self.emit(line)
        self.cse[text] = name
        return name

    def op(self, e: Op, a: list) -> str:
        """C text of one operation on already-named operands."""
        name, dt = e.name, e.dtype
        arg_dt = e.args[0].dtype if e.args and e.args[0].dtype is not None else dt
        if name != "cast":
            self.ops.append(name)
        is_f = arg_dt.category == _dtype.FLOAT
        if name in ("add", "sub", "mul"):
            if dt is _dtype.bool_:
                return f"({a[0]} {'|' if name == 'add' else '&'} {a[1]})"
            return f"({a[0]} {dict(add='+', sub='-', mul='*')[name]} {a[1]})"
        if name == "truediv":
            return f"({a[0]} / {a[1]})"
        if name == "neg":
            return f"(-{a[0]})"
        if name == "abs":
            if is_f:
                return f"{'fabsf' if arg_dt is _dtype.float32 else 'fabs'}({a[0]})"
            return a[0] if dt is _dtype.bool_ else f"({a[0]} < 0 ? -{a[0]} : {a[0]})"
        if name in ("maximum", "minimum"):
            cmp = ">" if name == "maximum" else "<"  # ties give b, as NumPy's kernels
            nan = f" | ({a[0]} != {a[0]})" if is_f else ""
            return f"((({a[0]} {cmp} {a[1]}){nan}) ? {a[0]} : {a[1]})"
        if name == "where":
            return f"({a[0]} ? {a[1]} : {a[2]})"
        if name in ("eq", "ne", "lt", "le", "gt", "ge"):
            sym = dict(eq="==", ne="!=", lt="<", le="<=", gt=">", ge=">=")[name]
            return f"({a[0]} {sym} {a[1]})"
        if name == "logical_not":
            return f"(!{a[0]})"
        if name == "bitwise_not":  # (the assignment narrows the int of `~` to the type)
            return f"(!{a[0]})" if dt is _dtype.bool_ else f"(~{a[0]})"
        if name.startswith("bitwise_"):  # and, or, xor (bool values are 0 or 1)
            sym = {"and": "&", "or": "|", "xor": "^"}[name[len("bitwise_"):]]
            return f"({a[0]} {sym} {a[1]})"
        if name == "cast":
            if dt is _dtype.bool_:
                return f"({a[0]} != 0)"
            if is_f and dt.category != _dtype.FLOAT and dt.category != _dtype.COMPLEX:
                # Float to integer as the CPU converts (eager's NumPy cast): the empty asm
                # hides where the integer came from, or GCC (-fno-trapping-math, SSE4.1)
                # folds `(float)(int64_t)x` into truncf(x), which keeps -0.0 and NaN.
                # A type narrower than 32 bits goes through int32 (C leaves `(uint8_t)-1.0f`
                # undefined; GCC gives 0): the CPU's conversion, then the low bits, as
                # eager's (-1.0 -> 255 for uint8, 200.0 -> -56 for int8, NaN -> 0).
                ct = CTYPES[dt]
                it = "int32_t" if dt.itemsize < 4 else ct
                return f"(({ct})({{ {it} fg_i = ({it}){a[0]}; __asm__(\"\" : \"+r\"(fg_i)); " \
                       "fg_i; }))"
            return f"(({CTYPES[dt]}){a[0]})"
        if name == "sqrt":
            return f"{'sqrtf' if dt is _dtype.float32 else 'sqrt'}({a[0]})"
        if name == "rsqrt":
            one = _c_number(1, dt)
            return f"({one} / {'sqrtf' if dt is _dtype.float32 else 'sqrt'}({a[0]}))"
        if name == "pow":
            return f"{'powf' if dt is _dtype.float32 else 'pow'}({a[0]}, {a[1]})"
        if name == "sigmoid" and dt is _dtype.float64:
            return f"(1.0 / (1.0 + exp(-{a[0]})))"
        if name == "erf" and dt is _dtype.float32:
            return f"{FLOAT32_ERF}({a[0]})"
        table = mathlib.FLOAT32 if dt is _dtype.float32 else mathlib.FLOAT64
        if name in table:
            fn = table[name]
            if fn in mathlib.EXACT:
                self.uses_fast = True
                if self.exact:
                    fn = mathlib.EXACT[fn]
                else:
                    self.emit(f"fg_large |= fg_trig_large({a[0]});")
            return f"{fn}({a[0]})"
        raise NotImplementedError(f"no C form for {name}")

    def declarations(self) -> list[str]:
        """Pointer and integer locals read from `P` and `K`."""
        out = []
        for buf, (name, write) in self.ptrs.items():
            ct = CTYPES[buf.dtype]
            const = "" if write else "const "
            slot = self.slots.buffer(buf)
            out.append(f"{const}{ct} *restrict {name} = ({const}{ct} *)P[{slot}];")
        for name, slot in self.kslots.values():
            out.append(f"const int64_t {name} = K[{slot}];")
        return out


def _loops(w: KernelWriter, extents: list, names: list, inner: list[str], work: int,
           hoisted: tuple = ()) -> list:
    """Nested loops over `extents` around `inner` lines, `hoisted` lines just before the
    innermost loop; the outermost cut into the piece's range in a kernel cut into pieces
    (`work` > 0: a top-level nest; 0: a nest inside another)."""
    if not extents:  # (a 0-d result: nothing to cut, and no reason to cut the kernel)
        lines = list(hoisted) + inner
        return _first_piece(lines) if w.cut and work > 0 else lines
    heads = [f"for (int64_t {v} = 0; {v} < {n}; {v}++) {{" for n, v in zip(extents, names)]
    return _nest(w, heads, inner, work, hoisted)


def _nest(w: KernelWriter, heads: list[str], inner: list[str], work: int,
          hoisted) -> list:
    """The loops opened by `heads` (outermost first) around `inner`, `hoisted` lines just
    before the innermost loop; in a kernel cut into pieces, the outermost loop of more than
    one iteration of a top-level nest (`work` > 0) runs over the range of the piece
    (`_ranged`)."""
    lines: list[str] = []
    ranged = _top(w, work)
    for depth, head in enumerate(heads):
        pad = "  " * depth
        if depth == len(heads) - 1:
            lines += [pad + x for x in hoisted]
        if ranged:
            cut = _ranged(w, head)
            if cut is not None:
                head, ranged = cut, False
        lines.append(pad + head)
    lines += ["  " * len(heads) + x for x in inner]
    lines += ["  " * d + "}" for d in range(len(heads) - 1, -1, -1)]
    return _first_piece(lines) if ranged else lines  # (no loop to cut)


def _top(w: KernelWriter, work: int) -> bool:
    """Whether a top-level loop nest of `work` (> 0; 0: a nest inside another) is cut into
    the piece's range; its work counts towards the kernel's (`_render`)."""
    w.top_work += work
    return w.cut and work > 0


def _first_piece(lines: list[str]) -> list[str]:
    """A top-level nest of a kernel cut into pieces that has no loop of more than one
    iteration to cut: run by the first piece alone (every element is written once)."""
    return ["if (fg_start == 0) {"] + ["  " + x for x in lines] + ["}"]


_HEAD = re.compile(r"for \(int64_t (\w+) = 0; \1 < (\w+); \1(\+\+| \+= (\w+))\) \{$")


def _ranged(w: KernelWriter, head: str) -> str | None:
    """Loop `head` (`for (int64_t v = 0; v < n; v++ or v += step) {`) over the range of
    the kernel's piece: its iterations (steps) cut in `fg_units` equal shares, of which the
    piece runs shares [fg_start, fg_stop). None for a loop of one iteration (a size-1 dim:
    the next loop is cut instead). The cut never changes what an iteration computes, so
    the results are the same bits at every thread count."""
    m = _HEAD.match(head)
    if m is None or m.group(2) == "1":
        return None
    v, n, step = m.group(1), m.group(2), m.group(4) or "1"
    return (f"for (int64_t {v} = fg_lo({n}, {step}, fg_start, fg_units); "
            f"{v} < fg_lo({n}, {step}, fg_stop, fg_units); {v} += {step}) {{")


def loop_order(shape, strides) -> list:
    """The dims of an output of `shape` and `strides` in the order its loops nest: its
    memory order (largest stride outermost; ties and size-1 dims in logical order), so the
    innermost loop writes contiguously. A transposed output (a `clone` of `x.t()` keeps
    eager's transposed layout) then reads its transposed input contiguously too."""
    dims = list(range(len(shape)))
    sized = [d for d in dims if int(shape[d]) != 1]
    ordered = sorted(sized, key=lambda d: -abs(int(strides[d])))  # (stable: ties keep order)
    if ordered == sorted(ordered):
        return dims
    # Size-1 dims after the outermost loop (the one cut into pieces), before the innermost.
    return ordered[:1] + [d for d in dims if int(shape[d]) == 1] + ordered[1:]


# Tile edge of a transposing pointwise kernel (`_pointwise_nest`): measured on 2048x1024
# float32, 16 beat 8, 32 and 64 (10.5 ms untiled, 1.85 ms at 16).
TILE = 16


def _distinct_loads(e) -> list:
    """The `Load`s of `e`, each shared sub-expression visited once."""
    return [x for x in _distinct_nodes(e) if isinstance(x, Load)]


def _transposes(value, inner: str, second: str) -> bool:
    """Whether a load in `value` walks memory along the `second` loop variable and jumps
    along the `inner` one (a transposed read under a contiguous write): the two innermost
    loops are then tiled, so both sides stay in cache."""
    for ld in _distinct_loads(value):
        steps: dict = {}
        for i, s in zip(ld.index, ld.buffer.strides):
            if isinstance(i, IVar):
                steps[i.name] = steps.get(i.name, 0) + int(s)
        if abs(steps.get(second, 0)) == 1 and abs(steps.get(inner, 0)) >= TILE:
            return True
    return False


def _pointwise_nest(node: Pointwise, out: Buffer, w: KernelWriter,
                    absorbed: tuple = ()) -> list:
    if node.pieces is None:
        if absorbed:
            return _with_absorbed(node, out, w, absorbed)
        return _pointwise_piece(node.shape, node.fn, out, w, None, 0)
    dim, pieces = node.pieces
    lines: list[str] = []
    for start, size, fn in pieces:  # one loop nest per piece, its dim counted from 0
        shape = tuple(node.shape[:dim]) + (size,) + tuple(node.shape[dim + 1:])
        piece = _pointwise_piece(shape, fn, out, w, dim, start)
        lines += ["{"] + ["  " + x for x in piece] + ["}"]  # (its hoisted names are local)
    return lines


def _with_absorbed(node: Pointwise, out: Buffer, w: KernelWriter, absorbed: tuple) -> list:
    """`node`'s loops computing the `absorbed` producers ((Pointwise, buffer) pairs, see
    `schedule._absorb_producers`) inline and storing each where `node` read it: each
    producer's index is taken from a load of its buffer (with the others inline), then all
    are computed inline, their stores emitted beside `node`'s (the kernel's CSE shares the
    operations)."""
    from .ir import Load, inline_producers, walk

    inline = {p.buffer: p for p, _ in absorbed}
    idx = tuple(IVar(f"x{i}") for i in range(len(node.shape)))
    stores = []
    for p, buf in absorbed:
        others = {b: q for b, q in inline.items() if q is not p}
        at = next(e.index for e in walk(inline_producers(node.fn(idx), others))
                  if isinstance(e, Load) and e.buffer is p.buffer)
        stores.append((lambda index, p=p: inline_producers(p.fn(index), inline), buf, at))
    return _pointwise_piece(node.shape, lambda index: inline_producers(node.fn(index), inline),
                            out, w, None, 0, stores)


def _pointwise_piece(shape: tuple, fn, out: Buffer, w: KernelWriter, dim: int | None,
                     start: int, stores: list = ()) -> list:
    """Loops computing `fn` over `shape` into `out`, whose index along `dim` is `start` more
    (the whole of a pointwise node where `dim` is None); `stores`: (value of an index,
    buffer, index over `x0`, `x1`, ...) of absorbed producers, computed and stored at that
    index too."""
    w.lines, w.cse = [], {}
    idx = [IVar(f"x{i}") for i in range(len(shape))]
    order = loop_order(shape, out.strides)
    _out_ptr(w, out)
    extents = [shape[d] for d in order]
    names = [str(idx[d]) for d in order]
    split = _split(fn, idx, order[-1], int(shape[order[-1]])) if idx else None
    if split is not None:
        # The innermost variable read divided and remaindered by `c` (a reshape merging
        # dims): two loops, so the addresses are affine in the innermost one.
        c = split
        v = names[-1]
        hi, lo = IVar(v + "q"), IVar(v + "r")
        idx[order[-1]] = hi * IInt(c) + lo
        extents[-1:] = [int(shape[order[-1]]) // c, c]
        names[-1:] = [hi.name, lo.name]
        bounds = {hi.name: extents[-2], lo.name: c}

        def mapped(e):
            return _map_indices(e, lambda i: _simplify(i, bounds), {})
    else:
        def mapped(e):
            return e
    value = mapped(fn(tuple(idx)))
    w.inner, w.hoisted, w.offsets = {names[-1]} if names else set(), [], {}
    v = w.value(value)
    at = list(idx)
    if dim is not None and start:
        at[dim] = IInt(start) + at[dim]
    w.emit(f"{w.address(out, at)} = {v};")
    sub = {f"x{i}": e for i, e in enumerate(idx)}
    for value_at, buf, index in stores:
        # (the producer's index over the original loop variables, as `idx` now spells them)
        pat = [_simplify(_substitute(e, sub), bounds) if split is not None else
               _substitute(e, sub) for e in index]
        pv = w.value(mapped(value_at(tuple(pat))))
        _out_ptr(w, buf)
        w.emit(f"{w.address(buf, pat)} = {pv};")
    work = numel(shape)
    sized = [i for i, n in enumerate(extents) if int(n) != 1]
    extents = [w.kint(n) if n != 1 else "1" for n in extents]
    if len(sized) >= 2 and sized[-1] == len(extents) - 1 and \
            sized[-2] == len(extents) - 2 and _transposes(value, names[-1], names[-2]):
        return _tiled_loops(w, extents, names, w.lines, work, w.hoisted)
    return _loops(w, extents, names, w.lines, work, w.hoisted)


# The smallest divisor worth splitting a loop for (an innermost loop of fewer elements
# costs more in loop overhead than the division it saves).
_MIN_SPLIT = 4


def _split(fn, idx: list, d: int, n: int) -> int | None:
    """The divisor `c` by which the loads of `fn` divide or take the remainder of loop
    variable `idx[d]` (of extent `n`, a multiple of `c`), or None: the smallest such."""
    name = idx[d].name
    found: set = set()

    def visit(e) -> None:
        if isinstance(e, IBin):
            if e.op in ("/", "%") and e.a == IVar(name) and isinstance(e.b, IInt):
                found.add(e.b.value)
            visit(e.a)
            visit(e.b)

    for x in _distinct_nodes(fn(tuple(idx))):
        if isinstance(x, Load):
            for i in x.index:
                visit(i)
        elif isinstance(x, Index):
            visit(x.expr)
    good = [c for c in found if _MIN_SPLIT <= c < n and n % c == 0]
    return min(good) if good else None


def _distinct_nodes(e) -> list:
    """Every sub-expression of `e`, each shared one once."""
    seen: set = set()
    out: list = []
    stack = [e]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        out.append(x)
        if isinstance(x, Op):
            stack.extend(x.args)
    return out


def _substitute(e, values: dict):
    """Index expression `e` with each variable named in `values` replaced by its value."""
    if isinstance(e, IVar):
        return values.get(e.name, e)
    if isinstance(e, IBin):
        return IBin(e.op, _substitute(e.a, values), _substitute(e.b, values))
    return e


def _map_indices(e, f, memo: dict):
    """`e` with `f` applied to every index expression of its loads and `Index` values.
    (`memo` is keyed by identity and keeps each key beside its result, so that no key dies
    and lends its id to another expression while the memo lives: `ir.inline_producers`.)"""
    got = memo.get(id(e))
    if got is not None:
        return got[1]
    if isinstance(e, Load):
        r = Load(e.buffer, tuple(f(i) for i in e.index), e.dtype)
    elif isinstance(e, Index):
        r = Index(f(e.expr), e.dtype)
    elif isinstance(e, Op):
        r = Op(e.name, tuple(_map_indices(a, f, memo) for a in e.args), e.dtype)
    else:
        r = e
    memo[id(e)] = (e, r)
    return r


def _terms(e) -> dict:
    """`e` as {atom: coefficient} (the key None: the constant), its atoms variables or
    sub-expressions other than sums and products by a number."""
    if isinstance(e, IInt):
        return {None: e.value}
    if isinstance(e, IBin) and e.op == "+":
        out = dict(_terms(e.a))
        for k, v in _terms(e.b).items():
            out[k] = out.get(k, 0) + v
        return out
    if isinstance(e, IBin) and e.op == "*":
        for a, b in ((e.a, e.b), (e.b, e.a)):
            if isinstance(b, IInt):
                return {k: v * b.value for k, v in _terms(a).items()}
    return {e: 1}


def _nonneg(e) -> bool:
    """Whether atom `e` is never negative (the IR divides only non-negative integers)."""
    if isinstance(e, (IVar, IInt)):
        return not isinstance(e, IInt) or e.value >= 0
    if e.op in ("/", "%", "+", "*"):
        return _nonneg(e.a) and _nonneg(e.b)
    if e.op == "max":
        return _nonneg(e.a) or _nonneg(e.b)
    return _nonneg(e.a) and _nonneg(e.b)  # min


def _bound(e, bounds: dict) -> int | None:
    """An exclusive upper bound of non-negative atom `e`, or None when unknown."""
    if isinstance(e, IVar):
        return bounds.get(e.name)
    if isinstance(e, IBin) and e.op == "%" and isinstance(e.b, IInt):
        return e.b.value
    return None


def _rebuild(terms: dict, const: int) -> IExpr:
    out: IExpr = IInt(0)
    for atom, coef in terms.items():
        out = out + (atom if coef == 1 else atom * IInt(coef))
    return out + IInt(const) if const else out


def _simplify(e, bounds: dict):
    """`e` with each `a / c` and `a % c` written without the division where `a` is
    `c * Q + R` with `0 <= R < c` (known from the variables' extents in `bounds`):
    `(x1q * 32 + x1r) / 32` is `x1q`, its remainder `x1r`. Other expressions are kept."""
    if not isinstance(e, IBin):
        return e
    a, b = _simplify(e.a, bounds), _simplify(e.b, bounds)
    if e.op in ("/", "%") and isinstance(b, IInt) and b.value > 0:
        c = b.value
        terms = _terms(a)
        const = terms.pop(None, 0)
        if const >= 0 and all(k >= 0 and _nonneg(t) for t, k in terms.items()):
            q = {t: k // c for t, k in terms.items() if k % c == 0}
            r = {t: k for t, k in terms.items() if k % c}
            top = const % c
            for t, k in r.items():
                hi = _bound(t, bounds)
                top = None if hi is None or top is None else top + k * (hi - 1)
            if top is not None and top < c:
                return _rebuild(q, const // c) if e.op == "/" else _rebuild(r, const % c)
    if a is e.a and b is e.b:
        return e
    return IBin(e.op, a, b)


def _tiled_loops(w: KernelWriter, extents: list, names: list, inner: list[str], work: int,
                 hoisted: list) -> list:
    """`_loops` with the two innermost loops split into `TILE` x `TILE` blocks (the block
    loops outside, the outermost cut into pieces as `_loops` cuts it)."""
    heads = [f"for (int64_t {v} = 0; {v} < {n}; {v}++) {{"
             for n, v in zip(extents[:-2], names[:-2])]
    heads += [f"for (int64_t {v}t = 0; {v}t < {n}; {v}t += {TILE}) {{"
              for n, v in zip(extents[-2:], names[-2:])]
    heads += [f"for (int64_t {v} = {v}t; {v} < ({v}t + {TILE} < {n} ? {v}t + {TILE} : {n}); "
              f"{v}++) {{" for n, v in zip(extents[-2:], names[-2:])]
    return _nest(w, heads, inner, work, hoisted)


def _pointwise_inner(node: Pointwise, out: Buffer, w: KernelWriter, k: int) -> list:
    """Loops over the dims of `node` after the first `k` (whose indices are set)."""
    w.lines, w.cse = [], {}
    idx = [IVar(f"x{i}") for i in range(len(node.shape))]
    _out_ptr(w, out)
    w.inner, w.hoisted, w.offsets = ({str(idx[-1])} if len(idx) > k else set()), [], {}
    v = w.value(node.fn(tuple(idx)))
    w.emit(f"{w.address(out, idx)} = {v};")
    extents = [w.kint(n) if n != 1 else "1" for n in node.shape[k:]]
    lines = w.lines
    depth = 0
    out_lines: list[str] = []
    for i, (n, var) in enumerate(zip(extents, idx[k:])):
        if i == len(extents) - 1:
            out_lines += ["  " * depth + x for x in w.hoisted]
        out_lines.append("  " * depth + f"for (int64_t {var} = 0; {var} < {n}; {var}++) {{")
        depth += 1
    out_lines += ["  " * depth + x for x in lines]
    out_lines += ["  " * d + "}" for d in range(depth - 1, -1, -1)]
    return ["{"] + ["  " + x for x in out_lines] + ["}"]


def _out_ptr(w: KernelWriter, out: Buffer) -> str:
    if out not in w.ptrs:
        w.ptrs[out] = (f"out{len(w.ptrs)}", True)
    return w.ptrs[out][0]




_INIT = {"sum": "0", "prod": "1"}


# Output elements a column reduction (`_column_nest`) computes side by side.
COLUMNS = 64


def _is_column(node: Reduction) -> bool:
    """Whether `node` reduces across rows of memory (a bias gradient, a sum over the
    batch): every load depending on the reduced indices is contiguous along the last output
    dim and not along the last reduced one. The row-by-row loop would read one element per
    cache line (and not vectorise); `_column_nest` reads whole rows."""
    from .ir import walk

    if (node.kind not in _INIT and node.kind not in ("max", "min")) or not node.shape or \
            not node.reduced_shape or int(node.shape[-1]) < LANES:
        return False
    idx = tuple(IVar(f"x{i}") for i in range(len(node.shape)))
    ridx = tuple(IVar(f"r{i}") for i in range(len(node.reduced_shape)))
    rnames = {str(r) for r in ridx}
    xnames = {str(i) for i in idx}
    loads = [e for e in walk(node.fn(idx, ridx)) if isinstance(e, Load)]
    # (A load that no output index reads, a row's scalar such as layer norm's 1 / std, is
    # the same for every column of the block: any layout of it is read once per row.)
    reading = [ld for ld in loads if _vars(ld.index) & rnames and _vars(ld.index) & xnames]
    if not reading:
        return False
    for ld in reading:
        dims = list(zip(ld.index, ld.buffer.strides))
        if not any(i == idx[-1] and s == 1 for i, s in dims) or \
                any(i == ridx[-1] and s == 1 for i, s in dims):
            return False
    return True


def _column_nest(node: Reduction, out: Buffer, w: KernelWriter) -> list:
    """`node` computed for `COLUMNS` outputs along its last dim at a time: each reduced
    element updates the accumulators of all of them (a loop gcc vectorises over contiguous
    memory). Each output's accumulation is the row-by-row kernel's, in the same order
    (`LANES` accumulators over the last reduced index, the tail into the first, combined
    in order at the end), so the results are the same bits."""
    idx = [IVar(f"x{i}") for i in range(len(node.shape))]
    ridx = [IVar(f"r{i}") for i in range(len(node.reduced_shape))]
    last, rlast = str(idx[-1]), str(ridx[-1])
    acc_t = CTYPES[node.dtype]
    if node.kind == "sum" and node.dtype is _dtype.float32:
        acc_t = "double"  # as `_reduction_body`
    kind = node.kind
    if kind in _INIT:
        init = _INIT[kind]
    elif node.dtype.category == _dtype.FLOAT:
        init = "-INFINITY" if kind == "max" else "INFINITY"
    else:
        return _row_nest(node, out, w)  # (integer max/min: the row kernel's start values)
    w.lines, w.cse = [], {}
    _out_ptr(w, out)
    w.inner, w.hoisted, w.offsets = {str(r) for r in ridx} | {last}, [], {}
    body = w.value(node.fn(tuple(idx), tuple(ridx)))
    w.ops.append(node.kind)  # (a kernel is named by its reduction too, not `copy`)
    body_lines, w.lines = w.lines, []
    store = w.address(out, idx)

    def combine(acc: str, v: str) -> str:
        if kind == "sum":
            return f"{acc} += {v};"
        if kind == "prod":
            return f"{acc} *= {v};"
        cmp = ">" if kind == "max" else "<"
        return f"{acc} = ((({v} {cmp} {acc}) | ({v} != {v})) ? {v} : {acc});"

    n_last = w.kint(node.shape[-1])
    rext = [w.kint(n) if n != 1 else "1" for n in node.reduced_shape]
    B = COLUMNS

    def columns(acc: str, r_value: str) -> list:
        return ([f"int64_t {rlast} = {r_value};", "for (int64_t j = 0; j < nb; j++) {",
                 f"  int64_t {last} = xb + j;"] + ["  " + x for x in body_lines] +
                [f"  {combine(acc, body)}", "}"])

    nest = ["int64_t rb = 0;", f"for (; rb + {LANES} <= {rext[-1]}; rb += {LANES}) {{",
            f"  for (int l = 0; l < {LANES}; l++) {{"]
    nest += ["    " + x for x in columns("acc[l][j]", "rb + l")] + ["  }", "}"]
    nest += [f"for (; rb < {rext[-1]}; rb++) {{"]
    nest += ["  " + x for x in columns("acc[0][j]", "rb")] + ["}"]
    block = [f"const int64_t nb = {n_last} - xb < {B} ? {n_last} - xb : {B};",
             f"{acc_t} acc[{LANES}][{B}];",
             f"for (int l = 0; l < {LANES}; l++) "
             f"for (int j = 0; j < {B}; j++) acc[l][j] = {init};"]
    block += _loops(w, rext[:-1], [str(r) for r in ridx[:-1]], nest, 0)
    block += ["for (int64_t j = 0; j < nb; j++) {", f"  int64_t {last} = xb + j;",
              f"  {acc_t} res = acc[0][j];",
              f"  for (int l = 1; l < {LANES}; l++) {{ {combine('res', 'acc[l][j]')} }}",
              f"  {store} = ({CTYPES[node.dtype]})res;", "}"]
    work = numel(node.shape) * numel(node.reduced_shape)
    lines = list(w.hoisted)
    head = f"for (int64_t xb = 0; xb < {n_last}; xb += {B}) {{"
    if len(idx) == 1:  # the column blocks are the top-level loop
        if not _top(w, work):
            return lines + [head] + ["  " + x for x in block] + ["}"]
        cut = _ranged(w, head)
        if cut is None:
            return lines + _first_piece([head] + ["  " + x for x in block] + ["}"])
        return lines + [cut] + ["  " + x for x in block] + ["}"]
    lines += [head] + ["  " + x for x in block] + ["}"]
    extents = [w.kint(n) if n != 1 else "1" for n in node.shape[:-1]]
    return _loops(w, extents, [str(i) for i in idx[:-1]], lines, work)


def _reduction_nest(node: Reduction, out: Buffer, w: KernelWriter) -> list:
    if _is_column(node):
        return _column_nest(node, out, w)
    return _row_nest(node, out, w)


def _row_nest(node: Reduction, out: Buffer, w: KernelWriter) -> list:
    idx = [IVar(f"x{i}") for i in range(len(node.shape))]
    inner = _reduction_body(node, out, w, idx)
    extents = [w.kint(n) if n != 1 else "1" for n in node.shape]
    work = numel(node.shape) * numel(node.reduced_shape)
    return _loops(w, extents, [str(i) for i in idx], inner, work)


def _reduction_body(node: Reduction, out: Buffer, w: KernelWriter, idx: list) -> list:
    """Lines computing one output element of `node` (the outer indices `idx` are set)."""
    w.lines, w.cse = [], {}
    ridx = [IVar(f"r{i}") for i in range(len(node.reduced_shape))]
    acc_t = CTYPES[node.dtype]
    if node.kind == "sum" and node.dtype is _dtype.float32:
        acc_t = "double"  # float sums accumulate in double: closer to NumPy's pairwise sum
    kind = node.kind
    arg = kind in ("argmax", "argmin")
    if arg:  # the accumulator holds the values; `ai` the index of each lane's choice
        value_dt = node.fn(tuple(idx), tuple(ridx)).dtype
        acc_t = CTYPES[value_dt]
        kind = kind[3:]
    else:
        value_dt = node.dtype
    if kind in ("max", "min"):
        if value_dt.category == _dtype.FLOAT:
            init = "-INFINITY" if kind == "max" else "INFINITY"
        else:
            init = f"(({acc_t}){'INT64_MIN' if kind == 'max' else 'INT64_MAX'})"
            if value_dt is not _dtype.int64:
                info = {_dtype.int32: (-2**31, 2**31 - 1), _dtype.int16: (-2**15, 2**15 - 1),
                        _dtype.int8: (-128, 127), _dtype.uint8: (0, 255),
                        _dtype.bool_: (0, 1)}[value_dt]
                init = str(info[0] if kind == "max" else info[1])
    elif kind in _INIT:
        init = _INIT[kind]
    else:
        raise NotImplementedError(f"reduction {kind}")
    _out_ptr(w, out)
    w.inner, w.hoisted, w.offsets = {str(r) for r in ridx}, [], {}
    body = w.value(node.fn(tuple(idx), tuple(ridx)))
    w.ops.append(node.kind)  # (a kernel is named by its reduction too, not `copy`)
    body_lines, w.lines = w.lines, []

    is_f = value_dt.category == _dtype.FLOAT
    flat = IInt(0)
    for r, n in zip(ridx, node.reduced_shape):
        flat = flat * IInt(n) + r
    flat_c = w.index(flat)

    def combine(acc: str, v: str, vi: str = "", ai: str = "") -> str:
        if arg:
            cmp = ">" if kind == "max" else "<"
            take = f"({v} {cmp} {acc})"
            if is_f:  # the first NaN wins
                take += f" | (({v} != {v}) & ({acc} == {acc}))"
            if ai.startswith("ri"):  # merging lanes: ties go to the smaller index
                same = f"({v} == {acc})" + (f" | (({v} != {v}) & ({acc} != {acc}))"
                                            if is_f else "")
                take += f" | (({same}) & ({vi} < {ai}))"
            return (f"{{ int fg_take = {take}; {acc} = fg_take ? {v} : {acc}; "
                    f"{ai} = fg_take ? {vi} : {ai}; }}")
        if kind == "sum":
            return f"{acc} += {v};"
        if kind == "prod":
            return f"{acc} *= {v};"
        cmp = ">" if kind == "max" else "<"
        # `|`, not `||`: no branch, so gcc vectorises the lanes.
        nan = f" | ({v} != {v})" if node.dtype.category == _dtype.FLOAT else ""
        return f"{acc} = (({v} {cmp} {acc}){nan}) ? {v} : {acc};"

    # An argmax/argmin over long rows keeps `ARG_LANES` lanes: four independent vectors, as
    # the compare and select of one lane wait for its previous element (16 lanes: 0.40 ->
    # 0.29 ms on 2048x1024 float32; each lane still keeps its first maximum, so the same
    # index). Over rows shorter than `LANES` one lane: no lanes to merge per row.
    lanes = LANES
    if arg and node.reduced_shape:
        n_red = int(node.reduced_shape[-1])
        lanes = ARG_LANES if n_red >= 4 * ARG_LANES else LANES if n_red >= LANES else 1
    inner: list[str] = w.hoisted + [f"{acc_t} acc[{lanes}];",
                                    f"for (int l = 0; l < {lanes}; l++) acc[l] = {init};"]
    if arg:
        inner += [f"int64_t ai[{lanes}];", f"for (int l = 0; l < {lanes}; l++) ai[l] = 0;"]
    rext = [w.kint(n) if n != 1 else "1" for n in node.reduced_shape]
    # A float max/min keeps its NaN apart (`nv`: the lane's last NaN, which is what the
    # select with `| (v != v)` leaves in the lane), merged after the loops: the compare
    # chain through `acc` is then one select (twice as fast), with the same bits.
    split_nan = kind in ("max", "min") and not arg and is_f and bool(ridx)
    if split_nan:
        inner += [f"{acc_t} nv[{LANES}];", f"for (int l = 0; l < {LANES}; l++) nv[l] = 0;"]

    def update(lane: str) -> str:
        if not split_nan:
            return combine(f"acc[{lane}]", body, flat_c, f"ai[{lane}]")
        a, cmp = f"acc[{lane}]", ">" if kind == "max" else "<"
        return (f"{a} = ({body} {cmp} {a}) ? {body} : {a}; "
                f"nv[{lane}] = ({body} != {body}) ? {body} : nv[{lane}];")

    if ridx:
        last, n_last = str(ridx[-1]), rext[-1]
        lane_body = [f"int64_t {last} = rb + l;"] + body_lines + [update("l")]
        tail_body = [f"int64_t {last} = rb;"] + body_lines + [update("0")]
        # A max/min's lane loop would be unrolled into 16 scalar select-accumulators,
        # which gcc does not vectorise ("unsupported use"): kept a loop, it is vectorised
        # over the lanes (one vector accumulator; same operations, same bits).
        keep = ['_Pragma("GCC unroll 1")'] if kind in ("max", "min") and not arg else []
        nest = ["int64_t rb = 0;"]
        for width in (lanes, LANES) if lanes > LANES else (lanes,) if lanes > 1 else ():
            # (an argmax's rest below `ARG_LANES` in blocks of `LANES` first: each lane
            # still sees its indices in increasing order)
            nest += [f"for (; rb + {width} <= {n_last}; rb += {width}) {{"]
            nest += ["  " + x for x in keep] + [f"  for (int l = 0; l < {width}; l++) {{"]
            nest += ["    " + x for x in lane_body] + ["  }", "}"]
        nest += [f"for (; rb < {n_last}; rb++) {{"]
        nest += ["  " + x for x in tail_body] + ["}"]
        inner += _loops(w, rext[:-1], [str(r) for r in ridx[:-1]], nest, 0)
        if split_nan:
            inner += [f"for (int l = 0; l < {LANES}; l++) "
                      "acc[l] = (nv[l] != nv[l]) ? nv[l] : acc[l];"]
    else:
        inner += body_lines + [combine("acc[0]", body, "0", "ai[0]")]
    if arg:
        # Lanes merged (ties and NaNs go to the smaller index): beyond `LANES` pairwise,
        # halving (whole vectors), then one by one.
        if lanes > LANES:
            inner += [f"for (int h = {lanes // 2}; h >= {LANES}; h /= 2) {{",
                      "  for (int l = 0; l < h; l++) {",
                      f"    {acc_t} res = acc[l]; int64_t ri = ai[l];",
                      f"    {combine('res', 'acc[l + h]', 'ai[l + h]', 'ri')}",
                      "    acc[l] = res; ai[l] = ri;", "  }", "}"]
        inner += [f"{acc_t} res = acc[0];", "int64_t ri = ai[0];"]
        if lanes > 1:
            inner += [f"for (int l = 1; l < {min(lanes, LANES)}; l++) "
                      f"{combine('res', 'acc[l]', 'ai[l]', 'ri')}"]
        inner += [f"{w.address(out, idx)} = ri;"]
    else:
        inner += [f"{acc_t} res = acc[0];",
                  f"for (int l = 1; l < {LANES}; l++) {{ {combine('res', 'acc[l]')} }}",
                  f"{w.address(out, idx)} = ({CTYPES[node.dtype]})res;"]
    return ["{"] + ["  " + x for x in inner] + ["}"]


def kernel_name(ops: list[str], number: int) -> str:
    """`cpp_fused_<ops in order of first use>_<n>`."""
    seen: list[str] = []
    for o in ops:
        if o not in seen:
            seen.append(o)
    return f"cpp_fused_{'_'.join(seen[:6]) or 'copy'}_{number}"


def render_kernel(node, out: Buffer, slots: Slots, number: int,
                  absorbed: tuple = ()) -> tuple[str, str]:
    """(name, C source) of the kernel computing `node` into `out` (and, for a pointwise
    node, the `absorbed` producers it reads: (Pointwise, buffer) pairs computed and stored
    in its loop)."""
    if absorbed:
        return _render(lambda w: _pointwise_nest(node, out, w, tuple(absorbed)), slots,
                       number)
    if hasattr(node, "accumulate"):  # a scatter kernel
        from .scatter import render

        return _render(lambda w: render(node, out, w), slots, number)
    nest = _reduction_nest if isinstance(node, Reduction) else _pointwise_nest
    return _render(lambda w: nest(node, out, w), slots, number)


def render_group(members: list, slots: Slots, number: int) -> tuple[str, str]:
    """(name, C source) of one kernel computing several (node, out) pairs that share their
    outer loop: the first is a reduction whose output shape is the outer index space; each
    member reads the earlier ones only at the current outer index, so one pass over the
    rows computes them all (a softmax's max, sum and division in one kernel)."""
    if all(isinstance(node, Reduction) and _is_column(node) for node, _ in members):
        # Column sums sharing their outputs' loop (a layer norm's weight and bias
        # gradients) would each read one element per cache line: each reads whole rows
        # in a loop nest of its own instead (the same bits; GPT's pair over 1024x128:
        # 0.22 -> 0.05 ms).
        def columns(w):
            lines: list[str] = []
            for node, out in members:
                lines += ["{"] + ["  " + x for x in _column_nest(node, out, w)] + ["}"]
            return lines

        return _render(columns, slots, number)
    outer = members[0][0].shape
    k = len(outer)
    idx = [IVar(f"x{i}") for i in range(k)]

    def nest(w):
        lines: list[str] = []
        work = 0
        for node, out in members:
            if isinstance(node, Reduction):
                lines += _reduction_body(node, out, w, idx)
                work += numel(node.shape) * numel(node.reduced_shape)
            else:
                lines += _pointwise_inner(node, out, w, k)
                work += numel(node.shape)
        extents = [w.kint(n) if n != 1 else "1" for n in outer]
        return _loops(w, extents, [str(i) for i in idx], lines, work)

    return _render(nest, slots, number)


def _render(nest, slots: Slots, number: int) -> tuple[str, str]:
    # Cut into pieces when the kernel's work is large: decided for the whole kernel (a
    # first rendering counts it), so that every top-level nest is cut alike and none is
    # run whole by every piece.
    probe = KernelWriter(Slots())
    nest(probe)
    w = KernelWriter(slots)
    w.cut = probe.top_work >= PARALLEL_WORK
    lines = nest(w)
    name = kernel_name(w.ops, number)
    exact_lines: list[str] = []
    if w.uses_fast:
        # Rare arguments the fast sin/cos cannot reduce: compute everything again with the
        # exact reduction (kernels never overwrite their inputs, so this is safe), over the
        # whole call whichever piece met one, so the bits never depend on the cut.
        exact = KernelWriter(slots, exact=True)
        exact.kslots, exact.ptrs, exact.cut = w.kslots, w.ptrs, w.cut
        exact_lines = nest(exact)
    decl = ["  " + x for x in w.declarations()]
    if not w.cut:  # one piece: the loops as they are
        src = [f"void {name}(void **restrict P, const int64_t *restrict K) {{"] + decl
        if w.uses_fast:
            src += ["  int fg_large = 0;"] + ["  " + x for x in lines]
            src += ["  if (fg_large) {"] + ["    " + x for x in exact_lines] + ["  }"]
        else:
            src += ["  " + x for x in lines]
        return name, "\n".join(src + ["}"])
    # The kernel running its pieces on the C workers (`fg_pieces`), then the loops over the
    # range of one piece (`_ranged`).
    head = (f"static void fg_piece_{name}(void **restrict P, const int64_t *restrict K, "
            "int64_t *fg_flag, int64_t fg_start, int64_t fg_stop, int64_t fg_units, "
            "int64_t fg_exact)")
    src = [head + ";", "", f"void {name}(void **restrict P, const int64_t *restrict K) {{",
           "  int64_t fg_flag = 0;", f"  fg_pieces(fg_piece_{name}, P, K, &fg_flag, 0);"]
    if w.uses_fast:
        src += [f"  if (fg_flag) fg_pieces(fg_piece_{name}, P, K, &fg_flag, 1);"]
    src += ["}", "", head + " {"] + decl
    if w.uses_fast:
        src += ["  int fg_large = 0;", "  if (!fg_exact) {"] + ["    " + x for x in lines]
        src += ["  } else {"] + ["    " + x for x in exact_lines] + ["  }"]
        src += ["  if (fg_large) __atomic_fetch_or(fg_flag, 1, __ATOMIC_RELAXED);"]
    else:
        src += ["  (void)fg_flag; (void)fg_exact;"] + ["  " + x for x in lines]
    return name, "\n".join(src + ["}"])


# Declared before the kernels: how a kernel whose loops run over ranges (`_ranged`) is cut
# into pieces. `K[0]` holds the address of the C workers' `fg_workers_call` (0: none) and
# `K[1]` the number of threads to share among, which the wrapper writes on every call
# (`Slots`). The workers call the piece function with all its arguments as 64-bit integers,
# its range at arguments 3 and 4; with FG_SERIAL (the build variant "serial") the kernel
# runs as one piece.
PRELUDE = """
typedef void (*fg_piece_fn)(void **, const int64_t *, int64_t *, int64_t, int64_t, int64_t,
                            int64_t);
typedef void (*fg_run_fn)(void *, const int64_t *, int64_t, int64_t, int64_t, int64_t);

/* The first step of shares [0, share) of a loop of `n` iterations, `step` at a time, cut
   in `units` shares (the end of the loop for share == units). */
static inline int64_t fg_lo(int64_t n, int64_t step, int64_t share, int64_t units) {
  const int64_t steps = (n + step - 1) / step;
  const int64_t at = steps * share / units * step;
  return at < n ? at : n;
}

static void fg_pieces(fg_piece_fn fn, void **P, const int64_t *K, int64_t *flag,
                      int64_t exact) {
  const int64_t threads = K[1];
#ifndef FG_SERIAL
  if (threads > 1 && K[0]) {
    const int64_t args[7] = {(int64_t)P, (int64_t)K, (int64_t)flag, 0, 0, threads, exact};
    ((fg_run_fn)K[0])((void *)fn, args, 7, 3, threads, threads);
    return;
  }
#endif
  (void)threads;
  fn(P, K, flag, 0, 1, 1, exact);
}
"""


def prefix() -> str:
    """What every kernel source is compiled after: the float32 math functions and
    `PRELUDE`."""
    return mathlib.source() + erf_float.source() + PRELUDE


def tidy(source: str) -> str:
    """Source with runs of blank lines collapsed (for printing)."""
    return re.sub(r"\n{3,}", "\n\n", source)
