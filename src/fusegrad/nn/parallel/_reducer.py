"""The gradient reducer of DistributedDataParallel: buckets and overlapped all-reduce.

Parameters are packed, in reverse registration order (roughly the order backward produces
their gradients), into flat per-dtype buckets of about `bucket_cap_mb` (the first one 1 MiB so
that communication starts early). A post-accumulate-grad hook on every parameter copies its
gradient, divided by the world size, into its bucket slot; when a bucket's last gradient has
arrived the bucket is all-reduced with a non-blocking MPI request while backward continues.
Buckets are launched strictly in bucket order, so every rank issues the same collectives in
the same order whatever order its gradients arrive in. The hook of the last gradient waits for
all buckets and writes the averages back to `.grad` (or, with `gradient_as_bucket_view`, makes
`.grad` a view of the bucket so no copy is needed at all).
"""

from __future__ import annotations

import weakref

import numpy as np

from ..._tensor import Tensor
from ...autograd.graph import AccumulateGrad

FIRST_BUCKET_BYTES = 1024 * 1024

_UNFINISHED = (
    "Expected to have finished reduction in the prior iteration before starting a new one. This "
    "error indicates that your module has parameters that were not used in producing loss. You "
    "can enable unused parameter detection by passing the keyword argument "
    "`find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`, and by \n"
    "making sure all `forward` function outputs participate in calculating loss. \n"
    "If you already have done the above, then the distributed data parallel module wasn't able "
    "to locate the output tensors in the return value of your module's `forward` function. "
    "Please include the loss function and the structure of the return value of `forward` of "
    "your module when reporting this issue (e.g. list, dict, iterable).\n"
    "Parameter indices which did not receive grad for rank {rank}: {indices}\n"
    " In addition, you can set the environment variable TORCH_DISTRIBUTED_DEBUG to either INFO "
    "or DETAIL to print out information about which particular parameters did not receive "
    "gradient on this rank as part of this error")


class _Bucket:
    """One flat buffer, the parameters it holds and its in-flight all-reduce."""

    def __init__(self, dtype, indices: list[int], sizes: list[int]) -> None:
        self.indices = indices
        self.flat = np.zeros(sum(sizes), dtype=dtype)
        self.offsets = list(np.cumsum([0, *sizes[:-1]]))
        self.pending = len(indices)
        self.work = None


def assign_buckets(params: list, first_cap: int, cap: int) -> list[tuple]:
    """(dtype, [parameter indices]) per bucket, filled in reverse parameter order.

    A bucket is closed once it reaches its byte cap; each dtype fills its own buckets."""
    open_buckets: dict = {}
    done = []
    limit = first_cap
    for i in reversed(range(len(params))):
        data = params[i]._data
        entry = open_buckets.setdefault(data.dtype, [[], 0])
        entry[0].append(i)
        entry[1] += data.nbytes
        if entry[1] >= limit:
            done.append((data.dtype, entry[0]))
            del open_buckets[data.dtype]
            limit = cap
    done.extend((dt, entry[0]) for dt, entry in open_buckets.items())
    return done


def _output_tensors(value, found: list) -> None:
    if isinstance(value, Tensor):
        found.append(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _output_tensors(v, found)
    elif isinstance(value, dict):
        for v in value.values():
            _output_tensors(v, found)


def reachable_leaves(outputs) -> set[int]:
    """ids of the leaf tensors whose gradients backward from `outputs` would reach."""
    tensors: list = []
    _output_tensors(outputs, tensors)
    seen: set[int] = set()
    leaves: set[int] = set()
    stack = []
    for t in tensors:
        fn = t.grad_fn
        if fn is not None:
            stack.append(fn)
        elif t.requires_grad:
            leaves.add(id(t))
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, AccumulateGrad):
            leaves.add(id(node.variable))
            continue
        for nxt, _ in node.next_functions:
            if nxt is not None and id(nxt) not in seen:
                stack.append(nxt)
    return leaves


