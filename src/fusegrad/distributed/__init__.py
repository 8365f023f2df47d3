"""`fusegrad.distributed`: process groups and collectives on MPI, as `torch.distributed`.

Ranks are MPI processes (`python -m fusegrad.distributed.run --nproc-per-node N script.py`
starts them through `mpiexec`); `init_process_group("gloo")` joins them into the default group.
mpi4py comes with the `distributed` extra and is imported only when a group is created.
"""

from .collectives import (
    ReduceOp,
    all_gather,
    all_gather_into_tensor,
    all_gather_object,
    all_reduce,
    barrier,
    broadcast,
    broadcast_object_list,
    gather,
    irecv,
    isend,
    recv,
    reduce,
    reduce_scatter_tensor,
    scatter,
    send,
)
from .process_group import (
    Backend,
    GroupMember,
    ProcessGroup,
    destroy_process_group,
    get_backend,
    get_rank,
    get_world_size,
    group,
    init_process_group,
    is_available,
    is_initialized,
    is_mpi_available,
    new_group,
)
from .work import Work

__all__ = ["ReduceOp", "all_gather", "all_gather_into_tensor", "all_gather_object",
           "all_reduce", "barrier", "broadcast", "broadcast_object_list", "gather", "irecv",
           "isend", "recv", "reduce", "reduce_scatter_tensor", "scatter", "send", "Backend",
           "GroupMember", "ProcessGroup", "destroy_process_group", "get_backend", "get_rank",
           "get_world_size", "group", "init_process_group", "is_available", "is_initialized",
           "is_mpi_available", "new_group", "Work"]
