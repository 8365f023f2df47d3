"""`torch.fx.experimental.symbolic_shapes`: the error dynamic shapes raise for user constraints.

The symbolic sizes themselves live in `fusegrad._symbolic` (`SymInt`, `ShapeEnv`); this module
holds the names programs import from PyTorch's.
"""

from __future__ import annotations


class ConstraintViolationError(RuntimeError):
    """A size the program marked dynamic (`torch._dynamo.mark_dynamic`) that the compiled code
    specialised to a constant."""


class GuardOnDataDependentSymNode(RuntimeError):
    """Python control flow needed a value only the data gives (`if x.sum() > 0:`) while
    tracing with fake tensors (`fusegrad.export`)."""


__all__ = ["ConstraintViolationError", "GuardOnDataDependentSymNode"]
