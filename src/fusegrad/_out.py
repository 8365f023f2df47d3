"""PyTorch's `out=` argument on the public functions.

`guard_namespace` wraps, once, each public function of a namespace that has an `out`
parameter (`fusegrad`, `fusegrad.special`, `fusegrad.linalg`). A call with `out=None` runs the
function itself, through one generated frame; a call with an `out` tensor (or, for functions
returning several tensors, a tuple or list of them) runs the function *without* `out` and
then writes its result into `out` as PyTorch does (`write_out`):

- autograd: PyTorch's out= kernels are not differentiable, so while grad mode is on a result
  that requires grad, or an `out` that does, raises `<op>(): functions with out=...
  arguments don't support automatic differentiation, ...` (`<op>` is the ATen op PyTorch
  reports); PyTorch's composites written over another op's result (`tensordot`, `quantile`,
  `linalg.norm`) copy into `out` through autograd instead, so `out` gets `CopyBackwards`;
- dtype: each function's rule: by default the result's dtype must cast to out's by
  PyTorch's `can_cast` (no float to integer, no complex to real, nothing but bool to bool),
  for others it must equal it, with the function's own message; the factories and the
  sum-like reductions compute in out's dtype;
- shape: an `out` of another shape is resized (made contiguous), with PyTorch's deprecation
  warning when it had elements; one of the right shape keeps its strides;
- the values are copied into `out` in place (its version counter moves, its views see them,
  and `out` may be one of the inputs, since the result was computed first); the call
  returns `out` itself, or the `<name>_out` named tuple of the out tensors.

This module is the mechanism; what differs from function to function (dtype rules and
messages, the op the autograd error names, who resizes silently, ...) is a table beside the
registry, `ops/out_facts.py`, keyed by public name ("add", "special.sigmoid", "linalg.inv").
Functions PyTorch gives no `out` raise its TypeError; `bernoulli` and `multinomial` draw into
`out` themselves and are left alone.
"""

from __future__ import annotations

import inspect
import sys
import types

import numpy as np
from numpy.lib.array_utils import byte_bounds as _byte_bounds

from . import _autocast, _dtype, _tensor, _type_names, return_types
from ._dispatch import call, tracing_mode
from ._metadata import copy_metadata
from ._tensor import Tensor
from ._thread_state import local as _local
from ._warn import warn_at_caller
from .autograd.grad_mode import no_grad
from .autograd.graph import node_class
from .ops import out_facts as facts
from .ops.arithmetic import not_implemented_derivative
from .ops.inplace import copy_ as _copy_op
from .ops.spellings import ALIASES

# ---------------------------------------------------------------------------- the write

_FORWARD_AD = __name__.rpartition(".")[0] + ".autograd.forward_ad"


def _forward_ad():
    """`autograd.forward_ad` once something loaded it (a level can be open only then)."""
    return sys.modules.get(_FORWARD_AD)


class OutPlan:
    """What the `out=` path of one public function needs: the function and its public name,
    the key of the tables ("add", "linalg.inv"; an alias by the name it spells: `clip` is
    `clamp`)."""

    __slots__ = ("fn", "name")

    def __init__(self, fn, name: str):
        self.fn = fn
        self.name = ALIASES.get(name, name)


_ERRORS = {"TypeError": TypeError, "NotImplementedError": NotImplementedError}


def _dtype_names(d) -> dict:
    # (its `Expected out tensor to have dtype` message names uint16 as the C type does)
    return {"S": d.legacy, "C": "uint16_t" if d is _dtype.uint16 else d.cpp,
            "T": d.tensor_type_name}


