"""A TCP transport that gives process groups the part of mpi4py's API they use.

Without an MPI launch (`mp.spawn`, torchrun's environment, `tcp://` or `file://`
rendezvous) the ranks meet through a store (`store.py`) and open one TCP connection per pair
of ranks. This module then plays the role of `mpi4py.MPI` for `collectives.py`: `Comm` has
`Isend`/`Irecv` (tags, `ANY_SOURCE`), the non-blocking collectives, `Split`, `Dup` and
`Create_group`; `Request.Testall` tests requests; the reduction ops, `IN_PLACE`, `Status`.

A reader thread per connection takes every message off its socket as soon as it arrives: into
the buffer of a posted receive that matches it (communicator, sender, tag; in posting order),
or into a queue of unexpected messages that later receives take from. Sends therefore never
block for long, and go out at once from the calling thread (a send request is complete when
it returns). A collective is a generator that posts one round of sends and receives at a time;
every `Testall` moves all pending collectives along in issue order, so ranks may wait on them
in any order. Collectives reduce in rank order (rank 0's contribution, then rank 1's, ...),
each segment of an all-reduce on one rank, so every rank gets the same bits.

A wait that times out closes the communicator's pairs, as gloo closes a group's: its pending
receives are dropped, later operations on it fail ("Application timeout caused pair
closure"), and a control message makes the peers' operations on it fail at once ("Connection
closed by peer") instead of waiting out their own timeouts; other communicators go on.
"""

from __future__ import annotations

import datetime
import hashlib
import socket
import struct
import threading
import time

import numpy as np

_HEADER = struct.Struct("<qqq")     # communicator context, tag, payload bytes
_SMALL = 1 << 16                    # payloads sent in one call with their header
# The tag of the message that tells a peer this rank closed its pairs of a communicator
# (after a timeout, as gloo closes a context's pairs); every other tag is non-negative.
_CLOSE_TAG = -7
_TIMEOUT_CLOSED = "Application timeout caused pair closure"

ANY_SOURCE = -1
UNDEFINED = -32766
TAG_UB = "TAG_UB"


class _Sentinel:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


IN_PLACE = _Sentinel("IN_PLACE")
COMM_NULL = _Sentinel("COMM_NULL")


class _Op:
    """A reduction: the NumPy ufunc that combines two contributions."""

    def __init__(self, name: str, ufunc) -> None:
        self.name = name
        self.ufunc = ufunc

    def __repr__(self) -> str:
        return self.name


SUM = _Op("SUM", np.add)
PROD = _Op("PROD", np.multiply)
MIN = _Op("MIN", np.minimum)
MAX = _Op("MAX", np.maximum)
BAND = _Op("BAND", np.bitwise_and)
BOR = _Op("BOR", np.bitwise_or)
BXOR = _Op("BXOR", np.bitwise_xor)

# MPI datatype names `collectives.py` passes with buffers; the arrays' dtypes say the same.
for _name in ("FLOAT", "DOUBLE", "INT8_T", "INT16_T", "INT32_T", "INT64_T", "UINT8_T",
              "UINT16_T", "UINT32_T", "UINT64_T", "C_FLOAT_COMPLEX", "C_DOUBLE_COMPLEX"):
    globals()[_name] = _name
del _name

_CLOSED = ("Connection closed by peer {}. This is typically caused by a remote worker "
           "crashing. Check the logs of the remote worker before reporting an error. GLHF! "
           "\U0001f3d6\ufe0f")


def _closed(address: str) -> str:
    host, _, port = address.rpartition(":")
    return _CLOSED.format(f"[{host}]:{port}")


class Status:
    """The sender of a completed receive."""

    def __init__(self) -> None:
        self.source = ANY_SOURCE

    def Get_source(self) -> int:  # noqa: N802 - mpi4py's name
        """The sender's rank in the receive's communicator."""
        return self.source


class _Request:
    """A send or receive; `done` is set (by a reader thread for receives) when complete."""

    def __init__(self) -> None:
        self.done = False
        self.error: BaseException | None = None
        self.source = ANY_SOURCE

    def test(self) -> bool:
        if self.error is not None:
            raise self.error
        return self.done


