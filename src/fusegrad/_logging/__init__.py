"""`torch._logging`: the compiler's logs, set by component or artifact (`set_logs`)."""

from ..compiler.logs import set_logs

__all__ = ["set_logs"]
