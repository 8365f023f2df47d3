"""Guards: what a captured graph assumed about its inputs, as readable Python.

Each guard is an expression over `L` (the frame's locals), `S` (the value stack where a graph
starts mid-function) and `G` (the function's globals), such as `L['x'].shape == (3, 4)`.
The guards of one cache entry are compiled into a single check function; when it fails,
`failure()` names the first guard that does not hold, in PyTorch's words for tensors.
"""

from __future__ import annotations

import math
import operator
import types
import weakref

import numpy as np

from ... import _dtype
from ..._autocast import get_autocast_dtype, is_autocast_enabled
from ..._dispatch import sync_view as _sync_view
from ..._shapes import dense_strides, is_dense_in
from ..._symbolic import SymInt
from ..._tensor import Tensor
from ..._thread_state import local as _thread_local
from .dynamic import input_order
from .symfloat import SymFloat


def _tensor_check(t, cls, shape, dtype, requires_grad, byte_strides) -> bool:
    # One call instead of five expressions: this runs on every call of the compiled function.
    # Strides are compared in bytes as the array holds them (same dtype: same element size),
    # which saves converting them to elements on every call.
    if t.__class__ is not cls:
        return False
    if t._base is not None:  # a view whose base was written in place may require grad now
        _sync_view(t)
    return (t._dtype is dtype and t._rg is requires_grad and t._data.shape == shape
            and t._data.strides == byte_strides)


def _dynamic_tensor_check(t, cls, ndim, static, sizes, dtype, requires_grad,
                          order=None) -> bool:
    # A tensor with symbolic sizes: its rank, the static sizes (`static` picks them from the
    # shape, equal to `sizes`), and its layout, which its symbolic strides assume: row-major
    # (`order` None) or dense with its dims in `order`.
    if t.__class__ is not cls:
        return False
    if t._base is not None:
        _sync_view(t)
    data = t._data
    return (t._dtype is dtype and t._rg is requires_grad and data.ndim == ndim
            and static(data.shape) == sizes
            and (data.flags.c_contiguous if order is None
                 else is_dense_in(data.shape, data.strides, order, data.itemsize)))


class TensorGuard:
    """A tensor input's type, shape, strides, dtype and requires_grad.

    Strides are guarded as Dynamo guards them with static shapes: the graph may have read them
    (`x.stride()`, `x.is_contiguous()`), and a view that needs a contiguous input fails on
    another layout.
    """

    def __init__(self, source: str, t: Tensor, dynamic=()):
        self.source = source
        self.cls = type(t)
        # A symbolic size is None: its range is a separate guard (`2 <= L['x'].size()[0]`).
        self.dynamic = tuple(sorted(dynamic))
        self.shape = tuple(None if i in dynamic else s for i, s in enumerate(t.shape))
        self.stride = tuple(t.stride())
        self.byte_strides = tuple(t._data.strides)
        self.dtype = t.dtype
        self.requires_grad = bool(t.requires_grad)
        # With symbolic sizes: the order of dims in memory the strides follow (None: the
        # row-major order, the common case the check tests by NumPy's flag).
        order = input_order(t) if dynamic else None
        self.order = None if order == tuple(range(t.ndim)) else order

    def text(self) -> str:
        """The guard as readable Python."""
        if self.dynamic:  # PyTorch's text: symbolic sizes and strides print as None
            shape = list(self.shape)
            order = self.order or tuple(range(len(shape)))
            inner = {d: order[k + 1:] for k, d in enumerate(order)}
            stride = [None if any(d in self.dynamic for d in inner[i]) else s
                      for i, s in enumerate(self.stride)]
            return (f"check_tensor({self.source}, {self.cls.__name__}, size={shape}, "
                    f"stride={stride}, dtype={self.dtype!r}, "
                    f"requires_grad={self.requires_grad})")
        return (f"check_tensor({self.source}, {self.cls.__name__}, shape={self.shape}, "
                f"stride={self.stride}, dtype={self.dtype!r}, "
                f"requires_grad={self.requires_grad})")

    def failure(self, value) -> str | None:
        """Why `value` fails this guard (PyTorch's wording), or None if it passes."""
        name = self.source
        if not isinstance(value, Tensor) or type(value) is not self.cls:
            return f"{name} is not a {self.cls.__name__}"
        if value.ndim != len(self.shape):
            return (f"tensor '{name}' rank mismatch. expected {len(self.shape)}, actual "
                    f"{value.ndim}")
        for i, (a, b) in enumerate(zip(self.shape, value.shape)):
            if a is not None and a != b:
                return f"tensor '{name}' size mismatch at index {i}. expected {a}, actual {b}"
        expected = self.stride
        if self.dynamic:  # the strides of this value's sizes in the guarded order
            expected = dense_strides(value.shape, self.order or tuple(range(value.ndim)))
        for i, (a, b) in enumerate(zip(expected, value.stride())):
            if a != b and (not self.dynamic or value.shape[i] != 1):
                return (f"tensor '{name}' stride mismatch at index {i}. expected {a}, actual "
                        f"{b}")
        if value.dtype is not self.dtype:
            return f"tensor '{name}' dtype mismatch. expected {self.dtype}, actual {value.dtype}"
        if bool(value.requires_grad) != self.requires_grad:
            return (f"tensor '{name}' requires_grad mismatch. expected requires_grad="
                    f"{int(self.requires_grad)}")
        return None