class _Recv(_Request):
    def __init__(self, comm, src: int, ctx: int, tag: int, buf: memoryview) -> None:
        super().__init__()
        self.comm = comm
        self.src, self.ctx, self.tag, self.buf = src, ctx, tag, buf

    def matches(self, src: int, ctx: int, tag: int) -> bool:
        return ctx == self.ctx and tag == self.tag and self.src in (ANY_SOURCE, src)

    def fill(self, src: int, data) -> None:
        if len(data) > len(self.buf):
            self.error = RuntimeError(f"fusegrad.distributed: a message of {len(data)} bytes "
                                      f"does not fit the receive buffer of {len(self.buf)}")
        else:
            self.buf[:len(data)] = data
        self.complete(src)

    def complete(self, src: int) -> None:
        ranks = self.comm.ranks if self.comm is not None else None
        self.source = ranks.index(src) if ranks and src in ranks else src
        self.done = True


class _Peer:
    def __init__(self, rank: int, sock: socket.socket, address: str) -> None:
        self.rank = rank
        self.sock = sock
        self.address = address
        self.send_lock = threading.Lock()
        self.closed = False


def _as_bytes(arr) -> memoryview:
    """A writable (or readable) byte view of a contiguous array."""
    if isinstance(arr, memoryview):
        return arr.cast("B") if arr.format != "B" else arr
    a = np.asarray(arr)
    return memoryview(a.reshape(-1).view(np.uint8))


