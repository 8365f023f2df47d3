"""PyTorch's names for the errors capture raises (`torch._dynamo.exc`)."""

from ..compiler.exc import (
    FailOnRecompileLimitHit,
    InternalTorchDynamoError,
    InvalidBackend,
    RecompileError,
    TorchDynamoException,
    Unsupported,
    UserError,
)

__all__ = ["TorchDynamoException", "Unsupported", "InternalTorchDynamoError",
           "FailOnRecompileLimitHit", "RecompileError", "InvalidBackend", "UserError"]