class GuardSet:
    """The guards of one captured graph, in the order they were added."""

    def __init__(self):
        self.exprs: list[str] = []  # plain Python expressions
        self.tensors: dict[str, TensorGuard] = {}
        self.values: dict[str, object] = {}  # constants captured by expressions
        self._seen: set[str] = set()
        self._contents: set[str] = set()  # sources guarded by `contents`
        self._first: list[str] = []  # expressions tested first (see `add`)
        # Names in `values` holding a weak reference to the object (see `ref`), and what
        # to call once with this set when one of them dies (`on_death`).
        self.weak: set[str] = set()
        self.dead = False
        self.on_death: list = []
        self._pinned: list = []  # weakly named objects also used as constants
        # The weakly named objects, held while capturing and until the first run (`take`).
        self._capturing: list = []

    def add(self, expr: str, first: bool = False) -> None:
        """Add a plain expression guard (once). A `first` one is tested before every other,
        tensors' included: an object's type and class, on which reading the other guards'
        sources depends (a class given a `__getattribute__` or a property since runs the
        program's code on each read: the type test must fail before they are read)."""
        if expr not in self._seen:
            self._seen.add(expr)
            self.exprs.append(expr)
            if first:
                self._first.append(expr)

    def mark(self) -> tuple:
        """Where the set stands now, for `rollback`."""
        return len(self.exprs), len(self.tensors), len(self._first), set(self._contents)

    def rollback(self, mark: tuple) -> None:
        """Forget the guards added since `mark` (those of an instruction that runs for real
        at a graph break: the graph does not depend on what it read, and a guard on the
        identity of an object it was given, a generator new on every call, would fail on
        every later call)."""
        n_exprs, n_tensors, n_first, contents = mark
        for expr in self.exprs[n_exprs:]:
            self._seen.discard(expr)
        del self.exprs[n_exprs:]
        del self._first[n_first:]
        for source in list(self.tensors)[n_tensors:]:
            del self.tensors[source]
        self._contents = contents

    def tensor(self, source: str, t: Tensor, dynamic=()) -> None:
        """Guard a tensor input's type, shape, dtype and requires_grad (sizes at `dynamic`
        are symbolic: any, with the tensor contiguous)."""
        if source not in self.tensors:
            self.tensors[source] = TensorGuard(source, t, dynamic)

    def constant(self, source: str, value) -> None:
        """Guard a Python value: its type and value for plain data, its identity otherwise."""
        if value is None or value is ...:
            self.add(f"{source} is {value!r}")
        elif _is_plain_data(value):
            self.add(f"{self._type_test(source, value)} and {self._equals(source, value)}")
        else:
            self.add(f"{source} is {self.ref(value, weak=True)}")

    def ref(self, value, hint: str = "obj", weak: bool = False) -> str:
        """The expression under which the guard and rebuild code see `value` (one name per
        object). With `weak` (an object read from a source and guarded by identity there)
        an object of the program's (a module, a tensor, a function, an instance of its
        classes) is held by a weak reference, read as `___obj()`, as Dynamo's guards hold
        the objects they name: the compiled function does not keep it alive, and when it
        dies the guards holding it fail for good (`on_death`). Another value (one the
        capture made, which nothing else may hold) is held strongly."""
        for k, v in self.values.items():
            if k in self.weak:
                if v() is value:
                    if not weak:  # (now also needed where no source holds it)
                        self._pinned.append(value)
                    return f"{k}()"
            elif v is value:
                return k
        base = f"___{hint}" if hint.isidentifier() else "___obj"
        key, n = base, 0
        while key in self.values or key == "___closure":
            n += 1
            key = f"{base}{n}"
        if weak and _held_weakly(value):
            self.values[key] = weakref.ref(value, self._died)
            self.weak.add(key)
            self._capturing.append(value)
            return f"{key}()"
        self.values[key] = value
        return key

    def referent(self, expr: str, default=None):
        """The object `ref` gave expression `expr` for (`default` if none or dead)."""
        name = expr[:-2] if expr.endswith("()") else expr
        value = self.values.get(name, default)
        if name in self.weak:
            value = value()
            return default if value is None else value
        return value

    def take(self) -> list:
        """The weakly named objects, held since the capture read them, handed over (the
        call that captured runs with them, even one a property made anew on each read)."""
        held, self._capturing = self._capturing, []
        return held

    def when_dead(self, hook) -> None:
        """Call `hook()` once an object these guards hold weakly dies (now if one has)."""
        if self.dead:
            hook()
        else:
            self.on_death.append(hook)

    def _died(self, _ref) -> None:
        # An object the guards name by identity died: no later object can be it.
        if not self.dead:
            self.dead = True
            for hook in self.on_death:
                hook()
            self.on_death.clear()

    def _type_test(self, source: str, value) -> str:
        cls = type(value)
        name = cls.__name__ if cls in _BUILTIN_DATA else self.ref(cls, "type")
        return f"type({source}) is {name}"

    def _equals(self, source: str, value) -> str:
        if isinstance(value, (float, np.floating)):
            # A NaN equals nothing (not even itself): test it as one, or the guard always
            # fails. -0.0 == 0.0, but 1 / -0.0 is -inf: a zero guards its sign as well.
            if value != value:
                return f"{source} != {source}"
            text = repr(value) if _has_literal(value) else self.ref(value, "const")
            if value == 0:
                sign = math.copysign(1.0, value)
                return f"{source} == {text} and ___copysign(1.0, {source}) == {sign!r}"
            return f"{source} == {text}"
        if isinstance(value, (complex, tuple, frozenset)) and _has_float(value):
            # `==` cannot tell -0.0 from 0.0 or match a NaN inside: compare exactly.
            return f"___same_data({source}, {self.ref(value, 'const')})"
        if _has_literal(value):
            return f"{source} == {value!r}"
        return f"{source} == {self.ref(value, 'const')}"

    def contents(self, source: str, value) -> None:
        """Guard the items of a mutable container (a dict's items) by equality with a copy."""
        if source not in self._contents:
            self._contents.add(source)
            self.add(f"___items({source}) == {self.ref(_items(value), 'contents')}")

    def length(self, source: str, n: int) -> None:
        """Guard `len(source) == n` (code that iterates or indexes a container reads it)."""
        self.add(f"len({source}) == {n}")

    def global_state(self) -> None:
        """Guard grad mode, the default dtype and CPU autocast's dtype (None while off),
        which change what ops record or return."""
        self.add(f"___grad_enabled() == {_thread_local.grad_enabled}")
        self.values["___default"] = _dtype.defaults.float
        self.add("___default_dtype() is ___default")
        self.values["___autocast_dtype"] = _thread_local.autocast
        self.add("___autocast() is ___autocast_dtype")

    def lines(self) -> list[str]:
        """Every guard as readable Python."""
        return [g.text() for g in self.tensors.values()] + list(self.exprs)

    def compile(self):
        """One function `check(L, S, G) -> bool` testing every guard."""
        terms = []
        scope = {"___check": _tensor_check, **_helpers()}
        scope.update(self.values)
        for i, g in enumerate(self.tensors.values()):
            scope[f"___cls{i}"] = g.cls
            scope[f"___dt{i}"] = g.dtype
            if g.dynamic:
                scope["___check_dynamic"] = _dynamic_tensor_check
                static = [k for k, s in enumerate(g.shape) if s is not None]
                scope[f"___static{i}"] = (operator.itemgetter(*static) if static
                                          else lambda shape: ())
                sizes = tuple(g.shape[k] for k in static)
                sizes = sizes[0] if len(sizes) == 1 else sizes
                order = "" if g.order is None else f", {g.order!r}"
                terms.append(f"___check_dynamic({g.source}, ___cls{i}, {len(g.shape)}, "
                             f"___static{i}, {sizes!r}, ___dt{i}, {g.requires_grad}{order})")
                continue
            terms.append(f"___check({g.source}, ___cls{i}, {g.shape!r}, ___dt{i}, "
                         f"{g.requires_grad}, {g.byte_strides!r})")
        terms = [f"({e})" for e in self._first] + terms + [
            f"({e})" for e in self.exprs if e not in self._first]
        body = fast_sizes(" and ".join(terms) or "True")
        src = f"def check(L, S, G):\n    try:\n        return {body}\n" \
              "    except Exception:\n        return False\n"
        exec(compile(src, "<fusegrad guards>", "exec"), scope)
        return scope["check"]

    def failure(self, L, S, G) -> str | None:
        """The first guard that fails for this frame state, in words."""
        env = {"L": L, "S": S, "G": G, **_helpers(), **self.values}
        for e in self._first:
            try:
                ok = eval(e, env)  # noqa: S307 (our own guard text)
            except Exception:
                ok = False
            if not ok:
                return e
        for g in self.tensors.values():
            try:
                value = eval(g.source, env)  # noqa: S307 (our own guard text)
            except Exception:
                return f"{g.source} is missing"
            reason = g.failure(value)
            if reason:
                return reason
        for e in self.exprs:
            try:
                ok = eval(e, env)  # noqa: S307
            except Exception:
                ok = False
            if not ok:
                return e
        return None


