"""Collectives on tensors over MPI, in place on the tensors' memory.

A contiguous tensor of a dtype MPI reduces natively is handed to MPI as it is (no copy); any
other tensor goes through one contiguous staging array that the finishing step copies back.
Every call issues non-blocking MPI requests: with `async_op=True` it returns the `Work`,
otherwise it waits (bounded by the group's timeout) and returns None.
"""

from __future__ import annotations

import enum
import pickle

import numpy as np

from .._tensor import Tensor
from . import _ring
from .process_group import _mpi, _resolve
from .work import Work


class RedOpType(enum.IntEnum):
    """The reduction kinds, numbered as PyTorch numbers them."""

    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8


class ReduceOp:
    """`ReduceOp.SUM`, `.AVG`, `.PRODUCT`, `.MIN`, `.MAX`, `.BAND`, `.BOR`, `.BXOR`."""

    RedOpType = RedOpType
    SUM = RedOpType.SUM
    AVG = RedOpType.AVG
    PRODUCT = RedOpType.PRODUCT
    MIN = RedOpType.MIN
    MAX = RedOpType.MAX
    BAND = RedOpType.BAND
    BOR = RedOpType.BOR
    BXOR = RedOpType.BXOR
    PREMUL_SUM = RedOpType.PREMUL_SUM


# dtypes MPI reduces natively, and what the others travel as for a reduction.
_NATIVE = {"float32": "FLOAT", "float64": "DOUBLE", "int8": "INT8_T", "int16": "INT16_T",
           "int32": "INT32_T", "int64": "INT64_T", "uint8": "UINT8_T", "uint16": "UINT16_T",
           "uint32": "UINT32_T", "uint64": "UINT64_T", "complex64": "C_FLOAT_COMPLEX",
           "complex128": "C_DOUBLE_COMPLEX"}
_STAGED = {"float16": np.float32, "bfloat16": np.float32, "bool": np.uint8}
# A bool reduction runs on 0/1 bytes: "any" for SUM/MAX/BOR, "all" for PRODUCT/MIN/BAND.
_BOOL_OPS = {RedOpType.SUM: RedOpType.MAX, RedOpType.MAX: RedOpType.MAX,
             RedOpType.BOR: RedOpType.MAX, RedOpType.PRODUCT: RedOpType.MIN,
             RedOpType.MIN: RedOpType.MIN, RedOpType.BAND: RedOpType.MIN}


# Reductions the ring all-reduce does with NumPy (large tensors; see `_ring`).
_RING_UFUNCS = {RedOpType.SUM: np.add, RedOpType.AVG: np.add}


def _check_tensor(t, name: str) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type "
                        f"torch.Tensor but got {type(t)} instead.")


def _check_list(ts, name: str) -> None:
    if not isinstance(ts, list) or not all(isinstance(t, Tensor) for t in ts):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type "
                        f"List[torch.Tensor] but got {type(ts)} instead.")


def _mpi_op(op):
    MPI = _mpi()
    op = RedOpType(op)
    table = {RedOpType.SUM: MPI.SUM, RedOpType.AVG: MPI.SUM, RedOpType.PRODUCT: MPI.PROD,
             RedOpType.MIN: MPI.MIN, RedOpType.MAX: MPI.MAX, RedOpType.BAND: MPI.BAND,
             RedOpType.BOR: MPI.BOR, RedOpType.BXOR: MPI.BXOR}
    if op not in table:
        raise ValueError(f"Cannot use ReduceOp.{op.name} with the MPI-backed CPU group")
    return table[op]


def _bump(*tensors) -> None:
    for t in tensors:
        t._vc[0] += 1


class _Staged:
    """A tensor's memory as a flat contiguous array MPI can use, and how to write it back."""

    def __init__(self, t: Tensor, wire=None) -> None:
        data = t._data
        self.tensor = t
        self.data = data
        wire = np.dtype(wire) if wire is not None else data.dtype
        if data.flags.c_contiguous and data.dtype == wire:
            self.flat = data.reshape(-1)
            self.copied = False
        else:
            self.flat = np.ascontiguousarray(data, dtype=wire).reshape(-1)
            self.copied = True

    def bytes(self) -> np.ndarray:
        """The memory as bytes (for operations that only move data)."""
        return self.flat.view(np.uint8)

    def write_back(self) -> None:
        """Copy a staged result into the tensor and bump its version."""
        if self.copied:
            np.copyto(self.data, self.flat.reshape(self.data.shape), casting="unsafe")
        _bump(self.tensor)


