"""`torch.utils.module_tracker.ModuleTracker`: which modules are running, forward or backward.

Inside the context, global module hooks keep `parents`, the set of the qualified names
(`Model.block.0`) of the modules whose forward is running, always with "Global" in it. In
backward a module is entered when the gradients of its outputs arrive and left when those of
its inputs are computed (multi-gradient hooks registered during the forward), so a function
called from a module's backward sees that module among the parents.

At the end of a backward pass in which a module was entered, `parents` goes back to
{"Global"}: PyTorch queues an engine callback for this; here the tracker remembers the pass
and resets on the first read after it has finished, which is the same to every reader.
"""

from __future__ import annotations

import logging
import weakref

from .._thread_state import local as _local
from ..autograd.graph import _current_graph_task_id, register_multi_grad_hook
from ..nn.modules._global_hooks import (
    register_module_forward_hook,
    register_module_forward_pre_hook,
)
from ._pytree import tree_flatten
from .hooks import RemovableHandle

__all__ = ["ModuleTracker"]

_log = logging.getLogger(__name__)


def _grad_tensors(tree) -> list:
    from .._tensor import Tensor

    return [a for a in tree_flatten(tree)[0] if isinstance(a, Tensor) and a.requires_grad]


class ModuleTracker:
    """A context manager whose `parents` names the modules now running (their forward, or
    their backward when `is_bw`), by their path from the outermost module called."""

    def __init__(self) -> None:
        self._parents: set[str] = {"Global"}
        self._known_modules: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._seen_modules: weakref.WeakSet = weakref.WeakSet()
        self._hooks: list[RemovableHandle] = []
        self._reset_after: int | None = None  # the backward pass whose end resets parents

    @property
    def parents(self) -> set[str]:
        """The qualified names of the modules running now, and "Global"."""
        task = self._reset_after
        if task is not None and all(t[0] != task for t in _local.graph_tasks):
            self._parents = {"Global"}
            self._reset_after = None
        return self._parents

    @parents.setter
    def parents(self, value: set[str]) -> None:
        self._parents = value

    @property
    def is_bw(self) -> bool:
        """Whether a backward pass is running in this thread."""
        return _current_graph_task_id() != -1

    def _get_mod_name(self, mod) -> str:
        # A module first met is named by its class; its children, recursively, by the path
        # from it, unless they were met (and so named) before.
        if mod not in self._known_modules:
            self._known_modules[mod] = type(mod).__name__
        name = self._known_modules[mod]
        if mod not in self._seen_modules:
            for child_name, child in mod.named_children():
                self._known_modules[child] = f"{name}.{child_name}"
                self._get_mod_name(child)
            self._seen_modules.add(mod)
        return name

    def _enter(self, name: str, in_backward: bool):
        def enter(*args) -> None:
            parents = self.parents
            if in_backward and self._reset_after is None:
                self._reset_after = _current_graph_task_id()
            if name in parents:
                _log.info("module %s entered again during %s without leaving it", name,
                          "backward" if in_backward else "forward")
            parents.add(name)
        return enter

    def _leave(self, name: str, in_backward: bool):
        def leave(*args) -> None:
            parents = self.parents
            if name in parents:
                parents.remove(name)
            else:
                _log.info("module %s left during %s without having been entered", name,
                          "backward" if in_backward else "forward")
        return leave

    def _fw_pre_hook(self, mod, args) -> None:
        name = self._get_mod_name(mod)
        self._enter(name, False)()
        tensors = _grad_tensors(args)
        if tensors:  # the module's backward ends once its inputs' gradients are known
            self._hooks.append(register_multi_grad_hook(tensors, self._leave(name, True)))

    def _fw_post_hook(self, mod, args, output) -> None:
        name = self._get_mod_name(mod)
        self._leave(name, False)()
        tensors = _grad_tensors(output)
        if tensors:  # ... and starts when its outputs' gradients arrive
            self._hooks.append(register_multi_grad_hook(tensors, self._enter(name, True)))

    def __enter__(self) -> ModuleTracker:
        self._fw_pre_handle = register_module_forward_pre_hook(self._fw_pre_hook)
        self._fw_post_handle = register_module_forward_hook(self._fw_post_hook)
        return self

    def __exit__(self, *args) -> None:
        self._fw_pre_handle.remove()
        self._fw_post_handle.remove()
        for handle in self._hooks:
            handle.remove()
        self._hooks.clear()
