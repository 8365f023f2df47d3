"""`autograd.graph.allow_mutation_on_saved_tensors`: inside it, a tensor saved for backward
may be changed in place; the saved value is copied just before the first write, and
backward reads the copy.

Two pieces work together: saved-tensor hooks that pack each saved tensor as a handle
(remembering the tensor under its storage and version), and a dispatch mode that, before an
in-place op writes its first argument, clones every saved tensor still held under that
storage and version. Backward outside the context (after it closed) is refused.
"""

from __future__ import annotations

import contextlib
import weakref
from collections import defaultdict
from collections.abc import Iterator

from .. import _dispatch
from .grad_mode import no_grad
from .graph import saved_tensors_hooks

_enabled = [False]
_OUTSIDE = ("Trying to backward outside of the 'allow_mutation_on_saved_tensors' context"
            "in which the graph was originally recorded.")


class _Handle:
    """What a saved tensor is packed as: the key of its original (or its clone)."""


def _tensor_key(t) -> tuple:
    return (id(t), t.data_ptr(), t._version)


def _storage_key(t) -> tuple:
    return (t.data_ptr(), t._version)


class _AllowMutationOnSavedContext:
    """The saved tensors of one context: originals, clones made before writes, and the
    handles under each storage and version."""

    def __init__(self) -> None:
        self.cloned: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.original: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.tid_to_weakhandle: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self.sid_to_tid: defaultdict = defaultdict(set)

    def clear(self) -> None:
        """Forget every saved tensor."""
        self.cloned.clear()
        self.original.clear()
        self.tid_to_weakhandle.clear()
        self.sid_to_tid.clear()

    def pack(self, t) -> _Handle:
        tid = _tensor_key(t)
        self.sid_to_tid[_storage_key(t)].add(tid)
        handle = self.tid_to_weakhandle.get(tid)
        if handle is None:
            handle = _Handle()
            self.tid_to_weakhandle[tid] = handle
            self.original[handle] = t
        return handle

    def unpack(self, handle: _Handle):
        if not _enabled[0]:
            raise AssertionError(_OUTSIDE)
        if handle in self.cloned:
            return self.cloned[handle]
        if handle not in self.original:
            raise AssertionError(_OUTSIDE)
        return self.original[handle]

    def before_write(self, t) -> None:
        """Copy the saved tensors that share `t`'s storage and version before `t` changes."""
        for tid in self.sid_to_tid.get(_storage_key(t), ()):
            handle = self.tid_to_weakhandle.get(tid)
            if handle is None or handle in self.cloned:
                continue
            self.cloned[handle] = self.original.pop(handle).clone()


class _CloneArgBeforeMutate(_dispatch.DispatchMode):
    """Runs each op as usual, first copying what an in-place op is about to overwrite."""

    def __init__(self, ctx: _AllowMutationOnSavedContext) -> None:
        self.ctx = ctx

    def __fusegrad_dispatch__(self, op, args):
        if op.inplace:
            self.ctx.before_write(args[0])
        # Dispatch records the op's history once this returns.
        with no_grad():
            return _dispatch.call(op, *args)


@contextlib.contextmanager
def allow_mutation_on_saved_tensors() -> Iterator[_AllowMutationOnSavedContext]:
    """Let tensors saved for backward be modified in place inside this context."""
    ctx = _AllowMutationOnSavedContext()
    with saved_tensors_hooks(ctx.pack, ctx.unpack), _CloneArgBeforeMutate(ctx):
        try:
            if _enabled[0]:
                raise RuntimeError("allow_mutation_on_saved_tensors contexts cannot be nested")
            _enabled[0] = True
            yield ctx
        finally:
            ctx.clear()
            _enabled[0] = False
