"""`vmap`: `func` mapped over a dimension of its inputs, by running it once per example and
stacking the results (a loop, not a batching transform).

The arguments are checked as PyTorch checks them (`in_dims` and `out_dims` are pytrees that
may be prefixes of the inputs' and outputs' structures). Random draws follow `randomness`:
"error" refuses any draw from a generator while `func` runs, "different" lets each example
draw its own values, and "same" replays each generator from where it stood when the first
example first drew from it, so every example gets the same values.

A custom `autograd.Function` called on a mapped input's example follows PyTorch: its `vmap`
staticmethod gets the whole batch once (its per-example results are slices of what it
returns); with `generate_vmap_rule=True` its forward runs per example; otherwise it is
PyTorch's error. An empty mapped dimension runs `func` once on zeros shaped as one example,
for the shapes and dtypes of the (empty) results.

Each example's ops are watched (`_InPlaceRule`): tensors computed from a mapped input are
batched; unmapped inputs, tensors from outside `func` (told apart from the second example
on: the first example's ops already read them) and what is computed from those only are
unbatched. So PyTorch's errors for data-dependent ops (`nonzero`, a batched boolean mask),
training batch norm with unbatched running statistics, writes of batched values into
unbatched tensors, random ops on batched inputs under "same" and in-place random ops on
unbatched tensors under "different" are raised; an in-place op on an unbatched tensor with
no batched argument happens once (PyTorch runs `func` once); an output unbatched in every
example comes back expanded (stride 0) as PyTorch's, and one that is batched is refused
under `out_dims=None`. Views of a mapped input come back as one view of it (sharing its
memory, as PyTorch's); other results are stacked with the batch dimension outermost in
memory and each example's layout kept, then moved to `out_dims`, as PyTorch's strides are.

The program reading a batched tensor into a Python value (`.item()`, `float()`, `if t:`,
`.tolist()`) gets PyTorch's error (a conversion hook of `_tensor`; fusegrad's own reads pass).

What the loop cannot honour: tensors made in `func` by
factories (`zeros`, `empty_like`) are neither batched nor unbatched to the loop (PyTorch's
`empty_like(x)` is batched, `zeros(3)` is not), so writes into them are allowed and an
output computed from them only is stacked; an error found from the second example on is
raised after the first example ran; the results' grad_fn is the stack's (PyTorch's is the
last batched op's); under "different", each example draws in turn, where PyTorch draws
each random op's values for the whole batch at once (the same values for one uniform draw
per example, others differ); an output with `out_dims=None` that is not known batched is
accepted when every example gave the same values.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import sys
from _thread import get_ident

from .. import _dispatch, _random
from .._dispatch import CallObserver
from .._functions import stack
from .._tensor import CONVERSION_HOOKS, Tensor, tensors_in
from ..autograd.grad_mode import no_grad
from ..utils import _pytree
from ._common import running

_RANDOMNESS = ("error", "different", "same")


def check_randomness(randomness) -> None:
    """`randomness` must be one of PyTorch's three values."""
    if randomness not in _RANDOMNESS:
        raise RuntimeError("Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")


class _Draws:
    """The randomness rule of one vmap call, checked before each draw of this thread."""

    def __init__(self, randomness: str) -> None:
        self.randomness = randomness
        self.thread = get_ident()
        self.states: dict = {}  # generator -> its state before the first example's draw

    def __call__(self, generator) -> None:
        if get_ident() != self.thread:
            return
        if self.randomness == "error":
            raise RuntimeError(
                "vmap: called random operation while in randomness error mode. Please either "
                "use the 'same' or 'different' randomness flags on vmap or perform the "
                "randomness operation out of vmap")
        if self.randomness == "same" and generator not in self.states:
            self.states[generator] = generator._snapshot()

    def next_example(self) -> None:
        """Put each generator drawn from back where the first example found it ("same")."""
        for generator, state in self.states.items():
            generator._restore(state)


_INPLACE_ERROR = (
    "vmap: inplace arithmetic(self, *extra_args) is not possible because there exists a Tensor "
    "`other` in extra_args that has more elements than `self`. This happened due to `other` "
    "being vmapped over but `self` not being vmapped over in a vmap. Please try to use "
    "out-of-place operators instead of inplace arithmetic. If said operator is being called "
    "inside the PyTorch framework, please file a bug report instead.")
