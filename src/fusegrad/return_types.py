"""`torch.return_types`: the named tuples that functions returning several tensors give back.

`fusegrad.max(x, 0)` returns `return_types.max(values, indices)`, `linalg.qr` returns
`return_types.linalg_qr(Q, R)`, and so on, under PyTorch's names and field names (the `_out`
twins included). Each is a `collections.namedtuple` class living in this module, so results
pickle and unpickle by reference (`fusegrad.return_types.max`), and they print as PyTorch's do.
Which names exist and their fields are facts of the ops (`ops/named_results.py`).

A class is made the first time its name is looked up (PEP 562 `__getattr__`): making the
forty-odd classes at import cost a twentieth of `import fusegrad`, and most programs use a few.
"""

from __future__ import annotations

import collections


def _repr(self) -> str:
    parts = ",\n".join(f"{k}={v!r}" for k, v in zip(self._fields, self))
    return f"torch.return_types.{type(self).__name__}(\n{parts})"


def _new(cls, *args, **kwargs):
    """PyTorch's constructor, `cls(sequence)` (a dict may follow): `type(r)(list(r))`
    rebuilds a result, as tree-mapping code does. Several positional values (fusegrad's
    own calls, and unpickling) make the tuple field by field."""
    if kwargs or not (len(args) == 1 or (len(args) == 2 and isinstance(args[1], dict))):
        return cls._field_new(cls, *args, **kwargs)
    name = f"torch.return_types.{cls.__name__}()"
    try:
        values = tuple(args[0])
    except TypeError:
        raise TypeError("constructor requires a sequence") from None
    if len(values) != len(cls._fields):
        raise TypeError(f"{name} takes a {len(cls._fields)}-sequence ({len(values)}-sequence "
                        "given)")
    return tuple.__new__(cls, values)


def __getattr__(name: str):
    """Make the named tuple class `name` on its first look-up (and `all_return_types`)."""
    from .ops.named_results import FIELDS

    if name == "all_return_types":
        return [globals().get(n) or __getattr__(n) for n in sorted(FIELDS)]
    fields = FIELDS.get(name)
    if fields is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    cls = collections.namedtuple(name, fields, module=__name__)
    cls.__repr__ = _repr
    cls._field_new = cls.__new__
    cls.__new__ = _new
    # Two threads may race here: the first class stored is the one everybody gets.
    return globals().setdefault(name, cls)


def __dir__() -> list[str]:
    """The module's names, the classes not made yet included."""
    from .ops.named_results import FIELDS

    return sorted(set(globals()) | set(FIELDS) | {"all_return_types"})