def _reduce_buffer(t: Tensor, op):
    """(staging, MPI buffer spec, MPI op) for reducing `t` with `op`."""
    MPI = _mpi()
    name = t._data.dtype.name
    op = RedOpType(op)
    if name == "bool":
        if op not in _BOOL_OPS:
            raise ValueError(f"Cannot use ReduceOp.{op.name} on a bool tensor")
        op = _BOOL_OPS[op]
    if name in _NATIVE:
        staged = _Staged(t)
        kind = _NATIVE[name]
    else:
        wire = _STAGED.get(name, np.float64)
        staged = _Staged(t, wire)
        kind = _NATIVE[np.dtype(wire).name]
    return staged, [staged.flat, getattr(MPI, kind)], _mpi_op(op)


def _average(staged: _Staged, size: int) -> None:
    flat = staged.flat
    if flat.dtype.kind in "iu":
        np.floor_divide(flat, size, out=flat)
    else:
        np.divide(flat, size, out=flat)


def _finish(pg, async_op: bool, requests: list, what: str, finish=None, outputs=None,
            driver=None):
    work = Work(requests, pg, what, finish, outputs, driver=driver)
    if async_op:
        return work
    work.wait()
    return None


def _root(pg, rank, group_rank, name: str) -> int:
    """The group rank of a root given as a global `rank` or as `group_rank`."""
    if rank is not None and group_rank is not None:
        raise ValueError(f"Can not specify both {name} and group_{name}")
    if group_rank is not None:
        if not 0 <= group_rank < pg.size():
            raise ValueError(f"Group rank {group_rank} is not part of group {pg!r}")
        return group_rank
    return pg.group_rank(0 if rank is None else int(rank))


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce `tensor` across the group with `op`, in place on every rank."""
    _check_tensor(tensor, "tensor")
    pg = _resolve(group)
    if pg is None:
        return None
    staged, buf, mpi_op = _reduce_buffer(tensor, op)

    def finish():
        if RedOpType(op) is RedOpType.AVG:
            _average(staged, pg.size())
        staged.write_back()

    ufunc = _RING_UFUNCS.get(RedOpType(op)) if tensor._data.dtype != np.bool_ else None
    if _ring.usable(staged.flat, pg.size(), ufunc):
        pg.ring_calls += 1
        ring = _ring.RingAllreduce(pg.ring_comm, staged.flat, ufunc, pg.ring_calls)
        return _finish(pg, async_op, [], "all_reduce", finish, [tensor], ring)
    req = pg.comm.Iallreduce(_mpi().IN_PLACE, buf, mpi_op)
    return _finish(pg, async_op, [req], "all_reduce", finish, [tensor])


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op: bool = False,
           group_dst=None):
    """Reduce `tensor` across the group into `dst`'s tensor (the others keep theirs)."""
    _check_tensor(tensor, "tensor")
    pg = _resolve(group)
    if pg is None:
        return None
    root = _root(pg, dst, group_dst, "dst")
    staged, buf, mpi_op = _reduce_buffer(tensor, op)
    mine = pg.rank() == root
    send = _mpi().IN_PLACE if mine else buf
    recv = buf if mine else None
    req = pg.comm.Ireduce(send, recv, mpi_op, root=root)

    def finish():
        if mine:
            if RedOpType(op) is RedOpType.AVG:
                _average(staged, pg.size())
            staged.write_back()

    return _finish(pg, async_op, [req], "reduce", finish, [tensor])


def broadcast(tensor, src=None, group=None, async_op: bool = False, group_src=None):
    """Copy `src`'s tensor into `tensor` on every rank."""
    _check_tensor(tensor, "tensor")
    pg = _resolve(group)
    if pg is None:
        return None
    root = _root(pg, src, group_src, "src")
    staged = _Staged(tensor)
    req = pg.comm.Ibcast(staged.bytes(), root=root)
    return _finish(pg, async_op, [req], "broadcast", staged.write_back, [tensor])


def _gather_layout(outputs: list, inp: Tensor, size: int, what: str) -> None:
    if len(outputs) != size:
        raise ValueError(f"{what}: the tensor list has {len(outputs)} tensors but the group has "
                         f"{size} ranks")
    for out in outputs:
        if out._data.dtype != inp._data.dtype:
            raise ValueError("Invalid usage of tensors with different dtypes")
        if out._data.size != inp._data.size:
            raise ValueError(f"{what}: every tensor must have the input's {inp._data.size} "
                             f"elements")


def _scatter_into(outputs: list, flat: np.ndarray):
    """Finishing step: copy consecutive blocks of `flat` into `outputs`."""
    def finish():
        n = flat.size // max(len(outputs), 1)
        for i, out in enumerate(outputs):
            np.copyto(out._data, flat[i * n:(i + 1) * n].reshape(out._data.shape))
            _bump(out)
    return finish