def _check_dtype(rule, name: str, result: Tensor, out: Tensor, args: tuple = (),
                 kwargs: dict | None = None, first: tuple | None = None) -> None:
    """Raise the function's error when `out`'s dtype breaks `rule` for `result` (a message
    may name the dtype of the first tensor argument, `{I}`). `first`: the (result, out) of
    the function's first output, which "exact_direct" reads."""
    tests = rule if rule.__class__ is tuple and rule[0].__class__ is tuple else (rule,)
    have, want = out.dtype, result.dtype
    for kind, message in tests:
        if kind == "cast":
            ok = _dtype.can_cast(want, have)
        elif kind == "exact":
            ok = have is want
        elif kind == "exact_direct":  # (checked where `out` is resized to be written
            # directly, as the first output's is when it has the result's dtype; else the
            # result is copied from a temporary, cast)
            ok = have is want or result.numel() == 0 or \
                tuple(out.shape) == tuple(result.shape) or (
                    first is not None and first[1].dtype is not first[0].dtype)
        elif kind == "bool":
            ok = have is _dtype.bool_
        elif kind == "floating":
            ok = have.is_floating_point or have.is_complex
        else:  # "any"
            ok = True
        if ok:
            continue
        o, r = _dtype_names(have), _dtype_names(want)
        given = (*args, *(kwargs or {}).values())
        first = next((a for a in given if isinstance(a, Tensor)), None)
        text = message.format(O=o["S"], R=r["S"], o=o["C"], r=r["C"], tO=o["T"], tR=r["T"],
                              I=first.dtype.legacy if first is not None else "",
                              name=name.rpartition(".")[2],
                              int32=want is _dtype.int32)
        kind_of_error, _, rest = text.partition(":")
        if kind_of_error in _ERRORS:
            raise _ERRORS[kind_of_error](rest)
        raise RuntimeError(text)


_FAKE_MODULE = __name__.rpartition(".")[0] + "._fake"


def _column_major_strides(shape: tuple) -> tuple:
    """The strides of a tensor of `shape` whose matrices (two last dimensions) are stored
    column by column, the batch dimensions outermost (LAPACK's layout)."""
    swapped = (*shape[:-2], shape[-1], shape[-2])
    strides, step = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        strides[i] = step
        step *= max(swapped[i], 1)
    strides[-1], strides[-2] = strides[-2], strides[-1]
    return tuple(strides)


def _resize(out: Tensor, shape: tuple, warn: str | None, column_major: bool = False) -> None:
    """Give `out` the result's shape, contiguous, as PyTorch's `resize_output`: silently when
    it is empty, otherwise with the warning `warn` (None: none). A shrinking contiguous `out`
    keeps its storage (its views still share it), as `resize_` does. `column_major` (for a
    result of two dimensions or more) stores each matrix column by column instead, as
    PyTorch's LAPACK-backed kernels resize their outputs."""
    if warn is not None and out.numel() != 0:
        numel = 1
        for s in shape:
            numel *= s
        warn_at_caller(warn.format(old=list(out.shape), new=list(shape), new_tuple=shape,
                                   old_numel=out.numel(), numel=numel))
    column_major = column_major and len(shape) >= 2
    fake = sys.modules.get(_FAKE_MODULE)  # (loaded by the first fake or meta tensor made)
    if fake is not None and isinstance(out, fake.FakeTensor):
        strides = _column_major_strides(shape) if column_major else None
        out._take_geometry(fake.FakeTensor._make_fake(shape, out.dtype, strides))
        return
    if tracing_mode():
        # A mode recording ops (a trace) would miss the resize, which no op performs: its
        # graph would write the result into a tensor of the old shape.
        raise NotImplementedError(
            f"out=: resizing an out tensor of shape {list(out.shape)} to {list(shape)} cannot "
            "be recorded while tracing; pass an out tensor of the result's shape")
    old = out._data
    n = 1
    for s in shape:
        n *= s
    # (column-major: the transposed matrices laid out row-major, then transposed back)
    stored = (*shape[:-2], shape[-1], shape[-2]) if column_major else shape
    if n <= old.size and old.flags.c_contiguous:
        data = old.reshape(-1)[:n].reshape(stored)
    else:
        flat = np.zeros(n, old.dtype)
        k = min(n, old.size)
        flat[:k] = old.reshape(-1)[:k]
        data = flat.reshape(stored)
    out._data = data.swapaxes(-1, -2) if column_major else data


