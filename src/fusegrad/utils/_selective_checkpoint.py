"""Selective activation checkpointing: a policy chooses, op by op, which results of a
checkpointed region are kept from the forward and which are recomputed in backward.

`create_selective_checkpoint_contexts(policy)` gives `checkpoint`'s `context_fn` two dispatch
modes sharing one store. During the forward each op runs and the policy is asked about it,
as PyTorch asks: `policy(ctx, op, *args)` with `op` the `ops.aten` overload and
`ctx.op_output` its result (`ctx.is_recompute` is always False); a list of overloads means
"save these, recompute the rest". The store notes, per op and call number, the kept result
(`MUST_SAVE`, `PREFER_SAVE`) or that it is to be recomputed. During the recomputation each op
looks itself up by the same call number: a kept result is handed back instead of running
(once: a second backward through the region is refused), the others run. Dispatch records
either's history as for any result. A kept result modified in place since is refused unless
`allow_cache_entry_mutation`. Views and in-place ops always run again: their results must
alias the recomputed inputs.
"""

from __future__ import annotations

import enum

from .. import _dispatch
from ..autograd.grad_mode import no_grad
from ..ops.overloads import OpOverload, OpOverloadPacket, overload_of


class CheckpointPolicy(enum.Enum):
    """What selective checkpointing does with an op's result."""

    MUST_SAVE = 0
    PREFER_SAVE = 1
    MUST_RECOMPUTE = 2
    PREFER_RECOMPUTE = 3


_SAVED = (CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_SAVE)
_HOME = __name__.rpartition(".")[0] + ".checkpoint"  # where PyTorch's classes live


class SelectiveCheckpointContext:
    """What a policy is told besides the op and its arguments: the op's result, and (always
    False, as in PyTorch, which asks only during the forward) whether this is the
    recomputation."""

    def __init__(self, *, is_recompute: bool, op_output=None) -> None:
        self.is_recompute = is_recompute
        self.op_output = op_output


CheckpointPolicy.__module__ = SelectiveCheckpointContext.__module__ = _HOME

_RECOMPUTE = object()  # a stored entry: the op runs again
_CONSUMED = object()  # a stored entry already handed back
_MISMATCH = ("This can happen if the operations in the checkpointed region are "
             "nondeterministic or depend on global state that changed between forward and "
             "backward.")


def _tensors(out) -> tuple:
    return out if isinstance(out, tuple) else (out,)


class _Kept:
    """A kept result and the version of each of its tensors when kept."""

    def __init__(self, out) -> None:
        self.many = isinstance(out, tuple)
        self.tensors = tuple(t.detach() for t in _tensors(out))
        self.versions = [t._vc[0] for t in self.tensors]

    def value(self, allow_mutation: bool):
        if not allow_mutation and [t._vc[0] for t in self.tensors] != self.versions:
            raise RuntimeError(
                "Tensor cached during selective activation checkpoint has been mutated")
        # New tensors over the kept values: dispatch gives them this op's history.
        fresh = tuple(t.detach() for t in self.tensors)
        return fresh if self.many else fresh[0]


class _Keeping(_dispatch.DispatchMode):
    """The forward's mode: runs every op, and keeps the results the policy saves."""

    def __init__(self, policy_fn, store: dict) -> None:
        self.policy_fn = policy_fn
        self.store = store

    def __fusegrad_dispatch__(self, op, args):
        with no_grad():
            out = _dispatch.call(op, *args)
        policy = self.policy_fn(SelectiveCheckpointContext(is_recompute=False, op_output=out),
                                overload_of(op), *args)
        if isinstance(policy, bool):  # PyTorch's older boolean policies: True saves
            policy = CheckpointPolicy.MUST_SAVE if policy else \
                CheckpointPolicy.PREFER_RECOMPUTE
        keep = policy in _SAVED and not op.view and not op.inplace
        self.store.setdefault(op.name, []).append(_Kept(out) if keep else _RECOMPUTE)
        return out


class _Reusing(_dispatch.DispatchMode):
    """The recomputation's mode: each op finds its entry by its call number."""

    def __init__(self, store: dict, allow_mutation: bool) -> None:
        self.store = store
        self.allow_mutation = allow_mutation
        self.calls: dict = {}

    def __enter__(self):
        self.calls = {}  # (a second backward then finds the entries consumed)
        return super().__enter__()

    def __fusegrad_dispatch__(self, op, args):
        index = self.calls.get(op.name, 0)
        self.calls[op.name] = index + 1
        entries = self.store.get(op.name)
        if entries is None:
            raise RuntimeError(f"{overload_of(op)} encountered during backward but not found "
                               f"in storage. {_MISMATCH}")
        if index >= len(entries):
            raise RuntimeError(f"{overload_of(op)} invocation index {index} encountered "
                               f"during backward but not found in storage. {_MISMATCH}")
        entry = entries[index]
        if entry is _CONSUMED:
            raise RuntimeError(
                "Trying to backward an extra time. You are only allowed to backward once "
                "on any region computed under selective activation checkpoint.")
        if entry is _RECOMPUTE:
            with no_grad():
                return _dispatch.call(op, *args)
        entries[index] = _CONSUMED
        return entry.value(self.allow_mutation)


def create_selective_checkpoint_contexts(policy_fn_or_list, allow_cache_entry_mutation=False):
    """`checkpoint`'s `context_fn` result for selective checkpointing: the forward's and the
    recomputation's contexts, under `policy_fn_or_list` (a function of
    `(ctx, op, *args, **kwargs)` giving a `CheckpointPolicy` or a bool, or a list of ops to
    save)."""
    if isinstance(policy_fn_or_list, list):
        for op in policy_fn_or_list:
            if not isinstance(op, OpOverload):
                extra = ("Please update the OpOverloadPacket to a specific OpOverload.For "
                         "example, if you have `torch.ops.aten.mm`, change it to "
                         "`torch.ops.aten.mm.default`.") if isinstance(op, OpOverloadPacket) \
                    else ""
                raise ValueError(f"Expected op in `op_list` to be an OpOverload but got: {op} "
                                 f"of type {type(op)}. {extra}")
        chosen = tuple(policy_fn_or_list)

        def policy_fn(ctx, op, *args, **kwargs):
            return CheckpointPolicy.MUST_SAVE if op in chosen else \
                CheckpointPolicy.PREFER_RECOMPUTE
    elif callable(policy_fn_or_list):
        policy_fn = policy_fn_or_list
    else:
        raise TypeError("policy_fn_or_list must be either a function or a list of ops.")
    store: dict = {}
    return _Keeping(policy_fn, store), _Reusing(store, allow_cache_entry_mutation)
