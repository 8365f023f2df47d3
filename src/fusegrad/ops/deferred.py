"""Op modules loaded on first use: the layers' kernels, factorizations, FFT, sparse ops.

`import fusegrad` executes the op modules every program needs (arithmetic, reductions,
views, indexing, matmul, ...). The others (convolution, pooling, losses, normalisation,
attention, solvers and factorizations, FFT, sparse twins, special functions) are bound in
`fusegrad.ops` as `DeferredModule`s: the module object is in `sys.modules` and importable as
usual (`from fusegrad.ops import conv`), and it executes (registering its ops) when a name
it defines is first looked up, which is when its first op runs. `load_all` executes every
module not executed yet: the registry calls it before answering for its whole content, so a
layer that walks the registry (capture's flags, ONNX, the oracle tests) always sees every op;
asked for one op it does not hold, it executes them in turn until one has registered it
(`load_until`).
"""

from __future__ import annotations

import _thread
import os
import sys
import types

# The import system's own spec and module makers (what `importlib.util` re-exports: that
# module and its `importlib._abc` cost a fifth of a millisecond to import, and `import
# fusegrad` needs nothing else of them).
from importlib._bootstrap import module_from_spec as _module_from_spec
from importlib._bootstrap_external import spec_from_file_location as _spec_from_file_location

_PENDING: list = []  # the DeferredModules not executed yet, in the order they were deferred
_AFTER: list = []  # what runs after each module's body (`after_execute`)
_RUNNING: set = set()  # those whose body is running now
# One lock for every deferred module: executing one can reach another (solvers needs
# factorizations), and a second thread asking for a name waits for the module to be complete.
_LOCK = _thread.RLock()


class DeferredModule(types.ModuleType):
    """A module whose body runs when a name it defines is first looked up."""

    def __getattr__(self, name: str):
        # Only names the module body would define start it: the import system and tools
        # probing modules (`__path__`, `__warningregistry__`) see an ordinary module.
        if name.startswith("__") and name.endswith("__") and name != "__all__":
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        execute(self)
        try:
            return self.__dict__[name]
        except KeyError:  # not defined, or asked for by this thread while the body runs
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}") \
                from None


def execute(module: types.ModuleType) -> None:
    """Run deferred `module`'s body now (nothing when it ran already, or is running in this
    thread: another thread waits until it is complete)."""
    with _LOCK:
        if module.__class__ is not DeferredModule or module in _RUNNING:
            return
        _RUNNING.add(module)
        try:
            module.__spec__.loader.exec_module(module)
        finally:
            _RUNNING.discard(module)
        module.__class__ = types.ModuleType  # complete: names are found at a module's speed
        if module in _PENDING:  # (an op module: the registry's finishing steps follow)
            _PENDING.remove(module)
            for hook in _AFTER:
                hook()


def after_execute(hook) -> None:
    """Call `hook()` after each deferred module's body has run (the registry's finishing
    steps over the ops it registered)."""
    _AFTER.append(hook)


def defer(package: types.ModuleType, names: tuple, registers: bool = True) -> None:
    """Bind each submodule of `package` named in `names` as a `DeferredModule` (one
    imported already stays as it is). `registers`: whether the modules register ops (those
    the registry runs before answering for its whole content); kernels' helper modules
    that register none run only when a name of theirs is looked up."""
    directory = package.__path__[0]
    for name in names:
        full = f"{package.__name__}.{name}"
        if full in sys.modules:  # imported already by a module that needs it
            continue
        # The source file's spec made at once (the import system's search for each of the
        # ~30 modules took a third of a millisecond in all); anything else is searched.
        path = os.path.join(directory, name + ".py")
        if os.path.isfile(path):
            spec = _spec_from_file_location(full, path)
        else:
            import importlib.util

            spec = importlib.util.find_spec(full)
        module = _module_from_spec(spec)
        module.__class__ = DeferredModule
        sys.modules[full] = module
        setattr(package, name, module)
        if registers:
            _PENDING.append(module)


def load_until(found) -> bool:
    """Execute deferred modules not executed yet, in the order they were deferred, until
    `found()` is true; whether it is."""
    for module in list(_PENDING):
        execute(module)
        if found():
            return True
    return False


def load_all() -> bool:
    """Execute every deferred module not executed yet; whether there was one."""
    if not _PENDING:
        return False
    for module in list(_PENDING):  # one running in this thread now finishes by itself
        execute(module)
    return True
