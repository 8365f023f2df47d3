"""Calls during translation: record a graph op, inline a user function, evaluate, or break.

- fusegrad functions and Python operators applied to graph tensors (and fusegrad factories)
  become `call_function` nodes; tensor methods become `call_method` nodes;
- user Python functions and module `forward`s are inlined (translated in a child frame that
  shares the graph);
- pure builtins on constants are evaluated; a few (`len`, `isinstance`) read tensor metadata;
- anything else (print, I/O, data-dependent methods, unknown callables) is `Unsupported`.

In concrete mode every call is made for real, except that a user function, a bound method or a
module's forward is called through `compile`, so that it is captured on its own frame.
"""

from __future__ import annotations

import abc
import builtins
import collections
import collections.abc
import contextlib
import copy
import enum
import functools
import inspect
import itertools
import math
import operator
import os
import sys
import types
import warnings
import weakref

import numpy as np

from ..._functions.utilities import broadcast_shapes
from ..._out import _PARTIAL, _overlap_rule
from ..._shapes import Size
from ..._symbolic import SymInt
from ..._tensor import Tensor
from ..._type_info import finfo, iinfo
from ...ops.surface import (
    DATA_DEPENDENT,
    FACTORY,
    PURE,
    VIEW,
    VIEW_OR_COPY,
    has_flag,
)
from ..markers import COMPILE_TIME_ANSWERS
from . import reasons
from .blocks import (
    BlockExitVariable,
    CatchWarningsExitVariable,
    InferenceModeVariable,
    catch_warnings_call,
    leave_graph_block,
)
from .builder import SdpaExitVariable, SdpaKernelContext, holds_symbol
from .control_flow import call_cond, is_cond
from .custom_function import call_function_apply, is_function_apply
from .exceptions import (
    NOT_INLINED_MODULES,
    Raised,
    catch_warnings_break,
    is_autocast_type,
    make_exception,
)
from .foreach import call_foreach, is_foreach
from .functional_call import call_functional, is_functional_call
from .guards import SameCode, _is_plain_data, array_tensor
from .objects import (
    FOLLOWED_PACKAGES,
    _call_layer,
    _module_class,
    call_object,
    call_object_slot,
    construct,
    constructible,
    extreme,
    follow_outside,
    holds_real,
    is_layer_class,
    new_object,
    note_made_layer,
    weak_reference,
    weak_target_held,
)
from .optimizers import call_scheduled_step, call_step, is_scheduled_step, is_traced_step
from .symfloat import (
    SYM_MATH,
    SymFloat,
    UnbackedFloat,
    format_lazily,
    has_symfloat,
    math_call,
    specialize_all,
)
from .translator import (
    PURE_BUILTINS,
    Return,
    Translator,
    is_generator_expression,
    python_methods,
    unsupported_opcodes,
)
from .variables import (
    BoundFunctionVariable,
    CellVariable,
    ConstantVariable,
    DefaultDictVariable,
    DequeVariable,
    DictVariable,
    GeneratorContextVariable,
    GeneratorExitVariable,
    GeneratorVariable,
    GradExit,
    GradModeVariable,
    IteratorVariable,
    LazyAccumulateVariable,
    LazyChainVariable,
    LazyIteratorVariable,
    LazyMapVariable,
    LazyPairwiseVariable,
    LazyZipVariable,
    ListVariable,
    MethodVariable,
    NestedFunctionVariable,
    ObjectVariable,
    OrderedDictVariable,
    OutsideIteratorVariable,
    OutsideListVariable,
    OutsideOrderedDictVariable,
    PartialVariable,
    SetVariable,
    TensorVariable,
    TupleVariable,
    Unsupported,
    Variable,
    WeakRefVariable,
    ignored_region_exit,
    is_plain_namedtuple,
)
from .vmap import call_vmap, is_vmap_wrapper

MAX_INLINE_DEPTH = 32
# Helpers of layers and ops, and the shape arithmetic below Tensor (`wrap_dim`).
_HELPER_MODULES = ("fusegrad.nn.", "fusegrad.ops.", "fusegrad._shapes")


def _is_fusegrad_function(f) -> bool:
    """An op of fusegrad (recorded as a node); the code of its layers (`fusegrad.nn.modules`:
    `_check_input_dim`, `LSTM._forward`, mask checks) and of its distributions (methods,
    `broadcast_all`, `kl_divergence`), like a user's, is inlined."""
    mod = getattr(f, "__module__", None) or ""
    return (mod == "fusegrad" or mod.startswith("fusegrad.")) and callable(f) and \
        not isinstance(f, type) and not _is_module(f) and \
        not mod.startswith(("fusegrad.nn.modules", *FOLLOWED_PACKAGES)) and \
        getattr(f, "__code__", None) is not _wrapper_code()  # (a grad-mode wrapper rebuilt
    # at a graph break, without the wrapped function's `__module__`: an inference_mode one
    # is inlined as the real one, `_rebuilt_grad_wrapper` breaks)


def _is_module(obj) -> bool:
    try:
        from ...nn import Module
    except ImportError:
        return False
    return isinstance(obj, Module)


def _autocast_class() -> type:
    from ...amp.autocast_mode import autocast

    return autocast


def _make_autocast(tr, cls, args: list, kwargs: dict) -> ConstantVariable:
    """`autocast(device_type, dtype=...)` on constant arguments: the object, made now (its
    constructor only checks them and reads the default dtype); a `with` block over it enters
    the region in the graph. A deprecated spelling's warning is not given, as Dynamo makes
    the object without running its constructor's deprecation."""
    values = [a.value if isinstance(a, ConstantVariable) else None for a in args]
    kw = {k: v.value if isinstance(v, ConstantVariable) else None for k, v in kwargs.items()}
    if not all(isinstance(a, ConstantVariable) for a in (*args, *kwargs.values())):
        raise Unsupported("autocast() on arguments not known while translating")
    deprecated = cls is not _autocast_class()
    if not deprecated and (values[0] if values else kw.get("device_type")) == "cpu":
        ctx = cls(*values, **kw)
    else:
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                ctx = cls(*values, **kw)
        except Exception:
            raise Unsupported("autocast() raising on its arguments") from None
        if any(not (deprecated and issubclass(w.category, FutureWarning)) for w in caught):
            # (a CUDA region turned off: eager warns on every call)
            raise Unsupported("autocast() that warns")
    if ctx.device != "cpu" and ctx._enabled:
        raise Unsupported("autocast() for a device type other than cpu")
    if deprecated:
        values, kw = [ctx.device], {"dtype": ctx.fast_dtype}
    if (values[1] if len(values) > 1 else kw.get("dtype")) is None:
        # The region's dtype is the thread's default for the device, read now: a later
        # `set_autocast_dtype` must compile again, not cast to the old dtype.
        guards = tr.builder.guards
        guards.add(f"___autocast_default({ctx.device!r}) is "
                   f"{guards.ref(ctx.fast_dtype, 'dtype')}")
    return ConstantVariable(ctx)


def _checkpoint_function():
    """`utils.checkpoint.checkpoint` (None until a program has imported it)."""
    module = sys.modules.get(__name__.split(".compiler.")[0] + ".utils.checkpoint")
    return None if module is None else module.checkpoint


# checkpoint's keywords that are its own, with the values under which its function can be
# traced into the graph as it is (None: any constant), the function's recomputation in the
# backward left to the partitioner (`recompute_region`).
_CHECKPOINT_KEYWORDS = {"use_reentrant": (False,), "preserve_rng_state": None,
                        "determinism_check": ("default", "none"), "debug": (False,),
                        "early_stop": None}


def _inline_checkpoint(tr, args: list, kwargs: dict) -> Variable:
    """`checkpoint(function, *args, use_reentrant=False, **kwargs)`: the function's ops in
    the graph, in a region whose values the backward recomputes instead of saving (as
    torch.compile traces checkpoints). The values and gradients are the function's own;
    `use_reentrant=True` (or not given: eager warns and takes it), whose gradients depend on
    which inputs require grad, and a `context_fn` stay outside the graph."""
    own, passed = {}, {}
    for key, value in kwargs.items():
        (own if key in _CHECKPOINT_KEYWORDS or key == "context_fn" else passed)[key] = value
    if "use_reentrant" not in own or "context_fn" in own:
        raise Unsupported("checkpoint() with use_reentrant=True or a context_fn")
    for key, value in own.items():
        allowed = _CHECKPOINT_KEYWORDS[key]
        if not isinstance(value, ConstantVariable) or \
                allowed is not None and value.value not in allowed:
            raise Unsupported(f"checkpoint() with {key}={getattr(value, 'value', value)!r}")
    builder = tr.builder
    n_stores, mark = len(builder.stores), len(builder.created)
    builder.recompute_region(True)
    result = call_variable(tr, args[0], list(args[1:]), passed)
    builder.recompute_region(False)
    # The backward runs the function again: an effect outside the region would happen
    # twice eagerly (a counter, a list append, a batch norm's running statistics) but once
    # here, so such a function runs eagerly, as Dynamo refuses side effects in a checkpoint.
    effect = effect_since(builder, mark, n_stores)
    if effect == "stores":
        raise Unsupported("a checkpointed function with side effects (an assignment or an "
                          "append outside it)")
    if effect == "writes":
        raise Unsupported("a checkpointed function that writes into a tensor from "
                          "outside it (a buffer, an input)")
    return result


def effect_since(builder, mark: int, n_stores: int) -> str | None:
    """What code translated since `mark` (nodes created) and `n_stores` (stores) did outside
    itself: "stores" (an assignment or an append outside it), "writes" (an in-place write
    into a tensor from outside it), or None."""
    if len(builder.stores) > n_stores:
        return "stores"
    region = {id(n) for n in builder.created[mark:]}
    if any(_mutates_from_outside(n, region) for n in builder.created[mark:]):
        return "writes"
    return None


@contextlib.contextmanager
def speculation(builder):
    """Translate code for what it does only: yields (node mark, store mark); afterwards the
    grad mode, the nodes and stores recorded since, `builder.mutated` and `grad_write` are
    as before."""
    from ..._thread_state import local, set_grad_enabled

    mark, n_stores, mutated = len(builder.created), len(builder.stores), builder.mutated
    grad_write = builder.grad_write
    mode = local.grad_mode
    try:
        yield mark, n_stores
    finally:
        set_grad_enabled(mode)
        builder.discard_since(mark)
        del builder.stores[n_stores:]
        builder.mutated, builder.grad_write = mutated, grad_write


def _mutates_from_outside(node, region: set) -> bool:
    """Whether `node` writes in place into a tensor not made in `region` (node ids: a graph
    input, made there when first read, counts as outside), or into a view (which may be of
    one); a batch norm in training updates its running statistics."""
    from .builder import _mutates

    if node.op == "call_function" and getattr(node.target, "__name__", "") in (
            "batch_norm", "instance_norm") and len(node.args) > 1 and \
            hasattr(node.args[1], "op") and any(
            a is True for a in (*node.args[5:6], node.kwargs.get("training"),
                                node.kwargs.get("use_input_stats"))):
        return True  # (its running statistics, given as the second argument, are updated)
    if not _mutates(node) or not node.args or not hasattr(node.args[0], "op"):
        return False
    target = node.args[0]
    while target.meta.get("inplace_of") is not None:
        target = target.meta["inplace_of"]
    example = target.meta.get("example_value")
    return id(target) not in region or target.op == "placeholder" or \
        getattr(example, "_base", None) is not None


def _grad_context(f, args, tr):
    """The grad mode a call to no_grad/enable_grad/set_grad_enabled would make, or None."""
    from ...autograd import grad_mode

    if f is grad_mode.no_grad and not args:
        return False
    if f is grad_mode.enable_grad and not args:
        return True
    if f is grad_mode.set_grad_enabled and len(args) == 1:
        return bool(tr.as_python(args[0]))
    return None


def _grad_mode_decorated(fn: GradModeVariable, args: list, kwargs: dict) -> Variable:
    """`no_grad()(f)` or `enable_grad()(f)`: the wrapper the decorator makes, whose Python (a
    `with` block of the grad mode around the call) is inlined where it is called, as a
    decorated module-level function's is. A generator function, or a callable whose kind
    capture cannot tell, is a break (the decorator applied for real)."""
    from ...autograd.grad_mode import _decorate, enable_grad, no_grad

    factory = enable_grad if fn.mode else no_grad
    arg = args[0] if len(args) == 1 and not kwargs else None
    f = arg.value if isinstance(arg, ConstantVariable) else None
    if isinstance(f, types.FunctionType) and arg.source is None and _is_user_function(f) \
            and not f.__code__.co_flags & _NOT_PLAIN:
        wrapper = _decorate(factory, f)  # (a function the frame made)
        wrapper._fusegrad_made_in_graph = True  # (see `_rebuilt_grad_wrapper`)
        return ConstantVariable(wrapper)
    if arg is None or not _plain_callable(arg):
        raise Unsupported("calling a GradModeVariable")
    return _wrapper_variable(ConstantVariable(factory), arg)


def _inference_decorated(fn, args: list, kwargs: dict) -> Variable:
    """`inference_mode(mode)(f)`: the wrapper the decorator makes (its context made by
    `partial(inference_mode, mode)`), inlined where it is called as `_grad_mode_decorated`'s."""
    arg = args[0] if len(args) == 1 and not kwargs else None
    if arg is None or not _plain_callable(arg):
        raise Unsupported("calling an inference_mode() object")
    factory = PartialVariable(ConstantVariable(_inference_mode_class()),
                              [ConstantVariable(fn.mode)], {})
    return _wrapper_variable(factory, arg)


# Code flags of functions whose decorated form is not the plain wrapper.
_NOT_PLAIN = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def _plain_callable(v: Variable) -> bool:
    """Whether calling `v` is known to call a Python function that is no generator (or a
    tensor's method): what the decorators' plain wrapper wraps."""
    def plain(f) -> bool:
        f = getattr(f, "__func__", f)  # (a bound method's function)
        return isinstance(f, types.FunctionType) and _is_user_function(f) and \
            not f.__code__.co_flags & _NOT_PLAIN

    if isinstance(v, NestedFunctionVariable):  # (its cells hold variables of the frame)
        return not v.code.co_flags & _NOT_PLAIN
    if isinstance(v, ConstantVariable):  # read from outside: guarded as a direct call's
        return plain(v.value)
    if isinstance(v, BoundFunctionVariable):
        return plain(v.func)
    if isinstance(v, MethodVariable):
        if isinstance(v.obj, TensorVariable):
            return True
        owner = v.obj.value if isinstance(v.obj, ConstantVariable) else None
        return owner is not None and plain(getattr(type(owner), v.name, None))
    return False


def _wrapper_variable(factory: Variable, func: Variable) -> NestedFunctionVariable:
    """The wrapper the grad-mode decorators make of `func` (`factory`: the variable of what
    makes each call's context) as a function made in the frame, its cells holding `factory`
    and the variable `func`: inlined where it is called as the real wrapper's code is, and
    rebuilt as one at a graph break."""
    from ...autograd.grad_mode import _decorate

    code = _wrapper_code()
    cells = {"factory": factory, "fn": func}
    return NestedFunctionVariable(
        code, [CellVariable(cells[name], rebound=False) for name in code.co_freevars],
        None, None, _decorate.__globals__)


def _rebuilt_grad_wrapper(f) -> bool:
    """Whether `f` is a `no_grad()`/`enable_grad()` wrapper that capture made and a graph
    break rebuilt (`rebuilt_at_break`)."""
    if not getattr(f, "_fusegrad_rebuilt_at_break", False):
        return False
    from ...autograd.grad_mode import enable_grad, no_grad

    cells = dict(zip(f.__code__.co_freevars, f.__closure__ or ()))
    factory = cells["factory"].cell_contents if "factory" in cells else None
    return factory is no_grad or factory is enable_grad


def is_graph_made_wrapper(v: Variable) -> bool:
    """Whether `v` is a grad-mode decorators' wrapper the graph made (`_grad_mode_decorated`:
    for a function the frame made, or `_wrapper_variable`'s)."""
    if isinstance(v, NestedFunctionVariable):
        return v.code is _wrapper_code()
    # (a function only: reading an attribute of another constant, a float from `.item()`
    # that is a symbolic number, would specialise it)
    return isinstance(v, ConstantVariable) and v.source is None and \
        isinstance(v.value, types.FunctionType) and \
        getattr(v.value, "_fusegrad_made_in_graph", False)


def rebuilt_at_break(f: types.FunctionType) -> types.FunctionType:
    """A new wrapper of `f`'s code, cells and attributes, marked as rebuilt at a graph break:
    Dynamo rebuilds such a wrapper around the mode's context object, whose copying it never
    traces, so a later call of it is a graph break (`_rebuilt_grad_wrapper`)."""
    rebuilt = types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__,
                                 f.__closure__)
    rebuilt.__dict__.update(f.__dict__)
    rebuilt.__qualname__ = f.__qualname__
    rebuilt._fusegrad_rebuilt_at_break = True
    return rebuilt


def _plain_function():
    """(a function for `_wrapper_variable` to read the wrapper's code from)"""


@functools.cache
def _wrapper_code() -> types.CodeType:
    """The code of the plain wrapper the grad-mode decorators make."""
    from ...autograd.grad_mode import _decorate

    return _decorate(None, _plain_function).__code__


def _inference_mode_class() -> type:
    """`fusegrad.inference_mode` (imported on first use, as `_grad_context` imports)."""
    from ...autograd.grad_mode import inference_mode

    return inference_mode


def _is_pure_numpy(f) -> bool:
    """NumPy functions and scalar types (not its random generators) on constants."""
    mod = getattr(f, "__module__", None) or ""
    return (mod == "numpy" or mod.startswith("numpy.")) and "random" not in mod


def _is_user_function(f) -> bool:
    return isinstance(f, types.FunctionType) and not _is_fusegrad_function(f) and \
        f.__module__ not in NOT_INLINED_MODULES


def _has_tensor(values) -> bool:
    for v in values:
        if isinstance(v, TensorVariable):
            return True
        if isinstance(v, TupleVariable) and _has_tensor(v.items):
            return True
        if isinstance(v, DictVariable) and _has_tensor(v.items.values()):
            return True
    return False


def _graph_break_message(args: list, kwargs: dict) -> str:
    """The `msg` a `graph_break(msg)` call passes, when it is a constant string."""
    value = args[0] if args else kwargs.get("msg")
    if isinstance(value, ConstantVariable) and isinstance(value.value, str):
        return value.value
    return ""


def _config():
    """The compiler's settings (`fusegrad._dynamo.config`; the package imports this one)."""
    from .. import config

    return config


