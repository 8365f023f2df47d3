"""Per-rank start-up under the launcher: torchrun's environment from MPI's, then the script.

`mpiexec` starts `python -m fusegrad.distributed._rank_env [-m] target args...` on every rank;
this sets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE and GROUP_RANK from the MPI launcher's
variables and runs the target as `__main__`, exactly as `python target args...` would.
"""

from __future__ import annotations

import os
import runpy
import sys

# Open MPI, then MPICH/Hydra and PMIx spellings of each value.
_SOURCES = {
    "RANK": ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"),
    "WORLD_SIZE": ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE"),
    "LOCAL_RANK": ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"),
    "LOCAL_WORLD_SIZE": ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"),
}


def rank_environment(environ) -> dict[str, str]:
    """torchrun's per-rank variables, read from the MPI launcher's `environ`."""
    out = {}
    for name, sources in _SOURCES.items():
        for source in sources:
            if environ.get(source, "") != "":
                out[name] = environ[source]
                break
    if "RANK" not in out or "WORLD_SIZE" not in out:
        raise RuntimeError("fusegrad.distributed._rank_env must run under mpiexec (no MPI rank "
                           "in the environment)")
    out.setdefault("LOCAL_RANK", out["RANK"])
    out.setdefault("LOCAL_WORLD_SIZE", out["WORLD_SIZE"])
    out["GROUP_RANK"] = "0"
    out["ROLE_RANK"] = out["RANK"]
    out["ROLE_WORLD_SIZE"] = out["WORLD_SIZE"]
    return out


def main(argv: list[str]) -> None:
    """Set the rank variables and run `argv` (`[-m] target args...`) as the main program."""
    os.environ.update(rank_environment(os.environ))
    if argv and argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
