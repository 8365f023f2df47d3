"""The `__torch_function__` protocol: tensor subclasses and tensor-likes override public calls.

Every public function (`fusegrad.*`, `nn.functional.*`, `linalg.*`), Tensor method, operator
and property is routed here by a thin wrapper (`_torch_function_wrappers`: generated per
parameter list, installed once per namespace when it is built). The wrapper's only work for
plain arguments is one set lookup per argument: `Tensor`, the Python scalars and the other
classes in `_fast` (tensor subclasses whose `__torch_function__` is
`_disabled_torch_function_impl`, such as Parameter) go straight to the implementation;
properties and methods that take no other tensor are wrapped on protocol subclasses only.
Anything else (a subclass, a tensor-like, a list) takes `_slow`, which looks for overloaded
arguments and, when it finds some (or a `TorchFunctionMode` is active), calls their
`__torch_function__` with the public object the user called (`fusegrad.add`, `Tensor.add`,
`Tensor.shape.__get__`). While a mode is active anywhere, `_fast` is emptied so every call
takes `_slow`.

Dispatch never sees the protocol: by the time an op reaches it, the subclass has chosen what
to run (`Tensor.__torch_function__`, the default, runs the call with subclass dispatch off and
re-wraps tensor results into the subclass with `as_subclass`).
"""

from __future__ import annotations

import inspect
import warnings
from _thread import _local as _thread_local  # threading.local, without importing threading

from . import _type_names
from ._device import device as _device_cls
from ._dtype import PYTHON_TYPES
from ._dtype import dtype as _dtype_cls
from ._tensor import STATE_SLOTS, Size, Tensor
from ._warn import warn_once, warning_stacklevel  # noqa: F401  (importers' spelling)

# ---------------------------------------------------------------- state

_ENABLED, _SUBCLASSES_DISABLED, _ALL_DISABLED = 0, 1, 2


class _State(_thread_local):
    """The calling thread's protocol state: what is disabled, and its mode stack."""

    level = _ENABLED
    modes = ()  # TorchFunctionMode objects, innermost last
    running = None  # the function Tensor's own `__torch_function__` is running


_state = _State()
# Classes never overloaded: an argument of one of these exact classes needs no look-up.
_FAST_CLASSES = {Tensor, int, float, bool, complex, str, bytes, type(None), slice,
                 type(Ellipsis), Size, _dtype_cls, _device_cls}
_fast = set(_FAST_CLASSES)  # the live set the wrappers read: empty while a mode is active
_mode_count: list = []  # modes active over all threads (one None each)
# The wrappers round the public surface (`_torch_function_wrappers`, which reads `_fast` and
# calls `_slow`) sit above the protocol and register here at their import (`use_wrappers`);
# subclasses made before then wait in `_unwrapped_subclasses`.
_wrappers = None
_unwrapped_subclasses: list = []


def use_wrappers(wrappers) -> None:
    """Registration by `_torch_function_wrappers`: the module that switches Tensor's
    attributes to their protocol wrappers while a mode is active and installs them on
    protocol subclasses."""
    global _wrappers
    _wrappers = wrappers
    for cls in _unwrapped_subclasses:
        wrappers.install_on_subclass(cls)
    _unwrapped_subclasses.clear()


class _DisabledImpl:
    """`_disabled_torch_function_impl`: a class whose `__torch_function__` is this object opts
    out of the protocol (its instances act as plain Tensors). Calling it runs `func` with
    subclass dispatch off. A callable object, not a function, so a class attribute set to it
    does not bind to instances."""

    __slots__ = ()
    __name__ = __qualname__ = "_disabled_torch_function_impl"

    def __call__(self, func, types, args=(), kwargs=None):
        with DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))

    def __repr__(self) -> str:
        return "<built-in function _disabled_torch_function_impl>"


_disabled_torch_function_impl = _DisabledImpl()


class _Disable:
    """Base of the two context managers that turn (part of) the protocol off in this thread."""

    _level = _ALL_DISABLED

    def __enter__(self):
        self._saved = _state.level
        _state.level = max(self._saved, self._level)
        return self

    def __exit__(self, *exc) -> None:
        _state.level = self._saved