def check_exact_dtype(name: str, result: Tensor, out: Tensor) -> None:
    """PyTorch's common refusal of an `out` whose dtype is not `result`'s ("Expected out
    tensor to have dtype float, but got double instead"), for functions writing into `out`
    themselves."""
    _check_dtype(("exact", facts.EXACT), name, result, out)


def resize_with_warning(out: Tensor, shape: tuple) -> None:
    """`out` resized to `shape` as PyTorch's `resize_output` does (its warning when `out`
    had elements), for functions writing into `out` themselves."""
    _resize(out, shape, facts.RESIZE_WARNING)


# ---------------------------------------------------------------------------- overlap

_OVERLAP_ERROR = ("unsupported operation: some elements of the input tensor and the written-to "
                  "tensor refer to a single memory location. Please clone() the tensor before "
                  "performing the operation.")
_NO, _FULL, _PARTIAL = 0, 1, 2
_OVERLAP_RULES: dict[str, object] = {}  # public name -> `_overlap_rules` (cached)


def _dense(a: np.ndarray) -> bool:
    """Whether `a`'s elements fill their memory range exactly once, in some order of its
    dims (PyTorch's "non-overlapping and dense"; a negative stride is not)."""
    expected = a.itemsize
    for stride, size in sorted((st, n) for n, st in zip(a.shape, a.strides) if n != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _overlap_status(out: Tensor, t: Tensor, shape: tuple | None = None) -> int:
    """PyTorch's memory-overlap status of `out` and input `t`: full (the same elements, in
    the same strides), partial (shared memory otherwise), or none; tensors it cannot judge
    (either not dense), empty or without arrays (fake, sparse) count as none. With `shape`,
    `out` is judged as PyTorch's resize to `shape` leaves it: contiguous from the same first
    element (its storage grows in place, so a grown `out` still shares it)."""
    a, b = out._data, t._data
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.size == 0 or \
            b.size == 0:
        return _NO
    if shape is not None and tuple(shape) != a.shape:
        # (only the addresses of this view are used: it is never read)
        n = 1
        for s in shape:
            n *= s
        if n == 0 or not _dense(a) or min(a.strides, default=0) < 0:
            return _NO
        strides = np.empty(shape, a.dtype).strides
        a = np.lib.stride_tricks.as_strided(a, shape, strides)
    if not np.may_share_memory(a, b) or not (_dense(a) and _dense(b)):
        return _NO
    if _byte_bounds(a) == _byte_bounds(b) and a.strides == b.strides:
        return _FULL
    return _PARTIAL


_LEVELS = {None: None, "partial": _PARTIAL, "any": _FULL}


def _overlap_rules(name: str) -> list | tuple:
    """The least overlap status `name`'s out= refuses, as a pair (with `self`, the first
    tensor argument; with the other inputs) or a list of pairs, one per output; a level is
    `_FULL` (any overlap), `_PARTIAL` or None. From `out_facts.OVERLAP_RULES` where PyTorch's
    kernel has its own rule, otherwise from the registry entries of the function's ATen name:
    any overlap for an op over a list of tensors (cat, stack), a partial one for an op whose
    kernel lays its result out in its operands' order (PyTorch's TensorIterator ops:
    pointwise functions), none for the others (reductions, matrix products, ...)."""
    rules = _OVERLAP_RULES.get(name)
    if rules is not None:
        return rules
    fact = facts.OVERLAP_RULES.get(name)
    if fact is not None:
        pairs = fact if fact.__class__ is list else [fact]
        rules = [(_LEVELS[a], _LEVELS[b]) for a, b in pairs]
        rules = rules if fact.__class__ is list else rules[0]
    else:
        from .ops.overloads import aten

        ops = []
        for base in {name, name.rpartition(".")[2]}:
            try:
                packet = getattr(aten, base)
            except AttributeError:  # no ATen op of that name: a composite
                continue
            ops += [o.op for o in packet._overloads.values() if not o.op.inplace]
        rule = None
        if any(op.list_arg for op in ops):
            rule = _FULL
        elif ops and all(op.result_order in ("operands", "iterator") for op in ops):
            rule = _PARTIAL
        rules = (rule, rule)
    _OVERLAP_RULES[name] = rules
    return rules


def _overlap_rule(name: str) -> int | None:
    """The least overlap status `name`'s out= refuses with some input and output (the
    strictest of `_overlap_rules`): `_FULL` (any), `_PARTIAL`, or None (none refused)."""
    rules = _overlap_rules(name)
    levels = [lv for pair in (rules if rules.__class__ is list else [rules]) for lv in pair
              if lv is not None]
    return min(levels) if levels else None


def _check_overlap(name: str, outs: list, args: tuple, kwargs: dict,
                   results: list | None = None) -> None:
    """PyTorch's refusal of an `out` sharing memory with an input (`_overlap_rules`): judged
    on out's geometry before any resize for a TensorIterator op (the registry's rule), as
    the resize to its result (`results`) leaves it for the others (the kernels with a rule in
    `out_facts.OVERLAP_RULES`, which check once the output is set up). The rule is looked up
    only when memory is shared."""
    first = args[0] if args else kwargs.get("input", kwargs.get("self"))
    inputs = [a for v in (*args, *kwargs.values())
              for a in (v if isinstance(v, (list, tuple)) else (v,)) if isinstance(a, Tensor)]
    if not inputs:
        return
    resized = results is not None and name in facts.OVERLAP_RULES
    for i, o in enumerate(outs):
        shape = None
        if resized and isinstance(results[i], Tensor):
            shape = tuple(results[i].shape)
        for t in inputs:
            status = _overlap_status(o, t, shape)
            if status == _NO:
                continue
            rules = _overlap_rules(name)
            if rules.__class__ is list:
                rules = rules[min(i, len(rules) - 1)]
            rule = rules[0] if t is first else rules[1]
            if rule is not None and status >= rule:
                raise RuntimeError(_OVERLAP_ERROR)


def _outs_of(plan: OutPlan, result, out) -> tuple[list, list]:
    """The (result, out) tensors paired, with PyTorch's TypeErrors for an `out` of the wrong
    kind."""
    short = _parser_name(plan.name)
    if isinstance(result, tuple):
        if not isinstance(out, (tuple, list)):
            raise TypeError(f"{short}(): argument 'out' must be tuple of Tensors, not "
                            f"{type(out).__name__}")
        if len(out) != len(result):
            raise TypeError(f"expected tuple of {len(result)} elements but got {len(out)}")
        for i, t in enumerate(out):
            if not isinstance(t, Tensor):  # (`out`'s index among the parameters)
                code = getattr(inspect.unwrap(plan.fn), "__code__", None)
                names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount] \
                    if code is not None else ()
                where = names.index("out") if "out" in names else len(names)
                raise TypeError(f"expected Tensor as element {i} in argument {where}, but "
                                f"got {type(t).__name__}")
        return list(result), list(out)
    if not isinstance(out, Tensor):
        raise TypeError(f"{short}(): argument 'out' must be Tensor, not {type(out).__name__}")
    return [result], [out]


