"""`fusegrad.distributed.distributed_c10d`: the process-group API in the module PyTorch keeps it
in. The functions and classes are defined by topic (`process_group`, `collectives`, `work`);
their classes name this module as theirs, so pickles and `isinstance` checks written against
PyTorch's paths find them here."""

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

for _cls in (Backend, GroupMember, ProcessGroup, ReduceOp, Work, group):
    _cls.__module__ = __name__
del _cls
