"""Collectives on tensors over MPI (or the TCP transport's stand-in for it, `_tcp`), in place
on the tensors' memory.

A contiguous tensor of a dtype MPI reduces natively is handed to MPI as it is (no copy); any
other tensor goes through one contiguous staging array that the finishing step copies back.
Every call issues non-blocking MPI requests: with `async_op=True` it returns the `Work`,
otherwise it waits (bounded by the group's timeout) and returns None.
"""

from __future__ import annotations

import enum
import warnings

import numpy as np

from .._tensor import Tensor
from . import _ring
from .process_group import GroupMember, _resolve
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
# A bool reduction runs on 0/1 bytes: "any" for SUM/MAX/BOR, "all" for PRODUCT/MIN/BAND,
# and the bytes' XOR (still 0 or 1) for BXOR.
_BOOL_OPS = {RedOpType.SUM: RedOpType.MAX, RedOpType.MAX: RedOpType.MAX,
             RedOpType.BOR: RedOpType.MAX, RedOpType.PRODUCT: RedOpType.MIN,
             RedOpType.MIN: RedOpType.MIN, RedOpType.BAND: RedOpType.MIN,
             RedOpType.BXOR: RedOpType.BXOR}


# Reductions PyTorch refuses on complex tensors (they have no order, or it does not multiply).
_NOT_COMPLEX = (RedOpType.MAX, RedOpType.MIN, RedOpType.PRODUCT, RedOpType.BAND,
                RedOpType.BOR, RedOpType.BXOR)


# Reductions the ring all-reduce does with NumPy (large tensors; see `_ring`).
_RING_UFUNCS = {RedOpType.SUM: np.add, RedOpType.AVG: np.add}


# (PyTorch's texts break their line and indent the rest by 13 spaces)
_BREAK = "\n" + " " * 13


def _check_tensor(t, name: str) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type "
                        f"torch.Tensor{_BREAK}but got {type(t)} instead.")


def _check_list(ts, name: str) -> None:
    if not isinstance(ts, list):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type "
                        f"List[torch.Tensor]{_BREAK}but got {type(ts)} instead.")
    if not all(isinstance(t, Tensor) for t in ts):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type "
                        f"List[torch.Tensor]{_BREAK}but got {type(ts)} with elements of type "
                        f"{[type(t) for t in ts]}.")


def _mpi_op(pg, op):
    MPI = pg.mpi
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
            target = self.data if self.data.flags.writeable else _writeable(self.data)
            np.copyto(target, self.flat.reshape(self.data.shape), casting="unsafe")
        _bump(self.tensor)


def _writeable(data: np.ndarray) -> np.ndarray:
    """A writeable array over the same memory as the read-only view `data`.

    An expanded tensor is a read-only NumPy view whose repeated elements share one memory
    location; gloo reduces it and writes the result back through it (every copy of an element
    holds the same reduced value), so fusegrad writes through a view of the writeable base.
    """
    root, link = data, data.base
    # NumPy's broadcast views hold their base through a helper object that has `.base` too.
    while link is not None:
        if isinstance(link, np.ndarray):
            root = link
        link = getattr(link, "base", None)
    if not root.flags.writeable:
        raise RuntimeError("fusegrad.distributed: the tensor's memory is read-only")
    offset = data.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return np.ndarray(data.shape, data.dtype, buffer=root, offset=offset,
                      strides=data.strides)


# PyTorch's names of the integral dtypes, for its message on an integer average.
_TORCH_NAMES = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short",
                "int32": "Int", "int64": "Long", "uint16": "UInt16", "uint32": "UInt32",
                "uint64": "UInt64"}
_BITWISE = (RedOpType.BAND, RedOpType.BOR, RedOpType.BXOR)


def _check_op(t: Tensor, op) -> None:
    """PyTorch's errors for a reduction its CPU backend refuses for `t`'s dtype."""
    op = RedOpType(op)
    name = t._data.dtype.name
    if op in _BITWISE and name not in _TORCH_NAMES:
        raise RuntimeError(f"Cannot use ReduceOp.{op.name} with non-integral dtype")
    if op is RedOpType.AVG and name in _TORCH_NAMES:
        # gloo divides the sum in place, which an integral tensor cannot hold.
        raise RuntimeError(f"result type Float can't be cast to the desired output type "
                           f"{_TORCH_NAMES[name]}")