def _parser_name(name: str) -> str:
    """The name PyTorch's argument parser gives public function `name` in its messages: the
    C function's (`linalg.inv` is `linalg_inv`, `fft.fft` is `fft_fft`)."""
    space, _, short = name.rpartition(".")
    return f"{space}_{short}" if space in ("linalg", "fft") else short


def _check_tensor_arguments(name: str, names: tuple, args: tuple, kwargs: dict) -> None:
    """PyTorch's TypeError for a parameter in `names` (the function's first parameters, in
    order) given something other than a tensor."""
    short = _parser_name(name)
    for i, param in enumerate(names):
        if i < len(args):
            value, where = args[i], f" (position {i + 1})"
        elif param in kwargs:
            value, where = kwargs[param], ""
        else:
            continue
        if not isinstance(value, Tensor):
            raise TypeError(f"{short}(): argument '{param}'{where} must be Tensor, not "
                            f"{type(value).__name__}")


def write_out(plan: OutPlan, out, args: tuple, kwargs: dict):
    """`plan.fn(*args, **kwargs)` (a call without `out`) written into `out`, as PyTorch's
    `out=` does (see the module's docstring); returns `out` or the named tuple of outs."""
    name = plan.name
    if name in facts.REFUSED:
        # (named as PyTorch's binding names the ATen op: `special_softmax()`)
        raise TypeError(f"{name.replace('.', '_')}() got an unexpected keyword argument 'out'")
    tensor_arguments = facts.TENSOR_ARGUMENTS.get(name)
    if tensor_arguments is not None:
        _check_tensor_arguments(name, tensor_arguments, args, kwargs)
    if name in facts.DTYPE_FROM_OUT and "dtype" in kwargs and isinstance(out, Tensor):
        given = kwargs["dtype"]
        if given is None:
            kwargs["dtype"] = out.dtype
        elif name in facts.FACTORIES and _dtype.as_dtype(given) is not out.dtype:
            raise RuntimeError(f"dtype {_dtype.as_dtype(given).legacy} does not match dtype of "
                               f"out parameter ({out.dtype.legacy})")
    if _autocast.active() and name not in facts.COPIES_THROUGH_AUTOGRAD:
        # PyTorch's out= overloads have no autocast kernels (its composites written over
        # another op's result, which copy into `out` through autograd, do autocast)
        with _autocast.set_aside():
            result = plan.fn(*args, **kwargs)
    else:
        result = plan.fn(*args, **kwargs)
    single = not isinstance(result, tuple)
    if single and name in facts.SINGLE_RESULT_REFUSED:
        raise TypeError(f'{name}() missing 1 required positional arguments: "dim"')
    results, outs = _outs_of(plan, result, out)

    if name in facts.ALWAYS_RESIZED and any(o.requires_grad for o in outs):
        raise RuntimeError("cannot resize variables that require grad")
    forward_op = None
    if _tensor.tangent_lookup is not None:  # an open forward AD level
        forward_op = facts.forward_ad_op(name, args, kwargs)
        _forward_ad().check_out(forward_op, name in facts.ALWAYS_RESIZED, (args, kwargs),
                                outs, written=False)
    through_autograd = name in facts.COPIES_THROUGH_AUTOGRAD
    inherits = False  # `out` takes the result's NotImplemented history
    made: dict = {}  # the results' nodes -> their NotImplemented nodes (one per node)
    if _local.grad_enabled and not through_autograd:
        op = facts.grad_name(name, kwargs)
        # An op PyTorch does not differentiate ignores inputs that require grad: its `out`
        # records the op's NotImplemented node instead.
        inputs_count = not op.startswith("aten::")
        inherits = not inputs_count
        differentiable = name not in facts.NOT_DIFFERENTIABLE
        for r, o in zip(results, outs):
            if isinstance(r, Tensor) and ((r.requires_grad and inputs_count) or (
                    o.requires_grad and differentiable and
                    (r.dtype.is_floating_point or r.dtype.is_complex))):
                raise RuntimeError(facts.GRAD_ERROR.format(op))

    _check_overlap(name, outs, args, kwargs, results)
    warn = None if name in facts.SILENT_RESIZE else \
        facts.RESIZE_WARNINGS.get(name, facts.RESIZE_WARNING)
    rule = (single and facts.SINGLE_RESULT_RULES.get(name)) or \
        facts.DTYPE_RULES.get(name, facts.DEFAULT_RULE)
    per_output = rule.__class__ is list
    for i, (r, o) in enumerate(zip(results, outs)):
        if isinstance(r, Tensor):
            _check_dtype(rule[i] if per_output else rule, name, r, o, args, kwargs,
                         (results[0], outs[0]))

    _resize_outs(results, outs, warn, through_autograd, facts.COLUMN_MAJOR_RESIZE.get(name))
    for r, o in zip(results, outs):
        if not isinstance(r, Tensor):
            continue
        if through_autograd:
            o.copy_(r)
        elif not (inherits and _write_with_history(o, r, op, args, kwargs, made)):
            with no_grad():
                call(_copy_op, o, r)
    if forward_op is not None:  # (PyTorch's out= kernels refuse tangents once they ran)
        _forward_ad().check_out(forward_op, False, (args, kwargs), outs, written=True)
    if isinstance(result, tuple):
        named = getattr(return_types, f"{type(result).__name__}_out", None) \
            if type(result).__module__ == return_types.__name__ else None
        return named(*outs) if named is not None else tuple(outs)
    return out


