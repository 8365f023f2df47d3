"""The registry's names for its ONNX mappings, resolved when an export first calls one.

The mappings (`_onnx_mappings`, some 1,500 lines) matter only to `fusegrad.onnx.export`, so
`import fusegrad` does not load them: each op module's `ox.atan2` or `ox.add_like("Add")` is a
`Mapping` naming a function of `_onnx_mappings` (and, for a factory called while the module
body runs, the arguments of that call), which loads the module and resolves itself on its
first call. The exporter loads `_onnx_mappings` before it maps anything; from then on this
module's names are the mappings' own objects and calls to them are real calls (the helpers
op modules' own mapping functions call while exporting: `ox.ints(v, n)`).
"""

from __future__ import annotations

import importlib
import sys

INT64_MAX = 2 ** 63 - 1  # (np.iinfo(np.int64).max)

_MAPPINGS = __name__ + "_mappings"


class Mapping:
    """A function of `_onnx_mappings` named `name`, or the result of calling it on `args`
    and `kwargs` (a factory's), resolved on the first call."""

    __slots__ = ("name", "args", "kwargs", "target")

    def __init__(self, name: str, args: tuple | None = None, kwargs: dict | None = None):
        self.name = name
        self.args = args
        self.kwargs = kwargs
        self.target = None

    def __call__(self, *args, **kwargs):
        target = self.target
        if target is None:
            if self.args is None and _MAPPINGS not in sys.modules:
                # A factory called while an op module's body runs: resolved with the rest.
                return Mapping(self.name, args, kwargs)
            mappings = importlib.import_module(_MAPPINGS)
            target = getattr(mappings, self.name)
            if self.args is not None:
                target = target(*self.args, **self.kwargs)
            self.target = target
        return target(*args, **kwargs)

    def __repr__(self) -> str:
        called = "" if self.args is None else f"(*{self.args!r}, **{self.kwargs!r})"
        return f"<ONNX mapping {self.name}{called}>"


def load() -> None:
    """Load the mappings (the exporter's first step)."""
    importlib.import_module(_MAPPINGS)


def __getattr__(name: str):
    """`name` of the mappings: the object itself once they are loaded, else a `Mapping`."""
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    mappings = sys.modules.get(_MAPPINGS)
    return getattr(mappings, name) if mappings is not None else Mapping(name)