def fast_sizes(code: str) -> str:
    """Compiled code reads a tensor input's size from its array (`L['x']._data.shape[0]`);
    the printed guard keeps PyTorch's text (`L['x'].size()[0]`)."""
    return code.replace(".size()[", "._data.shape[")


def _module_call_is(module, forward, bound: bool) -> bool:
    """True if `module(...)` runs `forward` and no hooks (one call for what would be five
    attribute reads: this runs for every inlined module on every call)."""
    d = module.__dict__
    if d.get("_forward_pre_hooks") or d.get("_forward_hooks") or d.get("_backward_hooks") or \
            d.get("_backward_pre_hooks"):
        return False
    if bound:  # the class's forward, not shadowed by an instance attribute
        return "forward" not in d and type(module).forward is forward
    return d.get("forward") is forward


def _module_hooks_are(module, forward, bound: bool, n_pre: int, hooks: tuple,
                      flags: tuple = ((), (), ())) -> bool:
    """True if `module(...)` runs `forward` between exactly these forward hooks (the first
    `n_pre` before it) and no others, those at the positions in `flags` taking keyword
    arguments (pre-hooks, hooks) or always called, as when they were traced."""
    d = module.__dict__
    if d.get("_backward_hooks") or d.get("_backward_pre_hooks"):
        return False
    pre, post = d.get("_forward_pre_hooks") or {}, d.get("_forward_hooks") or {}
    if len(pre) != n_pre or len(pre) + len(post) != len(hooks) or \
            not all(_same_hook(a, b) for a, b in zip((*pre.values(), *post.values()), hooks)):
        return False
    if _flag_positions(pre, d.get("_forward_pre_hooks_with_kwargs")) != flags[0] or \
            _flag_positions(post, d.get("_forward_hooks_with_kwargs")) != flags[1] or \
            _flag_positions(post, d.get("_forward_hooks_always_called")) != flags[2]:
        return False
    if bound:
        return "forward" not in d and type(module).forward is forward
    return d.get("forward") is forward