def _resize_outs(results: list, outs: list, warn: str | None, through_autograd: bool,
                 column_major: dict | None = None) -> None:
    """Resize each out of another shape than its result (`warn`: the deprecation warning for
    one that had elements, None for none; `column_major`: the outputs resized column-major,
    by index, "any" or "empty" as `out_facts.COLUMN_MAJOR_RESIZE` says)."""
    for i, (r, o) in enumerate(zip(results, outs)):
        if isinstance(r, Tensor) and tuple(o.shape) != tuple(r.shape):
            if through_autograd and o.requires_grad and _local.grad_enabled:
                raise RuntimeError("a leaf Variable that requires grad is being used in an "
                                   "in-place operation.")
            when = column_major.get(i) if column_major else None
            if when == "result" and o.numel() == 0 and not tracing_mode() and \
                    isinstance(o._data, np.ndarray):
                _resize_like(o, r)
                continue
            _resize(o, tuple(r.shape), warn,
                    when == "any" or (when == "empty" and o.numel() == 0))


def _resize_like(out: Tensor, result: Tensor) -> None:
    """Give empty `out` the layout of `result` itself (strides and all: lstsq's solution, a
    view of the taller column-major matrix LAPACK wrote), in memory of its own."""
    shape, strides = tuple(result.shape), tuple(result.stride())
    span = 1 + sum((s - 1) * st for s, st in zip(shape, strides)) if all(shape) else 1
    buffer = np.zeros(span, out._data.dtype)
    out._data = np.lib.stride_tricks.as_strided(
        buffer, shape, tuple(st * buffer.itemsize for st in strides), writeable=True)