_BATCH_NORM_ERROR = (
    "Batch norm got a batched tensor as input while the running_mean or running_var, which "
    "will be updated in place, were not batched.\nIf you are using a module and do not need "
    "eval mode, please set `track_running_stats` to be False.If you are using a prebuilt module "
    "and do not need eval mode, please see the functorch website for resources on how to patch "
    "your module to work with vmap")


_ITEM_ERROR = (
    "vmap: It looks like you're calling .item() on a Tensor. We don't support vmap over "
    "calling .item() on a Tensor, please try to rewrite what you're doing with other "
    "operations. If error is occurring somewhere inside PyTorch internals, please file a bug "
    "report.")
_CONTROL_FLOW_ERROR = (
    "vmap: It looks like you're attempting to use a Tensor in some data-dependent control "
    "flow. We don't support that yet, please file an issue at "
    "https://github.com/pytorch/pytorch/issues .")
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _refuse_batched_read(kind: str, tensor) -> None:
    """A conversion hook (`_tensor.CONVERSION_HOOKS`) while vmap runs: the program reading a
    batched tensor into a Python value (`.item()`, `float()`, `if t:`, `.tolist()`) or taking
    its `.data` is PyTorch's error; fusegrad's own reads, and unbatched tensors, pass."""
    rule = _dispatch.observer()
    if not isinstance(rule, _InPlaceRule) or id(tensor) not in rule.batched:
        return
    caller = sys._getframe(3)  # this hook <- _converted <- the Tensor method <- its caller
    if os.path.abspath(caller.f_code.co_filename).startswith(_PACKAGE):
        return
    if kind == "data":
        raise RuntimeError("accessing `data` under vmap transform is not allowed")
    if kind == "boolean":
        raise RuntimeError(_CONTROL_FLOW_ERROR)
    if kind in ("list", "NumPy array"):
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")
    raise RuntimeError(_ITEM_ERROR)


class _InPlaceRule(CallObserver):
    """What PyTorch's batching would refuse or do once, seen op by op in one example. A
    tensor is batched when it is an example's slice of a mapped input or computed from one
    (or drawn with randomness="different", or a gradient computed in the example); it is
    known unbatched when it is an unmapped input, from outside `func` (read by the first
    example's ops already: known from the second example on) or computed, by an op this rule
    saw, from known unbatched tensors only (a result PyTorch computes once and expands).
    Tensors made by factories that are not ops are unknown: the loop cannot tell `zeros(3)`
    (unbatched in PyTorch) from `empty_like(x)` (batched). Writing a batched value into a
    known unbatched tensor is PyTorch's error; an in-place op with no batched argument on a
    tensor from outside (an unmapped input included) happens once in PyTorch, so the loop
    runs it in the first example only (later examples find its result already there). Ops
    whose result's shape depends on a batched tensor's values, and training batch norm
    updating unbatched running statistics, are PyTorch's errors."""

    def __init__(self, index: int, slices: list, unmapped: list,
                 randomness: str = "error", seen: dict | None = None) -> None:
        self.first = index == 0
        # The tensors the first example's ops read or made (kept alive, so ids stay unique):
        # one a later example reads is from outside the function (PyTorch runs it once).
        self.seen = {} if seen is None else seen
        self.batched = {id(t): t for t in slices}  # id -> tensor (kept alive: ids stay unique)
        self.unmapped = {id(t) for t in unmapped if isinstance(t, Tensor)}
        self.unbatched = {id(t): t for t in unmapped if isinstance(t, Tensor)}
        self.different = randomness == "different"
        self.same = randomness == "same"

    def __fusegrad_observe__(self, op, args):
        tensors = tensors_in(args)
        batched = self.batched
        any_batched = any(id(t) in batched for t in tensors)
        if any_batched:
            _check_batchable(op, args, batched)
            if op.random and self.same and any(
                    id(t) in batched for t in (tensors[1:] if op.inplace else tensors)):
                raise RuntimeError("Vmap does not currently support same randomness with a "
                                   "batched tensor input. Please file an issue with functorch")
        if op.inplace and tensors and id(args[0]) not in batched:
            outside = not self.first and self._outside(args[0])
            # (Only into a tensor known unbatched: one made by a factory that is not an op,
            # `empty_like(x)` or `x.new_zeros(...)`, may be batched in PyTorch.)
            if (outside or id(args[0]) in self.unbatched) and \
                    any(id(t) in batched for t in tensors[1:]):
                raise RuntimeError(_INPLACE_ERROR)
            if outside:
                if op.random and self.different:
                    raise RuntimeError(
                        "vmap: Cannot ask for different inplace randomness on an unbatched "
                        "tensor. This will appear like same randomness. If this is necessary "
                        "for your usage, please file an issue with functorch.")
                return args[0]  # (done once, by the first example)
        out = _dispatch.call(op, *args)
        outs = tensors_in(out if isinstance(out, (tuple, list)) else (out,))
        if self.first:
            for t in tensors + outs:
                self.seen[id(t)] = t
        if any_batched or (op.random and self.different):
            for t in outs:
                batched[id(t)] = t
                self.unbatched.pop(id(t), None)
        elif all(id(t) in self.unbatched or (not self.first and self._outside(t))
                 for t in tensors):
            for t in outs:
                if id(t) not in batched:
                    self.unbatched[id(t)] = t
        return out

    def _outside(self, t: Tensor) -> bool:
        """Whether `t` (or the tensor it views) is from outside the function: an unmapped
        input, or a tensor the first example's ops already read or made."""
        seen = self.seen
        base = t._base
        return any(x is not None and (id(x) in self.unmapped or seen.get(id(x)) is x)
                   for x in (t, base))

    def __fusegrad_observe_node__(self, node, grads: list, run):
        """A backward node inside the example (`grad` under `vmap`) runs as it is; its
        gradients count as batched, as PyTorch's are (their cotangent is batched)."""
        got = run(node, grads)
        if isinstance(got, (tuple, list)):
            for t in tensors_in(got):
                self.batched[id(t)] = t
                self.unbatched.pop(id(t), None)
        return got

    def kinds(self, tree) -> list:
        """For each leaf of `tree`: True (batched), False (known unbatched) or None."""
        return [True if id(x) in self.batched else False if id(x) in self.unbatched else None
                for x in _pytree.tree_flatten(tree)[0]]