def call_variable(tr: Translator, fn: Variable, args: list, kwargs: dict) -> Variable:
    """The result of calling `fn(*args, **kwargs)` during translation."""
    if isinstance(fn, ConstantVariable) and not args and not kwargs and \
            _is_scope_reader(fn.value):
        return _read_scope(tr, fn.value)
    if tr.concrete:
        return _call_concrete(tr, fn, args, kwargs)
    if isinstance(fn, MethodVariable):
        return _call_method(tr, fn, args, kwargs)
    if isinstance(fn, TensorVariable):
        raise Unsupported("calling a tensor")
    if isinstance(fn, NestedFunctionVariable):
        if is_generator_expression(fn.code) and not kwargs:
            return GeneratorVariable(_nested_proto(tr, fn), args, tuple(fn.closure))
        if _is_generator_function(fn.code):
            proto = _nested_proto(tr, fn)
            _bind_generator(proto, args, kwargs)
            return GeneratorVariable(proto, args, tuple(fn.closure), kwargs,
                                     _default_variables(fn))
        return inline_nested(tr, fn, args, kwargs)
    if isinstance(fn, BoundFunctionVariable) and isinstance(fn.obj, ObjectVariable) and \
            fn.obj.source is not None and not args and not kwargs and \
            getattr(fn.func, "__name__", None) in _MODULE_LISTINGS and \
            getattr(_module_class(), fn.func.__name__, None) is fn.func:
        # A listing of a module from outside followed by its attributes: read now, as a
        # module's (Module's generator methods are not translated).
        return _followed_listing(tr, fn.obj, fn.func.__name__)
    if isinstance(fn, BoundFunctionVariable):  # a method found through super()
        if isinstance(fn.obj, TupleVariable) and fn.obj.cls is not None and \
                getattr(fn.func, "__code__", None) is _NAMEDTUPLE_REPLACE:
            return _replace_fields(fn.obj, args, kwargs)
        return inline(tr, fn.func, [fn.obj] + args, kwargs)
    if isinstance(fn, PartialVariable):  # the stored arguments first, as partial.__call__
        return call_variable(tr, fn.func, fn.args + args, {**fn.kwargs, **kwargs})
    if isinstance(fn, GeneratorExitVariable):  # leaving a generator context manager
        return _exit_generator_context(tr, fn, args, kwargs)
    if isinstance(fn, BlockExitVariable):  # leaving a `with autocast()` (... ) block
        leave_graph_block(tr.builder, fn.kind)
        return ConstantVariable(None)
    if isinstance(fn, CatchWarningsExitVariable):  # leaving a `catch_warnings()` block
        fn.leave_block(tr.builder)
        return ConstantVariable(None)
    if isinstance(fn, SdpaExitVariable):  # leaving a `with sdpa_kernel(...)` block
        tr.builder.exit_sdpa_kernel()
        return ConstantVariable(None)
    if isinstance(fn, GradModeVariable) and fn.exit is not None:  # leaving a with block
        tr.builder.set_grad_enabled(fn.exit)
        return ConstantVariable(None)
    if isinstance(fn, GradModeVariable) and fn.before is None:  # `@no_grad()` on a def
        return _grad_mode_decorated(fn, args, kwargs)
    if isinstance(fn, InferenceModeVariable):  # `@inference_mode()` on a def
        return _inference_decorated(fn, args, kwargs)
    if isinstance(fn, ObjectVariable):  # its class's __call__
        return call_object(tr, fn, args, kwargs)
    if isinstance(fn, WeakRefVariable):
        if not args and not kwargs and weak_target_held(tr, fn.target):
            return fn.target  # eager's object is alive: a local of a running frame holds it
        # Otherwise it may be dead in eager (nothing else holds it): the real call decides.
        raise Unsupported("calling a weak reference to an object made in the graph that "
                          "no local variable holds")
    if not isinstance(fn, ConstantVariable):
        raise Unsupported(f"calling a {type(fn).__name__}")
    f = fn.value
    if getattr(f, "_fusegrad_disabled", False):
        raise Unsupported(f"{getattr(f, '__qualname__', f)} is marked compiler.disable")
    if _rebuilt_grad_wrapper(f):
        # (the call runs for real: its wrapped function captured on its own frame, as
        # `_captured_callee` runs a grad-mode wrapper)
        from ...autograd import grad_mode

        raise Unsupported("calling a no_grad()/enable_grad() wrapper rebuilt at a graph break",
                          reason=reasons.skipped("set_grad_enabled.clone", grad_mode.__file__))
    if getattr(f, "_fusegrad_graph_break", False):  # the program asks for a break here
        message = _graph_break_message(args, kwargs)
        raise Unsupported("graph_break() called" + (f": {message}" if message else ""),
                          reason=reasons.graph_break(message))
    if is_vmap_wrapper(f):  # `func.vmap(fn)(...)`: each example inlined (vmap.py)
        return call_vmap(tr, f, list(args), dict(kwargs))
    if f in COMPILE_TIME_ANSWERS and not args and not kwargs:  # is_compiling()
        return ConstantVariable(COMPILE_TIME_ANSWERS[f])
    if getattr(f, "_fusegrad_constant_result", False):  # assume_constant_result
        return _evaluate(tr, f, args, kwargs)
    if getattr(f, "_fusegrad_allow_in_graph", False):  # one call in the graph, traced later
        return tr.builder.call("call_function", f, tuple(args), kwargs)
    if isinstance(f, GradExit):  # leaving a with block that began before this segment
        tr.builder.set_grad_enabled(f.mode)
        return ConstantVariable(None)
    if f is _inference_mode_class() and set(kwargs) <= {"mode"} and \
            len(args) + len(kwargs) <= 1 and all(
                isinstance(a, ConstantVariable) and type(a.value) is bool
                for a in (*args, *kwargs.values())):
        given = [*args, *kwargs.values()]
        return InferenceModeVariable(given[0].value if given else True)
    grad_mode = _grad_context(f, args, tr)
    if grad_mode is not None:
        from ...autograd.grad_mode import set_grad_enabled

        if f is set_grad_enabled:  # the call itself switches the mode, as in eager
            from ..._thread_state import local

            before = local.grad_mode
            tr.builder.set_grad_enabled(grad_mode)
            return GradModeVariable(grad_mode, before=before)
        return GradModeVariable(grad_mode)
    if f is super:
        return tr.make_super(args)
    if f is builtins.__build_class__:  # a `class` statement (scopes.py)
        raise Unsupported("a class definition (__build_class__): the class is made for real")
    if f is functools.partial:
        return _make_partial(args, kwargs)
    if type(f) is functools.partial:  # made before: its parts read (and guarded) through it
        return _call_real_partial(tr, fn, args, kwargs)
    made = _library_call(tr, f, args, kwargs)
    if made is not None:
        return made
    if _is_compiled_function(f):
        # Another compiled function called from compiled code: its own Python is inlined
        # into this graph, as Dynamo inlines the function a nested `torch.compile` wraps
        # (the inner one's backend and settings apply only to its own calls).
        tr.builder.guards.constant(f"{_guard_name(tr, fn)}._orig", f._orig)
        return inline(tr, f._orig, args, kwargs)
    if is_plain_namedtuple(f):
        return _make_namedtuple(tr, fn, args, kwargs)
    if _subclassed_namedtuple(f):  # (`PackedSequence(...)`: its own `__new__` inlined)
        return inline(tr, f.__new__, [fn] + args, kwargs)
    if _is_namedtuple_new(f) and args and isinstance(args[0], ConstantVariable) and \
            _namedtuple_class(args[0].value):
        # `super().__new__(cls, ...)` in a named tuple subclass's `__new__`
        return _named_tuple_of(args[0].value, f, args[1:], kwargs)
    if args and isinstance(args[0], ObjectVariable) or \
            f is object.__new__ and len(args) == 1:
        made = _object_call(tr, f, args, kwargs)
        if made is not None:
            return made
    if (f is set or f is collections.OrderedDict) and not args and not kwargs:
        # Empty tables a new object fills (`Module.__init__`'s): variables, a new real one
        # per call where they outlive the graph.
        return SetVariable() if f is set else OrderedDictVariable({})
    if f is collections.OrderedDict and len(args) <= 1:
        # Of pairs or a dict (a container layer's slice): made as `dict(...)` makes it.
        return OrderedDictVariable(_make_dict(tr, args, kwargs).items)
    if f is iter and len(args) == 1 and not kwargs and not isinstance(args[0], TensorVariable):
        return tr.iterator_of(args[0])  # (as GET_ITER: `iter(self._modules.values())`)
    if f is operator.index and len(args) == 1 and not kwargs and \
            isinstance(args[0], ConstantVariable) and type(args[0].value) in (int, bool):
        return ConstantVariable(int(args[0].value))  # (a container layer's index check)
    if f is set and len(args) == 1 and not kwargs and not isinstance(args[0], TensorVariable):
        # `set(items)`: added one by one in the items' order, as the builtin adds them
        # (the real set rebuilt from that history has the same layout and order).
        made = SetVariable()
        for item in tr.unpack(args[0]):
            tr._set_add(made, item)
        if isinstance(args[0], IteratorVariable):  # used up, as the builtin uses it up
            args[0].index = len(args[0].items)
        return made
    if constructible(f, layer=True):  # a plain class or a layer: its __init__ inlined
        return construct(tr, f, args, kwargs)
    if _enum_lookup(f, args, kwargs):  # `Act("relu")`: the member, found now
        return _evaluate(tr, f, args, kwargs)
    if any(f is c for c in _VALUE_CLASSES) and not _has_tensor(args) and \
            not _has_tensor(kwargs.values()):
        return _evaluate(tr, f, args, kwargs)  # a shape, a dtype's limits: plain values
    if f is next and args and isinstance(args[0], LazyIteratorVariable) and not kwargs:
        return _next_of_generator(tr, args[0], args[1:])
    if f is next and 1 <= len(args) <= 2 and type(args[0]) is IteratorVariable and \
            not kwargs:
        return _next_item(args[0], args[1:])
    if is_autocast_type(f):
        return _make_autocast(tr, f, args, kwargs)
    if f is _checkpoint_function() and args:
        return _inline_checkpoint(tr, args, kwargs)
    if isinstance(f, type) and issubclass(f, BaseException) and not _has_tensor(args):
        if any(isinstance(a, ConstantVariable) and holds_symbol(a.value)
               for a in (*args, *kwargs.values())):
            # Made now, it would hold this capture's example size in every later call.
            raise Unsupported(f"constructing {f.__name__} of a dynamic size")
        # Only made while translating when that runs no Python code (no side effect).
        made = make_exception(f, [tr.as_python(a) for a in args],
                              {k: tr.as_python(v) for k, v in kwargs.items()})
        if made is None:
            raise Unsupported(f"constructing {f.__name__} runs Python code")
        return ConstantVariable(made)
    if isinstance(f, types.FunctionType) and is_generator_expression(f.__code__) and \
            not kwargs and _is_user_function(f):
        return GeneratorVariable(f, args)
    if isinstance(f, types.FunctionType) and _is_generator_function(f.__code__) and \
            _is_user_function(f) and f.__code__ is not _CONTEXTMANAGER_CODE and \
            not getattr(f, "_fusegrad_disabled", False):
        # A user's generator function: its body runs lazily into the graph as its items are
        # taken, as a generator expression's (Dynamo inlines generators the same way).
        _bind_generator(f, args, kwargs)
        return GeneratorVariable(f, args, None, kwargs)
    if is_functional_call(f):  # the module's call, its state read from the dicts given
        return call_functional(tr, fn, args, kwargs)
    if is_function_apply(f):  # a user autograd.Function: one node, if it has no effects
        return call_function_apply(tr, fn, args, kwargs)
    if is_cond(f):  # both branches speculated, one node choosing between them
        return call_cond(tr, args, kwargs)
    if isinstance(f, types.MethodType) and f.__name__ == "__exit__" and \
            isinstance(f.__self__, contextlib._GeneratorContextManager) and \
            tr.parent is None:
        # Leaving a `@contextmanager` block entered for real (its generator broke before
        # its `yield`): the generator runs on for real. Dynamo, which gave up on the frame
        # at the entry, never meets this break: it counts none.
        error = Unsupported("leaving a @contextmanager block entered for real")
        error.counted = False
        raise error
    if isinstance(f, types.MethodType) and _is_user_function(f.__func__):
        self_var = tr.builder.wrap(f.__self__, None if fn.source is None else
                                   fn.source + ".__self__")
        return inline(tr, f.__func__, [self_var] + args, kwargs)
    if is_scheduled_step(f) and _config().trace_optimizer_step:  # (wrapped by a scheduler)
        return call_scheduled_step(tr, fn, args, kwargs)
    if _is_normal(f) and (_has_tensor(args) or _has_tensor(kwargs.values())):
        return _tensor_normal(tr, f, args, kwargs)
    if is_foreach(f):  # as its per-tensor calls
        return call_foreach(tr, f, args, kwargs, call_variable)
    if f in SYM_MATH and len(args) == 1 and not kwargs and isinstance(args[0], ConstantVariable):
        value = math_call(f, args[0].value, tr.builder)  # `math.sqrt(bias_correction)`
        if value is not None:
            return ConstantVariable(value)
    if _is_fusegrad_function(f) or f in _TENSOR_OPERATORS:
        name = getattr(f, "__name__", "")
        _refuse_new_leaf(kwargs)
        out = _out_argument(f, args, kwargs)
        if out is not None:
            return _call_with_out(tr, f, out, args, kwargs)
        if any(isinstance(a, _CALLABLE_VARIABLES) for a in (*args, *kwargs.values())):
            impl = _python_layer_function(f)
            if impl is not None:
                # A layer function given a function or object made in the frame (a distance
                # module for `triplet_margin_with_distance_loss`): no graph argument can hold
                # it, so its Python is followed, as Dynamo follows torch.nn.functional.
                return inline(tr, impl, args, kwargs)
        if _has_tensor(args) or _has_tensor(kwargs.values()) or has_flag(name, FACTORY):
            return tr.builder.call("call_function", f, tuple(args), kwargs)
        if has_flag(name, PURE) or f in _TENSOR_OPERATORS:
            return _evaluate(tr, f, args, kwargs)
        if isinstance(f, types.FunctionType) and \
                (getattr(f, "__module__", "") or "").startswith(_HELPER_MODULES):
            # A helper of layers or ops on no tensor (a None mask, `wrap_dim(-1, 4)`): its
            # Python runs while translating (what it cannot capture is a break, as always).
            return inline(tr, f, args, kwargs)
        raise Unsupported(f"call to fusegrad.{name} outside the graph")
    if f is setattr and len(args) == 3 and not kwargs and \
            isinstance(args[1], ConstantVariable) and type(args[1].value) is str:
        tr.store_attribute(args[0], args[1].value, args[2])  # as `obj.name = value`
        return ConstantVariable(None)
    if f is itertools.chain and not kwargs:  # (lazy: each part's items when asked for)
        return LazyChainVariable([tr.iterator_of(a) for a in args])
    if (f is map and len(args) >= 2 or f is filter and len(args) == 2) and not kwargs:
        # (lazy: `func` is called as each item is asked for, as the builtin calls it)
        func = None if f is filter and isinstance(args[0], ConstantVariable) and \
            args[0].value is None else args[0]
        return LazyMapVariable(func, [tr.iterator_of(a) for a in args[1:]], keep=f is filter)
    if f in PURE_BUILTINS or f in _PURE_MATH:
        return _call_builtin(tr, f, args, kwargs)
    if _is_pure_numpy(f) and not _has_tensor(args) and not _has_tensor(kwargs.values()):
        if tr.builder.mutated and _reads_graph_memory(tr, (*args, *kwargs.values())):
            # Evaluated now, it would read the array before the graph's in-place ops run.
            raise Unsupported(f"NumPy's {f.__name__} on an array that a mutated tensor shares")
        return _evaluate(tr, f, args, kwargs)
    if _is_module(f):
        return _call_module(tr, fn, args, kwargs)
    if args and _module_own_call(f):
        # `Module.__call__(module, ...)` (a class's own `__call__` calling `super().__call__`):
        # the module's forward between its hooks
        if isinstance(args[0], ObjectVariable) and is_layer_class(args[0].cls):
            return _call_layer(tr, args[0], list(args[1:]), kwargs)
        if _is_module(getattr(args[0], "value", None)):
            return _call_module(tr, args[0], list(args[1:]), kwargs, plain=True)
    if _is_user_function(f):
        return inline(tr, f, args, kwargs)
    name = getattr(f, "__qualname__", None) or getattr(f, "__name__", type(f).__name__)
    raise Unsupported(f"call to {name}", reason=reasons.builtin(f, args, kwargs))


def _enum_lookup(f, args: list, kwargs: dict) -> bool:
    """Whether `f(*args)` looks up a member of Enum class `f` by its value: a read of the
    class's fixed table (its `_missing_` the standard library's), which raises ValueError
    for a value no member has, as it would every time."""
    if not isinstance(f, enum.EnumMeta) or kwargs or len(args) != 1 or \
            type(f).__call__ is not enum.EnumMeta.__call__ or not f.__members__:
        return False
    missing = getattr(f._missing_, "__func__", None)
    value = args[0].value if isinstance(args[0], ConstantVariable) else None
    return getattr(missing, "__module__", None) == "enum" and \
        isinstance(args[0], ConstantVariable) and _is_plain_data(value) and \
        not holds_symbol(value) and not isinstance(value, SymFloat)


@functools.cache
def _constant_queries() -> tuple:
    """Library questions whose answer is fixed while a graph is captured, as Dynamo answers
    them: `jit.is_scripting()` is False in traced Python, and `cuda.is_available()` and
    `distributed.is_available()` are this build's constant answers. Pairs (function,
    answer)."""
    from ... import cuda, distributed, jit

    return (jit.is_scripting, False), (cuda.is_available, cuda.is_available()), \
        (distributed.is_available, distributed.is_available())


@functools.cache
def _guarded_queries() -> tuple:
    """Library questions answered now and guarded, as Dynamo folds them: `jit.is_tracing()`
    (True while a `jit.trace` recording runs the compiled code), `onnx.is_in_onnx_export()`
    (while an export runs the model) and `distributed.is_initialized()` (once a default
    process group exists). Imported on first use: jit imports the compiler's package."""
    from ... import distributed, jit, onnx

    return jit.is_tracing, onnx.is_in_onnx_export, distributed.is_initialized


@functools.cache
def _assert_function():
    """`fusegrad._assert` (imported on first use: the package imports the compiler)."""
    from ..._functions.compat_more import _assert

    return _assert


@functools.cache
def _amp_cast():
    """`amp`'s `_cast` (what `custom_fwd(cast_inputs=...)` applies to a Function's inputs)."""
    from ...amp.autocast_mode import _cast

    return _cast


