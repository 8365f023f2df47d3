"""PyTorch's `torch._foreach_*` functions: one op applied to every tensor of a list.

Model-EMA code (`_foreach_lerp_(ema, params, weight=0.001)`), hand-written optimizers
(`_foreach_addcdiv_`, `_foreach_sqrt`) and gradient clipping (`_foreach_norm`,
`_foreach_mul_`) call them. PyTorch's CPU kernels loop over the list one tensor at a time,
and so does each function here: it calls the per-tensor op (the Tensor method, or the
registry overload PyTorch's loop calls), so autograd records each tensor's own node and
every dtype, broadcasting and error rule is that op's.

The names and overloads are declared in `ops/foreach.py`; this module builds one function
per name from them. Arguments are matched to an overload as PyTorch's argument parser does
(in the declared order; a number, a list of numbers, one tensor or a list of tensors), then
the list lengths are checked with PyTorch's messages before any tensor is touched. The
out-of-place forms return a tuple of new tensors; the in-place forms write into the tensors
of their first argument and return that argument itself, as PyTorch's bindings do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from .._creation import full
from .._dispatch import check_inplace_allowed, handle_function
from .._scalar_conversion import not_implemented_for
from .._tensor import Tensor
from .._torch_function_wrappers import _wrap_function
from ..autograd.grad_mode import is_grad_enabled
from ..autograd.graph import _modified_message
from ..ops import foreach as table
from ..ops.overloads import aten
from ._signatures import _overload_text, _parse, _resolve
from .pointwise import maximum as _maximum
from .pointwise import minimum as _minimum
from .pointwise import pow as _pow
from .reduction import _vector_norm


def _foreign(args: tuple, kwargs: dict) -> bool:
    """Whether an argument (or an element of a list argument) is no tensor but declares the
    `__fusegrad_function__` protocol (fx's Proxy)."""
    for a in (*args, *kwargs.values()):
        for v in (a if isinstance(a, (list, tuple)) else (a,)):
            if not isinstance(v, Tensor) and hasattr(type(v), "__fusegrad_function__"):
                return True
    return False


def _check_nonempty(tensors) -> None:
    if not tensors:
        raise RuntimeError("Tensor list must have at least one tensor.")


def _check_lists(tensors, *others, nonempty: bool = True) -> None:
    """Every list as long as the first, then (unless `nonempty` is False, for a check that
    comes later) the first not empty: PyTorch's order."""
    for other in others:
        if len(other) != len(tensors):
            raise RuntimeError("Tensor lists must have the same number of tensors, got "
                               f"{len(tensors)} and {len(other)}")
    if nonempty:
        _check_nonempty(tensors)


def _check_scalars(tensors, scalars) -> None:
    _check_nonempty(tensors)
    if len(scalars) != len(tensors):
        raise RuntimeError("Tensor list must have same number of elements as scalar list.")


def _check_scalar_tensor(t: Tensor) -> None:
    if t.ndim != 0:
        raise RuntimeError(f"scalar tensor expected to be 0 dim but it has {t.ndim} dimensions "
                           f"and {t.numel()} elements.")


def _packed_scalars(tensors, scalars: Tensor) -> list:
    """The numbers of a 1-D tensor holding one per tensor (addcmul's `Tensor scalars`)."""
    if scalars.ndim != 1:
        raise RuntimeError("Expected packed scalar Tensor to be of dimension 1. Got "
                           f"{scalars.ndim} instead.")
    if scalars.numel() != len(tensors):
        raise RuntimeError(f"Expected length of scalars to match input of length "
                           f"{len(tensors)} but got {scalars.numel()} instead.")
    _check_nonempty(tensors)
    return scalars.tolist()


def _check_writable(tensors, *inputs) -> None:
    """Refuse up front, as PyTorch does, to write into a leaf that requires grad (or a view
    of one): no tensor of the list is changed when one of them is refused."""
    record = is_grad_enabled() and any(
        t.requires_grad for group in (tensors, *inputs) if isinstance(group, (list, tuple))
        for t in group if isinstance(t, Tensor))
    for t in tensors:
        check_inplace_allowed(t, record)


# ---------------------------------------------------------------- the per-tensor calls


class Step(NamedTuple):
    """One per-tensor call of a foreach function: Tensor method `target` (a name) of
    `args[0]`, or function `target` (a registry overload, a public function). In a step
    marked `chained`, an argument `PREVIOUS` stands for the previous step's result; `kept`
    steps' results make an out-of-place function's tuple."""

    target: str | Callable
    args: tuple
    kwargs: dict | None = None
    kept: bool = True
    chained: bool = False


class Plan(NamedTuple):
    """A foreach call decided: its steps, in order, and whether it returns its first
    argument (the in-place forms) or the tuple of the kept steps' results. Every check
    PyTorch makes up front has passed when a plan exists, so no tensor is touched before
    one is refused. Eager execution runs the steps (`execute`); the compiler records
    them one by one, so a graph holds each tensor's own op."""

    steps: list
    inplace: bool


PREVIOUS = object()  # in a chained step's arguments: the previous step's result


def execute(plan: Plan, first):
    """Run `plan`'s steps; the result a foreach call returns (`first`: its first argument)."""
    results, previous = [], None
    for step in plan.steps:
        args = step.args
        if step.chained:
            args = tuple(previous if a is PREVIOUS else a for a in args)
        if type(step.target) is str:
            previous = getattr(args[0], step.target)(*args[1:], **(step.kwargs or {}))
        else:
            previous = step.target(*args, **(step.kwargs or {}))
        if step.kept:
            results.append(previous)
    return first if plan.inplace else tuple(results)


def _guard_saved(params, bound: dict, results: tuple, saves_lists: bool) -> None:
    """Check, before any node of an out-of-place call's results runs its backward, the
    versions of the inputs PyTorch's one node per call saves, in its order (each tensor
    list in parameter order, then the 0-d tensor operand): every tensor list for the binary
    and pointwise families (`saves_lists`: PyTorch's foreach formulas read `self` even
    where the per-tensor op needs none, `_foreach_add(xs, ys)` saves both lists), otherwise
    the lists the per-tensor ops save. An input changed in place since is PyTorch's error,
    naming the first changed tensor in that order, whichever node the backward reaches
    first. (The results the per-tensor nodes save are checked by those nodes.)"""
    nodes: list = []
    for r in results:
        node = r.grad_fn if isinstance(r, Tensor) else None
        if node is not None and all(node is not n for n in nodes):
            nodes.append(node)
    if not nodes:
        return
    saved = {id(v) for node in nodes for v in (getattr(node, "_saved", None) or ())
             if isinstance(v, Tensor)}
    checked: list = []
    for p in params:
        value = bound.get(p.name)
        if p.kind == "TensorList":
            if saves_lists or any(id(t) in saved for t in value):
                checked.extend(value)
        elif p.kind == "Tensor" and isinstance(value, Tensor) and id(value) in saved:
            checked.append(value)
    # (tensors without a version counter, inference tensors, are never saved)
    expected = [(t, t._vc[0]) for t in checked if t._vc.__class__ is list]
    if not expected:
        return
    for node in nodes:
        node.register_prehook(_version_check(node, expected))


def _version_check(node, expected: list) -> Callable:
    def check(grad_outputs):
        if getattr(node, "_saved", ()) is None:  # released: the node says so itself
            return None
        for t, version in expected:
            if t._vc[0] != version:
                raise RuntimeError(_modified_message(t, version))
        return None

    return check


def _target(name: str) -> str | Callable:
    """The step target for `name`: a Tensor method, or for a registry overload's name
    (`add_.Scalar`) that op (`aten.add_.Scalar`), whose node PyTorch's loops record."""
    if "." in name:
        packet, _, overload = name.partition(".")
        return getattr(getattr(aten, packet), overload)
    return name


def _written(op: str, t: Tensor, other: Tensor, kwargs: dict | None) -> list:
    """The step writing `op(t, other)` into `t`: the in-place Tensor method, or for maximum
    and minimum (which have none) the registry's in-place form PyTorch's loop records."""
    inplace = f"{op}_"
    if hasattr(Tensor, inplace):
        return [Step(inplace, (t, other), kwargs, kept=False)]
    return [Step(_target(_IN_PLACE_FORMS[op]), (t, other), kwargs, kept=False)]


# The registry's in-place forms of the binary ops without a Tensor method of their own.
_IN_PLACE_FORMS = {"maximum": "_foreach_maximum_.List", "minimum": "_foreach_minimum_.List"}


def _bounded(extreme: Callable, clamp: str) -> Callable:
    """`_foreach_maximum`'s (or minimum's) per-tensor call with a number: clamp_min's (or
    clamp_max's) values; recorded for a floating tensor as the binary op against the number
    in the tensor's dtype, whose derivative halves the gradient at a tie, as PyTorch's
    foreach formula does (clamp's passes all of it to the tensor)."""

    def call_with_number(t: Tensor, number) -> Tensor:
        if is_grad_enabled() and t.requires_grad and t.dtype.is_floating_point:
            # The number converted to the tensor's dtype first, as PyTorch compares them
            # (with the clamp's overflow error for a number beyond a half type's range).
            return extreme(t, full((), number, dtype=t.dtype))
        return getattr(t, clamp)(number)

    call_with_number.__name__ = call_with_number.__qualname__ = f"{extreme.__name__}_number"
    return call_with_number


_WITH_NUMBER: dict[str, Callable] = {
    "maximum": _bounded(_maximum, "clamp_min"), "minimum": _bounded(_minimum, "clamp_max")}


def _plan_unary(op: str, inplace: bool) -> Callable:
    target = f"{op}_" if inplace else op

    def plan(bound: dict, params) -> Plan:
        tensors = bound["self"]
        _check_nonempty(tensors)
        if inplace:
            _check_writable(tensors)
        return Plan([Step(target, (t,)) for t in tensors], inplace)

    return plan


def _plan_binary(op: str, inplace: bool) -> Callable:
    """add, sub, mul, div, clamp_min, clamp_max, maximum, minimum and pow: a number, one per
    tensor, one 0-dim tensor for all, or one tensor per tensor."""
    spelled = f"{op}_" if inplace else op
    with_number = _WITH_NUMBER.get(spelled) or _target(table.SCALAR_OP.get(spelled, spelled))

    def plan(bound: dict, params) -> Plan:
        if params[0].kind == "Number":  # _foreach_pow(2.0, exponents)
            base, tensors = bound["self"], bound["exponent"]
            _check_nonempty(tensors)
            return Plan([Step(_pow, (base, t)) for t in tensors], False)
        tensors, second = bound["self"], params[1]
        other = bound[second.name]
        kw = {"alpha": bound["alpha"]} if bound.get("alpha", 1) != 1 else None
        if second.kind == "TensorList":
            _check_lists(tensors, other)
            pairs, number = list(zip(tensors, other)), False
        elif second.kind == "Tensor":
            _check_scalar_tensor(other)
            _check_nonempty(tensors)
            pairs, number = [(t, other) for t in tensors], False
        elif second.kind == "ScalarList":
            _check_scalars(tensors, other)
            pairs, number = list(zip(tensors, other)), True
        else:
            _check_nonempty(tensors)
            pairs, number = [(t, other) for t in tensors], True
        if inplace:
            _check_writable(tensors, other)
        if number:
            return Plan([Step(with_number, (t, o), kw) for t, o in pairs], inplace)
        if not inplace:
            return Plan([Step(op, (t, o), kw) for t, o in pairs], False)
        return Plan([s for t, o in pairs for s in _written(op, t, o, kw)], True)

    return plan


def _plan_pointwise(op: str, inplace: bool) -> Callable:
    """addcmul and addcdiv: self + value * tensor1 (* or /) tensor2, the value one number, one
    per tensor, or packed in a 1-D tensor."""
    target = f"{op}_" if inplace else op

    def plan(bound: dict, params) -> Plan:
        tensors, t1, t2 = bound["self"], bound["tensor1"], bound["tensor2"]
        last = params[3]
        _check_lists(tensors, t1, t2, nonempty=last.kind != "Tensor")
        if last.kind == "Number":
            values = [bound["value"]] * len(tensors)
        elif last.kind == "Tensor":
            values = _packed_scalars(tensors, bound["scalars"])
        else:
            values = bound["scalars"]
            _check_scalars(tensors, values)
        if inplace:
            _check_writable(tensors, t1, t2)
        return Plan([Step(target, (t, a, b), {"value": v})
                     for t, a, b, v in zip(tensors, t1, t2, values)], inplace)

    return plan


def _plan_lerp(op: str, inplace: bool) -> Callable:
    """lerp: self + weight * (tensors1 - self), the weight a number, one per tensor, or a
    tensor per tensor."""
    target = f"{op}_" if inplace else op

    def plan(bound: dict, params) -> Plan:
        tensors, ends = bound["self"], bound["tensors1"]
        if params[2].kind == "TensorList":
            weights = bound["weights"]
            _check_lists(tensors, ends, weights)
        elif params[2].kind == "ScalarList":
            _check_lists(tensors, ends)
            weights = bound["weight"]
            _check_scalars(tensors, weights)
        else:
            _check_lists(tensors, ends)
            weights = [bound["weight"]] * len(tensors)
        if inplace:
            _check_writable(tensors, ends, weights)
        return Plan([Step(target, (t, e, w)) for t, e, w in zip(tensors, ends, weights)],
                    inplace)

    return plan


def _norm(bound: dict, params) -> Plan:
    tensors = bound["self"]
    _check_nonempty(tensors)
    return Plan([Step(_vector_norm, (t, bound["ord"]), {"dtype": bound["dtype"]})
                 for t in tensors], False)


def powsum(t: Tensor, ord, dtype) -> Tensor:
    """sum(|t| ** ord) (`ord` 0 counts every element), `t` cast to `dtype` first if given:
    one tensor's `_foreach_powsum`, the norm before its root."""
    if not (t.dtype.is_floating_point or t.dtype.is_complex):
        raise not_implemented_for("powsum_cpu", t.dtype)
    if dtype is not None:
        t = t.to(dtype)
    return t.abs().pow(ord).sum()


def _powsum(bound: dict, params) -> Plan:
    tensors, ord, dtype = bound["self"], bound["ord"], bound["dtype"]
    _check_nonempty(tensors)
    return Plan([Step(powsum, (t, ord, dtype)) for t in tensors], False)


def _max(bound: dict, params) -> Plan:
    tensors = bound["self"]
    _check_nonempty(tensors)
    if any(t.numel() == 0 for t in tensors):
        raise RuntimeError("_foreach_max cannot compute the maximum of an empty tensor; max over "
                           "zero elements is undefined.")
    return Plan([Step("max", (t,)) for t in tensors], False)


def _clone(bound: dict, params) -> Plan:
    tensors = bound["self"]
    _check_nonempty(tensors)
    kw = {"memory_format": bound["memory_format"]}
    return Plan([Step("clone", (t,), kw) for t in tensors], False)


def _mm(bound: dict, params) -> Plan:
    tensors, others = bound["self"], bound["mat2"]
    if not tensors:
        raise RuntimeError("_foreach_mm requires non-empty tensor lists")
    if len(others) != len(tensors):
        raise RuntimeError("_foreach_mm: self and mat2 must have the same number of tensors")
    return Plan([Step("mm", (a, b)) for a, b in zip(tensors, others)], False)


def _copy_(bound: dict, params) -> Plan:
    tensors, sources = bound["self"], bound["src"]
    _check_nonempty(tensors)  # before the lengths, here
    _check_lists(tensors, sources)
    _check_writable(tensors, sources)
    return Plan([Step("copy_", (t, s, bound["non_blocking"]))
                 for t, s in zip(tensors, sources)], True)


def _zero_(bound: dict, params) -> Plan:
    tensors = bound["self"]
    _check_nonempty(tensors)
    _check_writable(tensors)
    return Plan([Step("zero_", (t,)) for t in tensors], True)


# Functions of one kind of their own, by the name ops/foreach.py declares.
_SPECIAL: dict[str, Callable] = {
    "_foreach_norm": _norm, "_foreach_powsum": _powsum, "_foreach_max": _max,
    "_foreach_clone": _clone, "_foreach_mm": _mm, "_foreach_copy_": _copy_,
    "_foreach_zero_": _zero_,
}


def _family(op: str) -> Callable[[str, bool], Callable]:
    """The maker of the plan for `op`, read from the shape of its declared overloads."""
    last = _parse(table.OVERLOADS[op][-1])
    names = [p.name for p in last]
    if names[:3] == ["self", "tensor1", "tensor2"]:
        return _plan_pointwise
    if names[:2] == ["self", "tensors1"]:
        return _plan_lerp
    return _plan_binary


# ---------------------------------------------------------------- building the namespace


def _build(name: str, signatures: tuple[str, ...], make_plan: Callable,
           inplace: bool, saves_lists: bool = False) -> Callable:
    overloads = tuple(_parse(s) for s in signatures)

    def plan(args: tuple, kwargs: dict) -> Plan:
        """The plan of a call on `args` and `kwargs` (every check made; TypeError for
        arguments no overload takes)."""
        params, bound = _resolve(name, overloads, args, kwargs)
        return make_plan(bound, params)

    def foreach(*args, **kwargs) -> Any:
        try:
            params, bound = _resolve(name, overloads, args, kwargs)
        except TypeError:
            if not _foreign(args, kwargs):
                raise
            # fx's proxies among the arguments: they record the call (as for every public
            # function; tensors subclassing Tensor reach their handler through the wrapper)
            return handle_function(wrapper, args, kwargs)
        result = execute(make_plan(bound, params), args[0] if args else kwargs.get("self"))
        if not inplace and is_grad_enabled():
            _guard_saved(params, bound, result, saves_lists)
        return result

    base = name[len("_foreach_"):].rstrip("_")
    shown = "\n".join(f"    {name}({_overload_text(ps)})" for ps in overloads)
    foreach.__name__ = foreach.__qualname__ = name
    foreach.__doc__ = (
        f"`{base}` applied to each tensor of a list"
        + (": writes into the tensors and returns the list itself." if inplace else
           ": returns a tuple of new tensors.")
        + f"\n\nOverloads (PyTorch's):\n{shown}\n")
    foreach.__annotations__ = {"return": "list | tuple" if inplace else "tuple[Tensor, ...]"}
    # Behind the `__torch_function__` protocol, as PyTorch's are (the namespace's own pass
    # leaves private names alone): a subclass's handler, or fx's proxies in the lists, get
    # the whole call.
    wrapper = _wrap_function(foreach, f"torch.{name}", 0, "fusegrad", None, name)
    wrapper._torch_function_info[0] = wrapper
    # What the compiler reads to record the call as its per-tensor ops.
    wrapper.foreach_plan = plan
    return wrapper


def _namespace() -> dict[str, Callable]:
    out = {}
    for op in table.UNARY:
        for inplace in (False, True):
            name = f"_foreach_{op}{'_' if inplace else ''}"
            out[name] = _build(name, ("TensorList self",), _plan_unary(op, inplace), inplace)
    for op, signatures in table.OVERLOADS.items():
        for inplace in (False, True):
            if op in (table.IN_PLACE_ONLY if not inplace else table.OUT_OF_PLACE_ONLY):
                continue
            name = f"_foreach_{op}{'_' if inplace else ''}"
            # The in-place form has only the overloads that write into their first argument.
            own = tuple(s for s in signatures if not inplace or s.startswith("TensorList self"))
            family = None if name in _SPECIAL else _family(op)
            make_plan = _SPECIAL.get(name) or family(op, inplace)
            out[name] = _build(name, own, make_plan, inplace,
                               saves_lists=family in (_plan_binary, _plan_pointwise))
    return out


_FUNCTIONS = _namespace()
globals().update(_FUNCTIONS)
__all__ = sorted(_FUNCTIONS)