_NOT_IMPLEMENTED: dict = {}  # ATen op name -> the NotImplemented node class of its out=


def _not_implemented(node, aten: str):
    """`node` (a registry op's, of a result no one else holds) as PyTorch's out= kernel of
    an op without a derivative records it: a NotImplemented node over the same inputs, whose
    backward raises PyTorch's error for `aten` ("aten::t_copy"). None for another node."""
    op = type(node)._op
    if op is None:
        return None
    if op.node == "NotImplemented":
        _keep_edges_only(node)
        return node
    cls = _NOT_IMPLEMENTED.get(aten)
    if cls is None:
        import copy  # (once per op: `import fusegrad` does not load the module)

        stand_in = copy.copy(op)  # (no saved values: the derivative reads none)
        stand_in.derivative = not_implemented_derivative(aten.partition("::")[2])
        stand_in.on_arrays = None
        stand_in.saved_names = ()
        stand_in.node = "NotImplemented"
        cls = _NOT_IMPLEMENTED[aten] = node_class("NotImplemented", stand_in)
    made = cls()
    for klass in type(node).__mro__:
        for slot in getattr(klass, "__slots__", ()):
            if slot != "__weakref__" and hasattr(node, slot):
                setattr(made, slot, getattr(node, slot))
    made._saved, made._versions = (), None
    _keep_edges_only(made)
    return made


