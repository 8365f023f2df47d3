"""`aot_function` and `aot_module_simplified` at torch._functorch.aot_autograd's spelling."""

from ..compiler.aot.api import aot_function, aot_module_simplified

__all__ = ["aot_function", "aot_module_simplified"]