class DisableTorchFunctionSubclass(_Disable):
    """Within the block, tensor subclasses' `__torch_function__` is not called (modes are)."""

    _level = _SUBCLASSES_DISABLED


class DisableTorchFunction(_Disable):
    """Within the block, neither subclasses nor modes see calls."""

    _level = _ALL_DISABLED


def is_torch_function_enabled() -> bool:
    """Whether subclasses' `__torch_function__` is honoured in this thread."""
    return _state.level == _ENABLED


def is_torch_function_mode_enabled() -> bool:
    """Whether a TorchFunctionMode would see calls made now in this thread."""
    return bool(_state.modes) and _state.level != _ALL_DISABLED


def push_mode(mode) -> None:
    """Make `mode` this thread's innermost TorchFunctionMode."""
    _mode_count.append(None)
    _fast.clear()
    if len(_mode_count) == 1:  # modes see plain tensors' properties and methods too
        _wrappers.set_tensor_attributes(True)
    _state.modes = _state.modes + (mode,)


def pop_mode(mode=None):
    """Remove this thread's innermost mode (which must be `mode`, when given); return it."""
    modes = _state.modes
    if not modes or (mode is not None and modes[-1] is not mode):
        raise RuntimeError("Tried to exit a TorchFunctionMode that is not the innermost one")
    _state.modes = modes[:-1]
    _mode_count.pop()
    if not _mode_count:
        _fast.update(_FAST_CLASSES)
        _wrappers.set_tensor_attributes(False)
    return modes[-1]


def note_subclass(cls: type) -> None:
    """Called for each new Tensor subclass: one that opted out of the protocol is as fast as
    Tensor itself (Parameter, FakeTensor)."""
    if cls.__dict__.get("__torch_function__") is _disabled_torch_function_impl or (
            getattr(cls, "__torch_function__", None) is _disabled_torch_function_impl):
        _FAST_CLASSES.add(cls)
        if not _mode_count:
            _fast.add(cls)
    else:
        _FAST_CLASSES.discard(cls)
        _fast.discard(cls)
        if _wrappers is None:
            _unwrapped_subclasses.append(cls)
        else:
            _wrappers.install_on_subclass(cls)


# ---------------------------------------------------------------- finding overloaded arguments


def _overloaded(cls) -> bool:
    impl = getattr(cls, "__torch_function__", None)
    # (PyTorch's own tensors carry its default `__torch_function__`, which would call the
    # fusegrad function straight back: they are plain foreign objects here, as arrays are)
    return impl is not None and impl is not _disabled_torch_function_impl and \
        getattr(getattr(impl, "__func__", impl), "__module__", None) != "torch._tensor"


def _add_overloaded(found: list, arg) -> None:
    """Insert `arg` if its class overrides and is new: after the arguments of the same class
    family met before, but ahead of any whose class it subclasses."""
    cls = type(arg)
    if cls in _FAST_CLASSES or not _overloaded(cls):
        return
    for a in found:
        if type(a) is cls:
            return
    for i, a in enumerate(found):
        if issubclass(cls, type(a)):
            found.insert(i, arg)
            return
    found.append(arg)


def overloaded_args(values) -> list:
    """The arguments among `values` (and inside lists and tuples among them) whose type
    overrides `__torch_function__`, in the order they are asked."""
    found: list = []
    for v in values:
        if v.__class__ is list or v.__class__ is tuple:
            for e in v:
                _add_overloaded(found, e)
        else:
            _add_overloaded(found, v)
    return found


def _call_overloaded(args: tuple, kwargs: dict) -> list:
    found = overloaded_args(args)
    if kwargs:
        for v in overloaded_args(kwargs.values()):
            _add_overloaded(found, v)
    return found


# ---------------------------------------------------------------- calling the overrides


class _NoOverride(Exception):
    """Every handler declined (returned NotImplemented)."""


class CurrentTensorAttribute:
    """The public object of a method or property that Tensor carries only while a mode is
    active: handlers get whatever `Tensor.<name>` is when they run (Tensor's own function,
    or the checking one inside an outer mode), so `func is Tensor.<name>` holds and calling
    `func` reaches the modes below."""

    __slots__ = ("name", "accessor")

    def __init__(self, name: str, accessor: str | None = None):
        self.name = name
        self.accessor = accessor  # "__get__"/"__set__" for properties

    def resolve(self):
        value = Tensor.__dict__[self.name]
        return value if self.accessor is None else getattr(value, self.accessor)


