"""Utilities: `fusegrad.utils.checkpoint` (activation checkpointing), `fusegrad.utils.data`,
`fusegrad.utils.hooks` (`RemovableHandle`) and `swap_tensors`.

The submodules load on first use (PEP 562): the DataLoader's worker machinery imports
multiprocessing, which `import fusegrad` should not pay for."""

_LAZY_MODULES = frozenset({"_pytree", "checkpoint", "collect_env", "data", "hooks",
                           "module_tracker"})


def __getattr__(name: str):
    """Import `checkpoint`, `data` or `hooks` on first access."""
    if name in _LAZY_MODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The namespace including the submodules not loaded yet."""
    return sorted(set(globals()) | _LAZY_MODULES)


def swap_tensors(t1, t2) -> None:
    """Exchange the contents of two tensor objects in place: data, dtype, autograd state,
    version counter and class, so that every reference to `t1` now sees what `t2` was."""
    from .._tensor import STATE_SLOTS, Tensor

    for name, t in (("t1", t1), ("t2", t2)):
        if not isinstance(t, Tensor):
            raise AttributeError(f"'{type(t).__name__}' object has no attribute '_use_count'")
        import weakref

        if weakref.getweakrefcount(t):
            raise RuntimeError(f"Cannot swap {name} because it has weakref associated with it")
    for t in (t1, t2):
        # A graph recorded before the swap would accumulate into the object that now holds
        # the other tensor: the accumulator (which moves with the contents, and serves them
        # while that graph lives) refuses to run, as PyTorch's does.
        node = t._grad_acc() if t._grad_acc is not None else None
        if node is not None:
            node.register_prehook(_poisoned_accumulator)
    for slot in STATE_SLOTS:
        first, second = getattr(t1, slot), getattr(t2, slot)
        setattr(t1, slot, second)
        setattr(t2, slot, first)
    exchange = getattr(t1, "_exchange_attributes", None) or \
        getattr(t2, "_exchange_attributes", None)
    if exchange is not None:  # a parameter's own attributes move with its contents
        exchange(t1, t2)
    t1.__class__, t2.__class__ = t2.__class__, t1.__class__


def _poisoned_accumulator(grad_outputs):
    raise RuntimeError(
        "Trying to execute AccumulateGrad node that was poisoned by swap_tensors this can "
        "happen when you try to run backward on a tensor that was swapped. For a module m "
        "with `torch.__future__.set_swap_module_params_on_conversion(True)` you should not "
        "change the device or dtype of the module (e.g. `m.cpu()` or `m.half()`) between "
        "running forward and backward. To resolve this, please only change the device/dtype "
        "before running forward (or after both forward and backward).")