def _keep_edges_only(node) -> None:
    """Drop `node`'s entries for inputs without a gradient: PyTorch's fallback for an op
    without a derivative collects the edges of the inputs that require grad only. (Its
    derivative raises before any entry is read.)"""
    edges = node.next_functions
    if all(e[0] is not None for e in edges):
        return
    keep = [i for i, e in enumerate(edges) if e[0] is not None]
    node.next_functions = tuple(edges[i] for i in keep)
    node._in_meta = tuple(node._in_meta[i] for i in keep)
    node._pos = tuple(node._pos[i] for i in keep)


def _write_with_history(out: Tensor, result: Tensor, aten: str, args: tuple, kwargs: dict,
                        made: dict) -> bool:
    """Write `result` into `out` with the history PyTorch's out= kernel of an op without a
    derivative (`aten`) records: a NotImplemented node over the inputs that require grad
    (`made`: the nodes made so far in this call, so outputs of one node keep one). A view
    `out` records the write on its base (CopySlices), whose backward reaches that node.
    False (nothing written) for a result without a node of its own (an input itself)."""
    if result.grad_fn is None or any(result is a for a in (*args, *kwargs.values())):
        return False
    old = result._grad_fn
    node = made.get(old)
    if node is None:
        node = made[old] = _not_implemented(old, aten)
    if node is None:
        return False
    result._grad_fn = node
    if out._base is not None:
        out.copy_(result)
        return True
    with no_grad():
        call(_copy_op, out, result)
    out._grad_fn = node
    out._output_nr = result._output_nr
    out._rg = True
    return True


# ---------------------------------------------------------------------------- the wrappers

_COMPILED: dict[str, types.CodeType] = {}


def _takes_out(fn: types.FunctionType) -> bool:
    """Whether `fn` has an `out` parameter. A plain function's parameters are the first names
    of its code (positional, keyword-only, then `*args` and `**kwargs`), read without
    building a signature; for a wrapper, those of the function it wraps (`__wrapped__`, which
    `inspect.signature` follows). Anything with an explicit `__signature__` on the way, or not
    a plain function at its end, is asked through `inspect`. A Tensor method's copy refusing
    `out` is asked of its function (`with_out`)."""
    fn = getattr(fn, "with_out", fn)
    raw = fn
    while not hasattr(raw, "__signature__"):
        inner = getattr(raw, "__wrapped__", None)
        if inner is None:
            break
        raw = inner
    else:
        return "out" in inspect.signature(fn).parameters
    if raw.__class__ is not types.FunctionType:
        return "out" in inspect.signature(fn).parameters
    code = raw.__code__
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return "out" in code.co_varnames[:count]


def _guarded(*args, **kwargs):
    # The code each wrapper starts with (its globals are the wrapper's own namespace, which
    # names the wrapper `_self_`): on the first call it becomes the wrapper generated for
    # that function's own parameter list (see `handle_out`).
    _specialise_(_self_)  # noqa: F821
    return _self_(*args, **kwargs)  # noqa: F821


_TRAMPOLINE = _guarded.__code__.replace(co_name="guarded")
_type_names.PASSING_CODES.add(_TRAMPOLINE)


def handle_out(fn: types.FunctionType, name: str) -> types.FunctionType:
    """`fn` with PyTorch's `out=`: a call with a non-None `out`, by keyword or (where its
    signature allows) by position, runs `fn` without it and writes the result into `out`
    (`write_out`); otherwise `fn` itself runs, unchanged. `name` is the public name the
    tables know the function by ("add", "linalg.inv").

    The wrapper is generated with `fn`'s own parameter list and passes each parameter on as
    `fn` declares it, so a call without `out` costs one extra frame (about 60 ns), not the
    packing of `*args, **kwargs` (about 200 ns). Generating it means compiling, a quarter of
    a millisecond per function: too much for the ~300 functions at import, so the wrapper
    starts as a generic trampoline and replaces its own code on its first call (one object
    throughout, so names bound earlier get the fast form too)."""
    # A Tensor method's copy refusing `out` (`_functions._args.method_form`): the function
    # it copies is the one taking `out`.
    fn = getattr(fn, "with_out", fn)
    namespace = {"_fn_": fn, "_plan_": OutPlan(fn, name), "_write_": write_out,
                 "_specialise_": _specialise, "__name__": fn.__module__}
    wrapper = namespace["_self_"] = types.FunctionType(_TRAMPOLINE, namespace, fn.__name__)
    copy_metadata(wrapper, fn, _HANDLES_OUT)
    return wrapper