def _check_batchable(op, args: tuple, batched: dict) -> None:
    """PyTorch's errors for an op, some of whose arguments are batched, that its batching
    cannot run: a result whose shape depends on a batched tensor's values (a data-dependent
    op, indexing with a batched boolean mask) and training batch norm, which would write the
    batch's statistics into unbatched running statistics."""
    if op.data_dependent:
        raise RuntimeError(
            "vmap: We do not support batching operators that can output dynamic shape. "
            f"Attempted to vmap over aten::{op.name.split('.')[0]}. Please file an issue at "
            "https://github.com/pytorch/pytorch/issues if you need this feature.")
    if not op.list_arg:
        for a in args:
            if isinstance(a, (list, tuple)) and any(
                    isinstance(t, Tensor) and t.dtype.name == "bool" and id(t) in batched
                    for t in a):
                raise RuntimeError(
                    "vmap: We do not support batching operators that can support dynamic "
                    "shape. Attempting to batch over indexing with a boolean mask.")
    # Batch norm's running statistics are its arguments without a derivative (as forward
    # AD reads them); in training mode (argument 5) the op writes them.
    if op.forward_ad == "statistics" and len(args) > 5 and args[5] and \
            id(args[0]) in batched and any(
                isinstance(args[k], Tensor) and id(args[k]) not in batched
                for k in op.nondiff_args):
        raise RuntimeError(_BATCH_NORM_ERROR)


@contextlib.contextmanager
def random_guard(randomness: str):
    """Apply `randomness` to the draws made inside the block; yields the rule."""
    rule = _Draws(randomness)
    _random.DRAW_CHECKS.append(rule)
    try:
        yield rule
    finally:
        _random.DRAW_CHECKS.remove(rule)


def _name(func) -> str:
    """How vmap's messages name `func` (a partial by the function it wraps)."""
    name = getattr(func, "__name__", None)
    if name is not None:
        return name
    if isinstance(func, functools.partial):
        return f"functools.partial({_name(func.func)}, ...)"
    return repr(func)