def all_gather(tensor_list, tensor, group=None, async_op: bool = False):
    """Fill `tensor_list[i]` with rank i's `tensor`, on every rank."""
    _check_list(tensor_list, "tensor_list")
    _check_tensor(tensor, "tensor")
    pg = _resolve(group)
    if pg is None:
        return None
    _gather_layout(tensor_list, tensor, pg.size(), "all_gather")
    send = _Staged(tensor)
    flat = np.empty(pg.size() * send.flat.size, dtype=send.flat.dtype)
    req = pg.comm.Iallgather(send.bytes(), flat.view(np.uint8))
    return _finish(pg, async_op, [req], "all_gather", _scatter_into(tensor_list, flat),
                   tensor_list)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op: bool = False):
    """Concatenate every rank's `input_tensor` along dim 0 into `output_tensor`."""
    _check_tensor(output_tensor, "output_tensor")
    _check_tensor(input_tensor, "input_tensor")
    pg = _resolve(group)
    if pg is None:
        return None
    if output_tensor._data.dtype != input_tensor._data.dtype:
        raise ValueError("Invalid usage of tensors with different dtypes")
    if output_tensor._data.size != pg.size() * input_tensor._data.size:
        raise ValueError("output tensor size must be equal to world_size times input tensor "
                         "size")
    send = _Staged(input_tensor)
    out = _Staged(output_tensor)
    req = pg.comm.Iallgather(send.bytes(), out.bytes())
    return _finish(pg, async_op, [req], "all_gather_into_tensor", out.write_back,
                   [output_tensor])


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None,  # noqa: A002
                          async_op: bool = False):
    """Reduce `input` across ranks and give rank i the i-th of its equal dim-0 blocks."""
    _check_tensor(output, "output")
    _check_tensor(input, "input")
    pg = _resolve(group)
    if pg is None:
        return None
    if input._data.dtype != output._data.dtype:
        raise ValueError("Invalid usage of tensors with different dtypes")
    if input._data.size != pg.size() * output._data.size:
        raise ValueError("input tensor must be the same size as output size times world size")
    staged_in, buf_in, mpi_op = _reduce_buffer(input, op)
    staged_out, buf_out, _ = _reduce_buffer(output, op)
    req = pg.comm.Ireduce_scatter_block(buf_in, buf_out, mpi_op)

    def finish():
        if RedOpType(op) is RedOpType.AVG:
            _average(staged_out, pg.size())
        staged_out.write_back()

    return _finish(pg, async_op, [req], "reduce_scatter_tensor", finish, [output])


def gather(tensor, gather_list=None, dst=None, group=None, async_op: bool = False,
           group_dst=None):
    """Collect every rank's `tensor` into `gather_list` on `dst` (None elsewhere)."""
    _check_tensor(tensor, "tensor")
    pg = _resolve(group)
    if pg is None:
        return None
    root = _root(pg, dst, group_dst, "dst")
    send = _Staged(tensor)
    if pg.rank() == root:
        if gather_list is None:
            raise ValueError("Argument ``gather_list`` must be specified on destination rank.")
        _check_list(gather_list, "gather_list")
        _gather_layout(gather_list, tensor, pg.size(), "gather")
        flat = np.empty(pg.size() * send.flat.size, dtype=send.flat.dtype)
        req = pg.comm.Igather(send.bytes(), flat.view(np.uint8), root=root)
        return _finish(pg, async_op, [req], "gather", _scatter_into(gather_list, flat),
                       gather_list)
    if gather_list:
        raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination "
                         "ranks.")
    req = pg.comm.Igather(send.bytes(), None, root=root)
    return _finish(pg, async_op, [req], "gather")


def scatter(tensor, scatter_list=None, src=None, group=None, async_op: bool = False,
            group_src=None):
    """Give rank i `scatter_list[i]` of `src`, written into its `tensor`."""
    _check_tensor(tensor, "tensor")
    pg = _resolve(group)
    if pg is None:
        return None
    root = _root(pg, src, group_src, "src")
    recv = _Staged(tensor)
    if pg.rank() == root:
        if not scatter_list:
            raise ValueError("Argument ``scatter_list`` must be specified on source rank.")
        _check_list(scatter_list, "scatter_list")
        _gather_layout(scatter_list, tensor, pg.size(), "scatter")
        flat = np.concatenate([np.ascontiguousarray(t._data).reshape(-1) for t in scatter_list])
        req = pg.comm.Iscatter(flat.view(np.uint8), recv.bytes(), root=root)
    else:
        if scatter_list:
            raise ValueError("Argument ``scatter_list`` must NOT be specified on non-source "
                             "ranks.")
        req = pg.comm.Iscatter(None, recv.bytes(), root=root)
    return _finish(pg, async_op, [req], "scatter", recv.write_back, [tensor])