class SameCode:
    """A hook guarded by its code and globals rather than its identity (a function without
    closure cells or defaults: what it does is its code)."""

    __slots__ = ("code", "globals")

    def __init__(self, code, f_globals: dict):
        self.code = code
        self.globals = f_globals

    def matches(self, f) -> bool:
        """Whether function `f` runs this code over these globals, with nothing else."""
        return type(f) is types.FunctionType and f.__code__ is self.code and \
            f.__globals__ is self.globals and f.__closure__ is None and \
            f.__defaults__ is None and f.__kwdefaults__ is None


def _same_hook(a, b) -> bool:
    return a is b or type(b) is SameCode and b.matches(a)


def _flag_positions(hooks: dict, flagged) -> tuple:
    """The positions in hook table `hooks` of the ids in `flagged` (None: none)."""
    if not flagged:
        return ()
    return tuple(i for i, hid in enumerate(hooks) if hid in flagged)


def _same_data(a, b) -> bool:
    """True if plain data `a` and `b` are equal with the same types, zeros of the same sign
    and NaNs in the same places (what `==` does not tell apart)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (float, np.floating)):
        if a != a:
            return b != b
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, complex):
        return _same_data(a.real, b.real) and _same_data(a.imag, b.imag)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same_data(x, y) for x, y in zip(a, b))
    if isinstance(a, frozenset):  # items matched by their exact text
        return sorted(map(repr, a)) == sorted(map(repr, b))
    return a == b


def _has_float(value) -> bool:
    """True if plain data `value` holds a float or complex anywhere."""
    if isinstance(value, (float, complex, np.floating)):
        return True
    if isinstance(value, (tuple, frozenset)):
        return any(_has_float(v) for v in value)
    return False


def _storage_key(t) -> int:
    """Which memory `t` lives in: its array's owner (NumPy views point at the owner)."""
    data = t._data
    owner = data.base if data is not None and data.base is not None else data
    return id(owner if owner is not None else t)