def _check_chunk_size(chunk_size) -> None:
    if chunk_size is not None and not isinstance(chunk_size, int):
        raise TypeError(f"can't multiply sequence by non-int of type "
                        f"'{type(chunk_size).__name__}'")
    if chunk_size is not None and chunk_size <= 0:
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got "
                         f"{chunk_size})")


def _mapped_inputs(name: str, in_dims, args: tuple) -> tuple:
    """(flattened args, their in_dims, batch size, the args' spec), checked as PyTorch
    checks them."""
    where = f"vmap({name}, in_dims={in_dims}, ...)(<inputs>)"
    if not isinstance(in_dims, (tuple, int)):  # (a bool is an int to PyTorch's check)
        raise ValueError(f"{where}: expected `in_dims` to be int or a (potentially nested) "
                         f"tuple matching the structure of inputs, got: {type(in_dims)}.")
    if not args:
        raise ValueError(f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add "
                         "inputs, or you are trying to vmap over a function with no inputs. "
                         "The latter is unsupported.")
    flat, spec = _pytree.tree_flatten(args)
    dims_spec = _pytree.tree_flatten(in_dims)[1]
    dims = _broadcast_prefix(in_dims, args, dims_spec, spec)
    if dims is None:
        raise ValueError(f"{where}: in_dims is not compatible with the structure of `inputs`. "
                         f"in_dims has structure {dims_spec!r} but inputs has structure "
                         f"{spec!r}.")
    sizes = []
    norm = []
    for arg, dim in zip(flat, dims):
        if dim is None:
            norm.append(None)
            continue
        if not isinstance(dim, int):
            raise ValueError(f"{where}: Got in_dim={dim} for an input but in_dim must be "
                             "either an integer dimension or None.")
        if not isinstance(arg, Tensor):
            raise ValueError(f"{where}: Got in_dim={dim} for an input but the input is of "
                             f"type {type(arg)}. We cannot vmap over non-Tensor arguments, "
                             "please use None as the respective in_dim")
        ndim = arg.dim()
        if not -ndim <= dim < ndim:
            raise ValueError(f"{where}: Got in_dim={dim} for some input, but that input is a "
                             f"Tensor of dimensionality {ndim} so expected in_dim to satisfy "
                             f"-{ndim} <= in_dim < {ndim}.")
        if isinstance(dim, bool):  # in range, then refused by the size lookup, as PyTorch's
            raise TypeError("size(): argument 'dim' (position 1) must be int, not bool")
        norm.append(dim % ndim)
        sizes.append(arg.shape[dim])
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError("vmap: Expected all tensors to have the same size in the mapped "
                         f"dimension, got sizes {sizes} for the mapped dimension")
    return flat, norm, sizes[0], spec


def _stack_outputs(name: str, out_dims, results: list, empty: bool = False,
                   kinds: list | None = None, mapped: list = ()):
    """The per-example results stacked along `out_dims` (a pytree prefix of the output);
    with `empty`, `results` is one stand-in example and each mapped output is left with a
    mapped dimension of size 0. `kinds` (per example, per output leaf: batched, known
    unbatched or unknown, `_InPlaceRule.kinds`): an output known unbatched in every example,
    with the same values in each, is PyTorch's unbatched result, computed once and expanded
    along the mapped dimension (a batched one is PyTorch's error under `out_dims=None`).
    Views of a `mapped` input (pairs of the input and its mapped dim) come back as one view
    of it (`_view_of_input`)."""
    flat0, spec = _pytree.tree_flatten(results[0])
    per_leaf = [flat0] + [_pytree.tree_flatten(r)[0] for r in results[1:]]
    dims_spec = _pytree.tree_flatten(out_dims)[1]
    for leaf in _pytree.tree_flatten(out_dims)[0]:
        if leaf is not None and not isinstance(leaf, int):  # (a bool counts as an int)
            raise ValueError(
                f"vmap({name}, ..., out_dims={out_dims}): `out_dims` must be an int, None or a "
                "python collection of ints representing where in the outputs the vmapped "
                "dimension should appear.")
    dims = _broadcast_prefix(out_dims, results[0], dims_spec, spec)
    if dims is None:
        raise ValueError(
            f"vmap({name}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible "
            f"with the structure of `outputs`. out_dims has structure {dims_spec!r} but "
            f"outputs has structure {spec!r}.")
    out = []
    for k, dim in enumerate(dims):
        if isinstance(dim, bool):
            dim = int(dim)
        values = [leaves[k] for leaves in per_leaf]
        leaf_kinds = [ks[k] for ks in kinds] if kinds is not None and not empty else [None]
        if dim is None:
            if any(kind is True for kind in leaf_kinds):
                raise ValueError(f"vmap({name}, ...): `{name}` can not return a "
                                 "BatchedTensor when out_dim is None")
            out.append(_unmapped(name, values))
            continue
        for v in values:
            if not isinstance(v, Tensor):
                raise ValueError(
                    f"vmap({name}, ...): `{name}` must only return Tensors, got type "
                    f"{type(v)}. Did you mean to set out_dims= to None for output?")
        # (The first example cannot tell a tensor from outside `func`: the later ones can.)
        if leaf_kinds[0] is not True and all(k is False for k in leaf_kinds[1:] or leaf_kinds) \
                and _same_values(values):
            out.append(_expanded(values[0], dim, len(values)))
            continue
        # Stacked first, then moved to `dim`, as PyTorch moves its batch dimension (its
        # results' strides).
        stacked = None if empty else _view_of_input(values, mapped)
        if stacked is None:
            stacked = _stack_in_layout(values)
        if dim != 0 and dim != -stacked.dim():
            stacked = stacked.movedim(0, dim)
        out.append(stacked.narrow(dim, 0, 0) if empty else stacked)
    return _pytree.tree_unflatten(out, spec)


