"""Dynamic floats: a float input of a captured graph, and Python arithmetic on it.

With automatic dynamic (PyTorch's `specialize_float = False`), a float the frame holds (an
argument `L['s']`, or the stack after a break, `S[0]`: a `loss.item()`) is a constant of the
first graph, guarded by value; once a later capture at the same start offset sees another
value, it becomes a graph input (a placeholder named after its source, `l_s_`), read from
its source per call. While translating it is a `SymFloat`: the input, or an expression over
inputs (`(L['s'] * 2.0)`), with its *hint*, the value of this call.

- Arithmetic with numbers and other SymFloats gives a SymFloat; where one reaches a graph
  call it becomes `operator` nodes over the placeholders (`mul = l_s_ * 2.0`).
- A decision (a comparison, `bool`, `max(v, 1.0)`) reads the hint and records the outcome
  as a guard over sources (`not (S[0] > 100)`), so a value that decides otherwise
  recompiles; NaN is handled as Python does (`not (a > b)` is not `a <= b`).
- `int(v)` (`math.trunc`, `floor`, `ceil`, `round(v)`) is an integer symbol the segment
  computes from the floats' sources per call (`int(((1 - L['r']) * 8))`, an integer input
  of the graph, as PyTorch's `sym_int`), so a size cut by a dynamic rate stays one graph;
  values below 2 specialise, as sizes 0 and 1 do. Another conversion that needs the value
  (`round(v, 2)`, `float(v)`) is a graph break: it runs for real, and its result is an
  input of the next graph (dynamic in turn).
- Text (`f"{v:.4f}"`, `str(v)`, `repr(v)`) stays a `SymText`, formatted where the frame
  state is rebuilt after the graph (`print(f"loss {v}")` at a break prints this call's
  value); anything else that reads the text specialises.
- Where a value must be fixed (an op whose result's shape follows it, `arange(v)`; text read
  as a string; an error that only some values raise) the floats specialise: each input of
  the expression is guarded equal to its value (and its zero sign).
"""

from __future__ import annotations

import math
import operator
import re

from ..._functions.symbolic_numbers import SYM_MATH

_FRAME_INPUT = re.compile(r"(L\[[^\[\]]+\]|S\[\d+\])")

_SYMBOLS = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
            operator.floordiv: "//", operator.mod: "%", operator.pow: "**"}
_COMPARE = {operator.eq: "==", operator.ne: "!=", operator.lt: "<", operator.le: "<=",
            operator.gt: ">", operator.ge: ">="}


def is_frame_input(source: str) -> bool:
    """Whether `source` names a value of the frame itself (a local or a stack slot): the
    floats that automatic dynamic makes graph inputs, as Dynamo's local sources."""
    return _FRAME_INPUT.fullmatch(source) is not None


