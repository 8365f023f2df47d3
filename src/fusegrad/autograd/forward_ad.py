"""Forward-mode AD: dual tensors, a primal value with a tangent beside it, as PyTorch's
`torch.autograd.forward_ad`.

Inside `dual_level()`, `make_dual(x, t)` gives a view of `x` carrying tangent `t`, every
operation on tensors with tangents gives its results the tangents `J t`, and
`unpack_dual(y)` reads `(primal, tangent)` back. Leaving the level forgets every tangent.

fusegrad keeps no forward-derivative formulas: each op's tangent comes from its backward
formula, by the transpose of a vector-Jacobian product (the "double vjp" that
`func/_transforms.py` explains): the op runs once on stand-ins of its dual arguments that the
tape records from, and two reverse passes over that one op give `J t`. The level pushes a
dispatch mode (`_TangentMode`), so every registry op is seen, however it was reached (a
method, a layer, a composite written over ops). A view op gives the same view of the
tangent, so a view's tangent is a view of its base's tangent as in PyTorch; an in-place op
is replayed on a copy for its new tangent, which is written into the tangent the tensor
has, so its base and views see it. Results keep their ordinary reverse-mode history (the
dispatcher records it as always), and a gradient computed at the level, with history or
without, gets its tangent too (forward-over-reverse, `differentiated`). Custom
`autograd.Function`s give their outputs' tangents with their `jvp` staticmethod
(`function_apply`).

Where the transpose of the backward is not PyTorch's forward formula, PyTorch's is followed:
arguments without a derivative (running statistics) count as having no tangent; a few ops
have their own rule (`_FORMULAS`: embedding's padding row, PyTorch's refusals); an op
without a (double) backward raises PyTorch's forward AD NotImplementedError
(`_as_forward_error`); inference mode makes no tangents.

The mode is the calling thread's, as dispatch modes are.
"""

from __future__ import annotations

import re
import weakref
from typing import Any, NamedTuple

import numpy as np

from .. import _dispatch, _tensor
from .._random import default_generator
from .._tensor import Tensor
from .._thread_state import local as _thread_local
from . import _grad, engine
from . import function as _function
from . import graph as _graph
from ._grad import grad as _autograd_grad
from .grad_mode import _decorate, enable_grad, is_grad_enabled, is_inference_mode_enabled, no_grad

__all__ = ["UnpackedDualTensor", "enter_dual_level", "exit_dual_level", "make_dual",
           "unpack_dual", "dual_level"]

# The open level (PyTorch supports one at a time): -1 when none is open.
_current_level = -1


class UnpackedDualTensor(NamedTuple):
    """What `unpack_dual` returns: the primal (a view without tangent) and the tangent."""

    primal: Tensor
    tangent: Tensor | None


# ---------------------------------------------------------------- the tangents

# id(tensor) -> (a weak reference to it, its tangent or None): None marks a tensor that has
# no tangent even though its base has one (a primal, a detached alias). The entry goes when
# the tensor dies, so an id is never mistaken for a later tensor's.
_TANGENTS: dict[int, tuple] = {}


def _entry(t: Tensor):
    entry = _TANGENTS.get(id(t))
    if entry is not None and entry[0]() is t:
        return entry
    return None


# id(array) -> (a weak reference to the array, its tensors' version counter, tangent): an
# op's output saved for backward comes back from its node as a new tensor over the same
# array (`graph.SavedOutput`), the same value with the same history, after the output
# itself may be gone.
_BY_ARRAY: dict[int, tuple] = {}


def _set_tangent(t: Tensor, tangent: Tensor | None) -> None:
    key = id(t)
    _TANGENTS[key] = (weakref.ref(t, lambda _ref, key=key: _TANGENTS.pop(key, None)), tangent)
    if tangent is not None and t._data is not None:  # (a meta tensor has no array)
        key = id(t._data)
        _BY_ARRAY[key] = (weakref.ref(t._data, lambda _ref, key=key: _BY_ARRAY.pop(key, None)),
                          t._vc, tangent)