def _cast_variables(tr, v: Variable, device: str, dtype) -> Variable:
    """`_cast(value, device, dtype)` over variables, as the function does it: each floating
    tensor of `device` (not float64) converted with `.to(dtype)`, through tuples, lists and
    dicts; other values as they are. Another iterable (the function would give a
    generator) is a break."""
    if isinstance(v, TensorVariable):
        ex = v.example
        if ex.is_floating_point() and ex.device.type == device and \
                ex.dtype is not _float64():
            return call_variable(tr, tr.get_attr(v, "to"), [ConstantVariable(dtype)], {})
        return v
    if type(v) in (TupleVariable, ListVariable) and (type(v) is ListVariable or
                                                    v.python_type() is tuple):
        return type(v)([_cast_variables(tr, i, device, dtype) for i in v.items])
    if type(v) is DictVariable:
        return DictVariable({k: _cast_variables(tr, i, device, dtype)
                             for k, i in v.items.items()})
    if isinstance(v, ConstantVariable) and (
            isinstance(v.value, (str, bytes, np.ndarray)) or
            not isinstance(v.value, (collections.abc.Iterable, Tensor))):
        return v
    if isinstance(v, ObjectVariable) and not isinstance(
            inspect.getattr_static(v.cls, "__iter__", None), types.FunctionType) and \
            not issubclass(v.cls, collections.abc.Iterable):
        return v  # (a Function's context, an object without items)
    raise Unsupported("amp's input cast of a value that is neither a tensor nor a plain "
                      "container")


def _float64():
    from ... import _dtype

    return _dtype.float64


@functools.cache
def _autocast_queries() -> dict:
    """The autocast state queries folded while translating, by function (the public
    spellings and the functions beneath them): what each reads from a region."""
    from ... import _autocast, get_autocast_dtype, is_autocast_enabled

    return {get_autocast_dtype: "dtype", _autocast.get_autocast_dtype: "dtype",
            is_autocast_enabled: "enabled", _autocast.is_autocast_enabled: "enabled"}


def _autocast_query(f) -> str | None:
    """"dtype" or "enabled" when `f` is an autocast state query, else None."""
    try:
        return _autocast_queries().get(f)
    except TypeError:  # (an unhashable callable)
        return None


def _answer_autocast_query(tr, query: str, args: list, kwargs: dict) -> Variable | None:
    """`get_autocast_dtype(device)` / `is_autocast_enabled(device)` on a constant device,
    answered as Dynamo reads them while tracing: inside a region the graph entered for that
    device, the region's dtype or switch; otherwise the thread's value now, guarded (the
    graph's casts depend on it). None (the real call, its error) for anything else."""
    from ... import _autocast

    if len(args) + len(kwargs) > 1 or any(k != "device_type" for k in kwargs) or \
            not all(isinstance(a, ConstantVariable) for a in (*args, *kwargs.values())):
        return None
    device = (args[0] if args else kwargs["device_type"]).value if args or kwargs else None
    if device is None:
        if query == "dtype":
            return None  # (a missing argument: the real call's TypeError)
        device = "cuda"
    if type(device) is not str:
        return None
    real = _autocast.get_autocast_dtype if query == "dtype" else _autocast.is_autocast_enabled
    try:
        answer = real(device)
    except Exception:
        return None
    for region in reversed(tr.builder.regions):  # (device, dtype, enabled, cache_enabled)
        if region[0] == device:
            return ConstantVariable(region[1] if query == "dtype" else region[2])
    guards = tr.builder.guards
    if query == "dtype":
        guards.add(f"___autocast_default({device!r}) is {guards.ref(answer, 'dtype')}")
    else:
        guards.add(f"___autocast_enabled({device!r}) is {answer}")
    return ConstantVariable(answer)


@functools.cache
def _sdpa_kernel():
    """`nn.attention.sdpa_kernel` (imported on first use: nn imports the compiler)."""
    from ...nn import attention

    return attention.sdpa_kernel


def _sdpa_kernel_context(args: list, kwargs: dict) -> Variable | None:
    """`sdpa_kernel(backends, set_priority=False)` of constant backends: a context manager
    whose block sets the attention switches in the graph, as Dynamo keeps the block in its
    graph; None (the call runs for real) for anything else (a wrong argument's error)."""
    from ...nn import attention

    names = ("backends", "set_priority")
    if len(args) > 2 or any(k not in names for k in kwargs) or \
            any(names[i] in kwargs for i in range(len(args))):
        return None
    bound = dict(zip(names, args), **kwargs)
    if "backends" not in bound:
        return None
    backends = bound["backends"]
    if type(backends) is ListVariable and \
            all(isinstance(v, ConstantVariable) for v in backends.items):
        chosen = [v.value for v in backends.items]
    elif isinstance(backends, ConstantVariable) and \
            isinstance(backends.value, attention.SDPBackend):
        chosen = [backends.value]
    else:
        return None
    priority = bound.get("set_priority", ConstantVariable(False))
    if not isinstance(priority, ConstantVariable) or \
            not all(isinstance(b, attention.SDPBackend) for b in chosen):
        return None
    switches = tuple((switch, backend in chosen)
                     for backend, switch in attention._SWITCHES.items())
    return ConstantVariable(SdpaKernelContext(switches))


@functools.cache
def _made_now() -> tuple:
    """The library classes whose instances are plain values made while translating: a
    profiler label (left out of compiled code, as Dynamo ignores it) and a device (a
    constant of the graph)."""
    from ..._device import device
    from ...profiler import record_function

    return record_function, device


def _library_call(tr, f, args: list, kwargs: dict) -> Variable | None:
    """Calls of Python's and the library's helpers that Dynamo traces rather than breaking
    on (None where `f` is none of them): constant queries, a cached function's Python, a
    profiler label, `functools.reduce`, `itertools.pairwise`/`accumulate`, `device(...)`."""
    from ..._creation import from_numpy

    if f is ignored_region_exit:  # the end of a profiler label's block: nothing to do
        return ConstantVariable(False)
    for query, answer in _constant_queries():  # (by identity: a user's __eq__ never runs)
        if f is query and not args and not kwargs:
            return ConstantVariable(answer)
    if f is _sdpa_kernel():
        return _sdpa_kernel_context(args, kwargs)
    if f is _assert_function():
        # `_assert(cond, msg)` is `assert cond, msg` in Python: its code translated, so a
        # condition known now is checked (and guarded) here, one on a tensor in the graph.
        return inline(tr, f, args, kwargs)
    query = _autocast_query(f)
    if query is not None:
        return _answer_autocast_query(tr, query, args, kwargs)
    if not args and not kwargs and any(f is q for q in _guarded_queries()):
        # Folded to its answer now (False, unless a `jit.trace` recording or an ONNX export
        # runs the compiled code), guarded so that a call under the other answer captures
        # again.
        answer = f()
        guards = tr.builder.guards
        guards.add(f"{guards.ref(f, 'query')}() is {answer}")
        return ConstantVariable(answer)
    if isinstance(f, functools._lru_cache_wrapper) and \
            isinstance(getattr(f, "__wrapped__", None), types.FunctionType) and \
            _is_user_function(f.__wrapped__):
        # The wrapped function's Python, the cache bypassed, as Dynamo traces it: a cached
        # result is the value the same call computes (the wrapper fixed by the caller's guard).
        return inline(tr, f.__wrapped__, args, kwargs)
    if f is collections.defaultdict and len(args) <= 1 and not kwargs:
        factory = args[0] if args else ConstantVariable(None)
        if isinstance(factory, ConstantVariable) and factory.source is None and \
                any(factory.value is c for c in _PLAIN_FACTORIES):
            return DefaultDictVariable(factory)
        if isinstance(factory, NestedFunctionVariable) and not is_generator_expression(
                factory.code) or isinstance(factory, ConstantVariable) and \
                isinstance(factory.value, types.FunctionType) and \
                _is_user_function(factory.value):
            # A function of the program (a lambda made here, a def read from outside, its
            # identity guarded): a missing key's value is its call, inlined, as Dynamo traces
            # the factory.
            return DefaultDictVariable(factory)
        return None
    if f is from_numpy and len(args) == 1 and not kwargs and _shared_array(args[0]):
        # A graph input read through the array's source, made per call as eager makes it
        # (sharing the array's memory, so in-place writes reach it), as Dynamo reads an
        # array from outside. An array made in the frame has no source: a break.
        # Each call its own input (`from_numpy(a) is from_numpy(a)` is False, as eager's).
        n = sum(s.startswith("___from_numpy(") for s in tr.builder.inputs)
        return tr.builder.wrap(array_tensor(args[0].value),
                               f"___from_numpy({args[0].source}, {n})")
    if any(f is c for c in _made_now()) and not _has_tensor(args) and \
            not _has_tensor(kwargs.values()):
        return _evaluate(tr, f, args, kwargs)
    if f is functools.reduce and 2 <= len(args) <= 3 and not kwargs and \
            not isinstance(args[1], TensorVariable):
        items = tr.unpack(args[1])
        if isinstance(args[1], IteratorVariable):  # used up, as the builtin uses it up
            args[1].index = len(args[1].items)
        if len(args) == 2 and not items:
            return None  # (the real call raises its TypeError)
        total, rest = (args[2], items) if len(args) == 3 else (items[0], items[1:])
        for item in rest:
            total = call_variable(tr, args[0], [total, item], {})
        return total
    if f is warnings.catch_warnings:
        block = catch_warnings_call(tr, args, kwargs)
        if block is None:
            raise catch_warnings_break(tr)
        return block
    if f is _amp_cast() and len(args) == 3 and not kwargs and \
            all(isinstance(a, ConstantVariable) for a in args[1:]):
        return _cast_variables(tr, args[0], args[1].value, args[2].value)
    if f is itertools.product:
        return _product(tr, args, kwargs)
    if f in _COMBINATORICS:
        return _combinatoric(tr, f, args, kwargs)
    if f is copy.deepcopy and len(args) == 1 and not kwargs:
        if isinstance(args[0], TensorVariable):
            # Dynamo breaks here too: the copy is made for real (its own storage and grad).
            raise Unsupported("Attempted to copy.deepcopy a tensor")
        if _atomic_variable(args[0]):
            return args[0]  # (the copy of an immutable builtin value is the value itself)
        return None
    if f is inspect.signature and len(args) == 1 and not kwargs:
        return _signature(tr, args[0])
    if f is itertools.pairwise and len(args) == 1 and not kwargs and \
            not isinstance(args[0], TensorVariable):
        return LazyPairwiseVariable(tr.iterator_of(args[0]))
    if f is itertools.accumulate and 1 <= len(args) <= 2 and \
            set(kwargs) <= {"func", "initial"} and not isinstance(args[0], TensorVariable):
        func = args[1] if len(args) == 2 else kwargs.get("func")
        if isinstance(func, ConstantVariable) and func.value is None:
            func = None
        initial = kwargs.get("initial")
        if isinstance(initial, ConstantVariable) and initial.value is None:
            initial = None
        return LazyAccumulateVariable(tr.iterator_of(args[0]), func, initial)
    return None


def _product(tr, args: list, kwargs: dict) -> Variable | None:
    """`itertools.product(*iterables, repeat=n)`: the tuples made now, in the builtin's
    order, as an iterator over variables (the builtin takes every iterable's items when it
    is made); None (the real call) for a repeat not known now or too many tuples."""
    if set(kwargs) - {"repeat"} or any(isinstance(a, TensorVariable) for a in args):
        return None
    repeat = kwargs.get("repeat", ConstantVariable(1))
    if not isinstance(repeat, ConstantVariable) or type(repeat.value) is not int or \
            repeat.value < 0:
        return None
    pools = []
    for a in args:
        pools.append(tr.unpack(a))
        if isinstance(a, IteratorVariable):  # used up, as the builtin uses it up
            a.index = len(a.items)
    pools = pools * repeat.value
    if math.prod(len(p) for p in pools) > _MAX_UNROLLED_PRODUCT:
        raise Unsupported("itertools.product of too many items to unroll")
    return IteratorVariable([TupleVariable(list(items)) for items in itertools.product(*pools)])


_MAX_UNROLLED_PRODUCT = 4096
_COMBINATORICS = (itertools.combinations, itertools.permutations,
                  itertools.combinations_with_replacement)


def _combinatoric(tr, f, args: list, kwargs: dict) -> Variable | None:
    """`itertools.combinations(iterable, r)` (`permutations`, `combinations_with_replacement`):
    the tuples made now over the iterable's items, in the builtin's order, as an iterator
    over variables (the builtin takes every item when it is made); None (the real call) for
    keywords, an `r` not known now or a tensor to iterate, and a break for too many tuples."""
    if kwargs or not 1 <= len(args) <= 2 or isinstance(args[0], TensorVariable):
        return None
    r = args[1] if len(args) == 2 else ConstantVariable(None)
    if not isinstance(r, ConstantVariable) or not (
            type(r.value) is int or r.value is None and f is itertools.permutations):
        return None
    pool = tr.unpack(args[0])
    if isinstance(args[0], IteratorVariable):  # used up, as the builtin uses it up
        args[0].index = len(args[0].items)
    try:
        rows = f(range(len(pool)), r.value)
    except ValueError:  # (a negative r: the real call raises it)
        return None
    rows = list(itertools.islice(rows, _MAX_UNROLLED_PRODUCT + 1))
    if len(rows) > _MAX_UNROLLED_PRODUCT:
        raise Unsupported(f"itertools.{f.__name__} of too many items to unroll")
    return IteratorVariable([TupleVariable([pool[i] for i in row]) for row in rows])

# Types whose values `copy.deepcopy` gives back as they are (immutable builtins).
_ATOMIC_TYPES = (type(None), type(...), bool, int, float, complex, str, bytes, range,
                 types.FunctionType, types.BuiltinFunctionType, type)


def _atomic(value) -> bool:
    """Whether `copy.deepcopy(value)` is `value` itself: an immutable builtin value, or a
    tuple or frozenset of such (a subclass may define its own `__deepcopy__`)."""
    if type(value) in (tuple, frozenset):
        return all(_atomic(v) for v in value)
    return type(value) in _ATOMIC_TYPES and not holds_symbol(value)


def _atomic_variable(v: Variable) -> bool:
    """`_atomic` of a constant, or of a plain tuple made in the frame whose items are."""
    if isinstance(v, ConstantVariable):
        return _atomic(v.value)
    return type(v) is TupleVariable and v.python_type() is tuple and \
        all(_atomic_variable(i) for i in v.items)


def _signature(tr, fn: Variable) -> Variable | None:
    """`inspect.signature(f)` of a plain function, or of one bound to an object (a module's
    `forward`): made now, as Dynamo answers it while tracing, guarded on what it is computed
    from (the function's code, defaults and annotations, and no `__wrapped__` or
    `__signature__` set on it). None (the real call) for anything else."""
    if isinstance(fn, MethodVariable) and isinstance(fn.obj, ConstantVariable):
        # `obj.method` of an object from outside: the class's function, guarded as it
        f = inspect.getattr_static(type(fn.obj.value), fn.name, None)
        root = tr.guard_root(fn.obj)
        if not isinstance(f, types.FunctionType) or root is None or \
                fn.name in getattr(fn.obj.value, "__dict__", {fn.name: None}):
            return None
        guards = tr.builder.guards
        guards.add(f"type({root}).{fn.name} is {guards.ref(f, 'fn')} and "
                   f"{fn.name!r} not in {root}.__dict__")
        fn = BoundFunctionVariable(f, fn.obj)
    bound = isinstance(fn, BoundFunctionVariable) or isinstance(fn, ConstantVariable) and \
        isinstance(fn.value, types.MethodType)
    if isinstance(fn, BoundFunctionVariable):
        f, src = fn.func, None
    elif bound:
        f, src = fn.value.__func__, None
    else:
        f = fn.value if isinstance(fn, ConstantVariable) else None
        src = tr.guard_root(fn) if f is not None else None
        if src is None:
            return None
    if not isinstance(f, types.FunctionType) or "__wrapped__" in vars(f) or \
            "__signature__" in vars(f):
        return None
    guards = tr.builder.guards
    if src is None:  # (the function a method reads, fixed by the guards of that read)
        src = guards.ref(f, "fn")
    guards.add(f"{src}.__code__ is {guards.ref(f.__code__, 'code')} and "
               f"{src}.__defaults__ is {guards.ref(f.__defaults__, 'defaults')} and "
               f"{src}.__kwdefaults__ is {guards.ref(f.__kwdefaults__, 'kwdefaults')} and "
               f"{src}.__annotations__ == {guards.ref(dict(f.__annotations__), 'annotations')} "
               f"and '__wrapped__' not in {src}.__dict__ and "
               f"'__signature__' not in {src}.__dict__")
    if bound:  # (a method's: its first parameter is taken by the object)
        return ConstantVariable(inspect.signature(types.MethodType(f, _Bound())))
    return ConstantVariable(inspect.signature(f))


class _Bound:
    """What a method is bound to while its signature is read (any object does)."""


# The factories of a defaultdict made in the frame that are followed: builtin types (and
# None), which make their value with no effect and are rebuilt as themselves.
_PLAIN_FACTORIES = (None, list, dict, set, int, float, tuple, str)


def _shared_array(v: Variable) -> bool:
    """`v` is a NumPy array from outside the graph (read through its source) that
    `from_numpy` takes as it is: writable, of a dtype tensors have, no negative stride."""
    from ..._dtype import from_numpy_dtype

    if not isinstance(v, ConstantVariable) or type(v.value) is not np.ndarray or \
            v.source is None or not v.value.flags.writeable or \
            any(s < 0 for s in v.value.strides):
        return False
    try:
        from_numpy_dtype(v.value.dtype)
    except (TypeError, KeyError, ValueError):
        return False
    return True


# Callables made while translating: they exist only as variables, never as graph arguments.
_CALLABLE_VARIABLES = (ObjectVariable, NestedFunctionVariable, BoundFunctionVariable,
                       PartialVariable)


def _python_layer_function(f):
    """The Python function a layer function of `fusegrad.nn` runs (under its
    `__torch_function__` wrapper), or None for any other function."""
    from ..._torch_function_wrappers import implementation

    impl = implementation(f)
    if isinstance(impl, types.FunctionType) and \
            (getattr(impl, "__module__", "") or "").startswith("fusegrad.nn."):
        return impl
    return None


def _is_normal(f) -> bool:
    """Whether `f` is `fusegrad.normal` (the public function: `_distributions.normal`
    beneath its `out=` and protocol wrappers)."""
    from ... import _distributions

    for _ in range(4):
        if f is _distributions.normal:
            return True
        f = getattr(f, "__wrapped__", None)
        if f is None or getattr(f, "__name__", None) != "normal":
            return False
    return False