class Transport:
    """The connections of this rank to every other rank, and the matching of messages."""

    def __init__(self, rank: int, size: int, socks: dict, addresses: dict) -> None:
        self.rank = rank
        self.size = size
        self.lock = threading.Lock()
        self.posted: dict[int, list[_Recv]] = {}
        self.unexpected: dict[int, list[tuple]] = {}
        self.closing = False
        # (context, world rank) of the pairs closed after a timeout, here or at the peer: no
        # message goes or comes through them any more.
        self.closed_pairs: set[tuple[int, int]] = set()
        self.peers = {r: _Peer(r, s, addresses.get(r, "?")) for r, s in socks.items()}
        for peer in self.peers.values():
            threading.Thread(target=self._reader, args=(peer,), daemon=True,
                             name=f"fusegrad-tcp-{peer.rank}").start()

    # -- sending --------------------------------------------------------------------------
    def send(self, dst: int, ctx: int, tag: int, data: memoryview) -> _Request:
        req = _Request()
        if dst == self.rank:
            self._deliver(dst, ctx, tag, bytes(data))
            req.done = True
            return req
        peer = self.peers[dst]
        if peer.closed or (ctx, dst) in self.closed_pairs:
            req.error = RuntimeError(_closed(peer.address))
            return req
        header = _HEADER.pack(ctx, tag, len(data))
        try:
            with peer.send_lock:
                if len(data) <= _SMALL:
                    peer.sock.sendall(header + bytes(data))
                else:
                    peer.sock.sendall(header)
                    peer.sock.sendall(data)
        except OSError:
            req.error = RuntimeError(_closed(peer.address))
            return req
        req.done = True
        return req

    # -- receiving ------------------------------------------------------------------------
    def recv(self, comm, src: int, ctx: int, tag: int, buf: memoryview) -> _Recv:
        req = _Recv(comm, src, ctx, tag, buf)
        with self.lock:
            queue = self.unexpected.get(ctx)
            if queue:
                for i, (s, t, data) in enumerate(queue):
                    if t == tag and src in (ANY_SOURCE, s):
                        del queue[i]
                        req.fill(s, data)
                        return req
            if src != ANY_SOURCE and src != self.rank and (
                    self.peers[src].closed or (ctx, src) in self.closed_pairs):
                req.error = RuntimeError(_closed(self.peers[src].address))
                return req
            self.posted.setdefault(ctx, []).append(req)
        return req

    def _take_posted(self, src: int, ctx: int, tag: int) -> _Recv | None:
        """The oldest posted receive matching the message, removed (call with the lock)."""
        queue = self.posted.get(ctx)
        if queue:
            for i, req in enumerate(queue):
                if req.matches(src, ctx, tag):
                    del queue[i]
                    return req
        return None

    def _deliver(self, src: int, ctx: int, tag: int, data) -> None:
        with self.lock:
            if (ctx, src) in self.closed_pairs:
                return          # (through a pair closed here after a timeout)
            req = self._take_posted(src, ctx, tag)
            if req is None:
                self.unexpected.setdefault(ctx, []).append((src, tag, data))
                return
        req.fill(src, data)

    def _reader(self, peer: _Peer) -> None:
        sock = peer.sock
        try:
            while True:
                header = _recv_exact(sock, _HEADER.size)
                if header is None:
                    break
                ctx, tag, n = _HEADER.unpack(header)
                if tag == _CLOSE_TAG:
                    self._pairs_closed_by(peer, ctx)
                    continue
                with self.lock:
                    req = self._take_posted(peer.rank, ctx, tag)
                if req is not None and n <= len(req.buf):
                    if n and not _recv_into(sock, req.buf[:n]):
                        break
                    req.complete(peer.rank)
                    continue
                data = bytearray(n)
                if n and not _recv_into(sock, memoryview(data)):
                    break
                if req is not None:
                    req.fill(peer.rank, data)   # too long for its buffer: the request fails
                    continue
                self._deliver(peer.rank, ctx, tag, data)
        except OSError:
            pass
        self._peer_closed(peer)

    def _pairs_closed_by(self, peer: _Peer, ctx: int) -> None:
        """`peer` closed its pairs of the communicator `ctx`: its receives from there fail."""
        error = RuntimeError(_closed(peer.address))
        with self.lock:
            for c in (ctx, ctx + 1):        # (its point-to-point and collective messages)
                self.closed_pairs.add((c, peer.rank))
                queue = self.posted.get(c, [])
                for req in [r for r in queue if r.src == peer.rank]:
                    queue.remove(req)
                    req.error = error

    def close_pairs(self, ctx: int, ranks: list[int]) -> None:
        """Close this rank's pairs of communicator `ctx` with `ranks` after a timeout: its
        pending receives there are dropped (a late message must not land in a tensor the
        program has moved on with), later messages are discarded, and each peer is told."""
        error = RuntimeError(_TIMEOUT_CLOSED)
        with self.lock:
            for c in (ctx, ctx + 1):
                for r in ranks:
                    self.closed_pairs.add((c, r))
                for req in self.posted.pop(c, []):
                    req.error = error
                self.unexpected.pop(c, None)
        header = _HEADER.pack(ctx, _CLOSE_TAG, 0)
        for r in ranks:
            peer = self.peers.get(r)
            if peer is None or peer.closed:
                continue
            try:
                with peer.send_lock:
                    peer.sock.sendall(header)
            except OSError:
                pass

    def _peer_closed(self, peer: _Peer) -> None:
        with self.lock:
            peer.closed = True
            if self.closing:
                return
            error = RuntimeError(_closed(peer.address))
            for queue in self.posted.values():
                for req in [r for r in queue if r.src == peer.rank]:
                    queue.remove(req)
                    req.error = error

    def close(self) -> None:
        """Close every connection (the reader threads end on their own)."""
        with self.lock:
            self.closing = True
        for peer in self.peers.values():
            try:
                peer.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            peer.sock.close()


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray(n)
    return bytes(buf) if _recv_into(sock, memoryview(buf)) else None


def _recv_into(sock: socket.socket, view: memoryview) -> bool:
    got, n = 0, len(view)
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            return False
        got += k
    return True


# -- collectives as generators of request rounds ----------------------------------------------
_ACTIVE: list = []


class _Collective(_Request):
    """A collective in flight: a generator that yields the requests of each round."""

    def __init__(self, rounds, comm=None) -> None:
        super().__init__()
        self.comm = comm
        self.rounds = rounds
        self.waiting: list = []
        _ACTIVE.append(self)
        self.advance()

    def advance(self) -> None:
        if self.done or self.error is not None:
            return
        try:
            while all(r.test() for r in self.waiting):
                self.waiting = next(self.rounds)
        except StopIteration:
            self.done = True
        except RuntimeError as exc:
            self.error = exc
        if self.done or self.error is not None:
            if self in _ACTIVE:
                _ACTIVE.remove(self)


def progress() -> None:
    """Move every pending collective along, oldest first."""
    for coll in list(_ACTIVE):
        coll.advance()