class _SavedTangents:
    """The open level's keeper of the tangents of hooked saved tensors
    (`graph.use_saved_tangents`): a new one for each level, so a tangent kept from a
    closed level is never given back."""

    __slots__ = ()

    @staticmethod
    def lookup(t: Tensor):
        return tangent_of(t)

    @staticmethod
    def restore(t: Tensor, tangent: Tensor) -> None:
        _set_tangent(t, _laid_out_as(t, tangent))


def _saved_output_tangent(t: Tensor):
    """The tangent of the output `t` stands for, when `t` is an op's saved output rebuilt
    by its node: over the same array and version counter, with history (a detached alias
    has none, and no tangent)."""
    entry = _BY_ARRAY.get(id(t._data))
    if entry is None or entry[0]() is not t._data or entry[1] is not t._vc or \
            t._grad_fn is None:
        return None
    return entry[2]


def tangent_of(t: Tensor) -> Tensor | None:
    """`t`'s tangent at the open level: its own, or for a view (made before its base got a
    tangent) the same view of the base's tangent."""
    if _thread_local.forward_ad_paused:  # a custom Function's forward sees primals
        return None
    entry = _entry(t)
    if entry is not None:
        return entry[1]
    saved = _saved_output_tangent(t)
    if saved is not None:
        return saved
    base = t._base
    if base is None:
        return None
    entry = _entry(base)
    if entry is None or entry[1] is None:
        return None
    view = _view_of(entry[1], base, t)
    _set_tangent(t, view)
    return view


def _view_of(base_tangent: Tensor, base: Tensor, view: Tensor) -> Tensor:
    """The part of `base_tangent` (laid out as `base`) that `view` is of `base`."""
    if base_tangent.stride() != base.stride():  # re-laid out as the base, once
        base_tangent = _laid_out_as(base, base_tangent)
        _set_tangent(base, base_tangent)
    offset = base_tangent.storage_offset() + view.storage_offset() - base.storage_offset()
    with _Paused(), no_grad():
        return base_tangent.as_strided(view.size(), view.stride(), offset)


def _laid_out_as(primal: Tensor, tangent: Tensor) -> Tensor:
    """`tangent` itself when laid out as `primal` (same strides), else a copy that is (as
    PyTorch stores a tangent of another layout)."""
    if tangent.stride() == primal.stride() or 0 in primal.stride():
        return tangent
    with _Paused():  # (in grad mode the copy keeps the tangent's history)
        out = primal.new_empty_strided(primal.size(), primal.stride(), dtype=tangent.dtype)
        return out.copy_(tangent)


# ---------------------------------------------------------------- the public functions


def enter_dual_level() -> int:
    """Open a forward AD level (only one may be open) and return its number."""
    global _current_level
    if _current_level >= 0:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    _current_level = 0
    _graph.use_saved_tangents(_SavedTangents())
    _MODE.__enter__()
    _function.use_forward_grads(function_apply)
    _grad.use_forward_grads(differentiated)
    engine.forward_accumulated = accumulated
    _tensor.use_tangent_lookup(tangent_of)
    return _current_level


def exit_dual_level(*, level: int | None = None) -> None:
    """Close the open level: every tangent made in it is forgotten."""
    global _current_level
    if level is None:
        level = _current_level
    if level < 0:
        raise RuntimeError("Dual level must be a positive number.")
    if level != _current_level:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that "
                           "was created. This is not supported.")
    _MODE.__exit__()
    _function.use_forward_grads(None)
    _grad.use_forward_grads(None)
    engine.forward_accumulated = None
    _tensor.use_tangent_lookup(None)
    _graph.use_saved_tangents(None)
    _TANGENTS.clear()
    _BY_ARRAY.clear()
    _current_level = level - 1


