"""`fusegrad.distributed.distributed_c10d`: the process-group API in the module PyTorch keeps it
in. The functions and classes are defined by topic (`process_group`, `collectives`, `work`);
their classes name this module as theirs, so pickles and `isinstance` checks written against
PyTorch's paths find them here."""

from .collectives import (
    P2POp,
    ReduceOp,
    all_gather,
    all_gather_into_tensor,
    all_gather_single,
    all_reduce,
    all_to_all,
    all_to_all_single,
    barrier,
    batch_isend_irecv,
    broadcast,
    gather,
    irecv,
    isend,
    monitored_barrier,
    recv,
    reduce,
    reduce_scatter,
    reduce_scatter_single,
    reduce_scatter_tensor,
    scatter,
    send,
)
from .object_collectives import (
    all_gather_object,
    broadcast_object_list,
    gather_object,
    recv_object_list,
    scatter_object_list,
    send_object_list,
)
from .process_group import (
    Backend,
    DistBackendError,
    DistError,
    DistNetworkError,
    DistStoreError,
    GroupMember,
    ProcessGroup,
    QueueEmptyError,
    destroy_process_group,
    get_backend,
    get_global_rank,
    get_group_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    group,
    init_process_group,
    is_available,
    is_gloo_available,
    is_initialized,
    is_mpi_available,
    is_nccl_available,
    is_torchelastic_launched,
    is_ucc_available,
    new_group,
)
from .store import FileStore, HashStore, PrefixStore, Store, TCPStore
from .work import Work

__all__ = ["ReduceOp", "all_gather", "all_gather_into_tensor", "all_gather_object",
           "all_reduce", "barrier", "broadcast", "broadcast_object_list", "gather", "irecv",
           "isend", "recv", "reduce", "reduce_scatter_tensor", "scatter", "send", "Backend",
           "GroupMember", "ProcessGroup", "destroy_process_group", "get_backend", "get_rank",
           "get_world_size", "group", "init_process_group", "is_available", "is_initialized",
           "is_mpi_available", "new_group", "Work", "P2POp", "all_to_all", "all_to_all_single",
           "batch_isend_irecv", "gather_object", "monitored_barrier", "recv_object_list",
           "reduce_scatter", "scatter_object_list", "send_object_list", "DistBackendError",
           "DistError", "DistNetworkError", "DistStoreError", "get_global_rank",
           "get_group_rank", "get_process_group_ranks", "is_gloo_available",
           "is_nccl_available", "is_torchelastic_launched", "is_ucc_available", "Store",
           "TCPStore", "FileStore", "HashStore", "PrefixStore", "all_gather_single",
           "reduce_scatter_single", "QueueEmptyError"]

for _cls in (Backend, GroupMember, ProcessGroup, ReduceOp, Work, group, P2POp, Store,
             PrefixStore):
    _cls.__module__ = __name__
# PyTorch defines its errors in `torch.distributed` itself.
for _cls in (DistError, DistBackendError, DistNetworkError, DistStoreError, QueueEmptyError):
    _cls.__module__ = __name__.rsplit(".", 1)[0]
del _cls
