"""Container and string opcodes of the translator (a mixin of `Translator`).

Symbolically, containers built by the function are variables holding variables (so a list of
graph tensors stays a list of nodes); in concrete mode, where every variable is a constant,
they are the real Python objects the program would build.
"""

from __future__ import annotations

import operator

import numpy as np

from ..._symbolic import SymInt
from ..._tensor import Tensor
from .builder import holds_symbol
from .guards import _is_plain_data
from .symfloat import SymFloat, SymText, format_lazily
from .variables import (
    ConstantVariable,
    DictVariable,
    IteratorVariable,
    LazyIteratorVariable,
    ListVariable,
    ObjectVariable,
    OutsideIteratorVariable,
    SetVariable,
    SliceVariable,
    TensorVariable,
    TupleVariable,
    Unsupported,
    Variable,
)


class ContainerOpcodes:
    """Tuples, lists, dicts, sets, slices, unpacking and f-strings."""

    # In concrete mode containers are real Python objects (every variable is a constant).

    def BUILD_TUPLE(self, inst):  # noqa: N802
        items = self.popn(inst.arg)
        self.push(ConstantVariable(tuple(i.value for i in items)) if self.concrete
                  else TupleVariable(items))

    def BUILD_LIST(self, inst):  # noqa: N802
        items = self.popn(inst.arg)
        self.push(ConstantVariable([i.value for i in items]) if self.concrete
                  else ListVariable(items))

    def BUILD_MAP(self, inst):  # noqa: N802
        items = self.popn(2 * inst.arg)
        pairs = [(self.key(items[i]), items[i + 1]) for i in range(0, len(items), 2)]
        self.push(ConstantVariable({k: v.value for k, v in pairs}) if self.concrete
                  else DictVariable(dict(pairs)))

    def BUILD_CONST_KEY_MAP(self, inst):  # noqa: N802
        keys = self.pop()
        values = self.popn(inst.arg)
        self.push(ConstantVariable({k: v.value for k, v in zip(keys.value, values)})
                  if self.concrete else DictVariable(dict(zip(keys.value, values))))

    def key(self, v: Variable):
        """The Python value of a dict key or set item (which must be a constant)."""
        if not isinstance(v, ConstantVariable):
            raise Unsupported("a dict key that is not a constant")
        return v.value

    def BUILD_SLICE(self, inst):  # noqa: N802
        items = self.popn(inst.arg)
        if len(items) == 2:
            items.append(self.const(None))
        if all(isinstance(i, ConstantVariable) for i in items):
            self.push(self.const(slice(*(i.value for i in items))))
        else:
            self.push(SliceVariable(*items))

    def LIST_APPEND(self, inst):  # noqa: N802
        v = self.pop()
        if self.concrete:
            self.stack[-inst.arg].value.append(v.value)
        else:
            self.stack[-inst.arg].items.append(v)

    def LIST_EXTEND(self, inst):  # noqa: N802
        v = self.pop()
        if self.concrete:
            self.stack[-inst.arg].value.extend(v.value)
        else:
            self.stack[-inst.arg].items.extend(self.unpack(v))

    def LIST_TO_TUPLE(self, inst):  # noqa: N802
        v = self.pop()
        self.push(ConstantVariable(tuple(v.value)) if self.concrete else TupleVariable(v.items))

    def MAP_ADD(self, inst):  # noqa: N802
        value = self.pop()
        key = self.pop()
        if self.concrete:
            self.stack[-inst.arg].value[key.value] = value.value
        else:
            self.stack[-inst.arg].items[self.key(key)] = value

    def DICT_UPDATE(self, inst):  # noqa: N802
        v = self.pop()
        if self.concrete:
            target = self.stack[-inst.arg].value
            if inst.opname == "DICT_MERGE":  # `f(**a, **b)`: a repeated keyword is an error
                repeated = set(target) & set(v.value.keys())
                if repeated:
                    raise TypeError(f"got multiple values for keyword argument "
                                    f"{sorted(repeated)[0]!r}")
            target.update(v.value)
            return
        if not isinstance(v, DictVariable):
            raise Unsupported(f"merging a {type(v).__name__} into a dict")
        if inst.opname == "DICT_MERGE" and set(self.stack[-inst.arg].items) & set(v.items):
            raise Unsupported("a keyword argument given twice")
        self.stack[-inst.arg].items.update(v.items)

    DICT_MERGE = DICT_UPDATE

    def UNPACK_SEQUENCE(self, inst):  # noqa: N802
        items = self.unpack(self.pop())
        if len(items) != inst.arg:
            if self.concrete:  # the error the program itself raises
                raise ValueError(f"{'too many' if len(items) > inst.arg else 'not enough'} "
                                 f"values to unpack (expected {inst.arg})")
            raise Unsupported("unpacking a sequence of the wrong length")
        for item in reversed(items):
            self.push(item)

    def UNPACK_EX(self, inst):  # noqa: N802
        # `a, *rest, b = seq`: `before` names, a list, `after` names (the first on top).
        before, after = inst.arg & 0xFF, inst.arg >> 8
        items = self.unpack(self.pop())
        if len(items) < before + after:
            if self.concrete:
                raise ValueError(f"not enough values to unpack (expected at least "
                                 f"{before + after}, got {len(items)})")
            raise Unsupported("unpacking a sequence of the wrong length")
        middle = items[before:len(items) - after]
        rest = ConstantVariable([i.value for i in middle]) if self.concrete \
            else ListVariable(middle)
        for item in reversed(items[len(items) - after:]):
            self.push(item)
        self.push(rest)
        for item in reversed(items[:before]):
            self.push(item)

    def unpack(self, v: Variable) -> list:
        """The items of a container variable (a tensor unpacks along dim 0)."""
        if isinstance(v, TupleVariable):
            return list(v.items)
        if isinstance(v, DictVariable):
            return [self.const(k) for k in v.items]
        if isinstance(v, IteratorVariable):
            return list(v.items[v.index:])
        if isinstance(v, SetVariable):
            return [v.items[key] for key in self.set_order(v)]
        if isinstance(v, LazyIteratorVariable):  # unpacked: its code runs now, to the end
            return self.generator_items(v)
        if isinstance(v, ObjectVariable):  # a dict subclass's keys (others: a break)
            from .objects import keys

            return keys(self, v)
        if isinstance(v, TensorVariable):
            if v.example.ndim == 0:
                raise Unsupported("iteration over a 0-d tensor")
            return [self.apply(operator.getitem, (v, self.const(i)))
                    for i in range(v.example.shape[0])]
        if isinstance(v, ConstantVariable):
            try:
                if not self.concrete and iter(v.value) is v.value:
                    raise Unsupported("iterating over an iterator from outside the graph")
                values = list(v.value)
            except TypeError as e:
                raise Unsupported(str(e)) from None
            if self.concrete:
                return [ConstantVariable(x) for x in values]
            return self._unpack_constant(v, values)
        if isinstance(v, OutsideIteratorVariable):
            raise Unsupported("iterating over an iterator from outside the graph")
        raise Unsupported(f"unpacking {type(v).__name__}")

    @staticmethod
    def set_order(v: SetVariable) -> list:
        """The keys of a set variable in the order the real set iterates them (by hash and
        history, see `SetVariable.history`), not in insertion order."""
        if holds_symbol(list(v.items)):
            raise Unsupported("iterating over a set of dynamic values (its order follows "
                              "their values)")
        return list(v.real())

    def _unpack_constant(self, v: ConstantVariable, values: list) -> list:
        """The items of a real container, guarded: by their sources `obj[i]` and the length
        where indexing gives them back, else by the container's contents."""
        src = self.source_of(v)
        container = v.value
        if src is None or _is_plain_data(container) or isinstance(container, range):
            return [self.wrap(x, None) for x in values]  # immutable, or fixed by its guard
        indexable = isinstance(container, (list, tuple)) or (
            not hasattr(container, "keys") and hasattr(container, "__getitem__"))
        if indexable and not isinstance(container, np.ndarray):
            try:
                indexable = all(container[i] is x for i, x in enumerate(values))
            except Exception:
                indexable = False
            if indexable:
                self.builder.guards.length(src, len(values))
                return [self.wrap(x, f"{src}[{i}]") for i, x in enumerate(values)]
        if isinstance(container, np.ndarray) and container.ndim > 1:
            return [self.wrap(x, None) for x in values]  # rows are views: they see writes
        self.builder.guards.contents(src, container)
        return [self.wrap(x, None) for x in values]

    def FORMAT_VALUE(self, inst):  # noqa: N802
        spec = self.pop() if (inst.arg & 4) else self.const("")
        v = self.pop()
        conv = {1: str, 2: repr, 3: ascii}.get(inst.arg & 3)
        if conv is not None and (isinstance(v, ObjectVariable) or isinstance(
                v, ConstantVariable) and (self.concrete or not isinstance(v.value, Tensor))
                                 or self._plain_container(v) is not None):
            v = self.converted(v, conv)
        self.push(self._format(v, spec))

    def converted(self, v: Variable, conv) -> Variable:
        """`str(v)`, `repr(v)` or `ascii(v)`; an object's text can change between calls."""
        if isinstance(v, ObjectVariable) and conv is not ascii:  # its own methods, inlined
            from .objects import text_of

            return text_of(self, v, conv.__name__)
        plain = self._plain_container(v)
        if plain is not None:  # a list or tuple of numbers: its text, a constant
            return self.const(conv(plain[0]))
        if not isinstance(v, ConstantVariable):
            raise Unsupported(f"{conv.__name__}() of a {type(v).__name__}")
        if not self.concrete and isinstance(v.value, (SymFloat, SymText)):
            return self.const(format_lazily(v.value, conv.__name__, ""))
        text = conv(v.value)
        self._guard_text(v, f"{conv.__name__}({{}})", text)
        return self.const(text)

    def _plain_container(self, v: Variable) -> tuple | None:
        """`(value,)` for a list, tuple or dict variable made only of plain data (numbers,
        strings, None; their sources, if any, guarded by value; dynamic sizes, specialised
        where formatted), whose text is fixed once those are; None for any other variable (a
        tensor, a dynamic float, an object)."""
        if type(v) not in (ListVariable, TupleVariable, DictVariable) or \
                isinstance(v, TupleVariable) and v.cls is not None:
            return None
        try:
            value = self.as_python(v)
        except Unsupported:
            return None
        if not _plain_nested(value):
            return None
        return (value,)

    def _guard_text(self, v: ConstantVariable, template: str, text: str) -> None:
        if self.concrete or _is_plain_data(v.value):
            return
        src = self.source_of(v)
        if src is not None:
            self.builder.guards.add(f"{template.format(src)} == {text!r}")

    def _format(self, v: Variable, spec: Variable) -> Variable:
        if isinstance(v, ObjectVariable) and isinstance(spec, ConstantVariable) and \
                type(spec.value) is str:  # its own `__format__`, inlined
            from .objects import text_of

            return text_of(self, v, "format", spec.value)
        plain = self._plain_container(v)
        if plain is not None and isinstance(spec, ConstantVariable):
            try:  # `f"{[t.shape[0], 2]}"`: a constant, as its items are
                return self.const(format(plain[0], spec.value))
            except (TypeError, ValueError):
                raise Unsupported("formatting a container with a format spec") from None
        if not isinstance(v, ConstantVariable) or not isinstance(spec, ConstantVariable):
            raise Unsupported("formatting a tensor")
        if not self.concrete and isinstance(v.value, Tensor):
            raise Unsupported("formatting a tensor")
        if not self.concrete and isinstance(v.value, (SymFloat, SymText)):
            return self.const(format_lazily(v.value, None, spec.value))
        text = format(v.value, spec.value)
        self._guard_text(v, f"format({{}}, {spec.value!r})", text)
        return self.const(text)

    def BUILD_STRING(self, inst):  # noqa: N802
        parts = self.popn(inst.arg)
        if any(isinstance(p.value, SymText) for p in parts):
            text = SymText([])
            for p in parts:
                text = text + p.value
            self.push(self.const(text))
            return
        self.push(self.const("".join(p.value for p in parts)))

    def BUILD_SET(self, inst):  # noqa: N802
        items = self.popn(inst.arg)
        if self.concrete:
            self.push(ConstantVariable({v.value for v in items}))
            return
        result = SetVariable()
        for v in items:
            self._set_add(result, v)
        self.push(result)

    def SET_ADD(self, inst):  # noqa: N802
        v = self.pop()
        target = self.stack[-inst.arg]
        if self.concrete:
            target.value.add(v.value)
        else:
            self._set_add(target, v)

    def SET_UPDATE(self, inst):  # noqa: N802
        v = self.pop()
        target = self.stack[-inst.arg]
        if self.concrete:
            target.value.update(v.value)
            return
        mark = len(target.history)
        for item in self.unpack(v):
            self._set_add(target, item)
        if isinstance(v, ConstantVariable) and isinstance(v.value, (set, frozenset)):
            # `{1, 2, 3}` of constants is a frozenset merged in one step, not added one by
            # one: the same call gives the same layout.
            target.history[mark:] = [("update", v.value)]

    def _set_add(self, target: SetVariable, v: Variable) -> None:
        try:
            key = self.key(v)
            target.items.setdefault(key, v)  # the first equal value stays, as in a set
            target.history.append(("add", key))
        except TypeError as e:
            raise Unsupported(f"set item: {e}") from None


def _plain_nested(value) -> bool:
    """Whether `value` is plain data or a list, tuple or dict (of plain keys) of such, to
    any depth: its text depends on nothing but those values."""
    if type(value) in (list, tuple):
        return all(_plain_nested(v) for v in value)
    if type(value) is dict:
        return all(_is_plain_data(k) and _plain_nested(v) for k, v in value.items())
    # (a dynamic size's text is its value, specialised: guarded as `str()` of it is)
    return type(value) in (bool, int, float, str, complex, bytes, type(None), SymInt)