def _reduce_buffer(pg, t: Tensor, op):
    """(staging, MPI buffer spec, MPI op) for reducing `t` with `op` on `pg`."""
    MPI = pg.mpi
    name = t._data.dtype.name
    _check_op(t, op)
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
    return staged, [staged.flat, getattr(MPI, kind)], _mpi_op(pg, op)


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


def _root(pg, rank, group_rank, name: str, what: str | None = None) -> int:
    """The group rank of a root given as a global `rank` or as `group_rank`.

    On the default group PyTorch hands the rank to the backend unchanged, and gloo's error
    names the collective (`what`); on another group the rank is translated first."""
    if rank is not None and group_rank is not None:
        raise ValueError(f"Can not specify both {name} and group_{name}")
    if group_rank is not None:
        if not 0 <= group_rank < pg.size():
            raise ValueError(f"Group rank {group_rank} is not part of group {pg!r}")
        return group_rank
    rank = 0 if rank is None else int(rank)
    if what is not None and pg is GroupMember.WORLD and not 0 <= rank < pg.size():
        raise RuntimeError(f"ProcessGroupGloo::{what}: invalid root rank: {rank}")
    return pg.group_rank(rank)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce `tensor` across the group with `op`, in place on every rank."""
    _check_tensor(tensor, "tensor")
    if tensor._data.dtype.kind == "c" and RedOpType(op) in _NOT_COMPLEX:
        raise ValueError(f"all_reduce does not support RedOpType.{RedOpType(op).name} on "
                         "complex tensors")
    pg = _resolve(group, "all_reduce")
    if pg is None:
        return None
    staged, buf, mpi_op = _reduce_buffer(pg, tensor, op)

    def finish():
        if RedOpType(op) is RedOpType.AVG:
            _average(staged, pg.size())
        staged.write_back()

    ufunc = _RING_UFUNCS.get(RedOpType(op)) if tensor._data.dtype != np.bool_ else None
    if pg.ring_comm is not None and _ring.usable(staged.flat, pg.size(), ufunc):
        pg.ring_calls += 1
        ring = _ring.RingAllreduce(pg.ring_comm, staged.flat, ufunc, pg.ring_calls)
        return _finish(pg, async_op, [], "all_reduce", finish, [tensor], ring)
    req = pg.comm.Iallreduce(pg.mpi.IN_PLACE, buf, mpi_op)
    return _finish(pg, async_op, [req], "all_reduce", finish, [tensor])


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op: bool = False,
           group_dst=None):
    """Reduce `tensor` across the group into `dst`'s tensor (the others keep theirs)."""
    _check_tensor(tensor, "tensor")
    pg = _resolve(group, "reduce")
    if pg is None:
        return None
    root = _root(pg, dst, group_dst, "dst", "reduce")
    staged, buf, mpi_op = _reduce_buffer(pg, tensor, op)
    mine = pg.rank() == root
    send = pg.mpi.IN_PLACE if mine else buf
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
    pg = _resolve(group, "broadcast")
    if pg is None:
        return None
    root = _root(pg, src, group_src, "src", "broadcast")
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
    pg = _resolve(group, "all_gather")
    if pg is None:
        return None
    _gather_layout(tensor_list, tensor, pg.size(), "all_gather")
    send = _Staged(tensor)
    flat = np.empty(pg.size() * send.flat.size, dtype=send.flat.dtype)
    req = pg.comm.Iallgather(send.bytes(), flat.view(np.uint8))
    return _finish(pg, async_op, [req], "all_gather", _scatter_into(tensor_list, flat),
                   tensor_list)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op: bool = False):
    """`all_gather_single` under its deprecated name (PyTorch's FutureWarning)."""
    warnings.warn("`torch.distributed.all_gather_into_tensor` is deprecated. Please use "
                  "`torch.distributed.all_gather_single` instead.", FutureWarning, stacklevel=2)
    return all_gather_single(output_tensor, input_tensor, group, async_op)