def _tensor_normal(tr: Translator, f, args: list, kwargs: dict) -> Variable:
    """`normal(mean, std)` with a tensor mean or std: one graph node, the public function on
    the same arguments, which runs the registry's random op (`normal.Tensor_float` ...) when
    the graph runs: the same draws, checks and `NormalBackward` history as eager's. Other
    forms (a generator, `out=`, `size=`, other dtypes, values that are not numbers) are a
    graph break: the call runs for real."""
    bound = dict(zip(("mean", "std"), args))
    if len(args) > 2 or set(kwargs) - {"mean", "std", "generator"} or set(bound) & set(kwargs):
        raise Unsupported("normal of a tensor with these arguments")
    bound.update((k, v) for k, v in kwargs.items() if k != "generator")
    generator = kwargs.get("generator")
    if generator is not None and not (isinstance(generator, ConstantVariable) and
                                      generator.value is None):
        raise Unsupported("normal of a tensor with a generator")
    mean = bound.get("mean", ConstantVariable(0.0))
    std = bound.get("std", ConstantVariable(1.0))
    for v in (mean, std):
        if isinstance(v, TensorVariable):
            if v.example.dtype not in (_float32(), _float64()):
                raise Unsupported(f"normal of a {v.example.dtype} tensor")
        elif not isinstance(v, ConstantVariable) or type(v.value) not in (int, float):
            raise Unsupported("normal of a tensor and a value that is not a number")
    if not isinstance(std, TensorVariable) and std.value < 0:
        raise Unsupported("normal of a negative std")  # (eager's own error)
    try:
        broadcast_shapes(*(tuple(v.example.shape) for v in (mean, std)
                           if isinstance(v, TensorVariable)))
    except (RuntimeError, ValueError) as e:
        raise Unsupported(f"normal of tensors whose shapes do not broadcast: {e}") from None
    return tr.builder.call("call_function", f, (mean, std), {})


def _float32():
    from ..._dtype import float32

    return float32


def _float64():
    from ..._dtype import float64

    return float64


def _object_call(tr, f, args: list, kwargs: dict) -> Variable | None:
    """A builtin applied to an object made in the graph (`setattr(self, name, v)`,
    `type(self)`, `object.__setattr__(self, ...)`, `dataclasses.fields(self)`), or None
    where `f` is not one the capture answers for such an object."""
    import dataclasses

    from . import objects

    if f is object.__new__:
        return new_object(tr, args[0]) if not kwargs else None
    if f is weakref.ref:
        return weak_reference(args, kwargs)
    made = call_object_slot(tr, f, args, kwargs)
    if made is not None or kwargs:
        return made
    obj = args[0]
    if f is type and len(args) == 1:
        return ConstantVariable(obj.cls)
    if f is dataclasses.fields and len(args) == 1:
        return ConstantVariable(dataclasses.fields(obj.cls))
    if f is dataclasses.is_dataclass and len(args) == 1:
        return ConstantVariable(dataclasses.is_dataclass(obj.cls))
    if any(f is g for g in (getattr, setattr, hasattr, delattr)) and len(args) >= 2:
        name = tr.as_python(args[1])
        if not isinstance(name, str):
            return None  # the real call raises TypeError
        if f is setattr and len(args) == 3:
            objects.store_attr(tr, obj, name, args[2])
            return ConstantVariable(None)
        if f is delattr and len(args) == 2:
            objects.remove_attr(tr, obj, name)
            return ConstantVariable(None)
        if f is hasattr and len(args) == 2:
            return ConstantVariable(objects.has_attr(tr, obj, name))
        if f is getattr and len(args) == 2:
            return objects.read_attr(tr, obj, name)
        if f is getattr and len(args) == 3:
            return objects.read_attr(tr, obj, name) if objects.has_attr(tr, obj, name) \
                else args[2]
    if f is bool and len(args) == 1:
        return ConstantVariable(objects.truth(obj))
    if f is len and len(args) == 1 and obj.mapping is not None:
        return ConstantVariable(len(obj.mapping.items))  # (no __len__ of its own)
    if f is len and len(args) == 1:
        return objects.length(tr, obj)
    if f is callable and len(args) == 1:
        return ConstantVariable(objects.is_callable(tr, obj))
    if (f is str or f is repr) and len(args) == 1:
        return objects.text_of(tr, obj, f.__name__)
    if f is format and len(args) in (1, 2):
        spec = tr.as_python(args[1]) if len(args) == 2 else ""
        return objects.text_of(tr, obj, "format", spec) if isinstance(spec, str) else None
    if f is vars and len(args) == 1:
        return objects.read_attr(tr, obj, "__dict__")
    if any(f is g for g in (id, hash, repr, str, vars)):  # (the real object's identity,
        # text or __dict__: answered where it exists)
        raise Unsupported(f"{f.__name__}() of an object made in the graph")
    return None


# fusegrad classes whose instances are plain values made from constants, and functions
# of shapes: evaluated while translating.
_VALUE_CLASSES = (Size, finfo, iinfo, broadcast_shapes)


def _next_of_generator(tr, gen: LazyIteratorVariable, default: list) -> Variable:
    """`next(it[, default])` of a generator expression (or an enumerate/zip of one): its code
    runs up to its next `yield`, as Python runs it."""
    if len(default) > 1:
        raise Unsupported("next() with more than two arguments")
    item = tr.next_item(gen)
    if item is not None:
        return item
    if default:
        return default[0]
    raise Unsupported("next() of an empty generator (StopIteration)")


def _generator_send(tr, gen: GeneratorVariable, value: Variable | None, bad: bool) -> Variable:
    """`gen.send(value)` (`value` None: `gen.__next__()`) of a generator made in the graph:
    `value` becomes what the `yield` it stopped at gives, and its code runs on up to its
    next `yield`, as Dynamo runs it. What Python raises (sending a value into a generator
    not started) is a break, raised for real; the StopIteration of one used up is raised
    in the program, where the frame's own `try` may catch it."""
    if bad:
        raise Unsupported("generator.send() or __next__() with other arguments")
    if value is not None and gen.frame is None and not gen.done and not (
            isinstance(value, ConstantVariable) and value.value is None):
        raise Unsupported("a value sent into a generator not started (TypeError)")
    if value is not None and gen.frame is not None:
        gen.frame.stack[-1] = value  # (what YIELD_VALUE pushed for `next()`: None)
    finished = gen.done
    item = tr.next_item(gen)
    if item is None:
        # Python's StopIteration, raised in the program (a handler of the frame's catches
        # it), holding what the generator returned on the call that finished it.
        value = ConstantVariable(None) if finished else gen.returned
        if not isinstance(value, ConstantVariable) or not _is_plain_data(value.value):
            raise Unsupported("send() or next() of a finished generator (StopIteration)")
        raise Raised(ConstantVariable(
            StopIteration() if value.value is None else StopIteration(value.value)))
    return item


def _outside_setdefault(tr, obj: DictVariable, args: list) -> Variable:
    """`d.setdefault(key[, default])` of a dict read from the frame (its keys guarded): the
    item if the dict has the key, else the default, stored after the graph as `d[key] =
    default` is (`_store_outside_item`), the same object the graph goes on using."""
    real = tr.builder.container_objects.get(id(obj))
    if type(obj) is not DictVariable or real is None or real[0] is not obj or \
            type(real[1]) is not dict:
        raise Unsupported("dict.setdefault of a dict from outside the graph")
    key = tr.as_python(args[0])
    try:
        if key in obj.items:
            return obj.items[key]
    except TypeError:  # unhashable: the real call raises it
        raise Unsupported("dict.setdefault of an unhashable key") from None
    default = args[1] if len(args) > 1 else ConstantVariable(None)
    tr._store_outside_item(obj, args[0], default, real[1])
    return default


def _next_item(it: IteratorVariable, default: list) -> Variable:
    """`next(it[, default])` of an iterator over known items (a list's, a module listing's
    `children()`): its next item, else the default."""
    if it.watch is not None and len(it.watch[0].items) != it.watch[1]:
        raise Unsupported("next() of an iterator over a resized dict or set")
    if it.index < len(it.items):
        it.index += 1
        return it.items[it.index - 1]
    if default:
        return default[0]
    raise Unsupported("next() of an exhausted iterator (StopIteration)")


def _guard_name(tr, fn: ConstantVariable) -> str:
    """How guards read the object `fn` holds: its source, else a reference to it."""
    return tr.source_of(fn) or tr.builder.guards.ref(fn.value)


def _make_partial(args: list, kwargs: dict) -> Variable:
    """`functools.partial(func, *args, **kwargs)` made while translating. A partial of a
    partial made here is flattened, as `partial.__new__` flattens it."""
    if not args:
        raise Unsupported("functools.partial() without a function")
    func, rest = args[0], list(args[1:])
    if isinstance(func, PartialVariable):
        return PartialVariable(func.func, func.args + rest, {**func.kwargs, **kwargs})
    if isinstance(func, TensorVariable) or (isinstance(func, ConstantVariable) and
                                            not callable(func.value)):
        raise Unsupported("functools.partial() of an object that is not callable")
    return PartialVariable(func, rest, kwargs)


def _call_real_partial(tr, fn: ConstantVariable, args: list, kwargs: dict) -> Variable:
    """A call of a `functools.partial` made outside the graph: its function, arguments and
    keywords are read through the partial and guarded each on its own (the keywords are a
    dict that may change in place, so the partial's identity is not enough)."""
    p = fn.value
    src = _guard_name(tr, fn)
    func = tr.wrap(p.func, f"{src}.func")
    stored = tr.wrap(p.args, f"{src}.args")
    keywords = tr.wrap(p.keywords, f"{src}.keywords")
    if not isinstance(stored, TupleVariable) or not isinstance(keywords, DictVariable):
        raise Unsupported("a functools.partial whose arguments cannot be guarded")
    return call_variable(tr, func, stored.items + args, {**keywords.items, **kwargs})


def _is_compiled_function(f) -> bool:
    from .. import CompiledFunction

    return type(f) is CompiledFunction and isinstance(f._orig, types.FunctionType)


def _make_namedtuple(tr, fn: ConstantVariable, args: list, kwargs: dict) -> Variable:
    """`Pair(x, y)` of a plain named tuple: a tuple variable of that class. The class is
    guarded (by identity, where it was read); defaults it fills in are read from its
    `__new__`, guarded by value."""
    cls = fn.value
    try:
        bound = inspect.signature(cls).bind(*args, **kwargs)
    except TypeError as e:  # raised by the real call, after the graph
        raise Unsupported(f"calling {cls.__name__}: {e}") from None
    defaults = cls.__new__.__defaults__ or ()
    first_default = len(cls._fields) - len(defaults)
    items = []
    for i, name in enumerate(cls._fields):
        if name in bound.arguments:
            items.append(bound.arguments[name])
        else:
            src = f"{_guard_name(tr, fn)}.__new__.__defaults__[{i - first_default}]"
            items.append(tr.wrap(defaults[i - first_default], src))
    return TupleVariable(items, cls=cls)


def _namedtuple_class(c) -> bool:
    """Whether `c` is a named tuple class (made by `namedtuple`, maybe subclassed)."""
    return isinstance(c, type) and issubclass(c, tuple) and hasattr(c, "_fields") and \
        hasattr(c, "_make")


def _is_namedtuple_new(f) -> bool:
    """Whether `f` is the `__new__` `namedtuple` generates."""
    return isinstance(f, types.FunctionType) and f.__name__ == "__new__" and \
        (f.__doc__ or "").startswith("Create new instance of ")


def _subclassed_namedtuple(f) -> bool:
    """A named tuple subclass whose own `__new__` is Python that ends in the generated one
    (`PackedSequence`: checks, then `super().__new__(cls, ...)`), with no `__init__`: its
    construction is inlined."""
    if not _namedtuple_class(f) or is_plain_namedtuple(f) or \
            not isinstance(f.__new__, types.FunctionType) or _is_namedtuple_new(f.__new__):
        return False
    return all("__init__" not in vars(k) for k in f.__mro__[:f.__mro__.index(tuple)])


def _named_tuple_of(cls: type, new, args: list, kwargs: dict) -> Variable:
    """A tuple variable of named tuple class `cls` made by its generated `__new__` `new`
    from `args` (a default it fills in must not be needed: nothing guards it here)."""
    try:
        bound = inspect.signature(new).bind(cls, *args, **kwargs)
    except TypeError as e:  # raised by the real call, after the graph
        raise Unsupported(f"calling {cls.__name__}: {e}") from None
    missing = [n for n in cls._fields if n not in bound.arguments]
    if missing:
        raise Unsupported(f"{cls.__name__} made with its defaults for {missing}")
    return TupleVariable([bound.arguments[n] for n in cls._fields], cls=cls)


def _classes(spec) -> list:
    """The classes of `isinstance`'s second argument (a class or nested tuples of them)."""
    if isinstance(spec, tuple):
        return [c for item in spec for c in _classes(item)]
    return [spec]


def _guard_class_test(tr, test, a: ConstantVariable, spec, found: bool) -> None:
    """Guard `test(a, spec)` (`isinstance`, `issubclass`) where a class in `spec` answers
    through its metaclass: an ABC's answer changes when a class is registered with it or
    its `__subclasshook__` answers otherwise, so the guard asks it again on every call.
    A metaclass's own Python `__instancecheck__`/`__subclasscheck__` (which may read the
    object's attributes, which a followed object's graph reads through its variable) is a
    graph break."""
    metas = {type(c) for c in _classes(spec) if type(c) is not type and not (
        getattr(type(c), "__module__", "") or "").startswith("fusegrad")}  # (its own: fixed)
    if not metas:
        return
    for meta in metas:
        if not (issubclass(meta, abc.ABCMeta) and
                meta.__instancecheck__ is abc.ABCMeta.__instancecheck__ and
                meta.__subclasscheck__ is abc.ABCMeta.__subclasscheck__):
            raise Unsupported(f"{test.__name__}() against a class of metaclass "
                              f"{meta.__name__}, whose checks run Python code")
    guards = tr.builder.guards
    root = tr.source_of(a)
    if root is None:  # plain data: its class is fixed, only the ABC's registry may change
        root = guards.ref(type(a.value) if test is isinstance else a.value, "type")
        test = issubclass
    guards.add(f"{guards.ref(test, test.__name__)}({root}, {guards.ref(spec, 'classes')}) "
               f"is {found}")


# The code of every named tuple's `_replace` (each class has its own function).
_NAMEDTUPLE_REPLACE = collections.namedtuple("_Probe", "a")._replace.__code__


def _replace_fields(obj: TupleVariable, args: list, kwargs: dict) -> Variable:
    """`t._replace(field=value, ...)` of a named tuple variable: a new one of its class."""
    fields = obj.cls._fields
    if args or any(k not in fields for k in kwargs) or len(obj.items) != len(fields):
        raise Unsupported("namedtuple._replace() of unexpected arguments")  # (it raises)
    return TupleVariable([kwargs.get(k, v) for k, v in zip(fields, obj.items)], cls=obj.cls)


_PURE_MATH = {getattr(math, n) for n in (
    "sqrt", "exp", "log", "sin", "cos", "tan", "floor", "ceil", "prod", "pi", "isclose", "fabs",
    "pow", "isqrt", "gcd", "lcm", "log2", "log10", "log1p", "expm1", "trunc", "hypot", "atan2",
    "copysign", "asin", "acos", "atan", "sinh", "cosh", "tanh", "erf", "erfc", "degrees",
    "radians", "factorial", "comb", "perm", "isfinite", "isinf", "isnan", "fsum", "dist")
    if callable(getattr(math, n, None))}
_TENSOR_OPERATORS = {getattr(operator, n) for n in (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "abs", "matmul",
    "getitem", "lt", "le", "eq", "ne", "gt", "ge", "and_", "or_", "xor", "invert")}


def _global_hooks_registered() -> bool:
    from ...nn.modules._global_hooks import any_call_hooks

    return any_call_hooks()


_HOOK_TABLES = ("_forward_pre_hooks", "_forward_hooks", "_backward_hooks",
                "_backward_pre_hooks")


def _call_module(tr, fn: Variable, args, kwargs, real=None, plain: bool = False) -> Variable:
    """`module(*args)`: inline what `Module.__call__` runs, its `forward` (an instance
    attribute shadows the class's), between its hooks. `fn` holds the module, or is the
    variable of a module from outside followed by its attributes (`real`: the module).
    `plain`: `Module.__call__` itself, whatever the class's own `__call__` is."""
    mod = fn.value if real is None else real
    src = tr.guard_root(fn)
    own_call = type(mod).__call__
    if not plain and not _module_own_call(own_call):
        # A class's own `__call__` (`super().__call__(x) * 2`) does what it says, inlined;
        # its `super().__call__` comes back here (`_module_call_function`).
        if not isinstance(own_call, types.FunctionType) or src is None:
            raise Unsupported(f"{type(mod).__name__} overrides __call__")
        guards = tr.builder.guards
        guards.add(f"type({src}).__call__ is {guards.ref(own_call, 'fn')}")
        return inline(tr, own_call, [fn] + list(args), kwargs)
    pre, post, flags = _forward_hooks(mod)
    if (pre or post) and src is None:
        raise Unsupported("a module with hooks")  # nothing to guard the hooks on
    global_pre, global_post, global_keyword, global_always = _global_forward_hooks(tr)
    forward = mod.forward
    if isinstance(forward, types.MethodType) and forward.__self__ is mod:
        func, args = forward.__func__, [fn] + args
    else:
        func = forward
    if not isinstance(func, types.FunctionType):
        raise Unsupported(f"{type(mod).__name__}.forward is not a Python function")
    if src is not None:  # hooks added or forward replaced later change what the call does
        guards = tr.builder.guards
        if pre or post:
            hooks = ", ".join(guards.ref(hook_key(h), "fn") for _, h in (*pre, *post))
            guards.add(f"___module_hooks_are({src}, {guards.ref(func)}, {func is not forward}, "
                       f"{len(pre)}, ({hooks},), {flags!r})")
        else:
            guards.add(f"___module_call_is({src}, {guards.ref(func)}, {func is not forward})")
    if not pre and not post and not global_pre and not global_post:
        return inline(tr, func, args, kwargs)
    always = bool(flags[2]) or global_always
    if always:
        _protect_always_called(tr)
    # What Module.__call__ runs around forward: each pre-hook may replace the positional
    # arguments (a non-tuple result becomes a 1-tuple; a keyword pre-hook, called with the
    # keyword arguments too, returns both), each hook after may replace the result.
    # The hooks registered for every module run first, each time.
    inputs = args[1:] if func is not forward else args
    kw_pre = {len(global_pre) + i for i in flags[0]}
    kw_post = global_keyword | {len(global_post) + i for i in flags[1]}
    pre_hooks = global_pre + [_hook_variable(tr, hook, f"{src}._forward_pre_hooks[{key!r}]")
                              for key, hook in pre]
    post_hooks = global_post + [_hook_variable(tr, hook, f"{src}._forward_hooks[{key!r}]")
                                for key, hook in post]
    try:
        return _hooked_forward(tr, fn, func, func is not forward, inputs, kwargs,
                               pre_hooks, post_hooks, kw_pre, kw_post)
    except Raised:
        if always:
            # Eagerly the always-called hooks run before the error leaves the call.
            raise Unsupported("an exception inside a module call with always-called "
                              "hooks") from None
        raise


