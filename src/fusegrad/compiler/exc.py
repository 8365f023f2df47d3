"""The errors capture raises, under PyTorch's names (`torch._dynamo.exc`)."""

from __future__ import annotations

from .capture.variables import Unsupported as _GraphBreak


class TorchDynamoException(RuntimeError):
    """Base of the errors `fusegrad.compile` raises about capture."""


class Unsupported(TorchDynamoException, _GraphBreak):
    """`fullgraph=True` met code it cannot put in one graph (the reason and source line)."""


class InternalTorchDynamoError(TorchDynamoException):
    """The translator itself failed (a bug in fusegrad, not in the program)."""


class RecompileError(TorchDynamoException):
    """`config.error_on_recompile` is set and a compiled function had to recompile."""


class InvalidBackend(TorchDynamoException):
    """`compile` was given a backend name no backend is registered under."""

    def __init__(self, name) -> None:
        super().__init__(f"Invalid backend: {name!r}, see `torch._dynamo.list_backends()` for "
                         "available backends.")


class UserError(TorchDynamoException):
    """The program asked capture for something it cannot decide: a branch or conversion on
    a value only the running graph knows (`.item()` captured under `fullgraph=True`)."""

    def __init__(self, error_type=None, msg: str = "", case_name: str | None = None) -> None:
        super().__init__(msg)
        self.error_type = error_type
        self.case_name = case_name


class FailOnRecompileLimitHit(Exception):
    """`fullgraph=True` and a function recompiled past `config.recompile_limit`."""


__all__ = ["TorchDynamoException", "Unsupported", "InternalTorchDynamoError",
           "FailOnRecompileLimitHit", "RecompileError", "InvalidBackend", "UserError"]