def all_gather_single(output_tensor, input_tensor, group=None, async_op: bool = False):
    """Concatenate every rank's `input_tensor` along dim 0 into `output_tensor`."""
    _check_tensor(output_tensor, "output_tensor")
    _check_tensor(input_tensor, "input_tensor")
    pg = _resolve(group, "all_gather_single")
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
    """`reduce_scatter_single` under its deprecated name (PyTorch's FutureWarning)."""
    warnings.warn("`torch.distributed.reduce_scatter_tensor` is deprecated. Please use "
                  "`torch.distributed.reduce_scatter_single` instead.", FutureWarning,
                  stacklevel=2)
    return reduce_scatter_single(output, input, op, group, async_op)


def reduce_scatter_single(output, input, op=ReduceOp.SUM, group=None,  # noqa: A002
                          async_op: bool = False):
    """Reduce `input` across ranks and give rank i the i-th of its equal dim-0 blocks."""
    _check_tensor(output, "output")
    _check_tensor(input, "input")
    pg = _resolve(group, "reduce_scatter_single")
    if pg is None:
        return None
    if input._data.dtype != output._data.dtype:
        raise ValueError("Invalid usage of tensors with different dtypes")
    if input._data.size != pg.size() * output._data.size:
        raise ValueError("input tensor must be the same size as output size times world size")
    staged_in, buf_in, mpi_op = _reduce_buffer(pg, input, op)
    staged_out, buf_out, _ = _reduce_buffer(pg, output, op)
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
    pg = _resolve(group, "gather")
    if pg is None:
        return None
    root = _root(pg, dst, group_dst, "dst", "gather")
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
    pg = _resolve(group, "scatter")
    if pg is None:
        return None
    root = _root(pg, src, group_src, "src", "scatter")
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
    pg = _resolve(group, "barrier")
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


def _check_p2p(pg, peer: int, tag, what: str) -> None:
    """PyTorch's refusals of a negative tag and of a message to this process itself (gloo has
    no connection to itself; MPI would wait forever for the matching call)."""
    if int(tag) < 0:
        raise RuntimeError("Tag must be nonnegative")
    if peer == pg.rank():
        raise RuntimeError(f"fusegrad.distributed: {what} with rank {pg.ranks[peer]}, the "
                           f"current process's own rank: gloo has no connection to it")


def _sender(pg, status):
    """The global rank of the sender recorded in `status` (for `Work.source_rank`)."""
    return lambda: pg.ranks[status.Get_source()]


def isend(tensor, dst=None, group=None, tag: int = 0, group_dst=None):
    """Send `tensor` to `dst` without waiting; returns the `Work`."""
    _check_tensor(tensor, "tensor")
    pg = _resolve(group, "isend")
    if pg is None:
        return None
    peer = _peer(pg, dst, group_dst, "dst")
    _check_p2p(pg, peer, tag, "isend")
    staged = _Staged(tensor)
    req = pg.comm.Isend(staged.bytes(), dest=peer, tag=tag)
    # The staging array must live until the send completes.
    return Work([req], pg, "send", outputs=[tensor], finish=lambda: staged)


def _recv_peer(pg, src, group_src, tag, what: str) -> int:
    MPI = pg.mpi
    if src is None and group_src is None:
        if int(tag) < 0:
            raise RuntimeError("Tag must be nonnegative")
        return MPI.ANY_SOURCE
    peer = _root(pg, src, group_src, "src")
    _check_p2p(pg, peer, tag, what)
    return peer


def irecv(tensor, src=None, group=None, tag: int = 0, group_src=None):
    """Receive into `tensor` from `src` (any rank when None) without waiting."""
    _check_tensor(tensor, "tensor")
    pg = _resolve(group, "irecv")
    if pg is None:
        return None
    peer = _recv_peer(pg, src, group_src, tag, "irecv")
    staged = _Staged(tensor)
    status = pg.mpi.Status()
    req = pg.comm.Irecv(staged.bytes(), source=peer, tag=tag)
    return Work([req], pg, "recv", staged.write_back, [tensor], statuses=[status],
                source=_sender(pg, status))