def _shares_memory(a, b) -> bool:
    """True if tensors `a` and `b` may share memory (the same owner and overlapping bounds:
    arrays read from one file buffer have one owner but do not overlap)."""
    return _storage_key(a) == _storage_key(b) and (
        a._data is None or b._data is None or np.may_share_memory(a._data, b._data))


def _distinct_storage(*tensors) -> bool:
    """True if no two of `tensors` share memory (an in-place op on one changes no other)."""
    owners: dict = {}
    for t in tensors:
        owners.setdefault(_storage_key(t), []).append(t)
    if len(owners) == len(tensors):  # the common case: one owner each
        return True
    return not any(_shares_memory(a, b) for group in owners.values() if len(group) > 1
                   for i, a in enumerate(group) for b in group[i + 1:])


def _items(container) -> list:
    """What a container holds, in order: a mapping's (key, value) pairs, else its items."""
    if isinstance(container, dict):
        return list(container.items())
    if isinstance(container, np.ndarray):  # compared as bytes: `==` of arrays is an array
        return [container.shape, container.dtype.str, container.tobytes()]
    return list(container)


def _no_global_module_hooks() -> bool:
    """No forward or backward hook is registered for every module."""
    from ...nn.modules._global_hooks import any_call_hooks

    return not any_call_hooks()