def _view_of_input(values: list, mapped) -> Tensor | None:
    """The examples' results as one view of a mapped input, batch dimension first, when each
    is a view of its memory laid out alike at evenly spaced offsets (`x[1:]`, `x.t()`,
    `x` itself): PyTorch hands those back as views of the input (the input itself for `x`),
    sharing its memory. Results with history only when they are the input itself (a view of
    a graph would need the view ops' nodes); None otherwise."""
    first = values[0]
    if not all(isinstance(v, Tensor) for v in values):
        return None
    shape, strides = tuple(first.shape), first.stride()
    if any(tuple(v.shape) != shape or v.stride() != strides for v in values[1:]):
        return None
    ptr = first.untyped_storage().data_ptr()
    for a, d in mapped:
        if not isinstance(a, Tensor) or a.dtype != first.dtype or \
                a.untyped_storage().data_ptr() != ptr:
            continue
        if any(v.untyped_storage().data_ptr() != ptr for v in values[1:]):
            return None
        offsets = [v.storage_offset() for v in values]
        step = offsets[1] - offsets[0] if len(values) > 1 else a.stride(d)
        if any(o - offsets[0] != i * step for i, o in enumerate(offsets)):
            return None
        size, stride = (len(values),) + shape, (step,) + strides
        if tuple(a.shape) == size and a.stride() == stride and \
                a.storage_offset() == offsets[0]:
            return a
        if any(v.requires_grad for v in values):
            return None
        return a.detach().as_strided(size, stride, offsets[0])
    return None


def _stack_in_layout(values: list) -> Tensor:
    """`values` stacked along a new first dimension, each keeping the memory order of its
    dims when all are laid out alike (a transposed Jacobian, `x.t()`): PyTorch's batch
    dimension is outermost in memory and each example's layout is the op's, so its results'
    strides are these."""
    first = values[0]
    order = _dense_order(first)
    if order is None or any(v.stride() != first.stride() or v.shape != first.shape
                            for v in values[1:]):
        return stack(values, 0)
    stacked = stack([v.permute(order) for v in values], 0)
    inverse = [0] * len(order)
    for i, d in enumerate(order):
        inverse[d] = i
    return stacked.permute([0] + [1 + inverse[d] for d in range(len(order))])


def _dense_order(t: Tensor) -> list | None:
    """The dims of `t` outermost in memory first, when `t` is dense (no gaps, no overlap)
    but not contiguous; None otherwise."""
    if t.is_contiguous():
        return None
    shape, strides = tuple(t.shape), t.stride()
    order = sorted(range(t.dim()), key=lambda d: (-strides[d], d))
    expected = 1
    for d in reversed(order):
        if shape[d] != 1 and strides[d] != expected:
            return None
        expected *= shape[d]
    return order