def send(tensor, dst=None, group=None, tag: int = 0, group_dst=None) -> None:
    """Send `tensor` to `dst` and wait until it has gone."""
    pg = _resolve(group)
    if pg is not None and dst is not None and group_dst is None and int(dst) == pg.ranks[
            pg.rank()]:
        raise ValueError("Invalid destination rank: destination rank should not be the same "
                         "as the rank of the current process.")
    work = isend(tensor, dst, group, tag, group_dst)
    if work is not None:
        work.wait()


def recv(tensor, src=None, group=None, tag: int = 0, group_src=None) -> int:
    """Receive into `tensor` from `src` (any rank when None); returns the sender's rank."""
    _check_tensor(tensor, "tensor")
    pg = _resolve(group, "irecv")
    if pg is None:
        return -1
    peer = _recv_peer(pg, src, group_src, tag, "recv")
    staged = _Staged(tensor)
    status = pg.mpi.Status()
    req = pg.comm.Irecv(staged.bytes(), source=peer, tag=tag)
    Work([req], pg, "recv", statuses=[status]).wait()
    staged.write_back()
    return pg.ranks[status.Get_source()]


def _dim0_splits(t: Tensor, splits, size: int, what: str) -> list[int]:
    """Rows of `t` per rank: `splits`, or an equal share of dim 0."""
    rows = t._data.shape[0] if t._data.ndim else 1
    if splits is None or len(splits) == 0:
        if rows % size:
            raise ValueError(f"{what}: dim 0 of the tensor ({rows}) must be divisible by the "
                             f"group size ({size}) when no split sizes are given")
        return [rows // size] * size
    splits = [int(n) for n in splits]
    if len(splits) != size or sum(splits) != rows or min(splits) < 0:
        raise ValueError(f"{what}: split sizes {splits} must be {size} non-negative numbers "
                         f"summing to dim 0 of the tensor ({rows})")
    return splits


def _counts(rows: list[int], row_bytes: int):
    counts = np.array(rows, dtype=np.int64) * row_bytes
    return counts, np.concatenate([[0], np.cumsum(counts)[:-1]])


def all_to_all_single(output, input, output_split_sizes=None,  # noqa: A002
                      input_split_sizes=None, group=None, async_op: bool = False):
    """Send block i of `input` (dim 0, by `input_split_sizes`) to rank i; receive rank i's
    block for this rank into block i of `output` (by `output_split_sizes`)."""
    _check_tensor(output, "output")
    _check_tensor(input, "input")
    pg = _resolve(group, "all_to_all_single")
    if pg is None:
        return None
    if output._data.dtype != input._data.dtype:
        raise ValueError("Invalid usage of tensors with different dtypes")
    size = pg.size()
    send = _Staged(input)
    recv = _Staged(output)
    row_in = send.bytes().size // max(input._data.shape[0] if input._data.ndim else 1, 1)
    row_out = recv.bytes().size // max(output._data.shape[0] if output._data.ndim else 1, 1)
    s_counts, s_displs = _counts(_dim0_splits(input, input_split_sizes, size,
                                              "all_to_all_single"), row_in)
    r_counts, r_displs = _counts(_dim0_splits(output, output_split_sizes, size,
                                              "all_to_all_single"), row_out)
    req = pg.comm.Ialltoallv([send.bytes(), (s_counts, s_displs)],
                             [recv.bytes(), (r_counts, r_displs)])
    return _finish(pg, async_op, [req], "all_to_all_single",
                   lambda: (send, recv.write_back()), [output])


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op: bool = False):
    """Send `input_tensor_list[i]` to rank i; receive rank i's into `output_tensor_list[i]`."""
    _check_list(output_tensor_list, "output_tensor_list")
    _check_list(input_tensor_list, "input_tensor_list")
    pg = _resolve(group, "all_to_all")
    if pg is None:
        return None
    size = pg.size()
    if len(input_tensor_list) != size or len(output_tensor_list) != size:
        raise ValueError(f"all_to_all: the tensor lists must have {size} tensors, one per rank")
    dtypes = {t._data.dtype for t in [*input_tensor_list, *output_tensor_list]}
    if len(dtypes) != 1:
        raise ValueError("Invalid usage of tensors with different dtypes")
    ins = [np.ascontiguousarray(t._data).reshape(-1).view(np.uint8) for t in input_tensor_list]
    flat_in = np.concatenate(ins)
    s_counts, s_displs = _counts([a.size for a in ins], 1)
    sizes = [t._data.nbytes for t in output_tensor_list]
    flat_out = np.empty(sum(sizes), dtype=np.uint8)
    r_counts, r_displs = _counts(sizes, 1)
    req = pg.comm.Ialltoallv([flat_in, (s_counts, s_displs)], [flat_out, (r_counts, r_displs)])

    def finish():
        for out, start, n in zip(output_tensor_list, r_displs, sizes):
            block = flat_out[start:start + n].view(out._data.dtype)
            np.copyto(out._data, block.reshape(out._data.shape))
            _bump(out)

    return _finish(pg, async_op, [req], "all_to_all", finish, output_tensor_list)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce `input_list[i]` across ranks into rank i's `output`."""
    _check_tensor(output, "output")
    _check_list(input_list, "input_list")
    pg = _resolve(group, "reduce_scatter")
    if pg is None:
        return None
    if len(input_list) != pg.size():
        raise ValueError(f"reduce_scatter: the input list must have {pg.size()} tensors, one "
                         f"per rank")
    for t in input_list:
        if t._data.dtype != output._data.dtype:
            raise ValueError("Invalid usage of tensors with different dtypes")
        if t._data.size != output._data.size:
            raise ValueError("reduce_scatter: every input must have the output's "
                             f"{output._data.size} elements")
    # The list as one tensor of consecutive blocks: the same reduction as the tensor form.
    from .._creation import from_numpy

    joined = from_numpy(np.concatenate([np.ascontiguousarray(t._data).reshape(-1)
                                        for t in input_list]))
    return reduce_scatter_single(output, joined, op, group, async_op)