def make_dual(tensor: Tensor, tangent: Tensor, *, level: int | None = None) -> Tensor:
    """A view of `tensor` carrying `tangent` (as it is when laid out as `tensor`, else a
    copy that is)."""
    if level is None:
        level = _current_level
    if level < 0:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, "
                           "make sure to enter_dual_level() first.")
    if not (tensor.is_floating_point() or tensor.is_complex()):
        raise ValueError(
            f"Expected primal to be floating point or complex, but got: {tensor.dtype}")
    if not (tangent.is_floating_point() or tangent.is_complex()):
        raise ValueError(
            f"Expected tangent to be floating point or complex, but got: {tangent.dtype}")
    if tangent_of(tensor) is not None:
        raise RuntimeError("Making a dual Tensor based on a Tensor that already has a forward "
                           f"gradient at the same level {level} is not supported.")
    if tuple(tensor.shape) != tuple(tangent.shape):
        raise RuntimeError(
            "Trying to set a forward gradient that has a different size than that of the "
            f"original Tensor, this is not supported. Tensor is of size {list(tensor.shape)} "
            f"while the given forward gradient is of size {list(tangent.shape)}.")
    with _Paused():
        dual = tensor.view_as(tensor)
    _set_tangent(dual, _laid_out_as(dual, tangent))
    return dual


def unpack_dual(tensor: Tensor, *, level: int | None = None) -> UnpackedDualTensor:
    """(primal, tangent) of `tensor`: the primal a view of it without tangent, the tangent
    as stored (None when it has none, or no level is open)."""
    if level is None:
        level = _current_level
    if level < 0:
        return UnpackedDualTensor(tensor, None)
    tangent = tangent_of(tensor)
    with _Paused():
        primal = tensor.view_as(tensor)
    view_node = primal._grad_fn
    if view_node is not None:  # PyTorch's alias records its Identity node, not a view's
        node = _Identity()
        node.next_functions = view_node.next_functions
        node._out_meta = view_node._out_meta
        primal._grad_fn = node
    _set_tangent(primal, None)
    return UnpackedDualTensor(primal, tangent)


class _Identity(_graph.Node):
    """The history of an unpacked primal (an alias of the dual tensor): the gradient passes
    through. PyTorch's node has no Python class of its own (`CppFunction`, named
    `torch::autograd::Identity`)."""

    __slots__ = ()

    def apply(self, grads: list) -> list:
        return list(grads)

    def release(self) -> None:
        pass

    def name(self) -> str:
        """PyTorch's C++ name of the node."""
        return "torch::autograd::Identity"


_Identity.__name__ = _Identity.__qualname__ = "CppFunction"


class dual_level:
    """Context manager (and decorator) inside which forward AD runs: the tangents made in
    it are forgotten when it closes."""

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc: Any) -> None:
        exit_dual_level()

    def __call__(self, fn):
        return _decorate(self.__class__, fn)


# ---------------------------------------------------------------- out= and modes


def check_out(op: str | None, resized: bool, inputs: tuple, outs: list, *,
              written: bool) -> None:
    """PyTorch's refusal of a call with `out=` at the open level when one of its tensors
    (among `inputs`, in lists, tuples and dicts too, or `outs`) has a tangent: `op` is the
    ATen op that refuses (None: the result goes into `out` through autograd, no refusal),
    "aten::x" an op without derivative, refused before it runs (not `written` yet), as is
    a function that always resizes its `out` (`resized`) with a tangent; any other op's
    out= kernel refuses once it has written."""
    if op is None:
        return
    if not written and resized and any(tangent_of(o) is not None for o in outs):
        raise RuntimeError("cannot resize variables that has a forward grad")
    if written is op.startswith("aten::"):
        return
    found = any(tangent_of(t) is not None for t in _all_tensors(inputs)) or \
        any(tangent_of(o) is not None for o in outs)
    if not found:
        return
    if written:
        raise NotImplementedError(f"Trying to use forward AD with {op}_out that does not "
                                  "support it because it is an out= function")
    raise NotImplementedError(f"Trying to use forward AD with {op} that does not support it.")


def _all_tensors(value) -> list:
    """The tensors in `value`, looking into tuples, lists and dicts."""
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, dict):
        value = tuple(value.values())
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _all_tensors(v)]
    return []