def _run_handlers(public, overloaded: list, args: tuple, kwargs: dict):
    """The innermost active mode, then each overloaded argument's `__torch_function__`; the
    first result other than NotImplemented wins."""
    types_ = tuple(type(a) for a in overloaded)
    if _state.modes and _state.level != _ALL_DISABLED:
        mode = pop_mode()
        try:
            func = public.resolve() if public.__class__ is CurrentTensorAttribute else public
            result = mode.__torch_function__(func, types_, args, kwargs)
        finally:
            push_mode(mode)
        if result is not NotImplemented:
            return result
    if _state.level == _ENABLED:
        if public.__class__ is CurrentTensorAttribute:
            public = public.resolve()
        for arg in overloaded:
            impl = arg.__torch_function__
            if getattr(impl, "__self__", None) is arg:
                warnings.warn(
                    "Defining your `__torch_function__` as a plain method is deprecated and "
                    "will be an error in future, please define it as a classmethod.",
                    DeprecationWarning, stacklevel=3)
            result = impl(public, types_, args, kwargs)
            if result is not NotImplemented:
                return result
    raise _NoOverride(types_)


def _not_implemented_error(label: str, types_: tuple, python_level: bool) -> TypeError:
    """PyTorch's TypeError when every handler returned NotImplemented."""
    if python_level:
        return TypeError(f"no implementation found for '{label}' on types that implement "
                         f"__torch_function__: {list(types_)}")
    listed = "".join(f"  - tensor subclass {t}\n" for t in types_)
    return TypeError(f"Multiple dispatch failed for '{label}'; all __torch_function__ "
                     f"handlers returned NotImplemented:\n\n{listed}\nFor more information, "
                     "try re-running with TORCH_LOGS=not_implemented")


def _slow(info, args: tuple, kwargs: dict):
    """A call with an argument outside `_fast`: run the overrides if any apply, else `fn`."""
    public, fn, label, flags = info
    # An operand PyTorch's parser takes as a tensor only, given anything else: refused before
    # any override or mode sees the call, as the parser runs first.
    if (error := _wrappers.refused_operands(label, args, kwargs)) is not None:
        raise error
    level = _state.level
    if level == _ALL_DISABLED:
        return _implementation(fn, args, kwargs)
    found = _call_overloaded(args, kwargs) if level == _ENABLED else []
    if not found and not _state.modes:
        # A NumPy array or a list where PyTorch's parser takes a tensor only: its error.
        if (error := _wrappers.argument_error(info, args, kwargs, True)) is not None:
            raise error
        try:
            return _implementation(fn, args, kwargs)
        except Exception as e:
            _wrappers.refuse(info, args, kwargs, e, 2)  # (the call is two frames down)
            raise
    if flags & _PYTHON_LEVEL:
        args, kwargs = _normalize(fn, args, kwargs)
        if level == _ENABLED:  # PyTorch's Python-level functions count plain Tensors too
            for a in _flat_values(args, kwargs):
                if a.__class__ is Tensor:
                    found.append(a)
                    break
    try:
        return _run_handlers(public, found, args, kwargs)
    except _NoOverride as e:
        if flags & _OPERATOR:  # Python then asks the other operand, as PyTorch's operators
            return NotImplemented
        raise _not_implemented_error(label, e.args[0], bool(flags & _PYTHON_LEVEL)) from None


_OPERATOR, _PYTHON_LEVEL = 1, 2


def _implementation(fn, args: tuple, kwargs: dict):
    """`fn(*args, **kwargs)` once no override took the call, with Python's number types given
    for a dtype read as dtypes (`dtype=float` is float64, `x.to(int)` int64), as PyTorch's
    argument parser reads them. A type object is no class in `_fast`, so such calls all come
    through here, and handlers have seen the call as made (PyTorch's see `float` too)."""
    for a in args:
        if a.__class__ is type:
            break
    else:
        if kwargs.get("dtype").__class__ is not type:
            return fn(*args, **kwargs)
    args, kwargs = python_dtypes(fn, args, kwargs)
    return fn(*args, **kwargs)