class Request:
    """mpi4py's `Request.Testall` over this transport's requests."""

    @staticmethod
    def Testall(requests: list, statuses: list | None = None) -> bool:  # noqa: N802
        """Whether every request has completed (raises the error of one that failed)."""
        progress()
        if not all(r.test() for r in requests):
            return False
        if statuses is not None:
            for req, status in zip(requests, statuses):
                status.source = req.source
        return True


def _context(*parts) -> int:
    """A communicator's message context: the same on every member, distinct per comm."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 62) - 2)


def _spec(spec):
    """(array, counts, displacements) of an mpi4py buffer spec."""
    if spec is None or spec is IN_PLACE:
        return spec, None, None
    if isinstance(spec, (list, tuple)):
        arr = spec[0]
        if len(spec) > 1 and isinstance(spec[1], (list, tuple)):
            return np.asarray(arr).reshape(-1), spec[1][0], spec[1][1]
        return np.asarray(arr).reshape(-1), None, None
    return np.asarray(spec).reshape(-1), None, None


class _Group:
    def __init__(self, ranks: list[int]) -> None:
        self.ranks = list(ranks)

    def Incl(self, members) -> _Group:  # noqa: N802 - mpi4py's name
        return _Group([self.ranks[m] for m in members])


class Comm:
    """A communicator: `ranks` are the members' world ranks in communicator-rank order."""

    def __init__(self, transport: Transport, ranks: list[int], ctx: int) -> None:
        self.t = transport
        self.ranks = list(ranks)
        self.ctx = ctx
        self.rank = self.ranks.index(transport.rank)
        self.seq = 0
        self.children = 0
        self.group_children: dict = {}
        # Set after a wait on this communicator timed out: gloo then closes the connections.
        self.timed_out = False

    def _usable(self) -> None:
        if self.timed_out:
            raise RuntimeError(_TIMEOUT_CLOSED)

    def abort_pairs(self) -> None:
        """After a timeout, close this communicator's pairs as gloo does: every operation on
        it fails here from now on, the peers' with "Connection closed by peer", and its
        collectives in flight stop."""
        self.timed_out = True
        error = RuntimeError(_TIMEOUT_CLOSED)
        for coll in [c for c in _ACTIVE if c.comm is self]:
            coll.error = error
            _ACTIVE.remove(coll)
        self.t.close_pairs(self.ctx, [r for r in self.ranks if r != self.t.rank])

    def Get_rank(self) -> int:  # noqa: N802
        return self.rank

    def Get_size(self) -> int:  # noqa: N802
        return len(self.ranks)

    def Get_attr(self, key):  # noqa: N802
        return (1 << 31) - 1 if key == TAG_UB else None

    def Free(self) -> None:  # noqa: N802
        """Nothing to release: the connections belong to the world."""

    def Abort(self, code: int = 1) -> None:  # noqa: N802
        import os

        os._exit(code)

    # -- point to point --------------------------------------------------------------------
    def Isend(self, buf, dest: int, tag: int = 0):  # noqa: N802
        self._usable()
        arr, _, _ = _spec(buf)
        return self.t.send(self.ranks[dest], self.ctx, int(tag), _as_bytes(arr))

    def Irecv(self, buf, source: int = ANY_SOURCE, tag: int = 0):  # noqa: N802
        self._usable()
        arr, _, _ = _spec(buf)
        src = ANY_SOURCE if source == ANY_SOURCE else self.ranks[source]
        return self.t.recv(self, src, self.ctx, int(tag), _as_bytes(arr))

    # -- collectives -----------------------------------------------------------------------
    def _send(self, dst: int, tag: int, arr) -> _Request:
        return self.t.send(self.ranks[dst], self.ctx + 1, tag, _as_bytes(arr))

    def _recv(self, src: int, tag: int, arr) -> _Recv:
        return self.t.recv(self, self.ranks[src], self.ctx + 1, tag, _as_bytes(arr))

    def _start(self, body, *args) -> _Collective:
        # Every member issues its collectives in the same order, so the call number tells
        # the messages of two collectives in flight apart.
        self._usable()
        self.seq += 1
        return _Collective(body(self, self.seq * 8, *args), self)

    def Iallreduce(self, sendbuf, recvbuf, op):  # noqa: N802
        arr, _, _ = _spec(recvbuf)
        if sendbuf is not IN_PLACE:
            np.copyto(arr, _spec(sendbuf)[0])
        return self._start(_allreduce, arr, op.ufunc)

    def Ireduce(self, sendbuf, recvbuf, op, root: int = 0):  # noqa: N802
        data = _spec(recvbuf)[0] if sendbuf is IN_PLACE else _spec(sendbuf)[0]
        return self._start(_reduce, data, op.ufunc, root)

    def Ibcast(self, buf, root: int = 0):  # noqa: N802
        return self._start(_bcast, _spec(buf)[0], root)

    def Iallgather(self, sendbuf, recvbuf):  # noqa: N802
        send = _as_bytes(_spec(sendbuf)[0])
        recv = _as_bytes(_spec(recvbuf)[0])
        n = len(send)
        blocks = [(i * n, n) for i in range(self.Get_size())]
        return self._start(_allgatherv, send, recv, blocks)

    def Iallgatherv(self, sendbuf, recvbuf):  # noqa: N802
        send = _as_bytes(_spec(sendbuf)[0])
        arr, counts, displs = _spec(recvbuf)
        return self._start(_allgatherv, send, _as_bytes(arr), _blocks(arr, counts, displs))

    def Ireduce_scatter_block(self, sendbuf, recvbuf, op):  # noqa: N802
        return self._start(_reduce_scatter, _spec(sendbuf)[0], _spec(recvbuf)[0], op.ufunc)

    def Igather(self, sendbuf, recvbuf, root: int = 0):  # noqa: N802
        send = _as_bytes(_spec(sendbuf)[0])
        recv = None
        blocks = None
        if self.rank == root:
            recv = _as_bytes(_spec(recvbuf)[0])
            blocks = [(i * len(send), len(send)) for i in range(self.Get_size())]
        return self._start(_gatherv, send, recv, blocks, root)

    def Igatherv(self, sendbuf, recvbuf, root: int = 0):  # noqa: N802
        send = _as_bytes(_spec(sendbuf)[0])
        recv = blocks = None
        if self.rank == root:
            arr, counts, displs = _spec(recvbuf)
            recv, blocks = _as_bytes(arr), _blocks(arr, counts, displs)
        return self._start(_gatherv, send, recv, blocks, root)

    def Iscatter(self, sendbuf, recvbuf, root: int = 0):  # noqa: N802
        recv = _as_bytes(_spec(recvbuf)[0])
        send = blocks = None
        if self.rank == root:
            send = _as_bytes(_spec(sendbuf)[0])
            blocks = [(i * len(recv), len(recv)) for i in range(self.Get_size())]
        return self._start(_scatterv, send, recv, blocks, root)

    def Iscatterv(self, sendbuf, recvbuf, root: int = 0):  # noqa: N802
        recv = _as_bytes(_spec(recvbuf)[0])
        send = blocks = None
        if self.rank == root:
            arr, counts, displs = _spec(sendbuf)
            send, blocks = _as_bytes(arr), _blocks(arr, counts, displs)
        return self._start(_scatterv, send, recv, blocks, root)

    def Ibarrier(self):  # noqa: N802
        return self._start(_barrier)

    def Ialltoallv(self, sendbuf, recvbuf):  # noqa: N802
        s_arr, s_counts, s_displs = _spec(sendbuf)
        r_arr, r_counts, r_displs = _spec(recvbuf)
        return self._start(_alltoallv, _as_bytes(s_arr), _blocks(s_arr, s_counts, s_displs),
                           _as_bytes(r_arr), _blocks(r_arr, r_counts, r_displs))

    # -- new communicators -----------------------------------------------------------------
    def Dup(self) -> Comm:  # noqa: N802
        self.children += 1
        return Comm(self.t, self.ranks, _context(self.ctx, "dup", self.children))

    def Split(self, color: int, key: int = 0):  # noqa: N802
        mine = np.array([color, key], dtype=np.int64)
        everyone = np.empty(2 * self.Get_size(), dtype=np.int64)
        _wait(self.Iallgather(mine, everyone))
        self.children += 1
        if color == UNDEFINED:
            return COMM_NULL
        pairs = everyone.reshape(-1, 2)
        members = sorted((int(k), r) for r, (c, k) in enumerate(pairs) if c == color)
        ranks = [self.ranks[r] for _, r in members]
        return Comm(self.t, ranks, _context(self.ctx, "split", self.children, int(color)))

    def Get_group(self) -> _Group:  # noqa: N802
        return _Group(list(range(self.Get_size())))

    def Create_group(self, group: _Group) -> Comm:  # noqa: N802
        members = tuple(group.ranks)
        n = self.group_children.get(members, 0) + 1
        self.group_children[members] = n
        return Comm(self.t, [self.ranks[m] for m in members],
                    _context(self.ctx, "group", members, n))


