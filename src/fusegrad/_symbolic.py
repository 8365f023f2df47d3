"""Symbolic sizes: the dimensions of fake tensors that stand for any size (dynamic shapes).

A `SymInt` is an integer expression over named symbols (`s77`, `4*s77`, `(s77 + 2)//2`)
together with its *hint*, the value it has for the example being traced. Arithmetic makes new
expressions; anything that needs the value (a comparison, `bool`, `int`, indexing) reads the
hint and records what it assumed as a guard in the `ShapeEnv`, so the captured graph is
reused only where the same decisions hold. A comparison that a symbol's lower bound already
decides (every symbol is a size of at least 2: sizes 0 and 1 stay static) records nothing.
`int(s)` specialises: it guards `s == hint` and returns the hint.

Capture turns the guards into Python over sources (`2 <= L['x'].size()[0]`) and passes each
symbol to the graph as an integer input, as PyTorch's Dynamo does.
"""

from __future__ import annotations

import numbers
import operator
import re

import numpy as np

_SYMBOL = re.compile(r"\bs\d+\b")


class ShapeEnv:
    """The symbols of one graph being captured and the guards their uses recorded."""

    def __init__(self):
        self.sources: dict[str, str] = {}  # symbol -> the source it was read from
        self.hints: dict[str, int] = {}  # symbol -> its value in the capture's example
        self.by_hint: dict[int, SymInt] = {}  # duck sizing: one symbol per distinct size
        self.guards: list[str] = []  # over symbols, in the order recorded
        self.equalities: list[str] = []  # sizes sharing a symbol, over sources
        self._seen: set[str] = set()
        self.specialized: set[str] = set()  # symbols fixed to their hint by a guard
        self.unified: set[str] = set()  # symbols guarded equal to an earlier symbol
        # Divisions that do not come out exact, kept as atoms of polynomials: their text
        # (`((s77 - 1)//2)`) -> (operator, left, right, lower bound).
        self.atoms: dict[str, tuple] = {}
        # `(op, a, b) -> value`: arithmetic of a symbol with a float (`0.9 ** s`), set by a
        # capture whose floats can be graph values (a `SymFloat`); NotImplemented, or None
        # here, specialises the symbol as `int()` does.
        self.float_arithmetic = None

    def symbol(self, source: str, hint: int, duck: bool = True) -> tuple[SymInt, bool]:
        """The symbol for a dynamic size `hint` read from `source`, and whether it is new.
        With `duck`, sizes equal to one seen before share its symbol (PyTorch's duck
        sizing), guarded equal."""
        sym = self.by_hint.get(hint) if duck else None
        if sym is not None:
            self.equalities.append(f"{source} == {self.sources[sym.expr]}")
            return sym, False
        import hashlib  # only while capturing dynamic shapes: OpenSSL costs ~2 ms at import

        n = int(hashlib.sha256(source.encode()).hexdigest(), 16) % 100
        while f"s{n}" in self.sources:  # the name PyTorch gives it, probing past collisions
            n += 1
        name = f"s{n}"
        self.sources[name] = source
        self.hints[name] = hint
        sym = SymInt.symbol(name, hint, self)
        self.by_hint.setdefault(hint, sym)
        return sym, True

    def forget(self, name: str) -> None:
        """Drop symbol `name` (its placeholder was undone with a failed instruction)."""
        self.sources.pop(name, None)
        self.by_hint = {h: s for h, s in self.by_hint.items() if s.expr != name}

    def guard(self, expr: str) -> None:
        """Record a guard over symbols (once)."""
        if expr not in self._seen:
            self._seen.add(expr)
            self.guards.append(expr)

    def to_source(self, expr: str) -> str:
        """`expr` over symbols as Python over sources."""
        return _SYMBOL.sub(lambda m: self.sources.get(m.group(0), m.group(0)), expr)

    def source_guards(self) -> list[str]:
        """Every guard as Python over sources: first each symbol's range, then the rest."""
        out = [f"2 <= {src}" for name, src in self.sources.items()
               if name not in self.specialized]
        return out + self.equalities + [self.to_source(g) for g in self.guards]


_COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
            ">": operator.gt, ">=": operator.ge}
_NEGATE = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_UNKNOWN = -(1 << 62)


