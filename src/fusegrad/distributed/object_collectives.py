"""Object collectives: Python objects (pickled) gathered, broadcast, scattered and sent
between ranks, as `torch.distributed`'s `*_object*` functions."""

from __future__ import annotations

import pickle

import numpy as np

from .collectives import _peer, _recv_peer, _root
from .process_group import _resolve
from .work import Work


def all_gather_object(object_list: list, obj, group=None) -> None:
    """Fill `object_list[i]` with rank i's picklable `obj`."""
    pg = _resolve(group, "all_gather_object")
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


def _wait(requests: list, pg, what: str) -> None:
    Work(requests, pg, what).wait()


def _pickled(obj) -> np.ndarray:
    return np.frombuffer(pickle.dumps(obj), dtype=np.uint8)


def broadcast_object_list(object_list: list, src=None, group=None, device=None,
                          group_src=None) -> None:
    """Replace `object_list`'s items with `src`'s (picklable objects).

    The source's list keeps its own objects; every other list must be as long as the
    source's (PyTorch broadcasts one size per item)."""
    pg = _resolve(group, "broadcast_object_list")
    if pg is None:
        return
    root = _root(pg, src, group_src, "src", "broadcast")
    mine = pg.rank() == root
    payload = _pickled(list(object_list)) if mine else None
    head = np.array([len(object_list), 0 if payload is None else payload.size], dtype=np.int64)
    _wait([pg.comm.Ibcast(head, root=root)], pg, "broadcast_object_list")
    buf = payload.copy() if mine else np.empty(int(head[1]), dtype=np.uint8)
    # Received even when the lengths differ, so that the ranks stay in step for the next
    # collective after the error.
    _wait([pg.comm.Ibcast(buf, root=root)], pg, "broadcast_object_list")
    if mine:
        return
    if int(head[0]) != len(object_list):
        raise RuntimeError(f"broadcast_object_list: the list on rank {pg.ranks[pg.rank()]} has "
                           f"{len(object_list)} items but the source's has {int(head[0])}")
    object_list[:] = pickle.loads(buf.tobytes())


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None) -> None:
    """Collect every rank's picklable `obj` into `object_gather_list` on `dst`."""
    pg = _resolve(group, "gather_object")
    if pg is None:
        return
    root = _root(pg, dst, group_dst, "dst", "gather")
    mine = pg.rank() == root
    if mine and object_gather_list is None:
        raise ValueError("Argument ``gather_list`` must be specified on destination rank.")
    payload = _pickled(obj)
    sizes = np.empty(pg.size(), dtype=np.int64) if mine else None
    _wait([pg.comm.Igather(np.array([payload.size], dtype=np.int64), sizes, root=root)], pg,
          "gather_object")
    if not mine:
        _wait([pg.comm.Igatherv(payload, None, root=root)], pg, "gather_object")
        return
    flat = np.empty(int(sizes.sum()), dtype=np.uint8)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    _wait([pg.comm.Igatherv(payload, [flat, (sizes, offsets)], root=root)], pg, "gather_object")
    for i in range(pg.size()):
        object_gather_list[i] = pickle.loads(flat[offsets[i]:offsets[i] + sizes[i]].tobytes())


def scatter_object_list(scatter_object_output_list: list, scatter_object_input_list=None,
                        src=None, group=None, group_src=None) -> None:
    """Put item i of `src`'s `scatter_object_input_list` into rank i's output list[0]."""
    if not isinstance(scatter_object_output_list, list) or not scatter_object_output_list:
        raise ValueError("Expected argument scatter_object_output_list to be a list of size at "
                         "least 1.")
    pg = _resolve(group, "scatter_object_list")
    if pg is None:
        return
    root = _root(pg, src, group_src, "src", "scatter")
    mine = pg.rank() == root
    sizes = offsets = flat = None
    if mine:
        payloads = [_pickled(o) for o in scatter_object_input_list]
        sizes = np.array([p.size for p in payloads], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        flat = np.concatenate(payloads) if payloads else np.empty(0, dtype=np.uint8)
    size = np.empty(1, dtype=np.int64)
    _wait([pg.comm.Iscatter(sizes, size, root=root)], pg, "scatter_object_list")
    buf = np.empty(int(size[0]), dtype=np.uint8)
    spec = [flat, (sizes, offsets)] if mine else None
    _wait([pg.comm.Iscatterv(spec, buf, root=root)], pg, "scatter_object_list")
    scatter_object_output_list[0] = pickle.loads(buf.tobytes())


def send_object_list(object_list: list, dst=None, group=None, device=None,
                     group_dst=None) -> None:
    """Send the picklable items of `object_list` to `dst` (received by recv_object_list)."""
    pg = _resolve(group, "send_object_list")
    if pg is None:
        return
    peer = _peer(pg, dst, group_dst, "dst")
    if peer == pg.rank():
        raise ValueError("Invalid destination rank: destination rank should not be the same "
                         "as the rank of the current process.")
    payload = _pickled(list(object_list))
    # The size, then the bytes: MPI keeps the order of two messages between one pair of ranks,
    # so the receiver takes the bytes from the rank whose size it got.
    _wait([pg.comm.Isend(np.array([payload.size], dtype=np.int64), dest=peer, tag=0),
           pg.comm.Isend(payload, dest=peer, tag=0)], pg, "send_object_list")


def recv_object_list(object_list: list, src=None, group=None, device=None,
                     group_src=None) -> int:
    """Fill `object_list` with the objects sent by `src` (any rank when None); returns the
    sender's global rank."""
    pg = _resolve(group, "recv_object_list")
    if pg is None:
        return -1
    if src is None and group_src is None:
        raise ValueError("Must specify global_rank or group_rank")
    peer = _recv_peer(pg, src, group_src, 0, "recv_object_list")
    size = np.empty(1, dtype=np.int64)
    status = pg.mpi.Status()
    Work([pg.comm.Irecv(size, source=peer, tag=0)], pg, "recv_object_list",
         statuses=[status]).wait()
    sender = status.Get_source()
    buf = np.empty(int(size[0]), dtype=np.uint8)
    _wait([pg.comm.Irecv(buf, source=sender, tag=0)], pg, "recv_object_list")
    objects = pickle.loads(buf.tobytes())
    object_list[:len(objects)] = objects
    return pg.ranks[sender]