def check_formulas(outputs: list, inputs: list) -> None:
    """For the transforms that take J t from the whole function's graph (`func.jvp`,
    `linearize`, `jacfwd`): PyTorch's forward AD error for an op it has no forward formula
    for (`OpDef.forward_ad` "unsupported") recorded between `inputs` (the transform's
    leaves, or views of the caller's tensors) and `outputs`, as its op would have raised."""
    leaves = {id(x) for x in inputs if x.grad_fn is None}
    starts = {id(x.grad_fn) for x in inputs if x.grad_fn is not None}
    reaches: dict[int, bool] = {}
    stack = [o.grad_fn for o in outputs if isinstance(o, Tensor) and o.grad_fn is not None]
    expanded: set[int] = set()
    while stack:  # (post-order without recursion: graphs of long loops are deep)
        node = stack[-1]
        key = id(node)
        if key in reaches:
            stack.pop()
            continue
        children = [edge[0] for edge in node.next_functions if edge[0] is not None]
        if key not in expanded:
            expanded.add(key)
            stack.extend(c for c in children if id(c) not in reaches)
            continue
        stack.pop()
        variable = getattr(node, "variable", None)
        found = key in starts or (variable is not None and id(variable) in leaves) or \
            any(reaches.get(id(c), False) for c in children)
        reaches[key] = found
        op = type(node)._op
        if found and op is not None and _FORMULAS.get(op.forward_ad) is _not_implemented:
            _not_implemented(op, (), {})


def only_level_modes() -> bool:
    """Whether the calling thread's dispatch modes are the open level's and observers
    only: none records ops into a trace (the level computes each op's values itself)."""
    return all(m is _MODE or isinstance(m, _dispatch.CallObserver)
               for m in _thread_local.modes)


# ---------------------------------------------------------------- operations


class _TangentMode(_dispatch.DispatchMode):
    """The dispatch mode of an open level: every registry op passes through it, and gives
    its results their tangents. Dispatch records the results' reverse-mode history once the
    handler returns, so the handler computes values only."""

    def __fusegrad_dispatch__(self, op, args):
        # (inference mode computes no forward gradients, as it records no history)
        formula = _FORMULAS.get(op.forward_ad)
        # (an op PyTorch refuses is refused for a tangent on any argument)
        skip = () if formula is _not_implemented else op.nondiff_args
        duals = {} if _thread_local.forward_ad_paused or is_inference_mode_enabled() \
            else _dual_arguments(args, skip)
        if not duals or not op.differentiable:
            with no_grad():
                return _dispatch.call(op, *args)
        if op.inplace and op.metadata_only:  # `transpose_`: the tangent's changes too
            return _view(op, args, duals)
        if op.inplace:
            return _in_place(op, args, duals)
        if op.view:
            return _view(op, args, duals)
        if formula is not None:
            return formula(op, args, duals)
        return _through_stand_ins(op, args, duals)


_MODE = _TangentMode()


def _tensors_of(value) -> list:
    """The tensors among `value` (a tensor, or a tuple or list of values)."""
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [v for v in value if isinstance(v, Tensor)]
    return []


def _arguments(args: tuple, skip=()):
    """The tensors among an op's arguments, directly or in a list (but those at positions
    in `skip`)."""
    for i, a in enumerate(args):
        if i in skip:
            continue
        if isinstance(a, Tensor):
            yield a
        elif isinstance(a, (tuple, list)):
            for b in a:
                if isinstance(b, Tensor):
                    yield b


def _dual_arguments(args: tuple, nondiff=()) -> dict:
    """id(tensor) -> tangent, for the arguments that have one; an op's arguments without a
    derivative (`nondiff`: running statistics, a weight) count as having none, as PyTorch's
    formulas ignore their tangents."""
    found = {}
    for a in _arguments(args, nondiff):
        tangent = tangent_of(a)
        if tangent is not None:
            found[id(a)] = tangent
    return found


def _swapped(args: tuple, swaps: dict) -> tuple:
    """`args` with the tensors in `swaps` (by id) replaced, inside lists too."""
    out = []
    for a in args:
        if isinstance(a, Tensor):
            a = swaps.get(id(a), a)
        elif type(a) is tuple or type(a) is list:
            a = type(a)(swaps.get(id(b), b) if isinstance(b, Tensor) else b for b in a)
        out.append(a)
    return tuple(out)