# (it passes the call on: the keywords a parser message names are those of its `kwargs`)
_type_names.PASSING_CODES.add(_implementation.__code__)


def python_dtypes(fn, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """(args, kwargs) of a call of `fn` with the Python number types given for a dtype
    replaced by dtypes: the `dtype` keyword, and positional arguments where `fn`'s parameter
    is `dtype` or packed (`*args`: `to(float)`, `view(int)`)."""
    types_ = PYTHON_TYPES
    d = kwargs.get("dtype")
    if d.__class__ is type and d in types_:
        kwargs = {**kwargs, "dtype": types_[d]}
    found = parameters(fn)
    names, positional = found if found is not None else ((), 0)
    args = tuple(types_[a] if a.__class__ is type and a in types_ and (
        found is None or i >= positional or names[i] == "dtype") else a
        for i, a in enumerate(args))
    return args, kwargs


# function -> its parameter names in order, and how many of them positional ones fill
# (None: it takes **kwargs).
_PARAMETERS: dict = {}


def parameters(fn) -> tuple[tuple, int] | None:
    """`fn`'s parameter names in order and how many of them positional arguments fill (None
    when it takes **kwargs or has no signature); read once per function."""
    params = _PARAMETERS.get(fn, ())
    if params == ():
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            sig = None
        kinds = [p.kind for p in sig.parameters.values()] if sig is not None else []
        if sig is None or inspect.Parameter.VAR_KEYWORD in kinds:
            params = None
        else:
            positional = sum(k in (inspect.Parameter.POSITIONAL_ONLY,
                                   inspect.Parameter.POSITIONAL_OR_KEYWORD) for k in kinds)
            # Positional arguments past a `*sizes` fill no named parameter.
            names = tuple(n for n, p in sig.parameters.items()
                          if p.kind is not p.VAR_POSITIONAL)
            params = (names, positional)
        _PARAMETERS[fn] = params
    return params


def _flat_values(args: tuple, kwargs: dict):
    for v in (*args, *kwargs.values()):
        if v.__class__ is list or v.__class__ is tuple:
            yield from v
        else:
            yield v


_SIGNATURES: dict = {}


def _normalize(fn, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The arguments as PyTorch's Python-level functions hand them to the protocol: required
    parameters by position, every parameter with a default by keyword (defaults filled in)."""
    sig = _SIGNATURES.get(fn)
    if sig is None:
        try:
            sig = _SIGNATURES[fn] = inspect.signature(fn)
        except (TypeError, ValueError):
            return args, kwargs
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return args, kwargs
    bound.apply_defaults()
    positional: list = []
    keywords: dict = {}
    for name, value in bound.arguments.items():
        p = sig.parameters[name]
        if p.kind is p.VAR_POSITIONAL:
            positional.extend(value)
        elif p.kind is p.VAR_KEYWORD:
            keywords.update(value)
        elif p.default is p.empty and p.kind is not p.KEYWORD_ONLY:
            positional.append(value)
        else:
            keywords[name] = value
    return tuple(positional), keywords


def handle_torch_function(public, relevant_args, *args, **kwargs):
    """Call the overrides of `relevant_args` (and the active mode) for `public(*args,
    **kwargs)`; the error PyTorch raises when all return NotImplemented."""
    found = overloaded_args(relevant_args) if _state.level == _ENABLED else []
    try:
        return _run_handlers(public, found, args, kwargs)
    except _NoOverride as e:
        module = getattr(public, "__module__", None) or ""
        name = getattr(public, "__name__", "")
        label = f"{module.replace('fusegrad', 'torch', 1)}.{name}" if module else name
        raise _not_implemented_error(label, e.args[0], True) from None


def has_torch_function(relevant_args) -> bool:
    """Whether a call with `relevant_args` would go to an override (or an active mode)."""
    if _state.level == _ALL_DISABLED:
        return False
    if _state.modes:
        return True
    return _state.level == _ENABLED and bool(overloaded_args(relevant_args))


# ---------------------------------------------------------------- the default override


def default_nowrap_functions() -> set:
    """Public objects whose results the default `__torch_function__` returns unconverted."""
    return {Tensor.grad.__get__}


def _convert(value, cls):
    """`value` with each Tensor in it (tuples and lists included) as a `cls` instance."""
    if cls is Tensor:
        return value
    if isinstance(value, Tensor):
        return value if isinstance(value, cls) else value.as_subclass(cls)
    if isinstance(value, (tuple, list)):
        converted = [_convert(v, cls) for v in value]
        if hasattr(value, "_fields"):  # named tuples (return_types)
            return type(value)(*converted)
        return type(value)(converted)
    return value


def tensor_torch_function(cls, func, types_, args=(), kwargs=None):
    """Tensor's `__torch_function__`: run `func` with subclass dispatch off; its tensor
    results become `cls` instances. Declines (NotImplemented) when some overloaded type is
    not a superclass of `cls`, leaving the call to that type."""
    if kwargs is None:
        kwargs = {}
    for t in types_:
        if not issubclass(cls, t):
            return NotImplemented
    outer = _state.running
    if outer is func:
        # Re-entered for the call it is running: `func` belongs to another library that honours
        # the protocol but not fusegrad's switch (PyTorch's own functions given a fusegrad
        # Tensor). Declining lets that library report the unsupported call instead of
        # recursing until the stack runs out.
        return NotImplemented
    _state.running = func
    try:
        with DisableTorchFunctionSubclass():
            result = func(*args, **kwargs)
            if func in default_nowrap_functions():
                return result
            return _convert(result, cls)
    finally:
        _state.running = outer


def as_subclass(self, cls):
    """This tensor as a `cls` instance sharing its data (an alias in the autograd graph)."""
    if not isinstance(cls, type):
        raise TypeError(f"cls must be a type (got {type(cls).__name__})")
    if not issubclass(cls, Tensor):
        raise TypeError("Creating a Tensor subclass from a class that does not inherit from "
                        "Tensor is not possible. Make sure your class inherits from Tensor.")
    from ._dispatch import call
    from .ops import REGISTRY

    with DisableTorchFunction():
        alias = call(REGISTRY["alias"], self)
    return _retype(alias, cls)


def _retype(t, cls):
    """A `cls` object with `t`'s state (slots only: a subclass's `__dict__` starts empty)."""
    if type(t) is cls:
        return t
    new = object.__new__(cls)
    for slot in STATE_SLOTS:
        object.__setattr__(new, slot, getattr(t, slot))
    if new._retains:  # the retained-grad entry points at `t`
        new._retains = False
    return new


def rebuild_subclass(cls, args: tuple, state: dict):
    """Unpickle a Tensor subclass instance written by `Tensor.__reduce_ex__`: the tensor, as
    `cls` (an alias, as PyTorch rebuilds it), with its instance attributes."""
    from ._tensor import rebuild_tensor

    with DisableTorchFunction():
        t = rebuild_tensor(*args)
        if type(t) is not cls:
            t = as_subclass(t, cls)
    if state:
        t.__dict__.update(state)
    return t


def make_subclass(cls, data, require_grad: bool = False):
    """A new leaf `cls` instance sharing `data`'s storage and version counter."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError("Creating a Tensor subclass from a class that does not inherit from "
                        "Tensor is not possible. Make sure your class inherits from Tensor.")
    with DisableTorchFunction():
        t = data.detach()
    t = _retype(t, cls)
    if require_grad:
        t._requires_grad_unguarded(True)
    return t


Tensor.__torch_function__ = classmethod(tensor_torch_function)
Tensor.as_subclass = as_subclass
Tensor._make_subclass = staticmethod(make_subclass)

# Where the wrappers' code lives: generated code, and the closures of the wrappers module.
def warn_once_at(level: int, message: str) -> None:
    """`_warn.warn_once(message)` for a warning raised `level` frames below the user's code
    (the warning function itself is 1), naming the user's line past the protocol's
    wrappers."""
    # +1 on both sides: this function's own frame, and warn_once's below it.
    warn_once(message, stacklevel=warning_stacklevel(level + 1) + 1)