class SymInt:
    """An integer size expression over symbols, with its example value (see the module doc).

    The expression is a polynomial (`poly`: monomial -> coefficient; a monomial is a sorted
    tuple of atoms, () the constant term). An atom is a symbol or a division that does not
    come out exact (`(s77 - 1)//2`, kept whole). So `6*s77 // 2` is `3*s77`, and
    `6*s77 % 3 == 0` is known without a guard.
    """

    __slots__ = ("poly", "hint", "env", "_expr")

    def __init__(self, poly: dict, hint: int, env: ShapeEnv):
        self.poly = poly
        self.hint = hint
        self.env = env
        self._expr = None

    def __getattr__(self, name: str):
        # int's other methods and attributes (`bit_length`, `to_bytes`, `numerator`, ...):
        # the value's, which specialises it as `int()` does.
        if name.startswith("__") or not hasattr(int, name):
            raise AttributeError(f"'SymInt' object has no attribute {name!r}")
        return getattr(int(self), name)

    @classmethod
    def symbol(cls, name: str, hint: int, env: ShapeEnv) -> SymInt:
        """A fresh size symbol (at least 2)."""
        return cls({(name,): 1}, hint, env)

    @property
    def expr(self) -> str:
        """The expression as text over symbol names (`3*s77 + 1`)."""
        if self._expr is None:
            self._expr = _poly_text(self.poly)
        return self._expr

    def _linear_symbol(self) -> str | None:
        """The symbol when the expression is `a*s + b` over one symbol `s` (a != 0)."""
        terms = [m for m in self.poly if m]
        if len(terms) != 1 or len(terms[0]) != 1 or terms[0][0] not in self.env.sources:
            return None
        return terms[0][0]

    def _is_symbol(self) -> bool:
        if len(self.poly) != 1:
            return False
        (m, c), = self.poly.items()
        return c == 1 and len(m) == 1 and m[0] in self.env.sources

    @property
    def lo(self) -> int:
        """A lower bound over every value the symbols may take."""
        return _poly_low(self.poly, self.env)

    # ---------------------------------------------------------------- arithmetic

    def _make(self, poly: dict, hint: int):
        poly = {m: c for m, c in poly.items() if c}
        if not poly:
            return 0
        if list(poly) == [()]:
            return poly[()]
        return SymInt(poly, hint, self.env)

    def __add__(self, other):
        if isinstance(other, float):
            return _with_float(operator.add, self, other)
        if isinstance(other, bool) or not isinstance(other, (int, SymInt)):
            return NotImplemented
        out = dict(self.poly)
        for m, c in _poly(other).items():
            out[m] = out.get(m, 0) + c
        return self._make(out, self.hint + _hint(other))

    __radd__ = __add__

    def __sub__(self, other):
        if isinstance(other, float):
            return _with_float(operator.sub, self, other)
        if isinstance(other, bool) or not isinstance(other, (int, SymInt)):
            return NotImplemented
        return self + (-1) * other

    def __rsub__(self, other):
        if isinstance(other, float):
            return _with_float(operator.sub, other, self)
        return (-1) * self + other

    def __mul__(self, other):
        if isinstance(other, float):
            return _with_float(operator.mul, self, other)
        if isinstance(other, bool) or not isinstance(other, (int, SymInt)):
            return NotImplemented
        out: dict = {}
        for ma, ca in self.poly.items():
            for mb, cb in _poly(other).items():
                m = tuple(sorted(ma + mb))
                out[m] = out.get(m, 0) + ca * cb
        return self._make(out, self.hint * _hint(other))

    __rmul__ = __mul__

    def _divide(self, other, op):
        if isinstance(other, float):
            return _with_float(op, self, other)
        if isinstance(other, bool) or not isinstance(other, (int, SymInt)):
            return NotImplemented
        a, b = self.poly, _poly(other)
        hint = op(self.hint, _hint(other))
        if len(b) == 1:
            (mb, cb), = b.items()
            rest = _cancel(a, mb)  # a = mb * rest: divide by the common factor first
            if rest is not None and cb > 0:
                if all(c % cb == 0 for c in rest.values()):
                    if op is operator.mod:
                        return 0
                    return self._make({m: c // cb for m, c in rest.items()}, hint)
                if op is operator.floordiv and mb:  # (mb * rest) // (cb * mb) == rest // cb
                    inner = self._make(rest, self.hint // (_hint(other) // cb))
                    return _atom(operator.floordiv, inner, cb, hint)
        return _atom(op, self, other, hint)

    def __floordiv__(self, other):
        return self._divide(other, operator.floordiv)

    def __rfloordiv__(self, other):
        if isinstance(other, float):
            return _with_float(operator.floordiv, other, self)
        if isinstance(other, bool) or not isinstance(other, int):
            return NotImplemented
        return _atom(operator.floordiv, other, self, other // self.hint)

    def __mod__(self, other):
        return self._divide(other, operator.mod)

    def __rmod__(self, other):
        if isinstance(other, float):
            return _with_float(operator.mod, other, self)
        if isinstance(other, bool) or not isinstance(other, int):
            return NotImplemented
        return _atom(operator.mod, other, self, other % self.hint)

    def __divmod__(self, other):
        return self // other, self % other

    def __rdivmod__(self, other):
        return other // self, other % self

    def __pow__(self, other):
        # A power by a small non-negative int stays a polynomial; any other power (a float
        # exponent, a symbolic one) needs the value: specialised, as `int()` does.
        if isinstance(other, int) and not isinstance(other, bool) and 0 <= other <= 8:
            out = 1
            for _ in range(other):
                out = self * out
            return out
        if isinstance(other, SymInt):
            other = int(other)
        if not isinstance(other, (int, float)) or isinstance(other, bool):
            return NotImplemented
        return _with_float(operator.pow, self, other)

    def __rpow__(self, other):
        if not isinstance(other, (int, float)) or isinstance(other, bool):
            return NotImplemented
        return _with_float(operator.pow, other, self)

    def __abs__(self):
        if self.lo >= 0:
            return self  # never negative (a size, or sizes added): itself
        return abs(int(self))

    def __neg__(self):
        return self * -1

    def __pos__(self):
        return self

    def __truediv__(self, other):
        if not isinstance(other, (int, float, SymInt)) or isinstance(other, bool):
            return int(self) / other
        return _with_float(operator.truediv, self, other)

    def __rtruediv__(self, other):
        if not isinstance(other, (int, float)) or isinstance(other, bool):
            return other / int(self)
        return _with_float(operator.truediv, other, self)

    # ---------------------------------------------------------------- decisions

    def _compare(self, sign: str, other) -> bool:
        if isinstance(other, float):
            return _COMPARE[sign](int(self), other)
        if isinstance(other, bool) or not isinstance(other, (int, SymInt)):
            return NotImplemented
        result = _COMPARE[sign](self.hint, _hint(other))
        diff = self - other
        if isinstance(diff, int):
            return result  # the same for every value of the symbols
        lo, hi = diff.lo, -(-diff).lo
        if lo > 0 or hi < 0 or (lo == 0 and sign in (">=", "<")) or \
                (hi == 0 and sign in ("<=", ">")):
            return result  # decided by the symbols' ranges alone
        # What this trace assumed, written as the condition that held.
        shown = sign if result else _NEGATE[sign]
        self.env.guard(f"{self.expr} {shown} {_text(other)}")
        if shown == "==" and isinstance(other, int):
            fixed = self._linear_symbol()  # `s0 == 4`, `3*s0 == 15`: one value of s0 only
            if fixed is not None:
                self.env.specialized.add(fixed)
        if shown == "==" and isinstance(other, SymInt) and self._is_symbol() and \
                other._is_symbol():
            # Two sizes found equal (a broadcast): the later symbol stands for the earlier.
            order = list(self.env.sources)
            self.env.unified.add(max(self.expr, other.expr, key=order.index))
        return result

    def __eq__(self, other):
        return self._compare("==", other)

    def __ne__(self, other):
        return self._compare("!=", other)

    def __lt__(self, other):
        return self._compare("<", other)

    def __le__(self, other):
        return self._compare("<=", other)

    def __gt__(self, other):
        return self._compare(">", other)

    def __ge__(self, other):
        return self._compare(">=", other)

    def __bool__(self) -> bool:
        return self != 0

    def __hash__(self) -> int:
        # A missed dict or set lookup compares nothing, so no `==` would guard what it found
        # (or did not): the hash specialises the value, as `int()` does.
        return hash(int(self))

    def __int__(self) -> int:
        """The value, specialised: the graph is only reused for this value."""
        self.env.guard(f"{self.expr} == {self.hint}")
        if self._is_symbol():
            self.env.specialized.add(self.expr)
        return self.hint

    __index__ = __int__

    def __float__(self) -> float:
        return float(int(self))

    def __str__(self) -> str:
        return str(int(self))

    def __format__(self, spec: str) -> str:
        return format(int(self), spec)

    # repr is the program's as well as str (`str(tuple(x.shape))` reprs each size): the
    # value, specialised; the symbol's text is `expr`.
    __repr__ = __str__

    def __array__(self, dtype=None, copy=None):
        """NumPy reads the value (`np.array([n])` holds an int64), specialised."""
        return np.array(int(self), dtype=dtype)

    def node(self, graph, symbol_nodes: dict, created: list):
        """The FX node computing this size in `graph` (symbols are placeholders, other
        terms `operator` calls)."""
        def emit(op, a, b):
            n = graph.call_function(op, (a, b))
            created.append(n)
            return n

        def value(v):
            return v.node(graph, symbol_nodes, created) if isinstance(v, SymInt) else v

        def atom(key):
            if key in symbol_nodes:
                return symbol_nodes[key]
            op, a, b, _ = self.env.atoms[key]
            return emit(op, value(a), value(b))

        total = None
        for m, c in sorted(self.poly.items(), key=_term_order):
            if not m:
                total = emit(operator.add, total, c)
                continue
            term = atom(m[0])
            for key in m[1:]:
                term = emit(operator.mul, term, atom(key))
            if c != 1:
                term = emit(operator.mul, term, c)
            total = term if total is None else emit(operator.add, total, term)
        return total


numbers.Integral.register(SymInt)


def _with_float(op, a, b):
    """`op(a, b)` for a SymInt and a number whose result is a float (`0.9 ** s`, `s / 2`,
    `s * 0.5`): the capture's graph value where it has one (`ShapeEnv.float_arithmetic`),
    else computed from the symbol's value, which specialises it."""
    hook = (a if isinstance(a, SymInt) else b).env.float_arithmetic
    if hook is not None:
        out = hook(op, a, b)
        if out is not NotImplemented:
            return out
    return op(int(a) if isinstance(a, SymInt) else a, int(b) if isinstance(b, SymInt) else b)


def size_int(s):
    """`int(s)`, keeping a symbolic size symbolic (shape arguments of views and expands)."""
    return s if s.__class__ is SymInt else int(s)


def _atom(op, a, b, hint: int) -> SymInt:
    """`a // b` or `a % b` that does not simplify: a new atom of the polynomials."""
    env = a.env if isinstance(a, SymInt) else b.env
    sign = "//" if op is operator.floordiv else "%"
    key = f"({_paren(a)}{sign}{_paren(b)})"
    if key not in env.atoms:
        la, lb = _low(a), _low(b)
        lo = _UNKNOWN
        if la >= 0 and lb > 0:
            hb = b if isinstance(b, int) else None
            lo = 0 if op is operator.mod or hb is None else la // hb
        env.atoms[key] = (op, a, b, lo)
    return SymInt({(key,): 1}, hint, env)


def _poly(v) -> dict:
    return v.poly if isinstance(v, SymInt) else {(): v}


def _hint(v) -> int:
    return v.hint if isinstance(v, SymInt) else v


def _text(v) -> str:
    return v.expr if isinstance(v, SymInt) else repr(v)


def _paren(v) -> str:
    if isinstance(v, SymInt) and len(v.poly) == 1:
        (m, c), = v.poly.items()
        if c == 1 and len(m) == 1:
            return v.expr  # a symbol or an atom (in parentheses already)
    if isinstance(v, SymInt) or v < 0:
        return f"({_text(v)})"
    return _text(v)


def _low(v) -> int:
    return v.lo if isinstance(v, SymInt) else v


def _poly_low(poly: dict, env: ShapeEnv) -> int:
    """A lower bound of a polynomial over every symbol >= 2 (unknown where a coefficient or
    an atom's bound is negative)."""
    lo = 0
    for m, c in poly.items():
        if not m:
            lo += c
            continue
        if c < 0:
            return _UNKNOWN
        term = c
        for key in m:
            low = 2 if key in env.sources else env.atoms[key][3]
            if low < 0:
                return _UNKNOWN
            term *= low
        lo += term
    return lo


def _term_order(mc):
    return (-len(mc[0]), mc[0])


def _poly_text(poly: dict) -> str:
    parts = []
    for m, c in sorted(poly.items(), key=_term_order):
        if not m:
            parts.append(str(c))
            continue
        name = "*".join(m)
        parts.append(name if c == 1 else f"-{name}" if c == -1 else f"{c}*{name}")
    text = parts[0]
    for p in parts[1:]:
        text += f" - {p[1:]}" if p.startswith("-") else f" + {p}"
    return text


def _cancel(a: dict, mb: tuple):
    """`a / mb` for monomial `mb` dividing every term of polynomial `a`, else None."""
    out = {}
    for m, c in a.items():
        rest = list(m)
        for key in mb:
            if key not in rest:
                return None
            rest.remove(key)
        out[tuple(rest)] = c
    return out


def is_symbolic(value) -> bool:
    """True for a SymInt, or a shape holding one."""
    if isinstance(value, SymInt):
        return True
    if isinstance(value, (tuple, list)):
        return any(isinstance(v, SymInt) for v in value)
    return False


def graph_is_dynamic(gm) -> bool:
    """True if a captured graph takes symbolic sizes (an integer input, or a tensor input
    whose example has a symbolic size)."""
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        ex = node.meta.get("example_value")
        if isinstance(ex, SymInt) or is_symbolic(getattr(ex, "_fshape", ())):
            return True
    return False