def _hooked_forward(tr, fn, func, bound: bool, inputs: list, kwargs: dict, pre_hooks: list,
                    post_hooks: list, kw_pre: set, kw_post: set) -> Variable:
    """The forward of module `fn` between its hooks, as `Module.__call__` runs them (the
    hooks at the positions in `kw_pre`/`kw_post` given the keyword arguments: one dict, as
    eager passes the same one to each)."""
    kw = DictVariable(dict(kwargs))
    for i, hook in enumerate(pre_hooks):
        if i in kw_pre:
            res = call_variable(tr, hook, [fn, TupleVariable(list(inputs)), kw], {})
            if isinstance(res, ConstantVariable) and res.value is None:
                continue
            if not isinstance(res, TupleVariable) or len(res.items) != 2 or \
                    not isinstance(res.items[0], TupleVariable) or \
                    type(res.items[1]) is not DictVariable or \
                    not all(type(k) is str for k in res.items[1].items):
                # (eager's RuntimeError, or arguments not followed here)
                raise Unsupported("a keyword forward pre-hook's result")
            inputs, kw = list(res.items[0].items), res.items[1]
            continue
        res = call_variable(tr, hook, [fn, TupleVariable(list(inputs))], {})
        if not (isinstance(res, ConstantVariable) and res.value is None):
            inputs = list(res.items) if isinstance(res, TupleVariable) else [res]
    if not all(type(k) is str for k in kw.items):
        raise Unsupported("keyword arguments that are not strings")
    result = inline(tr, func, ([fn] if bound else []) + list(inputs), dict(kw.items))
    for i, hook in enumerate(post_hooks):
        hook_args = [fn, TupleVariable(list(inputs))] + ([kw] if i in kw_post else [])
        res = call_variable(tr, hook, hook_args + [result], {})
        if not (isinstance(res, ConstantVariable) and res.value is None):
            result = res
    return result


def _module_own_call(f) -> bool:
    """Whether `f` is `Module.__call__`, not a class's own (`nn.modules.module.
    is_module_call`; nn imports the compiler, so read on first use)."""
    from ...nn.modules.module import is_module_call

    return is_module_call(f)


def _global_forward_hooks(tr) -> tuple[list, list, set, bool]:
    """The variables of the forward pre-hooks and forward hooks registered for every module
    (`register_module_forward_pre_hook`/`register_module_forward_hook`), which a module's
    call runs before its own, as Dynamo traces them, the positions among the hooks after of
    those that take keyword arguments, and whether any is always called; the graph is
    guarded on the tables holding exactly these (none, usually). Backward hooks and hooks
    that are not Python functions are a break; always-called ones protect the graph
    (`_protect_always_called`)."""
    from ...nn.modules import _global_hooks as g

    guards = tr.builder.guards
    if not g.any_call_hooks():
        # A graph that inlined a forward is valid only while no global hook would run.
        guards.add("___no_global_module_hooks()")
        return [], [], set(), False
    if g._global_backward_hooks or g._global_backward_pre_hooks:
        raise Unsupported("backward hooks registered for every module")
    pre = list(g._global_forward_pre_hooks.values())
    post = list(g._global_forward_hooks.values())
    if not all(isinstance(h, types.FunctionType) for h in (*pre, *post)):
        raise Unsupported("a hook registered for every module that is not a function")
    keyword = _positions(g._global_forward_hooks, g._global_forward_hooks_with_kwargs)
    always = _positions(g._global_forward_hooks, g._global_forward_hooks_always_called)
    if always:
        _protect_always_called(tr)
    pre_refs = "".join(f"{guards.ref(h, 'fn')}, " for h in pre)
    post_refs = "".join(f"{guards.ref(h, 'fn')}, " for h in post)
    guards.add(f"___global_module_hooks_are(({pre_refs}), ({post_refs}), {keyword!r}, "
               f"{always!r})")
    return [ConstantVariable(h) for h in pre], [ConstantVariable(h) for h in post], \
        set(keyword), bool(always)


def _positions(hooks: dict, flagged) -> tuple:
    """The positions in `hooks` (a hook table) of the ids in `flagged`."""
    return tuple(i for i, hid in enumerate(hooks) if hid in flagged)


def _protect_always_called(tr) -> None:
    """A call with always-called forward hooks: eagerly they run even when the forward
    raises, so a graph that raises when it runs must run again eagerly from its start (its
    real module call then runs them), as a graph inside a `try` does."""
    if not tr.builder.protected:
        tr.builder.enter_protected()


def _forward_hooks(mod) -> tuple[list, list, tuple]:
    """The forward pre-hooks and forward hooks of `mod` that capture inlines, with the
    hooks' flags (the positions of the keyword pre-hooks, keyword hooks and always-called
    hooks in their tables); Unsupported for backward hooks."""
    d = mod.__dict__
    if d.get("_backward_hooks") or d.get("_backward_pre_hooks"):
        raise Unsupported("a module with backward hooks")
    return _hook_items(d.get("_forward_pre_hooks")), _hook_items(d.get("_forward_hooks")), \
        _hook_flags(d)


def _hook_items(table) -> list:
    return list(table.items()) if table else []


def _hook_flags(d: dict) -> tuple:
    """(keyword pre-hooks, keyword hooks, always-called hooks) of a module's `__dict__` `d`,
    as positions in its hook tables."""
    pre, post = d.get("_forward_pre_hooks") or {}, d.get("_forward_hooks") or {}
    return (_positions(pre, d.get("_forward_pre_hooks_with_kwargs") or ()),
            _positions(post, d.get("_forward_hooks_with_kwargs") or ()),
            _positions(post, d.get("_forward_hooks_always_called") or ()))


def hook_key(hook):
    """What a module's hook is guarded as: a function without closure cells or defaults by
    its code and globals (`SameCode`: a new lambda per instance, `lambda m, a, o: o + 1`,
    does the same; Dynamo guards a hook's code), anything else by identity."""
    if isinstance(hook, types.FunctionType) and hook.__closure__ is None and \
            hook.__defaults__ is None and hook.__kwdefaults__ is None:
        return SameCode(hook.__code__, hook.__globals__)
    return hook


def _hook_variable(tr, hook, source: str) -> Variable:
    """The variable of a module's hook: an instance of a plain class (a pruning method, a
    user's callable object) is followed, its `__call__` inlined with its attributes read
    through `source`; a function stays a constant (its identity is guarded)."""
    if not isinstance(hook, types.FunctionType) and constructible(type(hook)):
        return tr.builder.wrap(hook, source)
    if not isinstance(hook, types.FunctionType) and constructible(type(hook), truth_ok=True):
        followed = follow_outside(tr.builder, hook, source, truth_ok=True)
        if followed is not None:  # (a container of pruning methods: its own `__len__`)
            return followed
    return ConstantVariable(hook)


# Builtins that iterate over their argument: evaluated on a real iterator, they would consume it.
_CONSUMERS = {sum, min, max, sorted, any, all, tuple, list, dict, enumerate, zip, reversed}


def _reads_graph_memory(tr, args) -> bool:
    """Whether an array among `args` may share memory with one of the graph's input
    tensors."""
    arrays = [a.value for a in args
              if isinstance(a, ConstantVariable) and isinstance(a.value, np.ndarray)]
    return any(np.may_share_memory(array, t._data) for array in arrays
               for t in tr.builder.input_values.values() if isinstance(t, Tensor))


def _evaluate(tr, f, args, kwargs) -> Variable:
    tr.guard_contents(list(args) + list(kwargs.values()), consume=f in _CONSUMERS)
    values = [tr.as_python(a) for a in args]
    kw = {k: tr.as_python(v) for k, v in kwargs.items()}
    if any(isinstance(v, Tensor) for v in values + list(kw.values())):
        raise Unsupported("a tensor that is not part of the graph")
    if f not in _NO_METHODS_CALLED and not getattr(f, "_fusegrad_constant_result", False):
        for v in _shallow_values(values + list(kw.values())):
            if python_methods(type(v)):
                raise Unsupported(f"{getattr(f, '__name__', f)}() of a {type(v).__name__}, "
                                  "whose methods are Python code")
    dynamic = has_symfloat(values) or has_symfloat(list(kw.values()))
    if dynamic and _is_pure_numpy(f):
        # NumPy reads a number's value (`np.sqrt(n * 0.5)` of a counter): the dynamic
        # floats' values for this call only (guarded), as a size's `__array__` gives.
        values, kw = specialize_all(values), {k: specialize_all(v) for k, v in kw.items()}
        dynamic = False
    if f is int and len(values) == 1 and not kw and isinstance(values[0], SymFloat):
        # `int()` insists on a true int from `__int__`: the float's integer symbol is
        # asked for directly (`math.trunc` and `round` pass a SymInt through).
        return tr.from_python(values[0].__int__())
    try:
        return tr.from_python(f(*values, **kw))
    except Unsupported:  # a dynamic value that needs its value (`int(v)`): a graph break,
        raise  # not an exception of the program (a handler must not catch it)
    except Exception as e:  # a pure function of guarded values: it raises every time
        from .exceptions import Raised

        if dynamic:  # (maybe only for want of a method of SymFloat's: `divmod(v, 2)`)
            return _evaluate(tr, f, [ConstantVariable(specialize_all(v)) for v in values],
                             {k: ConstantVariable(specialize_all(v)) for k, v in kw.items()})
        raise Raised(ConstantVariable(e)) from None


def _lazy_builtin(tr, f, args: list, kwargs: dict) -> Variable | None:
    """A builtin applied to a lazy iterator (a generator expression) that takes its items
    one by one: `enumerate`/`zip` give a lazy iterator, `any`/`all` stop at the first item
    that decides, as Python's do; None for a consumer that takes them all at once."""
    if f in (any, all) and len(args) == 1 and not kwargs:
        while (item := tr.next_item(args[0])) is not None:
            if _evaluate(tr, bool, [item], {}).value is (f is any):
                return ConstantVariable(f is any)
        return ConstantVariable(f is all)
    if f is enumerate and len(args) == 1 and set(kwargs) <= {"start"}:
        start = tr.as_python(kwargs["start"]) if kwargs else 0
        if type(start) is not int:
            raise Unsupported("enumerate() of a generator from a start that is not an int")
        return LazyZipVariable([tr.iterator_of(args[0])], start)
    if f is zip and not kwargs:
        return LazyZipVariable([tr.iterator_of(a) for a in args], None)
    if f is reversed:
        from .exceptions import Raised

        raise Raised(ConstantVariable(TypeError(
            f"'{args[0].python_type().__name__}' object is not reversible")))
    if f not in _CONSUMERS:
        raise Unsupported(f"{getattr(f, '__name__', f)}() of a generator")
    return None


def _python_key(key: Variable | None) -> bool:
    """Whether `key=` names code written in Python (a function, a lambda, a method, a
    partial, a callable object): run while translating it would run once, not per call."""
    if key is None or isinstance(key, (TensorVariable, TupleVariable, ListVariable,
                                       DictVariable)):
        return False
    if not isinstance(key, ConstantVariable):
        return True  # (a nested function, a partial or an object made in the graph)
    f = key.value
    f = getattr(f, "func", f) if isinstance(f, functools.partial) else f
    return isinstance(f, (types.FunctionType, types.MethodType)) or (
        not isinstance(f, (type, types.BuiltinFunctionType, types.BuiltinMethodType)) and
        isinstance(inspect.getattr_static(type(f), "__call__", None), types.FunctionType))


def _ordered_by_key(tr, f, args: list, kwargs: dict) -> Variable:
    """`sorted(items, key=fn)`, `min`/`max(items, key=fn)` with a key written in Python:
    the key is called (inlined or recorded) once per item in order, as the builtin calls
    it, and the items are ordered by the results, which must be plain values."""
    allowed = {"key", "reverse"} if f is sorted else {"key", "default"}
    if set(kwargs) - allowed or not args or (f is sorted and len(args) > 1):
        raise Unsupported(f"{f.__name__}() with these arguments")
    items = list(args) if len(args) > 1 else tr.unpack(args[0])
    keys = []
    for item in items:
        k = call_variable(tr, kwargs["key"], [item], {})
        if not isinstance(k, ConstantVariable) or not _is_plain_data(k.value) or \
                holds_symbol(k.value):
            raise Unsupported(f"{f.__name__}() by keys that are not plain values")
        keys.append(k.value)
    try:
        if f is sorted:
            reverse = tr.as_python(kwargs["reverse"]) if "reverse" in kwargs else False
            order = sorted(range(len(items)), key=keys.__getitem__, reverse=reverse)
            return ListVariable([items[i] for i in order])
        if not items:
            if "default" in kwargs:
                return kwargs["default"]
            f([])  # (Python's error for an empty sequence)
        return items[f(range(len(items)), key=keys.__getitem__)]
    except (TypeError, ValueError) as e:
        from .exceptions import Raised

        raise Raised(ConstantVariable(e)) from None


# Builtins that call no method of their arguments' classes.
_NO_METHODS_CALLED = frozenset({type, id, callable, isinstance, issubclass})


def _shallow_values(values: list) -> list:
    """`values` and the items (keys and values) of the containers among them."""
    found = list(values)
    for v in values:
        if type(v) in (list, tuple, set, frozenset):
            found.extend(v)
        elif type(v) is dict:
            found.extend(v)
            found.extend(v.values())
    return found


def _call_builtin(tr, f, args, kwargs) -> Variable:
    if any(isinstance(a, LazyIteratorVariable) for a in args):
        lazy = _lazy_builtin(tr, f, args, kwargs)
        if lazy is not None:
            return lazy
        # A consumer takes all the items at once, as Python's does.
        args = [TupleVariable(tr.generator_items(a)) if isinstance(a, LazyIteratorVariable)
                else a for a in args]
    if f in (sorted, min, max) and _python_key(kwargs.get("key")):
        return _ordered_by_key(tr, f, args, kwargs)
    if f is int and len(args) == 1 and not kwargs and isinstance(args[0], ConstantVariable) \
            and isinstance(args[0].value, SymInt):
        return args[0]  # `int(k)` of a symbolic int is itself, as PyTorch's SymInt: no guard
    if f is type and len(args) == 1 and not kwargs and \
            isinstance(args[0], OutsideIteratorVariable):
        return ConstantVariable(args[0].cls)  # (its type is guarded)
    if f is type and len(args) == 1 and not kwargs and type(args[0]) in (
            TupleVariable, ListVariable):
        # (a named tuple's class: an op's result, a PackedSequence; else the container's)
        return ConstantVariable(args[0].python_type())
    if f is len and len(args) == 1:
        a = args[0]
        if isinstance(a, TensorVariable):
            if a.example.ndim == 0:
                raise Unsupported("len() of a 0-d tensor")
            return ConstantVariable(a.example.shape[0])
        if isinstance(a, OutsideListVariable) and not a.materialized():
            # (its length, guarded, with what the graph appended: its items need not be
            # read, and after an append they cannot be)
            return ConstantVariable(tr.builder.outside_list_length(a))
        if isinstance(a, (TupleVariable, DictVariable)):
            return ConstantVariable(len(a.items))
        if isinstance(a, ConstantVariable) and not _is_plain_data(a.value) and \
                hasattr(a.value, "__len__"):
            n = len(a.value)
            src = tr.guard_root(a)
            if src is not None:  # the container may grow or shrink between calls
                tr.builder.guards.length(src, n)
            return ConstantVariable(n)
    if f in (isinstance, type, float, str, repr) and len(args) <= 2 and \
            isinstance(args[0], ConstantVariable) and isinstance(args[0].value, SymFloat):
        # A dynamic float is a float when the graph runs; float() of it is itself, its text
        # is formatted where it is used (symfloat.SymText).
        if f in (str, repr) and len(args) == 1:
            return ConstantVariable(format_lazily(args[0].value, f.__name__, ""))
        if f is float:
            return args[0] if len(args) == 1 else ConstantVariable(float(*args))
        if f is type:
            return ConstantVariable(float)
        return ConstantVariable(isinstance(args[0].value.hint, tr.as_python(args[1])))
    if f in (isinstance, type) and isinstance(args[0], ConstantVariable) and \
            isinstance(args[0].value, SymInt):
        # A symbolic size is an int when the graph runs.
        if f is type:
            return ConstantVariable(int)
        return ConstantVariable(isinstance(args[0].value.hint, tr.as_python(args[1])))
    if f is isinstance and len(args) == 2:
        cls = tr.as_python(args[1])
        a = args[0]
        if isinstance(a, ConstantVariable):
            found = isinstance(a.value, cls)
            _guard_class_test(tr, isinstance, a, cls, found)
            return ConstantVariable(found)
        kind = a.python_type()
        if isinstance(a, TensorVariable) and a.source is not None:
            # An input's own class (a Parameter, a subclass), which its guard checks exactly.
            value = tr.builder.input_values.get(a.source)
            if value is not None:
                kind = type(value)
        found = issubclass(kind, cls)
        if isinstance(a, ObjectVariable):
            _guard_class_test(tr, issubclass, ConstantVariable(kind), cls, found)
        return ConstantVariable(found)
    if f is issubclass and len(args) == 2 and isinstance(args[0], ConstantVariable) and \
            isinstance(args[0].value, type):
        cls = tr.as_python(args[1])
        found = issubclass(args[0].value, cls)
        _guard_class_test(tr, issubclass, args[0], cls, found)
        return ConstantVariable(found)
    if f is hasattr and len(args) == 2 and isinstance(args[0], TensorVariable):
        name = tr.as_python(args[1])
        src = args[0].source
        if src is None:  # made by the graph: only what every tensor has
            return ConstantVariable(hasattr(Tensor, name))
        found = hasattr(tr.builder.input_values[src], name)
        tr.builder.guards.add(f"hasattr({src}, {name!r}) is {found}")
        return ConstantVariable(found)
    if f in (getattr, hasattr) and isinstance(args[0], ConstantVariable) and \
            len(args) == (2 if f is hasattr else 3):
        name = tr.as_python(args[1])
        stored = tr.builder.stored_attr(args[0].value, name)
        if stored is not None:  # assigned earlier in this graph
            return ConstantVariable(True) if f is hasattr else stored
        found = hasattr(args[0].value, name)
        src = tr.guard_root(args[0])  # the attribute may be set or deleted between calls
        if src is not None and not _is_plain_data(args[0].value):
            tr.builder.guards.add(f"hasattr({src}, {name!r}) is {found}")
        if f is hasattr:
            return ConstantVariable(found)
        return tr.get_attr(args[0], name) if found else args[2]
    if f is getattr and len(args) in (2, 3):
        try:
            return tr.get_attr(args[0], tr.as_python(args[1]))
        except Unsupported:
            if len(args) == 3:
                return args[2]
            raise
    # A real container (not plain data) unpacks through `unpack`, which guards its items.
    if f in (tuple, list) and len(args) == 1 and not _is_data(args[0]):
        items = tr.unpack(args[0])
        return TupleVariable(items) if f is tuple else ListVariable(items)
    if f in (enumerate, zip) and any(type(a) is ListVariable for a in args):
        # A list the loop may grow (a work queue): its iterator reads it as it is at each
        # step, as Python's does.
        lazy = _lazy_builtin(tr, f, args, kwargs)
        if lazy is not None:
            return lazy
    if f in (enumerate, zip, reversed) and not all(_is_data(a) for a in args):
        lists = [tr.unpack(a) for a in args]
        if f is zip and kwargs and len({len(items) for items in lists}) > 1:
            # `strict=True` raises once the shortest is used up, as the zip is iterated.
            raise Unsupported("zip() with keywords over iterables of different lengths")
        if f is enumerate:
            start = tr.as_python(kwargs["start"]) if "start" in kwargs else 0
            rows = [TupleVariable([ConstantVariable(i + start), v])
                    for i, v in enumerate(lists[0])]
        elif f is zip:
            rows = [TupleVariable(list(r)) for r in zip(*lists)]
        else:
            rows = list(reversed(lists[0]))

        return IteratorVariable(rows)
    if f is dict and len(args) <= 1 and (_has_tensor(args) or _has_tensor(kwargs.values())
                                         or any(_is_built(a) for a in args)):
        return _make_dict(tr, args, kwargs)
    if f in (min, max):
        found = extreme(tr, f, args, kwargs)  # of objects made in the graph
        if found is not None:
            return found
    if f in (abs, sum, min, max) and (_has_tensor(args)):
        if f is abs:
            return tr.builder.call("call_function", abs, tuple(args), {})
        if f is sum:
            items = tr.unpack(args[0])
            total = args[1] if len(args) > 1 else ConstantVariable(0)
            for item in items:
                total = tr.apply(operator.add, (total, item))
            return total
        raise Unsupported(f"{f.__name__}() over tensors")
    if f is type and len(args) == 1 and not kwargs and isinstance(args[0], TensorVariable):
        cls = _tensor_type(tr, args[0])
        if cls is not None:
            return ConstantVariable(cls)
    if f is sorted and len(args) == 1 and isinstance(args[0], DictVariable) and \
            set(kwargs) <= {"reverse"}:
        # (a dict's keys: its values, tensors or not, are not read)
        keys = tr.unpack(args[0])
        if all(isinstance(k, ConstantVariable) and _is_plain_data(k.value) for k in keys):
            return _evaluate(tr, f, [TupleVariable(keys)], kwargs)
    if _has_tensor(args) or _has_tensor(kwargs.values()):
        raise Unsupported(f"{getattr(f, '__name__', f)}() with tensor arguments")
    return _evaluate(tr, f, args, kwargs)