_HANDLES_OUT = {"handles_out": True}


def _specialise(wrapper: types.FunctionType) -> None:
    """Give `wrapper` the code generated for its function's parameter list."""
    namespace = wrapper.__globals__
    fn = namespace["_fn_"]
    params, passed = [], []
    # The call the out= branch makes: the parameters before `out` by position, those after
    # it (and keyword-only ones) by keyword, `out` itself left to its default (None).
    out_positional, out_keywords = [], []
    star_written = False  # a bare `*` goes before the first keyword-only parameter
    last_positional_only = 0
    after_out = False
    for p in inspect.signature(fn).parameters.values():
        text = p.name
        if p.default is not p.empty:
            namespace[f"_default_{p.name}"] = p.default
            text += f"=_default_{p.name}"
        if p.kind is p.VAR_POSITIONAL:
            params.append("*" + p.name)
            passed.append("*" + p.name)
            out_positional.append("*" + p.name)
            star_written = True
        elif p.kind is p.VAR_KEYWORD:
            params.append("**" + p.name)
            passed.append("**" + p.name)
            out_keywords.append("**" + p.name)
        elif p.kind is p.KEYWORD_ONLY:
            if not star_written:
                params.append("*")
                star_written = True
            params.append(text)
            passed.append(f"{p.name}={p.name}")
            if p.name != "out":
                out_keywords.append(f"{p.name!r}: {p.name}")
        else:
            params.append(text)
            passed.append(p.name)
            if p.kind is p.POSITIONAL_ONLY:
                last_positional_only = len(params)
            if p.name == "out":
                after_out = True
            elif after_out:
                out_keywords.append(f"{p.name!r}: {p.name}")
            else:
                out_positional.append(p.name)
    if last_positional_only:
        params.insert(last_positional_only, "/")
    positional = "".join(f"{a}, " for a in out_positional)
    source = (f"def guarded({', '.join(params)}):\n"
              f"    if out is not None:\n"
              f"        return _write_(_plan_, out, ({positional}), "
              f"{{{', '.join(out_keywords)}}})\n"
              f"    return _fn_({', '.join(passed)})\n")
    # Many functions share a parameter list: compile each distinct wrapper once.
    code = _COMPILED.get(source)
    if code is None:
        code = _COMPILED[source] = compile(source, "<out= wrapper>", "exec")
    made: dict = dict(namespace)
    exec(code, made)  # noqa: S102
    specialised = made["guarded"]
    wrapper.__defaults__ = specialised.__defaults__
    wrapper.__kwdefaults__ = specialised.__kwdefaults__
    wrapper.__code__ = specialised.__code__


def guard_namespace(namespace: dict, prefix: str, implemented: frozenset = frozenset()) -> None:
    """Replace every public function in `namespace` that has an `out` parameter, except
    those named in `implemented` or marked `writes_out` (which write into `out`
    themselves), by its `handle_out` form. Aliases (`multiply` and `mul`) stay one object,
    named after the function."""
    space = prefix.partition(".")[2]
    wrapped: dict = {}
    for name, fn in list(namespace.items()):
        if name.startswith("_") or name in implemented or not isinstance(fn, types.FunctionType):
            continue
        if getattr(fn, "handles_out", False) or getattr(fn, "writes_out", False) or \
                not _takes_out(fn):
            continue
        if fn not in wrapped:
            public = fn.__name__ if namespace.get(fn.__name__) is fn else name
            wrapped[fn] = handle_out(fn, f"{space}.{public}" if space else public)
        namespace[name] = wrapped[fn]