def _is_float(t: Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def _stand_ins(args: tuple, duals: dict, swaps: dict, connect: bool) -> tuple[list, bool]:
    """Stand-ins in `swaps` for the dual arguments not in it yet: a view of an argument in a
    graph (`connect`: grad mode was on at the call), so that the tangents computed over it
    keep their history as PyTorch's do (reverse-over-forward), else a fresh leaf sharing
    its data. (The (stand-in, tangent) pairs, and whether the tangents keep history.)"""
    pairs = []
    keep = False
    for a in _arguments(args):
        key = id(a)
        if key not in duals:  # a parameter requiring grad: `W t` depends on it
            keep = keep or (connect and a.requires_grad)
        elif key not in swaps:
            tangent = duals[key]
            if connect and a.requires_grad:
                stand_in = a.view_as(a)
                # The primal, as in PyTorch's formulas: a later backward pass through the
                # tangent's history (forward-over-reverse-over-forward) sees no tangent here.
                _set_tangent(stand_in, None)
                keep = True
            else:
                stand_in = a.detach()._requires_grad_unguarded(True)
            keep = keep or (connect and tangent.requires_grad)
            swaps[key] = stand_in
            pairs.append((stand_in, tangent))
    return pairs, keep


def _through_stand_ins(op, args: tuple, duals: dict, factors: tuple = ()):
    """Run `op` once on stand-ins of its dual arguments: the values are the results (the
    stand-ins' history left behind; dispatch records the arguments'), and two reverse
    passes over that one op give the results' tangents. (`factors`: the stand-ins whose
    primal the tangents depend on by PyTorch's formula, though `J t` does not: `_product`.)"""
    swaps: dict = {}
    connect = is_grad_enabled()
    with enable_grad():
        pairs, keep = _stand_ins(args, duals, swaps, connect)
        out = _dispatch.call(op, *_swapped(args, swaps))
    outs = _tensors_of(out)
    with _as_forward_error():
        tangents = _products(outs, pairs, keep)
    if factors and connect:
        tangents = _on_factors(tangents, [swaps[id(a)] for a in factors])
    results = []
    for o, t in zip(outs, tangents):
        plain = o.detach()
        if t is not None:
            _set_tangent(plain, _laid_out_as(plain, t))
        results.append(plain)
    if isinstance(out, Tensor):
        return results[0]
    it = iter(results)
    return type(out)(next(it) if isinstance(v, Tensor) else v for v in out)


def _view(op, args: tuple, duals: dict):
    """A view op: the view of the argument, and the same view of its tangent (so that
    writes through either reach the base's, as PyTorch keeps them)."""
    with no_grad():
        out = _dispatch.call(op, *args)
    tangent = duals.get(id(args[0]))
    if tangent is None:
        return out
    if not is_grad_enabled():  # (in grad mode, the view keeps the tangent's history)
        tangent = tangent.detach()
    tangent_out = _dispatch.call(op, tangent, *args[1:])
    for o, t in zip(_tensors_of(out), _tensors_of(tangent_out)):
        if _is_float(o) and o is not args[0]:
            _set_tangent(o, t)
    return out


def _with_tangent(op, args: tuple, tangent_of_result) -> Tensor:
    """`op` run on `args`, its result given the tangent `tangent_of_result(result)` computes
    (with history in grad mode, for reverse-over-forward, but making no tangents itself)."""
    with no_grad():
        out = _dispatch.call(op, *args)
    with _Paused():
        if is_grad_enabled():
            tangent = tangent_of_result(out)
        else:
            with no_grad():
                tangent = tangent_of_result(out)
    _set_tangent(out, _laid_out_as(out, tangent))
    return out


def _embedding(op, args: tuple, duals: dict):
    """A lookup (`embedding`): linear in its weight, its tangent is the same rows of the weight's
    tangent, the padding row's too (padding_idx and scale_grad_by_freq change only the
    gradient, which the transpose of its backward would carry over)."""
    tangent = duals.get(id(args[0]))
    if tangent is None:
        return _through_stand_ins(op, args, duals)
    return _with_tangent(op, args, lambda _out: _dispatch.call(op, tangent, *args[1:]))


def _batch_norm(op, args: tuple, duals: dict):
    """`native_batch_norm`: in eval mode, running statistics with tangents and an input,
    weight or bias with one are PyTorch's error (it has no formula for the statistics)."""
    training = args[5]
    # (the statistics are arguments without a derivative: not among `duals`)
    if not training and any(a is not None and tangent_of(a) is not None for a in args[3:5]) \
            and any(a is not None and id(a) in duals for a in args[:3]):
        raise RuntimeError("batch_norm is not differentiable wrt running_mean and running_var, "
                           "they cannot have forward grad defined")
    return _through_stand_ins(op, args, duals)


def _product(op, args: tuple, duals: dict):
    """An op linear in each of two factors (`mul`, `mm`, `addmm`'s matrices, a
    convolution's input and weight): PyTorch's formula is `a_t * b_p + a_p * b_t`, a zero
    tangent standing in for a factor without one, so in grad mode the result's tangent
    depends on (and requires grad through) a dual factor's primal that requires grad,
    where `J t` alone (`a_t * b_p`) would not."""
    first = 1 if op.forward_ad == "added_product" else 0
    factors = tuple(a for a in args[first:first + 2]
                    if isinstance(a, Tensor) and id(a) in duals and a.requires_grad)
    return _through_stand_ins(op, args, duals, factors)


def _on_factors(tangents: list, stand_ins: list) -> list:
    """`tangents` plus an exact zero computed from each of `stand_ins` (the sum of none of
    its elements, a view: no inf or nan of theirs leaks in), so that they depend on them."""
    with _Paused(), enable_grad():
        zero = sum((s.narrow(0, 0, 0) if s.dim() else s.reshape(1)[:0]).sum()
                   for s in stand_ins)
        return [t if t is None else t + zero.to(t.dtype) for t in tangents]


def _not_implemented(op, args: tuple, duals: dict):
    """An op PyTorch has no forward formula for, though its backward gives a gradient for
    some arguments (`igamma`: none for `input`, where a transpose would give zeros)."""
    raise NotImplementedError(
        f"Trying to use forward AD with {op.name} that does not support it because it has "
        f"not been implemented yet.{_FILE_AN_ISSUE} or submit a PR adding the implementation "
        "to derivatives.yaml")


# The rules of ops whose forward AD is not the transpose of their backward formula, by the
# registry's `OpDef.forward_ad`.
_FORMULAS = {"lookup": _embedding, "statistics": _batch_norm,
             "unsupported": _not_implemented, "product": _product, "added_product": _product}


def _in_place(op, args: tuple, duals: dict):
    """An in-place op: replayed first on a copy of what it writes (and stand-ins of the
    other dual arguments), which gives the new tangent, then run for real; the tangent is
    written into the one the tensor has (shared with its base and views)."""
    target = args[0]
    if not _is_float(target):
        with no_grad():
            return _dispatch.call(op, *args)
    state = default_generator.get_state()  # the replay draws what the real call will
    swaps: dict = {}
    pairs = []
    connect = is_grad_enabled()
    # In grad mode a target that requires grad is copied with its history: PyTorch's
    # formulas read its primal before the write, so the new tangent may depend on it.
    linked = connect and target.requires_grad
    with enable_grad():  # (the replay has history even under no_grad, as tangents flow)
        old = target.clone() if linked else target.detach().clone()
        if id(target) in duals:
            if not linked:
                old._requires_grad_unguarded(True)
            tangent = duals[id(target)]
            if connect:  # (the new tangent, written into this one, may have saved it)
                tangent = tangent.clone()
            pairs.append((old, tangent))
            swaps[id(target)] = written = old.clone()  # written in place: not a leaf
        else:
            swaps[id(target)] = written = old
        others, keep = _stand_ins(args, duals, swaps, connect)
        _dispatch.call(op, *_swapped(args, swaps))
    with _as_forward_error(in_place=True):
        keep = keep or linked or (connect and any(t.requires_grad for _, t in pairs))
        new = _products([written], pairs + others, keep)[0]
    if connect and op.forward_ad == "product":  # (as `_product`: on the factors' primals)
        factors = [a for a in args[:2] if isinstance(a, Tensor) and id(a) in duals and
                   a.requires_grad]
        if factors and new is not None:
            new = _on_factors([new], [old if a is target else swaps[id(a)]
                                      for a in factors])[0]
    default_generator.set_state(state)
    with no_grad():
        out = _dispatch.call(op, *args)
    _write_tangent(target, new)
    return out


def _write_tangent(m: Tensor, new: Tensor | None) -> None:
    """Give `m`, just written in place, tangent `new` (None: it no longer depends on a
    tangent), in the tangent it has (shared with its views and base) where it has one."""
    existing = tangent_of(m)
    if existing is None and new is None:
        return
    # In grad mode the write is recorded, as PyTorch copies the new tangent into the old
    # one (CopyBackwards; a leaf tangent that requires grad refuses), so the tangent keeps
    # the new one's history (reverse-over-forward).
    with _Paused():
        if existing is not None:
            if new is None:
                with no_grad():
                    existing.zero_()
            else:
                existing.copy_(new)
            return
        base = m._base
        if base is not None and _entry(base) is None:
            with no_grad():
                zeros = _laid_out_as(base, base.new_zeros(base.shape))
            _set_tangent(base, zeros)
            view = _view_of(zeros, base, m)
            view.copy_(new)
            _set_tangent(m, view)
            return
        _set_tangent(m, _laid_out_as(m, new if is_grad_enabled() else new.detach()))


# What the reverse passes raise for an op without a derivative (its backward's, or its own),
# and PyTorch's forward AD names for the ops whose backward is named otherwise.
_NO_DERIVATIVE = re.compile(r"derivative for aten::(\w+) is not implemented")
_NO_FORMULA = re.compile(r"the derivative for '(\w+)' is not implemented\.")
_FORWARD_NAMES = {"zeta": "special_zeta"}
_FILE_AN_ISSUE = ("\nPlease file an issue to PyTorch at https://github.com/pytorch/pytorch/"
                  "issues/new?template=feature-request.yml so that we can prioritize its "
                  "implementation")


class _as_forward_error:
    """Within the block, a reverse pass's "no derivative" error becomes PyTorch's forward AD
    error for the op: NotImplementedError naming the op (an op with a backward but no
    double backward, or a `not_implemented` formula, "has not been implemented yet"; an op
    with no derivative at all, by its aten name, "does not support it")."""

    def __init__(self, in_place: bool = False) -> None:
        self.in_place = in_place

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, error, trace) -> None:
        if error is None:
            return
        message = str(error)
        if isinstance(error, NotImplementedError):  # (a RuntimeError too: tested first)
            found = _NO_FORMULA.fullmatch(message)
            if found is None:
                return
            name = _FORWARD_NAMES.get(found.group(1), found.group(1))
        elif isinstance(error, RuntimeError):
            found = _NO_DERIVATIVE.fullmatch(message)
            if found is None:
                return
            name = found.group(1)
            if not name.endswith("_backward"):
                raise NotImplementedError(
                    f"Trying to use forward AD with aten::{name} that does not support "
                    "it.") from None
            name = name[:-len("_backward")]
        else:
            return
        if self.in_place:
            name, tail = name + "_", "."
        else:
            tail = " or submit a PR adding the implementation to derivatives.yaml"
        raise NotImplementedError(
            f"Trying to use forward AD with {name} that does not support it because it has "
            f"not been implemented yet.{_FILE_AN_ISSUE}{tail}") from None