def _blocks(arr, counts, displs) -> list[tuple[int, int]]:
    """(byte offset, byte count) per rank of a v-collective's counts and displacements."""
    item = np.asarray(arr).itemsize if arr is not None else 1
    return [(int(d) * item, int(c) * item) for c, d in zip(counts, displs)]


def _wait(req, seconds: float = 1800.0) -> None:
    deadline = time.monotonic() + seconds
    while not Request.Testall([req]):
        if time.monotonic() > deadline:
            raise RuntimeError("fusegrad.distributed: a communicator split timed out")
        time.sleep(1e-4)


def _combine(parts: list, ufunc, out) -> None:
    """`out` = parts[0] op parts[1] op ... in rank order (the same bits on every rank)."""
    acc = parts[0].copy()
    for p in parts[1:]:
        ufunc(acc, p, out=acc)
    out[...] = acc


def _allreduce(c: Comm, tag: int, buf: np.ndarray, ufunc):
    """Each rank reduces one segment of every rank's array, then sends it to all."""
    n, r = c.Get_size(), c.rank
    if n == 1:
        return
    bounds = [i * buf.size // n for i in range(n + 1)]
    segs = [buf[bounds[i]:bounds[i + 1]] for i in range(n)]
    parts = [segs[r] if j == r else np.empty_like(segs[r]) for j in range(n)]
    reqs = [c._recv(j, tag, parts[j]) for j in range(n) if j != r]
    reqs += [c._send(j, tag, segs[j]) for j in range(n) if j != r]
    yield reqs
    _combine(parts, ufunc, segs[r])
    reqs = [c._recv(j, tag + 1, segs[j]) for j in range(n) if j != r]
    reqs += [c._send(j, tag + 1, segs[r]) for j in range(n) if j != r]
    yield reqs


def _reduce(c: Comm, tag: int, data: np.ndarray, ufunc, root: int):
    n, r = c.Get_size(), c.rank
    if n == 1:
        return
    if r != root:
        yield [c._send(root, tag, data)]
        return
    parts = [data if j == r else np.empty_like(data) for j in range(n)]
    yield [c._recv(j, tag, parts[j]) for j in range(n) if j != r]
    _combine(parts, ufunc, data)


def _bcast(c: Comm, tag: int, buf: np.ndarray, root: int):
    if c.Get_size() == 1:
        return
    if c.rank == root:
        yield [c._send(j, tag, buf) for j in range(c.Get_size()) if j != root]
    else:
        yield [c._recv(root, tag, buf)]


def _allgatherv(c: Comm, tag: int, send: memoryview, recv: memoryview, blocks):
    r = c.rank
    off, cnt = blocks[r]
    recv[off:off + cnt] = send[:cnt]
    reqs = [c._recv(j, tag, recv[o:o + k]) for j, (o, k) in enumerate(blocks) if j != r]
    reqs += [c._send(j, tag, send) for j in range(c.Get_size()) if j != r]
    yield reqs


def _reduce_scatter(c: Comm, tag: int, send: np.ndarray, recv: np.ndarray, ufunc):
    n, r = c.Get_size(), c.rank
    k = recv.size
    blocks = [send[j * k:(j + 1) * k] for j in range(n)]
    parts = [blocks[r] if j == r else np.empty_like(recv) for j in range(n)]
    reqs = [c._recv(j, tag, parts[j]) for j in range(n) if j != r]
    reqs += [c._send(j, tag, blocks[j]) for j in range(n) if j != r]
    yield reqs
    _combine(parts, ufunc, recv)


def _gatherv(c: Comm, tag: int, send: memoryview, recv, blocks, root: int):
    r = c.rank
    if r != root:
        yield [c._send(root, tag, send)]
        return
    off, cnt = blocks[r]
    recv[off:off + cnt] = send[:cnt]
    yield [c._recv(j, tag, recv[o:o + k]) for j, (o, k) in enumerate(blocks) if j != r]


def _scatterv(c: Comm, tag: int, send, recv: memoryview, blocks, root: int):
    r = c.rank
    if r != root:
        yield [c._recv(root, tag, recv)]
        return
    off, cnt = blocks[r]
    recv[:cnt] = send[off:off + cnt]
    yield [c._send(j, tag, send[o:o + k]) for j, (o, k) in enumerate(blocks) if j != r]


def _barrier(c: Comm, tag: int):
    n, r = c.Get_size(), c.rank
    if n == 1:
        return
    empty = np.empty(0, dtype=np.uint8)
    if r == 0:
        yield [c._recv(j, tag, np.empty(0, dtype=np.uint8)) for j in range(1, n)]
        yield [c._send(j, tag + 1, empty) for j in range(1, n)]
    else:
        yield [c._send(0, tag, empty)]
        yield [c._recv(0, tag + 1, np.empty(0, dtype=np.uint8))]


def _alltoallv(c: Comm, tag: int, send: memoryview, s_blocks, recv: memoryview, r_blocks):
    r = c.rank
    so, sk = s_blocks[r]
    ro, _ = r_blocks[r]
    recv[ro:ro + sk] = send[so:so + sk]
    reqs = [c._recv(j, tag, recv[o:o + k]) for j, (o, k) in enumerate(r_blocks) if j != r]
    reqs += [c._send(j, tag, send[o:o + k]) for j, (o, k) in enumerate(s_blocks) if j != r]
    yield reqs


# -- rendezvous: the connections of a new world ----------------------------------------------
def connect(store, prefix: str, rank: int, size: int, seconds: float) -> tuple:
    """Meet the other ranks through `store` and connect to each: (world Comm, Transport).

    Every rank listens on a port of the address it reaches the store from and publishes it;
    each connects to the ranks below it and accepts the ranks above it."""
    from .store import _connect

    if not 0 <= rank < size:
        # gloo's check of a context's rank (PyTorch reports it with its source location).
        raise RuntimeError(f"rank < size. {rank} vs {size}" if rank >= 0
                           else f"rank >= 0. {rank} vs 0")
    host, family = "127.0.0.1", socket.AF_INET
    if hasattr(store, "_local_address"):
        host, family = store._local_address(), store._sock.family
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.bind((host, 0))
    listener.listen(max(size, 1))
    store.set(f"{prefix}addr/{rank}", f"{host}:{listener.getsockname()[1]}")
    socks, addresses = {}, {}
    deadline = time.monotonic() + seconds
    try:
        # Every rank's address first: a rank that never comes is the store's timeout error.
        keys = [f"{prefix}addr/{j}" for j in range(size)]
        store.wait(keys, datetime.timedelta(seconds=seconds))
        addresses = dict(enumerate(v.decode() for v in store.multi_get(keys)))
        for j in range(rank):
            address = addresses[j]
            peer_host, port = address.rsplit(":", 1)
            sock = _connect(peer_host, int(port), max(0.1, deadline - time.monotonic()))
            sock.sendall(struct.pack("<q", rank))
            socks[j] = sock
        while len(socks) < size - 1:
            listener.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                raise RuntimeError(f"fusegrad.distributed: rank {rank} timed out after "
                                   f"{seconds:g} s waiting for the other ranks to connect") \
                    from None
            conn.settimeout(None)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            head = _recv_exact(conn, 8)
            peer = struct.unpack("<q", head)[0] if head is not None else -1
            if not rank < peer < size or peer in socks:
                conn.close()     # not one of the ranks this one waits for
                continue
            socks[peer] = conn
    except BaseException:
        for sock in socks.values():
            sock.close()
        raise
    finally:
        listener.close()
    transport = Transport(rank, size, socks, addresses)
    return Comm(transport, list(range(size)), _context("world", prefix)), transport
