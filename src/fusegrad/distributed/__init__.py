"""`fusegrad.distributed`: process groups and collectives on MPI, as `torch.distributed`.

Ranks are MPI processes (`python -m fusegrad.distributed.run --nproc-per-node N script.py`
starts them through `mpiexec`); `init_process_group("gloo")` joins them into the default group.
mpi4py comes with the `distributed` extra and is imported only when a group is created.
"""

from . import distributed_c10d
from .distributed_c10d import *  # noqa: F403

__all__ = distributed_c10d.__all__