def _same_values(values: list) -> bool:
    """Whether every tensor of `values` has the first one's shape, dtype and values."""
    first = values[0]
    with no_grad():
        return all(v.shape == first.shape and v.dtype == first.dtype and
                   bool((v == first).all()) for v in values[1:])


def _expanded(value: Tensor, dim: int, size: int) -> Tensor:
    """An unbatched result as PyTorch hands it back: `value` expanded (not copied) to `size`
    along a new dimension `dim`."""
    ndim = value.dim()
    if dim < 0:
        dim += ndim + 1
    if not 0 <= dim <= ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim - 1}, "
                         f"{ndim}], but got {dim})")
    if dim == 0:
        return value.expand(size, *value.shape)
    shape = list(value.shape)
    shape.insert(dim, size)
    return value.unsqueeze(dim).expand(shape)


def _unmapped(name: str, values: list):
    """An output with `out_dims=None`: the same for every example, returned once."""
    first = values[0]
    if isinstance(first, Tensor):
        with no_grad():
            same = all(isinstance(v, Tensor) and v.shape == first.shape and
                       bool((v == first).all()) for v in values[1:])
        if not same:
            raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor "
                             "when out_dim is None")
    return first


def vmap(func, in_dims=0, out_dims=0, randomness: str = "error", *, chunk_size=None):
    """`func` mapped over dimension `in_dims` of its inputs (an int, or a pytree prefix of
    the positional arguments with None for an argument not mapped), the results stacked along
    `out_dims`. Keyword arguments are passed to every call unmapped. `randomness`: "error",
    "different" or "same" (see the module docstring); `chunk_size` is accepted and checked
    (the examples run one at a time)."""
    check_randomness(randomness)
    _check_chunk_size(chunk_size)

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        name = _name(func)
        flat, dims, size, spec = _mapped_inputs(name, in_dims, args)
        frame = VmapFrame(size, randomness)
        unmapped = [a for a, d in zip(flat, dims) if d is None]
        CONVERSION_HOOKS.append(_refuse_batched_read)
        try:
            results, kinds = _run_examples(func, kwargs, flat, dims, size, spec, randomness,
                                           frame, unmapped)
        finally:
            CONVERSION_HOOKS.remove(_refuse_batched_read)
        mapped = [(a, d) for a, d in zip(flat, dims) if d is not None]
        return _stack_outputs(name, out_dims, results, empty=size == 0, kinds=kinds,
                              mapped=mapped)

    return wrapped


def _run_examples(func, kwargs, flat, dims, size, spec, randomness, frame, unmapped):
    """(results, kinds): `func` run on each example of the mapped inputs (`flat` with
    `dims`, `size` of them; `spec` their pytree), each result with its tensors' kinds."""
    results, kinds, seen = [], [], {}
    with random_guard(randomness) as rule, running(frame):
        for i in range(max(size, 1)):
            if i:
                rule.next_example()
            if size:
                example = [a if d is None else a.select(d, i) for a, d in zip(flat, dims)]
            else:
                # No example to run: zeros shaped as one give the results' shapes.
                example = [a if d is None else _stand_in(a, d) for a, d in zip(flat, dims)]
            with _InPlaceRule(i, [e for e, d in zip(example, dims) if d is not None],
                              unmapped, randomness, seen) as inplace:
                frame.start(i, example, flat, dims, inplace)
                out = func(*_pytree.tree_unflatten(example, spec), **kwargs)
                results.append(out)
                kinds.append(inplace.kinds(out))
    return results, kinds


def _stand_in(a: Tensor, dim: int) -> Tensor:
    shape = list(a.shape)
    del shape[dim]
    return a.new_zeros(shape)


VmapInfo = collections.namedtuple("VmapInfo", ["batch_size", "randomness"])
VmapInfo.__module__ = "torch.autograd.function"