def _tensor_type(tr, t: TensorVariable) -> type | None:
    """The class of graph tensor `t`: an input's (its guard checks the class), or `Tensor`
    for one computed in the graph when every input is a plain tensor or a parameter, whose
    ops give plain tensors (a subclass's could give its own class); None otherwise."""
    from ...nn import Parameter

    values = tr.builder.input_values
    if t.source is not None:
        value = values.get(t.source)
        return type(value) if isinstance(value, Tensor) else None
    if all(type(v) in (Tensor, Parameter) for v in values.values()):
        return Tensor
    return None


def _is_built(v: Variable) -> bool:
    """A container variable made during translation (or read from an input container)."""
    from .variables import IteratorVariable

    return isinstance(v, (TupleVariable, DictVariable, IteratorVariable))


def _make_dict(tr, args: list, kwargs: dict) -> Variable:
    """`dict(d)`, `dict(pairs)`, `dict(**kw)` holding graph values: a new dict variable (a
    copy: storing into it leaves `d` as it is). Its keys are constants: those of a dict
    variable (an input dict's keys are guarded), or pairs' first items."""
    from .variables import IteratorVariable

    items: dict = {}
    if args:
        a = args[0]
        if isinstance(a, DictVariable):
            items.update(a.items)
        else:
            if isinstance(a, IteratorVariable):  # consumed, as the real dict() consumes it
                pairs = [tr.unpack(p) for p in a.items[a.index:]]
                a.index = len(a.items)
            elif isinstance(a, TupleVariable):
                pairs = [tr.unpack(p) for p in a.items]
            else:
                raise Unsupported(f"dict() of a {type(a).__name__}")
            if any(len(p) != 2 for p in pairs):
                raise Unsupported("dict() of items that are not pairs")
            for k, v in pairs:
                key = tr.as_python(k)
                if isinstance(key, (SymInt, SymFloat)):  # a size: its value is not fixed
                    raise Unsupported("dict() with a symbolic key")
                try:
                    items[key] = v
                except TypeError as e:  # unhashable: the real call raises it
                    raise Unsupported(f"dict(): {e}") from None
    items.update(kwargs)
    return DictVariable(items)


def _is_data(v: Variable) -> bool:
    return isinstance(v, ConstantVariable) and (_is_plain_data(v.value) or
                                                isinstance(v.value, range))


def _refuse_new_leaf(kwargs) -> None:
    """A tensor made to require grad inside the graph (`zeros(3, requires_grad=True)`) is a
    new leaf, which the graph's outputs cannot be (they carry its node): a graph break."""
    flag = kwargs.get("requires_grad")
    if flag is not None and not (isinstance(flag, ConstantVariable) and not flag.value):
        raise Unsupported("a tensor made to require grad inside the graph (a new leaf)")


_OUT_POSITIONS: dict = {}


def _out_position(f) -> int | None:
    """Where `f` takes `out` by position (None: keyword-only, or no `out` at all)."""
    try:
        return _OUT_POSITIONS[f]
    except (KeyError, TypeError):
        pass
    position = None
    try:
        for i, p in enumerate(inspect.signature(f).parameters.values()):
            if p.name == "out" and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                position = i
    except (TypeError, ValueError):
        pass
    try:
        _OUT_POSITIONS[f] = position
    except TypeError:  # not hashable
        pass
    return position


def _out_argument(f, args, kwargs) -> tuple | None:
    """(the `out` variable, its position or None when given by keyword) of a call writing its
    result into an existing tensor (`add(a, b, out=c)`), or None for a call without one."""
    given = kwargs.get("out")
    position = None
    if given is None:
        position = _out_position(f)
        if position is None or position >= len(args):
            return None
        given = args[position]
    if isinstance(given, ConstantVariable) and given.value is None:
        return None
    return given, position


def _call_with_out(tr, f, out: tuple, args: list, kwargs: dict) -> Variable:
    """`f(..., out=c)` as the graph records it: the result computed, then copied into `c`
    (`c.copy_(result)`), `c` returned. Only where that is exactly eager's write: `c` already
    has the result's shape and dtype (eager would resize it, with a warning, or refuse the
    cast), its elements do not overlap, and nothing records a gradient (eager refuses `out=`
    on inputs that require grad). Otherwise a graph break: the call runs for real."""
    from ..._thread_state import local

    given, position = out
    name = getattr(f, "__name__", f)
    if position is None:
        kwargs = {k: v for k, v in kwargs.items() if k != "out"}
    else:
        args = args[:position] + args[position + 1:]
    tensors = [t for a in (*args, *kwargs.values())
               for t in (a.items if isinstance(a, TupleVariable) else (a,))
               if isinstance(t, TensorVariable)]  # (`cat`'s list of tensors too)
    target = given.example if isinstance(given, TensorVariable) else None
    if target is None or holds_symbol(tuple(target.shape)) or target.requires_grad or \
            any(s == 0 and n > 1 for s, n in zip(target.stride(), target.shape)) or \
            local.grad_enabled and any(t.example.requires_grad for t in tensors):
        raise Unsupported(f"{name}(..., out=...) writes into an existing tensor")
    # Eager refuses some overlaps of `out` with an input (a partial one for pointwise ops,
    # any for cat/stack): where they may share memory, the call runs for real.
    root = target._base if target._base is not None else target
    for t in tensors:
        if t.node is given.node and _overlap_rule(name) == _PARTIAL:
            continue  # (`add(a, 1, out=a)`: the same elements, allowed)
        base = t.example._base if t.example._base is not None else t.example
        if t.node is given.node or base is root:
            raise Unsupported(f"{name}(..., out=...) into a tensor sharing memory with an "
                              "input")
    result = tr.builder.call("call_function", f, tuple(args), kwargs)
    if not isinstance(result, TensorVariable) or \
            tuple(result.example.shape) != tuple(target.shape) or \
            result.example.dtype != target.dtype:
        raise Unsupported(f"{name}(..., out=...) into a tensor of another shape or dtype")
    return tr.builder.call("call_method", "copy_", (given, result), {})


def _layout_known(node) -> bool:
    """Whether the fake example of `node` has the strides eager execution gives its value.

    A graph input's fake copies the input's strides, and a view's meta gives eager's strides
    of its input's layout (`x.transpose(0, 1)`, `permute`, `expand`: known where the input's
    is). The metas of computing ops give row-major results, where eager keeps the layout of
    non-contiguous operands for some (`(x.t() * 2).stride()` is `(1, 4)`, `x.t().sort(0)`
    keeps its input's): capture's fake mode gives a result eager's strides where a rule
    says what they are (`layouts`: elementwise ops, and ops that always make a row-major
    result), and a computed tensor's strides are known when every op of its call had
    such a rule (`layout_exact`) and the tensors it was computed from have known layouts,
    or its layout does not depend on theirs (`layout_free`: a reduction's, a row-major
    copy's; a node recorded otherwise: when it and those tensors are row-major contiguous);
    `contiguous()` makes a row-major tensor whatever it is given. Otherwise
    `stride()`/`is_contiguous()` break the graph and are answered by the real tensor."""
    if node is None:
        return True
    stack = [node]
    while stack:  # (inputs first, without recursion: a graph may be thousands deep)
        n = stack[-1]
        if n.meta.get("layout_known") is not None:
            stack.pop()
            continue
        pending = [i for i in n.all_input_nodes if i.meta.get("layout_known") is None]
        if pending and n.op != "placeholder" and not _makes_row_major(n):
            stack.extend(pending)
            continue
        stack.pop()
        inputs = n.all_input_nodes
        if n.op == "placeholder" or _makes_row_major(n):
            known = True
        elif _is_view(n) or _item_of_results(n):
            known = all(i.meta["layout_known"] for i in inputs)
        elif n.meta.get("layout_exact") is not None:  # (a call the fake mode ran)
            known = n.meta["layout_exact"] and (n.meta.get("layout_free") or all(
                i.meta["layout_known"] for i in inputs))
        else:
            known = _row_major_values(n) and all(
                i.meta["layout_known"] and _row_major_values(i) for i in inputs)
        n.meta["layout_known"] = known
    return node.meta["layout_known"]


def _item_of_results(node) -> bool:
    """Whether `node` takes one result of a call giving several (`x.max(0)[0]`, which has
    the layout its call gave it)."""
    return node.op == "call_function" and node.target is operator.getitem and bool(
        node.args) and hasattr(node.args[0], "op") and isinstance(
        node.args[0].meta.get("example_value"), (tuple, list))


def _row_major_values(node) -> bool:
    value = node.meta.get("example_value")
    values = value if isinstance(value, (tuple, list)) else (value,)
    return all(_row_major(v) for v in values if isinstance(v, Tensor))


def _target_name(node) -> str:
    target = node.target
    return target if isinstance(target, str) else getattr(target, "__name__", "")


def _is_view(node) -> bool:
    """Whether `node` makes a view of its input (a registry view op, by its public name as
    function or method) or a view or a row-major copy as its strides decide (`reshape`)."""
    if node.op not in ("call_method", "call_function"):
        return False
    name = _target_name(node)
    return has_flag(name, VIEW) or has_flag(name, VIEW_OR_COPY)


def _makes_row_major(node) -> bool:
    """`x.contiguous()` (the default memory format): row-major in eager and in its meta."""
    return node.op == "call_method" and node.target == "contiguous" and not node.kwargs and \
        len(node.args) == 1


def _size_one_strides_unknown(obj) -> bool:
    """Whether the strides of a computed tensor's dims of size 1 may differ from eager's: the
    view meta gives them stride 0 where eager gives the stride of the dims inside them
    (`x.view(1, 1, 10).stride()` is `(10, 10, 1)`); a graph input's are its own."""
    if obj.node is None or obj.node.op == "placeholder":
        return False
    # A symbol is a size of at least 2: comparing one records no guard (`int()` would
    # specialise it); an expression over symbols is guarded as any decision about it.
    return any(bool(n == 1) for n in obj.example.shape)


def _empty_computed(obj) -> bool:
    """Whether `obj` is a computed tensor without elements: eager's strides of one are
    NumPy's (`zeros(3, 0, 2).permute(2, 0, 1).stride()` is `(3, 1, 1)`), which no meta
    models; a graph input's are its own."""
    if obj.node is None or obj.node.op == "placeholder":
        return False
    return any(bool(n == 0) for n in obj.example.shape)


def _row_major(t: Tensor) -> bool:
    """Whether fake `t` is row-major contiguous (a symbolic answer counts as not)."""
    try:
        return t.is_contiguous() is True
    except Exception:  # noqa: BLE001 - an undecidable symbolic comparison: not known
        return False


def _call_method(tr, fn: MethodVariable, args, kwargs) -> Variable:
    obj, name = fn.obj, fn.name
    if isinstance(obj, GeneratorVariable):
        return _generator_send(tr, obj, args[0] if name == "send" and args else None,
                               len(args) != (name == "send") or bool(kwargs))
    if isinstance(obj, TensorVariable):
        _refuse_new_leaf(kwargs)
        if name == "requires_grad_" and not (args and isinstance(args[0], ConstantVariable)
                                             and not args[0].value):
            raise Unsupported("Tensor.requires_grad_() inside the graph (a new leaf)")
        if captures_item(tr.builder, obj, name) and not args and not kwargs:
            node = tr.builder.graph.create_node("call_method", "item", (obj.node,), {})
            tr.builder.created.append(node)
            return ConstantVariable(UnbackedFloat(node, tr.builder))
        if name == "register_hook":
            from .hooks import register_hook

            return register_hook(tr, obj, args, kwargs)
        if has_flag(name, DATA_DEPENDENT):
            raise Unsupported(f"Tensor.{name}() needs the tensor's values",
                              reason=reasons.data_method(name, obj.example))
        if name in ("size", "dim", "numel", "stride", "is_contiguous", "is_floating_point",
                    "element_size", "nelement", "ndimension"):
            if name in ("stride", "is_contiguous") and not _layout_known(obj.node) or \
                    name == "stride" and _size_one_strides_unknown(obj) or \
                    name in ("stride", "is_contiguous") and _empty_computed(obj):
                raise Unsupported(f"Tensor.{name}() of a tensor whose layout only running "
                                  "the ops gives (computed from non-contiguous tensors)")
            values = [tr.as_python(a) for a in args]
            # Keywords count: `is_contiguous(memory_format=torch.channels_last)`, `stride(dim=1)`.
            named = {k: tr.as_python(v) for k, v in kwargs.items()}
            return tr.from_python(getattr(obj.example, name)(*values, **named))
        return tr.builder.call("call_method", name, (obj, *args), kwargs)
    if isinstance(obj, DequeVariable):
        return _deque_method(tr, obj, name, args, kwargs)
    if isinstance(obj, ListVariable):
        if name in ("index", "count"):
            return _evaluate(tr, getattr(tr.as_python(obj), name), args, kwargs)
        return _list_method(tr, obj, name, args, kwargs)
    if isinstance(obj, OutsideOrderedDictVariable) and name in _ORDERED_DICT_EDITS:
        return edit_ordered_dict(tr, obj, name, args, kwargs)
    if isinstance(obj, OutsideOrderedDictVariable) and name == "setdefault":
        raise Unsupported("OrderedDict.setdefault on a dict from outside the graph")
    if isinstance(obj, DictVariable):
        if name in ("items", "keys", "values") and not args and not kwargs:
            from .variables import DictViewVariable

            return DictViewVariable(obj, name)
        if name == "get":
            key = tr.as_python(args[0])
            return obj.items.get(key, args[1] if len(args) > 1 else ConstantVariable(None))
        if name in ("__setitem__", "update", "setdefault", "pop") and obj.source is None:
            return _local_dict_method(tr, obj, name, args, kwargs)
        if name == "setdefault" and 1 <= len(args) <= 2 and not kwargs:
            return _outside_setdefault(tr, obj, args)
        raise Unsupported(f"dict.{name}")
    if isinstance(obj, TupleVariable):
        return _evaluate(tr, getattr(tr.as_python(obj), name), args, kwargs)
    if isinstance(obj, SetVariable) and name in ("add", "discard") and len(args) == 1 and \
            not kwargs:  # (a set made in the frame: `Module`'s table of buffer names)
        if name == "add":
            tr._set_add(obj, args[0])
            return ConstantVariable(None)
        key = tr.key(args[0])
        try:
            obj.items.pop(key, None)
        except TypeError as e:  # unhashable: the real call raises it
            raise Unsupported(f"set.discard: {e}") from None
        obj.history.append(("discard", key))
        return ConstantVariable(None)
    if isinstance(obj, ConstantVariable) and name in _MODULE_LISTINGS and not args and \
            not kwargs and _is_module(obj.value):
        # `for name, m in self.named_children()`: the listing is read now and guarded whole
        # (a submodule added or replaced later recompiles).
        items = list(getattr(obj.value, name)())
        src = tr.guard_root(obj)
        if src is None:
            raise Unsupported(f"{name}() of a module no guard reaches")
        from .variables import IteratorVariable

        if name in _TENSOR_LISTINGS:  # tensors: graph inputs read through their names
            getter = "get_buffer" if "buffers" in name else "get_parameter"
            names = [n for n, _ in getattr(obj.value, _TENSOR_LISTINGS[name])()]
            tr.builder.guards.add(f"[n for n, _ in {src}.{_TENSOR_LISTINGS[name]}()] == "
                                  f"{names!r}")
            tensors = [tr.builder.wrap(t, f"{src}.{getter}({n!r})")
                       for n, (_, t) in zip(names, getattr(obj.value, _TENSOR_LISTINGS[name])())]
            if name.startswith("named_"):
                return IteratorVariable([TupleVariable([ConstantVariable(n), t])
                                         for n, t in zip(names, tensors)])
            return IteratorVariable(tensors)
        tr.builder.guards.contents(f"list({src}.{name}())", items)
        return IteratorVariable([tr.from_python(i) for i in items])
    if isinstance(obj, ConstantVariable) and is_traced_step(obj.value, name) and \
            _config().trace_optimizer_step:
        return call_step(tr, obj, args, kwargs)  # an optimizer's update as graph ops
    if isinstance(obj, ConstantVariable):
        method = getattr(obj.value, name)
        if is_function_apply(method):  # `MyFunction.apply(x)`
            src = tr.guard_root(obj)
            return call_function_apply(tr, ConstantVariable(
                method, None if src is None else f"{src}.{name}"), args, kwargs)
        if isinstance(method, types.MethodType) and _is_user_function(method.__func__):
            src = tr.guard_root(obj)
            if src is not None:  # the class's method (or an instance attribute) may change
                tr.builder.guards.constant(f"{src}.{name}.__func__", method.__func__)
            return inline(tr, method.__func__, [obj] + args, kwargs)
        if _is_module(obj.value) and name == "forward" and isinstance(
                method, types.MethodType) and isinstance(method.__func__, types.FunctionType):
            src = tr.guard_root(obj)
            if src is not None:
                tr.builder.guards.constant(f"{src}.forward.__func__", method.__func__)
            return inline(tr, method.__func__, [obj] + args, kwargs)
        if isinstance(obj.value, (str, int, float, tuple, bytes, frozenset)):
            if name == "join":  # `", ".join(str(t.shape) for t in ...)`: run it now
                args = [TupleVariable(tr.generator_items(a)) if isinstance(
                    a, GeneratorVariable) else a for a in args]
            return _evaluate(tr, method, args, kwargs)
        raise Unsupported(f"method {type(obj.value).__name__}.{name}")
    raise Unsupported(f"method {name} of {type(obj).__name__}")