def monitored_barrier(group=None, timeout=None, wait_all_ranks: bool = False) -> None:
    """A barrier that fails after `timeout` (the group's when None) instead of waiting on."""
    pg = _resolve(group, "monitored_barrier")
    if pg is None:
        return
    barrier(pg, timeout=timeout if timeout is not None else pg.timeout)


class P2POp:
    """One point-to-point operation for `batch_isend_irecv`: `op` is `isend` or `irecv`."""

    def __init__(self, op, tensor, peer=None, group=None, tag: int = 0, group_peer=None):
        if op not in (isend, irecv):
            raise ValueError("Invalid ``op``. Expected ``op`` to be of type "
                             "``torch.distributed.isend`` or ``torch.distributed.irecv``.")
        _check_tensor(tensor, "tensor")
        self.op = op
        self.tensor = tensor
        self.peer = peer
        self.group = group
        self.tag = tag
        self.group_peer = group_peer

    def __repr__(self) -> str:
        return (f"P2POp({self.op.__name__} peer={self.peer}, group_peer={self.group_peer}, "
                f"{tuple(self.tensor.shape)}, {self.tensor.dtype})")


def batch_isend_irecv(p2p_op_list) -> list:
    """Start every operation of `p2p_op_list`; returns their `Work`s, in the list's order."""
    if not isinstance(p2p_op_list, list) or not all(isinstance(p, P2POp)
                                                   for p in p2p_op_list):
        raise ValueError("Invalid ``p2p_op_list``. Each op is expected to to be of type "
                         "``torch.distributed.P2POp``.")
    works = []
    for p in p2p_op_list:
        if p.op is isend:
            work = isend(p.tensor, p.peer, p.group, p.tag, p.group_peer)
        else:
            work = irecv(p.tensor, p.peer, p.group, p.tag, p.group_peer)
        if work is not None:
            works.append(work)
    return works