class _Paused:
    """Within the block, operations in this thread make no tangents."""

    def __enter__(self) -> None:
        self.state = _thread_local.forward_ad_paused
        _thread_local.forward_ad_paused = True

    def __exit__(self, *exc: Any) -> None:
        _thread_local.forward_ad_paused = self.state


def _products(outs: list, pairs: list, keep: bool) -> list:
    """`J t` for each of `outs` over `pairs` (tensor x, its tangent t) from which `outs`
    were computed with history: None for an output that is no differentiable result."""
    used = [o for o in outs if o.requires_grad and (o.is_floating_point() or o.is_complex())]
    if not used or not pairs:
        return [None] * len(outs)
    with _Paused(), enable_grad():
        dummies = [o.new_zeros(o.shape)._requires_grad_unguarded(True) for o in used]
        got = _autograd_grad(used, [x for x, _ in pairs], dummies, create_graph=True,
                             allow_unused=True, materialize_grads=True)
        linear = [(g, t.to(g.dtype) if t.dtype != g.dtype else t)
                  for g, (_, t) in zip(got, pairs) if g.requires_grad]
        if linear:
            tangents = _autograd_grad([g for g, _ in linear], dummies, [t for _, t in linear],
                                      create_graph=keep, allow_unused=True,
                                      materialize_grads=True)
        else:  # no output depends on the tangents' tensors
            tangents = [d.detach() for d in dummies]
    given = [t._data for _, t in linear]
    found = {}
    for o, t in zip(used, tangents):
        t = t if keep else t.detach()
        # The reverse pass may hand a tangent it was given back as the result (`J` the
        # identity): a result must own its memory, or writing one tangent changes another.
        if any(np.may_share_memory(t._data, g) for g in given):
            t = t.clone()
        found[id(o)] = t
    return [found.get(id(o)) for o in outs]