# The list methods done on a list variable: on one made in the graph (rebuilt after it), and
# those after which a list from outside is set again after the graph (`lst[:] = [...]`).
# (`append`/`extend` on a list from outside stay graph breaks: they run for real, once.)
_LIST_EDITS = frozenset({"append", "extend", "pop", "insert", "reverse", "sort", "remove",
                         "clear"})
_OUTSIDE_LIST_EDITS = frozenset({"pop", "insert", "reverse", "sort"})


def _list_method(tr: Translator, obj: ListVariable, name: str, args: list,
                 kwargs: dict) -> Variable:
    """A method that changes a list, done on its variable's items (in place: an iterator
    over the list shares them). A list from outside the graph (an argument, an attribute)
    is set to its new items after the graph, once; refused (a graph break) where another
    variable of the frame holds it, which would keep the old items."""
    real = None
    if isinstance(obj, OutsideListVariable) and not obj.materialized() and \
            name in ("append", "extend") and not kwargs and len(args) == 1:
        # added after the graph to the real list, whose items the graph need not read
        added = [args[0]] if name == "append" else tr.unpack(args[0])
        tr.builder.append_to_list(obj, list(added))
        return ConstantVariable(None)
    if obj.source is not None:
        if name not in _OUTSIDE_LIST_EDITS:
            raise Unsupported(f"list.{name} on a list from outside the graph")
        if isinstance(obj, OutsideListVariable):
            obj.items  # noqa: B018 (read and guarded now, the graph's appends after them)
        known = tr.builder.container_objects.get(id(obj))
        if known is None or known[0] is not obj or type(known[1]) is not list:
            raise Unsupported(f"list.{name} on a list no guard reaches")
        real = known[1]
        if holds_real(tr, real, obj):
            raise Unsupported(f"list.{name} on a list from outside the graph that another "
                              "variable of the frame holds")
    elif name not in _LIST_EDITS:
        raise Unsupported(f"list.{name}")
    result = _edit_list(tr, obj.items, name, args, kwargs)
    if real is not None:
        tr.builder.store_list(real, obj)
    return result


def _outside_container(tr: Translator, obj: Variable, kind: type, call: str):
    """The real container of `kind` that variable `obj` stands for, which `call` edits; a
    graph break where no guard reaches it, or where another variable of the frame or an
    iterator over it holds it (the real edit would then be seen, or raise, elsewhere)."""
    real = tr.builder.container_objects.get(id(obj), (None, None))[1]
    if type(real) is not kind:
        raise Unsupported(f"{call}: no guard reaches the {kind.__name__}")
    if obj.iterated or holds_real(tr, real, obj):
        raise Unsupported(f"{call}: an iterator or another variable of the frame holds the "
                          f"{kind.__name__}")
    return real


_ORDERED_DICT_EDITS = frozenset({"__setitem__", "move_to_end", "popitem", "pop", "clear"})


def edit_ordered_dict(tr: Translator, obj: OutsideOrderedDictVariable, name: str,
                      args: list, kwargs: dict) -> Variable:
    """An edit of an OrderedDict from outside the graph (`d[key] = v`, `move_to_end`,
    `popitem`, `pop`, `clear`) on its variable's items, as the real dict would make it, set
    on the real dict after the graph. Refused (a graph break, the call run for real) for a
    key that is not a constant, where another variable of the frame holds the dict, or where
    an iterator over it was made (the real edit raises); a missing key's KeyError is
    raised as the real call raises it."""
    real = _outside_container(tr, obj, collections.OrderedDict, f"OrderedDict.{name}")
    named = {k: tr.as_python(v) for k, v in kwargs.items() if k == "last"}
    if len(named) != len(kwargs) or any(type(v) is not bool for v in named.values()):
        raise Unsupported(f"OrderedDict.{name} with these keywords")
    items = obj.items
    if name in ("__setitem__", "move_to_end", "pop") and args:
        key = tr.as_python(args[0])
        if type(key) not in (str, int) or holds_symbol(key):
            raise Unsupported(f"OrderedDict.{name} of a key that is not a constant")
    if name == "__setitem__" and len(args) == 2 and not kwargs:
        items[key] = args[1]
        result = ConstantVariable(None)
    elif name == "move_to_end" and len(args) <= 2 and len(args) + len(named) <= 2 and args:
        last = named.get("last", tr.as_python(args[1]) if len(args) > 1 else True)
        if type(last) is not bool:
            raise Unsupported("OrderedDict.move_to_end with a `last` that is not a bool")
        if key not in items:
            raise Raised(ConstantVariable(KeyError(key)))
        value = items.pop(key)
        if last:
            items[key] = value
        else:
            obj.items = items = {key: value, **items}
        result = ConstantVariable(None)
    elif name == "popitem" and len(args) + len(named) <= 1:
        last = named.get("last", tr.as_python(args[0]) if args else True)
        if type(last) is not bool:
            raise Unsupported("OrderedDict.popitem with a `last` that is not a bool")
        if not items:
            raise Raised(ConstantVariable(KeyError("dictionary is empty")))
        key = next(reversed(items)) if last else next(iter(items))
        result = TupleVariable([ConstantVariable(key), items.pop(key)])
    elif name == "pop" and 1 <= len(args) <= 2 and not kwargs:
        if key not in items and len(args) == 1:
            raise Raised(ConstantVariable(KeyError(key)))
        result = items.pop(key) if key in items else args[1]
    elif name == "clear" and not args and not kwargs:
        items.clear()
        result = ConstantVariable(None)
    else:
        raise Unsupported(f"OrderedDict.{name} with these arguments")
    tr.builder.store_ordered_dict(real, obj)
    return result


_DEQUE_EDITS = frozenset({"append", "appendleft", "extend", "extendleft", "pop", "popleft",
                          "clear", "rotate"})


def _deque_method(tr: Translator, obj: DequeVariable, name: str, args: list,
                  kwargs: dict) -> Variable:
    """A method of a deque from outside the graph: `count`/`index` read its items; an edit
    changes its variable's items as the real deque would and is set on the real deque after
    the graph. Refused (a graph break, the call run for real) where another variable of the
    frame holds the deque, or an iterator over it was made (the real edit raises)."""
    if name in ("count", "index"):
        return _evaluate(tr, getattr(tr.as_python(obj), name), args, kwargs)
    if name not in _DEQUE_EDITS or kwargs:
        raise Unsupported(f"method deque.{name}")
    real = _outside_container(tr, obj, collections.deque, f"deque.{name}")
    items, limit = obj.items, obj.maxlen
    if name in ("append", "appendleft", "extend", "extendleft") and len(args) == 1:
        added = tr.unpack(args[0]) if name.startswith("extend") else [args[0]]
        for v in added:
            if name.endswith("left"):
                items.insert(0, v)
                del items[len(items) if limit is None else limit:]
            else:
                items.append(v)
                del items[:0 if limit is None else max(len(items) - limit, 0)]
        result = ConstantVariable(None)
    elif name in ("pop", "popleft") and not args:
        if not items:
            raise Unsupported("pop from an empty deque (the real call raises)")
        result = items.pop(-1 if name == "pop" else 0)
    elif name == "clear" and not args:
        items.clear()
        result = ConstantVariable(None)
    elif name == "rotate" and len(args) <= 1:
        steps = tr.as_python(args[0]) if args else 1
        if type(steps) is not int:
            raise Unsupported("deque.rotate by a value that is not an int")
        if items:
            k = steps % len(items)
            items[:] = items[len(items) - k:] + items[:len(items) - k]
        result = ConstantVariable(None)
    else:
        raise Unsupported(f"method deque.{name} with these arguments")
    tr.builder.store_deque(real, obj)
    return result


def _list_index(tr: Translator, v: Variable) -> int:
    """A list method's index argument as the int the real method would take."""
    value = tr.as_python(v)
    if holds_symbol(value) or not isinstance(value, int):
        raise Unsupported("a list index that is not a constant int")
    return operator.index(value)


def _edit_list(tr: Translator, items: list, name: str, args: list, kwargs: dict) -> Variable:
    """`items.<name>(*args, **kwargs)` on variables, as the real list method does it; what
    the real method raises (`pop` from an empty list) is the program's exception."""
    from .exceptions import Raised

    if kwargs and name != "sort":
        raise Unsupported(f"list.{name} with keyword arguments")
    expected = {"append": 1, "extend": 1, "insert": 2, "remove": 1, "sort": 0, "reverse": 0,
                "clear": 0}.get(name)
    if expected is not None and len(args) != expected or name == "pop" and len(args) > 1:
        raise Unsupported(f"list.{name} with {len(args)} arguments")
    if name == "append":
        items.append(args[0])
    elif name == "extend":
        items.extend(tr.unpack(args[0]))
    elif name == "pop":
        index = _list_index(tr, args[0]) if args else -1
        try:
            return items.pop(index)
        except IndexError as e:  # "pop from empty list", as the real list raises it
            raise Raised(ConstantVariable(e)) from None
    elif name == "insert":
        items.insert(_list_index(tr, args[0]), args[1])
    elif name == "reverse":
        items.reverse()
    elif name == "clear":
        items.clear()
    elif name == "remove":
        value = tr.as_python(args[0])
        if not _is_plain_data(value) or holds_symbol(value) or value != value:
            raise Unsupported("list.remove of a value that is not plain data")
        keys = _sort_keys(tr, items, "remove")
        if value not in keys:
            raise Raised(ConstantVariable(ValueError("list.remove(x): x not in list")))
        del items[keys.index(value)]
    else:
        _sort(tr, items, kwargs)
    return ConstantVariable(None)


def _sort_keys(tr: Translator, items: list, name: str) -> list:
    """The Python values of a list's items that `sort`/`remove` compare: plain data only
    (an item's own `__lt__`/`__eq__` or a tensor's values are not known while translating)."""
    values = []
    for item in items:
        if not isinstance(item, ConstantVariable) or not _is_plain_data(item.value) or \
                holds_symbol(item.value):
            raise Unsupported(f"list.{name} of items that are not plain data")
        values.append(item.value)
    return values


def _sort(tr: Translator, items: list, kwargs: dict) -> None:
    """`list.sort(key=None, reverse=...)` of plain data: the item variables reordered as the
    real (stable) sort orders their values."""
    key = kwargs.get("key")
    if key is not None and not (isinstance(key, ConstantVariable) and key.value is None):
        raise Unsupported("list.sort with a key function")
    if set(kwargs) - {"key", "reverse"}:
        raise Unsupported("list.sort with these keywords")
    descending = tr.as_python(kwargs["reverse"]) if "reverse" in kwargs else False
    if holds_symbol(descending):
        raise Unsupported("list.sort(reverse=) of a symbolic value")
    values = _sort_keys(tr, items, "sort")
    try:
        order = sorted(range(len(items)), key=values.__getitem__, reverse=descending)
    except TypeError:  # (the real sort may leave the list part-sorted: let it do that)
        raise Unsupported("list.sort of items that do not compare") from None
    items[:] = [items[i] for i in order]


def _local_dict_method(tr: Translator, obj: DictVariable, name: str, args: list,
                       kwargs: dict) -> Variable:
    """`d[k] = v`, `d.update(...)`, `d.setdefault(k, v)` and `d.pop(k[, default])` on a dict
    made in the frame (rebuilt after the graph with its items): done on the variable."""
    items = obj.items
    if name == "__setitem__":
        items[tr.as_python(args[0])] = args[1]
        return ConstantVariable(None)
    if name == "update":
        if len(args) > 1:
            raise Unsupported("dict.update with more than one positional argument")
        if args:
            other = args[0]
            if isinstance(other, DictVariable):
                pairs = list(other.items.items())
            elif isinstance(other, (TupleVariable, ListVariable)) and all(
                    isinstance(p, TupleVariable) and len(p.items) == 2 for p in other.items):
                pairs = [(tr.as_python(p.items[0]), p.items[1]) for p in other.items]
            else:
                raise Unsupported(f"dict.update({type(other).__name__})")
            for key, value in pairs:
                items[key] = value
        for key, value in kwargs.items():
            items[key] = value
        return ConstantVariable(None)
    if kwargs or not 1 <= len(args) <= 2:
        raise Unsupported(f"dict.{name} with these arguments")
    key = tr.as_python(args[0])
    default = args[1] if len(args) > 1 else None
    if name == "setdefault":
        if key not in items:
            items[key] = default if default is not None else ConstantVariable(None)
        return items[key]
    if key in items:  # pop
        return items.pop(key)
    if default is None:
        raise Unsupported("dict.pop of a missing key (a KeyError)")
    return default


def _nested_proto(tr: Translator, fn: NestedFunctionVariable):
    """A stand-in function for a function made during translation (its signature; the
    defaults it holds are placeholders, see `_default_variables`)."""
    positional, keyword = _default_variables(fn)
    proto = types.FunctionType(fn.code, fn.f_globals, fn.code.co_name,
                               tuple(None for _ in positional) or None,
                               tuple(types.CellType(None) for _ in fn.closure) or None)
    if keyword:
        proto.__kwdefaults__ = dict.fromkeys(keyword)
    tr.builder.fresh_functions.append(proto)
    return proto


def _default_variables(fn: NestedFunctionVariable) -> tuple[list, dict]:
    """The variables a function made during translation holds as its defaults: one object
    for all its calls (a `seen=[]` default that calls append to is the same list each
    time, as in Python), which may be tensors of the graph."""
    positional: list = []
    if isinstance(fn.defaults, TupleVariable):
        positional = list(fn.defaults.items)
    elif isinstance(fn.defaults, ConstantVariable) and isinstance(fn.defaults.value, tuple):
        positional = [ConstantVariable(v) for v in fn.defaults.value]
    elif fn.defaults is not None:
        raise Unsupported("defaults of a function made in the graph")
    keyword: dict = {}
    if isinstance(fn.kwdefaults, DictVariable):
        keyword = dict(fn.kwdefaults.items)
    elif isinstance(fn.kwdefaults, ConstantVariable) and isinstance(fn.kwdefaults.value, dict):
        keyword = {k: ConstantVariable(v) for k, v in fn.kwdefaults.value.items()}
    elif fn.kwdefaults is not None:
        raise Unsupported("keyword defaults of a function made in the graph")
    return positional, keyword


# Module methods listing submodules or tensors (generators): evaluated while translating.
_TENSOR_LISTINGS = {"parameters": "named_parameters", "named_parameters": "named_parameters",
                    "buffers": "named_buffers", "named_buffers": "named_buffers"}
_MODULE_LISTINGS = {"children", "named_children", "modules", "named_modules"} | set(
    _TENSOR_LISTINGS)


def _followed_listing(tr, obj: ObjectVariable, name: str) -> Variable:
    """`name()` (one of `_MODULE_LISTINGS`) of a module from outside followed by its type and
    attributes (`objects.follow_outside`): the names listed are guarded, and each submodule
    or tensor is read through its path from the module (`L['self']._modules['a']`,
    `get_parameter('a.weight')`), so that the graph serves every module of that layout."""
    from .variables import IteratorVariable

    real = next(r for v, r in tr.builder.followed if v is obj)
    src, builder = obj.source, tr.builder
    named = _TENSOR_LISTINGS.get(name) or {"children": "named_children",
                                           "modules": "named_modules"}.get(name, name)
    listed = list(getattr(real, named)())
    names = [n for n, _ in listed]
    builder.guards.add(f"[n for n, _ in {src}.{named}()] == {names!r}")
    if name in _TENSOR_LISTINGS:
        getter = "get_buffer" if "buffers" in name else "get_parameter"
        values = [builder.wrap(t, f"{src}.{getter}({n!r})") for n, t in listed]
    else:  # (a dotted name is a path of children; "" is the module itself)
        values = [builder.wrap(m, src + "".join(f"._modules[{p!r}]"
                                                for p in (n.split(".") if n else ())))
                  for n, m in listed]
    if name.startswith("named_"):
        return IteratorVariable([TupleVariable([ConstantVariable(n), v])
                                 for n, v in zip(names, values)])
    return IteratorVariable(values)


def inline_nested(tr: Translator, fn: NestedFunctionVariable, args, kwargs) -> Variable:
    """Inline a function made during translation (its closure holds cell variables)."""
    return inline(tr, _nested_proto(tr, fn), args, kwargs, closure=tuple(fn.closure),
                  defaults=_default_variables(fn))


def inline(tr: Translator, func, args: list, kwargs: dict, closure=None,
           defaults: tuple | None = None) -> Variable:
    """Translate `func(*args, **kwargs)` in a child frame that records into the same graph
    (`defaults`: (positional, keyword) variables standing for func's defaults)."""
    if closure is None and getattr(func, "__code__", None) is _CONTEXTMANAGER_CODE:
        return _generator_context(func, args, kwargs)
    if _is_generator_function(func.__code__) and \
            not _in_package(func.__code__.co_filename):  # (a user's: `self._blocks()`)
        _bind_generator(func, args, kwargs)
        return GeneratorVariable(func, args, closure, kwargs, defaults)
    child = start_inline(tr, func, args, kwargs, closure, defaults=defaults)
    try:
        child.run()
    except Return as r:
        return r.value
    raise AssertionError("unreachable")


@contextlib.contextmanager
def _one_yield():
    yield


def _is_generator_function(code: types.CodeType) -> bool:
    """A plain generator function's code (not a generator expression's, a coroutine's or an
    async generator's)."""
    return bool(code.co_flags & _GENERATOR_FLAGS) and code.co_name != "<genexpr>" and \
        not code.co_flags & (inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR |
                             inspect.CO_ITERABLE_COROUTINE)


