"""`FUSEGRAD_LOGS`: what the compiler prints as it works (PyTorch's TORCH_LOGS names).

`FUSEGRAD_LOGS=graph_code,graph_breaks,recompiles,guards,aot_graphs,aot_joint_graph` (or
`all`) selects artifacts; `set_logs(graph_code=True, ...)` does the same from Python. Output
goes to the `fusegrad.compiler` logger, which prints to stderr unless configured otherwise.
"""

from __future__ import annotations

import logging
import os

ARTIFACTS = ("graph_code", "graph_breaks", "recompiles", "guards", "output_code",
             "perf_hints", "aot_graphs", "aot_joint_graph")
enabled: set[str] = set()
log = logging.getLogger("fusegrad.compiler")


def set_logs(**artifacts: bool) -> None:
    """Turn log artifacts on or off, e.g. `set_logs(graph_breaks=True)`."""
    for name, on in artifacts.items():
        if name not in ARTIFACTS:
            raise ValueError(f"unknown log artifact {name!r}; known: {', '.join(ARTIFACTS)}")
        (enabled.add if on else enabled.discard)(name)
    if enabled and not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[fusegrad %(levelname)s] %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


def emit(artifact: str, message: str) -> None:
    """Log `message` if `artifact` is on."""
    if artifact in enabled:
        log.info("%s: %s", artifact, message)


def _from_environment() -> None:
    names = [n.strip() for n in os.environ.get("FUSEGRAD_LOGS", "").split(",") if n.strip()]
    if "all" in names:
        names = list(ARTIFACTS)
    known = [n.lstrip("+") for n in names if n.lstrip("+") in ARTIFACTS]
    if known:
        set_logs(**dict.fromkeys(known, True))


_from_environment()
