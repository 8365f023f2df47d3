"""`DataParallel` on a machine without GPUs: the module runs as it is, as in PyTorch."""

from typing import Any

from ..modules.module import Module


class DataParallel(Module):
    """Single-process data parallelism over GPUs; with none (fusegrad is CPU-only) it wraps
    `module` and calls it directly, as PyTorch does on a CPU machine. Its state_dict keys carry
    the `module.` prefix."""

    def __init__(self, module, device_ids=None, output_device=None, dim: int = 0) -> None:
        super().__init__()
        # With no GPU available PyTorch keeps only the module and an empty device list.
        self.module = module
        self.device_ids = []

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        """Call the wrapped module."""
        return self.module(*inputs, **kwargs)