def _literal(value) -> str | None:
    """Guard text of a number operand (None: no literal, e.g. inf or NaN)."""
    if isinstance(value, bool):
        return repr(int(value))
    if isinstance(value, int):
        return repr(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    return None


class SymFloat:
    """A dynamic float while translating (see the module docstring). `builder` is the
    GraphBuilder of the graph; `leaf` the source of an input, else `parts` = (op, a, b)."""

    __slots__ = ("hint", "builder", "leaf", "parts", "text")

    def __init__(self, hint: float, builder, leaf: str | None = None, parts: tuple = ()):
        self.hint = hint
        self.builder = builder
        self.leaf = leaf
        self.parts = parts
        if leaf is not None:
            self.text = leaf
        else:
            op, a, b = parts
            if b is None:
                self.text = f"(-{_text(a)})" if op is operator.neg else \
                    f"abs({_text(a)})" if op is operator.abs else \
                    f"math.{op.math_name}({_text(a)})"  # a `_sym_*` function
            else:
                self.text = f"({_text(a)} {_SYMBOLS[op]} {_text(b)})"

    # ---------------------------------------------------------------- inputs

    def leaves(self) -> list:
        """The float inputs this expression reads."""
        if self.leaf is not None:
            return [self]
        out = []
        for p in self.parts[1:]:
            if isinstance(p, SymFloat):
                out += [q for q in p.leaves() if all(q is not r for r in out)]
        return out

    def sizes(self) -> list:
        """The integer symbols' expressions this expression reads (`0.9 ** s`)."""
        out = []
        for p in self.parts[1:]:
            if isinstance(p, SymFloat):
                out += p.sizes()
            elif _is_symint(p):
                out.append(p)
        return out

    def unbacked(self) -> bool:
        """Whether the value depends on an `UnbackedFloat` (known only when the graph runs)."""
        return any(isinstance(p, UnbackedFloat) or isinstance(p, SymFloat) and p.unbacked()
                   for p in self.parts[1:])

    def _data_dependent(self, cond: str):
        """Raise PyTorch's error for a decision on a value only the graph knows."""
        from ..exc import UserError

        raise UserError(None, "Consider annotating your code using torch._check*(). "
                        "Could not guard on data-dependent expression "
                        f"{cond} (unhinted: {cond}).  (Size-like symbols: none)")

    def specialize(self) -> float:
        """The value, for this call only: each input is guarded equal to its value."""
        if self.unbacked():
            self._data_dependent(f"Eq({self.text}, hint)")
        for leaf in self.leaves():
            self.builder.guards.constant(leaf.leaf, leaf.hint)
        for size in self.sizes():
            int(size)  # guards the symbols equal to their values
        return self.hint

    def node(self):
        """The FX node computing this value (placeholders and `operator` nodes)."""
        b = self.builder
        if self.leaf is not None:
            return b.float_nodes[self.leaf]
        op, x, y = self.parts
        args = (_node(x, b),) if y is None else (_node(x, b), _node(y, b))
        n = b.graph.call_function(op, args)
        b.created.append(n)
        return n

    # ---------------------------------------------------------------- arithmetic

    def _binary(self, op, a, c, reflected: bool):
        if isinstance(c, SymFloat) or _is_symint(c):
            pass  # (a size in float arithmetic: a graph value as well)
        elif not isinstance(c, (int, float)) or _literal(c) is None:
            if isinstance(c, (int, float)):  # inf/NaN operand: no literal in guards
                return op(*((c, self.specialize()) if reflected else (self.specialize(), c)))
            return NotImplemented
        x, y = (c, a) if reflected else (a, c)
        try:
            hint = op(_hint(x), _hint(y))
        except (ArithmeticError, ValueError):
            # The error depends on the value (`1 / v` at 0): raise it for this value only.
            self.specialize()
            _specialized(c)
            raise
        if not isinstance(hint, float):
            return op(*(_specialized(v) for v in (x, y)))  # a complex power: specialise
        return SymFloat(hint, self.builder, parts=(op, x, y))

    def __add__(self, c):
        return self._binary(operator.add, self, c, False)

    def __radd__(self, c):
        return self._binary(operator.add, self, c, True)

    def __sub__(self, c):
        return self._binary(operator.sub, self, c, False)

    def __rsub__(self, c):
        return self._binary(operator.sub, self, c, True)

    def __mul__(self, c):
        return self._binary(operator.mul, self, c, False)

    def __rmul__(self, c):
        return self._binary(operator.mul, self, c, True)

    def __truediv__(self, c):
        return self._binary(operator.truediv, self, c, False)

    def __rtruediv__(self, c):
        return self._binary(operator.truediv, self, c, True)

    def __floordiv__(self, c):
        return self._binary(operator.floordiv, self, c, False)

    def __rfloordiv__(self, c):
        return self._binary(operator.floordiv, self, c, True)

    def __mod__(self, c):
        return self._binary(operator.mod, self, c, False)

    def __rmod__(self, c):
        return self._binary(operator.mod, self, c, True)

    def __pow__(self, c):
        return self._binary(operator.pow, self, c, False)

    def __rpow__(self, c):
        return self._binary(operator.pow, self, c, True)

    def __neg__(self):
        return SymFloat(-self.hint, self.builder, parts=(operator.neg, self, None))

    def __pos__(self):
        return self

    def __abs__(self):
        return SymFloat(abs(self.hint), self.builder, parts=(operator.abs, self, None))

    # ---------------------------------------------------------------- decisions

    def _compare(self, op, c, reflected: bool = False):
        if not isinstance(c, (int, float, SymFloat)) and not _is_symint(c):
            return NotImplemented
        if not isinstance(c, SymFloat) and not _is_symint(c) and _literal(c) is None:
            return op(self.specialize(), c)
        x, y = (c, self) if reflected else (self, c)
        cond = f"{_text(x)} {_COMPARE[op]} {_text(y)}"
        if self.unbacked() or isinstance(c, SymFloat) and c.unbacked():
            self._data_dependent(cond)
        result = op(_hint(x), _hint(y))
        self.builder.guards.add(cond if result else f"not ({cond})")
        return result

    def __eq__(self, c):
        return self._compare(operator.eq, c)

    def __ne__(self, c):
        return self._compare(operator.ne, c)

    def __lt__(self, c):
        return self._compare(operator.lt, c)

    def __le__(self, c):
        return self._compare(operator.le, c)

    def __gt__(self, c):
        return self._compare(operator.gt, c)

    def __ge__(self, c):
        return self._compare(operator.ge, c)

    def __bool__(self) -> bool:
        cond = f"{self.text} != 0"
        if self.unbacked():
            self._data_dependent(cond)
        result = self.hint != 0
        self.builder.guards.add(cond if result else f"not ({cond})")
        return result

    def __hash__(self) -> int:
        return hash(self.specialize())  # a missed lookup compares nothing: no other guard

    def _needs_value(self, convert, *args):
        # `round(v, 2)`, `float(v)`: a graph break, and the result (on the stack or in a
        # local after it) is an input of the next graph, dynamic once it changes.
        # Specialising instead would recompile for every value. A value of sizes alone
        # (`int(s * 0.5)`) specialises, as sizes do.
        from .variables import Unsupported

        if self.leaves() or self.unbacked():
            raise Unsupported("a conversion of a dynamic float needs its value")
        return convert(self.specialize(), *args)

    def _to_int(self, convert, spelling: str):
        """`int(v)` (`math.trunc`, `floor`, `ceil`, `round(v)`) of an expression over float
        inputs: an integer the segment computes from the floats' sources on every call
        (`int(((1 - L['r']) * 8))`), a symbol of the graph, so the float stays dynamic (as
        PyTorch's `sym_int`). Values below 2 are specialised (guarded equal), as sizes 0 and
        1 are; a value the conversion refuses (NaN, inf) breaks, and eager raises."""
        from .variables import Unsupported

        if self.unbacked() or not self.leaves():
            return self._needs_value(convert)
        try:
            value = convert(self.hint)
        except (ValueError, OverflowError):
            raise Unsupported("a conversion of a dynamic float needs its value") from None
        text = f"{spelling}({self.text})"
        if spelling.startswith("math."):
            self.builder.guards.values.setdefault("math", math)
        if value < 2:
            self.builder.guards.add(f"{text} == {value!r}")
            return value
        return self.builder.derived_int(value, text)

    def __int__(self):
        return self._to_int(int, "int")

    def __trunc__(self):
        return self._to_int(math.trunc, "int")

    def __float__(self):
        return self._needs_value(float)

    def __round__(self, *ndigits):
        if ndigits and ndigits[0] is not None:
            return self._needs_value(round, *ndigits)
        return self._to_int(round, "round")

    def __floor__(self):
        return self._to_int(math.floor, "math.floor")

    def __ceil__(self):
        return self._to_int(math.ceil, "math.ceil")

    def __format__(self, spec: str) -> str:
        return format(self.specialize(), spec)

    def __str__(self) -> str:
        return str(self.specialize())

    def __repr__(self) -> str:  # the program's repr: the value (`'%r' % t`), specialised
        return repr(self.specialize())



class UnbackedFloat(SymFloat):
    """A float `.item()` captured into the graph (fullgraph=True): a node of the graph whose
    value no one knows while translating. Arithmetic and graph ops take it; a decision on
    it (a comparison, `bool`, text, a fixed value) raises PyTorch's UserError."""

    __slots__ = ("item_node",)

    def __init__(self, node, builder):
        # The hint only stands in for fake calls (their shapes never depend on it, or the
        # call specialises, which raises); no decision reads it.
        self.hint, self.builder, self.leaf, self.parts = 1.0, builder, None, ()
        self.item_node = node
        self.text = node.name

    def unbacked(self) -> bool:
        return True

    def leaves(self) -> list:
        return []

    def node(self):
        return self.item_node


def _is_symint(v) -> bool:
    from ..._symbolic import SymInt

    return isinstance(v, SymInt)


def _hint(v):
    return v.hint if isinstance(v, SymFloat) or _is_symint(v) else v


def _text(v) -> str:
    if isinstance(v, SymFloat):
        return v.text
    if _is_symint(v):
        return f"({v.env.to_source(v.expr)})"
    return _literal(v)


def _node(v, builder):
    if isinstance(v, SymFloat):
        return v.node()
    if _is_symint(v):
        return v.node(builder.graph, builder.symbol_nodes, builder.created)
    return v


def _specialized(v):
    if isinstance(v, SymFloat):
        return v.specialize()
    return int(v) if _is_symint(v) else v


def size_arithmetic(builder):
    """The `ShapeEnv.float_arithmetic` of a capture: a symbol's arithmetic with a float
    (`0.9 ** s`, `s / 2`) is a SymFloat of `builder`'s graph, not the symbol's value (which
    would recompile for each value of a step counter). Results that are not floats (`2 **
    s`), and operands without a literal (inf, NaN), specialise as before."""
    def arithmetic(op, a, b):
        if any(not _is_symint(v) and _literal(v) is None for v in (a, b)):
            return NotImplemented
        try:
            hint = op(_hint(a), _hint(b))
        except (ArithmeticError, ValueError):
            return NotImplemented  # (raised again from the values, which specialise)
        if type(hint) is not float:
            return NotImplemented
        return SymFloat(hint, builder, parts=(op, a, b))
    return arithmetic


def math_call(fn, value, builder):
    """`fn(value)` for `math.sqrt`-like `fn` (one with a `_sym_*` twin in `SYM_MATH`) of a
    SymFloat or a size: a SymFloat computed by the twin in the graph; None where `value` is
    neither or the call raises for this value (it then runs with the value)."""
    if not (isinstance(value, SymFloat) or _is_symint(value)) or fn not in SYM_MATH:
        return None
    twin = SYM_MATH[fn]
    try:
        hint = twin(_hint(value))
    except (ArithmeticError, ValueError):
        return None
    return SymFloat(hint, builder, parts=(twin, value, None))


def has_symfloat(value) -> bool:
    """Whether `value` (or a list or tuple of values) holds a SymFloat or SymText."""
    if isinstance(value, (SymFloat, SymText)):
        return True
    if isinstance(value, (list, tuple)):
        return any(has_symfloat(v) for v in value)
    return False


def hints(value):
    """`value` with every SymFloat replaced by its hint."""
    if isinstance(value, SymFloat):
        return value.hint
    if isinstance(value, SymText):
        return value.text()
    if isinstance(value, (list, tuple)) and has_symfloat(value):
        return type(value)(hints(v) for v in value)
    return value


def perturbed(value, k: int = 0):
    """`value` with every SymFloat replaced by another value (`k`: which of two): an op
    whose result's shape or dtype changes with it depends on the value, and specialises."""
    if isinstance(value, SymFloat):
        return value.hint * 0.5 + 0.125 if k == 0 else value.hint * 3.0 + 7.0
    if isinstance(value, SymText):
        return value.text()
    if isinstance(value, (list, tuple)) and has_symfloat(value):
        return type(value)(perturbed(v, k) for v in value)
    return value


def specialize_all(value):
    """`value` with every SymFloat specialised (guarded equal to its value)."""
    if isinstance(value, SymFloat):
        return value.specialize()
    if isinstance(value, SymText):
        return value.text()
    if isinstance(value, (list, tuple)) and has_symfloat(value):
        return type(value)(specialize_all(v) for v in value)
    return value


class SymText:
    """Text formatted from dynamic floats (an f-string, `str(v)`), kept unformatted: where
    the frame state is rebuilt (a `print` after a break) it is formatted from the values of
    that call. Anything else that reads it (its length, a comparison, a method) specialises
    the floats. `parts`: str, or (SymFloat, conversion name or None, format spec)."""

    __slots__ = ("parts",)

    def __init__(self, parts: list):
        self.parts = parts

    def text(self) -> str:
        """The text for this call only (the floats specialised)."""
        out = []
        for p in self.parts:
            if isinstance(p, str):
                out.append(p)
            else:
                sym, conv, spec = p
                value = sym.specialize()
                out.append(format({"str": str, "repr": repr, "ascii": ascii}[conv](value)
                                  if conv else value, spec))
        return "".join(out)

    def __add__(self, other):
        if isinstance(other, SymText):
            return SymText(self.parts + other.parts)
        if isinstance(other, str):
            return SymText(self.parts + [other])
        return NotImplemented

    def __radd__(self, other):
        if isinstance(other, str):
            return SymText([other] + self.parts)
        return NotImplemented

    def __format__(self, spec: str):
        return self if spec == "" else format(self.text(), spec)

    def __str__(self) -> str:
        return self.text()

    def __eq__(self, other):
        return self.text() == other

    def __hash__(self) -> int:
        return hash(self.text())

    def __len__(self) -> int:
        return len(self.text())

    def __getattr__(self, name: str):
        return getattr(self.text(), name)


def format_lazily(value, conv: str | None, spec: str):
    """`format(conv(value), spec)` for a SymFloat or SymText: kept as text to format later."""
    if isinstance(value, SymText):
        if conv is None:
            return format(value, spec)
        value = value.text()
        return format({"str": str, "repr": repr, "ascii": ascii}[conv](value), spec)
    return SymText([(value, conv, spec)])