def _global_module_hooks_are(pre: tuple, post: tuple, keyword: tuple = (),
                             always: tuple = ()) -> bool:
    """The hooks registered for every module are exactly forward pre-hooks `pre` and
    forward hooks `post`, in order (and no other kind), those at the positions `keyword`
    and `always` among the hooks taking keyword arguments and always called."""
    from ...nn.modules import _global_hooks as g

    return not (g._global_backward_hooks or g._global_backward_pre_hooks) and \
        _same_objects(g._global_forward_pre_hooks.values(), pre) and \
        _same_objects(g._global_forward_hooks.values(), post) and \
        _flag_positions(g._global_forward_hooks, g._global_forward_hooks_with_kwargs) == \
        keyword and \
        _flag_positions(g._global_forward_hooks, g._global_forward_hooks_always_called) == \
        always


def _same_objects(values, objects: tuple) -> bool:
    """Whether `values` are `objects`, by identity and in order."""
    values = list(values)
    return len(values) == len(objects) and all(a is b for a, b in zip(values, objects))


def array_tensor(array, call: int = 0):
    """`from_numpy(array)` read as a graph input: the tensor sharing the array's memory, made
    afresh on each call as eager makes it (only of a writable array: another is copied with
    a warning, which a guard must not give, so it fails the guard). `call` numbers the
    frame's calls of `from_numpy`, each its own input (its own tensor, as in eager)."""
    from ..._creation import from_numpy

    if not array.flags.writeable:
        raise TypeError("a read-only array")
    return from_numpy(array)


def _helpers() -> dict:
    """The functions guard expressions call."""
    return {"___grad_enabled": lambda: _thread_local.grad_enabled,
            "___autocast": lambda: _thread_local.autocast,
            "___default_dtype": lambda: _dtype.defaults.float, "___items": _items,
            "___autocast_default": get_autocast_dtype,
            "___autocast_enabled": is_autocast_enabled,
            "___module_call_is": _module_call_is, "___module_hooks_are": _module_hooks_are,
            "___copysign": math.copysign, "math": math,  # (`math.sqrt(L['v'])` of a SymFloat)
            "___same_data": _same_data, "___distinct_storage": _distinct_storage,
            "___no_global_module_hooks": _no_global_module_hooks,
            "___global_module_hooks_are": _global_module_hooks_are,
            "___from_numpy": array_tensor}


_BUILTIN_DATA = (bool, int, float, str, complex, bytes, tuple, frozenset, type(None),
                 type(...))


# Objects guards hold strongly: classes, modules and code live as long as the program, and
# a bound method or builtin is made anew by each attribute read (a weak reference to one
# would die at once and fail the guards of every call).
_HELD_STRONGLY = (type, types.ModuleType, types.CodeType, types.MethodType,
                  types.BuiltinFunctionType, types.BuiltinMethodType,
                  types.WrapperDescriptorType, types.MethodWrapperType,
                  types.MethodDescriptorType, types.GetSetDescriptorType,
                  types.MemberDescriptorType, weakref.ref)


def _held_weakly(value) -> bool:
    """Whether guards hold `value` by a weak reference (see `GuardSet.ref`)."""
    if isinstance(value, _HELD_STRONGLY) or _is_plain_data(value):
        return False
    try:
        weakref.ref(value)
    except TypeError:  # (lists, dicts, tuples, objects with `__slots__` and no weakref)
        return False
    return True


def _is_plain_data(value) -> bool:
    """Immutable data compared by value: numbers, strings, and tuples/frozensets of them
    (subclasses too: a NumPy scalar, an IntEnum member)."""
    if value is None or isinstance(value, (bool, int, float, str, complex, bytes, type(...),
                                           SymInt, SymFloat)):
        return True  # a SymInt or SymFloat (dynamic inputs) only exists while translating
    if isinstance(value, (tuple, frozenset)):
        return all(_is_plain_data(v) for v in value)
    return False


def _has_literal(value) -> bool:
    """True if `repr(value)` evaluates back to an equal value in the guard scope."""
    if value is None or value is ... or type(value) in (bool, int, str, bytes):
        return True
    if type(value) in (float, complex):
        return value == value and abs(value) != float("inf")
    if type(value) in (tuple, frozenset):
        return all(_has_literal(v) for v in value)
    return False


def literal_or_none(value) -> str | None:
    """`repr(value)` where guard text may use it as a literal (dict keys, indices)."""
    return repr(value) if _has_literal(value) else None