def accumulated(grad: Tensor, g: Tensor) -> None:
    """The engine's accumulation of gradient `g` into a `.grad`, `grad`, done outside
    dispatch (a copy as the first gradient, or an add in place, which has not happened
    yet): `grad` gets the tangent PyTorch's AccumulateGrad gives it, the sum of both
    tangents (a missing one counting as zeros)."""
    new = tangent_of(g)
    if new is None:
        return  # (adding zeros leaves the tangent as it is)
    old = tangent_of(grad)
    with _Paused(), no_grad():
        new = new.to(grad.dtype) if new.dtype != grad.dtype else new
        new = new.clone() if old is None else old + new
    _write_tangent(grad, new)  # (into the tangent `grad` has, which others may hold)


def differentiated(run, args: tuple, create_graph: bool):
    """`run(*args)` (autograd's `grad` or `backward`) at the open level: the pass's own ops
    make tangents as any others, so the gradients get theirs (forward-over-reverse), with
    history (`create_graph`) or without, as PyTorch's engine computes forward gradients
    in its backward formulas whatever the grad mode."""
    return run(*args)


# ---------------------------------------------------------------- custom Functions


def function_apply(cls, args: tuple, kwargs: dict, apply):
    """`cls.apply(*args, **kwargs)` at an open level: `apply` (the ordinary application)
    with the Function's `forward` seeing its inputs' primals, then `cls.jvp` giving the
    outputs' tangents from the inputs' (zeros for a tensor without one, None for other
    arguments), as PyTorch calls it."""
    duals = _dual_arguments((*args, *kwargs.values()))
    if not duals:
        return apply(cls, args, kwargs)
    if kwargs:
        args, kwargs = _function._bound(cls, args, kwargs,
                                        cls.setup_context is not _function.Function.setup_context)
    if cls.jvp is _function.Function.jvp:
        _function.Function.jvp(None)  # PyTorch's error: forward mode needs the jvp
    ctx_box: list = []
    state = _thread_local.forward_ad_paused
    _thread_local.forward_ad_paused = True
    try:
        out = apply(cls, args, kwargs, ctx_box)
        ctx = ctx_box[0]
        inputs = [(duals.get(id(a)) if id(a) in duals else a.new_zeros(a.shape))
                  if isinstance(a, Tensor) else None for a in args]
        ctx._jvp_running = True
        try:
            got = cls.jvp(ctx, *inputs)
        finally:
            ctx._jvp_running = False
    finally:
        _thread_local.forward_ad_paused = state
    outs = out if isinstance(out, tuple) else (out,)
    got = got if isinstance(got, tuple) else (got,)
    if len(got) != len(outs):
        raise RuntimeError(f"jvp function in {cls.__name__} returned an incorrect number of "
                           f"values (expected {len(outs)} but got {len(got)})")
    for o, t in zip(outs, got):
        if isinstance(o, Tensor) and t is not None and (o.is_floating_point()
                                                         or o.is_complex()):
            if o._grad_fn is None and _entry(o) is None and any(o is a for a in args):
                _write_tangent(o, t)  # an input modified in place (mark_dirty)
            else:
                _set_tangent(o, _laid_out_as(o, t))
    return out
