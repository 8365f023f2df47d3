"""Infrastructure for writing and scheduling graph passes (`PassBase`, `PassResult`,
`PassManager`), as torch.fx.passes.infra has it."""

from . import pass_base, pass_manager

__all__ = ["pass_base", "pass_manager"]