class VmapFrame:
    """One running vmap call, as a custom Function's `vmap` rule needs it: the example being
    run, which of its tensors are a mapped input's example (and of which input, along which
    dimension), and the rule's results already computed for the whole batch."""

    def __init__(self, size: int, randomness: str) -> None:
        self.size = size
        self.randomness = randomness
        self.index = 0
        self.sources: dict = {}  # id(example tensor) -> (example tensor, input, dim)
        self.inplace = None
        self.calls = 0  # rule calls so far in this example
        self.cache: dict = {}  # call ordinal -> (arguments, (outputs, out_dims))

    def start(self, index: int, example: list, flat: list, dims: list, inplace) -> None:
        """Example `index` starts running (a stand-in example has no batch behind it)."""
        self.index = index
        self.calls = 0
        self.inplace = inplace
        self.sources = {} if not self.size else {
            id(e): (e, a, d) for e, a, d in zip(example, flat, dims) if d is not None}

    def batched(self, t) -> bool:
        """Whether tensor `t` is (computed from) a mapped input's example."""
        return self.inplace is not None and id(t) in self.inplace.batched

    def apply_rule(self, cls, args: tuple):
        """The results of `cls.vmap` for this example, or NotImplemented when no argument is
        batched (the Function then runs as it is)."""
        full, in_dims, whole = [], [], True
        for a in args:
            src = self.sources.get(id(a)) if isinstance(a, Tensor) else None
            if src is not None and src[0] is a:
                full.append(src[1])
                in_dims.append(src[2])
            elif isinstance(a, Tensor) and self.batched(a):
                # Computed inside the example: its batch is not at hand, so the rule sees
                # this example alone, as a batch of one.
                whole = False
                full.append(a.unsqueeze(0))
                in_dims.append(0)
            else:
                full.append(a)
                in_dims.append(None)
        if all(d is None for d in in_dims):
            return NotImplemented
        k = self.calls
        self.calls += 1
        if whole:
            hit = self.cache.get(k)
            if hit is not None and len(hit[0]) == len(full) and all(
                    x is y for x, y in zip(hit[0], full)):
                outs, out_dims = hit[1]
            else:
                outs, out_dims = _run_rule(cls, VmapInfo(self.size, self.randomness),
                                           in_dims, full)
                self.cache[k] = (full, (outs, out_dims))
            index = self.index
        else:
            outs, out_dims = _run_rule(cls, VmapInfo(1, self.randomness), in_dims, full)
            index = 0
        picked = [o if d is None or not isinstance(o, Tensor) else o.select(d, index)
                  for o, d in zip(outs, out_dims)]
        for p, d in zip(picked, out_dims):
            if d is not None and self.inplace is not None:
                self.inplace.batched[id(p)] = p  # an example's value from here on
        return picked[0] if not isinstance(outs, _Many) else tuple(picked)


class _Many(tuple):
    """A rule's outputs when it returned a tuple of them (not one tensor)."""


def _run_rule(cls, info, in_dims: list, args: list):
    """(outputs, out_dims) of `cls.vmap`, both as sequences (outputs as `_Many` when the rule
    returned a tuple)."""
    got = cls.vmap(info, tuple(in_dims), *args)
    if not (isinstance(got, tuple) and len(got) == 2):
        raise RuntimeError(f"{cls.__name__}.vmap must return a tuple of (outputs, out_dims)")
    outs, out_dims = got
    many = isinstance(outs, tuple)
    outs = _Many(outs) if many else (outs,)
    if isinstance(out_dims, tuple):
        out_dims = tuple(out_dims)
    else:
        out_dims = (out_dims,) * len(outs)
    if len(out_dims) != len(outs):
        raise RuntimeError(f"{cls.__name__}.vmap returned {len(outs)} outputs but "
                           f"{len(out_dims)} out_dims")
    return outs, out_dims



def _broadcast_prefix(prefix, tree, prefix_spec, spec) -> list | None:
    """The leaves of `prefix` repeated over the leaves of `tree` where `prefix`'s structure
    is a prefix of `tree`'s (a leaf of `prefix` covers a whole subtree, as `in_dims` and
    `out_dims` do); None when it is not a prefix."""
    out: list = []
    if not _broadcast(prefix_spec, spec, iter(_pytree.tree_leaves(prefix)), out):
        return None
    return out


def _broadcast(pspec, spec, leaves, out: list) -> bool:
    if pspec.is_leaf():
        out.extend([next(leaves)] * spec.num_leaves)
        return True
    if pspec.type != spec.type or pspec.context != spec.context or \
            pspec.num_children != spec.num_children:
        return False
    return all(_broadcast(p, s, leaves, out) for p, s in zip(pspec.children(), spec.children()))
