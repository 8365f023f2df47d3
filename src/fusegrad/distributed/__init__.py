"""`fusegrad.distributed`: process groups and collectives, as `torch.distributed`.

Two transports carry them. Under an MPI launch (`mpiexec`, or `python -m
fusegrad.distributed.run`, which uses it when found) the ranks are MPI processes and
`init_process_group("gloo")` joins them into the default group; mpi4py comes with the
`distributed` extra and is imported only when such a group is created. Without one (PyTorch's
`mp.spawn` tutorial, torchrun's RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, `tcp://` or `file://`
init methods, or a store) the ranks meet in a `TCPStore`/`FileStore` and talk over TCP
sockets (`_tcp`), with the same collectives and PyTorch's gloo errors.
"""

from . import distributed_c10d
from .distributed_c10d import *  # noqa: F403

__all__ = distributed_c10d.__all__