class Reducer:
    """Averages the gradients of `params` over `group` during backward."""

    def __init__(self, params: list, group, bucket_cap_bytes: int, first_bucket_bytes: int,
                 gradient_as_bucket_view: bool, find_unused_parameters: bool) -> None:
        self.params = params
        self.group = group
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.find_unused_parameters = find_unused_parameters
        self.buckets: list[_Bucket] = []
        self.slot: list = [None] * len(params)  # (bucket, array view, tensor view) per param
        for dtype, indices in assign_buckets(params, first_bucket_bytes, bucket_cap_bytes):
            bucket = _Bucket(dtype, indices, [params[i]._data.size for i in indices])
            for i, off in zip(indices, bucket.offsets):
                view = bucket.flat[off:off + params[i]._data.size].reshape(params[i]._data.shape)
                self.slot[i] = (bucket, view, Tensor._make(view))
            self.buckets.append(bucket)
        self.expect_hooks = False
        self.require_finalize = False
        self.ready = [False] * len(params)
        self.unused: list[int] = []
        self.marked_unused = False
        self.next_bucket = 0
        if gradient_as_bucket_view:
            for i, p in enumerate(params):
                if p._grad is not None:
                    np.copyto(self.slot[i][1], p._grad._data)
                    p._grad = self.slot[i][2]
        self._handles = [p.register_post_accumulate_grad_hook(self._make_hook(i))
                         for i, p in enumerate(params)]

    def _make_hook(self, index: int):
        # A weak reference: the parameters must not keep a discarded DDP's reducer alive.
        ref = weakref.ref(self)

        def hook(param) -> None:
            reducer = ref()
            if reducer is not None:
                reducer.on_grad_ready(index)
        return hook

    def __del__(self) -> None:
        for handle in getattr(self, "_handles", ()):
            handle.remove()

    def prepare_for_backward(self, outputs) -> None:
        """Arm the hooks for the backward of `outputs` (after a forward that syncs)."""
        if self.require_finalize:
            missing = " ".join(str(i) for i, r in enumerate(self.ready) if not r)
            raise RuntimeError(_UNFINISHED.format(rank=self.group.rank(), indices=missing))
        self.expect_hooks = True
        self.ready = [False] * len(self.params)
        self.next_bucket = 0
        for bucket in self.buckets:
            bucket.pending = len(bucket.indices)
            bucket.work = None
        self.marked_unused = False
        self.unused = []
        if self.find_unused_parameters:
            reached = reachable_leaves(outputs)
            self.unused = [i for i, p in enumerate(self.params) if id(p) not in reached]

    def on_grad_ready(self, index: int) -> None:
        """A parameter's gradient is final for this backward: stage it and launch buckets."""
        if not self.expect_hooks:
            return
        self.require_finalize = True
        if not self.marked_unused:
            # Parameters the forward did not use get no hook: they are ready from the start.
            self.marked_unused = True
            for i in self.unused:
                self._mark_ready(i)
        if not self.ready[index]:
            self._mark_ready(index)

    def _mark_ready(self, index: int) -> None:
        self.ready[index] = True
        bucket, view, view_tensor = self.slot[index]
        param = self.params[index]
        grad = param._grad
        size = self.group.size()
        if grad is None:
            view[...] = 0
        elif grad is view_tensor:
            np.divide(view, size, out=view)
        else:
            np.divide(grad._data, size, out=view, casting="unsafe")
            if self.gradient_as_bucket_view:
                param._grad = view_tensor
        bucket.pending -= 1
        if bucket.pending == 0:
            self._launch_ready_buckets()
        else:
            for b in self.buckets[:self.next_bucket]:
                b.work.is_completed()  # lets MPI move the launched buckets along

    def _launch_ready_buckets(self) -> None:
        from ...distributed import all_reduce

        while self.next_bucket < len(self.buckets):
            bucket = self.buckets[self.next_bucket]
            if bucket.pending:
                return
            bucket.work = all_reduce(Tensor._make(bucket.flat), group=self.group, async_op=True)
            self.next_bucket += 1
        self._finalize()

    def _finalize(self) -> None:
        """Wait for every bucket and write the averaged gradients back."""
        from ...distributed import ReduceOp, all_reduce

        for bucket in self.buckets:
            bucket.work.wait()
        globally_unused = set()
        if self.find_unused_parameters:
            used = np.array([i not in set(self.unused) for i in range(len(self.params))],
                            dtype=np.uint8)
            all_reduce(Tensor._make(used), op=ReduceOp.MAX, group=self.group)
            globally_unused = {i for i in range(len(self.params)) if not used[i]}
        for i, param in enumerate(self.params):
            if i in globally_unused:
                continue
            _, view, view_tensor = self.slot[i]
            grad = param._grad
            if grad is view_tensor:
                grad._vc[0] += 1
            elif self.gradient_as_bucket_view:
                param._grad = view_tensor
            elif grad is None:
                param._grad = Tensor._make(view.copy())
            else:
                np.copyto(grad._data, view, casting="unsafe")
                grad._vc[0] += 1
        self.expect_hooks = False
        self.require_finalize = False