def barrier(group=None, async_op: bool = False, device_ids=None, timeout=None):
    """Wait until every rank of the group has reached the barrier."""
    pg = _resolve(group)
    if pg is None:
        return None
    work = Work([pg.comm.Ibarrier()], pg, "barrier")
    if async_op:
        return work
    work.wait(timeout)
    return None


def _peer(pg, rank, group_rank, name: str) -> int:
    if rank is None and group_rank is None:
        raise ValueError(f"Must specify either {name} or group_{name}")
    return _root(pg, rank, group_rank, name)


def isend(tensor, dst=None, group=None, tag: int = 0, group_dst=None):
    """Send `tensor` to `dst` without waiting; returns the `Work`."""
    _check_tensor(tensor, "tensor")
    pg = _resolve(group)
    if pg is None:
        return None
    peer = _peer(pg, dst, group_dst, "dst")
    staged = _Staged(tensor)
    req = pg.comm.Isend(staged.bytes(), dest=peer, tag=tag)
    # The staging array must live until the send completes.
    return Work([req], pg, "send", outputs=[tensor], finish=lambda: staged)


def irecv(tensor, src=None, group=None, tag: int = 0, group_src=None):
    """Receive into `tensor` from `src` (any rank when None) without waiting."""
    _check_tensor(tensor, "tensor")
    pg = _resolve(group)
    if pg is None:
        return None
    MPI = _mpi()
    peer = MPI.ANY_SOURCE if src is None and group_src is None else _root(pg, src, group_src,
                                                                         "src")
    staged = _Staged(tensor)
    req = pg.comm.Irecv(staged.bytes(), source=peer, tag=tag)
    return Work([req], pg, "recv", staged.write_back, [tensor])


def send(tensor, dst=None, group=None, tag: int = 0, group_dst=None) -> None:
    """Send `tensor` to `dst` and wait until it has gone."""
    work = isend(tensor, dst, group, tag, group_dst)
    if work is not None:
        work.wait()


def recv(tensor, src=None, group=None, tag: int = 0, group_src=None) -> int:
    """Receive into `tensor` from `src` (any rank when None); returns the sender's rank."""
    _check_tensor(tensor, "tensor")
    pg = _resolve(group)
    if pg is None:
        return -1
    MPI = _mpi()
    peer = MPI.ANY_SOURCE if src is None and group_src is None else _root(pg, src, group_src,
                                                                         "src")
    staged = _Staged(tensor)
    status = MPI.Status()
    req = pg.comm.Irecv(staged.bytes(), source=peer, tag=tag)
    Work([req], pg, "recv", statuses=[status]).wait()
    staged.write_back()
    return pg.ranks[status.Get_source()]


def all_gather_object(object_list: list, obj, group=None) -> None:
    """Fill `object_list[i]` with rank i's picklable `obj`."""
    pg = _resolve(group)
    if pg is None:
        return
    payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
    sizes = np.empty(pg.size(), dtype=np.int64)
    Work([pg.comm.Iallgather(np.array([payload.size], dtype=np.int64), sizes)], pg,
         "all_gather_object").wait()
    flat = np.empty(int(sizes.sum()), dtype=np.uint8)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    req = pg.comm.Iallgatherv(payload, [flat, (sizes, offsets)])
    Work([req], pg, "all_gather_object").wait()
    for i in range(pg.size()):
        object_list[i] = pickle.loads(flat[offsets[i]:offsets[i] + sizes[i]].tobytes())


def broadcast_object_list(object_list: list, src=None, group=None, device=None,
                          group_src=None) -> None:
    """Replace `object_list`'s items with `src`'s (picklable objects)."""
    pg = _resolve(group)
    if pg is None:
        return
    root = _root(pg, src, group_src, "src")
    payload = np.frombuffer(pickle.dumps(list(object_list)), dtype=np.uint8)
    size = np.array([payload.size], dtype=np.int64)
    Work([pg.comm.Ibcast(size, root=root)], pg, "broadcast_object_list").wait()
    buf = payload.copy() if pg.rank() == root else np.empty(int(size[0]), dtype=np.uint8)
    Work([pg.comm.Ibcast(buf, root=root)], pg, "broadcast_object_list").wait()
    object_list[:] = pickle.loads(buf.tobytes())