def _bind_generator(func, args: list, kwargs: dict) -> None:
    """Check a generator function's call binds its arguments (Python binds them at the
    call, before any of its code runs): a call that does not is a break, where the real call
    raises its TypeError."""
    try:
        inspect.signature(func, follow_wrapped=False).bind(*args, **kwargs)
    except TypeError as e:
        raise Unsupported(f"calling {func.__qualname__}: {e}") from None


# The code of what `@contextlib.contextmanager` makes of a function (one for all of them).
_CONTEXTMANAGER_CODE = _one_yield.__code__
_GENERATOR_FLAGS = inspect.CO_GENERATOR


def _generator_context(helper, args: list, kwargs: dict) -> Variable:
    """`cm(*args, **kwargs)` of a `@contextlib.contextmanager` function: a variable whose
    generator a `with` block runs in the graph (`enter_generator_context`), as Dynamo traces
    such a context manager, not the `_GeneratorContextManager` Python object."""
    func = helper.__closure__[0].cell_contents if helper.__closure__ else None
    if not isinstance(func, types.FunctionType) or \
            not func.__code__.co_flags & _GENERATOR_FLAGS or \
            func.__code__.co_flags & (inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
        raise Unsupported("a contextmanager of something other than a generator function")
    return GeneratorContextVariable(helper, func, list(args), dict(kwargs))


def _run_to_yield(frame: Translator) -> Variable | None:
    """Step the generator code of `frame` to its next `yield` (its value), or to its end
    (None)."""
    from .translator import Return

    while not frame.yields:
        try:
            frame.step()
        except Return:
            return None
    return frame.yields.pop()


def enter_generator_context(tr: Translator, cm: GeneratorContextVariable) -> Variable:
    """A `with` block's entry into generator context manager `cm`: its generator run to its
    `yield`, whose value the block's `as` target gets. An exception it raises leaves the
    entry, as the real `__enter__`'s does."""
    if cm.frame is not None:
        raise Unsupported("a generator context manager entered twice")
    cm.frame = start_inline(tr, cm.func, list(cm.args), dict(cm.kwargs), yields=[])
    try:
        value = _run_to_yield(cm.frame)
        if value is None:  # (eager raises RuntimeError: the real entry does)
            raise Unsupported("a generator context manager that did not yield")
    except Unsupported:
        cm.frame = None  # (a break here: the object is made and entered for real)
        raise
    return value


def _exit_generator_context(tr: Translator, fn: GeneratorExitVariable, args: list,
                            kwargs: dict) -> Variable:
    """The normal exit of a generator context manager's block: the generator resumed after
    its `yield` (which gives None) and run to its end. An exception thrown into it, or a
    second `yield` (eager's RuntimeError), is a break."""
    if kwargs or len(args) != 3 or not all(
            isinstance(a, ConstantVariable) and a.value is None for a in args):
        raise Unsupported("an exception leaving a with block over a generator context "
                          "manager")
    frame = fn.cm.frame
    if frame is None or _run_to_yield(frame) is not None:
        raise Unsupported("a generator context manager that did not stop")
    return ConstantVariable(False)


def start_inline(tr: Translator, func, args: list, kwargs: dict, closure=None,
                 yields: list | None = None, defaults: tuple | None = None) -> Translator:
    """The child translator that runs `func(*args, **kwargs)` into the same graph, made
    ready to step (`yields`: a generator expression's code, whose yielded values are
    collected there)."""
    if tr.depth >= MAX_INLINE_DEPTH:
        raise Unsupported("inlining too deep (recursion?)")
    code = func.__code__
    bad = unsupported_opcodes(code, generator=yields is not None)
    if bad:
        raise Unsupported(f"{func.__qualname__} uses {', '.join(sorted(bad))}")
    try:
        bound = inspect.signature(func, follow_wrapped=False).bind(*args, **kwargs)
    except TypeError as e:
        raise Unsupported(f"calling {func.__qualname__}: {e}") from None
    local_vars = {}
    params = inspect.signature(func, follow_wrapped=False).parameters
    # Guards read the function's cells and defaults through the function (both can change).
    fn_ref = tr.builder.function_ref(func)
    n_positional = code.co_argcount - len(func.__defaults__ or ())
    for name, p in params.items():
        if name == "implicit0" and code.co_varnames[:1] == (".0",):
            name = ".0"  # a comprehension's iterator argument (inspect renames it)
        key = "implicit0" if name == ".0" else name
        if key in bound.arguments:
            value = bound.arguments[key]
            if p.kind is p.VAR_POSITIONAL:
                value = TupleVariable(list(value))
            elif p.kind is p.VAR_KEYWORD:
                value = DictVariable(dict(value))
            local_vars[name] = value
        elif p.kind is p.VAR_POSITIONAL:
            local_vars[name] = TupleVariable([])
        elif p.kind is p.VAR_KEYWORD:
            local_vars[name] = DictVariable({})
        elif defaults is not None and p.kind is p.KEYWORD_ONLY:
            local_vars[name] = defaults[1][name]
        elif defaults is not None:
            local_vars[name] = defaults[0][code.co_varnames.index(name) - n_positional]
        elif fn_ref is None:
            local_vars[name] = ConstantVariable(p.default)
        elif p.kind is p.KEYWORD_ONLY:
            local_vars[name] = tr.wrap(p.default, f"{fn_ref}.__kwdefaults__[{name!r}]")
        else:
            k = code.co_varnames.index(name) - n_positional
            local_vars[name] = tr.wrap(p.default, f"{fn_ref}.__defaults__[{k}]")
    child = Translator(code, func.__globals__, closure or func.__closure__, tr.builder,
                       local_vars, [], parent=tr,
                       closure_ref=None if fn_ref is None else f"{fn_ref}.__closure__")
    child.yields = yields
    return child


def _is_scope_reader(f) -> bool:
    """`locals`, `vars`, `dir` or `globals` (builtins that read the calling frame when called
    without arguments)."""
    return f is locals or f is vars or f is dir or f is globals


def _read_scope(tr, f) -> Variable:
    """`locals()`, `vars()`, `dir()` or `globals()` of the translated frame (called for real
    they would read the translator's own). While capturing: a graph break; at the break the
    frame's real values answer."""
    if not tr.concrete:
        raise Unsupported(f"{f.__name__}() reads the frame")
    if f is globals:
        return ConstantVariable(tr.f_globals)
    code = tr.code
    names = list(code.co_varnames)
    names += [n for n in code.co_cellvars if n not in names] + list(code.co_freevars)
    scope = {}
    for name in names:
        if name in code.co_freevars and name not in tr.locals:
            k = code.co_freevars.index(name)
            held = tr.closure[k] if k < len(tr.closure) else None
        else:
            held = tr.locals.get(name)
            held = held.value if isinstance(held, ConstantVariable) else held
        if isinstance(held, Variable):  # no real value (not a frame's variable): left out
            continue
        if isinstance(held, types.CellType) and (name in code.co_cellvars or
                                                 name in code.co_freevars):
            try:
                held = held.cell_contents
            except ValueError:  # an empty cell: unbound, as the frame shows it
                continue
        elif held is None and name not in tr.locals:
            continue  # unbound
        scope[name] = held
    if f is dir:
        return ConstantVariable(sorted(scope))
    return ConstantVariable(scope)


def _call_concrete(tr, fn, args, kwargs) -> Variable:
    values = [a.value for a in args]
    kw = {k: v.value for k, v in kwargs.items()}
    if isinstance(fn, MethodVariable):
        f = getattr(fn.obj.value, fn.name)
    else:
        f = fn.value
    if f is super and not values:  # zero-argument super() reads this frame
        return tr.make_super([])
    if f is warnings.warn and tr.current is not None:
        _warn_from_frame(tr, values, kw)
        return ConstantVariable(None)
    if tr.callee_wrapper is not None:
        f, values = _captured_callee(tr.callee_wrapper, f, values)
    if tr.current is None:
        return ConstantVariable(f(*values, **kw))
    made = _at_program_line(tr)(f, values, kw)
    if isinstance(f, type):
        note_made_layer(made)  # (`nn.Linear(4, 4)`: made for real at its break)
    return ConstantVariable(made)


# The template of `_at_program_line`'s functions: its one statement on the line after `def`
# (no docstring, which would move it).
def ___call_at_program_line(f, args, kwargs):
    return f(*args, **kwargs)


# (code object, offset) -> a copy of `___call_at_program_line` whose frame reads as the
# program's own at that instruction (see `_at_program_line`).
_AT_LINE: dict = {}


def _at_program_line(tr):
    """The function through which the instruction `tr` runs makes its real call: its frame
    has the program's file, line and globals, as the frame eager calls from. Code looking
    at its caller then finds that line: a warning of fusegrad's ops (a resized `out`)
    names the first frame outside fusegrad, which was the compiler's generated code, and
    `warnings.warn(stacklevel=2)` in a user function run for real names the line too."""
    key = (tr.code, tr.current.offset)
    made = _AT_LINE.get(key)
    if made is not None and made.__globals__ is tr.f_globals:
        return made
    from .segments import _line_of

    line = _line_of(tr.code, tr.current.offset) or tr.code.co_firstlineno
    template = ___call_at_program_line.__code__
    # (its one statement is on the line after `def`)
    code = template.replace(co_filename=tr.code.co_filename, co_firstlineno=line - 1)
    made = types.FunctionType(code, tr.f_globals, template.co_name)
    if len(_AT_LINE) > 4096:  # (bounded: code objects of programs long gone)
        _AT_LINE.clear()
    _AT_LINE[key] = made
    return made


def _warn_from_frame(tr, values: list, kw: dict) -> None:
    """`warnings.warn(...)` made for real at a graph break (or in a library frame run
    uncaptured), reported where eager reports it: `stacklevel` counts the frames eager has,
    the ones being translated (this one and its callers run by the translator) and real
    ones, never the translator's own, which stand in for them here; the location's module
    and registry are its frame's, so "once per location" filters match eager's."""
    try:
        bound = _WARN_SIGNATURE.bind(*values, **kw)
    except TypeError:
        warnings.warn(*values, **kw)  # raises the same TypeError
        return
    args = bound.arguments
    message, category = args["message"], args.get("category")
    level = args.get("stacklevel", 1)
    if args.get("skip_file_prefixes") or not isinstance(level, int) or (
            category is not None and not (isinstance(category, type) and
                                          issubclass(category, Warning))):
        warnings.warn(*values, **kw)  # (raises as eager's does, or rarely used: as called)
        return
    if isinstance(message, Warning):
        category = type(message)
    frame = None
    for k, found in enumerate(_program_frames(tr)):
        if k == max(level, 1) - 1:
            frame = found
            break
    if frame is None:  # past the outermost frame: Python's own answer (`sys`, its
        # version's file name and line)
        warnings.warn(message, category, stacklevel=sys.getrecursionlimit() + 10**6,
                      source=args.get("source"))
        return
    filename, lineno, g = frame
    registry = g.setdefault("__warningregistry__", {})
    warnings.warn_explicit(message, category or UserWarning, filename, lineno,
                           g.get("__name__", "<string>"), registry, g,
                           source=args.get("source"))


# The folder of the compiler's own modules: their frames are the translator's, never the
# program's.
_COMPILER_DIR = __file__.rsplit("/", 2)[0] + "/"


def _program_frames(tr):
    """The program's frames as eager has them, innermost first, each as (file name, line,
    globals): `tr`'s, then, up the real stack, each frame the translator runs
    (`FrameRunner._continue_concrete`'s) in place of its real one and each real frame
    outside the compiler; importlib's bootstrap frames are skipped as Python skips them."""
    from .segments import FrameRunner, _line_of

    runners = (FrameRunner._continue_concrete.__code__, FrameRunner._step.__code__)
    seen = {id(tr)}
    called_from = None  # the last frame a real call was made from (`_at_program_line`)
    yield _translated_frame(tr, _line_of)
    real = sys._getframe(1)
    while real is not None:
        code = real.f_code
        name = code.co_filename
        if code in runners:
            held = real.f_locals.get("tr")
            if held is not None and id(held) not in seen:
                seen.add(id(held))
                found = _translated_frame(held, _line_of)
                if found != called_from:  # (that frame, yielded where it made its call)
                    yield found
        elif code.co_name == "___call_at_program_line":
            called_from = (code.co_filename, real.f_lineno, real.f_globals)
            yield called_from
        elif not name.startswith((_COMPILER_DIR, "<fusegrad segment ")) and \
                not ("importlib" in name and "_bootstrap" in name):
            yield code.co_filename, real.f_lineno, real.f_globals
        real = real.f_back


def _translated_frame(tr, line_of) -> tuple:
    """(file name, current line, globals) of a frame the translator runs."""
    line = line_of(tr.code, tr.current.offset) if tr.current is not None else None
    return tr.code.co_filename, line or tr.code.co_firstlineno, tr.f_globals


_WARN_SIGNATURE = inspect.signature(
    lambda message, category=None, stacklevel=1, source=None, *, skip_file_prefixes=(): 0)


def _captured_callee(wrap, f, values: list) -> tuple:
    """What a call made for real runs, as Dynamo's frame hook would: a user function, a bound
    method's function or a module's `forward` through `wrap` (captured on its own frame, its
    breaks reported); anything else as it is. A module with hooks runs its `__call__` (the
    hooks, then an uncaptured forward), as `compile(module)` does; one without runs
    fusegrad's `Module.__call__` uncaptured around its captured forward (eager's frames)."""
    shallow = _shallow_disabled(getattr(f, "__func__", f))
    if shallow is not None:
        # `disable(fn, recursive=False)`: its frame runs uncaptured, what it calls is
        # captured (its bytecode run for real, the calls it makes through `wrap`).
        if isinstance(f, types.MethodType):
            values = [f.__self__] + values
        return functools.partial(run_library_frame, shallow, wrap), values
    if getattr(f, "_fusegrad_disabled", False) or \
            getattr(getattr(f, "__func__", f), "__module__", None) in _UNCAPTURED_MODULES:
        return f, values
    if getattr(f, "__code__", None) is _wrapper_code():
        # The grad-mode decorators' wrapper: its frame runs uncaptured, and the function it
        # wraps is captured on its own frame, as Dynamo skips the library's wrapper. (A
        # decorated method: its wrapper bound to the instance, which leads the arguments.)
        if isinstance(f, types.MethodType):
            f, values = f.__func__, [f.__self__] + values
        return functools.partial(run_library_frame, f, wrap), values
    if _is_user_function(f):
        return _callee(wrap, f), values
    if isinstance(f, types.MethodType) and _is_user_function(f.__func__) and \
            not getattr(f.__func__, "_fusegrad_disabled", False):
        return _callee(wrap, f.__func__), [f.__self__] + values
    if _is_module(f) and not any(getattr(f, t, None) for t in _HOOK_TABLES) and \
            not hasattr(f, "_compiled_forward") and not _global_hooks_registered():
        # (an OptimizedModule is compiled already; global hooks run through `__call__`)
        call = type(f).__call__
        if isinstance(call, types.FunctionType) and \
                (getattr(call, "__module__", None) or "").startswith("fusegrad."):
            # fusegrad's `Module.__call__` runs uncaptured (see `_callee`), as eager's frame
            # between the caller and `forward`: a warning's stacklevel counts it.
            return _callee(wrap, call), [f] + values
        return _captured_callee(wrap, f.forward, values)  # bound, or an instance's own
    return f, values


def _shallow_disabled(f):
    """The Python function `compiler.disable(fn, recursive=False)` wrapper `f` stands for
    (None for anything else, or a function without bytecode to run)."""
    if not getattr(f, "_fusegrad_disabled", False) or \
            getattr(f, "_fusegrad_disabled_recursive", True):
        return None
    inner = getattr(f, "__wrapped__", None)
    if not isinstance(inner, types.FunctionType) or unsupported_opcodes(inner.__code__):
        return None  # (its bytecode cannot be run instruction by instruction: natively)
    return inner


# Standard library modules whose functions run as they are when called for real (a deep
# copy, `dataclasses.asdict` over tensors, a context manager's `__exit__` after its block
# ran eagerly), their frames not captured, as Dynamo skips the frames of these files.
_UNCAPTURED_MODULES = frozenset({"copy", "dataclasses", "inspect", "contextlib"})


def _callee(wrap, f):
    """What runs a function called for real: a user's captured on its own frame (`wrap`);
    one of fusegrad's own layers or distributions (`fusegrad.nn.modules`, which capture
    inlines like a user's) uncaptured, as Dynamo never compiles a frame of torch's own code
    (its graph breaks, a warning in a loop over layers, would each split it), but with the
    user functions it calls captured (a user's block inside an `nn.Sequential`). A wrapper
    of fusegrad's around a user function (`@no_grad()`'s, which takes the user function's
    `__module__`) is fusegrad's code, known by its file: its frame is not captured either
    (Dynamo would report each break inside the user function twice)."""
    if (getattr(f, "__module__", None) or "").startswith("fusegrad.") or \
            _in_package(getattr(getattr(f, "__code__", None), "co_filename", "")):
        return functools.partial(run_library_frame, f, wrap)
    return wrap(f)


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _in_package(filename: str) -> bool:
    """Whether `filename` is a file of fusegrad's own package."""
    return filename.startswith(_PACKAGE_DIR + os.sep)


# Code flags of frames that do not run to a return in one go.
_SUSPENDING = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def run_library_frame(f, wrap, *args, **kwargs):
    """Call `f` (see `_callee`): its bytecode runs for real, instruction by instruction, and
    the functions it calls go through `_captured_callee` in turn."""
    if f.__code__.co_flags & _SUSPENDING:
        return f(*args, **kwargs)
    try:
        bound = inspect.signature(f, follow_wrapped=False).bind(*args, **kwargs)
    except TypeError:  # the call itself raises Python's TypeError
        return f(*args, **kwargs)
    bound.apply_defaults()
    from .segments import FrameRunner

    # A comprehension's argument `.0` is `implicit0` to inspect.
    names = {f"implicit{k[1:]}": k for k in f.__code__.co_varnames if k.startswith(".")}
    tr = Translator(f.__code__, f.__globals__, f.__closure__, None,
                    {names.get(k, k): ConstantVariable(v) for k, v in bound.arguments.items()},
                    [], start=0, concrete=True, callee_wrapper=wrap)
    return FrameRunner._continue_concrete(tr)


def captures_item(builder, t, name: str) -> bool:
    """Whether `t.item()` becomes a graph node (an `UnbackedFloat`) rather than a break:
    under fullgraph=True, of a floating tensor of one element, as PyTorch captures it there
    (integer results, which PyTorch makes unbacked integers, still break)."""
    if name != "item" or not builder.fullgraph or not isinstance(t, TensorVariable):
        return False
    ex = t.example
    return ex.dtype.is_floating_point and all(n == 1 for n in ex.shape) and \
        not any(isinstance(n, SymInt) for n in ex.shape)
