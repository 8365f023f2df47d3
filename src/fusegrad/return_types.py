"""`torch.return_types`: the structured tuples that functions returning several tensors give
back.

`fusegrad.max(x, 0)` returns `return_types.max(values, indices)`, `linalg.qr` returns
`return_types.linalg_qr(Q, R)`, and so on, under PyTorch's names and field names (the `_out`
twins included). Which names exist and their fields are facts of the ops
(`ops/named_results.py`).

PyTorch's are struct sequences, not named tuples, and the classes here behave as they do:
tuples whose fields read by name (read-only), with `n_fields`, `n_sequence_fields`,
`n_unnamed_fields` and `__match_args__`, built from one sequence (`cls(list(r))`, as
tree-mapping code does), pickled by reference as `cls((values...), {})`, with no
`_fields`, `_asdict`, `_replace` or `_make` on a result. fusegrad's own code (pytrees, capture)
reads a class's fields as a named tuple's: `cls._fields` and `cls._make` live on the classes'
metaclass, so the classes answer them and their instances do not.

A class is made the first time its name is looked up (PEP 562 `__getattr__`): making the
forty-odd classes at import cost a twentieth of `import fusegrad`, and most programs use a few.
"""

from __future__ import annotations

from operator import itemgetter


class _ReturnType(type):
    """The metaclass of the result classes: named-tuple-style `_fields` and `_make` for
    fusegrad's code, out of their instances' reach."""

    @property
    def _fields(cls) -> tuple:
        return cls.__match_args__

    def _make(cls, iterable):
        return tuple.__new__(cls, iterable)


class _Field(property):
    """A field read by name (a C getter: `itemgetter`), which PyTorch's words refuse to
    set or delete."""

    def __set__(self, obj, value) -> None:
        raise AttributeError("readonly attribute")

    def __delete__(self, obj) -> None:
        raise AttributeError("readonly attribute")


def _repr(self) -> str:
    parts = ",\n".join(f"{k}={v!r}" for k, v in zip(type(self).__match_args__, self))
    return f"torch.return_types.{type(self).__name__}(\n{parts})"


def _new(cls, *args, **kwargs):
    """PyTorch's constructor, `cls(sequence)` (a dict may follow): `type(r)(list(r))`
    rebuilds a result, as tree-mapping code does. Several positional values (fusegrad's
    own calls, and pickles written when these were named tuples) make the tuple field by
    field."""
    n = cls.n_fields
    if len(args) == n and not kwargs and not (n == 2 and isinstance(args[1], dict)):
        return tuple.__new__(cls, args)
    if kwargs and len(args) + len(kwargs) <= 2 and set(kwargs) <= {"sequence", "dict"} and \
            not (args and "sequence" in kwargs):
        args = args + tuple(kwargs[k] for k in ("sequence", "dict") if k in kwargs)
        kwargs = {}
    if kwargs:
        raise TypeError(f"{next(iter(kwargs))!r} is an invalid keyword argument for "
                        "structseq()")
    if not args:
        raise TypeError("structseq() missing required argument 'sequence' (pos 1)")
    if len(args) > 2:
        raise TypeError(f"structseq() takes at most 2 arguments ({len(args)} given)")
    name = f"torch.return_types.{cls.__name__}()"
    if len(args) == 2 and not isinstance(args[1], dict):
        raise TypeError(f"{name} takes a dict as second arg, if any")
    try:
        values = tuple(args[0])
    except TypeError:
        raise TypeError("constructor requires a sequence") from None
    if len(values) != n:
        raise TypeError(f"{name} takes a {n}-sequence ({len(values)}-sequence given)")
    return tuple.__new__(cls, values)


def _reduce(self) -> tuple:
    return type(self), (tuple(self), {})


def _no_attribute(self, name: str):
    raise AttributeError(f"'torch.return_types.{type(self).__name__}' object has no attribute "
                         f"'{name}'")


def _setattr(self, name: str, value) -> None:
    if name in type(self).__match_args__:
        raise AttributeError("readonly attribute")
    _no_attribute(self, name)


def _make_class(name: str, fields: tuple) -> type:
    namespace = {field: _Field(itemgetter(i)) for i, field in enumerate(fields)}
    namespace.update(
        __slots__=(), __module__=__name__, __qualname__=name, __doc__=None,
        __match_args__=tuple(fields), n_fields=len(fields), n_sequence_fields=len(fields),
        n_unnamed_fields=0, __new__=_new, __repr__=_repr, __reduce__=_reduce,
        __getattr__=_no_attribute, __setattr__=_setattr)
    return _ReturnType(name, (tuple,), namespace)


def __getattr__(name: str):
    """Make the result class `name` on its first look-up (and `all_return_types`)."""
    from .ops.named_results import FIELDS

    if name == "all_return_types":
        return [globals().get(n) or __getattr__(n) for n in sorted(FIELDS)]
    fields = FIELDS.get(name)
    if fields is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # Two threads may race here: the first class stored is the one everybody gets.
    return globals().setdefault(name, _make_class(name, tuple(fields)))


def __dir__() -> list[str]:
    """The module's names, the classes not made yet included."""
    from .ops.named_results import FIELDS

    return sorted(set(globals()) | set(FIELDS) | {"all_return_types"})
