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

What the loop cannot honour: each example is an ordinary tensor, so `func` may branch on
its values, call `.item()` or run ops with data-dependent shapes (PyTorch's batching refuses
them); an output with `out_dims=None` is accepted when every example gave the same values
(PyTorch asks whether it depends on a mapped input).
"""

from __future__ import annotations

import collections
import contextlib
import functools
from _thread import get_ident

from .. import _dispatch, _random
from .._dispatch import CallObserver
from .._functions import stack
from .._tensor import Tensor, tensors_in
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


class _InPlaceRule(CallObserver):
    """In-place ops of one example, as PyTorch's batching treats them. A tensor is batched
    when it is an example's slice of a mapped input or computed from one. Writing a batched
    value into an unbatched tensor (an unmapped input, a tensor from outside) is PyTorch's
    error; an in-place op with no batched argument on an unmapped input happens once in
    PyTorch, so the loop runs it in the first example only (later examples find its result
    already there)."""

    def __init__(self, index: int, slices: list, unmapped: list) -> None:
        self.first = index == 0
        self.batched = {id(t): t for t in slices}  # id -> tensor (kept alive: ids stay unique)
        self.unmapped = {id(t) for t in unmapped if isinstance(t, Tensor)}

    def __fusegrad_observe__(self, op, args):
        tensors = tensors_in(args)
        batched = self.batched
        if op.inplace and tensors and id(args[0]) not in batched:
            if any(id(t) in batched for t in tensors[1:]):
                raise RuntimeError(
                    "vmap: inplace arithmetic(self, *extra_args) is not possible because there "
                    "exists a Tensor `other` in extra_args that has more elements than `self`. "
                    "This happened due to `other` being vmapped over but `self` not being "
                    "vmapped over in a vmap. Please try to use out-of-place operators instead "
                    "of inplace arithmetic. If said operator is being called inside the PyTorch "
                    "framework, please file a bug report instead.")
            base = args[0]._base
            if not self.first and id(args[0] if base is None else base) in self.unmapped:
                return args[0]
        out = _dispatch.call(op, *args)
        if any(id(t) in batched for t in tensors):
            for t in tensors_in(out if isinstance(out, (tuple, list)) else (out,)):
                batched[id(t)] = t
        return out

    def __fusegrad_observe_node__(self, node, grads: list, run):
        """A backward node inside the example (`grad` under `vmap`) runs as it is."""
        return run(node, grads)


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
    return getattr(func, "__name__", repr(func))


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
    if not (isinstance(in_dims, tuple) or
            (isinstance(in_dims, int) and not isinstance(in_dims, bool))):
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
        if not isinstance(dim, int) or isinstance(dim, bool):
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
        norm.append(dim % ndim)
        sizes.append(arg.shape[dim])
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError("vmap: Expected all tensors to have the same size in the mapped "
                         f"dimension, got sizes {sizes} for the mapped dimension")
    return flat, norm, sizes[0], spec


def _stack_outputs(name: str, out_dims, results: list, empty: bool = False):
    """The per-example results stacked along `out_dims` (a pytree prefix of the output);
    with `empty`, `results` is one stand-in example and each mapped output is left with a
    mapped dimension of size 0."""
    flat0, spec = _pytree.tree_flatten(results[0])
    per_leaf = [flat0] + [_pytree.tree_flatten(r)[0] for r in results[1:]]
    dims_spec = _pytree.tree_flatten(out_dims)[1]
    for leaf in _pytree.tree_flatten(out_dims)[0]:
        if leaf is not None and (not isinstance(leaf, int) or isinstance(leaf, bool)):
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
        values = [leaves[k] for leaves in per_leaf]
        if dim is None:
            out.append(_unmapped(name, values))
            continue
        for v in values:
            if not isinstance(v, Tensor):
                raise ValueError(
                    f"vmap({name}, ...): `{name}` must only return Tensors, got type "
                    f"{type(v)}. Did you mean to set out_dims= to None for output?")
        stacked = stack(values, dim)
        out.append(stacked.narrow(dim, 0, 0) if empty else stacked)
    return _pytree.tree_unflatten(out, spec)


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
        results = []
        frame = VmapFrame(size, randomness)
        unmapped = [a for a, d in zip(flat, dims) if d is None]
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
                                  unmapped) as inplace:
                    frame.start(i, example, flat, dims, inplace)
                    results.append(func(*_pytree.tree_unflatten(example, spec), **kwargs))
        return _stack_outputs(name, out_dims, results, empty=size == 0)

    return wrapped


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
