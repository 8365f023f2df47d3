"""A float input of a traced program (a dynamic float of capture) while AOT autograd traces.

It is a float (its value is the example's, so kernels compute with it) carrying the
placeholder node it stands for: ops that take it as an argument record that node, and Python
arithmetic on it (`1 - p` in a decomposition, the `operator` nodes of a captured graph) is
recorded as `operator` nodes, giving a TracedFloat again. What would read its value into the
trace (a comparison, `bool`, `int`, `float`, formatting) cannot be kept in a graph that must
serve every value: it raises AOTUnsupported, and that input signature runs eagerly.
"""

from __future__ import annotations

import operator

from ..._functions.symbolic_numbers import SYM_MATH
from .functionalize import AOTUnsupported


def _plain(v):
    return float.__float__(v) if isinstance(v, TracedFloat) else v


def _node(v):
    return v.node if isinstance(v, TracedFloat) else v


class TracedFloat(float):
    """See the module docstring: `node` is the value's node in `tracer`'s graph."""

    def __new__(cls, value: float, node, tracer):
        obj = float.__new__(cls, value)
        obj.node = node
        obj.tracer = tracer
        return obj

    def _record(self, op, x, y=None):
        if y is None:
            value, args = op(_plain(x)), (_node(x),)
        else:
            value, args = op(_plain(x), _plain(y)), (_node(x), _node(y))
        if not isinstance(value, float):
            raise AOTUnsupported("arithmetic on a float input gives a non-float")
        return TracedFloat(value, self.tracer.emit(op, args), self.tracer)

    def _binary(self, op, other, reflected: bool):
        if not isinstance(other, (int, float)):
            return NotImplemented
        return self._record(op, other, self) if reflected else self._record(op, self, other)

    def __add__(self, o):
        return self._binary(operator.add, o, False)

    def __radd__(self, o):
        return self._binary(operator.add, o, True)

    def __sub__(self, o):
        return self._binary(operator.sub, o, False)

    def __rsub__(self, o):
        return self._binary(operator.sub, o, True)

    def __mul__(self, o):
        return self._binary(operator.mul, o, False)

    def __rmul__(self, o):
        return self._binary(operator.mul, o, True)

    def __truediv__(self, o):
        return self._binary(operator.truediv, o, False)

    def __rtruediv__(self, o):
        return self._binary(operator.truediv, o, True)

    def __floordiv__(self, o):
        return self._binary(operator.floordiv, o, False)

    def __rfloordiv__(self, o):
        return self._binary(operator.floordiv, o, True)

    def __mod__(self, o):
        return self._binary(operator.mod, o, False)

    def __rmod__(self, o):
        return self._binary(operator.mod, o, True)

    def __pow__(self, o):
        return self._binary(operator.pow, o, False)

    def __rpow__(self, o):
        return self._binary(operator.pow, o, True)

    def __divmod__(self, o):
        if not isinstance(o, (int, float)):
            return NotImplemented
        return self // o, self % o

    def __rdivmod__(self, o):
        if not isinstance(o, (int, float)):
            return NotImplemented
        return o // self, o % self

    def __neg__(self):
        return self._record(operator.neg, self)

    def __pos__(self):
        return self

    def __abs__(self):
        return self._record(operator.abs, self)

    def _read(self, *_args):
        raise AOTUnsupported("the program reads the value of a float input while tracing "
                             "(a comparison or conversion a graph cannot keep)")

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _read
    __bool__ = __int__ = __float__ = __index__ = __trunc__ = __floor__ = __ceil__ = _read
    # Hashing reads the value too: a dict lookup that misses compares nothing, and would fix
    # the miss into the graph.
    __round__ = __format__ = __str__ = __hash__ = _read
    # float's own methods read the value without the operators above.
    hex = as_integer_ratio = __getnewargs__ = _read

    def __repr__(self) -> str:
        return f"TracedFloat({_plain(self)!r})"

    def __reduce__(self):
        return (float, (_plain(self),))


def plain(value):
    """`value` with TracedFloats (also inside lists and tuples) as plain floats."""
    if isinstance(value, TracedFloat):
        return _plain(value)
    if value.__class__ in (list, tuple):
        return value.__class__(plain(v) for v in value)
    return value


def _math_method(twin):
    def method(self):
        return self._record(twin, self)
    method.__name__ = f"__sym_{twin.math_name}__"
    return method


# `torch._sym_sqrt(v)` (what capture records for `math.sqrt` of a dynamic float) of a traced
# float: a node of the graph, not the example's value.
for _twin in set(SYM_MATH.values()):
    setattr(TracedFloat, f"__sym_{_twin.math_name}__", _math_method(_twin))
