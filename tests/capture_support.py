"""What the capture-gap test files share: fusegrad, torch where it is installed (None on the
Pythons without it, where fusegrad is checked against its own eager runs and the counts
recorded from torch), and the checks of a program's graph and break counts.

A gap file records torch.compile's counts in a table `{program name: (unique graphs, graph
breaks)}` and takes its checks from `counted_as_torch(table)`."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

from program_support import check_counts_as_torch, check_values_as_eager  # noqa: E402

import fusegrad as fg  # noqa: E402

try:
    import torch
except ImportError:  # (3.12, 3.13: fusegrad against its own eager runs and torch's counts)
    torch = None


def counted_as_torch(counts: dict):
    """`check(prog, torch_values=True)`: compiled fusegrad gives eager fusegrad's values and
    the counts `counts` records for `prog`; where torch is installed, torch gives those counts
    and, with `torch_values`, eager fusegrad gives torch's values."""
    def check(prog, torch_values: bool = True) -> None:
        check_counts_as_torch(prog, fg, torch, counts, torch_values)

    return check


def values_as_eager(prog, backend: str = "eager") -> None:
    """`prog` compiled by fusegrad with `backend` gives eager fusegrad's values and text."""
    check_values_as_eager(prog, fg, backend)
