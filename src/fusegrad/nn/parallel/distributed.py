"""`DistributedDataParallel`: one model replica per rank, gradients averaged during backward."""

from __future__ import annotations

from contextlib import contextmanager

from ...autograd.grad_mode import is_grad_enabled
from ..modules.module import Module
from ._reducer import FIRST_BUCKET_BYTES, Reducer

_DEFAULT_BUCKET_CAP_MB = 25


def _check_same_model(group, shapes: list[tuple]) -> None:
    """Refuse replicas whose parameter counts or shapes differ, with PyTorch's messages."""
    from ...distributed import all_gather_object

    everyone: list = [None] * group.size()
    all_gather_object(everyone, shapes, group=group)
    me = group.rank()
    for r, theirs in enumerate(everyone):
        if r != me and len(theirs) != len(shapes):
            raise RuntimeError(
                f"DDP expects same model across all ranks, but Rank {me} has {len(shapes)} "
                f"params, while rank {r} has inconsistent {len(theirs)} params.")
    for r, theirs in enumerate(everyone):
        if r == me:
            continue
        for i, (mine, other) in enumerate(zip(shapes, theirs)):
            if mine != other:
                raise RuntimeError(
                    f"[{me}]: params[{i}] in this process with sizes {list(mine)} appears not "
                    f"to match sizes of the same param in process {r}.")


def _broadcast_from_first(tensors: list, group) -> None:
    """Overwrite `tensors` with rank 0's values (all transfers in flight together)."""
    from ...distributed import broadcast

    works = [broadcast(t, src=group.ranks[0], group=group, async_op=True) for t in tensors]
    for work in works:
        work.wait()


class DistributedDataParallel(Module):
    """Data parallelism over the ranks of a process group.

    Every rank holds a replica of `module` (rank 0's parameters and buffers are broadcast at
    construction) and runs forward and backward on its own batch; during backward the gradients
    are averaged over the ranks in buckets, each all-reduced as soon as it is complete, so after
    `backward()` every replica holds the gradient of the whole global batch.
    """

    def __init__(self, module, device_ids=None, output_device=None, dim: int = 0,
                 broadcast_buffers=None, init_sync: bool = True, process_group=None,
                 bucket_cap_mb=None, find_unused_parameters: bool = False,
                 check_reduction: bool = False, gradient_as_bucket_view: bool = False,
                 static_graph: bool = False, delay_all_reduce_named_params=None,
                 param_to_hook_all_reduce=None, mixed_precision=None, device_mesh=None,
                 skip_all_reduce_unused_params: bool = False, bucket_cap_mb_list=None,
                 batched_grad_copy: bool = False, forward_sync_buffers=None) -> None:
        super().__init__()
        from ...distributed.process_group import _world

        if device_ids is not None or output_device is not None:
            raise ValueError(
                "DistributedDataParallel device_ids and output_device arguments only work with "
                "single-device/multiple-device GPU modules or CPU modules, but got device_ids "
                f"{device_ids}, output_device {output_device}, and module parameters "
                "{device(type='cpu')}.")
        for name, value in (("mixed_precision", mixed_precision), ("device_mesh", device_mesh),
                            ("delay_all_reduce_named_params", delay_all_reduce_named_params),
                            ("param_to_hook_all_reduce", param_to_hook_all_reduce),
                            ("bucket_cap_mb_list", bucket_cap_mb_list)):
            if value is not None:
                raise NotImplementedError(f"DistributedDataParallel({name}=...) is not "
                                          f"supported by fusegrad")
        group = _world() if process_group is None else process_group
        ignored = set(getattr(module, "_ddp_params_and_buffers_to_ignore", ()))
        named = [(n, p) for n, p in module.named_parameters()
                 if p.requires_grad and n not in ignored]
        if not named:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't "
                               "have any parameter that requires a gradient.")
        self.module = module
        self.device_ids = None
        self.output_device = None
        self.device_type = "cpu"
        self.dim = dim
        self.process_group = group
        self.broadcast_buffers = True if broadcast_buffers is None else bool(broadcast_buffers)
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.parameters_to_ignore = ignored
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        cap = _DEFAULT_BUCKET_CAP_MB if bucket_cap_mb is None else bucket_cap_mb
        self.bucket_bytes_cap = int(cap * 1024 * 1024)
        self.modules_buffers = [b for n, b in module.named_buffers() if n not in ignored]
        params = [p for _, p in named]
        _check_same_model(group, [tuple(p.shape) for p in params])
        if init_sync:
            _broadcast_from_first(params + self.modules_buffers, group)
        # The small first bucket starts communication early, unless the user chose a cap.
        first = FIRST_BUCKET_BYTES if bucket_cap_mb is None else self.bucket_bytes_cap
        self.reducer = Reducer(params, group, self.bucket_bytes_cap, first,
                               gradient_as_bucket_view, find_unused_parameters)

    def forward(self, *inputs, **kwargs):
        """Run the replica; arm gradient averaging for the backward of its outputs."""
        if self.require_forward_param_sync and self.broadcast_buffers and self.modules_buffers:
            _broadcast_from_first(self.modules_buffers, self.process_group)
        output = self.module(*inputs, **kwargs)
        if is_grad_enabled() and self.require_backward_grad_sync:
            self.require_forward_param_sync = True
            self.reducer.prepare_for_backward(output if self.find_unused_parameters else None)
        else:
            self.require_forward_param_sync = False
        return output

    @contextmanager
    def no_sync(self):
        """Inside, backward accumulates gradients locally without averaging them; the first
        synchronised backward after it averages the accumulated sum."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous

    @staticmethod
    def _set_params_and_buffers_to_ignore_for_model(module, params_and_buffers_to_ignore):
        """Names of parameters and buffers DDP leaves alone (set before wrapping)."""
        module._ddp_params_and_buffers_to_ignore = params_and_buffers_to_ignore
